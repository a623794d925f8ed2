//! The lenient envelope reader: which top-level fields either envelope
//! defines, the JSON Schema of an event built from the same tables, and
//! each field read with its type checked (a wrong type is a
//! `schema_mismatch`, an absent field is no error), and the event's class.

use serde_json::{Map, Value};

use super::{code, short, type_name, Issue};
use crate::event::classes;
use crate::event::fact::{Envelope, ScopeIds};

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
        serde_json::json!({"description": "Agent UI refs: an object or an array", "anyOf": [
            {"type": "object", "additionalProperties": true},
            {"type": "array", "items": {}}
        ]}),
    );
    serde_json::json!({
        "type": "object",
        "description": "One runtime event: the Agent UI envelope (`type`, ...) or the Lime envelope (`eventClass`, ...). Unknown classes are accepted; extension fields are kept (redacted).",
        "properties": props,
        "anyOf": (["type", "eventClass", "kind"].map(|k| serde_json::json!({
            "required": [k], "properties": {k: {"type": "string"}}
        }))),
        "additionalProperties": true
    })
}

/// Whether `key` is a field of either envelope (not an extension field).
pub(super) fn is_envelope_field(key: &str) -> bool {
    // The short list first: most events send `id`, `type` and `payload`.
    OTHER_KNOWN.contains(&key)
        || ScopeIds::FIELDS.iter().any(|f| f.wire == key)
        || STRING_FIELDS.contains(&key)
        || REF_LISTS.contains(&key)
}

/// Takes the envelope's fields out of the event one by one, recording a
/// `schema_mismatch` for each of the wrong type; the extension fields are
/// set apart when it is made.
///
/// The event's map is taken apart once, in its order: each envelope field
/// goes to `fields` (an event sends a few; a field is found along them, with
/// no hash of its name) and each other field to `extra`. Looked up and
/// removed in the map, each field the reader took was hashed (SipHash) twice
/// or more and moved the map's last entry into its place (2.2% of a
/// single-event POST's instructions, docs/BENCHMARKS.md), and what was left
/// for `extra` came out in an order those removals had shuffled.
pub(super) struct Reader {
    /// The envelope fields not taken yet (in no particular order).
    fields: Vec<(String, Value)>,
    /// The extension fields, in the event's order.
    pub(super) extra: Map<String, Value>,
    pub(super) errors: Vec<Issue>,
}

/// Up to this many fields, whether an event has a field is read along its
/// keys: cheaper than hashing the name (SipHash, the map's hasher) for each
/// of the forty-odd fields the reader asks for, most of them absent (4% of
/// a single-event POST's instructions, docs/BENCHMARKS.md).
const SCAN_UP_TO: usize = 16;

/// Whether `obj` may hold `key`: false only when it surely does not.
fn may_hold(obj: &Map<String, Value>, key: &str) -> bool {
    obj.len() > SCAN_UP_TO || obj.keys().any(|k| k == key)
}

/// Field `key` of `obj`, hashed for only when [`may_hold`] says it may be there.
pub(super) fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if may_hold(obj, key) {
        obj.get(key)
    } else {
        None
    }
}

impl Reader {
    /// The reader of one event's fields.
    pub(super) fn of(obj: Map<String, Value>) -> Reader {
        let mut fields = Vec::with_capacity(obj.len());
        let mut extra = Map::new();
        for (k, v) in obj {
            if is_envelope_field(&k) {
                fields.push((k, v));
            } else {
                extra.insert(k, v);
            }
        }
        Reader {
            fields,
            extra,
            errors: Vec::new(),
        }
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.fields.iter().position(|(k, _)| k == key)
    }

    /// Envelope field `key`, if it is there and not taken yet.
    pub(super) fn field(&self, key: &str) -> Option<&Value> {
        self.position(key).map(|i| &self.fields[i].1)
    }

    /// [`Reader::field`], to change.
    pub(super) fn field_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.position(key).map(|i| &mut self.fields[i].1)
    }

    /// Envelope field `key` taken out of the event, if it is there.
    #[inline]
    pub(super) fn take(&mut self, key: &str) -> Option<Value> {
        let i = self.position(key)?;
        Some(self.fields.swap_remove(i).1)
    }

    /// Whether every envelope field the event sent has been taken.
    pub(super) fn all_taken(&self) -> bool {
        self.fields.is_empty()
    }

    pub(super) fn mismatch(&mut self, path: String, message: String) {
        self.errors
            .push(Issue::new(code::SCHEMA_MISMATCH, path, message));
    }

    /// A string field; null counts as absent.
    #[inline(always)]
    pub(super) fn string(&mut self, key: &str) -> Option<String> {
        // Most are asked for once the event's few fields have been taken.
        if self.fields.is_empty() {
            return None;
        }
        self.string_field(key)
    }

    fn string_field(&mut self, key: &str) -> Option<String> {
        match self.take(key) {
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
    pub(super) fn envelope(&mut self) -> (Envelope, String) {
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
    pub(super) fn id(&mut self) -> Option<String> {
        match self.take("id") {
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
    pub(super) fn sequence(&mut self) -> Option<u64> {
        match self.take("sequence") {
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

    /// The `payload` object (empty when absent), as taken out.
    pub(super) fn payload(&mut self, taken: Option<Value>) -> Map<String, Value> {
        match taken {
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
    pub(super) fn ref_list(&mut self, key: &str) -> Vec<String> {
        match self.take(key) {
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
    pub(super) fn refs(&mut self) -> Option<Value> {
        match self.take("refs") {
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
pub(super) fn class_of(
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
