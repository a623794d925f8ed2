//! The actions surface (`action.required | action.resolved`): an action is
//! pending until the runtime's `action.resolved`, never earlier. Each change
//! travels as a `data-actions` chunk; the action card goes into the
//! assistant message only inside a message context.

use serde_json::{json, Value};

use super::public_state::{ActionEntry, Severity};
use super::reducer::{merge, nonempty, Reducer};

impl<'a> Reducer<'a> {
    fn action_card(e: &ActionEntry) -> Value {
        let mut v = json!({"actionId": e.action_id, "status": e.status});
        merge(
            &mut v,
            json!({
                "actionType": e.action_type,
                "title": e.title,
                "toolCallId": e.tool_call_id,
                "requestedBy": e.requested_by,
                "decision": e.decision,
            }),
        );
        v
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
            };
            let prev_msg = self
                .state
                .actions
                .get(&aid)
                .and_then(|a| a.message_id.clone());
            self.state.actions.insert(aid.clone(), e);
            let msg = match prev_msg.filter(|m| self.msg(m).is_some()) {
                Some(m) => Some(m),
                None if self.has_message_context() => Some(self.ensure_assistant()),
                None => None,
            };
            if let Some(msg) = msg {
                let card = Self::action_card(&self.state.actions[&aid]);
                self.put_data_part(&msg, "action-request", &aid, card);
                self.state.actions[&aid].message_id = Some(msg);
            }
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
                    if let Some(msg) = msg.filter(|m| self.msg(m).is_some()) {
                        self.put_data_part(&msg, "action-request", &aid, card);
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
                    };
                    self.state.actions.insert(aid.clone(), e);
                }
            }
            self.resume_if_unblocked();
        }
        self.touch("actions", aid);
    }
}
