//! The WebSocket handshake (RFC 6455 4.2, HTTP/1.1): checks the request,
//! answers `101 Switching Protocols`, agrees on `permessage-deflate` when
//! the client offers it and the config allows it, and hands the upgraded
//! connection to a transport. A request that is not a handshake is a
//! problem+json `websocket_upgrade_required`.

use std::future::Future;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

use super::error::Problem;
use super::AppState;
use crate::stream::ws::deflate::{self, Deflater};
use crate::stream::ws::{inflate_io::WsIo, Conn, WRITE_BUFFER};

/// A valid handshake, not yet answered.
pub struct WsUpgrade {
    key: HeaderValue,
    on_upgrade: OnUpgrade,
    /// The client offered a `permessage-deflate` the server can accept.
    deflate: Option<deflate::Agreement>,
    /// Largest message the client may send (`limits.ws_max_message_bytes`
    /// unless the endpoint takes larger ones).
    max_message: Option<usize>,
}

fn refuse(status: StatusCode, why: &str) -> Problem {
    Problem::new(
        status,
        "websocket_upgrade_required",
        "WebSocket upgrade required",
        format!(
            "this endpoint is a WebSocket (send `Connection: upgrade`, `Upgrade: websocket`); {why}"
        ),
    )
}

/// Whether the comma-separated `name` header has the token `token`.
fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

impl<S: Send + Sync> FromRequestParts<S> for WsUpgrade {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        if parts.method != Method::GET {
            return Err(refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "the handshake is a GET",
            ));
        }
        let h = &parts.headers;
        if !has_token(h, header::CONNECTION, "upgrade") {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "`Connection` header did not include `upgrade`",
            ));
        }
        if !has_token(h, header::UPGRADE, "websocket") {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "`Upgrade` header did not include `websocket`",
            ));
        }
        if h.get(header::SEC_WEBSOCKET_VERSION)
            .map(HeaderValue::as_bytes)
            != Some(b"13")
        {
            // RFC 6455 section 4.4: 426 and the versions this server speaks.
            let mut p = refuse(
                StatusCode::UPGRADE_REQUIRED,
                "`Sec-WebSocket-Version` header is not `13`, the only version this server speaks",
            );
            p.websocket_version = true;
            return Err(p);
        }
        let Some(key) = h.get(header::SEC_WEBSOCKET_KEY).cloned() else {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "`Sec-WebSocket-Key` header is missing",
            ));
        };
        let deflate = deflate::agree(
            h.get_all(header::SEC_WEBSOCKET_EXTENSIONS)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        let Some(on_upgrade) = parts.extensions.remove::<OnUpgrade>() else {
            return Err(refuse(
                StatusCode::UPGRADE_REQUIRED,
                "this connection cannot be upgraded",
            ));
        };
        Ok(WsUpgrade {
            key,
            on_upgrade,
            deflate,
            max_message: None,
        })
    }
}

impl WsUpgrade {
    /// Take client messages up to `bytes` (an endpoint whose clients send
    /// more than subscriptions: a chat's whole conversation).
    pub fn max_message(mut self, bytes: usize) -> WsUpgrade {
        self.max_message = Some(bytes);
        self
    }

    /// Answer the handshake and run `serve` on the socket once the
    /// connection switched.
    pub fn serve<F, Fut>(self, st: &AppState, serve: F) -> Response
    where
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let limit = self
            .max_message
            .unwrap_or(st.cfg.limits.ws_max_message_bytes);
        let agreed = self.deflate.filter(|_| st.cfg.http.ws_deflate);
        let deflater = agreed.map(|a| {
            Box::new(Deflater::new(
                a,
                st.compressed_streams.clone(),
                st.cfg.http.compressed_streams_max,
            ))
        });
        // Clients have nothing large to send: subscriptions at most.
        // tungstenite's 128 KiB read and write buffers per socket would be
        // most of an idle connection's memory; frames are small, and the
        // frames ready together are flushed together.
        let config = WebSocketConfig::default()
            .max_message_size(Some(limit))
            .max_frame_size(Some(limit))
            .read_buffer_size(4096)
            .write_buffer_size(WRITE_BUFFER);
        let on_upgrade = self.on_upgrade;
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let io = WsIo::new(
                TokioIo::new(upgraded),
                deflater.is_some(),
                limit,
                Vec::new(),
            );
            let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
            serve(Conn { socket, deflater }).await;
        });
        let accept = derive_accept_key(self.key.as_bytes());
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        if let Ok(v) = HeaderValue::from_str(&accept) {
            headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
        }
        if let Some(a) = agreed {
            headers.insert(
                header::SEC_WEBSOCKET_EXTENSIONS,
                HeaderValue::from_static(a.response()),
            );
        }
        (StatusCode::SWITCHING_PROTOCOLS, headers).into_response()
    }
}
