//! Unit tests of issue 16 item 1: every human-in-the-loop kind of the seed
//! 004 taxonomy keeps the content a UI needs to render its card or form,
//! in `actions[id]` and in the `data-action-request` part, and an action
//! still resolves only on the runtime's `action.resolved`.

use serde_json::{json, Value};

use super::tests::{Run, F};

/// Run an `action.required` of `kind` with `payload` inside an assistant
/// message (after some text), and return the action entry and the card.
fn request(kind: &str, payload: Value, agent: Option<&str>) -> (Run, Value, Value) {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("One moment. ")),
    );
    let mut f = F::new("e2", "action.required")
        .turn("t")
        .action("a1")
        .status("blocked")
        .p("actionType", json!(kind));
    if let Some(a) = agent {
        f = f.agent(a);
    }
    if let Value::Object(m) = payload {
        for (k, v) in m {
            f = f.p(&k, v);
        }
    }
    r.apply(f);
    let s = r.state();
    let entry = s["actions"]["a1"].clone();
    let card = s["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap().iter())
        .find(|p| p["type"] == "data-action-request")
        .map(|p| p["data"].clone())
        .expect("an action card in the message");
    assert_eq!(entry["status"], "pending");
    assert_eq!(entry["actionType"], kind);
    r.assert_replay();
    (r, entry, card)
}

/// Both the surface entry and the card carry `key` = `want`.
fn both(entry: &Value, card: &Value, key: &str, want: Value) {
    assert_eq!(entry[key], want, "actions[a1].{key}: {entry}");
    assert_eq!(card[key], want, "card.{key}: {card}");
}

#[test]
fn tool_approval_keeps_tool_name_scope_risk_and_safe_input() {
    let (_, e, c) = request(
        "tool_approval",
        json!({"toolName": "shell", "scope": "workspace", "risk": "high",
               "safeInput": {"command": "rm -rf build/"}, "question": "Run this command?"}),
        None,
    );
    both(&e, &c, "toolName", json!("shell"));
    both(&e, &c, "scope", json!("workspace"));
    both(&e, &c, "risk", json!("high"));
    both(&e, &c, "input", json!({"command": "rm -rf build/"}));
    both(&e, &c, "question", json!("Run this command?"));
    assert!(
        c.get("requestedCursor").is_none(),
        "bookkeeping stays off the card"
    );
}

#[test]
fn plan_decision_keeps_the_plan() {
    let plan = "1. Read the code\n2. Write the fix";
    let (_, e, c) = request("plan_decision", json!({"plan": plan}), None);
    both(&e, &c, "plan", json!(plan));
    // A plan sent as steps is kept as sent.
    let (_, e, _) = request(
        "plan_decision",
        json!({"plan": {"steps": ["a", "b"]}}),
        None,
    );
    assert_eq!(e["plan"], json!({"steps": ["a", "b"]}));
}

#[test]
fn teammate_plan_decision_names_the_teammate() {
    let (_, e, c) = request(
        "teammate_plan_decision",
        json!({"planText": "Split the work", "requestedBy": "researcher"}),
        Some("coordinator"),
    );
    both(&e, &c, "plan", json!("Split the work"));
    both(&e, &c, "requestedBy", json!("researcher"));
}

#[test]
fn structured_input_keeps_its_schema_and_options() {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}},
                        "required": ["name"]});
    let (_, e, c) = request(
        "structured_input",
        json!({"inputSchema": schema, "options": [{"value": "a"}, {"value": "b"}],
               "expiresAt": "2026-11-25T12:00:00Z"}),
        None,
    );
    both(&e, &c, "schema", schema);
    both(&e, &c, "options", json!([{"value": "a"}, {"value": "b"}]));
    both(&e, &c, "expiresAt", json!("2026-11-25T12:00:00Z"));
    // A schema that is no schema (a string) is not kept as one.
    let (_, e, _) = request("structured_input", json!({"schema": "name please"}), None);
    assert!(e.get("schema").is_none());
}

#[test]
fn clarification_keeps_the_question_and_the_run_stays_open() {
    let (r, e, c) = request(
        "clarification",
        json!({"question": "Which branch?", "description": "Two match."}),
        None,
    );
    both(&e, &c, "question", json!("Which branch?"));
    both(&e, &c, "detail", json!("Two match."));
    let s = r.state();
    assert_eq!(
        s["runtime"]["status"], "blocked",
        "never pretends the run is done"
    );
    assert_eq!(s["runtime"]["pendingActions"], 1);
}

#[test]
fn permission_grant_keeps_what_and_for_how_long() {
    let (_, e, c) = request(
        "permission_grant",
        json!({"grant": {"permission": "network", "durationSecs": 600},
               "scope": {"hosts": ["api.example.com"]}, "expiresAt": "2026-11-25T13:00:00Z"}),
        None,
    );
    both(
        &e,
        &c,
        "grant",
        json!({"permission": "network", "durationSecs": 600}),
    );
    both(&e, &c, "scope", json!({"hosts": ["api.example.com"]}));
    both(&e, &c, "expiresAt", json!("2026-11-25T13:00:00Z"));
}

#[test]
fn delegated_permission_shows_the_delegated_teammate() {
    let (_, e, c) = request(
        "delegated_permission",
        json!({"requestingAgentId": "sub-7", "risk": "medium", "toolName": "browser"}),
        Some("coordinator"),
    );
    both(&e, &c, "requestedBy", json!("sub-7"));
    both(&e, &c, "risk", json!("medium"));
}

#[test]
fn credential_request_never_carries_a_secret_value() {
    // The normaliser redacts secret-looking keys before the reducer runs;
    // through the whole path, only the credential's name reaches the card.
    let raw = json!({"type": "action.required", "actionId": "a1", "turnId": "t",
        "payload": {"actionType": "credential_request",
                    "credentialName": "GITHUB_TOKEN", "credentialKind": "token",
                    "credential": "ghp_live_secret", "token": "ghp_live_secret",
                    "question": "Paste a GitHub token"}});
    let n = crate::event::normalize(raw, &crate::event::Limits::default()).unwrap();
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(F::new("e1", "text.delta").turn("t").p("delta", json!("x")));
    r.apply(F(n.fact));
    let s = r.state();
    assert_eq!(
        s["actions"]["a1"]["credential"],
        json!({"name": "GITHUB_TOKEN", "kind": "token"})
    );
    assert!(!s.to_string().contains("ghp_live_secret"), "{s}");
}

#[test]
fn artifact_review_names_the_artifact_and_version() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Review please")),
    );
    r.apply(
        F::new("e2", "action.required")
            .turn("t")
            .action("a1")
            .ids(|i| i.artifact_id = Some("art-1".into()))
            .p("actionType", json!("artifact_review"))
            .p("versionId", json!("v3")),
    );
    let e = &r.state()["actions"]["a1"];
    assert_eq!(e["artifactId"], "art-1");
    assert_eq!(e["versionId"], "v3");
    r.assert_replay();
}

#[test]
fn the_request_content_survives_resolution_and_only_the_runtime_resolves() {
    let (mut r, _, _) = request("structured_input", json!({"question": "Name?"}), None);
    r.apply(F::new("e3", "snapshot.updated").turn("t"));
    assert_eq!(r.state()["actions"]["a1"]["status"], "pending");
    r.apply(
        F::new("e4", "action.resolved")
            .turn("t")
            .action("a1")
            .p("decision", json!("answered")),
    );
    let s = r.state();
    assert_eq!(s["actions"]["a1"]["status"], "resolved");
    assert_eq!(
        s["actions"]["a1"]["question"], "Name?",
        "the card still says what was asked"
    );
    r.assert_replay();
}

#[test]
fn a_tool_approval_is_the_tool_parts_approval_request_and_a_rejection_denies_it() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "tool.started")
            .turn("t")
            .tool("c1")
            .p("toolName", json!("shell"))
            .p("input", json!({"cmd": "rm -rf build"})),
    );
    r.apply(
        F::new("e2", "action.required")
            .turn("t")
            .action("a1")
            .tool("c1")
            .p("actionType", json!("tool_approval"))
            .p("question", json!("Run it?")),
    );
    let part = |r: &Run| {
        r.state()["messages"][0]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["type"] == "tool-shell")
            .cloned()
            .unwrap()
    };
    let p = part(&r);
    assert_eq!(p["state"], "approval-requested");
    assert_eq!(
        p["approval"],
        json!({"id": "a1", "requestReason": "Run it?"})
    );
    // Nothing but the runtime's resolution changes it.
    r.apply(
        F::new("e3", "action.resolved")
            .turn("t")
            .action("a1")
            .p("decision", json!("rejected")),
    );
    let p = part(&r);
    assert_eq!(p["state"], "output-denied");
    assert_eq!(r.state()["tools"]["c1"]["status"], "denied");
    r.assert_replay();

    // Approved: the part waits for its output, which then arrives as usual.
    let mut q = Run::new();
    q.apply(F::new("e0", "run.started").turn("t"));
    q.apply(
        F::new("e1", "tool.started")
            .turn("t")
            .tool("c2")
            .p("toolName", json!("fetch")),
    );
    q.apply(
        F::new("e2", "action.required")
            .turn("t")
            .action("a2")
            .tool("c2"),
    );
    q.apply(
        F::new("e3", "action.resolved")
            .turn("t")
            .action("a2")
            .p("decision", json!("approved")),
    );
    q.apply(
        F::new("e4", "tool.result")
            .turn("t")
            .tool("c2")
            .p("summary", json!("ok")),
    );
    let p = &q.state()["messages"][0]["parts"][0];
    assert_eq!(p["state"], "output-available");
    assert_eq!(p["approval"]["id"], "a2");
    q.assert_replay();
}

#[test]
fn an_ai_sdk_producers_tool_output_is_shown_as_it_sent_it() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "tool.started")
            .turn("t")
            .tool("c1")
            .p("toolName", json!("weather"))
            .p("input", json!({"city": "Oslo"})),
    );
    let part = |r: &Run| {
        r.state()["messages"][0]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["type"] == "tool-weather")
            .cloned()
            .expect("tool part")
    };
    // A preliminary output of a UI message stream is the producer's value.
    r.apply(
        F::new("e2", "tool.progress")
            .turn("t")
            .tool("c1")
            .p("preview", json!({"status": "loading"}))
            .p("verbatim", json!(true)),
    );
    let p = part(&r);
    assert_eq!(
        (p["output"].clone(), p["preliminary"].clone()),
        (json!({"status": "loading"}), json!(true))
    );
    // So is the final one, however large: the app renders its own fields.
    let big: Vec<u32> = (0..1_000).collect();
    r.apply(
        F::new("e3", "tool.result")
            .turn("t")
            .tool("c1")
            .p("output", json!({"temperature": 7, "hours": big}))
            .p("verbatim", json!(true)),
    );
    let p = part(&r);
    assert_eq!(p["output"]["temperature"], 7, "{p}");
    assert_eq!(p["output"]["hours"].as_array().map(Vec::len), Some(1_000));
    assert!(p.get("preliminary").is_none());
    // Without `verbatim` an output is a summary plus refs, as before.
    r.apply(
        F::new("e4", "tool.started")
            .turn("t")
            .tool("c2")
            .p("toolName", json!("grep")),
    );
    r.apply(
        F::new("e5", "tool.result")
            .turn("t")
            .tool("c2")
            .p("output", json!({"hits": 2})),
    );
    let grep = r.state()["messages"][0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-grep")
        .cloned()
        .unwrap();
    assert_eq!(grep["output"], json!({"summary": {"hits": 2}, "refs": []}));
    r.assert_replay();
}
