//! The floor: a server that does the least any SSE fan-out server must do,
//! to tell how far agent-projector is from what this machine allows. It
//! answers a POST of an event by sending one delta frame (as large as ours)
//! to the session's SSE subscribers, each a task that writes every frame
//! to its socket. No store, no reducer, no replay, no auth, no layers.
//! With `--shards K` the session's subscribers are split over K writer
//! tasks instead, each woken once per frame (one broadcast receiver per
//! shard, not per subscriber), taking every frame that is ready and writing
//! them to each of its sockets in one non-blocking write: the sharded
//! fan-out, measured before building it into the server.
//! `LOAD_FLOOR=task,shard` runs every plain SSE fan-out scenario against
//! either or both, with the same generator in the same run. Started as
//! `load --floor-server --listen ADDR [--shards K]`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

/// A session's feed and, in sharded mode, its writer shards' socket lists.
#[derive(Clone)]
struct Feed {
    tx: broadcast::Sender<Bytes>,
    shards: Vec<Arc<Mutex<Vec<std::net::TcpStream>>>>,
}

type Sessions = Arc<Mutex<HashMap<String, Feed>>>;

static SHARDS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Serve until killed (on two worker threads, like the server under test);
/// `shards` 0 is one task per subscriber.
pub fn main(listen: &str, shards: usize) {
    SHARDS.set(shards).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = TcpListener::bind(listen).await.expect("bind");
        println!("listening on http://{}", l.local_addr().unwrap());
        let sessions: Sessions = Arc::default();
        loop {
            let Ok((s, _)) = l.accept().await else {
                continue;
            };
            let _ = s.set_nodelay(true);
            tokio::spawn(connection(s, sessions.clone()));
        }
    });
}

fn feed(sessions: &Sessions, id: &str) -> Feed {
    sessions
        .lock()
        .unwrap()
        .entry(id.to_string())
        .or_insert_with(|| {
            let tx = broadcast::channel(1024).0;
            let shards = (0..*SHARDS.get().unwrap())
                .map(|_| {
                    let set = Arc::new(Mutex::new(Vec::new()));
                    tokio::spawn(shard(tx.subscribe(), set.clone()));
                    set
                })
                .collect();
            Feed { tx, shards }
        })
        .clone()
}

/// One writer shard: every frame ready, to each of its sockets in one
/// write; a socket that cannot take it all at once is dropped (the floor
/// has no slow-consumer path; the runs here never hit it).
async fn shard(mut rx: broadcast::Receiver<Bytes>, set: Arc<Mutex<Vec<std::net::TcpStream>>>) {
    use std::io::Write as _;
    let mut batch = Vec::new();
    while let Ok(first) = rx.recv().await {
        batch.clear();
        batch.extend_from_slice(&first);
        while let Ok(more) = rx.try_recv() {
            batch.extend_from_slice(&more);
        }
        set.lock()
            .unwrap()
            .retain_mut(|s| matches!(s.write(&batch), Ok(n) if n == batch.len()));
        // Let the other tasks (ingest, the other shard) run between frames.
        tokio::task::yield_now().await;
    }
}

/// Requests on one connection: POSTs of events (keep-alive), or one GET of
/// a stream that lasts until the client goes.
async fn connection(mut s: TcpStream, sessions: Sessions) {
    let mut buf = Vec::with_capacity(1024);
    let mut cursor = 0u64;
    loop {
        let end = loop {
            if let Some(i) = memchr::memmem::find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            if !read_more(&mut s, &mut buf).await {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let mut words = head.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let session = path.split('/').nth(3).unwrap_or("").to_string();
        if method == "GET" && path.contains("/stream") {
            return stream(s, feed(&sessions, &session)).await;
        }
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        while buf.len() < len {
            if !read_more(&mut s, &mut buf).await {
                return;
            }
        }
        let body: Vec<u8> = buf.drain(..len).collect();
        let resp: &[u8] = if method == "POST" {
            cursor += 1;
            let _ = feed(&sessions, &session).tx.send(frame(&body, cursor));
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
        } else {
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
        };
        if s.write_all(resp).await.is_err() {
            return;
        }
    }
}

/// Append what the client sent next to `buf`; false once it is gone.
async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    match s.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

/// A delta frame of our shape carrying the posted text delta, as an SSE
/// event in one HTTP chunk.
fn frame(body: &[u8], cursor: u64) -> Bytes {
    let text = memchr::memmem::find(body, b"\"delta\":\"")
        .map(|i| &body[i + 9..])
        .and_then(|rest| rest.iter().position(|&b| b == b'"').map(|j| &rest[..j]))
        .unwrap_or(b"");
    let event = format!(
        "id: 0123456789abcdef:{cursor}\nevent: delta\ndata: {{\"type\":\"delta\",\"sessionId\":\"s\",\"cursor\":{cursor},\"epoch\":\"0123456789abcdef\",\"chunks\":[{{\"messageId\":\"msg-r\",\"role\":\"assistant\",\"chunk\":{{\"type\":\"text-delta\",\"id\":\"msg-r-t1\",\"delta\":\"{}\"}}}}]}}\n\n",
        String::from_utf8_lossy(text)
    );
    Bytes::from(format!("{:x}\r\n{event}\r\n", event.len()))
}

async fn stream(mut s: TcpStream, feed: Feed) {
    let mut rx = feed.tx.subscribe();
    let open =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let first = "event: snapshot\ndata: {}\n\n";
    let hello = format!("{open}{:x}\r\n{first}\r\n", first.len());
    if s.write_all(hello.as_bytes()).await.is_err() {
        return;
    }
    if !feed.shards.is_empty() {
        // Spread over the shards by a per-connection number.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(std_s) = s.into_std() {
            let _ = std_s.set_nonblocking(true);
            feed.shards[k % feed.shards.len()]
                .lock()
                .unwrap()
                .push(std_s);
        }
        return;
    }
    while let Ok(f) = rx.recv().await {
        if s.write_all(&f).await.is_err() {
            return;
        }
    }
}
