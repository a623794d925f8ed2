//! Extractors whose rejections are problem+json: the validated session id of
//! the path, and query strings.

use axum::extract::{FromRequestParts, Query, RawPathParams};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::Problem;

/// Read a request body of at most `max` bytes: 413 `body_too_large` past it
/// (a declared `Content-Length` over the limit is refused before reading),
/// 408 `body_timeout` when the whole body does not arrive within the
/// limiter's deadline (a trickle counts as much as a stall), 503
/// `server_busy` when the bodies being read hold the whole budget, 400
/// `body_read_failed` when the connection fails mid-body.
pub async fn read_body(
    limits: &super::limits::Limiter,
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
    max: usize,
) -> Result<bytes::Bytes, Problem> {
    let too_large = || {
        Problem::payload_too_large(
            "body_too_large",
            format!("request body is over the limit of {max} bytes"),
        )
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > max) {
        return Err(too_large());
    }
    let _reserved = limits.body_budget(declared.unwrap_or(max))?;
    let read = tokio::time::timeout(limits.body_timeout, axum::body::to_bytes(body, max));
    let Ok(read) = read.await else {
        metrics::counter!("projector_limit_hits_total", "limit" => "body_timeout").increment(1);
        return Err(Problem::new(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            "Request timeout",
            format!(
                "the request body did not arrive within {} s",
                limits.body_timeout.as_secs()
            ),
        ));
    };
    read.map_err(|e| {
        if std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
        {
            too_large()
        } else {
            Problem::bad_request("body_read_failed", "the request body could not be read")
        }
    })
}

/// 400 `duplicate_key` when a JSON body repeats a key in an object (I-JSON):
/// checked before a body is read as a request, so that no two readers of it
/// can disagree on a value. Other flaws are left to the body's own parser.
pub fn reject_duplicate_keys(bytes: &[u8]) -> Result<(), Problem> {
    match crate::event::strict::from_slice(bytes) {
        Err(e) => match crate::event::strict::duplicate_key(&e) {
            Some(key) => Err(Problem::bad_request(
                "duplicate_key",
                format!(
                    "an object repeats the key `{key}` (line {}, column {}); JSON keys must be unique",
                    e.line(),
                    e.column()
                ),
            )),
            None => Ok(()),
        },
        Ok(_) => Ok(()),
    }
}

/// Longest accepted session id.
pub const MAX_SESSION_ID: usize = 256;

/// A session id from the path: 1 to 256 printable characters, no spaces,
/// control characters or invisible format characters (zero-width,
/// bidirectional overrides and isolates: they would let one id pose as
/// another in a listing); `/` is allowed when sent as `%2F`, for ids like
/// `team-a/run-1`.
#[derive(Debug, Clone)]
pub struct SessionId(pub String);

/// Validate a session id.
pub fn valid_session_id(id: &str) -> bool {
    // Most ids are printable ASCII, told apart a byte at a time; others
    // are read as characters.
    !id.is_empty()
        && id.len() <= MAX_SESSION_ID
        && (id.bytes().all(|b| b.is_ascii_graphic())
            || id
                .chars()
                .all(|c| !c.is_control() && !c.is_whitespace() && !is_invisible_format(c)))
}

/// Unicode format characters that render as nothing or reorder text: soft
/// hyphen, Arabic letter mark, zero-width space/joiners, LRM/RLM, bidi
/// embeddings, overrides and isolates, invisible operators, the BOM,
/// interlinear annotation marks.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// A path parameter by name, with a problem+json rejection.
async fn path_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<String, Problem> {
    // The router's own decoded params, not deserialized into strings of
    // their own (a `Vec` and two strings per param, 1% of a single-event
    // POST's instructions, docs/BENCHMARKS.md).
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|e| Problem::bad_request("invalid_path", e.body_text()))?;
    params
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .ok_or_else(|| Problem::bad_request("invalid_path", format!("missing {name}")))
}

/// A message id from the path (same rules as a session id).
#[derive(Debug, Clone)]
pub struct MessageId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for MessageId {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = path_param(parts, state, "message_id").await?;
        if !valid_session_id(&id) {
            return Err(Problem::bad_request(
                "invalid_message_id",
                format!(
                    "a message id is 1 to {MAX_SESSION_ID} printable characters without spaces"
                ),
            ));
        }
        Ok(MessageId(id))
    }
}

/// An action id from the path (same rules as a session id).
#[derive(Debug, Clone)]
pub struct ActionId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ActionId {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = path_param(parts, state, "action_id").await?;
        if !valid_session_id(&id) {
            return Err(Problem::bad_request(
                "invalid_action_id",
                format!(
                    "an action id is 1 to {MAX_SESSION_ID} printable characters without spaces"
                ),
            ));
        }
        Ok(ActionId(id))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SessionId {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = path_param(parts, state, "session_id").await?;
        if !valid_session_id(&id) {
            return Err(Problem::bad_request(
                "invalid_session_id",
                format!(
                    "a session id is 1 to {MAX_SESSION_ID} printable characters without spaces"
                ),
            ));
        }
        Ok(SessionId(id))
    }
}

/// `Query<T>` with a problem+json rejection.
#[derive(Debug, Clone)]
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Q<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Q(v))
            .map_err(|e| Problem::bad_request("invalid_query", e.body_text()))
    }
}
