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
        // The oldest frame of the batch stands for it.
        batch[0].born.delivered();
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
    bytes_response(batches, heartbeat, shutdown)
}

/// An SSE response over events already encoded (several may be in one
/// item): the preamble first, heartbeats when idle.
pub fn bytes_response(
    events: impl Stream<Item = Bytes> + Send + Unpin + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    let body = futures_util::stream::once(async { Ok(Bytes::from_static(PREAMBLE)) }).chain(
        with_heartbeats(events, heartbeat, shutdown, HEARTBEAT)
            .map(Ok::<_, std::convert::Infallible>),
    );
    metrics::gauge!("projector_subscribers", "transport" => "sse").increment(1.0);
    let guard = SubscriberGauge("sse");
    let body = body.map(move |b| {
        let _ = &guard;
        b
    });
    event_stream(body)
}

/// A 200 `text/event-stream` response over `body`, uncached and unbuffered
/// by proxies.
pub(crate) fn event_stream(
    body: impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
) -> Response {
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

/// Interleave heartbeat bytes into `items` every `every` (a single interval
/// timer per connection, not a new timer per item) and end on shutdown.
pub(crate) fn with_heartbeats<S>(
    items: S,
    every: Duration,
    shutdown: CancellationToken,
    beat: &'static [u8],
) -> impl Stream<Item = Bytes> + Send + 'static
where
    S: Stream<Item = Bytes> + Send + Unpin + 'static,
{
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = Box::pin(shutdown.cancelled_owned());
    futures_util::stream::unfold(
        (items, tick, stop),
        move |(mut items, mut tick, mut stop)| async move {
            let item = tokio::select! {
                biased;
                _ = &mut stop => None,
                b = items.next() => b,
                _ = tick.tick() => Some(Bytes::from_static(beat)),
            };
            item.map(|b| (b, (items, tick, stop)))
        },
    )
}

/// Decrements the subscriber gauge when the connection's stream is dropped.
pub(crate) struct SubscriberGauge(pub &'static str);

impl Drop for SubscriberGauge {
    fn drop(&mut self) {
        metrics::gauge!("projector_subscribers", "transport" => self.0).decrement(1.0);
    }
}
