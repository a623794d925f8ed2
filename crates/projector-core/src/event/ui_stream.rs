//! Reading a Vercel AI SDK UI message stream as facts: each
//! `UIMessageChunk` a producer's `toUIMessageStream()` writes becomes zero
//! or more Agent UI envelope events of the session, which then go through
//! the same normalisation, validation and redaction as any posted event.
//!
//! One stream is one assistant message of one run: `start` opens the run
//! (`runId` = `ui-<messageId>`, `turnId` = the message id), text and
//! reasoning deltas stream into parts named by their chunk ids, tools
//! stream their input, then their output (a preliminary output is
//! progress), sources are evidence, `file`, `data-*` and `message-metadata`
//! pass into the message as they are (`ui.chunk`), and `finish`, `abort`
//! or `error` end the run. Event ids are `<messageId>:<chunk index>`, so a producer that
//! sends the same stream again (after a cut) is deduplicated chunk by chunk.
//! A stream cut before its end is closed by [`UiStream::cut`] as an
//! interrupted run, so a UI sees the message end abnormally.

use serde_json::{json, Map, Value};

/// A chunk kind the projection does not take: kept out, and said in the
/// ingest reply's warnings.
pub const CHUNK_NOT_PROJECTED: &str = "ui_chunk_not_projected";
/// A line of the stream that is no `UIMessageChunk`.
pub const INVALID_CHUNK: &str = "invalid_ui_chunk";

/// What one chunk became.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapped {
    /// Envelope events to normalise and apply (maybe none: `text-start`,
    /// `start-step`, ...).
    Events(Vec<Value>),
    /// Not applied; a warning `(code, message)` for the reply.
    Warning(&'static str, String),
}

/// The state of one stream being read.
#[derive(Debug, Clone)]
pub struct UiStream {
    message_id: String,
    /// The producer's key of this stream (its `idempotency-key`): the same
    /// key and chunk index is the same event, so a stream sent again is
    /// deduplicated. Without one, each stream is new (a continuation of a
    /// message is a new stream with the same message id).
    key: Option<String>,
    nonce: String,
    /// The approval id asked for each tool call (`tool-approval-request`).
    approvals: Vec<(String, String)>,
    index: u64,
    started: bool,
    ended: bool,
    /// The try of the message this stream writes: a `start` after an
    /// `abort` or `error` is the producer trying again (see
    /// `projection::attempts`); every event names its try.
    attempt: u32,
    /// The end an `abort` or `error` made, held until the next chunk (a
    /// `start` makes it a new try instead) or the body's end.
    held_end: Option<Value>,
}

impl UiStream {
    /// A stream whose message id is `fallback` until its `start` names one.
    pub fn new(fallback: impl Into<String>, key: Option<String>) -> Self {
        UiStream {
            message_id: fallback.into(),
            key: key.filter(|k| !k.is_empty()),
            nonce: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            approvals: Vec::new(),
            index: 0,
            started: false,
            ended: false,
            attempt: 1,
            held_end: None,
        }
    }

    /// Approvals asked before this stream (`(toolCallId, approval id)`),
    /// which its tool outputs or denials answer.
    pub fn expect_approvals(&mut self, approvals: Vec<(String, String)>) {
        self.approvals.extend(approvals);
    }

    /// True once `finish`, `abort` or `error` ended the run.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The message the stream writes.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// What the ids of this stream's events start with: the producer's
    /// key, else the message id and a nonce of this stream.
    fn id_prefix(&self) -> String {
        match &self.key {
            Some(k) => format!("ui:{k}"),
            None => format!("{}:{}", self.message_id, self.nonce),
        }
    }

    /// An envelope event of this stream's run and message.
    fn event(&self, ty: &str, extra: Value) -> Value {
        let mut e = json!({
            "id": format!("{}:{}", self.id_prefix(), self.index),
            "type": ty,
            "runId": format!("ui-{}", self.message_id),
            "turnId": self.message_id,
            "messageId": self.message_id,
            "stepId": "ui",
            "attemptId": self.attempt.to_string(),
        });
        add_present(&mut e, extra);
        e
    }

    /// The events of one chunk (`data:` JSON of the stream).
    pub fn map(&mut self, chunk: &Value) -> Mapped {
        let retry = chunk.get("type").and_then(Value::as_str) == Some("start")
            && chunk
                .get("messageId")
                .and_then(Value::as_str)
                .is_none_or(|m| m.is_empty() || m == self.message_id);
        let out = match self.held_end.take() {
            // The producer tries the message again: the end it held is
            // dropped, and what follows is the next try.
            Some(_) if retry => {
                self.ended = false;
                self.attempt += 1;
                Mapped::Events(Vec::new())
            }
            Some(end) => match self.map_inner(chunk) {
                Mapped::Events(mut es) => {
                    es.insert(0, end);
                    Mapped::Events(es)
                }
                w => {
                    self.held_end = Some(end);
                    w
                }
            },
            None => self.map_inner(chunk),
        };
        self.index += 1;
        out
    }

    /// The end an `abort` or `error` made, if no `start` came after it:
    /// taken at the body's end.
    pub fn flush(&mut self) -> Option<Value> {
        self.held_end.take()
    }

    fn map_inner(&mut self, chunk: &Value) -> Mapped {
        let Some(ty) = chunk.get("type").and_then(Value::as_str) else {
            return Mapped::Warning(INVALID_CHUNK, "a stream line without a chunk `type`".into());
        };
        let s = |k: &str| chunk.get(k).and_then(Value::as_str);
        let v = |k: &str| chunk.get(k).cloned();
        let one = |e: Value| Mapped::Events(vec![e]);
        let none = Mapped::Events(Vec::new());
        if ty != "start" && !self.started {
            // A stream that did not begin with `start` still opens its run.
            self.started = true;
            let opened = self.event("run.started", json!({}));
            let rest = self.map_inner(chunk);
            return match rest {
                Mapped::Events(mut es) => {
                    // Both come from this chunk: the run opens at `<id>:<n>.0`.
                    let mut first = opened;
                    first["id"] = format!("{}:{}.0", self.id_prefix(), self.index).into();
                    es.insert(0, first);
                    Mapped::Events(es)
                }
                w => w,
            };
        }
        match ty {
            "start" => {
                if let Some(id) = s("messageId").filter(|m| !m.is_empty()) {
                    if !self.started {
                        self.message_id = id.to_string();
                    }
                }
                if self.started {
                    return none;
                }
                self.started = true;
                // The run opens, and so does the message (with its metadata).
                let mut start = json!({"type": "start"});
                if let Some(md) = v("messageMetadata").filter(|m| !m.is_null()) {
                    start["messageMetadata"] = md;
                }
                Mapped::Events(vec![
                    self.event("run.started", json!({})),
                    self.passthrough(start, "m"),
                ])
            }
            "text-delta" => one(self.event(
                "text.delta",
                json!({"partId": s("id").unwrap_or_default(), "payload": {"delta": s("delta").unwrap_or_default()}}),
            )),
            // The producer shows these to its users: not raw reasoning to hide.
            "reasoning-delta" => one(self.event(
                "reasoning.delta",
                json!({"partId": s("id").unwrap_or_default(),
                       "payload": {"delta": s("delta").unwrap_or_default(), "visibility": "shown"}}),
            )),
            "text-start" | "text-end" | "reasoning-start" | "reasoning-end" | "start-step"
            | "finish-step" => none,
            "tool-input-start" => one(self.event(
                "tool.args.delta",
                json!({"toolCallId": s("toolCallId"), "title": s("title"),
                       "payload": {"toolName": s("toolName"), "delta": ""}}),
            )),
            "tool-input-delta" => one(self.event(
                "tool.args.delta",
                json!({"toolCallId": s("toolCallId"),
                       "payload": {"delta": s("inputTextDelta").unwrap_or_default()}}),
            )),
            "tool-input-available" => one(self.event(
                "tool.started",
                json!({"toolCallId": s("toolCallId"), "title": s("title"),
                       "payload": {"toolName": s("toolName"), "input": v("input")}}),
            )),
            "tool-input-error" => one(self.event(
                "tool.failed",
                json!({"toolCallId": s("toolCallId"),
                       "payload": {"toolName": s("toolName"), "error": s("errorText"),
                                   "failureCategory": "invalid_input"}}),
            )),
            "tool-output-available" => {
                let preliminary = chunk.get("preliminary").and_then(Value::as_bool) == Some(true);
                let approved = self.answered_approval(s("toolCallId"));
                let (class, key) = if preliminary {
                    ("tool.progress", "preview")
                } else {
                    ("tool.result", "output")
                };
                let mut payload = Map::new();
                payload.insert(key.into(), v("output").unwrap_or(Value::Null));
                payload.insert("verbatim".into(), Value::Bool(true));
                let out = self.event(class, json!({"toolCallId": s("toolCallId"), "payload": payload}));
                // A call that was waiting for approval and now runs was approved.
                match approved {
                    Some(aid) if !preliminary => {
                        let mut resolved = self.event(
                            "action.resolved",
                            json!({"actionId": aid, "payload": {"decision": "approved"}}),
                        );
                        resolved["id"] = format!("{}:{}.a", self.id_prefix(), self.index).into();
                        Mapped::Events(vec![resolved, out])
                    }
                    _ => one(out),
                }
            }
            "tool-output-error" => one(self.event(
                "tool.failed",
                json!({"toolCallId": s("toolCallId"), "payload": {"error": s("errorText")}}),
            )),
            // An approval the producer asks for is the session's action; the
            // producer's own answer to it resolves it.
            "tool-approval-request" => {
                let (aid, tcid) = (s("approvalId").unwrap_or_default(), s("toolCallId").unwrap_or_default());
                self.approvals.push((tcid.to_string(), aid.to_string()));
                one(self.event(
                    "action.required",
                    json!({"actionId": aid, "toolCallId": tcid,
                           "payload": {"actionType": "tool_approval", "question": s("reason")}}),
                ))
            }
            "tool-approval-response" => {
                let approved = chunk.get("approved").and_then(Value::as_bool) == Some(true);
                let aid = s("approvalId").unwrap_or_default();
                self.approvals.retain(|(_, a)| a != aid);
                one(self.event(
                    "action.resolved",
                    json!({"actionId": s("approvalId"),
                           "payload": {"decision": if approved { "approved" } else { "denied" },
                                       "reason": s("reason")}}),
                ))
            }
            "tool-output-denied" => {
                let tcid = s("toolCallId").unwrap_or_default();
                match self.answered_approval(Some(tcid)) {
                    Some(aid) => one(self.event(
                        "action.resolved",
                        json!({"actionId": aid, "toolCallId": tcid, "payload": {"decision": "denied"}}),
                    )),
                    None => one(self.event(
                        "tool.failed",
                        json!({"toolCallId": tcid,
                               "payload": {"error": "denied", "failureCategory": "denied"}}),
                    )),
                }
            }
            "source-url" => one(self.event(
                "evidence.changed",
                json!({"evidenceId": s("sourceId"), "payload": {"url": s("url"), "title": s("title")}}),
            )),
            "source-document" => one(self.event(
                "evidence.changed",
                json!({"evidenceId": s("sourceId"),
                       "payload": {"title": s("title"), "mediaType": s("mediaType"),
                                   "filename": s("filename")}}),
            )),
            "error" => self.hold_end(
                "run.failed",
                json!({"payload": {"error": s("errorText").unwrap_or("the stream failed")}}),
            ),
            "abort" => self.hold_end(
                "run.canceled",
                json!({"payload": {"reason": s("reason").unwrap_or("aborted")}}),
            ),
            "finish" => {
                let mut es = Vec::new();
                if let Some(md) = v("messageMetadata").filter(|m| !m.is_null()) {
                    es.push(self.passthrough(json!({"type": "message-metadata", "messageMetadata": md}), "m"));
                }
                if let Mapped::Events(end) =
                    self.end("run.finished", json!({"payload": {"finishReason": s("finishReason")}}))
                {
                    es.extend(end);
                }
                Mapped::Events(es)
            }
            "file" | "message-metadata" => one(self.passthrough(chunk.clone(), "")),
            t if t.starts_with("data-") => one(self.passthrough(chunk.clone(), "")),
            other => Mapped::Warning(
                CHUNK_NOT_PROJECTED,
                format!("`{other}` chunks are not projected yet; kept out of the session"),
            ),
        }
    }

    /// A chunk that passes into the message as it is (`ui.chunk`); `suffix`
    /// tells apart two events of one chunk.
    fn passthrough(&self, chunk: Value, suffix: &str) -> Value {
        let mut e = self.event("ui.chunk", json!({"payload": {"chunk": chunk}}));
        if !suffix.is_empty() {
            e["id"] = format!("{}:{}.{suffix}", self.id_prefix(), self.index).into();
        }
        e
    }

    /// The approval asked for `tool_call_id` and not yet answered, taken.
    fn answered_approval(&mut self, tool_call_id: Option<&str>) -> Option<String> {
        let t = tool_call_id?;
        let i = self.approvals.iter().position(|(tc, _)| tc == t)?;
        Some(self.approvals.remove(i).1)
    }

    /// The end of an `abort` or `error`, held (see `held_end`).
    fn hold_end(&mut self, class: &str, extra: Value) -> Mapped {
        if let Mapped::Events(mut es) = self.end(class, extra) {
            self.held_end = es.pop();
        }
        Mapped::Events(Vec::new())
    }

    /// The event that ends the run, once.
    fn end(&mut self, class: &str, extra: Value) -> Mapped {
        if self.ended {
            return Mapped::Events(Vec::new());
        }
        self.ended = true;
        Mapped::Events(vec![self.event(class, extra)])
    }

    /// The stream was cancelled (a user's `cancel`): the run ends as
    /// cancelled, and the message with an `abort`. None when it had ended.
    pub fn cancel(&mut self) -> Option<Value> {
        if self.ended || !self.started {
            return None;
        }
        self.ended = true;
        let mut e = self.event(
            "run.canceled",
            json!({"payload": {"reason": "cancelled by the user"}}),
        );
        e["id"] = format!("{}:cancel", self.id_prefix()).into();
        Some(e)
    }

    /// The stream stopped before `finish`, `abort` or `error` (the body was
    /// cut, or ended early): the run ends as interrupted, so the message
    /// ends with an `abort` a UI shows. None when the run had ended.
    pub fn cut(&mut self, why: &str) -> Option<Value> {
        if self.ended || !self.started {
            return None;
        }
        self.ended = true;
        let mut e = self.event(
            "run.finished",
            json!({"payload": {"outcome": "interrupted", "reason": why}}),
        );
        e["id"] = format!("{}:cut", self.id_prefix()).into();
        Some(e)
    }
}

/// Add `extra`'s fields to the envelope event `e`, leaving out the absent
/// ones (null) at the top and in `payload`: an absent field is never sent
/// as null.
pub(crate) fn add_present(e: &mut Value, extra: Value) {
    if let (Value::Object(a), Value::Object(b)) = (e, extra) {
        a.extend(b.into_iter().filter(|(_, v)| !v.is_null()));
        if let Some(Value::Object(p)) = a.get_mut("payload") {
            p.retain(|_, v| !v.is_null());
        }
    }
}

/// The `data:` payloads of the complete SSE events at the start of `buf`,
/// removed from it; `[DONE]` is returned as it is. A partial event stays.
pub fn take_events(buf: &mut Vec<u8>) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let Some((end, sep)) = find_blank_line(buf) else {
            return out;
        };
        let block: Vec<u8> = buf.drain(..end + sep).collect();
        let text = String::from_utf8_lossy(&block[..end]);
        let mut data = String::new();
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        if !data.is_empty() {
            out.push(data);
        }
    }
}

/// Where the first blank line (`\n\n` or `\r\n\r\n`) ends an event: the
/// event's length and the separator's.
fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            return Some((i, 2));
        }
        if buf[i..].starts_with(b"\r\n\r\n") {
            return Some((i, 4));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(m: Mapped) -> Vec<Value> {
        match m {
            Mapped::Events(e) => e,
            Mapped::Warning(c, w) => panic!("warning {c}: {w}"),
        }
    }

    #[test]
    fn a_start_after_an_abort_is_a_new_try_and_an_abort_alone_ends_at_the_body_end() {
        let mut s = UiStream::new("fallback", None);
        events(s.map(&json!({"type": "start", "messageId": "m1"})));
        let first = events(s.map(&json!({"type": "text-delta", "id": "t", "delta": "a"})));
        assert_eq!(
            (first[0]["stepId"].as_str(), first[0]["attemptId"].as_str()),
            (Some("ui"), Some("1"))
        );
        // The abort's end is held: nothing yet.
        assert!(events(s.map(&json!({"type": "abort"}))).is_empty());
        // The same message again: a new try, the held end dropped.
        assert!(events(s.map(&json!({"type": "start", "messageId": "m1"}))).is_empty());
        let second = events(s.map(&json!({"type": "text-delta", "id": "t2", "delta": "b"})));
        assert_eq!(second[0]["attemptId"], "2");
        assert_eq!(s.flush(), None);
        let end = events(s.map(&json!({"type": "finish"})));
        assert_eq!(end.last().unwrap()["type"], "run.finished");
        // An abort with nothing after it ends the run at the body's end.
        let mut s = UiStream::new("fallback", None);
        events(s.map(&json!({"type": "start", "messageId": "m2"})));
        assert!(events(s.map(&json!({"type": "error", "errorText": "boom"}))).is_empty());
        assert_eq!(s.flush().unwrap()["type"], "run.failed");
        assert!(s.ended());
        // A chunk of another kind after it: the end first, then the chunk.
        let mut s = UiStream::new("fallback", None);
        events(s.map(&json!({"type": "start", "messageId": "m3"})));
        events(s.map(&json!({"type": "abort"})));
        let e = events(s.map(&json!({"type": "data-x", "data": 1})));
        assert_eq!(e[0]["type"], "run.canceled");
    }

    #[test]
    fn a_stream_becomes_the_facts_of_one_run_with_stable_ids() {
        let mut s = UiStream::new("fallback", None);
        let e = events(s.map(&json!({"type": "start", "messageId": "m1"})));
        assert_eq!(e[0]["type"], "run.started");
        let prefix = e[0]["id"]
            .as_str()
            .unwrap()
            .strip_suffix(":0")
            .unwrap()
            .to_string();
        assert!(
            prefix.starts_with("m1:"),
            "without a key: the message id and a nonce: {prefix}"
        );
        assert_eq!(e[0]["runId"], "ui-m1");
        assert!(events(s.map(&json!({"type": "text-start", "id": "t"}))).is_empty());
        let e = events(s.map(&json!({"type": "text-delta", "id": "t", "delta": "Hi"})));
        assert_eq!(
            (e[0]["type"].as_str(), e[0]["partId"].as_str()),
            (Some("text.delta"), Some("t"))
        );
        assert_eq!(e[0]["id"], format!("{prefix}:2"));
        let e = events(s.map(&json!({"type": "tool-output-available", "toolCallId": "c", "output": 1, "preliminary": true})));
        assert_eq!(e[0]["type"], "tool.progress");
        let e = events(s.map(&json!({"type": "finish"})));
        assert_eq!(e[0]["type"], "run.finished");
        assert!(s.ended());
        assert_eq!(s.cut("late"), None, "an ended run is not cut");
    }

    #[test]
    fn a_cut_stream_ends_interrupted_and_unknown_chunks_are_said() {
        let mut s = UiStream::new("m9", Some("k9".into()));
        let e = events(s.map(&json!({"type": "text-delta", "id": "t", "delta": "x"})));
        assert_eq!(
            e[0]["type"], "run.started",
            "a stream without start still opens its run"
        );
        assert_eq!(e[1]["type"], "text.delta");
        let e = events(s.map(&json!({"type": "data-weather", "data": {}})));
        assert_eq!(e[0]["type"], "ui.chunk", "a data part passes as it is");
        assert_eq!(e[0]["payload"]["chunk"]["type"], "data-weather");
        assert!(matches!(
            s.map(&json!({"type": "tool-input-end", "toolCallId": "c"})),
            Mapped::Warning(CHUNK_NOT_PROJECTED, _)
        ));
        assert!(matches!(
            s.map(&json!({"delta": "x"})),
            Mapped::Warning(INVALID_CHUNK, _)
        ));
        let cut = s.cut("the body was cut").unwrap();
        assert_eq!(cut["payload"]["outcome"], "interrupted");
        assert_eq!(cut["id"], "ui:k9:cut", "with the producer's key");
    }

    #[test]
    fn sse_events_are_taken_whole_across_reads() {
        let mut buf = b"data: {\"type\":\"start\"}\n\ndata: {\"type\":".to_vec();
        assert_eq!(take_events(&mut buf), [r#"{"type":"start"}"#]);
        buf.extend_from_slice(b"\"finish\"}\r\n\r\n: comment\n\ndata: [DONE]\n\n");
        assert_eq!(take_events(&mut buf), [r#"{"type":"finish"}"#, "[DONE]"]);
        assert!(buf.is_empty());
    }
}
