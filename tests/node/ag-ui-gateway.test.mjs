// Issue 15 item 3: `@ag-ui/client`'s own `HttpAgent` pointed at
// agent-projector's `POST /v1/sessions/{id}/ag-ui`, in front of an AG-UI
// agent (a Node server answering a `RunAgentInput` with events encoded by
// `@ag-ui/encoder`, as every AG-UI framework's endpoint does). The run goes
// through the session: a second client joining mid-run sees the same
// messages; the client leaving does not stop the run; a `cancel` control
// aborts the upstream request.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { EventType } from '@ag-ui/core';
import { EventEncoder } from '@ag-ui/encoder';
import { HttpAgent } from '@ag-ui/client';
import { startServer, snapshot } from './lib/server.mjs';
import { Follow, said } from './lib/ag-ui.mjs';

const WORDS = 'It is sunny in Oslo today , with a light breeze .'.split(' ');
let upstream;
let server;
/** Per run id: the gate the agent waits at after its first words, and whether its request was aborted. */
const runs = new Map();

before(async () => {
  // The AG-UI agent: answers each run with words, holding the second half
  // until its gate opens; then a MESSAGES_SNAPSHOT of the thread, as
  // LangGraph's adapter ends a run.
  upstream = createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    const input = JSON.parse(body);
    const r = { aborted: false };
    r.gate = new Promise((open) => { r.open = open; });
    runs.set(input.runId, r);
    res.on('close', () => { if (!res.writableFinished) r.aborted = true; });
    const enc = new EventEncoder();
    res.writeHead(200, { 'content-type': enc.getContentType() });
    const send = (e) => res.write(enc.encodeSSE(e));
    const mid = `answer-${input.runId}`;
    send({ type: EventType.RUN_STARTED, threadId: input.threadId, runId: input.runId });
    send({ type: EventType.TEXT_MESSAGE_START, messageId: mid, role: 'assistant' });
    for (const w of WORDS.slice(0, 5)) send({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: mid, delta: `${w} ` });
    await r.gate;
    if (r.aborted) return;
    for (const w of WORDS.slice(5)) send({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: mid, delta: `${w} ` });
    send({ type: EventType.TEXT_MESSAGE_END, messageId: mid });
    send({ type: EventType.MESSAGES_SNAPSHOT, messages: [...input.messages,
      { id: mid, role: 'assistant', content: WORDS.map((w) => `${w} `).join('') }] });
    send({ type: EventType.RUN_FINISHED, threadId: input.threadId, runId: input.runId });
    res.end();
  }).listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const { port } = upstream.address();
  server = await startServer([], {
    PROJECTOR_UPSTREAM__AG_UI_URL: `http://127.0.0.1:${port}/agent`,
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([`127.0.0.1:${port}`]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'ag-ui-gateway-test',
  });
});

after(async () => {
  await server?.stop();
  upstream?.close();
});

/** Wait until the session's snapshot satisfies `ok`. */
async function until(sid, ok) {
  for (let i = 0; i < 500; i++) {
    const s = await snapshot(server.base, sid);
    if (ok(s)) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`session ${sid} never got there`);
}
const streaming = (s) => s.state.messages.some((m) => m.role === 'assistant' && m.status === 'streaming');
const answer = WORDS.map((w) => `${w} `).join('');

function agent(sid, runId) {
  return new HttpAgent({
    url: `${server.base}/v1/sessions/${sid}/ag-ui`,
    threadId: sid,
    initialMessages: [{ id: `q-${runId}`, role: 'user', content: 'Weather in Oslo?' }],
  });
}

test('HttpAgent runs the agent through the session; a second client joining mid-run sees the same messages', async () => {
  const sid = `agui-gw-${process.pid}-1`;
  const a = agent(sid, 'r1');
  const running = a.runAgent({ runId: 'r1' });
  await until(sid, streaming);
  // A second client (a reload, another tab) joins the run in flight.
  const second = new Follow(server.base, sid, {
    onEvent: (e) => { if (e.type === EventType.STATE_SNAPSHOT) runs.get('r1').open(); },
  });
  await Promise.all([running, second.runAgent()]);
  assert.deepEqual(said(a.messages), [
    { id: 'q-r1', role: 'user', content: 'Weather in Oslo?' },
    { id: 'answer-r1', role: 'assistant', content: answer },
  ]);
  assert.deepEqual(said(second.messages), said(a.messages), 'both clients hold the same messages');
  const snap = await snapshot(server.base, sid);
  assert.deepEqual(snap.state.messages.map((m) => m.id), ['q-r1', 'answer-r1'], 'the user message first, told once');
  assert.equal(snap.state.runtime.status, 'completed');
  assert.equal(snap.state.runtime.runId, 'r1');
});

test('the client leaving does not stop the run; a cancel control aborts the upstream request', async () => {
  const sid = `agui-gw-${process.pid}-2`;
  const a = agent(sid, 'r2');
  const running = a.runAgent({ runId: 'r2' }).catch(() => {});
  await until(sid, streaming);
  a.abortRun();
  await running;
  runs.get('r2').open();
  const done = await until(sid, (s) => s.state.runtime.status === 'completed');
  assert.equal(done.state.messages.at(-1).parts.map((p) => p.text).join(''), answer);

  // A run that the user cancels: the upstream request is aborted.
  const b = agent(sid, 'r3');
  const next = b.runAgent({ runId: 'r3' });
  await until(sid, (s) => s.state.runtime.runId === 'r3' && streaming(s));
  const r = await fetch(`${server.base}/v1/sessions/${sid}/controls`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'cancel' }),
  });
  assert.equal(r.status, 202, await r.text());
  await next;
  const cancelled = await until(sid, (s) => s.state.runtime.status === 'cancelled');
  assert.equal(cancelled.state.messages.at(-1).status, 'aborted');
  for (let i = 0; i < 200 && !runs.get('r3').aborted; i++) await new Promise((res) => setTimeout(res, 10));
  assert.equal(runs.get('r3').aborted, true, 'the upstream request was aborted');
  runs.get('r3').open();
});
