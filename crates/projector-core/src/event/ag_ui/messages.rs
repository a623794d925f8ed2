//! AG-UI messages: text by role, users' messages as their turns,
//! `MESSAGES_SNAPSHOT`, activities and the state's JSON Patch paths.

use serde_json::{json, Value};

use super::{one, AgUi, Mapped, INVALID_EVENT};

impl AgUi {
    pub(super) fn open_message(&mut self, id: &str, role: Option<String>) {
        let role = role.unwrap_or_else(|| "assistant".into());
        if role == "assistant" {
            self.last_message = Some(id.to_string());
        }
        self.roles.insert(id.to_string(), role);
    }

    pub(super) fn text(&mut self, id: &str, delta: String, name: Option<String>) -> Mapped {
        let role = self
            .roles
            .get(id)
            .cloned()
            .unwrap_or_else(|| "assistant".into());
        if role != "assistant" {
            // A user's (or system's) message is told whole at its end.
            self.gathered
                .entry(id.to_string())
                .or_default()
                .push_str(&delta);
            return Mapped::Events(Vec::new());
        }
        self.last_message = Some(id.to_string());
        one(self.event(
            "text.delta",
            "",
            json!({"messageId": id, "partId": id, "title": name, "payload": {"delta": delta}}),
        ))
    }

    pub(super) fn end_message(&mut self, id: &str) -> Mapped {
        let role = self
            .roles
            .get(id)
            .cloned()
            .unwrap_or_else(|| "assistant".into());
        let Some(text) = self.gathered.remove(id) else {
            return Mapped::Events(Vec::new());
        };
        match role.as_str() {
            "user" => match self.user_message(&json!({"id": id, "content": text})) {
                Some(e) => one(e),
                None => Mapped::Events(Vec::new()),
            },
            other => self.kept(
                "TEXT_MESSAGE",
                &json!({"messageId": id, "role": other, "content": text}),
            ),
        }
    }

    /// A user message (`{id, content}`) as the turn it submits; its event
    /// id is the message's, so it is told once however often it is sent.
    pub(super) fn user_message(&self, m: &Value) -> Option<Value> {
        let id = m
            .get("id")
            .and_then(Value::as_str)
            .filter(|x| !x.is_empty())?;
        let text = content_text(m.get("content")?);
        let mut e = self.event(
            "turn.submitted",
            "",
            json!({"messageId": id, "payload": {"text": text}}),
        );
        e["id"] = format!("ag:user:{id}").into();
        Some(e)
    }

    /// `MESSAGES_SNAPSHOT`: users' messages as their turns, assistants'
    /// text as a repair, their tool calls and the tools' results as the
    /// tools' own facts (told once: the same ids as the stream's).
    pub(super) fn messages_snapshot(&mut self, ev: &Value) -> Mapped {
        let Some(ms) = ev.get("messages").and_then(Value::as_array) else {
            return Mapped::Warning(
                INVALID_EVENT,
                "MESSAGES_SNAPSHOT without `messages`; not applied".into(),
            );
        };
        let mut es = Vec::new();
        let mut repaired = Vec::new();
        for m in ms {
            let id = m.get("id").and_then(Value::as_str).unwrap_or("");
            match m.get("role").and_then(Value::as_str).unwrap_or("") {
                "user" => es.extend(self.user_message(m)),
                "assistant" => {
                    let text = m.get("content").map(content_text).unwrap_or_default();
                    repaired.push(json!({"id": id, "role": "assistant", "text": text,
                                         "status": "complete"}));
                    for c in m
                        .get("toolCalls")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let Some(tc) = c.get("id").and_then(Value::as_str) else {
                            continue;
                        };
                        let f = c.get("function");
                        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
                        let args = f
                            .and_then(|f| f.get("arguments"))
                            .and_then(Value::as_str)
                            .unwrap_or("{}");
                        let input = serde_json::from_str(args)
                            .unwrap_or_else(|_| Value::String(args.to_string()));
                        let mut start = self.tool_started(
                            tc,
                            name.map(str::to_string),
                            Some(id.to_string()),
                            input,
                        );
                        start["id"] = format!("ag:tool:{tc}:input").into();
                        es.push(start);
                    }
                }
                "tool" => {
                    if let Some(tc) = m.get("toolCallId").and_then(Value::as_str) {
                        es.push(self.tool_result(tc, m.get("content").unwrap_or(&Value::Null)));
                    }
                }
                _ => {}
            }
        }
        if !repaired.is_empty() {
            es.push(self.event(
                "messages.snapshot",
                "",
                json!({"payload": {"messages": repaired}}),
            ));
        }
        Mapped::Events(es)
    }

    /// `ACTIVITY_SNAPSHOT` / `ACTIVITY_DELTA`: a `data-activity` part of
    /// the current message, its id the activity's; a delta patches it.
    pub(super) fn activity(&self, ty: &str, id: &str, ev: &Value) -> Value {
        let kind = ev.get("activityType").cloned().unwrap_or(Value::Null);
        let chunk = if ty == "ACTIVITY_SNAPSHOT" {
            json!({"type": "data-activity", "id": id,
                   "data": {"activityType": kind,
                            "content": ev.get("content").cloned().unwrap_or(json!({}))}})
        } else {
            // The patch is relative to the activity's content.
            let ops = ev
                .get("patch")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            json!({"type": "data-activity", "id": id, "patch": prefixed(&ops, "/content")})
        };
        let replace = ev.get("replace").and_then(Value::as_bool) != Some(false);
        self.event(
            "ui.chunk",
            "",
            json!({"messageId": self.last_message,
                   "payload": {"chunk": chunk, "replace": replace}}),
        )
    }
}

/// The text of an AG-UI message content: a string, or the text parts of a
/// list of content parts.
pub(super) fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// AG-UI's JSON Patch paths are relative to the agent's state, which is
/// the session's application state (`/app`).
pub(super) fn under_app(ops: &[Value]) -> Vec<Value> {
    prefixed(ops, "/app")
}

/// `ops` with `root` before their paths.
pub(super) fn prefixed(ops: &[Value], root: &str) -> Vec<Value> {
    ops.iter()
        .map(|op| {
            let mut op = op.clone();
            for k in ["path", "from"] {
                if let Some(p) = op.get(k).and_then(Value::as_str) {
                    op[k] = format!("{root}{p}").into();
                }
            }
            op
        })
        .collect()
}
