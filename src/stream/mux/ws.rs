//! The multiplexed WebSocket (`GET /v1/streams/ws`): the client sends
//! `subscribe` / `unsubscribe` messages, the server sends each subscribed
//! session's frames with `sessionId`, and `subscribed`, `unsubscribed` and
//! `error` messages. The frames ready together, of any session, go out in
//! one write. Whether a subscription is allowed (auth, limits, the cursor)
//! is the caller's [`Admit`]; this loop only keeps the set.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio_stream::StreamMap;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::{Frames, Member};
use crate::stream::sse::SubscriberGauge;
use crate::stream::ws::{self, close, Conn};

/// What a client may send.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum ClientMessage {
    Subscribe {
        #[serde(rename = "sessionId")]
        session_id: String,
        cursor: Option<String>,
    },
    Unsubscribe {
        #[serde(rename = "sessionId")]
        session_id: String,
    },
}

/// A subscription refused: its stable code and why.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: String,
    pub detail: String,
}

/// Decides whether a session may be subscribed to (given how many the
/// connection already follows) and opens its frames.
pub trait Admit: Send + 'static {
    fn admit(
        &mut self,
        session: &str,
        cursor: Option<&str>,
        held: usize,
    ) -> Result<Frames, Refusal>;
}

/// How the connection ends.
pub struct Limits {
    pub heartbeat: Duration,
    pub shutdown: CancellationToken,
    /// The caller's token expiry (seconds since the Unix epoch).
    pub exp: Option<u64>,
}

fn text(v: serde_json::Value) -> Bytes {
    Bytes::from(v.to_string())
}

fn refused(session: Option<&str>, r: &Refusal) -> Bytes {
    text(serde_json::json!({
        "type": "error",
        "sessionId": session,
        "code": r.code,
        "detail": r.detail,
    }))
}

/// Serve a multiplexed socket until either side ends; `initial` are the
/// subscriptions of the URL (`?sessions=`), already admitted.
pub async fn serve(
    conn: Conn,
    mut admit: impl Admit,
    initial: Vec<(Member, Frames)>,
    limits: Limits,
) {
    metrics::gauge!("projector_subscribers", "transport" => "ws").increment(1.0);
    let _gauge = SubscriberGauge("ws");
    let mut deflater = conn.deflater;
    let (mut sink, mut incoming) = conn.socket.split();
    let mut members: HashMap<Arc<str>, Member> = HashMap::new();
    let mut map: StreamMap<Arc<str>, Frames> = StreamMap::new();
    for (m, frames) in initial {
        if sink
            .send(ws::message(&subscribed("subscribed", &m.id), &mut deflater))
            .await
            .is_err()
        {
            return;
        }
        map.insert(m.id.clone(), frames);
        members.insert(m.id.clone(), m);
    }
    let mut ping = tokio::time::interval_at(
        tokio::time::Instant::now() + limits.heartbeat,
        limits.heartbeat,
    );
    let stop = limits.shutdown.cancelled_owned();
    tokio::pin!(stop);
    let expiry = crate::stream::expiry::deadline(limits.exp);
    tokio::pin!(expiry);
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => {
                let _ = sink.send(close(1001, "server shutting down")).await;
                break;
            }
            _ = &mut expiry => {
                let bye = crate::frame::reset("token_expired");
                for m in members.values() {
                    if sink.send(ws::message(&m.json(&bye), &mut deflater)).await.is_err() {
                        return;
                    }
                }
                let _ = sink.send(close(1008, "token expired")).await;
                break;
            }
            m = incoming.next() => match m {
                Some(Ok(Message::Close(_))) => {
                    let _ = sink.close().await;
                    break;
                }
                None | Some(Err(_)) => break,
                Some(Ok(Message::Text(t))) => {
                    let reply = handle(t.as_str(), &mut admit, &mut members, &mut map);
                    for r in reply {
                        if sink.send(ws::message(&r, &mut deflater)).await.is_err() {
                            return;
                        }
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    let r = Refusal { code: "invalid_message".into(), detail: "send JSON text messages".into() };
                    if sink.send(ws::message(&refused(None, &r), &mut deflater)).await.is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
            },
            Some(first) = map.next(), if !map.is_empty() => {
                // Every frame ready now, of any session, goes out in one write.
                let written = ws::write_ready(&mut sink, first, &mut map, |(id, f)| {
                    let m = members.get(&id)?;
                    crate::stream::delivered(f.born);
                    Some(ws::message(&m.json(&f), &mut deflater))
                });
                // `map` holds no ended stream (`StreamMap` drops them): it
                // ends only when empty, which the check below handles.
                if written.await.is_err() {
                    break;
                }
            }
            _ = ping.tick() => {
                if sink.send(ws::heartbeat_ping(&mut deflater)).await.is_err() {
                    break;
                }
            }
        }
        // A session whose frames ended (shutdown or a store failure) is no
        // longer followed: say so, so that the client subscribes again.
        if map.len() < members.len() {
            let gone: Vec<Arc<str>> = members
                .keys()
                .filter(|k| !map.contains_key(*k))
                .cloned()
                .collect();
            for id in gone {
                members.remove(&id);
                if sink
                    .send(ws::message(&subscribed("unsubscribed", &id), &mut deflater))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

fn subscribed(kind: &str, id: &str) -> Bytes {
    text(serde_json::json!({"type": kind, "sessionId": id}))
}

/// Apply one client message; the messages to send back, in order.
fn handle(
    raw: &str,
    admit: &mut impl Admit,
    members: &mut HashMap<Arc<str>, Member>,
    map: &mut StreamMap<Arc<str>, Frames>,
) -> Vec<Bytes> {
    let msg: ClientMessage = match serde_json::from_str(raw) {
        Ok(m) => m,
        Err(e) => {
            let r = Refusal {
                code: "invalid_message".into(),
                detail: format!(
                    "expected {{\"type\":\"subscribe\"|\"unsubscribe\",\"sessionId\":...}}: {e}"
                ),
            };
            return vec![refused(None, &r)];
        }
    };
    match msg {
        ClientMessage::Subscribe { session_id, cursor } => {
            let held = members.len() - usize::from(members.contains_key(session_id.as_str()));
            // A subscription again restarts the session: its old stream
            // (and its subscriber slot) goes before the new one is admitted.
            map.remove(session_id.as_str());
            members.remove(session_id.as_str());
            match admit.admit(&session_id, cursor.as_deref(), held) {
                Ok(frames) => {
                    let m = Member::new(&session_id);
                    map.insert(m.id.clone(), frames);
                    members.insert(m.id.clone(), m);
                    vec![subscribed("subscribed", &session_id)]
                }
                Err(r) => vec![refused(Some(&session_id), &r)],
            }
        }
        ClientMessage::Unsubscribe { session_id } => {
            map.remove(session_id.as_str());
            members.remove(session_id.as_str());
            vec![subscribed("unsubscribed", &session_id)]
        }
    }
}
