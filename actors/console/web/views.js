// Rendering of the API's JSON into the page: the procedure list, a tree, a history as a
// timeline and a table, the locks, the task queues. Text goes in as text (textContent),
// never as markup.

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, String(v));
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs = {}, text) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

export function stateBadge(state) {
  return el('span', { class: `state ${state}`, 'data-state': state }, state);
}

export function ended(state) {
  return state === 'SUCCESS' || state === 'FAILED' || state === 'ROLLEDBACK';
}

export function humanMs(ms) {
  if (ms === null || ms === undefined) return '-';
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)}s`;
  if (ms < 3600000) return `${Math.floor(ms / 60000)}m${String(Math.floor(ms / 1000) % 60).padStart(2, '0')}s`;
  return `${Math.floor(ms / 3600000)}h${String(Math.floor(ms / 60000) % 60).padStart(2, '0')}m`;
}

function firstLine(text) {
  return (text || '').split('\n')[0];
}

// A name (STATE_NAME, demo.type) that may break after its '_' and '.' (<wbr>: the text
// copied stays the same).
function breakable(text) {
  const parts = String(text).split(/(?<=[_.])/);
  const out = el('span');
  parts.forEach((p, i) => { if (i > 0) out.append(el('wbr')); out.append(p); });
  return out;
}

// Free text in a table cell (an error, a key, a path): its width is bounded and its long
// words break anywhere, so that it neither widens the page nor starves the other columns.
function longText(text, cls = '', title = undefined) {
  return el('div', { class: `wrap ${cls}`, title }, text);
}

// `here`: the name of the node answering, whose own procedures the list does not name.
export function renderProcs(tbody, list, selected, pick, here) {
  tbody.replaceChildren(...list.map((p) => el('tr', {
    'data-id': p.id, 'data-state': p.state, class: p.id === selected ? 'selected' : '',
    onclick: () => pick(p.id),
  },
  el('td', {}, p.id),
  el('td', {}, p.type),
  el('td', {}, stateBadge(p.state)),
  el('td', { class: 'node-name' }, p.node || here || '-'),
  el('td', {}, longText(p.waiting_for)),
  el('td', {}, p.children.length || ''),
  el('td', {}, longText(firstLine(p.error), 'note', p.error || undefined)))));
}

function treeNode(n, selected, pick) {
  const pct = n.total > 0 ? Math.round((100 * n.done) / n.total) : 100;
  const fill = el('span');
  fill.style.width = `${pct}%`;  // CSSOM, allowed by the page's style-src 'self'
  const label = el('span', {
    class: `node${n.id === selected ? ' selected' : ''}`, 'data-id': n.id, 'data-state': n.state,
    title: n.error || '', onclick: (e) => { e.stopPropagation(); pick(n.id); },
  },
  el('b', {}, n.id), n.type, stateBadge(n.state),
  n.bypassed ? el('span', { class: 'meta' }, 'bypassed') : null,
  n.waiting_for ? el('span', { class: 'meta wrap' }, n.waiting_for) : null,
  n.total > 0 ? el('span', { class: 'progress', 'data-done': n.done, 'data-total': n.total },
    el('span', { class: 'bar' }, fill), ` ${n.done}/${n.total}`) : null,
  el('span', { class: 'meta' }, humanMs(n.duration_ms)),
  n.node ? el('span', { class: 'meta' }, `@${n.node}`) : null,
  n.error ? el('span', { class: 'meta error wrap' }, firstLine(n.error)) : null);
  const kids = (n.children || []).map((c) => treeNode(c, selected, pick));
  return el('li', {}, label, kids.length ? el('ul', {}, ...kids) : null);
}

export function renderTree(container, tree, selected, pick) {
  container.replaceChildren(el('ul', {}, treeNode(tree, selected, pick)));
}

// The width of `text` in the timeline's font (its CSS: 10px, the page's family).
let measurer = null;
function textWidth(text) {
  if (!measurer) {
    measurer = document.createElement('canvas').getContext('2d');
    measurer.font = `10px ${getComputedStyle(document.body).fontFamily || 'sans-serif'}`;
  }
  return measurer.measureText(text).width;
}

// Places each label in the first row, alternately above and below the axis, where it does
// not overlap the row's last label; a label that fits nowhere is left out (its entry keeps
// its tooltip). Returns [{x, row, above}] (null when left out) and the rows used.
function placeLabels(items, left, right, rows) {
  const ends = [];  // per slot: the right end of its last label
  const gap = 6;
  const placed = items.map(({ at, text }) => {
    const tw = textWidth(text);
    const x = Math.min(Math.max(at - tw / 2, left), right - tw);
    for (let slot = 0; slot < 2 * rows; ++slot) {
      if (ends[slot] === undefined || ends[slot] + gap <= x) {
        ends[slot] = x + tw;
        return { x, row: Math.floor(slot / 2), above: slot % 2 === 0 };
      }
    }
    return null;
  });
  const used = (above) => Math.max(0, ...placed.filter((p) => p && p.above === above).map((p) => p.row + 1));
  return { placed, above: used(true), below: used(false) };
}

// The history's entries on a time axis: a bar per step as long as its handler ran (at
// least a few pixels), a dot for the other kinds, labelled with their state (labels never
// overlap: rows are added above and below the axis, up to three each).
function timeline(entries) {
  const timed = entries.filter((e) => e.at_ms);
  if (timed.length === 0) return el('p', { class: 'note' }, 'no commit times recorded');
  const w = 720, left = 10, right = 10, rowH = 12;
  const t0 = Math.min(...timed.map((e) => e.at_ms - (e.took_us || 0) / 1000));
  const t1 = Math.max(...timed.map((e) => e.at_ms));
  const span = Math.max(1, t1 - t0);
  const x = (t) => left + ((t - t0) / span) * (w - left - right);
  const label = (e) => (e.kind === 'step' ? (e.state_name || String(e.state)) : e.kind);
  const lay = placeLabels(timed.map((e) => ({ at: x(e.at_ms), text: label(e) })), left, w - right, 3);
  // Marks span [axis-14, axis]; above-row k has its baseline at axis-18-k*rowH, below-row
  // k at axis+12+k*rowH; the start and span of the axis go on one more row below.
  const axis = lay.above > 0 ? 26 + (lay.above - 1) * rowH : 16;
  const foot = axis + 12 + lay.below * rowH + 2;
  const h = foot + 4;
  const s = svg('svg', { viewBox: `0 0 ${w} ${h}`, role: 'img', 'aria-label': 'history timeline' });
  s.append(svg('line', { class: 'axis', x1: left, x2: w - right, y1: axis, y2: axis }));
  timed.forEach((e, i) => {
    const end = x(e.at_ms);
    const g = svg('g', { class: 'entry', 'data-kind': e.kind, 'data-lsn': e.lsn });
    const tip = `${e.kind} ${e.state_name || ''} at ${e.at}` +
      (e.took_us ? `, took ${humanMs(e.took_us / 1000)}` : '');
    g.append(svg('title', {}, tip));
    if (e.kind === 'step') {
      const start = x(e.at_ms - (e.took_us || 0) / 1000);
      g.append(svg('rect', { class: 'step', x: Math.min(start, end - 3), y: axis - 14, width: Math.max(3, end - start), height: 12 }));
    } else {
      g.append(svg('circle', { class: `mark ${e.kind}`, cx: end, cy: axis - 8, r: 4 }));
    }
    const p = lay.placed[i];
    if (p) {
      const y = p.above ? axis - 18 - p.row * rowH : axis + 12 + p.row * rowH;
      g.append(svg('text', { x: p.x, y }, label(e)));
    }
    s.append(g);
  });
  s.append(svg('text', { class: 'foot', x: left, y: foot }, timed[0].at || ''));
  s.append(svg('text', { class: 'foot', x: w - right, y: foot, 'text-anchor': 'end' }, `+${humanMs(span)}`));
  return s;
}

function clock(e) {
  if (!e.at_ms) return '-';
  const d = new Date(e.at_ms);
  return d.toISOString().slice(11, 23);
}

export function renderHistory(timelineBox, tbody, note, history) {
  note.hidden = !history.note;
  note.textContent = history.note || '';
  timelineBox.replaceChildren(timeline(history.entries));
  tbody.replaceChildren(...history.entries.map((e) => {
    let what = e.state_name || (e.kind === 'step' ? String(e.state) : '');
    if (e.kind === 'step' && e.next_state_name) what += ` → ${e.next_state_name}`;
    const took = e.took_us ? (e.took_us < 1000 ? `${e.took_us}us` : humanMs(e.took_us / 1000)) : '-';
    return el('tr', { 'data-kind': e.kind, 'data-lsn': e.lsn },
      el('td', {}, e.lsn), el('td', {}, clock(e)), el('td', {}, e.kind), el('td', {}, breakable(what)),
      el('td', {}, e.attempt > 0 ? e.attempt : '-'), el('td', {}, took),
      el('td', {}, e.since_previous_ms === null ? '-' : humanMs(e.since_previous_ms)),
      el('td', {}, longText(firstLine(e.detail), 'note')));
  }));
}

export function renderLocks(tbody, none, locks, pick) {
  none.hidden = locks.length > 0;
  tbody.parentElement.hidden = locks.length === 0;
  tbody.replaceChildren(...locks.map((l) => el('tr', { 'data-held': l.held },
    el('td', {}, l.held ? 'held' : 'awaited'), el('td', {}, l.resource), el('td', {}, l.mode),
    el('td', {}, el('a', { href: `#proc=${l.proc_id}`, onclick: () => pick(l.proc_id) }, l.proc_id)),
    el('td', {}, l.root_id), el('td', {}, l.blocked_by))));
}

// "3s ago" (under a minute), "2m05s ago" (later) for a wall-clock time in ms since the
// epoch; the node's clock and the browser's may differ a little: never in the future.
function agoText(atMs, nowMs) {
  const age = Math.max(0, nowMs - atMs);
  return age < 60000 ? `${Math.floor(age / 1000)}s ago` : `${humanMs(age)} ago`;
}

// The task queues of external workers (docs/workers.md): what waits, what is leased, who
// polls, and the counts since the node started; each worker with the time of its last poll.
export function renderQueues(tbody, none, queues) {
  none.hidden = queues.length > 0;
  tbody.parentElement.hidden = queues.length === 0;
  const now = Date.now();
  tbody.replaceChildren(...queues.map((q) => {
    const workers = (q.workers || [])
      .map((w) => (w.last_poll_ms ? `${w.worker} ${agoText(w.last_poll_ms, now)}` : w.worker)).join(', ');
    return el('tr', { 'data-name': q.name, 'data-depth': q.depth },
      el('td', {}, breakable(q.name)), el('td', {}, q.depth), el('td', {}, q.leased),
      el('td', {}, q.pollers), el('td', {}, q.depth > 0 ? humanMs(q.oldest_age_ms) : '-'),
      el('td', {}, q.dispatched), el('td', {}, q.completed), el('td', {}, q.failed),
      el('td', {}, q.timed_out), el('td', {}, longText(workers || '-', 'note')));
  }));
}

// "20 per 1m" for a rate of 20 starts per 60,000 ms.
function perText(rate, perMs) {
  if (!rate) return '-';
  const units = [[3600000, 'h'], [60000, 'm'], [1000, 's']];
  const [size, unit] = units.find(([u]) => perMs % u === 0) || [1, 'ms'];
  return `${rate} per ${perMs / size}${unit}`;
}

// The types that have limits, or a step running or held back now (the others say nothing).
export function renderLimits(tbody, none, limits) {
  const shown = limits.filter((l) => l.max_running || l.rate || l.running || l.waiting);
  none.hidden = shown.length > 0;
  tbody.parentElement.hidden = shown.length === 0;
  tbody.replaceChildren(...shown.map((l) => el('tr', { 'data-type': l.type, 'data-waiting': l.waiting > 0 },
    el('td', {}, l.type), el('td', {}, l.max_running || '-'), el('td', {}, perText(l.rate, l.per_ms)),
    el('td', {}, l.source), el('td', {}, l.running), el('td', {}, l.waiting), el('td', {}, l.throttled))));
}

// Each schedule with its next fire time and its latest run (a link to the procedure); a
// paused one says so instead of a next time.
export function renderSchedules(tbody, none, schedules, pick) {
  none.hidden = schedules.length > 0;
  tbody.parentElement.hidden = schedules.length === 0;
  tbody.replaceChildren(...schedules.map((s) => {
    const last = s.runs.length ? s.runs[s.runs.length - 1] : null;
    const run = last
      ? el('span', {}, el('a', { href: `#proc=${last.id}`, onclick: () => pick(last.id) }, last.id), ' ',
        last.state ? stateBadge(last.state) : '')
      : '-';
    return el('tr', { 'data-name': s.name, 'data-paused': s.paused },
      el('td', {}, s.name), el('td', {}, `${s.cron} ${s.zone}`), el('td', {}, s.type),
      el('td', {}, s.paused ? 'paused' : (s.next_fire_at || '-')), el('td', {}, run),
      el('td', {}, s.fired), el('td', {}, s.skipped), el('td', {}, s.missed));
  }));
}

// A replica group as one line: "term 3, leader b1: b1 leader, b2 follower (lag 0), b3 (unreachable)".
function groupText(g) {
  if (!g) return '';
  const members = g.members.map((m) => {
    const role = m.role || (m.voter ? 'voter' : 'standby');
    const extra = [m.lag > 0 ? `lag ${m.lag}` : '', m.role !== 'leader' && !m.reachable ? 'unreachable' : '']
      .filter((x) => x).join(', ');
    return `${m.name} ${role}${extra ? ` (${extra})` : ''}`;
  });
  return `term ${g.term}, leader ${g.leader || '(election)'}: ${members.join(', ')}`;
}

// A node an operator forgot (`node forget`) is not down: it is gone, and says since when; a
// round trip is shown only for a peer that answered one.
export function renderNodes(tbody, nodes) {
  tbody.replaceChildren(...nodes.map((n) => {
    const forgotten = !n.up && n.forgotten;
    return el('tr', { 'data-up': n.up },
      el('td', {}, n.name + (n.self ? ' (this node)' : '')), el('td', {}, n.address || '-'),
      el('td', {}, n.up ? 'up' : forgotten ? 'forgotten' : 'down'),
      el('td', {}, (forgotten ? n.forgotten.at : n.since) || '-'),
      el('td', {}, n.self || !n.up || !n.rtt_us ? '-' : `${(n.rtt_us / 1000).toFixed(1)} ms`),
      el('td', {}, n.outbox), el('td', {}, n.live),
      el('td', { class: 'note' }, n.up ? groupText(n.replicas)
        : forgotten ? `forgotten by an operator (incarnation ${n.forgotten.incarnation}): its parts are lost`
          : n.reason));
  }));
}
