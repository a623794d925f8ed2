//! The actions surface (`action.required | action.resolved`): an action is
//! pending until the runtime's `action.resolved`, never earlier. Each change
//! travels as a `data-actions` chunk; the action card goes into the
//! assistant message only inside a message context.

use serde_json::Value;

use super::plans::MAX_PLAN_CHARS;
use super::public_state::{ActionEntry, ActionRequest, Severity};
use super::reducer::{nonempty, truncate, Reducer};
use super::ui_message::ToolState;
use super::Chunk;

/// Characters kept of a request's question or detail.
const MAX_REQUEST_TEXT: usize = 4_000;

/// A decision word that refuses (`reject`, `rejected`, `deny`, `denied`, ...).
fn is_denial(decision: Option<&str>) -> bool {
    decision.is_some_and(|d| {
        let d = d.to_ascii_lowercase();
        d.starts_with("reject")
            || d.starts_with("deny")
            || d.starts_with("denied")
            || d == "declined"
    })
}

impl<'a> Reducer<'a> {
    /// An action that names a tool call is that call's approval, the AI SDK
    /// way: `tool-approval-request` in its tool part (approval id = action
    /// id), while the part still waits for its output.
    fn ask_tool_approval(&mut self, aid: &str) {
        let Some(tcid) = self.state.actions[aid].tool_call_id.clone() else {
            return;
        };
        let Some((msg, state)) = self.tool_part(&tcid) else {
            return;
        };
        if matches!(state, ToolState::InputStreaming | ToolState::InputAvailable) {
            let reason = self.state.actions[aid]
                .request
                .question
                .clone()
                .or_else(|| self.state.actions[aid].title.clone());
            self.emit(
                &msg,
                Chunk::ToolApprovalRequest {
                    approval_id: aid.to_string(),
                    tool_call_id: tcid,
                    reason,
                },
            );
        }
    }

    /// The runtime refused the call it asked approval for: `tool-output-denied`.
    fn deny_tool(&mut self, tcid: &str) {
        if let Some((msg, ToolState::ApprovalRequested)) = self.tool_part(tcid) {
            self.emit(
                &msg,
                Chunk::ToolOutputDenied {
                    tool_call_id: tcid.to_string(),
                },
            );
            if let Some(t) = self.state.tools.get_mut(tcid) {
                t.status = "denied".into();
                t.updated_cursor = self.cursor;
            }
            self.touch("tools", tcid.to_string());
        }
    }

    /// The `data-action-request` card: the entry as the snapshot has it,
    /// minus the bookkeeping cursors and message id. Built field by field
    /// (not as the entry's whole `Value` with keys then removed), in the
    /// key order that removal gave: `serde_json`'s `Map::remove` under
    /// `preserve_order` is a swap-remove (the last key takes the removed
    /// one's place), and the card's bytes are part of the wire contract.
    fn action_card(e: &ActionEntry) -> Value {
        let r = &e.request;
        // The entry's keys in its `Serialize` order (the request flattened),
        // each present one pushed straight into the list.
        let mut c = Card(Vec::with_capacity(12));
        c.s("actionId", Some(&e.action_id))
            .s("status", Some(&e.status))
            .s("actionType", e.action_type.as_ref())
            .s("title", e.title.as_ref())
            .s("decision", e.decision.as_ref())
            .s("toolCallId", e.tool_call_id.as_ref())
            .s("requestedBy", e.requested_by.as_ref())
            .v("messageId", e.message_id.as_ref().map(|_| &Value::Null))
            .n("requestedCursor", e.requested_cursor)
            .n("resolvedCursor", e.resolved_cursor)
            .s("question", r.question.as_ref())
            .s("detail", r.detail.as_ref())
            .v("options", r.options.as_ref())
            .v("schema", r.schema.as_ref())
            .s("toolName", r.tool_name.as_ref())
            .v("input", r.input.as_ref())
            .s("risk", r.risk.as_ref())
            .v("scope", r.scope.as_ref())
            .v("plan", r.plan.as_ref())
            .v("grant", r.grant.as_ref())
            .v("credential", r.credential.as_ref())
            .s("artifactId", r.artifact_id.as_ref())
            .s("versionId", r.version_id.as_ref())
            .s("expiresAt", r.expires_at.as_ref());
        let mut fields = c.0;
        for k in ["messageId", "requestedCursor", "resolvedCursor"] {
            if let Some(i) = fields.iter().position(|(f, _)| *f == k) {
                fields.swap_remove(i);
            }
        }
        let mut m = serde_json::Map::with_capacity(fields.len());
        for (k, v) in fields {
            m.insert(k.to_string(), v);
        }
        Value::Object(m)
    }

    /// What a `credential_request` asks for: `{name, kind, provider}` from
    /// `credentialName | secretName`, `credentialKind | credentialType`,
    /// `provider`. A field that could hold the secret itself (`credential`,
    /// `token`, ...) is redacted before the reducer ever sees it.
    fn credential(&self) -> Option<Value> {
        let mut c = serde_json::Map::new();
        for (key, from) in [
            ("name", &["credentialName", "secretName"][..]),
            ("kind", &["credentialKind", "credentialType"][..]),
            ("provider", &["provider"][..]),
        ] {
            if let Some(v) = self.first_str(from) {
                c.insert(key.into(), v.into());
            }
        }
        (!c.is_empty()).then_some(Value::Object(c))
    }

    /// The request's content from the `action.required` payload.
    fn action_request(&self) -> ActionRequest {
        let text = |keys: &[&str]| self.first_str(keys).map(|t| truncate(&t, MAX_REQUEST_TEXT));
        ActionRequest {
            question: text(&["question", "prompt"]),
            detail: nonempty(self.fact.detail.as_deref())
                .map(|t| truncate(&t, MAX_REQUEST_TEXT))
                .or_else(|| text(&["description", "message"])),
            options: self.first_value(&["options", "choices"]),
            schema: self
                .first_value(&["schema", "inputSchema", "requestedSchema"])
                .filter(|s| s.is_object() || s.is_boolean()),
            tool_name: self.first_str(&["toolName", "tool"]),
            input: self.first_value(&["safeInput", "inputSummary", "input"]),
            risk: self.first_str(&["risk", "riskLevel"]),
            scope: self.first_value(&["scope", "permissionScope"]),
            plan: self.first_value(&["plan", "planText"]).map(|p| match p {
                Value::String(t) => Value::String(truncate(&t, MAX_PLAN_CHARS)),
                other => other,
            }),
            grant: self.first_value(&["grant", "permissions"]),
            credential: self.credential(),
            artifact_id: nonempty(self.fact.ids.artifact_id.as_deref())
                .or_else(|| self.first_str(&["artifactId"])),
            version_id: self.first_str(&["versionId"]),
            expires_at: self.first_str(&["expiresAt", "expiry"]),
        }
    }

    /// `action.required | action.resolved`.
    pub fn on_action(&mut self) {
        let Some(aid) = nonempty(self.fact.ids.action_id.as_deref()) else {
            self.diag(
                "missing_scope_id",
                Severity::Warning,
                format!("{} without actionId; not projected", self.fact.class),
            );
            return;
        };
        let cursor = self.cursor;
        if self.fact.class == "action.required" {
            let e = ActionEntry {
                action_id: aid.clone(),
                status: "pending".into(),
                action_type: self.first_str(&["actionType", "actionKind", "type"]),
                title: self.title(),
                decision: None,
                tool_call_id: self.tool_call_id(),
                requested_by: self.requesting_agent(),
                message_id: None,
                requested_cursor: Some(cursor),
                resolved_cursor: None,
                request: self.action_request(),
            };
            let prev_msg = self
                .state
                .actions
                .get(&aid)
                .and_then(|a| a.message_id.clone());
            self.state.actions.insert(aid.clone(), e);
            let msg = match prev_msg.filter(|m| self.msg(m).is_some()) {
                Some(m) => Some(m),
                None if self.has_message_context() => Some(self.ensure_assistant().to_string()),
                None => None,
            };
            if let Some(msg) = msg {
                let card = Self::action_card(&self.state.actions[&aid]);
                self.put_data_part(&msg, "action-request", &aid, card);
                self.state.actions[&aid].message_id = Some(msg);
            }
            self.ask_tool_approval(&aid);
            self.on_wait();
        } else {
            let decision = self.first_str(&["decision"]);
            match self.state.actions.get_mut(&aid) {
                Some(e) if e.status == "resolved" => {
                    self.finding(
                        "repeated_terminal_event",
                        format!("action {aid} resolved again; ignored (the first decision stands)"),
                    );
                }
                Some(e) => {
                    e.status = "resolved".into();
                    e.decision = decision;
                    e.resolved_cursor = Some(cursor);
                    let card = Self::action_card(e);
                    let msg = e.message_id.clone();
                    let (tool, denied) = (e.tool_call_id.clone(), is_denial(e.decision.as_deref()));
                    if let Some(msg) = msg.filter(|m| self.msg(m).is_some()) {
                        self.put_data_part(&msg, "action-request", &aid, card);
                    }
                    if let (Some(tcid), true) = (tool, denied) {
                        self.deny_tool(&tcid);
                    }
                }
                None => {
                    self.finding(
                        "action_resolved_without_request",
                        format!("action {aid} resolved without action.required"),
                    );
                    let e = ActionEntry {
                        action_id: aid.clone(),
                        status: "resolved".into(),
                        action_type: self.first_str(&["actionType", "actionKind", "type"]),
                        title: self.title(),
                        decision,
                        tool_call_id: self.tool_call_id(),
                        requested_by: self.agent(),
                        message_id: None,
                        requested_cursor: None,
                        resolved_cursor: Some(cursor),
                        request: ActionRequest::default(),
                    };
                    self.state.actions.insert(aid.clone(), e);
                }
            }
            self.resume_if_unblocked();
        }
        self.touch("actions", aid);
    }
}

/// An action card's fields, in order: each pushed only when present.
struct Card(Vec<(&'static str, Value)>);

impl Card {
    fn put(&mut self, key: &'static str, v: Option<Value>) -> &mut Self {
        if let Some(v) = v {
            self.0.push((key, v));
        }
        self
    }

    fn s(&mut self, key: &'static str, v: Option<&String>) -> &mut Self {
        self.put(key, v.map(|v| Value::String(v.clone())))
    }

    fn v(&mut self, key: &'static str, v: Option<&Value>) -> &mut Self {
        self.put(key, v.cloned())
    }

    fn n(&mut self, key: &'static str, v: Option<u64>) -> &mut Self {
        self.put(key, v.map(Value::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The card as it was built before: the entry's whole `Value`, then
    /// the bookkeeping keys removed (a swap-remove under `preserve_order`).
    fn card_by_removal(e: &ActionEntry) -> Value {
        let mut v = serde_json::to_value(e).unwrap();
        if let Value::Object(m) = &mut v {
            for k in ["messageId", "requestedCursor", "resolvedCursor"] {
                m.remove(k);
            }
        }
        v
    }

    #[test]
    fn the_action_card_has_the_bytes_of_the_entry_minus_bookkeeping() {
        let full = ActionRequest {
            question: Some("ok? \"q\" é".into()),
            detail: Some("d".into()),
            options: Some(json!(["yes", {"label": "no"}])),
            schema: Some(json!({"type": "object", "b": {}, "a": {}})),
            tool_name: Some("grep".into()),
            input: Some(json!({"q": 1})),
            risk: Some("high".into()),
            scope: Some(json!("repo")),
            plan: Some(json!("p")),
            grant: Some(json!({"fs": "rw"})),
            credential: Some(json!({"name": "gh"})),
            artifact_id: Some("f1".into()),
            version_id: Some("v2".into()),
            expires_at: Some("2026-01-01".into()),
        };
        let one = ActionRequest {
            question: Some("q".into()),
            ..ActionRequest::default()
        };
        for request in [ActionRequest::default(), one, full] {
            for mask in 0..64u32 {
                let bit = |b: u32| mask & (1 << b) != 0;
                let text = |b: u32, v: &str| bit(b).then(|| v.to_string());
                let e = ActionEntry {
                    action_id: "a1".into(),
                    status: "pending".into(),
                    action_type: text(0, "approval"),
                    title: text(1, "T"),
                    decision: text(2, "approved"),
                    tool_call_id: text(3, "t1"),
                    message_id: text(4, "msg-1"),
                    requested_by: text(2, "agent"),
                    requested_cursor: bit(5).then_some(3),
                    resolved_cursor: (bit(5) == bit(2)).then_some(u64::MAX),
                    request: request.clone(),
                };
                let (want, got) = (card_by_removal(&e), Reducer::action_card(&e));
                assert_eq!(
                    serde_json::to_string(&got).unwrap(),
                    serde_json::to_string(&want).unwrap(),
                    "mask {mask}"
                );
            }
        }
    }
}
