// Issue 35 item 1: agent-projector as the server of `ai` 7's
// `WebSocketChatTransport` (`GET /v1/chat/ws`). The real class drives the
// shared chat scenarios (send, a second tab resuming mid-answer, stop, a
// failing model) and the approval round trip; raw sockets check the
// protocol's edges: every frame `safeValidateWebSocketChatTransportRequest`
// refuses gets an `error` for its requestId and the socket stays, many
// requests share one socket with gapless sequences, an abort stops one
// request alone, and tokens ride in each frame.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import WebSocket from 'ws';
import * as ai from 'ai';
import * as aiTest from 'ai/test';
import { z } from 'zod';
import { ANSWER, approvalScenarios, chatScenarios, gateway, text } from './lib/gateway-suite.mjs';

chatScenarios('ai (pinned) over WebSocketChatTransport', { ai, aiTest, spec: 'v3', transport: 'ws' });

approvalScenarios('ai (pinned) over WebSocketChatTransport', { ai, aiTest, z, transport: 'ws' });

/** A raw chat socket: send frames, read the server's frames per request. */
async function socket(url, protocols) {
  const ws = new WebSocket(url, protocols);
  const frames = [];
  let wake = () => {};
  ws.on('message', (data) => { frames.push(JSON.parse(String(data))); wake(); });
  await once(ws, 'open');
  return {
    ws,
    frames,
    send: (f) => ws.send(typeof f === 'string' ? f : JSON.stringify(f)),
    /** The frames of request `id` so far. */
    of: (id) => frames.filter((f) => f.requestId === id),
    /** Wait until `ok(frames)` holds. */
    async until(ok, what = 'frames') {
      const deadline = Date.now() + 10000;
      while (!ok(frames)) {
        if (Date.now() > deadline) throw new Error(`no ${what} in 10 s: ${JSON.stringify(frames.slice(-5))}`);
        await new Promise((r) => { wake = r; setTimeout(r, 50); });
      }
    },
  };
}

const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });
const sendFrame = (requestId, chat, text, extra = {}) => ({
  type: 'send', requestId, id: chat, trigger: 'submit-message', messageId: undefined,
  messages: [user(`${requestId}-u`, text)], headers: {}, body: {}, metadata: undefined, ...extra,
});
const ended = (s, id) => (fs) => s.of(id).some((f) => ['end', 'error', 'no-active'].includes(f.type));

/** The message a request's chunks build, read by `ai`'s own reader. */
async function built(chunks) {
  const stream = new ReadableStream({ start(c) { for (const x of chunks) c.enqueue(x); c.close(); } });
  let last;
  for await (const m of ai.readUIMessageStream({ stream, terminateOnError: true })) last = m;
  return JSON.parse(JSON.stringify(last));
}

describe('the chat socket, frame by frame', () => {
  const g = gateway({ ai, aiTest, spec: 'v3' });
  const url = () => `${g.server.base.replace('http', 'ws')}/v1/chat/ws`;

  test('every frame the ai package refuses gets an error for its requestId, and the socket stays', async () => {
    const s = await socket(url());
    const good = { headers: {}, body: {} };
    const frames = [
      'not json',
      [1],
      { requestId: 'no-type' },
      { type: 'abort' },
      { type: 'dance', requestId: 'dance', id: 'c', ...good },
      { type: 'resume', requestId: 'neg', id: 'c', lastSequence: -1, ...good },
      { type: 'resume', requestId: 'frac', id: 'c', lastSequence: 1.5, ...good },
      { type: 'resume', requestId: 'hdr', id: 'c', headers: { x: 1 }, body: {} },
      { type: 'resume', requestId: 'nobody', id: 'c', headers: {} },
      { type: 'resume', requestId: 'noid', ...good },
      sendFrame('trig', 'c', 'x', { trigger: 'resubmit' }),
      sendFrame('mid', 'c', 'x', { messageId: null }),
      sendFrame('empty', 'c', 'x', { messages: [] }),
      sendFrame('robot', 'c', 'x', { messages: [{ id: 'u', role: 'robot', parts: [{ type: 'text', text: 'x' }] }] }),
      sendFrame('noparts', 'c', 'x', { messages: [{ id: 'u', role: 'user', parts: [] }] }),
      sendFrame('notext', 'c', 'x', { messages: [{ id: 'u', role: 'user', parts: [{ type: 'text' }] }] }),
      sendFrame('nocall', 'c', 'x', { messages: [{ id: 'u', role: 'assistant', parts: [{ type: 'tool-x', state: 'input-available', input: {} }] }] }),
      // Accepted by both: nothing to resume in an unknown chat.
      { type: 'resume', requestId: 'ok-1', id: `unknown-${process.pid}`, ...good },
      { type: 'resume', requestId: 'ok-2', id: `unknown-${process.pid}`, lastSequence: 0, ...good, metadata: { a: 1 } },
    ];
    for (const [i, f] of frames.entries()) {
      const value = typeof f === 'string' ? undefined : f;
      const theirs = value !== undefined && (await ai.safeValidateWebSocketChatTransportRequest({ value })).success;
      const rid = value && typeof value.requestId === 'string' ? value.requestId : '';
      const before = s.frames.length;
      s.send(f);
      await s.until((fs) => fs.length > before, `an answer to frame ${i}`);
      const reply = s.frames[before];
      assert.equal(reply.requestId, rid, JSON.stringify(f));
      const refused = reply.type === 'error' && reply.code === 'invalid_request_frame';
      assert.equal(!refused, theirs, `frame ${i} ${JSON.stringify(f)}: ours ${JSON.stringify(reply)}, ai says ${theirs}`);
      if (theirs) assert.equal(reply.type, 'no-active');
    }
    assert.equal(s.ws.readyState, WebSocket.OPEN);
    s.ws.close();
  });

  test('many requests on one socket, each with gapless sequences; an abort stops one request alone', async () => {
    g.closeGate();
    const [x, y] = [`ws-many-x-${process.pid}`, `ws-many-y-${process.pid}`];
    const s = await socket(url());
    s.send(sendFrame('rx', x, 'Weather in Oslo?'));
    s.send(sendFrame('ry', y, 'Weather in Bergen?'));
    // Both answers stream their first half (the model holds the rest). A
    // request that starts after the words were stored gets them as one delta,
    // so wait on the text, not on the number of deltas.
    const half = ANSWER.split(' ').slice(0, 5).map((w) => `${w} `).join('');
    const said = (id) => s.of(id).filter((f) => f.type === 'chunk' && f.chunk.type === 'text-delta').map((f) => f.chunk.delta).join('');
    await s.until(() => said('rx') === half && said('ry') === half, 'both first halves');
    // A second request follows x's answer from its start; y's request is aborted.
    s.send({ type: 'resume', requestId: 'rx2', id: x, headers: {}, body: {} });
    await s.until(() => s.of('rx2').some((f) => f.type === 'chunk'), 'the resume');
    s.send({ type: 'abort', requestId: 'ry' });
    const yAtAbort = s.of('ry').length;
    // The abort is read before the next frame; give it a round trip.
    s.send({ type: 'resume', requestId: 'probe', id: `unknown-${process.pid}`, headers: {}, body: {} });
    await s.until(ended(s, 'probe'), 'the probe');
    g.openGate();
    await s.until(ended(s, 'rx'), 'the end of x');
    await s.until(ended(s, 'rx2'), 'the end of the resume');
    for (const id of ['rx', 'rx2']) {
      const fs = s.of(id);
      assert.equal(fs[0].type, 'start', id);
      assert.equal(fs.at(-1).type, 'end', id);
      const seq = fs.filter((f) => f.type === 'chunk').map((f) => f.sequence);
      assert.deepEqual(seq, seq.map((_, i) => i), `${id}: gapless from 0`);
    }
    const chunks = (id) => s.of(id).filter((f) => f.type === 'chunk').map((f) => f.chunk);
    for (const c of [...chunks('rx'), ...chunks('rx2')]) {
      assert.ok((await ai.uiMessageChunkSchema().validate(c)).success, JSON.stringify(c));
    }
    assert.deepEqual(await built(chunks('rx2')), await built(chunks('rx')), 'the resume builds the same message');
    // y: nothing after the abort took effect, no end; its run went on in the session.
    const done = await g.until(y, (snap) => snap.state.runtime.status === 'completed');
    assert.ok(s.of('ry').length <= yAtAbort + 1, 'the aborted request stopped');
    assert.ok(!s.of('ry').some((f) => f.type === 'end'));
    assert.equal(text(done.state.messages.at(-1)).trim(), ANSWER);
    s.ws.close();
  });

  test('a duplicate requestId and too many requests at once are refused by name', async () => {
    g.closeGate();
    const s = await socket(url());
    const chat = `ws-dup-${process.pid}`;
    s.send(sendFrame('same', chat, 'Weather?'));
    await s.until(() => s.of('same').some((f) => f.type === 'chunk'), 'the first answer');
    s.send({ type: 'resume', requestId: 'same', id: chat, headers: {}, body: {} });
    await s.until(() => s.of('same').some((f) => f.type === 'error'), 'the refusal');
    assert.equal(s.of('same').find((f) => f.type === 'error').code, 'duplicate_request_id');
    for (let i = 0; i < 15; i++) s.send({ type: 'resume', requestId: `many-${i}`, id: chat, headers: {}, body: {} });
    s.send({ type: 'resume', requestId: 'one-too-many', id: chat, headers: {}, body: {} });
    await s.until(() => s.of('one-too-many').length > 0, 'the 17th');
    assert.equal(s.of('one-too-many')[0].code, 'too_many_requests');
    g.openGate();
    await s.until(ended(s, 'same'), 'the end');
    s.ws.close();
  });
});

describe('the chat socket with auth on', () => {
  const SECRET = 'chat-ws-secret';
  const g = gateway({ ai, aiTest, spec: 'v3', env: { PROJECTOR_AUTH__MODE: 'jwt', PROJECTOR_AUTH__HS256_SECRET: SECRET } });
  const jwt = (claims, secret = SECRET) => {
    const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
    return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`;
  };
  const now = () => Math.floor(Date.now() / 1000);
  const token = (sessions, scope = 'publish subscribe control') => jwt({ sub: 'u', exp: now() + 600, sessions, scope });

  test('a token in each frame (the real class), in the handshake, forged or for another chat', async () => {
    const chat = `ws-auth-${process.pid}`;
    // The real class with `headers`: what a browser page does.
    const transport = new ai.WebSocketChatTransport({
      url: `${g.server.base}/v1/chat/ws`, webSocket: WebSocket, headers: { authorization: `Bearer ${token([chat])}` },
    });
    class Chat extends ai.AbstractChat {}
    const errors = [];
    const state = { status: 'ready', messages: [] };
    const c = new Chat({
      id: chat, transport, onError: (e) => errors.push(e),
      state: {
        get status() { return state.status; }, set status(v) { state.status = v; },
        get messages() { return state.messages; }, set messages(v) { state.messages = v; },
        error: undefined,
        pushMessage: (m) => { state.messages = state.messages.concat(m); },
        popMessage: () => { state.messages = state.messages.slice(0, -1); },
        replaceMessage: (i, m) => { state.messages = state.messages.map((x, j) => (j === i ? m : x)); },
        snapshot: (x) => structuredClone(x),
      },
    });
    await c.sendMessage({ text: 'Weather in Oslo?' });
    assert.deepEqual(errors, []);
    assert.equal(text(c.messages.at(-1)).trim(), ANSWER);
    transport.close();
    const base = `${g.server.base.replace('http', 'ws')}/v1/chat/ws`;
    // No token anywhere: the socket opens (a browser cannot send one in the handshake), each request is refused.
    const bare = await socket(base);
    bare.send({ type: 'resume', requestId: 'r', id: chat, headers: {}, body: {} });
    await bare.until(() => bare.of('r').length > 0);
    assert.deepEqual([bare.of('r')[0].type, bare.of('r')[0].code], ['error', 'missing_token']);
    // Forged, and a token for another chat, in the frame.
    bare.send({ type: 'resume', requestId: 'f', id: chat, headers: { Authorization: `Bearer ${jwt({ sub: 'u', exp: now() + 600, sessions: ['*'], scope: 'subscribe' }, 'not-the-secret')}` }, body: {} });
    bare.send({ type: 'resume', requestId: 'o', id: chat, headers: { authorization: `Bearer ${token(['someone-else'])}` }, body: {} });
    bare.send(sendFrame('p', chat, 'hi', { headers: { authorization: `Bearer ${token([chat], 'subscribe')}` } }));
    await bare.until(() => ['f', 'o', 'p'].every((id) => bare.of(id).length > 0));
    assert.equal(bare.of('f')[0].code, 'invalid_token');
    assert.equal(bare.of('o')[0].code, 'session_not_allowed');
    assert.equal(bare.of('p')[0].code, 'insufficient_scope');
    bare.ws.close();
    // The handshake's token (?access_token=) serves frames without one.
    const viaQuery = await socket(`${base}?access_token=${token([chat])}`);
    viaQuery.send({ type: 'resume', requestId: 'q', id: chat, headers: {}, body: {} });
    await viaQuery.until(() => viaQuery.of('q').length > 0);
    assert.equal(viaQuery.of('q')[0].type, 'no-active', 'the answer finished: nothing to resume, but allowed');
    viaQuery.ws.close();
    // A forged handshake token is refused at the handshake.
    const forged = new WebSocket(`${base}?access_token=${jwt({ sub: 'u', exp: now() + 600, sessions: ['*'] }, 'nope')}`);
    const [, res] = await once(forged, 'unexpected-response');
    assert.equal(res.statusCode, 401);
  });

  test('a request whose token expires mid-answer ends with an abort chunk, then end; the others go on', async () => {
    g.closeGate();
    const chat = `ws-exp-${process.pid}`;
    const s = await socket(`${g.server.base.replace('http', 'ws')}/v1/chat/ws`);
    s.send(sendFrame('x', chat, 'Weather in Oslo?', { headers: { authorization: `Bearer ${token([chat])}` } }));
    await s.until(() => s.of('x').some((f) => f.type === 'chunk' && f.chunk.type === 'text-delta'), 'the first half');
    const short = jwt({ sub: 'u', exp: now() + 2, sessions: [chat], scope: 'subscribe' });
    s.send({ type: 'resume', requestId: 'y', id: chat, headers: { authorization: `Bearer ${short}` }, body: {} });
    await s.until(ended(s, 'y'), 'the end of the resume');
    const ys = s.of('y');
    assert.deepEqual(ys.at(-2).chunk, { type: 'abort', reason: 'token expired' });
    assert.equal(ys.at(-1).type, 'end');
    assert.ok(!s.of('x').some((f) => f.type === 'end'), 'the request with a good token goes on');
    g.openGate();
    await s.until(ended(s, 'x'), 'the end of x');
    assert.equal(s.of('x').at(-1).type, 'end');
    s.ws.close();
  });
});
