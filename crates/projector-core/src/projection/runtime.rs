//! The runtime surface and run lifecycle: status derived only from lifecycle
//! facts (`turn.submitted`, `run.*`), work facts moving an idle run to
//! running, run end closing the turn's open messages, sequence findings and
//! the light per-turn verifier (`work_after_turn_end`,
//! `repeated_terminal_event`), and the tools a run left running when it
//! ended.

use super::chunk::{Chunk, FinishReason};
use super::public_state::{Severity, RUNTIME_STATUSES};
use super::reducer::{nonempty, truncate, Reducer, TurnMark};
use super::sequence::SeqOutcome;
use super::ui_message::{Part, ToolState};

const TERMINAL: &[&str] = &["completed", "failed", "cancelled", "interrupted"];

/// Statuses that `run.status` phases map onto when they are not statuses.
fn phase_status(phase: &str) -> Option<&'static str> {
    Some(match phase {
        "submitted" | "accepted" => "accepted",
        "routing" => "routing",
        "preparing" => "preparing",
        "planning" | "reasoning" | "acting" | "reviewing" | "producing" | "reconciling"
        | "streaming" => "running",
        "waiting" => "waiting",
        "completed" => "completed",
        "failed" => "failed",
        "cancelled" | "canceled" => "cancelled",
        "interrupted" => "interrupted",
        _ => return None,
    })
}

/// Classes whose facts show that work is happening.
pub fn is_work(class: &str) -> bool {
    // The class's first word, found bytewise (this runs for every fact).
    let head = &class[..class.bytes().position(|b| b == b'.').unwrap_or(class.len())];
    (matches!(
        head,
        "text" | "reasoning" | "tool" | "plan" | "patch" | "command" | "test" | "file"
    ) && class != "tool.catalog.resolved")
        || class == "model.requested"
}

impl<'a> Reducer<'a> {
    fn set_status(&mut self, status: &str) {
        if self.state.runtime.status != status {
            self.runtime_mut().status = status.to_string();
        }
    }

    fn adopt_ids(&mut self) {
        let ids = &self.fact.ids;
        if let Some(r) = nonempty(ids.run_id.as_deref()) {
            self.runtime_mut().run_id = Some(r);
        }
        if let Some(t) = nonempty(ids.turn_id.as_deref()) {
            self.runtime_mut().turn_id = Some(t);
        }
        if let Some(t) = nonempty(ids.thread_id.as_deref()) {
            self.runtime_mut().thread_id = Some(t);
        }
    }

    /// Check the runtime `sequence` of the fact within its stream.
    pub fn check_sequence(&mut self) {
        let Some(seq) = self.fact.sequence else {
            return;
        };
        let ids = &self.fact.ids;
        let parts = [
            ids.session_id.as_deref().unwrap_or(""),
            ids.thread_id.as_deref().unwrap_or(""),
            ids.run_id
                .as_deref()
                .or(ids.turn_id.as_deref())
                .unwrap_or(""),
        ];
        // The stream's key, built in the thread's buffer (this runs for
        // every fact).
        let outcome = crate::compact_json::with_scratch(|key| {
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    key.push('\u{1f}');
                }
                key.push_str(p);
            }
            self.books.sequence.observe(key, seq)
        });
        match outcome {
            SeqOutcome::First | SeqOutcome::Next | SeqOutcome::Filled => {}
            SeqOutcome::Gap { from, to } => {
                let missing = if from == to {
                    format!("{from}")
                } else {
                    format!("{from}..{to}")
                };
                self.finding(
                    "sequence_gap",
                    format!("sequence {seq} arrived but {missing} never did; the projection is stale until repaired"),
                );
            }
            SeqOutcome::RepeatOrStepBack { max } => {
                let what = if seq == max {
                    "a repeat"
                } else {
                    "a step back"
                };
                self.finding(
                    "sequence_gap",
                    format!("sequence {seq} is {what} (highest seen {max}); the projection is stale until repaired"),
                );
            }
        }
    }

    /// Verifier: a fact of a turn that already ended is a finding. True
    /// when the turn is still open.
    pub fn check_turn_open(&mut self) -> bool {
        let key = self.turn_str().unwrap_or_default();
        if self.books.turns.get(key).is_some_and(|t| t.ended) {
            self.finding(
                "work_after_turn_end",
                format!("{} arrived after turn '{key}' ended", self.fact.class),
            );
            return false;
        }
        true
    }

    /// Before a work fact: verifier check and idle -> running. False when
    /// the fact's turn already ended: it is kept (timeline, finding) and
    /// changes nothing else, so no ended message opens again (a producer
    /// back after the server ended its silent run).
    pub fn on_work(&mut self) -> bool {
        if !self.check_turn_open() {
            return false;
        }
        let status = self.state.runtime.status.as_str();
        let turn = self.turn_str();
        let new_turn = TERMINAL.contains(&status)
            && turn.is_some()
            && turn != self.state.runtime.turn_id.as_deref()
            && turn != self.state.runtime.run_id.as_deref();
        if matches!(status, "idle" | "accepted" | "unknown") || new_turn {
            self.set_status("running");
            self.adopt_ids();
        }
        true
    }

    /// `session.opened`: remember where the runtime takes controls. A later
    /// `session.opened` naming another URL replaces it; one naming none
    /// keeps it.
    pub fn on_session_opened(&mut self) {
        if let Some(url) = self.first_str(&["controlUrl"]) {
            self.books.control_url = Some(url);
        }
        self.on_session_updated();
    }

    /// `session.updated` (and `session.opened`): the session's title,
    /// pinned and archived flags, each only as a fact says it.
    pub fn on_session_updated(&mut self) {
        let title = self
            .first_str(&["title", "name"])
            .or_else(|| self.title())
            .map(|t| truncate(&t, 200));
        let flag = |k: &str| self.first_value(&[k]).and_then(|v| v.as_bool());
        let (pinned, archived) = (flag("pinned"), flag("archived"));
        if title.is_none() && pinned.is_none() && archived.is_none() {
            return;
        }
        let s = &mut self.state.session;
        if title.is_some() {
            s.title = title;
        }
        if pinned.is_some() {
            s.pinned = pinned;
        }
        if archived.is_some() {
            s.archived = archived;
        }
        s.updated_cursor = Some(self.cursor);
        self.touch("session", "session");
    }

    /// `tool.catalog.resolved`: the tools the runtime made available, by
    /// name (`payload.tools`: names, or objects with `name`), as sent.
    pub fn on_tool_catalog(&mut self) {
        let Some(serde_json::Value::Array(tools)) = self.first_value(&["tools", "catalog"]) else {
            return;
        };
        let replace = self.first_value(&["replace"]).and_then(|v| v.as_bool()) != Some(false);
        if replace {
            self.state.tool_catalog.clear();
        }
        for t in tools {
            let name = match &t {
                serde_json::Value::String(n) => Some(n.clone()),
                serde_json::Value::Object(o) => {
                    o.get("name").and_then(|v| v.as_str()).map(str::to_string)
                }
                _ => None,
            };
            if let Some(n) = name.filter(|n| !n.is_empty()) {
                let entry = if t.is_object() {
                    t
                } else {
                    serde_json::json!({"name": n})
                };
                self.state.tool_catalog.insert(n, entry);
            }
        }
        self.touch("toolCatalog", "toolCatalog");
    }

    /// `turn.submitted`.
    pub fn on_submitted(&mut self) {
        self.books.turns.shift_remove(&self.turn_key());
        self.set_status("accepted");
        self.runtime_mut().failure_category = None;
        self.runtime_mut().phase = None;
        self.adopt_ids();
        self.on_user_input();
    }

    /// `run.started`.
    pub fn on_run_started(&mut self) {
        self.books.turns.shift_remove(&self.turn_key());
        self.set_status("running");
        self.runtime_mut().failure_category = None;
        self.runtime_mut().retryable = None;
        self.adopt_ids();
    }

    /// `run.status`: the runtime's own status or phase word.
    pub fn on_run_status(&mut self) {
        let status = self.first_str(&["status", "runtimeStatus"]);
        let phase = self
            .first_str(&["phase"])
            .or_else(|| nonempty(self.fact.taxonomy.phase.as_deref()));
        if let Some(p) = &phase {
            self.runtime_mut().phase = Some(p.clone());
        }
        self.adopt_ids();
        let mapped = match (&status, &phase) {
            (Some(s), _) => RUNTIME_STATUSES.iter().find(|x| **x == s.as_str()).copied(),
            (None, Some(p)) => RUNTIME_STATUSES
                .iter()
                .find(|x| **x == p.as_str())
                .copied()
                .or_else(|| phase_status(p)),
            (None, None) => return,
        };
        match mapped {
            Some(s) => self.set_status(s),
            None => {
                self.set_status("unknown");
                let word = status.or(phase).unwrap_or_default();
                self.diag(
                    "unknown_runtime_status",
                    Severity::Warning,
                    format!("run.status '{word}' is not a known runtime status"),
                );
            }
        }
    }

    /// `run.finished | run.failed | run.canceled` (and fatal errors).
    pub fn on_run_end(&mut self) {
        let key = self.turn_key();
        if self.books.turns.get(&key).is_some_and(|t| t.ended) {
            self.finding(
                "repeated_terminal_event",
                format!(
                    "{} repeats the end of turn '{key}'; ignored",
                    self.fact.class
                ),
            );
            return;
        }
        if self.stale_interruption() {
            return;
        }
        self.books.turns.insert(key, TurnMark { ended: true });
        let word = self
            .first_str(&["outcome", "reason", "status"])
            .unwrap_or_default()
            .to_ascii_lowercase();
        let outcome = match self.fact.class.as_str() {
            "run.failed" => "failed",
            "run.canceled" => "cancelled",
            _ if self.first_value(&["fatal"]).and_then(|v| v.as_bool()) == Some(true) => "failed",
            _ if word.contains("interrupt") => "interrupted",
            _ if word.contains("cancel") => "cancelled",
            _ => "completed",
        };
        self.adopt_ids();
        self.set_status(outcome);
        self.runtime_mut().phase = None;
        let ends = match outcome {
            "failed" => {
                let cat = self
                    .first_str(&["failureCategory"])
                    .or_else(|| (self.fact.class != "run.failed").then(|| self.fact.class.clone()));
                self.runtime_mut().failure_category = cat;
                self.runtime_mut().retryable =
                    self.first_value(&["retryable"]).and_then(|v| v.as_bool());
                let msg = match &self.state.runtime.failure_category {
                    Some(c) => format!("run failed: {c}"),
                    None => "run failed".to_string(),
                };
                if self.fact.class == "run.failed" {
                    self.diag("run.failed", Severity::Error, msg.clone());
                }
                // The AI SDK's `error` chunk, so that a client (`useChat`)
                // ends in its error state, then the finish of the message.
                let error_text = self.first_str(&["error", "message"]).unwrap_or(msg);
                vec![
                    Chunk::Error { error_text },
                    Chunk::Finish {
                        finish_reason: Some(FinishReason::Error),
                    },
                ]
            }
            "interrupted" if self.fact.payload_str("endedBy") == Some("server") => {
                // A run its producer left (`idle::interruption`): said
                // where the operator looks, beside the message's end.
                let why = self
                    .first_str(&["reason"])
                    .unwrap_or_else(|| "the server ended a silent run".into());
                self.diag("run_idle_timeout", Severity::Warning, why.clone());
                vec![Chunk::Abort { reason: Some(why) }]
            }
            "cancelled" | "interrupted" => vec![Chunk::Abort {
                reason: Some(
                    self.first_str(&["reason"])
                        .unwrap_or_else(|| outcome.to_string()),
                ),
            }],
            _ => vec![Chunk::Finish {
                finish_reason: Some(FinishReason::Stop),
            }],
        };
        // Running tools end first, inside their messages, before the
        // messages themselves end.
        if matches!(outcome, "cancelled" | "interrupted" | "failed") {
            self.end_running_tools(outcome);
        }
        let mut ends = ends;
        if let Some(md) = self.closing_metadata() {
            ends.insert(0, md);
        }
        self.close_turn_messages(&ends);
        self.forget_ended_steps();
    }

    /// The server's end of a silent run (`idle::interruption`) that no
    /// longer follows the cursor it was decided after: something of the
    /// session came in between (on another node, in the instant of the
    /// decision), so the run was not silent; kept, and a finding.
    fn stale_interruption(&mut self) -> bool {
        if self.fact.payload_str("endedBy") != Some("server") {
            return false;
        }
        let after = self.first_value(&["silentAfter"]).and_then(|v| v.as_u64());
        match after {
            Some(a) if a + 1 != self.cursor => {
                self.finding(
                    "stale_interruption",
                    format!("the server's end of a silent run was decided after cursor {a}; events came since, so the run goes on"),
                );
                true
            }
            _ => false,
        }
    }

    /// The step marks of messages that ended (no try of theirs can come).
    fn forget_ended_steps(&mut self) {
        if self.books.steps.is_empty() {
            return;
        }
        let open: std::collections::HashSet<&str> = self
            .state
            .messages
            .iter()
            .filter(|m| !m.is_finished())
            .map(|m| &*m.id)
            .collect();
        let of = |k: &str| k.split('\u{1f}').next().unwrap_or_default().to_string();
        self.books
            .steps
            .retain(|k, _| open.contains(of(k).as_str()));
        self.books
            .last_step
            .retain(|k, _| open.contains(k.as_str()));
    }

    /// After an action resolution: back to running if nothing is pending.
    pub fn resume_if_unblocked(&mut self) {
        let pending = self.state.actions.values().any(|a| a.status == "pending");
        if !pending && matches!(self.state.runtime.status.as_str(), "waiting" | "blocked") {
            self.set_status("running");
        }
    }

    /// `action.required`: waiting (or blocked when the fact says so).
    pub fn on_wait(&mut self) {
        let s = if self.status() == Some("blocked") {
            "blocked"
        } else {
            "waiting"
        };
        self.set_status(s);
        self.adopt_ids();
    }

    /// `sandbox.blocked`.
    pub fn on_blocked(&mut self) {
        self.set_status("blocked");
    }

    /// Tools still running when their run ended without them (cancelled,
    /// interrupted or failed; tools of that turn/run's messages, all running
    /// tools if the fact names none): the surface says so, and the tool part
    /// ends as an error instead of waiting for an output forever.
    pub fn end_running_tools(&mut self, outcome: &str) {
        let turn = nonempty(self.fact.ids.turn_id.as_deref());
        let run = nonempty(self.fact.ids.run_id.as_deref());
        let in_scope = |msg: Option<&crate::projection::Message>| {
            if turn.is_none() && run.is_none() {
                return true;
            }
            msg.is_some_and(|m| {
                (m.turn_id.is_none() && m.run_id.is_none())
                    || (turn.is_some() && m.turn_id == turn)
                    || (run.is_some() && m.run_id == run)
            })
        };
        let ids: Vec<String> = self
            .state
            .tools
            .values()
            .filter(|t| t.status == "running")
            .filter(|t| in_scope(t.message_id.as_deref().and_then(|m| self.msg(m))))
            .map(|t| t.tool_call_id.clone())
            .collect();
        let cursor = self.cursor;
        let (status, text) = match outcome {
            "failed" => ("failed", "the run failed before the tool finished"),
            "interrupted" => ("cancelled", "interrupted"),
            _ => ("cancelled", "cancelled"),
        };
        for id in ids {
            let e = &mut self.state.tools[&id];
            e.status = status.into();
            e.error_text = Some(text.into());
            e.updated_cursor = cursor;
            if let Some((msg, state)) = self.tool_part(&id) {
                let open = matches!(
                    state,
                    ToolState::InputStreaming
                        | ToolState::InputAvailable
                        | ToolState::ApprovalRequested
                ) || (state == ToolState::OutputAvailable
                    && self.preliminary(&msg, &id));
                if open {
                    self.emit(
                        &msg,
                        Chunk::ToolOutputError {
                            tool_call_id: id.clone(),
                            error_text: text.into(),
                        },
                    );
                }
            }
            self.touch("tools", id);
        }
    }

    /// Whether the tool part of `tcid` in `msg` holds a preliminary output.
    fn preliminary(&self, msg: &str, tcid: &str) -> bool {
        let part = self
            .msg(msg)
            .and_then(|m| Some(&m.parts[m.tool_index(tcid)?]));
        matches!(
            part,
            Some(Part::Tool {
                preliminary: Some(true),
                ..
            })
        )
    }
}
