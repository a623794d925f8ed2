//! Tasks, agents and the team workbench: `task.*`, `agent.*` (subagent
//! aliases), `worker.*`, `handoff.*`, `review.*`, `channel.*`,
//! `team.changed`. Teammates keep their identity and lineage; missing lineage
//! is `unavailable` with a diagnostic, never guessed. Worker notifications
//! are never user messages.

use serde_json::{json, Value};

use super::public_state::{AgentEntry, Edge, Severity, TaskEntry};
use super::reducer::{merge, nonempty, push_unique, truncate, Reducer};

/// What an agent fact says beyond its status (see `teammate_flags`).
struct TeammateFlags {
    needs_input: Option<bool>,
    plan_ready: Option<bool>,
    needs_auth: Option<bool>,
    agent_card: Option<Value>,
    remote_task_id: Option<String>,
    schedule: Option<Value>,
    wake_reason: Option<String>,
}

/// Upsert an object keyed by `key == id` in a bounded list; returns it.
pub(super) fn upsert<'v>(list: &'v mut Vec<Value>, key: &str, id: &str) -> &'v mut Value {
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

impl<'a> Reducer<'a> {
    /// The envelope's `topology`, kept as the session's.
    pub fn adopt_topology(&mut self) {
        if let Some(t) = nonempty(self.fact.taxonomy.topology.as_deref()) {
            if self.state.topology.as_deref() != Some(t.as_str()) {
                self.state.topology = Some(t);
                self.touch("topology", "topology");
            }
        }
    }

    /// What an agent fact says of a remote or background teammate, and of
    /// what it waits for.
    fn teammate_flags(&self) -> TeammateFlags {
        let flag = |keys: &[&str]| self.first_value(keys).and_then(|v| v.as_bool());
        TeammateFlags {
            needs_input: flag(&["needsInput", "inputRequired"]),
            plan_ready: flag(&["planReady"]),
            needs_auth: flag(&["needsAuth", "authRequired"]),
            agent_card: self.first_value(&["agentCard", "card"]),
            remote_task_id: self.first_str(&["remoteTaskId"]),
            schedule: self.first_value(&["schedule"]),
            wake_reason: self.first_str(&["wakeReason", "trigger"]),
        }
    }

    /// Status of a lifecycle fact: payload word, class suffix, fact status.
    fn lifecycle_status(&self, running_on_start: bool) -> String {
        if let Some(s) = self.first_str(&["status", "runtimeStatus"]) {
            return s;
        }
        let suffix = self.fact.class.rsplit('.').next().unwrap_or("");
        match suffix {
            "completed" => "completed".into(),
            "failed" => "failed".into(),
            "started" | "spawned" if running_on_start => "running".into(),
            _ => self.fact.status.clone().unwrap_or_else(|| "unknown".into()),
        }
    }

    /// `task.*`: work items. Parent/child edges only from `parentTaskId`.
    pub fn on_task(&mut self) {
        let Some(tid) =
            nonempty(self.fact.ids.task_id.as_deref()).or_else(|| self.first_str(&["taskId"]))
        else {
            self.diag(
                "missing_scope_id",
                Severity::Warning,
                format!("{} without taskId", self.fact.class),
            );
            return;
        };
        let status = self.lifecycle_status(true);
        let parent = nonempty(self.fact.ids.parent_task_id.as_deref())
            .or_else(|| self.first_str(&["parentTaskId"]));
        let (cursor, title, agent) = (self.cursor, self.title(), self.agent());
        let assignee = self.first_str(&["assignee", "assigneeId", "owner"]);
        let priority = self.first_value(&["priority"]);
        let blocker = self
            .first_str(&["blocker", "blockedBy", "blockReason"])
            .map(|b| truncate(&b, 300));
        let deps = self.payload_strs(&["dependencies", "dependsOn"]);
        let entity = self.first_str(&["runtimeEntity"]);
        let mut refs = self.refs();
        for r in self
            .fact
            .artifact_refs
            .iter()
            .chain(&self.fact.evidence_refs)
        {
            push_unique(&mut refs, r);
        }
        for r in self.payload_strs(&["resultRef", "transcriptRef"]) {
            push_unique(&mut refs, &r);
        }
        let e = self
            .state
            .tasks
            .entry(tid.clone())
            .or_insert_with(|| TaskEntry {
                task_id: tid.clone(),
                parent_task_id: None,
                status: String::new(),
                title: None,
                agent_id: None,
                assignee: None,
                priority: None,
                blocker: None,
                dependencies: Vec::new(),
                refs: Vec::new(),
                runtime_entity: None,
                updated_cursor: cursor,
            });
        e.status = status;
        for (slot, v) in [
            (&mut e.parent_task_id, parent.clone()),
            (&mut e.title, title),
            (&mut e.agent_id, agent),
            (&mut e.assignee, assignee),
            (&mut e.runtime_entity, entity),
        ] {
            if v.is_some() {
                *slot = v;
            }
        }
        if priority.is_some() {
            e.priority = priority;
        }
        // A blocker holds until a fact names another or the task moves on.
        if blocker.is_some() || e.status != "blocked" {
            e.blocker = blocker;
        }
        for d in &deps {
            push_unique(&mut e.dependencies, d);
        }
        for r in &refs {
            push_unique(&mut e.refs, r);
        }
        e.updated_cursor = cursor;
        if let Some(p) = parent {
            self.add_edge(format!("task:{p}"), format!("task:{tid}"), "subtask");
        }
        self.touch("tasks", tid);
    }

    /// Payload strings: each key may hold a string or an array of strings.
    fn payload_strs(&self, keys: &[&str]) -> Vec<String> {
        let mut v = Vec::new();
        for k in keys {
            match self.fact.payload_get(k) {
                Some(Value::String(s)) if !s.trim().is_empty() => push_unique(&mut v, s),
                Some(Value::Array(a)) => {
                    for s in a.iter().filter_map(Value::as_str) {
                        push_unique(&mut v, s);
                    }
                }
                _ => {}
            }
        }
        v
    }

    /// Add a delegation-graph edge once.
    pub(super) fn add_edge(&mut self, from: String, to: String, kind: &str) {
        let edge = Edge {
            from,
            to,
            kind: kind.into(),
        };
        if !self.state.team.edges.contains(&edge) {
            self.state.team.edges.push(edge);
            self.touch("team", "edges");
        }
    }

    /// `agent.* | worker.started | worker.completed`.
    pub fn on_agent(&mut self) {
        let ids = &self.fact.ids;
        let Some(aid) = nonempty(ids.agent_id.as_deref())
            .or_else(|| nonempty(ids.subagent_id.as_deref()))
            .or_else(|| nonempty(ids.worker_id.as_deref()))
            .or_else(|| self.first_str(&["agentId", "subagentId", "workerId"]))
        else {
            self.diag(
                "missing_scope_id",
                Severity::Warning,
                format!("{} without an agent id", self.fact.class),
            );
            return;
        };
        let parent_session = nonempty(ids.parent_session_id.as_deref())
            .or_else(|| self.first_str(&["parentSessionId"]));
        let parent_thread = nonempty(ids.parent_thread_id.as_deref())
            .or_else(|| self.first_str(&["parentThreadId"]));
        let task = nonempty(ids.task_id.as_deref())
            .or_else(|| self.first_str(&["parentTaskId", "taskId"]));
        let status = if self.fact.class == "agent.handoff" {
            None
        } else {
            Some(self.lifecycle_status(true))
        };
        let name = self.first_str(&["agentName", "name"]);
        let role = self.first_str(&["role"]);
        let model = self
            .first_str(&["model"])
            .or_else(|| self.fact.model.clone());
        let team_name = self.first_str(&["teamName"]);
        let policy = self.first_value(&["policy"]).or_else(|| {
            self.first_str(&["permissionMode"])
                .map(|m| json!({"permissionMode": m}))
        });
        let latest = self.first_str(&["latestTurnStatus"]);
        let flags = self.teammate_flags();
        let transcript = self.first_str(&["transcriptRef"]);
        let cursor = self.cursor;
        let is_new = !self.state.agents.contains_key(&aid);
        let e = self
            .state
            .agents
            .entry(aid.clone())
            .or_insert_with(|| AgentEntry::new(&aid, "unavailable", cursor));
        if let Some(s) = status {
            e.status = s;
        }
        for (flag, v) in [
            (&mut e.needs_input, flags.needs_input),
            (&mut e.plan_ready, flags.plan_ready),
            (&mut e.needs_auth, flags.needs_auth),
        ] {
            if let Some(v) = v {
                *flag = v;
            }
        }
        match e.status.as_str() {
            "needs_input" => e.needs_input = true,
            "plan_ready" => e.plan_ready = true,
            // A teammate that ended waits for nothing.
            "completed" | "failed" | "killed" | "closed" | "cancelled" => {
                e.needs_input = false;
                e.plan_ready = false;
                e.needs_auth = false;
            }
            _ => {}
        }
        // Seed 004: needs_input and plan_ready outrank a plain running.
        if matches!(
            e.status.as_str(),
            "running" | "idle" | "unknown" | "needs_input" | "plan_ready"
        ) {
            if e.needs_input {
                e.status = "needs_input".into();
            } else if e.plan_ready {
                e.status = "plan_ready".into();
            } else if matches!(e.status.as_str(), "needs_input" | "plan_ready") {
                e.status = "running".into();
            }
        }
        if flags.agent_card.is_some() {
            e.agent_card = flags.agent_card;
        }
        if flags.schedule.is_some() {
            e.schedule = flags.schedule;
        }
        for (slot, v) in [
            (&mut e.remote_task_id, flags.remote_task_id),
            (&mut e.wake_reason, flags.wake_reason),
        ] {
            if v.is_some() {
                *slot = v;
            }
        }
        for (slot, v) in [
            (&mut e.name, name),
            (&mut e.role, role),
            (&mut e.model, model),
            (&mut e.parent_session_id, parent_session),
            (&mut e.parent_thread_id, parent_thread),
            (&mut e.task_id, task),
            (&mut e.team_name, team_name),
            (&mut e.latest_turn_status, latest),
            (&mut e.transcript_ref, transcript),
        ] {
            if v.is_some() {
                *slot = v;
            }
        }
        if policy.is_some() {
            e.policy = policy;
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
        if !self.state.team.roster.contains(&aid) {
            self.state.team.roster.push(aid.clone());
            self.touch("team", "roster");
        }
        if let Some(from) = from {
            self.add_edge(from, aid.clone(), "delegation");
        }
        if self.fact.class == "agent.handoff" {
            self.on_handoff();
        }
        self.touch("agents", aid);
    }

    /// `team.changed`: roster members (ids, or objects with identity),
    /// team facts (name, phase, topology, counts) and work-board items.
    /// Roster-only members get `lineage: "unknown"`: nothing said anything
    /// about their parents (no diagnostic: a coordinator has none).
    pub fn on_team_changed(&mut self) {
        if let Some(Value::Array(a)) = self.fact.payload_get("roster") {
            let members: Vec<Value> = a.clone();
            for x in members {
                let id = x
                    .as_str()
                    .or_else(|| x.get("agentId").and_then(Value::as_str))
                    .filter(|s| !s.trim().is_empty())
                    .map(str::to_string);
                let Some(id) = id else { continue };
                push_unique(&mut self.state.team.roster, &id);
                if x.is_object() {
                    self.roster_member(&id, &x);
                }
            }
            self.touch("team", "roster");
        }
        let mut info = json!({});
        for k in [
            "teamName",
            "teamPhase",
            "topology",
            "selectedTeam",
            "teamParallelBudget",
            "teamActiveCount",
            "teamQueuedCount",
            "providerConcurrencyGroup",
            "providerParallelBudget",
            "queueReason",
            "teamMemoryRef",
        ] {
            if let Some(v) = self.first_value(&[k]) {
                info[k] = v;
            }
        }
        if info.as_object().is_some_and(|o| !o.is_empty()) {
            info["updatedCursor"] = json!(self.cursor);
            merge(&mut self.state.team.info, info);
            self.touch("team", "info");
        }
        if let Some(Value::Array(items)) = self.fact.payload_get("workItems").cloned() {
            for it in items {
                let id = it
                    .get("taskId")
                    .or_else(|| it.get("workItemId"))
                    .and_then(Value::as_str)
                    .filter(|s| !s.trim().is_empty());
                let Some(id) = id else { continue };
                let s = |k: &str| it.get(k).and_then(Value::as_str).map(str::to_string);
                let cursor = self.cursor;
                let e = self
                    .state
                    .tasks
                    .entry(id.to_string())
                    .or_insert_with(|| TaskEntry {
                        task_id: id.to_string(),
                        parent_task_id: None,
                        status: "unknown".into(),
                        title: None,
                        agent_id: None,
                        assignee: None,
                        priority: None,
                        blocker: None,
                        dependencies: Vec::new(),
                        refs: Vec::new(),
                        runtime_entity: Some("work_item".into()),
                        updated_cursor: cursor,
                    });
                if let Some(v) = s("status") {
                    e.status = v;
                }
                for (slot, v) in [
                    (&mut e.title, s("title")),
                    (&mut e.assignee, s("assignee")),
                    (&mut e.blocker, s("blocker")),
                ] {
                    if v.is_some() {
                        *slot = v;
                    }
                }
                if let Some(p) = it.get("priority").filter(|v| !v.is_null()) {
                    e.priority = Some(p.clone());
                }
                e.updated_cursor = cursor;
                self.touch("tasks", id.to_string());
            }
        }
    }

    /// A roster member object of `team.changed`: identity fields only.
    fn roster_member(&mut self, id: &str, x: &Value) {
        let s = |k: &str| {
            x.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        };
        let cursor = self.cursor;
        let e = self
            .state
            .agents
            .entry(id.to_string())
            .or_insert_with(|| AgentEntry::new(id, "unknown", cursor));
        for (slot, v) in [
            (&mut e.name, s("agentName").or_else(|| s("name"))),
            (&mut e.role, s("role")),
            (&mut e.model, s("model")),
            (&mut e.team_name, s("teamName")),
            (&mut e.parent_session_id, s("parentSessionId")),
            (&mut e.parent_thread_id, s("parentThreadId")),
            (&mut e.task_id, s("taskId")),
        ] {
            if v.is_some() {
                *slot = v;
            }
        }
        if let Some(st) = s("status").or_else(|| s("runtimeStatus")) {
            e.status = st;
        }
        if let Some(p) = x.get("policy").filter(|v| !v.is_null()) {
            e.policy = Some(p.clone());
        }
        if e.parent_session_id.is_some() || e.parent_thread_id.is_some() || e.task_id.is_some() {
            e.lineage = "known".into();
        }
        e.updated_cursor = cursor;
        self.touch("agents", id.to_string());
    }
}
