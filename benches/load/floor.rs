//! The floor: a server that does the least any SSE fan-out server must do,
//! to tell how far agent-projector is from what this machine allows. It
//! answers a POST of an event by sending one delta frame (as large as ours)
//! to the session's SSE subscribers, each a task that writes every frame
//! to its socket. No store, no reducer, no replay, no auth, no layers.
//! `LOAD_FLOOR=1` runs every fan-out scenario against it too, with the same
//! generator in the same run. Started as `load --floor-server --listen ADDR`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

type Sessions = Arc<Mutex<HashMap<String, broadcast::Sender<Bytes>>>>;

/// Serve until killed (on two worker threads, like the server under test).
pub fn main(listen: &str) {
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

fn feed(sessions: &Sessions, id: &str) -> broadcast::Sender<Bytes> {
    sessions
        .lock()
        .unwrap()
        .entry(id.to_string())
        .or_insert_with(|| broadcast::channel(1024).0)
        .clone()
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
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
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
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..len).collect();
        let resp: &[u8] = if method == "POST" {
            cursor += 1;
            let _ = feed(&sessions, &session).send(frame(&body, cursor));
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
        } else {
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
        };
        if s.write_all(resp).await.is_err() {
            return;
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

async fn stream(mut s: TcpStream, feed: broadcast::Sender<Bytes>) {
    let mut rx = feed.subscribe();
    let open =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let first = "event: snapshot\ndata: {}\n\n";
    let hello = format!("{open}{:x}\r\n{first}\r\n", first.len());
    if s.write_all(hello.as_bytes()).await.is_err() {
        return;
    }
    while let Ok(f) = rx.recv().await {
        if s.write_all(&f).await.is_err() {
            return;
        }
    }
}
