//! The live feed: a broadcast channel of shared frames that exists only
//! while someone subscribes (an idle session holds no channel buffer), and
//! the snapshot frame, encoded once per change and shared by every reader.

use std::sync::Arc;

use tokio::sync::broadcast;

use super::{Actor, Loaded};
use crate::frame::{self, SharedFrame};

impl Actor {
    /// Open subscriptions on the feed.
    pub(super) fn subscribers(&self) -> usize {
        self.feed
            .as_ref()
            .map_or(0, |f| self.feed_view.subscribers(f.receiver_count()))
    }

    /// A receiver positioned at the head, creating the feed if needed.
    pub(super) fn subscribe_feed(&mut self) -> broadcast::Receiver<SharedFrame> {
        if let Some(f) = &self.feed {
            return f.subscribe();
        }
        let (tx, rx) = broadcast::channel(self.ctx.cfg.live_buffer);
        self.feed_view.set(Some(tx.downgrade()));
        self.feed = Some(tx);
        rx
    }

    /// Send a frame to live subscribers; drop the feed (and stop following
    /// other nodes) once nobody listens.
    pub(super) fn publish(&mut self, frame: SharedFrame) {
        let Some(f) = &self.feed else { return };
        if f.receiver_count() == 0 {
            self.drop_feed();
            return;
        }
        self.feed_view.send(f, frame);
    }

    pub(super) fn drop_feed(&mut self) {
        self.feed = None;
        self.feed_view.set(None);
        self.stop_listening();
    }

    /// Live subscribers start over: `reset`, then the current snapshot.
    pub(super) fn publish_reset(&mut self, state: &mut Loaded, reason: &str) {
        let snapshot = self.snapshot(state);
        self.publish(Arc::new(frame::reset(reason)));
        self.publish(snapshot);
    }

    /// The snapshot frame of the state, encoded once until the state changes.
    pub(super) fn snapshot(&self, state: &mut Loaded) -> SharedFrame {
        if let Some(f) = &state.snapshot {
            return f.clone();
        }
        let window = self.ctx.cfg.projection.snapshot_messages;
        let mut value = state.projection.snapshot_json(window);
        if let serde_json::Value::Object(m) = &mut value {
            m.insert("sessionId".into(), self.id.as_ref().into());
        }
        let f = Arc::new(frame::snapshot(state.meta.head, &state.meta.epoch, &value));
        state.snapshot = Some(f.clone());
        f
    }
}
