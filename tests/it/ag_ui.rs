//! Issue 15 item 1 over HTTP: AG-UI events (`@ag-ui/core` 1.0) posted as
//! JSON, NDJSON or an SSE body project like the session's own facts; what
//! cannot be projected is kept and said in the reply, never silent.

use serde_json::{json, Value};

use crate::common::TestServer;

fn codes(reply: &Value) -> Vec<(u64, String)> {
    reply["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|x| {
                    (
                        x["index"].as_u64().unwrap_or(0),
                        x["code"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A LangGraph-like run: a user's question, text, a tool call streamed in
/// pieces and its result, state, an activity, reasoning, a final text.
fn run() -> Vec<Value> {
    vec![
        json!({"type": "RUN_STARTED", "threadId": "th", "runId": "r1", "timestamp": 1764064800000u64,
               "input": {"threadId": "th", "runId": "r1", "state": {}, "tools": [], "context": [],
                         "forwardedProps": {},
                         "messages": [{"id": "u1", "role": "user", "content": "Weather in Oslo?"}]}}),
        json!({"type": "STEP_STARTED", "stepName": "agent"}),
        json!({"type": "REASONING_START", "messageId": "rs1"}),
        json!({"type": "REASONING_MESSAGE_START", "messageId": "rs1", "role": "reasoning"}),
        json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "rs1", "delta": "Use the tool."}),
        json!({"type": "REASONING_MESSAGE_END", "messageId": "rs1"}),
        json!({"type": "REASONING_END", "messageId": "rs1"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Let me "}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "check. "}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
        json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "weather", "parentMessageId": "m1"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"city\":"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "\"Oslo\"}"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "c1"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "tm1", "toolCallId": "c1", "content": "{\"temp\":7}", "role": "tool"}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"city": "Oslo", "steps": []}}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/steps/-", "value": "fetched"}]}),
        json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "a1", "activityType": "PLAN", "content": {"done": 0, "of": 2}}),
        json!({"type": "ACTIVITY_DELTA", "messageId": "a1", "activityType": "PLAN", "patch": [{"op": "replace", "path": "/done", "value": 2}]}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "role": "assistant", "delta": "It is "}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "delta": "7 degrees."}),
        json!({"type": "STEP_FINISHED", "stepName": "agent"}),
        json!({"type": "CUSTOM", "name": "on_interrupt", "value": {"x": 1}}),
        json!({"type": "RUN_FINISHED", "threadId": "th", "runId": "r1"}),
    ]
}

fn text(m: &Value) -> String {
    m["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["text"].as_str().unwrap())
        .collect()
}

/// What every body of `run()` must have projected in session `sid`.
async fn assert_projected(srv: &TestServer, sid: &str) {
    let snap = srv.snapshot(sid).await;
    let s = &snap["state"];
    let ms = s["messages"].as_array().unwrap();
    let ids: Vec<&str> = ms.iter().map(|m| m["id"].as_str().unwrap()).collect();
    // AG-UI reasoning is a message of its own.
    assert_eq!(ids, ["u1", "rs1", "m1", "m2"], "{s}");
    assert_eq!(
        (ms[0]["role"].as_str(), text(&ms[0])),
        (Some("user"), "Weather in Oslo?".into())
    );
    assert_eq!(ms[1]["parts"][0]["type"], "reasoning");
    assert_eq!(ms[1]["parts"][0]["text"], "Use the tool.");
    let ms = &ms[1..];
    assert_eq!(text(&ms[1]), "Let me check. ");
    let parts = ms[1]["parts"].as_array().unwrap();
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-weather")
        .expect("tool part");
    assert_eq!(tool["input"], json!({"city": "Oslo"}));
    assert_eq!(tool["state"], "output-available");
    assert_eq!(
        tool["output"], "{\"temp\":7}",
        "the tool's content as it sent it"
    );
    let activity = parts
        .iter()
        .find(|p| p["type"] == "data-activity")
        .expect("activity part");
    assert_eq!(activity["id"], "a1");
    assert_eq!(
        activity["data"],
        json!({"activityType": "PLAN", "content": {"done": 2, "of": 2}})
    );
    assert_eq!(
        text(&ms[2]),
        "It is 7 degrees.",
        "a chunk without an id continues"
    );
    assert_eq!(s["app"], json!({"city": "Oslo", "steps": ["fetched"]}));
    assert_eq!(s["runtime"]["status"], "completed");
    assert_eq!(s["runtime"]["runId"], "r1");
    assert_eq!(s["tools"]["c1"]["status"], "completed");
    assert_eq!(
        s["messages"][0]["metadata"]["createdAt"], "2025-11-25T10:00:00.000Z",
        "AG-UI timestamps are the producer's time"
    );
}

#[tokio::test]
async fn ag_ui_events_as_json_project_and_what_is_not_projected_is_said() {
    let srv = TestServer::builder().start().await;
    let mut events = run();
    events.insert(3, json!({"type": "some.unknown.class"}));
    let (status, v) = srv.post("ag-json", &json!(events)).await;
    assert_eq!(status, 200, "{v}");
    let said = codes(&v);
    assert!(said.contains(&(3, "unknown_event_class".into())), "{v}");
    assert!(
        said.contains(&(24, "ag_ui_not_projected".into())),
        "CUSTOM is kept and said: {v}"
    );
    assert_projected(&srv, "ag-json").await;
    let timeline = srv.get_json("/v1/sessions/ag-json/events").await.1;
    assert!(
        timeline.to_string().contains("ag-ui.custom"),
        "the CUSTOM event is kept in the log"
    );
}

#[tokio::test]
async fn ag_ui_events_as_ndjson_and_as_an_sse_body_project_the_same() {
    let srv = TestServer::builder().start().await;
    let nd: String = run().iter().map(|e| format!("{e}\n")).collect();
    let r = srv
        .post_raw("ag-nd", "application/x-ndjson", nd.into_bytes())
        .await;
    assert_eq!(r.status(), 200);
    assert_projected(&srv, "ag-nd").await;
    // The SSE body @ag-ui/encoder writes: `data: <event>` blocks.
    let sse: String = run().iter().map(|e| format!("data: {e}\n\n")).collect();
    let r = srv
        .post_raw("ag-sse", "text/event-stream", sse.into_bytes())
        .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(
        codes(&v).iter().any(|(_, c)| c == "ag_ui_not_projected"),
        "{v}"
    );
    assert_projected(&srv, "ag-sse").await;
}

#[tokio::test]
async fn a_user_message_and_a_tool_told_twice_are_one_fact() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv.post("ag-twice", &json!(run())).await;
    assert_eq!(status, 200, "{v}");
    // LangGraph ends with the whole conversation: nothing is told twice.
    let (status, v) = srv
        .post(
            "ag-twice",
            &json!({"type": "MESSAGES_SNAPSHOT", "messages": [
                {"id": "u1", "role": "user", "content": "Weather in Oslo?"},
                {"id": "m1", "role": "assistant", "content": "Let me check. ",
                 "toolCalls": [{"id": "c1", "type": "function",
                                "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                {"id": "tm1", "role": "tool", "toolCallId": "c1", "content": "{\"temp\":7}"},
                {"id": "m2", "role": "assistant", "content": "It is 7 degrees."},
                {"id": "u2", "role": "user", "content": "Thanks!"}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["duplicates"], 3,
        "user u1, the call's input and result: {v}"
    );
    let snap = srv.snapshot("ag-twice").await;
    let ms = snap["state"]["messages"].as_array().unwrap();
    let ids: Vec<&str> = ms.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["u1", "rs1", "m1", "m2", "u2"],
        "only the new user message is added"
    );
    assert_eq!(text(&ms[2]), "Let me check. ");
    assert_eq!(text(&ms[3]), "It is 7 degrees.");
}

#[tokio::test]
async fn an_interrupt_is_a_pending_action_and_the_run_waits() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "ag-int",
            &json!([
                {"type": "RUN_STARTED", "threadId": "th", "runId": "r1"},
                {"type": "TOOL_CALL_START", "toolCallId": "c9", "toolCallName": "deploy"},
                {"type": "TOOL_CALL_END", "toolCallId": "c9"},
                {"type": "RUN_FINISHED", "threadId": "th", "runId": "r1",
                 "outcome": {"type": "interrupt", "interrupts": [
                    {"id": "int-1", "reason": "tool_approval", "toolCallId": "c9",
                     "message": "Deploy to production?"},
                    {"id": "int-2", "reason": "input_required", "message": "Which region?",
                     "responseSchema": {"type": "object", "properties": {"region": {"type": "string"}}}}
                 ]}}
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let s = srv.snapshot("ag-int").await["state"].clone();
    assert_eq!(s["runtime"]["status"], "waiting", "{}", s["runtime"]);
    assert_eq!(s["runtime"]["pendingActions"], 2);
    let a = &s["actions"]["int-1"];
    assert_eq!(
        (a["status"].as_str(), a["question"].as_str()),
        (Some("pending"), Some("Deploy to production?")),
        "{a}"
    );
    let b = &s["actions"]["int-2"];
    assert_eq!(b["schema"]["properties"]["region"]["type"], "string", "{b}");
    let tool = s["messages"][0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-deploy")
        .cloned()
        .unwrap();
    assert_eq!(tool["state"], "approval-requested", "{tool}");
    assert_eq!(tool["approval"]["id"], "int-1");
}

#[tokio::test]
async fn a_cut_ag_ui_stream_ends_its_run_as_interrupted_and_bad_events_are_said() {
    let srv = TestServer::builder().start().await;
    let events = [
        json!({"type": "RUN_STARTED", "threadId": "th", "runId": "r1"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "delta": "no id"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Half an ans"}),
    ];
    // The body ends without RUN_FINISHED: the producer went away.
    let sse: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    let r = srv
        .post_raw("ag-cut", "text/event-stream", sse.into_bytes())
        .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let said = codes(&v);
    assert!(said.contains(&(1, "invalid_ag_ui_event".into())), "{v}");
    assert!(
        said.iter().any(|(_, c)| c == "ui_stream_interrupted"),
        "{v}"
    );
    let s = srv.snapshot("ag-cut").await["state"].clone();
    assert_eq!(s["runtime"]["status"], "interrupted");
    assert_eq!(s["messages"][0]["status"], "aborted");
    assert_eq!(text(&s["messages"][0]), "Half an ans", "what arrived stays");
}

/// `GET .../ag-ui` as an AG-UI client reads it.
async fn ag_ui_stream(srv: &TestServer, sid: &str, last: Option<&str>) -> crate::common::Sse {
    let mut req = srv.http.get(srv.url(&format!("/v1/sessions/{sid}/ag-ui")));
    if let Some(l) = last {
        req = req.header("last-event-id", l);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    crate::common::Sse::from_response(r)
}

#[tokio::test]
async fn the_ag_ui_stream_starts_with_the_snapshot_and_goes_on_live_with_cursor_ids() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv.post("ag-out", &json!(run()[..16])).await;
    assert_eq!(status, 200, "{v}");
    let mut s = ag_ui_stream(&srv, "ag-out", None).await;
    let head = s.take(3).await;
    let types: Vec<&str> = head
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"],
        "a run is going on"
    );
    let epoch = v["epoch"].as_str().unwrap();
    let at = format!("{epoch}:{}", v["cursor"]);
    assert!(
        head.iter().all(|e| e.id.as_deref() == Some(at.as_str())),
        "{head:?}"
    );
    assert_eq!(head[0].data["runId"], "r1");
    assert_eq!(
        head[0].data["threadId"], "ag-out",
        "the session is the AG-UI thread"
    );
    let ms = head[1].data["messages"].as_array().unwrap();
    let roles: Vec<&str> = ms.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "reasoning", "assistant", "tool"], "{ms:?}");
    assert_eq!(
        ms[2]["toolCalls"][0]["function"]["arguments"],
        "{\"city\":\"Oslo\"}"
    );
    assert_eq!(ms[3]["content"], "{\"temp\":7}");
    // Live: the rest of the run, each event with its frame's cursor.
    let (_, v2) = srv.post("ag-out", &json!(run()[16..])).await;
    let mut live = Vec::new();
    loop {
        let e = s.next().await.expect("the run goes on");
        let done = e.data["type"] == "RUN_FINISHED";
        live.push(e);
        if done {
            break;
        }
    }
    let last = live.last().unwrap();
    assert_eq!(
        last.id.as_deref(),
        Some(format!("{epoch}:{}", v2["cursor"]).as_str())
    );
    let types: Vec<&str> = live
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"STATE_SNAPSHOT") && types.contains(&"ACTIVITY_SNAPSHOT"),
        "{types:?}"
    );
    let text: String = live
        .iter()
        .filter(|e| e.data["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e.data["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "It is 7 degrees.");
    // A malformed Last-Event-ID is refused like on the session stream.
    let r = srv
        .http
        .get(srv.url("/v1/sessions/ag-out/ag-ui"))
        .header("last-event-id", "not a cursor")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn a_deleted_session_starts_over_on_the_ag_ui_stream_and_pending_actions_are_interrupts() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "ag-del",
            &json!([
                {"type": "RUN_STARTED", "threadId": "th", "runId": "r1"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Deploy?"},
                {"type": "RUN_FINISHED", "threadId": "th", "runId": "r1",
                 "outcome": {"type": "interrupt", "interrupts": [
                     {"id": "int-1", "reason": "confirm", "message": "Deploy now?"}]}}
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let mut s = ag_ui_stream(&srv, "ag-del", None).await;
    let head = s.take(4).await;
    let end = &head[3].data;
    assert_eq!(end["type"], "RUN_FINISHED", "{head:?}");
    assert_eq!(end["outcome"]["type"], "interrupt");
    assert_eq!(end["outcome"]["interrupts"][0]["id"], "int-1");
    assert_eq!(end["outcome"]["interrupts"][0]["message"], "Deploy now?");
    // The session is deleted: the client gets the empty session as a new run.
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/ag-del"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let again = s.take(4).await;
    let types: Vec<&str> = again
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "MESSAGES_SNAPSHOT",
            "STATE_SNAPSHOT",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(again[1].data["messages"], json!([]));
}

#[tokio::test]
async fn the_ag_ui_gateway_says_what_is_missing() {
    let srv = TestServer::builder().start().await;
    let post = |body: Value| {
        srv.http
            .post(srv.url("/v1/sessions/ag-gw/ag-ui"))
            .json(&body)
            .send()
    };
    let r = post(json!({"threadId": "ag-gw", "messages": []}))
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "invalid_run_input");
    let r = post(json!({"threadId": "ag-gw", "runId": "r1", "messages": [],
                        "state": {}, "tools": [], "context": [], "forwardedProps": {}}))
    .await
    .unwrap();
    assert_eq!(r.status(), 409);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "no_upstream");
    assert_eq!(
        srv.snapshot("ag-gw").await["cursor"],
        0,
        "nothing was recorded"
    );
}

#[tokio::test]
async fn a_tool_call_streaming_across_a_reconnection_opens_again_with_its_name() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "ag-tool",
            &json!([
                {"type": "RUN_STARTED", "threadId": "th", "runId": "r1"},
                {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search", "parentMessageId": "m1"},
                {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"q\":"}
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let mut s = ag_ui_stream(&srv, "ag-tool", None).await;
    let head = s.take(3).await;
    assert_eq!(head[2].data["type"], "STATE_SNAPSHOT");
    srv.post(
        "ag-tool",
        &json!([{"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "\"rust\"}"},
                {"type": "TOOL_CALL_END", "toolCallId": "c1"}]),
    )
    .await;
    let next = s.take(2).await;
    assert_eq!(next[0].data["type"], "TOOL_CALL_START");
    assert_eq!(
        next[0].data["toolCallName"], "search",
        "the call opens again with its name: {next:?}"
    );
    assert_eq!(next[1].data["type"], "TOOL_CALL_ARGS");
}

/// The types of the events of `s` up to and including the first `until`.
async fn types_until(s: &mut crate::common::Sse, until: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let e = s.next().await.expect("the stream goes on");
        let done = e.data["type"] == until;
        out.push(e.data);
        if done {
            return out;
        }
    }
}

#[tokio::test]
async fn a_resume_from_a_cursor_in_the_log_sends_only_what_came_after_it() {
    let srv = TestServer::builder().start().await;
    let (status, v) = srv
        .post(
            "ag-res",
            &json!([
                {"type": "RUN_STARTED", "threadId": "th", "runId": "r1"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Let me "},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "look."},
                {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search", "parentMessageId": "m1"},
                {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"q\":"}
            ]),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let epoch = v["epoch"].as_str().unwrap().to_string();
    // Resumed after the first text: the run, the message and nothing of the
    // snapshot; the text it missed once; the call under the segment.
    srv.post(
        "ag-res",
        &json!([{"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "\"rust\"}"},
                {"type": "TOOL_CALL_END", "toolCallId": "c1"},
                {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "ok"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Found."},
                {"type": "RUN_FINISHED", "threadId": "th", "runId": "r1"}]),
    )
    .await;
    let mut s = ag_ui_stream(&srv, "ag-res", Some(&format!("{epoch}:2"))).await;
    let got = types_until(&mut s, "RUN_FINISHED").await;
    let types: Vec<&str> = got.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ],
        "{got:?}"
    );
    assert_eq!(got[0]["runId"], "r1");
    assert_eq!(got[1]["messageId"], "m1");
    assert_eq!(got[2]["delta"], "look.");
    assert_eq!(got[4]["parentMessageId"], "m1");
    assert_eq!(
        got[9]["messageId"], "m1:1",
        "the text after the call is a segment of its own"
    );
    assert!(got.iter().all(|e| e["timestamp"].is_u64()), "{got:?}");
    // `?cursor=` is the same as the header; resumed after the call began,
    // the call opens again with its name and no arguments.
    let r = srv
        .http
        .get(srv.url(&format!("/v1/sessions/ag-res/ag-ui?cursor={epoch}:5")))
        .send()
        .await
        .unwrap();
    let mut s = crate::common::Sse::from_response(r);
    let got = types_until(&mut s, "RUN_FINISHED").await;
    assert_eq!(got[0]["type"], "RUN_STARTED");
    assert_eq!(got[1]["type"], "TOOL_CALL_START");
    assert_eq!(got[1]["toolCallName"], "search");
    assert_eq!(got[2]["type"], "TOOL_CALL_ARGS");
    assert_eq!(got[2]["delta"], "\"rust\"}");
    // A cursor the log cannot honour starts from the snapshot: another
    // epoch, or ahead of the head.
    for last in ["0123456789abcdef:2".to_string(), format!("{epoch}:99")] {
        let mut s = ag_ui_stream(&srv, "ag-res", Some(&last)).await;
        let head = s.take(2).await;
        assert_eq!(
            head[1].data["type"], "MESSAGES_SNAPSHOT",
            "{last}: {head:?}"
        );
    }
    // At the head of a finished run: nothing to send until something happens.
    let mut s = ag_ui_stream(&srv, "ag-res", Some(&format!("{epoch}:10"))).await;
    srv.post(
        "ag-res",
        &json!({"type": "RUN_STARTED", "threadId": "th", "runId": "r2"}),
    )
    .await;
    let first = s.take(1).await;
    assert_eq!(first[0].data["type"], "RUN_STARTED");
    assert_eq!(first[0].data["runId"], "r2");
}

#[tokio::test]
async fn a_resume_past_the_read_limit_starts_from_the_snapshot() {
    let srv = TestServer::builder()
        .config(|c| c.stream.ag_ui_resume_events = 3)
        .start()
        .await;
    let (_, v) = srv
        .post(
            "ag-lim",
            &json!([
                {"type": "RUN_STARTED", "threadId": "th", "runId": "r1"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "c"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "d"}
            ]),
        )
        .await;
    let epoch = v["epoch"].as_str().unwrap();
    // Three events to read: resumed.
    let mut s = ag_ui_stream(&srv, "ag-lim", Some(&format!("{epoch}:3"))).await;
    let head = s.take(3).await;
    assert_eq!(head[1].data["type"], "TEXT_MESSAGE_START", "{head:?}");
    assert_eq!(head[2].data["delta"], "c");
    // Four: from the snapshot.
    let mut s = ag_ui_stream(&srv, "ag-lim", Some(&format!("{epoch}:4"))).await;
    let head = s.take(2).await;
    assert_eq!(head[1].data["type"], "MESSAGES_SNAPSHOT", "{head:?}");
}
