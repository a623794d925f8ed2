//! Class names: the alias table that maps both vocabularies (Lime seed 002,
//! Agent UI seed 004) onto one canonical class, the retired names, and the
//! kind/status derivation from a class.
//!
//! Canonical names follow the Agent UI vocabulary where both name the same
//! fact (`text.delta`, `run.finished`); Lime-only families keep their names.
//! The class list is open: an unknown class stays as sent.

/// `(alias, canonical)`: every alias accepted on the wire.
pub const ALIASES: &[(&str, &str)] = &[
    // session
    ("session.created", "session.opened"),
    // turn / run lifecycle (Lime turn.* is the Agent UI run.*)
    ("turn.started", "run.started"),
    ("turn.completed", "run.finished"),
    ("turn.failed", "run.failed"),
    ("turn.canceled", "run.canceled"),
    ("run.cancelled", "run.canceled"),
    ("run.completed", "run.finished"),
    // model output
    ("model.delta", "text.delta"),
    ("message.delta", "text.delta"),
    ("model.completed", "text.final"),
    ("message.completed", "text.final"),
    ("thinking.delta", "reasoning.delta"),
    ("thinking.summary", "reasoning.summary"),
    // artifacts
    ("artifact.snapshot", "artifact.changed"),
    // team
    ("subagent.started", "agent.spawned"),
    ("subagent.completed", "agent.completed"),
    ("subagent.changed", "agent.changed"),
    ("review.verdict", "review.completed"),
    // diagnostics
    ("runtime.warning", "diagnostic.changed"),
];

/// End-of-turn names that were retired; they are `schema_mismatch`.
pub const RETIRED: &[&str] = &[
    "done",
    "final_done",
    "cancelled",
    "turn.done",
    "turn.final_done",
    "turn.cancelled",
];

/// The class of [`crate::event::Fact::producer_recorded`].
pub const PRODUCER_RECORDED: &str = "producer.recorded";

/// Classes the reducer knows (canonical names). Anything else is kept as an
/// unknown class: stored, put on the timeline, and given a diagnostic.
pub const KNOWN: &[&str] = &[
    "session.opened",
    // An idempotent producer's append whose events were all already in the
    // log: it records the producer (`Fact::producer`) and nothing else.
    PRODUCER_RECORDED,
    // A producer's own UI message chunk, passed into its message (file,
    // data-*, message-metadata; see `event::ui_stream`).
    "ui.chunk",
    "session.hydrated",
    "session.updated",
    "session.closed",
    "turn.submitted",
    "run.started",
    "run.status",
    "run.finished",
    "run.failed",
    "run.canceled",
    "model.requested",
    "model.failed",
    "plan.delta",
    "plan.final",
    "text.delta",
    "text.final",
    "reasoning.delta",
    "reasoning.summary",
    "tool.started",
    "tool.args",
    "tool.args.delta",
    "tool.progress",
    "tool.output.delta",
    "tool.result",
    "tool.failed",
    "tool.changed",
    "tool.catalog.resolved",
    "action.required",
    "action.resolved",
    "queue.changed",
    "task.created",
    "task.updated",
    "task.changed",
    "task.completed",
    "task.failed",
    "agent.spawned",
    "agent.changed",
    "agent.completed",
    "agent.handoff",
    "team.changed",
    "worker.started",
    "worker.completed",
    "worker.notification",
    "handoff.requested",
    "handoff.accepted",
    "handoff.completed",
    "review.requested",
    "review.completed",
    "channel.opened",
    "channel.message",
    "channel.closed",
    "context.resolved",
    "context.changed",
    "context.compaction.started",
    "context.compaction.completed",
    "permission.evaluated",
    "permission.requested",
    "permission.resolved",
    "permission.changed",
    "sandbox.applied",
    "sandbox.violation",
    "sandbox.blocked",
    "artifact.created",
    "artifact.updated",
    "artifact.preview.ready",
    "artifact.version.created",
    "artifact.diff.ready",
    "artifact.export.started",
    "artifact.export.completed",
    "artifact.failed",
    "artifact.deleted",
    "artifact.changed",
    "evidence.changed",
    "file.read",
    "file.changed",
    "patch.started",
    "patch.applied",
    "patch.failed",
    "command.started",
    "command.output",
    "command.exited",
    "test.started",
    "test.completed",
    "state.snapshot",
    "state.delta",
    "messages.snapshot",
    "snapshot.updated",
    "diagnostic.changed",
    "metric.changed",
    "runtime.error",
];

/// Map a class name as sent to its canonical name.
pub fn canonical(class: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == class)
        .map(|(_, c)| *c)
        .unwrap_or(class)
}

/// True when the class is a retired end-of-turn name.
pub fn is_retired(class: &str) -> bool {
    RETIRED.contains(&class)
}

/// True when the reducer has rules for this canonical class.
pub fn is_known(canonical: &str) -> bool {
    known(canonical).is_some()
}

/// The reducer's own name for this canonical class, if it has rules for it.
/// Being `'static`, it is shared rather than copied where the fact is kept.
/// This runs for every fact, and `KNOWN` is long: facts come in runs of one
/// class (text deltas), so the thread's last answer is tried first, then a
/// set lookup.
pub fn known(canonical: &str) -> Option<&'static str> {
    type Set = std::collections::HashSet<&'static str, foldhash::fast::RandomState>;
    static SET: std::sync::LazyLock<Set> =
        std::sync::LazyLock::new(|| KNOWN.iter().copied().collect());
    thread_local!(static LAST: std::cell::Cell<&'static str> = const { std::cell::Cell::new("") });
    let last = LAST.get();
    if last == canonical && !last.is_empty() {
        return Some(last);
    }
    let k = SET.get(canonical).copied()?;
    LAST.set(k);
    Some(k)
}

/// Status derived from the class suffix when the event carries none (seed 002).
pub fn derived_status(class: &str) -> Option<&'static str> {
    let suffix = class.rsplit('.').next()?;
    Some(match suffix {
        "failed" => "failed",
        "completed" | "result" | "resolved" | "finished" | "final" => "completed",
        "required" | "blocked" => "blocked",
        "started" | "delta" | "progress" => "running",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_map_to_known_canonical_names() {
        for (alias, canon) in ALIASES {
            assert_eq!(canonical(alias), *canon);
            assert!(is_known(canon), "{canon} must be known");
            assert!(!is_known(alias), "{alias} must not be canonical");
        }
        assert_eq!(canonical("some.custom"), "some.custom");
    }

    #[test]
    fn a_run_of_one_class_is_answered_alike() {
        for class in KNOWN {
            assert_eq!(known(class), Some(*class));
            assert_eq!(known(class), Some(*class), "again");
            assert_eq!(known(&format!("{class}x")), None);
            assert_eq!(known(""), None);
        }
    }

    #[test]
    fn retired_names() {
        assert!(is_retired("turn.cancelled"));
        assert!(!is_retired("turn.canceled"));
    }

    #[test]
    fn status_from_suffix() {
        assert_eq!(derived_status("tool.failed"), Some("failed"));
        assert_eq!(derived_status("action.resolved"), Some("completed"));
        assert_eq!(derived_status("action.required"), Some("blocked"));
        assert_eq!(derived_status("text.delta"), Some("running"));
        assert_eq!(derived_status("queue.changed"), None);
    }
}
