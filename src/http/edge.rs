//! The layer every route's request passes through last before its
//! handler: the request gets its id (`X-Request-Id`, the caller's or a new
//! one, sent back on the response), is served in its tracing span (`http`:
//! method, path, request id, session id; joined to the caller's trace when
//! traces are exported), an error response that is not problem+json (a
//! framework rejection) becomes one, an event stream is gzipped when the
//! client accepts it (`compress`), and the request is counted (`observe`)
//! and logged as tower-http's trace layer did (`debug` when finished,
//! `error` for a server error).
//!
//! One tower layer with one boxed future per request. As three axum
//! middlewares (`from_fn`, `map_response`) each request paid a boxed
//! future, a boxed clone of the route and a boxed `Next`, three times
//! over, and tower-http's trace layer wrapped every body. The span covers
//! the making of the response, not the writing of a streamed body (an
//! event stream is written by `serve::events` outside the layers).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use tower::{Layer, Service};
use tracing::Instrument;

use super::compress;
use super::error::Problem;
use super::observe::Seen;
use super::{AppState, REQUEST_ID};

/// Wraps every route in [`Edge`].
#[derive(Clone)]
pub(super) struct EdgeLayer {
    state: AppState,
}

impl EdgeLayer {
    pub(super) fn new(state: AppState) -> Self {
        EdgeLayer { state }
    }
}

impl<S> Layer<S> for EdgeLayer {
    type Service = Edge<S>;

    fn layer(&self, inner: S) -> Edge<S> {
        Edge {
            inner,
            state: self.state.clone(),
        }
    }
}

/// A route behind the edge.
#[derive(Clone)]
pub(super) struct Edge<S> {
    inner: S,
    state: AppState,
}

impl<S> Service<Request> for Edge<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let id = request_id(&mut req);
        let span = span_of(&req);
        let seen = Seen::of(&req);
        let gzip = compress::wanted(&self.state, req.headers());
        let response = span.in_scope(|| self.inner.call(req));
        Box::pin(
            async move {
                let Ok(resp) = response.await;
                let mut resp = compress::event_stream(gzip, problem_for_plain_errors(resp).await);
                resp.headers_mut().entry(REQUEST_ID).or_insert(id);
                let status = resp.status();
                let latency_ms = seen.record(status).as_secs_f64() * 1e3;
                if status.is_server_error() {
                    tracing::error!(status = status.as_u16(), latency_ms, "response failed");
                } else {
                    tracing::debug!(
                        status = status.as_u16(),
                        latency_ms,
                        "finished processing request"
                    );
                }
                Ok(resp)
            }
            .instrument(span),
        )
    }
}

/// The request's id: the caller's `X-Request-Id`, else a new UUID set on
/// the request (its span names it); the response carries it back. Here
/// rather than in tower-http's two request-id layers, which each wrapped
/// every request and response and added an extension nothing read.
fn request_id(req: &mut Request) -> HeaderValue {
    if let Some(id) = req.headers().get(&REQUEST_ID) {
        return id.clone();
    }
    let mut buf = uuid::Uuid::encode_buffer();
    let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
    let id = HeaderValue::from_str(text).expect("a UUID is a header value");
    req.headers_mut().insert(REQUEST_ID, id.clone());
    id
}

/// The request's span.
fn span_of(req: &Request) -> tracing::Span {
    let request_id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let span = tracing::info_span!(
        "http",
        method = %req.method(),
        path = %req.uri().path(),
        request_id = %request_id,
        session_id = %session_of(req.uri().path()),
    );
    crate::telemetry::join_caller(&span, req.headers());
    span
}

/// Every error the server writes is problem+json: an error response of
/// another type (an extractor's rejection) becomes a problem with the same
/// status, its text as the detail and a code named after the status.
async fn problem_for_plain_errors(resp: Response) -> Response {
    let status = resp.status();
    let is_problem = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .unwrap_or_default();
    let code = match status.as_u16() {
        400 => "bad_request",
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "request_timeout",
        413 => "body_too_large",
        415 => "unsupported_media_type",
        426 => "upgrade_required",
        _ if status.is_server_error() => "internal",
        _ => "client_error",
    };
    let mut problem = Problem::new(
        status,
        code,
        status.canonical_reason().unwrap_or("Error"),
        String::from_utf8_lossy(&text).trim().to_string(),
    );
    problem.retry_after = parts
        .headers
        .get(axum::http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let mut out = problem.into_response();
    for (name, value) in &parts.headers {
        if name != CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().entry(name).or_insert(value.clone());
        }
    }
    out
}

/// The session id of a `/v1/sessions/{id}/...` path, for log spans.
fn session_of(path: &str) -> &str {
    path.strip_prefix("/v1/sessions/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("")
}
