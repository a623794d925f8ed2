// The viewer as a workbench (issue 17), in headless Chromium: the page is
// built on the client library (clients/js, served at /client/), so the
// library is used by the project itself.
//
// - The sidebar is the live session index: sessions appear, change (title,
//   runtime status, pending actions, unread events) and disappear as the
//   server's index says, most recently updated first; a click shows another
//   session without a reload (`?session=` pushed onto the history).
// - A coordinator whose teammates run in their own child sessions shows each
//   child's live status and last text in the team panel, every session on
//   ONE multiplexed stream connection; at the end the page's state of each
//   session is the server's snapshot (less lib/client.mjs NOT_IN_FRAMES).
// - Send and Cancel go to the runtime through the library's controls.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, post, snapshot, ROOT } from './lib/server.mjs';
import { CHROMIUM, NO_CHROMIUM, launchChromium } from './lib/browser.mjs';
import { T, comparable, eventMaker, startRuntime } from './lib/client.mjs';

let server;
let runtime;
let browser;

before(async () => {
  runtime = await startRuntime();
  server = await startServer([], {
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([runtime.hostPort]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'viewer-workbench-secret',
  });
  if (existsSync(CHROMIUM)) browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await runtime?.close();
});

const p = `wb-${process.pid}`;

/** A page of the viewer; console errors and page errors are collected. */
async function openViewer(query) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 950 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  await page.goto(`${server.base}/${query}`);
  return { page, problems, close: () => context.close() };
}

const item = (id) => `[data-testid=session-item][data-session-id="${id}"]`;

/** Wait until the sidebar row of `id` shows `want` (fields of its dataset and texts; null: absent). */
function rowIs(page, id, want) {
  return page.waitForFunction(([sel, want]) => {
    const el = document.querySelector(sel);
    if (!el) return false;
    const text = (t) => el.querySelector(`[data-testid=${t}]`)?.textContent ?? null;
    const row = { ...el.dataset, title: text('session-item-title'), status: text('session-item-status'),
      pendingText: text('session-item-pending'), unreadText: text('session-item-unread'), active: el.getAttribute('aria-current') === 'page' };
    return Object.entries(want).every(([k, v]) => row[k] === v);
  }, [item(id), want], { timeout: T });
}

/** The session ids of the sidebar, top to bottom. */
const sidebarOrder = (page) => page.$$eval('[data-testid=session-item]', (xs) => xs.map((x) => x.dataset.sessionId));

test('every viewer module is served as it is, as an ES module under the page CSP', async () => {
  const dir = path.join(ROOT, 'assets/viewer');
  const modules = readdirSync(dir).filter((f) => f.endsWith('.js'));
  assert.ok(modules.length >= 2, 'the viewer is split into modules');
  for (const f of modules) {
    const src = readFileSync(path.join(dir, f), 'utf8');
    const route = f === 'viewer.js' ? '/viewer.js' : `/viewer/${f}`;
    const r = await fetch(`${server.base}${route}`);
    assert.equal(r.status, 200, `${route} is served`);
    assert.match(r.headers.get('content-type'), /^text\/javascript/);
    assert.equal(await r.text(), src, `${route} is ${f} as it is`);
    assert.ok(src.split('\n').length < 500, `${f} stays under 500 lines`);
    assert.match(src, /^\/\/ agent-projector (live )?viewer: /, `${f} starts by saying what it owns`);
    const code = src.split('\n').filter((l) => !/^\s*(\/\/|\/?\*)/.test(l)).join('\n');
    assert.doesNotMatch(code, /innerHTML|insertAdjacentHTML|outerHTML|document\.write/, `${f} writes no HTML`);
    assert.doesNotMatch(code, /EventSource|\bfetch\(/, `${f} leaves streams and requests to the library`);
  }
  const page = await fetch(`${server.base}/`);
  assert.match(page.headers.get('content-security-policy'), /script-src 'self'/);
  assert.match(await page.text(), /<script type="module" src="\/viewer.js"><\/script>/);
  assert.match(readFileSync(path.join(dir, 'viewer.js'), 'utf8'), /from '\/client\/index.js'/, 'the page imports the client library');
});

test('the sidebar follows the index live: created, updated, deleted, unread; a click switches the session without a reload', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const [a, b, c] = [`${p}-a`, `${p}-b`, `${p}-c`];
  const ea = eventMaker('a');
  const eb = eventMaker('b');
  await post(server.base, a, [ea('turn.submitted', { payload: { text: 'First question' } }), ea('run.started'),
    ea('text.delta', { payload: { delta: 'Answer in A.' } }), ea('session.updated', { payload: { title: 'Session A' } })]);
  const bHead = (await post(server.base, b, [eb('run.started'), eb('text.delta', { payload: { delta: 'Working in B.' } })])).cursor;

  const { page, problems, close } = await openViewer(`?session=${encodeURIComponent(a)}`);
  try {
    await page.evaluate(() => { window.__sameDocument = true; });
    await page.getByText('Answer in A.').waitFor({ timeout: T });
    // A is open (nothing unread), B was never opened: all of it is unread.
    await rowIs(page, a, { active: true, title: 'Session A', unread: '0', unreadText: null });
    await rowIs(page, b, { active: false, title: b, status: 'running', unread: String(bHead), unreadText: String(bHead) });
    const inOrder = async () => {
      const entries = await page.evaluate(() => window.__viewer.index.list().map((e) => [e.sessionId, e.updatedAt]));
      const order = await sidebarOrder(page);
      assert.deepEqual(order, entries.map(([id]) => id), 'the sidebar is the index, in its order');
      const times = entries.map(([, at]) => at);
      assert.deepEqual(times, [...times].sort().reverse(), 'most recently updated first');
      return order;
    };
    assert.deepEqual((await inOrder()).filter((id) => id === a || id === b), [b, a]);

    // Created: a new session appears, at the top.
    await post(server.base, c, [{ id: 'c1', type: 'run.started', runId: 'r' }]);
    await page.waitForSelector(item(c), { timeout: T });
    assert.equal((await inOrder())[0], c);

    // Updated: title, status and pending actions of B change; its unread count follows its head.
    const bNow = (await post(server.base, b, [
      eb('action.required', { actionId: 'b-act', title: 'Deploy?', payload: { actionType: 'approval' } }),
      eb('session.updated', { payload: { title: 'Deploy to prod' } }),
    ])).cursor;
    await rowIs(page, b, { title: 'Deploy to prod', status: 'blocked', pending: '1', pendingText: '1 pending', unread: String(bNow) });
    assert.equal((await inOrder())[0], b);

    // A click shows B: same document, ?session= pushed, the connection now holds B only.
    const aSeen = await page.evaluate(() => window.__viewer.lastCursor);
    await page.locator(item(b)).click();
    await page.waitForFunction((b) => window.__viewer.sessionId === b && new URL(location.href).searchParams.get('session') === b, b, { timeout: T });
    await page.getByText('Working in B.').waitFor({ timeout: T });
    assert.equal(await page.getByText('Answer in A.').count(), 0);
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
    assert.equal(await page.getByTestId('session-title').textContent(), b);
    await page.locator('[data-testid=pending-action][data-action-id="b-act"]').waitFor({ timeout: T });
    await rowIs(page, b, { active: true, unread: '0', unreadText: null });
    await page.waitForFunction((b) => JSON.stringify(window.__viewer.conn.sessions) === JSON.stringify([b]), b, { timeout: T });

    // A goes on while it is not shown: its unread count is what came after the cursor seen.
    const aNow = (await post(server.base, a, [ea('text.delta', { payload: { delta: ' More.' } }), ea('run.finished')])).cursor;
    await rowIs(page, a, { active: false, status: 'completed', unread: String(aNow - aSeen), unreadText: String(aNow - aSeen) });

    // Deleted: the row goes.
    assert.equal((await fetch(`${server.base}/v1/sessions/${encodeURIComponent(c)}`, { method: 'DELETE' })).status, 200);
    await page.waitForSelector(item(c), { state: 'detached', timeout: T });

    // Back in the history: A again, read up to its head now.
    await page.goBack();
    await page.waitForFunction((a) => window.__viewer.sessionId === a, a, { timeout: T });
    await page.getByText('Answer in A. More.').waitFor({ timeout: T });
    await rowIs(page, a, { active: true, unread: '0' });
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test('a coordinator shows its teammates\' child sessions live, all on one stream connection, and ends equal to the snapshots', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const coord = `${p}-coord`;
  const [research, writer] = [`${p}-child-research`, `${p}-child-writer`];
  const ec = eventMaker('k');
  const er = eventMaker('r', { runId: 'cr' });
  const ew = eventMaker('w', { runId: 'cw' });
  await post(server.base, coord, [
    ec('turn.submitted', { payload: { text: 'Write the release notes' } }),
    ec('run.started'),
    ec('team.changed', { topology: 'coordinator_team', payload: { teamName: 'release', roster: [{ agentId: 'lead', role: 'coordinator' }] } }),
    ec('agent.spawned', { agentId: 'researcher', parentSessionId: coord, payload: { name: 'Researcher', role: 'researcher' } }),
    ec('agent.spawned', { agentId: 'writer', parentSessionId: coord, payload: { name: 'Writer', role: 'writer' } }),
    ec('text.delta', { payload: { delta: 'I asked the researcher and the writer.' } }),
  ]);
  // Each teammate runs in its own session, whose agent events name the
  // coordinator's session as their parent: the index says so.
  await post(server.base, research, [er('agent.spawned', { agentId: 'researcher', parentSessionId: coord }),
    er('run.started'), er('text.delta', { payload: { delta: 'Collecting the merged PRs.' } })]);

  const context = await browser.newContext({ viewport: { width: 1400, height: 950 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  // Every stream request of the page, and which of them are still open.
  const streams = [];
  const waiters = new Set();
  const changed = () => { for (const w of waiters) w(); };
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.endsWith('/stream') || u.pathname === '/v1/streams') { streams.push({ r, u, open: true }); changed(); }
  });
  const ended = (r) => { const s = streams.find((x) => x.r === r); if (s) { s.open = false; changed(); } };
  page.on('requestfinished', ended);
  page.on('requestfailed', ended);
  const openMux = () => streams.filter((s) => s.open && s.u.pathname === '/v1/streams');
  /** Wait (on request events) until exactly one multiplexed stream is open and it names `ids`. */
  const oneStreamFor = (ids) => new Promise((resolve, reject) => {
    const check = () => {
      const open = openMux();
      if (open.length === 1 && JSON.stringify(open[0].u.searchParams.get('sessions').split(',').sort()) === JSON.stringify([...ids].sort())) {
        waiters.delete(check); clearTimeout(timer); resolve(open[0]);
      }
    };
    const timer = setTimeout(() => {
      waiters.delete(check);
      reject(new Error(`open streams: ${openMux().map((s) => s.u.search)}; want one for ${ids}`));
    }, T);
    waiters.add(check);
    check();
  });
  const teammate = (agent) => page.locator(`[data-testid=teammate][data-agent-id="${agent}"] [data-testid=teammate-session]`);
  const childIs = (sessionId, status, text) => page.waitForFunction(([sessionId, status, text]) => {
    const el = document.querySelector(`[data-testid=teammate-session][data-session-id="${sessionId}"]`);
    return el?.dataset.status === status && (el.querySelector('[data-testid=teammate-last-text]')?.textContent ?? '').endsWith(text);
  }, [sessionId, status, text], { timeout: T });

  try {
    await page.goto(`${server.base}/?session=${encodeURIComponent(coord)}`);
    await page.getByText('I asked the researcher and the writer.').waitFor({ timeout: T });

    // The researcher's session is live in its card; the writer's has no events yet.
    await childIs(research, 'running', 'Collecting the merged PRs.');
    assert.equal(await teammate('researcher').getByTestId('teammate-session-open').textContent(), research);
    assert.equal(await teammate('writer').count(), 0, 'no session of the writer yet');
    await oneStreamFor([coord, research]);

    // The writer's session starts: the index lists it, and it joins the same connection.
    await post(server.base, writer, [ew('agent.spawned', { agentId: 'writer', parentSessionId: coord }),
      ew('run.started'), ew('text.delta', { payload: { delta: 'Drafting the notes.' } })]);
    await childIs(writer, 'running', 'Drafting the notes.');
    await oneStreamFor([coord, research, writer]);

    // All three go on at once, live.
    await Promise.all([
      post(server.base, research, [er('text.delta', { payload: { delta: ' Found 12.' } }), er('run.finished')]),
      post(server.base, writer, [ew('text.delta', { payload: { delta: ' Section 1 done.' } })]),
      post(server.base, coord, [ec('worker.notification', { subagentId: 'researcher', payload: { summary: '12 PRs found' } }),
        ec('action.required', { actionId: 'publish', title: 'Publish the notes?', payload: { actionType: 'approval' } })]),
    ]);
    await childIs(research, 'completed', 'Collecting the merged PRs. Found 12.');
    await childIs(writer, 'running', 'Drafting the notes. Section 1 done.');
    await page.locator('[data-testid=pending-action][data-action-id=publish]').waitFor({ timeout: T });
    await page.getByTestId('worker-notification').waitFor({ timeout: T });

    // One stream connection for the three sessions, and no per-session stream.
    const mux = await oneStreamFor([coord, research, writer]);
    assert.deepEqual([...await page.evaluate(() => window.__viewer.conn.sessions)].sort(), [coord, research, writer].sort());
    assert.deepEqual(await page.evaluate(() => window.__viewer.children), { researcher: research, writer });
    assert.equal(await page.evaluate(() => window.__viewer.conn.status), 'live');
    assert.equal(streams.filter((s) => /^\/v1\/sessions\/[^/]+\/stream$/.test(s.u.pathname) && s.u.pathname !== '/v1/sessions/stream').length, 0);
    assert.equal(streams.filter((s) => s.open && s.u.pathname === '/v1/sessions/stream').length, 1, 'one index stream');
    assert.ok(mux.u.searchParams.get('cursor'), 'a new list resumes the sessions already held from their cursors');

    // The page holds what the server's snapshots hold, for every session.
    for (const id of [coord, research, writer]) {
      const snap = await snapshot(server.base, id);
      await page.waitForFunction(([id, epoch, cursor]) => {
        const pr = window.__viewer.conn.projection(id);
        return pr?.epoch === epoch && pr.cursor === cursor;
      }, [id, snap.epoch, snap.cursor], { timeout: T });
      const mine = await page.evaluate((id) => JSON.parse(JSON.stringify(window.__viewer.conn.state(id))), id);
      assert.deepStrictEqual(comparable(mine), comparable(snap.state), `${id}: the page's state is the snapshot's`);
    }
    const coordSnap = await snapshot(server.base, coord);
    assert.equal(await page.evaluate(() => window.__viewer.lastCursor), coordSnap.cursor);
    assert.deepStrictEqual(comparable(await page.evaluate(() => JSON.parse(JSON.stringify(window.__viewer.state)))),
      comparable(coordSnap.state), 'the viewed session is the snapshot');

    // A teammate's session opens from its card; the connection follows.
    await teammate('writer').getByTestId('teammate-session-open').click();
    await page.waitForFunction((w) => window.__viewer.sessionId === w, writer, { timeout: T });
    await page.getByText('Drafting the notes. Section 1 done.').waitFor({ timeout: T });
    await oneStreamFor([writer]);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});

test('Send and Cancel reach the runtime through the library\'s controls', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const sid = `${p}-controls`;
  const ev = eventMaker('s');
  await post(server.base, sid, [
    ev('session.created', { payload: { controlUrl: runtime.url } }),
    ev('turn.submitted', { payload: { text: 'Summarise the logs' } }),
    ev('run.started'),
    ev('text.delta', { payload: { delta: 'Reading the logs.' } }),
  ]);
  const { page, problems, close } = await openViewer(`?session=${encodeURIComponent(sid)}`);
  try {
    await page.getByText('Reading the logs.').waitFor({ timeout: T });
    const before = runtime.received.length;
    await page.getByTestId('composer-input').fill('Only the errors, please.');
    await page.getByTestId('send').click();
    await runtime.relayed(before + 1);
    assert.deepEqual(((b) => [b.kind, b.type, b.message])(runtime.received[before]), ['control', 'send', 'Only the errors, please.']);
    await page.waitForFunction(() => /Sent to the runtime/.test(document.querySelector('[data-testid=control-notice]')?.textContent ?? ''), null, { timeout: T });
    assert.equal(await page.getByTestId('composer-input').inputValue(), '', 'the sent text leaves the box');

    // Cancel shows while the run is active.
    await page.getByTestId('cancel-run').click();
    await runtime.relayed(before + 2);
    assert.deepEqual(((b) => [b.kind, b.type])(runtime.received[before + 1]), ['control', 'cancel']);
    await page.waitForFunction(() => /Cancel sent/.test(document.querySelector('[data-testid=control-notice]')?.textContent ?? ''), null, { timeout: T });
    // Only the runtime's own event ends the run.
    await post(server.base, sid, [ev('run.canceled')]);
    await page.waitForFunction(() => document.querySelector('[data-testid=runtime-status]')?.dataset.status === 'cancelled', null, { timeout: T });
    assert.equal(await page.getByTestId('cancel-run').isHidden(), true);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});
