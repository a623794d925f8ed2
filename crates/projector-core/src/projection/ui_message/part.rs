//! The parts of a message in the AI SDK `UIMessage` shapes (text,
//! reasoning, tools with their states, files, sources, data parts), and
//! their JSON form: exactly what an AI SDK client holds.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Lifecycle of a part that streams (`text`, `reasoning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamState {
    Streaming,
    Done,
}

/// AI SDK tool part states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    InputStreaming,
    InputAvailable,
    /// The call waits for a person's approval (`tool-approval-request`).
    ApprovalRequested,
    OutputAvailable,
    OutputError,
    OutputDenied,
}

/// One `UIMessage` part. Serialises with a `type` tag exactly as the AI SDK
/// does (`tool-<name>` and `data-<name>` types included).
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text {
        text: String,
        state: StreamState,
    },
    /// `ai` 7 keeps the `reasoning-start` chunk id on the part.
    Reasoning {
        id: String,
        text: String,
        state: StreamState,
    },
    /// A static tool part: `type` is `tool-<tool_name>`. Its JSON values
    /// are boxed: a `Value` is 80 bytes, and every part of a message is as
    /// large as its largest kind.
    Tool {
        tool_name: String,
        tool_call_id: String,
        state: ToolState,
        input: Option<Arc<Value>>,
        output: Option<Arc<Value>>,
        error_text: Option<String>,
        preliminary: Option<bool>,
        title: Option<String>,
        /// `{id, requestReason?}` once an approval was asked for.
        approval: Option<Box<Value>>,
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
    StepStart,
    /// `data-<name>` part.
    Data {
        name: String,
        id: Option<String>,
        /// Shared with the chunk that put it here.
        data: Arc<Value>,
    },
}

impl Part {
    /// Tool call id of a tool part.
    pub fn tool_call_id(&self) -> Option<&str> {
        match self {
            Part::Tool { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        }
    }

    /// The JSON form (the AI SDK `UIMessagePart`).
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        match self {
            Part::Text { text, state } => {
                put("type", "text".into());
                put("text", text.clone().into());
                put("state", serde_json::to_value(state).unwrap_or(Value::Null));
            }
            Part::Reasoning { id, text, state } => {
                put("type", "reasoning".into());
                put("id", id.clone().into());
                put("text", text.clone().into());
                put("state", serde_json::to_value(state).unwrap_or(Value::Null));
            }
            Part::Tool {
                tool_name,
                tool_call_id,
                state,
                input,
                output,
                error_text,
                preliminary,
                title,
                approval,
            } => {
                put("type", format!("tool-{tool_name}").into());
                put("toolCallId", tool_call_id.clone().into());
                put("state", serde_json::to_value(state).unwrap_or(Value::Null));
                if let Some(t) = title {
                    put("title", t.clone().into());
                }
                if let Some(i) = input {
                    put("input", Value::clone(i));
                }
                if let Some(o) = output {
                    put("output", Value::clone(o));
                }
                if let Some(e) = error_text {
                    put("errorText", e.clone().into());
                }
                if let Some(p) = preliminary {
                    put("preliminary", (*p).into());
                }
                if let Some(a) = approval {
                    put("approval", Value::clone(a));
                }
            }
            Part::SourceUrl {
                source_id,
                url,
                title,
            } => {
                put("type", "source-url".into());
                put("sourceId", source_id.clone().into());
                put("url", url.clone().into());
                if let Some(t) = title {
                    put("title", t.clone().into());
                }
            }
            Part::SourceDocument {
                source_id,
                media_type,
                title,
                filename,
            } => {
                put("type", "source-document".into());
                put("sourceId", source_id.clone().into());
                put("mediaType", media_type.clone().into());
                put("title", title.clone().into());
                if let Some(f) = filename {
                    put("filename", f.clone().into());
                }
            }
            Part::File { url, media_type } => {
                put("type", "file".into());
                put("mediaType", media_type.clone().into());
                put("url", url.clone().into());
            }
            Part::StepStart => put("type", "step-start".into()),
            Part::Data { name, id, data } => {
                put("type", format!("data-{name}").into());
                if let Some(id) = id {
                    put("id", id.clone().into());
                }
                put("data", Value::clone(data));
            }
        }
        Value::Object(m)
    }

    /// Parse the JSON form back (checkpoints).
    pub fn from_json(v: &Value) -> Option<Part> {
        let o = v.as_object()?;
        let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
        let ty = s("type")?;
        let stream_state = |o: &serde_json::Map<String, Value>| {
            o.get("state")
                .cloned()
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or(StreamState::Done)
        };
        Some(match ty.as_str() {
            "text" => Part::Text {
                text: s("text").unwrap_or_default(),
                state: stream_state(o),
            },
            "reasoning" => Part::Reasoning {
                id: s("id").unwrap_or_default(),
                text: s("text").unwrap_or_default(),
                state: stream_state(o),
            },
            "source-url" => Part::SourceUrl {
                source_id: s("sourceId")?,
                url: s("url")?,
                title: s("title"),
            },
            "source-document" => Part::SourceDocument {
                source_id: s("sourceId")?,
                media_type: s("mediaType")?,
                title: s("title")?,
                filename: s("filename"),
            },
            "file" => Part::File {
                url: s("url")?,
                media_type: s("mediaType")?,
            },
            "step-start" => Part::StepStart,
            t if t.starts_with("tool-") => Part::Tool {
                tool_name: t["tool-".len()..].to_string(),
                tool_call_id: s("toolCallId")?,
                state: serde_json::from_value(o.get("state")?.clone()).ok()?,
                input: o.get("input").cloned().map(Arc::new),
                output: o.get("output").cloned().map(Arc::new),
                error_text: s("errorText"),
                preliminary: o.get("preliminary").and_then(Value::as_bool),
                title: s("title"),
                approval: o.get("approval").cloned().map(Box::new),
            },
            t if t.starts_with("data-") => Part::Data {
                name: t["data-".len()..].to_string(),
                id: s("id"),
                data: Arc::new(o.get("data").cloned().unwrap_or(Value::Null)),
            },
            _ => return None,
        })
    }
}

impl Serialize for Part {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Part::from_json(&v).ok_or_else(|| serde::de::Error::custom("unknown UIMessage part"))
    }
}
