//! The AG-UI view of a session (`GET /v1/sessions/{id}/ag-ui`): the
//! session's frames as AG-UI 1.0 events over SSE, so that an AG-UI client
//! (`@ag-ui/client`, CopilotKit) follows, and reconnects to, any session.
//!
//! A view over the replay-then-live machine, always started from a
//! snapshot: an AG-UI client checks every connection as a run of its own
//! (the first event must be `RUN_STARTED`), so a connection, and a
//! reconnection with `Last-Event-ID`, begins with `RUN_STARTED`,
//! `MESSAGES_SNAPSHOT` and `STATE_SNAPSHOT` of the session at that moment
//! (AG-UI clients apply them as a replacement: nothing is missed, nothing
//! applied twice), closed with `RUN_FINISHED` when no run is going on; then
//! each delta frame becomes the events of its chunks. A message that was
//! streaming in the snapshot goes on with `TEXT_MESSAGE_START` for the same
//! id, which AG-UI clients continue. Every event carries the frame's
//! `<epoch>:<cursor>` as its SSE id. The ids of messages and tool calls,
//! and the state, are the projection's.
//!
//! Like the Umo view, this does JSON work per subscriber; it is for AG-UI
//! clients, not for fan-out to thousands.

use std::collections::HashSet;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{json, Map, Value};

mod shapes;

use crate::frame::{FrameKind, SharedFrame};
use crate::projection::{Message, Role};
use shapes::{interrupt, messages, reasoning_id, tool_result};

/// AG-UI SSE bytes of a session's frames (`session` is the AG-UI thread);
/// with `until_run_end`, they end right after the first run's end
/// (`RUN_FINISHED` or `RUN_ERROR`): the answer to a run a client asked for.
pub fn events(
    session: String,
    inner: impl Stream<Item = SharedFrame> + Send + 'static,
    until_run_end: bool,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let mut view = View {
        thread: session,
        ..View::default()
    };
    let mapped = Box::pin(inner.filter_map(move |f| {
        let out = view.map(&f).map(|b| (b, view.ended && until_run_end));
        std::future::ready(out)
    }));
    // Ends right after the item that ends the run, without waiting for
    // another frame.
    futures_util::stream::unfold((mapped, false), |(mut s, done)| async move {
        if done {
            return None;
        }
        let (b, ended) = s.next().await?;
        Some((b, (s, ended)))
    })
}

/// The SSE response: heartbeats while idle, ends on shutdown.
pub fn response(
    bytes: impl Stream<Item = Bytes> + Send + 'static,
    heartbeat: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
) -> axum::response::Response {
    let body =
        super::sse::with_heartbeats(Box::pin(bytes), heartbeat, shutdown, b": keep-alive\n\n")
            .map(Ok::<_, std::convert::Infallible>);
    super::sse::event_stream(body)
}

/// What this connection has opened and not closed.
#[derive(Default)]
struct View {
    thread: String,
    run: Option<String>,
    texts: HashSet<String>,
    reasoning: HashSet<String>,
    calls: HashSet<String>,
    /// Calls whose arguments streamed (their input is not sent again).
    streamed: HashSet<String>,
    /// Tool names by call id (from the snapshot and the calls' starts): a
    /// call that streamed before this connection opens again with its name,
    /// which AG-UI clients would otherwise overwrite.
    names: std::collections::HashMap<String, String>,
    /// Pending actions (`data-actions` entries), for an interrupt outcome.
    pending: Map<String, Value>,
    /// The run id the runtime surface says.
    run_id: Option<String>,
    /// The error text of a failing run's message (its `error` chunk).
    failure: Option<String>,
    /// Whether a run has ended on this connection.
    ended: bool,
}

#[derive(Deserialize)]
struct Snapshot {
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
    event_class: String,
    chunks: Vec<super::ChunkEntry>,
}

impl View {
    fn map(&mut self, f: &SharedFrame) -> Option<Bytes> {
        let id = match (f.epoch(), f.cursor) {
            (Some(e), Some(c)) => Some(format!("{e}:{c}")),
            _ => None,
        };
        let events = match f.kind {
            // The snapshot that follows says it all again.
            FrameKind::Reset => Vec::new(),
            FrameKind::Snapshot => self.snapshot(serde_json::from_slice(&f.json).ok()?),
            FrameKind::Delta => self.delta(serde_json::from_slice(&f.json).ok()?),
        };
        if events.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(events.len() * 96);
        for e in events {
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
            ..View::default()
        };
        self.run_id = s
            .state
            .runtime
            .get("runId")
            .and_then(Value::as_str)
            .map(str::to_string);
        for m in &s.state.messages {
            for p in &m.parts {
                if let crate::projection::Part::Tool {
                    tool_name,
                    tool_call_id,
                    ..
                } = p
                {
                    self.names.insert(tool_call_id.clone(), tool_name.clone());
                }
            }
        }
        self.pending = s
            .state
            .actions
            .into_iter()
            .filter(|(_, a)| a.get("status").and_then(Value::as_str) == Some("pending"))
            .collect();
        out.push(self.run_started());
        out.push(json!({"type": "MESSAGES_SNAPSHOT", "messages": messages(&s.state.messages)}));
        let app = if s.state.app.is_object() {
            s.state.app
        } else {
            json!({})
        };
        out.push(json!({"type": "STATE_SNAPSHOT", "snapshot": app}));
        let status = s
            .state
            .runtime
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("idle");
        if status != "running" {
            out.push(self.run_finished());
        }
        out
    }

    fn run_started(&mut self) -> Value {
        let run = self.run_id.clone().unwrap_or_else(|| self.thread.clone());
        self.run = Some(run.clone());
        json!({"type": "RUN_STARTED", "threadId": self.thread, "runId": run})
    }

    /// `RUN_FINISHED`; pending actions make it an interrupt.
    fn run_finished(&mut self) -> Value {
        self.ended = true;
        let run = self.run.take().unwrap_or_else(|| self.thread.clone());
        let mut e = json!({"type": "RUN_FINISHED", "threadId": self.thread, "runId": run});
        if !self.pending.is_empty() {
            let interrupts: Vec<Value> = self.pending.values().map(interrupt).collect();
            e["outcome"] = json!({"type": "interrupt", "interrupts": interrupts});
        }
        e
    }

    /// End every text, reasoning and tool call still open.
    fn close_all(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        for m in std::mem::take(&mut self.texts) {
            out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": m}));
        }
        for r in std::mem::take(&mut self.reasoning) {
            out.push(json!({"type": "REASONING_MESSAGE_END", "messageId": r}));
            out.push(json!({"type": "REASONING_END", "messageId": r}));
        }
        for c in std::mem::take(&mut self.calls) {
            out.push(json!({"type": "TOOL_CALL_END", "toolCallId": c}));
        }
        out
    }

    fn delta(&mut self, d: Delta) -> Vec<Value> {
        let mut out = Vec::new();
        // Surfaces first: the run id and the actions a run's end names.
        for e in d.chunks.iter().filter(|e| e.message_id.is_none()) {
            let c = &e.chunk;
            let id = c.get("id").and_then(Value::as_str).unwrap_or("");
            match c.get("type").and_then(Value::as_str) {
                Some("data-runtime") => {
                    if let Some(r) = c.pointer("/data/runId").and_then(Value::as_str) {
                        self.run_id = Some(r.to_string());
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
                    out.push(json!({"type": "STATE_SNAPSHOT", "snapshot": c["data"]}))
                }
                _ => {}
            }
        }
        let ends_run = matches!(
            d.event_class.as_str(),
            "run.finished" | "run.canceled" | "run.failed"
        );
        if d.event_class == "run.started" {
            if self.run.is_some() {
                out.splice(0..0, self.close_all());
                let end = self.run_finished();
                out.insert(0, end);
            }
            let start = self.run_started();
            out.insert(0, start);
        }
        for e in d.chunks {
            let Some(mid) = e.message_id else { continue };
            out.extend(self.chunk(&mid, e.role, &e.chunk));
        }
        if !out.is_empty() && self.run.is_none() && !ends_run {
            let start = self.run_started();
            out.insert(0, start);
        }
        if ends_run && self.run.is_some() {
            out.extend(self.close_all());
            if d.event_class == "run.failed" {
                self.run = None;
                self.ended = true;
                let message = self.failure.take().unwrap_or_else(|| "run failed".into());
                out.push(json!({"type": "RUN_ERROR", "message": message}));
            } else {
                let mut end = self.run_finished();
                if d.event_class == "run.canceled" {
                    end["outcome"] = json!({"type": "cancelled"});
                }
                out.push(end);
            }
        }
        out
    }

    /// The events of one message chunk.
    fn chunk(&mut self, mid: &str, role: Option<Role>, c: &Value) -> Vec<Value> {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let mut out = Vec::new();
        match c.get("type").and_then(Value::as_str).unwrap_or("") {
            "text-start" => out.extend(self.open_text(mid, role)),
            "text-delta" => {
                out.extend(self.open_text(mid, role));
                let delta = s("delta");
                if !delta.is_empty() {
                    out.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta}));
                }
            }
            "reasoning-start" | "reasoning-delta" => {
                let rid = reasoning_id(mid, &s("id"));
                if self.reasoning.insert(rid.clone()) {
                    out.push(json!({"type": "REASONING_START", "messageId": rid}));
                    out.push(json!({"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"}));
                }
                let delta = s("delta");
                if !delta.is_empty() {
                    out.push(json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": delta}));
                }
            }
            "reasoning-end" => {
                let rid = reasoning_id(mid, &s("id"));
                if self.reasoning.remove(&rid) {
                    out.push(json!({"type": "REASONING_MESSAGE_END", "messageId": rid}));
                    out.push(json!({"type": "REASONING_END", "messageId": rid}));
                }
            }
            "tool-input-start" => out.extend(self.open_call(mid, &s("toolCallId"), &s("toolName"))),
            "tool-input-delta" => {
                let tc = s("toolCallId");
                out.extend(self.open_call(mid, &tc, ""));
                self.streamed.insert(tc.clone());
                out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": s("inputTextDelta")}));
            }
            "tool-input-available" => {
                let tc = s("toolCallId");
                out.extend(self.open_call(mid, &tc, &s("toolName")));
                if !self.streamed.remove(&tc) {
                    let args = c.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into());
                    out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": args}));
                }
                if self.calls.remove(&tc) {
                    out.push(json!({"type": "TOOL_CALL_END", "toolCallId": tc}));
                }
            }
            "tool-output-available" if c.get("preliminary") != Some(&Value::Bool(true)) => {
                out.push(tool_result(&s("toolCallId"), c.get("output").unwrap_or(&Value::Null)));
            }
            "tool-output-error" => {
                out.push(tool_result(&s("toolCallId"), &Value::String(s("errorText"))));
            }
            "tool-output-denied" => {
                out.push(tool_result(&s("toolCallId"), &Value::String("denied".into())));
            }
            "data-activity" => out.push(json!({"type": "ACTIVITY_SNAPSHOT", "messageId": s("id"),
                "activityType": c.pointer("/data/activityType").cloned().unwrap_or(json!("activity")),
                "content": c.pointer("/data/content").cloned().unwrap_or(json!({}))})),
            "error" => self.failure = Some(s("errorText")),
            // A text part's end, or its message's, ends the AG-UI text message.
            "text-end" | "finish" | "abort" if self.texts.remove(mid) => {
                out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": mid}));
            }
            _ => {}
        }
        out
    }

    fn open_text(&mut self, mid: &str, role: Option<Role>) -> Option<Value> {
        if !self.texts.insert(mid.to_string()) {
            return None;
        }
        let role = match role {
            Some(Role::User) => "user",
            Some(Role::System) => "system",
            _ => "assistant",
        };
        Some(json!({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": role}))
    }

    fn open_call(&mut self, mid: &str, tc: &str, name: &str) -> Option<Value> {
        if !name.is_empty() {
            self.names.insert(tc.to_string(), name.to_string());
        }
        if !self.calls.insert(tc.to_string()) {
            return None;
        }
        let name = self.names.get(tc).map_or(name, String::as_str);
        Some(
            json!({"type": "TOOL_CALL_START", "toolCallId": tc, "toolCallName": name,
                    "parentMessageId": mid}),
        )
    }
}
