//! The public snapshot state of a projection (`snapshot.state`): the runtime
//! status and every keyed surface, as plain serialisable data. Keyed surfaces
//! are `IndexMap`s so insertion order (and the JSON output) is deterministic.

mod entries;

use std::borrow::Cow;
use std::collections::VecDeque;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ui_message::Message;
pub use entries::{
    ActionEntry, ActionRequest, AgentEntry, ArtifactEntry, EvidenceEntry, TaskEntry, ToolEntry,
};

/// Runtime statuses a projection may show (docs/PROTOCOL.md §3).
pub const RUNTIME_STATUSES: &[&str] = &[
    "idle",
    "accepted",
    "routing",
    "preparing",
    "running",
    "waiting",
    "blocked",
    "retrying",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
    "stale",
    "unknown",
];

/// A map of the projection by id, in insertion order, with a fast hasher
/// (foldhash, randomly seeded per process): the reducer looks entries up
/// several times per fact, and SipHash was a twentieth of its time. The
/// maps are bounded (`max_surface_entries`), which caps what a crafted set
/// of colliding ids could cost.
pub type Keyed<V> = IndexMap<String, V, foldhash::fast::RandomState>;

/// The whole public state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicState {
    pub runtime: Runtime,
    pub messages: Vec<Message>,
    pub tools: Keyed<ToolEntry>,
    pub actions: Keyed<ActionEntry>,
    pub artifacts: Keyed<ArtifactEntry>,
    pub evidence: Keyed<EvidenceEntry>,
    pub tasks: Keyed<TaskEntry>,
    pub agents: Keyed<AgentEntry>,
    pub team: Team,
    /// The latest `queue.changed` payload as the queue state.
    pub queue: Value,
    pub context: Context,
    pub permissions: Permissions,
    pub coding: Coding,
    /// Plans by plan id (`plan.delta` streams, `plan.final` reconciles).
    #[serde(default)]
    pub plans: Keyed<PlanEntry>,
    /// The application state object (`state.app`): set by `state.snapshot`,
    /// patched by `state.delta` (RFC 6902, paths under `/app` only).
    #[serde(default = "empty_object")]
    pub app: Value,
    /// The session's team topology, from the latest fact that named one
    /// (`solo_run`, `coordinator_team`, ...); absent until one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// What `session.updated` (and `session.opened`) said of the session
    /// itself: title, pinned, archived.
    #[serde(default)]
    pub session: SessionInfo,
    /// The tools the runtime made available (`tool.catalog.resolved`), by
    /// name, as sent.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub tool_catalog: Keyed<Value>,
    pub diagnostics: VecDeque<Diagnostic>,
    pub timeline: VecDeque<TimelineEntry>,
    /// Facts the UI owns (`owner: ui_projection` or `persistence:
    /// ui_local`), kept aside: listed here (the newest [`MAX_UI_LOCAL`]),
    /// never applied to the transcript or the runtime.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub ui_local: VecDeque<UiLocalEntry>,
}

/// `state.session`: the session as its runtime describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_cursor: Option<u64>,
}

/// UI-local facts listed in [`PublicState::ui_local`].
pub const MAX_UI_LOCAL: usize = 100;

/// A UI-local fact kept aside: where it is in the log and what it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiLocalEntry {
    pub cursor: u64,
    pub event_id: String,
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence: Option<String>,
}

/// `{}`: the default of object-valued surfaces.
pub fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// `plans[planId]`: the plan text streamed by `plan.delta`, replaced by the
/// text of `plan.final` (the final wins), and its structured steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanEntry {
    pub plan_id: String,
    /// `streaming | final`.
    pub status: String,
    pub text: String,
    /// Structured steps exactly as `plan.final` (or a delta) sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    pub updated_cursor: u64,
}

/// `runtime`: derived only from lifecycle facts.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    /// One of [`RUNTIME_STATUSES`].
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_category: Option<String>,
    /// Whether a failed run may be retried, as `run.failed` said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// True while a runtime sequence gap, repeat or step back is unrepaired.
    pub stale: bool,
    /// Actions still pending (`action.required` without `action.resolved`).
    pub pending_actions: usize,
    /// Producer timestamp of the fact that last changed this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl Clone for Runtime {
    fn clone(&self) -> Self {
        Runtime {
            status: self.status.clone(),
            run_id: self.run_id.clone(),
            turn_id: self.turn_id.clone(),
            thread_id: self.thread_id.clone(),
            phase: self.phase.clone(),
            failure_category: self.failure_category.clone(),
            retryable: self.retryable,
            stale: self.stale,
            pending_actions: self.pending_actions,
            updated_at: self.updated_at.clone(),
        }
    }

    /// Field by field, reusing this runtime's strings (the reducer copies
    /// the runtime before every fact).
    fn clone_from(&mut self, from: &Self) {
        let Runtime {
            status,
            run_id,
            turn_id,
            thread_id,
            phase,
            failure_category,
            retryable,
            stale,
            pending_actions,
            updated_at,
        } = from;
        self.status.clone_from(status);
        self.run_id.clone_from(run_id);
        self.turn_id.clone_from(turn_id);
        self.thread_id.clone_from(thread_id);
        self.phase.clone_from(phase);
        self.failure_category.clone_from(failure_category);
        self.retryable = *retryable;
        self.stale = *stale;
        self.pending_actions = *pending_actions;
        self.updated_at.clone_from(updated_at);
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            status: "idle".into(),
            run_id: None,
            turn_id: None,
            thread_id: None,
            phase: None,
            failure_category: None,
            retryable: None,
            stale: false,
            pending_actions: 0,
            updated_at: None,
        }
    }
}

/// `team`: roster, handoffs, reviews, worker notifications, channels, edges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub roster: Vec<String>,
    pub handoffs: Vec<Value>,
    pub reviews: Vec<Value>,
    pub notifications: Vec<Value>,
    pub channels: Vec<Value>,
    pub edges: Vec<Edge>,
    /// Team name, phase, topology and counts from `team.changed` (data-team
    /// id `info`).
    #[serde(default = "empty_object")]
    pub info: Value,
}

/// A delegation or handoff edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub kind: String,
}

/// `context`: refs, budget, missing context, compaction boundaries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// `resolved | missing | compacting | unknown`: from the latest context
    /// fact; absent before any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    pub refs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Value>,
    pub missing: Vec<String>,
    pub compactions: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_cursor: Option<u64>,
}

/// `permissions`: mode, risk, sandbox, last decision, blocks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permissions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_decision: Option<Value>,
    pub blocks: Vec<Value>,
    /// Per-teammate permission facts (`permission.*` with an agent id).
    #[serde(default)]
    pub agents: Keyed<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_cursor: Option<u64>,
}

/// `coding`: the coding-agent workbench.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Coding {
    pub files: Keyed<Value>,
    pub patches: Keyed<Value>,
    pub commands: Keyed<Value>,
    pub tests: Keyed<Value>,
    pub blocks: Vec<Value>,
}

/// Diagnostic severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One diagnostic. Never part of message text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    pub id: String,
    pub code: String,
    pub severity: Severity,
    pub class: String,
    pub event_id: String,
    pub cursor: u64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// One compact timeline entry per applied fact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineEntry {
    pub cursor: u64,
    pub event_id: String,
    /// A known class is the reducer's own `'static` name, not a copy.
    pub class: Cow<'static, str>,
    pub source_class: Cow<'static, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The envelope's owner, scope, phase, surface, persistence, control and
    /// topology, when it named any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taxonomy: Option<Box<crate::event::Taxonomy>>,
}
