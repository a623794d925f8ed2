//! Serving one event-stream request on a connection of its own, without
//! hyper: the router answers it as it would through hyper, then its head is
//! written once and its body chunk by chunk, each as one vectored write,
//! and the connection closes when the body ends. The body is the handler's
//! own stream where the layers left it as it was ([`Direct`]), so a frame
//! does not pass through their wrappers. While the stream is idle the
//! connection holds no read or write buffer (hyper keeps 8 KiB of each for
//! a connection's life), only the socket and the body.

use std::io::{self, IoSlice, Write as _};
use std::task::Poll;

use axum::body::{Body, HttpBody};
use axum::http::{header, Request, Response, StatusCode, Version};
use axum::Router;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tower::ServiceExt;

use crate::stream::sse::{Direct, DirectStream};

/// Answer `req` on `io` and close.
pub async fn serve(mut io: TcpStream, req: Request<Body>, app: Router) {
    let http10 = req.version() == Version::HTTP_10;
    let Ok(resp) = app.oneshot(req).await;
    let _ = respond(&mut io, resp, http10).await;
    let _ = io.shutdown().await;
}

async fn respond(io: &mut TcpStream, resp: Response<Body>, http10: bool) -> io::Result<()> {
    let (parts, body) = resp.into_parts();
    let status = parts.status;
    let no_body = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let exact = body.size_hint().exact();
    let chunked = !no_body && exact.is_none() && !http10;
    let mut head = Vec::with_capacity(512);
    write!(
        head,
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )?;
    for (name, value) in &parts.headers {
        if name == header::CONNECTION || name == header::TRANSFER_ENCODING {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if !parts.headers.contains_key(header::DATE) {
        write!(
            head,
            "date: {}\r\n",
            httpdate::fmt_http_date(std::time::SystemTime::now())
        )?;
    }
    if let (Some(n), false) = (exact, parts.headers.contains_key(header::CONTENT_LENGTH)) {
        if !no_body {
            write!(head, "content-length: {n}\r\n")?;
        }
    }
    if chunked {
        head.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    head.extend_from_slice(b"connection: close\r\n\r\n");
    io.write_all(&head).await?;
    drop(head);
    if no_body {
        return Ok(());
    }
    // The stream as the handler made it, where the layers left it as it
    // was; else the body they wrapped.
    let direct = parts
        .extensions
        .get::<Direct>()
        .filter(|_| !parts.headers.contains_key(header::CONTENT_ENCODING))
        .and_then(Direct::take);
    drop(parts);
    let mut data: DirectStream = match direct {
        Some(s) => {
            drop(body);
            s
        }
        None => Box::pin(body.into_data_stream().map(|r| r.map_err(Into::into))),
    };
    // Whether to watch the socket for the client's hang-up; a client that
    // sends bytes after its request is no longer watched (its bytes are
    // not read, so it cannot make the server spin), and its hang-up shows
    // at the next write instead.
    let mut watch_peer = true;
    loop {
        // The body first; the socket's read readiness (woken only by the
        // client: it closed, or sent bytes, which a connection that closes
        // after this response does not answer) when no bytes are ready.
        let step = std::future::poll_fn(|cx| {
            if let Poll::Ready(next) = data.as_mut().poll_next(cx) {
                return Poll::Ready(Step::Data(next));
            }
            if watch_peer {
                if let Poll::Ready(ready) = io.poll_read_ready(cx) {
                    return Poll::Ready(Step::Peer(ready));
                }
            }
            Poll::Pending
        })
        .await;
        match step {
            Step::Data(Some(Ok(bytes))) if bytes.is_empty() => {}
            Step::Data(Some(Ok(bytes))) if chunked => {
                let mut size = [0u8; 20];
                let n = {
                    let mut w = &mut size[..];
                    write!(w, "{:x}\r\n", bytes.len())?;
                    20 - w.len()
                };
                write_all(
                    io,
                    &mut [
                        IoSlice::new(&size[..n]),
                        IoSlice::new(&bytes),
                        IoSlice::new(b"\r\n"),
                    ],
                )
                .await?;
            }
            Step::Data(Some(Ok(bytes))) => io.write_all(&bytes).await?,
            // A failed body ends the connection without its last chunk, so
            // the client sees it was cut.
            Step::Data(Some(Err(e))) => return Err(io::Error::other(e)),
            Step::Data(None) => break,
            Step::Peer(ready) => {
                ready?;
                let mut scratch = [0u8; 1];
                match io.try_read(&mut scratch) {
                    Ok(0) => return Ok(()),
                    Ok(_) => watch_peer = false,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    if chunked {
        io.write_all(b"0\r\n\r\n").await?;
    }
    Ok(())
}

/// What woke the response's loop.
enum Step {
    Data(Option<Result<bytes::Bytes, axum::BoxError>>),
    Peer(io::Result<()>),
}

/// Write every byte of `bufs`, in as few `writev`s as the socket takes.
async fn write_all(io: &mut TcpStream, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !bufs.is_empty() {
        let n = io.write_vectored(bufs).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}
