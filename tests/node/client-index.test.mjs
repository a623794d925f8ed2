// The client library's live session index (clients/js watchIndex) against
// the real server: its Map follows created, updated and deleted sessions and
// equals `GET /v1/sessions` after each step; a cut connection resumes after
// the index cursor it holds (no second snapshot); a server restart (a new
// index epoch) is a reset and a fresh snapshot.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, post } from './lib/server.mjs';
import { T, controlledFetch } from './lib/client.mjs';
import { watchIndex } from '../../clients/js/src/index.js';

const fast = { initialMs: 20, maxMs: 200 };

/** GET /v1/sessions as a Map by session id (one page: the tests have few sessions). */
async function listing(base) {
  const r = await fetch(`${base}/v1/sessions?limit=500`);
  assert.equal(r.status, 200);
  const page = await r.json();
  assert.equal(page.nextAfter, undefined);
  return new Map(page.sessions.map((s) => [s.sessionId, s]));
}

/** Wait until the index equals the listing, then return it. */
async function sameAsListing(idx, base, label) {
  const want = await listing(base);
  const key = (m) => JSON.stringify([...m.entries()].sort(([a], [b]) => a.localeCompare(b)));
  await idx.until((m) => key(m) === key(want), { timeoutMs: T }).catch(() => {});
  assert.deepStrictEqual(new Map([...idx.sessions].sort(([a], [b]) => a.localeCompare(b))),
    new Map([...want].sort(([a], [b]) => a.localeCompare(b))), `${label}: the index is the listing`);
  return want;
}

test('the index follows created, updated and deleted sessions and resumes after a cut from its cursor', async () => {
  const server = await startServer();
  const cf = controlledFetch();
  await post(server.base, 'ix-a', [{ id: 'a1', type: 'turn.submitted', runId: 'r', turnId: 't', payload: { text: 'hi' } }]);
  const idx = watchIndex({ baseUrl: server.base, fetch: cf.fetch, backoff: fast });
  const changes = [];
  idx.on('change', (c) => changes.push(c));
  try {
    await idx.until((m) => m.has('ix-a'), { timeoutMs: T });
    assert.equal(changes[0].type, 'snapshot');
    await sameAsListing(idx, server.base, 'the snapshot');

    await post(server.base, 'ix-b', [{ id: 'b1', type: 'run.started', runId: 'r' }]);
    await idx.until((m) => m.has('ix-b'), { timeoutMs: T });
    assert.deepEqual([changes.at(-1).type, changes.at(-1).sessionId], ['created', 'ix-b']);
    await post(server.base, 'ix-b', [
      { id: 'b2', type: 'action.required', runId: 'r', actionId: 'ap', payload: { actionType: 'approval' } },
      { id: 'b3', type: 'session.updated', payload: { title: 'Deploy', pinned: true } },
    ]);
    let m = await idx.until((s) => s.get('ix-b')?.head === 3, { timeoutMs: T });
    assert.deepEqual([m.get('ix-b').pendingActions, m.get('ix-b').title, m.get('ix-b').status], [1, 'Deploy', 'blocked']);
    assert.equal(changes.at(-1).type, 'updated');
    await sameAsListing(idx, server.base, 'after updates');
    const before = idx.sessions;

    // The network drops; sessions change meanwhile.
    const position = idx.position;
    assert.match(position, /^[0-9a-f]+:\d+$/);
    cf.hold();
    cf.cut();
    await cf.requests(2);
    assert.notEqual(idx.status, 'open');
    await post(server.base, 'ix-c', [{ id: 'c1', type: 'run.started', runId: 'r' }]);
    assert.equal((await fetch(`${server.base}/v1/sessions/ix-a`, { method: 'DELETE' })).status, 200);
    await post(server.base, 'ix-b', [{ id: 'b4', type: 'action.resolved', runId: 'r', actionId: 'ap', payload: { decision: 'approve' } }]);
    const resumedAt = changes.length;
    cf.release();
    assert.equal(new URL(cf.urls[1]).searchParams.get('cursor'), position, 'resumes after the cursor it holds');
    m = await idx.until((s) => s.has('ix-c') && !s.has('ix-a') && s.get('ix-b').pendingActions === 0, { timeoutMs: T });
    assert.deepEqual(changes.slice(resumedAt).map((c) => `${c.type}:${c.sessionId}`),
      ['created:ix-c', 'deleted:ix-a', 'updated:ix-b'], 'the changes missed, in order, and no snapshot');
    assert.equal(before.has('ix-a'), true, 'an earlier Map is left as it was');
    await sameAsListing(idx, server.base, 'after the cut');
  } finally {
    idx.close();
    await server.stop();
  }
});

test('a server restart gives the index a new epoch: reset, then a fresh snapshot', async () => {
  let server = await startServer();
  const port = new URL(server.base).port;
  await post(server.base, 'old', [{ id: 'o1', type: 'run.started', runId: 'r' }]);
  const idx = watchIndex({ baseUrl: server.base, backoff: fast });
  const changes = [];
  idx.on('change', (c) => changes.push(c));
  try {
    await idx.until((m) => m.has('old'), { timeoutMs: T });
    const epoch = idx.position.split(':')[0];
    await server.stop();
    server = await startServer(['--listen', `127.0.0.1:${port}`]);
    await post(server.base, 'new', [{ id: 'n1', type: 'run.started', runId: 'r' }]);
    await idx.until((m) => m.has('new') && !m.has('old'), { timeoutMs: T });
    const after = changes.slice(changes.findIndex((c) => c.type === 'reset'));
    assert.equal(after[0].reason, 'epoch_mismatch');
    assert.equal(after[0].sessions.size, 0, 'cleared until the snapshot');
    assert.equal(after[1].type, 'snapshot');
    assert.notEqual(idx.position.split(':')[0], epoch);
    await sameAsListing(idx, server.base, 'after the restart');
  } finally {
    idx.close();
    await server.stop();
  }
});
