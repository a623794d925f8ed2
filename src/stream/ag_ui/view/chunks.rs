//! The AG-UI events of one message chunk of a delta frame: text and
//! reasoning messages opened, continued and ended, tool calls and their
//! results, steps, activities; each under the AG-UI id the segment rule
//! gives it.

use indexmap::{IndexMap, IndexSet};
use serde_json::{json, Value};

use super::super::shapes::{
    messages, reasoning_closes, reasoning_id, reasoning_opens, role_name, tool_result,
};
use super::View;
use crate::projection::{superseded_message, Role};

/// Remove the open entries of `map` that belong to message `mid`; their ids.
fn take_of(map: &mut IndexMap<String, String>, mid: &str) -> Vec<String> {
    let mut ids = Vec::new();
    map.retain(|id, m| {
        let of = m == mid;
        if of {
            ids.push(id.clone());
        }
        !of
    });
    ids
}

impl View {
    /// The events of one message chunk.
    pub(super) fn chunk(&mut self, mid: &str, c: &Value) -> Vec<Value> {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let mut out = Vec::new();
        match c.get("type").and_then(Value::as_str).unwrap_or("") {
            "text-start" => out.extend(self.open_text(mid, &s("id"))),
            "text-delta" => {
                let id = self.text_id(mid, &s("id"));
                out.extend(self.open_text(mid, &s("id")));
                let delta = s("delta");
                if !delta.is_empty() {
                    out.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": delta}));
                }
            }
            "text-end" => {
                let key = (mid.to_string(), s("id"));
                if let Some(id) = self.books.texts.remove(&key) {
                    if self.texts.shift_remove(&id).is_some() {
                        out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": id}));
                    }
                }
            }
            "reasoning-start" | "reasoning-delta" => {
                let rid = reasoning_id(mid, &s("id"));
                if !self.reasoning.contains_key(&rid) {
                    self.reasoning.insert(rid.clone(), mid.to_string());
                    out.extend(reasoning_opens(&rid));
                }
                let delta = s("delta");
                if !delta.is_empty() {
                    out.push(json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": delta}));
                }
            }
            "reasoning-end" => {
                let rid = reasoning_id(mid, &s("id"));
                if self.reasoning.shift_remove(&rid).is_some() {
                    out.extend(reasoning_closes(&rid));
                }
            }
            "tool-input-start" => out.extend(self.open_call(mid, &s("toolCallId"), &s("toolName"))),
            "tool-input-delta" => {
                let tc = s("toolCallId");
                out.extend(self.open_call(mid, &tc, ""));
                self.streamed.insert(tc.clone());
                let delta = s("inputTextDelta");
                if !delta.is_empty() {
                    out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": delta}));
                }
            }
            "tool-input-available" => {
                let tc = s("toolCallId");
                let fresh = !self.awaiting.contains_key(&tc) || self.calls.contains(&tc);
                if fresh {
                    out.extend(self.open_call(mid, &tc, &s("toolName")));
                    if !self.streamed.shift_remove(&tc) {
                        let args = c.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into());
                        out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": args}));
                    }
                    if self.calls.shift_remove(&tc) {
                        out.push(json!({"type": "TOOL_CALL_END", "toolCallId": tc}));
                    }
                }
            }
            "tool-output-available" if c.get("preliminary") != Some(&Value::Bool(true)) => {
                out.extend(self.answer(&s("toolCallId"), c.get("output").unwrap_or(&Value::Null)));
            }
            "tool-output-error" => {
                out.extend(self.answer(&s("toolCallId"), &Value::String(s("errorText"))));
            }
            "tool-output-denied" => {
                out.extend(self.answer(&s("toolCallId"), &Value::String("denied".into())));
            }
            "start-step" => {
                let name = format!("{mid}:step");
                if self.steps.insert(name.clone()) {
                    out.push(json!({"type": "STEP_STARTED", "stepName": name}));
                }
            }
            "finish-step" => {
                let name = format!("{mid}:step");
                if self.steps.shift_remove(&name) {
                    out.push(json!({"type": "STEP_FINISHED", "stepName": name}));
                }
            }
            "data-activity" => out.push(json!({"type": "ACTIVITY_SNAPSHOT", "messageId": s("id"),
                "activityType": c.pointer("/data/activityType").cloned().unwrap_or(json!("activity")),
                "content": c.pointer("/data/content").cloned().unwrap_or(json!({}))})),
            "data-superseded" => out.extend(self.supersede(mid, c)),
            "error" => self.failure = Some(s("errorText")),
            // A message's end ends whatever of it is open.
            "finish" | "abort" => out.extend(self.close_message(mid)),
            _ => {}
        }
        out.into_iter().map(|e| self.owned(mid, e)).collect()
    }

    /// The AG-UI message a text part of `mid` goes under (a new segment
    /// the first time the part is seen).
    fn text_id(&mut self, mid: &str, part: &str) -> String {
        let key = (mid.to_string(), part.to_string());
        if let Some(id) = self.books.texts.get(&key) {
            return id.clone();
        }
        let id = match self.books.roles.get(mid) {
            Some(Role::User) | Some(Role::System) => mid.to_string(),
            _ => self
                .books
                .segments
                .entry(mid.to_string())
                .or_default()
                .text(mid),
        };
        self.books.texts.insert(key, id.clone());
        id
    }

    fn open_text(&mut self, mid: &str, part: &str) -> Option<Value> {
        let id = self.text_id(mid, part);
        if self.texts.contains_key(&id) {
            return None;
        }
        self.texts.insert(id.clone(), mid.to_string());
        let role = role_name(self.books.roles.get(mid).copied());
        Some(json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": role}))
    }

    /// End what of message `mid` is open.
    pub(super) fn close_message(&mut self, mid: &str) -> Vec<Value> {
        let mut out = Vec::new();
        for id in take_of(&mut self.texts, mid) {
            out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": id}));
        }
        self.books.texts.retain(|(m, _), _| m != mid);
        for id in take_of(&mut self.reasoning, mid) {
            out.extend(reasoning_closes(&id));
        }
        let step = format!("{mid}:step");
        if self.steps.shift_remove(&step) {
            out.push(json!({"type": "STEP_FINISHED", "stepName": step}));
        }
        out
    }

    fn open_call(&mut self, mid: &str, tc: &str, name: &str) -> Option<Value> {
        if !name.is_empty() {
            self.books.names.insert(tc.to_string(), name.to_string());
        }
        if self.calls.contains(tc) {
            return None;
        }
        let parent = match self.books.parents.get(tc) {
            Some(p) => p.clone(),
            None => {
                let p = self
                    .books
                    .segments
                    .entry(mid.to_string())
                    .or_default()
                    .tool(mid);
                self.books.parents.insert(tc.to_string(), p.clone());
                p
            }
        };
        self.calls.insert(tc.to_string());
        self.awaiting.insert(tc.to_string(), mid.to_string());
        let name = self.books.names.get(tc).map_or(name, String::as_str);
        Some(
            json!({"type": "TOOL_CALL_START", "toolCallId": tc, "toolCallName": name,
                    "parentMessageId": parent}),
        )
    }

    /// A step of `mid` tried again (its `data-superseded` chunk `c`): what
    /// of the message is open ends, the calls of the dropped try end
    /// without a result, and everything the client holds goes out again in
    /// one `MESSAGES_SNAPSHOT`, with the message as it now stands.
    fn supersede(&mut self, mid: &str, c: &Value) -> Vec<Value> {
        let role = self
            .books
            .roles
            .get(mid)
            .copied()
            .unwrap_or(Role::Assistant);
        let Some(mut m) = superseded_message(mid, role, &c["data"]) else {
            return Vec::new();
        };
        m.agent_id = self.books.agents.get(mid).cloned();
        let mut out = self.close_message(mid);
        let kept: IndexSet<&str> = m.parts.iter().filter_map(|p| p.tool_call_id()).collect();
        let gone: Vec<String> = self
            .awaiting
            .iter()
            .filter(|(tc, of)| *of == mid && !kept.contains(tc.as_str()))
            .map(|(tc, _)| tc.clone())
            .collect();
        for tc in gone {
            self.awaiting.shift_remove(&tc);
            self.streamed.shift_remove(&tc);
            self.books.parents.remove(&tc);
            if self.calls.shift_remove(&tc) {
                out.push(json!({"type": "TOOL_CALL_END", "toolCallId": tc}));
            }
        }
        let earlier = self.books.segments.remove(mid).unwrap_or_default();
        let fresh = messages(std::slice::from_ref(&m), &mut self.books);
        if let Some(segs) = self.books.segments.get_mut(mid) {
            segs.after(earlier);
        }
        let all = self.mirror.replace(mid, fresh);
        out.push(json!({"type": "MESSAGES_SNAPSHOT", "messages": all}));
        out
    }

    /// A call's answer: its arguments end first if they were still open.
    fn answer(&mut self, tc: &str, result: &Value) -> Vec<Value> {
        let mut out = Vec::new();
        if self.calls.shift_remove(tc) {
            self.streamed.shift_remove(tc);
            out.push(json!({"type": "TOOL_CALL_END", "toolCallId": tc}));
        }
        self.awaiting.shift_remove(tc);
        out.push(tool_result(tc, result));
        out
    }
}
