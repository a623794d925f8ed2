//! `permessage-deflate` (RFC 7692): the negotiation, and the deflate and
//! inflate of one message. The server never keeps a context between
//! messages (`server_no_context_takeover`) and asks the client not to
//! either (`client_no_context_takeover`): a message then compresses the
//! same for every socket, so a frame is deflated once and the bytes are
//! shared like its JSON, and a socket holds no compressor or window.

use std::cell::RefCell;

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The window the server compresses with (2^15 bytes, deflate's largest).
/// An offer that limits it (`server_max_window_bits` below 15) is declined.
const WINDOW_BITS: u8 = 15;

/// zlib-rs level 1: most of the gain of deflate for JSON at a fraction of
/// the CPU of the default level (see docs/BENCHMARKS.md).
const LEVEL: u32 = 1;

/// The `Sec-WebSocket-Extensions` the server answers with when it accepts.
pub const RESPONSE: &str =
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover";

/// The end of a sync flush, which a message leaves off (RFC 7692 7.2.1).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Whether one of the client's `Sec-WebSocket-Extensions` offers (every
/// header line, comma-separated offers, in the client's order of
/// preference) is a `permessage-deflate` the server can accept. An offer
/// with an unknown, repeated or invalid parameter, or one that limits the
/// server's window below 15 bits, is declined (RFC 7692 5.1); the next one
/// is tried.
pub fn accepts<'a>(offers: impl IntoIterator<Item = &'a str>) -> bool {
    offers
        .into_iter()
        .flat_map(|line| line.split(','))
        .any(acceptable)
}

fn acceptable(offer: &str) -> bool {
    let mut parts = offer.split(';').map(str::trim);
    if !parts
        .next()
        .is_some_and(|n| n.eq_ignore_ascii_case("permessage-deflate"))
    {
        return false;
    }
    let mut seen: Vec<&str> = Vec::new();
    for p in parts {
        let (name, value) = match p.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (p, None),
        };
        if seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
            return false;
        }
        seen.push(name);
        let ok = match name.to_ascii_lowercase().as_str() {
            "server_no_context_takeover" | "client_no_context_takeover" => value.is_none(),
            // The client's own window: any is fine, since it sends with
            // no context and the server inflates with the largest window.
            "client_max_window_bits" => value.is_none_or(|v| bits(v).is_some()),
            "server_max_window_bits" => value.and_then(bits) == Some(WINDOW_BITS),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// A window size parameter: a decimal 8..=15 with no leading zero.
fn bits(v: &str) -> Option<u8> {
    if v.starts_with('0') {
        return None;
    }
    v.parse::<u8>().ok().filter(|b| (8..=15).contains(b))
}

thread_local! {
    static DEFLATE: RefCell<Compress> =
        RefCell::new(Compress::new_with_window_bits(Compression::new(LEVEL), false, WINDOW_BITS));
    static INFLATE: RefCell<Decompress> = RefCell::new(Decompress::new(false));
}

/// One message's payload deflated with no context, without the sync
/// flush's tail; `None` when that would not be smaller than `data` (the
/// message then goes out as it is, which the extension allows per message).
pub fn deflate(data: &[u8]) -> Option<Bytes> {
    DEFLATE.with(|c| {
        let mut c = c.borrow_mut();
        c.reset();
        let mut out: Vec<u8> = Vec::with_capacity(data.len() / 2 + 64);
        loop {
            let consumed = c.total_in() as usize;
            if out.len() == out.capacity() {
                out.reserve(out.capacity());
            }
            c.compress_vec(&data[consumed..], &mut out, FlushCompress::Sync)
                .ok()?;
            // Done once every byte went in and the flush fitted (the
            // output did not fill up).
            if c.total_in() as usize == data.len() && out.len() < out.capacity() {
                break;
            }
        }
        if !out.ends_with(&TAIL) {
            return None;
        }
        out.truncate(out.len() - TAIL.len());
        (out.len() < data.len()).then(|| Bytes::from(out))
    })
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
    let mut input = Vec::with_capacity(data.len() + TAIL.len());
    input.extend_from_slice(data);
    input.extend_from_slice(&TAIL);
    INFLATE.with(|d| {
        let mut d = d.borrow_mut();
        d.reset(false);
        let mut out: Vec<u8> = Vec::with_capacity((data.len() * 4).max(64).min(limit + 1));
        loop {
            let (before_in, before_out) = (d.total_in(), d.total_out());
            let status = d
                .decompress_vec(
                    &input[before_in as usize..],
                    &mut out,
                    FlushDecompress::Sync,
                )
                .map_err(|_| InflateError::Invalid)?;
            if out.len() > limit {
                return Err(InflateError::TooBig);
            }
            let room = out.len() < out.capacity();
            if status == Status::StreamEnd || (d.total_in() as usize == input.len() && room) {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_are_accepted_or_declined_by_their_parameters() {
        // What Chromium, Firefox, Python `websockets` and Node `ws` send.
        assert!(accepts(["permessage-deflate; client_max_window_bits"]));
        assert!(accepts(["permessage-deflate"]));
        assert!(accepts([
            "PerMessage-Deflate;client_max_window_bits=10; server_no_context_takeover"
        ]));
        assert!(accepts(["permessage-deflate; server_max_window_bits=15"]));
        assert!(accepts([
            "permessage-deflate; server_max_window_bits=\"15\""
        ]));
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
            assert!(!accepts([offer]), "{offer}");
        }
        // The first acceptable offer of several, over lines and commas.
        assert!(accepts([
            "permessage-deflate; server_max_window_bits=9, permessage-deflate",
        ]));
        assert!(accepts([
            "foo",
            "permessage-deflate; client_max_window_bits"
        ]));
        assert!(!accepts(Vec::<&str>::new()));
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
            let z = deflate(&data).expect("JSON compresses");
            assert!(z.len() < data.len());
            assert!(!z.ends_with(&TAIL));
            assert_eq!(reference_inflate(&z), data, "n={n}");
            assert_eq!(inflate(&z, data.len()).unwrap(), data);
            // No context: the same bytes every time.
            assert_eq!(deflate(&data).unwrap(), z);
        }
        // Too small to gain: sent as it is.
        assert_eq!(deflate(b"{}"), None);
        assert_eq!(deflate(b""), None);
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
        let z = deflate(&zeros).unwrap();
        assert!(z.len() < zeros.len() / 100, "{}", z.len());
        assert_eq!(inflate(&z, 65_536), Err(InflateError::TooBig));
        assert_eq!(inflate(&z, 1_000_000).unwrap().len(), 1_000_000);
        assert_eq!(inflate(&z, 999_999), Err(InflateError::TooBig));
    }
}
