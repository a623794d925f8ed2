//! Vercel AI SDK `UIMessageChunk` shapes, as the reducer emits them.
//!
//! Field names and optionality follow the `ai` package's `uiMessageChunkSchema`
//! (strict objects: no extra keys). A `data-*` chunk serialises its type as
//! `data-<name>`.

use std::sync::Arc;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;
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
        /// Shared with the tool part it fills.
        input: Arc<Value>,
        title: Option<String>,
    },
    ToolOutputAvailable {
        tool_call_id: String,
        /// Shared with the tool part it fills.
        output: Arc<Value>,
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
        /// Shared with the message part it fills (built once, never copied).
        data: Arc<Value>,
        transient: bool,
    },
    /// The `data-<name>` chunk of a session surface entry (`data-tools`,
    /// `data-runtime`, ...), its data written straight to JSON text rather
    /// than built as a `Value`: it encodes exactly as the `Data` chunk of the
    /// same name, id and data would. It belongs to no message.
    Surface {
        name: &'static str,
        id: String,
        data: RawJson,
    },
}

/// JSON text that serialises as itself: a chunk's `data`, already encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// `value` encoded as JSON; `null` if it cannot be (what
    /// `serde_json::to_value(..).unwrap_or(Value::Null)` gives).
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Self {
        Self::try_of(value).unwrap_or_else(|| RawJson("null".into()))
    }

    /// `value` encoded as JSON, `None` if it cannot be. Written into the
    /// thread's buffer (by `compact_json`: serde_json's bytes, sooner),
    /// then copied once into a string of the exact size.
    pub fn try_of<T: Serialize + ?Sized>(value: &T) -> Option<Self> {
        crate::compact_json::with_scratch(|buf| {
            crate::compact_json::write(buf, value).ok()?;
            Some(RawJson(buf.as_str().into()))
        })
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
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
                data: Arc::new(v.get("data").cloned().unwrap_or(Value::Null)),
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
            Chunk::Surface { name, .. } => std::borrow::Cow::Owned(format!("data-{name}")),
        }
    }

    /// Append the chunk's JSON to `buf`: the bytes `serde_json` writes for
    /// it, with a surface entry's data copied as it is.
    pub fn write_json(&self, buf: &mut String) {
        match self {
            Chunk::Surface { id, data, .. } => {
                buf.push_str("{\"type\":");
                json_to(buf, &self.type_name());
                buf.push_str(",\"id\":");
                json_to(buf, id);
                buf.push_str(",\"data\":");
                buf.push_str(data.get());
                buf.push('}');
            }
            _ => json_to(buf, self),
        }
    }

    /// A session-level or message-level data chunk.
    pub fn data(name: impl Into<String>, id: impl Into<String>, data: Value) -> Self {
        Chunk::Data {
            name: name.into(),
            id: Some(id.into()),
            data: Arc::new(data),
            transient: false,
        }
    }
}

/// Append `v` as JSON (chunks and their fields always serialise), by
/// `compact_json`: serde_json's bytes, sooner.
fn json_to<T: Serialize + ?Sized>(buf: &mut String, v: &T) {
    crate::compact_json::write(buf, v).expect("chunks serialise");
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
            Chunk::Surface { id, data, .. } => {
                m.serialize_entry("id", id)?;
                m.serialize_entry("data", data)?;
            }
        }
        m.end()
    }
}

/// A chunk addressed to a message (`None` for session-level surfaces).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkOut {
    pub message_id: Option<Arc<str>>,
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
            input: Arc::new(json!({"q": "x"})),
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

    /// Encode `entry` both ways: as the `Data` chunk of its `Value` (what
    /// the reducer built before) and as a `Surface` chunk; the bytes agree.
    fn same_bytes<T: Serialize>(name: &'static str, id: &str, entry: &T) {
        let old = Chunk::data(name, id, serde_json::to_value(entry).unwrap());
        let new = Chunk::Surface {
            name,
            id: id.into(),
            data: RawJson::of(entry),
        };
        let want = String::from_utf8(serde_json::to_vec(&old).unwrap()).unwrap();
        let mut buf = String::new();
        new.write_json(&mut buf);
        assert_eq!(buf, want, "write_json");
        let generic = String::from_utf8(serde_json::to_vec(&new).unwrap()).unwrap();
        assert_eq!(generic, want, "Serialize");
        assert_eq!(new.type_name(), old.type_name());
    }

    #[test]
    fn surface_chunks_encode_as_value_data_chunks() {
        use crate::projection::public_state::*;
        let odd = "é \"q\" \\ \u{1}\u{2028}\t😀</script>";
        same_bytes("runtime", "runtime", &Runtime::default());
        let runtime = Runtime {
            status: "waiting".into(),
            run_id: Some(odd.into()),
            phase: Some("acting".into()),
            retryable: Some(false),
            stale: true,
            pending_actions: usize::MAX,
            updated_at: Some("2026-01-01T00:00:00Z".into()),
            ..Runtime::default()
        };
        same_bytes("runtime", "runtime", &runtime);
        let tool = ToolEntry {
            tool_call_id: odd.into(),
            tool_name: "grep".into(),
            status: "failed".into(),
            message_id: Some("msg-1".into()),
            title: None,
            input_summary: Some("{\"q\":\"x\"}".into()),
            progress: Some(
                json!({"z": 0.1, "a": [1e300, -0.0, 5e-324, u64::MAX, i64::MIN], "m": {"b": null, "a": true}}),
            ),
            output_refs: vec!["o1".into(), odd.into()],
            error_text: Some(odd.into()),
            failure_category: Some("timeout".into()),
            started_cursor: 1,
            updated_cursor: u64::MAX,
            kind: Some("tool".into()),
            exit_code: Some(-1),
        };
        same_bytes("tools", odd, &tool);
        let action = ActionEntry {
            action_id: "a1".into(),
            status: "pending".into(),
            action_type: Some("approval".into()),
            title: Some(odd.into()),
            decision: None,
            tool_call_id: Some("t1".into()),
            requested_by: None,
            message_id: Some("msg-1".into()),
            requested_cursor: Some(3),
            resolved_cursor: None,
            request: ActionRequest {
                question: Some(odd.into()),
                options: Some(json!(["yes", {"label": "no", "value": 2.5}])),
                schema: Some(json!({"type": "object", "properties": {"b": {}, "a": {}}})),
                credential: Some(json!({"name": "gh", "kind": "token"})),
                plan: Some(json!(odd)),
                ..ActionRequest::default()
            },
        };
        same_bytes("actions", "a1", &action);
        let artifact = ArtifactEntry {
            artifact_id: "f1".into(),
            title: Some("a.md".into()),
            kind: None,
            status: Some("changed".into()),
            version_id: None,
            path: Some(odd.into()),
            refs: vec![],
            message_id: None,
            updated_cursor: 7,
        };
        same_bytes("artifacts", "f1", &artifact);
        let diagnostic = Diagnostic {
            id: "d1-1".into(),
            code: "sequence_gap".into(),
            severity: Severity::Warning,
            class: "text.delta".into(),
            event_id: odd.into(),
            cursor: 9,
            message: odd.into(),
            tool_call_id: None,
        };
        same_bytes("diagnostics", "d1-1", &diagnostic);
        same_bytes("queue", "queue", &json!({"items": [odd, 1, null]}));
        same_bytes("team", "roster", &vec![odd.to_string()]);
    }
}
