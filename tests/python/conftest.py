"""Start the real agent-projector binary for Python tests.

The binary is the one `cargo test` builds (target/debug/agent-projector);
set PROJECTOR_BIN to use another. A server is ready when it logs its
address; nothing here sleeps to wait for it.
"""

import os
import re
import subprocess
import threading
from pathlib import Path

import json
import urllib.request

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("PROJECTOR_BIN", ROOT / "target" / "debug" / "agent-projector"))
LISTENING = re.compile(r"listening on (http://[0-9.:]+)")


class Server:
    """One running server process; `base` is its http://host:port."""

    def __init__(self, args, env=None, timeout=20.0):
        store = [] if "--store" in args else ["--store", "memory"]
        listen = [] if "--listen" in args else ["--listen", "127.0.0.1:0"]
        cmd = [str(BIN), *store, *listen, *args]
        self.log = []
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NO_COLOR": "1", "RUST_LOG": "warn,agent_projector=info", **(env or {})},
            text=True,
        )
        found = threading.Event()
        self.base = None

        def pump():
            for line in self.proc.stdout:
                self.log.append(line)
                if self.base is None:
                    m = LISTENING.search(line)
                    if m:
                        self.base = m.group(1)
                        found.set()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(timeout) or self.base is None:
            self.stop()
            raise RuntimeError("server did not start:\n" + "".join(self.log))
        self.ws_base = self.base.replace("http://", "ws://", 1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def post(base, session, events):
    """POST events (an object or a list) to a session; the parsed reply."""
    req = urllib.request.Request(
        f"{base}/v1/sessions/{session}/events",
        data=json.dumps(events).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        return json.load(r)


@pytest.fixture
def start_server():
    """Factory: `start_server(*args, env=None)` starts a server; all stop at teardown."""
    started = []

    def start(*args, env=None):
        s = Server(list(args), env)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def server(start_server):
    """A server on the memory store."""
    return start_server()
