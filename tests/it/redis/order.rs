//! One order across nodes: three nodes ingesting into one session at once
//! keep one gapless cursor order with byte-identical frames, snapshots and
//! `Last-Event-ID` replays on every node; duplicate ids are caught across
//! nodes, also when the same batch races on two of them.

use std::collections::HashMap;

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::checks::{
    assert_gapless, assert_same_frames, check_acks, check_log, events, ids, text_of_deltas,
    text_of_snapshot, Collector, Post,
};
use super::harness::{redis_url, Cluster, Frame};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_one_order() {
    const WRITERS: usize = 6;
    const PER_WRITER: u64 = 50;
    let Some(url) = redis_url("three_nodes_one_order") else {
        return;
    };
    let cluster = Cluster::start(&url, 3, &[]);
    let s = "one-order";

    // On each node: one subscriber without cursor (snapshot first), one
    // resuming from cursor 0; all open before the first event.
    let mut subs = Vec::new();
    let mut openings = Vec::new();
    for i in 0..3 {
        let mut fresh = cluster.sse(i, s, "", None).await;
        let first = fresh.expect(&format!("node {i}: first frame")).await;
        assert_eq!(
            first.event, "snapshot",
            "node {i}: a stream without cursor starts with a snapshot: {first:?}"
        );
        assert_eq!(
            first.json()["cursor"],
            0,
            "node {i}: empty session: {first:?}"
        );
        openings.push(first);
        subs.push(Collector::spawn(format!("node {i} (no cursor)"), fresh));
        let from0 = cluster.sse(i, s, "?cursor=0", None).await;
        subs.push(Collector::spawn(format!("node {i} (?cursor=0)"), from0));
    }

    for (i, f) in openings.iter().enumerate().skip(1) {
        assert_eq!(
            f, &openings[0],
            "node {i}'s opening snapshot (epoch included) equals node 0's"
        );
    }

    // Writers post small batches round-robin over the nodes, all at once.
    let tasks: Vec<JoinHandle<Vec<Post>>> = (0..WRITERS)
        .map(|w| {
            let http = cluster.http.clone();
            let bases: Vec<String> = (0..3).map(|i| cluster.base(i).to_string()).collect();
            tokio::spawn(async move {
                let mut posts = Vec::new();
                let mut next = 1;
                let mut b = 0;
                while next <= PER_WRITER {
                    let n = (1 + (w + b) % 5).min((PER_WRITER + 1 - next) as usize);
                    let node = (w + b) % 3;
                    let batch = events("oo", w, next, n);
                    posts.push(Post::send(&http, node, &bases[node], s, batch).await);
                    next += n as u64;
                    b += 1;
                }
                posts
            })
        })
        .collect();
    let mut posts = Vec::new();
    for t in tasks {
        posts.extend(t.await.expect("writer"));
    }
    let (n, at) = check_acks(&posts);
    assert_eq!(n, WRITERS as u64 * PER_WRITER);
    for w in 0..WRITERS {
        // Each writer's own events keep its order.
        let cs: Vec<u64> = (1..=PER_WRITER)
            .map(|k| at[&format!("oo-w{w}-e{k}")])
            .collect();
        assert!(
            cs.windows(2).all(|p| p[0] < p[1]),
            "writer {w}: cursors follow the order it posted in: {cs:?}"
        );
    }

    // The log, read on every node, is the acknowledged order.
    for i in 0..3 {
        let (page, log) = cluster.log(i, s).await;
        assert_eq!(page["head"], n, "node {i}: log head");
        check_log(&log, &at);
    }

    // Every subscriber got the same delta frames, byte for byte.
    for sub in &mut subs {
        sub.wait_cursor(n).await;
    }
    let reference: Vec<Frame> = subs[0].frames();
    assert_gapless(&subs[0].name, &reference, 1, n);
    let by_cursor: HashMap<u64, &String> = at.iter().map(|(id, c)| (*c, id)).collect();
    for f in &reference {
        assert_eq!(
            f.json()["eventId"].as_str(),
            Some(by_cursor[&f.cursor()].as_str()),
            "delta {} carries the event acknowledged at that cursor",
            f.cursor()
        );
    }
    for sub in &subs[1..] {
        assert_same_frames(
            &format!("{} vs {}", sub.name, subs[0].name),
            &sub.frames(),
            &reference,
        );
    }

    // The snapshot is the same on every node, at the head, with the text the
    // deltas imply.
    let (bytes0, snap0) = cluster.snapshot(0, s).await;
    assert_eq!(snap0["cursor"], n, "node 0: snapshot at the head");
    for i in 1..3 {
        let (bytes, snap) = cluster.snapshot(i, s).await;
        assert_eq!(snap, snap0, "node {i} snapshot equals node 0's");
        assert_eq!(bytes, bytes0, "node {i} snapshot bytes equal node 0's");
    }
    let implied = text_of_deltas(&reference);
    assert!(!implied.is_empty(), "the deltas carry text");
    assert_eq!(
        text_of_snapshot(&snap0),
        implied,
        "snapshot text per message equals the text deltas in cursor order"
    );
    // Each turn's message holds its writer's text in the writer's order.
    let mut all_text: Vec<String> = implied.values().cloned().collect();
    all_text.sort();
    let mut want: Vec<String> = (0..WRITERS)
        .map(|w| {
            (1..=PER_WRITER)
                .filter(|k| *k != 1 && !matches!(k % 10, 5 | 6))
                .map(|k| format!("w{w}.{k} "))
                .collect()
        })
        .collect();
    want.sort();
    assert_eq!(
        all_text, want,
        "one message per writer's turn, text in order"
    );

    // Replay with Last-Event-ID on a node other than the one watched live
    // gives exactly the live frames after that cursor.
    for (i, k) in [(0usize, 0u64), (1, n / 3), (2, n - 7)] {
        let other = (i + 1) % 3;
        let mut replay = cluster.sse(other, s, "", Some(k)).await;
        let mut got = Vec::new();
        for _ in k..n {
            got.push(
                replay
                    .expect(&format!("node {other}: replay after {k}"))
                    .await,
            );
        }
        assert_same_frames(
            &format!("node {other}: replay after Last-Event-ID {k}"),
            &got,
            &reference[k as usize..],
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_across_nodes() {
    let Some(url) = redis_url("duplicates_across_nodes") else {
        return;
    };
    let cluster = Cluster::start(&url, 2, &[]);
    let s = "dups";
    let batch = json!(events("d", 0, 1, 10));

    let (status, a) = cluster.post(0, s, &batch).await;
    assert_eq!(status, 200, "node A: {a}");
    assert_eq!(
        counts(&a),
        (Some(10), Some(0), Some(10)),
        "node A accepts the batch: {a}"
    );
    let (_, before) = cluster.snapshot(0, s).await;

    // The same batch on node B: all duplicates, nothing changes.
    let (status, b) = cluster.post(1, s, &batch).await;
    assert_eq!(status, 200, "node B: {b}");
    assert_eq!(
        counts(&b),
        (Some(0), Some(10), Some(10)),
        "node B sees every id as a duplicate, at the same cursor: {b}"
    );
    for i in 0..2 {
        let (_, snap) = cluster.snapshot(i, s).await;
        assert_eq!(snap, before, "node {i}: a duplicate batch changes nothing");
    }

    // Half old, half new, on node B: only the new half is appended.
    let overlap = json!(events("d", 0, 6, 10));
    let (status, o) = cluster.post(1, s, &overlap).await;
    assert_eq!(status, 200, "node B: {o}");
    assert_eq!(
        counts(&o),
        (Some(5), Some(5), Some(15)),
        "node B appends only the new ids: {o}"
    );

    // The same new batch on both nodes at once: stored once in all.
    let race = json!(events("d", 0, 16, 8));
    let (ra, rb) = tokio::join!(cluster.post(0, s, &race), cluster.post(1, s, &race));
    for (name, (status, r)) in [("A", &ra), ("B", &rb)] {
        assert_eq!(*status, 200, "race on node {name}: {r}");
    }
    let sum = |k: &str| ra.1[k].as_u64().unwrap_or(99) + rb.1[k].as_u64().unwrap_or(99);
    assert_eq!(
        (sum("accepted"), sum("duplicates")),
        (8, 8),
        "a batch raced on two nodes is accepted once: A {} B {}",
        ra.1,
        rb.1
    );
    assert_eq!(
        ra.1["cursor"].as_u64().max(rb.1["cursor"].as_u64()),
        Some(23),
        "A {} B {}",
        ra.1,
        rb.1
    );

    // The log holds each id once, in order, gapless.
    let at: HashMap<String, u64> = ids(&events("d", 0, 1, 23))
        .iter()
        .enumerate()
        .map(|(j, id)| (id.clone(), j as u64 + 1))
        .collect();
    for i in 0..2 {
        let (page, log) = cluster.log(i, s).await;
        assert_eq!(page["head"], 23, "node {i}: {page}");
        check_log(&log, &at);
    }
    let (_, sa) = cluster.snapshot(0, s).await;
    let (_, sb) = cluster.snapshot(1, s).await;
    assert_eq!(sa["cursor"], 23);
    assert_eq!(sa, sb, "both nodes project the same log");
}

/// An ingest answer's (accepted, duplicates, cursor).
fn counts(ack: &Value) -> (Option<u64>, Option<u64>, Option<u64>) {
    (
        ack["accepted"].as_u64(),
        ack["duplicates"].as_u64(),
        ack["cursor"].as_u64(),
    )
}
