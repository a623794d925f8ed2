//! Reading AG-UI events (`@ag-ui/core` 1.0, what LangGraph, CrewAI,
//! Mastra, Pydantic AI and others emit) as facts: each event becomes zero
//! or more Agent UI envelope events, which then go through the same
//! normalisation, validation and redaction as any posted event.
//!
//! One [`AgUi`] reads one request (a JSON batch, NDJSON or an SSE body);
//! it remembers what AG-UI leaves implicit (the run, the message a `*_CHUNK`
//! continues, a tool call's streamed arguments, the roles of messages).
//! Event ids are `ag:<idempotency-key or nonce>:<index>`, except for facts
//! about one entity that several AG-UI events may say again (a user
//! message, a tool call's start, input and result, as both the stream and
//! `MESSAGES_SNAPSHOT` tell them): those are `ag:<kind>:<entity id>`, so the
//! second telling is a duplicate, not a second fact. The mapping table is in
//! docs/AG-UI.md.

mod messages;
mod runs;
mod tools;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use serde_json::{json, Value};

use messages::under_app;
use runs::{time_of, usage};

pub use super::ui_stream::Mapped;

/// An AG-UI event the projection cannot take: kept as it is (timeline and a
/// diagnostic, under its `ag-ui.*` class), and said in the reply.
pub const NOT_PROJECTED: &str = super::issue::code::AG_UI_NOT_PROJECTED;
/// An AG-UI event that breaks its own schema (a missing id, a bad field).
pub const INVALID_EVENT: &str = "invalid_ag_ui_event";

/// Every event type of `@ag-ui/core` 1.0.
pub const EVENT_TYPES: &[&str] = &[
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_CHUNK",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "STATE_DELTA",
    "MESSAGES_SNAPSHOT",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "RAW",
    "CUSTOM",
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_MESSAGE_CHUNK",
    "REASONING_END",
    "REASONING_ENCRYPTED_VALUE",
    "SUBAGENT_STARTED",
    "SUBAGENT_FINISHED",
    "SUBAGENT_ERROR",
];

/// True when `v` is an AG-UI event (its `type` is one of [`EVENT_TYPES`]).
pub fn is_ag_ui(v: &Value) -> bool {
    crate::event::normalize::field_of(v, "type")
        .and_then(Value::as_str)
        .is_some_and(|t| EVENT_TYPES.contains(&t))
}

/// The turns a `RunAgentInput` submits: its user messages as
/// `turn.submitted` facts with the messages' entity ids (`ag:user:<id>`),
/// so that the whole history the client sends again adds nothing twice.
pub fn input_turns(input: &Value) -> Vec<Value> {
    let reader = AgUi::new(None);
    input
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .filter_map(|m| reader.user_message(m))
        .collect()
}

/// A tool call whose arguments are streaming.
#[derive(Debug, Clone, Default)]
struct Call {
    name: Option<String>,
    parent: Option<String>,
    args: String,
}

/// The state of one request of AG-UI events being read.
#[derive(Debug, Clone)]
pub struct AgUi {
    key: Option<String>,
    nonce: String,
    index: u64,
    run_id: Option<String>,
    thread_id: Option<String>,
    /// The role of each text message that said it (`TEXT_MESSAGE_START`).
    roles: HashMap<String, String>,
    /// The text of non-assistant messages, told whole at their end.
    gathered: HashMap<String, String>,
    /// What a `TEXT_MESSAGE_CHUNK` / `REASONING_MESSAGE_CHUNK` /
    /// `TOOL_CALL_CHUNK` without an id continues.
    last_message: Option<String>,
    last_reasoning: Option<String>,
    last_call: Option<String>,
    calls: HashMap<String, Call>,
    started: bool,
    ended: bool,
}

impl AgUi {
    /// A reader of one request; `key` is the producer's `idempotency-key`.
    pub fn new(key: Option<String>) -> Self {
        AgUi {
            key: key.filter(|k| !k.is_empty()),
            nonce: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            index: 0,
            run_id: None,
            thread_id: None,
            roles: HashMap::new(),
            gathered: HashMap::new(),
            last_message: None,
            last_reasoning: None,
            last_call: None,
            calls: HashMap::new(),
            started: false,
            ended: false,
        }
    }

    /// The run this request's events belong to, once `RUN_STARTED` said it.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// True once a run started and has not ended in this request.
    pub fn running(&self) -> bool {
        self.started && !self.ended
    }

    /// The stream stopped before its run ended (cut, idle, too long): the
    /// run ends as interrupted. None when no run is open.
    pub fn cut(&mut self, why: &str) -> Option<Value> {
        if !self.running() {
            return None;
        }
        self.ended = true;
        let mut e = self.event(
            "run.finished",
            "",
            json!({"payload": {"outcome": "interrupted", "reason": why}}),
        );
        e["id"] = format!("{}:cut", self.prefix()).into();
        Some(e)
    }

    /// The stream was cancelled: the run ends as cancelled.
    pub fn cancel(&mut self) -> Option<Value> {
        if !self.running() {
            return None;
        }
        self.ended = true;
        let mut e = self.event(
            "run.canceled",
            "",
            json!({"payload": {"reason": "cancelled by the user"}}),
        );
        e["id"] = format!("{}:cancel", self.prefix()).into();
        Some(e)
    }

    fn prefix(&self) -> String {
        match &self.key {
            Some(k) => format!("ag:{k}"),
            None => format!("ag:{}", self.nonce),
        }
    }

    /// An envelope event of the current run; `extra` fields that are null
    /// are left out.
    fn event(&self, ty: &str, suffix: &str, extra: Value) -> Value {
        let mut id = format!("{}:{}", self.prefix(), self.index);
        if !suffix.is_empty() {
            id = format!("{id}.{suffix}");
        }
        let mut e = json!({"id": id, "type": ty});
        if let Some(r) = &self.run_id {
            e["runId"] = r.clone().into();
        }
        if let Some(t) = &self.thread_id {
            e["threadId"] = t.clone().into();
        }
        super::ui_stream::add_present(&mut e, extra);
        e
    }

    /// The events of one AG-UI event.
    pub fn map(&mut self, ev: &Value) -> Mapped {
        let out = self.map_inner(ev);
        self.index += 1;
        out
    }

    fn map_inner(&mut self, ev: &Value) -> Mapped {
        let ty = ev.get("type").and_then(Value::as_str).unwrap_or("");
        let s = |k: &str| ev.get(k).and_then(Value::as_str).map(str::to_string);
        let v = |k: &str| ev.get(k).cloned().unwrap_or(Value::Null);
        let need = |k: &str| -> Result<String, Mapped> {
            s(k).filter(|x| !x.is_empty()).ok_or_else(|| {
                Mapped::Warning(INVALID_EVENT, format!("{ty} without `{k}`; not applied"))
            })
        };
        let mut out = match ty {
            "RUN_STARTED" => self.run_started(ev),
            "RUN_FINISHED" => self.run_finished(ev),
            "RUN_ERROR" => {
                self.ended = true;
                one(self.event(
                    "run.failed",
                    "",
                    json!({"payload": {"error": s("message"), "failureCategory": s("code"),
                                       "usage": usage(ev)}}),
                ))
            }
            "TEXT_MESSAGE_START" => match need("messageId") {
                Ok(m) => {
                    self.open_message(&m, s("role"));
                    Mapped::Events(Vec::new())
                }
                Err(w) => w,
            },
            "TEXT_MESSAGE_CONTENT" => match need("messageId") {
                Ok(m) => self.text(&m, s("delta").unwrap_or_default(), s("name")),
                Err(w) => w,
            },
            "TEXT_MESSAGE_CHUNK" => {
                match s("messageId").or_else(|| self.last_message.clone()) {
                    Some(m) => {
                        if !self.roles.contains_key(&m) {
                            self.open_message(&m, s("role"));
                        }
                        self.last_message = Some(m.clone());
                        self.text(&m, s("delta").unwrap_or_default(), s("name"))
                    }
                    None => Mapped::Warning(
                        INVALID_EVENT,
                        "TEXT_MESSAGE_CHUNK without `messageId` and no message before it; not applied".into(),
                    ),
                }
            }
            "TEXT_MESSAGE_END" => match need("messageId") {
                Ok(m) => self.end_message(&m),
                Err(w) => w,
            },
            "TOOL_CALL_START" => match need("toolCallId") {
                Ok(tc) => self.call_start(&tc, s("toolCallName"), s("parentMessageId")),
                Err(w) => w,
            },
            "TOOL_CALL_ARGS" => match need("toolCallId") {
                Ok(tc) => self.call_args(&tc, s("delta").unwrap_or_default()),
                Err(w) => w,
            },
            "TOOL_CALL_CHUNK" => match s("toolCallId").or_else(|| self.last_call.clone()) {
                Some(tc) => {
                    let mut es = Vec::new();
                    if !self.calls.contains_key(&tc) {
                        if let Mapped::Events(x) =
                            self.call_start(&tc, s("toolCallName"), s("parentMessageId"))
                        {
                            es.extend(x);
                        }
                    }
                    if let Some(d) = s("delta").filter(|d| !d.is_empty()) {
                        if let Mapped::Events(x) = self.call_args(&tc, d) {
                            es.extend(x.into_iter().map(|mut e| {
                                e["id"] = format!("{}.a", e["id"].as_str().unwrap_or("")).into();
                                e
                            }));
                        }
                    }
                    Mapped::Events(es)
                }
                None => Mapped::Warning(
                    INVALID_EVENT,
                    "TOOL_CALL_CHUNK without `toolCallId` and no call before it; not applied"
                        .into(),
                ),
            },
            "TOOL_CALL_END" => match need("toolCallId") {
                Ok(tc) => self.call_end(&tc),
                Err(w) => w,
            },
            "TOOL_CALL_RESULT" => match need("toolCallId") {
                Ok(tc) => one(self.tool_result(&tc, &v("content"))),
                Err(w) => w,
            },
            "STATE_SNAPSHOT" => one(self.event(
                "state.snapshot",
                "",
                json!({"payload": {"state": v("snapshot")}}),
            )),
            "STATE_DELTA" => match ev.get("delta").and_then(Value::as_array) {
                Some(ops) => one(self.event(
                    "state.delta",
                    "",
                    json!({"payload": {"patch": under_app(ops)}}),
                )),
                None => Mapped::Warning(
                    INVALID_EVENT,
                    "STATE_DELTA without a JSON Patch `delta`; not applied".into(),
                ),
            },
            "MESSAGES_SNAPSHOT" => self.messages_snapshot(ev),
            "ACTIVITY_SNAPSHOT" | "ACTIVITY_DELTA" => match need("messageId") {
                Ok(m) => one(self.activity(ty, &m, ev)),
                Err(w) => w,
            },
            "STEP_STARTED" | "STEP_FINISHED" => one(self.event(
                "run.status",
                "",
                json!({"payload": {"status": "running",
                                   "phase": if ty == "STEP_STARTED" { s("stepName") } else { None }}}),
            )),
            "REASONING_START" | "REASONING_END" => Mapped::Events(Vec::new()),
            "REASONING_MESSAGE_START" => {
                self.last_reasoning = s("messageId");
                Mapped::Events(Vec::new())
            }
            "REASONING_MESSAGE_END" => Mapped::Events(Vec::new()),
            "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_CHUNK" => {
                match s("messageId").or_else(|| self.last_reasoning.clone()) {
                    Some(r) => {
                        self.last_reasoning = Some(r.clone());
                        one(self.event(
                            "reasoning.delta",
                            "",
                            json!({"partId": r, "messageId": r,
                                   "payload": {"delta": s("delta").unwrap_or_default(),
                                               "visibility": "shown"}}),
                        ))
                    }
                    None => Mapped::Warning(
                        INVALID_EVENT,
                        format!("{ty} without `messageId` and no reasoning message before it; not applied"),
                    ),
                }
            }
            "SUBAGENT_STARTED" => match need("subagentRunId") {
                Ok(a) => one(self.event(
                    "agent.spawned",
                    "",
                    json!({"agentId": a, "subagentId": a, "taskId": a, "title": s("name"),
                           "toolCallId": s("parentToolCallId"),
                           "payload": {"name": s("name"), "role": s("name"),
                                       "description": s("description"),
                                       "parentSubagentRunId": s("parentSubagentRunId"),
                                       "parentMessageId": s("parentMessageId")}}),
                )),
                Err(w) => w,
            },
            "SUBAGENT_FINISHED" => match need("subagentRunId") {
                Ok(a) => one(self.event(
                    "agent.completed",
                    "",
                    json!({"agentId": a, "subagentId": a, "taskId": a,
                           "payload": {"result": v("result"), "outcome": v("outcome")}}),
                )),
                Err(w) => w,
            },
            "SUBAGENT_ERROR" => match need("subagentRunId") {
                Ok(a) => one(self.event(
                    "agent.changed",
                    "",
                    json!({"agentId": a, "subagentId": a, "taskId": a, "status": "failed",
                           "payload": {"error": s("message"), "code": s("code")}}),
                )),
                Err(w) => w,
            },
            "RAW" => self.raw(ev),
            // Kept as they are, under their own class: the timeline and a
            // diagnostic show them, the reply says they were not projected.
            "CUSTOM" | "REASONING_ENCRYPTED_VALUE" => self.kept(ty, ev),
            other => Mapped::Warning(
                NOT_PROJECTED,
                format!("`{other}` is not an AG-UI 1.0 event type"),
            ),
        };
        // A teammate's event speaks for it.
        if let (Mapped::Events(es), Some(a)) = (&mut out, s("subagentRunId")) {
            for e in es.iter_mut() {
                if e.get("agentId").is_none() {
                    e["agentId"] = a.clone().into();
                }
            }
        }
        if let (Mapped::Events(es), Some(ts)) =
            (&mut out, ev.get("timestamp").and_then(Value::as_i64))
        {
            if let Some(at) = time_of(ts) {
                for e in es.iter_mut() {
                    e["createdAt"] = at.clone().into();
                }
            }
        }
        out
    }
}

pub(super) fn one(e: Value) -> Mapped {
    Mapped::Events(vec![e])
}
