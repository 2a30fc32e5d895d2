// Drives a 2025-11-25 MCP server with the real TypeScript SDK client: the
// legacy reference server directly, or anything else that speaks 2025-11-25
// on stdio (the shim in front of a modern server, for one).
//
// usage:
//   node legacy_client.mjs [--profile reference|shim|rmcp] [--transcript FILE] -- <command> [args...]
//   node legacy_client.mjs [--profile reference|shim|rmcp] [--transcript FILE] --http URL
//     (Streamable HTTP: the SDK's StreamableHTTPClientTransport against URL)
//   node legacy_client.mjs <server-binary> [transcript.jsonl]
//     (short form: <server-binary> reference-server --revision 2025-11-25)
//
// The profile says what the server under test is expected to do where a
// bridge legitimately differs from the legacy reference server:
// - reference: tools carry the reference taskSupport (greet forbidden, the
//   input and failure tools required), params.task.ttl is honoured.
// - shim: the shim in front of the modern reference server with its default
//   policy (every tool `optional`, since the upstream decides) and a small
//   --page-size; a plain call of a tool the upstream runs as a task is
//   driven to its end by the shim; tasks/list is newest first.
// - rmcp: the shim in front of the rmcp reference server (examples/rmcp_*)
//   with that server's own taskSupport policy (as reference: greet
//   forbidden, the input and failure tools required) and the shim's
//   defaults otherwise: the upstream picks the retention, tasks/list is
//   newest first in pages of 50 (one page here), no resources.
//
// Prints one JSON line per check ({"check":..., "ok":true, ...}) and a final
// {"done":true,"ok":...} line; exits non-zero on the first failure. When a
// transcript path is given, every message seen on the wire is appended as
// {"dir":"c2s"|"s2c","msg":...}.
import { writeFileSync, appendFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  TaskStatusNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

function usage() {
  console.error('usage: node legacy_client.mjs [--profile reference|shim|rmcp] [--transcript FILE] -- <command> [args...]');
  console.error('       node legacy_client.mjs [--profile reference|shim|rmcp] [--transcript FILE] --http URL');
  console.error('       node legacy_client.mjs <server-binary> [transcript.jsonl]');
  process.exit(2);
}
function parseArgs(argv) {
  const sep = argv.indexOf('--');
  const http = argv.indexOf('--http');
  if (sep < 0 && http < 0) {
    // Short form, kept for callers of the first version of this script.
    const [bin, transcript] = argv;
    if (!bin) usage();
    return { profile: 'reference', transcript, command: bin, args: ['reference-server', '--revision', '2025-11-25'] };
  }
  const opts = { profile: 'reference', transcript: undefined, url: undefined };
  const flags = sep < 0 ? argv : argv.slice(0, sep);
  for (let i = 0; i < flags.length; i += 1) {
    if (flags[i] === '--profile') opts.profile = flags[++i];
    else if (flags[i] === '--transcript') opts.transcript = flags[++i];
    else if (flags[i] === '--http') opts.url = flags[++i];
    else usage();
  }
  if (!['reference', 'shim', 'rmcp'].includes(opts.profile)) usage();
  if (opts.url) {
    if (sep >= 0) usage(); // a URL or a command, not both
    return { ...opts, command: undefined, args: [] };
  }
  const [command, ...args] = argv.slice(sep + 1);
  if (!command) usage();
  return { ...opts, command, args };
}
const { profile, transcript, url, command, args } = parseArgs(process.argv.slice(2));
const SHIM = profile === 'shim';
// Through the shim (to a modern upstream): retention, list order and
// paging are the shim's.
const BRIDGED = profile !== 'reference';
// Tools carry the server's declared taskSupport (not the shim's default
// "everything optional").
const DECLARED = profile !== 'shim';

// Hard bound on the whole run: a hung server fails the test, never hangs it.
setTimeout(() => fail('global', new Error('timed out after 60 s')), 60_000).unref();

const RELATED = 'io.modelcontextprotocol/related-task';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function fail(check, err) {
  console.log(JSON.stringify({ check, ok: false, error: String(err?.stack ?? err) }));
  console.log(JSON.stringify({ done: true, ok: false }));
  process.exit(1);
}
function assert(cond, what) {
  if (!cond) throw new Error(`assertion failed: ${what}`);
}
async function check(name, fn) {
  try {
    const details = (await fn()) ?? {};
    console.log(JSON.stringify({ check: name, ok: true, ...details }));
  } catch (e) {
    fail(name, e);
  }
}
async function expectError(promise, code, what) {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof McpError, `${what}: expected McpError, got ${e}`);
    assert(e.code === code, `${what}: expected code ${code}, got ${e.code} (${e.message})`);
    return e;
  }
  throw new Error(`${what}: expected error ${code}, got a result`);
}
const textOf = (r) => r?.content?.[0]?.text ?? '';

// --- transport with a recording tap -------------------------------------
const transport = url
  ? new StreamableHTTPClientTransport(new URL(url))
  : new StdioClientTransport({ command, args, stderr: 'inherit' });
if (transcript) writeFileSync(transcript, '');
const record = (dir, msg) => {
  if (transcript) appendFileSync(transcript, JSON.stringify({ dir, msg }) + '\n');
};
const send = transport.send.bind(transport);
transport.send = async (msg, opts) => {
  record('c2s', msg);
  try {
    return await send(msg, opts);
  } catch (e) {
    // The SDK hands a failed send of an answer only to onerror: on
    // stderr, a run that then hangs says which message never left.
    console.error(`legacy_client: sending ${JSON.stringify(msg.id ?? msg.method)} failed: ${e}`);
    throw e;
  }
};
transport.onerror = (e) => console.error(`legacy_client: transport error: ${e}`);
// Protocol.connect() assigns onmessage; hand it a wrapper that records first.
let onmessage;
Object.defineProperty(transport, 'onmessage', {
  configurable: true,
  get: () => onmessage && ((msg, extra) => { record('s2c', msg); onmessage(msg, extra); }),
  set: (f) => { onmessage = f; },
});

// --- client ---------------------------------------------------------------
const client = new Client(
  { name: 'mcp-tasks-shim-legacy-peer', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
const elicitations = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  const props = req.params.requestedSchema?.properties ?? {};
  elicitations.push({ message: req.params.message, related: req.params._meta?.[RELATED]?.taskId ?? null });
  const content = {};
  if ('confirm' in props) content.confirm = true;
  if ('name' in props) content.name = 'Alice';
  return { action: 'accept', content };
});
const statusNotes = [];
client.setNotificationHandler(TaskStatusNotificationSchema, (n) => { statusNotes.push(n.params); });
const resourceUpdates = [];
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { resourceUpdates.push(n.params.uri); });

const created = [];
async function createTask(name, args, ttl = 60_000) {
  const r = await client.request(
    { method: 'tools/call', params: { name, arguments: args } },
    CreateTaskResultSchema,
    { task: { ttl }, timeout: 20_000 },
  );
  created.push(r.task.taskId);
  return r.task;
}
async function pollUntil(taskId, done) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const t = await client.experimental.tasks.getTask(taskId);
    if (done(t)) return t;
    if (Date.now() > deadline) throw new Error(`task ${taskId} stuck in ${t.status}`);
    await sleep(t.pollInterval ?? 100);
  }
}
const terminal = (t) => ['completed', 'failed', 'cancelled'].includes(t.status);

await check('initialize', async () => {
  await client.connect(transport);
  const caps = client.getServerCapabilities();
  assert(caps?.tasks?.requests?.tools?.call, 'tasks.requests.tools.call advertised');
  assert(caps.tasks.list && caps.tasks.cancel, 'tasks.list and tasks.cancel advertised');
  return { server: client.getServerVersion() };
});

await check('tools/list taskSupport', async () => {
  const { tools } = await client.listTools();
  const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
  if (!DECLARED) {
    // The modern upstream decides per request; the shim's default policy
    // tells legacy clients every tool may run either way.
    for (const [name, s] of Object.entries(support)) assert(s === 'optional', `${name} optional, got ${s}`);
    assert(Object.keys(support).length === 9, `nine tools: ${Object.keys(support)}`);
  } else {
    assert(support.greet === 'forbidden', 'greet forbidden');
    assert(support.slow_compute === 'optional', 'slow_compute optional');
    assert(support.failing_job === 'required', 'failing_job required');
  }
  return { support };
});

await check('plain call', async () => {
  const r = await client.callTool({ name: 'greet', arguments: { name: 'World' } });
  assert(textOf(r) === 'Hello, World!', `greet text: ${textOf(r)}`);
  const s = await client.callTool({ name: 'slow_compute', arguments: { seconds: 0.1, label: 'plain' } });
  assert(textOf(s).includes('plain'), 'optional tool runs plain without params.task');
});

// The legacy reference server's one resource, a count each greet changes
// (what the shim's restart replay of subscriptions is tested with).
if (profile === 'reference') {
  await check('resource subscription', async () => {
    const GREETINGS = 'mcp-tasks-shim://reference/greetings';
    assert(client.getServerCapabilities()?.resources?.subscribe === true, 'resources.subscribe advertised');
    const { resources } = await client.listResources();
    assert(resources.some((r) => r.uri === GREETINGS), `listed: ${resources.map((r) => r.uri)}`);
    const count = async () => parseInt((await client.readResource({ uri: GREETINGS })).contents[0].text, 10);
    const updates = () => resourceUpdates.filter((u) => u === GREETINGS).length;
    const before = await count();
    await client.subscribeResource({ uri: GREETINGS });
    await client.callTool({ name: 'greet', arguments: { name: 'Sub' } });
    for (let i = 0; i < 100 && updates() === 0; i += 1) await sleep(20);
    assert(updates() === 1, `updates after one greet: ${updates()}`);
    assert((await count()) === before + 1, 'the count went up by one');
    await client.unsubscribeResource({ uri: GREETINGS });
    await client.callTool({ name: 'greet', arguments: { name: 'Unsub' } });
    await sleep(200);
    assert(updates() === 1, `updates after unsubscribing: ${updates()}`);
    await expectError(client.readResource({ uri: 'mcp-tasks-shim://reference/nothing' }), -32002, 'unknown resource');
    return { updates: updates() };
  });
}

if (SHIM) {
  // The modern upstream answers these with a task; the shim drives it to its
  // end and the legacy client sees a plain call.
  await check('plain call of an upstream task', async () => {
    const before = elicitations.length;
    const f = await client.callTool({ name: 'failing_job', arguments: {} });
    assert(f.isError === true && /failed/.test(textOf(f)), `tool error result: ${JSON.stringify(f)}`);
    await expectError(client.callTool({ name: 'protocol_error_job', arguments: {} }), -32603, 'protocol_error_job plain');
    const c = await client.callTool({ name: 'confirm_delete', arguments: { filename: 'plain.txt' } });
    assert(textOf(c) === 'Deleted plain.txt', `elicitation answer reached the tool: ${textOf(c)}`);
    const asked = elicitations.slice(before);
    assert(asked.length === 1 && asked[0].related === null, `one untagged question: ${JSON.stringify(asked)}`);
  });
}

await check('create + poll + result', async () => {
  const task = await createTask('slow_compute', { seconds: 0.5, label: 'ts-poll' });
  assert(task.status === 'working', `new task is working, got ${task.status}`);
  if (BRIDGED) {
    // The modern server picks the retention; the shim reports the upstream's.
    assert(task.ttl === null || Number.isInteger(task.ttl), `ttl is ms or null, got ${task.ttl}`);
  } else {
    assert(task.ttl === 60_000, `ttl honoured, got ${task.ttl}`);
  }
  const seen = new Set();
  const done = await pollUntil(task.taskId, (t) => { seen.add(t.status); return terminal(t); });
  assert(done.status === 'completed', `completed, got ${done.status}`);
  const r = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
  assert(textOf(r).includes('ts-poll'), `result mentions label: ${textOf(r)}`);
  assert(r._meta?.[RELATED]?.taskId === task.taskId, 'related-task _meta on tasks/result');
  return { statuses: [...seen] };
});

await check('tasks/result blocks', async () => {
  const task = await createTask('slow_compute', { seconds: 1, label: 'ts-block' });
  const t0 = Date.now();
  const r = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
  const waited = Date.now() - t0;
  assert(waited >= 700, `blocked until done (waited ${waited} ms)`);
  assert(textOf(r).includes('ts-block'), 'result after blocking');
  return { waitedMs: waited };
});

await check('tool error ends failed', async () => {
  const task = await createTask('failing_job', {});
  const r = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
  assert(r.isError === true, 'tasks/result returns the CallToolResult with isError');
  const t = await client.experimental.tasks.getTask(task.taskId);
  assert(t.status === 'failed', `2025-11-25: isError means failed, got ${t.status}`);
});

await check('protocol error', async () => {
  const task = await createTask('protocol_error_job', {});
  await expectError(client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema), -32603, 'tasks/result');
  const t = await client.experimental.tasks.getTask(task.taskId);
  assert(t.status === 'failed', `failed, got ${t.status}`);
});

await check('elicitation during input_required', async () => {
  const before = elicitations.length;
  const messages = [];
  for await (const m of client.experimental.tasks.callToolStream(
    { name: 'confirm_delete', arguments: { filename: 'notes.txt' } },
    CallToolResultSchema,
    { task: { ttl: 60_000 } },
  )) {
    messages.push(m.type === 'taskStatus' ? `status:${m.task.status}` : m.type);
    if (m.type === 'taskCreated') created.push(m.task.taskId);
    if (m.type === 'error') throw m.error;
    if (m.type === 'result') assert(textOf(m.result) === 'Deleted notes.txt', `text: ${textOf(m.result)}`);
  }
  const asked = elicitations.slice(before);
  assert(asked.length === 1 && asked[0].message === 'Delete notes.txt?', `one question: ${JSON.stringify(asked)}`);
  assert(asked[0].related === created.at(-1), 'elicitation carries related-task _meta');
  assert(messages.includes('status:input_required'), `saw input_required: ${messages}`);
  return { messages };
});

await check('callToolStream, task chosen by the SDK', async () => {
  // No options.task: the SDK adds one itself because tools/list said the
  // tool supports tasks (Client.isToolTask).
  const messages = [];
  let text;
  for await (const m of client.experimental.tasks.callToolStream(
    { name: 'slow_compute', arguments: { seconds: 0.3, label: 'ts-stream' } },
  )) {
    messages.push(m.type === 'taskStatus' ? `status:${m.task.status}` : m.type);
    if (m.type === 'taskCreated') created.push(m.task.taskId);
    if (m.type === 'error') throw m.error;
    if (m.type === 'result') text = textOf(m.result);
  }
  assert(messages[0] === 'taskCreated', `stream starts with taskCreated: ${messages}`);
  assert(messages.at(-1) === 'result' && text.includes('ts-stream'), `stream ends with the result: ${messages} ${text}`);
  assert(messages.includes('status:completed'), `saw completed: ${messages}`);
  return { messages };
});

await check('callToolStream, failed task', async () => {
  const messages = [];
  for await (const m of client.experimental.tasks.callToolStream(
    { name: 'failing_job', arguments: {} }, CallToolResultSchema, { task: { ttl: 60_000 } },
  )) {
    messages.push(m.type === 'taskStatus' ? `status:${m.task.status}` : m.type);
    if (m.type === 'taskCreated') created.push(m.task.taskId);
  }
  assert(messages.includes('status:failed') && messages.at(-1) === 'error', `ends failed: ${messages}`);
  return { messages };
});

await check('two elicitations at once', async () => {
  const task = await createTask('multi_input', {});
  await pollUntil(task.taskId, (t) => t.status === 'input_required');
  const r = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
  assert(/Alice/.test(textOf(r)) && /true/.test(textOf(r)), `both answers in: ${textOf(r)}`);
  return { text: textOf(r) };
});

await check('input before the task exists', async () => {
  const before = elicitations.length;
  const task = await createTask('test_tool_with_task', {});
  const asked = elicitations.slice(before);
  assert(asked.length === 1 && asked[0].related === null, 'plain elicitation before CreateTaskResult');
  const r = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
  assert(textOf(r).includes('Alice'), `answer in final text: ${textOf(r)}`);
});

await check('cancel', async () => {
  const task = await createTask('slow_compute', { seconds: 30, label: 'ts-cancel' });
  const c = await client.experimental.tasks.cancelTask(task.taskId);
  assert(c.status === 'cancelled' && c.taskId === task.taskId, `cancel returns the cancelled task: ${JSON.stringify(c)}`);
  const t = await client.experimental.tasks.getTask(task.taskId);
  assert(t.status === 'cancelled', 'stays cancelled');
  await expectError(client.experimental.tasks.cancelTask(task.taskId), -32602, 'double cancel');
  await expectError(client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema), -32602, 'result of cancelled');
});

await check('unknown task id', async () => {
  await expectError(client.experimental.tasks.getTask('no-such-task'), -32602, 'tasks/get');
  await expectError(client.experimental.tasks.cancelTask('no-such-task'), -32602, 'tasks/cancel');
  await expectError(client.experimental.tasks.getTaskResult('no-such-task', CallToolResultSchema), -32602, 'tasks/result');
});

await check('tasks/list pages', async () => {
  const seen = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.experimental.tasks.listTasks(cursor);
    pages += 1;
    seen.push(...page.tasks.map((t) => t.taskId));
    cursor = page.nextCursor;
  } while (cursor && pages < 50);
  for (const id of created) assert(seen.includes(id), `task ${id} listed`);
  assert(new Set(seen).size === seen.length, `no task listed twice: ${seen}`);
  if (profile !== 'rmcp') assert(pages > 1, `paginated (${pages} pages for ${seen.length} tasks)`);
  if (BRIDGED) {
    const ours = seen.filter((id) => created.includes(id));
    assert(JSON.stringify(ours) === JSON.stringify([...created].reverse()), `newest first: ${ours} vs ${created}`);
  }
  await expectError(client.experimental.tasks.listTasks('bogus'), -32602, 'bad cursor');
  return { pages, tasks: seen.length };
});

await check('taskSupport violations', async () => {
  await expectError(client.callTool({ name: 'no_such_tool', arguments: {} }), -32602, 'unknown tool');
  if (!DECLARED) return { skipped: 'every tool is optional behind the shim by default' };
  await expectError(
    client.request({ method: 'tools/call', params: { name: 'failing_job', arguments: {} } }, CallToolResultSchema),
    -32601, 'required tool without params.task');
  await expectError(
    client.request({ method: 'tools/call', params: { name: 'greet', arguments: { name: 'x' } } }, CreateTaskResultSchema, { task: {} }),
    -32601, 'forbidden tool with params.task');
});

await check('status notifications', async () => {
  await sleep(200);
  const statuses = new Set(statusNotes.map((n) => n.status));
  assert(statuses.has('completed') && statuses.has('failed') && statuses.has('input_required'),
    `notifications/tasks/status seen: ${[...statuses]}`);
  return { count: statusNotes.length };
});

await client.close();
console.log(JSON.stringify({ done: true, ok: true }));
process.exit(0);
