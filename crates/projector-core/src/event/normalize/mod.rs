//! Normalisation of one wire event (Lime or Agent UI envelope) into a
//! [`Fact`], with the validation codes of seed 002 / docs/PROTOCOL.md section 1.
//!
//! The envelopes are read leniently: only the class (`type` or `eventClass`)
//! is required, but every field that is present must have the right type.
//! Unknown top-level fields are kept (redacted) in `Fact::extra`.
//!
//! [`normalize`] is a list of named steps, each in its room: `checks`
//! (limits, redaction, scope ids), `reader` (the envelope's fields and
//! class) and `derive` (what can be derived, such as the id).

mod checks;
mod derive;
mod reader;

use serde_json::Value;

use super::classes;
use super::fact::{Fact, ScopeIds, Taxonomy};
use checks::{
    check_payload_size, drop_unsafe_refs, missing_scope_ids, redact_secrets, shape_issue,
};
pub use derive::derive_id;
use derive::derive_missing;
pub use reader::envelope_schema;
use reader::{class_of, Reader};

pub use super::issue::{code, Issue};

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

/// An accepted event: its fact and its warnings.
#[derive(Debug, Clone)]
pub struct Normalized {
    pub fact: Fact,
    pub warnings: Vec<Issue>,
}

/// Normalise one event: check its shape, redact it, read its fields, name its
/// class, check its payload size and scope ids, then fill what can be derived.
pub fn normalize(raw: Value, limits: &Limits) -> Result<Normalized, Vec<Issue>> {
    normalize_naming(raw, limits).map_err(|r| r.issues)
}

/// An event [`normalize`] refused: what is wrong with it, and its `id`
/// when it sent one as a string (for the reply to name it).
#[derive(Debug)]
pub struct Refused {
    pub issues: Vec<Issue>,
    pub id: Option<String>,
}

/// [`normalize`], with the id of a refused event: taken from it only when
/// it is refused, not copied out of every event first.
pub fn normalize_naming(raw: Value, limits: &Limits) -> Result<Normalized, Refused> {
    if let Some(issue) = shape_issue(&raw, limits) {
        let id = field_of(&raw, "id")
            .and_then(Value::as_str)
            .map(str::to_string);
        return Err(Refused {
            issues: vec![issue],
            id,
        });
    }
    let Value::Object(obj) = raw else {
        return Err(Refused {
            issues: vec![Issue::new(
                code::SCHEMA_MISMATCH,
                "",
                "an event must be a JSON object",
            )],
            id: None,
        });
    };
    let mut r = Reader::of(obj);
    let mut warnings = redact_secrets(&mut r);
    warnings.extend(drop_unsafe_refs(&mut r));

    // Taken out first (and read in its turn below): the fields most events
    // send besides it are read early, so the forty-odd asked for after them
    // find none left.
    let payload = r.take("payload");
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
    let payload = r.payload(payload);
    let ref_ids = r.ref_list("refIds");
    let artifact_refs = r.ref_list("artifactRefs");
    let evidence_refs = r.ref_list("evidenceRefs");
    let refs = r.refs();
    debug_assert!(r.all_taken(), "every envelope field is read");
    let Reader {
        extra, mut errors, ..
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
        producer: None,
    };
    if errors.is_empty() {
        errors.extend(missing_scope_ids(&fact));
    }
    if !errors.is_empty() {
        return Err(Refused { issues: errors, id });
    }
    derive_missing(&mut fact, id);
    warnings.extend(super::taxonomy::check(&fact));
    // Accepted, but the projection will not show it: the reply says so.
    if !classes::is_known(&fact.class) {
        warnings.push(if fact.class.starts_with("ag-ui.") {
            Issue::new(
                code::AG_UI_NOT_PROJECTED,
                "/type",
                format!(
                    "the AG-UI event `{}` is kept as it is (timeline and log), not projected",
                    fact.class
                ),
            )
        } else {
            Issue::new(
                code::UNKNOWN_EVENT_CLASS,
                "/type",
                format!(
                    "unknown event class `{}`: kept on the timeline only",
                    fact.source_class
                ),
            )
        });
    }
    Ok(Normalized { fact, warnings })
}

/// Top-level field `key` of an event, found along its keys when it has few
/// (no hash of the name, as `Value::get` makes): for a look at one field
/// before the event is normalised.
pub fn field_of<'a>(event: &'a Value, key: &str) -> Option<&'a Value> {
    event.as_object().and_then(|obj| reader::field(obj, key))
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn short(v: &Value) -> String {
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
    use crate::event::{redact, Envelope};
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

    /// Extension fields are kept in the event's order, whatever envelope
    /// fields (and dropped refs) stand between them.
    #[test]
    fn extension_fields_keep_the_events_order() {
        let n = ok(json!({
            "x-a": 1, "type": "text.delta", "x-b": 2, "id": "e1", "payload": {"delta": "hi"},
            "messageId": "m1", "x-c": 3, "rawEventRef": "/home/me/raw.json", "x-d": 4
        }));
        let keys: Vec<&str> = n.fact.extra.keys().map(String::as_str).collect();
        assert_eq!(keys, ["x-a", "x-b", "x-c", "x-d"]);
        assert_eq!(n.fact.raw_event_ref, None, "a local path is dropped");
        assert!(n.warnings.iter().any(|w| w.path == "/rawEventRef"));
    }

    /// Every field the envelope schema names is read into the fact: none is
    /// left unread (the reader's `debug_assert`) or kept as an extension.
    #[test]
    fn every_envelope_field_is_read() {
        let schema = envelope_schema();
        let mut event = serde_json::Map::new();
        for (name, prop) in schema["properties"].as_object().unwrap() {
            let value = match (name.as_str(), prop["type"].as_str()) {
                ("type" | "eventClass", _) => json!("text.delta"),
                ("schemaVersion", _) => json!("agent-ui/1"),
                (_, Some("string")) => json!("x"),
                (_, Some("integer")) => json!(1),
                (_, Some("array")) => json!(["x"]),
                _ => json!({"k": "v"}),
            };
            event.insert(name.clone(), value);
        }
        assert!(
            event.len() > 40,
            "the schema names every field: {}",
            event.len()
        );
        let n = ok(Value::Object(event));
        assert!(n.fact.extra.is_empty(), "{:?}", n.fact.extra);
        assert_eq!(n.fact.raw_event_ref.as_deref(), Some("x"));
        assert_eq!(n.fact.sequence, Some(1));
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
    fn review_and_subagent_scopes_follow_seed_002() {
        // A review is scoped by its reviewId, top level or in the payload.
        ok(json!({"eventClass": "review.requested", "payload": {"reviewId": "r"}}));
        ok(json!({"eventClass": "review.requested", "reviewId": "r"}));
        let e = err(json!({"eventClass": "review.requested", "evidenceRefs": ["e"]}));
        assert_eq!(
            (e[0].code, e[0].path.as_str()),
            (code::MISSING_SCOPE_ID, "/reviewId")
        );
        // A verdict also names the evidence it rests on.
        let e = err(json!({"eventClass": "review.verdict", "payload": {"reviewId": "r"}}));
        assert_eq!(
            (e[0].code, e[0].path.as_str()),
            (code::MISSING_SCOPE_ID, "/evidenceRefs")
        );
        ok(
            json!({"eventClass": "review.verdict", "payload": {"reviewId": "r"}, "evidenceRefs": ["e"]}),
        );
        ok(json!({"eventClass": "review.verdict", "reviewId": "r", "evidenceId": "e"}));
        // subagent.* carries subagentId and taskId.
        let e = err(json!({"eventClass": "subagent.started", "subagentId": "s"}));
        assert_eq!(
            (e[0].code, e[0].path.as_str()),
            (code::MISSING_SCOPE_ID, "/taskId")
        );
        let e = err(json!({"eventClass": "subagent.completed", "taskId": "t"}));
        assert_eq!(e[0].path, "/subagentId");
        ok(json!({"eventClass": "subagent.started", "subagentId": "s", "taskId": "t"}));
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
