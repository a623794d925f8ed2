//! Load clients: raw-TCP SSE subscribers and WebSocket subscribers that count
//! delivered text deltas and (when sampled) measure publish-to-receive
//! latency from the send timestamp carried in each delta (`T<nanos>;`), and
//! a paced publisher.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use memchr::memmem;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// The clock all timestamps are taken on (one process).
pub fn nanos(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// What subscribers saw.
#[derive(Default)]
pub struct Tally {
    pub delivered: AtomicU64,
    pub ready: AtomicU64,
    pub failed: AtomicU64,
    /// Latencies in microseconds, from sampled subscribers only.
    pub latencies: Mutex<Vec<u32>>,
    pub all_ready: Notify,
    /// Bytes read off the subscribers' sockets, headers included.
    pub wire_bytes: AtomicU64,
}

const MARKER: &[u8] = b"\"delta\":\"T";

/// Scan `buf` for markers; count them and record latencies when sampling.
fn scan(buf: &[u8], base: Instant, sample: bool, out: &mut Vec<u32>) -> (u64, usize) {
    let mut n = 0;
    let mut consumed = 0;
    let now = nanos(base);
    for at in memmem::find_iter(buf, MARKER) {
        let start = at + MARKER.len();
        let Some(end) = buf[start..].iter().position(|&b| b == b';') else {
            break; // a marker cut by the read boundary: keep it for next time
        };
        n += 1;
        consumed = start + end;
        if sample {
            if let Some(ts) = std::str::from_utf8(&buf[start..start + end])
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
            {
                out.push((now.saturating_sub(ts) / 1000) as u32);
            }
        }
    }
    (n, consumed)
}

/// A gzip response body read off the wire: de-chunked, then inflated.
struct Gunzip {
    head_done: bool,
    /// The server sent the body as it is (past its compression budget).
    identity: bool,
    /// Bytes left of the current chunk; `None` while reading a size line.
    left: Option<usize>,
    line: Vec<u8>,
    gz_header: usize,
    inflate: flate2::Decompress,
}

impl Gunzip {
    fn new() -> Self {
        Gunzip {
            head_done: false,
            identity: false,
            left: None,
            line: Vec::new(),
            gz_header: 10,
            inflate: flate2::Decompress::new(false),
        }
    }

    /// Feed raw socket bytes; append decoded body bytes to `out`.
    fn feed(&mut self, mut raw: &[u8], out: &mut Vec<u8>) {
        if !self.head_done {
            self.line.extend_from_slice(raw);
            let Some(end) = memmem::find(&self.line, b"\r\n\r\n") else {
                return;
            };
            self.head_done = true;
            self.identity = !String::from_utf8_lossy(&self.line[..end])
                .to_ascii_lowercase()
                .contains("content-encoding: gzip");
            let rest = self.line.split_off(end + 4);
            self.line.clear();
            return self.feed(&rest, out);
        }
        if self.identity {
            out.extend_from_slice(raw);
            return;
        }
        while !raw.is_empty() {
            match self.left {
                Some(0) => {
                    // The CRLF after a chunk's data.
                    let skip = raw.len().min(2 - self.line.len().min(2));
                    self.line.extend_from_slice(&raw[..skip]);
                    raw = &raw[skip..];
                    if self.line.len() == 2 {
                        self.line.clear();
                        self.left = None;
                    }
                }
                Some(n) => {
                    let take = n.min(raw.len());
                    self.body(&raw[..take], out);
                    raw = &raw[take..];
                    self.left = Some(n - take);
                }
                None => {
                    let Some(end) = memchr::memchr(b'\n', raw) else {
                        self.line.extend_from_slice(raw);
                        return;
                    };
                    self.line.extend_from_slice(&raw[..end]);
                    raw = &raw[end + 1..];
                    let size = std::str::from_utf8(&self.line)
                        .ok()
                        .and_then(|l| usize::from_str_radix(l.trim(), 16).ok())
                        .unwrap_or(0);
                    self.line.clear();
                    self.left = Some(size);
                }
            }
        }
    }

    fn body(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        let skip = self.gz_header.min(data.len());
        self.gz_header -= skip;
        data = &data[skip..];
        while !data.is_empty() {
            out.reserve(data.len() * 8 + 256);
            let before = self.inflate.total_in();
            if self
                .inflate
                .decompress_vec(data, out, flate2::FlushDecompress::Sync)
                .is_err()
            {
                return;
            }
            data = &data[(self.inflate.total_in() - before) as usize..];
        }
    }
}

/// One SSE subscriber over raw TCP; counts until `stop`. With `gzip` it
/// asks for a gzipped stream and decodes it.
#[allow(clippy::too_many_arguments)]
pub async fn sse(
    addr: std::net::SocketAddr,
    path: String,
    tally: Arc<Tally>,
    expected: u64,
    sample: bool,
    base: Instant,
    stop: Arc<Notify>,
    gzip: bool,
) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        tally.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let _ = s.set_nodelay(true);
    let enc = if gzip {
        "Accept-Encoding: gzip\r\n"
    } else {
        ""
    };
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n{enc}\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        tally.failed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // Subscribed once the first event (snapshot / start) arrived.
    let subscribed =
        |buf: &[u8]| memmem::find(buf, b"\n\n").is_some() && memmem::find(buf, b"data: ").is_some();
    let gunzip = gzip.then(Gunzip::new);
    let reader = Markers::new(tally, expected, sample, base);
    reader.read(s, Vec::new(), gunzip, subscribed, stop).await;
}

/// Reads a subscriber's socket, counting the markers in its bytes (as they
/// come, or inflated) and, when sampling, their latencies.
struct Markers {
    tally: Arc<Tally>,
    expected: u64,
    sample: bool,
    base: Instant,
}

impl Markers {
    fn new(tally: Arc<Tally>, expected: u64, sample: bool, base: Instant) -> Self {
        Markers {
            tally,
            expected,
            sample,
            base,
        }
    }

    /// Until `stop` or the end of the stream; `buf` holds bytes already
    /// read, and the subscriber counts as ready once `subscribed(buf)`.
    async fn read(
        self,
        mut s: TcpStream,
        mut buf: Vec<u8>,
        mut gunzip: Option<Gunzip>,
        subscribed: impl Fn(&[u8]) -> bool,
        stop: Arc<Notify>,
    ) {
        let tally = &self.tally;
        buf.reserve(16 * 1024);
        let mut chunk = vec![0u8; 16 * 1024];
        let mut ready = false;
        let mut lat = Vec::new();
        let stopped = stop.notified();
        tokio::pin!(stopped);
        loop {
            if !ready && subscribed(&buf) {
                ready = true;
                if tally.ready.fetch_add(1, Ordering::SeqCst) + 1 == self.expected {
                    tally.all_ready.notify_waiters();
                }
            }
            if ready {
                let (count, consumed) = scan(&buf, self.base, self.sample, &mut lat);
                tally.delivered.fetch_add(count, Ordering::Relaxed);
                let keep_from = consumed.max(buf.len().saturating_sub(64));
                buf.drain(..keep_from);
            }
            let n = tokio::select! {
                r = s.read(&mut chunk) => match r { Ok(0) | Err(_) => break, Ok(n) => n },
                _ = &mut stopped => break,
            };
            tally.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
            match gunzip.as_mut() {
                Some(g) => g.feed(&chunk[..n], &mut buf),
                None => buf.extend_from_slice(&chunk[..n]),
            }
        }
        if self.sample && !lat.is_empty() {
            tally.latencies.lock().unwrap().extend(lat);
        }
    }
}

/// A socket whose reads are counted into `Tally::wire_bytes`.
struct Counted {
    tcp: TcpStream,
    tally: Arc<Tally>,
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.tcp).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.tally.wire_bytes.fetch_add(n, Ordering::Relaxed);
        r
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        b: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write(cx, b)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The client side of a WebSocket handshake on `path`, offering
/// `permessage-deflate` when `deflate`: whether the server agreed, and the
/// bytes read past the response.
async fn handshake(s: &mut Counted, path: &str, deflate: bool) -> Option<(bool, Vec<u8>)> {
    let ext = if deflate {
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    } else {
        ""
    };
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{ext}\r\n"
    );
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = memmem::find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 101") {
                return None;
            }
            let agreed = head.contains("sec-websocket-extensions: permessage-deflate");
            return Some((agreed, buf[i + 4..].to_vec()));
        }
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// One WebSocket subscriber, its bytes counted; with `deflate` it offers
/// `permessage-deflate` and inflates what comes (with tungstenite and the
/// server's own `WsIo`, the one part of the generator that is not
/// independent); without, it reads the frames raw.
#[allow(clippy::too_many_arguments)]
pub async fn ws(
    addr: std::net::SocketAddr,
    path: String,
    tally: Arc<Tally>,
    expected: u64,
    sample: bool,
    base: Instant,
    stop: Arc<Notify>,
    deflate: bool,
) {
    use agent_projector::stream::ws::inflate_io::WsIo;
    use tokio_tungstenite::tungstenite::protocol::Role;
    let Ok(tcp) = TcpStream::connect(addr).await else {
        tally.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let _ = tcp.set_nodelay(true);
    let mut s = Counted {
        tcp,
        tally: tally.clone(),
    };
    let Some((agreed, rest)) = handshake(&mut s, &path, deflate).await else {
        tally.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if agreed != deflate {
        tally.failed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if !agreed {
        // Uncompressed, the server's frames are unmasked JSON text, so the
        // markers are read straight off the socket as for SSE: the same
        // cost per delivery on this side for both transports. The frame
        // headers between messages cannot form a marker, and the server
        // wants no answer to its pings.
        let reader = Markers::new(tally, expected, sample, base);
        let any = |b: &[u8]| !b.is_empty();
        reader.read(s.tcp, rest, None, any, stop).await;
        return;
    }
    let io = WsIo::new(s, agreed, 1 << 26, rest).keeping_context();
    let mut sock =
        tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Client, None).await;
    let mut ready = false;
    let mut lat = Vec::new();
    let stopped = stop.notified();
    tokio::pin!(stopped);
    loop {
        let msg = tokio::select! {
            m = sock.next() => match m { Some(Ok(m)) => m, _ => break },
            _ = &mut stopped => break,
        };
        let tokio_tungstenite::tungstenite::Message::Text(t) = msg else {
            continue;
        };
        if !ready {
            ready = true;
            if tally.ready.fetch_add(1, Ordering::SeqCst) + 1 == expected {
                tally.all_ready.notify_waiters();
            }
        }
        let (count, _) = scan(t.as_bytes(), base, sample, &mut lat);
        tally.delivered.fetch_add(count, Ordering::Relaxed);
    }
    if sample && !lat.is_empty() {
        tally.latencies.lock().unwrap().extend(lat);
    }
}

/// Post `rate` text deltas per second for `dur` to `sessions` (round robin),
/// one event per POST, from `workers` keep-alive clients taking turns, so
/// the events are evenly spaced; `burst` > 1 sends them that many at once
/// instead (at the same average rate). Returns events sent.
pub async fn publish(
    base_url: String,
    sessions: Vec<String>,
    rate: u64,
    dur: Duration,
    workers: usize,
    burst: usize,
    base: Instant,
) -> u64 {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(workers)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let sessions = Arc::new(sessions);
    let burst = burst.max(1) as u64;
    // One clock for every worker, so their events interleave.
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (http, sent, sessions, base_url) = (
            http.clone(),
            sent.clone(),
            sessions.clone(),
            base_url.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while start.elapsed() < dur {
                // Pace: event n overall (the i-th of this worker) is due at
                // n / rate s, rounded down to its burst of `burst` events.
                let n = i * workers as u64 + w as u64;
                let due = start + Duration::from_secs_f64((n / burst * burst) as f64 / rate as f64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    tokio::time::sleep(wait).await;
                }
                let k = n as usize % sessions.len();
                let body = format!(
                    r#"{{"type":"text.delta","runId":"r","payload":{{"delta":"T{};"}}}}"#,
                    nanos(base)
                );
                let r = http
                    .post(format!("{base_url}/v1/sessions/{}/events", sessions[k]))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                if matches!(&r, Ok(resp) if resp.status().is_success()) {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    sent.load(Ordering::Relaxed)
}

/// Percentile (0..=1) of a sorted slice, in milliseconds.
pub fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}
