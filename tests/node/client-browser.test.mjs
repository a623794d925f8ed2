// The client library (clients/js) in headless Chromium: a React page bundled
// with esbuild (browser/client-app.jsx: useSession on its own and on a
// shared connection, useSessionIndex), and a page with no build step that
// imports the modules the server serves at /client/. Each rebuilds its
// sessions from frames to the snapshot's state, all of it; the React page adds and drops sessions on the shared
// connection and approves an action with its own button.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { startServer, post, snapshot } from './lib/server.mjs';
import { CHROMIUM, NO_CHROMIUM, launchChromium } from './lib/browser.mjs';
import { T, comparable, conversation, eventMaker, startRuntime, workbench } from './lib/client.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

let server;
let runtime;
let browser;
let appHtml;

before(async () => {
  if (!existsSync(CHROMIUM)) return;
  // The package is a symlink to clients/js: `react` in its react.js is
  // found through nodePaths, so the page has one React.
  const out = await build({
    entryPoints: [path.join(here, 'browser/client-app.jsx')],
    bundle: true,
    write: false,
    format: 'iife',
    jsx: 'automatic',
    nodePaths: [path.join(here, 'node_modules')],
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  const js = out.outputFiles[0].text.replaceAll('</script', '<\\/script');
  appHtml = `<!doctype html><meta charset="utf-8"><title>client</title><div id="root"></div><script>${js}</script>`;
  runtime = await startRuntime();
  server = await startServer([], {
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([runtime.hostPort]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'client-browser-secret',
  });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await runtime?.close();
});

/** A page at the server's origin whose `route` answers `html`; console errors are collected. */
async function open(route, html) {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  await page.route(`${server.base}${route}**`, (r) => r.fulfill({ status: 200, contentType: 'text/html', body: html }));
  return { page, problems };
}

/** Wait until the page's `read(id)` state is at the server's epoch and cursor, then compare. */
async function pageMatchesSnapshot(page, id, read) {
  const snap = await snapshot(server.base, id);
  await page.waitForFunction(([id, epoch, cursor, read]) => {
    const s = new Function('id', `return (${read})(id)`)(id);
    return s && s.epoch === epoch && s.cursor === cursor;
  }, [id, snap.epoch, snap.cursor, read], { timeout: T });
  const got = await page.evaluate(([id, read]) => JSON.parse(JSON.stringify(new Function('id', `return (${read})(id)`)(id).state)), [id, read]);
  assert.deepStrictEqual(comparable(got), comparable(snap.state), `${id}: the page's state is the snapshot's`);
  return snap;
}

const fromHook = ((id) => window.__seen[id]).toString();

test('React: useSession on its own and on a shared connection, add and drop sessions, approve; useSessionIndex', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const [s1, s2, s3] = ['one', 'two', 'three'].map((x) => `rb-${x}-${process.pid}`);
  const ev = eventMaker('r');
  await post(server.base, s1, conversation(ev, s1).slice(0, 6));
  await post(server.base, s2, [{ id: 'open', type: 'session.created', payload: { controlUrl: runtime.url } }, ...workbench().slice(0, 6)]);
  const { page, problems } = await open('/app/', appHtml);
  try {
    await page.goto(`${server.base}/app/react?sessions=${s1},${s2}`);
    await page.waitForFunction(() => window.__app !== undefined, null, { timeout: T });
    // Live frames while the page renders.
    for (const e of conversation(ev, s1).slice(6)) await post(server.base, s1, e);
    for (const e of workbench().slice(6)) await post(server.base, s2, e);
    await pageMatchesSnapshot(page, s1, fromHook);
    await pageMatchesSnapshot(page, s2, fromHook);
    assert.deepEqual(await page.evaluate(() => window.__app.shared.sessions), [s2], 'the hook with a shared connection added its session');
    assert.match(await page.locator(`[data-id="${s1}"] .message.assistant`).first().textContent(), /CI log/);

    // A third session joins the shared connection; the second leaves it.
    await post(server.base, s3, [{ id: 'x1', type: 'text.delta', payload: { delta: 'third' } }]);
    await page.evaluate(([a, b, c]) => window.__app.setIds([a, b, c]), [s1, s2, s3]);
    await pageMatchesSnapshot(page, s3, fromHook);
    assert.deepEqual(await page.evaluate(() => window.__app.shared.sessions), [s2, s3]);

    // An approval, decided with the page's own button.
    await post(server.base, s2, [{ id: 'ask', type: 'action.required', actionId: 'deploy', title: 'Deploy?', payload: { actionType: 'approval' } }]);
    await page.locator(`[data-id="${s2}"] button.approve[data-action=deploy]`).click({ timeout: T });
    await runtime.relayed(1);
    assert.deepEqual([runtime.received[0].actionId, runtime.received[0].decision], ['deploy', 'approve']);
    await page.waitForFunction(() => window.__relayed.length === 1, null, { timeout: T });
    await post(server.base, s2, [{ id: 'done', type: 'action.resolved', actionId: 'deploy', payload: { decision: 'approve' } }]);
    await pageMatchesSnapshot(page, s2, fromHook);
    assert.equal(await page.locator(`[data-id="${s2}"] button.approve`).count(), 0);

    await page.evaluate(([a, c]) => window.__app.setIds([a, c]), [s1, s3]);
    await page.waitForFunction((s3) => window.__app.shared.sessions.join() === s3, s3, { timeout: T });
    await post(server.base, s3, [{ id: 'x2', type: 'text.delta', payload: { delta: ' again' } }]);
    await pageMatchesSnapshot(page, s3, fromHook);

    // The index lists the three sessions with their heads, as the server does.
    const heads = {};
    for (const id of [s1, s2, s3]) heads[id] = (await snapshot(server.base, id)).cursor;
    await page.waitForFunction((heads) => window.__index?.ready &&
      Object.entries(heads).every(([id, h]) => window.__index.sessions.some((e) => e.sessionId === id && e.head === h)), heads, { timeout: T });
    assert.deepEqual(problems, []);
    assert.deepEqual(await page.evaluate(() => window.__errors), []);
  } finally {
    await page.close();
  }
});

test('no build step: a module page imports /client/index.js from the server and rebuilds its sessions', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const ids = ['a', 'b'].map((x) => `plain-${x}-${process.pid}`);
  const ev = eventMaker('p');
  await post(server.base, ids[0], conversation(ev, ids[0]).slice(0, 10));
  const html = `<!doctype html><meta charset="utf-8"><title>plain</title>
<script type="module">
  import { connect } from '/client/index.js';
  const ids = new URLSearchParams(location.search).get('sessions').split(',');
  window.conn = connect({ baseUrl: '', sessions: ids, backoff: { initialMs: 50 } });
</script>`;
  const { page, problems } = await open('/plain/', html);
  try {
    await page.goto(`${server.base}/plain/?sessions=${ids.join(',')}`);
    const fromConn = ((id) => window.conn?.projection(id)).toString();
    for (const e of conversation(ev, ids[0]).slice(10)) await post(server.base, ids[0], e);
    await post(server.base, ids[1], workbench());
    for (const id of ids) await pageMatchesSnapshot(page, id, fromConn);
    assert.equal(await page.evaluate(() => window.conn.status), 'live');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});
