//! Many sessions on one connection (docs/STREAMS.md): the SSE id that holds
//! every session's position and resumes each from its own cursor, the reset
//! rules per session, the limits and bad input, and the WebSocket with
//! subscribe / unsubscribe.

use std::collections::HashMap;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::common::{Sse, SseEvent, TestServer, WAIT};

fn text(session: &str, i: usize) -> Value {
    json!({"id": format!("{session}-{i}"), "type": "text.delta", "runId": "r", "messageId": "m", "payload": {"delta": format!("{session}{i} ")}})
}

/// Post events `from..to` of `session` as one batch.
pub(crate) async fn feed(srv: &TestServer, session: &str, from: usize, to: usize) {
    let batch: Vec<Value> = (from..to).map(|i| text(session, i)).collect();
    let (st, body) = srv.post(session, &json!(batch)).await;
    assert_eq!(st, 200, "{body}");
}

async fn open(srv: &TestServer, query: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let mut req = srv.http.get(srv.url(&format!("/v1/streams{query}")));
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    req.send().await.unwrap()
}

async fn mux(srv: &TestServer, query: &str, last_event_id: Option<&str>) -> Sse {
    let r = open(srv, query, last_event_id).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    Sse::from_response(r)
}

/// Read until every session reached its cursor; the cursors seen per session.
async fn until(sse: &mut Sse, want: &[(&str, u64)]) -> (HashMap<String, Vec<u64>>, Vec<SseEvent>) {
    let mut seen: HashMap<String, Vec<u64>> = HashMap::new();
    let mut all = Vec::new();
    let done = |seen: &HashMap<String, Vec<u64>>| {
        want.iter()
            .all(|(s, c)| seen.get(*s).and_then(|v| v.last()) == Some(c))
    };
    while !done(&seen) {
        let ev = sse.next().await.expect("stream ended early");
        let s = ev.data["sessionId"].as_str().unwrap().to_string();
        if let Some(c) = ev.data["cursor"].as_u64() {
            seen.entry(s).or_default().push(c);
        }
        all.push(ev);
    }
    (seen, all)
}

#[tokio::test]
async fn frames_of_many_sessions_carry_their_session_and_every_position() {
    let srv = TestServer::builder().start().await;
    feed(&srv, "a", 0, 2).await;
    feed(&srv, "b", 0, 3).await;
    let mut sse = mux(&srv, "?sessions=a,b,c", None).await;
    // A snapshot of each session first, in any order.
    let snaps = sse.take(3).await;
    let mut by: HashMap<String, &SseEvent> = HashMap::new();
    for e in &snaps {
        assert_eq!(e.event, "snapshot");
        assert_eq!(e.data["type"], "snapshot");
        by.insert(e.data["sessionId"].as_str().unwrap().into(), e);
    }
    assert_eq!(by["a"].data["cursor"], 2);
    assert_eq!(by["b"].data["cursor"], 3);
    assert_eq!(by["c"].data["cursor"], 0);
    let epoch = |s: &str| by[s].data["epoch"].as_str().unwrap().to_string();
    // The last id names all three positions, in the order of `sessions`.
    let last = snaps.last().unwrap().id.clone().unwrap();
    assert_eq!(
        last,
        format!("{}:2,{}:3,{}:0", epoch("a"), epoch("b"), epoch("c"))
    );
    // Live frames of each session, each once, in its cursor order.
    feed(&srv, "c", 0, 2).await;
    feed(&srv, "a", 2, 4).await;
    let (seen, evs) = until(&mut sse, &[("a", 4), ("c", 2)]).await;
    assert_eq!(seen["a"], vec![3, 4]);
    assert_eq!(seen["c"], vec![1, 2]);
    assert!(evs.iter().all(|e| e.event == "delta"));
    assert_eq!(
        evs.last().unwrap().id.clone().unwrap(),
        format!("{}:4,{}:3,{}:2", epoch("a"), epoch("b"), epoch("c"))
    );
    // The chunks are the session's own.
    let a3 = evs.iter().find(|e| e.data["sessionId"] == "a").unwrap();
    assert_eq!(
        a3.data["chunks"].as_array().unwrap().last().unwrap()["chunk"]["delta"],
        "a2 "
    );
}

#[tokio::test]
async fn last_event_id_resumes_each_session_from_its_own_cursor() {
    let srv = TestServer::builder().start().await;
    for s in ["a", "b", "c"] {
        feed(&srv, s, 0, 3).await;
    }
    let mut sse = mux(&srv, "?sessions=a,b,c", None).await;
    let snaps = sse.take(3).await;
    let id = snaps.last().unwrap().id.clone().unwrap();
    drop(sse);
    // While nobody listens, each session moves on by a different amount.
    feed(&srv, "a", 3, 4).await;
    feed(&srv, "c", 3, 8).await;
    let mut sse = mux(&srv, "?sessions=a,b,c", Some(&id)).await;
    feed(&srv, "b", 3, 5).await;
    let (seen, evs) = until(&mut sse, &[("a", 4), ("b", 5), ("c", 8)]).await;
    assert_eq!(seen["a"], vec![4]);
    assert_eq!(seen["b"], vec![4, 5]);
    assert_eq!(seen["c"], vec![4, 5, 6, 7, 8]);
    assert!(
        evs.iter().all(|e| e.event == "delta"),
        "no snapshot on resume"
    );
    // `?cursor=` takes the same id (for clients that cannot set headers),
    // and an empty position starts that session with a snapshot.
    let (ea, ec) = {
        let e = |s: &str| {
            snaps
                .iter()
                .find(|e| e.data["sessionId"] == s)
                .unwrap()
                .data["epoch"]
                .as_str()
                .unwrap()
                .to_string()
        };
        (e("a"), e("c"))
    };
    let q = format!("?sessions=a,b,c&cursor={ea}:3,,{ec}:7");
    let mut sse = mux(&srv, &q, None).await;
    let (seen, evs) = until(&mut sse, &[("a", 4), ("b", 5), ("c", 8)]).await;
    assert_eq!(seen["a"], vec![4]);
    assert_eq!(seen["b"], vec![5], "b starts with its snapshot at 5");
    assert_eq!(seen["c"], vec![8]);
    let b: Vec<&str> = evs
        .iter()
        .filter(|e| e.data["sessionId"] == "b")
        .map(|e| e.event.as_str())
        .collect();
    assert_eq!(b, vec!["snapshot"]);
}

#[tokio::test]
async fn a_session_that_cannot_resume_is_reset_alone() {
    let srv = TestServer::builder().start().await;
    feed(&srv, "a", 0, 2).await;
    feed(&srv, "b", 0, 2).await;
    let mut sse = mux(&srv, "?sessions=a,b", None).await;
    let id = sse.take(2).await.last().unwrap().id.clone().unwrap();
    drop(sse);
    let r = srv
        .http
        .delete(srv.url("/v1/sessions/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    feed(&srv, "b", 2, 3).await;
    let mut sse = mux(&srv, "?sessions=a,b", Some(&id)).await;
    let evs = sse.take(3).await;
    let a: Vec<(&str, &Value)> = evs
        .iter()
        .filter(|e| e.data["sessionId"] == "a")
        .map(|e| (e.event.as_str(), &e.data))
        .collect();
    assert_eq!(a.len(), 2, "{evs:?}");
    assert_eq!(a[0].0, "reset");
    assert_eq!(a[0].1["reason"], "session_deleted");
    assert_eq!(a[1].0, "snapshot");
    let b: Vec<&SseEvent> = evs.iter().filter(|e| e.data["sessionId"] == "b").collect();
    assert_eq!(b.len(), 1);
    assert_eq!(
        (b[0].event.as_str(), &b[0].data["cursor"]),
        ("delta", &json!(3))
    );
    // The reset has no id; the id after the new snapshot names a's new epoch.
    let reset = evs.iter().find(|e| e.event == "reset").unwrap();
    assert_eq!(reset.id, None);
    let snap = evs.iter().find(|e| e.event == "snapshot").unwrap();
    let new_epoch = snap.data["epoch"].as_str().unwrap();
    assert!(snap
        .id
        .clone()
        .unwrap()
        .starts_with(&format!("{new_epoch}:")));
}

#[tokio::test]
async fn bad_session_lists_and_cursors_are_refused_with_their_code() {
    let srv = TestServer::builder()
        .config(|c| c.limits.max_sessions_per_stream = 3)
        .start()
        .await;
    let cases = [
        ("", "invalid_sessions"),
        ("?sessions=", "invalid_sessions"),
        ("?sessions=a,a", "invalid_sessions"),
        ("?sessions=a,,b", "invalid_session_id"),
        ("?sessions=a,b%20c", "invalid_session_id"),
        ("?sessions=a,b,c,d", "too_many_sessions"),
        ("?sessions=a,b&cursor=e:1", "invalid_cursor"),
        ("?sessions=a,b&cursor=e:1,x:-2", "invalid_cursor"),
        ("?sessions=a&cursor=e:%2B1", "invalid_cursor"),
    ];
    for (q, code) in cases {
        let r = open(&srv, q, None).await;
        assert_eq!(r.status(), 400, "{q}");
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        let p: Value = r.json().await.unwrap();
        assert_eq!(p["code"], code, "{q}: {p}");
    }
    // A comma inside an id travels percent-encoded.
    feed(&srv, "x,y", 0, 1).await;
    let mut sse = mux(&srv, "?sessions=x%2Cy,z", None).await;
    let evs = sse.take(2).await;
    let ids: Vec<&str> = evs
        .iter()
        .map(|e| e.data["sessionId"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"x,y") && ids.contains(&"z"), "{ids:?}");
}

#[tokio::test]
async fn each_session_counts_against_the_subscriber_limits() {
    let srv = TestServer::builder()
        .config(|c| c.limits.max_subscribers_per_session = 1)
        .start()
        .await;
    let _held = mux(&srv, "?sessions=b", None).await;
    let r = open(&srv, "?sessions=a,b", None).await;
    assert_eq!(r.status(), 429);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "too_many_subscribers");
    assert!(p["detail"].as_str().unwrap().contains("`b`"), "{p}");
    // The refused request held no slot of `a`.
    let _a = mux(&srv, "?sessions=a", None).await;
}

/// The next text message of a socket, as JSON.
pub(crate) async fn next_json(
    ws: &mut (impl StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin),
) -> Value {
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a message in time")
            .expect("socket open")
            .unwrap();
        if let Message::Text(t) = msg {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

#[tokio::test]
async fn a_websocket_subscribes_and_unsubscribes_as_it_goes() {
    let srv = TestServer::builder()
        .config(|c| c.limits.max_sessions_per_stream = 2)
        .start()
        .await;
    feed(&srv, "a", 0, 2).await;
    feed(&srv, "b", 0, 2).await;
    let url = format!("ws://{}/v1/streams/ws?sessions=a", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type": "subscribed", "sessionId": "a"})
    );
    let snap = next_json(&mut ws).await;
    assert_eq!(
        (
            snap["sessionId"].clone(),
            snap["type"].clone(),
            snap["cursor"].clone()
        ),
        (json!("a"), json!("snapshot"), json!(2))
    );
    assert_eq!(
        next_json(&mut ws).await,
        json!({"sessionId": "a", "type": "live", "cursor": 2})
    );
    let epoch_b = srv.snapshot("b").await["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    // b from its cursor 1: only what follows it.
    let sub = json!({"type": "subscribe", "sessionId": "b", "cursor": format!("{epoch_b}:1")});
    ws.send(Message::Text(sub.to_string().into()))
        .await
        .unwrap();
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type": "subscribed", "sessionId": "b"})
    );
    let d = next_json(&mut ws).await;
    assert_eq!(
        (
            d["sessionId"].clone(),
            d["type"].clone(),
            d["cursor"].clone()
        ),
        (json!("b"), json!("delta"), json!(2))
    );
    assert_eq!(
        next_json(&mut ws).await,
        json!({"sessionId": "b", "type": "live", "cursor": 2})
    );
    // A third session is over the limit; bad messages are answered, and
    // the connection stays.
    let sub = json!({"type": "subscribe", "sessionId": "c"});
    ws.send(Message::Text(sub.to_string().into()))
        .await
        .unwrap();
    let e = next_json(&mut ws).await;
    assert_eq!(
        (e["type"].clone(), e["sessionId"].clone(), e["code"].clone()),
        (json!("error"), json!("c"), json!("too_many_sessions"))
    );
    ws.send(Message::Text("{\"type\":\"dance\"}".into()))
        .await
        .unwrap();
    assert_eq!(next_json(&mut ws).await["code"], "invalid_message");
    let sub = json!({"type": "subscribe", "sessionId": "a", "cursor": "nope"});
    ws.send(Message::Text(sub.to_string().into()))
        .await
        .unwrap();
    assert_eq!(next_json(&mut ws).await["code"], "invalid_cursor");
    // After unsubscribing a, only b's frames come.
    let unsub = json!({"type": "unsubscribe", "sessionId": "a"});
    ws.send(Message::Text(unsub.to_string().into()))
        .await
        .unwrap();
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type": "unsubscribed", "sessionId": "a"})
    );
    feed(&srv, "a", 2, 3).await;
    feed(&srv, "b", 2, 3).await;
    let d = next_json(&mut ws).await;
    assert_eq!(
        (d["sessionId"].clone(), d["cursor"].clone()),
        (json!("b"), json!(3))
    );
    ws.close(None).await.unwrap();
}

/// The frames of every followed session that are ready together go out
/// together (a replay of two sessions, then live batches): none is lost,
/// repeated or reordered within its session.
#[tokio::test]
async fn a_websocket_burst_of_two_sessions_keeps_every_frame_in_order() {
    let srv = TestServer::builder().start().await;
    let n = 300;
    for s in ["a", "b"] {
        feed(&srv, s, 0, n).await;
    }
    let url = format!("ws://{}/v1/streams/ws", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    for s in ["a", "b"] {
        let epoch = srv.snapshot(s).await["epoch"].as_str().unwrap().to_string();
        let sub = json!({"type": "subscribe", "sessionId": s, "cursor": format!("{epoch}:0")});
        ws.send(Message::Text(sub.to_string().into()))
            .await
            .unwrap();
    }
    // Live frames while the replay may still be going out.
    for k in 0..4 {
        for s in ["a", "b"] {
            feed(&srv, s, n + k * 50, n + (k + 1) * 50).await;
        }
    }
    let last = (n + 200) as u64;
    let mut seen: HashMap<String, Vec<u64>> = HashMap::new();
    let done = |seen: &HashMap<String, Vec<u64>>| {
        ["a", "b"]
            .iter()
            .all(|s| seen.get(*s).and_then(|v| v.last()) == Some(&last))
    };
    while !done(&seen) {
        let m = next_json(&mut ws).await;
        if m["type"] == "delta" {
            let s = m["sessionId"].as_str().unwrap().to_string();
            seen.entry(s)
                .or_default()
                .push(m["cursor"].as_u64().unwrap());
        }
    }
    let want: Vec<u64> = (1..=last).collect();
    assert_eq!(seen["a"], want);
    assert_eq!(seen["b"], want);
}
