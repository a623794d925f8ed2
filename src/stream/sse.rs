//! Server-Sent Events transport: writes each frame's pre-encoded SSE bytes,
//! coalescing frames that are ready together into one write, with comment
//! heartbeats when idle. Ends on shutdown.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::frame::SharedFrame;

/// Sent first: a comment (so clients see the stream open) and the client's
/// reconnection delay.
const PREAMBLE: &[u8] = b": agent-projector\nretry: 2000\n\n";
const HEARTBEAT: &[u8] = b": keep-alive\n\n";
/// Most frames coalesced into one write.
const COALESCE: usize = 64;

/// An SSE response over a frame stream.
pub fn response(
    frames: impl Stream<Item = SharedFrame> + Send + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    let batches = Box::pin(frames.ready_chunks(COALESCE).map(|batch| {
        if batch.len() == 1 {
            batch[0].sse.clone()
        } else {
            let len = batch.iter().map(|f| f.sse.len()).sum();
            let mut buf = BytesMut::with_capacity(len);
            for f in &batch {
                buf.extend_from_slice(&f.sse);
            }
            buf.freeze()
        }
    }));
    let body = futures_util::stream::once(async { Ok(Bytes::from_static(PREAMBLE)) }).chain(
        futures_util::stream::unfold(
            (batches, shutdown),
            move |(mut batches, shutdown)| async move {
                let item = tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => None,
                    b = batches.next() => b,
                    _ = tokio::time::sleep(heartbeat) => Some(Bytes::from_static(HEARTBEAT)),
                };
                item.map(|b| (Ok::<_, std::convert::Infallible>(b), (batches, shutdown)))
            },
        ),
    );
    metrics::gauge!("projector_subscribers", "transport" => "sse").increment(1.0);
    let guard = SubscriberGauge("sse");
    let body = body.map(move |b| {
        let _ = &guard;
        b
    });
    let mut resp = Response::new(Body::from_stream(body));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// Decrements the subscriber gauge when the connection's stream is dropped.
pub(crate) struct SubscriberGauge(pub &'static str);

impl Drop for SubscriberGauge {
    fn drop(&mut self) {
        metrics::gauge!("projector_subscribers", "transport" => self.0).decrement(1.0);
    }
}
