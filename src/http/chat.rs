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
use serde_json::{json, Value};
use tracing::{instrument, warn};

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::extract::{read_body, reject_duplicate_keys, valid_session_id};
use super::AppState;
use crate::gateway;
use crate::session::MessagePick;
use crate::stream::StartAt;

/// Largest chat request body (the whole conversation is in it).
const MAX_BODY: usize = 4 * 1024 * 1024;

pub(super) fn router() -> Router<AppState> {
    Router::new().route(
        "/v1/chat",
        post(post_chat).layer(axum::extract::DefaultBodyLimit::disable()),
    )
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
#[instrument(skip_all)]
pub async fn post_chat(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let bytes = read_body(&st.limits, &headers, body, MAX_BODY).await?;
    reject_duplicate_keys(&bytes)?;
    let request: Value = serde_json::from_slice(&bytes)
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
    let Some((client, url)) = st.gateway.chat_route() else {
        caller.require(Scope::Control, Some(&session))?;
        return via_runtime(&st, &caller, &session, &request).await;
    };
    // The route answers the approvals the request responds to with its
    // tool outputs or denials: those resolve the session's actions.
    let last = request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last());
    let approvals = approval_responses(last)
        .into_iter()
        .map(|(tcid, aid, _, _)| (tcid, aid))
        .collect();
    let message_id = forward(
        &st,
        &session,
        (client, url),
        bytes,
        record_user_message(&st, &session, &request),
        approvals,
    )
    .await?;
    let slot = st.limits.subscribe(&session)?;
    let feed = st
        .registry
        .message(&session, MessagePick::Id(message_id.clone()))
        .await?
        .ok_or_else(|| Problem::not_found(format!("message {message_id} is gone")))?;
    Ok(super::streams::ui_response(
        &st, &caller, session, feed, slot,
    ))
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
/// the log. 409 when no runtime can be reached; 504 `no_answer` when none
/// starts within `[upstream] start_timeout_secs`.
async fn via_runtime(
    st: &AppState,
    caller: &Caller,
    session: &str,
    request: &Value,
) -> Result<Response, Problem> {
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
    // The session from its head now, before anything is relayed: the one
    // replay-then-live machine then gives every frame after it, so no start
    // of the runtime's answer slips by (a lagging feed is caught up from
    // the store, never skipped).
    let from = match st.registry.store().meta(session).await {
        Ok(Some(m)) => StartAt {
            cursor: Some(m.head),
            epoch: Some(m.epoch),
        },
        _ => StartAt {
            cursor: Some(0),
            epoch: None,
        },
    };
    let mut frames = Box::pin(crate::stream::frames(
        st.registry.clone(),
        session.to_string(),
        from,
        st.cfg.stream.replay_page,
    ));
    let messages = request.get("messages").and_then(Value::as_array);
    let last = messages.and_then(|m| m.last());
    let mut continuing = None;
    for (_, approval_id, approved, reason) in approval_responses(last) {
        let t = st
            .registry
            .control_target(session, Some(&approval_id))
            .await?;
        if t.action_status.as_deref() != Some("pending") {
            continue;
        }
        let mut body = json!({"decision": if approved { "approve" } else { "reject" },
                              "requestId": format!("chat-approval:{approval_id}")});
        if let Some(r) = reason {
            body["message"] = r.into();
        }
        let out =
            crate::control::action_request(session, &approval_id, body.to_string().as_bytes())
                .map_err(|e| Problem::bad_request("invalid_chat_request", e.0))?;
        super::controls::relay(st, url.as_deref(), out).await?;
        continuing = last
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if last.and_then(|m| m.get("role")).and_then(Value::as_str) == Some("user") {
        record_user_message(st, session, request).await?;
        let user = last.expect("a last message");
        let id = user.get("id").and_then(Value::as_str).unwrap_or_default();
        let body = json!({"type": "send", "requestId": format!("chat-send:{id}"),
                          "messageId": id, "message": user_text(user)});
        let out = crate::control::control_request(session, body.to_string().as_bytes())
            .map_err(|e| Problem::bad_request("invalid_chat_request", e.0))?;
        super::controls::relay(st, url.as_deref(), out).await?;
    }
    // The answer: the assistant message the approvals continue, if it still
    // streams, else the next one the runtime starts.
    let wait = Duration::from_secs(st.cfg.upstream.start_timeout_secs);
    let pick = match continuing {
        Some(id) => st
            .registry
            .message(session, MessagePick::Id(id))
            .await?
            .filter(|f| !f.message.is_finished()),
        None => None,
    };
    let feed = match pick {
        Some(f) => f,
        None => {
            let id = tokio::time::timeout(wait, next_assistant_start(&mut frames))
                .await
                .ok()
                .flatten()
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
                })?;
            st.registry
                .message(session, MessagePick::Id(id.clone()))
                .await?
                .ok_or_else(|| Problem::not_found(format!("message {id} is gone")))?
        }
    };
    drop(frames);
    let slot = st.limits.subscribe(session)?;
    Ok(super::streams::ui_response(
        st,
        caller,
        session.to_string(),
        feed,
        slot,
    ))
}

/// The id of the next assistant message that starts in the session's
/// frames (`None` when they end).
async fn next_assistant_start(
    frames: &mut (impl futures_util::Stream<Item = crate::frame::SharedFrame> + Unpin),
) -> Option<String> {
    use futures_util::StreamExt;
    while let Some(f) = frames.next().await {
        if f.kind != crate::frame::FrameKind::Delta {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&f.json) else {
            continue;
        };
        let starts = v["chunks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["role"] == "assistant" && e["chunk"]["type"] == "start");
        if let Some(id) = starts.and_then(|e| e["messageId"].as_str()) {
            return Some(id.to_string());
        }
    }
    None
}

/// The approval responses (`addToolApprovalResponse`) in a message's tool
/// parts: `(toolCallId, approval id, approved, reason)`.
fn approval_responses(message: Option<&Value>) -> Vec<(String, String, bool, Option<String>)> {
    let Some(parts) = message
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .and_then(|m| m.get("parts"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    parts
        .iter()
        .filter(|p| p.get("state").and_then(Value::as_str) == Some("approval-responded"))
        .filter_map(|p| {
            let a = p.get("approval")?;
            Some((
                p.get("toolCallId")?.as_str()?.to_string(),
                a.get("id")?.as_str()?.to_string(),
                a.get("approved")?.as_bool()?,
                a.get("reason").and_then(Value::as_str).map(str::to_string),
            ))
        })
        .collect()
}

/// The text of a UI message (its text parts, joined).
fn user_text(m: &Value) -> String {
    m.get("parts")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

/// The user's message of a chat request (the last message, when it is the
/// user's) as the session's `turn.submitted`, deduplicated by its id.
async fn record_user_message(st: &AppState, session: &str, request: &Value) -> Result<(), Problem> {
    let Some(last) = request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    else {
        return Ok(());
    };
    let Some(id) = last
        .get("id")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())
    else {
        return Ok(());
    };
    let text = user_text(last);
    let event = json!({"id": format!("chat-user:{id}"), "type": "turn.submitted",
                       "turnId": id, "messageId": id, "payload": {"text": text}});
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
