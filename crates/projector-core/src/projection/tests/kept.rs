//! Unit tests of issue 16 items 2 to 6: facts the projection keeps whole.
//! Evidence keeps its source (and becomes an AI SDK source), the
//! producer's time reaches messages and the timeline, warnings and
//! UI-local facts are said, lifecycle facts reach the snapshot.

use serde_json::{json, Value};

use super::tests::{Run, F};
use super::umo_blocks;

fn parts(r: &Run, msg: &str) -> Vec<Value> {
    let m = r.p.message(msg).expect("message");
    m.parts.iter().map(|p| p.to_json()).collect()
}

#[test]
fn evidence_keeps_its_source_and_becomes_an_ai_sdk_source_once() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Per the docs, ")),
    );
    r.apply(
        F::new("e2", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("ev-1".into()))
            .p("title", json!("Release notes"))
            .p("url", json!("https://example.com/notes?v=2"))
            .p("source", json!("Example Corp"))
            .p(
                "snippet",
                json!("Escapes longer than 8 digits are refused."),
            )
            .p("publishedAt", json!("2026-11-01")),
    );
    let e = &r.state()["evidence"]["ev-1"];
    assert_eq!(e["url"], "https://example.com/notes?v=2");
    assert_eq!(e["source"], "Example Corp");
    assert_eq!(e["snippet"], "Escapes longer than 8 digits are refused.");
    assert_eq!(e["date"], "2026-11-01");
    // A later verdict updates the card in place; the source part stays one.
    r.apply(
        F::new("e3", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("ev-1".into()))
            .p("verdict", json!("supports")),
    );
    let ps = parts(&r, "msg-2");
    let types: Vec<&str> = ps.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["text", "data-evidence-citation", "source-url"]);
    assert_eq!(ps[1]["data"]["verdict"], "supports");
    assert_eq!(ps[1]["data"]["url"], "https://example.com/notes?v=2");
    assert_eq!(
        ps[2],
        json!({"type": "source-url", "sourceId": "ev-1",
        "url": "https://example.com/notes?v=2", "title": "Release notes"})
    );
    // Umo: one search reference carrying url, site, date and the passage.
    let umo = umo_blocks::message(r.p.message("msg-2").unwrap());
    let refs = umo["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "search")
        .map(|b| b["data"]["references"].clone())
        .expect("a search block");
    assert_eq!(
        refs.as_array().unwrap().len(),
        1,
        "card and source are one reference: {refs}"
    );
    assert_eq!(refs[0]["url"], "https://example.com/notes?v=2");
    assert_eq!(refs[0]["site"], "Example Corp");
    assert_eq!(refs[0]["date"], "2026-11-01");
    assert!(refs[0]["content"]
        .as_str()
        .unwrap()
        .contains("Escapes longer"));
    r.assert_replay();
}

#[test]
fn a_document_without_url_is_a_source_document_and_unsafe_urls_are_dropped() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("See the spec. ")),
    );
    r.apply(
        F::new("e2", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("doc-1".into()))
            .p("title", json!("Lexer spec"))
            .p("mediaType", json!("application/pdf"))
            .p("filename", json!("lexer.pdf")),
    );
    r.apply(
        F::new("e3", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("bad-1".into()))
            .p("url", json!("https://user:pass@example.com/x")),
    );
    r.apply(
        F::new("e4", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("bad-2".into()))
            .p("url", json!("javascript:alert(1)")),
    );
    let ps = parts(&r, "msg-2");
    let doc = ps
        .iter()
        .find(|p| p["type"] == "source-document")
        .expect("source-document");
    assert_eq!(
        doc,
        &json!({"type": "source-document", "sourceId": "doc-1",
        "mediaType": "application/pdf", "title": "Lexer spec", "filename": "lexer.pdf"})
    );
    let s = r.state();
    assert!(s["evidence"]["bad-1"].get("url").is_none());
    assert!(s["evidence"]["bad-2"].get("url").is_none());
    assert!(!s.to_string().contains("user:pass"));
    assert_eq!(
        r.diag_codes()
            .iter()
            .filter(|c| *c == "unsafe_ref_dropped")
            .count(),
        2
    );
    assert!(
        !ps.iter().any(|p| p["type"] == "source-url"),
        "no URL, no source-url"
    );
    r.assert_replay();
}

#[test]
fn the_producers_time_reaches_messages_the_timeline_and_umo() {
    let mut r = Run::new();
    let at = |mut f: F, t: &str| {
        f.0.timestamp = Some(t.into());
        f
    };
    r.apply(at(
        F::new("e0", "run.started").turn("t"),
        "2026-11-25T09:00:00Z",
    ));
    let a = r.apply(at(
        F::new("e1", "text.delta").turn("t").p("delta", json!("Hi")),
        "2026-11-25T09:00:01.250Z",
    ));
    // The start chunk carries it, so an AI SDK client has it as metadata.
    let start = a
        .chunks
        .iter()
        .find(|c| c.chunk.type_name() == "start")
        .expect("start");
    assert_eq!(
        serde_json::to_value(&start.chunk).unwrap()["messageMetadata"],
        json!({"createdAt": "2026-11-25T09:00:01.250Z"})
    );
    // A later fact's time does not move it.
    r.apply(at(
        F::new("e2", "text.delta")
            .turn("t")
            .p("delta", json!(" there")),
        "2026-11-25T09:00:05Z",
    ));
    let s = r.state();
    assert_eq!(
        s["messages"][0]["metadata"]["createdAt"],
        "2026-11-25T09:00:01.250Z"
    );
    let tl = s["timeline"].as_array().unwrap();
    assert_eq!(tl[1]["timestamp"], "2026-11-25T09:00:01.250Z");
    assert_eq!(tl[2]["timestamp"], "2026-11-25T09:00:05Z");
    let umo = umo_blocks::message(r.p.message("msg-2").unwrap());
    assert_eq!(umo["datetime"], "2026-11-25T09:00:01.250Z");
    // Without a time on the opening fact: no metadata, no datetime (no clock).
    let mut q = Run::new();
    q.apply(F::new("e0", "text.delta").turn("t").p("delta", json!("x")));
    assert!(q.state()["messages"][0].get("metadata").is_none());
    assert!(umo_blocks::message(&q.p.messages()[0])
        .get("datetime")
        .is_none());
    r.assert_replay();
}

#[test]
fn a_runtime_warning_is_referenced_from_its_message_like_an_error() {
    // Through the normaliser: `runtime.warning` is an alias of `diagnostic.changed`.
    let raw = json!({"type": "runtime.warning", "turnId": "t",
        "payload": {"code": "rate_limited", "message": "slowed down by the provider"}});
    let n = crate::event::normalize(raw, &crate::event::Limits::default()).unwrap();
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Working")),
    );
    r.apply(F(n.fact));
    let ps = parts(&r, "msg-2");
    let refp = ps
        .iter()
        .find(|p| p["type"] == "data-diagnostic-ref")
        .expect("a diagnostic ref");
    assert_eq!(refp["data"]["code"], "rate_limited");
    assert_eq!(refp["data"]["severity"], "warning");
    let s = r.state();
    assert_eq!(s["diagnostics"][0]["code"], "rate_limited");
    assert_eq!(s["runtime"]["status"], "running", "a warning ends nothing");
    // A plain diagnostic.changed stays off the conversation.
    r.apply(
        F::new("e3", "diagnostic.changed")
            .turn("t")
            .p("code", json!("slow_disk")),
    );
    assert_eq!(
        parts(&r, "msg-2")
            .iter()
            .filter(|p| p["type"] == "data-diagnostic-ref")
            .count(),
        1
    );
    r.assert_replay();
}

#[test]
fn ui_local_facts_are_kept_aside_with_a_warning_and_change_nothing() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Hello")),
    );
    let before = r.state();
    let mut draft = F::new("e2", "text.delta")
        .turn("t")
        .p("delta", json!(" (local draft)"));
    draft.0.taxonomy.persistence = Some("ui_local".into());
    let a = r.apply(draft);
    let mut collapse = F::new("e3", "run.finished").turn("t");
    collapse.0.taxonomy.owner = Some("ui_projection".into());
    let b = r.apply(collapse);
    for applied in [&a, &b] {
        assert!(applied.findings.iter().any(|f| f.code == "ui_local_fact"));
    }
    let s = r.state();
    assert_eq!(s["messages"], before["messages"], "never transcript truth");
    assert_eq!(s["runtime"]["status"], "running", "never runtime truth");
    let aside: Vec<&str> = s["uiLocal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["eventId"].as_str().unwrap())
        .collect();
    assert_eq!(aside, ["e2", "e3"]);
    assert_eq!(s["uiLocal"][0]["persistence"], "ui_local");
    assert_eq!(
        s["timeline"].as_array().unwrap().len(),
        4,
        "still on the timeline"
    );
    r.assert_replay();
}

#[test]
fn taxonomy_values_outside_the_seeds_sets_are_kept_and_warned_about() {
    let raw = json!({"type": "action.required", "actionId": "a", "owner": "robot",
        "phase": "acting", "surface": "hologram", "topology": "mesh",
        "payload": {"actionType": "telepathy"}});
    let n = crate::event::normalize(raw, &crate::event::Limits::default()).unwrap();
    let paths: Vec<&str> = n
        .warnings
        .iter()
        .filter(|w| w.code == crate::event::taxonomy::UNKNOWN_TAXONOMY_VALUE)
        .map(|w| w.path.as_str())
        .collect();
    assert_eq!(
        paths,
        ["/owner", "/surface", "/topology", "/payload/actionType"]
    );
    assert_eq!(
        n.fact.taxonomy.owner.as_deref(),
        Some("robot"),
        "kept as sent"
    );
    assert_eq!(n.fact.taxonomy.topology.as_deref(), Some("mesh"));
    let ok = json!({"type": "action.required", "actionId": "a", "owner": "policy",
        "scope": "action_request", "surface": "hitl", "persistence": "snapshot",
        "control": "approve", "topology": "solo_run",
        "payload": {"actionType": "tool_approval"}});
    let n = crate::event::normalize(ok, &crate::event::Limits::default()).unwrap();
    assert!(n.warnings.is_empty(), "{:?}", n.warnings);
}

#[test]
fn session_updates_and_retryable_failures_reach_the_snapshot() {
    let mut r = Run::new();
    r.apply(F::new("e0", "session.updated").p("title", json!("Fix the nightly build")));
    r.apply(F::new("e1", "session.updated").p("pinned", json!(true)));
    let s = r.state();
    assert_eq!(s["session"]["title"], "Fix the nightly build");
    assert_eq!(s["session"]["pinned"], true);
    assert!(
        s["session"].get("archived").is_none(),
        "only as a fact says it"
    );
    r.apply(F::new("e2", "session.updated").p("archived", json!(true)));
    assert_eq!(
        r.state()["session"]["title"],
        "Fix the nightly build",
        "kept"
    );
    r.apply(F::new("e3", "run.started").turn("t"));
    r.apply(
        F::new("e4", "run.failed")
            .turn("t")
            .p("retryable", json!(true))
            .p("failureCategory", json!("rate_limited")),
    );
    assert_eq!(r.state()["runtime"]["retryable"], true);
    r.apply(F::new("e5", "run.started").turn("t2"));
    assert!(
        r.state()["runtime"].get("retryable").is_none(),
        "a new run clears it"
    );
    r.assert_replay();
}

#[test]
fn tool_progress_is_a_preliminary_output_and_a_cancelled_tool_part_ends() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "tool.started")
            .turn("t")
            .tool("c1")
            .p("toolName", json!("build"))
            .p("input", json!({"target": "all"})),
    );
    r.apply(
        F::new("e2", "tool.progress")
            .turn("t")
            .tool("c1")
            .p("progress", json!(40))
            .p("preview", json!("compiling 40/100")),
    );
    let tool = |r: &Run| {
        parts(r, "msg-2")
            .into_iter()
            .find(|p| p["type"] == "tool-build")
            .expect("tool part")
    };
    let p = tool(&r);
    assert_eq!(p["state"], "output-available");
    assert_eq!(p["preliminary"], true);
    assert_eq!(p["output"]["progress"], 40);
    assert_eq!(p["output"]["preview"], "compiling 40/100");
    // The run is cancelled: the part ends instead of waiting forever.
    r.apply(F::new("e3", "run.canceled").turn("t"));
    let p = tool(&r);
    assert_eq!(p["state"], "output-error");
    assert_eq!(p["errorText"], "cancelled");
    assert_eq!(r.state()["tools"]["c1"]["status"], "cancelled");
    // A late result does not reopen it.
    r.apply(
        F::new("e4", "tool.result")
            .turn("t")
            .tool("c1")
            .p("summary", json!("done")),
    );
    assert_eq!(tool(&r)["state"], "output-error");
    assert!(r.findings().contains(&"work_after_turn_end".to_string()));
    // A tool still waiting for input when its run fails ends too.
    r.apply(F::new("e5", "run.started").turn("u"));
    r.apply(
        F::new("e6", "tool.started")
            .turn("u")
            .tool("c2")
            .p("toolName", json!("fetch")),
    );
    r.apply(F::new("e7", "run.failed").turn("u"));
    let s = r.state();
    assert_eq!(s["tools"]["c2"]["status"], "failed");
    let failed_part = s["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap().clone())
        .find(|p| p["type"] == "tool-fetch")
        .unwrap();
    assert_eq!(failed_part["state"], "output-error");
    r.assert_replay();
}

#[test]
fn remote_and_background_teammates_and_the_status_precedence() {
    let mut r = Run::new();
    let agent = |id: &str, class: &str| {
        F::new(id, class)
            .agent("remote-1")
            .ids(|i| i.task_id = Some("t1".into()))
    };
    r.apply(
        agent("e0", "agent.spawned")
            .p(
                "agentCard",
                json!({"name": "Travel agent", "url": "https://agents.example/travel"}),
            )
            .p("remoteTaskId", json!("rt-9")),
    );
    r.apply(
        agent("e1", "agent.changed")
            .p("status", json!("running"))
            .p("needsInput", json!(true)),
    );
    let a = &r.state()["agents"]["remote-1"];
    assert_eq!(a["status"], "needs_input", "needs_input outranks running");
    assert_eq!(a["agentCard"]["name"], "Travel agent");
    assert_eq!(a["remoteTaskId"], "rt-9");
    r.apply(agent("e2", "agent.changed").p("status", json!("running")));
    assert_eq!(
        r.state()["agents"]["remote-1"]["status"],
        "needs_input",
        "still waiting"
    );
    r.apply(
        agent("e3", "agent.changed")
            .p("needsInput", json!(false))
            .p("planReady", json!(true))
            .p("needsAuth", json!(true)),
    );
    let a = &r.state()["agents"]["remote-1"];
    assert_eq!(
        (a["status"].as_str(), a["needsAuth"].as_bool()),
        (Some("plan_ready"), Some(true))
    );
    r.apply(agent("e4", "agent.completed"));
    let a = &r.state()["agents"]["remote-1"];
    assert_eq!(a["status"], "completed");
    assert!(a.get("planReady").is_none() && a.get("needsAuth").is_none());
    r.apply(
        F::new("e5", "agent.changed")
            .agent("nightly")
            .ids(|i| i.task_id = Some("t2".into()))
            .p("schedule", json!({"cron": "0 3 * * *"}))
            .p("wakeReason", json!("schedule"))
            .p("status", json!("idle")),
    );
    let b = &r.state()["agents"]["nightly"];
    assert_eq!(b["schedule"]["cron"], "0 3 * * *");
    assert_eq!(b["wakeReason"], "schedule");
    r.assert_replay();
}

#[test]
fn the_tool_catalog_fills_the_tools_surface_and_is_no_work() {
    let mut r = Run::new();
    r.apply(F::new("e0", "tool.catalog.resolved").p(
        "tools",
        json!(["search", {"name": "shell", "description": "Run a command"}]),
    ));
    let s = r.state();
    assert_eq!(s["toolCatalog"]["search"], json!({"name": "search"}));
    assert_eq!(s["toolCatalog"]["shell"]["description"], "Run a command");
    assert_eq!(s["runtime"]["status"], "idle", "a catalog is not work");
    r.apply(F::new("e1", "tool.catalog.resolved").p("tools", json!(["fetch"])));
    let cat = r.state()["toolCatalog"].clone();
    assert_eq!(
        cat.as_object().unwrap().len(),
        1,
        "a new catalog replaces the old: {cat}"
    );
}

#[test]
fn a_message_says_its_agent_role_model_and_the_runs_usage() {
    let mut r = Run::new();
    r.apply(
        F::new("e0", "agent.spawned")
            .agent("researcher")
            .ids(|i| i.task_id = Some("t1".into()))
            .p("role", json!("reviewer")),
    );
    r.apply(F::new("e1", "run.started").turn("t").agent("researcher"));
    let mut f = F::new("e2", "text.delta")
        .turn("t")
        .agent("researcher")
        .p("delta", json!("Found it."));
    f.0.model = Some("gpt-test".into());
    r.apply(f);
    r.apply(
        F::new("e3", "run.finished")
            .turn("t")
            .agent("researcher")
            .p("usage", json!({"inputTokens": 12, "outputTokens": 3})),
    );
    let m = &r.state()["messages"][0];
    assert_eq!(m["metadata"]["agentId"], "researcher");
    assert_eq!(m["metadata"]["agentRole"], "reviewer");
    assert_eq!(m["metadata"]["model"], "gpt-test");
    assert_eq!(
        m["metadata"]["usage"],
        json!({"inputTokens": 12, "outputTokens": 3})
    );
    assert_eq!(m["status"], "complete");
    r.assert_replay();
}
