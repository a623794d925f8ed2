//! What deflating one WebSocket message costs, by size and level: a text
//! delta frame and a snapshot (a file given as the first argument, e.g. a
//! session's `GET /snapshot`), each deflated with no context as the shared
//! path does. `cargo run --release --example deflate_cost -- snapshot.json`

use std::time::Instant;

use flate2::{Compress, Compression, FlushCompress};

fn deflate(level: u32, data: &[u8]) -> usize {
    let mut c = Compress::new_with_window_bits(Compression::new(level), false, 15);
    let mut out = Vec::with_capacity(data.len() + 64);
    c.compress_vec(data, &mut out, FlushCompress::Sync).unwrap();
    out.len() - 4
}

fn main() {
    let delta = br#"{"type":"delta","cursor":123456,"eventId":"e123456","eventClass":"text.delta","timeline":{"timestamp":"2026-11-27T04:10:00.000Z"},"chunks":[{"type":"text-delta","id":"text-msg-1-0","delta":"T1234567890123;word"}]}"#.to_vec();
    let snapshot = std::env::args()
        .nth(1)
        .map(|p| std::fs::read(p).expect("a snapshot file"));
    for (name, data) in [("delta", Some(delta)), ("snapshot", snapshot)] {
        let Some(data) = data else { continue };
        // The server's own path first (level 1, a thread's compressor reset).
        let n = if data.len() < 10_000 { 100_000 } else { 300 };
        let t = Instant::now();
        let mut size = 0;
        for _ in 0..n {
            size =
                agent_projector::stream::ws::deflate::shared(&data).map_or(data.len(), |b| b.len());
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!(
            "{name} {} B: server path {size} B ({:.1}x) in {us:.1} µs",
            data.len(),
            data.len() as f64 / size as f64
        );
        for level in [1, 4, 6, 9] {
            let t = Instant::now();
            let mut size = 0;
            for _ in 0..n / 10 {
                size = deflate(level, &data);
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / (n / 10) as f64;
            println!(
                "  level {level}: {size} B ({:.1}x) in {us:.1} µs (a fresh compressor each time)",
                data.len() as f64 / size as f64
            );
        }
    }
}
