//! Operations: liveness, readiness, Prometheus metrics (the OpenAPI
//! document is served by [`super::openapi`]).

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::{Caller, Scope};
use super::error::Problem;
use super::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(get_healthz))
        .route("/readyz", get(get_readyz))
        .route("/metrics", get(get_metrics))
}

/// Health status.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: &'static str,
}

/// Liveness: the process serves HTTP.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = Health)))]
pub async fn get_healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Readiness: the store answers and the server is not shutting down.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "Not ready", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_readyz(State(st): State<AppState>) -> Result<Json<Health>, Problem> {
    if st.shutdown.is_cancelled() {
        return Err(Problem::unavailable(
            "shutting_down",
            "the server is shutting down",
        ));
    }
    st.registry.store().ready().await?;
    if let Some(streams) = &st.streams {
        streams.ready().await?;
    }
    Ok(Json(Health { status: "ready" }))
}

/// Prometheus metrics in the text exposition format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text", body = String, content_type = "text/plain")))]
pub async fn get_metrics(State(st): State<AppState>, caller: Caller) -> Result<Response, Problem> {
    caller.require(Scope::Admin, None)?;
    metrics::gauge!("projector_sessions_in_registry").set(st.registry.live() as f64);
    metrics::gauge!("projector_runtime_tasks").set(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks() as f64,
    );
    let mut resp = (StatusCode::OK, st.metrics.render()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    Ok(resp)
}
