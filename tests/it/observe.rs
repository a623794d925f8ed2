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

/// The `projector_http_requests_total` line with every one of `parts`.
fn requests_line<'a>(text: &'a str, parts: &[&str]) -> Option<&'a str> {
    text.lines().find(|l| {
        l.starts_with("projector_http_requests_total{") && parts.iter().all(|p| l.contains(p))
    })
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
    let text = srv.metrics().await;
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
    // (The recorder is the process's: other tests' requests are in it too.)
    let counted = |parts: &[&str]| requests_line(&text, parts).is_some();
    assert!(
        counted(&[
            "route=\"/v1/sessions/{session_id}/events\"",
            "method=\"POST\"",
            "status=\"200\""
        ]),
        "{text}"
    );
    assert!(counted(&[
        "route=\"/v1/sessions/{session_id}/snapshot\"",
        "method=\"GET\"",
        "status=\"400\""
    ]));
    assert!(
        !text.contains("route=\"/v1/sessions/obs"),
        "no raw paths as labels"
    );
    // A route's next requests count on the handles its first one took.
    let posts = |text: &str| -> f64 {
        let post_200 = [
            "route=\"/v1/sessions/{session_id}/events\"",
            "method=\"POST\"",
            "status=\"200\"",
        ];
        let line =
            requests_line(text, &post_200).unwrap_or_else(|| panic!("no POST count in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let before = posts(&text);
    for _ in 0..2 {
        let (st, _) = srv
            .post(
                "obs",
                &json!({"type": "text.delta", "runId": "r", "payload": {"delta": "!"}}),
            )
            .await;
        assert_eq!(st, 200);
    }
    assert!(posts(&srv.metrics().await) >= before + 2.0);
}

/// Every metric the Grafana dashboard in docs/ reads is one the server
/// records (named in the source as a metric), so the dashboard cannot drift.
#[test]
fn the_dashboard_reads_only_metrics_the_server_records() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/docs/grafana/agent-projector.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let mut source = String::new();
    let mut dirs = vec![std::path::PathBuf::from(format!("{root}/src"))];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                source.push_str(&std::fs::read_to_string(p).unwrap());
            }
        }
    }
    let mut names = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(i) = rest.find("projector_") {
                let name: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                rest = &rest[i + name.len()..];
                let base = name.trim_end_matches("_bucket").to_string();
                names.push(base);
            }
        }
    }
    assert!(names.len() > 15, "{names:?}");
    for n in names {
        assert!(
            source.contains(&format!("\"{n}\"")),
            "the dashboard reads {n}, which the server does not record"
        );
    }
}
