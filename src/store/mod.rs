//! The per-session event log: the [`EventLog`] trait every backend
//! implements (append a batch durably, read a range, head, epoch, dedupe
//! lookup, checkpoints), and the backends: [`memory`] and [`embedded`] (redb).

pub mod embedded;
pub mod memory;

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
pub struct SessionMeta {
    /// Changes whenever the log is recreated; cursors of another epoch are void.
    pub epoch: String,
    /// Cursor of the last appended event (0 when none).
    pub head: u64,
    /// First cursor still retained (`head + 1` when nothing is retained).
    pub first: u64,
}

impl SessionMeta {
    /// A fresh, empty log.
    pub fn new_epoch() -> Self {
        SessionMeta {
            epoch: uuid::Uuid::new_v4().simple().to_string()[..16].to_string(),
            head: 0,
            first: 1,
        }
    }
}

/// One atomic append: events with consecutive cursors after the head, and
/// optionally a checkpoint taken after the last of them.
#[derive(Debug, Clone)]
pub struct AppendBatch {
    pub events: Vec<StoredEvent>,
    pub checkpoint: Option<Checkpoint>,
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
    #[error("embedded store at {path}: {source}")]
    Embedded {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("corrupt record in session {session}: {detail}")]
    Corrupt { session: String, detail: String },
}

/// The per-session log. Implementations must be safe for concurrent use by
/// many sessions; one session is only ever written by its own actor.
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
}

/// A shared store handle.
pub type SharedLog = Arc<dyn EventLog>;

/// Retention settings every backend applies.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Events kept per session; older ones are trimmed once a checkpoint covers them.
    pub max_events_per_session: u64,
}

/// The cursor up to which a session may be trimmed, given its meta after an
/// append and its latest checkpoint cursor: never past the checkpoint, so a
/// cold session can always be rebuilt.
pub fn trim_to(meta: &SessionMeta, checkpoint: Option<u64>, retention: Retention) -> Option<u64> {
    let keep_from = meta
        .head
        .saturating_sub(retention.max_events_per_session)
        .saturating_add(1);
    let limit = checkpoint?.saturating_add(1).min(keep_from);
    (limit > meta.first).then(|| limit - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_only_behind_checkpoint_and_retention() {
        let r = Retention {
            max_events_per_session: 10,
        };
        let meta = SessionMeta {
            epoch: "e".into(),
            head: 25,
            first: 1,
        };
        assert_eq!(trim_to(&meta, None, r), None, "no checkpoint: keep all");
        assert_eq!(trim_to(&meta, Some(20), r), Some(15));
        assert_eq!(trim_to(&meta, Some(5), r), Some(5));
        let trimmed = SessionMeta { first: 16, ..meta };
        assert_eq!(trim_to(&trimmed, Some(20), r), None);
    }
}
