//! The one client-facing error type: every error leaves the server as
//! `application/problem+json` (RFC 9457) with a stable `code`. Internal
//! causes are logged; 5xx bodies stay generic.

use std::borrow::Cow;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::ds::Refusal;
use crate::session::SessionError;
use crate::store::StoreError;

/// One problem about one event of a batch (or about the request).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProblemItem {
    /// Index of the event in the request (array index or NDJSON record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The event's `id`, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Stable code, e.g. `schema_mismatch`, `missing_scope_id`.
    pub code: String,
    /// JSON pointer inside the event.
    pub path: String,
    pub message: String,
}

/// An RFC 9457 problem, as it goes on the wire (and into the OpenAPI
/// document): `type` is `urn:agent-projector:problem:<code>`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// `urn:agent-projector:problem:<code>`
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub type_uri: Box<str>,
    pub title: &'static str,
    pub status: u16,
    pub detail: String,
    /// Stable machine-readable code.
    #[schema(value_type = String)]
    pub code: Cow<'static, str>,
    /// Per-event problems (ingest).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<ProblemItem>>)]
    pub errors: Option<Box<[ProblemItem]>>,
    /// Send `Retry-After` (seconds; 503s).
    #[serde(skip)]
    pub retry_after: Option<u64>,
    /// Send `WWW-Authenticate: Bearer` (401s).
    #[serde(skip)]
    pub www_authenticate: bool,
    /// Send `Sec-WebSocket-Version: 13` (426 to a WebSocket handshake of
    /// another version, RFC 6455 section 4.4).
    #[serde(skip)]
    pub websocket_version: bool,
}

impl Problem {
    /// A problem with a status, a stable code, a title and a detail.
    pub fn new(
        status: StatusCode,
        code: impl Into<Cow<'static, str>>,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        let code = code.into();
        Problem {
            type_uri: format!("urn:agent-projector:problem:{code}").into(),
            title,
            status: status.as_u16(),
            detail: detail.into(),
            code,
            errors: None,
            retry_after: None,
            www_authenticate: false,
            websocket_version: false,
        }
    }

    /// Attach per-event errors.
    pub fn with_errors(mut self, errors: Vec<ProblemItem>) -> Self {
        self.errors = (!errors.is_empty()).then(|| errors.into_boxed_slice());
        self
    }

    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, code, "Bad request", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not_found", "Not found", detail)
    }

    pub fn payload_too_large(code: &'static str, detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            code,
            "Payload too large",
            detail,
        )
    }

    pub fn unavailable(code: &'static str, detail: impl Into<String>) -> Self {
        let mut p = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code,
            "Service unavailable",
            detail,
        );
        p.retry_after = Some(1);
        p
    }

    /// An internal error: logged with its cause chain, generic to the client.
    pub fn internal(err: &(dyn std::error::Error + 'static)) -> Self {
        let mut chain = err.to_string();
        let mut src = err.source();
        while let Some(s) = src {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            src = s.source();
        }
        tracing::error!(error = %chain, "internal error");
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal server error",
            "the server failed to handle the request; see its logs",
        )
    }
}

impl From<SessionError> for Problem {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Stopped => Problem::unavailable(
                "shutting_down",
                "the session is not available (server shutting down)",
            ),
            SessionError::Store(e) => e.into(),
            SessionError::Fenced(f) => refused_append(&f.into(), None),
        }
    }
}

/// A refused Durable Streams append (or an idempotent producer's request
/// fenced out of a session) with the protocol's status; the door adds the
/// protocol's headers. `content_type`: the stream's, named in a mismatch.
pub fn refused_append(refusal: &Refusal, content_type: Option<&str>) -> Problem {
    let (status, code, detail) = match refusal {
        Refusal::Invalid(why) => (StatusCode::BAD_REQUEST, "invalid_append", why.clone()),
        Refusal::ContentType => (
            StatusCode::CONFLICT,
            "content_type_mismatch",
            format!(
                "the stream's content type is {}",
                content_type.unwrap_or("another")
            ),
        ),
        Refusal::SeqRegression => (
            StatusCode::CONFLICT,
            "stream_seq_regression",
            "Stream-Seq must be above the last one (byte-wise)".into(),
        ),
        Refusal::Closed => (
            StatusCode::CONFLICT,
            "stream_closed",
            "the stream is closed".into(),
        ),
        Refusal::StaleEpoch { current } => (
            StatusCode::FORBIDDEN,
            "stale_producer_epoch",
            format!("a newer epoch ({current}) of this producer has written"),
        ),
        Refusal::SeqGap { expected, received } => (
            StatusCode::CONFLICT,
            "producer_seq_gap",
            format!("expected Producer-Seq {expected}, got {received}"),
        ),
    };
    let title = status.canonical_reason().unwrap_or("Refused");
    Problem::new(status, code, title, detail)
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        // A 503 the client is told to retry is expected in operation (a
        // conflict between nodes, a full disk, Redis away): a warning. A
        // corrupt record is a bug or damage: an error (logged by `internal`).
        if !matches!(e, StoreError::Corrupt { .. }) {
            tracing::warn!(error = %e, "store refused the request");
        }
        match e {
            StoreError::Conflict { .. } => Problem::unavailable(
                "store_conflict",
                "other nodes kept appending to this session; nothing was applied, retry",
            ),
            StoreError::Corrupt { .. } => Problem::internal(&e),
            StoreError::Full(_) => Problem::unavailable(
                "store_full",
                "the event store is short of disk space; nothing was applied; reads and streams keep working",
            ),
            StoreError::Unavailable(_)
            | StoreError::Backend { .. }
            | StoreError::Embedded { .. } => Problem::unavailable(
                "store_unavailable",
                "the event store cannot take the request now; nothing was applied, retry later",
            ),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        metrics::counter!("projector_errors_total", "code" => self.code.to_string()).increment(1);
        let body = serde_json::to_vec(&self).unwrap_or_else(|_| b"{}".to_vec());
        let mut resp = (status, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.www_authenticate {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.websocket_version {
            resp.headers_mut().insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
        }
        resp
    }
}
