//! The connection an event stream is served on when it is a connection's
//! first request (no hyper, no HTTP buffers while idle), read with raw TCP:
//! a well-formed HTTP/1.1 chunked response that closes when done, frames as
//! they are posted, HTTP/1.0 close-delimited, the subscriber released as
//! soon as the client hangs up, and everything else still served by hyper
//! on the same kind of connection.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::TestServer;

const WAIT: Duration = Duration::from_secs(10);

async fn send(srv: &TestServer, raw: &str) -> TcpStream {
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    s
}

/// Send `raw` and read until `needle` has arrived.
async fn open(srv: &TestServer, raw: &str, needle: &str) -> (TcpStream, String) {
    let mut s = send(srv, raw).await;
    let mut got = String::new();
    read_until(&mut s, &mut got, needle).await;
    (s, got)
}

/// Send `raw` and read the whole answer, up to the server's close.
async fn whole(srv: &TestServer, raw: &str) -> String {
    let mut s = send(srv, raw).await;
    let mut all = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut all))
        .await
        .expect("closed in time")
        .unwrap();
    String::from_utf8(all).unwrap()
}

/// Read until `needle` is in what has arrived.
async fn read_until(s: &mut TcpStream, got: &mut String, needle: &str) {
    tokio::time::timeout(WAIT, async {
        let mut buf = [0u8; 4096];
        while !got.contains(needle) {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before {needle:?}; got {got:?}");
            got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in time; got {got:?}"));
}

fn delta(k: u64) -> serde_json::Value {
    json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "messageId": "m1", "sequence": k, "payload": {"delta": format!("w{k} ")}})
}

#[tokio::test]
async fn a_first_request_stream_is_chunked_live_and_closes_with_its_body() {
    let srv = TestServer::builder().start().await;
    srv.post("raw", &delta(1)).await;
    let (mut s, mut got) = open(&srv, "GET /v1/sessions/raw/stream?cursor=0 HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n", "w1 ").await;
    let head = got.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    for h in [
        "content-type: text/event-stream",
        "transfer-encoding: chunked",
        "connection: close",
        "date: ",
        "x-request-id: ",
    ] {
        assert!(head.contains(h), "{h} in {head}");
    }
    // Live frames arrive as posted, each a chunk of its own size.
    for k in 2..=5 {
        srv.post("raw", &delta(k)).await;
        read_until(&mut s, &mut got, &format!("w{k} ")).await;
    }
    let body = &got[got.find("\r\n\r\n").unwrap() + 4..];
    let first = body.split("\r\n").next().unwrap();
    let size = usize::from_str_radix(first, 16).unwrap();
    assert!(
        body[first.len() + 2..].len() >= size,
        "chunk of {size} bytes"
    );

    // A finished message's AI SDK stream ends: last chunk, then close.
    srv.post(
        "raw",
        &json!({"id": "end", "type": "run.completed", "runId": "r", "sequence": 6}),
    )
    .await;
    let all = whole(
        &srv,
        "GET /v1/sessions/raw/messages/m1/ui-stream HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .await;
    assert!(all.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n"), "{all}");
}

#[tokio::test]
async fn http_1_0_gets_a_close_delimited_stream_and_errors_keep_their_length() {
    let srv = TestServer::builder().start().await;
    srv.post("old", &delta(1)).await;
    let (_s, got) = open(
        &srv,
        "GET /v1/sessions/old/stream?cursor=0 HTTP/1.0\r\n\r\n",
        "w1 ",
    )
    .await;
    let head = got.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert!(
        got.contains("\r\n\r\n: agent-projector\n"),
        "raw body: {got}"
    );

    let all = whole(
        &srv,
        "GET /v1/sessions/bad%20id/stream HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .await;
    let (head, body) = all.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 400 Bad Request"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{head}"
    );
    assert!(head.contains("application/problem+json"), "{head}");
}

#[tokio::test]
async fn a_client_that_hangs_up_frees_its_subscriber_slot_at_once() {
    let srv = TestServer::builder()
        .config(|c| c.limits.max_subscribers_per_session = 1)
        .start()
        .await;
    srv.post("one", &delta(1)).await;
    let (s, _) = open(
        &srv,
        "GET /v1/sessions/one/stream HTTP/1.1\r\nHost: t\r\n\r\n",
        "event: snapshot",
    )
    .await;
    let r = srv
        .http
        .get(srv.url("/v1/sessions/one/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "the one slot is taken");
    drop(s);
    // No frame is sent to find out: the hang-up alone frees the slot.
    let deadline = Instant::now() + WAIT;
    loop {
        let r = srv
            .http
            .get(srv.url("/v1/sessions/one/stream"))
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "slot still taken after the hang-up"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn other_requests_and_pipelined_ones_are_served_by_hyper_with_keep_alive() {
    let srv = TestServer::builder().start().await;
    srv.post("ka", &delta(1)).await;
    // A snapshot, then a stream, on one connection: both answered.
    let (_s, got) = open(
        &srv,
        "GET /v1/sessions/ka/snapshot HTTP/1.1\r\nHost: t\r\n\r\nGET /v1/sessions/ka/stream HTTP/1.1\r\nHost: t\r\n\r\n",
        "event: snapshot",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
    assert_eq!(got.matches("HTTP/1.1 200 OK").count(), 2, "{got}");
    assert!(
        !got.to_ascii_lowercase().contains("connection: close"),
        "{got}"
    );
}

#[tokio::test]
async fn bytes_sent_after_the_request_do_not_stop_the_stream() {
    let srv = TestServer::builder().start().await;
    srv.post("chatty", &delta(1)).await;
    let (mut s, mut got) = open(
        &srv,
        "GET /v1/sessions/chatty/stream HTTP/1.1\r\nHost: t\r\n\r\n",
        "event: snapshot",
    )
    .await;
    // Extra bytes (the connection answers nothing after its stream): the
    // frames go on.
    s.write_all(&[b'x'; 4096]).await.unwrap();
    for k in 2..=4 {
        srv.post("chatty", &delta(k)).await;
        read_until(&mut s, &mut got, &format!("w{k} ")).await;
    }
}
