//! `[upstream]`: the routes the gateways forward to (an AI SDK chat route,
//! an AG-UI agent), checked against the relay's allowlist.

use serde::{Deserialize, Serialize};

use crate::allowlist::{http_url, AllowedHost};

/// `[upstream]`: the AI SDK route the chat gateway forwards to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The AI SDK chat route `POST /v1/chat` forwards to; empty: none.
    pub chat_url: String,
    /// Without a chat route: how long `POST /v1/chat` waits for the
    /// session's runtime to start its answer.
    pub start_timeout_secs: u64,
    /// The AG-UI agent `POST /v1/sessions/{id}/ag-ui` forwards a
    /// `RunAgentInput` to; empty: none.
    pub ag_ui_url: String,
}

impl UpstreamConfig {
    /// Check the section against the allowlist it shares with the relay.
    pub(super) fn validate(&self, allowed_hosts: &[String]) -> Result<(), String> {
        for (key, value) in [("chat_url", &self.chat_url), ("ag_ui_url", &self.ag_ui_url)] {
            if value.is_empty() {
                continue;
            }
            let url =
                http_url(value).ok_or(format!("upstream.{key} must be empty or an http(s) URL"))?;
            let mut hosts = allowed_hosts.iter().filter_map(|h| AllowedHost::parse(h));
            if !hosts.any(|h| h.allows(&url)) {
                return Err(format!(
                    "upstream.{key}: its host must be on controls.allowed_hosts"
                ));
            }
        }
        Ok(())
    }
}
