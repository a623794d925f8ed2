//! The one client-facing error type: every error leaves the server as
//! `application/problem+json` (RFC 9457) with a stable `code`. Internal
//! causes are logged; 5xx bodies stay generic.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

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

/// An RFC 9457 problem.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable machine-readable code.
    pub code: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ProblemItem>,
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

impl Problem {
    /// A problem with a status, a stable code, a title and a detail.
    pub fn new(status: StatusCode, code: &str, title: &str, detail: impl Into<String>) -> Self {
        Problem {
            type_uri: format!("urn:agent-projector:problem:{code}"),
            title: title.to_string(),
            status: status.as_u16(),
            detail: detail.into(),
            code: code.to_string(),
            errors: Vec::new(),
            retry_after: None,
        }
    }

    /// Attach per-event errors.
    pub fn with_errors(mut self, errors: Vec<ProblemItem>) -> Self {
        self.errors = errors;
        self
    }

    pub fn bad_request(code: &str, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, code, "Bad request", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not_found", "Not found", detail)
    }

    pub fn payload_too_large(code: &str, detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            code,
            "Payload too large",
            detail,
        )
    }

    pub fn unavailable(code: &str, detail: impl Into<String>) -> Self {
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
        }
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "store error");
        match e {
            StoreError::Conflict { .. } | StoreError::Corrupt { .. } => Problem::internal(&e),
            StoreError::Unavailable(_) | StoreError::Embedded { .. } => Problem::unavailable(
                "store_unavailable",
                "the event store cannot take the request now; nothing was applied, retry later",
            ),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        metrics::counter!("projector_errors_total", "code" => self.code.clone()).increment(1);
        let body = serde_json::to_vec(&self).unwrap_or_else(|_| b"{}".to_vec());
        let mut resp = (status, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}
