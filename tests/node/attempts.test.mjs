// Issue 35 item 4: a step tried again replaces its earlier try. Events with
// `stepId` and `attemptId`; the client library following live applies the
// transient `data-superseded` chunk and stays equal to the snapshot after
// every event; a client of the AI SDK stream that comes later (the real
// `ai` reader) never sees the earlier try; the live AI SDK stream carries
// the announcement as a transient data chunk `ai`'s schema accepts. An
// `@ag-ui/client` agent following live gets one MESSAGES_SNAPSHOT that
// takes the first try back, and ends with what a later client holds.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from 'ai';
import { startServer, post, plain } from './lib/server.mjs';
import { assertSameAsSnapshot } from './lib/client.mjs';
import { connect } from '../../clients/js/src/index.js';
import { EventType } from '@ag-ui/core';
import { Follow, said } from './lib/ag-ui.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const sid = `attempts-${process.pid}`;
const ev = (n, type, step, attempt, extra = {}) => ({
  id: `${sid}-${n}`, type, runId: 'r1', turnId: 't1', messageId: 'm1', sequence: n,
  ...(step ? { stepId: step, attemptId: attempt } : {}), ...extra,
});
const events = [
  ev(1, 'run.started'),
  ev(2, 'text.delta', 's1', 'a1', { payload: { delta: 'Planning. ' } }),
  ev(3, 'text.delta', 's2', 'a1', { payload: { delta: 'First try of step two' } }),
  ev(4, 'tool.started', 's2', 'a1', { toolCallId: 'c1', payload: { toolName: 'fetch', input: { url: 'a' } } }),
  ev(5, 'text.delta', 's2', 'a2', { payload: { delta: 'Second try' } }),
  ev(6, 'tool.started', 's2', 'a2', { toolCallId: 'c2', payload: { toolName: 'fetch', input: { url: 'b' } } }),
  ev(7, 'tool.result', 's2', 'a2', { toolCallId: 'c2', payload: { summary: '200 OK' } }),
  ev(8, 'run.finished'),
];

function chunks(body) {
  return parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).pipeThrough(new TransformStream({
    transform(result, c) {
      if (!result.success) throw result.error;
      c.enqueue(result.value);
    },
  }));
}

test('a step tried again shows only its last try, live in the client library and to a later AI SDK reader', async () => {
  await post(server.base, sid, events.slice(0, 2));
  const conn = connect({ baseUrl: server.base, sessions: [sid] });
  // The AI SDK stream of the message, live from here.
  const live = await fetch(`${server.base}/v1/sessions/${sid}/messages/m1/ui-stream`);
  try {
    await assertSameAsSnapshot(conn, server.base, sid, 'before');
    for (const [i, e] of events.slice(2).entries()) {
      await post(server.base, sid, e);
      await assertSameAsSnapshot(conn, server.base, sid, `after event ${i + 3}`);
    }
    const m = conn.state(sid).messages.find((x) => x.id === 'm1');
    assert.deepEqual(m.parts.map((p) => p.type), ['text', 'text', 'tool-fetch']);
    assert.deepEqual(m.parts.filter((p) => p.type === 'text').map((p) => p.text), ['Planning. ', 'Second try']);
    assert.equal(m.parts[2].toolCallId, 'c2');
    assert.equal(conn.state(sid).tools.c1.status, 'cancelled');
  } finally {
    conn.close();
  }
  // The live AI SDK stream: every chunk valid, the announcement among them.
  const seen = [];
  for await (const c of chunks(live.body)) seen.push(c);
  const sup = seen.filter((c) => c.type === 'data-superseded');
  assert.equal(sup.length, 1);
  const { parts, ...announced } = sup[0].data;
  assert.deepEqual(announced, { messageId: 'm1', fromPart: 1, stepId: 's2', attemptId: 'a2', previousAttemptId: 'a1' });
  // The parts that stand (what the AG-UI and Umo views send again).
  assert.deepEqual(parts.map((p) => [p.type, p.text, p.state]), [['text', 'Planning. ', 'done']]);
  assert.equal(sup[0].transient, true);
  // A reader that comes later builds the message as it stands.
  const r = await fetch(`${server.base}/v1/sessions/${sid}/messages/m1/ui-stream`);
  let last;
  for await (const msg of readUIMessageStream({ stream: chunks(r.body), terminateOnError: true })) last = msg;
  const snap = await (await fetch(`${server.base}/v1/sessions/${sid}/snapshot`)).json();
  assert.deepEqual(plain(last).parts, snap.state.messages.find((x) => x.id === 'm1').parts);
  assert.ok(!JSON.stringify(last).includes('First try'));
});

test('an ingested AI SDK stream that starts its message again after an abort shows only the new try', async () => {
  const chat = `attempts-ui-${process.pid}`;
  const sse = (chunks) => chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n';
  const body = sse([
    { type: 'start', messageId: 'a1' },
    { type: 'text-start', id: 't1' },
    { type: 'text-delta', id: 't1', delta: 'First try, cut short' },
    { type: 'tool-input-available', toolCallId: 'k1', toolName: 'search', input: { q: 'x' } },
    { type: 'abort', reason: 'the model timed out' },
    // The producer tries the same message again.
    { type: 'start', messageId: 'a1' },
    { type: 'text-start', id: 't2' },
    { type: 'text-delta', id: 't2', delta: 'Second try.' },
    { type: 'text-end', id: 't2' },
    { type: 'finish' },
  ]);
  const r = await fetch(`${server.base}/v1/sessions/${chat}/events`, { method: 'POST', headers: { 'content-type': 'text/event-stream' }, body });
  assert.equal(r.status, 200, await r.clone().text());
  const snap = await (await fetch(`${server.base}/v1/sessions/${chat}/snapshot`)).json();
  const m = snap.state.messages.find((x) => x.id === 'a1');
  assert.deepEqual(m.parts, [{ type: 'text', text: 'Second try.', state: 'done' }]);
  assert.equal(m.status, 'complete');
  assert.equal(snap.state.runtime.status, 'completed');
  assert.equal(snap.state.tools.k1.status, 'cancelled');
  // The same stream with no second try still ends aborted.
  const cut = `attempts-ui-cut-${process.pid}`;
  const r2 = await fetch(`${server.base}/v1/sessions/${cut}/events`, {
    method: 'POST', headers: { 'content-type': 'text/event-stream' },
    body: sse([{ type: 'start', messageId: 'a2' }, { type: 'text-start', id: 't1' }, { type: 'text-delta', id: 't1', delta: 'Only try' }, { type: 'abort' }]),
  });
  assert.equal(r2.status, 200);
  const snap2 = await (await fetch(`${server.base}/v1/sessions/${cut}/snapshot`)).json();
  assert.equal(snap2.state.messages.find((x) => x.id === 'a2').status, 'aborted');
  assert.equal(snap2.state.runtime.status, 'cancelled');
});

test('an AG-UI client following live holds only the last try, as a client that joins later does', async () => {
  const id = `${sid}-agui`;
  const mine = (e) => ({ ...e, id: `${id}-${e.id}` });
  // The client follows from the start: the empty session's closed run first.
  let ready;
  const joined = new Promise((r) => { ready = r; });
  const live = new Follow(server.base, id, {
    runId: 'r1',
    onEvent: (e) => { if (e.type === EventType.RUN_FINISHED && e.runId !== 'r1') ready(); },
  });
  const following = live.runAgent();
  await joined;
  for (const e of events) await post(server.base, id, mine(e));
  await following;
  // One MESSAGES_SNAPSHOT mid-run took the first try back.
  const snaps = live.seen.filter((e) => e.type === EventType.MESSAGES_SNAPSHOT);
  assert.equal(snaps.length, 2, 'the join and the retry');
  const later = new Follow(server.base, id);
  await later.runAgent();
  const text = JSON.stringify(live.messages);
  assert.ok(!text.includes('First try') && !text.includes('"c1"'), text);
  // The same messages; the new try's text segment is numbered after the
  // dropped one on the live connection, so compare without ids.
  const noIds = (ms) => said(ms).map(({ id: _, ...rest }) => rest);
  assert.deepEqual(noIds(live.messages), noIds(later.messages));
  assert.deepEqual(noIds(later.messages).map((m) => m.content ?? null), ['Planning. ', 'Second try', '{"summary":"200 OK","refs":[]}']);
});
