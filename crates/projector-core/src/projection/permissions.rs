//! The permissions and sandbox surface (`permission.*`): session-wide and
//! per teammate, and who asks for an approval.

use serde_json::json;

use super::public_state::Severity;
use super::reducer::{merge, Reducer};

impl Reducer<'_> {
    /// Who asks for an approval: the payload's requesting teammate, else the
    /// fact's agent (a delegated approval names its teammate).
    pub fn requesting_agent(&self) -> Option<String> {
        self.first_str(&["requestedBy", "requestingAgentId"])
            .or_else(|| self.agent())
    }

    /// `permission.* | sandbox.applied | sandbox.violation`. A fact that
    /// names a teammate sets that teammate's permissions, not the session's.
    pub fn on_permission(&mut self) {
        let cursor = self.cursor;
        let class = self.fact.class.clone();
        let mode = self.first_str(&["mode", "permissionMode"]);
        let risk = self.first_str(&["risk", "riskLevel"]);
        let sandbox = self
            .first_str(&["sandbox", "sandboxMode"])
            .or_else(|| (class == "sandbox.applied").then(|| mode.clone()).flatten());
        let mode = if class.starts_with("sandbox.") {
            None
        } else {
            mode
        };
        let decision = self.first_str(&["decision"]);
        let scope = self.first_str(&["policyScope", "scope"]);
        if let Some(agent) = self.agent() {
            let e = self
                .state
                .permissions
                .agents
                .entry(agent.clone())
                .or_insert_with(|| json!({"agentId": agent}));
            merge(
                e,
                json!({"mode": mode, "risk": risk, "sandbox": sandbox, "policyScope": scope,
                       "lastDecision": decision, "updatedCursor": cursor}),
            );
        } else {
            let p = &mut self.state.permissions;
            if mode.is_some() {
                p.mode = mode;
            }
            if risk.is_some() {
                p.risk = risk;
            }
            if sandbox.is_some() {
                p.sandbox = sandbox;
            }
            if let Some(d) = decision {
                p.last_decision = Some(json!({"decision": d, "class": class, "cursor": cursor}));
            }
        }
        self.state.permissions.updated_cursor = Some(cursor);
        if class == "sandbox.violation" {
            let reason = self
                .first_str(&["reasonCode", "reason"])
                .unwrap_or_else(|| "sandbox".into());
            self.diag(
                "sandbox.violation",
                Severity::Warning,
                format!("sandbox violation: {reason}"),
            );
        }
        self.touch("permissions", "permissions");
    }
}
