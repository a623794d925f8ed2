"""`permessage-deflate` checked with Python's `websockets`, which offers it
by default and compresses its own messages: the extension is agreed, every
frame reads back as on an uncompressed socket, the wire carries far fewer
bytes, and the client's compressed messages (a multiplexed subscribe) are
read by the server."""

import asyncio
import json
import socket
from urllib.parse import urlparse

import websockets
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Opcode
from websockets.uri import parse_uri

from conftest import post

LONG = "Each step of the plan, explained with the reasons behind it. " * 20


def seed(base, session, n):
    post(base, session, [
        {"id": f"e{i}", "type": "text.delta", "runId": "r1", "messageId": "m1", "sequence": i,
         "payload": {"delta": LONG if i % 5 == 0 else f"word {i} "}}
        for i in range(1, n + 1)
    ])


def raw_replay(url, n, compress):
    """Read `n` text messages with the sans-I/O protocol; (texts, wire bytes,
    agreed extensions)."""
    extensions = [ClientPerMessageDeflateFactory()] if compress else None
    proto = ClientProtocol(parse_uri(url), extensions=extensions, max_size=None)
    u = urlparse(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=20)
    proto.send_request(proto.connect())
    sock.sendall(b"".join(proto.data_to_send()))
    texts, wire = [], 0
    while len(texts) < n:
        data = sock.recv(65536)
        assert data, f"closed after {len(texts)} messages"
        wire += len(data)
        proto.receive_data(data)
        for event in proto.events_received():
            if getattr(event, "opcode", None) == Opcode.TEXT:
                texts.append(event.data.decode())
    sock.close()
    return texts, wire, [e.name for e in proto.extensions]


def test_frames_read_back_the_same_in_far_fewer_bytes(server):
    seed(server.base, "z", 50)
    url = f"{server.ws_base}/v1/sessions/z/ws?cursor=0"
    plain, plain_wire, none = raw_replay(url, 51, compress=False)
    deflated, deflated_wire, agreed = raw_replay(url, 51, compress=True)
    assert none == [] and agreed == ["permessage-deflate"]
    assert deflated == plain
    assert [json.loads(t)["cursor"] for t in deflated[:50]] == list(range(1, 51))
    assert json.loads(deflated[50]) == {"type": "live", "cursor": 50}
    assert deflated_wire * 2 < plain_wire, (deflated_wire, plain_wire)


def test_the_default_client_agrees_and_its_compressed_subscribe_is_read(server):
    seed(server.base, "m", 10)

    async def run():
        async with websockets.connect(f"{server.ws_base}/v1/streams/ws") as ws:
            agreed = ws.response.headers["Sec-WebSocket-Extensions"]
            # A message long enough that the client deflates it.
            await ws.send(json.dumps({"type": "subscribe", "sessionId": "m", "cursor": "0"}) + " " * 200)
            first = json.loads(await asyncio.wait_for(ws.recv(), 10))
            frames = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(10)]
            return agreed, first, frames

    agreed, first, frames = asyncio.run(run())
    assert agreed.startswith("permessage-deflate")
    assert first == {"type": "subscribed", "sessionId": "m"}
    assert [f["cursor"] for f in frames] == list(range(1, 11))
    assert all(f["sessionId"] == "m" for f in frames)
