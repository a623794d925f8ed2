// Issue 35 item 2: a resume is exact at every cursor, on every resume path.
// One rich turn (reasoning, text, a tool with streamed input that asks for
// approval and shows a preliminary output, a second tool that fails, a card,
// a diagnostic, more text) is cut after each of its events, as a page that
// loaded the history there (`GET .../messages?format=ui`) and then resumes
// with the real `ai` package: `AbstractChat` with `DefaultChatTransport`
// (`GET /v1/chat/{id}/stream`) and with `WebSocketChatTransport`
// (`/v1/chat/ws`); and as the client library's connection cut there and
// resumed from its position. Every time the rebuilt message equals the one
// a reader of the whole stream builds (and the session's), with no part
// twice and no error.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { AbstractChat, DefaultChatTransport, WebSocketChatTransport, parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from 'ai';
import { startServer, post, snapshot, plain } from './lib/server.mjs';
import { controlledFetch } from './lib/client.mjs';
import { State } from './lib/gateway-suite.mjs';
import { connect } from '../../clients/js/src/index.js';

let server;
after(async () => {
  await server?.stop();
});

/** The rich turn of session `sid`: the user's message, then the run. */
function turn(sid) {
  const facts = [
    { type: 'run.started' },
    { type: 'reasoning.summary', payload: { summary: 'Read the build log, then patch.' } },
    { type: 'text.delta', payload: { delta: 'Let me ' } },
    { type: 'text.delta', payload: { delta: 'look. ' } },
    { type: 'tool.args.delta', toolCallId: 'c1', payload: { toolName: 'shell', delta: '{"cmd":' } },
    { type: 'tool.args.delta', toolCallId: 'c1', payload: { delta: '"cargo build"}' } },
    { type: 'tool.started', toolCallId: 'c1', payload: { toolName: 'shell', input: { cmd: 'cargo build' } } },
    { type: 'action.required', actionId: 'ap-1', toolCallId: 'c1', payload: { actionType: 'tool_approval', question: 'Run cargo build?' } },
    { type: 'action.resolved', actionId: 'ap-1', payload: { decision: 'approve' } },
    { type: 'tool.progress', toolCallId: 'c1', payload: { progress: 50, preview: 'compiling 50/100' } },
    { type: 'tool.result', toolCallId: 'c1', payload: { summary: '1 error in a.rs' } },
    { type: 'tool.args.delta', toolCallId: 'c2', payload: { toolName: 'write_file', delta: '{"path":"a.rs"}' } },
    { type: 'tool.started', toolCallId: 'c2', payload: { toolName: 'write_file', input: { path: 'a.rs' } } },
    { type: 'tool.failed', toolCallId: 'c2', payload: { error: 'permission denied', failureCategory: 'permission_denied' } },
    { type: 'artifact.changed', artifactId: 'art-1', payload: { title: 'patch.diff', kind: 'document' } },
    { type: 'model.failed', payload: { message: 'rate limited once; retried' } },
    { type: 'text.delta', payload: { delta: 'I could not write a.rs; the patch is attached.' } },
    { type: 'run.finished' },
  ];
  return [
    { id: `${sid}-u`, type: 'turn.submitted', turnId: 't1', messageId: 'u1', payload: { text: 'Fix the build' } },
    ...facts.map((f, i) => ({ runId: 'r1', turnId: 't1', messageId: 'm1', sequence: i + 1, ...f, id: `${sid}-${i}` })),
  ];
}
const N = turn('x').length;

let n = 0;
const session = (name) => `${name}-${process.pid}-${++n}`;

/** Wait until `cond()` holds (checked every 5 ms, at most 15 s). */
async function until(cond, what) {
  const deadline = Date.now() + 15000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The message a reader of its whole UI message stream builds with `ai`. */
async function canonical(sid) {
  const r = await fetch(`${server.base}/v1/sessions/${sid}/messages/m1/ui-stream`);
  const chunks = parseJsonEventStream({ stream: r.body, schema: uiMessageChunkSchema }).pipeThrough(new TransformStream({
    transform(result, c) {
      if (!result.success) throw result.error;
      c.enqueue(result.value);
    },
  }));
  let last;
  for await (const m of readUIMessageStream({ stream: chunks, terminateOnError: true })) last = m;
  return plain(last);
}

/** The whole turn in a session of its own: the message every cut must end with. */
let whole;
before(async () => {
  server ??= await startServer();
  const sid = session('whole');
  await post(server.base, sid, turn(sid));
  whole = await canonical(sid);
  const snap = await snapshot(server.base, sid);
  assert.deepEqual(snap.state.messages.find((m) => m.id === 'm1').parts, whole.parts, 'the session agrees');
  const types = whole.parts.map((p) => p.type);
  for (const t of ['reasoning', 'text', 'tool-shell', 'tool-write_file', 'data-artifact-card', 'data-diagnostic-ref']) {
    assert.ok(types.includes(t), `the turn has a ${t} part: ${types}`);
  }
  assert.equal(whole.parts.find((p) => p.type === 'tool-write_file').state, 'output-error');
});

class Chat extends AbstractChat {
  constructor({ messages = [], ...options }) {
    const state = new State();
    state.messages = messages;
    super({ ...options, state });
  }
}

const TRANSPORTS = {
  'GET /v1/chat/{id}/stream': () => new DefaultChatTransport({ api: `${server.base}/v1/chat` }),
  'the WebSocket transport': () => new WebSocketChatTransport({ url: `${server.base}/v1/chat/ws`, webSocket: WebSocket }),
};

/** Cut after `k` events: load the history, resume, let the rest of the turn come; what the chat holds. */
async function cutAndResume(k, path) {
  const sid = session('cut');
  const events = turn(sid);
  if (k > 0) await post(server.base, sid, events.slice(0, k));
  const page = await (await fetch(`${server.base}/v1/sessions/${sid}/messages?format=ui`)).json();
  const transport = TRANSPORTS[path]();
  const errors = [];
  const chat = new Chat({ id: sid, messages: page.messages, transport, onError: (e) => errors.push(e) });
  const resumed = chat.resumeStream();
  // All but the last event whenever: the message cannot end before the
  // resume holds it, so a resume that comes late still has it to follow.
  if (k < N - 1) await post(server.base, sid, events.slice(k, N - 1));
  if (k < N) {
    await until(() => chat.status === 'streaming', `the resumed message after cut ${k} (${path})`);
    await post(server.base, sid, events[N - 1]);
  }
  await resumed;
  transport.close?.();
  return { chat, errors };
}

for (const path of Object.keys(TRANSPORTS)) {
  test(`a page cut after each event of a rich turn resumes exactly through ${path}`, async () => {
    for (let k = 1; k <= N; k++) {
      const { chat, errors } = await cutAndResume(k, path);
      const at = `cut after event ${k} of ${N}`;
      assert.deepEqual(errors, [], at);
      assert.equal(chat.status, 'ready', at);
      const roles = chat.messages.map((m) => `${m.role}:${m.id}`);
      assert.deepEqual(roles, ['user:u1', 'assistant:m1'], `${at}: one user message, one answer`);
      assert.deepEqual(plain(chat.messages[1]).parts, whole.parts, at);
    }
  });
}

test('the client library cut after each event of a rich turn resumes exactly from its position', async () => {
  for (let k = 1; k < N; k++) {
    const sid = session('lib');
    const events = turn(sid);
    await post(server.base, sid, events.slice(0, k));
    const net = controlledFetch();
    const conn = connect({ baseUrl: server.base, sessions: [sid], fetch: net.fetch, backoff: { initialMs: 1, maxMs: 5 } });
    const errors = [];
    conn.on('error', (e) => errors.push(e));
    try {
      await until(() => conn.cursor(sid) === k && conn.status === 'live', `cursor ${k} live`);
      // The network goes; the rest of the turn comes meanwhile; it comes back.
      net.hold();
      net.cut();
      await post(server.base, sid, events.slice(k));
      net.release();
      await until(() => conn.cursor(sid) === N, `cursor ${N} after the cut at ${k}`);
      const at = `cut after event ${k} of ${N}`;
      const state = conn.state(sid);
      assert.deepEqual(state.messages.map((m) => `${m.role}:${m.id}`), ['user:u1', 'assistant:m1'], at);
      assert.deepEqual(plain(state.messages[1]).parts, whole.parts, at);
      assert.ok(errors.every((e) => e.code === 'network_error'), `${at}: ${errors.map((e) => e.code)}`);
    } finally {
      conn.close();
    }
  }
});
