// agent-projector viewer: DOM helpers and the page-local UI state.
//
// Owns what the renderers share that is not session state: the element
// helper `h` (untrusted text only ever goes in through textContent, never
// innerHTML), small formatting helpers, and the UI-only facts about a session
// kept across re-renders: decision notices, requests in flight, answer
// drafts, open <details>. Those are keyed by session and action, so that a
// switch between sessions never shows one session's notice on another. The
// session states themselves belong to the client library's connection.

/** The UI-only state. `touch(key)` marks what changed and asks for a render. */
export const ui = {
  /** The viewed session: its id and its state (the library's, never mutated here). */
  view: { id: '', state: null },
  /** The client library's connection: controls go through it. */
  conn: null,
  /** `${sessionId}\0${actionId}` -> {kind: 'info'|'warn', text}. Never an action's status. */
  notices: new Map(),
  /** Decisions being sent, same keys. */
  inFlight: new Set(),
  /** Answers being filled in, same keys: kept across re-renders of the card. */
  drafts: new Map(),
  /** Open <details> elements: "messageId:partIndex". */
  openDetails: new Set(),
  /** Revision of each key's notice, so a card re-renders when it changes. */
  revs: new Map(),
  /** Set by the page: schedule a render. */
  requestRender: () => {},
  touch(key) {
    this.revs.set(key, (this.revs.get(key) || 0) + 1);
    this.requestRender();
  },
};

/** The key of one action of one session in the maps above. */
export const actionKey = (sessionId, actionId) => `${sessionId}\u0000${actionId}`;

export const $ = (id) => document.getElementById(id);

/** Element helper: h('div', {class, testid, text, title, dataset, onclick, ...attrs}, ...children). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'testid') el.setAttribute('data-testid', v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function badge(text, cls, testid) {
  return h('span', { class: 'badge ' + (cls || ''), testid, text });
}

export function muted(text) {
  return h('p', { class: 'muted none', text: text || 'none yet' });
}

/** A value as one line of at most `n` characters. */
export function short(v, n = 120) {
  let s;
  if (typeof v === 'string') s = v;
  else {
    try { s = JSON.stringify(v); } catch (_) { s = String(v); }
  }
  if (s === undefined) s = '';
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

export function pretty(v) {
  if (typeof v === 'string') return v;
  try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
}

export function statusClass(s) {
  return 'status-' + String(s || 'unknown').replace(/[^a-z-]/gi, '');
}

/** The colour family of a lifecycle status. */
export function lifeClass(s) {
  switch (s) {
    case 'completed': case 'done': case 'succeeded': case 'passed': case 'applied': case 'resolved': case 'accepted': return 'done';
    case 'failed': case 'error': case 'blocked': case 'changes_requested': return 'failed';
    case 'running': case 'started': case 'active': case 'in_progress': case 'compacting': return 'running';
    case 'cancelled': case 'canceled': case 'interrupted': return 'muted';
    default: return 'neutral';
  }
}

export const join = (...xs) => xs.filter((x) => x != null && x !== '').join(' · ');

/** Fill a panel list and its count (the empty text when there is nothing). */
export function fill(listId, countId, items, empty) {
  $(listId).replaceChildren(...(items.length ? items : [muted(empty)]));
  $(countId).textContent = items.length ? String(items.length) : '';
}

export function refList(refs) {
  return h('div', { class: 'refs' }, h('span', { class: 'k', text: 'refs' }),
    refs.map((r) => h('span', { class: 'ref mono', text: String(r) })));
}

/** A <details> whose open state survives re-renders under `key`. */
export function keepOpen(details, key) {
  details.open = ui.openDetails.has(key);
  details.addEventListener('toggle', () => {
    if (details.open) ui.openDetails.add(key); else ui.openDetails.delete(key);
  });
  return details;
}

/** The text a person reads for a refused request (a ProjectorError of the client library). */
export function refusal(e, what) {
  if (!e || !e.status) return `Could not reach the server; the ${what} was not sent`;
  if (e.status === 422 && e.errors.length) {
    return `The ${what} was not accepted: ` + e.errors.map((x) => {
      const p = String(x.path || '').replace(/^\/answer\/?/, '');
      return (p ? p + ': ' : '') + x.message;
    }).join('; ');
  }
  if (e.status === 404 || e.status === 405 || e.status === 501) {
    return `Controls are not available on this server (${e.status})`;
  }
  return `The ${what} was not accepted (${e.status}${e.detail ? ': ' + e.detail : ''})`;
}

/** The newest assistant text of a state, or ''. */
export function lastText(st) {
  for (let i = (st?.messages?.length ?? 0) - 1; i >= 0; i--) {
    const m = st.messages[i];
    if (m.role === 'user') continue;
    for (let j = m.parts.length - 1; j >= 0; j--) {
      const p = m.parts[j];
      if (p.type === 'text' && p.text.trim()) return p.text.trim();
    }
  }
  return '';
}
