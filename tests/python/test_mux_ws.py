"""Many sessions on one WebSocket (`/v1/streams/ws`), with Python's
`websockets`, a client nobody here wrote: subscribe and unsubscribe as it
goes; the connection dropped, a new one subscribes each session again from
the cursor of the last frame it read of it: every frame of every session
arrives once, in order."""

import asyncio
import json

import websockets

from conftest import post

SESSIONS = [f"py-mux-{i}" for i in range(5)]


def event(session, i):
    return {"id": f"{session}-{i}", "type": "text.delta", "runId": "r", "messageId": f"{session}-m",
            "payload": {"delta": f"{session}:{i} "}}


def post_all(base, start, end):
    for i in range(start, end):
        for s in SESSIONS:
            post(base, s, [event(s, i)])


async def recv(ws):
    return json.loads(await asyncio.wait_for(ws.recv(), 10))


def test_subscriptions_resume_each_session_from_its_cursor(server):
    post_all(server.base, 0, 2)
    seen = {s: [] for s in SESSIONS}
    positions = {}

    def note(f):
        if f.get("type") in ("snapshot", "delta"):
            positions[f["sessionId"]] = f"{f['epoch']}:{f['cursor']}" if f["type"] == "snapshot" \
                else f"{positions[f['sessionId']].split(':')[0]}:{f['cursor']}"
        if f.get("type") == "delta":
            seen[f["sessionId"]].append(f["cursor"])

    async def first_connection():
        async with websockets.connect(f"{server.ws_base}/v1/streams/ws") as ws:
            for s in SESSIONS:
                await ws.send(json.dumps({"type": "subscribe", "sessionId": s}))
            acks, snaps = set(), set()
            while len(snaps) < len(SESSIONS):
                f = await recv(ws)
                if f["type"] == "subscribed":
                    acks.add(f["sessionId"])
                elif f["type"] == "snapshot":
                    assert f["sessionId"] in acks, "subscribed comes before the session's first frame"
                    assert f["cursor"] == 2
                    snaps.add(f["sessionId"])
                note(f)
            # Unsubscribe one: its frames stop, the others go on.
            await ws.send(json.dumps({"type": "unsubscribe", "sessionId": SESSIONS[0]}))
            while True:
                f = await recv(ws)
                if f["type"] == "unsubscribed":
                    break
                note(f)
            post_all(server.base, 2, 4)
            while not all(seen[s] and seen[s][-1] == 4 for s in SESSIONS[1:]):
                f = await recv(ws)
                assert f["sessionId"] != SESSIONS[0], f
                note(f)
        # The connection is gone; the sessions move on meanwhile.
        post_all(server.base, 4, 7)

    async def second_connection():
        async with websockets.connect(f"{server.ws_base}/v1/streams/ws") as ws:
            for s in SESSIONS:
                await ws.send(json.dumps({"type": "subscribe", "sessionId": s, "cursor": positions[s]}))
            live = {}
            while len(live) < len(SESSIONS):
                f = await recv(ws)
                assert f["type"] in ("subscribed", "delta", "live"), f"a resumed session gets no snapshot: {f}"
                if f["type"] == "live":
                    # Once per session, right after what it had missed.
                    s = f["sessionId"]
                    assert s not in live, f
                    assert (f["cursor"], seen[s][-1]) == (7, 7), f
                    live[s] = f["cursor"]
                    continue
                assert f["sessionId"] not in live, f"history after the live frame: {f}"
                note(f)

    asyncio.run(first_connection())
    asyncio.run(second_connection())
    # The unsubscribed session got what it missed meanwhile on the second
    # connection; the others, part live and part there; each frame once.
    for s in SESSIONS:
        assert seen[s] == [3, 4, 5, 6, 7], s


def test_a_bad_subscription_is_answered_and_the_connection_stays(server):
    async def run():
        async with websockets.connect(f"{server.ws_base}/v1/streams/ws") as ws:
            await ws.send("not json")
            assert (await recv(ws))["code"] == "invalid_message"
            await ws.send(json.dumps({"type": "subscribe", "sessionId": "has space"}))
            f = await recv(ws)
            assert (f["type"], f["code"]) == ("error", "invalid_session_id")
            await ws.send(json.dumps({"type": "subscribe", "sessionId": "ok", "cursor": "x:y"}))
            assert (await recv(ws))["code"] == "invalid_cursor"
            await ws.send(json.dumps({"type": "subscribe", "sessionId": "ok"}))
            assert (await recv(ws)) == {"type": "subscribed", "sessionId": "ok"}
            assert (await recv(ws))["type"] == "snapshot"

    asyncio.run(run())
