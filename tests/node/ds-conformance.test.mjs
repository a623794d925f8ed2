// Durable Streams, certified by the protocol's own referee: the whole of
// @durable-streams/server-conformance-tests (vitest) against the server's
// /ds base, on the memory store, the embedded store, and a node of a
// two-node Redis deployment (when PROJECTOR_TEST_REDIS_URL is set). Every
// test must pass; the only ones not run are those the suite itself runs
// only when asked (`subscriptions`, an optional extension).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, purgeRedisPrefix } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const LONG_POLL_MS = 2000;
const REDIS = process.env.PROJECTOR_TEST_REDIS_URL;

/** Run the suite against `base`; its JSON report. */
function conformance(base) {
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'ds-conf-')), 'report.json');
  return new Promise((resolve, reject) => {
    execFile(
      path.join(here, 'node_modules/.bin/vitest'),
      ['run', '--config', path.join(here, 'ds/vitest.config.mjs'), '--reporter=json', `--outputFile=${out}`],
      { env: { ...process.env, DS_BASE_URL: `${base}/ds`, DS_LONG_POLL_MS: String(LONG_POLL_MS) }, maxBuffer: 64 << 20 },
      () => {
        try {
          resolve(JSON.parse(readFileSync(out, 'utf8')));
        } catch (e) {
          reject(new Error(`the suite wrote no report: ${e.message}`));
        } finally {
          rmSync(path.dirname(out), { recursive: true, force: true });
        }
      },
    );
  });
}

/** Every test passed; the skipped ones are the suite's opt-in extension only. */
function assertAllPassed(report) {
  const results = report.testResults.flatMap((f) => f.assertionResults);
  const failed = results.filter((t) => t.status === 'failed');
  assert.deepEqual(
    failed.map((t) => `${t.ancestorTitles.join(' > ')} > ${t.title}: ${t.failureMessages[0]?.split('\n')[0]}`),
    [],
  );
  const skipped = results.filter((t) => t.status !== 'passed');
  for (const t of skipped) {
    assert.equal(t.ancestorTitles[0], 'Reserved subscription APIs', `skipped: ${t.title}`);
  }
  assert.ok(results.length >= 338, `the suite ran ${results.length} tests`);
  assert.equal(report.numPassedTests, results.length - skipped.length);
}

const env = { PROJECTOR_DURABLE_STREAMS__LONG_POLL_MS: String(LONG_POLL_MS) };

test('the conformance suite passes on the memory store', async () => {
  const srv = await startServer([], env);
  try {
    assertAllPassed(await conformance(srv.base));
  } finally {
    await srv.stop();
  }
});

test('the conformance suite passes on the embedded store', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ds-embedded-'));
  const srv = await startServer(['--store', 'embedded', '--data-dir', dir], env);
  try {
    assertAllPassed(await conformance(srv.base));
  } finally {
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  'the conformance suite passes on a node of a two-node Redis deployment',
  { skip: REDIS ? false : 'PROJECTOR_TEST_REDIS_URL is unset (set it to run the Redis tests)' },
  async () => {
    const prefix = `dsconf${process.pid}${Date.now()}`;
    const args = ['--store', 'redis', '--redis-url', REDIS];
    const nodeEnv = { ...env, PROJECTOR_REDIS__PREFIX: prefix };
    const a = await startServer(args, nodeEnv);
    const b = await startServer(args, nodeEnv);
    try {
      assertAllPassed(await conformance(a.base));
      // The other node serves what the suite wrote through the first.
      const p = `/ds/v1/stream/two-nodes-${Date.now()}`;
      assert.equal((await fetch(`${a.base}${p}`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'on a' })).status, 201);
      assert.equal((await fetch(`${b.base}${p}`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: ', on b' })).status, 204);
      const read = await fetch(`${a.base}${p}`);
      assert.equal(await read.text(), 'on a, on b');
      // A live read on one node gets what is appended on the other: a
      // long-poll at the tail, and an SSE stream.
      const tail = read.headers.get('stream-next-offset');
      const polled = fetch(`${b.base}${p}?offset=${tail}&live=long-poll`);
      const sse = await fetch(`${b.base}${p}?offset=${tail}&live=sse`);
      const events = sse.body.pipeThrough(new TextDecoderStream()).getReader();
      let seen = '';
      while (!seen.includes('"upToDate":true')) seen += (await events.read()).value;
      assert.equal((await fetch(`${a.base}${p}`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '!' })).status, 204);
      const r = await polled;
      assert.equal(r.status, 200);
      assert.equal(await r.text(), '!');
      while (!seen.includes('data:!')) seen += (await events.read()).value;
      await events.cancel();
    } finally {
      await Promise.all([a.stop(), b.stop()]);
      purgeRedisPrefix(REDIS, prefix);
      purgeRedisPrefix(REDIS, `${prefix}:ds`);
    }
  },
);
