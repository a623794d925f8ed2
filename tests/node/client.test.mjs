// The client library (clients/js) against the real server: one multiplexed
// connection rebuilds each session from frames, and after every scenario its
// state equals `GET /v1/sessions/{id}/snapshot`'s (less the fields frames
// cannot carry, lib/client.mjs NOT_IN_FRAMES). Controls reach a local
// runtime through the server's relay; error answers are typed errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { startServer, post, snapshot } from './lib/server.mjs';
import {
  T, allText, assertSameAsSnapshot, comparable, controlledFetch, conversation, eventMaker, startRuntime, workbench,
} from './lib/client.mjs';
import { ProjectorError, connect } from '../../clients/js/src/index.js';

let server;
let runtime;

before(async () => {
  runtime = await startRuntime();
  server = await startServer([], {
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([runtime.hostPort]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'client-test-secret',
  });
});

after(async () => {
  await server?.stop();
  await runtime?.close();
});

const fast = { initialMs: 20, maxMs: 200 };

test('one session: streamed text, tools, approvals and answers; the state equals the snapshot', async () => {
  const sid = `client-conv-${process.pid}`;
  const ev = eventMaker('c');
  const events = [
    { id: 'open', type: 'session.created', runId: 'run-1', turnId: 'turn-1', payload: { controlUrl: runtime.url } },
    ...conversation(ev, sid),
  ];
  // Half before the client connects (its snapshot), half while it listens (deltas), one by one.
  await post(server.base, sid, events.slice(0, 8));
  const conn = connect({ baseUrl: server.base, sessions: [sid], backoff: fast });
  const frames = [];
  conn.on('change', (c) => frames.push(c.frame));
  try {
    await conn.until(sid, (s) => s.messages.length > 0, { timeoutMs: T });
    assert.equal(frames[0].type, 'snapshot');
    assert.equal(frames[0].sessionId, sid);
    for (const e of events.slice(8)) await post(server.base, sid, e);
    let snap = await assertSameAsSnapshot(conn, server.base, sid, 'after the conversation');
    assert.ok(frames.slice(1).every((f) => f.type === 'delta'), 'live frames are deltas');
    assert.match(allText(snap.state), /far too long/, 'the final text won');
    assert.equal(snap.state.messages.filter((m) => m.role === 'assistant').length, 2, 'the teammate writes its own message');
    // Fields no chunk carries come with the frame: a message opened live
    // has its turn, run and agent from its `start` entry, a timeline entry
    // its source class from the delta's `timeline`.
    const live = conn.state(sid).messages.find((m) => m.createdCursor > 8);
    assert.equal(live.turnId, 'turn-1');
    assert.equal(live.runId, 'run-1');
    assert.equal(live.agentId, 'reviewer', 'the agent of a message comes with its start chunk');
    assert.ok(Object.keys(conn.state(sid).timeline.at(-1)).includes('sourceClass'));
    assert.equal(snap.state.timeline.at(-1).sourceClass, 'metric.changed');

    // An approval asked for a tool call: the tool part waits, the action is pending.
    await post(server.base, sid, [
      ev('tool.started', { toolCallId: 'call-rm', payload: { toolName: 'shell', input: { cmd: 'rm -rf target' } } }),
      ev('action.required', { actionId: 'ap-1', toolCallId: 'call-rm', title: 'Run rm -rf target?', payload: { actionType: 'approval' } }),
    ]);
    let st = await conn.until(sid, (s) => s.actions['ap-1']?.status === 'pending', { timeoutMs: T });
    const part = st.messages.flatMap((m) => m.parts).find((p) => p.toolCallId === 'call-rm');
    assert.equal(part.state, 'approval-requested');
    assert.deepEqual(part.approval, { id: 'ap-1', requestReason: 'Run rm -rf target?' });
    assert.equal(st.runtime.pendingActions, 1);
    const relayed = await conn.approve(sid, 'ap-1', { requestId: 'req-approve-1' });
    assert.equal(relayed.status, 'relayed');
    await runtime.relayed(1);
    assert.deepEqual(
      { kind: runtime.received[0].kind, actionId: runtime.received[0].actionId, decision: runtime.received[0].decision, requestId: runtime.received[0].requestId },
      { kind: 'action', actionId: 'ap-1', decision: 'approve', requestId: 'req-approve-1' });
    assert.equal(conn.state(sid).actions['ap-1'].status, 'pending', 'only the runtime resolves an action');
    await post(server.base, sid, [
      ev('action.resolved', { actionId: 'ap-1', toolCallId: 'call-rm', payload: { decision: 'approve' } }),
      ev('tool.result', { toolCallId: 'call-rm', payload: { summary: 'removed' } }),
    ]);
    await assertSameAsSnapshot(conn, server.base, sid, 'after an approval');

    // A rejection denies the tool call.
    await post(server.base, sid, [
      ev('tool.started', { toolCallId: 'call-push', payload: { toolName: 'git_push', input: { force: true } } }),
      ev('action.required', { actionId: 'ap-2', toolCallId: 'call-push', payload: { actionType: 'approval', question: 'Force-push?' } }),
    ]);
    await conn.until(sid, (s) => s.actions['ap-2']?.status === 'pending', { timeoutMs: T });
    await conn.reject(sid, 'ap-2');
    await runtime.relayed(2);
    assert.equal(runtime.received[1].decision, 'reject');
    assert.ok(runtime.received[1].requestId, 'a random requestId makes a retry safe');
    await post(server.base, sid, [ev('action.resolved', { actionId: 'ap-2', toolCallId: 'call-push', payload: { decision: 'reject' } })]);
    st = await conn.until(sid, (s) => s.actions['ap-2']?.status !== 'pending', { timeoutMs: T });
    assert.equal(st.messages.flatMap((m) => m.parts).find((p) => p.toolCallId === 'call-push').state, 'output-denied');
    await assertSameAsSnapshot(conn, server.base, sid, 'after a rejection');

    // A structured answer: checked by the server against the request's schema.
    await post(server.base, sid, [ev('action.required', { actionId: 'form-1', title: 'Deployment details', payload: {
      actionType: 'structured_input', question: 'Where should it run?',
      inputSchema: { type: 'object', required: ['region'], properties: { region: { enum: ['eu-west', 'us-east'] } } } } })]);
    await conn.until(sid, (s) => s.actions['form-1']?.status === 'pending', { timeoutMs: T });
    const refused = await conn.answer(sid, 'form-1', { region: 'mars' }).catch((e) => e);
    assert.ok(refused instanceof ProjectorError);
    assert.deepEqual([refused.status, refused.code], [422, 'invalid_answer']);
    assert.match(refused.detail, /schema/);
    assert.equal(refused.errors[0].path, '/answer/region');
    assert.equal(runtime.received.length, 2, 'nothing invalid reached the runtime');
    await conn.answer(sid, 'form-1', { region: 'eu-west' });
    await runtime.relayed(3);
    assert.deepEqual([runtime.received[2].decision, runtime.received[2].answer], ['answer', { region: 'eu-west' }]);

    // Run controls, and the typed errors of refused decisions.
    await conn.send(sid, 'Also check the docs build.');
    await conn.cancel(sid);
    await runtime.relayed(5);
    assert.deepEqual(runtime.received.slice(3).map((b) => [b.kind, b.type, b.message]),
      [['control', 'send', 'Also check the docs build.'], ['control', 'cancel', undefined]]);
    const unknown = await conn.approve(sid, 'nope').catch((e) => e);
    assert.deepEqual([unknown.name, unknown.status, unknown.code], ['ProjectorError', 404, 'unknown_action']);
    const resolved = await conn.approve(sid, 'ap-1').catch((e) => e);
    assert.deepEqual([resolved.status, resolved.code], [409, 'action_already_resolved']);

    await post(server.base, sid, [ev('action.resolved', { actionId: 'form-1', payload: { decision: 'answer' } }), ev('run.finished')]);
    snap = await assertSameAsSnapshot(conn, server.base, sid, 'at the end of the run');
    assert.equal(snap.state.runtime.status, 'completed');

    // A repair restores a teammate's message: its agent comes on the start entry.
    await post(server.base, sid, [ev('messages.snapshot', { payload: { messages: [
      { id: 'restored-1', role: 'assistant', agentId: 'helper', text: 'Restored from the runtime.', status: 'complete' }] } })]);
    snap = await assertSameAsSnapshot(conn, server.base, sid, 'after a repair');
    assert.equal(snap.state.messages.find((x) => x.id === 'restored-1').agentId, 'helper');
    assert.equal(conn.state(sid).messages.find((x) => x.id === 'restored-1').agentId, 'helper');
    assert.equal(conn.status, 'live');
  } finally {
    conn.close();
  }
  assert.equal(conn.status, 'closed');
});

test('several sessions on one connection, interleaved, each equal to its snapshot', async () => {
  // The third id holds a comma: the list carries it percent-encoded.
  const ids = ['a', 'b', 'c,d'].map((x) => `client-multi-${x}-${process.pid}`);
  const cf = controlledFetch();
  await post(server.base, ids[1], workbench().slice(0, 5));
  const conn = connect({ baseUrl: server.base, sessions: ids, fetch: cf.fetch, backoff: fast });
  try {
    await conn.until(ids[1], (s) => s.messages.length === 1, { timeoutMs: T });
    const evA = eventMaker('a');
    const conv = conversation(evA, ids[0]);
    const work = workbench().slice(5);
    const evC = eventMaker('c', { runId: 'rc', turnId: 'tc' });
    for (let i = 0; i < Math.max(conv.length, work.length); i++) {
      if (conv[i]) await post(server.base, ids[0], conv[i]);
      if (work[i]) await post(server.base, ids[1], work[i]);
      await post(server.base, ids[2], evC('text.delta', { payload: { delta: `c${i} ` } }));
    }
    for (const id of ids) await assertSameAsSnapshot(conn, server.base, id);
    assert.equal(cf.urls.length, 1, 'one connection for all three sessions');
    assert.equal(new URL(cf.urls[0]).search.split('sessions=')[1], ids.map(encodeURIComponent).join(','));
    assert.ok(conn.state(ids[1]).team.handoffs.length === 1 && conn.state(ids[1]).coding.blocks.length > 0);
  } finally {
    conn.close();
  }
});

test('for await over a connection yields each change once, in cursor order per session', async () => {
  const ids = [`client-iter-a-${process.pid}`, `client-iter-b-${process.pid}`];
  const conn = connect({ baseUrl: server.base, sessions: ids, backoff: fast });
  const seen = { [ids[0]]: [], [ids[1]]: [] };
  const reading = (async () => {
    for await (const change of conn) {
      seen[change.sessionId].push(`${change.frame.type}:${change.cursor}`);
      if (seen[ids[0]].length === 6 && seen[ids[1]].length === 6) break;
    }
  })();
  try {
    await conn.until(ids[0], () => true, { timeoutMs: T });
    await conn.until(ids[1], () => true, { timeoutMs: T });
    const ev = eventMaker('i');
    for (let i = 0; i < 5; i++) {
      await post(server.base, ids[i % 2], ev('text.delta', { payload: { delta: `x${i}` } }));
      await post(server.base, ids[(i + 1) % 2], ev('text.delta', { payload: { delta: `y${i}` } }));
    }
    await reading;
    for (const id of ids) {
      assert.deepEqual(seen[id], ['snapshot:0', 'delta:1', 'delta:2', 'delta:3', 'delta:4', 'delta:5']);
      await assertSameAsSnapshot(conn, server.base, id);
    }
  } finally {
    conn.close();
  }
  // A closed connection ends its iterators.
  const after = [];
  for await (const c of conn) after.push(c);
  assert.deepEqual(after, []);
});

test('a refused stream is a typed error and a failed status, not a retry loop', async () => {
  const conn = connect({ baseUrl: server.base, sessions: ['no spaces allowed'], backoff: fast });
  const errors = [];
  conn.on('error', (e) => errors.push(e));
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`status ${conn.status}`)), T);
      conn.on('status', (s) => { if (s === 'failed') { clearTimeout(timer); resolve(); } });
    });
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof ProjectorError);
    assert.deepEqual([errors[0].status, errors[0].code], [400, 'invalid_session_id']);
    assert.equal(conn.lastError, errors[0]);
  } finally {
    conn.close();
  }
});

test('the server serves every module of clients/js/src at /client/<file>.js, as it is', async () => {
  const dir = new URL('../../clients/js/src/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('.js'));
  assert.ok(files.includes('index.js') && files.includes('react.js'));
  for (const f of files) {
    const r = await fetch(`${server.base}/client/${f}`);
    assert.equal(r.status, 200, `/client/${f} is served`);
    assert.equal(r.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.equal(await r.text(), readFileSync(new URL(f, dir), 'utf8'), `/client/${f} is the source as it is`);
  }
  const missing = await fetch(`${server.base}/client/nope.js`);
  assert.equal(missing.status, 404);
});

test('past the snapshot window the client keeps the messages it saw arrive; the rest equals the snapshot', async () => {
  // A snapshot holds the 3 newest messages here (projection.snapshot_messages).
  const small = await startServer([], { PROJECTOR_PROJECTION__SNAPSHOT_MESSAGES: '3' });
  const sid = 'window';
  const turn = (n) => ({ id: `u${n}`, type: 'turn.submitted', turnId: `t${n}`, payload: { text: `question ${n}` } });
  await post(small.base, sid, [1, 2, 3, 4, 5].map(turn));
  const conn = connect({ baseUrl: small.base, sessions: [sid], backoff: fast });
  try {
    const first = await conn.until(sid, () => true, { timeoutMs: T });
    assert.deepEqual(first.history, { messages: 5, inSnapshot: 3, nextBefore: 'user-t3' });
    for (const n of [6, 7]) await post(small.base, sid, turn(n));
    const snap = await snapshot(small.base, sid);
    const st = await conn.until(sid, () => conn.cursor(sid) === snap.cursor, { timeoutMs: T });
    // The client holds the 3 of its snapshot and the 2 that came live; the
    // server's snapshot holds the newest 3. Both say 7 in all.
    assert.deepEqual(st.messages.map((m) => m.id), ['user-t3', 'user-t4', 'user-t5', 'user-t6', 'user-t7']);
    assert.deepEqual(snap.state.history, { messages: 7, inSnapshot: 3, nextBefore: 'user-t5' });
    assert.deepEqual(st.history, { messages: 7, inSnapshot: 5, nextBefore: 'user-t3' }, 'inSnapshot: what the client holds');
    const mine = comparable(st);
    const theirs = comparable(snap.state);
    assert.deepStrictEqual(mine.messages.slice(-3), theirs.messages, 'the window is the same');
    for (const s of [mine, theirs]) { delete s.messages; delete s.history; }
    assert.deepStrictEqual(mine, theirs, 'everything else is the same');
  } finally {
    conn.close();
    await small.stop();
  }
});
