//! The one replay-then-live machine: a `Stream` of shared frames for one
//! session that replays the store from a cursor, then follows the live feed
//! with no gap and no duplicate, saying where the replay ended with one
//! `live` frame (at the head too, where nothing was replayed). A subscriber that falls behind the live
//! buffer is caught up from the store; only past the retained history does
//! it get `reset` + `snapshot`. Every stream kind is a view over it: `sse`
//! and `ws` send its frames as they are, `ui` picks one message's AI SDK
//! chunks out of them, `umo` maps them to Umo Editor content-block updates,
//! `ag_ui` to AG-UI events, `mux` carries many sessions' frames on one
//! connection. `cursor` is the grammar every stream resumes by. `index`
//! (the live list of sessions) is not a view over this machine: the
//! session index has a follower of its own (`index.rs`), over the index's
//! change feed rather than a session's frames.

pub mod ag_ui;
pub mod chat_ws;
pub mod compress;
pub mod cursor;
mod expiry;
pub mod index;
pub mod mux;
pub(crate) mod shard;
pub mod sse;
pub mod ui;
pub mod umo;
pub(crate) mod wake;
pub mod ws;

pub use expiry::until_expiry;

/// `s`, holding `guard` (a subscriber slot, a gauge's count) for as long
/// as the stream lives: it is dropped with the stream.
pub fn holding<S, G>(s: S, guard: G) -> impl Stream<Item = S::Item> + Send + 'static
where
    S: Stream + Send + 'static,
    G: Send + 'static,
{
    use futures_util::StreamExt;
    s.map(move |x| {
        let _ = &guard;
        x
    })
}

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use futures_util::{Stream, StreamExt};
use tokio::sync::broadcast;
use tokio_stream::wrappers::{errors::BroadcastStreamRecvError, BroadcastStream};
use tracing::debug;

use crate::frame::{self, Frame, FrameKind, SharedFrame};
use crate::session::{FeedView, Registry, SessionError, Start, Subscription};
use crate::store::{SessionMeta, StoreError, StoredEvent};

/// One chunk of a delta frame, as the views over the frames read it back.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChunkEntry {
    pub message_id: Option<String>,
    pub role: Option<crate::projection::Role>,
    pub chunk: serde_json::Value,
}

/// Where a subscriber wants to start.
#[derive(Debug, Clone, Default)]
pub struct StartAt {
    /// Resume after this cursor; `None` starts with a snapshot.
    pub cursor: Option<u64>,
    /// The epoch the cursor belongs to, if the client knows it.
    pub epoch: Option<String>,
}

/// A step of the machine that waits on something other than the live
/// feed (the actor, the store): boxed, as it is rare.
type Step<T> = Pin<Box<dyn Future<Output = T> + Send>>;

enum Phase {
    Subscribe {
        cursor: Option<u64>,
    },
    Subscribing(Step<Result<Subscription, SessionError>>),
    Replay {
        until: u64,
    },
    Reading {
        until: u64,
        read: Step<Result<Vec<StoredEvent>, StoreError>>,
        started: std::time::Instant,
    },
    Live,
    /// The connection's socket is in a shared writer ([`shard`]): no feed
    /// is held, nothing is sent, until the connection takes it back.
    Parked,
    Done,
}

/// The machine, polled by hand: a live frame is taken from the feed with
/// no future made for it (the feed's own reusable one aside), and the rare
/// steps are boxed futures of their own.
struct Subscriber {
    registry: Registry,
    session: String,
    page: usize,
    epoch: Option<String>,
    rx: Option<BroadcastStream<SharedFrame>>,
    /// The feed `rx` is on, as the shared writers see it.
    view: Option<Arc<FeedView>>,
    last: u64,
    pending: VecDeque<SharedFrame>,
    phase: Phase,
    /// The `live` frame was sent (once per stream: a catch-up after a lag
    /// is the server's business, not a new replay for the client).
    announced: bool,
    /// Shared with the connection, when it may hand its socket to a
    /// shared writer while the stream is live and caught up.
    link: Option<Arc<shard::Link>>,
}

/// The frames of a session from `from`, replayed then live. The stream ends
/// when the session's actor stops for shutdown or the store fails.
pub fn frames(
    registry: Registry,
    session: String,
    from: StartAt,
    replay_page: usize,
) -> impl Stream<Item = SharedFrame> + Send + 'static {
    linked(registry, session, from, replay_page, None)
}

/// [`frames`], with a link its connection may use to hand the socket to a
/// shared writer while the stream is live and caught up ([`shard`]).
pub(crate) fn linked(
    registry: Registry,
    session: String,
    from: StartAt,
    replay_page: usize,
    link: Option<Arc<shard::Link>>,
) -> impl Stream<Item = SharedFrame> + Send + 'static {
    Subscriber {
        registry,
        session,
        page: replay_page,
        epoch: from.epoch,
        rx: None,
        view: None,
        last: 0,
        pending: VecDeque::new(),
        phase: Phase::Subscribe {
            cursor: from.cursor,
        },
        announced: false,
        link,
    }
}

/// The frames of a session after a live feed the caller already holds,
/// positioned at `meta.head` (as [`crate::session::MessageFeed`] gives it):
/// live from there, caught up from the store when it falls behind.
pub fn frames_after(
    registry: Registry,
    session: String,
    rx: broadcast::Receiver<SharedFrame>,
    meta: &SessionMeta,
    replay_page: usize,
) -> impl Stream<Item = SharedFrame> + Send + 'static {
    Subscriber {
        registry,
        session,
        page: replay_page,
        epoch: Some(meta.epoch.clone()),
        rx: Some(BroadcastStream::new(rx)),
        view: None,
        last: meta.head,
        pending: VecDeque::new(),
        phase: Phase::Live,
        announced: false,
        link: None,
    }
}

impl Stream for Subscriber {
    type Item = SharedFrame;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<SharedFrame>> {
        let this = self.get_mut();
        if let Some(link) = &this.link {
            link.busy();
        }
        loop {
            if let Some(f) = this.pending.pop_front() {
                return Poll::Ready(Some(f));
            }
            match &mut this.phase {
                Phase::Done => return Poll::Ready(None),
                Phase::Subscribe { cursor } => {
                    let (registry, session) = (this.registry.clone(), this.session.clone());
                    let (cursor, epoch) = (*cursor, this.epoch.clone());
                    this.phase = Phase::Subscribing(Box::pin(async move {
                        registry.subscribe(&session, cursor, epoch).await
                    }));
                }
                Phase::Subscribing(step) => {
                    let sub = ready!(step.as_mut().poll(cx));
                    this.subscribed(sub);
                }
                Phase::Replay { until } => {
                    let until = *until;
                    if this.last >= until {
                        this.phase = Phase::Live;
                        continue;
                    }
                    let want = this.page.min((until - this.last) as usize);
                    let (store, session) = (this.registry.store().clone(), this.session.clone());
                    let after = this.last;
                    this.phase = Phase::Reading {
                        until,
                        read: Box::pin(async move { store.read(&session, after, want).await }),
                        started: std::time::Instant::now(),
                    };
                }
                Phase::Reading {
                    until,
                    read,
                    started,
                } => {
                    let page = ready!(read.as_mut().poll(cx));
                    metrics::histogram!("projector_replay_read_seconds").record(started.elapsed());
                    let until = *until;
                    this.replayed(page, until);
                }
                Phase::Live if !this.announced => {
                    this.announced = true;
                    return Poll::Ready(Some(Arc::new(frame::live(this.last))));
                }
                Phase::Live => {
                    if this
                        .link
                        .as_ref()
                        .is_some_and(|l| l.socket() != shard::Socket::Own)
                    {
                        // The connection's socket went to a shared writer:
                        // let go of the feed (its wakes are the writer's now).
                        this.rx = None;
                        this.phase = Phase::Parked;
                        continue;
                    }
                    let Some(rx) = this.rx.as_mut() else {
                        this.resubscribe();
                        continue;
                    };
                    // Read before the feed is looked at: found empty, the
                    // subscriber has taken every frame sent before, and a
                    // writer made later knows whether it missed one.
                    let sent = this.link.as_ref().and(this.view.as_ref()).map(|v| v.sent());
                    let Poll::Ready(got) = rx.poll_next_unpin(cx) else {
                        if let (Some(link), Some(view), Some(sent)) = (&this.link, &this.view, sent)
                        {
                            link.idle(this.last, sent, view);
                        }
                        return Poll::Pending;
                    };
                    if let Some(f) = this.received(got) {
                        return Poll::Ready(Some(f));
                    }
                }
                Phase::Parked => {
                    let Some(link) = this.link.as_ref() else {
                        this.resubscribe();
                        continue;
                    };
                    if link.socket() == shard::Socket::InWriter {
                        // Polled by the connection, not woken by a feed.
                        return Poll::Pending;
                    }
                    // Back from the writer: on after what it wrote.
                    this.resumed(link.take_resume());
                }
            }
        }
    }
}

impl Subscriber {
    /// The actor's answer to a subscription: where to start.
    fn subscribed(&mut self, sub: Result<Subscription, SessionError>) {
        let sub = match sub {
            Ok(s) => s,
            Err(SessionError::Stopped) => {
                self.phase = Phase::Done;
                return;
            }
            Err(e) => {
                debug!(error = %e, "subscription failed");
                self.phase = Phase::Done;
                return;
            }
        };
        self.epoch = Some(sub.meta.epoch.clone());
        self.rx = Some(BroadcastStream::new(sub.rx));
        self.view = Some(sub.view);
        match sub.start {
            Start::Resume { after } => {
                self.last = after;
                self.phase = Phase::Replay {
                    until: sub.meta.head,
                };
            }
            Start::Fresh { reset, snapshot } => {
                if let Some(reason) = reset {
                    self.pending.push_back(Arc::new(frame::reset(reason)));
                }
                self.last = snapshot.cursor.unwrap_or(0);
                self.pending.push_back(snapshot);
                self.phase = Phase::Live;
            }
        }
    }

    /// A page of the replay, read from the store, up to `until`.
    fn replayed(&mut self, page: Result<Vec<StoredEvent>, StoreError>, until: u64) {
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                debug!(error = %e, "replay read failed; ending stream");
                self.phase = Phase::Done;
                return;
            }
        };
        if page.first().map(|e| e.cursor) != Some(self.last + 1) {
            // Trimmed while we replayed: let the actor decide
            // (it answers reset + snapshot past retention).
            self.resubscribe();
            return;
        }
        for ev in page {
            self.last = ev.cursor;
            self.pending.push_back(Arc::new(Frame::replayed(
                self.epoch.as_deref().unwrap_or_default(),
                ev.cursor,
                ev.received_ms,
                &ev.frame,
            )));
        }
        self.phase = Phase::Replay { until };
    }

    /// What the live feed gave: the frame to send, if any (a frame already
    /// sent is skipped; a hole, a lag or the feed's end send the machine
    /// back to the actor, to catch up from the store).
    fn received(
        &mut self,
        got: Option<Result<SharedFrame, BroadcastStreamRecvError>>,
    ) -> Option<SharedFrame> {
        match got {
            Some(Ok(f)) if f.kind != FrameKind::Delta => {
                // The session was deleted: reset, then its new snapshot,
                // from which the stream goes on.
                match f.cursor {
                    Some(c) => self.last = c,
                    // A new epoch began; resume by cursor from here on.
                    None => self.epoch = None,
                }
                Some(f)
            }
            Some(Ok(f)) => {
                let c = f.cursor.unwrap_or(0);
                if c <= self.last {
                    return None;
                }
                if c == self.last + 1 {
                    self.last = c;
                    return Some(f);
                }
                // A hole in the feed: catch up from the store.
                self.resubscribe();
                None
            }
            Some(Err(BroadcastStreamRecvError::Lagged(missed))) => {
                metrics::counter!("projector_lag_catchups_total").increment(1);
                debug!(
                    missed,
                    last = self.last,
                    "subscriber lagged; catching up from the store"
                );
                self.resubscribe();
                None
            }
            None => {
                // The actor stopped (shutdown or failure); a new actor
                // picks up if the server is still running.
                self.resubscribe();
                None
            }
        }
    }

    /// The socket back from a shared writer: on after the last frame it
    /// wrote, with the frames it took but did not write as the feed would
    /// have given them, then the feed it gave (or the store).
    fn resumed(&mut self, resume: Option<shard::Resume>) {
        let Some(r) = resume else {
            self.resubscribe();
            return;
        };
        self.last = self.last.max(r.last);
        self.phase = Phase::Live;
        for f in r.frames {
            if let Some(f) = self.received(Some(Ok(f))) {
                self.pending.push_back(f);
            }
            if !matches!(self.phase, Phase::Live) {
                // A hole: caught up from the store.
                return;
            }
        }
        match r.rx {
            Some(rx) => self.rx = Some(BroadcastStream::new(rx)),
            None => self.resubscribe(),
        }
    }

    fn resubscribe(&mut self) {
        self.rx = None;
        self.phase = Phase::Subscribe {
            cursor: Some(self.last),
        };
    }
}

/// One delivery in this many is timed: the histogram is per subscriber
/// work, kept to a counter on the thread for the others.
const DELIVERY_SAMPLE: u32 = 16;

/// Record the time from the frame's making to now as a delivery (a
/// frame handed to a subscriber's connection), for one delivery in
/// `DELIVERY_SAMPLE` (16); nothing for frames that were not live.
pub fn delivered(born: crate::frame::Born) {
    thread_local! {
        static SEEN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let Some(at) = born.0 else { return };
    let n = SEEN.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    if n % DELIVERY_SAMPLE == 1 {
        metrics::histogram!("projector_delivery_seconds").record(at.elapsed());
    }
}
