//! Durable Streams (the open HTTP protocol of `@durable-streams/*`): streams
//! of bytes or JSON messages at a path, created, appended to, read from any
//! offset, closed, expired and deleted. The protocol's rules are pure
//! functions in [`model`]; this is their storage.
//!
//! A stream is a log in an [`EventLog`](crate::store::EventLog) of its own (beside the sessions',
//! never mixed with them), so it is exactly as durable as a session log: on
//! the embedded store an acknowledged append is fsynced by the group-commit
//! writer, on Redis it is shared by every node. Each record is one
//! [`StoredEvent`](crate::store::StoredEvent): its `fact` holds the appended bytes, its `frame` one
//! byte saying what the record is ([`Kind`]) and, for JSON streams, how many
//! messages it holds. The stream's state ([`State`]: configuration, closure,
//! producers) is the log's listing, written in the same atomic batch as the
//! records it goes with.
//!
//! Writes are serialised by the store itself: a write reads where the log
//! stands, decides, and appends at the next cursors; a concurrent write that
//! got there first makes the store refuse it (`Conflict`) and it decides
//! again from the new state. A refused request writes nothing. An offset is
//! the cursor of the last record read, in 16 digits, so offsets sort as
//! positions do; cursors go on across a deletion, so an offset of a deleted
//! stream never names a position of the stream created after it.

mod live;
pub mod model;
mod offset;
mod records;
mod store;
mod write;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use tokio::sync::watch;

pub use live::{Change, Written};
pub use model::{Append, Config, ForkOrigin, Outcome, Producer, Refusal, State};
pub use offset::{
    cursor_interval, format as format_offset, format_tagged, parse as parse_offset, parse_tagged,
    Offset,
};
pub use store::open_store;
pub use write::{Create, ForkRequest};

use crate::store::{now_ms, AppendBatch, SharedLog, StoreError};
use records::{data_of, record};

/// What a record of a stream's log is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The stream was created (its state is in the same batch).
    Created,
    /// Appended data: the bytes, or for JSON `n` messages joined by commas.
    Data,
    /// The stream was closed.
    Closed,
    /// Only the stream's state changed (its forks were counted, it was
    /// deleted while forks of it live).
    State,
    /// The stream was deleted (or expired): a marker written before the
    /// log is removed, so that no write racing the deletion lands after it.
    Gone,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Created => b'c',
            Kind::Data => b'd',
            Kind::Closed => b'x',
            Kind::State => b's',
            Kind::Gone => b'g',
        }
    }
}

/// The listing a deleted stream's log holds until it is removed.
const GONE: &str = "gone";

/// A stream's data record: its bytes and, in JSON mode, its message count.
#[derive(Debug, Clone)]
pub struct Record {
    pub cursor: u64,
    pub bytes: Bytes,
    pub messages: u32,
}

/// A stream as it stands. Positions are offsets (what clients see): a
/// fork's continue its source's, so its log's cursors are these plus the
/// state's `shift`.
#[derive(Debug, Clone)]
pub struct View {
    pub state: State,
    /// The offset of the last record: the tail.
    pub head: u64,
    /// The offset before the stream's first record (`-1` reads from here).
    pub base: u64,
    /// When it was last written (Unix ms).
    pub updated_ms: u64,
    /// The log's epoch (changes when the stream is replaced).
    pub epoch: String,
    /// Offsets of this stream carry this after the `_` (a session's epoch);
    /// `None`: zeros.
    pub tag: Option<String>,
}

/// Why a stream request failed.
#[derive(Debug, thiserror::Error)]
pub enum DsError {
    #[error("no stream at this path")]
    NotFound,
    /// Deleted while forks of it live (410; a create at its path is 409).
    #[error("the stream was deleted; forks of it still live")]
    SoftDeleted,
    /// A fork's source is gone (404) or deleted while forked (409).
    #[error("the fork's source stream does not exist")]
    NoSource,
    #[error("the fork's source stream was deleted")]
    SourceDeleted,
    /// The request is malformed (400).
    #[error("{0}")]
    Invalid(String),
    /// The offset names data that is gone (a deleted stream's).
    #[error("the data at this offset is gone")]
    Gone,
    #[error("a stream with another configuration exists at this path")]
    ConfigConflict { head: u64 },
    /// The offset is beyond the stream's tail.
    #[error("the offset is beyond the stream's tail")]
    Beyond,
    #[error("append refused")]
    Refused { refusal: Refusal, view: Box<View> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The settings of the Durable Streams server.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How long a long-poll waits for data before it answers 204.
    pub long_poll: Duration,
    /// How long an SSE response stays open before the server ends it (the
    /// client reconnects from its last offset).
    pub sse_span: Duration,
    /// Most bytes of data a catch-up read answers with (at least one record).
    pub read_bytes: usize,
}

impl View {
    /// The view of a stream whose log stands at `meta`.
    fn of(state: State, meta: &crate::store::SessionMeta) -> View {
        let at = |c: u64| c.saturating_add_signed(-state.shift);
        View {
            head: at(meta.head),
            base: at(meta.base),
            updated_ms: meta.updated_ms,
            epoch: meta.epoch.clone(),
            tag: None,
            state,
        }
    }

    /// The offset string of a position of this stream.
    pub fn format(&self, offset: u64) -> String {
        match &self.tag {
            Some(t) => offset::format_tagged(offset, t),
            None => offset::format(offset),
        }
    }

    /// The cursor in the stream's log of an offset.
    pub fn cursor(&self, offset: u64) -> u64 {
        offset.saturating_add_signed(self.state.shift)
    }

    /// The offset of a cursor of the stream's log.
    pub fn offset(&self, cursor: u64) -> u64 {
        cursor.saturating_add_signed(-self.state.shift)
    }
}

/// Every stream of the server.
pub struct Streams {
    log: SharedLog,
    /// The head of each stream someone is waiting on, announced by writes.
    live: Arc<DashMap<String, watch::Sender<Change>>>,
    /// When each stream with a sliding TTL was last read (Unix ms).
    touched: DashMap<String, u64>,
    /// Each stream as this node last wrote it: an append decides on it
    /// without reading the log first. A stale one (another node wrote)
    /// makes the store refuse the append, and it is read afresh.
    written: DashMap<String, View>,
    pub settings: Settings,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("waited_on", &self.live.len())
            .finish()
    }
}

/// A create's answer.
#[derive(Debug, Clone)]
pub struct Created {
    /// False when the stream already existed with this configuration.
    pub new: bool,
    pub view: View,
}

/// An append's answer.
#[derive(Debug, Clone)]
pub struct Appended {
    pub outcome: Outcome,
    pub view: View,
}

/// What a catch-up read found.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub records: Vec<Record>,
    /// The offset after the last record read.
    pub next: u64,
    /// The read reached the tail.
    pub up_to_date: bool,
    pub view: View,
}

impl Streams {
    pub fn new(log: SharedLog, settings: Settings) -> Arc<Self> {
        Arc::new(Streams {
            log,
            live: Arc::new(DashMap::new()),
            touched: DashMap::new(),
            written: DashMap::new(),
            settings,
        })
    }

    /// True when the store can take writes.
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.log.ready().await
    }

    /// The stream at `path`, if one lives there (an expired one is deleted
    /// on the way).
    pub async fn view(&self, path: &str) -> Result<Option<View>, StoreError> {
        let Some(meta) = self.log.meta(path).await? else {
            return Ok(None);
        };
        if meta.deleted {
            return Ok(None);
        }
        let Some(listing) = meta.listing.as_deref().filter(|l| *l != GONE) else {
            return Ok(None);
        };
        let state: State = serde_json::from_str(listing).map_err(|e| StoreError::Corrupt {
            session: path.to_string(),
            detail: format!("stream state: {e}"),
        })?;
        let view = View::of(state, &meta);
        if !view.state.soft_deleted && self.expired(path, &view) {
            // An expired stream goes as a deleted one does (kept, answering
            // 410, while forks of it live).
            return match Box::pin(self.delete_view(path, view)).await {
                // Another write got there first; it is expired all the same.
                Ok(()) | Err(StoreError::Conflict { .. }) => Box::pin(self.view(path)).await,
                Err(e) => Err(e),
            };
        }
        Ok(Some(view))
    }

    /// Delete the streams that expired (their data leaves the store), up
    /// to `limit` of them per call; a stream is otherwise deleted at its
    /// next access after its expiry. The number deleted.
    pub async fn sweep(&self, limit: usize) -> Result<usize, StoreError> {
        let now = now_ms();
        let mut after: Option<String> = None;
        let mut deleted = 0;
        loop {
            let page = self.log.list(after.as_deref(), 1000).await?;
            let Some((last, _)) = page.last() else {
                return Ok(deleted);
            };
            after = Some(last.clone());
            for (path, meta) in &page {
                let Some(Ok(state)) = meta
                    .listing
                    .as_deref()
                    .filter(|l| *l != GONE)
                    .map(serde_json::from_str::<State>)
                else {
                    continue;
                };
                if state.soft_deleted {
                    continue;
                }
                let view = View::of(state, meta);
                if self.deadline(path, &view).is_some_and(|d| now >= d) {
                    // Reading it deletes it (as a deletion would, forks kept).
                    self.view(path).await?;
                    deleted += 1;
                    if deleted >= limit {
                        return Ok(deleted);
                    }
                }
            }
        }
    }

    /// When the stream expires (Unix ms), if it does.
    pub fn deadline(&self, path: &str, view: &View) -> Option<u64> {
        let c = &view.state.config;
        let sliding = c.ttl_secs.map(|ttl| {
            let last = self
                .touched
                .get(path)
                .map_or(view.updated_ms, |t| (*t).max(view.updated_ms));
            last.saturating_add(ttl.saturating_mul(1000))
        });
        match (sliding, c.expires_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The stream as this node last wrote it, unless it has expired since
    /// (then it is read from the log, which deletes it).
    pub(super) async fn for_write(&self, path: &str) -> Result<Option<View>, StoreError> {
        if let Some(v) = self.written.get(path).map(|v| v.clone()) {
            if !self.expired(path, &v) {
                return Ok(Some(v));
            }
        }
        self.view(path).await
    }

    /// Forget what this node wrote of a stream (the store said it moved).
    pub(super) fn stale(&self, path: &str) {
        self.written.remove(path);
    }

    fn expired(&self, path: &str, view: &View) -> bool {
        self.deadline(path, view).is_some_and(|d| now_ms() >= d)
    }

    /// A read or write of a stream with a sliding TTL keeps it alive.
    pub fn touch(&self, path: &str, view: &View) {
        if view.state.config.ttl_secs.is_some() {
            self.touched.insert(path.to_string(), now_ms());
        }
    }

    /// Mark the stream gone (so that no racing write lands after), then
    /// remove its log; readers waiting on it are woken.
    pub(super) async fn remove(&self, path: &str, view: &View) -> Result<(), StoreError> {
        let batch = AppendBatch {
            epoch: view.epoch.clone(),
            events: vec![record(
                view.cursor(view.head) + 1,
                Kind::Gone,
                Bytes::new(),
                0,
            )],
            checkpoint: None,
            listing: Some(GONE.to_string()),
            claim: false,
        };
        self.written.remove(path);
        self.log.append(path, batch).await?;
        self.log.delete(path).await?;
        self.touched.remove(path);
        self.announce(path, Change::Moved);
        Ok(())
    }

    /// Append `records` after the log's `head` (a cursor) with the
    /// stream's new `state`.
    async fn write(
        &self,
        path: &str,
        epoch: &str,
        head: u64,
        records: Vec<(Kind, Bytes, u32)>,
        state: &State,
    ) -> Result<View, StoreError> {
        let listing = serde_json::to_string(state).map_err(|e| StoreError::Corrupt {
            session: path.to_string(),
            detail: format!("stream state: {e}"),
        })?;
        let events: Vec<_> = records
            .into_iter()
            .enumerate()
            .map(|(i, (kind, bytes, n))| record(head + 1 + i as u64, kind, bytes, n))
            .collect();
        let data: Vec<Record> = events.iter().filter_map(data_of).collect();
        let meta = self
            .log
            .append(
                path,
                AppendBatch {
                    epoch: epoch.to_string(),
                    events,
                    checkpoint: None,
                    listing: Some(listing),
                    claim: false,
                },
            )
            .await?;
        let view = View::of(state.clone(), &meta);
        self.written.insert(path.to_string(), view.clone());
        if self.live.contains_key(path) {
            let after = view.offset(head);
            let w = Written {
                after,
                records: data,
                view: view.clone(),
            };
            self.announce(path, Change::Wrote(Arc::new(w)));
        }
        Ok(view)
    }

    /// The data after `after` (an offset of this stream), up to the read
    /// budget (at least one record).
    pub async fn read(&self, path: &str, after: u64, view: View) -> Result<Chunk, DsError> {
        if after > view.head {
            return Err(DsError::Beyond);
        }
        if after < view.base {
            return Err(DsError::Gone);
        }
        let mut records = Vec::new();
        let (mut next, head) = (view.cursor(after), view.cursor(view.head));
        let mut bytes = 0usize;
        // Pages sized by what the records so far weigh, so that a stream of
        // large appends is not read far past the budget: one record first,
        // then as many as the rest of the budget holds at their average.
        let mut want = 1usize;
        let mut seen = (0usize, 0usize);
        'pages: while next < head {
            let page = self.log.read(path, next, want).await?;
            if page.is_empty() {
                break;
            }
            seen.0 += page.len();
            seen.1 += page.iter().map(|e| e.fact.len()).sum::<usize>();
            let average = (seen.1 / seen.0).max(1);
            let left = self.settings.read_bytes.saturating_sub(bytes) / average;
            want = left.clamp(1, 1024);
            for e in page {
                if e.cursor > head {
                    break 'pages;
                }
                if let Some(r) = data_of(&e) {
                    if bytes > 0 && bytes + r.bytes.len() > self.settings.read_bytes {
                        break 'pages;
                    }
                    bytes += r.bytes.len();
                    records.push(r);
                }
                next = e.cursor;
            }
        }
        let next = view.offset(next);
        self.touch(path, &view);
        Ok(Chunk {
            records,
            up_to_date: next >= view.head,
            next,
            view,
        })
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
