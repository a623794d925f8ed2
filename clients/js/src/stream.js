// @agent-projector/client: one SSE stream that reconnects.
//
// Owns the life of one long-lived `GET` of an event stream over `fetch`:
// connecting with the bearer token, reading events, noticing a dead
// connection (no byte, not even a heartbeat comment, within `idleTimeoutMs`),
// and reconnecting with exponential backoff and jitter; a restart on request
// (new URL, no delay); a clean close. What the URL is and what an event means
// belong to the subclasses (the multiplexed session stream, the index).

import { Emitter } from './emitter.js';
import { ProjectorError, errorFrom, headersFor, networkError, normalizeBase, pickFetch } from './http.js';
import { readSSE } from './sse.js';

/** Defaults of the `backoff` option. */
export const DEFAULT_BACKOFF = Object.freeze({ initialMs: 500, maxMs: 30000, factor: 2, jitter: 0.5 });

/**
 * The delay before reconnection attempt `attempt` (0-based): exponential,
 * capped, with up to `jitter` of it taken off at random. `backoff` may be a
 * function `(attempt) => ms` instead.
 */
export function backoffDelay(attempt, backoff) {
  if (typeof backoff === 'function') return Math.max(0, Number(backoff(attempt)) || 0);
  const b = { ...DEFAULT_BACKOFF, ...(backoff || {}) };
  const d = Math.min(b.maxMs, b.initialMs * b.factor ** attempt);
  return d * (1 - b.jitter * Math.random());
}

/** HTTP statuses worth trying again (the others need the caller to change something). */
const RETRYABLE = new Set([408, 425, 429, 500, 502, 503, 504]);

export class ReconnectingStream extends Emitter {
  /**
   * @param {object} opts `baseUrl`, `token`, `fetch`, `headers`, `backoff`, `idleTimeoutMs`
   * @param {string} what a name for error messages
   */
  constructor(opts, what) {
    super();
    this.opts = opts;
    this.what = what;
    this.base = normalizeBase(opts.baseUrl);
    this.fetch = pickFetch(opts.fetch);
    this.idleTimeoutMs = opts.idleTimeoutMs ?? 45000;
    /** @type {'idle'|'connecting'|'open'|'catching-up'|'live'|'reconnecting'|'failed'|'closed'} */
    this.status = 'idle';
    this.lastError = null;
    this.closed = false;
    this._controller = null;
    this._restart = false;
    this._wake = null;
    this._running = false;
  }

  /** The URL to GET now, or null while there is nothing to stream. (Subclass.) */
  url() {
    return null;
  }

  /** The status once a response is being read. (Subclass: the session streams say 'catching-up'.) */
  openStatus() {
    return 'open';
  }

  /** One SSE event. Return 'restart' to drop the connection and reconnect after a backoff. (Subclass.) */
  onEvent(_ev) {}

  /** A non-2xx answer: return 'retry' to reconnect at once, else it is handled as below. (Subclass.) */
  onHttpError(_err) {
    return undefined;
  }

  _setStatus(s) {
    if (this.status === s) return;
    this.status = s;
    this.emit('status', s);
  }

  /** Start (or continue) the connection loop, from the next microtask (listeners added now see it all). */
  start() {
    if (this._running || this.closed) return;
    this._running = true;
    queueMicrotask(() => this._loop().finally(() => { this._running = false; }));
  }

  /** Drop the current connection and reconnect at once with a fresh URL (also out of a failure). */
  restart() {
    if (this.closed) return;
    this._restart = true;
    if (this._controller) this._controller.abort();
    if (this._wake) this._wake();
    this.start();
  }

  /** Close for good: no more events. */
  close() {
    if (this.closed) return;
    this.closed = true;
    if (this._controller) this._controller.abort();
    if (this._wake) this._wake();
    this._setStatus('closed');
    this.emit('close', undefined);
  }

  /** Wait `ms` (forever when Infinity: no timer keeps a process alive), or until restart() or close(). */
  _sleep(ms) {
    return new Promise((resolve) => {
      const timer = Number.isFinite(ms) ? setTimeout(done, ms) : undefined;
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this._wake = () => { this._wake = null; done(); };
    });
  }

  async _loop() {
    let attempt = 0;
    let wasOpen = false;
    while (!this.closed) {
      this._restart = false;
      const url = this.url();
      if (url == null) {
        this._setStatus('idle');
        await this._sleep(Infinity);
        continue;
      }
      this._setStatus(wasOpen || attempt > 0 ? 'reconnecting' : 'connecting');
      let outcome;
      try {
        outcome = await this._once(url);
      } catch (e) {
        // A token function or a custom fetch that threw.
        outcome = { error: e instanceof ProjectorError ? e : networkError(this.what, e) };
      }
      if (this.closed) break;
      if (outcome.gotEvents) { attempt = 0; wasOpen = true; }
      if (this._restart || outcome.restart) continue;
      if (outcome.error) {
        this.lastError = outcome.error;
        this.emit('error', outcome.error);
        if (outcome.fatal) {
          this._setStatus('failed');
          await this._sleep(Infinity); // until restart() or close()
          continue;
        }
      }
      this._setStatus('reconnecting');
      const wait = Math.max(backoffDelay(attempt++, this.opts.backoff), outcome.retryAfterMs ?? 0);
      await this._sleep(wait);
    }
  }

  /** One connection: resolves when it ends, with what happened. */
  async _once(url) {
    const controller = new AbortController();
    this._controller = controller;
    let idleTimer = null;
    let idled = false;
    const touch = () => {
      if (!this.idleTimeoutMs) return;
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => { idled = true; controller.abort(); }, this.idleTimeoutMs);
    };
    let gotEvents = false;
    try {
      touch();
      const headers = await headersFor(this.opts, 'text/event-stream');
      let resp;
      try {
        resp = await this.fetch(url, { headers, signal: controller.signal });
      } catch (e) {
        if (controller.signal.aborted && !idled) return { gotEvents };
        return { gotEvents, error: networkError(this.what, e) };
      }
      if (!resp.ok) {
        const err = await errorFrom(resp, this.what);
        if (this.onHttpError(err) === 'retry') return { gotEvents, restart: true };
        const retryable = RETRYABLE.has(resp.status) ||
          (resp.status === 401 && typeof this.opts.token === 'function');
        const ra = Number(resp.headers.get('retry-after'));
        return { gotEvents, error: err, fatal: !retryable, retryAfterMs: ra > 0 ? ra * 1000 : 0 };
      }
      if (!resp.body) return { gotEvents, error: networkError(this.what, new Error('no response body')) };
      this._setStatus(this.openStatus());
      try {
        for await (const ev of readSSE(resp.body, { onActivity: touch })) {
          if (this.closed) break;
          gotEvents = true;
          // A resync the subclass asks for (lost frames): after a backoff, not at once.
          if (this.onEvent(ev) === 'restart') return { gotEvents };
        }
      } catch (e) {
        if (controller.signal.aborted && !idled) return { gotEvents };
        return { gotEvents, error: networkError(this.what, idled ? new Error('no data within idleTimeoutMs') : e) };
      }
      if (idled) return { gotEvents, error: networkError(this.what, new Error('no data within idleTimeoutMs')) };
      // The server ended the stream (a restart, a shutdown): reconnect.
      return { gotEvents };
    } finally {
      clearTimeout(idleTimer);
      controller.abort();
      if (this._controller === controller) this._controller = null;
    }
  }
}
