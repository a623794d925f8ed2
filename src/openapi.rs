//! The OpenAPI document, generated from the handlers' annotations. The
//! committed `openapi/openapi.json` is checked against it by a test.

use utoipa::OpenApi;

use crate::error::{ProblemDoc, ProblemItem};
use crate::http::{controls, ingest, messages, ops, sessions, streams};
use crate::session::{IngestOutcome, Warning};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agent-projector",
        description = "Ingest AI agent runtime facts, project one read model per session, and stream it as Vercel AI SDK UIMessageChunk deltas over SSE and WebSocket with replay from any cursor. Wire contract: docs/PROTOCOL.md; frame shapes: docs/FRAMES.md.",
        license(name = "Apache-2.0")
    ),
    paths(
        ingest::post_events,
        sessions::list_sessions,
        sessions::delete_session,
        sessions::get_snapshot,
        sessions::get_events,
        messages::get_messages,
        controls::post_action,
        controls::post_control,
        streams::stream_sse,
        streams::stream_ws,
        streams::stream_message,
        streams::resume_chat,
        ops::get_healthz,
        ops::get_readyz,
        ops::get_metrics,
        ops::get_openapi,
    ),
    components(schemas(IngestOutcome, Warning, ProblemDoc, ProblemItem, sessions::EventsPage, sessions::LoggedEvent, sessions::SessionsPage, sessions::SessionSummary, sessions::Deleted, messages::MessagesPage, messages::MessageFormat, ops::Health, controls::ActionDecision, controls::Decision, controls::RunControl, controls::ControlType, controls::Relayed)),
    tags(
        (name = "ingest", description = "Runtimes post events"),
        (name = "sessions", description = "Snapshots and the event log"),
        (name = "controls", description = "Decisions and run controls, relayed to the session's runtime"),
        (name = "streams", description = "Replay-then-live frame streams"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
struct ApiDoc;

/// The OpenAPI document.
pub fn spec() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The document as committed under `openapi/openapi.json` (pretty, newline-terminated).
pub fn spec_json() -> String {
    let mut s = serde_json::to_string_pretty(&spec()).expect("openapi serialises");
    s.push('\n');
    s
}
