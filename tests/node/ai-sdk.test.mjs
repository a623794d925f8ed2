// Conformance with the real AI SDK client: our streams go through the `ai`
// package's own functions (parseJsonEventStream + uiMessageChunkSchema into
// readUIMessageStream, and AbstractChat + DefaultChatTransport for useChat
// resume), and the UIMessage that `ai` builds must equal the message in our
// snapshot. `ai` rejects unknown chunk types, missing fields and a
// text-delta without an open text-start, so any such chunk fails a test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  AbstractChat,
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} from 'ai';
import { startServer, post, snapshot, plain, purgeRedisPrefix } from './lib/server.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

let n = 0;
const session = (name) => `${name}-${process.pid}-${++n}`;

/** Chunk objects from an SSE body, validated by the AI SDK's own schema. */
function chunkStream(body) {
  return parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) throw result.error;
        controller.enqueue(result.value);
      },
    }),
  );
}

/** The final UIMessage that `ai` builds from a stream of chunks. */
async function build(stream) {
  let last;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) last = m;
  return plain(last);
}

/** GET a message's ui-stream and let `ai` build it. */
async function viaUiStream(base, sid, mid) {
  const r = await fetch(`${base}/v1/sessions/${sid}/messages/${mid}/ui-stream`);
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'text/event-stream');
  assert.equal(r.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
  assert.equal(r.headers.get('x-accel-buffering'), 'no');
  return build(chunkStream(r.body));
}

/** Our snapshot's message, in the shape `ai` builds (id, role, parts). */
async function ours(base, sid, mid) {
  const snap = await snapshot(base, sid);
  const m = snap.state.messages.find((x) => x.id === mid);
  assert.ok(m, `message ${mid} in snapshot`);
  return m;
}

function assertSame(aiMessage, message) {
  assert.equal(aiMessage.id, message.id);
  assert.equal(aiMessage.role, 'assistant');
  assert.deepEqual(aiMessage.parts, message.parts);
}

const run = (sid, extra = []) => [
  { id: `${sid}-start`, type: 'run.started', runId: 'r1', turnId: 't1', sequence: 1 },
  ...extra.map((e, i) => ({ runId: 'r1', turnId: 't1', messageId: 'm1', sequence: i + 2, ...e, id: `${sid}-${i}` })),
];
const end = (sid, seq) => ({ id: `${sid}-end`, type: 'run.finished', runId: 'r1', turnId: 't1', sequence: seq });

const scenarios = {
  'plain text': [
    { type: 'text.delta', payload: { delta: 'Hello' } },
    { type: 'text.delta', payload: { delta: ', world.' } },
    { type: 'text.final', payload: { text: 'Hello, world.' } },
  ],
  'text, tool, text': [
    { type: 'text.delta', payload: { delta: 'Let me search. ' } },
    { type: 'tool.started', toolCallId: 'c1', payload: { toolName: 'search', input: { q: 'rust' } } },
    { type: 'tool.result', toolCallId: 'c1', refIds: ['out-1'], payload: { summary: '3 hits' } },
    { type: 'text.delta', payload: { delta: 'Found ' } },
    { type: 'text.delta', payload: { delta: 'it.' } },
  ],
  'a failing tool': [
    { type: 'tool.started', toolCallId: 'c2', payload: { toolName: 'write_file', input: { path: 'a.txt' } } },
    { type: 'tool.failed', toolCallId: 'c2', payload: { error: 'permission denied', failureCategory: 'permission_denied' } },
    { type: 'text.delta', payload: { delta: 'I could not write the file.' } },
  ],
  reasoning: [
    { type: 'reasoning.summary', payload: { summary: 'Compare both options, then answer.' } },
    { type: 'reasoning.delta', payload: { delta: 'raw thoughts stay hidden' } },
    { type: 'text.delta', payload: { delta: 'Option B is better.' } },
  ],
  // Issue 12 item 3: the final after the tool is the next model call's own
  // text; the first sentence stays, before the tool.
  'a final after a tool that does not repeat the text before it': [
    { type: 'text.delta', payload: { delta: 'Let me check. ' } },
    { type: 'tool.started', toolCallId: 'c3', payload: { toolName: 'weather', input: { city: 'Oslo' } } },
    { type: 'tool.result', toolCallId: 'c3', payload: { summary: 'sunny' } },
    { type: 'text.final', payload: { text: 'It is sunny.' } },
  ],
  'artifact and evidence data parts': [
    { type: 'text.delta', payload: { delta: 'Drafted the report.' } },
    { type: 'artifact.changed', artifactId: 'art-1', payload: { title: 'report.md', kind: 'document' }, refIds: ['blob://report'] },
    { type: 'evidence.changed', evidenceId: 'ev-1', payload: { verdict: 'supported' }, evidenceRefs: ['ev-1'] },
    { type: 'artifact.changed', artifactId: 'art-1', payload: { title: 'report.md', kind: 'document', versionId: 'v2' } },
    { type: 'action.required', actionId: 'act-1', payload: { actionType: 'tool_approval' } },
    { type: 'action.resolved', actionId: 'act-1', payload: { decision: 'approved' } },
  ],
  // Issue 16: evidence with a source becomes `source-url` / `source-document`
  // (once per message, even when the evidence changes again), and a request
  // keeps its content in its card.
  'sources and a request with its content': [
    { type: 'text.delta', payload: { delta: 'According to the notes, ' } },
    { type: 'evidence.changed', evidenceId: 'ev-u', payload: { title: 'Release notes', url: 'https://example.com/notes', source: 'Example', snippet: 'Refused.', date: '2026-11-01' } },
    { type: 'evidence.changed', evidenceId: 'ev-d', payload: { title: 'Lexer spec', mediaType: 'application/pdf', filename: 'lexer.pdf' } },
    { type: 'evidence.changed', evidenceId: 'ev-u', payload: { verdict: 'supports' } },
    { type: 'text.delta', payload: { delta: 'it is refused.' } },
    { type: 'action.required', actionId: 'act-2', payload: { actionType: 'structured_input', question: 'Which region?', inputSchema: { type: 'object', properties: { region: { enum: ['eu', 'us'] } } }, options: ['eu', 'us'] } },
    { type: 'action.resolved', actionId: 'act-2', payload: { decision: 'answered' } },
  ],
};

for (const [name, events] of Object.entries(scenarios)) {
  test(`ui-stream: ${name}`, async () => {
    const sid = session('sc');
    await post(server.base, sid, [...run(sid, events), end(sid, events.length + 2)]);
    const message = await ours(server.base, sid, 'm1');
    assert.equal(message.status, 'complete');
    assertSame(await viaUiStream(server.base, sid, 'm1'), message);
  });
}

test('ui-stream: sources are parts the `ai` package builds, with every field', async () => {
  const sid = session('src');
  const events = scenarios['sources and a request with its content'];
  await post(server.base, sid, [...run(sid, events), end(sid, events.length + 2)]);
  const built = await viaUiStream(server.base, sid, 'm1');
  const sources = built.parts.filter((p) => p.type.startsWith('source-'));
  assert.deepEqual(sources, [
    { type: 'source-url', sourceId: 'ev-u', url: 'https://example.com/notes', title: 'Release notes' },
    { type: 'source-document', sourceId: 'ev-d', mediaType: 'application/pdf', title: 'Lexer spec', filename: 'lexer.pdf' },
  ]);
  const card = built.parts.find((p) => p.type === 'data-action-request');
  assert.equal(card.data.question, 'Which region?');
  assert.deepEqual(card.data.options, ['eu', 'us']);
  assert.equal(card.data.status, 'resolved');
  const citation = built.parts.find((p) => p.type === 'data-evidence-citation' && p.id === 'ev-u');
  assert.deepEqual([citation.data.verdict, citation.data.snippet, citation.data.date], ['supports', 'Refused.', '2026-11-01']);
});

test('ui-stream: a message consumed live while its events are still being posted', async () => {
  const sid = session('live');
  const events = scenarios['text, tool, text'];
  await post(server.base, sid, run(sid, events.slice(0, 1)));
  const reading = viaUiStream(server.base, sid, 'm1');
  const all = run(sid, events);
  for (const e of all.slice(2)) {
    await post(server.base, sid, e);
    await new Promise((r) => setTimeout(r, 15)); // human-ish pacing, not a readiness wait
  }
  await post(server.base, sid, end(sid, events.length + 2));
  const built = await reading; // ends by itself at `finish`
  assertSame(built, await ours(server.base, sid, 'm1'));
});

test('resume of a finished message replays it whole and ends; chat resume answers 204', async () => {
  const sid = session('done');
  const events = scenarios['text, tool, text'];
  await post(server.base, sid, [...run(sid, events), end(sid, events.length + 2)]);
  const r = await fetch(`${server.base}/v1/sessions/${sid}/messages/m1/ui-stream`);
  const text = await r.text(); // the body ends: no hanging stream
  const lines = text.split('\n').filter((l) => l.startsWith('data: '));
  assert.deepEqual(JSON.parse(lines[0].slice(6)), { type: 'start', messageId: 'm1' });
  assert.equal(JSON.parse(lines.at(-2).slice(6)).type, 'finish');
  assert.equal(lines.at(-1), 'data: [DONE]');
  const resume = await fetch(`${server.base}/v1/chat/${sid}/stream`);
  assert.equal(resume.status, 204);
});

test('404 for an unknown message, 204 for a session with nothing streaming', async () => {
  const sid = session('none');
  const r = await fetch(`${server.base}/v1/sessions/${sid}/messages/nope/ui-stream`);
  assert.equal(r.status, 404);
  assert.equal(r.headers.get('content-type'), 'application/problem+json');
  assert.equal((await r.json()).code, 'not_found');
  assert.equal((await fetch(`${server.base}/v1/chat/${sid}/stream`)).status, 204);
});

/** A minimal ChatState, as a framework binding would provide. */
test('ui-stream: the final after a tool keeps the text before the tool and comes after it', async () => {
  const sid = session('final');
  const events = scenarios['a final after a tool that does not repeat the text before it'];
  await post(server.base, sid, [...run(sid, events), end(sid, events.length + 2)]);
  const built = await viaUiStream(server.base, sid, 'm1');
  const kinds = built.parts.filter((p) => p.type !== 'step-start').map((p) => (p.type === 'text' ? p.text : p.type));
  assert.deepEqual(kinds, ['Let me check. ', 'tool-weather', 'It is sunny.']);
});

/** A small seeded PRNG (mulberry32), so that a failure names its seed. */
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random but well-formed agent turn: text, reasoning, tools, finals. */
function randomTurn(seed) {
  const r = rng(seed);
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const events = [];
  let streamed = '';
  let tools = 0;
  const open = [];
  const words = ['alpha ', 'beta ', 'gamma ', 'delta. ', 'ok ', 'héllo ', '"q" ', 'line\n'];
  const steps = 4 + Math.floor(r() * 12);
  for (let i = 0; i < steps; i++) {
    const kind = pick(['delta', 'delta', 'delta', 'tool', 'result', 'final', 'reasoning']);
    if (kind === 'delta') {
      const w = pick(words);
      streamed += w;
      events.push({ type: 'text.delta', payload: { delta: w } });
    } else if (kind === 'tool') {
      const id = `c${++tools}`;
      open.push(id);
      events.push({ type: 'tool.started', toolCallId: id, payload: { toolName: pick(['search', 'read']), input: { n: i } } });
    } else if (kind === 'result' && open.length) {
      const id = open.shift();
      events.push(r() < 0.8
        ? { type: 'tool.result', toolCallId: id, payload: { summary: `done ${i}` } }
        : { type: 'tool.failed', toolCallId: id, payload: { error: 'no', failureCategory: 'runtime' } });
    } else if (kind === 'final') {
      const text = pick([streamed, streamed + 'more. ', 'A different answer.', '']);
      events.push({ type: 'text.final', payload: { text } });
    } else if (kind === 'reasoning') {
      events.push({ type: 'reasoning.delta', payload: { delta: pick(words) } });
    }
  }
  for (const id of open) events.push({ type: 'tool.result', toolCallId: id, payload: { summary: 'late' } });
  return events;
}

test('ui-stream: for 40 seeded random turns, what `ai` builds equals the snapshot', async () => {
  for (let seed = 1; seed <= 40; seed++) {
    const sid = session(`rand${seed}`);
    const events = randomTurn(seed);
    await post(server.base, sid, [...run(sid, events), end(sid, events.length + 2)]);
    const message = await ours(server.base, sid, 'm1');
    const built = await viaUiStream(server.base, sid, 'm1');
    assert.deepEqual(built.parts, message.parts, `seed ${seed}: ${JSON.stringify(events)}`);
  }
});

class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = (m) => this.messages.push(m);
  popMessage = () => this.messages.pop();
  replaceMessage = (i, m) => {
    this.messages[i] = m;
  };
  snapshot = (x) => structuredClone(x);
}

class TestChat extends AbstractChat {
  constructor(options) {
    super({ ...options, state: new State() });
  }
}

/** Wait until `cond()` holds (checked every 10 ms, at most 15 s). */
async function until(cond, what) {
  const deadline = Date.now() + 15000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A chat of session `sid` as `useChat` builds it, resuming; the errors it reports. */
function resumingChat(sid) {
  const errors = [];
  const chat = new TestChat({
    id: sid,
    transport: new DefaultChatTransport({ api: `${server.base}/v1/chat` }),
    onError: (e) => errors.push(e),
  });
  return { chat, errors, resumed: chat.resumeStream() };
}

/** The resumed chat ends ready, with no error, holding the whole message m1 as the server has it. */
async function resumedWhole({ chat, errors, resumed }, sid) {
  await resumed;
  assert.deepEqual(errors, []);
  assert.equal(chat.status, 'ready');
  assert.equal(chat.messages.length, 1);
  assertSame(plain(chat.messages[0]), await ours(server.base, sid, 'm1'));
}

test('useChat path: AbstractChat + DefaultChatTransport resume a running agent', async () => {
  const sid = session('chat');
  const events = scenarios['text, tool, text'];
  const all = run(sid, events);
  await post(server.base, sid, all.slice(0, 3));
  const { chat, errors, resumed } = resumingChat(sid);
  // The rest once the resume has the message (not before: then there is
  // nothing left to resume).
  await until(() => chat.status === 'streaming', 'the resumed message');
  for (const e of all.slice(3)) await post(server.base, sid, e);
  await post(server.base, sid, end(sid, events.length + 2));
  await resumedWhole({ chat, errors, resumed }, sid);

  // Nothing streaming any more: resume is a no-op (204) and keeps the messages.
  await chat.resumeStream();
  assert.equal(chat.messages.length, 1);
  assert.deepEqual(errors, []);
});

// Issue 35 item 2: a page cut after the run started but before the
// assistant's first chunk resumes into the answer (the resume waits for it
// to start instead of answering 204).
test('useChat path: a resume before the first chunk of the answer gets the whole answer', async () => {
  const sid = session('early');
  const events = scenarios['text, tool, text'];
  const all = run(sid, events);
  await post(server.base, sid, all.slice(0, 1)); // run.started, nothing said yet
  const { chat, errors, resumed } = resumingChat(sid);
  for (const e of all.slice(1)) await post(server.base, sid, e);
  await post(server.base, sid, end(sid, events.length + 2));
  await resumedWhole({ chat, errors, resumed }, sid);
});

// Issue 12 item 4: a failed run ends `useChat` in `error`, not `ready`.
test('useChat path: a failed run ends the chat in error with the run\'s error text', async () => {
  const sid = session('failed');
  const started = run(sid, [{ type: 'text.delta', payload: { delta: 'Working on it' } }]);
  await post(server.base, sid, started);
  const { chat, errors, resumed } = resumingChat(sid);
  await until(() => chat.status === 'streaming', 'the resumed message');
  await post(server.base, sid, { id: `${sid}-fail`, type: 'run.failed', runId: 'r1', turnId: 't1', sequence: 3, payload: { error: 'model overloaded' } });
  await resumed;
  assert.equal(chat.status, 'error');
  assert.equal(errors.length, 1);
  assert.equal(errors[0].message, 'model overloaded');
  assert.equal(chat.error?.message, 'model overloaded');
  // A client that comes after the failure reads the same end: the error, then the finish.
  const r = await fetch(`${server.base}/v1/sessions/${sid}/messages/m1/ui-stream`);
  const chunks = [];
  for await (const c of chunkStream(r.body)) chunks.push(c);
  assert.deepEqual(chunks.slice(-2), [
    { type: 'error', errorText: 'model overloaded' },
    { type: 'finish', finishReason: 'error' },
  ]);
});

/** Read `count` delta frames of the session stream from cursor 0 (then its `live` frame, at `count`). */
async function sessionFrames(base, sid, count) {
  const r = await fetch(`${base}/v1/sessions/${sid}/stream?cursor=0`);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  const frames = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('');
      if (!data) continue;
      const f = JSON.parse(data);
      if (f.type === 'live') {
        // Where the replay ended: after every frame there was.
        assert.deepEqual([f, frames.length], [{ type: 'live', cursor: count }, count]);
        await reader.cancel();
        return frames;
      }
      frames.push(f);
    }
  }
  await reader.cancel();
  return frames;
}

test('session stream: delta chunks split by messageId rebuild the snapshot messages', async () => {
  const sid = session('split');
  const events = [
    { id: `${sid}-u`, type: 'turn.submitted', turnId: 't1', payload: { text: 'Find the bug' } },
    ...run(sid, [...scenarios['text, tool, text'], ...scenarios['artifact and evidence data parts']]),
    { id: `${sid}-mate`, type: 'agent.spawned', agentId: 'researcher', turnId: 't1', payload: { role: 'researcher' } },
    { id: `${sid}-mate-text`, type: 'text.delta', agentId: 'researcher', turnId: 't1', payload: { delta: 'Looking into it.' } },
  ];
  const out = await post(server.base, sid, [...events, end(sid, 99)]);
  const frames = await sessionFrames(server.base, sid, out.cursor);
  assert.equal(frames.length, out.cursor);
  const byMessage = new Map();
  for (const f of frames) {
    for (const { messageId, chunk } of f.chunks) {
      if (messageId === null) {
        assert.ok(chunk.type.startsWith('data-'), 'session-level chunks are data parts');
        continue;
      }
      if (!byMessage.has(messageId)) byMessage.set(messageId, []);
      byMessage.get(messageId).push(chunk);
    }
  }
  const snap = await snapshot(server.base, sid);
  assert.equal(byMessage.size, snap.state.messages.length);
  for (const message of snap.state.messages) {
    // Through the SDK's own parser and schema, as an SSE body of this message's chunks.
    const body = byMessage.get(message.id).map((ch) => `data: ${JSON.stringify(ch)}\n\n`).join('');
    const validated = chunkStream(new Response(body).body);
    const built = await build(validated);
    assert.equal(built.id, message.id);
    assert.deepEqual(built.parts, message.parts, `message ${message.id}`);
  }
  const mate = snap.state.messages.find((m) => m.agentId === 'researcher');
  assert.ok(mate, 'the teammate keeps its own message');
});

// Several nodes on one Redis: what `ai` builds from one node's stream equals
// the message as every node projects it. Runs when PROJECTOR_TEST_REDIS_URL
// names a Redis (CI sets it).
const REDIS = process.env.PROJECTOR_TEST_REDIS_URL;
const redisSkip = REDIS ? false : 'PROJECTOR_TEST_REDIS_URL is unset (set it to run the Redis tests)';

test('two nodes on Redis: `ai` streams live from one node a message posted to the other', { skip: redisSkip }, async () => {
  const prefix = `ptest-node-${process.pid}-${Date.now()}`;
  const args = ['--store', 'redis', '--redis-url', REDIS];
  const env = { PROJECTOR_REDIS__PREFIX: prefix };
  const a = await startServer(args, env);
  const b = await startServer(args, env);
  try {
    const sid = session('nodes');
    const events = scenarios['text, tool, text'];
    const all = run(sid, events);
    await post(a.base, sid, all.slice(0, 2));
    const reading = viaUiStream(b.base, sid, 'm1');
    for (const e of all.slice(2)) await post(a.base, sid, e);
    await post(a.base, sid, end(sid, events.length + 2));
    const built = await reading; // ends by itself at `finish`
    assertSame(built, await ours(a.base, sid, 'm1'));
    assertSame(built, await ours(b.base, sid, 'm1'));
    // useChat's resume, on the node that never saw a POST: nothing streams now.
    assert.equal((await fetch(`${b.base}/v1/chat/${sid}/stream`)).status, 204);
  } finally {
    await a.stop();
    await b.stop();
    purgeRedisPrefix(REDIS, prefix);
  }
});

test('ui-stream: the producer\'s createdAt is the message metadata `ai` builds', async () => {
  const sid = session('time');
  const events = [
    { type: 'text.delta', createdAt: '2026-11-25T09:00:01.250Z', payload: { delta: 'On time.' } },
    { type: 'text.delta', createdAt: '2026-11-25T09:00:09Z', payload: { delta: ' Still.' } },
  ];
  await post(server.base, sid, [...run(sid, events), end(sid, events.length + 2)]);
  const built = await viaUiStream(server.base, sid, 'm1');
  const message = await ours(server.base, sid, 'm1');
  assert.deepEqual(built.metadata, { createdAt: '2026-11-25T09:00:01.250Z' });
  assert.deepEqual(message.metadata, built.metadata);
});

test('ui-stream: tool progress is a preliminary output `ai` accepts, replaced by the result', async () => {
  const sid = session('prelim');
  const events = [
    { type: 'tool.started', toolCallId: 'p1', payload: { toolName: 'build', input: { target: 'all' } } },
    { type: 'tool.progress', toolCallId: 'p1', payload: { progress: 40, preview: 'compiling 40/100' } },
    { type: 'tool.progress', toolCallId: 'p1', payload: { progress: 80 } },
    { type: 'tool.result', toolCallId: 'p1', payload: { summary: 'built' } },
    { type: 'text.delta', payload: { delta: 'Built.' } },
  ];
  await post(server.base, sid, [...run(sid, events), end(sid, events.length + 2)]);
  const message = await ours(server.base, sid, 'm1');
  const built = await viaUiStream(server.base, sid, 'm1');
  assertSame(built, message);
  const tool = built.parts.find((p) => p.type === 'tool-build');
  assert.equal(tool.state, 'output-available');
  assert.equal(tool.preliminary, undefined, 'the final output is not preliminary');
  assert.equal(tool.output.summary, 'built');
});

test('ui-stream: a cancelled run ends its running tool as an error `ai` accepts, then aborts', async () => {
  const sid = session('cancel');
  const events = [
    { type: 'text.delta', payload: { delta: 'Fetching. ' } },
    { type: 'tool.started', toolCallId: 'k1', payload: { toolName: 'fetch', input: { url: 'https://example.com' } } },
    { type: 'tool.progress', toolCallId: 'k1', payload: { progress: 10 } },
  ];
  await post(server.base, sid, [...run(sid, events),
    { id: `${sid}-cancel`, type: 'run.canceled', runId: 'r1', turnId: 't1', sequence: events.length + 2 }]);
  const message = await ours(server.base, sid, 'm1');
  const built = await viaUiStream(server.base, sid, 'm1');
  assert.deepEqual(built.parts, message.parts);
  const tool = built.parts.find((p) => p.type === 'tool-fetch');
  assert.equal(tool.state, 'output-error');
  assert.equal(tool.errorText, 'cancelled');
});

// Issue 14 item 3: an action that names a tool call is that call's approval,
// the AI SDK way; only the runtime's resolution changes it.
test('ui-stream: a tool approval is `tool-approval-request` in the tool part, a rejection `output-denied`', async () => {
  const sid = session('approval');
  const events = [
    { type: 'tool.started', toolCallId: 'x1', payload: { toolName: 'shell', input: { cmd: 'rm -rf build' } } },
    { type: 'action.required', actionId: 'ap-1', toolCallId: 'x1', payload: { actionType: 'tool_approval', question: 'Run it?' } },
  ];
  await post(server.base, sid, run(sid, events));
  let built = await viaUiStreamUntilIdle(sid);
  let tool = built.parts.find((p) => p.type === 'tool-shell');
  assert.equal(tool.state, 'approval-requested');
  assert.deepEqual(tool.approval, { id: 'ap-1', requestReason: 'Run it?' });
  await post(server.base, sid, [
    { id: `${sid}-rej`, type: 'action.resolved', runId: 'r1', turnId: 't1', actionId: 'ap-1', payload: { decision: 'rejected' } },
    end(sid, 10),
  ]);
  const message = await ours(server.base, sid, 'm1');
  built = await viaUiStream(server.base, sid, 'm1');
  assertSame(built, message);
  tool = built.parts.find((p) => p.type === 'tool-shell');
  assert.equal(tool.state, 'output-denied');
});

/** What `ai` builds of a message still streaming: its replay, read until the stream idles. */
async function viaUiStreamUntilIdle(sid) {
  const ctl = new AbortController();
  const r = await fetch(`${server.base}/v1/sessions/${sid}/messages/m1/ui-stream`, { signal: ctl.signal });
  const reader = r.body.getReader();
  const chunks = [];
  const dec = new TextDecoder();
  let text = '';
  for (;;) {
    const next = await Promise.race([reader.read(), new Promise((res) => setTimeout(() => res(null), 300))]);
    if (!next || next.done) break;
    text += dec.decode(next.value);
  }
  ctl.abort();
  for (const block of text.split('\n\n')) {
    const line = block.split('\n').find((l) => l.startsWith('data: '));
    if (line && line !== 'data: [DONE]') chunks.push(JSON.parse(line.slice(6)));
  }
  const stream = new ReadableStream({ start(c) { for (const x of chunks) c.enqueue(x); c.close(); } });
  let last;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) last = m;
  return plain(last);
}

test('ui-stream: the message metadata `ai` builds says the agent, its role, the model and the usage', async () => {
  const sid = session('meta');
  await post(server.base, sid, [
    { id: `${sid}-a`, type: 'agent.spawned', agentId: 'researcher', taskId: 'task-1', payload: { role: 'reviewer' } },
    ...run(sid, [{ type: 'text.delta', agentId: 'researcher', model: 'gpt-test', createdAt: '2026-11-25T11:00:00Z', payload: { delta: 'Found it.' } }]),
    { id: `${sid}-end`, type: 'run.finished', runId: 'r1', turnId: 't1', sequence: 9, payload: { usage: { inputTokens: 12, outputTokens: 3 } } },
  ]);
  const built = await viaUiStream(server.base, sid, 'm1');
  const message = await ours(server.base, sid, 'm1');
  assert.deepEqual(built.metadata, {
    createdAt: '2026-11-25T11:00:00Z', agentId: 'researcher', agentRole: 'reviewer', model: 'gpt-test',
    usage: { inputTokens: 12, outputTokens: 3 },
  });
  assert.deepEqual(message.metadata, built.metadata);
});
