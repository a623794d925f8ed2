//! Runs their producers left (issue 35 item 4): the sessions of this node
//! whose run is working ([`Watch`]), and the sweep that asks each one's
//! actor, past the limits of `[runs]`, to end its run if it went silent
//! ([`Command::Interrupt`](super::Command::Interrupt)). The rule is the
//! core's (`projection::idle`); the actor applies it to its state as it
//! stands and writes the end as a fact, atomically with the check, so a
//! run that spoke meanwhile goes on. Several nodes may decide at once: the
//! fact's id names the run and the cursor it was silent after, so it is
//! written once.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use tokio_util::sync::CancellationToken;

use super::{Listing, Registry};
use crate::event::Limits;
use crate::projection::idle::{is_working, Timeouts};

/// Sessions whose run was working when this node last saw them.
#[derive(Debug, Default)]
pub struct Watch(DashMap<Arc<str>, (), foldhash::fast::RandomState>);

impl Watch {
    /// Note a session's status after a change: watched while working.
    pub fn note(&self, id: &str, status: Option<&str>) {
        if status.is_some_and(is_working) {
            if !self.0.contains_key(id) {
                self.0.insert(Arc::from(id), ());
            }
        } else {
            self.0.remove(id);
        }
    }

    fn ids(&self) -> Vec<Arc<str>> {
        self.0.iter().map(|e| e.key().clone()).collect()
    }

    fn forget(&self, id: &str) {
        self.0.remove(id);
    }
}

/// What an actor found when asked to end a silent run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its run is not working (ended, idle, waiting for a person).
    NotWorking,
    /// Working, and within its limit.
    Working,
    /// It was silent past its limit: its run is ended now.
    Interrupted,
}

/// How often the sweep looks: a quarter of the shorter limit, between
/// 100 ms and 30 s.
pub fn period(t: Timeouts) -> Option<Duration> {
    let shortest = [t.run_ms, t.tool_ms]
        .into_iter()
        .filter(|&ms| ms > 0)
        .min()?;
    Some(Duration::from_millis((shortest / 4).clamp(100, 30_000)))
}

/// Sessions listed at start whose run is working: watched from now on
/// (this node restarted, or another one wrote them).
async fn scan(registry: &Registry) {
    let mut after: Option<String> = None;
    loop {
        let page = match registry.store().list(after.as_deref(), 1000).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "could not list sessions for the silent-run sweep");
                return;
            }
        };
        let Some((last, _)) = page.last() else { return };
        after = Some(last.clone());
        for (id, meta) in &page {
            registry
                .watch()
                .note(id, Listing::of_meta(meta).status.as_deref());
        }
    }
}

/// The sweep: every [`period`], each watched session's actor applies the
/// rule to its run.
pub async fn sweep(registry: Registry, t: Timeouts, limits: Limits, shutdown: CancellationToken) {
    let Some(every) = period(t) else { return };
    scan(&registry).await;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        for id in registry.watch().ids() {
            match registry.interrupt_if_silent(&id, t, &limits).await {
                Ok(Verdict::Working) => {}
                Ok(Verdict::NotWorking) => registry.watch().forget(&id),
                Ok(Verdict::Interrupted) => {
                    registry.watch().forget(&id);
                    metrics::counter!("projector_runs_interrupted_total", "why" => "silent")
                        .increment(1);
                    tracing::info!(session_id = %id, "ended a run that went silent");
                }
                Err(e) => tracing::warn!(session_id = %id, error = %e, "silent-run check failed"),
            }
        }
    }
}
