//! The per-fact reducer context: the projection's state and bookkeeping under
//! change, the fact being folded, and the output (chunks, findings). Owns the
//! shared helpers: reading fact fields, emitting message chunks through
//! `Message::apply`, recording diagnostics and findings, and turning touched
//! surface entries into `data-<surface>` chunks at the end of a fact (their
//! JSON comes from `surface_json.rs`).

use std::borrow::Cow;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::chunk::{Chunk, ChunkOut, Origin, RawJson};
use super::part_ids::PartIds;
use super::public_state::{Diagnostic, Keyed, PublicState, Runtime, Severity, TimelineEntry};
use super::sequence::Sequencer;
use super::{Applied, Finding, ProjectionConfig};
use crate::event::Fact;
use crate::producer::Producers;

/// Per-turn verifier marks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnMark {
    /// A terminal fact (`run.finished|failed|canceled`) was applied.
    pub ended: bool,
}

/// Bookkeeping that is checkpointed with the projection but never shown in
/// the public snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Bookkeeping {
    /// Current assistant message per `agent \u{1f} turn` key.
    pub current: Keyed<String>,
    /// Text/reasoning part ids ever used per message.
    pub part_ids: PartIds,
    pub sequence: Sequencer,
    /// Verifier marks per turn key (`turnId | runId | ""`).
    pub turns: Keyed<TurnMark>,
    /// Raw reasoning deltas seen while `raw_reasoning` is off (not projected).
    pub hidden_reasoning_deltas: u64,
    /// Counter for `coding.blocks` / `permissions.blocks` ids.
    pub block_seq: u64,
    /// The runtime's control URL, from the latest `session.opened` fact that
    /// named one (`payload.controlUrl`). Internal topology: never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_url: Option<String>,
    /// The idempotent producers that appended, from the facts they
    /// brought in ([`Fact::producer`]).
    #[serde(default, skip_serializing_if = "Producers::is_empty")]
    pub producers: Producers,
    /// By `message \u{1f} step`: the step's current try and its first part
    /// (`attempts`); forgotten when the turn ends, as `last_step`.
    #[serde(default, skip_serializing_if = "Keyed::is_empty")]
    pub steps: Keyed<(String, usize)>,
    #[serde(default, skip_serializing_if = "Keyed::is_empty")]
    pub last_step: Keyed<String>,
}

/// The context of one `Projection::apply`.
pub struct Reducer<'a> {
    /// The public state under change.
    pub state: &'a mut PublicState,
    /// The bookkeeping under change.
    pub books: &'a mut Bookkeeping,
    pub cfg: &'a ProjectionConfig,
    pub cursor: u64,
    /// The fact being folded.
    pub fact: &'a Fact,
    pub out: Applied,
    diag_n: u32,
    touched: Vec<(&'static str, String)>,
    /// The fact's `agent \u{1f} turn` key, computed once per fact.
    pub(super) key: std::cell::OnceCell<String>,
    actions_len_before: usize,
    /// The fact's class as the reducer knows it (`None`: no rules for it).
    pub known_class: Option<&'static str>,
    /// The runtime as it was before the fact's first change to it (see
    /// [`Reducer::runtime_mut`]); `None` while the fact has not changed it.
    runtime_before: Option<Box<Runtime>>,
}

thread_local! {
    /// A kept buffer for the fact's message key (see [`key_buffer`]).
    static KEY: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
    /// A kept buffer for `runtime_before`: its strings are reused from fact
    /// to fact (`clone_from`), not allocated.
    static RUNTIME_BEFORE: std::cell::Cell<Option<Box<Runtime>>> = const { std::cell::Cell::new(None) };
}

/// An empty string to build the fact's message key in: the one the last
/// fact used, handed back by `finish`, so that a key costs no allocation.
pub fn key_buffer() -> String {
    let mut key = KEY.take();
    key.clear();
    key
}

/// A non-empty string.
pub fn nonempty(s: Option<&str>) -> Option<String> {
    nonblank(s).map(str::to_string)
}

/// A non-empty string, borrowed. Ids almost always start with a visible
/// ASCII character, which settles it without trimming.
pub fn nonblank(s: Option<&str>) -> Option<&str> {
    s.filter(|s| s.as_bytes().first().is_some_and(u8::is_ascii_graphic) || !s.trim().is_empty())
}

/// At most `max` characters of `s` (on a char boundary), with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A timeline entry's class: the known class's `'static` name (no copy),
/// else `class` copied into the entry's own string.
fn set_class(to: &mut Cow<'static, str>, class: &str, known: Option<&'static str>) {
    match (known, &mut *to) {
        (Some(k), _) => *to = Cow::Borrowed(k),
        (None, Cow::Owned(s)) => {
            s.clear();
            s.push_str(class);
        }
        (None, _) => *to = Cow::Owned(class.to_string()),
    }
}

/// Insert `v` into `list` if absent.
pub fn push_unique(list: &mut Vec<String>, v: &str) {
    if !list.iter().any(|x| x == v) {
        list.push(v.to_string());
    }
}

/// Keep `map` at most `max` entries, dropping the oldest insertions. The
/// check is inlined (a fact checks every bound); the drop is not.
#[inline]
pub fn bound_map<V, S>(map: &mut IndexMap<String, V, S>, max: usize) {
    #[inline(never)]
    fn drop_oldest<V, S>(map: &mut IndexMap<String, V, S>, max: usize) {
        while map.len() > max {
            map.shift_remove_index(0);
        }
    }
    if map.len() > max {
        drop_oldest(map, max);
    }
}

/// Keep `list` at most `max` entries, dropping the oldest.
pub fn bound_vec<V>(list: &mut Vec<V>, max: usize) {
    if list.len() > max {
        let n = list.len() - max;
        list.drain(..n);
    }
}

/// Set every non-null field of `patch` on the object `entry`.
pub fn merge(entry: &mut Value, patch: Value) {
    if !entry.is_object() {
        *entry = json!({});
    }
    if let (Some(e), Value::Object(p)) = (entry.as_object_mut(), patch) {
        for (k, v) in p {
            if !v.is_null() {
                e.insert(k, v);
            }
        }
    }
}

impl<'a> Reducer<'a> {
    pub fn new(
        state: &'a mut PublicState,
        books: &'a mut Bookkeeping,
        cfg: &'a ProjectionConfig,
        cursor: u64,
        fact: &'a Fact,
    ) -> Self {
        let actions_len_before = state.actions.len();
        Reducer {
            state,
            books,
            cfg,
            cursor,
            fact,
            out: Applied::default(),
            diag_n: 0,
            touched: Vec::new(),
            key: std::cell::OnceCell::new(),
            actions_len_before,
            known_class: crate::event::classes::known(&fact.class),
            runtime_before: None,
        }
    }

    /// The runtime, to change. Every change goes through here: the first
    /// copies the runtime as it was, so that `finish` can tell whether the
    /// fact changed it. A fact that never asks (most text deltas) copies
    /// and compares nothing.
    pub fn runtime_mut(&mut self) -> &mut Runtime {
        if self.runtime_before.is_none() {
            let mut before = RUNTIME_BEFORE.take().unwrap_or_default();
            (*before).clone_from(&self.state.runtime);
            self.runtime_before = Some(before);
        }
        &mut self.state.runtime
    }

    // ---- fact fields -------------------------------------------------------

    /// First non-empty payload string among `keys`.
    pub fn first_str(&self, keys: &[&str]) -> Option<String> {
        keys.iter().find_map(|k| nonempty(self.fact.payload_str(k)))
    }

    /// First payload value among `keys` that is not null.
    pub fn first_value(&self, keys: &[&str]) -> Option<Value> {
        keys.iter()
            .find_map(|k| self.fact.payload_get(k).filter(|v| !v.is_null()).cloned())
    }

    /// First payload string among `keys`, even if blank (text deltas).
    pub fn first_text(&self, keys: &[&str]) -> Option<String> {
        keys.iter()
            .find_map(|k| self.fact.payload_str(k))
            .map(str::to_string)
    }

    /// A payload integer.
    pub fn payload_int(&self, key: &str) -> Option<i64> {
        self.fact.payload_get(key).and_then(|v| {
            v.as_i64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        })
    }

    pub fn title(&self) -> Option<String> {
        nonempty(self.fact.title.as_deref())
    }

    pub fn status(&self) -> Option<&str> {
        self.fact.status.as_deref()
    }

    /// `ids.turnId | ids.runId`.
    pub fn turn(&self) -> Option<String> {
        self.turn_str().map(str::to_string)
    }

    /// `ids.turnId | ids.runId`, borrowed from the fact.
    pub fn turn_str(&self) -> Option<&'a str> {
        let ids = &self.fact.ids;
        nonblank(ids.turn_id.as_deref()).or_else(|| nonblank(ids.run_id.as_deref()))
    }

    /// `ids.agentId | ids.subagentId`.
    pub fn agent(&self) -> Option<String> {
        self.agent_str().map(str::to_string)
    }

    /// `ids.agentId | ids.subagentId`, borrowed from the fact.
    pub fn agent_str(&self) -> Option<&'a str> {
        let ids = &self.fact.ids;
        nonblank(ids.agent_id.as_deref()).or_else(|| nonblank(ids.subagent_id.as_deref()))
    }

    /// The verifier's turn key.
    pub fn turn_key(&self) -> String {
        self.turn().unwrap_or_default()
    }

    /// `ids.toolCallId`.
    pub fn tool_call_id(&self) -> Option<String> {
        nonempty(self.fact.ids.tool_call_id.as_deref())
    }

    /// `refIds` plus string `outputRef`/`ref` payload fields, deduplicated.
    pub fn refs(&self) -> Vec<String> {
        let mut v = Vec::new();
        for r in &self.fact.ref_ids {
            push_unique(&mut v, r);
        }
        for k in ["outputRef", "ref"] {
            if let Some(r) = self.first_str(&[k]) {
                push_unique(&mut v, &r);
            }
        }
        v
    }

    // ---- output ------------------------------------------------------------

    /// Apply `chunk` to message `msg` and emit it. A chunk the AI SDK would
    /// reject is not emitted; a diagnostic records it instead.
    pub fn emit(&mut self, msg: &str, chunk: Chunk) -> bool {
        // Chunks almost always go to a recent message: search from the end.
        let Some(m) = self.state.messages.iter_mut().rev().find(|m| *m.id == *msg) else {
            self.diag(
                "chunk_rejected",
                Severity::Warning,
                format!("message {msg} is not in the projection"),
            );
            return false;
        };
        match m.apply(&chunk) {
            Ok(()) => {
                let start = matches!(chunk, Chunk::Start { .. });
                let origin = (start
                    && (m.agent_id.is_some() || m.turn_id.is_some() || m.run_id.is_some()))
                .then(|| {
                    Box::new(Origin {
                        agent_id: m.agent_id.clone(),
                        turn_id: m.turn_id.clone(),
                        run_id: m.run_id.clone(),
                    })
                });
                self.out.chunks.push(ChunkOut {
                    message_id: Some(m.id.clone()),
                    role: start.then_some(m.role),
                    origin,
                    chunk,
                });
                true
            }
            Err(e) => {
                self.diag("chunk_rejected", Severity::Warning, e.to_string());
                false
            }
        }
    }

    /// Mark a surface entry as changed; its chunk is emitted at the end.
    pub fn touch(&mut self, surface: &'static str, id: impl Into<String>) {
        let id = id.into();
        if !self.touched.iter().any(|(s, i)| *s == surface && *i == id) {
            self.touched.push((surface, id));
        }
    }

    /// Record a diagnostic; returns its id.
    pub fn diag(&mut self, code: &str, severity: Severity, message: String) -> String {
        self.diag_tool(code, severity, message, self.tool_call_id())
    }

    /// Record a diagnostic about a tool call; returns its id.
    pub fn diag_tool(
        &mut self,
        code: &str,
        severity: Severity,
        message: String,
        tool_call_id: Option<String>,
    ) -> String {
        self.diag_n += 1;
        let id = format!("d{}-{}", self.cursor, self.diag_n);
        self.state.diagnostics.push_back(Diagnostic {
            id: id.clone(),
            code: code.to_string(),
            severity,
            class: self.fact.class.clone(),
            event_id: self.fact.id.clone(),
            cursor: self.cursor,
            message,
            tool_call_id,
        });
        while self.state.diagnostics.len() > self.cfg.max_diagnostics {
            self.state.diagnostics.pop_front();
        }
        self.touch("diagnostics", id.clone());
        id
    }

    /// A finding for the ingest response, recorded as a warning diagnostic too.
    pub fn finding(&mut self, code: &str, message: String) {
        self.out.findings.push(Finding {
            code: code.to_string(),
            message: message.clone(),
        });
        self.diag(code, Severity::Warning, message);
    }

    /// Add the fact's timeline entry. A full timeline's oldest entry is
    /// refilled where it is (`clone_from` reuses its strings) and rotated to
    /// the back: an entry is a few hundred bytes, not moved out and in.
    pub fn timeline(&mut self) {
        let (f, max) = (self.fact, self.cfg.max_timeline);
        let tl = &mut self.state.timeline;
        if max == 0 {
            tl.clear();
            return;
        }
        while tl.len() > max {
            tl.pop_front();
        }
        let full = tl.len() == max;
        if !full {
            tl.push_back(TimelineEntry::default());
        }
        let Some(e) = (if full { tl.front_mut() } else { tl.back_mut() }) else {
            return;
        };
        e.cursor = self.cursor;
        e.event_id.clone_from(&f.id);
        set_class(&mut e.class, &f.class, self.known_class);
        let same = f.source_class == f.class;
        set_class(
            &mut e.source_class,
            &f.source_class,
            self.known_class.filter(|_| same),
        );
        e.status.clone_from(&f.status);
        e.title = f.title.as_ref().map(|t| truncate(t, 200));
        e.timestamp.clone_from(&f.timestamp);
        match (&mut e.taxonomy, f.taxonomy.is_empty()) {
            (t, true) => *t = None,
            (Some(t), false) => (**t).clone_from(&f.taxonomy),
            (t, false) => *t = Some(Box::new(f.taxonomy.clone())),
        }
        if full {
            tl.rotate_left(1);
        }
    }

    /// Finish the fact: derived runtime fields, bounds, surface chunks.
    pub fn finish(mut self) -> Applied {
        let stale = self.books.sequence.stale();
        if self.state.runtime.stale != stale {
            self.runtime_mut().stale = stale;
        }
        self.enforce_bounds();
        // Recount pending actions only when this fact touched them or a
        // bound dropped some, not for every text delta.
        if self.actions_len_before != self.state.actions.len()
            || self.touched.iter().any(|(s, _)| *s == "actions")
        {
            let pending = (self.state.actions.values())
                .filter(|a| a.status == "pending")
                .count();
            if self.state.runtime.pending_actions != pending {
                self.runtime_mut().pending_actions = pending;
            }
        }
        for (surface, id) in std::mem::take(&mut self.touched) {
            if let Some(data) = super::surface_json::entry_json(self.state, surface, &id) {
                self.out.chunks.push(ChunkOut {
                    message_id: None,
                    role: None,
                    origin: None,
                    chunk: Chunk::Surface {
                        name: surface,
                        id,
                        data,
                    },
                });
            }
        }
        if let Some(before) = self.runtime_before.take() {
            if self.state.runtime != *before {
                if self.fact.timestamp.is_some() {
                    self.state.runtime.updated_at = self.fact.timestamp.clone();
                }
                self.out.chunks.push(ChunkOut {
                    message_id: None,
                    role: None,
                    origin: None,
                    chunk: Chunk::Surface {
                        name: "runtime",
                        id: "runtime".into(),
                        data: RawJson::of(&self.state.runtime),
                    },
                });
            }
            RUNTIME_BEFORE.set(Some(before));
        }
        if let Some(key) = self.key.take() {
            KEY.set(key);
        }
        self.out
    }

    fn enforce_bounds(&mut self) {
        let max = self.cfg.max_surface_entries;
        bound_map(&mut self.state.tools, max);
        bound_map(&mut self.state.actions, max);
        bound_map(&mut self.state.artifacts, max);
        bound_map(&mut self.state.evidence, max);
        bound_map(&mut self.state.tasks, max);
        bound_map(&mut self.state.agents, max);
        bound_map(&mut self.books.turns, max);
        let t = &mut self.state.team;
        bound_vec(&mut t.roster, max);
        bound_vec(&mut t.handoffs, max);
        bound_vec(&mut t.reviews, max);
        bound_vec(&mut t.notifications, max);
        bound_vec(&mut t.channels, max);
        bound_vec(&mut t.edges, max);
        let c = &mut self.state.coding;
        bound_map(&mut c.files, max);
        bound_map(&mut c.patches, max);
        bound_map(&mut c.commands, max);
        bound_map(&mut c.tests, max);
        bound_vec(&mut c.blocks, max);
        bound_vec(&mut self.state.context.refs, max);
        bound_vec(&mut self.state.context.missing, max);
        bound_vec(&mut self.state.context.compactions, max);
        bound_vec(&mut self.state.permissions.blocks, max);
        bound_map(&mut self.state.permissions.agents, max);
        bound_map(&mut self.state.plans, max);
        while self.state.messages.len() > self.cfg.max_messages.max(1) {
            let m = self.state.messages.remove(0);
            self.books.current.retain(|_, v| **v != *m.id);
            self.books.part_ids.forget(&m.id);
        }
        bound_map(&mut self.books.current, max);
    }
}
