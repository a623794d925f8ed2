//! Session surfaces other than tools and coding: actions (pending until
//! `action.resolved` only), artifacts, evidence and diagnostics facts
//! (queue, context, permissions and plans are in `process.rs`). Each entry change is touched so that it travels as
//! a `data-<surface>` chunk; message cards are added only inside an
//! assistant message context.

use serde_json::{json, Value};

use super::ctx::{merge, nonempty, push_unique, truncate, Ctx};
use super::state::{ActionEntry, ArtifactEntry, EvidenceEntry, Severity};

impl<'a> Ctx<'a> {
    fn action_card(e: &ActionEntry) -> Value {
        let mut v = json!({"actionId": e.action_id, "status": e.status});
        merge(
            &mut v,
            json!({
                "actionType": e.action_type,
                "title": e.title,
                "toolCallId": e.tool_call_id,
                "requestedBy": e.requested_by,
                "decision": e.decision,
            }),
        );
        v
    }

    /// `action.required | action.resolved`.
    pub fn on_action(&mut self) {
        let Some(aid) = nonempty(self.f.ids.action_id.as_deref()) else {
            self.diag(
                "missing_scope_id",
                Severity::Warning,
                format!("{} without actionId; not projected", self.f.class),
            );
            return;
        };
        let cursor = self.cursor;
        if self.f.class == "action.required" {
            let e = ActionEntry {
                action_id: aid.clone(),
                status: "pending".into(),
                action_type: self.pstr(&["actionType", "actionKind", "type"]),
                title: self.title(),
                decision: None,
                tool_call_id: self.tool_call_id(),
                requested_by: self.requesting_agent(),
                message_id: None,
                requested_cursor: Some(cursor),
                resolved_cursor: None,
            };
            let prev_msg = self.st.actions.get(&aid).and_then(|a| a.message_id.clone());
            self.st.actions.insert(aid.clone(), e);
            let msg = match prev_msg.filter(|m| self.msg(m).is_some()) {
                Some(m) => Some(m),
                None if self.has_message_context() => Some(self.ensure_assistant()),
                None => None,
            };
            if let Some(msg) = msg {
                let card = Self::action_card(&self.st.actions[&aid]);
                self.put_data_part(&msg, "action-request", &aid, card);
                self.st.actions[&aid].message_id = Some(msg);
            }
            self.on_wait();
        } else {
            let decision = self.pstr(&["decision"]);
            match self.st.actions.get_mut(&aid) {
                Some(e) if e.status == "resolved" => {
                    self.finding(
                        "repeated_terminal_event",
                        format!("action {aid} resolved again; ignored (the first decision stands)"),
                    );
                }
                Some(e) => {
                    e.status = "resolved".into();
                    e.decision = decision;
                    e.resolved_cursor = Some(cursor);
                    let card = Self::action_card(e);
                    let msg = e.message_id.clone();
                    if let Some(msg) = msg.filter(|m| self.msg(m).is_some()) {
                        self.put_data_part(&msg, "action-request", &aid, card);
                    }
                }
                None => {
                    self.finding(
                        "action_resolved_without_request",
                        format!("action {aid} resolved without action.required"),
                    );
                    let e = ActionEntry {
                        action_id: aid.clone(),
                        status: "resolved".into(),
                        action_type: self.pstr(&["actionType", "actionKind", "type"]),
                        title: self.title(),
                        decision,
                        tool_call_id: self.tool_call_id(),
                        requested_by: self.agent(),
                        message_id: None,
                        requested_cursor: None,
                        resolved_cursor: Some(cursor),
                    };
                    self.st.actions.insert(aid.clone(), e);
                }
            }
            self.resume_if_unblocked();
        }
        self.touch("actions", aid);
    }

    /// Refs named by the payload (never bodies).
    fn payload_refs(&self) -> Vec<String> {
        let mut v = self.refs();
        for k in ["diffRef", "contentRef", "checkpointRef", "previewRef"] {
            if let Some(r) = self.pstr(&[k]) {
                push_unique(&mut v, &r);
            }
        }
        v
    }

    /// Artifact ids of the fact: `ids.artifactId` and each of `artifactRefs`.
    fn artifact_ids(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(a) = nonempty(self.f.ids.artifact_id.as_deref()) {
            v.push(a);
        }
        for a in &self.f.artifact_refs {
            push_unique(&mut v, a);
        }
        v
    }

    /// The assistant message a card goes into, if the fact has a context.
    fn card_message(&mut self) -> Option<String> {
        if self.has_message_context() {
            Some(self.ensure_assistant())
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
        let kind = self.pstr(&["artifactKind", "kind", "type"]);
        let status = match self.f.class.as_str() {
            "artifact.deleted" => Some("deleted".to_string()),
            "artifact.failed" => Some("failed".to_string()),
            _ => self.pstr(&["status"]).or_else(|| self.f.status.clone()),
        };
        let msg = if self.f.family() == "artifact" {
            self.card_message()
        } else {
            None
        };
        // The entity's own name (payload) before the event's title.
        let title = self
            .pstr(&["title", "name"])
            .or_else(|| nonempty(self.f.title.as_deref()))
            .map(|t| truncate(&t, 200));
        for aid in ids {
            let cursor = self.cursor;
            let e = self
                .st
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
            if let Some(v) = nonempty(self.f.payload_str("versionId")) {
                e.version_id = Some(v);
            }
            if let Some(p) = nonempty(self.f.payload_str_any(&["path", "relativePath"])) {
                e.path = Some(p);
            }
            for r in &refs {
                push_unique(&mut e.refs, r);
            }
            e.updated_cursor = cursor;
            if let Some(m) = &msg {
                e.message_id = Some(m.clone());
                let mut card = json!({"artifactId": aid});
                merge(
                    &mut card,
                    json!({"title": e.title, "kind": e.kind, "versionId": e.version_id, "refs": e.refs}),
                );
                self.put_data_part(m, "artifact-card", &aid, card);
            }
            self.touch("artifacts", aid);
        }
    }

    /// `evidence.changed | review.completed`: verdicts only from `payload.verdict`.
    pub fn on_evidence_facts(&mut self) {
        let mut ids = Vec::new();
        if let Some(e) = nonempty(self.f.ids.evidence_id.as_deref()) {
            ids.push(e);
        }
        for e in &self.f.evidence_refs {
            push_unique(&mut ids, e);
        }
        if ids.is_empty() {
            return;
        }
        let refs = self.payload_refs();
        let verdict = self.pstr(&["verdict"]);
        let msg = self.card_message();
        // The entity's own name (payload) before the event's title.
        let title = self
            .pstr(&["title", "name"])
            .or_else(|| nonempty(self.f.title.as_deref()))
            .map(|t| truncate(&t, 200));
        for eid in ids {
            let cursor = self.cursor;
            let e = self
                .st
                .evidence
                .entry(eid.clone())
                .or_insert_with(|| EvidenceEntry {
                    evidence_id: eid.clone(),
                    title: None,
                    verdict: None,
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
            for r in &refs {
                push_unique(&mut e.refs, r);
            }
            e.updated_cursor = cursor;
            if let Some(m) = &msg {
                e.message_id = Some(m.clone());
                let mut card = json!({"evidenceId": eid});
                merge(
                    &mut card,
                    json!({"title": e.title, "verdict": e.verdict, "refs": e.refs}),
                );
                self.put_data_part(m, "evidence-citation", &eid, card);
            }
            self.touch("evidence", eid);
        }
    }

    /// `diagnostic.changed | runtime.error | model.failed`.
    pub fn on_diagnostic_fact(&mut self) {
        let class = self.f.class.clone();
        let (code, severity) = if class == "diagnostic.changed" {
            let sev = match self.pstr(&["severity", "level"]).as_deref() {
                Some("info") | Some("debug") => Severity::Info,
                Some("error") | Some("fatal") => Severity::Error,
                _ => Severity::Warning,
            };
            (
                self.pstr(&["code"]).unwrap_or_else(|| "diagnostic".into()),
                sev,
            )
        } else {
            (class.clone(), Severity::Error)
        };
        let text = self
            .pstr(&["message", "error", "errorText", "failureCategory"])
            .or_else(|| self.title())
            .unwrap_or_else(|| class.clone());
        let did = self.diag(&code, severity, truncate(&text, 500));
        if class != "diagnostic.changed" {
            if let Some(msg) = self.open_assistant() {
                let sev = serde_json::to_value(severity).unwrap_or(Value::Null);
                let data = json!({"diagnosticId": did, "code": code, "severity": sev});
                self.put_data_part(&msg, "diagnostic-ref", &did, data);
            }
            if self.pval(&["fatal"]).and_then(|v| v.as_bool()) == Some(true) {
                self.on_run_end();
            }
        }
    }
}
