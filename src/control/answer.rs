//! Checking an `answer` against the JSON Schema of the `structured_input`
//! request it answers, before it is relayed: a client learns at once what
//! is wrong with its form, and the runtime never gets an answer its own
//! schema refuses. Schemas come from runtimes; they are compiled with no
//! remote or file resolution, so a `$ref` can never make the server fetch.

use serde_json::Value;

/// Most schema errors reported for one answer.
const MAX_ERRORS: usize = 20;

/// One way an answer breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerError {
    /// JSON Pointer into the answer (`""` for the answer itself).
    pub path: String,
    pub message: String,
}

/// What checking an answer found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// The answer satisfies the schema.
    Valid,
    /// The answer breaks the schema (at most 20 reasons).
    Invalid(Vec<AnswerError>),
    /// The runtime's schema cannot be compiled; the answer is relayed
    /// unchecked and the runtime's own check stands.
    SchemaUnusable(String),
}

/// Check `answer` (`None`: the body had none, checked as `null`) against
/// `schema`.
pub fn check(schema: &Value, answer: Option<&Value>) -> Checked {
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => return Checked::SchemaUnusable(e.to_string()),
    };
    let answer = answer.unwrap_or(&Value::Null);
    let errors: Vec<AnswerError> = validator
        .iter_errors(answer)
        .take(MAX_ERRORS)
        .map(|e| AnswerError {
            path: e.instance_path().as_str().to_string(),
            message: e.to_string(),
        })
        .collect();
    if errors.is_empty() {
        Checked::Valid
    } else {
        Checked::Invalid(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "count": {"type": "integer", "minimum": 1},
                "color": {"enum": ["red", "green"]}
            },
            "required": ["name"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_valid_answer_passes() {
        let a = json!({"name": "x", "count": 2, "color": "red"});
        assert_eq!(check(&form(), Some(&a)), Checked::Valid);
    }

    #[test]
    fn each_broken_rule_is_named_with_its_path() {
        let a = json!({"count": 0, "color": "blue", "extra": true});
        let Checked::Invalid(errors) = check(&form(), Some(&a)) else {
            panic!("invalid expected");
        };
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert!(paths.contains(&"/count"), "{errors:?}");
        assert!(paths.contains(&"/color"), "{errors:?}");
        assert!(
            paths.contains(&""),
            "the missing name and the extra field: {errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.message.contains("name")),
            "{errors:?}"
        );
    }

    #[test]
    fn no_answer_is_checked_as_null() {
        assert!(matches!(check(&form(), None), Checked::Invalid(_)));
        assert_eq!(check(&json!({}), None), Checked::Valid);
    }

    #[test]
    fn a_schema_that_cannot_compile_is_said_and_never_fetched() {
        let bad = json!({"type": "no-such-type"});
        assert!(matches!(
            check(&bad, Some(&json!(1))),
            Checked::SchemaUnusable(_)
        ));
        // A remote $ref is not resolved (no network, no files).
        let remote = json!({"$ref": "http://127.0.0.1:9/schema.json"});
        assert!(matches!(
            check(&remote, Some(&json!(1))),
            Checked::SchemaUnusable(_)
        ));
    }
}
