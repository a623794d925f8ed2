//! WebSocket transport: each frame's JSON as one text message, pings as
//! heartbeats, a close frame (1001) on shutdown. Client messages other than
//! close are ignored: the socket is a read-only feed. Incoming messages are
//! read before every frame sent, so that a client's Close is answered (and
//! ends the sending) even in the middle of a replay.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::sse::SubscriberGauge;

/// Serve JSON messages (a frame's `json`) on an upgraded socket until
/// either side ends.
pub async fn serve(
    socket: WebSocket,
    frames: impl Stream<Item = Bytes> + Send + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) {
    metrics::gauge!("projector_subscribers", "transport" => "ws").increment(1.0);
    let _gauge = SubscriberGauge("ws");
    let (mut sink, mut incoming) = socket.split();
    let mut frames = Box::pin(frames);
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
    let stop = shutdown.cancelled_owned();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => {
                let _ = sink.send(Message::Close(Some(CloseFrame {
                    code: 1001,
                    reason: Utf8Bytes::from_static("server shutting down"),
                }))).await;
                break;
            }
            m = incoming.next() => match m {
                Some(Ok(Message::Close(_))) => {
                    // The socket queued the echo of the client's Close:
                    // flush it, and send nothing more.
                    let _ = sink.close().await;
                    break;
                }
                None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            f = frames.next() => match f {
                Some(f) => {
                    let Ok(text) = Utf8Bytes::try_from(f) else { break };
                    if sink.send(Message::Text(text)).await.is_err() {
                        break;
                    }
                }
                None => {
                    let _ = sink.send(Message::Close(Some(CloseFrame {
                        code: 1001,
                        reason: Utf8Bytes::from_static("stream ended"),
                    }))).await;
                    break;
                }
            },
            _ = ping.tick() => {
                if sink.send(Message::Ping(Bytes::new())).await.is_err() {
                    break;
                }
            }
        }
    }
}
