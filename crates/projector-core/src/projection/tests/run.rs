//! Unit tests of the reducer. Most tests check the key invariant: replaying
//! the emitted chunks of each message through a fresh `Message::apply`
//! rebuilds exactly the snapshot's messages.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::event::{classes, ScopeIds};

/// Test fact builder.
pub struct F(pub Fact);

impl F {
    pub fn new(id: &str, class: &str) -> F {
        let mut f = Fact::new(id, classes::canonical(class));
        f.source_class = class.to_string();
        F(f)
    }
    pub fn turn(mut self, t: &str) -> F {
        self.0.ids.turn_id = Some(t.into());
        self
    }
    pub fn agent(mut self, a: &str) -> F {
        self.0.ids.agent_id = Some(a.into());
        self
    }
    pub fn tool(mut self, t: &str) -> F {
        self.0.ids.tool_call_id = Some(t.into());
        self
    }
    pub fn action(mut self, a: &str) -> F {
        self.0.ids.action_id = Some(a.into());
        self
    }
    pub fn seq(mut self, s: u64) -> F {
        self.0.sequence = Some(s);
        self
    }
    pub fn status(mut self, s: &str) -> F {
        self.0.status = Some(s.into());
        self
    }
    pub fn ids(mut self, f: impl FnOnce(&mut ScopeIds)) -> F {
        f(&mut self.0.ids);
        self
    }
    pub fn p(mut self, k: &str, v: Value) -> F {
        self.0.payload.insert(k.into(), v);
        self
    }
}

/// A projection plus everything it emitted.
pub struct Run {
    pub p: Projection,
    pub cfg: ProjectionConfig,
    pub log: Vec<Applied>,
}

impl Run {
    pub fn new() -> Run {
        Run::with(ProjectionConfig::default())
    }
    pub fn with(cfg: ProjectionConfig) -> Run {
        Run {
            p: Projection::new(&cfg),
            cfg,
            log: Vec::new(),
        }
    }
    pub fn apply(&mut self, f: F) -> Applied {
        let cursor = self.p.cursor() + 1;
        let a = self.p.apply(&self.cfg, cursor, &f.0);
        self.log.push(a.clone());
        a
    }
    pub fn all(&mut self, fs: Vec<F>) {
        for f in fs {
            self.apply(f);
        }
    }
    pub fn state(&self) -> Value {
        self.p.state_json()
    }
    pub fn diag_codes(&self) -> Vec<String> {
        self.p
            .state()
            .diagnostics
            .iter()
            .map(|d| d.code.clone())
            .collect()
    }
    pub fn findings(&self) -> Vec<String> {
        self.log
            .iter()
            .flat_map(|a| a.findings.iter().map(|f| f.code.clone()))
            .collect()
    }
    pub fn part_types(&self, msg: &str) -> Vec<String> {
        let m = self.p.message(msg).expect("message");
        m.parts
            .iter()
            .map(|p| p.to_json()["type"].as_str().unwrap().to_string())
            .collect()
    }

    /// The key invariant: the emitted chunks rebuild the messages exactly.
    /// A client honours `data-reconciliation` by replacing the part text,
    /// and `data-superseded` by keeping the parts before `fromPart`.
    pub fn assert_replay(&self) {
        let mut rebuilt: BTreeMap<String, Message> = BTreeMap::new();
        for a in &self.log {
            for c in &a.chunks {
                let ser = serde_json::to_value(&c.chunk).unwrap();
                assert!(ser["type"].is_string());
                let Some(id) = &c.message_id else {
                    assert!(
                        ser["type"].as_str().unwrap().starts_with("data-"),
                        "session chunks are data chunks: {ser}"
                    );
                    assert!(ser["id"].is_string(), "session chunks have ids: {ser}");
                    continue;
                };
                if let Chunk::Start { message_id, .. } = &c.chunk {
                    assert_eq!(**message_id, **id);
                    // `start` is emitted once per message; an id may come
                    // back after its message was dropped by the bounds.
                    rebuilt.insert(id.to_string(), Message::new(id, Role::Assistant, 0));
                }
                let m = rebuilt.get_mut(&**id).expect("chunk before start");
                m.apply(&c.chunk)
                    .unwrap_or_else(|e| panic!("emitted chunk rejected: {e}"));
                if let Chunk::Data {
                    name,
                    data,
                    transient: true,
                    ..
                } = &c.chunk
                {
                    if name == "reconciliation" {
                        let i = data["partIndex"].as_u64().unwrap() as usize;
                        assert!(m.replace_text(i, data["text"].as_str().unwrap()));
                    }
                    if name == "superseded" {
                        m.truncate_parts(data["fromPart"].as_u64().unwrap() as usize);
                    }
                }
            }
        }
        for m in self.p.messages() {
            let r = rebuilt.get(&*m.id).expect("message rebuilt from chunks");
            assert_eq!(r.parts, m.parts, "parts of {}", m.id);
            assert_eq!(r.status, m.status, "status of {}", m.id);
            assert_eq!(r.open_parts, m.open_parts, "open parts of {}", m.id);
        }
    }
}

pub fn texts(r: &Run, msg: &str) -> Vec<String> {
    r.p.message(msg)
        .unwrap()
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

pub fn chunk_types(a: &Applied) -> Vec<String> {
    a.chunks
        .iter()
        .filter(|c| c.message_id.is_some())
        .map(|c| c.chunk.type_name().into_owned())
        .collect()
}

#[test]
fn text_tool_text_keeps_real_time_order() {
    let mut r = Run::new();
    let a1 = r.apply(F::new("e1", "text.delta").turn("t1").p("delta", json!("A")));
    assert_eq!(chunk_types(&a1), ["start", "text-start", "text-delta"]);
    let a2 = r.apply(
        F::new("e2", "tool.started")
            .turn("t1")
            .tool("c1")
            .p("toolName", json!("search"))
            .p("input", json!({"q": "x"})),
    );
    assert_eq!(
        chunk_types(&a2),
        ["text-end", "tool-input-start", "tool-input-available"]
    );
    let a3 = r.apply(
        F::new("e3", "tool.result")
            .turn("t1")
            .tool("c1")
            .p("summary", json!("3 hits")),
    );
    assert_eq!(chunk_types(&a3), ["tool-output-available"]);
    let a4 = r.apply(F::new("e4", "text.delta").turn("t1").p("delta", json!("B")));
    assert_eq!(chunk_types(&a4), ["text-start", "text-delta"]);
    r.apply(F::new("e5", "run.finished").turn("t1"));
    let msg = "msg-1";
    assert_eq!(r.part_types(msg), ["text", "tool-search", "text"]);
    assert_eq!(texts(&r, msg), ["A", "B"]);
    let s = r.state();
    let parts = &s["messages"][0]["parts"];
    assert_eq!(parts[1]["state"], "output-available");
    assert_eq!(parts[1]["output"], json!({"summary": "3 hits", "refs": []}));
    assert_eq!(s["messages"][0]["status"], "complete");
    assert_eq!(s["tools"]["c1"]["status"], "completed");
    assert_eq!(s["tools"]["c1"]["messageId"], msg);
    assert_eq!(s["runtime"]["status"], "completed");
    r.assert_replay();
}

#[test]
fn identical_final_after_deltas_does_not_duplicate() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Hel")),
    );
    r.apply(F::new("e2", "text.delta").turn("t").p("delta", json!("lo")));
    let a = r.apply(
        F::new("e3", "text.final")
            .turn("t")
            .p("text", json!("Hello")),
    );
    assert_eq!(chunk_types(&a), ["text-end"]);
    assert_eq!(texts(&r, "msg-1"), ["Hello"]);
    assert!(r.findings().is_empty());
    // A final that only completes the open part streams the missing tail.
    r.apply(
        F::new("e4", "text.delta")
            .turn("u")
            .p("delta", json!("Hi t")),
    );
    let a = r.apply(
        F::new("e5", "text.final")
            .turn("u")
            .p("text", json!("Hi there")),
    );
    assert_eq!(chunk_types(&a), ["text-delta", "text-end"]);
    assert_eq!(texts(&r, "msg-4"), ["Hi there"]);
    r.assert_replay();
}

#[test]
fn segmented_final_confirms_each_segment() {
    let mut r = Run::new();
    r.apply(F::new("e1", "text.delta").turn("t").p("delta", json!("A")));
    r.apply(F::new("e2", "tool.started").turn("t").tool("c"));
    r.apply(F::new("e3", "text.delta").turn("t").p("delta", json!("B")));
    let a = r.apply(F::new("e4", "text.final").turn("t").p("text", json!("AB")));
    assert_eq!(chunk_types(&a), ["text-end"]);
    assert_eq!(texts(&r, "msg-1"), ["A", "B"]);
    // Tool part last: a final equal to all text changes nothing.
    r.apply(F::new("e5", "tool.result").turn("t").tool("c"));
    let a = r.apply(F::new("e6", "text.final").turn("t").p("text", json!("AB")));
    assert!(chunk_types(&a).is_empty());
    r.assert_replay();
}

#[test]
fn per_call_final_after_a_tool_never_rewrites_earlier_segments() {
    // Lime's model.completed closes one model call: after text, tool, text
    // its text is the last segment only. Earlier segments stand.
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Let me search.")),
    );
    r.apply(F::new("e2", "tool.started").turn("t").tool("c"));
    r.apply(F::new("e3", "tool.result").turn("t").tool("c"));
    r.apply(
        F::new("e4", "text.delta")
            .turn("t")
            .p("delta", json!("Found")),
    );
    let a = r.apply(
        F::new("e5", "text.final")
            .turn("t")
            .p("text", json!("Found it.")),
    );
    assert_eq!(
        chunk_types(&a),
        ["text-delta", "text-end"],
        "the missing tail streams"
    );
    assert_eq!(texts(&r, "msg-1"), ["Let me search.", "Found it."]);
    r.apply(
        F::new("e6", "text.delta")
            .turn("t")
            .p("delta", json!("Next")),
    );
    r.apply(
        F::new("e7", "text.final")
            .turn("t")
            .p("text", json!("Next one")),
    );
    assert_eq!(
        texts(&r, "msg-1"),
        ["Let me search.", "Found it.", "Next one"]
    );
    r.apply(
        F::new("e8", "text.delta")
            .turn("t")
            .p("delta", json!("Oops")),
    );
    r.apply(
        F::new("e9", "text.final")
            .turn("t")
            .p("text", json!("Fixed")),
    );
    assert_eq!(
        texts(&r, "msg-1"),
        ["Let me search.", "Found it.", "Next one", "Fixed"]
    );
    assert_eq!(r.findings(), ["final_text_differs"]);
    r.assert_replay();
}

#[test]
fn part_scoped_final_touches_only_its_part() {
    let mut r = Run::new();
    let p = |f: F, id: &str| f.ids(|i| i.part_id = Some(id.into()));
    r.apply(p(F::new("e1", "text.delta").turn("t"), "p1").p("delta", json!("A")));
    r.apply(F::new("e2", "tool.started").turn("t").tool("c"));
    r.apply(p(F::new("e3", "text.delta").turn("t"), "p2").p("delta", json!("B")));
    r.apply(p(F::new("e4", "text.final").turn("t"), "p1").p("text", json!("A!")));
    assert_eq!(texts(&r, "msg-1"), ["A!", "B"]);
    r.apply(p(F::new("e5", "text.final").turn("t"), "p2").p("text", json!("B2")));
    assert_eq!(texts(&r, "msg-1"), ["A!", "B2"]);
    // p1 was closed (replaced, announced); p2 was open (its tail streamed).
    assert_eq!(r.findings(), ["final_text_differs"]);
    r.assert_replay();
}

#[test]
fn differing_final_wins_and_says_so() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Helo wrld")),
    );
    let a = r.apply(
        F::new("e2", "text.final")
            .turn("t")
            .p("text", json!("Hello world")),
    );
    assert_eq!(texts(&r, "msg-1"), ["Hello world"]);
    let rec = a
        .chunks
        .iter()
        .find(|c| matches!(&c.chunk, Chunk::Data { name, .. } if name == "reconciliation"))
        .expect("reconciliation chunk");
    let v = serde_json::to_value(&rec.chunk).unwrap();
    assert_eq!(v["transient"], true);
    assert_eq!(v["data"]["text"], "Hello world");
    assert_eq!(v["data"]["streamedText"], "Helo wrld");
    assert_eq!(chunk_types(&a).last().unwrap(), "text-end");
    assert_eq!(r.findings(), ["final_text_differs"]);
    assert!(r.diag_codes().contains(&"final_text_differs".to_string()));
    r.assert_replay();
}

#[test]
fn final_without_deltas_creates_the_text() {
    let mut r = Run::new();
    let a = r.apply(
        F::new("e1", "model.completed")
            .turn("t")
            .p("text", json!("Done.")),
    );
    assert_eq!(
        chunk_types(&a),
        ["start", "text-start", "text-delta", "text-end"]
    );
    assert_eq!(texts(&r, "msg-1"), ["Done."]);
    let m = r.p.message("msg-1").unwrap();
    assert_eq!(
        m.status,
        ui_message::MessageStatus::Streaming,
        "text.final does not finish"
    );
    r.assert_replay();
}

#[test]
fn tool_failure_is_an_error_part_and_a_diagnostic() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "tool.started")
            .turn("t")
            .tool("w")
            .p("toolName", json!("write")),
    );
    r.apply(
        F::new("e2", "tool.failed")
            .turn("t")
            .tool("w")
            .p("failureCategory", json!("permission_denied")),
    );
    let s = r.state();
    let part = &s["messages"][0]["parts"][0];
    assert_eq!(part["type"], "tool-write");
    assert_eq!(part["state"], "output-error");
    assert_eq!(part["errorText"], "permission_denied");
    assert_eq!(s["tools"]["w"]["status"], "failed");
    assert_eq!(s["tools"]["w"]["failureCategory"], "permission_denied");
    assert_eq!(s["diagnostics"][0]["code"], "tool.failed");
    assert_eq!(s["diagnostics"][0]["toolCallId"], "w");
    assert_eq!(
        s["runtime"]["status"], "running",
        "a tool failure does not fail the run"
    );
    r.assert_replay();
}

#[test]
fn result_without_start_synthesises_the_part() {
    let mut r = Run::new();
    let a = r.apply(F::new("e1", "tool.result").turn("t").tool("x"));
    assert_eq!(
        chunk_types(&a),
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "tool-output-available"
        ]
    );
    assert_eq!(r.part_types("msg-1"), ["tool-unknown"]);
    assert_eq!(r.findings(), ["tool_result_without_start"]);
    // A second start of an active tool is flagged, no new part.
    r.apply(F::new("e2", "tool.started").turn("t").tool("y"));
    r.apply(F::new("e3", "tool.started").turn("t").tool("y"));
    assert_eq!(r.part_types("msg-1"), ["tool-unknown", "tool-unknown"]);
    assert!(r.findings().contains(&"tool_restarted".to_string()));
    r.assert_replay();
}

#[test]
fn tool_input_streams_then_becomes_available() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "tool.args.delta")
            .turn("t")
            .tool("c")
            .p("delta", json!("{\"q\":")),
    );
    r.apply(
        F::new("e2", "tool.args.delta")
            .turn("t")
            .tool("c")
            .p("delta", json!("1}")),
    );
    assert_eq!(
        r.state()["messages"][0]["parts"][0]["state"],
        "input-streaming"
    );
    r.apply(
        F::new("e3", "tool.started")
            .turn("t")
            .tool("c")
            .p("input", json!({"q": 1})),
    );
    let s = r.state();
    assert_eq!(s["messages"][0]["parts"][0]["state"], "input-available");
    assert_eq!(s["messages"][0]["parts"][0]["input"], json!({"q": 1}));
    assert!(r.findings().is_empty(), "{:?}", r.findings());
    r.assert_replay();
}

/// A deterministic pseudo-random stream of facts over every class family:
/// the reducer never panics and the replay invariant always holds.
#[test]
fn random_fact_streams_keep_the_invariants() {
    const CLASSES: &[&str] = &[
        "turn.submitted",
        "run.started",
        "run.status",
        "run.finished",
        "run.failed",
        "run.canceled",
        "text.delta",
        "text.final",
        "reasoning.delta",
        "reasoning.summary",
        "tool.started",
        "tool.args.delta",
        "tool.args",
        "tool.progress",
        "tool.result",
        "tool.failed",
        "action.required",
        "action.resolved",
        "artifact.changed",
        "evidence.changed",
        "review.completed",
        "task.changed",
        "agent.spawned",
        "worker.notification",
        "handoff.requested",
        "channel.message",
        "queue.changed",
        "context.compaction.started",
        "permission.changed",
        "sandbox.blocked",
        "file.changed",
        "patch.started",
        "patch.failed",
        "command.started",
        "command.exited",
        "test.started",
        "test.completed",
        "runtime.error",
        "model.failed",
        "diagnostic.changed",
        "snapshot.updated",
        "messages.snapshot",
        "plan.delta",
        "plan.final",
        "state.delta",
        "state.snapshot",
        "turn.submitted",
        "team.changed",
        "context.changed",
        "no.such.class",
    ];
    const WORDS: &[&str] = &["", "a", "ab", "abc", "b", "héllo", "abcd", " "];
    for seed in 0..40u64 {
        let mut next = crate::test_rng::lcg(
            seed.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
        let cfg = ProjectionConfig {
            raw_reasoning: seed % 2 == 0,
            max_messages: 4,
            max_timeline: 10,
            max_diagnostics: 10,
            max_surface_entries: 5,
            snapshot_messages: 3,
        };
        let mut r = Run::with(cfg);
        for i in 0..150 {
            let class = CLASSES[next(CLASSES.len())];
            let mut f = F::new(&format!("e{i}"), class).seq(next(6) as u64 + i / 2);
            if next(4) > 0 {
                f = f.turn(&format!("t{}", next(3)));
            }
            if next(3) == 0 {
                f = f.agent(&format!("ag{}", next(2)));
            }
            if next(2) == 0 {
                f = f.tool(&format!("c{}", next(3)));
            }
            if next(2) == 0 {
                f = f.action(&format!("a{}", next(3)));
            }
            if next(5) == 0 {
                f = f.ids(|ids| ids.part_id = Some(format!("p{}", i % 3)));
            }
            if next(6) == 0 {
                f = f.ids(|ids| ids.message_id = Some(format!("m{}", i % 2)));
            }
            if next(3) == 0 {
                f = f.ids(|ids| ids.artifact_id = Some(format!("art{}", i % 4)));
            }
            let w = WORDS[next(WORDS.len())];
            for k in ["delta", "text", "summary", "status", "exitCode"] {
                if next(2) == 0 {
                    f = f.p(k, json!(w));
                }
            }
            if next(8) == 0 {
                f = f.p("role", json!("user"));
            }
            if next(8) == 0 {
                let m = json!([{"id": format!("m{}", i % 2), "text": w, "status": "complete"}]);
                f = f.p("messages", m);
            }
            r.apply(f);
        }
        r.assert_replay();
        let bytes = serde_json::to_vec(&r.p).unwrap();
        let back: Projection = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, r.p, "seed {seed}");
        let s = r.p.state();
        assert!(s.messages.len() <= 4 && s.timeline.len() <= 10 && s.diagnostics.len() <= 10);
        assert!(
            r.diag_codes().iter().all(|c| c != "chunk_rejected"),
            "seed {seed}: {:?}",
            r.p.state().diagnostics
        );
    }
}

/// Issue 12 item 3: a final text after a tool, with no deltas after the
/// tool, that does not repeat the text before it is the next model call's
/// own text: a new segment after the tool. The first sentence stays, the
/// answer sits after the tool, and the chunks rebuild exactly that.
#[test]
fn final_after_a_boundary_opens_a_new_segment_and_never_rewrites_closed_ones() {
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Let me check. ")),
    );
    r.apply(
        F::new("e2", "tool.started")
            .turn("t")
            .tool("c1")
            .p("toolName", json!("weather")),
    );
    r.apply(
        F::new("e3", "tool.result")
            .turn("t")
            .tool("c1")
            .p("summary", json!("sunny")),
    );
    let a = r.apply(
        F::new("e4", "text.final")
            .turn("t")
            .p("text", json!("It is sunny.")),
    );
    let msg = r.p.messages()[0].id.clone();
    assert_eq!(texts(&r, &msg), ["Let me check. ", "It is sunny."]);
    let types = r.part_types(&msg);
    let tool_at = types.iter().position(|t| t.starts_with("tool-")).unwrap();
    let last_text = types.iter().rposition(|t| t == "text").unwrap();
    assert!(
        tool_at < last_text,
        "the answer sits after the tool: {types:?}"
    );
    assert_eq!(chunk_types(&a), ["text-start", "text-delta", "text-end"]);
    assert!(r.findings().is_empty(), "nothing was overwritten");
    r.assert_replay();

    // A final that repeats the earlier segment adds only what follows it;
    // the same final again confirms the whole.
    let mut r = Run::new();
    r.apply(
        F::new("e1", "text.delta")
            .turn("t")
            .p("delta", json!("Let me check. ")),
    );
    r.apply(
        F::new("e2", "tool.started")
            .turn("t")
            .tool("c1")
            .p("toolName", json!("weather")),
    );
    r.apply(
        F::new("e3", "text.final")
            .turn("t")
            .p("text", json!("Let me check. It is sunny.")),
    );
    let msg = r.p.messages()[0].id.clone();
    assert_eq!(texts(&r, &msg), ["Let me check. ", "It is sunny."]);
    let a = r.apply(
        F::new("e4", "text.final")
            .turn("t")
            .p("text", json!("Let me check. It is sunny.")),
    );
    assert!(chunk_types(&a).is_empty());
    assert_eq!(texts(&r, &msg), ["Let me check. ", "It is sunny."]);
    r.assert_replay();
}

/// Issue 12 item 4: a failed run emits the AI SDK `error` chunk before the
/// message's `finish`, so that `useChat` ends in `error`, not `ready`.
#[test]
fn a_failed_run_emits_the_error_chunk_then_finish() {
    let mut r = Run::new();
    r.apply(F::new("e1", "run.started").turn("t"));
    r.apply(
        F::new("e2", "text.delta")
            .turn("t")
            .p("delta", json!("Working")),
    );
    let a = r.apply(
        F::new("e3", "run.failed")
            .turn("t")
            .p("error", json!("model overloaded")),
    );
    assert_eq!(chunk_types(&a), ["text-end", "error", "finish"]);
    let error = a
        .chunks
        .iter()
        .find(|c| matches!(c.chunk, Chunk::Error { .. }))
        .unwrap();
    assert_eq!(
        serde_json::to_value(&error.chunk).unwrap(),
        json!({"type": "error", "errorText": "model overloaded"})
    );
    // A client that comes after the failure (a resume, a late tab) gets it
    // too: the replay ends with the same error, then the finish.
    let mid = error.message_id.clone().unwrap();
    let replay = r.p.message(&mid).unwrap().replay_chunks();
    let tail: Vec<Value> = replay[replay.len() - 2..]
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(
        tail,
        [
            json!({"type": "error", "errorText": "model overloaded"}),
            json!({"type": "finish", "finishReason": "error"})
        ]
    );
    // Without a message of its own, the error text says what failed.
    let mut r = Run::new();
    r.apply(F::new("e1", "text.delta").turn("t").p("delta", json!("x")));
    let a = r.apply(
        F::new("e2", "run.failed")
            .turn("t")
            .p("failureCategory", json!("timeout")),
    );
    let error = a
        .chunks
        .iter()
        .find(|c| matches!(c.chunk, Chunk::Error { .. }));
    assert_eq!(
        serde_json::to_value(&error.unwrap().chunk).unwrap()["errorText"],
        "run failed: timeout"
    );
    // A completed run has no error chunk.
    let mut r = Run::new();
    r.apply(F::new("e1", "text.delta").turn("t").p("delta", json!("x")));
    let a = r.apply(F::new("e2", "run.finished").turn("t"));
    assert_eq!(chunk_types(&a), ["text-end", "finish"]);
    r.assert_replay();
}

#[test]
fn a_message_part_stays_small() {
    // A message's parts are all as large as the largest kind: a tool part's
    // JSON values are boxed, a data part's value shared with its chunk, so
    // that the text parts of a long message do not pay for them.
    let size = std::mem::size_of::<Part>();
    assert!(size <= 128, "Part is {size} bytes");
}
