//! The distributed mode under a network that fails as clusters fail (issue
//! 37 item 2): Redis in a network namespace of its own, reached by two
//! nodes over two veth links; node 1's path also goes through a delaying
//! TCP proxy (this kernel has no `sch_netem`). While both nodes ingest and
//! serve subscribers, node 1's path is delayed (100 ms each way, with
//! jitter), then cut (its link set down: packets dropped, not refused),
//! then healed. Checked: no acknowledged event lost; the session's cursors
//! gapless and unique; node 1 refuses ingest within its timeout while cut
//! and never acknowledges what it could not append; its subscribers' streams
//! end so that they resume on node 0, with no gap; after the heal node 1
//! writes again and both nodes serve the same bytes; retries of refused
//! events (same ids) are deduplicated. Needs root and `ip netns` (and the
//! Redis switch); says SKIPPED otherwise.

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::checks::{assert_gapless, assert_same_frames, Collector};
use super::harness::{
    free_port, log_at, own_redis, readiness, redis_node, Frame, Proxy, RawSse, RedisServer,
    DEADLINE,
};
use crate::common::{tempdir, Proc};

const TEST: &str = "a_partitioned_node_refuses_and_its_readers_resume_elsewhere";
const SESSION: &str = "part";

/// A network namespace with two veth links to this one: link `i` is
/// 10.201.i.1 here and 10.201.i.2 there. Deleted on drop.
struct Netns {
    name: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether a run whose names carry `id` may still be going: some live
/// process's pid ends in it.
fn alive(id: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.flatten().any(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|pid| pid % 100_000 == id)
    })
}

/// Remove what an earlier run that did not finish left (a killed test
/// process skips its `Drop`): its namespace, and its host-side veths, whose
/// 10.201.x.1/24 addresses would otherwise take this run's routes.
fn sweep() {
    let stale = |name: &str, prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|id| id.parse::<u32>().ok())
            .is_some_and(|id| !alive(id))
    };
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if stale(name, "ppart") {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
    if let Ok(out) = Command::new("ip").args(["-o", "link", "show"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split(':').nth(1).unwrap_or("").trim();
            let name = name.split('@').next().unwrap_or("");
            if stale(name, "pp0h") || stale(name, "pp1h") {
                let _ = ip(&["link", "del", name]);
            }
        }
    }
}

impl Netns {
    fn create() -> Result<Netns, String> {
        sweep();
        let id = std::process::id() % 100_000;
        let ns = Netns {
            name: format!("ppart{id}"),
        };
        ip(&["netns", "add", &ns.name])?;
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        for i in 0..2 {
            let (here, there) = (format!("pp{i}h{id}"), format!("pp{i}t{id}"));
            ip(&["link", "add", &here, "type", "veth", "peer", "name", &there])?;
            ip(&["link", "set", &there, "netns", &ns.name])?;
            ip(&["addr", "add", &format!("10.201.{i}.1/24"), "dev", &here])?;
            ip(&["link", "set", &here, "up"])?;
            ns.exec(&[
                "ip",
                "addr",
                "add",
                &format!("10.201.{i}.2/24"),
                "dev",
                &there,
            ])?;
            ns.exec(&["ip", "link", "set", &there, "up"])?;
        }
        Ok(ns)
    }

    fn exec(&self, args: &[&str]) -> Result<(), String> {
        ip(&[&["netns", "exec", &self.name][..], args].concat())
    }

    /// Set link `i` down or up on Redis's side: this side keeps its address
    /// and route, so packets are sent and dropped, never refused.
    fn link(&self, i: usize, up: bool) {
        let there = format!("pp{i}t{}", std::process::id() % 100_000);
        self.exec(&["ip", "link", "set", &there, if up { "up" } else { "down" }])
            .unwrap();
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// What one writer was answered.
#[derive(Default)]
struct Answers {
    /// Acknowledged ids: the cursor when it was appended by that request,
    /// `None` when it was a duplicate (appended by an earlier try).
    acked: HashMap<String, Option<u64>>,
    /// Statuses seen, with when.
    statuses: Vec<(Instant, u16)>,
}

/// A writer: one event per request to `base`, paced, retrying a refused
/// event (same id) until it is acknowledged; stops at `stop` once nothing
/// is left to retry.
fn writer(
    http: reqwest::Client,
    node: usize,
    base: String,
    stop: CancellationToken,
) -> (Arc<Mutex<Answers>>, tokio::task::JoinHandle<()>) {
    let answers = Arc::new(Mutex::new(Answers::default()));
    let out = answers.clone();
    let task = tokio::spawn(async move {
        let mut pace = tokio::time::interval(Duration::from_millis(10));
        let mut k = 0u64;
        let mut retry: Option<String> = None;
        loop {
            pace.tick().await;
            if stop.is_cancelled() && retry.is_none() {
                return;
            }
            let id = retry.take().unwrap_or_else(|| {
                k += 1;
                format!("n{node}-{k}")
            });
            let ev = json!({"id": id, "type": "text.delta", "runId": format!("run-n{node}"),
                            "messageId": format!("msg-n{node}"), "payload": {"delta": format!("{id} ")}});
            let sent = http
                .post(format!("{base}/v1/sessions/{SESSION}/events"))
                .json(&ev)
                .timeout(DEADLINE)
                .send()
                .await;
            let (status, body) = match sent {
                Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
                Err(_) => (0, Value::Null),
            };
            let mut a = out.lock().unwrap();
            a.statuses.push((Instant::now(), status));
            match status {
                200 => {
                    let appended = body["accepted"] == 1;
                    let at = appended.then(|| body["cursor"].as_u64().unwrap());
                    a.acked.insert(id, at);
                }
                503 | 0 => retry = Some(id),
                other => panic!("node {node}: {id} answered {other}: {body}"),
            }
        }
    });
    (answers, task)
}

/// Wait (at most `DEADLINE`, polling every 20 ms) until `cond` holds.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn acked(a: &Arc<Mutex<Answers>>) -> usize {
    a.lock().unwrap().acked.len()
}

fn skipped(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED {TEST}: {why}");
}

#[tokio::test]
async fn a_partitioned_node_refuses_and_its_readers_resume_elsewhere() {
    if !own_redis(TEST, &["redis-server"]) {
        return;
    }
    // Its bounds are seconds: not beside a test that saturates the machine
    // (a refusal took 5.3 s beside the packaging test's `cargo check`).
    let _machine = crate::common::Machine::timed();
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(e) => {
            return skipped(&format!(
                "cannot make a network namespace ({e}); needs root"
            ))
        }
    };
    let port = free_port();
    let _redis = RedisServer::start_in(&ns.name, port, &tempdir("redis-netns"));
    let proxy = Proxy::start(format!("10.201.1.2:{port}")).await;
    let prefix = format!("ptest-{}", uuid::Uuid::new_v4().simple());
    let envs = [
        ("PROJECTOR_REDIS__PREFIX", prefix.as_str()),
        ("PROJECTOR_REDIS__TIMEOUT_MS", "1000"),
        ("PROJECTOR_REDIS__PARTITION_CLOSE_MS", "1000"),
    ];
    let nodes: Vec<Proc> = [
        format!("redis://10.201.0.2:{port}"),
        format!("redis://127.0.0.1:{}", proxy.port),
    ]
    .iter()
    .map(|url| redis_node(url, &envs))
    .collect();
    let base: Vec<String> = nodes
        .iter()
        .map(|n| format!("http://{}", n.addr()))
        .collect();
    let http = reqwest::Client::new();
    for b in &base {
        readiness(&http, b, 200).await;
    }

    // Both nodes ingest into one session; a subscriber on each.
    let stop = CancellationToken::new();
    let (a0, w0) = writer(http.clone(), 0, base[0].clone(), stop.clone());
    let (a1, w1) = writer(http.clone(), 1, base[1].clone(), stop.clone());
    let sub = |i: usize| RawSse::open(&http, &base[i], SESSION, "?cursor=0", None);
    let mut c0 = Collector::spawn("node 0", sub(0).await.unwrap());
    let mut c1 = Collector::spawn("node 1", sub(1).await.unwrap());
    until("20 acks from each node", || {
        acked(&a0) >= 20 && acked(&a1) >= 20
    })
    .await;

    // Delayed: node 1 goes on, slower.
    proxy.delay_ms.store(100, Ordering::Relaxed);
    // (An ingest takes several round trips to Redis: about 2 s here.)
    let before = acked(&a1);
    until("node 1 acks under delay", || acked(&a1) >= before + 3).await;
    proxy.delay_ms.store(0, Ordering::Relaxed);

    // Cut: node 1 refuses, node 0 goes on; node 1's subscriber is let go
    // and resumes on node 0.
    let cut = Instant::now();
    ns.link(1, false);
    until("node 1 refuses while cut", || {
        a1.lock()
            .unwrap()
            .statuses
            .iter()
            .any(|(t, s)| *t > cut && *s == 503)
    })
    .await;
    let first_refusal = a1
        .lock()
        .unwrap()
        .statuses
        .iter()
        .find(|(t, s)| *t > cut && *s == 503)
        .unwrap()
        .0;
    // A request in flight at the cut may wait out the 1 s timeout more
    // than once before it is refused (5.23 s was seen once, under a
    // loaded CI run): the bound tells a refusal in seconds from a request
    // left hanging for the kernel's TCP timeout, minutes.
    assert!(
        first_refusal - cut < Duration::from_secs(10),
        "a refusal within seconds (timeout 1 s) of the requests in flight: {:?}",
        first_refusal - cut
    );
    let ended = tokio::time::timeout(DEADLINE, c1.ended())
        .await
        .expect("node 1's stream ends while it is cut off");
    let seen1 = c1.frames();
    let last_id = seen1.last().and_then(|f| f.id.clone());
    let resumed = RawSse::get(
        &http,
        &format!("{}/v1/sessions/{SESSION}/stream", base[0]),
        last_id.clone(),
    )
    .await
    .unwrap();
    let mut c1b = Collector::spawn("node 1's reader on node 0", resumed);
    let during = acked(&a0);
    until("node 0 acks while node 1 is cut", || {
        acked(&a0) >= during + 20
    })
    .await;
    readiness(&http, &base[1], 503).await;

    // Healed: node 1 writes again.
    ns.link(1, true);
    readiness(&http, &base[1], 200).await;
    let healed = acked(&a1);
    until("node 1 acks after the heal", || acked(&a1) >= healed + 10).await;
    stop.cancel();
    w0.await.unwrap();
    w1.await.unwrap();

    // One gapless order with every acknowledged event once, at the cursor
    // its acknowledgement named.
    let (_, log) = log_at(&http, &base[0], SESSION).await;
    let head = log.len() as u64;
    let mut at = HashMap::new();
    for (i, (c, e)) in log.iter().enumerate() {
        assert_eq!(*c, i as u64 + 1, "gapless cursors");
        let id = e["id"].as_str().unwrap().to_string();
        assert!(at.insert(id.clone(), *c).is_none(), "{id} logged twice");
    }
    for a in [&a0, &a1] {
        for (id, cursor) in &a.lock().unwrap().acked {
            let logged = at
                .get(id)
                .unwrap_or_else(|| panic!("acknowledged {id} is not in the log"));
            if let Some(c) = cursor {
                assert_eq!(logged, c, "{id} at the cursor its acknowledgement named");
            }
        }
    }
    assert_eq!(
        at.len(),
        acked(&a0) + acked(&a1),
        "nothing logged that was not acknowledged"
    );

    // Every reader saw every cursor once, in order; node 1's reader across
    // its move to node 0.
    c0.wait_cursor(head).await;
    c1b.wait_cursor(head).await;
    let deltas =
        |fs: Vec<Frame>| -> Vec<Frame> { fs.into_iter().filter(|f| f.event == "delta").collect() };
    let f0 = deltas(c0.frames());
    assert_gapless("node 0's reader", &f0, 1, head);
    let mut f1 = deltas(seen1);
    f1.extend(deltas(c1b.frames()));
    assert_gapless("node 1's reader, then on node 0", &f1, 1, head);
    assert_same_frames("node 1's reader against node 0's", &f1, &f0);

    // Both nodes serve the same bytes again.
    let mut r1 = Collector::spawn("node 1 after the heal", sub(1).await.unwrap());
    r1.wait_cursor(head).await;
    assert_same_frames("node 1 after the heal", &deltas(r1.frames()), &f0);
    let _ = ended;
    drop(nodes);
    let _ =
        agent_projector::store::redis::purge_prefix(&format!("redis://10.201.0.2:{port}"), &prefix);
}
