#!/bin/bash
# Instructions per single-event POST, counted by callgrind: the same for
# the same binary and requests whatever else the machine is doing, so two
# builds compare without alternated rounds (docs/BENCHMARKS.md).
#
#   bench/callgrind/ingest.sh SERVER [N] [C]
#
# SERVER is an agent-projector binary (on the memory store, or STORE) or the load
# bench's binary (target/release/deps/load-*: its parse-only floor). N POSTs
# (default 4000) over C connections (default 8) are counted, after 800
# uncounted ones. GZIP=1: each request accepts gzip. STORE=embedded: the
# durable store (its log is flushed every 250 ms of a run valgrind slows
# down, so each flush is smaller than at full speed). Needs valgrind.
set -euo pipefail
BIN=$1; N=${2:-4000}; C=${3:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/data"
case "$(basename "$BIN")" in
  load-*) ARGS=(--ingest-floor --listen 127.0.0.1:0) ;;
  *) ARGS=(--listen 127.0.0.1:0 --store "${STORE:-memory}" --data-dir "$WORK/data") ;;
esac
NO_COLOR=1 RUST_LOG=warn,agent_projector=info \
  PROJECTOR_LIMITS__INGEST_EVENTS_PER_SEC_PER_SESSION=0 \
  PROJECTOR_LIMITS__INGEST_EVENTS_PER_SEC_PER_TOKEN=0 \
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/out" \
  "$BIN" "${ARGS[@]}" > "$WORK/stdout" 2> "$WORK/stderr" &
VG=$!
PORT=""
for _ in $(seq 1 600); do
  PORT=$(grep -o 'listening on http://[0-9.:]*' "$WORK/stdout" | sed 's/.*://' || true)
  [ -n "$PORT" ] && break
  sleep 0.2
done
[ -n "$PORT" ] || { echo "the server did not start" >&2; kill $VG; exit 1; }
python3 "$HERE/post.py" "$PORT" 800 "$C" warm
callgrind_control -i on $VG > /dev/null 2>&1
python3 "$HERE/post.py" "$PORT" "$N" "$C" counted
callgrind_control -i off $VG > /dev/null 2>&1
callgrind_control -d $VG > /dev/null 2>&1
kill $VG; wait $VG 2> /dev/null || true
TOTAL=$(callgrind_annotate "$WORK/out.1" 2> /dev/null | awk '/PROGRAM TOTALS/ && !n {gsub(",", "", $1); print $1; n = 1}')
echo "$(basename "$BIN"): $TOTAL instructions, $((TOTAL / N)) per POST"
if [ -n "${KEEP:-}" ]; then cp "$WORK/out.1" "$KEEP"; fi
