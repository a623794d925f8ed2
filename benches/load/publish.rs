//! The streaming ingest against single-event POSTs: 64 producers, one
//! session each, one event per line of one long-lived
//! `POST /v1/sessions/{id}/publish` each, with at most `window` lines
//! unacknowledged; events/s, and the ack latency of each line (from its
//! write to the ack that covers it). `window = 1` is lock-step (send, wait
//! for the ack), the latency a POST per event would see; a larger window is
//! a producer that streams tokens and lets acks trail.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::StreamExt;
use tokio::sync::{mpsc, Semaphore};

use crate::clients::pct;
use crate::servers::Server;

/// Producers, as in the single-event POST figure.
pub const PRODUCERS: usize = 64;

/// What one run measured.
pub struct Figures {
    pub events_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// CPU µs per event: the server's process, the generator's.
    pub cpu_us: (f64, f64),
}

/// `total` events over [`PRODUCERS`] publish streams, `window` lines
/// unacknowledged at most per stream.
pub async fn publish(server: &Server, total: usize, window: usize) -> Figures {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(PRODUCERS)
        .build()
        .unwrap();
    let per = (total / PRODUCERS).max(1);
    let meter = server.meter();
    let started = Instant::now();
    let tasks: Vec<_> = (0..PRODUCERS)
        .map(|c| {
            let (http, url) = (http.clone(), server.url());
            tokio::spawn(producer(http, url, c, per, window))
        })
        .collect();
    let mut lat = Vec::with_capacity(per * PRODUCERS);
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    Figures {
        events_per_s: (per * PRODUCERS) as f64 / secs,
        p50_ms: pct(&lat, 0.50),
        p99_ms: pct(&lat, 0.99),
        cpu_us: meter.per_event(server, per * PRODUCERS),
    }
}

/// One producer: its lines' ack latencies in µs.
async fn producer(
    http: reqwest::Client,
    url: String,
    c: usize,
    per: usize,
    window: usize,
) -> Vec<u32> {
    let (body, rx) = mpsc::channel::<Result<String, std::io::Error>>(window.max(1));
    let resp = http
        .post(format!("{url}/v1/sessions/publish-{c}/publish"))
        .header("content-type", "application/x-ndjson")
        .body(reqwest::Body::wrap_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .send()
        .await
        .expect("publish");
    assert!(
        resp.status().is_success(),
        "publish status {}",
        resp.status()
    );
    let sent: Arc<Mutex<VecDeque<Instant>>> = Arc::default();
    let room = Arc::new(Semaphore::new(window));
    let reader = {
        let (sent, room) = (sent.clone(), room.clone());
        tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per);
            let mut answer = resp.bytes_stream();
            let mut buf = Vec::new();
            while let Some(chunk) = answer.next().await {
                buf.extend_from_slice(&chunk.expect("answer"));
                while let Some(at) = buf.iter().position(|b| *b == b'\n') {
                    let l: Vec<u8> = buf.drain(..=at).collect();
                    let v: serde_json::Value = serde_json::from_slice(&l).unwrap();
                    match v["type"].as_str() {
                        Some("ack") => {
                            let n = v["to"].as_u64().unwrap() - v["from"].as_u64().unwrap() + 1;
                            let now = Instant::now();
                            let mut q = sent.lock().unwrap();
                            for _ in 0..n {
                                let t = q.pop_front().expect("an ack of a line sent");
                                lat.push(now.duration_since(t).as_micros() as u32);
                            }
                            room.add_permits(n as usize);
                        }
                        Some("end") => return lat,
                        _ => panic!("publish answered {v}"),
                    }
                }
            }
            panic!("the publish answer ended without `end`");
        })
    };
    for i in 0..per {
        room.acquire().await.unwrap().forget();
        sent.lock().unwrap().push_back(Instant::now());
        let line = format!(
            "{{\"id\":\"{c}-{i}\",\"type\":\"text.delta\",\"runId\":\"r\",\"payload\":{{\"delta\":\"token \"}}}}\n"
        );
        body.send(Ok(line)).await.expect("body");
    }
    drop(body);
    reader.await.unwrap()
}
