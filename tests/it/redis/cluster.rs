//! Two nodes on a real Redis Cluster (three primaries this test starts with
//! `redis-server --cluster-enabled yes` and joins with `redis-cli --cluster
//! create`): sessions spread over the slots, ingest on both nodes,
//! subscribers on both, identical frames and one gapless order per session.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{cursor_of_id, free_port, own_redis, redis_node, RedisServer, DEADLINE};
use crate::common::{tempdir, Sse};

/// Three primaries joined into one cluster, once every slot is served.
fn start_cluster() -> (Vec<RedisServer>, Vec<u16>) {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let args = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--save",
        "",
        "--appendonly",
        "no",
    ];
    let nodes: Vec<RedisServer> = ports
        .iter()
        .map(|p| RedisServer::start(*p, &tempdir("redis-cluster"), &args))
        .collect();
    let mut create = Command::new("redis-cli");
    create.arg("--cluster").arg("create");
    for p in &ports {
        create.arg(format!("127.0.0.1:{p}"));
    }
    let out = create
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli runs");
    assert!(
        out.status.success(),
        "cluster create failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let deadline = Instant::now() + DEADLINE;
    for p in &ports {
        loop {
            let info = Command::new("redis-cli")
                .args(["-p", &p.to_string(), "cluster", "info"])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                break;
            }
            assert!(Instant::now() < deadline, "cluster never became ok");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    (nodes, ports)
}

#[tokio::test]
async fn two_nodes_on_a_redis_cluster_agree() {
    if !own_redis(
        "two_nodes_on_a_redis_cluster_agree",
        &["redis-server", "redis-cli"],
    ) {
        return;
    }
    let (_cluster, ports) = start_cluster();
    let seeds = ports
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let env = [("PROJECTOR_REDIS__CLUSTER", "true")];
    let (a, b) = (redis_node(&seeds, &env), redis_node(&seeds, &env));
    let bases = [
        format!("http://{}", a.addr()),
        format!("http://{}", b.addr()),
    ];
    let http = reqwest::Client::new();
    for base in &bases {
        let r = http.get(format!("{base}/readyz")).send().await.unwrap();
        assert_eq!(r.status(), 200, "ready on a cluster");
    }
    // Enough sessions to land on every primary.
    let sessions: Vec<String> = (0..12).map(|i| format!("c{i}")).collect();
    let mut streams = Vec::new();
    for s in &sessions {
        for base in &bases {
            let resp = http
                .get(format!("{base}/v1/sessions/{s}/stream"))
                .send()
                .await
                .unwrap();
            let mut sse = Sse::from_response(resp);
            assert_eq!(sse.next().await.unwrap().event, "snapshot");
            streams.push((s.clone(), sse));
        }
    }
    // Each session gets 10 events, alternating nodes.
    const EVENTS: u64 = 10;
    for i in 0..EVENTS {
        for (k, s) in sessions.iter().enumerate() {
            let base = &bases[(i as usize + k) % 2];
            let ev = json!({"id": format!("{s}-{i}"), "type": "text.delta", "runId": "r",
                            "payload": {"delta": format!("{i} ")}});
            let r = http
                .post(format!("{base}/v1/sessions/{s}/events"))
                .json(&ev)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let out: Value = r.json().await.unwrap();
            assert_eq!(out["cursor"], i + 1, "one gapless order in {s}");
        }
    }
    // Both nodes' subscribers of a session got the same bytes, cursors 1..=10.
    let mut by_session: std::collections::HashMap<String, Vec<Vec<(String, Value)>>> =
        Default::default();
    for (s, mut sse) in streams {
        let got: Vec<(String, Value)> = sse
            .take(EVENTS as usize)
            .await
            .into_iter()
            .map(|e| (cursor_of_id(&e.id.unwrap()), e.data))
            .collect();
        let ids: Vec<String> = got.iter().map(|(id, _)| id.clone()).collect();
        let want: Vec<String> = (1..=EVENTS).map(|c| c.to_string()).collect();
        assert_eq!(ids, want, "{s}");
        by_session.entry(s).or_default().push(got);
    }
    for (s, views) in by_session {
        assert_eq!(views.len(), 2);
        assert_eq!(
            views[0], views[1],
            "both nodes sent the same frames for {s}"
        );
    }
    // Listing works across slots.
    let list: Value = http
        .get(format!("{}/v1/sessions?limit=100", bases[1]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = list["sessions"].as_array().map_or(0, |a| a.len());
    assert_eq!(listed, sessions.len(), "{list}");
}
