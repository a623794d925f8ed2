//! Crash safety of the embedded store: SIGKILL the real server during
//! concurrent ingest, restart it on the same data dir, and check that every
//! acknowledged event is there exactly once and in order, and that no batch
//! is half applied. Several rounds, each bounded by the number of
//! acknowledged batches, not by time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::common::{tempdir, Proc};

const WRITERS: usize = 8;
const SESSIONS: usize = 3;
/// Acknowledged batches before the kill.
const KILL_AFTER: usize = 60;
const ROUNDS: usize = 4;

fn batch_size(writer: usize, k: usize) -> usize {
    1 + (writer + k) % 6
}

/// A writer's batches, in the order it sent them: (batch, acked).
type Sent = Arc<Mutex<Vec<(usize, bool)>>>;

async fn writer(
    http: reqwest::Client,
    base: String,
    w: usize,
    sent: Sent,
    acked: Arc<AtomicUsize>,
    enough: Arc<Notify>,
) {
    let session = format!("s{}", w % SESSIONS);
    for k in 0.. {
        let n = batch_size(w, k);
        let events: Vec<Value> = (0..n)
            .map(|i| {
                json!({
                    "id": format!("w{w}-b{k}-e{i}"),
                    "type": "text.delta",
                    "runId": format!("run-{w}"),
                    "payload": {"delta": format!("{w}.{k}.{i} "), "w": w, "k": k, "i": i, "n": n},
                })
            })
            .collect();
        sent.lock().unwrap().push((k, false));
        let r = http
            .post(format!("{base}/v1/sessions/{session}/events"))
            .json(&events)
            .send()
            .await;
        match r {
            Ok(resp) if resp.status() == 200 => {
                sent.lock().unwrap().last_mut().unwrap().1 = true;
                if acked.fetch_add(1, Ordering::SeqCst) + 1 == KILL_AFTER {
                    enough.notify_one();
                }
            }
            _ => return, // the server is gone
        }
    }
}

async fn read_log(http: &reqwest::Client, base: &str, session: &str) -> Vec<(u64, Value)> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page: Value = http
            .get(format!(
                "{base}/v1/sessions/{session}/events?after={after}&limit=1000"
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for e in page["events"].as_array().unwrap() {
            out.push((e["cursor"].as_u64().unwrap(), e["event"].clone()));
        }
        match page["nextAfter"].as_u64() {
            Some(n) => after = n,
            None => return out,
        }
    }
}

async fn round(r: usize) {
    let dir = tempdir(&format!("crash-{r}"));
    let data = dir.to_str().unwrap();
    let mut server = Proc::start(&["--listen", "127.0.0.1:0", "--data-dir", data], &[]);
    let base = format!("http://{}", server.addr());
    let http = reqwest::Client::new();
    let acked = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(Notify::new());
    let sent: Vec<Sent> = (0..WRITERS).map(|_| Sent::default()).collect();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            tokio::spawn(writer(
                http.clone(),
                base.clone(),
                w,
                sent[w].clone(),
                acked.clone(),
                enough.clone(),
            ))
        })
        .collect();
    enough.notified().await;
    server.child.kill().expect("SIGKILL"); // no graceful anything
    server.wait_exit();
    for t in tasks {
        t.await.unwrap();
    }

    let restarted = Proc::start(&["--listen", "127.0.0.1:0", "--data-dir", data], &[]);
    let base = format!("http://{}", restarted.addr());
    let mut seen_ids = HashSet::new();
    // (writer) -> batches in log order, each with the event indexes seen.
    let mut by_writer: HashMap<usize, Vec<(usize, Vec<usize>)>> = HashMap::new();
    for s in 0..SESSIONS {
        let log = read_log(&http, &base, &format!("s{s}")).await;
        let cursors: Vec<u64> = log.iter().map(|(c, _)| *c).collect();
        let expect: Vec<u64> = (1..=cursors.len() as u64).collect();
        assert_eq!(
            cursors, expect,
            "round {r}: session s{s} cursors are gapless from 1"
        );
        for (_, ev) in log {
            let id = ev["id"].as_str().unwrap().to_string();
            assert!(seen_ids.insert(id.clone()), "round {r}: {id} stored twice");
            let p = &ev["payload"];
            let (w, k, i) = (
                p["w"].as_u64().unwrap() as usize,
                p["k"].as_u64().unwrap() as usize,
                p["i"].as_u64().unwrap() as usize,
            );
            let batches = by_writer.entry(w).or_default();
            match batches.last_mut() {
                Some((last_k, idx)) if *last_k == k => idx.push(i),
                _ => batches.push((k, vec![i])),
            }
        }
    }
    let mut acked_total = 0;
    for (w, sent) in sent.iter().enumerate() {
        let sent = sent.lock().unwrap().clone();
        let logged = by_writer.remove(&w).unwrap_or_default();
        let logged_k: Vec<usize> = logged.iter().map(|(k, _)| *k).collect();
        // Batches in the log are a prefix of what the writer sent, in order.
        let sent_k: Vec<usize> = sent.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            logged_k,
            sent_k[..logged_k.len()].to_vec(),
            "round {r}: writer {w} batches in order, none missing in between"
        );
        for (k, idx) in &logged {
            let n = batch_size(w, *k);
            assert_eq!(
                idx,
                &(0..n).collect::<Vec<_>>(),
                "round {r}: batch w{w}-b{k} whole and in order"
            );
        }
        let acked: BTreeMap<usize, bool> = sent.iter().cloned().collect();
        for (k, ok) in acked {
            if ok {
                acked_total += 1;
                assert!(
                    logged_k.contains(&k),
                    "round {r}: acknowledged batch w{w}-b{k} lost"
                );
            }
        }
    }
    assert!(
        acked_total >= KILL_AFTER,
        "round {r}: {acked_total} acknowledged"
    );
    drop(restarted);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_concurrent_ingest_loses_no_acknowledged_event() {
    for r in 0..ROUNDS {
        round(r).await;
    }
}
