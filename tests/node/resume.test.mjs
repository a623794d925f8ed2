// Resume through a client nobody here wrote: the npm `eventsource` package,
// which reconnects by itself and sends back only `Last-Event-ID`. Its
// resume must never lay one log's frames on another log's state: not after a
// memory-store restart (a new log under the same session id), not after a
// deletion (issue 12 items 1 and 2).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSource } from 'eventsource';
import { startServer, post } from './lib/server.mjs';

const delta = (id, text, sequence) => ({
  id, eventClass: 'model.delta', sequence, messageId: id, payload: { delta: text },
});

/** Frames of an EventSource as a queue the test awaits, in arrival order. */
function frames(url) {
  const es = new EventSource(url);
  const queue = [];
  const waiting = [];
  const push = (type) => (e) => {
    const f = { type, id: e.lastEventId, data: JSON.parse(e.data) };
    const w = waiting.shift();
    if (w) w(f); else queue.push(f);
  };
  for (const type of ['snapshot', 'delta', 'reset']) es.addEventListener(type, push(type));
  return {
    es,
    next: () => new Promise((resolve, reject) => {
      if (queue.length) return resolve(queue.shift());
      const timer = setTimeout(() => reject(new Error('no frame within 20 s')), 20000);
      waiting.push((f) => { clearTimeout(timer); resolve(f); });
    }),
  };
}

const texts = (snap) => snap.state.messages.flatMap((m) => m.parts).filter((p) => p.type === 'text').map((p) => p.text);

test('eventsource across a memory-store restart: reset + the new log, never frames 6..10 of another log', async () => {
  let srv = await startServer();
  const port = new URL(srv.base).port;
  for (let i = 1; i <= 5; i++) await post(srv.base, 's', delta(`old${i}`, `old ${i}`, i));
  const s = frames(`${srv.base}/v1/sessions/s/stream`);
  try {
    const first = await s.next();
    assert.equal(first.type, 'snapshot');
    assert.equal(first.id, `${first.data.epoch}:5`, 'the SSE id carries the epoch');
    await srv.stop();
    srv = await startServer(['--listen', `127.0.0.1:${port}`]);
    for (let i = 1; i <= 10; i++) await post(srv.base, 's', delta(`new${i}`, `new ${i}`, i));
    // The client reconnects by itself with Last-Event-ID `<old epoch>:5`.
    const reset = await s.next();
    assert.deepEqual([reset.type, reset.data.reason], ['reset', 'epoch_mismatch']);
    const snap = await s.next();
    assert.equal(snap.type, 'snapshot');
    assert.notEqual(snap.data.epoch, first.data.epoch);
    assert.ok(texts(snap.data).every((t) => t.startsWith('new')), 'nothing of the old log');
    let at = snap.data.cursor;
    while (at < 10) {
      const f = await s.next();
      assert.equal(f.type, 'delta');
      assert.equal(f.data.cursor, at + 1, 'gapless after the snapshot');
      at = f.data.cursor;
    }
  } finally {
    s.es.close();
    await srv.stop();
  }
});

test('eventsource after a deletion: the caught-up client is reset, the viewer never shows both lives', async () => {
  const srv = await startServer();
  const s = frames(`${srv.base}/v1/sessions/d/stream`);
  try {
    assert.equal((await s.next()).type, 'snapshot');
    await post(srv.base, 'd', delta('a', 'before', 1));
    const d1 = await s.next();
    assert.equal(d1.data.cursor, 1);
    const r = await fetch(`${srv.base}/v1/sessions/d`, { method: 'DELETE' });
    assert.equal(r.status, 200);
    // Live: reset + the tombstone's snapshot.
    assert.deepEqual((await s.next()).data.reason, 'session_deleted');
    assert.deepEqual(texts((await s.next()).data), []);
    await post(srv.base, 'd', delta('b', 'after', 1));
    assert.equal((await s.next()).data.cursor, 2);
    // A second client that saw only the old life reconnects with its id.
    const resp = await fetch(`${srv.base}/v1/sessions/d/stream`, { headers: { 'last-event-id': d1.id } });
    const reader = resp.body.getReader();
    let text = '';
    while (!text.includes('event: snapshot')) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    assert.match(text, /event: reset\ndata: \{"type":"reset","reason":"session_deleted"\}/);
    assert.doesNotMatch(text, /event: delta/);
  } finally {
    s.es.close();
    await srv.stop();
  }
});
