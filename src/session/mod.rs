//! Per-session actors: one task per active session owns its projection,
//! appends to the store and fans frames out; a [`Registry`] finds or starts
//! actors and evicts idle ones. Callers talk to an actor through a cheap
//! [`SessionHandle`] (an `mpsc` of [`Command`]s with `oneshot` replies).

mod actor;
pub mod index;
mod listing;
mod registry;
pub mod silence;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::event::{Fact, Issue};
use crate::frame::SharedFrame;
use crate::store::{SessionMeta, StoreError};

pub use listing::Listing;
pub use registry::Registry;

/// Settings of the registry and its actors.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    pub projection: crate::projection::ProjectionConfig,
    /// Session actors kept in memory before idle ones are evicted.
    pub max_live: usize,
    pub idle_evict: Duration,
    pub mailbox: usize,
    pub checkpoint_every: u64,
    pub live_buffer: usize,
    pub replay_page: usize,
    /// Changes of the session index kept for replay.
    pub index_buffer: usize,
    /// Retries of an ingest refused because another node appended first
    /// (shared stores only).
    pub conflict_retries: u32,
}

/// An event that passed validation, with its index in the request.
#[derive(Debug, Clone)]
pub struct IncomingEvent {
    pub index: usize,
    pub fact: Fact,
    pub warnings: Vec<Issue>,
}

/// One warning in an ingest reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    pub index: usize,
    pub event_id: String,
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub message: String,
}

/// The reply to an accepted batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestOutcome {
    pub accepted: usize,
    pub duplicates: usize,
    /// Cursor of the last accepted event (the head when all were duplicates).
    pub cursor: u64,
    pub epoch: String,
    pub warnings: Vec<Warning>,
    /// With the `Producer-*` headers: the producer as the session remembers
    /// it after this request.
    #[serde(skip)]
    pub producer: Option<Produced>,
}

/// What an idempotent producer's request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Produced {
    pub producer: crate::producer::Producer,
    /// A retry of an append already written: nothing was.
    pub duplicate: bool,
}

/// What a new subscriber starts from.
#[derive(Debug)]
pub enum Start {
    /// Replay frames with cursor > `after` from the store, then the live feed.
    Resume { after: u64 },
    /// Send `reset` (when `reason` is set), then `snapshot`, then the live feed.
    Fresh {
        reset: Option<&'static str>,
        snapshot: SharedFrame,
    },
}

/// A live subscription: the feed, positioned exactly at `meta.head`.
#[derive(Debug)]
pub struct Subscription {
    pub rx: broadcast::Receiver<SharedFrame>,
    /// The feed `rx` is on, as the shared writers see it.
    pub view: Arc<FeedView>,
    pub meta: SessionMeta,
    pub start: Start,
}

/// Which message an AI SDK stream follows.
#[derive(Debug, Clone)]
pub enum MessagePick {
    /// The message with this id.
    Id(String),
    /// The newest assistant message that is still streaming (`useChat` resume).
    Streaming,
}

/// A message and the live feed positioned right after it.
#[derive(Debug)]
pub struct MessageFeed {
    pub message: crate::projection::Message,
    pub rx: broadcast::Receiver<SharedFrame>,
    pub meta: SessionMeta,
}

/// A page of a session's messages, oldest first (see
/// `Projection::messages_page`).
#[derive(Debug, Clone)]
pub struct MessagePage {
    pub messages: Vec<crate::projection::Message>,
    /// `before` of the next (older) page; `None` on the oldest page.
    pub next_before: Option<String>,
    /// Messages the projection holds.
    pub total: usize,
    pub meta: SessionMeta,
}

/// What relaying a control needs from a session's own actor.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlTarget {
    /// The runtime's control URL from the session's `session.opened` facts.
    pub control_url: Option<String>,
    /// The status (`pending | resolved`) of the action asked about; `None`
    /// when none was asked or the projection has no such action.
    pub action_status: Option<String>,
    /// The JSON Schema an answer to that action must satisfy, if its
    /// request has one.
    pub answer_schema: Option<serde_json::Value>,
}

/// Errors an actor reports to its callers.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("session actor stopped")]
    Stopped,
    /// An idempotent producer's request refused (nothing written).
    #[error("producer fenced: {0:?}")]
    Fenced(crate::producer::Fenced),
}

/// Where an ingest request's outcome goes.
pub(crate) type IngestReply = oneshot::Sender<Result<IngestOutcome, SessionError>>;

/// Commands an actor serves, one at a time.
#[derive(Debug)]
pub enum Command {
    /// Append and project a validated batch.
    Ingest {
        events: Vec<IncomingEvent>,
        reply: IngestReply,
        /// The caller's span, which the append's span continues (none
        /// unless traces are exported).
        span: tracing::Span,
    },
    /// Subscribe from an optional cursor (and epoch).
    Subscribe {
        cursor: Option<u64>,
        epoch: Option<String>,
        reply: oneshot::Sender<Result<Subscription, SessionError>>,
    },
    /// The current snapshot frame.
    Snapshot {
        reply: oneshot::Sender<Result<(SessionMeta, SharedFrame), SessionError>>,
    },
    /// A message as it stands, with the feed positioned right after it.
    Message {
        pick: MessagePick,
        reply: oneshot::Sender<Result<Option<MessageFeed>, SessionError>>,
    },
    /// A page of messages before a message id (or the newest); `None` when
    /// `before` names no message of the projection.
    Messages {
        before: Option<String>,
        limit: usize,
        reply: oneshot::Sender<Result<Option<MessagePage>, SessionError>>,
    },
    /// The control URL and, when `action_id` is given, that action's status.
    ControlTarget {
        action_id: Option<String>,
        reply: oneshot::Sender<Result<ControlTarget, SessionError>>,
    },
    /// Stop if nobody is subscribed (the registry is over its size limit).
    EvictIfIdle,
    /// Delete the session's log, leaving a tombstone; live subscribers get
    /// `reset` + an empty `snapshot`.
    Delete {
        reply: oneshot::Sender<Result<SessionMeta, SessionError>>,
    },
    /// The retention sweep: delete the session, as [`Command::Delete`]
    /// does, only if nothing was appended since `before_ms`; a session
    /// never written to and opened before then is forgotten whole instead
    /// (see [`crate::store::EventLog::forget_idle`]) unless it has
    /// subscribers here. True if the session went.
    Expire {
        before_ms: u64,
        reply: oneshot::Sender<Result<bool, SessionError>>,
    },
    /// End the session's run if it went silent past `timeouts`
    /// (`projection::idle`), with the fact that says so, in one step with
    /// the check (see [`silence`]).
    Interrupt {
        timeouts: crate::projection::idle::Timeouts,
        limits: crate::event::Limits,
        reply: oneshot::Sender<Result<silence::Verdict, SessionError>>,
    },
}

/// A session's live feed as the registry and the shared writers see it:
/// the sender, while the actor has one, how many subscribers the shared
/// writers (`stream::shard`) hold beyond their one receiver each, so that
/// the subscribers are counted as streams, not receivers, and how many
/// frames the actor has begun and finished sending on it.
#[derive(Debug, Default)]
pub struct FeedView {
    sender: std::sync::Mutex<Option<broadcast::WeakSender<SharedFrame>>>,
    in_writers: std::sync::atomic::AtomicIsize,
    /// Frames the actor began to send: counted before each send, so that a
    /// receiver subscribed after a send sees it counted
    /// ([`FeedView::begun`]).
    begun: std::sync::atomic::AtomicU64,
    /// Frames the actor has sent: counted after each send, so that every
    /// frame counted is in a receiver subscribed before it
    /// ([`FeedView::sent`]).
    sent: std::sync::atomic::AtomicU64,
}

impl FeedView {
    /// How many frames have been sent on the session's feeds. A subscriber
    /// that reads this, then finds its feed empty, has taken every one of
    /// them.
    pub fn sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many frames the actor has begun to send. A receiver subscribed
    /// before this is read gets every frame after this many (the ones
    /// before may have gone before it was there).
    pub fn begun(&self) -> u64 {
        self.begun.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The actor: send `frame` on `feed`, counted on both sides.
    fn send(&self, feed: &broadcast::Sender<SharedFrame>, frame: SharedFrame) {
        use std::sync::atomic::Ordering::Release;
        self.begun.fetch_add(1, Release);
        let _ = feed.send(frame);
        self.sent.fetch_add(1, Release);
    }

    /// The feed's sender, while the actor has a feed.
    pub fn sender(&self) -> Option<broadcast::WeakSender<SharedFrame>> {
        self.sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set(&self, sender: Option<broadcast::WeakSender<SharedFrame>>) {
        *self.sender.lock().unwrap_or_else(|p| p.into_inner()) = sender;
    }

    /// The subscribers of a feed with `receivers` receivers.
    fn subscribers(&self, receivers: usize) -> usize {
        let n = receivers as isize + self.in_writers.load(std::sync::atomic::Ordering::Relaxed);
        n.max(0) as usize
    }

    /// A shared writer took `delta` more subscribers (fewer, when
    /// negative; its own receiver counts as -1).
    pub fn writers_took(&self, delta: isize) {
        self.in_writers
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A cheap handle to a session actor.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    id: Arc<str>,
    generation: u64,
    tx: mpsc::Sender<Command>,
    /// Registry tick of the last lookup (least recently used eviction).
    last_used: Arc<std::sync::atomic::AtomicU64>,
    /// The actor's feed (while it has one), to see whether anyone is subscribed.
    feed: Arc<FeedView>,
}

impl SessionHandle {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| SessionError::Stopped)?;
        rx.await.map_err(|_| SessionError::Stopped)
    }

    /// Queue a batch; gives the batch back if the actor has stopped.
    pub(crate) async fn send_ingest(
        &self,
        events: Vec<IncomingEvent>,
    ) -> Result<oneshot::Receiver<Result<IngestOutcome, SessionError>>, Vec<IncomingEvent>> {
        let (reply, rx) = oneshot::channel();
        // The append's span continues it, in the traces only.
        let span = crate::telemetry::for_traces(tracing::Span::current);
        match self
            .tx
            .send(Command::Ingest {
                events,
                reply,
                span,
            })
            .await
        {
            Ok(()) => Ok(rx),
            Err(mpsc::error::SendError(Command::Ingest { events, .. })) => Err(events),
            Err(_) => Err(Vec::new()),
        }
    }

    /// Subscribe; see [`Start`].
    pub async fn subscribe(
        &self,
        cursor: Option<u64>,
        epoch: Option<String>,
    ) -> Result<Subscription, SessionError> {
        self.call(|reply| Command::Subscribe {
            cursor,
            epoch,
            reply,
        })
        .await?
    }

    /// The current snapshot frame and log position.
    pub async fn snapshot(&self) -> Result<(SessionMeta, SharedFrame), SessionError> {
        self.call(|reply| Command::Snapshot { reply }).await?
    }

    /// A message and the live feed after it; `None` when there is no such message.
    pub async fn message(&self, pick: MessagePick) -> Result<Option<MessageFeed>, SessionError> {
        self.call(|reply| Command::Message { pick, reply }).await?
    }

    /// See [`Command::Messages`].
    pub async fn messages(
        &self,
        before: Option<String>,
        limit: usize,
    ) -> Result<Option<MessagePage>, SessionError> {
        self.call(|reply| Command::Messages {
            before,
            limit,
            reply,
        })
        .await?
    }

    /// See [`Command::ControlTarget`].
    pub async fn control_target(
        &self,
        action_id: Option<String>,
    ) -> Result<ControlTarget, SessionError> {
        self.call(|reply| Command::ControlTarget { action_id, reply })
            .await?
    }

    /// Delete the session (see [`Command::Delete`]).
    pub async fn delete(&self) -> Result<SessionMeta, SessionError> {
        self.call(|reply| Command::Delete { reply }).await?
    }

    /// See [`Command::Expire`].
    pub async fn expire(&self, before_ms: u64) -> Result<bool, SessionError> {
        self.call(|reply| Command::Expire { before_ms, reply })
            .await?
    }

    /// See [`Command::Interrupt`].
    pub async fn interrupt_if_silent(
        &self,
        timeouts: crate::projection::idle::Timeouts,
        limits: crate::event::Limits,
    ) -> Result<silence::Verdict, SessionError> {
        self.call(|reply| Command::Interrupt {
            timeouts,
            limits,
            reply,
        })
        .await?
    }

    /// Open subscriptions on the actor's live feed.
    pub fn subscribers(&self) -> usize {
        self.feed
            .sender()
            .and_then(|w| w.upgrade())
            .map_or(0, |s| self.feed.subscribers(s.receiver_count()))
    }

    /// True when the actor is gone (evicted or failed).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
