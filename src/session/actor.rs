//! The session actor: hydrates the projection from the store (checkpoint +
//! tail), then serves commands one at a time: ingest (dedupe, assign cursors,
//! reduce, append durably, then publish), subscribe, snapshot. Exits when
//! idle with no subscribers, or on shutdown.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tracing::{debug, warn, Instrument};

use super::registry::RegistryInner;
use super::{
    Command, ControlTarget, IncomingEvent, IngestOutcome, MessageFeed, MessagePage, MessagePick,
    SessionError, Start, Subscription, Warning,
};
use crate::event::Fact;
use crate::frame::{self, SharedFrame};
use crate::projection::{Projection, Role};
use crate::store::{self, AppendBatch, Checkpoint, SessionMeta, StoreError, StoredEvent};

pub(super) struct Actor {
    pub id: Arc<str>,
    pub generation: u64,
    pub registry: Arc<RegistryInner>,
    pub rx: mpsc::Receiver<Command>,
    /// The live feed, created when the first subscriber comes and dropped
    /// when the last one has gone: an idle session holds no channel buffer.
    pub feed: Option<broadcast::Sender<SharedFrame>>,
    /// Shared with the registry's handle, to count subscribers.
    pub feed_view: Arc<std::sync::Mutex<Option<broadcast::WeakSender<SharedFrame>>>>,
    pub live_buffer: usize,
}

/// The hydrated state an actor owns.
struct State {
    meta: SessionMeta,
    projection: Projection,
    since_checkpoint: u64,
    snapshot: Option<SharedFrame>,
}

impl Actor {
    pub async fn run(mut self) {
        let span = tracing::info_span!("session", session_id = %self.id);
        async move {
            metrics::gauge!("projector_sessions_live").increment(1.0);
            match self.hydrate().await {
                Ok(state) => self.serve(state).await,
                Err(e) => {
                    warn!(error = %e, "session hydration failed");
                    self.stop_with_error(e).await;
                }
            }
            metrics::gauge!("projector_sessions_live").decrement(1.0);
        }
        .instrument(span)
        .await
    }

    async fn hydrate(&self) -> Result<State, StoreError> {
        let ctx = &self.registry.ctx;
        let store = &ctx.store;
        let meta = store.open(&self.id).await?;
        let mut projection = Projection::new(&ctx.projection);
        let mut after = 0;
        if let Some(cp) = store.checkpoint(&self.id).await? {
            match serde_json::from_slice::<Projection>(&cp.state) {
                Ok(p) => {
                    projection = p;
                    after = cp.cursor;
                }
                Err(e) if meta.first <= 1 => {
                    warn!(error = %e, "checkpoint unreadable; replaying the whole log");
                }
                Err(e) => {
                    return Err(StoreError::Corrupt {
                        session: self.id.to_string(),
                        detail: format!("checkpoint at cursor {} unreadable: {e}", cp.cursor),
                    })
                }
            }
        }
        if after + 1 < meta.first {
            return Err(StoreError::Corrupt {
                session: self.id.to_string(),
                detail: format!(
                    "log starts at cursor {} but the checkpoint covers only {after}",
                    meta.first
                ),
            });
        }
        let mut replayed = 0u64;
        loop {
            let page = store.read(&self.id, after, ctx.replay_page).await?;
            if page.is_empty() {
                break;
            }
            for ev in &page {
                let fact: Fact =
                    serde_json::from_slice(&ev.fact).map_err(|e| StoreError::Corrupt {
                        session: self.id.to_string(),
                        detail: format!("fact at cursor {}: {e}", ev.cursor),
                    })?;
                projection.apply(&ctx.projection, ev.cursor, &fact);
                after = ev.cursor;
                replayed += 1;
            }
        }
        debug!(head = meta.head, replayed, "session hydrated");
        Ok(State {
            since_checkpoint: replayed,
            meta,
            projection,
            snapshot: None,
        })
    }

    async fn serve(&mut self, mut state: State) {
        let ctx = self.registry.ctx.clone();
        let idle = ctx.idle_evict;
        let mut deadline = Instant::now() + idle;
        loop {
            tokio::select! {
                cmd = self.rx.recv() => {
                    let Some(cmd) = cmd else { break };
                    if let Command::EvictIfIdle = cmd {
                        if self.subscribers() == 0 {
                            debug!("evicting to stay under sessions in memory limit");
                            metrics::counter!("projector_sessions_evicted_total", "why" => "limit").increment(1);
                            break;
                        }
                        continue;
                    }
                    deadline = Instant::now() + idle;
                    if !self.handle(&mut state, cmd).await {
                        self.leave();
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    if self.subscribers() == 0 {
                        debug!("evicting idle session");
                        break;
                    }
                    deadline = Instant::now() + idle;
                }
                _ = ctx.shutdown.cancelled() => break,
            }
        }
        // Leave the registry first so that new callers start a fresh actor,
        // then serve whatever was already queued.
        self.leave();
        self.rx.close();
        while let Some(cmd) = self.rx.recv().await {
            if !self.handle(&mut state, cmd).await {
                return;
            }
        }
    }

    fn subscribers(&self) -> usize {
        self.feed.as_ref().map_or(0, |f| f.receiver_count())
    }

    /// A receiver positioned at the head, creating the feed if needed.
    fn subscribe_feed(&mut self) -> broadcast::Receiver<SharedFrame> {
        if let Some(f) = &self.feed {
            return f.subscribe();
        }
        let (tx, rx) = broadcast::channel(self.live_buffer);
        *self.feed_view.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx.downgrade());
        self.feed = Some(tx);
        rx
    }

    /// Send a frame to live subscribers; drop the feed once nobody listens.
    fn publish(&mut self, frame: SharedFrame) {
        let Some(f) = &self.feed else { return };
        if f.receiver_count() == 0 {
            self.feed = None;
            *self.feed_view.lock().unwrap_or_else(|p| p.into_inner()) = None;
            return;
        }
        let _ = f.send(frame);
    }

    fn leave(&self) {
        self.registry
            .sessions
            .remove_if(&*self.id, |_, h| h.generation == self.generation);
    }

    async fn stop_with_error(&mut self, e: StoreError) {
        self.leave();
        self.rx.close();
        let msg = e.to_string();
        while let Some(cmd) = self.rx.recv().await {
            if let Command::Ingest { reply, .. } = cmd {
                let _ = reply.send(Err(SessionError::Store(StoreError::Unavailable(
                    msg.clone(),
                ))));
            }
        }
    }

    /// Serve one command. Returns false when the actor must stop.
    async fn handle(&mut self, state: &mut State, cmd: Command) -> bool {
        match cmd {
            Command::Ingest { events, reply } => match self.ingest(state, events).await {
                Ok(outcome) => {
                    let _ = reply.send(Ok(outcome));
                }
                Err(e) => {
                    warn!(error = %e, "append failed; rebuilding the projection from the store");
                    let _ = reply.send(Err(SessionError::Store(e)));
                    match self.hydrate().await {
                        Ok(fresh) => *state = fresh,
                        Err(e) => {
                            warn!(error = %e, "rehydration failed; stopping the session actor");
                            self.stop_with_error(e).await;
                            return false;
                        }
                    }
                }
            },
            Command::Subscribe {
                cursor,
                epoch,
                reply,
            } => {
                let meta = state.meta.clone();
                let reset = match cursor {
                    None => None,
                    Some(_) if epoch.as_deref().is_some_and(|e| e != meta.epoch) => {
                        Some(Some("epoch_mismatch"))
                    }
                    Some(n) if n > meta.head => Some(Some("cursor_ahead")),
                    Some(n) if n + 1 < meta.first => Some(Some("cursor_expired")),
                    Some(_) => None,
                };
                let start = match (cursor, reset) {
                    (Some(after), None) => Start::Resume { after },
                    (_, reset) => Start::Fresh {
                        reset: reset.flatten(),
                        snapshot: self.snapshot(state),
                    },
                };
                let _ = reply.send(Subscription {
                    rx: self.subscribe_feed(),
                    meta,
                    start,
                });
            }
            Command::Snapshot { reply } => {
                let frame = self.snapshot(state);
                let _ = reply.send((state.meta.clone(), frame));
            }
            Command::Message { pick, reply } => {
                let found = match &pick {
                    MessagePick::Id(id) => state.projection.message(id),
                    MessagePick::Streaming => state
                        .projection
                        .messages()
                        .iter()
                        .rev()
                        .find(|m| m.role == Role::Assistant && !m.is_finished()),
                };
                let _ = reply.send(found.cloned().map(|message| MessageFeed {
                    message,
                    rx: self.subscribe_feed(),
                    meta: state.meta.clone(),
                }));
            }
            Command::Messages {
                before,
                limit,
                reply,
            } => {
                let p = &state.projection;
                let page =
                    p.messages_page(before.as_deref(), limit)
                        .map(|(ms, next)| MessagePage {
                            messages: ms.to_vec(),
                            next_before: next,
                            total: p.messages().len(),
                            meta: state.meta.clone(),
                        });
                let _ = reply.send(page);
            }
            Command::ControlTarget { action_id, reply } => {
                let p = &state.projection;
                let _ = reply.send(ControlTarget {
                    control_url: p.control_url().map(str::to_string),
                    action_status: action_id
                        .and_then(|id| p.state().actions.get(&id))
                        .map(|a| a.status.clone()),
                });
            }
            Command::EvictIfIdle => {}
            Command::Delete { reply } => {
                let ctx = self.registry.ctx.clone();
                match ctx.store.delete(&self.id).await {
                    Ok(meta) => {
                        state.meta = meta.clone();
                        state.projection = Projection::new(&ctx.projection);
                        state.since_checkpoint = 0;
                        state.snapshot = None;
                        // Live subscribers start over: reset, then the empty snapshot.
                        let snapshot = self.snapshot(state);
                        self.publish(Arc::new(frame::reset("session_deleted")));
                        self.publish(snapshot);
                        let _ = reply.send(Ok(meta));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(SessionError::Store(e)));
                    }
                }
            }
        }
        true
    }

    fn snapshot(&self, state: &mut State) -> SharedFrame {
        if let Some(f) = &state.snapshot {
            return f.clone();
        }
        let window = self.registry.ctx.projection.snapshot_messages;
        let mut value = state.projection.snapshot_json(window);
        if let serde_json::Value::Object(m) = &mut value {
            m.insert("sessionId".into(), self.id.as_ref().into());
        }
        let f = Arc::new(frame::snapshot(state.meta.head, &state.meta.epoch, &value));
        state.snapshot = Some(f.clone());
        f
    }

    async fn ingest(
        &mut self,
        state: &mut State,
        events: Vec<IncomingEvent>,
    ) -> Result<IngestOutcome, StoreError> {
        let ctx = self.registry.ctx.clone();
        let ids: Vec<String> = events.iter().map(|e| e.fact.id.clone()).collect();
        let known = ctx.store.lookup_ids(&self.id, &ids).await?;
        let mut in_batch = HashSet::with_capacity(events.len());
        let mut warnings = Vec::new();
        let mut stored = Vec::with_capacity(events.len());
        let mut frames = Vec::with_capacity(events.len());
        let mut duplicates = 0;
        let mut cursor = state.meta.head;
        let received_ms = store::now_ms();
        for (ev, known) in events.into_iter().zip(known) {
            if known.is_some() || !in_batch.insert(ev.fact.id.clone()) {
                duplicates += 1;
                continue;
            }
            cursor += 1;
            let applied = state.projection.apply(&ctx.projection, cursor, &ev.fact);
            for w in ev.warnings {
                warnings.push(Warning {
                    index: ev.index,
                    event_id: ev.fact.id.clone(),
                    code: w.code.to_string(),
                    path: Some(w.path),
                    message: w.message,
                });
            }
            for f in applied.findings {
                warnings.push(Warning {
                    index: ev.index,
                    event_id: ev.fact.id.clone(),
                    code: f.code,
                    path: None,
                    message: f.message,
                });
            }
            let frame = frame::delta(cursor, &ev.fact.id, &ev.fact.class, &applied.chunks);
            stored.push(StoredEvent {
                cursor,
                event_id: ev.fact.id.clone(),
                received_ms,
                fact: serde_json::to_vec(&ev.fact)
                    .expect("facts serialise")
                    .into(),
                frame: frame.json.clone(),
            });
            frames.push(Arc::new(frame));
        }
        let accepted = stored.len();
        if accepted > 0 {
            let due = state.since_checkpoint + accepted as u64 >= ctx.checkpoint_every;
            let checkpoint = due.then(|| Checkpoint {
                cursor,
                state: serde_json::to_vec(&state.projection)
                    .expect("projections serialise")
                    .into(),
            });
            let took_checkpoint = checkpoint.is_some();
            state.meta = ctx
                .store
                .append(
                    &self.id,
                    AppendBatch {
                        events: stored,
                        checkpoint,
                        status: Some(state.projection.state().runtime.status.clone()),
                    },
                )
                .await?;
            state.since_checkpoint = if took_checkpoint {
                0
            } else {
                state.since_checkpoint + accepted as u64
            };
            state.snapshot = None;
            for f in frames {
                // No receivers is fine: the frame is in the store.
                self.publish(f);
            }
            metrics::counter!("projector_frames_total").increment(accepted as u64);
        }
        metrics::counter!("projector_ingest_events_total", "outcome" => "accepted")
            .increment(accepted as u64);
        metrics::counter!("projector_ingest_events_total", "outcome" => "duplicate")
            .increment(duplicates as u64);
        Ok(IngestOutcome {
            accepted,
            duplicates,
            cursor: state.meta.head,
            epoch: state.meta.epoch.clone(),
            warnings,
        })
    }
}
