// A typed use of @agent-projector/client, checked by `tsc --noEmit`
// (client-unit.test.mjs): the package's exports map and types conditions
// resolve, the state is typed from the frames up, and misuse fails.
import {
  ProjectorError, SessionProjection, connect, createClient, watchIndex,
  type Change, type IndexEntry, type Message, type MuxFrame, type SessionState, type ToolPart,
} from '@agent-projector/client';
import { useSession, useSessionIndex } from '@agent-projector/client/react';
import type { DeltaFrame, Problem, Relayed } from '@agent-projector/client/schema';

export async function follow(baseUrl: string, token: () => Promise<string>): Promise<number> {
  const conn = connect({ baseUrl, sessions: ['a', 'b'], token, backoff: { initialMs: 250 } });
  conn.on('status', (s) => {
    const ok: 'idle' | 'connecting' | 'open' | 'catching-up' | 'live' | 'reconnecting' | 'failed' | 'closed' = s;
    void ok;
  });
  conn.on('live', ({ sessionId, cursor }) => {
    const live: boolean = conn.isLive(sessionId);
    void [live, cursor.toFixed()];
  });
  conn.on('error', (e: ProjectorError) => console.warn(e.status, e.code, e.detail));
  let applied = 0;
  for await (const change of conn) {
    const c: Change = change;
    const frame: MuxFrame = c.frame;
    if (frame.type === 'delta') {
      const d: DeltaFrame = frame;
      applied += d.chunks.length;
    }
    const st: SessionState | null = c.state;
    const last: Message | undefined = st?.messages.at(-1);
    const tool = last?.parts.find((p): p is ToolPart => p.type.startsWith('tool-'));
    if (tool?.state === 'approval-requested' && tool.approval) {
      const r: Relayed = await conn.approve(c.sessionId, tool.approval.id, { requestId: 'r1' });
      void r.idempotencyKey;
    }
    if (st?.runtime.status === 'completed') break;
  }
  conn.add('c');
  conn.remove('a');
  const s = await conn.until('b', (state) => state.runtime.pendingActions === 0, { timeoutMs: 1000 });
  conn.close();
  return applied + s.messages.length;
}

export async function controls(): Promise<void> {
  const client = createClient({ baseUrl: 'http://localhost:8080', token: 'secret' });
  try {
    await client.answer('s', 'form-1', { region: 'eu-west' });
    await client.send('s', 'more', { messageId: 'm1' });
    const snap = await client.snapshot('s');
    const pending: number = snap.state.runtime.pendingActions;
    void pending;
  } catch (e) {
    if (e instanceof ProjectorError) {
      const p: Problem['code'] = e.code;
      void p;
    }
  }
  // @ts-expect-error: an action id is a string
  await client.approve('s', 42);
  // @ts-expect-error: no such control
  await client.control('s', 'explode');
  const index = watchIndex({ baseUrl: '' });
  const entries: IndexEntry[] = index.list();
  void entries.map((e) => e.head - e.pendingActions);
  index.close();
}

export function pure(frame: MuxFrame): string {
  const p = new SessionProjection('s', { maxTimeline: 10 });
  const result: 'applied' | 'ignored' | 'gap' = p.apply(frame);
  // @ts-expect-error: state is null until a snapshot
  p.state.messages;
  return `${result} ${p.position}`;
}

export function Panel(props: { id: string }): string {
  const { state, status, cursor, approve, cancel } = useSession(props.id, { baseUrl: '', token: 't' });
  const { sessions, ready } = useSessionIndex({ baseUrl: '' });
  void approve('a1');
  void cancel();
  return `${status} ${cursor} ${state?.messages.length ?? 0} ${ready ? sessions.length : '-'}`;
}
