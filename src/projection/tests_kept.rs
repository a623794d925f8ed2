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
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Per the docs, ")),
    );
    r.apply(
        F::new("e2", "evidence.changed")
            .turn("t")
            .ids(|i| i.evidence_id = Some("ev-1".into()))
            .p("title", json!("Release notes"))
            .p("url", json!("https://example.com/notes?v=2"))
            .p("source", json!("Example Corp"))
            .p(
                "snippet",
                json!("Escapes longer than 8 digits are refused."),
            )
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
    assert_eq!(
        ps[2],
        json!({"type": "source-url", "sourceId": "ev-1",
        "url": "https://example.com/notes?v=2", "title": "Release notes"})
    );
    // Umo: one search reference carrying url, site, date and the passage.
    let umo = umo_blocks::message(r.p.message("msg-2").unwrap());
    let refs = umo["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "search")
        .map(|b| b["data"]["references"].clone())
        .expect("a search block");
    assert_eq!(
        refs.as_array().unwrap().len(),
        1,
        "card and source are one reference: {refs}"
    );
    assert_eq!(refs[0]["url"], "https://example.com/notes?v=2");
    assert_eq!(refs[0]["site"], "Example Corp");
    assert_eq!(refs[0]["date"], "2026-11-01");
    assert!(refs[0]["content"]
        .as_str()
        .unwrap()
        .contains("Escapes longer"));
    r.assert_replay();
}

#[test]
fn a_document_without_url_is_a_source_document_and_unsafe_urls_are_dropped() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("See the spec. ")),
    );
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
    let doc = ps
        .iter()
        .find(|p| p["type"] == "source-document")
        .expect("source-document");
    assert_eq!(
        doc,
        &json!({"type": "source-document", "sourceId": "doc-1",
        "mediaType": "application/pdf", "title": "Lexer spec", "filename": "lexer.pdf"})
    );
    let s = r.state();
    assert!(s["evidence"]["bad-1"].get("url").is_none());
    assert!(s["evidence"]["bad-2"].get("url").is_none());
    assert!(!s.to_string().contains("user:pass"));
    assert_eq!(
        r.diag_codes()
            .iter()
            .filter(|c| *c == "unsafe_ref_dropped")
            .count(),
        2
    );
    assert!(
        !ps.iter().any(|p| p["type"] == "source-url"),
        "no URL, no source-url"
    );
    r.assert_replay();
}

#[test]
fn the_producers_time_reaches_messages_the_timeline_and_umo() {
    let mut r = Run::new();
    let at = |mut f: F, t: &str| {
        f.0.timestamp = Some(t.into());
        f
    };
    r.apply(at(
        F::new("e0", "run.started").turn("t"),
        "2026-11-25T09:00:00Z",
    ));
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
        F::new("e2", "text.delta")
            .turn("t")
            .p("delta", json!(" there")),
        "2026-11-25T09:00:05Z",
    ));
    let s = r.state();
    assert_eq!(
        s["messages"][0]["metadata"]["createdAt"],
        "2026-11-25T09:00:01.250Z"
    );
    let tl = s["timeline"].as_array().unwrap();
    assert_eq!(tl[1]["timestamp"], "2026-11-25T09:00:01.250Z");
    assert_eq!(tl[2]["timestamp"], "2026-11-25T09:00:05Z");
    let umo = umo_blocks::message(r.p.message("msg-2").unwrap());
    assert_eq!(umo["datetime"], "2026-11-25T09:00:01.250Z");
    // Without a time on the opening fact: no metadata, no datetime (no clock).
    let mut q = Run::new();
    q.apply(F::new("e0", "text.delta").turn("t").p("delta", json!("x")));
    assert!(q.state()["messages"][0].get("metadata").is_none());
    assert!(umo_blocks::message(&q.p.messages()[0])
        .get("datetime")
        .is_none());
    r.assert_replay();
}

#[test]
fn a_runtime_warning_is_referenced_from_its_message_like_an_error() {
    // Through the normaliser: `runtime.warning` is an alias of `diagnostic.changed`.
    let raw = json!({"type": "runtime.warning", "turnId": "t",
        "payload": {"code": "rate_limited", "message": "slowed down by the provider"}});
    let n = crate::event::normalize(raw, &crate::event::Limits::default()).unwrap();
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Working")),
    );
    r.apply(F(n.fact));
    let ps = parts(&r, "msg-2");
    let refp = ps
        .iter()
        .find(|p| p["type"] == "data-diagnostic-ref")
        .expect("a diagnostic ref");
    assert_eq!(refp["data"]["code"], "rate_limited");
    assert_eq!(refp["data"]["severity"], "warning");
    let s = r.state();
    assert_eq!(s["diagnostics"][0]["code"], "rate_limited");
    assert_eq!(s["runtime"]["status"], "running", "a warning ends nothing");
    // A plain diagnostic.changed stays off the conversation.
    r.apply(
        F::new("e3", "diagnostic.changed")
            .turn("t")
            .p("code", json!("slow_disk")),
    );
    assert_eq!(
        parts(&r, "msg-2")
            .iter()
            .filter(|p| p["type"] == "data-diagnostic-ref")
            .count(),
        1
    );
    r.assert_replay();
}

#[test]
fn ui_local_facts_are_kept_aside_with_a_warning_and_change_nothing() {
    let mut r = Run::new();
    r.apply(F::new("e0", "run.started").turn("t"));
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Hello")),
    );
    let before = r.state();
    let mut draft = F::new("e2", "text.delta")
        .turn("t")
        .p("delta", json!(" (local draft)"));
    draft.0.taxonomy.persistence = Some("ui_local".into());
    let a = r.apply(draft);
    let mut collapse = F::new("e3", "run.finished").turn("t");
    collapse.0.taxonomy.owner = Some("ui_projection".into());
    let b = r.apply(collapse);
    for applied in [&a, &b] {
        assert!(applied.findings.iter().any(|f| f.code == "ui_local_fact"));
    }
    let s = r.state();
    assert_eq!(s["messages"], before["messages"], "never transcript truth");
    assert_eq!(s["runtime"]["status"], "running", "never runtime truth");
    let aside: Vec<&str> = s["uiLocal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["eventId"].as_str().unwrap())
        .collect();
    assert_eq!(aside, ["e2", "e3"]);
    assert_eq!(s["uiLocal"][0]["persistence"], "ui_local");
    assert_eq!(
        s["timeline"].as_array().unwrap().len(),
        4,
        "still on the timeline"
    );
    r.assert_replay();
}

#[test]
fn taxonomy_values_outside_the_seeds_sets_are_kept_and_warned_about() {
    let raw = json!({"type": "action.required", "actionId": "a", "owner": "robot",
        "phase": "acting", "surface": "hologram", "topology": "mesh",
        "payload": {"actionType": "telepathy"}});
    let n = crate::event::normalize(raw, &crate::event::Limits::default()).unwrap();
    let paths: Vec<&str> = n
        .warnings
        .iter()
        .filter(|w| w.code == crate::event::taxonomy::UNKNOWN_TAXONOMY_VALUE)
        .map(|w| w.path.as_str())
        .collect();
    assert_eq!(
        paths,
        ["/owner", "/surface", "/topology", "/payload/actionType"]
    );
    assert_eq!(
        n.fact.taxonomy.owner.as_deref(),
        Some("robot"),
        "kept as sent"
    );
    assert_eq!(n.fact.taxonomy.topology.as_deref(), Some("mesh"));
    let ok = json!({"type": "action.required", "actionId": "a", "owner": "policy",
        "scope": "action_request", "surface": "hitl", "persistence": "snapshot",
        "control": "approve", "topology": "solo_run",
        "payload": {"actionType": "tool_approval"}});
    let n = crate::event::normalize(ok, &crate::event::Limits::default()).unwrap();
    assert!(n.warnings.is_empty(), "{:?}", n.warnings);
}
