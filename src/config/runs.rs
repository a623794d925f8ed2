//! `[runs]`: how long a working run may stay silent before the server
//! ends it (the core's `projection::idle`).

use serde::{Deserialize, Serialize};

/// `[runs]`: a run its producer left is ended by the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsConfig {
    /// A working run with no event for this long is ended as
    /// `interrupted` (0: never).
    pub idle_timeout_secs: u64,
    /// The same while a tool the run started is still running.
    pub tool_idle_timeout_secs: u64,
}

impl RunsConfig {
    /// The limits of the core's rule (`projection::idle`).
    pub fn timeouts(&self) -> crate::projection::idle::Timeouts {
        crate::projection::idle::Timeouts {
            run_ms: self.idle_timeout_secs.saturating_mul(1000),
            tool_ms: self.tool_idle_timeout_secs.saturating_mul(1000),
        }
    }
}
