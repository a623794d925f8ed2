//! The soak (issue 37 item 4): mixed load for a long time, with the
//! server's resident memory, open files and runtime tasks sampled at a
//! fixed interval; after a warm-up they must stay flat. The load: writers
//! posting single events and one streaming its events over a publish
//! stream, subscribers that reconnect every few seconds and resume with
//! `Last-Event-ID`, deletions of old sessions, and session churn: every
//! generation writes to new sessions, so the old ones go idle and the
//! registry evicts them (`sessions.idle_evict_secs` is set short).
//!
//! `LOAD_SECTIONS=soak cargo bench --bench load` runs it for
//! `LOAD_SOAK_SECS` (1800 by default), sampling every 10 s; under `cargo
//! test` a seconds-long version runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::servers::Server;

/// How long and how often.
#[derive(Clone, Copy)]
pub struct Plan {
    pub total: Duration,
    pub sample: Duration,
    /// How long a generation of sessions is written to.
    pub generation: Duration,
}

/// Sessions written to at once (one generation).
const SESSIONS: u64 = 20;
/// Writers posting one event per request, each every 20 ms.
const WRITERS: u64 = 4;
/// Subscribers, each staying 2 to 8 generation-tenths before it reconnects.
const SUBSCRIBERS: u64 = 100;

/// The environment the soak's server runs with: idle sessions evicted
/// within the run.
pub fn server_env(plan: Plan) -> Vec<(&'static str, String)> {
    let evict = (plan.generation.as_secs() / 2).max(1);
    vec![("PROJECTOR_SESSIONS__IDLE_EVICT_SECS", evict.to_string())]
}

/// One sample of the server.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: f64,
    rss: u64,
    files: usize,
    tasks: f64,
    sessions: f64,
    events: u64,
    frames: u64,
}

/// Run the soak against `server`; its samples and verdict as JSON.
pub async fn soak(server: &Server, plan: Plan) -> Value {
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let events = Arc::new(AtomicU64::new(0));
    let frames = Arc::new(AtomicU64::new(0));
    let generation =
        move || (started.elapsed().as_millis() / plan.generation.as_millis().max(1)) as u64;
    let http = reqwest::Client::new();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (http, url, stop, events) = (http.clone(), server.url(), stop.clone(), events.clone());
        tasks.push(tokio::spawn(async move {
            let mut pace = tokio::time::interval(Duration::from_millis(20));
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                pace.tick().await;
                k += 1;
                let g = generation();
                let session = format!("soak-g{g}-{}", (w + k) % SESSIONS);
                let ev = json!({"id": format!("w{w}-{k}"), "type": "text.delta",
                                "runId": format!("run-g{g}-w{w}"), "messageId": format!("m-g{g}-w{w}"),
                                "payload": {"delta": "token "}});
                let r = http
                    .post(format!("{url}/v1/sessions/{session}/events"))
                    .json(&ev)
                    .send()
                    .await;
                if r.is_ok_and(|r| r.status().is_success()) {
                    events.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    // One producer on a publish stream, a new one per generation.
    {
        let (http, url, stop, events) = (http.clone(), server.url(), stop.clone(), events.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let g = generation();
                let (body, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(8);
                let resp = http
                    .post(format!("{url}/v1/sessions/soak-g{g}-publish/publish"))
                    .header("content-type", "application/x-ndjson")
                    .body(reqwest::Body::wrap_stream(tokio_stream::wrappers::ReceiverStream::new(rx)))
                    .send();
                let mut pace = tokio::time::interval(Duration::from_millis(20));
                let feed = async {
                    let mut k = 0u64;
                    while generation() == g && !stop.load(Ordering::Relaxed) {
                        pace.tick().await;
                        k += 1;
                        let line = format!("{{\"id\":\"p{g}-{k}\",\"type\":\"text.delta\",\"runId\":\"p{g}\",\"payload\":{{\"delta\":\"t \"}}}}\n");
                        if body.send(Ok(line)).await.is_err() {
                            break;
                        }
                    }
                    drop(body);
                };
                let (resp, ()) = tokio::join!(resp, feed);
                if let Ok(r) = resp {
                    let text = r.text().await.unwrap_or_default();
                    let acked: u64 = text
                        .lines()
                        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                        .filter(|v| v["type"] == "ack")
                        .filter_map(|v| v["accepted"].as_u64())
                        .sum();
                    events.fetch_add(acked, Ordering::Relaxed);
                }
            }
        }));
    }
    for s in 0..SUBSCRIBERS {
        let (http, url, stop, frames) = (http.clone(), server.url(), stop.clone(), frames.clone());
        tasks.push(tokio::spawn(async move {
            let mut last: Option<(String, String)> = None;
            let mut turn = 0u64;
            while !stop.load(Ordering::Relaxed) {
                turn += 1;
                let session = format!("soak-g{}-{}", generation(), s % SESSIONS);
                let mut req = http.get(format!("{url}/v1/sessions/{session}/stream"));
                // Resume where it left off when it comes back to the same session.
                if let Some((sess, id)) = &last {
                    if *sess == session {
                        req = req.header("last-event-id", id.as_str());
                    }
                }
                let stay = plan
                    .generation
                    .mul_f64(0.2 + 0.6 * (((s * 7 + turn * 13) % 10) as f64 / 10.0));
                let Ok(resp) = req.send().await else { continue };
                let mut body = resp.bytes_stream();
                let until = tokio::time::Instant::now() + stay;
                let mut buf = Vec::new();
                while let Ok(Some(Ok(b))) = tokio::time::timeout_at(until, body.next()).await {
                    buf.extend_from_slice(&b);
                    while let Some(at) = buf.windows(2).position(|w| w == b"\n\n") {
                        let block: Vec<u8> = buf.drain(..at + 2).collect();
                        let text = String::from_utf8_lossy(&block);
                        if let Some(id) = text.lines().find_map(|l| l.strip_prefix("id: ")) {
                            last = Some((session.clone(), id.to_string()));
                            frames.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        }));
    }
    // Deletions: every tenth of a generation, one session of two
    // generations ago.
    {
        let (http, url, stop) = (http.clone(), server.url(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut pace = tokio::time::interval(plan.generation / 10);
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                pace.tick().await;
                k += 1;
                let Some(g) = generation().checked_sub(2) else {
                    continue;
                };
                let _ = http
                    .delete(format!("{url}/v1/sessions/soak-g{g}-{}", k % SESSIONS))
                    .send()
                    .await;
            }
        }));
    }

    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(plan.sample);
    while started.elapsed() < plan.total {
        tick.tick().await;
        let metrics = reqwest::get(format!("{}/metrics", server.url()))
            .await
            .ok()
            .map(|r| r.text());
        let metrics = match metrics {
            Some(t) => t.await.unwrap_or_default(),
            None => String::new(),
        };
        let gauge = |name: &str| {
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let s = Sample {
            at: started.elapsed().as_secs_f64(),
            rss: server.rss(),
            files: server.open_files(),
            tasks: gauge("projector_runtime_tasks "),
            sessions: gauge("projector_sessions_in_registry "),
            events: events.load(Ordering::Relaxed),
            frames: frames.load(Ordering::Relaxed),
        };
        println!(
            "  t {:>6.0} s  rss {:>7.1} MiB  files {:>5}  tasks {:>6}  sessions {:>5}  events {:>9}  frames {:>10}",
            s.at,
            s.rss as f64 / 1048576.0,
            s.files,
            s.tasks,
            s.sessions,
            s.events,
            s.frames
        );
        samples.push(s);
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.abort();
    }
    verdict(&samples)
}

/// After a warm-up (the first fifth of the samples, at least three), the
/// spread and the trend of each series.
fn verdict(samples: &[Sample]) -> Value {
    let warm = (samples.len() / 5).max(3).min(samples.len());
    let rest = &samples[warm..];
    let series = |f: &dyn Fn(&Sample) -> f64| -> Value {
        if rest.len() < 2 {
            return Value::Null;
        }
        let ys: Vec<f64> = rest.iter().map(f).collect();
        let xs: Vec<f64> = rest.iter().map(|s| s.at / 3600.0).collect();
        let (mx, my) = (mean(&xs), mean(&ys));
        let cov: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let var: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
        let min = ys.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        json!({"min": min, "max": max, "mean": my, "per_hour": if var > 0.0 { cov / var } else { 0.0 }})
    };
    let out = json!({
        "samples": samples.len(),
        "warmup_samples": warm,
        "seconds": samples.last().map_or(0.0, |s| s.at),
        "events": samples.last().map_or(0, |s| s.events),
        "frames": samples.last().map_or(0, |s| s.frames),
        "rss_mib": series(&|s| s.rss as f64 / 1048576.0),
        "open_files": series(&|s| s.files as f64),
        "tasks": series(&|s| s.tasks),
        "sessions_in_registry": series(&|s| s.sessions),
    });
    println!("  after the warm-up ({warm} samples): {out}");
    out
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}
