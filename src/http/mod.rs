//! HTTP: one router per resource, merged here, with the shared layers
//! (request id, CORS, compression) and the JSON/404/405 fallbacks as
//! problem+json; the innermost layer (`edge`) serves each request in its
//! tracing span (with the session id), turns any other error response (a
//! framework rejection) into problem+json too, gzips event streams and
//! counts every request.

pub mod ag_ui_gateway;
pub mod auth;
pub mod chat;
pub mod chat_ws;
mod compress;
pub mod controls;
pub mod ds;
mod edge;
pub mod error;
mod extract;
mod front;
pub mod index;
pub mod ingest;
mod ingest_stream;
pub mod limits;
pub mod messages;
pub mod mux;
mod observe;
pub mod openapi;
pub mod ops;
pub mod publish;
pub mod sessions;
pub mod streams;
mod viewer;
pub mod ws_upgrade;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method};
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;
use tower::{Layer, ServiceBuilder};
use tower_http::compression::{Compression, CompressionLayer};
use tower_http::cors::{AllowOrigin, Any, CorsLayer};
use tower_http::set_header::{SetResponseHeader, SetResponseHeaderLayer};

use crate::config::Config;
use crate::session::Registry;
use error::Problem;

pub use extract::{ActionId, MessageId, SessionId};

/// What every handler can reach: one shared allocation behind a handle,
/// so that the clones a request makes of it (one per extractor and
/// middleware that takes the state) are one reference count each, not one
/// per field (and a lock, for the shutdown token). Its fields are read
/// through it as if they were its own.
#[derive(Clone)]
pub struct AppState(Arc<AppShared>);

impl AppState {
    pub fn new(shared: AppShared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppShared;

    fn deref(&self) -> &AppShared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct AppShared {
    pub auth: Arc<auth::Authenticator>,
    pub limits: Arc<limits::Limiter>,
    pub registry: Registry,
    pub cfg: Arc<Config>,
    pub shutdown: CancellationToken,
    pub metrics: PrometheusHandle,
    /// Relays decisions and run controls to runtimes.
    pub relay: crate::control::Relay,
    /// The AI SDK chat gateway (`POST /v1/chat`).
    pub gateway: crate::gateway::SharedGateway,
    /// The Durable Streams server (`/ds`), unless it is off.
    pub streams: Option<std::sync::Arc<crate::ds::Streams>>,
    /// Event streams being gzipped now (`http.compressed_streams_max`).
    pub compressed_streams: crate::stream::compress::StreamBudget,
    /// The sessions' shared writers for live SSE subscribers
    /// (`stream.shared_writers`), unless they are off.
    pub shards: Option<Arc<crate::stream::shard::Shards>>,
}

impl AppState {
    pub(crate) fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.cfg.stream.heartbeat_secs)
    }

    /// What a reading into a session needs (a posted event stream, a
    /// gateway's upstream answer).
    pub(crate) fn gateway_ctx(&self) -> crate::gateway::Ctx {
        crate::gateway::Ctx {
            registry: self.registry.clone(),
            limits: self.event_limits(),
            idle: self.limits.body_timeout,
            max_bytes: self.cfg.ingest.max_stream_bytes,
            shutdown: self.shutdown.clone(),
        }
    }

    /// The limits every posted event is normalised within.
    pub(crate) fn event_limits(&self) -> crate::event::Limits {
        self.cfg.event_limits()
    }
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The whole API as the server runs it: the routes, each behind the
/// `edge` layer (request id, span, problem+json, metrics: it needs the
/// route matched), inside the layers every request passes once (CORS,
/// compression).
///
/// Those layers wrap the router, not each route: layered on the router
/// (`Router::layer`) they were part of every route's boxed service, which
/// a request clones, so that each request boxed and cloned the whole stack
/// (the CORS lists with it) four times over. Around the router a request
/// clones them once, with the connection's service.
pub type App =
    SetResponseHeader<front::CorsWhenAsked<Compression<Router, front::Worth>>, HeaderValue>;

/// What a response varies with for CORS, on every response (preflights
/// too), as one constant: tower-http's CORS layer joins its list into a new
/// header value for each request (1% of a single-event POST's samples).
const CORS_VARY: HeaderValue = HeaderValue::from_static(
    "origin, access-control-request-method, access-control-request-headers",
);

/// The whole API.
///
/// No route carries axum's `DefaultBodyLimit`: every handler that takes a
/// body reads the raw `Body` within its own limit (`extract::read_body`,
/// the publisher's reader), which that layer never touches (only axum's
/// `Bytes`, `String` and `Json` extractors apply it); as a layer it was one
/// more boxed service each request cloned (see `ingest::router`).
pub fn router(state: AppState) -> App {
    let cors = cors(&state.cfg.http.cors_allowed_origins);
    let routes = Router::new()
        .merge(ingest::router())
        .merge(publish::router())
        .merge(sessions::router())
        .merge(messages::router())
        .merge(controls::router())
        .merge(streams::router())
        .merge(mux::router())
        .merge(index::router())
        .merge(ops::router())
        .merge(openapi::router())
        .merge(chat::router())
        .merge(chat_ws::router())
        .merge(ag_ui_gateway::router())
        .merge(viewer::router())
        .merge(ds::router())
        .fallback(|| async { Problem::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "Method not allowed",
                "this endpoint does not accept that method",
            )
        })
        .layer(edge::EdgeLayer::new(state.clone()));
    let compression = CompressionLayer::new()
        .gzip(true)
        .compress_when(front::worth(state.cfg.http.compression));
    let inner = compression.layer(routes.with_state(state));
    ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::appending(
            axum::http::header::VARY,
            CORS_VARY,
        ))
        .service(front::CorsWhenAsked::new(cors, inner))
}

/// The CORS layer for `http.cors_allowed_origins`. Kept when the list is
/// empty: preflights are still answered (the Durable Streams conformance
/// suite asks for them), only with no origin allowed.
fn cors(origins: &[String]) -> CorsLayer {
    let layer = CorsLayer::new()
        .allow_methods([
            Method::GET,
            Method::HEAD,
            Method::PUT,
            Method::POST,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers(
            [
                axum::http::header::CONTENT_TYPE,
                axum::http::header::AUTHORIZATION,
                HeaderName::from_static("last-event-id"),
                REQUEST_ID,
            ]
            .into_iter()
            .chain(ds::REQUEST_HEADERS)
            .collect::<Vec<_>>(),
        )
        .expose_headers(
            std::iter::once(REQUEST_ID)
                .chain(ds::RESPONSE_HEADERS)
                .collect::<Vec<_>>(),
        )
        .max_age(Duration::from_secs(600))
        // Set outside the layer, once (`CORS_VARY`).
        .vary([]);
    if origins.iter().any(|o| o == "*") {
        layer.allow_origin(Any)
    } else {
        // Shared, not a list: the layer is cloned with every request.
        let list: Arc<[HeaderValue]> = origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        layer.allow_origin(AllowOrigin::predicate(move |origin, _| {
            list.contains(origin)
        }))
    }
}
