//! The controls relay against a real local HTTP "runtime" started in the
//! test: it records every request and answers as told (succeed, 5xx a few
//! times then succeed, always 5xx, 4xx, slow); "down" is a closed port.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_projector::config::ControlsConfig;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::common::TestServer;

const SECRET: &str = "test-signing-secret";

/// How the fake runtime answers.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// 200 every time.
    Ok,
    /// `status` for the first `n` requests, then 200.
    FailThenOk(u16, usize),
    /// `status` every time.
    Always(u16),
    /// Answer only after far longer than any test timeout.
    Slow,
}

/// One request the runtime got.
#[derive(Debug, Clone)]
struct Seen {
    headers: HeaderMap,
    body: Bytes,
}

impl Seen {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("header {name} missing"))
            .to_str()
            .unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("relayed body is JSON")
    }

    /// The signature is HMAC-SHA256(secret, "{timestamp}.{body}") of the
    /// exact bytes received, and the timestamp is now.
    fn assert_signed(&self) {
        let ts = self.header("x-projector-timestamp");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let t: u64 = ts.parse().expect("timestamp is Unix seconds");
        assert!(now.abs_diff(t) < 60, "timestamp {t} is not now ({now})");
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(ts.as_bytes());
        mac.update(b".");
        mac.update(&self.body);
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            self.header("x-projector-signature"),
            format!("sha256={hex}")
        );
        assert_eq!(self.header("content-type"), "application/json");
    }
}

struct Shared {
    mode: Mode,
    count: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
}

/// The fake runtime.
struct Runtime {
    /// Its control URL.
    url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn runtime_handler(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    s.seen.lock().unwrap().push(Seen { headers, body });
    let n = s.count.fetch_add(1, Ordering::SeqCst);
    let code = |c: u16| StatusCode::from_u16(c).unwrap();
    match s.mode {
        Mode::Ok => StatusCode::OK,
        Mode::FailThenOk(c, k) if n < k => code(c),
        Mode::FailThenOk(..) => StatusCode::ACCEPTED,
        Mode::Always(c) => code(c),
        Mode::Slow => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK
        }
    }
}

impl Runtime {
    async fn start(mode: Mode) -> Runtime {
        let shared = Arc::new(Shared {
            mode,
            count: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/controls", post(runtime_handler))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/controls", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Runtime { url, shared, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }
}

/// A control URL on a port where nothing listens.
async fn down_url() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}/controls")
}

/// A server allowed to call 127.0.0.1 (any port), with short timings.
async fn server(f: impl FnOnce(&mut ControlsConfig)) -> TestServer {
    TestServer::builder()
        .config(|c| {
            c.controls.allowed_hosts = vec!["127.0.0.1".into()];
            c.controls.signing_secret = SECRET.into();
            c.controls.timeout_ms = 2000;
            c.controls.max_retries = 2;
            c.controls.backoff_ms = 10;
            f(&mut c.controls);
        })
        .start()
        .await
}

/// A session whose runtime opened it (with `control_url`, if any) and
/// asked for approval of action `a1`.
async fn open_session(srv: &TestServer, session: &str, control_url: Option<&str>) {
    let mut opened = json!({"id": "open", "type": "session.created", "runId": "r1"});
    if let Some(url) = control_url {
        opened["payload"] = json!({"controlUrl": url});
    }
    let (status, v) = srv
        .post(
            session,
            &json!([
                opened,
                {"id": "req", "type": "action.required", "runId": "r1", "actionId": "a1",
                 "payload": {"actionType": "tool_approval", "title": "Run the migration?"}},
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(
        !srv.snapshot(session)
            .await
            .to_string()
            .contains("/controls"),
        "the control URL never reaches the snapshot"
    );
    let (_, log) = srv
        .get_json(&format!("/v1/sessions/{session}/events"))
        .await;
    assert_eq!(log["events"][0]["event"]["class"], "session.opened");
    assert!(
        !log.to_string().contains("controlUrl"),
        "nor the event log readers see: {log}"
    );
}

async fn post_raw(srv: &TestServer, path: &str, body: &str) -> (u16, Value) {
    let r = srv
        .http
        .post(srv.url(path))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    if status >= 400 {
        assert_eq!(r.headers()["content-type"], "application/problem+json");
    }
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn decide(srv: &TestServer, session: &str, action: &str, body: Value) -> (u16, Value) {
    post_raw(
        srv,
        &format!("/v1/sessions/{session}/actions/{action}"),
        &body.to_string(),
    )
    .await
}

async fn action_status(srv: &TestServer, session: &str) -> Value {
    srv.snapshot(session).await["state"]["actions"]["a1"]["status"].clone()
}

#[tokio::test]
async fn decision_is_relayed_signed_and_the_action_stays_pending() {
    let rt = Runtime::start(Mode::Ok).await;
    let srv = server(|_| {}).await;
    open_session(&srv, "s1", Some(&rt.url)).await;
    let body = json!({"decision": "answer", "requestId": "req-1", "answer": {"choice": "yes"}, "message": "go"});
    let (status, v) = decide(&srv, "s1", "a1", body.clone()).await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["status"], "relayed");
    assert_eq!(v["runtimeStatus"], 200);
    assert_eq!(v["attempts"], 1);
    let key = v["idempotencyKey"].as_str().unwrap().to_string();

    let seen = rt.seen();
    assert_eq!(seen.len(), 1);
    seen[0].assert_signed();
    assert_eq!(seen[0].header("idempotency-key"), key);
    let expected = json!({
        "kind": "action", "sessionId": "s1", "actionId": "a1", "decision": "answer",
        "requestId": "req-1", "answer": {"choice": "yes"}, "message": "go",
        "idempotencyKey": key,
    });
    assert_eq!(
        seen[0].body,
        serde_json::to_vec(&expected).unwrap(),
        "exact bytes"
    );

    // Relayed is not resolved: only the runtime's own event resolves it.
    assert_eq!(action_status(&srv, "s1").await, "pending");
    assert_eq!(
        srv.snapshot("s1").await["state"]["runtime"]["pendingActions"],
        1
    );

    // The same logical request (same requestId) carries the same key.
    let (status, again) = decide(&srv, "s1", "a1", body).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["idempotencyKey"], key.as_str());
    assert_eq!(rt.seen()[1].header("idempotency-key"), key);
    assert_eq!(action_status(&srv, "s1").await, "pending");

    let (status, _) = srv
        .post(
            "s1",
            &json!({"id": "res", "type": "action.resolved", "runId": "r1", "actionId": "a1",
                    "payload": {"decision": "answered"}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(action_status(&srv, "s1").await, "resolved");

    // Resolved: 409, and the runtime hears nothing more.
    let (status, p) = decide(&srv, "s1", "a1", json!({"decision": "approve"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (409, Some("action_already_resolved"))
    );
    assert_eq!(rt.seen().len(), 2);

    let metrics = srv.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("projector_control_relays_total")
                && l.contains("outcome=\"relayed\"")),
        "{metrics}"
    );
}

#[tokio::test]
async fn server_errors_are_retried_with_the_same_key() {
    let rt = Runtime::start(Mode::FailThenOk(503, 2)).await;
    let srv = server(|c| c.max_retries = 2).await;
    open_session(&srv, "s", Some(&rt.url)).await;
    let (status, v) = decide(&srv, "s", "a1", json!({"decision": "approve"})).await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["attempts"], 3);
    assert_eq!(v["runtimeStatus"], 202);
    let seen = rt.seen();
    assert_eq!(seen.len(), 3);
    for s in &seen {
        s.assert_signed();
        assert_eq!(
            s.header("idempotency-key"),
            v["idempotencyKey"].as_str().unwrap()
        );
        assert_eq!(s.body, seen[0].body, "the same body on every attempt");
        assert_eq!(s.json()["decision"], "approve");
    }
    assert_eq!(action_status(&srv, "s").await, "pending");
}

#[tokio::test]
async fn server_errors_every_time_give_502_after_all_attempts() {
    let rt = Runtime::start(Mode::Always(500)).await;
    let srv = server(|c| c.max_retries = 3).await;
    open_session(&srv, "s", Some(&rt.url)).await;
    let (status, p) = decide(&srv, "s", "a1", json!({"decision": "reject"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (502, Some("runtime_unreachable")),
        "{p}"
    );
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("4 attempt") && detail.contains("500"),
        "{detail}"
    );
    assert_eq!(rt.seen().len(), 4);
    let keys: Vec<String> = rt
        .seen()
        .iter()
        .map(|s| s.header("idempotency-key").to_string())
        .collect();
    assert!(keys.iter().all(|k| *k == keys[0]));
    assert_eq!(action_status(&srv, "s").await, "pending");
}

#[tokio::test]
async fn runtime_down_gives_502_unreachable() {
    let url = down_url().await;
    let srv = server(|_| {}).await;
    open_session(&srv, "s", Some(&url)).await;
    let (status, p) = decide(&srv, "s", "a1", json!({"decision": "approve"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (502, Some("runtime_unreachable")),
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("3 attempt"), "{p}");
    assert!(
        !p["detail"].as_str().unwrap().contains("127.0.0.1"),
        "no topology in replies"
    );
}

#[tokio::test]
async fn slow_runtime_times_out_within_bounds() {
    let rt = Runtime::start(Mode::Slow).await;
    let srv = server(|c| {
        c.timeout_ms = 200;
        c.max_retries = 1;
    })
    .await;
    open_session(&srv, "s", Some(&rt.url)).await;
    let t0 = Instant::now();
    let (status, p) = decide(&srv, "s", "a1", json!({"decision": "approve"})).await;
    let took = t0.elapsed();
    assert_eq!(
        (status, p["code"].as_str()),
        (502, Some("runtime_unreachable")),
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("200 ms"), "{p}");
    assert_eq!(rt.seen().len(), 2, "max_retries + 1 attempts");
    // Two attempts of 200 ms and one 10 ms backoff, with generous slack.
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let rt = Runtime::start(Mode::Always(409)).await;
    let srv = server(|c| c.max_retries = 3).await;
    open_session(&srv, "s", Some(&rt.url)).await;
    let (status, p) = decide(&srv, "s", "a1", json!({"decision": "approve"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (502, Some("runtime_rejected")),
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("409"), "{p}");
    assert_eq!(rt.seen().len(), 1);
}

#[tokio::test]
async fn unknown_action_and_bad_bodies_never_reach_the_runtime() {
    let rt = Runtime::start(Mode::Ok).await;
    let srv = server(|_| {}).await;
    open_session(&srv, "s", Some(&rt.url)).await;
    let (status, p) = decide(&srv, "s", "nope", json!({"decision": "approve"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (404, Some("unknown_action")),
        "{p}"
    );
    for body in [
        r#"{"decision":"maybe"}"#,
        r#"{"answer":"x"}"#,
        r#"["approve"]"#,
        "not json",
        r#"{"decision":"approve","requestId":42}"#,
    ] {
        let (status, p) = post_raw(&srv, "/v1/sessions/s/actions/a1", body).await;
        assert_eq!(
            (status, p["code"].as_str()),
            (422, Some("invalid_decision")),
            "{body}: {p}"
        );
    }
    let (status, p) = post_raw(&srv, "/v1/sessions/s/controls", r#"{"type":"pause"}"#).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (422, Some("invalid_control")),
        "{p}"
    );
    let big = format!(
        r#"{{"decision":"approve","message":"{}"}}"#,
        "x".repeat(70_000)
    );
    let (status, p) = post_raw(&srv, "/v1/sessions/s/actions/a1", &big).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (413, Some("body_too_large")),
        "{p}"
    );
    assert!(rt.seen().is_empty());
}

#[tokio::test]
async fn hosts_off_the_allowlist_are_never_called() {
    let rt = Runtime::start(Mode::Ok).await;
    // The same runtime under another name: not on the list.
    let url = rt.url.replace("127.0.0.1", "localhost");
    let srv = server(|_| {}).await;
    open_session(&srv, "s", Some(&url)).await;
    let (status, p) = decide(&srv, "s", "a1", json!({"decision": "approve"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (403, Some("host_not_allowed")),
        "{p}"
    );
    assert!(
        !p["detail"].as_str().unwrap().contains("localhost"),
        "no topology in replies"
    );
    // Only the right port, when the entry names one.
    let port = rt
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let other = server(|c| {
        c.allowed_hosts = vec![format!("127.0.0.1:{}", port.parse::<u16>().unwrap() ^ 1)]
    })
    .await;
    open_session(&other, "s", Some(&rt.url)).await;
    let (status, _) = decide(&other, "s", "a1", json!({"decision": "approve"})).await;
    assert_eq!(status, 403);
    // And an empty list allows nothing.
    let none = server(|c| c.allowed_hosts.clear()).await;
    open_session(&none, "s", Some(&rt.url)).await;
    let (status, _) = post_raw(&none, "/v1/sessions/s/controls", r#"{"type":"cancel"}"#).await;
    assert_eq!(status, 403);
    assert!(rt.seen().is_empty());
}

#[tokio::test]
async fn no_control_url_is_409_unless_a_default_is_configured() {
    let rt = Runtime::start(Mode::Ok).await;
    let srv = server(|_| {}).await;
    open_session(&srv, "s", None).await;
    let (status, p) = decide(&srv, "s", "a1", json!({"decision": "approve"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (409, Some("no_control_url")),
        "{p}"
    );
    let (status, p) = post_raw(&srv, "/v1/sessions/s/controls", r#"{"type":"cancel"}"#).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (409, Some("no_control_url")),
        "{p}"
    );
    assert!(rt.seen().is_empty());

    let url = rt.url.clone();
    let with_default = server(|c| c.default_url = url).await;
    open_session(&with_default, "s", None).await;
    let (status, v) = decide(&with_default, "s", "a1", json!({"decision": "approve"})).await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(rt.seen().len(), 1);
}

#[tokio::test]
async fn run_controls_are_relayed_with_kind_control() {
    let rt = Runtime::start(Mode::Ok).await;
    let srv = server(|_| {}).await;
    open_session(&srv, "s", Some(&rt.url)).await;
    let (status, v) = post_raw(
        &srv,
        "/v1/sessions/s/controls",
        r#"{"type":"cancel","reason":"user"}"#,
    )
    .await;
    assert_eq!(status, 202, "{v}");
    let (status, _) = post_raw(
        &srv,
        "/v1/sessions/s/controls",
        r#"{"type":"steer","message":"shorter"}"#,
    )
    .await;
    assert_eq!(status, 202);
    let seen = rt.seen();
    assert_eq!(seen.len(), 2);
    seen[0].assert_signed();
    assert_eq!(
        seen[0].json(),
        json!({"kind": "control", "sessionId": "s", "type": "cancel", "reason": "user",
               "idempotencyKey": v["idempotencyKey"]})
    );
    assert_eq!(seen[1].json()["type"], "steer");
    assert_eq!(seen[1].json()["message"], "shorter");
    assert_ne!(
        seen[0].header("idempotency-key"),
        seen[1].header("idempotency-key")
    );
    // A control changes nothing in the projection by itself.
    assert_eq!(action_status(&srv, "s").await, "pending");
}

#[tokio::test]
async fn an_answer_that_breaks_the_request_schema_is_422_and_never_relayed() {
    let rt = Runtime::start(Mode::Ok).await;
    let srv = server(|_| {}).await;
    let (status, v) = srv
        .post(
            "form",
            &json!([
                {"id": "open", "type": "session.created", "runId": "r1",
                 "payload": {"controlUrl": rt.url}},
                {"id": "req", "type": "action.required", "runId": "r1", "actionId": "a1",
                 "payload": {"actionType": "structured_input", "question": "Deploy where?",
                   "inputSchema": {"type": "object",
                     "properties": {"region": {"enum": ["eu", "us"]},
                                    "replicas": {"type": "integer", "minimum": 1}},
                     "required": ["region"], "additionalProperties": false}}},
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let state = srv.snapshot("form").await["state"]["actions"]["a1"].clone();
    assert_eq!(state["question"], "Deploy where?");
    assert_eq!(state["schema"]["required"], json!(["region"]));

    let bad = json!({"decision": "answer", "answer": {"region": "mars", "replicas": 0}});
    let (status, p) = decide(&srv, "form", "a1", bad).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (422, Some("invalid_answer")),
        "{p}"
    );
    let paths: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/answer/region"), "{p}");
    assert!(paths.contains(&"/answer/replicas"), "{p}");
    let (status, p) = decide(&srv, "form", "a1", json!({"decision": "answer"})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (422, Some("invalid_answer")),
        "no answer: {p}"
    );
    assert!(rt.seen().is_empty(), "nothing invalid reached the runtime");

    // A valid answer goes through; approve/reject are not answers.
    let good = json!({"decision": "answer", "answer": {"region": "eu", "replicas": 2}});
    let (status, v) = decide(&srv, "form", "a1", good).await;
    assert_eq!(status, 202, "{v}");
    let (status, v) = decide(&srv, "form", "a1", json!({"decision": "reject"})).await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(rt.seen().len(), 2);
    assert_eq!(action_status(&srv, "form").await, "pending");
}
