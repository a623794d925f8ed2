//! Reading the scripts' and commands' replies: session metas, log entries
//! (stream entries whose ids are cursors) and id lookups.

use bytes::Bytes;
use redis::Value;

use super::corrupt;
use crate::store::{SessionMeta, StoreError, StoredEvent};

/// Meta fields in the order the scripts return them.
pub(super) const META_FIELDS: usize = 7;

/// Parse the meta fields (epoch, head, first, status, updated, deleted).
pub(super) fn parse_meta(session: &str, v: &[Value]) -> Result<SessionMeta, StoreError> {
    if v.len() < META_FIELDS {
        return Err(corrupt(session, "short meta"));
    }
    let text = |i: usize| -> Result<Option<String>, StoreError> {
        match &v[i] {
            Value::Nil => Ok(None),
            Value::BulkString(b) => String::from_utf8(b.clone())
                .map(Some)
                .map_err(|_| corrupt(session, "meta is not UTF-8")),
            Value::SimpleString(s) => Ok(Some(s.clone())),
            other => Err(corrupt(session, format!("meta field {i}: {other:?}"))),
        }
    };
    let num = |i: usize| -> Result<u64, StoreError> {
        Ok(match text(i)? {
            None => 0,
            Some(s) if s.is_empty() => 0,
            Some(s) => s
                .parse()
                .map_err(|_| corrupt(session, format!("meta field {i}: {s:?}")))?,
        })
    };
    let epoch = text(0)?.ok_or_else(|| corrupt(session, "meta without epoch"))?;
    Ok(SessionMeta {
        epoch,
        head: num(1)?,
        first: num(2)?.max(1),
        base: num(6)?,
        listing: text(3)?.filter(|s| !s.is_empty()),
        updated_ms: num(4)?,
        deleted: num(5)? == 1,
    })
}

pub(super) fn bytes_of(v: &Value) -> Option<Bytes> {
    match v {
        Value::BulkString(b) => Some(Bytes::copy_from_slice(b)),
        Value::SimpleString(s) => Some(Bytes::copy_from_slice(s.as_bytes())),
        _ => None,
    }
}

pub(super) fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

pub(super) fn array(v: Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(a) => Some(a),
        Value::Nil => Some(Vec::new()),
        _ => None,
    }
}

/// Parse XRANGE entries into stored events.
pub(super) fn parse_events(session: &str, entries: Value) -> Result<Vec<StoredEvent>, StoreError> {
    let entries = array(entries).ok_or_else(|| corrupt(session, "log read is not an array"))?;
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let mut parts = array(entry)
            .ok_or_else(|| corrupt(session, "log entry is not an array"))?
            .into_iter();
        let id = parts
            .next()
            .as_ref()
            .and_then(text_of)
            .ok_or_else(|| corrupt(session, "log entry without id"))?;
        let cursor: u64 = id
            .split('-')
            .next()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| corrupt(session, format!("log entry id {id:?}")))?;
        let fields = parts
            .next()
            .and_then(array)
            .ok_or_else(|| corrupt(session, format!("log entry {id} without fields")))?;
        let (mut event_id, mut received_ms, mut fact, mut frame) = (None, None, None, None);
        for pair in fields.chunks(2) {
            let [k, v] = pair else { break };
            match text_of(k).as_deref() {
                Some("e") => event_id = text_of(v),
                Some("r") => received_ms = text_of(v).and_then(|r| r.parse().ok()),
                Some("f") => fact = bytes_of(v),
                Some("j") => frame = bytes_of(v),
                _ => {}
            }
        }
        match (event_id, received_ms, fact, frame) {
            (Some(event_id), Some(received_ms), Some(fact), Some(frame)) => out.push(StoredEvent {
                cursor,
                event_id,
                received_ms,
                fact,
                frame,
            }),
            _ => return Err(corrupt(session, format!("log entry {id} lacks a field"))),
        }
    }
    Ok(out)
}

pub(super) fn parse_cursors(
    session: &str,
    v: Value,
    n: usize,
) -> Result<Vec<Option<u64>>, StoreError> {
    let a = array(v).ok_or_else(|| corrupt(session, "id lookup is not an array"))?;
    let mut out: Vec<Option<u64>> = a
        .iter()
        .map(|v| text_of(v).and_then(|s| s.parse().ok()))
        .collect();
    out.resize(n, None);
    Ok(out)
}
