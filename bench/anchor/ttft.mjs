// Time to first token of an AI SDK chat, three ways, in one run:
//
//   direct     the browser POSTs to the app's AI SDK route (`streamText` +
//              `toUIMessageStreamResponse`), the stream nobody can resume;
//   resumable  the same route made resumable the way the AI SDK documents
//              it: `consumeSseStream` hands a copy to Vercel's
//              `resumable-stream` over Redis (the anchor's design);
//   gateway    the browser POSTs to agent-projector's `/v1/chat` (embedded
//              durable store), which forwards to the same route, makes every
//              batch of chunks durable and answers from its log.
//
// And the time a second tab joining an answer in flight waits for its first
// token: `resumeExistingStream` against `GET /v1/chat/{id}/stream`.
//
// The route's model is the AI SDK's own mock (`MockLanguageModelV3`, no
// network) answering at once, so the figures are the cost of each path, not
// of a model. Requests are sequential and the paths interleaved, so that the
// machine's noise hits all three alike.
//
//   cargo build --release && (cd bench/anchor && npm ci && node ttft.mjs)
//   env: TTFT_REQUESTS (default 300), TTFT_JOINS (default 100),
//        REDIS_URL (default redis://127.0.0.1:6379), PROJECTOR_BIN
import http from 'node:http';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { streamText } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { createClient } from 'redis';
import { createResumableStreamContext } from 'resumable-stream';

const REQUESTS = Number(process.env.TTFT_REQUESTS ?? 300);
const JOINS = Number(process.env.TTFT_JOINS ?? 100);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.PROJECTOR_BIN ?? path.join(root, 'target/release/agent-projector');

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 40, text: 40, reasoning: 0 },
};
/** Chats whose model holds after its first words until the gate opens. */
const gates = new Map();

/** The mock model: 40 words at once, or the first two then a wait for the chat's gate. */
function model(chatId) {
  const words = Array.from({ length: 40 }, (_, i) => ({ type: 'text-delta', id: 't', delta: `w${i} ` }));
  const gate = gates.get(chatId);
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: new ReadableStream({
        async start(c) {
          c.enqueue({ type: 'stream-start', warnings: [] });
          c.enqueue({ type: 'text-start', id: 't' });
          for (const [i, w] of words.entries()) {
            if (i === 2 && gate) await gate.promise;
            c.enqueue(w);
          }
          c.enqueue({ type: 'text-end', id: 't' });
          c.enqueue({ type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage });
          c.close();
        },
      }),
    }),
  });
}

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const publisher = createClient({ url: redisUrl });
const subscriber = createClient({ url: redisUrl });
await Promise.all([publisher.connect(), subscriber.connect()]);
const resumable = createResumableStreamContext({
  waitUntil: (p) => p.catch(() => {}),
  publisher,
  subscriber,
  keyPrefix: `ttft-${process.pid}-${Date.now()}`,
});

// The app's AI SDK routes.
const app = http.createServer(async (req, res) => {
  if (req.method === 'GET') {
    // GET /api/resumable/:id/stream: the resumable-stream recipe's resume route.
    const id = decodeURIComponent(req.url.split('/')[3]);
    const stream = await resumable.resumeExistingStream(id);
    if (!stream) return res.writeHead(204).end();
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-vercel-ai-ui-message-stream': 'v1' });
    Readable.fromWeb(stream).pipe(res);
    return;
  }
  let body = '';
  for await (const c of req) body += c;
  const { id, messages } = JSON.parse(body);
  const prompt = messages.at(-1).parts.map((p) => p.text ?? '').join('');
  const result = streamText({ model: model(id), prompt });
  const options = req.url === '/api/resumable'
    ? { consumeSseStream: ({ stream }) => resumable.createNewResumableStream(id, () => stream) }
    : {};
  const response = result.toUIMessageStreamResponse(options);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  Readable.fromWeb(response.body).pipe(res);
}).listen(0, '127.0.0.1');
await once(app, 'listening');
const appBase = `http://127.0.0.1:${app.address().port}`;

// agent-projector in front of the plain route, on its embedded durable store.
const dataDir = mkdtempSync(path.join(tmpdir(), 'ttft-'));
const projector = spawn(BIN, ['--store', 'embedded', '--data-dir', dataDir, '--listen', '127.0.0.1:0'], {
  env: {
    ...process.env,
    NO_COLOR: '1',
    RUST_LOG: 'warn,agent_projector=info',
    PROJECTOR_UPSTREAM__CHAT_URL: `${appBase}/api/chat`,
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([`127.0.0.1:${app.address().port}`]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'ttft-bench',
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const gatewayBase = await new Promise((resolve, reject) => {
  createInterface({ input: projector.stdout }).on('line', (l) => {
    const m = l.match(/listening on (http:\/\/[0-9.:]+)/);
    if (m) resolve(m[1]);
  });
  projector.once('exit', (c) => reject(new Error(`agent-projector exited with ${c}`)));
});

const body = (id) => JSON.stringify({
  id,
  trigger: 'submit-message',
  messages: [{ id: `${id}-u`, role: 'user', parts: [{ type: 'text', text: 'Tell me something.' }] }],
});
const PATHS = {
  direct: (id) => fetch(`${appBase}/api/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(id) }),
  resumable: (id) => fetch(`${appBase}/api/resumable`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(id) }),
  gateway: (id) => fetch(`${gatewayBase}/v1/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(id) }),
};
const JOIN = {
  resumable: { send: PATHS.resumable, join: (id) => fetch(`${appBase}/api/resumable/${id}/stream`) },
  gateway: { send: PATHS.gateway, join: (id) => fetch(`${gatewayBase}/v1/chat/${id}/stream`) },
};

/** Read a UI message stream until its first text delta (ms since `t0`), then keep it for draining. */
async function firstToken(response, t0) {
  if (response.status !== 200) throw new Error(`answered ${response.status}: ${await response.text()}`);
  const reader = response.body.getReader();
  const dec = new TextDecoder();
  let seen = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended without a text delta: ${seen}`);
    seen += dec.decode(value, { stream: true });
    if (seen.includes('"type":"text-delta"')) return { ms: performance.now() - t0, reader };
  }
}
async function drain(reader) {
  while (!(await reader.read()).done);
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const stats = (xs) => ({ p50: pct(xs, 50), p90: pct(xs, 90), p99: pct(xs, 99), mean: xs.reduce((a, b) => a + b, 0) / xs.length });

async function sendRound(name, id) {
  const t0 = performance.now();
  const { ms, reader } = await firstToken(await PATHS[name](id), t0);
  await drain(reader);
  return { ms, total: performance.now() - t0 };
}

async function joinRound(name, id) {
  let open;
  gates.set(id, { promise: new Promise((r) => { open = r; }) });
  const sender = await firstToken(await JOIN[name].send(id), performance.now());
  const t0 = performance.now();
  const joined = await firstToken(await JOIN[name].join(id), t0);
  open();
  await Promise.all([drain(sender.reader), drain(joined.reader)]);
  gates.delete(id);
  return joined.ms;
}

// Warm up every path, then measure.
for (let i = 0; i < 20; i++) for (const name of Object.keys(PATHS)) await sendRound(name, `warm-${name}-${i}`);
const ttft = { direct: [], resumable: [], gateway: [] };
const total = { direct: [], resumable: [], gateway: [] };
const names = Object.keys(PATHS);
for (let i = 0; i < REQUESTS; i++) {
  for (let k = 0; k < names.length; k++) {
    const name = names[(i + k) % names.length];
    const r = await sendRound(name, `send-${name}-${i}`);
    ttft[name].push(r.ms);
    total[name].push(r.total);
  }
}
const join = { resumable: [], gateway: [] };
for (let i = 0; i < JOINS; i++) {
  for (const name of i % 2 ? ['resumable', 'gateway'] : ['gateway', 'resumable']) {
    join[name].push(await joinRound(name, `join-${name}-${i}`));
  }
}

const f = (x) => x.toFixed(2);
console.log(`\nTime to first token, ${REQUESTS} sequential chats per path (ms; 40-word answer from the mock model)\n`);
console.log('| path | p50 | p90 | p99 | mean | p50 / direct | whole answer p50 |');
console.log('|---|---:|---:|---:|---:|---:|---:|');
const base = stats(ttft.direct).p50;
for (const name of names) {
  const s = stats(ttft[name]);
  console.log(`| ${name} | ${f(s.p50)} | ${f(s.p90)} | ${f(s.p99)} | ${f(s.mean)} | ${f(s.p50 / base)} | ${f(stats(total[name]).p50)} |`);
}
console.log(`\nA second tab joining an answer in flight: time to its first token, ${JOINS} joins per path (ms)\n`);
console.log('| path | p50 | p90 | p99 | mean |');
console.log('|---|---:|---:|---:|---:|');
for (const name of Object.keys(join)) {
  const s = stats(join[name]);
  console.log(`| ${name} | ${f(s.p50)} | ${f(s.p90)} | ${f(s.p99)} | ${f(s.mean)} |`);
}

projector.kill('SIGTERM');
await once(projector, 'exit');
rmSync(dataDir, { recursive: true, force: true });
app.close();
await Promise.all([publisher.quit(), subscriber.quit()]);
