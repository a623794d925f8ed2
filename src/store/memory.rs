//! In-memory event log: per-session ring of stored events with an id index,
//! bounded by retention. Lost on restart (a restarted server has new epochs).

use std::collections::{HashMap, VecDeque};

use async_trait::async_trait;
use dashmap::DashMap;

use super::{
    trim_to, AppendBatch, Checkpoint, EventLog, Retention, SessionMeta, StoreError, StoredEvent,
};

#[derive(Debug)]
struct MemSession {
    meta: SessionMeta,
    events: VecDeque<StoredEvent>,
    ids: HashMap<String, u64>,
    checkpoint: Option<Checkpoint>,
}

/// The memory backend.
#[derive(Debug)]
pub struct MemoryLog {
    sessions: DashMap<String, MemSession>,
    retention: Retention,
}

impl MemoryLog {
    /// An empty store.
    pub fn new(retention: Retention) -> Self {
        MemoryLog {
            sessions: DashMap::new(),
            retention,
        }
    }

    fn session(&self, id: &str) -> dashmap::mapref::one::RefMut<'_, String, MemSession> {
        self.sessions
            .entry(id.to_string())
            .or_insert_with(|| MemSession {
                meta: SessionMeta::new_epoch(),
                events: VecDeque::new(),
                ids: HashMap::new(),
                checkpoint: None,
            })
    }
}

#[async_trait]
impl EventLog for MemoryLog {
    async fn open(&self, session: &str) -> Result<SessionMeta, StoreError> {
        Ok(self.session(session).meta.clone())
    }

    async fn meta(&self, session: &str) -> Result<Option<SessionMeta>, StoreError> {
        Ok(self.sessions.get(session).map(|s| s.meta.clone()))
    }

    async fn append(&self, session: &str, batch: AppendBatch) -> Result<SessionMeta, StoreError> {
        let mut s = self.session(session);
        for (expected, e) in (s.meta.head + 1..).zip(&batch.events) {
            if e.cursor != expected {
                return Err(StoreError::Conflict {
                    session: session.to_string(),
                    expected,
                    got: e.cursor,
                });
            }
        }
        for e in batch.events {
            s.meta.head = e.cursor;
            s.ids.insert(e.event_id.clone(), e.cursor);
            s.events.push_back(e);
        }
        if let Some(cp) = batch.checkpoint {
            s.checkpoint = Some(cp);
        }
        let cp_cursor = s.checkpoint.as_ref().map(|c| c.cursor);
        if let Some(upto) = trim_to(&s.meta, cp_cursor, self.retention) {
            while s.events.front().is_some_and(|e| e.cursor <= upto) {
                if let Some(old) = s.events.pop_front() {
                    s.ids.remove(&old.event_id);
                }
            }
            s.meta.first = upto + 1;
        }
        Ok(s.meta.clone())
    }

    async fn read(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let Some(s) = self.sessions.get(session) else {
            return Ok(Vec::new());
        };
        let first = s.events.front().map(|e| e.cursor).unwrap_or(u64::MAX);
        let skip = after.saturating_add(1).saturating_sub(first) as usize;
        Ok(s.events.iter().skip(skip).take(limit).cloned().collect())
    }

    async fn lookup_ids(
        &self,
        session: &str,
        ids: &[String],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let Some(s) = self.sessions.get(session) else {
            return Ok(vec![None; ids.len()]);
        };
        Ok(ids.iter().map(|id| s.ids.get(id).copied()).collect())
    }

    async fn checkpoint(&self, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self
            .sessions
            .get(session)
            .and_then(|s| s.checkpoint.clone()))
    }

    async fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::SharedLog;
    use bytes::Bytes;

    pub(crate) fn ev(cursor: u64) -> StoredEvent {
        StoredEvent {
            cursor,
            event_id: format!("e{cursor}"),
            fact: Bytes::from(format!("{{\"c\":{cursor}}}")),
            frame: Bytes::from(format!("{{\"cursor\":{cursor}}}")),
        }
    }

    /// The contract every backend must keep.
    pub(crate) async fn contract(log: SharedLog) {
        assert_eq!(log.meta("s").await.unwrap(), None);
        let meta = log.open("s").await.unwrap();
        assert_eq!((meta.head, meta.first), (0, 1));
        assert_eq!(log.meta("s").await.unwrap(), Some(meta.clone()));
        let meta2 = log.open("s").await.unwrap();
        assert_eq!(meta.epoch, meta2.epoch, "epoch is stable");
        let m = log
            .append(
                "s",
                AppendBatch {
                    events: (1..=5).map(ev).collect(),
                    checkpoint: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(m.head, 5);
        let err = log
            .append(
                "s",
                AppendBatch {
                    events: vec![ev(7)],
                    checkpoint: None,
                },
            )
            .await;
        assert!(matches!(err, Err(StoreError::Conflict { .. })));
        let got = log.read("s", 2, 2).await.unwrap();
        assert_eq!(got.iter().map(|e| e.cursor).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(got[0], ev(3));
        assert!(log.read("s", 5, 10).await.unwrap().is_empty());
        assert!(log.read("other", 0, 10).await.unwrap().is_empty());
        let ids = log
            .lookup_ids("s", &["e2".into(), "nope".into()])
            .await
            .unwrap();
        assert_eq!(ids, vec![Some(2), None]);
        assert!(log.checkpoint("s").await.unwrap().is_none());
        log.append(
            "s",
            AppendBatch {
                events: vec![ev(6)],
                checkpoint: Some(Checkpoint {
                    cursor: 6,
                    state: Bytes::from_static(b"{}"),
                }),
            },
        )
        .await
        .unwrap();
        assert_eq!(log.checkpoint("s").await.unwrap().unwrap().cursor, 6);
        log.ready().await.unwrap();
    }

    #[tokio::test]
    async fn memory_keeps_the_contract() {
        contract(std::sync::Arc::new(MemoryLog::new(Retention {
            max_events_per_session: 1000,
        })))
        .await;
    }

    /// Retention every backend must keep, for a log with
    /// `max_events_per_session = 3`.
    pub(crate) async fn retention(log: SharedLog) {
        let batch = |events: Vec<StoredEvent>, checkpoint| AppendBatch { events, checkpoint };
        log.append("s", batch((1..=5).map(ev).collect(), None))
            .await
            .unwrap();
        assert_eq!(
            log.read("s", 0, 100).await.unwrap().len(),
            5,
            "no checkpoint, no trim"
        );
        let cp = Checkpoint {
            cursor: 6,
            state: Bytes::new(),
        };
        let m = log.append("s", batch(vec![ev(6)], Some(cp))).await.unwrap();
        assert_eq!(m.first, 4);
        assert_eq!(log.meta("s").await.unwrap().unwrap().first, 4);
        let got = log.read("s", 0, 100).await.unwrap();
        assert_eq!(got.first().unwrap().cursor, 4);
        assert_eq!(got.len(), 3);
        assert_eq!(
            log.lookup_ids("s", &["e1".into(), "e5".into()])
                .await
                .unwrap(),
            vec![None, Some(5)],
            "trimmed ids leave the idempotency index"
        );
    }

    #[tokio::test]
    async fn memory_keeps_retention() {
        retention(std::sync::Arc::new(MemoryLog::new(Retention {
            max_events_per_session: 3,
        })))
        .await;
    }
}
