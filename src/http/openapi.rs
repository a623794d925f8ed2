//! The OpenAPI document, generated from the handlers' annotations and
//! completed with what holds for every route of a kind (auth, limits, body
//! reading, the store) and the schemas of events and frames. The committed
//! `openapi/openapi.json` is checked against it by a test.

mod access;

use access::{declare_access, ACCESS};
use axum::routing::get;
use axum::{Json, Router};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::{Problem, ProblemItem};
use super::{
    ag_ui_gateway, chat, chat_ws, controls, ds, index, ingest, messages, mux, ops, publish,
    sessions, streams, AppState,
};
use crate::session::{IngestOutcome, Warning};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agent-projector",
        description = "Ingest AI agent runtime facts, project one read model per session, and stream it as Vercel AI SDK UIMessageChunk deltas over SSE and WebSocket with replay from any cursor. Wire contract: docs/PROTOCOL.md; frame shapes: docs/FRAMES.md.",
        contact(name = "agent-projector maintainers"),
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    servers((url = "http://127.0.0.1:8080", description = "The default listen address (`server.listen`); a deployment serves the same paths at its own origin")),
    modifiers(&SecuritySchemes),
    paths(
        ingest::post_events,
        publish::post_publish,
        publish::ws_publish,
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
        streams::stream_ag_ui,
        mux::streams_sse,
        mux::streams_ws,
        index::index_stream,
        ag_ui_gateway::run_agent,
        chat::post_chat,
        chat_ws::chat_ws,
        ds::ds_create,
        ds::ds_append,
        ds::read::ds_read,
        ds::ds_head,
        ds::ds_delete,
        ops::get_healthz,
        ops::get_readyz,
        ops::get_metrics,
        get_openapi,
    ),
    components(schemas(IngestOutcome, Warning, Problem, ProblemItem, sessions::EventsPage, sessions::LoggedEvent, sessions::SessionsPage, crate::session::index::SessionEntry, sessions::Deleted, messages::MessagesPage, messages::MessageFormat, streams::StreamFormat, ops::Health, controls::ActionDecision, controls::Decision, controls::RunControl, controls::ControlType, controls::Relayed)),
    tags(
        (name = "ingest", description = "Runtimes post events"),
        (name = "sessions", description = "Snapshots and the event log"),
        (name = "controls", description = "Decisions and run controls, relayed to the session's runtime"),
        (name = "streams", description = "Replay-then-live frame streams"),
        (name = "durable-streams", description = "The Durable Streams protocol (@durable-streams/*) under /ds: streams of bytes or JSON messages at a path (docs/DURABLE-STREAMS.md)"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
struct ApiDoc;

/// The three ways a JWT reaches the server (`auth.mode = "jwt"`,
/// src/http/auth.rs): each operation's `security` names them as
/// alternatives (see `ACCESS`).
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let mut bearer = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .bearer_format("JWT")
            .build();
        bearer.description = Some("`Authorization: Bearer <JWT>`: HS256, RS256 or ES256 (by `kid`), with `sub`, `exp`, `sessions` (ids or `prefix/*` patterns) and `scope` (`publish`, `subscribe`, `control`, `admin`)".into());
        components.add_security_scheme("bearerJwt", SecurityScheme::Http(bearer));
        components.add_security_scheme(
            "cookieJwt",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                "projector_token",
                "The same JWT in a cookie, for EventSource and WebSocket, which cannot set headers (the name is `auth.cookie_name`, by default `projector_token`)",
            ))),
        );
        components.add_security_scheme(
            "queryJwt",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "access_token",
                "The same JWT as `?access_token=`, for EventSource and WebSocket, which cannot set headers (request logs never record the query)",
            ))),
        );
    }
}

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(get_openapi))
}

/// This API's OpenAPI document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI 3.1 document", body = serde_json::Value)))]
pub async fn get_openapi() -> Json<&'static serde_json::Value> {
    static DOC: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    Json(DOC.get_or_init(document))
}

/// The document as committed under `openapi/openapi.json` (pretty, newline-terminated).
pub fn spec_json() -> String {
    let mut s = serde_json::to_string_pretty(&document()).expect("openapi serialises");
    s.push('\n');
    s
}
/// The document as served and committed: utoipa's, completed by
/// `complete`.
pub fn document() -> serde_json::Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("openapi serialises");
    complete(&mut doc);
    doc
}

/// What the handler annotations cannot say once per route: the request
/// schema of events (JSON and NDJSON), the frame, snapshot, chunk and reset
/// schemas, and the problem statuses every route of a kind can return
/// (auth, limits, body reading, the store), added where a route does not
/// document them itself.
fn complete(doc: &mut serde_json::Value) {
    use serde_json::json;
    let schemas = doc["components"]["schemas"]
        .as_object_mut()
        .expect("components.schemas");
    for (name, schema) in frame_schemas() {
        schemas.insert(name.into(), schema);
    }
    schemas.insert(
        "EventEnvelope".into(),
        crate::event::normalize::envelope_schema(),
    );
    schemas.insert(
        "EventBody".into(),
        json!({"oneOf": [
            {"$ref": "#/components/schemas/EventEnvelope"},
            {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/EventEnvelope"}}
        ]}),
    );
    let problem = |what: &str| {
        json!({"description": what,
               "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}})
    };
    let paths = doc["paths"].as_object_mut().expect("paths");
    let mut operations = 0;
    for (path, item) in paths.iter_mut() {
        for (method, op) in item.as_object_mut().expect("path item").iter_mut() {
            declare_access(op);
            operations += 1;
            let responses = op["responses"].as_object_mut().expect("responses");
            let mut add = |status: &str, what: &str| {
                responses.entry(status).or_insert_with(|| problem(what));
            };
            let api = path.starts_with("/v1/");
            let has_body = method == "post";
            let stream =
                path.ends_with("/stream") || path.ends_with("/ws") || path.ends_with("/ui-stream");
            if api || path == "/metrics" {
                add("401", "`missing_token`, `invalid_token`, `token_expired`, `token_not_yet_valid` (auth.mode = \"jwt\")");
                add(
                    "403",
                    "`insufficient_scope` or `session_not_allowed`: the token does not allow this",
                );
            }
            if api {
                add("400", "`invalid_session_id`, `invalid_path`, `invalid_query`, `invalid_cursor`, ...: the request cannot be read");
                add(
                    "503",
                    "`store_unavailable`, `store_full` or `shutting_down`; nothing was applied",
                );
            }
            if stream {
                add("404", "No such message (AI SDK streams)");
            }
            if stream || path.ends_with("/ag-ui") {
                add("429", "`too_many_subscribers`: the stream limits of the session or the server are reached");
            }
            if has_body {
                add(
                    "400",
                    "`invalid_json`, `duplicate_key`, `empty_body`, ...: the body cannot be read",
                );
                add(
                    "408",
                    "`body_timeout`: the whole body did not arrive within limits.body_timeout_secs",
                );
                add("413", "`body_too_large` or `too_many_events`");
                add(
                    "503",
                    "`server_busy`: the bodies being read hold the whole budget; retry",
                );
            }
        }
    }
    assert_eq!(
        operations,
        ACCESS.len(),
        "openapi::ACCESS names an operation the document does not have"
    );
    let events =
        &mut doc["paths"]["/v1/sessions/{session_id}/events"]["post"]["requestBody"]["content"];
    *events = json!({
        "application/json": {"schema": {"$ref": "#/components/schemas/EventBody"}},
        "application/x-ndjson": {"schema": {"type": "string", "description": "One EventEnvelope JSON object per line"}}
    });
    let frames = "Each SSE `data:` line (each WebSocket text message) is one `Frame` (components.schemas.Frame): `snapshot`, `delta`, `reset` or `live` (once, where the replay ends); SSE ids are `<epoch>:<cursor>` (none on `reset` and `live`).";
    for (path, method, status) in [
        ("/v1/sessions/{session_id}/stream", "get", "200"),
        ("/v1/sessions/{session_id}/ws", "get", "101"),
    ] {
        let r = &mut doc["paths"][path][method]["responses"][status];
        let d = r["description"].as_str().unwrap_or_default().to_string();
        r["description"] = format!("{d}. {frames}").into();
    }
    doc["paths"]["/v1/sessions/{session_id}/snapshot"]["get"]["responses"]["200"]["content"]
        ["application/json"]["schema"] = json!({"$ref": "#/components/schemas/SnapshotFrame"});
    // The messages of the WebSockets, under their `101`: the content after
    // the switch is WebSocket text messages, one JSON value each (the HTTP
    // response itself has no body).
    for (path, schema) in [
        (
            "/v1/sessions/{session_id}/ws",
            json!({"$ref": "#/components/schemas/Frame"}),
        ),
        (
            "/v1/sessions/stream",
            json!({"$ref": "#/components/schemas/IndexEvent"}),
        ),
        (
            "/v1/streams/ws",
            json!({"oneOf": [
                {"$ref": "#/components/schemas/MuxFrame"},
                {"$ref": "#/components/schemas/MuxControl"}
            ]}),
        ),
    ] {
        let r = &mut doc["paths"][path]["get"]["responses"]["101"];
        let d = r["description"].as_str().unwrap_or_default().to_string();
        let d = d.trim_end_matches('.');
        r["description"] = format!("{d}. The content is that of each WebSocket text message after the switch; the 101 response has no body.").into();
        r["content"] = json!({"application/json": {"schema": schema}});
    }
    // The AG-UI streams, event by event as an SSE client reads them.
    doc["components"]["schemas"]["AgUiSseEvent"] = json!({
        "type": "object",
        "description": "One Server-Sent Event of an AG-UI stream: `data` is one AG-UI 1.0 event as JSON text (docs/AG-UI.md), `id` its frame's `<epoch>:<cursor>`",
        "required": ["data"],
        "properties": {"data": {"type": "string"}, "id": {"type": "string"},
                       "event": {"type": "string"}, "retry": {"type": "integer"}}
    });
    for method in ["get", "post"] {
        doc["paths"]["/v1/sessions/{session_id}/ag-ui"][method]["responses"]["200"]["content"]
            ["text/event-stream"]["schema"] = json!({"$ref": "#/components/schemas/AgUiSseEvent"});
    }
}

/// The frames of the session streams (docs/FRAMES.md), as JSON Schema.
fn frame_schemas() -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;
    let chunk_types = [
        "start",
        "finish",
        "abort",
        "error",
        "start-step",
        "finish-step",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-input-error",
        "tool-output-available",
        "tool-output-error",
        "tool-output-denied",
        "tool-approval-request",
        "source-url",
        "source-document",
        "file",
        "message-metadata",
    ];
    vec![
        (
            "UIMessageChunk",
            json!({
                "type": "object",
                "description": "A Vercel AI SDK UIMessageChunk (the `ai` package's uiMessageChunkSchema); session surfaces are `data-<surface>` chunks with a stable `id`",
                "required": ["type"],
                "properties": {"type": {"anyOf": [
                    {"type": "string", "enum": chunk_types},
                    {"type": "string", "pattern": "^data-"}
                ]}},
                "additionalProperties": true
            }),
        ),
        (
            "ChunkItem",
            json!({
                "type": "object",
                "required": ["messageId", "chunk"],
                "properties": {
                    "messageId": {"type": ["string", "null"], "description": "The message the chunk belongs to; null for session-level data chunks"},
                    "role": {"type": "string", "enum": ["assistant", "user", "system"], "description": "On a `start` chunk: the message's role"},
                    "agentId": {"type": "string", "description": "On a `start` chunk: the agent that writes the message"},
                    "turnId": {"type": "string", "description": "On a `start` chunk: the message's turn"},
                    "runId": {"type": "string", "description": "On a `start` chunk: the message's run"},
                    "chunk": {"$ref": "#/components/schemas/UIMessageChunk"}
                }
            }),
        ),
        (
            "SnapshotFrame",
            json!({
                "type": "object",
                "required": ["type", "cursor", "epoch", "state"],
                "properties": {
                    "type": {"type": "string", "enum": ["snapshot"]},
                    "cursor": {"type": "integer", "minimum": 0},
                    "epoch": {"type": "string"},
                    "state": {"type": "object", "description": "The projection: runtime, messages, tools, actions, artifacts, evidence, tasks, agents, team, queue, context, permissions, diagnostics, timeline (docs/FRAMES.md)", "additionalProperties": true}
                }
            }),
        ),
        (
            "DeltaFrame",
            json!({
                "type": "object",
                "required": ["type", "cursor", "eventId", "eventClass", "chunks"],
                "properties": {
                    "type": {"type": "string", "enum": ["delta"]},
                    "cursor": {"type": "integer", "minimum": 1},
                    "eventId": {"type": "string"},
                    "eventClass": {"type": "string"},
                    "timeline": {
                        "type": "object",
                        "description": "What the event's timeline entry holds beyond cursor, eventId and eventClass; absent when nothing",
                        "properties": {
                            "sourceClass": {"type": "string", "description": "The class as the producer named it, when it differs from eventClass"},
                            "status": {"type": "string"},
                            "title": {"type": "string"},
                            "timestamp": {"type": "string"},
                            "taxonomy": {"type": "object", "additionalProperties": true}
                        }
                    },
                    "chunks": {"type": "array", "items": {"$ref": "#/components/schemas/ChunkItem"}}
                }
            }),
        ),
        (
            "ResetFrame",
            json!({
                "type": "object",
                "description": "Followed by a snapshot, except `token_expired`, which ends the stream (reconnect with a fresh token and the last id)",
                "required": ["type", "reason"],
                "properties": {
                    "type": {"type": "string", "enum": ["reset"]},
                    "reason": {"type": "string", "enum": ["cursor_ahead", "cursor_expired", "epoch_mismatch", "session_deleted", "token_expired"]}
                }
            }),
        ),
        (
            "LiveFrame",
            json!({
                "type": "object",
                "description": "Where the replay ends: every frame before it was history, the client now holds the log up to `cursor` and what follows is live. Sent once per stream, also on a stream that opens at the head; it has no SSE id (never a resume point)",
                "required": ["type", "cursor"],
                "properties": {
                    "type": {"type": "string", "enum": ["live"]},
                    "cursor": {"type": "integer", "minimum": 0}
                }
            }),
        ),
        (
            "MuxFrame",
            json!({
                "description": "A frame of `GET /v1/streams` and `/v1/streams/ws`: a session frame with `sessionId` as its first key",
                "allOf": [
                    {"type": "object", "required": ["sessionId"], "properties": {"sessionId": {"type": "string"}}},
                    {"$ref": "#/components/schemas/Frame"}
                ]
            }),
        ),
        (
            "MuxControl",
            json!({
                "description": "What `/v1/streams/ws` sends besides frames: `subscribed` before a session's first frame, `unsubscribed` after its last, `error` for a refused subscription or an unreadable message",
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": {"type": "string", "enum": ["subscribed", "unsubscribed", "error"]},
                    "sessionId": {"type": ["string", "null"]},
                    "code": {"type": "string", "enum": ["session_not_allowed", "insufficient_scope", "invalid_cursor", "invalid_session_id", "too_many_sessions", "too_many_subscribers", "invalid_message"]},
                    "detail": {"type": "string"}
                }
            }),
        ),
        (
            "IndexEvent",
            json!({
                "description": "An event of the live session index (`GET /v1/sessions/stream`)",
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": {"type": "string", "enum": ["snapshot", "created", "updated", "deleted", "reset"]},
                    "cursor": {"type": "integer", "minimum": 0, "description": "The index cursor (not on `reset`)"},
                    "epoch": {"type": "string", "description": "On `snapshot`: the index's epoch"},
                    "sessions": {"type": "array", "items": {"$ref": "#/components/schemas/SessionEntry"}, "description": "On `snapshot`"},
                    "session": {"$ref": "#/components/schemas/SessionEntry"},
                    "reason": {"type": "string", "enum": ["cursor_ahead", "cursor_expired", "epoch_mismatch", "token_expired"], "description": "On `reset`"}
                }
            }),
        ),
        (
            "Frame",
            json!({
                "oneOf": [
                    {"$ref": "#/components/schemas/SnapshotFrame"},
                    {"$ref": "#/components/schemas/DeltaFrame"},
                    {"$ref": "#/components/schemas/ResetFrame"},
                    {"$ref": "#/components/schemas/LiveFrame"}
                ],
                "discriminator": {"propertyName": "type", "mapping": {
                    "snapshot": "#/components/schemas/SnapshotFrame",
                    "delta": "#/components/schemas/DeltaFrame",
                    "reset": "#/components/schemas/ResetFrame",
                    "live": "#/components/schemas/LiveFrame"
                }}
            }),
        ),
    ]
}
