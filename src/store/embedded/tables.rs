//! What the database holds of a session's log, written in a transaction:
//! events and their ids, checkpoints, and retention's trim; the database
//! taking logged appends (`wal`), which the writer and the flusher share;
//! and the read of the id index every ingest makes.

// redb's own error type is large; these helpers only pass it up.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::keys::{self, KeyBuf};
use super::runs::{self, RunWriter};
use super::wal::Record;
use super::{rerr, FastMap, CHECKPOINTS, EVENTS, IDS, META};
use crate::store::codec::{self, checkpoint_cursor, event_header};
use crate::store::{
    age_trim_to, check_cursors, now_ms, trim_to, Retention, SessionMeta, StoreError, StoredEvent,
};

/// Trim a session to its retention after an append: `next` is its meta
/// after the append; the answer, the meta after the trim.
pub(super) fn trim(
    retention: Retention,
    t: &mut Tables<'_>,
    session: &str,
    mut next: SessionMeta,
) -> Result<SessionMeta, redb::Error> {
    let cp_cursor = t
        .cps
        .get(session)?
        .and_then(|v| checkpoint_cursor(v.value()));
    let mut upto = trim_to(&next, cp_cursor, retention);
    if let Some(age) = retention.max_age_ms {
        let before = now_ms().saturating_sub(age);
        let mut oldest = Vec::new();
        runs::visit(
            &t.events,
            session,
            next.first,
            next.head,
            |cursor, raw| match event_header(raw) {
                Some((received, _)) if received < before && Some(cursor) <= cp_cursor => {
                    oldest.push((cursor, received));
                    ControlFlow::Continue(())
                }
                _ => ControlFlow::Break(()),
            },
        )?;
        upto = upto.max(age_trim_to(cp_cursor, before, oldest.into_iter()));
    }
    if let Some(upto) = upto {
        remove_events(&mut t.events, &mut t.ids, session, next.first, upto)?;
        next.first = upto + 1;
    }
    Ok(next)
}

/// The tables an append writes, open in one transaction.
pub(super) struct Tables<'t> {
    pub events: Events<'t>,
    pub ids: Ids<'t>,
    pub cps: redb::Table<'t, &'static str, &'static [u8]>,
    key: KeyBuf,
    runs: RunWriter,
}

/// The events table, open for writing.
pub(super) type Events<'t> = redb::Table<'t, &'static [u8], &'static [u8]>;
/// The ids table, open for writing.
pub(super) type Ids<'t> = redb::Table<'t, &'static [u8], u64>;

impl<'t> Tables<'t> {
    pub fn open(txn: &'t WriteTransaction) -> Result<Self, redb::Error> {
        Ok(Tables {
            events: txn.open_table(EVENTS)?,
            ids: txn.open_table(IDS)?,
            cps: txn.open_table(CHECKPOINTS)?,
            key: KeyBuf::default(),
            runs: RunWriter::default(),
        })
    }

    /// Insert events of a session (in cursor order, after its head) and
    /// their ids.
    pub fn insert<'e>(
        &mut self,
        session: &str,
        events: impl IntoIterator<Item = &'e StoredEvent> + Clone,
    ) -> Result<(), redb::Error> {
        self.runs.put(&mut self.events, session, events.clone())?;
        for e in events {
            self.ids
                .insert(self.key.id(session, &e.event_id), e.cursor)?;
        }
        Ok(())
    }
}

/// Remove events `from..=upto` of a session and their ids.
pub(super) fn remove_events(
    events: &mut Events<'_>,
    ids: &mut Ids<'_>,
    session: &str,
    from: u64,
    upto: u64,
) -> Result<(), redb::Error> {
    let mut key = KeyBuf::default();
    for id in runs::remove(events, session, from, upto)? {
        ids.remove(key.id(session, &id))?;
    }
    Ok(())
}

/// Apply logged appends in `txn` (the database's view of them), one
/// session at a time: its meta read and written once, its events in cursor
/// order, trimmed once. Records the database already holds (a replay after
/// a crash between its commit and the log's start over) are skipped. The
/// answer: the meta after, of every session it changed.
pub(super) fn apply_logged(
    retention: Retention,
    txn: &WriteTransaction,
    records: &[Record],
) -> Result<FastMap<String, SessionMeta>, String> {
    let mut by_session: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_session.entry(r.session.as_str()).or_default().push(r);
    }
    let s = |e: redb::Error| e.to_string();
    let mut metas = txn.open_table(META).map_err(|e| s(e.into()))?;
    let mut t = Tables::open(txn).map_err(s)?;
    let mut out = FastMap::default();
    for (session, records) in by_session {
        let raw = metas.get(session).map_err(|e| s(e.into()))?;
        let meta = match raw.map(|v| codec::decode_meta(session, v.value())) {
            Some(Ok(m)) => m,
            Some(Err(e)) => return Err(e.to_string()),
            None => continue,
        };
        let mut next = meta.clone();
        // The events the database takes, written as runs at the end.
        let mut taken: Vec<&StoredEvent> = Vec::new();
        for r in records {
            let first = r.batch.events.first().map_or(0, |e| e.cursor);
            if next.epoch != r.epoch || next.deleted || first <= next.head {
                continue;
            }
            if let Err(e) = check_cursors(session, &next, &r.batch) {
                return Err(format!("the log does not continue the database: {e}"));
            }
            taken.extend(&r.batch.events);
            if let Some(cp) = &r.batch.checkpoint {
                t.cps
                    .insert(session, codec::encode_checkpoint(cp).as_slice())
                    .map_err(|e| s(e.into()))?;
            }
            next = next.appended(&r.batch);
        }
        t.insert(session, taken.iter().copied()).map_err(s)?;
        if next == meta {
            continue;
        }
        let next = trim(retention, &mut t, session, next).map_err(s)?;
        metas
            .insert(session, codec::encode_meta(&next).as_slice())
            .map_err(|e| s(e.into()))?;
        out.insert(session.to_string(), next);
    }
    Ok(out)
}

/// The cursors of `ids` in the session: what the log holds (`logged`),
/// else the database's index where `ask` says the session may hold the id
/// (`idfilter`), past `first` (ids of events retention trimmed leave the
/// index).
pub(super) fn known_ids(
    r: &ReadTransaction,
    path: &Path,
    session: &str,
    ids: &[String],
    logged: Vec<Option<u64>>,
    ask: &[bool],
    first: u64,
) -> Result<Vec<Option<u64>>, StoreError> {
    let t = r.open_table(IDS).map_err(|e| rerr(path)(e.into()))?;
    ids.iter()
        .zip(logged)
        .zip(ask)
        .map(|((id, logged), ask)| match logged {
            Some(c) => Ok(Some(c)),
            None if !ask => Ok(None),
            None => t
                .get(keys::id_key(session, id).as_slice())
                .map(|v| v.map(|v| v.value()).filter(|c| *c >= first))
                .map_err(|e| rerr(path)(e.into())),
        })
        .collect()
}
