//! Unit tests of issue 35 item 4: the rule that ends a silent run, and the
//! end it makes (the same as any interrupted run's, with a diagnostic), and
//! a late fact of that run that reopens nothing.

use serde_json::json;

use super::idle::{interruption, silent, Silent, Timeouts};
use super::tests::{Run, F};
use crate::event::{normalize, Limits};

const T: Timeouts = Timeouts {
    run_ms: 300_000,
    tool_ms: 3_600_000,
};

fn working() -> Run {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "run.started")
            .turn("t")
            .ids(|i| i.run_id = Some("r".into())),
    );
    r.apply(
        F::new("e2", "text.delta")
            .turn("t")
            .p("delta", json!("Working on ")),
    );
    r
}

#[test]
fn a_working_run_is_silent_only_past_its_limit() {
    let r = working();
    let st = r.p.state();
    assert_eq!(silent(st, 1_000, 300_999, T), None);
    let s = silent(st, 1_000, 301_000, T).expect("silent at the limit");
    assert_eq!(
        s,
        Silent {
            run_id: Some("r".into()),
            turn_id: Some("t".into()),
            silent_ms: 300_000,
            limit_ms: 300_000,
            tool_running: false,
        }
    );
    // Off.
    assert_eq!(
        silent(
            st,
            0,
            u64::MAX,
            Timeouts {
                run_ms: 0,
                tool_ms: 0
            }
        ),
        None
    );
}

#[test]
fn waiting_for_a_person_or_a_running_tool_is_not_silence() {
    // A pending action: never ended, however long.
    let mut r = working();
    r.apply(F::new("e3", "action.required").turn("t").action("a1"));
    assert_eq!(silent(r.p.state(), 0, u64::MAX / 2, T), None);
    // Resolved: working again, and silent past the limit.
    r.apply(
        F::new("e4", "action.resolved")
            .turn("t")
            .action("a1")
            .p("decision", json!("approved")),
    );
    assert!(silent(r.p.state(), 0, 300_000, T).is_some());
    // A running tool: the longer limit.
    let mut r = working();
    r.apply(
        F::new("e3", "tool.started")
            .turn("t")
            .tool("c1")
            .p("toolName", json!("cargo_test")),
    );
    assert_eq!(silent(r.p.state(), 0, 3_599_999, T), None);
    let s = silent(r.p.state(), 0, 3_600_000, T).expect("past the tool limit");
    assert!(s.tool_running);
    // Ended runs are not silent.
    let mut r = working();
    r.apply(F::new("e3", "run.finished").turn("t"));
    assert_eq!(silent(r.p.state(), 0, u64::MAX / 2, T), None);
}

#[test]
fn the_interruption_ends_every_open_thing_once_and_a_late_fact_reopens_nothing() {
    let mut r = working();
    r.apply(
        F::new("e3", "reasoning.summary")
            .turn("t")
            .p("summary", json!("thinking")),
    );
    r.apply(
        F::new("e4", "text.delta")
            .turn("t")
            .p("delta", json!("more")),
    );
    r.apply(
        F::new("e5", "tool.started")
            .turn("t")
            .tool("c1")
            .p("toolName", json!("shell")),
    );
    let s = silent(r.p.state(), 0, 3_600_000, T).expect("silent");
    let event = interruption(&s, r.p.cursor());
    assert_eq!(event["id"], format!("server:idle:r:{}", r.p.cursor()));
    let fact = normalize(event, &Limits::default())
        .expect("it normalises")
        .fact;
    r.apply(super::tests::F(fact));
    let st = r.state();
    assert_eq!(st["runtime"]["status"], "interrupted");
    let tool = &st["tools"]["c1"];
    assert_eq!(
        (tool["status"].as_str(), tool["errorText"].as_str()),
        (Some("cancelled"), Some("interrupted"))
    );
    let m = r.p.messages().last().expect("the answer");
    let id = m.id.to_string();
    let parts = serde_json::to_value(&m.parts).unwrap();
    let last = r.log.last().unwrap();
    let types: Vec<String> = last
        .chunks
        .iter()
        .map(|c| {
            serde_json::to_value(&c.chunk).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        types.contains(&"tool-output-error".to_string()),
        "{types:?}"
    );
    assert!(types.contains(&"abort".to_string()), "{types:?}");
    assert!(r.diag_codes().contains(&"run_idle_timeout".to_string()));
    assert!(silent(r.p.state(), 0, u64::MAX / 2, T).is_none());
    // The producer comes back late: said, and nothing reopens.
    let late = r.apply(
        F::new("e7", "text.delta")
            .turn("t")
            .ids(|i| i.message_id = Some(id.clone()))
            .p("delta", json!(" late")),
    );
    assert!(late
        .findings
        .iter()
        .any(|f| f.code == "work_after_turn_end"));
    assert!(
        late.chunks
            .iter()
            .all(|c| c.message_id.as_deref() != Some(id.as_str())),
        "no chunk for the ended message: {:?}",
        late.chunks
    );
    let m = r.p.message(&id).expect("still there");
    assert_eq!(serde_json::to_value(&m.parts).unwrap(), parts);
    assert_eq!(r.state()["runtime"]["status"], "interrupted");
    r.assert_replay();
}

/// A fact of step `step`, try `attempt`, in message m1 of turn t.
fn step(id: &str, class: &str, step: &str, attempt: &str) -> F {
    F::new(id, class).turn("t").ids(|i| {
        i.message_id = Some("m1".into());
        i.step_id = Some(step.into());
        i.attempt_id = Some(attempt.into());
    })
}

#[test]
fn a_new_attempt_of_a_step_replaces_the_earlier_one_once() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(step("e1", "text.delta", "s1", "a1").p("delta", json!("Planning. ")));
    // Step 2, first try: text and a tool that never finishes.
    r.apply(step("e2", "text.delta", "s2", "a1").p("delta", json!("Calling the API")));
    r.apply(
        step("e3", "tool.started", "s2", "a1")
            .tool("c1")
            .p("toolName", json!("fetch")),
    );
    assert_eq!(r.part_types("m1"), ["text", "text", "tool-fetch"]);
    // Step 2 is tried again: its first try goes, step 1 stays.
    let again = r.apply(step("e4", "text.delta", "s2", "a2").p("delta", json!("Calling it again")));
    let sup: Vec<_> = again
        .chunks
        .iter()
        .map(|c| serde_json::to_value(&c.chunk).unwrap())
        .filter(|c| c["type"] == "data-superseded")
        .collect();
    assert_eq!(sup.len(), 1);
    assert_eq!(sup[0]["data"]["fromPart"], 1);
    assert_eq!(sup[0]["data"]["previousAttemptId"], "a1");
    // The parts that stand: step 1's text, ended.
    let kept = sup[0]["data"]["parts"].as_array().expect("parts");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        (&kept[0]["type"], &kept[0]["text"], &kept[0]["state"]),
        (&json!("text"), &json!("Planning. "), &json!("done"))
    );
    assert_eq!(sup[0]["transient"], true);
    assert_eq!(r.part_types("m1"), ["text", "text"]);
    assert_eq!(
        super::tests::texts(&r, "m1"),
        ["Planning. ", "Calling it again"]
    );
    let st = r.state();
    assert_eq!(st["tools"]["c1"]["status"], "cancelled");
    assert_eq!(
        st["tools"]["c1"]["errorText"],
        "superseded by a new attempt"
    );
    // More of the same try: no second supersede; the step goes on.
    let more = r.apply(
        step("e5", "tool.started", "s2", "a2")
            .tool("c2")
            .p("toolName", json!("fetch")),
    );
    assert!(more
        .chunks
        .iter()
        .all(|c| serde_json::to_value(&c.chunk).unwrap()["type"] != "data-superseded"));
    r.apply(
        step("e6", "tool.result", "s2", "a2")
            .tool("c2")
            .p("summary", json!("200 OK")),
    );
    r.apply(F::new("e7", "run.finished").turn("t"));
    assert_eq!(r.part_types("m1"), ["text", "text", "tool-fetch"]);
    // A client that applies the chunks (and honours data-superseded)
    // rebuilds the message; a joining client gets only what stands.
    r.assert_replay();
    let replay: Vec<String> =
        r.p.message("m1")
            .unwrap()
            .replay_chunks()
            .iter()
            .map(|c| serde_json::to_value(c).unwrap().to_string())
            .collect();
    assert!(
        !replay.iter().any(|c| c.contains("Calling the API")),
        "{replay:?}"
    );
}

#[test]
fn an_end_decided_before_events_that_came_since_ends_nothing() {
    let mut r = working();
    let s = silent(r.p.state(), 0, 300_000, T).expect("silent");
    let event = interruption(&s, r.p.cursor());
    // Another node's event lands first, then the decision made before it.
    r.apply(
        F::new("e3", "text.delta")
            .turn("t")
            .p("delta", json!("still here")),
    );
    let fact = normalize(event, &Limits::default())
        .expect("it normalises")
        .fact;
    let late = r.apply(super::tests::F(fact));
    assert!(late.findings.iter().any(|f| f.code == "stale_interruption"));
    assert!(late.chunks.iter().all(|c| c.message_id.is_none()));
    assert_eq!(r.state()["runtime"]["status"], "running");
    r.assert_replay();
}
