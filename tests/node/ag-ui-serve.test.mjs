// Issues 15 and 32 with the real AG-UI client: `@ag-ui/client` follows a
// session through `GET /v1/sessions/{id}/ag-ui` (its own SSE parsing,
// `runHttpRequest` + `transformHttpEventStream`, then its event verifier and
// event application in `runAgent`). A client joining mid-run and one that
// followed from the start end with the same messages and state: the
// producer's, but with the text after the tool call a message of its own
// (`m1:1`), so that the order the answer was given in is kept. Cut in the
// middle of a run and reconnected with `Last-Event-ID`, the client gets only
// what it missed (no MESSAGES_SNAPSHOT) and ends with every message once.
// Every event is checked by `@ag-ui/core`'s schemas.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventType } from '@ag-ui/core';
import { AbstractAgent } from '@ag-ui/client';
import { from } from 'rxjs';
import { startServer, post } from './lib/server.mjs';
import { Follow, said } from './lib/ag-ui.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const run = (threadId) => {
  const runId = 'run-1';
  return [
    { type: EventType.RUN_STARTED, threadId, runId,
      input: { threadId, runId, state: {}, tools: [], context: [], forwardedProps: {},
        messages: [{ id: 'u1', role: 'user', content: 'Weather in Oslo?' }] } },
    { type: EventType.TEXT_MESSAGE_START, messageId: 'm1', role: 'assistant' },
    { type: EventType.TEXT_MESSAGE_CONTENT, messageId: 'm1', delta: 'Let me look ' },
    { type: EventType.TEXT_MESSAGE_CONTENT, messageId: 'm1', delta: 'that up.' },
    // --- the client joins (or is cut) here ---
    { type: EventType.TOOL_CALL_START, toolCallId: 'call-1', toolCallName: 'get_weather', parentMessageId: 'm1' },
    { type: EventType.TOOL_CALL_ARGS, toolCallId: 'call-1', delta: '{"city":"Oslo"}' },
    { type: EventType.TOOL_CALL_END, toolCallId: 'call-1' },
    { type: EventType.TOOL_CALL_RESULT, messageId: 'tool-call-1', toolCallId: 'call-1', content: '{"temp":7}', role: 'tool' },
    { type: EventType.STATE_SNAPSHOT, snapshot: { city: 'Oslo', visited: [] } },
    { type: EventType.STATE_DELTA, delta: [{ op: 'add', path: '/visited/-', value: 'Oslo' }] },
    { type: EventType.TEXT_MESSAGE_CONTENT, messageId: 'm1', delta: ' It is 7 degrees.' },
    { type: EventType.TEXT_MESSAGE_END, messageId: 'm1' },
    { type: EventType.RUN_FINISHED, threadId, runId },
  ];
};
const JOIN = 4;

/** What `@ag-ui/client` builds from the producer's own events. */
async function direct(events) {
  class Replay extends AbstractAgent {
    run() {
      return from(events.map((e) => structuredClone(e)));
    }
  }
  const agent = new Replay({ threadId: 'x' });
  await agent.runAgent();
  return { messages: agent.messages, state: agent.state };
}

/** What the server's AG-UI stream builds: the producer's messages, the text
 * after the tool call a segment of its own. */
const expected = [
  { id: 'u1', role: 'user', content: 'Weather in Oslo?' },
  { id: 'm1', role: 'assistant', content: 'Let me look that up.',
    toolCalls: [{ id: 'call-1', name: 'get_weather', args: { city: 'Oslo' } }] },
  { id: 'tool-call-1', role: 'tool', content: '{"temp":7}', toolCallId: 'call-1' },
  { id: 'm1:1', role: 'assistant', content: ' It is 7 degrees.' },
];

test('a client joining mid-run and one that followed from the start end with the same messages', async () => {
  const sid = `agui-serve-${process.pid}-1`;
  const events = run(sid);
  // One client follows from the start: it reads the empty session's
  // closed run, then the producer begins.
  let ready;
  const joined = new Promise((r) => { ready = r; });
  const early = new Follow(server.base, sid, {
    runId: 'run-1',
    onEvent: (e) => { if (e.type === EventType.RUN_FINISHED) ready(); },
  });
  const following = early.runAgent();
  await joined;
  await post(server.base, sid, events.slice(0, JOIN));
  const agent = new Follow(server.base, sid);
  let posted;
  agent.options.onEvent = (e) => {
    // Once the client holds the snapshot, the producer goes on.
    if (e.type === EventType.STATE_SNAPSHOT && !posted) posted = post(server.base, sid, events.slice(JOIN));
  };
  await agent.runAgent();
  await posted;
  await following;
  assert.deepEqual(said(agent.messages), expected);
  assert.deepEqual(said(early.messages), said(agent.messages));
  const want = await direct(events);
  assert.deepEqual(agent.state, want.state);
  assert.deepEqual(early.state, agent.state);
  assert.equal(agent.seen[0].type, EventType.RUN_STARTED);
  assert.equal(agent.seen.at(-1).type, EventType.RUN_FINISHED);
  assert.equal(early.seen.filter((e) => e.type === EventType.RUN_STARTED && e.runId === 'run-1').length, 1);
  assert.ok(agent.seen.every((e) => Number.isInteger(e.timestamp)), 'every event has its timestamp');
});

test('an idle session is one closed run: its snapshot between RUN_STARTED and RUN_FINISHED', async () => {
  const sid = `agui-serve-${process.pid}-2`;
  const events = run(sid);
  await post(server.base, sid, events);
  const agent = new Follow(server.base, sid);
  await agent.runAgent();
  assert.deepEqual(agent.seen.map((e) => e.type),
    [EventType.RUN_STARTED, EventType.MESSAGES_SNAPSHOT, EventType.STATE_SNAPSHOT, EventType.RUN_FINISHED]);
  assert.deepEqual(said(agent.messages), expected);
  const want = await direct(events);
  assert.deepEqual(agent.state, want.state);
});

test('cut mid-run and reconnected with Last-Event-ID: only what was missed, every message once', async () => {
  const sid = `agui-serve-${process.pid}-3`;
  const events = run(sid);
  await post(server.base, sid, events.slice(0, JOIN));
  // The first connection reads the snapshot, then is cut.
  let lastId;
  const raw = await fetch(`${server.base}/v1/sessions/${sid}/ag-ui`);
  const reader = raw.body.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  while (!text.includes('STATE_SNAPSHOT')) text += (await reader.read()).value;
  let held;
  for (const l of text.split('\n')) {
    if (l.startsWith('id: ')) lastId = l.slice(4);
    if (l.includes('"MESSAGES_SNAPSHOT"')) held = JSON.parse(l.slice(6)).messages;
  }
  await reader.cancel();
  assert.ok(lastId && held, text);
  // Meanwhile the run goes on: the tool call.
  await post(server.base, sid, events.slice(JOIN, JOIN + 4));
  // The client reconnects, saying what it read last; it keeps what it had.
  // Once it has the tool's result, the rest of the run streams live.
  let posted;
  const again = new Follow(server.base, sid, {
    lastEventId: lastId,
    onEvent: (e) => {
      if (e.type === EventType.TOOL_CALL_RESULT && !posted) posted = post(server.base, sid, events.slice(JOIN + 4));
    },
  });
  again.messages = held;
  await again.runAgent();
  await posted;
  const kinds = again.seen.map((e) => e.type);
  assert.ok(!kinds.includes(EventType.MESSAGES_SNAPSHOT), kinds.join());
  assert.equal(kinds[0], EventType.RUN_STARTED);
  assert.ok(again.seen.some((e) => e.type === EventType.TEXT_MESSAGE_CONTENT && e.delta === ' It is 7 degrees.'),
    'the rest of the run came live');
  assert.deepEqual(said(again.messages), expected, 'nothing lost, nothing twice');
  const want = await direct(events);
  assert.deepEqual(again.state, want.state);
});
