//! The normalised fact: one runtime event after envelope normalisation, alias
//! mapping and redaction. This is what the log stores and the reducer folds.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which wire envelope an event arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Envelope {
    /// Lime `AgentRuntimeExecutionEvent` (seed 002): `eventClass`, `kind`, `status`, ...
    Lime,
    /// Agent UI projection event (seed 004): `type`, `owner`, `scope`, `phase`, ...
    AgentUi,
}

/// The stable scope ids an event may carry. Every field is optional on the
/// wire; validation decides which ones a class requires.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeIds {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<String>,
    /// Session id as sent inside the event (may name a child session).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_thread_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostic_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_id: Option<String>,
}

/// Portable taxonomy of the Agent UI envelope (seed 004). Lime events may
/// carry `owner` and `phase` too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taxonomy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistence: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
}

/// One normalised runtime fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fact {
    /// Idempotency key: the event `id`, or a key derived from scope and sequence.
    pub id: String,
    /// True when `id` was derived rather than sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub derived_id: bool,
    /// Canonical class after alias mapping (see `event::classes`).
    pub class: String,
    /// The class name exactly as sent (`eventClass` or `type`).
    pub source_class: String,
    pub envelope: Envelope,
    /// Lime `kind` (or derived from the class prefix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Lime `status` (or derived from the class suffix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Runtime sequence within its stream (not the server cursor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// Producer timestamp (`createdAt` or `timestamp`), as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub ids: ScopeIds,
    #[serde(default)]
    pub taxonomy: Taxonomy,
    /// Structured body (always an object; empty when absent). Redacted.
    #[serde(default)]
    pub payload: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ref_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifact_refs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_refs: Vec<String>,
    /// Agent UI `refs` (an array or a map of refs), as sent after redaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refs: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_event_ref: Option<String>,
    /// Top-level fields of neither envelope, kept as sent (redacted).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl Fact {
    /// A minimal fact, for tests and internal use.
    pub fn new(id: impl Into<String>, class: impl Into<String>) -> Self {
        let class = class.into();
        Fact {
            id: id.into(),
            derived_id: false,
            source_class: class.clone(),
            class,
            envelope: Envelope::AgentUi,
            kind: None,
            status: None,
            title: None,
            detail: None,
            sequence: None,
            timestamp: None,
            completed_at: None,
            schema_version: None,
            source_type: None,
            model: None,
            ids: ScopeIds::default(),
            taxonomy: Taxonomy::default(),
            payload: Map::new(),
            ref_ids: Vec::new(),
            artifact_refs: Vec::new(),
            evidence_refs: Vec::new(),
            refs: None,
            raw_event_ref: None,
            extra: Map::new(),
        }
    }

    /// A payload string field.
    pub fn payload_str(&self, key: &str) -> Option<&str> {
        self.payload.get(key).and_then(Value::as_str)
    }

    /// The first payload string among `keys`.
    pub fn payload_str_any(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|k| self.payload_str(k))
    }

    /// The class family: the part before the first dot (`tool` for `tool.result`).
    pub fn family(&self) -> &str {
        self.class.split('.').next().unwrap_or(&self.class)
    }
}
