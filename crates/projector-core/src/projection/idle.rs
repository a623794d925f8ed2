//! A run its producer left (issue 35): the rule by which the server ends a
//! run that has gone silent, as a pure function of the projection and two
//! clocks. A run is silent when it is working (accepted, routing,
//! preparing, running, retrying, stale) and nothing was appended to its
//! session for the run's limit: `run_ms`, or `tool_ms` while a tool it
//! started is still running (a test suite may take minutes; a tool whose
//! input the model is still writing is the run's own work). Waiting is
//! not silence: a run waiting for a person (a pending action, `waiting`,
//! `blocked`) is never ended. Any event of the session counts as activity;
//! a runtime with nothing to say sends `run.status` as its heartbeat.
//!
//! The server ends a silent run with the fact [`interruption`] makes: a
//! `run.finished` with outcome `interrupted`, which the reducer turns into
//! the end every view shows (open parts closed, running tools ended with
//! an error, the message aborted, the runtime `interrupted`) and a
//! diagnostic (`run_idle_timeout`).

use serde_json::{json, Value};

use super::public_state::PublicState;
use super::ui_message::{Part, ToolState};

/// Statuses of a run that is working (not waiting, not ended).
const WORKING: &[&str] = &[
    "accepted",
    "routing",
    "preparing",
    "running",
    "retrying",
    "stale",
];

/// Whether a run in this status is working.
pub fn is_working(status: &str) -> bool {
    WORKING.contains(&status)
}

/// How long a working run may stay silent, in ms (0: never ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// A run with no tool running.
    pub run_ms: u64,
    /// A run with a tool running.
    pub tool_ms: u64,
}

/// A run that went silent past its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Silent {
    pub run_id: Option<String>,
    pub turn_id: Option<String>,
    /// How long nothing came, and the limit it passed.
    pub silent_ms: u64,
    pub limit_ms: u64,
    /// A tool of the run was running (the longer limit applied).
    pub tool_running: bool,
}

/// Whether the session's run is silent past its limit, given when its
/// last event was received (`last_ms`) and the time now (both wall-clock
/// ms). `None`: working and within its limit, waiting, or not running.
pub fn silent(state: &PublicState, last_ms: u64, now_ms: u64, t: Timeouts) -> Option<Silent> {
    let rt = &state.runtime;
    if !WORKING.contains(&rt.status.as_str()) {
        return None;
    }
    if state.actions.values().any(|a| a.status == "pending") {
        return None;
    }
    let tool_running = state
        .tools
        .values()
        .any(|tl| tl.status == "running" && !input_streaming(state, tl));
    let limit_ms = if tool_running { t.tool_ms } else { t.run_ms };
    let silent_ms = now_ms.saturating_sub(last_ms);
    if limit_ms == 0 || silent_ms < limit_ms {
        return None;
    }
    Some(Silent {
        run_id: rt.run_id.clone(),
        turn_id: rt.turn_id.clone(),
        silent_ms,
        limit_ms,
        tool_running,
    })
}

/// Whether a tool's input is still being written (the model, not the
/// tool, is working: the run's own limit applies).
fn input_streaming(state: &PublicState, tool: &super::public_state::ToolEntry) -> bool {
    let Some(m) = tool
        .message_id
        .as_deref()
        .and_then(|id| state.messages.iter().rev().find(|m| *m.id == *id))
    else {
        return false;
    };
    m.tool_index(&tool.tool_call_id)
        .and_then(|i| m.parts.get(i))
        .is_some_and(|p| {
            matches!(
                p,
                Part::Tool {
                    state: ToolState::InputStreaming,
                    ..
                }
            )
        })
}

/// The fact that ends a silent run: `run.finished`, outcome
/// `interrupted`, with why; its id names the run and the cursor it was
/// silent after (`head`), so that nodes that decide it at once write it
/// once.
pub fn interruption(s: &Silent, head: u64) -> Value {
    let run = s
        .run_id
        .as_deref()
        .or(s.turn_id.as_deref())
        .unwrap_or("run");
    let setting = if s.tool_running {
        "runs.tool_idle_timeout_secs"
    } else {
        "runs.idle_timeout_secs"
    };
    let reason = format!(
        "no event for {} s{} ({setting} = {}): the server ended the run",
        s.silent_ms / 1000,
        if s.tool_running {
            " while a tool was running"
        } else {
            ""
        },
        s.limit_ms / 1000
    );
    let mut e = json!({
        "id": format!("server:idle:{run}:{head}"),
        "type": "run.finished",
        "payload": {
            "outcome": "interrupted",
            "reason": reason,
            "endedBy": "server",
            "silentMs": s.silent_ms,
            "limitMs": s.limit_ms,
            // Applied only right after this cursor (see the reducer's
            // `stale_interruption`): a run that spoke meanwhile goes on.
            "silentAfter": head,
        },
    });
    if let Some(r) = &s.run_id {
        e["runId"] = r.as_str().into();
    }
    if let Some(t) = &s.turn_id {
        e["turnId"] = t.as_str().into();
    }
    e
}
