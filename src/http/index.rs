//! The live session index (docs/STREAMS.md): `GET /v1/sessions/stream`,
//! SSE or WebSocket as the request asks: the sessions the
//! caller's token may read, created, updated and deleted as it happens,
//! resumable from an index cursor.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use futures_util::StreamExt;
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::extract::{SessionId, Q};
use super::limits::SubscriberSlot;
use super::streams::cursor_of;
use super::ws_upgrade::WsUpgrade;
use super::AppState;
use crate::session::index::IndexEvent;
use crate::stream::cursor::resume_point;
use crate::stream::{self, sse, ws};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        // A session named `stream` is still deleted at its own path.
        .route(
            "/v1/sessions/stream",
            get(index_stream).delete(delete_stream_session),
        )
}

/// Where an index stream resumes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IndexQuery {
    /// Resume after this index position (`<epoch>:<cursor>` as the index's
    /// SSE ids give it, or a bare cursor); `Last-Event-ID` wins.
    pub cursor: Option<String>,
}

/// The limit key of index streams (not a session id: it has a NUL).
const SLOT: &str = "\u{0}index";

/// The index events for `caller`, from where the request asks, ending with
/// `reset` (`token_expired`) when the token expires.
fn events(
    st: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    q: IndexQuery,
) -> Result<
    (
        impl futures_util::Stream<Item = Arc<IndexEvent>> + Send + 'static,
        SubscriberSlot,
    ),
    Problem,
> {
    caller.require(Scope::Subscribe, None)?;
    let after = match resume_point(headers, q.cursor.as_deref()) {
        None => None,
        Some(raw) => {
            let (epoch, n) = cursor_of(&raw)?;
            Some((epoch.map(str::to_string), n))
        }
    };
    let slot = st.limits.subscribe(SLOT)?;
    let who = caller.clone();
    let events = stream::index::events(
        st.registry.clone(),
        after,
        Arc::new(move |s: &str| who.may_see(s)),
        st.cfg.stream.index_snapshot_max,
    );
    let bye = vec![Arc::new(IndexEvent::reset("token_expired"))];
    Ok((stream::until_expiry(events, caller.exp, bye), slot))
}

/// The live session index: Server-Sent Events, or a WebSocket of the same
/// events as JSON text messages when the request is a WebSocket handshake.
#[utoipa::path(
    get,
    path = "/v1/sessions/stream",
    tag = "sessions",
    params(
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this index position (`<epoch>:<cursor>`)"),
        IndexQuery
    ),
    responses(
        (status = 200, description = "An endless `text/event-stream`: `event: snapshot` (`{type, cursor, epoch, sessions: [SessionEntry]}`) first on a connection without a cursor, then `event: session` (`{type: created|updated|deleted, cursor, session: SessionEntry}`) per change; `reset` (`{type, reason}`) then a fresh snapshot when the cursor cannot be resumed; ids are `<epoch>:<cursor>` of the index", content_type = "text/event-stream", body = String),
        (status = 101, description = "With a WebSocket handshake: switching to WebSocket, each text message one index event as on SSE"),
        (status = 400, description = "Invalid cursor", body = Problem, content_type = "application/problem+json"),
        (status = 426, description = "A WebSocket handshake of a version other than 13 (the response has `Sec-WebSocket-Version: 13`), or a connection that cannot be upgraded", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn index_stream(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Q(q): Q<IndexQuery>,
    upgrade: Result<WsUpgrade, Problem>,
) -> Result<Response, Problem> {
    let wants_ws = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if wants_ws {
        let upgrade = upgrade?;
        let (events, slot) = events(&st, &caller, &headers, q)?;
        let json = stream::holding(events, slot).map(|e| e.json().clone());
        let heartbeat = st.heartbeat();
        let shutdown = st.shutdown.clone();
        return Ok(upgrade.serve(&st, move |conn| ws::serve(conn, json, heartbeat, shutdown)));
    }
    let (events, slot) = events(&st, &caller, &headers, q)?;
    let bytes = stream::holding(events, slot).map(|e| e.sse().clone());
    Ok(sse::bytes_response(
        Box::pin(bytes),
        st.heartbeat(),
        st.shutdown.clone(),
    ))
}

/// `DELETE /v1/sessions/stream`: the session named `stream`, whose path
/// the index takes for its GET.
async fn delete_stream_session(
    st: State<AppState>,
    caller: Caller,
) -> Result<axum::Json<super::sessions::Deleted>, Problem> {
    super::sessions::delete_session(st, caller, SessionId("stream".into())).await
}
