//! A stream's records as the log stores them: the bytes in `fact`, and in
//! `frame` one byte of [`Kind`] and the record's message count (JSON).

use bytes::Bytes;

use super::{Kind, Record};
use crate::store::{now_ms, StoredEvent};

/// The data records of an append's messages: one record for a byte
/// stream's body, one for all of a JSON append's messages.
pub(super) fn data_records(
    messages: &[Bytes],
    json: bool,
) -> impl Iterator<Item = (Kind, Bytes, u32)> {
    let record = if messages.is_empty() {
        None
    } else if json {
        let mut joined = Vec::with_capacity(messages.iter().map(|m| m.len() + 1).sum());
        for (i, m) in messages.iter().enumerate() {
            if i > 0 {
                joined.push(b',');
            }
            joined.extend_from_slice(m);
        }
        Some((Kind::Data, Bytes::from(joined), messages.len() as u32))
    } else {
        let mut all = Vec::with_capacity(messages.iter().map(Bytes::len).sum());
        for m in messages {
            all.extend_from_slice(m);
        }
        Some((Kind::Data, Bytes::from(all), 1))
    };
    record.into_iter()
}

pub(super) fn record(cursor: u64, kind: Kind, bytes: Bytes, messages: u32) -> StoredEvent {
    let mut frame = Vec::with_capacity(5);
    frame.push(kind.byte());
    frame.extend_from_slice(&messages.to_le_bytes());
    StoredEvent {
        cursor,
        event_id: itoa::Buffer::new().format(cursor).to_string(),
        received_ms: now_ms(),
        fact: bytes,
        frame: Bytes::from(frame),
    }
}

/// The data of a stored record, if it is a data record.
pub(super) fn data_of(e: &StoredEvent) -> Option<Record> {
    if e.frame.first() != Some(&Kind::Data.byte()) {
        return None;
    }
    let messages = e
        .frame
        .get(1..5)
        .and_then(|b| b.try_into().ok())
        .map_or(1, u32::from_le_bytes);
    Some(Record {
        cursor: e.cursor,
        bytes: e.fact.clone(),
        messages,
    })
}
