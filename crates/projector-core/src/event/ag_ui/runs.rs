//! AG-UI runs: `RUN_STARTED` (and the input's user messages), `RUN_FINISHED`
//! (an interrupt's pending actions), `RAW` and the events kept as they are.

use serde_json::{json, Map, Value};

use super::{is_ag_ui, one, AgUi, Mapped};

impl AgUi {
    pub(super) fn run_started(&mut self, ev: &Value) -> Mapped {
        let s = |k: &str| ev.get(k).and_then(Value::as_str).map(str::to_string);
        self.run_id = s("runId").filter(|r| !r.is_empty());
        self.thread_id = s("threadId").filter(|t| !t.is_empty());
        self.started = true;
        self.ended = false;
        let mut es = Vec::new();
        // The input's new user messages are the turn this run answers.
        if let Some(ms) = ev.pointer("/input/messages").and_then(Value::as_array) {
            for m in ms
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            {
                if let Some(e) = self.user_message(m) {
                    es.push(e);
                }
            }
        }
        es.push(self.event(
            "run.started",
            "",
            json!({"payload": {"parentRunId": s("parentRunId"),
                               "protocolVersion": s("protocolVersion")}}),
        ));
        Mapped::Events(es)
    }

    pub(super) fn run_finished(&mut self, ev: &Value) -> Mapped {
        self.ended = true;
        let outcome = ev.get("outcome");
        let kind = outcome
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("success");
        let mut es = Vec::new();
        if kind == "cancelled" {
            es.push(self.event("run.canceled", "", json!({"payload": {"usage": usage(ev)}})));
            return Mapped::Events(es);
        }
        // An interrupt asks the user: each interrupt is a pending action.
        let interrupts: Vec<Value> = outcome
            .and_then(|o| o.get("interrupts"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (n, i) in interrupts.iter().enumerate() {
            let Some(id) = i
                .get("id")
                .and_then(Value::as_str)
                .filter(|x| !x.is_empty())
            else {
                continue;
            };
            let str_of = |k: &str| i.get(k).cloned().unwrap_or(Value::Null);
            let action_type = if i.get("toolCallId").is_some() {
                "tool_approval"
            } else if i.get("responseSchema").is_some() {
                "structured_input"
            } else {
                "clarification"
            };
            es.push(self.event(
                "action.required",
                &format!("i{n}"),
                json!({"actionId": id, "toolCallId": str_of("toolCallId"),
                       "agentId": str_of("subagentRunId"),
                       "payload": {"actionType": action_type, "reason": str_of("reason"),
                                   "question": str_of("message"),
                                   "inputSchema": str_of("responseSchema"),
                                   "expiresAt": str_of("expiresAt"),
                                   "metadata": str_of("metadata")}}),
            ));
        }
        es.push(self.event(
            "run.finished",
            "",
            json!({"payload": {"result": ev.get("result").cloned().unwrap_or(Value::Null),
                               "usage": usage(ev),
                               "pendingToolCallIds": outcome.and_then(|o| o.get("pendingToolCallIds")).cloned()}}),
        ));
        if !interrupts.is_empty() {
            // The run ended waiting for the user: the session says so.
            es.push(self.event("run.status", "w", json!({"payload": {"status": "waiting"}})));
        }
        Mapped::Events(es)
    }

    /// `RAW`: an event of another protocol. One of ours (a Lime or Agent UI
    /// envelope, `source` `agent-projector`, `lime` or `agent-ui`) is
    /// applied as it is; anything else is kept.
    pub(super) fn raw(&self, ev: &Value) -> Mapped {
        // Only a source that says so sends our envelopes: another
        // protocol's event with a `type` must not be read as one of ours.
        let ours = matches!(
            ev.get("source").and_then(Value::as_str),
            Some("agent-projector" | "lime" | "agent-ui")
        );
        match ev.get("event") {
            Some(inner @ Value::Object(o))
                if ours
                    && o.get("type")
                        .or_else(|| o.get("eventClass"))
                        .is_some_and(Value::is_string)
                    && !is_ag_ui(inner) =>
            {
                let mut e = inner.clone();
                if e.get("id").is_none() {
                    e["id"] = format!("{}:{}", self.prefix(), self.index).into();
                }
                one(e)
            }
            _ => self.kept("RAW", ev),
        }
    }

    /// An event kept as it is under `ag-ui.<type>` (a class the projection
    /// does not know: the timeline and a diagnostic show it, the reply
    /// warns), its fields in the payload.
    pub(super) fn kept(&self, ty: &str, ev: &Value) -> Mapped {
        let mut payload = Map::new();
        if let Value::Object(o) = ev {
            for (k, v) in o {
                if k != "type" {
                    payload.insert(k.clone(), v.clone());
                }
            }
        }
        let class = format!("ag-ui.{}", ty.to_ascii_lowercase().replace('_', "-"));
        one(self.event(&class, "", json!({"payload": payload})))
    }
}

/// The token usage of a run's end, as one object (AG-UI sends a list).
pub(super) fn usage(ev: &Value) -> Value {
    match ev.get("usage") {
        Some(Value::Array(a)) if a.len() == 1 => a[0].clone(),
        Some(u) => u.clone(),
        None => Value::Null,
    }
}

/// An AG-UI timestamp (milliseconds since the epoch) as RFC 3339.
pub(super) fn time_of(ms: i64) -> Option<String> {
    let ms = u64::try_from(ms).ok()?;
    let t = std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms))?;
    Some(humantime::format_rfc3339_millis(t).to_string())
}
