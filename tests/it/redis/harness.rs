//! What every Redis test shares: the `PROJECTOR_TEST_REDIS_URL` switch (and
//! the `redis-server` / `redis-cli` presence check for tests that start their
//! own Redis), server nodes on one Redis URL and one key prefix whose keys
//! are removed on drop, `redis-server` child processes on free ports, plain
//! HTTP helpers, and an SSE reader that keeps frames byte for byte.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::Proc;

/// Upper bound of any one wait in these tests.
pub const DEADLINE: Duration = Duration::from_secs(20);

const URL_ENV: &str = "PROJECTOR_TEST_REDIS_URL";

/// The Redis URL to test against, or `None` (after saying why) to skip.
pub fn redis_url(test: &str) -> Option<String> {
    match std::env::var(URL_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url.trim().to_string()),
        _ => {
            // Straight to the process's stderr, past the test harness's
            // capture, so that a skipped test shows as skipped.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: {URL_ENV} is unset (set it to a Redis URL, e.g. \
                 redis://127.0.0.1:6379, to run the Redis tests)"
            );
            None
        }
    }
}

/// Whether a test that starts its own Redis runs: the switch is set (else
/// it says why not) and every one of `bins` is on the PATH (else it fails).
pub fn own_redis(test: &str, bins: &[&str]) -> bool {
    if redis_url(test).is_none() {
        return false;
    }
    for bin in bins {
        if Command::new(bin).arg("--version").output().is_err() {
            panic!("{test}: {URL_ENV} is set but {bin} is not on the PATH");
        }
    }
    true
}

/// One server process with the Redis store on `url` (comma-separated seeds
/// in cluster mode), listening on a free port.
pub fn redis_node(url: &str, envs: &[(&str, &str)]) -> Proc {
    let args = [
        "--store",
        "redis",
        "--redis-url",
        url,
        "--listen",
        "127.0.0.1:0",
    ];
    Proc::start(&args, envs)
}

// ---------------------------------------------------------------------------
// Nodes of one cluster: real server processes on one Redis and one prefix.

struct Node {
    proc: Proc,
    base: String,
}

/// Nodes of one cluster: one Redis URL, one key prefix, removed on drop.
pub struct Cluster {
    url: String,
    prefix: String,
    envs: Vec<(String, String)>,
    nodes: Vec<Node>,
    pub http: reqwest::Client,
}

impl Cluster {
    /// `n` nodes on `url` with a fresh key prefix; `envs` go to every node
    /// (also to those added later).
    pub fn start(url: &str, n: usize, envs: &[(&str, &str)]) -> Cluster {
        let mut c = Cluster {
            url: url.to_string(),
            prefix: format!("ptest-{}", uuid::Uuid::new_v4().simple()),
            envs: envs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            nodes: Vec::new(),
            http: reqwest::Client::new(),
        };
        c.add(n);
        c
    }

    /// Start `n` more nodes (all spawned first, then each awaited on its
    /// `listening on` line); returns their indexes.
    pub fn add(&mut self, n: usize) -> Vec<usize> {
        let mut envs: Vec<(&str, &str)> = vec![("PROJECTOR_REDIS__PREFIX", &self.prefix)];
        envs.extend(self.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let spawned: Vec<Proc> = (0..n).map(|_| redis_node(&self.url, &envs)).collect();
        let first = self.nodes.len();
        for proc in spawned {
            let addr = proc.listening(DEADLINE);
            // Kept before checking, so that Drop shows its log either way.
            self.nodes.push(Node {
                proc,
                base: String::new(),
            });
            match addr {
                Ok(addr) => self.nodes.last_mut().unwrap().base = format!("http://{addr}"),
                Err(seen) => panic!(
                    "node {} did not log `listening on http://` within {DEADLINE:?}; its output: \
                     {seen:#?}",
                    self.nodes.len() - 1
                ),
            }
        }
        (first..self.nodes.len()).collect()
    }

    pub fn base(&self, i: usize) -> &str {
        &self.nodes[i].base
    }

    /// SIGKILL node `i` and wait until it is gone.
    pub fn kill(&mut self, i: usize) {
        let child = &mut self.nodes[i].proc.child;
        child.kill().expect("SIGKILL");
        child.wait().expect("killed node exits");
    }

    pub async fn post(&self, i: usize, session: &str, body: &Value) -> (u16, Value) {
        post(&self.http, self.base(i), session, body).await
    }

    /// `GET path` on node `i`: status and body text.
    pub async fn get_text(&self, i: usize, path: &str) -> (u16, String) {
        let r = tokio::time::timeout(
            DEADLINE,
            self.http.get(format!("{}{path}", self.base(i))).send(),
        )
        .await
        .unwrap_or_else(|_| panic!("node {i}: GET {path} timed out"))
        .unwrap_or_else(|e| panic!("node {i}: GET {path}: {e}"));
        let status = r.status().as_u16();
        (status, r.text().await.unwrap_or_default())
    }

    /// The snapshot on node `i`: its exact bytes and its JSON.
    pub async fn snapshot(&self, i: usize, session: &str) -> (String, Value) {
        let (status, text) = self
            .get_text(i, &format!("/v1/sessions/{session}/snapshot"))
            .await;
        assert_eq!(status, 200, "node {i}: snapshot of {session}: {text}");
        let v = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("node {i}: snapshot is not JSON ({e}): {text}"));
        (text, v)
    }

    /// The whole event log of `session` on node `i`, paged like a client.
    pub async fn log(&self, i: usize, session: &str) -> (Value, Vec<(u64, Value)>) {
        log_at(&self.http, self.base(i), session).await
    }

    pub async fn sse(&self, i: usize, session: &str, query: &str, last_id: Option<u64>) -> RawSse {
        RawSse::open(&self.http, self.base(i), session, query, last_id)
            .await
            .unwrap_or_else(|e| panic!("node {i}: stream of {session}{query}: {e}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let _ = node.proc.child.kill();
            let _ = node.proc.child.wait();
            if std::thread::panicking() {
                let tail = node.proc.tail(30);
                eprintln!(
                    "--- node {i} ({}) log, last {} lines:",
                    node.base,
                    tail.len()
                );
                for line in tail {
                    eprintln!("    {line}");
                }
            }
        }
        if let Err(e) = agent_projector::store::redis::purge_prefix(&self.url, &self.prefix) {
            eprintln!("note: keys with prefix {} left in Redis: {e}", self.prefix);
        }
    }
}

/// The whole event log of `session` on the node at `base`, paged like a
/// client: the last page, and every `(cursor, event)`.
pub async fn log_at(
    http: &reqwest::Client,
    base: &str,
    session: &str,
) -> (Value, Vec<(u64, Value)>) {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let url = format!("{base}/v1/sessions/{session}/events?after={after}&limit=1000");
        let r = tokio::time::timeout(DEADLINE, http.get(&url).send())
            .await
            .unwrap_or_else(|_| panic!("GET {url} timed out"))
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        assert_eq!(status, 200, "{base}: event log of {session}: {text}");
        let page: Value = serde_json::from_str(&text).expect("log page is JSON");
        for e in page["events"].as_array().expect("events") {
            out.push((e["cursor"].as_u64().expect("cursor"), e["event"].clone()));
        }
        match page["nextAfter"].as_u64() {
            Some(n) => after = n,
            None => return (page, out),
        }
    }
}

/// Poll `base`'s `/readyz` every 50 ms until it answers `want` (at most
/// `DEADLINE`).
pub async fn readiness(http: &reqwest::Client, base: &str, want: u16) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let got = match http.get(format!("{base}/readyz")).send().await {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        };
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{base}: readyz stayed {got}, wanted {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// POST `body` to a session's events on `base`, bounded by `DEADLINE`.
pub async fn post(http: &reqwest::Client, base: &str, session: &str, body: &Value) -> (u16, Value) {
    let r = tokio::time::timeout(
        DEADLINE,
        http.post(format!("{base}/v1/sessions/{session}/events"))
            .json(body)
            .send(),
    )
    .await
    .unwrap_or_else(|_| panic!("POST to {base} timed out"))
    .unwrap_or_else(|e| panic!("POST to {base}: {e}"));
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

// ---------------------------------------------------------------------------
// redis-server processes of a test's own.

/// A port on 127.0.0.1 for a test's own redis-server: free when asked, with
/// `port + 10000` (a cluster node's bus port) free too, never handed out twice
/// in this process, and below the kernel's ephemeral range (32768 and up
/// here), so that no outgoing connection's local port can take it between
/// this choice and the server's bind, nor while a test restarts a server on
/// the same port.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const FIRST: u16 = 15_000;
    const SPAN: u16 = 7_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Processes running at once (other test binaries) start apart.
    let start = (std::process::id() % u32::from(SPAN)) as u16;
    for _ in 0..SPAN {
        let port = FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN;
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 10_000) {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN);
}

/// A redis-server child process; killed on drop.
pub struct RedisServer {
    child: Child,
}

impl RedisServer {
    /// Start on 127.0.0.1:`port` with its data in `dir` and `args`; wait
    /// until it accepts connections.
    pub fn start(port: u16, dir: &Path, args: &[&str]) -> RedisServer {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"]);
        RedisServer::launch(cmd, port, dir, args)
    }

    /// Start in network namespace `netns`, on every address it has, with
    /// no persistence.
    pub fn start_in(netns: &str, port: u16, dir: &Path) -> RedisServer {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", netns, "redis-server"])
            .args(["--port", &port.to_string(), "--bind", "0.0.0.0"])
            .args(["--protected-mode", "no", "--save", "", "--appendonly", "no"]);
        RedisServer::launch(cmd, port, dir, &[])
    }

    fn launch(mut cmd: Command, port: u16, dir: &Path, args: &[&str]) -> RedisServer {
        let mut child = cmd
            .arg("--dir")
            .arg(dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // Kept before checking, so that Drop stops it either way.
        let server = RedisServer { child };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("Ready to accept connections") => return server,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("redis-server on port {port} not ready within 10 s; its output: {seen:#?}");
    }

    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// A network path that can be slowed down and cut.

/// A TCP proxy on 127.0.0.1 to `upstream` (this kernel has no `sch_netem`):
/// it holds every chunk for `delay_ms` (with up to half of it again as
/// jitter), each direction in order, and while `cut` it drops them (the
/// connections stay open, nothing passes: a partition as TCP sees it).
pub struct Proxy {
    pub port: u16,
    pub delay_ms: Arc<AtomicU64>,
    pub cut: Arc<AtomicBool>,
}

impl Proxy {
    pub async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let p = Proxy {
            port,
            delay_ms: Arc::default(),
            cut: Arc::default(),
        };
        let (delay, cut) = (p.delay_ms.clone(), p.cut.clone());
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let (upstream, delay, cut) = (upstream.clone(), delay.clone(), cut.clone());
                tokio::spawn(async move {
                    // A cut link: the connect hangs, as it would for the node.
                    let Ok(up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    tokio::spawn(pipe(dr, uw, delay.clone(), cut.clone()));
                    tokio::spawn(pipe(ur, dw, delay, cut));
                });
            }
        });
        p
    }
}

/// Copy `from` to `to`, each chunk `delay` later than it was read, none
/// while `cut`.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut last = tokio::time::Instant::now();
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        if cut.load(Ordering::Relaxed) {
            continue;
        }
        let d = delay.load(Ordering::Relaxed);
        let jitter = if d == 0 {
            0
        } else {
            u64::from(uuid::Uuid::new_v4().as_u128() as u16) % (d / 2 + 1)
        };
        // Never before the previous chunk: the stream keeps its order.
        let at = (tokio::time::Instant::now() + Duration::from_millis(d + jitter)).max(last);
        last = at;
        if tx.send((at, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}

// ---------------------------------------------------------------------------
// SSE frames kept as the server sent them, to compare bytes across nodes.

/// One SSE event exactly as received (the `data` line unparsed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
}

/// The cursor in an SSE id (`<epoch>:<cursor>`), as text.
pub fn cursor_of_id(id: &str) -> String {
    id.rsplit(':').next().unwrap_or(id).to_string()
}

impl Frame {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("frame data is not JSON ({e}): {}", self.data))
    }

    /// The cursor of a `delta` frame (from its SSE id, `<epoch>:<cursor>`).
    pub fn cursor(&self) -> u64 {
        self.id
            .as_deref()
            .and_then(|s| cursor_of_id(s).parse().ok())
            .unwrap_or_else(|| panic!("frame without an `<epoch>:<cursor>` id: {self:?}"))
    }
}

type ByteStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An SSE reader that keeps frames raw.
pub struct RawSse {
    body: ByteStream,
    buf: Vec<u8>,
    /// The `live` frames seen (not handed out by `next`).
    pub lives: Vec<serde_json::Value>,
}

impl RawSse {
    pub async fn open(
        http: &reqwest::Client,
        base: &str,
        session: &str,
        query: &str,
        last_id: Option<u64>,
    ) -> Result<RawSse, String> {
        let url = format!("{base}/v1/sessions/{session}/stream{query}");
        RawSse::get(http, &url, last_id.map(|c| c.to_string())).await
    }

    /// Any SSE stream at `url`.
    pub async fn get(
        http: &reqwest::Client,
        url: &str,
        last_id: Option<String>,
    ) -> Result<RawSse, String> {
        let mut req = http.get(url);
        if let Some(id) = last_id {
            req = req.header("last-event-id", id);
        }
        let resp = tokio::time::timeout(DEADLINE, req.send())
            .await
            .map_err(|_| "no response headers in time".to_string())?
            .map_err(|e| e.to_string())?;
        if resp.status() != 200 {
            let status = resp.status();
            return Err(format!(
                "{status}: {}",
                resp.text().await.unwrap_or_default()
            ));
        }
        Ok(RawSse {
            body: Box::pin(resp.bytes_stream()),
            buf: Vec::new(),
            lives: Vec::new(),
        })
    }

    /// The next frame (comments and heartbeats skipped); `Err` says why there
    /// is none: the stream ended, broke, or stayed silent past `DEADLINE`.
    pub async fn next(&mut self) -> Result<Frame, String> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..pos + 2).collect();
                let block = String::from_utf8(block).map_err(|e| e.to_string())?;
                let mut frame = Frame {
                    id: None,
                    event: "message".into(),
                    data: String::new(),
                };
                let mut has_data = false;
                for line in block.lines() {
                    let (field, value) = match line.split_once(':') {
                        Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                        None => (line, ""),
                    };
                    match field {
                        "id" => frame.id = Some(value.to_string()),
                        "event" => frame.event = value.to_string(),
                        "data" => {
                            if has_data {
                                frame.data.push('\n');
                            }
                            frame.data.push_str(value);
                            has_data = true;
                        }
                        _ => {} // comments (heartbeats), retry
                    }
                }
                if !has_data {
                    continue;
                }
                if frame.event == "live" {
                    // Where the replay ended: no resume point, once per
                    // session of the stream (it/live.rs has its tests).
                    let v: serde_json::Value =
                        serde_json::from_str(&frame.data).map_err(|e| e.to_string())?;
                    crate::common::check_live(&self.lives, frame.id.as_deref(), &v);
                    self.lives.push(v);
                    continue;
                }
                return Ok(frame);
            }
            match tokio::time::timeout(DEADLINE, self.body.next()).await {
                Ok(Some(Ok(bytes))) => self.buf.extend_from_slice(&bytes),
                Ok(Some(Err(e))) => return Err(format!("stream broke: {e}")),
                Ok(None) => return Err("stream ended".into()),
                Err(_) => return Err(format!("no frame within {DEADLINE:?}")),
            }
        }
    }

    /// The next frame, which must come.
    pub async fn expect(&mut self, what: &str) -> Frame {
        self.next()
            .await
            .unwrap_or_else(|e| panic!("{what}: no frame: {e}"))
    }
}
