//! Request limits that need state: ingest rate per session and per token
//! (token buckets, 429 with `Retry-After`), open streams per session and in
//! total (a guard per stream), and the bytes of request bodies being read
//! (a shared budget, with a deadline per body). Map entries are plain
//! synchronous state: no lock is held across an `.await`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use dashmap::DashMap;

use super::error::Problem;
use crate::config::LimitsConfig;

/// Idle buckets are dropped once a map holds more than this many.
const MAX_BUCKETS: usize = 50_000;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Debug)]
struct Buckets {
    rate: f64,
    burst: f64,
    map: DashMap<String, Bucket>,
}

impl Buckets {
    fn new(rate: u64, burst: u64) -> Self {
        Buckets {
            rate: rate as f64,
            burst: burst.max(rate).max(1) as f64,
            map: DashMap::new(),
        }
    }

    /// Take `n` tokens for `key`; `Err(seconds to wait)` when short. A
    /// request larger than the burst goes through from a full bucket, into debt.
    fn take(&self, key: &str, n: f64, now: Instant) -> Result<(), u64> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        if self.map.len() > MAX_BUCKETS {
            let horizon = Duration::from_secs_f64(self.burst / self.rate + 1.0);
            self.map.retain(|_, b| now.duration_since(b.last) < horizon);
        }
        let mut b = self.map.entry(key.to_string()).or_insert(Bucket {
            tokens: self.burst,
            last: now,
        });
        let elapsed = now.duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.rate).min(self.burst);
        b.last = now;
        if b.tokens >= n.min(self.burst) {
            b.tokens -= n;
            Ok(())
        } else {
            let need = n.min(self.burst) - b.tokens;
            Err((need / self.rate).ceil().max(1.0) as u64)
        }
    }

    fn refund(&self, key: &str, n: f64) {
        if let Some(mut b) = self.map.get_mut(key) {
            b.tokens = (b.tokens + n).min(self.burst);
        }
    }
}

/// Shared limit state of one server.
#[derive(Debug)]
pub struct Limiter {
    sessions: Buckets,
    tokens: Buckets,
    subscribers: Arc<DashMap<String, usize>>,
    total: Arc<AtomicUsize>,
    per_session: usize,
    max_total: usize,
    /// Request body bytes being read, in KiB permits.
    bodies: Arc<tokio::sync::Semaphore>,
    /// The deadline of a whole request body.
    pub body_timeout: Duration,
}

fn too_many(code: &'static str, detail: String, retry_after: u64) -> Problem {
    let mut p = Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        code,
        "Too many requests",
        detail,
    );
    p.retry_after = Some(retry_after);
    p
}

impl Limiter {
    pub fn new(cfg: &LimitsConfig) -> Self {
        Limiter {
            sessions: Buckets::new(
                cfg.ingest_events_per_sec_per_session,
                cfg.ingest_burst_per_session,
            ),
            tokens: Buckets::new(
                cfg.ingest_events_per_sec_per_token,
                cfg.ingest_burst_per_token,
            ),
            subscribers: Arc::new(DashMap::new()),
            total: Arc::new(AtomicUsize::new(0)),
            per_session: cfg.max_subscribers_per_session,
            max_total: cfg.max_subscribers,
            bodies: Arc::new(tokio::sync::Semaphore::new(
                kib(cfg.max_inflight_body_bytes),
            )),
            body_timeout: Duration::from_secs(cfg.body_timeout_secs),
        }
    }

    /// Reserve `bytes` of the request body budget while a body is read;
    /// 503 `server_busy` when the budget is spent.
    pub fn body_budget(&self, bytes: usize) -> Result<tokio::sync::OwnedSemaphorePermit, Problem> {
        take_kib(&self.bodies, kib(bytes))
    }

    /// A streamed body's share of the body budget (the streaming ingest),
    /// following what the reader holds of it: nothing while it holds
    /// nothing.
    pub fn body_hold(&self) -> BodyHold {
        BodyHold {
            bodies: self.bodies.clone(),
            held: None,
        }
    }
}

/// `n` KiB of the body budget; 503 `server_busy` when it is spent.
fn take_kib(
    bodies: &Arc<tokio::sync::Semaphore>,
    n: usize,
) -> Result<tokio::sync::OwnedSemaphorePermit, Problem> {
    let permits = u32::try_from(n).unwrap_or(u32::MAX);
    bodies.clone().try_acquire_many_owned(permits).map_err(|_| {
        metrics::counter!("projector_limit_hits_total", "limit" => "inflight_body_bytes")
            .increment(1);
        Problem::unavailable(
            "server_busy",
            "too many request bodies are being read at once; retry shortly",
        )
    })
}

/// What a streamed body holds of the body budget; given back on drop.
pub struct BodyHold {
    bodies: Arc<tokio::sync::Semaphore>,
    held: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl BodyHold {
    /// Hold `bytes` now (more or fewer than before); 503 `server_busy`
    /// when more cannot be had (what was held stays held).
    pub fn hold(&mut self, bytes: usize) -> Result<(), Problem> {
        let want = if bytes == 0 { 0 } else { kib(bytes) };
        let have = self.held.as_ref().map_or(0, |p| p.num_permits());
        if want > have {
            let more = take_kib(&self.bodies, want - have)?;
            match &mut self.held {
                Some(p) => p.merge(more),
                None => self.held = Some(more),
            }
        } else if want == 0 {
            self.held = None;
        } else if let Some(p) = &mut self.held {
            drop(p.split(have - want));
        }
        Ok(())
    }
}

impl Limiter {
    /// Charge `events` to the session's and the token's ingest rate.
    pub fn ingest(&self, session: &str, token: Option<&str>, events: usize) -> Result<(), Problem> {
        let now = Instant::now();
        let n = events as f64;
        if let Err(wait) = self.sessions.take(session, n, now) {
            metrics::counter!("projector_limit_hits_total", "limit" => "ingest_rate_session")
                .increment(1);
            return Err(too_many(
                "rate_limited",
                format!("ingest rate limit of this session reached; retry in {wait} s"),
                wait,
            ));
        }
        if let Some(t) = token {
            if let Err(wait) = self.tokens.take(t, n, now) {
                self.sessions.refund(session, n);
                metrics::counter!("projector_limit_hits_total", "limit" => "ingest_rate_token")
                    .increment(1);
                return Err(too_many(
                    "rate_limited",
                    format!("ingest rate limit of this token reached; retry in {wait} s"),
                    wait,
                ));
            }
        }
        Ok(())
    }

    /// Admit one more stream on `session`; the guard frees the slot on drop.
    pub fn subscribe(&self, session: &str) -> Result<SubscriberSlot, Problem> {
        if self.total.fetch_add(1, Ordering::SeqCst) >= self.max_total {
            self.total.fetch_sub(1, Ordering::SeqCst);
            metrics::counter!("projector_limit_hits_total", "limit" => "subscribers_total")
                .increment(1);
            return Err(too_many(
                "too_many_subscribers",
                format!("the server has {} open streams, its limit", self.max_total),
                5,
            ));
        }
        {
            let mut n = self.subscribers.entry(session.to_string()).or_insert(0);
            if *n >= self.per_session {
                drop(n);
                self.total.fetch_sub(1, Ordering::SeqCst);
                metrics::counter!("projector_limit_hits_total", "limit" => "subscribers_session")
                    .increment(1);
                return Err(too_many(
                    "too_many_subscribers",
                    format!(
                        "this session has {} open streams, its limit",
                        self.per_session
                    ),
                    5,
                ));
            }
            *n += 1;
        }
        Ok(SubscriberSlot {
            session: session.to_string(),
            map: self.subscribers.clone(),
            total: self.total.clone(),
        })
    }
}

/// One admitted stream; frees its slot when dropped.
#[derive(Debug)]
pub struct SubscriberSlot {
    session: String,
    map: Arc<DashMap<String, usize>>,
    total: Arc<AtomicUsize>,
}

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        self.total.fetch_sub(1, Ordering::SeqCst);
        self.map.remove_if_mut(&self.session, |_, n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
    }
}

/// Bytes as KiB permits (at least one).
fn kib(bytes: usize) -> usize {
    bytes
        .div_ceil(1024)
        .clamp(1, tokio::sync::Semaphore::MAX_PERMITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LimitsConfig {
        LimitsConfig {
            max_string_bytes: 1000,
            max_depth: 10,
            ingest_events_per_sec_per_session: 10,
            ingest_burst_per_session: 20,
            ingest_events_per_sec_per_token: 5,
            ingest_burst_per_token: 25,
            max_subscribers_per_session: 2,
            max_subscribers: 3,
            max_sessions_per_stream: 4,
            max_live_sessions: 10,
            ws_max_message_bytes: 4096,
            body_timeout_secs: 1,
            max_inflight_body_bytes: 4096,
        }
    }

    #[test]
    fn the_body_budget_is_shared_and_comes_back() {
        let l = Limiter::new(&cfg());
        let a = l.body_budget(3000).expect("within the budget");
        let e = l.body_budget(2000).unwrap_err();
        assert_eq!((e.status, e.code.as_ref()), (503, "server_busy"));
        drop(a);
        assert!(l.body_budget(4096).is_ok());
    }

    #[test]
    fn a_streamed_body_holds_what_it_buffers_and_gives_it_back() {
        let l = Limiter::new(&cfg());
        let mut a = l.body_hold();
        a.hold(3000).expect("within the budget");
        assert!(l.body_budget(2000).is_err(), "3 KiB of 4 are held");
        let mut b = l.body_hold();
        assert_eq!(b.hold(2048).unwrap_err().code, "server_busy");
        a.hold(100).expect("shrinks");
        b.hold(2048).expect("what a gave back");
        assert!(l.body_budget(1024).is_ok(), "1 + 2 KiB held");
        drop(b);
        a.hold(0).unwrap();
        assert!(l.body_budget(4096).is_ok(), "all of it back");
    }

    #[test]
    fn buckets_refill_and_say_when_to_retry() {
        let b = Buckets::new(10, 20);
        let t0 = Instant::now();
        assert!(b.take("s", 20.0, t0).is_ok());
        assert_eq!(b.take("s", 5.0, t0), Err(1));
        assert!(b.take("s", 5.0, t0 + Duration::from_millis(600)).is_ok());
        assert_eq!(
            b.take("t", 50.0, t0),
            Ok(()),
            "a batch over the burst drains a full bucket"
        );
        assert_eq!(
            b.take("t", 1.0, t0 + Duration::from_secs(1)),
            Err(3),
            "and leaves debt"
        );
        assert!(
            Buckets::new(0, 0).take("x", 1e9, t0).is_ok(),
            "rate 0 is unlimited"
        );
    }

    #[test]
    fn token_limit_refunds_the_session() {
        let l = Limiter::new(&cfg());
        assert!(l.ingest("s", Some("u"), 20).is_ok());
        let e = l.ingest("s2", Some("u"), 10).unwrap_err();
        assert_eq!((e.status, e.code.as_ref()), (429, "rate_limited"));
        assert!(e.retry_after.is_some());
        assert!(
            l.ingest("s2", None, 20).is_ok(),
            "s2's session bucket was refunded"
        );
    }

    #[test]
    fn subscriber_slots_per_session_and_total() {
        let l = Limiter::new(&cfg());
        let a1 = l.subscribe("a").unwrap();
        let _a2 = l.subscribe("a").unwrap();
        assert_eq!(l.subscribe("a").unwrap_err().code, "too_many_subscribers");
        let _b1 = l.subscribe("b").unwrap();
        assert_eq!(
            l.subscribe("c").unwrap_err().code,
            "too_many_subscribers",
            "total"
        );
        drop(a1);
        assert!(l.subscribe("c").is_ok(), "a dropped stream frees its slot");
    }
}
