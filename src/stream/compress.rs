//! What compressed streams share: the budget of streams that hold a deflate
//! context at once (SSE gzip and WebSocket `permessage-deflate`, bounded
//! together by `http.compressed_streams_max`), and deflating a whole input
//! with a flush.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use flate2::{Compress, Compression, FlushCompress};

/// A stream's own deflate context (a gzipped SSE stream's, a WebSocket's):
/// level 1, most of deflate's gain on JSON for little CPU, paid per
/// delivery; an 8 KiB window, since frames are small, which keeps the
/// state at about 270 KiB instead of 380 KiB with the full window.
pub fn stream_compressor() -> Compress {
    Compress::new_with_window_bits(Compression::fast(), false, 13)
}

/// How many streams hold a deflate context now; shared by the server.
#[derive(Clone, Default)]
pub struct StreamBudget(Arc<AtomicUsize>);

impl StreamBudget {
    /// Take a slot if fewer than `max` are taken.
    pub fn take(&self, max: usize) -> Option<Slot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.0.clone()))
    }
}

/// A taken slot of the budget, given back when the stream is dropped.
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Deflate all of `input` into `out` with `flush`, growing `out` as needed.
pub fn deflate_all(
    c: &mut Compress,
    input: &[u8],
    out: &mut Vec<u8>,
    flush: FlushCompress,
) -> Result<(), flate2::CompressError> {
    let mut pos = 0;
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(input.len() - pos + 64);
        }
        let before = c.total_in();
        c.compress_vec(&input[pos..], out, flush)?;
        pos += (c.total_in() - before) as usize;
        // Done once every byte is in and the flush left room unused.
        if pos == input.len() && out.len() < out.capacity() {
            return Ok(());
        }
    }
}
