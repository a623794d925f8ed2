//! The database's layout: its version, the keys of the events and ids
//! tables, and the move of a data dir of an older layout to this one.
//!
//! Layout 2 keys a session's events and ids by bytes: the session's name,
//! a `0xFF` byte, then the cursor (8 bytes, big-endian) or the event id.
//! redb compares keys at every step of an insert or a lookup, and layout
//! 1's tuple keys (`(&str, u64)`, `(&str, &str)`) were taken apart and
//! checked as UTF-8 at each compare: 14.5% of a durable POST's
//! instructions as callgrind counts them, where each flush is small (less
//! at full speed; `docs/BENCHMARKS.md`). Bytes compare as they are. No
//! UTF-8 text holds the byte `0xFF`, so a session's rows are one run of
//! keys, in cursor order (its ids in byte order), with no other session's
//! between them.

// redb's own error type is large; these helpers only pass it up.
#![allow(clippy::result_large_err)]

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::{EVENTS, IDS};

/// The layout version this build writes and reads.
pub const FORMAT_VERSION: u64 = 2;

const FORMAT: TableDefinition<'static, &str, u64> = TableDefinition::new("format");
const V1_EVENTS: TableDefinition<'static, (&str, u64), &[u8]> = TableDefinition::new("events");
const V1_IDS: TableDefinition<'static, (&str, &str), u64> = TableDefinition::new("event_ids");

/// Ends a session's name in a key: no UTF-8 text holds it.
const SEP: u8 = 0xFF;

/// The key of a session's rows, up to and with the separator.
pub(super) fn prefix(session: &str) -> Vec<u8> {
    let mut k = KeyBuf::default();
    k.session(session);
    k.0
}

/// The key of a session's event at `cursor`, as [`KeyBuf::event`] writes it.
pub(super) fn event_key(session: &str, cursor: u64) -> Vec<u8> {
    KeyBuf::default().event(session, cursor).to_vec()
}

/// The key of an event id of a session, as [`KeyBuf::id`] writes it.
pub(super) fn id_key(session: &str, id: &str) -> Vec<u8> {
    KeyBuf::default().id(session, id).to_vec()
}

/// The cursor of an event key (its last eight bytes).
pub(super) fn cursor_of(key: &[u8]) -> u64 {
    let tail = key.len().checked_sub(8).map_or(&[][..], |at| &key[at..]);
    tail.try_into().map_or(0, u64::from_be_bytes)
}

/// Keys written in place, into one buffer kept across a transaction's
/// inserts, not a new allocation per key.
#[derive(Default)]
pub(super) struct KeyBuf(Vec<u8>);

impl KeyBuf {
    fn session(&mut self, session: &str) -> &mut Vec<u8> {
        self.0.clear();
        self.0.extend_from_slice(session.as_bytes());
        self.0.push(SEP);
        &mut self.0
    }

    /// The key of a session's event at `cursor`, in the buffer.
    pub fn event(&mut self, session: &str, cursor: u64) -> &[u8] {
        let k = self.session(session);
        k.extend_from_slice(&cursor.to_be_bytes());
        k
    }

    /// The key of an event id of a session, in the buffer.
    pub fn id(&mut self, session: &str, id: &str) -> &[u8] {
        let k = self.session(session);
        k.extend_from_slice(id.as_bytes());
        k
    }
}

/// What opening found: a new database, one of this layout, or one moved
/// to it from layout 1 (with the rows moved).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Opened {
    New,
    Current,
    Moved { events: u64, ids: u64 },
}

/// Make the database one of this layout, in `txn`: a new one is marked
/// with it; one of layout 1 has its events and ids moved to layout 2's
/// tables (the old ones dropped), in the same transaction, so that a crash
/// leaves it at one layout or the other. Any other version is refused.
pub(super) fn ready(
    txn: &WriteTransaction,
) -> Result<Opened, Box<dyn std::error::Error + Send + Sync>> {
    let mut fmt = txn.open_table(FORMAT)?;
    let found = fmt.get("version")?.map(|v| v.value());
    let opened = match found {
        Some(FORMAT_VERSION) => Opened::Current,
        None => Opened::New,
        Some(1) => from_v1(txn)?,
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

/// Move layout 1's events and ids to layout 2's tables.
fn from_v1(txn: &WriteTransaction) -> Result<Opened, redb::Error> {
    let (mut events, mut ids) = (0, 0);
    {
        let mut to = txn.open_table(EVENTS)?;
        let from = txn.open_table(V1_EVENTS)?;
        let mut key = KeyBuf::default();
        for item in from.iter()? {
            let (k, v) = item?;
            let (session, cursor) = k.value();
            to.insert(key.event(session, cursor), v.value())?;
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

#[cfg(test)]
mod tests {
    use redb::TableHandle;

    use super::*;
    use crate::store::contract::{batch, ev};
    use crate::store::embedded::{wal_tests, EmbeddedLog, EmbeddedOptions, DB_FILE, META};
    use crate::store::{codec, EventLog, SessionMeta};

    /// The keys of `sorted` with `prefix`, checked to be one run.
    fn run<'k>(sorted: &'k [Vec<u8>], prefix: &[u8]) -> &'k [Vec<u8>] {
        let at: Vec<_> = (0..sorted.len())
            .filter(|i| sorted[*i].starts_with(prefix))
            .collect();
        let (first, last) = (at[0], at[at.len() - 1]);
        assert_eq!(at.len(), last - first + 1, "one run: {sorted:?}");
        &sorted[first..=last]
    }

    #[test]
    fn a_sessions_keys_are_one_run_in_cursor_order() {
        let mut keys = vec![
            event_key("a", 2),
            event_key("ab", 1),
            event_key("a", 1),
            event_key("a", 256),
            event_key("a\u{10FFFF}", 0),
            event_key("", 7),
        ];
        keys.sort();
        let cursors: Vec<_> = run(&keys, &prefix("a"))
            .iter()
            .map(|k| cursor_of(k))
            .collect();
        assert_eq!(cursors, [1, 2, 256]);
        assert_eq!(cursor_of(&event_key("s", u64::MAX)), u64::MAX);
        let mut ids = vec![
            id_key("a", "b"),
            id_key("ab", ""),
            id_key("a", ""),
            id_key("a\u{7f}", "x"),
            id_key("a", "\u{10FFFF}"),
        ];
        ids.sort();
        assert_eq!(run(&ids, &prefix("a")).len(), 3);
        let mut buf = KeyBuf::default();
        assert_eq!(buf.event("s", 9), b"s\xff\0\0\0\0\0\0\0\x09");
        assert_eq!(buf.id("s", "e1"), b"s\xffe1");
        assert_eq!(prefix("s"), b"s\xff");
    }

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

    /// A database as a build of layout 1 left it: two sessions ("s" with
    /// events 1-3, "s2" with event 1), written with layout 1's tables.
    fn layout_1(path: &std::path::Path) -> String {
        let db = redb::Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        let mut meta = SessionMeta::new_epoch();
        {
            txn.open_table(FORMAT)
                .unwrap()
                .insert("version", 1)
                .unwrap();
            let mut metas = txn.open_table(META).unwrap();
            let mut events = txn.open_table(V1_EVENTS).unwrap();
            let mut ids = txn.open_table(V1_IDS).unwrap();
            for (session, head) in [("s", 3), ("s2", 1)] {
                for c in 1..=head {
                    let (e, mut raw) = (ev(c), Vec::new());
                    codec::encode_event(&mut raw, &e);
                    events.insert((session, c), raw.as_slice()).unwrap();
                    ids.insert((session, e.event_id.as_str()), c).unwrap();
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
        let dir = wal_tests::tmpdir("layout1");
        let epoch = layout_1(&dir.join(DB_FILE));
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
            !tables.iter().any(|t| t == "events" || t == "event_ids"),
            "layout 1's tables are dropped: {tables:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
