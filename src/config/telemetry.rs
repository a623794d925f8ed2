//! `[telemetry]`: OpenTelemetry traces exported over OTLP/HTTP, off unless
//! an endpoint is set.

use serde::{Deserialize, Serialize};

use crate::allowlist::http_url;

/// `[telemetry]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP traces endpoint (e.g. `http://collector:4318/v1/traces`);
    /// empty: no traces are exported (and none are built).
    pub otlp_endpoint: String,
    /// `service.name` of the exported spans.
    pub service_name: String,
    /// The share of traces kept, 0 to 1 (a trace a caller started keeps
    /// the caller's choice).
    pub sample_ratio: f64,
}

impl TelemetryConfig {
    pub(super) fn validate(&self) -> Result<(), String> {
        if !self.otlp_endpoint.is_empty() && http_url(&self.otlp_endpoint).is_none() {
            return Err("telemetry.otlp_endpoint must be empty or an http(s) URL".into());
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err("telemetry.sample_ratio must be between 0 and 1".into());
        }
        if self.service_name.is_empty() {
            return Err("telemetry.service_name must not be empty".into());
        }
        Ok(())
    }
}
