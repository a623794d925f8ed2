//! The closed sets of seed 004's taxonomy: the envelope's `owner`, `scope`,
//! `phase`, `surface`, `persistence`, `control` and `topology`, and the
//! human-in-the-loop `actionType`s. A value outside its set is kept as sent
//! (a newer producer may know more) and said in the ingest reply's warnings
//! (`unknown_taxonomy_value`), never silently accepted.

use super::fact::Fact;
use super::issue::Issue;

/// The warning code.
pub const UNKNOWN_TAXONOMY_VALUE: &str = "unknown_taxonomy_value";

pub const OWNERS: &[&str] = &[
    "runtime",
    "model",
    "tool",
    "action",
    "artifact",
    "evidence",
    "context",
    "policy",
    "task",
    "agent",
    "session",
    "diagnostics",
    "ui_projection",
];
pub const SCOPES: &[&str] = &[
    "application",
    "workspace",
    "team",
    "session",
    "thread",
    "run",
    "turn",
    "message",
    "part",
    "task",
    "agent",
    "tool_call",
    "action_request",
    "artifact",
    "evidence",
];
pub const PHASES: &[&str] = &[
    "draft",
    "submitted",
    "accepted",
    "routing",
    "preparing",
    "planning",
    "reasoning",
    "acting",
    "waiting",
    "reviewing",
    "producing",
    "reconciling",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
    "archived",
    "hydrating",
];
pub const SURFACES: &[&str] = &[
    "composer",
    "conversation",
    "inline_process",
    "runtime_status",
    "tool_ui",
    "hitl",
    "task_capsule",
    "artifact_workspace",
    "timeline_evidence",
    "session_tabs",
    "diagnostics",
    "team_roster",
    "work_board",
    "delegation_graph",
    "handoff_lane",
    "worker_notifications",
    "review_lane",
    "teammate_transcript",
    "background_teammate",
    "remote_teammate",
    "team_policy",
];
pub const PERSISTENCES: &[&str] = &[
    "ephemeral_live",
    "transcript",
    "snapshot",
    "archive",
    "artifact_store",
    "evidence_pack",
    "diagnostics_log",
    "ui_local",
];
pub const CONTROLS: &[&str] = &[
    "send",
    "queue",
    "steer",
    "interrupt",
    "delegate",
    "assign",
    "continue_agent",
    "wait",
    "stop",
    "close",
    "request_review",
    "approve",
    "reject",
    "answer",
    "edit",
    "retry",
    "rollback",
    "export",
];
pub const TOPOLOGIES: &[&str] = &[
    "solo_run",
    "coordinator_team",
    "parallel_workers",
    "specialist_handoff",
    "review_team",
    "human_agent_board",
    "background_teammate",
    "remote_teammate",
];
/// Seed 004 "Human-in-the-loop taxonomy".
pub const ACTION_TYPES: &[&str] = &[
    "tool_approval",
    "plan_decision",
    "teammate_plan_decision",
    "structured_input",
    "clarification",
    "permission_grant",
    "delegated_permission",
    "credential_request",
    "artifact_review",
];

/// A warning for each taxonomy value of `fact` outside its closed set.
pub fn check(fact: &Fact) -> Vec<Issue> {
    let t = &fact.taxonomy;
    let mut out = Vec::new();
    let mut see = |field: &str, path: &str, value: Option<&str>, set: &[&str]| {
        if let Some(v) = value.filter(|v| !set.contains(v)) {
            out.push(Issue::new(
                UNKNOWN_TAXONOMY_VALUE,
                path,
                format!("{field} `{v}` is not one of seed 004's values; kept as sent"),
            ));
        }
    };
    see("owner", "/owner", t.owner.as_deref(), OWNERS);
    see("scope", "/scope", t.scope.as_deref(), SCOPES);
    see("phase", "/phase", t.phase.as_deref(), PHASES);
    see("surface", "/surface", t.surface.as_deref(), SURFACES);
    see(
        "persistence",
        "/persistence",
        t.persistence.as_deref(),
        PERSISTENCES,
    );
    see("control", "/control", t.control.as_deref(), CONTROLS);
    see("topology", "/topology", t.topology.as_deref(), TOPOLOGIES);
    if fact.class.starts_with("action.") {
        let action_type = ["actionType", "actionKind"]
            .iter()
            .find_map(|k| fact.payload_str(k));
        see(
            "actionType",
            "/payload/actionType",
            action_type,
            ACTION_TYPES,
        );
    }
    out
}

/// True for a fact the UI owns: `owner: ui_projection` or `persistence:
/// ui_local`. It never becomes transcript or runtime truth.
pub fn is_ui_local(fact: &Fact) -> bool {
    fact.taxonomy.owner.as_deref() == Some("ui_projection")
        || fact.taxonomy.persistence.as_deref() == Some("ui_local")
}
