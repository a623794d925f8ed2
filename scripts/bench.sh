#!/usr/bin/env bash
# The full benchmark run (minutes, not seconds; never in CI): the store,
# the load generator against the Node anchor, the reducer, and the anchor's
# own idle-connection and replay figures. Needs Node 20+ and Redis on
# 127.0.0.1:6379 for the anchor. Results: stdout, target/bench-*.json,
# target/criterion/. Figures are written up in docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
(cd bench/anchor && npm ci --no-audit --no-fund --loglevel=error)
cargo bench --bench store
cargo bench --bench load
cargo bench --bench cluster # 1, 2, 3 nodes on one Redis ($PROJECTOR_BENCH_REDIS_URL, default 127.0.0.1:6379)
cargo bench --bench reducer
python3 bench/anchor/idle.py 2000
python3 bench/anchor/replay.py 100000
