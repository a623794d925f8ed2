//! The keys of the events and ids tables (layouts 2 and 3): a session's
//! name, a `0xFF` byte, then the cursor (8 bytes, big-endian) or the event
//! id. redb compares keys at every step of an insert or a lookup, and
//! layout 1's tuple keys were taken apart and checked as UTF-8 at each
//! compare: 14.5% of a durable POST's instructions as callgrind counts
//! them, where each flush is small (less at full speed;
//! `docs/BENCHMARKS.md`). Bytes compare as they are. No UTF-8 text holds
//! the byte `0xFF`, so a session's rows are one run of keys, in cursor
//! order (its ids in byte order), with no other session's between them.

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

/// The session and cursor of an event key, as [`KeyBuf::event`] wrote it.
#[allow(clippy::result_large_err)] // redb's own error, passed up
pub(super) fn session_and_cursor(key: &[u8]) -> Result<(&str, u64), redb::Error> {
    let name = key
        .len()
        .checked_sub(9)
        .filter(|at| key[*at] == SEP)
        .and_then(|at| std::str::from_utf8(&key[..at]).ok());
    match name {
        Some(session) => Ok((session, cursor_of(key))),
        None => Err(redb::Error::Corrupted(format!(
            "an event key of layout 2 is not a session's name and a cursor: {key:?}"
        ))),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let key = event_key("a\u{10FFFF}", 5);
        assert_eq!(session_and_cursor(&key).unwrap(), ("a\u{10FFFF}", 5));
        assert_eq!(session_and_cursor(&event_key("", 0)).unwrap(), ("", 0));
        for bad in [
            &b"\xff1234567"[..],
            b"s\x001234567\x09",
            b"\xc3\xff12345678",
        ] {
            assert!(session_and_cursor(bad).is_err(), "{bad:?}");
        }
    }
}
