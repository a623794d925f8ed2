//! Unit tests of the session surfaces, runtime lifecycle, sequence
//! tracking, verifier, checkpoints, determinism and bounds (the harness is in
//! `tests.rs`).

use serde_json::json;

use super::tests::{chunk_types, texts, Run, F};
use super::*;

#[test]
fn action_stays_pending_until_resolved() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("May I?")),
    );
    r.apply(
        F::new("e2", "action.required")
            .turn("t")
            .action("a1")
            .status("blocked")
            .p("actionType", json!("tool_approval")),
    );
    let s = r.state();
    assert_eq!(s["runtime"]["status"], "blocked");
    assert_eq!(s["runtime"]["pendingActions"], 1);
    assert_eq!(s["actions"]["a1"]["status"], "pending");
    assert_eq!(r.part_types("msg-2"), ["text", "data-action-request"]);
    // Nothing but action.resolved resolves it: not a snapshot, not the run end.
    r.apply(F::new("e3", "snapshot.updated").turn("t"));
    assert_eq!(r.state()["actions"]["a1"]["status"], "pending");
    let a = r.apply(
        F::new("e4", "action.resolved")
            .turn("t")
            .action("a1")
            .p("decision", json!("approved")),
    );
    let s = r.state();
    assert_eq!(s["actions"]["a1"]["status"], "resolved");
    assert_eq!(s["actions"]["a1"]["decision"], "approved");
    assert_eq!(s["runtime"]["status"], "running");
    assert_eq!(s["runtime"]["pendingActions"], 0);
    let part = &s["messages"][0]["parts"][1];
    assert_eq!(part["data"]["status"], "resolved", "replaced in place");
    assert_eq!(r.part_types("msg-2"), ["text", "data-action-request"]);
    assert!(a
        .chunks
        .iter()
        .any(|c| c.message_id.is_none() && c.chunk.type_name() == "data-actions"));
    // Waiting variant, and resolution without request.
    r.apply(F::new("e5", "action.required").turn("t").action("a2"));
    assert_eq!(r.state()["runtime"]["status"], "waiting");
    r.apply(F::new("e6", "action.resolved").turn("t").action("zz"));
    assert!(r
        .findings()
        .contains(&"action_resolved_without_request".to_string()));
    assert_eq!(r.state()["actions"]["zz"]["status"], "resolved");
    r.assert_replay();
}

#[test]
fn worker_notification_is_never_a_user_message() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "worker.notification")
            .turn("t")
            .ids(|i| i.worker_id = Some("w1".into()))
            .p("role", json!("user"))
            .p("text", json!("worker finished: 3 files")),
    );
    let s = r.state();
    assert_eq!(s["messages"], json!([]));
    let n = &s["team"]["notifications"][0];
    assert_eq!(n["notificationId"], "e1");
    assert_eq!(n["agentId"], "w1");
    assert_eq!(n["sourceRole"], "user");
    r.assert_replay();
}

#[test]
fn teammates_get_their_own_messages() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("lead")),
    );
    r.apply(
        F::new("e2", "text.delta")
            .turn("t")
            .agent("researcher")
            .p("delta", json!("mate")),
    );
    r.apply(
        F::new("e3", "text.delta")
            .turn("t")
            .p("delta", json!(" more")),
    );
    let ms = r.p.messages();
    assert_eq!(ms.len(), 2);
    assert_eq!(ms[0].agent_id, None);
    assert_eq!(ms[1].agent_id.as_deref(), Some("researcher"));
    assert_eq!(ms[0].text(), "lead more");
    assert_eq!(ms[1].text(), "mate");
    r.apply(F::new("e4", "run.finished").turn("t"));
    assert!(r
        .p
        .messages()
        .iter()
        .all(|m| m.status == ui_message::MessageStatus::Complete));
    r.assert_replay();
}

#[test]
fn reasoning_summary_collapsed_raw_only_when_enabled() {
    let mut r = Run::new();
    let a = r.apply(
        F::new("e1", "reasoning.delta")
            .turn("t")
            .p("delta", json!("secret thought")),
    );
    assert!(
        chunk_types(&a).is_empty(),
        "raw reasoning is not projected by default"
    );
    assert_eq!(r.state()["runtime"]["phase"], "reasoning");
    r.apply(F::new("e2", "text.delta").turn("t").p("delta", json!("x")));
    r.apply(
        F::new("e3", "reasoning.summary")
            .turn("t")
            .p("summary", json!("Checked docs")),
    );
    assert_eq!(r.part_types("msg-2"), ["text", "reasoning"]);
    let s = r.state();
    assert_eq!(
        s["messages"][0]["parts"][1],
        json!({"type":"reasoning","id":"msg-2-r1","text":"Checked docs","state":"done"})
    );
    assert!(!s.to_string().contains("secret thought"));
    r.assert_replay();

    let cfg = ProjectionConfig {
        raw_reasoning: true,
        ..ProjectionConfig::default()
    };
    let mut r = Run::with(cfg);
    r.apply(
        F::new("e1", "reasoning.delta")
            .turn("t")
            .p("delta", json!("Check")),
    );
    r.apply(
        F::new("e2", "reasoning.delta")
            .turn("t")
            .p("delta", json!("ing")),
    );
    let a = r.apply(
        F::new("e3", "reasoning.summary")
            .turn("t")
            .p("summary", json!("Checking")),
    );
    assert_eq!(
        chunk_types(&a),
        ["reasoning-end"],
        "summary reconciles, no duplicate"
    );
    r.apply(
        F::new("e4", "text.delta")
            .turn("t")
            .p("delta", json!("Answer")),
    );
    assert_eq!(r.part_types("msg-1"), ["reasoning", "text"]);
    r.assert_replay();
}

#[test]
fn unknown_class_is_timeline_and_diagnostic_only() {
    let mut r = Run::new();
    let a = r.apply(
        F::new("e1", "custom.thing")
            .turn("t")
            .p("text", json!("hi")),
    );
    let s = r.state();
    assert_eq!(s["timeline"][0]["class"], "custom.thing");
    assert_eq!(s["diagnostics"][0]["code"], "unknown_event_class");
    assert_eq!(s["diagnostics"][0]["severity"], "info");
    assert_eq!(s["messages"], json!([]));
    assert_eq!(s["runtime"]["status"], "idle");
    assert!(a.chunks.iter().all(|c| c.message_id.is_none()));
    assert!(!a
        .chunks
        .iter()
        .any(|c| c.chunk.type_name() == "data-timeline"));
}

#[test]
fn sequence_gap_goes_stale_until_filled() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .seq(1)
            .p("delta", json!("a")),
    );
    let a = r.apply(
        F::new("e3", "text.delta")
            .turn("t")
            .seq(3)
            .p("delta", json!("c")),
    );
    assert_eq!(a.findings[0].code, "sequence_gap");
    assert_eq!(r.state()["runtime"]["stale"], true);
    assert!(r.diag_codes().contains(&"sequence_gap".to_string()));
    let a = r.apply(
        F::new("e2", "text.delta")
            .turn("t")
            .seq(2)
            .p("delta", json!("b")),
    );
    assert!(a.findings.is_empty());
    assert_eq!(r.state()["runtime"]["stale"], false);
    assert_eq!(texts(&r, "msg-1"), ["acb"], "applied in arrival order");
    r.assert_replay();
}

#[test]
fn sequence_gap_repaired_by_snapshot() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .seq(1)
            .p("delta", json!("a")),
    );
    r.apply(
        F::new("e5", "text.delta")
            .turn("t")
            .seq(5)
            .p("delta", json!("e")),
    );
    assert_eq!(r.state()["runtime"]["stale"], true);
    r.apply(F::new("e6", "snapshot.updated").turn("t").seq(6));
    assert_eq!(r.state()["runtime"]["stale"], false);
}

#[test]
fn sequence_repeat_is_a_finding() {
    let mut r = Run::new();
    r.apply(F::new("e1", "run.started").turn("t").seq(1));
    r.apply(
        F::new("e2", "text.delta")
            .turn("t")
            .seq(2)
            .p("delta", json!("a")),
    );
    let a = r.apply(
        F::new("e2b", "text.delta")
            .turn("t")
            .seq(2)
            .p("delta", json!("b")),
    );
    assert_eq!(a.findings[0].code, "sequence_gap");
    assert!(a.findings[0].message.contains("repeat"));
    assert_eq!(r.state()["runtime"]["stale"], true);
    r.apply(F::new("e3", "messages.snapshot").turn("t"));
    assert_eq!(r.state()["runtime"]["stale"], false);
}

#[test]
fn verifier_flags_work_after_end_and_repeated_terminal() {
    let mut r = Run::new();
    r.apply(F::new("e1", "run.started").turn("t"));
    r.apply(F::new("e2", "run.finished").turn("t"));
    r.apply(F::new("e3", "run.finished").turn("t"));
    r.apply(F::new("e4", "tool.started").turn("t").tool("late"));
    assert_eq!(
        r.findings(),
        ["repeated_terminal_event", "work_after_turn_end"]
    );
    assert_eq!(r.state()["runtime"]["status"], "completed");
    r.assert_replay();
}

#[test]
fn run_end_finishes_fails_or_aborts_messages() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "turn.submitted")
            .turn("t1")
            .p("text", json!("hi")),
    );
    assert_eq!(r.state()["runtime"]["status"], "accepted");
    r.apply(F::new("e2", "text.delta").turn("t1").p("delta", json!("x")));
    r.apply(
        F::new("e3", "run.failed")
            .turn("t1")
            .p("failureCategory", json!("model_error")),
    );
    let s = r.state();
    assert_eq!(s["messages"][0]["role"], "user");
    assert_eq!(s["messages"][0]["id"], "user-t1");
    assert_eq!(s["messages"][0]["parts"][0]["text"], "hi");
    assert_eq!(s["messages"][1]["status"], "failed");
    assert_eq!(s["messages"][1]["parts"][0]["state"], "done");
    assert_eq!(s["runtime"]["status"], "failed");
    assert_eq!(s["runtime"]["failureCategory"], "model_error");
    r.apply(F::new("e4", "text.delta").turn("t2").p("delta", json!("y")));
    assert_eq!(
        r.state()["runtime"]["status"],
        "running",
        "a new turn's work"
    );
    r.apply(F::new("e5", "tool.started").turn("t2").tool("c"));
    r.apply(F::new("e5b", "tool.started").turn("t3").tool("other"));
    r.apply(
        F::new("e6", "run.finished")
            .turn("t2")
            .p("outcome", json!("cancelled")),
    );
    let s = r.state();
    assert_eq!(s["runtime"]["status"], "cancelled");
    assert_eq!(s["messages"][2]["status"], "aborted");
    assert_eq!(s["tools"]["c"]["status"], "cancelled");
    assert_eq!(
        s["tools"]["other"]["status"], "running",
        "another turn's tool"
    );
    r.assert_replay();
}

#[test]
fn runtime_errors_are_refs_not_text() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Working")),
    );
    r.apply(
        F::new("e2", "runtime.error")
            .turn("t")
            .p("message", json!("stack trace here")),
    );
    let s = r.state();
    assert_eq!(r.part_types("msg-1"), ["text", "data-diagnostic-ref"]);
    assert_eq!(
        s["messages"][0]["parts"][1]["data"]["code"],
        "runtime.error"
    );
    assert_eq!(texts(&r, "msg-1"), ["Working"]);
    assert_eq!(s["runtime"]["status"], "running", "not fatal");
    r.apply(
        F::new("e3", "model.failed")
            .turn("t")
            .p("fatal", json!(true)),
    );
    assert_eq!(r.state()["runtime"]["status"], "failed");
    r.assert_replay();
}

#[test]
fn run_status_words() {
    let mut r = Run::new();
    r.apply(F::new("e1", "run.status").p("status", json!("routing")));
    assert_eq!(r.state()["runtime"]["status"], "routing");
    r.apply(F::new("e2", "run.status").p("phase", json!("acting")));
    assert_eq!(r.state()["runtime"]["status"], "running");
    assert_eq!(r.state()["runtime"]["phase"], "acting");
    r.apply(F::new("e3", "run.status").p("status", json!("dancing")));
    assert_eq!(r.state()["runtime"]["status"], "unknown");
    assert!(r
        .diag_codes()
        .contains(&"unknown_runtime_status".to_string()));
}

#[test]
fn agents_lineage_and_team() {
    let mut r = Run::new();
    r.apply(F::new("e1", "subagent.started").ids(|i| {
        i.subagent_id = Some("s1".into());
        i.task_id = Some("task1".into());
    }));
    r.apply(F::new("e2", "agent.spawned").agent("orphan"));
    let s = r.state();
    assert_eq!(s["agents"]["s1"]["lineage"], "known");
    assert_eq!(s["agents"]["s1"]["status"], "running");
    assert_eq!(s["agents"]["orphan"]["lineage"], "unavailable");
    assert!(r.diag_codes().contains(&"missing_lineage".to_string()));
    assert_eq!(s["team"]["roster"], json!(["s1", "orphan"]));
    assert_eq!(
        s["team"]["edges"][0],
        json!({"from": "task:task1", "to": "s1", "kind": "delegation"})
    );
}

fn scripted() -> Vec<F> {
    vec![
        F::new("e1", "turn.submitted")
            .turn("t")
            .seq(1)
            .p("text", json!("fix it")),
        F::new("e2", "run.started").turn("t").seq(2),
        F::new("e3", "text.delta")
            .turn("t")
            .seq(3)
            .p("delta", json!("Looking")),
        F::new("e4", "tool.started")
            .turn("t")
            .seq(4)
            .tool("c1")
            .p("toolName", json!("grep")),
        F::new("e5", "tool.result")
            .turn("t")
            .seq(6)
            .tool("c1")
            .p("summary", json!("2 hits")),
        F::new("e6", "artifact.changed")
            .turn("t")
            .seq(7)
            .ids(|i| i.artifact_id = Some("a1".into())),
        F::new("e7", "text.delta")
            .turn("t")
            .seq(8)
            .p("delta", json!("Done")),
        F::new("e8", "text.final")
            .turn("t")
            .seq(9)
            .p("text", json!("LookingDone!")),
        F::new("e9", "run.finished").turn("t").seq(10),
    ]
}

#[test]
fn checkpoint_round_trip_continues_identically() {
    let mut a = Run::new();
    let mut facts = scripted();
    let tail = facts.split_off(5);
    a.all(facts);
    let bytes = serde_json::to_vec(&a.p).unwrap();
    let restored: Projection = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(restored, a.p);
    let mut b = Run {
        p: restored,
        cfg: a.cfg.clone(),
        log: Vec::new(),
    };
    for f in tail {
        let fb = F(f.0.clone());
        assert_eq!(a.apply(f), b.apply(fb));
    }
    assert_eq!(a.p, b.p);
    assert_eq!(a.state(), b.state());
    assert!(
        !a.state().to_string().contains("partIds"),
        "bookkeeping stays private"
    );
}

#[test]
fn deterministic_and_replayable() {
    let mut a = Run::new();
    let mut b = Run::new();
    a.all(scripted());
    b.all(scripted());
    assert_eq!(a.log, b.log);
    assert_eq!(
        serde_json::to_string(&a.state()).unwrap(),
        serde_json::to_string(&b.state()).unwrap()
    );
    a.assert_replay();
    let s = a.state();
    assert_eq!(s["messages"][1]["parts"].as_array().unwrap().len(), 4);
    assert_eq!(s["artifacts"]["a1"]["messageId"], "msg-3");
    assert_eq!(s["timeline"].as_array().unwrap().len(), 9);
    assert!(a.findings().contains(&"sequence_gap".to_string()));
}

#[test]
fn bounds_are_respected() {
    let cfg = ProjectionConfig {
        raw_reasoning: false,
        max_messages: 3,
        max_timeline: 5,
        max_diagnostics: 4,
        max_surface_entries: 6,
        snapshot_messages: 50,
    };
    let mut r = Run::with(cfg);
    for i in 0..40 {
        let t = format!("t{i}");
        r.apply(
            F::new(&format!("a{i}"), "text.delta")
                .turn(&t)
                .p("delta", json!("x")),
        );
        r.apply(
            F::new(&format!("b{i}"), "tool.failed")
                .turn(&t)
                .tool(&format!("c{i}")),
        );
        // Only these carry a title and taxonomy: a timeline entry refilled
        // from one of them must not keep them.
        let mut c = F::new(&format!("c{i}"), "bogus.class");
        c.0.title = Some(format!("title {i}"));
        c.0.taxonomy.owner = Some("runtime".into());
        r.apply(c);
        r.apply(
            F::new(&format!("d{i}"), "artifact.changed")
                .ids(|x| x.artifact_id = Some(format!("a{i}"))),
        );
    }
    let s = r.p.state();
    assert_eq!(s.messages.len(), 3);
    assert_eq!(s.timeline.len(), 5);
    // The newest five facts, oldest first, each entry its own fact's.
    let ids: Vec<&str> = s.timeline.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids, ["d38", "a39", "b39", "c39", "d39"]);
    assert!(s
        .timeline
        .iter()
        .zip(s.timeline.iter().skip(1))
        .all(|(a, b)| a.cursor + 1 == b.cursor));
    for e in &s.timeline {
        let titled = e.event_id.starts_with('c');
        assert_eq!(e.title.is_some(), titled, "{e:?}");
        assert_eq!(e.taxonomy.is_some(), titled, "{e:?}");
        // Known classes and an unknown one refill each other's entries.
        let class = match &e.event_id[..1] {
            "a" => "text.delta",
            "b" => "tool.failed",
            "c" => "bogus.class",
            _ => "artifact.changed",
        };
        assert_eq!((&*e.class, &*e.source_class), (class, class), "{e:?}");
    }
    assert_eq!(s.timeline[3].title.as_deref(), Some("title 39"));
    assert_eq!(s.diagnostics.len(), 4);
    assert_eq!(s.tools.len(), 6);
    assert_eq!(s.artifacts.len(), 6);
    assert!(s.tools.contains_key("c39"));
    r.assert_replay();
}

#[test]
fn artifact_and_evidence_titles_prefer_their_own_names() {
    let mut r = Run::new();
    let mut f = F::new("e1", "artifact.changed")
        .turn("t")
        .ids(|i| i.artifact_id = Some("a1".into()))
        .p("title", json!("fix.diff"));
    f.0.title = Some("Artifact changed".into());
    r.apply(f);
    let mut g = F::new("e2", "evidence.changed")
        .turn("t")
        .ids(|i| i.evidence_id = Some("v1".into()));
    g.0.title = Some("Source checked".into());
    r.apply(g);
    let s = r.state();
    assert_eq!(
        s["artifacts"]["a1"]["title"], "fix.diff",
        "payload name beats the event title"
    );
    assert_eq!(
        s["evidence"]["v1"]["title"], "Source checked",
        "event title as a fallback"
    );
    r.assert_replay();
}

#[test]
fn control_url_is_internal_and_checkpointed() {
    let mut r = Run::new();
    r.apply(F::new("e0", "session.opened"));
    assert_eq!(r.p.control_url(), None);
    let url = "http://runtime.internal:9000/controls";
    // `session.created` is an alias of `session.opened`.
    r.apply(F::new("e1", "session.created").p("controlUrl", json!(url)));
    assert_eq!(r.p.control_url(), Some(url));
    r.apply(F::new("e2", "session.opened"));
    assert_eq!(r.p.control_url(), Some(url), "kept when not named again");
    assert!(
        !r.state().to_string().contains("runtime.internal"),
        "the URL never reaches the snapshot"
    );
    let restored: Projection = serde_json::from_slice(&serde_json::to_vec(&r.p).unwrap()).unwrap();
    assert_eq!(restored.control_url(), Some(url));
    r.apply(F::new("e3", "session.opened").p("controlUrl", json!("http://b.test/c")));
    assert_eq!(r.p.control_url(), Some("http://b.test/c"));
}

#[test]
fn a_zero_timeline_bound_keeps_no_entries() {
    let mut r = Run::with(ProjectionConfig {
        max_timeline: 0,
        ..ProjectionConfig::default()
    });
    for i in 0..3 {
        r.apply(
            F::new(&format!("e{i}"), "text.delta")
                .turn("t")
                .p("delta", json!("x")),
        );
    }
    assert!(r.p.state().timeline.is_empty());
    assert_eq!(r.p.state().messages.len(), 1, "the facts still project");
}
