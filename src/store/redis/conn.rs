//! The command connection: one multiplexed, self-reconnecting connection to
//! a standalone Redis (or Valkey), or a Redis Cluster connection that routes
//! each command by its key's slot. Both connect lazily, so a node starts
//! (not ready) while Redis is down.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::sync::OnceCell;

use crate::store::StoreError;

/// Makes (once) and hands out the command connection.
pub(super) enum Connector {
    One(ConnectionManager),
    Cluster {
        client: Box<ClusterClient>,
        conn: OnceCell<ClusterConnection>,
    },
}

/// A handle to the command connection (cheap to clone).
#[derive(Clone)]
pub(super) enum Conn {
    One(ConnectionManager),
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
            let cfg = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_secs(1));
            let manager = ConnectionManager::new_lazy_with_config(seeds[0].clone(), cfg)
                .map_err(|e| StoreError::backend("redis", e))?;
            Connector::One(manager)
        };
        Ok((connector, seeds))
    }

    /// The connection, connecting first if this is the first use.
    pub async fn get(&self) -> Result<Conn, StoreError> {
        match self {
            Connector::One(m) => Ok(Conn::One(m.clone())),
            Connector::Cluster { client, conn } => conn
                .get_or_try_init(|| client.get_async_connection())
                .await
                .map(|c| Conn::Cluster(c.clone()))
                .map_err(|e| StoreError::backend("redis cluster", e)),
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
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
            Conn::One(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}
