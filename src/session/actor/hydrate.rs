//! Hydration: an actor's state loaded from the store, the latest checkpoint
//! and then the log after it.

use tracing::{debug, warn};

use super::{Actor, Loaded};
use crate::event::Fact;
use crate::projection::Projection;
use crate::store::{StoreError, StoredEvent};

impl Actor {
    /// Load the projection: the latest checkpoint, then the log after it.
    pub(super) async fn hydrate(&self) -> Result<Loaded, StoreError> {
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

    async fn try_hydrate(&self) -> Result<Option<Loaded>, StoreError> {
        let ctx = &*self.ctx;
        let store = &ctx.store;
        let shared = store.shared();
        let mut meta = store.open(&self.id).await?;
        let mut projection = Projection::new(&ctx.cfg.projection);
        // Without a checkpoint nothing was trimmed in this epoch: the log
        // starts where the epoch did (after a deletion, past the old head).
        let mut after = meta.first.saturating_sub(1);
        let mut checkpoint_bytes = 0;
        if let Some(cp) = store.checkpoint(&self.id).await? {
            match serde_json::from_slice::<Projection>(&cp.state) {
                Ok(p) => {
                    projection = p;
                    after = cp.cursor;
                    checkpoint_bytes = cp.state.len();
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
            let Some(tail) = store
                .tail(&self.id, after, ctx.cfg.replay_page, &[])
                .await?
            else {
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
            let full = tail.events.len() >= ctx.cfg.replay_page;
            for ev in &tail.events {
                projection.apply(&ctx.cfg.projection, ev.cursor, &self.fact(ev)?);
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
        Ok(Some(Loaded {
            since_checkpoint: replayed,
            checkpoint_bytes,
            meta,
            projection,
            snapshot: None,
            stale: false,
            contended_until: None,
            forgotten: false,
            listed: None,
        }))
    }

    pub(super) fn fact(&self, ev: &StoredEvent) -> Result<Fact, StoreError> {
        serde_json::from_slice(&ev.fact).map_err(|e| StoreError::Corrupt {
            session: self.id.to_string(),
            detail: format!("fact at cursor {}: {e}", ev.cursor),
        })
    }
}
