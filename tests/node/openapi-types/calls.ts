// Three routes called through the types that openapi-typescript generates
// from openapi/openapi.json. openapi-lint.test.mjs copies this file beside
// the generated `api.d.ts` in a temporary folder, type-checks it with
// `tsc --noEmit` (strict, tsconfig.json here), then runs `roundTrip` against
// a server. The `@ts-expect-error` lines at the end fail the check if the
// generated types stop telling right from wrong.
import type { paths } from './api.js';

type PostEvents = paths['/v1/sessions/{session_id}/events']['post'];
type GetSnapshot = paths['/v1/sessions/{session_id}/snapshot']['get'];
type ListSessions = paths['/v1/sessions']['get'];

export type EventBody = PostEvents['requestBody']['content']['application/json'];
export type IngestOutcome = PostEvents['responses'][200]['content']['application/json'];
export type Snapshot = GetSnapshot['responses'][200]['content']['application/json'];
export type ListQuery = NonNullable<ListSessions['parameters']['query']>;
export type SessionsPage = ListSessions['responses'][200]['content']['application/json'];
export type Problem = ListSessions['responses'][400]['content']['application/problem+json'];

/** The body of a 2xx answer as `T`; a problem+json answer as an error. */
async function body<T>(r: Response): Promise<T> {
  if (!r.ok) {
    const p = (await r.json()) as Problem;
    throw new Error(`${r.status} ${p.code}: ${p.detail}`);
  }
  return (await r.json()) as T;
}

const session = (p: { session_id: string }) => `/v1/sessions/${encodeURIComponent(p.session_id)}`;

export async function postEvents(
  base: string,
  path: PostEvents['parameters']['path'],
  events: EventBody,
): Promise<IngestOutcome> {
  const r = await fetch(`${base}${session(path)}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(events),
  });
  return body<IngestOutcome>(r);
}

export async function getSnapshot(base: string, path: GetSnapshot['parameters']['path']): Promise<Snapshot> {
  return body<Snapshot>(await fetch(`${base}${session(path)}/snapshot`));
}

export async function listSessions(base: string, query: ListQuery = {}): Promise<SessionsPage> {
  const q = new URLSearchParams();
  if (query.after !== undefined) q.set('after', query.after);
  if (query.limit !== undefined) q.set('limit', String(query.limit));
  return body<SessionsPage>(await fetch(`${base}/v1/sessions?${q}`));
}

export interface RoundTrip {
  accepted: number;
  cursor: number;
  kind: 'snapshot';
  sameEpoch: boolean;
  listed: string[];
}

/** POST two events, read the snapshot, list the sessions. */
export async function roundTrip(base: string, sessionId: string): Promise<RoundTrip> {
  const outcome = await postEvents(base, { session_id: sessionId }, [
    { id: 'e1', type: 'session.created', runId: 'run-1' },
    { id: 'e2', type: 'turn.submitted', turnId: 't1', payload: { text: 'hello' } },
  ]);
  const snap = await getSnapshot(base, { session_id: sessionId });
  const page = await listSessions(base, { limit: 100 });
  return {
    accepted: outcome.accepted,
    cursor: snap.cursor,
    kind: snap.type,
    sameEpoch: outcome.epoch === snap.epoch,
    listed: page.sessions.map((s) => s.sessionId),
  };
}

// The generated types are not `any`: each of these is a type error.
// @ts-expect-error: an event needs its class (`type`, `eventClass` or `kind`)
const classless: EventBody = { sessionId: 's' };
// @ts-expect-error: `limit` is a number
const wordy: ListQuery = { limit: 'ten' };
// @ts-expect-error: a snapshot's `type` is "snapshot"
const delta: Snapshot['type'] = 'delta';
// @ts-expect-error: no such route
type Missing = paths['/v1/sessions/{session_id}/snapshots'];
export const misuses: [unknown, unknown, unknown, Missing?] = [classless, wordy, delta];
