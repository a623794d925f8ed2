//! The artifacts and diagnostics surfaces (`artifact.*`, `diagnostic.*`,
//! and `file.read|changed` naming artifacts): refs, never bodies. Each entry change travels as a `data-<surface>`
//! chunk; message cards are added only inside an assistant message context.

use serde_json::{json, Value};

use super::public_state::{ArtifactEntry, Severity, UiLocalEntry, MAX_UI_LOCAL};
use super::reducer::{nonempty, push_unique, truncate, Reducer};

/// The `data-artifact-card` of an entry: `{artifactId, title?, kind?,
/// versionId?, refs}`, in that key order.
fn artifact_card(e: &ArtifactEntry) -> Value {
    let mut m = serde_json::Map::with_capacity(5);
    m.insert("artifactId".into(), e.artifact_id.clone().into());
    for (k, v) in [
        ("title", &e.title),
        ("kind", &e.kind),
        ("versionId", &e.version_id),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), v.clone().into());
        }
    }
    m.insert("refs".into(), e.refs.clone().into());
    Value::Object(m)
}

impl Reducer<'_> {
    /// A fact the UI owns: listed in `uiLocal` with a warning, never applied.
    pub fn keep_aside(&mut self) {
        self.state.ui_local.push_back(UiLocalEntry {
            cursor: self.cursor,
            event_id: self.fact.id.clone(),
            class: self.fact.source_class.clone(),
            owner: self.fact.taxonomy.owner.clone(),
            persistence: self.fact.taxonomy.persistence.clone(),
        });
        while self.state.ui_local.len() > MAX_UI_LOCAL {
            self.state.ui_local.pop_front();
        }
        self.finding(
            "ui_local_fact",
            format!(
                "{} is UI-owned (owner: ui_projection or persistence: ui_local): kept aside, never transcript or runtime truth",
                self.fact.source_class
            ),
        );
        self.touch("uiLocal", self.fact.id.clone());
    }

    /// Refs named by the payload (never bodies).
    pub(super) fn payload_refs(&self) -> Vec<String> {
        let mut v = self.refs();
        for k in ["diffRef", "contentRef", "checkpointRef", "previewRef"] {
            if let Some(r) = self.first_str(&[k]) {
                push_unique(&mut v, &r);
            }
        }
        v
    }

    /// Artifact ids of the fact: `ids.artifactId` and each of `artifactRefs`.
    fn artifact_ids(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(a) = nonempty(self.fact.ids.artifact_id.as_deref()) {
            v.push(a);
        }
        for a in &self.fact.artifact_refs {
            push_unique(&mut v, a);
        }
        v
    }

    /// The assistant message a card goes into, if the fact has a context.
    pub(super) fn card_message(&mut self) -> Option<String> {
        if self.has_message_context() {
            Some(self.ensure_assistant().to_string())
        } else {
            None
        }
    }

    /// `artifact.*`, and `file.read|changed` naming artifacts.
    pub fn on_artifact_facts(&mut self) {
        let ids = self.artifact_ids();
        if ids.is_empty() {
            return;
        }
        let refs = self.payload_refs();
        let kind = self.first_str(&["artifactKind", "kind", "type"]);
        let status = match self.fact.class.as_str() {
            "artifact.deleted" => Some("deleted".to_string()),
            "artifact.failed" => Some("failed".to_string()),
            _ => self
                .first_str(&["status"])
                .or_else(|| self.fact.status.clone()),
        };
        let msg = if self.fact.family() == "artifact" {
            self.card_message()
        } else {
            None
        };
        // The entity's own name (payload) before the event's title.
        let title = self
            .first_str(&["title", "name"])
            .or_else(|| nonempty(self.fact.title.as_deref()))
            .map(|t| truncate(&t, 200));
        for aid in ids {
            let cursor = self.cursor;
            let e = self
                .state
                .artifacts
                .entry(aid.clone())
                .or_insert_with(|| ArtifactEntry {
                    artifact_id: aid.clone(),
                    title: None,
                    kind: None,
                    status: None,
                    version_id: None,
                    path: None,
                    refs: Vec::new(),
                    message_id: None,
                    updated_cursor: cursor,
                });
            if let Some(t) = &title {
                e.title = Some(t.clone());
            }
            if kind.is_some() {
                e.kind = kind.clone();
            }
            if status.is_some() {
                e.status = status.clone();
            }
            if let Some(v) = nonempty(self.fact.payload_str("versionId")) {
                e.version_id = Some(v);
            }
            if let Some(p) = nonempty(self.fact.payload_str_any(&["path", "relativePath"])) {
                e.path = Some(p);
            }
            for r in &refs {
                push_unique(&mut e.refs, r);
            }
            e.updated_cursor = cursor;
            if let Some(m) = &msg {
                e.message_id = Some(m.clone());
                let card = artifact_card(e);
                self.put_data_part(m, "artifact-card", &aid, card);
            }
            self.touch("artifacts", aid);
        }
    }

    /// `diagnostic.changed` (and its alias `runtime.warning`) | `runtime.error | model.failed`.
    pub fn on_diagnostic_fact(&mut self) {
        let class = self.fact.class.clone();
        // A runtime warning is a diagnostic that, like an error, is also
        // referenced from the message it happened in.
        let warning = self.fact.source_class == "runtime.warning";
        let (code, severity) = if warning {
            (
                self.first_str(&["code"])
                    .unwrap_or_else(|| "runtime.warning".into()),
                match self.first_str(&["severity", "level"]).as_deref() {
                    Some("info") | Some("debug") => Severity::Info,
                    _ => Severity::Warning,
                },
            )
        } else if class == "diagnostic.changed" {
            let sev = match self.first_str(&["severity", "level"]).as_deref() {
                Some("info") | Some("debug") => Severity::Info,
                Some("error") | Some("fatal") => Severity::Error,
                _ => Severity::Warning,
            };
            (
                self.first_str(&["code"])
                    .unwrap_or_else(|| "diagnostic".into()),
                sev,
            )
        } else {
            (class.clone(), Severity::Error)
        };
        let text = self
            .first_str(&["message", "error", "errorText", "failureCategory"])
            .or_else(|| self.title())
            .unwrap_or_else(|| class.clone());
        let did = self.diag(&code, severity, truncate(&text, 500));
        if warning || class != "diagnostic.changed" {
            if let Some(msg) = self.open_assistant() {
                let sev = serde_json::to_value(severity).unwrap_or(Value::Null);
                let data = json!({"diagnosticId": did, "code": code, "severity": sev});
                self.put_data_part(&msg, "diagnostic-ref", &did, data);
            }
        }
        let fatal = self.first_value(&["fatal"]).and_then(|v| v.as_bool()) == Some(true);
        if class != "diagnostic.changed" && fatal {
            self.on_run_end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::reducer::merge;

    #[test]
    fn the_artifact_card_has_the_bytes_of_the_merged_card() {
        for mask in 0..16u32 {
            let text = |b: u32, v: &str| (mask & (1 << b) != 0).then(|| v.to_string());
            let e = ArtifactEntry {
                artifact_id: "f1".into(),
                title: text(0, "a \"b\" é.md"),
                kind: text(1, "doc"),
                status: Some("changed".into()),
                version_id: text(2, "v1"),
                path: None,
                refs: if mask & 8 != 0 {
                    vec!["r1".into(), "r2".into()]
                } else {
                    vec![]
                },
                message_id: None,
                updated_cursor: 1,
            };
            // What the reducer built before: a `Value` merged into another.
            let mut want = json!({"artifactId": e.artifact_id});
            merge(
                &mut want,
                json!({"title": e.title, "kind": e.kind, "versionId": e.version_id, "refs": e.refs}),
            );
            assert_eq!(
                serde_json::to_string(&artifact_card(&e)).unwrap(),
                serde_json::to_string(&want).unwrap()
            );
        }
    }
}
