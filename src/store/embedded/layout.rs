//! The database's layout: its version, and the move of a data dir of an
//! older layout to this one (the keys are `keys`', the event rows
//! `runs`').
//!
//! Layout 3 keeps a session's events in rows of up to 64 (`runs`), each
//! keyed by its first event's cursor; layout 2 had a row per event, keyed
//! the same way, and its ids table is layout 3's. Layout 1 keyed both by
//! tuples (`(&str, u64)`, `(&str, &str)`), which redb took apart and
//! checked as UTF-8 at each compare.

// redb's own error type is large; these helpers only pass it up.
#![allow(clippy::result_large_err)]

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::keys::{session_and_cursor, KeyBuf};
use super::runs::RunWriter;
use super::{EVENTS, IDS};

/// The layout version this build writes and reads.
pub const FORMAT_VERSION: u64 = 3;

const FORMAT: TableDefinition<'static, &str, u64> = TableDefinition::new("format");
const V1_EVENTS: TableDefinition<'static, (&str, u64), &[u8]> = TableDefinition::new("events");
const V1_IDS: TableDefinition<'static, (&str, &str), u64> = TableDefinition::new("event_ids");
const V2_EVENTS: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("events.2");

/// What opening found: a new database, one of this layout, or one moved
/// to it from an older one (with the rows moved).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Opened {
    New,
    Current,
    Moved { events: u64, ids: u64 },
}

/// Make the database one of this layout, in `txn`: a new one is marked
/// with it; one of layout 1 or 2 has its events (and layout 1 its ids)
/// moved to this layout's tables (the old ones dropped), in the same
/// transaction, so that a crash leaves it at one layout or the other. Any
/// other version is refused.
pub(super) fn ready(
    txn: &WriteTransaction,
) -> Result<Opened, Box<dyn std::error::Error + Send + Sync>> {
    let mut fmt = txn.open_table(FORMAT)?;
    let found = fmt.get("version")?.map(|v| v.value());
    let opened = match found {
        Some(FORMAT_VERSION) => Opened::Current,
        None => Opened::New,
        Some(1) => from_v1(txn)?,
        Some(2) => from_v2(txn)?,
        Some(other) => {
            return Err(format!(
                "store layout version {other} is not supported by this build (expects {FORMAT_VERSION})"
            )
            .into())
        }
    };
    fmt.insert("version", FORMAT_VERSION)?;
    Ok(opened)
}

/// Move layout 1's events and ids to this layout's tables, an event to a
/// row.
fn from_v1(txn: &WriteTransaction) -> Result<Opened, redb::Error> {
    let (mut events, mut ids) = (0, 0);
    {
        let mut to = txn.open_table(EVENTS)?;
        let from = txn.open_table(V1_EVENTS)?;
        let mut key = KeyBuf::default();
        let mut rows = RunWriter::default();
        for item in from.iter()? {
            let (k, v) = item?;
            let (session, cursor) = k.value();
            rows.put_raw(&mut to, session, cursor, [v.value()])?;
            events += 1;
        }
        let mut to = txn.open_table(IDS)?;
        let from = txn.open_table(V1_IDS)?;
        for item in from.iter()? {
            let (k, v) = item?;
            let (session, id) = k.value();
            to.insert(key.id(session, id), v.value())?;
            ids += 1;
        }
    }
    txn.delete_table(V1_EVENTS)?;
    txn.delete_table(V1_IDS)?;
    Ok(Opened::Moved { events, ids })
}

/// Move layout 2's events, a row each, to this layout's rows, an event to
/// a row (its keys are this layout's; its ids table is this layout's).
fn from_v2(txn: &WriteTransaction) -> Result<Opened, redb::Error> {
    let mut events = 0;
    {
        let mut to = txn.open_table(EVENTS)?;
        let from = txn.open_table(V2_EVENTS)?;
        let mut rows = RunWriter::default();
        for item in from.iter()? {
            let (k, v) = item?;
            let (session, cursor) = session_and_cursor(k.value())?;
            rows.put_raw(&mut to, session, cursor, [v.value()])?;
            events += 1;
        }
    }
    txn.delete_table(V2_EVENTS)?;
    Ok(Opened::Moved { events, ids: 0 })
}

#[cfg(test)]
mod tests {
    use redb::TableHandle;

    use super::*;
    use crate::store::contract::{batch, ev};
    use crate::store::embedded::{wal_tests, EmbeddedLog, EmbeddedOptions, DB_FILE, META};
    use crate::store::{codec, EventLog, SessionMeta, StoredEvent};

    fn opts() -> EmbeddedOptions {
        wal_tests::opts(std::time::Duration::from_millis(250))
    }

    /// The layout version the database file in `dir` is marked with.
    fn version(dir: &std::path::Path) -> u64 {
        let db = redb::Database::open(dir.join(DB_FILE)).unwrap();
        let r = db.begin_read().unwrap();
        let t = r.open_table(FORMAT).unwrap();
        let v = t.get("version").unwrap().unwrap().value();
        v
    }

    /// A database as a build of layout `version` left it: two sessions
    /// ("s" with events 1-3, "s2" with event 1), each event (and its
    /// encoding) put in that layout's tables by `put`.
    fn old_layout(
        path: &std::path::Path,
        version: u64,
        put: fn(&WriteTransaction, &str, &StoredEvent, &[u8]),
    ) -> String {
        let db = redb::Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        let mut meta = SessionMeta::new_epoch();
        {
            txn.open_table(FORMAT)
                .unwrap()
                .insert("version", version)
                .unwrap();
            let mut metas = txn.open_table(META).unwrap();
            for (session, head) in [("s", 3), ("s2", 1)] {
                for c in 1..=head {
                    let (e, mut raw) = (ev(c), Vec::new());
                    codec::encode_event(&mut raw, &e);
                    put(&txn, session, &e, &raw);
                }
                (meta.head, meta.first) = (head, 1);
                metas
                    .insert(session, codec::encode_meta(&meta).as_slice())
                    .unwrap();
            }
        }
        txn.commit().unwrap();
        meta.epoch
    }

    /// [`old_layout`] with layout 1's tables (tuple keys).
    fn layout_1(path: &std::path::Path) -> String {
        old_layout(path, 1, |txn, session, e, raw| {
            let mut events = txn.open_table(V1_EVENTS).unwrap();
            events.insert((session, e.cursor), raw).unwrap();
            let mut ids = txn.open_table(V1_IDS).unwrap();
            ids.insert((session, e.event_id.as_str()), e.cursor)
                .unwrap();
        })
    }

    /// [`old_layout`] with layout 2's tables (an event to a row).
    fn layout_2(path: &std::path::Path) -> String {
        old_layout(path, 2, |txn, session, e, raw| {
            let mut key = KeyBuf::default();
            let mut events = txn.open_table(V2_EVENTS).unwrap();
            events.insert(key.event(session, e.cursor), raw).unwrap();
            let mut ids = txn.open_table(IDS).unwrap();
            ids.insert(key.id(session, &e.event_id), e.cursor).unwrap();
        })
    }

    #[test]
    fn a_layout_this_build_does_not_know_is_refused_and_left_as_it_is() {
        let dir = wal_tests::tmpdir("layout9");
        {
            let db = redb::Database::create(dir.join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(FORMAT)
                .unwrap()
                .insert("version", 9)
                .unwrap();
            txn.commit().unwrap();
        }
        let err = EmbeddedLog::open(&dir, opts()).unwrap_err().to_string();
        assert!(
            err.contains("layout version 9") && err.contains(DB_FILE),
            "{err}"
        );
        assert_eq!(version(&dir), 9, "not overwritten");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_data_dir_of_layout_1_is_moved_to_this_layout_with_every_event_and_id() {
        moved_with_every_event_and_id(layout_1, &["events", "event_ids"]).await;
    }

    #[tokio::test]
    async fn a_data_dir_of_layout_2_is_moved_to_this_layout_with_every_event_and_id() {
        moved_with_every_event_and_id(layout_2, &["events.2"]).await;
    }

    /// A data dir an older build (`make`) left opens at this layout, twice,
    /// with every event, id and meta, takes appends, and has lost the old
    /// layout's tables (`old`).
    async fn moved_with_every_event_and_id(make: fn(&std::path::Path) -> String, old: &[&str]) {
        let dir = wal_tests::tmpdir("layout-old");
        let epoch = make(&dir.join(DB_FILE));
        for round in 0..2 {
            let log = EmbeddedLog::open(&dir, opts()).unwrap();
            let m = log.meta("s").await.unwrap().unwrap();
            assert_eq!((m.epoch.as_str(), m.head), (epoch.as_str(), 3 + round));
            let got = log.read("s", 1, 10).await.unwrap();
            let want: Vec<_> = (2..=3 + round).map(ev).collect();
            assert_eq!(
                got.iter()
                    .map(|e| (e.cursor, &e.event_id, &e.fact, &e.frame))
                    .collect::<Vec<_>>(),
                want.iter()
                    .map(|e| (e.cursor, &e.event_id, &e.fact, &e.frame))
                    .collect::<Vec<_>>(),
                "round {round}"
            );
            assert_eq!(log.read("s2", 0, 10).await.unwrap().len(), 1);
            let ids = ["e2".to_string(), "e9".to_string()];
            assert_eq!(log.lookup_ids("s", &ids).await.unwrap(), [Some(2), None]);
            if round == 0 {
                let mut b = batch(vec![ev(4)], None);
                b.epoch = epoch.clone();
                assert_eq!(log.append("s", b).await.unwrap().head, 4);
            }
        }
        assert_eq!(version(&dir), FORMAT_VERSION);
        let db = redb::Database::open(dir.join(DB_FILE)).unwrap();
        let tables: Vec<_> = db
            .begin_read()
            .unwrap()
            .list_tables()
            .unwrap()
            .map(|t| t.name().to_string())
            .collect();
        assert!(
            !tables.iter().any(|t| old.contains(&t.as_str())),
            "the old layout's tables {old:?} are dropped: {tables:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
