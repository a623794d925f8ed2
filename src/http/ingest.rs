//! `POST /v1/sessions/{session_id}/events`: read the body within its limit,
//! split it (object, array or NDJSON), normalise and validate every event,
//! and hand the whole batch to the session actor, or reject all of it.
//! AG-UI events in a batch are read as envelope events first
//! (`event::ag_ui`). An AI SDK UI message stream or an AG-UI event stream
//! (`text/event-stream`) goes to `http::ingest_stream` instead, which
//! applies it as it arrives.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::Value;

use super::auth::{Caller, Scope};
use super::error::{Problem, ProblemItem};
use super::extract::read_body;
use super::{AppState, SessionId};
use crate::event::ag_ui::{self, AgUi, Mapped};
use crate::event::body::{self, BodyError, BodyFormat};
use crate::event::normalize::{code, normalize_naming, Refused};
use crate::session::{IncomingEvent, IngestOutcome, SessionError, Warning};

/// No `DefaultBodyLimit` layer: the handler reads the raw body within its
/// own limit (`ingest.max_body_bytes`), which axum's default limit never
/// touches (only its `Bytes`, `String` and `Json` extractors apply it). As
/// a layer it was one more boxed service each request cloned and called
/// (2.1% of a single-event POST's instructions, docs/BENCHMARKS.md);
/// `hostile::an_oversized_batch_is_refused_before_its_values_are_built`
/// reads an 8 MiB body to its end.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/events", post(post_events))
}

/// What a request body is.
enum Incoming {
    /// A batch of events, all applied or none.
    Batch(BodyFormat),
    /// An AI SDK UI message stream, applied as it arrives.
    UiStream,
}

fn body_format(headers: &HeaderMap) -> Result<Incoming, Problem> {
    let Some(ct) = headers.get(header::CONTENT_TYPE) else {
        return Ok(Incoming::Batch(BodyFormat::Json));
    };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    let mime = ct.split(';').next().unwrap_or("").trim();
    match mime {
        "application/json" | "" => Ok(Incoming::Batch(BodyFormat::Json)),
        m if m.starts_with("application/") && m.ends_with("+json") => {
            Ok(Incoming::Batch(BodyFormat::Json))
        }
        "application/x-ndjson" | "application/ndjson" | "application/jsonl"
        | "application/x-jsonlines" | "application/jsonlines" => {
            Ok(Incoming::Batch(BodyFormat::Ndjson))
        }
        "text/event-stream" => Ok(Incoming::UiStream),
        other => Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Unsupported media type",
            format!(
                "content type `{other}` is not accepted; send application/json (an event or an array), application/x-ndjson, or text/event-stream (an AI SDK UI message stream or AG-UI events)"
            ),
        )),
    }
}

/// Ingest one event, an array of events, or NDJSON.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/events",
    tag = "ingest",
    params(("session_id" = String, Path, description = "Session id")),
    request_body(
        content = Value,
        description = "One event object (Lime or Agent UI envelope, or an AG-UI event), a JSON array of events, NDJSON, or (`text/event-stream`) a Vercel AI SDK UI message stream or an AG-UI event stream, applied as it arrives",
        content_type = "application/json"
    ),
    responses(
        (status = 200, description = "Batch accepted and durable", body = IngestOutcome),
        (status = 400, description = "Unparseable body", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body, batch or payload too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Wrong content type", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing, invalid or expired token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token may not publish to this session", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid event; nothing of the batch applied", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Ingest rate limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Store unavailable or shutting down; nothing applied", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_events(
    State(st): State<AppState>,
    caller: Caller,
    session: SessionId,
    req: Request,
) -> Result<Response, Problem> {
    caller.require(Scope::Publish, Some(&session.0))?;
    // The request's own headers (the `HeaderMap` extractor clones them).
    let (Parts { headers, .. }, body) = req.into_parts();
    let format = match body_format(&headers)? {
        Incoming::Batch(f) => f,
        Incoming::UiStream => {
            // One stream is one request for the rate limits.
            st.limits.ingest(&session.0, caller.token_key(), 1)?;
            let key = idempotency_key(&headers);
            return super::ingest_stream::ingest(st.clone(), session.0, key, body)
                .await
                .map(|o| reply(&o));
        }
    };
    let batch = read_batch(&st, &caller, &session.0, &headers, body, format).await?;
    Ok(reply(&batch.ingest(&st, &session.0).await?))
}

/// The outcome as a JSON response, written into one buffer with room: as
/// axum's `Json` it went through a `BytesMut` writer a few bytes at a time
/// (1.5% of a single-event POST, docs/BENCHMARKS.md), and by
/// `compact_json` (serde_json's bytes, sooner).
fn reply(outcome: &IngestOutcome) -> Response {
    let mut body = String::with_capacity(REPLY_BYTES);
    crate::compact_json::write(&mut body, outcome).expect("outcomes serialise");
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// Room for a reply without warnings.
const REPLY_BYTES: usize = 160;

/// A batch request's events, validated, and when its body had all come.
pub(super) struct Batch {
    pub events: Vec<IncomingEvent>,
    /// What the reading of its AG-UI events said.
    said: Vec<Warning>,
    received: std::time::Instant,
}

/// A batch body (`format`) read within its limit, split, counted against
/// the ingest rate limits and validated, all or none.
pub(super) async fn read_batch(
    st: &AppState,
    caller: &Caller,
    session: &str,
    headers: &HeaderMap,
    body: Body,
    format: BodyFormat,
) -> Result<Batch, Problem> {
    let limits = &st.cfg.ingest;
    let bytes = read_body(&st.limits, headers, body, limits.max_body_bytes).await?;
    let received = std::time::Instant::now();
    let values = body::split(&bytes, format, limits.max_events_per_batch).map_err(split_problem)?;
    st.limits
        .ingest(session, caller.token_key(), values.len())?;
    let (events, said) = validated(st, values, idempotency_key(headers))?;
    Ok(Batch {
        events,
        said,
        received,
    })
}

impl Batch {
    /// Ingest the batch into `session`: its outcome, with what the reading
    /// of its AG-UI events said among the warnings.
    pub(super) async fn ingest(
        self,
        st: &AppState,
        session: &str,
    ) -> Result<IngestOutcome, SessionError> {
        let mut outcome = st.registry.ingest(session, self.events).await?;
        // From the whole body received to the events durable and published.
        kept!(histogram, "projector_ingest_seconds").record(self.received.elapsed());
        outcome.warnings.extend(self.said);
        outcome.warnings.sort_by_key(|w| w.index);
        Ok(outcome)
    }
}

/// The request's `Idempotency-Key` (keys the ids derived for events sent
/// without one). Looked up by a constant name: by a `&str` the name was
/// parsed and checked at every request.
pub(super) fn idempotency_key(headers: &HeaderMap) -> Option<String> {
    const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static(crate::control::IDEMPOTENCY_HEADER);
    headers
        .get(IDEMPOTENCY_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Why a batch body could not be split into events.
fn split_problem(e: BodyError) -> Problem {
    let code = match e {
        BodyError::TooManyEvents { .. } => {
            return Problem::payload_too_large("too_many_events", e.to_string());
        }
        BodyError::NotUtf8 => "invalid_utf8",
        BodyError::Empty => "empty_body",
        BodyError::NotObjectOrArray => "not_an_event",
        BodyError::DuplicateKey { .. } => "duplicate_key",
        BodyError::Json { .. } | BodyError::NdjsonLine { .. } => "invalid_json",
    };
    Problem::bad_request(code, e.to_string())
}

/// A batch's events normalised and validated, with what the reading of
/// its AG-UI events said; or, when any is invalid, a problem naming each
/// one refused (422, or 413 for an inline payload over its limit).
fn validated(
    st: &AppState,
    values: Vec<Value>,
    key: Option<String>,
) -> Result<(Vec<IncomingEvent>, Vec<Warning>), Problem> {
    let (values, said) = ag_ui_events(values.into_iter().enumerate(), &mut None, key);
    let norm_limits = st.event_limits();
    let mut events = Vec::with_capacity(values.len());
    let mut errors = Vec::new();
    for (index, raw) in values {
        match normalized(index, raw, &norm_limits) {
            Ok(ev) => events.push(ev),
            Err(issues) => errors.extend(issues),
        }
    }
    if errors.is_empty() {
        return Ok((events, said));
    }
    let n = errors
        .iter()
        .filter_map(|e| e.index)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    metrics::counter!("projector_ingest_rejected_total").increment(events.len() as u64 + n as u64);
    Err(refused(
        errors,
        format!("{n} event(s) rejected; nothing of the batch was applied"),
    ))
}

/// Event `index` of a request normalised, or what is wrong with it.
pub(super) fn normalized(
    index: usize,
    raw: Value,
    limits: &crate::event::Limits,
) -> Result<IncomingEvent, Vec<ProblemItem>> {
    match normalize_naming(raw, limits) {
        Ok(n) => Ok(IncomingEvent {
            index,
            fact: n.fact,
            warnings: n.warnings,
        }),
        Err(Refused { issues, id }) => Err(issues
            .into_iter()
            .map(|i| ProblemItem {
                index: Some(index),
                event_id: id.clone(),
                code: i.code.to_string(),
                path: i.path,
                message: i.message,
            })
            .collect()),
    }
}

/// The problem of refused events (422, or 413 for an inline payload over
/// its limit), naming each.
pub(super) fn refused(errors: Vec<ProblemItem>, detail: String) -> Problem {
    let problem = if errors.iter().any(|e| e.code == code::LARGE_PAYLOAD_INLINE) {
        Problem::payload_too_large(code::LARGE_PAYLOAD_INLINE, detail)
    } else {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            errors[0].code.clone(),
            "Invalid event",
            detail,
        )
    };
    problem.with_errors(errors)
}

/// The events (each with its index in the request) with their AG-UI
/// events read as envelope events (each kept with the index of the event
/// it came from) by `reader` (made at the first AG-UI event, with `key`,
/// and kept for the events after these), and what could not be applied of
/// them as warnings for the reply.
pub(super) fn ag_ui_events(
    values: impl ExactSizeIterator<Item = (usize, Value)>,
    reader: &mut Option<AgUi>,
    key: Option<String>,
) -> (Vec<(usize, Value)>, Vec<Warning>) {
    let (mut out, mut said) = (Vec::with_capacity(values.len()), Vec::new());
    for (index, raw) in values {
        if !ag_ui::is_ag_ui(&raw) {
            out.push((index, raw));
            continue;
        }
        match reader
            .get_or_insert_with(|| AgUi::new(key.clone()))
            .map(&raw)
        {
            Mapped::Events(es) => out.extend(es.into_iter().map(|e| (index, e))),
            Mapped::Warning(code, message) => said.push(Warning {
                index,
                event_id: String::new(),
                code: code.to_string(),
                path: None,
                message,
            }),
        }
    }
    (out, said)
}
