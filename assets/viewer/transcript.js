// agent-projector viewer: the conversation.
//
// Owns the transcript: one <li> per message of the viewed session's state,
// rebuilt only when that message (or what its cards show: its agent, its
// actions, their notices) changed. States come from the client library and
// are immutable, so "changed" is a reference comparison. Also the cards a
// message holds (tool rows, artifacts, evidence, diagnostic refs), which the
// side panels reuse.

import { renderActionCard } from './actions.js';
import { actionKey, badge, h, keepOpen, pretty, refList, short, ui, $ } from './ui.js';

/** messageId -> {sig, el}: what each rendered <li> was built from. */
const rendered = new Map();

/** Forget every rendered message (another session is shown). */
export function clearTranscript() {
  rendered.clear();
  $('transcript').replaceChildren();
}

/** What a message's <li> depends on: itself, its agent, its action cards and their notices. */
function signature(m, st) {
  const sig = [m, m.agentId ? st.agents[m.agentId] : null];
  for (const p of m.parts) {
    if (p.type !== 'data-action-request') continue;
    const id = (p.data && p.data.actionId) || p.id;
    const key = actionKey(ui.view.id, id);
    sig.push(st.actions[id], ui.revs.get(key), ui.inFlight.has(key));
  }
  return sig;
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Render the transcript of `st`; returns whether anything changed. */
export function renderTranscript(st) {
  const list = $('transcript');
  const messages = st ? st.messages : [];
  const seen = new Set();
  let changed = false;
  let i = 0;
  for (const m of messages) {
    seen.add(m.id);
    const sig = signature(m, st);
    let r = rendered.get(m.id);
    if (!r || !same(r.sig, sig)) {
      const el = renderMessage(m, st);
      if (r && r.el.parentNode === list) list.replaceChild(el, r.el);
      r = { sig, el };
      rendered.set(m.id, r);
      changed = true;
    }
    const at = list.children[i];
    if (at !== r.el) { list.insertBefore(r.el, at || null); changed = true; }
    i++;
  }
  for (const [id, r] of rendered) {
    if (!seen.has(id)) { r.el.remove(); rendered.delete(id); changed = true; }
  }
  $('transcript-empty').hidden = messages.length > 0;
  return changed;
}

function renderMessage(m, st) {
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
    const a = m.agentId ? st.agents[m.agentId] : null;
    head.append(h('span', { class: 'author', text: m.agentId ? (a && a.name) || m.agentId : role === 'system' ? 'System' : 'Assistant' }));
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
  if (t.startsWith('tool-') || t === 'dynamic-tool') return renderToolPart(p, key);
  if (t === 'data-action-request') return renderActionCard(p.data || {}, p.id, 'action-card');
  if (t === 'data-artifact-card') return renderArtifactCard(p.data || {}, 'artifact-card', true);
  if (t === 'data-evidence-citation') return renderEvidenceCard(p.data || {}, 'evidence-card', true);
  if (t === 'data-diagnostic-ref') return renderDiagnosticRef(p.data || {}, p.id);
  if (t === 'source-url' || t === 'source-document') {
    return h('div', { class: 'card source-card' }, h('span', { class: 'card-kind', text: 'source' }),
      h('span', { class: 'card-title', text: p.title || p.url || p.filename || '' }),
      h('span', { class: 'mono muted', text: p.url || p.mediaType || '' }));
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
  'approval-requested': ['awaiting approval', 'state-running'],
  'output-available': ['done', 'state-done'],
  'output-error': ['failed', 'state-failed'],
  'output-denied': ['denied', 'state-denied'],
};

function renderToolPart(p, key) {
  const name = p.type === 'dynamic-tool' ? (p.toolName || 'tool') : p.type.slice(5);
  const [label, cls] = TOOL_STATES[p.state] || [p.state || 'unknown', 'state-unknown'];
  const d = keepOpen(h('details', { class: 'tool-row ' + cls, testid: 'tool-row', dataset: { toolCallId: p.toolCallId || '', state: p.state || '' } }), key);
  const inputSummary = p.input === undefined || p.input === null ? '' : short(p.input, 90);
  const o = p.output;
  const outSummary = p.state === 'output-error' ? p.errorText
    : o && typeof o === 'object' && !Array.isArray(o) && typeof o.summary === 'string' ? o.summary
      : o !== undefined ? short(o, 90) : '';
  d.append(h('summary', { class: 'tool-summary' },
    h('span', { class: 'tool-icon', 'aria-hidden': 'true' }),
    h('span', { class: 'tool-name', text: p.title || name }),
    h('span', { class: 'tool-state ' + cls, testid: 'tool-state', text: label }),
    inputSummary ? h('span', { class: 'tool-input mono', text: inputSummary }) : null,
    outSummary ? h('span', { class: 'tool-out', text: '→ ' + short(outSummary, 80) }) : null));
  const body = h('div', { class: 'tool-detail' });
  const block = (k, el) => h('div', { class: 'kv-block' }, h('span', { class: 'k', text: k }), el);
  body.append(h('div', { class: 'kv' }, h('span', { class: 'k', text: 'call' }), h('span', { class: 'mono', text: p.toolCallId || '' })));
  if (p.input !== undefined) body.append(block('input', h('pre', { class: 'mono', text: pretty(p.input) })));
  if (p.state === 'output-error') {
    body.append(block('error', h('pre', { class: 'mono error-text', text: p.errorText || '' })));
  } else if (o !== undefined) {
    if (o && typeof o === 'object' && !Array.isArray(o) && ('summary' in o || 'refs' in o)) {
      if (o.summary != null) body.append(block('output', h('div', { class: 'out-summary', text: String(o.summary) })));
      if (Array.isArray(o.refs) && o.refs.length) body.append(refList(o.refs));
      const rest = Object.assign({}, o); delete rest.summary; delete rest.refs;
      if (Object.keys(rest).length) body.append(h('pre', { class: 'mono', text: pretty(rest) }));
    } else {
      body.append(block('output', h('pre', { class: 'mono', text: pretty(o) })));
    }
  }
  d.append(body);
  return d;
}

export function renderArtifactCard(a, testid, inline) {
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

export function renderEvidenceCard(e, testid, inline) {
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
