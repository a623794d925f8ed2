//! The bodies the relay sends: a client's decision or run control, checked
//! and wrapped as `{"kind":"action"|"control","sessionId",...,"idempotencyKey"}`
//! with every other client field passed through, encoded once so that the
//! signed bytes are exactly the sent bytes.

use bytes::Bytes;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Decisions a client may take on an action.
pub const DECISIONS: &[&str] = &["approve", "reject", "answer"];
/// Run controls a client may send.
pub const CONTROL_TYPES: &[&str] = &["send", "interrupt", "cancel", "retry", "steer", "queue"];
/// Fields the server sets; a client's values for them are replaced.
const RESERVED: &[&str] = &["kind", "sessionId", "actionId", "idempotencyKey"];
/// Longest accepted `requestId`.
const MAX_REQUEST_ID: usize = 256;

/// What is relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A decision on an action.
    Action,
    /// A run control.
    Control,
}

impl Kind {
    /// `action` or `control`, as in the body's `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Action => "action",
            Kind::Control => "control",
        }
    }
}

/// A body ready to relay.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub kind: Kind,
    /// The exact bytes that are signed and sent.
    pub body: Bytes,
    /// Stable per logical request (see `idempotency_key`).
    pub idempotency_key: String,
}

/// A client body that cannot be relayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// `{"decision": "approve"|"reject"|"answer", "requestId"?, ...}` on action
/// `action_id` of session `session`.
pub fn action_request(session: &str, action_id: &str, body: &[u8]) -> Result<Outgoing, Invalid> {
    let mut fields = object(body)?;
    let decision = one_of(&mut fields, "decision", DECISIONS)?;
    let key = idempotency_key(Kind::Action, session, action_id, request_id(&fields)?);
    let mut out = Map::new();
    out.insert("kind".into(), Kind::Action.as_str().into());
    out.insert("sessionId".into(), session.into());
    out.insert("actionId".into(), action_id.into());
    out.insert("decision".into(), decision.into());
    Ok(finish(Kind::Action, out, fields, key))
}

/// `{"type": "interrupt"|"cancel"|"retry"|"steer"|"queue", "requestId"?, ...}`
/// for session `session`.
pub fn control_request(session: &str, body: &[u8]) -> Result<Outgoing, Invalid> {
    let mut fields = object(body)?;
    let kind = one_of(&mut fields, "type", CONTROL_TYPES)?;
    let key = idempotency_key(Kind::Control, session, &kind, request_id(&fields)?);
    let mut out = Map::new();
    out.insert("kind".into(), Kind::Control.as_str().into());
    out.insert("sessionId".into(), session.into());
    out.insert("type".into(), kind.into());
    Ok(finish(Kind::Control, out, fields, key))
}

fn object(body: &[u8]) -> Result<Map<String, Value>, Invalid> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(Invalid("the body must be a JSON object".into())),
        Err(e) => Err(Invalid(format!("the body is not JSON: {e}"))),
    }
}

fn one_of(fields: &mut Map<String, Value>, key: &str, allowed: &[&str]) -> Result<String, Invalid> {
    match fields.shift_remove(key) {
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(s),
        Some(v) => Err(Invalid(format!(
            "`{key}` is {v}; expected one of {}",
            allowed.join(", ")
        ))),
        None => Err(Invalid(format!(
            "`{key}` is required: one of {}",
            allowed.join(", ")
        ))),
    }
}

fn request_id(fields: &Map<String, Value>) -> Result<Option<&str>, Invalid> {
    match fields.get("requestId") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s))
            if !s.is_empty() && s.len() <= MAX_REQUEST_ID && !s.chars().any(|c| c.is_control()) =>
        {
            Ok(Some(s))
        }
        Some(_) => Err(Invalid(format!(
            "`requestId` must be a string of 1 to {MAX_REQUEST_ID} printable characters"
        ))),
    }
}

fn finish(
    kind: Kind,
    mut out: Map<String, Value>,
    fields: Map<String, Value>,
    key: String,
) -> Outgoing {
    for (k, v) in fields {
        if !RESERVED.contains(&k.as_str()) && !out.contains_key(&k) {
            out.insert(k, v);
        }
    }
    out.insert("idempotencyKey".into(), key.clone().into());
    Outgoing {
        kind,
        body: serde_json::to_vec(&Value::Object(out))
            .expect("JSON values serialise")
            .into(),
        idempotency_key: key,
    }
}

/// The idempotency key of a logical request. With a client `requestId`, a
/// digest of (kind, session, action id or control type, requestId): a
/// client that retries with the same `requestId` sends the same key. Without
/// one, a fresh random key (reused across the relay's own retries).
pub fn idempotency_key(
    kind: Kind,
    session: &str,
    target: &str,
    request_id: Option<&str>,
) -> String {
    match request_id {
        Some(rid) => {
            let mut h = Sha256::new();
            for part in [kind.as_str(), session, target, rid] {
                h.update((part.len() as u64).to_be_bytes());
                h.update(part.as_bytes());
            }
            super::hex(&h.finalize()[..16])
        }
        None => uuid::Uuid::new_v4().simple().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(o: &Outgoing) -> Value {
        serde_json::from_slice(&o.body).unwrap()
    }

    #[test]
    fn action_body_wraps_and_passes_through() {
        let o = action_request(
            "s1",
            "a1",
            br#"{"decision":"answer","answer":{"x":1},"message":"ok","sessionId":"other","kind":"control"}"#,
        )
        .unwrap();
        assert_eq!(o.kind, Kind::Action);
        let v = json(&o);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "kind",
                "sessionId",
                "actionId",
                "decision",
                "answer",
                "message",
                "idempotencyKey"
            ]
        );
        assert_eq!(v["kind"], "action");
        assert_eq!(v["sessionId"], "s1", "the server's fields win");
        assert_eq!(v["answer"]["x"], 1);
        assert_eq!(v["idempotencyKey"], o.idempotency_key.as_str());
    }

    #[test]
    fn bad_bodies_are_invalid() {
        for body in [
            &b"nope"[..],
            b"[]",
            b"{}",
            br#"{"decision":"maybe"}"#,
            br#"{"decision":1}"#,
            br#"{"decision":"approve","requestId":""}"#,
            br#"{"decision":"approve","requestId":7}"#,
        ] {
            assert!(action_request("s", "a", body).is_err(), "{body:?}");
        }
        assert!(control_request("s", br#"{"type":"pause"}"#).is_err());
        assert!(control_request("s", br#"{"decision":"approve"}"#).is_err());
    }

    #[test]
    fn control_body() {
        let o = control_request("s1", br#"{"type":"steer","message":"focus"}"#).unwrap();
        let v = json(&o);
        assert_eq!(v["kind"], "control");
        assert_eq!(v["type"], "steer");
        assert_eq!(v["message"], "focus");
        assert!(v.get("actionId").is_none());
    }

    #[test]
    fn idempotency_keys_follow_the_request_id() {
        let a = |body: &[u8]| action_request("s", "a1", body).unwrap().idempotency_key;
        let with = br#"{"decision":"approve","requestId":"r1"}"#;
        assert_eq!(a(with), a(with), "same requestId, same key");
        assert_ne!(a(with), a(br#"{"decision":"approve","requestId":"r2"}"#));
        assert_ne!(
            a(with),
            action_request("s", "a2", with).unwrap().idempotency_key
        );
        let without = br#"{"decision":"approve"}"#;
        assert_ne!(a(without), a(without), "no requestId: a fresh key");
        assert_eq!(a(with).len(), 32);
        // Length-prefixed parts: ("ab","c") and ("a","bc") differ.
        assert_ne!(
            idempotency_key(Kind::Control, "ab", "c", Some("r")),
            idempotency_key(Kind::Control, "a", "bc", Some("r"))
        );
    }
}
