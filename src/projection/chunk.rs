//! Vercel AI SDK `UIMessageChunk` shapes, as the reducer emits them.
//!
//! Field names and optionality follow the `ai` package's `uiMessageChunkSchema`
//! (strict objects: no extra keys). A `data-*` chunk serialises its type as
//! `data-<name>`.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;

/// AI SDK finish reasons accepted by the `finish` chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
    ToolCalls,
    Error,
    Other,
}

/// One `UIMessageChunk`.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    Start {
        message_id: String,
        /// `messageMetadata`: merged into the message's `metadata`.
        message_metadata: Option<Value>,
    },
    Finish {
        finish_reason: Option<FinishReason>,
    },
    Abort {
        reason: Option<String>,
    },
    Error {
        error_text: String,
    },
    StartStep,
    FinishStep,
    TextStart {
        id: String,
    },
    TextDelta {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    ReasoningStart {
        id: String,
    },
    ReasoningDelta {
        id: String,
        delta: String,
    },
    ReasoningEnd {
        id: String,
    },
    ToolInputStart {
        tool_call_id: String,
        tool_name: String,
        title: Option<String>,
    },
    ToolInputDelta {
        tool_call_id: String,
        input_text_delta: String,
    },
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        input: Value,
        title: Option<String>,
    },
    ToolOutputAvailable {
        tool_call_id: String,
        output: Value,
        preliminary: bool,
    },
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
    },
    ToolOutputDenied {
        tool_call_id: String,
    },
    /// A person is asked to approve the call (`approvalId` = the action id).
    ToolApprovalRequest {
        approval_id: String,
        tool_call_id: String,
        reason: Option<String>,
    },
    SourceUrl {
        source_id: String,
        url: String,
        title: Option<String>,
    },
    SourceDocument {
        source_id: String,
        media_type: String,
        title: String,
        filename: Option<String>,
    },
    File {
        url: String,
        media_type: String,
    },
    /// `messageMetadata`, merged into the message's `metadata`.
    MessageMetadata {
        message_metadata: Value,
    },
    /// `data-<name>`; a later chunk with the same name and id replaces the part.
    Data {
        name: String,
        id: Option<String>,
        data: Value,
        transient: bool,
    },
}

impl Chunk {
    /// A producer's `UIMessageChunk` that passes into a message as it is:
    /// `file`, `data-*` and `message-metadata` (what the reducer has no fact
    /// of its own for). `None` for any other chunk, or a malformed one.
    pub fn from_ui(v: &Value) -> Option<Chunk> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let ty = v.get("type")?.as_str()?;
        match ty {
            "file" => Some(Chunk::File {
                url: s("url")?,
                media_type: s("mediaType")?,
            }),
            "message-metadata" => Some(Chunk::MessageMetadata {
                message_metadata: v.get("messageMetadata")?.clone(),
            }),
            t if t.starts_with("data-") && t.len() > 5 => Some(Chunk::Data {
                name: t[5..].to_string(),
                id: s("id"),
                data: v.get("data").cloned().unwrap_or(Value::Null),
                transient: v.get("transient").and_then(Value::as_bool) == Some(true),
            }),
            _ => None,
        }
    }

    /// The chunk's `type` string.
    pub fn type_name(&self) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow::Borrowed;
        match self {
            Chunk::Start { .. } => Borrowed("start"),
            Chunk::Finish { .. } => Borrowed("finish"),
            Chunk::Abort { .. } => Borrowed("abort"),
            Chunk::Error { .. } => Borrowed("error"),
            Chunk::StartStep => Borrowed("start-step"),
            Chunk::FinishStep => Borrowed("finish-step"),
            Chunk::TextStart { .. } => Borrowed("text-start"),
            Chunk::TextDelta { .. } => Borrowed("text-delta"),
            Chunk::TextEnd { .. } => Borrowed("text-end"),
            Chunk::ReasoningStart { .. } => Borrowed("reasoning-start"),
            Chunk::ReasoningDelta { .. } => Borrowed("reasoning-delta"),
            Chunk::ReasoningEnd { .. } => Borrowed("reasoning-end"),
            Chunk::ToolInputStart { .. } => Borrowed("tool-input-start"),
            Chunk::ToolInputDelta { .. } => Borrowed("tool-input-delta"),
            Chunk::ToolInputAvailable { .. } => Borrowed("tool-input-available"),
            Chunk::ToolOutputAvailable { .. } => Borrowed("tool-output-available"),
            Chunk::ToolOutputError { .. } => Borrowed("tool-output-error"),
            Chunk::ToolOutputDenied { .. } => Borrowed("tool-output-denied"),
            Chunk::ToolApprovalRequest { .. } => Borrowed("tool-approval-request"),
            Chunk::SourceUrl { .. } => Borrowed("source-url"),
            Chunk::SourceDocument { .. } => Borrowed("source-document"),
            Chunk::File { .. } => Borrowed("file"),
            Chunk::MessageMetadata { .. } => Borrowed("message-metadata"),
            Chunk::Data { name, .. } => std::borrow::Cow::Owned(format!("data-{name}")),
        }
    }

    /// A session-level or message-level data chunk.
    pub fn data(name: impl Into<String>, id: impl Into<String>, data: Value) -> Self {
        Chunk::Data {
            name: name.into(),
            id: Some(id.into()),
            data,
            transient: false,
        }
    }
}

impl Serialize for Chunk {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", &self.type_name())?;
        match self {
            Chunk::Start {
                message_id,
                message_metadata,
            } => {
                m.serialize_entry("messageId", message_id)?;
                if let Some(md) = message_metadata {
                    m.serialize_entry("messageMetadata", md)?;
                }
            }
            Chunk::Finish { finish_reason } => {
                if let Some(r) = finish_reason {
                    m.serialize_entry("finishReason", r)?;
                }
            }
            Chunk::Abort { reason } => {
                if let Some(r) = reason {
                    m.serialize_entry("reason", r)?;
                }
            }
            Chunk::Error { error_text } => m.serialize_entry("errorText", error_text)?,
            Chunk::StartStep | Chunk::FinishStep => {}
            Chunk::TextStart { id }
            | Chunk::TextEnd { id }
            | Chunk::ReasoningStart { id }
            | Chunk::ReasoningEnd { id } => m.serialize_entry("id", id)?,
            Chunk::TextDelta { id, delta } | Chunk::ReasoningDelta { id, delta } => {
                m.serialize_entry("id", id)?;
                m.serialize_entry("delta", delta)?;
            }
            Chunk::ToolInputStart {
                tool_call_id,
                tool_name,
                title,
            } => {
                m.serialize_entry("toolCallId", tool_call_id)?;
                m.serialize_entry("toolName", tool_name)?;
                if let Some(t) = title {
                    m.serialize_entry("title", t)?;
                }
            }
            Chunk::ToolInputDelta {
                tool_call_id,
                input_text_delta,
            } => {
                m.serialize_entry("toolCallId", tool_call_id)?;
                m.serialize_entry("inputTextDelta", input_text_delta)?;
            }
            Chunk::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
                title,
            } => {
                m.serialize_entry("toolCallId", tool_call_id)?;
                m.serialize_entry("toolName", tool_name)?;
                m.serialize_entry("input", input)?;
                if let Some(t) = title {
                    m.serialize_entry("title", t)?;
                }
            }
            Chunk::ToolOutputAvailable {
                tool_call_id,
                output,
                preliminary,
            } => {
                m.serialize_entry("toolCallId", tool_call_id)?;
                m.serialize_entry("output", output)?;
                if *preliminary {
                    m.serialize_entry("preliminary", &true)?;
                }
            }
            Chunk::ToolOutputError {
                tool_call_id,
                error_text,
            } => {
                m.serialize_entry("toolCallId", tool_call_id)?;
                m.serialize_entry("errorText", error_text)?;
            }
            Chunk::ToolOutputDenied { tool_call_id } => {
                m.serialize_entry("toolCallId", tool_call_id)?
            }
            Chunk::ToolApprovalRequest {
                approval_id,
                tool_call_id,
                reason,
            } => {
                m.serialize_entry("approvalId", approval_id)?;
                m.serialize_entry("toolCallId", tool_call_id)?;
                if let Some(r) = reason {
                    m.serialize_entry("reason", r)?;
                }
            }
            Chunk::SourceUrl {
                source_id,
                url,
                title,
            } => {
                m.serialize_entry("sourceId", source_id)?;
                m.serialize_entry("url", url)?;
                if let Some(t) = title {
                    m.serialize_entry("title", t)?;
                }
            }
            Chunk::SourceDocument {
                source_id,
                media_type,
                title,
                filename,
            } => {
                m.serialize_entry("sourceId", source_id)?;
                m.serialize_entry("mediaType", media_type)?;
                m.serialize_entry("title", title)?;
                if let Some(f) = filename {
                    m.serialize_entry("filename", f)?;
                }
            }
            Chunk::MessageMetadata { message_metadata } => {
                m.serialize_entry("messageMetadata", message_metadata)?;
            }
            Chunk::File { url, media_type } => {
                m.serialize_entry("url", url)?;
                m.serialize_entry("mediaType", media_type)?;
            }
            Chunk::Data {
                id,
                data,
                transient,
                ..
            } => {
                if let Some(id) = id {
                    m.serialize_entry("id", id)?;
                }
                m.serialize_entry("data", data)?;
                if *transient {
                    m.serialize_entry("transient", &true)?;
                }
            }
        }
        m.end()
    }
}

/// A chunk addressed to a message (`None` for session-level surfaces).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkOut {
    pub message_id: Option<String>,
    /// The message's role, on a `start` chunk (a consumer that renders by
    /// role learns it as the message opens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<super::Role>,
    /// Who wrote the message and in which turn and run, on a `start` chunk
    /// of a message that names any (the snapshot's message fields, which no
    /// chunk carries), so that a client rebuilds the message whole.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Box<Origin>>,
    pub chunk: Chunk,
}

/// A message's author, turn and run, as its `start` entry carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serialises_to_ai_sdk_shapes() {
        let c = Chunk::ToolInputAvailable {
            tool_call_id: "t1".into(),
            tool_name: "search".into(),
            input: json!({"q": "x"}),
            title: None,
        };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"type":"tool-input-available","toolCallId":"t1","toolName":"search","input":{"q":"x"}})
        );
        let d = Chunk::data("runtime", "runtime", json!({"status": "running"}));
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"type":"data-runtime","id":"runtime","data":{"status":"running"}})
        );
        let f = Chunk::Finish {
            finish_reason: Some(FinishReason::ContentFilter),
        };
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"type":"finish","finishReason":"content-filter"})
        );
    }
}
