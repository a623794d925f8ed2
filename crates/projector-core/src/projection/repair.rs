//! Repair events (`snapshot.updated`, `messages.snapshot`, `state.snapshot`):
//! they clear the stale flag of sequence gaps, may restore or correct the
//! messages they name (`payload.messages`) and the application state
//! (`payload.state` / `payload.app`), but never complete a tool or resolve
//! an action: a repair that says so is ignored for those, with a
//! `repair_cannot_complete` finding. The run status is never changed by a
//! repair either.

use serde_json::Value;

use super::chunk::{Chunk, FinishReason};
use super::public_state::Severity;
use super::reducer::{nonempty, Reducer};
use super::ui_message::{MessageStatus, Role};

const TERMINAL_TOOL: &[&str] = &["completed", "failed", "cancelled"];
const TERMINAL_WORDS: &[&str] = &[
    "completed",
    "complete",
    "failed",
    "cancelled",
    "canceled",
    "output-available",
    "output-error",
    "output-denied",
    "resolved",
    "approved",
    "rejected",
    "answered",
];

fn word(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .map(str::to_string)
}

/// Entries of a map (`{id: entry}`) or a list of entries with `key`.
fn entries(v: Option<&Value>, key: &str) -> Vec<(String, Value)> {
    match v {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|e| Some((e.get(key)?.as_str()?.to_string(), e.clone())))
            .collect(),
        _ => Vec::new(),
    }
}

impl<'a> Reducer<'a> {
    /// A repair event.
    pub fn on_repair(&mut self) {
        self.books.sequence.repair();
        self.refuse_fake_completions();
        if let Some(Value::Array(ms)) = self.fact.payload_get("messages").cloned() {
            self.restore_messages(&ms);
        }
        if self.fact.class == "state.snapshot" || self.fact.payload.contains_key("app") {
            self.on_app_snapshot();
        }
    }

    /// Tools and actions a repair claims finished, where their own facts
    /// have not said so: ignored, with a finding each.
    fn refuse_fake_completions(&mut self) {
        let mut claims: Vec<(String, String, String)> = Vec::new();
        for (id, e) in entries(self.fact.payload_get("tools"), "toolCallId") {
            if let Some(w) = word(&e, &["status", "state"]) {
                claims.push(("tool".into(), id, w));
            }
        }
        for (id, e) in entries(self.fact.payload_get("actions"), "actionId") {
            if let Some(w) = word(&e, &["status", "decision"]) {
                claims.push(("action".into(), id, w));
            }
        }
        if let Some(Value::Array(ms)) = self.fact.payload_get("messages") {
            for p in ms
                .iter()
                .filter_map(|m| m.get("parts")?.as_array())
                .flatten()
            {
                let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
                if let (true, Some(id), Some(w)) = (
                    ty.starts_with("tool-") || ty == "dynamic-tool",
                    word(p, &["toolCallId"]),
                    word(p, &["state"]),
                ) {
                    claims.push(("tool".into(), id, w));
                }
                if ty == "data-action-request" {
                    if let (Some(id), Some(w)) = (
                        p.get("data").and_then(|d| word(d, &["actionId"])),
                        p.get("data").and_then(|d| word(d, &["status"])),
                    ) {
                        claims.push(("action".into(), id, w));
                    }
                }
            }
        }
        for (what, id, w) in claims {
            if !TERMINAL_WORDS.contains(&w.as_str()) {
                continue;
            }
            let done = match what.as_str() {
                "tool" => self
                    .state
                    .tools
                    .get(&id)
                    .is_some_and(|t| TERMINAL_TOOL.contains(&t.status.as_str())),
                _ => self
                    .state
                    .actions
                    .get(&id)
                    .is_some_and(|a| a.status == "resolved"),
            };
            if !done {
                self.finding(
                    "repair_cannot_complete",
                    format!("{} says {what} {id} is {w}; only the {what}'s own events can say that, so it stays as it is", self.fact.class),
                );
            }
        }
    }

    /// Restore or correct the messages a repair names. Text and reasoning
    /// come from the repair; tool parts and action cards never do (their
    /// own surfaces own them). A message the projection has is reconciled
    /// like a final text; one it lacks is appended.
    fn restore_messages(&mut self, ms: &[Value]) {
        for m in ms.iter().take(self.cfg.max_messages.max(1)) {
            let Some(id) = word(m, &["id", "messageId"]).filter(|s| !s.trim().is_empty()) else {
                self.diag(
                    "repair_message_without_id",
                    Severity::Warning,
                    "a repaired message without an id was skipped".into(),
                );
                continue;
            };
            let parts = m
                .get("parts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let part_text = |ty: &str| -> String {
                parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some(ty))
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect()
            };
            let text = word(m, &["text", "content"]).unwrap_or_else(|| part_text("text"));
            let reasoning = part_text("reasoning");
            let complete = matches!(
                word(m, &["status"]).as_deref(),
                Some("complete" | "completed" | "done" | "final")
            );
            match self.msg(&id).map(|x| (x.role, x.status)) {
                Some((role, status)) => {
                    if role == Role::Assistant && !text.is_empty() {
                        self.reconcile_final(&id, text);
                    }
                    if complete && status == MessageStatus::Streaming {
                        self.end_open(&id);
                        self.emit(
                            &id,
                            Chunk::Finish {
                                finish_reason: Some(FinishReason::Stop),
                            },
                        );
                        self.books.current.retain(|_, v| *v != id);
                    }
                }
                None => {
                    let role = match word(m, &["role"]).as_deref() {
                        Some("user") => Role::User,
                        Some("system") => Role::System,
                        _ => Role::Assistant,
                    };
                    let agent = word(m, &["agentId"]).filter(|_| role == Role::Assistant);
                    let turn =
                        word(m, &["turnId"]).or_else(|| nonempty(self.fact.ids.turn_id.as_deref()));
                    self.create_message_of(&id, role, agent, turn);
                    for (kind, body) in [("r", reasoning), ("t", text)] {
                        if body.is_empty() {
                            continue;
                        }
                        let pid =
                            format!("{id}-{kind}{}", self.msg(&id).map_or(0, |x| x.parts.len()));
                        let idx = self.msg(&id).map_or(0, |x| x.parts.len());
                        self.books.part_ids.record(&id, &pid, idx);
                        let (s, d, e) = if kind == "r" {
                            (
                                Chunk::ReasoningStart { id: pid.clone() },
                                Chunk::ReasoningDelta {
                                    id: pid.clone(),
                                    delta: body,
                                },
                                Chunk::ReasoningEnd { id: pid },
                            )
                        } else {
                            (
                                Chunk::TextStart { id: pid.clone() },
                                Chunk::TextDelta {
                                    id: pid.clone(),
                                    delta: body,
                                },
                                Chunk::TextEnd { id: pid },
                            )
                        };
                        self.emit(&id, s);
                        self.emit(&id, d);
                        self.emit(&id, e);
                    }
                    if complete || role != Role::Assistant {
                        let reason = (role == Role::Assistant).then_some(FinishReason::Stop);
                        self.emit(
                            &id,
                            Chunk::Finish {
                                finish_reason: reason,
                            },
                        );
                    }
                }
            }
        }
    }
}
