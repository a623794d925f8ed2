"""A session read as a Durable Stream by the protocol's Python client
(PyPI `durable-streams`), which nobody here wrote: a catch-up read of every
frame, then a resumed read from the offset it ended at, then live SSE from
there."""

import threading

from durable_streams import stream

from conftest import post


def delta(i):
    return {"id": f"e{i}", "type": "text.delta", "runId": "r", "messageId": "m1",
            "payload": {"delta": f"{i} "}}


def test_the_python_client_reads_and_resumes_a_session(server):
    url = f"{server.base}/ds/v1/stream/sessions/py"
    post(server.base, "py", [{"type": "run.started", "runId": "r"}, delta(1), delta(2)])
    with stream(url, offset="-1", live=False) as res:
        frames = list(res.iter_json())
        offset = res.offset
        assert res.up_to_date
    assert [f["cursor"] for f in frames] == [1, 2, 3]
    assert frames[2]["chunks"][-1]["chunk"] == {"type": "text-delta", "id": "m1-t0", "delta": "2 "}

    post(server.base, "py", [delta(3)])
    with stream(url, offset=offset, live=False) as res:
        assert [f["cursor"] for f in res.iter_json()] == [4]
        offset = res.offset

    # Live over SSE from there: the next frame arrives as it is posted.
    got = []
    with stream(url, offset=offset, live="sse", timeout=10) as res:
        threading.Timer(0.2, post, (server.base, "py", [delta(4)])).start()
        for f in res.iter_json():
            got.append(f)
            break
    assert [f["cursor"] for f in got] == [5]
