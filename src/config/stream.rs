//! `[stream]`: heartbeats, live buffers, replay pages, the session index,
//! and how far an AG-UI reconnection reads to resume (`config/default.toml`
//! documents each key).

use serde::{Deserialize, Serialize};

/// `[stream]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    pub heartbeat_secs: u64,
    pub live_buffer: usize,
    pub replay_page: usize,
    pub index_buffer: usize,
    pub index_snapshot_max: usize,
    pub ag_ui_resume_events: u64,
    pub shared_writers: bool,
}
