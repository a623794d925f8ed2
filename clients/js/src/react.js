// @agent-projector/client/react: React hooks over the client.
//
// Owns `useSession(id, opts)` (one session's live state, the connection's
// status and cursor, and its controls bound to the session) and
// `useSessionIndex(opts)` (the live session list). Each hook opens its own
// connection unless it is handed one (`connection` / `index`); a shared
// connection gets the session added while a hook needs it (reference
// counted) and removed after the last one lets go. State comes through
// useSyncExternalStore, so renders see a consistent, immutable state.

import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import { connect } from './connection.js';
import { createControls } from './controls.js';
import { watchIndex } from './session-index.js';

/** Sessions hooks added to shared connections: connection -> id -> {count, added}. */
const holds = new WeakMap();

function retain(conn, id) {
  let m = holds.get(conn);
  if (!m) holds.set(conn, (m = new Map()));
  const h = m.get(id) ?? { count: 0, added: false };
  if (h.count === 0 && !conn.sessions.includes(id)) {
    conn.add(id);
    h.added = true;
  }
  h.count++;
  m.set(id, h);
}

function release(conn, id) {
  const m = holds.get(conn);
  const h = m && m.get(id);
  if (!h) return;
  if (--h.count > 0) return;
  m.delete(id);
  if (h.added) conn.remove(id);
}

/** The latest value of `v`, readable from callbacks made earlier. */
function useLatest(v) {
  const ref = useRef(v);
  ref.current = v;
  return ref;
}

/**
 * Client options for a connection the hook opens: the latest `token` and
 * `fetch` are used at each request; the others as they were when it opened.
 */
function useLiveOptions(opts) {
  const latest = useLatest(opts);
  return useMemo(() => ({
    baseUrl: opts.baseUrl,
    token: () => {
      const t = latest.current.token;
      return typeof t === 'function' ? t() : t;
    },
    fetch: (...args) => (latest.current.fetch ?? globalThis.fetch)(...args),
    headers: opts.headers,
    backoff: opts.backoff,
    idleTimeoutMs: opts.idleTimeoutMs,
    limits: opts.limits,
  }), [opts.baseUrl]); // eslint-disable-line react-hooks/exhaustive-deps
}

/**
 * One session, live.
 * @param {string | null | undefined} sessionId nothing is opened without one
 * @param {object} [opts] `baseUrl`, `token`, `fetch`, `headers`, `backoff`, or `connection` (a shared Connection)
 */
export function useSession(sessionId, opts = {}) {
  const shared = opts.connection ?? null;
  const live = useLiveOptions(opts);
  const [own, setOwn] = useState(null);

  useEffect(() => {
    if (shared || !sessionId) return undefined;
    const c = connect({ ...live, sessions: [sessionId] });
    setOwn(c);
    return () => {
      c.close();
      setOwn(null);
    };
  }, [shared, sessionId, live]);

  useEffect(() => {
    if (!shared || !sessionId) return undefined;
    retain(shared, sessionId);
    return () => release(shared, sessionId);
  }, [shared, sessionId]);

  const conn = shared ?? own;
  const cache = useRef(null);
  const subscribe = useMemo(() => (notify) => {
    if (!conn) return () => {};
    const offChange = conn.on('change', (c) => { if (c.sessionId === sessionId) notify(); });
    const offStatus = conn.on('status', notify);
    const offSessions = conn.on('sessions', notify);
    return () => { offChange(); offStatus(); offSessions(); };
  }, [conn, sessionId]);
  const read = () => {
    const p = conn && sessionId ? conn.projection(sessionId) : undefined;
    const next = {
      state: p ? p.state : null,
      status: conn ? conn.status : 'idle',
      cursor: p ? p.cursor : 0,
      epoch: p ? p.epoch : null,
      resetReason: p ? p.resetReason : null,
    };
    const c = cache.current;
    if (c && Object.keys(next).every((k) => c[k] === next[k])) return c;
    return (cache.current = next);
  };
  const snap = useSyncExternalStore(subscribe, read, read);

  const controls = useMemo(() => (shared ? shared.controls : createControls(live)), [shared, live]);
  const bound = useMemo(() => ({
    approve: (actionId, fields) => controls.approve(sessionId, actionId, fields),
    reject: (actionId, fields) => controls.reject(sessionId, actionId, fields),
    answer: (actionId, value, fields) => controls.answer(sessionId, actionId, value, fields),
    cancel: (fields) => controls.cancel(sessionId, fields),
    send: (text, fields) => controls.send(sessionId, text, fields),
  }), [controls, sessionId]);

  return { ...snap, ...bound, connection: conn };
}

/**
 * The live session index: `{sessions, status, ready}`, `sessions` most
 * recently updated first.
 * @param {object} [opts] `baseUrl`, `token`, `fetch`, `headers`, `backoff`, or `index` (a shared SessionIndex)
 */
export function useSessionIndex(opts = {}) {
  const shared = opts.index ?? null;
  const live = useLiveOptions(opts);
  const [own, setOwn] = useState(null);

  useEffect(() => {
    if (shared) return undefined;
    const w = watchIndex(live);
    setOwn(w);
    return () => {
      w.close();
      setOwn(null);
    };
  }, [shared, live]);

  const idx = shared ?? own;
  const cache = useRef(null);
  const subscribe = useMemo(() => (notify) => {
    if (!idx) return () => {};
    const a = idx.on('change', notify);
    const b = idx.on('status', notify);
    return () => { a(); b(); };
  }, [idx]);
  const read = () => {
    const map = idx ? idx.sessions : null;
    const status = idx ? idx.status : 'idle';
    const ready = idx ? idx.ready : false;
    const c = cache.current;
    if (c && c.map === map && c.status === status && c.ready === ready) return c.value;
    const value = { sessions: idx ? idx.list() : [], status, ready };
    cache.current = { map, status, ready, value };
    return value;
  };
  return { ...useSyncExternalStore(subscribe, read, read), index: idx };
}
