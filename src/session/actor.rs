//! The session actor: hydrates the projection from the store (checkpoint +
//! tail), then serves commands one at a time: ingest (dedupe, assign cursors,
//! reduce, append durably, then publish), subscribe, snapshot. Exits when
//! idle with no subscribers, or on shutdown.
//!
//! With a shared store (several nodes), the actor is one of many writers:
//! before it appends or answers it catches up with the log (applying other
//! nodes' facts in cursor order and passing their stored frames to local
//! subscribers), and the store refuses an append that does not continue the
//! head it caught up to; the actor then rolls back and tries again.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};
use tokio::time::{Duration, Instant};
use tracing::{debug, warn, Instrument};

use super::registry::RegistryInner;
use super::{
    Command, ControlTarget, IncomingEvent, IngestOutcome, IngestReply, MessageFeed, MessagePage,
    MessagePick, SessionError, Start, Subscription, Warning,
};
use crate::event::Fact;
use crate::frame::{self, Frame, SharedFrame};
use crate::projection::{Projection, Role};
use crate::store::{
    self, AppendBatch, Checkpoint, News, SessionMeta, StoreError, StoredEvent, Tail,
};

/// How long after a conflict with another node an ingest keeps a copy of
/// the projection to roll back to, instead of reloading it.
const CONTENDED_FOR: Duration = Duration::from_secs(10);

/// Queued ingest requests of one session are appended together, up to this
/// many events: one store round trip (and, on a shared store, one chance of
/// a conflict) for all of them.
const COALESCE_EVENTS: usize = 4096;

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
    /// Wakes the actor when another node changed the session (shared
    /// stores, while the session has subscribers here).
    pub listening: Option<Arc<News>>,
    /// A command taken from the mailbox while gathering ingest requests,
    /// served next.
    pub held: Option<Command>,
}

/// What woke the actor.
enum Wake {
    Command(Option<Command>),
    News,
    Idle,
    Stop,
}

/// The hydrated state an actor owns.
struct State {
    /// Where the log stood after the last event applied (committed).
    meta: SessionMeta,
    projection: Projection,
    since_checkpoint: u64,
    snapshot: Option<SharedFrame>,
    /// The projection may hold facts the store did not confirm (a shared
    /// store failed an append); it is reloaded before any other use.
    stale: bool,
    /// Another node appended to this session lately (see [`CONTENDED_FOR`]).
    contended_until: Option<Instant>,
    /// The store forgot this never-written session (the retention sweep):
    /// it is opened anew, with a new epoch, before any other use.
    forgotten: bool,
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

    /// Load the projection: the latest checkpoint, then the log after it.
    async fn hydrate(&self) -> Result<State, StoreError> {
        // A shared log may be deleted or trimmed by another node while it is
        // read; then start over.
        for _ in 0..3 {
            if let Some(state) = self.try_hydrate().await? {
                return Ok(state);
            }
        }
        Err(StoreError::Unavailable(
            "the session kept changing under its loading; retry".into(),
        ))
    }

    async fn try_hydrate(&self) -> Result<Option<State>, StoreError> {
        let ctx = &self.registry.ctx;
        let store = &ctx.store;
        let shared = store.shared();
        let mut meta = store.open(&self.id).await?;
        let mut projection = Projection::new(&ctx.projection);
        // Without a checkpoint nothing was trimmed in this epoch: the log
        // starts where the epoch did (after a deletion, past the old head).
        let mut after = meta.first.saturating_sub(1);
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
        let gap = |first: u64, after: u64| StoreError::Corrupt {
            session: self.id.to_string(),
            detail: format!(
                "log continues at cursor {first} but the checkpoint covers only {after}"
            ),
        };
        let mut replayed = 0u64;
        loop {
            let Some(tail) = store.tail(&self.id, after, ctx.replay_page, &[]).await? else {
                return Ok(None);
            };
            if tail.meta.epoch != meta.epoch {
                return Ok(None);
            }
            let next = tail.events.first().map_or(tail.meta.head + 1, |e| e.cursor);
            if next != after + 1 && tail.meta.head > after {
                return if shared {
                    Ok(None)
                } else {
                    Err(gap(next, after))
                };
            }
            let full = tail.events.len() >= ctx.replay_page;
            for ev in &tail.events {
                projection.apply(&ctx.projection, ev.cursor, &self.fact(ev)?);
                after = ev.cursor;
                replayed += 1;
            }
            meta = tail.meta;
            if !full {
                break;
            }
        }
        meta.head = after;
        debug!(head = meta.head, replayed, "session hydrated");
        Ok(Some(State {
            since_checkpoint: replayed,
            meta,
            projection,
            snapshot: None,
            stale: false,
            contended_until: None,
            forgotten: false,
        }))
    }

    fn fact(&self, ev: &StoredEvent) -> Result<Fact, StoreError> {
        serde_json::from_slice(&ev.fact).map_err(|e| StoreError::Corrupt {
            session: self.id.to_string(),
            detail: format!("fact at cursor {}: {e}", ev.cursor),
        })
    }

    fn shared(&self) -> bool {
        self.registry.ctx.store.shared()
    }

    /// Bring the state up to the shared log (a no-op for single-node
    /// stores): apply what other nodes appended and pass their frames to
    /// local subscribers; reload when the log was recreated or trimmed past
    /// the state. Returns the cursors of `ids` as of the state's new head.
    async fn catch_up(
        &mut self,
        state: &mut State,
        ids: &[String],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let ctx = self.registry.ctx.clone();
        if !ctx.store.shared() {
            return Ok(Vec::new());
        }
        if state.stale {
            self.reload(state).await?;
        }
        loop {
            let tail = ctx
                .store
                .tail(&self.id, state.meta.head, ctx.replay_page, ids)
                .await?;
            let Some(tail) = tail else {
                // The session is gone from the store (flushed): start over.
                self.reload(state).await?;
                continue;
            };
            let full = tail.events.len() >= ctx.replay_page;
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
    fn advance(&mut self, state: &mut State, tail: &Tail) -> Result<bool, StoreError> {
        if tail.meta.epoch != state.meta.epoch {
            return Ok(false);
        }
        let next = tail.events.first().map_or(tail.meta.head + 1, |e| e.cursor);
        if tail.meta.head > state.meta.head && next != state.meta.head + 1 {
            return Ok(false);
        }
        let ctx = self.registry.ctx.clone();
        let cfg = &ctx.projection;
        for ev in &tail.events {
            let fact = self.fact(ev)?;
            state.projection.apply(cfg, ev.cursor, &fact);
            state.meta.head = ev.cursor;
            state.since_checkpoint += 1;
            self.publish(Arc::new(Frame::stored_delta(
                &tail.meta.epoch,
                ev.cursor,
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
    async fn reload(&mut self, state: &mut State) -> Result<(), StoreError> {
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
        let store = self.registry.ctx.store.clone();
        let mut after = old.meta.head;
        while after < state.meta.head {
            match store
                .read(&self.id, after, self.registry.ctx.replay_page)
                .await
            {
                Ok(evs) if evs.first().is_some_and(|e| e.cursor == after + 1) => {
                    for ev in evs.iter().take_while(|e| e.cursor <= state.meta.head) {
                        self.publish(Arc::new(Frame::stored_delta(
                            &state.meta.epoch,
                            ev.cursor,
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

    /// Live subscribers start over: `reset`, then the current snapshot.
    fn publish_reset(&mut self, state: &mut State, reason: &str) {
        let snapshot = self.snapshot(state);
        self.publish(Arc::new(frame::reset(reason)));
        self.publish(snapshot);
    }

    /// Follow other nodes' appends to this session (shared stores).
    async fn ensure_listening(&mut self) {
        if self.listening.is_none() && self.shared() {
            self.listening = self.registry.ctx.store.listen(&self.id).await;
        }
    }

    fn stop_listening(&mut self) {
        if let Some(n) = self.listening.take() {
            self.registry.ctx.store.unlisten(&self.id, &n);
        }
    }

    async fn serve(&mut self, mut state: State) {
        let ctx = self.registry.ctx.clone();
        let idle = ctx.idle_evict;
        let mut deadline = Instant::now() + idle;
        loop {
            let wake = match self.held.take() {
                Some(cmd) => Wake::Command(Some(cmd)),
                None => {
                    let news = self.listening.clone();
                    tokio::select! {
                        cmd = self.rx.recv() => Wake::Command(cmd),
                        _ = wait(news.as_deref()) => Wake::News,
                        _ = tokio::time::sleep_until(deadline) => Wake::Idle,
                        _ = ctx.shutdown.cancelled() => Wake::Stop,
                    }
                }
            };
            match wake {
                Wake::Command(None) | Wake::Stop => break,
                Wake::Command(Some(Command::EvictIfIdle)) => {
                    if self.subscribers() == 0 {
                        debug!("evicting to stay under sessions in memory limit");
                        metrics::counter!("projector_sessions_evicted_total", "why" => "limit")
                            .increment(1);
                        break;
                    }
                }
                Wake::Command(Some(cmd)) => {
                    deadline = Instant::now() + idle;
                    if !self.handle(&mut state, cmd).await {
                        self.leave();
                        return;
                    }
                }
                Wake::News => {
                    // Our own appends come back as news too: nothing to read.
                    let beyond = self
                        .listening
                        .as_ref()
                        .is_none_or(|n| n.beyond(&state.meta.epoch, state.meta.head));
                    if !beyond && !state.stale {
                        continue;
                    }
                    if let Err(e) = self.catch_up(&mut state, &[]).await {
                        warn!(error = %e, "catching up with the shared log failed");
                    }
                }
                Wake::Idle => {
                    if self.subscribers() == 0 {
                        debug!("evicting idle session");
                        break;
                    }
                    deadline = Instant::now() + idle;
                }
            }
        }
        // Leave the registry first so that new callers start a fresh actor,
        // then serve whatever was already queued.
        self.leave();
        self.rx.close();
        loop {
            let cmd = match self.held.take() {
                Some(cmd) => cmd,
                None => match self.rx.recv().await {
                    Some(cmd) => cmd,
                    None => return,
                },
            };
            if !self.handle(&mut state, cmd).await {
                return;
            }
        }
    }

    /// Take the ingest requests queued behind the first one, up to
    /// [`COALESCE_EVENTS`]; stop at (and hold) any other command, so that
    /// commands keep their order.
    fn gather(&mut self, batches: &mut Vec<Vec<IncomingEvent>>, replies: &mut Vec<IngestReply>) {
        let mut events: usize = batches.iter().map(Vec::len).sum();
        while events < COALESCE_EVENTS {
            match self.rx.try_recv() {
                Ok(Command::Ingest {
                    events: more,
                    reply,
                }) => {
                    events += more.len();
                    batches.push(more);
                    replies.push(reply);
                }
                Ok(other) => {
                    self.held = Some(other);
                    return;
                }
                Err(_) => return,
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

    /// Send a frame to live subscribers; drop the feed (and stop following
    /// other nodes) once nobody listens.
    fn publish(&mut self, frame: SharedFrame) {
        let Some(f) = &self.feed else { return };
        if f.receiver_count() == 0 {
            self.drop_feed();
            return;
        }
        let _ = f.send(frame);
    }

    fn drop_feed(&mut self) {
        self.feed = None;
        *self.feed_view.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.stop_listening();
    }

    fn leave(&mut self) {
        self.stop_listening();
        self.registry
            .sessions
            .remove_if(&*self.id, |_, h| h.generation == self.generation);
    }

    async fn stop_with_error(&mut self, e: StoreError) {
        self.leave();
        self.rx.close();
        let msg = e.to_string();
        while let Some(cmd) = self.rx.recv().await {
            fail(cmd, StoreError::Unavailable(msg.clone()));
        }
    }

    /// Serve one command. Returns false when the actor must stop.
    async fn handle(&mut self, state: &mut State, cmd: Command) -> bool {
        if state.forgotten && !matches!(cmd, Command::Expire { .. } | Command::EvictIfIdle) {
            match self.hydrate().await {
                Ok(fresh) => *state = fresh,
                Err(e) => {
                    fail(cmd, e);
                    return true;
                }
            }
        }
        if self.shared() {
            // Commands that read the projection see the shared log's head;
            // subscribers first follow the session, so nothing slips between.
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
                if let Err(e) = self.catch_up(state, &[]).await {
                    warn!(error = %e, "catching up with the shared log failed");
                    fail(cmd, e);
                    return true;
                }
            }
        }
        match cmd {
            Command::Ingest { events, reply } => {
                let (mut batches, mut replies) = (vec![events], vec![reply]);
                self.gather(&mut batches, &mut replies);
                if replies.len() > 1 {
                    metrics::counter!("projector_ingest_coalesced_total")
                        .increment(replies.len() as u64 - 1);
                }
                match self.ingest(state, &batches).await {
                    Ok(outcomes) => {
                        for (reply, outcome) in replies.into_iter().zip(outcomes) {
                            let _ = reply.send(Ok(outcome));
                        }
                    }
                    Err(e) => {
                        for reply in replies {
                            let _ = reply.send(Err(SessionError::Store(e.again())));
                        }
                        // On a shared store the state was rolled back or
                        // marked stale (the next command reloads it); a
                        // single-node store's projection is rebuilt now.
                        if !self.shared() {
                            warn!(error = %e, "append failed; rebuilding the projection from the store");
                            match self.hydrate().await {
                                Ok(fresh) => *state = fresh,
                                Err(e) => {
                                    warn!(error = %e, "rehydration failed; stopping the session actor");
                                    self.stop_with_error(e).await;
                                    return false;
                                }
                            }
                        }
                    }
                }
            }
            Command::Subscribe {
                cursor,
                epoch,
                reply,
            } => {
                let meta = state.meta.clone();
                let reset = cursor.and_then(|n| resume_refusal(&meta, n, epoch.as_deref()));
                let start = match (cursor, reset) {
                    (Some(after), None) => Start::Resume { after },
                    (_, reset) => Start::Fresh {
                        reset,
                        snapshot: self.snapshot(state),
                    },
                };
                let _ = reply.send(Ok(Subscription {
                    rx: self.subscribe_feed(),
                    meta,
                    start,
                }));
            }
            Command::Snapshot { reply } => {
                let frame = self.snapshot(state);
                let _ = reply.send(Ok((state.meta.clone(), frame)));
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
                let _ = reply.send(Ok(found.cloned().map(|message| MessageFeed {
                    message,
                    rx: self.subscribe_feed(),
                    meta: state.meta.clone(),
                })));
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
                let _ = reply.send(Ok(page));
            }
            Command::ControlTarget { action_id, reply } => {
                let p = &state.projection;
                let _ = reply.send(Ok(ControlTarget {
                    control_url: p.control_url().map(str::to_string),
                    action_status: action_id
                        .and_then(|id| p.state().actions.get(&id))
                        .map(|a| a.status.clone()),
                }));
            }
            Command::EvictIfIdle => {}
            Command::Delete { reply } => {
                let result = self.registry.ctx.store.delete(&self.id).await;
                let _ = reply.send(match result {
                    Ok(meta) => {
                        self.deleted(state, meta.clone());
                        Ok(meta)
                    }
                    Err(e) => Err(SessionError::Store(e)),
                });
            }
            Command::Expire { before_ms, reply } => {
                let store = self.registry.ctx.store.clone();
                // Opened by a read or a subscription, never written: while
                // someone here watches it, it stays; else it goes whole (and
                // is opened anew if it is used again; commands already queued
                // here are served that way). Another node may have appended
                // meanwhile: the store checks, and then it is a session like
                // any other (below).
                if state.forgotten {
                    let _ = reply.send(Ok(false));
                    return true;
                }
                if state.meta.head == 0 && !state.meta.deleted {
                    if self.subscribers() > 0 {
                        let _ = reply.send(Ok(false));
                        return true;
                    }
                    match store.forget_idle(&self.id, before_ms).await {
                        Ok(true) => {
                            debug!("forgot a session that was never written to");
                            state.forgotten = true;
                            let _ = reply.send(Ok(true));
                            return true;
                        }
                        Ok(false) => {}
                        Err(e) => {
                            let _ = reply.send(Err(SessionError::Store(e)));
                            return true;
                        }
                    }
                }
                let _ = reply.send(match store.delete_idle(&self.id, before_ms).await {
                    Ok(Some(meta)) => {
                        self.deleted(state, meta);
                        Ok(true)
                    }
                    Ok(None) => Ok(false),
                    Err(e) => Err(SessionError::Store(e)),
                });
            }
        }
        true
    }

    /// The session was deleted: an empty projection at the tombstone;
    /// live subscribers get `reset` + the empty snapshot.
    fn deleted(&mut self, state: &mut State, meta: SessionMeta) {
        state.meta = meta;
        state.projection = Projection::new(&self.registry.ctx.projection);
        state.since_checkpoint = 0;
        state.snapshot = None;
        state.stale = false;
        self.publish_reset(state, "session_deleted");
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

    /// Dedupe, assign cursors, reduce, append, publish: several requests
    /// (`batches`) in one append, each with its own outcome. With a shared
    /// store the append may be refused because another node appended first:
    /// the projection is rolled back (or reloaded), caught up, and the
    /// batches reduced again on top, after a short random pause so that
    /// contending nodes take turns.
    async fn ingest(
        &mut self,
        state: &mut State,
        batches: &[Vec<IncomingEvent>],
    ) -> Result<Vec<IngestOutcome>, StoreError> {
        let ctx = self.registry.ctx.clone();
        let ids: Vec<String> = batches
            .iter()
            .flatten()
            .map(|e| e.fact.id.clone())
            .collect();
        if !ctx.store.shared() {
            let known = ctx.store.lookup_ids(&self.id, &ids).await?;
            return self.try_ingest(state, batches, known, 0).await;
        }
        let mut attempt = 0;
        loop {
            let known = self.catch_up(state, &ids).await?;
            let contended = state.contended_until.is_some_and(|t| t > Instant::now());
            let backup = contended.then(|| (state.projection.clone(), state.since_checkpoint));
            match self.try_ingest(state, batches, known, attempt).await {
                Ok(outcomes) => return Ok(outcomes),
                Err(e) => {
                    match backup {
                        Some((projection, since)) => {
                            state.projection = projection;
                            state.since_checkpoint = since;
                        }
                        None => state.stale = true,
                    }
                    if !matches!(e, StoreError::Conflict { .. }) || attempt >= ctx.conflict_retries
                    {
                        return Err(e);
                    }
                    attempt += 1;
                    metrics::counter!("projector_ingest_conflicts_total").increment(1);
                    debug!(
                        attempt,
                        "another node appended first; catching up and retrying"
                    );
                    state.contended_until = Some(Instant::now() + CONTENDED_FOR);
                    tokio::time::sleep(backoff(attempt)).await;
                }
            }
        }
    }

    /// One attempt; `attempt` counts the conflicts before it.
    async fn try_ingest(
        &mut self,
        state: &mut State,
        batches: &[Vec<IncomingEvent>],
        known: Vec<Option<u64>>,
        attempt: u32,
    ) -> Result<Vec<IngestOutcome>, StoreError> {
        let ctx = self.registry.ctx.clone();
        let total: usize = batches.iter().map(Vec::len).sum();
        let mut known = known.into_iter().chain(std::iter::repeat(None));
        let mut in_group = HashSet::with_capacity(total);
        let mut stored = Vec::with_capacity(total);
        let mut frames = Vec::with_capacity(total);
        let mut outcomes = Vec::with_capacity(batches.len());
        let mut cursor = state.meta.head;
        let received_ms = store::now_ms();
        for events in batches {
            let mut out = IngestOutcome {
                accepted: 0,
                duplicates: 0,
                cursor: 0,
                epoch: state.meta.epoch.clone(),
                warnings: Vec::new(),
            };
            for ev in events {
                let seen = known.next().flatten();
                if seen.is_some() || !in_group.insert(ev.fact.id.as_str()) {
                    out.duplicates += 1;
                    continue;
                }
                cursor += 1;
                out.accepted += 1;
                out.cursor = cursor;
                let applied = state.projection.apply(&ctx.projection, cursor, &ev.fact);
                for w in &ev.warnings {
                    out.warnings.push(Warning {
                        index: ev.index,
                        event_id: ev.fact.id.clone(),
                        code: w.code.to_string(),
                        path: Some(w.path.clone()),
                        message: w.message.clone(),
                    });
                }
                for f in applied.findings {
                    out.warnings.push(Warning {
                        index: ev.index,
                        event_id: ev.fact.id.clone(),
                        code: f.code,
                        path: None,
                        message: f.message,
                    });
                }
                let frame = frame::delta(
                    &state.meta.epoch,
                    cursor,
                    &ev.fact.id,
                    &ev.fact.class,
                    &applied.chunks,
                );
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
            outcomes.push(out);
        }
        let accepted = stored.len();
        if accepted > 0 {
            // A retry after a conflict stays small and quick: the checkpoint
            // waits for an uncontended append.
            let due =
                attempt == 0 && state.since_checkpoint + accepted as u64 >= ctx.checkpoint_every;
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
                        epoch: state.meta.epoch.clone(),
                        events: stored,
                        checkpoint,
                        status: Some(state.projection.state().runtime.status.clone()),
                        // Refused twice in a row: ask for the next turn.
                        claim: attempt >= 2,
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
            .increment((total - accepted) as u64);
        for out in &mut outcomes {
            // A request whose events were all duplicates answers the head.
            if out.accepted == 0 {
                out.cursor = state.meta.head;
            }
            out.epoch.clone_from(&state.meta.epoch);
        }
        Ok(outcomes)
    }
}

/// A random pause before retrying after the `attempt`-th conflict: up to
/// 1, 2, 4 .. 16 ms, so that nodes contending for one session take turns.
fn backoff(attempt: u32) -> Duration {
    let cap_us = 1000u64 << attempt.min(4);
    let r = (uuid::Uuid::new_v4().as_u128() as u64) % cap_us;
    Duration::from_micros(r)
}

/// Wait for news from other nodes, or forever when not listening.
async fn wait(news: Option<&News>) {
    match news {
        Some(n) => n.wait().await,
        None => std::future::pending().await,
    }
}

/// Answer a command with a store error.
fn fail(cmd: Command, e: StoreError) {
    let e = SessionError::Store(e);
    match cmd {
        Command::Ingest { reply, .. } => drop(reply.send(Err(e))),
        Command::Subscribe { reply, .. } => drop(reply.send(Err(e))),
        Command::Snapshot { reply } => drop(reply.send(Err(e))),
        Command::Message { reply, .. } => drop(reply.send(Err(e))),
        Command::Messages { reply, .. } => drop(reply.send(Err(e))),
        Command::ControlTarget { reply, .. } => drop(reply.send(Err(e))),
        Command::Delete { reply } => drop(reply.send(Err(e))),
        Command::Expire { reply, .. } => drop(reply.send(Err(e))),
        Command::EvictIfIdle => {}
    }
}

/// Why a subscriber cannot resume after cursor `n` (of `epoch`, when it
/// names one) on the log `meta` describes, or `None` when it can: the
/// reason of the `reset` that precedes its fresh snapshot.
///
/// A cursor of another epoch, or a bare one at or below `meta.base`, belongs
/// to a log that is gone (deleted, or a memory store's before a restart):
/// resuming it would lay the new log's frames on the old one's state. (A
/// bare cursor equal to `base` may also be the snapshot cursor of the
/// tombstone; a reset is then merely redundant, never wrong.)
fn resume_refusal(meta: &SessionMeta, n: u64, epoch: Option<&str>) -> Option<&'static str> {
    let deleted = meta.base > 0 && n <= meta.base;
    match epoch {
        Some(e) if e != meta.epoch => Some(if deleted {
            "session_deleted"
        } else {
            "epoch_mismatch"
        }),
        None if deleted => Some("session_deleted"),
        _ if n > meta.head => Some("cursor_ahead"),
        _ if n + 1 < meta.first => Some("cursor_expired"),
        _ => None,
    }
}
