//! Issue 16 over HTTP: what the projection keeps of each fact reaches the
//! snapshot, the message history and the ingest reply (evidence sources,
//! the producer's time, warnings, UI-local facts, taxonomy values, seed 002
//! scopes). The reducer's own tests are `src/projection/tests_kept.rs` and
//! `tests_hitl.rs`.

use serde_json::{json, Value};

use crate::common::TestServer;

fn warning_codes(reply: &Value) -> Vec<String> {
    reply["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|x| x["code"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn evidence_sources_and_producer_time_reach_snapshot_history_and_umo() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "ev",
            &json!([
                {"id": "1", "type": "run.started", "runId": "r", "turnId": "t"},
                {"id": "2", "type": "text.delta", "runId": "r", "turnId": "t",
                 "createdAt": "2026-11-25T09:00:01Z", "payload": {"delta": "Per the notes."}},
                {"id": "3", "type": "evidence.changed", "runId": "r", "turnId": "t",
                 "evidenceId": "ev-1", "payload": {"title": "Notes", "url": "https://example.com/n",
                 "source": "Example", "snippet": "Refused.", "date": "2026-11-01"}},
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let snap = srv.snapshot("ev").await;
    let e = &snap["state"]["evidence"]["ev-1"];
    assert_eq!(
        (e["url"].as_str(), e["source"].as_str()),
        (Some("https://example.com/n"), Some("Example"))
    );
    let m = &snap["state"]["messages"][0];
    assert_eq!(m["metadata"]["createdAt"], "2026-11-25T09:00:01Z");
    let types: Vec<&str> = m["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["text", "data-evidence-citation", "source-url"]);
    let (_, page) = srv.get_json("/v1/sessions/ev/messages").await;
    assert_eq!(
        page["messages"][0]["metadata"]["createdAt"],
        "2026-11-25T09:00:01Z"
    );
    let (_, umo) = srv.get_json("/v1/sessions/ev/messages?format=umo").await;
    let umo = &umo["messages"][0];
    assert_eq!(umo["datetime"], "2026-11-25T09:00:01Z");
    let search = umo["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "search")
        .expect("a search block");
    assert_eq!(
        search["data"]["references"][0]["url"],
        "https://example.com/n"
    );
    assert_eq!(search["data"]["references"][0]["date"], "2026-11-01");
}

#[tokio::test]
async fn warnings_ui_local_facts_and_taxonomy_values_are_said_in_the_reply() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "warn",
            &json!([
                {"id": "1", "type": "run.started", "runId": "r", "turnId": "t"},
                {"id": "2", "type": "text.delta", "runId": "r", "turnId": "t", "payload": {"delta": "Hi"}},
                {"id": "3", "type": "runtime.warning", "runId": "r", "turnId": "t",
                 "payload": {"code": "rate_limited", "message": "slowed"}},
                {"id": "4", "type": "text.delta", "runId": "r", "turnId": "t",
                 "persistence": "ui_local", "payload": {"delta": " draft"}},
                {"id": "5", "type": "run.status", "runId": "r", "turnId": "t",
                 "owner": "robot", "status": "running"},
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["accepted"], 5, "warnings never reject: {v}");
    let codes = warning_codes(&v);
    assert!(codes.contains(&"ui_local_fact".to_string()), "{v}");
    assert!(codes.contains(&"unknown_taxonomy_value".to_string()), "{v}");
    let snap = srv.snapshot("warn").await;
    let parts = snap["state"]["messages"][0]["parts"]
        .as_array()
        .unwrap()
        .clone();
    assert!(parts.iter().any(|p| p["type"] == "data-diagnostic-ref"));
    assert!(
        !snap.to_string().contains(" draft\""),
        "the UI-local text never reaches the transcript"
    );
    assert_eq!(snap["state"]["uiLocal"][0]["eventId"], "4");
}

#[tokio::test]
async fn seed_002_scopes_for_reviews_and_subagents() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "rev",
            &json!({"type": "review.requested", "payload": {"reviewId": "rv"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    for (body, path) in [
        (
            json!({"type": "review.verdict", "payload": {"reviewId": "rv", "verdict": "pass"}}),
            "/evidenceRefs",
        ),
        (
            json!({"type": "subagent.started", "subagentId": "s"}),
            "/taskId",
        ),
    ] {
        let (status, p) = srv.post("rev", &body).await;
        assert_eq!(
            (status, p["code"].as_str()),
            (422, Some("missing_scope_id")),
            "{p}"
        );
        assert_eq!(p["errors"][0]["code"], "missing_scope_id", "{p}");
        assert_eq!(p["errors"][0]["path"], path, "{p}");
    }
    let (status, v) = srv
        .post(
            "rev",
            &json!({"type": "review.verdict", "payload": {"reviewId": "rv", "verdict": "pass"},
                    "evidenceRefs": ["ev-1"]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test]
async fn session_updates_and_retryable_failures_reach_the_session_list() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "life",
            &json!([
                {"id": "1", "type": "session.updated", "payload": {"title": "Nightly build", "pinned": true}},
                {"id": "2", "type": "run.started", "runId": "r", "turnId": "t"},
                {"id": "3", "type": "tool.started", "runId": "r", "turnId": "t", "toolCallId": "c1",
                 "payload": {"toolName": "build"}},
                {"id": "4", "type": "tool.progress", "runId": "r", "turnId": "t", "toolCallId": "c1",
                 "payload": {"progress": 50}},
                {"id": "5", "type": "run.failed", "runId": "r", "turnId": "t",
                 "payload": {"retryable": true, "failureCategory": "rate_limited"}},
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let snap = srv.snapshot("life").await;
    assert_eq!(snap["state"]["session"]["title"], "Nightly build");
    assert_eq!(snap["state"]["runtime"]["retryable"], true);
    let tool = snap["state"]["messages"][0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-build")
        .cloned()
        .expect("tool part");
    assert_eq!(
        tool["state"], "output-error",
        "the failed run ended the tool part: {tool}"
    );
    let (_, list) = srv.get_json("/v1/sessions").await;
    let s = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == "life")
        .cloned()
        .expect("listed");
    assert_eq!(
        (
            s["status"].as_str(),
            s["title"].as_str(),
            s["pinned"].as_bool(),
            s["retryable"].as_bool()
        ),
        (
            Some("failed"),
            Some("Nightly build"),
            Some(true),
            Some(true)
        ),
        "{s}"
    );
    assert!(s.get("archived").is_none());
    srv.post(
        "life",
        &json!({"id": "6", "type": "session.updated", "payload": {"archived": true}}),
    )
    .await;
    let (_, list) = srv.get_json("/v1/sessions").await;
    assert_eq!(list["sessions"][0]["archived"], true);
    assert_eq!(list["sessions"][0]["title"], "Nightly build", "kept");
}
