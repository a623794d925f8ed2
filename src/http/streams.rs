//! Stream endpoints: SSE (`GET .../stream`) and WebSocket (`GET .../ws`),
//! both replaying from `Last-Event-ID` / `?cursor=` then following live;
//! and the AI SDK drop-in streams of one message (`.../ui-stream`, and the
//! `useChat` resume route `GET /v1/chat/{id}/stream`).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use tracing::instrument;
use utoipa::IntoParams;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::extract::Q;
use super::limits::SubscriberSlot;
use super::ws_upgrade::WsUpgrade;
use super::{AppState, MessageId, SessionId};
use crate::frame::SharedFrame;
use crate::gateway::chat;
use crate::session::MessagePick;
use crate::stream::cursor::{parse as parse_cursor, resume_point};
use crate::stream::{self, sse, ui, ws, StartAt};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/stream", get(stream_sse))
        .route("/v1/sessions/{session_id}/ws", get(stream_ws))
        .route(
            "/v1/sessions/{session_id}/messages/{message_id}/ui-stream",
            get(stream_message),
        )
        .route("/v1/chat/{session_id}/stream", get(resume_chat))
        .route("/v1/sessions/{session_id}/ag-ui", get(stream_ag_ui))
}

/// The AI SDK UI message stream of one message.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/messages/{message_id}/ui-stream",
    tag = "streams",
    params(
        ("session_id" = String, Path, description = "Session id"),
        ("message_id" = String, Path, description = "Message id"),
    ),
    responses(
        (status = 200, description = "A Vercel AI SDK UI message stream (`x-vercel-ai-ui-message-stream: v1`): `data: <UIMessageChunk>` lines from `start` to `finish`, then `data: [DONE]`. A finished message replays whole and ends; a live one replays, then follows until it finishes.", content_type = "text/event-stream", body = String),
        (status = 404, description = "No such message in the session", body = Problem, content_type = "application/problem+json"),
    )
)]
#[instrument(skip_all, fields(session_id = %session.0, message_id = %message.0))]
pub async fn stream_message(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    message: MessageId,
) -> Result<Response, Problem> {
    caller.require(Scope::Subscribe, Some(&session.0))?;
    let slot = st.limits.subscribe(&session.0)?;
    let feed = st
        .registry
        .message(&session.0, MessagePick::Id(message.0.clone()))
        .await?
        .ok_or_else(|| {
            Problem::not_found(format!(
                "session {} has no message {}",
                session.0, message.0
            ))
        })?;
    Ok(ui_response(&st, &caller, session.0, feed, slot))
}

/// An AI SDK stream response that ends when the caller's token expires.
pub(super) fn ui_response(
    st: &AppState,
    caller: &Caller,
    session: String,
    feed: crate::session::MessageFeed,
    slot: SubscriberSlot,
) -> Response {
    let bytes = ui_message(st, caller, session, feed, slot, true);
    ui::response(bytes, st.heartbeat(), st.shutdown.clone())
}

/// One message's AI SDK stream for a caller, holding its subscriber slot:
/// as SSE `data:` lines (`sse`), or each chunk's JSON (the WebSocket chat
/// transport frames them). It ends with an `abort` (`token expired`) when
/// the caller's token expires.
pub(super) fn ui_message(
    st: &AppState,
    caller: &Caller,
    session: String,
    feed: crate::session::MessageFeed,
    slot: SubscriberSlot,
    sse: bool,
) -> impl futures_util::Stream<Item = bytes::Bytes> + Send + 'static {
    use bytes::Bytes;
    let (registry, page) = (st.registry.clone(), st.cfg.stream.replay_page);
    let (bytes, farewell): (Pin<Box<dyn futures_util::Stream<Item = Bytes> + Send>>, _) = if sse {
        (
            Box::pin(ui::message_stream(registry, session, feed, page)),
            vec![
                Bytes::from_static(b"data: {\"type\":\"abort\",\"reason\":\"token expired\"}\n\n"),
                Bytes::from_static(b"data: [DONE]\n\n"),
            ],
        )
    } else {
        (
            Box::pin(ui::message_chunks(registry, session, feed, page)),
            vec![Bytes::from_static(
                b"{\"type\":\"abort\",\"reason\":\"token expired\"}",
            )],
        )
    };
    stream::holding(stream::until_expiry(bytes, caller.exp, farewell), slot)
}

/// Query of the AG-UI stream: where to resume.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AgUiQuery {
    /// Resume after this cursor (`<epoch>:<cursor>`, as the events' SSE ids
    /// give it); the `Last-Event-ID` header wins when both are sent.
    pub cursor: Option<String>,
}

/// AG-UI events of the session (`@ag-ui/client`, CopilotKit). A new
/// connection starts with `RUN_STARTED`, `MESSAGES_SNAPSHOT` and
/// `STATE_SNAPSHOT` of the session (closed with `RUN_FINISHED` when no run
/// is going on), then the live events; a reconnection from a cursor still
/// in the log gets only the events after it (the open run and messages
/// opened again), and one from a cursor the log cannot honour (another
/// epoch, trimmed, ahead) starts from the snapshot. Each event's SSE id is
/// `<epoch>:<cursor>`.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/ag-ui",
    tag = "streams",
    params(
        ("session_id" = String, Path, description = "Session id (the AG-UI thread id)"),
        ("Last-Event-ID" = Option<String>, Header, description = "The last SSE id read: the stream resumes after it, with no MESSAGES_SNAPSHOT, while it is in the log; else it starts from the session's snapshot"),
        AgUiQuery,
    ),
    responses(
        (status = 200, description = "An endless `text/event-stream` of AG-UI 1.0 events, each with a `timestamp`; heartbeats are SSE comments", content_type = "text/event-stream", body = String),
        (status = 400, description = "Invalid Last-Event-ID, cursor or session id", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn stream_ag_ui(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    headers: HeaderMap,
    Q(q): Q<AgUiQuery>,
) -> Result<Response, Problem> {
    caller.require(Scope::Subscribe, Some(&session.0))?;
    let at = start(
        &headers,
        StreamQuery {
            cursor: q.cursor,
            epoch: None,
            format: None,
        },
    )?;
    let resume = match at.cursor {
        Some(n) => resumable(&st, &session.0, n, at.epoch.as_deref()).await,
        None => None,
    };
    ag_ui_response(&st, &caller, session.0, resume, false)
}

/// The log's epoch when a resume after cursor `n` of `epoch` can be
/// honoured from it: the same epoch (or none named), `n` not ahead of the
/// head, and at most `[stream] ag_ui_resume_events` events to read up to
/// it. A log trimmed past the cursor is found out by the stream itself (it
/// answers from the snapshot).
async fn resumable(st: &AppState, session: &str, n: u64, epoch: Option<&str>) -> Option<Resume> {
    let meta = st.registry.store().meta(session).await.ok()??;
    let same = epoch.is_none_or(|e| e == meta.epoch);
    let from = meta.first.saturating_sub(1);
    let within = n.saturating_sub(from) <= st.cfg.stream.ag_ui_resume_events;
    (same && n <= meta.head && !meta.deleted && within).then_some(Resume {
        from,
        after: n,
        epoch: meta.epoch,
    })
}

/// Where an AG-UI stream resumes: the log is read from `from` (where the
/// epoch's log begins), frames up to `after` only move the view.
pub(super) struct Resume {
    pub from: u64,
    pub after: u64,
    pub epoch: String,
}

/// The session's AG-UI stream for an authorised caller within the stream
/// limits: from the snapshot, or after `resume` (a cursor and its epoch);
/// it ends with `RUN_ERROR` (`token_expired`) when the caller's token
/// expires, and, with `until_run_end`, after the first run's end.
pub(super) fn ag_ui_response(
    st: &AppState,
    caller: &Caller,
    session: String,
    resume: Option<Resume>,
    until_run_end: bool,
) -> Result<Response, Problem> {
    let slot = st.limits.subscribe(&session)?;
    let (from, after) = match resume {
        // The log from its start: the view reads it up to the cursor.
        Some(r) => (
            StartAt {
                cursor: Some(r.from),
                epoch: Some(r.epoch),
            },
            Some(r.after),
        ),
        None => (StartAt::default(), None),
    };
    let frames = stream::frames(
        st.registry.clone(),
        session.clone(),
        from,
        st.cfg.stream.replay_page,
    );
    let bytes = stream::ag_ui::events(session, frames, after, until_run_end);
    let farewell = vec![bytes::Bytes::from_static(
        b"data: {\"type\":\"RUN_ERROR\",\"message\":\"token expired\",\"code\":\"token_expired\"}\n\n",
    )];
    let bytes = stream::holding(stream::until_expiry(bytes, caller.exp, farewell), slot);
    Ok(stream::ag_ui::response(
        bytes,
        st.heartbeat(),
        st.shutdown.clone(),
    ))
}

/// `useChat` resume: the session's assistant message that is still
/// streaming, as a UI message stream. While an answer is on its way (the
/// user's turn accepted or its run working, no assistant message yet) it
/// waits for it to start, up to `[upstream] start_timeout_secs`; 204 when
/// nothing streams or none started.
#[utoipa::path(
    get,
    path = "/v1/chat/{session_id}/stream",
    tag = "streams",
    params(("session_id" = String, Path, description = "Session id (the chat id)")),
    responses(
        (status = 200, description = "The streaming assistant message as a UI message stream", content_type = "text/event-stream", body = String),
        (status = 204, description = "No assistant message is streaming, and none started in time while a turn or run was active: nothing to resume"),
    )
)]
// The path is not under `/v1/sessions/`: the request's span has no session id.
#[instrument(skip_all, fields(session_id = %session.0))]
pub async fn resume_chat(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
) -> Result<Response, Problem> {
    match resumed_chat(&st, &caller, &session.0).await? {
        Some((feed, slot)) => Ok(ui_response(&st, &caller, session.0, feed, slot)),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// What a chat's resume follows ([`chat::resumed_answer`]), for a caller
/// who may read the session, with the subscriber slot its stream holds;
/// `None`: nothing to resume.
pub(super) async fn resumed_chat(
    st: &AppState,
    caller: &Caller,
    session: &str,
) -> Result<Option<(crate::session::MessageFeed, SubscriberSlot)>, Problem> {
    caller.require(Scope::Subscribe, Some(session))?;
    let slot = st.limits.subscribe(session)?;
    let wait = Duration::from_secs(st.cfg.upstream.start_timeout_secs);
    let cx = st.gateway_ctx();
    let feed = chat::resumed_answer(&cx, session, st.cfg.stream.replay_page, wait).await?;
    Ok(feed.map(|f| (f, slot)))
}

/// Where to start a stream.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Resume after this cursor: `<epoch>:<cursor>` as the SSE ids and frames
    /// give it, or a bare `<cursor>` (the `Last-Event-ID` header wins when both
    /// are sent). Without either, the stream starts with a snapshot.
    pub cursor: Option<String>,
    /// The epoch the cursor belongs to; a different epoch gives `reset` + `snapshot`.
    pub epoch: Option<String>,
    /// `frames` (default): the session's frames. `umo`: Umo Editor frames,
    /// the snapshot's messages as Umo message bodies, then content-block
    /// updates (`strategy: append | merge`) of the messages each delta touches.
    pub format: Option<StreamFormat>,
}

/// What a session stream carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StreamFormat {
    #[default]
    Frames,
    Umo,
}

/// `<epoch>:<cursor>` or a bare cursor, or 400 `invalid_cursor`.
pub(super) fn cursor_of(s: &str) -> Result<(Option<&str>, u64), Problem> {
    parse_cursor(s).ok_or_else(|| {
        Problem::bad_request(
            "invalid_cursor",
            format!(
                "cursor `{}` is neither `<epoch>:<cursor>` nor a non-negative integer",
                s.escape_debug()
            ),
        )
    })
}

fn start(headers: &HeaderMap, q: StreamQuery) -> Result<StartAt, Problem> {
    let raw = resume_point(headers, q.cursor.as_deref());
    let mut epoch = q.epoch.filter(|e| !e.is_empty());
    let cursor = match raw {
        None => None,
        Some(s) => {
            let (named, n) = cursor_of(&s)?;
            // The epoch inside the id is the one the client actually read.
            if named.is_some() {
                epoch = named.map(str::to_string);
            }
            Some(n)
        }
    };
    Ok(StartAt { cursor, epoch })
}

/// The session's frames from where the request asks to start, for an
/// authorised caller within the stream limits; they end with a `reset`
/// (reason `token_expired`) when the caller's token expires.
fn frames(
    st: &AppState,
    caller: &Caller,
    session: SessionId,
    headers: &HeaderMap,
    q: StreamQuery,
    // Only for the frames as they are (`stream_sse` decides).
    link: Option<Arc<stream::shard::Link>>,
) -> Result<impl futures_util::Stream<Item = SharedFrame> + Send + 'static, Problem> {
    caller.require(Scope::Subscribe, Some(&session.0))?;
    let format = q.format.unwrap_or_default();
    let from = start(headers, q)?;
    let slot = st.limits.subscribe(&session.0)?;
    let frames = stream::linked(
        st.registry.clone(),
        session.0,
        from,
        st.cfg.stream.replay_page,
        link,
    );
    let frames: Pin<Box<dyn futures_util::Stream<Item = SharedFrame> + Send>> = match format {
        StreamFormat::Frames => Box::pin(frames),
        StreamFormat::Umo => Box::pin(stream::umo::frames(frames)),
    };
    let farewell = vec![Arc::new(crate::frame::reset("token_expired"))];
    Ok(stream::holding(
        stream::until_expiry(frames, caller.exp, farewell),
        slot,
    ))
}

/// Server-Sent Events: `id: <epoch>:<cursor>`, `event: snapshot|delta|reset|live`, `data: <frame JSON>` (`reset` and `live` without an id).
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/stream",
    tag = "streams",
    params(
        ("session_id" = String, Path, description = "Session id"),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this SSE id (`<epoch>:<cursor>`) or bare cursor"),
        StreamQuery
    ),
    responses(
        (status = 200, description = "An endless `text/event-stream` of frames; heartbeats are SSE comments", content_type = "text/event-stream", body = String),
        (status = 400, description = "Invalid cursor or session id", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn stream_sse(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    headers: HeaderMap,
    Q(q): Q<StreamQuery>,
) -> Result<Response, Problem> {
    // Only the frames as they are can go out through a shared writer.
    let shared = match (&st.shards, q.format.unwrap_or_default()) {
        (Some(shards), StreamFormat::Frames) => Some(stream::shard::Shardable {
            shards: shards.clone(),
            session: Arc::from(session.0.as_str()),
            link: stream::shard::Link::new(),
        }),
        _ => None,
    };
    let link = shared.as_ref().map(|s| s.link.clone());
    let frames = frames(&st, &caller, session, &headers, q, link)?;
    Ok(match shared {
        Some(shared) => sse::shared_response(frames, shared, st.heartbeat(), st.shutdown.clone()),
        None => sse::response(frames, st.heartbeat(), st.shutdown.clone()),
    })
}

/// WebSocket: the same frames as SSE, one JSON text message each.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/ws",
    tag = "streams",
    params(("session_id" = String, Path, description = "Session id"), StreamQuery),
    responses(
        (status = 101, description = "Switching to WebSocket; each text message is one frame, deflated when the client offered `permessage-deflate` (the response then has `Sec-WebSocket-Extensions`)"),
        (status = 400, description = "Invalid cursor or session id", body = Problem, content_type = "application/problem+json"),
        (status = 426, description = "A WebSocket handshake of a version other than 13 (the response has `Sec-WebSocket-Version: 13`), or a connection that cannot be upgraded", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn stream_ws(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    headers: HeaderMap,
    Q(q): Q<StreamQuery>,
    upgrade: Result<WsUpgrade, Problem>,
) -> Result<Response, Problem> {
    let upgrade = upgrade?;
    let frames = frames(&st, &caller, session, &headers, q, None)?;
    let heartbeat = st.heartbeat();
    let shutdown = st.shutdown.clone();
    let frames = frames.map(|f| {
        stream::delivered(f.born);
        f
    });
    Ok(upgrade.serve(&st, move |conn| {
        ws::serve(conn, frames, heartbeat, shutdown)
    }))
}
