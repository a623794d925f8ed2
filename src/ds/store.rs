//! The log the streams live in: a second log of the configured kind,
//! beside the sessions' (never mixed with them): in memory, a redb file of
//! its own under `<data_dir>/streams`, or the Redis keys under
//! `<prefix>:ds`. Nothing is trimmed by the sessions' retention: a stream
//! keeps its data until it is deleted or expires.

use std::sync::Arc;

use crate::config::{Config, StoreKind};
use crate::store::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::store::memory::MemoryLog;
use crate::store::redis::{RedisLog, RedisOptions};
use crate::store::{Retention, SharedLog, StoreError};

/// The directory of the embedded store's streams, under the data dir.
pub const DIR: &str = "streams";

/// Open the streams' log for the configuration's store.
pub fn open_store(cfg: &Config) -> Result<SharedLog, StoreError> {
    let keep_all = Retention {
        max_events_per_session: u64::MAX,
        max_age_ms: None,
    };
    Ok(match cfg.store {
        StoreKind::Memory => Arc::new(MemoryLog::new(keep_all)),
        StoreKind::Embedded => Arc::new(EmbeddedLog::open(
            &cfg.data_dir.join(DIR),
            EmbeddedOptions {
                retention: keep_all,
                min_free_bytes: cfg.storage.min_free_bytes,
                cache_bytes: cfg.storage.cache_bytes,
                flush_interval: std::time::Duration::from_millis(cfg.storage.flush_interval_ms),
            },
        )?),
        StoreKind::Redis => {
            let mut opts = RedisOptions::new(&cfg.redis, keep_all);
            opts.prefix = format!("{}:ds", cfg.redis.prefix);
            Arc::new(RedisLog::open(cfg.redis.url(), cfg.redis.cluster, opts)?)
        }
    })
}
