//! A lean HTTP/1.1 client for the ingest section: one keep-alive
//! connection per producer; each request leaves in one `write` and its
//! response is read whole with as few reads as it takes. reqwest's pool,
//! dispatch task and header maps cost the generator about twice as much
//! per request (16-18 µs against 7-9 for this client, posting to the
//! parse-only floor), on the same two cores the server needs.
//! `LOAD_INGEST_CLIENT=reqwest` runs the same requests through reqwest
//! instead: a second generator to check this one against.
//! `LOAD_ACCEPT_ENCODING=gzip` sends that header with every request, as
//! most HTTP libraries do (Python's requests and httpx, Node's fetch).

use std::fmt::Write as _;
use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One keep-alive connection to a server, opened on first use and again
/// after the server closes it.
pub struct Poster {
    addr: String,
    stream: Option<TcpStream>,
    request: String,
    response: Vec<u8>,
    /// Extra header lines (`LOAD_ACCEPT_ENCODING`).
    extra: String,
}

impl Poster {
    /// A poster for the server at `url` (`http://host:port`).
    pub fn new(url: &str) -> Self {
        Poster {
            addr: url.trim_start_matches("http://").to_string(),
            stream: None,
            request: String::with_capacity(4096),
            response: Vec::with_capacity(4096),
            extra: std::env::var("LOAD_ACCEPT_ENCODING")
                .map(|v| format!("accept-encoding: {v}\r\n"))
                .unwrap_or_default(),
        }
    }

    /// POST `body` as `content_type` to `path`; the response's status.
    pub async fn post(&mut self, path: &str, content_type: &str, body: &str) -> io::Result<u16> {
        self.request.clear();
        let _ = write!(
            self.request,
            "POST {path} HTTP/1.1\r\nhost: {}\r\n{}content-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
            self.addr,
            self.extra,
            body.len()
        );
        let stream = match &mut self.stream {
            Some(s) => s,
            None => {
                let s = TcpStream::connect(&self.addr).await?;
                s.set_nodelay(true)?;
                self.stream.insert(s)
            }
        };
        stream.write_all(self.request.as_bytes()).await?;
        self.response.clear();
        let (status, close) = read_response(stream, &mut self.response).await?;
        if close {
            self.stream = None;
        }
        Ok(status)
    }
}

/// How a response's body ends.
enum Framing {
    Length(usize),
    Chunked,
    /// No body: 1xx, 204 and 304.
    Empty,
    /// Neither length nor chunks: the body ends when the server closes.
    UntilClose,
}

/// Read one whole response into `buf`: its status, and whether the server
/// closes the connection after it.
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<(u16, bool)> {
    let (status, close, head, framing) = loop {
        if let Some(parsed) = parse_head(buf)? {
            break parsed;
        }
        read_more(s, buf).await?;
    };
    match framing {
        Framing::Empty => {}
        Framing::UntilClose => {
            while read_more(s, buf).await.is_ok() {}
            return Ok((status, true));
        }
        Framing::Length(n) => {
            while buf.len() < head + n {
                read_more(s, buf).await?;
            }
        }
        Framing::Chunked => {
            let mut at = head;
            loop {
                let Some(eol) = memchr::memmem::find(&buf[at..], b"\r\n") else {
                    read_more(s, buf).await?;
                    continue;
                };
                let line = std::str::from_utf8(&buf[at..at + eol]).map_err(invalid)?;
                let size = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size, 16).map_err(invalid)?;
                // The size line, the data and its CRLF (for the last chunk,
                // the empty line that ends a body without trailers).
                let end = at + eol + 2 + size + 2;
                while buf.len() < end {
                    read_more(s, buf).await?;
                }
                if size == 0 {
                    break;
                }
                at = end;
            }
        }
    }
    Ok((status, close))
}

/// The status line and headers of `buf`, once they are all there: status,
/// `Connection: close`, the head's length and the body's framing.
fn parse_head(buf: &[u8]) -> io::Result<Option<(u16, bool, usize, Framing)>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut res = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(head) = res.parse(buf).map_err(invalid)? else {
        return Ok(None);
    };
    let status = res.code.unwrap_or(0);
    let bodiless = status < 200 || status == 204 || status == 304;
    let (mut framing, mut close) = (Framing::UntilClose, false);
    for h in res.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value).map_err(invalid)?;
            framing = Framing::Length(n.trim().parse().map_err(invalid)?);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            framing = Framing::Chunked;
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = h.value.eq_ignore_ascii_case(b"close");
        }
    }
    if bodiless {
        framing = Framing::Empty;
    }
    Ok(Some((status, close, head, framing)))
}

async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.reserve(4096);
    match s.read_buf(buf).await? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        _ => Ok(()),
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}
