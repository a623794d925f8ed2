fn main() {
    let j = br#"{"type":"delta","cursor":123456,"eventId":"e123456","eventClass":"text.delta","timeline":{"timestamp":"2026-11-27T04:10:00.000Z"},"chunks":[{"type":"text-delta","id":"text-msg-1-0","delta":"T1234567890123;word"}]}"#;
    let n = 200_000;
    let t = std::time::Instant::now();
    let mut total = 0;
    for _ in 0..n {
        total += agent_projector::stream::ws::deflate::deflate(j).map_or(0, |b| b.len());
    }
    let el = t.elapsed();
    println!(
        "{} bytes -> {} ; {:.2} us per deflate",
        j.len(),
        total / n,
        el.as_secs_f64() * 1e6 / n as f64
    );
}
