#!/usr/bin/env bash
# Every test of the project: rustfmt, clippy and rustdoc, Rust unit and integration tests, the Node suites
# (AI SDK conformance with the real `ai` package; the viewer in headless
# Chromium, which skips with a message where /usr/bin/chromium is missing),
# the Python suites (third-party clients), then the curl smoke script against a freshly started server. This is the
# README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# Code shape first: formatted, and clippy-clean under the lints of Cargo.toml.
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The API docs build without a broken link (lib.rs and every module's //! line).
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps --quiet

# The workspace: the server and its pure core (crates/projector-core).
cargo test --locked --workspace --all-targets

# The Python packages the suites use (third-party clients: `websockets`,
# schemathesis, AG-UI's Python SDK, LangGraph), in a virtualenv of their own
# under target/py with the pinned requirements; the Node suite runs a
# LangGraph agent from it too.
[ -x target/py/bin/python ] || python3 -m venv target/py
target/py/bin/pip install -q --disable-pip-version-check -r tests/python/requirements.txt

# Node suites, against the binary cargo just built. Exact versions from the lockfile.
# A test that hangs fails after 5 minutes, and a file whose tests have all
# ended exits even if a failed one left a client retrying: a failure is
# reported, never a run stuck until CI's limit.
(cd tests/node && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
# The flags are package.json's `test` script's, one list for both ways in.
(cd tests/node && npm test --silent -- --test-reporter=spec)

# Python suites.
target/py/bin/python -m pytest -q -p no:cacheprovider tests/python

# Smoke: start the real binary on a free port (memory store), wait for its
# "listening" log line, run scripts/smoke.sh, stop it.
log=$(mktemp)
./target/debug/agent-projector --store memory --listen 127.0.0.1:0 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
addr=""
for _ in $(seq 1 200); do
  addr=$(grep -oE 'listening on http://[0-9.:]+' "$log" | head -1 | sed 's/listening on //') || true
  [ -n "$addr" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "server exited" >&2; exit 1; }
  sleep 0.05
done
[ -n "$addr" ] || { cat "$log"; echo "server did not start" >&2; exit 1; }
NO_COLOR=1 scripts/smoke.sh "$addr"
