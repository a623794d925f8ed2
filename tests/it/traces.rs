//! OpenTelemetry traces over OTLP/HTTP, received by a collector in the test:
//! one trace from an ingest request (joining the caller's `traceparent`)
//! through the HTTP span to the session actor's `session.append`, which names
//! the cursors of the frames it made (OTLP JSON gives integers as strings).

use std::sync::{Arc, Mutex};

use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

use crate::common::Proc;

/// An OTLP/HTTP collector: every request body it got, as JSON.
async fn collector() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let keep = got.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: axum::body::Bytes| {
            let keep = keep.clone();
            async move {
                keep.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).expect("OTLP JSON"));
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1/traces"), got)
}

/// Every span the collector got: (name, traceId, spanId, parentSpanId, attributes).
fn spans(got: &[Value]) -> Vec<(String, String, String, String, Value)> {
    let mut out = Vec::new();
    for body in got {
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    let text = |k: &str| s[k].as_str().unwrap_or("").to_lowercase();
                    out.push((
                        text("name"),
                        text("traceId"),
                        text("spanId"),
                        text("parentSpanId"),
                        s["attributes"].clone(),
                    ));
                }
            }
        }
    }
    out
}

fn attr(attrs: &Value, key: &str) -> Option<Value> {
    attrs.as_array()?.iter().find(|a| a["key"] == key).map(|a| {
        let v = &a["value"];
        v.get("intValue")
            .or(v.get("stringValue"))
            .cloned()
            .unwrap_or(Value::Null)
    })
}

fn stop(p: &mut Proc) {
    p.terminate();
    p.wait_exit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_the_request_to_the_append_that_made_its_frames() {
    let (endpoint, got) = collector().await;
    let mut p = Proc::start(
        &["--store", "memory", "--listen", "127.0.0.1:0"],
        &[("PROJECTOR_TELEMETRY__OTLP_ENDPOINT", endpoint.as_str())],
    );
    let line = p.wait_line("listening on");
    let base = line
        .split("listening on ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller = "00f067aa0ba902b7";
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/sessions/traced/events"))
        .header("traceparent", format!("00-{trace}-{caller}-01"))
        .json(&json!([{"type": "run.started", "runId": "r"}, {"type": "text.delta", "runId": "r", "payload": {"delta": "hi"}}]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // A graceful stop flushes what the exporter holds.
    tokio::task::spawn_blocking(move || {
        stop(&mut p);
        p
    })
    .await
    .unwrap();
    let spans = spans(&got.lock().unwrap());
    let in_trace: Vec<_> = spans.iter().filter(|s| s.1 == trace).collect();
    let http = in_trace
        .iter()
        .find(|s| s.0 == "http")
        .unwrap_or_else(|| panic!("no http span in {spans:#?}"));
    assert_eq!(http.3, caller, "the request joins the caller's trace");
    let append = in_trace
        .iter()
        .find(|s| s.0 == "session.append")
        .unwrap_or_else(|| panic!("no append span in {spans:#?}"));
    let from = attr(&append.4, "cursor_from").expect("cursor_from");
    let to = attr(&append.4, "cursor_to").expect("cursor_to");
    assert!(from == json!(1) || from == json!("1"), "{from}");
    assert!(to == json!(2) || to == json!("2"), "{to}");
    // The append hangs off the request: its parent chain reaches the http span.
    let mut at = append.3.clone();
    let mut hops = 0;
    while at != http.2 {
        let parent = in_trace
            .iter()
            .find(|s| s.2 == at)
            .unwrap_or_else(|| panic!("broken chain at {at}: {in_trace:#?}"));
        at = parent.3.clone();
        hops += 1;
        assert!(hops < 10, "no way from the append to the request");
    }
}
