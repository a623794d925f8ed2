//! The live session index across nodes: a change made on one node (a
//! session created, updated, deleted) reaches the index streams of every
//! node once, by the index channel the append and delete scripts publish on.

use serde_json::json;

use super::harness::{redis_url, Cluster, RawSse};

async fn index(cluster: &Cluster, i: usize) -> RawSse {
    let url = format!("{}/v1/sessions/stream", cluster.base(i));
    let mut s = RawSse::get(&cluster.http, &url, None)
        .await
        .unwrap_or_else(|e| panic!("node {i}: index: {e}"));
    let first = s.expect(&format!("node {i}: index snapshot")).await;
    assert_eq!(first.event, "snapshot");
    s
}

/// The next change on a node's index: `(type, session)`.
async fn change(s: &mut RawSse, what: &str) -> (String, String) {
    // Heartbeats keep the stream busy: bound the wait for the event itself.
    let f = tokio::time::timeout(super::harness::DEADLINE, s.expect(what))
        .await
        .unwrap_or_else(|_| panic!("{what}: no change in time"));
    assert_eq!(f.event, "session", "{what}: {f:?}");
    let v = f.json();
    (
        v["type"].as_str().unwrap().to_string(),
        v["session"]["sessionId"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_nodes_index_hears_every_change_once() {
    let Some(url) = redis_url("every_nodes_index_hears_every_change_once") else {
        return;
    };
    let cluster = Cluster::start(&url, 2, &[]);
    let mut ix = [index(&cluster, 0).await, index(&cluster, 1).await];
    let steps = [
        (0, "ix-a", "created"),
        (0, "ix-a", "updated"),
        (1, "ix-b", "created"),
        (1, "ix-a", "updated"),
        (1, "ix-a", "deleted"),
        (0, "ix-c", "created"),
    ];
    for (n, (node, session, kind)) in steps.into_iter().enumerate() {
        if kind == "deleted" {
            let r = cluster
                .http
                .delete(format!("{}/v1/sessions/{session}", cluster.base(node)))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        } else {
            let (st, body) = cluster
                .post(
                    node,
                    session,
                    &json!({"id": format!("e{n}"), "type": "run.started", "runId": format!("r{n}")}),
                )
                .await;
            assert_eq!(st, 200, "{body}");
        }
        // Both nodes' indexes say so, once and in order: the node that made
        // the change from its actor, the other from the index channel.
        for (i, s) in ix.iter_mut().enumerate() {
            let what = format!("node {i}: {kind} {session} (made on node {node})");
            assert_eq!(
                change(s, &what).await,
                (kind.to_string(), session.to_string()),
                "{what}"
            );
        }
    }
}
