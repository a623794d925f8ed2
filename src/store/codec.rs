//! Byte layouts of stored values, shared by the backends: events (received
//! time, id, fact, frame) and session metas (JSON) of the embedded store, and
//! checkpoints (cursor, state) of the embedded and Redis stores.

use bytes::Bytes;

use crate::store::{Checkpoint, SessionMeta, StoreError, StoredEvent};

/// `[received_ms u64 LE][id_len u32 LE][id][fact_len u32 LE][fact][frame]`,
/// appended to `v` (a buffer kept across events, not one allocation per
/// event).
pub fn encode_event(v: &mut Vec<u8>, e: &StoredEvent) {
    v.reserve(16 + e.event_id.len() + e.fact.len() + e.frame.len());
    v.extend_from_slice(&e.received_ms.to_le_bytes());
    v.extend_from_slice(&(e.event_id.len() as u32).to_le_bytes());
    v.extend_from_slice(e.event_id.as_bytes());
    v.extend_from_slice(&(e.fact.len() as u32).to_le_bytes());
    v.extend_from_slice(&e.fact);
    v.extend_from_slice(&e.frame);
}

fn corrupt(session: &str, what: String) -> StoreError {
    StoreError::Corrupt {
        session: session.to_string(),
        detail: what,
    }
}

fn u32_at(raw: &[u8], at: usize) -> Option<usize> {
    raw.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(|b| u32::from_le_bytes(b) as usize)
}

fn u64_at(raw: &[u8], at: usize) -> Option<u64> {
    raw.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
}

/// The received time and id of an encoded event, without copying the rest.
pub fn event_header(raw: &[u8]) -> Option<(u64, &str)> {
    let received = u64_at(raw, 0)?;
    let id_len = u32_at(raw, 8)?;
    let id = std::str::from_utf8(raw.get(12..12 + id_len)?).ok()?;
    Some((received, id))
}

/// Decode an event stored at `cursor`.
pub fn decode_event(session: &str, cursor: u64, raw: &[u8]) -> Result<StoredEvent, StoreError> {
    let bad = || corrupt(session, format!("event at cursor {cursor} is truncated"));
    let (received_ms, id) = event_header(raw).ok_or_else(bad)?;
    let fact_at = 12 + id.len();
    let fact_len = u32_at(raw, fact_at).ok_or_else(bad)?;
    let fact_start = fact_at + 4;
    let fact = raw.get(fact_start..fact_start + fact_len).ok_or_else(bad)?;
    Ok(StoredEvent {
        cursor,
        event_id: id.to_string(),
        received_ms,
        fact: Bytes::copy_from_slice(fact),
        frame: Bytes::copy_from_slice(&raw[fact_start + fact_len..]),
    })
}

/// `[cursor u64 LE][state]`.
pub fn encode_checkpoint(cp: &Checkpoint) -> Vec<u8> {
    let mut raw = Vec::with_capacity(8 + cp.state.len());
    raw.extend_from_slice(&cp.cursor.to_le_bytes());
    raw.extend_from_slice(&cp.state);
    raw
}

/// The cursor of an encoded checkpoint.
pub fn checkpoint_cursor(raw: &[u8]) -> Option<u64> {
    u64_at(raw, 0)
}

pub fn decode_checkpoint(session: &str, raw: &[u8]) -> Result<Checkpoint, StoreError> {
    let cursor =
        checkpoint_cursor(raw).ok_or_else(|| corrupt(session, "checkpoint is truncated".into()))?;
    Ok(Checkpoint {
        cursor,
        state: Bytes::copy_from_slice(&raw[8..]),
    })
}

pub fn encode_meta(m: &SessionMeta) -> Vec<u8> {
    serde_json::to_vec(m).expect("session meta serialises")
}

pub fn decode_meta(session: &str, raw: &[u8]) -> Result<SessionMeta, StoreError> {
    serde_json::from_slice(raw).map_err(|e| corrupt(session, format!("session meta: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_truncation_is_corrupt() {
        let e = StoredEvent {
            cursor: 9,
            event_id: "évent-1".into(),
            received_ms: 1234,
            fact: Bytes::from_static(b"{\"a\":1}"),
            frame: Bytes::from_static(b"{\"cursor\":9}"),
        };
        let mut raw = b"kept".to_vec();
        encode_event(&mut raw, &e);
        let raw = raw.split_off(4);
        assert_eq!(decode_event("s", 9, &raw).unwrap(), e);
        assert_eq!(event_header(&raw), Some((1234, "évent-1")));
        for cut in [0, 7, 13, raw.len() - e.frame.len() - 3] {
            assert!(matches!(
                decode_event("s", 9, &raw[..cut]),
                Err(StoreError::Corrupt { .. })
            ));
        }
    }

    #[test]
    fn checkpoints_round_trip() {
        let cp = Checkpoint {
            cursor: 42,
            state: Bytes::from_static(b"{}"),
        };
        assert_eq!(decode_checkpoint("s", &encode_checkpoint(&cp)).unwrap(), cp);
        assert!(decode_checkpoint("s", b"123").is_err());
    }
}
