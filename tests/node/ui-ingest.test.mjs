// Issue 14 item 1: an AI SDK route's UI message stream, made by the real
// `ai` package (`streamText` on its own mock language model, no network,
// `toUIMessageStreamResponse`), is POSTed to agent-projector as it is
// produced (a streaming fetch body). The session shows the message live,
// and an AI SDK client resuming it from agent-projector builds a valid
// message with the same text, reasoning and tool call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  streamText, tool, stepCountIs, readUIMessageStream, parseJsonEventStream, uiMessageChunkSchema,
} from 'ai';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { z } from 'zod';
import { startServer, snapshot, plain } from './lib/server.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** A two-step weather answer from the SDK's own mock model. */
function weatherModel() {
  let call = 0;
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: convertArrayToReadableStream(call++ === 0 ? [
        { type: 'stream-start', warnings: [] },
        { type: 'reasoning-start', id: 'r1' }, { type: 'reasoning-delta', id: 'r1', delta: 'Use the weather tool.' }, { type: 'reasoning-end', id: 'r1' },
        { type: 'text-start', id: 't1' }, { type: 'text-delta', id: 't1', delta: 'Let me look. ' }, { type: 'text-end', id: 't1' },
        { type: 'tool-input-start', id: 'c1', toolName: 'weather' }, { type: 'tool-input-delta', id: 'c1', delta: '{"city":"Oslo"}' }, { type: 'tool-input-end', id: 'c1' },
        { type: 'tool-call', toolCallId: 'c1', toolName: 'weather', input: '{"city":"Oslo"}' },
        { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_use' }, usage },
      ] : [
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't2' }, { type: 'text-delta', id: 't2', delta: 'It is sunny in Oslo.' }, { type: 'text-end', id: 't2' },
        { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
      ]),
    }),
  });
}

/** An AI SDK route as an app writes it, plus the three lines that push its
 *  stream to agent-projector (README "Push an AI SDK route's stream"). */
function aiRoute(base, chatId, messageId) {
  let pushed;
  const result = streamText({
    model: weatherModel(), prompt: 'Weather in Oslo?', stopWhen: stepCountIs(3),
    tools: { weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => ({ city, sky: 'sunny' }) }) },
  });
  const response = result.toUIMessageStreamResponse({
    generateMessageId: () => messageId,
    consumeSseStream: ({ stream }) => {
      pushed = fetch(`${base}/v1/sessions/${chatId}/events`, {
        method: 'POST', headers: { 'content-type': 'text/event-stream' },
        body: stream.pipeThrough(new TextEncoderStream()), duplex: 'half',
      });
    },
  });
  return { response, pushed: () => pushed };
}

/** What `ai` builds from an SSE body. */
async function build(body) {
  const chunks = parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).pipeThrough(new TransformStream({
    transform(r, c) { if (!r.success) throw r.error; c.enqueue(r.value); },
  }));
  let last;
  for await (const m of readUIMessageStream({ stream: chunks, terminateOnError: true })) last = m;
  return plain(last);
}

const visible = (parts) => parts
  .filter((p) => p.type !== 'step-start')
  .map((p) => (p.type === 'text' || p.type === 'reasoning' ? `${p.type}:${p.text}` : p.type.startsWith('tool-') ? `${p.type}:${JSON.stringify(p.input)}:${p.state}` : p.type));

test('an AI SDK route\'s UI message stream, pushed as it is made, becomes the session\'s message', async () => {
  const sid = `ui-ingest-${process.pid}`;
  const { response, pushed } = aiRoute(server.base, sid, 'gen-1');
  // The browser's copy, as `ai` builds it.
  const producer = await build(response.body);
  const posted = await pushed();
  const reply = await posted.json();
  assert.equal(posted.status, 200, JSON.stringify(reply));
  assert.ok(reply.accepted > 5, JSON.stringify(reply));

  const snap = await snapshot(server.base, sid);
  const ours = snap.state.messages.find((m) => m.id === 'gen-1');
  assert.ok(ours, 'the message keeps the id the route gave it');
  assert.equal(ours.status, 'complete');
  assert.equal(snap.state.runtime.status, 'completed');
  assert.deepEqual(visible(ours.parts), visible(producer.parts));

  // An AI SDK client resuming it from agent-projector gets a valid message
  // with the same text, reasoning and tool call.
  const r = await fetch(`${server.base}/v1/sessions/${sid}/messages/gen-1/ui-stream`);
  const resumed = await build(r.body);
  assert.deepEqual(visible(resumed.parts), visible(producer.parts));
  assert.deepEqual(resumed.parts, ours.parts);
});
