//! Messages: which message a fact belongs to, message creation, text and
//! reasoning streaming with segmentation (seed 003), final-text and summary
//! reconciliation (seed 000), user input, and data parts inserted into a
//! message. Every part change goes through `Reducer::emit` (`Message::apply`).

use std::sync::Arc;

use serde_json::json;

use super::chunk::Chunk;
use super::public_state::Severity;
use super::reducer::{nonempty, Reducer};
use super::ui_message::{generated_part_id, Message, MessageStatus, Part, Role};

/// Whether an open part is text or reasoning.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Text,
    Reasoning,
}

impl<'a> Reducer<'a> {
    pub fn msg(&self, id: &str) -> Option<&Message> {
        self.state.messages.iter().rev().find(|m| *m.id == *id)
    }

    /// `ids.messageId | payload.messageId`.
    pub fn explicit_message_id(&self) -> Option<String> {
        nonempty(self.fact.ids.message_id.as_deref()).or_else(|| self.first_str(&["messageId"]))
    }

    /// `agent \u{1f} turn`, computed once per fact (into a kept buffer).
    fn message_key(&self) -> &str {
        self.key.get_or_init(|| {
            let agent = self.agent_str().unwrap_or_default();
            let turn = self.turn_str().unwrap_or_default();
            let mut key = super::reducer::key_buffer();
            key.push_str(agent);
            key.push('\u{1f}');
            key.push_str(turn);
            key
        })
    }

    /// The open assistant message of this fact's agent and turn, if any.
    pub fn open_assistant(&self) -> Option<Arc<str>> {
        match self.explicit_message_id() {
            Some(id) => self.streaming(&id),
            None => self.current_open(),
        }
    }

    /// The agent and turn's current message, if open (no message named).
    fn current_open(&self) -> Option<Arc<str>> {
        self.streaming(self.books.current.get(self.message_key())?)
    }

    fn streaming(&self, id: &str) -> Option<Arc<str>> {
        let m = self.msg(id)?;
        (m.status == MessageStatus::Streaming).then(|| m.id.clone())
    }

    /// True when the fact belongs to an assistant message context: it names
    /// a message, turn or run, or its agent/turn has an open message.
    pub fn has_message_context(&self) -> bool {
        self.explicit_message_id().is_some()
            || self.turn_str().is_some()
            || self.open_assistant().is_some()
    }

    /// The assistant message this fact belongs to, created if needed.
    /// Its id is the message's own (shared, not copied).
    pub fn ensure_assistant(&mut self) -> Arc<str> {
        let explicit = self.explicit_message_id();
        if explicit.is_none() {
            if let Some(id) = self.current_open() {
                return id;
            }
        }
        let id = explicit.unwrap_or_else(|| self.fresh_message_id(format!("msg-{}", self.cursor)));
        if self.msg(&id).is_none() {
            self.create_message(&id, Role::Assistant);
        }
        let key = self.message_key().to_string();
        self.books.current.insert(key, id.clone());
        self.msg(&id)
            .map_or_else(|| Arc::from(id.as_str()), |m| m.id.clone())
    }

    pub fn fresh_message_id(&self, base: String) -> String {
        let mut id = base.clone();
        let mut n = 1;
        while self.msg(&id).is_some() {
            n += 1;
            id = format!("{base}-{n}");
        }
        id
    }

    /// Push a new message and emit its `start` chunk: an assistant's is
    /// the fact's agent's, and it belongs to the fact's turn and run.
    pub fn create_message(&mut self, id: &str, role: Role) {
        let agent = (role == Role::Assistant).then(|| self.agent()).flatten();
        let turn = nonempty(self.fact.ids.turn_id.as_deref());
        self.create_message_of(id, role, agent, turn);
    }

    /// Push a new message of `agent` in `turn` (the fact's run) and emit
    /// its `start` chunk, whose entry names them.
    pub fn create_message_of(
        &mut self,
        id: &str,
        role: Role,
        agent: Option<String>,
        turn: Option<String>,
    ) {
        let mut m = Message::new(id, role, self.cursor);
        m.agent_id = agent;
        m.turn_id = turn;
        m.run_id = nonempty(self.fact.ids.run_id.as_deref());
        self.state.messages.push(m);
        let metadata = self.opening_metadata(role);
        self.emit(
            id,
            Chunk::Start {
                message_id: id.to_string(),
                message_metadata: metadata,
            },
        );
    }

    /// The open text or reasoning part of a message: `(chunk id, index)`.
    pub fn open_part(&self, msg: &str, kind: Stream) -> Option<(String, usize)> {
        let m = self.msg(msg)?;
        m.open_parts
            .iter()
            .rev()
            .find(|(_, i)| {
                matches!(
                    (m.parts.get(*i), kind),
                    (Some(Part::Text { .. }), Stream::Text)
                        | (Some(Part::Reasoning { .. }), Stream::Reasoning)
                )
            })
            .cloned()
    }

    /// End every open text and reasoning part (a segment boundary).
    pub fn end_open(&mut self, msg: &str) {
        let open = self.msg(msg).map(|m| {
            m.open_parts
                .iter()
                .map(|(id, i)| {
                    (
                        id.clone(),
                        matches!(m.parts.get(*i), Some(Part::Text { .. })),
                    )
                })
                .collect::<Vec<_>>()
        });
        for (id, is_text) in open.unwrap_or_default() {
            let c = if is_text {
                Chunk::TextEnd { id }
            } else {
                Chunk::ReasoningEnd { id }
            };
            self.emit(msg, c);
        }
    }

    /// Insert a new non-text part: end the open segment first.
    pub fn insert_part(&mut self, msg: &str, chunk: Chunk) -> bool {
        self.end_open(msg);
        self.emit(msg, chunk)
    }

    /// Put a `data-<name>` part with this id into `msg`: replaced in place
    /// when present, else inserted as a new segment.
    pub fn put_data_part(&mut self, msg: &str, name: &str, id: &str, data: serde_json::Value) {
        let exists = self
            .msg(msg)
            .is_some_and(|m| m.data_index(name, id).is_some());
        let c = Chunk::data(name, id, data);
        if exists {
            self.emit(msg, c);
        } else {
            self.insert_part(msg, c);
        }
    }

    /// Start a new text or reasoning part; returns its chunk id.
    fn start_part(&mut self, msg: &str, kind: Stream) -> Option<String> {
        let idx = self.msg(msg)?.parts.len();
        let id = match nonempty(self.fact.ids.part_id.as_deref()) {
            Some(p) if !self.books.part_ids.used(msg, &p) => p,
            _ => {
                let letter = if kind == Stream::Text { 't' } else { 'r' };
                let mut id = generated_part_id(msg, letter, idx);
                while self.books.part_ids.used(msg, &id) {
                    id.push('x');
                }
                id
            }
        };
        let c = match kind {
            Stream::Text => Chunk::TextStart { id: id.clone() },
            Stream::Reasoning => Chunk::ReasoningStart { id: id.clone() },
        };
        if !self.emit(msg, c) {
            return None;
        }
        self.books.part_ids.record(msg, &id, idx);
        Some(id)
    }

    /// Stream `delta` into the open part of `kind`, opening one if needed.
    fn stream_into(&mut self, msg: &str, kind: Stream, delta: String) {
        let wanted = nonempty(self.fact.ids.part_id.as_deref());
        let open = self
            .open_part(msg, kind)
            .filter(|(id, _)| wanted.as_deref().is_none_or(|w| w == id));
        let id = match open {
            Some((id, _)) => id,
            None => {
                self.end_open(msg);
                match self.start_part(msg, kind) {
                    Some(id) => id,
                    None => return,
                }
            }
        };
        let c = match kind {
            Stream::Text => Chunk::TextDelta { id, delta },
            Stream::Reasoning => Chunk::ReasoningDelta { id, delta },
        };
        self.emit(msg, c);
    }

    /// `text.delta`.
    pub fn on_text_delta(&mut self) {
        let Some(delta) = self.first_text(&["delta", "text", "content"]) else {
            return;
        };
        if delta.is_empty() {
            return;
        }
        let msg = self.ensure_assistant();
        self.stream_into(&msg, Stream::Text, delta);
    }

    /// `reasoning.delta`: projected only when raw reasoning is enabled.
    pub fn on_reasoning_delta(&mut self) {
        if self.state.runtime.phase.as_deref() != Some("reasoning") {
            self.runtime_mut().phase = Some("reasoning".into());
        }
        // Raw reasoning stays out unless configured in, or unless its
        // producer already shows it to its users (an AI SDK UI message
        // stream's reasoning parts: `payload.visibility: "shown"`).
        let shown = self.first_str(&["visibility"]).as_deref() == Some("shown");
        if !self.cfg.raw_reasoning && !shown {
            self.books.hidden_reasoning_deltas += 1;
            return;
        }
        let Some(delta) = self.first_text(&["delta", "text", "content"]) else {
            return;
        };
        if delta.is_empty() {
            return;
        }
        let msg = self.ensure_assistant();
        self.stream_into(&msg, Stream::Reasoning, delta);
    }

    /// `reasoning.summary`: a collapsed reasoning part; reconciles with raw
    /// reasoning streamed into an open part.
    pub fn on_reasoning_summary(&mut self) {
        let Some(summary) = self.first_str(&["summary", "text"]) else {
            return;
        };
        let msg = self.ensure_assistant();
        if let Some((id, idx)) = self.open_part(&msg, Stream::Reasoning) {
            let streamed = self.part_text(&msg, idx);
            if summary != streamed {
                if let Some(tail) = summary.strip_prefix(streamed.as_str()) {
                    let c = Chunk::ReasoningDelta {
                        id: id.clone(),
                        delta: tail.to_string(),
                    };
                    self.emit(&msg, c);
                } else {
                    self.replace_part_text(&msg, idx, &id, &summary, &streamed);
                }
            }
            self.emit(&msg, Chunk::ReasoningEnd { id });
            return;
        }
        self.end_open(&msg);
        if let Some(id) = self.start_part(&msg, Stream::Reasoning) {
            let c = Chunk::ReasoningDelta {
                id: id.clone(),
                delta: summary,
            };
            self.emit(&msg, c);
            self.emit(&msg, Chunk::ReasoningEnd { id });
        }
    }

    fn part_text(&self, msg: &str, idx: usize) -> String {
        match self.msg(msg).and_then(|m| m.parts.get(idx)) {
            Some(Part::Text { text, .. }) | Some(Part::Reasoning { text, .. }) => text.clone(),
            _ => String::new(),
        }
    }

    /// The final text wins over what was streamed: the one direct part
    /// change, announced by a transient `data-reconciliation` chunk.
    fn replace_part_text(&mut self, msg: &str, idx: usize, id: &str, text: &str, streamed: &str) {
        let Some(m) = self.state.messages.iter_mut().find(|m| *m.id == *msg) else {
            return;
        };
        if !m.replace_text(idx, text) {
            return;
        }
        let c = Chunk::Data {
            name: "reconciliation".into(),
            id: Some(id.to_string()),
            data: std::sync::Arc::new(json!({
                "messageId": msg,
                "partIndex": idx,
                "text": text,
                "streamedText": streamed,
            })),
            transient: true,
        };
        self.emit(msg, c);
        let note = format!("final text of part {id} in message {msg} differs from the streamed text; the final text wins");
        self.out.findings.push(super::Finding {
            code: "final_text_differs".into(),
            message: note.clone(),
        });
        self.diag("final_text_differs", Severity::Info, note);
    }

    fn part_chunk_id(&self, msg: &str, idx: usize) -> String {
        self.books
            .part_ids
            .of(msg)
            .and_then(|v| v.iter().rev().find(|(_, i)| *i == idx))
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| format!("{msg}-t{idx}"))
    }

    /// `text.final`: confirm, complete or correct the streamed text; never
    /// duplicate it.
    pub fn on_text_final(&mut self) {
        let Some(fin) = self.first_text(&["text", "content"]) else {
            return;
        };
        let msg = self.ensure_assistant();
        self.reconcile_final(&msg, fin);
    }

    /// Reconcile message `msg` with its final text `fin` (see
    /// `on_text_final`; repairs use it too).
    pub fn reconcile_final(&mut self, msg: &str, fin: String) {
        let msg = msg.to_string();
        let Some(m) = self.msg(&msg) else { return };
        let texts: Vec<(usize, String)> = m
            .parts
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                Part::Text { text, .. } => Some((i, text.clone())),
                _ => None,
            })
            .collect();
        let open = self.open_part(&msg, Stream::Text);
        let by_part_id = nonempty(self.fact.ids.part_id.as_deref()).and_then(|p| {
            self.books
                .part_ids
                .of(&msg)
                .and_then(|v| v.iter().find(|(id, _)| *id == p))
                .filter(|(_, i)| matches!(m.parts.get(*i), Some(Part::Text { .. })))
                .cloned()
        });
        let last_text = match m.parts.last() {
            Some(Part::Text { .. }) => Some(m.parts.len() - 1),
            _ => None,
        };
        let part_scoped = by_part_id.is_some();
        let target: Option<usize> = by_part_id
            .map(|(_, i)| i)
            .or(open.as_ref().map(|(_, i)| *i))
            .or(last_text);
        let full: String = texts.iter().map(|(_, t)| t.as_str()).collect();

        let Some(t) = target else {
            // No text part to reconcile: every segment is closed and a
            // boundary (a tool, an action, ...) came after the last one.
            // Closed segments are never rewritten: what the final adds goes
            // into a new segment after the boundary, where a live client
            // sees it too. A final that repeats the earlier segments adds
            // what follows them; one that does not is the next model call's
            // own text; one that only repeats streamed text adds nothing.
            if fin.is_empty() || full.starts_with(fin.as_str()) {
                return;
            }
            let tail = fin.strip_prefix(full.as_str()).unwrap_or(fin.as_str());
            self.end_open(&msg);
            if let Some(id) = self.start_part(&msg, Stream::Text) {
                let c = Chunk::TextDelta {
                    id: id.clone(),
                    delta: tail.to_string(),
                };
                self.emit(&msg, c);
                self.emit(&msg, Chunk::TextEnd { id });
            }
            return;
        };

        let is_open = open.as_ref().is_some_and(|(_, i)| *i == t);
        let tid = self.part_chunk_id(&msg, t);
        let target_text = self.part_text(&msg, t);
        let prefix: String = texts
            .iter()
            .filter(|(i, _)| *i < t)
            .map(|(_, s)| s.as_str())
            .collect();
        if fin == full {
            // Confirmed as a whole.
        } else if part_scoped || !fin.starts_with(prefix.as_str()) {
            // A final for one named part, or one that does not repeat the
            // earlier segments (a per-model-call final after a tool): only
            // the target part is reconciled; earlier segments stand.
            if fin == target_text {
            } else if is_open && fin.starts_with(target_text.as_str()) {
                let c = Chunk::TextDelta {
                    id: tid.clone(),
                    delta: fin[target_text.len()..].to_string(),
                };
                self.emit(&msg, c);
            } else {
                self.replace_part_text(&msg, t, &tid, &fin, &target_text);
            }
        } else {
            match fin.strip_prefix(prefix.as_str()) {
                Some(rem) if rem == target_text => {}
                Some(rem) if is_open && rem.starts_with(target_text.as_str()) => {
                    let c = Chunk::TextDelta {
                        id: tid.clone(),
                        delta: rem[target_text.len()..].to_string(),
                    };
                    self.emit(&msg, c);
                }
                _ => self.final_wins(&msg, &texts, t, &fin),
            }
        }
        if is_open {
            self.emit(&msg, Chunk::TextEnd { id: tid });
        }
    }

    /// Make the text from part `t` on equal `fin`: when `fin` repeats the
    /// earlier segments it is message-wide and `t` takes what remains after
    /// them; otherwise `fin` is the target segment's own final text. Earlier
    /// segments are never rewritten: they were shown, in order, around tools.
    fn final_wins(&mut self, msg: &str, texts: &[(usize, String)], t: usize, fin: &str) {
        let prefix: String = texts
            .iter()
            .filter(|(i, _)| *i < t)
            .map(|(_, s)| s.as_str())
            .collect();
        let rem = fin.strip_prefix(prefix.as_str()).unwrap_or(fin).to_string();
        // Later text parts (after the target) are emptied too.
        for (i, s) in texts.iter().filter(|(i, s)| *i > t && !s.is_empty()) {
            let id = self.part_chunk_id(msg, *i);
            self.replace_part_text(msg, *i, &id, "", s);
        }
        let streamed = self.part_text(msg, t);
        let id = self.part_chunk_id(msg, t);
        if streamed != rem {
            self.replace_part_text(msg, t, &id, &rem, &streamed);
        }
    }

    /// Close every open assistant message of the ending turn/run with the
    /// chunks of `ends`, in order.
    pub fn close_turn_messages(&mut self, ends: &[Chunk]) {
        let turn = nonempty(self.fact.ids.turn_id.as_deref());
        let run = nonempty(self.fact.ids.run_id.as_deref());
        let ids: Vec<String> = self
            .state
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .filter(|m| m.status == MessageStatus::Streaming)
            .filter(|m| {
                let unscoped = m.turn_id.is_none() && m.run_id.is_none();
                (turn.is_none() && run.is_none())
                    || unscoped
                    || (turn.is_some() && m.turn_id == turn)
                    || (run.is_some() && m.run_id == run)
            })
            .map(|m| m.id.to_string())
            .collect();
        for id in &ids {
            self.end_open(id);
            for end in ends {
                self.emit(id, end.clone());
            }
        }
        self.books.current.retain(|_, v| !ids.contains(v));
    }
}
