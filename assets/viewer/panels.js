// agent-projector viewer: the side panels.
//
// Owns the lanes beside the conversation, drawn from the viewed session's
// state: pending actions, artifacts, evidence, the team (roster, and for a
// teammate that runs in its own child session, that session's live status
// and last text, read from the same connection), work items, handoffs,
// reviews, worker notifications, the queue, coding, context, tools,
// diagnostics and the timeline. Nothing here is ever in the transcript.

import { renderActionCard } from './actions.js';
import { renderArtifactCard, renderEvidenceCard } from './transcript.js';
import { badge, fill, h, join, lastText, lifeClass, refList, short, statusClass, $ } from './ui.js';

/**
 * Render every panel. `children` maps a teammate's agent id to its child
 * session `{sessionId, state, followed}`; `open(id)` shows another session.
 */
export function renderPanels(st, children, open) {
  const pending = Object.values(st.actions).filter((a) => a && a.status === 'pending');
  fill('actions-list', 'count-actions', pending.map((a) => renderActionCard(a, a.actionId, 'pending-action')));
  $('panel-actions').classList.toggle('has-items', pending.length > 0);

  fill('artifacts-list', 'count-artifacts', Object.values(st.artifacts).filter(Boolean).reverse().map((a) => renderArtifactCard(a, 'artifact-item')));
  fill('evidence-list', 'count-evidence', Object.values(st.evidence).filter(Boolean).reverse().map((e) => renderEvidenceCard(e, 'evidence-item')));

  renderTeam(st, children, open);
  renderQueue(st);
  renderCoding(st);
  renderContext(st);

  const tools = Object.values(st.tools).filter(Boolean).reverse();
  fill('tools-list', 'count-tools', tools.map((tl) => h('div', { class: 'row tool-item', testid: 'tool-item', dataset: { status: tl.status } },
    h('span', { class: 'row-title mono', text: tl.toolName || tl.toolCallId }),
    tl.kind && tl.kind !== 'tool' ? h('span', { class: 'muted small', text: tl.kind }) : null,
    badge(tl.status, 'badge-' + lifeClass(tl.status)))));

  // Diagnostics, newest first.
  fill('diagnostics-list', 'count-diagnostics', st.diagnostics.filter(Boolean).slice().reverse().map(renderDiagnostic));
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

/** The team panel alone (a teammate's child session changed). */
export function renderTeam(st, children, open) {
  const t = st.team;
  // The roster: the agents surface plus roster ids without an entry.
  const ids = [...Object.keys(st.agents)];
  for (const r of t.roster || []) if (!ids.includes(r)) ids.push(r);
  // Teammates whose own session names this one as its parent.
  for (const a of children.keys()) if (!ids.includes(a)) ids.push(a);
  fill('team-list', 'count-team', ids.map((id) => renderAgent(st, id, st.agents[id], children.get(id), open)), 'No teammates.');
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

function renderAgent(st, id, a, child, open) {
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
  const edge = (st.team.edges || []).find((e) => e && e.to === id);
  if (edge) meta.push('from ' + edge.from);
  if (meta.length) main.append(h('div', { class: 'agent-meta muted small', text: meta.join(' · ') }));
  if (child) main.append(renderChild(child, open));
  card.append(main);
  const status = a ? a.status : 'unknown';
  card.append(badge(status, 'badge-' + lifeClass(status)));
  return card;
}

/** A teammate's own session, live on the page's one connection. */
function renderChild(child, open) {
  const cs = child.state;
  const status = cs ? (cs.runtime && cs.runtime.status) || 'unknown' : child.followed ? 'loading' : 'not listed';
  const text = cs ? lastText(cs) : '';
  return h('div', { class: 'child-session', testid: 'teammate-session', dataset: { sessionId: child.sessionId, status: cs ? status : '' } },
    h('div', { class: 'row' },
      h('button', { type: 'button', class: 'link mono row-title', testid: 'teammate-session-open', title: 'Open this session',
        onclick: () => open(child.sessionId), text: child.sessionId }),
      h('span', { class: 'pill pill-small ' + (cs ? statusClass(status) : 'status-none'), testid: 'teammate-session-status', dataset: { status: cs ? status : '' }, text: status })),
    text ? h('div', { class: 'child-text', testid: 'teammate-last-text', text: short(text.slice(-400), 160) }) : null);
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

function renderDiagnostic(d) {
  const sev = d.severity || 'warning';
  return h('div', { class: 'diag sev-' + sev, id: 'diag-' + d.id, testid: 'diagnostic', dataset: { severity: sev, code: d.code || '' } },
    h('div', { class: 'diag-head' },
      h('span', { class: 'sev sev-' + sev, text: sev }),
      h('span', { class: 'diag-code mono', text: d.code || 'diagnostic' })),
    h('div', { class: 'diag-message', text: d.message || '' }),
    h('div', { class: 'diag-meta muted small mono', text: [d.class, d.cursor != null ? '#' + d.cursor : null, d.toolCallId ? 'tool ' + d.toolCallId : null].filter(Boolean).join(' · ') }));
}

export function renderTimeline(st) {
  const tl = (st && st.timeline) || [];
  const items = tl.slice(-80).reverse().map((e) => h('div', { class: 'tl-row' },
    h('span', { class: 'tl-cursor mono', text: '#' + e.cursor }),
    h('span', { class: 'tl-class mono', text: e.class }),
    e.status ? h('span', { class: 'muted small', text: e.status }) : null));
  fill('timeline-list', 'count-timeline', items);
  $('count-timeline').textContent = tl.length ? String(tl.length) : '';
}
