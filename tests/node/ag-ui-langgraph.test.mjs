// Issue 15 item 3 with a real framework: `@ag-ui/client`'s `HttpAgent`
// pointed at agent-projector runs a LangGraph graph (LangChain's fake chat
// model, no network) served by the `ag-ui-langgraph` adapter's own FastAPI
// endpoint (tests/python/langgraph_agent.py, from the Python packages the
// test command installs into target/py). A second client joins the run in
// the middle (after the agent's first message, while it waits) and ends
// with the same messages.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { EventType } from '@ag-ui/core';
import { HttpAgent } from '@ag-ui/client';
import { ROOT, startServer, snapshot } from './lib/server.mjs';
import { Follow, said } from './lib/ag-ui.mjs';

const PYTHON = path.join(ROOT, 'target/py/bin/python');
const NO_PYTHON = `no ${PYTHON}: the test command installs the Python packages there first`;
let agentProc;
let agentBase;
let server;

before(async () => {
  if (!existsSync(PYTHON)) return;
  agentProc = spawn(PYTHON, [path.join(ROOT, 'tests/python/langgraph_agent.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
  agentBase = await new Promise((resolve, reject) => {
    createInterface({ input: agentProc.stdout }).on('line', (l) => {
      const m = l.match(/listening on (http:\/\/[0-9.:]+)/);
      if (m) resolve(m[1]);
    });
    agentProc.once('exit', (code) => reject(new Error(`the LangGraph agent exited with ${code}`)));
  });
  const port = new URL(agentBase).port;
  server = await startServer([], {
    PROJECTOR_UPSTREAM__AG_UI_URL: `${agentBase}/agent`,
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([`127.0.0.1:${port}`]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'langgraph-test',
  });
});

after(async () => {
  await server?.stop();
  agentProc?.kill();
});

test('HttpAgent runs a LangGraph agent through agent-projector; a client joining mid-run sees the same messages', async (t) => {
  if (!agentProc) return t.skip(NO_PYTHON);
  const sid = `langgraph-${process.pid}`;
  const a = new HttpAgent({
    url: `${server.base}/v1/sessions/${sid}/ag-ui`,
    threadId: sid,
    initialMessages: [{ id: 'u1', role: 'user', content: 'Weather in Oslo?' }],
  });
  const running = a.runAgent({ runId: 'run-1' });
  // The agent said its first message and waits: a second client joins.
  for (let i = 0; i < 1000; i++) {
    const s = await snapshot(server.base, sid);
    if (s.state.messages.some((m) => m.role === 'assistant' && m.status === 'complete')) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const second = new Follow(server.base, sid, {
    onEvent: (e) => { if (e.type === EventType.STATE_SNAPSHOT && !second.opened) second.opened = fetch(`${agentBase}/open`); },
  });
  await Promise.all([running, second.runAgent()]);
  const texts = a.messages.map((m) => [m.role, m.content]);
  assert.deepEqual(texts, [
    ['user', 'Weather in Oslo?'],
    ['assistant', 'Let me check the forecast.'],
    ['assistant', 'It is sunny in Oslo today.'],
  ]);
  assert.deepEqual(said(second.messages), said(a.messages), 'both clients hold the same messages');
  const snap = await snapshot(server.base, sid);
  assert.deepEqual(snap.state.messages.map((m) => m.id), a.messages.map((m) => m.id),
    'the session holds them in the same order, the user message first');
  assert.equal(snap.state.runtime.status, 'completed');
  assert.equal(snap.state.app.city, 'Oslo', 'the graph state is the session state');
});
