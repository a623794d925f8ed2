//! OpenTelemetry traces over OTLP/HTTP (JSON), when `[telemetry]
//! otlp_endpoint` is set: a `tracing` layer that exports the server's spans
//! (the HTTP request, the handler, the session actor's `session.append`
//! with the cursors it produced), a W3C `traceparent` on a request joining
//! the caller's trace. Off by default, and then nothing of it runs.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::TelemetryConfig;

/// Whether traces are exported (set once, at start).
static ON: AtomicBool = AtomicBool::new(false);

/// The exporter, to flush at exit.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Send what is still buffered, and stop.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("agent-projector: flushing traces failed: {e}");
        }
    }
}

/// The `tracing` layer that exports spans, and the handle that flushes it;
/// `None` when no endpoint is configured. Call outside an async runtime (the
/// exporter's HTTP client is a blocking one, on the exporter's own thread).
pub fn layer<S>(
    cfg: &TelemetryConfig,
) -> anyhow::Result<
    Option<(
        tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
        Telemetry,
    )>,
>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    if cfg.otlp_endpoint.is_empty() {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(cfg.otlp_endpoint.clone())
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            cfg.sample_ratio,
        ))))
        .with_resource(
            Resource::builder()
                .with_service_name(cfg.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("agent-projector");
    ON.store(true, Ordering::Relaxed);
    Ok(Some((
        tracing_opentelemetry::layer().with_tracer(tracer),
        Telemetry { provider },
    )))
}

/// Whether traces are exported.
pub fn exported() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A span that only the traces read (not the logs): made only while
/// traces are exported, else none (a span costs a few percent of a
/// single-event POST: docs/BENCHMARKS.md).
pub fn for_traces(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if exported() {
        make()
    } else {
        tracing::Span::none()
    }
}

struct Headers<'a>(&'a axum::http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Make `span` (a request's) a child of the caller's trace when the request
/// carries a W3C `traceparent`; nothing when traces are off.
pub fn join_caller(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    if !exported() || !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&Headers(headers));
    let _ = span.set_parent(cx);
}
