// The lovia console (docs/console.md): a hand-written ES module, no build
// step. It talks only to the JSON API of the service that served it, with
// the tenant's key in the Authorization header. Everything a tool, a model
// or a request produced is untrusted: it reaches the page only through
// textContent and setAttribute on attributes that never load or run
// anything: no markup is ever parsed from data, and no href or src is built
// from it (an image is drawn from a `blob:` URL of its checked bytes, see
// parts.js).

import { el, svg } from './dom.js';
import { partsView, revoke } from './parts.js';
import { schemaForm } from './schema-form.js';

const KEY_SLOT = 'lovia.console.key';
const $ = (id) => document.getElementById(id);

let key = sessionStorage.getItem(KEY_SLOT);
// Timers and streams of the signed-in tenant, stopped on sign-out.
let timers = [];
let streams = [];

/** Pretty-printed JSON of an argument text; the text itself when it is not JSON. */
function pretty(text) {
  if (typeof text !== 'string') return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** `text` without the whitespace outside its strings: what a faithful re-serialisation would give. */
function compact(text) {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === '\\') { out += text[i + 1] ?? ''; i += 1; } else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (!' \t\n\r'.includes(c)) {
      out += c;
    }
  }
  return out;
}

/**
 * The arguments as an approver must see them: pretty-printed, and, when the
 * pretty view is not the same JSON as the exact text (a number past what a
 * double holds, a repeated key, an escape, 1e3 for 1000), the exact text too,
 * flagged, so that what the browser parsed can never hide what the model sent.
 */
function argumentsView(text, label) {
  const view = el('div', { class: 'arguments-view' });
  const shown = pretty(text);
  let faithful = true;
  if (typeof text === 'string') {
    try { faithful = JSON.stringify(JSON.parse(text)) === compact(text); } catch { faithful = true; }
  }
  view.append(el('pre', { class: 'arguments', tabindex: 0, 'aria-label': label }, shown));
  if (!faithful) {
    view.append(el('p', { class: 'error inexact' }, 'The exact text differs from the pretty view above (large numbers, repeated keys or escapes). Decide on the exact text:'),
      el('pre', { class: 'arguments-exact', tabindex: 0, 'aria-label': `Exact ${label}` }, text));
  }
  return view;
}

function seconds(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 120 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** A request to the API with the key; JSON in and out. */
async function api(path, { method = 'GET', body, signal, extraHeaders = {} } = {}) {
  const sent = key;
  const headers = { ...extraHeaders, Authorization: `Bearer ${key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method, headers, signal, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
  });
  if (response.status === 401) {
    signOut('The key was refused (401): sign in again.');
    throw new ApiError(401, 'signed out');
  }
  const text = await response.text();
  // Signed out (or in with another key) while this was in flight: its answer
  // must not reach a page that was emptied.
  if (key !== sent) throw new ApiError(401, 'signed out');
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) throw new ApiError(response.status, (data && data.error) || `${response.status}`);
  return data;
}

/**
 * POSTs `body` to `path` (/api/chat unless named) and calls onEvent(name, data)
 * for each SSE event until the stream ends.
 */
async function stream(body, onEvent, { path = '/api/chat', extraHeaders = {} } = {}) {
  const abort = new AbortController();
  streams.push(abort);
  try {
    const response = await fetch(path, {
      method: 'POST', signal: abort.signal, cache: 'no-store', credentials: 'omit',
      headers: { ...extraHeaders, Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    if (!response.ok) {
      const text = await response.text();
      let message = text;
      try { message = JSON.parse(text).error; } catch { /* not JSON: show it as it is */ }
      throw new ApiError(response.status, message);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, '');
        let name = 'message';
        const data = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(':')) continue; // keep-alive comment
          if (line.startsWith('event:')) name = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (data.length === 0) continue;
        let parsed;
        try { parsed = JSON.parse(data.join('\n')); } catch { parsed = { text: data.join('\n') }; }
        onEvent(name, parsed);
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  } finally {
    streams = streams.filter((s) => s !== abort);
  }
}

function every(ms, task) {
  const run = () => task().catch((e) => { if (e.status !== 401) console.warn(e); });
  run();
  timers.push(setInterval(run, ms));
}

// ---------------------------------------------------------------- sign in

function showSignedIn(tenantNote) {
  $('sign-in-view').hidden = true;
  $('app').hidden = false;
  $('sign-out').hidden = false;
  $('who').textContent = tenantNote;
  api('/api/metrics').then((m) => { $('who').textContent = `Signed in as ${m.tenant} (${tenantNote})`; }).catch(() => {});
  every(1000, refreshApprovals);
  every(1000, refreshQuestions);
  every(2000, refreshSessions);
  every(2000, refreshMetrics);
  loadTools();
}

function signOut(message = '') {
  sessionStorage.removeItem(KEY_SLOT);
  key = null;
  for (const t of timers) clearInterval(t);
  timers = [];
  for (const s of streams) s.abort();
  streams = [];
  for (const id of ['approvals', 'questions', 'sessions', 'run-events', 'waterfall', 'tools', 'metrics-totals', 'metrics-tools', 'audit',
    'chart-rate', 'chart-errors', 'chart-latency']) $(id).replaceChildren();
  shown.clear();
  asked.clear();
  revoke(run.images);
  for (const images of formImages.splice(0)) revoke(images);
  run.session = null;
  $('approval-count').textContent = '';
  $('run-view').hidden = true;
  $('app').hidden = true;
  $('sign-out').hidden = true;
  $('sign-in-view').hidden = false;
  $('who').textContent = '';
  $('sign-in-error').textContent = message;
  $('api-key').value = '';
  $('api-key').focus();
}

$('sign-in').addEventListener('submit', async (event) => {
  event.preventDefault();
  key = $('api-key').value.trim();
  $('sign-in-error').textContent = '';
  try {
    const tools = await api('/api/tools');
    sessionStorage.setItem(KEY_SLOT, key);
    $('api-key').value = '';
    showSignedIn(`${tools.length} tools`);
  } catch (e) {
    if (e.status !== 401) $('sign-in-error').textContent = `Cannot sign in: ${e.message}`;
  }
});
$('sign-out').addEventListener('click', () => signOut());

// ---------------------------------------------------------------- tabs

const tabs = ['approvals', 'runs', 'tools', 'metrics'];
function selectTab(name) {
  for (const t of tabs) {
    $(`tab-${t}`).setAttribute('aria-selected', String(t === name));
    $(`${t}-view`).hidden = t !== name;
  }
}
for (const t of tabs) $(`tab-${t}`).addEventListener('click', () => selectTab(t));
$('app').querySelector('[role=tablist]').addEventListener('keydown', (event) => {
  const at = tabs.findIndex((t) => $(`tab-${t}`) === document.activeElement);
  if (at < 0 || !['ArrowLeft', 'ArrowRight'].includes(event.key)) return;
  const next = tabs[(at + (event.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
  selectTab(next);
  $(`tab-${next}`).focus();
});

// ---------------------------------------------------------------- approvals

// Rendered approvals by "session/call", so that a refresh updates the
// clocks in place and never moves the keyboard focus off a button.
const shown = new Map();

async function decide(sessionId, callId, decision, always = false) {
  const body = { session_id: sessionId, call_id: callId, decision };
  if (always) body.always = true;
  await api('/api/chat/approve', { method: 'POST', body });
}

/** A button that opens the run of `sessionId` in the Runs tab. */
function openRunButton(sessionId) {
  const b = el('button', { type: 'button', class: 'secondary open-run' }, `Open run of session ${sessionId}`);
  b.addEventListener('click', () => openRun(sessionId));
  return b;
}

function approvalCard(a) {
  const waited = el('dd', { class: 'waited' });
  const deadline = el('dd', { class: 'deadline' });
  const error = el('p', { class: 'error', role: 'alert' });
  // A chat's approval may hold for the rest of the chat; an /mcp call's
  // (its session is the call's run, mcp-<n>) or a direct call's
  // (direct-<n>) is one call, with no run to open.
  const oneCall = a.session_id.startsWith('mcp-') || a.session_id.startsWith('direct-');
  const always = oneCall ? null : el('input', { type: 'checkbox',
    'aria-label': `Always allow ${a.tool} in this chat (${a.call_id}, session ${a.session_id})` });
  const buttons = ['approve', 'deny'].map((decision) => {
    const label = `${decision === 'approve' ? 'Approve' : 'Deny'} ${a.tool} (${a.call_id}, session ${a.session_id})`;
    const button = el('button', { type: 'button', class: decision, 'aria-label': label },
      decision === 'approve' ? 'Approve' : 'Deny');
    button.addEventListener('click', async () => {
      for (const b of buttons) b.disabled = true;
      try {
        await decide(a.session_id, a.call_id, decision, decision === 'approve' && always?.checked);
        card.dataset.decided = decision;
        error.textContent = decision === 'approve' ? 'Approved.' : 'Denied.';
      } catch (e) {
        error.textContent = `Not decided: ${e.message}`;
        for (const b of buttons) b.disabled = false;
      }
    });
    return button;
  });
  const card = el('li', { class: 'card approval', 'data-call': a.call_id, 'data-session': a.session_id,
    'aria-label': `Approval for ${a.tool}` },
  el('h3', {}, a.tool),
  el('p', { class: 'description' }, a.description || '(no description)'),
  el('dl', { class: 'meta' },
    el('dt', {}, 'Session'), el('dd', {}, a.session_id),
    el('dt', {}, 'Call'), el('dd', {}, a.call_id),
    el('dt', {}, 'Plugin'), el('dd', {}, a.plugin ? `${a.plugin} ${a.plugin_version || ''}` : '(host tool)'),
    el('dt', {}, 'Digest'), el('dd', { class: 'digest' }, a.plugin_digest || '—'),
    el('dt', {}, 'Waiting'), waited,
    el('dt', {}, 'Denied in'), deadline),
  sessionInputs.has(a.session_id) ? el('p', { class: 'asked-for' }, 'Asked in reply to: ', el('q', {}, sessionInputs.get(a.session_id))) : null,
  el('h4', {}, 'Arguments'),
  argumentsView(a.arguments, `Arguments of ${a.call_id}`),
  always ? el('label', { class: 'always' }, always, ` Always allow ${a.tool} in this chat`) : '',
  el('div', { class: 'actions' }, buttons),
  error,
  // After the decision's controls, so Tab goes from the arguments to them first.
  oneCall ? null : openRunButton(a.session_id));
  return { card, waited, deadline, data: a };
}

async function refreshApprovals() {
  const { approvals, now_ms: now } = await api('/api/approvals');
  // A card says what the run was asked; a session not seen yet is looked up first.
  if (approvals.some((a) => !a.session_id.startsWith('mcp-') && !sessionInputs.has(a.session_id))) {
    await refreshSessions().catch(() => {});
  }
  const list = $('approvals');
  const seen = new Set();
  for (const a of approvals) {
    const id = `${a.session_id}/${a.call_id}`;
    seen.add(id);
    if (!shown.has(id)) {
      const item = approvalCard(a);
      shown.set(id, item);
      list.append(item.card);
    }
    const item = shown.get(id);
    item.waited.textContent = seconds(now - a.asked_ms);
    item.deadline.textContent = seconds(a.deny_at_ms - now);
  }
  for (const [id, item] of shown) {
    if (!seen.has(id)) {
      // A focused card that goes away gives the focus to the next one.
      const hadFocus = item.card.contains(document.activeElement);
      const next = item.card.nextElementSibling || item.card.previousElementSibling;
      item.card.remove();
      shown.delete(id);
      if (hadFocus && next) next.querySelector('button')?.focus();
    }
  }
  $('approvals-empty').hidden = shown.size > 0;
  $('approval-count').textContent = shown.size ? String(shown.size) : '';
  $('approvals-error').textContent = '';
}

// ---------------------------------------------------------------- questions

// Rendered questions by "session/call", as the approvals.
const asked = new Map();

async function answer(sessionId, text) {
  await api('/api/chat/answer', { method: 'POST', body: { session_id: sessionId, answer: text } });
}

// A question card: a button per option, checkboxes and "Answer" when
// several may be chosen, a text box and "Answer" when there are no options.
function questionCard(q) {
  const error = el('p', { class: 'error', role: 'alert' });
  const deadline = el('dd', { class: 'deadline' });
  const controls = [];
  const send = async (text) => {
    for (const c of controls) c.disabled = true;
    try {
      await answer(q.session_id, text);
      card.dataset.answered = 'true';
      error.textContent = 'Answered.';
    } catch (e) {
      error.textContent = `Not answered: ${e.message}`;
      for (const c of controls) c.disabled = false;
    }
  };
  let body;
  if (Array.isArray(q.options) && !q.multi_select) {
    body = el('div', { class: 'actions' }, q.options.map((o) => {
      const b = el('button', { type: 'button', class: 'approve', 'aria-label': `Answer ${o.label}`, title: o.description || '' }, o.label);
      b.addEventListener('click', () => send(o.label));
      controls.push(b);
      // The option's description, on the card (a tooltip is not seen by everyone).
      return o.description ? el('span', { class: 'option' }, b, el('span', { class: 'note' }, ` ${o.description}`)) : b;
    }));
  } else if (Array.isArray(q.options)) {
    const boxes = q.options.map((o) => {
      const box = el('input', { type: 'checkbox', value: o.label });
      controls.push(box);
      return el('label', { class: 'option' }, box, ` ${o.label}`, o.description ? el('span', { class: 'note' }, ` — ${o.description}`) : '');
    });
    const submit = el('button', { type: 'button', class: 'approve' }, 'Answer');
    submit.addEventListener('click', () => {
      const chosen = boxes.map((l) => l.querySelector('input')).filter((b) => b.checked).map((b) => b.value);
      if (chosen.length) send(chosen); else error.textContent = 'Choose at least one option.';
    });
    controls.push(submit);
    body = el('div', {}, el('fieldset', {}, el('legend', {}, 'Choose any'), boxes), el('div', { class: 'actions' }, submit));
  } else {
    const text = el('textarea', { rows: '3', 'aria-label': `Your answer (${q.call_id})` });
    const submit = el('button', { type: 'button', class: 'approve' }, 'Answer');
    submit.addEventListener('click', () => {
      if (text.value.trim()) send(text.value); else error.textContent = 'Write an answer first.';
    });
    controls.push(text, submit);
    body = el('div', {}, text, el('div', { class: 'actions' }, submit));
  }
  const card = el('li', { class: 'card question', 'data-call': q.call_id, 'data-session': q.session_id,
    'aria-label': `Question from session ${q.session_id}` },
  el('h3', {}, q.question),
  el('dl', { class: 'meta' },
    el('dt', {}, 'Session'), el('dd', {}, q.session_id),
    el('dt', {}, 'Call'), el('dd', {}, q.call_id),
    el('dt', {}, 'Withdrawn in'), deadline),
  body,
  error);
  return { card, deadline };
}

async function refreshQuestions() {
  const { questions, now_ms: now } = await api('/api/questions');
  const list = $('questions');
  const seen = new Set();
  for (const q of questions) {
    const id = `${q.session_id}/${q.call_id}`;
    seen.add(id);
    if (!asked.has(id)) {
      const item = questionCard(q);
      asked.set(id, item);
      list.append(item.card);
    }
    asked.get(id).deadline.textContent = seconds(q.cancel_at_ms - now);
  }
  for (const [id, item] of asked) {
    if (!seen.has(id)) {
      item.card.remove();
      asked.delete(id);
    }
  }
  $('questions-empty').hidden = asked.size > 0;
}

// ---------------------------------------------------------------- runs

// Each session's first input, for the approval cards ("asked in reply to").
const sessionInputs = new Map();

async function refreshSessions() {
  const { sessions } = await api('/api/chat');
  for (const s of sessions) if (s.input) sessionInputs.set(s.session_id, s.input);
  const rows = sessions.map((s) => {
    const open = el('button', { type: 'button', class: 'secondary', 'aria-label': `Open session ${s.session_id}` }, 'Open');
    open.addEventListener('click', () => openRun(s.session_id));
    return el('tr', { 'data-session': s.session_id },
      el('td', {}, s.session_id),
      el('td', { class: `status-${s.status}` }, s.status),
      el('td', {}, new Date(s.started_ms).toLocaleString()),
      el('td', {}, s.input || ''),
      el('td', {}, String(s.pending_approvals)),
      el('td', {}, open));
  });
  $('sessions').replaceChildren(...rows);
}

// The run on screen: its calls for the waterfall, by call id.
// Times are wall-clock ms: each event carries the service's `at_ms`, so a
// run opened mid-way draws its earlier calls where they happened.
// `earlier` holds the transcript of a running session until the replay of
// its events says how much of it they cover.
// `images` holds the blob: URLs of the images on screen, revoked when the view is cleared.
const run = { session: null, calls: new Map(), t0: 0, text: null, epoch: 0, earlier: null, images: [], parent: null };

function resetRun(sessionId) {
  for (const s of streams) s.abort();
  run.session = sessionId;
  run.calls = new Map();
  run.t0 = Date.now();
  run.earlier = null;
  run.text = null;
  run.epoch += 1;
  revoke(run.images);
  $('run-view').hidden = false;
  $('run-title').textContent = `Run of session ${sessionId || '(new)'}`;
  setStatus('—');
  showTrace(null);
  $('run-events').replaceChildren();
  $('waterfall').replaceChildren();
  $('timeline-heading').hidden = true;
  $('run-decisions').replaceChildren();
  $('decisions-heading').hidden = true;
  $('run-error').textContent = '';
}

/** The approvals of `sessionId` decided through the approve route, from the
 *  tenant's audit trail: who decided which call, and when. */
async function showDecisions(sessionId) {
  const epoch = run.epoch;
  const trail = await api('/api/audit?limit=1000');
  if (epoch !== run.epoch) return;
  const prefix = `session ${sessionId}, `;
  const decided = trail.entries.filter((e) => e.action === 'decide' && e.source.startsWith(prefix)).reverse();
  $('decisions-heading').hidden = decided.length === 0;
  $('run-decisions').replaceChildren(...decided.map((e) => el('li', { class: 'decision' },
    `${e.source.slice(prefix.length)}: ${e.outcome}, ${new Date(e.at_ms).toLocaleString()}`)));
}

/**
 * A link to the run's trace in the operator's trace UI, where
 * `[telemetry] trace_url` names one (docs/telemetry.md); nothing otherwise.
 */
function showTrace(url, traceId) {
  const slot = $('run-trace');
  slot.replaceChildren();
  if (url && traceId) {
    slot.append(' · ', el('a', { id: 'run-trace-link', href: url, target: '_blank', rel: 'noopener noreferrer' }, `trace ${traceId}`));
  }
}

/** The run's status; Cancel is offered only while it runs. */
function setStatus(status) {
  $('run-status').textContent = status;
  $('run-cancel').disabled = status !== 'running';
}

function addEvent(kind, ...body) {
  const item = el('li', { class: `event event-${kind}` }, el('span', { class: 'event-kind' }, kind), ...body);
  eventList(run.parent).append(item);
  return item;
}

/** Where an event goes: under the call of the program that made it (code mode), else in the run's list. */
function eventList(parent) {
  const owner = parent ? run.calls.get(parent) : null;
  if (!owner || !owner.item) return $('run-events');
  let list = owner.item.querySelector(':scope > ul.nested-calls');
  if (!list) {
    list = el('ul', { class: 'nested-calls', 'aria-label': `Calls made by the program ${parent}` });
    owner.item.append(list);
  }
  return list;
}

function message(m) {
  const role = m.role || 'message';
  if (m.tool_calls) {
    for (const c of m.tool_calls) {
      const f = c.function || c;
      addEvent('tool call', `${f.name} (${c.id})`, el('pre', {}, pretty(f.arguments)));
    }
  }
  const content = typeof m.content === 'string' ? m.content : m.content ? JSON.stringify(m.content) : '';
  if (role === 'tool' && Array.isArray(m.parts)) addEvent(`result of ${m.tool_call_id || ''}`, partsView(m.parts, run.images));
  else if (content) addEvent(role === 'tool' ? `result of ${m.tool_call_id || ''}` : role, el('pre', {}, content));
}

/** One SSE event of the run on screen. */
function onRunEvent(epoch, name, data) {
  if (epoch !== run.epoch) return; // a stream of a run no longer shown
  if (run.earlier) showEarlier(name, data);
  // A call a program made (code mode) names its program's call: shown under it.
  run.parent = typeof data.parent === 'string' ? data.parent : null;
  const now = (typeof data.at_ms === 'number' ? data.at_ms : Date.now()) - run.t0;
  switch (name) {
    case 'run_started':
      run.session = data.session_id;
      $('run-title').textContent = `Run of session ${data.session_id}`;
      setStatus('running');
      break;
    case 'text_delta':
      if (!run.text) run.text = addEvent('assistant', el('pre', { class: 'assistant-text' })).querySelector('pre');
      run.text.textContent += data.text;
      break;
    case 'tool_call': {
      run.text = null;
      const result = el('div', { class: 'call-result' }, el('span', { class: 'note' }, 'running…'));
      const item = addEvent('tool call', `${data.name} (${data.id})`, el('pre', { class: 'arguments' }, pretty(data.arguments)), result);
      item.dataset.call = data.id;
      const asked = run.calls.get(data.id);
      // A call that waited for an approval starts now that it was approved.
      if (asked && asked.approval) settle(asked, 'approved');
      run.calls.set(data.id, { name: data.name, asked: asked ? asked.asked : null, start: now, end: null, error: false, result, item });
      break;
    }
    case 'tool_attempt_failed': {
      // A failed attempt that another follows: noted under its call and drawn as its own bar.
      const call = run.calls.get(data.id);
      const line = el('p', { class: 'attempt' }, `attempt ${data.attempt} failed: ${data.error}; retrying in ${data.retry_in_ms} ms`);
      if (call && call.item) {
        call.item.append(line);
        call.attempts = [...(call.attempts || []), { start: call.attemptStart ?? call.start, end: now }];
        call.attemptStart = now + data.retry_in_ms;
      } else addEvent('attempt', line);
      break;
    }
    case 'tool_progress': {
      const call = run.calls.get(data.id);
      const line = el('p', { class: 'progress' }, `progress: ${data.message}`);
      if (call && call.item) call.item.append(line); else addEvent('progress', line);
      break;
    }
    case 'approval_required': {
      if (run.calls.get(data.id)?.approval) break; // re-sent on reconnect
      const box = el('div', { class: 'inline-approval' }, el('p', {}, `${data.name} needs approval`),
        argumentsView(data.arguments, `Arguments of ${data.id}`));
      const buttons = ['approve', 'deny'].map((decision) => {
        const b = el('button', { type: 'button', class: decision, 'aria-label': `${decision === 'approve' ? 'Approve' : 'Deny'} ${data.name} (${data.id}) in this run` },
          decision === 'approve' ? 'Approve' : 'Deny');
        b.addEventListener('click', async () => {
          for (const x of buttons) x.disabled = true;
          try { await decide(run.session, data.id, decision); } catch (e) {
            $('run-error').textContent = `Not decided: ${e.message}`;
            for (const x of buttons) x.disabled = false;
          }
        });
        return b;
      });
      box.append(el('div', { class: 'actions' }, buttons));
      const item = addEvent('approval', `${data.name} (${data.id})`, box);
      // The call's bar starts with its wait for a decision.
      run.calls.set(data.id, { name: data.name, asked: now, start: null, end: null, error: false, approval: item });
      break;
    }
    case 'tool_result': {
      const call = run.calls.get(data.id);
      // A rich result shows its parts, with the text the model read under them.
      const body = Array.isArray(data.parts)
        ? el('div', {}, partsView(data.parts, run.images),
          el('details', {}, el('summary', {}, 'What the model read'), el('pre', { class: 'result' }, data.result)))
        : el('pre', { class: 'result' }, data.result);
      const kinds = [data.error_kind, data.tool_error_kind].filter(Boolean).join(', ');
      const label = data.is_error ? `error${kinds ? ` (${kinds})` : ''}` : 'result';
      if (call && call.approval && call.start === null) settle(call, data.is_error ? 'denied' : 'decided');
      if (call && call.result) {
        call.end = now;
        call.error = data.is_error;
        call.result.replaceChildren(el('span', { class: 'event-kind' }, `${label}, ${Math.round(call.end - call.start)} ms`), body);
        if (data.is_error) call.item.classList.add('is-error');
      } else {
        // Denied before it ran: the result stands where the approval was.
        if (call) { call.start = now; call.end = now; call.error = data.is_error; }
        const item = addEvent(label, `${data.name} (${data.id})`, body);
        item.dataset.call = data.id;
        if (data.is_error) item.classList.add('is-error');
      }
      break;
    }
    case 'replay_truncated':
      addEvent('note', el('p', { class: 'note' }, 'The earliest events of this run are no longer kept; the transcript above shows what they did.'));
      break;
    case 'handoff':
      addEvent('handoff', `${data.from_agent} → ${data.to_agent}`);
      break;
    case 'approval_auto':
      addEvent('approval', `✓ ${data.name} auto-approved (allowed for this chat)`);
      break;
    case 'question':
      // Answered from the Approvals tab's question card.
      addEvent('question', `${data.question} (${data.call_id})`);
      break;
    case 'context_compacted':
      addEvent('context compacted', `${data.reason}: ${data.tokens_before} → ${data.tokens_after} tokens`);
      break;
    case 'error':
      addEvent('error', el('pre', {}, `${data.type}: ${data.message}`)).classList.add('is-error');
      if (data.fatal) setStatus(data.type);
      break;
    case 'run_completed':
      setStatus('completed');
      break;
    default:
      break;
  }
  run.parent = null;
  drawWaterfall();
}

/**
 * The transcript of a running session, before the first replayed event: up
 * to the input that started the run, whose events the replay then shows;
 * all of it when the run resumed one (its earlier calls came before this
 * process) or the replay lost its start.
 */
function showEarlier(name, data) {
  const messages = run.earlier;
  run.earlier = null;
  let end = messages.length;
  if (name === 'run_started' && !data.resumed) {
    end = messages.map((m) => m.role).lastIndexOf('user') + 1;
  }
  for (const m of messages.slice(0, end)) message(m);
}

/** The inline approval of `call` once decided: its buttons give way to the decision. */
function settle(call, decision) {
  const actions = call.approval.querySelector('.actions');
  if (actions) actions.replaceWith(el('p', { class: 'decision' }, decision));
  call.approval = null;
}

/**
 * Each tool call of the run as a bar: grey while it waits for an approval,
 * then green (result), red (error) or amber (still running), on one time
 * axis from the first call, so parallel calls overlap and barriers,
 * retries and timeouts show as gaps and long bars.
 */
function drawWaterfall() {
  const calls = [...run.calls.entries()];
  const box = $('waterfall');
  // A run opened after it finished has its transcript, not its timed events: no empty chart.
  $('timeline-heading').hidden = calls.length === 0;
  if (calls.length === 0) { box.replaceChildren(); return; }
  const now = Date.now() - run.t0;
  const first = Math.min(...calls.map(([, c]) => c.asked ?? c.start ?? now));
  const last = Math.max(first + 1, ...calls.map(([, c]) => c.end ?? now));
  const span = last - first;
  const W = 640, left = 170, row = 22, H = calls.length * row + 24;
  const x = (t) => left + ((t - first) / span) * (W - left - 10);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'presentation' });
  calls.forEach(([id, c], i) => {
    const y = 6 + i * row;
    chart.append(svg('text', { x: 4, y: y + 13, 'font-size': 11 }, `${c.name} ${id}`.slice(0, 28)));
    if (c.asked !== null && c.asked !== undefined) {
      const until = c.start ?? now;
      chart.append(svg('rect', { x: x(c.asked), y: y + 4, width: Math.max(2, x(until) - x(c.asked)), height: 7, fill: '#aab2c0', class: 'wait' },
        svg('title', {}, `${c.name} waited ${Math.round(until - c.asked)} ms for approval`)));
    }
    for (const [n, a] of (c.attempts || []).entries()) {
      chart.append(svg('rect', { x: x(a.start), y, width: Math.max(2, x(a.end) - x(a.start)), height: 15, rx: 2, class: 'attempt',
        fill: '#e8a09a' }, svg('title', {}, `${c.name}: attempt ${n + 1} failed after ${Math.round(a.end - a.start)} ms`)));
    }
    if (c.start !== null) {
      const start = c.attemptStart ?? c.start;
      const end = c.end ?? now;
      if (c.start !== start) {
        chart.append(svg('rect', { x: x(start), y, width: Math.max(2, x(Math.max(start, end)) - x(start)), height: 15, rx: 2, class: 'run',
          fill: c.end === null ? '#9a6400' : c.error ? '#b3261e' : '#1c7a3e' }, svg('title', {}, `${c.name}: last attempt ${Math.round(end - start)} ms`)));
        return;
      }
      chart.append(svg('rect', { x: x(c.start), y, width: Math.max(2, x(end) - x(c.start)), height: 15, rx: 2, class: 'run',
        fill: c.end === null ? '#9a6400' : c.error ? '#b3261e' : '#1c7a3e' }, svg('title', {}, `${c.name}: ${Math.round(end - c.start)} ms`)));
    }
  });
  chart.append(svg('text', { x: W - 6, y: H - 4, 'font-size': 10, 'text-anchor': 'end' }, `${Math.round(span)} ms`));
  box.replaceChildren(chart);
  box.setAttribute('aria-label', `Tool calls over time: ${calls.map(([, c]) => `${c.name} ${c.start === null ? 'waiting for approval' : c.end === null ? 'running' : `${Math.round(c.end - c.start)} ms`}`).join(', ')}`);
}

async function follow(body) {
  const epoch = run.epoch;
  try {
    await stream(body, (name, data) => onRunEvent(epoch, name, data));
  } catch (e) {
    if (epoch === run.epoch) $('run-error').textContent = `The run stream failed: ${e.message}`;
  }
  refreshSessions().catch(() => {});
}

async function openRun(sessionId) {
  selectTab('runs');
  resetRun(sessionId);
  try {
    const t = await api(`/api/chat/${encodeURIComponent(sessionId)}`);
    setStatus(t.status);
    showTrace(t.trace_url, t.trace_id);
    if (t.status === 'running') {
      // The service replays the run's events so far; shown once they say where the run began.
      run.earlier = t.messages || [];
      follow({ session_id: sessionId });
    } else {
      for (const m of t.messages || []) message(m);
    }
    await showDecisions(sessionId);
  } catch (e) {
    $('run-error').textContent = `Cannot open the session: ${e.message}`;
  }
}

$('new-run').addEventListener('submit', (event) => {
  event.preventDefault();
  const session = $('new-run-session').value.trim();
  const input = $('new-run-input').value;
  resetRun(session || null);
  addEvent('user', el('pre', {}, input));
  $('new-run-input').value = '';
  follow(session ? { session_id: session, input } : { input });
});

$('run-send').addEventListener('submit', (event) => {
  event.preventDefault();
  if (!run.session) return;
  const input = $('run-input').value;
  run.epoch += 1;
  run.text = null;
  addEvent('user', el('pre', {}, input));
  $('run-input').value = '';
  follow({ session_id: run.session, input });
});

$('run-cancel').addEventListener('click', async () => {
  if (!run.session) return;
  try {
    await api('/api/chat/cancel', { method: 'POST', body: { session_id: run.session } });
  } catch (e) {
    $('run-error').textContent = `Not cancelled: ${e.message}`;
  }
});

// ---------------------------------------------------------------- tools

function typeOf(schema, depth = 0) {
  if (!schema || typeof schema !== 'object' || depth > 4) return 'any';
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  if (schema.type) return schema.type === 'array' && schema.items && schema.items.type ? `array of ${schema.items.type}` : schema.type;
  if (schema.enum) return 'enum';
  if (typeof schema.$ref === 'string') return schema.$ref.split('/').pop();
  // `Option<T>` is `T | null`; any other union names its branches.
  const union = schema.anyOf || schema.oneOf;
  if (Array.isArray(union)) return union.map((b) => typeOf(b, depth + 1)).join(' | ');
  return 'any';
}

function constraints(schema) {
  const out = [];
  for (const k of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minLength', 'maxLength', 'pattern', 'format', 'minItems', 'maxItems']) {
    if (schema && schema[k] !== undefined) out.push(`${k} ${schema[k]}`);
  }
  if (schema && schema.enum) out.push(`one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`);
  if (schema && schema.default !== undefined) out.push(`default ${JSON.stringify(schema.default)}`);
  return out.join('; ');
}

function schemaTable(parameters) {
  const props = (parameters && parameters.properties) || {};
  const required = new Set((parameters && parameters.required) || []);
  const names = Object.keys(props);
  if (names.length === 0) return el('p', { class: 'note' }, 'No arguments.');
  return el('table', { class: 'schema' },
    el('thead', {}, el('tr', {}, ['Argument', 'Type', 'Required', 'Description', 'Constraints'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, names.map((n) => el('tr', {},
      el('td', {}, n), el('td', {}, typeOf(props[n])), el('td', {}, required.has(n) ? 'yes' : 'no'),
      el('td', {}, props[n].description || ''), el('td', {}, constraints(props[n]))))));
}

/**
 * A form generated from the tool's schema (schema-form.js) that sends the
 * arguments to POST /api/tools/{name}/call and shows what the model would
 * read, and a rich result's parts.
 */
// The blob: URLs of the images each tool form shows, revoked on sign-out.
const formImages = [];

function tryForm(tool) {
  const form = el('form', { class: 'try', 'aria-label': `Try ${tool.name}` });
  const fields = schemaForm(tool.parameters);
  const output = el('pre', { class: 'try-output', 'aria-live': 'polite' });
  const parts = el('div', { class: 'try-parts' });
  const images = [];
  formImages.push(images);
  const error = el('p', { class: 'error', role: 'alert' });
  // A direct call has nobody to ask: a call that asks for approval here is
  // denied, and the person at the console is told why before and after.
  const gated = tool.approval && tool.approval !== 'never';
  const askNote = gated ? el('p', { class: 'note approval-note' },
    `${tool.name} can ask for approval (${tool.approval.replace('_', ' ')}). A call from this form that asks waits for your decision: approve or deny it here when it appears (or under Approvals); undecided, it is denied when the service's approval timeout passes.`) : null;
  // The pending approval of this form's call, decided here.
  const decision = el('div', { class: 'try-approval', 'aria-live': 'polite' });
  // The call's latest progress message, and the button that cancels it
  // (DELETE /api/tools/calls/{id}) while it runs.
  const progress = el('p', { class: 'note try-progress', 'aria-live': 'polite' });
  const cancel = el('button', { type: 'button', class: 'deny', disabled: '' }, 'Cancel call');
  let running = null;
  cancel.addEventListener('click', async () => {
    if (!running) return;
    cancel.disabled = true;
    await api(`/api/tools/calls/${encodeURIComponent(running)}`, { method: 'DELETE' })
      .catch((e) => { error.textContent = `Not cancelled: ${e.message}`; });
  });
  const actions = el('div', { class: 'actions' }, el('button', { type: 'submit' }, `Call ${tool.name}`), cancel);
  form.append(fields.element, askNote, actions, progress, decision, error, output, parts);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    let args;
    try {
      args = fields.read();
    } catch (e) {
      error.textContent = e.message;
      return;
    }
    // While a gated call is in flight, its approval (a direct call's, of
    // this tool, asked after it was sent) is shown here with its buttons.
    let watching = null;
    if (gated) {
      // In the service's clock (its `now_ms`), not this browser's.
      const sentAt = Date.now();
      watching = setInterval(async () => {
        if (decision.childElementCount) return;
        const { approvals, now_ms: now } = await api('/api/approvals').catch(() => ({ approvals: [], now_ms: Date.now() }));
        const since = sentAt + (now - Date.now()) - 1000;
        const mine = approvals.find((a) => a.session_id.startsWith('direct-') && a.tool === tool.name && a.asked_ms >= since);
        if (!mine) return;
        const buttons = ['approve', 'deny'].map((d) => {
          const b = el('button', { type: 'button', class: d }, `${d === 'approve' ? 'Approve' : 'Deny'} this call`);
          b.addEventListener('click', async () => {
            for (const x of buttons) x.disabled = true;
            await decide(mine.session_id, mine.call_id, d, false).catch((e) => { error.textContent = `Not decided: ${e.message}`; });
          });
          return b;
        });
        decision.replaceChildren(el('p', {}, `${tool.name} waits for your approval:`), argumentsView(mine.arguments, `Arguments of ${mine.call_id}`), el('div', { class: 'actions' }, buttons));
      }, 1000);
    }
    // The call streams: its progress shows as it comes, and it is named so
    // that the Cancel button can reach it.
    const id = `try-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const extraHeaders = { 'x-lovia-call-id': id, ...(gated ? { 'x-lovia-approval': 'wait' } : {}) };
    running = id;
    cancel.disabled = false;
    progress.textContent = '';
    try {
      let r = null;
      await stream(args, (name, data) => {
        if (name === 'tool_progress') progress.textContent = data.message;
        else if (name === 'tool_result') r = data;
        else if (name === 'error') throw new ApiError(data.status, data.error);
      }, { path: `/api/tools/${encodeURIComponent(tool.name)}/call`, extraHeaders });
      if (!r) throw new ApiError(0, 'the call ended without a result');
      output.textContent = r.output;
      output.classList.toggle('is-error', r.is_error);
      revoke(images);
      parts.replaceChildren(...(Array.isArray(r.parts) ? [partsView(r.parts, images)] : []));
      if (r.is_error) error.textContent = `Error result${r.error_kind ? ` (${r.error_kind})` : ''}`;
      if (gated && r.output === `Tool ${tool.name} was not approved.`) {
        error.textContent = 'Denied: this call asked for approval and was denied (or its wait timed out).';
      }
    } catch (e) {
      error.textContent = `Call refused: ${e.message}`;
    } finally {
      if (watching) clearInterval(watching);
      decision.replaceChildren();
      running = null;
      cancel.disabled = true;
    }
  });
  return form;
}

function bytes(n) {
  return n >= 1 << 20 ? `${Math.round(n / (1 << 20))} MiB` : n >= 1024 ? `${Math.round(n / 1024)} KiB` : `${n} B`;
}

async function loadTools() {
  try {
    const tools = await api('/api/tools/detailed');
    $('tools').replaceChildren(...tools.map((t) => {
      const hints = Object.entries(t.hints || {}).filter(([, v]) => v).map(([k]) => el('span', { class: 'badge' }, k.replace('_', ' ')));
      if (t.approval && t.approval !== 'never') hints.push(el('span', { class: 'badge warn' }, `approval: ${t.approval.replace('_', ' ')}`));
      if (!t.parallel) hints.push(el('span', { class: 'badge warn' }, 'barrier'));
      const p = t.plugin;
      const meta = el('dl', { class: 'meta' },
        el('dt', {}, 'Plugin'), el('dd', {}, p ? `${p.name} ${p.version}` : '(host tool)'),
        el('dt', {}, 'Digest'), el('dd', { class: 'digest' }, p ? p.digest : '—'),
        el('dt', {}, 'Timeout'), el('dd', {}, t.timeout_ms ? `${t.timeout_ms} ms` : `none declared${p ? ` (wall clock ${p.limits.max_wall_clock_ms} ms)` : ''}`),
        el('dt', {}, 'Retries'), el('dd', {}, String(t.retries ?? 0)),
        el('dt', {}, 'Limits'), el('dd', {}, p ? `memory ${bytes(p.limits.memory_bytes)}, result ${bytes(p.limits.result_bytes)}${p.limits.fuel ? `, fuel ${p.limits.fuel}` : ''}` : '—'),
        // As `lovia inspect` says them.
        el('dt', {}, 'Grants'), el('dd', {}, p ? (p.granted && p.granted.length ? p.granted.join('; ') : 'nothing') : '—'));
      return el('article', { class: 'card tool', 'data-tool': t.name, 'aria-labelledby': `tool-${t.name}` },
        el('h3', { id: `tool-${t.name}` }, t.name),
        el('p', {}, hints),
        el('p', { class: 'description' }, t.description),
        meta,
        el('h4', {}, 'Arguments'),
        schemaTable(t.parameters),
        el('details', {}, el('summary', {}, 'JSON Schema'), el('pre', {}, JSON.stringify(t.parameters, null, 2))),
        t.output_schema ? el('details', {}, el('summary', {}, 'Result schema'), el('pre', {}, JSON.stringify(t.output_schema, null, 2))) : null,
        t.direct === false
          ? el('p', { class: 'note' }, `${t.name} has no direct call: it asks the person in a chat, who answers under Approvals.`)
          : el('details', {}, el('summary', {}, `Try ${t.name}`), tryForm(t)));
    }));
  } catch (e) {
    if (e.status !== 401) $('tools-error').textContent = `Cannot list the tools: ${e.message}`;
  }
}

// ---------------------------------------------------------------- metrics

function barChart(entries, { width = 640, color = '#2456c8', label = (k) => k } = {}) {
  const H = 24 * Math.max(1, entries.length) + 10;
  const max = Math.max(1, ...entries.map(([, v]) => v));
  const chart = svg('svg', { viewBox: `0 0 ${width} ${H}`, role: 'img', 'aria-label': entries.map(([k, v]) => `${label(k)}: ${v}`).join(', ') || 'nothing yet' });
  if (entries.length === 0) chart.append(svg('text', { x: 8, y: 20, 'font-size': 12 }, 'nothing yet'));
  entries.forEach(([k, v], i) => {
    const y = 6 + i * 24;
    chart.append(svg('text', { x: 4, y: y + 13, 'font-size': 11 }, String(label(k)).slice(0, 24)));
    chart.append(svg('rect', { x: 160, y, height: 16, width: Math.max(1, (v / max) * (width - 220)), fill: color }));
    chart.append(svg('text', { x: 166 + (v / max) * (width - 220), y: y + 13, 'font-size': 11 }, String(v)));
  });
  return chart;
}

/** The service's calls per minute (`calls_per_minute.points`, oldest first) as a line, errors as a second one. */
function lineChart(points, { width = 640, height = 160 } = {}) {
  const latest = points.length ? points[points.length - 1] : { calls: 0, errors: 0 };
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `${latest.calls} calls and ${latest.errors} errors in the last minute; the highest ${Math.max(0, ...points.map((p) => p.calls))} over the last ${points.length > 1 ? Math.round((points[points.length - 1].at_ms - points[0].at_ms) / 60000) : 0} minutes` });
  const max = Math.max(1, ...points.map((p) => p.calls));
  const step = points.length > 1 ? (width - 50) / (points.length - 1) : 0;
  const line = (key) => points.map((p, i) => `${40 + i * step},${height - 20 - (p[key] / max) * (height - 40)}`).join(' ');
  chart.append(svg('line', { x1: 40, y1: height - 20, x2: width - 10, y2: height - 20, stroke: '#d8dce3' }));
  chart.append(svg('text', { x: 4, y: 24, 'font-size': 11 }, String(max)));
  chart.append(svg('text', { x: 4, y: height - 20, 'font-size': 11 }, '0'));
  if (points.length) {
    const minutes = Math.round((points[points.length - 1].at_ms - points[0].at_ms) / 60000);
    chart.append(svg('text', { x: 40, y: height - 4, 'font-size': 10 }, `${minutes} min ago`));
    chart.append(svg('text', { x: width - 10, y: height - 4, 'font-size': 10, 'text-anchor': 'end' }, 'now'));
    chart.append(svg('polyline', { points: line('calls'), fill: 'none', stroke: '#2456c8', 'stroke-width': 2, class: 'calls' }));
    chart.append(svg('polyline', { points: line('errors'), fill: 'none', stroke: '#b3261e', 'stroke-width': 1.5, 'stroke-dasharray': '4 3', class: 'errors' }));
  }
  return chart;
}

async function refreshMetrics() {
  const m = await api('/api/metrics');
  const calls = m.tools.reduce((n, t) => n + t.calls, 0);
  const errors = m.tools.reduce((n, t) => n + t.errors, 0);
  const rate = m.calls_per_minute;
  const totals = [['Calls', calls], ['Errors', errors], ['Calls in the last minute', rate.last_minute], ['In flight', m.in_flight], ['Pending approvals', m.pending_approvals],
    ['Runs completed', m.runs.completed || 0]];
  $('metrics-totals').replaceChildren(...totals.map(([k, v]) => el('div', {}, el('dt', {}, k), el('dd', { 'data-metric': k }, String(v)))));
  $('chart-rate').replaceChildren(lineChart(rate.points));
  // The tools' own error kinds (ToolError::kind) beside the executor's.
  const toolKinds = (m.tool_error_kinds || []).map((k) => [`${k.tool}: ${k.kind}`, k.count]);
  $('chart-errors').replaceChildren(barChart([...Object.entries(m.errors_by_kind), ...toolKinds], { color: '#b3261e' }));
  // The buckets are cumulative (Prometheus): each bar is the calls between its bound and the previous one.
  const bounds = m.tools.length ? m.tools[0].buckets.map((b) => b.le) : [];
  const cumulative = bounds.map((_, i) => m.tools.reduce((n, t) => n + t.buckets[i].count, 0));
  // The bounds are seconds (Prometheus's unit); people read calls in ms.
  const ms = (le) => (le < 1 ? `${Math.round(le * 1000)} ms` : `${le} s`);
  const perBucket = bounds.map((le, i) => [`≤ ${ms(le)}`, cumulative[i] - (i ? cumulative[i - 1] : 0)]);
  const top = bounds.length ? bounds[bounds.length - 1] : 10;
  perBucket.push([`> ${ms(top)}`, calls - (cumulative[cumulative.length - 1] || 0)]);
  $('chart-latency').replaceChildren(barChart(bounds.length ? perBucket : []));
  $('metrics-tools').replaceChildren(...m.tools.map((t) => el('tr', {},
    el('td', {}, t.tool), el('td', {}, String(t.calls)), el('td', {}, String(t.errors)),
    el('td', {}, t.calls ? `${((t.seconds_sum / t.calls) * 1000).toFixed(1)} ms` : '—'))));
  // The tenant's own audit trail; every field is text from the server,
  // set as text (a refusal quotes what the tenant sent).
  const trail = await api('/api/audit?limit=50');
  $('audit').replaceChildren(...trail.entries.map((e) => el('tr', { 'data-outcome': e.outcome === 'ok' ? 'ok' : 'refused' },
    el('td', {}, new Date(e.at_ms).toISOString().replace('T', ' ').slice(0, 19)),
    el('td', {}, e.action), el('td', {}, e.source),
    el('td', { title: e.digest || '' }, e.digest ? `sha256:${e.digest.slice(0, 12)}…` : '—'),
    el('td', {}, e.signer || 'unsigned'), el('td', {}, e.outcome))));
}

// ---------------------------------------------------------------- start

if (key) {
  api('/api/tools').then((tools) => showSignedIn(`${tools.length} tools`)).catch(() => {});
} else {
  $('api-key').focus();
}
