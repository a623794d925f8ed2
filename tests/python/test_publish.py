"""The streaming ingest (`/v1/sessions/{id}/publish`, issue 36 item 4) with
clients nobody here wrote: Python's own `http.client` writing a chunked body
line by line and reading each ack before it writes the next (full duplex
over HTTP/1.1), and `websockets` publishing over the socket."""

import asyncio
import http.client
import json
import urllib.request
from urllib.parse import urlparse

import websockets


def event(i, prefix="e"):
    return {"id": f"{prefix}{i}", "type": "text.delta", "runId": "r1", "messageId": "m1",
            "payload": {"delta": f"tok{i} "}}


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def log_ids(base, session):
    with urllib.request.urlopen(f"{base}/v1/sessions/{session}/events?limit=1000") as r:
        return [e["event"]["id"] for e in json.load(r)["events"]]


def test_http_client_gets_each_ack_while_its_body_is_open(server):
    u = urlparse(server.base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.putrequest("POST", "/v1/sessions/py/publish")
    conn.putheader("content-type", "application/x-ndjson")
    conn.putheader("transfer-encoding", "chunked")
    conn.endheaders()
    resp = conn.getresponse()  # the head comes before any line is sent
    assert resp.status == 200
    assert resp.getheader("content-type") == "application/x-ndjson"
    for i in range(10):
        conn.send(chunk(json.dumps(event(i)).encode() + b"\n"))
        ack = json.loads(resp.readline())
        assert ack == {"type": "ack", "from": i, "to": i, "accepted": 1, "duplicates": 0,
                       "cursor": i + 1}
    conn.send(b"0\r\n\r\n")  # the end of the body
    end = json.loads(resp.readline())
    assert (end["type"], end["lines"], end["accepted"], end["cursor"]) == ("end", 10, 10, 10)
    assert resp.readline() == b""
    conn.close()
    assert log_ids(server.base, "py") == [f"e{i}" for i in range(10)]


def test_websockets_publishes_and_a_refused_line_closes_with_1008(server):
    async def run():
        url = f"{server.ws_base}/v1/sessions/pyws/publish"
        async with websockets.connect(url) as ws:
            acks = []
            for i in range(5):
                await ws.send(json.dumps(event(i)))
                acks.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
            await ws.send('{"id": "bad", "type": "text.delta", "runId": 5}')
            err = json.loads(await asyncio.wait_for(ws.recv(), 10))
            try:
                await asyncio.wait_for(ws.recv(), 10)
            except websockets.ConnectionClosed as closed:
                code = closed.rcvd.code
            return acks, err, code

    acks, err, code = asyncio.run(run())
    assert [(a["from"], a["to"], a["cursor"]) for a in acks] == [(i, i, i + 1) for i in range(5)]
    assert (err["type"], err["index"], err["problem"]["status"]) == ("error", 5, 422)
    assert err["problem"]["code"] == "schema_mismatch"
    assert code == 1008
    assert log_ids(server.base, "pyws") == [f"e{i}" for i in range(5)]
