//! Per-route request metrics: `projector_http_requests_total` (route
//! template, method, status) and `projector_http_request_seconds` (route,
//! method: the time to the response head; a stream's life is not in it).
//! Requests no route matched are counted under the route `unmatched`.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode};
use dashmap::DashMap;
use metrics::{Counter, Histogram, SharedString};

/// A request's route, method and start, taken as it comes in.
pub(super) struct Seen {
    /// The route's template (shared with the request's own).
    route: Option<MatchedPath>,
    method: Method,
    start: Instant,
}

/// The metrics of one route, method and status.
struct Handles {
    method: Method,
    status: u16,
    seconds: Histogram,
    requests: Counter,
}

/// The handles of each route's metrics, by route template, taken from the
/// recorder the first time a route answers with a method and a status:
/// the recorder finds a handle by its labels, which it builds, hashes and
/// compares at every call.
static HANDLES: LazyLock<DashMap<Box<str>, Vec<Handles>>> = LazyLock::new(DashMap::new);

impl Seen {
    pub(super) fn of(req: &Request) -> Self {
        Seen {
            route: req.extensions().get::<MatchedPath>().cloned(),
            method: req.method().clone(),
            start: Instant::now(),
        }
    }

    /// Count the request with its response's status; the answer, how long
    /// it took.
    pub(super) fn record(self, status: StatusCode) -> Duration {
        let took = self.start.elapsed();
        let route = self.route.as_ref().map_or("unmatched", MatchedPath::as_str);
        let code = status.as_u16();
        let known = |list: &[Handles]| {
            list.iter()
                .find(|h| h.status == code && h.method == self.method)
                .map(|h| {
                    h.seconds.record(took);
                    h.requests.increment(1);
                })
        };
        if HANDLES.get(route).and_then(|l| known(&l)).is_some() {
            return took;
        }
        crate::metrics_handle();
        let route_label: SharedString = route.to_string().into();
        let method = method_label(&self.method);
        let h = Handles {
            seconds: metrics::histogram!(
                "projector_http_request_seconds",
                "route" => route_label.clone(),
                "method" => method.clone()
            ),
            requests: metrics::counter!(
                "projector_http_requests_total",
                "route" => route_label,
                "method" => method,
                "status" => status_label(status)
            ),
            method: self.method,
            status: code,
        };
        h.seconds.record(took);
        h.requests.increment(1);
        HANDLES.entry(route.into()).or_default().push(h);
        took
    }
}

/// The method as a label: static for the standard ones.
fn method_label(m: &Method) -> SharedString {
    const STANDARD: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];
    match STANDARD.iter().find(|name| **name == m.as_str()) {
        Some(name) => SharedString::const_str(name),
        None => m.as_str().to_string().into(),
    }
}

/// Every status code's three digits (`StatusCode` is 100-999), so that a
/// status label is a static string.
static STATUS_DIGITS: [[u8; 3]; 900] = {
    let mut t = [[0u8; 3]; 900];
    let mut i = 0;
    while i < 900 {
        let c = i + 100;
        t[i] = [
            b'0' + (c / 100) as u8,
            b'0' + (c / 10 % 10) as u8,
            b'0' + (c % 10) as u8,
        ];
        i += 1;
    }
    t
};

/// The status as a label: its code's digits, static.
fn status_label(s: StatusCode) -> SharedString {
    let digits = &STATUS_DIGITS[usize::from(s.as_u16()) - 100];
    SharedString::const_str(std::str::from_utf8(digits).expect("ASCII digits"))
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
        for code in 100..=999u16 {
            let s = StatusCode::from_u16(code).unwrap();
            assert_eq!(&*status_label(s), code.to_string(), "{code}");
        }
    }
}
