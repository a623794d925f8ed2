// The client library (clients/js) with auth on: the bearer token goes in
// the Authorization header (fetch, not EventSource), a token function is
// asked again at each reconnection, a token that expires mid-stream ends
// the stream with `reset token_expired` and the client resumes with a fresh
// token from the positions it holds (no snapshot again, the state kept);
// refusals are typed errors that stop the retrying.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startServer } from './lib/server.mjs';
import { T, assertSameAsSnapshot, controlledFetch } from './lib/client.mjs';
import { connect, createClient, watchIndex } from '../../clients/js/src/index.js';

const SECRET = 'client-auth-secret';
const fast = { initialMs: 20, maxMs: 200 };

function jwt(claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`;
}
const now = () => Math.floor(Date.now() / 1000);
const writer = () => jwt({ sub: 'runtime', exp: now() + 600, sessions: ['*'], scope: 'publish subscribe' });

let server;
before(async () => {
  server = await startServer([], { PROJECTOR_AUTH__MODE: 'jwt', PROJECTOR_AUTH__HS256_SECRET: SECRET });
});
after(async () => {
  await server?.stop();
});

async function postAs(session, events) {
  const r = await fetch(`${server.base}/v1/sessions/${session}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${writer()}` },
    body: JSON.stringify(events),
  });
  assert.equal(r.status, 200);
}

test('a token function authorises the stream, and an expiring token is renewed without losing the state', async () => {
  const ids = ['auth-a', 'auth-b'];
  await postAs(ids[0], [{ id: 'a1', type: 'text.delta', payload: { delta: 'one' } }]);
  let asked = 0;
  let life = 2; // the first token expires two seconds from now
  const token = () => {
    asked++;
    const t = jwt({ sub: 'ana', exp: now() + life, sessions: ids, scope: 'subscribe' });
    life = 600;
    return t;
  };
  const cf = controlledFetch();
  const conn = connect({ baseUrl: server.base, sessions: ids, token, fetch: cf.fetch, backoff: fast });
  const expired = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the token did not expire')), T);
    conn.on('error', (e) => { if (e.code === 'token_expired') { clearTimeout(timer); resolve(e); } });
  });
  const frames = [];
  conn.on('change', (c) => frames.push(`${c.sessionId}:${c.frame.type}`));
  // The comparison reads the snapshots with a token of its own.
  const reader = { token: jwt({ sub: 'test', exp: now() + 600, sessions: ['*'], scope: 'subscribe' }) };
  try {
    await assertSameAsSnapshot(conn, server.base, ids[0], ids[0], reader);
    assert.equal(asked, 1);
    // The token runs out: each session gets `reset token_expired` and the stream ends.
    assert.equal((await expired).status, 401);
    await cf.requests(2);
    assert.ok(asked >= 2, 'a fresh token for the reconnection');
    await postAs(ids[0], [{ id: 'a2', type: 'text.delta', payload: { delta: ' two' } }]);
    await postAs(ids[1], [{ id: 'b1', type: 'text.delta', payload: { delta: 'b' } }]);
    for (const id of ids) await assertSameAsSnapshot(conn, server.base, id, `${id} after renewal`, reader);
    assert.deepEqual(frames.filter((f) => f.endsWith('snapshot')).sort(), [`${ids[0]}:snapshot`, `${ids[1]}:snapshot`], 'no snapshot again');
    assert.ok(!frames.some((f) => f.endsWith('reset')), 'the state was kept');
    assert.match(new URL(cf.urls[1]).searchParams.get('cursor'), /^[0-9a-f]+:1,[0-9a-f]+:0$/);
  } finally {
    conn.close();
  }
});

test('refusals are typed errors that stop retrying: no token, a session the token may not read', async () => {
  const bare = connect({ baseUrl: server.base, sessions: ['auth-a'], backoff: fast });
  const limited = connect({ baseUrl: server.base, sessions: ['auth-a', 'secret'], backoff: fast,
    token: jwt({ sub: 'ana', exp: now() + 600, sessions: ['auth-a'], scope: 'subscribe' }) });
  const index = watchIndex({ baseUrl: server.base, backoff: fast, token: 'not a jwt' });
  const failed = (s) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`status ${s.status}`)), T);
    const check = () => { if (s.status === 'failed') { clearTimeout(timer); resolve(s.lastError); } };
    s.on('status', check);
    check();
  });
  try {
    const [e1, e2, e3] = await Promise.all([failed(bare), failed(limited), failed(index)]);
    assert.deepEqual([e1.status, e1.code], [401, 'missing_token']);
    assert.deepEqual([e2.status, e2.code], [403, 'session_not_allowed']);
    assert.match(e2.detail, /secret/, 'the refusal names the session');
    assert.deepEqual([e3.status, e3.code], [401, 'invalid_token']);
    // Controls carry the token too; a reader without the control scope is refused.
    const client = createClient({ baseUrl: server.base, token: jwt({ sub: 'ana', exp: now() + 600, sessions: ['*'], scope: 'subscribe' }) });
    const refused = await client.cancel('auth-a').catch((e) => e);
    assert.deepEqual([refused.status, refused.code], [403, 'insufficient_scope']);
  } finally {
    bare.close();
    limited.close();
    index.close();
  }
});
