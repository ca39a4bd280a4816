#!/usr/bin/env node
// Figures for the Worker on workerd (`wrangler dev`), never assertions:
//   - tasks/get latency through wrangler dev (sequential loopback loop), in
//     `do` and `do+kv-cache` mode;
//   - how long after its due time a 1-second step is committed by the alarm;
//   - how long one shard needs to sweep a backlog of MCP_TICK_BUDGET due
//     tasks (the cron backstop after a lost alarm), and to drain 3x that.
// Needs the bundles of scripts/workerd-e2e.sh (build-e2e/). Run:
//   bash scripts/workerd-bench.sh
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { TERMINAL, WORK, Wrangler, getTask, hook, loggedObjects, logSize, running, server, startTask, useServer, waitFor } from './lib.mjs';

function quantiles(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(1);
  return `median ${q(0.5)} ms, p90 ${q(0.9)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms (n=${s.length})`;
}

async function getLatency(label) {
  const taskId = await startTask('slow_compute', { seconds: 1, label: 'latency' });
  await waitFor(taskId, (t) => TERMINAL.has(t.status), 'complete');
  for (let i = 0; i < 50; i++) await getTask(taskId);
  const times = [];
  for (let i = 0; i < 500; i++) {
    const t0 = process.hrtime.bigint();
    await getTask(taskId);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  console.log(`figure: tasks/get of a completed task through wrangler dev (${label}): ${quantiles(times)}`);
}

async function stepLatency() {
  const lags = [];
  for (let i = 0; i < 10; i++) {
    const taskId = await startTask('slow_compute', { seconds: 1, label: `step-${i}` });
    const t = await waitFor(taskId, (x) => TERMINAL.has(x.status), 'complete');
    lags.push(Date.parse(t.lastUpdatedAt) - Date.parse(t.createdAt) - 1000);
  }
  console.log(`figure: 1-second step committed after its due time by the alarm: lag ${quantiles(lags)}`);
}

async function parallel(n, width, fn) {
  const out = [];
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) {
      const i = next++;
      out[i] = await fn(i);
    }
  }));
  return out;
}

async function sweepBacklog(budget) {
  const n = budget * 3;
  const ids = await parallel(n, 6, (i) => startTask('slow_compute', { seconds: 5, label: `backlog-${i}` }));
  await hook('alarm', { taskId: ids[0], action: 'delete' });
  await sleep(7_000); // every task is due now, and no alarm is set
  const offset = logSize();
  const t0 = Date.now();
  const res = await fetch(server.url.replace(/\/mcp$/, '/__scheduled?cron=*+*+*+*+*'));
  await res.arrayBuffer();
  const cronWall = Date.now() - t0;
  await sleep(300);
  const cron = loggedObjects(offset).find((o) => o.event === 'cron');
  console.log(`figure: cron sweep of one shard with ${n} due tasks and budget ${budget}: stepped ${cron?.stepped}, ${cron?.ms} ms inside the Worker, ${cronWall} ms for GET /__scheduled`);
  const deadline = Date.now() + 120_000;
  let done = 0;
  while (Date.now() < deadline) {
    done = (await Promise.all(ids.map((id) => getTask(id)))).filter((t) => t.status === 'completed').length;
    if (done === n) break;
    await sleep(100);
  }
  console.log(`figure: all ${n} backlog tasks completed ${Date.now() - t0} ms after the cron sweep started (the rest by chained alarms)`);
  const sweeps = loggedObjects(offset).filter((o) => o.event === 'sweep');
  console.log(`figure: sweeps: ${sweeps.map((s) => `${s.origin}:${s.stepped}`).join(' ')}`);
}

/// Requests per second one shard Durable Object serves for tasks/get
/// (16 concurrent clients, for `seconds`), all tasks in that one shard.
async function shardThroughput(seconds) {
  const ids = await parallel(16, 4, (i) => startTask('slow_compute', { seconds: 3600, label: `rps-${i}` }));
  let n = 0;
  const until = Date.now() + seconds * 1000;
  await Promise.all(ids.map(async (id) => {
    while (Date.now() < until) {
      await getTask(id);
      n++;
    }
  }));
  console.log(`figure: one shard Durable Object (MCP_TASK_SHARDS=1, MCP_TASK_CAPACITY=1), tasks/get at 16 connections through wrangler dev: ${(n / seconds).toFixed(0)} requests/s (${n} in ${seconds} s)`);
}

async function main() {
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
  useServer(new Wrangler());
  await server.start();
  await getLatency('do');
  await stepLatency();
  await server.stop();

  useServer(new Wrangler({ MCP_STORE: 'do+kv-cache' }));
  await server.start();
  await getLatency('do+kv-cache');
  await server.stop();

  useServer(new Wrangler({ MCP_TASK_SHARDS: '1', MCP_TASK_CAPACITY: '1', MCP_TICK_BUDGET: '100', MCP_MAX_OUTSTANDING_TASKS: '0', MCP_MAX_STORED_BYTES: '0', MCP_MAX_TASKS_PER_MINUTE: '0', MCP_MAX_LISTEN_STREAMS: '0' }));
  await server.start();
  await sweepBacklog(100);
  await shardThroughput(10);
  await server.stop();
}

try {
  await main();
} finally {
  for (const w of [...running]) await w.stop();
}
