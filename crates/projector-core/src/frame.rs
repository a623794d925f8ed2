//! Frames: what a stream carries (`snapshot`, `delta`, `reset`, `live`). Each frame
//! is serialised once into one buffer holding its SSE form; the JSON (for
//! WebSocket and the store) and each chunk's JSON (for the AI SDK stream)
//! are zero-copy slices of it. Every subscriber shares the same `Arc<Frame>`.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::projection::public_state::TimelineEntry;
use crate::projection::ChunkOut;

/// The frame types of docs/PROTOCOL.md section 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Snapshot,
    Delta,
    Reset,
    /// Where a stream's replay ends: the subscriber is live from its
    /// cursor on (in the JSON only: the frame has no id, so it is never a
    /// resume point).
    Live,
}

impl FrameKind {
    /// The `type` / SSE `event` name.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameKind::Snapshot => "snapshot",
            FrameKind::Delta => "delta",
            FrameKind::Reset => "reset",
            FrameKind::Live => "live",
        }
    }
}

/// Whether a timeline entry says more than the delta frame's `cursor`,
/// `eventId` and `eventClass` already do.
fn has_more(t: &TimelineEntry) -> bool {
    t.source_class != t.class
        || t.status.is_some()
        || t.title.is_some()
        || t.timestamp.is_some()
        || t.taxonomy.is_some()
}

/// The delta frame's `timeline`: what the fact's timeline entry holds
/// beyond the frame's own fields (`sourceClass` only when it differs from
/// `eventClass`), so that a client rebuilds the snapshot's timeline.
fn write_timeline(buf: &mut String, t: &TimelineEntry) {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct More<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        source_class: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        taxonomy: Option<&'a crate::event::Taxonomy>,
    }
    let more = More {
        source_class: (t.source_class != t.class).then_some(&*t.source_class),
        status: t.status.as_deref(),
        title: t.title.as_deref(),
        timestamp: t.timestamp.as_deref(),
        taxonomy: t.taxonomy.as_deref(),
    };
    crate::compact_json::write(buf, &more).expect("timeline entries serialise");
}

/// Where one chunk's JSON sits inside a delta frame's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkSpan {
    pub message_id: Option<Arc<str>>,
    pub range: Range<usize>,
}

/// One encoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub kind: FrameKind,
    /// The cursor of the log position the frame stands for (`None` for
    /// `reset` and `live`, which are no resume points).
    pub cursor: Option<u64>,
    /// The JSON object, one line (a slice of `sse`).
    pub json: Bytes,
    /// `id: <epoch>:<cursor>\nevent: <type>\ndata: <json>\n\n` (no `id`
    /// line for `reset`).
    pub sse: Bytes,
    /// Chunk positions in `json`; `None` when the frame was read back from
    /// the store (see [`Frame::message_chunks`]).
    spans: Option<Vec<ChunkSpan>>,
    /// When a live frame was made, for the publish-to-write latency.
    pub born: Born,
    /// When the server accepted the frame's event (wall-clock ms), for the
    /// views that time their events by it (AG-UI's `timestamp`).
    pub received: Received,
    /// The JSON deflated for WebSocket `permessage-deflate`, made by the
    /// first compressed socket it goes to and shared by the others.
    deflated: Deflated,
}

/// A frame's lazily deflated JSON (`None` inside: it does not shrink).
/// Any two compare equal: it is a cache of the JSON, not more of it.
#[derive(Debug, Clone, Default)]
struct Deflated(std::sync::OnceLock<Option<Bytes>>);

impl PartialEq for Deflated {
    fn eq(&self, _: &Deflated) -> bool {
        true
    }
}

/// When a live frame was made (encoded here at its append, or relayed from
/// another node); `None` for snapshots and frames read back from the store.
/// Any two compare equal: it says when, not what.
#[derive(Debug, Clone, Copy)]
pub struct Born(pub Option<std::time::Instant>);

impl PartialEq for Born {
    fn eq(&self, _: &Born) -> bool {
        true
    }
}

/// Wall-clock milliseconds when the server accepted a delta frame's event
/// (the log's `received_ms`); `None` for snapshots and resets. Any two
/// compare equal: it says when, not what.
#[derive(Debug, Clone, Copy, Default)]
pub struct Received(pub Option<u64>);

impl PartialEq for Received {
    fn eq(&self, _: &Received) -> bool {
        true
    }
}

/// A shared frame.
pub type SharedFrame = Arc<Frame>;

/// The SSE lines before the JSON. The id is `<epoch>:<cursor>`, so that the
/// `Last-Event-ID` a plain EventSource sends back names the log it read
/// (see `http::streams::start`).
fn sse_head(buf: &mut String, kind: FrameKind, epoch: &str, cursor: Option<u64>) {
    if let Some(c) = cursor {
        buf.push_str("id: ");
        buf.push_str(epoch);
        buf.push(':');
        buf.push_str(itoa::Buffer::new().format(c));
        buf.push('\n');
    }
    buf.push_str("event: ");
    buf.push_str(kind.as_str());
    buf.push_str("\ndata: ");
}

fn finish(
    mut buf: Vec<u8>,
    json: Range<usize>,
    kind: FrameKind,
    cursor: Option<u64>,
    spans: Option<Vec<ChunkSpan>>,
) -> Frame {
    buf.extend_from_slice(b"\n\n");
    framed(Bytes::from(buf), json, kind, cursor, spans)
}

/// The frame of `sse`, its SSE text ended, with its JSON at `json`.
fn framed(
    sse: Bytes,
    json: Range<usize>,
    kind: FrameKind,
    cursor: Option<u64>,
    spans: Option<Vec<ChunkSpan>>,
) -> Frame {
    Frame {
        kind,
        cursor,
        json: sse.slice(json),
        sse,
        spans,
        born: Born(None),
        received: Received(None),
        deflated: Deflated::default(),
    }
}

impl Frame {
    /// The JSON deflated by `deflate`, which runs once per frame: every
    /// later call returns the same shared bytes.
    pub fn ws_deflated(&self, deflate: impl FnOnce(&[u8]) -> Option<Bytes>) -> Option<Bytes> {
        self.deflated.0.get_or_init(|| deflate(&self.json)).clone()
    }

    /// Wrap already-encoded JSON (e.g. read back from the store) of the log
    /// of `epoch`.
    pub fn from_json(kind: FrameKind, epoch: &str, cursor: Option<u64>, json: &[u8]) -> Frame {
        let mut head = String::with_capacity(json.len() + 60);
        sse_head(&mut head, kind, epoch, cursor);
        let mut buf = head.into_bytes();
        let start = buf.len();
        buf.extend_from_slice(json);
        let end = buf.len();
        finish(buf, start..end, kind, cursor, None)
    }

    /// The epoch of the frame's SSE id (`id: <epoch>:<cursor>`); `None`
    /// for a `reset`, which has no id.
    pub fn epoch(&self) -> Option<&str> {
        let line = self.sse.strip_prefix(b"id: ")?;
        let end = line.iter().position(|&b| b == b'\n')?;
        let id = std::str::from_utf8(&line[..end]).ok()?;
        id.rsplit_once(':').map(|(epoch, _)| epoch)
    }

    /// A delta frame read back from the store that goes to live
    /// subscribers (another node encoded it): its chunk positions are found
    /// once here, so that AI SDK streams slice it like a frame encoded here.
    pub fn stored_delta(epoch: &str, cursor: u64, received_ms: u64, json: &[u8]) -> Frame {
        let mut f = Frame::replayed(epoch, cursor, received_ms, json);
        f.spans = chunk_spans(&f.json);
        f.born = Born(Some(std::time::Instant::now()));
        f
    }

    /// A delta frame read back from the store, as it was logged (its
    /// cursor, when it was received, its JSON).
    pub fn replayed(epoch: &str, cursor: u64, received_ms: u64, json: &[u8]) -> Frame {
        let mut f = Frame::from_json(FrameKind::Delta, epoch, Some(cursor), json);
        f.received = Received(Some(received_ms));
        f
    }

    /// The JSON of each chunk addressed to `message_id`, in order. Free for
    /// frames encoded here or relayed live; frames replayed from the store
    /// are parsed.
    pub fn message_chunks(&self, message_id: &str) -> Vec<Bytes> {
        let parsed;
        let spans = match &self.spans {
            Some(spans) => spans,
            None => {
                parsed = chunk_spans(&self.json).unwrap_or_default();
                &parsed
            }
        };
        spans
            .iter()
            .filter(|s| s.message_id.as_deref() == Some(message_id))
            .map(|s| self.json.slice(s.range.clone()))
            .collect()
    }
}

/// Where each chunk of a delta frame's JSON sits; `None` if it does not
/// parse as one.
fn chunk_spans(json: &[u8]) -> Option<Vec<ChunkSpan>> {
    #[derive(Deserialize)]
    struct Item<'a> {
        #[serde(rename = "messageId", borrow)]
        message_id: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        chunk: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Delta<'a> {
        #[serde(default, borrow)]
        chunks: Vec<Item<'a>>,
    }
    let d = serde_json::from_slice::<Delta<'_>>(json).ok()?;
    let base = json.as_ptr() as usize;
    d.chunks
        .into_iter()
        .map(|i| {
            // The raw chunk borrows from `json`: its offset is its span.
            let start = (i.chunk.get().as_ptr() as usize).checked_sub(base)?;
            let range = start..start + i.chunk.get().len();
            (range.end <= json.len()).then(|| ChunkSpan {
                message_id: i.message_id.as_deref().map(Arc::from),
                range,
            })
        })
        .collect()
}

/// Encode a `delta` frame of the log of `epoch`: one buffer, chunk spans
/// recorded on the way.
pub fn delta(
    epoch: &str,
    cursor: u64,
    event_id: &str,
    event_class: &str,
    timeline: Option<&TimelineEntry>,
    chunks: &[ChunkOut],
) -> Frame {
    // Written by `compact_json` (serde_json's bytes, sooner) in the
    // thread's buffer, and copied out at its size.
    crate::compact_json::with_scratch(|buf| {
        sse_head(buf, FrameKind::Delta, epoch, Some(cursor));
        let start = buf.len();
        let put = |buf: &mut String, v: &dyn erased::Json| v.write(buf);
        buf.push_str("{\"type\":\"delta\",\"cursor\":");
        buf.push_str(itoa::Buffer::new().format(cursor));
        buf.push_str(",\"eventId\":");
        put(buf, &event_id);
        buf.push_str(",\"eventClass\":");
        put(buf, &event_class);
        if let Some(t) = timeline.filter(|t| has_more(t)) {
            buf.push_str(",\"timeline\":");
            write_timeline(buf, t);
        }
        buf.push_str(",\"chunks\":[");
        let mut spans = Vec::with_capacity(chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            if i > 0 {
                buf.push(',');
            }
            buf.push_str("{\"messageId\":");
            put(buf, &c.message_id.as_deref());
            if let Some(role) = &c.role {
                buf.push_str(",\"role\":");
                put(buf, role);
            }
            if let Some(o) = &c.origin {
                for (key, v) in [
                    (",\"agentId\":", &o.agent_id),
                    (",\"turnId\":", &o.turn_id),
                    (",\"runId\":", &o.run_id),
                ] {
                    if let Some(v) = v {
                        buf.push_str(key);
                        put(buf, v);
                    }
                }
            }
            buf.push_str(",\"chunk\":");
            let s = buf.len();
            c.chunk.write_json(buf);
            spans.push(ChunkSpan {
                message_id: c.message_id.clone(),
                range: s - start..buf.len() - start,
            });
            buf.push('}');
        }
        buf.push_str("]}");
        let end = buf.len();
        buf.push_str("\n\n");
        let sse = Bytes::copy_from_slice(buf.as_bytes());
        let mut f = framed(sse, start..end, FrameKind::Delta, Some(cursor), Some(spans));
        f.born = Born(Some(std::time::Instant::now()));
        f
    })
}

mod erased {
    /// Serialise into a buffer; these types never fail to serialise.
    pub trait Json {
        fn write(&self, buf: &mut String);
    }

    impl<T: serde::Serialize> Json for T {
        fn write(&self, buf: &mut String) {
            crate::compact_json::write(buf, self).expect("frame parts serialise");
        }
    }
}

/// A `snapshot` frame of the projection state at `cursor`.
pub fn snapshot(cursor: u64, epoch: &str, state: &serde_json::Value) -> Frame {
    #[derive(serde::Serialize)]
    struct SnapshotOut<'a> {
        #[serde(rename = "type")]
        ty: &'static str,
        cursor: u64,
        epoch: &'a str,
        state: &'a serde_json::Value,
    }
    let mut head = String::with_capacity(1024);
    sse_head(&mut head, FrameKind::Snapshot, epoch, Some(cursor));
    let mut buf = head.into_bytes();
    let start = buf.len();
    serde_json::to_writer(
        &mut buf,
        &SnapshotOut {
            ty: "snapshot",
            cursor,
            epoch,
            state,
        },
    )
    .expect("snapshots serialise");
    let end = buf.len();
    finish(buf, start..end, FrameKind::Snapshot, Some(cursor), None)
}

/// A `live` frame: the frames before it were the replay, the subscriber
/// now holds everything up to `cursor` and what follows is live.
pub fn live(cursor: u64) -> Frame {
    let json = format!(r#"{{"type":"live","cursor":{cursor}}}"#);
    Frame::from_json(FrameKind::Live, "", None, json.as_bytes())
}

/// A `reset` frame; a `snapshot` always follows it.
pub fn reset(reason: &str) -> Frame {
    let json = serde_json::json!({"type": "reset", "reason": reason}).to_string();
    Frame::from_json(FrameKind::Reset, "", None, json.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::Chunk;

    #[test]
    fn sse_form_and_json_agree() {
        let f = delta("0123456789abcdef", 7, "e7", "text.delta", None, &[]);
        assert_eq!(
            &f.json[..],
            br#"{"type":"delta","cursor":7,"eventId":"e7","eventClass":"text.delta","chunks":[]}"#
        );
        let sse = std::str::from_utf8(&f.sse).unwrap();
        assert!(sse.starts_with("id: 0123456789abcdef:7\nevent: delta\ndata: {"));
        assert!(sse.ends_with("}\n\n"));
        let l = live(12);
        assert_eq!(
            std::str::from_utf8(&l.sse).unwrap(),
            "event: live\ndata: {\"type\":\"live\",\"cursor\":12}\n\n"
        );
        assert_eq!(l.cursor, None);
        let r = reset("cursor_ahead");
        assert_eq!(
            std::str::from_utf8(&r.sse).unwrap(),
            "event: reset\ndata: {\"type\":\"reset\",\"reason\":\"cursor_ahead\"}\n\n"
        );
    }

    #[test]
    fn delta_json_equals_serde_and_chunks_slice_out() {
        let chunks = vec![
            ChunkOut {
                message_id: Some("m\"1".into()),
                role: Some(crate::projection::Role::Assistant),
                origin: Some(Box::new(crate::projection::Origin {
                    agent_id: Some("coder".into()),
                    turn_id: None,
                    run_id: Some("r\"1".into()),
                })),
                chunk: Chunk::Start {
                    message_id: "m\"1".into(),
                    message_metadata: None,
                },
            },
            ChunkOut {
                message_id: Some("m\"1".into()),
                role: None,
                origin: None,
                chunk: Chunk::TextStart { id: "t".into() },
            },
            ChunkOut {
                message_id: None,
                role: None,
                origin: None,
                chunk: Chunk::data(
                    "runtime",
                    "runtime",
                    serde_json::json!({"status": "running"}),
                ),
            },
            ChunkOut {
                message_id: Some("m\"1".into()),
                role: None,
                origin: None,
                chunk: Chunk::TextDelta {
                    id: "t".into(),
                    delta: "héllo\n".into(),
                },
            },
        ];
        let timeline = TimelineEntry {
            cursor: 3,
            event_id: "e\u{1}3".into(),
            class: "text.delta".into(),
            source_class: "model.delta".into(),
            status: None,
            title: Some("Writing".into()),
            timestamp: None,
            taxonomy: None,
        };
        let f = delta(
            "0123456789abcdef",
            3,
            "e\u{1}3",
            "text.delta",
            Some(&timeline),
            &chunks,
        );
        let via_serde = serde_json::json!({
            "type": "delta", "cursor": 3, "eventId": "e\u{1}3", "eventClass": "text.delta",
            "timeline": {"sourceClass": "model.delta", "title": "Writing"},
            "chunks": chunks,
        });
        assert_eq!(via_serde["chunks"][0]["agentId"], "coder");
        assert_eq!(via_serde["chunks"][0]["runId"], "r\"1");
        assert!(via_serde["chunks"][0].get("turnId").is_none());
        // A timeline entry that says nothing more adds nothing.
        let plain = TimelineEntry {
            source_class: "text.delta".into(),
            title: None,
            ..timeline.clone()
        };
        let g = delta("e", 3, "x", "text.delta", Some(&plain), &[]);
        assert!(!std::str::from_utf8(&g.json).unwrap().contains("timeline"));
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&f.json).unwrap(),
            via_serde
        );
        let own = f.message_chunks("m\"1");
        assert_eq!(own.len(), 3);
        assert_eq!(
            &own[2][..],
            serde_json::to_vec(&chunks[3].chunk).unwrap().as_slice()
        );
        // The same answer from a frame read back from the store.
        let stored = Frame::from_json(FrameKind::Delta, "0123456789abcdef", Some(3), &f.json);
        assert_eq!(stored.message_chunks("m\"1"), own);
        assert_eq!(stored.sse, f.sse);
        // A frame relayed from another node finds its spans once: the same
        // spans as the encoding node's, and the same bytes.
        let relayed = Frame::stored_delta("0123456789abcdef", 3, 1, &f.json);
        assert_eq!(relayed, f);
        assert_eq!(relayed.message_chunks("m\"1"), own);
    }
}
