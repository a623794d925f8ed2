//! Who may call each operation of the OpenAPI document: the table of what
//! each needs with `auth.mode = "jwt"`, and its writing into the document.

/// What each operation needs when `auth.mode = "jwt"`, as `caller.require`
/// checks it in its handler (docs/SECURITY.md): `None` for the public
/// routes, else what the token must allow. `complete` turns it into the
/// operation's `security` and a line of its description, and panics on an
/// operation that is not here.
pub(super) const ACCESS: &[(&str, Option<&str>)] = &[
    ("get_healthz", None),
    (
        "ds_create",
        Some("the `publish` scope, and the stream's path in its `sessions` claim"),
    ),
    (
        "ds_append",
        Some("the `publish` scope, and the stream's path in its `sessions` claim"),
    ),
    (
        "ds_delete",
        Some("the `publish` scope, and the stream's path in its `sessions` claim"),
    ),
    (
        "ds_read",
        Some("the `subscribe` scope, and the stream's path in its `sessions` claim"),
    ),
    (
        "ds_head",
        Some("the `subscribe` scope, and the stream's path in its `sessions` claim"),
    ),
    ("get_readyz", None),
    ("get_openapi", None),
    ("get_metrics", Some("the `admin` scope")),
    (
        "post_events",
        Some("the `publish` scope, and the session in its `sessions` claim"),
    ),
    (
        "post_publish",
        Some("the `publish` scope, and the session in its `sessions` claim"),
    ),
    (
        "ws_publish",
        Some("the `publish` scope, and the session in its `sessions` claim"),
    ),
    ("list_sessions", Some("the `admin` scope")),
    (
        "delete_session",
        Some("the `admin` scope, and the session in its `sessions` claim"),
    ),
    (
        "get_snapshot",
        Some("the `subscribe` scope, and the session in its `sessions` claim"),
    ),
    (
        "get_events",
        Some("the `subscribe` scope, and the session in its `sessions` claim"),
    ),
    (
        "get_messages",
        Some("the `subscribe` scope, and the session in its `sessions` claim"),
    ),
    (
        "post_action",
        Some("the `control` scope, and the session in its `sessions` claim"),
    ),
    (
        "post_control",
        Some("the `control` scope, and the session in its `sessions` claim"),
    ),
    (
        "stream_sse",
        Some("the `subscribe` scope, and the session in its `sessions` claim; the stream ends with a `reset` (`token_expired`) at the token's `exp`"),
    ),
    (
        "stream_ws",
        Some("the `subscribe` scope, and the session in its `sessions` claim; the stream ends with a `reset` (`token_expired`) at the token's `exp`"),
    ),
    (
        "stream_message",
        Some("the `subscribe` scope, and the session in its `sessions` claim"),
    ),
    (
        "resume_chat",
        Some("the `subscribe` scope, and the session in its `sessions` claim"),
    ),
    (
        "stream_ag_ui",
        Some("the `subscribe` scope, and the session in its `sessions` claim"),
    ),
    (
        "streams_sse",
        Some("the `subscribe` scope, and every session asked for in its `sessions` claim"),
    ),
    (
        "streams_ws",
        Some("the `subscribe` scope, and every session subscribed to in its `sessions` claim"),
    ),
    (
        "index_stream",
        Some("the `subscribe` scope; the index shows only the sessions its `sessions` claim covers"),
    ),
    (
        "run_agent",
        Some("the `publish` and `subscribe` scopes, and the session in its `sessions` claim"),
    ),
    (
        "post_chat",
        Some("the `publish` and `subscribe` scopes, and the chat's session in its `sessions` claim; `control` too when no upstream route is configured (the request is relayed to the session's runtime)"),
    ),
    (
        "chat_ws",
        Some("per request, with the token of the frame's `headers.authorization` or else of the handshake (a handshake without one opens; its requests are refused with `missing_token`): a `send` needs what `POST /v1/chat` needs, a `resume` what `GET /v1/chat/{session_id}/stream` needs"),
    ),
];

/// The operation's `security` and a last paragraph of its description,
/// from `ACCESS`.
pub(super) fn declare_access(op: &mut serde_json::Value) {
    use serde_json::json;
    let id = op["operationId"].as_str().expect("operationId").to_string();
    let Some((_, access)) = ACCESS.iter().find(|(op_id, _)| *op_id == id) else {
        panic!("operation `{id}` is not in openapi::ACCESS: say what it needs with auth.mode = \"jwt\"");
    };
    let words = match access {
        None => {
            op["security"] = json!([]);
            "Auth: none; this route is public even with `auth.mode = \"jwt\"`.".to_string()
        }
        Some(needs) => {
            op["security"] = json!([{"bearerJwt": []}, {"cookieJwt": []}, {"queryJwt": []}]);
            format!("Auth: with `auth.mode = \"jwt\"`, a token (bearer header, `projector_token` cookie or `?access_token=`) with {needs}; `admin` implies every scope.")
        }
    };
    op["description"] = match op["description"].as_str() {
        Some(d) if !d.is_empty() => format!("{d}\n\n{words}"),
        _ => words,
    }
    .into();
}
