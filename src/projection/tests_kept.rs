//! Unit tests of issue 16 items 2 to 6: facts the projection keeps whole.
//! Evidence keeps its source (and becomes an AI SDK source), the
//! producer's time reaches messages and the timeline, warnings and
//! UI-local facts are said, lifecycle facts reach the snapshot.

use serde_json::{json, Value};

use super::tests::{Run, F};
use super::umo_blocks;

fn parts(r: &Run, msg: &str) -> Vec<Value> {
    let m = r.p.message(msg).expect("message");
    m.parts.iter().map(|p| p.to_json()).collect()
}

#[test]
fn evidence_keeps_its_source_and_becomes_an_ai_sdk_source_once() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(F::new("e1", "text.delta").turn("t").p("delta", json!("Per the docs, ")));
    r.apply(
        F::new("e2", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("ev-1".into()))
            .p("title", json!("Release notes"))
            .p("url", json!("https://example.com/notes?v=2"))
            .p("source", json!("Example Corp"))
            .p("snippet", json!("Escapes longer than 8 digits are refused."))
            .p("publishedAt", json!("2026-11-01")),
    );
    let e = &r.state()["evidence"]["ev-1"];
    assert_eq!(e["url"], "https://example.com/notes?v=2");
    assert_eq!(e["source"], "Example Corp");
    assert_eq!(e["snippet"], "Escapes longer than 8 digits are refused.");
    assert_eq!(e["date"], "2026-11-01");
    // A later verdict updates the card in place; the source part stays one.
    r.apply(
        F::new("e3", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("ev-1".into()))
            .p("verdict", json!("supports")),
    );
    let ps = parts(&r, "msg-2");
    let types: Vec<&str> = ps.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["text", "data-evidence-citation", "source-url"]);
    assert_eq!(ps[1]["data"]["verdict"], "supports");
    assert_eq!(ps[1]["data"]["url"], "https://example.com/notes?v=2");
    assert_eq!(ps[2], json!({"type": "source-url", "sourceId": "ev-1",
        "url": "https://example.com/notes?v=2", "title": "Release notes"}));
    // Umo: one search reference carrying url, site, date and the passage.
    let umo = umo_blocks::message(r.p.message("msg-2").unwrap());
    let refs = umo["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "search")
        .map(|b| b["data"]["references"].clone())
        .expect("a search block");
    assert_eq!(refs.as_array().unwrap().len(), 1, "card and source are one reference: {refs}");
    assert_eq!(refs[0]["url"], "https://example.com/notes?v=2");
    assert_eq!(refs[0]["site"], "Example Corp");
    assert_eq!(refs[0]["date"], "2026-11-01");
    assert!(refs[0]["content"].as_str().unwrap().contains("Escapes longer"));
    r.assert_replay();
}

#[test]
fn a_document_without_url_is_a_source_document_and_unsafe_urls_are_dropped() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(F::new("e1", "text.delta").turn("t").p("delta", json!("See the spec. ")));
    r.apply(
        F::new("e2", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("doc-1".into()))
            .p("title", json!("Lexer spec"))
            .p("mediaType", json!("application/pdf"))
            .p("filename", json!("lexer.pdf")),
    );
    r.apply(
        F::new("e3", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("bad-1".into()))
            .p("url", json!("https://user:pass@example.com/x")),
    );
    r.apply(
        F::new("e4", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("bad-2".into()))
            .p("url", json!("javascript:alert(1)")),
    );
    let ps = parts(&r, "msg-2");
    let doc = ps.iter().find(|p| p["type"] == "source-document").expect("source-document");
    assert_eq!(doc, &json!({"type": "source-document", "sourceId": "doc-1",
        "mediaType": "application/pdf", "title": "Lexer spec", "filename": "lexer.pdf"}));
    let s = r.state();
    assert!(s["evidence"]["bad-1"].get("url").is_none());
    assert!(s["evidence"]["bad-2"].get("url").is_none());
    assert!(!s.to_string().contains("user:pass"));
    assert_eq!(
        r.diag_codes().iter().filter(|c| *c == "unsafe_ref_dropped").count(),
        2
    );
    assert!(!ps.iter().any(|p| p["type"] == "source-url"), "no URL, no source-url");
    r.assert_replay();
}

#[test]
fn the_producers_time_reaches_messages_the_timeline_and_umo() {
    let mut r = Run::new();
    let at = |mut f: F, t: &str| {
        f.0.timestamp = Some(t.into());
        f
    };
    r.apply(at(F::new("e0", "run.started").turn("t"), "2026-11-25T09:00:00Z"));
    let a = r.apply(at(
        F::new("e1", "text.delta").turn("t").p("delta", json!("Hi")),
        "2026-11-25T09:00:01.250Z",
    ));
    // The start chunk carries it, so an AI SDK client has it as metadata.
    let start = a
        .chunks
        .iter()
        .find(|c| c.chunk.type_name() == "start")
        .expect("start");
    assert_eq!(
        serde_json::to_value(&start.chunk).unwrap()["messageMetadata"],
        json!({"createdAt": "2026-11-25T09:00:01.250Z"})
    );
    // A later fact's time does not move it.
    r.apply(at(
        F::new("e2", "text.delta").turn("t").p("delta", json!(" there")),
        "2026-11-25T09:00:05Z",
    ));
    let s = r.state();
    assert_eq!(s["messages"][0]["metadata"]["createdAt"], "2026-11-25T09:00:01.250Z");
    let tl = s["timeline"].as_array().unwrap();
    assert_eq!(tl[1]["timestamp"], "2026-11-25T09:00:01.250Z");
    assert_eq!(tl[2]["timestamp"], "2026-11-25T09:00:05Z");
    let umo = umo_blocks::message(r.p.message("msg-2").unwrap());
    assert_eq!(umo["datetime"], "2026-11-25T09:00:01.250Z");
    // Without a time on the opening fact: no metadata, no datetime (no clock).
    let mut q = Run::new();
    q.apply(F::new("e0", "text.delta").turn("t").p("delta", json!("x")));
    assert!(q.state()["messages"][0].get("metadata").is_none());
    assert!(umo_blocks::message(&q.p.messages()[0]).get("datetime").is_none());
    r.assert_replay();
}
