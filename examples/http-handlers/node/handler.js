// A dtq task handler in Node.js, no dependencies: the delivery sidecar POSTs
// each task to it on localhost (docs/http-handlers.md has the contract).
//
// Task types:
//   greet    {"name": "Ada"} -> {"greeting": "hello, Ada"}, after reporting
//            the progress {"step": "greeting"} (a TaskProgress event)
//   receipt  {"order": "42"} -> sends a receipt once per order, however often
//            the task is redelivered (the sidecar's idempotent operation)
// Every result carries the task's ID, attempt, idempotency key and flow key
// (the Dtq-Flow-Key header: "" for a task without one).
// Any type also honours "reject": "msg" (answer 400, dead letter) and
// "fail_first_attempt": true (answer 500 on attempt 1, retried).
'use strict';
const http = require('node:http');
const fs = require('node:fs');

const PORT = Number(process.env.PORT || 8000);
const SIDECAR = process.env.DTQ_SIDECAR_URL || 'http://127.0.0.1:8081';
const RECEIPT_LOG = process.env.RECEIPT_LOG || '';

// The sidecar's loopback API; token is the task's Dtq-Sidecar-Token.
async function sidecar(token, method, path, body) {
  const res = await fetch(SIDECAR + path, {
    method,
    headers: { 'Dtq-Sidecar-Token': token, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`sidecar ${path}: HTTP ${res.status}`);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

// progress reports a task's progress (JSON, at most 1 KiB): the task's events
// show it. Best effort: a report that fails must not fail the task.
async function progress(token, taskID, value) {
  try {
    await sidecar(token, 'POST', `/v1/tasks/${encodeURIComponent(taskID)}/progress`, value);
  } catch {
    // the sidecar restarting, or the task given up: the answer says the rest
  }
}

// idempotentOperation runs fn at most once per key among successful runs
// within the TTL; resolves to [executed, result]. While another holder runs
// it, it waits, but not past deadline (the task's, in ms since the epoch).
async function idempotentOperation(token, key, fn, deadline, ttlSeconds = 86400) {
  let claim;
  for (;;) {
    claim = await sidecar(token, 'POST', '/v1/operations/claim', { key });
    if (claim.state === 'done') return [false, claim.result];
    if (claim.state === 'acquired') break;
    const pause = Math.min(claim.retryAfterMs || 100, 1000);
    if (Date.now() + pause >= deadline) throw new Error(`operation ${key} still running elsewhere at the task's deadline`);
    await new Promise((r) => setTimeout(r, pause));
  }
  let result;
  try {
    result = await fn();
  } catch (err) {
    await sidecar(token, 'POST', '/v1/operations/release', { key, token: claim.token });
    throw err;
  }
  const done = await sidecar(token, 'POST', '/v1/operations/finish',
    { key, token: claim.token, result, ttlMs: ttlSeconds * 1000 });
  return [true, done.result];
}

// taskDeadline is the Dtq-Deadline header (RFC 3339, UTC) in ms since the
// epoch, to the second.
function taskDeadline(value) {
  return Date.parse(String(value).slice(0, 19) + 'Z');
}

function answer(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) });
  res.end(data);
}

async function handle(req, res, payload) {
  const taskID = req.headers['dtq-task-id'];
  const attempt = Number(req.headers['dtq-attempt']);
  const token = req.headers['dtq-sidecar-token'] || '';
  if (payload.reject) return answer(res, 400, { error: payload.reject });
  if (payload.fail_first_attempt && attempt === 1) return answer(res, 500, { error: 'failing attempt 1 on purpose' });
  const result = { task: taskID, attempt, idempotency_key: req.headers['idempotency-key'] || '',
    flow_key: req.headers['dtq-flow-key'] || '' };
  const type = req.headers['dtq-task-type'];
  if (type === 'greet') {
    await progress(token, taskID, { step: 'greeting' });
    result.greeting = `hello, ${payload.name || 'world'}`;
  } else if (type === 'receipt') {
    const order = String(payload.order || '');
    const [sentNow, receipt] = await idempotentOperation(token, `receipt:${order}`, async () => {
      if (RECEIPT_LOG) fs.appendFileSync(RECEIPT_LOG, JSON.stringify({ order, task: taskID, attempt }) + '\n');
      return { sent: order };
    }, taskDeadline(req.headers['dtq-deadline']));
    result.receipt = receipt;
    result.sent_now = sentNow;
  }
  return answer(res, 200, result);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') return answer(res, 200, { ok: true });
  if (req.method !== 'POST' || req.url !== '/tasks') return answer(res, 404, { error: `no route ${req.url}` });
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let payload;
    try {
      payload = JSON.parse(Buffer.concat(chunks).toString() || '{}');
    } catch {
      return answer(res, 400, { error: 'payload is not JSON' });
    }
    handle(req, res, payload).catch((err) => answer(res, 500, { error: String(err && err.message) }));
  });
});

// Finish the open requests on SIGTERM, take no new ones; kept-alive
// connections are closed as soon as they are idle.
process.on('SIGTERM', () => {
  server.close();
  setInterval(() => server.closeIdleConnections(), 200).unref();
});
server.listen(PORT, '127.0.0.1', () => console.error(`node handler listening on 127.0.0.1:${PORT}`));
