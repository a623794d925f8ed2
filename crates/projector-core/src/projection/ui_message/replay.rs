//! A message as the chunks that rebuild it: what a late subscriber of an
//! AI SDK message stream is sent before the live chunks.

use std::sync::Arc;

use super::{Message, MessageStatus, Part, ToolState};
use serde_json::Value;

use crate::projection::chunk::{Chunk, FinishReason};

impl Message {
    /// The chunks that rebuild this message from nothing, as the AI SDK
    /// applies them: `start`, each part in order (open text and reasoning
    /// parts stay open under their chunk ids, so live deltas continue them),
    /// then `finish` / `abort` if the message has ended.
    pub fn replay_chunks(&self) -> Vec<Chunk> {
        let mut out = vec![Chunk::Start {
            message_id: self.id.to_string(),
            message_metadata: self.metadata.clone(),
        }];
        for (i, part) in self.parts.iter().enumerate() {
            let open_id = self
                .open_parts
                .iter()
                .find(|(_, idx)| *idx == i)
                .map(|(id, _)| id.clone());
            match part {
                Part::Text { text, .. } | Part::Reasoning { text, .. } => {
                    let reasoning = matches!(part, Part::Reasoning { .. });
                    let id = match part {
                        Part::Reasoning { id, .. } => id.clone(),
                        _ => open_id
                            .clone()
                            .unwrap_or_else(|| format!("{}-r{i}", self.id)),
                    };
                    out.push(if reasoning {
                        Chunk::ReasoningStart { id: id.clone() }
                    } else {
                        Chunk::TextStart { id: id.clone() }
                    });
                    if !text.is_empty() {
                        let delta = text.clone();
                        out.push(if reasoning {
                            Chunk::ReasoningDelta {
                                id: id.clone(),
                                delta,
                            }
                        } else {
                            Chunk::TextDelta {
                                id: id.clone(),
                                delta,
                            }
                        });
                    }
                    if open_id.is_none() {
                        out.push(if reasoning {
                            Chunk::ReasoningEnd { id }
                        } else {
                            Chunk::TextEnd { id }
                        });
                    }
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
                    out.push(Chunk::ToolInputStart {
                        tool_call_id: tool_call_id.clone(),
                        tool_name: tool_name.clone(),
                        title: title.clone(),
                    });
                    if *state != ToolState::InputStreaming || input.is_some() {
                        out.push(Chunk::ToolInputAvailable {
                            tool_call_id: tool_call_id.clone(),
                            tool_name: tool_name.clone(),
                            input: input.clone().unwrap_or_else(|| Arc::new(Value::Null)),
                            title: title.clone(),
                        });
                    }
                    if let Some(id) = approval
                        .as_ref()
                        .and_then(|a| a.get("id"))
                        .and_then(Value::as_str)
                    {
                        out.push(Chunk::ToolApprovalRequest {
                            approval_id: id.to_string(),
                            tool_call_id: tool_call_id.clone(),
                            reason: approval
                                .as_ref()
                                .and_then(|a| a.get("requestReason"))
                                .and_then(Value::as_str)
                                .map(str::to_string),
                        });
                    }
                    match state {
                        ToolState::OutputAvailable => out.push(Chunk::ToolOutputAvailable {
                            tool_call_id: tool_call_id.clone(),
                            output: output.clone().unwrap_or_else(|| Arc::new(Value::Null)),
                            preliminary: preliminary.unwrap_or(false),
                        }),
                        ToolState::OutputError => out.push(Chunk::ToolOutputError {
                            tool_call_id: tool_call_id.clone(),
                            error_text: error_text.clone().unwrap_or_default(),
                        }),
                        ToolState::OutputDenied => out.push(Chunk::ToolOutputDenied {
                            tool_call_id: tool_call_id.clone(),
                        }),
                        ToolState::InputStreaming
                        | ToolState::InputAvailable
                        | ToolState::ApprovalRequested => {}
                    }
                }
                Part::SourceUrl {
                    source_id,
                    url,
                    title,
                } => out.push(Chunk::SourceUrl {
                    source_id: source_id.clone(),
                    url: url.clone(),
                    title: title.clone(),
                }),
                Part::SourceDocument {
                    source_id,
                    media_type,
                    title,
                    filename,
                } => out.push(Chunk::SourceDocument {
                    source_id: source_id.clone(),
                    media_type: media_type.clone(),
                    title: title.clone(),
                    filename: filename.clone(),
                }),
                Part::File { url, media_type } => out.push(Chunk::File {
                    url: url.clone(),
                    media_type: media_type.clone(),
                }),
                Part::StepStart => out.push(Chunk::StartStep),
                Part::Data { name, id, data } => out.push(Chunk::Data {
                    name: name.clone(),
                    id: id.clone(),
                    data: data.clone(),
                    transient: false,
                }),
            }
        }
        match self.status {
            MessageStatus::Streaming => {}
            MessageStatus::Complete => out.push(Chunk::Finish {
                finish_reason: Some(FinishReason::Stop),
            }),
            MessageStatus::Failed => {
                if let Some(t) = &self.error_text {
                    out.push(Chunk::Error {
                        error_text: t.clone(),
                    });
                }
                out.push(Chunk::Finish {
                    finish_reason: Some(FinishReason::Error),
                })
            }
            MessageStatus::Aborted => out.push(Chunk::Abort { reason: None }),
        }
        out
    }
}
