// @agent-projector/client: the live session index.
//
// Owns `GET /v1/sessions/stream`: a Map of session entries (sessionId ->
// {sessionId, epoch, head, first, status?, title?, pendingActions, ...})
// replaced by a `snapshot`, changed by `created` / `updated` / `deleted`
// events, cleared by a `reset` until the snapshot that follows; resumed with
// the index's own `<epoch>:<cursor>` id. Each change gives a new Map, so a
// UI can compare by reference.

import { iterate } from './emitter.js';
import { ProjectorError } from './http.js';
import { ReconnectingStream } from './stream.js';

export class SessionIndex extends ReconnectingStream {
  /** @param {object} opts `baseUrl`, `token`, `fetch`, `headers`, `backoff`, `idleTimeoutMs`, `start` */
  constructor(opts = {}) {
    super(opts, 'session index');
    /** @type {Map<string, object>} */
    this.sessions = new Map();
    /** The index position `<epoch>:<cursor>` of the last event ('' before any). */
    this.position = '';
    /** False from a reset until the snapshot that follows, and before the first one. */
    this.ready = false;
    if (opts.start !== false) this.start();
  }

  /** The entries, most recently updated first (by `updatedAt`, then by `head`). */
  list() {
    return [...this.sessions.values()].sort((a, b) =>
      String(b.updatedAt ?? '').localeCompare(String(a.updatedAt ?? '')) || (b.head ?? 0) - (a.head ?? 0));
  }

  /** Wait until `predicate(sessions)` holds (checked now and at each change). */
  until(predicate, { timeoutMs } = {}) {
    return new Promise((resolve, reject) => {
      let timer;
      const finish = (fn, v) => { off(); offClose(); clearTimeout(timer); fn(v); };
      const check = () => {
        let ok = false;
        try { ok = this.ready && predicate(this.sessions); } catch (e) { finish(reject, e); return; }
        if (ok) finish(resolve, this.sessions);
      };
      const off = this.on('change', check);
      const offClose = this.on('close', () => finish(reject, new ProjectorError('index closed', { code: 'closed' })));
      if (timeoutMs != null) {
        timer = setTimeout(() => finish(reject, new ProjectorError(
          `no matching index within ${timeoutMs} ms`, { code: 'timeout' })), timeoutMs);
      }
      if (this.closed) finish(reject, new ProjectorError('index closed', { code: 'closed' }));
      else check();
    });
  }

  /** Changes from now on, until close(). */
  [Symbol.asyncIterator]() {
    return iterate(this, 'change', 'close', () => this.closed);
  }

  url() {
    const q = this.position ? `?cursor=${encodeURIComponent(this.position)}` : '';
    return `${this.base}/v1/sessions/stream${q}`;
  }

  onHttpError(err) {
    // A position the server cannot read: start over with a snapshot.
    if (err.status === 400 && err.code === 'invalid_cursor' && this.position) {
      this.position = '';
      return 'retry';
    }
    return undefined;
  }

  onEvent(ev) {
    let data;
    try {
      data = JSON.parse(ev.data);
    } catch (e) {
      this.emit('error', new ProjectorError(`unreadable index event: ${e.message}`, { code: 'invalid_frame' }));
      return;
    }
    if (!data || typeof data !== 'object') return;
    if (ev.id) this.position = ev.id;
    let change;
    switch (data.type) {
      case 'snapshot': {
        const m = new Map();
        for (const e of data.sessions || []) if (e && e.sessionId != null) m.set(e.sessionId, e);
        this.sessions = m;
        this.ready = true;
        change = { type: 'snapshot' };
        break;
      }
      case 'created':
      case 'updated':
      case 'deleted': {
        const e = data.session;
        if (!e || e.sessionId == null) return;
        const m = new Map(this.sessions);
        if (data.type === 'deleted') m.delete(e.sessionId);
        else m.set(e.sessionId, e);
        this.sessions = m;
        change = { type: data.type, sessionId: e.sessionId, entry: e };
        break;
      }
      case 'reset':
        this.sessions = new Map();
        this.ready = false;
        this.position = '';
        change = { type: 'reset', reason: data.reason };
        break;
      default:
        return;
    }
    this.emit('change', { ...change, cursor: data.cursor, sessions: this.sessions });
  }
}

/** Follow the live session index (see SessionIndex). */
export function watchIndex(opts) {
  return new SessionIndex(opts);
}
