//! What a fact is given when its producer left it out: `kind` and
//! `status` from the class, and the id derived from the fact's scope or
//! canonical content (stable across versions), so that a re-sent event
//! without an id is still a duplicate.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::event::classes;
use crate::event::fact::{Fact, ScopeIds};

/// Fills what an accepted event left out: `kind` from the class prefix,
/// `status` from its suffix, and the idempotency key when no `id` was sent.
pub(super) fn derive_missing(fact: &mut Fact, id: Option<String>) {
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
