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

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  BIN,
  BOUND_MS,
  CONFIG,
  CONFORMANCE_OUT,
  Failure,
  LOG,
  ROOT,
  TERMINAL,
  WORK,
  Wrangler,
  call,
  check,
  equal,
  getTask,
  hook,
  logSince,
  logSize,
  loggedObjects,
  meta,
  newId,
  post,
  runGroup,
  running,
  server,
  standardHeaders,
  startTask,
  useServer,
  VERSION,
  waitFor,
} from './lib.mjs';

import { Upstream } from './upstream.mjs';
import { sdkChecks } from '../clients/legacy-sdk.mjs';

const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/// The conformance scenarios, grouped with the suite's arguments: the one
/// list both runtimes run (tests/conformance/scenarios.json).
const CONFORMANCE_GROUPS = JSON.parse(
  fs.readFileSync(path.join(ROOT, 'tests', 'conformance', 'scenarios.json'), 'utf8'),
).groups;

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

/// Sends `head` (and whatever body it carries) on a raw socket and reads
/// the answer.
const rawHead = (head) => rawBody(head, 0);

/// Sends `head`, then `size` bytes of body (chunked-encoded if `chunked`)
/// as fast as the socket takes them, and reads the answer.
async function rawBody(head, size, chunked = false) {
  const net = await import('node:net');
  const { hostname, port } = new URL(server.url);
  return await new Promise((resolve) => {
    const started = Date.now();
    let got = '';
    let finished = false;
    let stopped = false;
    const socket = net.connect({ host: hostname, port: Number(port) }, async () => {
      socket.write(head);
      const chunk = Buffer.alloc(1024 * 1024, 32);
      for (let sent = 0; sent < size && !finished && !stopped && !socket.destroyed; sent += chunk.length) {
        const frame = chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk;
        if (!socket.write(frame)) await new Promise((r) => socket.once('drain', r));
      }
      if (chunked && !finished && !stopped && !socket.destroyed) socket.write('0\r\n\r\n');
    });
    const done = () => {
      if (finished) return;
      finished = true;
      socket.destroy();
      resolve({ status: Number(got.split(' ')[1] ?? 0), text: got, ms: Date.now() - started });
    };
    socket.on('data', (d) => {
      got += d.toString('latin1');
      const [h, body = ''] = got.split('\r\n\r\n');
      const m = /content-length:\s*(\d+)/i.exec(h);
      if (got.includes('\r\n\r\n') && (!m || body.length >= Number(m[1]))) done();
    });
    // A server that answers before the body is all sent may reset the
    // connection under the writer: stop writing, and take what was
    // answered until the socket closes.
    socket.on('error', () => {
      stopped = true;
    });
    socket.on('close', () => setTimeout(done, 50));
    setTimeout(done, 30_000);
  });
}

async function httpEdges() {
  await test('a 100 MB body is refused from its head; insecure-local answers loopback hosts only', async () => {
    const { host } = new URL(server.url);
    const head = (extra = '', h = host) =>
      `POST /mcp HTTP/1.1\r\nhost: ${h}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n${extra}\r\n`;
    // `wrangler dev` buffers a request's body before the Worker runs, so
    // what shows here is that the Worker never copies it: its wasm memory
    // (which never shrinks) does not grow by the body.
    const memory = async () => (await hook('memory', {})).bytes;
    const before = await memory();
    const big = await rawBody(head('content-length: 104857600\r\n'), 100 * 1024 * 1024);
    check(big.status === 413 && big.text.includes('-32600'), `100 MB body: ${big.text}`);
    const after = await memory();
    check(after - before < 8 * 1024 * 1024, `wasm memory grew from ${before} to ${after} bytes`);
    figure(
      `workerd: a 100 MB body refused with 413 in ${big.ms} ms; the Worker's wasm memory ${before} -> ${after} bytes`,
    );
    // Without a length, the body is read as a stream and abandoned at the
    // limit. The Worker's own log line says what it answered. The local dev
    // proxy in front of it (miniflare's entry worker) sometimes loses that
    // answer when the Worker stops reading mid-stream: the client then sees
    // no answer, or the proxy's own text/plain 500 "Network connection lost".
    // Such a lost answer is tried again; any other answer must be 413, and
    // every attempt must be logged by the Worker as 413.
    let chunked;
    let lost = 0;
    for (let attempt = 0; attempt < 8; attempt++) {
      const offset = logSize();
      chunked = await rawBody(head('transfer-encoding: chunked\r\n'), 8 * 1024 * 1024, true);
      await sleep(300); // the log is written by another process
      const logged = loggedObjects(offset).filter((o) => 'status' in o && o.http === 'POST');
      check(logged.length === 1 && logged[0].status === 413, `chunked 8 MB: the Worker logged ${JSON.stringify(logged)}`);
      const proxyLost = chunked.status === 0
        || (chunked.status === 500 && /Network connection lost/.test(chunked.text) && /entry\.worker\.js/.test(chunked.text));
      if (!proxyLost) break;
      lost++;
    }
    check(chunked.status === 413 && chunked.text.includes('-32600'), `chunked 8 MB: ${chunked.text}`);
    figure(`workerd: a chunked 8 MB body refused with 413 in ${chunked.ms} ms (${lost} answers lost by the dev proxy first)`);
    const afterChunked = await memory();
    check(afterChunked - before < 8 * 1024 * 1024, `wasm memory grew from ${before} to ${afterChunked} bytes`);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: meta() } });
    const discover = (h) =>
      rawHead(
        head(
          `mcp-protocol-version: ${VERSION}\r\nmcp-method: server/discover\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n`,
          h,
        ) + body,
      );
    const ok = await discover(host);
    check(ok.status === 200, `loopback host: ${ok.text}`);
    for (const h of ['evil.example', 'mcp.example.com:8787', '10.1.2.3']) {
      const r = await discover(h);
      check(r.status === 403 && r.text.includes('loopback'), `Host ${h}: ${r.text}`);
    }
  });

  await test('the test-only Worker configuration cannot be deployed publicly', async () => {
    const toml = fs.readFileSync(path.join(ROOT, CONFIG), 'utf8');
    check(/^workers_dev\s*=\s*false\s*$/m.test(toml), 'tests/workerd/wrangler.toml must say workers_dev = false');
    check(/^preview_urls\s*=\s*false\s*$/m.test(toml), 'tests/workerd/wrangler.toml must say preview_urls = false');
    check(!/^\s*(route|routes)\s*=/m.test(toml), 'tests/workerd/wrangler.toml must have no routes');
    const deployed = fs.readFileSync(path.join(ROOT, 'wrangler.toml'), 'utf8');
    check(!/^\s*MCP_AUTH\s*=\s*"insecure-local"/m.test(deployed), 'the deployed wrangler.toml must not set insecure-local');
  });

  await test('bad input gets a JSON-RPC error with the right status, never a 500', async () => {
    const raw = (init, url = server.url) => fetch(url, { signal: AbortSignal.timeout(10_000), ...init });

    let r = await raw({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    let b = await r.json();
    check(r.status === 400 && b.error?.code === -32700 && !('id' in b), `parse error: ${r.status} ${JSON.stringify(b)}`);

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

    const unknown = await call('tasks/get', { taskId: 'tsk_does_not_existAAAAAAAA' });
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
      jsonrpc: '2.0', id: newId(), method: 'tools/call',
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
      ['at', 'auth', 'error', 'http', 'method', 'ms', 'status', 'store', 'subrequests', 'task', 'tool'], 'log line fields');
    check(created.tool === 'slow_compute' && created.status === 200 && created.error === null && created.http === 'POST'
      && Number.isInteger(created.ms) && created.subrequests >= 1, `log line: ${JSON.stringify(created)}`);
    const failed = lines.find((o) => o.method === 'tasks/get' && o.error === -32602);
    check(failed && failed.status === 200 && failed.task === null, `failed tasks/get line: ${JSON.stringify(failed)}`);
    check(!logSince(offset).includes(marker), 'the log contains request input or the bearer token');
  });
}

async function readmeWalkthrough() {
  await test('the README curl walkthrough works as written', async () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const block = readme.match(/<!-- walkthrough:begin -->\n```sh\n([\s\S]*?)```\n<!-- walkthrough:end -->/);
    check(block, 'README has no walkthrough block');
    const script = block[1].replace('MCP=http://127.0.0.1:8787/mcp', `MCP=${server.url}`);
    check(script !== block[1], 'the walkthrough does not set MCP=http://127.0.0.1:8787/mcp');
    // The walkthrough mints its token from the same local settings the
    // server runs with (make dev reads them from .dev.vars).
    const r = await runGroup('bash', ['-euo', 'pipefail', '-c', script], { timeoutMs: 60_000, env: jwtVars(server.port) });
    check(r.code === 0, `bash exited ${r.code}:\n${r.out}`);
    const messages = r.out.split('\n').map((l) => l.replace(/^data: /, '')).filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const byId = Object.fromEntries(messages.filter((m) => 'id' in m && !('method' in m)).map((m) => [m.id, m]));
    check(byId[1]?.result?.capabilities?.extensions?.[TASKS_EXTENSION], 'discover');
    check(byId[2]?.result?.resultType === 'task' && byId[2].result.status === 'working', `create: ${JSON.stringify(byId[2])}`);
    check(byId[3]?.result?.status === 'input_required' && byId[3].result.inputRequests?.approve_outline, `poll: ${JSON.stringify(byId[3])}`);
    equal(byId[4]?.result, { resultType: 'complete', _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mcp-tasks-edge', version: '0.1.0' } } }, 'update ack');
    check(byId[5]?.result?.status === 'completed'
      && byId[5].result.result.content[0].text === 'Generated large report with approved outline.', `result: ${JSON.stringify(byId[5])}`);
    const listen = messages.filter((m) => m.method || m.id === 6).map((m) => m.method ?? 'result');
    equal(listen, ['notifications/subscriptions/acknowledged', 'notifications/tasks', 'result'], 'listen stream');
  });
}

/// run_job against a job API on 127.0.0.1: the alarm advances it, steps
/// call the API with `fetch`, the test answers the input request.
async function outbound(upstream) {
  const confirm = (taskId) => call('tasks/update', {
    taskId, inputResponses: { confirm_result: { action: 'accept', content: { confirmed: true } } },
  });

  await test('run_job on workerd: submit, poll, confirm, complete against a local API', async () => {
    upstream.polls = 2;
    upstream.submits.push({ status: 500 }, { status: 429 });
    const before = upstream.seen.length;
    const taskId = await startTask('run_job', { input: 'e2e.csv' });
    let t = await waitFor(taskId, (x) => x.status !== 'working', 'ask for confirmation', 30_000);
    check(t.status === 'input_required' && t.inputRequests?.confirm_result, `status ${t.status}: ${JSON.stringify(t)}`);
    const r = await confirm(taskId);
    check(r.status === 200 && r.body?.result, `update: ${JSON.stringify(r.body)}`);
    t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'complete');
    check(t.status === 'completed', `status ${t.status}: ${JSON.stringify(t)}`);
    equal(t.result.structuredContent, { job: 'job-1', confirmed: true, result: { rows: 3 } }, 'result');
    const seen = upstream.seen.slice(before);
    const keys = seen.filter((s) => s.method === 'POST').map((s) => s.key);
    check(keys.length === 3 && keys.every((k) => k === keys[0] && k.startsWith('idem_')),
      `500, 429, then success with one key: ${JSON.stringify(keys)}`);
    check(seen.filter((s) => s.method === 'GET').length === 3, `polls: ${JSON.stringify(seen)}`);
    check(seen.every((s) => s.authorization === 'Bearer sk-e2e'), 'the API key reached the API');
  });

  await test('run_job on workerd: a redirect to another origin is not followed', async () => {
    upstream.submits.push({ redirect: true });
    const before = upstream.seen.length;
    const taskId = await startTask('run_job', { input: 'moved' });
    const t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'complete', 30_000);
    check(t.status === 'completed' && t.result?.isError === true
      && t.result.content?.[0]?.text === 'submit: the job API answered 307', `task: ${JSON.stringify(t)}`);
    const seen = upstream.seen.slice(before);
    equal(seen.map((s) => [s.method, s.path]), [['POST', '/api/jobs']], 'only the first request reached the API');
  });

  await test('outbound on workerd: an answer with no body (204, HEAD) is an empty body', async () => {
    let r = await hook('outbound', { method: 'DELETE', url: `${upstream.origin}/empty`, headers: [] });
    check(r.status === 204 && r.body === '', `204: ${JSON.stringify(r)}`);
    r = await hook('outbound', { method: 'HEAD', url: `${upstream.origin}/probe`, headers: [] });
    check(r.status === 404 && r.body === '', `HEAD: ${JSON.stringify(r)}`);
  });

  await test('outbound on workerd: the method, headers and body reach the API as the step gave them', async () => {
    const send = async (method, extra = {}) => {
      const before = upstream.seen.length;
      const r = await hook('outbound', { method, url: `${upstream.origin}/probe`, headers: [['x-probe', method]], ...extra });
      return { r, seen: upstream.seen.slice(before) };
    };
    // A method fetch knows no shorthand for is sent as it is, upper case
    // (as the component sends it), never turned into a GET.
    let { r, seen } = await send('propfind', { body: 'depth=1' });
    check(r.status === 404 && /not found/.test(r.body), `answer: ${JSON.stringify(r)}`);
    equal(seen.map(({ method, path, probe, body }) => ({ method, path, probe, body })),
      [{ method: 'PROPFIND', path: '/probe', probe: 'propfind', body: 'depth=1' }], 'what the API saw');
    ({ r, seen } = await send('patch', { body: '{"n":1}' }));
    equal(seen.map((s) => [s.method, s.body]), [['PATCH', '{"n":1}']], 'PATCH with its body');
    ({ r, seen } = await send('GET'));
    equal(seen.map((s) => [s.method, s.body, s.probe]), [['GET', '', 'GET']], 'GET without a body');
    // A method workerd does not know, and one that is not an HTTP token:
    // refused before anything is sent, with the platform's message alone.
    for (const method of ['FOO', 'BAD METHOD']) {
      ({ r, seen } = await send(method));
      check(/^outbound request failed: .*method/i.test(r.error) && !r.error.includes('\n'),
        `${method}: ${JSON.stringify(r)}`);
      equal(seen, [], `${method}: nothing reached the API`);
    }
  });
}

/// The same tool on a server whose allow-list does not name the API.
/// The server run with MCP_SERVER_NAME, MCP_SERVER_VERSION and
/// MCP_INSTRUCTIONS names itself so, on every result, the shard's included.
/// It serves the demo tools only (MCP_TOOLS=demo): no prompt, resource or
/// completion is advertised, and their methods are -32601.
async function serverIdentity() {
  await test('MCP_SERVER_NAME, MCP_SERVER_VERSION and MCP_INSTRUCTIONS name the server on workerd', async () => {
    const d = await call('server/discover', {});
    const info = { name: 'acme-reports', version: '2.1.0' };
    equal(d.body.result?._meta?.['io.modelcontextprotocol/serverInfo'], info, 'discover serverInfo');
    equal(d.body.result?.instructions, 'Call run_job with an input.', 'instructions');
    const taskId = await startTask('run_job', { input: 'named' });
    const t = await call('tasks/get', { taskId });
    equal(t.body.result?._meta?.['io.modelcontextprotocol/serverInfo'], info, 'tasks/get serverInfo');
  });
  await test('a server with only tools advertises no prompts, resources or completions on workerd', async () => {
    const d = await call('server/discover', {});
    equal(Object.keys(d.body.result?.capabilities ?? {}).sort(), ['extensions', 'tools'], 'capabilities');
    for (const method of ['prompts/list', 'resources/list', 'completion/complete']) {
      const r = await call(method, {});
      equal([r.status, r.body?.error?.code], [404, -32601], method);
    }
  });
}

async function outboundRefused(upstream) {
  await test('run_job on workerd: an origin off the allow-list is refused in the step', async () => {
    const before = upstream.seen.length;
    const offset = logSize();
    const taskId = await startTask('run_job', { input: 'x' });
    const t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'fail');
    check(t.status === 'failed' && /not on the allow-list/.test(t.error?.message), `task: ${JSON.stringify(t)}`);
    check(upstream.seen.length === before, 'nothing reached the API');
    await sleep(300);
    check(/outbound-refused/.test(logSince(offset)), 'the refusal is logged');
  });
}

/// The same tool on a server whose outbound body cap (8 bytes) is below
/// the API's answers.
async function outboundCapped(upstream) {
  await test('run_job on workerd: a response over MCP_OUTBOUND_MAX_BYTES is refused', async () => {
    const before = upstream.submitKeys().length;
    const taskId = await startTask('run_job', { input: 'capped' });
    const t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'fail', 30_000);
    check(t.status === 'failed' && /larger than 8 bytes/.test(t.error?.message), `task: ${JSON.stringify(t)}`);
    check(upstream.submitKeys().length - before === 2, 'one submit per attempt');
  });
}

/// A shard whose alarm may make one outbound request (MCP_TICK_SUBREQUESTS
/// 1, one shard): three run_job tasks due at once are stepped one per
/// invocation, the others held back to the next alarm, none with a request
/// refused by the platform's cap or an attempt lost.
async function tickSubrequests(upstream) {
  await test('run_job on workerd: a shard whose alarm may make one request holds tasks back to the next', async () => {
    const offset = logSize();
    upstream.polls = 0;
    const before = upstream.submitKeys().length;
    const tasks = await Promise.all(['a', 'b', 'c'].map((input) => startTask('run_job', { input })));
    for (const taskId of tasks) {
      const t = await waitFor(taskId, (x) => x.status !== 'working', 'ask for confirmation', 30_000);
      check(t.status === 'input_required', `status ${t.status}: ${JSON.stringify(t)}`);
    }
    const keys = upstream.submitKeys().slice(before);
    check(keys.length === 3 && new Set(keys).size === 3, `one submit per task: ${JSON.stringify(keys)}`);
    await sleep(300);
    const sweeps = loggedObjects(offset).filter((o) => o.event === 'sweep');
    check(sweeps.some((o) => o.held_back > 0), `a sweep held tasks back: ${JSON.stringify(sweeps)}`);
    check(sweeps.every((o) => o.stepped <= 1), `one step per invocation: ${JSON.stringify(sweeps)}`);
  });
}

/// The starter crate's own Worker (examples/starter/wrangler.toml), as a
/// user runs it: its tool checks a URL on 127.0.0.1, advanced by alarms.
async function starter(upstream) {
  await test('the starter Worker lists its tool and runs it to completion', async () => {
    const listed = await call('tools/list', {});
    equal(listed.body?.result?.tools?.map((t) => t.name), ['wait_for_url', 'check_urls'], 'tools');
    upstream.health.push(503, 503);
    const before = upstream.seen.length;
    const taskId = await startTask('wait_for_url', { url: `${upstream.origin}/health` });
    const t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'complete', 30_000);
    check(t.status === 'completed', `status ${t.status}: ${JSON.stringify(t)}`);
    check(t.result.structuredContent.checks === 3, `result ${JSON.stringify(t.result)}`);
    check(upstream.seen.length - before === 3, `checks seen: ${upstream.seen.length - before}`);
  });
  await test('python mcp 2.3.0 reads the starter Worker\'s resource, prompt, completion and progress', async () => {
    const venv = await runGroup('bash', ['scripts/clients-venv.sh'], { timeoutMs: 300_000 });
    check(venv.code === 0, `clients venv: ${venv.out}`);
    const python = venv.out.trim().split('\n').pop();
    const r = await runGroup(python, ['tests/clients/python_user.py', server.url], { timeoutMs: 120_000 });
    console.log(`      ${r.out.trim().split('\n').join('\n      ')}`);
    check(r.code === 0, `python user client exited ${r.code}`);
  });
}

async function storeContract(label) {
  await test(`store contract through the Worker's store (${label})`, async () => {
    const prefix = `contract-${label}-${crypto.randomBytes(4).toString('hex')}:`;
    const r = await hook('contract', { prefix });
    console.log(`      ${r.summary.split('\n').join('\n      ')}`);
    check(r.passed === 13 && r.failed === 0, `contract: ${JSON.stringify(r.failures)}`);
  });
}

// A delete is two statements in the shard (the version floor, then the
// row). With a trigger planted that refuses the floor's write, the delete
// must fail whole: the entry stays, and once it is deleted, a new entry of
// the key starts above the version deleted.
async function deleteFloorFirst() {
  await test('a delete whose floor write fails leaves the entry as it was', async () => {
    const key = `e2e_floor_${crypto.randomBytes(9).toString('base64url')}`;
    const shard = async (op) => (await hook('shard', op)).reply;
    check(typeof (await shard({ put: { key, expected: null, body: 'x', due_at: null } })).version === 'number', 'put');
    const { version } = (await shard({ get: { key } })).entry;
    const v = (await shard({ put: { key, expected: version, body: 'y', due_at: null } })).version;
    check(v === version + 1, `second put: ${v}`);
    for (const when of ['INSERT', 'UPDATE']) {
      const planted = await shard({ exec: { key, sql: `CREATE TRIGGER refuse_floor_${when.toLowerCase()} BEFORE ${when} ON floor BEGIN SELECT RAISE(ABORT, 'refused'); END` } });
      check(planted.version === 0, `trigger: ${JSON.stringify(planted)}`);
    }
    const refused = await shard({ delete: { key, expected: v } });
    check(typeof refused.unavailable === 'string', `delete with the floor refused: ${JSON.stringify(refused)}`);
    const kept = (await shard({ get: { key } })).entry;
    check(kept !== null && kept.version === v, `the entry after the refused delete: ${JSON.stringify(kept)}`);
    for (const when of ['insert', 'update']) await shard({ exec: { key, sql: `DROP TRIGGER refuse_floor_${when}` } });
    check((await shard({ delete: { key, expected: v } })) === 'deleted', 'delete');
    const again = (await shard({ put: { key, expected: null, body: 'z', due_at: null } })).version;
    check(again > v, `made again at version ${again}, deleted at ${v}`);
    check((await shard({ delete: { key, expected: again } })) === 'deleted', 'clean up');
  });
}

// A sweep whose store reads fail (the table renamed away under the shard)
// learns nothing of what is due next: it must set the alarm again soon,
// not drop it (which left the shard's work to the cron backstop).
async function sweepErrorRearms() {
  await test('an alarm whose sweep cannot read the store is set again, not dropped', async () => {
    const key = `e2e_alarm_${crypto.randomBytes(9).toString('base64url')}`;
    const shard = async (op) => (await hook('shard', op)).reply;
    const dueAt = Date.now() + 1_500;
    const { version } = await shard({ put: { key, expected: null, body: 'x', due_at: dueAt } });
    check(typeof version === 'number', 'put');
    const renamed = await shard({ exec: { key, sql: 'ALTER TABLE tasks RENAME TO tasks_away' } });
    check(renamed.version === 0, `rename: ${JSON.stringify(renamed)}`);
    let alarm;
    try {
      // The alarm fires at dueAt, and its sweep fails on the store.
      await sleep(Math.max(0, dueAt - Date.now()) + 2_500);
      alarm = (await hook('alarm', { taskId: key, action: 'get' })).reply.alarm;
    } finally {
      await shard({ exec: { key, sql: 'ALTER TABLE tasks_away RENAME TO tasks' } });
      await shard({ delete: { key, expected: version } });
    }
    check(typeof alarm === 'number', `the shard's alarm after a failing sweep: ${alarm}`);
  });
}

// tests/workerd/wrangler.toml sets E2E_NUMBER = 64 and E2E_BOOLEAN = true
// unquoted, so wrangler passes a number and a boolean: the settings read
// them as "64" and "true" would be read.
async function numericVar() {
  await test('a number or boolean in [vars] is read as its text', async () => {
    equal((await hook('var', { name: 'E2E_NUMBER' })).value, '64', 'a number');
    equal((await hook('var', { name: 'E2E_BOOLEAN' })).value, 'true', 'a boolean');
    equal((await hook('var', { name: 'MCP_TASK_SHARDS' })).value, '16', 'a string');
    equal((await hook('var', { name: 'E2E_ABSENT' })).value, null, 'absent');
  });
}

// tests/workerd/wrangler.toml declares a second shard class without
// SQLite storage (`new_classes`), as a deployment that forgot
// `new_sqlite_classes` would. workerd's `storage.sql` then throws on use,
// not on access, and its error (which the reply carries) names the fix.
async function classWithoutSql() {
  await test('a shard of a class without SQLite storage fails with a clear error, and the isolate serves on', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await hook('class', { binding: 'SHARDS_WITHOUT_SQL' });
      check(/new_sqlite_classes/.test(JSON.stringify(r.reply)), `reply ${i}: ${JSON.stringify(r)}`);
    }
    const taskId = await startTask('slow_compute', { seconds: 60, label: 'after the misconfigured class' });
    check((await getTask(taskId)).status === 'working', 'served on');
    await call('tasks/cancel', { taskId });
  });
}

async function jwtVectors() {
  await test('the shared JWS vectors pass with the Worker\'s WebCrypto verifier', async () => {
    const vectors = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests/vectors/jwt.json'), 'utf8'));
    const r = await hook('jwt', vectors);
    check(r.failures.length === 0, `vectors: ${JSON.stringify(r.failures)}`);
    equal(r.passed, vectors.cases.length, 'vectors passed');
    console.log(`      jwt vectors (webcrypto): ${r.passed} passed, ${r.failures.length} failed`);
    // The hook runs through the isolate's cache of verified tokens, which
    // outlives a request: a second run finds every accepted token there.
    const accepted = vectors.cases.filter((c) => c.expect.principal !== undefined).length;
    const again = await hook('jwt', vectors);
    check(again.failures.length === 0, `vectors, second run: ${JSON.stringify(again.failures)}`);
    check(accepted > 0, 'the vectors accept some tokens');
    equal(again.cachedAlready, accepted, 'accepted tokens kept across requests by the isolate');
  });
}

async function offCurveKey() {
  await test('an EC key that is no P-256 point: WebCrypto refuses it at import, its token is refused, the log says why in one line', async () => {
    const vectors = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests/vectors/jwt.json'), 'utf8'));
    // (1, 1) is not on P-256. The key set is read as it is on the Worker;
    // the component refuses such a key when it reads the key set.
    const one = Buffer.alloc(32);
    one[31] = 1;
    const kid = 'off-curve';
    const jwks = { keys: [{ kty: 'EC', crv: 'P-256', kid, x: one.toString('base64url'), y: one.toString('base64url') }] };
    const part = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const claims = { iss: vectors.issuer, aud: vectors.resource, sub: 'alice', exp: vectors.now / 1000 + 600 };
    const token = `${part({ alg: 'ES256', typ: 'JWT', kid })}.${part(claims)}.${Buffer.alloc(64, 1).toString('base64url')}`;
    const offset = logSize();
    const r = await hook('jwt', { ...vectors, jwks, cases: [{ name: 'off-curve key', token, expect: { refused: 'the key cannot be used' } }] });
    check(r.failures.length === 0, `off-curve key: ${JSON.stringify(r.failures)}`);
    equal(r.passed, 1, 'cases passed');
    await sleep(300);
    const line = loggedObjects(offset).find((o) => o.event === 'auth' && o.error === 'key import failed');
    check(line, 'the import failure is logged');
    check(typeof line.detail === 'string' && line.detail.length > 0 && !line.detail.includes('JsValue') && !line.detail.includes('\n'),
      `the log names the platform's message only: ${JSON.stringify(line.detail)}`);
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

// Every shard's version floor (tests/workerd/wrangler.toml: 16 shards).
// A key created on a shard starts one above the floor the shard had then.
async function floors() {
  const all = [];
  for (let shard = 0; shard < 16; shard++) all.push((await hook('floor', { shard })).reply.version);
  return all;
}

// Checks that the task's stored version stands for `writes` writes, given
// the shards' floors read before it was created. Should its shard delete a
// key meanwhile (its floor rising), the create's floor is known only to lie
// between the two readings.
async function storedWrites(taskId, before, writes, what) {
  const { shard, reply } = await hook('shard', { get: { key: taskId } });
  const after = (await hook('floor', { shard })).reply.version;
  const version = reply.entry.version;
  check(version - after <= writes && writes <= version - before[shard],
    `${what}: version ${version} on shard ${shard} (floor ${before[shard]} before the create, ${after} now), expected ${writes} writes`);
  return version - before[shard];
}

async function replayableSteps() {
  await test('a replayable step (generate_report) commits with one write; a claimed one (confirm_delete) with two', async () => {
    const before = await floors();
    const replayable = await startTask('generate_report', { size: 'small' });
    const claimed = await startTask('confirm_delete', { filename: 'f' });
    // The create is one write. A claimed step adds its lease and its
    // commit; a replayable one found due within 2 s only its commit.
    for (const [name, taskId, writes] of [['generate_report', replayable, 2], ['confirm_delete', claimed, 3]]) {
      const t = await waitFor(taskId, (x) => x.status === 'input_required', 'ask for input');
      const n = await storedWrites(taskId, before, writes, `${name} after the first step`);
      figure(`${name}: first step committed ${Date.parse(t.lastUpdatedAt) - Date.parse(t.createdAt)} ms after creation, ${n} writes stored`);
    }
  });
  await test('the answer that makes a replayable step due runs that step inside tasks/update', async () => {
    const before = await floors();
    const taskId = await startTask('generate_report', { size: 'small' });
    const t = await waitFor(taskId, (x) => x.status === 'input_required', 'ask for input');
    const key = Object.keys(t.inputRequests)[0];
    const r = await call('tasks/update', { taskId, inputResponses: { [key]: { action: 'accept', content: { approved: true } } } });
    check(r.status === 200 && r.body?.result?.resultType === 'complete', `tasks/update: ${r.status} ${JSON.stringify(r.body)}`);
    // No waiting: the step already ran and its outcome was stored with the answer.
    const done = await getTask(taskId);
    check(done.status === 'completed', `status right after the update: ${done.status}`);
    await storedWrites(taskId, before, 3, 'stored writes (create, first step, answer with the second step)');
  });
}

async function inlineCreate() {
  await test('a replayable first step due at once runs inside tools/call (MCP_REPORT_OUTLINE_MS=0, do+kv-cache)', async () => {
    const before = await floors();
    const r = await call('tools/call', { name: 'generate_report', arguments: { size: 'small' } });
    check(r.status === 200 && r.body?.result?.resultType === 'task', `tools/call: ${r.status} ${JSON.stringify(r.body)}`);
    check(r.body.result.status === 'input_required', `status in the create's answer: ${r.body.result.status}`);
    const taskId = r.body.result.taskId;
    const t = await getTask(taskId);
    check(t.status === 'input_required' && Object.keys(t.inputRequests ?? {}).length === 1, `tasks/get: ${JSON.stringify(t)}`);
    await storedWrites(taskId, before, 1, 'one write: the create with its first step');
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

/// The store key of a principal's quota record (as `quota::key` forms it).
function quotaKey(tenant, principal) {
  const digest = crypto.createHash('sha256').update(`${tenant}\u0000${principal}`).digest();
  return `own_${digest.subarray(0, 18).toString('base64url')}`;
}

async function ownerRecords() {
  await test('per-owner records: written due when nothing in them is live, deleted by the alarm then', async () => {
    const taskId = await startTask('slow_compute', { seconds: 1, label: 'quota' });
    const t = await getTask(taskId);
    const expiresAt = Date.parse(t.createdAt) + t.ttlMs;
    const own = (await hook('shard', { get: { key: quotaKey('e2e', 'tester') } })).reply.entry;
    check(own !== null, 'no quota record after a create');
    check(own.due_at >= expiresAt, `quota record due ${own.due_at}, the task expires at ${expiresAt}`);

    // Planted records, due already: one that holds nothing live, one
    // still live (written by a clock that was behind), one undecodable.
    const now = Date.now();
    const plant = async (body, dueAt) => {
      const key = `own_${crypto.randomBytes(18).toString('base64url')}`;
      await hook('shard', { put: { key, expected: null, body, due_at: dueAt } });
      return key;
    };
    const idle = await plant(JSON.stringify({ tasks: { tsk_gone: now - 60_000 }, bytes: { tsk_gone: 10 } }), now - 1_000);
    const liveUntil = now + 600_000;
    const live = await plant(JSON.stringify({ tasks: { tsk_live: liveUntil }, bytes: { tsk_live: 10 } }), now - 1_000);
    const broken = await plant('{not json', now - 1_000);
    const read = async (key) => (await hook('shard', { get: { key } })).reply.entry;
    const deadline = Date.now() + BOUND_MS;
    while ((await read(idle)) !== null && Date.now() < deadline) await sleep(100);
    check((await read(idle)) === null, 'the idle record was not deleted');
    let e = await read(live);
    while (e?.due_at !== liveUntil && Date.now() < deadline) {
      await sleep(100);
      e = await read(live);
    }
    check(e !== null && e.due_at === liveUntil, `the live record: ${JSON.stringify(e)}`);
    e = await read(broken);
    while (e?.due_at !== null && Date.now() < deadline) {
      await sleep(100);
      e = await read(broken);
    }
    check(e !== null && e.body === '{not json' && e.due_at === null, `the undecodable record: ${JSON.stringify(e)}`);
  });
}

/** The shard placement a task id names (`null` for an id minted before placement). */
function placementOf(id) {
  const rest = id.slice(4);
  // Placed: 2 bytes of placement, then 16 (a round's id) or 22 bytes.
  return rest.length === 24 || rest.length === 32
    ? Buffer.from(rest.slice(0, 4), 'base64url').readUInt16BE(0) : null;
}

/** The creation time (ms) a task id leads with: the 6 bytes after the
 *  placement, then 128 random bits. */
function timeOf(id) {
  const bytes = Buffer.from(id.slice(4), 'base64url');
  return bytes.readUIntBE(bytes.length - 22, 6);
}

async function growth() {
  // Before: the original layout (2 shards), as a deployment has it today.
  useServer(new Wrangler({ MCP_TASK_SHARDS: '2' }));
  await server.start();
  let placed;
  let legacy;
  await test('growth: a task of the original layout and one minted before placement', async () => {
    placed = await startTask('slow_compute', { seconds: 15, label: 'placed' });
    check(placed.length === 36 && placementOf(placed) < 2, `placed id ${placed}`);
    // An id minted before placement (tsk_ and 22 characters), stored where
    // that layout put it: FNV-1a(id) mod MCP_TASK_SHARDS.
    const { reply } = await hook('shard', { get: { key: placed } });
    const { view, record } = storedTask(reply.entry.body);
    legacy = `tsk_${crypto.randomBytes(16).toString('base64url')}`;
    record.id = legacy;
    view.snapshot.taskId = legacy;
    // Planted in the two-line layout of earlier deployments.
    const body = storedBody(view, record, true);
    await hook('shard', { put: { key: legacy, expected: null, body, due_at: reply.entry.due_at ?? null } });
    equal((await getTask(legacy)).status, 'working', 'the planted task reads');
  });
  await server.stop();

  // After: capacity added (8 shards for new tasks); nothing migrated.
  useServer(new Wrangler({ MCP_TASK_SHARDS: '2', MCP_TASK_CAPACITY: '8' }));
  await server.start();
  await test('growth: after capacity is added, earlier tasks stay readable and advance; new ones spread', async () => {
    check(placed && legacy, 'the first part did not run');
    for (const id of [placed, legacy]) {
      const t = await getTask(id);
      check(t.status === 'working' || t.status === 'completed', `${id} reads after the change: ${JSON.stringify(t)}`);
    }
    const fresh = [];
    for (let i = 0; i < 16; i++) fresh.push(await startTask('slow_compute', { seconds: 1, label: `grown-${i}` }));
    const shards = new Set(fresh.map(placementOf));
    check([...shards].every((p) => p !== null && p < 8), `placements ${[...shards]}`);
    check(shards.size > 2, `16 new tasks used only shards ${[...shards]}`);
    figure(`growth: 16 tasks created after capacity 2 -> 8 landed on ${shards.size} shards`);
    // Each id leads with its task's creation time (so a shard's new tasks
    // sit together in its storage's key order).
    for (const id of fresh.slice(0, 4)) {
      const { createdAt } = await getTask(id);
      equal(timeOf(id), Date.parse(createdAt), `${id} leads with its createdAt ${createdAt}`);
    }
    for (const id of [placed, legacy, ...fresh]) {
      const t = await waitFor(id, (x) => TERMINAL.has(x.status), `${id} completes`, 30_000);
      equal(t.status, 'completed', `${id}`);
    }
  });
  await server.stop();

  useServer(new Wrangler({
    MCP_TASK_SHARDS: '2', MCP_TASK_CAPACITY: '1000', MCP_SWEEP_SHARDS: '10', MCP_MAX_LISTEN_STREAMS: '1',
  }));
  await server.start();
  await test('a listen stream beyond the per-principal cap is refused; the open one keeps working', async () => {
    const taskId = await startTask('slow_compute', { seconds: 60, label: 'streams' });
    const msg = (id) => ({
      jsonrpc: '2.0', id, method: 'subscriptions/listen',
      params: { notifications: { taskIds: [taskId] }, _meta: meta() },
    });
    const ctrl = new AbortController();
    const first = await fetch(server.url, {
      method: 'POST', headers: standardHeaders(msg(1)), body: JSON.stringify(msg(1)), signal: ctrl.signal,
    });
    check(first.status === 200, `first stream: ${first.status}`);
    const events = sseMessages(first);
    const ack = await events.next();
    equal(ack.value?.method, 'notifications/subscriptions/acknowledged', 'the first stream is acknowledged');
    const second = await post(msg(2));
    check(second.status === 429 && second.body?.error?.data?.reason === 'streams',
      `second stream: ${second.status} ${JSON.stringify(second.body)}`);
    // The open one still delivers: cancelling its task ends it with the result.
    await call('tasks/cancel', { taskId });
    let last;
    for await (const m of events) last = m;
    check(last?.id === 1 && last?.result, `the first stream's end: ${JSON.stringify(last)}`);
    ctrl.abort();
  });
  await test('growth: one cron run sweeps a bounded window of shards, whatever the capacity', async () => {
    const offset = logSize();
    for (let i = 0; i < 2; i++) {
      const res = await fetch(server.url.replace(/\/mcp$/, '/__scheduled?cron=*+*+*+*+*'), { signal: AbortSignal.timeout(60_000) });
      await res.arrayBuffer();
      check(res.status === 200, `/__scheduled answered ${res.status}`);
    }
    await sleep(300);
    const cron = loggedObjects(offset).filter((o) => o.event === 'cron');
    check(cron.length === 2, `cron log: ${JSON.stringify(cron)}`);
    for (const c of cron) {
      check(c.shards === 1000 && c.swept_shards === 10 && c.failed_shards === 0, `cron log: ${JSON.stringify(c)}`);
    }
    figure(`cron with 1000 shards: ${cron[0].swept_shards} shard subrequests per run`);
  });
  await server.stop();
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
  const tally = {};
  for (const group of CONFORMANCE_GROUPS) {
    for (const scenario of group.scenarios) {
      const before = results.length;
      await test(`conformance ${group.label} ${scenario}`, async () => {
        const r = await runGroup(path.join(BIN, 'conformance'),
          ['server', '--url', server.url, '--scenario', scenario, '-o', CONFORMANCE_OUT, ...group.args], { timeoutMs: 120_000 });
        const passed = r.out.match(/Passed: (\d+)\/(\d+), (\d+) failed, (\d+) warnings/);
        console.log(`      conformance: ${scenario}: ${passed ? `${passed[1]}/${passed[2]} checks passed, ${passed[4]} warnings` : 'no result line'}`);
        check(r.code === 0 && passed && passed[3] === '0',
          `exit ${r.code}\n${r.out.split('\n').filter((l) => /FAILURE|Error|failed|timed out/.test(l)).slice(0, 20).join('\n')}`);
      });
      const t = (tally[group.label] ??= { passed: 0, failed: 0 });
      for (const r of results.slice(before)) t[r.ok ? 'passed' : 'failed']++;
    }
  }
  for (const [label, t] of Object.entries(tally)) {
    console.log(`conformance ${label} (workerd): ${t.passed} passed, ${t.failed} failed`);
  }
}

/// The real 2025-11-25 and 2026-07-28 clients against the Worker.
async function legacyClients() {
  await sdkChecks(server.url, test);
  await test('python mcp 2.3.0 (auto and legacy modes) against the Worker', async () => {
    const venv = await runGroup('bash', ['scripts/clients-venv.sh'], { timeoutMs: 300_000 });
    check(venv.code === 0, `clients venv: ${venv.out}`);
    const python = venv.out.trim().split('\n').pop();
    const r = await runGroup(python, ['tests/clients/python_client.py', server.url], { timeoutMs: 120_000 });
    console.log(`      ${r.out.trim().split('\n').join('\n      ')}`);
    check(r.code === 0, `python client exited ${r.code}`);
  });
}

/// POSTs one legacy (2025-11-25) message; the session, when given, rides
/// along as the SDKs send it.
async function legacyPost(msg, session) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (session) Object.assign(headers, { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' });
  return fetch(server.url, { method: 'POST', headers, body: JSON.stringify(msg) });
}

async function legacyRestart() {
  await test('2025-11-25: wrangler dev restarted between the input request and its answer loses nothing', async () => {
    const init = await legacyPost({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {
      protocolVersion: '2025-11-25', capabilities: { elicitation: { form: {} } }, clientInfo: { name: 'e2e', version: '1' } } });
    const session = init.headers.get('mcp-session-id');
    check(init.status === 200 && session, `initialize ${init.status}`);
    await init.arrayBuffer();
    const created = await (await legacyPost({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: {
      name: 'generate_report', arguments: { size: 'small' }, task: { ttl: 600_000 } } }, session)).json();
    const taskId = created.result?.task?.taskId;
    check(taskId, `create ${JSON.stringify(created)}`);
    await waitFor(taskId, (t) => t.status === 'input_required', 'input_required', 30_000);
    // tasks/result is held open and carries the elicitation request.
    const aborter = new AbortController();
    const res = await fetch(server.url, {
      method: 'POST',
      signal: aborter.signal,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
        'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tasks/result', params: { taskId } }),
    });
    check(res.headers.get('content-type') === 'text/event-stream', `tasks/result ${res.status}`);
    let request;
    for await (const m of sseMessages(res)) {
      if (m.method === 'elicitation/create') {
        request = m;
        break;
      }
    }
    aborter.abort();
    check(request?.params?._meta?.['io.modelcontextprotocol/related-task']?.taskId === taskId, `request ${JSON.stringify(request)}`);
    await server.stop();
    await server.start();
    // The same session and request id, on a fresh isolate.
    const answered = await legacyPost({ jsonrpc: '2.0', id: request.id,
      result: { action: 'accept', content: { approved: true } } }, session);
    check(answered.status === 202, `answer ${answered.status} ${await answered.text()}`);
    await waitFor(taskId, (t) => TERMINAL.has(t.status), 'completed after the restart', 30_000);
    const result = await (await legacyPost({ jsonrpc: '2.0', id: 3, method: 'tasks/result', params: { taskId } }, session)).json();
    check(result.result?.content?.[0]?.text === 'Generated small report with approved outline.', `result ${JSON.stringify(result)}`);
  });
}

/// The MCP Inspector's CLI (pinned in tests/clients/inspector) against the
/// Worker as `make dev` serves it (the root wrangler.toml, bearer tokens).
async function inspectorCli() {
  await test('MCP Inspector CLI lists the tools and calls one against the make dev Worker', async () => {
    const dir = path.join(ROOT, 'tests', 'clients', 'inspector');
    const bin = path.join(dir, 'node_modules', '.bin', 'mcp-inspector');
    if (!fs.existsSync(bin)) {
      // `npm install` with the committed lock: `npm ci` refuses this lock
      // over an optional platform package the lock does not list.
      const i = await runGroup('npm', ['install', '--no-audit', '--no-fund', '--prefix', dir], { timeoutMs: 600_000 });
      check(i.code === 0, `npm install (inspector): ${i.out.slice(-2000)}`);
    }
    const token = await mint('inspector', 'acme');
    const home = path.join(WORK, 'inspector-home');
    fs.mkdirSync(home, { recursive: true });
    const run = (args) => runGroup(bin, ['--cli', server.url, '--transport', 'http',
      '--header', `Authorization: Bearer ${token}`, ...args], { timeoutMs: 120_000, env: { HOME: home } });
    const listed = await run(['--method', 'tools/list']);
    check(listed.code === 0 && /generate_report/.test(listed.out) && /run_job/.test(listed.out),
      `tools/list exited ${listed.code}: ${listed.out.slice(0, 2000)}`);
    check(!/slow_compute/.test(listed.out), 'make dev serves the demo tools only');
    const called = await run(['--method', 'tools/call', '--tool-name', 'report_sizes']);
    check(called.code === 0 && /"pages"/.test(called.out) && /large/.test(called.out),
      `tools/call exited ${called.code}: ${called.out.slice(0, 2000)}`);
  });
}

// A stored task's head (with its snapshot as `view.snapshot`) and record.
// It is written as three lines: head, snapshot, record.
function storedTask(body) {
  const lines = body.split('\n');
  check(lines.length === 3, `a stored task has a head, a snapshot and a record line: ${body.slice(0, 80)}`);
  const view = JSON.parse(lines[0]);
  check(!('snapshot' in view), 'the snapshot has its own line');
  view.snapshot = JSON.parse(lines[1]);
  return { view, record: JSON.parse(lines[2]) };
}

// A stored body from `storedTask`'s parts: the current three-line layout,
// or (`earlier`) the two-line one written before it (the snapshot inside
// the head), which is still read.
function storedBody(view, record, earlier = false) {
  if (earlier) return `${JSON.stringify(view)}\n${JSON.stringify(record)}`;
  const { snapshot, ...head } = view;
  return `${JSON.stringify(head)}\n${JSON.stringify(snapshot)}\n${JSON.stringify(record)}`;
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
    const { view, record } = storedTask(entry.body);
    check(record.id === taskId && record.phase.status === 'completed' && view.status === 'completed'
      && view.snapshot.taskId === taskId && Number.isInteger(entry.version),
      `cached entry ${cached.value.slice(0, 200)}`);
    const expiresAt = Date.parse(done.createdAt) + done.ttlMs;
    check(cached.expiration === Math.floor(expiresAt / 1000) + 1,
      `KV expiration ${cached.expiration}, task expires at ${expiresAt / 1000}`);
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
    const del = await hook('shard', { delete: { key: taskId, expected: version } });
    equal(del.reply, 'deleted', 'delete in the shard');
    const gone = await hook('shard', { get: { key: taskId } });
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
      const { view, record } = storedTask(entry.body);
      record.id = id;
      view.snapshot.taskId = id;
      edit(view, record);
      const body = storedBody(view, record);
      await hook('kv', { action: 'put', key: `task:${id}`, value: JSON.stringify({ ...entry, body }) });
    };
    const foreign = `tsk_foreign${crypto.randomBytes(8).toString('hex').slice(0, 15)}`;
    await plant(foreign, (v, r) => (v.owner = r.owner = { tenant: 'e2e', principal: 'someone-else' }));
    const expired = `tsk_expired${crypto.randomBytes(8).toString('hex').slice(0, 15)}`;
    await plant(expired, (v, r) => {
      r.created_at = r.created_at - r.ttl_ms - 1000;
      v.expires_at = r.created_at + r.ttl_ms;
    });
    const unknown = await call('tasks/get', { taskId: 'tsk_never_existedAAAAAAAAA' });
    const r = await call('tasks/get', { taskId: foreign });
    check(r.status === 200, `status ${r.status}`);
    equal(r.body.error, unknown.body.error, `cached ${foreign} must answer like an unknown task`);
    // The caller's own expired task says so; a malformed id is a syntax error.
    const own = await call('tasks/get', { taskId: expired });
    check(
      own.status === 200 && own.body.error?.code === -32602 && own.body.error.message === 'Failed to retrieve task: Task has expired',
      `own expired: ${JSON.stringify(own.body)}`,
    );
    for (const bad of ['garbage!!', '', 'tsk_short']) {
      const m = await call('tasks/get', { taskId: bad });
      check(
        m.status === 200 && m.body.error?.code === -32602 && /^Invalid taskId/.test(m.body.error.message),
        `malformed ${JSON.stringify(bad)}: ${JSON.stringify(m.body)}`,
      );
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

/// A 2025-03-26 batch of calls held until their tasks end: its streams end
/// in turn, each with a last poll, and all of them within the same budget.
async function legacyBatchBudget() {
  await test(`a 2025-03-26 batch of held calls ends within the subrequest budget (${LISTEN_BUDGET})`, async () => {
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify({
      jsonrpc: '2.0', id: 0, method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'e2e-batch', version: '1' } } }) });
    const session = init.headers.get('mcp-session-id');
    check(init.status === 200 && session, `initialize ${init.status}`);
    await init.arrayBuffer();
    // Two calls: their creates (three subrequests each here) leave room
    // for the streams' polls; a batch whose creates alone spend the budget
    // cannot keep it.
    const ids = [1, 2];
    const batch = ids.map((id) => ({ jsonrpc: '2.0', id, method: 'tools/call',
      params: { name: 'slow_compute', arguments: { seconds: 60, label: `held ${id}` } } }));
    const offset = logSize();
    const res = await fetch(server.url, {
      method: 'POST', headers: { ...headers, 'mcp-session-id': session }, body: JSON.stringify(batch),
      signal: AbortSignal.timeout(60_000),
    });
    check(res.headers.get('content-type') === 'text/event-stream', `batch ${res.status}`);
    const messages = [];
    for await (const m of sseMessages(res)) messages.push(m);
    // Each held call ends, its time cut by the budget, naming its task.
    equal(messages.map((m) => m.id), ids, 'one answer per call, in turn');
    for (const m of messages) {
      check(m.error?.code === -32001 && /^tsk_/.test(m.error.data?.taskId ?? ''), `answer ${JSON.stringify(m)}`);
    }
    await sleep(300);
    const line = loggedObjects(offset).find((o) => o.http === 'POST' && o.events === messages.length);
    check(line && line.subrequests <= LISTEN_BUDGET, `batch log line ${JSON.stringify(line)}`);
    for (const m of messages) await call('tasks/cancel', { taskId: m.error.data.taskId });
  });
}

const JWT_SECRET = crypto.randomBytes(32).toString('hex');
const jwtVars = (port) => ({
  MCP_AUTH: 'jwt',
  MCP_JWT_HS256_SECRET: JWT_SECRET,
  MCP_JWT_ISSUER: `http://127.0.0.1:${port}`,
  MCP_RESOURCE_URL: `http://127.0.0.1:${port}/mcp`,
});

async function mint(sub, tenant) {
  const r = await runGroup('node', ['scripts/mint-token.mjs', '--sub', sub, '--tenant', tenant],
    { timeoutMs: 30_000, env: jwtVars(server.port) });
  check(r.code === 0, `mint-token: ${r.out}`);
  return r.out.trim();
}

async function jwtAuth() {
  await test('MCP_AUTH=jwt on workerd: 401 with the metadata pointer, tokens scope tasks to their owner', async () => {
    const offset = logSize();
    const anonymous = await call('tools/call', { name: 'slow_compute', arguments: { seconds: 1 } });
    check(anonymous.status === 401 && anonymous.body.error?.code === -32600, `no token: ${anonymous.status} ${JSON.stringify(anonymous.body)}`);
    const challenge = anonymous.headers.get('www-authenticate') ?? '';
    check(challenge.startsWith('Bearer resource_metadata="'), `www-authenticate: ${challenge}`);
    const md = await fetch(server.url.replace(/\/mcp$/, '/.well-known/oauth-protected-resource/mcp'));
    const metadata = await md.json();
    check(md.status === 200 && metadata.resource === server.url, `metadata: ${md.status} ${JSON.stringify(metadata)}`);

    const alice = await mint('alice', 'acme');
    const bob = await mint('bob', 'acme');
    const as = (token) => ({ authorization: `Bearer ${token}` });
    const create = { jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 1 }, _meta: meta() } };
    const created = await post(create, as(alice));
    check(created.status === 200 && created.body.result?.resultType === 'task', `create with a token: ${JSON.stringify(created.body)}`);
    const taskId = created.body.result.taskId;
    const get = { jsonrpc: '2.0', id: newId(), method: 'tasks/get', params: { taskId, _meta: meta() } };
    const mine = await post(get, as(alice));
    check(mine.body.result?.taskId === taskId, `owner reads: ${JSON.stringify(mine.body)}`);
    const theirs = await post(get, as(bob));
    const unknown = await post({ ...get, params: { ...get.params, taskId: 'tsk_never_existedAAAAAAAAA' } }, as(bob));
    check(theirs.body.error?.code === -32602, `another principal: ${JSON.stringify(theirs.body)}`);
    equal(theirs.body.error, unknown.body.error, 'a foreign task answers like an unknown one');
    // Another scheme is answered as no token is (RFC 6750 §3.1: no error
    // code); a refused Bearer token names invalid_token.
    const basic = await post(get, { authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` });
    const basicChallenge = basic.headers.get('www-authenticate') ?? '';
    check(basic.status === 401 && basicChallenge.startsWith('Bearer ') && !basicChallenge.includes('error='),
      `Basic: ${basic.status} ${basicChallenge}`);
    // Two Authorization headers reach the Worker joined into one value
    // (the Fetch API's Headers): a malformed request, 400 invalid_request.
    const joined = await post(get, as(`${alice}, Bearer ${alice}`));
    check(joined.status === 400 && /error="invalid_request"/.test(joined.headers.get('www-authenticate') ?? ''),
      `two credentials: ${joined.status} ${joined.headers.get('www-authenticate')}`);
    const forged = await post(get, as(`${alice.slice(0, -4)}AAAA`));
    check(forged.status === 401 && /error="invalid_token"/.test(forged.headers.get('www-authenticate') ?? ''),
      `a forged token: ${forged.status} ${forged.headers.get('www-authenticate')}`);
    await sleep(300);
    const refused = loggedObjects(offset).find((o) => o.status === 401);
    check(refused && refused.auth === 'missing token', `401 log line: ${JSON.stringify(refused)}`);
    check(!logSince(offset).includes(alice.split('.')[2]), 'a token signature reached the log');
  });
  await test('MCP_AUTH=jwt on workerd: a token the isolate kept is refused from its expiry on', async () => {
    // exp 57 s ago; with the default 60 s leeway it is good for 2 to 3 s.
    const r = await runGroup('node', ['scripts/mint-token.mjs', '--sub', 'carol', '--tenant', 'acme', '--ttl', '-57'],
      { timeoutMs: 30_000, env: jwtVars(server.port) });
    check(r.code === 0, `mint-token: ${r.out}`);
    const token = r.out.trim();
    const exp = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).exp;
    const list = () => post({ jsonrpc: '2.0', id: newId(), method: 'tools/list', params: { _meta: meta() } },
      { authorization: `Bearer ${token}` });
    const before = [await list(), await list()];
    check(Date.now() < (exp + 60) * 1000, 'the first requests ran before the expiry');
    check(before.every((x) => x.status === 200), `before the expiry: ${before.map((x) => x.status)}`);
    await sleep(Math.max(0, (exp + 60) * 1000 - Date.now()) + 300);
    const after = await list();
    check(after.status === 401, `after the expiry: ${after.status} ${JSON.stringify(after.body)}`);
  });
  await test('MCP_AUTH=jwt on workerd: a 2025-11-25 session the isolate kept answers only its owner', async () => {
    const [alice, bob] = [await mint('alice', 'acme'), await mint('bob', 'acme')];
    const send = (token, msg, session) => {
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}` };
      if (session) Object.assign(headers, { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' });
      return fetch(server.url, { method: 'POST', headers, body: JSON.stringify(msg) });
    };
    const init = await send(alice, { jsonrpc: '2.0', id: 0, method: 'initialize', params: {
      protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'e2e-session-kept', version: '1' } } });
    const session = init.headers.get('mcp-session-id');
    check(init.status === 200 && session, `initialize ${init.status}`);
    const list = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
    const before = (await hook('kept', {})).sessions;
    const mine = [];
    for (let i = 0; i < 3; i++) mine.push((await send(alice, list, session)).status);
    check(mine.every((s) => s === 200), `the owner's requests: ${mine}`);
    const after = (await hook('kept', {})).sessions;
    check(after >= 1 && after >= before, `the isolate keeps the verified session: ${before} then ${after}`);
    const theirs = await send(bob, list, session);
    check(theirs.status === 404, `another principal with the session: ${theirs.status}`);
    const last = session.at(-1);
    const forged = session.slice(0, -1) + (last === 'A' ? 'B' : 'A');
    const altered = await send(alice, list, forged);
    check(altered.status === 404, `an altered tag: ${altered.status}`);
    check((await send(alice, list, session)).status === 200, 'the owner keeps the session');
  });
}

// ---------------------------------------------------------------- main

async function main() {
  const started = Date.now();
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
  console.log(`workerd e2e: wrangler output in ${path.relative(ROOT, LOG)}`);

  await staticChecks();

  useServer(new Wrangler());
  await server.start();
  figure(`wrangler dev startup (fresh state) ${server.startupMs} ms`);
  await httpEdges();
  await storeContract('do');
  await deleteFloorFirst();
  await sweepErrorRearms();
  await numericVar();
  await classWithoutSql();
  await jwtVectors();
  await offCurveKey();
  await seedTranscript();
  await oneSecondStep();
  await replayableSteps();
  await restartMidTask();
  await cronBackstop();
  await ownerRecords();
  await listen();
  await conformance();
  await legacyClients();
  await legacyRestart();
  await server.stop();

  await growth();

  useServer(new Wrangler({ MCP_STORE: 'do+kv-cache', MCP_LISTEN_SUBREQUESTS: String(LISTEN_BUDGET), MCP_REPORT_OUTLINE_MS: '0' }));
  await server.start();
  await storeContract('do+kv-cache');
  await kvCache();
  await listenBudget();
  await legacyBatchBudget();
  await inlineCreate();
  await server.stop();

  const upstream = await new Upstream().start();
  useServer(new Wrangler({
    MCP_OUTBOUND_ALLOW: upstream.origin, JOB_API_URL: upstream.url, JOB_API_KEY: 'sk-e2e',
    MCP_RETRY_BASE_MS: '200', MCP_RETRY_CAP_MS: '1000',
  }));
  await server.start();
  await outbound(upstream);
  await server.stop();
  useServer(new Wrangler({
    MCP_OUTBOUND_ALLOW: 'http://127.0.0.1:1', JOB_API_URL: upstream.url,
    MCP_SERVER_NAME: 'acme-reports', MCP_SERVER_VERSION: '2.1.0', MCP_INSTRUCTIONS: 'Call run_job with an input.',
    MCP_TOOLS: 'demo',
  }));
  await server.start();
  await outboundRefused(upstream);
  await serverIdentity();
  await server.stop();
  useServer(new Wrangler({
    MCP_OUTBOUND_ALLOW: upstream.origin, JOB_API_URL: upstream.url, MCP_OUTBOUND_MAX_BYTES: '8',
    MCP_STEP_MAX_ATTEMPTS: '2', MCP_RETRY_BASE_MS: '200',
  }));
  await server.start();
  await outboundCapped(upstream);
  await server.stop();
  useServer(new Wrangler({
    MCP_OUTBOUND_ALLOW: upstream.origin, JOB_API_URL: upstream.url, JOB_API_KEY: 'sk-e2e',
    MCP_TASK_SHARDS: '1', MCP_TICK_SUBREQUESTS: '1',
  }));
  await server.start();
  await tickSubrequests(upstream);
  await server.stop();
  useServer(new Wrangler(
    { MCP_AUTH: 'insecure-local', MCP_INSECURE_PRINCIPAL: 'e2e/starter', MCP_OUTBOUND_ALLOW: upstream.origin },
    { config: 'wrangler.toml', cwd: path.join(ROOT, 'examples/starter') },
  ));
  await server.start();
  await starter(upstream);
  await server.stop();
  await upstream.stop();

  useServer(new Wrangler(jwtVars));
  await server.start();
  await readmeWalkthrough();
  await jwtAuth();
  await server.stop();

  // The Worker exactly as `make dev` serves it (the root wrangler.toml).
  useServer(new Wrangler(jwtVars, { config: 'wrangler.toml' }));
  await server.start();
  await inspectorCli();
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
