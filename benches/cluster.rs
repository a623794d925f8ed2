//! Scaling out on Redis: 1, 2 and 3 agent-projector nodes (`--store redis`)
//! sharing one Redis, each N on a fresh key prefix, plus single-node
//! reference rows on the embedded and the memory store, in one run:
//!
//! 1. ingest: writers spread round-robin over the nodes, each posting NDJSON
//!    batches to its own session; events/s and request latency;
//! 2. contended ingest: the same writers all posting into ONE session
//!    through every node (cross-node conflicts and retries); events/s,
//!    failed requests and conflicts, then the session's log is read back
//!    through every node and checked to be gapless (cursors 1..=total, each
//!    event once);
//! 3. fan-out: SSE subscribers of one session spread evenly over the nodes,
//!    one publisher posting at a fixed rate to node 1; deliveries/s,
//!    publish-to-receive latency, and whether every subscriber got every
//!    frame.
//!
//! `cargo bench --bench cluster` (a few minutes; Redis at
//! `$PROJECTOR_BENCH_REDIS_URL`, default `redis://127.0.0.1:6379`). Under
//! `cargo test` a seconds-long smoke version runs when
//! `PROJECTOR_TEST_REDIS_URL` is set, and is skipped with a note otherwise.
//! Prints the tables and writes `target/bench-cluster.json` (the smoke run:
//! `target/bench-cluster-smoke.json`). The keys of the run's prefixes are
//! deleted at the end (also after a panic).

#[allow(dead_code)]
#[path = "load/clients.rs"]
mod clients;
#[allow(dead_code)]
#[path = "load/servers.rs"]
mod servers;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clients::{pct, Tally};
use serde_json::{json, Value};
use servers::Server;
use tokio::sync::Notify;

#[derive(Clone, Copy)]
struct Scale {
    writers: usize,
    batch: usize,
    ingest_events: usize,
    contended_events: usize,
    subscribers: usize,
    rate: u64,
    run: Duration,
}

/// What one configuration runs on.
#[derive(Clone)]
enum Setup {
    /// One node on a local store (`embedded` or `memory`): the reference.
    Local(&'static str),
    /// `n` nodes on Redis under `prefix`.
    Redis { n: usize, prefix: String },
}

impl Setup {
    fn label(&self) -> String {
        match self {
            Setup::Local(store) => format!("1 node, {store} (reference)"),
            Setup::Redis { n: 1, .. } => "1 node, Redis".into(),
            Setup::Redis { n, .. } => format!("{n} nodes, Redis"),
        }
    }
}

/// Outcome of one ingest run.
struct Ingest {
    events: u64,
    secs: f64,
    p50: f64,
    p99: f64,
    failed: u64,
    /// Failed requests per node (writer `w` posts to node `w % n`).
    failed_by_node: Vec<u64>,
    /// Of `failed`: 503 `store_conflict` (retries exhausted; nothing applied).
    conflict_failures: u64,
    /// The first few failures, as evidence.
    errors: Vec<String>,
    /// Event ids of the requests that succeeded.
    accepted_ids: Vec<String>,
}

impl Ingest {
    fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }
}

/// `writers` clients, writer `w` on node `w % n` posting batches of
/// `scale.batch` events to `session(w)`, `total` events in all.
async fn ingest(
    http: &reqwest::Client,
    nodes: &[String],
    session: impl Fn(usize) -> String,
    tag: &str,
    total: usize,
    scale: Scale,
) -> Ingest {
    let per_writer = (total / scale.writers / scale.batch).max(1);
    let started = Instant::now();
    let tasks: Vec<_> = (0..scale.writers)
        .map(|w| {
            let http = http.clone();
            let url = format!("{}/v1/sessions/{}/events", nodes[w % nodes.len()], session(w));
            let (tag, batch) = (tag.to_string(), scale.batch);
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per_writer);
                let mut ids = Vec::with_capacity(per_writer * batch);
                let mut errors = Vec::new();
                let (mut failed, mut conflict_failures) = (0u64, 0u64);
                for b in 0..per_writer {
                    let mut body = String::with_capacity(batch * 110);
                    let batch_ids: Vec<String> =
                        (0..batch).map(|i| format!("{tag}-{w}-{b}-{i}")).collect();
                    for id in &batch_ids {
                        body.push_str(&format!(
                            "{{\"id\":\"{id}\",\"type\":\"text.delta\",\"runId\":\"r\",\"payload\":{{\"delta\":\"token \"}}}}\n"
                        ));
                    }
                    let t0 = Instant::now();
                    let r = http
                        .post(&url)
                        .header("content-type", "application/x-ndjson")
                        .body(body)
                        .send()
                        .await;
                    let error = match r {
                        Ok(resp) if resp.status().is_success() => {
                            // Read the body so the connection is reused.
                            let _ = resp.bytes().await;
                            None
                        }
                        Ok(resp) => {
                            let status = resp.status();
                            let text = resp.text().await.unwrap_or_default();
                            Some(format!("{status}: {text}"))
                        }
                        Err(e) => Some(format!("request error: {e}")),
                    };
                    lat.push(t0.elapsed().as_micros() as u32);
                    match error {
                        None => ids.extend(batch_ids),
                        Some(e) => {
                            failed += 1;
                            if e.contains("\"code\":\"store_conflict\"") {
                                conflict_failures += 1;
                            }
                            if errors.len() < 3 {
                                errors.push(e);
                            }
                        }
                    }
                }
                (lat, ids, failed, conflict_failures, errors)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut out = Ingest {
        events: 0,
        secs: 0.0,
        p50: 0.0,
        p99: 0.0,
        failed: 0,
        failed_by_node: vec![0; nodes.len()],
        conflict_failures: 0,
        errors: Vec::new(),
        accepted_ids: Vec::new(),
    };
    for (w, t) in tasks.into_iter().enumerate() {
        let (l, ids, failed, conflict_failures, errors) = t.await.expect("writer");
        lat.extend(l);
        out.accepted_ids.extend(ids);
        out.failed += failed;
        out.failed_by_node[w % nodes.len()] += failed;
        out.conflict_failures += conflict_failures;
        for e in errors {
            if out.errors.len() < 5 {
                out.errors.push(e);
            }
        }
    }
    out.secs = started.elapsed().as_secs_f64();
    out.events = out.accepted_ids.len() as u64;
    lat.sort_unstable();
    out.p50 = pct(&lat, 0.5);
    out.p99 = pct(&lat, 0.99);
    out
}

/// The session's log as one node serves it, checked against the accepted
/// event ids: cursors 1..=head without gaps, each accepted event exactly once.
struct LogCheck {
    events: usize,
    head: u64,
    gapless: bool,
    missing: usize,
    duplicates: usize,
    unexpected: usize,
    problems: Vec<String>,
}

async fn check_log(
    http: &reqwest::Client,
    node: &str,
    session: &str,
    accepted: &HashSet<String>,
) -> LogCheck {
    let mut after = 0u64;
    let mut head = 0u64;
    let mut seen: HashSet<String> = HashSet::with_capacity(accepted.len());
    let mut check = LogCheck {
        events: 0,
        head: 0,
        gapless: true,
        missing: 0,
        duplicates: 0,
        unexpected: 0,
        problems: Vec::new(),
    };
    loop {
        let page: Value = http
            .get(format!(
                "{node}/v1/sessions/{session}/events?after={after}&limit=1000"
            ))
            .send()
            .await
            .expect("read the log")
            .error_for_status()
            .expect("read the log: status")
            .json()
            .await
            .expect("read the log: JSON");
        head = head.max(page["head"].as_u64().unwrap_or(0));
        let events = page["events"].as_array().cloned().unwrap_or_default();
        if events.is_empty() {
            break;
        }
        for e in &events {
            let cursor = e["cursor"].as_u64().unwrap_or(0);
            if cursor != after + 1 {
                check.gapless = false;
                if check.problems.len() < 5 {
                    check
                        .problems
                        .push(format!("cursor {cursor} follows {after}"));
                }
            }
            after = cursor;
            check.events += 1;
            let id = e["event"]["id"].as_str().unwrap_or("").to_string();
            if !accepted.contains(&id) {
                check.unexpected += 1;
            }
            if !seen.insert(id) {
                check.duplicates += 1;
            }
        }
    }
    check.head = head;
    check.missing = accepted.iter().filter(|id| !seen.contains(*id)).count();
    if after != head {
        check.gapless = false;
        check
            .problems
            .push(format!("paging ended at cursor {after}, head is {head}"));
    }
    check
}

/// Sum of a counter over all its label sets in a node's `/metrics`.
async fn counter(http: &reqwest::Client, node: &str, name: &str) -> u64 {
    let Ok(resp) = http.get(format!("{node}/metrics")).send().await else {
        return 0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Per node: appends the store refused because another node appended
/// first, and ingest retries after such a conflict.
async fn conflicts(http: &reqwest::Client, nodes: &[String]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for n in nodes {
        out.push((
            counter(http, n, "projector_redis_conflicts_total").await,
            counter(http, n, "projector_ingest_conflicts_total").await,
        ));
    }
    out
}

/// Outcome of one fan-out run.
struct Fanout {
    sent: u64,
    delivered_per_s: f64,
    /// Frames delivered / (events sent x subscribers).
    delivered_ratio: f64,
    p50: f64,
    p99: f64,
    /// p50 / p99 of the subscribers on node 1 (where the publisher posts)
    /// and on the other nodes.
    local: (f64, f64),
    remote: (f64, f64),
    complete: usize,
    short: usize,
    extra: usize,
    min_delivered: u64,
    failed: u64,
}

/// `scale.subscribers` SSE subscribers of one session, subscriber `i` on
/// node `i % n`; one publisher posting `scale.rate` events/s to node 1.
async fn fanout(nodes: &[Server], session: &str, scale: Scale) -> Fanout {
    let base = Instant::now();
    let stop = Arc::new(Notify::new());
    let tallies: Vec<Arc<Tally>> = (0..scale.subscribers)
        .map(|_| Arc::new(Tally::default()))
        .collect();
    let tasks: Vec<_> = tallies
        .iter()
        .enumerate()
        .map(|(i, t)| {
            tokio::spawn(clients::sse(
                nodes[i % nodes.len()].addr,
                format!("/v1/sessions/{session}/stream"),
                t.clone(),
                1,
                true,
                base,
                stop.clone(),
                false,
            ))
        })
        .collect();
    let settled = |t: &Arc<Tally>| t.ready.load(Ordering::SeqCst) + t.failed.load(Ordering::SeqCst);
    let t0 = Instant::now();
    while tallies.iter().map(settled).sum::<u64>() < scale.subscribers as u64
        && t0.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let published = Instant::now();
    let sent = clients::publish(
        nodes[0].url(),
        vec![session.to_string()],
        scale.rate,
        scale.run,
        4,
        1,
        base,
    )
    .await;
    // Let in-flight deliveries land, bounded.
    let t0 = Instant::now();
    while tallies
        .iter()
        .any(|t| t.delivered.load(Ordering::SeqCst) < sent)
        && t0.elapsed() < Duration::from_secs(5)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = published.elapsed().as_secs_f64();
    stop.notify_waiters();
    for t in tasks {
        let _ = t.await;
    }
    let (mut all, mut local, mut remote) = (Vec::new(), Vec::new(), Vec::new());
    let mut out = Fanout {
        sent,
        delivered_per_s: 0.0,
        delivered_ratio: 0.0,
        p50: 0.0,
        p99: 0.0,
        local: (0.0, 0.0),
        remote: (f64::NAN, f64::NAN),
        complete: 0,
        short: 0,
        extra: 0,
        min_delivered: u64::MAX,
        failed: 0,
    };
    let mut delivered = 0;
    for (i, t) in tallies.iter().enumerate() {
        let d = t.delivered.load(Ordering::SeqCst);
        delivered += d;
        out.min_delivered = out.min_delivered.min(d);
        match d.cmp(&sent) {
            std::cmp::Ordering::Equal => out.complete += 1,
            std::cmp::Ordering::Less => out.short += 1,
            std::cmp::Ordering::Greater => out.extra += 1,
        }
        out.failed += t.failed.load(Ordering::SeqCst);
        let lat = std::mem::take(&mut *t.latencies.lock().unwrap());
        all.extend_from_slice(&lat);
        if i % nodes.len() == 0 {
            local.extend(lat);
        } else {
            remote.extend(lat);
        }
    }
    for v in [&mut all, &mut local, &mut remote] {
        v.sort_unstable();
    }
    out.delivered_per_s = delivered as f64 / elapsed;
    out.delivered_ratio = delivered as f64 / (sent * scale.subscribers as u64).max(1) as f64;
    out.p50 = pct(&all, 0.5);
    out.p99 = pct(&all, 0.99);
    out.local = (pct(&local, 0.5), pct(&local, 0.99));
    out.remote = (pct(&remote, 0.5), pct(&remote, 0.99));
    out
}

/// Start the nodes of `setup` and wait until each is ready.
async fn start(setup: &Setup, redis_url: &str, dir: &std::path::Path) -> Vec<Server> {
    let nodes: Vec<Server> = match setup {
        Setup::Local(store) => vec![servers::projector(store, &dir.join(store), &[])],
        Setup::Redis { n, prefix } => (0..*n)
            .map(|i| {
                servers::projector_with(
                    "redis",
                    &dir.join(format!("{prefix}-{i}")),
                    &["--redis-url", redis_url],
                    &[("PROJECTOR_REDIS__PREFIX", prefix)],
                )
            })
            .collect(),
    };
    let http = reqwest::Client::new();
    for node in &nodes {
        let t0 = Instant::now();
        loop {
            let r = http.get(format!("{}/readyz", node.url())).send().await;
            if matches!(&r, Ok(resp) if resp.status().is_success()) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "node {} not ready: {r:?}",
                node.url()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    nodes
}

/// Run the three workloads on one setup.
async fn measure(setup: &Setup, redis_url: &str, dir: &std::path::Path, scale: Scale) -> Value {
    let nodes = start(setup, redis_url, dir).await;
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(scale.writers)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let label = setup.label();
    // Each setup has a fresh data directory or key prefix: plain names do.
    let run = "r";

    let own = ingest(
        &http,
        &urls,
        |w| format!("ingest-{run}-{w}"),
        "i",
        scale.ingest_events,
        scale,
    )
    .await;
    println!(
        "{label:<30} ingest     {:>9.0} ev/s  p50 {:>7.2} ms  p99 {:>7.2} ms  failed {}",
        own.rate(),
        own.p50,
        own.p99,
        own.failed
    );
    for e in &own.errors {
        println!("    ingest failure: {e}");
    }

    let one = format!("contended-{run}");
    let before = conflicts(&http, &urls).await;
    let shared = ingest(
        &http,
        &urls,
        |_| one.clone(),
        "c",
        scale.contended_events,
        scale,
    )
    .await;
    let after = conflicts(&http, &urls).await;
    let by_node: Vec<(u64, u64)> = after
        .iter()
        .zip(&before)
        .map(|(a, b)| (a.0 - b.0, a.1 - b.1))
        .collect();
    let store_conflicts: u64 = by_node.iter().map(|c| c.0).sum();
    let retries: u64 = by_node.iter().map(|c| c.1).sum();
    let accepted: HashSet<String> = shared.accepted_ids.iter().cloned().collect();
    let mut logs = Vec::new();
    for u in &urls {
        logs.push(check_log(&http, u, &one, &accepted).await);
    }
    let log_ok = logs.iter().all(|l| {
        l.gapless
            && l.missing == 0
            && l.duplicates == 0
            && l.unexpected == 0
            && l.events == accepted.len()
    });
    println!(
        "{label:<30} contended  {:>9.0} ev/s  p50 {:>7.2} ms  p99 {:>7.2} ms  failed {} by node {:?}  conflicts {store_conflicts} by node {:?} (retries {retries})  log {} events {}",
        shared.rate(),
        shared.p50,
        shared.p99,
        shared.failed,
        shared.failed_by_node,
        by_node.iter().map(|c| c.0).collect::<Vec<_>>(),
        logs[0].events,
        if log_ok { "gapless, each once, on every node" } else { "NOT OK" },
    );
    for e in &shared.errors {
        println!("    contended failure: {e}");
    }
    for (i, l) in logs.iter().enumerate() {
        if !l.gapless || l.missing + l.duplicates + l.unexpected > 0 || l.events != accepted.len() {
            println!(
                "    log via node {}: {} events, head {}, gapless {}, missing {}, duplicates {}, unexpected {}; {:?}",
                i + 1,
                l.events,
                l.head,
                l.gapless,
                l.missing,
                l.duplicates,
                l.unexpected,
                l.problems
            );
        }
    }

    let fan = fanout(&nodes, &format!("fanout-{run}"), scale).await;
    println!(
        "{label:<30} fan-out    {:>9.0} del/s p50 {:>7.2} ms  p99 {:>7.2} ms  node 1 p99 {:.2} ms, other nodes p99 {:.2} ms; {}/{} subscribers got all {} frames (short {}, extra {}, min {}, failed {})",
        fan.delivered_per_s,
        fan.p50,
        fan.p99,
        fan.local.1,
        fan.remote.1,
        fan.complete,
        scale.subscribers,
        fan.sent,
        fan.short,
        fan.extra,
        fan.min_delivered,
        fan.failed
    );
    drop(nodes);

    let (store, n) = match setup {
        Setup::Local(store) => (*store, 1),
        Setup::Redis { n, .. } => ("redis", *n),
    };
    json!({
        "setup": label, "store": store, "nodes": n,
        "ingest": {
            "writers": scale.writers, "batch": scale.batch, "sessions": scale.writers,
            "events": own.events, "secs": own.secs, "events_per_s": own.rate(),
            "p50_ms": own.p50, "p99_ms": own.p99, "failed_requests": own.failed,
            "failed_requests_by_node": own.failed_by_node,
            "errors": own.errors,
        },
        "contended": {
            "writers": scale.writers, "batch": scale.batch, "sessions": 1,
            "events": shared.events, "secs": shared.secs, "events_per_s": shared.rate(),
            "p50_ms": shared.p50, "p99_ms": shared.p99, "failed_requests": shared.failed,
            "failed_requests_by_node": shared.failed_by_node,
            "store_conflict_failures": shared.conflict_failures,
            "store_conflicts_by_node": by_node.iter().map(|c| c.0).collect::<Vec<_>>(),
            "conflict_retries_by_node": by_node.iter().map(|c| c.1).collect::<Vec<_>>(),
            "errors": shared.errors, "store_conflicts": store_conflicts,
            "conflict_retries": retries,
            "log": logs.iter().map(|l| json!({
                "events": l.events, "head": l.head, "gapless": l.gapless,
                "missing": l.missing, "duplicates": l.duplicates,
                "unexpected": l.unexpected, "problems": l.problems,
            })).collect::<Vec<_>>(),
            "log_ok": log_ok,
        },
        "fanout": {
            "subscribers": scale.subscribers, "offered_events_per_s": scale.rate,
            "offered_deliveries_per_s": scale.rate * scale.subscribers as u64,
            "sent": fan.sent, "delivered_per_s": fan.delivered_per_s,
            "delivered_ratio": fan.delivered_ratio,
            "p50_ms": fan.p50, "p99_ms": fan.p99,
            "node1_p50_ms": fan.local.0, "node1_p99_ms": fan.local.1,
            "other_nodes_p50_ms": fan.remote.0, "other_nodes_p99_ms": fan.remote.1,
            "complete_subscribers": fan.complete, "short_subscribers": fan.short,
            "extra_subscribers": fan.extra, "min_delivered": fan.min_delivered,
            "failed_subscribers": fan.failed,
        },
    })
}

/// Deletes every key under the run's prefixes when dropped (also when the
/// run panics), so a run leaves nothing behind in a shared Redis.
struct Cleanup {
    url: String,
    prefixes: Vec<String>,
}

impl Cleanup {
    fn run(&self) -> Result<usize, agent_projector::store::StoreError> {
        let mut deleted = 0;
        for p in &self.prefixes {
            deleted += agent_projector::store::redis::purge_prefix(&self.url, p)?;
        }
        Ok(deleted)
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        match self.run() {
            Ok(n) => println!(
                "deleted {n} Redis keys under {} prefixes",
                self.prefixes.len()
            ),
            Err(e) => eprintln!(
                "could not delete the Redis keys under {:?}: {e}",
                self.prefixes
            ),
        }
    }
}

fn ratio(rows: &[Value], i: usize, path: &[&str]) -> String {
    let get = |r: &Value| path.iter().fold(r, |v, k| &v[*k]).as_f64();
    let one = rows
        .iter()
        .find(|r| r["store"] == "redis" && r["nodes"] == 1);
    match (get(&rows[i]), one.and_then(get)) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

/// A latency in ms, or `-` when there was none (no other nodes).
fn ms(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |v| format!("{v:.2}"))
}

fn print_tables(rows: &[Value], scale: Scale) {
    println!(
        "\n== ingest: {} writers round-robin over the nodes, each to its own session, NDJSON batches of {}, {} events",
        scale.writers, scale.batch, scale.ingest_events
    );
    println!(
        "{:<30} {:>10} {:>9} {:>8} {:>8} {:>7}",
        "setup", "events/s", "vs 1 node", "p50 ms", "p99 ms", "failed"
    );
    for (i, r) in rows.iter().enumerate() {
        let x = &r["ingest"];
        println!(
            "{:<30} {:>10.0} {:>9} {:>8.2} {:>8.2} {:>7}",
            r["setup"].as_str().unwrap_or(""),
            x["events_per_s"].as_f64().unwrap_or(0.0),
            ratio(rows, i, &["ingest", "events_per_s"]),
            x["p50_ms"].as_f64().unwrap_or(0.0),
            x["p99_ms"].as_f64().unwrap_or(0.0),
            x["failed_requests"].as_u64().unwrap_or(0)
        );
    }
    println!(
        "\n== contended ingest: the same {} writers all into ONE session through every node, {} events",
        scale.writers, scale.contended_events
    );
    println!(
        "{:<30} {:>10} {:>9} {:>8} {:>8} {:>7} {:>10} {:>8} {:>8}",
        "setup",
        "events/s",
        "vs 1 node",
        "p50 ms",
        "p99 ms",
        "failed",
        "conflicts",
        "retries",
        "log ok"
    );
    for (i, r) in rows.iter().enumerate() {
        let x = &r["contended"];
        println!(
            "{:<30} {:>10.0} {:>9} {:>8.2} {:>8.2} {:>7} {:>10} {:>8} {:>8}",
            r["setup"].as_str().unwrap_or(""),
            x["events_per_s"].as_f64().unwrap_or(0.0),
            ratio(rows, i, &["contended", "events_per_s"]),
            x["p50_ms"].as_f64().unwrap_or(0.0),
            x["p99_ms"].as_f64().unwrap_or(0.0),
            x["failed_requests"].as_u64().unwrap_or(0),
            x["store_conflicts"].as_u64().unwrap_or(0),
            x["conflict_retries"].as_u64().unwrap_or(0),
            if x["log_ok"] == true { "yes" } else { "NO" }
        );
    }
    println!(
        "\n== fan-out: {} SSE subscribers of one session spread over the nodes, {} events/s posted to node 1 for {:?}",
        scale.subscribers, scale.rate, scale.run
    );
    println!(
        "{:<30} {:>10} {:>11} {:>9} {:>7} {:>7} {:>11} {:>11} {:>9}",
        "setup",
        "offered/s",
        "delivered/s",
        "vs 1 node",
        "p50 ms",
        "p99 ms",
        "node 1 p99",
        "others p99",
        "complete"
    );
    for (i, r) in rows.iter().enumerate() {
        let x = &r["fanout"];
        println!(
            "{:<30} {:>10} {:>11.0} {:>9} {:>7.2} {:>7.2} {:>11} {:>11} {:>9}",
            r["setup"].as_str().unwrap_or(""),
            x["offered_deliveries_per_s"].as_u64().unwrap_or(0),
            x["delivered_per_s"].as_f64().unwrap_or(0.0),
            ratio(rows, i, &["fanout", "delivered_per_s"]),
            x["p50_ms"].as_f64().unwrap_or(0.0),
            x["p99_ms"].as_f64().unwrap_or(0.0),
            ms(&x["node1_p99_ms"]),
            ms(&x["other_nodes_p99_ms"]),
            format!("{}/{}", x["complete_subscribers"], x["subscribers"])
        );
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let redis_url = if full {
        std::env::var("PROJECTOR_BENCH_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
    } else {
        match std::env::var("PROJECTOR_TEST_REDIS_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => {
                println!(
                    "skipping the cluster benchmark smoke run: PROJECTOR_TEST_REDIS_URL is unset"
                );
                return;
            }
        }
    };
    let scale = if full {
        Scale {
            writers: 32,
            batch: 10,
            ingest_events: 128_000,
            contended_events: 32_000,
            subscribers: 300,
            rate: 200,
            run: Duration::from_secs(5),
        }
    } else {
        Scale {
            writers: 8,
            batch: 10,
            ingest_events: 800,
            contended_events: 400,
            subscribers: 30,
            rate: 50,
            run: Duration::from_millis(500),
        }
    };
    // Fail early and clearly when Redis is not there.
    let ping = redis::Client::open(redis_url.as_str())
        .and_then(|c| c.get_connection())
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
    if let Err(e) = ping {
        panic!("the cluster benchmark needs Redis (PROJECTOR_BENCH_REDIS_URL or PROJECTOR_TEST_REDIS_URL): {e}");
    }

    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let mut setups = vec![Setup::Local("embedded"), Setup::Local("memory")];
    for n in 1..=3 {
        setups.push(Setup::Redis {
            n,
            prefix: format!("bench-cluster-{stamp}-{}-n{n}", std::process::id()),
        });
    }
    let cleanup = Cleanup {
        url: redis_url.clone(),
        prefixes: setups
            .iter()
            .filter_map(|s| match s {
                Setup::Redis { prefix, .. } => Some(prefix.clone()),
                Setup::Local(_) => None,
            })
            .collect(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1) // the servers and Redis get the rest
        .enable_all()
        .build()
        .unwrap();
    let tmp = std::env::temp_dir().join(format!("projector-cluster-{}", std::process::id()));
    let rows: Vec<Value> = rt.block_on(async {
        let mut rows = Vec::new();
        for s in &setups {
            rows.push(measure(s, &redis_url, &tmp, scale).await);
        }
        rows
    });
    let _ = std::fs::remove_dir_all(&tmp);
    print_tables(&rows, scale);
    // Every request must succeed: contention across nodes is retried by the
    // server (turns, backoff), never handed to the client.
    let correct = rows.iter().all(|r| {
        r["ingest"]["failed_requests"] == 0
            && r["contended"]["failed_requests"] == 0
            && r["contended"]["log_ok"] == true
            && r["fanout"]["complete_subscribers"] == r["fanout"]["subscribers"]
    });
    let ok = correct;
    let report = json!({
        "full": full,
        "writers": scale.writers, "batch": scale.batch,
        "ingest_events": scale.ingest_events, "contended_events": scale.contended_events,
        "subscribers": scale.subscribers, "rate": scale.rate,
        "run_secs": scale.run.as_secs_f64(),
        "all_ok": ok,
        "correct": correct,
        "rows": rows,
    });
    // The smoke run does not overwrite the figures of the last full run.
    let path = if full {
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-cluster.json")
    } else {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/target/bench-cluster-smoke.json"
        )
    };
    let _ = std::fs::write(path, serde_json::to_vec_pretty(&report).unwrap());
    println!("wrote {path}");
    if !ok {
        println!(
            "NOTE: failed requests, a log that is not gapless or missing frames above are server bugs"
        );
    }
    // The smoke run fails on any of them.
    if !correct && !full {
        drop(cleanup);
        std::process::exit(1);
    }
}
