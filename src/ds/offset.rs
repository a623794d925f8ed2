//! Offsets and live cursors. An offset is the cursor of the last record
//! read, as 16 decimal digits, then `_` and 16 zeros (a position inside a
//! record, kept for forks at sub-offsets; always 0 today): the form the
//! protocol's own servers and tests use (`0000000000000000_0000000000000000`
//! is the beginning of a stream), opaque to clients, sorting as positions
//! do, and never `-1` or `now`, the protocol's two sentinels. A live cursor is
//! the protocol's interval number (20-second intervals since 2024-10-09),
//! moved past the one the client echoes so that caches never loop.

/// Digits of an offset.
const WIDTH: usize = 16;

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offset {
    /// `-1` (or no offset): the stream's beginning.
    Start,
    /// `now`: the stream's tail.
    Now,
    /// After the record with this cursor.
    After(u64),
}

/// The offset after the record at `cursor`.
pub fn format(cursor: u64) -> String {
    format!("{cursor:0WIDTH$}_{:0WIDTH$}", 0)
}

/// The offset after `cursor` of a stream whose offsets carry `tag` (a
/// session's epoch): `<cursor>_<tag>`.
pub fn format_tagged(cursor: u64, tag: &str) -> String {
    format!("{cursor:0WIDTH$}_{tag}")
}

/// Parse an offset of a tagged stream: the sentinels, or `<cursor>_<tag>`
/// with the tag it was given (`None` when malformed).
pub fn parse_tagged(v: &str) -> Option<(Offset, Option<&str>)> {
    match v {
        "-1" => Some((Offset::Start, None)),
        "now" => Some((Offset::Now, None)),
        _ => {
            let (cursor, tag) = v.split_once('_')?;
            let ok = cursor.len() == WIDTH
                && cursor.bytes().all(|b| b.is_ascii_digit())
                && !tag.is_empty()
                && tag.len() <= 64
                && tag.bytes().all(|b| b.is_ascii_alphanumeric());
            ok.then(|| cursor.parse().ok().map(|c| (Offset::After(c), Some(tag))))
                .flatten()
        }
    }
}

/// Parse a client's offset; `None` when it is not one this server made.
pub fn parse(v: &str) -> Option<Offset> {
    match v {
        "-1" => Some(Offset::Start),
        "now" => Some(Offset::Now),
        _ => {
            let (cursor, within) = v.split_once('_')?;
            let digits = |p: &str| p.len() == WIDTH && p.bytes().all(|b| b.is_ascii_digit());
            if !digits(cursor) || !digits(within) || within.bytes().any(|b| b != b'0') {
                return None;
            }
            cursor.parse().ok().map(Offset::After)
        }
    }
}

/// 2024-10-09T00:00:00Z in Unix seconds: where the protocol counts
/// cursor intervals from.
const CURSOR_EPOCH_SECS: u64 = 1_728_432_000;
/// The length of a cursor interval.
const INTERVAL_SECS: u64 = 20;

/// The cursor of a live response at `now_ms`, given the one the client
/// echoed: the current interval, or when the client is already there (or
/// ahead), past it by a random 1 to 180 intervals (up to an hour).
pub fn cursor_interval(now_ms: u64, echoed: Option<&str>) -> u64 {
    let current = (now_ms / 1000).saturating_sub(CURSOR_EPOCH_SECS) / INTERVAL_SECS;
    match echoed.and_then(|c| c.parse::<u64>().ok()) {
        Some(c) if c >= current => {
            let jitter = (uuid::Uuid::new_v4().as_u128() % 180) as u64 + 1;
            c.saturating_add(jitter)
        }
        _ => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_sort_as_cursors_and_parse_back() {
        let (a, b) = (format(9), format(10));
        assert!(a < b);
        assert_eq!(b, "0000000000000010_0000000000000000");
        assert_eq!(parse(&b), Some(Offset::After(10)));
        assert_eq!(parse("-1"), Some(Offset::Start));
        assert_eq!(parse("now"), Some(Offset::Now));
        for bad in [
            "",
            "0,1",
            "0 1",
            "../x",
            "0000000000000001",
            "0000000000000001_000000000000000a",
            "0000000000000001_0000000000000001",
            "00000000000000001_0000000000000000",
            "1",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_cursor_moves_past_the_one_echoed() {
        let now = (CURSOR_EPOCH_SECS + 20 * 1000) * 1000;
        assert_eq!(cursor_interval(now, None), 1000);
        assert_eq!(cursor_interval(now, Some("999")), 1000);
        for _ in 0..50 {
            let c = cursor_interval(now, Some("1000"));
            assert!((1001..=1180).contains(&c), "{c}");
        }
    }
}
