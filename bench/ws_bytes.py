"""Bytes on the wire for one page load of a mixed agent session: the snapshot
and a replay from cursor 0, over SSE (plain, gzip) and WebSocket (plain,
permessage-deflate), read by third-party clients (urllib, Python
`websockets`' sans-I/O protocol). Usage, against a running server:

    target/py/bin/python bench/ws_bytes.py http://127.0.0.1:8080 [facts]

It posts `facts` events (default 600) to a fresh session first."""

import json
import socket
import sys
import time
import urllib.request
from urllib.parse import urlparse

from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Opcode
from websockets.uri import parse_uri

BASE = sys.argv[1].rstrip("/") if len(sys.argv) > 1 else "http://127.0.0.1:8080"
FACTS = int(sys.argv[2]) if len(sys.argv) > 2 else 600
SESSION = f"bytes-{int(time.time() * 1000)}"
WORDS = "the plan reads the file then runs the tests and reports what failed and why".split()


def facts(n):
    """A run of turns: text deltas of a few words, reasoning, a tool call with
    JSON input and a result, now and then an artifact."""
    out, seq, turn = [], 0, 0
    while len(out) < n:
        turn += 1
        run = f"run-{turn}"
        def ev(kind, **kw):
            nonlocal seq
            seq += 1
            return {"id": f"e{seq}", "type": kind, "runId": run, "sequence": seq, **kw}
        out.append(ev("run.started"))
        for i in range(12):
            out.append(ev("reasoning.delta", payload={"delta": " ".join(WORDS[i % 7: i % 7 + 3]) + " "}))
        call = f"call-{turn}"
        out.append(ev("tool.started", toolCallId=call,
                      payload={"toolName": "search_code", "input": {"query": f"fn handler_{turn}", "path": "src/", "limit": 20}}))
        out.append(ev("tool.result", toolCallId=call,
                      payload={"summary": f"{turn % 5 + 1} matches", "output": {"matches": [
                          {"file": f"src/http/mod{j}.rs", "line": 10 * j + turn, "text": f"pub async fn handler_{turn}(State(st): State<AppState>)"}
                          for j in range(4)]}}))
        for i in range(40):
            out.append(ev("text.delta", payload={"delta": " ".join(WORDS[(i + turn) % 10: (i + turn) % 10 + 2]) + " "}))
        if turn % 3 == 0:
            out.append(ev("artifact.created", artifactId=f"a{turn}", payload={"title": f"Report {turn}", "kind": "markdown",
                                                        "content": "## Findings\n" + " ".join(WORDS) * 3}))
        out.append(ev("run.finished"))
    return out[:n]


def post(events):
    for i in range(0, len(events), 200):
        req = urllib.request.Request(f"{BASE}/v1/sessions/{SESSION}/events", data=json.dumps(events[i:i + 200]).encode(),
                                     headers={"content-type": "application/json"})
        urllib.request.urlopen(req).read()


def http_bytes(path, gz, until=None):
    """Body bytes of a GET as they come off the wire (an event stream is
    read until `until` events arrived, decoded)."""
    u = urlparse(BASE)
    s = socket.create_connection((u.hostname, u.port), timeout=20)
    enc = "Accept-Encoding: gzip\r\n" if gz else ""
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{enc}Connection: close\r\n\r\n".encode())
    raw = b""
    while True:
        d = s.recv(1 << 16)
        if not d:
            break
        raw += d
        if until is not None:
            head, _, body = raw.partition(b"\r\n\r\n")
            plain = decode_chunked(body)
            if b"content-encoding: gzip" in head.lower():
                import zlib
                plain = zlib.decompressobj(31).decompress(plain)
            if plain.count(b"\n\n") >= until:
                break
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return len(body)


def decode_chunked(body):
    out, i = b"", 0
    while True:
        j = body.find(b"\r\n", i)
        if j < 0:
            return out
        try:
            n = int(body[i:j], 16)
        except ValueError:
            return out
        if n == 0 or j + 2 + n > len(body):
            return out + body[j + 2:j + 2 + n]
        out += body[j + 2:j + 2 + n]
        i = j + 2 + n + 2


def ws_bytes(path, deflate, n):
    """Wire bytes (after the handshake) of the first `n` text messages, and
    the messages."""
    url = BASE.replace("http", "ws") + path
    ext = [ClientPerMessageDeflateFactory()] if deflate else None
    proto = ClientProtocol(parse_uri(url), extensions=ext, max_size=None)
    u = urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=20)
    proto.send_request(proto.connect())
    s.sendall(b"".join(proto.data_to_send()))
    texts, wire, handshake = [], 0, None
    while len(texts) < n:
        d = s.recv(1 << 16)
        assert d
        wire += len(d)
        proto.receive_data(d)
        for e in proto.events_received():
            if handshake is None and not hasattr(e, "opcode"):
                handshake = len(str(e.headers)) + 40
            if getattr(e, "opcode", None) == Opcode.TEXT:
                texts.append(e.data)
    s.close()
    assert [x.name for x in proto.extensions] == (["permessage-deflate"] if deflate else [])
    return wire, texts


def main():
    post(facts(FACTS))
    snap = f"/v1/sessions/{SESSION}/snapshot"
    rows = []
    plain = http_bytes(snap, False)
    rows.append(("GET /snapshot", plain, http_bytes(snap, True), "gzip"))
    # The WebSocket handshake's own bytes are left out: the snapshot message
    # alone, measured as (wire for snapshot + 1 frame) - (wire for 1 frame)
    # would be noisy; instead both sockets include their 101 response, which
    # differs by the extension header only.
    wp, tp = ws_bytes(f"/v1/sessions/{SESSION}/ws", False, 1)
    wz, tz = ws_bytes(f"/v1/sessions/{SESSION}/ws", True, 1)
    assert tp == tz
    rows.append(("WebSocket snapshot (with the 101 response)", wp, wz, "permessage-deflate"))
    sp = http_bytes(f"/v1/sessions/{SESSION}/stream?cursor=0", False, FACTS)
    sz = http_bytes(f"/v1/sessions/{SESSION}/stream?cursor=0", True, FACTS)
    rows.append((f"SSE replay of {FACTS} frames from cursor 0", sp, sz, "gzip"))
    wp, tp = ws_bytes(f"/v1/sessions/{SESSION}/ws?cursor=0", False, FACTS)
    wz, tz = ws_bytes(f"/v1/sessions/{SESSION}/ws?cursor=0", True, FACTS)
    assert tp == tz
    rows.append((f"WebSocket replay of {FACTS} frames from cursor 0", wp, wz, "permessage-deflate"))
    print(f"session {SESSION}: {FACTS} facts")
    print("| | plain | compressed | |")
    print("|---|---:|---:|---|")
    for name, a, b, how in rows:
        print(f"| {name} | {a:,} B | {b:,} B ({a / b:.1f}x) | {how} |")


main()
