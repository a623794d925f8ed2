//! Auth and limits end to end: the auth matrix (no token, expired, bad
//! signature, other session, wrong scope, good token) on every endpoint,
//! key kinds and token transports, streams closed at token expiry, the
//! limits with their problem codes, and secrets kept out of logs.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::common::{lime, Proc, TestServer};

const SECRET: &str = "test-hs256-secret";
const KEYS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/keys");

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[derive(Clone)]
pub(crate) struct Tok {
    alg: Algorithm,
    kid: Option<&'static str>,
    key: EncodingKey,
    sessions: Value,
    scope: Value,
    exp: i64,
}

impl Tok {
    pub(crate) fn hs(scope: &str, sessions: &[&str]) -> Tok {
        Tok {
            alg: Algorithm::HS256,
            kid: None,
            key: EncodingKey::from_secret(SECRET.as_bytes()),
            sessions: json!(sessions),
            scope: json!(scope),
            exp: now() + 600,
        }
    }
    pub(crate) fn exp_in(mut self, secs: i64) -> Tok {
        self.exp = now() + secs;
        self
    }
    fn signed_with(mut self, secret: &str) -> Tok {
        self.key = EncodingKey::from_secret(secret.as_bytes());
        self
    }
    fn pem(mut self, alg: Algorithm, kid: &'static str, file: &str) -> Tok {
        let pem = std::fs::read(format!("{KEYS}/{file}")).unwrap();
        self.key = match alg {
            Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem).unwrap(),
            _ => EncodingKey::from_ec_pem(&pem).unwrap(),
        };
        self.alg = alg;
        self.kid = Some(kid);
        self
    }
    pub(crate) fn jwt(&self) -> String {
        let mut h = Header::new(self.alg);
        h.kid = self.kid.map(str::to_string);
        let claims = json!({"sub": "tester", "exp": self.exp, "sessions": self.sessions, "scope": self.scope});
        encode(&h, &claims, &self.key).unwrap()
    }
}

pub(crate) async fn jwt_server() -> TestServer {
    TestServer::builder()
        .config(|c| {
            c.auth.mode = agent_projector::config::AuthMode::Jwt;
            c.auth.hs256_secret = SECRET.into();
            c.auth.leeway_secs = 0;
            c.auth.public_keys = vec![
                agent_projector::config::PublicKeyConfig {
                    kid: "rsa-1".into(),
                    alg: "RS256".into(),
                    path: format!("{KEYS}/rsa-public.pem"),
                },
                agent_projector::config::PublicKeyConfig {
                    kid: "ec-1".into(),
                    alg: "ES256".into(),
                    path: format!("{KEYS}/ec-public.pem"),
                },
            ];
            c.auth.jwks_file = format!("{KEYS}/jwks.json");
        })
        .start()
        .await
}

/// One request of the matrix: (method, path, scope it needs, names a session).
const ENDPOINTS: &[(&str, &str, &str, bool)] = &[
    ("POST", "/v1/sessions/s1/events", "publish", true),
    ("GET", "/v1/sessions/s1/snapshot", "subscribe", true),
    ("GET", "/v1/sessions/s1/events", "subscribe", true),
    ("GET", "/v1/sessions/s1/messages", "subscribe", true),
    (
        "GET",
        "/v1/sessions/s1/messages?format=umo",
        "subscribe",
        true,
    ),
    ("GET", "/v1/sessions/s1/stream", "subscribe", true),
    (
        "GET",
        "/v1/sessions/s1/messages/m1/ui-stream",
        "subscribe",
        true,
    ),
    ("GET", "/v1/chat/s1/stream", "subscribe", true),
    ("GET", "/v1/streams?sessions=s1", "subscribe", true),
    ("GET", "/v1/sessions/stream", "subscribe", false),
    ("GET", "/v1/sessions", "admin", false),
    ("GET", "/metrics", "admin", false),
    ("POST", "/v1/sessions/s1/actions/a1", "control", true),
    ("POST", "/v1/sessions/s1/controls", "control", true),
    ("DELETE", "/v1/sessions/s-del", "admin", true),
    // Durable Streams: the stream path is matched as a session id is.
    ("PUT", "/ds/v1/stream/s1", "publish", true),
    ("POST", "/ds/v1/stream/s1", "publish", true),
    ("GET", "/ds/v1/stream/s1", "subscribe", true),
    ("DELETE", "/ds/v1/stream/s-del", "publish", true),
    // A session's stream: the session id (not the path) in the claim.
    ("POST", "/ds/v1/stream/sessions/s1", "publish", true),
    ("GET", "/ds/v1/stream/sessions/s1", "subscribe", true),
];

async fn call(srv: &TestServer, method: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    let body = if path.ends_with("/controls") {
        json!({"type": "cancel"})
    } else if path.contains("/actions/") {
        json!({"decision": "approve"})
    } else {
        json!({"type": "run.started", "runId": "r"})
    };
    let mut req = match method {
        "POST" => srv.http.post(srv.url(path)).json(&body),
        "PUT" => srv.http.put(srv.url(path)).json(&body),
        "DELETE" => srv.http.delete(srv.url(path)),
        _ => srv.http.get(srv.url(path)),
    };
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let is_problem = r
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "application/problem+json");
    if status == 401 {
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
    }
    let body = if is_problem {
        r.json().await.unwrap()
    } else {
        Value::Null
    };
    (status, body)
}

#[tokio::test]
async fn every_endpoint_checks_token_session_and_scope() {
    let srv = jwt_server().await;
    let admin = Tok::hs("admin", &["*"]).jwt();
    // Seed s1 with a message m1 so that the ui-stream exists.
    let (s, _) = srv
        .http
        .post(srv.url("/v1/sessions/s1/events"))
        .bearer_auth(&admin)
        .json(&json!([{"type": "run.started", "runId": "r"}, {"type": "text.delta", "runId": "r", "messageId": "m1", "payload": {"delta": "hi"}}, {"type": "action.required", "runId": "r", "actionId": "a1"}]))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(s, 200);
    // The session the DELETE row deletes exists (deleting one that never
    // existed is 404).
    let (s, _) = srv
        .http
        .post(srv.url("/v1/sessions/s-del/events"))
        .bearer_auth(&admin)
        .json(&json!({"type": "run.started", "runId": "r"}))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(s, 200);
    let r = srv
        .http
        .put(srv.url("/ds/v1/stream/s-del"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    for &(method, path, scope, has_session) in ENDPOINTS {
        let ctx = format!("{method} {path}");
        let (st, p) = call(&srv, method, path, None).await;
        assert_eq!(
            (st, p["code"].as_str()),
            (401, Some("missing_token")),
            "{ctx}: no token"
        );
        let expired = Tok::hs(scope, &["*"]).exp_in(-60).jwt();
        let (st, p) = call(&srv, method, path, Some(&expired)).await;
        assert_eq!(
            (st, p["code"].as_str()),
            (401, Some("token_expired")),
            "{ctx}: expired"
        );
        let forged = Tok::hs(scope, &["*"]).signed_with("not-the-secret").jwt();
        let (st, p) = call(&srv, method, path, Some(&forged)).await;
        assert_eq!(
            (st, p["code"].as_str()),
            (401, Some("invalid_token")),
            "{ctx}: bad signature"
        );
        let (st, p) = call(&srv, method, path, Some("not.a.jwt")).await;
        assert_eq!(
            (st, p["code"].as_str()),
            (401, Some("invalid_token")),
            "{ctx}: garbage"
        );
        if has_session {
            let other = Tok::hs(scope, &["other", "s1x*"]).jwt();
            let (st, p) = call(&srv, method, path, Some(&other)).await;
            assert_eq!(
                (st, p["code"].as_str()),
                (403, Some("session_not_allowed")),
                "{ctx}: other session"
            );
        }
        let wrong = if scope == "publish" {
            "subscribe control"
        } else {
            "publish"
        };
        let (st, p) = call(&srv, method, path, Some(&Tok::hs(wrong, &["*"]).jwt())).await;
        assert_eq!(
            (st, p["code"].as_str()),
            (403, Some("insufficient_scope")),
            "{ctx}: wrong scope"
        );
        let good = Tok::hs(scope, &["s1", "s-del"]).jwt();
        let (st, p) = call(&srv, method, path, Some(&good)).await;
        if scope == "control" {
            // Authorised; the session names no runtime to relay to.
            assert_eq!(
                (st, p["code"].as_str()),
                (409, Some("no_control_url")),
                "{ctx}: good token"
            );
        } else {
            assert!((200..300).contains(&st), "{ctx}: good token gave {st}");
        }
    }
    // Public endpoints need no token.
    for path in ["/healthz", "/readyz", "/openapi.json", "/"] {
        let r = srv.http.get(srv.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path} is public");
    }
}

#[tokio::test]
async fn key_kinds_transports_and_scope_forms() {
    let srv = jwt_server().await;
    let base = Tok::hs("subscribe publish", &["team-a/*"]);
    let kinds = [
        ("hs256 without kid", base.clone()),
        (
            "RS256 by kid",
            base.clone()
                .pem(Algorithm::RS256, "rsa-1", "rsa-private.pem"),
        ),
        (
            "ES256 by kid",
            base.clone().pem(Algorithm::ES256, "ec-1", "ec-private.pem"),
        ),
        (
            "RS256 from JWKS",
            base.clone()
                .pem(Algorithm::RS256, "jwks-rsa", "rsa-private.pem"),
        ),
    ];
    for (name, tok) in kinds {
        let (st, _) = call(
            &srv,
            "GET",
            "/v1/sessions/team-a%2Frun-1/snapshot",
            Some(&tok.jwt()),
        )
        .await;
        assert_eq!(st, 200, "{name}");
    }
    let rotated = base
        .clone()
        .pem(Algorithm::RS256, "rsa-old", "rsa-private.pem");
    let (st, p) = call(
        &srv,
        "GET",
        "/v1/sessions/team-a%2Frun-1/snapshot",
        Some(&rotated.jwt()),
    )
    .await;
    assert_eq!(
        (st, p["code"].as_str()),
        (401, Some("invalid_token")),
        "unknown kid"
    );
    // Scope as an array.
    let mut arr = Tok::hs("", &["*"]);
    arr.scope = json!(["publish"]);
    let (st, _) = call(&srv, "POST", "/v1/sessions/x/events", Some(&arr.jwt())).await;
    assert_eq!(st, 200);
    // Query parameter and cookie, for EventSource-like clients.
    let t = base.jwt();
    let r = srv
        .http
        .get(srv.url(&format!(
            "/v1/sessions/team-a%2Fq/snapshot?access_token={t}"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "?access_token=");
    let r = srv
        .http
        .get(srv.url("/v1/sessions/team-a%2Fc/snapshot"))
        .header("cookie", format!("theme=dark; projector_token={t}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "cookie");
    // WebSocket with the token in the query.
    let url = format!(
        "ws://{}/v1/sessions/team-a%2Fw/ws?access_token={t}",
        srv.addr
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use futures_util::StreamExt;
    let first = ws.next().await.unwrap().unwrap();
    assert!(first.to_text().unwrap().contains("\"type\":\"snapshot\""));
    let url = format!("ws://{}/v1/sessions/team-a%2Fw/ws", srv.addr);
    assert!(
        tokio_tungstenite::connect_async(url).await.is_err(),
        "no token, no socket"
    );
}

#[tokio::test]
async fn a_stream_ends_with_a_clear_frame_when_its_token_expires() {
    let srv = jwt_server().await;
    let tok = Tok::hs("subscribe", &["s"]).exp_in(2).jwt();
    let r = srv
        .http
        .get(srv.url(&format!("/v1/sessions/s/stream?access_token={tok}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut sse = crate::common::Sse::from_response(r);
    assert_eq!(sse.next().await.unwrap().event, "snapshot");
    let last = sse.next().await.unwrap();
    assert_eq!(last.event, "reset");
    assert_eq!(last.data["reason"], "token_expired");
    assert!(sse.ends().await, "and the stream ends");
}

/// The AI SDK stream of a message that is still streaming ends, when the
/// caller's token expires, as an AI SDK client understands: `abort`
/// (`token expired`), then `[DONE]`, then the end of the body.
#[tokio::test]
async fn an_ai_sdk_message_stream_ends_with_an_abort_when_its_token_expires() {
    let srv = jwt_server().await;
    let publish = Tok::hs("publish", &["u"]).jwt();
    let ev = |id: &str, ty: &str, extra: Value| {
        let mut e = json!({"id": id, "type": ty, "runId": "r", "turnId": "t", "messageId": "m"});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e
    };
    let posted = srv
        .http
        .post(srv.url("/v1/sessions/u/events"))
        .bearer_auth(&publish)
        .json(&json!([
            ev("1", "run.started", json!({})),
            ev("2", "text.delta", json!({"payload": {"delta": "Hel"}})),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    let tok = Tok::hs("subscribe", &["u"]).exp_in(2).jwt();
    let r = srv
        .http
        .get(srv.url(&format!(
            "/v1/sessions/u/messages/m/ui-stream?access_token={tok}"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The whole body: it ends at the token's expiry, the message still open.
    let body = tokio::time::timeout(std::time::Duration::from_secs(10), r.text())
        .await
        .expect("the stream ends")
        .unwrap();
    let data: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let types: Vec<&str> = chunks.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"start"), "{body}");
    assert!(chunks.iter().any(|c| c["delta"] == "Hel"), "{body}");
    assert_eq!(
        chunks.last().unwrap(),
        &json!({"type": "abort", "reason": "token expired"}),
        "{body}"
    );
    assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
}

#[tokio::test]
async fn limits_answer_with_problems() {
    let srv = TestServer::builder()
        .config(|c| {
            c.limits.ingest_events_per_sec_per_session = 1;
            c.limits.ingest_burst_per_session = 5;
            c.limits.max_subscribers_per_session = 1;
            c.limits.max_string_bytes = 100;
            c.limits.max_depth = 4;
        })
        .start()
        .await;
    let batch: Vec<Value> = (0..5)
        .map(|i| {
            lime(
                &format!("e{i}"),
                "model.delta",
                i + 1,
                json!({"payload": {"delta": "x"}}),
            )
        })
        .collect();
    assert_eq!(srv.post("s", &Value::Array(batch)).await.0, 200);
    let r = srv
        .http
        .post(srv.url("/v1/sessions/s/events"))
        .json(&lime("e9", "model.delta", 9, json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "rate_limited");
    assert_eq!(
        srv.post("other", &lime("o1", "model.delta", 1, json!({})))
            .await
            .0,
        200,
        "per session"
    );

    let (st, p) = srv
        .post(
            "d",
            &json!({"type": "a.b", "payload": {"a": {"b": {"c": {"d": 1}}}}}),
        )
        .await;
    assert_eq!((st, p["code"].as_str()), (422, Some("too_deep")));
    assert_eq!(p["errors"][0]["path"], "/payload/a/b/c");
    let (st, p) = srv
        .post(
            "d",
            &json!({"type": "a.b", "payload": {"x": "y".repeat(101)}}),
        )
        .await;
    assert_eq!((st, p["code"].as_str()), (422, Some("string_too_long")));

    let _first = srv.sse("w", "", None).await;
    let r = srv
        .http
        .get(srv.url("/v1/sessions/w/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.json::<Value>().await.unwrap()["code"],
        "too_many_subscribers"
    );
    let text = srv.metrics().await;
    assert!(text.contains("projector_limit_hits_total"));
}

#[test]
fn refuses_to_listen_openly_without_auth_unless_told() {
    let mut p = Proc::start(&["--store", "memory", "--listen", "0.0.0.0:0"], &[]);
    p.wait_line("refusing to listen on 0.0.0.0");
    assert!(!p.wait_exit().success());
    let p = Proc::start(
        &[
            "--store",
            "memory",
            "--listen",
            "0.0.0.0:0",
            "--insecure-no-auth",
        ],
        &[],
    );
    p.addr();
    let mut p = Proc::start(
        &["--store", "memory", "--listen", "0.0.0.0:0"],
        &[("PROJECTOR_AUTH__MODE", "jwt")],
    );
    p.wait_line("auth.hs256_secret");
    assert!(
        !p.wait_exit().success(),
        "jwt mode without keys is a start-up error"
    );
    let p = Proc::start(
        &["--store", "memory", "--listen", "0.0.0.0:0"],
        &[
            ("PROJECTOR_AUTH__MODE", "jwt"),
            ("PROJECTOR_AUTH__HS256_SECRET", SECRET),
        ],
    );
    p.addr();
}

#[tokio::test]
async fn secrets_never_reach_the_logs() {
    let p = Proc::start(
        &["--store", "memory", "--listen", "127.0.0.1:0"],
        &[
            ("RUST_LOG", "debug"),
            ("PROJECTOR_AUTH__MODE", "jwt"),
            ("PROJECTOR_AUTH__HS256_SECRET", SECRET),
        ],
    );
    let base = format!("http://{}", p.addr());
    let tok = Tok::hs("publish subscribe", &["*"]).jwt();
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/v1/sessions/s/events?access_token={tok}"))
        .json(&json!({"type": "tool.started", "toolCallId": "t", "payload": {"apiKey": "sk-live-LOGCHECK", "input": {"password": "hunter2-LOGCHECK"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let snap = http
        .get(format!("{base}/v1/sessions/s/snapshot"))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!snap.contains("LOGCHECK"));
    let log = http
        .get(format!("{base}/v1/sessions/s/events"))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!log.contains("LOGCHECK") && log.contains("[REDACTED]"));
    // A request that is logged after everything above, then the whole log.
    let _ = http.get(format!("{base}/healthz")).send().await;
    let lines = p.lines_until("/healthz");
    let all = lines.join("\n");
    assert!(all.contains("/v1/sessions/s/events"), "requests are logged");
    assert!(!all.contains("LOGCHECK"), "no payload secret in the logs");
    assert!(!all.contains(&tok), "no token in the logs");
    assert!(!all.contains(SECRET), "no signing secret in the logs");
}

/// An HS256 token with exactly these claims.
fn hs_claims(claims: Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

/// Issue 12 item 9: `nbf` is checked (a token valid from next hour is
/// refused now), and an `exp` near u64::MAX neither panics the stream
/// handler nor ends the stream.
#[tokio::test]
async fn nbf_is_checked_and_a_far_exp_is_safe() {
    let srv = jwt_server().await;
    let later = hs_claims(json!({
        "sub": "t", "exp": now() + 7200, "nbf": now() + 3600, "sessions": ["*"], "scope": "publish subscribe"
    }));
    let (st, p) = call(&srv, "GET", "/v1/sessions/s/snapshot", Some(&later)).await;
    assert_eq!(
        (st, p["code"].as_str()),
        (401, Some("token_not_yet_valid")),
        "{p}"
    );
    let valid_now = hs_claims(json!({
        "sub": "t", "exp": now() + 7200, "nbf": now() - 10, "sessions": ["*"], "scope": "publish subscribe"
    }));
    let (st, _) = call(&srv, "GET", "/v1/sessions/s/snapshot", Some(&valid_now)).await;
    assert_eq!(st, 200);

    for (i, exp) in [json!(u64::MAX), json!(u64::MAX / 2), json!(i64::MAX)]
        .into_iter()
        .enumerate()
    {
        let path = format!("/v1/sessions/far{i}");
        let far = hs_claims(
            json!({"sub": "t", "exp": exp, "sessions": ["*"], "scope": "publish subscribe"}),
        );
        let resp = srv
            .http
            .get(srv.url(&format!("{path}/stream")))
            .bearer_auth(&far)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "exp {exp}");
        let mut s = crate::common::Sse::from_response(resp);
        assert_eq!(s.next().await.unwrap().event, "snapshot", "exp {exp}");
        let (st, _) = call(&srv, "POST", &format!("{path}/events"), Some(&far)).await;
        assert_eq!(st, 200);
        assert_eq!(s.next().await.unwrap().event, "delta", "the stream goes on");
    }
}

#[tokio::test]
async fn the_index_and_many_session_streams_show_only_the_tokens_sessions() {
    let srv = jwt_server().await;
    let admin = Tok::hs("admin", &["*"]).jwt();
    for s in ["mine-1", "theirs"] {
        let r = srv
            .http
            .post(srv.url(&format!("/v1/sessions/{s}/events")))
            .bearer_auth(&admin)
            .json(&json!({"type": "run.started", "runId": "r"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let mine = Tok::hs("subscribe", &["mine-*"]).jwt();
    let r = srv
        .http
        .get(srv.url("/v1/sessions/stream"))
        .bearer_auth(&mine)
        .send()
        .await
        .unwrap();
    let mut sse = crate::common::Sse::from_response(r);
    let snap = sse.next().await.unwrap();
    let ids: Vec<&str> = snap.data["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["mine-1"]);
    for s in ["theirs", "mine-2"] {
        let r = srv
            .http
            .post(srv.url(&format!("/v1/sessions/{s}/events")))
            .bearer_auth(&admin)
            .json(&json!({"type": "run.started", "runId": "r"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let ev = sse.next().await.unwrap();
    assert_eq!(
        ev.data["session"]["sessionId"], "mine-2",
        "theirs is left out"
    );
    // One session the token may not read refuses a stream of several, naming it.
    let (st, p) = call(
        &srv,
        "GET",
        "/v1/streams?sessions=mine-1,theirs",
        Some(&mine),
    )
    .await;
    assert_eq!((st, p["code"].as_str()), (403, Some("session_not_allowed")));
    assert!(p["detail"].as_str().unwrap().contains("`theirs`"), "{p}");
}

#[tokio::test]
async fn many_session_streams_end_with_a_reset_per_session_when_the_token_expires() {
    use futures_util::StreamExt;
    let srv = jwt_server().await;
    let tok = Tok::hs("subscribe", &["a", "b"]).exp_in(2).jwt();
    let r = srv
        .http
        .get(srv.url(&format!("/v1/streams?sessions=a,b&access_token={tok}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut sse = crate::common::Sse::from_response(r);
    let evs = sse.take(4).await;
    let kinds: Vec<(String, String)> = evs
        .iter()
        .map(|e| {
            (
                e.event.clone(),
                e.data["sessionId"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(kinds.iter().filter(|k| k.0 == "snapshot").count(), 2);
    let resets: Vec<&String> = kinds
        .iter()
        .filter(|k| k.0 == "reset")
        .map(|k| &k.1)
        .collect();
    assert_eq!(resets.len(), 2, "{kinds:?}");
    assert!(evs
        .iter()
        .filter(|e| e.event == "reset")
        .all(|e| e.data["reason"] == "token_expired"));
    assert!(sse.ends().await, "and the stream ends");
    // The WebSocket form: a reset per subscribed session, then close 1008.
    let tok = Tok::hs("subscribe", &["a"]).exp_in(2).jwt();
    let url = format!(
        "ws://{}/v1/streams/ws?sessions=a&access_token={tok}",
        srv.addr
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut texts = Vec::new();
    let code = loop {
        match tokio::time::timeout(crate::common::WAIT, ws.next())
            .await
            .unwrap()
        {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t))) => {
                texts.push(serde_json::from_str::<Value>(&t).unwrap())
            }
            Some(Ok(tokio_tungstenite::tungstenite::Message::Close(c))) => {
                break c.map(|c| u16::from(c.code))
            }
            Some(Ok(_)) => {}
            other => panic!("socket ended without a close: {other:?}"),
        }
    };
    assert_eq!(code, Some(1008));
    let last = texts.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["reason"].as_str()),
        (Some("reset"), Some("token_expired"))
    );
}
