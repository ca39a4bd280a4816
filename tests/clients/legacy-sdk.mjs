// The TypeScript SDK (@modelcontextprotocol/sdk, pinned at 1.32.2 in
// package.json), which speaks 2025-11-25, against a running server: the
// legacy adapter end to end, as the many clients built on it connect.
//
//   node tests/clients/legacy-sdk.mjs http://127.0.0.1:PORT/mcp
//
// Also imported by the workerd e2e (sdkChecks). Prints one line per check
// and `legacy sdk: N passed, N failed`; exits non-zero on any failure.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const SDK_VERSION = '1.32.2';

class Failure extends Error {}
function check(cond, message) {
  if (!cond) throw new Failure(message);
}

/// A connected SDK client that declares form elicitation and sampling and
/// answers both; `answered` counts what it was asked.
async function connect(url, { approve = true } = {}) {
  const client = new Client(
    { name: 'legacy-sdk-test', version: SDK_VERSION },
    { capabilities: { elicitation: { form: {} }, sampling: {} } },
  );
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request);
    const props = Object.keys(request.params.requestedSchema?.properties ?? {});
    if (props.includes('approved')) return { action: 'accept', content: { approved: approve } };
    return { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    asked.push(request);
    return {
      role: 'assistant',
      content: { type: 'text', text: 'four' },
      model: 'test-model',
      stopReason: 'endTurn',
    };
  });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport, asked };
}

/// Runs every check against `url`; `test(name, fn)` reports each one.
export async function sdkChecks(url, test) {
  let c;
  await test(`TS SDK ${SDK_VERSION}: initialize negotiates 2025-11-25 and a session`, async () => {
    c = await connect(url);
    check(c.transport.protocolVersion === '2025-11-25', `protocol ${c.transport.protocolVersion}`);
    check(/^[\x21-\x7e]+$/.test(c.transport.sessionId ?? ''), `session ${c.transport.sessionId}`);
    const caps = c.client.getServerCapabilities();
    check(caps?.tasks?.requests?.tools?.call !== undefined, `tasks capability ${JSON.stringify(caps)}`);
    check(c.client.getServerVersion()?.name === 'mcp-tasks-edge', 'serverInfo');
    await c.client.ping();
  });
  if (!c) return;
  const { client } = c;

  await test(`TS SDK ${SDK_VERSION}: tools/list with each tool's taskSupport`, async () => {
    const { tools } = await client.listTools();
    const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
    check(support.greet === 'forbidden', `greet ${support.greet}`);
    check(support.generate_report === 'required', `generate_report ${support.generate_report}`);
    check(support.slow_compute === 'optional', `slow_compute ${support.slow_compute}`);
  });

  await test(`TS SDK ${SDK_VERSION}: a synchronous tool`, async () => {
    const r = await client.callTool({ name: 'greet', arguments: { name: 'Ada' } });
    check(r.content[0].text === 'Hello, Ada!', JSON.stringify(r));
  });

  await test(`TS SDK ${SDK_VERSION}: a synchronous tool that elicits, then one that samples`, async () => {
    const before = c.asked.length;
    const r = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } });
    check(r.content[0].text.includes('ada@example.com'), JSON.stringify(r));
    const s = await client.callTool({ name: 'test_sampling', arguments: { prompt: '2+2?' } });
    check(s.content[0].text === 'LLM response: four', JSON.stringify(s));
    check(c.asked.length === before + 2, `asked ${c.asked.length - before} times`);
  });

  await test(`TS SDK ${SDK_VERSION}: progress before the result`, async () => {
    const seen = [];
    const r = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
      onprogress: (p) => seen.push(p.progress),
    });
    check(r.content[0].text.startsWith('Progress reported'), JSON.stringify(r));
    check(JSON.stringify(seen) === '[0,50,100]', `progress ${JSON.stringify(seen)}`);
  });

  let reportTask;
  await test(`TS SDK ${SDK_VERSION}: generate_report as a task, approved from the elicitation handler`, async () => {
    const before = c.asked.length;
    const seen = [];
    let result;
    for await (const msg of client.experimental.tasks.callToolStream(
      { name: 'generate_report', arguments: { size: 'small' } },
      CallToolResultSchema,
      { task: { ttl: 600_000 }, timeout: 120_000 },
    )) {
      seen.push(msg.type === 'taskStatus' ? `status:${msg.task.status}` : msg.type);
      if (msg.type === 'taskCreated') reportTask = msg.task.taskId;
      if (msg.type === 'result') result = msg.result;
      if (msg.type === 'error') throw new Failure(`stream error: ${msg.error.message}`);
    }
    check(seen[0] === 'taskCreated', `first message ${seen[0]}`);
    check(seen.includes('status:input_required'), `statuses ${seen.join(', ')}`);
    check(c.asked.length === before + 1, 'the handler was asked once');
    const related = c.asked[before].params._meta?.['io.modelcontextprotocol/related-task'];
    check(related?.taskId === reportTask, `related-task ${JSON.stringify(related)}`);
    check(result?.content?.[0]?.text === 'Generated small report with approved outline.', JSON.stringify(result));
    const done = await client.experimental.tasks.getTask(reportTask);
    check(done.status === 'completed', `tasks/get ${done.status}`);
  });

  await test(`TS SDK ${SDK_VERSION}: tasks/list and tasks/cancel`, async () => {
    const created = await client.request(
      { method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 60, label: 'sdk' }, task: { ttl: 600_000 } } },
      CreateTaskResultSchema,
    );
    const id = created.task.taskId;
    check(created.task.status === 'working', `created ${created.task.status}`);
    const ids = [];
    let cursor;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      ids.push(...page.tasks.map((t) => t.taskId));
      cursor = page.nextCursor;
    } while (cursor);
    check(ids.includes(id) && (reportTask === undefined || ids.includes(reportTask)), `listed ${ids.join(', ')}`);
    const cancelled = await client.experimental.tasks.cancelTask(id);
    check(cancelled.taskId === id, JSON.stringify(cancelled));
    // A running step is cancelled at its boundary; this one is waiting.
    let status = cancelled.status;
    for (let i = 0; i < 50 && status !== 'cancelled'; i++) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await client.experimental.tasks.getTask(id)).status;
    }
    check(status === 'cancelled', `status after cancel ${status}`);
  });

  await test(`TS SDK ${SDK_VERSION}: a foreign or unknown task id is one error`, async () => {
    let message;
    try {
      await client.experimental.tasks.getTask('tsk_doesnotexistAAAAAAAAAA');
    } catch (e) {
      message = e.message;
    }
    check(/Task not found/.test(message ?? ''), `error ${message}`);
  });

  await client.close();
}

// Run directly: one URL, a summary line, the exit status.
if (import.meta.url === `file://${process.argv[1]}`) {
  const url = process.argv[2];
  let passed = 0;
  let failed = 0;
  await sdkChecks(url, async (name, fn) => {
    const t0 = Date.now();
    try {
      await fn();
      passed++;
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name} (${Date.now() - t0} ms)\n      ${e instanceof Failure ? e.message : e.stack}`);
    }
  });
  console.log(`legacy sdk: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}
