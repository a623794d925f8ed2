#!/usr/bin/env bash
# A scripted agent run, posted at human pace, to watch in the viewer.
#
#   scripts/demo.sh [BASE_URL] [SESSION]
#
# Defaults: http://127.0.0.1:8080 and demo-<timestamp>. Prints the viewer URL
# first: open it, then watch the run unfold (text, reasoning, tools, an
# approval, an artifact, evidence, a teammate with its own message). Set
# DEMO_PACE=0 to post without pauses.
#
# The approval waits for your Approve / Reject in the viewer: a small local
# runtime (scripts/demo-runtime.mjs, needs node) takes the decision the server
# relays and answers it with its own action.resolved event. For that the
# server must be allowed to call it:
#
#   PROJECTOR_CONTROLS__ALLOWED_HOSTS='["127.0.0.1:8788"]' \
#   PROJECTOR_CONTROLS__SIGNING_SECRET=demo-secret cargo run --release
#
# (DEMO_RUNTIME_PORT and DEMO_SIGNING_SECRET change those two values.) Without
# node or that configuration, or with DEMO_RUNTIME=0, the approval is resolved
# by the script itself after a pause.
set -euo pipefail

BASE="${1:-${PROJECTOR_URL:-http://127.0.0.1:8080}}"
BASE="${BASE%/}"
SESSION="${2:-demo-$(date +%Y%m%d-%H%M%S)}"
PACE="${DEMO_PACE:-1}"
RUN="run-1"
TURN="turn-1"
SEQ=0
REPLY_FILE=$(mktemp)
RUNTIME_PID=""
trap 'rm -f "$REPLY_FILE"; [ -n "$RUNTIME_PID" ] && kill "$RUNTIME_PID" 2>/dev/null; true' EXIT
RUNTIME_PORT="${DEMO_RUNTIME_PORT:-8788}"
SIGNING_SECRET="${DEMO_SIGNING_SECRET:-demo-secret}"

fail() { echo "demo: $*" >&2; exit 1; }

curl -fsS "$BASE/healthz" >/dev/null 2>&1 || fail "no agent-projector at $BASE (start one with: cargo run -- --store memory)"

# The session id goes into a URL path and a query string.
urlencode() {
  local s="$1" out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c="${s:i:1}"
    case "$c" in
      [a-zA-Z0-9.~_-]) out+="$c" ;;
      *) out+=$(printf '%%%02X' "'$c") ;;
    esac
  done
  printf '%s' "$out"
}
SID=$(urlencode "$SESSION")

echo "viewer:  $BASE/?session=$SID"
echo "session: $SESSION"

# The local runtime that answers the viewer's Approve / Reject.
CONTROL_URL=""
if [ "${DEMO_RUNTIME:-1}" != 0 ] && command -v node >/dev/null 2>&1; then
  RUNTIME_LOG=$(mktemp)
  node "$(dirname "$0")/demo-runtime.mjs" "$RUNTIME_PORT" "$BASE" "$SIGNING_SECRET" >"$RUNTIME_LOG" 2>&1 &
  RUNTIME_PID=$!
  for _ in $(seq 1 100); do
    grep -q "listening" "$RUNTIME_LOG" 2>/dev/null && break
    kill -0 "$RUNTIME_PID" 2>/dev/null || break
    sleep 0.05
  done
  if grep -q "listening" "$RUNTIME_LOG" 2>/dev/null; then
    CONTROL_URL="http://127.0.0.1:$RUNTIME_PORT/controls"
    echo "runtime: $CONTROL_URL (answers the viewer's Approve / Reject)"
  else
    echo "runtime: not started ($(head -c 200 "$RUNTIME_LOG")); the script resolves the approval itself"
    RUNTIME_PID=""
  fi
fi
echo

# pause SECONDS: sleep, scaled by DEMO_PACE (0 = no pauses).
pause() {
  [ "$PACE" = 0 ] && return 0
  sleep "$(awk -v s="$1" -v p="$PACE" 'BEGIN { printf "%.2f", s * p }')"
}

# ev TYPE [FIELDS]: post one Agent UI envelope event of run-1 / turn-1.
# FIELDS is the rest of the JSON object (ids, payload), without braces.
ev() {
  local type="$1" fields="${2:-}"
  SEQ=$((SEQ + 1))
  local body="{\"id\":\"demo-$SEQ\",\"type\":\"$type\",\"sessionId\":\"$SESSION\",\"runId\":\"$RUN\",\"turnId\":\"$TURN\",\"sequence\":$SEQ"
  [ -n "$fields" ] && body+=",$fields"
  body+="}"
  local code
  code=$(curl -sS -o "$REPLY_FILE" -w '%{http_code}' -X POST "$BASE/v1/sessions/$SID/events" \
    -H 'content-type: application/json' --data-binary "$body") || code=000
  [ "$code" = 200 ] || fail "POST $type failed ($code): $(cat "$REPLY_FILE" 2>/dev/null)"
  printf '  %-18s %s\n' "$type" "${3:-}"
}

# say TEXT...: stream assistant text as several text.delta events.
say() {
  local d
  for d in "$@"; do
    ev text.delta "\"payload\":{\"delta\":\"$d\"}" "$d"
    pause 0.35
  done
}

echo "posting a scripted run (Ctrl-C to stop):"

ev turn.submitted '"payload":{"text":"The nightly build fails in parser::tests::unicode_escapes. Can you find out why and fix it?"}' "user turn"
pause 1
if [ -n "$CONTROL_URL" ]; then
  ev session.opened "\"payload\":{\"controlUrl\":\"$CONTROL_URL\"}" "session opened (controls go to the local runtime)"
fi
ev run.started '"payload":{"model":"demo-model"}' "run started"
pause 0.8
ev reasoning.summary '"payload":{"text":"The failing test is about unicode escapes. Check the recent lexer changes first, reproduce the failure, then patch the smallest thing that explains it."}' "reasoning summary"
pause 0.8
say "I'll start by looking at " "the recent changes to the lexer " "and the CI log of the failing run."
pause 0.5

ev tool.started '"toolCallId":"call-grep","payload":{"toolName":"grep","input":{"pattern":"unicode_escape","path":"src/parser"}}' "grep"
pause 1
ev tool.result '"toolCallId":"call-grep","refIds":["out-grep-1"],"payload":{"summary":"3 matches in src/parser/lexer.rs"}' "grep -> 3 matches"
pause 0.6
ev evidence.changed '"evidenceId":"ev-ci-log","refIds":["ci-log-4512#L212"],"payload":{"title":"CI log: assertion failed at lexer.rs:212 (escape of 7 hex digits accepted)","verdict":"supports"}' "evidence"
pause 0.6

say "Found it: the lexer accepts \`\\\\u{...}\` escapes with more than six hex digits, " "which the spec forbids.\n\n" "Let me reproduce it with the test suite."
pause 0.4
ev tool.started '"toolCallId":"call-test-1","payload":{"toolName":"run_tests","input":{"filter":"unicode"}}' "run_tests"
pause 1.2
ev tool.result '"toolCallId":"call-test-1","refIds":["out-test-1"],"payload":{"summary":"1 failed, 41 passed"}' "run_tests -> 1 failed"
pause 0.6

say "Reproduced. " "The fix is a bound check in \`lex_unicode_escape\`; " "it edits src/parser/lexer.rs, so I need your approval first."
pause 0.4
ev action.required '"actionId":"act-apply-patch","title":"Apply patch to src/parser/lexer.rs","payload":{"actionType":"approval","toolCallId":"call-apply"}' "approval required"
if [ -n "$CONTROL_URL" ] && [ "$PACE" != 0 ]; then
  echo "  ... waiting for your Approve / Reject in the viewer (up to 120 s)"
  decided=""
  for _ in $(seq 1 240); do
    if curl -fsS "$BASE/v1/sessions/$SID/snapshot" | node -e '
      let s = ""; process.stdin.on("data", (c) => (s += c)).on("end", () =>
        process.exit(JSON.parse(s).state.actions?.["act-apply-patch"]?.status === "resolved" ? 0 : 1));'; then
      decided=1
      break
    fi
    sleep 0.5
  done
  [ -n "$decided" ] || ev action.resolved '"actionId":"act-apply-patch","payload":{"decision":"approve"}' "no decision in time: resolved (approve)"
else
  echo "  ... waiting for a decision (resolved by the script in a few seconds)"
  pause 4
  ev action.resolved '"actionId":"act-apply-patch","payload":{"decision":"approve"}' "approval resolved (approve)"
fi
pause 0.6

ev artifact.created '"artifactId":"art-patch","refIds":["diff-77"],"payload":{"title":"Patch: limit unicode escapes to six hex digits","artifactKind":"patch","path":"src/parser/lexer.rs"}' "artifact"
pause 0.8

# A teammate reviews the patch, with its own identity and its own message.
ev agent.spawned "\"agentId\":\"reviewer\",\"parentSessionId\":\"$SESSION\",\"payload\":{\"name\":\"Reviewer\",\"role\":\"code reviewer\",\"model\":\"demo-model-small\"}" "teammate spawned"
pause 0.6
ev agent.changed '"agentId":"reviewer","payload":{"status":"reviewing"}' "teammate reviewing"
pause 0.6
ev text.delta '"agentId":"reviewer","payload":{"delta":"Reviewed the patch: the bound matches the spec (at most six hex digits) "}' "teammate text"
pause 0.4
ev text.delta '"agentId":"reviewer","payload":{"delta":"and the new test covers the boundary. Looks good to me."}' "teammate text"
pause 0.6
ev agent.completed '"agentId":"reviewer","payload":{"status":"completed"}' "teammate completed"
pause 0.6

ev tool.started '"toolCallId":"call-test-2","payload":{"toolName":"run_tests","input":{"filter":"parser"}}' "run_tests"
pause 1.2
ev tool.result '"toolCallId":"call-test-2","refIds":["out-test-2"],"payload":{"summary":"42 passed"}' "run_tests -> 42 passed"
pause 0.5

say "Fixed. " "The lexer now rejects escapes longer than six hex digits, " "and the whole parser suite passes (42 tests)."
pause 0.5
ev run.finished '' "run finished"

echo
echo "done: $SEQ events. Snapshot: $BASE/v1/sessions/$SID/snapshot"
