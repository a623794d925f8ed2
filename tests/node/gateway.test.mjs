// Issue 14 item 2: the chat gateway with the real `ai` package on both
// sides. Upstream: an AI SDK route (`streamText` on the SDK's own mock
// language model, no network, `toUIMessageStreamResponse`) served by Node.
// Browser side: `AbstractChat` + `DefaultChatTransport` pointed at
// agent-projector's `/v1/chat`, as `useChat` is. Send, stream, a second tab
// resuming mid-answer with identical parts, the browser stopping while the
// upstream run goes on, and a failing model ending the chat in `error`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { AbstractChat, DefaultChatTransport, streamText } from 'ai';
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test';
import { startServer, snapshot, plain } from './lib/server.mjs';

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** A gate a test opens: the mock model holds the second half of its answer until then. */
let gate = Promise.resolve();
let openGate = () => {};
function closeGate() {
  gate = new Promise((r) => { openGate = r; });
}

/** What the mock model says: words of the answer (the second half after the
 *  gate opens), or an error. */
function model(fail) {
  const words = 'It is sunny in Oslo today , with a light breeze .'.split(' ')
    .map((w) => ({ type: 'text-delta', id: 't1', delta: `${w} ` }));
  const head = [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't1' }, ...words.slice(0, 5)];
  const tail = [...words.slice(5), { type: 'text-end', id: 't1' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage }];
  const held = gate;
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: fail
        ? simulateReadableStream({ chunks: [{ type: 'stream-start', warnings: [] }, { type: 'error', error: new Error('model overloaded') }] })
        : new ReadableStream({
          async start(c) {
            for (const x of head) c.enqueue(x);
            await held;
            for (const x of tail) c.enqueue(x);
            c.close();
          },
        }),
    }),
  });
}

let upstream;
let server;
let answers = 0;

before(async () => {
  // The app's AI SDK route.
  upstream = createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    const { messages } = JSON.parse(body);
    const last = messages[messages.length - 1];
    const text = last.parts.map((p) => p.text ?? '').join('');
    const result = streamText({ model: model(text.includes('fail')), prompt: text, onError: () => {} });
    answers += 1;
    const response = result.toUIMessageStreamResponse({ generateMessageId: () => `answer-${answers}` });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    Readable.fromWeb(response.body).pipe(res);
  }).listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const { port } = upstream.address();
  server = await startServer([], {
    PROJECTOR_UPSTREAM__CHAT_URL: `http://127.0.0.1:${port}/api/chat`,
    PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([`127.0.0.1:${port}`]),
    PROJECTOR_CONTROLS__SIGNING_SECRET: 'gateway-test',
  });
});

after(async () => {
  await server?.stop();
  upstream?.close();
});

class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = (m) => { this.messages = this.messages.concat(m); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.messages.map((x, j) => (j === i ? m : x)); };
  snapshot = (x) => structuredClone(x);
}

class Chat extends AbstractChat {
  constructor(options) {
    super({ ...options, state: new State() });
  }
}

function chat(id) {
  const errors = [];
  const c = new Chat({
    id,
    transport: new DefaultChatTransport({ api: `${server.base}/v1/chat` }),
    onError: (e) => errors.push(e),
  });
  return { chat: c, errors };
}

/** Wait until the session's snapshot satisfies `ok`. */
async function until(sid, ok) {
  for (let i = 0; i < 400; i++) {
    const s = await snapshot(server.base, sid);
    if (ok(s)) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`session ${sid} never got there`);
}

const text = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

test('useChat through the gateway: send, a second tab resumes mid-answer with identical parts', async () => {
  const sid = `gw-${process.pid}-1`;
  closeGate();
  const first = chat(sid);
  const sending = first.chat.sendMessage({ text: 'Weather in Oslo?' });
  // Mid-answer (the model holds the rest), a second tab resumes from agent-projector.
  await until(sid, (s) => s.state.messages.some((m) => m.role === 'assistant' && text(m).length > 0));
  const second = chat(sid);
  const resuming = second.chat.resumeStream();
  // Open the gate once the second tab holds the answer so far.
  while (second.chat.messages.length === 0) await new Promise((r) => setTimeout(r, 10));
  openGate();
  await resuming;
  await sending;
  assert.deepEqual(first.errors, []);
  assert.deepEqual(second.errors, []);
  assert.equal(first.chat.status, 'ready');
  const a1 = plain(first.chat.messages.at(-1));
  const a2 = plain(second.chat.messages.at(-1));
  assert.equal(a1.role, 'assistant');
  assert.equal(text(a1).trim(), 'It is sunny in Oslo today , with a light breeze .');
  assert.deepEqual(a2.parts, a1.parts, 'the second tab builds the same parts');
  const snap = await snapshot(server.base, sid);
  const ours = snap.state.messages.find((m) => m.id === a1.id);
  assert.deepEqual(ours.parts, a1.parts, 'and so does the session');
  assert.equal(snap.state.messages[0].role, 'user');
  assert.equal(text(snap.state.messages[0]), 'Weather in Oslo?');
});

test('the browser stopping does not stop the upstream run', async () => {
  const sid = `gw-${process.pid}-2`;
  closeGate();
  const { chat: c } = chat(sid);
  const sending = c.sendMessage({ text: 'Weather again?' });
  await until(sid, (s) => s.state.messages.some((m) => m.role === 'assistant' && text(m).length > 0));
  await c.stop();
  await sending.catch(() => {});
  openGate();
  const done = await until(sid, (s) => s.state.runtime.status === 'completed');
  const answer = done.state.messages.at(-1);
  assert.equal(answer.status, 'complete');
  assert.equal(text(answer).trim(), 'It is sunny in Oslo today , with a light breeze .');
});

test('a failing model ends the chat in error', async () => {
  const sid = `gw-${process.pid}-3`;
  const { chat: c, errors } = chat(sid);
  await c.sendMessage({ text: 'please fail' });
  assert.equal(c.status, 'error');
  assert.equal(errors.length, 1);
  const snap = await snapshot(server.base, sid);
  assert.equal(snap.state.runtime.status, 'failed');
});
