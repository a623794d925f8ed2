//! A fixed reducer workload for instruction counts and CPU time: the
//! reducer bench's 1,000 facts (`mixed` or `text`), each round applied to a
//! fresh projection, `rounds` times, with the server's allocator.
//!
//! ```sh
//! cargo build --profile bench --example reducer_profile
//! valgrind --tool=callgrind --toggle-collect='*Projection*apply*' \
//!     target/release/examples/reducer_profile mixed 5
//! perf stat -e task-clock target/release/examples/reducer_profile mixed 400
//! ```

#[path = "../benches/support/reducer_facts.rs"]
mod reducer_facts;

use agent_projector::projection::{Projection, ProjectionConfig};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let mixed = match args.next().as_deref() {
        Some("mixed") | None => true,
        Some("text") => false,
        Some(other) => panic!("workload {other}: want mixed or text"),
    };
    let rounds: usize = args.next().map_or(5, |r| r.parse().expect("rounds"));
    let input = reducer_facts::facts(1000, mixed);
    let cfg = ProjectionConfig::default();
    let mut chunks = 0usize;
    for _ in 0..rounds {
        let mut p = Projection::new(&cfg);
        for (i, f) in input.iter().enumerate() {
            chunks += std::hint::black_box(p.apply(&cfg, i as u64 + 1, f))
                .chunks
                .len();
        }
    }
    println!("{} facts, {chunks} chunks", rounds * input.len());
}
