//! The live session index as a stream (`GET /v1/sessions/stream`): a
//! snapshot of the sessions the caller may see, or the changes after its
//! cursor while the node still holds them, then each change as it happens;
//! `reset` + a fresh snapshot when its cursor cannot be resumed or it falls
//! behind the live buffer. Changes of sessions the caller may not see are
//! left out.

use std::collections::VecDeque;
use std::sync::Arc;

use futures_util::Stream;
use tokio::sync::broadcast::{self, error::RecvError};
use tracing::debug;

use crate::session::index::{IndexEvent, IndexStart, SessionEntry};
use crate::session::Registry;
use crate::store::StoreError;

/// Whether the caller may see a session.
pub type Sees = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Sessions read per page while building a snapshot.
const PAGE: usize = 1000;

struct Follower {
    registry: Registry,
    sees: Sees,
    max: usize,
    /// Resume after this `(epoch, cursor)` when (re)subscribing.
    after: Option<(Option<String>, u64)>,
    rx: Option<broadcast::Receiver<Arc<IndexEvent>>>,
    last: u64,
    pending: VecDeque<Arc<IndexEvent>>,
    done: bool,
    /// Start again from a snapshot after a `reset` with this reason.
    fresh: Option<&'static str>,
}

/// The index events for a caller who sees what `sees` allows, from `after`
/// (`(epoch, cursor)` of an earlier connection) or from a snapshot of at
/// most `max` sessions.
pub fn events(
    registry: Registry,
    after: Option<(Option<String>, u64)>,
    sees: Sees,
    max: usize,
) -> impl Stream<Item = Arc<IndexEvent>> + Send + 'static {
    let f = Follower {
        registry,
        sees,
        max,
        after,
        rx: None,
        last: 0,
        pending: VecDeque::new(),
        done: false,
        fresh: None,
    };
    futures_util::stream::unfold(f, |mut f| async move {
        let next = f.next().await?;
        Some((next, f))
    })
}

impl Follower {
    async fn next(&mut self) -> Option<Arc<IndexEvent>> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                if ev.resync {
                    self.pending.clear();
                    self.rx = None;
                    self.fresh = Some("cursor_expired");
                    continue;
                }
                if ev.session().is_none_or(|s| (self.sees)(s)) {
                    return Some(ev);
                }
                continue;
            }
            if self.done {
                return None;
            }
            let Some(rx) = self.rx.as_mut() else {
                self.start().await;
                continue;
            };
            match rx.recv().await {
                Ok(ev) if ev.resync => {
                    self.rx = None;
                    self.fresh = Some("cursor_expired");
                }
                Ok(ev) => {
                    let c = ev.cursor.unwrap_or(0);
                    if c > self.last {
                        self.last = c;
                        self.pending.push_back(ev);
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    debug!(missed, "index follower lagged");
                    self.rx = None;
                    let epoch = self.registry.index().epoch().to_string();
                    self.after = Some((Some(epoch), self.last));
                }
                Err(RecvError::Closed) => self.done = true,
            }
        }
    }

    /// Subscribe, and queue what comes before the live changes.
    async fn start(&mut self) {
        let index = self.registry.index();
        let follow = match self.fresh.take() {
            Some(reason) => index.follow_fresh(reason),
            None => index.follow(self.after.as_ref().map(|(e, c)| (e.as_deref(), *c))),
        };
        self.rx = Some(follow.rx);
        match follow.start {
            IndexStart::Replay(evs) => {
                self.last = evs
                    .last()
                    .and_then(|e| e.cursor)
                    .or(self.after.as_ref().map(|a| a.1))
                    .unwrap_or(0);
                self.pending.extend(evs);
            }
            IndexStart::Fresh { reset, cursor } => {
                if let Some(reason) = reset {
                    self.pending.push_back(Arc::new(IndexEvent::reset(reason)));
                }
                self.last = cursor;
                match snapshot(&self.registry, cursor, &self.sees, self.max).await {
                    Ok(ev) => self.pending.push_back(Arc::new(ev)),
                    Err(e) => {
                        debug!(error = %e, "index snapshot failed; ending stream");
                        self.done = true;
                    }
                }
            }
        }
    }
}

/// Every session with events the caller may see, the most recently updated
/// first, at most `max`, as of index cursor `cursor`.
async fn snapshot(
    registry: &Registry,
    cursor: u64,
    sees: &Sees,
    max: usize,
) -> Result<IndexEvent, StoreError> {
    let mut found = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = registry.store().list(after.as_deref(), PAGE).await?;
        let n = page.len();
        for (id, m) in page {
            if m.head > m.base && sees(&id) {
                found.push((m.updated_ms, SessionEntry::of(&id, &m)));
            }
            after = Some(id);
        }
        if n < PAGE {
            break;
        }
    }
    found.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.session_id.cmp(&b.1.session_id))
    });
    found.truncate(max);
    let sessions: Vec<SessionEntry> = found.into_iter().map(|(_, e)| e).collect();
    let epoch = registry.index().epoch();
    let json = serde_json::to_vec(&serde_json::json!({
        "type": "snapshot",
        "cursor": cursor,
        "epoch": epoch,
        "sessions": sessions,
    }))
    .expect("snapshots serialise");
    Ok(IndexEvent::encode("snapshot", epoch, Some(cursor), &json))
}
