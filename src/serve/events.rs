//! Serving one event-stream request on a connection of its own, without
//! hyper: the router answers it as it would through hyper, then its head
//! and body go out as the body gives them, framed and copied into one
//! buffer and written with one `send` (the head with the first chunk), and
//! the connection closes when the body ends. The body is the handler's own
//! stream where the layers left it as it was ([`Direct`]), so a frame does
//! not pass through their wrappers. The first chunk of a wake is written at
//! once, then the chunks ready after it together; once the body has nothing
//! ready it is not asked again until it wakes the task: one look at an
//! empty feed per frame, after the write, as a task that awaits a broadcast
//! receiver and writes makes.
//! While the stream is idle the connection holds no read or write buffer
//! (hyper keeps 8 KiB of each for a connection's life), only the socket and
//! the body.
//!
//! A session stream whose response offers its session's shared writers
//! ([`Shardable`]) hands its socket to one of them whenever it is live,
//! caught up and flushed. While the socket is in a writer the task sleeps
//! and the writer writes the frames (see `stream::shard`); the task takes
//! the socket back when the writer gives it back, when the client wakes
//! it, or when the stream has something of its own to send (a heartbeat
//! due, the end at shutdown, the farewell at expiry).

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write as _};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use axum::body::{Body, HttpBody};
use axum::http::{header, Request, Response, StatusCode, Version};
use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tower::ServiceExt;

use crate::stream::shard::{chunk, chunk_size_line, Seat, Shardable};
use crate::stream::sse::{Direct, DirectStream, COALESCE};

/// Answer `req` on `io` and close.
pub async fn serve(io: TcpStream, req: Request<Body>, app: crate::http::App) {
    let http10 = req.version() == Version::HTTP_10;
    let Ok(resp) = app.oneshot(req).await;
    let resp = resp.map(Body::new);
    let io = Arc::new(io);
    let _ = respond(&io, resp, http10).await;
    // A writer that had the socket let go of it with the response.
    if let Ok(mut io) = Arc::try_unwrap(io) {
        let _ = io.shutdown().await;
    }
}

async fn respond(io: &Arc<TcpStream>, resp: Response<Body>, http10: bool) -> io::Result<()> {
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
    let mut out = Outgoing::default();
    out.push(head.into(), false);
    if no_body {
        return std::future::poll_fn(|cx| out.poll_flush(io, cx)).await;
    }
    // The stream as the handler made it, where the layers left it as it
    // was; else the body they wrapped.
    let direct = parts
        .extensions
        .get::<Direct>()
        .filter(|_| !parts.headers.contains_key(header::CONTENT_ENCODING))
        .and_then(Direct::take);
    // The session's shared writers, for a stream written here as chunks.
    let shared = parts
        .extensions
        .get::<Shardable>()
        .filter(|_| direct.is_some() && chunked)
        .cloned();
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
    let peer = crate::stream::wake::WakeFlag::new();
    let mut ended = false;
    let mut failed = None;
    // The socket's place in a shared writer, while it is in one.
    let mut seat: Option<Seat> = None;
    std::future::poll_fn(|cx| {
        if let (Some(sh), Some(s)) = (&shared, seat.take()) {
            // Woken while the socket is in a writer: by the writer giving
            // it back, by the client, or by what the stream itself waits
            // on (the heartbeat timer, shutdown, the token's expiry).
            sh.link.watch(cx);
            if peer.fired() || sh.link.given() {
                // The writer gave it back, or the client woke the task: the
                // connection takes the socket back and goes on by itself.
                take_back(s, sh, &mut out)?;
            } else {
                // The stream's own: it says whether it has anything to
                // send (its subscriber, parked, sends nothing), the
                // writer's writes counting as its own. If not, the socket
                // stays in the writer: a busy stream's heartbeat timer
                // does not take it out every period.
                if let Some(at) = s.last_write() {
                    sh.link.note_wrote(at);
                }
                match ask_seated(&mut data, cx, s, sh, &mut out)? {
                    Seated::Stays(s) => {
                        seat = Some(s);
                        return Poll::Pending;
                    }
                    Seated::Back(item) => took(item, &mut out, chunked, &mut ended, &mut failed),
                }
            }
        }
        // Whether the body said "nothing ready" in this poll of the task:
        // then its waker is set, and the bytes it gave before that are
        // written without asking it again (a second look at an empty
        // broadcast receiver is a second lock of its shared tail).
        let mut drained = false;
        // The first chunk of a wake goes out at once, before the body is
        // asked for more: asking an empty feed takes its lock, which the
        // sender holds while it wakes every subscriber, and a frame that
        // waited for it would wait for them all. The ones ready after it
        // go out together.
        let mut first = true;
        loop {
            // A client that is slow to read holds the body back: nothing
            // more is taken while a write's worth waits for the socket.
            if !drained && !ended && failed.is_none() && out.len() < GATHER_BYTES {
                // Every chunk ready now (up to a bound), to go out in one
                // write with what is queued (at first, the head).
                for _ in 0..COALESCE {
                    match data.as_mut().poll_next(cx) {
                        Poll::Ready(item) => took(item, &mut out, chunked, &mut ended, &mut failed),
                        Poll::Pending => drained = true,
                    }
                    if std::mem::take(&mut first)
                        || drained
                        || ended
                        || failed.is_some()
                        || out.len() >= GATHER_BYTES
                    {
                        break;
                    }
                }
            }
            ready!(out.poll_flush(io, cx))?;
            if let Some(e) = failed.take() {
                return Poll::Ready(Err(e));
            }
            if ended {
                return Poll::Ready(Ok(()));
            }
            if drained {
                // Asleep until the body or the client wakes the task: the
                // client only by closing, or by sending bytes, which a
                // connection that closes after this response never answers.
                // Looked at only when the socket woke the task (a lock
                // per look), with a waker that says so.
                peer.register(cx);
                while watch_peer && peer.take() {
                    match io.poll_read_ready(&mut peer.context()) {
                        Poll::Pending => break,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        // Looked at again below (a `WouldBlock` clears it).
                        Poll::Ready(Ok(())) => peer.raise(),
                    }
                    match io.try_read(&mut [0u8; 1]) {
                        Ok(0) => return Poll::Ready(Ok(())),
                        Ok(_) => watch_peer = false,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
                // Live, caught up and flushed: the socket may go to one
                // of the session's writers until the task wakes.
                let Some(sh) = &shared else {
                    return Poll::Pending;
                };
                let Some(s) = sh
                    .link
                    .idle_at()
                    .and_then(|idle| sh.shards.join(&sh.session, io, idle, &sh.link, cx))
                else {
                    return Poll::Pending;
                };
                // The subscriber lets go of its feed at this poll.
                sh.link.park();
                match ask_seated(&mut data, cx, s, sh, &mut out)? {
                    Seated::Stays(s) => {
                        seat = Some(s);
                        return Poll::Pending;
                    }
                    // Something beside the frames (a heartbeat, the end).
                    Seated::Back(item) => {
                        took(item, &mut out, chunked, &mut ended, &mut failed);
                        // The subscriber goes on from the writer's cursor
                        // at the next look at the body.
                        drained = false;
                    }
                }
            }
        }
    })
    .await
}

/// What the body gave, queued on `out`: a chunk, or the end (the last
/// chunk), or a failure (which ends the connection without the last chunk,
/// so the client sees it was cut).
fn took(
    item: Option<Result<Bytes, axum::BoxError>>,
    out: &mut Outgoing,
    chunked: bool,
    ended: &mut bool,
    failed: &mut Option<io::Error>,
) {
    match item {
        Some(Ok(bytes)) => out.push(bytes, chunked),
        Some(Err(e)) => *failed = Some(io::Error::other(e)),
        None => {
            if chunked {
                out.push(Bytes::from_static(b"0\r\n\r\n"), false);
            }
            *ended = true;
        }
    }
}

/// What a stream whose socket is in a writer said when asked.
enum Seated {
    /// Nothing of its own to send: the socket stays in the writer.
    Stays(Seat),
    /// Something (a heartbeat, the end, a failure): the socket is the
    /// connection's again, with what the writer left unsent queued first,
    /// and this goes out after it.
    Back(Option<Result<Bytes, axum::BoxError>>),
}

/// Ask the stream, its socket in a writer, whether it has anything of its
/// own to send (its subscriber, parked, sends no frame).
fn ask_seated(
    data: &mut DirectStream,
    cx: &mut Context<'_>,
    seat: Seat,
    sh: &Shardable,
    out: &mut Outgoing,
) -> io::Result<Seated> {
    match data.as_mut().poll_next(cx) {
        Poll::Pending => Ok(Seated::Stays(seat)),
        Poll::Ready(item) => {
            take_back(seat, sh, out)?;
            Ok(Seated::Back(item))
        }
    }
}

/// Take the socket back from its writer: the bytes of a frame it did not
/// finish go out first, and the subscriber goes on after the last frame it
/// wrote; a failed write ends the connection.
fn take_back(seat: Seat, sh: &Shardable, out: &mut Outgoing) -> io::Result<()> {
    if let Some(rest) = sh.link.unpark(seat.leave())? {
        out.push(rest, false);
    }
    Ok(())
}

/// The bytes past which no more body chunks are taken before writing (and
/// at most [`COALESCE`] chunks).
const GATHER_BYTES: usize = 64 * 1024;
/// Chunks up to this size are copied together into one buffer (one `send`
/// for a frame and its chunk framing, or for several frames); larger ones
/// go out as they are, beside it, in a vectored write.
const COPY_MAX: usize = 16 * 1024;

/// The bytes waiting to go out on the connection, in order: small chunks
/// (with their chunked framing) copied into one buffer, large ones held as
/// they are. Empty, it holds no allocation.
#[derive(Default)]
struct Outgoing {
    sealed: VecDeque<Bytes>,
    small: BytesMut,
    len: usize,
}

impl Outgoing {
    fn len(&self) -> usize {
        self.len
    }

    /// Queue `bytes`, as one HTTP chunk when `chunked`.
    fn push(&mut self, bytes: Bytes, chunked: bool) {
        if bytes.is_empty() {
            // An empty chunk would end a chunked body.
            return;
        }
        self.len += bytes.len();
        let copied = bytes.len() <= COPY_MAX;
        if chunked && copied {
            self.len += chunk(&mut self.small, &bytes) - bytes.len();
            return;
        }
        if chunked {
            let (size, n) = chunk_size_line(bytes.len());
            self.small.extend_from_slice(&size[..n]);
            self.len += n + 2;
        }
        if copied {
            self.small.extend_from_slice(&bytes);
        } else {
            self.seal();
            self.sealed.push_back(bytes);
        }
        if chunked {
            self.small.extend_from_slice(b"\r\n");
        }
    }

    fn seal(&mut self) {
        if !self.small.is_empty() {
            let b = std::mem::take(&mut self.small).freeze();
            self.sealed.push_back(b);
        }
    }

    /// Write everything queued: one `send` when it is one buffer (as it is
    /// unless a chunk was too large to copy), else a vectored write. Ready
    /// once all of it is written.
    fn poll_flush(&mut self, io: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.sealed.is_empty() {
            while !self.small.is_empty() {
                let small = &self.small;
                let n = ready!(poll_write(io, cx, || io.try_write(small)))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.small.advance(n);
                self.len -= n;
            }
            // Nothing held while idle.
            self.small = BytesMut::new();
            return Poll::Ready(Ok(()));
        }
        self.seal();
        while !self.sealed.is_empty() {
            let mut slices = [IoSlice::new(&[]); 16];
            let k = self.sealed.len().min(slices.len());
            for (s, b) in slices.iter_mut().zip(&self.sealed) {
                *s = IoSlice::new(b);
            }
            let n = ready!(poll_write(io, cx, || io.try_write_vectored(&slices[..k])))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.len -= n;
            let mut n = n;
            while n > 0 {
                let front = self.sealed.front_mut().expect("written bytes were queued");
                if n < front.len() {
                    front.advance(n);
                    break;
                }
                n -= front.len();
                self.sealed.pop_front();
            }
        }
        // Nothing held while idle.
        self.sealed = VecDeque::new();
        Poll::Ready(Ok(()))
    }
}

/// `write` once the socket is writable, again while it would block (the
/// socket's readiness is cleared then, and the task waits for it).
fn poll_write(
    io: &TcpStream,
    cx: &mut Context<'_>,
    mut write: impl FnMut() -> io::Result<usize>,
) -> Poll<io::Result<usize>> {
    loop {
        ready!(io.poll_write_ready(cx))?;
        match write() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            done => return Poll::Ready(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    /// A connected pair: the server's end, the client's end.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        (l.accept().await.unwrap().0, client)
    }

    /// The hand-written size line is the one `{:x}\r\n` writes.
    #[test]
    fn chunk_size_lines_are_lowercase_hex() {
        for len in [0, 1, 9, 10, 15, 16, 255, 256, 283, 4095, 65_536, usize::MAX] {
            let (line, n) = chunk_size_line(len);
            assert_eq!(&line[..n], format!("{len:x}\r\n").as_bytes(), "{len}");
        }
    }

    fn response(chunks: Vec<Result<Bytes, axum::BoxError>>) -> Response<Body> {
        let body = Body::from_stream(futures_util::stream::iter(chunks));
        Response::new(body)
    }

    /// Small chunks are framed and copied together, a large one goes out
    /// beside them as it is: the bytes on the wire are the chunked body,
    /// in order, ended by the last chunk.
    #[tokio::test]
    async fn small_and_large_chunks_go_out_framed_and_in_order() {
        let (server, mut client) = pair().await;
        let large = Bytes::from(vec![b'x'; COPY_MAX + 1]);
        let resp = response(vec![
            Ok(Bytes::from_static(b"one")),
            Ok(large.clone()),
            Ok(Bytes::new()),
            Ok(Bytes::from_static(b"two")),
        ]);
        let server = Arc::new(server);
        respond(&server, resp, false).await.unwrap();
        drop(server);
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        let body_at = memchr::memmem::find(&got, b"\r\n\r\n").unwrap() + 4;
        let head = std::str::from_utf8(&got[..body_at]).unwrap();
        assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
        let mut want = b"3\r\none\r\n".to_vec();
        want.extend_from_slice(format!("{:x}\r\n", large.len()).as_bytes());
        want.extend_from_slice(&large);
        want.extend_from_slice(b"\r\n3\r\ntwo\r\n0\r\n\r\n");
        assert_eq!(got[body_at..], want[..]);
    }

    /// A body that fails ends the connection after the chunks before the
    /// failure and without the last chunk, so the client sees it was cut.
    #[tokio::test]
    async fn a_failed_body_is_cut_after_what_came_before() {
        let (server, mut client) = pair().await;
        let resp = response(vec![
            Ok(Bytes::from_static(b"one")),
            Err("store failed".into()),
            Ok(Bytes::from_static(b"never")),
        ]);
        let server = Arc::new(server);
        assert!(respond(&server, resp, false).await.is_err());
        drop(server);
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert!(got.ends_with(b"\r\n\r\n3\r\none\r\n"), "{got:?}");
    }
}
