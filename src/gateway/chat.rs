//! An AI SDK chat request (`{id, messages, trigger, ...}`) as the gateway
//! reads it: the user's new message as a session fact, the approval
//! responses it carries, and, without an upstream route, the controls it
//! becomes for the session's runtime and the assistant message that
//! answers it (found through the one replay-then-live machine, from the
//! session's head before anything was relayed); and what a `useChat`
//! resume follows.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::{json, Value};

use super::Ctx;
use crate::control::{action_request, control_request, Invalid, Outgoing};
use crate::frame::{FrameKind, SharedFrame};
use crate::session::{MessageFeed, MessagePick, SessionError};
use crate::store::SessionMeta;
use crate::stream::StartAt;

/// An approval answered in the chat (`addToolApprovalResponse`).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalResponse {
    pub tool_call_id: String,
    pub approval_id: String,
    pub approved: bool,
    pub reason: Option<String>,
}

/// The last message of a chat request.
pub fn last_message(request: &Value) -> Option<&Value> {
    request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
}

/// The approval responses in a message's tool parts (an assistant
/// message's parts in the `approval-responded` state).
pub fn approval_responses(message: Option<&Value>) -> Vec<ApprovalResponse> {
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
            Some(ApprovalResponse {
                tool_call_id: p.get("toolCallId")?.as_str()?.to_string(),
                approval_id: a.get("id")?.as_str()?.to_string(),
                approved: a.get("approved")?.as_bool()?,
                reason: a.get("reason").and_then(Value::as_str).map(str::to_string),
            })
        })
        .collect()
}

/// The text of a UI message (its text parts, joined).
pub fn user_text(m: &Value) -> String {
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
/// user's and has an id) as the session's `turn.submitted`, deduplicated by
/// its id.
pub fn user_turn(request: &Value) -> Option<Value> {
    let last =
        last_message(request).filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    let id = last
        .get("id")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())?;
    Some(
        json!({"id": format!("chat-user:{id}"), "type": "turn.submitted",
                "turnId": id, "messageId": id, "payload": {"text": user_text(last)}}),
    )
}

/// What a chat request becomes for the session's runtime when no upstream
/// route is configured.
#[derive(Debug)]
pub struct RuntimeTurn {
    /// Decisions on the still-pending actions the request's approval
    /// responses answer, in order.
    pub decisions: Vec<Outgoing>,
    /// A `send` control for the user's new message, if the request has one
    /// (its `turn.submitted` is recorded before it is relayed).
    pub send: Option<Outgoing>,
    /// The assistant message the decisions continue.
    pub continuing: Option<String>,
}

/// The controls a chat request becomes for the session's runtime.
pub async fn runtime_turn(
    cx: &Ctx,
    session: &str,
    request: &Value,
) -> Result<Result<RuntimeTurn, Invalid>, SessionError> {
    let last = last_message(request);
    let mut turn = RuntimeTurn {
        decisions: Vec::new(),
        send: None,
        continuing: None,
    };
    for a in approval_responses(last) {
        let t = cx
            .registry
            .control_target(session, Some(&a.approval_id))
            .await?;
        if t.action_status.as_deref() != Some("pending") {
            continue;
        }
        let mut body = json!({"decision": if a.approved { "approve" } else { "reject" },
                              "requestId": format!("chat-approval:{}", a.approval_id)});
        if let Some(r) = a.reason {
            body["message"] = r.into();
        }
        match action_request(session, &a.approval_id, body.to_string().as_bytes()) {
            Ok(out) => turn.decisions.push(out),
            Err(e) => return Ok(Err(e)),
        }
        turn.continuing = last
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if let Some(user) = last.filter(|m| m.get("role").and_then(Value::as_str) == Some("user")) {
        let id = user.get("id").and_then(Value::as_str).unwrap_or_default();
        let body = json!({"type": "send", "requestId": format!("chat-send:{id}"),
                          "messageId": id, "message": user_text(user)});
        match control_request(session, body.to_string().as_bytes()) {
            Ok(out) => turn.send = Some(out),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(turn))
}

/// The session's frames from its head now: taken before anything is
/// relayed, so no start of the runtime's answer slips by (a lagging feed
/// is caught up from the store, never skipped).
pub async fn from_head(
    cx: &Ctx,
    session: &str,
    page: usize,
) -> impl Stream<Item = SharedFrame> + Send + 'static {
    let meta = cx.registry.store().meta(session).await.ok().flatten();
    from_meta(cx, session, meta.as_ref(), page)
}

/// The session's frames after the head `meta` names (from the start when
/// there is none).
fn from_meta(
    cx: &Ctx,
    session: &str,
    meta: Option<&SessionMeta>,
    page: usize,
) -> impl Stream<Item = SharedFrame> + Send + 'static {
    let from = match meta {
        Some(m) => StartAt {
            cursor: Some(m.head),
            epoch: Some(m.epoch.clone()),
        },
        None => StartAt {
            cursor: Some(0),
            epoch: None,
        },
    };
    crate::stream::frames(cx.registry.clone(), session.to_string(), from, page)
}

/// The assistant message that answers a runtime turn: the one the
/// decisions continue, if it still streams, else the next one that starts
/// in `frames` within `wait` (`None`: none did).
pub async fn runtime_answer(
    cx: &Ctx,
    session: &str,
    continuing: Option<String>,
    frames: impl Stream<Item = SharedFrame>,
    wait: Duration,
) -> Result<Option<MessageFeed>, SessionError> {
    if let Some(id) = continuing {
        let feed = cx.registry.message(session, MessagePick::Id(id)).await?;
        if let Some(f) = feed.filter(|f| !f.message.is_finished()) {
            return Ok(Some(f));
        }
    }
    let frames = std::pin::pin!(frames);
    let Ok(Some(id)) = tokio::time::timeout(wait, next_assistant_start(frames)).await else {
        return Ok(None);
    };
    cx.registry.message(session, MessagePick::Id(id)).await
}

/// Runtime statuses in which an answer is on its way: a turn accepted
/// and awaiting its run, or a run working. (Waiting for a person is not:
/// no answer starts until someone acts.)
const ANSWERING: &[&str] = &["accepted", "routing", "preparing", "running"];

/// What a `useChat` resume (`GET /v1/chat/{id}/stream`) follows: the
/// assistant message still streaming; or, while an answer is on its way
/// (the user's turn accepted, its run started, nothing said yet), the one
/// that starts within `wait`. `None`: nothing to resume.
pub async fn resumed_answer(
    cx: &Ctx,
    session: &str,
    page: usize,
    wait: Duration,
) -> Result<Option<MessageFeed>, SessionError> {
    let streaming = cx.registry.message(session, MessagePick::Streaming).await?;
    if streaming.is_some() {
        return Ok(streaming);
    }
    // From the head, then a second look: an answer that started in
    // between is streaming now, one that starts after is in the frames.
    // Whether one is on its way is what the session said at that head.
    let meta = cx.registry.store().meta(session).await?;
    let frames = from_meta(cx, session, meta.as_ref(), page);
    let streaming = cx.registry.message(session, MessagePick::Streaming).await?;
    if streaming.is_some() {
        return Ok(streaming);
    }
    let status = meta
        .filter(|m| !m.deleted)
        .and_then(|m| crate::session::Listing::of_meta(&m).status);
    if !status.is_some_and(|s| ANSWERING.contains(&s.as_str())) {
        return Ok(None);
    }
    runtime_answer(cx, session, None, frames, wait).await
}

/// The id of the next assistant message that starts in the session's
/// frames (`None` when they end).
async fn next_assistant_start(
    mut frames: impl Stream<Item = SharedFrame> + Unpin,
) -> Option<String> {
    while let Some(f) = frames.next().await {
        if f.kind != FrameKind::Delta {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_responses_come_from_an_assistant_messages_responded_parts() {
        let m = json!({"role": "assistant", "parts": [
            {"type": "tool-x", "toolCallId": "c1", "state": "approval-responded",
             "approval": {"id": "a1", "approved": false, "reason": "no"}},
            {"type": "tool-y", "toolCallId": "c2", "state": "approval-requested",
             "approval": {"id": "a2"}},
        ]});
        assert_eq!(
            approval_responses(Some(&m)),
            vec![ApprovalResponse {
                tool_call_id: "c1".into(),
                approval_id: "a1".into(),
                approved: false,
                reason: Some("no".into()),
            }]
        );
        let user = json!({"role": "user", "parts": m["parts"].clone()});
        assert!(approval_responses(Some(&user)).is_empty());
    }

    #[test]
    fn a_user_turn_needs_the_users_message_with_an_id() {
        let r = json!({"messages": [{"id": "u1", "role": "user",
            "parts": [{"type": "text", "text": "a"}, {"type": "file"}, {"type": "text", "text": "b"}]}]});
        let e = user_turn(&r).expect("a turn");
        assert_eq!(e["id"], "chat-user:u1");
        assert_eq!(e["payload"]["text"], "ab");
        let no_id = json!({"messages": [{"role": "user", "parts": []}]});
        assert!(user_turn(&no_id).is_none());
        let assistant = json!({"messages": [{"id": "x", "role": "assistant", "parts": []}]});
        assert!(user_turn(&assistant).is_none());
    }
}
