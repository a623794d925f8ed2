//! Step attempts (issue 35 item 4): a step that is tried again replaces its
//! earlier try. A fact with a `stepId` belongs to that step of its message;
//! its `attemptId` names the try. Each step of a message starts at a part
//! boundary (the open text ends), so a step's output is the parts from
//! where it started to the message's end. When a fact of the step comes
//! with another `attemptId`, the earlier try's parts go (and the tools they
//! showed end as `superseded`): the one direct part change besides
//! reconciliation, announced by a transient `data-superseded` chunk
//! (`{messageId, fromPart, stepId, attemptId, previousAttemptId, parts}`)
//! that a client applies by keeping the parts before `fromPart` (`parts`:
//! those parts, for a client that re-sends the message). A client that
//! joins later never sees the earlier try: the snapshot and a message's
//! replay hold only what stands.

use serde_json::json;

use super::chunk::Chunk;
use super::reducer::{nonempty, Reducer};
use super::ui_message::{Message, Part, Role};

/// The message a `data-superseded` announcement (its `data`) says stands:
/// message `mid` of `role` with the announcement's `parts`, for a view
/// that re-sends the message (AG-UI, Umo). `None` if the parts do not read.
pub fn superseded_message(mid: &str, role: Role, data: &serde_json::Value) -> Option<Message> {
    let parts: Vec<Part> = serde_json::from_value(data.get("parts")?.clone()).ok()?;
    let mut m = Message::new(mid, role, 0);
    m.parts = parts;
    Some(m)
}

/// A fact's step, seen before its handler ran.
pub struct StepWatch {
    step: String,
    attempt: String,
    /// The message the fact went to before its handler, and its length then.
    before: Option<(String, usize)>,
}

fn step_key(msg: &str, step: &str) -> String {
    format!("{msg}\u{1f}{step}")
}

impl Reducer<'_> {
    /// Before a work fact's handler: a new try of a known step replaces the
    /// earlier one; a new step begins at a part boundary.
    pub fn before_step(&mut self) -> Option<StepWatch> {
        let step = nonempty(self.fact.ids.step_id.as_deref())?;
        let attempt = nonempty(self.fact.ids.attempt_id.as_deref()).unwrap_or_default();
        let Some(msg) = self.open_assistant().map(|m| m.to_string()) else {
            return Some(StepWatch {
                step,
                attempt,
                before: None,
            });
        };
        let key = step_key(&msg, &step);
        let (previous, first_part) = match self.books.steps.get(&key) {
            // More of the step's current try: the common case, nothing to do.
            Some((a, _)) if *a == attempt => return None,
            Some((a, first_part)) => (a.clone(), *first_part),
            None => {
                if self.books.last_step.get(&msg).is_some_and(|s| *s != step) {
                    self.end_open(&msg);
                }
                let len = self.msg(&msg).map_or(0, |m| m.parts.len());
                return Some(StepWatch {
                    step,
                    attempt,
                    before: Some((msg, len)),
                });
            }
        };
        self.supersede(&msg, &step, &previous, first_part, &attempt);
        self.books.steps.insert(key, (attempt, first_part));
        None
    }

    /// After the handler: where the new step started.
    pub fn after_step(&mut self, w: StepWatch) {
        let Some(msg) = self.open_assistant().map(|m| m.to_string()) else {
            return;
        };
        let first_part = match &w.before {
            Some((m, len)) if *m == msg => *len,
            _ => 0,
        };
        self.books
            .steps
            .insert(step_key(&msg, &w.step), (w.attempt, first_part));
        self.books.last_step.insert(msg, w.step);
    }

    /// Drop the earlier try (`previous`) of `step` from `msg`: its parts
    /// from `first_part` on, the tools they showed ended as superseded.
    fn supersede(
        &mut self,
        msg: &str,
        step: &str,
        previous: &str,
        first_part: usize,
        attempt: &str,
    ) {
        self.end_open(msg);
        let Some(m) = self.state.messages.iter_mut().rev().find(|m| *m.id == *msg) else {
            return;
        };
        let gone: Vec<String> = m
            .parts
            .iter()
            .skip(first_part)
            .filter_map(|p| match p {
                Part::Tool { .. } => p.tool_call_id().map(str::to_string),
                _ => None,
            })
            .collect();
        m.truncate_parts(first_part);
        // The parts that stand, for the views that cannot drop parts
        // themselves (AG-UI and Umo re-send the message).
        let kept = serde_json::to_value(&m.parts).unwrap_or_default();
        let cursor = self.cursor;
        for id in gone {
            if let Some(t) = self.state.tools.get_mut(&id) {
                if t.status == "running" {
                    t.status = "cancelled".into();
                    t.error_text = Some("superseded by a new attempt".into());
                }
                t.updated_cursor = cursor;
                self.touch("tools", id);
            }
        }
        let c = Chunk::Data {
            name: "superseded".into(),
            id: Some(format!("{msg}:{step}")),
            data: std::sync::Arc::new(json!({
                "messageId": msg,
                "fromPart": first_part,
                "stepId": step,
                "attemptId": attempt,
                "previousAttemptId": previous,
                "parts": kept,
            })),
            transient: true,
        };
        self.emit(msg, c);
    }
}
