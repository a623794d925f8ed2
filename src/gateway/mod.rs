//! The gateways' upstream runs, between `http` and `session`: a chat
//! request (`POST /v1/chat`) or an AG-UI run (`POST .../ag-ui`) is
//! forwarded to its upstream route ([`Gateway::send`]), whose answer is
//! read into the session as it arrives ([`read`], in a task that outlives
//! the request) while the caller is answered from the session's log; the
//! request's own facts are made durable first ([`record`]). Without an
//! upstream route, a chat request becomes controls for the session's
//! runtime and is answered by the message it starts ([`chat`]). The HTTP
//! handlers only parse, authorise, relay and answer.

pub mod chat;
mod read;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::warn;

pub use read::{read, read_ahead, Reading};

use crate::config::Config;
use crate::event::{normalize, Limits};
use crate::session::{IncomingEvent, Registry, SessionError};

/// What reading into a session needs: the sessions, the limits events
/// are normalised within, how long a body may stay silent, how large a
/// stream may grow, and the server's shutdown.
#[derive(Clone)]
pub struct Ctx {
    pub registry: Registry,
    pub limits: Limits,
    pub idle: Duration,
    pub max_bytes: usize,
    pub shutdown: CancellationToken,
}

/// Why an upstream answer could not be had.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("the upstream route could not be reached")]
    Unreachable(#[source] reqwest::Error),
    #[error("the upstream route answered {0}")]
    Rejected(reqwest::StatusCode),
    #[error("the upstream route's answer held nothing to apply")]
    Empty,
}

/// Why a request's own facts were not recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// An event does not normalise (what it says).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Make a request's own facts durable in `session`: all or none.
pub async fn record(cx: &Ctx, session: &str, events: Vec<Value>) -> Result<(), RecordError> {
    if events.is_empty() {
        return Ok(());
    }
    let mut incoming = Vec::with_capacity(events.len());
    for (index, e) in events.into_iter().enumerate() {
        let n = normalize(e, &cx.limits).map_err(|issues| {
            RecordError::Invalid(
                issues
                    .first()
                    .map_or_else(String::new, |i| i.message.clone()),
            )
        })?;
        incoming.push(IncomingEvent {
            index,
            fact: n.fact,
            warnings: n.warnings,
        });
    }
    cx.registry.ingest(session, incoming).await?;
    Ok(())
}

/// The gateway's upstream and the runs it is reading.
pub struct Gateway {
    upstream: Option<(reqwest::Client, String)>,
    /// The AG-UI agent `POST /v1/sessions/{id}/ag-ui` forwards to.
    ag_ui: Option<(reqwest::Client, String)>,
    /// A cancel handle per session whose upstream answer is being read,
    /// with the number of the reading that registered it.
    running: DashMap<String, (u64, CancellationToken)>,
    next: AtomicU64,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstream", &self.upstream.as_ref().map(|(_, u)| u))
            .field("running", &self.running.len())
            .finish()
    }
}

impl Gateway {
    /// The AI SDK route `POST /v1/chat` forwards to, if one is configured.
    pub fn chat_route(&self) -> Option<(&reqwest::Client, &str)> {
        self.upstream.as_ref().map(|(c, u)| (c, u.as_str()))
    }

    /// The AG-UI agent `POST /v1/sessions/{id}/ag-ui` forwards to.
    pub fn ag_ui_route(&self) -> Option<(&reqwest::Client, &str)> {
        self.ag_ui.as_ref().map(|(c, u)| (c, u.as_str()))
    }

    /// The gateway of a (validated) configuration.
    pub fn new(cfg: &Config) -> Result<Gateway, reqwest::Error> {
        let t = Duration::from_millis(cfg.controls.timeout_ms);
        let client = reqwest::Client::builder()
            // The answer streams for as long as the model writes: no total
            // timeout, only connect and per-read ones.
            .connect_timeout(t)
            .read_timeout(Duration::from_secs(cfg.limits.body_timeout_secs))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(concat!("agent-projector/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let route = |url: &str| (!url.is_empty()).then(|| (client.clone(), url.to_string()));
        let (upstream, ag_ui) = (
            route(&cfg.upstream.chat_url),
            route(&cfg.upstream.ag_ui_url),
        );
        Ok(Gateway {
            upstream,
            ag_ui,
            running: DashMap::new(),
            next: AtomicU64::new(1),
        })
    }

    /// Send `body` to an upstream `route` (`accept: text/event-stream`):
    /// its answer, when it is a success.
    pub async fn send(
        (client, url): (&reqwest::Client, &str),
        body: Bytes,
    ) -> Result<reqwest::Response, Failure> {
        let resp = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body)
            .send()
            .await
            .map_err(Failure::Unreachable)?;
        if !resp.status().is_success() {
            return Err(Failure::Rejected(resp.status()));
        }
        Ok(resp)
    }

    /// Read an upstream answer into `session` in a task of its own (it goes
    /// on if the caller leaves; a `cancel` control, or a newer answer of
    /// the same session, ends it) and wait until it has begun: what the
    /// reading began with (the UI stream's message id, the AG-UI run id).
    pub async fn read_answer(
        self: &Arc<Self>,
        cx: Ctx,
        session: &str,
        resp: reqwest::Response,
        approvals: Vec<(String, String)>,
    ) -> Result<String, Failure> {
        let cancel = CancellationToken::new();
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        if let Some((_, (_, older))) = self.running.remove(session) {
            older.cancel();
        }
        self.running
            .insert(session.to_string(), (number, cancel.clone()));
        let (started, begun) = tokio::sync::oneshot::channel();
        let reading = Reading {
            started: Some(started),
            cancel: Some(cancel),
            approvals,
            key: None,
        };
        let (gateway, session) = (self.clone(), session.to_string());
        tokio::spawn(async move {
            let out = read(cx, session.clone(), resp.bytes_stream(), reading).await;
            if let Err(e) = out {
                warn!(error = %e, "reading the upstream answer failed");
            }
            gateway
                .running
                .remove_if(&session, |_, (n, _)| *n == number);
        });
        begun.await.map_err(|_| Failure::Empty)
    }

    /// Abort the upstream answer being read into `session`, if one is: the
    /// run ends as cancelled. True when there was one.
    pub fn cancel(&self, session: &str) -> bool {
        match self.running.get(session) {
            Some(r) => {
                r.1.cancel();
                true
            }
            None => false,
        }
    }
}

/// The gateway of the state, shared.
pub type SharedGateway = Arc<Gateway>;
