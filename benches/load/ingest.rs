//! The ingest section (issue 36 items 3 and 4): single-event POSTs and
//! NDJSON batches from keep-alive clients and the streaming publish,
//! against agent-projector on its memory and durable stores, the
//! parse-only floor and the anchor; then item 3's goals.
//!
//! The goals compare two servers' rates, and this machine's speed drifts
//! by tens of percent within minutes (docs/BENCHMARKS.md): in the
//! sequential pass the two sides of a ratio run up to a minute apart. So
//! after it, each goal's two sides are measured back to back
//! `LOAD_INGEST_PAIRS` times (default 3; 0 for none), the order flipped
//! each time, and a goal is judged on the median ratio of its pairs.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use crate::clients::pct;
use crate::servers::{self, Server};
use crate::{poster, publish};

/// The ingest section: its rows for the report, and the goals when the
/// run is at full scale (a debug build's ratios under `cargo test` say
/// nothing of them).
pub async fn section(
    anchor: Option<&Server>,
    tmp: &Path,
    events: usize,
    full: bool,
) -> (Vec<Value>, Option<Value>) {
    println!("== ingest (events/s)");
    let mut rows = Vec::new();
    let mut ours = Vec::new();
    for store in ["memory", "embedded"] {
        let dir = tmp.join(format!("ingest-{store}"));
        let server = servers::projector(store, &dir, &[]);
        ingest_shapes(
            &server,
            &format!("agent-projector {store:<9}"),
            json!({"server": "agent-projector", "store": store}),
            SHAPES,
            events,
            &mut rows,
        )
        .await;
        // The streaming ingest: one publish stream per producer.
        for window in [1usize, 16, 256] {
            let f = publish::publish(&server, events, window).await;
            println!(
                "agent-projector {store:<9} publish window {window:>3}: {:>10.0} ev/s  ack p50 {:>7.2} ms p99 {:>7.2} ms  {}",
                f.events_per_s, f.p50_ms, f.p99_ms, cpu_cols(&f)
            );
            rows.push(ingest_row(
                json!({"server": "agent-projector", "store": store, "publish_window": window}),
                &f,
            ));
        }
        ours.push(server);
    }
    // The floor of item 3: axum parsing the body, nothing else.
    let floor = servers::ingest_floor();
    ingest_shapes(
        &floor,
        "floor (axum, parse only)",
        json!({"server": "floor", "store": "none"}),
        SHAPES.into_iter().filter(|s| s.1 <= 100),
        events,
        &mut rows,
    )
    .await;
    if let Some(a) = anchor {
        ingest_shapes(
            a,
            "anchor          redis    ",
            json!({"server": "anchor", "store": "redis pub/sub"}),
            SHAPES,
            events,
            &mut rows,
        )
        .await;
    }
    if !full {
        return (rows, None);
    }
    let n = std::env::var("LOAD_INGEST_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    // In the order of `GOALS`: the memory store and the floor, the
    // durable store and the anchor (when it ran).
    let sides = [(&ours[0], Some(&floor)), (&ours[1], anchor)];
    let mut pairs = Vec::new();
    for round in 0..n {
        for (goal, (mine, theirs)) in GOALS.iter().zip(sides) {
            let Some(theirs) = theirs else { continue };
            pairs.push(pair(goal, mine, theirs, round, events, &mut rows).await);
        }
    }
    let goals = ingest_goals(&rows, &pairs);
    (rows, Some(goals))
}

/// One of item 3's goals: agent-projector on `ours` (server, store)
/// against `theirs`, at `goal` times its rate or more.
struct Goal {
    name: &'static str,
    ours: (&'static str, &'static str),
    theirs: (&'static str, &'static str),
    against: &'static str,
    goal: f64,
}

const GOALS: [Goal; 2] = [
    Goal {
        name: "memory_vs_floor",
        ours: ("agent-projector", "memory"),
        theirs: ("floor", "none"),
        against: "the parse-only floor",
        goal: 0.5,
    },
    Goal {
        name: "durable_vs_anchor",
        ours: ("agent-projector", "embedded"),
        theirs: ("anchor", "redis pub/sub"),
        against: "the anchor",
        goal: 2.0,
    },
];

/// A goal's two sides measured back to back: our rate over theirs.
struct Pair {
    goal: &'static str,
    ratio: f64,
}

/// Measure `goal`'s shape ([`MANY_WRITERS`] clients, one event per POST)
/// on `mine` and `theirs` back to back, theirs first in even rounds and
/// second in odd ones (so that a drift of the machine's speed within a
/// pair does not favour one side every time); each to sessions of its
/// round. Printed, and added to `rows` marked with the round.
async fn pair(
    goal: &Goal,
    mine: &Server,
    theirs: &Server,
    round: usize,
    events: usize,
    rows: &mut Vec<Value>,
) -> Pair {
    let (a, b) = if round % 2 == 0 {
        let b = pair_side(goal.theirs, theirs, round, events, rows).await;
        (pair_side(goal.ours, mine, round, events, rows).await, b)
    } else {
        let a = pair_side(goal.ours, mine, round, events, rows).await;
        (a, pair_side(goal.theirs, theirs, round, events, rows).await)
    };
    let ratio = a.events_per_s / b.events_per_s.max(1.0);
    println!(
        "pair {round} {}: {:>10.0} ev/s against {:>10.0} ({}; {}) = {ratio:.2}x",
        goal.name,
        a.events_per_s,
        b.events_per_s,
        cpu_cols(&a),
        cpu_cols(&b)
    );
    Pair {
        goal: goal.name,
        ratio,
    }
}

/// One side of a pair: `who` (server, store) on `server`, to sessions of
/// `round`, added to `rows` marked with it.
async fn pair_side(
    who: (&str, &str),
    server: &Server,
    round: usize,
    events: usize,
    rows: &mut Vec<Value>,
) -> publish::Figures {
    let f = ingest(server, MANY_WRITERS, 1, events, &format!("-pair{round}")).await;
    let id = json!({"server": who.0, "store": who.1, "pair": round,
                    "clients": MANY_WRITERS, "batch": 1});
    rows.push(ingest_row(id, &f));
    f
}

/// The clients of the single-event POSTs that item 3's goals are taken
/// from ([`ingest_goals`]).
const MANY_WRITERS: usize = 64;

/// The ingest section's request shapes: clients, events per request, the
/// row's label, and the share of the section's events it posts. One
/// writer is a runtime streaming tokens one POST at a time (its latency
/// is the figure); 64 are many runtimes at once (throughput).
const SHAPES: [(usize, usize, &str, usize); 4] = [
    (1, 1, "one writer ", 32),
    (MANY_WRITERS, 1, "batch     1", 1),
    (8, 100, "batch   100", 1),
    (8, 1000, "batch  1000", 1),
];

/// Ingest events/s: single-event POSTs or NDJSON batches from `clients`,
/// each to a session of its own that no other shape posts to (so no id is
/// posted twice; `run` names a repeat of a shape, as the goals' pairs
/// are); with each request's latency. Each client is one keep-alive
/// connection of `poster.rs`, or of reqwest with `LOAD_INGEST_CLIENT=reqwest`.
async fn ingest(
    server: &Server,
    clients: usize,
    batch: usize,
    total: usize,
    run: &str,
) -> publish::Figures {
    let http = (std::env::var("LOAD_INGEST_CLIENT").as_deref() == Ok("reqwest")).then(|| {
        reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()
            .unwrap()
    });
    let per_client = (total / clients / batch).max(1);
    let meter = server.meter();
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (http, url, run) = (http.clone(), server.url(), run.to_string());
            tokio::spawn(async move {
                let path = format!("/v1/sessions/ingest{run}-{clients}x{batch}-{c}/events");
                let mut poster = poster::Poster::new(&url);
                let mut lat = Vec::with_capacity(per_client);
                let mut body = String::with_capacity(batch * 96);
                for b in 0..per_client {
                    body.clear();
                    for i in 0..batch {
                        let _ = writeln!(
                            body,
                            "{{\"id\":\"{c}-{b}-{i}\",\"type\":\"text.delta\",\"runId\":\"r\",\"payload\":{{\"delta\":\"token \"}}}}"
                        );
                    }
                    let t = Instant::now();
                    let status = match &http {
                        Some(http) => http
                            .post(format!("{url}{path}"))
                            .header("content-type", "application/x-ndjson")
                            .body(body.clone())
                            .send()
                            .await
                            .expect("post")
                            .status()
                            .as_u16(),
                        None => poster
                            .post(&path, "application/x-ndjson", &body)
                            .await
                            .expect("post"),
                    };
                    assert!((200..300).contains(&status), "ingest status {status}");
                    lat.push(t.elapsed().as_micros() as u32);
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    publish::Figures {
        events_per_s: (clients * per_client * batch) as f64 / secs,
        p50_ms: pct(&lat, 0.5),
        p99_ms: pct(&lat, 0.99),
        cpu_us: meter.per_event(server, clients * per_client * batch),
    }
}

/// Run the ingest `shapes` against `server` (each its share of `events`):
/// print each as a line of `who`, and add it to `rows` as `id` with its
/// clients and batch.
async fn ingest_shapes(
    server: &Server,
    who: &str,
    id: Value,
    shapes: impl IntoIterator<Item = (usize, usize, &'static str, usize)>,
    events: usize,
    rows: &mut Vec<Value>,
) {
    // The durable store's own figures for each shape (its group commits
    // and the appends as the actors wait for them), from its `/metrics`.
    let durable = id["store"] == "embedded";
    for (clients, batch, label, share) in shapes {
        let before = if durable {
            servers::sums(server, &STORE_SUMS).await
        } else {
            Vec::new()
        };
        let took = Instant::now();
        let f = ingest(server, clients, batch, events / share, "").await;
        let secs = took.elapsed().as_secs_f64();
        println!(
            "{who} {label}: {:>10.0} ev/s  request p50 {:>7.2} ms p99 {:>7.2} ms  {}",
            f.events_per_s,
            f.p50_ms,
            f.p99_ms,
            cpu_cols(&f)
        );
        let mut id = id.clone();
        id["clients"] = json!(clients);
        id["batch"] = json!(batch);
        if durable {
            let after = servers::sums(server, &STORE_SUMS).await;
            if let Some(g) = GroupFigures::between(&before, &after, secs) {
                println!(
                    "  durable store {label}: {:.1} jobs per group commit, one every {:.0} µs, {:.3} ms each; an append {:.3} ms as the actor waits for it",
                    g.jobs, g.every_us, g.commit_ms, g.append_ms
                );
                id["group_jobs"] = json!(g.jobs);
                id["group_every_us"] = json!(g.every_us);
                id["commit_ms"] = json!(g.commit_ms);
                id["append_ms"] = json!(g.append_ms);
            }
        }
        rows.push(ingest_row(id, &f));
    }
}

/// The durable store's histograms read around an ingest shape: jobs per
/// group commit, the commit's time, the append's time as the actor waits.
const STORE_SUMS: [&str; 3] = [
    "projector_store_group_jobs",
    "projector_store_commit_seconds",
    "projector_store_append_seconds",
];

/// What the durable store did during a shape (docs/BENCHMARKS.md, "What
/// holds a durable POST").
struct GroupFigures {
    jobs: f64,
    every_us: f64,
    commit_ms: f64,
    append_ms: f64,
}

impl GroupFigures {
    /// From the sums and counts of [`STORE_SUMS`] before and after a shape
    /// that took `secs`; `None` when the store committed no group.
    fn between(before: &[(f64, f64)], after: &[(f64, f64)], secs: f64) -> Option<Self> {
        let diff = |i: usize| {
            let (b, a) = (before.get(i)?, after.get(i)?);
            Some((a.0 - b.0, a.1 - b.1))
        };
        let ((jobs, groups), (commit_s, commits), (append_s, appends)) =
            (diff(0)?, diff(1)?, diff(2)?);
        (groups > 0.0 && commits > 0.0 && appends > 0.0).then(|| GroupFigures {
            jobs: jobs / groups,
            every_us: secs * 1e6 / groups,
            commit_ms: commit_s * 1e3 / commits,
            append_ms: append_s * 1e3 / appends,
        })
    }
}

/// Issue 36 item 3's goals for single-event POSTs from [`MANY_WRITERS`]
/// clients, as this run measured them: the memory store at 0.5x the
/// parse-only floor or more, the durable store at 2x the anchor or more.
/// Judged on the median of the back-to-back `pairs` when the run made
/// them, else on the sequential pass (whose two sides ran up to a minute
/// apart); both are printed and returned for the report. A goal whose
/// other side was not run is left out.
fn ingest_goals(rows: &[Value], pairs: &[Pair]) -> Value {
    let rate = |(server, store): (&str, &str)| {
        rows.iter()
            .find(|r| {
                r["server"] == server
                    && r["store"] == store
                    && r["batch"] == 1
                    && r["clients"] == MANY_WRITERS
                    && r.get("pair").is_none()
            })
            .and_then(|r| r["events_per_s"].as_f64())
    };
    let mut out = serde_json::Map::new();
    for goal in GOALS {
        let (Some(a), Some(b)) = (rate(goal.ours), rate(goal.theirs)) else {
            continue;
        };
        let sequential = a / b.max(1.0);
        let mut ratios: Vec<f64> = pairs
            .iter()
            .filter(|p| p.goal == goal.name)
            .map(|p| p.ratio)
            .collect();
        // The median: the middle one, or the mean of the middle two.
        let paired = (!ratios.is_empty()).then(|| {
            ratios.sort_by(f64::total_cmp);
            let n = ratios.len();
            (ratios[(n - 1) / 2] + ratios[n / 2]) / 2.0
        });
        let ratio = paired.unwrap_or(sequential);
        let met = ratio >= goal.goal;
        let how = match paired {
            Some(_) => format!(
                "the median of {} back-to-back pairs (sorted: {}; the sequential pass {sequential:.2}x)",
                ratios.len(),
                ratios
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            None => "the sequential pass".into(),
        };
        println!(
            "goal, single-event POSTs: {} store {ratio:.2}x {}, {how} (goal {}x: {})",
            goal.ours.1,
            goal.against,
            goal.goal,
            if met { "met" } else { "not met" }
        );
        out.insert(
            goal.name.into(),
            json!({
                "ratio": ratio,
                "goal": goal.goal,
                "met": met,
                "sequential": sequential,
                "pairs": ratios,
            }),
        );
    }
    Value::Object(out)
}

/// An ingest row of the report: `id` (server, store, batch or window)
/// with the figures.
fn ingest_row(mut id: Value, f: &publish::Figures) -> Value {
    id["events_per_s"] = json!(f.events_per_s);
    id["p50_ms"] = json!(f.p50_ms);
    id["p99_ms"] = json!(f.p99_ms);
    id["server_cpu_us_per_event"] = json!(f.cpu_us.0);
    id["gen_cpu_us_per_event"] = json!(f.cpu_us.1);
    id
}

/// The ingest lines' CPU columns: the server's process (the anchor's
/// without its Redis) and the generator's, in µs per event.
fn cpu_cols(f: &publish::Figures) -> String {
    format!(
        "cpu µs/ev server {:>6.1} gen {:>5.1}",
        f.cpu_us.0, f.cpu_us.1
    )
}
