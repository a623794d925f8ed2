"""The AG-UI stream checked by the protocol's third-party referee,
`ag-ui-validate` (PyPI, pinned in requirements.txt), on captured output of
the five ways a client meets it (issue 32):

1. a join after a finished rich run (the snapshot, one closed run);
2. a live follow of a run that interleaves text, reasoning, two tools, an
   approval, a teammate and application state;
3. a follow cut mid-run and resumed with `Last-Event-ID` (the resumed
   connection: no MESSAGES_SNAPSHOT, every missed text once);
4. the gateway's answer to a run an AG-UI client (`HttpAgent`) asks for,
   with a real AG-UI agent upstream (events made by `ag-ui-protocol`);
5. a live follow of `scripts/demo.sh`;
6. a live follow of a run whose step is tried again (one MESSAGES_SNAPSHOT
   mid-run replaces what the first try wrote).

Each capture must have no error and no warning. The only `info` allowed is
AGUI208 on a resumed connection (a tool call whose parent message was
announced on the connection before the cut: the protocol does not ask a
reconnection to tell it again). Features are declared so that AGUI305
(shared state) is evaluated where the stream carries state.
"""

import http.client
import json
import os
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from conftest import ROOT, post

VALIDATE = Path(sys.executable).parent / "ag-ui-validate"


def lime(sid, run, seq, kind, **fields):
    e = {"id": f"{sid}-{seq}", "type": kind, "sessionId": sid, "runId": run, "turnId": "t1",
         "sequence": seq}
    e.update(fields)
    return e


def rich_run(sid, run="run-1"):
    """One rich run: text, reasoning, two tools, an approval, a teammate,
    application state; as a runtime posts it."""
    evs = [
        ("turn.submitted", {"payload": {"text": "Why does the build fail?"}}),
        ("run.started", {}),
        ("reasoning.summary", {"payload": {"text": "Check the lexer first."}}),
        ("text.delta", {"payload": {"delta": "Let me "}}),
        ("text.delta", {"payload": {"delta": "check."}}),
        ("tool.started", {"toolCallId": "c1", "payload": {"toolName": "grep", "input": {"q": "x"}}}),
        ("state.snapshot", {"payload": {"state": {"files": ["lexer.rs"]}}}),
        ("tool.result", {"toolCallId": "c1", "payload": {"summary": "3 matches"}}),
        ("text.delta", {"payload": {"delta": "Found it; "}}),
        ("text.delta", {"payload": {"delta": "I need your approval."}}),
        ("action.required", {"actionId": "a1", "title": "Apply the patch",
                             "payload": {"actionType": "approval", "toolCallId": "c-apply"}}),
        ("action.resolved", {"actionId": "a1", "payload": {"decision": "approve"}}),
        ("agent.spawned", {"agentId": "reviewer", "parentSessionId": sid,
                           "payload": {"name": "Reviewer", "role": "code reviewer"}}),
        ("text.delta", {"agentId": "reviewer", "payload": {"delta": "Looks good "}}),
        ("text.delta", {"agentId": "reviewer", "payload": {"delta": "to me."}}),
        ("agent.completed", {"agentId": "reviewer", "payload": {"status": "completed"}}),
        ("tool.started", {"toolCallId": "c2", "payload": {"toolName": "run_tests", "input": {}}}),
        ("tool.result", {"toolCallId": "c2", "payload": {"summary": "42 passed"}}),
        ("text.delta", {"payload": {"delta": "Fixed. "}}),
        ("text.delta", {"payload": {"delta": "All 42 pass."}}),
        ("run.finished", {}),
    ]
    return [lime(sid, run, i + 1, k, **f) for i, (k, f) in enumerate(evs)]


class Follow:
    """An AG-UI SSE connection read a frame at a time: the raw capture and
    the parsed events."""

    def __init__(self, base, sid, last=None, method="GET", body=None):
        u = urlparse(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        headers = {"accept": "text/event-stream"}
        if last:
            headers["last-event-id"] = last
        if body is not None:
            headers["content-type"] = "application/json"
        self.conn.request(method, f"/v1/sessions/{sid}/ag-ui", body=body, headers=headers)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        self.raw = []
        self.events = []
        self.ids = []

    def next(self):
        """The next event (heartbeat comments are kept in the capture)."""
        lines = []
        while True:
            line = self.resp.readline().decode()
            if line == "":
                return None
            self.raw.append(line)
            if line == "\n":
                if any(l.startswith("data: ") for l in lines):
                    break
                lines = []
                continue
            lines.append(line)
        data = next(l[6:] for l in lines if l.startswith("data: "))
        eid = next((l[4:].strip() for l in lines if l.startswith("id: ")), None)
        e = json.loads(data)
        self.events.append(e)
        self.ids.append(eid)
        return e

    def until(self, pred):
        while True:
            e = self.next()
            assert e is not None, "the stream ended early"
            if pred(e):
                return e

    def close(self):
        self.conn.close()

    def capture(self, tmp_path, name):
        p = tmp_path / f"{name}.sse"
        p.write_text("".join(self.raw))
        return p


def finished(run):
    return lambda e: e["type"] in ("RUN_FINISHED", "RUN_ERROR") and e.get("runId") == run


def referee(path, features=None, allow_info=()):
    """Run ag-ui-validate on a capture; assert no error, no warning, and no
    info but the allowed ones. Returns the report."""
    cmd = [str(VALIDATE), str(path), "--json"]
    if features:
        cmd += ["--features", ",".join(features)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    bad = [d for d in report["diagnostics"]
           if d["severity"] != "info" or d["rule"] not in allow_info]
    assert bad == [], json.dumps(bad, indent=1) + "\n" + path.read_text()[:4000]
    assert report["summary"]["errors"] == 0 and report["summary"]["warnings"] == 0
    assert report["internalErrors"] == []
    return report


def text_of(events):
    """The text each AG-UI message received, by id."""
    out = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            out[e["messageId"]] = out.get(e["messageId"], "") + e["delta"]
    return out


def test_a_join_after_a_finished_rich_run(server, tmp_path):
    sid = "ref-join"
    post(server.base, sid, rich_run(sid))
    f = Follow(server.base, sid)
    f.until(lambda e: e["type"] == "RUN_FINISHED")
    f.close()
    kinds = [e["type"] for e in f.events]
    assert kinds == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    msgs = f.events[1]["messages"]
    # One AG-UI message per text segment, tool calls under the segment
    # they follow, results right after their caller.
    roles = [(m["role"], m["id"]) for m in msgs]
    assert ("user", f"{sid}-1") in roles or roles[0][0] == "user", roles
    assistant = [m for m in msgs if m["role"] == "assistant"]
    assert [m.get("content") for m in assistant if "subagentRunId" not in m] == [
        "Let me check.", "Found it; I need your approval.", "Fixed. All 42 pass."]
    first = next(m for m in assistant if m.get("content") == "Let me check.")
    assert [c["id"] for c in first["toolCalls"]] == ["c1"]
    teammate = [m for m in msgs if m.get("subagentRunId") == "reviewer"]
    assert [m["content"] for m in teammate] == ["Looks good to me."]
    assert all(isinstance(e["timestamp"], int) for e in f.events)
    referee(f.capture(tmp_path, "join"), ["shared-state"])


def test_a_live_follow_of_a_rich_run(server, tmp_path):
    sid = "ref-live"
    f = Follow(server.base, sid)
    f.until(lambda e: e["type"] == "RUN_FINISHED")  # the join's closed run
    for e in rich_run(sid):
        post(server.base, sid, e)
    f.until(finished("run-1"))
    f.close()
    starts = [e["runId"] for e in f.events if e["type"] == "RUN_STARTED"]
    assert starts.count("run-1") == 1, starts
    user = next(e for e in f.events if e["type"] == "TEXT_MESSAGE_START" and e["role"] == "user")
    assert user["messageId"] == f"{sid}-1" or user["messageId"]
    texts = text_of(f.events)
    assert "Let me check." in texts.values() and "Fixed. All 42 pass." in texts.values(), texts
    referee(f.capture(tmp_path, "live"), ["shared-state"])


def test_a_live_follow_of_a_step_tried_again(server, tmp_path):
    """A step tried again mid-run (issue 35): the dropped try's text and
    call end, one MESSAGES_SNAPSHOT says the message as it stands (without
    the first try), the new try streams on; the referee finds nothing."""
    sid = "ref-retry"
    f = Follow(server.base, sid)
    f.until(lambda e: e["type"] == "RUN_FINISHED")  # the join's closed run
    step = lambda s, a: {"stepId": s, "attemptId": a}  # noqa: E731
    evs = [
        ("turn.submitted", {"payload": {"text": "Fetch the page."}}),
        ("run.started", {}),
        ("text.delta", {**step("s1", "a1"), "payload": {"delta": "Planning. "}}),
        ("text.delta", {**step("s2", "a1"), "payload": {"delta": "First try"}}),
        ("tool.started", {**step("s2", "a1"), "toolCallId": "c1",
                          "payload": {"toolName": "fetch", "input": {"url": "a"}}}),
        ("text.delta", {**step("s2", "a2"), "payload": {"delta": "Second try"}}),
        ("tool.started", {**step("s2", "a2"), "toolCallId": "c2",
                          "payload": {"toolName": "fetch", "input": {"url": "b"}}}),
        ("tool.result", {**step("s2", "a2"), "toolCallId": "c2", "payload": {"summary": "200 OK"}}),
        ("run.finished", {}),
    ]
    for i, (k, fields) in enumerate(evs):
        post(server.base, sid, lime(sid, "run-1", i + 1, k, **fields))
    f.until(finished("run-1"))
    f.close()
    snaps = [e for e in f.events if e["type"] == "MESSAGES_SNAPSHOT"]
    assert len(snaps) == 2, [e["type"] for e in f.events]  # the join's, the retry's
    said = json.dumps(snaps[1]["messages"])
    assert "First try" not in said and '"c1"' not in said and "Planning. " in said, said
    referee(f.capture(tmp_path, "retry"), ["shared-state"])


def test_a_cut_follow_resumes_with_only_what_it_missed(server, tmp_path):
    sid = "ref-cut"
    run = rich_run(sid)
    f = Follow(server.base, sid)
    f.until(lambda e: e["type"] == "RUN_FINISHED")
    for e in run[:9]:  # up to the first text after the first tool
        post(server.base, sid, e)
    # Cut in the middle of a text segment.
    f.until(lambda e: e["type"] == "TEXT_MESSAGE_CONTENT" and e["delta"] == "Found it; ")
    last = f.ids[-1]
    f.close()
    for e in run[9:]:
        post(server.base, sid, e)
    g = Follow(server.base, sid, last=last)
    g.until(finished("run-1"))
    g.close()
    kinds = [e["type"] for e in g.events]
    assert "MESSAGES_SNAPSHOT" not in kinds, kinds
    assert kinds[0] == "RUN_STARTED" and g.events[0]["runId"] == "run-1"
    # What the client held plus what the resume sent is every text once.
    before, after = text_of(f.events), text_of(g.events)
    whole = dict(before)
    for k, v in after.items():
        whole[k] = whole.get(k, "") + v
    assert sorted(whole.values()) == sorted(
        ["Why does the build fail?", "Let me check.", "Found it; I need your approval.",
         "Looks good to me.", "Fixed. All 42 pass."]), whole
    # The reconnection costs what was missed, not the conversation.
    full = Follow(server.base, sid)
    full.until(lambda e: e["type"] == "RUN_FINISHED")
    full.close()
    assert len("".join(g.raw)) < len("".join(f.raw)) + len("".join(full.raw))
    referee(g.capture(tmp_path, "resumed"), allow_info=("AGUI208",))


class Agent(BaseHTTPRequestHandler):
    """A tiny AG-UI agent: answers a RunAgentInput with the events of one
    run, encoded by the `ag-ui-protocol` encoder."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        enc = EventEncoder()
        thread, run = body["threadId"], body["runId"]
        events = [
            RunStartedEvent(thread_id=thread, run_id=run),
            TextMessageStartEvent(message_id=f"{run}-a", role="assistant"),
            TextMessageContentEvent(message_id=f"{run}-a", delta="Checking "),
            TextMessageContentEvent(message_id=f"{run}-a", delta="the weather."),
            TextMessageEndEvent(message_id=f"{run}-a"),
            ToolCallStartEvent(tool_call_id=f"{run}-c", tool_call_name="weather",
                               parent_message_id=f"{run}-a"),
            ToolCallArgsEvent(tool_call_id=f"{run}-c", delta='{"city":"Oslo"}'),
            ToolCallEndEvent(tool_call_id=f"{run}-c"),
            ToolCallResultEvent(message_id=f"{run}-t", tool_call_id=f"{run}-c", content="sunny"),
            StateSnapshotEvent(snapshot={"city": "Oslo"}),
            TextMessageStartEvent(message_id=f"{run}-b", role="assistant"),
            TextMessageContentEvent(message_id=f"{run}-b", delta="It is sunny."),
            TextMessageEndEvent(message_id=f"{run}-b"),
            RunFinishedEvent(thread_id=thread, run_id=run),
        ]
        self.send_response(200)
        self.send_header("content-type", enc.get_content_type())
        self.end_headers()
        for e in events:
            self.wfile.write(enc.encode(e).encode())
            self.wfile.flush()

    def log_message(self, *args):
        pass


def test_the_gateway_answer_to_a_run(start_server, tmp_path):
    agent = ThreadingHTTPServer(("127.0.0.1", 0), Agent)
    threading.Thread(target=agent.serve_forever, daemon=True).start()
    try:
        host = f"127.0.0.1:{agent.server_port}"
        srv = start_server(env={
            "PROJECTOR_UPSTREAM__AG_UI_URL": f"http://{host}/agent",
            "PROJECTOR_CONTROLS__ALLOWED_HOSTS": json.dumps([host]),
            "PROJECTOR_CONTROLS__SIGNING_SECRET": "referee",
        })
        sid = "ref-gw"
        run_input = {"threadId": sid, "runId": "r1", "state": {}, "tools": [], "context": [],
                     "forwardedProps": {},
                     "messages": [{"id": "u1", "role": "user", "content": "Weather in Oslo?"}]}
        f = Follow(srv.base, sid, method="POST", body=json.dumps(run_input))
        while f.next() is not None:
            pass
        f.close()
        assert f.events[-1]["type"] == "RUN_FINISHED" and f.events[-1]["runId"] == "r1"
        assert [e["runId"] for e in f.events if e["type"] == "RUN_STARTED"] == ["r1"]
        # The answer is the run: the client holds its own messages.
        kinds = [e["type"] for e in f.events]
        assert "MESSAGES_SNAPSHOT" not in kinds and kinds[0] == "RUN_STARTED", kinds
        assert text_of(f.events) == {"r1-a": "Checking the weather.", "r1-b": "It is sunny."}
        referee(f.capture(tmp_path, "gateway"), ["shared-state"])
    finally:
        agent.shutdown()


def test_a_live_follow_of_the_demo(server, tmp_path):
    sid = "ref-demo"
    f = Follow(server.base, sid)
    f.until(lambda e: e["type"] == "RUN_FINISHED")
    demo = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh"), server.base, sid],
        env={**os.environ, "DEMO_PACE": "0", "DEMO_RUNTIME": "0"},
        capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stderr
    f.until(finished("run-1"))
    f.close()
    referee(f.capture(tmp_path, "demo"))
