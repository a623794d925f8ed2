//! End-to-end tests of the real server on port 0: ingest, projection,
//! SSE and WebSocket replay, operations.

use crate::common::{lime, tempdir, TestServer, WAIT};
use futures_util::StreamExt;
use serde_json::{json, Value};

fn text_tool_text() -> Value {
    json!([
        lime("e1", "turn.started", 1, json!({})),
        lime(
            "e2",
            "model.delta",
            2,
            json!({"payload": {"delta": "Let me "}})
        ),
        lime(
            "e3",
            "model.delta",
            3,
            json!({"payload": {"delta": "search."}})
        ),
        lime(
            "e4",
            "tool.started",
            4,
            json!({"toolCallId": "call-1", "payload": {"toolName": "search", "input": {"q": "rust"}}})
        ),
        lime(
            "e5",
            "tool.result",
            5,
            json!({"toolCallId": "call-1", "refIds": ["out-1"], "payload": {"summary": "3 hits"}})
        ),
        lime(
            "e6",
            "model.delta",
            6,
            json!({"payload": {"delta": "Found it."}})
        ),
        lime(
            "e7",
            "model.completed",
            7,
            json!({"payload": {"text": "Found it."}})
        ),
        lime("e8", "turn.completed", 8, json!({})),
    ])
}

fn assistant(snapshot: &Value) -> &Value {
    snapshot["state"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("an assistant message")
}

#[tokio::test]
async fn text_tool_text_gives_parts_in_real_order() {
    let srv = TestServer::builder().start().await;
    let (status, body) = srv.post("s", &text_tool_text()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], 8);
    assert_eq!(body["cursor"], 8);
    let snap = srv.snapshot("s").await;
    assert_eq!(snap["cursor"], 8);
    let parts = assistant(&snap)["parts"].as_array().unwrap().clone();
    let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["text", "tool-search", "text"]);
    assert_eq!(parts[0]["text"], "Let me search.");
    assert_eq!(parts[1]["toolCallId"], "call-1");
    assert_eq!(parts[1]["state"], "output-available");
    assert_eq!(parts[1]["input"], json!({"q": "rust"}));
    assert_eq!(
        parts[2]["text"], "Found it.",
        "final equal to the stream is not appended again"
    );
    assert_eq!(snap["state"]["runtime"]["status"], "completed");
    assert_eq!(assistant(&snap)["status"], "complete");
}

#[tokio::test]
async fn repeated_post_changes_nothing() {
    let srv = TestServer::builder().start().await;
    let (_, first) = srv.post("s", &text_tool_text()).await;
    let before = srv.snapshot("s").await;
    let (status, again) = srv.post("s", &text_tool_text()).await;
    assert_eq!(status, 200);
    assert_eq!(again["accepted"], 0);
    assert_eq!(again["duplicates"], 8);
    assert_eq!(again["cursor"], first["cursor"]);
    assert_eq!(srv.snapshot("s").await, before);
    // Duplicates inside one batch count once; events without id dedupe by scope + sequence.
    let no_id =
        json!({"type": "text.delta", "runId": "r", "sequence": 1, "payload": {"delta": "x"}});
    let (_, b) = srv.post("t", &json!([no_id.clone(), no_id.clone()])).await;
    assert_eq!(
        (b["accepted"].as_u64(), b["duplicates"].as_u64()),
        (Some(1), Some(1))
    );
    let (_, b) = srv.post("t", &no_id).await;
    assert_eq!(b["duplicates"], 1);
}

#[tokio::test]
async fn bad_event_is_422_with_its_code_and_the_batch_is_not_applied() {
    let srv = TestServer::builder().start().await;
    srv.post("s", &json!(lime("ok0", "turn.started", 1, json!({}))))
        .await;
    let before = srv.snapshot("s").await;
    let (_, log_before) = srv.get_json("/v1/sessions/s/events").await;
    let batch = json!([
        lime("ok1", "model.delta", 2, json!({"payload": {"delta": "hi"}})),
        lime("bad", "tool.started", 3, json!({})),
        lime("bad2", "turn.cancelled", 4, json!({})),
    ]);
    let r = srv
        .http
        .post(srv.url("/v1/sessions/s/events"))
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["status"], 422);
    assert_eq!(p["code"], "missing_scope_id");
    let errors = p["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0]["index"], 1);
    assert_eq!(errors[0]["eventId"], "bad");
    assert_eq!(errors[0]["code"], "missing_scope_id");
    assert_eq!(errors[0]["path"], "/toolCallId");
    assert_eq!(errors[1]["index"], 2);
    assert_eq!(errors[1]["code"], "schema_mismatch");
    assert_eq!(
        srv.snapshot("s").await,
        before,
        "nothing of the batch applied"
    );
    let (_, log_after) = srv.get_json("/v1/sessions/s/events").await;
    assert_eq!(log_after, log_before);
    // The good event alone is accepted afterwards at the next cursor.
    let (_, ok) = srv.post("s", &batch[0]).await;
    assert_eq!(ok["cursor"], 2);
}

#[tokio::test]
async fn body_errors_are_problems() {
    let srv = TestServer::builder()
        .config(|c| {
            c.ingest.max_body_bytes = 2000;
            c.ingest.max_events_per_batch = 3;
            c.ingest.inline_payload_bytes = 100;
            c.ingest.hard_payload_bytes = 500;
        })
        .start()
        .await;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "application/json",
            b"{not json".to_vec(),
            400,
            "invalid_json",
        ),
        ("application/json", b"".to_vec(), 400, "empty_body"),
        ("application/json", b"42".to_vec(), 400, "not_an_event"),
        ("application/json", vec![0xff, 0xfe], 400, "invalid_utf8"),
        ("text/plain", b"{}".to_vec(), 415, "unsupported_media_type"),
        (
            "application/x-www-form-urlencoded",
            b"a=b".to_vec(),
            415,
            "unsupported_media_type",
        ),
        ("application/json", vec![b' '; 3000], 413, "body_too_large"),
        (
            "application/json",
            br#"[{"type":"a.b"},{"type":"a.b"},{"type":"a.b"},{"type":"a.b"}]"#.to_vec(),
            413,
            "too_many_events",
        ),
        (
            "application/json",
            format!(
                r#"{{"type":"a.b","payload":{{"x":"{}"}}}}"#,
                "y".repeat(600)
            )
            .into_bytes(),
            413,
            "large_payload_inline",
        ),
        (
            "application/x-ndjson",
            b"{\"type\":\"a.b\"}\n{oops".to_vec(),
            400,
            "invalid_json",
        ),
    ];
    for (ct, body, status, code) in cases {
        let r = srv.post_raw("s", ct, body).await;
        assert_eq!(r.status().as_u16(), status, "{code}");
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        let p: Value = r.json().await.unwrap();
        assert_eq!(p["code"], code);
    }
    assert_eq!(srv.snapshot("s").await["cursor"], 0, "nothing applied");
    // A large-but-allowed payload is accepted with a warning.
    let (status, body) = srv
        .post(
            "s",
            &json!({"type": "a.b", "payload": {"x": "y".repeat(200)}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["warnings"][0]["code"], "large_payload_inline");
}

#[tokio::test]
async fn ndjson_and_secrets() {
    let srv = TestServer::builder().start().await;
    let body = format!(
        "{}\n{}\n",
        json!({"type": "run.started", "runId": "r"}),
        json!({"type": "tool.started", "runId": "r", "toolCallId": "t", "payload": {"toolName": "http", "input": {"apiKey": "sk-live-123", "max_tokens": 5}}})
    );
    let r = srv
        .post_raw("s", "application/x-ndjson", body.into_bytes())
        .await;
    assert_eq!(r.status(), 200);
    let out: Value = r.json().await.unwrap();
    assert_eq!(out["accepted"], 2);
    assert_eq!(out["warnings"][0]["code"], "secret_leak_risk");
    assert_eq!(out["warnings"][0]["path"], "/payload/input/apiKey");
    let snap = srv.snapshot("s").await.to_string();
    assert!(
        !snap.contains("sk-live-123"),
        "secret never reaches the projection"
    );
    let (_, log) = srv.get_json("/v1/sessions/s/events").await;
    assert!(!log.to_string().contains("sk-live-123"), "nor the log");
    assert!(log.to_string().contains("max_tokens"));
}

#[tokio::test]
async fn sse_resume_from_every_cursor_gives_exactly_the_remaining_frames() {
    let srv = TestServer::builder().start().await;
    let mut events = vec![lime("e1", "turn.started", 1, json!({}))];
    for i in 2..=49 {
        events.push(lime(
            &format!("e{i}"),
            "model.delta",
            i,
            json!({"payload": {"delta": format!("w{i} ")}}),
        ));
    }
    events.push(lime("e50", "turn.completed", 50, json!({})));
    let (status, _) = srv.post("s", &Value::Array(events)).await;
    assert_eq!(status, 200);
    // The full history, from cursor 0.
    let epoch = srv.snapshot("s").await["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    let mut all = srv.sse("s", "?cursor=0", None).await;
    let full = all.take(50).await;
    for (i, f) in full.iter().enumerate() {
        assert_eq!(f.event, "delta");
        assert_eq!(
            f.id,
            Some(format!("{epoch}:{}", i + 1)),
            "ids carry the epoch"
        );
        assert_eq!(f.data["cursor"], (i + 1) as u64);
    }
    for n in 0..=50u64 {
        // Alternate the resume mechanisms.
        let mut s = if n % 2 == 0 {
            srv.sse("s", "", Some(n)).await
        } else {
            srv.sse("s", &format!("?cursor={n}"), None).await
        };
        let got = s.take((50 - n) as usize).await;
        assert_eq!(got, full[n as usize..].to_vec(), "resume from {n}");
        // Then live: the next frame is the next cursor, nothing in between.
        if n == 50 {
            srv.post(
                "s",
                &json!(lime(
                    "e51",
                    "model.delta",
                    51,
                    json!({"payload": {"delta": "live"}})
                )),
            )
            .await;
            let live = s.next().await.unwrap();
            assert_eq!(live.data["cursor"], 51);
        }
    }
    // Last-Event-ID wins over ?cursor (EventSource reconnects keep the URL).
    let mut s = srv.sse("s", "?cursor=2", Some(49)).await;
    assert_eq!(s.next().await.unwrap().data["cursor"], 50);
}

#[tokio::test]
async fn no_cursor_starts_with_snapshot_then_live() {
    let srv = TestServer::builder().start().await;
    srv.post("s", &text_tool_text()).await;
    let mut s = srv.sse("s", "", None).await;
    let first = s.next().await.unwrap();
    assert_eq!(first.event, "snapshot");
    assert_eq!(
        first.id,
        Some(format!("{}:8", first.data["epoch"].as_str().unwrap()))
    );
    assert_eq!(first.data["cursor"], 8);
    assert_eq!(first.data, srv.snapshot("s").await);
    srv.post(
        "s",
        &json!(lime(
            "e9",
            "model.delta",
            9,
            json!({"turnId": "turn-2", "payload": {"delta": "more"}})
        )),
    )
    .await;
    let next = s.next().await.unwrap();
    assert_eq!(next.event, "delta");
    assert_eq!(next.data["cursor"], 9);
    assert_eq!(next.data["eventId"], "e9");
}

#[tokio::test]
async fn out_of_range_cursors_get_reset_then_snapshot() {
    let srv = TestServer::builder().start().await;
    srv.post("s", &text_tool_text()).await;
    let snap = srv.snapshot("s").await;
    let epoch = snap["epoch"].as_str().unwrap().to_string();
    for (query, reason) in [
        ("?cursor=99".to_string(), "cursor_ahead"),
        (format!("?cursor=3&epoch=not-{epoch}"), "epoch_mismatch"),
    ] {
        let mut s = srv.sse("s", &query, None).await;
        let reset = s.next().await.unwrap();
        assert_eq!(reset.event, "reset");
        assert_eq!(reset.id, None);
        assert_eq!(reset.data, json!({"type": "reset", "reason": reason}));
        let again = s.next().await.unwrap();
        assert_eq!(again.event, "snapshot");
        assert_eq!(again.data, snap);
    }
    // The right epoch resumes normally.
    let mut s = srv
        .sse("s", &format!("?cursor=7&epoch={epoch}"), None)
        .await;
    assert_eq!(s.next().await.unwrap().data["cursor"], 8);
    // A malformed cursor is a 400 problem.
    let r = srv
        .http
        .get(srv.url("/v1/sessions/s/stream?cursor=abc"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "invalid_cursor");
}

#[tokio::test]
async fn cursor_past_retention_gets_reset() {
    let srv = TestServer::builder()
        .config(|c| {
            c.retention.max_events_per_session = 10;
            c.sessions.checkpoint_every = 5;
        })
        .start()
        .await;
    for i in 1..=30u64 {
        srv.post(
            "s",
            &json!(lime(
                &format!("e{i}"),
                "model.delta",
                i,
                json!({"payload": {"delta": "x"}})
            )),
        )
        .await;
    }
    let (_, log) = srv.get_json("/v1/sessions/s/events").await;
    assert!(
        log["first"].as_u64().unwrap() > 1,
        "old events trimmed: {log}"
    );
    let mut s = srv.sse("s", "?cursor=1", None).await;
    let reset = s.next().await.unwrap();
    assert_eq!(reset.data["reason"], "cursor_expired");
    assert_eq!(s.next().await.unwrap().data["cursor"], 30);
    // Within retention, replay works.
    let mut s = srv.sse("s", "?cursor=28", None).await;
    assert_eq!(s.next().await.unwrap().data["cursor"], 29);
}

#[tokio::test]
async fn websocket_gives_the_same_frames_as_sse() {
    let srv = TestServer::builder().start().await;
    srv.post("s", &text_tool_text()).await;
    let sse = srv.sse("s", "?cursor=0", None).await.take(8).await;
    let url = format!("ws://{}/v1/sessions/s/ws?cursor=0", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 8 {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            got.push(serde_json::from_str::<Value>(&t).unwrap());
        }
    }
    let sse_data: Vec<Value> = sse.into_iter().map(|e| e.data).collect();
    assert_eq!(got, sse_data);
    // Then where the replay ended.
    let msg = tokio::time::timeout(WAIT, ws.next()).await.unwrap();
    let v: Value = serde_json::from_str(msg.unwrap().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(v, json!({"type": "live", "cursor": 8}));
    // Live frames too.
    srv.post(
        "s",
        &json!(lime(
            "e9",
            "model.delta",
            9,
            json!({"payload": {"delta": "x"}})
        )),
    )
    .await;
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).unwrap();
            assert_eq!(v["cursor"], 9);
            break;
        }
    }
    ws.close(None).await.unwrap();
    // Without a cursor, a snapshot first.
    let url = format!("ws://{}/v1/sessions/s/ws", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let msg = tokio::time::timeout(WAIT, ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(msg.to_text().unwrap()).unwrap();
    assert_eq!(v["type"], "snapshot");
    assert_eq!(v["cursor"], 9);
}

#[tokio::test]
async fn two_sessions_fed_concurrently_do_not_interfere() {
    let srv = TestServer::builder().start().await;
    let feed = |session: &'static str, word: &'static str| {
        let http = srv.http.clone();
        let url = srv.url(&format!("/v1/sessions/{session}/events"));
        async move {
            for i in 1..=40u64 {
                let ev = lime(
                    &format!("{session}-{i}"),
                    "model.delta",
                    i,
                    json!({"payload": {"delta": format!("{word}{i} ")}}),
                );
                let r = http.post(&url).json(&ev).send().await.unwrap();
                assert_eq!(r.status(), 200);
            }
        }
    };
    let mut a_stream = srv.sse("a", "?cursor=0", None).await;
    tokio::join!(feed("a", "alpha"), feed("b", "beta"));
    let a = srv.snapshot("a").await;
    let b = srv.snapshot("b").await;
    assert_eq!(a["cursor"], 40);
    assert_eq!(b["cursor"], 40);
    let a_text: String = (1..=40).map(|i| format!("alpha{i} ")).collect();
    let b_text: String = (1..=40).map(|i| format!("beta{i} ")).collect();
    assert_eq!(assistant(&a)["parts"][0]["text"], a_text);
    assert_eq!(assistant(&b)["parts"][0]["text"], b_text);
    assert_ne!(a["epoch"], b["epoch"]);
    let frames = a_stream.take(40).await;
    assert!(frames
        .iter()
        .all(|f| f.data["eventId"].as_str().unwrap().starts_with("a-")));
    let cursors: Vec<u64> = frames
        .iter()
        .map(|f| f.data["cursor"].as_u64().unwrap())
        .collect();
    assert_eq!(cursors, (1..=40).collect::<Vec<_>>());
}

#[tokio::test]
async fn lagging_subscriber_is_caught_up_from_the_store() {
    // A live buffer of 2 frames: a subscriber that does not read while 200
    // frames are published must still get every one of them, in order.
    let srv = TestServer::builder()
        .config(|c| c.stream.live_buffer = 2)
        .start()
        .await;
    let mut s = srv.sse("s", "?cursor=0", None).await;
    let batch: Vec<Value> = (1..=200u64)
        .map(|i| {
            lime(
                &format!("e{i}"),
                "model.delta",
                i,
                json!({"payload": {"delta": "x"}}),
            )
        })
        .collect();
    for chunk in batch.chunks(10) {
        let (status, _) = srv.post("s", &Value::Array(chunk.to_vec())).await;
        assert_eq!(status, 200);
    }
    let got = s.take(200).await;
    let cursors: Vec<u64> = got
        .iter()
        .map(|f| f.data["cursor"].as_u64().unwrap())
        .collect();
    assert_eq!(cursors, (1..=200).collect::<Vec<_>>());
    let (_, m) = srv.get_json("/metrics").await;
    let _ = m; // metrics are text; checked in `metrics_and_health`.
}

#[tokio::test]
async fn events_log_is_paged_with_cursors() {
    let srv = TestServer::builder().start().await;
    srv.post("s", &text_tool_text()).await;
    let (status, page) = srv.get_json("/v1/sessions/s/events?after=2&limit=3").await;
    assert_eq!(status, 200);
    let cursors: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["cursor"].as_u64().unwrap())
        .collect();
    assert_eq!(cursors, vec![3, 4, 5]);
    assert_eq!(page["events"][0]["event"]["id"], "e3");
    assert_eq!(page["events"][0]["event"]["class"], "text.delta");
    assert_eq!(page["events"][0]["event"]["sourceClass"], "model.delta");
    assert_eq!(page["nextAfter"], 5);
    assert_eq!(page["head"], 8);
    let (_, last) = srv
        .get_json("/v1/sessions/s/events?after=5&limit=100")
        .await;
    assert!(last.get("nextAfter").is_none());
    let (status, p) = srv.get_json("/v1/sessions/s/events?after=-1").await;
    assert_eq!(status, 400);
    assert_eq!(p["code"], "invalid_query");
}

/// A browser's CORS preflight from `http://viewer.test` for a `method`
/// request to `path` with `headers`.
async fn preflight(srv: &TestServer, path: &str, method: &str, headers: &str) -> reqwest::Response {
    srv.http
        .request(reqwest::Method::OPTIONS, srv.url(path))
        .header("origin", "http://viewer.test")
        .header("access-control-request-method", method)
        .header("access-control-request-headers", headers)
        .send()
        .await
        .unwrap()
}

/// With no origin allowed (the default), preflights are still answered
/// (the Durable Streams conformance suite asks for them, `If-None-Match`
/// among the headers), with no origin allowed: the browser refuses.
#[tokio::test]
async fn preflights_are_answered_with_no_origin_allowed() {
    let srv = TestServer::builder().start().await;
    let r = preflight(&srv, "/ds/v1/stream/a", "GET", "if-none-match").await;
    assert!(r.status().is_success(), "{}", r.status());
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(allowed.contains("if-none-match"), "{allowed}");
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn metrics_health_cors_and_request_ids() {
    let srv = TestServer::builder()
        .config(|c| c.http.cors_allowed_origins = vec!["http://viewer.test".into()])
        .start()
        .await;
    let (status, h) = srv.get_json("/healthz").await;
    assert_eq!((status, h["status"].as_str()), (200, Some("ok")));
    let (status, r) = srv.get_json("/readyz").await;
    assert_eq!((status, r["status"].as_str()), (200, Some("ready")));
    srv.post("s", &text_tool_text()).await;
    srv.post("s", &json!({"type": "tool.started"})).await;
    let text = srv.metrics().await;
    for name in [
        "projector_ingest_events_total",
        "projector_frames_total",
        "projector_errors_total",
        "projector_sessions_live",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    assert!(text.contains("code=\"missing_scope_id\""));
    let r = preflight(&srv, "/v1/sessions/s/events", "POST", "content-type").await;
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "http://viewer.test"
    );
    // What a CORS answer varies with, on preflights and the rest alike.
    let vary = "origin, access-control-request-method, access-control-request-headers";
    assert_eq!(r.headers()["vary"], vary);
    let r = srv.http.get(srv.url("/healthz")).send().await.unwrap();
    assert!(r.headers().get_all("vary").iter().any(|v| v == vary));
    let r = srv
        .http
        .get(srv.url("/healthz"))
        .header("origin", "http://evil.test")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    assert!(r.headers().get("x-request-id").is_some());
    // An allowed origin may read the headers of the protocol; a request
    // without an origin (not a cross-origin one) gets no CORS headers.
    let r = srv
        .http
        .get(srv.url("/healthz"))
        .header("origin", "http://viewer.test")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "http://viewer.test"
    );
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(exposed.contains("x-request-id") && exposed.contains("stream-next-offset"));
    let r = srv.http.get(srv.url("/healthz")).send().await.unwrap();
    assert!(r.headers().get("access-control-expose-headers").is_none());
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let r = srv
        .http
        .get(srv.url("/healthz"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    let r = srv.http.delete(srv.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    let mut srv = TestServer::builder().start().await;
    let mut sse = srv.sse("s", "", None).await;
    assert_eq!(sse.next().await.unwrap().event, "snapshot");
    let url = format!("ws://{}/v1/sessions/s/ws", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let _snapshot = ws.next().await;
    srv.stop().await;
    assert!(sse.ends().await, "SSE stream ended by shutdown");
    let mut closed = false;
    while let Ok(Some(msg)) = tokio::time::timeout(WAIT, ws.next()).await {
        match msg {
            Ok(tokio_tungstenite::tungstenite::Message::Close(Some(f))) => {
                assert_eq!(u16::from(f.code), 1001);
                closed = true;
            }
            Err(_) => break,
            _ => {}
        }
    }
    assert!(closed, "WebSocket got a close frame");
}

#[tokio::test]
async fn heartbeats_keep_idle_streams_alive() {
    let srv = TestServer::builder()
        .config(|c| c.stream.heartbeat_secs = 1)
        .start()
        .await;
    let mut sse = srv.sse("s", "?cursor=0", None).await;
    let raw = sse.raw_until(": keep-alive\n\n").await;
    assert!(raw.starts_with(": agent-projector\nretry: 2000\n\n"));
}

#[tokio::test]
async fn embedded_store_survives_restart_with_same_snapshot_and_cursors() {
    // Without checkpoints (full replay) and with a checkpoint every 3 events
    // and trimming (checkpoint + tail).
    for (checkpoint_every, retained) in [(1000, 100_000), (3, 6)] {
        let dir = tempdir("restart");
        let cfg = move |c: &mut agent_projector::config::Config| {
            c.sessions.checkpoint_every = checkpoint_every;
            c.retention.max_events_per_session = retained;
        };
        let mut srv = TestServer::builder()
            .embedded(dir.clone())
            .config(cfg)
            .start()
            .await;
        for ev in text_tool_text().as_array().unwrap() {
            srv.post("s", ev).await;
        }
        let before = srv.snapshot("s").await;
        let frames_before = srv.sse("s", "?cursor=3", None).await.take(5).await;
        srv.stop().await;
        let srv = TestServer::builder()
            .embedded(dir.clone())
            .config(cfg)
            .start()
            .await;
        assert_eq!(
            srv.snapshot("s").await,
            before,
            "snapshot identical after restart"
        );
        let mut s = srv.sse("s", "?cursor=3", None).await;
        assert_eq!(s.take(5).await, frames_before, "exact frames after restart");
        let (_, out) = srv
            .post(
                "s",
                &json!(lime(
                    "e9",
                    "model.delta",
                    9,
                    json!({"payload": {"delta": "!"}})
                )),
            )
            .await;
        assert_eq!(out["cursor"], 9, "cursors continue");
        assert_eq!(out["epoch"], before["epoch"], "epoch continues");
        // Idempotency survives the restart within the retained history (the
        // idempotency window, see `retention.max_events_per_session`).
        let retained_tail = Value::Array(text_tool_text().as_array().unwrap()[5..].to_vec());
        let (_, dup) = srv.post("s", &retained_tail).await;
        assert_eq!(dup["duplicates"], 3, "idempotency survives restart");
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test]
async fn a_full_disk_refuses_ingest_but_reads_and_streams_go_on() {
    let dir = tempdir("full");
    let mut srv = TestServer::builder().embedded(dir.clone()).start().await;
    srv.post("s", &text_tool_text()).await;
    srv.stop().await;
    // The same data on a "disk" that never has enough free space: the real
    // free-space check (statvfs) against an unreachable threshold.
    let srv = TestServer::builder()
        .embedded(dir.clone())
        .config(|c| c.storage.min_free_bytes = u64::MAX)
        .start()
        .await;
    let mut live = srv.sse("s", "", None).await;
    assert_eq!(live.next().await.unwrap().data["cursor"], 8);
    let r = srv
        .http
        .post(srv.url("/v1/sessions/s/events"))
        .json(&json!(lime(
            "e9",
            "model.delta",
            9,
            json!({"payload": {"delta": "x"}})
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    assert!(r.headers().get("retry-after").is_some());
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "store_full");
    assert_eq!(srv.snapshot("s").await["cursor"], 8, "nothing applied");
    let (status, log) = srv.get_json("/v1/sessions/s/events").await;
    assert_eq!((status, log["head"].as_u64()), (200, Some(8)));
    let mut replay = srv.sse("s", "?cursor=6", None).await;
    assert_eq!(
        replay.take(2).await[1].data["cursor"],
        8,
        "replay from the store works"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn openapi_is_served_and_committed_file_is_fresh() {
    let srv = TestServer::builder().start().await;
    let (status, spec) = srv.get_json("/openapi.json").await;
    assert_eq!(status, 200);
    assert!(spec["paths"]["/v1/sessions/{session_id}/events"]["post"].is_object());
    // The documented shapes are the real ones.
    let check = |schema: &str, body: &Value| {
        let sch = &spec["components"]["schemas"][schema];
        let props = sch["properties"].as_object().unwrap();
        for k in body.as_object().unwrap().keys() {
            assert!(props.contains_key(k), "{schema} lacks documented key {k}");
        }
        for r in sch["required"].as_array().unwrap() {
            assert!(
                body.get(r.as_str().unwrap()).is_some(),
                "{schema} misses required {r}"
            );
        }
    };
    let (_, problem) = srv.post("s", &json!({"type": "tool.started"})).await;
    check("Problem", &problem);
    let (_, outcome) = srv
        .post(
            "s",
            &json!({"type": "run.started", "payload": {"token": "x"}}),
        )
        .await;
    check("IngestOutcome", &outcome);
    check("Warning", &outcome["warnings"][0]);
    let (_, page) = srv.get_json("/v1/sessions/s/events").await;
    check("EventsPage", &page);
    let generated = agent_projector::openapi::spec_json();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale; regenerate with `UPDATE_OPENAPI=1 cargo test --test it openapi` or `cargo run -- openapi > openapi/openapi.json`"
    );
}

#[tokio::test]
async fn both_envelopes_project_into_one_session() {
    let srv = TestServer::builder().start().await;
    let batch = json!([
        {"type": "run.started", "owner": "runtime", "scope": "run", "phase": "accepted", "runId": "r1", "sequence": 1},
        {"type": "text.delta", "owner": "model", "scope": "part", "phase": "producing", "runId": "r1", "messageId": "m1", "sequence": 2, "payload": {"delta": "Hi "}},
        {"eventClass": "model.delta", "kind": "model", "status": "running", "runId": "r1", "sequence": 3, "payload": {"messageId": "m1", "delta": "there"}},
        {"type": "some.vendor.thing", "runId": "r1", "sequence": 4, "payload": {"x": 1}},
        {"type": "run.finished", "runId": "r1", "sequence": 5}
    ]);
    let (status, body) = srv.post("s", &batch).await;
    assert_eq!(status, 200, "{body}");
    let snap = srv.snapshot("s").await;
    let m = &snap["state"]["messages"][0];
    assert_eq!(m["id"], "m1");
    assert_eq!(m["parts"][0]["text"], "Hi there");
    let diags = snap["state"]["diagnostics"].as_array().unwrap();
    assert!(
        diags.iter().any(|d| d["code"] == "unknown_event_class"),
        "{diags:?}"
    );
    let timeline = snap["state"]["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 5, "unknown class kept on the timeline");
    assert!(
        !m["parts"].to_string().contains("vendor"),
        "unknown class never in the transcript"
    );
}

#[tokio::test]
async fn sessions_are_listed_paged_and_deleted_with_a_tombstone() {
    let dir = tempdir("lifecycle");
    let srv = TestServer::builder().embedded(dir.clone()).start().await;
    for s in ["a", "b", "c"] {
        srv.post(s, &text_tool_text()).await;
    }
    let (status, page) = srv.get_json("/v1/sessions?limit=2").await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(page["nextAfter"], "b");
    assert_eq!(page["sessions"][0]["head"], 8);
    assert_eq!(page["sessions"][0]["status"], "completed");
    assert!(page["sessions"][0]["updatedAt"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    let (_, rest) = srv.get_json("/v1/sessions?after=b").await;
    assert_eq!(rest["sessions"][0]["sessionId"], "c");
    assert!(rest.get("nextAfter").is_none());

    // A live subscriber of "b" sees reset + an empty snapshot on deletion.
    let mut live = srv.sse("b", "?cursor=8", None).await;
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/b"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let del: Value = r.json().await.unwrap();
    assert_eq!(del["head"], 8);
    let reset = live.next().await.unwrap();
    assert_eq!(
        (reset.event.as_str(), reset.data["reason"].as_str()),
        ("reset", Some("session_deleted"))
    );
    let snap = live.next().await.unwrap();
    assert_eq!(snap.event, "snapshot");
    assert_eq!(snap.data["state"]["messages"], json!([]));
    assert_eq!(snap.data["epoch"], del["epoch"]);
    // Listing skips it; its log is gone; a stale client is reset.
    assert_eq!(listed(&srv).await, ["a", "c"]);
    let (_, log) = srv.get_json("/v1/sessions/b/events").await;
    assert_eq!(log["events"], json!([]));
    let mut stale = srv.sse("b", "", Some(5)).await;
    assert_eq!(
        stale.next().await.unwrap().data["reason"],
        "session_deleted"
    );
    // The session lives again with cursors after the tombstone.
    let (_, out) = srv.post("b", &text_tool_text()).await;
    assert_eq!(
        (out["accepted"].as_u64(), out["cursor"].as_u64()),
        (Some(8), Some(16))
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Sessions listed by the admin listing.
async fn listed(srv: &TestServer) -> Vec<String> {
    let (status, all) = srv.get_json("/v1/sessions").await;
    assert_eq!(status, 200, "{all}");
    all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect()
}

/// The retention sweep of the running server (`max_age_secs`, every
/// `sweep_secs`): a session idle that long is deleted (a tombstone: stale
/// clients get `reset`); one that was only ever read goes too, and is not
/// listed; one that is only read but watched stays, and its subscriber sees
/// nothing happen.
#[tokio::test]
async fn the_sweep_deletes_idle_sessions_and_forgets_ones_only_read() {
    let dir = tempdir("sweep");
    let srv = TestServer::builder()
        .embedded(dir.clone())
        .config(|c| {
            c.retention.max_age_secs = 1;
            c.retention.sweep_secs = 1;
        })
        .start()
        .await;
    let (status, _) = srv.post("written", &text_tool_text()).await;
    assert_eq!(status, 200);
    let read = srv.snapshot("read-only").await;
    assert_eq!(read["cursor"], 0);
    let mut watched = srv.sse("watched", "", None).await;
    assert_eq!(watched.next().await.unwrap().event, "snapshot");
    // (The sweep may already have taken the others on a slow machine.)
    assert!(listed(&srv).await.contains(&"watched".to_string()));

    let deadline = std::time::Instant::now() + WAIT;
    while listed(&srv).await != ["watched"] {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweep did not run: {:?}",
            listed(&srv).await
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The written session left a tombstone: a new epoch, cursors go on, and
    // a client resuming inside the old log is reset.
    let after = srv.snapshot("written").await;
    assert_eq!(after["cursor"], 8);
    assert_eq!(after["state"]["messages"], json!([]));
    for cursor in [3, 8] {
        let mut stale = srv.sse("written", "", Some(cursor)).await;
        assert_eq!(
            stale.next().await.unwrap().data["reason"],
            "session_deleted",
            "cursor {cursor} of the swept log"
        );
    }
    // The watched one goes on as if nothing happened.
    let (status, out) = srv.post("watched", &text_tool_text()).await;
    assert_eq!((status, &out["cursor"]), (200, &json!(8)), "{out}");
    let first = watched.next().await.unwrap();
    assert_eq!(first.data["cursor"], 1);
    assert!(first.id.unwrap().ends_with(":1"));
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 12 item 1: post one event, DELETE the session, post one event,
/// then resume with the caught-up client's `Last-Event-ID: 1` (bare, as
/// curl sends it, and with its epoch, as an EventSource sends it back): the
/// new log's delta must not land on the deleted state. Also after a restart
/// of the embedded store, which keeps where the deleted log ended.
#[tokio::test]
async fn a_caught_up_cursor_of_a_deleted_session_resumes_as_reset() {
    let dir = tempdir("deleted-caught-up");
    let mut srv = TestServer::builder().embedded(dir.clone()).start().await;
    let say = |id: &str, text: &str| {
        json!(lime(
            id,
            "model.delta",
            1,
            json!({"messageId": id, "payload": {"delta": text}})
        ))
    };
    srv.post("s", &say("old", "old text")).await;
    let old = srv.snapshot("s").await;
    let old_id = format!("{}:1", old["epoch"].as_str().unwrap());
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/s"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (status, out) = srv.post("s", &say("new", "new text")).await;
    assert_eq!((status, out["cursor"].as_u64()), (200, Some(2)), "{out}");
    for restart in [false, true] {
        if restart {
            srv.stop().await;
            srv = TestServer::builder().embedded(dir.clone()).start().await;
        }
        for last_event_id in ["1".to_string(), old_id.clone()] {
            let resp = srv
                .http
                .get(srv.url("/v1/sessions/s/stream"))
                .header("last-event-id", &last_event_id)
                .send()
                .await
                .unwrap();
            let mut s = crate::common::Sse::from_response(resp);
            let first = s.next().await.unwrap();
            assert_eq!(
                (first.event.as_str(), first.data["reason"].as_str()),
                ("reset", Some("session_deleted")),
                "Last-Event-ID {last_event_id} (restarted: {restart})"
            );
            let snap = s.next().await.unwrap();
            assert_eq!(snap.event, "snapshot");
            let texts: Vec<&str> = snap.data["state"]["messages"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["parts"].as_array().unwrap())
                .filter_map(|p| p["text"].as_str())
                .collect();
            assert_eq!(texts, ["new text"], "only the new incarnation");
        }
    }
    srv.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 12 item 2, in process: a cursor of another epoch (a memory store's
/// log before a restart) resumes as `epoch_mismatch`, through the SSE id
/// alone; ids that are neither form are refused.
#[tokio::test]
async fn an_sse_id_of_another_epoch_resumes_as_reset() {
    let srv = TestServer::builder().start().await;
    srv.post("s", &text_tool_text()).await;
    let resp = srv
        .http
        .get(srv.url("/v1/sessions/s/stream"))
        .header("last-event-id", "00000000deadbeef:5")
        .send()
        .await
        .unwrap();
    let mut s = crate::common::Sse::from_response(resp);
    assert_eq!(s.next().await.unwrap().data["reason"], "epoch_mismatch");
    assert_eq!(s.next().await.unwrap().event, "snapshot");
    // The id as served resumes exactly.
    let epoch = srv.snapshot("s").await["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    let mut s = srv.sse("s", &format!("?cursor={epoch}:6"), None).await;
    assert_eq!(s.next().await.unwrap().data["cursor"], 7);
    for bad in ["x:", ":5", "ab-c:5", "5:", "+5", "e:+5"] {
        let r = srv
            .http
            .get(srv.url("/v1/sessions/s/stream"))
            .header("last-event-id", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let p: Value = r.json().await.unwrap();
        assert_eq!(p["code"], "invalid_cursor");
    }
}

/// Issue 12 item 14: deleting a session that never existed answers 404
/// (and creates nothing); deleting a deleted one again is harmless.
#[tokio::test]
async fn deleting_a_session_that_never_existed_is_404() {
    let srv = TestServer::builder().start().await;
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/never"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "not_found");
    let (_, page) = srv.get_json("/v1/sessions").await;
    assert_eq!(page["sessions"], json!([]));
    srv.post("once", &text_tool_text()).await;
    for _ in 0..2 {
        let r = srv
            .http
            .delete(srv.url("/v1/sessions/once"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
}

/// Issue 12 item 11: the document says what a client needs to generate its
/// types and handle every answer: event envelopes as the request schema
/// (JSON and NDJSON), the frame schemas (reset reasons included), and the
/// problem statuses of auth, limits, body reading and the store on every
/// route they apply to. (schemathesis checks the running server against it:
/// tests/python/test_openapi.py.)
#[test]
fn openapi_documents_envelopes_frames_and_every_status() {
    let doc = agent_projector::openapi::document();
    let events = &doc["paths"]["/v1/sessions/{session_id}/events"]["post"];
    let content = &events["requestBody"]["content"];
    assert_eq!(
        content["application/json"]["schema"]["$ref"],
        "#/components/schemas/EventBody"
    );
    assert!(content["application/x-ndjson"].is_object());
    let schemas = &doc["components"]["schemas"];
    let envelope = &schemas["EventEnvelope"]["properties"];
    for field in [
        "type",
        "eventClass",
        "toolCallId",
        "payload",
        "sequence",
        "refIds",
    ] {
        assert!(envelope[field].is_object(), "EventEnvelope.{field}");
    }
    let reasons = &schemas["ResetFrame"]["properties"]["reason"]["enum"];
    for r in [
        "cursor_ahead",
        "cursor_expired",
        "epoch_mismatch",
        "session_deleted",
    ] {
        assert!(reasons.as_array().unwrap().contains(&json!(r)), "{r}");
    }
    for s in [
        "Frame",
        "SnapshotFrame",
        "DeltaFrame",
        "ChunkItem",
        "UIMessageChunk",
    ] {
        assert!(schemas[s].is_object(), "{s}");
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let has = |s: &str| op["responses"][s].is_object();
            if path.starts_with("/v1/") {
                for s in ["400", "401", "403", "503"] {
                    assert!(has(s), "{method} {path}: {s}");
                }
            }
            if method == "post" {
                for s in ["408", "413"] {
                    assert!(has(s), "{method} {path}: {s}");
                }
            }
            if path.ends_with("stream") || path.ends_with("/ws") {
                assert!(has("429"), "{method} {path}: 429");
            }
        }
    }
}
