//! The Durable Streams door: `/ds/v1/stream/{path}` with `PUT` (create),
//! `POST` (append, close), `GET` (read: catch-up, long-poll, SSE), `HEAD`
//! and `DELETE`, as the protocol of `@durable-streams/*` has them
//! (docs/DURABLE-STREAMS.md). The rules are the `ds` room's; this parses
//! headers, authorises (the stream path is matched as a session id is:
//! `subscribe` to read, `publish` to write) and answers with the
//! protocol's statuses and headers, errors as problem+json.

mod answer;
mod headers;
pub mod read;
mod session;

use headers::{asked, closes, format_rfc3339, header, producer};

use axum::body::Body;
use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use axum::Router;
use bytes::Bytes;

use super::auth::{Caller, Scope};
use super::error::{refused_append, Problem};
use super::extract::read_body;
use super::AppState;
use crate::ds::model;
use crate::ds::{Append, DsError, Outcome, Producer, Refusal, Streams, View};
use crate::session::IngestOutcome;

pub(super) const NEXT_OFFSET: HeaderName = HeaderName::from_static("stream-next-offset");
pub(super) const UP_TO_DATE: HeaderName = HeaderName::from_static("stream-up-to-date");
pub(super) const CLOSED: HeaderName = HeaderName::from_static("stream-closed");
pub(super) const CURSOR: HeaderName = HeaderName::from_static("stream-cursor");
const TTL: HeaderName = HeaderName::from_static("stream-ttl");
const EXPIRES_AT: HeaderName = HeaderName::from_static("stream-expires-at");
pub(super) const SEQ: HeaderName = HeaderName::from_static("stream-seq");
const PRODUCER_ID: HeaderName = HeaderName::from_static("producer-id");
const PRODUCER_EPOCH: HeaderName = HeaderName::from_static("producer-epoch");
const PRODUCER_SEQ: HeaderName = HeaderName::from_static("producer-seq");
const EXPECTED_SEQ: HeaderName = HeaderName::from_static("producer-expected-seq");
const RECEIVED_SEQ: HeaderName = HeaderName::from_static("producer-received-seq");
const FORKED_FROM: HeaderName = HeaderName::from_static("stream-forked-from");
const FORK_OFFSET: HeaderName = HeaderName::from_static("stream-fork-offset");
const FORK_SUB_OFFSET: HeaderName = HeaderName::from_static("stream-fork-sub-offset");

/// The headers a browser may send and read on these routes (CORS).
pub(super) const REQUEST_HEADERS: [HeaderName; 11] = [
    TTL,
    EXPIRES_AT,
    SEQ,
    CLOSED,
    PRODUCER_ID,
    PRODUCER_EPOCH,
    PRODUCER_SEQ,
    axum::http::header::IF_NONE_MATCH,
    FORKED_FROM,
    FORK_OFFSET,
    FORK_SUB_OFFSET,
];
pub(super) const RESPONSE_HEADERS: [HeaderName; 12] = [
    NEXT_OFFSET,
    UP_TO_DATE,
    CLOSED,
    CURSOR,
    TTL,
    EXPIRES_AT,
    PRODUCER_EPOCH,
    PRODUCER_SEQ,
    EXPECTED_SEQ,
    RECEIVED_SEQ,
    axum::http::header::ETAG,
    axum::http::header::LOCATION,
];

/// Longest stream path.
const MAX_PATH: usize = 1024;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/ds/v1/stream/{*path}",
            put(ds_create)
                .post(ds_append)
                .get(read::ds_read)
                .head(ds_head)
                .delete(ds_delete),
        )
        .layer(axum::middleware::map_response(browser_headers))
}

/// Every answer of these routes, errors included: no MIME sniffing, and
/// readable by `fetch()` from other origins (CORS still decides who may).
async fn browser_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("cross-origin"),
    );
    r
}

/// The streams, or 404 when the server has them off.
pub(super) fn streams(st: &AppState) -> Result<&Streams, Problem> {
    st.streams.as_deref().ok_or_else(|| {
        Problem::not_found("the Durable Streams server is off ([durable_streams] enabled = false)")
    })
}

/// A stream path: not empty, not too long, no control characters, no
/// empty, `.` or `..` segment.
pub(super) fn stream_path(path: &str) -> Result<&str, Problem> {
    let ok = !path.is_empty()
        && path.len() <= MAX_PATH
        && !path.chars().any(char::is_control)
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
    ok.then_some(path)
        .ok_or_else(|| Problem::bad_request("invalid_stream_path", "not a valid stream path"))
}

fn set(r: &mut Response, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
}

/// The body of a create or append, as messages: JSON mode splits an array.
fn messages(config_json: bool, body: Bytes) -> Result<Vec<Bytes>, Problem> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    if config_json {
        return model::json_messages(&body).map_err(|e| Problem::bad_request("invalid_json", e));
    }
    Ok(vec![body])
}

/// Create a stream (`PUT`): 201 with `Location`, 200 when it exists with
/// the same configuration, 409 when with another.
#[utoipa::path(
    put,
    path = "/ds/v1/stream/{path}",
    tag = "durable-streams",
    params(("path" = String, Path, description = "The stream's path (may hold `/`)")),
    request_body(content = String, description = "Initial content (optional); the stream's content type is the request's (default application/octet-stream). Headers: Stream-TTL or Stream-Expires-At, Stream-Closed; a fork: Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset", content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "Created; `Location`, `Stream-Next-Offset`"),
        (status = 200, description = "It exists with this configuration"),
        (status = 400, description = "Bad headers or body, or a fork offset that is not the source's", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The fork's source stream does not exist", body = Problem, content_type = "application/problem+json"),
        (status = 405, description = "A session's stream (`sessions/<id>`) is not created here", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "It exists with another configuration, or was deleted while forks of it live; or the fork's source was deleted or has another content type", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over [durable_streams] max_append_bytes", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn ds_create(
    State(st): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let streams = streams(&st)?;
    let path = stream_path(&path)?;
    session::not_created(path)?;
    caller.require(Scope::Publish, Some(path))?;
    let max = st.cfg.durable_streams.max_append_bytes;
    let body = read_body(&st.limits, &headers, body, max).await?;
    let created = match streams.create(path, asked(&headers, body)?).await {
        Ok(c) => c,
        Err(DsError::SoftDeleted) => {
            return Err(Problem::new(
                StatusCode::CONFLICT,
                "stream_deleted",
                "Stream deleted",
                "the stream at this path was deleted while forks of it live; it cannot be created again until they are gone",
            ))
        }
        Err(e) => return Err(failure(e)),
    };
    let status = if created.new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut r = status.into_response();
    described(&mut r, &created.view);
    if created.new {
        let scheme =
            header(&headers, &HeaderName::from_static("x-forwarded-proto"))?.unwrap_or("http");
        if let Some(host) = header(&headers, &axum::http::header::HOST)? {
            set(
                &mut r,
                axum::http::header::LOCATION,
                &format!("{scheme}://{host}{}", uri.path()),
            );
        }
    }
    Ok(r)
}

/// The headers that describe a stream: its content type, tail, closure.
fn described(r: &mut Response, view: &View) {
    set(
        r,
        axum::http::header::CONTENT_TYPE,
        &view.state.config.content_type,
    );
    set(r, NEXT_OFFSET, &view.format(view.head));
    if view.state.closed {
        set(r, CLOSED, "true");
    }
}

/// Append to a stream (`POST`), or close it (`Stream-Closed: true`, with
/// or without a last body). On `sessions/<id>`: an ingest of events.
#[utoipa::path(
    post,
    path = "/ds/v1/stream/{path}",
    tag = "durable-streams",
    params(("path" = String, Path, description = "The stream's path; `sessions/<id>` is the session's stream, where a POST ingests events (one or an array, as `POST /v1/sessions/{id}/events` does)")),
    request_body(content = String, description = "The bytes (JSON mode: a value, or an array of messages; a session's stream: events); headers: Content-Type (the stream's), Stream-Seq, Stream-Closed, Producer-Id/Epoch/Seq", content_type = "application/octet-stream"),
    responses(
        (status = 204, description = "Appended (or closed); `Stream-Next-Offset`; with producer headers, a duplicate"),
        (status = 200, description = "Appended by an idempotent producer; `Producer-Epoch`, `Producer-Seq` (a session's stream: the ingest's answer)", body = IngestOutcome),
        (status = 400, description = "Empty body, bad JSON, bad producer headers", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A session's stream: an invalid event; nothing of the batch applied", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "A session's stream: ingest rate limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable or shutting down; nothing applied", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Stale producer epoch; `Producer-Epoch` is the current one", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such stream", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Content type mismatch, Stream-Seq regression, producer sequence gap, or the stream is closed (`Stream-Closed: true`)", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The stream was deleted while forks of it live", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over [durable_streams] max_append_bytes", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn ds_append(
    State(st): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Response> {
    let streams = streams(&st).map_err(IntoResponse::into_response)?;
    let path = stream_path(&path).map_err(IntoResponse::into_response)?;
    if let Some(id) = session::session_id(path).map_err(IntoResponse::into_response)? {
        return session::append(&st, &caller, id, &headers, body).await;
    }
    caller
        .require(Scope::Publish, Some(path))
        .map_err(IntoResponse::into_response)?;
    let parsed = async {
        let producer = producer(&headers)?;
        let close = closes(&headers)?;
        let stream_seq = header(&headers, &SEQ)?.map(str::to_string);
        let content_type = header(&headers, &axum::http::header::CONTENT_TYPE)?
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        let max = st.cfg.durable_streams.max_append_bytes;
        let body = read_body(&st.limits, &headers, body, max).await?;
        let json = content_type
            .as_deref()
            .is_some_and(|c| model::essence(c) == "application/json");
        let messages = messages(json, body.clone())?;
        if json && !body.is_empty() && messages.is_empty() {
            return Err(Problem::bad_request(
                "empty_append",
                "an empty JSON array appends nothing",
            ));
        }
        Ok(Append {
            content_type,
            messages,
            close,
            producer,
            stream_seq,
        })
    };
    let a = parsed.await.map_err(IntoResponse::into_response)?;
    let done = match streams.append(path, &a).await {
        Ok(done) => done,
        Err(DsError::Refused { refusal, view }) => return Err(refused(refusal, Some(&view))),
        Err(e) => return Err(failure(e).into_response()),
    };
    let status = match (&done.outcome, &a.producer) {
        (Outcome::Write { .. }, Some(_)) if !a.messages.is_empty() => StatusCode::OK,
        _ => StatusCode::NO_CONTENT,
    };
    let mut r = status.into_response();
    set(&mut r, NEXT_OFFSET, &done.view.format(done.view.head));
    if done.view.state.closed {
        set(&mut r, CLOSED, "true");
    }
    let producer = match done.outcome {
        Outcome::Write { producer, .. } => producer,
        Outcome::Duplicate { producer } => Some(producer),
    };
    if let Some(p) = producer {
        producer_headers(&mut r, p);
    }
    Ok(r)
}

/// `Producer-Epoch` and `Producer-Seq`: the producer as the stream
/// remembers it after an append.
fn producer_headers(r: &mut Response, p: Producer) {
    set(r, PRODUCER_EPOCH, itoa::Buffer::new().format(p.epoch));
    set(r, PRODUCER_SEQ, itoa::Buffer::new().format(p.seq));
}

/// A refused append as the protocol answers it (`view`: the stream as it
/// stands, which a session's refusals do not need).
fn refused(refusal: Refusal, view: Option<&View>) -> Response {
    let content_type = view.map(|v| v.state.config.content_type.as_str());
    let mut r = refused_append(&refusal, content_type).into_response();
    match refusal {
        Refusal::Closed => {
            set(&mut r, CLOSED, "true");
            if let Some(v) = view {
                set(&mut r, NEXT_OFFSET, &v.format(v.head));
            }
        }
        Refusal::StaleEpoch { current } => {
            set(&mut r, PRODUCER_EPOCH, itoa::Buffer::new().format(current));
        }
        Refusal::SeqGap { expected, received } => {
            set(&mut r, EXPECTED_SEQ, itoa::Buffer::new().format(expected));
            set(&mut r, RECEIVED_SEQ, itoa::Buffer::new().format(received));
        }
        _ => {}
    }
    r
}

/// A stream failure that is not a refused append.
pub(super) fn failure(e: DsError) -> Problem {
    match e {
        DsError::NotFound => Problem::not_found("no stream at this path"),
        DsError::Gone => Problem::new(
            StatusCode::GONE,
            "offset_gone",
            "Gone",
            "the data at this offset is gone (the stream it belonged to was deleted)",
        ),
        DsError::Beyond => {
            Problem::bad_request("invalid_offset", "the offset is beyond the stream's tail")
        }
        DsError::ConfigConflict { .. } => Problem::new(
            StatusCode::CONFLICT,
            "stream_exists",
            "Stream exists",
            "a stream with another configuration exists at this path",
        ),
        DsError::Refused { .. } => Problem::bad_request("invalid_append", "append refused"),
        DsError::SoftDeleted => deleted(),
        DsError::NoSource => Problem::not_found("the fork's source stream does not exist"),
        DsError::SourceDeleted => Problem::new(
            StatusCode::CONFLICT,
            "source_deleted",
            "Source deleted",
            "the fork's source stream was deleted",
        ),
        DsError::Invalid(why) => Problem::bad_request("invalid_request", why),
        DsError::Store(e) => e.into(),
    }
}

/// 410 for a stream deleted while forks of it live.
pub(super) fn deleted() -> Problem {
    Problem::new(
        StatusCode::GONE,
        "stream_deleted",
        "Gone",
        "the stream was deleted (forks of it still live)",
    )
}

/// A stream's metadata (`HEAD`): content type, tail offset, TTL or
/// expiry, closure; never cached, and it does not count as a read.
#[utoipa::path(
    head,
    path = "/ds/v1/stream/{path}",
    tag = "durable-streams",
    params(("path" = String, Path, description = "The stream's path")),
    responses(
        (status = 200, description = "`Content-Type`, `Stream-Next-Offset`, `Stream-TTL` / `Stream-Expires-At`, `Stream-Closed`"),
        (status = 400, description = "Not a valid stream path"),
        (status = 404, description = "No such stream"),
        (status = 410, description = "The stream was deleted while forks of it live"),
    )
)]
pub async fn ds_head(
    State(st): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
) -> Result<Response, Problem> {
    let streams = streams(&st)?;
    let path = stream_path(&path)?;
    if let Some(id) = session::session_id(path)? {
        caller.require(Scope::Subscribe, Some(id))?;
        return session::head(&st, id).await;
    }
    caller.require(Scope::Subscribe, Some(path))?;
    let view = streams
        .view(path)
        .await?
        .ok_or_else(|| Problem::not_found("no stream at this path"))?;
    if view.state.soft_deleted {
        return Err(deleted());
    }
    let mut r = StatusCode::OK.into_response();
    described(&mut r, &view);
    let c = &view.state.config;
    if let Some(ttl) = c.ttl_secs {
        set(&mut r, TTL, itoa::Buffer::new().format(ttl));
    }
    if let Some(at) = c.expires_at_ms.and_then(format_rfc3339) {
        set(&mut r, EXPIRES_AT, &at);
    }
    set(&mut r, axum::http::header::CACHE_CONTROL, "no-store");
    Ok(r)
}

/// Delete a stream: its data goes.
#[utoipa::path(
    delete,
    path = "/ds/v1/stream/{path}",
    tag = "durable-streams",
    params(("path" = String, Path, description = "The stream's path")),
    responses(
        (status = 204, description = "Deleted (marked deleted while forks of it live)"),
        (status = 400, description = "Not a valid stream path", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such stream", body = Problem, content_type = "application/problem+json"),
        (status = 405, description = "A session's stream (`sessions/<id>`) is deleted with DELETE /v1/sessions/{id}", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "Already deleted; forks of it still live", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn ds_delete(
    State(st): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
) -> Result<StatusCode, Problem> {
    let streams = streams(&st)?;
    let path = stream_path(&path)?;
    session::not_created(path)?;
    caller.require(Scope::Publish, Some(path))?;
    match streams.delete(path).await {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(Problem::not_found("no stream at this path")),
        Err(e) => Err(failure(e)),
    }
}
