// Helpers of the client-library suites (clients/js): event fixtures that
// touch every surface, a local runtime that records relayed controls, a
// fetch that can cut and hold the connection, and the one comparison every
// scenario ends with: the state the client rebuilt from frames equals
// `GET /v1/sessions/{id}/snapshot`'s state, all of it.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { snapshot } from './server.mjs';

export const T = 15000;

/** A state as compared with the snapshot's: all of it (a deep copy). */
export function comparable(state) {
  return structuredClone(state);
}

/**
 * Wait until the client holds a session at the server's epoch and cursor, then check
 * that its state equals the snapshot's. Returns the snapshot.
 */
export async function assertSameAsSnapshot(conn, base, sessionId, label = sessionId, { token } = {}) {
  const snap = token ? await snapshotWith(base, sessionId, token) : await snapshot(base, sessionId);
  await conn.until(sessionId, () => {
    const p = conn.projection(sessionId);
    return p.epoch === snap.epoch && p.cursor >= snap.cursor;
  }, { timeoutMs: T });
  const p = conn.projection(sessionId);
  assert.equal(p.epoch, snap.epoch, `${label}: same epoch`);
  assert.equal(p.cursor, snap.cursor, `${label}: same cursor`);
  assert.deepStrictEqual(comparable(p.state), comparable(snap.state), `${label}: the client's state is the snapshot's`);
  return snap;
}

/** The snapshot frame, read with a bearer token. */
async function snapshotWith(base, sessionId, token) {
  const r = await fetch(`${base}/v1/sessions/${encodeURIComponent(sessionId)}/snapshot`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(r.status, 200, `snapshot ${sessionId}`);
  return r.json();
}

/** All text of a state's messages, in order. */
export const allText = (state) =>
  state.messages.flatMap((m) => m.parts).filter((p) => p.type === 'text').map((p) => p.text).join('|');

/** An Agent UI envelope event maker for one run: ids `${prefix}1`, `${prefix}2`, ... with sequences. */
export function eventMaker(prefix, run = { runId: 'run-1', turnId: 'turn-1' }) {
  let n = 0;
  return (type, fields = {}) => ({ id: `${prefix}${++n}`, type, ...run, sequence: n, ...fields });
}

/**
 * A conversation that touches most message chunks: user text, reasoning,
 * text segmented by tools, a tool result and a failure, evidence with a URL
 * (a source part), an artifact card, a teammate and its message, an unknown
 * class (a diagnostic), a differing final text (a reconciliation).
 */
export function conversation(ev, sid) {
  return [
    ev('turn.submitted', { payload: { text: 'Why does the nightly build fail?' } }),
    ev('run.started'),
    ev('reasoning.summary', { payload: { text: 'Check the CI log before touching code.' } }),
    ev('text.delta', { payload: { delta: 'Let me look at the CI log. ' } }),
    ev('tool.started', { toolCallId: 'call-grep', payload: { toolName: 'grep', input: { pattern: 'unicode_escape' } } }),
    ev('tool.progress', { toolCallId: 'call-grep', payload: { progress: 0.5, preview: 'lexer.rs:12' } }),
    ev('tool.result', { toolCallId: 'call-grep', refIds: ['out-grep'], payload: { summary: '3 matches in lexer.rs' } }),
    ev('tool.started', { toolCallId: 'call-build', payload: { toolName: 'cargo_build', input: { release: true } } }),
    ev('tool.failed', { toolCallId: 'call-build', payload: { error: 'linker exited with 1' } }),
    ev('text.delta', { payload: { delta: 'The lexer accepts escapes ' } }),
    ev('text.delta', { payload: { delta: 'that are too long.' } }),
    ev('text.final', { payload: { text: 'The lexer accepts escapes that are far too long.' } }),
    ev('evidence.changed', { evidenceId: 'ev-log', refIds: ['ci-log#L212'],
      payload: { title: 'CI log line 212', verdict: 'supports', url: 'https://ci.test/log/212' } }),
    ev('artifact.created', { artifactId: 'art-patch', refIds: ['diff-1'], payload: { title: 'lexer.rs patch', artifactKind: 'patch' } }),
    ev('agent.spawned', { agentId: 'reviewer', parentSessionId: sid, payload: { name: 'Reviewer', role: 'reviewer' } }),
    ev('text.delta', { agentId: 'reviewer', payload: { delta: 'Reviewed: the fix matches the spec.' } }),
    ev('vendor.telemetry', { payload: { tokens: 1234 } }),
    ev('plan.delta', { payload: { planId: 'p1', delta: '1. reproduce' } }),
    ev('plan.final', { payload: { planId: 'p1', text: '1. reproduce\n2. patch', steps: ['reproduce', 'patch'] } }),
    ev('session.updated', { payload: { title: 'Nightly build', pinned: true } }),
    ev('tool.catalog.resolved', { payload: { tools: ['grep', { name: 'cargo_build', description: 'build' }] } }),
    ev('state.snapshot', { payload: { state: { filter: 'failing', count: 1 } } }),
    ev('state.delta', { payload: { patch: [{ op: 'replace', path: '/app/count', value: 2 }] } }),
    ev('metric.changed', { owner: 'ui_projection', payload: { fps: 60 } }),
  ];
}

/** Team, coding, context, queue and permission surfaces (the viewer's workbench facts). */
export function workbench(at = { runId: 'r', turnId: 't' }) {
  return [
    { id: 'w1', type: 'turn.submitted', ...at, payload: { text: 'Fix the build', attachments: [
      { type: 'document', url: 'https://files.test/spec.pdf', mediaType: 'application/pdf' },
      { type: 'business_object', objectType: 'campaign', objectId: '42', name: 'Q3 campaign' }] } },
    { id: 'w2', type: 'team.changed', topology: 'coordinator_team', payload: { teamName: 'delivery', roster: [{ agentId: 'lead', role: 'coordinator' }] } },
    { id: 'w3', type: 'task.created', taskId: 'task-1', payload: { assignee: 'researcher' }, title: 'Collect sources' },
    { id: 'w4', type: 'subagent.started', subagentId: 'researcher', taskId: 'task-1', payload: { role: 'researcher', model: 'm-2' } },
    { id: 'w5', type: 'file.changed', ...at, payload: { path: 'src/main.rs', changeKind: 'modified', diffRef: 'diff://1' } },
    { id: 'w6', type: 'command.exited', ...at, toolCallId: 'cmd-1', payload: { command: 'cargo test', exitCode: 101, outputRef: 'out://1' } },
    { id: 'w7', type: 'context.changed', payload: { contextRefs: ['doc://spec'], budget: { usedTokens: 700, maxTokens: 1000 }, missing: ['doc://secret'] } },
    { id: 'w8', type: 'handoff.requested', payload: { handoffId: 'h1', from: 'lead', to: 'researcher', reason: 'needs sources' } },
    { id: 'w9', type: 'review.verdict', reviewId: 'rv1', evidenceId: 'ev1', payload: { verdict: 'passed' } },
    { id: 'w10', type: 'worker.notification', subagentId: 'researcher', taskId: 'task-1', payload: { role: 'user', summary: '3 sources found' } },
    { id: 'w11', type: 'queue.changed', payload: { queuedTurns: [{ turnId: 't2', text: 'next question' }], steer: { id: 's1', text: 'use v2' } } },
    { id: 'w12', type: 'patch.failed', ...at, payload: { patchId: 'p1', path: 'src/lib.rs', failureCategory: 'conflict' } },
    { id: 'w13', type: 'test.completed', ...at, toolCallId: 'tr-1', payload: { suite: 'unit', result: 'failed', passed: 3, failed: 1 } },
    { id: 'w14', type: 'sandbox.blocked', ...at, payload: { reasonCode: 'network_disabled' } },
    { id: 'w15', type: 'context.compaction.started', payload: { compactionId: 'k1' } },
    { id: 'w16', type: 'context.compaction.completed', payload: { compactionId: 'k1', summary: 'kept 3 facts' } },
    { id: 'w17', type: 'permission.changed', ...at, payload: { mode: 'ask', risk: 'medium' } },
  ];
}

/**
 * A local runtime: the session's control URL. Records every relayed body
 * and answers 200. `relayed(n)` waits until n bodies arrived.
 */
export async function startRuntime() {
  const received = [];
  const waiters = [];
  const srv = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      for (const w of waiters.splice(0)) w();
    });
  }).listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const hostPort = `127.0.0.1:${srv.address().port}`;
  return {
    received,
    hostPort,
    url: `http://${hostPort}/controls`,
    async relayed(n) {
      const deadline = Date.now() + T;
      while (received.length < n) {
        if (Date.now() > deadline) throw new Error(`runtime got ${received.length} of ${n} bodies`);
        await new Promise((r) => { waiters.push(r); setTimeout(r, 500); });
      }
      return received;
    },
    close: () => new Promise((r) => srv.close(r)),
  };
}

/**
 * A fetch for the client that the test controls: `cut()` errors every body
 * being read (a dropped connection) and `hold()` / `release()` keep new
 * stream requests waiting (the network is down) until released. `urls`
 * records every stream request.
 */
export function controlledFetch() {
  const live = new Set();
  const urls = [];
  let gate = null;
  const waiting = [];
  async function f(url, init = {}) {
    const isStream = String(url).includes('/v1/streams') || String(url).includes('/v1/sessions/stream');
    if (!isStream) return fetch(url, init);
    urls.push(String(url));
    for (const w of waiting.splice(0)) w();
    if (gate) await gate.promise;
    const ac = new AbortController();
    init.signal?.addEventListener('abort', () => ac.abort(init.signal.reason));
    const resp = await fetch(url, { ...init, signal: ac.signal });
    live.add(ac);
    return resp;
  }
  return {
    fetch: f,
    urls,
    cut() {
      for (const ac of live) ac.abort(new Error('network cut by the test'));
      live.clear();
    },
    hold() {
      let release;
      const promise = new Promise((r) => (release = r));
      gate = { promise, release };
    },
    release() {
      const g = gate;
      gate = null;
      g?.release();
    },
    /** Wait until `n` stream requests were made in all. */
    async requests(n) {
      const deadline = Date.now() + T;
      while (urls.length < n) {
        if (Date.now() > deadline) throw new Error(`${urls.length} of ${n} stream requests`);
        await new Promise((r) => { waiting.push(r); setTimeout(r, 500); });
      }
      return urls;
    },
  };
}
