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

/// Why a ref must not be stored, if it must not: a local absolute path
/// (seed 000: only capability refs, never local paths) or a URL that carries
/// credentials (user info, or a credential-like query parameter).
pub fn unsafe_ref(r: &str) -> Option<&'static str> {
    let t = r.trim();
    let lower = t.to_ascii_lowercase();
    let windows_drive = t.len() > 2
        && t.as_bytes()[0].is_ascii_alphabetic()
        && t.as_bytes()[1] == b':'
        && (t.as_bytes()[2] == b'\\' || t.as_bytes()[2] == b'/');
    if t.starts_with('/')
        || t.starts_with("~/")
        || t.starts_with("\\\\")
        || windows_drive
        || lower.starts_with("file:")
    {
        return Some("a local absolute path");
    }
    if let Some((scheme, rest)) = t.split_once("://") {
        if scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
        {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            if authority.contains('@') {
                return Some("a URL with credentials in it");
            }
            if let Some((_, query)) = rest.split_once('?') {
                let query = query.split('#').next().unwrap_or("");
                for pair in query.split('&') {
                    let key = pair.split('=').next().unwrap_or("");
                    let k = key.to_ascii_lowercase();
                    if is_secret_key(key)
                        || matches!(
                            k.as_str(),
                            "sig"
                                | "signature"
                                | "x-amz-signature"
                                | "x-amz-credential"
                                | "x-goog-signature"
                                | "code"
                                | "key"
                        )
                    {
                        return Some("a URL with a credential in its query");
                    }
                }
            }
        }
    }
    None
}

/// The replacement value.
pub const REDACTED: &str = "[REDACTED]";

/// The last two words of a key (split on `_`, `-`, `.`, spaces and
/// camelCase), the last one second, as slices of the key: read for every key
/// of every event, so nothing is allocated.
fn last_words(key: &str) -> (Option<&str>, Option<&str>) {
    let (mut before, mut last) = (None, None);
    let mut start: Option<usize> = None;
    let mut prev_lower = false;
    let mut end_word = |from: usize, to: usize| {
        before = last.replace(&key[from..to]);
    };
    for (i, ch) in key.char_indices() {
        if ch == '_' || ch == '-' || ch == '.' || ch == ' ' {
            if let Some(from) = start.take() {
                end_word(from, i);
            }
            prev_lower = false;
            continue;
        }
        if ch.is_uppercase() && prev_lower {
            if let Some(from) = start.take() {
                end_word(from, i);
            }
        }
        start.get_or_insert(i);
        prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
    }
    if let Some(from) = start {
        end_word(from, key.len());
    }
    (before, last)
}

/// Whether a word, lowercased, is one of `names` (all lowercase ASCII).
fn word_is(word: Option<&str>, names: &[&str]) -> bool {
    let Some(word) = word else {
        return false;
    };
    if word.is_ascii() {
        return names.iter().any(|n| word.eq_ignore_ascii_case(n));
    }
    // Some non-ASCII letters lowercase to ASCII ones (the Kelvin sign to `k`).
    let lower = word.to_lowercase();
    names.contains(&lower.as_str())
}

/// True when a key names a credential.
pub fn is_secret_key(key: &str) -> bool {
    let (before, last) = last_words(key);
    const LAST: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "authorization",
        "credential",
        "credentials",
        "apikey",
        "cookie",
    ];
    word_is(last, LAST)
        || (word_is(last, &["key"]) && word_is(before, &["api", "private", "access", "secret"]))
}

/// Append `key` to a JSON pointer `path` as one segment (`~` and `/`
/// escaped as `~0` and `~1`).
fn push_segment(path: &mut String, key: &str) {
    path.push('/');
    if !key.contains(['~', '/']) {
        path.push_str(key);
        return;
    }
    for ch in key.chars() {
        match ch {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

/// Append an array index to a JSON pointer `path` as one segment.
fn push_index(path: &mut String, i: usize) {
    path.push('/');
    path.push_str(itoa::Buffer::new().format(i));
}

/// Where a walk is in a value: a JSON pointer below `base`, written out
/// as a string only for a hit. With the pointer as a string, the walks
/// (here and the shape check's) pushed and popped a segment at every key,
/// each in a buffer of its own: 1.8% of a single-event POST's
/// instructions, whose values hold nothing to report (docs/BENCHMARKS.md).
#[derive(Clone, Copy)]
pub enum At<'a> {
    Base(&'a str),
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    /// The pointer as a string.
    pub fn path(&self) -> String {
        let mut out = String::with_capacity(64);
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match *self {
            At::Base(base) => out.push_str(base),
            At::Key(parent, key) => {
                parent.write(out);
                push_segment(out, key);
            }
            At::Index(parent, i) => {
                parent.write(out);
                push_index(out, i);
            }
        }
    }
}

/// Redact credential-like keys in place, recursively (arrays too). Returns
/// the JSON-pointer-ish paths (`/payload/headers/authorization`) redacted,
/// under `base`.
pub fn redact(value: &mut Value, base: &str) -> Vec<String> {
    let mut hits = Vec::new();
    walk(value, At::Base(base), &mut hits);
    hits
}

/// `at` is where `value` is (a string is made only for a hit).
fn walk(value: &mut Value, at: At<'_>, hits: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let here = At::Key(&at, k);
                if is_secret_key(k) && !v.is_null() && v.as_str() != Some(REDACTED) {
                    *v = Value::String(REDACTED.to_string());
                    hits.push(here.path());
                } else {
                    walk(v, here, hits);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                walk(v, At::Index(&at, i), hits);
            }
        }
        _ => {}
    }
}

/// True for keys that hold refs: `*Ref`, `*Refs`, `*Url`, `*Uri`, `url`, `uri`.
fn is_ref_key(key: &str) -> bool {
    word_is(
        last_words(key).1,
        &["ref", "refs", "url", "urls", "uri", "uris", "href"],
    )
}

/// Drop unsafe refs from a JSON value: strings under ref-like keys (and,
/// with `all_strings`, every string) that [`unsafe_ref`] rejects are removed
/// (array elements) or nulled (object values). Returns the paths dropped.
pub fn drop_unsafe_refs(v: &mut Value, base: &str, all_strings: bool) -> Vec<String> {
    let mut hits = Vec::new();
    walk_refs(v, At::Base(base), all_strings, &mut hits);
    hits
}

fn walk_refs(v: &mut Value, at: At<'_>, here: bool, hits: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                let key_at = At::Key(&at, k);
                let refy = here || is_ref_key(k);
                match val {
                    Value::String(s) if refy && unsafe_ref(s).is_some() => {
                        *val = Value::Null;
                        hits.push(key_at.path());
                    }
                    _ => walk_refs(val, key_at, refy, hits),
                }
            }
        }
        Value::Array(items) => {
            let mut idx = 0;
            items.retain_mut(|it| {
                let item_at = At::Index(&at, idx);
                idx += 1;
                match it {
                    Value::String(s) if here && unsafe_ref(s).is_some() => {
                        hits.push(item_at.path());
                        false
                    }
                    _ => {
                        walk_refs(it, item_at, here, hits);
                        true
                    }
                }
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The words as a key was split before [`last_words`]: every word,
    /// lowercased.
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

    #[test]
    fn last_words_are_the_last_two_of_the_split() {
        for k in [
            "",
            "_",
            "a",
            "apiKey",
            "API-KEY",
            "aws_secret_key",
            "x__y--z",
            "tokenCount",
            "HTTPHeader",
            "a1B2c3",
            "ÉtéKey",
            "straßeToken",
            "\u{212A}ey",
            "api \u{212A}ey",
            "private.key.",
            "..",
            "Ωmega_url",
            "mixedCASEWord_ref",
        ] {
            let w = words(k);
            let n = w.len();
            let (before, last) = last_words(k);
            let low = |s: Option<&str>| s.map(str::to_lowercase);
            assert_eq!(low(last), w.last().cloned(), "{k:?}");
            assert_eq!(low(before), (n >= 2).then(|| w[n - 2].clone()), "{k:?}");
        }
        // The Kelvin sign lowercases to an ASCII `k`: still a key.
        assert!(is_secret_key("api_\u{212A}ey"));
    }

    #[test]
    fn segments_are_escaped_as_json_pointers() {
        let mut p = String::from("/payload");
        push_segment(&mut p, "a/b~c");
        push_index(&mut p, 12);
        push_segment(&mut p, "plain");
        assert_eq!(p, "/payload/a~1b~0c/12/plain");
    }

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
    fn walks_name_the_paths_they_change_and_only_those() {
        /// A value, what is redacted, the refs dropped under ref keys, and
        /// with every string a ref.
        type Case = (
            Value,
            &'static [&'static str],
            &'static [&'static str],
            &'static [&'static str],
        );
        let cases: [Case; 10] = [
            (json!({"delta": "token "}), &[], &[], &[]),
            (
                json!({"headers": {"Authorization": "Bearer x"}}),
                &["/p/headers/Authorization"],
                &[],
                &[],
            ),
            (
                json!({"a": [{"b": [{"apiKey": "k"}]}]}),
                &["/p/a/0/b/0/apiKey"],
                &[],
                &[],
            ),
            (json!({"password": null, "token": REDACTED}), &[], &[], &[]),
            (json!([{"token": 1}]), &["/p/0/token"], &[], &[]),
            (
                json!({"fileRef": "/home/ana/a", "name": "/home/ana/b"}),
                &[],
                &["/p/fileRef"],
                &["/p/fileRef", "/p/name"],
            ),
            (
                json!({"outer": {"refs": [["ok://a", "file:///x"]]}}),
                &[],
                &["/p/outer/refs/0/1"],
                &["/p/outer/refs/0/1"],
            ),
            (json!(["/tmp/x"]), &[], &[], &["/p/0"]),
            (
                json!({"links": {"a/b": {"href": "https://u:p@x.test/"}}}),
                &[],
                &["/p/links/a~1b/href"],
                &["/p/links/a~1b/href"],
            ),
            (json!("file:///x"), &[], &[], &[]),
        ];
        for (v, secrets, refs, all) in cases {
            assert_eq!(redact(&mut v.clone(), "/p"), secrets, "{v}");
            assert_eq!(drop_unsafe_refs(&mut v.clone(), "/p", false), refs, "{v}");
            assert_eq!(drop_unsafe_refs(&mut v.clone(), "/p", true), all, "{v}");
        }
    }

    #[test]
    fn drops_unsafe_refs_under_ref_keys_only() {
        let mut v = json!({
            "outputRef": "/home/ana/out.log",
            "path": "/workspace/src/a.rs",
            "attachments": [{"url": "https://u:p@x.test/a", "name": "a"}],
            "sourceUrls": ["https://ok.test/a", "file:///etc/passwd"]
        });
        let hits = drop_unsafe_refs(&mut v, "/payload", false);
        assert_eq!(
            hits,
            vec![
                "/payload/outputRef",
                "/payload/attachments/0/url",
                "/payload/sourceUrls/1"
            ]
        );
        assert_eq!(v["path"], "/workspace/src/a.rs", "a file path is not a ref");
        assert_eq!(v["sourceUrls"], json!(["https://ok.test/a"]));
        let mut refs = json!(["artifact://a", "/tmp/x"]);
        assert_eq!(drop_unsafe_refs(&mut refs, "/refs", true), vec!["/refs/1"]);
    }

    #[test]
    fn unsafe_refs() {
        for r in [
            "/home/ana/secret.pdf",
            "~/notes.txt",
            "C:\\Users\\ana\\a.doc",
            "file:///etc/passwd",
            "https://user:pw@example.com/a",
            "https://s3.example.com/b?X-Amz-Signature=abc&X-Amz-Credential=x",
            "https://api.example.com/x?access_token=abc",
            "https://api.example.com/x?api_key=abc",
        ] {
            assert!(unsafe_ref(r).is_some(), "{r} must be dropped");
        }
        for r in [
            "artifact://fixture/src-app",
            "upload://u1",
            "https://example.com/docs?page=2",
            "output_fixture_test_log",
            "src/App.tsx",
            "evidence://fixture/hint",
        ] {
            assert_eq!(unsafe_ref(r), None, "{r} is a fine ref");
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
