// agent-projector live viewer.
//
// Opens /v1/sessions/{id}/stream (SSE) and keeps one local copy of the
// session projection: a `snapshot` frame replaces it, a `delta` frame applies
// its UIMessageChunks exactly as the AI SDK does (and the server's reducer
// did), a `reset` frame clears it until the next snapshot. Frames whose
// cursor is not above the last applied one are ignored, which is what keeps
// text from being duplicated after EventSource reconnects with
// Last-Event-ID. Rendering is coalesced to one animation frame.
//
// Untrusted text is only ever written with textContent: no innerHTML.
'use strict';

(() => {
  // ---------------------------------------------------------------- state ---

  const params = new URLSearchParams(window.location.search);
  const sessionId = (params.get('session') || '').trim();
  // With auth on: a token from the page URL (`&access_token=`) goes on the
  // stream URL (EventSource cannot set headers) and as a bearer header on
  // requests; a `projector_token` cookie works without either.
  const token = (params.get('access_token') || '').trim();
  const authHeaders = token ? { authorization: 'Bearer ' + token } : {};
  const withToken = (url) =>
    token ? url + (url.includes('?') ? '&' : '?') + 'access_token=' + encodeURIComponent(token) : url;

  /** Everything the viewer knows; `state` mirrors the snapshot state. */
  const V = {
    state: null,
    lastCursor: 0,
    epoch: null,
    es: null,
    connection: 'idle',
    awaitingSnapshot: true,
    resetReason: null,
  };

  /** Per-action UI notices: actionId -> {kind, text}. Never action status. */
  const notices = new Map();
  /** Actions with a decision request in flight. */
  const inFlight = new Set();
  // Answers being filled in, by action id: kept across re-renders of the card.
  const drafts = new Map();
  /** Open <details> elements, kept across re-renders: "msgId:partIndex". */
  const openDetails = new Set();

  const SURFACE_MAPS = ['tools', 'actions', 'artifacts', 'evidence', 'tasks', 'agents', 'plans'];
  const MAX_TIMELINE = 500;
  const MAX_DIAGNOSTICS = 1000;

  function emptyState() {
    return {
      sessionId,
      runtime: { status: 'unknown', stale: false, pendingActions: 0 },
      messages: [],
      tools: {}, actions: {}, artifacts: {}, evidence: {}, tasks: {}, agents: {},
      team: { roster: [], handoffs: [], reviews: [], notifications: [], channels: [], edges: [], info: {} },
      queue: {},
      context: { refs: [], missing: [], compactions: [] },
      plans: {}, app: {}, topology: null,
      permissions: { blocks: [] },
      coding: { files: {}, patches: {}, commands: {}, tests: {}, blocks: [] },
      diagnostics: [],
      timeline: [],
    };
  }

  /** A snapshot state with every key present (older servers may omit some). */
  function normalizeState(s) {
    const base = emptyState();
    const out = Object.assign(base, s || {});
    for (const k of SURFACE_MAPS) if (!out[k] || typeof out[k] !== 'object') out[k] = {};
    out.team = Object.assign(emptyState().team, out.team || {});
    out.coding = Object.assign(emptyState().coding, out.coding || {});
    out.context = Object.assign(emptyState().context, out.context || {});
    if (!Array.isArray(out.diagnostics)) out.diagnostics = [];
    if (!Array.isArray(out.timeline)) out.timeline = [];
    if (!Array.isArray(out.messages)) out.messages = [];
    return out;
  }

  // Read-only debugging handle for people and tests.
  Object.defineProperty(window, '__viewer', {
    value: Object.freeze({
      get lastCursor() { return V.lastCursor; },
      get state() { return V.state; },
      get es() { return V.es; },
      get epoch() { return V.epoch; },
      get connection() { return V.connection; },
      get sessionId() { return sessionId; },
    }),
    writable: false,
    configurable: false,
  });

  // ------------------------------------------------------ chunk semantics ---

  function findMessage(id) {
    const ms = V.state.messages;
    for (let i = ms.length - 1; i >= 0; i--) if (ms[i].id === id) return ms[i];
    return null;
  }

  function openIndex(msg, id) {
    const open = msg.openParts || [];
    for (const [pid, idx] of open) if (pid === id) return idx;
    return -1;
  }

  function setOpen(msg, id, idx) {
    const open = (msg.openParts || []).filter(([pid]) => pid !== id);
    if (idx >= 0) open.push([id, idx]);
    if (open.length) msg.openParts = open; else delete msg.openParts;
  }

  function toolIndex(msg, toolCallId) {
    for (let i = msg.parts.length - 1; i >= 0; i--) {
      const p = msg.parts[i];
      if (p.toolCallId === toolCallId && typeof p.type === 'string' &&
          (p.type.startsWith('tool-') || p.type === 'dynamic-tool')) return i;
    }
    return -1;
  }

  /**
   * Apply one UIMessageChunk to message `messageId`, mirroring the `ai`
   * package's processUIMessageStream (and the server's Message::apply).
   * Returns true when the message set changed shape (a message was created).
   */
  function applyMessageChunk(messageId, c, frame) {
    let msg = findMessage(messageId);
    let created = false;
    if (!msg) {
      // The AI SDK creates the message on `start`; be lenient and create it
      // on any chunk. The projector sends user input as chunks too: a
      // `turn.submitted` frame is the user's message.
      msg = {
        id: messageId,
        role: frame.eventClass === 'turn.submitted' ? 'user' : 'assistant',
        status: 'streaming',
        createdCursor: frame.cursor,
        parts: [],
      };
      V.state.messages.push(msg);
      created = true;
    }
    const parts = msg.parts;
    switch (c.type) {
      case 'start':
      case 'error':
      case 'finish-step':
      case 'message-metadata':
        break;
      case 'abort':
        msg.status = 'aborted';
        break;
      case 'finish':
        if (msg.status === 'streaming') msg.status = c.finishReason === 'error' ? 'failed' : 'complete';
        break;
      case 'start-step':
        parts.push({ type: 'step-start' });
        break;
      case 'text-start':
      case 'reasoning-start':
        parts.push({ type: c.type === 'text-start' ? 'text' : 'reasoning', text: '', state: 'streaming' });
        setOpen(msg, c.id, parts.length - 1);
        break;
      case 'text-delta':
      case 'reasoning-delta': {
        const idx = openIndex(msg, c.id);
        const want = c.type === 'text-delta' ? 'text' : 'reasoning';
        if (idx < 0 || !parts[idx] || parts[idx].type !== want) {
          console.warn('viewer: no open part', c.id, 'in', messageId);
          break;
        }
        parts[idx].text += c.delta;
        break;
      }
      case 'text-end':
      case 'reasoning-end': {
        const idx = openIndex(msg, c.id);
        if (idx < 0) break;
        setOpen(msg, c.id, -1);
        if (parts[idx]) parts[idx].state = 'done';
        break;
      }
      case 'tool-input-start': {
        const p = { type: 'tool-' + c.toolName, toolCallId: c.toolCallId, state: 'input-streaming' };
        if (c.title != null) p.title = c.title;
        parts.push(p);
        break;
      }
      case 'tool-input-delta':
        break;
      case 'tool-input-available': {
        const i = toolIndex(msg, c.toolCallId);
        if (i >= 0) {
          const p = parts[i];
          p.state = 'input-available';
          p.input = c.input;
          delete p.output; delete p.errorText; delete p.preliminary;
          if (c.title != null) p.title = c.title;
        } else {
          const p = { type: 'tool-' + c.toolName, toolCallId: c.toolCallId, state: 'input-available', input: c.input };
          if (c.title != null) p.title = c.title;
          parts.push(p);
        }
        break;
      }
      case 'tool-output-available': {
        const i = toolIndex(msg, c.toolCallId);
        if (i < 0) break;
        const p = parts[i];
        p.state = 'output-available';
        p.output = c.output;
        delete p.errorText;
        if (c.preliminary) p.preliminary = true; else delete p.preliminary;
        break;
      }
      case 'tool-output-error': {
        const i = toolIndex(msg, c.toolCallId);
        if (i < 0) break;
        const p = parts[i];
        p.state = 'output-error';
        delete p.output; delete p.preliminary;
        p.errorText = c.errorText;
        break;
      }
      case 'tool-output-denied': {
        const i = toolIndex(msg, c.toolCallId);
        if (i >= 0) parts[i].state = 'output-denied';
        break;
      }
      case 'source-url': {
        const p = { type: 'source-url', sourceId: c.sourceId, url: c.url };
        if (c.title != null) p.title = c.title;
        parts.push(p);
        break;
      }
      case 'file':
        parts.push({ type: 'file', mediaType: c.mediaType, url: c.url });
        break;
      default:
        if (typeof c.type === 'string' && c.type.startsWith('data-')) {
          if (c.type === 'data-reconciliation') { applyReconciliation(c.data); break; }
          if (c.transient) break;
          const part = c.id != null ? { type: c.type, id: c.id, data: c.data } : { type: c.type, data: c.data };
          const i = c.id == null ? -1 : parts.findIndex((p) => p.type === c.type && p.id === c.id);
          if (i >= 0) parts[i] = part; else parts.push(part);
        }
    }
    dirty.messages.add(messageId);
    return created;
  }

  /**
   * A transient `data-reconciliation` chunk: a final text that differs from
   * the streamed one wins ({messageId, partIndex, text, streamedText}). The
   * AI SDK ignores transient chunks; the snapshot has the final text, so we
   * apply it.
   */
  function applyReconciliation(d) {
    if (!d) return;
    const msg = findMessage(d.messageId);
    const p = msg && msg.parts[d.partIndex];
    if (p && (p.type === 'text' || p.type === 'reasoning') && typeof d.text === 'string') {
      p.text = d.text;
      dirty.messages.add(msg.id);
    }
  }

  function upsertBy(list, key, value) {
    const id = value && value[key];
    const i = list.findIndex((x) => x && x[key] === id);
    if (i >= 0) list[i] = value; else list.push(value);
  }

  /** A session-level `data-<surface>` chunk (messageId null). */
  function applySurfaceChunk(c) {
    if (typeof c.type !== 'string' || !c.type.startsWith('data-')) return;
    const surface = c.type.slice(5);
    const st = V.state;
    if (surface === 'reconciliation') { applyReconciliation(c.data); return; }
    if (c.transient) return;
    const id = c.id;
    const data = c.data;
    if (surface === 'runtime') {
      st.runtime = data || st.runtime;
      dirty.header = true;
      dirty.panels = true;
      return;
    }
    if (SURFACE_MAPS.includes(surface)) {
      if (id == null) return;
      st[surface][id] = data;
      if (surface === 'actions' && data && data.status !== 'pending') notices.delete(id);
      if (surface === 'agents') {
        for (const m of st.messages) if (m.agentId === id) dirty.messages.add(m.id);
      }
      dirty.panels = true;
      return;
    }
    if (surface === 'diagnostics') {
      if (data && data.id == null && id != null) data.id = id;
      upsertBy(st.diagnostics, 'id', data);
      while (st.diagnostics.length > MAX_DIAGNOSTICS) st.diagnostics.shift();
      dirty.panels = true;
      return;
    }
    if (surface === 'session' || surface === 'toolCatalog') {
      st[surface] = data || {};
      dirty.header = true;
      return;
    }
    if (surface === 'uiLocal') {
      // UI-owned facts the server kept aside (never transcript truth).
      st.uiLocal = st.uiLocal || [];
      upsertBy(st.uiLocal, 'eventId', data);
      while (st.uiLocal.length > 100) st.uiLocal.shift();
      return;
    }
    if (surface === 'topology') {
      st.topology = data && data.topology;
      dirty.panels = true;
      return;
    }
    if (surface === 'queue' || surface === 'context' || surface === 'permissions' || surface === 'app') {
      st[surface] = data;
      dirty.panels = true;
      return;
    }
    if (surface === 'team') {
      const t = st.team;
      const [kind, rest] = splitOnce(String(id));
      if (kind === 'roster') t.roster = Array.isArray(data) ? data : [];
      else if (kind === 'edges') t.edges = Array.isArray(data) ? data : [];
      else if (kind === 'info') t.info = data || {};
      else if (kind === 'handoff') upsertBy(t.handoffs, 'handoffId', withKey(data, 'handoffId', rest));
      else if (kind === 'review') upsertBy(t.reviews, 'reviewId', withKey(data, 'reviewId', rest));
      else if (kind === 'notification') upsertBy(t.notifications, 'notificationId', withKey(data, 'notificationId', rest));
      else if (kind === 'channel') upsertBy(t.channels, 'channelId', withKey(data, 'channelId', rest));
      dirty.panels = true;
      return;
    }
    if (surface === 'coding') {
      const cd = st.coding;
      const [kind, rest] = splitOnce(String(id));
      const maps = { file: 'files', patch: 'patches', command: 'commands', test: 'tests' };
      if (maps[kind]) cd[maps[kind]][rest] = data;
      else if (kind === 'block') upsertBy(cd.blocks, 'blockId', withKey(data, 'blockId', String(id)));
      dirty.panels = true;
      return;
    }
    // An unknown surface: keep it, show nothing.
    st.extra = st.extra || {};
    st.extra[surface] = st.extra[surface] || {};
    st.extra[surface][id == null ? '' : id] = data;
  }

  function splitOnce(s) {
    const i = s.indexOf(':');
    return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
  }

  function withKey(data, key, id) {
    const v = data && typeof data === 'object' ? data : { value: data };
    if (v[key] == null) v[key] = id;
    return v;
  }

  // ------------------------------------------------------------- frames ---

  function onSnapshot(frame) {
    V.state = normalizeState(frame.state);
    V.lastCursor = Number(frame.cursor) || 0;
    V.epoch = frame.epoch || null;
    V.awaitingSnapshot = false;
    V.resetReason = null;
    for (const id of [...notices.keys()]) {
      const a = V.state.actions[id];
      if (!a || a.status !== 'pending') notices.delete(id);
    }
    markAllDirty();
  }

  function onDelta(frame) {
    const cursor = Number(frame.cursor);
    // The server sends a snapshot first (and after every reset); a delta
    // without one can only come from a resumed stream, so start empty.
    if (!V.state) V.state = emptyState();
    if (!(cursor > V.lastCursor)) return; // already applied: no duplicated text
    let created = false;
    for (const { messageId, chunk } of frame.chunks || []) {
      if (!chunk || typeof chunk !== 'object') continue;
      if (messageId == null) applySurfaceChunk(chunk);
      else created = applyMessageChunk(messageId, chunk, frame) || created;
    }
    V.state.timeline.push({ cursor, eventId: frame.eventId, class: frame.eventClass, sourceClass: frame.eventClass });
    while (V.state.timeline.length > MAX_TIMELINE) V.state.timeline.shift();
    V.lastCursor = cursor;
    dirty.header = true;
    dirty.timeline = true;
    if (created) scheduleMetadataFetch();
  }

  function onReset(frame) {
    V.state = emptyState();
    V.lastCursor = 0;
    V.awaitingSnapshot = true;
    V.resetReason = frame && frame.reason ? String(frame.reason) : 'reset';
    notices.clear();
    markAllDirty();
  }

  // Chunks do not say who wrote a message (agentId, turn); the snapshot does.
  // When a message appears live, read those fields from the snapshot once.
  let metaTimer = 0;
  function scheduleMetadataFetch() {
    if (metaTimer) return;
    metaTimer = window.setTimeout(async () => {
      metaTimer = 0;
      try {
        const r = await fetch(apiBase() + '/snapshot', {
          headers: { accept: 'application/json', ...authHeaders },
        });
        if (!r.ok) return;
        const snap = await r.json();
        if (!V.state || (V.epoch && snap.epoch && snap.epoch !== V.epoch)) return;
        for (const m of (snap.state && snap.state.messages) || []) {
          const local = findMessage(m.id);
          if (!local) continue;
          let changed = false;
          for (const k of ['role', 'agentId', 'turnId', 'runId', 'createdCursor']) {
            if (m[k] !== undefined && local[k] !== m[k]) { local[k] = m[k]; changed = true; }
          }
          if (changed) dirty.messages.add(m.id);
        }
        schedule();
      } catch (_) {
        // Offline: the names fill in with the next snapshot.
      }
    }, 250);
  }

  // ------------------------------------------------------------- stream ---

  function apiBase() {
    return '/v1/sessions/' + encodeURIComponent(sessionId);
  }

  let manualRetry = 0;
  function connect() {
    if (V.es && V.es.readyState !== EventSource.CLOSED) return; // one stream at a time
    let url = apiBase() + '/stream';
    if (V.state && V.lastCursor > 0 && !V.awaitingSnapshot) {
      // A new EventSource does not carry Last-Event-ID; resume explicitly.
      url += '?cursor=' + V.lastCursor + (V.epoch ? '&epoch=' + encodeURIComponent(V.epoch) : '');
    }
    const es = new EventSource(withToken(url));
    V.es = es;
    setConnection(V.state ? 'reconnecting' : 'connecting');
    const guard = (fn) => (ev) => {
      if (es !== V.es) return;
      let data;
      try { data = JSON.parse(ev.data); } catch (e) { console.warn('viewer: bad frame', e); return; }
      fn(data);
      schedule();
    };
    es.addEventListener('open', () => {
      if (es !== V.es) return;
      manualRetry = 0;
      setConnection('live');
    });
    es.addEventListener('snapshot', guard(onSnapshot));
    es.addEventListener('delta', guard(onDelta));
    es.addEventListener('reset', guard(onReset));
    es.addEventListener('error', () => {
      if (es !== V.es) return;
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (an HTTP error, not a network drop). Try again
        // ourselves, from our cursor, with a growing delay.
        setConnection('offline');
        const delay = Math.min(30000, 2000 * Math.pow(2, manualRetry++));
        window.setTimeout(connect, delay);
      } else {
        setConnection('reconnecting');
      }
    });
  }

  function setConnection(s) {
    if (V.connection === s) return;
    V.connection = s;
    dirty.header = true;
    schedule();
  }

  // ------------------------------------------------------------ actions ---

  async function decide(actionId, decision, answer) {
    if (inFlight.has(actionId)) return;
    inFlight.add(actionId);
    notices.set(actionId, { kind: 'info', text: 'Sending ' + decision + '…' });
    markActionDirty(actionId);
    let notice;
    try {
      const r = await fetch(apiBase() + '/actions/' + encodeURIComponent(actionId), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...authHeaders },
        body: JSON.stringify(decision === 'answer' ? { decision, answer } : { decision }),
      });
      if (r.status >= 200 && r.status < 300) {
        notice = { kind: 'info', text: 'Sent to the runtime — waiting for it to resolve' };
        if (decision === 'answer') drafts.delete(actionId);
      } else if (r.status === 422) {
        // The server checked the answer against the request's schema.
        let why = '';
        try {
          const body = await r.json();
          const errs = Array.isArray(body.errors) ? body.errors : [];
          why = errs.length
            ? errs.map((e) => (e.path || '').replace(/^\/answer\/?/, '') + (e.path && e.path !== '/answer' ? ': ' : '') + e.message).join('; ')
            : (body.detail || body.title || '');
        } catch (_) { /* not JSON */ }
        notice = { kind: 'warn', text: 'The answer was not accepted: ' + why };
      } else if (r.status === 404 || r.status === 405 || r.status === 501) {
        notice = { kind: 'warn', text: 'Controls are not available on this server (' + r.status + ')' };
      } else {
        let detail = '';
        try {
          const body = await r.json();
          detail = body && (body.detail || body.title) ? ': ' + (body.detail || body.title) : '';
        } catch (_) { /* not JSON */ }
        notice = { kind: 'warn', text: 'The decision was not accepted (' + r.status + detail + ')' };
      }
    } catch (_) {
      notice = { kind: 'warn', text: 'Could not reach the server; the decision was not sent' };
    } finally {
      inFlight.delete(actionId);
    }
    const a = V.state && V.state.actions[actionId];
    if (!a || a.status === 'pending') notices.set(actionId, notice);
    markActionDirty(actionId);
  }

  function markActionDirty(actionId) {
    const a = V.state && V.state.actions[actionId];
    if (a && a.messageId) dirty.messages.add(a.messageId);
    else if (V.state) for (const m of V.state.messages) dirty.messages.add(m.id);
    dirty.panels = true;
    schedule();
  }

  // ------------------------------------------------------------ rendering ---

  const dirty = { header: true, panels: true, timeline: true, all: true, messages: new Set() };
  function markAllDirty() {
    dirty.header = dirty.panels = dirty.timeline = dirty.all = true;
  }

  let rafPending = false;
  function schedule() {
    if (rafPending) return;
    rafPending = true;
    window.requestAnimationFrame(() => {
      rafPending = false;
      render();
    });
  }

  const $ = (id) => document.getElementById(id);

  /** Element helper: h('div', {class, testid, text, title, ...attrs}, ...children). */
  function h(tag, props, ...children) {
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

  function badge(text, cls, testid) {
    return h('span', { class: 'badge ' + (cls || ''), testid, text });
  }

  function muted(text) {
    return h('p', { class: 'muted none', text: text || 'none yet' });
  }

  function short(v, n) {
    let s;
    if (typeof v === 'string') s = v;
    else {
      try { s = JSON.stringify(v); } catch (_) { s = String(v); }
    }
    if (s === undefined) s = '';
    n = n || 120;
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  }

  function pretty(v) {
    if (typeof v === 'string') return v;
    try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
  }

  function statusClass(s) {
    return 'status-' + String(s || 'unknown').replace(/[^a-z-]/gi, '');
  }

  function render() {
    const st = V.state;
    if (dirty.header) renderHeader();
    if (!st) return;
    const sc = scroller();
    const nearBottom = sc.top + sc.height >= sc.scrollHeight - 120;
    let transcriptChanged = false;
    if (dirty.all || dirty.messages.size) {
      const focus = focusedField();
      renderTranscript(dirty.all ? null : dirty.messages);
      restoreField(focus);
      transcriptChanged = true;
    }
    if (dirty.all || dirty.panels) renderPanels();
    if (dirty.all || dirty.timeline) renderTimeline();
    dirty.all = dirty.panels = dirty.timeline = dirty.header = false;
    dirty.messages.clear();
    if (transcriptChanged && nearBottom) sc.toBottom();
  }

  /** The element that scrolls the transcript: its column, or the window on narrow screens. */
  function scroller() {
    const c = $('conversation');
    if (c && getComputedStyle(c).overflowY === 'auto') {
      return { top: c.scrollTop, height: c.clientHeight, scrollHeight: c.scrollHeight, toBottom: () => { c.scrollTop = c.scrollHeight; } };
    }
    const d = document.documentElement;
    return { top: window.scrollY, height: window.innerHeight, scrollHeight: d.scrollHeight, toBottom: () => window.scrollTo(0, d.scrollHeight) };
  }

  const CONNECTION_LABELS = {
    idle: 'not connected', connecting: 'connecting', live: 'live',
    reconnecting: 'reconnecting', offline: 'offline',
  };

  function renderHeader() {
    const st = V.state;
    const conn = $('connection');
    conn.dataset.state = V.connection;
    $('connection-label').textContent = CONNECTION_LABELS[V.connection] || V.connection;
    $('cursor').textContent = 'cursor ' + (st ? V.lastCursor : '–');
    const pill = $('runtime-status');
    if (!st || V.awaitingSnapshot) {
      pill.className = 'pill status-none';
      pill.textContent = V.resetReason ? 'resetting' : sessionId ? 'loading' : 'no session';
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
    if (V.resetReason) {
      banner.hidden = false;
      banner.textContent = 'The stream was reset (' + V.resetReason.replace(/_/g, ' ') + '); reloading the session…';
    } else {
      banner.hidden = true;
      banner.textContent = '';
    }
    if (st) {
      const r = st.runtime || {};
      const bits = [];
      if (r.runId) bits.push('run ' + r.runId);
      if (r.turnId) bits.push('turn ' + r.turnId);
      if (r.phase) bits.push(r.phase);
      if (r.failureCategory) bits.push('failure: ' + r.failureCategory);
      $('run-info').textContent = bits.join(' · ');
    }
  }

  // Transcript: one <li> per message, rebuilt only when that message changed.
  const messageEls = new Map();

  function renderTranscript(only) {
    const list = $('transcript');
    const st = V.state;
    const seen = new Set();
    let i = 0;
    for (const m of st.messages) {
      seen.add(m.id);
      let el = messageEls.get(m.id);
      if (!el || !only || only.has(m.id)) {
        const fresh = renderMessage(m);
        if (el && el.parentNode === list) list.replaceChild(fresh, el);
        el = fresh;
        messageEls.set(m.id, el);
      }
      const at = list.children[i];
      if (at !== el) list.insertBefore(el, at || null);
      i++;
    }
    for (const [id, el] of messageEls) {
      if (!seen.has(id)) { el.remove(); messageEls.delete(id); }
    }
    $('transcript-empty').hidden = st.messages.length > 0;
  }

  function agentLabel(agentId) {
    const a = V.state.agents[agentId];
    return (a && a.name) || agentId;
  }

  function renderMessage(m) {
    const role = m.role || 'assistant';
    const li = h('li', {
      class: 'message message-' + role + (m.agentId ? ' message-teammate' : '') + ' msg-status-' + m.status,
      testid: 'message',
      dataset: { messageId: m.id, role, status: m.status || '' },
    });
    const head = h('div', { class: 'message-head' });
    if (role === 'user') {
      head.append(h('span', { class: 'author', text: 'You' }));
    } else {
      const a = m.agentId ? V.state.agents[m.agentId] : null;
      head.append(h('span', { class: 'author', text: m.agentId ? agentLabel(m.agentId) : role === 'system' ? 'System' : 'Assistant' }));
      if (m.agentId) {
        head.append(badge(a && a.role ? a.role : 'teammate', 'badge-agent', 'agent-label'));
        li.dataset.agentId = m.agentId;
      }
    }
    if (m.status === 'streaming') head.append(h('span', { class: 'msg-state streaming-dot', text: 'streaming' }));
    else if (m.status === 'failed') head.append(badge('failed', 'badge-failed'));
    else if (m.status === 'aborted') head.append(badge('stopped', 'badge-muted'));
    li.append(head);

    const body = h('div', { class: 'message-body' });
    m.parts.forEach((p, idx) => {
      const el = renderPart(m, p, idx);
      if (el) body.append(el);
    });
    if (!m.parts.length) body.append(h('span', { class: 'muted', text: '…' }));
    li.append(body);
    return li;
  }

  function keepOpen(details, key) {
    details.open = openDetails.has(key);
    details.addEventListener('toggle', () => {
      if (details.open) openDetails.add(key); else openDetails.delete(key);
    });
    return details;
  }

  function renderPart(m, p, idx) {
    const t = p.type || '';
    const key = m.id + ':' + idx;
    if (t === 'text') {
      // Segments split around tools and cards often start or end with the
      // space that joined them; that space is not content.
      const text = p.state === 'streaming' ? p.text.replace(/^\s+/, '') : p.text.trim();
      return h('div', { class: 'text-part' + (p.state === 'streaming' ? ' is-streaming' : ''), testid: 'text-part', text });
    }
    if (t === 'reasoning') {
      const d = keepOpen(h('details', { class: 'reasoning', testid: 'reasoning' }), key);
      d.append(h('summary', null, h('span', { class: 'reasoning-label', text: 'Reasoning' }),
        p.state === 'streaming' ? h('span', { class: 'muted', text: ' · thinking…' }) : null));
      d.append(h('div', { class: 'reasoning-text', text: p.text }));
      return d;
    }
    if (t === 'step-start') return null;
    if (t.startsWith('tool-') || t === 'dynamic-tool') return renderToolPart(m, p, key);
    if (t === 'data-action-request') return renderActionCard(p.data || {}, p.id, 'action-card');
    if (t === 'data-artifact-card') return renderArtifactCard(p.data || {}, 'artifact-card', true);
    if (t === 'data-evidence-citation') return renderEvidenceCard(p.data || {}, 'evidence-card', true);
    if (t === 'data-diagnostic-ref') return renderDiagnosticRef(p.data || {}, p.id);
    if (t === 'source-url') {
      return h('div', { class: 'card source-card' }, h('span', { class: 'card-kind', text: 'source' }),
        h('span', { class: 'card-title', text: p.title || p.url }),
        h('span', { class: 'mono muted', text: p.url }));
    }
    if (t === 'file') {
      return h('div', { class: 'card', testid: 'file-part' }, h('span', { class: 'card-kind', text: 'file' }),
        h('span', { class: 'card-title', text: p.url }), h('span', { class: 'mono muted', text: p.mediaType }));
    }
    if (t === 'data-attachment') {
      const d = p.data || {};
      return h('div', { class: 'card', testid: 'attachment-part' }, h('span', { class: 'card-kind', text: d.kind || 'attachment' }),
        h('span', { class: 'card-title', text: d.name || d.ref || d.objectId || p.id || '' }),
        d.sensitive ? badge('capability ref', 'badge-neutral') : null);
    }
    if (t === 'data-plan') {
      const d = p.data || {};
      const det = keepOpen(h('details', { class: 'reasoning plan-part', testid: 'plan-part' }), key);
      det.append(h('summary', null, h('span', { class: 'reasoning-label', text: 'Plan' }),
        h('span', { class: 'muted', text: d.status === 'final' ? '' : ' · drafting…' })));
      det.append(h('div', { class: 'reasoning-text', text: d.text || '' }));
      return det;
    }
    if (t.startsWith('data-')) {
      return h('div', { class: 'data-part muted', text: t.slice(5) + (p.id ? ' · ' + p.id : '') });
    }
    return null;
  }

  const TOOL_STATES = {
    'input-streaming': ['running', 'state-running'],
    'input-available': ['running', 'state-running'],
    'output-available': ['done', 'state-done'],
    'output-error': ['failed', 'state-failed'],
    'output-denied': ['denied', 'state-denied'],
  };

  function renderToolPart(m, p, key) {
    const name = p.type === 'dynamic-tool' ? (p.toolName || 'tool') : p.type.slice(5);
    const [label, cls] = TOOL_STATES[p.state] || [p.state || 'unknown', 'state-unknown'];
    const d = keepOpen(h('details', { class: 'tool-row ' + cls, testid: 'tool-row', dataset: { toolCallId: p.toolCallId || '', state: p.state || '' } }), key);
    const inputSummary = p.input === undefined || p.input === null ? '' : short(p.input, 90);
    const outSummary = p.state === 'output-error' ? p.errorText
      : p.output && typeof p.output === 'object' && !Array.isArray(p.output) && typeof p.output.summary === 'string' ? p.output.summary
        : p.output !== undefined ? short(p.output, 90) : '';
    d.append(h('summary', { class: 'tool-summary' },
      h('span', { class: 'tool-icon', 'aria-hidden': 'true' }),
      h('span', { class: 'tool-name', text: p.title || name }),
      h('span', { class: 'tool-state ' + cls, testid: 'tool-state', text: label }),
      inputSummary ? h('span', { class: 'tool-input mono', text: inputSummary }) : null,
      outSummary ? h('span', { class: 'tool-out', text: '→ ' + short(outSummary, 80) }) : null));
    const body = h('div', { class: 'tool-detail' });
    body.append(h('div', { class: 'kv' }, h('span', { class: 'k', text: 'call' }), h('span', { class: 'mono', text: p.toolCallId || '' })));
    if (p.input !== undefined) {
      body.append(h('div', { class: 'kv-block' }, h('span', { class: 'k', text: 'input' }), h('pre', { class: 'mono', text: pretty(p.input) })));
    }
    if (p.state === 'output-error') {
      body.append(h('div', { class: 'kv-block' }, h('span', { class: 'k', text: 'error' }), h('pre', { class: 'mono error-text', text: p.errorText || '' })));
    } else if (p.output !== undefined) {
      const o = p.output;
      if (o && typeof o === 'object' && !Array.isArray(o) && ('summary' in o || 'refs' in o)) {
        if (o.summary != null) body.append(h('div', { class: 'kv-block' }, h('span', { class: 'k', text: 'output' }), h('div', { class: 'out-summary', text: String(o.summary) })));
        if (Array.isArray(o.refs) && o.refs.length) body.append(refList(o.refs));
        const rest = Object.assign({}, o); delete rest.summary; delete rest.refs;
        if (Object.keys(rest).length) body.append(h('pre', { class: 'mono', text: pretty(rest) }));
      } else {
        body.append(h('div', { class: 'kv-block' }, h('span', { class: 'k', text: 'output' }), h('pre', { class: 'mono', text: pretty(o) })));
      }
    }
    d.append(body);
    return d;
  }

  function refList(refs) {
    return h('div', { class: 'refs' }, h('span', { class: 'k', text: 'refs' }),
      refs.map((r) => h('span', { class: 'ref mono', text: String(r) })));
  }

  function decisionLabel(d) {
    const s = String(d || '').toLowerCase();
    if (s.startsWith('approv') || s === 'allow' || s === 'accept' || s === 'accepted') return ['approved', 'badge-done'];
    if (s.startsWith('reject') || s.startsWith('deny') || s === 'denied' || s === 'declined') return ['rejected', 'badge-failed'];
    return [d ? String(d) : 'resolved', 'badge-muted'];
  }

  function renderActionCard(data, partId, testid) {
    const id = data.actionId || partId;
    const surface = V.state.actions[id];
    // The surface entry and the part are replaced by the same frame; take
    // whichever says more. Status only ever comes from the stream.
    const a = Object.assign({}, data, surface || {});
    const pending = a.status === 'pending';
    const card = h('div', { class: 'card action-card ' + (pending ? 'is-pending' : 'is-resolved'), testid, dataset: { actionId: id, status: a.status || '' } });
    const head = h('div', { class: 'card-head' },
      h('span', { class: 'card-kind', text: a.actionType ? a.actionType.replace(/_/g, ' ') : 'action' }),
      pending ? badge('pending', 'badge-pending', 'action-status') : badge(...decisionLabel(a.decision), 'action-status'));
    card.append(head);
    card.append(h('div', { class: 'card-title', text: a.title || 'The runtime asks for a decision' }));
    const meta = [];
    if (a.requestedBy) meta.push('requested by ' + agentLabel(a.requestedBy));
    if (a.toolCallId) meta.push('tool call ' + a.toolCallId);
    meta.push(id);
    card.append(h('div', { class: 'card-meta mono', text: meta.join(' · ') }));
    card.append(...requestDetails(a));
    if (pending) {
      const busy = inFlight.has(id);
      const form = answerForm(id, a, busy);
      if (form) card.append(form);
      // A request answered by a form or an option is declined, not approved.
      card.append(h('div', { class: 'action-buttons' },
        form ? null : h('button', { type: 'button', class: 'btn btn-approve', testid: 'approve', disabled: busy, onclick: () => decide(id, 'approve'), text: 'Approve' }),
        h('button', { type: 'button', class: 'btn btn-reject', testid: 'reject', disabled: busy, onclick: () => decide(id, 'reject'), text: form ? 'Decline' : 'Reject' })));
      const n = notices.get(id);
      if (n) card.append(h('div', { class: 'action-notice notice-' + n.kind, testid: 'action-notice', role: 'status', text: n.text }));
    }
    return card;
  }

  /** What a request asks, as the runtime sent it (seed 004 HITL kinds). */
  function requestDetails(a) {
    const rows = [];
    const text = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
    const row = (label, value, testid) => rows.push(h('div', { class: 'req-row', testid },
      h('span', { class: 'req-label', text: label }), h('span', { class: 'req-value mono', text: text(value) })));
    if (a.question) rows.push(h('div', { class: 'req-question', testid: 'request-question', text: a.question }));
    if (a.detail) rows.push(h('div', { class: 'req-detail', text: a.detail }));
    if (a.toolName) row('tool', a.toolName, 'request-tool');
    if (a.risk) row('risk', a.risk, 'request-risk');
    if (a.scope != null) row('scope', a.scope, 'request-scope');
    if (a.input != null) row('input', a.input, 'request-input');
    if (a.grant != null) row('grants', a.grant, 'request-grant');
    if (a.credential) row('credential', [a.credential.name, a.credential.kind, a.credential.provider].filter(Boolean).join(' · '), 'request-credential');
    if (a.artifactId && a.actionType === 'artifact_review') row('artifact', a.artifactId + (a.versionId ? ' · v ' + a.versionId : ''), 'request-artifact');
    if (a.expiresAt) row('expires', a.expiresAt, 'request-expires');
    if (a.plan != null) rows.push(h('pre', { class: 'req-plan', testid: 'request-plan', text: typeof a.plan === 'string' ? a.plan : JSON.stringify(a.plan, null, 2) }));
    return rows;
  }

  /** The kind of input a property schema gets, or null when no simple input fits. */
  function fieldKind(p) {
    if (!p || typeof p !== 'object') return null;
    if (Array.isArray(p.enum) && p.enum.length) return 'enum';
    if (p.type === 'string') return 'string';
    if (p.type === 'number' || p.type === 'integer') return p.type;
    if (p.type === 'boolean') return 'boolean';
    return null;
  }

  /** The fields of a form for the common schema shapes: an object of scalar
   *  properties, or one scalar. Null for anything else (answered as JSON). */
  function formSpec(schema) {
    if (!schema || typeof schema !== 'object') return null;
    if (schema.type === 'object' || schema.properties) {
      const required = new Set(Array.isArray(schema.required) ? schema.required : []);
      const fields = [];
      for (const [name, p] of Object.entries(schema.properties || {})) {
        const kind = fieldKind(p);
        if (!kind) return null;
        fields.push({ name, kind, schema: p, required: required.has(name), label: p.title || name });
      }
      return { object: true, fields };
    }
    const kind = fieldKind(schema);
    return kind ? { object: false, fields: [{ name: 'answer', kind, schema, required: true, label: schema.title || 'answer' }] } : null;
  }

  /** The answer controls of a pending request: one button per option, a
   *  form drawn from its schema, or a JSON field for other schemas. */
  function answerForm(id, a, busy) {
    const options = Array.isArray(a.options) && a.options.length ? a.options : null;
    const spec = formSpec(a.schema);
    if (!a.schema && options) {
      return h('div', { class: 'answer-options', testid: 'answer-options' }, options.map((o) => {
        const obj = o && typeof o === 'object';
        const value = obj ? (o.value ?? o.id ?? o.label) : o;
        const label = obj ? (o.label ?? o.title ?? String(value)) : String(o);
        return h('button', { type: 'button', class: 'btn btn-option', testid: 'answer-option', disabled: busy, onclick: () => decide(id, 'answer', value), text: label });
      }));
    }
    if (!a.schema) return null;
    const draft = drafts.get(id) || {};
    const set = (key, v) => {
      const d = drafts.get(id) || {};
      if (v === undefined) delete d[key]; else d[key] = v;
      drafts.set(id, d);
    };
    const form = h('form', { class: 'answer-form', testid: 'answer-form', dataset: { actionId: id } });
    const fields = spec ? spec.fields : [{ name: 'json', kind: 'json', schema: a.schema, required: true, label: 'answer (JSON)' }];
    for (const f of fields) {
      const cur = draft[f.name];
      const testid = 'field-' + f.name;
      const common = { name: f.name, testid, dataset: { field: f.name } };
      let input;
      if (f.kind === 'enum') {
        input = h('select', { ...common, onchange: (ev) => set(f.name, ev.target.selectedIndex > 0 ? f.schema.enum[ev.target.selectedIndex - 1] : undefined) },
          h('option', { value: '', text: '—' }),
          f.schema.enum.map((v, i) => h('option', { value: String(i), text: String(v), selected: cur !== undefined && JSON.stringify(cur) === JSON.stringify(v) })));
      } else if (f.kind === 'boolean') {
        input = h('input', { ...common, type: 'checkbox', checked: cur === true, onchange: (ev) => set(f.name, ev.target.checked) });
      } else if (f.kind === 'number' || f.kind === 'integer') {
        input = h('input', { ...common, type: 'number', step: f.kind === 'integer' ? '1' : 'any', value: cur ?? '',
          oninput: (ev) => set(f.name, ev.target.value === '' ? undefined : Number(ev.target.value)) });
      } else if (f.kind === 'json') {
        input = h('textarea', { ...common, rows: '3', class: 'mono', oninput: (ev) => set(f.name, ev.target.value) }, cur ?? '');
      } else {
        input = h('input', { ...common, type: 'text', value: cur ?? '', oninput: (ev) => set(f.name, ev.target.value === '' ? undefined : ev.target.value) });
      }
      form.append(h('label', { class: 'field' },
        h('span', { class: 'field-label', text: f.label + (f.required ? ' *' : '') }), input,
        f.schema && f.schema.description ? h('span', { class: 'field-help', text: f.schema.description }) : null));
    }
    form.append(h('button', { type: 'submit', class: 'btn btn-answer', testid: 'answer-submit', disabled: busy, text: 'Send answer' }));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const d = { ...(drafts.get(id) || {}) };
      let answer;
      if (!spec) {
        try { answer = JSON.parse(d.json ?? 'null'); } catch (_) {
          notices.set(id, { kind: 'warn', text: 'The answer is not valid JSON' });
          markActionDirty(id);
          return;
        }
      } else {
        for (const f of spec.fields) if (f.kind === 'boolean' && d[f.name] === undefined) d[f.name] = false;
        answer = spec.object ? d : d.answer;
      }
      decide(id, 'answer', answer);
    });
    return form;
  }

  /** The answer field that has the focus (with its caret), to give it back after a re-render. */
  function focusedField() {
    const el = document.activeElement;
    const form = el && el.closest && el.closest('[data-testid=answer-form]');
    if (!form || !el.dataset.field) return null;
    let caret = null;
    try { caret = [el.selectionStart, el.selectionEnd]; } catch (_) { /* not a text input */ }
    // The same request may show twice (in its message and in the pending panel).
    const twins = [...document.querySelectorAll('[data-testid=answer-form]')].filter((x) => x.dataset.actionId === form.dataset.actionId);
    return { action: form.dataset.actionId, nth: twins.indexOf(form), field: el.dataset.field, caret };
  }

  function restoreField(f) {
    if (!f) return;
    const form = [...document.querySelectorAll('[data-testid=answer-form]')].filter((x) => x.dataset.actionId === f.action)[f.nth];
    const el = form && [...form.querySelectorAll('[data-field]')].find((x) => x.dataset.field === f.field);
    if (!el) return;
    el.focus();
    if (f.caret && f.caret[0] != null) { try { el.setSelectionRange(f.caret[0], f.caret[1]); } catch (_) { /* no caret */ } }
  }

  function renderArtifactCard(a, testid, inline) {
    const card = h('div', { class: 'card artifact-card' + (inline ? ' inline-card' : ''), testid, dataset: { artifactId: a.artifactId || '' } });
    card.append(h('div', { class: 'card-head' },
      h('span', { class: 'card-icon icon-artifact', 'aria-hidden': 'true' }),
      h('span', { class: 'card-kind', text: a.kind || 'artifact' }),
      a.status ? badge(a.status, a.status === 'failed' ? 'badge-failed' : a.status === 'deleted' ? 'badge-muted' : 'badge-neutral') : null,
      a.versionId ? h('span', { class: 'muted mono small', text: 'v ' + a.versionId }) : null));
    card.append(h('div', { class: 'card-title', text: a.title || a.artifactId || 'artifact' }));
    if (a.path) card.append(h('div', { class: 'card-meta mono', text: a.path }));
    if (Array.isArray(a.refs) && a.refs.length) card.append(refList(a.refs));
    return card;
  }

  function verdictClass(v) {
    const s = String(v || '').toLowerCase();
    if (/^(pass|passed|supports?|confirmed|approved|ok|true)$/.test(s)) return 'badge-done';
    if (/^(fail|failed|refutes?|rejected|contradicts?|false)$/.test(s)) return 'badge-failed';
    return 'badge-neutral';
  }

  function renderEvidenceCard(e, testid, inline) {
    const card = h('div', { class: 'card evidence-card' + (inline ? ' inline-card' : ''), testid, dataset: { evidenceId: e.evidenceId || '' } });
    card.append(h('div', { class: 'card-head' },
      h('span', { class: 'card-icon icon-evidence', 'aria-hidden': 'true' }),
      h('span', { class: 'card-kind', text: 'evidence' }),
      e.verdict ? badge(e.verdict, verdictClass(e.verdict), 'verdict') : null));
    card.append(h('div', { class: 'card-title', text: e.title || e.evidenceId || 'evidence' }));
    if (Array.isArray(e.refs) && e.refs.length) card.append(refList(e.refs));
    return card;
  }

  function renderDiagnosticRef(d, partId) {
    const id = d.diagnosticId || partId;
    const sev = d.severity || 'warning';
    return h('a', {
      class: 'diag-ref sev-' + sev, testid: 'diagnostic-ref', href: '#diag-' + id,
      title: 'See the diagnostics panel',
      onclick: (ev) => { ev.preventDefault(); focusDiagnostic(id); },
    }, h('span', { class: 'diag-ref-dot', 'aria-hidden': 'true' }), 'diagnostic · ' + (d.code || id));
  }

  function focusDiagnostic(id) {
    const el = document.getElementById('diag-' + id);
    if (!el) return;
    el.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
    el.classList.remove('flash');
    void el.offsetWidth;
    el.classList.add('flash');
  }

  function fill(listId, countId, items, empty) {
    const el = $(listId);
    el.replaceChildren(...(items.length ? items : [muted(empty)]));
    $(countId).textContent = items.length ? String(items.length) : '';
  }

  function renderPanels() {
    const st = V.state;
    // Pending actions.
    const pending = Object.values(st.actions).filter((a) => a && a.status === 'pending');
    fill('actions-list', 'count-actions', pending.map((a) => renderActionCard(a, a.actionId, 'pending-action')));
    $('panel-actions').classList.toggle('has-items', pending.length > 0);

    fill('artifacts-list', 'count-artifacts', Object.values(st.artifacts).filter(Boolean).reverse().map((a) => renderArtifactCard(a, 'artifact-item')));
    fill('evidence-list', 'count-evidence', Object.values(st.evidence).filter(Boolean).reverse().map((e) => renderEvidenceCard(e, 'evidence-item')));

    renderTeam(st);
    renderQueue(st);
    renderCoding(st);
    renderContext(st);

    // Tools.
    const tools = Object.values(st.tools).filter(Boolean).reverse();
    fill('tools-list', 'count-tools', tools.map((tl) => h('div', { class: 'row tool-item', testid: 'tool-item', dataset: { status: tl.status } },
      h('span', { class: 'row-title mono', text: tl.toolName || tl.toolCallId }),
      tl.kind && tl.kind !== 'tool' ? h('span', { class: 'muted small', text: tl.kind }) : null,
      badge(tl.status, 'badge-' + lifeClass(tl.status)))));

    // Diagnostics, newest first.
    const diags = st.diagnostics.filter(Boolean).slice().reverse();
    fill('diagnostics-list', 'count-diagnostics', diags.map(renderDiagnostic));
  }

  /** A sub-list: a heading and rows, or nothing when empty. */
  function section(listId, title, rows) {
    const el = $(listId);
    el.replaceChildren(...(rows.length ? [h('div', { class: 'subhead', text: title + ' · ' + rows.length }), ...rows] : []));
    el.hidden = rows.length === 0;
  }

  function row(testid, title, status, meta, extra) {
    return h('div', { class: 'row-block', testid, dataset: { status: status || '' } },
      h('div', { class: 'row' },
        h('span', { class: 'row-title', text: title }),
        status ? badge(status, 'badge-' + lifeClass(status)) : null),
      meta ? h('div', { class: 'muted small row-meta', text: meta }) : null,
      extra || null);
  }

  const join = (...xs) => xs.filter((x) => x != null && x !== '').join(' · ');

  function renderTeam(st) {
    const t = st.team;
    // The roster: the agents surface plus roster ids without an entry.
    const ids = [...Object.keys(st.agents)];
    for (const r of t.roster || []) if (!ids.includes(r)) ids.push(r);
    fill('team-list', 'count-team', ids.map((id) => renderAgent(id, st.agents[id])), 'No teammates.');
    const info = t.info || {};
    $('team-topology').textContent = join(st.topology, info.teamName, info.teamPhase);
    section('work-list', 'Work items', Object.values(st.tasks).filter(Boolean).map((tk) =>
      row('work-item', tk.title || tk.taskId, tk.status,
        join(tk.assignee ? 'assignee ' + tk.assignee : (tk.agentId ? 'agent ' + tk.agentId : null),
          tk.parentTaskId ? 'parent ' + tk.parentTaskId : null, tk.blocker ? 'blocked: ' + tk.blocker : null,
          (tk.dependencies || []).length ? 'after ' + tk.dependencies.join(', ') : null))));
    section('handoff-list', 'Handoffs', (t.handoffs || []).filter(Boolean).map((x) =>
      row('handoff', join(x.from || '?', x.to || '?').replace(' · ', ' → '), x.status, join(x.reason, x.resumeTarget ? 'resume ' + x.resumeTarget : null))));
    section('review-list', 'Reviews', (t.reviews || []).filter(Boolean).map((x) =>
      row('review', x.title || x.reviewId, x.verdict || x.status, join(x.reviewer ? 'by ' + x.reviewer : null, x.target),
        Array.isArray(x.evidenceRefs) && x.evidenceRefs.length ? refList(x.evidenceRefs) : null)));
    section('notification-list', 'Worker notifications', (t.notifications || []).filter(Boolean).slice().reverse().map((x) =>
      row('worker-notification', x.summary || x.title || 'notification', x.status,
        join(x.agentId, x.taskId ? 'task ' + x.taskId : null, x.resultRef))));
  }

  function renderQueue(st) {
    const q = st.queue || {};
    const items = Array.isArray(q.items) ? q.items : [];
    fill('queue-list', 'count-queue', items.map((it) =>
      h('div', { class: 'row queue-item kind-' + (it.kind || 'unknown'), testid: 'queue-item', dataset: { kind: it.kind || 'unknown' } },
        badge(it.kind === 'steer' ? 'steer' : it.kind === 'queue' ? 'queued' : 'unknown', it.kind === 'steer' ? 'badge-agent' : 'badge-neutral'),
        h('span', { class: 'row-title', text: it.text || it.turnId || it.id }),
        it.status ? h('span', { class: 'muted small', text: it.status }) : null)), 'Nothing queued.');
  }

  function renderCoding(st) {
    const c = st.coding;
    const rows = [];
    for (const f of Object.values(c.files || {})) {
      if (!f) continue;
      rows.push(row('coding-file', f.path, f.changes ? (f.changeKind || 'changed') : 'read',
        join(f.reads ? f.reads + ' read' : null, f.changes ? f.changes + ' change' : null, f.diffRef)));
    }
    for (const [id, p] of Object.entries(c.patches || {})) {
      if (p) rows.push(row('coding-patch', 'patch ' + (p.path || id), p.status, join(p.failureCategory, p.diffRef)));
    }
    for (const [id, x] of Object.entries(c.commands || {})) {
      if (!x) continue;
      rows.push(row('coding-command', x.command || id, x.status,
        join(x.exitCode != null ? 'exit ' + x.exitCode : null, x.cwd),
        Array.isArray(x.outputRefs) && x.outputRefs.length ? refList(x.outputRefs) : null));
    }
    for (const [id, x] of Object.entries(c.tests || {})) {
      if (!x) continue;
      rows.push(row('coding-test', 'tests ' + (x.suite || id), x.status,
        join(x.passed != null ? x.passed + ' passed' : null, x.failed != null ? x.failed + ' failed' : null, x.runs ? x.runs + ' runs' : null)));
    }
    for (const b of c.blocks || []) {
      if (b) rows.push(row('coding-block', 'blocked: ' + (b.reasonCode || 'sandbox'), 'blocked', join(b.commandId, b.toolCallId)));
    }
    fill('coding-list', 'count-coding', rows, 'No coding activity.');
  }

  function renderContext(st) {
    const c = st.context || {};
    const rows = [];
    if (c.status) rows.push(h('div', { class: 'row' }, h('span', { class: 'row-title', text: 'status' }), badge(c.status, 'badge-' + (c.status === 'missing' ? 'failed' : lifeClass(c.status)))));
    const b = c.budget;
    if (b != null) {
      const used = b && typeof b === 'object' ? b.usedTokens : null;
      const max = b && typeof b === 'object' ? b.maxTokens : null;
      const meter = h('div', { class: 'budget', testid: 'context-budget' },
        h('span', { class: 'k', text: 'budget' }),
        h('span', { class: 'mono', text: used != null && max != null ? used + ' / ' + max + ' tokens' : short(b, 60) }));
      if (typeof used === 'number' && typeof max === 'number' && max > 0) {
        const m = document.createElement('meter');
        m.className = 'budget-meter';
        m.min = 0; m.max = max; m.value = Math.min(used, max); m.high = max * 0.9;
        meter.append(m);
      }
      rows.push(meter);
    }
    for (const r of c.refs || []) rows.push(h('div', { class: 'ref-row', testid: 'context-ref' }, h('span', { class: 'ref mono', text: String(r) })));
    for (const m of c.missing || []) rows.push(h('div', { class: 'row', testid: 'context-missing' }, badge('missing', 'badge-failed'), h('span', { class: 'row-title mono', text: String(m) })));
    for (const k of c.compactions || []) {
      if (k) rows.push(row('context-compaction', 'compaction ' + (k.compactionId || ''), k.status, join(k.summary, k.resumeRef)));
    }
    fill('context-list', 'count-context', rows, 'No context facts.');
    $('count-context').textContent = (c.refs || []).length ? String(c.refs.length) : '';
  }

  function lifeClass(s) {
    switch (s) {
      case 'completed': case 'done': case 'succeeded': case 'passed': case 'applied': case 'resolved': case 'accepted': return 'done';
      case 'failed': case 'error': case 'blocked': case 'changes_requested': return 'failed';
      case 'running': case 'started': case 'active': case 'in_progress': case 'compacting': return 'running';
      case 'cancelled': case 'canceled': case 'interrupted': return 'muted';
      default: return 'neutral';
    }
  }

  function renderAgent(id, a) {
    const card = h('div', { class: 'agent', testid: 'teammate', dataset: { agentId: id } });
    const words = String((a && a.name) || id).split(/[^A-Za-z0-9]+/).filter(Boolean);
    const initials = (words.length > 1 ? words[0][0] + words[1][0] : (words[0] || '?').slice(0, 1)).toUpperCase();
    card.append(h('span', { class: 'avatar', 'aria-hidden': 'true', text: initials }));
    const main = h('div', { class: 'agent-main' });
    main.append(h('div', { class: 'agent-line' },
      h('span', { class: 'agent-name', text: (a && a.name) || id }),
      a && a.role ? h('span', { class: 'muted small', text: a.role }) : null));
    const meta = [];
    if (a && a.name && a.name !== id) meta.push(id);
    if (a && a.model) meta.push(a.model);
    if (a && a.taskId) meta.push('task ' + a.taskId);
    if (a && a.lineage === 'unavailable') meta.push('lineage unavailable');
    const edge = (V.state.team.edges || []).find((e) => e && e.to === id);
    if (edge) meta.push('from ' + edge.from);
    if (meta.length) main.append(h('div', { class: 'agent-meta muted small', text: meta.join(' · ') }));
    card.append(main);
    const status = a ? a.status : 'unknown';
    card.append(badge(status, 'badge-' + lifeClass(status)));
    return card;
  }

  function renderDiagnostic(d) {
    const sev = d.severity || 'warning';
    return h('div', { class: 'diag sev-' + sev, id: 'diag-' + d.id, testid: 'diagnostic', dataset: { severity: sev, code: d.code || '' } },
      h('div', { class: 'diag-head' },
        h('span', { class: 'sev sev-' + sev, text: sev }),
        h('span', { class: 'diag-code mono', text: d.code || 'diagnostic' })),
      h('div', { class: 'diag-message', text: d.message || '' }),
      h('div', { class: 'diag-meta muted small mono', text: [d.class, d.cursor != null ? '#' + d.cursor : null, d.toolCallId ? 'tool ' + d.toolCallId : null].filter(Boolean).join(' · ') }));
  }

  function renderTimeline() {
    const tl = V.state.timeline || [];
    const items = tl.slice(-80).reverse().map((e) => h('div', { class: 'tl-row' },
      h('span', { class: 'tl-cursor mono', text: '#' + e.cursor }),
      h('span', { class: 'tl-class mono', text: e.class }),
      e.status ? h('span', { class: 'muted small', text: e.status }) : null));
    fill('timeline-list', 'count-timeline', items);
    $('count-timeline').textContent = tl.length ? String(tl.length) : '';
  }

  // ----------------------------------------------------------------- boot ---

  function openSession(ev) {
    ev.preventDefault();
    const input = ev.currentTarget.querySelector('input');
    const id = input.value.trim();
    if (!id) { input.focus(); return; }
    window.location.search = withToken('?session=' + encodeURIComponent(id));
  }

  function boot() {
    $('open-form').addEventListener('submit', openSession);
    $('empty-form').addEventListener('submit', openSession);
    $('session-input').value = sessionId;
    if (!sessionId) {
      $('empty').hidden = false;
      $('session-view').hidden = true;
      document.body.classList.add('no-session');
      renderHeader();
      $('empty-input').focus();
      return;
    }
    document.title = sessionId + ' · agent-projector';
    $('session-title').textContent = sessionId;
    $('session-view').hidden = false;
    $('empty').hidden = true;
    connect();
    schedule();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
  else boot();
})();
