//! Splitting a request body into event objects: one JSON object, a JSON
//! array of objects, or NDJSON (one object per line). The JSON is strict (a
//! repeated key is refused, see [`super::strict`]), and the events are
//! counted while they are read: past the batch limit the rest of the body is
//! never built into values, so memory per request stays near the body size.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::Value;

use super::strict::{self, Strict};

/// Why a body could not be split into events (400/413/415 territory).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("body is not valid UTF-8")]
    NotUtf8,
    #[error("body is empty")]
    Empty,
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("NDJSON line {line} is not valid JSON: {message}")]
    NdjsonLine { line: usize, message: String },
    #[error("body must be an event object or an array of event objects")]
    NotObjectOrArray,
    #[error("an object repeats the key `{key}` (line {line}, column {column}); JSON keys must be unique")]
    DuplicateKey {
        key: String,
        line: usize,
        column: usize,
    },
    #[error("more than {max} events in one request")]
    TooManyEvents { max: usize },
}

/// The declared body format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    Ndjson,
}

/// The start of the message of the error that stops an array past the limit.
const TOO_MANY: &str = "too many events";

/// Split a body into JSON values (one per event), at most `max_events` of
/// them. Elements of an array that are not objects are kept so that
/// validation reports them by index.
pub fn split(bytes: &[u8], format: BodyFormat, max_events: usize) -> Result<Vec<Value>, BodyError> {
    let text = std::str::from_utf8(bytes).map_err(|_| BodyError::NotUtf8)?;
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(BodyError::Empty);
    }
    let out = match format {
        BodyFormat::Json => match trimmed.as_bytes()[0] {
            b'[' => {
                let mut de = serde_json::Deserializer::from_str(text);
                (&mut de)
                    .deserialize_seq(Events { max: max_events })
                    .and_then(|items| de.end().map(|()| items))
                    .map_err(|e| json_error(e, max_events))?
            }
            b'{' => vec![strict::from_str(text).map_err(|e| json_error(e, max_events))?],
            _ => {
                strict::from_str(text).map_err(|e| json_error(e, max_events))?;
                return Err(BodyError::NotObjectOrArray);
            }
        },
        BodyFormat::Ndjson => {
            let lines = || {
                text.split('\n')
                    .enumerate()
                    .map(|(i, l)| (i + 1, l.trim()))
                    .filter(|(_, l)| !l.is_empty())
            };
            // Counted before any line is parsed; one line more than its
            // newlines is as many as a body can have, so most bodies are
            // not split twice.
            let most = text.bytes().filter(|&b| b == b'\n').count() + 1;
            if most > max_events && lines().count() > max_events {
                return Err(BodyError::TooManyEvents { max: max_events });
            }
            let mut out = Vec::with_capacity(most.min(max_events));
            for (line, l) in lines() {
                let v = strict::from_str(l).map_err(|e| match json_error(e, max_events) {
                    BodyError::Json { message, .. } => BodyError::NdjsonLine { line, message },
                    BodyError::DuplicateKey { key, column, .. } => {
                        BodyError::DuplicateKey { key, line, column }
                    }
                    other => other,
                })?;
                out.push(v);
            }
            out
        }
    };
    if out.is_empty() {
        return Err(BodyError::Empty);
    }
    Ok(out)
}

fn json_error(e: serde_json::Error, max: usize) -> BodyError {
    if let Some(key) = strict::duplicate_key(&e) {
        return BodyError::DuplicateKey {
            key,
            line: e.line(),
            column: e.column(),
        };
    }
    if e.classify() == serde_json::error::Category::Data && e.to_string().starts_with(TOO_MANY) {
        return BodyError::TooManyEvents { max };
    }
    BodyError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    }
}

/// The elements of a top-level array, each strict, stopping past `max`.
struct Events {
    max: usize,
}

impl<'de> Visitor<'de> for Events {
    type Value = Vec<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Value>, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict)? {
            if out.len() == self.max {
                return Err(de::Error::custom(TOO_MANY));
            }
            out.push(v);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_array_and_ndjson() {
        assert_eq!(
            split(br#"{"a":1}"#, BodyFormat::Json, 100).unwrap().len(),
            1
        );
        assert_eq!(
            split(br#"[{"a":1},{"b":2}]"#, BodyFormat::Json, 100)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            split(b"{\"a\":1}\n\n{\"b\":2}\r\n", BodyFormat::Ndjson, 100)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn errors() {
        assert_eq!(split(b"  ", BodyFormat::Json, 100), Err(BodyError::Empty));
        assert_eq!(split(b"[]", BodyFormat::Json, 100), Err(BodyError::Empty));
        assert_eq!(
            split(b"3", BodyFormat::Json, 100),
            Err(BodyError::NotObjectOrArray)
        );
        assert!(matches!(
            split(b"{", BodyFormat::Json, 100),
            Err(BodyError::Json { .. })
        ));
        assert!(matches!(
            split(b"{}\n{", BodyFormat::Ndjson, 100),
            Err(BodyError::NdjsonLine { line: 2, .. })
        ));
        assert_eq!(
            split(&[0xff, 0xfe], BodyFormat::Json, 100),
            Err(BodyError::NotUtf8)
        );
    }

    #[test]
    fn events_are_counted_before_the_rest_is_built() {
        let many = format!("[{}0]", "0,".repeat(4_000_000));
        assert_eq!(
            split(many.as_bytes(), BodyFormat::Json, 10_000),
            Err(BodyError::TooManyEvents { max: 10_000 })
        );
        assert_eq!(split(b"[{},{}]", BodyFormat::Json, 2).unwrap().len(), 2);
        assert_eq!(
            split(b"[{},{},{}]", BodyFormat::Json, 2),
            Err(BodyError::TooManyEvents { max: 2 })
        );
        assert_eq!(
            split(b"{}\n{}\n{}\n", BodyFormat::Ndjson, 2),
            Err(BodyError::TooManyEvents { max: 2 })
        );
    }

    #[test]
    fn repeated_keys_are_refused_with_where() {
        assert!(matches!(
            split(br#"[{"id":"a"},{"id":"b","id":"c"}]"#, BodyFormat::Json, 10),
            Err(BodyError::DuplicateKey { ref key, line: 1, .. }) if key == "id"
        ));
        assert!(matches!(
            split(b"{\"a\":1}\n{\"p\":{\"x\":1,\"x\":2}}", BodyFormat::Ndjson, 10),
            Err(BodyError::DuplicateKey { ref key, line: 2, .. }) if key == "x"
        ));
    }
}
