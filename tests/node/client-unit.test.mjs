// The client library (clients/js) without a server: the SSE parser, the
// projection core's rules (old deltas ignored, reset clears, gaps found,
// states immutable), the backoff, that the generated schema types match the
// committed OpenAPI document, and that a typed usage passes `tsc --noEmit`
// through the package's exports map.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  SessionProjection, applyDelta, backoffDelay, connect, emptyState, normalizeState, readSSE,
} from '@agent-projector/client';
import { generate, OPENAPI, OUT } from '../../clients/js/scripts/gen-schema.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

/** A byte stream of `parts` (strings or byte arrays), one read each. */
function bytes(...parts) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(typeof p === 'string' ? enc.encode(p) : p);
      c.close();
    },
  });
}

async function collect(body) {
  const out = [];
  for await (const ev of readSSE(body)) out.push(ev);
  return out;
}

test('readSSE: CRLF, CR and LF lines, events split anywhere, comments, multi-line data, ids', async () => {
  const text = ': agent-projector\r\nretry: 2000\r\n\r\nid: e:1\nevent: delta\ndata: {"a":\ndata: 1}\n\r: keep-alive\r\rid: e:2\revent: snapshot\rdata: é✓\r\revent: reset\ndata: {}\n\ndata: cut';
  const whole = await collect(bytes(text));
  const expected = [
    { event: 'delta', data: '{"a":\n1}', id: 'e:1', retry: undefined },
    { event: 'snapshot', data: 'é✓', id: 'e:2', retry: undefined },
    { event: 'reset', data: '{}', id: undefined, retry: undefined },
  ];
  assert.deepEqual(whole, expected, 'the unterminated last event is dropped');
  // The same bytes one at a time (a multi-byte character split across reads).
  const raw = new TextEncoder().encode(text);
  const split = await collect(bytes(...Array.from(raw, (b) => new Uint8Array([b]))));
  assert.deepEqual(split, expected);
});

const snap = (cursor, state = emptyState(), epoch = 'e1') => ({ type: 'snapshot', cursor, epoch, state });
const delta = (cursor, chunks, eventClass = 'text.delta') => ({ type: 'delta', cursor, eventId: `ev${cursor}`, eventClass, chunks });
const m = (chunk, role) => ({ messageId: 'm1', ...(role ? { role } : {}), chunk });

test('projection: deltas at or below the cursor are ignored, a gap is reported, reset clears until the snapshot', () => {
  const p = new SessionProjection('s');
  assert.equal(p.apply(delta(1, [])), 'ignored', 'no state before a snapshot');
  assert.equal(p.position, '');
  assert.equal(p.apply(snap(0)), 'applied');
  assert.equal(p.position, 'e1:0');
  assert.equal(p.apply(delta(1, [m({ type: 'start', messageId: 'm1' }, 'assistant'), m({ type: 'text-start', id: 't' }), m({ type: 'text-delta', id: 't', delta: 'Hi' })])), 'applied');
  assert.equal(p.apply(delta(2, [m({ type: 'text-delta', id: 't', delta: ' there' })])), 'applied');
  assert.equal(p.apply(delta(2, [m({ type: 'text-delta', id: 't', delta: ' there' })])), 'ignored', 'a replayed frame');
  assert.equal(p.apply(delta(1, [m({ type: 'text-delta', id: 't', delta: 'Hi' })])), 'ignored');
  assert.equal(p.state.messages[0].parts[0].text, 'Hi there', 'no duplicated text');
  assert.deepEqual(p.state.messages[0].openParts, [['t', 0]]);
  assert.equal(p.apply(delta(4, [])), 'gap');
  assert.equal(p.cursor, 2, 'a gap applies nothing');
  assert.equal(p.apply({ type: 'reset', reason: 'session_deleted' }), 'applied');
  assert.deepEqual([p.state, p.position, p.resetReason], [null, '', 'session_deleted']);
  assert.equal(p.apply(delta(3, [])), 'ignored', 'nothing applies between reset and snapshot');
  assert.equal(p.apply(snap(0, undefined, 'e2')), 'applied');
  assert.deepEqual([p.position, p.resetReason, p.state.messages], ['e2:0', null, []]);
});

test('projection: a delta returns a new state and shares everything it did not change', () => {
  const s0 = normalizeState({
    runtime: { status: 'running', stale: false, pendingActions: 0 },
    messages: [
      { id: 'u', role: 'user', status: 'complete', createdCursor: 1, parts: [{ type: 'text', text: 'q', state: 'done' }] },
      { id: 'm1', role: 'assistant', status: 'streaming', createdCursor: 2, parts: [{ type: 'text', text: 'a', state: 'streaming' }], openParts: [['t', 0]] },
    ],
    history: { messages: 2, inSnapshot: 2 },
  });
  const frozen = JSON.stringify(s0);
  const s1 = applyDelta(s0, delta(3, [
    m({ type: 'text-delta', id: 't', delta: 'b' }),
    { messageId: null, chunk: { type: 'data-tools', id: 'c1', data: { toolCallId: 'c1', status: 'running' } } },
    { messageId: null, chunk: { type: 'data-future', id: 'x', data: { v: 1 } } },
  ]));
  assert.equal(JSON.stringify(s0), frozen, 'the old state is unchanged');
  assert.notEqual(s1, s0);
  assert.equal(s1.messages[1].parts[0].text, 'ab');
  assert.equal(s1.messages[0], s0.messages[0], 'an untouched message is the same object');
  assert.equal(s1.team, s0.team, 'an untouched surface is the same object');
  assert.notEqual(s1.tools, s0.tools);
  assert.equal('future' in s1 || 'extra' in s1, false, 'an unknown surface stays out of the state');
  // A new message moves the history counts with it.
  const s2 = applyDelta(s1, delta(4, [{ messageId: 'm2', role: 'assistant', chunk: { type: 'start', messageId: 'm2', messageMetadata: { agentId: 'rev' } } }]));
  assert.deepEqual(s2.history, { messages: 3, inSnapshot: 3 });
  assert.deepEqual([s2.messages[2].agentId, s2.messages[2].createdCursor, s2.messages[2].metadata], ['rev', 4, { agentId: 'rev' }]);
});

test('projection: reconciliation, approvals, denials, metadata merge, bounds and optional surfaces', () => {
  const p = new SessionProjection('s', { maxDiagnostics: 2, maxTimeline: 3 });
  p.apply(snap(0));
  p.apply(delta(1, [
    m({ type: 'start', messageId: 'm1', messageMetadata: { createdAt: 't0', usage: { in: 1 } } }, 'assistant'),
    m({ type: 'text-start', id: 't' }), m({ type: 'text-delta', id: 't', delta: 'draft' }), m({ type: 'text-end', id: 't' }),
    m({ type: 'tool-input-start', toolCallId: 'c', toolName: 'sh' }),
    m({ type: 'tool-input-available', toolCallId: 'c', toolName: 'sh', input: { x: 1 } }),
    m({ type: 'tool-approval-request', approvalId: 'a1', toolCallId: 'c', reason: 'ok?' }),
    m({ type: 'data-reconciliation', id: 't', data: { messageId: 'm1', partIndex: 0, text: 'final', streamedText: 'draft' }, transient: true }),
    m({ type: 'message-metadata', messageMetadata: { usage: { out: 2 } } }),
  ]));
  let msg = p.state.messages[0];
  assert.deepEqual(msg.parts[0], { type: 'text', text: 'final', state: 'done' });
  assert.deepEqual(msg.parts[1], { type: 'tool-sh', toolCallId: 'c', state: 'approval-requested', input: { x: 1 }, approval: { id: 'a1', requestReason: 'ok?' } });
  assert.deepEqual(msg.metadata, { createdAt: 't0', usage: { in: 1, out: 2 } });
  p.apply(delta(2, [m({ type: 'tool-output-denied', toolCallId: 'c' }), m({ type: 'error', errorText: 'boom' }), m({ type: 'finish', finishReason: 'error' })]));
  msg = p.state.messages[0];
  assert.deepEqual([msg.parts[1].state, msg.errorText, msg.status], ['output-denied', 'boom', 'failed']);
  const surface = (type, id, data) => ({ messageId: null, chunk: { type, id, data } });
  p.apply(delta(3, [
    surface('data-diagnostics', 'd1', { id: 'd1' }), surface('data-diagnostics', 'd2', { id: 'd2' }), surface('data-diagnostics', 'd3', { id: 'd3' }),
    surface('data-toolCatalog', 'toolCatalog', {}), surface('data-topology', 'topology', { topology: null }),
    surface('data-team', 'handoff:h1', { handoffId: 'h1', status: 'requested' }), surface('data-team', 'handoff:h1', { handoffId: 'h1', status: 'accepted' }),
    surface('data-coding', 'file:f1', { path: 'a.rs' }), surface('data-coding', 'block:1', { kind: 'diff' }),
  ]));
  p.apply(delta(4, [surface('data-topology', 'topology', { topology: 'solo_run' }), surface('data-toolCatalog', 'toolCatalog', { grep: {} })]));
  const st = p.state;
  assert.deepEqual(st.diagnostics.map((d) => d.id), ['d2', 'd3'], 'the oldest diagnostic leaves, as on the server');
  assert.deepEqual(st.timeline.map((e) => e.cursor), [2, 3, 4]);
  assert.deepEqual([st.topology, st.toolCatalog], ['solo_run', { grep: {} }]);
  assert.deepEqual(st.team.handoffs, [{ handoffId: 'h1', status: 'accepted' }]);
  assert.deepEqual([st.coding.files, st.coding.blocks], [{ f1: { path: 'a.rs' } }, [{ kind: 'diff', blockId: 'block:1' }]]);
  assert.deepEqual(p.extra, {});
});

test('backoff: exponential, capped, jittered down by at most its share', () => {
  const b = { initialMs: 100, maxMs: 1000, factor: 2, jitter: 0.5 };
  for (let attempt = 0; attempt < 8; attempt++) {
    const full = Math.min(1000, 100 * 2 ** attempt);
    for (let i = 0; i < 20; i++) {
      const d = backoffDelay(attempt, b);
      assert.ok(d <= full && d >= full / 2, `attempt ${attempt}: ${d}`);
    }
  }
  assert.equal(backoffDelay(3, (n) => n * 10), 30);
});

test('schema.d.ts is what scripts/gen-schema.mjs makes of openapi/openapi.json', () => {
  const fresh = generate(JSON.parse(readFileSync(OPENAPI, 'utf8')));
  assert.equal(readFileSync(OUT, 'utf8'), fresh, 'run `node scripts/gen-schema.mjs` in clients/js');
  assert.match(fresh, /export type DeltaFrame = \{/);
  assert.match(fresh, /export type Frame = SnapshotFrame \| DeltaFrame \| ResetFrame \| LiveFrame;/);
});

test('a typed usage of the package passes tsc --noEmit (exports map, types conditions, strict)', () => {
  const tsc = path.join(here, 'node_modules/.bin/tsc');
  try {
    execFileSync(tsc, ['-p', path.join(here, 'client-types/tsconfig.json')], { encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`);
  }
});

test('a stream that goes silent past idleTimeoutMs is dropped and opened again; heartbeats keep it open', async () => {
  // A stand-in for a half-open connection: the first two requests get the
  // SSE head and then nothing; the third gets a heartbeat comment every 20 ms.
  const requests = [];
  let beats = 0;
  let onBeat = () => {};
  const timers = [];
  const srv = createServer((req, res) => {
    requests.push(req.url);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': hello\n\n');
    if (requests.length >= 3) {
      timers.push(setInterval(() => { res.write(': keep-alive\n\n'); beats++; onBeat(); }, 20));
    }
  }).listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const conn = connect({ baseUrl: `http://127.0.0.1:${srv.address().port}`, sessions: ['s'],
    idleTimeoutMs: 400, backoff: { initialMs: 10, maxMs: 20 } });
  const errors = [];
  conn.on('error', (e) => errors.push(e));
  try {
    await new Promise((resolve) => { onBeat = () => { if (beats >= 40) resolve(); }; });
    // 40 heartbeats (800 ms) on the third connection: twice the idle timeout.
    assert.equal(requests.length, 3, 'heartbeats keep the connection');
    assert.equal(conn.status, 'catching-up', 'no live frame from this stand-in');
    assert.equal(errors.length, 2);
    assert.ok(errors.every((e) => e.code === 'network_error' && /idleTimeoutMs/.test(e.detail)), errors.map((e) => e.detail).join());
  } finally {
    conn.close();
    for (const t of timers) clearInterval(t);
    srv.closeAllConnections();
    srv.close();
  }
});

test("a connection is 'catching-up' while it reads history and 'live' once every session said so", async () => {
  // A stand-in that sends what the test says, when it says.
  let res = null;
  const srv = createServer((req, r) => {
    r.writeHead(200, { 'content-type': 'text/event-stream' });
    r.write(': hi\n\n');
    res = r;
  }).listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const send = (event, data, id) => res.write(`${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const until = async (ok) => { while (!ok()) await new Promise((r) => setTimeout(r, 5)); };
  const state = { sessionId: 'a', messages: [], timeline: [], runtime: { status: 'idle' } };
  const conn = connect({ baseUrl: `http://127.0.0.1:${srv.address().port}`, sessions: ['a', 'b'] });
  const statuses = [];
  const lives = [];
  conn.on('status', (s) => statuses.push(s));
  conn.on('live', (l) => lives.push(l));
  try {
    await until(() => res && conn.status === 'catching-up');
    send('snapshot', { sessionId: 'a', type: 'snapshot', cursor: 3, epoch: 'e', state }, 'e:3,');
    send('snapshot', { sessionId: 'b', type: 'snapshot', cursor: 1, epoch: 'f', state: { ...state, sessionId: 'b' } }, 'e:3,f:1');
    send('live', { sessionId: 'a', type: 'live', cursor: 3 });
    await until(() => lives.length === 1);
    assert.equal(conn.status, 'catching-up', 'b is still reading its history');
    assert.deepEqual([conn.isLive('a'), conn.isLive('b')], [true, false]);
    send('live', { sessionId: 'b', type: 'live', cursor: 1 });
    await until(() => lives.length === 2);
    assert.deepEqual(lives, [{ sessionId: 'a', cursor: 3 }, { sessionId: 'b', cursor: 1 }]);
    assert.deepEqual(statuses, ['connecting', 'catching-up', 'live']);
    // The live frame moves no position.
    assert.deepEqual([conn.cursor('a'), conn.cursor('b')], [3, 1]);
  } finally {
    conn.close();
    srv.closeAllConnections();
    srv.close();
  }
});
