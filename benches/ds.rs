//! The Durable Streams benchmark: agent-projector's `/ds` against the
//! reference Node server (`@durable-streams/server`, bench/ds, in memory
//! and file-backed) and the Rust `durable-streams-server` (its redb `acid`
//! mode), in one run, on loopback:
//!
//! - appends/s: one writer appending 100-byte JSON messages to one stream,
//!   and 64 writers each appending to a stream of its own;
//! - catch-up MB/s: a 32 MiB stream (32 appends of 1 MiB) read from `-1`;
//! - SSE fan-out: 200 SSE readers of one stream, 20 appends/s, the time
//!   from an append being sent to each reader having it.
//!
//! Every figure comes with the CPU time the server and this generator
//! spent, so that a generator-bound figure shows itself.
//!
//! `cargo bench --bench ds`. Servers that are not there are skipped with a
//! line saying so: the Node one needs `npm ci` in bench/ds, the Rust one
//! `cargo install durable-streams-server --version 0.3.0 --root /tmp/dss`
//! (or its binary in `DS_RUST_SERVER_BIN`). `DS_BENCH_SECS` sets how long
//! each append run lasts (default 3).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A server under test: its process and where its streams live.
struct Target {
    name: &'static str,
    child: Child,
    /// `<url>/<prefix>`: a stream is `<base>/<path>`.
    base: String,
    _dir: Option<tempdir::Dir>,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    pub fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("ds-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

/// Start `cmd` and wait for its "listening on <url>" line.
fn spawn_listening(
    name: &'static str,
    mut cmd: Command,
    prefix: &str,
    dir: Option<tempdir::Dir>,
) -> Target {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut url = None;
    for line in out.lines() {
        let line = line.unwrap_or_default();
        if let Some(at) = line.find("listening on http://") {
            let u: String = line[at + "listening on ".len()..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            url = Some(u);
            break;
        }
    }
    let url = url.unwrap_or_else(|| panic!("{name} did not start"));
    Target {
        name,
        child,
        base: format!("{url}{prefix}"),
        _dir: dir,
    }
}

fn projector(name: &'static str, store: &str) -> Target {
    let dir = tempdir::new(name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-projector"));
    cmd.args(["--listen", "127.0.0.1:0", "--store", store, "--data-dir"])
        .arg(&dir.0)
        .env("RUST_LOG", "warn,agent_projector=info")
        .env("NO_COLOR", "1")
        .env("PROJECTOR_DURABLE_STREAMS__MAX_APPEND_BYTES", "2097152");
    spawn_listening(name, cmd, "/ds/v1/stream", Some(dir))
}

fn node_reference(name: &'static str, file_backed: bool) -> Option<Target> {
    let script = Path::new(ROOT).join("bench/ds/server.mjs");
    if !Path::new(ROOT).join("bench/ds/node_modules").exists() {
        println!("{name}: skipped (run `npm ci` in bench/ds)");
        return None;
    }
    let dir = file_backed.then(|| tempdir::new(name));
    let mut cmd = Command::new("node");
    cmd.arg(script);
    if let Some(d) = &dir {
        cmd.arg(&d.0);
    }
    Some(spawn_listening(name, cmd, "/v1/stream", dir))
}

fn rust_reference(name: &'static str) -> Option<Target> {
    let bin = std::env::var("DS_RUST_SERVER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/tmp/dss/bin/durable-streams-server"));
    if !bin.exists() {
        println!("{name}: skipped (no {})", bin.display());
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempdir::new(name);
    let child = Command::new(bin)
        .env("DS_SERVER__BIND_ADDRESS", format!("127.0.0.1:{port}"))
        .env("DS_STORAGE__MODE", "acid")
        .env("DS_STORAGE__DATA_DIR", &dir.0)
        .env("DS_LIMITS__MAX_STREAM_BYTES", "1073741824")
        .env("DS_LIMITS__MAX_MEMORY_BYTES", "4294967296")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the Rust server");
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{name} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Target {
        name,
        child,
        base: format!("{url}/v1/stream"),
        _dir: Some(dir),
    })
}

/// CPU seconds (user + system) of a process.
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Server and generator CPU over a measured section.
struct Cpu {
    server: f64,
    generator: f64,
}

fn cpu(t: &Target) -> Cpu {
    Cpu {
        server: cpu_secs(&t.child.id().to_string()),
        generator: cpu_secs("self"),
    }
}

fn spent(before: &Cpu, t: &Target) -> Cpu {
    let now = cpu(t);
    Cpu {
        server: now.server - before.server,
        generator: now.generator - before.generator,
    }
}

async fn create(http: &reqwest::Client, url: &str, ct: &str) {
    let r = http
        .put(url)
        .header("content-type", ct)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "PUT {url}: {}", r.status());
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// `writers` writers append 100-byte JSON messages for `secs` (each to a
/// stream of its own when `own`, else all to one): appends/s, p50/p99 ms.
async fn appends(t: &Target, http: &reqwest::Client, writers: usize, secs: u64) -> Appends {
    let tag = format!("{}-{writers}-{}", t.name, std::process::id());
    for w in 0..writers {
        create(
            http,
            &format!("{}/appends-{tag}-{w}", t.base),
            "application/json",
        )
        .await;
    }
    let before = cpu(t);
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let lat = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (http, lat, failed) = (http.clone(), lat.clone(), failures.clone());
            let url = format!("{}/appends-{tag}-{w}", t.base);
            tokio::spawn(async move {
                let mut mine = Vec::new();
                let mut i = 0u64;
                while Instant::now() < end {
                    let body = format!("[{{\"w\":{w},\"i\":{i},\"pad\":\"{}\"}}]", "x".repeat(64));
                    let t0 = Instant::now();
                    let r = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await;
                    // A server that fails a request (or falls over) is
                    // reported as such; this writer stops.
                    if !r.is_ok_and(|r| r.status().is_success()) {
                        failed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    mine.push(t0.elapsed().as_secs_f64() * 1000.0);
                    i += 1;
                }
                lat.lock().unwrap().extend(mine);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let took = start.elapsed().as_secs_f64();
    let c = spent(&before, t);
    let mut l = std::mem::take(&mut *lat.lock().unwrap());
    l.sort_by(f64::total_cmp);
    Appends {
        rate: l.len() as f64 / took,
        p50: quantile(&l, 0.5),
        p99: quantile(&l, 0.99),
        cpu: c,
        failed: failures.load(Ordering::Relaxed),
    }
}

/// What [`appends`] measured.
struct Appends {
    rate: f64,
    p50: f64,
    p99: f64,
    cpu: Cpu,
    /// Writers that stopped at a failed request.
    failed: usize,
}

/// A 32 MiB stream (32 appends of 1 MiB) read from `-1` to its tail,
/// best of three: MB/s.
async fn catch_up(t: &Target, http: &reqwest::Client) -> (f64, Cpu) {
    let url = format!("{}/catchup-{}-{}", t.base, t.name, std::process::id());
    create(http, &url, "application/octet-stream").await;
    let mib = vec![7u8; 1 << 20];
    for _ in 0..32 {
        let r = http
            .post(&url)
            .header("content-type", "application/octet-stream")
            .body(mib.clone())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "append 1 MiB: {}", r.status());
    }
    let before = cpu(t);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let (mut offset, mut total) = ("-1".to_string(), 0usize);
        loop {
            let r = http
                .get(format!("{url}?offset={offset}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let next = r.headers()["stream-next-offset"]
                .to_str()
                .unwrap()
                .to_string();
            let done = r.headers().get("stream-up-to-date").is_some();
            total += r.bytes().await.unwrap().len();
            offset = next;
            if done {
                break;
            }
        }
        assert_eq!(total, 32 << 20, "{}: read {total} bytes", t.name);
        best = best.min(start.elapsed().as_secs_f64());
    }
    (32.0 * 1.048_576 / best, spent(&before, t))
}

/// 200 SSE readers of one stream, 20 appends/s for 3 s: from send to
/// receipt, p50 and p99 ms over every delivery, and deliveries / expected.
async fn fan_out(t: &Target, http: &reqwest::Client) -> (f64, f64, f64, Cpu) {
    const READERS: usize = 200;
    const APPENDS: u64 = 60;
    let url = format!("{}/fanout-{}-{}", t.base, t.name, std::process::id());
    create(http, &url, "application/json").await;
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let lat: Arc<Mutex<Vec<f64>>> = Arc::default();
    let ready = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let r = http
            .get(format!("{url}?offset=now&live=sse"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let (sent, lat, ready) = (sent.clone(), lat.clone(), ready.clone());
        readers.push(tokio::spawn(async move {
            let mut body = r.bytes_stream();
            let mut buf = Vec::new();
            let mut counted = false;
            let mut got = 0u64;
            while let Some(Ok(chunk)) = body.next().await {
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = buf.drain(..end + 2).collect();
                    let text = String::from_utf8_lossy(&event);
                    if !counted && text.contains("event: control") {
                        counted = true;
                        ready.fetch_add(1, Ordering::SeqCst);
                    }
                    if !text.contains("event: data") {
                        continue;
                    }
                    let data: String = text
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(|l| l.strip_prefix(' ').unwrap_or(l))
                        .collect::<Vec<_>>()
                        .join("\n");
                    let now = Instant::now();
                    if let Ok(items) = serde_json::from_str::<Vec<serde_json::Value>>(&data) {
                        for it in items {
                            if let Some(s) = it["s"].as_u64() {
                                if let Some(at) = sent.lock().unwrap().get(&s) {
                                    lat.lock().unwrap().push((now - *at).as_secs_f64() * 1000.0);
                                }
                                got += 1;
                            }
                        }
                    }
                    if got >= APPENDS {
                        return;
                    }
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while ready.load(Ordering::SeqCst) < READERS as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = cpu(t);
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    for s in 0..APPENDS {
        tick.tick().await;
        sent.lock().unwrap().insert(s, Instant::now());
        let r = http
            .post(&url)
            .header("content-type", "application/json")
            .body(format!("[{{\"s\":{s}}}]"))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
    let all = async {
        for r in readers {
            let _ = r.await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), all).await;
    let c = spent(&before, t);
    let mut l = std::mem::take(&mut *lat.lock().unwrap());
    l.sort_by(f64::total_cmp);
    let ratio = l.len() as f64 / (READERS as f64 * APPENDS as f64);
    (quantile(&l, 0.5), quantile(&l, 0.99), ratio, c)
}

fn main() {
    let secs: u64 = std::env::var("DS_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .no_proxy()
        .build()
        .unwrap();
    let targets: Vec<Box<dyn Fn() -> Option<Target>>> = vec![
        Box::new(|| Some(projector("agent-projector embedded (fsync)", "embedded"))),
        Box::new(|| Some(projector("agent-projector memory", "memory"))),
        Box::new(|| rust_reference("durable-streams-server 0.3.0 acid (redb)")),
        Box::new(|| node_reference("@durable-streams/server 0.3.7 memory", false)),
        Box::new(|| node_reference("@durable-streams/server 0.3.7 file", true)),
    ];
    println!(
        "{:<44} {:>10} {:>8} {:>8} {:>9} {:>9} | {:>10} {:>8} {:>8} {:>9} {:>9}",
        "server",
        "1 writer/s",
        "p50 ms",
        "p99 ms",
        "srv µs/op",
        "gen µs/op",
        "64 wr/s",
        "p50 ms",
        "p99 ms",
        "srv µs/op",
        "gen µs/op"
    );
    let mut rest = Vec::new();
    for make in &targets {
        let Some(t) = make() else { continue };
        let one = rt.block_on(appends(&t, &http, 1, secs));
        let many = rt.block_on(appends(&t, &http, 64, secs));
        let per = |c: &Cpu, rate: f64| {
            (
                c.server * 1e6 / (rate * secs as f64),
                c.generator * 1e6 / (rate * secs as f64),
            )
        };
        let (s1, g1) = per(&one.cpu, one.rate);
        let (s64, g64) = per(&many.cpu, many.rate);
        println!(
            "{:<44} {:>10.0} {:>8.2} {:>8.2} {:>9.1} {:>9.1} | {:>10.0} {:>8.2} {:>8.2} {:>9.1} {:>9.1}",
            t.name, one.rate, one.p50, one.p99, s1, g1, many.rate, many.p50, many.p99, s64, g64
        );
        if one.failed + many.failed > 0 {
            println!(
                "  {} writers stopped at a failed request: the server fell over; its reads are not measured",
                one.failed + many.failed
            );
            continue;
        }
        let cu = rt.block_on(catch_up(&t, &http));
        let fo = rt.block_on(fan_out(&t, &http));
        rest.push((t.name, cu, fo));
    }
    println!();
    println!(
        "{:<44} {:>12} {:>10} | {:>10} {:>10} {:>10} {:>10}",
        "server", "catch-up MB/s", "srv cpu s", "SSE p50 ms", "p99 ms", "delivered", "srv cpu s"
    );
    for (name, (mbs, cc), (p50, p99, ratio, fc)) in rest {
        println!(
            "{:<44} {:>12.0} {:>10.2} | {:>10.2} {:>10.2} {:>10.3} {:>10.2}",
            name, mbs, cc.server, p50, p99, ratio, fc.server
        );
    }
}
