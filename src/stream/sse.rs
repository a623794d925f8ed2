//! Server-Sent Events transport: writes each frame's pre-encoded SSE bytes,
//! coalescing frames that are ready together into one write, with comment
//! heartbeats when idle. Ends on shutdown.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::frame::SharedFrame;

/// Sent first: a comment (so clients see the stream open) and the client's
/// reconnection delay.
const PREAMBLE: &[u8] = b": agent-projector\nretry: 2000\n\n";
const HEARTBEAT: &[u8] = b": keep-alive\n\n";
/// Most frames coalesced into one write (here and by `serve::events`).
pub(crate) const COALESCE: usize = 64;

/// An SSE response over a frame stream: each frame's shared SSE bytes as
/// they are. Whoever writes the response puts the frames that are ready
/// together into one write (`serve::events` itself, the body the layers
/// read through `Coalesce`).
pub fn response(
    frames: impl Stream<Item = SharedFrame> + Send + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    framed(frames, None, heartbeat, shutdown)
}

/// [`response`] over a linked subscriber's frames: a connection served by
/// `serve::events` may hand its socket to the session's shared writers
/// while the stream is live and caught up (see [`super::shard`]).
pub(crate) fn shared_response(
    frames: impl Stream<Item = SharedFrame> + Send + 'static,
    shared: super::shard::Shardable,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    framed(frames, Some(shared), heartbeat, shutdown)
}

fn framed(
    frames: impl Stream<Item = SharedFrame> + Send + 'static,
    shared: Option<super::shard::Shardable>,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    let bytes = Box::pin(frames).map(|f| {
        super::delivered(f.born);
        f.sse.clone()
    });
    let link = shared.as_ref().map(|s| s.link.clone());
    let mut resp = with_preamble(bytes, heartbeat, shutdown, link);
    if let Some(shared) = shared {
        resp.extensions_mut().insert(shared);
    }
    resp
}

/// The chunks of a body that are ready now (up to [`COALESCE`]) as one
/// item: a lone chunk as it is (shared, not copied), several copied into
/// one buffer, so the layers (compression, hyper) see one write.
struct Coalesce {
    chunks: DirectStream,
    /// The chunks ended (or failed) while a batch was taken: what was
    /// taken goes first, then this.
    last: Option<Option<Result<Bytes, axum::BoxError>>>,
}

impl Stream for Coalesce {
    type Item = Result<Bytes, axum::BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(last) = self.last.take() {
            // Ended: stays ended (the inner stream is never polled again).
            self.last = Some(None);
            return Poll::Ready(last);
        }
        let first = match ready!(self.chunks.as_mut().poll_next(cx)) {
            Some(Ok(b)) => b,
            other => {
                self.last = Some(None);
                return Poll::Ready(other);
            }
        };
        let mut buf: Option<BytesMut> = None;
        for _ in 1..COALESCE {
            match self.chunks.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(b))) => buf
                    .get_or_insert_with(|| {
                        let mut buf = BytesMut::with_capacity(first.len() * 4);
                        buf.extend_from_slice(&first);
                        buf
                    })
                    .extend_from_slice(&b),
                Poll::Ready(other) => {
                    self.last = Some(other);
                    break;
                }
                Poll::Pending => break,
            }
        }
        Poll::Ready(Some(Ok(match buf {
            Some(b) => b.freeze(),
            None => first,
        })))
    }
}

/// An SSE response over events already encoded (several may be in one
/// item): the preamble first, heartbeats when idle.
pub fn bytes_response(
    events: impl Stream<Item = Bytes> + Send + Unpin + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    with_preamble(events, heartbeat, shutdown, None)
}

fn with_preamble(
    events: impl Stream<Item = Bytes> + Send + Unpin + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
    link: Option<Arc<super::shard::Link>>,
) -> Response {
    let mut beats = Heartbeats::new(events, heartbeat, shutdown, HEARTBEAT);
    beats.link = link;
    let body = futures_util::stream::once(async { Bytes::from_static(PREAMBLE) }).chain(beats);
    metrics::gauge!("projector_subscribers", "transport" => "sse").increment(1.0);
    event_stream(super::holding(body, SubscriberGauge("sse")))
}

/// A 200 `text/event-stream` response over `body`, uncached and unbuffered
/// by proxies.
pub(crate) fn event_stream(body: impl Stream<Item = Bytes> + Send + 'static) -> Response {
    offered(Box::pin(body.map(Ok)), "text/event-stream")
}

/// A 200 response of `content_type` streamed from `body` as it comes,
/// uncached and unbuffered by proxies.
pub(crate) fn streamed<E: Into<axum::BoxError>>(
    body: impl Stream<Item = Result<Bytes, E>> + Send + 'static,
    content_type: &'static str,
) -> Response {
    offered(Box::pin(body.map(|r| r.map_err(Into::into))), content_type)
}

/// The response over `body`, the stream also offered as a [`Direct`]
/// extension, for the server that writes it itself.
fn offered(body: DirectStream, content_type: &'static str) -> Response {
    let slot = Direct(Arc::new(Mutex::new(Some(body))));
    let taken = slot.clone();
    // The layers' body takes the stream at its first poll, if it is
    // still there.
    let lazy = futures_util::stream::once(async move { taken.take() })
        .filter_map(std::future::ready)
        .flat_map(|chunks| Coalesce { chunks, last: None });
    let mut resp = Response::new(Body::from_stream(lazy));
    resp.extensions_mut().insert(slot);
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// A streamed response's bytes, as a response extension. The event-stream
/// server (`serve::events`) takes them from here when the layers left the
/// body as it was (no `content-encoding`) and writes them itself: each
/// write then skips the layers' body wrappers (a trace span entered per
/// poll, an error map per layer, the compression body), which cost more
/// than the frame's own delivery. Left here, the body the layers wrap
/// takes them at its first poll, so hyper and the gzip middleware read
/// them as any body.
#[derive(Clone)]
pub(crate) struct Direct(Arc<Mutex<Option<DirectStream>>>);

/// The bytes of a streamed response.
pub(crate) type DirectStream =
    Pin<Box<dyn Stream<Item = Result<Bytes, axum::BoxError>> + Send + 'static>>;

impl Direct {
    /// The stream, if nobody took it yet.
    pub(crate) fn take(&self) -> Option<DirectStream> {
        self.0.lock().ok()?.take()
    }
}

/// Interleave heartbeat bytes into `items` once the stream has been idle
/// for `every` (a single timer per connection, not a new timer per item),
/// and end on shutdown. A stream that wrote within the period sends no
/// heartbeat: its next one moves to `every` after that write, so a busy
/// stream writes nothing but its frames, and ten thousand busy streams do
/// not add a wave of heartbeat writes every period.
pub(crate) fn with_heartbeats<S>(
    items: S,
    every: Duration,
    shutdown: CancellationToken,
    beat: &'static [u8],
) -> impl Stream<Item = Bytes> + Send + 'static
where
    S: Stream<Item = Bytes> + Send + Unpin + 'static,
{
    Heartbeats::new(items, every, shutdown, beat)
}

impl<S> Heartbeats<S> {
    fn new(items: S, every: Duration, shutdown: CancellationToken, beat: &'static [u8]) -> Self {
        Heartbeats {
            items,
            every,
            tick: Box::pin(tokio::time::sleep(every)),
            // A child token of the connection's own: a token shared by every
            // stream would make its waiter list one lock.
            stop: Box::pin(shutdown.child_token().cancelled_owned()),
            wrote: None,
            beat,
            ended: false,
            rare: super::wake::WakeFlag::new(),
            link: None,
        }
    }
}

/// [`with_heartbeats`]' stream. The timer and the shutdown token are
/// looked at (each a lock or a timer-wheel visit) only when one of them
/// woke the task, so a frame goes out without touching either, and a
/// stream whose items are always ready still ends as soon as the token is
/// cancelled.
struct Heartbeats<S> {
    items: S,
    every: Duration,
    tick: Pin<Box<tokio::time::Sleep>>,
    stop: Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    /// When the stream last wrote an item, if it did since the timer was set.
    wrote: Option<Instant>,
    beat: &'static [u8],
    ended: bool,
    /// The timer and the token are polled with this waker, and again only
    /// once one of them used it.
    rare: super::wake::WakeFlag,
    /// The subscriber's link: frames a shared writer wrote count as
    /// writes of the stream.
    link: Option<Arc<super::shard::Link>>,
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for Heartbeats<S> {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        this.rare.register(cx);
        if let Poll::Ready(rare) = this.poll_rare() {
            return Poll::Ready(rare);
        }
        let item = ready!(this.items.poll_next_unpin(cx));
        match item {
            Some(_) => this.wrote = Some(Instant::now()),
            None => this.ended = true,
        }
        Poll::Ready(item)
    }
}

impl<S> Heartbeats<S> {
    /// The shutdown token, then the timer, if either woke the task since
    /// they were last looked at: the end, a heartbeat, or pending.
    fn poll_rare(&mut self) -> Poll<Option<Bytes>> {
        if !self.rare.take() {
            return Poll::Pending;
        }
        let mut rare = self.rare.context();
        if self.stop.as_mut().poll(&mut rare).is_ready() {
            self.ended = true;
            return Poll::Ready(None);
        }
        while self.tick.as_mut().poll(&mut rare).is_ready() {
            if let Some(at) = self.link.as_ref().and_then(|l| l.take_wrote()) {
                self.wrote = Some(self.wrote.map_or(at, |w| w.max(at)));
            }
            let next = match self.wrote.take() {
                Some(at) if at + self.every > Instant::now() => at + self.every,
                _ => {
                    let at = Instant::now() + self.every;
                    self.tick.as_mut().reset(at);
                    // The timer, set anew, is looked at (and learns the
                    // waker) at the next poll.
                    self.rare.raise();
                    return Poll::Ready(Some(Bytes::from_static(self.beat)));
                }
            };
            self.tick.as_mut().reset(next);
        }
        Poll::Pending
    }
}

/// Decrements the subscriber gauge when the connection's stream is dropped.
pub(crate) struct SubscriberGauge(pub &'static str);

impl Drop for SubscriberGauge {
    fn drop(&mut self) {
        metrics::gauge!("projector_subscribers", "transport" => self.0).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::StreamExt;

    use super::*;
    use crate::frame;

    fn frames(n: usize) -> Vec<SharedFrame> {
        (0..n)
            .map(|k| Arc::new(frame::reset(&format!("r{k}"))))
            .collect()
    }

    fn chunks(fs: &[SharedFrame]) -> Vec<Result<Bytes, axum::BoxError>> {
        fs.iter().map(|f| Ok(f.sse.clone())).collect()
    }

    #[tokio::test]
    async fn ready_chunks_go_out_as_one_write_and_a_lone_one_is_shared() {
        let fs = frames(3);
        let expected: Vec<u8> = fs.iter().flat_map(|f| f.sse.to_vec()).collect();
        // `unfold`, like the subscriber's stream, panics if polled after its end.
        let src = futures_util::stream::unfold(chunks(&fs).into_iter(), |mut it| async move {
            it.next().map(|f| (f, it))
        });
        let mut c = Coalesce {
            chunks: Box::pin(src),
            last: None,
        };
        assert_eq!(c.next().await.unwrap().unwrap(), expected);
        assert!(c.next().await.is_none());
        assert!(c.next().await.is_none());

        let lone = frames(1);
        let mut c = Coalesce {
            chunks: Box::pin(
                futures_util::stream::iter(chunks(&lone)).chain(futures_util::stream::pending()),
            ),
            last: None,
        };
        let b = c.next().await.unwrap().unwrap();
        assert_eq!(b.as_ptr(), lone[0].sse.as_ptr(), "no copy of a lone chunk");
    }

    /// A body that fails after some chunks gives those chunks, then the
    /// error, then ends.
    #[tokio::test]
    async fn a_failure_comes_after_the_chunks_before_it() {
        let fs = frames(2);
        let mut items = chunks(&fs);
        items.push(Err("cut".into()));
        let mut c = Coalesce {
            chunks: Box::pin(futures_util::stream::iter(items)),
            last: None,
        };
        let expected: Vec<u8> = fs.iter().flat_map(|f| f.sse.to_vec()).collect();
        assert_eq!(c.next().await.unwrap().unwrap(), expected);
        assert!(c.next().await.unwrap().is_err());
        assert!(c.next().await.is_none());
    }

    /// A stream that writes more often than the heartbeat period sends no
    /// heartbeat; once idle, its first heartbeat comes one period after its
    /// last write, then one per period.
    #[tokio::test(start_paused = true)]
    async fn heartbeats_go_out_only_once_the_stream_is_idle_for_a_period() {
        let every = Duration::from_secs(15);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
        let items = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
        let t0 = Instant::now();
        let mut s = Box::pin(with_heartbeats(
            items,
            every,
            CancellationToken::new(),
            b":hb\n\n",
        ));
        let seen = tokio::spawn(async move {
            let mut out = Vec::new();
            while out.len() < 8 {
                let b = s.next().await.unwrap();
                let at = (Instant::now() - t0).as_secs();
                out.push((at, String::from_utf8(b.to_vec()).unwrap()));
            }
            out
        });
        for k in 1..=6u64 {
            tokio::time::sleep_until(t0 + Duration::from_secs(10 * k)).await;
            tx.send(Bytes::from(format!("f{k}"))).unwrap();
        }
        let hb = ":hb\n\n".to_string();
        let mut want: Vec<(u64, String)> = (1..=6).map(|k| (10 * k, format!("f{k}"))).collect();
        want.extend([(75, hb.clone()), (90, hb)]);
        assert_eq!(seen.await.unwrap(), want);
        drop(tx);
    }

    /// Frames a shared writer wrote count as writes of the stream: a
    /// stream whose writer wrote 10 s in sends its first heartbeat one
    /// period after that, not at the first period's end.
    #[tokio::test(start_paused = true)]
    async fn a_shared_writers_writes_put_the_heartbeat_off() {
        let every = Duration::from_secs(15);
        let link = crate::stream::shard::Link::new();
        let t0 = Instant::now();
        let mut beats = Heartbeats::new(
            futures_util::stream::pending::<Bytes>(),
            every,
            CancellationToken::new(),
            b":hb\n\n",
        );
        beats.link = Some(link.clone());
        let mut s = Box::pin(beats);
        let first = tokio::spawn(async move {
            let b = s.next().await.unwrap();
            (Instant::now() - t0, b)
        });
        tokio::time::sleep_until(t0 + Duration::from_secs(10)).await;
        link.note_wrote(Instant::now());
        let (at, beat) = first.await.unwrap();
        assert_eq!((at, &beat[..]), (Duration::from_secs(25), &b":hb\n\n"[..]));
    }

    /// A stream whose items are always ready still ends on shutdown, at the
    /// next poll: the token's wake says it is to be looked at.
    #[tokio::test]
    async fn a_stream_that_never_idles_still_ends_on_shutdown() {
        let stop = CancellationToken::new();
        let items = futures_util::stream::repeat(Bytes::from_static(b"f"));
        let mut s = Box::pin(with_heartbeats(
            items,
            Duration::from_secs(15),
            stop.clone(),
            b":hb\n\n",
        ));
        assert_eq!(s.next().await.unwrap(), "f");
        stop.cancel();
        let rest = s.collect::<Vec<_>>().await;
        assert!(rest.is_empty(), "{} items after shutdown", rest.len());
    }
}
