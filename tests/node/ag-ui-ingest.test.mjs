// Issue 15 item 1 with the real AG-UI packages: a run's events, checked by
// `@ag-ui/core`'s own schemas, encoded by `@ag-ui/encoder` as the SSE body an
// AG-UI agent serves, are POSTed to agent-projector as they are written.
// The same events go through `@ag-ui/client`'s own event application (an
// `AbstractAgent` whose run replays them): the messages and state it builds
// must be what the session projects.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventType } from '@ag-ui/core';
import { EventSchemas } from '@ag-ui/core/schemas';
import { EventEncoder } from '@ag-ui/encoder';
import { AbstractAgent } from '@ag-ui/client';
import { from } from 'rxjs';
import { startServer, snapshot } from './lib/server.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const threadId = `th-${process.pid}`;
const runId = 'run-1';
/** A LangGraph-like run: text, a tool call in pieces and its result, state, a second text. */
const events = [
  { type: EventType.RUN_STARTED, threadId, runId },
  { type: EventType.TEXT_MESSAGE_START, messageId: 'm1', role: 'assistant' },
  { type: EventType.TEXT_MESSAGE_CONTENT, messageId: 'm1', delta: 'Let me look ' },
  { type: EventType.TEXT_MESSAGE_CONTENT, messageId: 'm1', delta: 'that up.' },
  { type: EventType.TEXT_MESSAGE_END, messageId: 'm1' },
  { type: EventType.TOOL_CALL_START, toolCallId: 'call-1', toolCallName: 'get_weather', parentMessageId: 'm1' },
  { type: EventType.TOOL_CALL_ARGS, toolCallId: 'call-1', delta: '{"city":' },
  { type: EventType.TOOL_CALL_ARGS, toolCallId: 'call-1', delta: '"Oslo"}' },
  { type: EventType.TOOL_CALL_END, toolCallId: 'call-1' },
  { type: EventType.TOOL_CALL_RESULT, messageId: 'tool-1', toolCallId: 'call-1', content: '{"temp":7,"sky":"clear"}', role: 'tool' },
  { type: EventType.STATE_SNAPSHOT, snapshot: { city: 'Oslo', visited: [] } },
  { type: EventType.STATE_DELTA, delta: [{ op: 'add', path: '/visited/-', value: 'Oslo' }, { op: 'replace', path: '/city', value: 'Bergen' }] },
  { type: EventType.TEXT_MESSAGE_START, messageId: 'm2', role: 'assistant' },
  { type: EventType.TEXT_MESSAGE_CONTENT, messageId: 'm2', delta: 'It is 7 degrees and clear.' },
  { type: EventType.TEXT_MESSAGE_END, messageId: 'm2' },
  { type: EventType.RUN_FINISHED, threadId, runId },
];

/** What `@ag-ui/client` builds from the events: its agent's messages and state. */
async function clientView() {
  class Replay extends AbstractAgent {
    run() {
      return from(events.map((e) => structuredClone(e)));
    }
  }
  const agent = new Replay({ threadId, initialMessages: [{ id: 'u1', role: 'user', content: 'Weather in Oslo?' }] });
  await agent.runAgent();
  return { messages: agent.messages, state: agent.state };
}

/** The session's messages in AG-UI's shape. */
function asAgUi(messages) {
  const out = [];
  for (const m of messages) {
    const text = m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
    if (m.role === 'user') {
      out.push({ id: m.id, role: 'user', content: text });
      continue;
    }
    const tools = m.parts.filter((p) => p.type.startsWith('tool-'));
    const msg = { id: m.id, role: 'assistant', content: text };
    if (tools.length) {
      msg.toolCalls = tools.map((p) => ({ id: p.toolCallId, type: 'function',
        function: { name: p.type.slice(5), arguments: JSON.stringify(p.input) } }));
    }
    out.push(msg);
    for (const p of tools.filter((t) => t.state === 'output-available')) {
      out.push({ role: 'tool', toolCallId: p.toolCallId, content: p.output });
    }
  }
  return out;
}

test('AG-UI events from @ag-ui/encoder project what @ag-ui/client builds', async () => {
  for (const e of events) EventSchemas.parse(e);
  const sid = `agui-${process.pid}`;
  // The user's turn, as the runtime's input carried it.
  const enc = new EventEncoder();
  assert.equal(enc.getContentType(), 'text/event-stream');
  const withInput = [{ ...events[0], input: { threadId, runId, state: {}, tools: [], context: [], forwardedProps: {},
    messages: [{ id: 'u1', role: 'user', content: 'Weather in Oslo?' }] } }, ...events.slice(1)];
  // Written as it is made: one SSE event per write.
  const body = new ReadableStream({
    async start(c) {
      for (const e of withInput) {
        c.enqueue(new TextEncoder().encode(enc.encodeSSE(e)));
        await new Promise((r) => setImmediate(r));
      }
      c.close();
    },
  });
  const r = await fetch(`${server.base}/v1/sessions/${sid}/events`, {
    method: 'POST', headers: { 'content-type': enc.getContentType() }, body, duplex: 'half',
  });
  const reply = await r.json();
  assert.equal(r.status, 200, JSON.stringify(reply));
  assert.deepEqual(reply.warnings, [], 'every event of the run is projected');

  const client = await clientView();
  const snap = await snapshot(server.base, sid);
  const ours = asAgUi(snap.state.messages);
  const theirs = client.messages.map((m) => {
    const x = { ...m };
    if (x.role === 'tool') return { role: 'tool', toolCallId: x.toolCallId, content: x.content };
    if (x.toolCalls) x.toolCalls = x.toolCalls.map((c) => ({ ...c, function: { ...c.function, arguments: JSON.stringify(JSON.parse(c.function.arguments)) } }));
    return x;
  });
  assert.equal(theirs.length, 4, JSON.stringify(theirs));
  assert.deepEqual(ours, theirs);
  assert.deepEqual(snap.state.app, client.state, 'the state is the agent state @ag-ui/client builds');
  assert.equal(snap.state.runtime.status, 'completed');
  assert.equal(snap.state.runtime.runId, runId);
});
