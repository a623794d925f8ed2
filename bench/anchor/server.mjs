// The anchor: what a team builds today in JavaScript. Runtimes POST the same
// events as to agent-projector; each session is one AI SDK UI message stream
// (createUIMessageStream + JsonToSseTransformStream), made resumable and
// shareable across subscribers with Vercel's resumable-stream over Redis.
// Kept small, honest and idiomatic: no custom fan-out, no projection.
//
//   PORT=0 REDIS_URL=redis://127.0.0.1:6379 node server.mjs
//   POST /v1/sessions/:id/events   (JSON object, array, or NDJSON)
//   GET  /v1/sessions/:id/stream   (text/event-stream of UIMessageChunks)
import http from 'node:http';
import { createUIMessageStream, JsonToSseTransformStream } from 'ai';
import { createClient } from 'redis';
import { createResumableStreamContext } from 'resumable-stream';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const publisher = createClient({ url: redisUrl });
const subscriber = createClient({ url: redisUrl });
await Promise.all([publisher.connect(), subscriber.connect()]);
const keyPrefix = `anchor-${process.pid}-${Date.now()}`;
const streams = createResumableStreamContext({
  waitUntil: (p) => p.catch(() => {}),
  publisher,
  subscriber,
  keyPrefix,
});

/** Live sessions: the writer of their UI message stream. */
const sessions = new Map();

async function openSession(id) {
  let session = sessions.get(id);
  if (session) return session;
  session = { ready: null, writer: null, textOpen: false };
  sessions.set(id, session);
  session.ready = (async () => {
    let release;
    const uiStream = createUIMessageStream({
      execute: ({ writer }) =>
        new Promise((resolve) => {
          session.writer = writer;
          release = resolve;
        }),
    });
    session.end = () => release?.();
    const sse = await streams.createNewResumableStream(id, () =>
      uiStream.pipeThrough(new JsonToSseTransformStream()),
    );
    // The creator's own copy is drained so that the stream keeps flowing.
    (async () => {
      const reader = sse.getReader();
      while (!(await reader.read()).done);
    })();
    while (!session.writer) await new Promise((r) => setImmediate(r));
    session.writer.write({ type: 'start', messageId: `msg-${id}` });
  })();
  await session.ready;
  return session;
}

/** The AI SDK chunks for one runtime event (text deltas; anything else as data). */
function chunksOf(session, ev) {
  const type = ev.type ?? ev.eventClass;
  if (type === 'text.delta' || type === 'model.delta') {
    const out = [];
    if (!session.textOpen) {
      out.push({ type: 'text-start', id: 't0' });
      session.textOpen = true;
    }
    out.push({ type: 'text-delta', id: 't0', delta: String(ev.payload?.delta ?? '') });
    return out;
  }
  return [{ type: 'data-event', data: { type, id: ev.id ?? null } }];
}

function parseEvents(body, contentType) {
  if ((contentType ?? '').includes('ndjson')) {
    return body.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  }
  const v = JSON.parse(body);
  return Array.isArray(v) ? v : [v];
}

const server = http.createServer(async (req, res) => {
  const m = req.url.match(/^\/v1\/sessions\/([^/?]+)\/(events|stream)/);
  if (!m) {
    res.writeHead(req.url === '/healthz' ? 200 : 404).end();
    return;
  }
  const id = decodeURIComponent(m[1]);
  try {
    if (m[2] === 'events' && req.method === 'POST') {
      let body = '';
      for await (const c of req) body += c;
      const events = parseEvents(body, req.headers['content-type']);
      const session = await openSession(id);
      for (const ev of events) for (const c of chunksOf(session, ev)) session.writer.write(c);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ accepted: events.length }));
    } else if (m[2] === 'stream' && req.method === 'GET') {
      await openSession(id);
      const stream = await streams.resumeExistingStream(id);
      if (!stream) {
        res.writeHead(422).end('stream is done');
        return;
      }
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        'x-vercel-ai-ui-message-stream': 'v1',
      });
      const reader = stream.getReader();
      req.on('close', () => reader.cancel().catch(() => {}));
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        res.write(value);
      }
      res.end();
    } else {
      res.writeHead(405).end();
    }
  } catch (e) {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(e));
  }
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`anchor listening on http://127.0.0.1:${server.address().port}`);
});
