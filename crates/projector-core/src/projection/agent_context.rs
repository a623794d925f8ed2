//! The context surface (`context.*`): the refs an agent works from, its
//! budget, missing context and compaction boundaries.

use serde_json::{json, Value};

use super::public_state::Severity;
use super::reducer::{merge, push_unique, truncate, Reducer};

impl Reducer<'_> {
    /// String ids in a payload list (strings, or objects with `id`/`ref`).
    fn id_list(&self, keys: &[&str]) -> Vec<String> {
        let mut v = Vec::new();
        for k in keys {
            if let Some(Value::Array(a)) = self.fact.payload_get(k) {
                for x in a {
                    let id = x.as_str().or_else(|| {
                        ["id", "ref", "refId", "path", "name"]
                            .iter()
                            .find_map(|f| x.get(*f).and_then(Value::as_str))
                    });
                    if let Some(id) = id.filter(|s| !s.trim().is_empty()) {
                        push_unique(&mut v, id);
                    }
                }
            }
        }
        v
    }

    /// `context.*`: refs, budget, missing context, compaction boundaries.
    pub fn on_context(&mut self) {
        let cursor = self.cursor;
        let mut refs = self.refs();
        for r in self.id_list(&["refs", "contextRefs", "sources"]) {
            push_unique(&mut refs, &r);
        }
        let budget = self.first_value(&["budget", "contextBudget"]).or_else(|| {
            let used = self.first_value(&["usedTokens", "tokensUsed"]);
            let max = self.first_value(&["maxTokens", "tokenLimit", "windowTokens"]);
            (used.is_some() || max.is_some()).then(|| json!({"usedTokens": used, "maxTokens": max}))
        });
        let missing = self.id_list(&["missing", "missingContext", "missingRefs"]);
        let class = self.fact.class.clone();
        let summary = self.first_str(&["summary"]).map(|s| truncate(&s, 500));
        let resume = self.first_str(&["resumeRef", "checkpointRef", "summaryRef"]);
        let cid = self.first_str(&["compactionId"]);
        let event_id = self.fact.id.clone();
        let c = &mut self.state.context;
        for r in &refs {
            push_unique(&mut c.refs, r);
        }
        for m in &missing {
            push_unique(&mut c.missing, m);
        }
        // Context named as resolved is no longer missing.
        if class == "context.resolved" {
            c.missing
                .retain(|m| !refs.contains(m) || missing.contains(m));
        }
        if budget.is_some() {
            c.budget = budget;
        }
        match class.as_str() {
            "context.compaction.started" => {
                let id = cid.unwrap_or_else(|| format!("compaction-{cursor}"));
                let mut b = json!({"compactionId": id, "status": "running", "startedCursor": cursor, "eventId": event_id});
                merge(&mut b, json!({"summary": summary}));
                c.compactions.push(b);
                c.status = Some("compacting".into());
            }
            "context.compaction.completed" => {
                // Closes the named boundary, else the latest open one; a
                // completion without a start is its own closed boundary.
                let open = c.compactions.iter().rposition(|b| match &cid {
                    Some(id) => b["compactionId"] == json!(id),
                    None => b["status"] == "running",
                });
                let patch = json!({"status": "completed", "completedCursor": cursor, "summary": summary, "resumeRef": resume,
                    "tokensBefore": self.fact.payload_get("tokensBefore"), "tokensAfter": self.fact.payload_get("tokensAfter")});
                match open {
                    Some(i) => merge(&mut c.compactions[i], patch),
                    None => {
                        let id = cid.unwrap_or_else(|| format!("compaction-{cursor}"));
                        let mut b = json!({"compactionId": id, "eventId": event_id});
                        merge(&mut b, patch);
                        c.compactions.push(b);
                    }
                }
                c.status = Some(
                    if c.missing.is_empty() {
                        "resolved"
                    } else {
                        "missing"
                    }
                    .into(),
                );
            }
            _ => {
                let next = if !c.missing.is_empty() {
                    "missing".to_string()
                } else if class == "context.resolved" {
                    "resolved".to_string()
                } else {
                    match c.status.as_deref() {
                        Some("compacting") => "compacting".to_string(),
                        Some(s) => s.to_string(),
                        None => "unknown".to_string(),
                    }
                };
                c.status = Some(next);
            }
        }
        c.updated_cursor = Some(cursor);
        if !missing.is_empty() {
            self.diag(
                "missing_context",
                Severity::Info,
                format!(
                    "context unavailable: {}",
                    truncate(&missing.join(", "), 300)
                ),
            );
        }
        self.touch("context", "context");
    }
}
