//! A producer's own UI message chunks (`ui.chunk` facts, from an ingested
//! AI SDK UI message stream): `start` opens the producer's message, and
//! `file`, `data-*` and `message-metadata` pass into it as they are, with
//! the AI SDK's semantics; a `start` for a message it completed continues it.

use super::public_state::Severity;
use super::reducer::Reducer;
use super::ui_message::MessageStatus;
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
                    message_id: msg.clone(),
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
}
