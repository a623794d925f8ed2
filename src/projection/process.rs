//! The process surfaces around a run: the queue (queued turns and steer
//! input, kept apart), context (refs, budget, missing context, compaction
//! boundaries), permissions and sandbox (session-wide and per teammate, and
//! who asks for an approval), plans (`plan.delta` streams, `plan.final`
//! reconciles) and the session's team topology from the envelope.

use serde_json::{json, Value};

use super::ctx::{merge, nonempty, push_unique, truncate, Ctx};
use super::state::{PlanEntry, Severity};

/// Plan text kept per plan (a plan is a summary, not a document).
pub const MAX_PLAN_CHARS: usize = 16_000;

/// Queue item kinds: a queued turn waits for its own turn; a steer enters
/// the running turn. They never merge.
fn item_kind(item: &Value, list_key: &str, control: Option<&str>) -> &'static str {
    let word = ["kind", "intent", "mode", "type"]
        .iter()
        .find_map(|k| item.get(*k).and_then(Value::as_str));
    match word.or(control) {
        Some("steer") => "steer",
        Some("queue") | Some("queued") => "queue",
        _ => match list_key {
            "steer" | "steers" | "steering" => "steer",
            "items" => "unknown",
            _ => "queue",
        },
    }
}

impl<'a> Ctx<'a> {
    /// The envelope's `topology`, kept as the session's.
    pub fn adopt_topology(&mut self) {
        if let Some(t) = nonempty(self.f.taxonomy.topology.as_deref()) {
            if self.st.topology.as_deref() != Some(t.as_str()) {
                self.st.topology = Some(t);
                self.touch("topology", "topology");
            }
        }
    }

    /// Who asks for an approval: the payload's requesting teammate, else the
    /// fact's agent (a delegated approval names its teammate).
    pub fn requesting_agent(&self) -> Option<String> {
        self.pstr(&["requestedBy", "requestingAgentId"])
            .or_else(|| self.agent())
    }

    /// `queue.changed`: the payload is the whole queue state. Queued turns
    /// and steer input are listed as items with their `kind`, counted apart.
    pub fn on_queue(&mut self) {
        let control = nonempty(self.f.taxonomy.control.as_deref())
            .or_else(|| self.pstr(&["control", "intent"]));
        let mut q = Value::Object(self.f.payload.clone());
        let mut items = Vec::new();
        for key in [
            "queuedTurns",
            "queue",
            "queued",
            "items",
            "steer",
            "steers",
            "steering",
        ] {
            let list = match self.f.payload.get(key) {
                Some(Value::Array(a)) => a.clone(),
                Some(v @ Value::Object(_)) => vec![v.clone()],
                Some(Value::String(s)) if !s.trim().is_empty() => vec![json!({"text": s})],
                _ => continue,
            };
            for (i, it) in list.iter().enumerate() {
                let it = if it.is_string() {
                    json!({ "text": it })
                } else {
                    it.clone()
                };
                let kind = item_kind(&it, key, control.as_deref());
                let s = |k: &str| it.get(k).and_then(Value::as_str).map(str::to_string);
                let id = s("id")
                    .or_else(|| s("queueId"))
                    .or_else(|| s("turnId"))
                    .unwrap_or_else(|| format!("{key}-{i}"));
                let mut item = json!({"id": id, "kind": kind});
                merge(
                    &mut item,
                    json!({
                        "status": s("status"),
                        "turnId": s("turnId"),
                        "text": s("text").or_else(|| s("preview")).map(|t| truncate(&t, 300)),
                    }),
                );
                items.push(item);
            }
        }
        let live = |i: &&Value| {
            !matches!(
                i.get("status").and_then(Value::as_str),
                Some("removed" | "started" | "promoted" | "done")
            )
        };
        let count = |k: &str| items.iter().filter(live).filter(|i| i["kind"] == k).count();
        q["queuedCount"] = json!(count("queue"));
        q["steerCount"] = json!(count("steer"));
        q["items"] = json!(items);
        if let Some(c) = control {
            q["control"] = json!(c);
        }
        q["updatedCursor"] = json!(self.cursor);
        self.st.queue = q;
        self.touch("queue", "queue");
    }

    /// String ids in a payload list (strings, or objects with `id`/`ref`).
    fn id_list(&self, keys: &[&str]) -> Vec<String> {
        let mut v = Vec::new();
        for k in keys {
            if let Some(Value::Array(a)) = self.f.payload.get(*k) {
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
        let budget = self.pval(&["budget", "contextBudget"]).or_else(|| {
            let used = self.pval(&["usedTokens", "tokensUsed"]);
            let max = self.pval(&["maxTokens", "tokenLimit", "windowTokens"]);
            (used.is_some() || max.is_some()).then(|| json!({"usedTokens": used, "maxTokens": max}))
        });
        let missing = self.id_list(&["missing", "missingContext", "missingRefs"]);
        let class = self.f.class.clone();
        let summary = self.pstr(&["summary"]).map(|s| truncate(&s, 500));
        let resume = self.pstr(&["resumeRef", "checkpointRef", "summaryRef"]);
        let cid = self.pstr(&["compactionId"]);
        let event_id = self.f.id.clone();
        let c = &mut self.st.context;
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
                    "tokensBefore": self.f.payload.get("tokensBefore"), "tokensAfter": self.f.payload.get("tokensAfter")});
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

    /// `permission.* | sandbox.applied | sandbox.violation`. A fact that
    /// names a teammate sets that teammate's permissions, not the session's.
    pub fn on_permission(&mut self) {
        let cursor = self.cursor;
        let class = self.f.class.clone();
        let mode = self.pstr(&["mode", "permissionMode"]);
        let risk = self.pstr(&["risk", "riskLevel"]);
        let sandbox = self
            .pstr(&["sandbox", "sandboxMode"])
            .or_else(|| (class == "sandbox.applied").then(|| mode.clone()).flatten());
        let mode = if class.starts_with("sandbox.") {
            None
        } else {
            mode
        };
        let decision = self.pstr(&["decision"]);
        let scope = self.pstr(&["policyScope", "scope"]);
        if let Some(agent) = self.agent() {
            let e = self
                .st
                .permissions
                .agents
                .entry(agent.clone())
                .or_insert_with(|| json!({"agentId": agent}));
            merge(
                e,
                json!({"mode": mode, "risk": risk, "sandbox": sandbox, "policyScope": scope,
                       "lastDecision": decision, "updatedCursor": cursor}),
            );
        } else {
            let p = &mut self.st.permissions;
            if mode.is_some() {
                p.mode = mode;
            }
            if risk.is_some() {
                p.risk = risk;
            }
            if sandbox.is_some() {
                p.sandbox = sandbox;
            }
            if let Some(d) = decision {
                p.last_decision = Some(json!({"decision": d, "class": class, "cursor": cursor}));
            }
        }
        self.st.permissions.updated_cursor = Some(cursor);
        if class == "sandbox.violation" {
            let reason = self
                .pstr(&["reasonCode", "reason"])
                .unwrap_or_else(|| "sandbox".into());
            self.diag(
                "sandbox.violation",
                Severity::Warning,
                format!("sandbox violation: {reason}"),
            );
        }
        self.touch("permissions", "permissions");
    }

    /// `plan.delta | plan.final`: the `plans` surface and a `data-plan` part
    /// (replaced in place) in the assistant message. The final text wins
    /// over the streamed one; it is never appended to it.
    pub fn on_plan(&mut self) {
        let pid = self
            .pstr(&["planId"])
            .or_else(|| self.turn().map(|t| format!("plan-{t}")))
            .unwrap_or_else(|| "plan".into());
        let is_final = self.f.class == "plan.final";
        let text = if is_final {
            self.ptext(&["text", "plan", "content"])
        } else {
            self.ptext(&["delta", "text", "content"])
        };
        let steps = self.pval(&["steps", "items"]);
        let (cursor, agent) = (self.cursor, self.agent());
        let e = self
            .st
            .plans
            .entry(pid.clone())
            .or_insert_with(|| PlanEntry {
                plan_id: pid.clone(),
                status: "streaming".into(),
                text: String::new(),
                steps: None,
                agent_id: None,
                message_id: None,
                updated_cursor: cursor,
            });
        let streamed = e.text.clone();
        match (is_final, text) {
            (true, Some(t)) => e.text = truncate(&t, MAX_PLAN_CHARS),
            (false, Some(d)) if e.status != "final" => {
                e.text = truncate(&format!("{}{d}", e.text), MAX_PLAN_CHARS)
            }
            _ => {}
        }
        if is_final {
            e.status = "final".into();
        }
        if steps.is_some() {
            e.steps = steps;
        }
        if agent.is_some() {
            e.agent_id = agent;
        }
        e.updated_cursor = cursor;
        let differs = is_final && !streamed.is_empty() && streamed != e.text;
        let late_delta = !is_final && e.status == "final";
        if differs {
            self.diag(
                "final_text_differs",
                Severity::Info,
                format!("plan.final of {pid} differs from the streamed plan; the final wins"),
            );
        }
        if late_delta {
            self.diag(
                "plan_delta_after_final",
                Severity::Warning,
                format!("plan.delta for {pid} after its plan.final; ignored"),
            );
        }
        if self.has_message_context() {
            let msg = self.ensure_assistant();
            let e = &self.st.plans[&pid];
            let mut data = json!({"planId": pid, "status": e.status, "text": e.text});
            merge(&mut data, json!({"steps": e.steps}));
            self.put_data_part(&msg, "plan", &pid, data);
            self.st.plans[&pid].message_id = Some(msg);
        }
        self.touch("plans", pid);
    }
}
