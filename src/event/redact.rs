//! Redaction of credential-like payload keys (`secret_leak_risk`, seed 002).
//!
//! Seed 002's reference flags any key matching
//! `api[-_]?key|authorization|password|secret|token`. That also flags
//! `max_tokens` and `tokenCount`, so the rule here looks at the key's words
//! (split on `_`, `-`, `.`, spaces and camelCase) and flags a key whose *last*
//! word names a credential (`token`, `secret`, `password`, `passwd`,
//! `authorization`, `credential(s)`, `apikey`, `cookie`), or whose last two
//! words are `api key`, `private key`, `access key` or `secret key`. So
//! `access_token`, `apiKey`, `client_secret`, `Authorization` are redacted;
//! `max_tokens`, `tokenCount`, `secretName` and `token_usage` are not.

use serde_json::Value;

/// The replacement value.
pub const REDACTED: &str = "[REDACTED]";

fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in key.chars() {
        if ch == '_' || ch == '-' || ch == '.' || ch == ' ' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if ch.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
        cur.extend(ch.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// True when a key names a credential.
pub fn is_secret_key(key: &str) -> bool {
    let w = words(key);
    let Some(last) = w.last() else {
        return false;
    };
    if matches!(
        last.as_str(),
        "token"
            | "secret"
            | "password"
            | "passwd"
            | "authorization"
            | "credential"
            | "credentials"
            | "apikey"
            | "cookie"
    ) {
        return true;
    }
    if last == "key" && w.len() >= 2 {
        let prev = w[w.len() - 2].as_str();
        return matches!(prev, "api" | "private" | "access" | "secret");
    }
    false
}

/// Redact credential-like keys in place, recursively (arrays too). Returns
/// the JSON-pointer-ish paths (`/payload/headers/authorization`) redacted,
/// under `base`.
pub fn redact(value: &mut Value, base: &str) -> Vec<String> {
    let mut hits = Vec::new();
    walk(value, base, &mut hits);
    hits
}

fn walk(value: &mut Value, path: &str, hits: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                if is_secret_key(k) && !v.is_null() && v.as_str() != Some(REDACTED) {
                    *v = Value::String(REDACTED.to_string());
                    hits.push(p);
                } else {
                    walk(v, &p, hits);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                walk(v, &format!("{path}/{i}"), hits);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tightened_rule() {
        for k in [
            "token",
            "access_token",
            "refreshToken",
            "apiKey",
            "api_key",
            "API-KEY",
            "apikey",
            "Authorization",
            "password",
            "client_secret",
            "privateKey",
            "aws_secret_key",
            "credentials",
        ] {
            assert!(is_secret_key(k), "{k} must be flagged");
        }
        for k in [
            "max_tokens",
            "tokenCount",
            "token_usage",
            "totalTokens",
            "secretName",
            "keyboard",
            "monkey",
            "key",
            "primaryKey",
            "authorName",
        ] {
            assert!(!is_secret_key(k), "{k} must not be flagged");
        }
    }

    #[test]
    fn redacts_recursively_including_arrays() {
        let mut v = json!({
            "max_tokens": 5,
            "headers": [{"Authorization": "Bearer abc"}],
            "nested": {"apiKey": "sk-1", "ok": "x"}
        });
        let hits = redact(&mut v, "/payload");
        assert_eq!(
            hits,
            vec!["/payload/headers/0/Authorization", "/payload/nested/apiKey"]
        );
        assert_eq!(v["headers"][0]["Authorization"], REDACTED);
        assert_eq!(v["nested"]["apiKey"], REDACTED);
        assert_eq!(v["nested"]["ok"], "x");
        assert_eq!(v["max_tokens"], 5);
    }
}
