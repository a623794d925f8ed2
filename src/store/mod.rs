//! The per-session event log: the [`EventLog`] trait every backend
//! implements (append a batch durably, read a range, head, epoch, dedupe
//! lookup, checkpoints, retention, tombstones, listing), and the backends:
//! [`memory`], [`embedded`] (redb with group commit) and [`redis`] (shared by
//! the nodes of a cluster).

pub(crate) mod codec;
#[cfg(test)]
pub(crate) mod contract;
pub mod embedded;
pub mod memory;
pub mod redis;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// One accepted event as stored: its cursor, id, normalised fact (JSON) and
/// the exact delta frame (JSON) it produced, so replay needs no reducer.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub cursor: u64,
    pub event_id: String,
    /// Wall-clock milliseconds when the server accepted the event (retention by age).
    pub received_ms: u64,
    pub fact: Bytes,
    pub frame: Bytes,
}

/// A projection checkpoint: the serialised projection after `cursor`.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub cursor: u64,
    pub state: Bytes,
}

/// Where a session's log stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// Changes whenever the log is recreated (first use, deletion); cursors
    /// of another epoch are void.
    pub epoch: String,
    /// Cursor of the last appended event (0 when none). Cursors continue
    /// across a deletion, so a stale client's cursor falls before `first`.
    pub head: u64,
    /// First cursor still retained (`head + 1` when nothing is retained).
    pub first: u64,
    /// The last cursor of the incarnations this one replaced (0 when the
    /// log was never deleted): a cursor at or below it belongs to a deleted
    /// log, and resumes as `reset` (`session_deleted`) + `snapshot`.
    #[serde(default)]
    pub base: u64,
    /// What the session list shows of the session, as of the last append:
    /// opaque text to the store (the JSON of [`crate::session::Listing`];
    /// a bare runtime status word in logs written before listings).
    #[serde(rename = "status", default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<String>,
    /// Wall-clock milliseconds of the last append, or of the session's
    /// opening while nothing was appended (its idle age for the sweep).
    #[serde(default)]
    pub updated_ms: u64,
    /// A tombstone: the session was deleted; its log is gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl SessionMeta {
    /// A fresh, empty log, opened now.
    pub fn new_epoch() -> Self {
        SessionMeta {
            epoch: new_epoch_id(),
            head: 0,
            first: 1,
            base: 0,
            listing: None,
            updated_ms: now_ms(),
            deleted: false,
        }
    }

    /// The tombstone that replaces this session on deletion: a new epoch,
    /// the same head, nothing retained.
    pub fn tombstone(&self, now_ms: u64) -> Self {
        SessionMeta {
            epoch: new_epoch_id(),
            head: self.head,
            first: self.head + 1,
            base: self.head,
            listing: None,
            updated_ms: now_ms,
            deleted: true,
        }
    }

    /// The meta after appending `batch` (cursors already checked).
    pub fn appended(&self, batch: &AppendBatch) -> Self {
        let mut m = self.clone();
        if let Some(last) = batch.events.last() {
            // Until the first append, `updated_ms` is the opening time.
            let since = if self.head == 0 { 0 } else { m.updated_ms };
            m.head = last.cursor;
            m.updated_ms = since.max(last.received_ms);
        }
        if batch.listing.is_some() {
            m.listing = batch.listing.clone();
        }
        m.deleted = false;
        m
    }
}

fn new_epoch_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_string()
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One atomic append: events with consecutive cursors after the head, and
/// optionally a checkpoint taken after the last of them.
#[derive(Debug, Clone)]
pub struct AppendBatch {
    /// The epoch the events continue. A shared store refuses the batch
    /// (`Conflict`) when the session has another epoch by now.
    pub epoch: String,
    pub events: Vec<StoredEvent>,
    pub checkpoint: Option<Checkpoint>,
    /// The session list's view of the session after this batch (see
    /// [`SessionMeta::listing`]); `None` keeps the previous one.
    pub listing: Option<String>,
    /// This writer was refused several times in a row: a shared store gives
    /// it the next turn (other writers wait until it has appended).
    pub claim: bool,
}

/// Check that a batch continues the log: cursors `head + 1 ..` in order.
pub fn check_cursors(
    session: &str,
    meta: &SessionMeta,
    batch: &AppendBatch,
) -> Result<(), StoreError> {
    for (expected, e) in (meta.head + 1..).zip(&batch.events) {
        if e.cursor != expected {
            return Err(StoreError::Conflict {
                session: session.to_string(),
                expected,
                got: e.cursor,
            });
        }
    }
    Ok(())
}

/// A store failure. Ingest answers 503; reads answer 503 too.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cursor conflict in session {session}: expected {expected}, got {got}")]
    Conflict {
        session: String,
        expected: u64,
        got: u64,
    },
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The backend could not be reached, or failed; with its own error.
    #[error("store unavailable: {what}")]
    Backend {
        what: &'static str,
        #[source]
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },
    #[error("embedded store at {path}: {source}")]
    Embedded {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("corrupt record in session {session}: {detail}")]
    Corrupt { session: String, detail: String },
    #[error("store is full: {0}")]
    Full(String),
}

/// What a session actor needs to catch up with a shared log: where the log
/// stands, the events after the actor's head, and the cursors of the ids it
/// is about to append, read together.
#[derive(Debug, Clone)]
pub struct Tail {
    pub meta: SessionMeta,
    pub events: Vec<StoredEvent>,
    pub known: Vec<Option<u64>>,
}

impl StoreError {
    /// A backend failure `what` (`"redis"`, ...) caused by `e`.
    pub fn backend(what: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Backend {
            what,
            source: std::sync::Arc::new(e),
        }
    }

    /// The same error again, for each caller of a shared failure.
    pub fn again(&self) -> StoreError {
        match self {
            StoreError::Conflict {
                session,
                expected,
                got,
            } => StoreError::Conflict {
                session: session.clone(),
                expected: *expected,
                got: *got,
            },
            StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
            StoreError::Backend { what, source } => StoreError::Backend {
                what,
                source: source.clone(),
            },
            StoreError::Corrupt { session, detail } => StoreError::Corrupt {
                session: session.clone(),
                detail: detail.clone(),
            },
            StoreError::Full(m) => StoreError::Full(m.clone()),
            e @ StoreError::Embedded { .. } => StoreError::Unavailable(e.to_string()),
        }
    }
}

/// What a shared store tells every node's session index about a change
/// another node made (see [`EventLog::index_notes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexNote {
    /// A session's first append of an incarnation.
    Created(String),
    Updated(String),
    Deleted(String),
    /// Notes may have been lost (the node was disconnected): what the
    /// index says may be stale.
    Resync,
}

/// News of a session from a shared store: a wake-up, and where the log
/// was announced to stand (epoch and head), so that a node need not read
/// the log after its own appends.
#[derive(Debug, Default)]
pub struct News {
    wake: tokio::sync::Notify,
    /// The last announced `(epoch, head)`; `None`: unknown (news may have
    /// been lost), read the log.
    latest: std::sync::Mutex<Option<(String, u64)>>,
    /// This node has been cut off from the other nodes' news for a while.
    cut_off: std::sync::atomic::AtomicBool,
}

impl News {
    /// The log now stands at `head` of `epoch`.
    pub fn announce(&self, epoch: &str, head: u64) {
        let mut l = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *l {
            Some((e, h)) if e == epoch => *h = (*h).max(head),
            other => *other = Some((epoch.to_string(), head)),
        }
        drop(l);
        self.wake.notify_one();
    }

    /// Something may have happened that was not announced.
    pub fn unknown(&self) {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.wake.notify_one();
    }

    /// This node cannot hear the other nodes (its connection to the shared
    /// store has been down too long): the session's subscribers here
    /// should resume elsewhere.
    pub fn cut_off(&self) {
        self.cut_off
            .store(true, std::sync::atomic::Ordering::Release);
        self.unknown();
    }

    /// Whether [`Self::cut_off`] was said since the last time this asked.
    pub fn take_cut_off(&self) -> bool {
        self.cut_off
            .swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    /// Wait for the next news.
    pub async fn wait(&self) {
        self.wake.notified().await
    }

    /// True unless the news says the log is still at (or behind) this
    /// position: then there is nothing to read.
    pub fn beyond(&self, epoch: &str, head: u64) -> bool {
        match &*self.latest.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((e, h)) => e != epoch || *h > head,
            None => true,
        }
    }
}

/// The per-session log. Implementations must be safe for concurrent use by
/// many sessions. In a single-node store one session is only ever written by
/// its own actor; in a [shared](EventLog::shared) one, actors on several
/// nodes append to one session and the store orders them (an append that
/// does not continue the head and epoch is refused with `Conflict`).
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// The session's meta; creates an empty log with a new epoch if unknown.
    async fn open(&self, session: &str) -> Result<SessionMeta, StoreError>;

    /// The session's meta if the session exists (creates nothing).
    async fn meta(&self, session: &str) -> Result<Option<SessionMeta>, StoreError>;

    /// Append a batch atomically. Returns only once the batch is durable
    /// (for durable backends). Cursors must be `head+1 ..` in order.
    async fn append(&self, session: &str, batch: AppendBatch) -> Result<SessionMeta, StoreError>;

    /// Up to `limit` events with cursor > `after`, in cursor order.
    async fn read(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError>;

    /// For each id, the cursor it was accepted at, if it is retained.
    async fn lookup_ids(
        &self,
        session: &str,
        ids: &[String],
    ) -> Result<Vec<Option<u64>>, StoreError>;

    /// The latest checkpoint, if any.
    async fn checkpoint(&self, session: &str) -> Result<Option<Checkpoint>, StoreError>;

    /// True when the store can take writes (readiness).
    async fn ready(&self) -> Result<(), StoreError>;

    /// Delete a session: its events, ids and checkpoint go (space is
    /// reclaimed) and a tombstone meta stays (see [`SessionMeta::tombstone`]).
    async fn delete(&self, session: &str) -> Result<SessionMeta, StoreError>;

    /// True when other processes append to the same sessions: actors then
    /// catch up with [`EventLog::tail`] before they append or answer, and
    /// follow [`EventLog::listen`] while they have subscribers.
    fn shared(&self) -> bool {
        false
    }

    /// The meta, up to `limit` events after `after`, and the cursors of
    /// `ids`, read atomically. `None` when the session does not exist.
    async fn tail(
        &self,
        session: &str,
        after: u64,
        limit: usize,
        ids: &[String],
    ) -> Result<Option<Tail>, StoreError> {
        let Some(meta) = self.meta(session).await? else {
            return Ok(None);
        };
        let events = self.read(session, after, limit).await?;
        let known = self.lookup_ids(session, ids).await?;
        Ok(Some(Tail {
            meta,
            events,
            known,
        }))
    }

    /// Be told (through the returned [`News`]) whenever a process appends to
    /// or deletes `session`, and after a reconnection that may have lost
    /// such news. `None` for single-node stores.
    async fn listen(&self, _session: &str) -> Option<Arc<News>> {
        None
    }

    /// Stop listening (the [`News`] returned by [`EventLog::listen`]).
    fn unlisten(&self, _session: &str, _news: &Arc<News>) {}

    /// The changes other nodes make to sessions (appends, deletions), for
    /// this node's session index; `None` for single-node stores, where
    /// every change is made here.
    fn index_notes(&self) -> Option<tokio::sync::broadcast::Receiver<IndexNote>> {
        None
    }

    /// Delete a session only if its last append is older than `before_ms`
    /// (the retention sweep); `None` when it was not (or is already a
    /// tombstone). Shared stores check and delete atomically; for the others
    /// the session's actor is the only writer, and it calls this.
    async fn delete_idle(
        &self,
        session: &str,
        before_ms: u64,
    ) -> Result<Option<SessionMeta>, StoreError> {
        match self.meta(session).await? {
            Some(m) if !m.deleted && m.updated_ms < before_ms => {
                self.delete(session).await.map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Remove a session that was opened (by a read or a subscription) but
    /// never appended to, if it was opened before `before_ms`: entirely, with
    /// no tombstone, since none of its cursors was ever handed out. Checked
    /// and removed atomically (on a shared store another node may have
    /// appended meanwhile). True when it went.
    async fn forget_idle(&self, session: &str, before_ms: u64) -> Result<bool, StoreError>;

    /// Live (not deleted) sessions with ids greater than `after`, by id.
    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, SessionMeta)>, StoreError>;

    /// Up to `limit` live sessions whose last append (or, never appended to,
    /// whose opening) is older than `before_ms`.
    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<String>, StoreError>;
}

/// A shared store handle.
pub type SharedLog = Arc<dyn EventLog>;

/// Retention settings every backend applies.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Events kept per session; older ones are trimmed once a checkpoint covers them.
    pub max_events_per_session: u64,
    /// Events received longer ago than this are trimmed once a checkpoint
    /// covers them (`None`: no age limit).
    pub max_age_ms: Option<u64>,
}

/// A session [`EventLog::forget_idle`] removes: opened before `before_ms`,
/// never appended to, not a tombstone.
pub fn is_forgettable(meta: &SessionMeta, before_ms: u64) -> bool {
    meta.head == 0 && !meta.deleted && meta.updated_ms < before_ms
}

/// The cursor up to which a session may be trimmed by count, given its meta
/// after an append and its latest checkpoint cursor: never past the
/// checkpoint, so a cold session can always be rebuilt.
pub fn trim_to(meta: &SessionMeta, checkpoint: Option<u64>, retention: Retention) -> Option<u64> {
    let keep_from = meta
        .head
        .saturating_sub(retention.max_events_per_session)
        .saturating_add(1);
    let limit = checkpoint?.saturating_add(1).min(keep_from);
    (limit > meta.first).then(|| limit - 1)
}

/// Where age trimming may go: events received before `before_ms` up to the
/// checkpoint. `oldest` yields `(cursor, received_ms)` from the first
/// retained event on; returns the last cursor to trim.
pub fn age_trim_to(
    checkpoint: Option<u64>,
    before_ms: u64,
    oldest: impl Iterator<Item = (u64, u64)>,
) -> Option<u64> {
    let cp = checkpoint?;
    let mut upto = None;
    for (cursor, received) in oldest {
        if cursor > cp || received >= before_ms {
            break;
        }
        upto = Some(cursor);
    }
    upto
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_only_behind_checkpoint_and_retention() {
        let r = Retention {
            max_events_per_session: 10,
            max_age_ms: None,
        };
        let meta = SessionMeta {
            head: 25,
            ..SessionMeta::new_epoch()
        };
        assert_eq!(trim_to(&meta, None, r), None, "no checkpoint: keep all");
        assert_eq!(trim_to(&meta, Some(20), r), Some(15));
        assert_eq!(trim_to(&meta, Some(5), r), Some(5));
        let trimmed = SessionMeta { first: 16, ..meta };
        assert_eq!(trim_to(&trimmed, Some(20), r), None);
    }

    #[test]
    fn age_trims_only_old_events_behind_the_checkpoint() {
        let ev = [(1, 10), (2, 20), (3, 30), (4, 40)];
        assert_eq!(age_trim_to(None, 100, ev.into_iter()), None);
        assert_eq!(age_trim_to(Some(4), 25, ev.into_iter()), Some(2));
        assert_eq!(age_trim_to(Some(1), 100, ev.into_iter()), Some(1));
        assert_eq!(age_trim_to(Some(4), 5, ev.into_iter()), None);
    }

    #[test]
    fn tombstones_keep_cursors_moving_forward() {
        let m = SessionMeta {
            head: 9,
            ..SessionMeta::new_epoch()
        };
        let t = m.tombstone(5);
        assert_eq!((t.head, t.first, t.base, t.deleted), (9, 10, 9, true));
        assert_ne!(t.epoch, m.epoch);
    }
}
