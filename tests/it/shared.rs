//! The shared writers (`stream.shared_writers`): a live, caught-up SSE
//! stream served on its own connection hands its socket to one of its
//! session's writers, which writes the frames for it, and takes it back
//! when it must. Read with raw TCP (each stream its connection's first
//! request, as a browser's EventSource opens it), every case checks what
//! the client reads (each frame once, in order, the same bytes as the
//! connection's own writes) and, through the writers' counters, that the
//! writers did the work the case is about.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{SseEvent, TestServer};

const WAIT: Duration = Duration::from_secs(20);

fn delta(k: u64, text: &str) -> Value {
    json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "messageId": "m1", "sequence": k, "payload": {"delta": text}})
}

/// A raw event stream: its chunked body decoded, its events parsed.
struct Raw {
    s: TcpStream,
    /// Bytes read and not yet decoded.
    raw: Vec<u8>,
    /// The decoded body not yet parsed into events.
    body: String,
    /// Every byte of the decoded body.
    all: String,
    /// The last chunk came.
    ended: bool,
    /// The head was read (what follows is the chunked body).
    body_started: bool,
}

impl Raw {
    async fn open(srv: &TestServer, path: &str) -> Raw {
        Self::open_on(TcpStream::connect(srv.addr).await.unwrap(), path).await
    }

    /// With a receive buffer of `bytes`: a client slow to take what is sent.
    async fn open_small(srv: &TestServer, path: &str, bytes: u32) -> Raw {
        let sock = TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(bytes).unwrap();
        Self::open_on(sock.connect(srv.addr).await.unwrap(), path).await
    }

    async fn open_on(mut s: TcpStream, path: &str) -> Raw {
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut r = Raw {
            s,
            raw: Vec::new(),
            body: String::new(),
            all: String::new(),
            ended: false,
            body_started: false,
        };
        while !r.raw.windows(4).any(|w| w == b"\r\n\r\n") {
            assert!(r.read().await, "closed before the head");
        }
        let at = r.raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8(r.raw.drain(..at).collect()).unwrap();
        r.body_started = true;
        r.decode();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        r
    }

    /// Read what the socket has; false once it is closed.
    async fn read(&mut self) -> bool {
        let mut buf = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(WAIT, self.s.read(&mut buf))
            .await
            .expect("bytes in time")
            .unwrap_or(0);
        self.raw.extend_from_slice(&buf[..n]);
        self.decode();
        n > 0
    }

    /// Read what has arrived, without waiting for more.
    fn read_arrived(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = self.s.try_read(&mut buf) {
            if n == 0 {
                break;
            }
            self.raw.extend_from_slice(&buf[..n]);
        }
        self.decode();
    }

    /// Move the complete chunks of `raw` into the body.
    fn decode(&mut self) {
        while self.body_started {
            let Some(eol) = self.raw.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let size = std::str::from_utf8(&self.raw[..eol]).unwrap();
            let size = usize::from_str_radix(size, 16).unwrap_or_else(|e| {
                panic!(
                    "a chunk size line: {e}: {:?}",
                    String::from_utf8_lossy(&self.raw)
                )
            });
            if self.raw.len() < eol + 2 + size + 2 {
                return;
            }
            let data = &self.raw[eol + 2..eol + 2 + size];
            assert_eq!(&self.raw[eol + 2 + size..eol + 4 + size], b"\r\n");
            let text = std::str::from_utf8(data).expect("a chunk is whole SSE text");
            self.body.push_str(text);
            self.all.push_str(text);
            self.raw.drain(..eol + 4 + size);
            if size == 0 {
                self.ended = true;
                return;
            }
        }
    }

    /// The next event (comments skipped); `None` at the end of the body.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            while let Some(pos) = self.body.find("\n\n") {
                let block: String = self.body.drain(..pos + 2).collect();
                if let Some(ev) = SseEvent::parse(&block) {
                    return Some(ev);
                }
            }
            if self.ended || !self.read().await {
                return None;
            }
        }
    }

    /// Events up to and including the delta at `cursor`; the cursors of
    /// the deltas among them, in order.
    async fn deltas_until(&mut self, cursor: u64) -> Vec<u64> {
        let mut seen = Vec::new();
        loop {
            let ev = self.next().await.expect("the stream goes on");
            if ev.event != "delta" {
                continue;
            }
            let c = ev.data["cursor"].as_u64().expect("a delta's cursor");
            seen.push(c);
            if c >= cursor {
                return seen;
            }
        }
    }

    /// Events until the `live` frame.
    async fn until_live(&mut self) {
        while self.next().await.expect("a live frame").event != "live" {}
    }
}

/// A counter's value on `/metrics` (its sum over labels matching `labels`).
async fn counter(srv: &TestServer, name: &str, labels: &str) -> u64 {
    counter_as(srv, None, name, labels).await
}

async fn counter_as(srv: &TestServer, admin: Option<&str>, name: &str, labels: &str) -> u64 {
    srv.metrics_as(admin)
        .await
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(labels))
        .filter(|l| l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Wait until `name` (with `labels`) reaches `at_least`.
async fn until_counter(srv: &TestServer, name: &str, labels: &str, at_least: u64) {
    until_counter_as(srv, None, name, labels, at_least).await
}

async fn until_counter_as(
    srv: &TestServer,
    admin: Option<&str>,
    name: &str,
    labels: &str,
    at_least: u64,
) {
    let deadline = Instant::now() + WAIT;
    loop {
        let n = counter_as(srv, admin, name, labels).await;
        if n >= at_least {
            return;
        }
        if Instant::now() >= deadline {
            let all = srv.metrics_as(admin).await;
            let writers: Vec<&str> = all
                .lines()
                .filter(|l| l.contains("shared_writer"))
                .collect();
            panic!("{name}{{{labels}}} at {n}, not {at_least}; {writers:#?}");
        }
        tokio::task::yield_now().await;
    }
}

/// Twenty subscribers of one session, a hundred and fifty frames posted
/// one at a time: each reads every frame once, in order, and the bytes
/// every subscriber reads are the same; the writers wrote them.
#[tokio::test]
async fn every_subscriber_reads_every_frame_once_through_the_writers() {
    let srv = TestServer::builder().start().await;
    srv.post("fan", &delta(1, "w1 ")).await;
    let mut subs = Vec::new();
    for _ in 0..20 {
        let mut s = Raw::open(&srv, "/v1/sessions/fan/stream?cursor=0").await;
        assert_eq!(s.deltas_until(1).await, [1]);
        s.until_live().await;
        subs.push(s);
    }
    until_counter(&srv, "projector_shared_writer_joins_total", "", 20).await;
    for k in 2..=150 {
        let (status, _) = srv.post("fan", &delta(k, &format!("w{k} "))).await;
        assert_eq!(status, 200);
    }
    let want: Vec<u64> = (2..=150).collect();
    for s in &mut subs {
        assert_eq!(s.deltas_until(150).await, want);
    }
    let first = subs[0].all.clone();
    for s in &subs[1..] {
        assert_eq!(s.all, first, "the same bytes for every subscriber");
    }
    let writes = counter(&srv, "projector_shared_writer_writes_total", "").await;
    assert!(writes >= 20, "{writes} writes by the writers");
}

/// A client that does not read fills its socket: the writer gives the
/// socket back with the part of a frame it could not send, and the
/// connection sends the rest itself, then catches up. The slow client
/// reads every frame once, in order, whole; a prompt one beside it too.
#[tokio::test]
async fn a_socket_that_would_block_goes_back_to_its_connection_and_loses_nothing() {
    let srv = TestServer::builder().start().await;
    srv.post("slow", &delta(1, "w1 ")).await;
    let mut slow = Raw::open_small(&srv, "/v1/sessions/slow/stream?cursor=0", 4096).await;
    slow.until_live().await;
    let mut prompt = Raw::open(&srv, "/v1/sessions/slow/stream?cursor=0").await;
    prompt.until_live().await;
    until_counter(&srv, "projector_shared_writer_joins_total", "", 2).await;
    let text = |k: u64| format!("<{k}>{}</{k}>", "x".repeat(8000));
    let (tx, last) = tokio::sync::oneshot::channel::<u64>();
    let reading = tokio::spawn(async move {
        let mut seen = prompt.deltas_until(2).await;
        let last = last.await.unwrap();
        if last > 2 {
            seen.extend(prompt.deltas_until(last).await);
        }
        (prompt, seen)
    });
    // Frames of 8 KB until the kernel's buffers are full and the writer
    // finds the socket would block (a few MB on loopback), and a few more.
    let mut n = 1;
    let mut more = None;
    while more != Some(0) {
        n += 1;
        assert!(n < 3000, "the slow socket never blocked");
        let (status, _) = srv.post("slow", &delta(n, &text(n))).await;
        assert_eq!(status, 200);
        let slow = "reason=\"slow\"";
        if more.is_none()
            && n % 25 == 0
            && counter(&srv, "projector_shared_writer_handbacks_total", slow).await > 0
        {
            more = Some(10);
        }
        more = more.map(|m| m - 1);
    }
    tx.send(n).unwrap();
    let want: Vec<u64> = (2..=n).collect();
    let (prompt, seen) = reading.await.unwrap();
    assert_eq!(seen, want);
    assert_eq!(slow.deltas_until(n).await, want);
    for k in 2..=n {
        assert_eq!(
            slow.all.matches(&text(k)).count(),
            1,
            "frame {k} whole, once"
        );
    }
    assert_eq!(
        slow.all.replace(": keep-alive\n\n", ""),
        prompt.all.replace(": keep-alive\n\n", "")
    );
}

/// Everything at once: prompt readers, readers that take their bytes only
/// now and then (their sockets fill, go back to their connections, catch
/// up and join again), heartbeats every second taking sockets back and
/// forth. Every reader still reads every frame once, in order.
#[tokio::test]
async fn under_churn_every_reader_still_reads_every_frame_once() {
    let srv = TestServer::builder()
        .config(|c| c.stream.heartbeat_secs = 1)
        .start()
        .await;
    srv.post("churn", &delta(1, "w1 ")).await;
    const LAST: u64 = 500;
    let mut prompt = Vec::new();
    let mut slow = Vec::new();
    for k in 0..8 {
        let path = "/v1/sessions/churn/stream?cursor=0";
        let mut s = if k % 2 == 0 {
            Raw::open(&srv, path).await
        } else {
            Raw::open_small(&srv, path, 4096).await
        };
        s.until_live().await;
        if k % 2 == 0 {
            prompt.push(tokio::spawn(async move { s.deltas_until(LAST).await }));
        } else {
            slow.push(s);
        }
    }
    // 6 MB in all: more than a socket's buffers hold for a reader that
    // reads only every 250 frames.
    let text = |k: u64| format!("<{k}>{}</{k}>", "y".repeat(12_000));
    for k in 2..=LAST {
        let (status, _) = srv.post("churn", &delta(k, &text(k))).await;
        assert_eq!(status, 200);
        if k % 250 == 0 {
            for s in &mut slow {
                s.read_arrived();
            }
        }
    }
    let want: Vec<u64> = (2..=LAST).collect();
    for p in prompt {
        assert_eq!(p.await.unwrap(), want);
    }
    for s in &mut slow {
        let mut seen = Vec::new();
        // What was decoded while posting, then the rest.
        while let Some(ev) = s.next().await {
            if ev.event == "delta" {
                let c = ev.data["cursor"].as_u64().unwrap();
                if c > 1 {
                    seen.push(c);
                }
                if c == LAST {
                    break;
                }
            }
        }
        assert_eq!(seen, want);
    }
    assert!(
        counter(
            &srv,
            "projector_shared_writer_handbacks_total",
            "reason=\"slow\""
        )
        .await
            > 0
    );
}

/// A deletion while the socket is in a writer: the client reads the
/// deletion's `reset` (its reason as the feed gave it) and the new
/// snapshot, then the new incarnation's frames.
#[tokio::test]
async fn a_deletion_reaches_a_socket_in_a_writer_as_reset_and_snapshot() {
    let srv = TestServer::builder().start().await;
    srv.post("gone", &delta(1, "old ")).await;
    let mut s = Raw::open(&srv, "/v1/sessions/gone/stream").await;
    assert_eq!(s.next().await.unwrap().event, "snapshot");
    s.until_live().await;
    until_counter(&srv, "projector_shared_writer_joins_total", "", 1).await;
    srv.post("gone", &delta(2, "older ")).await;
    assert_eq!(s.deltas_until(2).await, [2]);
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/gone"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let reset = s.next().await.unwrap();
    assert_eq!(
        (reset.event.as_str(), reset.data["reason"].as_str()),
        ("reset", Some("session_deleted"))
    );
    let snap = s.next().await.unwrap();
    assert_eq!(snap.event, "snapshot");
    assert_eq!(snap.data["state"]["messages"], json!([]), "{}", snap.data);
    let (status, out) = srv.post("gone", &delta(3, "new ")).await;
    assert_eq!(status, 200, "{out}");
    let c = out["cursor"].as_u64().unwrap();
    assert_eq!(s.deltas_until(c).await, [c]);
    assert!(s.all.contains("new "));
    assert!(
        counter(
            &srv,
            "projector_shared_writer_handbacks_total",
            "reason=\"frame\""
        )
        .await
            >= 1
    );
}

/// A socket in a writer still gets its heartbeats (the timer wakes the
/// connection, which takes the socket back to send one), and still ends
/// on shutdown with the last chunk.
#[tokio::test]
async fn a_socket_in_a_writer_gets_heartbeats_and_ends_on_shutdown() {
    let mut srv = TestServer::builder()
        .config(|c| c.stream.heartbeat_secs = 1)
        .start()
        .await;
    srv.post("beat", &delta(1, "w1 ")).await;
    let mut s = Raw::open(&srv, "/v1/sessions/beat/stream").await;
    s.until_live().await;
    until_counter(&srv, "projector_shared_writer_joins_total", "", 1).await;
    while !s.all.contains(": keep-alive\n\n") {
        assert!(s.read().await, "closed before a heartbeat");
    }
    // Back in a writer after the heartbeat; frames still flow.
    until_counter(&srv, "projector_shared_writer_joins_total", "", 2).await;
    srv.post("beat", &delta(2, "w2 ")).await;
    assert_eq!(s.deltas_until(2).await, [2]);
    srv.stop().await;
    while s.read().await {}
    assert!(s.ended, "the last chunk before the close: {:?}", s.raw);
}

/// A socket in a writer when the caller's token expires: the connection
/// takes it back (the expiry wakes it) and sends the farewell `reset`,
/// then the last chunk.
#[tokio::test]
async fn a_socket_in_a_writer_ends_when_its_token_expires() {
    use crate::auth::{jwt_server, Tok};
    let srv = jwt_server().await;
    let publish = Tok::hs("publish", &["exp"]).jwt();
    let post = |k: u64| {
        srv.http
            .post(srv.url("/v1/sessions/exp/events"))
            .bearer_auth(&publish)
            .json(&delta(k, &format!("w{k} ")))
            .send()
    };
    assert_eq!(post(1).await.unwrap().status(), 200);
    let tok = Tok::hs("subscribe", &["exp"]).exp_in(3).jwt();
    let mut s = Raw::open(&srv, &format!("/v1/sessions/exp/stream?access_token={tok}")).await;
    assert_eq!(s.next().await.unwrap().event, "snapshot");
    s.until_live().await;
    let admin = Tok::hs("admin", &["*"]).jwt();
    until_counter_as(
        &srv,
        Some(&admin),
        "projector_shared_writer_joins_total",
        "",
        1,
    )
    .await;
    assert_eq!(post(2).await.unwrap().status(), 200);
    assert_eq!(s.deltas_until(2).await, [2]);
    let last = s.next().await.unwrap();
    assert_eq!(
        (last.event.as_str(), last.data["reason"].as_str()),
        ("reset", Some("token_expired"))
    );
    assert!(s.next().await.is_none(), "and the stream ends");
    assert!(s.ended, "with the last chunk");
}

/// With the writers off, the same stream reads the same frames (the
/// connection's own writes). (The writers' counters are the process's, so
/// under `cargo test`, where the tests share one process, other servers'
/// writers count there too: this test does not look at them.)
#[tokio::test]
async fn with_the_writers_off_streams_are_written_by_their_connections() {
    let srv = TestServer::builder()
        .config(|c| c.stream.shared_writers = false)
        .start()
        .await;
    srv.post("own", &delta(1, "w1 ")).await;
    let mut s = Raw::open(&srv, "/v1/sessions/own/stream?cursor=0").await;
    s.until_live().await;
    for k in 2..=20 {
        srv.post("own", &delta(k, &format!("w{k} "))).await;
    }
    let want: Vec<u64> = (2..=20).collect();
    assert_eq!(s.deltas_until(20).await, want);
}
