"""AG-UI events made by the PyPI `ag-ui-protocol` package (what Python
agent frameworks use: its `ag_ui.core` event models and `EventEncoder`),
POSTed to agent-projector as the SSE body a Python AG-UI server writes, a
line at a time (issue 15 item 1): the session projects them."""

import json
import urllib.request

from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
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


def events():
    return [
        RunStartedEvent(thread_id="th", run_id="r1"),
        TextMessageStartEvent(message_id="m1", role="assistant"),
        TextMessageContentEvent(message_id="m1", delta="Checking "),
        TextMessageContentEvent(message_id="m1", delta="the forecast."),
        TextMessageEndEvent(message_id="m1"),
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="forecast", parent_message_id="m1"),
        ToolCallArgsEvent(tool_call_id="c1", delta='{"days": 2}'),
        ToolCallEndEvent(tool_call_id="c1"),
        ToolCallResultEvent(message_id="t1", tool_call_id="c1", content='["sun", "rain"]'),
        StateSnapshotEvent(snapshot={"days": []}),
        StateDeltaEvent(delta=[{"op": "add", "path": "/days/-", "value": "sun"}]),
        RunFinishedEvent(thread_id="th", run_id="r1"),
    ]


def test_events_from_the_python_encoder_project(server):
    encoder = EventEncoder()

    def body():
        for e in events():
            yield encoder.encode(e).encode()

    req = urllib.request.Request(
        f"{server.base}/v1/sessions/agui-py/events",
        data=body(),
        headers={"content-type": encoder.get_content_type()},
        method="POST",
    )
    with urllib.request.urlopen(req) as r:
        reply = json.load(r)
    assert reply["warnings"] == [], reply
    with urllib.request.urlopen(f"{server.base}/v1/sessions/agui-py/snapshot") as r:
        state = json.load(r)["state"]
    (m,) = state["messages"]
    assert m["id"] == "m1"
    text = "".join(p["text"] for p in m["parts"] if p["type"] == "text")
    assert text == "Checking the forecast."
    (tool,) = [p for p in m["parts"] if p["type"] == "tool-forecast"]
    assert tool["input"] == {"days": 2}
    assert tool["output"] == '["sun", "rain"]'
    assert state["app"] == {"days": ["sun"]}
    assert state["runtime"]["status"] == "completed"
