//! `GET /v1/chat/ws`: the server of the AI SDK's `WebSocketChatTransport`
//! (`ai` 7). The protocol is [`crate::stream::chat_ws`]'s; this door makes
//! its requests what the HTTP chat routes make them: a `send` is what
//! `POST /v1/chat` answers (the upstream chat route, or the runtime through
//! the controls relay), a `resume` what `GET /v1/chat/{id}/stream` follows
//! (the whole active message, replayed from its start). Auth per request:
//! the `authorization` header inside the frame (a browser cannot set the
//! handshake's), else the token the handshake carried (`?access_token=` or
//! the cookie); a request the token may not make gets an `error` frame.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;

use super::auth::{Authenticator, Caller};
use super::error::Problem;
use super::extract::valid_session_id;
use super::limits::SubscriberSlot;
use super::ws_upgrade::WsUpgrade;
use super::AppState;
use crate::session::MessageFeed;
use crate::stream::chat_ws::{
    self, Answerer, BoxAnswer, Chunks, Refused, ResumeRequest, SendRequest,
};

pub(super) fn router() -> axum::Router<AppState> {
    axum::Router::new().route("/v1/chat/ws", axum::routing::get(chat_ws))
}

/// Requests answered at once on one chat socket.
const MAX_REQUESTS: usize = 16;

/// Connect the AI SDK's `WebSocketChatTransport`.
#[utoipa::path(
    get,
    path = "/v1/chat/ws",
    tag = "streams",
    responses(
        (status = 101, description = "Switching to WebSocket: the `WebSocketChatTransport` protocol of the `ai` package (docs/PROTOCOL.md). The client sends `send` (`{type, requestId, id, trigger, messageId?, messages, headers, body, metadata}`), `resume` (`{type, requestId, id, headers, body, metadata}`) and `abort` (`{type, requestId}`); the server answers each request with `start`, `chunk` (`{requestId, sequence, chunk}`: a UI message chunk, sequence gapless from 0) and `end`, or `no-active`, or `error` (`{requestId, errorText, code}`). A token goes in each frame's `headers.authorization` (`Bearer <token>`) or with the handshake (`?access_token=`, the cookie)."),
        (status = 400, description = "Not a WebSocket handshake (`websocket_upgrade_required`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "The handshake carried a token that is not valid (a missing one is asked for per request instead)", body = Problem, content_type = "application/problem+json"),
        (status = 426, description = "A WebSocket handshake of a version other than 13, or a connection that cannot be upgraded", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn chat_ws(
    State(st): State<AppState>,
    caller: Result<Caller, Problem>,
    upgrade: Result<WsUpgrade, Problem>,
) -> Result<Response, Problem> {
    let upgrade = upgrade?;
    let handshake = match caller {
        Ok(c) => Some(c),
        // Browsers cannot set the handshake's headers: the token may come
        // with each request instead.
        Err(p) if p.code == "missing_token" => None,
        Err(p) => return Err(p),
    };
    let limits = chat_ws::Limits {
        heartbeat: st.heartbeat(),
        shutdown: st.shutdown.clone(),
        max_requests: MAX_REQUESTS,
    };
    let door: Arc<dyn Answerer> = Arc::new(Door {
        st: st.clone(),
        handshake,
    });
    Ok(upgrade
        .max_message(super::chat::MAX_BODY)
        .serve(&st, move |conn| chat_ws::serve(conn, door, limits)))
}

/// The chat socket's requests, answered as the HTTP chat routes answer.
struct Door {
    st: AppState,
    /// The caller of the handshake's token, if it had one.
    handshake: Option<Caller>,
}

fn refused(p: Problem) -> Refused {
    Refused::new(&p.code, p.detail)
}

impl Door {
    /// Who makes a request: its own token, else the handshake's.
    fn caller(&self, authorization: Option<&str>) -> Result<Caller, Problem> {
        match (authorization, &self.handshake) {
            (Some(a), _) => self.st.auth.caller_of(a),
            (None, Some(c)) => {
                self.st.auth.still_valid(c)?;
                Ok(c.clone())
            }
            (None, None) => Err(Authenticator::missing()),
        }
    }
}

/// An answer's chunks for the socket (see [`super::streams::ui_message`]).
fn chunks(
    st: &AppState,
    caller: &Caller,
    session: String,
    feed: MessageFeed,
    slot: SubscriberSlot,
) -> Chunks {
    Box::pin(super::streams::ui_message(
        st, caller, session, feed, slot, false,
    ))
}

impl Answerer for Door {
    fn send(&self, r: SendRequest) -> BoxAnswer {
        let st = self.st.clone();
        let caller = self.caller(r.authorization.as_deref());
        Box::pin(async move {
            let caller = caller.map_err(refused)?;
            let bytes = serde_json::to_vec(&r.chat).expect("JSON serialises");
            let a = super::chat::answer(&st, &caller, &bytes)
                .await
                .map_err(refused)?;
            Ok(Some(chunks(&st, &caller, a.session, a.feed, a.slot)))
        })
    }

    fn resume(&self, r: ResumeRequest) -> BoxAnswer {
        let st = self.st.clone();
        let caller = self.caller(r.authorization.as_deref());
        Box::pin(async move {
            let caller = caller.map_err(refused)?;
            if !valid_session_id(&r.id) {
                return Err(Refused::new(
                    "invalid_session_id",
                    "`id` is not a session id",
                ));
            }
            let found = super::streams::resumed_chat(&st, &caller, &r.id)
                .await
                .map_err(refused)?;
            Ok(found.map(|(feed, slot)| chunks(&st, &caller, r.id, feed, slot)))
        })
    }
}
