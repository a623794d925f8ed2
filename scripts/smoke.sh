#!/usr/bin/env bash
# A curl round trip against a running agent-projector:
#   post a short agent turn, read the snapshot, follow the stream from cursor 0.
# Usage: scripts/smoke.sh [BASE_URL]   (default http://127.0.0.1:8080)
set -euo pipefail
BASE="${1:-${PROJECTOR_URL:-http://127.0.0.1:8080}}"
SESSION="smoke-$(date +%s)-$$"
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }

curl -fsS "$BASE/healthz" >/dev/null || fail "server not reachable at $BASE"

resp=$(curl -fsS -X POST "$BASE/v1/sessions/$SESSION/events" \
  -H 'content-type: application/json' \
  --data-binary @- <<'JSON'
[
  {"id": "s1", "type": "run.started", "runId": "run-1", "sequence": 1},
  {"id": "s2", "type": "text.delta", "runId": "run-1", "sequence": 2, "payload": {"delta": "Checking the weather. "}},
  {"id": "s3", "type": "tool.started", "runId": "run-1", "sequence": 3, "toolCallId": "call-1",
   "payload": {"toolName": "weather", "input": {"city": "Lisbon"}}},
  {"id": "s4", "type": "tool.result", "runId": "run-1", "sequence": 4, "toolCallId": "call-1",
   "payload": {"summary": "21C, clear"}, "refIds": ["weather-out-1"]},
  {"id": "s5", "type": "text.delta", "runId": "run-1", "sequence": 5, "payload": {"delta": "It is 21C and clear."}},
  {"id": "s6", "type": "run.finished", "runId": "run-1", "sequence": 6}
]
JSON
)
echo "$resp" | grep -q '"accepted":6' || fail "ingest: $resp"
echo "ingest: $resp"

again=$(curl -fsS -X POST "$BASE/v1/sessions/$SESSION/events" -H 'content-type: application/json' \
  -d '{"id": "s1", "type": "run.started", "runId": "run-1", "sequence": 1}')
echo "$again" | grep -q '"duplicates":1' || fail "idempotency: $again"

code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$BASE/v1/sessions/$SESSION/events" \
  -H 'content-type: application/json' -d '{"type": "tool.started"}')
[ "$code" = 422 ] || fail "a tool event without toolCallId must be 422, got $code"

snap=$(curl -fsS "$BASE/v1/sessions/$SESSION/snapshot")
echo "$snap" | grep -q '"type":"tool-weather"' || fail "snapshot lacks the tool part: $snap"
echo "$snap" | grep -q '"text":"It is 21C and clear."' || fail "snapshot lacks the second text part: $snap"
echo "snapshot: cursor $(echo "$snap" | sed -E 's/.*"cursor":([0-9]+).*/\1/' | head -c 10)"

# Follow the stream from cursor 0 until the 6th frame, bounded in time.
frames=$(curl -fsSN --max-time 3 -H 'Last-Event-ID: 0' "$BASE/v1/sessions/$SESSION/stream" 2>/dev/null \
  | grep -m 6 '^id: ' || true)
[ "$(echo "$frames" | grep -c '^id: ')" = 6 ] || fail "expected 6 frames from cursor 0, got: $frames"
echo "stream: $(echo "$frames" | tr '\n' ' ')"
echo "smoke: OK"
