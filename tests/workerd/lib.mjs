// Shared by the workerd end-to-end tests (e2e.mjs) and the benchmark
// (bench.mjs): `wrangler dev` in its own process group, and a small MCP
// client that sets the standard headers from the body.

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const CONFIG = 'tests/workerd/wrangler.toml';
export const WORK = path.join(ROOT, '.wrangler', 'e2e');
export const STATE = path.join(WORK, 'state');
export const LOG = path.join(WORK, 'wrangler.log');
export const CONFORMANCE_OUT = path.join(WORK, 'conformance');
export const BIN = path.join(ROOT, 'node_modules', '.bin');
export const SECRET = crypto.randomBytes(32).toString('hex');
export const VERSION = '2026-07-28';
export const TASKS = 'io.modelcontextprotocol/tasks';
export const CAPS = { elicitation: {}, extensions: { [TASKS]: {} } };
/// Generous bound for work that takes about a second.
export const BOUND_MS = 15_000;

// ---------------------------------------------------------------- processes

export async function freePort() {
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
export function runGroup(cmd, args, { timeoutMs, env } = {}) {
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

export function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

export function groupAlive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

export const running = new Set();

export class Wrangler {
  /// `config`: the wrangler.toml to serve (the e2e Worker by default);
  /// `cwd`: where wrangler runs (its build command runs there).
  constructor(vars = {}, { config = CONFIG, cwd = ROOT } = {}) {
    this.vars = vars;
    this.config = config;
    this.cwd = cwd;
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
      'dev', '--config', this.config, '--ip', '127.0.0.1', '--port', String(this.port),
      '--inspector-port', String(this.inspector), '--test-scheduled',
      '--persist-to', STATE, '--var', `MCP_STATE_SECRET:${SECRET}`,
    ];
    // `vars` may depend on the port (a resource URL, say).
    const vars = typeof this.vars === 'function' ? this.vars(this.port) : this.vars;
    for (const [k, v] of Object.entries(vars)) args.push('--var', `${k}:${v}`);
    const shown = Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, /SECRET/.test(k) ? '(secret)' : v]));
    fs.appendFileSync(LOG, `\n===== wrangler dev ${JSON.stringify(shown)} on ${this.port} =====\n`);
    const fd = fs.openSync(LOG, 'a');
    this.child = spawn(path.join(BIN, 'wrangler'), args, {
      cwd: this.cwd,
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

export function logSize() {
  return fs.existsSync(LOG) ? fs.statSync(LOG).size : 0;
}

export function logSince(offset) {
  const fd = fs.openSync(LOG, 'r');
  const size = fs.fstatSync(fd).size;
  const buf = Buffer.alloc(Math.max(0, size - offset));
  fs.readSync(fd, buf, 0, buf.length, offset);
  fs.closeSync(fd);
  return buf.toString('utf8');
}

/** JSON objects logged by the Worker (one per line) since `offset`. */
export function loggedObjects(offset) {
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

/** The Wrangler the client talks to. */
export let server;
export function useServer(w) {
  server = w;
}
let nextId = 1000;
/** A fresh JSON-RPC request id. */
export function newId() {
  return nextId++;
}

export function meta(caps = CAPS) {
  return {
    'io.modelcontextprotocol/protocolVersion': VERSION,
    'io.modelcontextprotocol/clientCapabilities': caps,
  };
}

/** The standard MCP headers a conforming client derives from the body. */
export function standardHeaders(msg) {
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

export async function post(msg, extraHeaders = {}) {
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

export async function call(method, params, caps = CAPS) {
  const msg = { jsonrpc: '2.0', id: newId(), method, params: { ...params, _meta: meta(caps) } };
  return post(msg);
}

export async function startTask(tool, args) {
  const r = await call('tools/call', { name: tool, arguments: args });
  check(r.status === 200 && r.body?.result?.resultType === 'task',
    `${tool} did not create a task: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.result.taskId;
}

export async function getTask(taskId) {
  const r = await call('tasks/get', { taskId });
  check(r.status === 200 && r.body?.result, `tasks/get failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.result;
}

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** Polls tasks/get until `done(task)`; bounded, never a timing assertion. */
export async function waitFor(taskId, done, what, boundMs = BOUND_MS) {
  const deadline = Date.now() + boundMs;
  let task;
  while (Date.now() < deadline) {
    task = await getTask(taskId);
    if (done(task)) return task;
    await sleep(50);
  }
  throw new Error(`task ${taskId} did not ${what} within ${boundMs} ms (last status ${task?.status})`);
}

export async function hook(name, body) {
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

export class Failure extends Error {}

export function check(cond, message) {
  if (!cond) throw new Failure(message);
}

export function equal(actual, expected, what) {
  const a = JSON.stringify(sortKeys(actual));
  const e = JSON.stringify(sortKeys(expected));
  check(a === e, `${what}\n      expected ${e}\n      actual   ${a}`);
}

export function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  }
  return v;
}

