//! Issue 16 over HTTP: what the projection keeps of each fact reaches the
//! snapshot, the message history and the ingest reply (evidence sources,
//! the producer's time, warnings, UI-local facts, taxonomy values, seed 002
//! scopes). The reducer's own tests are `crates/projector-core/src/projection/tests/kept.rs` and
//! `hitl.rs` beside it.

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

/// A Umo consumer: messages by id, content blocks by id, with `append`
/// adding text and `merge` replacing fields (seed 001 `strategy`); an
/// entry with `replace: true` drops the message's blocks first.
#[derive(Default)]
struct UmoClient {
    messages: Vec<Value>,
}

impl UmoClient {
    fn apply(&mut self, frame: &Value) {
        match frame["type"].as_str() {
            Some("snapshot") => self.messages = frame["messages"].as_array().unwrap().clone(),
            Some("delta") => {
                for m in frame["messages"].as_array().unwrap() {
                    let pos = self.messages.iter().position(|x| x["id"] == m["id"]);
                    let i = pos.unwrap_or_else(|| {
                        self.messages
                            .push(json!({"id": m["id"], "role": m["role"], "content": []}));
                        self.messages.len() - 1
                    });
                    let msg = &mut self.messages[i];
                    if m["replace"] == true {
                        msg["content"] = json!([]);
                    }
                    if let Some(st) = m.get("status") {
                        msg["status"] = st.clone();
                    }
                    for b in m["content"].as_array().unwrap() {
                        let content = msg["content"].as_array_mut().unwrap();
                        match content
                            .iter_mut()
                            .find(|x| x["id"] == b["id"] && x["type"] == b["type"])
                        {
                            None => content.push(b.clone()),
                            Some(have) if b["strategy"] == "append" => {
                                if let (Some(a), Some(d)) =
                                    (have["data"].as_str(), b["data"].as_str())
                                {
                                    have["data"] = format!("{a}{d}").into();
                                } else if let Some(t) = b["data"]["text"].as_str() {
                                    let a = have["data"]["text"].as_str().unwrap_or("").to_string();
                                    have["data"]["text"] = format!("{a}{t}").into();
                                }
                                if let Some(st) = b.get("status") {
                                    have["status"] = st.clone();
                                }
                            }
                            Some(have) => {
                                let data = have["data"].clone();
                                *have = b.clone();
                                if let (Value::Object(old), Value::Object(new)) =
                                    (data, &mut have["data"])
                                {
                                    for (k, v) in old {
                                        new.entry(k).or_insert(v);
                                    }
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn markdown(&self, id: &str) -> String {
        let m = self
            .messages
            .iter()
            .find(|m| m["id"] == id)
            .expect("message");
        m["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "markdown")
            .map(|b| b["data"].as_str().unwrap().to_string())
            .collect()
    }
}

#[tokio::test]
async fn a_umo_consumer_follows_a_session_live_and_resumes_exactly() {
    let srv = TestServer::builder().start().await;
    let ev = |id: &str, ty: &str, extra: Value| {
        let mut e = json!({"id": id, "type": ty, "runId": "r", "turnId": "t"});
        if let (Value::Object(a), Value::Object(b)) = (&mut e, extra) {
            a.extend(b);
        }
        e
    };
    srv.post(
        "umo",
        &json!([
            ev("1", "run.started", json!({})),
            ev(
                "2",
                "text.delta",
                json!({"createdAt": "2026-11-25T10:00:00Z", "payload": {"delta": "Hel"}})
            )
        ]),
    )
    .await;
    let mut sse = srv.sse("umo", "?format=umo", None).await;
    let first = sse.next().await.unwrap();
    assert_eq!(first.event, "snapshot");
    assert!(
        first.id.as_deref().unwrap().ends_with(":2"),
        "{:?}",
        first.id
    );
    let mut client = UmoClient::default();
    client.apply(&first.data);
    assert_eq!(client.markdown("msg-2"), "Hel");
    assert_eq!(
        first.data["messages"][0]["datetime"],
        "2026-11-25T10:00:00Z"
    );

    srv.post(
        "umo",
        &json!([
            ev("3", "text.delta", json!({"payload": {"delta": "lo. "}})),
            ev(
                "4",
                "tool.started",
                json!({"toolCallId": "c1", "payload": {"toolName": "grep", "input": {"q": "x"}}})
            ),
            ev("5", "metric.changed", json!({"payload": {"tokens": 3}})),
            ev(
                "6",
                "tool.result",
                json!({"toolCallId": "c1", "payload": {"summary": "2 hits"}})
            ),
            ev("7", "text.delta", json!({"payload": {"delta": "Done."}})),
            ev("8", "run.finished", json!({})),
        ]),
    )
    .await;
    let mut ids = Vec::new();
    loop {
        let e = sse.next().await.unwrap();
        assert_eq!(e.event, "delta");
        ids.push(e.id.clone().unwrap());
        client.apply(&e.data);
        if e.data["messages"][0]["status"] == "complete" {
            break;
        }
    }
    assert!(
        !ids.iter().any(|i| i.ends_with(":5")),
        "a frame with no message content is left out: {ids:?}"
    );
    assert_eq!(client.markdown("msg-2"), "Hello. Done.");
    let msg = &client.messages[0];
    let tool = msg["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "toolcall")
        .unwrap();
    assert_eq!(tool["status"], "complete");
    assert_eq!(tool["data"]["toolCallName"], "grep");
    assert!(tool["data"]["result"].as_str().unwrap().contains("2 hits"));
    // The history page says the same text.
    let (_, page) = srv.get_json("/v1/sessions/umo/messages?format=umo").await;
    let history: String = page["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "markdown")
        .map(|b| b["data"].as_str().unwrap())
        .collect();
    assert_eq!(history, "Hello. Done.");

    // Resume after the first delta: exactly the rest, no snapshot.
    let after: u64 = ids[0].rsplit(':').next().unwrap().parse().unwrap();
    let mut again = srv.sse("umo", "?format=umo", Some(after)).await;
    let mut resumed = UmoClient {
        messages: Vec::new(),
    };
    resumed.apply(&first.data);
    resumed.apply(&{
        // the first delta, as the first connection got it
        let mut s2 = srv.sse("umo", "?format=umo", Some(2)).await;
        s2.next().await.unwrap().data
    });
    let rest = again.take(ids.len() - 1).await;
    assert_eq!(rest[0].id.as_deref(), Some(ids[1].as_str()));
    for e in &rest {
        assert_eq!(e.event, "delta");
        resumed.apply(&e.data);
    }
    assert_eq!(resumed.markdown("msg-2"), "Hello. Done.");
}

#[tokio::test]
async fn a_umo_consumer_following_live_holds_only_the_last_try_of_a_step() {
    let srv = TestServer::builder().start().await;
    let ev = |n: u32, ty: &str, step: Option<(&str, &str)>, extra: Value| {
        let mut e = json!({"id": format!("r{n}"), "type": ty, "runId": "r", "turnId": "t",
                           "messageId": "m1"});
        if let Some((s, a)) = step {
            e["stepId"] = s.into();
            e["attemptId"] = a.into();
        }
        if let (Value::Object(a), Value::Object(b)) = (&mut e, extra) {
            a.extend(b);
        }
        e
    };
    srv.post("umo-retry", &ev(1, "run.started", None, json!({})))
        .await;
    let mut sse = srv.sse("umo-retry", "?format=umo", None).await;
    let mut client = UmoClient::default();
    client.apply(&sse.next().await.unwrap().data);
    let tool = |id: &str, url: &str| json!({"toolCallId": id, "payload": {"toolName": "fetch", "input": {"url": url}}});
    let events = [
        ev(
            2,
            "text.delta",
            Some(("s1", "a1")),
            json!({"payload": {"delta": "Planning. "}}),
        ),
        ev(
            3,
            "text.delta",
            Some(("s2", "a1")),
            json!({"payload": {"delta": "First try"}}),
        ),
        ev(4, "tool.started", Some(("s2", "a1")), tool("c1", "a")),
        ev(
            5,
            "text.delta",
            Some(("s2", "a2")),
            json!({"payload": {"delta": "Second try"}}),
        ),
        ev(6, "tool.started", Some(("s2", "a2")), tool("c2", "b")),
        ev(7, "run.finished", None, json!({})),
    ];
    let mut replaced = 0;
    for e in events {
        srv.post("umo-retry", &e).await;
        let f = sse.next().await.unwrap();
        replaced += f.data["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["replace"] == true)
            .count();
        client.apply(&f.data);
    }
    assert_eq!(replaced, 1, "one replacement, at the second try");
    assert_eq!(client.markdown("m1"), "Planning. Second try");
    let calls: Vec<&Value> = client.messages[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "toolcall")
        .map(|b| &b["data"]["toolCallId"])
        .collect();
    assert_eq!(calls, [&json!("c2")], "{}", client.messages[0]);
    // A consumer that comes later holds the same.
    let mut later = UmoClient::default();
    later.apply(
        &srv.sse("umo-retry", "?format=umo", None)
            .await
            .next()
            .await
            .unwrap()
            .data,
    );
    assert_eq!(later.markdown("m1"), client.markdown("m1"));
}

#[tokio::test]
async fn the_umo_view_is_the_same_over_websocket() {
    use futures_util::StreamExt;
    let srv = TestServer::builder().start().await;
    srv.post(
        "umows",
        &json!([
            {"id": "1", "type": "run.started", "runId": "r", "turnId": "t"},
            {"id": "2", "type": "text.delta", "runId": "r", "turnId": "t", "payload": {"delta": "Hi"}},
            {"id": "3", "type": "run.finished", "runId": "r", "turnId": "t"},
        ]),
    )
    .await;
    let sse: Vec<Value> = srv
        .sse("umows", "?format=umo&cursor=0", None)
        .await
        .take(2)
        .await
        .into_iter()
        .map(|e| e.data)
        .collect();
    let url = format!("ws://{}/v1/sessions/umows/ws?format=umo&cursor=0", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            got.push(serde_json::from_str::<Value>(&t).unwrap());
        }
    }
    assert_eq!(got, sse);
    assert_eq!(got[0]["type"], "delta");
    assert_eq!(got[0]["messages"][0]["role"], "assistant");
    let (status, p) = srv.get_json("/v1/sessions/umows/stream?format=yaml").await;
    assert_eq!(
        (status, p["code"].as_str()),
        (400, Some("invalid_query")),
        "{p}"
    );
}

/// An AI SDK UI message stream, as `toUIMessageStream()` writes it.
fn ui_stream_body(chunks: &[Value], done: bool) -> String {
    let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        s.push_str("data: [DONE]\n\n");
    }
    s
}

fn ui_chunks() -> Vec<Value> {
    vec![
        json!({"type": "start", "messageId": "ai-1", "messageMetadata": {"model": "mock-1"}}),
        json!({"type": "start-step"}),
        json!({"type": "reasoning-start", "id": "r1"}),
        json!({"type": "reasoning-delta", "id": "r1", "delta": "Check the docs."}),
        json!({"type": "reasoning-end", "id": "r1"}),
        json!({"type": "text-start", "id": "t1"}),
        json!({"type": "text-delta", "id": "t1", "delta": "Let me "}),
        json!({"type": "text-delta", "id": "t1", "delta": "search. "}),
        json!({"type": "text-end", "id": "t1"}),
        json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"}),
        json!({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{\"q\":"}),
        json!({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "\"rust\"}"}),
        json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "search", "input": {"q": "rust"}}),
        json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"hits": 3}}),
        json!({"type": "source-url", "sourceId": "s1", "url": "https://rust-lang.org", "title": "Rust"}),
        json!({"type": "finish-step"}),
        json!({"type": "text-start", "id": "t2"}),
        json!({"type": "text-delta", "id": "t2", "delta": "Found 3."}),
        json!({"type": "text-end", "id": "t2"}),
        json!({"type": "data-weather", "id": "w1", "data": {"temp": 3}}),
        json!({"type": "file", "url": "https://example.com/chart.png", "mediaType": "image/png"}),
        json!({"type": "tool-input-end", "toolCallId": "c1"}),
        json!({"type": "finish", "messageMetadata": {"usage": {"outputTokens": 9}}}),
    ]
}

async fn post_ui_stream(srv: &TestServer, session: &str, body: reqwest::Body) -> (u16, Value) {
    let r = srv
        .http
        .post(srv.url(&format!("/v1/sessions/{session}/events")))
        .header("content-type", "text/event-stream")
        .header("x-vercel-ai-ui-message-stream", "v1")
        .header("idempotency-key", format!("{session}-stream-1"))
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn an_ai_sdk_ui_message_stream_is_ingested_whole_and_once() {
    let srv = TestServer::builder().start().await;
    let body = ui_stream_body(&ui_chunks(), true);
    let (status, v) = post_ui_stream(&srv, "uis", body.clone().into()).await;
    assert_eq!(status, 200, "{v}");
    assert!(v["accepted"].as_u64().unwrap() >= 10, "{v}");
    let codes = warning_codes(&v);
    assert!(
        codes.contains(&"ui_chunk_not_projected".to_string()),
        "the data part is said: {v}"
    );
    let snap = srv.snapshot("uis").await;
    let m = &snap["state"]["messages"][0];
    assert_eq!(m["id"], "ai-1");
    assert_eq!(m["status"], "complete");
    let parts: Vec<(String, Value)> = m["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["type"].as_str().unwrap().to_string(), p.clone()))
        .collect();
    let kinds: Vec<&str> = parts.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "reasoning",
            "text",
            "tool-search",
            "data-evidence-citation",
            "source-url",
            "text",
            "data-weather",
            "file"
        ],
        "{m}"
    );
    assert_eq!(parts[6].1["data"], json!({"temp": 3}));
    assert_eq!(m["metadata"]["model"], "mock-1");
    assert_eq!(m["metadata"]["usage"]["outputTokens"], 9);
    assert_eq!(
        parts[0].1["text"], "Check the docs.",
        "the producer shows its reasoning"
    );
    assert_eq!(parts[1].1["text"], "Let me search. ");
    assert_eq!(parts[2].1["input"], json!({"q": "rust"}));
    assert_eq!(parts[2].1["state"], "output-available");
    assert_eq!(parts[5].1["text"], "Found 3.");
    assert_eq!(snap["state"]["runtime"]["status"], "completed");
    // The same stream again (a producer's retry) changes nothing.
    let (status, again) = post_ui_stream(&srv, "uis", body.into()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["accepted"], 0, "{again}");
    assert_eq!(again["duplicates"], v["accepted"]);
}

#[tokio::test]
async fn a_ui_message_stream_is_live_while_it_streams_and_a_cut_ends_it_as_interrupted() {
    let srv = TestServer::builder().start().await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(8);
    let body = reqwest::Body::wrap_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut sse = srv.sse("live-ui", "", None).await;
    assert_eq!(sse.next().await.unwrap().event, "snapshot");
    let poster = {
        let srv_url = srv.url("/v1/sessions/live-ui/events");
        let http = srv.http.clone();
        tokio::spawn(async move {
            http.post(srv_url)
                .header("content-type", "text/event-stream")
                .body(body)
                .send()
                .await
        })
    };
    let first = ui_stream_body(
        &[
            json!({"type": "start", "messageId": "live-1"}),
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "text-delta", "id": "t", "delta": "Streaming "}),
        ],
        false,
    );
    tx.send(Ok(first)).await.unwrap();
    // The text reaches a subscriber while the body is still open.
    let mut seen = String::new();
    while !seen.contains("Streaming ") {
        let e = sse.next().await.expect("a frame while the body streams");
        seen.push_str(&e.data.to_string());
    }
    // Half a chunk, then the producer's connection breaks.
    tx.send(Ok("data: {\"type\":\"text-del".into()))
        .await
        .unwrap();
    tx.send(Err(std::io::Error::other("producer crashed")))
        .await
        .unwrap();
    drop(tx);
    let _ = poster.await;
    // What arrived stays; the message ends, marked as interrupted.
    let mut ended = false;
    while !ended {
        let e = sse.next().await.expect("the interrupted end");
        ended = e.data.to_string().contains("\"abort\"");
    }
    let snap = srv.snapshot("live-ui").await;
    let m = &snap["state"]["messages"][0];
    assert_eq!(m["parts"][0]["text"], "Streaming ");
    assert_eq!(m["status"], "aborted", "{m}");
    assert_eq!(snap["state"]["runtime"]["status"], "interrupted");
}
