//! The command connection: one multiplexed, self-reconnecting connection to
//! a standalone Redis (or Valkey), or a Redis Cluster connection that routes
//! each command by its key's slot. Both connect lazily, so a node starts
//! (not ready) while Redis is down.
//!
//! A standalone connection whose command timed out is replaced by a new one
//! for the next command: the redis crate reconnects when a connection
//! breaks, not when it goes silent, and after a partition a silent TCP
//! connection comes back only at its next retransmission, which backs off to
//! minutes; a new connection is up as soon as the network is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::sync::OnceCell;

use crate::store::StoreError;

/// Makes (once) and hands out the command connection.
pub(super) enum Connector {
    One(Box<One>),
    Cluster {
        client: Box<ClusterClient>,
        conn: OnceCell<ClusterConnection>,
    },
}

/// A standalone Redis's connection, replaced after a timeout.
pub(super) struct One {
    client: redis::Client,
    cfg: ConnectionManagerConfig,
    /// The connection, and whether a command on it timed out.
    current: Mutex<(ConnectionManager, Arc<AtomicBool>)>,
}

impl One {
    fn fresh(&self) -> Result<ConnectionManager, StoreError> {
        ConnectionManager::new_lazy_with_config(self.client.clone(), self.cfg.clone())
            .map_err(|e| StoreError::backend("redis", e))
    }

    fn get(&self) -> Result<Conn, StoreError> {
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if cur.1.load(Ordering::Acquire) {
            tracing::debug!("a redis command timed out: the next ones go on a new connection");
            *cur = (self.fresh()?, Arc::default());
        }
        Ok(Conn::One(cur.0.clone(), cur.1.clone()))
    }
}

/// A handle to the command connection (cheap to clone).
#[derive(Clone)]
pub(super) enum Conn {
    /// The connection, and the flag its timeouts set.
    One(ConnectionManager, Arc<AtomicBool>),
    Cluster(ClusterConnection),
}

fn bad_url(e: redis::RedisError) -> StoreError {
    StoreError::backend("redis url", e)
}

impl Connector {
    /// The connector, and a client per seed node for the pub/sub connection.
    pub fn new(
        url: &str,
        cluster: bool,
        timeout: Duration,
    ) -> Result<(Connector, Vec<redis::Client>), StoreError> {
        let urls: Vec<&str> = if cluster {
            url.split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .collect()
        } else {
            vec![url]
        };
        let seeds = urls
            .iter()
            .map(|u| redis::Client::open(*u).map_err(bad_url))
            .collect::<Result<Vec<_>, _>>()?;
        if seeds.is_empty() {
            return Err(StoreError::Unavailable("redis url: no node given".into()));
        }
        let connector = if cluster {
            let client = ClusterClient::builder(urls)
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(2)
                .build()
                .map_err(bad_url)?;
            Connector::Cluster {
                client: Box::new(client),
                conn: OnceCell::new(),
            }
        } else {
            let cfg = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_secs(1));
            let manager = ConnectionManager::new_lazy_with_config(seeds[0].clone(), cfg.clone())
                .map_err(|e| StoreError::backend("redis", e))?;
            Connector::One(Box::new(One {
                client: seeds[0].clone(),
                cfg,
                current: Mutex::new((manager, Arc::default())),
            }))
        };
        Ok((connector, seeds))
    }

    /// The connection, connecting first if this is the first use.
    pub async fn get(&self) -> Result<Conn, StoreError> {
        match self {
            Connector::One(one) => one.get(),
            Connector::Cluster { client, conn } => conn
                .get_or_try_init(|| client.get_async_connection())
                .await
                .map(|c| Conn::Cluster(c.clone()))
                .map_err(|e| StoreError::backend("redis cluster", e)),
        }
    }
}

impl Conn {
    /// Wait until `want` replicas have everything written so far on this
    /// connection, which carried the append just made (a WAIT on another
    /// one would wait for nothing). Redis answers within three quarters of
    /// `timeout`, so that its answer, not the client's timeout, says how
    /// many replicas confirmed.
    pub async fn wait_replicas(&mut self, want: u32, timeout: Duration) -> Result<(), StoreError> {
        let acked: u64 = redis::cmd("WAIT")
            .arg(want)
            .arg((timeout.as_millis() as u64 * 3 / 4).max(1))
            .query_async(self)
            .await
            .map_err(super::unavailable)?;
        if acked < u64::from(want) {
            metrics::counter!("projector_redis_replica_shortfalls_total").increment(1);
            return Err(StoreError::Unavailable(format!(
                "the append reached the primary but only {acked} of {want} replicas confirmed it"
            )));
        }
        Ok(())
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::One(c, timed_out) => {
                let timed_out = timed_out.clone();
                Box::pin(async move { noting(c.req_packed_command(cmd).await, &timed_out) })
            }
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::One(c, timed_out) => {
                let timed_out = timed_out.clone();
                Box::pin(async move {
                    noting(
                        c.req_packed_commands(pipeline, offset, count).await,
                        &timed_out,
                    )
                })
            }
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c, _) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// A command's result, its timeout noted on `timed_out`.
fn noting<T>(r: redis::RedisResult<T>, timed_out: &AtomicBool) -> redis::RedisResult<T> {
    if r.as_ref().is_err_and(redis::RedisError::is_timeout) {
        timed_out.store(true, Ordering::Release);
    }
    r
}
