//! Redis faults, against a real `redis-server` each test starts and kills on
//! its own port: while Redis is down ingest answers 503 problem+json and
//! readiness fails, open streams stay open; when it is back, ingest works and
//! the same streams continue with the next cursor (no gap, no duplicate);
//! when it comes back empty, subscribers get `reset` + `snapshot`, never
//! silently wrong data. With `redis.min_replicas_acked`, an ingest is
//! acknowledged only once a replica has it; a replica promoted after its
//! primary died has every acknowledged event with it, and may lack some
//! without it (what `min_replicas_acked = 0` risks, shown).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{
    cursor_of_id, free_port, own_redis, readiness, redis_node, Proxy, RedisServer, DEADLINE,
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

/// A failover to a replica that missed the last writes: the replication
/// link is cut (bytes dropped) while the primary takes event 2, the primary
/// dies, the replica is promoted. With `min_replicas_acked = 0` event 2 was acknowledged and
/// is gone (the risk that setting takes); with 1 it was refused (503), and
/// every acknowledged event is on the promoted replica.
#[tokio::test]
async fn a_promoted_replica_has_every_acknowledged_event_only_with_wait() {
    if !own_redis(
        "a_promoted_replica_has_every_acknowledged_event_only_with_wait",
        &["redis-server"],
    ) {
        return;
    }
    for want in ["0", "1"] {
        let (port, replica_port) = (free_port(), free_port());
        let primary = durable_redis(port, &tempdir("redis-primary"), &[]);
        // The replica follows its primary through a path that can be cut.
        let link = Proxy::start(format!("127.0.0.1:{port}")).await;
        let replica_args = ["--replicaof", "127.0.0.1", &link.port.to_string()];
        let _replica = durable_redis(replica_port, &tempdir("redis-replica"), &replica_args);
        let envs = [
            ("PROJECTOR_REDIS__TIMEOUT_MS", "1000"),
            ("PROJECTOR_REDIS__MIN_REPLICAS_ACKED", want),
        ];
        let node = redis_node(&format!("redis://127.0.0.1:{port}"), &envs);
        let base = format!("http://{}", node.addr());
        let http = reqwest::Client::new();
        let first = post_until_ok(&http, &base, 1, "with the replica up").await;
        assert_eq!(first["cursor"], 1, "{first}");
        // Event 1 is on the replica before it stops.
        let mut direct = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let deadline = Instant::now() + DEADLINE;
        loop {
            // (Each WAIT bounded by the server within the client's timeout.)
            let synced: u64 = redis::cmd("WAIT")
                .arg(1)
                .arg(200)
                .query_async(&mut direct)
                .await
                .unwrap();
            if synced == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the replica has event 1");
        }

        link.cut.store(true, std::sync::atomic::Ordering::Relaxed);
        let (status, body, _) = post(&http, &base, 2).await;
        primary.kill();
        let mut promoted = redis::Client::open(format!("redis://127.0.0.1:{replica_port}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut promoted)
            .await
            .unwrap();
        drop(node);
        // The promoted replica has no replica of its own yet: the node on it
        // asks for none.
        let alone = [("PROJECTOR_REDIS__TIMEOUT_MS", "1000")];
        let node = redis_node(&format!("redis://127.0.0.1:{replica_port}"), &alone);
        let base = format!("http://{}", node.addr());
        readiness(&http, &base, 200).await;
        let (_, log) = super::harness::log_at(&http, &base, "s").await;
        let ids: Vec<&str> = log.iter().map(|(_, e)| e["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["e1"], "the promoted replica has what it had ({want})");
        if want == "0" {
            assert_eq!(status, 200, "acknowledged by the primary alone: {body}");
            // Acknowledged, and lost in the failover.
        } else {
            assert_eq!(
                (status, &body["code"]),
                (503, &json!("store_unavailable")),
                "refused: no replica confirmed it: {body}"
            );
            // Not acknowledged, so not lost: the producer's retry lands.
            let out = post_until_ok(&http, &base, 2, "on the promoted replica").await;
            assert_eq!(
                (out["accepted"].as_u64(), out["cursor"].as_u64()),
                (Some(1), Some(2))
            );
        }
    }
}
