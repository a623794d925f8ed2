//! Hostile input (issue 12 items 8 and 10): limits counted before values are
//! built, strict JSON, session ids that could spoof a listing, and
//! problem+json for every error the server writes.

use serde_json::{json, Value};

use crate::common::{Proc, TestServer};

/// The peak resident memory of a process, in KiB (`VmHWM`).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

/// An 8 MiB body of `[0,0,...]` (4 million values, the batch limit is
/// 10,000) is answered 413 without building millions of values: the
/// server's peak memory grows by little more than the body itself (it grew
/// by about 330 MB when every value was built first).
#[tokio::test]
async fn an_oversized_batch_is_refused_before_its_values_are_built() {
    let mut p = Proc::start(&["--store", "memory", "--listen", "127.0.0.1:0"], &[]);
    let addr = p.addr();
    let pid = p.child.id();
    let client = reqwest::Client::new();
    // Warm up the paths (allocator arenas, the session) with a small post.
    let r = client
        .post(format!("http://{addr}/v1/sessions/big/events"))
        .header("content-type", "application/json")
        .body(r#"{"type":"run.started","runId":"r"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let before = peak_kib(pid);
    let body = format!("[{}0]", "0,".repeat(4 * 1024 * 1024 - 2));
    assert!(body.len() <= 8 * 1024 * 1024);
    for format in ["application/json", "application/x-ndjson"] {
        let body = if format == "application/json" {
            body.clone()
        } else {
            "{}\n".repeat(2 * 1024 * 1024)
        };
        let r = client
            .post(format!("http://{addr}/v1/sessions/big/events"))
            .header("content-type", format)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 413, "{format}");
        let p: Value = r.json().await.unwrap();
        assert_eq!(p["code"], "too_many_events", "{format}");
    }
    let grown_mib = (peak_kib(pid) - before) / 1024;
    assert!(
        grown_mib < 64,
        "peak memory grew by {grown_mib} MiB for an 8 MiB body"
    );
    let _ = p.child.kill();
    let _ = p.wait_exit();
}

async fn problem(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert_eq!(ct, "application/problem+json", "status {status}");
    (status, resp.json().await.unwrap())
}

/// Objects with a repeated key are refused (I-JSON) wherever request JSON is
/// read, at any depth, in JSON and NDJSON, and nothing is applied.
#[tokio::test]
async fn repeated_json_keys_are_refused_everywhere() {
    let srv = TestServer::builder().start().await;
    let cases: [(&str, &str); 4] = [
        ("application/json", r#"{"id":"e1","type":"run.started","id":"e2"}"#),
        (
            "application/json",
            r#"[{"id":"ok","type":"run.started"},{"id":"e3","type":"text.delta","payload":{"delta":"a","delta":"b"}}]"#,
        ),
        (
            "application/x-ndjson",
            "{\"id\":\"ok\",\"type\":\"run.started\"}\n{\"id\":\"x\",\"id\":\"y\",\"type\":\"run.started\"}\n",
        ),
        ("application/json", r#"{"type":"run.started","runId":"r","runId":"s"}"#),
    ];
    for (ct, body) in cases {
        let resp = srv.post_raw("dup", ct, body.as_bytes().to_vec()).await;
        let (status, p) = problem(resp).await;
        assert_eq!(
            (status, p["code"].as_str()),
            (400, Some("duplicate_key")),
            "{body}"
        );
    }
    let (_, log) = srv.get_json("/v1/sessions/dup/events").await;
    assert_eq!(log["events"], json!([]), "nothing of any batch applied");
    for path in ["/v1/sessions/dup/actions/a1", "/v1/sessions/dup/controls"] {
        let resp = srv
            .http
            .post(srv.url(path))
            .header("content-type", "application/json")
            .body(r#"{"decision":"approve","type":"cancel","decision":"reject"}"#)
            .send()
            .await
            .unwrap();
        let (status, p) = problem(resp).await;
        assert_eq!(
            (status, p["code"].as_str()),
            (400, Some("duplicate_key")),
            "{path}"
        );
    }
}

/// Session ids with control, zero-width or bidirectional-override
/// characters are refused: they would let one id pose as another.
#[tokio::test]
async fn session_ids_that_could_spoof_a_listing_are_refused() {
    let srv = TestServer::builder().start().await;
    for id in [
        "%E2%80%AEgnp.exe", // U+202E right-to-left override
        "admin%E2%80%8B",   // U+200B zero-width space
        "a%E2%81%A6b",      // U+2066 left-to-right isolate
        "%EF%BB%BFs",       // U+FEFF byte order mark
        "a%E2%80%8Fb",      // U+200F right-to-left mark
        "a%07b",            // BEL
    ] {
        for path in [
            format!("/v1/sessions/{id}/events"),
            format!("/v1/sessions/{id}/snapshot"),
        ] {
            let req = if path.ends_with("/events") {
                srv.http
                    .post(srv.url(&path))
                    .header("content-type", "application/json")
                    .body(r#"{"type":"run.started","runId":"r"}"#)
            } else {
                srv.http.get(srv.url(&path))
            };
            let (status, p) = problem(req.send().await.unwrap()).await;
            assert_eq!(
                (status, p["code"].as_str()),
                (400, Some("invalid_session_id")),
                "{path}"
            );
        }
    }
    let (_, page) = srv.get_json("/v1/sessions").await;
    assert_eq!(page["sessions"], json!([]), "nothing was created");
    // Ordinary non-ASCII ids stay valid.
    let (status, _) = srv
        .post(
            "caf\u{e9}-\u{65e5}\u{672c}",
            &json!({"type": "run.started", "runId": "r"}),
        )
        .await;
    assert_eq!(status, 200);
}

/// Every error the server itself writes is problem+json: a WebSocket route
/// asked without an upgrade, unknown routes, wrong methods, bad queries.
#[tokio::test]
async fn every_error_the_server_writes_is_a_problem() {
    let srv = TestServer::builder().start().await;
    let ws = srv
        .http
        .get(srv.url("/v1/sessions/s/ws"))
        .send()
        .await
        .unwrap();
    let (status, p) = problem(ws).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (400, Some("websocket_upgrade_required"))
    );
    // A handshake of another WebSocket version: 426 and the version spoken
    // (RFC 6455 section 4.4), on every WebSocket route.
    for path in ["/v1/sessions/s/ws", "/v1/streams/ws", "/v1/sessions/stream"] {
        let r = srv
            .http
            .get(srv.url(path))
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "8")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["sec-websocket-version"], "13", "{path}");
        let (status, p) = problem(r).await;
        assert_eq!(
            (status, p["code"].as_str()),
            (426, Some("websocket_upgrade_required")),
            "{path}"
        );
    }
    for (method, path, want) in [
        ("GET", "/nope", 404),
        ("PUT", "/v1/sessions/s/events", 405),
        ("POST", "/v1/sessions/s/snapshot", 405),
        ("GET", "/v1/sessions/s/events?after=x", 400),
        ("GET", "/v1/sessions?limit=-1", 400),
        ("GET", "/v1/sessions/s/stream?cursor=%2B1", 400),
    ] {
        let req = srv
            .http
            .request(method.parse().unwrap(), srv.url(path))
            .send()
            .await
            .unwrap();
        let (status, p) = problem(req).await;
        assert_eq!(status, want, "{method} {path}");
        assert!(p["code"].is_string() && p["detail"].is_string(), "{p}");
        assert_eq!(p["status"], want);
    }
}

/// Issue 12 item 7: a request body is bounded in time as a whole (a body
/// that stalls, or trickles a byte at a time, gets 408 `body_timeout` and
/// its connection closed) and in memory (the bodies being read share a
/// budget; past it, 503 `server_busy` until one is done).
#[tokio::test]
async fn slow_bodies_are_bounded_in_time_and_memory() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let srv = TestServer::builder()
        .config(|c| {
            c.limits.body_timeout_secs = 1;
            c.ingest.max_body_bytes = 64 * 1024;
            c.limits.max_inflight_body_bytes = 64 * 1024;
        })
        .start()
        .await;
    let open = || async {
        let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
        s.write_all(
            b"POST /v1/sessions/slow/events HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
              transfer-encoding: chunked\r\n\r\n5\r\n[{\"ty\r\n",
        )
        .await
        .unwrap();
        s
    };
    // Everything the server sends until it closes the connection.
    async fn until_closed(mut s: tokio::net::TcpStream) -> String {
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
            .await
            .expect("the server closes the connection")
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    // A stalled body holds the whole budget: another body is refused.
    let t0 = Instant::now();
    let stalled = open().await;
    let busy = srv
        .post_raw(
            "other",
            "application/json",
            br#"{"type":"run.started","runId":"r"}"#.to_vec(),
        )
        .await;
    let (status, p) = problem(busy).await;
    assert_eq!((status, p["code"].as_str()), (503, Some("server_busy")));
    let reply = until_closed(stalled).await;
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(
        reply.contains("application/problem+json") && reply.contains("\"body_timeout\""),
        "{reply}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "answered at the deadline"
    );
    // The budget is back.
    let (status, _) = srv
        .post("other", &json!({"type": "run.started", "runId": "r"}))
        .await;
    assert_eq!(status, 200);

    // A trickle (a byte every 100 ms) is bounded as a whole, not per read.
    let (mut rd, mut wr) = open().await.into_split();
    let t0 = Instant::now();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let writer = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    if wr.write_all(b"1\r\n \r\n").await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&reply).contains("body_timeout") {
        match tokio::time::timeout(Duration::from_secs(10), rd.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => reply.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let _ = stop.send(());
    writer.await.unwrap();
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let (_, log) = srv.get_json("/v1/sessions/slow/events").await;
    assert_eq!(log["events"], json!([]), "nothing applied");
}

/// Every route that takes a body reads it within its own limit, not axum's
/// 2 MiB default (which only its `Bytes`, `String` and `Json` extractors
/// apply, and no route carries as a layer): a 3 MiB body reaches the
/// chat gateway, the AG-UI gateway and a Durable Streams append (each
/// answers as it would a small one), and one over the route's own limit
/// is refused as `body_too_large`.
///
/// The refusals are asked for with the length declared and no body sent:
/// refused on its `Content-Length`, a body sent after it would sit unread
/// when the server closes, and the reset that close sends can discard the
/// answer before the client reads it.
#[tokio::test]
async fn bodies_past_axums_default_are_read_within_each_routes_own_limit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let srv = TestServer::builder().start().await;
    // The answer to a POST of `len` declared bytes of `content_type` that
    // never come.
    let declared = |path: &'static str, content_type: &'static str, len: usize| async move {
        let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: {content_type}\r\n\
             content-length: {len}\r\nconnection: close\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut out))
            .await
            .expect("answered and closed")
            .unwrap();
        String::from_utf8(out).unwrap()
    };
    let refused = |answer: &str| {
        answer.starts_with("HTTP/1.1 413")
            && answer.contains("application/problem+json")
            && answer.contains("\"code\":\"body_too_large\"")
    };
    let big = |mib: usize| "x".repeat(mib * 1024 * 1024);
    let post_json = |path: &str, body: Value| srv.http.post(srv.url(path)).json(&body).send();
    let chat = |text: String| {
        json!({"id": "big-chat", "trigger": "submit-message",
               "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}]})
    };
    let run = |text: String| {
        json!({"threadId": "big-run", "runId": "r1", "state": {}, "tools": [], "context": [],
               "forwardedProps": {}, "messages": [{"id": "u", "role": "user", "content": text}]})
    };
    // 3 MiB is read whole and parsed: the answer is the one a small
    // request gets on a server with no upstream. Past both gateways' 4 MiB
    // is refused.
    for (path, body) in [
        ("/v1/chat", chat(big(3))),
        ("/v1/sessions/big-run/ag-ui", run(big(3))),
    ] {
        let (status, p) = problem(post_json(path, body).await.unwrap()).await;
        assert_eq!(
            (status, p["code"].as_str()),
            (409, Some("no_upstream")),
            "{path}"
        );
        let answer = declared(path, "application/json", 4 * 1024 * 1024 + 1).await;
        assert!(refused(&answer), "{path}: {answer}");
    }

    let url = srv.url("/ds/v1/stream/big");
    let put = srv
        .http
        .put(&url)
        .header("content-type", "application/octet-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let append = |bytes: String| {
        srv.http
            .post(&url)
            .header("content-type", "application/octet-stream")
            .body(bytes)
            .send()
    };
    let r = append(big(3)).await.unwrap();
    assert!(r.status().is_success(), "a 3 MiB append: {}", r.status());
    let answer = declared(
        "/ds/v1/stream/big",
        "application/octet-stream",
        16 * 1024 * 1024 + 1,
    )
    .await;
    assert!(refused(&answer), "{answer}");
    // The stream holds the 3 MiB append whole, read back from its start.
    let mut held = 0;
    let mut offset = "-1".to_string();
    loop {
        let r = srv
            .http
            .get(format!("{url}?offset={offset}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        offset = r.headers()["stream-next-offset"]
            .to_str()
            .unwrap()
            .to_string();
        let up_to_date = r.headers().contains_key("stream-up-to-date");
        let bytes = r.bytes().await.unwrap();
        assert!(bytes.iter().all(|b| *b == b'x'));
        held += bytes.len();
        if up_to_date {
            break;
        }
    }
    assert_eq!(held, 3 * 1024 * 1024);
}
