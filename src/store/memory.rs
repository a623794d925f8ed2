//! In-memory event log: per-session ring of stored events with an id index,
//! bounded by retention. Lost on restart (a restarted server has new epochs).

use std::collections::{HashMap, VecDeque};

use async_trait::async_trait;
use dashmap::DashMap;

use super::{
    age_trim_to, check_cursors, is_forgettable, now_ms, trim_to, AppendBatch, Checkpoint, EventLog,
    Retention, SessionMeta, StoreError, StoredEvent,
};

#[derive(Debug)]
struct MemSession {
    meta: SessionMeta,
    events: VecDeque<StoredEvent>,
    /// Event ids to cursors. This map and the sessions' are hashed with
    /// foldhash (seeded per process, as the projection's keyed maps):
    /// SipHash was a quarter of an append here.
    ids: HashMap<String, u64, foldhash::fast::RandomState>,
    checkpoint: Option<Checkpoint>,
}

impl MemSession {
    fn new() -> Self {
        MemSession {
            meta: SessionMeta::new_epoch(),
            events: VecDeque::new(),
            ids: HashMap::default(),
            checkpoint: None,
        }
    }

    /// Drop events up to `upto` (inclusive) from the front.
    fn trim(&mut self, upto: u64) {
        while self.events.front().is_some_and(|e| e.cursor <= upto) {
            if let Some(old) = self.events.pop_front() {
                self.ids.remove(&old.event_id);
            }
        }
        self.meta.first = self.meta.first.max(upto + 1);
    }
}

/// The memory backend.
#[derive(Debug)]
pub struct MemoryLog {
    sessions: DashMap<String, MemSession, foldhash::fast::RandomState>,
    retention: Retention,
}

impl MemoryLog {
    /// An empty store.
    pub fn new(retention: Retention) -> Self {
        MemoryLog {
            sessions: DashMap::default(),
            retention,
        }
    }

    /// A session, made when new (its id is copied only then).
    fn session(&self, id: &str) -> dashmap::mapref::one::RefMut<'_, String, MemSession> {
        if let Some(s) = self.sessions.get_mut(id) {
            return s;
        }
        self.sessions
            .entry(id.to_string())
            .or_insert_with(MemSession::new)
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
        check_cursors(session, &s.meta, &batch)?;
        s.meta = s.meta.appended(&batch);
        for e in batch.events {
            s.ids.insert(e.event_id.clone(), e.cursor);
            s.events.push_back(e);
        }
        if let Some(cp) = batch.checkpoint {
            s.checkpoint = Some(cp);
        }
        let cp_cursor = s.checkpoint.as_ref().map(|c| c.cursor);
        if let Some(upto) = trim_to(&s.meta, cp_cursor, self.retention) {
            s.trim(upto);
        }
        if let Some(age) = self.retention.max_age_ms {
            let before = now_ms().saturating_sub(age);
            let oldest = s.events.iter().map(|e| (e.cursor, e.received_ms));
            if let Some(upto) = age_trim_to(cp_cursor, before, oldest) {
                s.trim(upto);
            }
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

    async fn delete(&self, session: &str) -> Result<SessionMeta, StoreError> {
        let mut s = self.session(session);
        let tomb = s.meta.tombstone(now_ms());
        *s = MemSession {
            meta: tomb.clone(),
            ..MemSession::new()
        };
        Ok(tomb)
    }

    async fn forget_idle(&self, session: &str, before_ms: u64) -> Result<bool, StoreError> {
        Ok(self
            .sessions
            .remove_if(session, |_, s| is_forgettable(&s.meta, before_ms))
            .is_some())
    }

    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, SessionMeta)>, StoreError> {
        let mut out: Vec<(String, SessionMeta)> = self
            .sessions
            .iter()
            .filter(|e| !e.meta.deleted && after.is_none_or(|a| e.key().as_str() > a))
            .map(|e| (e.key().clone(), e.meta.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.truncate(limit);
        Ok(out)
    }

    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<String>, StoreError> {
        let mut out: Vec<String> = self
            .sessions
            .iter()
            .filter(|e| !e.meta.deleted && e.meta.updated_ms < before_ms)
            .map(|e| e.key().clone())
            .collect();
        out.sort();
        out.truncate(limit);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::contract;

    #[tokio::test]
    async fn memory_keeps_the_contract() {
        contract::holds(std::sync::Arc::new(MemoryLog::new(Retention {
            max_events_per_session: 1000,
            max_age_ms: None,
        })))
        .await;
    }

    #[tokio::test]
    async fn memory_keeps_retention() {
        contract::retention(std::sync::Arc::new(MemoryLog::new(Retention {
            max_events_per_session: 3,
            max_age_ms: Some(3_600_000),
        })))
        .await;
    }
}
