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
pub mod sse;
pub mod ui;
pub mod umo;
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
use std::sync::Arc;

use futures_util::Stream;
use tokio::sync::broadcast::{self, error::RecvError};
use tracing::debug;

use crate::frame::{self, Frame, FrameKind, SharedFrame};
use crate::session::{Registry, SessionError, Start};
use crate::store::SessionMeta;

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

enum Phase {
    Subscribe { cursor: Option<u64> },
    Replay { until: u64 },
    Live,
    Done,
}

struct Subscriber {
    registry: Registry,
    session: String,
    page: usize,
    epoch: Option<String>,
    rx: Option<broadcast::Receiver<SharedFrame>>,
    last: u64,
    pending: VecDeque<SharedFrame>,
    phase: Phase,
    /// The `live` frame was sent (once per stream: a catch-up after a lag
    /// is the server's business, not a new replay for the client).
    announced: bool,
}

/// The frames of a session from `from`, replayed then live. The stream ends
/// when the session's actor stops for shutdown or the store fails.
pub fn frames(
    registry: Registry,
    session: String,
    from: StartAt,
    replay_page: usize,
) -> impl Stream<Item = SharedFrame> + Send + 'static {
    Subscriber {
        registry,
        session,
        page: replay_page,
        epoch: from.epoch,
        rx: None,
        last: 0,
        pending: VecDeque::new(),
        phase: Phase::Subscribe {
            cursor: from.cursor,
        },
        announced: false,
    }
    .into_stream()
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
        rx: Some(rx),
        last: meta.head,
        pending: VecDeque::new(),
        phase: Phase::Live,
        announced: false,
    }
    .into_stream()
}

impl Subscriber {
    fn into_stream(self) -> impl Stream<Item = SharedFrame> + Send + 'static {
        // Boxed: the state moves into each frame's future and out again.
        futures_util::stream::unfold(Box::new(self), |mut sub| async move {
            let next = sub.next().await?;
            Some((next, sub))
        })
    }

    async fn next(&mut self) -> Option<SharedFrame> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Some(f);
            }
            match self.phase {
                Phase::Done => return None,
                Phase::Subscribe { cursor } => {
                    // Boxed, as the replay read below: the future of
                    // `next` is made anew for every frame, and these rare
                    // steps' futures held inline would make it as large as
                    // they are, copied each time.
                    let subscribing = Box::pin(self.registry.subscribe(
                        &self.session,
                        cursor,
                        self.epoch.clone(),
                    ));
                    let sub = match subscribing.await {
                        Ok(s) => s,
                        Err(SessionError::Stopped) => return None,
                        Err(e) => {
                            debug!(error = %e, "subscription failed");
                            return None;
                        }
                    };
                    self.epoch = Some(sub.meta.epoch.clone());
                    self.rx = Some(sub.rx);
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
                Phase::Replay { until } => {
                    if self.last >= until {
                        self.phase = Phase::Live;
                        continue;
                    }
                    let want = self.page.min((until - self.last) as usize);
                    let reading = std::time::Instant::now();
                    let read =
                        Box::pin(self.registry.store().read(&self.session, self.last, want)).await;
                    metrics::histogram!("projector_replay_read_seconds").record(reading.elapsed());
                    let page = match read {
                        Ok(p) => p,
                        Err(e) => {
                            debug!(error = %e, "replay read failed; ending stream");
                            self.phase = Phase::Done;
                            continue;
                        }
                    };
                    if page.first().map(|e| e.cursor) != Some(self.last + 1) {
                        // Trimmed while we replayed: let the actor decide
                        // (it answers reset + snapshot past retention).
                        self.resubscribe();
                        continue;
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
                }
                Phase::Live if !self.announced => {
                    self.announced = true;
                    return Some(Arc::new(frame::live(self.last)));
                }
                Phase::Live => {
                    let Some(rx) = self.rx.as_mut() else {
                        self.resubscribe();
                        continue;
                    };
                    match rx.recv().await {
                        Ok(f) if f.kind != FrameKind::Delta => {
                            // The session was deleted: reset, then its new
                            // snapshot, from which the stream goes on.
                            match f.cursor {
                                Some(c) => self.last = c,
                                // A new epoch began; resume by cursor from here on.
                                None => self.epoch = None,
                            }
                            return Some(f);
                        }
                        Ok(f) => {
                            let c = f.cursor.unwrap_or(0);
                            if c <= self.last {
                                continue;
                            }
                            if c == self.last + 1 {
                                self.last = c;
                                return Some(f);
                            }
                            // A hole in the feed: catch up from the store.
                            self.resubscribe();
                        }
                        Err(RecvError::Lagged(missed)) => {
                            metrics::counter!("projector_lag_catchups_total").increment(1);
                            debug!(
                                missed,
                                last = self.last,
                                "subscriber lagged; catching up from the store"
                            );
                            self.resubscribe();
                        }
                        Err(RecvError::Closed) => {
                            // The actor stopped (shutdown or failure); a new
                            // actor picks up if the server is still running.
                            self.resubscribe();
                        }
                    }
                }
            }
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
