//! Reading the head of a connection's first request, to tell an event
//! stream request (served by [`super::events`]) from everything else (given
//! to hyper with the bytes read so far, which decides what they mean).

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, Uri, Version};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest request head read here; past it hyper answers (431).
const MAX_HEAD: usize = 8192;
/// Most header lines parsed here; past it hyper decides.
const MAX_HEADERS: usize = 64;

/// What the first bytes of a connection are.
pub enum Head {
    /// A complete GET for an event stream, with nothing after it.
    Events(Box<Request<Body>>),
    /// Anything else: these bytes, to be read again by hyper.
    Other(Bytes),
    /// The client closed (or sent nothing in time) before a request.
    Closed,
}

/// Read until the first request's head is complete (or is not one we take).
pub async fn read<T: AsyncRead + Unpin>(io: &mut T, timeout: Duration) -> Head {
    let mut buf = BytesMut::with_capacity(1024);
    let reading = async {
        loop {
            match io.read_buf(&mut buf).await {
                Ok(0) | Err(_) if buf.is_empty() => return Head::Closed,
                Ok(0) | Err(_) => return Head::Other(buf.split().freeze()),
                Ok(_) => {}
            }
            match parse(&buf) {
                Parsed::Partial if buf.len() < MAX_HEAD => continue,
                Parsed::Events(req) => return Head::Events(req),
                _ => return Head::Other(buf.split().freeze()),
            }
        }
    };
    tokio::time::timeout(timeout, reading)
        .await
        .unwrap_or(Head::Closed)
}

enum Parsed {
    Partial,
    Events(Box<Request<Body>>),
    Other,
}

fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Other,
    };
    // Only a lone GET with no body: anything pipelined after it, or any
    // body, is hyper's to read.
    if len != buf.len() || req.method != Some("GET") {
        return Parsed::Other;
    }
    let (Some(path), Some(version)) = (req.path, req.version) else {
        return Parsed::Other;
    };
    if !is_event_stream_path(path) {
        return Parsed::Other;
    }
    let mut out = Request::new(Body::empty());
    *out.method_mut() = Method::GET;
    *out.version_mut() = if version == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let Ok(uri) = path.parse::<Uri>() else {
        return Parsed::Other;
    };
    *out.uri_mut() = uri;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if [
            &b"upgrade"[..],
            b"content-length",
            b"transfer-encoding",
            b"expect",
        ]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
        {
            return Parsed::Other;
        }
        match (
            HeaderName::from_bytes(name),
            HeaderValue::from_bytes(h.value),
        ) {
            (Ok(n), Ok(v)) => out.headers_mut().append(n, v),
            _ => return Parsed::Other,
        };
    }
    Parsed::Events(Box::new(out))
}

/// The routes that answer with an endless `text/event-stream`: a session's
/// stream, the session index, an AI SDK stream, AG-UI, the multiplexed one.
fn is_event_stream_path(target: &str) -> bool {
    let path = target.split('?').next().unwrap_or("");
    let Some(rest) = path.strip_prefix("/v1/") else {
        return false;
    };
    rest == "streams"
        || ["/stream", "/ui-stream", "/ag-ui"]
            .iter()
            .any(|end| rest.ends_with(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(raw: &str) -> Option<Request<Body>> {
        match parse(raw.as_bytes()) {
            Parsed::Events(r) => Some(*r),
            _ => None,
        }
    }

    #[test]
    fn an_event_stream_get_is_taken_with_its_headers() {
        let r = parsed("GET /v1/sessions/a/stream?cursor=3 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nLast-Event-ID: e:3\r\n\r\n").unwrap();
        assert_eq!(r.uri().path(), "/v1/sessions/a/stream");
        assert_eq!(r.uri().query(), Some("cursor=3"));
        assert_eq!(r.headers()["last-event-id"], "e:3");
        for p in [
            "/v1/streams?sessions=a,b",
            "/v1/sessions/stream",
            "/v1/chat/a/stream",
            "/v1/sessions/a/messages/m/ui-stream",
            "/v1/sessions/a/ag-ui",
        ] {
            assert!(
                parsed(&format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n")).is_some(),
                "{p}"
            );
        }
    }

    #[test]
    fn everything_else_is_left_to_hyper() {
        for raw in [
            "GET /v1/sessions/a/snapshot HTTP/1.1\r\nHost: x\r\n\r\n",
            "POST /v1/sessions/a/stream HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /v1/sessions/a/ws HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /v1/sessions/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            "GET /v1/sessions/a/stream HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
            "GET /v1/sessions/a/stream HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            "GET /v1/sessions/a/stream HTTP/1.1\r\nBad Header: x\r\n\r\n",
        ] {
            assert!(parsed(raw).is_none(), "{raw:?}");
        }
        assert!(matches!(
            parse(b"GET /v1/sessions/a/stream HTTP/1.1\r\nHost"),
            Parsed::Partial
        ));
    }

    #[tokio::test]
    async fn bytes_read_are_kept_for_hyper_and_silence_is_closed() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        tokio::io::AsyncWriteExt::write_all(&mut a, b"POST /v1/x HTTP/1.1\r\n\r\n{")
            .await
            .unwrap();
        match read(&mut b, Duration::from_secs(5)).await {
            Head::Other(bytes) => assert_eq!(&bytes[..], b"POST /v1/x HTTP/1.1\r\n\r\n{"),
            _ => panic!("not handed over"),
        }
        let (_a, mut b) = tokio::io::duplex(1024);
        assert!(matches!(
            read(&mut b, Duration::from_millis(10)).await,
            Head::Closed
        ));
    }
}
