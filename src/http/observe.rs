//! Per-route request metrics: `projector_http_requests_total` (route
//! template, method, status) and `projector_http_request_seconds` (route,
//! method: the time to the response head; a stream's life is not in it).
//! Requests no route matched are counted under the route `unmatched`.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

pub(super) async fn record(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let method = req.method().as_str().to_string();
    let start = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::histogram!(
        "projector_http_request_seconds",
        "route" => route.clone(),
        "method" => method.clone()
    )
    .record(start.elapsed());
    metrics::counter!(
        "projector_http_requests_total",
        "route" => route,
        "method" => method,
        "status" => status
    )
    .increment(1);
    resp
}
