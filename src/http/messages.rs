//! Message history: `GET /v1/sessions/{id}/messages?before=&limit=&format=`.
//! The snapshot holds only the most recent `projection.snapshot_messages`
//! messages; older ones page in here, oldest first within a page, each page
//! ending right before `before` (newest page without it). `nextBefore` is
//! the `before` of the next, older page. `format=ui` (default) answers AI
//! SDK `UIMessage`s (`{id, role, parts, metadata}`); `format=umo` the Umo
//! Editor message body (seed 001, `projection::umo_blocks`).

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::extract::Q;
use super::{AppState, SessionId};
use crate::projection::{umo_blocks, Message};

/// Most messages per page.
pub const MAX_PAGE: usize = 500;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/messages", get(get_messages))
}

/// The shape of the messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageFormat {
    /// Vercel AI SDK `UIMessage`s.
    #[default]
    Ui,
    /// Umo Editor Next message bodies.
    Umo,
}

/// Paging of the messages.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// Return the messages right before this message id (default: the newest).
    pub before: Option<String>,
    /// Most messages to return (default 50, at most 500).
    pub limit: Option<usize>,
    /// `ui` (default) or `umo`.
    pub format: Option<MessageFormat>,
}

/// A page of messages, oldest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagesPage {
    pub session_id: String,
    pub epoch: String,
    /// Cursor of the last accepted event.
    pub cursor: u64,
    pub format: MessageFormat,
    /// Messages the projection holds (at most `projection.max_messages`;
    /// older ones are only in the event log).
    pub total: usize,
    /// `UIMessage`s or Umo messages, oldest first.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// `before` of the next, older page; absent on the oldest page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<String>,
}

/// A message as an AI SDK `UIMessage`: the producer's metadata (such as
/// `createdAt`) and our bookkeeping go in `metadata`.
pub fn ui_message(m: &Message) -> Value {
    let v = serde_json::to_value(m).unwrap_or(Value::Null);
    // The producer's metadata (what the stream's `start` carried), then ours.
    let mut meta = match &m.metadata {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        _ => json!({}),
    };
    meta["status"] = v["status"].clone();
    meta["createdCursor"] = v["createdCursor"].clone();
    for k in ["agentId", "turnId", "runId"] {
        if let Some(x) = v.get(k) {
            meta[k] = x.clone();
        }
    }
    json!({"id": m.id, "role": v["role"], "parts": v["parts"], "metadata": meta})
}

/// A page of a session's messages.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/messages",
    tag = "sessions",
    params(("session_id" = String, Path, description = "Session id"), MessagesQuery),
    responses(
        (status = 200, description = "A page of messages, oldest first", body = MessagesPage),
        (status = 400, description = "Invalid query", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`before` names no message the projection holds", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_messages(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    Q(q): Q<MessagesQuery>,
) -> Result<Json<MessagesPage>, Problem> {
    caller.require(Scope::Subscribe, Some(&session.0))?;
    let limit = q.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let format = q.format.unwrap_or_default();
    let page = st
        .registry
        .messages(&session.0, q.before.as_deref(), limit)
        .await?
        .ok_or_else(|| {
            Problem::not_found(format!(
                "no message '{}' in this session's projection",
                q.before.as_deref().unwrap_or("")
            ))
        })?;
    let messages = page
        .messages
        .iter()
        .map(|m| match format {
            MessageFormat::Ui => ui_message(m),
            MessageFormat::Umo => umo_blocks::message(m),
        })
        .collect();
    Ok(Json(MessagesPage {
        session_id: session.0,
        epoch: page.meta.epoch,
        cursor: page.meta.head,
        format,
        total: page.total,
        messages,
        next_before: page.next_before,
    }))
}
