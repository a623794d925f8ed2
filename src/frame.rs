//! Frames: what a stream carries (`snapshot`, `delta`, `reset`). Each frame
//! is serialised once, to JSON and to its SSE form, and the bytes are shared
//! (`Arc<Frame>`) by every subscriber.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;

use crate::projection::ChunkOut;

/// The frame types of PROTOCOL section 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Snapshot,
    Delta,
    Reset,
}

impl FrameKind {
    /// The `type` / SSE `event` name.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameKind::Snapshot => "snapshot",
            FrameKind::Delta => "delta",
            FrameKind::Reset => "reset",
        }
    }
}

/// One encoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub kind: FrameKind,
    /// The cursor (`None` for `reset`).
    pub cursor: Option<u64>,
    /// The JSON object, one line.
    pub json: Bytes,
    /// `id: <cursor>\nevent: <type>\ndata: <json>\n\n`.
    pub sse: Bytes,
}

/// A shared frame.
pub type SharedFrame = Arc<Frame>;

impl Frame {
    /// Wrap already-encoded JSON (e.g. read back from the store).
    pub fn from_json(kind: FrameKind, cursor: Option<u64>, json: Bytes) -> Frame {
        let mut sse = BytesMut::with_capacity(json.len() + 40);
        if let Some(c) = cursor {
            sse.put_slice(b"id: ");
            sse.put_slice(itoa_u64(c).as_bytes());
            sse.put_u8(b'\n');
        }
        sse.put_slice(b"event: ");
        sse.put_slice(kind.as_str().as_bytes());
        sse.put_slice(b"\ndata: ");
        sse.put_slice(&json);
        sse.put_slice(b"\n\n");
        Frame {
            kind,
            cursor,
            json,
            sse: sse.freeze(),
        }
    }
}

fn itoa_u64(n: u64) -> String {
    n.to_string()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeltaOut<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    cursor: u64,
    event_id: &'a str,
    event_class: &'a str,
    chunks: &'a [ChunkOut],
}

/// Encode a `delta` frame's JSON.
pub fn delta_json(cursor: u64, event_id: &str, event_class: &str, chunks: &[ChunkOut]) -> Bytes {
    let out = DeltaOut {
        ty: "delta",
        cursor,
        event_id,
        event_class,
        chunks,
    };
    Bytes::from(serde_json::to_vec(&out).expect("delta frames serialise"))
}

/// A `delta` frame.
pub fn delta(cursor: u64, event_id: &str, event_class: &str, chunks: &[ChunkOut]) -> Frame {
    Frame::from_json(
        FrameKind::Delta,
        Some(cursor),
        delta_json(cursor, event_id, event_class, chunks),
    )
}

#[derive(Serialize)]
struct SnapshotOut<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    cursor: u64,
    epoch: &'a str,
    state: &'a serde_json::Value,
}

/// A `snapshot` frame of the projection state at `cursor`.
pub fn snapshot(cursor: u64, epoch: &str, state: &serde_json::Value) -> Frame {
    let json = serde_json::to_vec(&SnapshotOut {
        ty: "snapshot",
        cursor,
        epoch,
        state,
    })
    .expect("snapshots serialise");
    Frame::from_json(FrameKind::Snapshot, Some(cursor), Bytes::from(json))
}

/// A `reset` frame; a `snapshot` always follows it.
pub fn reset(reason: &str) -> Frame {
    let json = serde_json::to_vec(&serde_json::json!({"type": "reset", "reason": reason}))
        .expect("reset serialises");
    Frame::from_json(FrameKind::Reset, None, Bytes::from(json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_form_and_json_agree() {
        let f = delta(7, "e7", "text.delta", &[]);
        assert_eq!(
            &f.json[..],
            br#"{"type":"delta","cursor":7,"eventId":"e7","eventClass":"text.delta","chunks":[]}"#
        );
        let sse = std::str::from_utf8(&f.sse).unwrap();
        assert!(sse.starts_with("id: 7\nevent: delta\ndata: {"));
        assert!(sse.ends_with("}\n\n"));
        let r = reset("cursor_ahead");
        assert_eq!(
            std::str::from_utf8(&r.sse).unwrap(),
            "event: reset\ndata: {\"type\":\"reset\",\"reason\":\"cursor_ahead\"}\n\n"
        );
    }
}
