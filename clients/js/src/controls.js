// @agent-projector/client: controls and one-shot reads.
//
// Owns the requests a person's decisions become: a decision on an action
// (`POST /v1/sessions/{id}/actions/{actionId}` with `{decision, answer?,
// requestId}`) and a run control (`POST /v1/sessions/{id}/controls` with
// `{type, message?, requestId}`), plus `GET .../snapshot`. The server relays
// a decision to the session's runtime; the action stays pending until the
// runtime's own `action.resolved` comes back as a frame. Error answers throw
// a ProjectorError carrying the problem's status, code and detail.

import { errorFrom, headersFor, networkError, normalizeBase, pickFetch, randomId, sessionPath } from './http.js';

/**
 * Controls bound to one server.
 * @param {{ baseUrl?: string, token?: string | (() => string | Promise<string>), fetch?: typeof fetch,
 *   headers?: Record<string, string> }} [opts]
 */
export function createControls(opts = {}) {
  const base = normalizeBase(opts.baseUrl);
  const doFetch = pickFetch(opts.fetch);

  async function postJson(path, body, what, signal) {
    const headers = await headersFor(opts, 'application/json', { 'content-type': 'application/json' });
    let resp;
    try {
      resp = await doFetch(base + path, { method: 'POST', headers, body: JSON.stringify(body), signal });
    } catch (e) {
      throw networkError(what, e);
    }
    if (!resp.ok) throw await errorFrom(resp, what);
    return resp.json();
  }

  /** Any decision: `approve`, `reject` or `answer` (with `fields.answer`). */
  function decide(sessionId, actionId, decision, fields = {}) {
    const { signal, ...rest } = fields;
    const body = { ...rest, decision, requestId: rest.requestId ?? randomId() };
    const path = `${sessionPath(sessionId)}/actions/${encodeURIComponent(actionId)}`;
    return postJson(path, body, `${decision} ${actionId}`, signal);
  }

  /** Any run control: `send`, `interrupt`, `cancel`, `retry`, `steer`, `queue`. */
  function control(sessionId, type, fields = {}) {
    const { signal, ...rest } = fields;
    const body = { ...rest, type, requestId: rest.requestId ?? randomId() };
    return postJson(`${sessionPath(sessionId)}/controls`, body, `${type} ${sessionId}`, signal);
  }

  return {
    decide,
    control,
    approve: (sessionId, actionId, fields) => decide(sessionId, actionId, 'approve', fields),
    reject: (sessionId, actionId, fields) => decide(sessionId, actionId, 'reject', fields),
    answer: (sessionId, actionId, value, fields = {}) =>
      decide(sessionId, actionId, 'answer', { ...fields, answer: value }),
    cancel: (sessionId, fields) => control(sessionId, 'cancel', fields),
    send: (sessionId, text, fields = {}) => control(sessionId, 'send', { ...fields, message: text }),
    /** `GET /v1/sessions/{id}/snapshot`: `{type: 'snapshot', cursor, epoch, state}`. */
    async snapshot(sessionId, { signal } = {}) {
      const what = `snapshot ${sessionId}`;
      const headers = await headersFor(opts, 'application/json');
      let resp;
      try {
        resp = await doFetch(`${base}${sessionPath(sessionId)}/snapshot`, { headers, signal });
      } catch (e) {
        throw networkError(what, e);
      }
      if (!resp.ok) throw await errorFrom(resp, what);
      return resp.json();
    },
  };
}
