// An MCP server whose tools run only as tasks (the 2025-11-25 revision's
// `execution.taskSupport: "required"`), on the official TypeScript SDK's
// task runtime: tests/all/mcp_sources/tasks.rs calls them through lovia.
//
//   node task_server.mjs              stdio
//   node task_server.mjs --http PORT  streamable HTTP on 127.0.0.1:PORT
//                                     (0: any; the port is printed first)
//
// Every tool call, every cancelled task and every cancelled plain call is
// appended to $CALL_LOG as a JSON line, so a test sees what reached the
// server.
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';

const log = (entry) => {
  if (process.env.CALL_LOG) appendFileSync(process.env.CALL_LOG, JSON.stringify(entry) + '\n');
};

// The SDK cancels a task (`tasks/cancel`) through its store: logged here.
class LoggingStore extends InMemoryTaskStore {
  async updateTaskStatus(taskId, status, statusMessage, sessionId) {
    if (status === 'cancelled') log({ tool: 'cancelled', taskId });
    return super.updateTaskStatus(taskId, status, statusMessage, sessionId);
  }
}

function build() {
  const taskStore = new LoggingStore();
  const server = new McpServer(
    { name: 'lovia-task-server', version: '1.0.0' },
    {
      capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
      taskMessageQueue: new InMemoryTaskMessageQueue(),
    },
  );
  const getters = {
    getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
  };
  // Completes after `ms`, polled every 50 ms.
  server.experimental.tasks.registerToolTask(
    'slow',
    { description: 'Sleeps, as a task.', inputSchema: { ms: z.number() }, execution: { taskSupport: 'required' } },
    {
      createTask: async ({ ms }, extra) => {
        log({ tool: 'slow', ms });
        const task = await extra.taskStore.createTask({ ttl: 60_000, pollInterval: 50 });
        setTimeout(() => {
          extra.taskStore
            .storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `slept ${ms} ms` }] })
            .catch(() => {});
        }, ms);
        return { task };
      },
      ...getters,
    },
  );
  // Fails as a tool: its result is an error the model reads.
  server.experimental.tasks.registerToolTask(
    'fails',
    { description: 'Fails, as a task.', inputSchema: {}, execution: { taskSupport: 'required' } },
    {
      createTask: async (_args, extra) => {
        log({ tool: 'fails' });
        const task = await extra.taskStore.createTask({ ttl: 60_000, pollInterval: 50 });
        setTimeout(() => {
          extra.taskStore
            .storeTaskResult(task.taskId, 'failed', {
              content: [{ type: 'text', text: 'the disk is full' }],
              isError: true,
            })
            .catch(() => {});
        }, 20);
        return { task };
      },
      ...getters,
    },
  );
  // Never completes: lovia's timeout or cancel must cancel the task.
  server.experimental.tasks.registerToolTask(
    'hang',
    { description: 'Never ends.', inputSchema: {}, execution: { taskSupport: 'required' } },
    {
      createTask: async (_args, extra) => {
        log({ tool: 'hang' });
        const task = await extra.taskStore.createTask({ ttl: 60_000, pollInterval: 50 });
        return { task };
      },
      ...getters,
    },
  );
  // A plain call that waits until the client cancels it (notifications/cancelled).
  server.registerTool('wait', { description: 'Waits for its cancel.', inputSchema: {} }, async (_args, extra) => {
    log({ tool: 'wait' });
    await new Promise((resolve) => extra.signal.addEventListener('abort', resolve));
    log({ tool: 'aborted' });
    return { content: [{ type: 'text', text: 'aborted' }] };
  });
  // A tool that runs as a plain call.
  server.registerTool('echo', { description: 'Echoes.', inputSchema: { text: z.string() } }, async ({ text }) => {
    log({ tool: 'echo', text });
    return { content: [{ type: 'text', text }] };
  });
  return server;
}

const http = process.argv.indexOf('--http');
if (http < 0) {
  await build().connect(new StdioServerTransport());
} else {
  // One session per client: the transport gives each its id.
  const sessions = new Map();
  const listener = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    const id = req.headers['mcp-session-id'];
    let transport = id && sessions.get(id);
    if (!transport) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      await build().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  });
  listener.listen(Number(process.argv[http + 1]), '127.0.0.1', () => {
    console.log(listener.address().port);
  });
}
