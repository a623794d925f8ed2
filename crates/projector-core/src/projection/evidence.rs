//! The evidence surface (`evidence.changed`, `review.completed`): citations
//! with their source (URL, publisher, passage, date), verdicts only from
//! `payload.verdict`. Inside an assistant message an evidence is also an AI
//! SDK source: `source-url` when it has a URL, `source-document` when it is
//! a document without one, added once per message (the AI SDK appends
//! sources, it never replaces them), beside the `data-evidence-citation`
//! card that follows every change.

use serde_json::json;

use super::public_state::{EvidenceEntry, Severity};
use super::reducer::{merge, nonempty, push_unique, truncate, Reducer};
use super::ui_message::Part;
use super::Chunk;
use crate::event::redact;

/// Characters kept of a snippet.
const MAX_SNIPPET: usize = 1_000;

/// What an evidence fact says about its source.
struct Source {
    url: Option<String>,
    source: Option<String>,
    snippet: Option<String>,
    date: Option<String>,
    media_type: Option<String>,
    filename: Option<String>,
}

impl Reducer<'_> {
    /// The source fields of the fact's payload; a URL that is not http(s),
    /// or carries credentials, is dropped with a diagnostic.
    fn evidence_source(&mut self) -> Source {
        let url = self.first_str(&["url", "href", "link"]);
        let url = match url {
            Some(u) => {
                let web = u.starts_with("https://") || u.starts_with("http://");
                match redact::unsafe_ref(&u).or((!web).then_some("not an http(s) URL")) {
                    None => Some(u),
                    Some(why) => {
                        self.diag(
                            "unsafe_ref_dropped",
                            Severity::Warning,
                            format!("evidence URL dropped: {why}"),
                        );
                        None
                    }
                }
            }
            None => None,
        };
        Source {
            url,
            source: self.first_str(&["source", "site", "publisher"]),
            snippet: self
                .first_str(&["snippet", "excerpt", "quote"])
                .map(|t| truncate(&t, MAX_SNIPPET)),
            date: self.first_str(&["date", "publishedAt", "retrievedAt"]),
            media_type: self.first_str(&["mediaType", "mimeType"]),
            filename: self.first_str(&["filename", "fileName"]),
        }
    }

    /// `evidence.changed | review.completed`: verdicts only from `payload.verdict`.
    pub fn on_evidence_facts(&mut self) {
        let mut ids = Vec::new();
        if let Some(e) = nonempty(self.fact.ids.evidence_id.as_deref()) {
            ids.push(e);
        }
        for e in &self.fact.evidence_refs {
            push_unique(&mut ids, e);
        }
        if ids.is_empty() {
            return;
        }
        let refs = self.payload_refs();
        let verdict = self.first_str(&["verdict"]);
        let src = self.evidence_source();
        let msg = self.card_message();
        // The entity's own name (payload) before the event's title.
        let title = self
            .first_str(&["title", "name"])
            .or_else(|| nonempty(self.fact.title.as_deref()))
            .map(|t| truncate(&t, 200));
        for eid in ids {
            let cursor = self.cursor;
            let e = self
                .state
                .evidence
                .entry(eid.clone())
                .or_insert_with(|| EvidenceEntry {
                    evidence_id: eid.clone(),
                    title: None,
                    verdict: None,
                    url: None,
                    source: None,
                    snippet: None,
                    date: None,
                    media_type: None,
                    filename: None,
                    refs: Vec::new(),
                    message_id: None,
                    updated_cursor: cursor,
                });
            if let Some(t) = &title {
                e.title = Some(t.clone());
            }
            if verdict.is_some() {
                e.verdict = verdict.clone();
            }
            for (field, v) in [
                (&mut e.url, &src.url),
                (&mut e.source, &src.source),
                (&mut e.snippet, &src.snippet),
                (&mut e.date, &src.date),
                (&mut e.media_type, &src.media_type),
                (&mut e.filename, &src.filename),
            ] {
                if v.is_some() {
                    field.clone_from(v);
                }
            }
            for r in &refs {
                push_unique(&mut e.refs, r);
            }
            e.updated_cursor = cursor;
            if let Some(m) = &msg {
                e.message_id = Some(m.clone());
                let mut card = json!({"evidenceId": eid});
                merge(
                    &mut card,
                    json!({"title": e.title, "verdict": e.verdict, "url": e.url,
                           "source": e.source, "snippet": e.snippet, "date": e.date,
                           "refs": e.refs}),
                );
                let source = source_chunk(e);
                self.put_data_part(m, "evidence-citation", &eid, card);
                self.add_source(m, source);
            }
            self.touch("evidence", eid);
        }
    }

    /// Add an AI SDK source part to `msg` unless it already has one for
    /// this source id.
    fn add_source(&mut self, msg: &str, chunk: Option<Chunk>) {
        let Some(chunk) = chunk else { return };
        let id = match &chunk {
            Chunk::SourceUrl { source_id, .. } | Chunk::SourceDocument { source_id, .. } => {
                source_id.clone()
            }
            _ => return,
        };
        let present = self.msg(msg).is_some_and(|m| {
            m.parts.iter().any(|p| {
                matches!(p, Part::SourceUrl { source_id, .. }
                    | Part::SourceDocument { source_id, .. } if *source_id == id)
            })
        });
        if !present {
            self.emit(msg, chunk);
        }
    }
}

/// The AI SDK source of an evidence: `source-url` with a URL, else
/// `source-document` for a document with a media type; none otherwise.
fn source_chunk(e: &EvidenceEntry) -> Option<Chunk> {
    let title = e.title.clone();
    if let Some(url) = &e.url {
        return Some(Chunk::SourceUrl {
            source_id: e.evidence_id.clone(),
            url: url.clone(),
            title,
        });
    }
    let media_type = e.media_type.clone()?;
    Some(Chunk::SourceDocument {
        source_id: e.evidence_id.clone(),
        media_type,
        title: title
            .or_else(|| e.filename.clone())
            .unwrap_or_else(|| e.evidence_id.clone()),
        filename: e.filename.clone(),
    })
}
