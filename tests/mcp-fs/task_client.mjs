// A client of lovia's MCP tasks (the 2025-11-25 revision's "Tasks") on the
// official TypeScript SDK's task client: tests/all/mcp/tasks.rs and
// tests/all/replicas/mcp_tasks.rs run it and assert on the one JSON line it
// prints.
//
//   node task_client.mjs long  stdio LOVIA ARGS…   a long tool (sleep_ms) as a task
//   node task_client.mjs long  http URL            the same over streamable HTTP
//   node task_client.mjs gated stdio|http …        a gated tool (launch) as a task
//   node task_client.mjs replicas URL_A URL_B       tasks made on A, read and cancelled on B
//   node task_client.mjs bound http URL N           N running tasks, then one more
//   node task_client.mjs make URL                   a task that runs a minute; its id
//   node task_client.mjs await URL ID               polls the task until it ends (30 s at most)
//
// HTTP requests carry `Authorization: Bearer $LOVIA_KEY` when it is set.
// Capabilities are enforced strictly: a request with `task` throws unless
// the server declared `tasks.requests.tools.call`.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [scenario, ...rest] = process.argv.slice(2);
const err = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e) });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function transportOf(mode, args) {
  if (mode === 'stdio') return new StdioClientTransport({ command: args[0], args: args.slice(1), stderr: 'inherit' });
  const headers = process.env.LOVIA_KEY ? { Authorization: `Bearer ${process.env.LOVIA_KEY}` } : {};
  return new StreamableHTTPClientTransport(new URL(args[0]), { requestInit: { headers } });
}

async function connect(mode, args, onElicit) {
  const client = new Client(
    { name: 'lovia-task-test', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } }, enforceStrictCapabilities: true },
  );
  client.setRequestHandler(ElicitRequestSchema, async (request) =>
    onElicit ? onElicit(client, request) : { action: 'decline' },
  );
  await client.connect(transportOf(mode, args));
  return client;
}

// Every message of a task call: created, each status polled, the result.
async function stream(client, name, args) {
  const seen = [];
  for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args })) {
    if (m.type === 'result') seen.push({ type: 'result', text: m.result.content?.[0]?.text, isError: !!m.result.isError, meta: m.result._meta ?? null });
    else if (m.type === 'error') seen.push({ type: 'error', error: err(m.error) });
    else seen.push({ type: m.type, status: m.task.status, taskId: m.task.taskId, ttl: m.task.ttl, pollInterval: m.task.pollInterval });
  }
  return seen;
}

// A task made with an explicit `task` param, whatever the listing says.
async function createTask(client, name, args, ttl) {
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args } },
    CreateTaskResultSchema,
    { task: ttl === undefined ? {} : { ttl } },
  );
  return created.task;
}

const out = {};
try {
  if (scenario === 'long' || scenario === 'gated') {
    const [mode, ...args] = rest;
    let answer = 'accept';
    const asked = [];
    const client = await connect(mode, args, async (c, request) => {
      const tasks = (await c.experimental.tasks.listTasks()).tasks;
      asked.push({ message: request.params.message, statuses: tasks.map((t) => t.status), messages: tasks.map((t) => t.statusMessage ?? null) });
      return answer === 'accept' ? { action: 'accept', content: {} } : { action: 'decline' };
    });
    out.capability = client.getServerCapabilities()?.tasks ?? null;
    const { tools } = await client.listTools();
    out.execution = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));
    if (!out.capability) {
      // Tasks off: the strict client refuses to ask for one.
      out.refused = await createTask(client, 'sleep_ms', { ms: 10 }).then(() => null, err);
      out.plain = (await client.callTool({ name: 'sleep_ms', arguments: { ms: 10 } })).content?.[0]?.text;
    } else if (scenario === 'long') {
      out.completed = await stream(client, 'sleep_ms', { ms: 1200 });
      const id = out.completed[0].taskId;
      out.get = await client.experimental.tasks.getTask(id);
      const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
      out.result = { text: result.content?.[0]?.text, meta: result._meta ?? null };
      out.list = (await client.experimental.tasks.listTasks()).tasks.map((t) => [t.taskId, t.status]);
      const long = await createTask(client, 'sleep_ms', { ms: 60000 }, 120000);
      out.longCreated = { status: long.status, ttl: long.ttl };
      await sleep(300);
      out.longRunning = (await client.experimental.tasks.getTask(long.taskId)).status;
      const cancelledAt = Date.now();
      out.cancelled = (await client.experimental.tasks.cancelTask(long.taskId)).status;
      const cancelledResult = await client.experimental.tasks.getTaskResult(long.taskId, CallToolResultSchema);
      out.cancelledResult = { text: cancelledResult.content?.[0]?.text, isError: !!cancelledResult.isError, ms: Date.now() - cancelledAt };
      out.cancelAgain = await client.experimental.tasks.cancelTask(long.taskId).then(() => null, err);
      out.unknown = await client.experimental.tasks.getTask('task-unknown').then(() => null, err);
      const plain = await client.callTool({ name: 'sleep_ms', arguments: { ms: 10 } });
      out.plain = plain.content?.[0]?.text;
    } else {
      out.forbidden = await createTask(client, 'echo', { text: 'x' }).then(() => null, err);
      out.accepted = await stream(client, 'launch', { target: 'a' });
      out.askedAccept = asked.splice(0);
      answer = 'decline';
      out.declined = await stream(client, 'launch', { target: 'b' });
      out.askedDecline = asked.splice(0);
    }
    await client.close();
  } else if (scenario === 'replicas') {
    const [a, b] = rest;
    const onA = await connect('http', [a]);
    const onB = await connect('http', [b]);
    const made = await createTask(onA, 'sleep_ms', { ms: 1500 });
    out.madeOnA = made.status;
    out.seenOnB = (await onB.experimental.tasks.getTask(made.taskId)).status;
    const result = await onB.experimental.tasks.getTaskResult(made.taskId, CallToolResultSchema);
    out.resultOnB = result.content?.[0]?.text;
    out.listedOnB = (await onB.experimental.tasks.listTasks()).tasks.some((t) => t.taskId === made.taskId);
    const long = await createTask(onA, 'sleep_ms', { ms: 60000 });
    await sleep(300);
    out.cancelledOnB = (await onB.experimental.tasks.cancelTask(long.taskId)).status;
    out.seenOnA = (await onA.experimental.tasks.getTask(long.taskId)).status;
    await onA.close();
    await onB.close();
  } else if (scenario === 'bound') {
    const [, url, n] = rest;
    const client = await connect('http', [url]);
    const running = [];
    for (let i = 0; i < Number(n); i++) running.push((await createTask(client, 'sleep_ms', { ms: 60000 })).taskId);
    out.kept = running.length;
    out.refused = await createTask(client, 'sleep_ms', { ms: 60000 }).then(() => null, err);
    for (const id of running) await client.experimental.tasks.cancelTask(id);
    out.afterCancels = (await createTask(client, 'sleep_ms', { ms: 10 })).status;
    await client.close();
  } else if (scenario === 'make') {
    const client = await connect('http', [rest[0]]);
    const task = await createTask(client, 'sleep_ms', { ms: 60000 });
    out.taskId = task.taskId;
    out.status = (await client.experimental.tasks.getTask(task.taskId)).status;
    await client.close();
  } else if (scenario === 'await') {
    const [url, id] = rest;
    const client = await connect('http', [url]);
    const deadline = Date.now() + 30000;
    let task = await client.experimental.tasks.getTask(id);
    while (!['completed', 'failed', 'cancelled'].includes(task.status) && Date.now() < deadline) {
      await sleep(task.pollInterval ?? 500);
      task = await client.experimental.tasks.getTask(id);
    }
    out.status = task.status;
    out.statusMessage = task.statusMessage ?? null;
    out.result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema).then(() => null, err);
    await client.close();
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
} catch (e) {
  out.failure = err(e);
}
console.log(JSON.stringify(out));
process.exit(0);
