//! The live viewer page, built into the binary: `GET /` (HTML), its
//! stylesheet, its entry module `/viewer.js` and the modules it imports under
//! `/viewer/<file>.js`; and the JavaScript client library (`clients/js/src`)
//! as ES modules under `/client/<file>.js`, which the viewer is built on and
//! any page of this origin can `import { connect } from '/client/index.js'`.
//! No build step at run time.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::AppState;

const INDEX: &str = include_str!("../../assets/viewer/index.html");
const SCRIPT: &str = include_str!("../../assets/viewer/viewer.js");
const STYLE: &str = include_str!("../../assets/viewer/viewer.css");

/// One module of the viewer (besides its entry `/viewer.js`): its route and its text.
macro_rules! viewer_module {
    ($file:literal) => {
        (
            concat!("/viewer/", $file),
            include_str!(concat!("../../assets/viewer/", $file)),
        )
    };
}

/// The viewer's modules, imported by `/viewer.js` as `./viewer/<file>.js`.
const VIEWER: &[(&str, &str)] = &[
    viewer_module!("actions.js"),
    viewer_module!("panels.js"),
    viewer_module!("sidebar.js"),
    viewer_module!("transcript.js"),
    viewer_module!("ui.js"),
];

/// One module of the client library: its route and its text.
macro_rules! client_module {
    ($file:literal) => {
        (
            concat!("/client/", $file),
            include_str!(concat!("../../clients/js/src/", $file)),
        )
    };
}

/// The client library's modules, each at `/client/<file>.js` (they import
/// one another by relative path; `react.js` also imports `react`, which a
/// page maps itself).
const CLIENT: &[(&str, &str)] = &[
    client_module!("index.js"),
    client_module!("connection.js"),
    client_module!("controls.js"),
    client_module!("emitter.js"),
    client_module!("http.js"),
    client_module!("projection.js"),
    client_module!("react.js"),
    client_module!("session-index.js"),
    client_module!("sse.js"),
    client_module!("stream.js"),
];

pub(super) fn router() -> Router<AppState> {
    let mut router = Router::new();
    for &(path, body) in CLIENT.iter().chain(VIEWER) {
        router = router.route(
            path,
            get(move || async move { asset(body, "text/javascript; charset=utf-8") }),
        );
    }
    router
        .route(
            "/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/viewer.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/viewer.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'",
        ),
    );
    resp
}
