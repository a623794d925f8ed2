//! A run its producer left, on two nodes: both watch it (the writer at its
//! append, the other from the index notes), either may decide, and the
//! end is written once (its id names the run and the cursor it was silent
//! after, so a second decision is a duplicate).

use serde_json::{json, Value};

use super::harness::{redis_url, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_silent_run_is_ended_once_whichever_node_decides() {
    let Some(url) = redis_url("a_silent_run_is_ended_once_whichever_node_decides") else {
        return;
    };
    let cluster = Cluster::start(&url, 2, &[("PROJECTOR_RUNS__IDLE_TIMEOUT_SECS", "1")]);
    let ev = |n: u64, class: &str, extra: Value| {
        let mut e = json!({"id": format!("quiet-{n}"), "type": class, "runId": "r1", "turnId": "t1", "messageId": "m1"});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e
    };
    let (st, out) = cluster
        .post(
            0,
            "quiet",
            &json!([
                ev(1, "run.started", json!({})),
                ev(2, "text.delta", json!({"payload": {"delta": "half"}}))
            ]),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    // Followed on the other node: the end comes as the next frame.
    let mut sse = cluster.sse(1, "quiet", "?cursor=2", None).await;
    let end = sse.expect("the end of the silent run").await;
    let data: Value = serde_json::from_str(&end.data).unwrap();
    assert_eq!(data["cursor"], 3);
    assert_eq!(data["eventClass"], "run.finished");
    assert_eq!(data["eventId"], "server:idle:r1:2");
    // Whatever the other node decided meanwhile was the same fact: the
    // next frame is the marker posted now, on either node's log.
    let (st, _) = cluster
        .post(
            0,
            "quiet",
            &ev(
                4,
                "diagnostic.changed",
                json!({"payload": {"message": "marker"}}),
            ),
        )
        .await;
    assert_eq!(st, 200);
    let next = sse.expect("the marker").await;
    let data: Value = serde_json::from_str(&next.data).unwrap();
    assert_eq!(
        (data["cursor"].as_u64(), data["eventId"].as_str()),
        (Some(4), Some("quiet-4"))
    );
    for node in 0..2 {
        let (_, log) = cluster.log(node, "quiet").await;
        let ids: Vec<&str> = log
            .iter()
            .map(|(_, e)| e["id"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            ids,
            ["quiet-1", "quiet-2", "server:idle:r1:2", "quiet-4"],
            "node {node}"
        );
        let (_, snap) = cluster.snapshot(node, "quiet").await;
        assert_eq!(
            snap["state"]["runtime"]["status"], "interrupted",
            "node {node}"
        );
    }
}
