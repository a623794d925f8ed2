//! The live session index (`GET /v1/sessions/stream`): its snapshot, the
//! created / updated / deleted changes, resumption from an index cursor and
//! the reset rules, the WebSocket form, and a session named `stream`.

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::common::{Sse, TestServer, WAIT};

async fn index(srv: &TestServer, last_event_id: Option<&str>) -> Sse {
    let mut req = srv.http.get(srv.url("/v1/sessions/stream"));
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    Sse::from_response(r)
}

async fn post(srv: &TestServer, session: &str, body: Value) {
    let (st, b) = srv.post(session, &body).await;
    assert_eq!(st, 200, "{b}");
}

#[tokio::test]
async fn the_index_lists_sessions_then_follows_their_changes() {
    let srv = TestServer::builder().start().await;
    post(&srv, "old", json!({"type": "run.started", "runId": "r"})).await;
    post(&srv, "new", json!({"type": "run.started", "runId": "r"})).await;
    let mut sse = index(&srv, None).await;
    let snap = sse.next().await.unwrap();
    assert_eq!(snap.event, "snapshot");
    let ids: Vec<&str> = snap.data["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(snap.data["sessions"][0]["status"], "running");
    let epoch = snap.data["epoch"].as_str().unwrap().to_string();
    assert_eq!(snap.id.as_deref(), Some(format!("{epoch}:2").as_str()));
    // A new session, an update with a title and a pending action, a deletion.
    post(&srv, "s", json!({"type": "run.started", "runId": "r"})).await;
    post(
        &srv,
        "s",
        json!([
            {"type": "session.updated", "payload": {"title": "Nightly"}},
            {"type": "action.required", "runId": "r", "actionId": "a1", "payload": {"title": "Deploy?"}}
        ]),
    )
    .await;
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/old"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let evs = sse.take(3).await;
    let kinds: Vec<(&str, &str)> = evs
        .iter()
        .map(|e| {
            assert_eq!(e.event, "session");
            (
                e.data["type"].as_str().unwrap(),
                e.data["session"]["sessionId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![("created", "s"), ("updated", "s"), ("deleted", "old")]
    );
    let upd = &evs[1].data["session"];
    assert_eq!(upd["title"], "Nightly");
    assert_eq!(upd["pendingActions"], 1);
    assert_eq!(upd["head"], 3, "the unread cursor");
    assert_eq!(evs[2].id.as_deref(), Some(format!("{epoch}:5").as_str()));
    // Resume after the first change: the two after it, no snapshot.
    let mut again = index(&srv, Some(&format!("{epoch}:3"))).await;
    let evs = again.take(2).await;
    let cursors: Vec<u64> = evs
        .iter()
        .map(|e| e.data["cursor"].as_u64().unwrap())
        .collect();
    assert_eq!(cursors, vec![4, 5]);
    // Another epoch (a restart) or a cursor ahead: reset, then a fresh snapshot.
    for stale in ["0123456789abcdef:1".to_string(), format!("{epoch}:99")] {
        let mut s = index(&srv, Some(&stale)).await;
        let evs = s.take(2).await;
        assert_eq!(evs[0].event, "reset");
        assert!(
            ["epoch_mismatch", "cursor_ahead"].contains(&evs[0].data["reason"].as_str().unwrap())
        );
        assert_eq!(evs[1].event, "snapshot");
        let ids: Vec<&str> = evs[1].data["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            vec!["s", "new"],
            "most recently updated first, deleted ones gone"
        );
    }
    let r = srv
        .http
        .get(srv.url("/v1/sessions/stream?cursor=x:y"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn a_short_buffer_resets_an_old_cursor() {
    let srv = TestServer::builder()
        .config(|c| c.stream.index_buffer = 2)
        .start()
        .await;
    let mut sse = index(&srv, None).await;
    let epoch = sse.next().await.unwrap().data["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..4 {
        post(
            &srv,
            &format!("s{i}"),
            json!({"type": "run.started", "runId": "r"}),
        )
        .await;
    }
    sse.take(4).await;
    let mut s = index(&srv, Some(&format!("{epoch}:1"))).await;
    let evs = s.take(2).await;
    assert_eq!(
        (evs[0].event.as_str(), &evs[0].data["reason"]),
        ("reset", &json!("cursor_expired"))
    );
    assert_eq!(evs[1].data["sessions"].as_array().unwrap().len(), 4);
    let mut s = index(&srv, Some(&format!("{epoch}:2"))).await;
    assert_eq!(
        s.next().await.unwrap().data["cursor"],
        3,
        "3 and 4 are kept"
    );
}

#[tokio::test]
async fn the_index_is_also_a_websocket() {
    let srv = TestServer::builder().start().await;
    post(&srv, "a", json!({"type": "run.started", "runId": "r"})).await;
    let url = format!("ws://{}/v1/sessions/stream", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut next = async || loop {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(t) = m {
            return serde_json::from_str::<Value>(&t).unwrap();
        }
    };
    let snap = next().await;
    assert_eq!(snap["type"], "snapshot");
    assert_eq!(snap["sessions"][0]["sessionId"], "a");
    post(&srv, "b", json!({"type": "run.started", "runId": "r"})).await;
    let ev = next().await;
    assert_eq!(
        (ev["type"].clone(), ev["session"]["sessionId"].clone()),
        (json!("created"), json!("b"))
    );
}

#[tokio::test]
async fn a_session_named_stream_keeps_its_own_paths() {
    let srv = TestServer::builder().start().await;
    post(&srv, "stream", json!({"type": "run.started", "runId": "r"})).await;
    assert_eq!(srv.snapshot("stream").await["cursor"], 1);
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["sessionId"], "stream");
}

#[tokio::test]
async fn a_teammates_session_names_its_parent_in_the_index() {
    let srv = TestServer::builder().start().await;
    // The coordinator registers its teammate (lineage to itself: not a parent).
    post(
        &srv,
        "coord",
        json!({"type": "agent.spawned", "agentId": "researcher", "parentSessionId": "coord"}),
    )
    .await;
    // The teammate's own session says who spawned it.
    post(
        &srv,
        "coord-research",
        json!({"type": "agent.spawned", "agentId": "researcher", "parentSessionId": "coord"}),
    )
    .await;
    let mut sse = index(&srv, None).await;
    let snap = sse.next().await.unwrap();
    let by: std::collections::HashMap<&str, &Value> = snap.data["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sessionId"].as_str().unwrap(), s))
        .collect();
    assert_eq!(by["coord-research"]["parentSessionId"], "coord");
    assert_eq!(by["coord-research"]["agentId"], "researcher");
    assert!(
        by["coord"].get("parentSessionId").is_none(),
        "{}",
        by["coord"]
    );
    let (_, page) = srv.get_json("/v1/sessions").await;
    let listed = page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == "coord-research")
        .unwrap()
        .clone();
    assert_eq!(listed["parentSessionId"], "coord");
}
