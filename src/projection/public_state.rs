//! The public snapshot state of a projection (`snapshot.state`): the runtime
//! status and every keyed surface, as plain serialisable data. Keyed surfaces
//! are `IndexMap`s so insertion order (and the JSON output) is deterministic.

use std::collections::VecDeque;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ui_message::Message;

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

/// The whole public state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicState {
    pub runtime: Runtime,
    pub messages: Vec<Message>,
    pub tools: IndexMap<String, ToolEntry>,
    pub actions: IndexMap<String, ActionEntry>,
    pub artifacts: IndexMap<String, ArtifactEntry>,
    pub evidence: IndexMap<String, EvidenceEntry>,
    pub tasks: IndexMap<String, TaskEntry>,
    pub agents: IndexMap<String, AgentEntry>,
    pub team: Team,
    /// The latest `queue.changed` payload as the queue state.
    pub queue: Value,
    pub context: Context,
    pub permissions: Permissions,
    pub coding: Coding,
    /// Plans by plan id (`plan.delta` streams, `plan.final` reconciles).
    #[serde(default)]
    pub plans: IndexMap<String, PlanEntry>,
    /// The application state object (`state.app`): set by `state.snapshot`,
    /// patched by `state.delta` (RFC 6902, paths under `/app` only).
    #[serde(default = "empty_object")]
    pub app: Value,
    /// The session's team topology, from the latest fact that named one
    /// (`solo_run`, `coordinator_team`, ...); absent until one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    pub diagnostics: VecDeque<Diagnostic>,
    pub timeline: VecDeque<TimelineEntry>,
    /// Facts the UI owns (`owner: ui_projection` or `persistence:
    /// ui_local`), kept aside: listed here (the newest [`MAX_UI_LOCAL`]),
    /// never applied to the transcript or the runtime.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub ui_local: VecDeque<UiLocalEntry>,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// True while a runtime sequence gap, repeat or step back is unrepaired.
    pub stale: bool,
    /// Actions still pending (`action.required` without `action.resolved`).
    pub pending_actions: usize,
    /// Producer timestamp of the fact that last changed this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
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
            stale: false,
            pending_actions: 0,
            updated_at: None,
        }
    }
}

/// `tools[toolCallId]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    pub tool_call_id: String,
    pub tool_name: String,
    /// `running | completed | failed | cancelled`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    pub output_refs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_category: Option<String>,
    pub started_cursor: u64,
    pub updated_cursor: u64,
    /// `tool | patch | command | test`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
}

/// `actions[actionId]`: pending until `action.resolved`, never otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionEntry {
    pub action_id: String,
    /// `pending | resolved`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Absent when the resolution arrived without a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_cursor: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_cursor: Option<u64>,
    /// What the request asks, for the card or form a UI renders.
    #[serde(flatten)]
    pub request: ActionRequest,
}

/// The content of a human-in-the-loop request (seed 004 "Human-in-the-loop
/// taxonomy"), from the `action.required` payload, redacted like every
/// payload. Each field only as the runtime sent it; nothing is guessed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionRequest {
    /// The question put to the user (`question | prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// More about the request (`detail`, or `payload.description | message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The choices offered (`options | choices`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
    /// The JSON Schema an answer must satisfy (`schema | inputSchema |
    /// requestedSchema`): a `structured_input` form. Answers are checked
    /// against it before they are relayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// The tool a `tool_approval` is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The safe summary of the input to approve (`safeInput | inputSummary
    /// | input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// `risk | riskLevel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
    /// What a permission covers (`scope | permissionScope`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Value>,
    /// The plan of a `plan_decision` (`plan | planText`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Value>,
    /// What a `permission_grant` grants (`grant | permissions`), and for how long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Value>,
    /// The credential a `credential_request` asks for: `{name, kind,
    /// provider}` (`credentialName | secretName`, `credentialKind |
    /// credentialType`, `provider`); never a secret value (redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<Value>,
    /// The artifact (and version) an `artifact_review` is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// When the request lapses (`expiresAt | expiry`), as the runtime wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// `artifacts[artifactId]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactEntry {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Only from `payload.artifactKind | kind | type`; never guessed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub refs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    pub updated_cursor: u64,
}

/// `evidence[evidenceId]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceEntry {
    pub evidence_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Only from `payload.verdict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// Where the evidence is (`url | href | link`; http(s), never with
    /// credentials in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Who published it (`source | site | publisher`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The passage it rests on (`snippet | excerpt | quote`), truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// Its date as the producer wrote it (`date | publishedAt | retrievedAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// A document without a URL: its media type and file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    pub refs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    pub updated_cursor: u64,
}

/// `tasks[taskId]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskEntry {
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<String>,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Work-board fields, only as the task facts name them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Artifact, evidence and result refs named by the task facts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
    /// `payload.runtimeEntity` (`agent_turn`, `work_item`, ...), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_entity: Option<String>,
    pub updated_cursor: u64,
}

/// `agents[agentId]`: teammates, subagents and workers with their lineage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEntry {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_name: Option<String>,
    /// The teammate's own policy (permission mode, sandbox, budget), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Value>,
    /// `latestTurnStatus`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_turn_status: Option<String>,
    /// Transcript ref: teammate transcripts stay behind refs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_ref: Option<String>,
    /// `known | unavailable`.
    pub lineage: String,
    pub updated_cursor: u64,
}

impl AgentEntry {
    /// An agent known only by id: status `unknown`, with the given lineage
    /// (`unavailable` when its facts lack it, `unknown` when merely listed).
    pub fn new(agent_id: &str, lineage: &str, cursor: u64) -> Self {
        AgentEntry {
            agent_id: agent_id.to_string(),
            name: None,
            role: None,
            status: "unknown".into(),
            parent_session_id: None,
            parent_thread_id: None,
            task_id: None,
            model: None,
            team_name: None,
            policy: None,
            latest_turn_status: None,
            transcript_ref: None,
            lineage: lineage.into(),
            updated_cursor: cursor,
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
    pub agents: IndexMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_cursor: Option<u64>,
}

/// `coding`: the coding-agent workbench.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Coding {
    pub files: IndexMap<String, Value>,
    pub patches: IndexMap<String, Value>,
    pub commands: IndexMap<String, Value>,
    pub tests: IndexMap<String, Value>,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineEntry {
    pub cursor: u64,
    pub event_id: String,
    pub class: String,
    pub source_class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The envelope's owner, scope, phase, surface, persistence, control and
    /// topology, when it named any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taxonomy: Option<crate::event::Taxonomy>,
}
