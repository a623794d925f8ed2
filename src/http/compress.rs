//! Response compression, negotiated by `Accept-Encoding`. One-shot bodies
//! (snapshots, listings, assets) go through tower-http's gzip layer. Event
//! streams (`text/event-stream`) get a gzip stream of their own that is
//! flushed after every write, so each frame reaches the client at once; its
//! deflate context lives only while the stream is busy (a write with no
//! event in it, such as a heartbeat, ends it), so an idle stream holds none,
//! and at most `http.compressed_streams_max` streams are compressed at once.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use flate2::{Compress, FlushCompress};
use futures_util::Stream;

use super::AppState;
use crate::stream::compress::{deflate_all, stream_compressor, Slot};

/// The gzip member header: deflate, no name, no mtime, unknown OS.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// True if the client accepts gzip (`gzip`, `x-gzip` or `*`, not `q=0`).
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let q_zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            !q_zero
                && ["gzip", "x-gzip", "*"]
                    .iter()
                    .any(|c| coding.eq_ignore_ascii_case(c))
        })
}

/// The state an event-stream response may be gzipped with: some when the
/// client accepts gzip and compression is on.
pub(crate) fn wanted(state: &AppState, headers: &HeaderMap) -> Option<AppState> {
    (state.cfg.http.compression && accepts_gzip(headers)).then(|| state.clone())
}

/// Gzip an event-stream response when it was [`wanted`] and the budget has
/// room (any event stream varies by `Accept-Encoding`).
pub(crate) fn event_stream(wanted: Option<AppState>, mut resp: Response) -> Response {
    let is_events = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !is_events || resp.headers().contains_key(header::CONTENT_ENCODING) {
        return resp;
    }
    resp.headers_mut()
        .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    let Some(state) = wanted else {
        return resp;
    };
    let Some(slot) = state
        .compressed_streams
        .take(state.cfg.http.compressed_streams_max)
    else {
        metrics::counter!("projector_stream_compression_refused_total").increment(1);
        return resp;
    };
    resp.headers_mut()
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    let (parts, body) = resp.into_parts();
    let gz = GzipStream::new(body.into_data_stream(), slot);
    Response::from_parts(parts, Body::from_stream(gz))
}

/// A gzip stream over `inner`'s writes, each compressed and flushed on its
/// own; the deflate state is dropped after a write with no SSE event.
struct GzipStream<S> {
    inner: S,
    deflate: Option<Compress>,
    crc: crc32fast::Hasher,
    /// Input length modulo 2^32 (the gzip trailer's ISIZE).
    len: u32,
    started: bool,
    finished: bool,
    _slot: Option<Slot>,
}

impl<S> GzipStream<S> {
    fn new(inner: S, slot: Slot) -> Self {
        GzipStream {
            inner,
            deflate: None,
            crc: crc32fast::Hasher::new(),
            len: 0,
            started: false,
            finished: false,
            _slot: Some(slot),
        }
    }

    /// The compressed form of one write, the gzip header first.
    fn write(&mut self, input: &[u8]) -> Result<Bytes, flate2::CompressError> {
        let mut out = Vec::with_capacity(input.len() / 2 + 64);
        if !self.started {
            out.extend_from_slice(&GZIP_HEADER);
            self.started = true;
        }
        self.crc.update(input);
        self.len = self.len.wrapping_add(input.len() as u32);
        let quiet = !has_event(input);
        // A full flush leaves no reference to earlier bytes, so the next
        // write can start from a fresh deflate state.
        let flush = if quiet {
            FlushCompress::Full
        } else {
            FlushCompress::Sync
        };
        deflate_all(self.deflater(), input, &mut out, flush)?;
        if quiet {
            self.deflate = None;
        }
        Ok(out.into())
    }

    /// The last block and the trailer (CRC-32 and length).
    fn trailer(&mut self) -> Result<Bytes, flate2::CompressError> {
        let mut out = Vec::with_capacity(32);
        if !self.started {
            out.extend_from_slice(&GZIP_HEADER);
            self.started = true;
        }
        deflate_all(self.deflater(), &[], &mut out, FlushCompress::Finish)?;
        self.deflate = None;
        out.extend_from_slice(&self.crc.clone().finalize().to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        Ok(out.into())
    }

    fn deflater(&mut self) -> &mut Compress {
        self.deflate.get_or_insert_with(stream_compressor)
    }
}

/// True if `chunk` holds an SSE event (a `data:` field); comments and
/// `retry:` lines alone are not one.
fn has_event(chunk: &[u8]) -> bool {
    chunk.starts_with(b"data:") || chunk.windows(6).any(|w| w == b"\ndata:")
}

impl<S> Stream for GzipStream<S>
where
    S: Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.finished {
            return Poll::Ready(None);
        }
        let out = match ready!(Pin::new(&mut self.inner).poll_next(cx)) {
            Some(Ok(b)) if b.is_empty() => return Poll::Ready(Some(Ok(b))),
            Some(Ok(b)) => self.write(&b),
            Some(Err(e)) => return Poll::Ready(Some(Err(e))),
            None => {
                self.finished = true;
                self._slot = None;
                self.trailer()
            }
        };
        Poll::Ready(Some(out.map_err(axum::Error::new)))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::stream::compress::StreamBudget;

    fn stream() -> GzipStream<futures_util::stream::Empty<Result<Bytes, axum::Error>>> {
        GzipStream::new(
            futures_util::stream::empty(),
            StreamBudget::default().take(1).unwrap(),
        )
    }

    #[test]
    fn every_write_decodes_on_its_own_and_the_whole_is_valid_gzip() {
        let writes: Vec<&[u8]> = vec![
            b": agent-projector\nretry: 2000\n\n",
            b"id: 1:1\nevent: frame\ndata: {\"cursor\":1}\n\n",
            b"id: 1:2\nevent: frame\ndata: {\"cursor\":2}\n\nid: 1:3\ndata: {}\n\n",
            b": keep-alive\n\n",
            b"id: 1:4\nevent: frame\ndata: {\"cursor\":4,\"text\":\"after the quiet\"}\n\n",
            b": keep-alive\n\n",
            b": keep-alive\n\n",
            b"data: x\n\n",
        ];
        let mut gz = stream();
        let mut dec = flate2::write::GzDecoder::new(Vec::new());
        let mut all = Vec::new();
        let mut expected = Vec::new();
        for w in &writes {
            let out = gz.write(w).unwrap();
            all.extend_from_slice(&out);
            dec.write_all(&out).unwrap();
            dec.flush().unwrap();
            expected.extend_from_slice(w);
            // Flushed: everything written so far decodes now.
            assert_eq!(
                dec.get_ref(),
                &expected,
                "after {:?}",
                String::from_utf8_lossy(w)
            );
        }
        all.extend_from_slice(&gz.trailer().unwrap());
        let mut whole = flate2::read::GzDecoder::new(&all[..]);
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut whole, &mut text).unwrap();
        assert_eq!(text, expected, "CRC and length check out");
    }

    #[test]
    fn the_deflate_state_is_dropped_when_the_stream_goes_quiet() {
        let mut gz = stream();
        gz.write(b"data: 1\n\n").unwrap();
        assert!(gz.deflate.is_some());
        gz.write(b": keep-alive\n\n").unwrap();
        assert!(gz.deflate.is_none());
    }

    #[test]
    fn repeated_frames_compress_against_the_earlier_ones() {
        let mut gz = stream();
        let frame = b"id: 1:9\nevent: frame\ndata: {\"cursor\":9,\"chunk\":{\"type\":\"text-delta\",\"id\":\"m1-text-1\",\"delta\":\"token \"}}\n\n";
        gz.write(frame).unwrap();
        let second = gz.write(frame).unwrap();
        assert!(second.len() * 4 < frame.len(), "{} bytes", second.len());
    }

    #[test]
    fn accept_encoding_is_read_with_its_weights() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            accepts_gzip(&m)
        };
        assert!(h("gzip, deflate, br, zstd"));
        assert!(h("br;q=1.0, GZIP;q=0.5"));
        assert!(h("*"));
        assert!(!h("gzip;q=0"));
        assert!(!h("identity"));
        assert!(!h("br, deflate"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn the_budget_refuses_past_its_max_and_frees_on_drop() {
        let b = StreamBudget::default();
        let one = b.take(2).unwrap();
        let _two = b.take(2).unwrap();
        assert!(b.take(2).is_none());
        drop(one);
        assert!(b.take(2).is_some());
    }
}
