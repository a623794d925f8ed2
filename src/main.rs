//! The `agent-projector` binary: parse flags, load config, init tracing,
//! then serve (default), check health (`healthcheck`, for container
//! HEALTHCHECKs without curl), mint a token from the configured HS256 secret
//! (`token`) or print the OpenAPI document (`openapi`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agent_projector::config::{
    AuthOverrides, Config, LogFormat, Overrides, RedisOverrides, StoreKind,
};
use clap::{Parser, Subcommand, ValueEnum};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// jemalloc: fewer resident bytes per idle connection and a faster reducer
/// than the system allocator (docs/BENCHMARKS.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(
    name = "agent-projector",
    version,
    about = "Streaming projection server for AI agent UIs"
)]
struct Cli {
    /// Address to listen on [env: PROJECTOR_LISTEN] [default: 127.0.0.1:8080].
    #[arg(long, global = true)]
    listen: Option<SocketAddr>,
    /// A TOML config file layered over the embedded defaults.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Event store: embedded, memory or redis [env: PROJECTOR_STORE] [default: embedded].
    #[arg(long, global = true)]
    store: Option<StoreArg>,
    /// Data directory of the embedded store [env: PROJECTOR_DATA_DIR] [default: ./data].
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Redis URL of the shared store (with --store redis) [env: PROJECTOR_REDIS__URL].
    #[arg(long, global = true)]
    redis_url: Option<String>,
    /// Serve without authentication on a non-loopback address (auth.mode = "none").
    #[arg(long, global = true)]
    insecure_no_auth: bool,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum StoreArg {
    Memory,
    Embedded,
    Redis,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve the API (the default).
    Serve,
    /// Exit 0 when the server at the configured address answers /readyz.
    Healthcheck {
        /// Address to probe (`host:port`, e.g. `localhost:8080`); defaults to
        /// the configured listen address.
        #[arg(long)]
        addr: Option<String>,
    },
    /// Print a JWT signed with the configured auth.hs256_secret
    /// (PROJECTOR_AUTH__HS256_SECRET), for curl and scripts.
    Token {
        /// A session the token may use: an id or a pattern (`team-a/*`, `*`);
        /// repeat for several.
        #[arg(long = "session", default_value = "*")]
        sessions: Vec<String>,
        /// A scope: publish, subscribe, control or admin; repeat for several.
        #[arg(long = "scope", default_value = "subscribe")]
        scopes: Vec<String>,
        /// How long the token is valid: seconds, or with a unit (30m, 12h, 7d).
        #[arg(long, default_value = "1h", value_parser = parse_ttl)]
        ttl: Duration,
        /// The token's subject (`sub`), shown in logs.
        #[arg(long, default_value = "agent-projector-cli")]
        sub: String,
    },
    /// Print the OpenAPI document.
    Openapi,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let overrides = Overrides {
        listen: cli.listen,
        store: cli.store.map(|s| match s {
            StoreArg::Memory => StoreKind::Memory,
            StoreArg::Embedded => StoreKind::Embedded,
            StoreArg::Redis => StoreKind::Redis,
        }),
        data_dir: cli.data_dir.clone(),
        redis: cli.redis_url.clone().map(|url| RedisOverrides { url }),
        auth: cli.insecure_no_auth.then_some(AuthOverrides {
            insecure_no_auth: true,
        }),
    };
    let cfg = match Config::load(cli.config.as_deref(), std::env::vars(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agent-projector: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agent-projector: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command.unwrap_or(Cmd::Serve) {
        Cmd::Openapi => {
            print!("{}", agent_projector::openapi::spec_json());
            ExitCode::SUCCESS
        }
        Cmd::Healthcheck { addr } => {
            rt.block_on(healthcheck(addr.unwrap_or_else(|| cfg.listen.to_string())))
        }
        Cmd::Token {
            sessions,
            scopes,
            ttl,
            sub,
        } => {
            let grant = agent_projector::http::auth::Grant {
                sub,
                sessions,
                scopes,
                ttl,
            };
            match agent_projector::http::auth::mint(&cfg.auth, &grant) {
                Ok(token) => {
                    println!("{token}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("agent-projector token: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Serve => {
            let telemetry = init_tracing(&cfg);
            let code = rt.block_on(serve(cfg));
            if let Some(t) = telemetry {
                t.shutdown();
            }
            code
        }
    }
}

/// `30`, `90s`, `30m`, `12h`, `7d`.
fn parse_ttl(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 3600, 30m, 12h or 7d"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("`{s}`: the unit is s, m, h or d")),
    };
    if secs == 0 {
        return Err("the ttl must be at least one second".into());
    }
    Ok(Duration::from_secs(secs))
}

/// Logs to stdout, and traces to an OTLP collector when one is configured
/// (the handle flushes them at exit).
fn init_tracing(cfg: &Config) -> Option<agent_projector::telemetry::Telemetry> {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let (targets, filter) = log_filter(&cfg.log.level);
    // Colours only for a person at a terminal (and never with NO_COLOR).
    let ansi = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer().with_ansi(ansi);
    let fmt = match cfg.log.format {
        LogFormat::Json => fmt.json().boxed(),
        LogFormat::Text if ansi => fmt.boxed(),
        LogFormat::Text => fmt
            .fmt_fields(agent_projector::logfields::PlainFields)
            .boxed(),
    };
    let (otel, telemetry) = match agent_projector::telemetry::layer(&cfg.telemetry) {
        Ok(Some((layer, t))) => (Some(layer), Some(t)),
        Ok(None) => (None, None),
        Err(e) => {
            eprintln!("agent-projector: traces are off: {e:#}");
            (None, None)
        }
    };
    tracing_subscriber::registry()
        .with(otel)
        .with(fmt)
        .with(targets)
        .with(filter)
        .init();
    telemetry
}

/// The log filter: `RUST_LOG` when it is set and valid, else the
/// configured level. A list of `target=level` is matched by `Targets`;
/// only a filter that names spans or fields needs `EnvFilter`, which looks
/// the span up under a lock at every enter and exit of every span, in case
/// a directive names it (0.5% of a single-event POST, docs/BENCHMARKS.md).
fn log_filter(
    configured: &str,
) -> (
    Option<tracing_subscriber::filter::Targets>,
    Option<EnvFilter>,
) {
    let from_env = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
    let directives = match from_env {
        Some(v) if EnvFilter::try_new(&v).is_ok() => v,
        _ => configured.to_string(),
    };
    match directives.parse() {
        Ok(targets) => (Some(targets), None),
        Err(_) => (None, Some(EnvFilter::new(directives))),
    }
}

async fn serve(cfg: Config) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(cfg.listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(addr = %cfg.listen, error = %e, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(signals(shutdown.clone()));
    match agent_projector::run(cfg, listener, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once, in the log (which goes to the terminal or the collector).
            tracing::error!(error = %format!("{e:#}"), "agent-projector failed");
            ExitCode::FAILURE
        }
    }
}

async fn signals(shutdown: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown signal received; ending streams");
    shutdown.cancel();
}

/// A minimal HTTP/1.0 GET of /readyz; no HTTP client in the image. `addr`
/// is `host:port`; a host name is resolved (every address is tried).
async fn healthcheck(addr: String) -> ExitCode {
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(addr.as_str()).await?;
        s.write_all(format!("GET /readyz HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    match tokio::time::timeout(Duration::from_secs(3), probe).await {
        Ok(Ok(buf)) if buf.starts_with(b"HTTP/1.1 200") || buf.starts_with(b"HTTP/1.0 200") => {
            ExitCode::SUCCESS
        }
        Ok(Ok(buf)) => {
            let line = String::from_utf8_lossy(&buf);
            eprintln!("not ready: {}", line.lines().next().unwrap_or(""));
            ExitCode::FAILURE
        }
        Ok(Err(e)) => {
            eprintln!("unreachable: {e}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("timed out");
            ExitCode::FAILURE
        }
    }
}
