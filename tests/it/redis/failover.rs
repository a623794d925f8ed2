//! Nodes coming and going: subscribers of a SIGKILLed node resume on the
//! others with no gap or duplicate, a cold node rehydrates from a checkpoint
//! past trimmed events, and deletion reaches subscribers on other nodes,
//! after which cursors continue.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::checks::{
    assert_gapless, assert_same_frames, check_acks, events, Collector, Post, Progress,
};
use super::harness::{redis_url, Cluster, Frame, RawSse, DEADLINE};

/// A subscriber that resumes on another node whenever its stream ends.
struct Resuming {
    name: String,
    /// Delta frames in arrival order.
    deltas: Vec<Frame>,
    /// Any other frame (a `reset` or `snapshot` after the first).
    other: Vec<Frame>,
    /// (node, Last-Event-ID, why the previous stream ended) per reconnect.
    reconnects: Vec<(usize, u64, String)>,
}

/// Read `sse` (open on some node) and on every end reconnect to the next of
/// `fallbacks` with `Last-Event-ID` = the last cursor seen.
fn spawn_resuming(
    name: String,
    mut sse: RawSse,
    http: reqwest::Client,
    fallbacks: Vec<(usize, String)>,
    session: &'static str,
) -> (
    Arc<Mutex<Resuming>>,
    watch::Receiver<Progress>,
    JoinHandle<String>,
) {
    let log = Arc::new(Mutex::new(Resuming {
        name,
        deltas: Vec::new(),
        other: Vec::new(),
        reconnects: Vec::new(),
    }));
    let (tx, rx) = watch::channel(Progress::default());
    let out = log.clone();
    let task = tokio::spawn(async move {
        let mut last = 0;
        let mut attempt = 0;
        loop {
            match sse.next().await {
                Ok(f) if f.event == "delta" => {
                    last = f.cursor();
                    out.lock().unwrap().deltas.push(f);
                    tx.send_modify(|p| {
                        p.frames += 1;
                        p.cursor = last;
                    });
                }
                Ok(f) => {
                    out.lock().unwrap().other.push(f);
                    tx.send_modify(|p| p.frames += 1);
                }
                Err(mut why) => loop {
                    if attempt == 10 {
                        return format!("gave up after {attempt} reconnects; last: {why}");
                    }
                    let (node, base) = &fallbacks[attempt % fallbacks.len()];
                    attempt += 1;
                    out.lock()
                        .unwrap()
                        .reconnects
                        .push((*node, last, why.clone()));
                    match RawSse::open(&http, base, session, "", Some(last)).await {
                        Ok(s) => {
                            sse = s;
                            break;
                        }
                        Err(e) => why = format!("reconnecting to node {node} failed: {e}"),
                    }
                },
            }
        }
    });
    (log, rx, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_killed_clients_resume_elsewhere() {
    const SUBSCRIBERS: usize = 5;
    /// Events each writer posts after the kill.
    const AFTER_KILL: u64 = 60;
    /// Bound on each writer's events, kill or not.
    const CAP: u64 = 5000;
    let Some(url) = redis_url("node_killed_clients_resume_elsewhere") else {
        return;
    };
    let mut cluster = Cluster::start(&url, 3, &[]);
    let s: &'static str = "resume";
    let (a, b, c) = (0, 1, 2);

    let mut subs = Vec::new();
    for j in 0..SUBSCRIBERS {
        let mut sse = cluster.sse(a, s, "", None).await;
        let first = sse.expect(&format!("subscriber {j}: first frame")).await;
        assert_eq!(first.event, "snapshot", "{first:?}");
        // Subscribers alternate between B and C as their first fallback.
        let fallbacks = if j % 2 == 0 {
            vec![
                (b, cluster.base(b).to_string()),
                (c, cluster.base(c).to_string()),
            ]
        } else {
            vec![
                (c, cluster.base(c).to_string()),
                (b, cluster.base(b).to_string()),
            ]
        };
        subs.push(spawn_resuming(
            format!("subscriber {j}"),
            sse,
            cluster.http.clone(),
            fallbacks,
            s,
        ));
    }

    // Two writers, each alternating between B and C, until told the kill is
    // done, then AFTER_KILL more events each.
    let killed = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let (acked_tx, mut acked_rx) = watch::channel(0u64);
    let acked_tx = Arc::new(acked_tx);
    let writers: Vec<JoinHandle<Vec<Post>>> = (0..2)
        .map(|w| {
            let http = cluster.http.clone();
            let nodes = [
                (b, cluster.base(b).to_string()),
                (c, cluster.base(c).to_string()),
            ];
            let (killed, acked, acked_tx) = (killed.clone(), acked.clone(), acked_tx.clone());
            tokio::spawn(async move {
                let mut posts = Vec::new();
                let mut next = 1;
                let mut stop_at = CAP;
                let mut batch_no = 0;
                while next <= stop_at {
                    if stop_at == CAP && killed.load(Ordering::SeqCst) {
                        stop_at = (next + AFTER_KILL - 1).min(CAP);
                    }
                    let n = (1 + batch_no % 3).min((stop_at + 1 - next) as usize);
                    let (node, base) = &nodes[batch_no % 2];
                    let batch = events("rs", w, next, n);
                    let p = Post::send(&http, *node, base, s, batch).await;
                    let status = p.status;
                    posts.push(p);
                    if status != 200 {
                        break;
                    }
                    let total = acked.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                    acked_tx.send_modify(|v| *v = (*v).max(total));
                    next += n as u64;
                    batch_no += 1;
                }
                posts
            })
        })
        .collect();

    // Kill node A once the writers are going and every subscriber has frames.
    tokio::time::timeout(DEADLINE, acked_rx.wait_for(|v| *v >= 60))
        .await
        .expect("writers acknowledged 60 events in time")
        .expect("writers alive");
    for (log, rx, _) in &mut subs {
        let name = log.lock().unwrap().name.clone();
        tokio::time::timeout(DEADLINE, rx.wait_for(|p| p.cursor >= 30))
            .await
            .unwrap_or_else(|_| panic!("{name}: 30 deltas on node A in time"))
            .unwrap_or_else(|_| panic!("{name}: stream ended before node A was killed"));
    }
    let acked_at_kill = acked.load(Ordering::SeqCst);
    cluster.kill(a);
    killed.store(true, Ordering::SeqCst);

    let mut posts = Vec::new();
    for t in writers {
        posts.extend(t.await.expect("writer"));
    }
    let (n, at) = check_acks(&posts);
    assert!(
        n < 2 * CAP,
        "the writers hit their cap of {CAP} events before the kill was done"
    );

    // Each subscriber got every delta exactly once, across nodes.
    let mut fresh = cluster.sse(c, s, "", Some(0)).await;
    let mut want = Vec::new();
    for _ in 0..n {
        want.push(fresh.expect("node C: replay from cursor 0").await);
    }
    assert_gapless("node C: replay from 0", &want, 1, n);
    for f in &want {
        assert_eq!(
            at.get(f.json()["eventId"].as_str().unwrap_or("")),
            Some(&f.cursor()),
            "node C replay: delta at the acknowledged cursor: {f:?}"
        );
    }
    for (log, rx, task) in &mut subs {
        let name = log.lock().unwrap().name.clone();
        let outcome = tokio::time::timeout(DEADLINE, async {
            rx.wait_for(|p| p.cursor >= n).await.map(|_| ()).is_ok()
        })
        .await;
        match outcome {
            Ok(true) => {}
            Ok(false) => {
                let why = task.await.unwrap_or_else(|e| e.to_string());
                panic!(
                    "{name}: ended before delta {n}: {why}; reconnects {:?}",
                    log.lock().unwrap().reconnects
                );
            }
            Err(_) => panic!(
                "{name}: no delta {n} within {DEADLINE:?}: got {:?}; reconnects {:?}",
                *rx.borrow(),
                log.lock().unwrap().reconnects
            ),
        }
        task.abort();
        let log = log.lock().unwrap();
        assert!(
            !log.reconnects.is_empty() && log.reconnects[0].0 != a,
            "{name}: reconnected to another node after the kill: {:?}",
            log.reconnects
        );
        assert!(
            log.other.is_empty(),
            "{name}: resumed without reset or snapshot: {:?}; reconnects {:?}",
            log.other,
            log.reconnects
        );
        assert_gapless(&name, &log.deltas, 1, n);
        assert_same_frames(&format!("{name} vs fresh replay on C"), &log.deltas, &want);
        println!(
            "{name}: deltas 1..={n} (node A killed after ~{acked_at_kill} acknowledged); \
             resumed at {:?}",
            log.reconnects
                .iter()
                .map(|(node, id, _)| format!("node {node} from {id}"))
                .collect::<Vec<_>>()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_node_uses_checkpoint() {
    let Some(url) = redis_url("cold_node_uses_checkpoint") else {
        return;
    };
    // Checkpoints every 20 events and only 30 events retained: a node that
    // never saw the session cannot rebuild it from cursor 1.
    let mut cluster = Cluster::start(
        &url,
        1,
        &[
            ("PROJECTOR_SESSIONS__CHECKPOINT_EVERY", "20"),
            ("PROJECTOR_RETENTION__MAX_EVENTS_PER_SESSION", "30"),
        ],
    );
    let s = "cold";
    let mut posts = Vec::new();
    for from in (1..=100).step_by(10) {
        let batch = events("cold", 0, from, 10);
        posts.push(Post::send(&cluster.http, 0, cluster.base(0), s, batch).await);
    }
    let (n, _) = check_acks(&posts);
    assert_eq!(n, 100);
    let (bytes_a, snap_a) = cluster.snapshot(0, s).await;
    assert_eq!(snap_a["cursor"], 100);

    let d = cluster.add(1)[0];
    let (bytes_d, snap_d) = cluster.snapshot(d, s).await;
    assert_eq!(snap_d, snap_a, "cold node D projects what A projects");
    assert_eq!(bytes_d, bytes_a, "cold node D's snapshot bytes equal A's");
    let (page, _) = cluster.log(d, s).await;
    assert!(
        page["first"].as_u64().unwrap_or(0) > 1,
        "events before the last checkpoint were trimmed (so D started from a \
         checkpoint, not from cursor 1): {}",
        json!({"head": page["head"], "first": page["first"]})
    );

    // Both go on from there alike: more events on D, then on A.
    for (node, from) in [(d, 101), (0, 111)] {
        let (status, body) = cluster
            .post(node, s, &json!(events("cold", 0, from, 10)))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["cursor"], from + 9, "{body}");
    }
    let (bytes_a, snap_a) = cluster.snapshot(0, s).await;
    let (bytes_d, snap_d) = cluster.snapshot(d, s).await;
    assert_eq!(snap_a["cursor"], 120);
    assert_eq!(snap_d, snap_a, "A and D agree after more ingest on both");
    assert_eq!(bytes_d, bytes_a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_propagates() {
    let Some(url) = redis_url("deletion_propagates") else {
        return;
    };
    let cluster = Cluster::start(&url, 2, &[]);
    let s = "del";
    let (a, b) = (0, 1);
    let (status, body) = cluster.post(a, s, &json!(events("del", 0, 1, 10))).await;
    assert_eq!((status, body["cursor"].as_u64()), (200, Some(10)), "{body}");
    let (_, old) = cluster.snapshot(a, s).await;
    let old_epoch = old["epoch"].clone();

    // Subscribers on both nodes, each past its opening snapshot.
    let mut subs = Vec::new();
    for i in [a, b] {
        let mut sse = cluster.sse(i, s, "", None).await;
        let first = sse.expect(&format!("node {i}: first frame")).await;
        assert_eq!(
            (first.event.as_str(), first.json()["cursor"].as_u64()),
            ("snapshot", Some(10)),
            "node {i}: {first:?}"
        );
        subs.push(Collector::spawn(format!("node {i} subscriber"), sse));
    }

    let r = cluster
        .http
        .delete(format!("{}/v1/sessions/{s}", cluster.base(a)))
        .send()
        .await
        .expect("delete");
    assert_eq!(r.status(), 200);
    let del: Value = r.json().await.expect("delete body");
    assert_eq!(del["head"], 10, "{del}");
    assert_ne!(
        del["epoch"], old_epoch,
        "deletion starts a new epoch: {del}"
    );

    for sub in &mut subs {
        sub.wait_frames(2).await;
        let frames = sub.frames();
        assert_eq!(
            (
                frames[0].event.as_str(),
                frames[0].json()["reason"].as_str()
            ),
            ("reset", Some("session_deleted")),
            "{}: {:?}",
            sub.name,
            frames[0]
        );
        let snap = frames[1].json();
        assert_eq!(frames[1].event, "snapshot", "{}: {:?}", sub.name, frames[1]);
        assert_eq!(snap["epoch"], del["epoch"], "{}: new epoch", sub.name);
        assert_eq!(snap["state"]["messages"], json!([]), "{}: empty", sub.name);
    }
    let (_, snap_b) = cluster.snapshot(b, s).await;
    assert_eq!(
        snap_b["epoch"], del["epoch"],
        "node B's snapshot: new epoch"
    );

    // New ingest on B continues the cursor after the old head, and both
    // subscribers follow it live.
    let (status, body) = cluster.post(b, s, &json!(events("del2", 1, 1, 5))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["accepted"].as_u64(), body["cursor"].as_u64()),
        (Some(5), Some(15)),
        "cursors continue after the deleted head: {body}"
    );
    let mut lives = Vec::new();
    for sub in &mut subs {
        sub.wait_cursor(15).await;
        let frames = sub.frames();
        assert_gapless(&sub.name, &frames[2..], 11, 15);
        lives.push(frames[2..].to_vec());
    }
    assert_same_frames("node B vs node A after deletion", &lives[1], &lives[0]);
    let (page, log) = cluster.log(a, s).await;
    assert_eq!(page["epoch"], del["epoch"], "{page}");
    let cursors: Vec<u64> = log.iter().map(|(c, _)| *c).collect();
    assert_eq!(cursors, (11..=15).collect::<Vec<_>>(), "only the new log");
    let (bytes_a, snap_a) = cluster.snapshot(a, s).await;
    let (bytes_b, snap_b) = cluster.snapshot(b, s).await;
    assert_eq!(snap_a["cursor"], 15);
    assert_eq!(snap_a, snap_b);
    assert_eq!(bytes_a, bytes_b);
}
