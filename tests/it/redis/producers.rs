//! Idempotent producers on a session's Durable Stream across nodes: what
//! one node let in fences and deduplicates on the other, because the
//! producer is remembered with the events in the shared log.

use serde_json::json;

use super::harness::{redis_url, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_producer_is_fenced_and_deduplicated_on_every_node() {
    let Some(url) = redis_url("a_producer_is_fenced_and_deduplicated_on_every_node") else {
        return;
    };
    let cluster = Cluster::start(&url, 2, &[]);
    let append = |node: usize, epoch: u64, seq: u64| {
        let url = format!("{}/ds/v1/stream/sessions/fenced", cluster.base(node));
        let body = json!({"id": format!("e{epoch}-{seq}"), "type": "run.started", "runId": "r"});
        let req = cluster
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("producer-id", "runtime")
            .header("producer-epoch", epoch.to_string())
            .header("producer-seq", seq.to_string())
            .body(body.to_string());
        async move {
            let r = req.send().await.unwrap();
            let epoch = r
                .headers()
                .get("producer-epoch")
                .map(|v| v.to_str().unwrap().to_string());
            (r.status().as_u16(), epoch)
        }
    };
    // (node, epoch, seq) -> status: the new instance on node 0, its
    // zombie on node 1, retries crossing nodes.
    let steps = [
        ((0, 0, 0), 200),
        ((1, 0, 1), 200),
        ((0, 1, 0), 200),
        ((1, 0, 2), 403),
        ((1, 1, 0), 204),
        ((1, 1, 1), 200),
        ((0, 1, 1), 204),
        ((0, 1, 3), 409),
    ];
    for ((node, epoch, seq), want) in steps {
        let (status, current) = append(node, epoch, seq).await;
        assert_eq!(status, want, "node {node}, epoch {epoch}, seq {seq}");
        if status == 403 {
            assert_eq!(current.as_deref(), Some("1"));
        }
    }
    for node in 0..2 {
        let (_, log) = cluster.log(node, "fenced").await;
        let ids: Vec<&str> = log
            .iter()
            .map(|(_, e)| e["id"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(ids, ["e0-0", "e0-1", "e1-0", "e1-1"], "node {node}");
    }
}
