//! The registry of live session actors (a DashMap from session id to
//! handle): finds or starts an actor, retries once an evicted actor's handle
//! is found closed, and never holds a map lock across an `.await`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::actor::{Actor, ActorCtx};
use super::{
    ControlTarget, IncomingEvent, IngestOutcome, MessageFeed, MessagePick, RegistryConfig,
    SessionError, SessionHandle, Subscription,
};
use crate::frame::SharedFrame;
use crate::store::{SessionMeta, SharedLog};

/// The live actors by session id, and what they share.
struct RegistryInner {
    /// Hashed with foldhash (seeded per process, as the projection's keyed
    /// maps): SipHash of the id was three lookups' worth of every request.
    sessions: Arc<DashMap<Arc<str>, SessionHandle, foldhash::fast::RandomState>>,
    ctx: Arc<ActorCtx>,
    next_generation: AtomicU64,
    tasks: TaskTracker,
    /// Logical clock for least-recently-used eviction.
    tick: AtomicU64,
}

/// Finds or starts session actors.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<RegistryInner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("live", &self.inner.sessions.len())
            .finish()
    }
}

/// Attempts before giving up on an actor that keeps stopping.
const ATTEMPTS: usize = 3;

impl Registry {
    /// A registry over `store`; actors stop when `shutdown` is cancelled.
    pub fn new(store: SharedLog, cfg: RegistryConfig, shutdown: CancellationToken) -> Self {
        let notes = store.index_notes();
        let registry = Registry {
            inner: Arc::new(RegistryInner {
                sessions: Arc::new(DashMap::default()),
                ctx: Arc::new(ActorCtx {
                    shared: store.shared(),
                    store,
                    index: Arc::new(super::index::Index::new(cfg.index_buffer)),
                    watch: Arc::new(super::silence::Watch::default()),
                    cfg,
                    shutdown,
                }),
                next_generation: AtomicU64::new(1),
                tasks: TaskTracker::new(),
                tick: AtomicU64::new(0),
            }),
        };
        if let Some(rx) = notes {
            let relay = super::index::relay(
                registry.store().clone(),
                registry.inner.ctx.index.clone(),
                registry.inner.ctx.watch.clone(),
                rx,
                registry.inner.ctx.shutdown.clone(),
            );
            registry.spawn_task(relay);
        }
        registry
    }

    /// The store behind the registry.
    pub fn store(&self) -> &SharedLog {
        &self.inner.ctx.store
    }

    /// The node's live session index.
    pub fn index(&self) -> &super::index::Index {
        &self.inner.ctx.index
    }

    /// Spawn a background task that shutdown waits for (e.g. the sweep).
    pub fn spawn_task<F>(&self, f: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.tasks.spawn(f);
    }

    /// After shutdown was signalled: wait until every actor (and task) has
    /// finished, so that nothing holds the store any more.
    pub async fn wait_stopped(&self) {
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }

    /// Number of live session actors.
    pub fn live(&self) -> usize {
        self.inner.sessions.len()
    }

    /// The live feed of a session's running actor (no actor is started
    /// for it).
    pub fn feed(&self, id: &str) -> Option<Arc<super::FeedView>> {
        Some(self.inner.sessions.get(id)?.feed.clone())
    }

    /// The handle of a session's actor, starting one if needed.
    pub fn handle(&self, id: &str) -> SessionHandle {
        let now = self.inner.tick.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = self.inner.sessions.get(id) {
            if !h.is_closed() {
                h.last_used.store(now, Ordering::Relaxed);
                return h.clone();
            }
        }
        let h = match self.inner.sessions.entry(Arc::from(id)) {
            Entry::Occupied(mut e) => {
                if e.get().is_closed() {
                    let h = self.spawn(e.key().clone());
                    e.insert(h.clone());
                    h
                } else {
                    e.get().clone()
                }
            }
            Entry::Vacant(v) => {
                let h = self.spawn(v.key().clone());
                v.insert(h.clone());
                h
            }
        };
        h.last_used.store(now, Ordering::Relaxed);
        self.evict_over_limit(id);
        h
    }

    /// Over `max_live`: ask the least recently used actors to stop if
    /// nobody is subscribed (they decide; a busy one stays).
    fn evict_over_limit(&self, keep: &str) {
        let live = self.inner.sessions.len();
        let max = self.inner.ctx.cfg.max_live.max(1);
        if live <= max {
            return;
        }
        // Sessions with subscribers stay: evicting them would only restart them.
        let mut by_age: Vec<(u64, SessionHandle)> = self
            .inner
            .sessions
            .iter()
            .filter(|e| &**e.key() != keep && e.subscribers() == 0)
            .map(|e| (e.last_used.load(Ordering::Relaxed), e.value().clone()))
            .collect();
        by_age.sort_by_key(|(t, _)| *t);
        let excess = (live - max).max(live / 100).max(1);
        for (_, h) in by_age.into_iter().take(excess) {
            let _ = h.tx.try_send(super::Command::EvictIfIdle);
        }
    }

    fn spawn(&self, id: Arc<str>) -> SessionHandle {
        let ctx = &self.inner.ctx;
        let (tx, rx) = mpsc::channel(ctx.cfg.mailbox);
        let feed_view = Arc::new(super::FeedView::default());
        let generation = self.inner.next_generation.fetch_add(1, Ordering::Relaxed);
        // The actor removes its own entry when it stops, never a successor's.
        let sessions = Arc::downgrade(&self.inner.sessions);
        let key = id.clone();
        let leave_registry = Box::new(move || {
            if let Some(sessions) = sessions.upgrade() {
                sessions.remove_if(&*key, |_, h| h.generation == generation);
            }
        });
        let actor = Actor {
            id: id.clone(),
            ctx: ctx.clone(),
            leave_registry,
            rx,
            feed: None,
            feed_view: feed_view.clone(),
            listening: None,
            held: None,
        };
        self.inner.tasks.spawn(actor.run());
        SessionHandle {
            id,
            generation,
            tx,
            last_used: Arc::new(AtomicU64::new(0)),
            feed: feed_view,
        }
    }

    async fn with_retry<T, F, Fut>(&self, id: &str, f: F) -> Result<T, SessionError>
    where
        F: Fn(SessionHandle) -> Fut,
        Fut: std::future::Future<Output = Result<T, SessionError>>,
    {
        let mut last = SessionError::Stopped;
        for _ in 0..ATTEMPTS {
            if self.inner.ctx.shutdown.is_cancelled() {
                return Err(SessionError::Stopped);
            }
            match f(self.handle(id)).await {
                Err(SessionError::Stopped) => last = SessionError::Stopped,
                other => return other,
            }
        }
        Err(last)
    }

    /// Append and project a validated batch into a session. A batch sent to
    /// an actor that just stopped comes back untouched and goes to a new one.
    pub async fn ingest(
        &self,
        id: &str,
        mut events: Vec<IncomingEvent>,
    ) -> Result<IngestOutcome, SessionError> {
        for _ in 0..ATTEMPTS {
            if self.inner.ctx.shutdown.is_cancelled() {
                break;
            }
            match self.handle(id).send_ingest(events).await {
                Ok(rx) => return rx.await.map_err(|_| SessionError::Stopped)?,
                Err(back) => events = back,
            }
        }
        Err(SessionError::Stopped)
    }

    /// Subscribe to a session from an optional cursor and epoch.
    pub async fn subscribe(
        &self,
        id: &str,
        cursor: Option<u64>,
        epoch: Option<String>,
    ) -> Result<Subscription, SessionError> {
        self.with_retry(id, |h| {
            let epoch = epoch.clone();
            async move { h.subscribe(cursor, epoch).await }
        })
        .await
    }

    /// A message of a session and the live feed right after it.
    pub async fn message(
        &self,
        id: &str,
        pick: MessagePick,
    ) -> Result<Option<MessageFeed>, SessionError> {
        self.with_retry(id, |h| {
            let pick = pick.clone();
            async move { h.message(pick).await }
        })
        .await
    }

    /// Delete a session through its actor, so that live subscribers and the
    /// projection start over together.
    pub async fn delete(&self, id: &str) -> Result<SessionMeta, SessionError> {
        self.with_retry(id, |h| async move { h.delete().await })
            .await
    }

    /// Delete sessions whose last event is older than `before_ms`, and
    /// forget never-written ones opened before it (the retention sweep; see
    /// [`crate::session::Command::Expire`]). Returns how many went.
    pub async fn expire(&self, before_ms: u64) -> Result<usize, SessionError> {
        let ids = self.store().expired(before_ms, 1000).await?;
        let mut deleted = 0;
        for id in &ids {
            // The actor checks again, atomically with the deletion, so that a
            // session written to meanwhile (maybe on another node) stays.
            if self
                .with_retry(id, |h| async move { h.expire(before_ms).await })
                .await?
            {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// The sessions of this node whose run is working.
    pub fn watch(&self) -> &super::silence::Watch {
        &self.inner.ctx.watch
    }

    /// Have a session's actor end its run if it went silent (see
    /// [`crate::session::Command::Interrupt`]).
    pub async fn interrupt_if_silent(
        &self,
        id: &str,
        timeouts: crate::projection::idle::Timeouts,
        limits: &crate::event::Limits,
    ) -> Result<super::silence::Verdict, SessionError> {
        let limits = *limits;
        self.with_retry(id, |h| async move {
            h.interrupt_if_silent(timeouts, limits).await
        })
        .await
    }

    /// A session's control URL and, when asked, an action's status, from
    /// its actor (see [`crate::session::Command::ControlTarget`]).
    pub async fn control_target(
        &self,
        id: &str,
        action_id: Option<&str>,
    ) -> Result<ControlTarget, SessionError> {
        self.with_retry(id, |h| {
            let action_id = action_id.map(str::to_string);
            async move { h.control_target(action_id).await }
        })
        .await
    }

    /// A page of a session's messages (see [`crate::session::Command::Messages`]).
    pub async fn messages(
        &self,
        id: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Option<crate::session::MessagePage>, SessionError> {
        self.with_retry(id, |h| {
            let before = before.map(str::to_string);
            async move { h.messages(before, limit).await }
        })
        .await
    }

    /// The current snapshot frame of a session.
    pub async fn snapshot(&self, id: &str) -> Result<(SessionMeta, SharedFrame), SessionError> {
        self.with_retry(id, |h| async move { h.snapshot().await })
            .await
    }
}
