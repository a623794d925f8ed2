//! User input (seed 000 "multimodal input"): `turn.submitted` and user text
//! facts (`text.delta` / `text.final` with `payload.role: "user"`) become the
//! user message: a text part, then one part per attachment, never bytes:
//! an AI SDK `file` part (url + media type) or a `data-attachment` ref part
//! (asset, upload, document, business object or capability refs).
//! Inline bytes (`data:` URLs, `data`/`base64`/`bytes` fields) and local
//! absolute paths are dropped with a finding; a sensitive attachment keeps
//! only its capability ref. A user-role text from a teammate is a worker
//! notification, never user speech.

use serde_json::{json, Value};

use super::chunk::Chunk;
use super::reducer::{merge, nonempty, truncate, Reducer};
use super::ui_message::Role;
use crate::event::redact;

/// Attachments kept per user message.
pub const MAX_ATTACHMENTS: usize = 32;

/// One attachment as it enters the message.
#[derive(Debug, Clone, PartialEq)]
pub enum Attachment {
    /// An AI SDK `file` part.
    File { url: String, media_type: String },
    /// A `data-attachment` part: `id`, ref data.
    Ref { id: String, data: Value },
}

fn s(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| {
        v.get(*k)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string)
    })
}

/// Why an attachment carries bytes inline, if it does.
fn inline_bytes(v: &Value) -> bool {
    let data_url = ["url", "uri", "href", "ref", "src"].iter().any(|k| {
        v.get(*k)
            .and_then(Value::as_str)
            .is_some_and(|u| u.trim_start().to_ascii_lowercase().starts_with("data:"))
    });
    data_url
        || ["data", "base64", "bytes", "blob"]
            .iter()
            .any(|k| v.get(*k).is_some_and(|x| !x.is_null()))
}

/// Parse one attachment; `Err` is the reason it was dropped.
pub fn parse_attachment(v: &Value, index: usize) -> Result<Attachment, String> {
    let v = match v {
        Value::String(r) => json!({ "ref": r }),
        Value::Object(_) => v.clone(),
        _ => return Err("not an object or a ref string".into()),
    };
    if inline_bytes(&v) {
        return Err("it carries bytes inline (send an upload, asset or document ref)".into());
    }
    let kind = s(&v, &["type", "kind", "attachmentType"]).unwrap_or_else(|| "file".into());
    let name = s(&v, &["name", "filename", "title"]).map(|n| truncate(&n, 200));
    let media = s(&v, &["mediaType", "mimeType", "contentType"]);
    let sensitive = v.get("sensitive").and_then(Value::as_bool) == Some(true);
    let mut url = s(&v, &["url", "uri", "href"]);
    let mut r = s(
        &v,
        &[
            "capabilityRef",
            "ref",
            "assetRef",
            "uploadRef",
            "documentRef",
            "objectRef",
            "assetId",
            "uploadId",
            "documentId",
            "path",
        ],
    );
    let mut dropped_local = false;
    for slot in [&mut url, &mut r] {
        if slot.as_deref().and_then(redact::unsafe_ref).is_some() {
            *slot = None;
            dropped_local = true;
        }
    }
    let object_type = s(&v, &["objectType", "businessType"]);
    let object_id = s(&v, &["objectId", "businessId"]);
    if sensitive {
        // Only an authorised capability ref travels; never a URL or path.
        let Some(cap) = s(&v, &["capabilityRef"]).filter(|c| redact::unsafe_ref(c).is_none())
        else {
            return Err("a sensitive attachment without a capability ref".into());
        };
        let mut data = json!({"kind": kind, "ref": cap, "sensitive": true});
        merge(&mut data, json!({"name": name, "mediaType": media}));
        return Ok(Attachment::Ref {
            id: s(&v, &["id"]).unwrap_or(cap),
            data,
        });
    }
    if let (Some(u), Some(m)) = (&url, &media) {
        return Ok(Attachment::File {
            url: u.clone(),
            media_type: m.clone(),
        });
    }
    if r.is_none() && url.is_none() && object_id.is_none() {
        return Err(if dropped_local {
            "its only ref was a local absolute path or a URL with credentials".into()
        } else {
            "it names no ref, URL or business object".into()
        });
    }
    let id = s(&v, &["id"])
        .or_else(|| r.clone())
        .or_else(|| {
            object_id
                .as_ref()
                .map(|o| format!("{}:{o}", object_type.as_deref().unwrap_or("object")))
        })
        .unwrap_or_else(|| format!("att-{index}"));
    let mut data = json!({"kind": kind});
    merge(
        &mut data,
        json!({"ref": r, "url": url, "name": name, "mediaType": media,
               "objectType": object_type, "objectId": object_id, "size": v.get("size")}),
    );
    Ok(Attachment::Ref { id, data })
}

impl<'a> Reducer<'a> {
    /// The attachments of a user input fact, dropping the unsafe ones.
    fn attachments(&mut self) -> Vec<Attachment> {
        let mut out = Vec::new();
        let mut n = 0;
        for key in ["attachments", "files", "images"] {
            let Some(Value::Array(items)) = self.fact.payload_get(key) else {
                continue;
            };
            let items = items.clone();
            for it in items {
                n += 1;
                if out.len() >= MAX_ATTACHMENTS {
                    self.finding(
                        "attachment_dropped",
                        format!("more than {MAX_ATTACHMENTS} attachments; the rest were dropped"),
                    );
                    return out;
                }
                match parse_attachment(&it, n - 1) {
                    Ok(a) => out.push(a),
                    Err(why) => self.finding(
                        "attachment_dropped",
                        format!("attachment {} of {key} dropped: {why}", n - 1),
                    ),
                }
            }
        }
        out
    }

    /// `turn.submitted` (and user text facts): the user message.
    pub fn on_user_input(&mut self) {
        let text = self
            .first_str(&["text", "input", "content", "prompt"])
            .or_else(|| self.first_str(&["message"]));
        let atts = self.attachments();
        if text.is_none() && atts.is_empty() {
            return;
        }
        let base = self
            .explicit_message_id()
            .or_else(|| self.turn().map(|t| format!("user-{t}")))
            .unwrap_or_else(|| format!("user-{}", self.cursor));
        let id = if self.msg(&base).is_some() {
            self.fresh_message_id(format!("user-{}", self.cursor))
        } else {
            base
        };
        self.create_message(&id, Role::User);
        if let Some(text) = text {
            let pid = format!("{id}-t0");
            self.books.part_ids.record(&id, &pid, 0);
            self.emit(&id, Chunk::TextStart { id: pid.clone() });
            let c = Chunk::TextDelta {
                id: pid.clone(),
                delta: text,
            };
            self.emit(&id, c);
            self.emit(&id, Chunk::TextEnd { id: pid });
        }
        for a in atts {
            let c = match a {
                Attachment::File { url, media_type } => Chunk::File { url, media_type },
                Attachment::Ref { id, data } => Chunk::data("attachment", id, data),
            };
            self.emit(&id, c);
        }
        self.emit(
            &id,
            Chunk::Finish {
                finish_reason: None,
            },
        );
    }

    /// A user-role text fact: the user's message, or, when a teammate sent
    /// it, a worker notification (never user speech).
    pub fn on_user_text(&mut self) {
        if self.agent().is_some() || nonempty(self.fact.ids.worker_id.as_deref()).is_some() {
            self.on_worker_notification();
            return;
        }
        self.on_user_input();
    }
}
