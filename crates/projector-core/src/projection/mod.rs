//! The read model of one session and its pure reducer:
//! `(projection, cursor, fact) -> chunks`. No I/O, no async, no clocks: the
//! same log always yields the same projection and the same chunks.
//!
//! Layout (each file's own `//!` line says more):
//! - the reducer: `reducer.rs` (the per-fact context, emit and diagnostic
//!   helpers, bookkeeping), `transcript.rs` (which message a fact belongs
//!   to, text and reasoning segments, reconciliation), `input.rs` (user
//!   input and attachments), `ui_chunks.rs` (a producer's own AI SDK
//!   chunks), `metadata.rs` (messages' AI SDK metadata), `repair.rs`
//!   (repair events), `sequence.rs` (runtime sequence gaps);
//! - surfaces: `runtime.rs` (status and run lifecycle), `tools.rs`,
//!   `actions.rs`, `artifacts.rs` (and diagnostics), `evidence.rs`,
//!   `team.rs` (tasks, agents, team), `collaboration.rs` (handoffs,
//!   reviews, notifications), `coding.rs`, `queue.rs`, `agent_context.rs`,
//!   `permissions.rs`, `plans.rs`, `app_patch.rs` (`state.app`, JSON Patch);
//! - shapes: `public_state/` (the snapshot's types), `ui_message/` (the AI
//!   SDK `UIMessage`, its parts and replay), `chunk.rs` (`UIMessageChunk`),
//!   `surface_json.rs` (a touched surface entry's JSON), `umo_blocks.rs`
//!   and `umo_live.rs` (the Umo Editor view);
//! - bookkeeping indexes: `part_ids.rs`, `hash_index.rs`;
//! - `tests/`: the reducer's tests (a test in the server crate checks that
//!   every file named here exists).

mod actions;
mod agent_context;
mod app_patch;
mod artifacts;
mod attempts;
pub mod chunk;
mod coding;
mod collaboration;
mod evidence;
mod hash_index;
pub mod idle;
mod input;
mod metadata;
mod part_ids;
mod permissions;
mod plans;
pub mod public_state;
mod queue;
mod reducer;
mod repair;
mod runtime;
pub mod sequence;
mod surface_json;
mod team;
mod tools;
mod transcript;
mod ui_chunks;
pub mod ui_message;
pub mod umo_blocks;
pub mod umo_live;

// The reducer's tests, out of the production files (`tests/`).
#[cfg(test)]
#[path = "tests/conformance.rs"]
mod conformance_tests;
#[cfg(test)]
#[path = "tests/run.rs"]
mod tests;
#[cfg(test)]
#[path = "tests/hitl.rs"]
mod tests_hitl;
#[cfg(test)]
#[path = "tests/idle.rs"]
mod tests_idle;
#[cfg(test)]
#[path = "tests/kept.rs"]
mod tests_kept;
#[cfg(test)]
#[path = "tests/surfaces.rs"]
mod tests_surfaces;
#[cfg(test)]
#[path = "tests/taxonomy.rs"]
mod tests_taxonomy;

use serde::{Deserialize, Serialize};

use crate::event::{taxonomy, Fact};
pub use attempts::superseded_message;
pub use chunk::{Chunk, ChunkOut, FinishReason, Origin, RawJson};
pub use public_state::PublicState;
use reducer::{Bookkeeping, Reducer};
pub use ui_message::{Message, Part, Role, ToolState};

/// Reducer settings (from `[projection]` in the config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectionConfig {
    /// Project raw `reasoning.delta` text as reasoning parts. Off by default:
    /// only reasoning summaries reach the transcript.
    pub raw_reasoning: bool,
    /// Messages kept in the projection (older ones stay in the log).
    pub max_messages: usize,
    /// Timeline entries kept.
    pub max_timeline: usize,
    /// Diagnostics kept.
    pub max_diagnostics: usize,
    /// Entries kept per keyed surface (tools, actions, artifacts, ...).
    pub max_surface_entries: usize,
    /// Most recent messages in a snapshot; older ones page in through
    /// `GET /v1/sessions/{id}/messages?before=`.
    #[serde(default = "default_snapshot_messages")]
    pub snapshot_messages: usize,
}

fn default_snapshot_messages() -> usize {
    50
}

impl Default for ProjectionConfig {
    fn default() -> Self {
        ProjectionConfig {
            raw_reasoning: false,
            max_messages: 500,
            max_timeline: 500,
            max_diagnostics: 200,
            max_surface_entries: 1000,
            snapshot_messages: default_snapshot_messages(),
        }
    }
}

/// A finding of the reducer that the ingest response reports as a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable code, e.g. `sequence_gap`.
    pub code: String,
    pub message: String,
}

/// What applying one fact produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// Chunks for the delta frame, in order.
    pub chunks: Vec<ChunkOut>,
    /// Warnings for the ingest response.
    pub findings: Vec<Finding>,
}

/// The projection of one session: the public [`PublicState`], the bookkeeping the
/// reducer needs (checkpointed with it, never shown), and the cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    cursor: u64,
    state: PublicState,
    internal: Bookkeeping,
}

impl Projection {
    /// An empty projection.
    pub fn new(_cfg: &ProjectionConfig) -> Self {
        let mut state = PublicState {
            queue: serde_json::json!({}),
            app: public_state::empty_object(),
            ..PublicState::default()
        };
        state.team.info = public_state::empty_object();
        Projection {
            cursor: 0,
            state,
            internal: Bookkeeping::default(),
        }
    }

    /// Cursor of the last applied fact.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Fold one fact at `cursor`: pure and deterministic; never panics on
    /// any fact (problems become diagnostics and findings).
    pub fn apply(&mut self, cfg: &ProjectionConfig, cursor: u64, fact: &Fact) -> Applied {
        self.cursor = cursor;
        // Debug builds check that every change to the runtime went through
        // `Reducer::runtime_mut` (which decides whether a runtime chunk goes
        // out): the whole runtime before and after, against the chunks.
        #[cfg(debug_assertions)]
        let runtime_was = self.state.runtime.clone();
        if let Some(p) = &fact.producer {
            self.internal.producers.record(p, cursor);
        }
        let mut cx = Reducer::new(&mut self.state, &mut self.internal, cfg, cursor, fact);
        cx.timeline();
        cx.check_sequence();
        cx.adopt_topology();
        dispatch(&mut cx);
        let applied = cx.finish();
        #[cfg(debug_assertions)]
        {
            let sent = applied
                .chunks
                .iter()
                .any(|c| matches!(&c.chunk, Chunk::Surface { name, .. } if *name == "runtime"));
            debug_assert_eq!(
                sent,
                self.state.runtime != runtime_was,
                "the runtime changed outside Reducer::runtime_mut (or a chunk went out without a change)"
            );
        }
        applied
    }

    /// The public snapshot state (`snapshot.state`).
    pub fn state_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.state).unwrap_or(serde_json::Value::Null)
    }

    /// The public state.
    pub fn state(&self) -> &PublicState {
        &self.state
    }

    /// A message by id.
    pub fn message(&self, id: &str) -> Option<&Message> {
        self.state.messages.iter().find(|m| *m.id == *id)
    }

    /// The runtime's control URL (from `session.opened`), if it named one.
    pub fn control_url(&self) -> Option<&str> {
        self.internal.control_url.as_deref()
    }

    /// What the session remembers of idempotent producer `id`.
    pub fn producer(&self, id: &str) -> Option<crate::producer::Producer> {
        self.internal.producers.get(id)
    }

    /// All messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.state.messages
    }

    /// The snapshot state with only the `window` most recent messages, and
    /// `history: {messages, inSnapshot, nextBefore?}` saying how to page in
    /// the older ones (`GET .../messages?before=<nextBefore>`).
    pub fn snapshot_json(&mut self, window: usize) -> serde_json::Value {
        let total = self.state.messages.len();
        let keep = window.min(total);
        let mut older = std::mem::take(&mut self.state.messages);
        self.state.messages = older.split_off(total - keep);
        let mut v = self.state_json();
        let next_before = (!older.is_empty())
            .then(|| self.state.messages.first().map(|m| m.id.clone()))
            .flatten();
        older.append(&mut self.state.messages);
        self.state.messages = older;
        if let serde_json::Value::Object(m) = &mut v {
            let mut h = serde_json::json!({"messages": total, "inSnapshot": keep});
            if let Some(b) = next_before {
                h["nextBefore"] = (*b).into();
            }
            m.insert("history".into(), h);
        }
        v
    }

    /// A page of at most `limit` messages, oldest first: those right before
    /// message `before`, or the newest ones without it; and the `before` of
    /// the next (older) page, if any. `None` when `before` is not a message
    /// of the projection (it may have left the `max_messages` window).
    pub fn messages_page(
        &self,
        before: Option<&str>,
        limit: usize,
    ) -> Option<(&[Message], Option<String>)> {
        let ms = &self.state.messages;
        let end = match before {
            Some(id) => ms.iter().position(|m| *m.id == *id)?,
            None => ms.len(),
        };
        let start = end.saturating_sub(limit.max(1));
        let page = &ms[start..end];
        let next = (start > 0)
            .then(|| page.first().map(|m| m.id.to_string()))
            .flatten();
        Some((page, next))
    }
}

/// Route one fact by its canonical class.
fn dispatch(cx: &mut Reducer<'_>) {
    let fact = cx.fact;
    let class = fact.class.as_str();
    if cx.known_class.is_none() {
        cx.diag(
            "unknown_event_class",
            public_state::Severity::Info,
            format!(
                "unknown event class '{}': kept on the timeline only",
                cx.fact.source_class
            ),
        );
        return;
    }
    if taxonomy::is_ui_local(cx.fact) {
        cx.keep_aside();
        return;
    }
    let user_text = class.starts_with("text.") && fact.payload_str("role") == Some("user");
    let mut step = None;
    if runtime::is_work(class) && !user_text {
        if !cx.on_work() {
            return;
        }
        step = cx.before_step();
    } else if class == "action.required" {
        cx.check_turn_open();
    }
    match class {
        "turn.submitted" => cx.on_submitted(),
        "run.started" => cx.on_run_started(),
        "run.status" => cx.on_run_status(),
        "run.finished" | "run.failed" | "run.canceled" => cx.on_run_end(),
        "text.delta" | "text.final" if user_text => cx.on_user_text(),
        "text.delta" => cx.on_text_delta(),
        "text.final" => cx.on_text_final(),
        "reasoning.delta" => cx.on_reasoning_delta(),
        "reasoning.summary" => cx.on_reasoning_summary(),
        "tool.catalog.resolved" => cx.on_tool_catalog(),
        c if c.starts_with("tool.") => cx.on_tool(),
        "file.read" | "file.changed" => cx.on_file(),
        c if c.starts_with("patch.") || c.starts_with("command.") || c.starts_with("test.") => {
            cx.on_coding()
        }
        "action.required" | "action.resolved" => cx.on_action(),
        c if c.starts_with("artifact.") => cx.on_artifact_facts(),
        "evidence.changed" => cx.on_evidence_facts(),
        c if c.starts_with("task.") => cx.on_task(),
        c if c.starts_with("agent.") || c == "worker.started" || c == "worker.completed" => {
            cx.on_agent()
        }
        "worker.notification" => cx.on_worker_notification(),
        c if c.starts_with("handoff.") => cx.on_handoff(),
        c if c.starts_with("review.") => cx.on_review(),
        c if c.starts_with("channel.") => cx.on_channel(),
        "team.changed" => cx.on_team_changed(),
        "queue.changed" => cx.on_queue(),
        c if c.starts_with("context.") => cx.on_context(),
        "sandbox.blocked" => cx.on_sandbox_blocked(),
        c if c.starts_with("permission.") || c.starts_with("sandbox.") => cx.on_permission(),
        "plan.delta" | "plan.final" => cx.on_plan(),
        "diagnostic.changed" | "runtime.error" | "model.failed" => cx.on_diagnostic_fact(),
        "snapshot.updated" | "messages.snapshot" | "state.snapshot" => cx.on_repair(),
        "state.delta" => cx.on_state_delta(),
        "session.opened" => cx.on_session_opened(),
        "session.updated" => cx.on_session_updated(),
        "ui.chunk" => cx.on_ui_chunk(),
        // other session.*, model.requested, metric.changed:
        // timeline only for now.
        _ => {}
    }
    if let Some(w) = step {
        cx.after_step(w);
    }
}
