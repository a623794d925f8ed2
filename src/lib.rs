//! agent-projector: a streaming projection server for AI agent UIs.
//!
//! Runtimes POST the facts of a run; the server keeps one projection (read
//! model) per session in a per-session actor and streams it to browsers over
//! SSE and WebSocket as Vercel AI SDK `UIMessageChunk` deltas plus
//! snapshots, with exact replay from any cursor.
//!
//! # Layout
//! - [`config`]: layered configuration (embedded defaults, file, env, flags).
//! - [`allowlist`]: the outbound hosts the server may call.
//! - [`event`]: wire envelopes, normalisation to one `Fact` (named steps in
//!   [`mod@event::normalize`]), validation, redaction, strict body reading.
//! - [`projection`]: the read model and its pure reducer (fact -> chunks),
//!   one room per surface; [`projection::ui_message`] is the AI SDK message.
//! - [`frame`]: snapshot/delta/reset frames, encoded once and shared.
//! - [`store`]: the per-session event log trait, its backends, the codec and
//!   the contract every backend keeps.
//! - [`session`]: commands, handles and the registry; `session::actor` is
//!   one actor per session (hydrate, ingest, commands, feed, shared-store sync).
//! - [`control`]: the relay of decisions and run controls to runtimes.
//! - [`ds`]: Durable Streams: streams of bytes or JSON at a path, created,
//!   appended, read from any offset, closed, expired (the protocol's rules
//!   pure in [`ds::model`]), each a log of its own on the configured store.
//! - [`gateway`]: the gateways' upstream runs (AI SDK chat, AG-UI): the
//!   request forwarded, its answer read into the session as it arrives.
//! - [`stream`]: the one replay-then-live machine; SSE, WebSocket and AI SDK
//!   message streams are views over it.
//! - [`http`]: routers per resource, extractors, limits, operations, the
//!   OpenAPI document ([`openapi`], generated from the handlers) and
//!   [`http::error`] (`Problem`, the problem+json error type).
//! - `serve`: the HTTP/1.1 server: event-stream connections served on their
//!   own (no HTTP buffers while idle), every other connection by hyper.
//!
//! Dependencies point one way: http -> session -> projection/store; event
//! and projection know nothing about HTTP; no module imports one that
//! imports it back. docs/ARCHITECTURE.md maps every room.
#![forbid(unsafe_code)]

// The pure core (crates/projector-core), under the names the server uses.
pub use projector_core::{compact_json, event, frame, producer, projection};

/// A metric handle registered once at its call site, for the per-request
/// path: `metrics::counter!` and friends look their key up in the
/// recorder's registry on every call (hashing the name and labels; 2.0% of
/// a single-event POST's samples), a kept handle only records. The first
/// use installs the recorder ([`metrics_handle`]), so a kept handle is
/// never the no-op one. Static names and labels only.
macro_rules! kept {
    ($kind:ident, $($key:tt)+) => {{
        static HANDLE: std::sync::OnceLock<kept!(@type $kind)> = std::sync::OnceLock::new();
        HANDLE.get_or_init(|| {
            $crate::metrics_handle();
            metrics::$kind!($($key)+)
        })
    }};
    (@type counter) => { metrics::Counter };
    (@type histogram) => { metrics::Histogram };
    (@type gauge) => { metrics::Gauge };
}

pub mod allowlist;
pub mod config;
pub mod control;
pub mod ds;
pub mod gateway;
pub mod http;
pub use http::openapi;
pub mod logfields;
mod serve;
pub mod session;
pub mod store;
pub mod stream;
pub mod telemetry;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use config::{Config, StoreKind};
use session::{Registry, RegistryConfig};
use store::embedded::{EmbeddedLog, EmbeddedOptions};
use store::redis::{RedisLog, RedisOptions};
use store::{memory::MemoryLog, Retention, SharedLog, StoreError};

/// Open the store the configuration names.
pub fn open_store(cfg: &Config) -> Result<SharedLog, StoreError> {
    let retention = Retention {
        max_events_per_session: cfg.retention.max_events_per_session,
        max_age_ms: (cfg.retention.max_age_secs > 0)
            .then(|| cfg.retention.max_age_secs.saturating_mul(1000)),
    };
    Ok(match cfg.store {
        StoreKind::Memory => Arc::new(MemoryLog::new(retention)),
        StoreKind::Embedded => Arc::new(EmbeddedLog::open(
            &cfg.data_dir,
            EmbeddedOptions {
                retention,
                min_free_bytes: cfg.storage.min_free_bytes,
                cache_bytes: cfg.storage.cache_bytes,
                flush_interval: std::time::Duration::from_millis(cfg.storage.flush_interval_ms),
            },
        )?),
        StoreKind::Redis => Arc::new(RedisLog::open(
            cfg.redis.url(),
            cfg.redis.cluster,
            RedisOptions::new(&cfg.redis, retention),
        )?),
    })
}

/// The process-wide Prometheus recorder (the `metrics` facade is global).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                // Latencies as histograms (aggregatable across nodes, and
                // what a dashboard's heatmaps and quantiles are built on).
                .set_buckets_for_metric(
                    Matcher::Suffix("_seconds".into()),
                    &[
                        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                        0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    ],
                )
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Suffix("_depth".into()),
                        &[
                            0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0,
                        ],
                    )
                })
                .expect("bucket lists are not empty")
                .build_recorder();
            let handle = recorder.handle();
            // Histogram samples wait in the recorder until drained: without
            // a scrape they would grow without bound.
            let upkeep = handle.clone();
            let _ = std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(std::time::Duration::from_secs(5));
                    upkeep.run_upkeep();
                });
            // Fails only if another recorder is installed; then ours just
            // renders nothing, which tests would notice.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Serve the API on `listener` until `shutdown` is cancelled; open streams
/// end on shutdown, then in-flight requests finish.
pub async fn run(
    cfg: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let store = open_store(&cfg)?;
    serve(cfg, store, listener, shutdown).await
}

/// Refuse to serve without authentication on a non-loopback address,
/// unless explicitly allowed.
fn check_exposure(cfg: &Config, addr: std::net::SocketAddr) -> anyhow::Result<()> {
    if cfg.auth.mode == config::AuthMode::None
        && !addr.ip().is_loopback()
        && !cfg.auth.insecure_no_auth
    {
        anyhow::bail!(
            "refusing to listen on {addr} without authentication: set auth.mode = \"jwt\" \
             (PROJECTOR_AUTH__MODE=jwt with a key), or pass --insecure-no-auth for a trusted network"
        );
    }
    Ok(())
}

/// [`run`] with a store the caller opened.
pub async fn serve(
    cfg: Config,
    store: SharedLog,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    check_exposure(&cfg, listener.local_addr()?)?;
    let auth = Arc::new(http::auth::Authenticator::from_config(&cfg.auth)?);
    if cfg.auth.mode == config::AuthMode::None {
        tracing::warn!(
            "auth.mode = none: every client may read, publish and control every session"
        );
    }
    let registry = Registry::new(
        store,
        RegistryConfig {
            projection: cfg.projection.clone(),
            max_live: cfg.limits.max_live_sessions,
            idle_evict: Duration::from_secs(cfg.sessions.idle_evict_secs),
            mailbox: cfg.sessions.mailbox,
            checkpoint_every: cfg.sessions.checkpoint_every,
            live_buffer: cfg.stream.live_buffer,
            replay_page: cfg.stream.replay_page,
            index_buffer: cfg.stream.index_buffer,
            conflict_retries: cfg.redis.max_conflict_retries,
        },
        shutdown.clone(),
    );
    if cfg.retention.max_age_secs > 0 {
        registry.spawn_task(sweep(
            registry.clone(),
            Duration::from_secs(cfg.retention.sweep_secs),
            cfg.retention.max_age_secs.saturating_mul(1000),
            shutdown.clone(),
        ));
    }
    if cfg.runs.idle_timeout_secs > 0 || cfg.runs.tool_idle_timeout_secs > 0 {
        registry.spawn_task(session::silence::sweep(
            registry.clone(),
            cfg.runs.timeouts(),
            cfg.event_limits(),
            shutdown.clone(),
        ));
    }
    let relay = control::Relay::new(&cfg.controls)?;
    let gateway = Arc::new(gateway::Gateway::new(&cfg)?);
    let streams = if cfg.durable_streams.enabled {
        let d = &cfg.durable_streams;
        let streams = ds::Streams::new(
            ds::open_store(&cfg)?,
            ds::Settings {
                long_poll: Duration::from_millis(d.long_poll_ms),
                sse_span: Duration::from_secs(d.sse_span_secs),
                read_bytes: d.read_bytes,
            },
        );
        registry.spawn_task(sweep_streams(
            streams.clone(),
            Duration::from_secs(d.sweep_secs),
            shutdown.clone(),
        ));
        Some(streams)
    } else {
        None
    };
    let shards = cfg
        .stream
        .shared_writers
        .then(|| stream::shard::Shards::new(registry.clone()));
    let state = http::AppState::new(http::AppShared {
        auth,
        limits: Arc::new(http::limits::Limiter::new(&cfg.limits)),
        registry: registry.clone(),
        cfg: Arc::new(cfg),
        shutdown: shutdown.clone(),
        metrics: metrics_handle(),
        relay,
        gateway,
        streams,
        compressed_streams: Default::default(),
        shards,
    });
    let app = http::router(state);
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "agent-projector listening on http://{addr}");
    serve::http1(listener, app, shutdown.clone()).await;
    // Streams have ended and requests finished; let the actors finish too,
    // so that the store is released (and its writer flushed) on return.
    registry.wait_stopped().await;
    tracing::info!("agent-projector stopped");
    Ok(())
}

/// The Durable Streams expiry sweep: every `every`, delete the streams
/// past their TTL or expiry.
async fn sweep_streams(streams: Arc<ds::Streams>, every: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match streams.sweep(10_000).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "expiry sweep deleted durable streams"),
            Err(e) => tracing::warn!(error = %e, "expiry sweep of durable streams failed"),
        }
    }
}

/// The retention sweep: every `every`, delete sessions idle for `max_age_ms`.
async fn sweep(registry: Registry, every: Duration, max_age_ms: u64, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let before = store::now_ms().saturating_sub(max_age_ms);
        match registry.expire(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "retention sweep deleted idle sessions"),
            Err(e) => tracing::warn!(error = %e, "retention sweep failed"),
        }
    }
}
