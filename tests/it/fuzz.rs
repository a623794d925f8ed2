//! Property test of the ingest path: random bytes, deep nesting, huge
//! strings, wrong types, duplicate keys, invalid UTF-8 and batches with one
//! bad event never crash the server, never give a 5xx, and never change a
//! session. Cases are drawn by proptest's generators (a fresh random seed
//! each run; a failure prints the case).

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

use crate::common::{lime, TestServer};

const CASES: usize = 400;

/// A body and its content type; every case is invalid by construction.
fn bad_body() -> impl Strategy<Value = (String, Vec<u8>)> {
    let json_ct = Just("application/json".to_string());
    let any_ct = prop_oneof![
        Just("application/json".to_string()),
        Just("application/x-ndjson".to_string()),
        Just("text/plain".to_string()),
        "[a-z/+.-]{0,30}".prop_map(|s| s),
    ];
    let field = prop_oneof![
        Just("type"),
        Just("eventClass"),
        Just("id"),
        Just("sequence"),
        Just("payload"),
        Just("turnId"),
        Just("toolCallId"),
        Just("refIds"),
        Just("refs"),
        Just("title"),
    ];
    let wrong = prop_oneof![
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!([1, {"a": null}])),
        Just(json!({"x": 1})),
        Just(json!(true)),
        Just(json!("")),
        Just(json!(u64::MAX)),
    ];
    prop_oneof![
        // Random bytes.
        (any_ct.clone(), proptest::collection::vec(any::<u8>(), 0..512)),
        // Deep nesting of arrays or objects (past serde's and our depth limit).
        (json_ct.clone(), (64usize..400, any::<bool>()).prop_map(|(n, arr)| {
            let (o, c) = if arr { ("[", "]") } else { ("{\"a\":", "}") };
            format!("{{\"type\":\"x.y\",\"payload\":{{\"p\":{}1{}}}}}", o.repeat(n), c.repeat(n)).into_bytes()
        })),
        // Huge strings anywhere.
        (json_ct.clone(), (300_000usize..600_000, 0usize..3).prop_map(|(n, at)| {
            let big = "x".repeat(n);
            let v = match at {
                0 => json!({"type": "text.delta", "payload": {"delta": big}}),
                1 => json!({"type": "text.delta", "title": big}),
                _ => json!({"type": big}),
            };
            v.to_string().into_bytes()
        })),
        // A known field of the wrong type.
        (json_ct.clone(), (field, wrong).prop_filter_map("type needs a non-string", |(f, w)| {
            let mut v = json!({"id": "w1", "type": "tool.started", "toolCallId": "t"});
            // Keep only replacements that make the event invalid.
            if (f == "title" || f == "turnId") && w.is_string() {
                return None;
            }
            if (f == "type" || f == "eventClass" || f == "id") && w.is_string() && w != json!("") {
                return None;
            }
            if f == "refs" && (w.is_object() || w.is_array()) {
                return None;
            }
            if f == "payload" && w.is_object() {
                return None;
            }
            if f == "sequence" && w.as_u64().is_some() {
                return None;
            }
            v[f] = w;
            Some(v.to_string().into_bytes())
        })),
        // Duplicate keys: whichever wins, the event lacks its toolCallId.
        (json_ct.clone(), "[a-z.]{1,12}".prop_map(|c| {
            format!(r#"{{"type":"tool.started","type":"tool.{c}","payload":{{"a":1,"a":2}}}}"#).into_bytes()
        })),
        // Invalid UTF-8 inside an otherwise valid event.
        (json_ct.clone(), (0usize..20, prop_oneof![Just(0xffu8), Just(0xc3u8), Just(0x80u8)]).prop_map(|(at, b)| {
            let mut raw = br#"{"type":"text.delta","payload":{"delta":"hello world, hello"}}"#.to_vec();
            let pos = 40 + at.min(15);
            raw.insert(pos, b);
            raw
        })),
        // A batch of good events with one bad one: atomic, nothing applies.
        (json_ct, (1usize..8, 0usize..8).prop_map(|(n, bad_at)| {
            let mut batch: Vec<Value> = (0..n)
                .map(|i| json!({"id": format!("fz-{i}"), "type": "text.delta", "payload": {"delta": "x"}}))
                .collect();
            batch.insert(bad_at.min(n), json!({"type": "action.required"}));
            Value::Array(batch).to_string().into_bytes()
        })),
    ]
}

#[tokio::test]
async fn bad_input_never_crashes_never_5xx_never_changes_a_session() {
    let srv = TestServer::builder().start().await;
    let seed: Vec<Value> = (1..=5)
        .map(|i| {
            lime(
                &format!("seed-{i}"),
                "model.delta",
                i,
                json!({"payload": {"delta": "ok "}}),
            )
        })
        .collect();
    assert_eq!(srv.post("victim", &Value::Array(seed)).await.0, 200);
    let before = srv.snapshot("victim").await;
    let (_, log_before) = srv.get_json("/v1/sessions/victim/events").await;

    let mut runner = TestRunner::default();
    let strategy = bad_body();
    for i in 0..CASES {
        let (ct, body) = strategy.new_tree(&mut runner).expect("case").current();
        let shown = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        let r = srv.post_raw("victim", &ct, body).await;
        let status = r.status().as_u16();
        assert!(
            (400..500).contains(&status),
            "case {i} ({ct}): status {status} for body {shown:?}"
        );
        assert_eq!(
            r.headers().get("content-type").map(|v| v.to_str().unwrap()),
            Some("application/problem+json"),
            "case {i}: a problem body"
        );
    }
    assert_eq!(
        srv.snapshot("victim").await,
        before,
        "the session never changed"
    );
    let (_, log_after) = srv.get_json("/v1/sessions/victim/events").await;
    assert_eq!(log_after, log_before);
    let (_, listing) = srv.get_json("/v1/sessions").await;
    assert_eq!(
        listing["sessions"].as_array().unwrap().len(),
        1,
        "no session was created"
    );
    let (status, _) = srv.get_json("/healthz").await;
    assert_eq!(status, 200, "still serving");
}
