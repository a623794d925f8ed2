//! The session actor: one task per active session owns its projection. It
//! hydrates from the store, then serves [`Command`]s one at a time until it
//! is idle with no subscribers, evicted, or shut down. Each concern has its
//! room: [`hydrate`] (checkpoint + tail), [`ingest`] (dedupe, cursors,
//! reduce, append, publish), [`commands`] (everything else a caller asks),
//! [`feed`] (the live broadcast and the snapshot frame) and [`sync`] (the
//! shared-store catching up, a no-op on a single node).
//!
//! Awaits off the hot path (hydrating again, failing, deleting, expiring,
//! interrupting, a shared store's catching up) are boxed: an async fn's
//! future is as large as the largest thing it awaits, and it is copied
//! whole each time it is made and awaited. Unboxed, serving one command
//! made and copied about 40 KiB of futures (`handle` 14.7 KiB, the ingest
//! in it 14.3), 7.5% of a single-event POST's samples in `memmove`
//! (docs/BENCHMARKS.md, "Futures boxed off the hot path").

mod commands;
mod feed;
mod hydrate;
mod ingest;
mod silence;
mod sync;

use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn, Instrument};

use super::{Command, RegistryConfig, SessionError};
use crate::frame::SharedFrame;
use crate::projection::Projection;
use crate::session::listing::Listing;
use crate::store::{News, SessionMeta, SharedLog, StoreError};

/// What every actor of a registry shares: the store, the settings and the
/// shutdown signal.
pub(super) struct ActorCtx {
    pub store: SharedLog,
    /// The store is shared by several nodes ([`crate::store::EventLog::shared`]).
    pub shared: bool,
    pub cfg: RegistryConfig,
    pub shutdown: CancellationToken,
    /// The node's live session index.
    pub index: Arc<super::index::Index>,
    /// The sessions whose run is working (the silent-run sweep's).
    pub watch: Arc<super::silence::Watch>,
}

/// How an actor leaves its registry when it stops, so that new callers
/// start a fresh actor: removes the registry's entry for this actor (and
/// only this one), nothing else.
pub(super) type Leave = Box<dyn Fn() + Send + Sync>;

pub(super) struct Actor {
    pub id: Arc<str>,
    pub ctx: Arc<ActorCtx>,
    pub leave_registry: Leave,
    pub rx: mpsc::Receiver<Command>,
    /// The live feed, created when the first subscriber comes and dropped
    /// when the last one has gone: an idle session holds no channel buffer.
    pub feed: Option<broadcast::Sender<SharedFrame>>,
    /// Shared with the registry's handle, to count subscribers.
    pub feed_view: Arc<super::FeedView>,
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
struct Loaded {
    /// Where the log stood after the last event applied (committed).
    meta: SessionMeta,
    projection: Projection,
    since_checkpoint: u64,
    /// The size of the last checkpoint written or loaded: the next one's
    /// buffer starts at about that, not empty (grown from empty, a large
    /// projection was copied a dozen times per checkpoint).
    checkpoint_bytes: usize,
    snapshot: Option<SharedFrame>,
    /// The projection may hold facts the store did not confirm (a shared
    /// store failed an append); it is reloaded before any other use.
    stale: bool,
    /// Another node appended to this session lately (see
    /// [`sync::CONTENDED_FOR`]).
    contended_until: Option<Instant>,
    /// The store forgot this never-written session (the retention sweep):
    /// it is opened anew, with a new epoch, before any other use.
    forgotten: bool,
    /// The last listing this actor wrote, and its text: an append whose
    /// listing is the same, with the same text still in `meta`, sends none
    /// (the store keeps it) and does not encode it again.
    listed: Option<(Listing, String)>,
}

impl Actor {
    pub async fn run(mut self) {
        let span = tracing::info_span!("session", session_id = %self.id);
        async move {
            metrics::gauge!("projector_sessions_live").increment(1.0);
            // Taken apart in a statement of its own, so that the result
            // does not live on in this future while it serves.
            let hydrated = Box::pin(self.hydrate()).await;
            match hydrated {
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

    async fn serve(&mut self, mut state: Loaded) {
        let ctx = self.ctx.clone();
        let idle = ctx.cfg.idle_evict;
        let mut deadline = Instant::now() + idle;
        // One timer for the actor's life, moved only when it fires: a
        // command pushes `deadline` back without touching the runtime's
        // timer wheel (a sleep made per command was registered and removed
        // for every request, 1.5% of a single-event POST,
        // docs/BENCHMARKS.md).
        let timer = tokio::time::sleep_until(deadline);
        tokio::pin!(timer);
        loop {
            let wake = match self.held.take() {
                Some(cmd) => Wake::Command(Some(cmd)),
                None => {
                    let news = self.listening.clone();
                    tokio::select! {
                        cmd = self.rx.recv() => Wake::Command(cmd),
                        _ = sync::wait(news.as_deref()) => Wake::News,
                        _ = &mut timer => Wake::Idle,
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
                    // What waits behind this command in the mailbox.
                    kept!(histogram, "projector_actor_mailbox_depth").record(self.rx.len() as f64);
                    deadline = Instant::now() + idle;
                    if !self.handle(&mut state, cmd).await {
                        self.leave();
                        return;
                    }
                }
                Wake::News => Box::pin(self.on_news(&mut state)).await,
                Wake::Idle => {
                    // Not idle for long enough if a command came since.
                    if Instant::now() >= deadline {
                        if self.subscribers() == 0 {
                            debug!("evicting idle session");
                            break;
                        }
                        deadline = Instant::now() + idle;
                    }
                    timer.as_mut().reset(deadline);
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

    /// Serve one command. Returns false when the actor must stop.
    async fn handle(&mut self, state: &mut Loaded, cmd: Command) -> bool {
        if state.forgotten && !matches!(cmd, Command::Expire { .. } | Command::EvictIfIdle) {
            match Box::pin(self.hydrate()).await {
                Ok(fresh) => *state = fresh,
                Err(e) => {
                    fail(cmd, e);
                    return true;
                }
            }
        }
        if self.ctx.shared {
            if let Err(e) = Box::pin(self.sync_for(state, &cmd)).await {
                fail(cmd, e);
                return true;
            }
        }
        match cmd {
            Command::Ingest {
                events,
                reply,
                span,
            } => {
                return self.serve_ingest(state, events, reply, span).await;
            }
            Command::Subscribe {
                cursor,
                epoch,
                reply,
            } => {
                let sub = self.subscribe(state, cursor, epoch.as_deref());
                let _ = reply.send(Ok(sub));
            }
            Command::Snapshot { reply } => {
                let frame = self.snapshot(state);
                let _ = reply.send(Ok((state.meta.clone(), frame)));
            }
            Command::Message { pick, reply } => {
                let _ = reply.send(Ok(self.message(state, &pick)));
            }
            Command::Messages {
                before,
                limit,
                reply,
            } => {
                let _ = reply.send(Ok(Self::messages(state, before.as_deref(), limit)));
            }
            Command::ControlTarget { action_id, reply } => {
                let _ = reply.send(Ok(Self::control_target(state, action_id.as_deref())));
            }
            Command::EvictIfIdle => {}
            Command::Delete { reply } => {
                let _ = reply.send(Box::pin(self.delete(state)).await);
            }
            Command::Expire { before_ms, reply } => {
                let _ = reply.send(Box::pin(self.expire(state, before_ms)).await);
            }
            Command::Interrupt {
                timeouts,
                limits,
                reply,
            } => {
                return Box::pin(self.interrupt_if_silent(state, timeouts, &limits, reply)).await;
            }
        }
        true
    }

    /// Leave the registry and stop following other nodes.
    fn leave(&mut self) {
        self.stop_listening();
        (self.leave_registry)();
    }

    /// Stop: leave the registry, and answer what was queued with the error.
    async fn stop_with_error(&mut self, e: StoreError) {
        self.leave();
        self.rx.close();
        let msg = e.to_string();
        while let Some(cmd) = self.rx.recv().await {
            fail(cmd, StoreError::Unavailable(msg.clone()));
        }
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
        Command::Interrupt { reply, .. } => drop(reply.send(Err(e))),
        Command::EvictIfIdle => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::projection::ProjectionConfig;
    use crate::store::memory::MemoryLog;
    use crate::store::Retention;

    fn actor(id: &str) -> Actor {
        let store: SharedLog = Arc::new(MemoryLog::new(Retention {
            max_events_per_session: 1_000,
            max_age_ms: None,
        }));
        let cfg = RegistryConfig {
            projection: ProjectionConfig::default(),
            max_live: 16,
            idle_evict: Duration::from_secs(60),
            mailbox: 4,
            checkpoint_every: 100,
            live_buffer: 16,
            replay_page: 16,
            index_buffer: 16,
            conflict_retries: 0,
        };
        Actor {
            id: id.into(),
            ctx: Arc::new(ActorCtx {
                shared: store.shared(),
                store,
                index: Arc::new(super::super::index::Index::new(cfg.index_buffer)),
                watch: Arc::default(),
                cfg,
                shutdown: CancellationToken::new(),
            }),
            leave_registry: Box::new(|| {}),
            rx: mpsc::channel(4).1,
            feed: None,
            feed_view: Arc::default(),
            listening: None,
            held: None,
        }
    }

    /// The futures made for every command, and copied whole each time, stay
    /// small: the rare awaits are boxed and none holds a projection (the
    /// module's comment). Unboxed they were 14.7 KiB and 37.9 KiB.
    #[tokio::test]
    async fn the_futures_made_per_command_stay_small() {
        let mut a = actor("s");
        let mut state = a.hydrate().await.expect("a memory store hydrates");
        let handling = a.handle(&mut state, Command::EvictIfIdle);
        let size = std::mem::size_of_val(&handling);
        assert!(size <= 2048, "serving a command makes a {size}-byte future");
        assert!(handling.await, "the actor goes on");
        let running = actor("t").run();
        let size = std::mem::size_of_val(&running);
        assert!(
            size <= 12 * 1024,
            "a session's task is a {size}-byte future"
        );
    }
}
