//! The read side of `permessage-deflate`: tungstenite refuses a frame whose
//! RSV1 bit is set, so the bytes a peer sends pass through [`WsIo`], which
//! inflates each compressed message into one plain frame before
//! tungstenite parses it. Plain frames and control frames go through as
//! they are. With the extension off it is a plain pass-through. It holds
//! no buffer while the socket is idle.

use std::io::{self, Cursor};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use flate2::Decompress;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

use super::deflate::{inflate, inflate_in, InflateError};

/// A compressed message whose first frames arrived (RFC 6455 fragments).
struct Gathering {
    opcode: OpCode,
    masked: bool,
    payload: Vec<u8>,
}

/// A WebSocket byte stream whose compressed messages are inflated on read.
/// A socket without the extension carries no state (a pass-through).
pub struct WsIo<T> {
    inner: T,
    state: Option<Box<State>>,
}

/// What a socket that inflates (or has bytes from its handshake) keeps.
struct State {
    inflating: bool,
    /// The peer's context, for a peer that keeps one between messages (a
    /// server, seen by a client); `None`: each message stands alone.
    context: Option<Decompress>,
    /// Largest message (compressed or inflated) and frame accepted.
    limit: usize,
    /// Bytes read and not yet parsed into whole frames.
    raw: Vec<u8>,
    /// Frames ready for the reader, from `at`.
    ready: Vec<u8>,
    at: usize,
    gathering: Option<Gathering>,
}

/// Buffers that grew past this are dropped once empty, not kept.
const KEEP: usize = 8 * 1024;

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

fn unmask(payload: &mut [u8], mask: Option<[u8; 4]>) {
    if let Some(m) = mask {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= m[i & 3];
        }
    }
}

impl<T> WsIo<T> {
    /// Wrap `inner`; with `inflating`, compressed messages (RSV1) are
    /// inflated, each up to `limit` bytes. `already` are bytes read past
    /// the handshake.
    pub fn new(inner: T, inflating: bool, limit: usize, already: Vec<u8>) -> WsIo<T> {
        let state = (inflating || !already.is_empty()).then(|| {
            Box::new(State {
                inflating,
                context: None,
                limit,
                raw: already,
                ready: Vec::new(),
                at: 0,
                gathering: None,
            })
        });
        WsIo { inner, state }
    }

    /// Inflate with one window kept across messages, as a client of a
    /// server that keeps its context must (a client of this server, such
    /// as the load generator).
    pub fn keeping_context(mut self) -> WsIo<T> {
        if let Some(st) = self.state.as_deref_mut() {
            st.context = Some(Decompress::new(false));
        }
        self
    }
}

impl State {
    /// Parse every whole frame in `raw` into `ready`.
    fn parse(&mut self) -> io::Result<()> {
        let mut pos = 0;
        loop {
            let mut cur = Cursor::new(&self.raw[pos..]);
            let Some((head, len)) =
                FrameHeader::parse(&mut cur).map_err(|e| invalid(&e.to_string()))?
            else {
                break;
            };
            if len > self.limit as u64 {
                return Err(invalid("frame larger than the message limit"));
            }
            let start = pos + cur.position() as usize;
            let end = start + len as usize;
            if end > self.raw.len() {
                break;
            }
            self.frame(head, pos, start, end)?;
            pos = end;
        }
        self.raw.drain(..pos);
        if self.raw.is_empty() && self.raw.capacity() > KEEP {
            self.raw = Vec::new();
        }
        Ok(())
    }

    /// One whole frame at `raw[pos..end]`, its payload at `start..end`.
    fn frame(&mut self, head: FrameHeader, pos: usize, start: usize, end: usize) -> io::Result<()> {
        let data = matches!(head.opcode, OpCode::Data(_));
        let continues = head.opcode == OpCode::Data(Data::Continue);
        if !data || head.rsv2 || head.rsv3 || (!head.rsv1 && self.gathering.is_none()) {
            // Control frames (which may come between the fragments of a
            // message), plain messages, and anything tungstenite must
            // refuse itself: as they are.
            self.ready.extend_from_slice(&self.raw[pos..end]);
            return Ok(());
        }
        let mut payload = self.raw[start..end].to_vec();
        unmask(&mut payload, head.mask);
        let mut g = match (self.gathering.take(), continues, head.rsv1) {
            (None, false, true) => Gathering {
                opcode: head.opcode,
                masked: head.mask.is_some(),
                payload,
            },
            (Some(mut g), true, false) => {
                if g.payload.len() + payload.len() > self.limit {
                    return Err(invalid("message larger than the limit"));
                }
                g.payload.extend_from_slice(&payload);
                g
            }
            (None, true, _) => return Err(invalid("RSV1 set on a continuation frame")),
            (Some(_), _, _) => return Err(invalid("a new message inside a compressed one")),
            (None, false, false) => unreachable!("plain messages went through above"),
        };
        if !head.is_final {
            self.gathering = Some(g);
            return Ok(());
        }
        let plain = match self.context.as_mut() {
            Some(d) => inflate_in(d, &g.payload, self.limit),
            None => inflate(&g.payload, self.limit),
        };
        let plain = plain.map_err(|e| match e {
            InflateError::Invalid => invalid("invalid deflate data"),
            InflateError::TooBig => invalid("message inflates past the limit"),
        })?;
        g.payload = Vec::new();
        let out = FrameHeader {
            is_final: true,
            rsv1: false,
            rsv2: false,
            rsv3: false,
            opcode: g.opcode,
            // Masked as it came (a client's frames must be): a zero key
            // leaves the payload as it is.
            mask: g.masked.then_some([0; 4]),
        };
        out.format(plain.len() as u64, &mut self.ready)
            .map_err(|e| invalid(&e.to_string()))?;
        self.ready.extend_from_slice(&plain);
        Ok(())
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WsIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some(st) = this.state.as_deref_mut() else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        loop {
            if st.at < st.ready.len() {
                let n = buf.remaining().min(st.ready.len() - st.at);
                buf.put_slice(&st.ready[st.at..st.at + n]);
                st.at += n;
                if st.at == st.ready.len() {
                    st.at = 0;
                    st.ready.clear();
                    if st.ready.capacity() > KEEP {
                        st.ready = Vec::new();
                    }
                    if !st.inflating {
                        // The handshake's bytes are handed over: from
                        // now on, a pass-through.
                        this.state = None;
                    }
                }
                return Poll::Ready(Ok(()));
            }
            if !st.inflating {
                st.ready = std::mem::take(&mut st.raw);
                continue;
            }
            st.parse()?;
            if !st.ready.is_empty() {
                continue;
            }
            let mut chunk = [0u8; 4096];
            let mut rb = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                // The peer closed; a partial frame is left for nobody.
                return Poll::Ready(Ok(()));
            }
            st.raw.extend_from_slice(rb.filled());
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WsIo<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, b)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
