// A small 2025-11-25 MCP server built only from the TypeScript SDK's
// experimental task APIs (`registerToolTask`, `InMemoryTaskStore`,
// `InMemoryTaskMessageQueue`): what a third-party legacy server with tasks
// looks like. Used by tests/modern_front_npm.rs behind the shim.
//
// usage: node sdk_task_server.mjs [--no-ttl]   (stdio)
// --no-ttl: tasks are granted `ttl: null` (unlimited), as the Python SDK's
//           store does for a request without one.
//
// Tools:
// - greet {name}          plain (taskSupport forbidden): "Hello, {name}!"
// - ask_task {}           task required: status input_required, one
//                         elicitation queued with relatedTask (delivered on
//                         the tasks/result stream), ends "Hello, {name}!"
// - direct_ask_task {delayMs}
//                         task required: the elicitation is tagged with the
//                         task but sent straight on the transport (not on
//                         tasks/result), `delayMs` after the task is created
//                         (0: before the CreateTaskResult is even written)
// - bad_task {}           task optional: ends `failed` with an isError result
// - slow_task {ms}        task optional: works for `ms`, stops if cancelled
// - ask_plain {}          plain (taskSupport forbidden): asks for a name on
//                         the open call, no task; ends "Hello, {name}!"
// Prompts:
// - ask_prompt            asks for a name while prompts/get is open; its
//                         message says what came back: "Hello, {name}!",
//                         or "refused: {error}"
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const taskStore = new InMemoryTaskStore();
const server = new McpServer(
  { name: 'sdk-task-server', version: '1.0.0' },
  {
    capabilities: {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    taskStore,
    taskMessageQueue: new InMemoryTaskMessageQueue(),
    defaultTaskPollInterval: 100,
  },
);

const nameQuestion = {
  mode: 'form',
  message: 'What is your name?',
  requestedSchema: {
    type: 'object',
    properties: { name: { type: 'string', title: 'Name' } },
    required: ['name'],
  },
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t, isError) => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });
const greeting = (answer) =>
  answer.action === 'accept' && answer.content?.name ? `Hello, ${answer.content.name}!` : `Hello, stranger (${answer.action})!`;

// Task handlers share these: the SDK's own store serves tasks/get and tasks/result.
const getTask = async (_args, extra) => extra.taskStore.getTask(extra.taskId);
const getTaskResult = async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId);
const noTtl = process.argv.includes('--no-ttl');
const newTask = (extra) =>
  extra.taskStore.createTask({ ttl: noTtl ? null : (extra.taskRequestedTtl ?? 60_000), pollInterval: 100 });

server.registerTool('ask_plain', { description: 'Asks for a name during the call', inputSchema: {} }, async (_args, extra) =>
  text(greeting(await extra.sendRequest({ method: 'elicitation/create', params: nameQuestion }, ElicitResultSchema))),
);

server.registerPrompt('ask_prompt', { description: 'Asks for a name while the prompt is got' }, async (extra) => {
  let said;
  try {
    said = greeting(await extra.sendRequest({ method: 'elicitation/create', params: nameQuestion }, ElicitResultSchema));
  } catch (e) {
    said = `refused: ${e.message}`;
  }
  return { messages: [{ role: 'user', content: { type: 'text', text: said } }] };
});

server.registerTool('greet', { description: 'Says hello', inputSchema: { name: z.string() } }, async ({ name }) =>
  text(`Hello, ${name}!`),
);

server.experimental.tasks.registerToolTask(
  'ask_task',
  { description: 'Asks for a name mid-task (queued elicitation)', inputSchema: {}, execution: { taskSupport: 'required' } },
  {
    createTask: async (_args, extra) => {
      const task = await newTask(extra);
      (async () => {
        await extra.taskStore.updateTaskStatus(task.taskId, 'input_required', 'Waiting for a name');
        const answer = await extra.sendRequest(
          { method: 'elicitation/create', params: nameQuestion },
          ElicitResultSchema,
          { relatedTask: { taskId: task.taskId } },
        );
        await extra.taskStore.updateTaskStatus(task.taskId, 'working', 'Got an answer');
        await extra.taskStore.storeTaskResult(task.taskId, 'completed', text(greeting(answer)));
      })().catch((e) => console.error('ask_task:', e));
      return { task };
    },
    getTask,
    getTaskResult,
  },
);

server.experimental.tasks.registerToolTask(
  'direct_ask_task',
  {
    description: 'Asks for a name mid-task, sending the elicitation directly',
    inputSchema: { delayMs: z.number().optional() },
    execution: { taskSupport: 'required' },
  },
  {
    createTask: async ({ delayMs }, extra) => {
      const task = await newTask(extra);
      const ask = async () => {
        // Tagged with the task, but not queued: straight onto the transport.
        const answer = await server.server.request(
          { method: 'elicitation/create', params: { ...nameQuestion, _meta: { [RELATED_TASK]: { taskId: task.taskId } } } },
          ElicitResultSchema,
        );
        await extra.taskStore.storeTaskResult(task.taskId, 'completed', text(greeting(answer)));
      };
      const run = () => ask().catch((e) => console.error('direct_ask_task:', e));
      if (delayMs) setTimeout(run, delayMs);
      else run(); // written before the CreateTaskResult
      return { task };
    },
    getTask,
    getTaskResult,
  },
);

server.experimental.tasks.registerToolTask(
  'bad_task',
  { description: 'Ends with a tool error', inputSchema: {}, execution: { taskSupport: 'optional' } },
  {
    createTask: async (_args, extra) => {
      const task = await newTask(extra);
      setTimeout(() => {
        // 2025-11-25: a tool result with isError means the task failed.
        extra.taskStore
          .storeTaskResult(task.taskId, 'failed', text('the disk is full', true))
          .catch((e) => console.error('bad_task:', e));
      }, 100);
      return { task };
    },
    getTask,
    getTaskResult,
  },
);

server.experimental.tasks.registerToolTask(
  'slow_task',
  { description: 'Works for a while; cancellable', inputSchema: { ms: z.number() }, execution: { taskSupport: 'optional' } },
  {
    createTask: async ({ ms }, extra) => {
      const task = await newTask(extra);
      (async () => {
        const end = Date.now() + ms;
        while (Date.now() < end) {
          await sleep(50);
          const now = await taskStore.getTask(task.taskId);
          if (!now || now.status === 'cancelled') return;
        }
        await extra.taskStore.storeTaskResult(task.taskId, 'completed', text(`slept ${ms} ms`));
      })().catch((e) => console.error('slow_task:', e));
      return { task };
    },
    getTask,
    getTaskResult,
  },
);

await server.connect(new StdioServerTransport());
// The SDK's stdio transport does not end the process when stdin closes, and
// the task store's ttl timers keep Node alive: leave when the client does.
process.stdin.on('end', () => process.exit(0));
