// The viewer page in a real browser (Debian's chromium through playwright-core).
//
// The page is built on the client library (clients/js, served at /client/):
// its one multiplexed connection (`GET /v1/streams`) and the library's
// projection hold the session. It is loaded through a small TCP proxy in this
// process, so the test can cut the network under the page the way a real
// drop does: every open socket is destroyed and new connections are refused
// until it is restored. The library then reconnects by itself with
// `?cursor=<epoch>:<cursor>` of the last frame it applied, which the proxy
// sees on the wire. Events posted while the page is cut off must show up
// once, exactly as the API's snapshot has them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { startServer, post, snapshot, plain, ROOT } from './lib/server.mjs';
import { CHROMIUM, NO_CHROMIUM, launchChromium } from './lib/browser.mjs';
import { workbench } from './lib/client.mjs';

const SHOT = path.join(ROOT, 'target/viewer.png');
const T = 15000; // upper bound for any single wait

let server;
let proxy;
let browser;

before(async () => {
  if (!existsSync(CHROMIUM)) return;
  server = await startServer();
  proxy = await startProxy(server.base);
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await proxy?.close();
  await server?.stop();
});

/**
 * A TCP proxy to `target` that records every HTTP request head it forwards
 * and can drop the network: `cut()` destroys every socket and refuses new
 * connections until `restore()`.
 */
async function startProxy(target) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const requests = [];
  let down = false;
  const srv = net.createServer((client) => {
    if (down) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(port), hostname);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('data', (buf) => {
      // Request heads on this connection (keep-alive may carry several).
      const text = buf.toString('latin1');
      for (const m of text.matchAll(/(GET|POST|PUT|DELETE|HEAD) (\S+) HTTP\/1\.1\r\n([\s\S]*?)\r\n\r\n/g)) {
        const headers = {};
        for (const line of m[3].split('\r\n')) {
          const i = line.indexOf(':');
          if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
        }
        requests.push({ method: m[1], path: m[2], headers });
      }
    });
    client.pipe(upstream);
    upstream.pipe(client);
    for (const s of [client, upstream]) {
      s.on('error', drop);
      s.on('close', drop);
    }
  });
  srv.listen(0, '127.0.0.1');
  await new Promise((r) => srv.once('listening', r));
  return {
    base: `http://127.0.0.1:${srv.address().port}`,
    requests,
    cut() {
      down = true;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    restore() {
      down = false;
    },
    close() {
      down = true;
      for (const s of sockets) s.destroy();
      return new Promise((r) => srv.close(r));
    },
  };
}

const sid = `viewer-${process.pid}-${Date.now()}`;
const run = { runId: 'run-1', turnId: 'turn-1' };
let seq = 0;
/** An Agent UI envelope event of run-1 with the next runtime sequence. */
const ev = (type, fields = {}) => ({ id: `e${++seq}`, type, ...run, sequence: seq, ...fields });

const USER_TEXT = 'Why does the nightly build fail?';
const TEXT_1 = 'Let me look at the CI log. ';
const TEXT_2 = 'The lexer accepts escapes that are too long.\nI can patch it.';
const TEAM_TEXT = 'Reviewed: the fix matches the spec.';
const DIAG_MESSAGE_PART = "unknown event class 'vendor.telemetry'";

function scenario() {
  return [
    ev('turn.submitted', { payload: { text: USER_TEXT } }),
    ev('run.started'),
    ev('reasoning.summary', { payload: { text: 'Check the CI log before touching code.' } }),
    ev('text.delta', { payload: { delta: TEXT_1 } }),
    ev('tool.started', { toolCallId: 'call-grep', payload: { toolName: 'grep', input: { pattern: 'unicode_escape' } } }),
    ev('tool.result', { toolCallId: 'call-grep', refIds: ['out-grep'], payload: { summary: '3 matches in lexer.rs' } }),
    ev('tool.started', { toolCallId: 'call-build', payload: { toolName: 'cargo_build', input: { release: true } } }),
    ev('tool.failed', { toolCallId: 'call-build', payload: { error: 'linker exited with 1' } }),
    ev('text.delta', { payload: { delta: TEXT_2 } }),
    ev('evidence.changed', { evidenceId: 'ev-log', refIds: ['ci-log#L212'], payload: { title: 'CI log line 212', verdict: 'supports' } }),
    ev('artifact.created', { artifactId: 'art-patch', refIds: ['diff-1'], payload: { title: 'lexer.rs patch', artifactKind: 'patch' } }),
    ev('action.required', { actionId: 'act-1', title: 'Apply the patch to lexer.rs', payload: { actionType: 'approval' } }),
    ev('agent.spawned', { agentId: 'reviewer', parentSessionId: sid, payload: { name: 'Reviewer', role: 'reviewer' } }),
    ev('text.delta', { agentId: 'reviewer', payload: { delta: TEAM_TEXT } }),
    ev('vendor.telemetry', { payload: { tokens: 1234 } }),
  ];
}

/** The SSE event (id and data) of the delta frame with `cursor`, read from the multiplexed stream. */
async function frameAt(base, session, epoch, cursor) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), T);
  try {
    const q = `sessions=${encodeURIComponent(session)}&cursor=${encodeURIComponent(`${epoch}:${cursor - 1}`)}`;
    const r = await fetch(`${base}/v1/streams?${q}`, { signal: ac.signal });
    const decoder = new TextDecoder();
    let buf = '';
    for await (const bytes of r.body) {
      buf += decoder.decode(bytes, { stream: true });
      const m = buf.match(new RegExp(`id: ([0-9a-z]+:${cursor})\nevent: delta\ndata: (.*)\n`));
      if (m) return { id: m[1], data: m[2] };
    }
    throw new Error(`no frame ${cursor}`);
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/** Count non-overlapping occurrences of `needle` in `hay`. */
const count = (hay, needle) => hay.split(needle).length - 1;

test('viewer: empty state without a session', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const page = await browser.newPage();
  try {
    await page.goto(`${proxy.base}/`);
    await page.getByTestId('empty-state').waitFor({ state: 'visible', timeout: T });
    assert.equal(await page.getByTestId('message').count(), 0);
    assert.equal(await page.getByTestId('connection').getAttribute('data-state'), 'idle');
  } finally {
    await page.close();
  }
});

test('viewer: renders a session live, survives a network drop without duplicating text, keeps actions pending', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);

  const first = await post(server.base, sid, scenario());
  assert.equal(first.accepted, seq);

  const context = await browser.newContext({ viewport: { width: 1360, height: 980 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  const streamRequests = [];
  page.on('request', (r) => {
    if (r.url().includes('/stream')) streamRequests.push(new URL(r.url()));
  });
  // Applied (the handle) and rendered (the header's cursor is drawn in the
  // same animation frame as the transcript).
  const cursorIs = (c) =>
    page.waitForFunction(
      (c) => window.__viewer?.lastCursor === c && document.querySelector('[data-testid=cursor]')?.textContent === `cursor ${c}`,
      c,
      { timeout: T },
    );

  try {
    await page.goto(`${proxy.base}/?session=${encodeURIComponent(sid)}`);
    await cursorIs(first.cursor);
    await page.waitForFunction(() => document.querySelector('[data-testid=connection]')?.dataset.state === 'live', null, { timeout: T });

    // Runtime status: an action is pending, so the run is blocked.
    await page.waitForFunction(() => document.querySelector('[data-testid=runtime-status]')?.dataset.status === 'blocked', null, { timeout: T });

    // Conversation.
    const transcript = page.getByTestId('transcript');
    const messages = page.getByTestId('message');
    assert.equal(await messages.count(), 3, 'user, assistant, teammate');
    assert.equal(await messages.nth(0).getAttribute('data-role'), 'user');
    assert.equal(await messages.nth(0).getByTestId('text-part').textContent(), USER_TEXT);
    const assistant = messages.nth(1);
    const texts = await assistant.getByTestId('text-part').allTextContents();
    assert.deepEqual(texts, [TEXT_1.trim(), TEXT_2], 'text, tools, text: two text segments in order');
    // Reasoning is collapsed.
    assert.equal(await assistant.getByTestId('reasoning').evaluate((d) => d.open), false);

    // Tool rows with their state.
    const tools = assistant.getByTestId('tool-row');
    assert.equal(await tools.count(), 2);
    assert.equal(await tools.nth(0).getAttribute('data-state'), 'output-available');
    assert.equal(await tools.nth(0).getByTestId('tool-state').textContent(), 'done');
    assert.match(await tools.nth(0).textContent(), /grep[\s\S]*3 matches in lexer\.rs/);
    assert.equal(await tools.nth(1).getAttribute('data-state'), 'output-error');
    assert.equal(await tools.nth(1).getByTestId('tool-state').textContent(), 'failed');

    // Pending action card with both buttons.
    const card = assistant.getByTestId('action-card');
    assert.equal(await card.getAttribute('data-status'), 'pending');
    assert.match(await card.textContent(), /Apply the patch to lexer\.rs/);
    await card.getByTestId('approve').waitFor({ state: 'visible', timeout: T });
    await card.getByTestId('reject').waitFor({ state: 'visible', timeout: T });
    assert.equal(await page.getByTestId('pending-actions').getByTestId('pending-action').count(), 1);

    // Artifact and evidence cards, in the message and in their lanes.
    assert.match(await assistant.getByTestId('artifact-card').textContent(), /lexer\.rs patch/);
    assert.match(await assistant.getByTestId('evidence-card').textContent(), /supports[\s\S]*CI log line 212/);
    assert.match(await page.getByTestId('artifacts-lane').textContent(), /lexer\.rs patch/);
    assert.match(await page.getByTestId('evidence-lane').textContent(), /CI log line 212/);

    // The teammate: its own message with its identity, and the roster.
    const team = messages.nth(2);
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=message]')[2]?.dataset.agentId === 'reviewer', null, { timeout: T });
    assert.equal(await team.getByTestId('text-part').textContent(), TEAM_TEXT);
    assert.match(await page.getByTestId('teammates').textContent(), /Reviewer/);

    // Diagnostics: in their panel, never in the transcript.
    const diagnostics = page.getByTestId('diagnostics');
    assert.match(await diagnostics.textContent(), new RegExp(DIAG_MESSAGE_PART.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.match(await diagnostics.textContent(), /linker exited with 1/);
    const transcriptText = await transcript.textContent();
    assert.ok(!transcriptText.includes(DIAG_MESSAGE_PART), 'a diagnostic leaked into the transcript');
    assert.ok(!transcriptText.includes('tool call call-build failed'), 'a diagnostic leaked into the transcript');

    // Live: more text appears as it is posted.
    const live = await post(server.base, sid, [ev('text.delta', { payload: { delta: ' Live one.' } })]);
    await cursorIs(live.cursor);
    await page.waitForFunction(
      () => [...document.querySelectorAll('[data-testid=message]')[1].querySelectorAll('[data-testid=text-part]')].pop()?.textContent === 'Live one.',
      null,
      { timeout: T },
    );

    // Network drop: cut every socket, post while the page is cut off, restore.
    const before = streamRequests.length;
    const proxiedBefore = proxy.requests.length;
    proxy.cut();
    await page.waitForFunction(() => document.querySelector('[data-testid=connection]')?.dataset.state !== 'live', null, { timeout: T });
    assert.equal(await page.getByTestId('connection').getAttribute('data-state'), 'reconnecting');
    const offline = await post(server.base, sid, [
      ev('text.delta', { payload: { delta: ' Missed two.' } }),
      ev('text.delta', { payload: { delta: ' Missed three.' } }),
    ]);
    assert.equal(await page.evaluate(() => window.__viewer.lastCursor), live.cursor, 'nothing arrives while cut off');
    proxy.restore();
    await cursorIs(offline.cursor);
    await page.waitForFunction(() => document.querySelector('[data-testid=connection]')?.dataset.state === 'live', null, { timeout: T });

    // The page resumed the session from the position of the last frame it
    // applied, `<epoch>:<cursor>`, on its one multiplexed stream.
    const lastId = `${(await snapshot(server.base, sid)).epoch}:${live.cursor}`;
    const resumed = proxy.requests
      .slice(proxiedBefore)
      .filter((r) => r.path.startsWith('/v1/streams?'))
      .map((r) => new URL(r.path, proxy.base).searchParams);
    assert.ok(resumed.length >= 1, 'no stream request after the drop');
    assert.equal(resumed.at(-1).get('sessions'), sid);
    assert.equal(resumed.at(-1).get('cursor'), lastId);
    const seenByPage = streamRequests.slice(before).filter((u) => u.pathname === '/v1/streams');
    assert.ok(seenByPage.some((u) => u.searchParams.get('cursor') === lastId),
      `the page did not resume from ${lastId}: ${seenByPage.map(String)}`);
    assert.equal(streamRequests.filter((u) => u.pathname.startsWith('/v1/sessions/') && u.pathname !== '/v1/sessions/stream').length, 0,
      'no per-session stream: the session rides the multiplexed one');

    // After the drop, more live text on the same stream.
    const after = await post(server.base, sid, [ev('text.delta', { payload: { delta: ' After four.' } })]);
    await cursorIs(after.cursor);

    // The page holds exactly what the API's snapshot holds, each text once.
    const snap = (await snapshot(server.base, sid)).state;
    const mine = await page.evaluate(() => JSON.parse(JSON.stringify(window.__viewer.state.messages)));
    const shape = (ms) => plain(ms).map(({ id, role, status, agentId, parts }) => ({ id, role, status, agentId, parts }));
    assert.deepEqual(shape(mine), shape(snap.messages));
    const lastText = [...snap.messages[1].parts].reverse().find((p) => p.type === 'text').text;
    // The action card ended the text segment: the live text is a new part.
    assert.equal(lastText, ' Live one. Missed two. Missed three. After four.');
    const rendered = await page.getByTestId('transcript').textContent();
    for (const piece of [TEXT_1.trim(), 'Live one.', 'Missed two.', 'Missed three.', 'After four.', TEAM_TEXT]) {
      assert.equal(count(rendered, piece), 1, `"${piece}" is rendered ${count(rendered, piece)} times`);
    }
    assert.equal(await page.getByTestId('cursor').textContent(), `cursor ${after.cursor}`);

    // A frame the page already applied, delivered again (as an overlapping
    // replay would) to the library's connection, changes nothing: the cursor
    // check drops it.
    const again = await frameAt(server.base, sid, (await snapshot(server.base, sid)).epoch, offline.cursor);
    await page.evaluate(({ id, data }) => window.__viewer.conn.onEvent({ event: 'delta', id, data }), again);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    const reRendered = await page.getByTestId('transcript').textContent();
    assert.equal(count(reRendered, 'Missed three.'), 1, 'a replayed frame duplicated text');
    assert.deepEqual(shape(await page.evaluate(() => JSON.parse(JSON.stringify(window.__viewer.state.messages)))), shape(snap.messages));

    // Approve: the page says what the server answered; the action stays pending.
    await card.getByTestId('approve').click();
    const notice = card.getByTestId('action-notice');
    await page.waitForFunction(
      () => /not available|Sent to the runtime|not accepted|Could not reach/.test(document.querySelector('[data-testid=action-card] [data-testid=action-notice]')?.textContent ?? ''),
      null,
      { timeout: T },
    );
    assert.match(await notice.textContent(), /Controls are not available on this server \(404\)|Sent to the runtime — waiting for it to resolve|not accepted/);
    t.diagnostic(`approve: ${await notice.textContent()}`);
    assert.equal(await card.getAttribute('data-status'), 'pending');
    assert.equal(await page.evaluate(() => window.__viewer.state.actions['act-1'].status), 'pending');
    assert.equal((await snapshot(server.base, sid)).state.actions['act-1'].status, 'pending');
    await card.getByTestId('approve').waitFor({ state: 'visible', timeout: T });

    mkdirSync(path.dirname(SHOT), { recursive: true });
    await page.screenshot({ path: SHOT });

    // Only the runtime resolves it.
    const resolved = await post(server.base, sid, [ev('action.resolved', { actionId: 'act-1', payload: { decision: 'approve' } })]);
    await cursorIs(resolved.cursor);
    await page.waitForFunction(() => document.querySelector('[data-testid=action-card]')?.dataset.status === 'resolved', null, { timeout: T });
    assert.equal(await card.getByTestId('approve').count(), 0);
    assert.match(await card.getByTestId('action-status').textContent(), /approved/);
    assert.equal(await page.getByTestId('pending-actions').getByTestId('pending-action').count(), 0);

    // A final text that differs from what was streamed wins (reconciliation).
    const FINAL = ' Live one; missed two and three; after four.';
    const fin = await post(server.base, sid, [ev('text.final', { payload: { text: FINAL } })]);
    await cursorIs(fin.cursor);
    const finalSnap = (await snapshot(server.base, sid)).state;
    assert.deepEqual(shape(await page.evaluate(() => JSON.parse(JSON.stringify(window.__viewer.state.messages)))), shape(finalSnap.messages));
    await page.waitForFunction(
      (f) => [...document.querySelectorAll('[data-testid=message]')[1].querySelectorAll('[data-testid=text-part]')].pop()?.textContent === f,
      FINAL.trim(),
      { timeout: T },
    );
    assert.equal(count(await page.getByTestId('transcript').textContent(), 'Missed'), 0, 'the streamed text stayed after the final');

    // No script errors and no CSP violations. Failed loads are expected: the
    // cut stream, and the controls endpoint where it does not exist (404).
    const unexpected = problems.filter((p) => !/Failed to load resource/.test(p));
    assert.deepEqual(unexpected, []);
  } finally {
    await context.close();
  }
});

test('viewer: a reset (session deleted) clears the page, then it follows the new incarnation', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const s = `${sid}-reset`;
  const one = await post(server.base, s, [
    { id: 'r1', type: 'run.started', runId: 'r' },
    { id: 'r2', type: 'text.delta', runId: 'r', payload: { delta: 'Before the reset.' } },
  ]);
  const page = await browser.newPage();
  try {
    await page.goto(`${proxy.base}/?session=${encodeURIComponent(s)}`);
    await page.waitForFunction((c) => window.__viewer?.lastCursor === c, one.cursor, { timeout: T });
    await page.getByText('Before the reset.').waitFor({ timeout: T });
    const epoch = await page.evaluate(() => window.__viewer.epoch);

    const del = await fetch(`${server.base}/v1/sessions/${encodeURIComponent(s)}`, { method: 'DELETE' });
    assert.ok(del.status < 300, `DELETE: ${del.status}`);
    await page.waitForFunction((e) => window.__viewer.epoch !== e && window.__viewer.state?.messages.length === 0, epoch, { timeout: T });
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=message]').length === 0, null, { timeout: T });

    const two = await post(server.base, s, [{ id: 'n1', type: 'text.delta', runId: 'r2', payload: { delta: 'After the reset.' } }]);
    await page.waitForFunction((c) => window.__viewer.lastCursor === c, two.cursor, { timeout: T });
    await page.getByText('After the reset.').waitFor({ timeout: T });
    assert.equal(await page.getByText('Before the reset.').count(), 0);
  } finally {
    await page.close();
  }
});

test('viewer: team, queue, coding and context panels render from the snapshot and live', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const s = `${sid}-workbench`;
  const at = { runId: 'r', turnId: 't' };
  // Half before the page opens (snapshot), half while it watches (deltas).
  const first = await post(server.base, s, workbench(at).slice(0, 7));
  const page = await browser.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  try {
    await page.goto(`${proxy.base}/?session=${encodeURIComponent(s)}`);
    await page.waitForFunction((c) => window.__viewer?.lastCursor === c, first.cursor, { timeout: T });
    const live = await post(server.base, s, [
      ...workbench(at).slice(7, 16),
      { id: 'w17', type: 'plan.delta', ...at, payload: { delta: '1. reproduce' } },
    ]);
    await page.waitForFunction((c) => window.__viewer.lastCursor === c, live.cursor, { timeout: T });
    const n = async (id) => page.getByTestId(id).count();
    await page.getByTestId('worker-notification').waitFor({ timeout: T });
    assert.equal(await n('teammate'), 2, 'lead and researcher');
    assert.match(await page.getByTestId('team-topology').textContent(), /coordinator_team/);
    assert.equal(await n('work-item'), 1);
    assert.equal(await n('handoff'), 1);
    assert.equal(await n('review'), 1);
    assert.equal(await n('worker-notification'), 1);
    assert.match(await page.getByTestId('worker-notification').textContent(), /3 sources found/);
    // A worker notification is never a user message: the one user message is the submitted turn.
    assert.equal(await page.locator('[data-testid=message][data-role=user]').count(), 1);
    assert.deepEqual(await page.getByTestId('queue-item').evaluateAll((xs) => xs.map((x) => x.dataset.kind)), ['queue', 'steer']);
    assert.equal(await n('coding-file'), 1);
    assert.equal(await n('coding-command'), 1);
    assert.match(await page.getByTestId('coding-command').textContent(), /exit 101/);
    assert.equal(await n('coding-patch'), 1);
    assert.equal(await n('coding-test'), 1);
    assert.match(await page.getByTestId('coding-test').textContent(), /3 passed · 1 failed/);
    assert.equal(await n('coding-block'), 1);
    assert.equal(await n('context-ref'), 1);
    assert.equal(await n('context-missing'), 1);
    assert.equal(await n('context-budget'), 1);
    assert.equal(await n('context-compaction'), 1);
    assert.equal(await page.getByTestId('context-compaction').getAttribute('data-status'), 'completed');
    assert.equal(await n('file-part'), 1);
    assert.equal(await n('attachment-part'), 1);
    assert.equal(await n('plan-part'), 1);
    await page.setViewportSize({ width: 1400, height: 2000 });
    await page.screenshot({ path: path.join(ROOT, 'target/viewer-workbench.png'), fullPage: true });
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

// Chromium's own WebSocket, not ours: `ws.close(1000)` must end in a clean
// close (the server answers the Close), with code 1000 (issue 12 item 5).
test('chromium WebSocket: close(1000) is answered, wasClean with code 1000', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  await post(server.base, 'ws-close', [{ id: 'c1', type: 'text.delta', runId: 'r', messageId: 'm', sequence: 1, payload: { delta: 'hi' } }]);
  const page = await browser.newPage();
  try {
    await page.goto(`${server.base}/`);
    const result = await page.evaluate(async (url) => new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      const timer = setTimeout(() => reject(new Error('no close within 10 s')), 10000);
      ws.onmessage = (m) => {
        if (JSON.parse(m.data).type === 'snapshot') ws.close(1000, 'done');
      };
      ws.onclose = (e) => { clearTimeout(timer); resolve({ code: e.code, wasClean: e.wasClean }); };
    }), `${server.base.replace('http', 'ws')}/v1/sessions/ws-close/ws`);
    assert.deepEqual(result, { code: 1000, wasClean: true });
  } finally {
    await page.close();
  }
});

// Chromium's own WebSocket offers permessage-deflate and compresses what it
// sends: the server agrees, the snapshot reads back exactly as GET /snapshot
// serves it, and Chromium's compressed subscribe on the multiplexed socket is
// read (issue 18).
test('chromium WebSocket: permessage-deflate agreed both ways', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  const long = 'A long delta, repeated so that it is worth deflating. '.repeat(30);
  await post(server.base, 'ws-z', [1, 2, 3].map((i) => ({ id: `z${i}`, type: 'text.delta', runId: 'r', messageId: 'm', sequence: i, payload: { delta: long } })));
  const snap = await snapshot(server.base, 'ws-z');
  const page = await browser.newPage();
  try {
    await page.goto(`${server.base}/`);
    const got = await page.evaluate(async (base) => {
      const open = (path, onopen, want) => new Promise((resolve, reject) => {
        const ws = new WebSocket(base + path);
        const out = [];
        const timer = setTimeout(() => reject(new Error(`${path}: ${out.length} messages in 10 s`)), 10000);
        ws.onopen = () => onopen(ws);
        ws.onmessage = (m) => {
          out.push(JSON.parse(m.data));
          if (out.length === want) { clearTimeout(timer); ws.close(1000); resolve({ extensions: ws.extensions, out }); }
        };
      });
      const single = await open('/v1/sessions/ws-z/ws', () => {}, 1);
      const mux = await open('/v1/streams/ws', (ws) => ws.send(JSON.stringify({ type: 'subscribe', sessionId: 'ws-z', cursor: '0' })), 4);
      return { single, mux };
    }, server.base.replace('http', 'ws'));
    assert.match(got.single.extensions, /^permessage-deflate/);
    assert.deepEqual(got.single.out[0], snap);
    assert.match(got.mux.extensions, /^permessage-deflate/);
    assert.deepEqual(got.mux.out[0], { type: 'subscribed', sessionId: 'ws-z' });
    assert.deepEqual(got.mux.out.slice(1).map((f) => [f.sessionId, f.cursor]), [['ws-z', 1], ['ws-z', 2], ['ws-z', 3]]);
    assert.ok(got.mux.out.slice(1).every((f) => JSON.stringify(f).includes(long)));
  } finally {
    await page.close();
  }
});

// Chromium's own EventSource: the ids it keeps (and would send back as
// Last-Event-ID) name the epoch of the log they came from (issue 12 item 2).
test('chromium EventSource: lastEventId is <epoch>:<cursor>', async (t) => {
  if (!browser) return t.skip(NO_CHROMIUM);
  await post(server.base, 'es-id', [{ id: 'i1', type: 'text.delta', runId: 'r', messageId: 'm', sequence: 1, payload: { delta: 'hi' } }]);
  const snap = await snapshot(server.base, 'es-id');
  const page = await browser.newPage();
  try {
    await page.goto(`${server.base}/`);
    const id = await page.evaluate(async (url) => new Promise((resolve, reject) => {
      const es = new EventSource(url);
      const timer = setTimeout(() => reject(new Error('no snapshot within 10 s')), 10000);
      es.addEventListener('snapshot', (e) => { clearTimeout(timer); es.close(); resolve(e.lastEventId); });
    }), `${server.base}/v1/sessions/es-id/stream`);
    assert.equal(id, `${snap.epoch}:1`);
  } finally {
    await page.close();
  }
});
