//! Test harness: a `TestServer` builder that binds port 0 and runs the real
//! server in-process, plus small SSE and HTTP helpers. No sleeps: every wait
//! is for a concrete frame or response, bounded by a timeout.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

use agent_projector::config::{Config, Overrides, StoreKind};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The server binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-projector");

/// Upper bound for any single wait in a test.
pub const WAIT: Duration = Duration::from_secs(10);

pub struct TestServer {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub handle: Option<JoinHandle<anyhow::Result<()>>>,
    pub http: reqwest::Client,
    pub data_dir: Option<PathBuf>,
}

pub struct Builder {
    cfg: Config,
}

impl TestServer {
    pub fn builder() -> Builder {
        let mut cfg = Config::load(
            None,
            Vec::new(),
            &Overrides {
                store: Some(StoreKind::Memory),
                ..Default::default()
            },
        )
        .expect("defaults");
        cfg.log.level = "warn".into();
        Builder { cfg }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// POST a JSON body to a session's events.
    pub async fn post(&self, session: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(&format!("/v1/sessions/{session}/events")))
            .json(body)
            .send()
            .await
            .expect("post");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// POST raw bytes with a content type.
    pub async fn post_raw(&self, session: &str, ct: &str, body: Vec<u8>) -> reqwest::Response {
        self.http
            .post(self.url(&format!("/v1/sessions/{session}/events")))
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .expect("post")
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).send().await.expect("get");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        self.metrics_as(None).await
    }

    /// `/metrics`, as `admin` (a bearer token) where the server asks for one.
    pub async fn metrics_as(&self, admin: Option<&str>) -> String {
        let mut req = self.http.get(self.url("/metrics"));
        if let Some(t) = admin {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.expect("get");
        assert_eq!(r.status(), 200, "GET /metrics");
        r.text().await.expect("metrics text")
    }

    pub async fn snapshot(&self, session: &str) -> Value {
        let (status, v) = self
            .get_json(&format!("/v1/sessions/{session}/snapshot"))
            .await;
        assert_eq!(status, 200, "snapshot: {v}");
        v
    }

    /// Open an SSE stream with an optional `Last-Event-ID`.
    pub async fn sse(&self, session: &str, query: &str, last_event_id: Option<u64>) -> Sse {
        let mut req = self
            .http
            .get(self.url(&format!("/v1/sessions/{session}/stream{query}")));
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.send().await.expect("sse");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        Sse {
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
            seen: 0,
            lives: Vec::new(),
        }
    }

    /// Stop the server and wait for it to finish.
    pub async fn stop(&mut self) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(WAIT, h)
                .await
                .expect("server stops in time")
                .expect("join")
                .expect("server ran cleanly");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Builder {
    pub fn config(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(&mut self.cfg);
        self
    }

    /// Use the embedded store in `dir`.
    pub fn embedded(mut self, dir: PathBuf) -> Self {
        self.cfg.store = StoreKind::Embedded;
        self.cfg.data_dir = dir;
        self
    }

    pub async fn start(self) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let data_dir = (self.cfg.store == StoreKind::Embedded).then(|| self.cfg.data_dir.clone());
        let handle = tokio::spawn(agent_projector::run(self.cfg, listener, shutdown.clone()));
        TestServer {
            addr,
            shutdown,
            handle: Some(handle),
            http: reqwest::Client::new(),
            data_dir,
        }
    }
}

/// The machine, held while a test runs: alone by a test that saturates
/// both cores (the packaging test's whole `cargo check`), shared by a test
/// whose assertions are times (the partition test's refusal within
/// seconds), so that the two never overlap. A file lock, so that it holds
/// across the processes of `cargo nextest` as across the threads of
/// `cargo test`; released when dropped.
pub struct Machine(#[allow(dead_code)] std::fs::File);

impl Machine {
    fn file() -> std::fs::File {
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("machine.lock");
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("the machine's lock file")
    }

    fn flock(how: rustix::fs::FlockOperation) -> Machine {
        let f = Machine::file();
        loop {
            match rustix::fs::flock(&f, how) {
                Ok(()) => return Machine(f),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => panic!("the machine's lock: {e}"),
            }
        }
    }

    /// Alone on the machine: no timed test runs meanwhile.
    pub fn alone() -> Machine {
        Machine::flock(rustix::fs::FlockOperation::LockExclusive)
    }

    /// Beside other tests, but not beside one that saturates the machine.
    pub fn timed() -> Machine {
        Machine::flock(rustix::fs::FlockOperation::LockShared)
    }
}

/// A fresh temporary directory.
pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "projector-it-{name}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d).expect("tempdir");
    d
}

/// One parsed SSE event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

impl SseEvent {
    /// One event block (up to its blank line); `None` for a block with no
    /// data (a comment, a `retry`).
    pub fn parse(block: &str) -> Option<SseEvent> {
        let mut id = None;
        let mut event = String::from("message");
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
        if data.is_empty() {
            return None;
        }
        Some(SseEvent {
            id,
            event,
            data: serde_json::from_str(&data).expect("frame data is JSON"),
        })
    }
}

type ByteStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// The rules of a `live` frame a test reader takes aside: no id (never a
/// resume point), its type and cursor, and none before it (`earlier`) for
/// the same session (one per session per stream).
pub fn check_live<'a>(
    earlier: impl IntoIterator<Item = &'a Value>,
    id: Option<&str>,
    data: &Value,
) {
    assert_eq!(id, None, "a live frame is no resume point");
    assert_eq!(data["type"], "live");
    assert!(data["cursor"].is_u64(), "a live frame's cursor");
    let session = &data["sessionId"];
    assert!(
        !earlier.into_iter().any(|l| &l["sessionId"] == session),
        "a second live frame: {data}"
    );
}

/// A minimal SSE reader over a response body. A `live` frame is not
/// handed out as an event: it is kept in `lives` (how many events came
/// before it, and its JSON), and a second one for the same session fails
/// the test (one per session per stream is the rule).
pub struct Sse {
    body: ByteStream,
    buf: String,
    seen: usize,
    pub lives: Vec<(usize, Value)>,
}

impl Sse {
    /// Read an SSE response.
    pub fn from_response(resp: reqwest::Response) -> Sse {
        Sse {
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
            seen: 0,
            lives: Vec::new(),
        }
    }

    /// The next event (comments and the `live` frame skipped); `None`
    /// when the stream ends.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            let ev = self.next_any().await?;
            if ev.event != "live" {
                self.seen += 1;
                return Some(ev);
            }
            check_live(
                self.lives.iter().map(|(_, l)| l),
                ev.id.as_deref(),
                &ev.data,
            );
            self.lives.push((self.seen, ev.data));
        }
    }

    /// A one-session stream's `live` frame: how many events came before
    /// it, and its cursor.
    pub fn live(&self) -> Option<(usize, u64)> {
        let (n, l) = self.lives.first()?;
        Some((*n, l["cursor"].as_u64()?))
    }

    /// The next event, whatever it is (comments skipped).
    pub async fn next_any(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                match SseEvent::parse(&block) {
                    Some(ev) => return Some(ev),
                    None => continue, // a comment or retry-only block
                }
            }
            match tokio::time::timeout(WAIT, self.body.next()).await {
                Ok(Some(Ok(bytes))) => self
                    .buf
                    .push_str(std::str::from_utf8(&bytes).expect("utf8")),
                Ok(_) => return None,
                Err(_) => panic!("no SSE event within {WAIT:?}; buffered: {:?}", self.buf),
            }
        }
    }

    /// The next `n` events.
    pub async fn take(&mut self, n: usize) -> Vec<SseEvent> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.next().await.expect("stream ended early"));
        }
        out
    }

    /// Raw text until `needle` shows up (for heartbeat checks).
    pub async fn raw_until(&mut self, needle: &str) -> String {
        loop {
            if self.buf.contains(needle) {
                return std::mem::take(&mut self.buf);
            }
            match tokio::time::timeout(WAIT, self.body.next()).await {
                Ok(Some(Ok(bytes))) => self
                    .buf
                    .push_str(std::str::from_utf8(&bytes).expect("utf8")),
                _ => panic!("{needle:?} not seen; buffered: {:?}", self.buf),
            }
        }
    }

    /// True when the stream ends within the wait.
    pub async fn ends(&mut self) -> bool {
        loop {
            match tokio::time::timeout(WAIT, self.body.next()).await {
                Ok(None) | Ok(Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => continue,
                Err(_) => return false,
            }
        }
    }
}

/// A Lime-envelope event in turn `turn-1`.
pub fn lime(id: &str, class: &str, seq: u64, extra: Value) -> Value {
    let mut v = serde_json::json!({
        "id": id,
        "schemaVersion": "lime-runtime-event/v0.1",
        "runtimeId": "rt",
        "threadId": "th",
        "turnId": "turn-1",
        "eventClass": class,
        "sequence": seq,
        "title": class,
        "createdAt": "2026-11-21T00:00:00Z",
    });
    if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
        m.extend(e);
    }
    v
}

/// The real binary in a child process, with its output lines (also kept
/// whole, for `tail`); killed and reaped on drop.
pub struct Proc {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> Proc {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn binary");
        let (tx, lines) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        for pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let (tx, log) = (tx.clone(), log.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line.clone());
                    let _ = tx.send(line);
                }
            });
        }
        Proc { child, lines, log }
    }

    /// Wait up to `limit` for a log line containing `needle`; returns it, or
    /// the lines seen meanwhile.
    pub fn try_wait_line(&self, needle: &str, limit: Duration) -> Result<String, Vec<String>> {
        let deadline = Instant::now() + limit;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return Ok(line),
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        Err(seen)
    }

    /// Wait for a log line containing `needle`; returns it.
    pub fn wait_line(&self, needle: &str) -> String {
        self.try_wait_line(needle, Duration::from_secs(10))
            .unwrap_or_else(|seen| panic!("no line with {needle:?}; saw: {seen:#?}"))
    }

    /// Every line up to and including the first containing `needle`.
    pub fn lines_until(&self, needle: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    seen.push(line);
                    if hit {
                        return seen;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no line with {needle:?}; saw: {seen:#?}");
    }

    /// The address from the `listening on http://ADDR` line.
    pub fn addr(&self) -> String {
        self.listening(Duration::from_secs(10))
            .unwrap_or_else(|seen| panic!("no line with \"listening on http://\"; saw: {seen:#?}"))
    }

    /// Like `addr`, waiting up to `limit`; `Err` holds the lines seen meanwhile.
    pub fn listening(&self, limit: Duration) -> Result<String, Vec<String>> {
        const NEEDLE: &str = "listening on http://";
        let line = self.try_wait_line(NEEDLE, limit)?;
        let rest = &line[line.find(NEEDLE).unwrap() + NEEDLE.len()..];
        Ok(rest.split_whitespace().next().unwrap_or("").to_string())
    }

    /// The last `n` lines the process wrote (stdout and stderr).
    pub fn tail(&self, n: usize) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log[log.len().saturating_sub(n)..].to_vec()
    }

    /// Send SIGTERM (what a container runtime sends to stop it).
    pub fn terminate(&self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
    }

    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "process did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
