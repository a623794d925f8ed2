//! The reducer bench's facts, shared by `benches/reducer.rs` and
//! `examples/reducer_profile.rs` so that a profile runs the bench's workload.

use agent_projector::event::{normalize, Fact, Limits};
use serde_json::json;

/// `n` facts: plain text deltas, or the mixed run (a tool call, an action
/// and an artifact every 20 facts, text deltas between).
pub fn facts(n: usize, mixed: bool) -> Vec<Fact> {
    (0..n)
        .map(|k| {
            let raw = if !mixed {
                json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "sequence": k + 1, "payload": {"delta": "token "}})
            } else {
                match k % 20 {
                    0 => json!({"id": format!("e{k}"), "type": "tool.started", "runId": "r", "sequence": k + 1, "toolCallId": format!("t{k}"), "payload": {"toolName": "grep", "input": {"q": "x"}}}),
                    1 => json!({"id": format!("e{k}"), "type": "tool.result", "runId": "r", "sequence": k + 1, "toolCallId": format!("t{}", k - 1), "payload": {"summary": "2 hits"}, "refIds": ["o1"]}),
                    10 => json!({"id": format!("e{k}"), "type": "action.required", "runId": "r", "sequence": k + 1, "actionId": format!("a{k}")}),
                    11 => json!({"id": format!("e{k}"), "type": "action.resolved", "runId": "r", "sequence": k + 1, "actionId": format!("a{}", k - 1), "payload": {"decision": "approved"}}),
                    15 => json!({"id": format!("e{k}"), "type": "artifact.changed", "runId": "r", "sequence": k + 1, "artifactId": format!("f{k}"), "payload": {"title": "a.md"}}),
                    _ => json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "sequence": k + 1, "payload": {"delta": "token "}}),
                }
            };
            normalize(raw, &Limits::default()).unwrap().fact
        })
        .collect()
}
