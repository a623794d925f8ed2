// The chat gateway (issue 14 item 2) with one version of the real `ai`
// package on both sides, run once per version the project checks (the
// pinned one and the latest 5.x). Upstream: an AI SDK route (`streamText` on
// the SDK's own mock language model, no network, `toUIMessageStreamResponse`)
// served by Node. Browser side: `AbstractChat` + `DefaultChatTransport`
// pointed at agent-projector's `/v1/chat`, as `useChat` is; or, with
// `transport: 'ws'`, `ai` 7's `WebSocketChatTransport` on `/v1/chat/ws` (the
// `ws` package as Node's WebSocket).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import WebSocket from 'ws';
import { startServer, snapshot, plain } from './server.mjs';

export const ANSWER = 'It is sunny in Oslo today , with a light breeze .';

/** The stream parts of the two language model specifications: `v2` (ai 5) and `v3` (ai 6+). */
const SPEC = {
  v2: {
    finish: (reason) => ({ type: 'finish', finishReason: reason, usage: { inputTokens: 3, outputTokens: 5, totalTokens: 8 } }),
  },
  v3: {
    finish: (reason) => ({
      type: 'finish',
      finishReason: { unified: reason, raw: reason },
      usage: {
        inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
        outputTokens: { total: 5, text: 5, reasoning: 0 },
      },
    }),
  },
};

/** Text of a UIMessage's text parts. */
export const text = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

/** A browser-side chat state, the one `useChat` keeps in React state. */
export class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = (m) => { this.messages = this.messages.concat(m); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.messages.map((x, j) => (j === i ? m : x)); };
  snapshot = (x) => structuredClone(x);
}

/**
 * Start the upstream AI SDK route and agent-projector in front of it, and
 * give the tests what they need. `route(messages)` may answer a request
 * itself (return a stream of model parts) before the default words/error.
 * Call inside a `describe`.
 */
export function gateway({ ai, aiTest, spec, tools, model: custom, transport = 'http', env = {} }) {
  const parts = SPEC[spec];
  const ctx = { answers: 0 };
  let gate = Promise.resolve();
  let openGate = () => {};
  ctx.closeGate = () => { gate = new Promise((r) => { openGate = r; }); };
  ctx.openGate = () => openGate();

  /** The words of the answer (the second half after the gate opens), or an error. */
  function stream(prompt) {
    const last = prompt.filter((m) => m.role === 'user').at(-1);
    const said = (last?.content ?? []).map((c) => c.text ?? '').join('');
    const own = custom?.(prompt, parts);
    if (own) return own;
    if (said.includes('fail')) {
      return aiTest.simulateReadableStream({ chunks: [{ type: 'stream-start', warnings: [] }, { type: 'error', error: new Error('model overloaded') }] });
    }
    const words = ANSWER.split(' ').map((w) => ({ type: 'text-delta', id: 't1', delta: `${w} ` }));
    const head = [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't1' }, ...words.slice(0, 5)];
    const tail = [...words.slice(5), { type: 'text-end', id: 't1' }, parts.finish('stop')];
    const held = gate;
    return new ReadableStream({
      async start(c) {
        for (const x of head) c.enqueue(x);
        await held;
        for (const x of tail) c.enqueue(x);
        c.close();
      },
    });
  }
  const Mock = spec === 'v2' ? aiTest.MockLanguageModelV2 : aiTest.MockLanguageModelV3;

  class Chat extends ai.AbstractChat {
    constructor(options) {
      super({ ...options, state: new State() });
    }
  }

  let upstream;
  before(async () => {
    // The app's AI SDK route.
    upstream = createServer(async (req, res) => {
      let body = '';
      for await (const c of req) body += c;
      const { messages } = JSON.parse(body);
      const model = new Mock({ doStream: async ({ prompt }) => ({ stream: stream(prompt) }) });
      const result = ai.streamText({
        model,
        messages: await ai.convertToModelMessages(messages, { tools }),
        tools,
        onError: () => {},
      });
      ctx.answers += 1;
      const n = ctx.answers;
      const response = result.toUIMessageStreamResponse({ originalMessages: messages, generateMessageId: () => `answer-${n}` });
      res.writeHead(response.status, Object.fromEntries(response.headers));
      Readable.fromWeb(response.body).pipe(res);
    }).listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    const { port } = upstream.address();
    ctx.server = await startServer([], {
      PROJECTOR_UPSTREAM__CHAT_URL: `http://127.0.0.1:${port}/api/chat`,
      PROJECTOR_CONTROLS__ALLOWED_HOSTS: JSON.stringify([`127.0.0.1:${port}`]),
      PROJECTOR_CONTROLS__SIGNING_SECRET: 'gateway-test',
      ...env,
    });
  });
  after(async () => {
    await ctx.server?.stop();
    upstream?.close();
  });

  /** A browser tab's chat on session `id`. */
  ctx.chat = (id, options = {}) => {
    const errors = [];
    const chat = new Chat({
      id,
      transport: transport === 'ws'
        ? new ai.WebSocketChatTransport({ url: `${ctx.server.base}/v1/chat/ws`, webSocket: WebSocket })
        : new ai.DefaultChatTransport({ api: `${ctx.server.base}/v1/chat` }),
      onError: (e) => errors.push(e),
      ...options,
    });
    return { chat, errors };
  };

  /** Wait until the session's snapshot satisfies `ok`. */
  ctx.until = async (sid, ok) => {
    for (let i = 0; i < 500; i++) {
      const s = await snapshot(ctx.server.base, sid);
      if (ok(s)) return s;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`session ${sid} never got there`);
  };
  return ctx;
}

/**
 * A tool that needs approval (`shell`, answering `{files: 3}`) and a model
 * that asks for it when the user asks about files, then says what the
 * tool's result (or its denial) means: "3 files." or "Not run.".
 */
export function approvals({ ai, aiTest, z }) {
  const tools = {
    shell: ai.tool({
      description: 'Run a shell command',
      inputSchema: z.object({ cmd: z.string() }),
      needsApproval: true,
      execute: async () => ({ files: 3 }),
    }),
  };
  function model(prompt, parts) {
    const said = prompt.filter((m) => m.role === 'user').at(-1)?.content.map((c) => c.text ?? '').join('') ?? '';
    if (!said.includes('files')) return undefined;
    const result = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).find((c) => c.type === 'tool-result');
    const chunks = result
      ? [{ type: 'text-start', id: 'r' },
        { type: 'text-delta', id: 'r', delta: result.output.type === 'execution-denied' ? 'Not run.' : '3 files.' },
        { type: 'text-end', id: 'r' }, parts.finish('stop')]
      : [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'shell', input: '{"cmd":"ls"}' }, parts.finish('tool-calls')];
    return aiTest.simulateReadableStream({ chunks: [{ type: 'stream-start', warnings: [] }, ...chunks] });
  }
  return { tools, model };
}

/** The scenarios every `ai` version passes through the gateway. */
export function chatScenarios(label, options) {
  describe(`${label}: chat through the gateway`, () => {
    const g = gateway(options);
    const sid = (n) => `gw-${options.spec}-${process.pid}-${n}`;

    test('send, and a second tab resumes mid-answer with identical parts', async () => {
      const id = sid(1);
      g.closeGate();
      const first = g.chat(id);
      const sending = first.chat.sendMessage({ text: 'Weather in Oslo?' });
      // Mid-answer (the model holds the rest), a second tab resumes from agent-projector.
      await g.until(id, (s) => s.state.messages.some((m) => m.role === 'assistant' && text(m).length > 0));
      const second = g.chat(id);
      const resuming = second.chat.resumeStream();
      // Open the gate once the second tab holds the answer so far.
      while (second.chat.messages.length === 0) await new Promise((r) => setTimeout(r, 10));
      g.openGate();
      await resuming;
      await sending;
      assert.deepEqual(first.errors, []);
      assert.deepEqual(second.errors, []);
      assert.equal(first.chat.status, 'ready');
      const a1 = plain(first.chat.messages.at(-1));
      const a2 = plain(second.chat.messages.at(-1));
      assert.equal(a1.role, 'assistant');
      assert.equal(text(a1).trim(), ANSWER);
      assert.deepEqual(a2.parts, a1.parts, 'the second tab builds the same parts');
      const snap = await snapshot(g.server.base, id);
      const ours = snap.state.messages.find((m) => m.id === a1.id);
      assert.deepEqual(ours.parts, a1.parts, 'and so does the session');
      assert.equal(snap.state.messages[0].role, 'user');
      assert.equal(text(snap.state.messages[0]), 'Weather in Oslo?');
    });

    test('the browser stopping does not stop the upstream run', async () => {
      const id = sid(2);
      g.closeGate();
      const { chat } = g.chat(id);
      const sending = chat.sendMessage({ text: 'Weather again?' });
      await g.until(id, (s) => s.state.messages.some((m) => m.role === 'assistant' && text(m).length > 0));
      await chat.stop();
      await sending.catch(() => {});
      g.openGate();
      const done = await g.until(id, (s) => s.state.runtime.status === 'completed');
      const answer = done.state.messages.at(-1);
      assert.equal(answer.status, 'complete');
      assert.equal(text(answer).trim(), ANSWER);
    });

    test('a failing model ends the chat in error', async () => {
      const id = sid(3);
      const { chat, errors } = g.chat(id);
      await chat.sendMessage({ text: 'please fail' });
      assert.equal(chat.status, 'error');
      assert.equal(errors.length, 1);
      const snap = await snapshot(g.server.base, id);
      assert.equal(snap.state.runtime.status, 'failed');
    });
  });
}

/**
 * The approval round trip the AI SDK way, over `transport`: a tool with
 * `needsApproval` asks, the chat answers with the real
 * `addToolApprovalResponse` and sends itself again
 * (`lastAssistantMessageIsCompleteWithApprovalResponses`); the route runs or
 * skips the tool, and the session's action follows the route.
 */
export function approvalScenarios(label, { ai, aiTest, z, transport = 'http' }) {
  const { tools, model } = approvals({ ai, aiTest, z });
  describe(`${label}: tool approval through the gateway, the AI SDK way`, () => {
    const g = gateway({ ai, aiTest, spec: 'v3', tools, model, transport });

    async function ask(id) {
      const tab = g.chat(id, { sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses });
      await tab.chat.sendMessage({ text: 'How many files are here?' });
      const asked = plain(tab.chat.messages.at(-1));
      const tool = asked.parts.find((p) => p.type === 'tool-shell');
      assert.equal(tool?.state, 'approval-requested', JSON.stringify(asked));
      // The session holds the same request, as a pending action and in the part.
      const snap = await snapshot(g.server.base, id);
      assert.equal(snap.state.actions[tool.approval.id]?.status, 'pending');
      const ours = snap.state.messages.find((m) => m.id === asked.id);
      assert.deepEqual(ours.parts, asked.parts);
      return { ...tab, approval: tool.approval.id, messageId: asked.id };
    }

    /** Wait until the chat has settled on an answer after the automatic send. */
    async function answered(chat, want) {
      for (let i = 0; i < 500 && !(chat.status === 'ready' && text(chat.messages.at(-1)).includes(want)); i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      return plain(chat.messages.at(-1));
    }

    test('approved: the route runs the tool and goes on in the same message', async () => {
      const id = `gw-approve-${transport}-${process.pid}`;
      const { chat, errors, approval, messageId } = await ask(id);
      await chat.addToolApprovalResponse({ id: approval, approved: true });
      const answer = await answered(chat, '3 files.');
      assert.deepEqual(errors, []);
      assert.equal(answer.id, messageId, 'the continuation is the same message');
      const tool = answer.parts.find((p) => p.type === 'tool-shell');
      assert.equal(tool.state, 'output-available');
      assert.deepEqual(tool.output, { files: 3 });
      const snap = await g.until(id, (s) => s.state.runtime.status === 'completed');
      const action = snap.state.actions[approval];
      assert.equal(action.status, 'resolved');
      assert.equal(action.decision, 'approved');
      assert.deepEqual(snap.state.messages.find((m) => m.id === messageId).parts, answer.parts);
    });

    test('denied: the tool part ends `output-denied` and the action is denied', async () => {
      const id = `gw-deny-${transport}-${process.pid}`;
      const { chat, errors, approval, messageId } = await ask(id);
      await chat.addToolApprovalResponse({ id: approval, approved: false, reason: 'not now' });
      const answer = await answered(chat, 'Not run.');
      assert.deepEqual(errors, []);
      const tool = answer.parts.find((p) => p.type === 'tool-shell');
      assert.equal(tool.state, 'output-denied');
      const snap = await g.until(id, (s) => s.state.runtime.status === 'completed');
      const action = snap.state.actions[approval];
      assert.equal(action.status, 'resolved');
      assert.equal(action.decision, 'denied');
      assert.deepEqual(snap.state.messages.find((m) => m.id === messageId).parts, answer.parts);
    });
  });
}
