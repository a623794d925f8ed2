//! The shapes of AG-UI 1.0 the AG-UI view writes: the session's messages
//! as AG-UI messages (one per text segment), tool results, reasoning ids
//! and interrupts; and the segment rule they share with the live events.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::projection::{Message, Part, Role, ToolState};

/// The AG-UI id of a reasoning part: its message's when the message is the
/// reasoning (as AG-UI sends it), else `<message>:<part>`.
pub(super) fn reasoning_id(mid: &str, part: &str) -> String {
    if part.is_empty() || part == mid {
        mid.to_string()
    } else {
        format!("{mid}:{part}")
    }
}

/// The AG-UI id of segment `n` of message `mid`: the message's own id for
/// the first, `<messageId>:<n>` for the next ones.
pub(super) fn segment_id(mid: &str, n: usize) -> String {
    if n == 0 {
        mid.to_string()
    } else {
        format!("{mid}:{n}")
    }
}

/// Where an assistant message stands in AG-UI messages: one AG-UI message
/// per text segment. A text part that follows anything of the current
/// segment (text, or a tool call) opens the next segment; a tool call
/// belongs to the segment it follows. The snapshot and the live events
/// walk a message's parts by this one rule, so that they name the same
/// AG-UI messages.
///
/// After a step tried again, a live connection numbers the new try's
/// segments after the ones it dropped (`floor`): an AG-UI message id is
/// never used twice on one connection. A snapshot numbers them from what
/// stands, so the ids of such segments differ between the two.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Segments {
    n: usize,
    used: bool,
    floor: usize,
}

impl Segments {
    /// A text part begins: the AG-UI message it opens.
    pub fn text(&mut self, mid: &str) -> String {
        if self.used {
            self.n += 1;
        }
        self.n = self.n.max(self.floor);
        self.used = true;
        segment_id(mid, self.n)
    }

    /// These segments (of what stands of a message after a step tried
    /// again) continue a connection that had `earlier`: new segments come
    /// after every one `earlier` opened. With nothing left standing, even
    /// a tool call opens a new one.
    pub fn after(&mut self, earlier: Segments) {
        self.floor = if earlier.used {
            earlier.n + 1
        } else {
            earlier.floor
        };
        if !self.used {
            self.n = self.floor;
        }
    }

    /// A tool call begins: the AG-UI message it belongs to.
    pub fn tool(&mut self, mid: &str) -> String {
        self.used = true;
        segment_id(mid, self.n)
    }
}

/// What the view learns of the session's messages from a snapshot or from
/// the frames: the segments of each message, the AG-UI id of each open
/// text part, each tool call's parent and name, each message's role and
/// agent.
#[derive(Debug, Default)]
pub(super) struct Books {
    pub segments: HashMap<String, Segments>,
    /// `(message, text part chunk id)` -> AG-UI message id, while open.
    pub texts: HashMap<(String, String), String>,
    /// Tool call id -> the AG-UI message it belongs to.
    pub parents: HashMap<String, String>,
    /// Tool call id -> tool name.
    pub names: HashMap<String, String>,
    pub roles: HashMap<String, Role>,
    /// Message id -> the teammate that wrote it (AG-UI `subagentRunId`).
    pub agents: HashMap<String, String>,
}

/// The events that open AG-UI reasoning message `id` (its span, then the
/// message).
pub(super) fn reasoning_opens(id: &str) -> [Value; 2] {
    [
        json!({"type": "REASONING_START", "messageId": id}),
        json!({"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"}),
    ]
}

/// The events that close AG-UI reasoning message `id` (the message, then
/// its span).
pub(super) fn reasoning_closes(id: &str) -> [Value; 2] {
    [
        json!({"type": "REASONING_MESSAGE_END", "messageId": id}),
        json!({"type": "REASONING_END", "messageId": id}),
    ]
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

/// The AG-UI role of a message's text.
pub(super) fn role_name(role: Option<Role>) -> &'static str {
    match role {
        Some(Role::User) => "user",
        Some(Role::System) => "system",
        _ => "assistant",
    }
}

/// The session's messages as AG-UI messages, in the order a client that
/// followed the session live holds them: users' text; an assistant's text
/// segments with the tool calls that follow each, its reasoning as
/// reasoning messages where it came, its tools' results as tool messages
/// right after the message that called them; activities as activity
/// messages. Fills `books` with what the live events that follow need.
pub(super) fn messages(ms: &[Message], books: &mut Books) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for m in ms {
        let mid: &str = &m.id;
        books.roles.insert(mid.to_string(), m.role);
        let agent = m.agent_id.as_deref().filter(|a| !a.is_empty());
        if let Some(a) = agent {
            books.agents.insert(mid.to_string(), a.to_string());
        }
        let owned = |mut v: Value| {
            if let Some(a) = agent {
                v["subagentRunId"] = a.into();
            }
            v
        };
        if m.role != Role::Assistant {
            let text: String = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            out.push(owned(
                json!({"id": mid, "role": role_name(Some(m.role)), "content": text}),
            ));
            continue;
        }
        let open: HashMap<usize, &str> = m
            .open_parts
            .iter()
            .map(|(id, i)| (*i, id.as_str()))
            .collect();
        let mut segs = Segments::default();
        // AG-UI id -> index in `out`, for this message's segments.
        let mut at: HashMap<String, usize> = HashMap::new();
        let mut results: Vec<(String, Value)> = Vec::new();
        for (i, p) in m.parts.iter().enumerate() {
            match p {
                Part::Text { text, .. } => {
                    let id = segs.text(mid);
                    if let Some(cid) = open.get(&i) {
                        books
                            .texts
                            .insert((mid.to_string(), cid.to_string()), id.clone());
                    }
                    match at.get(&id) {
                        Some(&k) => {
                            let had = out[k]["content"].as_str().unwrap_or("").to_string();
                            out[k]["content"] = (had + text).into();
                        }
                        None => {
                            at.insert(id.clone(), out.len());
                            out.push(owned(
                                json!({"id": id, "role": "assistant", "content": text}),
                            ));
                        }
                    }
                }
                Part::Reasoning { id, text, .. } => {
                    out.push(owned(
                        json!({"id": reasoning_id(mid, id), "role": "reasoning", "content": text}),
                    ));
                }
                Part::Tool {
                    tool_name,
                    tool_call_id,
                    input,
                    output,
                    state,
                    error_text,
                    ..
                } => {
                    let parent = segs.tool(mid);
                    books.parents.insert(tool_call_id.clone(), parent.clone());
                    books.names.insert(tool_call_id.clone(), tool_name.clone());
                    let k = *at.entry(parent.clone()).or_insert_with(|| {
                        out.push(owned(json!({"id": parent, "role": "assistant"})));
                        out.len() - 1
                    });
                    let args = input
                        .as_deref()
                        .map_or_else(|| "{}".into(), Value::to_string);
                    let call = json!({"id": tool_call_id, "type": "function",
                                      "function": {"name": tool_name, "arguments": args}});
                    match out[k].get_mut("toolCalls").and_then(Value::as_array_mut) {
                        Some(calls) => calls.push(call),
                        None => out[k]["toolCalls"] = json!([call]),
                    }
                    let result = match (state, output, error_text) {
                        (ToolState::OutputAvailable, Some(o), _) => Some(Value::clone(o)),
                        (ToolState::OutputAvailable, None, _) => None,
                        (_, _, Some(e)) => Some(Value::String(e.clone())),
                        (ToolState::OutputDenied, _, None) => Some("denied".into()),
                        _ => None,
                    };
                    if let Some(r) = result {
                        results.push((tool_call_id.clone(), r));
                    }
                }
                Part::Data {
                    name,
                    id: Some(id),
                    data,
                } if name == "activity" => {
                    out.push(owned(json!({"id": id, "role": "activity",
                        "activityType": data.get("activityType").cloned().unwrap_or(json!("activity")),
                        "content": data.get("content").cloned().unwrap_or(json!({}))})));
                }
                _ => {}
            }
        }
        books.segments.insert(mid.to_string(), segs);
        // A result goes where a client puts it when it arrives: after the
        // message that called the tool and the results already there.
        for (tc, r) in results {
            let t = tool_result(&tc, &r);
            let msg = owned(
                json!({"id": t["messageId"], "role": "tool", "toolCallId": tc,
                                   "content": t["content"]}),
            );
            let caller = out.iter().rposition(|o| {
                o["toolCalls"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["id"] == tc.as_str()))
            });
            let mut j = caller.map_or(out.len(), |k| k + 1);
            while j < out.len() && out[j]["role"] == "tool" {
                j += 1;
            }
            out.insert(j, msg);
        }
    }
    out
}
