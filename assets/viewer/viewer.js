// agent-projector live viewer: the page.
//
// Owns the page's life on top of the client library (served at /client/):
// ONE multiplexed connection (`connect`, `GET /v1/streams`) that holds the
// viewed session and the child sessions its teammates run in, the live
// session index (`watchIndex`) for the sidebar, switching the viewed
// session without a reload (`?session=` with history.pushState), the header
// (runtime status, connection, cursor, banner), `window.__viewer`, and one
// render per animation frame. Every frame is applied by the library (its
// SessionProjection); the page only draws the immutable states it holds.
// Untrusted text is only ever written with textContent: no innerHTML.

import { connect, emptyState, watchIndex } from '/client/index.js';
import { bindControls, focusedField, renderControls, restoreField } from './viewer/actions.js';
import { renderPanels, renderTeam, renderTimeline } from './viewer/panels.js';
import { markSeen, renderSidebar } from './viewer/sidebar.js';
import { clearTranscript, renderTranscript } from './viewer/transcript.js';
import { $, statusClass, ui } from './viewer/ui.js';

// With auth on, a token in the page URL (`?access_token=`) goes to the
// library, which sends it as a bearer header on the streams and controls; a
// `projector_token` cookie works without it.
const token = (new URLSearchParams(location.search).get('access_token') || '').trim() || undefined;
const backoff = { initialMs: 250, maxMs: 8000, factor: 2, jitter: 0.5 };
const initial = sessionFromUrl();

const conn = connect({ sessions: initial ? [initial] : [], token, backoff });
const index = watchIndex({ token, backoff });
ui.conn = conn;

const view = ui.view;
view.id = initial;
/** agentId -> {sessionId, followed}: the teammates' child sessions, from the index. */
const children = new Map();

const dirty = { header: true, sidebar: true, view: true, panels: true, team: true, switched: true };
/** The state surfaces the panels were last drawn from. */
let drawn = {};
const PANEL_KEYS = ['actions', 'artifacts', 'evidence', 'agents', 'tasks', 'team', 'queue', 'coding', 'context', 'tools', 'diagnostics', 'topology'];
/** What the page shows while the viewed session has no state (before its snapshot, after a reset). */
const EMPTY = emptyState();

function sessionFromUrl() {
  return (new URLSearchParams(location.search).get('session') || '').trim();
}

// ---------------------------------------------------- teammates' sessions ---

/**
 * Make the connection hold the viewed session and its teammates' child
 * sessions: the sessions the index lists with `parentSessionId` equal to the
 * viewed one (a teammate's own session names the session that spawned it,
 * and its `agentId` there), each shown on the card of its agent. The index
 * holds exactly the sessions the token may read, so following them never
 * makes the server refuse the connection.
 */
function reconcile() {
  const before = JSON.stringify([...children]);
  children.clear();
  if (view.id) {
    for (const e of index.sessions.values()) {
      if (e.parentSessionId === view.id && e.sessionId !== view.id) {
        children.set(e.agentId || e.sessionId, { sessionId: e.sessionId, followed: true });
      }
    }
  }
  const want = view.id ? [view.id] : [];
  for (const c of children.values()) if (!want.includes(c.sessionId)) want.push(c.sessionId);
  for (const id of conn.sessions) if (!want.includes(id)) conn.remove(id);
  for (const id of want) conn.add(id);
  if (JSON.stringify([...children]) !== before) {
    dirty.team = true;
    schedule();
  }
}

let reconcileQueued = false;
function queueReconcile() {
  if (reconcileQueued) return;
  reconcileQueued = true;
  Promise.resolve().then(() => { reconcileQueued = false; reconcile(); });
}

// --------------------------------------------------------------- events ---

conn.on('change', ({ sessionId }) => {
  if (sessionId === view.id) {
    dirty.view = true;
  } else {
    dirty.team = true; // a teammate's session
  }
  schedule();
});
conn.on('status', () => { dirty.header = true; schedule(); });
conn.on('error', (e) => { console.warn('viewer: stream:', e.message); dirty.header = true; schedule(); });
index.on('change', () => { dirty.sidebar = true; queueReconcile(); schedule(); });
index.on('status', () => { dirty.sidebar = true; schedule(); });
ui.requestRender = () => { dirty.view = dirty.panels = true; schedule(); };

window.addEventListener('online', () => {
  for (const s of [conn, index]) if (!READING.has(s.status)) s.restart();
});
window.addEventListener('popstate', () => show(sessionFromUrl()));

// ------------------------------------------------------------ switching ---

/** Show session `id` (pushing `?session=id` onto the history, keeping the token). */
function open(id) {
  id = String(id || '').trim();
  if (!id || id === view.id) return;
  const u = new URL(location.href);
  u.searchParams.set('session', id);
  history.pushState(null, '', u.pathname + u.search + u.hash);
  show(id);
}

function show(id) {
  if (id === view.id) return;
  view.id = id;
  children.clear();
  clearTranscript();
  drawn = {};
  Object.assign(dirty, { header: true, sidebar: true, view: true, panels: true, team: true, switched: true });
  reconcile();
  layout();
}

function layout() {
  const id = view.id;
  document.title = id ? id + ' · agent-projector' : 'agent-projector viewer';
  $('session-input').value = id;
  $('session-title').textContent = id;
  $('empty').hidden = !!id;
  $('session-view').hidden = !id;
  document.body.classList.toggle('no-session', !id);
}

function onOpenForm(ev) {
  ev.preventDefault();
  const input = ev.currentTarget.querySelector('input');
  if (!input.value.trim()) { input.focus(); return; }
  open(input.value);
}

// ------------------------------------------------------------ rendering ---

let rafPending = false;
function schedule() {
  if (rafPending) return;
  rafPending = true;
  requestAnimationFrame(render);
}

// The connection reads its sessions' history ('catching-up') until each has
// said it is live (the server's `live` frame).
const READING = new Set(['open', 'catching-up', 'live']);
const CONNECTION = { idle: 'idle', connecting: 'connecting', 'catching-up': 'loading', open: 'live', live: 'live', reconnecting: 'reconnecting', failed: 'offline', closed: 'offline' };
const LABELS = { idle: 'not connected', connecting: 'connecting', loading: 'loading history', live: 'live', reconnecting: 'reconnecting', offline: 'offline' };
const connectionState = () => CONNECTION[conn.status] || conn.status;

function render() {
  rafPending = false;
  const st = view.id ? conn.state(view.id) : null;
  view.state = st;
  if (dirty.header || dirty.view) renderHeader(st);
  if (dirty.sidebar) renderSidebar(index.list(), view.id, indexLine(), open);
  if (view.id && (dirty.view || dirty.panels || dirty.team)) renderSession(st);
  Object.assign(dirty, { header: false, sidebar: false, view: false, panels: false, team: false, switched: false });
}

function renderSession(st) {
  const sc = scroller();
  const nearBottom = sc.top + sc.height >= sc.scrollHeight - 120;
  const focus = focusedField();
  const changed = renderTranscript(st);
  const shown = st || EMPTY;
  const info = () => new Map([...children].map(([agentId, c]) => [agentId, { ...c, state: conn.state(c.sessionId) }]));
  if (dirty.panels || PANEL_KEYS.some((k) => drawn[k] !== shown[k])) {
    renderPanels(shown, info(), open);
    drawn = Object.fromEntries(PANEL_KEYS.map((k) => [k, shown[k]]));
  } else if (dirty.team) {
    renderTeam(shown, info(), open);
  }
  if (drawn.timeline !== shown.timeline) { renderTimeline(shown); drawn.timeline = shown.timeline; }
  restoreField(focus);
  renderControls(st, dirty.switched);
  if (changed && nearBottom) sc.toBottom();
  const p = conn.projection(view.id);
  if (st) markSeen(view.id, p.epoch, p.cursor);
}

/** The element that scrolls the transcript: its column, or the window on narrow screens. */
function scroller() {
  const c = $('conversation');
  if (c && getComputedStyle(c).overflowY === 'auto') {
    return { top: c.scrollTop, height: c.clientHeight, scrollHeight: c.scrollHeight, toBottom: () => { c.scrollTop = c.scrollHeight; } };
  }
  const d = document.documentElement;
  return { top: scrollY, height: innerHeight, scrollHeight: d.scrollHeight, toBottom: () => scrollTo(0, d.scrollHeight) };
}

function renderHeader(st) {
  const p = view.id ? conn.projection(view.id) : null;
  const cs = connectionState();
  $('connection').dataset.state = cs;
  $('connection-label').textContent = LABELS[cs] || cs;
  $('cursor').textContent = 'cursor ' + (st ? p.cursor : '–');
  const pill = $('runtime-status');
  if (!st) {
    pill.className = 'pill status-none';
    pill.textContent = p && p.resetReason ? 'resetting' : view.id ? 'loading' : 'no session';
    pill.dataset.status = '';
    $('stale').hidden = true;
  } else {
    const s = (st.runtime && st.runtime.status) || 'unknown';
    pill.className = 'pill ' + statusClass(s);
    pill.textContent = s;
    pill.dataset.status = s;
    $('stale').hidden = !(st.runtime && st.runtime.stale);
  }
  const banner = $('banner');
  const err = conn.lastError;
  let text = '';
  if (view.id && conn.status === 'failed' && err) {
    text = `The stream was refused (${err.status ? err.status + ' ' : ''}${err.code.replace(/_/g, ' ')}${err.detail ? ': ' + err.detail : ''}).`;
  } else if (!st && p && p.resetReason) {
    text = 'The stream was reset (' + p.resetReason.replace(/_/g, ' ') + '); reloading the session…';
  }
  banner.hidden = !text;
  banner.textContent = text;
  const r = (st && st.runtime) || {};
  $('run-info').textContent = [r.runId && 'run ' + r.runId, r.turnId && 'turn ' + r.turnId, r.phase,
    r.failureCategory && 'failure: ' + r.failureCategory].filter(Boolean).join(' · ');
}

/** A line about the index for the sidebar: '' while it is fine. */
function indexLine() {
  if (index.ready) return '';
  if (index.status === 'failed' && index.lastError) {
    const e = index.lastError;
    return `Sessions unavailable (${e.status || ''} ${e.code.replace(/_/g, ' ')})`.replace('( ', '(');
  }
  return index.status === 'reconnecting' ? 'Reconnecting…' : 'Loading sessions…';
}

// ----------------------------------------------------------------- boot ---

// Read-only handle for people and tests: the library's connection and
// index, and the viewed session's state, cursor and epoch.
Object.defineProperty(window, '__viewer', {
  value: Object.freeze({
    get sessionId() { return view.id; },
    get state() { return view.id ? conn.state(view.id) : null; },
    get lastCursor() { return view.id ? conn.cursor(view.id) : 0; },
    get epoch() { return (view.id && conn.projection(view.id)?.epoch) || null; },
    get connection() { return connectionState(); },
    /** The client library's Connection (one multiplexed stream for every session shown). */
    get conn() { return conn; },
    get es() { return conn; },
    /** The client library's SessionIndex (the sidebar). */
    get index() { return index; },
    /** agentId -> child session id, for the teammates that run in their own session. */
    get children() { return Object.fromEntries([...children].map(([a, c]) => [a, c.sessionId])); },
  }),
});

$('open-form').addEventListener('submit', onOpenForm);
$('empty-form').addEventListener('submit', onOpenForm);
bindControls();
layout();
if (!view.id) $('empty-input').focus();
schedule();
