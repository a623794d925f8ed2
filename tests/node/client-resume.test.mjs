// The client library (clients/js) across everything that breaks a stream:
// a cut connection (each session resumes from its own cursor, no gap, no
// duplicate), a durable server restarting (the same epochs resume), a memory
// server restarting (epoch_mismatch: reset + the new log), a deleted session
// (session_deleted: reset + its next life), and sessions added to and
// removed from a live connection. After each, the client's state equals the
// snapshot's (less lib/client.mjs NOT_IN_FRAMES).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, post } from './lib/server.mjs';
import { T, allText, assertSameAsSnapshot, controlledFetch, conversation, eventMaker } from './lib/client.mjs';
import { connect, parsePositions } from '../../clients/js/src/index.js';

const fast = { initialMs: 20, maxMs: 200 };

/** Record each session's frames as `type:cursor`, and which connection (request number) brought them. */
function recorder(conn, cf) {
  const log = {};
  conn.on('change', (c) => {
    (log[c.sessionId] ??= []).push({ f: `${c.frame.type}:${c.frame.cursor ?? c.frame.reason}`, req: cf ? cf.urls.length : 0 });
  });
  return log;
}

test('a cut connection resumes each session from its own cursor: no gap, no duplicate', async () => {
  const server = await startServer();
  const ids = [`cut-a-${process.pid}`, `cut-b-${process.pid}`, `cut-c-${process.pid}`];
  const cf = controlledFetch();
  const ev = eventMaker('k');
  await post(server.base, ids[0], conversation(ev, ids[0]).slice(0, 6));
  const conn = connect({ baseUrl: server.base, sessions: ids, fetch: cf.fetch, backoff: fast });
  const log = recorder(conn, cf);
  try {
    await conn.until(ids[0], (s) => s.messages.length === 2, { timeoutMs: T });
    await post(server.base, ids[1], ev('text.delta', { payload: { delta: 'before the cut' } }));
    await conn.until(ids[1], () => conn.cursor(ids[1]) === 1, { timeoutMs: T });
    // ids[2] has no events: its position is `<epoch>:0` after its snapshot.
    await conn.until(ids[2], () => true, { timeoutMs: T });
    const held = ids.map((id) => conn.projection(id).position);
    assert.ok(held.every((p) => /^[0-9a-f]+:\d+$/.test(p)), held.join(','));

    // The network goes down mid-stream; events keep coming meanwhile.
    cf.hold();
    cf.cut();
    await cf.requests(2);
    assert.equal(conn.status, 'reconnecting');
    const rest = conversation(ev, ids[0]).slice(6);
    for (const e of rest.slice(0, 5)) await post(server.base, ids[0], e);
    await post(server.base, ids[1], ev('text.delta', { payload: { delta: ' while cut' } }));
    await post(server.base, ids[2], ev('text.delta', { payload: { delta: 'first words' } }));
    cf.release();

    // The reconnection names every session's position, in order.
    const url = new URL(cf.urls[1]);
    assert.equal(url.searchParams.get('sessions'), ids.join(','));
    assert.deepEqual(parsePositions(url.searchParams.get('cursor')), held);
    for (const e of rest.slice(5)) await post(server.base, ids[0], e);
    for (const id of ids) await assertSameAsSnapshot(conn, server.base, id, `${id} after the cut`);
    // After the cut, each session continued with deltas from its own cursor + 1.
    for (const id of ids) {
      const after = log[id].filter((x) => x.req === 2).map((x) => x.f);
      const at = Number(held[ids.indexOf(id)].split(':')[1]);
      assert.ok(after.length > 0, `${id} got frames after the cut`);
      assert.deepEqual(after, after.map((_, i) => `delta:${at + 1 + i}`), `${id}: resumed, no snapshot, gapless`);
    }
    assert.equal(allText(conn.state(ids[1])), 'before the cut while cut', 'no duplicated text');
  } finally {
    conn.close();
    await server.stop();
  }
});

test('a durable server restarts: the client resumes the same epochs; a memory server restarts: reset and the new log', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'client-durable-'));
  let server = await startServer(['--store', 'embedded', '--data-dir', dir]);
  const port = new URL(server.base).port;
  const ids = [`dur-a-${process.pid}`, `dur-b-${process.pid}`];
  const ev = eventMaker('d');
  await post(server.base, ids[0], conversation(ev, ids[0]).slice(0, 5));
  await post(server.base, ids[1], ev('text.delta', { payload: { delta: 'one' } }));
  const conn = connect({ baseUrl: server.base, sessions: ids, backoff: fast });
  const statuses = [];
  conn.on('status', (s) => statuses.push(s));
  const log = recorder(conn);
  try {
    for (const id of ids) await assertSameAsSnapshot(conn, server.base, id);
    const epochs = ids.map((id) => conn.projection(id).epoch);
    await server.stop();
    server = await startServer(['--store', 'embedded', '--data-dir', dir, '--listen', `127.0.0.1:${port}`]);
    await post(server.base, ids[0], conversation(ev, ids[0]).slice(5, 12));
    await post(server.base, ids[1], ev('text.delta', { payload: { delta: ' two' } }));
    for (const id of ids) await assertSameAsSnapshot(conn, server.base, id, `${id} after a durable restart`);
    assert.deepEqual(ids.map((id) => conn.projection(id).epoch), epochs, 'the same logs');
    for (const id of ids) {
      assert.equal(log[id].filter((x) => x.f.startsWith('snapshot')).length, 1, `${id}: resumed without a second snapshot`);
    }
    assert.ok(statuses.includes('reconnecting') && statuses.at(-1) === 'live', statuses.join(' '));
    assert.equal(allText(conn.state(ids[1])), 'one two');

    // The same port, a memory store: new logs under the same ids.
    await server.stop();
    server = await startServer(['--listen', `127.0.0.1:${port}`]);
    await post(server.base, ids[0], { id: 'n1', type: 'text.delta', payload: { delta: 'a new life' } });
    for (const id of ids) await assertSameAsSnapshot(conn, server.base, id, `${id} after a memory restart`);
    for (const id of ids) assert.ok(log[id].some((x) => x.f === 'reset:epoch_mismatch'), `${id} was reset`);
    assert.equal(allText(conn.state(ids[0])), 'a new life', 'nothing of the old log');
    assert.equal(conn.state(ids[1]).messages.length, 0);
  } finally {
    conn.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a deleted session: reset session_deleted clears the state until its snapshot, then its next life', async () => {
  const server = await startServer();
  const ids = [`del-a-${process.pid}`, `del-b-${process.pid}`];
  const ev = eventMaker('x');
  await post(server.base, ids[0], conversation(ev, ids[0]).slice(0, 9));
  await post(server.base, ids[1], ev('text.delta', { payload: { delta: 'bystander' } }));
  const conn = connect({ baseUrl: server.base, sessions: ids, backoff: fast });
  const changes = [];
  conn.on('change', (c) => changes.push(c));
  try {
    for (const id of ids) await assertSameAsSnapshot(conn, server.base, id);
    const oldEpoch = conn.projection(ids[0]).epoch;
    const r = await fetch(`${server.base}/v1/sessions/${ids[0]}`, { method: 'DELETE' });
    assert.equal(r.status, 200);
    await conn.until(ids[0], (s) => s.messages.length === 0, { timeoutMs: T });
    const mine = changes.filter((c) => c.sessionId === ids[0]);
    const reset = mine.findIndex((c) => c.frame.type === 'reset');
    assert.equal(mine[reset].frame.reason, 'session_deleted');
    assert.equal(mine[reset].state, null, 'cleared until the snapshot');
    assert.equal(mine[reset + 1].frame.type, 'snapshot');
    await assertSameAsSnapshot(conn, server.base, ids[0], 'the tombstone');
    await post(server.base, ids[0], [ev('turn.submitted', { payload: { text: 'Start over' } }), ev('text.delta', { payload: { delta: 'Fresh.' } })]);
    const snap = await assertSameAsSnapshot(conn, server.base, ids[0], 'the next life');
    assert.notEqual(snap.epoch, oldEpoch);
    assert.equal(allText(conn.state(ids[0])), 'Start over|Fresh.');
    await assertSameAsSnapshot(conn, server.base, ids[1], 'the bystander');
    assert.ok(!changes.some((c) => c.sessionId === ids[1] && c.frame.type === 'reset'), 'the other session is untouched');
  } finally {
    conn.close();
    await server.stop();
  }
});

test('add and remove sessions on a live connection: the others resume from their cursors', async () => {
  const server = await startServer();
  const [a, b, c] = ['a', 'b', 'c'].map((x) => `live-${x}-${process.pid}`);
  const cf = controlledFetch();
  const ev = eventMaker('l');
  await post(server.base, a, conversation(ev, a).slice(0, 4));
  await post(server.base, b, ev('text.delta', { payload: { delta: 'b before' } }));
  const conn = connect({ baseUrl: server.base, sessions: [a], fetch: cf.fetch, backoff: fast });
  const log = recorder(conn, cf);
  const lists = [];
  conn.on('sessions', (l) => lists.push(l));
  try {
    await assertSameAsSnapshot(conn, server.base, a);
    const posA = conn.projection(a).position;
    conn.add(b);
    conn.add(b); // already there: nothing happens
    await cf.requests(2);
    const url = new URL(cf.urls[1]);
    assert.equal(url.searchParams.get('sessions'), `${a},${b}`);
    assert.equal(url.searchParams.get('cursor'), `${posA},`, 'a resumes, b starts with a snapshot');
    await post(server.base, a, conversation(ev, a).slice(4, 8));
    await post(server.base, b, ev('text.delta', { payload: { delta: ' b after' } }));
    await assertSameAsSnapshot(conn, server.base, a, 'a after add');
    await assertSameAsSnapshot(conn, server.base, b, 'b after add');
    assert.ok(log[a].filter((x) => x.req === 2).every((x) => x.f.startsWith('delta')), 'a was not sent again');
    assert.equal(log[b][0].f, 'snapshot:1');

    conn.add(c);
    await cf.requests(3);
    await post(server.base, c, ev('text.delta', { payload: { delta: 'c' } }));
    await assertSameAsSnapshot(conn, server.base, c);
    const posB = conn.projection(b).position;
    const posC = conn.projection(c).position;
    conn.remove(a);
    await cf.requests(4);
    const url4 = new URL(cf.urls[3]);
    assert.equal(url4.searchParams.get('sessions'), `${b},${c}`);
    assert.equal(url4.searchParams.get('cursor'), `${posB},${posC}`);
    assert.equal(conn.state(a), null);
    assert.deepEqual(conn.sessions, [b, c]);
    assert.deepEqual(lists, [[a, b], [a, b, c], [b, c]]);
    const before = log[a].length;
    await post(server.base, a, conversation(ev, a).slice(8, 10));
    await post(server.base, b, ev('text.delta', { payload: { delta: ' last' } }));
    await assertSameAsSnapshot(conn, server.base, b, 'b after remove');
    await assertSameAsSnapshot(conn, server.base, c, 'c after remove');
    assert.equal(log[a].length, before, 'a removed session gets no frames');
    assert.equal(allText(conn.state(b)), 'b before b after last');
  } finally {
    conn.close();
    await server.stop();
  }
});
