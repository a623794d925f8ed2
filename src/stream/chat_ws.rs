//! The AI SDK's `WebSocketChatTransport` protocol (`GET /v1/chat/ws`, `ai`
//! 7): many chat requests at once on one socket, each named by its
//! `requestId`. The client sends `send` (a chat request: what
//! `DefaultChatTransport` posts), `resume` (the chat's active answer,
//! replayed from its start) and `abort` (stop delivering that request);
//! the server answers each request with `start`, its UI message chunks as
//! `chunk` frames with a gapless `sequence` from 0, then `end`; or
//! `no-active` (a resume with nothing to follow), or `error` (`errorText`,
//! and this server's stable `code`). A frame that cannot be read gets an
//! `error` for its `requestId` (`""` when it has none); the socket stays.
//!
//! Frames are checked as the `ai` package's own
//! `safeValidateWebSocketChatTransportRequest` checks them; what a request
//! becomes (auth, the chat route or the runtime, the message that answers
//! it) is the caller's [`Answerer`]. Each request runs in a task of its
//! own; their frames share one bounded queue to the socket, so a slow
//! client holds its requests back rather than growing a buffer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::{SinkExt, Stream, StreamExt};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::stream::sse::SubscriberGauge;
use crate::stream::ws::{self, close, Conn};

/// An answer's UI message chunks (each one's JSON), ending after its
/// terminal chunk; ending before it means the stream was cut.
pub type Chunks = Pin<Box<dyn Stream<Item = Bytes> + Send>>;

/// Why a request was refused: a stable code and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: String,
    pub detail: String,
}

impl Refused {
    pub fn new(code: &str, detail: impl Into<String>) -> Refused {
        Refused {
            code: code.into(),
            detail: detail.into(),
        }
    }
}

/// A `send`: a chat request.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    /// The frame's `authorization` header, if it has one.
    pub authorization: Option<String>,
    /// The chat request as `DefaultChatTransport` would post it:
    /// `{...body, id, messages, trigger, messageId}`.
    pub chat: Value,
}

/// A `resume`: the chat's active answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeRequest {
    pub authorization: Option<String>,
    /// The chat (session) id.
    pub id: String,
}

/// What the server does with requests: the answer's chunks, `None` for
/// nothing to follow (`no-active`), or why not.
pub trait Answerer: Send + Sync + 'static {
    fn send(&self, r: SendRequest) -> BoxAnswer;
    fn resume(&self, r: ResumeRequest) -> BoxAnswer;
}

pub type BoxAnswer = Pin<Box<dyn Future<Output = Result<Option<Chunks>, Refused>> + Send>>;

/// One client frame, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Send {
        request_id: String,
        send: SendRequest,
    },
    Resume {
        request_id: String,
        resume: ResumeRequest,
    },
    Abort {
        request_id: String,
    },
}

/// A frame that cannot be read: its `requestId` if it has one, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub request_id: String,
    pub detail: String,
}

fn is_string_record(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| o.values().all(Value::is_string))
}

/// A non-negative safe integer (JavaScript's `Number.isSafeInteger`).
fn is_sequence(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| n < (1 << 53))
}

/// Read one client frame as `safeValidateWebSocketChatTransportRequest`
/// does (the messages of a `send` as `safeValidateUIMessages` checks their
/// shape: see [`ui_messages`]).
pub fn parse(raw: &str) -> Result<Request, Unreadable> {
    let v: Value = serde_json::from_str(raw).map_err(|e| Unreadable {
        request_id: String::new(),
        detail: format!("not JSON: {e}"),
    })?;
    let request_id = v
        .get("requestId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let bad = |detail: &str| Unreadable {
        request_id: request_id.clone(),
        detail: detail.to_string(),
    };
    let Some(o) = v.as_object() else {
        return Err(bad("a request frame is a JSON object"));
    };
    let Some(kind) = o.get("type").and_then(Value::as_str) else {
        return Err(bad("a request frame has a string `type`"));
    };
    if !o.get("requestId").is_some_and(Value::is_string) {
        return Err(bad("a request frame has a string `requestId`"));
    }
    if kind == "abort" {
        return Ok(Request::Abort { request_id });
    }
    let id = o.get("id").and_then(Value::as_str);
    let headers = o.get("headers").filter(|h| is_string_record(h));
    let body = o.get("body").and_then(Value::as_object);
    let (Some(id), Some(headers), Some(body)) = (id, headers, body) else {
        return Err(bad(
            "a send or resume frame has a string `id`, `headers` of strings and an object `body`",
        ));
    };
    let authorization = headers
        .as_object()
        .into_iter()
        .flatten()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| v.as_str())
        .map(str::to_string);
    match kind {
        "resume" => {
            if o.get("lastSequence").is_some_and(|s| !is_sequence(s)) {
                return Err(bad("`lastSequence` is a non-negative integer"));
            }
            Ok(Request::Resume {
                request_id,
                resume: ResumeRequest {
                    authorization,
                    id: id.to_string(),
                },
            })
        }
        "send" => {
            let trigger = o.get("trigger").and_then(Value::as_str);
            if !matches!(trigger, Some("submit-message" | "regenerate-message")) {
                return Err(bad("`trigger` is `submit-message` or `regenerate-message`"));
            }
            let message_id = o.get("messageId");
            if message_id.is_some_and(|m| !m.is_string()) {
                return Err(bad("`messageId` is a string when it is there"));
            }
            let messages = o.get("messages").unwrap_or(&Value::Null);
            ui_messages(messages).map_err(|why| bad(&format!("invalid UI messages: {why}")))?;
            let mut chat: Map<String, Value> = body.clone();
            chat.insert("id".into(), id.into());
            chat.insert("messages".into(), messages.clone());
            chat.insert("trigger".into(), trigger.unwrap_or_default().into());
            if let Some(m) = message_id {
                chat.insert("messageId".into(), m.clone());
            }
            Ok(Request::Send {
                request_id,
                send: SendRequest {
                    authorization,
                    chat: Value::Object(chat),
                },
            })
        }
        other => Err(bad(&format!(
            "unknown request type `{other}` (send, resume or abort)"
        ))),
    }
}

/// The shape `safeValidateUIMessages` requires of a chat's messages: a
/// non-empty array of messages, each with a string `id`, a `role` of
/// `system`, `user` or `assistant`, and a non-empty array of parts, each an
/// object with a string `type` (text and reasoning parts with a string
/// `text`, tool parts with a string `toolCallId` and `state`, file parts
/// with a string `mediaType` and `url`).
pub fn ui_messages(v: &Value) -> Result<(), String> {
    let Some(list) = v.as_array().filter(|l| !l.is_empty()) else {
        return Err("`messages` is a non-empty array".into());
    };
    for (i, m) in list.iter().enumerate() {
        let at = |what: &str| format!("messages[{i}]: {what}");
        if !m.get("id").is_some_and(Value::is_string) {
            return Err(at("a string `id`"));
        }
        let role = m.get("role").and_then(Value::as_str);
        if !matches!(role, Some("system" | "user" | "assistant")) {
            return Err(at("`role` is system, user or assistant"));
        }
        let Some(parts) = m
            .get("parts")
            .and_then(Value::as_array)
            .filter(|p| !p.is_empty())
        else {
            return Err(at("`parts` is a non-empty array"));
        };
        for (j, p) in parts.iter().enumerate() {
            part(p).map_err(|why| at(&format!("parts[{j}]: {why}")))?;
        }
    }
    Ok(())
}

fn part(p: &Value) -> Result<(), &'static str> {
    let Some(kind) = p.get("type").and_then(Value::as_str) else {
        return Err("a part has a string `type`");
    };
    let has = |k: &str| p.get(k).is_some_and(Value::is_string);
    let ok = match kind {
        "text" | "reasoning" => has("text"),
        "file" => has("mediaType") && has("url"),
        "source-url" => has("sourceId") && has("url"),
        "source-document" => has("sourceId") && has("mediaType") && has("title"),
        "dynamic-tool" => has("toolName") && has("toolCallId") && has("state"),
        k if k.starts_with("tool-") => has("toolCallId") && has("state"),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err("the part lacks a field its type requires")
    }
}

/// The server frames of one request (the request id JSON-escaped once).
#[derive(Clone)]
struct Frames {
    request_id: String,
    /// `"<request id>"`, as JSON.
    id: Bytes,
}

impl Frames {
    fn new(request_id: &str) -> Frames {
        Frames {
            request_id: request_id.to_string(),
            id: serde_json::to_vec(request_id)
                .expect("a string serialises")
                .into(),
        }
    }

    fn plain(&self, kind: &str) -> Bytes {
        let mut b = BytesMut::with_capacity(40 + self.id.len());
        b.put_slice(b"{\"type\":\"");
        b.put_slice(kind.as_bytes());
        b.put_slice(b"\",\"requestId\":");
        b.put_slice(&self.id);
        b.put_u8(b'}');
        b.freeze()
    }

    /// `{"type":"chunk","requestId":…,"sequence":n,"chunk":<chunk>}`.
    fn chunk(&self, sequence: u64, chunk: &[u8]) -> Bytes {
        let mut b = BytesMut::with_capacity(64 + self.id.len() + chunk.len());
        b.put_slice(b"{\"type\":\"chunk\",\"requestId\":");
        b.put_slice(&self.id);
        b.put_slice(b",\"sequence\":");
        b.put_slice(sequence.to_string().as_bytes());
        b.put_slice(b",\"chunk\":");
        b.put_slice(chunk);
        b.put_u8(b'}');
        b.freeze()
    }

    fn error(&self, r: &Refused) -> Bytes {
        let v = serde_json::json!({"type": "error", "requestId": self.request_id,
                                   "errorText": r.detail, "code": r.code});
        Bytes::from(v.to_string())
    }
}

/// How a connection ends and how much it may hold.
pub struct Limits {
    pub heartbeat: Duration,
    pub shutdown: CancellationToken,
    /// Requests answered at once on one socket.
    pub max_requests: usize,
}

/// Server frames waiting for the socket, from every request.
const QUEUE: usize = 64;

/// Serve a chat socket until either side ends.
pub async fn serve(conn: Conn, answerer: Arc<dyn Answerer>, limits: Limits) {
    metrics::gauge!("projector_subscribers", "transport" => "chat_ws").increment(1.0);
    let _gauge = SubscriberGauge("chat_ws");
    let mut deflater = conn.deflater;
    let (mut sink, mut incoming) = conn.socket.split();
    let (tx, rx) = mpsc::channel::<Bytes>(QUEUE);
    let mut rx = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut active: HashMap<String, (CancellationToken, JoinHandle<()>)> = HashMap::new();
    let all = CancellationToken::new();
    let _stop_all = all.clone().drop_guard();
    let mut ping = tokio::time::interval_at(
        tokio::time::Instant::now() + limits.heartbeat,
        limits.heartbeat,
    );
    let stop = limits.shutdown.cancelled_owned();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => {
                let _ = sink.send(close(1001, "server shutting down")).await;
                break;
            }
            m = incoming.next() => match m {
                Some(Ok(Message::Close(_))) => {
                    let _ = sink.close().await;
                    break;
                }
                None | Some(Err(_)) => break,
                Some(Ok(Message::Text(t))) => {
                    let refusal = take(t.as_str(), &answerer, &mut active, &all, &tx, limits.max_requests);
                    if let Some(b) = refusal {
                        if sink.send(ws::message(&b, &mut deflater)).await.is_err() {
                            break;
                        }
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    let r = Refused::new("invalid_request_frame", "send JSON text frames");
                    if sink.send(ws::message(&Frames::new("").error(&r), &mut deflater)).await.is_err() {
                        break;
                    }
                }
                Some(Ok(_)) => {}
            },
            Some(first) = rx.next() => {
                // Every frame ready now goes out in one write. (The queue
                // never ends while `tx` is held here.)
                let written = ws::write_ready(&mut sink, first, &mut rx, |b| {
                    Some(ws::message(&b, &mut deflater))
                });
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
    }
}

/// Take one client frame: start its request, or abort one; the error
/// frame to send at once when it cannot be taken.
fn take(
    raw: &str,
    answerer: &Arc<dyn Answerer>,
    active: &mut HashMap<String, (CancellationToken, JoinHandle<()>)>,
    all: &CancellationToken,
    tx: &mpsc::Sender<Bytes>,
    max: usize,
) -> Option<Bytes> {
    let request = match parse(raw) {
        Ok(r) => r,
        Err(u) => {
            let r = Refused::new("invalid_request_frame", u.detail);
            return Some(Frames::new(&u.request_id).error(&r));
        }
    };
    active.retain(|_, (_, task)| !task.is_finished());
    let (request_id, answer) = match request {
        Request::Abort { request_id } => {
            // Delivery to that request stops; the run goes on (a `cancel`
            // control stops it).
            if let Some((cancel, _)) = active.remove(&request_id) {
                cancel.cancel();
            }
            return None;
        }
        Request::Send { request_id, send } => (request_id, answerer.send(send)),
        Request::Resume { request_id, resume } => (request_id, answerer.resume(resume)),
    };
    let frames = Frames::new(&request_id);
    if active.contains_key(&request_id) {
        let r = Refused::new(
            "duplicate_request_id",
            "a request with this requestId is still being answered on this socket",
        );
        return Some(frames.error(&r));
    }
    if active.len() >= max {
        let r = Refused::new(
            "too_many_requests",
            format!("at most {max} requests are answered at once on one socket"),
        );
        return Some(frames.error(&r));
    }
    let cancel = all.child_token();
    let task = tokio::spawn(answer_request(frames, answer, tx.clone(), cancel.clone()));
    active.insert(request_id, (cancel, task));
    None
}

/// Answer one request: `start`, its chunks in sequence, `end`; or
/// `no-active`, or `error`. Stops at once when it is aborted or the socket
/// ends.
async fn answer_request(
    frames: Frames,
    answer: BoxAnswer,
    tx: mpsc::Sender<Bytes>,
    cancel: CancellationToken,
) {
    let outcome = tokio::select! {
        () = cancel.cancelled() => return,
        r = answer => r,
    };
    let send = |b: Bytes| {
        let tx = tx.clone();
        let cancel = cancel.clone();
        async move {
            tokio::select! {
                () = cancel.cancelled() => false,
                r = tx.send(b) => r.is_ok(),
            }
        }
    };
    let mut chunks = match outcome {
        Err(r) => {
            send(frames.error(&r)).await;
            return;
        }
        Ok(None) => {
            send(frames.plain("no-active")).await;
            return;
        }
        Ok(Some(c)) => c,
    };
    if !send(frames.plain("start")).await {
        return;
    }
    let mut sequence = 0u64;
    let mut finished = false;
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return,
            c = chunks.next() => c,
        };
        let Some(chunk) = next else { break };
        finished = crate::stream::ui::is_terminal(&chunk);
        if !send(frames.chunk(sequence, &chunk)).await {
            return;
        }
        sequence += 1;
        if finished {
            break;
        }
    }
    if finished {
        send(frames.plain("end")).await;
    } else {
        let r = Refused::new(
            "stream_cut",
            "the answer's stream ended before the message finished (the server is shutting down); resume it",
        );
        send(frames.error(&r)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn send_frame() -> Value {
        json!({"type": "send", "requestId": "r1", "id": "chat-1", "trigger": "submit-message",
               "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
               "headers": {"Authorization": "Bearer t"}, "body": {"model": "m"}, "metadata": null})
    }

    #[test]
    fn a_send_becomes_the_chat_request_default_chat_transport_posts() {
        let Request::Send { request_id, send } = parse(&send_frame().to_string()).unwrap() else {
            panic!("a send");
        };
        assert_eq!(request_id, "r1");
        assert_eq!(send.authorization.as_deref(), Some("Bearer t"));
        assert_eq!(
            send.chat,
            json!({"model": "m", "id": "chat-1", "trigger": "submit-message",
                   "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
        );
    }

    #[test]
    fn bad_frames_are_refused_with_their_request_id() {
        let mut cases = vec![
            (json!([1]), ""),
            (json!({"requestId": "a"}), "a"),
            (json!({"type": "abort"}), ""),
            (
                json!({"type": "resume", "requestId": "b", "id": "c", "headers": {}, "body": {}, "lastSequence": -1}),
                "b",
            ),
            (
                json!({"type": "resume", "requestId": "b", "id": "c", "headers": {"x": 1}, "body": {}}),
                "b",
            ),
            (
                json!({"type": "dance", "requestId": "d", "id": "c", "headers": {}, "body": {}}),
                "d",
            ),
        ];
        for (k, v) in [
            ("trigger", json!("resubmit")),
            ("messageId", Value::Null),
            ("messages", json!([])),
            (
                "messages",
                json!([{"id": "u", "role": "robot", "parts": [{"type": "text", "text": "x"}]}]),
            ),
            (
                "messages",
                json!([{"id": "u", "role": "user", "parts": []}]),
            ),
            (
                "messages",
                json!([{"id": "u", "role": "user", "parts": [{"type": "text"}]}]),
            ),
        ] {
            let mut f = send_frame();
            f[k] = v;
            cases.push((f, "r1"));
        }
        for (frame, id) in cases {
            let err = parse(&frame.to_string()).unwrap_err();
            assert_eq!(err.request_id, id, "{frame}");
        }
        assert!(parse("{").is_err());
    }

    #[test]
    fn server_frames_are_the_transports_shapes() {
        let f = Frames::new("r\"1");
        let v: Value =
            serde_json::from_slice(&f.chunk(3, br#"{"type":"text-delta","id":"t","delta":"x"}"#))
                .unwrap();
        assert_eq!(
            v,
            json!({"type": "chunk", "requestId": "r\"1", "sequence": 3,
                   "chunk": {"type": "text-delta", "id": "t", "delta": "x"}})
        );
        let v: Value = serde_json::from_slice(&f.plain("no-active")).unwrap();
        assert_eq!(v, json!({"type": "no-active", "requestId": "r\"1"}));
        let v: Value =
            serde_json::from_slice(&f.error(&Refused::new("invalid_token", "no \"good\"")))
                .unwrap();
        assert_eq!(
            v,
            json!({"type": "error", "requestId": "r\"1", "errorText": "no \"good\"", "code": "invalid_token"})
        );
    }
}
