//! The shared-store sync (several nodes writing one log): before a command
//! reads the projection or appends, the actor catches up with what other
//! nodes appended, passing their stored frames to local subscribers, and
//! reloads when the log was recreated or trimmed past its state. On a
//! single-node store the actor does not ask for it, and catching up is a
//! no-op.

use std::sync::Arc;

use tokio::time::{Duration, Instant};
use tracing::warn;

use super::{Actor, Loaded};
use crate::frame::Frame;
use crate::session::Command;
use crate::store::{News, SessionMeta, StoreError, Tail};

/// How long after a conflict with another node an ingest keeps a copy of
/// the projection to roll back to, instead of reloading it.
pub(super) const CONTENDED_FOR: Duration = Duration::from_secs(10);

impl Actor {
    /// Make `cmd` see the shared log's head: commands that read the
    /// projection catch up first, and subscribers first follow the session
    /// (so that nothing slips between the catching up and the feed).
    /// Appending and deleting commands check against the store themselves.
    /// On a shared store only (the actor asks only then).
    pub(super) async fn sync_for(
        &mut self,
        state: &mut Loaded,
        cmd: &Command,
    ) -> Result<(), StoreError> {
        if matches!(cmd, Command::Subscribe { .. } | Command::Message { .. }) {
            // Drop a feed nobody reads first: publishing to it while
            // catching up would drop it and end the listening set up here.
            if self.feed.as_ref().is_some_and(|f| f.receiver_count() == 0) {
                self.drop_feed();
            }
            self.ensure_listening().await;
        }
        let reads = !matches!(
            cmd,
            Command::Ingest { .. }
                | Command::Delete { .. }
                | Command::Expire { .. }
                | Command::EvictIfIdle
        );
        if reads {
            self.catch_up(state, &[]).await.inspect_err(|e| {
                warn!(error = %e, "catching up with the shared log failed");
            })?;
        }
        Ok(())
    }

    /// News from another node woke the actor: catch up unless it is only
    /// the echo of our own append.
    pub(super) async fn on_news(&mut self, state: &mut Loaded) {
        if self.listening.as_ref().is_some_and(|n| n.take_cut_off()) {
            // This node cannot hear the others: its subscribers resume
            // elsewhere (each one's resubscription fails here while the
            // store is out of reach, which ends its stream).
            warn!(
                subscribers = self.subscribers(),
                "cut off from the shared store: ending this node's streams of the session"
            );
            metrics::counter!("projector_streams_cut_off_total")
                .increment(self.subscribers() as u64);
            self.drop_feed();
            return;
        }
        let beyond = self
            .listening
            .as_ref()
            .is_none_or(|n| n.beyond(&state.meta.epoch, state.meta.head));
        if !beyond && !state.stale {
            return;
        }
        if let Err(e) = self.catch_up(state, &[]).await {
            warn!(error = %e, "catching up with the shared log failed");
        }
    }

    /// Bring the state up to the shared log (a no-op for single-node
    /// stores): apply what other nodes appended and pass their frames to
    /// local subscribers; reload when the log was recreated or trimmed past
    /// the state. Returns the cursors of `ids` as of the state's new head.
    pub(super) async fn catch_up(
        &mut self,
        state: &mut Loaded,
        ids: &[String],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let ctx = self.ctx.clone();
        if !ctx.shared {
            return Ok(Vec::new());
        }
        if state.stale {
            self.reload(state).await?;
        }
        loop {
            let tail = ctx
                .store
                .tail(&self.id, state.meta.head, ctx.cfg.replay_page, ids)
                .await?;
            let Some(tail) = tail else {
                // The session is gone from the store (flushed): start over.
                self.reload(state).await?;
                continue;
            };
            let full = tail.events.len() >= ctx.cfg.replay_page;
            if !self.advance(state, &tail)? {
                self.reload(state).await?;
                continue;
            }
            if !full {
                return Ok(tail.known);
            }
        }
    }

    /// Apply a tail read; false when it does not continue the state (another
    /// epoch, or events trimmed past the state's head).
    fn advance(&mut self, state: &mut Loaded, tail: &Tail) -> Result<bool, StoreError> {
        if tail.meta.epoch != state.meta.epoch {
            return Ok(false);
        }
        let next = tail.events.first().map_or(tail.meta.head + 1, |e| e.cursor);
        if tail.meta.head > state.meta.head && next != state.meta.head + 1 {
            return Ok(false);
        }
        let ctx = self.ctx.clone();
        let cfg = &ctx.cfg.projection;
        for ev in &tail.events {
            let fact = self.fact(ev)?;
            state.projection.apply(cfg, ev.cursor, &fact);
            state.meta.head = ev.cursor;
            state.since_checkpoint += 1;
            self.publish(Arc::new(Frame::stored_delta(
                &tail.meta.epoch,
                ev.cursor,
                ev.received_ms,
                &ev.frame,
            )));
        }
        if !tail.events.is_empty() {
            state.snapshot = None;
            state.contended_until = Some(Instant::now() + CONTENDED_FOR);
            metrics::counter!("projector_frames_relayed_total").increment(tail.events.len() as u64);
        }
        let head = state.meta.head;
        state.meta = SessionMeta {
            head,
            ..tail.meta.clone()
        };

        Ok(true)
    }

    /// Reload the state from the store, and bring local subscribers along:
    /// the frames they have not seen, or `reset` + `snapshot` when the log
    /// was recreated or no longer holds them.
    async fn reload(&mut self, state: &mut Loaded) -> Result<(), StoreError> {
        let fresh = self.hydrate().await?;
        let old = std::mem::replace(state, fresh);
        if self.feed.is_none() {
            return Ok(());
        }
        if state.meta.epoch != old.meta.epoch {
            let reason = if state.meta.deleted {
                "session_deleted"
            } else {
                "epoch_changed"
            };
            self.publish_reset(state, reason);
            return Ok(());
        }
        let store = self.ctx.store.clone();
        let mut after = old.meta.head;
        while after < state.meta.head {
            match store.read(&self.id, after, self.ctx.cfg.replay_page).await {
                Ok(evs) if evs.first().is_some_and(|e| e.cursor == after + 1) => {
                    for ev in evs.iter().take_while(|e| e.cursor <= state.meta.head) {
                        self.publish(Arc::new(Frame::stored_delta(
                            &state.meta.epoch,
                            ev.cursor,
                            ev.received_ms,
                            &ev.frame,
                        )));
                        after = ev.cursor;
                    }
                }
                _ => {
                    self.publish_reset(state, "cursor_expired");
                    break;
                }
            }
        }
        Ok(())
    }

    /// Follow other nodes' appends to this session (shared stores).
    async fn ensure_listening(&mut self) {
        if self.listening.is_none() {
            self.listening = self.ctx.store.listen(&self.id).await;
        }
    }

    pub(super) fn stop_listening(&mut self) {
        if let Some(n) = self.listening.take() {
            self.ctx.store.unlisten(&self.id, &n);
        }
    }
}

/// Wait for news from other nodes, or forever when not listening.
pub(super) async fn wait(news: Option<&News>) {
    match news {
        Some(n) => n.wait().await,
        None => std::future::pending().await,
    }
}
