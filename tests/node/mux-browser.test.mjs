// Twenty sessions on ONE connection, followed by clients nobody here wrote:
// Chromium's own EventSource (over HTTP/1.1, where a page has only six
// connections per origin) and the npm `eventsource` package. Events are
// posted to all twenty while the connection is cut in the middle of a frame
// by a TCP proxy; the client reconnects by itself with the Last-Event-ID it
// kept, whose per-session positions resume every session from its own
// cursor: each session gets every frame exactly once, and its text whole.
// Chromium asks for gzip, so its stream (and the cut) is compressed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { EventSource } from 'eventsource';
import { startServer, post } from './lib/server.mjs';
import { launchChromium, NO_CHROMIUM } from './lib/browser.mjs';

const N = 20;
const SESSIONS = Array.from({ length: N }, (_, i) => `mux-${i}`);

/** A TCP proxy to `port` that can cut its connections in the middle of the next bytes the server sends. */
async function proxy(port) {
  const pairs = new Set();
  let armed = false;
  let connections = 0;
  let cuts = 0;
  let gzipStreams = 0;
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(port, '127.0.0.1');
    const pair = { client, upstream, stream: false };
    pairs.add(pair);
    const drop = () => { pairs.delete(pair); client.destroy(); upstream.destroy(); };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.on('data', (buf) => {
      // A stream's frames, not a page load: cut halfway through them. (The
      // browser asks for gzip, so the frames themselves may be compressed;
      // the response head says which connection is a stream.)
      if (buf.includes('text/event-stream')) {
        pair.stream = true;
        if (/content-encoding: gzip/i.test(buf.toString('latin1'))) gzipStreams++;
        client.write(buf);
        return;
      }
      if (armed && pair.stream && buf.length > 8) {
        armed = false;
        cuts++;
        client.write(buf.subarray(0, Math.floor(buf.length / 2)), () => drop());
        return;
      }
      client.write(buf);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    armCut: () => { armed = true; },
    get cuts() { return cuts; },
    get gzipStreams() { return gzipStreams; },
    get connections() { return connections; },
    close: () => { for (const p of pairs) { p.client.destroy(); p.upstream.destroy(); } server.close(); },
  };
}

const event = (s, i) => ({
  id: `${s}-${i}`, type: 'text.delta', runId: 'r', messageId: `${s}-m`, payload: { delta: `${s}:${i} ` },
});
const expected = (s, upto) => Array.from({ length: upto }, (_, i) => `${s}:${i} `).join('');

/** Post events [from, to) to every session, the sessions interleaved. */
async function feedAll(base, from, to) {
  for (let i = from; i < to; i++) await Promise.all(SESSIONS.map((s) => post(base, s, event(s, i))));
}

/** What one client saw: per session, its snapshot text and the cursors and text of its deltas. */
function tally() {
  const bySession = {};
  return {
    bySession,
    apply(type, data) {
      const s = (bySession[data.sessionId] ??= { snapshots: 0, resets: 0, cursors: [], text: '' });
      if (type === 'snapshot') {
        s.snapshots++;
        s.cursors = [];
        s.text = data.state.messages.flatMap((m) => m.parts).filter((p) => p.type === 'text').map((p) => p.text).join('');
      } else if (type === 'reset') {
        s.resets++;
      } else if (type === 'delta') {
        s.cursors.push(data.cursor);
        for (const { chunk } of data.chunks) if (chunk.type === 'text-delta') s.text += chunk.delta;
      }
    },
  };
}

function checkAll(bySession, seeded, total) {
  for (const s of SESSIONS) {
    const got = bySession[s];
    assert.ok(got, `${s}: nothing received`);
    assert.equal(got.snapshots, 1, `${s}: one snapshot, then only deltas across the cut`);
    assert.equal(got.resets, 0, `${s}: no reset`);
    assert.deepEqual(got.cursors, Array.from({ length: total - seeded }, (_, i) => seeded + 1 + i), `${s}: every frame once, in order`);
    assert.equal(got.text, expected(s, total), `${s}: the text, whole`);
  }
}

let srv;
let px;
before(async () => {
  srv = await startServer();
  px = await proxy(Number(new URL(srv.base).port));
});
after(async () => {
  px?.close();
  await srv?.stop();
});

test('Chromium EventSource: 20 sessions on one HTTP/1.1 connection, cut mid-frame, every frame once', async (t) => {
  const browser = await launchChromium();
  if (!browser) return t.skip(NO_CHROMIUM);
  try {
    const page = await browser.newPage();
    await page.goto(`${px.base}/healthz`);
    const seeded = 2;
    await feedAll(srv.base, 0, seeded);
    await page.evaluate(([sessions, snippet]) => {
      const t = new Function(`return (${snippet})()`)();
      window.__t = t;
      window.__opens = 0;
      const es = new EventSource(`/v1/streams?sessions=${sessions.map(encodeURIComponent).join(',')}`);
      es.addEventListener('open', () => { window.__opens++; });
      for (const type of ['snapshot', 'delta', 'reset']) {
        es.addEventListener(type, (e) => t.apply(type, JSON.parse(e.data)));
      }
      window.__es = es;
    }, [SESSIONS, tally.toString()]);
    await page.waitForFunction((n) => Object.values(window.__t.bySession).filter((s) => s.snapshots).length === n, N, { timeout: 20000 });
    // Cut the stream halfway through a write while every session moves on.
    // Chromium asks for gzip: the frames it reads (and the cut) are compressed.
    assert.ok(px.gzipStreams >= 1, 'the stream was gzipped');
    px.armCut();
    const cutsBefore = px.cuts;
    await feedAll(srv.base, seeded, 6);
    await feedAll(srv.base, 6, 10);
    assert.ok(px.cuts > cutsBefore, 'the proxy cut the stream mid-frame');
    await page.waitForFunction(([sessions, c]) => sessions.every((s) => {
      const got = window.__t.bySession[s];
      return got && got.cursors.at(-1) === c;
    }), [SESSIONS, 10], { timeout: 30000 });
    const { bySession, opens } = await page.evaluate(() => ({ bySession: window.__t.bySession, opens: window.__opens }));
    assert.ok(opens >= 2, `EventSource reconnected by itself (opened ${opens} times)`);
    checkAll(bySession, seeded, 10);
  } finally {
    await browser.close();
  }
});

test('npm eventsource: the same twenty sessions resume from one Last-Event-ID', async () => {
  const names = SESSIONS.map((s) => `${s}-es`);
  const t = tally();
  const seeded = 1;
  for (const s of names) await post(srv.base, s, event(s, 0));
  let opens = 0;
  const es = new EventSource(`${px.base}/v1/streams?sessions=${names.join(',')}`);
  es.addEventListener('open', () => { opens++; });
  const done = new Promise((resolve) => {
    for (const type of ['snapshot', 'delta', 'reset']) {
      es.addEventListener(type, (e) => {
        t.apply(type, JSON.parse(e.data));
        if (names.every((s) => t.bySession[s]?.cursors.at(-1) === 6)) resolve();
      });
    }
  });
  try {
    await new Promise((resolve, reject) => {
      const started = Date.now();
      const check = setInterval(() => {
        if (names.every((s) => t.bySession[s]?.snapshots === 1)) { clearInterval(check); resolve(); }
        else if (Date.now() - started > 20000) { clearInterval(check); reject(new Error('no snapshot of every session within 20 s')); }
      }, 20);
    });
    px.armCut();
    for (let i = seeded; i < 6; i++) await Promise.all(names.map((s) => post(srv.base, s, event(s, i))));
    let timer;
    await Promise.race([done, new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('not every frame within 30 s')), 30000); })]);
    clearTimeout(timer);
    assert.ok(opens >= 2, `eventsource reconnected (opened ${opens} times)`);
    for (const s of names) {
      const got = t.bySession[s];
      assert.equal(got.snapshots, 1, s);
      assert.deepEqual(got.cursors, [2, 3, 4, 5, 6], s);
      assert.equal(got.text, expected(s, 6), s);
    }
  } finally {
    es.close();
  }
});
