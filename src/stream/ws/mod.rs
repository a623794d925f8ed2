//! WebSocket transport: each frame's JSON as one text message (the frames
//! ready together written together), pings as heartbeats, a close frame
//! (1001) on shutdown. Client messages other than
//! close are ignored: the socket is a read-only feed. Incoming messages are
//! read before every frame sent, so that a client's Close is answered (and
//! ends the sending) even in the middle of a replay. With
//! `permessage-deflate` agreed, messages go out deflated, with the socket's
//! own context or as the frame's shared bytes (see `deflate`).

pub mod deflate;
pub mod inflate_io;

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use self::inflate_io::WsIo;
use super::sse::SubscriberGauge;
use crate::frame::SharedFrame;

/// Most messages written together (one write when the socket's buffer
/// holds them: see `WRITE_BUFFER`).
const COALESCE: usize = 64;

/// Bytes of messages gathered before tungstenite writes them out; a burst
/// of small frames goes out in one write, and an idle socket holds no more
/// than its largest message.
pub const WRITE_BUFFER: usize = 16 * 1024;

/// An upgraded connection's WebSocket.
pub type Socket = WebSocketStream<WsIo<TokioIo<hyper::upgrade::Upgraded>>>;

/// A socket, and its deflater when `permessage-deflate` was agreed.
pub struct Conn {
    pub socket: Socket,
    pub deflater: Option<Box<deflate::Deflater>>,
}

/// What goes out as one text message: JSON, and its deflated form.
pub trait WsText: Send + 'static {
    /// The message's JSON.
    fn json(&self) -> &Bytes;
    /// The JSON deflated with no context (the shared bytes), `None` when
    /// deflating does not make it smaller.
    fn deflated(&self) -> Option<Bytes> {
        deflate::single(self.json())
    }
}

impl WsText for Bytes {
    fn json(&self) -> &Bytes {
        self
    }
}

impl WsText for SharedFrame {
    fn json(&self) -> &Bytes {
        &self.json
    }

    /// Deflated once, on its first compressed socket, and shared.
    fn deflated(&self) -> Option<Bytes> {
        self.ws_deflated(deflate::shared)
    }
}

/// The message for `t`: deflated when the socket agreed to it and that
/// makes it smaller (see `deflate`), as it is otherwise.
pub fn message(t: &impl WsText, deflater: &mut Option<Box<deflate::Deflater>>) -> Message {
    if let Some(d) = deflater {
        if let deflate::Deflated::Compressed(z) = d.message(t.json(), || t.deflated()) {
            let mut f = Frame::message(z, OpCode::Data(Data::Text), true);
            f.header_mut().rsv1 = true;
            return Message::Frame(f);
        }
    }
    // Every JSON here is UTF-8 by construction.
    Message::Text(
        Utf8Bytes::try_from(t.json().clone()).unwrap_or_else(|_| Utf8Bytes::from_static("{}")),
    )
}

/// A heartbeat on a socket: a ping, and a quiet socket's deflate context
/// given up.
pub fn heartbeat_ping(deflater: &mut Option<Box<deflate::Deflater>>) -> Message {
    if let Some(d) = deflater {
        d.heartbeat();
    }
    Message::Ping(Bytes::new())
}

/// Whether the frames went on after [`write_ready`].
pub enum Ready {
    /// None left ready for now.
    More,
    /// The stream of frames ended.
    Ended,
}

/// Write `first` and every frame `frames` has ready with it (up to
/// `COALESCE`) in one write: each is fed to the sink (which gathers them up
/// to `WRITE_BUFFER`), then the sink is flushed once. `to_message` makes a
/// frame's message (`None`: nothing to send for it). `Err` when the socket
/// failed.
pub async fn write_ready<S: Stream + Unpin, W: Sink<Message> + Unpin>(
    sink: &mut W,
    first: S::Item,
    frames: &mut S,
    mut to_message: impl FnMut(S::Item) -> Option<Message>,
) -> Result<Ready, ()> {
    let mut ready = Ready::More;
    let mut f = first;
    for n in 1..=COALESCE {
        if let Some(m) = to_message(f) {
            sink.feed(m).await.map_err(|_| ())?;
        }
        if n == COALESCE {
            break;
        }
        match poll_fn(|cx| Poll::Ready(frames.poll_next_unpin(cx))).await {
            Poll::Ready(Some(next)) => f = next,
            Poll::Ready(None) => {
                ready = Ready::Ended;
                break;
            }
            Poll::Pending => break,
        }
    }
    sink.flush().await.map_err(|_| ())?;
    Ok(ready)
}

/// A close frame with `code` and a static reason.
pub fn close(code: u16, reason: &'static str) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: Utf8Bytes::from_static(reason),
    }))
}

/// Serve text messages (a frame's `json`) on an upgraded socket until
/// either side ends.
pub async fn serve<T: WsText>(
    conn: Conn,
    frames: impl Stream<Item = T> + Send + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) {
    metrics::gauge!("projector_subscribers", "transport" => "ws").increment(1.0);
    let _gauge = SubscriberGauge("ws");
    let mut deflater = conn.deflater;
    let (mut sink, mut incoming) = conn.socket.split();
    let mut frames = Box::pin(frames);
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
    let stop = shutdown.cancelled_owned();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => {
                let _ = sink.send(close(1001, "server shutting down")).await;
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
            f = frames.next() => {
                let ended = match f {
                    Some(f) => {
                        let written = write_ready(&mut sink, f, &mut frames, |f| {
                            Some(message(&f, &mut deflater))
                        });
                        match written.await {
                            Ok(ready) => matches!(ready, Ready::Ended),
                            Err(()) => break,
                        }
                    }
                    None => true,
                };
                if ended {
                    let _ = sink.send(close(1001, "stream ended")).await;
                    break;
                }
            }
            _ = ping.tick() => {
                if sink.send(heartbeat_ping(&mut deflater)).await.is_err() {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "inflate_io_tests.rs"]
mod inflate_io_tests;

#[cfg(test)]
#[path = "write_ready_tests.rs"]
mod write_ready_tests;
