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

/// Defines [`ScopeIds`] and its table [`ScopeIds::FIELDS`] from one list, so
/// that the struct, the wire names and the keys of a derived id cannot drift.
macro_rules! scope_ids {
    ($( $(#[$doc:meta])* $field:ident = $wire:literal, stream_key: $key:literal; )*) => {
        /// The stable scope ids an event may carry. Every field is optional on the
        /// wire; validation decides which ones a class requires.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct ScopeIds {
            $(
                $(#[$doc])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: Option<String>,
            )*
        }

        impl ScopeIds {
            /// Every scope id, in wire order.
            pub const FIELDS: &'static [ScopeIdField] = &[
                $(
                    ScopeIdField {
                        wire: $wire,
                        stream_key: $key,
                        get: |ids| &ids.$field,
                        get_mut: |ids| &mut ids.$field,
                    },
                )*
            ];
        }
    };
}

/// One row of [`ScopeIds::FIELDS`].
pub struct ScopeIdField {
    /// The top-level key on the wire (`toolCallId`).
    pub wire: &'static str,
    /// Whether the id names the runtime stream an event belongs to, and so
    /// keys the derived idempotency key of an event sent without `id`
    /// together with its `sequence`.
    pub stream_key: bool,
    pub get: fn(&ScopeIds) -> &Option<String>,
    pub get_mut: fn(&mut ScopeIds) -> &mut Option<String>,
}

scope_ids! {
    runtime_id = "runtimeId", stream_key: true;
    /// Session id as sent inside the event (may name a child session).
    session_id = "sessionId", stream_key: true;
    thread_id = "threadId", stream_key: true;
    run_id = "runId", stream_key: true;
    turn_id = "turnId", stream_key: true;
    step_id = "stepId", stream_key: false;
    message_id = "messageId", stream_key: false;
    part_id = "partId", stream_key: false;
    task_id = "taskId", stream_key: true;
    parent_task_id = "parentTaskId", stream_key: false;
    agent_id = "agentId", stream_key: true;
    subagent_id = "subagentId", stream_key: true;
    worker_id = "workerId", stream_key: false;
    parent_session_id = "parentSessionId", stream_key: false;
    parent_thread_id = "parentThreadId", stream_key: false;
    tool_call_id = "toolCallId", stream_key: false;
    action_id = "actionId", stream_key: false;
    artifact_id = "artifactId", stream_key: false;
    evidence_id = "evidenceId", stream_key: false;
    handoff_id = "handoffId", stream_key: false;
    review_id = "reviewId", stream_key: false;
    channel_id = "channelId", stream_key: false;
    diagnostic_id = "diagnosticId", stream_key: false;
    trace_id = "traceId", stream_key: false;
    span_id = "spanId", stream_key: false;
    attempt_id = "attemptId", stream_key: false;
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

impl Taxonomy {
    /// True when the envelope named none of the fields.
    pub fn is_empty(&self) -> bool {
        let Taxonomy {
            owner,
            scope,
            phase,
            surface,
            persistence,
            control,
            topology,
        } = self;
        [owner, scope, phase, surface, persistence, control, topology]
            .iter()
            .all(|f| f.is_none())
    }
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
    /// The idempotent producer's append that brought the fact in (set by
    /// the server from the `Producer-*` headers, never read from an event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<crate::producer::ProducerClaim>,
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
            producer: None,
        }
    }

    /// The fact that records an idempotent producer's append when every
    /// event of it was already in the log (so that its next sequence is
    /// not a gap): class `producer.recorded`, id unique to the append and
    /// its place in the log, no payload.
    pub fn producer_recorded(claim: &crate::producer::ProducerClaim, cursor: u64) -> Fact {
        let mut f = Fact::new(
            format!(
                "producer:{}:{}:{}@{cursor}",
                claim.id, claim.epoch, claim.seq
            ),
            super::classes::PRODUCER_RECORDED,
        );
        f.producer = Some(claim.clone());
        f
    }

    /// A payload field. A payload of a few fields (almost every one) is
    /// scanned rather than hashed: its map's SipHash of the key costs more
    /// than comparing a handful of short keys.
    pub fn payload_get(&self, key: &str) -> Option<&Value> {
        if self.payload.len() <= 8 {
            self.payload.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
        } else {
            self.payload.get(key)
        }
    }

    /// A payload string field.
    pub fn payload_str(&self, key: &str) -> Option<&str> {
        self.payload_get(key).and_then(Value::as_str)
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
