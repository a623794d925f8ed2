//! A run its producer left (issue 35 item 4, `[runs]`): the server ends a
//! working run that went silent, and every view stops streaming (the
//! session stream, the Umo view, the AI SDK stream, the AG-UI run); a run
//! waiting for a person, or running a tool within the tool limit, is left
//! alone; a late event of the ended run is accepted with a warning and
//! reopens nothing.

use serde_json::{json, Value};

use crate::common::{Sse, TestServer};

fn ev(session: &str, n: usize, class: &str, extra: Value) -> Value {
    let mut e = json!({"id": format!("{session}-{n}"), "type": class, "runId": "r1", "turnId": "t1",
                       "messageId": "m1", "sequence": n});
    if let (Some(m), Value::Object(x)) = (e.as_object_mut(), extra) {
        m.extend(x);
    }
    e
}

async fn post_all(srv: &TestServer, session: &str, events: Vec<Value>) {
    let (st, body) = srv.post(session, &json!(events)).await;
    assert_eq!(st, 200, "{body}");
}

#[tokio::test]
async fn a_silent_run_is_ended_everywhere_and_waiting_is_not_silence() {
    let srv = TestServer::builder()
        .config(|c| {
            c.runs.idle_timeout_secs = 1;
            c.runs.tool_idle_timeout_secs = 3600;
        })
        .start()
        .await;
    // Waiting for a person, and running a tool: not silent within their limits.
    post_all(
        &srv,
        "asks",
        vec![
            ev("asks", 1, "run.started", json!({})),
            ev(
                "asks",
                2,
                "text.delta",
                json!({"payload": {"delta": "May I?"}}),
            ),
            ev(
                "asks",
                3,
                "action.required",
                json!({"actionId": "a1", "payload": {"question": "Deploy?"}}),
            ),
        ],
    )
    .await;
    post_all(
        &srv,
        "tests",
        vec![
            ev("tests", 1, "run.started", json!({})),
            ev(
                "tests",
                2,
                "tool.started",
                json!({"toolCallId": "c1", "payload": {"toolName": "cargo_test"}}),
            ),
        ],
    )
    .await;
    // The one that goes silent, last: when it is ended, the others were
    // silent at least as long, and looked at in the same pass.
    post_all(
        &srv,
        "left",
        vec![
            ev("left", 1, "run.started", json!({})),
            ev(
                "left",
                2,
                "reasoning.summary",
                json!({"payload": {"summary": "Plan."}}),
            ),
            ev(
                "left",
                3,
                "text.delta",
                json!({"payload": {"delta": "Half an ans"}}),
            ),
            ev(
                "left",
                4,
                "tool.args.delta",
                json!({"toolCallId": "c9", "payload": {"toolName": "search", "delta": "{\"q\""}}),
            ),
        ],
    )
    .await;
    // Every view, opened while it streams.
    let mut frames = srv.sse("left", "?cursor=4", None).await;
    let ui = srv
        .http
        .get(srv.url("/v1/sessions/left/messages/m1/ui-stream"))
        .send()
        .await
        .unwrap();
    let mut ag_ui = Sse::from_response(
        srv.http
            .get(srv.url("/v1/sessions/left/ag-ui"))
            .send()
            .await
            .unwrap(),
    );
    let mut umo = srv.sse("left", "?cursor=4&format=umo", None).await;
    // The server's end comes as the next frame.
    let end = frames.next().await.expect("the end of the silent run");
    assert_eq!(end.data["cursor"], 5);
    assert_eq!(end.data["eventClass"], "run.finished");
    assert!(end.data["eventId"]
        .as_str()
        .unwrap()
        .starts_with("server:idle:r1:4"));
    let chunks: Vec<&str> = end.data["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["chunk"]["type"].as_str().unwrap())
        .collect();
    for want in ["tool-output-error", "abort"] {
        assert!(chunks.contains(&want), "{chunks:?}");
    }
    // The Umo view: the message stops, its tool call ends in an error.
    let u = umo.next().await.expect("the Umo end");
    assert_eq!(u.data["cursor"], 5);
    let m = &u.data["messages"][0];
    assert_eq!(
        (m["id"].as_str(), m["status"].as_str()),
        (Some("m1"), Some("stop")),
        "{m}"
    );
    // The AI SDK stream ends: abort, then [DONE].
    let body = tokio::time::timeout(crate::common::WAIT, ui.text())
        .await
        .expect("the AI SDK stream ends")
        .unwrap();
    let tail: Vec<&str> = body.trim_end().rsplit("\n\n").take(2).collect();
    assert_eq!(tail[0], "data: [DONE]");
    assert!(tail[1].starts_with(r#"data: {"type":"abort""#), "{tail:?}");
    // The AG-UI run ends.
    loop {
        let e = ag_ui.next().await.expect("the AG-UI run ends");
        if matches!(e.data["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"))
            && e.id.as_deref().is_some_and(|id| id.ends_with(":5"))
        {
            break;
        }
    }
    let snap = srv.snapshot("left").await;
    let st = &snap["state"];
    assert_eq!(st["runtime"]["status"], "interrupted");
    assert_eq!(
        st["messages"][0]["status"], "aborted",
        "{}",
        st["messages"][0]
    );
    assert_eq!(st["tools"]["c9"]["errorText"], "interrupted");
    assert!(st["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["code"] == "run_idle_timeout"));
    // Waiting and a running tool: left alone.
    for (s, status) in [("asks", "blocked"), ("tests", "running")] {
        let snap = srv.snapshot(s).await;
        assert_eq!(snap["state"]["runtime"]["status"], status, "{s}");
        assert_eq!(
            snap["cursor"],
            if s == "asks" { 3 } else { 2 },
            "{s}: nothing written"
        );
    }
    // The producer comes back: accepted, said, and nothing reopens.
    let parts = st["messages"][0]["parts"].clone();
    let (code, out) = srv
        .post(
            "left",
            &ev(
                "left",
                5,
                "text.delta",
                json!({"payload": {"delta": "swer."}}),
            ),
        )
        .await;
    assert_eq!(code, 200, "{out}");
    let warned: Vec<&str> = out["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(warned.contains(&"work_after_turn_end"), "{out}");
    let snap = srv.snapshot("left").await;
    assert_eq!(snap["state"]["messages"][0]["parts"], parts);
    assert_eq!(snap["state"]["runtime"]["status"], "interrupted");
}
