//! What the multi-node tests post and how they judge what comes back: the
//! writers' events, acknowledged batches checked to tile one gapless order,
//! subscribers collecting frames in tasks of their own, and checks that
//! frames are gapless, byte-identical across nodes, and carry the text a
//! snapshot shows.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::harness::{post, Frame, RawSse, DEADLINE};
use crate::common::lime;

/// Event `k` (1-based) of writer `w`: a turn of its own (so runtime
/// sequences stay in order per writer), text deltas, and a tool call that
/// splits the text every ten events. Even writers use the Lime envelope,
/// odd ones the Agent UI envelope.
fn event(tag: &str, w: usize, k: u64) -> Value {
    let id = format!("{tag}-w{w}-e{k}");
    let turn = format!("turn-{tag}-w{w}");
    let call = format!("call-{tag}-w{w}-{}", k / 10);
    let delta = format!("w{w}.{k} ");
    let (class, extra) = match k % 10 {
        _ if k == 1 => ("turn.started", json!({})),
        5 => (
            "tool.started",
            json!({"toolCallId": call, "payload": {"toolName": "search", "input": {"q": k}}}),
        ),
        6 => (
            "tool.result",
            json!({"toolCallId": call, "refIds": [format!("out-{k}")], "payload": {"summary": "ok"}}),
        ),
        _ => ("text.delta", json!({"payload": {"delta": delta}})),
    };
    if w % 2 == 0 {
        let mut extra = extra;
        extra["turnId"] = json!(turn);
        lime(&id, class, k, extra)
    } else {
        let mut e = json!({
            "id": id,
            "type": class,
            "runId": turn,
            "turnId": turn,
            "sequence": k,
        });
        if let Value::Object(m) = extra {
            e.as_object_mut().unwrap().extend(m);
        }
        e
    }
}

/// Writer `w`'s events `from..from+n` (1-based).
pub fn events(tag: &str, w: usize, from: u64, n: usize) -> Vec<Value> {
    (from..from + n as u64).map(|k| event(tag, w, k)).collect()
}

/// The ids of a batch of events, in order.
pub fn ids(batch: &[Value]) -> Vec<String> {
    batch
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

/// One acknowledged (or refused) POST.
#[derive(Debug, Clone)]
pub struct Post {
    pub node: usize,
    pub ids: Vec<String>,
    pub status: u16,
    pub body: Value,
}

impl Post {
    /// POST `batch` to node `node` (at `base`), keeping its ids and the answer.
    pub async fn send(
        http: &reqwest::Client,
        node: usize,
        base: &str,
        session: &str,
        batch: Vec<Value>,
    ) -> Post {
        let ids = ids(&batch);
        let (status, body) = post(http, base, session, &json!(batch)).await;
        Post {
            node,
            ids,
            status,
            body,
        }
    }
}

/// Check every POST was a 200 accepting its whole batch, and that the
/// batches' cursor ranges `cursor-accepted+1..=cursor` tile exactly 1..=N.
/// Returns N and the cursor of every event id.
pub fn check_acks(posts: &[Post]) -> (u64, HashMap<String, u64>) {
    let mut at = HashMap::new();
    let mut cursors = Vec::new();
    for p in posts {
        assert_eq!(p.status, 200, "POST to node {} refused: {}", p.node, p.body);
        let n = p.ids.len() as u64;
        assert_eq!(
            (p.body["accepted"].as_u64(), p.body["duplicates"].as_u64()),
            (Some(n), Some(0)),
            "POST to node {} accepts its whole batch of new ids: {}",
            p.node,
            p.body
        );
        let last = p.body["cursor"].as_u64().expect("cursor");
        assert!(last >= n, "cursor {last} below batch size {n}");
        for (j, id) in p.ids.iter().enumerate() {
            let c = last + 1 - n + j as u64;
            cursors.push(c);
            assert!(at.insert(id.clone(), c).is_none(), "{id} posted twice");
        }
    }
    cursors.sort_unstable();
    let n = cursors.len() as u64;
    let mut dup = cursors.clone();
    dup.dedup();
    assert_eq!(
        dup.len(),
        cursors.len(),
        "two acknowledged batches claim the same cursor: {:?}",
        cursors.windows(2).find(|w| w[0] == w[1])
    );
    let want: Vec<u64> = (1..=n).collect();
    assert_eq!(
        cursors, want,
        "acknowledged cursor ranges are exactly 1..={n}"
    );
    (n, at)
}

/// Check the event log is exactly `cursor -> id` as acknowledged.
pub fn check_log(log: &[(u64, Value)], at: &HashMap<String, u64>) {
    let mut by_cursor: Vec<(u64, &str)> = at.iter().map(|(id, c)| (*c, id.as_str())).collect();
    by_cursor.sort_unstable();
    let logged: Vec<(u64, &str)> = log
        .iter()
        .map(|(c, e)| (*c, e["id"].as_str().unwrap_or("<no id>")))
        .collect();
    if logged != by_cursor {
        let i = first_difference(&logged, &by_cursor);
        panic!(
            "event log differs from the acknowledgements at index {i}: log {:?}, acked {:?} \
             ({} logged, {} acked)",
            logged.get(i),
            by_cursor.get(i),
            logged.len(),
            by_cursor.len()
        );
    }
}

/// How far a subscriber got: frames received, last delta cursor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub frames: usize,
    pub cursor: u64,
}

/// A subscriber reading in a task of its own, keeping every frame.
pub struct Collector {
    pub name: String,
    frames: Arc<Mutex<Vec<Frame>>>,
    progress: watch::Receiver<Progress>,
    task: JoinHandle<String>,
}

impl Collector {
    pub fn spawn(name: impl Into<String>, mut sse: RawSse) -> Collector {
        let frames = Arc::new(Mutex::new(Vec::new()));
        let (tx, progress) = watch::channel(Progress::default());
        let out = frames.clone();
        let task = tokio::spawn(async move {
            loop {
                match sse.next().await {
                    Ok(f) => {
                        let cursor = (f.event == "delta").then(|| f.cursor());
                        out.lock().unwrap().push(f);
                        tx.send_modify(|p| {
                            p.frames += 1;
                            if let Some(c) = cursor {
                                p.cursor = c;
                            }
                        });
                    }
                    Err(why) => return why,
                }
            }
        });
        Collector {
            name: name.into(),
            frames,
            progress,
            task,
        }
    }

    /// Wait until `done(progress)` holds; a clear panic on timeout or when the
    /// stream ends first.
    async fn wait(&mut self, what: &str, done: impl FnMut(&Progress) -> bool) {
        let outcome = tokio::time::timeout(DEADLINE, async {
            self.progress.wait_for(done).await.map(|_| ()).is_ok()
        })
        .await;
        match outcome {
            Ok(true) => {}
            Ok(false) => {
                let why = (&mut self.task).await.unwrap_or_else(|e| e.to_string());
                panic!(
                    "{}: stream ended before {what} ({why}); got {:?}; frames {:#?}",
                    self.name,
                    *self.progress.borrow(),
                    self.frames()
                );
            }
            Err(_) => panic!(
                "{}: no {what} within {DEADLINE:?}; got {:?}",
                self.name,
                *self.progress.borrow()
            ),
        }
    }

    pub async fn wait_cursor(&mut self, n: u64) {
        self.wait(&format!("delta {n}"), |p| p.cursor >= n).await
    }

    pub async fn wait_frames(&mut self, n: usize) {
        self.wait(&format!("{n} frames"), |p| p.frames >= n).await
    }

    pub fn frames(&self) -> Vec<Frame> {
        self.frames.lock().unwrap().clone()
    }

    /// Wait for the stream to end; why it did.
    pub async fn ended(&mut self) -> String {
        (&mut self.task).await.unwrap_or_else(|e| e.to_string())
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Text per message implied by delta frames: the `text-delta` chunks in
/// cursor order.
pub fn text_of_deltas(deltas: &[Frame]) -> BTreeMap<String, String> {
    let mut text: BTreeMap<String, String> = BTreeMap::new();
    for f in deltas {
        for c in f.json()["chunks"].as_array().into_iter().flatten() {
            if c["chunk"]["type"] == "text-delta" {
                let msg = c["messageId"].as_str().unwrap_or("").to_string();
                text.entry(msg)
                    .or_default()
                    .push_str(c["chunk"]["delta"].as_str().unwrap_or(""));
            }
        }
    }
    text
}

/// Text per message in a snapshot: its `text` parts in order.
pub fn text_of_snapshot(snapshot: &Value) -> BTreeMap<String, String> {
    let mut text = BTreeMap::new();
    for m in snapshot["state"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let t: String = m["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["type"] == "text")
            .map(|p| p["text"].as_str().unwrap_or(""))
            .collect();
        if !t.is_empty() {
            text.insert(m["id"].as_str().unwrap_or("").to_string(), t);
        }
    }
    text
}

/// Assert two frame sequences are the same bytes, naming the first difference.
pub fn assert_same_frames(what: &str, got: &[Frame], want: &[Frame]) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: frame {i} differs\n  got:  {:?}\n  want: {:?}",
            got[i], want[i]
        );
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} frames, want {} (last got {:?}, last want {:?})",
        got.len(),
        want.len(),
        got.last().map(|f| &f.id),
        want.last().map(|f| &f.id)
    );
}

/// Assert `deltas` are delta frames with cursors exactly `from..=to`.
pub fn assert_gapless(what: &str, deltas: &[Frame], from: u64, to: u64) {
    let cursors: Vec<u64> = deltas.iter().map(Frame::cursor).collect();
    let want: Vec<u64> = (from..=to).collect();
    if cursors != want {
        let first_bad = first_difference(&cursors, &want);
        panic!(
            "{what}: cursors not exactly {from}..={to}: {} frames; first difference at index \
             {first_bad}: got {:?}, want {:?}",
            cursors.len(),
            cursors.get(first_bad.saturating_sub(2)..(first_bad + 3).min(cursors.len())),
            want.get(first_bad.saturating_sub(2)..(first_bad + 3).min(want.len())),
        );
    }
    for f in deltas {
        assert_eq!(f.event, "delta", "{what}: {f:?}");
        assert_eq!(
            f.json()["cursor"].as_u64(),
            Some(f.cursor()),
            "{what}: data cursor equals the SSE id: {f:?}"
        );
    }
}

/// The first index where `a` and `b` differ (or the shorter one ends).
fn first_difference<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}
