//! Unit tests of the seed 004 taxonomy (issue 5): teams, coding, queue and
//! steer, context, permissions, plans, `state.delta`, repair, taxonomy and
//! topology, user input with attachments, the per-turn verifier, and the
//! snapshot window with message paging. Every test also checks that the
//! emitted chunks rebuild the messages (`assert_replay`).

use serde_json::json;

use super::tests::{Run, F};
use super::*;

fn sub(id: &str) -> impl FnOnce(&mut crate::event::ScopeIds) + '_ {
    move |i| i.subagent_id = Some(id.into())
}

#[test]
fn team_roster_work_items_graph_and_lanes() {
    let mut r = Run::new();
    r.apply(F::new("e1", "team.changed").p("teamName", json!("delivery")).p("teamPhase", json!("active")).p(
        "roster",
        json!([{"agentId": "lead", "agentName": "Lead", "role": "coordinator", "model": "m-1", "policy": {"permissionMode": "ask"}}, "researcher"]),
    ).p("workItems", json!([{"workItemId": "w1", "title": "Collect sources", "status": "open", "assignee": "researcher", "priority": 2}])));
    r.apply(
        F::new("e2", "task.created")
            .ids(|i| {
                i.task_id = Some("t-child".into());
                i.parent_task_id = Some("t-root".into());
            })
            .p("assignee", json!("researcher"))
            .p("blocker", json!("waiting on access"))
            .p("dependsOn", json!(["w1"]))
            .status("blocked"),
    );
    r.apply(
        F::new("e3", "subagent.started")
            .ids(|i| {
                i.subagent_id = Some("researcher".into());
                i.task_id = Some("t-child".into());
                i.parent_session_id = Some("s-lead".into());
            })
            .p("model", json!("m-2"))
            .p("role", json!("researcher"))
            .p("permissionMode", json!("read-only"))
            .p("transcriptRef", json!("transcript://researcher")),
    );
    r.apply(F::new("e4", "worker.started").ids(|i| i.worker_id = Some("w-orphan".into())));
    r.apply(
        F::new("e5", "handoff.requested")
            .p("handoffId", json!("h1"))
            .p("from", json!("lead"))
            .p("to", json!("researcher"))
            .p("reason", json!("needs sources")),
    );
    r.apply(F::new("e6", "handoff.accepted").p("handoffId", json!("h1")));
    r.apply(
        F::new("e7", "review.requested")
            .ids(|i| i.review_id = Some("rv1".into()))
            .p("reviewer", json!("verifier")),
    );
    let mut v = F::new("e8", "review.verdict")
        .ids(|i| {
            i.review_id = Some("rv1".into());
            i.evidence_id = Some("ev1".into());
        })
        .p("verdict", json!("changes_requested"))
        .p("requestedFixes", json!(["cite RFC"]));
    v.0.evidence_refs = vec!["ev2".into()];
    r.apply(v);
    r.apply(
        F::new("e9", "worker.notification")
            .ids(sub("researcher"))
            .ids(|i| i.task_id = Some("t-child".into()))
            .p("role", json!("user"))
            .p("summary", json!("3 sources found"))
            .p("resultRef", json!("result://1"))
            .p("usage", json!({"tokens": 10})),
    );
    // A user-role text from a teammate is a notification, not user speech.
    r.apply(
        F::new("e10", "text.final")
            .agent("researcher")
            .turn("t")
            .p("role", json!("user"))
            .p("text", json!("worker done")),
    );
    r.apply(F::new("e11", "channel.opened").ids(|i| i.channel_id = Some("c1".into())));
    r.apply(
        F::new("e12", "channel.message")
            .ids(|i| i.channel_id = Some("c1".into()))
            .p("summary", json!("hi")),
    );
    // Teammates keep their identity; the lead's text stays anonymous.
    r.apply(
        F::new("e13", "text.delta")
            .turn("t")
            .p("delta", json!("lead says")),
    );
    r.apply(
        F::new("e14", "text.delta")
            .turn("t")
            .agent("researcher")
            .p("delta", json!("mate says")),
    );
    // Delegated approval: the card names the requesting teammate.
    r.apply(
        F::new("e15", "action.required")
            .turn("t")
            .agent("researcher")
            .action("a1")
            .p("actionType", json!("tool_approval")),
    );

    let s = r.state();
    let a = &s["agents"];
    assert_eq!(a["lead"]["role"], "coordinator");
    assert_eq!(a["lead"]["model"], "m-1");
    assert_eq!(a["lead"]["policy"], json!({"permissionMode": "ask"}));
    assert_eq!(a["lead"]["lineage"], "unknown", "roster-only: nothing said");
    assert_eq!(a["researcher"]["lineage"], "known");
    assert_eq!(a["researcher"]["model"], "m-2");
    assert_eq!(a["researcher"]["status"], "running");
    assert_eq!(
        a["researcher"]["policy"],
        json!({"permissionMode": "read-only"})
    );
    assert_eq!(a["researcher"]["transcriptRef"], "transcript://researcher");
    assert_eq!(a["w-orphan"]["lineage"], "unavailable");
    assert!(r.diag_codes().contains(&"missing_lineage".to_string()));
    assert_eq!(
        s["team"]["roster"],
        json!(["lead", "researcher", "w-orphan"])
    );
    assert_eq!(s["team"]["info"]["teamName"], "delivery");
    assert_eq!(s["tasks"]["w1"]["assignee"], "researcher");
    assert_eq!(s["tasks"]["w1"]["priority"], 2);
    let t = &s["tasks"]["t-child"];
    assert_eq!(t["parentTaskId"], "t-root");
    assert_eq!(t["blocker"], "waiting on access");
    assert_eq!(t["dependencies"], json!(["w1"]));
    let edges = s["team"]["edges"].as_array().unwrap();
    for e in [
        json!({"from": "task:t-root", "to": "task:t-child", "kind": "subtask"}),
        json!({"from": "s-lead", "to": "researcher", "kind": "delegation"}),
        json!({"from": "lead", "to": "researcher", "kind": "handoff"}),
    ] {
        assert!(edges.contains(&e), "{e} in {edges:?}");
    }
    assert!(
        !edges.iter().any(|e| e["to"] == "w-orphan"),
        "no guessed lineage"
    );
    assert_eq!(s["team"]["handoffs"][0]["status"], "accepted");
    assert_eq!(s["team"]["handoffs"][0]["reason"], "needs sources");
    let rv = &s["team"]["reviews"][0];
    assert_eq!(rv["reviewId"], "rv1");
    assert_eq!(rv["verdict"], "changes_requested");
    assert_eq!(rv["evidenceRefs"], json!(["ev1", "ev2"]));
    assert_eq!(rv["requestedFixes"], json!(["cite RFC"]));
    assert_eq!(s["evidence"]["ev1"]["verdict"], "changes_requested");
    let n = s["team"]["notifications"].as_array().unwrap();
    assert_eq!(n.len(), 2);
    assert_eq!(n[0]["resultRef"], "result://1");
    assert_eq!(n[0]["sourceRole"], "user");
    assert_eq!(n[1]["summary"], "worker done");
    assert_eq!(s["team"]["channels"][0]["messageCount"], 1);
    let ms = r.p.messages();
    assert!(
        ms.iter().all(|m| m.role != Role::User),
        "no user message from a worker"
    );
    assert_eq!(ms.len(), 2);
    assert_eq!(ms[0].agent_id, None);
    assert_eq!(ms[1].agent_id.as_deref(), Some("researcher"));
    assert_eq!(s["actions"]["a1"]["requestedBy"], "researcher");
    let card = ms[1].parts.last().unwrap().to_json();
    assert_eq!(card["type"], "data-action-request");
    assert_eq!(card["data"]["requestedBy"], "researcher");
    r.assert_replay();
}

#[test]
fn coding_run_files_patches_commands_tests_and_blocks() {
    let mut r = Run::new();
    r.apply(F::new("e1", "run.started").turn("t"));
    r.apply(
        F::new("e2", "file.read")
            .turn("t")
            .p("path", json!("src/a.rs")),
    );
    r.apply(
        F::new("e3", "file.changed")
            .turn("t")
            .p("path", json!("src/a.rs"))
            .p("diffRef", json!("diff://1")),
    );
    r.apply(
        F::new("e4", "patch.started")
            .turn("t")
            .tool("p1")
            .p("path", json!("src/a.rs")),
    );
    r.apply(
        F::new("e5", "patch.applied")
            .turn("t")
            .tool("p1")
            .p("diffRef", json!("diff://1")),
    );
    r.apply(
        F::new("e6", "patch.failed")
            .turn("t")
            .p("patchId", json!("p2"))
            .p("failureCategory", json!("conflict")),
    );
    r.apply(
        F::new("e7", "command.started")
            .turn("t")
            .tool("c1")
            .p("command", json!("cargo test")),
    );
    r.apply(
        F::new("e8", "command.output")
            .turn("t")
            .tool("c1")
            .p("outputRef", json!("out://1")),
    );
    r.apply(
        F::new("e9", "command.exited")
            .turn("t")
            .tool("c1")
            .p("exitCode", json!(101)),
    );
    r.apply(
        F::new("e10", "test.started")
            .turn("t")
            .tool("tr1")
            .p("suite", json!("unit")),
    );
    r.apply(
        F::new("e11", "test.completed")
            .turn("t")
            .tool("tr1")
            .p("result", json!("failed"))
            .p("passed", json!(3))
            .p("failed", json!(1)),
    );
    r.apply(
        F::new("e12", "sandbox.blocked")
            .turn("t")
            .p("reasonCode", json!("network_disabled"))
            .p("commandId", json!("c2")),
    );
    let s = r.state();
    let c = &s["coding"];
    assert_eq!(c["files"]["src/a.rs"]["reads"], 1);
    assert_eq!(c["files"]["src/a.rs"]["changes"], 1);
    assert_eq!(c["files"]["src/a.rs"]["diffRef"], "diff://1");
    assert_eq!(c["patches"]["p1"]["status"], "applied");
    assert_eq!(c["patches"]["p2"]["status"], "failed");
    assert_eq!(c["patches"]["p2"]["failureCategory"], "conflict");
    assert_eq!(c["commands"]["c1"]["status"], "failed");
    assert_eq!(c["commands"]["c1"]["exitCode"], 101);
    assert_eq!(c["commands"]["c1"]["outputRefs"], json!(["out://1"]));
    assert_eq!(c["tests"]["tr1"]["status"], "failed");
    assert_eq!(c["tests"]["tr1"]["passed"], 3);
    assert_eq!(c["tests"]["tr1"]["failed"], 1);
    assert_eq!(c["blocks"][0]["reasonCode"], "network_disabled");
    assert_eq!(s["runtime"]["status"], "blocked");
    assert_eq!(s["tools"]["c1"]["exitCode"], 101);
    let codes = r.diag_codes();
    for d in [
        "command.exited",
        "test.completed",
        "patch.failed",
        "sandbox.blocked",
    ] {
        assert!(codes.contains(&d.to_string()), "{d} in {codes:?}");
    }
    // Output stays a ref, never text in the message.
    assert!(!r.p.messages()[0].text().contains("out://1"));
    r.assert_replay();
}

#[test]
fn queue_and_steer_are_distinct() {
    let mut r = Run::new();
    r.apply(F::new("e1", "queue.changed").p("queuedTurns", json!([{"turnId": "t2", "text": "next question", "status": "queued"}, {"turnId": "t3", "status": "removed"}])).p("steer", json!({"id": "s1", "text": "use the v2 API"})).p("queuedTurnCount", json!(1)));
    let q = &r.state()["queue"];
    assert_eq!(q["queuedCount"], 1, "removed items do not count");
    assert_eq!(q["steerCount"], 1);
    let items = q["items"].as_array().unwrap();
    assert_eq!(items[0]["kind"], "queue");
    assert_eq!(
        items[2],
        json!({"id": "s1", "kind": "steer", "text": "use the v2 API"})
    );
    assert_eq!(q["queuedTurnCount"], 1, "runtime facts kept as sent");
    // The envelope's control names the intent of unlabelled items.
    let mut f = F::new("e2", "queue.changed").p("items", json!([{"id": "x"}]));
    f.0.taxonomy.control = Some("steer".into());
    r.apply(f);
    let q = &r.state()["queue"];
    assert_eq!(q["items"][0]["kind"], "steer");
    assert_eq!(
        q["queuedCount"], 0,
        "a new queue.changed replaces the queue"
    );
    r.apply(F::new("e3", "queue.changed").p("items", json!([{"id": "y"}])));
    assert_eq!(
        r.state()["queue"]["items"][0]["kind"],
        "unknown",
        "never guessed"
    );
}

#[test]
fn context_refs_budget_missing_and_compaction_boundaries() {
    let mut r = Run::new();
    let mut f = F::new("e1", "context.changed")
        .p("contextRefs", json!([{"id": "doc://spec"}, "mem://team"]))
        .p("budget", json!({"usedTokens": 900, "maxTokens": 1000}))
        .p(
            "missing",
            json!([{"ref": "doc://secret", "reason": "no access"}]),
        );
    f.0.ref_ids = vec!["file://readme".into()];
    r.apply(f);
    let c = &r.state()["context"];
    assert_eq!(
        c["refs"],
        json!(["file://readme", "doc://spec", "mem://team"])
    );
    assert_eq!(c["budget"]["maxTokens"], 1000);
    assert_eq!(c["missing"], json!(["doc://secret"]));
    assert_eq!(c["status"], "missing");
    assert!(r.diag_codes().contains(&"missing_context".to_string()));
    r.apply(F::new("e2", "context.resolved").p("refs", json!(["doc://secret"])));
    assert_eq!(r.state()["context"]["missing"], json!([]));
    assert_eq!(r.state()["context"]["status"], "resolved");
    r.apply(F::new("e3", "context.compaction.started").p("compactionId", json!("k1")));
    assert_eq!(r.state()["context"]["status"], "compacting");
    r.apply(
        F::new("e4", "context.compaction.completed")
            .p("summary", json!("kept 3 facts"))
            .p("resumeRef", json!("ckpt://1"))
            .p("tokensBefore", json!(900))
            .p("tokensAfter", json!(200)),
    );
    let k = &r.state()["context"]["compactions"];
    assert_eq!(
        k.as_array().unwrap().len(),
        1,
        "one boundary, opened and closed"
    );
    assert_eq!(k[0]["status"], "completed");
    assert_eq!(k[0]["startedCursor"], 3);
    assert_eq!(k[0]["completedCursor"], 4);
    assert_eq!(k[0]["resumeRef"], "ckpt://1");
    assert_eq!(k[0]["tokensAfter"], 200);
    assert!(
        r.p.messages().is_empty(),
        "context is never hidden message text"
    );
}

#[test]
fn permissions_session_and_per_teammate() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "permission.changed")
            .p("mode", json!("ask"))
            .p("risk", json!("medium")),
    );
    r.apply(F::new("e2", "sandbox.applied").p("mode", json!("workspace-write")));
    r.apply(
        F::new("e3", "permission.changed")
            .agent("researcher")
            .p("mode", json!("read-only"))
            .p("policyScope", json!("repo")),
    );
    r.apply(F::new("e4", "permission.resolved").p("decision", json!("approved")));
    let p = &r.state()["permissions"];
    assert_eq!(p["mode"], "ask", "a teammate's mode is not the session's");
    assert_eq!(p["risk"], "medium");
    assert_eq!(p["sandbox"], "workspace-write");
    assert_eq!(p["agents"]["researcher"]["mode"], "read-only");
    assert_eq!(p["agents"]["researcher"]["policyScope"], "repo");
    assert_eq!(p["lastDecision"]["decision"], "approved");
    assert!(
        r.state()["actions"].as_object().unwrap().is_empty(),
        "no action from a permission fact"
    );
}

#[test]
fn plan_streams_then_final_reconciles_without_duplication() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Let me plan. ")),
    );
    r.apply(
        F::new("e2", "plan.delta")
            .turn("t")
            .p("delta", json!("1. read ")),
    );
    r.apply(
        F::new("e3", "plan.delta")
            .turn("t")
            .p("delta", json!("2. fix")),
    );
    assert_eq!(r.state()["plans"]["plan-t"]["text"], "1. read 2. fix");
    assert_eq!(r.part_types("msg-1"), ["text", "data-plan"]);
    r.apply(
        F::new("e4", "plan.final")
            .turn("t")
            .p("text", json!("1. read\n2. fix\n3. test"))
            .p(
                "steps",
                json!([{"title": "read"}, {"title": "fix"}, {"title": "test"}]),
            ),
    );
    let s = r.state();
    let p = &s["plans"]["plan-t"];
    assert_eq!(p["status"], "final");
    assert_eq!(
        p["text"], "1. read\n2. fix\n3. test",
        "the final wins, not appended"
    );
    assert_eq!(p["messageId"], "msg-1");
    assert_eq!(
        r.part_types("msg-1"),
        ["text", "data-plan"],
        "replaced in place"
    );
    let part = &s["messages"][0]["parts"][1];
    assert_eq!(part["data"]["status"], "final");
    assert_eq!(part["data"]["steps"][2]["title"], "test");
    assert!(r.diag_codes().contains(&"final_text_differs".to_string()));
    r.apply(
        F::new("e5", "plan.delta")
            .turn("t")
            .p("delta", json!(" 4. more")),
    );
    assert_eq!(
        r.state()["plans"]["plan-t"]["text"],
        "1. read\n2. fix\n3. test"
    );
    assert!(r
        .diag_codes()
        .contains(&"plan_delta_after_final".to_string()));
    r.apply(
        F::new("e6", "text.delta")
            .turn("t")
            .p("delta", json!("Go.")),
    );
    assert_eq!(
        r.part_types("msg-1"),
        ["text", "data-plan", "text"],
        "the plan is a segment boundary"
    );
    r.assert_replay();
}

#[test]
fn state_delta_patches_only_the_app_state() {
    let mut r = Run::new();
    r.apply(F::new("e1", "state.snapshot").p("state", json!({"board": {"columns": ["todo"]}})));
    assert_eq!(r.state()["app"], json!({"board": {"columns": ["todo"]}}));
    let a = r.apply(F::new("e2", "state.delta").p(
        "patch",
        json!([
            {"op": "add", "path": "/app/board/columns/-", "value": "done"},
            {"op": "test", "path": "/app/board/columns/0", "value": "todo"}
        ]),
    ));
    assert_eq!(
        r.state()["app"]["board"]["columns"],
        json!(["todo", "done"])
    );
    assert!(a.chunks.iter().any(|c| c.chunk.type_name() == "data-app"));
    r.apply(F::new("e0", "action.required").action("a1"));
    // Any other target is refused whole: the add before it does not land.
    r.apply(F::new("e3", "state.delta").p(
        "patch",
        json!([
            {"op": "add", "path": "/app/x", "value": 1},
            {"op": "replace", "path": "/actions/a1/status", "value": "resolved"}
        ]),
    ));
    r.apply(
        F::new("e4", "state.delta")
            .p("target", json!("tools"))
            .p("patch", json!([])),
    );
    let s = r.state();
    assert_eq!(s["actions"]["a1"]["status"], "pending");
    assert!(s["app"].get("x").is_none());
    assert_eq!(
        r.findings(),
        ["state_delta_rejected", "state_delta_rejected"]
    );
}

#[test]
fn repair_fixes_gaps_and_messages_but_never_completes_tools_or_actions() {
    let mut r = Run::new();
    r.apply(F::new("e1", "run.started").turn("t").seq(1));
    r.apply(
        F::new("e2", "text.delta")
            .turn("t")
            .seq(2)
            .ids(|i| i.message_id = Some("m1".into()))
            .p("delta", json!("Hel")),
    );
    r.apply(
        F::new("e3", "tool.started")
            .turn("t")
            .seq(5)
            .tool("c1")
            .p("toolName", json!("grep")),
    );
    r.apply(
        F::new("e4", "action.required")
            .turn("t")
            .seq(6)
            .action("a1"),
    );
    assert_eq!(r.state()["runtime"]["stale"], true);
    let a = r.apply(
        F::new("e5", "messages.snapshot")
            .turn("t")
            .p("messages", json!([
                {"id": "m1", "role": "assistant", "status": "complete", "parts": [
                    {"type": "text", "text": "Hello"},
                    {"type": "tool-grep", "toolCallId": "c1", "state": "output-available", "output": {}},
                    {"type": "data-action-request", "data": {"actionId": "a1", "status": "resolved"}}
                ]},
                {"id": "m0", "role": "user", "text": "earlier question"}
            ]))
            .p("tools", json!({"c1": {"status": "completed"}}))
            .p("actions", json!([{"actionId": "a1", "status": "resolved"}])),
    );
    let s = r.state();
    assert_eq!(s["runtime"]["stale"], false, "the gap is repaired");
    assert_eq!(
        s["tools"]["c1"]["status"], "running",
        "never completed by a repair"
    );
    assert_eq!(
        s["actions"]["a1"]["status"], "pending",
        "never resolved by a repair"
    );
    assert_eq!(s["runtime"]["status"], "waiting", "nor the run");
    let codes: Vec<&str> = a.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, ["repair_cannot_complete"; 4]);
    let m1 = r.p.message("m1").unwrap();
    assert!(
        m1.text().starts_with("Hello"),
        "the repair's text wins: {}",
        m1.text()
    );
    assert_eq!(m1.status, ui_message::MessageStatus::Complete);
    let m0 = r.p.message("m0").unwrap();
    assert_eq!(
        (m0.role, m0.text().as_str()),
        (Role::User, "earlier question")
    );
    // Restored messages never carry tool parts or action cards from a repair.
    assert!(m0.parts.iter().all(|p| matches!(p, Part::Text { .. })));
    // The tool's own result still completes it.
    r.apply(F::new("e6", "tool.result").turn("t").seq(7).tool("c1"));
    assert_eq!(r.state()["tools"]["c1"]["status"], "completed");
    r.apply(
        F::new("e7", "snapshot.updated")
            .turn("t")
            .p("actions", json!({"a1": {"decision": "approved"}})),
    );
    assert_eq!(r.state()["actions"]["a1"]["status"], "pending");
    r.assert_replay();
}

#[test]
fn envelope_taxonomy_and_topology_are_kept() {
    let mut r = Run::new();
    let mut f = F::new("e1", "agent.spawned")
        .ids(sub("researcher@team"))
        .ids(|i| i.parent_thread_id = Some("thread-lead".into()));
    f.0.taxonomy = crate::event::Taxonomy {
        owner: Some("agent".into()),
        scope: Some("agent".into()),
        phase: Some("acting".into()),
        surface: Some("team_roster".into()),
        persistence: Some("snapshot".into()),
        control: Some("delegate".into()),
        topology: Some("coordinator_team".into()),
    };
    let a = r.apply(f);
    r.apply(F::new("e2", "run.started"));
    let s = r.state();
    assert_eq!(s["topology"], "coordinator_team");
    let t = &s["timeline"][0]["taxonomy"];
    assert_eq!(
        t,
        &json!({"owner": "agent", "scope": "agent", "phase": "acting", "surface": "team_roster",
                "persistence": "snapshot", "control": "delegate", "topology": "coordinator_team"})
    );
    assert!(s["timeline"][1].get("taxonomy").is_none());
    assert_eq!(
        s["topology"], "coordinator_team",
        "kept until another names one"
    );
    assert!(a
        .chunks
        .iter()
        .any(|c| c.chunk.type_name() == "data-topology"));
}

#[test]
fn user_input_carries_text_and_attachment_refs_never_bytes() {
    let mut r = Run::new();
    let a = r.apply(
        F::new("e1", "turn.submitted").turn("t1").p("text", json!("Summarise these")).p(
            "attachments",
            json!([
                {"type": "document", "url": "https://files.test/spec.pdf", "mediaType": "application/pdf", "name": "spec.pdf"},
                {"type": "image", "uploadId": "up-1", "name": "shot.png", "mediaType": "image/png"},
                {"type": "business_object", "objectType": "campaign", "objectId": "42", "name": "Q3"},
                {"type": "document", "sensitive": true, "capabilityRef": "cap://doc/7", "url": "https://leak.test/x"},
                {"type": "image", "url": "data:image/png;base64,AAAA", "mediaType": "image/png"},
                {"type": "audio", "base64": "AAAA"},
                {"type": "document", "path": "/home/me/secret.pdf"},
                {"type": "document", "sensitive": true, "url": "https://x.test/y"}
            ]),
        ),
    );
    let m = r.p.message("user-t1").unwrap();
    let parts: Vec<serde_json::Value> = m.parts.iter().map(|p| p.to_json()).collect();
    assert_eq!(
        parts[0],
        json!({"type": "text", "text": "Summarise these", "state": "done"})
    );
    assert_eq!(
        parts[1],
        json!({"type": "file", "mediaType": "application/pdf", "url": "https://files.test/spec.pdf"})
    );
    assert_eq!(parts[2]["type"], "data-attachment");
    assert_eq!(parts[2]["id"], "up-1");
    assert_eq!(parts[2]["data"]["ref"], "up-1");
    assert_eq!(parts[3]["id"], "campaign:42");
    assert_eq!(parts[3]["data"]["objectType"], "campaign");
    assert_eq!(
        parts[4]["data"],
        json!({"kind": "document", "ref": "cap://doc/7", "sensitive": true})
    );
    assert_eq!(parts.len(), 5);
    let dropped = a
        .findings
        .iter()
        .filter(|f| f.code == "attachment_dropped")
        .count();
    assert_eq!(
        dropped, 4,
        "data: URL, base64, local path, sensitive without capability"
    );
    let text = r.state().to_string();
    for leak in ["AAAA", "/home/me", "leak.test"] {
        assert!(!text.contains(leak), "{leak} must not reach the projection");
    }
    // An Agent UI user text fact is a user message too.
    r.apply(
        F::new("e2", "text.final")
            .turn("t2")
            .p("role", json!("user"))
            .p("text", json!("and this")),
    );
    let u = r.p.message("user-t2").unwrap();
    assert_eq!((u.role, u.text().as_str()), (Role::User, "and this"));
    r.assert_replay();
}

#[test]
fn verifier_findings_each_become_warnings_never_crashes() {
    let mut r = Run::new();
    let code = |r: &mut Run, f: F| -> Vec<String> {
        r.apply(f).findings.into_iter().map(|x| x.code).collect()
    };
    r.apply(F::new("e1", "run.started").turn("t"));
    assert_eq!(
        code(&mut r, F::new("e2", "tool.result").turn("t").tool("c0")),
        ["tool_result_without_start"]
    );
    r.apply(F::new("e3", "tool.started").turn("t").tool("c1"));
    assert_eq!(
        code(&mut r, F::new("e4", "tool.started").turn("t").tool("c1")),
        ["tool_restarted"]
    );
    r.apply(
        F::new("e5", "tool.result")
            .turn("t")
            .tool("c1")
            .p("summary", json!("one")),
    );
    assert_eq!(
        code(&mut r, F::new("e6", "tool.failed").turn("t").tool("c1")),
        ["repeated_terminal_event"]
    );
    assert_eq!(
        r.state()["tools"]["c1"]["status"],
        "completed",
        "the first end stands"
    );
    assert_eq!(
        code(
            &mut r,
            F::new("e7", "action.resolved").turn("t").action("zz")
        ),
        ["action_resolved_without_request"]
    );
    r.apply(F::new("e8", "action.required").turn("t").action("a1"));
    r.apply(
        F::new("e9", "action.resolved")
            .turn("t")
            .action("a1")
            .p("decision", json!("approved")),
    );
    assert_eq!(
        code(
            &mut r,
            F::new("e10", "action.resolved")
                .turn("t")
                .action("a1")
                .p("decision", json!("rejected"))
        ),
        ["repeated_terminal_event"]
    );
    assert_eq!(r.state()["actions"]["a1"]["decision"], "approved");
    r.apply(F::new("e11", "run.finished").turn("t"));
    assert_eq!(
        code(&mut r, F::new("e12", "run.finished").turn("t")),
        ["repeated_terminal_event"]
    );
    assert_eq!(
        code(
            &mut r,
            F::new("e13", "text.delta")
                .turn("t")
                .p("delta", json!("late"))
        ),
        ["work_after_turn_end"]
    );
    assert_eq!(
        code(
            &mut r,
            F::new("e14", "action.required").turn("t").action("a2")
        ),
        ["work_after_turn_end"]
    );
    // A new turn is fine; the findings are diagnostics too.
    assert!(code(
        &mut r,
        F::new("e15", "text.delta")
            .turn("t2")
            .p("delta", json!("ok"))
    )
    .is_empty());
    let codes = r.diag_codes();
    for c in [
        "tool_result_without_start",
        "tool_restarted",
        "repeated_terminal_event",
        "action_resolved_without_request",
        "work_after_turn_end",
    ] {
        assert!(codes.contains(&c.to_string()), "{c}");
    }
    r.assert_replay();
}

#[test]
fn snapshot_holds_a_window_and_older_messages_page_in() {
    let mut r = Run::new();
    for i in 0..7 {
        let t = format!("t{i}");
        r.apply(
            F::new(&format!("u{i}"), "turn.submitted")
                .turn(&t)
                .p("text", json!(format!("q{i}"))),
        );
    }
    let s = r.p.snapshot_json(3);
    let ids: Vec<&str> = s["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["user-t4", "user-t5", "user-t6"]);
    assert_eq!(
        s["history"],
        json!({"messages": 7, "inSnapshot": 3, "nextBefore": "user-t4"})
    );
    assert_eq!(r.p.messages().len(), 7, "the projection keeps all");
    assert_eq!(r.p.state_json()["messages"].as_array().unwrap().len(), 7);
    let (page, next) = r.p.messages_page(Some("user-t4"), 3).unwrap();
    let ids: Vec<&str> = page.iter().map(|m| &*m.id).collect();
    assert_eq!(
        (ids, next.as_deref()),
        (vec!["user-t1", "user-t2", "user-t3"], Some("user-t1"))
    );
    let (page, next) = r.p.messages_page(Some("user-t1"), 3).unwrap();
    assert_eq!((page.len(), next), (1, None));
    let (page, _) = r.p.messages_page(None, 2).unwrap();
    assert_eq!(&*page[1].id, "user-t6");
    assert!(r.p.messages_page(Some("nope"), 3).is_none());
    let small = r.p.snapshot_json(50);
    assert_eq!(small["history"], json!({"messages": 7, "inSnapshot": 7}));
}

#[test]
fn checkpoints_written_before_the_new_surfaces_still_load() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "turn.submitted")
            .turn("t")
            .p("text", json!("hi")),
    );
    r.apply(
        F::new("e2", "subagent.started")
            .ids(sub("s1"))
            .ids(|i| i.task_id = Some("k".into())),
    );
    r.apply(F::new("e3", "task.created").ids(|i| i.task_id = Some("k".into())));
    let mut v = serde_json::to_value(&r.p).unwrap();
    let st = v["state"].as_object_mut().unwrap();
    for k in ["plans", "app", "topology"] {
        st.remove(k);
    }
    st["team"].as_object_mut().unwrap().remove("info");
    st["permissions"].as_object_mut().unwrap().remove("agents");
    let back: Projection = serde_json::from_value(v).expect("an old checkpoint loads");
    assert_eq!(back.state().messages, r.p.state().messages);
    assert_eq!(back.state().agents, r.p.state().agents);
}
