//! The AI SDK chat gateway: `POST /v1/chat`, what `useChat`'s
//! `DefaultChatTransport({api: '<base>/v1/chat'})` sends. With `[upstream]
//! chat_url`, the request body goes unchanged to that AI SDK route; its UI
//! message stream is read into the session (the chat id) by
//! `gateway::read` in a task of its own, and the browser is answered
//! with the assistant message's stream from the session's log. So the
//! answer is durable, survives the browser leaving (the upstream run goes
//! on), resumes from any tab (`GET /v1/chat/{id}/stream`), and a `cancel`
//! control aborts the upstream request ([`crate::gateway::Gateway::cancel`]).
//! The upstream run itself is the `gateway` room's; this is its door.

use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use tracing::warn;

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::extract::{read_body, reject_duplicate_keys, valid_session_id};
use super::limits::SubscriberSlot;
use super::AppState;
use crate::gateway::{self, chat};
use crate::session::{MessageFeed, MessagePick};

/// Largest chat request body (the whole conversation is in it).
pub(super) const MAX_BODY: usize = 4 * 1024 * 1024;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/v1/chat", post(post_chat))
}

/// Send a chat message through the gateway: the upstream AI SDK route's
/// answer, read into the session and streamed back from its log.
#[utoipa::path(
    post,
    path = "/v1/chat",
    tag = "streams",
    request_body(content = Value, description = "The AI SDK chat request (`{id, messages, trigger, ...}`), forwarded unchanged; `id` is the session id", content_type = "application/json"),
    responses(
        (status = 200, description = "The assistant message as a UI message stream, from the session's log", content_type = "text/event-stream", body = String),
        (status = 400, description = "Not a chat request (`invalid_chat_request`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`no_upstream`: no [upstream] chat_url is configured and no runtime control URL is known for the chat", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`upstream_unreachable`, `upstream_rejected` (its status), or `upstream_empty` (no message in its answer); without an upstream, the relay's `runtime_unreachable` / `runtime_rejected`", body = Problem, content_type = "application/problem+json"),
        (status = 504, description = "`no_answer`: without an upstream, the runtime started no assistant message within [upstream] start_timeout_secs", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_chat(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let bytes = read_body(&st.limits, &headers, body, MAX_BODY).await?;
    reject_duplicate_keys(&bytes)?;
    let a = answer(&st, &caller, &bytes).await?;
    Ok(super::streams::ui_response(
        &st, &caller, a.session, a.feed, a.slot,
    ))
}

/// What answers a chat request: the assistant message, in its session,
/// with the subscriber slot its stream holds.
pub(super) struct Answer {
    pub session: String,
    pub feed: MessageFeed,
    pub slot: SubscriberSlot,
}

/// The answer to a chat request (`{id, messages, trigger, ...}`, the JSON
/// `DefaultChatTransport` posts, whichever transport brought it): through
/// the upstream chat route when one is configured, else through the
/// session's runtime.
pub(super) async fn answer(
    st: &AppState,
    caller: &Caller,
    bytes: &[u8],
) -> Result<Answer, Problem> {
    let request: Value = serde_json::from_slice(bytes)
        .map_err(|e| Problem::bad_request("invalid_chat_request", e.to_string()))?;
    let session = request
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| valid_session_id(id))
        .ok_or_else(|| {
            Problem::bad_request(
                "invalid_chat_request",
                "a chat request names its chat in `id`, a valid session id",
            )
        })?
        .to_string();
    caller.require(Scope::Publish, Some(&session))?;
    caller.require(Scope::Subscribe, Some(&session))?;
    // One chat request is one request for the ingest rate limits.
    st.limits.ingest(&session, caller.token_key(), 1)?;
    let feed = match st.gateway.chat_route() {
        Some(route) => via_route(st, &session, route, bytes, &request).await?,
        None => {
            caller.require(Scope::Control, Some(&session))?;
            via_runtime(st, &session, &request).await?
        }
    };
    let slot = st.limits.subscribe(&session)?;
    Ok(Answer {
        session,
        feed,
        slot,
    })
}

/// Through the upstream chat route: the request goes there unchanged, and
/// the answer is the message its UI message stream began.
async fn via_route(
    st: &AppState,
    session: &str,
    route: (&reqwest::Client, &str),
    bytes: &[u8],
    request: &Value,
) -> Result<MessageFeed, Problem> {
    // The route answers the approvals the request responds to with its
    // tool outputs or denials: those resolve the session's actions.
    let approvals = chat::approval_responses(chat::last_message(request))
        .into_iter()
        .map(|a| (a.tool_call_id, a.approval_id))
        .collect();
    let message_id = forward(
        st,
        session,
        route,
        bytes::Bytes::copy_from_slice(bytes),
        record_user_message(st, session, request),
        approvals,
    )
    .await?;
    st.registry
        .message(session, MessagePick::Id(message_id.clone()))
        .await?
        .ok_or_else(|| Problem::not_found(format!("message {message_id} is gone")))
}

/// Forward `body` to an upstream route (while `first` makes the request's
/// own facts durable), have the gateway read its answer into `session` in
/// a task of its own (it goes on if the caller leaves; a `cancel` control,
/// or a newer request of the same session, ends it), and wait until the
/// answer has begun: what the reading began with (the UI stream's message
/// id, the AG-UI run id).
pub(super) async fn forward(
    st: &AppState,
    session: &str,
    route: (&reqwest::Client, &str),
    body: bytes::Bytes,
    first: impl std::future::Future<Output = Result<(), Problem>>,
    approvals: Vec<(String, String)>,
) -> Result<String, Problem> {
    // The request's facts are made durable while it travels to the route
    // (which takes longer): the answer is read only once both are done, so
    // the log keeps them first.
    let (recorded, sent) = tokio::join!(first, gateway::Gateway::send(route, body));
    recorded?;
    let resp = sent.map_err(failed)?;
    st.gateway
        .read_answer(st.gateway_ctx(), session, resp, approvals)
        .await
        .map_err(failed)
}

/// A gateway failure as the client sees it.
fn failed(f: gateway::Failure) -> Problem {
    match f {
        gateway::Failure::Unreachable(e) => {
            warn!(error = %e, "upstream route unreachable");
            Problem::new(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                "Upstream unreachable",
                "the upstream route could not be reached",
            )
        }
        gateway::Failure::Rejected(status) => Problem::new(
            StatusCode::BAD_GATEWAY,
            "upstream_rejected",
            "Upstream rejected",
            format!("the upstream route answered {status}"),
        ),
        gateway::Failure::Empty => Problem::new(
            StatusCode::BAD_GATEWAY,
            "upstream_empty",
            "Upstream answered nothing",
            "the upstream route's answer held nothing to apply",
        ),
    }
}

/// Without an upstream, the chat goes to the session's runtime through the
/// controls relay: approval responses in the request become decisions on
/// their actions, a new user message a `send` control; the answer is the
/// assistant message the runtime then starts (or continues), streamed from
/// the log ([`chat::runtime_answer`]). 409 when no runtime can be reached;
/// 504 `no_answer` when none starts within `[upstream] start_timeout_secs`.
async fn via_runtime(
    st: &AppState,
    session: &str,
    request: &Value,
) -> Result<MessageFeed, Problem> {
    let target = st.registry.control_target(session, None).await?;
    let url = target.control_url.clone();
    st.relay.target(url.as_deref()).map_err(|_| {
        Problem::new(
            StatusCode::CONFLICT,
            "no_upstream",
            "No upstream",
            "neither an [upstream] chat_url nor a runtime's control URL is known for this chat",
        )
    })?;
    let cx = st.gateway_ctx();
    let frames = chat::from_head(&cx, session, st.cfg.stream.replay_page).await;
    let turn = chat::runtime_turn(&cx, session, request)
        .await?
        .map_err(|e| Problem::bad_request("invalid_chat_request", e.0))?;
    for out in turn.decisions {
        super::controls::relay(st, url.as_deref(), out).await?;
    }
    if let Some(send) = turn.send {
        record_user_message(st, session, request).await?;
        super::controls::relay(st, url.as_deref(), send).await?;
    }
    let wait = Duration::from_secs(st.cfg.upstream.start_timeout_secs);
    chat::runtime_answer(&cx, session, turn.continuing, frames, wait)
        .await?
        .ok_or_else(|| {
            Problem::new(
                StatusCode::GATEWAY_TIMEOUT,
                "no_answer",
                "No answer",
                format!(
                    "the runtime started no assistant message within {}s",
                    wait.as_secs()
                ),
            )
        })
}

/// The user's message of a chat request as the session's
/// `turn.submitted` ([`chat::user_turn`]).
async fn record_user_message(st: &AppState, session: &str, request: &Value) -> Result<(), Problem> {
    let Some(event) = chat::user_turn(request) else {
        return Ok(());
    };
    record(st, session, vec![event], "invalid_chat_request").await
}

/// Make a request's own facts durable in `session` (all or none); an event
/// that does not normalise is a 400 with `code`.
pub(super) async fn record(
    st: &AppState,
    session: &str,
    events: Vec<Value>,
    code: &'static str,
) -> Result<(), Problem> {
    match gateway::record(&st.gateway_ctx(), session, events).await {
        Ok(()) => Ok(()),
        Err(gateway::RecordError::Invalid(why)) => Err(Problem::bad_request(code, why)),
        Err(gateway::RecordError::Session(e)) => Err(e.into()),
    }
}
