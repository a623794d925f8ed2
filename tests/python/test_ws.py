"""WebSocket promises checked with Python's `websockets`, a client nobody here
wrote (issue 12 items 2 and 5): a Close is answered with a Close, also in the
middle of a replay, after which nothing more is sent; and a resume with a
cursor of another log (a memory store's before a restart) is reset."""

import asyncio
import json
import socket
from urllib.parse import urlparse

import websockets
from websockets.client import ClientProtocol
from websockets.frames import Close, Opcode
from websockets.uri import parse_uri

from conftest import post


def delta(i, text, prefix="e"):
    return {"id": f"{prefix}{i}", "type": "text.delta", "runId": "r1", "messageId": f"m{prefix}",
            "sequence": i, "payload": {"delta": text}}


def test_a_client_close_is_answered_with_a_close(server):
    post(server.base, "close", [delta(1, "hi")])

    async def run():
        async with websockets.connect(f"{server.ws_base}/v1/sessions/close/ws") as ws:
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "snapshot"
            await asyncio.wait_for(ws.close(1000, "bye"), 10)
            return ws.protocol.close_rcvd

    rcvd = asyncio.run(run())
    assert rcvd is not None, "the server answered the Close"
    assert rcvd.code == 1000


def test_a_close_during_a_replay_stops_the_replay(server):
    """5,000 frames of about 1 KiB each to replay; the client reads ten, sends
    Close, then reads what still comes: the server's Close must arrive long
    before the replay would have ended. (The client's receive buffer is kept
    small so that kernel buffers cannot hold most of the replay.)"""
    text = "x" * 1000
    total = 5000
    for start in range(0, total, 500):
        post(server.base, "replay", [delta(i, text) for i in range(start + 1, start + 501)])

    url = f"{server.ws_base}/v1/sessions/replay/ws?cursor=0"
    proto = ClientProtocol(parse_uri(url), max_size=None)
    u = urlparse(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(20)
    sock.connect((u.hostname, u.port))
    proto.send_request(proto.connect())
    sock.sendall(b"".join(proto.data_to_send()))

    texts_before, texts_after, close = 0, 0, None
    sent_close = False
    while close is None:
        data = sock.recv(65536)
        if not data:
            break
        proto.receive_data(data)
        for event in proto.events_received():
            if getattr(event, "opcode", None) == Opcode.TEXT:
                if sent_close:
                    texts_after += 1
                else:
                    texts_before += 1
            elif getattr(event, "opcode", None) == Opcode.CLOSE:
                close = Close.parse(event.data)
        if not sent_close and texts_before >= 10:
            proto.send_close(1000, "enough")
            sent_close = True
        out = b"".join(proto.data_to_send())
        if out:
            sock.sendall(out)
    sock.close()
    assert close is not None, f"no Close from the server after {texts_after} more frames"
    assert close.code == 1000
    assert texts_before + texts_after < total // 2, (
        f"{texts_after} frames after the Close; the replay went on"
    )


def test_a_cursor_of_another_log_is_reset_across_a_memory_store_restart(start_server):
    first = start_server()
    port = urlparse(first.base).port
    post(first.base, "s", [delta(i, f"old {i} ", "old") for i in range(1, 6)])

    async def snapshot():
        async with websockets.connect(f"{first.ws_base}/v1/sessions/s/ws") as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 10))

    snap = asyncio.run(snapshot())
    assert snap["cursor"] == 5
    first.stop()
    second = start_server("--listen", f"127.0.0.1:{port}")
    post(second.base, "s", [delta(i, f"new {i} ", "new") for i in range(1, 11)])

    async def resume(query):
        async with websockets.connect(f"{second.ws_base}/v1/sessions/s/ws?{query}") as ws:
            return [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(2)]

    for query in (f"cursor={snap['cursor']}&epoch={snap['epoch']}", f"cursor={snap['epoch']}:{snap['cursor']}"):
        reset, fresh = asyncio.run(resume(query))
        assert (reset["type"], reset["reason"]) == ("reset", "epoch_mismatch"), query
        assert fresh["type"] == "snapshot" and fresh["cursor"] == 10
        texts = [p["text"] for m in fresh["state"]["messages"] for p in m["parts"] if p["type"] == "text"]
        assert texts and all("old" not in t for t in texts), texts
