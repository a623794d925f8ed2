// agent-projector viewer: decisions and run controls.
//
// Owns the action card (what a human-in-the-loop request asks, its answer
// form drawn from the request's JSON Schema, approve / reject / option
// buttons), the composer (send a message) and the cancel button, all sent
// through the client library's controls (`conn.approve/reject/answer/send/
// cancel`). What the server answered is shown as a notice; an action's
// status only ever comes from the stream (the runtime's action.resolved).

import { actionKey, badge, h, refusal, ui, $ } from './ui.js';

function decisionLabel(d) {
  const s = String(d || '').toLowerCase();
  if (s.startsWith('approv') || s === 'allow' || s === 'accept' || s === 'accepted') return ['approved', 'badge-done'];
  if (s.startsWith('reject') || s.startsWith('deny') || s === 'denied' || s === 'declined') return ['rejected', 'badge-failed'];
  return [d ? String(d) : 'resolved', 'badge-muted'];
}

/** A decision on an action of the viewed session, through the library's controls. */
async function decide(actionId, decision, answer) {
  const sid = ui.view.id;
  const key = actionKey(sid, actionId);
  if (ui.inFlight.has(key)) return;
  ui.inFlight.add(key);
  ui.notices.set(key, { kind: 'info', text: 'Sending ' + decision + '…' });
  ui.touch(key);
  let notice;
  try {
    if (decision === 'answer') await ui.conn.answer(sid, actionId, answer);
    else if (decision === 'approve') await ui.conn.approve(sid, actionId);
    else await ui.conn.reject(sid, actionId);
    notice = { kind: 'info', text: 'Sent to the runtime — waiting for it to resolve' };
    if (decision === 'answer') ui.drafts.delete(key);
  } catch (e) {
    notice = { kind: 'warn', text: refusal(e, decision === 'answer' ? 'answer' : 'decision') };
  } finally {
    ui.inFlight.delete(key);
  }
  const a = ui.conn.state(sid)?.actions[actionId];
  if (!a || a.status === 'pending') ui.notices.set(key, notice);
  ui.touch(key);
}

/** An action card: from the `data-action-request` part and the actions surface. */
export function renderActionCard(data, partId, testid) {
  const st = ui.view.state;
  const id = data.actionId || partId;
  const key = actionKey(ui.view.id, id);
  // The surface entry and the part are replaced by the same frame; take
  // whichever says more. Status only ever comes from the stream.
  const a = Object.assign({}, data, st.actions[id] || {});
  const pending = a.status === 'pending';
  const card = h('div', { class: 'card action-card ' + (pending ? 'is-pending' : 'is-resolved'), testid, dataset: { actionId: id, status: a.status || '' } });
  card.append(h('div', { class: 'card-head' },
    h('span', { class: 'card-kind', text: a.actionType ? a.actionType.replace(/_/g, ' ') : 'action' }),
    pending ? badge('pending', 'badge-pending', 'action-status') : badge(...decisionLabel(a.decision), 'action-status')));
  card.append(h('div', { class: 'card-title', text: a.title || 'The runtime asks for a decision' }));
  const meta = [];
  if (a.requestedBy) meta.push('requested by ' + ((st.agents[a.requestedBy] || {}).name || a.requestedBy));
  if (a.toolCallId) meta.push('tool call ' + a.toolCallId);
  meta.push(id);
  card.append(h('div', { class: 'card-meta mono', text: meta.join(' · ') }));
  card.append(...requestDetails(a));
  if (pending) {
    const busy = ui.inFlight.has(key);
    const form = answerForm(id, key, a, busy);
    if (form) card.append(form);
    // A request answered by a form or an option is declined, not approved.
    card.append(h('div', { class: 'action-buttons' },
      form ? null : h('button', { type: 'button', class: 'btn btn-approve', testid: 'approve', disabled: busy, onclick: () => decide(id, 'approve'), text: 'Approve' }),
      h('button', { type: 'button', class: 'btn btn-reject', testid: 'reject', disabled: busy, onclick: () => decide(id, 'reject'), text: form ? 'Decline' : 'Reject' })));
    const n = ui.notices.get(key);
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
function answerForm(id, key, a, busy) {
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
  const draft = ui.drafts.get(key) || {};
  const set = (name, v) => {
    const d = ui.drafts.get(key) || {};
    if (v === undefined) delete d[name]; else d[name] = v;
    ui.drafts.set(key, d);
  };
  const form = h('form', { class: 'answer-form', testid: 'answer-form', dataset: { actionId: id } });
  const fields = spec ? spec.fields : [{ name: 'json', kind: 'json', schema: a.schema, required: true, label: 'answer (JSON)' }];
  for (const f of fields) {
    const cur = draft[f.name];
    const common = { name: f.name, testid: 'field-' + f.name, dataset: { field: f.name } };
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
    const d = { ...(ui.drafts.get(key) || {}) };
    let answer;
    if (!spec) {
      try { answer = JSON.parse(d.json ?? 'null'); } catch (_) {
        ui.notices.set(key, { kind: 'warn', text: 'The answer is not valid JSON' });
        ui.touch(key);
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
export function focusedField() {
  const el = document.activeElement;
  const form = el && el.closest && el.closest('[data-testid=answer-form]');
  if (!form || !el.dataset.field) return null;
  let caret = null;
  try { caret = [el.selectionStart, el.selectionEnd]; } catch (_) { /* not a text input */ }
  // The same request may show twice (in its message and in the pending panel).
  const twins = [...document.querySelectorAll('[data-testid=answer-form]')].filter((x) => x.dataset.actionId === form.dataset.actionId);
  return { action: form.dataset.actionId, nth: twins.indexOf(form), field: el.dataset.field, caret };
}

export function restoreField(f) {
  if (!f) return;
  const form = [...document.querySelectorAll('[data-testid=answer-form]')].filter((x) => x.dataset.actionId === f.action)[f.nth];
  const el = form && [...form.querySelectorAll('[data-field]')].find((x) => x.dataset.field === f.field);
  if (!el || el === document.activeElement) return;
  el.focus();
  if (f.caret && f.caret[0] != null) { try { el.setSelectionRange(f.caret[0], f.caret[1]); } catch (_) { /* no caret */ } }
}

// ------------------------------------------------------ run controls ---

const ACTIVE = new Set(['accepted', 'routing', 'preparing', 'running', 'waiting', 'blocked', 'retrying']);

function controlNotice(kind, text) {
  const el = $('control-notice');
  el.className = 'control-notice notice-' + kind;
  el.textContent = text;
  el.hidden = !text;
}

async function runControl(what, call, done) {
  const sid = ui.view.id;
  controlNotice('info', `Sending ${what}…`);
  try {
    await call(sid);
    if (ui.view.id === sid) controlNotice('info', done);
    return true;
  } catch (e) {
    if (ui.view.id === sid) controlNotice('warn', refusal(e, what));
    return false;
  }
}

/** Wire the composer (send) and the cancel button of the viewed session. */
export function bindControls() {
  const form = $('composer');
  const input = $('composer-input');
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text || !ui.view.id) { input.focus(); return; }
    const button = $('send');
    button.disabled = true;
    const ok = await runControl('message', (sid) => ui.conn.send(sid, text),
      'Sent to the runtime — it shows here when the runtime records it');
    button.disabled = false;
    if (ok && input.value.trim() === text) input.value = '';
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.metaKey || ev.ctrlKey)) form.requestSubmit();
  });
  $('cancel-run').addEventListener('click', () =>
    runControl('cancel', (sid) => ui.conn.cancel(sid), 'Cancel sent to the runtime — waiting for it to stop'));
}

/** Show the cancel button while the viewed run is active; clear notices of another session. */
export function renderControls(st, switched) {
  if (switched) controlNotice('info', '');
  $('cancel-run').hidden = !(st && ACTIVE.has(st.runtime && st.runtime.status));
}
