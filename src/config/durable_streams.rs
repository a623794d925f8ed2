//! `[durable_streams]`: the Durable Streams server under `/ds`
//! (`config/default.toml` documents each key).

use serde::{Deserialize, Serialize};

/// `[durable_streams]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableStreamsConfig {
    pub enabled: bool,
    pub long_poll_ms: u64,
    pub sse_span_secs: u64,
    pub read_bytes: usize,
    pub max_append_bytes: usize,
    pub sweep_secs: u64,
}

impl DurableStreamsConfig {
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.long_poll_ms == 0 || self.long_poll_ms > 300_000 {
            return Err("durable_streams.long_poll_ms must be between 1 and 300000".into());
        }
        if self.sse_span_secs == 0 {
            return Err("durable_streams.sse_span_secs must be at least 1".into());
        }
        if self.sweep_secs == 0 {
            return Err("durable_streams.sweep_secs must be at least 1".into());
        }
        if self.read_bytes == 0 || self.max_append_bytes == 0 {
            return Err("durable_streams.read_bytes and max_append_bytes must be above 0".into());
        }
        Ok(())
    }
}
