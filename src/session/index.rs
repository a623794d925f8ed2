//! The live session index (docs/STREAMS.md): each change of a session as
//! the session list shows it (`created`, `updated`, `deleted`) gets a cursor
//! of this node's index, is kept in a bounded ring for replay and broadcast
//! to the index streams, and is encoded once, when a follower first reads
//! it. The index's epoch is new with every start of the server, so that a
//! cursor of another run is reset.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;

use super::Listing;
use crate::store::{IndexNote, SessionMeta};

/// A session as the session list and the index show it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    pub session_id: String,
    pub epoch: String,
    /// Cursor of the last accepted event: a client that has read up to
    /// cursor R of this epoch has `head - R` events unread.
    pub head: u64,
    /// First retained cursor.
    pub first: u64,
    /// Runtime status of the projection after the last append.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The session's title, as its runtime gave it (`session.updated`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
    /// A failed run may be retried (`run.failed` said so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Actions waiting for a decision.
    pub pending_actions: u64,
    /// A teammate's session: the session that spawned it (the
    /// `parentSessionId` its agent events name)...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// ...and the teammate's agent id there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// RFC 3339 time of the last append; of the session's opening (by a
    /// read or a subscription) while it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub updated_at: Option<UpdatedAt>,
}

/// A time in milliseconds since the Unix epoch, written as RFC 3339 (with
/// milliseconds) when the entry is: every append makes an entry, and most
/// are never read (formatted at each append, it was 0.7% of a single-event
/// POST's instructions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdatedAt(pub u64);

impl Serialize for UpdatedAt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(self.0);
        s.collect_str(&humantime::format_rfc3339_millis(at))
    }
}

impl SessionEntry {
    /// The entry of a session from its metadata (and the listing in it).
    pub fn of(id: &str, m: &SessionMeta) -> SessionEntry {
        SessionEntry::with_listing(id, m, Listing::of_meta(m))
    }

    /// The entry of a session from its metadata and its listing.
    pub fn with_listing(id: &str, m: &SessionMeta, l: Listing) -> SessionEntry {
        SessionEntry {
            session_id: id.to_string(),
            epoch: m.epoch.clone(),
            head: m.head,
            first: m.first,
            status: l.status,
            title: l.title,
            pinned: l.pinned,
            archived: l.archived,
            retryable: l.retryable,
            pending_actions: l.pending_actions.unwrap_or(0),
            parent_session_id: l.parent_session_id,
            agent_id: l.agent_id,
            updated_at: (m.updated_ms > 0).then_some(UpdatedAt(m.updated_ms)),
        }
    }
}

/// What happened to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Created,
    Updated,
    Deleted,
}

/// One event of an index stream, encoded once: its SSE form, and its JSON
/// (a slice of it). A session's change is encoded when it is first read (a
/// follower sends it, or replays it), not when it is made: most appends'
/// changes are never read, with nobody following the index.
#[derive(Debug)]
pub struct IndexEvent {
    /// The index cursor (`None` for a `reset`).
    pub cursor: Option<u64>,
    /// Not an event to send: changes may have been missed here (see
    /// [`Index::resync`]); a follower starts again from a snapshot.
    pub resync: bool,
    /// The change it is, for a session's change.
    change: Option<Box<SessionChange>>,
    encoded: OnceLock<Encoded>,
}

#[derive(Debug)]
struct SessionChange {
    change: Change,
    epoch: Arc<str>,
    entry: SessionEntry,
}

#[derive(Debug)]
struct Encoded {
    sse: Bytes,
    json: Bytes,
}

impl Encoded {
    /// `id: <epoch>:<cursor>` (when it has a cursor), `event: <name>`,
    /// `data: <json>`.
    fn new(name: &str, epoch: &str, cursor: Option<u64>, json: &[u8]) -> Encoded {
        let mut buf = Vec::with_capacity(json.len() + 64);
        if let Some(c) = cursor {
            buf.extend_from_slice(format!("id: {epoch}:{c}\n").as_bytes());
        }
        buf.extend_from_slice(format!("event: {name}\ndata: ").as_bytes());
        let start = buf.len();
        buf.extend_from_slice(json);
        let end = buf.len();
        buf.extend_from_slice(b"\n\n");
        let sse = Bytes::from(buf);
        Encoded {
            json: sse.slice(start..end),
            sse,
        }
    }
}

impl IndexEvent {
    /// An event encoded now (a `snapshot` or a `reset`): `id:
    /// <epoch>:<cursor>` (when it has a cursor), `event: <name>`, `data:
    /// <json>`.
    pub fn encode(name: &str, epoch: &str, cursor: Option<u64>, json: &[u8]) -> IndexEvent {
        IndexEvent {
            cursor,
            resync: false,
            change: None,
            encoded: OnceLock::from(Encoded::new(name, epoch, cursor, json)),
        }
    }

    /// The session a change is about (`None` for `snapshot` and `reset`).
    pub fn session(&self) -> Option<&str> {
        self.change.as_ref().map(|c| c.entry.session_id.as_str())
    }

    /// The event as SSE.
    pub fn sse(&self) -> &Bytes {
        &self.encoded().sse
    }

    /// The event's JSON.
    pub fn json(&self) -> &Bytes {
        &self.encoded().json
    }

    fn encoded(&self) -> &Encoded {
        self.encoded.get_or_init(|| {
            #[derive(Serialize)]
            struct Out<'a> {
                #[serde(rename = "type")]
                change: Change,
                cursor: u64,
                session: &'a SessionEntry,
            }
            let c = self
                .change
                .as_ref()
                .expect("an event made without its bytes is a change");
            let cursor = self.cursor.expect("a change has a cursor");
            let json = serde_json::to_vec(&Out {
                change: c.change,
                cursor,
                session: &c.entry,
            })
            .expect("index events serialise");
            Encoded::new("session", &c.epoch, Some(cursor), &json)
        })
    }

    /// `{"type":"reset","reason":...}`.
    pub fn reset(reason: &str) -> IndexEvent {
        let json = serde_json::json!({"type": "reset", "reason": reason}).to_string();
        IndexEvent::encode("reset", "", None, json.as_bytes())
    }
}

/// Where an index follower starts.
pub enum IndexStart {
    /// The changes after its cursor, then the live ones.
    Replay(Vec<Arc<IndexEvent>>),
    /// A snapshot as of `cursor` (after a `reset` with this reason, when
    /// its cursor could not be resumed), then the live changes.
    Fresh {
        reset: Option<&'static str>,
        cursor: u64,
    },
}

/// A follower of the index: its live feed and where it starts.
pub struct Follow {
    pub rx: broadcast::Receiver<Arc<IndexEvent>>,
    pub start: IndexStart,
}

struct Ring {
    /// The cursor of the last change.
    head: u64,
    recent: VecDeque<Arc<IndexEvent>>,
}

/// The node's session index.
pub struct Index {
    epoch: Arc<str>,
    keep: usize,
    ring: Mutex<Ring>,
    tx: broadcast::Sender<Arc<IndexEvent>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("epoch", &self.epoch).finish()
    }
}

impl Index {
    /// An index that keeps the last `keep` changes for replay.
    pub fn new(keep: usize) -> Index {
        let keep = keep.max(1);
        Index {
            epoch: Arc::from(&uuid::Uuid::new_v4().simple().to_string()[..16]),
            keep,
            ring: Mutex::new(Ring {
                head: 0,
                recent: VecDeque::with_capacity(keep.min(4096)),
            }),
            tx: broadcast::channel(keep).0,
        }
    }

    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// Record a change of `entry`'s session and send it to the followers.
    pub fn publish(&self, change: Change, entry: SessionEntry) {
        self.record(|cursor| IndexEvent {
            cursor: Some(cursor),
            resync: false,
            change: Some(Box::new(SessionChange {
                change,
                epoch: self.epoch.clone(),
                entry,
            })),
            encoded: OnceLock::new(),
        });
        kept!(counter, "projector_index_changes_total").increment(1);
    }

    /// Give the next cursor to the event `make` makes with it, keep the
    /// event in the ring and send it to the followers.
    fn record(&self, make: impl FnOnce(u64) -> IndexEvent) {
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.head += 1;
        let ev = Arc::new(make(ring.head));
        let gone = if ring.recent.len() == self.keep {
            ring.recent.pop_front()
        } else {
            None
        };
        ring.recent.push_back(ev.clone());
        // Sent under the lock, so that followers get changes in cursor order.
        let _ = self.tx.send(ev);
        // The event the ring let go is freed after the lock.
        drop(ring);
        drop(gone);
    }

    /// Changes may have been missed (another node's, while this one was cut
    /// off from the shared store): followers start again from a snapshot,
    /// and no cursor from before now resumes.
    pub fn resync(&self) {
        self.record(|cursor| IndexEvent {
            cursor: Some(cursor),
            resync: true,
            ..IndexEvent::reset("cursor_expired")
        });
        metrics::counter!("projector_index_resyncs_total").increment(1);
    }

    /// Follow the index from a fresh snapshot, after a `reset` with `reason`.
    pub fn follow_fresh(&self, reason: &'static str) -> Follow {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        Follow {
            rx: self.tx.subscribe(),
            start: IndexStart::Fresh {
                reset: Some(reason),
                cursor: ring.head,
            },
        }
    }

    /// Follow the index after `after` (`(epoch, cursor)` of an earlier
    /// connection), or from a snapshot.
    pub fn follow(&self, after: Option<(Option<&str>, u64)>) -> Follow {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let rx = self.tx.subscribe();
        let fresh = |reset| IndexStart::Fresh {
            reset,
            cursor: ring.head,
        };
        let start = match after {
            None => fresh(None),
            Some((Some(e), _)) if e != &*self.epoch => fresh(Some("epoch_mismatch")),
            Some((_, c)) if c > ring.head => fresh(Some("cursor_ahead")),
            Some((_, c)) => {
                let first = ring
                    .recent
                    .front()
                    .and_then(|e| e.cursor)
                    .unwrap_or(ring.head + 1);
                let resynced = ring
                    .recent
                    .iter()
                    .any(|e| e.resync && e.cursor.is_some_and(|n| n > c));
                if c + 1 < first || resynced {
                    fresh(Some("cursor_expired"))
                } else {
                    IndexStart::Replay(
                        ring.recent
                            .iter()
                            .filter(|e| e.cursor.is_some_and(|n| n > c))
                            .cloned()
                            .collect(),
                    )
                }
            }
        };
        Follow { rx, start }
    }
}

/// Tell `index` the changes other nodes made, as a shared store hears them,
/// until `shutdown`: each session's entry as the store has it now; a
/// `Resync` (or notes lost to a slow relay) starts the followers again.
pub async fn relay(
    store: crate::store::SharedLog,
    index: Arc<Index>,
    watch: Arc<super::silence::Watch>,
    mut notes: broadcast::Receiver<IndexNote>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    use broadcast::error::RecvError;
    loop {
        let note = tokio::select! {
            _ = shutdown.cancelled() => return,
            n = notes.recv() => n,
        };
        let (change, session) = match note {
            Ok(IndexNote::Created(s)) => (Change::Created, s),
            Ok(IndexNote::Updated(s)) => (Change::Updated, s),
            Ok(IndexNote::Deleted(s)) => (Change::Deleted, s),
            Ok(IndexNote::Resync) | Err(RecvError::Lagged(_)) => {
                index.resync();
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        match store.meta(&session).await {
            Ok(Some(m)) => {
                // Another node's run is watched here too: if that node
                // goes, this one ends the run when it falls silent.
                let listing = Listing::of_meta(&m);
                watch.note(&session, listing.status.as_deref());
                index.publish(change, SessionEntry::with_listing(&session, &m, listing))
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(error = %e, "index relay could not read a session; resync");
                index.resync();
            }
        }
    }
}

#[cfg(test)]
mod tests;
