//! Redis faults, against a real `redis-server` each test starts and kills on
//! its own port: while Redis is down ingest answers 503 problem+json and
//! readiness fails, open streams stay open; when it is back, ingest works and
//! the same streams continue with the next cursor (no gap, no duplicate);
//! when it comes back empty, subscribers get `reset` + `snapshot`, never
//! silently wrong data. With `redis.min_replicas_acked`, an ingest is
//! acknowledged only once a replica has it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{
    cursor_of_id, free_port, own_redis, readiness, redis_node, RedisServer, DEADLINE,
};
use crate::common::{tempdir, Sse};

/// A redis-server on `port` with its data in `dir` as an append-only file,
/// fsync always (so a restart on the same `dir` has every write), plus `extra`.
fn durable_redis(port: u16, dir: &Path, extra: &[&str]) -> RedisServer {
    let aof = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    RedisServer::start(port, dir, &[&aof[..], extra].concat())
}

fn event(i: u64) -> Value {
    json!({"id": format!("e{i}"), "type": "text.delta", "runId": "r", "payload": {"delta": format!("{i} ")}})
}

/// POST event `i` to session `s`: status, body and content type.
async fn post(http: &reqwest::Client, base: &str, i: u64) -> (u16, Value, Option<String>) {
    let r = http
        .post(format!("{base}/v1/sessions/s/events"))
        .json(&event(i))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    (status, r.json().await.unwrap_or(Value::Null), ct)
}

/// POST event `i` until it is answered 200 (polled, bounded by `DEADLINE`);
/// that answer. `when` says in the panic what the test waited for.
async fn post_until_ok(http: &reqwest::Client, base: &str, i: u64, when: &str) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (status, body, _) = post(http, base, i).await;
        if status == 200 {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "ingest of e{i} still {status} {when}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Poll `/readyz` until it answers `want` (bounded).

#[tokio::test]
async fn redis_outage_gives_503_and_streams_continue_when_it_is_back() {
    if !own_redis(
        "redis_outage_gives_503_and_streams_continue_when_it_is_back",
        &["redis-server"],
    ) {
        return;
    }
    let port = free_port();
    let data = tempdir("redis-aof");
    let redis = durable_redis(port, &data, &[]);
    let url = format!("redis://127.0.0.1:{port}");
    let node = redis_node(&url, &[("PROJECTOR_REDIS__TIMEOUT_MS", "500")]);
    let base = format!("http://{}", node.addr());
    let http = reqwest::Client::new();
    readiness(&http, &base, 200).await;

    let mut sse = Sse::from_response(
        http.get(format!("{base}/v1/sessions/s/stream"))
            .send()
            .await
            .unwrap(),
    );
    assert_eq!(sse.next().await.unwrap().event, "snapshot");
    for i in 1..=3 {
        assert_eq!(post(&http, &base, i).await.0, 200);
    }
    let seen: Vec<String> = sse
        .take(3)
        .await
        .into_iter()
        .map(|e| cursor_of_id(&e.id.unwrap()))
        .collect();
    assert_eq!(seen, ["1", "2", "3"]);

    // Redis goes away: ingest is refused with a problem, nothing applied;
    // readiness fails; the stream stays open.
    redis.kill();
    let (status, body, ct) = post(&http, &base, 4).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(ct.as_deref(), Some("application/problem+json"));
    assert_eq!(body["code"], "store_unavailable", "{body}");
    readiness(&http, &base, 503).await;
    let (status, body, _) = post(&http, &base, 4).await;
    assert_eq!((status, &body["code"]), (503, &json!("store_unavailable")));

    // Back, with its data: ingest continues the same log; the same stream
    // carries the next cursor.
    let redis = durable_redis(port, &data, &[]);
    readiness(&http, &base, 200).await;
    let out = post_until_ok(&http, &base, 4, "after Redis came back").await;
    assert_eq!(
        (out["accepted"].as_u64(), out["cursor"].as_u64()),
        (Some(1), Some(4))
    );
    let next = sse.next().await.unwrap();
    assert_eq!(
        (next.event.as_str(), next.id.as_deref().map(cursor_of_id)),
        ("delta", Some("4".to_string()))
    );
    assert_eq!(next.data["eventId"], "e4");

    // Back empty (its data lost): the log was recreated, so the stream
    // starts over with `reset` and a snapshot of the new epoch.
    let epoch = out["epoch"].as_str().unwrap().to_string();
    redis.kill();
    let _redis = durable_redis(port, &tempdir("redis-empty"), &[]);
    readiness(&http, &base, 200).await;
    let out = post_until_ok(&http, &base, 5, "after Redis came back empty").await;
    assert_ne!(
        out["epoch"].as_str().unwrap(),
        epoch,
        "a new log, a new epoch"
    );
    let reset = sse.next().await.unwrap();
    assert_eq!(reset.event, "reset", "{reset:?}");
    let snap = sse.next().await.unwrap();
    assert_eq!(snap.event, "snapshot");
    assert_eq!(snap.data["epoch"], out["epoch"]);
    drop(node);
}

/// With `redis.min_replicas_acked = 1`, an ingest is acknowledged only once
/// a replica has it: with the replica up it is; with the replica gone the
/// ingest answers 503 (the primary may hold the events: a retry with the
/// same ids is answered as duplicates, never applied twice).
#[tokio::test]
async fn acknowledged_only_once_a_replica_has_it() {
    if !own_redis("acknowledged_only_once_a_replica_has_it", &["redis-server"]) {
        return;
    }
    let (port, replica_port) = (free_port(), free_port());
    let _primary = durable_redis(port, &tempdir("redis-primary"), &[]);
    let replica_dir = tempdir("redis-replica");
    let replica_args = ["--replicaof", "127.0.0.1", &port.to_string()];
    let replica = durable_redis(replica_port, &replica_dir, &replica_args);
    let url = format!("redis://127.0.0.1:{port}");
    let node = redis_node(
        &url,
        &[
            ("PROJECTOR_REDIS__TIMEOUT_MS", "1000"),
            ("PROJECTOR_REDIS__MIN_REPLICAS_ACKED", "1"),
        ],
    );
    let base = format!("http://{}", node.addr());
    let http = reqwest::Client::new();
    // The replica may still be syncing: the first ingest is bounded-polled.
    let first = post_until_ok(&http, &base, 1, "with the replica up").await;
    assert_eq!(first["cursor"], 1, "{first}");
    replica.kill();
    let (status, body, _) = post(&http, &base, 2).await;
    assert_eq!(
        (status, &body["code"]),
        (503, &json!("store_unavailable")),
        "{body}"
    );
    // The primary has it, so a retry (once replicated again) is a duplicate.
    let _replica = durable_redis(replica_port, &replica_dir, &replica_args);
    let out = post_until_ok(&http, &base, 2, "once the replica is back").await;
    assert_eq!(
        (out["accepted"].as_u64(), out["duplicates"].as_u64()),
        (Some(0), Some(1)),
        "{out}"
    );
    assert_eq!(out["cursor"], 2);
}
