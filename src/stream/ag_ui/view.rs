//! One AG-UI connection's view of the session's frames: what it has opened
//! and not closed (the run, text and reasoning messages, tool calls,
//! steps), what it knows of the session's messages ([`Books`]), and the
//! mapping of each frame to AG-UI events. Frames up to a resume cursor are
//! read without a word, so that the view stands where the client stood.

use bytes::Bytes;
use indexmap::{IndexMap, IndexSet};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::shapes::{interrupt, messages, reasoning_closes, reasoning_opens, role_name, Books};
use crate::frame::{Frame, FrameKind};
use crate::projection::{Message, Role};

mod chunks;
mod mirror;

/// Statuses in which the snapshot's run is still going on.
const ACTIVE: &[&str] = &["running", "preparing", "routing", "retrying", "blocked"];

/// What this connection has opened and not closed, and what it knows.
#[derive(Default)]
pub(super) struct View {
    thread: String,
    /// Frames up to this cursor are read, not sent: the client has them.
    mute_until: Option<u64>,
    /// The run open on this connection.
    run: Option<String>,
    /// Whether that run is one this connection opened for facts outside
    /// any run of the runtime's.
    synthetic: bool,
    /// The run id the runtime surface says.
    run_id: Option<String>,
    /// Open AG-UI text messages -> the session message they belong to.
    texts: IndexMap<String, String>,
    /// Open AG-UI reasoning messages -> their session message.
    reasoning: IndexMap<String, String>,
    /// Tool calls whose arguments are open.
    calls: IndexSet<String>,
    /// Calls whose arguments streamed (their input is not sent again).
    streamed: IndexSet<String>,
    /// Calls started and not yet answered (a result, an error, a denial),
    /// with their session message.
    awaiting: IndexMap<String, String>,
    /// Open steps, by name.
    steps: IndexSet<String>,
    /// Pending actions (`data-actions` entries), for an interrupt outcome.
    pending: Map<String, Value>,
    /// The error text of a failing run's message (its `error` chunk).
    failure: Option<String>,
    /// The runtime's failure category, as the run's error code.
    failure_code: Option<String>,
    books: Books,
    /// The AG-UI messages this connection's client holds.
    mirror: mirror::Mirror,
    /// Whether a run has ended on this connection.
    pub ended: bool,
}

#[derive(Deserialize)]
struct Snapshot {
    cursor: Option<u64>,
    state: State,
}

#[derive(Deserialize)]
struct State {
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    app: Value,
    #[serde(default)]
    runtime: Value,
    #[serde(default)]
    actions: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Delta {
    cursor: u64,
    event_class: String,
    #[serde(default)]
    timeline: Option<Timeline>,
    chunks: Vec<Entry>,
}

#[derive(Deserialize)]
struct Timeline {
    timestamp: Option<String>,
}

/// One chunk of a delta frame, with the message fields its `start` carries.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    message_id: Option<String>,
    role: Option<Role>,
    agent_id: Option<String>,
    chunk: Value,
}

/// Milliseconds since the epoch of an RFC 3339 time, or of a number.
fn millis(t: &str) -> Option<u64> {
    if let Ok(n) = t.parse::<u64>() {
        return Some(n);
    }
    let at = humantime::parse_rfc3339_weak(t).ok()?;
    Some(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64)
}

impl View {
    /// A view of session `thread`; with `resume_after`, frames up to that
    /// cursor only move the view.
    pub fn new(thread: String, resume_after: Option<u64>) -> Self {
        View {
            thread,
            mute_until: resume_after,
            ..View::default()
        }
    }

    /// The SSE bytes of one frame's events (`None`: none to send).
    pub fn map(&mut self, f: &Frame) -> Option<Bytes> {
        let muted = f.kind == FrameKind::Delta
            && matches!((self.mute_until, f.cursor), (Some(n), Some(c)) if c <= n);
        let mut events = Vec::new();
        if !muted && self.mute_until.take().is_some() && f.kind == FrameKind::Delta {
            events = self.reopen();
        }
        let (more, at) = match f.kind {
            // The snapshot that follows says it all again; AG-UI has no
            // event for where the replay ends.
            FrameKind::Reset | FrameKind::Live => (Vec::new(), None),
            FrameKind::Snapshot => (self.snapshot(serde_json::from_slice(&f.json).ok()?), None),
            FrameKind::Delta => {
                let d: Delta = serde_json::from_slice(&f.json).ok()?;
                let producer = d.timeline.as_ref().and_then(|t| t.timestamp.as_deref());
                let at = producer.and_then(millis).or(f.received.0);
                (self.delta(d), at)
            }
        };
        events.extend(more);
        if muted {
            // A run that ended before the client's cursor ended on its
            // earlier connection, not on this one.
            self.ended = false;
            return None;
        }
        if events.is_empty() {
            return None;
        }
        let at = at.unwrap_or_else(crate::store::now_ms);
        let id = match (f.epoch(), f.cursor) {
            (Some(e), Some(c)) => Some(format!("{e}:{c}")),
            _ => None,
        };
        let mut out = Vec::with_capacity(events.len() * 112);
        for mut e in events {
            e["timestamp"] = at.into();
            if let Some(id) = &id {
                out.extend_from_slice(b"id: ");
                out.extend_from_slice(id.as_bytes());
                out.push(b'\n');
            }
            out.extend_from_slice(b"data: ");
            serde_json::to_writer(&mut out, &e).ok()?;
            out.extend_from_slice(b"\n\n");
        }
        Some(Bytes::from(out))
    }

    /// A resumed connection's first events: the run that was open where
    /// the client stopped, and what was open in it, opened again (AG-UI
    /// clients continue a message or call they hold).
    fn reopen(&mut self) -> Vec<Value> {
        let Some(run) = self.run.clone() else {
            return Vec::new();
        };
        let idle = self.texts.is_empty()
            && self.reasoning.is_empty()
            && self.calls.is_empty()
            && self.steps.is_empty();
        if self.synthetic && idle {
            // Nothing of it is open: the next fact opens a run of its own.
            self.run = None;
            return Vec::new();
        }
        let mut out = vec![json!({"type": "RUN_STARTED", "threadId": self.thread, "runId": run})];
        for (id, mid) in &self.texts {
            let role = role_name(self.books.roles.get(mid).copied());
            out.push(self.owned(
                mid,
                json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": role}),
            ));
        }
        for (id, mid) in &self.reasoning {
            out.extend(reasoning_opens(id).map(|e| self.owned(mid, e)));
        }
        // Calls still waiting for their result: told again (without their
        // arguments, which the client holds), so that the result has a call.
        for (tc, mid) in &self.awaiting {
            let name = self.books.names.get(tc).cloned().unwrap_or_default();
            out.push(self.owned(
                mid,
                json!({"type": "TOOL_CALL_START", "toolCallId": tc, "toolCallName": name}),
            ));
            if !self.calls.contains(tc) {
                out.push(self.owned(mid, json!({"type": "TOOL_CALL_END", "toolCallId": tc})));
            }
        }
        for s in &self.steps {
            out.push(json!({"type": "STEP_STARTED", "stepName": s}));
        }
        out
    }

    /// `subagentRunId` on an event about a teammate's message.
    fn owned(&self, mid: &str, mut e: Value) -> Value {
        if let Some(a) = self.books.agents.get(mid) {
            e["subagentRunId"] = a.as_str().into();
        }
        e
    }

    fn snapshot(&mut self, s: Snapshot) -> Vec<Value> {
        let mut out = Vec::new();
        // Whatever this connection had open is replaced.
        if self.run.is_some() {
            out.extend(self.close_all());
            out.push(self.run_finished());
        }
        *self = View {
            thread: std::mem::take(&mut self.thread),
            ended: self.ended,
            mirror: std::mem::take(&mut self.mirror),
            ..View::default()
        };
        let runtime = &s.state.runtime;
        self.run_id = runtime
            .get("runId")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.failure_code = runtime
            .get("failureCategory")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.pending = s
            .state
            .actions
            .into_iter()
            .filter(|(_, a)| a.get("status").and_then(Value::as_str) == Some("pending"))
            .collect();
        let status = runtime
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("idle");
        let active = ACTIVE.contains(&status);
        let run = match (&self.run_id, active) {
            (Some(r), true) => Some(r.clone()),
            _ => None,
        };
        // Each session message's AG-UI messages, kept with it.
        let mut held = Vec::new();
        for m in &s.state.messages {
            let of = messages(std::slice::from_ref(m), &mut self.books);
            held.extend(of.into_iter().map(|v| (m.id.to_string(), v)));
        }
        let msgs: Vec<Value> = held.iter().map(|(_, v)| v.clone()).collect();
        self.mirror.snapshot(held);
        out.push(self.run_started(run, s.cursor.unwrap_or(0)));
        out.push(json!({"type": "MESSAGES_SNAPSHOT", "messages": msgs}));
        let app = if s.state.app.is_object() {
            s.state.app
        } else {
            json!({})
        };
        out.push(json!({"type": "STATE_SNAPSHOT", "snapshot": app}));
        if !active {
            out.push(self.run_finished());
        }
        out
    }

    /// The id of a run this connection opens for facts outside any run of
    /// the runtime's (a join, a user's message before its run starts).
    fn synthetic(&self, cursor: u64) -> String {
        format!("{}:{cursor}", self.thread)
    }

    /// Open a run: the runtime's `run`, else a synthetic one named after
    /// the frame at `cursor`.
    fn run_started(&mut self, run: Option<String>, cursor: u64) -> Value {
        self.synthetic = run.is_none();
        let run = run.unwrap_or_else(|| self.synthetic(cursor));
        self.run = Some(run.clone());
        json!({"type": "RUN_STARTED", "threadId": self.thread, "runId": run})
    }

    /// `RUN_FINISHED`; pending actions make it an interrupt.
    fn run_finished(&mut self) -> Value {
        let run = self.run.take().unwrap_or_else(|| self.thread.clone());
        let mut e = json!({"type": "RUN_FINISHED", "threadId": self.thread, "runId": run});
        if !self.pending.is_empty() {
            let interrupts: Vec<Value> = self.pending.values().map(interrupt).collect();
            e["outcome"] = json!({"type": "interrupt", "interrupts": interrupts});
        }
        e
    }

    /// End every text, reasoning, tool call and step still open.
    fn close_all(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        for (id, mid) in std::mem::take(&mut self.texts) {
            out.push(self.owned(&mid, json!({"type": "TEXT_MESSAGE_END", "messageId": id})));
        }
        self.books.texts.clear();
        for (id, mid) in std::mem::take(&mut self.reasoning) {
            out.extend(reasoning_closes(&id).map(|e| self.owned(&mid, e)));
        }
        for c in std::mem::take(&mut self.calls) {
            let end = json!({"type": "TOOL_CALL_END", "toolCallId": c});
            out.push(match self.awaiting.get(&c) {
                Some(mid) => self.owned(mid, end),
                None => end,
            });
        }
        self.streamed.clear();
        for s in std::mem::take(&mut self.steps) {
            out.push(json!({"type": "STEP_FINISHED", "stepName": s}));
        }
        out
    }

    fn delta(&mut self, d: Delta) -> Vec<Value> {
        let mut body = Vec::new();
        // Surfaces first: the run id and the actions a run's end names.
        for e in d.chunks.iter().filter(|e| e.message_id.is_none()) {
            let c = &e.chunk;
            let id = c.get("id").and_then(Value::as_str).unwrap_or("");
            match c.get("type").and_then(Value::as_str) {
                Some("data-runtime") => {
                    if let Some(r) = c.pointer("/data/runId").and_then(Value::as_str) {
                        self.run_id = Some(r.to_string());
                    }
                    if let Some(f) = c.pointer("/data/failureCategory").and_then(Value::as_str) {
                        self.failure_code = Some(f.to_string());
                    }
                }
                Some("data-actions") => {
                    if c.pointer("/data/status").and_then(Value::as_str) == Some("pending") {
                        self.pending.insert(id.to_string(), c["data"].clone());
                    } else {
                        self.pending.remove(id);
                    }
                }
                Some("data-app") => {
                    body.push(json!({"type": "STATE_SNAPSHOT", "snapshot": c["data"]}))
                }
                _ => {}
            }
        }
        let class = d.event_class.as_str();
        let ends_run = matches!(class, "run.finished" | "run.canceled" | "run.failed");
        for e in d.chunks {
            let Some(mid) = e.message_id else { continue };
            if e.chunk.get("type").and_then(Value::as_str) == Some("start") {
                if let Some(r) = e.role {
                    self.books.roles.insert(mid.clone(), r);
                }
                if let Some(a) = e.agent_id.filter(|a| !a.is_empty()) {
                    self.books.agents.insert(mid.clone(), a);
                }
            }
            let events = self.chunk(&mid, &e.chunk);
            for ev in &events {
                self.mirror.apply(&mid, ev);
            }
            body.extend(events);
        }
        let mut out = Vec::new();
        if class == "run.started" {
            // The run before it (or the one this connection opened for
            // facts outside a run) ends first.
            if self.run.is_some() {
                out.extend(self.close_all());
                out.push(self.run_finished());
            }
            out.push(self.run_started(self.run_id.clone(), d.cursor));
        } else if self.run.is_none() && !body.is_empty() {
            let run = if ends_run { self.run_id.clone() } else { None };
            out.push(self.run_started(run, d.cursor));
        }
        out.extend(body);
        if ends_run && self.run.is_some() {
            // A run of the runtime's ended (what a gateway's answer waits for).
            self.ended = true;
            out.extend(self.close_all());
            if class == "run.failed" {
                self.run = None;
                let message = self.failure.take().unwrap_or_else(|| "run failed".into());
                let mut e = json!({"type": "RUN_ERROR", "message": message});
                if let Some(code) = &self.failure_code {
                    e["code"] = code.as_str().into();
                }
                out.push(e);
            } else {
                let mut end = self.run_finished();
                if class == "run.canceled" {
                    end["outcome"] = json!({"type": "cancelled"});
                }
                out.push(end);
            }
        }
        out
    }
}
