//! The AI SDK chat gateway (`POST /v1/chat` with `[upstream] chat_url`)
//! against a local upstream route that streams a UI message stream as the
//! test tells it to: the browser's answer comes from the session's log, the
//! upstream run goes on when the browser leaves, another tab resumes, and a
//! `cancel` control aborts the upstream request.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::common::{Sse, TestServer};

/// One scripted answer: `first` at once, then `rest` once the test opens
/// the gate. `dropped` is notified when the gateway lets go of the body
/// (an aborted upstream request).
struct Script {
    first: Vec<Value>,
    gate: Arc<Notify>,
    rest: Vec<Value>,
    dropped: Arc<Notify>,
}

/// An upstream AI SDK route: each request's body is recorded, and it
/// answers with the next script.
#[derive(Clone, Default)]
struct Upstream {
    bodies: Arc<Mutex<Vec<Value>>>,
    scripts: Arc<Mutex<Vec<Script>>>,
}

/// Notifies when dropped.
struct OnDrop(Arc<Notify>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

fn sse(c: &Value) -> Result<Bytes, std::io::Error> {
    Ok(Bytes::from(format!("data: {c}\n\n")))
}

async fn route(State(u): State<Upstream>, body: Bytes) -> axum::response::Response {
    u.bodies
        .lock()
        .unwrap()
        .push(serde_json::from_slice(&body).unwrap());
    let script = u.scripts.lock().unwrap().remove(0);
    let guard = OnDrop(script.dropped.clone());
    let first = futures_util::stream::iter(script.first.iter().map(sse).collect::<Vec<_>>());
    let gate = script.gate.clone();
    let rest: Vec<_> = script.rest.iter().map(sse).collect();
    let later = futures_util::stream::once(async move {
        gate.notified().await;
        futures_util::stream::iter(rest)
    })
    .flatten();
    let body = first.chain(later).map(move |b| {
        let _ = &guard;
        b
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .header("x-vercel-ai-ui-message-stream", "v1")
        .body(Body::from_stream(body))
        .unwrap()
}

impl Upstream {
    async fn start() -> (Upstream, String) {
        let u = Upstream::default();
        let app = Router::new()
            .route("/api/chat", post(route))
            .with_state(u.clone());
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        (u, format!("http://{addr}/api/chat"))
    }

    /// Answer the next request with `first`, then `rest` after the gate.
    fn script(&self, first: Vec<Value>, rest: Vec<Value>) -> (Arc<Notify>, Arc<Notify>) {
        let (gate, dropped) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        self.scripts.lock().unwrap().push(Script {
            first,
            gate: gate.clone(),
            rest,
            dropped: dropped.clone(),
        });
        (gate, dropped)
    }
}

async fn gateway() -> (TestServer, Upstream) {
    let (up, url) = Upstream::start().await;
    let srv = TestServer::builder()
        .config(|c| {
            c.controls.allowed_hosts = vec!["127.0.0.1".into()];
            c.controls.signing_secret = "gateway-test".into();
            c.upstream.chat_url = url;
        })
        .start()
        .await;
    (srv, up)
}

fn chat_request(chat: &str, user_id: &str, text: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message",
           "messages": [{"id": user_id, "role": "user", "parts": [{"type": "text", "text": text}]}]})
}

async fn post_chat(srv: &TestServer, body: &Value) -> reqwest::Response {
    srv.http
        .post(srv.url("/v1/chat"))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The next UI message chunk of an AI SDK stream.
async fn chunk(s: &mut Sse) -> Value {
    s.next().await.expect("a chunk").data
}

/// The text of an AI SDK stream's deltas, read up to its `finish`.
async fn text_to_finish(s: &mut Sse) -> String {
    let mut text = String::new();
    loop {
        let c = chunk(s).await;
        if c["type"] == "text-delta" {
            text.push_str(c["delta"].as_str().unwrap());
        }
        if c["type"] == "finish" {
            return text;
        }
    }
}

#[tokio::test]
async fn the_answer_comes_from_the_log_and_outlives_the_browser() {
    let (srv, up) = gateway().await;
    let (gate, _) = up.script(
        vec![
            json!({"type": "start", "messageId": "a1"}),
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "text-delta", "id": "t", "delta": "Hel"}),
        ],
        vec![
            json!({"type": "text-delta", "id": "t", "delta": "lo."}),
            json!({"type": "text-end", "id": "t"}),
            json!({"type": "finish"}),
        ],
    );
    let request = chat_request("chat-1", "u1", "Hi there");
    let resp = post_chat(&srv, &request).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let mut browser = Sse::from_response(resp);
    assert_eq!(chunk(&mut browser).await["type"], "start");
    let mut text = String::new();
    while text != "Hel" {
        let c = chunk(&mut browser).await;
        if c["type"] == "text-delta" {
            text.push_str(c["delta"].as_str().unwrap());
        }
    }
    assert_eq!(
        up.bodies.lock().unwrap()[0],
        request,
        "the body goes unchanged"
    );
    // The browser leaves; another tab resumes; the upstream run goes on.
    drop(browser);
    let r = srv
        .http
        .get(srv.url("/v1/chat/chat-1/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let mut tab = Sse::from_response(r);
    gate.notify_one();
    assert_eq!(text_to_finish(&mut tab).await, "Hello.");
    let snap = srv.snapshot("chat-1").await;
    let ms = snap["state"]["messages"].as_array().unwrap();
    assert_eq!(ms[0]["id"], "u1");
    assert_eq!(ms[0]["parts"][0]["text"], "Hi there");
    assert_eq!(ms[1]["id"], "a1");
    assert_eq!(ms[1]["status"], "complete");
    assert_eq!(ms[1]["parts"][0]["text"], "Hello.");
}

#[tokio::test]
async fn a_cancel_control_aborts_the_upstream_request() {
    let (srv, up) = gateway().await;
    let (_gate, dropped) = up.script(
        vec![
            json!({"type": "start", "messageId": "a2"}),
            json!({"type": "text-delta", "id": "t", "delta": "Once upon"}),
        ],
        vec![json!({"type": "finish"})],
    );
    let resp = post_chat(&srv, &chat_request("chat-2", "u1", "Write a long essay")).await;
    let mut browser = Sse::from_response(resp);
    while chunk(&mut browser).await["type"] != "text-delta" {}
    let r = srv
        .http
        .post(srv.url("/v1/sessions/chat-2/controls"))
        .json(&json!({"type": "cancel"}))
        .send()
        .await
        .unwrap();
    let (status, v) = (r.status().as_u16(), r.json::<Value>().await.unwrap());
    assert_eq!(
        (status, v["status"].as_str()),
        (202, Some("cancelled")),
        "{v}"
    );
    // The upstream sees its response dropped: the request is aborted.
    tokio::time::timeout(std::time::Duration::from_secs(10), dropped.notified())
        .await
        .expect("the upstream request is aborted");
    // The browser's stream ends with an abort; the session says cancelled.
    while chunk(&mut browser).await["type"] != "abort" {}
    let snap = srv.snapshot("chat-2").await;
    assert_eq!(snap["state"]["runtime"]["status"], "cancelled");
    assert_eq!(snap["state"]["messages"][1]["status"], "aborted");
}

#[tokio::test]
async fn without_an_upstream_the_gateway_says_so() {
    let srv = TestServer::builder().start().await;
    let r = post_chat(&srv, &chat_request("c", "u", "hi")).await;
    assert_eq!(r.status(), 409);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "no_upstream");
    let r = srv
        .http
        .post(srv.url("/v1/chat"))
        .json(&json!({"messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

/// A runtime's control endpoint: records each relayed body.
async fn runtime() -> (Arc<Mutex<Vec<Value>>>, Arc<Notify>, String) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let got = Arc::new(Notify::new());
    let (s, g) = (seen.clone(), got.clone());
    let app = Router::new().route(
        "/controls",
        post(move |body: Bytes| {
            let (s, g) = (s.clone(), g.clone());
            async move {
                s.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                g.notify_one();
                "{}"
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (seen, got, format!("http://{addr}/controls"))
}

/// A server with no upstream, whose session `session` is controlled by a
/// local runtime (see [`runtime`]); the runtime's record of what it got.
async fn with_runtime(
    session: &str,
    start_timeout_secs: u64,
) -> (TestServer, Arc<Mutex<Vec<Value>>>, Arc<Notify>) {
    let (seen, got, url) = runtime().await;
    let srv = TestServer::builder()
        .config(|c| {
            c.controls.allowed_hosts = vec!["127.0.0.1".into()];
            c.controls.signing_secret = "gateway-test".into();
            c.upstream.start_timeout_secs = start_timeout_secs;
        })
        .start()
        .await;
    srv.post(
        session,
        &json!({"id": "o", "type": "session.opened", "payload": {"controlUrl": url}}),
    )
    .await;
    (srv, seen, got)
}

#[tokio::test]
async fn without_an_upstream_the_chat_goes_to_the_runtime_and_streams_its_answer() {
    let (srv, seen, got) = with_runtime("rt", 5).await;
    let http = srv.http.clone();
    let chat_url = srv.url("/v1/chat");
    let pending = tokio::spawn(async move {
        http.post(chat_url)
            .json(&chat_request("rt", "u1", "Summarise the log"))
            .send()
            .await
            .unwrap()
    });
    // The runtime hears a `send` with the message, and answers in the session.
    got.notified().await;
    let send = seen.lock().unwrap()[0].clone();
    assert_eq!(
        (send["kind"].as_str(), send["type"].as_str()),
        (Some("control"), Some("send"))
    );
    assert_eq!(send["message"], "Summarise the log");
    srv.post(
        "rt",
        &json!([
            {"id": "a", "type": "run.started", "runId": "r", "turnId": "t2"},
            {"id": "b", "type": "text.delta", "runId": "r", "turnId": "t2", "messageId": "ans", "payload": {"delta": "All green."}},
            {"id": "c", "type": "run.finished", "runId": "r", "turnId": "t2"},
        ]),
    )
    .await;
    let resp = pending.await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut s = Sse::from_response(resp);
    let mut text = String::new();
    loop {
        let c = chunk(&mut s).await;
        if c["type"] == "text-delta" {
            text.push_str(c["delta"].as_str().unwrap());
        }
        if c["type"] == "finish" {
            break;
        }
    }
    assert_eq!(text, "All green.");
    let snap = srv.snapshot("rt").await;
    assert_eq!(
        snap["state"]["messages"][0]["parts"][0]["text"],
        "Summarise the log"
    );
}

#[tokio::test]
async fn without_an_upstream_no_answer_in_time_is_504() {
    let (srv, _seen, _got) = with_runtime("quiet", 1).await;
    let r = post_chat(&srv, &chat_request("quiet", "u1", "hello?")).await;
    assert_eq!(r.status(), 504);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "no_answer");
}

#[tokio::test]
async fn without_an_upstream_an_approval_response_is_relayed_as_the_decision() {
    let (srv, seen, got) = with_runtime("ap", 5).await;
    srv.post(
        "ap",
        &json!([
            {"id": "a", "type": "run.started", "runId": "r", "turnId": "t"},
            {"id": "b", "type": "tool.started", "runId": "r", "turnId": "t", "messageId": "m1",
             "toolCallId": "c1", "payload": {"toolName": "shell", "input": {"cmd": "ls"}}},
            {"id": "c", "type": "action.required", "runId": "r", "turnId": "t", "actionId": "ap-1",
             "toolCallId": "c1", "payload": {"actionType": "tool_approval"}},
        ]),
    )
    .await;
    let snap = srv.snapshot("ap").await;
    let part = snap["state"]["messages"][0]["parts"][0].clone();
    assert_eq!(part["state"], "approval-requested", "{part}");
    // What `addToolApprovalResponse` + the next send put in the request.
    let mut responded = snap["state"]["messages"][0].clone();
    responded["parts"][0]["state"] = json!("approval-responded");
    responded["parts"][0]["approval"] =
        json!({"id": "ap-1", "approved": false, "reason": "too risky"});
    let body = json!({"id": "ap", "trigger": "submit-message", "messages": [responded]});
    let http = srv.http.clone();
    let chat_url = srv.url("/v1/chat");
    let pending =
        tokio::spawn(async move { http.post(chat_url).json(&body).send().await.unwrap() });
    got.notified().await;
    let decision = seen.lock().unwrap()[0].clone();
    assert_eq!(
        (
            decision["kind"].as_str(),
            decision["actionId"].as_str(),
            decision["decision"].as_str()
        ),
        (Some("action"), Some("ap-1"), Some("reject")),
        "{decision}"
    );
    assert_eq!(decision["message"], "too risky");
    // Still pending: only the runtime resolves it; its resolution denies the call.
    assert_eq!(
        srv.snapshot("ap").await["state"]["actions"]["ap-1"]["status"],
        "pending"
    );
    srv.post(
        "ap",
        &json!([
            {"id": "d", "type": "action.resolved", "runId": "r", "turnId": "t", "actionId": "ap-1",
             "payload": {"decision": "rejected"}},
            {"id": "e", "type": "run.finished", "runId": "r", "turnId": "t"},
        ]),
    )
    .await;
    let resp = pending.await.unwrap();
    assert_eq!(resp.status(), 200, "the continued message streams");
    let mut s = Sse::from_response(resp);
    let mut denied = false;
    loop {
        let c = chunk(&mut s).await;
        denied |= c["type"] == "tool-output-denied";
        if c["type"] == "finish" {
            break;
        }
    }
    assert!(denied, "the browser sees the denial");
}

#[tokio::test]
async fn an_approval_round_trip_through_the_gateway_continues_the_same_message() {
    let (srv, up) = gateway().await;
    up.script(
        vec![
            json!({"type": "start", "messageId": "a1"}),
            json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "shell", "input": {"cmd": "ls"}}),
            json!({"type": "tool-approval-request", "approvalId": "ap1", "toolCallId": "c1"}),
            json!({"type": "finish"}),
        ],
        vec![],
    );
    let resp = post_chat(&srv, &chat_request("chat-ap", "u1", "List the files")).await;
    let mut s = Sse::from_response(resp);
    while chunk(&mut s).await["type"] != "finish" {}
    let snap = srv.snapshot("chat-ap").await;
    assert_eq!(snap["state"]["actions"]["ap1"]["status"], "pending");
    let mut answer = snap["state"]["messages"][1].clone();
    assert_eq!(
        answer["parts"][0]["state"], "approval-requested",
        "{answer}"
    );
    // The user approves (`addToolApprovalResponse`); the route continues the
    // same message with the tool's output.
    answer["parts"][0]["state"] = json!("approval-responded");
    answer["parts"][0]["approval"] = json!({"id": "ap1", "approved": true});
    up.script(
        vec![
            json!({"type": "start", "messageId": "a1"}),
            json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"files": 3}}),
            json!({"type": "text-start", "id": "t2"}),
            json!({"type": "text-delta", "id": "t2", "delta": "3 files."}),
            json!({"type": "text-end", "id": "t2"}),
            json!({"type": "finish"}),
        ],
        vec![],
    );
    let mut messages = snap["state"]["messages"].as_array().unwrap().clone();
    messages[1] = answer;
    let body = json!({"id": "chat-ap", "trigger": "submit-message", "messages": messages});
    let resp = post_chat(&srv, &body).await;
    assert_eq!(resp.status(), 200);
    // The browser's answer is the continued message to its new end.
    let mut s = Sse::from_response(resp);
    let mut seen = Vec::new();
    loop {
        let c = chunk(&mut s).await;
        if c["type"] == "finish" {
            break;
        }
        seen.push(c);
    }
    assert!(
        seen.iter()
            .any(|c| c["type"] == "text-delta" && c["delta"] == "3 files."),
        "the answer goes on past the approval: {seen:?}"
    );
    let snap = srv.snapshot("chat-ap").await;
    let a = &snap["state"]["actions"]["ap1"];
    assert_eq!(
        (a["status"].as_str(), a["decision"].as_str()),
        (Some("resolved"), Some("approved")),
        "{a}"
    );
    let m = &snap["state"]["messages"][1];
    assert_eq!(m["id"], "a1");
    let parts = m["parts"].as_array().unwrap();
    assert_eq!(parts[0]["state"], "output-available", "{m}");
    assert!(parts.iter().any(|p| p["text"] == "3 files."), "{m}");
}

/// A `useChat` resume between the user's turn and the assistant's first
/// chunk: the answer is on its way, so the resume waits for it (up to
/// `[upstream] start_timeout_secs`) instead of answering 204 and leaving
/// the page without the answer.
#[tokio::test]
async fn a_resume_before_the_answer_starts_waits_for_it() {
    let srv = TestServer::builder()
        .config(|c| c.upstream.start_timeout_secs = 1)
        .start()
        .await;
    let turn = json!([
        {"type": "turn.submitted", "runId": "r", "messageId": "u1", "payload": {"text": "hi"}},
        {"type": "run.started", "runId": "r"},
    ]);
    for s in ["waits", "quiet"] {
        let (status, body) = srv.post(s, &turn).await;
        assert_eq!(status, 200, "{body}");
    }
    let resume = |s: &str| {
        srv.http
            .get(srv.url(&format!("/v1/chat/{s}/stream")))
            .send()
    };

    // Nothing starts: 204, once the wait is over (not at once).
    let t = std::time::Instant::now();
    let r = resume("quiet").await.unwrap();
    assert_eq!(r.status(), 204);
    assert!(
        t.elapsed() >= std::time::Duration::from_secs(1),
        "it waited"
    );

    // The answer starts while the resume waits (or, if the resume comes
    // second, is streaming when it looks): it streams, whole.
    let waiting = tokio::spawn(resume("waits"));
    let answer = json!([
        {"type": "text.delta", "runId": "r", "messageId": "a1", "payload": {"delta": "Hel"}},
        {"type": "text.delta", "runId": "r", "messageId": "a1", "payload": {"delta": "lo."}},
    ]);
    let (status, body) = srv.post("waits", &answer).await;
    assert_eq!(status, 200, "{body}");
    let r = waiting.await.unwrap().unwrap();
    let (status, body) = srv
        .post("waits", &json!({"type": "run.finished", "runId": "r"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(r.status(), 200);
    let mut s = Sse::from_response(r);
    let first = chunk(&mut s).await;
    assert_eq!(
        (first["type"].as_str(), first["messageId"].as_str()),
        (Some("start"), Some("a1"))
    );
    assert_eq!(text_to_finish(&mut s).await, "Hello.");

    // A finished run has nothing on its way: 204 at once.
    let t = std::time::Instant::now();
    assert_eq!(resume("waits").await.unwrap().status(), 204);
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
}
