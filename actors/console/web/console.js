// Proctor's web console: polls the node's JSON API (docs/web-console.md) and draws it.
// Abort and bypass send the token typed at the top as "Authorization: Bearer TOKEN".
import { Chart, MetricsSeries } from './charts.js';
import {
  el, ended, renderHistory, renderLimits, renderLocks, renderNodes, renderProcs, renderQueues, renderSchedules,
  renderTree, stateBadge,
} from './views.js';

const POLL_MS = 2000;
const METRICS_MS = 1000;
const $ = (id) => document.getElementById(id);

const page = {
  readOnly: true,
  why: '',
  selected: null,  // the procedure shown in the detail panel
  state: null,     // its state, as last seen
  token: '',
  types: new Set(),
  offset: 0,       // the list's page: how many newer procedures it skips
  listAsked: 0,    // list requests made: only the last one's answer is drawn
  here: '',        // the name of the node answering (from /api/nodes)
  reveal: false,   // scroll the picked procedure into view once its tree is drawn
};

// One API call: {ok, status, body}; a node that cannot be reached is {ok:false, status:0}.
async function api(path, options = {}) {
  let res;
  try {
    res = await fetch(path, { cache: 'no-store', ...options });
  } catch (e) {
    return { ok: false, status: 0, body: { error: `cannot reach the console: ${e.message}` } };
  }
  let body = null;
  try {
    body = await res.json();
  } catch (e) {
    body = { error: `not JSON (HTTP ${res.status})` };
  }
  return { ok: res.ok, status: res.status, body, headers: res.headers };
}

function showError(text) {
  const bar = $('error-bar');
  bar.hidden = !text;
  bar.textContent = text || '';
}

function select(id) {
  if (id === page.selected) return;
  page.selected = id;
  page.state = null;
  page.reveal = true;
  history.replaceState(null, '', `#proc=${id}`);
  $('action-result').hidden = true;
  disarm();
  refreshDetail();
  refreshList();
}

function selectionFromHash() {
  const m = /^#proc=(\d+)$/.exec(location.hash);
  return m ? Number(m[1]) : null;
}

// -- the list --------------------------------------------------------------------------------
// Newest first, a page at a time (the API orders and cuts the list: docs/web-console.md).
async function refreshList() {
  const q = new URLSearchParams();
  if ($('f-state').value) q.set('state', $('f-state').value);
  if ($('f-type').value.trim()) q.set('type', $('f-type').value.trim());
  if ($('f-all').checked) q.set('all', 'true');
  const size = Number($('f-size').value);
  q.set('order', 'newest');
  q.set('offset', String(page.offset));
  q.set('limit', String(size));
  const asked = ++page.listAsked;
  const r = await api(`/api/procs?${q}`);
  if (asked !== page.listAsked) return true;  // a later one (another page, filter) is on its way
  const note = $('procs-note');
  if (!r.ok) {
    note.hidden = false;
    note.textContent = r.body.error;
    return r.status !== 0;
  }
  const missing = r.headers.get('X-Proctor-Unreachable');
  note.hidden = !missing;
  note.textContent = missing ? `not listed: ${missing}` : '';
  const total = Number(r.headers.get('X-Proctor-Total') ?? r.body.length);
  if (page.offset > 0 && page.offset >= total) {
    // The list shrank below the page shown (released trees, a filter): show its last page.
    page.offset = Math.max(0, Math.floor((total - 1) / size) * size);
    return refreshList();
  }
  $('page-info').textContent = total === 0 ? 'none'
    : `${page.offset + 1}–${page.offset + r.body.length} of ${total}`;
  $('page-newer').disabled = page.offset === 0;
  $('page-older').disabled = page.offset + r.body.length >= total;
  renderProcs($('procs').tBodies[0], r.body, page.selected, select, page.here);
  let added = false;
  for (const p of r.body) if (!page.types.has(p.type)) { page.types.add(p.type); added = true; }
  if (added) $('f-types').replaceChildren(...[...page.types].sort().map((t) => el('option', { value: t })));
  return true;
}

// -- one procedure: status, tree, history ------------------------------------------------------
async function refreshDetail() {
  const id = page.selected;
  $('sel-id').textContent = id === null ? '—' : String(id);
  $('detail-hint').hidden = id !== null;
  $('detail').hidden = id === null;
  if (id === null) return true;
  const [tree, hist] = await Promise.all([api(`/api/trees/${id}`), api(`/api/procs/${id}/history`)]);
  if (id !== page.selected) return true;  // another one was picked meanwhile
  if (tree.ok) {
    renderTree($('tree'), tree.body, id, select);
    if (page.reveal) {
      page.reveal = false;
      reveal($('tree').querySelector('.node.selected'));
    }
  } else $('tree').replaceChildren(el('p', { class: 'note' }, tree.body.error));
  if (hist.ok) {
    const s = hist.body.status;
    page.state = s.state;
    // FAILED with something to wait for: its rollback (or a retry forward past its point of
    // no return) is still under way, and an operator may still abort or bypass.
    page.rollingBack = s.state === 'FAILED' && !!s.waiting_for;
    $('status').replaceChildren(...[el('b', {}, s.type), stateBadge(s.state),
      s.waiting_for ? el('span', { class: 'note' }, `waiting for ${s.waiting_for}`) : null,
      s.error ? el('span', { class: 'note' }, `error: ${s.error.split('\n')[0]}`) : null,
      el('span', { class: 'note' }, `root ${s.root_id}`)].filter((x) => x));
    renderHistory($('timeline'), $('history-table').tBodies[0], $('history-note'), hist.body);
  } else {
    page.state = null;
    page.rollingBack = false;
    $('status').replaceChildren(el('span', { class: 'note' }, hist.body.error));
  }
  updateActions();
  return tree.status !== 0;
}

// Scrolls the picked procedure of the tree into view, unless it is in view already (the
// tree is scrolled on its own when it is taller than its box).
function reveal(node) {
  if (!node) return;
  const r = node.getBoundingClientRect();
  const box = $('tree').getBoundingClientRect();
  const top = Math.max(0, box.top), bottom = Math.min(window.innerHeight, box.bottom);
  if (r.top < top || r.bottom > bottom) node.scrollIntoView({ block: 'center', inline: 'nearest' });
}

// -- abort and bypass ----------------------------------------------------------------------------
let armed = null;  // {button, timer}: a first click arms, a second within 4 s acts

function disarm() {
  if (!armed) return;
  clearTimeout(armed.timer);
  armed.button.classList.remove('armed');
  armed.button.textContent = armed.label;
  armed = null;
}

function updateActions() {
  let why = '';
  if (page.readOnly) why = page.why;
  else if (page.state && ended(page.state) && !page.rollingBack) {
    why = `procedure ${page.selected} has ended`;
  }
  for (const b of [$('abort'), $('bypass')]) b.disabled = !!why;
  $('force').disabled = !!why;
  if (!why && !page.token) why = 'needs the token (field at the top)';
  $('actions-why').textContent = why;
}

async function act(button, what) {
  const id = page.selected;
  if (id === null) return;
  if (!armed || armed.button !== button) {
    disarm();
    armed = { button, label: button.textContent, timer: setTimeout(disarm, 4000) };
    button.classList.add('armed');
    button.textContent = `Really ${what} ${id}?`;
    return;
  }
  disarm();
  const headers = { 'Content-Type': 'application/json' };
  if (page.token) headers.Authorization = `Bearer ${page.token}`;
  const body = what === 'bypass' ? JSON.stringify({ force: $('force').checked }) : '{}';
  const r = await api(`/api/procs/${id}/${what}`, { method: 'POST', headers, body });
  const out = $('action-result');
  out.hidden = false;
  out.classList.toggle('error', !r.ok);
  out.dataset.status = String(r.status);
  out.textContent = r.ok
    ? (what === 'abort' ? `abort of ${id} accepted: its tree rolls back` : `procedure ${id} bypassed: ${r.body.state}`)
    : `${what} refused (HTTP ${r.status}): ${r.body.error}`;
  refreshDetail();
}

// -- locks, queues, limits, schedules and metrics -------------------------------------------
async function refreshLocks() {
  const r = await api('/api/locks');
  if (r.ok) renderLocks($('locks').tBodies[0], $('locks-none'), r.body, select);
  return r.status !== 0;
}

// GET /api/queues answers {"queues":[…]} (docs/workers.md).
async function refreshQueues() {
  const r = await api('/api/queues');
  if (r.ok) renderQueues($('queues').tBodies[0], $('queues-none'), r.body.queues || []);
  return r.status !== 0;
}

async function refreshLimits() {
  const r = await api('/api/limits');
  if (r.ok) renderLimits($('limits').tBodies[0], $('limits-none'), r.body);
  return r.status !== 0;
}

async function refreshSchedules() {
  const r = await api('/api/schedules');
  if (r.ok) renderSchedules($('schedules').tBodies[0], $('schedules-none'), r.body, select);
  return r.status !== 0;
}

async function refreshNodes() {
  const r = await api('/api/nodes');
  if (r.ok) {
    renderNodes($('nodes').tBodies[0], r.body);
    page.here = (r.body.find((n) => n.self) || {}).name || '';
  }
  return r.status !== 0;
}

const series = new MetricsSeries({
  steps: new Chart($('chart-steps'), { digits: 1 }),
  waiting: new Chart($('chart-waiting'), { color: '#b7791f' }),
  failures: new Chart($('chart-failures'), { color: '#c23b3b' }),
});

async function refreshMetrics() {
  const r = await api('/api/metrics');
  if (r.ok) {
    const v = series.add(r.body);
    $('v-steps').textContent = v.steps.toFixed(1);
    $('v-waiting').textContent = String(v.waiting);
    $('v-failures').textContent = String(v.failures);
  }
  return r.status !== 0;
}

// -- polling -------------------------------------------------------------------------------------
function every(ms, fn) {
  const tick = async () => {
    const reached = await fn();
    $('conn').textContent = reached ? `updated ${new Date().toISOString().slice(11, 19)}Z` : 'node unreachable';
    showError(reached ? '' : 'The console cannot reach the node; retrying.');
    setTimeout(tick, ms);
  };
  tick();
}

async function start() {
  const info = await api('/api/console');
  if (info.ok) {
    page.readOnly = info.body.read_only;
    page.why = info.body.why;
    $('f-state').append(...info.body.states.map((s) => el('option', { value: s }, s)));
  } else {
    page.why = info.body.error;
  }
  const note = $('readonly-note');
  note.hidden = !page.readOnly;
  note.textContent = page.why;
  $('token-form').hidden = page.readOnly;
  $('token').addEventListener('input', (e) => { page.token = e.target.value.trim(); updateActions(); });
  $('token-form').addEventListener('submit', (e) => e.preventDefault());
  $('filters').addEventListener('submit', (e) => e.preventDefault());
  const fromTop = () => { page.offset = 0; refreshList(); };
  for (const f of ['f-state', 'f-type', 'f-all', 'f-size']) $(f).addEventListener('change', fromTop);
  $('page-newer').addEventListener('click', () => {
    page.offset = Math.max(0, page.offset - Number($('f-size').value));
    refreshList();
  });
  $('page-older').addEventListener('click', () => {
    page.offset += Number($('f-size').value);
    refreshList();
  });
  $('abort').addEventListener('click', (e) => act(e.currentTarget, 'abort'));
  $('bypass').addEventListener('click', (e) => act(e.currentTarget, 'bypass'));
  window.addEventListener('hashchange', () => { const id = selectionFromHash(); if (id !== null) select(id); });
  page.selected = selectionFromHash();
  page.reveal = page.selected !== null;
  updateActions();
  every(POLL_MS, async () => {
    const [a, b, c] = await Promise.all([refreshList(), refreshDetail(), refreshLocks()]);
    return a && b && c;
  });
  every(METRICS_MS, refreshMetrics);
  every(METRICS_MS, refreshNodes);
  every(POLL_MS, refreshQueues);
  every(POLL_MS, refreshLimits);
  every(POLL_MS, refreshSchedules);
}

start();
