#!/usr/bin/env node
// End-to-end tests of the Cloudflare Worker on the real workerd runtime
// (`wrangler dev`, local Durable Objects and KV). Run by
// scripts/workerd-e2e.sh, which builds the bundles first:
//   build/      the deployed bundle (no test hooks)
//   build-e2e/  the same with `--features test-hooks` (served here)
//
// Every wrangler process is started in its own process group (detached =
// setsid) and stopped by killing that group; nothing is left running.
// Prints one line per test and `workerd e2e: N passed, N failed`.
// Lines starting with `figure:` are measurements, never assertions.

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CONFIG = 'tests/workerd/wrangler.toml';
const WORK = path.join(ROOT, '.wrangler', 'e2e');
const STATE = path.join(WORK, 'state');
const LOG = path.join(WORK, 'wrangler.log');
const CONFORMANCE_OUT = path.join(WORK, 'conformance');
const BIN = path.join(ROOT, 'node_modules', '.bin');
const SECRET = crypto.randomBytes(24).toString('hex');
const VERSION = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const CAPS = { elicitation: {}, extensions: { [TASKS]: {} } };
/// Generous bound for work that takes about a second.
const BOUND_MS = 15_000;

const CONFORMANCE_SCENARIOS = [
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-mrtr-input',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-required-task-error',
  'tasks-mrtr-composition',
];

// ---------------------------------------------------------------- processes

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Runs a command in its own process group; kills the group on timeout. */
function runGroup(cmd, args, { timeoutMs, env } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => {
      out += `\n[timed out after ${timeoutMs} ms]`;
      killGroup(child.pid, 'SIGKILL');
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out });
    });
  });
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

function groupAlive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

const running = new Set();

class Wrangler {
  constructor(vars = {}) {
    this.vars = vars;
  }

  async start() {
    // A free port can be taken by someone else before wrangler binds it:
    // try again on new ports.
    for (let attempt = 1; ; attempt++) {
      const offset = logSize();
      try {
        return await this.startOnce();
      } catch (e) {
        const inUse = logSince(offset).includes('Address already in use');
        await this.stop();
        if (!inUse || attempt >= 3) throw e;
      }
    }
  }

  async startOnce() {
    this.port = await freePort();
    this.inspector = await freePort();
    this.url = `http://127.0.0.1:${this.port}/mcp`;
    const args = [
      'dev', '--config', CONFIG, '--ip', '127.0.0.1', '--port', String(this.port),
      '--inspector-port', String(this.inspector), '--test-scheduled',
      '--persist-to', STATE, '--var', `MCP_STATE_SECRET:${SECRET}`,
    ];
    for (const [k, v] of Object.entries(this.vars)) args.push('--var', `${k}:${v}`);
    fs.appendFileSync(LOG, `\n===== wrangler dev ${JSON.stringify(this.vars)} on ${this.port} =====\n`);
    const fd = fs.openSync(LOG, 'a');
    this.child = spawn(path.join(BIN, 'wrangler'), args, {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
    fs.closeSync(fd);
    running.add(this);
    let exited = null;
    this.exit = new Promise((resolve) => this.child.on('exit', (code, sig) => {
      exited = { code, sig };
      resolve(exited);
    }));
    const started = Date.now();
    const deadline = started + 120_000;
    while (Date.now() < deadline) {
      if (exited) throw new Error(`wrangler dev exited early (${JSON.stringify(exited)}); see ${LOG}`);
      try {
        const r = await fetch(this.url, { method: 'GET', signal: AbortSignal.timeout(2_000) });
        await r.arrayBuffer();
        if (r.status === 405) {
          this.startupMs = Date.now() - started;
          return this;
        }
      } catch {
        /* not up yet */
      }
      await sleep(250);
    }
    throw new Error(`wrangler dev did not become ready in 120 s; see ${LOG}`);
  }

  async stop() {
    if (!this.child) return;
    const pid = this.child.pid;
    killGroup(pid, 'SIGTERM');
    const done = await Promise.race([this.exit, sleep(10_000).then(() => null)]);
    if (!done || groupAlive(pid)) {
      killGroup(pid, 'SIGKILL');
      await Promise.race([this.exit, sleep(5_000)]);
    }
    for (let i = 0; i < 50 && groupAlive(pid); i++) await sleep(100);
    running.delete(this);
    this.child = null;
  }
}

function logSize() {
  return fs.existsSync(LOG) ? fs.statSync(LOG).size : 0;
}

function logSince(offset) {
  const fd = fs.openSync(LOG, 'r');
  const size = fs.fstatSync(fd).size;
  const buf = Buffer.alloc(Math.max(0, size - offset));
  fs.readSync(fd, buf, 0, buf.length, offset);
  fs.closeSync(fd);
  return buf.toString('utf8');
}

/** JSON objects logged by the Worker (one per line) since `offset`. */
function loggedObjects(offset) {
  const out = [];
  for (const line of logSince(offset).split('\n')) {
    const start = line.indexOf('{');
    if (start < 0) continue;
    const end = line.lastIndexOf('}');
    try {
      out.push(JSON.parse(line.slice(start, end + 1)));
    } catch {
      /* not one of ours */
    }
  }
  return out;
}

// ---------------------------------------------------------------- client

let server; // the current Wrangler
let nextId = 1000;

function meta(caps = CAPS) {
  return {
    'io.modelcontextprotocol/protocolVersion': VERSION,
    'io.modelcontextprotocol/clientCapabilities': caps,
  };
}

/** The standard MCP headers a conforming client derives from the body. */
function standardHeaders(msg) {
  const h = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  const version = msg.params?._meta?.['io.modelcontextprotocol/protocolVersion'];
  if (version) h['mcp-protocol-version'] = version;
  if (msg.method) {
    h['mcp-method'] = msg.method;
    let name;
    if (msg.method === 'tools/call') name = msg.params?.name;
    if (['tasks/get', 'tasks/update', 'tasks/cancel'].includes(msg.method)) name = msg.params?.taskId;
    if (name) h['mcp-name'] = name;
  }
  return h;
}

async function post(msg, extraHeaders = {}) {
  const res = await fetch(server.url, {
    method: 'POST',
    headers: { ...standardHeaders(msg), ...extraHeaders },
    body: JSON.stringify(msg),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = { unparsed: text };
  }
  return { status: res.status, headers: res.headers, body };
}

async function call(method, params, caps = CAPS) {
  const msg = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: meta(caps) } };
  return post(msg);
}

async function startTask(tool, args) {
  const r = await call('tools/call', { name: tool, arguments: args });
  check(r.status === 200 && r.body?.result?.resultType === 'task',
    `${tool} did not create a task: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.result.taskId;
}

async function getTask(taskId) {
  const r = await call('tasks/get', { taskId });
  check(r.status === 200 && r.body?.result, `tasks/get failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.result;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** Polls tasks/get until `done(task)`; bounded, never a timing assertion. */
async function waitFor(taskId, done, what, boundMs = BOUND_MS) {
  const deadline = Date.now() + boundMs;
  let task;
  while (Date.now() < deadline) {
    task = await getTask(taskId);
    if (done(task)) return task;
    await sleep(50);
  }
  throw new Error(`task ${taskId} did not ${what} within ${boundMs} ms (last status ${task?.status})`);
}

async function hook(name, body) {
  const res = await fetch(server.url.replace(/\/mcp$/, `/__test/${name}`), {
    method: 'POST',
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const json = await res.json();
  check(res.status === 200, `hook ${name}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// ---------------------------------------------------------------- harness

class Failure extends Error {}

function check(cond, message) {
  if (!cond) throw new Failure(message);
}

function equal(actual, expected, what) {
  const a = JSON.stringify(sortKeys(actual));
  const e = JSON.stringify(sortKeys(expected));
  check(a === e, `${what}\n      expected ${e}\n      actual   ${a}`);
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  }
  return v;
}

const results = [];
const figures = [];

function figure(text) {
  figures.push(text);
  console.log(`figure: ${text}`);
}

/// E2E_ONLY=<regex> runs only the matching tests (for development; the
/// summary counts what ran).
const ONLY = process.env.E2E_ONLY ? new RegExp(process.env.E2E_ONLY) : null;

async function test(name, fn) {
  if (ONLY && !ONLY.test(name)) return;
  const started = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name} (${Date.now() - started} ms)\n      ${e instanceof Failure ? e.message : e.stack}`);
  }
}

// ---------------------------------------------------------------- tests

async function staticChecks() {
  await test('the deployed bundle has no test hooks; the e2e bundle has them', async () => {
    const deployed = fs.readFileSync(path.join(ROOT, 'build', 'index_bg.wasm'));
    const e2e = fs.readFileSync(path.join(ROOT, 'build-e2e', 'index_bg.wasm'));
    for (const marker of ['/__test/', 'alarm_delete', 'no such test hook']) {
      check(!deployed.includes(marker), `build/index_bg.wasm contains ${marker}`);
      check(e2e.includes(marker), `build-e2e/index_bg.wasm lacks ${marker} (the check would prove nothing)`);
    }
  });
}

async function httpEdges() {
  await test('bad input gets a JSON-RPC error with the right status, never a 500', async () => {
    const raw = (init, url = server.url) => fetch(url, { signal: AbortSignal.timeout(10_000), ...init });

    let r = await raw({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    let b = await r.json();
    check(r.status === 400 && b.error?.code === -32700 && b.id === null, `parse error: ${r.status} ${JSON.stringify(b)}`);

    r = await raw({ method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
    b = await r.json();
    check(r.status === 415 && b.error?.code === -32600, `wrong media type: ${r.status} ${JSON.stringify(b)}`);

    r = await raw({ method: 'GET' });
    await r.arrayBuffer();
    check(r.status === 405 && r.headers.get('allow') === 'POST', `GET: ${r.status} allow=${r.headers.get('allow')}`);

    r = await raw({ method: 'POST', body: '{}' }, server.url.replace(/\/mcp$/, '/elsewhere'));
    await r.arrayBuffer();
    check(r.status === 404, `other path: ${r.status}`);

    r = await raw({ method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(1024 * 1024 + 1) });
    b = await r.json();
    check(r.status === 413 && b.error?.code === -32600, `oversized body: ${r.status} ${JSON.stringify(b)}`);

    const unknown = await call('tasks/get', { taskId: 'tsk_does_not_exist' });
    check(unknown.status === 200 && unknown.body.error?.code === -32602, `unknown task: ${JSON.stringify(unknown.body)}`);

    const mismatch = await post(
      { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'greet', arguments: { name: 'x' }, _meta: meta() } },
      { 'mcp-name': 'not-greet' },
    );
    check(mismatch.status === 400 && mismatch.body.error?.code === -32020, `header mismatch: ${JSON.stringify(mismatch.body)}`);
  });

  await test('one structured log line per request, without input or credentials', async () => {
    const offset = logSize();
    const marker = `marker-${crypto.randomBytes(6).toString('hex')}`;
    const msg = {
      jsonrpc: '2.0', id: nextId++, method: 'tools/call',
      params: { name: 'slow_compute', arguments: { seconds: 1, label: marker }, _meta: meta() },
    };
    const r = await post(msg, { authorization: `Bearer token-${marker}` });
    check(r.body?.result?.taskId, `no task: ${JSON.stringify(r.body)}`);
    const taskId = r.body.result.taskId;
    const bad = await call('tasks/get', { taskId: `tsk_${marker}` });
    check(bad.body.error?.code === -32602, 'unknown task');
    await sleep(300); // the log is written by another process
    const lines = loggedObjects(offset).filter((o) => 'status' in o && 'method' in o);
    const created = lines.find((o) => o.method === 'tools/call' && o.task === taskId);
    check(created, `no log line for the tools/call (got ${JSON.stringify(lines)})`);
    equal(Object.keys(created).sort(),
      ['at', 'error', 'http', 'method', 'ms', 'status', 'store', 'subrequests', 'task', 'tool'], 'log line fields');
    check(created.tool === 'slow_compute' && created.status === 200 && created.error === null && created.http === 'POST'
      && Number.isInteger(created.ms) && created.subrequests === 1, `log line: ${JSON.stringify(created)}`);
    const failed = lines.find((o) => o.method === 'tasks/get' && o.error === -32602);
    check(failed && failed.status === 200 && failed.task === null, `failed tasks/get line: ${JSON.stringify(failed)}`);
    check(!logSince(offset).includes(marker), 'the log contains request input or the bearer token');
  });
}

async function storeContract(label) {
  await test(`store contract through the Worker's store (${label})`, async () => {
    const prefix = `contract-${label}-${crypto.randomBytes(4).toString('hex')}:`;
    const r = await hook('contract', { prefix });
    console.log(`      ${r.summary.split('\n').join('\n      ')}`);
    check(r.passed === 12 && r.failed === 0, `contract: ${JSON.stringify(r.failures)}`);
  });
}

function normalize(v, ids) {
  let s = JSON.stringify(v);
  for (const [actual, golden] of ids) s = s.split(actual).join(golden);
  s = s.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g, '<time>');
  return JSON.parse(s);
}

async function seedTranscript() {
  await test('seed transcript over HTTP, the alarm advancing the task, a real restart in the middle', async () => {
    const doc = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests/fixtures/seed_transcript.json'), 'utf8'));
    const ids = []; // [actual, golden]
    let taskId = null;
    for (const [i, step] of doc.steps.entries()) {
      if (step.restart) {
        await server.stop();
        await server.start();
        continue;
      }
      if (step.tick) {
        // The test does not tick: the shard's alarm does. Wait until the
        // step it stands for has been committed.
        const terminal = step.tick.finished > 0;
        await waitFor(taskId, (t) => (terminal ? TERMINAL.has(t.status) : t.status !== 'working'),
          terminal ? 'finish' : 'leave working');
        continue;
      }
      let request = step.request;
      for (const [actual, golden] of ids) request = JSON.parse(JSON.stringify(request).split(golden).join(actual));
      const r = await post(request);
      if (request.method === 'tools/call' && r.body?.result?.taskId) {
        taskId = r.body.result.taskId;
        ids.push([taskId, step.response.result.taskId]);
      }
      check(r.status === step.status, `step ${i} (${request.method}): status ${r.status}, expected ${step.status}`);
      equal(normalize(r.body, ids), normalize(step.response, []), `step ${i} (${request.method}) body`);
    }
  });
}

async function oneSecondStep() {
  await test('a 1-second step completes without anyone polling the server', async () => {
    const taskId = await startTask('slow_compute', { seconds: 1, label: 'timing' });
    const created = Date.parse((await getTask(taskId)).createdAt);
    // Sleep past the step, then look once: only the alarm can have moved it.
    await sleep(3_000);
    const t = await getTask(taskId);
    check(t.status === 'completed', `status after 3 s without polling: ${t.status}`);
    figure(`1-second slow_compute step committed ${Date.parse(t.lastUpdatedAt) - created} ms after creation (wrangler dev)`);
  });
}

async function restartMidTask() {
  await test('wrangler dev restarted in the middle of a task: the task survives and completes', async () => {
    const taskId = await startTask('slow_compute', { seconds: 3, label: 'survivor' });
    check((await getTask(taskId)).status === 'working', 'working before the restart');
    const stoppedAt = Date.now();
    await server.stop();
    await server.start();
    figure(`wrangler dev restart took ${Date.now() - stoppedAt} ms (startup ${server.startupMs} ms)`);
    const t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'complete after the restart', 30_000);
    check(t.status === 'completed', `status ${t.status}`);
    check(t.result.content[0].text === 'survivor: finished after 3 seconds.', `result ${JSON.stringify(t.result)}`);
  });
}

async function cronBackstop() {
  await test('a lost alarm: the cron sweep (GET /__scheduled) completes the task', async () => {
    const taskId = await startTask('slow_compute', { seconds: 1, label: 'swept' });
    let a = await hook('alarm', { taskId, action: 'get' });
    check(typeof a.reply.alarm === 'number', `the shard has no alarm after the create: ${JSON.stringify(a)}`);
    a = await hook('alarm', { taskId, action: 'delete' });
    a = await hook('alarm', { taskId, action: 'get' });
    check(a.reply.alarm === null, `alarm still set after delete: ${JSON.stringify(a)}`);
    await sleep(3_000);
    const before = await getTask(taskId);
    check(before.status === 'working', `without its alarm the task must not move, got ${before.status}`);

    const offset = logSize();
    const res = await fetch(server.url.replace(/\/mcp$/, '/__scheduled?cron=*+*+*+*+*'), { signal: AbortSignal.timeout(60_000) });
    await res.arrayBuffer();
    check(res.status === 200, `/__scheduled answered ${res.status}`);
    const t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'complete after the sweep');
    check(t.status === 'completed', `status ${t.status}`);
    await sleep(300);
    const cron = loggedObjects(offset).filter((o) => o.event === 'cron');
    check(cron.length === 1 && cron[0].finished >= 1 && cron[0].failed_shards === 0 && cron[0].shards === 16,
      `cron log: ${JSON.stringify(cron)}`);
    a = await hook('alarm', { taskId, action: 'get' });
    check(typeof a.reply.alarm === 'number', `the sweep did not set the alarm again: ${JSON.stringify(a)}`);
  });
}

/** Reads an SSE response, yielding each `data:` JSON message. */
async function* sseMessages(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (line.startsWith('data: ')) yield JSON.parse(line.slice(6));
      }
    }
  }
}

async function listen() {
  await test('subscriptions/listen streams SSE: acknowledgement, then snapshots until completed, then the result', async () => {
    const taskId = await startTask('slow_compute', { seconds: 3, label: 'listened' });
    const msg = {
      jsonrpc: '2.0', id: 'listen-e2e', method: 'subscriptions/listen',
      params: { notifications: { taskIds: [taskId] }, _meta: meta() },
    };
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { ...standardHeaders(msg), 'accept-encoding': 'gzip, deflate, br' },
      body: JSON.stringify(msg),
      signal: AbortSignal.timeout(30_000),
    });
    check(res.status === 200, `status ${res.status}`);
    check(res.headers.get('content-type') === 'text/event-stream', `content-type ${res.headers.get('content-type')}`);
    const messages = [];
    let statusAtAck = null;
    for await (const m of sseMessages(res)) {
      messages.push(m);
      if (messages.length === 1) statusAtAck = (await getTask(taskId)).status;
    }
    const ack = messages[0];
    check(ack?.method === 'notifications/subscriptions/acknowledged', `first message ${JSON.stringify(ack)}`);
    equal(ack.params.notifications, { taskIds: [taskId] }, 'acknowledged task ids');
    check(statusAtAck === 'working', `the acknowledgement arrived only after the task ${statusAtAck} (buffered stream?)`);
    const snapshots = messages.filter((m) => m.method === 'notifications/tasks');
    check(snapshots.every((s) => s.params.taskId === taskId && !('id' in s)), 'snapshots are notifications of our task');
    equal(snapshots.map((s) => s.params.status), ['working', 'completed'], 'snapshot statuses');
    check(snapshots[1].params.result.content[0].text === 'listened: finished after 3 seconds.', 'completed snapshot carries the result');
    const last = messages[messages.length - 1];
    check(last.id === 'listen-e2e' && last.result?.resultType === 'complete', `last message ${JSON.stringify(last)}`);
    check(messages.length === 4, `messages: ${messages.map((m) => m.method ?? 'result').join(', ')}`);
  });
}

async function conformance() {
  fs.mkdirSync(CONFORMANCE_OUT, { recursive: true });
  for (const scenario of CONFORMANCE_SCENARIOS) {
    await test(`conformance ${scenario}`, async () => {
      const r = await runGroup(path.join(BIN, 'conformance'),
        ['server', '--url', server.url, '--scenario', scenario, '-o', CONFORMANCE_OUT], { timeoutMs: 120_000 });
      const passed = r.out.match(/Passed: (\d+)\/(\d+), (\d+) failed, (\d+) warnings/);
      console.log(`      conformance: ${scenario}: ${passed ? `${passed[1]}/${passed[2]} checks passed, ${passed[4]} warnings` : 'no result line'}`);
      check(r.code === 0 && passed && passed[3] === '0',
        `exit ${r.code}\n${r.out.split('\n').filter((l) => /FAILURE|Error|failed|timed out/.test(l)).slice(0, 20).join('\n')}`);
    });
  }
}

async function latencyFigure() {
  const taskId = await startTask('slow_compute', { seconds: 1, label: 'latency' });
  await waitFor(taskId, (t) => TERMINAL.has(t.status), 'complete');
  for (let i = 0; i < 20; i++) await getTask(taskId); // warm up
  const times = [];
  for (let i = 0; i < 200; i++) {
    const t0 = process.hrtime.bigint();
    await getTask(taskId);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const q = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))].toFixed(2);
  figure(`tasks/get through wrangler dev (${server.vars.MCP_STORE ?? 'do'}), 200 sequential loopback requests: median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms`);
}

async function kvCache() {
  await test('KV mode: terminal records are cached (working ones never), with the task expiry', async () => {
    const taskId = await startTask('slow_compute', { seconds: 1, label: 'cached' });
    const working = await getTask(taskId);
    check(working.status === 'working', 'working at first');
    let cached = await hook('kv', { action: 'get', key: `task:${taskId}` });
    check(cached.value === null, `a working record was cached: ${cached.value}`);
    const done = await waitFor(taskId, (t) => TERMINAL.has(t.status), 'complete');
    check(done.status === 'completed', `status ${done.status}`);
    // The fill runs after the response (ctx.waitUntil).
    const deadline = Date.now() + BOUND_MS;
    while ((cached = await hook('kv', { action: 'get', key: `task:${taskId}` })).value === null && Date.now() < deadline) {
      await sleep(100);
    }
    check(cached.value !== null, 'the terminal record was never cached');
    const entry = JSON.parse(cached.value);
    const record = JSON.parse(entry.body);
    check(record.id === taskId && record.phase.status === 'completed' && Number.isInteger(entry.version),
      `cached entry ${cached.value.slice(0, 200)}`);
  });

  await test('KV mode: a cached terminal record is served without the Durable Object', async () => {
    const taskId = await startTask('slow_compute', { seconds: 1, label: 'from-kv' });
    const done = await waitFor(taskId, (t) => TERMINAL.has(t.status), 'complete');
    const deadline = Date.now() + BOUND_MS;
    let cached;
    while ((cached = await hook('kv', { action: 'get', key: `task:${taskId}` })).value === null && Date.now() < deadline) {
      await sleep(100);
    }
    check(cached.value !== null, 'not cached');
    const { version } = JSON.parse(cached.value);
    const del = await hook('shard', { op: 'delete', key: taskId, expected: version });
    equal(del.reply, 'deleted', 'delete in the shard');
    const gone = await hook('shard', { op: 'get', key: taskId });
    equal(gone.reply, { entry: null }, 'the shard no longer has it');
    const again = await getTask(taskId);
    equal(again, done, 'tasks/get from the cache equals the answer from the shard');
  });

  await test('KV mode: ownership and expiry are checked on cached records (foreign = unknown)', async () => {
    const taskId = await startTask('slow_compute', { seconds: 1, label: 'owned' });
    await waitFor(taskId, (t) => TERMINAL.has(t.status), 'complete');
    const deadline = Date.now() + BOUND_MS;
    let cached;
    while ((cached = await hook('kv', { action: 'get', key: `task:${taskId}` })).value === null && Date.now() < deadline) {
      await sleep(100);
    }
    check(cached.value !== null, 'not cached');
    const entry = JSON.parse(cached.value);
    const plant = async (id, edit) => {
      const record = JSON.parse(entry.body);
      record.id = id;
      edit(record);
      await hook('kv', { action: 'put', key: `task:${id}`, value: JSON.stringify({ ...entry, body: JSON.stringify(record) }) });
    };
    const foreign = `tsk_foreign${crypto.randomBytes(6).toString('hex')}`;
    await plant(foreign, (r) => (r.owner = { tenant: 'e2e', principal: 'someone-else' }));
    const expired = `tsk_expired${crypto.randomBytes(6).toString('hex')}`;
    await plant(expired, (r) => (r.created_at = r.created_at - r.ttl_ms - 1000));
    const unknown = await call('tasks/get', { taskId: 'tsk_never_existed' });
    for (const id of [foreign, expired]) {
      const r = await call('tasks/get', { taskId: id });
      check(r.status === 200, `status ${r.status}`);
      equal(r.body.error, unknown.body.error, `cached ${id} must answer like an unknown task`);
    }
  });
}

/// The KV-mode server runs with MCP_LISTEN_SUBREQUESTS = LISTEN_BUDGET.
const LISTEN_BUDGET = 12;

async function listenBudget() {
  await test(`a listen stream ends gracefully within its subrequest budget (${LISTEN_BUDGET})`, async () => {
    const taskId = await startTask('slow_compute', { seconds: 60, label: 'long' });
    const msg = {
      jsonrpc: '2.0', id: 77, method: 'subscriptions/listen',
      params: { notifications: { taskIds: [taskId] }, _meta: meta() },
    };
    const offset = logSize();
    const res = await fetch(server.url, {
      method: 'POST', headers: standardHeaders(msg), body: JSON.stringify(msg), signal: AbortSignal.timeout(30_000),
    });
    const messages = [];
    for await (const m of sseMessages(res)) messages.push(m);
    equal(messages.map((m) => m.method ?? `result ${m.result?.resultType}`),
      ['notifications/subscriptions/acknowledged', 'notifications/tasks', 'result complete'], 'stream');
    check(messages[2].id === 77, 'the listen result answers the request');
    check((await getTask(taskId)).status === 'working', 'the task is still running: the budget ended the stream');
    await sleep(300);
    const line = loggedObjects(offset).find((o) => o.method === 'subscriptions/listen');
    check(line && line.events === 3 && line.subrequests <= LISTEN_BUDGET && line.subrequests >= LISTEN_BUDGET - 4,
      `listen log line ${JSON.stringify(line)}`);
    await call('tasks/cancel', { taskId });
  });
}

// ---------------------------------------------------------------- main

async function main() {
  const started = Date.now();
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
  console.log(`workerd e2e: wrangler output in ${path.relative(ROOT, LOG)}`);

  await staticChecks();

  server = new Wrangler();
  await server.start();
  figure(`wrangler dev startup (fresh state) ${server.startupMs} ms`);
  await httpEdges();
  await storeContract('do');
  await seedTranscript();
  await oneSecondStep();
  await restartMidTask();
  await cronBackstop();
  await listen();
  await conformance();
  await latencyFigure();
  await server.stop();

  server = new Wrangler({ MCP_STORE: 'do+kv-cache', MCP_LISTEN_SUBREQUESTS: String(LISTEN_BUDGET) });
  await server.start();
  await storeContract('do+kv-cache');
  await kvCache();
  await listenBudget();
  await latencyFigure();
  await server.stop();

  const failed = results.filter((r) => !r.ok).length;
  figure(`workerd e2e wall time ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`workerd e2e: ${results.length - failed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

async function cleanup() {
  for (const w of [...running]) await w.stop();
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    await cleanup();
    process.exit(130);
  });
}

let code = 1;
try {
  code = await main();
} catch (e) {
  console.log(`workerd e2e: aborted: ${e.stack}`);
  const failed = results.filter((r) => !r.ok).length + 1;
  console.log(`workerd e2e: ${results.length - failed + 1} passed, ${failed} failed`);
} finally {
  await cleanup();
}
process.exit(code);
