//! Deleting in Redis: a session's keys by the delete script, its entries in
//! the listing and activity indexes, and a whole prefix (tests, benches,
//! retiring a deployment).

use redis::Value;

use super::reply::{array, parse_meta};
use super::{corrupt, unavailable, RedisLog};
use crate::store::{EventLog, SessionMeta, StoreError};

impl RedisLog {
    /// The metas of several sessions (one command each, sent together on
    /// the multiplexed connection; their keys live on different slots).
    pub(super) async fn metas(
        &self,
        ids: &[String],
    ) -> Result<Vec<Option<SessionMeta>>, StoreError> {
        futures_util::future::try_join_all(ids.iter().map(|id| self.meta(id))).await
    }

    /// The delete script; with `idle_before > 0` only an idle live session
    /// goes (`None` otherwise).
    pub(super) async fn delete_where(
        &self,
        session: &str,
        idle_before: u64,
    ) -> Result<Option<SessionMeta>, StoreError> {
        let k = self.keys(session);
        let v: Value = self
            .scripts
            .delete
            .key(&k.meta)
            .key(&k.log)
            .key(&k.ids)
            .key(&k.cp)
            .arg(SessionMeta::new_epoch().epoch)
            .arg(crate::store::now_ms())
            .arg(&k.channel)
            .arg(idle_before)
            .arg(self.listener.index_channel())
            .arg(&self.node)
            .arg(session)
            .invoke_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        let fields = array(v).ok_or_else(|| corrupt(session, "delete reply"))?;
        if fields.is_empty() {
            return Ok(None);
        }
        let meta = parse_meta(session, &fields)?;
        self.unindex(session).await;
        Ok(Some(meta))
    }

    /// Take a deleted or forgotten session out of the listing and activity
    /// indexes. They only steer listing and the sweep (which trust the
    /// meta), so a failure is logged, not returned.
    pub(super) async fn unindex(&self, session: &str) {
        let mut pipe = redis::pipe();
        pipe.zrem(self.index_key(), session)
            .ignore()
            .zrem(self.updated_key(), session)
            .ignore();
        let done = match self.conn().await {
            Ok(mut c) => pipe.query_async::<()>(&mut c).await.map_err(unavailable),
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, "session index not updated after deletion");
        }
    }
}

/// Remove every key of a prefix (its sessions and its global indexes) from
/// a standalone Redis: for tests, benchmarks, and retiring a cluster's
/// prefix. Blocking; returns how many keys went.
pub fn purge_prefix(url: &str, prefix: &str) -> Result<usize, StoreError> {
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .map_err(unavailable)?;
    let mut deleted = 0;
    for pattern in [format!("{prefix}:*"), format!("{{{prefix}}}:*")] {
        let keys: Vec<String> = redis::Commands::scan_match::<_, String>(&mut conn, &pattern)
            .map_err(unavailable)?
            .filter_map(Result::ok)
            .collect();
        for chunk in keys.chunks(500) {
            deleted += redis::cmd("DEL")
                .arg(chunk)
                .query::<usize>(&mut conn)
                .map_err(unavailable)?;
        }
    }
    Ok(deleted)
}
