//! Session reads: the snapshot (`GET .../snapshot`) and the normalised
//! event log, paged (`GET .../events?after=N&limit=M`).

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::instrument;
use utoipa::{IntoParams, ToSchema};

use super::extract::Q;
use super::{AppState, SessionId};
use crate::error::{Problem, ProblemDoc};

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/snapshot", get(get_snapshot))
}

/// The projection of a session: `{"type":"snapshot","cursor","epoch","state"}`.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/snapshot",
    tag = "sessions",
    params(("session_id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The snapshot frame: `{type: \"snapshot\", cursor, epoch, state}`; a session with no events has an empty state at cursor 0", body = serde_json::Value),
        (status = 400, description = "Invalid session id", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable", body = ProblemDoc, content_type = "application/problem+json"),
    )
)]
#[instrument(skip_all, fields(session_id = %session.0))]
pub async fn get_snapshot(
    State(st): State<AppState>,
    session: SessionId,
) -> Result<Response, Problem> {
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

/// The normalised event log of a session, paged by cursor.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/events",
    tag = "sessions",
    params(("session_id" = String, Path, description = "Session id"), EventsQuery),
    responses(
        (status = 200, description = "A page of the log", body = EventsPage),
        (status = 400, description = "Invalid query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable", body = ProblemDoc, content_type = "application/problem+json"),
    )
)]
#[instrument(skip_all, fields(session_id = %session.0))]
pub async fn get_events(
    State(st): State<AppState>,
    session: SessionId,
    Q(q): Q<EventsQuery>,
) -> Result<Json<EventsPage>, Problem> {
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let after = q.after.unwrap_or(0);
    let store = st.registry.store();
    let meta = store.open(&session.0).await?;
    let page = store.read(&session.0, after, limit).await?;
    let mut events = Vec::with_capacity(page.len());
    for ev in page {
        let raw = String::from_utf8(ev.fact.to_vec())
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
