//! The Umo Editor Next message body (seed 001): a second view of the same
//! messages, for chat widgets of that family. Pure mapping, no state:
//!
//! | our part | Umo content block |
//! |---|---|
//! | `text` of an assistant | `markdown` (Umo renders model output as markdown; the model writes it) |
//! | `text` of a user or system message | `text` |
//! | `reasoning`, streaming | `thinking` `{title, text}` (the live "thinking" indicator) |
//! | `reasoning`, done | `reasoning` `[{type: "text", data}]` |
//! | `tool-<name>` | `toolcall` `{toolCallId, toolCallName, eventType, args, result?}`; status from the AI SDK state |
//! | `data-evidence-citation`, `source-url`, `source-document` (consecutive ones together; an evidence's source part and its card are one reference) | `search` `{title, references: [{title, type?, url?, site?, date?, content?}]}` |
//! | `file` with an `image/*` media type | `image` `{url}` |
//! | other `file`, `data-attachment` (consecutive ones together) | `attachment` `[{fileType, url?, name?, isReference?, metadata}]` |
//! | `data-artifact-card`, `data-action-request`, `data-plan` | custom types `artifact`, `action`, `plan` (Umo's `AIContentTypeOverrides`) |
//! | `data-diagnostic-ref`, `step-start`, other `data-*` | nothing: diagnostics stay out of the conversation |
//!
//! Message status: streaming -> `streaming` (`pending` while it has no
//! content), complete -> `complete`, failed -> `error`, aborted -> `stop`.
//! `datetime` is the producer's `createdAt` of the fact that opened the
//! message (`metadata.createdAt`), left out when that fact had none: the
//! projection reads no clock. `suggestion` blocks are never produced: no
//! fact carries suggestions.

use serde_json::{json, Map, Value};

use super::ui_message::{Message, MessageStatus, Part, Role, StreamState, ToolState};

/// Umo `fileType` of a media type.
pub fn file_type(media_type: Option<&str>, name: Option<&str>) -> &'static str {
    let m = media_type.unwrap_or("").to_ascii_lowercase();
    let ext = name
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match (m.split('/').next().unwrap_or(""), m.as_str(), ext.as_str()) {
        ("image", _, _) => "image",
        ("video", _, _) => "video",
        ("audio", _, _) => "audio",
        (_, "application/pdf", _) | (_, _, "pdf") => "pdf",
        (_, m, _) if m.contains("presentation") || m.contains("powerpoint") => "ppt",
        (_, _, "ppt" | "pptx") => "ppt",
        (_, m, _) if m.contains("wordprocessing") || m.contains("msword") => "doc",
        (_, _, "doc" | "docx") => "doc",
        ("text", _, _) | (_, _, "txt" | "md") => "txt",
        _ => "file",
    }
}

fn tool_status(s: ToolState) -> (&'static str, &'static str) {
    match s {
        ToolState::InputStreaming => ("TOOL_CALL_ARGS", "streaming"),
        ToolState::InputAvailable => ("TOOL_CALL_END", "streaming"),
        ToolState::ApprovalRequested => ("TOOL_CALL_END", "pending"),
        ToolState::OutputAvailable => ("TOOL_CALL_RESULT", "complete"),
        ToolState::OutputError => ("TOOL_CALL_RESULT", "error"),
        ToolState::OutputDenied => ("TOOL_CALL_RESULT", "stop"),
    }
}

fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One message in the Umo shape.
pub fn message(m: &Message) -> Value {
    let mut content: Vec<Value> = Vec::new();
    let assistant = m.role == Role::Assistant;
    let cited: Vec<&str> = m
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Data { name, id, .. } if name == "evidence-citation" => id.as_deref(),
            _ => None,
        })
        .collect();
    for p in &m.parts {
        match p {
            Part::Text { text, .. } if text.is_empty() => {}
            Part::Text { text, state } => {
                let ty = if assistant { "markdown" } else { "text" };
                let mut b = json!({"type": ty, "data": text});
                if *state == StreamState::Streaming {
                    b["status"] = "streaming".into();
                }
                content.push(b);
            }
            Part::Reasoning { id, text, state } => content.push(match state {
                StreamState::Streaming => {
                    json!({"type": "thinking", "id": id, "status": "streaming",
                                                 "data": {"title": "Thinking", "text": text}})
                }
                StreamState::Done => json!({"type": "reasoning", "id": id, "status": "complete",
                                            "data": [{"type": "text", "data": text}]}),
            }),
            Part::Tool {
                tool_name,
                tool_call_id,
                state,
                input,
                output,
                error_text,
                ..
            } => {
                let (event, status) = tool_status(*state);
                let mut data = json!({
                    "toolCallId": tool_call_id,
                    "toolCallName": tool_name,
                    "eventType": event,
                    "parentMessageId": m.id,
                    "args": input.as_deref().map(json_text).unwrap_or_default(),
                });
                if let Some(o) = output {
                    data["result"] = json_text(o).into();
                } else if let Some(e) = error_text {
                    data["result"] = e.clone().into();
                }
                content.push(
                    json!({"type": "toolcall", "id": tool_call_id, "status": status, "data": data}),
                );
            }
            // An evidence's source part and its citation card are one
            // reference: the card, which says more, is kept.
            Part::SourceUrl { source_id, .. } | Part::SourceDocument { source_id, .. }
                if cited.contains(&source_id.as_str()) => {}
            Part::SourceUrl { url, title, .. } => {
                let mut r =
                    json!({"title": title.clone().unwrap_or_else(|| url.clone()), "url": url});
                if let Some(site) = site_of(url) {
                    r["site"] = site.into();
                }
                push_reference(&mut content, r);
            }
            Part::SourceDocument {
                title, filename, ..
            } => {
                let mut r = json!({"title": title, "type": "document"});
                if let Some(f) = filename {
                    r["content"] = f.clone().into();
                }
                push_reference(&mut content, r);
            }
            Part::File { url, media_type } if media_type.starts_with("image/") && assistant => {
                content.push(json!({"type": "image", "data": {"url": url}}));
            }
            Part::File { url, media_type } => push_attachment(
                &mut content,
                json!({"fileType": file_type(Some(media_type), None), "url": url,
                       "metadata": {"mediaType": media_type}}),
            ),
            Part::Data { name, id, data } => match name.as_str() {
                "evidence-citation" => push_reference(&mut content, citation(data)),
                "attachment" => {
                    let s = |k: &str| data.get(k).and_then(Value::as_str);
                    let mut a = Map::new();
                    a.insert(
                        "fileType".into(),
                        file_type(s("mediaType"), s("name")).into(),
                    );
                    if let Some(n) = s("name") {
                        a.insert("name".into(), n.into());
                    }
                    if let Some(u) = s("url") {
                        a.insert("url".into(), u.into());
                    }
                    if let Some(sz) = data.get("size").filter(|v| v.is_number()) {
                        a.insert("size".into(), sz.clone());
                    }
                    a.insert("isReference".into(), true.into());
                    a.insert("metadata".into(), Value::clone(data));
                    push_attachment(&mut content, Value::Object(a));
                }
                "artifact-card" | "action-request" | "plan" => {
                    let ty = match name.as_str() {
                        "artifact-card" => "artifact",
                        "action-request" => "action",
                        _ => "plan",
                    };
                    let mut b = json!({"type": ty, "data": data});
                    if let Some(id) = id {
                        b["id"] = id.clone().into();
                    }
                    content.push(b);
                }
                _ => {}
            },
            Part::StepStart => {}
        }
    }
    let status = match m.status {
        MessageStatus::Streaming if content.is_empty() => "pending",
        MessageStatus::Streaming => "streaming",
        MessageStatus::Complete => "complete",
        MessageStatus::Failed => "error",
        MessageStatus::Aborted => "stop",
    };
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
    };
    let mut out = json!({"id": m.id, "role": role, "status": status, "content": content});
    if let Some(t) = m
        .metadata
        .as_ref()
        .and_then(|md| md.get("createdAt"))
        .and_then(Value::as_str)
    {
        out["datetime"] = t.into();
    }
    if let Some(a) = &m.agent_id {
        out["ext"] = json!({"agentId": a});
    }
    out
}

/// The host of an http(s) URL.
fn site_of(url: &str) -> Option<&str> {
    url.split("://")
        .nth(1)
        .and_then(|r| r.split(['/', '?', '#']).next())
        .filter(|h| !h.is_empty())
}

/// A `search` reference of an evidence citation: its title, URL, site
/// (the publisher, else the URL's host), date, and the passage (or the
/// verdict) as content.
fn citation(data: &Value) -> Value {
    let s = |k: &str| data.get(k).and_then(Value::as_str);
    let title = s("title").or_else(|| s("evidenceId")).unwrap_or("evidence");
    let mut r = json!({"title": title, "type": "evidence"});
    if let Some(u) = s("url") {
        r["url"] = u.into();
    }
    if let Some(site) = s("source").or_else(|| s("url").and_then(site_of)) {
        r["site"] = site.into();
    }
    if let Some(d) = s("date") {
        r["date"] = d.into();
    }
    let content = match (s("verdict"), s("snippet")) {
        (Some(v), Some(t)) => Some(format!("verdict: {v}. {t}")),
        (Some(v), None) => Some(format!("verdict: {v}")),
        (None, Some(t)) => Some(t.to_string()),
        (None, None) => None,
    };
    if let Some(c) = content {
        r["content"] = c.into();
    }
    r
}

/// Add a reference to the `search` block at the end, or start one.
fn push_reference(content: &mut Vec<Value>, r: Value) {
    if let Some(last) = content.last_mut().filter(|b| b["type"] == "search") {
        if let Some(list) = last["data"]["references"].as_array_mut() {
            list.push(r);
            return;
        }
    }
    content.push(json!({"type": "search", "data": {"title": "Sources", "references": [r]}}));
}

/// Add an item to the `attachment` block at the end, or start one.
fn push_attachment(content: &mut Vec<Value>, a: Value) {
    if let Some(list) = content
        .last_mut()
        .filter(|b| b["type"] == "attachment")
        .and_then(|b| b["data"].as_array_mut())
    {
        list.push(a);
        return;
    }
    content.push(json!({"type": "attachment", "data": [a]}));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::projection::chunk::Chunk;

    fn msg(role: Role, chunks: Vec<Chunk>) -> Message {
        let mut m = Message::new("m1", role, 1);
        for c in chunks {
            m.apply(&c).unwrap();
        }
        m
    }

    #[test]
    fn assistant_parts_map_to_umo_blocks() {
        let t = |id: &str| id.to_string();
        let m = msg(
            Role::Assistant,
            vec![
                Chunk::Start {
                    message_id: t("m1"),
                    message_metadata: None,
                },
                Chunk::ReasoningStart { id: t("r") },
                Chunk::ReasoningDelta {
                    id: t("r"),
                    delta: t("Checked docs"),
                },
                Chunk::ReasoningEnd { id: t("r") },
                Chunk::TextStart { id: t("a") },
                Chunk::TextDelta {
                    id: t("a"),
                    delta: t("# Plan"),
                },
                Chunk::TextEnd { id: t("a") },
                Chunk::ToolInputStart {
                    tool_call_id: t("c1"),
                    tool_name: t("search"),
                    title: None,
                },
                Chunk::ToolInputAvailable {
                    tool_call_id: t("c1"),
                    tool_name: t("search"),
                    input: Arc::new(json!({"q": "x"})),
                    title: None,
                },
                Chunk::ToolOutputAvailable {
                    tool_call_id: t("c1"),
                    output: Arc::new(json!({"summary": "2 hits"})),
                    preliminary: false,
                },
                Chunk::ToolInputStart {
                    tool_call_id: t("c2"),
                    tool_name: t("grep"),
                    title: None,
                },
                Chunk::ToolOutputError {
                    tool_call_id: t("c2"),
                    error_text: t("boom"),
                },
                Chunk::data(
                    "evidence-citation",
                    "v1",
                    json!({"evidenceId": "v1", "title": "RFC", "verdict": "supported"}),
                ),
                Chunk::SourceUrl {
                    source_id: t("s"),
                    url: t("https://example.com/a"),
                    title: Some(t("Ex")),
                },
                Chunk::File {
                    url: t("https://x.test/p.png"),
                    media_type: t("image/png"),
                },
                Chunk::data("artifact-card", "a1", json!({"artifactId": "a1"})),
                Chunk::data("diagnostic-ref", "d1", json!({"diagnosticId": "d1"})),
                Chunk::TextStart { id: t("b") },
                Chunk::TextDelta {
                    id: t("b"),
                    delta: t("more"),
                },
            ],
        );
        let u = message(&m);
        assert_eq!(u["role"], "assistant");
        assert_eq!(u["status"], "streaming");
        let c = u["content"].as_array().unwrap();
        let types: Vec<&str> = c.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "reasoning",
                "markdown",
                "toolcall",
                "toolcall",
                "search",
                "image",
                "artifact",
                "markdown"
            ]
        );
        assert_eq!(
            c[0]["data"],
            json!([{"type": "text", "data": "Checked docs"}])
        );
        assert_eq!(c[2]["status"], "complete");
        assert_eq!(c[2]["data"]["eventType"], "TOOL_CALL_RESULT");
        assert_eq!(c[2]["data"]["args"], "{\"q\":\"x\"}");
        assert_eq!(c[2]["data"]["result"], "{\"summary\":\"2 hits\"}");
        assert_eq!(c[3]["status"], "error");
        assert_eq!(c[3]["data"]["result"], "boom");
        let refs = c[4]["data"]["references"].as_array().unwrap();
        assert_eq!(
            refs.len(),
            2,
            "consecutive citations share one search block"
        );
        assert_eq!(refs[0]["content"], "verdict: supported");
        assert_eq!(refs[1]["site"], "example.com");
        assert_eq!(c[7]["status"], "streaming");
        assert!(!u.to_string().contains("d1"), "diagnostics stay out");
    }

    #[test]
    fn user_attachments_and_statuses() {
        let m = msg(
            Role::User,
            vec![
                Chunk::TextStart { id: "t".into() },
                Chunk::TextDelta {
                    id: "t".into(),
                    delta: "Summarise".into(),
                },
                Chunk::TextEnd { id: "t".into() },
                Chunk::File {
                    url: "https://x.test/a.pdf".into(),
                    media_type: "application/pdf".into(),
                },
                Chunk::data(
                    "attachment",
                    "campaign:42",
                    json!({"kind": "business_object", "objectType": "campaign", "objectId": "42", "name": "Q3.pptx"}),
                ),
                Chunk::Finish {
                    finish_reason: None,
                },
            ],
        );
        let u = message(&m);
        assert_eq!(u["status"], "complete");
        assert_eq!(
            u["content"][0],
            json!({"type": "text", "data": "Summarise"})
        );
        let att = u["content"][1]["data"].as_array().unwrap();
        assert_eq!(u["content"][1]["type"], "attachment");
        assert_eq!(att.len(), 2);
        assert_eq!(att[0]["fileType"], "pdf");
        assert_eq!(att[1]["fileType"], "ppt");
        assert_eq!(att[1]["isReference"], true);

        let mut e = Message::new("e", Role::Assistant, 1);
        assert_eq!(message(&e)["status"], "pending");
        e.apply(&Chunk::Finish {
            finish_reason: Some(crate::projection::FinishReason::Error),
        })
        .unwrap();
        assert_eq!(message(&e)["status"], "error");
        let mut a = Message::new("a", Role::Assistant, 1);
        a.apply(&Chunk::Abort { reason: None }).unwrap();
        assert_eq!(message(&a)["status"], "stop");
    }

    #[test]
    fn file_types() {
        assert_eq!(file_type(Some("video/mp4"), None), "video");
        assert_eq!(file_type(Some("audio/mpeg"), None), "audio");
        assert_eq!(file_type(None, Some("a.docx")), "doc");
        assert_eq!(file_type(Some("text/plain"), None), "txt");
        assert_eq!(file_type(None, None), "file");
    }
}
