//! Message history over HTTP: the snapshot window, paging older messages in
//! with `before` / `nextBefore`, the AI SDK `UIMessage` and Umo Editor
//! formats, and the errors.

use serde_json::{json, Value};

use crate::common::TestServer;

/// Six turns: a user message and an assistant answer each (12 messages).
fn turns() -> Value {
    let mut evs = Vec::new();
    for i in 0..6 {
        let t = format!("t{i}");
        evs.push(json!({"id": format!("u{i}"), "type": "turn.submitted", "turnId": t, "payload": {"text": format!("question {i}")}}));
        evs.push(json!({"id": format!("d{i}"), "type": "text.delta", "turnId": t, "messageId": format!("a{i}"), "payload": {"delta": format!("**answer** {i}")}}));
        evs.push(json!({"id": format!("f{i}"), "type": "run.finished", "turnId": t}));
    }
    Value::Array(evs)
}

fn ids(page: &Value) -> Vec<String> {
    page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn snapshot_window_and_paging_older_messages_in() {
    let srv = TestServer::builder()
        .config(|c| c.projection.snapshot_messages = 4)
        .start()
        .await;
    let (st, _) = srv.post("h", &turns()).await;
    assert_eq!(st, 200);
    let snap = srv.snapshot("h").await;
    let state = &snap["state"];
    let in_snap: Vec<&str> = state["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(in_snap, ["user-t4", "a4", "user-t5", "a5"]);
    assert_eq!(
        state["history"],
        json!({"messages": 12, "inSnapshot": 4, "nextBefore": "user-t4"})
    );
    assert_eq!(
        state["runtime"]["status"], "completed",
        "run status is whole"
    );

    // Page in from the snapshot's nextBefore until the oldest page.
    let mut before = state["history"]["nextBefore"].as_str().unwrap().to_string();
    let mut all: Vec<String> = Vec::new();
    loop {
        let (st, page) = srv
            .get_json(&format!("/v1/sessions/h/messages?before={before}&limit=5"))
            .await;
        assert_eq!(st, 200, "{page}");
        assert_eq!(page["total"], 12);
        let mut got = ids(&page);
        got.append(&mut all);
        all = got;
        match page["nextBefore"].as_str() {
            Some(b) => before = b.to_string(),
            None => break,
        }
    }
    assert_eq!(all.len(), 8);
    assert_eq!(all[0], "user-t0");
    assert_eq!(all[7], "a3");

    // The newest page without `before`; a UIMessage keeps our fields in metadata.
    let (_, page) = srv.get_json("/v1/sessions/h/messages?limit=2").await;
    assert_eq!(ids(&page), ["user-t5", "a5"]);
    assert_eq!(page["nextBefore"], "user-t5");
    assert_eq!(page["format"], "ui");
    assert_eq!(
        page["messages"][1],
        json!({"id": "a5", "role": "assistant",
               "parts": [{"type": "text", "text": "**answer** 5", "state": "done"}],
               "metadata": {"status": "complete", "createdCursor": 17, "turnId": "t5"}})
    );
}

#[tokio::test]
async fn umo_format_and_errors() {
    let srv = TestServer::builder().start().await;
    let evs = json!([
        {"id": "u", "type": "turn.submitted", "turnId": "t", "payload": {"text": "Summarise", "attachments": [
            {"type": "document", "url": "https://files.test/a.pdf", "mediaType": "application/pdf"},
            {"type": "business_object", "objectType": "campaign", "objectId": "42", "name": "Q3"}]}},
        {"id": "r", "type": "reasoning.summary", "turnId": "t", "payload": {"summary": "Read it"}},
        {"id": "s", "type": "tool.started", "turnId": "t", "toolCallId": "c1", "payload": {"toolName": "search", "input": {"q": "x"}}},
        {"id": "o", "type": "tool.result", "turnId": "t", "toolCallId": "c1", "payload": {"summary": "2 hits"}},
        {"id": "e", "type": "evidence.changed", "turnId": "t", "evidenceId": "v1", "payload": {"title": "Spec", "verdict": "supported"}},
        {"id": "d", "type": "text.delta", "turnId": "t", "payload": {"delta": "Done."}},
        {"id": "x", "type": "runtime.error", "turnId": "t", "payload": {"message": "provider hiccup"}},
        {"id": "f", "type": "run.finished", "turnId": "t"}
    ]);
    let (st, out) = srv.post("u", &evs).await;
    assert_eq!(st, 200, "{out}");
    let (st, page) = srv.get_json("/v1/sessions/u/messages?format=umo").await;
    assert_eq!(st, 200, "{page}");
    assert_eq!(page["format"], "umo");
    let user = &page["messages"][0];
    assert_eq!(user["role"], "user");
    assert_eq!(user["status"], "complete");
    assert_eq!(
        user["content"][0],
        json!({"type": "text", "data": "Summarise"})
    );
    assert_eq!(user["content"][1]["type"], "attachment");
    assert_eq!(user["content"][1]["data"][0]["fileType"], "pdf");
    assert_eq!(user["content"][1]["data"][1]["isReference"], true);
    let ai = &page["messages"][1];
    assert_eq!(ai["status"], "complete");
    let types: Vec<&str> = ai["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["reasoning", "toolcall", "search", "markdown"]);
    assert_eq!(ai["content"][1]["data"]["toolCallName"], "search");
    assert_eq!(ai["content"][1]["status"], "complete");
    assert_eq!(ai["content"][2]["data"]["references"][0]["title"], "Spec");
    assert!(
        !page.to_string().contains("provider hiccup"),
        "diagnostics stay out"
    );

    let (st, p) = srv.get_json("/v1/sessions/u/messages?before=nope").await;
    assert_eq!((st, p["status"].as_u64()), (404, Some(404)));
    let (st, _) = srv.get_json("/v1/sessions/u/messages?format=html").await;
    assert_eq!(st, 400);
    let (st, _) = srv.get_json("/v1/sessions/u/messages?limit=abc").await;
    assert_eq!(st, 400);
    // A session with no events has no messages.
    let (st, p) = srv.get_json("/v1/sessions/none/messages").await;
    assert_eq!(
        (st, p["messages"].clone(), p["total"].clone()),
        (200, json!([]), json!(0))
    );
}
