//! What readers see of the appends that are durable in the log (`wal`)
//! but not yet in the database: per session, the meta after them, their
//! events and their ids. The writer thread adds to it after each logged
//! group and empties it once a database commit holds everything logged;
//! readers look here first and at the database after, so that every
//! acknowledged event is in one of the two at any instant (the database
//! commit comes before the emptying). Trimming by retention happens when
//! the database takes the appends, as it did before the log: until then a
//! session may hold a few more events than `max_events_per_session`.

use std::sync::RwLock;

use super::FastMap;
use crate::store::{codec, Checkpoint, SessionMeta, StoreError, StoredEvent};

/// The logged tail of every session that has one.
#[derive(Debug, Default)]
pub(super) struct Pending {
    tails: RwLock<FastMap<String, Tail>>,
}

#[derive(Debug)]
struct Tail {
    /// With `first` past what a logged checkpoint let retention trim (the
    /// database still holds those events until it takes the log).
    meta: SessionMeta,
    events: Vec<StoredEvent>,
    ids: FastMap<String, u64>,
    checkpoint: Option<Checkpoint>,
}

impl Pending {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, FastMap<String, Tail>> {
        self.tails.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's meta after its logged appends, if it has any.
    pub fn meta(&self, session: &str) -> Option<SessionMeta> {
        self.read().get(session).map(|t| t.meta.clone())
    }

    /// The meta of a session the database lists with `raw`: the logged
    /// one if it has one.
    pub fn meta_over(&self, session: &str, raw: &[u8]) -> Result<SessionMeta, StoreError> {
        match self.meta(session) {
            Some(m) => Ok(m),
            None => codec::decode_meta(session, raw),
        }
    }

    /// The session's first retained cursor and its logged events after
    /// `after`, at most `limit`; `None` when it has no logged tail.
    pub fn tail(&self, session: &str, after: u64, limit: usize) -> Option<(u64, Vec<StoredEvent>)> {
        let tails = self.read();
        let t = tails.get(session)?;
        let from = t.events.partition_point(|e| e.cursor <= after);
        Some((
            t.meta.first,
            t.events[from..].iter().take(limit).cloned().collect(),
        ))
    }

    /// The cursors of logged event ids (`None` where the id is not
    /// logged), and the session's first retained cursor, if it has a tail.
    pub fn ids(&self, session: &str, ids: &[String]) -> (Vec<Option<u64>>, Option<u64>) {
        let tails = self.read();
        let tail = tails.get(session);
        let found = ids
            .iter()
            .map(|id| tail.and_then(|t| t.ids.get(id).copied()))
            .collect();
        (found, tail.map(|t| t.meta.first))
    }

    /// The [`super::idfilter::hash`]es of the session's logged ids.
    pub fn id_hashes(&self, session: &str) -> Vec<u64> {
        let tails = self.read();
        tails.get(session).map_or_else(Vec::new, |t| {
            t.ids.keys().map(|id| super::idfilter::hash(id)).collect()
        })
    }

    /// The latest logged checkpoint of the session.
    pub fn checkpoint(&self, session: &str) -> Option<Checkpoint> {
        self.read().get(session)?.checkpoint.clone()
    }

    /// Add a logged append: its events, its checkpoint and the session's
    /// meta after it.
    pub fn push(
        &self,
        session: &str,
        events: &[StoredEvent],
        checkpoint: Option<&Checkpoint>,
        meta: SessionMeta,
    ) {
        let mut tails = self.tails.write().unwrap_or_else(|p| p.into_inner());
        let tail = tails.entry(session.to_string()).or_insert_with(|| Tail {
            meta: meta.clone(),
            events: Vec::new(),
            ids: FastMap::default(),
            checkpoint: None,
        });
        tail.meta = meta;
        for e in events {
            tail.ids.insert(e.event_id.clone(), e.cursor);
            tail.events.push(e.clone());
        }
        if let Some(cp) = checkpoint {
            tail.checkpoint = Some(cp.clone());
        }
        // Events a checkpoint let retention trim are gone for readers now.
        let gone = tail.events.partition_point(|e| e.cursor < tail.meta.first);
        for e in tail.events.drain(..gone) {
            tail.ids.remove(&e.event_id);
        }
    }

    /// The database took logged appends: `flushed` holds the meta after,
    /// of every session it changed. Their events leave; a session's tail
    /// goes when nothing newer is logged, else keeps its newer events, with
    /// the database's trim.
    pub fn retire(&self, flushed: &FastMap<String, SessionMeta>) {
        let mut tails = self.tails.write().unwrap_or_else(|p| p.into_inner());
        for (session, m) in flushed {
            let Some(t) = tails.get_mut(session) else {
                continue;
            };
            let upto = t.events.partition_point(|e| e.cursor <= m.head);
            for e in t.events.drain(..upto) {
                t.ids.remove(&e.event_id);
            }
            t.meta.first = t.meta.first.max(m.first);
            if t.checkpoint.as_ref().is_some_and(|cp| cp.cursor <= m.head) {
                t.checkpoint = None;
            }
            if t.events.is_empty() && t.checkpoint.is_none() && t.meta == *m {
                tails.remove(session);
            }
        }
    }

    /// The database holds everything logged.
    pub fn clear(&self) {
        let mut tails = self.tails.write().unwrap_or_else(|p| p.into_inner());
        *tails = FastMap::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::contract::ev;

    #[test]
    fn tails_answer_meta_events_and_ids_until_cleared() {
        let p = Pending::default();
        let meta = SessionMeta {
            head: 3,
            ..SessionMeta::new_epoch()
        };
        p.push("s", &[ev(2), ev(3)], None, meta.clone());
        assert_eq!(p.meta("s"), Some(meta));
        assert_eq!(p.meta("t"), None);
        let after = |a, l| -> Vec<u64> {
            p.tail("s", a, l)
                .map_or(vec![], |(_, t)| t.iter().map(|e| e.cursor).collect())
        };
        assert_eq!(
            (after(0, 9), after(2, 9), after(0, 1)),
            (vec![2, 3], vec![3], vec![2])
        );
        assert_eq!(
            p.ids("s", &["e3".into(), "e9".into()]),
            (vec![Some(3), None], Some(1))
        );
        p.clear();
        assert_eq!((p.meta("s"), after(0, 9)), (None, vec![]));
    }
}
