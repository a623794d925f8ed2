//! Per-route request metrics: `projector_http_requests_total` (route
//! template, method, status) and `projector_http_request_seconds` (route,
//! method: the time to the response head; a stream's life is not in it).
//! Requests no route matched are counted under the route `unmatched`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use metrics::SharedString;

pub(super) async fn record(req: Request, next: Next) -> Response {
    // One allocation for the route, shared by both metrics' labels; the
    // method and the usual statuses are static.
    let route: SharedString = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(SharedString::const_str("unmatched"), |m| {
            Arc::<str>::from(m.as_str()).into()
        });
    let method = method_label(req.method());
    let start = Instant::now();
    let resp = next.run(req).await;
    let status = status_label(resp.status());
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

/// The method as a label: static for the standard ones.
fn method_label(m: &Method) -> SharedString {
    let standard = [
        (Method::GET, "GET"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::PATCH, "PATCH"),
        (Method::HEAD, "HEAD"),
        (Method::OPTIONS, "OPTIONS"),
    ];
    match standard.iter().find(|(k, _)| k == m) {
        Some((_, label)) => SharedString::const_str(label),
        None => m.as_str().to_string().into(),
    }
}

/// The status as a label: static for the usual ones.
fn status_label(s: StatusCode) -> SharedString {
    const USUAL: [(u16, &str); 20] = [
        (200, "200"),
        (201, "201"),
        (202, "202"),
        (204, "204"),
        (206, "206"),
        (304, "304"),
        (400, "400"),
        (401, "401"),
        (403, "403"),
        (404, "404"),
        (405, "405"),
        (409, "409"),
        (410, "410"),
        (413, "413"),
        (415, "415"),
        (422, "422"),
        (429, "429"),
        (500, "500"),
        (503, "503"),
        (507, "507"),
    ];
    match USUAL.iter().find(|(c, _)| *c == s.as_u16()) {
        Some((_, label)) => SharedString::const_str(label),
        None => s.as_u16().to_string().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The static labels are the ones the formatted values would be.
    #[test]
    fn labels_read_as_the_method_and_the_status_code() {
        for m in [
            "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "PURGE",
        ] {
            let method = Method::from_bytes(m.as_bytes()).unwrap();
            assert_eq!(&*method_label(&method), m);
        }
        for code in 100..=599u16 {
            let s = StatusCode::from_u16(code).unwrap();
            assert_eq!(&*status_label(s), code.to_string(), "{code}");
        }
    }
}
