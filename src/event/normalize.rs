//! Normalisation of one wire event (Lime or Agent UI envelope) into a
//! [`Fact`], with the validation codes of seed 002 / docs/PROTOCOL.md section 1.
//!
//! The envelopes are read leniently: only the class (`type` or `eventClass`)
//! is required, but every field that is present must have the right type.
//! Unknown top-level fields are kept (redacted) in `Fact::extra`.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::classes;
use super::fact::{Envelope, Fact, ScopeIds, Taxonomy};
use super::redact;

/// Stable validation codes.
pub mod code {
    pub const SCHEMA_MISMATCH: &str = "schema_mismatch";
    pub const MISSING_SCOPE_ID: &str = "missing_scope_id";
    pub const SEQUENCE_GAP: &str = "sequence_gap";
    pub const SECRET_LEAK_RISK: &str = "secret_leak_risk";
    pub const LARGE_PAYLOAD_INLINE: &str = "large_payload_inline";
    pub const TOO_DEEP: &str = "too_deep";
    pub const STRING_TOO_LONG: &str = "string_too_long";
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
    fn new(code: &'static str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            code,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Limits the normaliser enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Payload JSON text above this is accepted with a `large_payload_inline` warning.
    pub inline_payload_bytes: usize,
    /// Payload JSON text above this is rejected (`large_payload_inline`, 413).
    pub hard_payload_bytes: usize,
    /// Longest string (or key) anywhere in an event, in bytes (`string_too_long`).
    pub max_string_bytes: usize,
    /// Deepest nesting of arrays and objects (`too_deep`).
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            inline_payload_bytes: 32_000,
            hard_payload_bytes: 1_048_576,
            max_string_bytes: 262_144,
            max_depth: 64,
        }
    }
}

/// The first place where `v` breaks the string or depth limit.
fn check_shape(v: &Value, path: &mut String, depth: usize, limits: &Limits) -> Option<Issue> {
    let long = |len: usize, path: &str| {
        (len > limits.max_string_bytes).then(|| {
            Issue::new(
                code::STRING_TOO_LONG,
                path,
                format!(
                    "a string of {len} bytes; the limit is {} (send large bodies as refs)",
                    limits.max_string_bytes
                ),
            )
        })
    };
    match v {
        Value::String(s) => long(s.len(), path),
        Value::Array(_) | Value::Object(_) if depth >= limits.max_depth => Some(Issue::new(
            code::TOO_DEEP,
            path.clone(),
            format!("nested deeper than {} levels", limits.max_depth),
        )),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, it)| {
            let len = path.len();
            path.push_str(&format!("/{i}"));
            let r = check_shape(it, path, depth + 1, limits);
            path.truncate(len);
            r
        }),
        Value::Object(m) => m.iter().find_map(|(k, it)| {
            let len = path.len();
            path.push('/');
            path.push_str(&k.replace('~', "~0").replace('/', "~1"));
            let r = long(k.len(), path).or_else(|| check_shape(it, path, depth + 1, limits));
            path.truncate(len);
            r
        }),
        _ => None,
    }
}

/// An accepted event: its fact and its warnings.
#[derive(Debug, Clone)]
pub struct Normalized {
    pub fact: Fact,
    pub warnings: Vec<Issue>,
}

/// Top-level string fields besides the scope ids.
const STRING_FIELDS: &[&str] = &[
    "kind",
    "status",
    "title",
    "detail",
    "createdAt",
    "timestamp",
    "completedAt",
    "schemaVersion",
    "sourceType",
    "model",
    "owner",
    "scope",
    "phase",
    "surface",
    "persistence",
    "control",
    "topology",
    "rawEventRef",
];

/// Top-level lists of ref strings.
const REF_LISTS: &[&str] = &["refIds", "artifactRefs", "evidenceRefs"];

/// The other top-level fields both envelopes define.
const OTHER_KNOWN: &[&str] = &["id", "type", "eventClass", "sequence", "payload", "refs"];

/// The JSON Schema of one event as POSTed, from the same tables the
/// normaliser reads: either envelope, every field optional but a class
/// (`type`, `eventClass` or a Lime `kind`), extension fields allowed.
pub fn envelope_schema() -> Value {
    let mut props = Map::new();
    let string = || serde_json::json!({"type": "string"});
    for f in ScopeIds::FIELDS {
        props.insert(f.wire.into(), string());
    }
    for k in STRING_FIELDS {
        props.insert((*k).into(), string());
    }
    for k in REF_LISTS {
        props.insert(
            (*k).into(),
            serde_json::json!({"type": "array", "items": {"type": "string"}}),
        );
    }
    props.insert("id".into(), serde_json::json!({"type": "string", "minLength": 1, "description": "Idempotency key; derived from scope and sequence when absent"}));
    props.insert("type".into(), serde_json::json!({"type": "string", "description": "Agent UI envelope: the event class (`text.delta`, `tool.started`, ...)"}));
    props.insert(
        "eventClass".into(),
        serde_json::json!({"type": "string", "description": "Lime envelope: the event class"}),
    );
    props.insert("sequence".into(), serde_json::json!({"type": "integer", "minimum": 0, "description": "Runtime sequence within its stream"}));
    props.insert(
        "payload".into(),
        serde_json::json!({"type": "object", "additionalProperties": true}),
    );
    props.insert(
        "refs".into(),
        serde_json::json!({"type": ["object", "array"]}),
    );
    serde_json::json!({
        "type": "object",
        "description": "One runtime event: the Agent UI envelope (`type`, ...) or the Lime envelope (`eventClass`, ...). Unknown classes are accepted; extension fields are kept (redacted).",
        "properties": props,
        "anyOf": [{"required": ["type"]}, {"required": ["eventClass"]}, {"required": ["kind"]}],
        "additionalProperties": true
    })
}

/// Whether `key` is a field of either envelope (not an extension field).
fn is_envelope_field(key: &str) -> bool {
    ScopeIds::FIELDS.iter().any(|f| f.wire == key)
        || STRING_FIELDS.contains(&key)
        || REF_LISTS.contains(&key)
        || OTHER_KNOWN.contains(&key)
}

/// Normalise one event: check its shape, redact it, read its fields, name its
/// class, check its payload size and scope ids, then fill what can be derived.
pub fn normalize(raw: Value, limits: &Limits) -> Result<Normalized, Vec<Issue>> {
    if let Some(issue) = check_shape(&raw, &mut String::new(), 0, limits) {
        return Err(vec![issue]);
    }
    let Value::Object(mut obj) = raw else {
        return Err(vec![Issue::new(
            code::SCHEMA_MISMATCH,
            "",
            "an event must be a JSON object",
        )]);
    };
    let mut warnings = redact_secrets(&mut obj);
    warnings.extend(drop_unsafe_refs(&mut obj));

    let mut r = Reader {
        obj,
        errors: Vec::new(),
    };
    let (envelope, class_name) = r.envelope();
    let id = r.id();
    let mut ids = ScopeIds::default();
    for field in ScopeIds::FIELDS {
        // An empty id is no id: `missing_scope_id` applies as if it were absent.
        *(field.get_mut)(&mut ids) = r.string(field.wire).filter(|v| !v.is_empty());
    }
    let kind = r.string("kind");
    let status = r.string("status");
    let title = r.string("title");
    let detail = r.string("detail");
    let created_at = r.string("createdAt");
    let timestamp = r.string("timestamp");
    let completed_at = r.string("completedAt");
    let schema_version = r.string("schemaVersion");
    let source_type = r.string("sourceType");
    let model = r.string("model");
    let taxonomy = Taxonomy {
        owner: r.string("owner"),
        scope: r.string("scope"),
        phase: r.string("phase"),
        surface: r.string("surface"),
        persistence: r.string("persistence"),
        control: r.string("control"),
        topology: r.string("topology"),
    };
    let raw_event_ref = r.string("rawEventRef");
    let sequence = r.sequence();
    let payload = r.payload();
    let ref_ids = r.ref_list("refIds");
    let artifact_refs = r.ref_list("artifactRefs");
    let evidence_refs = r.ref_list("evidenceRefs");
    let refs = r.refs();
    let Reader {
        obj: extra,
        mut errors,
    } = r;

    let source_class = class_of(
        envelope,
        class_name,
        kind.as_deref(),
        schema_version.as_deref(),
        &mut errors,
    );
    check_payload_size(&payload, limits, &mut errors, &mut warnings);

    let mut fact = Fact {
        id: String::new(),
        derived_id: false,
        class: classes::canonical(&source_class).to_string(),
        source_class,
        envelope,
        kind,
        status,
        title,
        detail,
        sequence,
        timestamp: created_at.or(timestamp),
        completed_at,
        schema_version,
        source_type,
        model,
        ids,
        taxonomy,
        payload,
        ref_ids,
        artifact_refs,
        evidence_refs,
        refs,
        raw_event_ref,
        extra,
    };
    if errors.is_empty() {
        errors.extend(missing_scope_ids(&fact));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    derive_missing(&mut fact, id);
    Ok(Normalized { fact, warnings })
}

/// Redacts credential-like values (in `payload`, `refs` and extension
/// fields) before anything else reads them; one warning per value.
fn redact_secrets(obj: &mut Map<String, Value>) -> Vec<Issue> {
    let mut paths = Vec::new();
    for key in ["payload", "refs"] {
        if let Some(v) = obj.get_mut(key) {
            paths.extend(redact::redact(v, &format!("/{key}")));
        }
    }
    for (k, v) in obj.iter_mut() {
        if is_envelope_field(k) {
            continue;
        }
        if redact::is_secret_key(k) && !v.is_null() {
            *v = Value::String(redact::REDACTED.into());
            paths.push(format!("/{k}"));
        } else {
            paths.extend(redact::redact(v, &format!("/{k}")));
        }
    }
    paths
        .into_iter()
        .map(|p| {
            Issue::new(
                code::SECRET_LEAK_RISK,
                p,
                "credential-like key; its value was redacted before storage",
            )
        })
        .collect()
}

/// Drops refs that are local absolute paths or URLs carrying credentials;
/// one warning per ref.
fn drop_unsafe_refs(obj: &mut Map<String, Value>) -> Vec<Issue> {
    let mut dropped = Vec::new();
    if let Some(v) = obj.get_mut("payload") {
        dropped.extend(redact::drop_unsafe_refs(v, "/payload", false));
    }
    for key in ["refs", "refIds", "artifactRefs", "evidenceRefs"] {
        if let Some(v) = obj.get_mut(key) {
            dropped.extend(redact::drop_unsafe_refs(v, &format!("/{key}"), true));
        }
    }
    if let Some(Value::String(r)) = obj.get("rawEventRef") {
        if redact::unsafe_ref(r).is_some() {
            obj.remove("rawEventRef");
            dropped.push("/rawEventRef".to_string());
        }
    }
    dropped
        .into_iter()
        .map(|p| {
            Issue::new(
                code::SECRET_LEAK_RISK,
                p,
                "a local absolute path or a URL with credentials; the ref was dropped before storage",
            )
        })
        .collect()
}

/// Takes the envelope's fields out of the event one by one, recording a
/// `schema_mismatch` for each of the wrong type; what is left are the
/// extension fields.
struct Reader {
    obj: Map<String, Value>,
    errors: Vec<Issue>,
}

impl Reader {
    fn mismatch(&mut self, path: String, message: String) {
        self.errors
            .push(Issue::new(code::SCHEMA_MISMATCH, path, message));
    }

    /// A string field; null counts as absent.
    fn string(&mut self, key: &str) -> Option<String> {
        match self.obj.remove(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                self.mismatch(
                    format!("/{key}"),
                    format!("`{key}` must be a string, got {}", type_name(&other)),
                );
                None
            }
        }
    }

    /// The envelope and the class as sent: `type` (Agent UI) wins over
    /// `eventClass` (Lime); both present must name the same class.
    fn envelope(&mut self) -> (Envelope, String) {
        let ty = self.string("type");
        let event_class = self.string("eventClass");
        match (ty, event_class) {
            (Some(t), Some(c)) => {
                if classes::canonical(&t) != classes::canonical(&c) {
                    self.mismatch(
                        "/type".into(),
                        format!("`type` ({t}) and `eventClass` ({c}) name different classes"),
                    );
                }
                (Envelope::AgentUi, t)
            }
            (Some(t), None) => (Envelope::AgentUi, t),
            (None, Some(c)) => (Envelope::Lime, c),
            (None, None) => (Envelope::Lime, String::new()),
        }
    }

    /// The event `id`: a non-empty string, or absent.
    fn id(&mut self) -> Option<String> {
        match self.obj.remove("id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s),
            Some(Value::String(_)) => {
                self.mismatch("/id".into(), "`id` must not be empty".into());
                None
            }
            Some(other) => {
                self.mismatch(
                    "/id".into(),
                    format!("`id` must be a string, got {}", type_name(&other)),
                );
                None
            }
        }
    }

    /// The runtime `sequence`: a non-negative integer.
    fn sequence(&mut self) -> Option<u64> {
        match self.obj.remove("sequence") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            Some(other) => {
                self.mismatch(
                    "/sequence".into(),
                    format!(
                        "`sequence` must be a non-negative integer, got {}",
                        short(&other)
                    ),
                );
                None
            }
        }
    }

    /// The `payload` object (empty when absent).
    fn payload(&mut self) -> Map<String, Value> {
        match self.obj.remove("payload") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(other) => {
                self.mismatch(
                    "/payload".into(),
                    format!("`payload` must be an object, got {}", type_name(&other)),
                );
                Map::new()
            }
        }
    }

    /// A list of ref strings (empty when absent).
    fn ref_list(&mut self, key: &str) -> Vec<String> {
        match self.obj.remove(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, it) in items.into_iter().enumerate() {
                    match it {
                        Value::String(s) => out.push(s),
                        other => self.mismatch(
                            format!("/{key}/{i}"),
                            format!("`{key}` items must be strings, got {}", type_name(&other)),
                        ),
                    }
                }
                out
            }
            Some(other) => {
                self.mismatch(
                    format!("/{key}"),
                    format!(
                        "`{key}` must be an array of strings, got {}",
                        type_name(&other)
                    ),
                );
                Vec::new()
            }
        }
    }

    /// The Agent UI `refs`: an object or an array.
    fn refs(&mut self) -> Option<Value> {
        match self.obj.remove("refs") {
            None | Some(Value::Null) => None,
            Some(v @ (Value::Object(_) | Value::Array(_))) => Some(v),
            Some(other) => {
                self.mismatch(
                    "/refs".into(),
                    format!(
                        "`refs` must be an object or an array, got {}",
                        type_name(&other)
                    ),
                );
                None
            }
        }
    }
}

/// The class as sent, checked: a Lime event without `eventClass` stands on
/// its `kind` (an unknown class, kept honestly); retired end-of-turn names
/// and unsupported schema versions are refused.
fn class_of(
    envelope: Envelope,
    sent: String,
    kind: Option<&str>,
    schema_version: Option<&str>,
    errors: &mut Vec<Issue>,
) -> String {
    let class_path = match envelope {
        Envelope::AgentUi => "/type",
        Envelope::Lime => "/eventClass",
    };
    let class = if !sent.is_empty() {
        sent
    } else if let Some(k) = kind.filter(|k| !k.is_empty()) {
        k.to_string()
    } else {
        errors.push(Issue::new(
            code::SCHEMA_MISMATCH,
            "/type",
            "an event needs a class: `type` (Agent UI) or `eventClass` (Lime)",
        ));
        String::new()
    };
    if classes::is_retired(&class) {
        errors.push(Issue::new(
            code::SCHEMA_MISMATCH,
            class_path,
            format!(
                "`{class}` is a retired end-of-turn name; use turn.completed, turn.failed or turn.canceled"
            ),
        ));
    }
    if let Some(v) = schema_version {
        if !v.starts_with("lime-runtime-event/") && !v.starts_with("agent-ui/") {
            errors.push(Issue::new(
                code::SCHEMA_MISMATCH,
                "/schemaVersion",
                format!("unsupported schemaVersion `{v}`"),
            ));
        }
    }
    class
}

/// `large_payload_inline`: a warning over the inline limit, an error over
/// the hard one.
fn check_payload_size(
    payload: &Map<String, Value>,
    limits: &Limits,
    errors: &mut Vec<Issue>,
    warnings: &mut Vec<Issue>,
) {
    let len = serde_json::to_vec(payload).map(|v| v.len()).unwrap_or(0);
    if len > limits.hard_payload_bytes {
        errors.push(Issue::new(
            code::LARGE_PAYLOAD_INLINE,
            "/payload",
            format!(
                "payload is {len} bytes, over the hard limit of {} bytes; send large bodies as refs",
                limits.hard_payload_bytes
            ),
        ));
    } else if len > limits.inline_payload_bytes {
        warnings.push(Issue::new(
            code::LARGE_PAYLOAD_INLINE,
            "/payload",
            format!(
                "payload is {len} bytes, over the inline limit of {} bytes; prefer refs",
                limits.inline_payload_bytes
            ),
        ));
    }
}

/// Fills what an accepted event left out: `kind` from the class prefix,
/// `status` from its suffix, and the idempotency key when no `id` was sent.
fn derive_missing(fact: &mut Fact, id: Option<String>) {
    if fact.kind.is_none() {
        fact.kind = fact.class.split('.').next().map(str::to_string);
    }
    if fact.status.is_none() {
        fact.status = classes::derived_status(&fact.class).map(str::to_string);
    }
    match id {
        Some(id) => fact.id = id,
        None => {
            fact.id = derive_id(fact);
            fact.derived_id = true;
        }
    }
}

fn payload_has(fact: &Fact, key: &str) -> bool {
    fact.payload
        .get(key)
        .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
}

/// `missing_scope_id` rules: a family's facts must carry the id that scopes them.
fn missing_scope_ids(f: &Fact) -> Vec<Issue> {
    let ids = &f.ids;
    let source_family = f.source_class.split('.').next().unwrap_or("");
    let need = |ok: bool, path: &str, what: &str| -> Option<Issue> {
        (!ok).then(|| {
            Issue::new(
                code::MISSING_SCOPE_ID,
                path,
                format!("`{}` requires {what}", f.source_class),
            )
        })
    };
    let issue = match source_family {
        "tool" if f.class != "tool.catalog.resolved" => {
            need(ids.tool_call_id.is_some(), "/toolCallId", "`toolCallId`")
        }
        "action" => need(ids.action_id.is_some(), "/actionId", "`actionId`"),
        "artifact" => need(
            ids.artifact_id.is_some() || !f.artifact_refs.is_empty(),
            "/artifactId",
            "`artifactId` or `artifactRefs`",
        ),
        "evidence" | "review" => need(
            ids.evidence_id.is_some() || !f.evidence_refs.is_empty(),
            "/evidenceId",
            "`evidenceId` or `evidenceRefs`",
        ),
        "task" => need(ids.task_id.is_some(), "/taskId", "`taskId`"),
        "subagent" => need(ids.subagent_id.is_some(), "/subagentId", "`subagentId`"),
        "agent" => need(
            ids.agent_id.is_some() || ids.subagent_id.is_some(),
            "/agentId",
            "`agentId` or `subagentId`",
        ),
        "worker" => need(
            ids.worker_id.is_some()
                || ids.subagent_id.is_some()
                || ids.agent_id.is_some()
                || ids.task_id.is_some(),
            "/workerId",
            "`workerId`, `subagentId`, `agentId` or `taskId`",
        ),
        "handoff" => need(
            ids.handoff_id.is_some() || payload_has(f, "handoffId"),
            "/handoffId",
            "`handoffId` (or `payload.handoffId`)",
        ),
        "channel" => need(ids.channel_id.is_some(), "/channelId", "`channelId`"),
        "patch" => need(
            ids.tool_call_id.is_some() || payload_has(f, "patchId"),
            "/toolCallId",
            "`toolCallId` (or `payload.patchId`)",
        ),
        "command" => need(
            ids.tool_call_id.is_some() || payload_has(f, "commandId"),
            "/toolCallId",
            "`toolCallId` (or `payload.commandId`)",
        ),
        "test" => need(
            ids.tool_call_id.is_some() || payload_has(f, "testRunId"),
            "/toolCallId",
            "`toolCallId` (or `payload.testRunId`)",
        ),
        "file" => need(
            ids.tool_call_id.is_some()
                || ids.artifact_id.is_some()
                || !f.artifact_refs.is_empty()
                || payload_has(f, "path"),
            "/artifactId",
            "`artifactId`, `artifactRefs`, `toolCallId` or `payload.path`",
        ),
        _ => None,
    };
    issue.into_iter().collect()
}

/// The idempotency key of an event sent without `id`: its scope and
/// `sequence` when it has one, else a hash of its normalised content.
pub fn derive_id(f: &Fact) -> String {
    let mut h = Sha256::new();
    match f.sequence {
        Some(seq) => {
            for field in ScopeIds::FIELDS.iter().filter(|f| f.stream_key) {
                let part = (field.get)(&f.ids);
                h.update(part.as_deref().unwrap_or("").as_bytes());
                h.update([0u8]);
            }
            h.update(seq.to_be_bytes());
            format!("seq-{}", hex(&h.finalize()[..12]))
        }
        None => {
            let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
            canonicalize(&mut v);
            h.update(v.to_string().as_bytes());
            format!("sha-{}", hex(&h.finalize()[..12]))
        }
    }
}

fn canonicalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, mut val) in entries {
                canonicalize(&mut val);
                m.insert(k, val);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(canonicalize),
        _ => {}
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}…", &s[..s.floor_char_boundary_compat(40)])
    } else {
        s
    }
}

trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(v: Value) -> Normalized {
        normalize(v, &Limits::default()).expect("valid")
    }

    fn err(v: Value) -> Vec<Issue> {
        normalize(v, &Limits::default()).expect_err("invalid")
    }

    /// Derived idempotency keys are stored in logs: they must not change
    /// between versions (the stream keys and their order are part of it).
    #[test]
    fn derived_ids_are_stable_across_versions() {
        let f = ok(json!({
            "type": "text.delta", "sequence": 7, "runtimeId": "rt", "threadId": "th",
            "turnId": "tu", "taskId": "ta", "agentId": "ag", "subagentId": "su",
            "toolCallId": "not-a-stream-key", "messageId": "m1", "payload": {"delta": "x"}
        }))
        .fact;
        assert_eq!(f.id, "seq-065a565c141433e600d828f9");
        let g = ok(json!({"type": "text.delta", "runId": "r", "payload": {"delta": "x"}})).fact;
        assert_eq!(g.id, "sha-e32f63bd37b25c31bbe2aace");
    }

    #[test]
    fn lime_envelope_normalises_with_alias() {
        let n = ok(json!({
            "id": "e1", "schemaVersion": "lime-runtime-event/v0.1", "runtimeId": "rt",
            "eventClass": "model.delta", "kind": "model", "status": "running", "sequence": 3,
            "title": "t", "createdAt": "2026-06-10T00:00:00Z", "payload": {"delta": "hi"},
            "x-ext": {"k": 1}
        }));
        let f = n.fact;
        assert_eq!(f.class, "text.delta");
        assert_eq!(f.source_class, "model.delta");
        assert_eq!(f.envelope, Envelope::Lime);
        assert_eq!(f.sequence, Some(3));
        assert_eq!(f.timestamp.as_deref(), Some("2026-06-10T00:00:00Z"));
        assert_eq!(f.extra["x-ext"], json!({"k": 1}));
        assert!(n.warnings.is_empty());
    }

    #[test]
    fn agent_ui_envelope_derives_kind_and_status() {
        let f = ok(json!({"type": "run.finished", "owner": "runtime", "scope": "run", "phase": "completed", "runId": "r1"})).fact;
        assert_eq!(f.class, "run.finished");
        assert_eq!(f.envelope, Envelope::AgentUi);
        assert_eq!(f.kind.as_deref(), Some("run"));
        assert_eq!(f.status.as_deref(), Some("completed"));
        assert_eq!(f.taxonomy.owner.as_deref(), Some("runtime"));
        assert!(f.derived_id);
    }

    #[test]
    fn schema_mismatch_cases() {
        for (v, path) in [
            (json!({"type": 5}), "/type"),
            (json!({"title": "x"}), "/type"),
            (json!({"type": "text.delta", "sequence": -1}), "/sequence"),
            (json!({"type": "text.delta", "sequence": "3"}), "/sequence"),
            (json!({"type": "text.delta", "payload": [1]}), "/payload"),
            (
                json!({"type": "text.delta", "refIds": ["a", 2]}),
                "/refIds/1",
            ),
            (json!({"type": "text.delta", "turnId": 7}), "/turnId"),
            (json!({"eventClass": "turn.cancelled"}), "/eventClass"),
            (json!({"eventClass": "done"}), "/eventClass"),
            (
                json!({"type": "text.delta", "eventClass": "tool.started"}),
                "/type",
            ),
            (json!({"type": "text.delta", "id": ""}), "/id"),
        ] {
            let e = err(v.clone());
            assert_eq!(e[0].code, code::SCHEMA_MISMATCH, "{v}");
            assert_eq!(e[0].path, path, "{v}");
        }
        assert_eq!(err(json!([1]))[0].code, code::SCHEMA_MISMATCH);
    }

    #[test]
    fn missing_scope_id_cases() {
        for v in [
            json!({"type": "tool.started"}),
            json!({"type": "action.required"}),
            json!({"type": "artifact.changed"}),
            json!({"type": "evidence.changed"}),
            json!({"eventClass": "review.verdict", "reviewId": "r"}),
            json!({"eventClass": "task.created"}),
            json!({"eventClass": "subagent.started", "taskId": "t"}),
            json!({"eventClass": "handoff.requested"}),
            json!({"eventClass": "channel.opened"}),
            json!({"eventClass": "command.started"}),
        ] {
            let e = err(v.clone());
            assert_eq!(e[0].code, code::MISSING_SCOPE_ID, "{v}");
        }
        ok(json!({"type": "artifact.changed", "artifactRefs": ["a"]}));
        let e = err(json!({"type": "tool.started", "toolCallId": ""}));
        assert_eq!(e[0].code, code::MISSING_SCOPE_ID, "an empty id is no id");
        ok(json!({"eventClass": "handoff.requested", "payload": {"handoffId": "h"}}));
        ok(json!({"eventClass": "tool.catalog.resolved"}));
    }

    #[test]
    fn secrets_are_redacted_with_warnings() {
        let n = ok(json!({"type": "tool.started", "toolCallId": "t",
            "payload": {"apiKey": "sk-live", "max_tokens": 10}, "authorization": "Bearer x"}));
        assert_eq!(n.fact.payload["apiKey"], redact::REDACTED);
        assert_eq!(n.fact.payload["max_tokens"], 10);
        assert_eq!(n.fact.extra["authorization"], redact::REDACTED);
        let paths: Vec<_> = n.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, vec!["/payload/apiKey", "/authorization"]);
        assert!(n.warnings.iter().all(|w| w.code == code::SECRET_LEAK_RISK));
        assert!(!serde_json::to_string(&n.fact).unwrap().contains("sk-live"));
    }

    #[test]
    fn unsafe_refs_are_dropped_with_warnings() {
        let n = ok(json!({"type": "tool.result", "toolCallId": "t",
            "refIds": ["out-1", "/home/ana/out.log"],
            "payload": {"outputRef": "https://x.test/o?token=abc"}}));
        assert_eq!(n.fact.ref_ids, vec!["out-1"]);
        assert_eq!(n.fact.payload["outputRef"], Value::Null);
        let paths: Vec<_> = n.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, vec!["/payload/outputRef", "/refIds/1"]);
    }

    #[test]
    fn payload_limits() {
        let limits = Limits {
            inline_payload_bytes: 100,
            hard_payload_bytes: 1000,
            ..Limits::default()
        };
        let big = "x".repeat(200);
        let n = normalize(json!({"type": "x.y", "payload": {"b": big}}), &limits).unwrap();
        assert_eq!(n.warnings[0].code, code::LARGE_PAYLOAD_INLINE);
        let huge = "x".repeat(2000);
        let e = normalize(json!({"type": "x.y", "payload": {"b": huge}}), &limits).unwrap_err();
        assert_eq!(e[0].code, code::LARGE_PAYLOAD_INLINE);
    }

    #[test]
    fn string_and_depth_limits() {
        let limits = Limits {
            max_string_bytes: 10,
            max_depth: 3,
            ..Limits::default()
        };
        let e = normalize(
            json!({"type": "a.b", "payload": {"x": "01234567890"}}),
            &limits,
        )
        .unwrap_err();
        assert_eq!(
            (e[0].code, e[0].path.as_str()),
            (code::STRING_TOO_LONG, "/payload/x")
        );
        let e = normalize(
            json!({"type": "a.b", "payload": {"a": {"b": [1]}}}),
            &limits,
        )
        .unwrap_err();
        assert_eq!(
            (e[0].code, e[0].path.as_str()),
            (code::TOO_DEEP, "/payload/a/b")
        );
        let e = normalize(
            json!({"type": "a.b", "payload": {"kkkkkkkkkkkk": 1}}),
            &limits,
        )
        .unwrap_err();
        assert_eq!(e[0].code, code::STRING_TOO_LONG, "keys count too");
        assert!(normalize(json!({"type": "a.b", "payload": {"a": {"b": 1}}}), &limits).is_ok());
    }

    #[test]
    fn derived_ids_are_stable() {
        let a = ok(
            json!({"type": "text.delta", "turnId": "t", "sequence": 4, "payload": {"delta": "a"}}),
        )
        .fact;
        let b = ok(
            json!({"payload": {"delta": "b"}, "sequence": 4, "turnId": "t", "type": "text.delta"}),
        )
        .fact;
        assert_eq!(a.id, b.id, "same scope and sequence: same key");
        let c = ok(json!({"type": "x.y", "payload": {"a": 1, "b": 2}})).fact;
        let d = ok(json!({"payload": {"b": 2, "a": 1}, "type": "x.y"})).fact;
        assert_eq!(c.id, d.id, "content hash ignores key order");
        let e = ok(json!({"type": "x.y", "payload": {"a": 2}})).fact;
        assert_ne!(c.id, e.id);
    }
}
