//! `permessage-deflate` (RFC 7692): the negotiation, and the deflate and
//! inflate of messages. A socket deflates in one of two ways:
//!
//! - **with a context** of its own (the previous messages are the LZ77
//!   window, as on a gzipped SSE stream): the fewest bytes, one deflate per
//!   message and socket. A context is taken at a socket's second message
//!   between two heartbeats (so an idle socket that got one snapshot holds
//!   none), while a slot of `http.compressed_streams_max` is free, and is
//!   dropped at a heartbeat with no message since the last one;
//! - **shared**, without a context: a frame is deflated once, by the first
//!   socket it goes to, and every socket sends the same bytes. Used when the
//!   client asked for `server_no_context_takeover` or no slot is free.
//!
//! A new context never refers to bytes before it, so a socket may switch
//! between the two at any message. The client is asked to send without a
//! context (`client_no_context_takeover`), so reading its messages needs no
//! state between them.

use std::cell::RefCell;

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::stream::compress::{deflate_all, stream_compressor, Slot, StreamBudget};

/// The window shared deflates use (2^15 bytes, deflate's largest). An offer
/// that limits it (`server_max_window_bits` below 15) is declined.
const WINDOW_BITS: u8 = 15;

/// A message of one socket alone (a multiplexed socket's) deflates at
/// level 1, like a stream's own context (`stream_compressor`): it is paid
/// per delivery (see docs/BENCHMARKS.md).
const SINGLE_LEVEL: u32 = 1;

/// Shared bytes are made once per frame for every socket: level 6, about
/// 30% fewer bytes than level 1 on a snapshot, for 5x its CPU once.
const SHARED_LEVEL: u32 = 6;

/// A message this large goes out as the frame's shared bytes even on a
/// socket with a context (which starts over after it): a snapshot is
/// deflated once, at the shared level, for every socket that joins.
const LARGE: usize = 16 * 1024;

/// A message this small (a `live` frame, a subscription's answer) goes out
/// as it is: deflating it saves next to nothing, and it neither makes a
/// socket busy nor touches its context.
const TINY: usize = 64;

/// The end of a sync flush, which a message leaves off (RFC 7692 7.2.1).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// What was agreed with a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    /// The server may keep a context between messages (the client did not
    /// ask for `server_no_context_takeover`).
    pub context: bool,
}

impl Agreement {
    /// The `Sec-WebSocket-Extensions` the server answers with.
    pub fn response(self) -> &'static str {
        if self.context {
            "permessage-deflate; client_no_context_takeover"
        } else {
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        }
    }
}

/// The first of the client's `Sec-WebSocket-Extensions` offers (every
/// header line, comma-separated offers, in the client's order of
/// preference) that is a `permessage-deflate` the server can accept. An
/// offer with an unknown, repeated or invalid parameter, or one that limits
/// the server's window below 15 bits, is declined (RFC 7692 5.1); the next
/// one is tried.
pub fn agree<'a>(offers: impl IntoIterator<Item = &'a str>) -> Option<Agreement> {
    offers
        .into_iter()
        .flat_map(|line| line.split(','))
        .find_map(acceptable)
}

fn acceptable(offer: &str) -> Option<Agreement> {
    let mut parts = offer.split(';').map(str::trim);
    if !parts
        .next()
        .is_some_and(|n| n.eq_ignore_ascii_case("permessage-deflate"))
    {
        return None;
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut context = true;
    for p in parts {
        let (name, value) = match p.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (p, None),
        };
        if seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
            return None;
        }
        seen.push(name);
        let ok = match name.to_ascii_lowercase().as_str() {
            "server_no_context_takeover" => {
                context = false;
                value.is_none()
            }
            "client_no_context_takeover" => value.is_none(),
            // The client's own window: any is fine, since it sends with
            // no context and the server inflates with the largest window.
            "client_max_window_bits" => value.is_none_or(|v| bits(v).is_some()),
            "server_max_window_bits" => value.and_then(bits) == Some(WINDOW_BITS),
            _ => false,
        };
        if !ok {
            return None;
        }
    }
    Some(Agreement { context })
}

/// A window size parameter: a decimal 8..=15 with no leading zero.
fn bits(v: &str) -> Option<u8> {
    if v.starts_with('0') {
        return None;
    }
    v.parse::<u8>().ok().filter(|b| (8..=15).contains(b))
}

thread_local! {
    static SHARED: RefCell<Compress> = RefCell::new(compressor(SHARED_LEVEL));
    static SINGLE: RefCell<Compress> = RefCell::new(compressor(SINGLE_LEVEL));
    static INFLATE: RefCell<Decompress> = RefCell::new(Decompress::new(false));
}

fn compressor(level: u32) -> Compress {
    Compress::new_with_window_bits(Compression::new(level), false, WINDOW_BITS)
}

/// A frame's shared bytes: its payload deflated with no context (at the
/// shared level, since it is done once for every socket), without the sync
/// flush's tail; `None` when that would not be smaller than `data` (the
/// message then goes out as it is, which the extension allows per message).
pub fn shared(data: &[u8]) -> Option<Bytes> {
    SHARED.with(|c| alone(&mut c.borrow_mut(), data))
}

/// The same for a message of one socket (a multiplexed socket's, which
/// carries its own `sessionId`): at the context level, since it is done
/// per delivery.
pub fn single(data: &[u8]) -> Option<Bytes> {
    SINGLE.with(|c| alone(&mut c.borrow_mut(), data))
}

fn alone(c: &mut Compress, data: &[u8]) -> Option<Bytes> {
    c.reset();
    let out = message(c, data)?;
    (out.len() < data.len()).then(|| Bytes::from(out))
}

/// `data` through `c` as one message: a sync flush, without its tail.
fn message(c: &mut Compress, data: &[u8]) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(data.len() / 2 + 64);
    deflate_all(c, data, &mut out, FlushCompress::Sync).ok()?;
    let body = out.strip_suffix(&TAIL)?.len();
    out.truncate(body);
    Some(out)
}

/// A socket's deflating: its own context while it has a slot, shared
/// bytes otherwise (see the module's doc).
pub struct Deflater {
    /// Whether a context may be kept (agreed, and allowed by the config).
    context: bool,
    budget: StreamBudget,
    max: usize,
    state: Option<(Compress, Slot)>,
    /// A message went out since the last heartbeat.
    busy: bool,
}

/// How a message goes out.
pub enum Deflated {
    /// Compressed (RSV1 set).
    Compressed(Bytes),
    /// As it is.
    Plain,
}

impl Deflater {
    /// A socket's deflater; `context` as agreed, contexts counted in
    /// `budget` up to `max`.
    pub fn new(agreed: Agreement, budget: StreamBudget, max: usize) -> Deflater {
        Deflater {
            context: agreed.context,
            budget,
            max,
            state: None,
            busy: false,
        }
    }

    /// How `json` goes out; `shared` is its context-free form, computed
    /// once per frame for every socket.
    pub fn message(&mut self, json: &[u8], shared: impl FnOnce() -> Option<Bytes>) -> Deflated {
        if json.len() < TINY {
            return Deflated::Plain;
        }
        let was_busy = std::mem::replace(&mut self.busy, true);
        if json.len() >= LARGE {
            if let Some((c, _)) = &mut self.state {
                // What follows must not refer to bytes the client's window
                // does not hold as this context saw them.
                c.reset();
            }
            return shared().map_or(Deflated::Plain, Deflated::Compressed);
        }
        // A context is taken by a socket that is busy: not for the one
        // message (a snapshot) an idle socket gets.
        if self.context && self.state.is_none() && was_busy {
            self.state = self
                .budget
                .take(self.max)
                .map(|slot| (stream_compressor(), slot));
        }
        if let Some((c, _)) = &mut self.state {
            if let Some(out) = message(c, json) {
                return Deflated::Compressed(out.into());
            }
            // Not expected of a sync flush; a fresh start is always valid.
            self.state = None;
        }
        shared().map_or(Deflated::Plain, Deflated::Compressed)
    }

    /// A heartbeat: a socket with no message since the last one gives up
    /// its context (and its slot).
    pub fn heartbeat(&mut self) {
        if !self.busy {
            self.state = None;
        }
        self.busy = false;
    }
}

/// Why a compressed message could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum InflateError {
    /// Not a valid deflate stream.
    Invalid,
    /// It inflates to more than the limit.
    TooBig,
}

/// Inflate one message's payload (sent with no context), refusing to
/// produce more than `limit` bytes.
pub fn inflate(data: &[u8], limit: usize) -> Result<Vec<u8>, InflateError> {
    INFLATE.with(|d| {
        let mut d = d.borrow_mut();
        d.reset(false);
        inflate_in(&mut d, data, limit)
    })
}

/// Inflate one message's payload with `d`, whose window is what it
/// inflated before (a peer that keeps a context between messages),
/// refusing to produce more than `limit` bytes.
pub fn inflate_in(d: &mut Decompress, data: &[u8], limit: usize) -> Result<Vec<u8>, InflateError> {
    let mut input = Vec::with_capacity(data.len() + TAIL.len());
    input.extend_from_slice(data);
    input.extend_from_slice(&TAIL);
    let start = d.total_in();
    let mut out: Vec<u8> = Vec::with_capacity((data.len() * 4).max(64).min(limit + 1));
    loop {
        let (before_in, before_out) = (d.total_in(), d.total_out());
        let used = (before_in - start) as usize;
        let status = d
            .decompress_vec(&input[used..], &mut out, FlushDecompress::Sync)
            .map_err(|_| InflateError::Invalid)?;
        if out.len() > limit {
            return Err(InflateError::TooBig);
        }
        let room = out.len() < out.capacity();
        let all_in = (d.total_in() - start) as usize == input.len();
        if status == Status::StreamEnd || (all_in && room) {
            return Ok(out);
        }
        if room && d.total_in() == before_in && d.total_out() == before_out {
            // No progress with room to write: the stream is cut short.
            return Err(InflateError::Invalid);
        }
        if !room {
            out.reserve_exact(out.capacity().min(limit + 1 - out.len()).max(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_are_accepted_or_declined_by_their_parameters() {
        const CONTEXT: Option<Agreement> = Some(Agreement { context: true });
        const SHARED: Option<Agreement> = Some(Agreement { context: false });
        // What Chromium, Firefox, Python `websockets` and Node `ws` send.
        assert_eq!(
            agree(["permessage-deflate; client_max_window_bits"]),
            CONTEXT
        );
        assert_eq!(agree(["permessage-deflate"]), CONTEXT);
        assert_eq!(
            agree(["PerMessage-Deflate;client_max_window_bits=10; server_no_context_takeover"]),
            SHARED
        );
        assert_eq!(
            agree(["permessage-deflate; server_max_window_bits=15"]),
            CONTEXT
        );
        assert_eq!(
            agree(["permessage-deflate; server_max_window_bits=\"15\""]),
            CONTEXT
        );
        // Declined: a smaller server window, bad or repeated or unknown
        // parameters, other extensions.
        for offer in [
            "permessage-deflate; server_max_window_bits=10",
            "permessage-deflate; server_max_window_bits",
            "permessage-deflate; client_max_window_bits=16",
            "permessage-deflate; client_max_window_bits=08",
            "permessage-deflate; client_max_window_bits=7",
            "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
            "permessage-deflate; mystery",
            "x-webkit-deflate-frame",
            "",
        ] {
            assert_eq!(agree([offer]), None, "{offer}");
        }
        // The first acceptable offer of several, over lines and commas.
        let two = "permessage-deflate; server_max_window_bits=9, permessage-deflate; server_no_context_takeover";
        assert_eq!(agree([two]), SHARED);
        assert_eq!(
            agree(["foo", "permessage-deflate; client_max_window_bits"]),
            CONTEXT
        );
        assert_eq!(agree(Vec::<&str>::new()), None);
    }

    fn json(n: usize) -> Vec<u8> {
        let mut s = String::from("[");
        for i in 0..n {
            s.push_str(&format!(
                "{{\"type\":\"text-delta\",\"id\":\"text-{i}\",\"delta\":\"word {i} \"}},"
            ));
        }
        s.push_str("null]");
        s.into_bytes()
    }

    /// What a third-party inflater (flate2's own, with the tail appended as
    /// RFC 7692 says a receiver does) reads back.
    fn reference_inflate(payload: &[u8]) -> Vec<u8> {
        use std::io::Read;
        let mut all = payload.to_vec();
        all.extend_from_slice(&TAIL);
        let mut out = Vec::new();
        let _ = flate2::read::DeflateDecoder::new(&all[..]).read_to_end(&mut out);
        out
    }

    #[test]
    fn a_message_deflates_without_context_and_inflates_back() {
        for n in [1, 10, 1_000, 20_000] {
            let data = json(n);
            let z = shared(&data).expect("JSON compresses");
            assert!(z.len() < data.len());
            assert!(!z.ends_with(&TAIL));
            assert_eq!(reference_inflate(&z), data, "n={n}");
            assert_eq!(inflate(&z, data.len()).unwrap(), data);
            // No context: the same bytes every time.
            assert_eq!(shared(&data).unwrap(), z);
            assert_eq!(reference_inflate(&single(&data).unwrap()), data);
        }
        // Too small to gain: sent as it is.
        assert_eq!(shared(b"{}"), None);
        assert_eq!(single(b""), None);
    }

    #[test]
    fn a_frame_is_deflated_once_for_every_socket() {
        use crate::stream::ws::WsText;
        let f = std::sync::Arc::new(crate::frame::reset(&"a reason worth deflating ".repeat(8)));
        let first = f.deflated().expect("compresses");
        let calls = std::cell::Cell::new(0);
        let again = f.ws_deflated(|_| {
            calls.set(calls.get() + 1);
            None
        });
        assert_eq!((again, calls.get()), (Some(first.clone()), 0));
        // The same allocation, not a copy.
        assert_eq!(f.deflated().unwrap().as_ptr(), first.as_ptr());
    }

    #[test]
    fn inflate_refuses_garbage_and_bombs() {
        assert_eq!(
            inflate(&[0xff, 0xff, 0xff, 0x00, 0x12], 1024),
            Err(InflateError::Invalid)
        );
        let zeros = vec![b'0'; 1_000_000];
        let z = shared(&zeros).unwrap();
        assert!(z.len() < zeros.len() / 100, "{}", z.len());
        assert_eq!(inflate(&z, 65_536), Err(InflateError::TooBig));
        assert_eq!(inflate(&z, 1_000_000).unwrap().len(), 1_000_000);
        assert_eq!(inflate(&z, 999_999), Err(InflateError::TooBig));
    }
}
