// A short, deterministic 2025-11-25 session driven by the real TypeScript
// SDK client, for recording (tests/replay.rs): initialize, tools/list, plain
// calls, a call that asks the client a question while it is open, and task
// calls read with tasks/result (which blocks until the task ends) and then
// tasks/get. No polling while a task works, so two runs see the same
// statuses.
//
// usage: node replay_client.mjs --plan everything|sdk|reference -- <command> [args...]
//   everything: @modelcontextprotocol/server-everything (stdio)
//   sdk:        tests/peers/sdk_task_server.mjs
//   reference:  mcp-tasks-shim reference-server --revision 2025-11-25
// Prints {"done":true} at the end; exits non-zero on a failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  GetTaskResultSchema,
} from '@modelcontextprotocol/sdk/types.js';

setTimeout(() => { console.error('replay_client: timed out after 60 s'); process.exit(1); }, 60_000).unref();

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const plan = argv[argv.indexOf('--plan') + 1];
const [command, ...args] = argv.slice(sep + 1);
if (sep < 0 || !command) {
  console.error('usage: node replay_client.mjs --plan everything|sdk|reference -- <command> [args...]');
  process.exit(2);
}

const PLANS = {
  everything: [
    ['call', 'echo', { message: 'hello' }],
    ['call', 'trigger-elicitation-request', {}],
    ['task', 'simulate-research-query', { topic: 'tides', ambiguous: false }],
  ],
  sdk: [
    ['call', 'greet', { name: 'Ada' }],
    ['call', 'ask_plain', {}],
    ['task', 'slow_task', { ms: 50 }],
    ['task', 'ask_task', {}],
  ],
  reference: [
    ['call', 'greet', { name: 'Ada' }],
    ['task', 'slow_compute', { seconds: 0.1, label: 'replayed' }],
    ['task', 'confirm_delete', { filename: 'notes.txt' }],
  ],
};
const steps = PLANS[plan];
if (!steps) { console.error(`unknown plan ${plan}`); process.exit(2); }

const client = new Client(
  { name: 'mcp-tasks-shim-replay-peer', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  const props = req.params.requestedSchema?.properties ?? {};
  if (!('name' in props) && !('confirm' in props)) return { action: 'decline' };
  const content = {};
  if ('name' in props) content.name = 'Ada';
  if ('confirm' in props) content.confirm = true;
  return { action: 'accept', content };
});
await client.connect(new StdioClientTransport({ command, args, stderr: 'inherit' }));
await client.listTools();
for (const [kind, name, args] of steps) {
  if (kind === 'call') {
    await client.request({ method: 'tools/call', params: { name, arguments: args } }, CallToolResultSchema);
    continue;
  }
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: { ttl: 60000 } } },
    CreateTaskResultSchema,
  );
  const { taskId } = created.task;
  await client.request({ method: 'tasks/result', params: { taskId } }, CallToolResultSchema);
  await client.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema);
}
await client.close();
console.log(JSON.stringify({ done: true }));
