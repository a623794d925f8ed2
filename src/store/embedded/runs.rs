//! Layout 3's event rows: a session's events at consecutive cursors, up to
//! [`RUN_EVENTS`] of them and about [`RUN_BYTES`], in one row keyed by the
//! first one's cursor (`keys`' event key). Each event in the value is
//! its length (`u32`, little-endian) and then its encoding (`codec`).
//!
//! Layout 2 had one row per event, so the flusher made one B-tree insert
//! per event, each shifting the keys after it in its leaf: some 4 µs per
//! single-event POST at full speed and 8% of the durable rate
//! (`docs/BENCHMARKS.md`). A flush now writes a row per session for every
//! 64 of its events. A read finds the row its first cursor falls in and
//! skips the events before it by their lengths; a trim or a delete that
//! ends inside a row writes back the events it keeps, so rows always hold
//! exactly the session's retained events.

// redb's own error type is large; these helpers only pass it up.
#![allow(clippy::result_large_err)]

use std::ops::ControlFlow;

use redb::ReadableTable;

use super::keys::{self, KeyBuf};
use crate::store::codec;
use crate::store::StoredEvent;

/// Most events in a row.
pub(super) const RUN_EVENTS: usize = 64;
/// A row takes no more events once its value is this long (an event
/// longer than this is a row of its own), so that a read of one event
/// never loads much more than it asks for.
pub(super) const RUN_BYTES: usize = 64 << 10;

/// A table of runs, as readers and writers open it.
pub(super) trait Runs: ReadableTable<&'static [u8], &'static [u8]> {}
impl<T: ReadableTable<&'static [u8], &'static [u8]>> Runs for T {}

/// Runs written in place: the value of the run being filled, kept across
/// a transaction's rows.
#[derive(Default)]
pub(super) struct RunWriter {
    key: KeyBuf,
    value: Vec<u8>,
    first: u64,
    count: u64,
}

impl RunWriter {
    /// Write `events` of `session` (in cursor order) as runs.
    pub fn put<'e>(
        &mut self,
        t: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
        session: &str,
        events: impl IntoIterator<Item = &'e StoredEvent>,
    ) -> Result<(), redb::Error> {
        for e in events {
            let full = self.count as usize == RUN_EVENTS || self.value.len() >= RUN_BYTES;
            if self.count > 0 && (full || e.cursor != self.first + self.count) {
                self.finish(t, session)?;
            }
            if self.count == 0 {
                self.first = e.cursor;
            }
            let at = self.value.len();
            self.value.extend_from_slice(&[0; 4]);
            codec::encode_event(&mut self.value, e);
            self.close_len(at);
        }
        self.finish(t, session)
    }

    /// Write raw encodings at consecutive cursors from `first` as one run
    /// (what a trim keeps of a row, or a layout 2 row moved).
    pub fn put_raw<'r>(
        &mut self,
        t: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
        session: &str,
        first: u64,
        raws: impl IntoIterator<Item = &'r [u8]>,
    ) -> Result<(), redb::Error> {
        self.first = first;
        for raw in raws {
            let at = self.value.len();
            self.value.extend_from_slice(&[0; 4]);
            self.value.extend_from_slice(raw);
            self.close_len(at);
        }
        self.finish(t, session)
    }

    /// Fill in the length of the event written after `at`.
    fn close_len(&mut self, at: usize) {
        let len = u32::try_from(self.value.len() - at - 4).unwrap_or(u32::MAX);
        self.value[at..at + 4].copy_from_slice(&len.to_le_bytes());
        self.count += 1;
    }

    /// Insert the run being filled, if it holds any event.
    fn finish(
        &mut self,
        t: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
        session: &str,
    ) -> Result<(), redb::Error> {
        if self.count > 0 {
            let key = self.key.event(session, self.first);
            t.insert(key, self.value.as_slice())?;
        }
        self.value.clear();
        self.count = 0;
        Ok(())
    }
}

/// The events of a run's value: `(cursor, encoding)` from the row's
/// `first` cursor on. A length past the value's end yields an empty
/// encoding (which no decoder takes) and ends the run.
pub(super) fn events(first: u64, value: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    let mut rest = Some(value);
    let mut cursor = first;
    std::iter::from_fn(move || {
        let v = rest.take().filter(|v| !v.is_empty())?;
        let len = v
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(|b| u32::from_le_bytes(b) as usize);
        let (raw, after) = match len.and_then(|n| Some((v.get(4..4 + n)?, &v[4 + n..]))) {
            Some((raw, after)) => (raw, Some(after)),
            None => (&[][..], None),
        };
        rest = after;
        cursor += 1;
        Some((cursor - 1, raw))
    })
}

/// Visit the events of `session` at cursors `from..=upto` in cursor order
/// (`each` may stop it), each as its cursor and encoding.
pub(super) fn visit<T: Runs>(
    t: &T,
    session: &str,
    from: u64,
    upto: u64,
    mut each: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> Result<(), redb::Error> {
    if from > upto {
        return Ok(());
    }
    let start = row_of(t, session, from)?;
    let end = keys::event_key(session, upto);
    for item in t.range(start.as_slice()..=end.as_slice())? {
        let (k, v) = item?;
        for (cursor, raw) in events(keys::cursor_of(k.value()), v.value()) {
            if cursor > upto {
                return Ok(());
            }
            if cursor >= from && each(cursor, raw).is_break() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The key of the row `cursor` of `session` falls in: the last of the
/// session's rows keyed at or before it, else the cursor's own key.
fn row_of<T: Runs>(t: &T, session: &str, cursor: u64) -> Result<Vec<u8>, redb::Error> {
    let (lowest, at) = (
        keys::event_key(session, 0),
        keys::event_key(session, cursor),
    );
    let found = t.range(lowest.as_slice()..=at.as_slice())?.next_back();
    Ok(match found {
        Some(item) => item?.0.value().to_vec(),
        None => at,
    })
}

/// Remove the events of `session` at cursors `from..=upto`: rows wholly
/// inside go, a row that reaches past either end is written back with the
/// events it keeps. The answer: the ids of the events removed.
pub(super) fn remove(
    t: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    session: &str,
    from: u64,
    upto: u64,
) -> Result<Vec<String>, redb::Error> {
    if from > upto {
        return Ok(Vec::new());
    }
    let start = row_of(t, session, from)?;
    let end = keys::event_key(session, upto);
    // Each row met: its key, the events it keeps before the range, and
    // the first cursor and events it keeps after it.
    let mut rows = Vec::new();
    let mut ids = Vec::new();
    for item in t.range(start.as_slice()..=end.as_slice())? {
        let (k, v) = item?;
        let (mut before, mut after) = (Vec::new(), (0, Vec::new()));
        let mut touched = false;
        for (cursor, raw) in events(keys::cursor_of(k.value()), v.value()) {
            if cursor < from {
                before.push(raw.to_vec());
            } else if cursor > upto {
                if after.1.is_empty() {
                    after.0 = cursor;
                }
                after.1.push(raw.to_vec());
            } else {
                touched = true;
                if let Some((_, id)) = codec::event_header(raw) {
                    ids.push(id.to_string());
                }
            }
        }
        if touched {
            rows.push((k.value().to_vec(), before, after));
        }
    }
    let mut w = RunWriter::default();
    for (key, before, (next, after)) in rows {
        // What the row keeps before the range takes its key again.
        if before.is_empty() {
            t.remove(key.as_slice())?;
        } else {
            let first = keys::cursor_of(&key);
            w.put_raw(t, session, first, before.iter().map(Vec::as_slice))?;
        }
        if !after.is_empty() {
            w.put_raw(t, session, next, after.iter().map(Vec::as_slice))?;
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use redb::{ReadableTableMetadata, TableDefinition};

    use super::*;
    use crate::store::contract::ev;
    use crate::store::embedded::wal_tests;

    const T: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("runs");

    fn db() -> (redb::Database, std::path::PathBuf) {
        let dir = wal_tests::tmpdir("runs");
        (redb::Database::create(dir.join("t.redb")).unwrap(), dir)
    }

    /// Write `events` of session "s" (with a neighbour on each side).
    fn write(db: &redb::Database, events: &[StoredEvent]) {
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(T).unwrap();
            let mut w = RunWriter::default();
            w.put(&mut t, "r", &[ev(1)]).unwrap();
            w.put(&mut t, "s", events).unwrap();
            w.put(&mut t, "s\u{1}", &[ev(1)]).unwrap();
        }
        txn.commit().unwrap();
    }

    /// The first cursor and count of every row of "s".
    fn rows(db: &redb::Database) -> Vec<(u64, usize)> {
        let r = db.begin_read().unwrap();
        let t = r.open_table(T).unwrap();
        let (lo, hi) = (keys::event_key("s", 0), keys::event_key("s", u64::MAX));
        t.range(lo.as_slice()..=hi.as_slice())
            .unwrap()
            .map(|i| {
                let (k, v) = i.unwrap();
                let first = keys::cursor_of(k.value());
                (first, events(first, v.value()).count())
            })
            .collect()
    }

    /// The events of "s" at `from..=upto`, decoded.
    fn read(db: &redb::Database, from: u64, upto: u64) -> Vec<StoredEvent> {
        let r = db.begin_read().unwrap();
        let t = r.open_table(T).unwrap();
        let mut out = Vec::new();
        visit(&t, "s", from, upto, |c, raw| {
            out.push(codec::decode_event("s", c, raw).unwrap());
            ControlFlow::Continue(())
        })
        .unwrap();
        out
    }

    fn cursors(events: &[StoredEvent]) -> Vec<u64> {
        events.iter().map(|e| e.cursor).collect()
    }

    #[test]
    fn events_go_in_rows_of_64_and_read_back_from_any_cursor() {
        let (db, dir) = db();
        let all: Vec<_> = (1..=150).map(ev).collect();
        write(&db, &all);
        assert_eq!(rows(&db), [(1, 64), (65, 64), (129, 22)]);
        for from in [0, 1, 2, 64, 65, 66, 128, 129, 150] {
            let got = read(&db, from, u64::MAX);
            assert_eq!(got, all[from.max(1) as usize - 1..], "from {from}");
        }
        assert_eq!(cursors(&read(&db, 60, 70)), (60..=70).collect::<Vec<_>>());
        assert!(read(&db, 151, u64::MAX).is_empty());
        assert!(read(&db, 9, 8).is_empty());
        let mut stopped = Vec::new();
        let r = db.begin_read().unwrap();
        visit(&r.open_table(T).unwrap(), "s", 3, 100, |c, _| {
            stopped.push(c);
            if c == 5 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        assert_eq!(stopped, [3, 4, 5]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_row_ends_at_its_size_at_a_gap_in_cursors_and_at_each_put() {
        let (db, dir) = db();
        let big = |c| StoredEvent {
            frame: Bytes::from(vec![b'x'; 40 << 10]),
            ..ev(c)
        };
        let mut all: Vec<_> = (1..=5).map(big).collect();
        all.extend([ev(6), ev(8), ev(9)]);
        write(&db, &all);
        assert_eq!(rows(&db), [(1, 2), (3, 2), (5, 2), (8, 2)]);
        assert_eq!(read(&db, 0, u64::MAX), all);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Remove `from..=upto` of 1..=150: the ids it answers, and the rows
    /// and events left.
    fn removed(from: u64, upto: u64) -> (Vec<String>, Vec<(u64, usize)>, Vec<u64>) {
        let (db, dir) = db();
        let all: Vec<_> = (1..=150).map(ev).collect();
        write(&db, &all);
        let txn = db.begin_write().unwrap();
        let ids = remove(&mut txn.open_table(T).unwrap(), "s", from, upto).unwrap();
        txn.commit().unwrap();
        let left = (rows(&db), cursors(&read(&db, 0, u64::MAX)));
        let r = db.begin_read().unwrap();
        let t = r.open_table(T).unwrap();
        assert_eq!(
            t.len().unwrap() as usize,
            left.0.len() + 2,
            "neighbours kept"
        );
        let _ = std::fs::remove_dir_all(dir);
        (ids, left.0, left.1)
    }

    #[test]
    fn a_removal_keeps_exactly_the_events_outside_it() {
        let ids = |r: std::ops::RangeInclusive<u64>| r.map(|c| format!("e{c}")).collect::<Vec<_>>();
        let (gone, rows, left) = removed(1, 70);
        assert_eq!(gone, ids(1..=70));
        assert_eq!(rows, [(71, 58), (129, 22)]);
        assert_eq!(left, (71..=150).collect::<Vec<_>>());
        let (gone, rows, left) = removed(10, 20);
        assert_eq!(gone, ids(10..=20));
        assert_eq!(rows, [(1, 9), (21, 44), (65, 64), (129, 22)]);
        assert_eq!(left, (1..=9).chain(21..=150).collect::<Vec<_>>());
        let (gone, rows, _) = removed(1, 150);
        assert_eq!((gone.len(), rows), (150, vec![]));
        let (gone, rows, _) = removed(65, 128);
        assert_eq!((gone, rows), (ids(65..=128), vec![(1, 64), (129, 22)]));
        assert!(removed(151, 200).0.is_empty());
    }

    #[test]
    fn a_value_cut_short_ends_its_row_with_an_encoding_nothing_decodes() {
        let (mut one, mut two) = (Vec::new(), Vec::new());
        codec::encode_event(&mut one, &ev(7));
        codec::encode_event(&mut two, &ev(8));
        let mut value = (one.len() as u32).to_le_bytes().to_vec();
        value.extend_from_slice(&one);
        value.extend_from_slice(&(two.len() as u32 + 5).to_le_bytes());
        value.extend_from_slice(&two);
        let got: Vec<_> = events(7, &value).collect();
        assert_eq!(got, [(7, one.as_slice()), (8, &[][..])]);
        assert!(codec::decode_event("s", 8, got[1].1).is_err());
        assert_eq!(events(1, &[1, 0]).collect::<Vec<_>>(), [(1, &[][..])]);
        assert_eq!(events(1, &[]).count(), 0);
    }
}
