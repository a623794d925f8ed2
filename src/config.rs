//! Configuration: embedded `config/default.toml` -> optional file -> env
//! (`PROJECTOR_`, `__` for nesting) -> CLI overrides; validated once.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

mod auth;
mod durable_streams;
mod runs;
mod stream;
mod telemetry;
mod upstream;

use crate::allowlist::{http_url, AllowedHost};
use crate::projection::ProjectionConfig;
pub use auth::{AuthConfig, AuthMode, PublicKeyConfig};
pub use durable_streams::DurableStreamsConfig;
pub use runs::RunsConfig;
pub use stream::StreamConfig;
pub use telemetry::TelemetryConfig;
pub use upstream::UpstreamConfig;

/// The defaults, compiled into the binary.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// Which event store backs the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// In memory, lost on restart.
    Memory,
    /// Durable redb database under `data_dir`.
    Embedded,
    /// Redis, shared by every node of a cluster (see `[redis]`).
    Redis,
}

/// The whole configuration (see `config/default.toml` for every key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub listen: SocketAddr,
    pub store: StoreKind,
    pub data_dir: PathBuf,
    pub ingest: IngestConfig,
    pub projection: ProjectionConfig,
    pub sessions: SessionsConfig,
    pub retention: RetentionConfig,
    pub runs: RunsConfig,
    pub storage: StorageConfig,
    pub redis: RedisConfig,
    pub stream: StreamConfig,
    pub http: HttpConfig,
    pub log: LogConfig,
    pub auth: AuthConfig,
    pub limits: LimitsConfig,
    pub controls: ControlsConfig,
    pub upstream: UpstreamConfig,
    pub durable_streams: DurableStreamsConfig,
    pub telemetry: TelemetryConfig,
}

/// A secret string: serialises as itself, but `Debug` never shows it, so a
/// logged config cannot leak it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "[REDACTED]"
        })
    }
}

impl std::ops::Deref for Secret {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_string())
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

/// `[limits]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub max_string_bytes: usize,
    pub max_depth: usize,
    pub ingest_events_per_sec_per_session: u64,
    pub ingest_burst_per_session: u64,
    pub ingest_events_per_sec_per_token: u64,
    pub ingest_burst_per_token: u64,
    pub max_subscribers_per_session: usize,
    pub max_subscribers: usize,
    /// Sessions one multiplexed connection may follow (`/v1/streams`).
    pub max_sessions_per_stream: usize,
    pub max_live_sessions: usize,
    pub ws_max_message_bytes: usize,
    pub body_timeout_secs: u64,
    pub max_inflight_body_bytes: usize,
}

/// `[ingest]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    pub max_body_bytes: usize,
    /// Largest UI message stream (`text/event-stream`) one request may send.
    pub max_stream_bytes: usize,
    pub max_events_per_batch: usize,
    pub inline_payload_bytes: usize,
    pub hard_payload_bytes: usize,
}

/// `[sessions]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    pub idle_evict_secs: u64,
    pub mailbox: usize,
    pub checkpoint_every: u64,
}

/// `[retention]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    pub max_events_per_session: u64,
    pub max_age_secs: u64,
    pub sweep_secs: u64,
}

impl Config {
    /// The limits every event is normalised within.
    pub fn event_limits(&self) -> crate::event::Limits {
        crate::event::Limits {
            inline_payload_bytes: self.ingest.inline_payload_bytes,
            hard_payload_bytes: self.ingest.hard_payload_bytes,
            max_string_bytes: self.limits.max_string_bytes,
            max_depth: self.limits.max_depth,
        }
    }
}

/// `[storage]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    pub min_free_bytes: u64,
    pub cache_bytes: usize,
    /// The longest a plain append waits in the write-ahead log before the
    /// database takes it, in ms.
    pub flush_interval_ms: u64,
}

/// `[redis]`: the shared store of a multi-node deployment (`store = "redis"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]` or `rediss://` for TLS;
    /// with `cluster`, comma-separated seed nodes.
    pub url: Secret,
    /// `url` names a Redis Cluster (seed nodes), not one server.
    pub cluster: bool,
    /// Prefix of every key and channel; nodes of one cluster share it.
    pub prefix: String,
    /// Timeout of one command (and of connecting), in ms.
    pub timeout_ms: u64,
    /// Times an ingest is retried when another node appended to the same
    /// session first (each retry first catches up with the log).
    pub max_conflict_retries: u32,
    /// Replicas that must confirm an append (Redis `WAIT`) before it is
    /// acknowledged; 0: the primary's word is enough.
    pub min_replicas_acked: u32,
    /// After the node's pub/sub connection has been down this long, in ms,
    /// its open session streams end, so that their clients resume on a node
    /// that can reach Redis; 0: they stay open.
    pub partition_close_ms: u64,
}

impl RedisConfig {
    /// The URL (a secret: it may carry a password).
    pub fn url(&self) -> &str {
        &self.url.0
    }
}

/// `[http]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    pub cors_allowed_origins: Vec<String>,
    /// Gzip responses for clients that accept it: one-shot bodies, and
    /// event streams flushed per write.
    pub compression: bool,
    /// Most event streams and WebSockets holding a deflate context at once
    /// (each busy one about 270 KiB); past it, event streams go out
    /// uncompressed and WebSockets send shared deflated frames.
    pub compressed_streams_max: usize,
    /// Agree on `permessage-deflate` with WebSocket clients that offer it:
    /// a busy socket deflates with a context of its own while a slot of
    /// `compressed_streams_max` is free, otherwise each frame is deflated
    /// once for every socket.
    pub ws_deflate: bool,
}

/// `[controls]`: the relay of decisions and run controls to runtimes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlsConfig {
    /// Control URL for sessions whose runtime named none; empty: none.
    pub default_url: String,
    /// Hosts (`host` or `host:port`) the relay may call; empty: none.
    pub allowed_hosts: Vec<String>,
    /// HMAC-SHA256 key that signs every relayed body.
    pub signing_secret: Secret,
    /// Timeout of one attempt (connect, send, response headers), in ms.
    pub timeout_ms: u64,
    /// Retries after the first attempt (connect errors, timeouts, 5xx).
    pub max_retries: u32,
    /// Wait before the first retry, in ms; doubles for each next one.
    pub backoff_ms: u64,
}

impl ControlsConfig {
    /// Check the section (called by [`Config::validate`]).
    pub(crate) fn validate(&self) -> Result<(), String> {
        let cfg = self;
        if cfg.timeout_ms == 0 {
            return Err("controls.timeout_ms must be at least 1".into());
        }
        if cfg.max_retries > 10 {
            return Err("controls.max_retries must be at most 10".into());
        }
        if cfg.backoff_ms > 60_000 {
            return Err("controls.backoff_ms must be at most 60000".into());
        }
        if let Some(bad) = cfg
            .allowed_hosts
            .iter()
            .find(|h| AllowedHost::parse(h).is_none())
        {
            return Err(format!(
                "controls.allowed_hosts: `{bad}` is not a host name or host:port"
            ));
        }
        if !cfg.default_url.is_empty() && http_url(&cfg.default_url).is_none() {
            return Err("controls.default_url must be empty or an http(s) URL".into());
        }
        if !cfg.allowed_hosts.is_empty() && cfg.signing_secret.is_empty() {
            return Err(
                "controls.signing_secret must be set when controls.allowed_hosts is not empty"
                    .into(),
            );
        }
        Ok(())
    }
}

/// `[log]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: String,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Overrides from the command line (highest precedence).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// `--redis-url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisOverrides>,
    /// `--insecure-no-auth`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthOverrides>,
}

/// Redis overrides from the command line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RedisOverrides {
    pub url: String,
}

/// Auth overrides from the command line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuthOverrides {
    pub insecure_no_auth: bool,
}

/// A configuration that cannot be loaded or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value of the wrong type or form, named by where it was set.
    #[error("configuration: {0}")]
    Value(String),
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Load with the full layering. `env` is the environment to read
    /// (pass `std::env::vars()` in production, a fixed list in tests).
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut fig = Figment::from(Toml::string(DEFAULT_TOML));
        if let Some(path) = file {
            if !path.exists() {
                return Err(ConfigError::MissingFile(path.to_path_buf()));
            }
            fig = fig.merge(Toml::file(path));
        }
        let vars: Vec<(String, String)> = env
            .into_iter()
            // PROJECTOR_TEST_* belong to the test suite (the Redis URL of the
            // multi-node tests), not to the server's configuration.
            .filter(|(k, _)| k.starts_with("PROJECTOR_") && !k.starts_with("PROJECTOR_TEST_"))
            .collect();
        let env_keys: Vec<String> = vars.iter().map(|(k, _)| k.clone()).collect();
        fig = fig
            .merge(env_provider(vars))
            .merge(Serialized::defaults(overrides));
        let cfg: Config = fig
            .extract()
            .map_err(|e| ConfigError::Value(where_set(&e, &env_keys, file)))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The defaults alone (tests).
    pub fn defaults() -> Config {
        Config::load(None, Vec::new(), &Overrides::default()).expect("embedded defaults are valid")
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.limits.body_timeout_secs == 0 {
            return bad("limits.body_timeout_secs must be at least 1");
        }
        if self.limits.max_inflight_body_bytes < self.ingest.max_body_bytes {
            return bad("limits.max_inflight_body_bytes must be at least ingest.max_body_bytes");
        }
        if self.ingest.max_events_per_batch == 0 {
            return bad("ingest.max_events_per_batch must be at least 1");
        }
        if self.ingest.inline_payload_bytes > self.ingest.hard_payload_bytes {
            return bad("ingest.inline_payload_bytes must not exceed ingest.hard_payload_bytes");
        }
        if self.stream.live_buffer == 0 || self.stream.replay_page == 0 {
            return bad("stream.live_buffer and stream.replay_page must be at least 1");
        }
        if self.stream.index_buffer == 0 || self.stream.index_snapshot_max == 0 {
            return bad("stream.index_buffer and stream.index_snapshot_max must be at least 1");
        }
        if self.stream.heartbeat_secs == 0 {
            return bad("stream.heartbeat_secs must be at least 1");
        }
        if self.sessions.mailbox == 0 || self.sessions.checkpoint_every == 0 {
            return bad("sessions.mailbox and sessions.checkpoint_every must be at least 1");
        }
        if self.limits.max_depth == 0 || self.limits.max_string_bytes == 0 {
            return bad("limits.max_depth and limits.max_string_bytes must be at least 1");
        }
        if self.limits.max_sessions_per_stream == 0 {
            return bad("limits.max_sessions_per_stream must be at least 1");
        }
        if self.limits.ws_max_message_bytes < 1024 {
            return bad("limits.ws_max_message_bytes must be at least 1024");
        }
        if self.retention.max_age_secs > 0 && self.retention.sweep_secs == 0 {
            return bad(
                "retention.sweep_secs must be at least 1 when retention.max_age_secs is set",
            );
        }
        if self.retention.max_events_per_session < self.sessions.checkpoint_every {
            return bad(
                "retention.max_events_per_session must be at least sessions.checkpoint_every",
            );
        }
        if self.store == StoreKind::Redis {
            if self.redis.timeout_ms == 0 {
                return bad("redis.timeout_ms must be at least 1");
            }
            if self.redis.prefix.is_empty() || self.redis.prefix.contains(['{', '}']) {
                return bad("redis.prefix must be non-empty and must not contain '{' or '}'");
            }
        }
        self.controls.validate().map_err(ConfigError::Invalid)?;
        self.upstream
            .validate(&self.controls.allowed_hosts)
            .map_err(ConfigError::Invalid)?;
        self.telemetry.validate().map_err(ConfigError::Invalid)?;
        self.durable_streams
            .validate()
            .map_err(ConfigError::Invalid)?;
        Ok(())
    }
}

/// A value error, named by where its key was set: the environment variable
/// (`PROJECTOR_STREAM__HEARTBEAT_SECS`), the config file, or the flags.
fn where_set(e: &figment::Error, env_keys: &[String], file: Option<&Path>) -> String {
    let key = e.path.join(".");
    let var = format!("PROJECTOR_{}", e.path.join("__").to_ascii_uppercase());
    let origin = if e.path.is_empty() {
        "the configuration".to_string()
    } else if env_keys.iter().any(|k| k.eq_ignore_ascii_case(&var)) {
        format!("environment variable {var} (key {key})")
    } else if let Some(f) = file {
        format!("key {key} (config file {} or a flag)", f.display())
    } else {
        format!("key {key}")
    };
    format!("{origin}: {}", e.kind)
}

/// Env vars as a figment provider: `PROJECTOR_STREAM__HEARTBEAT_SECS` ->
/// `stream.heartbeat_secs`.
fn env_provider(vars: Vec<(String, String)>) -> Serialized<serde_json::Value> {
    let mut root = serde_json::Map::new();
    for (k, v) in vars {
        let key = k["PROJECTOR_".len()..].to_ascii_lowercase();
        let parts: Vec<String> = key.split("__").map(str::to_string).collect();
        let value = parse_env_value(&v);
        insert_path(&mut root, &parts, value);
    }
    Serialized::defaults(serde_json::Value::Object(root))
}

fn parse_env_value(v: &str) -> serde_json::Value {
    // Numbers, booleans and arrays in TOML syntax; anything else is a string.
    let probe = format!("v = {v}");
    match toml_value(&probe) {
        Some(val) => val,
        None => serde_json::Value::String(v.to_string()),
    }
}

fn toml_value(doc: &str) -> Option<serde_json::Value> {
    let fig = Figment::from(Toml::string(doc));
    fig.extract_inner::<serde_json::Value>("v").ok()
}

fn insert_path(
    root: &mut serde_json::Map<String, serde_json::Value>,
    parts: &[String],
    v: serde_json::Value,
) {
    match parts {
        [] => {}
        [last] => {
            root.insert(last.clone(), v);
        }
        [head, rest @ ..] => {
            let entry = root
                .entry(head.clone())
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if !entry.is_object() {
                *entry = serde_json::Value::Object(Default::default());
            }
            if let serde_json::Value::Object(m) = entry {
                insert_path(m, rest, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_load() {
        let c = Config::defaults();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.store, StoreKind::Embedded);
        assert_eq!(c.ingest.inline_payload_bytes, 32_000);
        assert_eq!(c.retention.max_events_per_session, 100_000);
        assert_eq!(c.storage.cache_bytes, 64 << 20, "not redb's 1 GiB");
    }

    #[test]
    fn env_then_flags_override() {
        let c = Config::load(
            None,
            env(&[
                ("PROJECTOR_LISTEN", "0.0.0.0:9000"),
                ("PROJECTOR_STORE", "memory"),
                ("PROJECTOR_STREAM__HEARTBEAT_SECS", "3"),
                ("PROJECTOR_RETENTION__MAX_EVENTS_PER_SESSION", "5000"),
                ("PROJECTOR_STORAGE__CACHE_BYTES", "1048576"),
                ("PROJECTOR_LIMITS__BODY_TIMEOUT_SECS", "7"),
                (
                    "PROJECTOR_HTTP__CORS_ALLOWED_ORIGINS",
                    r#"["http://a.test"]"#,
                ),
                ("OTHER_VAR", "x"),
                ("PROJECTOR_TEST_REDIS_URL", "redis://ignored"),
            ]),
            &Overrides {
                listen: Some("127.0.0.1:7000".parse().unwrap()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:7000");
        assert_eq!(c.store, StoreKind::Memory);
        assert_eq!(c.stream.heartbeat_secs, 3);
        assert_eq!(c.retention.max_events_per_session, 5000);
        assert_eq!(c.storage.cache_bytes, 1 << 20);
        assert_eq!(c.limits.body_timeout_secs, 7);
        assert_eq!(c.http.cors_allowed_origins, vec!["http://a.test"]);
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let c = Config::load(
            None,
            env(&[
                ("PROJECTOR_AUTH__HS256_SECRET", "s3cr3t-value"),
                ("PROJECTOR_CONTROLS__SIGNING_SECRET", "other-s3cr3t"),
            ]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(&*c.auth.hs256_secret, "s3cr3t-value");
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("[REDACTED]"));
    }

    #[test]
    fn invalid_values_are_errors() {
        let e = Config::load(
            None,
            env(&[("PROJECTOR_STREAM__LIVE_BUFFER", "0")]),
            &Overrides::default(),
        );
        assert!(matches!(e, Err(ConfigError::Invalid(_))));
        let e = Config::load(
            None,
            env(&[("PROJECTOR_STORE", "floppy")]),
            &Overrides::default(),
        );
        // Named by the variable that set it, not by a place in the source.
        match e {
            Err(ConfigError::Value(m)) => {
                assert!(m.contains("PROJECTOR_STORE") && m.contains("floppy"), "{m}");
                assert!(!m.contains("src/config.rs"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        let e = Config::load(
            Some(Path::new("/nonexistent.toml")),
            Vec::new(),
            &Overrides::default(),
        );
        assert!(matches!(e, Err(ConfigError::MissingFile(_))));
    }

    #[test]
    fn the_chat_upstream_must_be_on_the_allowlist() {
        let load = |vars: &[(&str, &str)]| Config::load(None, env(vars), &Overrides::default());
        let e = load(&[(
            "PROJECTOR_UPSTREAM__CHAT_URL",
            "http://chat.internal:3000/api/chat",
        )]);
        match e {
            Err(ConfigError::Invalid(m)) => assert!(m.contains("allowed_hosts"), "{m}"),
            other => panic!("{other:?}"),
        }
        let e = load(&[("PROJECTOR_UPSTREAM__CHAT_URL", "ftp://chat.internal/")]);
        assert!(matches!(e, Err(ConfigError::Invalid(_))));
        let ok = load(&[
            (
                "PROJECTOR_UPSTREAM__CHAT_URL",
                "http://chat.internal:3000/api/chat",
            ),
            ("PROJECTOR_CONTROLS__ALLOWED_HOSTS", r#"["chat.internal"]"#),
            ("PROJECTOR_CONTROLS__SIGNING_SECRET", "s"),
        ]);
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn the_ag_ui_upstream_must_be_on_the_allowlist_too() {
        let load = |vars: &[(&str, &str)]| Config::load(None, env(vars), &Overrides::default());
        let e = load(&[
            (
                "PROJECTOR_UPSTREAM__AG_UI_URL",
                "http://agent.internal:8000/",
            ),
            ("PROJECTOR_CONTROLS__ALLOWED_HOSTS", r#"["chat.internal"]"#),
            ("PROJECTOR_CONTROLS__SIGNING_SECRET", "s"),
        ]);
        match e {
            Err(ConfigError::Invalid(m)) => assert!(m.contains("upstream.ag_ui_url"), "{m}"),
            other => panic!("{other:?}"),
        }
        let ok = load(&[
            (
                "PROJECTOR_UPSTREAM__AG_UI_URL",
                "http://agent.internal:8000/",
            ),
            ("PROJECTOR_CONTROLS__ALLOWED_HOSTS", r#"["agent.internal"]"#),
            ("PROJECTOR_CONTROLS__SIGNING_SECRET", "s"),
        ]);
        assert_eq!(
            ok.map(|c| c.upstream.ag_ui_url).ok().as_deref(),
            Some("http://agent.internal:8000/")
        );
    }
}
