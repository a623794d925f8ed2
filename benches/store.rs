//! Store benchmarks (issue: durable embedded store), run with
//! `cargo bench --bench store`:
//! 1. ingest events/s over HTTP with 1, 8 and 64 concurrent writers, one
//!    single-event POST each time, durable embedded store against the memory
//!    store, in the same run;
//! 2. rehydration time of a cold 100,000-event session, with and without
//!    projection checkpoints, on the embedded store and (when a Redis is
//!    given: `PROJECTOR_BENCH_REDIS_URL`, or `PROJECTOR_TEST_REDIS_URL` for
//!    the smoke run) on the Redis store.
//!
//! Under `cargo test` (no `--bench` argument) it runs a seconds-long smoke
//! version so that it keeps working. Prints a table and writes JSON to
//! `target/bench-store.json`.

use std::time::{Duration, Instant};

use agent_projector::config::{Config, Overrides, StoreKind};
use agent_projector::event::{normalize, Limits};
use agent_projector::session::{IncomingEvent, Registry, RegistryConfig};
use agent_projector::store::SharedLog;
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Scale {
    /// Events posted per ingest run (split across writers).
    ingest_events: usize,
    /// Events in the rehydration session.
    session_events: usize,
}

fn config(store: StoreKind, dir: &std::path::Path) -> Config {
    config_env(store, dir, Vec::new())
}

fn config_env(store: StoreKind, dir: &std::path::Path, env: Vec<(String, String)>) -> Config {
    let mut cfg = Config::load(
        None,
        env,
        &Overrides {
            store: Some(store),
            data_dir: Some(dir.to_path_buf()),
            ..Default::default()
        },
    )
    .expect("config");
    cfg.storage.min_free_bytes = 0;
    // Measure the store, not the rate limits.
    cfg.limits.ingest_events_per_sec_per_session = 0;
    cfg.limits.ingest_events_per_sec_per_token = 0;
    cfg
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "projector-bench-{name}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Events/s for `writers` concurrent clients each posting single events.
async fn ingest(store: StoreKind, writers: usize, total: usize) -> f64 {
    let dir = tempdir("ingest");
    let cfg = config(store, &dir);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(agent_projector::run(cfg, listener, shutdown.clone()));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(writers)
        .build()
        .unwrap();
    let per_writer = total / writers;
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let http = http.clone();
            tokio::spawn(async move {
                let url = format!("http://{addr}/v1/sessions/bench-{w}/events");
                for i in 0..per_writer {
                    let ev = json!({"id": format!("{w}-{i}"), "type": "text.delta", "runId": "r",
                        "payload": {"delta": "token "}});
                    let r = http.post(&url).json(&ev).send().await.expect("post");
                    assert_eq!(r.status(), 200);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = (per_writer * writers) as f64 / started.elapsed().as_secs_f64();
    shutdown.cancel();
    server.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(dir);
    rate
}

fn registry(store: SharedLog, checkpoint_every: u64, stop: CancellationToken) -> Registry {
    Registry::new(
        store,
        RegistryConfig {
            projection: Default::default(),
            max_live: 10_000,
            idle_evict: Duration::from_secs(3600),
            mailbox: 64,
            checkpoint_every,
            live_buffer: 1024,
            replay_page: 1000,
            index_buffer: 64,
            conflict_retries: 0,
        },
        stop,
    )
}

/// Seconds for a cold actor to hydrate a session of `n` events, on the
/// embedded store or, given a URL, on Redis (under a fresh prefix, removed
/// afterwards).
async fn rehydrate(redis: Option<&str>, n: usize, checkpoint_every: u64) -> f64 {
    let dir = tempdir("rehydrate");
    let prefix = format!("bench-store-{}", uuid::Uuid::new_v4().simple());
    let mut cfg = match redis {
        None => config(StoreKind::Embedded, &dir),
        Some(url) => config_env(
            StoreKind::Redis,
            &dir,
            vec![
                ("PROJECTOR_REDIS__URL".into(), url.into()),
                ("PROJECTOR_REDIS__PREFIX".into(), prefix.clone()),
            ],
        ),
    };
    cfg.retention.max_events_per_session = u64::MAX;
    {
        let store = agent_projector::open_store(&cfg).unwrap();
        let stop = CancellationToken::new();
        let reg = registry(store, checkpoint_every, stop.clone());
        for b in 0..n / 1000 {
            let batch: Vec<IncomingEvent> = (0..1000)
                .map(|i| {
                    let k = b * 1000 + i;
                    let raw = match k % 10 {
                        0 => json!({"id": format!("e{k}"), "type": "tool.started", "runId": "r", "toolCallId": format!("t{k}"), "payload": {"toolName": "grep"}}),
                        1 => json!({"id": format!("e{k}"), "type": "tool.result", "runId": "r", "toolCallId": format!("t{}", k - 1), "payload": {"summary": "ok"}}),
                        _ => json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "payload": {"delta": "token "}}),
                    };
                    let n = normalize(raw, &Limits::default()).unwrap();
                    IncomingEvent { index: i, fact: n.fact, warnings: n.warnings }
                })
                .collect();
            reg.ingest("big", batch).await.unwrap();
        }
        stop.cancel();
        reg.wait_stopped().await;
    }
    // A fresh process view: new store handle, new registry, cold actor.
    let store = agent_projector::open_store(&cfg).unwrap();
    let reg = registry(store, checkpoint_every, CancellationToken::new());
    let started = Instant::now();
    let (meta, _) = reg.snapshot("big").await.unwrap();
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(meta.head as usize, n);
    drop(reg);
    let _ = std::fs::remove_dir_all(dir);
    if let Some(url) = redis {
        agent_projector::store::redis::purge_prefix(url, &prefix).expect("bench keys removed");
    }
    secs
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full {
        Scale {
            ingest_events: 20_000,
            session_events: 100_000,
        }
    } else {
        Scale {
            ingest_events: 256,
            session_events: 2_000,
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut rows = Vec::new();
        println!("ingest: single-event POSTs, keep-alive, {} events per run", scale.ingest_events);
        println!("{:>8} {:>16} {:>16} {:>10}", "writers", "memory ev/s", "embedded ev/s", "emb/mem");
        for writers in [1, 8, 64] {
            let mem = ingest(StoreKind::Memory, writers, scale.ingest_events).await;
            let emb = ingest(StoreKind::Embedded, writers, scale.ingest_events).await;
            println!("{writers:>8} {mem:>16.0} {emb:>16.0} {:>10.2}", emb / mem);
            rows.push(json!({"writers": writers, "memory_events_per_s": mem, "embedded_events_per_s": emb}));
        }
        let with = rehydrate(None, scale.session_events, 1000).await;
        let without = rehydrate(None, scale.session_events, u64::MAX).await;
        println!("rehydration of a cold {}-event session (embedded):", scale.session_events);
        println!("  with checkpoints every 1000 events: {:>8.1} ms", with * 1e3);
        println!("  without checkpoints:                {:>8.1} ms  ({:.1}x)", without * 1e3, without / with);
        let redis_url = std::env::var(if full { "PROJECTOR_BENCH_REDIS_URL" } else { "PROJECTOR_TEST_REDIS_URL" })
            .ok()
            .or_else(|| full.then(|| "redis://127.0.0.1:6379".to_string()));
        let on_redis = match redis_url.as_deref() {
            Some(url) => {
                let with_r = rehydrate(Some(url), scale.session_events, 1000).await;
                let without_r = rehydrate(Some(url), scale.session_events, u64::MAX).await;
                println!("rehydration of a cold {}-event session (Redis):", scale.session_events);
                println!("  with checkpoints every 1000 events: {:>8.1} ms  ({:.1}x embedded)", with_r * 1e3, with_r / with);
                println!("  without checkpoints:                {:>8.1} ms  ({:.1}x)", without_r * 1e3, without_r / with_r);
                json!({"with_checkpoints_s": with_r, "without_checkpoints_s": without_r})
            }
            None => {
                println!("rehydration on Redis skipped: PROJECTOR_TEST_REDIS_URL is unset");
                serde_json::Value::Null
            }
        };
        let out = json!({
            "full": full,
            "ingest": rows,
            "rehydrate": {"events": scale.session_events, "with_checkpoints_s": with, "without_checkpoints_s": without},
            "rehydrate_redis": on_redis,
        });
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-store.json");
        let _ = std::fs::write(path, serde_json::to_vec_pretty(&out).unwrap());
    });
}
