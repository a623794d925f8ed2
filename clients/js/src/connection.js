// @agent-projector/client: many sessions on one connection.
//
// Owns the multiplexed stream `GET /v1/streams?sessions=a,b,c`: one
// SessionProjection per session, fed by the frames that carry its
// `sessionId`; the resume id built from the positions held (`?cursor=` with
// `<epoch>:<cursor>` or empty per session, in the order of `sessions`), so
// that a reconnection, or a new list after add()/remove(), continues each
// session from its own cursor (or gets reset + snapshot from the server).
// Changes go out as `change` events and through `for await (... of conn)`.

import { createControls } from './controls.js';
import { iterate } from './emitter.js';
import { ProjectorError } from './http.js';
import { SessionProjection } from './projection.js';
import { ReconnectingStream } from './stream.js';

const FRAME_EVENTS = new Set(['snapshot', 'delta', 'reset', 'live']);

/** Split a multiplexed SSE id into its positions (`''` for a session with none). */
export function parsePositions(id) {
  return String(id).split(',');
}

/** The epoch part of a position `<epoch>:<cursor>` ('' when it has none). */
function epochOf(pos) {
  const i = pos.lastIndexOf(':');
  return i < 0 ? '' : pos.slice(0, i);
}

function checkId(id) {
  // The list travels comma-separated, each id percent-encoded (a comma in an id as %2C).
  if (typeof id !== 'string' || id === '') throw new TypeError('a session id is a non-empty string');
}

export class Connection extends ReconnectingStream {
  /**
   * @param {object} opts `baseUrl`, `sessions`, `token`, `fetch`, `headers`, `backoff`,
   *   `idleTimeoutMs`, `limits`, `start` (false: call start() yourself)
   */
  constructor(opts = {}) {
    super(opts, 'session stream');
    this.controls = createControls(opts);
    /** @type {string[]} */
    this._order = [];
    /** @type {Map<string, SessionProjection>} */
    this._sessions = new Map();
    /** The session list of the connection being read (the SSE id's order). */
    this._connected = [];
    /** The sessions of that connection that said they are live. */
    this._live = new Set();
    this._noCursor = false;
    for (const id of opts.sessions || []) {
      checkId(id);
      if (!this._sessions.has(id)) this._track(id);
    }
    if (opts.start !== false) this.start();
  }

  _track(id) {
    this._order.push(id);
    this._sessions.set(id, new SessionProjection(id, this.opts.limits));
  }

  /** The session ids, in the order the connection names them. */
  get sessions() {
    return [...this._order];
  }

  /** A session's state: null before its first snapshot, and from a reset until the next one. */
  state(sessionId) {
    return this._sessions.get(sessionId)?.state ?? null;
  }

  /** The projection of a session (state, cursor, epoch, position, resetReason), or undefined. */
  projection(sessionId) {
    return this._sessions.get(sessionId);
  }

  /** The cursor of the last frame applied to a session (0 before any). */
  cursor(sessionId) {
    return this._sessions.get(sessionId)?.cursor ?? 0;
  }

  /** Follow one more session on this connection (it reconnects with the positions it holds). */
  add(sessionId) {
    checkId(sessionId);
    if (this.closed || this._sessions.has(sessionId)) return;
    this._track(sessionId);
    this.emit('sessions', this.sessions);
    this.restart();
  }

  /** Stop following a session (it reconnects without it, the others resume). */
  remove(sessionId) {
    if (this.closed || !this._sessions.has(sessionId)) return;
    this._sessions.delete(sessionId);
    this._order = this._order.filter((id) => id !== sessionId);
    this.emit('sessions', this.sessions);
    this.restart();
  }

  /** Wait until `predicate(state)` holds for a session's state (checked now and at each change). */
  until(sessionId, predicate, { signal, timeoutMs } = {}) {
    return new Promise((resolve, reject) => {
      let timer;
      const finish = (fn, v) => { off(); offClose(); clearTimeout(timer); signal?.removeEventListener('abort', onAbort); fn(v); };
      const check = () => {
        const st = this.state(sessionId);
        let ok = false;
        try { ok = st != null && predicate(st); } catch (e) { finish(reject, e); return true; }
        if (ok) finish(resolve, st);
        return ok;
      };
      const off = this.on('change', (c) => { if (c.sessionId === sessionId) check(); });
      const offClose = this.on('close', () => finish(reject, new ProjectorError('connection closed', { code: 'closed' })));
      const onAbort = () => finish(reject, signal.reason ?? new ProjectorError('aborted', { code: 'aborted' }));
      signal?.addEventListener('abort', onAbort);
      if (timeoutMs != null) {
        timer = setTimeout(() => finish(reject, new ProjectorError(
          `no matching state of ${sessionId} within ${timeoutMs} ms`, { code: 'timeout' })), timeoutMs);
      }
      if (this.closed) finish(reject, new ProjectorError('connection closed', { code: 'closed' }));
      else check();
    });
  }

  /** Changes from now on, until close(): `for await (const change of conn)`. */
  [Symbol.asyncIterator]() {
    return iterate(this, 'change', 'close', () => this.closed);
  }

  // Controls on the same server, with the same token.
  approve(sessionId, actionId, fields) { return this.controls.approve(sessionId, actionId, fields); }
  reject(sessionId, actionId, fields) { return this.controls.reject(sessionId, actionId, fields); }
  answer(sessionId, actionId, value, fields) { return this.controls.answer(sessionId, actionId, value, fields); }
  cancel(sessionId, fields) { return this.controls.cancel(sessionId, fields); }
  send(sessionId, text, fields) { return this.controls.send(sessionId, text, fields); }

  // ----------------------------------------------------------- stream ---

  url() {
    if (!this._order.length) return null;
    this._connected = [...this._order];
    let q = 'sessions=' + this._connected.map(encodeURIComponent).join(',');
    const positions = this._noCursor ? [] : this._connected.map((id) => this._sessions.get(id).position);
    if (positions.some(Boolean)) q += '&cursor=' + positions.map(encodeURIComponent).join(',');
    return `${this.base}/v1/streams?${q}`;
  }

  openStatus() {
    this._live = new Set();
    return 'catching-up';
  }

  /** Whether `sessionId` is live on the connection being read (its history was read). */
  isLive(sessionId) {
    return this._live.has(sessionId) && this.status !== 'reconnecting';
  }

  onHttpError(err) {
    // Positions the server cannot read: start over with snapshots, once.
    if (err.status === 400 && err.code === 'invalid_cursor' && !this._noCursor) {
      this._noCursor = true;
      return 'retry';
    }
    return undefined;
  }

  onEvent(ev) {
    if (!FRAME_EVENTS.has(ev.event)) return undefined;
    let frame;
    try {
      frame = JSON.parse(ev.data);
    } catch (e) {
      this.emit('error', new ProjectorError(`unreadable ${ev.event} frame: ${e.message}`, { code: 'invalid_frame' }));
      return undefined;
    }
    this._noCursor = false;
    const sessionId = frame && frame.sessionId;
    const p = this._sessions.get(sessionId);
    if (!p) return undefined; // removed meanwhile
    if (frame.type === 'live') {
      // The replay of this session ended here: what follows is new.
      this._live.add(sessionId);
      this.emit('live', { sessionId, cursor: frame.cursor });
      if (this._connected.every((id) => this._live.has(id))) this._setStatus('live');
      return undefined;
    }
    if (frame.type === 'reset' && frame.reason === 'token_expired') {
      // Not a new log: the token ran out and the stream ends. The state and
      // its position stay; the reconnection asks for the token again.
      this.emit('error', new ProjectorError('the token expired', { status: 401, code: 'token_expired' }));
      return undefined;
    }
    if (frame.type === 'delta' && ev.id && p.epoch) {
      // The id says which log this delta belongs to; another one's frames never apply.
      const pos = parsePositions(ev.id)[this._connected.indexOf(sessionId)];
      if (pos && epochOf(pos) !== p.epoch) {
        this._apply(p, { sessionId, type: 'reset', reason: 'epoch_mismatch' });
        return 'restart';
      }
    }
    const r = this._apply(p, frame);
    if (r === 'gap') {
      this.emit('error', new ProjectorError(
        `frames of ${sessionId} missing after cursor ${p.cursor} (got ${frame.cursor}); resuming`, { code: 'gap' }));
      return 'restart';
    }
    return undefined;
  }

  _apply(p, frame) {
    const r = p.apply(frame);
    if (r === 'applied') {
      this.emit('change', { sessionId: p.sessionId, state: p.state, frame, cursor: p.cursor, epoch: p.epoch });
    }
    return r;
  }
}

/** Open one multiplexed connection for `sessions` (see Connection). */
export function connect(opts) {
  return new Connection(opts);
}
