//! Splitting a request body into event objects: one JSON object, a JSON
//! array of objects, or NDJSON (one object per line).

use serde_json::Value;

/// Why a body could not be split into events (400/415 territory).
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
}

/// The declared body format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    Ndjson,
}

/// Split a body into JSON values (one per event). Elements of an array that
/// are not objects are kept so that validation reports them by index.
pub fn split(bytes: &[u8], format: BodyFormat) -> Result<Vec<Value>, BodyError> {
    let text = std::str::from_utf8(bytes).map_err(|_| BodyError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(BodyError::Empty);
    }
    match format {
        BodyFormat::Json => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) => {
                if items.is_empty() {
                    Err(BodyError::Empty)
                } else {
                    Ok(items)
                }
            }
            Ok(v @ Value::Object(_)) => Ok(vec![v]),
            Ok(_) => Err(BodyError::NotObjectOrArray),
            Err(e) => Err(BodyError::Json {
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            }),
        },
        BodyFormat::Ndjson => {
            let mut out = Vec::new();
            for (i, line) in text.split('\n').enumerate() {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let v = serde_json::from_str::<Value>(line).map_err(|e| BodyError::NdjsonLine {
                    line: i + 1,
                    message: e.to_string(),
                })?;
                out.push(v);
            }
            if out.is_empty() {
                return Err(BodyError::Empty);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_array_and_ndjson() {
        assert_eq!(split(br#"{"a":1}"#, BodyFormat::Json).unwrap().len(), 1);
        assert_eq!(
            split(br#"[{"a":1},{"b":2}]"#, BodyFormat::Json)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            split(b"{\"a\":1}\n\n{\"b\":2}\r\n", BodyFormat::Ndjson)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn errors() {
        assert_eq!(split(b"  ", BodyFormat::Json), Err(BodyError::Empty));
        assert_eq!(split(b"[]", BodyFormat::Json), Err(BodyError::Empty));
        assert_eq!(
            split(b"3", BodyFormat::Json),
            Err(BodyError::NotObjectOrArray)
        );
        assert!(matches!(
            split(b"{", BodyFormat::Json),
            Err(BodyError::Json { .. })
        ));
        assert!(matches!(
            split(b"{}\n{", BodyFormat::Ndjson),
            Err(BodyError::NdjsonLine { line: 2, .. })
        ));
        assert_eq!(
            split(&[0xff, 0xfe], BodyFormat::Json),
            Err(BodyError::NotUtf8)
        );
    }
}
