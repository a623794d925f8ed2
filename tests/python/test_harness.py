"""The harness itself: a server starts, and Python's `websockets` reads its first frame."""

import asyncio
import json

import websockets

from conftest import post


def test_websocket_starts_with_the_snapshot(server):
    reply = post(server.base, "py-harness", [{"id": "e1", "type": "text.delta", "runId": "r1", "sequence": 1, "payload": {"delta": "hi"}}])
    assert reply["accepted"] == 1

    async def first_frame():
        async with websockets.connect(f"{server.ws_base}/v1/sessions/py-harness/ws") as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 10))

    frame = asyncio.run(first_frame())
    assert frame["type"] == "snapshot"
    assert frame["cursor"] == 1
