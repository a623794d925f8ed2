"""What an AG-UI reconnection costs on a long thread (issue 32): bytes on the
wire and time to its first event, for a client that reconnects with
`Last-Event-ID` at the head of a 200-message session (and 10 events behind
it), against a connection that starts from the snapshot (what every
reconnection cost before: the whole conversation as a MESSAGES_SNAPSHOT).

    target/py/bin/python bench/ag_ui_reconnect.py [BINARY]

BINARY defaults to target/release/agent-projector, else target/debug/.
Starts its own server on the memory store; prints one table.
"""

import http.client
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
import conftest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def session(base, sid, turns):
    """`turns` user turns, each answered by a run: text, a tool, more text."""
    seq = 0
    batch = []

    def ev(kind, run, **f):
        nonlocal seq
        seq += 1
        e = {"id": f"{sid}-{seq}", "type": kind, "sessionId": sid, "runId": run,
             "turnId": run, "sequence": seq}
        e.update(f)
        batch.append(e)

    for t in range(turns):
        run = f"run-{t}"
        ev("turn.submitted", run, payload={"text": f"Question {t}: what does the build say today?"})
        ev("run.started", run)
        for d in ["Let me ", "check the ", "build log. "]:
            ev("text.delta", run, payload={"delta": d})
        ev("tool.started", run, toolCallId=f"c{t}", payload={"toolName": "grep", "input": {"q": "error"}})
        ev("tool.result", run, toolCallId=f"c{t}", payload={"summary": "3 matches in lexer.rs"})
        for d in ["The lexer ", "rejects long escapes; ", "the fix is a bound check."]:
            ev("text.delta", run, payload={"delta": d})
        ev("run.finished", run)
    conftest.post(base, sid, batch)
    return seq


def connect(base, sid, last=None):
    """Open the AG-UI stream; returns (connection, response, t0)."""
    u = base.removeprefix("http://")
    host, port = u.split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"last-event-id": last} if last else {}
    t0 = time.perf_counter()
    c.request("GET", f"/v1/sessions/{sid}/ag-ui", headers=headers)
    r = c.getresponse()
    return c, r, t0


def read_until(r, t0, kind, run=None):
    """Bytes read until an event of `kind` (of run `run`) is complete, and
    the seconds to the first event."""
    n, first = 0, None
    while True:
        line = r.readline()
        if first is None and line.startswith(b"data: "):
            first = time.perf_counter() - t0
        n += len(line)
        if line.startswith(b"data: "):
            e = json.loads(line[6:])
            if e["type"] == kind and (run is None or e.get("runId") == run):
                r.readline()
                return n + 1, first


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else None
    if binary is None:
        rel = ROOT / "target" / "release" / "agent-projector"
        binary = str(rel if rel.exists() else ROOT / "target" / "debug" / "agent-projector")
    conftest.BIN = Path(binary)
    srv = conftest.Server([])
    try:
        sid = "reconnect"
        head = session(srv.base, sid, 100)
        with urllib.request.urlopen(f"{srv.base}/v1/sessions/{sid}/snapshot") as r:
            snap = json.load(r)
        epoch = snap["epoch"]
        msgs = len(snap["state"]["messages"])
        rows = []
        # A new connection: the snapshot, up to its closing RUN_FINISHED.
        times = []
        for _ in range(5):
            c, r, t0 = connect(srv.base, sid)
            n_snap, t = read_until(r, t0, "RUN_FINISHED")
            times.append(t)
            c.close()
        rows.append(("new connection (every reconnection before)", n_snap, statistics.median(times)))
        # Reconnections: one event behind the head (the next run's start),
        # and eleven behind it (ten earlier starts as well).
        nxt = head
        for behind in (0, 10):
            times = []
            for _ in range(5 + behind):
                nxt += 1
                run = f"extra-{nxt}"
                conftest.post(srv.base, sid, {"id": f"{sid}-x{nxt}", "type": "run.started",
                                               "sessionId": sid, "runId": run})
            for _ in range(5):
                c, r, t0 = connect(srv.base, sid, f"{epoch}:{nxt - 1 - behind}")
                n, t = read_until(r, t0, "RUN_STARTED", run)
                times.append(t)
                c.close()
            rows.append((f"reconnect, {behind + 1} event(s) missed", n, statistics.median(times)))
        print(f"session: {msgs} messages, {nxt} events; binary {binary}")
        print("| connection | bytes | first event (median of 5) |")
        print("|---|---:|---:|")
        for name, n, t in rows:
            print(f"| {name} | {n:,} | {t * 1000:.1f} ms |")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
