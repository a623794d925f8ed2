//! The cursor grammar of every stream: where a client says it resumes
//! (`Last-Event-ID`, else `?cursor=`), and what a cursor is (`<epoch>:<n>`,
//! as the SSE ids give it, or a bare `<n>`).

use axum::http::HeaderMap;

/// Where a stream resumes as the client said it: the `Last-Event-ID`
/// header (what an EventSource sends back), else `?cursor=`.
pub fn resume_point(headers: &HeaderMap, cursor: Option<&str>) -> Option<String> {
    headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("\u{0}").trim().to_string())
        .filter(|s| !s.is_empty())
        .or(cursor.filter(|s| !s.is_empty()).map(str::to_string))
}

/// `<epoch>:<cursor>` (what the server sends as SSE ids) or a bare
/// `<cursor>`; the epoch is 1 to 64 ASCII alphanumerics.
pub fn parse(s: &str) -> Option<(Option<&str>, u64)> {
    let (epoch, n) = match s.rsplit_once(':') {
        Some((e, _)) if e.is_empty() || e.len() > 64 => return None,
        Some((e, _)) if !e.bytes().all(|b| b.is_ascii_alphanumeric()) => return None,
        Some((e, n)) => (Some(e), n),
        None => (None, s),
    };
    // `u64::from_str` takes a leading `+`; a cursor is digits only.
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((epoch, n.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_parse_as_sse_ids_give_them() {
        assert_eq!(parse("0123abcd:42"), Some((Some("0123abcd"), 42)));
        assert_eq!(parse("7"), Some((None, 7)));
        for bad in [
            "",
            ":1",
            "+1",
            "e:",
            "a-b:1",
            "1.5",
            &format!("{}:1", "e".repeat(65)),
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let mut h = HeaderMap::new();
        assert_eq!(resume_point(&h, Some("3")), Some("3".into()));
        h.insert("last-event-id", " e1:2 ".parse().unwrap());
        assert_eq!(
            resume_point(&h, Some("3")),
            Some("e1:2".into()),
            "the header wins"
        );
    }
}
