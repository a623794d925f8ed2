// Issue 36 item 4: the streaming ingest (`/v1/sessions/{id}/publish`) from
// the clients a TypeScript runtime has at hand, nobody here wrote them:
// Node's own `fetch` (undici) with a ReadableStream body (`duplex: 'half'`)
// reads each ack while its body is still open, and the `ws` package
// publishes over the socket (acks; a refused line is an `error`, then a
// close 1008). The session's log then holds exactly what was acknowledged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer } from './lib/server.mjs';

const line = (id) =>
  JSON.stringify({ id, type: 'text.delta', runId: 'r', messageId: 'm', payload: { delta: `${id} ` } }) + '\n';

async function logged(base, session) {
  const r = await fetch(`${base}/v1/sessions/${session}/events?limit=1000`);
  assert.equal(r.status, 200);
  return (await r.json()).events.map((e) => e.event.id);
}

test('fetch streams a publish body and reads each ack before the next line', async (t) => {
  const srv = await startServer();
  t.after(() => srv.stop());
  const enc = new TextEncoder();
  let push;
  let close;
  const body = new ReadableStream({
    start(c) {
      push = (s) => c.enqueue(enc.encode(s));
      close = () => c.close();
    },
  });
  push(line('f0'));
  // The answer's head comes while the body is open.
  const res = await fetch(`${srv.base}/v1/sessions/fetch/publish`, {
    method: 'POST',
    body,
    duplex: 'half',
    headers: { 'content-type': 'application/x-ndjson' },
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/x-ndjson');
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  const next = async () => {
    for (;;) {
      const i = buf.indexOf('\n');
      if (i >= 0) {
        const l = buf.slice(0, i);
        buf = buf.slice(i + 1);
        return JSON.parse(l);
      }
      const { value, done } = await reader.read();
      if (done) return null;
      buf += value;
    }
  };
  for (let i = 0; i < 10; i++) {
    if (i > 0) push(line(`f${i}`));
    assert.deepEqual(await next(), { type: 'ack', from: i, to: i, accepted: 1, duplicates: 0, cursor: i + 1 });
  }
  close();
  const end = await next();
  assert.equal(end.type, 'end');
  assert.equal(end.lines, 10);
  assert.equal(await next(), null);
  assert.deepEqual(await logged(srv.base, 'fetch'), Array.from({ length: 10 }, (_, i) => `f${i}`));
});

test('the ws package publishes over the socket; a refused line closes it with 1008', async (t) => {
  const srv = await startServer();
  t.after(() => srv.stop());
  const ws = new WebSocket(`${srv.base.replace('http', 'ws')}/v1/sessions/wsp/publish`);
  const answers = [];
  let wake = () => {};
  ws.on('message', (data) => {
    answers.push(JSON.parse(String(data)));
    wake();
  });
  const closed = once(ws, 'close');
  await once(ws, 'open');
  const answer = async (n) => {
    while (answers.length < n) await new Promise((r) => (wake = r));
    return answers[n - 1];
  };
  for (let i = 0; i < 5; i++) {
    ws.send(line(`w${i}`));
    const ack = await answer(i + 1);
    assert.deepEqual([ack.type, ack.from, ack.to, ack.cursor], ['ack', i, i, i + 1]);
  }
  ws.send('{"id": "bad", "type": "text.delta", "runId": 7}');
  const err = await answer(6);
  assert.deepEqual([err.type, err.index, err.problem.status, err.problem.code], ['error', 5, 422, 'schema_mismatch']);
  const [code] = await closed;
  assert.equal(code, 1008);
  assert.deepEqual(await logged(srv.base, 'wsp'), ['w0', 'w1', 'w2', 'w3', 'w4']);
});
