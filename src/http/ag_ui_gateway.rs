//! `POST /v1/sessions/{session_id}/ag-ui`: the AG-UI gateway. What
//! `@ag-ui/client`'s `HttpAgent` sends (a `RunAgentInput`) goes to the
//! AG-UI agent of `[upstream] ag_ui_url` unchanged; the agent's event stream
//! is read into the session (its user messages first), and the client is
//! answered with the session's AG-UI stream until the run ends. The run goes
//! on if the client leaves; `GET .../ag-ui` reconnects to it; a `cancel`
//! control aborts the upstream request.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::Value;

use super::auth::{Caller, Scope};
use super::chat::{forward, record};
use super::error::Problem;
use super::extract::{read_body, reject_duplicate_keys};
use super::{AppState, SessionId};
use crate::event::ag_ui;

/// Largest `RunAgentInput` (it carries the whole conversation).
const MAX_BODY: usize = 4 * 1024 * 1024;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/ag-ui", post(run_agent))
}

/// Run the upstream AG-UI agent on a `RunAgentInput` through the session.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/ag-ui",
    tag = "streams",
    params(("session_id" = String, Path, description = "Session id (the AG-UI thread id)")),
    request_body(content = Value, description = "A `RunAgentInput` (`{threadId, runId, messages, state, tools, context, forwardedProps}`), forwarded unchanged", content_type = "application/json"),
    responses(
        (status = 200, description = "The session's AG-UI stream (as `GET .../ag-ui`) until the run ends", content_type = "text/event-stream", body = String),
        (status = 400, description = "Not a RunAgentInput (`invalid_run_input`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`no_upstream`: no [upstream] ag_ui_url is configured", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`upstream_unreachable`, `upstream_rejected` (its status), or `upstream_empty` (nothing in its answer)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn run_agent(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    caller.require(Scope::Publish, Some(&session.0))?;
    caller.require(Scope::Subscribe, Some(&session.0))?;
    let bytes = read_body(&st.limits, &headers, body, MAX_BODY).await?;
    reject_duplicate_keys(&bytes)?;
    let input: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Problem::bad_request("invalid_run_input", e.to_string()))?;
    let named = |k: &str| {
        input
            .get(k)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
    };
    if !named("runId") || !input.get("messages").is_some_and(Value::is_array) {
        return Err(Problem::bad_request(
            "invalid_run_input",
            "a RunAgentInput names its run in `runId` and carries `messages`",
        ));
    }
    // One run is one request for the ingest rate limits.
    st.limits.ingest(&session.0, caller.token_key(), 1)?;
    let Some((client, url)) = st.gateway.ag_ui_route() else {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "no_upstream",
            "No upstream",
            "no [upstream] ag_ui_url is configured",
        ));
    };
    let turns = ag_ui::input_turns(&input);
    // The answer is the run alone: the events after the client's own
    // messages (which it holds) are in the log, before the agent answers.
    let mut mark = None;
    let first = async {
        record(&st, &session.0, turns, "invalid_run_input").await?;
        if let Ok(Some(m)) = st.registry.store().meta(&session.0).await {
            mark = Some(super::streams::Resume {
                from: m.first.saturating_sub(1),
                after: m.head,
                epoch: m.epoch,
            });
        }
        Ok(())
    };
    forward(&st, &session.0, (client, url), bytes, first, Vec::new()).await?;
    super::streams::ag_ui_response(&st, &caller, session.0, mark, true)
}
