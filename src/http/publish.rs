//! The streaming ingest, `/v1/sessions/{session_id}/publish`, for a
//! producer at token rate: one long-lived request carries many events, and
//! each append is acknowledged as soon as it is durable, so the producer
//! pays the per-request cost once.
//! - `POST` with an NDJSON body (chunked, one event per line) answers `200`
//!   at once with NDJSON: an `ack` per append (`{type, from, to, accepted,
//!   duplicates, cursor, warnings?}`: lines `from..=to` are in the log), then
//!   `end` (`{type, lines, accepted, duplicates, cursor, epoch}`) when the
//!   body ends, or `error` (`{type, index, problem}`) at the first line that
//!   cannot be appended, after which nothing more is read. A client that
//!   reads the answer only once its body is sent (HTTP/1.1 clients that
//!   are not full duplex) gets the acks merged into ranges, never a reading
//!   that stalls on them.
//! - `GET` is the same over a WebSocket: each text message is one or more
//!   lines; each answer is a text message (`ack`, or `error` before a close).
//!
//! What arrives while an append is being made durable goes into the next
//! one (one batch per append, all or none); see `publisher`. What a stream
//! holds of lines not yet appended is charged to the body budget
//! (`limits.max_inflight_body_bytes`), as a whole body's length is.

use axum::body::Body;
use axum::extract::State;
use std::convert::Infallible;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::limits::BodyHold;
use super::ws_upgrade::WsUpgrade;
use super::{AppState, SessionId};
use crate::stream::ws::{self, close, Conn};

mod publisher;

use publisher::{end_line, Ack, Publisher, Stop};

pub(super) fn router() -> axum::Router<AppState> {
    axum::Router::new().route(
        "/v1/sessions/{session_id}/publish",
        post(post_publish).get(ws_publish),
    )
}

/// Acks waiting for a reader before they merge into ranges.
const ACKS_QUEUED: usize = 16;
/// Messages of a socket taken into one append at most.
const MESSAGES_PER_APPEND: usize = 256;
/// Bytes of a body read into one append at most (a line may be longer).
const APPEND_BYTES: usize = 256 * 1024;

/// Publish events as they come: NDJSON in, NDJSON acks out.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/publish",
    tag = "ingest",
    params(("session_id" = String, Path, description = "Session id")),
    request_body(
        content = String,
        description = "NDJSON, one event per line (as `POST .../events` takes them, AG-UI events too), sent as it is produced (chunked); blank lines are skipped (a producer may send one to keep an idle body within `limits.body_timeout_secs`)",
        content_type = "application/x-ndjson"
    ),
    responses(
        (status = 200, description = "NDJSON, streamed: `{\"type\":\"ack\",\"from\",\"to\",\"accepted\",\"duplicates\",\"cursor\",\"warnings\"?}` once lines `from..=to` are durable; then `{\"type\":\"end\",\"lines\",\"accepted\",\"duplicates\",\"cursor\",\"epoch\"}` at the end of the body, or `{\"type\":\"error\",\"index\",\"problem\"}` (a problem+json object with its `status` and `code`) at the first line that cannot be appended; nothing after it is", content_type = "application/x-ndjson", body = String),
        (status = 401, description = "Missing, invalid or expired token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not publish to this session", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not NDJSON", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_publish(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    caller.require(Scope::Publish, Some(&session.0))?;
    ndjson(&headers)?;
    let key = super::ingest::idempotency_key(&headers);
    let publisher = Publisher::new(st.clone(), caller, session.0, key);
    let (tx, rx) = mpsc::channel::<Bytes>(ACKS_QUEUED);
    tokio::spawn(read_body(st, publisher, body, tx));
    let acks = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    Ok(crate::stream::sse::streamed(acks, "application/x-ndjson"))
}

/// The body must be NDJSON (or say nothing of its type).
fn ndjson(headers: &HeaderMap) -> Result<(), Problem> {
    let Some(ct) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    match ct.split(';').next().unwrap_or("").trim() {
        "application/x-ndjson" | "application/ndjson" | "application/jsonl"
        | "application/x-jsonlines" | "application/jsonlines" | "" => Ok(()),
        other => Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Unsupported media type",
            format!("content type `{other}` is not accepted here; send application/x-ndjson, one event per line"),
        )),
    }
}

/// Read the body's lines into the session, answering on `tx`.
async fn read_body(st: AppState, mut p: Publisher, body: Body, tx: mpsc::Sender<Bytes>) {
    let max_line = st.cfg.ingest.max_body_bytes;
    let mut data = crate::gateway::read_ahead(body.into_data_stream());
    let mut buf = BytesMut::new();
    // What `buf` holds is charged to the body budget, as a whole body's
    // length is; an idle stream holds nothing.
    let mut hold = st.limits.body_hold();
    // Acks the reader has not taken yet, merged.
    let mut pending: Option<Ack> = None;
    let last = loop {
        let next = tokio::select! {
            permit = tx.reserve(), if pending.is_some() => {
                match permit {
                    Ok(permit) => permit.send(pending.take().map(|a| a.line()).unwrap_or_default()),
                    Err(_) => return,
                }
                continue;
            }
            _ = tx.closed() => return,
            _ = st.shutdown.cancelled() => break Some(Stop::new(None, &Problem::unavailable(
                "shutting_down",
                "the server is shutting down; publish again from the last acknowledged line",
            )).line),
            n = tokio::time::timeout(st.limits.body_timeout, data.recv()) => n,
        };
        let chunk = match next {
            Err(_) => break Some(Stop::new(None, &Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                "Body timeout",
                "no data within limits.body_timeout_secs; send a blank line to keep an idle body open",
            )).line),
            Ok(None) => None,
            // The producer went away: what was acknowledged stands.
            Ok(Some(Err(_))) => return,
            Ok(Some(Ok(b))) => Some(b),
        };
        let Some(chunk) = chunk else {
            // The end of the body: its last line may have no newline.
            let (ack, stop) = p.lines(&buf).await;
            merge(&mut pending, ack);
            break stop.map(|s| s.line).or_else(|| Some(end_line(&p)));
        };
        buf.extend_from_slice(&chunk);
        // Whatever else has come is appended with it.
        let mut cut_off = false;
        while buf.len() < APPEND_BYTES {
            match data.try_recv() {
                Ok(Ok(more)) => buf.extend_from_slice(&more),
                Ok(Err(_)) => {
                    cut_off = true;
                    break;
                }
                Err(_) => break,
            }
        }
        if let Err(e) = hold.hold(buf.len()) {
            break Some(Stop::new(None, &e).line);
        }
        let Some(cut) = buf.iter().rposition(|b| *b == b'\n') else {
            if buf.len() > max_line {
                break Some(
                    Stop::new(
                        None,
                        &Problem::payload_too_large(
                            "line_too_large",
                            format!("a line is longer than ingest.max_body_bytes ({max_line})"),
                        ),
                    )
                    .line,
                );
            }
            if cut_off {
                return;
            }
            continue;
        };
        let complete = buf.split_to(cut + 1);
        let (ack, stop) = p.lines(&complete).await;
        drop(complete);
        // Fewer bytes: never refused.
        let _ = hold.hold(buf.len());
        merge(&mut pending, ack);
        if let Some(s) = stop {
            break Some(s.line);
        }
        if cut_off {
            // The producer went away: the whole lines it sent stand.
            return;
        }
    };
    // The reader is owed the rest: it may read only once its body is sent.
    for line in pending.map(|a| a.line()).into_iter().chain(last) {
        if tx.send(line).await.is_err() {
            return;
        }
    }
}

fn merge(pending: &mut Option<Ack>, ack: Option<Ack>) {
    match (pending.as_mut(), ack) {
        (Some(p), Some(a)) => p.merge(a),
        (None, a) => *pending = a,
        (_, None) => {}
    }
}

/// Publish events as they come over a WebSocket.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/publish",
    tag = "ingest",
    params(("session_id" = String, Path, description = "Session id")),
    responses(
        (status = 101, description = "Switching to WebSocket: each text message is one or more NDJSON lines (one event each); each answer is a text message, `{\"type\":\"ack\",\"from\",\"to\",\"accepted\",\"duplicates\",\"cursor\",\"warnings\"?}` once lines `from..=to` (numbered from 0 over the connection) are durable, or `{\"type\":\"error\",\"index\",\"problem\"}` at the first line that cannot be appended, then a close (1008 for a refused line, 1013 when the store cannot write: publish again from the last acknowledged line)"),
        (status = 400, description = "Not a WebSocket handshake (`websocket_upgrade_required`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, invalid or expired token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not publish to this session", body = Problem, content_type = "application/problem+json"),
        (status = 426, description = "A WebSocket handshake of a version other than 13", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn ws_publish(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    upgrade: Result<WsUpgrade, Problem>,
) -> Result<Response, Problem> {
    caller.require(Scope::Publish, Some(&session.0))?;
    let upgrade = upgrade?;
    let publisher = Publisher::new(st.clone(), caller, session.0, None);
    let max = st.cfg.ingest.max_body_bytes;
    let (heartbeat, shutdown) = (st.heartbeat(), st.shutdown.clone());
    let hold = st.limits.body_hold();
    Ok(upgrade.max_message(max).serve(&st, move |conn| {
        serve_socket(conn, publisher, hold, heartbeat, shutdown)
    }))
}

/// The publish socket's loop. The messages of one append are charged to
/// the body budget while they are appended (`hold`).
async fn serve_socket(
    conn: Conn,
    mut p: Publisher,
    mut hold: BodyHold,
    heartbeat: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut deflater = conn.deflater;
    let (mut sink, mut incoming) = conn.socket.split();
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = sink.send(close(1001, "server shutting down")).await;
                return;
            }
            _ = ping.tick() => {
                if sink.send(ws::heartbeat_ping(&mut deflater)).await.is_err() {
                    return;
                }
                continue;
            }
            m = incoming.next() => m,
        };
        let mut text = match first {
            Some(Ok(Message::Text(t))) => BytesMut::from(t.as_bytes()),
            Some(Ok(Message::Binary(b))) => BytesMut::from(&b[..]),
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                let _ = sink.close().await;
                return;
            }
            Some(Ok(_)) => continue,
        };
        // The messages that have come meanwhile go into the same append.
        let mut closing = false;
        for _ in 1..MESSAGES_PER_APPEND {
            match incoming.next().now_or_never() {
                Some(Some(Ok(Message::Text(t)))) => join(&mut text, t.as_bytes()),
                Some(Some(Ok(Message::Binary(b)))) => join(&mut text, &b),
                Some(Some(Ok(Message::Close(_)) | Err(_)) | None) => {
                    closing = true;
                    break;
                }
                Some(Some(Ok(_))) => {}
                None => break,
            }
        }
        let (ack, stop) = match hold.hold(text.len()) {
            Ok(()) => p.lines(&text).await,
            Err(e) => (None, Some(Stop::new(None, &e))),
        };
        drop(text);
        let _ = hold.hold(0);
        if let Some(a) = ack {
            if sink
                .send(ws::message(&a.line(), &mut deflater))
                .await
                .is_err()
            {
                return;
            }
        }
        if let Some(s) = stop {
            let _ = sink.send(ws::message(&s.line, &mut deflater)).await;
            let code = if s.status >= 500 {
                close(
                    1013,
                    "try again later; publish from the last acknowledged line",
                )
            } else {
                close(1008, "a line was refused")
            };
            let _ = sink.send(code).await;
            return;
        }
        if closing {
            let _ = sink.close().await;
            return;
        }
    }
}

/// Append message `more` to `text` as lines of their own.
fn join(text: &mut BytesMut, more: &[u8]) {
    text.extend_from_slice(b"\n");
    text.extend_from_slice(more);
}
