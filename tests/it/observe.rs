//! What operators read in `/metrics`: request counts per route template,
//! latency histograms (request, ingest to durable, store append, replay
//! reads, publish to a subscriber's connection) and queue depths (actor
//! mailbox, embedded writer), as Prometheus histograms with buckets.

use serde_json::json;

use crate::common::{tempdir, TestServer};

fn has_histogram(text: &str, name: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with(&format!("{name}_bucket{{")) && l.contains("le=\"+Inf\""))
        && text.contains(&format!("{name}_count"))
}

#[tokio::test]
async fn metrics_hold_route_counts_latency_histograms_and_queue_depths() {
    let srv = TestServer::builder()
        .embedded(tempdir("observe"))
        .start()
        .await;
    // A live subscriber, so that a frame is delivered; a resumed one, so
    // that the store is read for a replay.
    let mut live = srv.sse("obs", "", None).await;
    assert_eq!(live.next().await.unwrap().event, "snapshot");
    let (st, _) = srv
        .post("obs", &json!([{"type": "run.started", "runId": "r"}, {"type": "text.delta", "runId": "r", "payload": {"delta": "hi"}}]))
        .await;
    assert_eq!(st, 200);
    live.take(2).await;
    let mut replay = srv.sse("obs", "?cursor=0", None).await;
    assert_eq!(replay.take(2).await[1].data["cursor"], 2);
    let (st, _) = srv.get_json("/v1/sessions/nope%20id/snapshot").await;
    assert_eq!(st, 400);
    let text = srv
        .http
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "projector_http_request_seconds",
        "projector_ingest_seconds",
        "projector_store_append_seconds",
        "projector_replay_read_seconds",
        "projector_delivery_seconds",
        "projector_actor_mailbox_depth",
        "projector_store_writer_queue_depth",
        "projector_store_commit_seconds",
    ] {
        assert!(
            has_histogram(&text, name),
            "{name} is no histogram in:\n{text}"
        );
    }
    // Counted by route template, never by the raw path (no label per session).
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.starts_with("projector_http_requests_total") && l.contains(needle))
    };
    assert!(
        line("route=\"/v1/sessions/{session_id}/events\"")
            .is_some_and(|l| l.contains("method=\"POST\"") && l.contains("status=\"200\"")),
        "{text}"
    );
    assert!(line("route=\"/v1/sessions/{session_id}/snapshot\"")
        .is_some_and(|l| l.contains("status=\"400\"")));
    assert!(
        !text.contains("route=\"/v1/sessions/obs"),
        "no raw paths as labels"
    );
}
