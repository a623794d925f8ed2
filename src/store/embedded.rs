//! Durable embedded event log on redb: one database file under the data dir,
//! one write transaction per append, committed with fsync before the append
//! returns. Blocking redb calls run on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use redb::{Database, ReadableTable, TableDefinition};

use super::{
    trim_to, AppendBatch, Checkpoint, EventLog, Retention, SessionMeta, StoreError, StoredEvent,
};

const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
const IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("event_ids");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
const CHECKPOINTS: TableDefinition<&str, &[u8]> = TableDefinition::new("checkpoints");

/// The file name of the database inside the data dir.
pub const DB_FILE: &str = "projector.redb";

/// The redb backend.
pub struct EmbeddedLog {
    db: Arc<Database>,
    path: PathBuf,
    retention: Retention,
}

impl std::fmt::Debug for EmbeddedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedLog")
            .field("path", &self.path)
            .finish()
    }
}

impl EmbeddedLog {
    /// Open or create the database in `dir`. A file that is not a readable
    /// redb database is an error naming the file; it is never overwritten.
    pub fn open(dir: &Path, retention: Retention) -> Result<Self, StoreError> {
        let path = dir.join(DB_FILE);
        let wrap = |e: Box<dyn std::error::Error + Send + Sync>| StoreError::Embedded {
            path: path.display().to_string(),
            source: e,
        };
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Embedded {
            path: dir.display().to_string(),
            source: Box::new(e),
        })?;
        let db = Database::create(&path).map_err(|e| wrap(Box::new(e)))?;
        let txn = db.begin_write().map_err(|e| wrap(Box::new(e)))?;
        {
            txn.open_table(EVENTS).map_err(|e| wrap(Box::new(e)))?;
            txn.open_table(IDS).map_err(|e| wrap(Box::new(e)))?;
            txn.open_table(META).map_err(|e| wrap(Box::new(e)))?;
            txn.open_table(CHECKPOINTS).map_err(|e| wrap(Box::new(e)))?;
        }
        txn.commit().map_err(|e| wrap(Box::new(e)))?;
        Ok(EmbeddedLog {
            db: Arc::new(db),
            path,
            retention,
        })
    }

    fn err(&self, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Embedded {
            path: self.path.display().to_string(),
            source: Box::new(e),
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database, &EmbeddedLog) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        let me = EmbeddedLog {
            db: self.db.clone(),
            path: self.path.clone(),
            retention: self.retention,
        };
        tokio::task::spawn_blocking(move || f(&db, &me))
            .await
            .map_err(|e| StoreError::Unavailable(format!("store task failed: {e}")))?
    }
}

fn encode_event(e: &StoredEvent) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + e.event_id.len() + e.fact.len() + e.frame.len());
    v.extend_from_slice(&(e.event_id.len() as u32).to_le_bytes());
    v.extend_from_slice(e.event_id.as_bytes());
    v.extend_from_slice(&(e.fact.len() as u32).to_le_bytes());
    v.extend_from_slice(&e.fact);
    v.extend_from_slice(&e.frame);
    v
}

fn decode_event(session: &str, cursor: u64, raw: &[u8]) -> Result<StoredEvent, StoreError> {
    let corrupt = || StoreError::Corrupt {
        session: session.to_string(),
        detail: format!("event at cursor {cursor} is truncated"),
    };
    let take_len = |at: usize| -> Result<usize, StoreError> {
        let b: [u8; 4] = raw
            .get(at..at + 4)
            .ok_or_else(corrupt)?
            .try_into()
            .map_err(|_| corrupt())?;
        Ok(u32::from_le_bytes(b) as usize)
    };
    let id_len = take_len(0)?;
    let id = raw.get(4..4 + id_len).ok_or_else(corrupt)?;
    let fact_len = take_len(4 + id_len)?;
    let fact_start = 8 + id_len;
    let fact = raw
        .get(fact_start..fact_start + fact_len)
        .ok_or_else(corrupt)?;
    let frame = &raw[fact_start + fact_len..];
    Ok(StoredEvent {
        cursor,
        event_id: String::from_utf8(id.to_vec()).map_err(|_| corrupt())?,
        fact: Bytes::copy_from_slice(fact),
        frame: Bytes::copy_from_slice(frame),
    })
}

fn read_meta(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    session: &str,
) -> Result<Option<SessionMeta>, StoreError> {
    let Some(raw) = table
        .get(session)
        .map_err(|e| StoreError::Unavailable(e.to_string()))?
    else {
        return Ok(None);
    };
    serde_json::from_slice(raw.value())
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            session: session.to_string(),
            detail: format!("session meta: {e}"),
        })
}

#[async_trait]
impl EventLog for EmbeddedLog {
    async fn open(&self, session: &str) -> Result<SessionMeta, StoreError> {
        let session = session.to_string();
        self.blocking(move |db, me| {
            let r = db.begin_read().map_err(|e| me.err(e))?;
            let t = r.open_table(META).map_err(|e| me.err(e))?;
            if let Some(m) = read_meta(&t, &session)? {
                return Ok(m);
            }
            drop(t);
            drop(r);
            let w = db.begin_write().map_err(|e| me.err(e))?;
            let meta = {
                let mut t = w.open_table(META).map_err(|e| me.err(e))?;
                match read_meta(&t, &session)? {
                    Some(m) => m,
                    None => {
                        let m = SessionMeta::new_epoch();
                        let raw = serde_json::to_vec(&m).expect("meta serialises");
                        t.insert(session.as_str(), raw.as_slice())
                            .map_err(|e| me.err(e))?;
                        m
                    }
                }
            };
            w.commit().map_err(|e| me.err(e))?;
            Ok(meta)
        })
        .await
    }

    async fn meta(&self, session: &str) -> Result<Option<SessionMeta>, StoreError> {
        let session = session.to_string();
        self.blocking(move |db, me| {
            let r = db.begin_read().map_err(|e| me.err(e))?;
            let t = r.open_table(META).map_err(|e| me.err(e))?;
            read_meta(&t, &session)
        })
        .await
    }

    async fn append(&self, session: &str, batch: AppendBatch) -> Result<SessionMeta, StoreError> {
        let session = session.to_string();
        self.blocking(move |db, me| {
            let w = db.begin_write().map_err(|e| me.err(e))?;
            let meta = {
                let mut meta_t = w.open_table(META).map_err(|e| me.err(e))?;
                let mut meta = read_meta(&meta_t, &session)?.unwrap_or_else(SessionMeta::new_epoch);
                let mut events = w.open_table(EVENTS).map_err(|e| me.err(e))?;
                let mut ids = w.open_table(IDS).map_err(|e| me.err(e))?;
                let mut cps = w.open_table(CHECKPOINTS).map_err(|e| me.err(e))?;
                for (expected, e) in (meta.head + 1..).zip(&batch.events) {
                    if e.cursor != expected {
                        return Err(StoreError::Conflict {
                            session: session.clone(),
                            expected,
                            got: e.cursor,
                        });
                    }
                    events
                        .insert((session.as_str(), e.cursor), encode_event(e).as_slice())
                        .map_err(|e| me.err(e))?;
                    ids.insert((session.as_str(), e.event_id.as_str()), e.cursor)
                        .map_err(|e| me.err(e))?;
                    meta.head = e.cursor;
                }
                if let Some(cp) = &batch.checkpoint {
                    let mut raw = cp.cursor.to_le_bytes().to_vec();
                    raw.extend_from_slice(&cp.state);
                    cps.insert(session.as_str(), raw.as_slice())
                        .map_err(|e| me.err(e))?;
                }
                let cp_cursor = match &batch.checkpoint {
                    Some(cp) => Some(cp.cursor),
                    None => cps
                        .get(session.as_str())
                        .map_err(|e| me.err(e))?
                        .and_then(|v| {
                            v.value()
                                .get(..8)
                                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                        }),
                };
                if let Some(upto) = trim_to(&meta, cp_cursor, me.retention) {
                    let doomed: Vec<(u64, String)> = events
                        .range((session.as_str(), meta.first)..=(session.as_str(), upto))
                        .map_err(|e| me.err(e))?
                        .filter_map(|r| r.ok())
                        .filter_map(|(k, v)| {
                            let c = k.value().1;
                            decode_event(&session, c, v.value())
                                .ok()
                                .map(|e| (c, e.event_id))
                        })
                        .collect();
                    for (c, id) in doomed {
                        events
                            .remove((session.as_str(), c))
                            .map_err(|e| me.err(e))?;
                        ids.remove((session.as_str(), id.as_str()))
                            .map_err(|e| me.err(e))?;
                    }
                    meta.first = upto + 1;
                }
                let raw = serde_json::to_vec(&meta).expect("meta serialises");
                meta_t
                    .insert(session.as_str(), raw.as_slice())
                    .map_err(|e| me.err(e))?;
                meta
            };
            w.commit().map_err(|e| me.err(e))?;
            Ok(meta)
        })
        .await
    }

    async fn read(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let session = session.to_string();
        self.blocking(move |db, me| {
            let r = db.begin_read().map_err(|e| me.err(e))?;
            let t = r.open_table(EVENTS).map_err(|e| me.err(e))?;
            let mut out = Vec::new();
            let start = after.saturating_add(1);
            for item in t
                .range((session.as_str(), start)..=(session.as_str(), u64::MAX))
                .map_err(|e| me.err(e))?
                .take(limit)
            {
                let (k, v) = item.map_err(|e| me.err(e))?;
                out.push(decode_event(&session, k.value().1, v.value())?);
            }
            Ok(out)
        })
        .await
    }

    async fn lookup_ids(
        &self,
        session: &str,
        ids: &[String],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let session = session.to_string();
        let ids = ids.to_vec();
        self.blocking(move |db, me| {
            let r = db.begin_read().map_err(|e| me.err(e))?;
            let t = r.open_table(IDS).map_err(|e| me.err(e))?;
            ids.iter()
                .map(|id| {
                    t.get((session.as_str(), id.as_str()))
                        .map(|v| v.map(|v| v.value()))
                        .map_err(|e| me.err(e))
                })
                .collect()
        })
        .await
    }

    async fn checkpoint(&self, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let session = session.to_string();
        self.blocking(move |db, me| {
            let r = db.begin_read().map_err(|e| me.err(e))?;
            let t = r.open_table(CHECKPOINTS).map_err(|e| me.err(e))?;
            let Some(v) = t.get(session.as_str()).map_err(|e| me.err(e))? else {
                return Ok(None);
            };
            let raw = v.value();
            let cursor = raw
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| StoreError::Corrupt {
                    session: session.clone(),
                    detail: "checkpoint is truncated".into(),
                })?;
            Ok(Some(Checkpoint {
                cursor,
                state: Bytes::copy_from_slice(&raw[8..]),
            }))
        })
        .await
    }

    async fn ready(&self) -> Result<(), StoreError> {
        self.blocking(|db, me| {
            db.begin_read().map_err(|e| me.err(e))?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::tests::{contract, ev, retention as retention_contract};

    fn retention() -> Retention {
        Retention {
            max_events_per_session: 1000,
        }
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "projector-test-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test]
    async fn embedded_keeps_the_contract() {
        let dir = tmpdir("contract");
        contract(Arc::new(EmbeddedLog::open(&dir, retention()).unwrap())).await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn embedded_keeps_retention() {
        let dir = tmpdir("retention");
        let log = EmbeddedLog::open(
            &dir,
            Retention {
                max_events_per_session: 3,
            },
        )
        .unwrap();
        retention_contract(Arc::new(log)).await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn survives_reopen() {
        let dir = tmpdir("reopen");
        let epoch = {
            let log = EmbeddedLog::open(&dir, retention()).unwrap();
            let m = log.open("s").await.unwrap();
            log.append(
                "s",
                AppendBatch {
                    events: (1..=3).map(ev).collect(),
                    checkpoint: None,
                },
            )
            .await
            .unwrap();
            m.epoch
        };
        let log = EmbeddedLog::open(&dir, retention()).unwrap();
        let m = log.open("s").await.unwrap();
        assert_eq!((m.epoch, m.head), (epoch, 3));
        assert_eq!(log.read("s", 0, 10).await.unwrap()[2], ev(3));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn corrupt_file_is_a_clear_error() {
        let dir = tmpdir("corrupt");
        std::fs::write(dir.join(DB_FILE), b"this is not a redb file at all").unwrap();
        let err = EmbeddedLog::open(&dir, retention()).unwrap_err();
        assert!(err.to_string().contains(DB_FILE), "{err}");
        assert_eq!(
            std::fs::read(dir.join(DB_FILE)).unwrap(),
            b"this is not a redb file at all",
            "never overwritten"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
