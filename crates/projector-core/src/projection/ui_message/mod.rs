//! Messages and their parts in the Vercel AI SDK `UIMessage` shapes, and the
//! application of one `UIMessageChunk` to a message with the same semantics as
//! the `ai` package's `processUIMessageStream`. The reducer only ever changes
//! message parts through [`Message::apply`], so the snapshot is by construction
//! what an AI SDK client builds from the delta chunks.

mod data_ids;
mod part;
mod replay;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chunk::Chunk;
pub use part::{Part, StreamState, ToolState};

/// Bytes a new text or reasoning part starts with: deltas are a few bytes
/// each, and growing from nothing reallocates four times before the first
/// sentence ends.
const SEGMENT_START: usize = 64;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    System,
}

/// Lifecycle of a whole message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageStatus {
    /// Chunks are still arriving.
    Streaming,
    /// Finished normally (`finish`).
    Complete,
    /// Finished with an error.
    Failed,
    /// Aborted (cancelled or interrupted run).
    Aborted,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Shared with the chunks that name the message: no copy per chunk.
    pub id: Arc<str>,
    pub role: Role,
    pub status: MessageStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Cursor of the event that created the message.
    pub created_cursor: u64,
    /// The AI SDK `UIMessage.metadata`: what `start` chunks carried, merged
    /// (the producer's `createdAt`, as its event said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// What ended a failed message (its `error` chunk's `errorText`),
    /// replayed before its finish so that a late AI SDK client ends in its
    /// error state too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
    pub parts: Vec<Part>,
    /// Ids of text/reasoning parts still open, mapped to their index in
    /// `parts` (the AI SDK's `activeTextParts` / `activeReasoningParts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_parts: Vec<(String, usize)>,
    /// Where each data part with an id is (derived; see `data_ids`).
    #[serde(skip)]
    data_ids: data_ids::DataIds,
}

/// A chunk that cannot apply to a message (the AI SDK would throw).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chunk {chunk_type} cannot apply: {reason}")]
pub struct ApplyError {
    pub chunk_type: String,
    pub reason: String,
}

/// Merge `update` into a message's metadata the way the `ai` package does
/// (`mergeObjects`: objects merge key by key, recursively; anything else
/// replaces).
fn merge_metadata(metadata: &mut Option<Value>, update: &Value) {
    fn merge(into: &mut Value, update: &Value) {
        match (into, update) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    match a.get_mut(k) {
                        Some(slot) => merge(slot, v),
                        None => {
                            a.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            (slot, v) => *slot = v.clone(),
        }
    }
    match metadata {
        Some(m) => merge(m, update),
        None => *metadata = Some(update.clone()),
    }
}

/// Whether two ids are equal, compared from their ends: the ids of one
/// message's parts mostly differ only in their last characters
/// (`msg-1-t12`, `msg-1-t13`; `a10`, `a30`), so a scan over a long message
/// rejects each of them in a byte or two, without calling `memcmp`.
pub fn same_id(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().rev().eq(b.bytes().rev())
}

/// The chunk id the reducer gives a new text (`t`) or reasoning (`r`)
/// part at index `idx` of message `msg`: `{msg}-{letter}{idx}`, written
/// without the formatting machinery (it runs for every new segment).
pub fn generated_part_id(msg: &str, letter: char, idx: usize) -> String {
    let mut digits = [0u8; 20];
    let (mut n, mut at) = (idx, digits.len());
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut id = String::with_capacity(msg.len() + 2 + digits.len() - at);
    id.push_str(msg);
    id.push('-');
    id.push(letter);
    id.extend(digits[at..].iter().map(|&d| char::from(d)));
    id
}

impl Message {
    /// An empty message.
    pub fn new(id: &str, role: Role, created_cursor: u64) -> Self {
        Message {
            id: Arc::from(id),
            role,
            status: MessageStatus::Streaming,
            agent_id: None,
            turn_id: None,
            run_id: None,
            created_cursor,
            metadata: None,
            error_text: None,
            parts: Vec::new(),
            open_parts: Vec::new(),
            data_ids: Default::default(),
        }
    }

    fn open_index(&self, id: &str) -> Option<usize> {
        self.open_parts
            .iter()
            .find(|(pid, _)| pid == id)
            .map(|(_, i)| *i)
    }

    fn close(&mut self, id: &str) -> Option<usize> {
        let pos = self.open_parts.iter().position(|(pid, _)| pid == id)?;
        Some(self.open_parts.remove(pos).1)
    }

    /// Index of the last tool part with this call id.
    pub fn tool_index(&self, tool_call_id: &str) -> Option<usize> {
        self.parts
            .iter()
            .rposition(|p| p.tool_call_id().is_some_and(|t| same_id(t, tool_call_id)))
    }

    /// Index of the (first) `data-<name>` part with this id.
    pub fn data_index(&self, name: &str, id: &str) -> Option<usize> {
        self.data_ids.find(&self.parts, name, id)
    }

    /// True when a text or reasoning part with this id is open.
    pub fn is_open(&self, id: &str) -> bool {
        self.open_index(id).is_some()
    }

    /// Apply one chunk with the AI SDK's semantics. Returns an error, and
    /// changes nothing, where the AI SDK client would throw.
    pub fn apply(&mut self, chunk: &Chunk) -> Result<(), ApplyError> {
        let err = |reason: &str| ApplyError {
            chunk_type: chunk.type_name().into_owned(),
            reason: reason.to_string(),
        };
        // A `start` for a message that completed continues it (the AI SDK
        // continues a message after a tool approval): it streams again.
        if matches!(chunk, Chunk::Start { .. }) && self.status == MessageStatus::Complete {
            self.status = MessageStatus::Streaming;
        }
        match chunk {
            Chunk::Start {
                message_metadata: Some(md),
                ..
            }
            | Chunk::MessageMetadata {
                message_metadata: md,
            } => merge_metadata(&mut self.metadata, md),
            Chunk::Start { .. } => {}
            Chunk::Abort { .. } => self.status = MessageStatus::Aborted,
            Chunk::Error { error_text } => self.error_text = Some(error_text.clone()),
            Chunk::Finish { finish_reason } => {
                if self.status == MessageStatus::Streaming {
                    self.status = match finish_reason {
                        Some(super::chunk::FinishReason::Error) => MessageStatus::Failed,
                        _ => MessageStatus::Complete,
                    };
                }
            }
            Chunk::StartStep => self.parts.push(Part::StepStart),
            Chunk::FinishStep => {}
            Chunk::TextStart { id } => {
                self.open_parts.retain(|(pid, _)| pid != id);
                self.parts.push(Part::Text {
                    text: String::with_capacity(SEGMENT_START),
                    state: StreamState::Streaming,
                });
                self.open_parts.push((id.clone(), self.parts.len() - 1));
            }
            Chunk::ReasoningStart { id } => {
                self.open_parts.retain(|(pid, _)| pid != id);
                self.parts.push(Part::Reasoning {
                    id: id.clone(),
                    text: String::with_capacity(SEGMENT_START),
                    state: StreamState::Streaming,
                });
                self.open_parts.push((id.clone(), self.parts.len() - 1));
            }
            Chunk::TextDelta { id, delta } | Chunk::ReasoningDelta { id, delta } => {
                let idx = self
                    .open_index(id)
                    .ok_or_else(|| err("no open part with this id"))?;
                match (&mut self.parts[idx], chunk) {
                    (Part::Text { text, .. }, Chunk::TextDelta { .. })
                    | (Part::Reasoning { text, .. }, Chunk::ReasoningDelta { .. }) => {
                        text.push_str(delta)
                    }
                    _ => return Err(err("open part has another type")),
                }
            }
            Chunk::TextEnd { id } | Chunk::ReasoningEnd { id } => {
                let idx = self
                    .open_index(id)
                    .ok_or_else(|| err("no open part with this id"))?;
                self.close(id);
                if let Part::Text { state, .. } | Part::Reasoning { state, .. } =
                    &mut self.parts[idx]
                {
                    *state = StreamState::Done;
                }
            }
            Chunk::ToolInputStart {
                tool_call_id,
                tool_name,
                title,
            } => {
                self.parts.push(Part::Tool {
                    tool_name: tool_name.clone(),
                    tool_call_id: tool_call_id.clone(),
                    state: ToolState::InputStreaming,
                    input: None,
                    output: None,
                    error_text: None,
                    preliminary: None,
                    title: title.clone(),
                    approval: None,
                });
            }
            Chunk::ToolInputDelta { tool_call_id, .. } => {
                // The AI SDK re-parses partial JSON input; we keep input as
                // sent in `tool-input-available` and only check the part exists.
                self.tool_index(tool_call_id)
                    .ok_or_else(|| err("no tool part with this toolCallId"))?;
            }
            Chunk::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
                title,
            } => match self.tool_index(tool_call_id) {
                Some(i) => {
                    if let Part::Tool {
                        state,
                        input: inp,
                        output,
                        error_text,
                        preliminary,
                        title: t,
                        ..
                    } = &mut self.parts[i]
                    {
                        *state = ToolState::InputAvailable;
                        *inp = Some(input.clone());
                        *output = None;
                        *error_text = None;
                        *preliminary = None;
                        if title.is_some() {
                            *t = title.clone();
                        }
                    }
                }
                None => self.parts.push(Part::Tool {
                    tool_name: tool_name.clone(),
                    tool_call_id: tool_call_id.clone(),
                    state: ToolState::InputAvailable,
                    input: Some(input.clone()),
                    output: None,
                    error_text: None,
                    preliminary: None,
                    title: title.clone(),
                    approval: None,
                }),
            },
            Chunk::ToolOutputAvailable {
                tool_call_id,
                output,
                preliminary,
            } => {
                let i = self
                    .tool_index(tool_call_id)
                    .ok_or_else(|| err("no tool part with this toolCallId"))?;
                if let Part::Tool {
                    state,
                    output: out,
                    error_text,
                    preliminary: pre,
                    ..
                } = &mut self.parts[i]
                {
                    *state = ToolState::OutputAvailable;
                    *out = Some(output.clone());
                    *error_text = None;
                    *pre = preliminary.then_some(true);
                }
            }
            Chunk::ToolOutputError {
                tool_call_id,
                error_text,
            } => {
                let i = self
                    .tool_index(tool_call_id)
                    .ok_or_else(|| err("no tool part with this toolCallId"))?;
                if let Part::Tool {
                    state,
                    output,
                    error_text: e,
                    preliminary,
                    ..
                } = &mut self.parts[i]
                {
                    *state = ToolState::OutputError;
                    *output = None;
                    *e = Some(error_text.clone());
                    *preliminary = None;
                }
            }
            Chunk::ToolApprovalRequest {
                approval_id,
                tool_call_id,
                reason,
            } => {
                let i = self
                    .tool_index(tool_call_id)
                    .ok_or_else(|| err("no tool part with this toolCallId"))?;
                if let Part::Tool {
                    state, approval, ..
                } = &mut self.parts[i]
                {
                    *state = ToolState::ApprovalRequested;
                    let mut a = serde_json::json!({ "id": approval_id });
                    if let Some(r) = reason {
                        a["requestReason"] = r.clone().into();
                    }
                    *approval = Some(Box::new(a));
                }
            }
            Chunk::ToolOutputDenied { tool_call_id } => {
                let i = self
                    .tool_index(tool_call_id)
                    .ok_or_else(|| err("no tool part with this toolCallId"))?;
                if let Part::Tool { state, .. } = &mut self.parts[i] {
                    *state = ToolState::OutputDenied;
                }
            }
            Chunk::SourceUrl {
                source_id,
                url,
                title,
            } => self.parts.push(Part::SourceUrl {
                source_id: source_id.clone(),
                url: url.clone(),
                title: title.clone(),
            }),
            Chunk::SourceDocument {
                source_id,
                media_type,
                title,
                filename,
            } => self.parts.push(Part::SourceDocument {
                source_id: source_id.clone(),
                media_type: media_type.clone(),
                title: title.clone(),
                filename: filename.clone(),
            }),
            Chunk::File { url, media_type } => self.parts.push(Part::File {
                url: url.clone(),
                media_type: media_type.clone(),
            }),
            Chunk::Data {
                name,
                id,
                data,
                transient,
            } => {
                if *transient {
                    return Ok(());
                }
                self.data_ids.build(&self.parts);
                let existing = id.as_ref().and_then(|id| self.data_index(name, id));
                let part = Part::Data {
                    name: name.clone(),
                    id: id.clone(),
                    data: data.clone(),
                };
                match existing {
                    Some(i) => self.parts[i] = part,
                    None => {
                        if let Some(id) = id {
                            self.data_ids.added(name, id, self.parts.len());
                        }
                        self.parts.push(part);
                    }
                }
            }
            Chunk::Surface { .. } => return Err(err("a session surface chunk is in no message")),
        }
        Ok(())
    }

    /// Replace the text of the text or reasoning part at `idx`. This is the
    /// one part change not made by a chunk: final-text reconciliation, which
    /// the reducer announces with a transient `data-reconciliation` chunk
    /// (`{messageId, partIndex, text, streamedText}`). Returns false when
    /// `idx` is not a text or reasoning part.
    pub fn replace_text(&mut self, idx: usize, new_text: &str) -> bool {
        match self.parts.get_mut(idx) {
            Some(Part::Text { text, .. }) | Some(Part::Reasoning { text, .. }) => {
                *text = new_text.to_string();
                true
            }
            _ => false,
        }
    }

    /// Keep the parts before `len` (a superseded step attempt: the other
    /// part change not made by a chunk, announced by a transient
    /// `data-superseded` chunk `{messageId, fromPart, ...}`).
    pub fn truncate_parts(&mut self, len: usize) {
        self.parts.truncate(len);
        self.open_parts.retain(|(_, i)| *i < len);
        self.data_ids.build(&self.parts);
    }

    /// True once the message has finished or was aborted.
    pub fn is_finished(&self) -> bool {
        self.status != MessageStatus::Streaming
    }

    /// Concatenated text of all text parts.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generated_part_ids_read_as_formatted() {
        for idx in [0, 1, 9, 10, 99, 100, 12345, usize::MAX] {
            for letter in ['t', 'r'] {
                assert_eq!(
                    generated_part_id("msg-1", letter, idx),
                    format!("msg-1-{letter}{idx}")
                );
            }
        }
    }

    #[test]
    fn text_delta_without_start_is_rejected_and_changes_nothing() {
        let mut m = Message::new("m", Role::Assistant, 1);
        let e = m
            .apply(&Chunk::TextDelta {
                id: "t".into(),
                delta: "x".into(),
            })
            .unwrap_err();
        assert_eq!(e.chunk_type, "text-delta");
        assert!(m.parts.is_empty());
    }

    #[test]
    fn replay_chunks_rebuild_the_message_and_keep_open_parts_open() {
        let mut m = Message::new("m", Role::Assistant, 1);
        for c in [
            Chunk::Start {
                message_id: "m".into(),
                message_metadata: None,
            },
            Chunk::ReasoningStart { id: "r".into() },
            Chunk::ReasoningDelta {
                id: "r".into(),
                delta: "think".into(),
            },
            Chunk::ReasoningEnd { id: "r".into() },
            Chunk::TextStart { id: "a".into() },
            Chunk::TextDelta {
                id: "a".into(),
                delta: "hi".into(),
            },
            Chunk::TextEnd { id: "a".into() },
            Chunk::ToolInputStart {
                tool_call_id: "t".into(),
                tool_name: "x".into(),
                title: None,
            },
            Chunk::ToolInputAvailable {
                tool_call_id: "t".into(),
                tool_name: "x".into(),
                input: Arc::new(json!({"q": 1})),
                title: Some("T".into()),
            },
            Chunk::ToolOutputError {
                tool_call_id: "t".into(),
                error_text: "boom".into(),
            },
            Chunk::data("artifact-card", "a1", json!({"artifactId": "a1"})),
            Chunk::TextStart { id: "b".into() },
            Chunk::TextDelta {
                id: "b".into(),
                delta: "more".into(),
            },
        ] {
            m.apply(&c).unwrap();
        }
        let mut rebuilt = Message::new("m", Role::Assistant, 1);
        for c in m.replay_chunks() {
            rebuilt.apply(&c).unwrap();
        }
        assert_eq!(rebuilt.parts, m.parts);
        // The open part keeps its chunk id: a live delta continues it.
        rebuilt
            .apply(&Chunk::TextDelta {
                id: "b".into(),
                delta: "!".into(),
            })
            .unwrap();
        m.apply(&Chunk::TextDelta {
            id: "b".into(),
            delta: "!".into(),
        })
        .unwrap();
        assert_eq!(rebuilt.parts, m.parts);
        m.apply(&Chunk::TextEnd { id: "b".into() }).unwrap();
        m.apply(&Chunk::Finish {
            finish_reason: None,
        })
        .unwrap();
        assert!(matches!(
            m.replay_chunks().last(),
            Some(Chunk::Finish { .. })
        ));
    }

    #[test]
    fn parts_round_trip_through_json() {
        let mut m = Message::new("m", Role::Assistant, 1);
        for c in [
            Chunk::TextStart { id: "a".into() },
            Chunk::TextDelta {
                id: "a".into(),
                delta: "hi".into(),
            },
            Chunk::TextEnd { id: "a".into() },
            Chunk::ToolInputAvailable {
                tool_call_id: "t".into(),
                tool_name: "search".into(),
                input: Arc::new(json!({"q": 1})),
                title: None,
            },
            Chunk::ToolOutputAvailable {
                tool_call_id: "t".into(),
                output: Arc::new(json!("ok")),
                preliminary: false,
            },
            Chunk::data("artifact-card", "a1", json!({"artifactId": "a1"})),
            Chunk::data("artifact-card", "a1", json!({"artifactId": "a1", "v": 2})),
        ] {
            m.apply(&c).unwrap();
        }
        assert_eq!(m.parts.len(), 3, "same data id replaces in place");
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["parts"][0],
            json!({"type":"text","text":"hi","state":"done"})
        );
        assert_eq!(
            v["parts"][1],
            json!({"type":"tool-search","toolCallId":"t","state":"output-available","input":{"q":1},"output":"ok"})
        );
        let back: Message = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }
}
