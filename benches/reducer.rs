//! Reducer throughput (criterion): facts/s through the projection alone,
//! for a realistic mix (text deltas, tool calls and results, a final text,
//! actions, artifacts), and for plain text deltas; and the cost of reading
//! a request body into events: the strict, counting splitter against plain
//! `serde_json::Value` parsing of the same 1,000-event body.
//! `cargo bench --bench reducer`.

#[path = "support/reducer_facts.rs"]
mod reducer_facts;

use agent_projector::projection::{Projection, ProjectionConfig};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use reducer_facts::facts;
use serde_json::json;

/// The server's allocator, so that the figures are the server's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn bench(c: &mut Criterion) {
    let cfg = ProjectionConfig::default();
    let mut g = c.benchmark_group("reducer");
    for (name, mixed) in [("text_deltas", false), ("mixed_run", true)] {
        let input = facts(1000, mixed);
        g.throughput(Throughput::Elements(input.len() as u64));
        g.bench_function(name, |b| {
            b.iter_batched(
                || Projection::new(&cfg),
                |mut p| {
                    for (i, f) in input.iter().enumerate() {
                        std::hint::black_box(p.apply(&cfg, i as u64 + 1, f));
                    }
                    p
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn body(c: &mut Criterion) {
    use agent_projector::event::body::{split, BodyFormat};
    let events: Vec<serde_json::Value> = (0..1000)
        .map(|k| json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "sequence": k + 1, "payload": {"delta": "token ", "meta": {"k": k}}}))
        .collect();
    let bytes = serde_json::to_vec(&events).unwrap();
    let mut g = c.benchmark_group("ingest_body");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("serde_json_value", |b| {
        b.iter(|| {
            std::hint::black_box(serde_json::from_slice::<serde_json::Value>(&bytes).unwrap())
        })
    });
    g.bench_function("strict_counting_split", |b| {
        b.iter(|| std::hint::black_box(split(&bytes, BodyFormat::Json, 10_000).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench, body);
criterion_main!(benches);
