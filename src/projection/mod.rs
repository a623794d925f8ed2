//! The read model of one session and its pure reducer:
//! `(projection, cursor, fact) -> chunks`. No I/O, no async, no clocks: the
//! same log always yields the same projection and the same chunks.

//!
//! Layout: `state.rs` (public snapshot types), `ctx.rs` (per-fact context,
//! emit/diagnostic helpers, bookkeeping), `messages.rs` (messages, text,
//! reasoning, reconciliation), `tools.rs`, `coding.rs`, `surfaces.rs`
//! (actions, artifacts, evidence, queue, context, permissions, diagnostics),
//! `team.rs` (tasks, agents, team), `runtime.rs` (lifecycle, verifier),
//! `sequence.rs` (sequence gaps). `chunk.rs` and `message.rs` hold the AI SDK
//! shapes.

pub mod chunk;
mod coding;
mod ctx;
pub mod message;
mod messages;
mod runtime;
pub mod sequence;
pub mod state;
mod surfaces;
mod team;
mod tools;

#[cfg(test)]
mod conformance_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_surfaces;

use serde::{Deserialize, Serialize};

use crate::event::{classes, Fact};
pub use chunk::{Chunk, ChunkOut, FinishReason};
use ctx::{Ctx, Internal};
pub use message::{Message, Part, Role};
pub use state::State;

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
}

impl Default for ProjectionConfig {
    fn default() -> Self {
        ProjectionConfig {
            raw_reasoning: false,
            max_messages: 500,
            max_timeline: 500,
            max_diagnostics: 200,
            max_surface_entries: 1000,
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

/// The projection of one session: the public [`State`], the bookkeeping the
/// reducer needs (checkpointed with it, never shown), and the cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    cursor: u64,
    state: State,
    internal: Internal,
}

impl Projection {
    /// An empty projection.
    pub fn new(_cfg: &ProjectionConfig) -> Self {
        let state = State {
            queue: serde_json::json!({}),
            ..State::default()
        };
        Projection {
            cursor: 0,
            state,
            internal: Internal::default(),
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
        let before = self.state.runtime.clone();
        let mut cx = Ctx::new(&mut self.state, &mut self.internal, cfg, cursor, fact);
        cx.timeline();
        cx.check_sequence();
        dispatch(&mut cx);
        cx.finish(&before)
    }

    /// The public snapshot state (`snapshot.state`).
    pub fn state_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.state).unwrap_or(serde_json::Value::Null)
    }

    /// The public state.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// A message by id.
    pub fn message(&self, id: &str) -> Option<&Message> {
        self.state.messages.iter().find(|m| m.id == id)
    }

    /// The runtime's control URL (from `session.opened`), if it named one.
    pub fn control_url(&self) -> Option<&str> {
        self.internal.control_url.as_deref()
    }

    /// All messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.state.messages
    }
}

/// Route one fact by its canonical class.
fn dispatch(cx: &mut Ctx<'_>) {
    let class = cx.f.class.clone();
    if !classes::is_known(&class) {
        cx.diag(
            "unknown_event_class",
            state::Severity::Info,
            format!(
                "unknown event class '{}': kept on the timeline only",
                cx.f.source_class
            ),
        );
        return;
    }
    if runtime::is_work(&class) {
        cx.on_work();
    }
    match class.as_str() {
        "turn.submitted" => cx.on_submitted(),
        "run.started" => cx.on_run_started(),
        "run.status" => cx.on_run_status(),
        "run.finished" | "run.failed" | "run.canceled" => cx.on_run_end(),
        "text.delta" => cx.on_text_delta(),
        "text.final" => cx.on_text_final(),
        "reasoning.delta" => cx.on_reasoning_delta(),
        "reasoning.summary" => cx.on_reasoning_summary(),
        "tool.catalog.resolved" => {}
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
        "diagnostic.changed" | "runtime.error" | "model.failed" => cx.on_diagnostic_fact(),
        "snapshot.updated" | "messages.snapshot" | "state.snapshot" => cx.on_repair(),
        "session.opened" => cx.on_session_opened(),
        // other session.*, model.requested, plan.*, state.delta, metric.changed:
        // timeline only for now.
        _ => {}
    }
}
