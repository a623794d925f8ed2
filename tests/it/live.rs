//! The live boundary (docs/FRAMES.md): every session stream says, once,
//! where its replay ended, with `{"type":"live","cursor":N}` and no SSE id;
//! on SSE, WebSocket, the multiplexed streams (per session) and the Umo
//! view; also on a stream that opens at the head.

use futures_util::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::mux::{feed, next_json};

use crate::common::TestServer;

#[tokio::test]
async fn sse_says_where_the_replay_ends_whatever_the_start() {
    let srv = TestServer::builder().start().await;
    feed(&srv, "s", 0, 5).await;
    // From a cursor: the 3 deltas after it, then live at the head.
    let mut sse = srv.sse("s", "?cursor=2", None).await;
    let got: Vec<u64> = sse
        .take(3)
        .await
        .iter()
        .map(|e| e.data["cursor"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [3, 4, 5]);
    // What comes next is live: the boundary was read before it.
    feed(&srv, "s", 5, 6).await;
    let next = sse.next().await.unwrap();
    assert_eq!(next.data["cursor"], 6);
    assert_eq!(sse.live(), Some((3, 5)));
    // Fresh: the snapshot is the history.
    let mut sse = srv.sse("s", "", None).await;
    assert_eq!(sse.next().await.unwrap().event, "snapshot");
    feed(&srv, "s", 6, 7).await;
    assert_eq!(sse.next().await.unwrap().data["cursor"], 7);
    assert_eq!(sse.live(), Some((1, 6)));
    // At the head, by Last-Event-ID: nothing replayed, live at once.
    let epoch = srv.snapshot("s").await["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = srv
        .http
        .get(srv.url("/v1/sessions/s/stream"))
        .header("last-event-id", format!("{epoch}:7"))
        .send()
        .await
        .unwrap();
    let mut sse = crate::common::Sse::from_response(resp);
    let first = sse.next_any().await.unwrap();
    assert_eq!(first.event, "live");
    assert_eq!(first.id, None);
    assert_eq!(first.data, json!({"type": "live", "cursor": 7}));
    // The raw bytes: no id line before it (it never becomes a resume point).
    let resp = srv
        .http
        .get(srv.url("/v1/sessions/s/stream?cursor=7"))
        .send()
        .await
        .unwrap();
    let mut raw = crate::common::Sse::from_response(resp);
    let text = raw.raw_until("\"type\":\"live\"").await;
    assert!(
        text.contains("\n\nevent: live\ndata: {\"type\":\"live\",\"cursor\":7}"),
        "{text:?}"
    );
}

#[tokio::test]
async fn the_umo_view_passes_the_boundary_on() {
    let srv = TestServer::builder().start().await;
    feed(&srv, "s", 0, 3).await;
    let mut sse = srv.sse("s", "?format=umo", None).await;
    assert_eq!(sse.next().await.unwrap().event, "snapshot");
    feed(&srv, "s", 3, 4).await;
    assert_eq!(sse.next().await.unwrap().data["cursor"], 4);
    assert_eq!(sse.live(), Some((1, 3)));
}

#[tokio::test]
async fn websocket_says_where_the_replay_ends() {
    let srv = TestServer::builder().start().await;
    feed(&srv, "s", 0, 4).await;
    let url = format!("ws://{}/v1/sessions/s/ws?cursor=1", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    for c in 2..=4 {
        assert_eq!(next_json(&mut ws).await["cursor"], c);
    }
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type": "live", "cursor": 4})
    );
    feed(&srv, "s", 4, 5).await;
    assert_eq!(next_json(&mut ws).await["cursor"], 5);
    // Fresh: snapshot, then live at its cursor.
    let url = format!("ws://{}/v1/sessions/s/ws", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    assert_eq!(next_json(&mut ws).await["type"], "snapshot");
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type": "live", "cursor": 5})
    );
}

#[tokio::test]
async fn multiplexed_streams_say_it_per_session() {
    let srv = TestServer::builder().start().await;
    feed(&srv, "a", 0, 3).await;
    feed(&srv, "b", 0, 2).await;
    let epoch_a = srv.snapshot("a").await["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    // SSE: a from its cursor 1, b fresh.
    let resp = srv
        .http
        .get(srv.url(&format!("/v1/streams?sessions=a,b&cursor={epoch_a}:1,")))
        .send()
        .await
        .unwrap();
    let mut sse = crate::common::Sse::from_response(resp);
    let mut lives = Vec::new();
    let mut seen_before: Vec<(String, Vec<u64>)> = Vec::new();
    while lives.len() < 2 {
        let ev = sse.next_any().await.expect("stream ended early");
        let s = ev.data["sessionId"].as_str().unwrap().to_string();
        if ev.event == "live" {
            assert_eq!(ev.id, None);
            lives.push(ev.data.clone());
            continue;
        }
        assert!(
            !lives.iter().any(|l| l["sessionId"] == s.as_str()),
            "{s}'s history after its live frame: {:?}",
            ev.data
        );
        match seen_before.iter_mut().find(|(x, _)| *x == s) {
            Some((_, v)) => v.push(ev.data["cursor"].as_u64().unwrap()),
            None => seen_before.push((s, vec![ev.data["cursor"].as_u64().unwrap()])),
        }
    }
    seen_before.sort();
    assert_eq!(
        seen_before,
        [("a".to_string(), vec![2, 3]), ("b".to_string(), vec![2])]
    );
    lives.sort_by_key(|l| l["sessionId"].as_str().unwrap().to_string());
    assert_eq!(
        lives,
        [
            json!({"sessionId": "a", "type": "live", "cursor": 3}),
            json!({"sessionId": "b", "type": "live", "cursor": 2})
        ]
    );
    // WebSocket: each subscription says it for its session.
    let url = format!("ws://{}/v1/streams/ws?sessions=a", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");
    assert_eq!(next_json(&mut ws).await["type"], "snapshot");
    assert_eq!(
        next_json(&mut ws).await,
        json!({"sessionId": "a", "type": "live", "cursor": 3})
    );
    let sub = json!({"type": "subscribe", "sessionId": "b", "cursor": "1"});
    ws.send(Message::Text(sub.to_string().into()))
        .await
        .unwrap();
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");
    assert_eq!(next_json(&mut ws).await["cursor"], 2);
    assert_eq!(
        next_json(&mut ws).await,
        json!({"sessionId": "b", "type": "live", "cursor": 2})
    );
}
