// agent-projector viewer: the live sidebar of sessions.
//
// Owns the session list drawn from the client library's session index
// (`watchIndex`, `GET /v1/sessions/stream`): one row per session, most
// recently updated first, with its title (or id), runtime status, pending
// actions and unread count, and the cursors the viewer has seen per session
// (kept in localStorage) that the unread count is measured from: `head` minus
// the cursor seen in the same epoch, or `head` for a session never opened
// (or since deleted and recreated). Rows are rebuilt only when they changed.

import { badge, h, statusClass, $ } from './ui.js';

const STORE = 'agent-projector.viewer.seen';
const KEEP = 500;

/** sessionId -> {epoch, cursor}: how far the viewer has shown each session. */
const seen = new Map();
try {
  for (const [id, s] of JSON.parse(localStorage.getItem(STORE) || '[]')) {
    if (s && typeof s.epoch === 'string' && Number.isFinite(s.cursor)) seen.set(id, s);
  }
} catch (_) { /* no storage, or not ours */ }

let saveTimer = 0;
function save() {
  if (saveTimer) return;
  saveTimer = setTimeout(() => {
    saveTimer = 0;
    try { localStorage.setItem(STORE, JSON.stringify([...seen].slice(-KEEP))); } catch (_) { /* full or off */ }
  }, 500);
}

/** The viewer has shown `sessionId` up to `cursor` of `epoch`; returns whether that is new. */
export function markSeen(sessionId, epoch, cursor) {
  if (!sessionId || !epoch) return false;
  const s = seen.get(sessionId);
  if (s && s.epoch === epoch && s.cursor >= cursor) return false;
  seen.delete(sessionId); // re-insert: the newest stay when the list is cut
  seen.set(sessionId, { epoch, cursor });
  save();
  return true;
}

/** Events of an index entry not yet shown by the viewer. */
export function unread(entry) {
  const s = seen.get(entry.sessionId);
  const head = Number(entry.head) || 0;
  return s && s.epoch === entry.epoch ? Math.max(0, head - s.cursor) : head;
}

/** sessionId -> {sig, el} of the rows on the page. */
const rows = new Map();

function renderRow(e, n, active, open) {
  const status = e.status || 'idle';
  const pending = Number(e.pendingActions) || 0;
  const btn = h('button', {
    type: 'button', class: 'session-item' + (active ? ' is-active' : ''), testid: 'session-item',
    'aria-current': active ? 'page' : null, title: e.sessionId,
    dataset: { sessionId: e.sessionId, status, unread: String(n), pending: String(pending) },
    onclick: () => open(e.sessionId),
  },
  h('span', { class: 'session-line' },
    h('span', { class: 'session-name', testid: 'session-item-title', text: e.title || e.sessionId }),
    n > 0 ? h('span', { class: 'unread', testid: 'session-item-unread', title: n + ' unread events', text: n > 999 ? '999+' : String(n) }) : null),
  h('span', { class: 'session-line' },
    h('span', { class: 'pill pill-small ' + statusClass(status), testid: 'session-item-status', text: status }),
    pending > 0 ? badge(pending + ' pending', 'badge-pending', 'session-item-pending') : null,
    e.title ? h('span', { class: 'session-id mono', text: e.sessionId }) : null,
    e.pinned ? badge('pinned', 'badge-neutral') : null,
    e.archived ? badge('archived', 'badge-muted') : null));
  return h('li', null, btn);
}

/**
 * Draw the list: `entries` as `index.list()` gives them, `viewed` the open
 * session, `status` a line about the index ('' when it is fine).
 */
export function renderSidebar(entries, viewed, status, open) {
  const list = $('sessions-list');
  const keep = new Set();
  let i = 0;
  for (const e of entries) {
    keep.add(e.sessionId);
    const n = e.sessionId === viewed ? 0 : unread(e);
    const sig = [e, n, e.sessionId === viewed];
    let r = rows.get(e.sessionId);
    if (!r || r.sig.some((x, k) => x !== sig[k])) {
      const el = renderRow(e, n, e.sessionId === viewed, open);
      if (r) r.el.replaceWith(el);
      r = { sig, el };
      rows.set(e.sessionId, r);
    }
    const at = list.children[i];
    if (at !== r.el) list.insertBefore(r.el, at || null);
    i++;
  }
  for (const [id, r] of rows) {
    if (!keep.has(id)) { r.el.remove(); rows.delete(id); }
  }
  $('count-sessions').textContent = keep.size ? String(keep.size) : '';
  const line = $('sessions-status');
  line.textContent = status || (keep.size ? '' : 'No sessions yet.');
  line.hidden = !line.textContent;
}
