// A session followed as a Durable Stream by a client nobody here wrote:
// @durable-streams/client reads /ds/v1/stream/sessions/<id> over SSE.
// When the server ends a response (every sse_span_secs) the client
// reconnects by itself from its last offset. When a TCP proxy between them
// cuts the connection mid-response (wherever the bytes are, mid-frame
// too), the client hands the error to the application (its own
// behaviour: a chunked body cut short is an error), which resumes a new
// reader from its saved offset. Either way every frame arrives once and in
// order. An offset of a deleted session is 410. The client's
// IdempotentProducer writes a session as a runtime would: batched,
// pipelined (out-of-order arrivals it retries itself), and a restarted
// instance's new epoch fences the old one out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { stream, DurableStream, IdempotentProducer, StaleEpochError } from '@durable-streams/client';
import { startServer, post } from './lib/server.mjs';

const T = 15000;

/** A TCP proxy to `target` (host:port) whose connections `cut()` destroys. */
async function cuttingProxy(target) {
  const [host, port] = target.split(':');
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    /** Reset every connection (RST): the network failing. */
    reset() {
      const n = sockets.size;
      for (const s of sockets) s.resetAndDestroy();
      return n;
    },
    close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }),
  };
}

/** Wait until `cond()` holds (checked as batches arrive). */
async function until(cond, what) {
  const deadline = Date.now() + T;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const delta = (i) => ({ id: `e${i}`, type: 'text.delta', runId: 'r', messageId: 'm1', payload: { delta: `${i} ` } });

test('the client follows a session across the server ending its SSE responses, every frame once', async () => {
  // The server ends each SSE response after a second (sse_span_secs), as
  // the protocol asks; the client reconnects by itself from its offset.
  const srv = await startServer([], { PROJECTOR_DURABLE_STREAMS__SSE_SPAN_SECS: '1' });
  try {
    await post(srv.base, 'follow', [{ type: 'run.started', runId: 'r' }, ...[1, 2, 3, 4].map(delta)]);
    const frames = [];
    let offset;
    const connections = [];
    const res = await stream({
      url: `${srv.base}/ds/v1/stream/sessions/follow`,
      offset: '-1',
      live: 'sse',
      fetch: (url, init) => {
        connections.push(String(url));
        return fetch(url, init);
      },
    });
    res.subscribeJson(async (batch) => {
      frames.push(...batch.items);
      offset = batch.offset;
    });
    await until(() => frames.length >= 5, 'the first 5 frames');
    let next = 5;
    while (connections.length < 4) {
      await post(srv.base, 'follow', [next, next + 1].map(delta));
      next += 2;
      await until(() => frames.length >= next, `${next} frames`);
      await new Promise((r) => setTimeout(r, 300));
    }
    res.cancel();
    assert.deepEqual(frames.map((f) => f.cursor), Array.from({ length: next }, (_, i) => i + 1));
    assert.ok(frames.every((f) => f.type === 'delta'));
    // Each reconnection resumed from an offset the server gave.
    assert.ok(connections.slice(1).every((u) => /offset=\d{16}_[0-9a-f]+/.test(u)), connections.join('\n'));

    // A new reader resumes after the saved offset: only what came since.
    await post(srv.base, 'follow', [delta(100)]);
    const again = await stream({ url: `${srv.base}/ds/v1/stream/sessions/follow`, offset, live: false });
    const rest = await again.json();
    assert.deepEqual(rest.map((f) => f.cursor), [next + 1]);

    // The session deleted and written again: the old offsets are gone (410).
    const del = await fetch(`${srv.base}/v1/sessions/follow`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    await post(srv.base, 'follow', [{ type: 'run.started', runId: 'r2' }]);
    const stale = await fetch(`${srv.base}/ds/v1/stream/sessions/follow?offset=${offset}`);
    assert.equal(stale.status, 410);
    assert.equal((await stale.json()).code, 'offset_gone');
  } finally {
    await srv.stop();
  }
});

test('after a reset connection, a reader resumed from the saved offset gets every frame once', async () => {
  const srv = await startServer();
  const proxy = await cuttingProxy(srv.base.replace('http://', ''));
  let reader;
  try {
    await post(srv.base, 'reset', [{ type: 'run.started', runId: 'r' }]);
    const frames = [];
    let offset = '-1';
    let failures = 0;
    // Whether the reader's SSE response has begun. A reader first reads
    // what is there with a plain GET, then opens its SSE request; a reset
    // that lands before a response has begun is a failed fetch, which the
    // client retries by itself (its backoff), so the application never
    // hears of it. Each round below waits for an SSE response to cut.
    let sseLive = false;
    // The application's loop: read, and after an error resume from the
    // offset of the last batch it handled.
    const follow = async () => {
      sseLive = false;
      reader = await stream({
        url: `${proxy.base}/ds/v1/stream/sessions/reset`,
        offset,
        live: 'sse',
        fetch: async (url, init) => {
          const res = await fetch(url, init);
          if (res.ok && String(url).includes('live=sse')) sseLive = true;
          return res;
        },
      });
      reader.subscribeJson(async (batch) => {
        frames.push(...batch.items);
        offset = batch.offset;
      });
      reader.closed.catch(() => {
        failures += 1;
        follow();
      });
    };
    await follow();
    let next = 1;
    for (let round = 0; round < 4; round++) {
      await until(() => sseLive, "the reader's SSE response");
      const posting = post(srv.base, 'reset', [next + 1, next + 2].map(delta));
      if (round % 2) {
        // Reset while the frames are on their way.
        await new Promise((r) => setTimeout(r, round));
        assert.ok(proxy.reset() > 0, 'a connection was reset');
        await posting;
        next += 2;
      } else {
        await posting;
        next += 2;
        await until(() => frames.length >= next, `${next} frames`);
        assert.ok(proxy.reset() > 0, 'a connection was reset');
      }
      await until(() => failures > round, 'the reset to reach the reader');
      await until(() => frames.length >= next, `${next} frames`);
    }
    await post(srv.base, 'reset', [delta(99)]);
    next += 1;
    await until(() => frames.length >= next, `${next} frames`);
    assert.deepEqual(frames.map((f) => f.cursor), Array.from({ length: next }, (_, i) => i + 1));
  } finally {
    // Also when a step failed: a reader left retrying would keep the test
    // process alive.
    reader?.cancel();
    await proxy.close();
    await srv.stop();
  }
});

test('a long-poll reader of a session gets the next frame when it comes', async () => {
  const srv = await startServer([], { PROJECTOR_DURABLE_STREAMS__LONG_POLL_MS: '10000' });
  try {
    await post(srv.base, 'poll', [{ type: 'run.started', runId: 'r' }]);
    const res = await stream({ url: `${srv.base}/ds/v1/stream/sessions/poll`, offset: 'now', live: 'long-poll' });
    const got = [];
    res.subscribeJson(async (b) => { got.push(...b.items); });
    await post(srv.base, 'poll', [delta(1)]);
    await until(() => got.length === 1, 'the frame');
    res.cancel();
    assert.equal(got[0].cursor, 2);
    assert.equal(got[0].eventClass, 'text.delta');
  } finally {
    await srv.stop();
  }
});

test("the client's idempotent producers write a session once, and a restart fences the old instance out", async () => {
  const srv = await startServer();
  try {
    const url = `${srv.base}/ds/v1/stream/sessions/produced`;
    const handle = () => new DurableStream({ url, contentType: 'application/json' });
    const errors = [];
    const old = new IdempotentProducer(handle(), 'runtime', {
      epoch: 0, lingerMs: 1, maxInFlight: 5, maxBatchBytes: 2048, onError: (e) => errors.push(e),
    });
    for (let i = 1; i <= 300; i++) old.append(JSON.stringify(delta(i)));
    await old.flush();
    assert.deepEqual(errors, []);
    // The runtime restarts elsewhere: epoch 1 from seq 0.
    const now = new IdempotentProducer(handle(), 'runtime', { epoch: 1, lingerMs: 1 });
    for (let i = 301; i <= 320; i++) now.append(JSON.stringify(delta(i)));
    await now.flush();
    // The old instance, still running, is refused.
    old.append(JSON.stringify(delta(999)));
    await old.flush().catch((e) => errors.push(e));
    assert.ok(errors.length > 0 && errors.every((e) => e instanceof StaleEpochError), String(errors));
    const res = await stream({ url, offset: '-1', live: false });
    const frames = await res.json();
    assert.deepEqual(frames.map((f) => f.eventId), Array.from({ length: 320 }, (_, i) => `e${i + 1}`));
    assert.deepEqual(frames.map((f) => f.cursor), Array.from({ length: 320 }, (_, i) => i + 1));
  } finally {
    await srv.stop();
  }
});
