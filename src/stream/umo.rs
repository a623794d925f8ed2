//! The Umo Editor live view of a session (`?format=umo` on the session
//! stream, SSE or WebSocket): a view over the replay-then-live machine, so
//! resume, resets and epochs work as on the session stream, with the same
//! `<epoch>:<cursor>` ids. A `snapshot` frame becomes the Umo message
//! bodies of the snapshot's messages; a `delta` frame becomes the Umo
//! content-block updates of the messages it touches
//! ([`crate::projection::umo_live`], `strategy: append | merge`); a step
//! tried again (`data-superseded`) makes its message's entry `replace:
//! true`, its blocks as they stand first; a frame that touches no
//! message's content is left out; `reset` and `live` pass as they are.
//!
//! Unlike the session stream, this view does JSON work per subscriber (it
//! reads each frame it maps); it is for Umo widgets, not for fan-out to
//! thousands.

use std::collections::HashMap;

use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::frame::{Frame, FrameKind, SharedFrame};
use crate::projection::{superseded_message, umo_blocks, umo_live, Message, Role};

/// Umo frames of a session's frames.
pub fn frames(
    inner: impl Stream<Item = SharedFrame> + Send + 'static,
) -> impl Stream<Item = SharedFrame> + Send + 'static {
    let mut view = View::default();
    inner.filter_map(move |f| std::future::ready(view.map(&f)))
}

/// The roles of the messages seen so far, to type their text blocks.
#[derive(Default)]
struct View {
    roles: HashMap<String, Role>,
}

#[derive(Deserialize)]
struct Snapshot {
    cursor: u64,
    epoch: String,
    state: SnapshotState,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotState {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    messages: Vec<Message>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Delta {
    cursor: u64,
    event_id: String,
    event_class: String,
    chunks: Vec<super::ChunkEntry>,
}

impl View {
    fn map(&mut self, f: &SharedFrame) -> Option<SharedFrame> {
        match f.kind {
            FrameKind::Reset | FrameKind::Live => Some(f.clone()),
            FrameKind::Snapshot => self.snapshot(f),
            FrameKind::Delta => self.delta(f),
        }
    }

    fn snapshot(&mut self, f: &Frame) -> Option<SharedFrame> {
        let s: Snapshot = serde_json::from_slice(&f.json).ok()?;
        self.roles.clear();
        let mut messages = Vec::with_capacity(s.state.messages.len());
        for m in &s.state.messages {
            self.roles.insert(m.id.to_string(), m.role);
            messages.push(umo_blocks::message(m));
        }
        let mut out = json!({"type": "snapshot", "cursor": s.cursor, "epoch": s.epoch,
                             "messages": messages});
        if let Some(id) = s.state.session_id {
            out["sessionId"] = id.into();
        }
        let json = serde_json::to_vec(&out).ok()?;
        Some(Frame::from_json(FrameKind::Snapshot, &s.epoch, Some(s.cursor), &json).into())
    }

    fn delta(&mut self, f: &Frame) -> Option<SharedFrame> {
        let epoch = f.epoch()?;
        let d: Delta = serde_json::from_slice(&f.json).ok()?;
        // Messages in the order the frame first touches them.
        let mut order: Vec<String> = Vec::new();
        let mut by_id: HashMap<String, Map<String, Value>> = HashMap::new();
        for e in d.chunks {
            let Some(mid) = e.message_id else { continue };
            if let Some(r) = e.role {
                self.roles.insert(mid.clone(), r);
            }
            let role = self.roles.get(&mid).copied().unwrap_or(Role::Assistant);
            let superseded = e.chunk.get("type").and_then(Value::as_str) == Some("data-superseded");
            let (status, blocks) = if superseded {
                // A step tried again: the message's blocks as they stand.
                let Some(m) = superseded_message(&mid, role, &e.chunk["data"]) else {
                    continue;
                };
                (
                    None,
                    umo_blocks::message(&m)["content"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default(),
                )
            } else {
                let u = umo_live::update(role, &e.chunk);
                (u.status, u.blocks)
            };
            if status.is_none() && blocks.is_empty() && !superseded {
                continue;
            }
            let m = by_id.entry(mid.clone()).or_insert_with(|| {
                order.push(mid.clone());
                let mut m = Map::new();
                m.insert("id".into(), mid.clone().into());
                m.insert("role".into(), json!(role));
                m.insert("content".into(), json!([]));
                m
            });
            if superseded {
                // The blocks before it in this frame went with the old try.
                m.insert("replace".into(), true.into());
                m.insert("content".into(), json!([]));
            }
            if let Some(st) = status {
                m.insert("status".into(), st.into());
            }
            if let Some(Value::Array(c)) = m.get_mut("content") {
                c.extend(blocks);
            }
        }
        if order.is_empty() {
            return None;
        }
        let messages: Vec<Value> = order
            .into_iter()
            .filter_map(|id| by_id.remove(&id).map(Value::Object))
            .collect();
        let out = json!({"type": "delta", "cursor": d.cursor, "eventId": d.event_id,
                         "eventClass": d.event_class, "messages": messages});
        let json = serde_json::to_vec(&out).ok()?;
        Some(Frame::from_json(FrameKind::Delta, epoch, Some(d.cursor), &json).into())
    }
}
