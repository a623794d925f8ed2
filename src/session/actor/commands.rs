//! The commands an actor answers besides ingest: subscriptions (and where
//! each starts), snapshots, messages, control targets, deletion and the
//! retention sweep. Each computes its reply from the state; the actor's
//! loop sends it.

use tracing::debug;

use super::{Actor, Loaded};
use crate::projection::{Projection, Role};
use crate::session::index::{Change, SessionEntry};
use crate::session::{
    ControlTarget, MessageFeed, MessagePage, MessagePick, SessionError, Start, Subscription,
};
use crate::store::SessionMeta;

impl Actor {
    /// A subscription from `cursor` (of `epoch`): resumed from the log when
    /// the cursor still holds there, else `reset` (with the reason) and the
    /// snapshot; either way on the live feed positioned at the head.
    pub(super) fn subscribe(
        &mut self,
        state: &mut Loaded,
        cursor: Option<u64>,
        epoch: Option<&str>,
    ) -> Subscription {
        let meta = state.meta.clone();
        let reset = cursor.and_then(|n| resume_refusal(&meta, n, epoch));
        let start = match (cursor, reset) {
            (Some(after), None) => Start::Resume { after },
            (_, reset) => Start::Fresh {
                reset,
                snapshot: self.snapshot(state),
            },
        };
        Subscription {
            rx: self.subscribe_feed(),
            view: self.feed_view.clone(),
            meta,
            start,
        }
    }

    /// A message as it stands, with the feed positioned right after it.
    pub(super) fn message(&mut self, state: &Loaded, pick: &MessagePick) -> Option<MessageFeed> {
        let found = match pick {
            MessagePick::Id(id) => state.projection.message(id),
            MessagePick::Streaming => state
                .projection
                .messages()
                .iter()
                .rev()
                .find(|m| m.role == Role::Assistant && !m.is_finished()),
        };
        let message = found.cloned()?;
        Some(MessageFeed {
            message,
            rx: self.subscribe_feed(),
            meta: state.meta.clone(),
        })
    }

    /// See [`crate::session::Command::Messages`].
    pub(super) fn messages(
        state: &Loaded,
        before: Option<&str>,
        limit: usize,
    ) -> Option<MessagePage> {
        let p = &state.projection;
        p.messages_page(before, limit)
            .map(|(ms, next)| MessagePage {
                messages: ms.to_vec(),
                next_before: next,
                total: p.messages().len(),
                meta: state.meta.clone(),
            })
    }

    /// See [`crate::session::Command::ControlTarget`].
    pub(super) fn control_target(state: &Loaded, action_id: Option<&str>) -> ControlTarget {
        let p = &state.projection;
        let action = action_id.and_then(|id| p.state().actions.get(id));
        ControlTarget {
            control_url: p.control_url().map(str::to_string),
            action_status: action.map(|a| a.status.clone()),
            answer_schema: action.and_then(|a| a.request.schema.clone()),
        }
    }

    /// Delete the log, leaving a tombstone (see [`Self::deleted`]).
    pub(super) async fn delete(&mut self, state: &mut Loaded) -> Result<SessionMeta, SessionError> {
        let meta = self.ctx.store.delete(&self.id).await?;
        self.deleted(state, meta.clone());
        Ok(meta)
    }

    /// The retention sweep (see [`crate::session::Command::Expire`]).
    pub(super) async fn expire(
        &mut self,
        state: &mut Loaded,
        before_ms: u64,
    ) -> Result<bool, SessionError> {
        let store = self.ctx.store.clone();
        // Opened by a read or a subscription, never written: while someone
        // here watches it, it stays; else it goes whole (and is opened anew
        // if it is used again; commands already queued here are served that
        // way). Another node may have appended meanwhile: the store checks,
        // and then it is a session like any other (below).
        if state.forgotten {
            return Ok(false);
        }
        if state.meta.head == 0 && !state.meta.deleted {
            if self.subscribers() > 0 {
                return Ok(false);
            }
            if store.forget_idle(&self.id, before_ms).await? {
                debug!("forgot a session that was never written to");
                state.forgotten = true;
                return Ok(true);
            }
        }
        match store.delete_idle(&self.id, before_ms).await? {
            Some(meta) => {
                self.deleted(state, meta);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The session was deleted: an empty projection at the tombstone;
    /// live subscribers get `reset` + the empty snapshot.
    fn deleted(&mut self, state: &mut Loaded, meta: SessionMeta) {
        state.meta = meta;
        state.projection = Projection::new(&self.ctx.cfg.projection);
        state.since_checkpoint = 0;
        state.snapshot = None;
        state.stale = false;
        self.publish_reset(state, "session_deleted");
        self.ctx.index.publish(
            Change::Deleted,
            SessionEntry::with_listing(&self.id, &state.meta, Default::default()),
        );
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
