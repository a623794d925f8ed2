//! A producer's own UI message chunks (`ui.chunk` facts, from an ingested
//! AI SDK UI message stream): `start` opens the producer's message, and
//! `file`, `data-*` and `message-metadata` pass into it as they are, with
//! the AI SDK's semantics; a `start` for a message it completed continues it.

use super::app_patch::apply_patch;
use super::public_state::Severity;
use super::reducer::Reducer;
use super::ui_message::{MessageStatus, Part};
use super::Chunk;

impl Reducer<'_> {
    /// `ui.chunk`: a producer's own `UIMessageChunk` (`file`, `data-*`,
    /// `message-metadata`) applied to its message as it is, with the AI
    /// SDK's semantics; `start` opens the message (with its metadata); any
    /// other chunk is refused with a diagnostic.
    pub fn on_ui_chunk(&mut self) {
        let Some(raw) = self.first_value(&["chunk"]) else {
            return;
        };
        if raw.get("type").and_then(|t| t.as_str()) == Some("start") {
            // The producer's message opens here, before any of its parts; a
            // message it completed before streams again (a continuation).
            let msg = self.ensure_assistant();
            let md = raw.get("messageMetadata").filter(|m| m.is_object());
            if self
                .msg(&msg)
                .is_some_and(|m| m.status == MessageStatus::Complete)
            {
                let c = Chunk::Start {
                    message_id: msg.to_string(),
                    message_metadata: md.cloned(),
                };
                self.emit(&msg, c);
                return;
            }
            if let Some(md) = md {
                let c = Chunk::MessageMetadata {
                    message_metadata: md.clone(),
                };
                self.emit(&msg, c);
            }
            return;
        }
        let ty = raw.get("type").and_then(|t| t.as_str()).unwrap_or("");
        if ty.starts_with("data-") && raw.get("id").is_some() {
            if let Some(done) = self.data_part_update(&raw) {
                return done;
            }
        }
        let Some(chunk) = Chunk::from_ui(&raw) else {
            let ty = raw.get("type").and_then(|t| t.as_str()).unwrap_or("?");
            self.diag(
                "chunk_rejected",
                Severity::Warning,
                format!("a `{ty}` chunk cannot pass into a message as it is"),
            );
            return;
        };
        let msg = self.ensure_assistant();
        self.emit(&msg, chunk);
    }

    /// A data part that exists already: a `patch` (RFC 6902, relative to
    /// its `data`) changes it, and a snapshot with `payload.replace: false`
    /// leaves it as it is. None when the chunk is an ordinary data chunk.
    fn data_part_update(&mut self, raw: &serde_json::Value) -> Option<()> {
        let name = raw
            .get("type")?
            .as_str()?
            .strip_prefix("data-")?
            .to_string();
        let id = raw.get("id")?.as_str()?.to_string();
        let patch = raw.get("patch").and_then(|p| p.as_array()).cloned();
        let keep = self.fact.payload_get("replace").and_then(|r| r.as_bool()) == Some(false);
        if patch.is_none() && !keep {
            return None;
        }
        let msg = self.ensure_assistant();
        let current = self.msg(&msg).and_then(|m| {
            m.parts.iter().rev().find_map(|p| match p {
                Part::Data {
                    name: n,
                    id: Some(i),
                    data,
                } if *n == name && *i == id => Some(data.clone()),
                _ => None,
            })
        });
        let Some(ops) = patch else {
            // `replace: false` and the part exists: nothing changes.
            return current.map(|_| ());
        };
        let Some(data) = current else {
            self.diag(
                "chunk_rejected",
                Severity::Warning,
                format!("a patch of `data-{name}` part {id}, which the message does not have"),
            );
            return Some(());
        };
        let ops: Vec<serde_json::Value> = ops
            .iter()
            .map(|op| {
                let mut op = op.clone();
                for k in ["path", "from"] {
                    if let Some(p) = op.get(k).and_then(|p| p.as_str()) {
                        op[k] = format!("/app{p}").into();
                    }
                }
                op
            })
            .collect();
        match apply_patch(&data, &ops) {
            Ok(data) => {
                self.emit(
                    &msg,
                    Chunk::Data {
                        name,
                        id: Some(id),
                        data: data.into(),
                        transient: false,
                    },
                );
            }
            Err(why) => self.finding(
                "state_delta_rejected",
                format!("a patch of `data-{name}` part {id} was rejected, nothing applied: {why}"),
            ),
        }
        Some(())
    }
}
