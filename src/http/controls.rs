//! Controls: `POST /v1/sessions/{id}/actions/{actionId}` (a decision on an
//! action) and `POST /v1/sessions/{id}/controls` (a run control) are relayed
//! to the session's runtime by [`crate::control::Relay`]. The action's status
//! and the control URL come from the session's actor; nothing here changes
//! the projection: an action stays pending until the runtime's own
//! `action.resolved` arrives.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::Value;
use tracing::instrument;
use utoipa::ToSchema;

use super::auth::{Caller, Scope};
use super::error::{Problem, ProblemItem};
use super::extract::{read_body, reject_duplicate_keys};
use super::{ActionId, AppState, SessionId};
use crate::control::{self, Checked, Kind, Outgoing, RelayError, TargetError};

/// Largest accepted decision or control body.
const MAX_BODY: usize = 64 * 1024;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/sessions/{session_id}/actions/{action_id}",
            post(post_action),
        )
        .route("/v1/sessions/{session_id}/controls", post(post_control))
}

/// A decision on an action (documentation shape; other fields pass through).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionDecision {
    pub decision: Decision,
    /// The client's id of this logical request; the same id gives the same
    /// idempotency key, so a client may safely retry with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The answer, for `decision: "answer"` (passed through as is).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub answer: Option<Value>,
    /// A message for the runtime (passed through).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The decisions on an action.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Reject,
    Answer,
}

/// A run control (documentation shape; other fields pass through).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunControl {
    #[serde(rename = "type")]
    pub control_type: ControlType,
    /// As in [`ActionDecision`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Text for `steer` and `queue` (passed through).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Structured input (passed through).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
}

/// The run controls. `cancel` is an explicit request; a client that merely
/// disconnects never stops a run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ControlType {
    /// A new user message for the runtime (what `POST /v1/chat` relays
    /// without an upstream).
    Send,
    Interrupt,
    Cancel,
    Retry,
    Steer,
    Queue,
}

/// The runtime accepted the relayed request. For an action, this is not
/// its resolution: that is the runtime's `action.resolved` event. A `cancel`
/// of an answer the chat gateway is reading, in a session no runtime
/// controls, is `status: "cancelled"` (`runtimeStatus` 0, no attempts): the
/// upstream request was aborted.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Relayed {
    /// `relayed`, or `cancelled` (see above).
    pub status: String,
    /// The `idempotency-key` the runtime got.
    pub idempotency_key: String,
    /// The runtime's HTTP status.
    pub runtime_status: u16,
    /// Attempts it took.
    pub attempts: u32,
}

/// Relay a decision on an action to the session's runtime.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/actions/{action_id}",
    tag = "controls",
    params(
        ("session_id" = String, Path, description = "Session id"),
        ("action_id" = String, Path, description = "Action id (from `state.actions`)"),
    ),
    request_body(content = ActionDecision, description = "`decision` plus fields passed through to the runtime", content_type = "application/json"),
    responses(
        (status = 202, description = "Relayed; the runtime accepted it. The action stays pending until the runtime's `action.resolved` event", body = Relayed),
        (status = 400, description = "Invalid session or action id", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`host_not_allowed`: the control URL's host is not on controls.allowed_hosts", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`unknown_action`: no such action in the session's projection", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`action_already_resolved`, or `no_control_url`: no control URL is known for the session", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_decision`: the body is not a JSON object with a valid `decision`; `invalid_answer`: an `answer` that breaks the JSON Schema of the action's request (one error per broken rule, with its path under `/answer`)", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`runtime_unreachable` (connect errors, timeouts or 5xx on every attempt) or `runtime_rejected` (the runtime answered 4xx)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Shutting down", body = Problem, content_type = "application/problem+json"),
    )
)]
#[instrument(skip_all, fields(session_id = %session.0, action_id = %action.0))]
pub async fn post_action(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    action: ActionId,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        caller.require(Scope::Control, Some(&session.0))?;
        let bytes = read_body(&st.limits, &headers, body, MAX_BODY).await?;
        reject_duplicate_keys(&bytes)?;
        let out = control::action_request(&session.0, &action.0, &bytes)
            .map_err(|e| invalid("invalid_decision", "Invalid decision", e))?;
        let target = st
            .registry
            .control_target(&session.0, Some(&action.0))
            .await?;
        match target.action_status.as_deref() {
            Some("pending") => {}
            None => {
                return Err(Problem::new(
                    StatusCode::NOT_FOUND,
                    "unknown_action",
                    "Unknown action",
                    format!("session has no action `{}`", action.0),
                ))
            }
            Some(_) => {
                return Err(Problem::new(
                    StatusCode::CONFLICT,
                    "action_already_resolved",
                    "Action already resolved",
                    format!("action `{}` is already resolved", action.0),
                ))
            }
        }
        if let Some(schema) = &target.answer_schema {
            check_answer(schema, &bytes)?;
        }
        relay(&st, target.control_url.as_deref(), out).await
    }
    .await;
    respond(Kind::Action, result)
}

/// Relay a run control (`send`, `interrupt`, `cancel`, `retry`, `steer`, `queue`)
/// to the session's runtime.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/controls",
    tag = "controls",
    params(("session_id" = String, Path, description = "Session id")),
    request_body(content = RunControl, description = "`type` plus fields passed through to the runtime", content_type = "application/json"),
    responses(
        (status = 202, description = "Relayed; the runtime accepted it. Its effect shows in the runtime's own events", body = Relayed),
        (status = 400, description = "Invalid session id", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`host_not_allowed`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`no_control_url`", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_control`: the body is not a JSON object with a valid `type`", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`runtime_unreachable` or `runtime_rejected`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Shutting down", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_control(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        caller.require(Scope::Control, Some(&session.0))?;
        let bytes = read_body(&st.limits, &headers, body, MAX_BODY).await?;
        reject_duplicate_keys(&bytes)?;
        let out = control::control_request(&session.0, &bytes)
            .map_err(|e| invalid("invalid_control", "Invalid control", e))?;
        // A `cancel` of an answer the chat gateway is reading aborts the
        // upstream request; the session's runtime, if it has one, hears it too.
        let is_cancel = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .is_some_and(|v| v.get("type").and_then(Value::as_str) == Some("cancel"));
        let aborted = is_cancel && st.gateway.cancel(&session.0);
        let target = st.registry.control_target(&session.0, None).await?;
        if aborted && target.control_url.is_none() && st.relay.target(None).is_err() {
            return Ok(Relayed {
                status: "cancelled".into(),
                idempotency_key: out.idempotency_key,
                runtime_status: 0,
                attempts: 0,
            });
        }
        relay(&st, target.control_url.as_deref(), out).await
    }
    .await;
    respond(Kind::Control, result)
}

/// An `answer` decision must satisfy the schema of the request it answers
/// (422 `invalid_answer`, one error per broken rule); other decisions pass.
fn check_answer(schema: &Value, body: &[u8]) -> Result<(), Problem> {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if body.get("decision").and_then(Value::as_str) != Some("answer") {
        return Ok(());
    }
    match control::check_answer(schema, body.get("answer")) {
        Checked::Valid => Ok(()),
        Checked::SchemaUnusable(why) => {
            tracing::warn!(error = %why, "the action's schema cannot be compiled; answer relayed unchecked");
            Ok(())
        }
        Checked::Invalid(errors) => {
            let n = errors.len();
            let items = errors
                .into_iter()
                .map(|e| ProblemItem {
                    index: None,
                    event_id: None,
                    code: "schema_violation".into(),
                    path: format!("/answer{}", e.path),
                    message: e.message,
                })
                .collect();
            Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_answer",
                "Invalid answer",
                format!("the answer breaks the request's schema in {n} place(s)"),
            )
            .with_errors(items))
        }
    }
}

fn invalid(code: &'static str, title: &'static str, e: control::Invalid) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, code, title, e.0)
}

/// Pick and check the URL, then relay. The relay runs in its own task, so
/// that a client that goes away mid-relay does not cut it short.
pub(super) async fn relay(
    st: &AppState,
    session_url: Option<&str>,
    out: Outgoing,
) -> Result<Relayed, Problem> {
    let url = st.relay.target(session_url).map_err(|e| {
        tracing::warn!(error = %e, "control not relayed");
        match e {
            TargetError::NoUrl => Problem::new(
                StatusCode::CONFLICT,
                "no_control_url",
                "No control URL",
                "the session's runtime has not named a control URL (session.opened `controlUrl`) and none is configured",
            ),
            TargetError::InvalidUrl | TargetError::NotAllowed { .. } => Problem::new(
                StatusCode::FORBIDDEN,
                "host_not_allowed",
                "Host not allowed",
                "the session's control URL is not an http(s) URL on a host in controls.allowed_hosts",
            ),
        }
    })?;
    let relay = st.relay.clone();
    let key = out.idempotency_key.clone();
    let timeout_ms = st.relay.timeout().as_millis();
    let outcome = tokio::spawn(async move { relay.relay(&url, &out).await })
        .await
        .map_err(|e| Problem::internal(&e))?;
    match outcome {
        Ok(ok) => Ok(Relayed {
            status: "relayed".into(),
            idempotency_key: key,
            runtime_status: ok.status,
            attempts: ok.attempts,
        }),
        Err(e) => {
            tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "control relay failed");
            Err(match e {
                RelayError::Unreachable { attempts, last } => {
                    let last = match last {
                        control::Failure::Status(s) => format!("the runtime answered {s}"),
                        control::Failure::Timeout(_) => format!("no answer within {timeout_ms} ms"),
                        control::Failure::Connect(_) => "could not connect".to_string(),
                        control::Failure::Transport(_) => "the connection failed".to_string(),
                    };
                    Problem::new(
                        StatusCode::BAD_GATEWAY,
                        "runtime_unreachable",
                        "Runtime unreachable",
                        format!("the runtime did not take the request after {attempts} attempt(s); last: {last}"),
                    )
                }
                RelayError::Rejected { status, .. } => Problem::new(
                    StatusCode::BAD_GATEWAY,
                    "runtime_rejected",
                    "Runtime rejected the request",
                    format!("the runtime answered {status}; not retried"),
                ),
            })
        }
    }
}

/// Count the outcome, then answer 202 or the problem.
fn respond(kind: Kind, result: Result<Relayed, Problem>) -> Response {
    let outcome = match &result {
        Ok(_) => "relayed".to_string(),
        Err(p) => p.code.to_string(),
    };
    metrics::counter!(
        "projector_control_relays_total",
        "kind" => kind.as_str(),
        "outcome" => outcome
    )
    .increment(1);
    match result {
        Ok(r) => (StatusCode::ACCEPTED, Json(r)).into_response(),
        Err(p) => p.into_response(),
    }
}
