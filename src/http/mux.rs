//! Many sessions on one connection (docs/STREAMS.md): `GET /v1/streams`
//! (SSE, the session set of the URL, one `Last-Event-ID` that resumes each
//! session from its own position) and `GET /v1/streams/ws` (WebSocket,
//! `subscribe` / `unsubscribe` as the client goes). Each session is
//! authorised and counted against the stream limits on its own.

use std::collections::HashSet;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::extract::{valid_session_id, MAX_SESSION_ID, Q};
use super::ws_upgrade::WsUpgrade;
use super::AppState;
use crate::stream::cursor::{parse as parse_cursor, resume_point};
use crate::stream::mux::{self, ws::Admit, ws::Refusal, Frames, Member, Positions};
use crate::stream::{self, sse, StartAt};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/streams", get(streams_sse))
        .route("/v1/streams/ws", get(streams_ws))
}

/// The sessions of a multiplexed stream and where each resumes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MuxQuery {
    /// Session ids, comma-separated (a comma inside an id is sent as `%2C`);
    /// at least one, at most `limits.max_sessions_per_stream`, no repeats.
    /// Optional on the WebSocket, whose client may subscribe later.
    pub sessions: Option<String>,
    /// Resume each session from its position: an SSE id of this stream
    /// (`<epoch>:<cursor>` or empty per session, comma-separated, in the
    /// order of `sessions`); `Last-Event-ID` wins when both are sent.
    pub cursor: Option<String>,
}

/// The session ids of the raw query's `sessions`, split before they are
/// percent-decoded, so that an id may hold a comma.
fn session_list(uri: &Uri, max: usize) -> Result<Vec<String>, Problem> {
    let raw = uri
        .query()
        .unwrap_or("")
        .rsplit('&')
        .find_map(|kv| kv.strip_prefix("sessions="))
        .unwrap_or("");
    if raw.is_empty() {
        return Ok(Vec::new());
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for piece in raw.split(',') {
        let id = percent_encoding::percent_decode_str(piece)
            .decode_utf8()
            .map(|s| s.into_owned())
            .unwrap_or_default();
        if !valid_session_id(&id) {
            return Err(Problem::bad_request(
                "invalid_session_id",
                format!(
                    "`{}` in `sessions` is not a session id (1 to {MAX_SESSION_ID} printable characters without spaces)",
                    piece.escape_debug()
                ),
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(Problem::bad_request(
                "invalid_sessions",
                format!(
                    "session `{}` is named twice in `sessions`",
                    id.escape_debug()
                ),
            ));
        }
        out.push(id);
    }
    if out.len() > max {
        return Err(too_many_sessions(max));
    }
    Ok(out)
}

fn too_many_sessions(max: usize) -> Problem {
    Problem::bad_request(
        "too_many_sessions",
        format!("one stream follows at most {max} sessions (limits.max_sessions_per_stream)"),
    )
}

fn invalid_cursor(detail: String) -> Problem {
    Problem::bad_request("invalid_cursor", detail)
}

/// One session's resume point from its piece of a stream id.
fn start_at(piece: &str) -> Result<StartAt, Problem> {
    if piece.is_empty() {
        return Ok(StartAt::default());
    }
    let (epoch, cursor) = parse_cursor(piece).ok_or_else(|| {
        invalid_cursor(format!(
            "position `{}` is neither `<epoch>:<cursor>`, a bare cursor nor empty",
            piece.escape_debug()
        ))
    })?;
    Ok(StartAt {
        cursor: Some(cursor),
        epoch: epoch.map(str::to_string),
    })
}

/// Each session's resume point from `Last-Event-ID` or `?cursor=`.
fn positions(headers: &HeaderMap, q: &MuxQuery, n: usize) -> Result<Vec<StartAt>, Problem> {
    let Some(raw) = resume_point(headers, q.cursor.as_deref()) else {
        return Ok(vec![StartAt::default(); n]);
    };
    let pieces: Vec<&str> = raw.split(',').collect();
    if pieces.len() != n {
        return Err(invalid_cursor(format!(
            "the stream id holds {} positions for {n} sessions",
            pieces.len()
        )));
    }
    pieces.into_iter().map(start_at).collect()
}

/// Open one session's frames for `caller`, within the stream limits.
fn open(st: &AppState, caller: &Caller, session: &str, from: StartAt) -> Result<Frames, Problem> {
    caller.require(Scope::Subscribe, Some(session))?;
    let slot = st.limits.subscribe(session)?;
    let frames = stream::frames(
        st.registry.clone(),
        session.to_string(),
        from,
        st.cfg.stream.replay_page,
    );
    Ok(Box::pin(stream::holding(frames, slot)))
}

/// Open every session of the URL, or none: a refusal of one (naming it)
/// refuses the request.
fn open_all(
    st: &AppState,
    caller: &Caller,
    ids: &[String],
    from: Vec<StartAt>,
) -> Result<Vec<(Member, Frames)>, Problem> {
    ids.iter()
        .zip(from)
        .map(|(id, at)| {
            open(st, caller, id, at)
                .map(|f| (Member::new(id), f))
                .map_err(|mut p| {
                    p.detail = format!("session `{}`: {}", id.escape_debug(), p.detail);
                    p
                })
        })
        .collect()
}

/// Server-Sent Events of many sessions: each event is a session frame with
/// `sessionId`; its id holds every session's position.
#[utoipa::path(
    get,
    path = "/v1/streams",
    tag = "streams",
    params(
        ("Last-Event-ID" = Option<String>, Header, description = "Resume each session from its position: an SSE id of this stream"),
        MuxQuery
    ),
    responses(
        (status = 200, description = "An endless `text/event-stream` of the sessions' frames, each with `sessionId` first; `id` holds every session's `<epoch>:<cursor>` (or nothing yet), comma-separated in the order of `sessions`", content_type = "text/event-stream", body = String),
        (status = 400, description = "No sessions, an invalid or repeated session id, too many sessions, or an invalid cursor", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn streams_sse(
    State(st): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    Q(q): Q<MuxQuery>,
) -> Result<Response, Problem> {
    let ids = session_list(&uri, st.cfg.limits.max_sessions_per_stream)?;
    if ids.is_empty() {
        return Err(Problem::bad_request(
            "invalid_sessions",
            "name the sessions to follow: `?sessions=a,b,c`",
        ));
    }
    let from = positions(&headers, &q, ids.len())?;
    let start = Positions::from(
        from.iter()
            .map(|s| s.cursor.map(|c| (s.epoch.clone().unwrap_or_default(), c)))
            .collect(),
    );
    let (members, frames): (Vec<Member>, Vec<Frames>) =
        open_all(&st, &caller, &ids, from)?.into_iter().unzip();
    let n = members.len();
    let tagged = stream::until_expiry(mux::merge(frames), caller.exp, mux::farewell(n));
    let bytes = Box::pin(mux::sse_bytes(members, start, tagged));
    Ok(sse::bytes_response(
        bytes,
        st.heartbeat(),
        st.shutdown.clone(),
    ))
}

/// Subscriptions of a multiplexed WebSocket, checked as on SSE.
struct Admission {
    st: AppState,
    caller: Caller,
}

impl Admit for Admission {
    fn admit(
        &mut self,
        session: &str,
        cursor: Option<&str>,
        held: usize,
    ) -> Result<Frames, Refusal> {
        let refusal = |p: Problem| Refusal {
            code: p.code.into_owned(),
            detail: p.detail,
        };
        if !valid_session_id(session) {
            return Err(Refusal {
                code: "invalid_session_id".into(),
                detail: format!(
                    "a session id is 1 to {MAX_SESSION_ID} printable characters without spaces"
                ),
            });
        }
        let max = self.st.cfg.limits.max_sessions_per_stream;
        if held >= max {
            return Err(refusal(too_many_sessions(max)));
        }
        let from = start_at(cursor.unwrap_or("")).map_err(refusal)?;
        open(&self.st, &self.caller, session, from).map_err(refusal)
    }
}

/// WebSocket of many sessions: `subscribe` / `unsubscribe` messages, each
/// session's frames with `sessionId`.
#[utoipa::path(
    get,
    path = "/v1/streams/ws",
    tag = "streams",
    params(MuxQuery),
    responses(
        (status = 101, description = "Switching to WebSocket. The client sends `{\"type\":\"subscribe\",\"sessionId\",\"cursor\"?}` and `{\"type\":\"unsubscribe\",\"sessionId\"}`; the server sends each session's frames with `sessionId`, and `subscribed`, `unsubscribed` and `error` (`{type, sessionId, code, detail}`) messages"),
        (status = 400, description = "An invalid or repeated session id, too many sessions, or an invalid cursor in the URL", body = Problem, content_type = "application/problem+json"),
        (status = 426, description = "A WebSocket handshake of a version other than 13 (the response has `Sec-WebSocket-Version: 13`), or a connection that cannot be upgraded", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn streams_ws(
    State(st): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    Q(q): Q<MuxQuery>,
    upgrade: Result<WsUpgrade, Problem>,
) -> Result<Response, Problem> {
    let upgrade = upgrade?;
    let ids = session_list(&uri, st.cfg.limits.max_sessions_per_stream)?;
    let from = positions(&headers, &q, ids.len())?;
    let initial = open_all(&st, &caller, &ids, from)?;
    let limits = mux::ws::Limits {
        heartbeat: st.heartbeat(),
        shutdown: st.shutdown.clone(),
        exp: caller.exp,
    };
    let admit = Admission {
        st: st.clone(),
        caller,
    };
    Ok(upgrade.serve(&st, move |conn| {
        mux::ws::serve(conn, admit, initial, limits)
    }))
}
