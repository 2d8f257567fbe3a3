// dtq web console: a hash-routed page on the HTTP API (docs/console.md).
// Every call carries the user's bearer token from sessionStorage; the API
// authenticates and authorises it, the console only displays the answers.
'use strict';

const TOKEN = 'dtq.token', NAMESPACE = 'dtq.namespace', QUEUE = 'dtq.queue';
const STATES = ['Pending', 'Queued', 'Running', 'Retrying', 'Succeeded', 'Failed', 'DeadLettered', 'Cancelled', 'Expired'];
const TERMINAL = ['Succeeded', 'Failed', 'DeadLettered', 'Cancelled', 'Expired'];
const FEED_ROWS = 500; // the live feed keeps the newest rows only

// ---- helpers ----

// h builds an element; text is always set as text, never parsed as HTML.
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids.flat()) {
    if (kid !== null && kid !== undefined && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

// table builds a table of rows under headers; add rows later to its
// tBodies[0].
function table(headers, rows) {
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map(x => h('th', {}, x)))), h('tbody', {}, rows));
}

// attempt shows a task's attempt of its maximum; a task that never started
// has made none.
function attempt(t, sep) { return (t.attempt || '-') + sep + t.max_attempts; }

function when(ts) { return ts ? new Date(ts).toLocaleString() : ''; }
function json(v) { return v === undefined || v === null ? '' : JSON.stringify(v, null, 2); }
function sleep(ms) { return new Promise(r => setTimeout(r, ms)); }
function ns() { return sessionStorage.getItem(NAMESPACE) || 'default'; }
function enc(s) { return encodeURIComponent(s); }
function queuesPath() { return '/api/v1/namespaces/' + enc(ns()) + '/queues'; }
function queuePath(q) { return queuesPath() + '/' + enc(q); }
function taskLink(q, id) { return h('a', { href: '#/task/' + enc(q) + '/' + enc(id) }, id); }

class APIError extends Error {
  constructor(status, body) {
    super(status + ' ' + (body && body.code ? body.code + ': ' + body.message : 'HTTP error'));
    this.status = status;
  }
}

function authHeaders() {
  const t = sessionStorage.getItem(TOKEN);
  return t ? { Authorization: 'Bearer ' + t } : {};
}

// api calls the HTTP API; a 401 ends the session and shows the login page.
async function api(method, path, body) {
  const opts = { method, headers: authHeaders() };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (res.status === 401) loggedOut('The API refused the token (401): log in again.');
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}

// stream reads an events stream (Server-Sent Events) with fetch, which,
// unlike EventSource, can send the Authorization header. It reconnects after
// a break or the stream's end (the API ends each after its maximum life), and
// after a 429, with Last-Event-ID, so no event is lost or repeated. It returns
// a function that stops it.
function stream(path, onEvent, onState) {
  const ctl = new AbortController();
  let last = '';
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        const headers = authHeaders();
        if (last) headers['Last-Event-ID'] = last;
        const res = await fetch(path, { headers, signal: ctl.signal, cache: 'no-store' });
        if (res.status === 401) { loggedOut('The API refused the token (401): log in again.'); return; }
        if (!res.ok) {
          let body = null;
          try { body = await res.json(); } catch (e) { body = null; }
          onState('error', new APIError(res.status, body).message);
          if (res.status < 500 && res.status !== 429) return;
        } else {
          onState('live');
          await readEvents(res.body, id => { last = id; }, onEvent);
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
        onState('error', String(e));
      }
      onState('reconnecting');
      await sleep(2000);
    }
  })();
  return () => ctl.abort();
}

// readEvents parses an SSE body: blank-line separated blocks of "id:" and
// "data:" lines; lines starting with ":" are comments (keep-alives).
async function readEvents(body, onID, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const v = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') onID(v);
        else if (field === 'data') data.push(v);
      }
      if (data.length) onEvent(JSON.parse(data.join('\n')));
    }
  }
}

// ---- routing ----

let cleanups = []; // what the current page stops when another one opens

function onLeave(f) { cleanups.push(f); }

// every runs f now and every ms until the page changes; errors show in box.
function every(ms, box, f) {
  const run = () => f().catch(e => box.replaceChildren(h('div', { class: 'error' }, e.message)));
  const timer = setInterval(run, ms);
  onLeave(() => clearInterval(timer));
  return run();
}

function route() {
  const [path, query] = location.hash.replace(/^#/, '').split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(query || '') };
}

function go(hash) {
  if (location.hash === hash) render(); else location.hash = hash;
}

function loggedOut(message) {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.setItem('dtq.message', message);
  go('#/login');
}

const pages = {
  login: loginPage,
  queues: queuesPage,
  queue: queuePage,
  tasks: tasksPage,
  task: taskPage,
  'dead-letters': deadLettersPage,
  workers: workersPage,
  schedules: schedulesPage,
  events: eventsPage,
};

async function render() {
  cleanups.forEach(f => f());
  cleanups = [];
  const { parts, params } = route();
  let name = parts[0] || 'queues';
  if (!sessionStorage.getItem(TOKEN) && name !== 'login') name = 'login';
  document.getElementById('nav').querySelectorAll('a').forEach(a =>
    a.classList.toggle('active', a.getAttribute('href') === '#/' + name));
  document.getElementById('namespace').value = ns();
  const view = h('div', { id: 'page-' + name });
  document.getElementById('main').replaceChildren(view);
  try {
    await (pages[name] || queuesPage)(view, parts.slice(1), params);
  } catch (e) {
    view.append(h('div', { class: 'error' }, e.message));
  }
}

// ---- pages ----

function loginPage(view) {
  const message = sessionStorage.getItem('dtq.message');
  sessionStorage.removeItem('dtq.message');
  const token = h('textarea', { id: 'token', placeholder: 'eyJhbGciOi...', required: true, spellcheck: 'false' });
  const nsInput = h('input', { id: 'login-namespace', value: ns(), required: true });
  const err = h('div');
  const form = h('form', { class: 'login', onsubmit: async ev => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN, token.value.trim());
    sessionStorage.setItem(NAMESPACE, nsInput.value.trim());
    try {
      await api('GET', queuesPath());
    } catch (e) {
      if (e.status !== 403) { // 403: a valid token that may not list queues here
        sessionStorage.removeItem(TOKEN);
        err.replaceChildren(h('div', { class: 'error' }, e.message));
        return;
      }
    }
    go('#/queues');
  } },
  h('h1', {}, 'Log in to the dtq API'),
  message && h('div', { class: 'error' }, message),
  err,
  h('p', {}, 'Paste a ServiceAccount token for the API\'s audience, e.g. ',
    h('code', {}, 'kubectl create token <serviceaccount> --audience dtq-api'),
    '. It is kept in this tab\'s session storage only. ',
    h('code', {}, 'kubectl dtq ui'), ' logs you in with your kubeconfig instead.'),
  h('p', {}, h('label', {}, 'Token', h('br'), token)),
  h('p', {}, h('label', {}, 'Namespace ', nsInput)),
  h('button', { id: 'login', type: 'submit' }, 'Log in'));
  view.append(form);
}

async function queuesPage(view) {
  const box = h('div');
  view.append(h('h1', {}, 'Queues in namespace ', ns()), box,
    h('p', { class: 'note' }, 'Depth counts every task of the queue\'s streams, in flight included. ' +
      'Queued of a queue with flow control says how many of them its limits hold back (throttled; the queue\'s page ' +
      'says which limits). Oldest: how long the oldest task not yet delivered has waited. Done/min: tasks that ended ' +
      '(any state) per minute between the last two refreshes. Refreshed every 5 s.'));
  // prev holds each queue's finished total and the time it was read, for
  // the throughput of the next refresh.
  const prev = new Map();
  const done = q => {
    const total = Object.values(q.finished || {}).reduce((a, b) => a + b, 0);
    const now = Date.now();
    const p = prev.get(q.queue);
    prev.set(q.queue, { total, now });
    return p && now > p.now ? ((total - p.total) * 60000 / (now - p.now)).toFixed(1) : '…';
  };
  const age = s => s < 1 ? '-' : s < 120 ? Math.round(s) + ' s' : s < 7200 ? Math.round(s / 60) + ' min' : Math.round(s / 3600) + ' h';
  const num = (field, v) => h('td', { class: 'num', 'data-field': field }, v);
  const toggle = q => h('button', { type: 'button', onclick: async () => {
    try {
      await api('POST', queuePath(q.queue) + (q.paused ? '/resume' : '/pause'));
      render();
    } catch (e) { box.prepend(h('div', { class: 'error' }, e.message)); }
  } }, q.paused ? 'Resume' : 'Pause');
  await every(5000, box, async () => {
    const list = await api('GET', queuesPath());
    box.replaceChildren(list.queues.length === 0 ? h('p', {}, 'No queues in this namespace.') :
      table(['Queue', 'State', 'Depth', 'Queued', 'Oldest', 'In flight', 'Scheduled', 'Done/min', 'Dead letters', 'Workers', ''],
        list.queues.map(q => h('tr', { 'data-queue': q.queue },
          h('td', {}, h('a', { href: '#/queue/' + enc(q.queue) }, q.queue)),
          h('td', { 'data-field': 'state', class: q.paused ? 'paused' : '' }, q.paused ? 'paused' : 'active'),
          num('depth', q.depth), queuedCell(q), num('oldest', age(q.oldest_queued_age_seconds)),
          num('in_flight', q.in_flight), num('scheduled', q.scheduled), num('done_per_minute', done(q)),
          h('td', { class: 'num', 'data-field': 'dead_lettered' }, h('a', { href: '#/dead-letters?queue=' + enc(q.queue) }, q.dead_lettered)),
          h('td', { class: 'num', 'data-field': 'workers' }, h('a', { href: '#/workers?queue=' + enc(q.queue) }, q.workers)),
          h('td', {}, toggle(q), ' ', h('a', { href: '#/tasks?queue=' + enc(q.queue) }, 'tasks'), ' ',
            h('a', { href: '#/events?queue=' + enc(q.queue) }, 'live events'))))));
  });
}

// queuedCell is a queue's queued count; with flow control, how many of them
// its limits hold back, the binding limits on hover.
function queuedCell(q) {
  const cell = h('td', { class: 'num', 'data-field': 'queued' }, q.queued);
  if (q.flow) {
    cell.append(h('span', { class: 'note', 'data-field': 'throttled', title: 'limited by ' + limits(q.flow) },
      ' (' + q.flow.throttled + ' throttled)'));
  }
  return cell;
}

// limits names the limits holding a flow-controlled queue's work back.
function limits(flow) { return flow.limited_by.length ? flow.limited_by.join(', ') : 'none'; }

// flowSection shows a flow-controlled queue's flow metrics and its busiest
// keys (GET .../flow).
function flowSection(flow) {
  const f = flow.flow;
  const keys = flow.keys.length === 0 ? h('p', { class: 'note', id: 'no-flow-keys' }, 'No key has work.') :
    table(['Flow key', 'Queued', 'Held', 'Concurrency', 'Weight', 'Parked', 'Eligible'],
      flow.keys.map(k => h('tr', { 'data-key': k.key },
        h('td', {}, k.key === '' ? h('span', { class: 'note' }, '(none)') : k.key),
        h('td', { class: 'num', 'data-field': 'queued' }, k.queued), h('td', { class: 'num', 'data-field': 'held' }, k.held),
        h('td', { class: 'num', 'data-field': 'concurrency' }, k.concurrency || '-'), h('td', { class: 'num', 'data-field': 'weight' }, k.weight),
        h('td', { 'data-field': 'parked', class: k.parked ? 'paused' : '' }, k.parked || ''),
        h('td', { 'data-field': 'eligible_at' }, when(k.eligible_at)))));
  return [h('h2', {}, 'Flow control'),
    h('p', { id: 'flow-summary' },
      h('span', { 'data-field': 'admissible' }, f.admissible), ' admissible · ',
      h('span', { 'data-field': 'throttled' }, f.throttled), ' throttled · ',
      h('span', { 'data-field': 'held' }, f.held), ' running (held slots) · ',
      h('span', { 'data-field': 'active_keys' }, f.active_keys), f.active_keys === 1 ? ' key with work, ' : ' keys with work, ',
      h('span', { 'data-field': 'parked_keys' }, f.parked_keys), ' parked · limited by ',
      h('b', { 'data-field': 'limited_by' }, limits(f)),
      f.mean_exec_seconds ? ' · mean execution ' + fmt(f.mean_exec_seconds * 1000) + ' ms' : ''),
    h('p', { class: 'note' }, 'Admissible: queued tasks the limits would start now; throttled: those a limit holds back. ' +
      'The busiest keys (most held slots, then the longest backlog, top 20); a key at its concurrency cap or over its ' +
      'rate is parked and steps aside for the others.'),
    keys];
}

// queuePage shows a queue's backlog now and its history as charts: depth,
// throughput and failures over the samples the manager keeps (GET
// .../history). Rates come from the totals of consecutive samples.
async function queuePage(view, [queue]) {
  const summary = h('p', { id: 'queue-summary' });
  const flowBox = h('div', { id: 'flow' });
  const charts = h('div', { class: 'charts' });
  view.append(h('h1', {}, 'Queue ', queue), summary, flowBox, charts,
    h('p', { class: 'note' }, 'The manager samples each queue every few seconds (--queue-history-interval, 10 s by default) ' +
      'and keeps the newest samples (--queue-history-samples, 360): the charts span them. Throughput and failures are per ' +
      'minute between two samples; a break in a line is a time without samples (no manager elected, say). Refreshed every 10 s.'));
  await every(10000, charts, async () => {
    const [st, hist] = await Promise.all([api('GET', queuePath(queue)), api('GET', queuePath(queue) + '/history')]);
    summary.replaceChildren(h('span', { class: st.paused ? 'paused' : '' }, st.paused ? 'paused' : 'active'),
      ' · depth ', st.depth, ' · queued ', st.queued, ' · in flight ', st.in_flight, ' · scheduled ', st.scheduled, ' · ',
      h('a', { href: '#/dead-letters?queue=' + enc(queue) }, st.dead_lettered + ' dead letters'), ' · ',
      h('a', { href: '#/workers?queue=' + enc(queue) }, st.workers + (st.workers === 1 ? ' worker' : ' workers')), ' · ',
      h('a', { href: '#/tasks?queue=' + enc(queue) }, 'tasks'), ' · ',
      h('a', { href: '#/events?queue=' + enc(queue) }, 'live events'));
    charts.replaceChildren(...queueCharts(hist.samples));
    flowBox.replaceChildren(...(st.flow ? flowSection(await api('GET', queuePath(queue) + '/flow?top=20')) : []));
  });
}

function queueCharts(samples) {
  const t = samples.map(s => Date.parse(s.time));
  const gauge = f => samples.map(f);
  // perMinute is the rate of a total between each sample and the one before
  // it; none for the first sample, after a gap, or when the total went down
  // (reset).
  const gap = gapAfter(t);
  const perMinute = f => samples.map((s, i) => {
    if (i === 0 || t[i] - t[i - 1] > gap) return null;
    const d = f(s) - f(samples[i - 1]);
    return d < 0 ? null : d * 60000 / (t[i] - t[i - 1]);
  });
  return [
    lineChart('depth', 'Depth', 'tasks', t, gap, [
      { name: 'queued', values: gauge(s => s.queued) },
      { name: 'in flight', values: gauge(s => s.in_flight) },
      { name: 'scheduled', values: gauge(s => s.scheduled) }]),
    lineChart('throughput', 'Throughput', 'tasks per minute', t, gap, [
      { name: 'submitted', values: perMinute(s => s.submitted) },
      { name: 'processed', values: perMinute(s => s.succeeded + s.failed) }]),
    lineChart('failures', 'Failures', 'per minute', t, gap, [
      { name: 'failed', values: perMinute(s => s.failed) },
      { name: 'retried', values: perMinute(s => s.retries) }]),
  ];
}

// gapAfter is the distance between two samples beyond which they are not
// joined: three times the usual (median) one.
function gapAfter(t) {
  const d = t.slice(1).map((x, i) => x - t[i]).sort((a, b) => a - b);
  return d.length ? 3 * d[Math.floor(d.length / 2)] : Infinity;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

// svgEl builds an SVG element (attributes only; presentation by console.css).
function svgEl(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const kid of kids.flat()) el.append(kid instanceof Node ? kid : String(kid));
  return el;
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten (at least 1).
function niceMax(v) {
  if (!(v > 1)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  return [1, 2, 5, 10].map(m => m * p).find(m => m >= v);
}

function fmt(v) { return v === null || v === undefined ? '-' : Number.isInteger(v) ? String(v) : v.toFixed(1); }
function clock(ms) { return new Date(ms).toLocaleTimeString(); }

// lineChart draws series (each {name, values} aligned with the times t) as
// an inline SVG line chart from 0 to a round maximum, a line broken where
// the samples are more than gap apart or a value is missing; the legend
// gives each series' newest and largest value.
function lineChart(id, title, unit, t, gap, series) {
  const W = 560, H = 170, L = 46, R = 12, T = 10, B = 24;
  const fig = h('figure', { class: 'chart chart-' + id, 'data-chart': id }, h('figcaption', {}, title, h('span', { class: 'note' }, ' (' + unit + ')')));
  const values = series.flatMap(x => x.values).filter(v => v !== null);
  if (t.length < 2 || values.length === 0) {
    fig.append(h('p', { class: 'note empty' }, 'Not enough samples yet.'));
    return fig;
  }
  const t0 = t[0], t1 = t[t.length - 1], ymax = niceMax(Math.max(...values));
  const x = ms => L + (W - L - R) * (ms - t0) / (t1 - t0);
  const y = v => T + (H - T - B) * (1 - v / ymax);
  const chart = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': title });
  for (const v of [0, ymax / 2, ymax]) {
    chart.append(svgEl('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }),
      svgEl('text', { class: 'axis', x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmt(v)));
  }
  [[t0, 'start'], [(t0 + t1) / 2, 'middle'], [t1, 'end']].forEach(([ms, anchor]) =>
    chart.append(svgEl('text', { class: 'axis', x: x(ms), y: H - 6, 'text-anchor': anchor }, clock(ms))));
  const legend = h('ul', { class: 'legend' });
  series.forEach((ser, i) => {
    let seg = [];
    const flush = () => {
      if (seg.length === 1) chart.append(svgEl('circle', { class: 'series series-' + i, cx: seg[0][0], cy: seg[0][1], r: 2 }));
      if (seg.length > 1) chart.append(svgEl('polyline', { class: 'series series-' + i, 'data-series': ser.name, points: seg.join(' ') }));
      seg = [];
    };
    ser.values.forEach((v, j) => {
      if (v === null || (j > 0 && t[j] - t[j - 1] > gap)) flush();
      if (v !== null) seg.push([x(t[j]).toFixed(1), y(v).toFixed(1)]);
    });
    flush();
    const known = ser.values.filter(v => v !== null);
    const latest = known.length ? known[known.length - 1] : null;
    const most = known.length ? Math.max(...known) : null;
    legend.append(h('li', { 'data-series': ser.name, 'data-latest': latest, 'data-max': most },
      h('span', { class: 'swatch series-' + i }), ser.name, ' ', h('b', {}, fmt(latest)), h('span', { class: 'note' }, ' (max ' + fmt(most) + ')')));
  });
  fig.append(chart, legend);
  return fig;
}

// queueField is the queue input of a page, with the namespace's queues as
// suggestions when the user may list them.
function queueField(params) {
  const current = params.get('queue') || sessionStorage.getItem(QUEUE) || 'default';
  const list = h('datalist', { id: 'queue-names' });
  api('GET', queuesPath()).then(ql => list.replaceChildren(...ql.queues.map(q => h('option', { value: q.queue }))), () => {});
  return h('label', {}, 'Queue', h('input', { name: 'queue', id: 'queue', value: current, list: 'queue-names', required: true }), list);
}

// queueForm is a page's search bar; submitting it moves to the page's hash
// with the form's fields as parameters (so the browser's back button works).
function queueForm(page, params, ...fields) {
  return h('form', { class: 'bar', onsubmit: ev => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(ev.target)) if (v) q.set(k, v);
    sessionStorage.setItem(QUEUE, q.get('queue'));
    go('#/' + page + '?' + q);
  } }, queueField(params), fields, h('button', { type: 'submit', id: 'search' }, 'Show'));
}

async function tasksPage(view, _, params) {
  const queue = params.get('queue');
  const stateSelect = h('select', { name: 'state', id: 'state' }, h('option', { value: '' }, 'any'),
    STATES.map(s => h('option', { value: s, selected: params.get('state') === s }, s)));
  view.append(h('h1', {}, 'Tasks'), queueForm('tasks', params,
    h('label', {}, 'Task ID', h('input', { name: 'id', id: 'task-id', value: params.get('id') || '' })),
    h('label', {}, 'Idempotency key', h('input', { name: 'key', id: 'idempotency-key', value: params.get('key') || '' })),
    h('label', {}, 'State', stateSelect)));
  if (!queue) return;
  if (params.get('id')) return go('#/task/' + enc(queue) + '/' + enc(params.get('id')));
  const q = new URLSearchParams({ limit: '50' });
  if (params.get('key')) q.set('idempotency_key', params.get('key'));
  else if (params.get('state')) q.set('status', params.get('state'));
  if (params.get('continue')) q.set('continue', params.get('continue'));
  const page = await api('GET', queuePath(queue) + '/tasks?' + q);
  if (page.tasks.length === 0) return view.append(h('p', { id: 'no-tasks' }, 'No task matches.'));
  view.append(table(['Task', 'Type', 'State', 'Attempt', 'Idempotency key', 'Created'],
    page.tasks.map(t => h('tr', { 'data-task': t.task_id },
      h('td', {}, taskLink(queue, t.task_id)), h('td', {}, t.task_type),
      h('td', { class: 'status-' + t.status }, t.status), h('td', { class: 'num', 'data-field': 'attempt' }, attempt(t, ' / ')),
      h('td', {}, t.idempotency_key || ''), h('td', {}, when(t.created_at))))));
  if (page.continue) {
    const next = new URLSearchParams(params);
    next.set('continue', page.continue);
    view.append(h('p', {}, h('a', { href: '#/tasks?' + next }, 'Next page')));
  }
}

async function taskPage(view, [queue, id]) {
  const t = await api('GET', queuePath(queue) + '/tasks/' + enc(id));
  const x = t.execution || {};
  const field = (k, v) => [h('dt', {}, k), h('dd', { 'data-field': k }, v)];
  const actions = h('p');
  if (!TERMINAL.includes(t.status)) {
    actions.append(h('button', { type: 'button', class: 'danger', onclick: async () => {
      try { await api('POST', queuePath(queue) + '/tasks/' + enc(id) + '/cancel'); } catch (e) {
        if (e.status !== 409) return actions.append(h('div', { class: 'error' }, e.message)); // 409: cancel requested
      }
      render();
    } }, 'Cancel task'));
  }
  const events = table(['Time', 'Event', 'Attempt', 'Progress'], []);
  events.id = 'timeline';
  const state = h('span', { class: 'note' });
  view.append(h('h1', {}, 'Task ', t.task_id),
    h('dl', { class: 'fields' },
      field('queue', t.namespace + '/' + t.queue), field('type', t.task_type),
      field('state', h('span', { class: 'status-' + t.status }, t.status)),
      field('attempt', attempt(t, ' of ') + (t.previous_attempts ? ' (' + t.previous_attempts + ' before its requeue)' : '')),
      field('idempotency key', t.idempotency_key || ''), field('priority', t.priority),
      field('flow key', t.flow_key || ''), field('wait reason', t.wait_reason || ''),
      field('created', when(t.created_at)), field('available', when(t.available_at)),
      field('started', when(x.started_at)), field('finished', when(x.finished_at)),
      field('duration', x.duration_ms !== undefined ? x.duration_ms + ' ms' : ''), field('worker', x.worker_id || ''),
      field('error', x.error_message ? (x.error_class ? x.error_class + ': ' : '') + x.error_message : ''),
      field('progress', x.progress !== undefined ? JSON.stringify(x.progress) + ' (' + when(x.progress_at) + ')' : '')),
    actions,
    h('h2', {}, 'Payload'), h('pre', { id: 'payload' }, t.payload !== undefined ? json(t.payload) : 'not kept (the API drops it once a task succeeded, was cancelled or expired)'),
    h('h2', {}, 'Result'), h('pre', { id: 'result' }, t.result !== undefined ? json(t.result) + (t.result_truncated ? '\n(truncated)' : '') : 'none'),
    h('h2', {}, 'Event timeline ', state),
    h('p', { class: 'note' }, 'From the oldest event the queue\'s stream keeps (about 10,000 per queue); new events appear live.'),
    events);
  onLeave(stream(queuePath(queue) + '/events?since=0&task_id=' + enc(id), ev => {
    events.tBodies[0].append(h('tr', { 'data-type': ev.type }, h('td', {}, when(ev.ts)), h('td', {}, ev.type), h('td', { class: 'num' }, ev.attempt || ''),
      h('td', {}, ev.progress !== undefined ? JSON.stringify(ev.progress) : '')));
  }, (s, msg) => { state.textContent = msg ? '(' + s + ': ' + msg + ')' : '(' + s + ')'; }));
}

async function deadLettersPage(view, _, params) {
  const queue = params.get('queue');
  view.append(h('h1', {}, 'Dead letters'), queueForm('dead-letters', params));
  if (!queue) return;
  const dl = queuePath(queue) + '/dead-letter';
  const notice = h('div', { id: 'notice' });
  const act = (label, path, cls, confirmText) => h('button', { type: 'button', class: cls, onclick: async () => {
    if (confirmText && !confirm(confirmText)) return;
    try {
      await api('POST', path);
      sessionStorage.setItem('dtq.notice', label + ' done');
      render();
    } catch (e) { notice.replaceChildren(h('div', { class: 'error' }, e.message)); }
  } }, label);
  const done = sessionStorage.getItem('dtq.notice');
  sessionStorage.removeItem('dtq.notice');
  if (done) notice.append(h('p', { class: 'note' }, done + '.'));
  const list = await api('GET', dl + '?limit=100');
  view.append(notice);
  if (list.entries.length === 0) return view.append(h('p', { id: 'no-dead-letters' }, 'No dead letters in ', queue, '.'));
  view.append(table(['Task', 'Type', 'Failed', 'Attempts', 'Last error', ''],
    list.entries.map(d => h('tr', { 'data-task': d.task_id },
      h('td', {}, taskLink(queue, d.task_id)), h('td', {}, d.task_type), h('td', {}, when(d.failed_at)),
      h('td', { class: 'num' }, d.attempts_made),
      h('td', {}, (d.last_error_class ? d.last_error_class + ': ' : '') + d.last_error),
      h('td', {}, act('Requeue', dl + '/' + enc(d.task_id) + '/requeue', 'requeue'), ' ',
        act('Discard', dl + '/' + enc(d.task_id) + '/discard', 'danger discard', 'Discard the dead letter of task ' + d.task_id + '? The task stays DeadLettered.'))))),
  h('p', {}, list.count + ' shown (newest first, at most 100). ',
    act('Purge all', dl + '/purge', 'danger', 'Purge every dead letter of ' + queue + '?')));
}

async function workersPage(view, _, params) {
  const queue = params.get('queue');
  view.append(h('h1', {}, 'Workers'), queueForm('workers', params));
  if (!queue) return;
  const box = h('div');
  view.append(box);
  await every(5000, box, async () => {
    const list = await api('GET', queuePath(queue) + '/workers');
    box.replaceChildren(list.workers.length === 0 ? h('p', {}, 'No live worker on ', queue, '.') :
      table(['Worker', 'Host', 'Status', 'In flight', 'Concurrency', 'Started', 'Last heartbeat'],
        list.workers.map(w => h('tr', { 'data-worker': w.worker_id },
          h('td', {}, w.worker_id), h('td', {}, w.hostname), h('td', {}, w.status),
          h('td', { class: 'num' }, w.in_flight), h('td', { class: 'num' }, w.concurrency),
          h('td', {}, when(w.started_at)), h('td', {}, when(w.last_heartbeat))))));
  });
}

// zoned shows an API time that carries its zone's offset (a schedule's next
// runs) as that zone's wall clock: "2027-01-01 09:00".
function zoned(ts) { return ts ? ts.slice(0, 16).replace('T', ' ') : ''; }

async function schedulesPage(view) {
  const box = h('div');
  view.append(h('h1', {}, 'Schedules in namespace ', ns()), box,
    h('p', { class: 'note' }, 'TaskSchedules (kubectl dtq schedule). Next runs: the next five slots in the ' +
      'schedule\'s time zone, as kubectl dtq schedule get shows them; while suspended, the slots that would ' +
      'run after a resume. Last run in this browser\'s time. Refreshed every 30 s.'));
  await every(30000, box, async () => {
    const list = await api('GET', '/api/v1/namespaces/' + enc(ns()) + '/schedules');
    box.replaceChildren(list.schedules.length === 0 ? h('p', { id: 'no-schedules' }, 'No schedules in this namespace.') :
      table(['Schedule', 'Cron', 'Time zone', 'State', 'Queue / type', 'Last run', 'Next runs', 'Active', 'Runs', 'Missed', 'Skipped'],
        list.schedules.map(s => h('tr', { 'data-schedule': s.name },
          h('td', {}, s.name), h('td', {}, h('code', {}, s.schedule)), h('td', { 'data-field': 'time_zone' }, s.time_zone),
          h('td', { 'data-field': 'state', class: s.suspended ? 'paused' : '' }, s.suspended ? 'suspended' : 'active'),
          h('td', {}, h('a', { href: '#/tasks?queue=' + enc(s.queue) }, s.queue), ' / ', s.task_type),
          h('td', { 'data-field': 'last_run' }, when(s.last_run_time) || 'never'),
          h('td', { 'data-field': 'next_runs' }, s.next_runs_error ||
            h('ol', { class: 'runs' }, s.next_runs.map(t => h('li', {}, zoned(t))))),
          h('td', { class: 'num', 'data-field': 'active' }, s.active), h('td', { class: 'num', 'data-field': 'runs' }, s.runs),
          h('td', { class: 'num', 'data-field': 'missed' }, s.missed_slots),
          h('td', { class: 'num', 'data-field': 'skipped', title: s.last_skip_reason || '' }, s.skipped_slots)))));
  });
}

function eventsPage(view, _, params) {
  const queue = params.get('queue');
  view.append(h('h1', {}, 'Live events'), queueForm('events', params));
  if (!queue) return;
  const state = h('span', { id: 'feed-state', class: 'note' });
  const feed = table(['Time', 'Event', 'Task', 'Attempt'], []);
  feed.id = 'feed';
  const rows = feed.tBodies[0];
  view.append(h('p', {}, 'Events of ', queue, ' from now on, newest first. ', state), feed);
  onLeave(stream(queuePath(queue) + '/events', ev => {
    rows.prepend(h('tr', { 'data-type': ev.type, 'data-task': ev.task_id || '' },
      h('td', {}, when(ev.ts)), h('td', { class: 'status-' + ev.type.replace(/^Task/, '') }, ev.type),
      h('td', {}, ev.task_id ? taskLink(queue, ev.task_id) : ''), h('td', { class: 'num' }, ev.attempt || '')));
    while (rows.children.length > FEED_ROWS) rows.lastChild.remove();
  }, (s, msg) => { state.textContent = s + (msg ? ': ' + msg : ''); state.dataset.state = s; }));
}

// ---- start ----

document.addEventListener('DOMContentLoaded', () => {
  // kubectl dtq ui opens /ui/#token=<its session secret>: keep it, then drop
  // it from the address bar and the history.
  const m = location.hash.match(/^#token=(.+)$/);
  if (m) {
    sessionStorage.setItem(TOKEN, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + '#/queues');
  }
  document.getElementById('namespace').addEventListener('change', ev => {
    sessionStorage.setItem(NAMESPACE, ev.target.value.trim() || 'default');
    render();
  });
  document.getElementById('logout').addEventListener('click', () => loggedOut('Logged out.'));
  window.addEventListener('hashchange', render);
  render();
});
