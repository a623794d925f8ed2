//! Tasks, agents and the team workbench: `task.*`, `agent.*` (subagent
//! aliases), `worker.*`, `handoff.*`, `review.*`, `channel.*`,
//! `team.changed`. Teammates keep their identity and lineage; missing lineage
//! is `unavailable` with a diagnostic, never guessed. Worker notifications
//! are never user messages.

use serde_json::{json, Value};

use super::ctx::{merge, nonempty, push_unique, truncate, Ctx};
use super::state::{AgentEntry, Edge, Severity, TaskEntry};

/// Upsert an object keyed by `key == id` in a bounded list; returns it.
fn upsert<'v>(list: &'v mut Vec<Value>, key: &str, id: &str) -> &'v mut Value {
    let pos = list
        .iter()
        .position(|v| v.get(key).and_then(Value::as_str) == Some(id));
    let i = match pos {
        Some(i) => i,
        None => {
            let mut v = json!({});
            v[key] = json!(id);
            list.push(v);
            list.len() - 1
        }
    };
    &mut list[i]
}

impl<'a> Ctx<'a> {
    /// Status of a lifecycle fact: payload word, class suffix, fact status.
    fn lifecycle_status(&self, running_on_start: bool) -> String {
        if let Some(s) = self.pstr(&["status", "runtimeStatus"]) {
            return s;
        }
        let suffix = self.f.class.rsplit('.').next().unwrap_or("");
        match suffix {
            "completed" => "completed".into(),
            "failed" => "failed".into(),
            "started" | "spawned" if running_on_start => "running".into(),
            _ => self.f.status.clone().unwrap_or_else(|| "unknown".into()),
        }
    }

    /// `task.*`.
    pub fn on_task(&mut self) {
        let Some(tid) = nonempty(self.f.ids.task_id.as_deref()).or_else(|| self.pstr(&["taskId"]))
        else {
            self.diag(
                "missing_scope_id",
                Severity::Warning,
                format!("{} without taskId", self.f.class),
            );
            return;
        };
        let status = self.lifecycle_status(true);
        let parent =
            nonempty(self.f.ids.parent_task_id.as_deref()).or_else(|| self.pstr(&["parentTaskId"]));
        let (cursor, title, agent) = (self.cursor, self.title(), self.agent());
        let e = self
            .st
            .tasks
            .entry(tid.clone())
            .or_insert_with(|| TaskEntry {
                task_id: tid.clone(),
                parent_task_id: None,
                status: String::new(),
                title: None,
                agent_id: None,
                updated_cursor: cursor,
            });
        e.status = status;
        if parent.is_some() {
            e.parent_task_id = parent;
        }
        if title.is_some() {
            e.title = title;
        }
        if agent.is_some() {
            e.agent_id = agent;
        }
        e.updated_cursor = cursor;
        self.touch("tasks", tid);
    }

    /// `agent.* | worker.started | worker.completed`.
    pub fn on_agent(&mut self) {
        let ids = &self.f.ids;
        let Some(aid) = nonempty(ids.agent_id.as_deref())
            .or_else(|| nonempty(ids.subagent_id.as_deref()))
            .or_else(|| nonempty(ids.worker_id.as_deref()))
            .or_else(|| self.pstr(&["agentId", "subagentId", "workerId"]))
        else {
            self.diag(
                "missing_scope_id",
                Severity::Warning,
                format!("{} without an agent id", self.f.class),
            );
            return;
        };
        let parent_session =
            nonempty(ids.parent_session_id.as_deref()).or_else(|| self.pstr(&["parentSessionId"]));
        let parent_thread =
            nonempty(ids.parent_thread_id.as_deref()).or_else(|| self.pstr(&["parentThreadId"]));
        let task =
            nonempty(ids.task_id.as_deref()).or_else(|| self.pstr(&["parentTaskId", "taskId"]));
        let status = if self.f.class == "agent.handoff" {
            None
        } else {
            Some(self.lifecycle_status(true))
        };
        let name = self.pstr(&["agentName", "name"]);
        let role = self.pstr(&["role"]);
        let model = self.pstr(&["model"]).or_else(|| self.f.model.clone());
        let cursor = self.cursor;
        let is_new = !self.st.agents.contains_key(&aid);
        let e = self
            .st
            .agents
            .entry(aid.clone())
            .or_insert_with(|| AgentEntry {
                agent_id: aid.clone(),
                name: None,
                role: None,
                status: "unknown".into(),
                parent_session_id: None,
                parent_thread_id: None,
                task_id: None,
                model: None,
                lineage: "unavailable".into(),
                updated_cursor: cursor,
            });
        if let Some(s) = status {
            e.status = s;
        }
        for (slot, v) in [
            (&mut e.name, name),
            (&mut e.role, role),
            (&mut e.model, model),
            (&mut e.parent_session_id, parent_session),
            (&mut e.parent_thread_id, parent_thread),
            (&mut e.task_id, task),
        ] {
            if v.is_some() {
                *slot = v;
            }
        }
        let known =
            e.parent_session_id.is_some() || e.parent_thread_id.is_some() || e.task_id.is_some();
        let was = e.lineage.clone();
        e.lineage = if known { "known" } else { "unavailable" }.into();
        e.updated_cursor = cursor;
        let from = e
            .parent_thread_id
            .clone()
            .or_else(|| e.parent_session_id.clone())
            .or_else(|| e.task_id.as_ref().map(|t| format!("task:{t}")));
        if !known && (is_new || was == "known") {
            self.diag(
                "missing_lineage",
                Severity::Warning,
                format!("agent {aid} has no parent session, thread or task; lineage unavailable"),
            );
        }
        if !self.st.team.roster.contains(&aid) {
            self.st.team.roster.push(aid.clone());
            self.touch("team", "roster");
        }
        if let Some(from) = from {
            let edge = Edge {
                from,
                to: aid.clone(),
                kind: "delegation".into(),
            };
            if !self.st.team.edges.contains(&edge) {
                self.st.team.edges.push(edge);
                self.touch("team", "edges");
            }
        }
        if self.f.class == "agent.handoff" {
            self.on_handoff();
        }
        self.touch("agents", aid);
    }

    /// `handoff.* | agent.handoff`.
    pub fn on_handoff(&mut self) {
        let hid = nonempty(self.f.ids.handoff_id.as_deref())
            .or_else(|| self.pstr(&["handoffId"]))
            .unwrap_or_else(|| self.f.id.clone());
        let status = self.pstr(&["status"]).unwrap_or_else(|| {
            match self.f.class.as_str() {
                "handoff.requested" => "requested",
                "handoff.completed" => "completed",
                _ => "active",
            }
            .into()
        });
        let from = self.pstr(&["from", "fromAgentId"]);
        let to = self.pstr(&["to", "toAgentId"]);
        let patch = json!({
            "status": status,
            "from": from,
            "to": to,
            "reason": self.pstr(&["reason"]).map(|r| truncate(&r, 500)),
            "resumeTarget": self.pstr(&["resumeTarget"]),
            "taskId": self.f.ids.task_id,
            "agentId": self.agent(),
            "title": self.title(),
            "updatedCursor": self.cursor,
        });
        merge(upsert(&mut self.st.team.handoffs, "handoffId", &hid), patch);
        if let (Some(from), Some(to)) = (from, to) {
            let edge = Edge {
                from,
                to,
                kind: "handoff".into(),
            };
            if !self.st.team.edges.contains(&edge) {
                self.st.team.edges.push(edge);
                self.touch("team", "edges");
            }
        }
        self.touch("team", format!("handoff:{hid}"));
    }

    /// `review.*`: the review lane; a verdict only from `payload.verdict`.
    pub fn on_review(&mut self) {
        let rid = nonempty(self.f.ids.review_id.as_deref())
            .or_else(|| self.pstr(&["reviewId"]))
            .or_else(|| nonempty(self.f.ids.evidence_id.as_deref()))
            .unwrap_or_else(|| self.f.id.clone());
        let status = if self.f.class == "review.requested" {
            "requested"
        } else {
            "completed"
        };
        let mut refs: Vec<String> = Vec::new();
        if let Some(e) = nonempty(self.f.ids.evidence_id.as_deref()) {
            refs.push(e);
        }
        for e in &self.f.evidence_refs {
            push_unique(&mut refs, e);
        }
        let patch = json!({
            "status": status,
            "verdict": self.pstr(&["verdict"]),
            "reviewer": self.pstr(&["reviewer", "reviewerId"]).or_else(|| self.agent()),
            "target": self.pstr(&["target", "targetId"]),
            "evidenceRefs": if refs.is_empty() { None } else { Some(refs) },
            "title": self.title(),
            "updatedCursor": self.cursor,
        });
        merge(upsert(&mut self.st.team.reviews, "reviewId", &rid), patch);
        self.touch("team", format!("review:{rid}"));
        if self.f.class == "review.completed" {
            self.on_evidence_facts();
        }
    }

    /// `worker.notification`: team notifications only, whatever its role.
    pub fn on_worker_notification(&mut self) {
        let nid = self.f.id.clone();
        let agent = self
            .agent()
            .or_else(|| nonempty(self.f.ids.worker_id.as_deref()));
        let patch = json!({
            "agentId": agent,
            "taskId": self.f.ids.task_id,
            "status": self.pstr(&["status"]).or_else(|| self.f.status.clone()),
            "summary": self.pstr(&["summary", "text", "content", "message"]).map(|s| truncate(&s, 500)),
            "sourceRole": self.pstr(&["role"]),
            "refs": self.refs(),
            "cursor": self.cursor,
        });
        merge(
            upsert(&mut self.st.team.notifications, "notificationId", &nid),
            patch,
        );
        self.touch("team", format!("notification:{nid}"));
    }

    /// `channel.*`.
    pub fn on_channel(&mut self) {
        let cid = nonempty(self.f.ids.channel_id.as_deref())
            .or_else(|| self.pstr(&["channelId"]))
            .unwrap_or_else(|| self.f.id.clone());
        let list = &self.st.team.channels;
        let prev = list
            .iter()
            .find(|v| v.get("channelId").and_then(Value::as_str) == Some(cid.as_str()))
            .and_then(|v| v.get("messageCount"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let status = match self.f.class.as_str() {
            "channel.closed" => Some("closed"),
            "channel.opened" => Some("open"),
            _ => None,
        };
        let is_msg = self.f.class == "channel.message";
        let patch = json!({
            "status": status,
            "channelType": self.pstr(&["channelType"]),
            "agentId": self.agent(),
            "targetThreadId": self.pstr(&["targetThreadId"]),
            "messageCount": if is_msg { Some(prev + 1) } else { None },
            "lastSummary": if is_msg { self.pstr(&["summary", "text"]).map(|s| truncate(&s, 500)) } else { None },
            "updatedCursor": self.cursor,
        });
        merge(upsert(&mut self.st.team.channels, "channelId", &cid), patch);
        self.touch("team", format!("channel:{cid}"));
    }

    /// `team.changed`: roster ids named by the payload.
    pub fn on_team_changed(&mut self) {
        if let Some(Value::Array(a)) = self.f.payload.get("roster") {
            let ids: Vec<String> = a
                .iter()
                .filter_map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .or_else(|| x.get("agentId").and_then(Value::as_str).map(str::to_string))
                })
                .collect();
            for id in ids {
                push_unique(&mut self.st.team.roster, &id);
            }
            self.touch("team", "roster");
        }
    }
}
