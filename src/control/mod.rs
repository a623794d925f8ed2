//! The controls relay: user decisions on actions and run controls go to the
//! runtime that owns the session; they never touch the projection (an action
//! stays pending until the runtime's own `action.resolved` arrives).
//!
//! [`Relay`] picks the control URL (the session's own from `session.opened`,
//! else `controls.default_url`), refuses hosts that are not on
//! `controls.allowed_hosts`, signs the exact body bytes (HMAC-SHA256 over
//! `"{timestamp}.{body}"`), sends an idempotency key, and retries connect
//! errors, timeouts and 5xx answers with exponential backoff; a 4xx answer
//! is final. `request.rs` builds the bodies. This module knows nothing about
//! the server's HTTP layer; `http::controls` maps its outcomes to replies.

mod answer;
mod request;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use reqwest::header::{HeaderValue, CONTENT_TYPE};
use reqwest::{redirect, Url};
use sha2::Sha256;

use crate::allowlist::{http_url, AllowedHost};
use crate::config::ControlsConfig;
pub use answer::{check as check_answer, AnswerError, Checked};
pub use request::{action_request, control_request, Invalid, Kind, Outgoing};

/// Header with `sha256=<hex>` of HMAC-SHA256(secret, `"{timestamp}.{body}"`).
pub const SIGNATURE_HEADER: &str = "x-projector-signature";
/// Header with the Unix time (seconds) that the signature covers.
pub const TIMESTAMP_HEADER: &str = "x-projector-timestamp";
/// Header with the idempotency key, the same on every attempt.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// Longest wait between two attempts, however many retries are configured.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Most bytes of a runtime's rejection body that are logged.
const LOGGED_BODY: usize = 512;

/// The relay client: cheap to clone (one connection pool).
#[derive(Clone)]
pub struct Relay {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    default_url: Option<String>,
    allowed: Vec<AllowedHost>,
    secret: Vec<u8>,
    timeout: Duration,
    max_retries: u32,
    backoff: Duration,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Relay")
            .field("default_url", &self.inner.default_url)
            .field("allowed", &self.inner.allowed)
            .field("timeout", &self.inner.timeout)
            .field("max_retries", &self.inner.max_retries)
            .finish_non_exhaustive()
    }
}

/// Why a control cannot be sent anywhere.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Neither the session nor the configuration names a control URL.
    #[error("no control URL: the session's runtime named none and controls.default_url is empty")]
    NoUrl,
    /// The URL is not an http(s) URL.
    #[error("control URL is not an http(s) URL")]
    InvalidUrl,
    /// The URL's host is not on `controls.allowed_hosts`.
    #[error("control URL host {host} is not on controls.allowed_hosts")]
    NotAllowed { host: String },
}

/// A relay the runtime accepted (2xx).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayOk {
    /// The runtime's HTTP status.
    pub status: u16,
    /// Attempts made, the successful one included.
    pub attempts: u32,
}

/// The last failure of an attempt that may be retried.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("the runtime answered {0}")]
    Status(u16),
    #[error("timed out")]
    Timeout(#[source] reqwest::Error),
    #[error("could not connect")]
    Connect(#[source] reqwest::Error),
    #[error("transport error")]
    Transport(#[source] reqwest::Error),
}

/// A relay that did not get through.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Every attempt failed with a connect error, a timeout or a 5xx.
    #[error("runtime unreachable after {attempts} attempt(s)")]
    Unreachable {
        attempts: u32,
        #[source]
        last: Failure,
    },
    /// The runtime answered with a final non-success status (4xx, or a
    /// redirect, which is not followed). Not retried.
    #[error("runtime rejected the request with {status}")]
    Rejected { status: u16, attempts: u32 },
}

impl Relay {
    /// A relay from the `[controls]` section (already validated).
    pub fn new(cfg: &ControlsConfig) -> Result<Relay, reqwest::Error> {
        let timeout = Duration::from_millis(cfg.timeout_ms);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A redirect could lead off the allowlist; proxies from the
            // environment are not for calls into the runtime's network.
            .redirect(redirect::Policy::none())
            .no_proxy()
            .user_agent(concat!("agent-projector/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Relay {
            inner: Arc::new(Inner {
                client,
                default_url: (!cfg.default_url.is_empty()).then(|| cfg.default_url.clone()),
                allowed: cfg
                    .allowed_hosts
                    .iter()
                    .filter_map(|h| AllowedHost::parse(h))
                    .collect(),
                secret: cfg.signing_secret.as_bytes().to_vec(),
                timeout,
                max_retries: cfg.max_retries,
                backoff: Duration::from_millis(cfg.backoff_ms),
            }),
        })
    }

    /// The URL to send a session's controls to: its own, else the default;
    /// only if its host is on the allowlist.
    pub fn target(&self, session_url: Option<&str>) -> Result<Url, TargetError> {
        let raw = session_url
            .or(self.inner.default_url.as_deref())
            .ok_or(TargetError::NoUrl)?;
        let url = http_url(raw).ok_or(TargetError::InvalidUrl)?;
        if self.inner.allowed.iter().any(|a| a.allows(&url)) {
            Ok(url)
        } else {
            Err(TargetError::NotAllowed {
                host: url.host_str().unwrap_or_default().to_string(),
            })
        }
    }

    /// The configured per-attempt timeout.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// The wait before attempt `n` (2, 3, ...): `backoff`, doubling.
    fn backoff_before(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(2).min(16);
        self.inner
            .backoff
            .saturating_mul(1 << doublings)
            .min(MAX_BACKOFF)
    }

    /// POST `out` to `url`: at most `max_retries + 1` attempts, each signed
    /// afresh (new timestamp) with the same body and idempotency key.
    pub async fn relay(&self, url: &Url, out: &Outgoing) -> Result<RelayOk, RelayError> {
        let attempts = self.inner.max_retries + 1;
        let mut last = None;
        for n in 1..=attempts {
            if n > 1 {
                tokio::time::sleep(self.backoff_before(n)).await;
            }
            let ts = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            let req = self
                .inner
                .client
                .post(url.clone())
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .header(IDEMPOTENCY_HEADER, &out.idempotency_key)
                .header(TIMESTAMP_HEADER, ts)
                .header(SIGNATURE_HEADER, sign(&self.inner.secret, ts, &out.body))
                .body(out.body.clone());
            let failure = match req.send().await {
                Ok(resp) if resp.status().is_success() => {
                    return Ok(RelayOk {
                        status: resp.status().as_u16(),
                        attempts: n,
                    })
                }
                Ok(resp) if resp.status().is_server_error() => {
                    Failure::Status(resp.status().as_u16())
                }
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    let mut body = Vec::new();
                    if let Ok(Some(chunk)) = resp.chunk().await {
                        body.extend_from_slice(&chunk[..chunk.len().min(LOGGED_BODY)]);
                    }
                    tracing::warn!(
                        status,
                        body = %String::from_utf8_lossy(&body),
                        "runtime rejected a control"
                    );
                    return Err(RelayError::Rejected {
                        status,
                        attempts: n,
                    });
                }
                Err(e) if e.is_timeout() => Failure::Timeout(e),
                Err(e) if e.is_connect() => Failure::Connect(e),
                Err(e) => Failure::Transport(e),
            };
            tracing::debug!(attempt = n, error = %failure, "control relay attempt failed");
            last = Some(failure);
        }
        Err(RelayError::Unreachable {
            attempts,
            last: last.expect("at least one attempt"),
        })
    }
}

/// `sha256=<hex>` of HMAC-SHA256(`secret`, `"{ts}.{body}"`).
pub fn sign(secret: &[u8], ts: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(ts.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(allowed: &[&str], default_url: &str) -> ControlsConfig {
        ControlsConfig {
            default_url: default_url.into(),
            allowed_hosts: allowed.iter().map(|s| s.to_string()).collect(),
            signing_secret: "s3cret".into(),
            timeout_ms: 1000,
            max_retries: 3,
            backoff_ms: 100,
        }
    }

    #[test]
    fn allowlist_matches_host_or_host_and_port() {
        let r = Relay::new(&cfg(
            &["runtime.internal", "LOCALHOST:9000", "[::1]:81"],
            "",
        ))
        .unwrap();
        let ok = |u: &str| r.target(Some(u)).is_ok();
        assert!(ok("http://runtime.internal/c"));
        assert!(ok("https://Runtime.Internal:8443/c"));
        assert!(ok("http://localhost:9000/controls"));
        assert!(!ok("http://localhost:9001/controls"));
        assert!(!ok("http://localhost/controls"), "port 80 is not 9000");
        assert!(ok("http://[::1]:81/"));
        assert!(!ok("http://[::1]:82/"));
        assert!(!ok("http://runtime.internal.evil.test/"));
        assert!(!ok("http://evil.test/?h=runtime.internal"));
        assert!(matches!(
            r.target(Some("ftp://runtime.internal/")),
            Err(TargetError::InvalidUrl)
        ));
        assert!(matches!(r.target(None), Err(TargetError::NoUrl)));
        let d = Relay::new(&cfg(&["a.test"], "http://a.test/x")).unwrap();
        assert_eq!(d.target(None).unwrap().as_str(), "http://a.test/x");
        assert!(
            d.target(Some("http://b.test/")).is_err(),
            "the session's own URL wins"
        );
        let none = Relay::new(&cfg(&[], "http://a.test/x")).unwrap();
        assert!(matches!(
            none.target(None),
            Err(TargetError::NotAllowed { .. })
        ));
    }

    #[test]
    fn validation() {
        assert!(cfg(&["a.test", "b.test:80", "[::1]"], "")
            .validate()
            .is_ok());
        assert!(cfg(&["a.test:http"], "").validate().is_err());
        assert!(cfg(&["a.test/x"], "").validate().is_err());
        assert!(cfg(&[""], "").validate().is_err());
        assert!(cfg(&[], "not a url").validate().is_err());
        let mut c = cfg(&["a.test"], "");
        c.signing_secret = Default::default();
        assert!(c.validate().is_err(), "allowed hosts need a secret");
        c.allowed_hosts.clear();
        assert!(c.validate().is_ok(), "nothing allowed, nothing to sign");
        let mut c = cfg(&[], "");
        c.timeout_ms = 0;
        assert!(c.validate().is_err());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let r = Relay::new(&cfg(&[], "")).unwrap();
        let ms = |n| r.backoff_before(n).as_millis();
        assert_eq!([ms(2), ms(3), ms(4), ms(5)], [100, 200, 400, 800]);
        assert_eq!(ms(40), MAX_BACKOFF.as_millis());
    }

    #[test]
    fn signature_is_hmac_sha256_of_timestamp_dot_body() {
        // Expected value from Python's hmac module:
        // hmac.new(b"k", b'1700000000.{"a":1}', sha256).hexdigest()
        assert_eq!(
            sign(b"k", 1_700_000_000, br#"{"a":1}"#),
            "sha256=1b6ad1bc9bf48c52ce01939866d5877c6cc4e87ddad27e16673cb8c4964394a3"
        );
        assert_ne!(sign(b"k", 1, b"{}"), sign(b"k", 2, b"{}"));
    }
}
