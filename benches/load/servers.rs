//! The servers under test, each in its own process: agent-projector (the
//! binary cargo built, or one already running elsewhere), the floor servers
//! and the Node anchor (`bench/anchor`), and reading a process's resident
//! memory.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    pub addr: SocketAddr,
    /// `None` for a server started elsewhere (`external`).
    child: Option<Child>,
}

impl Server {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// CPU time (user + system) the server process has used, in seconds
    /// (NaN for a server started elsewhere).
    pub fn cpu_secs(&self) -> f64 {
        self.child
            .as_ref()
            .map_or(f64::NAN, |c| cpu_secs(&c.id().to_string()))
    }

    /// Start counting the CPU this server and the generator use.
    pub fn meter(&self) -> CpuMeter {
        CpuMeter {
            server: self.cpu_secs(),
            gen: cpu_secs("self"),
        }
    }

    /// Resident set size of the server process, in bytes.
    pub fn rss(&self) -> u64 {
        let Some(child) = &self.child else {
            return 0;
        };
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }
}

impl Server {
    /// File descriptors the server process holds open (0 for a server
    /// started elsewhere).
    pub fn open_files(&self) -> usize {
        let Some(child) = &self.child else {
            return 0;
        };
        std::fs::read_dir(format!("/proc/{}/fd", child.id())).map_or(0, |d| d.count())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_for_addr(child: &mut Child, marker: &str) -> SocketAddr {
    let out = child.stdout.take().expect("stdout");
    let deadline = Instant::now() + Duration::from_secs(30);
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        if let Some(i) = line.find(marker) {
            let rest = &line[i + marker.len()..];
            let addr: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                .collect();
            return addr.parse().expect("address");
        }
        assert!(Instant::now() < deadline, "server did not start");
    }
    panic!("server exited before listening");
}

static BUILD: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Start the servers that follow from the binary at `bin` (`None`: the
/// default build).
pub fn use_build(bin: Option<String>) {
    *BUILD.lock().unwrap() = bin;
}

/// A server started elsewhere, perhaps on another host (`LOAD_TARGET`), so
/// that its subscribers' reads do not share its CPUs. Its CPU time and
/// memory cannot be read from here.
pub fn external(target: &str) -> Server {
    use std::net::ToSocketAddrs;
    let addr = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| panic!("LOAD_TARGET={target}: not a host:port"));
    Server { addr, child: None }
}

/// agent-projector with limits opened up for load, on `store`.
pub fn projector(store: &str, data_dir: &std::path::Path, extra_env: &[(&str, &str)]) -> Server {
    projector_with(store, data_dir, &[], extra_env)
}

/// The same with extra command-line arguments (e.g. `--redis-url <url>`).
pub fn projector_with(
    store: &str,
    data_dir: &std::path::Path,
    extra_args: &[&str],
    extra_env: &[(&str, &str)],
) -> Server {
    // `LOAD_PROJECTOR_BIN` runs another build (e.g. a copy of the binary
    // before a change) in place of this one; `use_build` picks one for a
    // section run against several.
    let baseline = BUILD.lock().unwrap().clone();
    let bin = baseline
        .clone()
        .or_else(|| std::env::var("LOAD_PROJECTOR_BIN").ok())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_agent-projector").to_string());
    let mut cmd = Command::new(bin);
    cmd.args(["--listen", "127.0.0.1:0", "--store", store, "--data-dir"])
        .arg(data_dir)
        .args(extra_args)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn,agent_projector=info")
        .env("PROJECTOR_LIMITS__INGEST_EVENTS_PER_SEC_PER_SESSION", "0")
        .env("PROJECTOR_LIMITS__INGEST_EVENTS_PER_SEC_PER_TOKEN", "0")
        .env("PROJECTOR_LIMITS__MAX_SUBSCRIBERS_PER_SESSION", "100000")
        .env("PROJECTOR_LIMITS__MAX_SUBSCRIBERS", "100000")
        .env("PROJECTOR_LIMITS__MAX_LIVE_SESSIONS", "1000000")
        .env("PROJECTOR_SESSIONS__IDLE_EVICT_SECS", "3600")
        .env("PROJECTOR_STORAGE__MIN_FREE_BYTES", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // A baseline may predate compression, and the config refuses keys it
    // does not know. Compression for every stream, unless the environment
    // sets the budget (as when measuring WebSocket deflate without a
    // context: `PROJECTOR_HTTP__COMPRESSED_STREAMS_MAX=0`).
    if baseline.is_none() && std::env::var_os("PROJECTOR_HTTP__COMPRESSED_STREAMS_MAX").is_none() {
        cmd.env("PROJECTOR_HTTP__COMPRESSED_STREAMS_MAX", "100000");
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start agent-projector");
    let addr = wait_for_addr(&mut child, "listening on http://");
    Server {
        addr,
        child: Some(child),
    }
}

/// The Node anchor, if Node, its packages and Redis are available.
pub fn anchor() -> Option<Server> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/anchor");
    if !std::path::Path::new(dir).join("node_modules").exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("anchor: npm ci failed in bench/anchor; skipping the anchor");
            return None;
        }
    }
    let mut child = Command::new("node")
        .arg("server.mjs")
        .current_dir(dir)
        .env("PORT", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .ok()?;
    let addr = wait_for_addr(&mut child, "anchor listening on http://");
    Some(Server {
        addr,
        child: Some(child),
    })
}

/// The CPU a server and the generator had used when a phase began.
pub struct CpuMeter {
    server: f64,
    gen: f64,
}

impl CpuMeter {
    /// CPU µs per event since [`Server::meter`], of the server's process
    /// and of the generator's (a server's helpers, such as the anchor's
    /// Redis, are not counted).
    pub fn per_event(&self, server: &Server, events: usize) -> (f64, f64) {
        let us = |secs: f64| secs * 1e6 / events.max(1) as f64;
        (
            us(server.cpu_secs() - self.server),
            us(cpu_secs("self") - self.gen),
        )
    }
}

/// CPU time (user + system) process `pid` (or `self`) has used, in seconds.
pub fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and
    // stime are the 12th and 13th, in clock ticks (100 per second).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

/// The ingest floor (`ingest_floor.rs`): this same binary in that mode.
pub fn ingest_floor() -> Server {
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .arg("--ingest-floor")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the ingest floor");
    let addr = wait_for_addr(&mut child, "listening on http://");
    Server {
        addr,
        child: Some(child),
    }
}

/// The floor server (`floor.rs`): this same binary in its serving mode,
/// with `shards` writer shards per session (0: a task per subscriber).
pub fn floor(shards: usize) -> Server {
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .args(["--floor-server", "--listen", "127.0.0.1:0", "--shards"])
        .arg(shards.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the floor server");
    let addr = wait_for_addr(&mut child, "listening on http://");
    Server {
        addr,
        child: Some(child),
    }
}

/// The server's `/metrics` text, or `None` (said on stderr) when it
/// cannot be read.
async fn metrics_text(server: &Server) -> Option<String> {
    match reqwest::get(format!("{}/metrics", server.url())).await {
        Ok(r) => Some(r.text().await.unwrap_or_default()),
        Err(e) => {
            eprintln!("  (no metrics: {e})");
            None
        }
    }
}

/// The cumulative bucket counts (`le`, count) of a histogram in the
/// server's `/metrics`, summed over its label sets.
pub async fn histogram(server: &Server, name: &str) -> Vec<(f64, f64)> {
    let Some(text) = metrics_text(server).await else {
        return Vec::new();
    };
    let mut out: Vec<(f64, f64)> = Vec::new();
    let prefix = format!("{name}_bucket{{");
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let le = line
            .split("le=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .map(|v| {
                if v == "+Inf" {
                    f64::INFINITY
                } else {
                    v.parse().unwrap_or(f64::NAN)
                }
            });
        let count = line.rsplit(' ').next().and_then(|c| c.parse::<f64>().ok());
        if let (Some(le), Some(count)) = (le, count) {
            match out.iter_mut().find(|(l, _)| *l == le) {
                Some(slot) => slot.1 += count,
                None => out.push((le, count)),
            }
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The sum and count of each histogram of `names` in the server's
/// `/metrics`, summed over its label sets (zeros for one it has not).
pub async fn sums(server: &Server, names: &[&str]) -> Vec<(f64, f64)> {
    let Some(text) = metrics_text(server).await else {
        return Vec::new();
    };
    let field = |name: &str, suffix: &str| -> f64 {
        let key = format!("{name}_{suffix}");
        text.lines()
            .filter(|l| {
                l.strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    names
        .iter()
        .map(|name| (field(name, "sum"), field(name, "count")))
        .collect()
}

/// The shares of a histogram's samples between two scrapes that fell at or
/// under each of `bounds` (seconds), as "≤5ms 40%, ..." text.
pub fn shares(before: &[(f64, f64)], after: &[(f64, f64)], bounds: &[f64]) -> String {
    let at = |h: &[(f64, f64)], le: f64| h.iter().find(|(l, _)| *l == le).map_or(0.0, |(_, c)| *c);
    let total = at(after, f64::INFINITY) - at(before, f64::INFINITY);
    if total <= 0.0 {
        return "no samples".into();
    }
    bounds
        .iter()
        .map(|&b| {
            let share = (at(after, b) - at(before, b)) / total * 100.0;
            format!("≤{}ms {share:.0}%", b * 1e3)
        })
        .collect::<Vec<_>>()
        .join(", ")
        + &format!(" (n={total})")
}
