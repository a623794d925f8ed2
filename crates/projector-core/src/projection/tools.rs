//! Tool calls: the `tools` surface and the AI SDK tool parts of messages
//! (`tool.*`, and `patch.*` / `command.*` / `test.*` facts with a
//! `toolCallId`, which are tool-like). Outputs reach messages only as a small
//! summary plus refs; progress and output streams stay on the surface.

use std::sync::Arc;

use serde_json::{json, Value};

use super::chunk::Chunk;
use super::public_state::{Severity, ToolEntry};
use super::reducer::{push_unique, truncate, Reducer};
use super::ui_message::{Part, ToolState};
use crate::compact_json;

/// A summary is inlined in a tool output only up to this JSON size.
pub const MAX_INLINE_SUMMARY: usize = 2_000;

/// How a tool-like fact ends.
pub enum ToolEnd {
    Output(Value),
    Error(String),
}

impl<'a> Reducer<'a> {
    /// The tool kind of a class family.
    fn tool_kind(&self) -> &'static str {
        match self.fact.family() {
            "patch" => "patch",
            "command" => "command",
            "test" => "test",
            _ => "tool",
        }
    }

    fn tool_name(&self) -> String {
        let named = if self.tool_kind() == "tool" {
            self.first_str(&["toolName", "name", "tool"])
        } else {
            self.first_str(&["toolName"])
        };
        named.unwrap_or_else(|| match self.tool_kind() {
            "tool" => "unknown".to_string(),
            k => k.to_string(),
        })
    }

    fn tool_input(&self) -> Value {
        if let Some(v) = self.first_value(&["input", "args", "arguments"]) {
            return v;
        }
        if self.tool_kind() != "tool" {
            let p = Value::Object(self.fact.payload.clone());
            if !self.fact.payload.is_empty()
                && compact_json::to_string(&p).len() <= MAX_INLINE_SUMMARY
            {
                return p;
            }
        }
        Value::Null
    }

    /// Where a tool's part lives: `(message id, part state)` if still there.
    pub(super) fn tool_part(&self, tcid: &str) -> Option<(String, ToolState)> {
        let msg = self.state.tools.get(tcid)?.message_id.clone()?;
        let m = self.msg(&msg)?;
        let i = m.tool_index(tcid)?;
        match &m.parts[i] {
            Part::Tool { state, .. } => Some((msg, *state)),
            _ => None,
        }
    }

    /// Create the surface entry of a tool call.
    fn new_tool_entry(&mut self, tcid: &str, name: String) {
        let e = ToolEntry {
            tool_call_id: tcid.to_string(),
            tool_name: name,
            status: "running".into(),
            message_id: None,
            title: self.title(),
            input_summary: None,
            progress: None,
            output_refs: Vec::new(),
            error_text: None,
            failure_category: None,
            started_cursor: self.cursor,
            updated_cursor: self.cursor,
            kind: Some(self.tool_kind().to_string()),
            exit_code: None,
        };
        self.state.tools.insert(tcid.to_string(), e);
    }

    /// Add a new tool part to the fact's assistant message.
    fn open_tool_part(&mut self, tcid: &str, input: Arc<Value>) {
        let msg = self.ensure_assistant();
        let name = self.state.tools[tcid].tool_name.clone();
        let title = self.title();
        let start = Chunk::ToolInputStart {
            tool_call_id: tcid.to_string(),
            tool_name: name.clone(),
            title: title.clone(),
        };
        if self.insert_part(&msg, start) {
            let avail = Chunk::ToolInputAvailable {
                tool_call_id: tcid.to_string(),
                tool_name: name,
                input,
                title,
            };
            self.emit(&msg, avail);
            if let Some(e) = self.state.tools.get_mut(tcid) {
                e.message_id = Some(msg.to_string());
            }
        }
    }

    fn summarise_input(e: &mut ToolEntry, input: &Value) {
        if !input.is_null() {
            e.input_summary = Some(truncate(&compact_json::to_string(input), 200));
        }
    }

    /// `tool.started` (and `patch|command|test.started`).
    pub fn on_tool_started(&mut self, tcid: &str) {
        let input = Arc::new(self.tool_input());
        let part = self.tool_part(tcid);
        match self.state.tools.get(tcid).map(|e| e.status.clone()) {
            None => {
                self.new_tool_entry(tcid, self.tool_name());
                self.open_tool_part(tcid, input.clone());
            }
            Some(status) => {
                let streaming = matches!(part, Some((_, ToolState::InputStreaming)));
                if status == "running" && !streaming {
                    self.finding(
                        "tool_restarted",
                        format!("tool call {tcid} started again while active"),
                    );
                    return;
                }
                // Input finished streaming, or a finished call runs again:
                // the same part goes back to input-available.
                match part {
                    Some((msg, _)) => {
                        let name = self.state.tools[tcid].tool_name.clone();
                        let c = Chunk::ToolInputAvailable {
                            tool_call_id: tcid.to_string(),
                            tool_name: name,
                            input: input.clone(),
                            title: self.title(),
                        };
                        self.emit(&msg, c);
                    }
                    None => self.open_tool_part(tcid, input.clone()),
                }
            }
        }
        let (cursor, title) = (self.cursor, self.title());
        if let Some(e) = self.state.tools.get_mut(tcid) {
            e.status = "running".into();
            e.error_text = None;
            e.failure_category = None;
            e.exit_code = None;
            e.updated_cursor = cursor;
            if title.is_some() {
                e.title = title;
            }
            Self::summarise_input(e, &input);
        }
        self.touch("tools", tcid);
    }

    /// `tool.args.delta`: streams input only while the part is still
    /// input-streaming (the AI SDK would otherwise regress its state).
    pub fn on_tool_args_delta(&mut self, tcid: &str) {
        let Some(delta) = self.first_text(&["delta", "inputTextDelta"]) else {
            return;
        };
        if !self.state.tools.contains_key(tcid) {
            self.new_tool_entry(tcid, self.tool_name());
            let msg = self.ensure_assistant();
            let name = self.state.tools[tcid].tool_name.clone();
            let start = Chunk::ToolInputStart {
                tool_call_id: tcid.to_string(),
                tool_name: name,
                title: self.title(),
            };
            if self.insert_part(&msg, start) {
                self.state.tools[tcid].message_id = Some(msg.to_string());
            }
        }
        if let Some((msg, ToolState::InputStreaming)) = self.tool_part(tcid) {
            let c = Chunk::ToolInputDelta {
                tool_call_id: tcid.to_string(),
                input_text_delta: delta,
            };
            self.emit(&msg, c);
        }
        self.state.tools[tcid].updated_cursor = self.cursor;
        self.touch("tools", tcid);
    }

    /// `tool.args`: the complete input.
    pub fn on_tool_args(&mut self, tcid: &str) {
        let input = Arc::new(self.tool_input());
        if !self.state.tools.contains_key(tcid) {
            self.new_tool_entry(tcid, self.tool_name());
            self.open_tool_part(tcid, input.clone());
        } else if let Some((msg, state)) = self.tool_part(tcid) {
            if matches!(state, ToolState::InputStreaming | ToolState::InputAvailable) {
                let c = Chunk::ToolInputAvailable {
                    tool_call_id: tcid.to_string(),
                    tool_name: self.state.tools[tcid].tool_name.clone(),
                    input: input.clone(),
                    title: self.title(),
                };
                self.emit(&msg, c);
            }
        }
        let cursor = self.cursor;
        let e = &mut self.state.tools[tcid];
        Self::summarise_input(e, &input);
        e.updated_cursor = cursor;
        self.touch("tools", tcid);
    }

    /// `tool.progress | tool.output.delta | tool.changed | command.output`:
    /// the tools surface, and the tool part as a preliminary output (the AI
    /// SDK's `tool-output-available` with `preliminary: true`: progress, a
    /// preview, refs) while the call runs; the final output replaces it.
    pub fn on_tool_progress(&mut self, tcid: &str) {
        if !self.state.tools.contains_key(tcid) {
            self.new_tool_entry(tcid, self.tool_name());
        }
        let progress = self.first_value(&["progress", "percent"]).or_else(|| {
            self.first_str(&["message", "summary"])
                .map(|s| json!(truncate(&s, 500)))
        });
        let refs = self.refs();
        let (cursor, title) = (self.cursor, self.title());
        let e = &mut self.state.tools[tcid];
        if progress.is_some() {
            e.progress = progress;
        }
        if self.fact.class == "tool.changed" && title.is_some() {
            e.title = title;
        }
        for r in &refs {
            push_unique(&mut e.output_refs, r);
        }
        e.updated_cursor = cursor;
        let running = e.status == "running";
        let (progress, output_refs) = (e.progress.clone(), e.output_refs.clone());
        self.touch("tools", tcid);
        if !running || self.fact.class == "tool.changed" {
            return;
        }
        let preview = self
            .first_value(&["preview", "partialOutput", "outputPreview", "delta"])
            .filter(|v| self.verbatim() || compact_json::to_string(v).len() <= MAX_INLINE_SUMMARY);
        if progress.is_none() && preview.is_none() && output_refs.is_empty() {
            return;
        }
        if let Some((msg, state)) = self.tool_part(tcid) {
            if matches!(
                state,
                ToolState::InputAvailable | ToolState::OutputAvailable
            ) {
                let output = match (self.verbatim(), preview) {
                    (true, Some(p)) => p,
                    (_, preview) => {
                        let mut out = serde_json::Map::new();
                        for (k, v) in [("progress", progress), ("preview", preview)] {
                            if let Some(v) = v {
                                out.insert(k.into(), v);
                            }
                        }
                        out.insert("refs".into(), json!(output_refs));
                        Value::Object(out)
                    }
                };
                self.emit(
                    &msg,
                    Chunk::ToolOutputAvailable {
                        tool_call_id: tcid.to_string(),
                        output: Arc::new(output),
                        preliminary: true,
                    },
                );
            }
        }
    }

    /// `tool.result | tool.failed` and the tool-like ends of coding classes.
    pub fn on_tool_end(&mut self, tcid: &str, end: ToolEnd) {
        let finished = self.state.tools.get(tcid).is_some_and(|t| {
            matches!(
                t.status.as_str(),
                "completed" | "failed" | "cancelled" | "denied"
            )
        });
        if finished {
            self.finding(
                "repeated_terminal_event",
                format!(
                    "{} repeats the end of tool call {tcid}; ignored (the first end stands)",
                    self.fact.class
                ),
            );
            return;
        }
        let known = self.state.tools.contains_key(tcid);
        if !known {
            self.finding(
                "tool_result_without_start",
                format!(
                    "{} for tool call {tcid} that never started",
                    self.fact.class
                ),
            );
            self.new_tool_entry(tcid, self.tool_name());
        }
        let msg = match self.tool_part(tcid) {
            Some((msg, _)) => msg,
            None => {
                self.open_tool_part(tcid, Arc::new(Value::Null));
                match self.tool_part(tcid) {
                    Some((msg, _)) => msg,
                    None => String::new(),
                }
            }
        };
        let refs = self.refs();
        let (cursor, failure) = (self.cursor, self.first_str(&["failureCategory"]));
        let exit = self.payload_int("exitCode");
        let tool_call_id = tcid.to_string();
        let (chunk, error) = match end {
            ToolEnd::Output(o) => (
                Chunk::ToolOutputAvailable {
                    tool_call_id,
                    output: Arc::new(o),
                    preliminary: false,
                },
                None,
            ),
            ToolEnd::Error(t) => (
                Chunk::ToolOutputError {
                    tool_call_id,
                    error_text: t.clone(),
                },
                Some(t),
            ),
        };
        if !msg.is_empty() {
            self.emit(&msg, chunk);
        }
        let e = &mut self.state.tools[tcid];
        e.updated_cursor = cursor;
        for r in &refs {
            push_unique(&mut e.output_refs, r);
        }
        if exit.is_some() {
            e.exit_code = exit;
        }
        match error {
            None => {
                e.status = "completed".into();
                e.error_text = None;
            }
            Some(t) => {
                let cancelled = failure.as_deref().is_some_and(|c| c.contains("cancel"));
                e.status = if cancelled { "cancelled" } else { "failed" }.into();
                e.error_text = Some(truncate(&t, 500));
                e.failure_category = failure;
            }
        }
        self.touch("tools", tcid);
    }

    /// Whether the fact's output is the AI SDK part's output as its producer
    /// sent it (`payload.verbatim: true`, set for UI message stream ingest):
    /// the tool part shows it as it is, not as summary plus refs.
    fn verbatim(&self) -> bool {
        self.fact.payload_get("verbatim").and_then(Value::as_bool) == Some(true)
    }

    /// The output of a successful tool: small summary plus refs, or the
    /// producer's own output when it is verbatim.
    pub fn tool_output(&self, extra: Value) -> Value {
        if self.verbatim() {
            return self
                .fact
                .payload
                .get("output")
                .cloned()
                .unwrap_or(Value::Null);
        }
        let mut out = serde_json::Map::new();
        if let Some(s) = self.first_value(&["summary", "output"]) {
            if s.to_string().len() <= MAX_INLINE_SUMMARY {
                out.insert("summary".into(), s);
            }
        }
        if let Value::Object(x) = extra {
            for (k, v) in x {
                if !v.is_null() {
                    out.insert(k, v);
                }
            }
        }
        out.insert("refs".into(), json!(self.refs()));
        Value::Object(out)
    }

    /// The error text of a failed tool.
    pub fn tool_error_text(&self) -> String {
        self.first_str(&["error", "message", "errorText", "failureCategory"])
            .or_else(|| self.title())
            .unwrap_or_else(|| "tool failed".into())
    }

    /// `tool.*` dispatch.
    pub fn on_tool(&mut self) {
        let Some(tcid) = self.tool_call_id() else {
            self.diag(
                "missing_scope_id",
                Severity::Warning,
                format!("{} without toolCallId; not projected", self.fact.class),
            );
            return;
        };
        match self.fact.class.as_str() {
            "tool.started" => self.on_tool_started(&tcid),
            "tool.args.delta" => self.on_tool_args_delta(&tcid),
            "tool.args" => self.on_tool_args(&tcid),
            "tool.result" => {
                let out = self.tool_output(Value::Null);
                self.on_tool_end(&tcid, ToolEnd::Output(out));
            }
            "tool.failed" => {
                let text = self.tool_error_text();
                self.diag(
                    "tool.failed",
                    Severity::Warning,
                    format!("tool call {tcid} failed: {text}"),
                );
                self.on_tool_end(&tcid, ToolEnd::Error(text));
            }
            _ => self.on_tool_progress(&tcid),
        }
    }
}
