//! Sessions as a resource: the listing (`GET /v1/sessions`), deletion
//! (`DELETE /v1/sessions/{id}`), the snapshot (`GET .../snapshot`) and the
//! normalised event log, paged (`GET .../events?after=N&limit=M`).

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::extract::Q;
use super::{AppState, SessionId};
use crate::session::index::SessionEntry;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions", get(list_sessions))
        .route("/v1/sessions/{session_id}", delete(delete_session))
        .route("/v1/sessions/{session_id}/snapshot", get(get_snapshot))
        .route("/v1/sessions/{session_id}/events", get(get_events))
}

/// Paging of the session list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Return sessions whose id sorts after this one.
    pub after: Option<String>,
    /// Most sessions to return (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// A page of sessions.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionsPage {
    pub sessions: Vec<SessionEntry>,
    /// `after` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<String>,
}

/// Sessions with events, by id, paged.
#[utoipa::path(
    get,
    path = "/v1/sessions",
    tag = "sessions",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of sessions", body = SessionsPage),
        (status = 400, description = "Invalid query", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_sessions(
    State(st): State<AppState>,
    caller: Caller,
    Q(q): Q<ListQuery>,
) -> Result<Json<SessionsPage>, Problem> {
    caller.require(Scope::Admin, None)?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let mut rows = st
        .registry
        .store()
        .list(q.after.as_deref(), limit + 1)
        .await?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next_after = more
        .then(|| rows.last().map(|(id, _)| id.clone()))
        .flatten();
    let sessions = rows.iter().map(|(id, m)| SessionEntry::of(id, m)).collect();
    Ok(Json(SessionsPage {
        sessions,
        next_after,
    }))
}

/// The result of a deletion.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Deleted {
    pub session_id: String,
    /// The epoch of the session's next incarnation.
    pub epoch: String,
    /// Cursors continue after this one, so stale clients get `reset`.
    pub head: u64,
}

/// Delete a session: its log, ids and checkpoint go; a tombstone keeps the
/// cursor moving forward so that a stale client is reset.
#[utoipa::path(
    delete,
    path = "/v1/sessions/{session_id}",
    tag = "sessions",
    params(("session_id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "Deleted; live subscribers got reset + an empty snapshot", body = Deleted),
        (status = 400, description = "Invalid session id", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session: it never existed", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_session(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
) -> Result<Json<Deleted>, Problem> {
    caller.require(Scope::Admin, Some(&session.0))?;
    // A session that never existed is not there to delete (a tombstone of
    // an earlier deletion is: deleting again is harmless).
    if st.registry.store().meta(&session.0).await?.is_none() {
        return Err(Problem::not_found(format!(
            "no session `{}`",
            session.0.escape_debug()
        )));
    }
    let meta = st.registry.delete(&session.0).await?;
    Ok(Json(Deleted {
        session_id: session.0,
        epoch: meta.epoch,
        head: meta.head,
    }))
}

/// The projection of a session: `{"type":"snapshot","cursor","epoch","state"}`.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/snapshot",
    tag = "sessions",
    params(("session_id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The snapshot frame: `{type: \"snapshot\", cursor, epoch, state}`; a session with no events has an empty state at cursor 0", body = serde_json::Value),
        (status = 400, description = "Invalid session id", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_snapshot(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
) -> Result<Response, Problem> {
    caller.require(Scope::Subscribe, Some(&session.0))?;
    let (_, frame) = st.registry.snapshot(&session.0).await?;
    let mut resp = frame.json.clone().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// Paging of the event log.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Return events with a cursor greater than this (default 0).
    pub after: Option<u64>,
    /// Most events to return (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// One logged event.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoggedEvent {
    pub cursor: u64,
    /// The normalised fact as stored.
    #[schema(value_type = Object)]
    pub event: Box<RawValue>,
}

/// A page of the event log.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsPage {
    pub session_id: String,
    pub epoch: String,
    /// Cursor of the last accepted event.
    pub head: u64,
    /// First retained cursor.
    pub first: u64,
    pub events: Vec<LoggedEvent>,
    /// `after` for the next page; absent when this page reached the head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
}

/// A stored fact as readers may see it: the runtime's control URL (internal
/// topology, kept for the relay) is left out.
fn without_control_url(fact: &[u8]) -> Vec<u8> {
    const KEY: &[u8] = b"\"controlUrl\"";
    if !fact.windows(KEY.len()).any(|w| w == KEY) {
        return fact.to_vec();
    }
    match serde_json::from_slice::<serde_json::Value>(fact) {
        Ok(mut v) => {
            if let Some(p) = v.get_mut("payload").and_then(|p| p.as_object_mut()) {
                p.remove("controlUrl");
            }
            serde_json::to_vec(&v).unwrap_or_else(|_| fact.to_vec())
        }
        Err(_) => fact.to_vec(),
    }
}

/// The normalised event log of a session, paged by cursor.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/events",
    tag = "sessions",
    params(("session_id" = String, Path, description = "Session id"), EventsQuery),
    responses(
        (status = 200, description = "A page of the log", body = EventsPage),
        (status = 400, description = "Invalid query", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_events(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    Q(q): Q<EventsQuery>,
) -> Result<Json<EventsPage>, Problem> {
    caller.require(Scope::Subscribe, Some(&session.0))?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let after = q.after.unwrap_or(0);
    let store = st.registry.store();
    let meta = store.open(&session.0).await?;
    let page = store.read(&session.0, after, limit).await?;
    let mut events = Vec::with_capacity(page.len());
    for ev in page {
        let raw = String::from_utf8(without_control_url(&ev.fact))
            .ok()
            .and_then(|s| RawValue::from_string(s).ok())
            .ok_or_else(|| {
                Problem::internal(&crate::store::StoreError::Corrupt {
                    session: session.0.clone(),
                    detail: format!("fact at cursor {} is not JSON", ev.cursor),
                })
            })?;
        events.push(LoggedEvent {
            cursor: ev.cursor,
            event: raw,
        });
    }
    let last = events.last().map(|e| e.cursor);
    Ok(Json(EventsPage {
        session_id: session.0,
        epoch: meta.epoch,
        head: meta.head,
        first: meta.first,
        next_after: last.filter(|&c| c < meta.head),
        events,
    }))
}
