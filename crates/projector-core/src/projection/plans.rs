//! The plans surface (`plan.*`): `plan.delta` streams, and the `plan.final`
//! that reconciles them.

use serde_json::json;

use super::public_state::{PlanEntry, Severity};
use super::reducer::{merge, truncate, Reducer};

/// Plan text kept per plan (a plan is a summary, not a document).
pub const MAX_PLAN_CHARS: usize = 16_000;

impl Reducer<'_> {
    /// `plan.delta | plan.final`: the `plans` surface and a `data-plan` part
    /// (replaced in place) in the assistant message. The final text wins
    /// over the streamed one; it is never appended to it.
    pub fn on_plan(&mut self) {
        let pid = self
            .first_str(&["planId"])
            .or_else(|| self.turn().map(|t| format!("plan-{t}")))
            .unwrap_or_else(|| "plan".into());
        let is_final = self.fact.class == "plan.final";
        let text = if is_final {
            self.first_text(&["text", "plan", "content"])
        } else {
            self.first_text(&["delta", "text", "content"])
        };
        let steps = self.first_value(&["steps", "items"]);
        let (cursor, agent) = (self.cursor, self.agent());
        let e = self
            .state
            .plans
            .entry(pid.clone())
            .or_insert_with(|| PlanEntry {
                plan_id: pid.clone(),
                status: "streaming".into(),
                text: String::new(),
                steps: None,
                agent_id: None,
                message_id: None,
                updated_cursor: cursor,
            });
        let streamed = e.text.clone();
        match (is_final, text) {
            (true, Some(t)) => e.text = truncate(&t, MAX_PLAN_CHARS),
            (false, Some(d)) if e.status != "final" => {
                e.text = truncate(&format!("{}{d}", e.text), MAX_PLAN_CHARS)
            }
            _ => {}
        }
        if is_final {
            e.status = "final".into();
        }
        if steps.is_some() {
            e.steps = steps;
        }
        if agent.is_some() {
            e.agent_id = agent;
        }
        e.updated_cursor = cursor;
        let differs = is_final && !streamed.is_empty() && streamed != e.text;
        let late_delta = !is_final && e.status == "final";
        if differs {
            self.diag(
                "final_text_differs",
                Severity::Info,
                format!("plan.final of {pid} differs from the streamed plan; the final wins"),
            );
        }
        if late_delta {
            self.diag(
                "plan_delta_after_final",
                Severity::Warning,
                format!("plan.delta for {pid} after its plan.final; ignored"),
            );
        }
        if self.has_message_context() {
            let msg = self.ensure_assistant();
            let e = &self.state.plans[&pid];
            let mut data = json!({"planId": pid, "status": e.status, "text": e.text});
            merge(&mut data, json!({"steps": e.steps}));
            self.put_data_part(&msg, "plan", &pid, data);
            self.state.plans[&pid].message_id = Some(msg.to_string());
        }
        self.touch("plans", pid);
    }
}
