//! The shapes of AG-UI 1.0 the AG-UI view writes: the session's messages
//! as AG-UI messages, tool results, reasoning ids and interrupts.

use serde_json::{json, Map, Value};

use crate::projection::{Message, Part, Role};

/// The AG-UI id of a reasoning part: its message's when the message is the
/// reasoning (as AG-UI sends it), else `<message>:<part>`.
pub(super) fn reasoning_id(mid: &str, part: &str) -> String {
    if part.is_empty() || part == mid {
        mid.to_string()
    } else {
        format!("{mid}:{part}")
    }
}

/// A tool's result as AG-UI's tool message: `content` is the output as a
/// string (JSON text when it is not one).
pub(super) fn tool_result(tc: &str, output: &Value) -> Value {
    let content = match output {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    json!({"type": "TOOL_CALL_RESULT", "messageId": format!("tool-{tc}"), "toolCallId": tc,
           "content": content, "role": "tool"})
}

/// A pending action as an AG-UI interrupt.
pub(super) fn interrupt(a: &Value) -> Value {
    let mut i = Map::new();
    i.insert(
        "id".into(),
        a.get("actionId").cloned().unwrap_or(Value::Null),
    );
    let reason = a
        .get("actionType")
        .and_then(Value::as_str)
        .unwrap_or("input_required");
    i.insert("reason".into(), reason.into());
    for (from, to) in [
        ("question", "message"),
        ("toolCallId", "toolCallId"),
        ("schema", "responseSchema"),
    ] {
        if let Some(v) = a.get(from).filter(|v| !v.is_null()) {
            i.insert(to.into(), v.clone());
        }
    }
    Value::Object(i)
}

/// The session's messages as AG-UI messages: users' text; an assistant's
/// reasoning as reasoning messages, its text and tool calls, then its
/// tools' results as tool messages; activities as activity messages.
pub(super) fn messages(ms: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    for m in ms {
        let text: String = m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        match m.role {
            Role::User | Role::System => {
                let role = if m.role == Role::User {
                    "user"
                } else {
                    "system"
                };
                out.push(json!({"id": m.id, "role": role, "content": text}));
                continue;
            }
            Role::Assistant => {}
        }
        for p in &m.parts {
            if let Part::Reasoning { id, text, .. } = p {
                out.push(
                    json!({"id": reasoning_id(&m.id, id), "role": "reasoning", "content": text}),
                );
            }
        }
        let calls: Vec<Value> = m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Tool { tool_name, tool_call_id, input, .. } => Some(json!({
                    "id": tool_call_id, "type": "function",
                    "function": {"name": tool_name,
                                 "arguments": input.as_deref().map_or_else(|| "{}".into(), Value::to_string)}})),
                _ => None,
            })
            .collect();
        let has_reasoning_only =
            !m.parts.is_empty() && m.parts.iter().all(|p| matches!(p, Part::Reasoning { .. }));
        if !has_reasoning_only {
            let mut a = json!({"id": m.id, "role": "assistant", "content": text});
            if !calls.is_empty() {
                a["toolCalls"] = calls.into();
            }
            out.push(a);
        }
        for p in &m.parts {
            match p {
                Part::Tool {
                    tool_call_id,
                    output: Some(o),
                    state,
                    error_text,
                    ..
                } => {
                    let r = match state {
                        crate::projection::ToolState::OutputAvailable => Value::clone(o),
                        _ => Value::String(error_text.clone().unwrap_or_default()),
                    };
                    let t = tool_result(tool_call_id, &r);
                    out.push(
                        json!({"id": t["messageId"], "role": "tool", "toolCallId": tool_call_id,
                                    "content": t["content"]}),
                    );
                }
                Part::Tool {
                    tool_call_id,
                    error_text: Some(e),
                    ..
                } => {
                    out.push(json!({"id": format!("tool-{tool_call_id}"), "role": "tool",
                                    "toolCallId": tool_call_id, "content": e}));
                }
                Part::Data {
                    name,
                    id: Some(id),
                    data,
                } if name == "activity" => {
                    out.push(json!({"id": id, "role": "activity",
                        "activityType": data.get("activityType").cloned().unwrap_or(json!("activity")),
                        "content": data.get("content").cloned().unwrap_or(json!({}))}));
                }
                _ => {}
            }
        }
    }
    out
}
