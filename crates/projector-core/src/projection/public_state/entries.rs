//! The entries of the keyed surfaces: tools, actions (and what a request
//! asks), artifacts, evidence, tasks and agents.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// The teammate waits for input, or has a plan ready: these outrank a
    /// plain `running` in `status` (seed 004 teammate status).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_input: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plan_ready: bool,
    /// A remote teammate: its agent card (as sent), its task id on the
    /// remote side, and whether it needs authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_card: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task_id: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_auth: bool,
    /// A background teammate: when it wakes (as sent) and why it last woke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_reason: Option<String>,
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
            needs_input: false,
            plan_ready: false,
            agent_card: None,
            remote_task_id: None,
            needs_auth: false,
            schedule: None,
            wake_reason: None,
            lineage: lineage.into(),
            updated_cursor: cursor,
        }
    }
}
