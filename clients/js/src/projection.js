// @agent-projector/client: the projection core.
//
// Owns the pure fold of one session's frames into its state: a `snapshot`
// replaces the state, a `delta` applies its chunks (message chunks with the
// `ai` package's processUIMessageStream semantics, as the server's reducer
// applies them; session surfaces as `data-<surface>` chunks with a null
// messageId), a `reset` clears the state until the next snapshot. A delta
// whose cursor is not above the last applied one is ignored, so a replay
// never duplicates text. No DOM, no I/O, no clock.
//
// States are immutable values: applying a delta returns a new state object
// and copies only what changed (the messages array, the changed message, its
// parts array and the changed part; the changed surface), so a UI can compare
// by reference. Never mutate a state you received.

/** The keyed surfaces of the state that `data-<surface>` chunks set by id. */
export const SURFACE_MAPS = ['tools', 'actions', 'artifacts', 'evidence', 'tasks', 'agents', 'plans'];

/** The server's default bounds (config/default.toml `[projection]`). */
export const DEFAULT_LIMITS = Object.freeze({
  maxMessages: 500,
  maxTimeline: 500,
  maxDiagnostics: 200,
  maxUiLocal: 100,
});

const TEAM_LISTS = { handoff: ['handoffs', 'handoffId'], review: ['reviews', 'reviewId'],
  notification: ['notifications', 'notificationId'], channel: ['channels', 'channelId'] };
const CODING_MAPS = { file: 'files', patch: 'patches', command: 'commands', test: 'tests' };

/** The state of a session with no events, as the server's empty projection shows it. */
export function emptyState() {
  return {
    runtime: { status: 'idle', stale: false, pendingActions: 0 },
    messages: [],
    tools: {}, actions: {}, artifacts: {}, evidence: {}, tasks: {}, agents: {},
    team: { roster: [], handoffs: [], reviews: [], notifications: [], channels: [], edges: [], info: {} },
    queue: {},
    context: { refs: [], missing: [], compactions: [] },
    permissions: { blocks: [], agents: {} },
    coding: { files: {}, patches: {}, commands: {}, tests: {}, blocks: [] },
    plans: {}, app: {}, session: {},
    diagnostics: [],
    timeline: [],
  };
}

/**
 * A snapshot state with every key the server always sends present (an older
 * server may omit some). Keys the server leaves out while empty (`topology`,
 * `toolCatalog`, `uiLocal`) are not added. Returns a new object.
 */
export function normalizeState(s) {
  const base = emptyState();
  const out = Object.assign(base, s && typeof s === 'object' ? s : {});
  for (const k of SURFACE_MAPS) if (!isObject(out[k])) out[k] = {};
  out.team = Object.assign(emptyState().team, out.team);
  out.coding = Object.assign(emptyState().coding, out.coding);
  out.context = Object.assign(emptyState().context, out.context);
  for (const k of ['messages', 'diagnostics', 'timeline']) if (!Array.isArray(out[k])) out[k] = [];
  return out;
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * One session's projection as a client holds it: `state` (null until the
 * first snapshot and from a reset until the next one), the `cursor` of the
 * last applied frame and the `epoch` of the log it belongs to.
 */
export class SessionProjection {
  /**
   * @param {string} sessionId
   * @param {Partial<typeof DEFAULT_LIMITS>} [limits]
   */
  constructor(sessionId, limits = {}) {
    this.sessionId = sessionId;
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.state = null;
    this.cursor = 0;
    this.epoch = null;
    this.resetReason = null;
    /** Surfaces this client does not know (a newer server): surface -> id -> data. */
    this.extra = {};
  }

  /** `<epoch>:<cursor>` of the last applied frame, or '' while there is no state. */
  get position() {
    return this.state && this.epoch ? `${this.epoch}:${this.cursor}` : '';
  }

  /**
   * Apply one frame. Returns 'applied', 'ignored' (a delta at or below the
   * cursor, or one while no snapshot is held) or 'gap' (a delta past
   * cursor + 1: frames were lost, the caller should resume from `position`).
   */
  apply(frame) {
    if (!frame || typeof frame !== 'object') return 'ignored';
    switch (frame.type) {
      case 'snapshot':
        this.state = normalizeState(frame.state);
        this.cursor = Number(frame.cursor) || 0;
        this.epoch = frame.epoch ?? null;
        this.resetReason = null;
        this.extra = {};
        return 'applied';
      case 'reset':
        this.state = null;
        this.cursor = 0;
        this.resetReason = frame.reason ? String(frame.reason) : 'reset';
        this.extra = {};
        return 'applied';
      case 'delta': {
        const cursor = Number(frame.cursor);
        if (!this.state || !(cursor > this.cursor)) return 'ignored';
        if (cursor !== this.cursor + 1) return 'gap';
        this.state = applyDelta(this.state, frame, this.limits, this.extra);
        this.cursor = cursor;
        return 'applied';
      }
      default:
        return 'ignored';
    }
  }
}

/**
 * Apply a delta frame's chunks to `state` and return the new state (the old
 * one is left as it was). `extra` collects surfaces this client does not know.
 */
export function applyDelta(state, frame, limits = DEFAULT_LIMITS, extra = {}) {
  const lim = { ...DEFAULT_LIMITS, ...limits };
  const cx = new Draft(state);
  for (const entry of frame.chunks || []) {
    const chunk = entry && entry.chunk;
    if (!chunk || typeof chunk !== 'object') continue;
    if (entry.messageId == null) applySurfaceChunk(cx, chunk, lim, extra);
    else applyMessageChunk(cx, entry.messageId, chunk, entry, frame, lim);
  }
  const st = cx.state;
  // The event's timeline entry: the frame's own fields, and what its
  // `timeline` adds (`sourceClass` only when it differs from the class).
  const more = isObject(frame.timeline) ? frame.timeline : {};
  const entry = { cursor: Number(frame.cursor), eventId: frame.eventId, class: frame.eventClass, sourceClass: frame.eventClass, ...more };
  st.timeline = [...st.timeline, entry];
  if (st.timeline.length > lim.maxTimeline) st.timeline = st.timeline.slice(-lim.maxTimeline);
  return st;
}

/** Copy-on-write over one frame: `own(x)` copies x once per frame. */
class Draft {
  constructor(base) {
    this.fresh = new WeakSet();
    this.state = this.own(base);
  }

  own(x) {
    if (x === null || typeof x !== 'object' || this.fresh.has(x)) return x;
    const copy = Array.isArray(x) ? x.slice() : { ...x };
    this.fresh.add(copy);
    return copy;
  }

  /** `state[key]`, copied for writing. */
  top(key) {
    const v = this.own(this.state[key]);
    this.state[key] = v;
    return v;
  }

  /** Message `i` and its parts, copied for writing. */
  message(i) {
    const ms = this.top('messages');
    const m = (ms[i] = this.own(ms[i]));
    m.parts = this.own(m.parts);
    return m;
  }

  /** Part `j` of a message returned by `message()`, copied for writing. */
  part(m, j) {
    return (m.parts[j] = this.own(m.parts[j]));
  }
}

// ------------------------------------------------------ message chunks ---

function findMessage(st, id) {
  const ms = st.messages;
  for (let i = ms.length - 1; i >= 0; i--) if (ms[i].id === id) return i;
  return -1;
}

function openIndex(msg, id) {
  for (const [pid, idx] of msg.openParts || []) if (pid === id) return idx;
  return -1;
}

function setOpen(msg, id, idx) {
  const open = (msg.openParts || []).filter(([pid]) => pid !== id);
  if (idx >= 0) open.push([id, idx]);
  if (open.length) msg.openParts = open;
  else delete msg.openParts;
}

function toolIndex(msg, toolCallId) {
  for (let i = msg.parts.length - 1; i >= 0; i--) {
    const p = msg.parts[i];
    if (p.toolCallId === toolCallId && typeof p.type === 'string' &&
        (p.type.startsWith('tool-') || p.type === 'dynamic-tool')) return i;
  }
  return -1;
}

/** The `ai` package's mergeObjects: objects merge key by key, anything else replaces. */
function mergeMetadata(into, update) {
  if (!isObject(into) || !isObject(update)) return update;
  const out = { ...into };
  for (const [k, v] of Object.entries(update)) out[k] = k in out ? mergeMetadata(out[k], v) : v;
  return out;
}

/**
 * A message the server opened with this chunk (it always sends `start`
 * first): its role, agent, turn and run are on the chunk's entry.
 */
function createMessage(cx, id, chunk, entry, frame, lim) {
  const r = entry.role || (frame.eventClass === 'turn.submitted' ? 'user' : 'assistant');
  const msg = { id, role: r, status: 'streaming' };
  for (const k of ['agentId', 'turnId', 'runId']) if (typeof entry[k] === 'string') msg[k] = entry[k];
  // A server that does not name the agent on the entry has it in the `start` metadata.
  const md = chunk.type === 'start' ? chunk.messageMetadata : undefined;
  if (msg.agentId === undefined && r === 'assistant' && isObject(md) && typeof md.agentId === 'string') msg.agentId = md.agentId;
  msg.createdCursor = Number(frame.cursor);
  msg.parts = [];
  const ms = cx.top('messages');
  ms.push(msg);
  const st = cx.state;
  if (st.history) {
    const h = (st.history = cx.own(st.history));
    h.messages = Math.min((Number(h.messages) || 0) + 1, lim.maxMessages);
  }
  if (ms.length > lim.maxMessages) ms.splice(0, ms.length - lim.maxMessages);
  if (st.history) st.history.inSnapshot = ms.length;
  return ms.length - 1;
}

function applyMessageChunk(cx, messageId, c, entry, frame, lim) {
  let i = findMessage(cx.state, messageId);
  if (i < 0) i = createMessage(cx, messageId, c, entry, frame, lim);
  const msg = cx.message(i);
  const parts = msg.parts;
  // A `start` for a message that completed continues it: it streams again.
  if (c.type === 'start' && msg.status === 'complete') msg.status = 'streaming';
  switch (c.type) {
    case 'start':
    case 'message-metadata':
      if (c.messageMetadata != null) msg.metadata = mergeMetadata(msg.metadata, c.messageMetadata);
      break;
    case 'finish-step':
      break;
    case 'error':
      msg.errorText = c.errorText;
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
      setOpen(msg, c.id, -1);
      parts.push({ type: 'text', text: '', state: 'streaming' });
      setOpen(msg, c.id, parts.length - 1);
      break;
    case 'reasoning-start':
      setOpen(msg, c.id, -1);
      parts.push({ type: 'reasoning', id: c.id, text: '', state: 'streaming' });
      setOpen(msg, c.id, parts.length - 1);
      break;
    case 'text-delta':
    case 'reasoning-delta': {
      const idx = openIndex(msg, c.id);
      const want = c.type === 'text-delta' ? 'text' : 'reasoning';
      if (idx < 0 || !parts[idx] || parts[idx].type !== want) break;
      cx.part(msg, idx).text += c.delta;
      break;
    }
    case 'text-end':
    case 'reasoning-end': {
      const idx = openIndex(msg, c.id);
      if (idx < 0) break;
      setOpen(msg, c.id, -1);
      if (parts[idx] && (parts[idx].type === 'text' || parts[idx].type === 'reasoning')) {
        cx.part(msg, idx).state = 'done';
      }
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
      const j = toolIndex(msg, c.toolCallId);
      if (j >= 0) {
        const p = cx.part(msg, j);
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
      const j = toolIndex(msg, c.toolCallId);
      if (j < 0) break;
      const p = cx.part(msg, j);
      p.state = 'output-available';
      p.output = c.output;
      delete p.errorText;
      if (c.preliminary) p.preliminary = true; else delete p.preliminary;
      break;
    }
    case 'tool-output-error': {
      const j = toolIndex(msg, c.toolCallId);
      if (j < 0) break;
      const p = cx.part(msg, j);
      p.state = 'output-error';
      delete p.output; delete p.preliminary;
      p.errorText = c.errorText;
      break;
    }
    case 'tool-approval-request': {
      const j = toolIndex(msg, c.toolCallId);
      if (j < 0) break;
      const p = cx.part(msg, j);
      p.state = 'approval-requested';
      p.approval = c.reason != null ? { id: c.approvalId, requestReason: c.reason } : { id: c.approvalId };
      break;
    }
    case 'tool-output-denied': {
      const j = toolIndex(msg, c.toolCallId);
      if (j >= 0) cx.part(msg, j).state = 'output-denied';
      break;
    }
    case 'source-url': {
      const p = { type: 'source-url', sourceId: c.sourceId, url: c.url };
      if (c.title != null) p.title = c.title;
      parts.push(p);
      break;
    }
    case 'source-document': {
      const p = { type: 'source-document', sourceId: c.sourceId, mediaType: c.mediaType, title: c.title };
      if (c.filename != null) p.filename = c.filename;
      parts.push(p);
      break;
    }
    case 'file':
      parts.push({ type: 'file', mediaType: c.mediaType, url: c.url });
      break;
    default:
      if (typeof c.type !== 'string' || !c.type.startsWith('data-')) break;
      if (c.type === 'data-reconciliation') { applyReconciliation(cx, c.data); break; }
      if (c.type === 'data-superseded') { applySuperseded(msg, c.data); break; }
      if (c.transient) break;
      {
        const part = c.id != null ? { type: c.type, id: c.id, data: c.data ?? null } : { type: c.type, data: c.data ?? null };
        const j = c.id == null ? -1 : parts.findIndex((p) => p.type === c.type && p.id === c.id);
        if (j >= 0) parts[j] = part; else parts.push(part);
      }
  }
}

/**
 * A transient `data-reconciliation` chunk: a final text that differs from
 * the streamed one wins ({messageId, partIndex, text, streamedText}). The AI
 * SDK ignores transient chunks; the snapshot has the final text, so it is
 * applied here.
 */
function applyReconciliation(cx, d) {
  if (!d || typeof d.text !== 'string') return;
  const i = findMessage(cx.state, d.messageId);
  if (i < 0) return;
  const p = cx.state.messages[i].parts[d.partIndex];
  if (!p || (p.type !== 'text' && p.type !== 'reasoning')) return;
  const msg = cx.message(i);
  cx.part(msg, d.partIndex).text = d.text;
}

/**
 * A transient `data-superseded` chunk: a step was tried again, and its
 * earlier try's parts go ({messageId, fromPart, stepId, attemptId,
 * previousAttemptId}): the parts before `fromPart` stay.
 */
function applySuperseded(msg, d) {
  const from = Number(d && d.fromPart);
  if (!Number.isInteger(from) || from < 0 || from >= msg.parts.length) return;
  msg.parts.length = from;
  const open = (msg.openParts || []).filter(([, idx]) => idx < from);
  if (open.length) msg.openParts = open;
  else delete msg.openParts;
}

// ---------------------------------------------------- session surfaces ---

function upsertBy(list, key, value) {
  const id = value && value[key];
  const i = list.findIndex((x) => x && x[key] === id);
  if (i >= 0) list[i] = value; else list.push(value);
}

function splitOnce(s) {
  const i = s.indexOf(':');
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
}

function withKey(data, key, id) {
  const v = isObject(data) ? data : { value: data };
  return v[key] == null ? { ...v, [key]: id } : v;
}

/** A session-level `data-<surface>` chunk (messageId null). */
function applySurfaceChunk(cx, c, lim, extra) {
  if (typeof c.type !== 'string' || !c.type.startsWith('data-')) return;
  const surface = c.type.slice(5);
  if (surface === 'reconciliation') { applyReconciliation(cx, c.data); return; }
  if (c.transient) return;
  const st = cx.state;
  const { id, data } = c;
  if (SURFACE_MAPS.includes(surface)) {
    if (id != null) cx.top(surface)[id] = data;
    return;
  }
  switch (surface) {
    case 'runtime':
      if (data != null) st.runtime = data;
      return;
    case 'diagnostics': {
      const d = isObject(data) && data.id == null && id != null ? { ...data, id } : data;
      const list = cx.top('diagnostics');
      upsertBy(list, 'id', d);
      if (list.length > lim.maxDiagnostics) list.splice(0, list.length - lim.maxDiagnostics);
      return;
    }
    case 'session':
      st.session = data || {};
      return;
    case 'toolCatalog':
      // The snapshot leaves an empty catalog out.
      if (isObject(data) && Object.keys(data).length) st.toolCatalog = data; else delete st.toolCatalog;
      return;
    case 'uiLocal': {
      const list = (st.uiLocal = cx.own(st.uiLocal || []));
      upsertBy(list, 'eventId', data);
      if (list.length > lim.maxUiLocal) list.splice(0, list.length - lim.maxUiLocal);
      return;
    }
    case 'topology':
      if (data && data.topology != null) st.topology = data.topology; else delete st.topology;
      return;
    case 'queue':
    case 'context':
    case 'permissions':
    case 'app':
      st[surface] = data;
      return;
    case 'team': {
      const t = cx.top('team');
      const [kind, rest] = splitOnce(String(id));
      if (kind === 'roster') t.roster = Array.isArray(data) ? data : [];
      else if (kind === 'edges') t.edges = Array.isArray(data) ? data : [];
      else if (kind === 'info') t.info = data || {};
      else if (TEAM_LISTS[kind]) {
        const [list, key] = TEAM_LISTS[kind];
        t[list] = cx.own(t[list]);
        upsertBy(t[list], key, withKey(data, key, rest));
      }
      return;
    }
    case 'coding': {
      const cd = cx.top('coding');
      const [kind, rest] = splitOnce(String(id));
      if (CODING_MAPS[kind]) {
        const k = CODING_MAPS[kind];
        cd[k] = cx.own(cd[k]);
        cd[k][rest] = data;
      } else if (kind === 'block') {
        cd.blocks = cx.own(cd.blocks);
        upsertBy(cd.blocks, 'blockId', withKey(data, 'blockId', String(id)));
      }
      return;
    }
    default:
      // A surface this client does not know: kept aside, out of the state.
      extra[surface] = extra[surface] || {};
      extra[surface][id == null ? '' : id] = data;
  }
}
