//! The Redis store, shared by every node of a cluster. Per session, under
//! one hash tag (one Redis Cluster slot): `<prefix>:{<session>}:meta` (a hash:
//! epoch, head, first, checkpoint cursor, status, updated, deleted), `:log`
//! (a stream whose entry ids are the project's cursors, `<cursor>-0`, each
//! holding the event id, receive time, fact and exact frame), `:ids` (event
//! id -> cursor, for dedupe), `:cp` (the latest projection checkpoint),
//! `:turn` (which node may append next, after it was refused several times)
//! and the channel `:live` (the new `epoch:head` after every append or
//! deletion).
//! Appends, deletions and reads of the tail are Lua scripts, so they are
//! atomic; the session index (`{<prefix>}:index`, by id) and the activity index
//! (`{<prefix>}:updated`, by last append) are global keys kept beside them.

mod conn;
mod keys;
mod listen;
mod purge;
mod reply;

use keys::tag;
pub use purge::purge_prefix;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::{AsyncCommands, Script, Value};

use super::{
    AppendBatch, Checkpoint, EventLog, IndexNote, News, Retention, SessionMeta, StoreError,
    StoredEvent, Tail,
};
use crate::config::RedisConfig;
use crate::store::codec::{decode_checkpoint, encode_checkpoint};
use reply::{array, parse_cursors, parse_events, parse_meta, text_of};

/// Where the shared store is and how it behaves.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    pub retention: Retention,
    pub prefix: String,
    pub timeout: Duration,
    /// Replicas that must confirm an append (`WAIT`); 0: none.
    pub min_replicas_acked: u32,
    /// How long the pub/sub connection may be down before the sessions
    /// followed here are told they are cut off; `None`: never.
    pub partition_close: Option<Duration>,
}

impl RedisOptions {
    /// Options from the `[redis]` section.
    pub fn new(cfg: &RedisConfig, retention: Retention) -> Self {
        RedisOptions {
            retention,
            prefix: cfg.prefix.clone(),
            timeout: Duration::from_millis(cfg.timeout_ms),
            min_replicas_acked: cfg.min_replicas_acked,
            partition_close: (cfg.partition_close_ms > 0)
                .then(|| Duration::from_millis(cfg.partition_close_ms)),
        }
    }
}

struct Scripts {
    append: Script,
    tail: Script,
    open: Script,
    delete: Script,
    forget: Script,
}

/// The shared event log in Redis.
pub struct RedisLog {
    conn: conn::Connector,
    /// This process, in the scripts' turn keys.
    node: String,
    /// Tail reads made (tests check that a node does not read its own news).
    #[cfg(test)]
    pub(crate) tails: std::sync::atomic::AtomicU64,
    opts: RedisOptions,
    scripts: Scripts,
    listener: listen::Listener,
}

/// How long a node that was refused several times in a row holds the turn
/// of a session (other nodes' appends wait) unless it appends sooner.
const TURN_MS: u64 = 1000;

/// Seconds of precision of the activity index: an append moves a session's
/// score only when it is this much newer, so most appends skip the write.
const ACTIVITY_GRAIN_MS: u64 = 1000;

pub(super) fn unavailable(e: redis::RedisError) -> StoreError {
    StoreError::backend("redis", e)
}

fn corrupt(session: &str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        session: session.to_string(),
        detail: detail.into(),
    }
}

impl RedisLog {
    /// Connect lazily: the server starts (not ready) while Redis is down and
    /// connects when it comes up. With `cluster`, `url` is a comma-separated
    /// list of seed nodes of a Redis Cluster.
    pub fn open(url: &str, cluster: bool, opts: RedisOptions) -> Result<Self, StoreError> {
        let (conn, seeds) = conn::Connector::new(url, cluster, opts.timeout)?;
        let node = uuid::Uuid::new_v4().simple().to_string();
        let timing = listen::Timing {
            timeout: opts.timeout,
            close_after: opts.partition_close,
            ..listen::Timing::default()
        };
        let listener = listen::Listener::start(seeds, opts.prefix.clone(), node.clone(), timing);
        Ok(RedisLog {
            conn,
            node,
            #[cfg(test)]
            tails: Default::default(),
            scripts: Scripts {
                append: Script::new(include_str!("append.lua")),
                tail: Script::new(include_str!("tail.lua")),
                open: Script::new(include_str!("open.lua")),
                delete: Script::new(include_str!("delete.lua")),
                forget: Script::new(include_str!("forget.lua")),
            },
            opts,
            listener,
        })
    }

    async fn conn(&self) -> Result<conn::Conn, StoreError> {
        self.conn.get().await
    }

    /// Note a session in the id index and the activity index.
    async fn index(&self, session: &str, updated_ms: u64) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.zadd(self.index_key(), session, 0)
            .ignore()
            .zadd(self.updated_key(), session, updated_ms)
            .ignore();
        pipe.query_async::<()>(&mut self.conn().await?)
            .await
            .map_err(unavailable)
    }
}

#[async_trait]
impl EventLog for RedisLog {
    async fn open(&self, session: &str) -> Result<SessionMeta, StoreError> {
        let k = self.keys(session);
        let now = super::now_ms();
        let v: Value = self
            .scripts
            .open
            .key(&k.meta)
            .key(&k.log)
            .key(&k.ids)
            .key(&k.cp)
            .arg(SessionMeta::new_epoch().epoch)
            .arg(now)
            .invoke_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        let mut parts = array(v)
            .ok_or_else(|| corrupt(session, "open reply"))?
            .into_iter();
        let created = matches!(parts.next(), Some(Value::Int(1)));
        let fields = parts
            .next()
            .and_then(array)
            .ok_or_else(|| corrupt(session, "open reply"))?;
        let meta = parse_meta(session, &fields)?;
        if created {
            self.index(session, now).await?;
        }
        Ok(meta)
    }

    async fn meta(&self, session: &str) -> Result<Option<SessionMeta>, StoreError> {
        let k = self.keys(session);
        let v: Vec<Value> = redis::cmd("HMGET")
            .arg(&k.meta)
            .arg(&[
                "epoch", "head", "first", "status", "updated", "deleted", "base",
            ])
            .query_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        if matches!(v.first(), None | Some(Value::Nil)) {
            return Ok(None);
        }
        parse_meta(session, &v).map(Some)
    }

    async fn append(&self, session: &str, batch: AppendBatch) -> Result<SessionMeta, StoreError> {
        let Some(first_event) = batch.events.first() else {
            return self.open(session).await;
        };
        let expected_head = first_event.cursor - 1;
        let k = self.keys(session);
        let retention = self.opts.retention;
        let before_ms = retention
            .max_age_ms
            .map_or(0, |age| super::now_ms().saturating_sub(age).max(1));
        let mut inv = self.scripts.append.prepare_invoke();
        inv.key(&k.meta)
            .key(&k.log)
            .key(&k.ids)
            .key(&k.cp)
            .key(&k.turn);
        inv.arg(&batch.epoch)
            .arg(expected_head)
            .arg(batch.events.len())
            .arg(batch.listing.as_deref().unwrap_or(""))
            .arg(retention.max_events_per_session)
            .arg(before_ms);
        match &batch.checkpoint {
            Some(cp) => inv.arg(cp.cursor).arg(encode_checkpoint(cp)),
            None => inv.arg(0).arg(""),
        };
        inv.arg(&k.channel)
            .arg(&self.node)
            .arg(if batch.claim { TURN_MS } else { 0 })
            .arg(self.listener.index_channel())
            .arg(session);
        for (i, e) in batch.events.iter().enumerate() {
            if e.cursor != expected_head + 1 + i as u64 {
                return Err(StoreError::Conflict {
                    session: session.to_string(),
                    expected: expected_head + 1 + i as u64,
                    got: e.cursor,
                });
            }
            inv.arg(&e.event_id)
                .arg(e.received_ms)
                .arg(e.fact.as_ref())
                .arg(e.frame.as_ref());
        }
        let mut conn = self.conn().await?;
        let v: Value = inv.invoke_async(&mut conn).await.map_err(unavailable)?;
        let parts = array(v).ok_or_else(|| corrupt(session, "append reply"))?;
        let word = |i: usize| parts.get(i).and_then(text_of).unwrap_or_default();
        let num = |i: usize| word(i).parse::<u64>().unwrap_or(0);
        match word(0).as_str() {
            "ok" => {}
            "conflict" | "duplicate" => {
                metrics::counter!("projector_redis_conflicts_total").increment(1);
                return Err(StoreError::Conflict {
                    session: session.to_string(),
                    expected: expected_head + 1,
                    got: num(2) + 1,
                });
            }
            other => return Err(corrupt(session, format!("append reply {other:?}"))),
        }
        if self.opts.min_replicas_acked > 0 {
            conn.wait_replicas(self.opts.min_replicas_acked, self.opts.timeout)
                .await?;
        }
        let head = expected_head + batch.events.len() as u64;
        let meta = SessionMeta {
            epoch: batch.epoch.clone(),
            head,
            first: num(1).max(1),
            base: num(6),
            listing: Some(word(5)).filter(|s| !s.is_empty()),
            updated_ms: num(2),
            deleted: false,
        };
        let (previous, was_deleted) = (num(3), word(4) == "1");
        // (A first append may date the session before its opening.)
        if was_deleted
            || meta.updated_ms < previous
            || meta.updated_ms >= previous + ACTIVITY_GRAIN_MS
        {
            // The indexes only steer listing and the age sweep; a failure
            // here must not fail an append that is already durable.
            if let Err(e) = self.index(session, meta.updated_ms).await {
                tracing::warn!(error = %e, "session index not updated");
            }
        }
        Ok(meta)
    }

    async fn read(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let k = self.keys(session);
        let v: Value = redis::cmd("XRANGE")
            .arg(&k.log)
            .arg(format!("{}-0", after + 1))
            .arg("+")
            .arg("COUNT")
            .arg(limit.max(1))
            .query_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        parse_events(session, v)
    }

    async fn lookup_ids(
        &self,
        session: &str,
        ids: &[String],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let k = self.keys(session);
        let v: Value = redis::cmd("HMGET")
            .arg(&k.ids)
            .arg(ids)
            .query_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        parse_cursors(session, v, ids.len())
    }

    async fn checkpoint(&self, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let k = self.keys(session);
        let v: Option<Vec<u8>> = self.conn().await?.get(&k.cp).await.map_err(unavailable)?;
        v.map(|v| decode_checkpoint(session, &v)).transpose()
    }

    async fn ready(&self) -> Result<(), StoreError> {
        let pong: String = redis::cmd("PING")
            .query_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        if pong != "PONG" {
            return Err(StoreError::Unavailable(format!("redis answered {pong:?}")));
        }
        Ok(())
    }

    async fn delete(&self, session: &str) -> Result<SessionMeta, StoreError> {
        self.delete_where(session, 0)
            .await?
            .ok_or_else(|| corrupt(session, "unconditional delete deleted nothing"))
    }

    async fn delete_idle(
        &self,
        session: &str,
        before_ms: u64,
    ) -> Result<Option<SessionMeta>, StoreError> {
        self.delete_where(session, before_ms.max(1)).await
    }

    async fn forget_idle(&self, session: &str, before_ms: u64) -> Result<bool, StoreError> {
        let k = self.keys(session);
        let gone: i64 = self
            .scripts
            .forget
            .key(&k.meta)
            .key(&k.log)
            .key(&k.ids)
            .key(&k.cp)
            .key(&k.turn)
            .arg(before_ms)
            .invoke_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        if gone == 1 {
            self.unindex(session).await;
        }
        Ok(gone == 1)
    }

    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, SessionMeta)>, StoreError> {
        let mut out = Vec::new();
        let mut from = after.map_or_else(|| "-".to_string(), |a| format!("({a}"));
        while out.len() < limit {
            let want = (limit - out.len()).max(16);
            let ids: Vec<String> = redis::cmd("ZRANGEBYLEX")
                .arg(self.index_key())
                .arg(&from)
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(want)
                .query_async(&mut self.conn().await?)
                .await
                .map_err(unavailable)?;
            let Some(last) = ids.last() else { break };
            from = format!("({last}");
            let metas = self.metas(&ids).await?;
            for (id, meta) in ids.iter().zip(metas) {
                match meta {
                    Some(m) if !m.deleted && out.len() < limit => out.push((id.clone(), m)),
                    _ => {}
                }
            }
            if ids.len() < want {
                break;
            }
        }
        Ok(out)
    }

    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.updated_key())
            .arg("-inf")
            .arg(format!("({before_ms}"))
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        let metas = self.metas(&ids).await?;
        let mut out = Vec::new();
        let mut fix = redis::pipe();
        let mut fixes = 0;
        for (id, meta) in ids.into_iter().zip(metas) {
            fixes += 1;
            match meta {
                // The index is coarse: trust the meta, and correct the index.
                Some(m) if !m.deleted && m.updated_ms >= before_ms => {
                    fix.zadd(self.updated_key(), &id, m.updated_ms).ignore();
                }
                Some(m) if !m.deleted => {
                    fixes -= 1;
                    out.push(id)
                }
                _ => {
                    fix.zrem(self.updated_key(), &id).ignore();
                }
            }
        }
        if fixes > 0 {
            fix.query_async::<()>(&mut self.conn().await?)
                .await
                .map_err(unavailable)?;
        }
        Ok(out)
    }

    fn shared(&self) -> bool {
        true
    }

    async fn tail(
        &self,
        session: &str,
        after: u64,
        limit: usize,
        ids: &[String],
    ) -> Result<Option<Tail>, StoreError> {
        #[cfg(test)]
        self.tails
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let k = self.keys(session);
        let v: Value = self
            .scripts
            .tail
            .key(&k.meta)
            .key(&k.log)
            .key(&k.ids)
            .arg(after)
            .arg(limit)
            .arg(ids)
            .invoke_async(&mut self.conn().await?)
            .await
            .map_err(unavailable)?;
        let parts = array(v).ok_or_else(|| corrupt(session, "tail reply"))?;
        if parts.is_empty() {
            return Ok(None);
        }
        let mut parts = parts.into_iter();
        let fields = parts
            .next()
            .and_then(array)
            .ok_or_else(|| corrupt(session, "tail reply"))?;
        let meta = parse_meta(session, &fields)?;
        let events = parse_events(session, parts.next().unwrap_or(Value::Nil))?;
        let known = parse_cursors(session, parts.next().unwrap_or(Value::Nil), ids.len())?;
        Ok(Some(Tail {
            meta,
            events,
            known,
        }))
    }

    async fn listen(&self, session: &str) -> Option<Arc<News>> {
        Some(self.listener.listen(&tag(session)).await)
    }

    fn unlisten(&self, session: &str, notify: &Arc<News>) {
        self.listener.unlisten(&tag(session), notify);
    }

    fn index_notes(&self) -> Option<tokio::sync::broadcast::Receiver<IndexNote>> {
        Some(self.listener.index_notes())
    }
}

#[cfg(test)]
pub(crate) mod tests;
