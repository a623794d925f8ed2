//! The peer's 13 conformance fixtures through the real HTTP ingest path:
//! each into its own session, no 5xx, every event accepted, and the snapshot
//! showing the facts each fixture's `expected` names. (The reducer-level
//! twin of this test, with the reasons for each status, is in
//! `crates/projector-core/src/projection/tests/conformance.rs`.)

use serde_json::Value;

use crate::common::TestServer;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/conformance/lime-fixtures.json"
);

/// Our honest runtime status where it differs from the reference's.
fn our_status(id: &str) -> Option<&'static str> {
    Some(match id {
        // A failing tool does not fail the run.
        "tool-failure" => "running",
        // Resolved action, but no fact says the run completed.
        "hitl-action" => "running",
        // No lifecycle facts at all.
        "artifact-evidence" => "idle",
        // The reference marks a run completed on snapshot.updated (a quirk).
        "stream-repair" | "subagent-handoff" | "coding-hydration-repair" => "running",
        _ => return None,
    })
}

fn count(v: &Value) -> u64 {
    match v {
        Value::Object(m) => m.len() as u64,
        Value::Array(a) => a.len() as u64,
        _ => 0,
    }
}

#[tokio::test]
async fn every_fixture_ingests_over_http_and_shows_its_expected_facts() {
    let srv = TestServer::builder().start().await;
    let fixtures: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(FIXTURES).expect("fixtures")).unwrap();
    assert_eq!(fixtures.len(), 13);
    for fx in &fixtures {
        let id = fx["id"].as_str().unwrap();
        let session = format!("fixture-{id}");
        let events = fx["events"].as_array().unwrap();
        let (status, out) = srv.post(&session, &fx["events"]).await;
        assert_eq!(status, 200, "{id}: {out}");
        assert_eq!(out["accepted"].as_u64(), Some(events.len() as u64), "{id}");
        // Posting again, one by one, is all duplicates.
        for e in events {
            let (_, again) = srv.post(&session, e).await;
            assert_eq!(again["duplicates"], 1, "{id}");
        }
        let snap = srv.snapshot(&session).await;
        let st = &snap["state"];
        let exp = &fx["expected"];
        let ctx = |what: &str| format!("fixture {id}: {what}\n{st:#}");

        let want = our_status(id).unwrap_or_else(|| exp["status"].as_str().unwrap());
        assert_eq!(st["runtime"]["status"], want, "{}", ctx("status"));
        assert_eq!(
            count(&st["timeline"]),
            events.len() as u64,
            "{}",
            ctx("timeline")
        );
        if let Some(n) = exp["messagePartCount"].as_u64() {
            let parts: u64 = st["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| count(&m["parts"]))
                .sum();
            assert_eq!(parts, n, "{}", ctx("messagePartCount"));
        }
        for (key, surface) in [
            ("artifactCount", "artifacts"),
            ("evidenceCount", "evidence"),
        ] {
            if let Some(n) = exp[key].as_u64() {
                assert_eq!(count(&st[surface]), n, "{}", ctx(key));
            }
        }
        if let Some(n) = exp["pendingActionCount"].as_u64() {
            assert_eq!(
                st["runtime"]["pendingActions"],
                n,
                "{}",
                ctx("pendingActionCount")
            );
            let pending = st["actions"]
                .as_object()
                .unwrap()
                .values()
                .filter(|a| a["status"] == "pending")
                .count() as u64;
            assert_eq!(pending, n, "{}", ctx("pending actions"));
        }
        if let Some(codes) = exp["diagnostics"].as_array() {
            let have: Vec<&str> = st["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|d| d["code"].as_str())
                .collect();
            for c in codes {
                assert!(
                    have.contains(&c.as_str().unwrap()),
                    "{}",
                    ctx(&format!("diagnostic {c}"))
                );
            }
            // Diagnostics never reach message text.
            assert!(!st["messages"].to_string().contains("sequence_gap"));
        }
        if let Some(c) = exp["coding"].as_object() {
            let cd = &st["coding"];
            let failed = |k: &str| {
                cd[k]
                    .as_object()
                    .unwrap()
                    .values()
                    .filter(|v| v["status"] == "failed")
                    .count() as u64
            };
            for (k, v) in c {
                let have = match k.as_str() {
                    "fileCount" => count(&cd["files"]),
                    "changeCount" => cd["files"]
                        .as_object()
                        .unwrap()
                        .values()
                        .filter(|f| f["changes"].as_u64().unwrap_or(0) > 0)
                        .count() as u64,
                    "patchCount" => count(&cd["patches"]),
                    "commandCount" => count(&cd["commands"]),
                    "testCount" => count(&cd["tests"]),
                    "blockedCount" => count(&cd["blocks"]),
                    "failedPatchCount" => failed("patches"),
                    "failedTestCount" => failed("tests"),
                    other => panic!("unmapped coding count {other}"),
                };
                assert_eq!(have, v.as_u64().unwrap(), "{}", ctx(k));
            }
        }
        if let Some(sa) = exp["subagents"].as_object() {
            let agents = st["agents"].as_object().unwrap();
            assert_eq!(
                agents.len() as u64,
                sa["threadCount"].as_u64().unwrap(),
                "{}",
                ctx("threads")
            );
            let done = agents
                .values()
                .filter(|a| a["status"] == "completed")
                .count() as u64;
            assert_eq!(
                done,
                sa["completedThreadCount"].as_u64().unwrap(),
                "{}",
                ctx("completed")
            );
        }
    }
}

/// The team and coding fixtures over HTTP show their lanes: the handoff,
/// review and channel lanes, the delegation edge from ids only, the
/// teammate's own message; a `state.delta` aimed at the projection's own
/// subagent surface is refused (only `state.app` is patchable); the coding
/// surface has commands with exit codes, test runs with results and refs.
#[tokio::test]
async fn team_and_coding_fixtures_show_their_lanes_over_http() {
    let srv = TestServer::builder().start().await;
    let fixtures: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(FIXTURES).expect("fixtures")).unwrap();
    let get = |id: &str| fixtures.iter().find(|f| f["id"] == id).unwrap()["events"].clone();

    let (st, out) = srv.post("fx-team", &get("subagent-handoff")).await;
    assert_eq!(st, 200, "{out}");
    let warnings: Vec<&str> = out["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["code"].as_str())
        .collect();
    assert!(warnings.contains(&"state_delta_rejected"), "{warnings:?}");
    let s = &srv.snapshot("fx-team").await["state"];
    let ctx = format!("{s:#}");
    assert_eq!(
        s["team"]["handoffs"][0]["handoffId"], "handoff_fixture_1",
        "{ctx}"
    );
    assert_eq!(s["team"]["reviews"][0]["reviewId"], "review_fixture_1");
    assert_eq!(
        s["team"]["reviews"][0]["evidenceRefs"],
        serde_json::json!(["evidence_fixture_review"])
    );
    assert_eq!(s["team"]["channels"][0]["messageCount"], 1);
    assert!(s["team"]["edges"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({"from": "task:task_fixture", "to": "subagent_fixture_researcher", "kind": "delegation"})));
    assert_eq!(
        s["agents"]["subagent_fixture_researcher"]["role"],
        "researcher"
    );
    assert_eq!(
        s["agents"]["subagent_fixture_researcher"]["lineage"],
        "known"
    );
    assert_eq!(s["tasks"]["task_fixture"]["status"], "completed");
    assert!(s["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["agentId"] == "subagent_fixture_researcher"));
    assert_eq!(
        s["app"],
        serde_json::json!({}),
        "the projection is not patchable"
    );

    let (st, _) = srv.post("fx-code", &get("coding-test-failure-fix")).await;
    assert_eq!(st, 200);
    let s = &srv.snapshot("fx-code").await["state"];
    let c = &s["coding"];
    assert_eq!(c["commands"]["command_fixture_test_fix"]["exitCode"], 1);
    assert_eq!(
        c["commands"]["command_fixture_test_fix"]["status"],
        "failed"
    );
    assert_eq!(c["commands"]["command_fixture_test_rerun"]["exitCode"], 0);
    assert_eq!(
        c["commands"]["command_fixture_test_rerun"]["outputRefs"],
        serde_json::json!(["output_test_fix_passed"])
    );
    assert_eq!(c["tests"]["test_fixture_fix"]["status"], "passed");
    assert_eq!(c["tests"]["test_fixture_fix"]["passed"], 9);
    assert_eq!(c["tests"]["test_fixture_fix"]["runs"], 2);
    assert_eq!(c["patches"]["patch_fixture_test_fix"]["status"], "applied");
    assert_eq!(c["files"]["src/App.test.tsx"]["changes"], 1);
    assert_eq!(s["runtime"]["status"], "completed");
}
