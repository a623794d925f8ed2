//! What validation says about one event: an [`Issue`] with a stable code
//! (an error rejects the batch; a warning goes into the ingest reply). A
//! leaf, so that every check can name one.

/// Stable validation codes.
pub mod code {
    pub const SCHEMA_MISMATCH: &str = "schema_mismatch";
    pub const MISSING_SCOPE_ID: &str = "missing_scope_id";
    pub const SEQUENCE_GAP: &str = "sequence_gap";
    pub const SECRET_LEAK_RISK: &str = "secret_leak_risk";
    pub const LARGE_PAYLOAD_INLINE: &str = "large_payload_inline";
    pub const TOO_DEEP: &str = "too_deep";
    pub const STRING_TOO_LONG: &str = "string_too_long";
    /// A class the projection has no rules for: kept on the timeline only.
    pub const UNKNOWN_EVENT_CLASS: &str = "unknown_event_class";
    /// An AG-UI event kept as it is (`ag-ui.*`): not projected.
    pub const AG_UI_NOT_PROJECTED: &str = "ag_ui_not_projected";
}

/// One finding about one event: an error (rejects the batch) or a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub code: &'static str,
    /// JSON pointer inside the event (`/toolCallId`, `/payload/apiKey`).
    pub path: String,
    pub message: String,
}

impl Issue {
    pub(crate) fn new(
        code: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Issue {
            code,
            path: path.into(),
            message: message.into(),
        }
    }
}
