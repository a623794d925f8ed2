// The demo end to end (issue 12 item 14): scripts/demo.sh starts its local
// runtime (scripts/demo-runtime.mjs); a decision posted the way the viewer's
// Approve button posts it is relayed by the server to that runtime, which
// answers with its own action.resolved event, and the demo run goes on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';
import { startServer, snapshot, ROOT } from './lib/server.mjs';

/** A free TCP port on loopback. */
async function freePort() {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address();
  s.close();
  await once(s, 'close');
  return port;
}

test('demo: Approve in the viewer reaches the demo runtime, which resolves the action', async () => {
  const port = await freePort();
  const srv = await startServer([], {
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([`127.0.0.1:${port}`]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'demo-test-secret',
  });
  const sid = `demo-e2e-${process.pid}`;
  const demo = spawn(path.join(ROOT, 'scripts/demo.sh'), [srv.base, sid], {
    env: { ...process.env, DEMO_PACE: '0.01', DEMO_RUNTIME_PORT: String(port), DEMO_SIGNING_SECRET: 'demo-test-secret' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  demo.stdout.on('data', (c) => (out += c));
  demo.stderr.on('data', (c) => (out += c));
  const exited = once(demo, 'exit');
  try {
    // The demo waits on the pending approval.
    while (!out.includes('waiting for your Approve')) {
      assert.equal(demo.exitCode, null, `demo ended early:\n${out}`);
      await new Promise((r) => demo.stdout.once('data', r));
    }
    const snap = await snapshot(srv.base, sid);
    assert.equal(snap.state.actions['act-apply-patch'].status, 'pending');
    // What the viewer's Approve button sends.
    const r = await fetch(`${srv.base}/v1/sessions/${sid}/actions/act-apply-patch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'approve' }),
    });
    assert.equal(r.status, 202, await r.text());
    const [code] = await exited;
    assert.equal(code, 0, out);
    const done = await snapshot(srv.base, sid);
    assert.equal(done.state.actions['act-apply-patch'].status, 'resolved');
    assert.equal(done.state.runtime.status, 'completed', out);
    assert.match(out, /runtime: http:\/\/127\.0\.0\.1:\d+\/controls/);
    assert.doesNotMatch(out, /no decision in time/);
    const log = await (await fetch(`${srv.base}/v1/sessions/${sid}/events?limit=1000`)).json();
    const resolved = log.events.filter((e) => e.event.class === 'action.resolved');
    assert.equal(resolved.length, 1);
    assert.match(resolved[0].event.id, /^runtime-/, 'resolved by the runtime, not by the script');
  } finally {
    if (demo.exitCode === null) demo.kill();
    await srv.stop();
  }
});
