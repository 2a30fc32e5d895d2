// A 2025-11-25 client (the real TypeScript SDK client) that answers
// elicitations, run against a server whose tasks ask for input:
// `confirm_delete` (one question) and `multi_input` (two at once).
//
// usage:
//   node poll_only_client.mjs --mode poll|result [--transcript FILE] -- <command> [args...]
//   node poll_only_client.mjs --mode poll|result [--transcript FILE] --http URL
//
// Modes:
// - poll: polls only `tasks/get` until the task is terminal, and calls
//   `tasks/result` only then, as some 2025-11-25 clients do: the server
//   must send the task's questions itself.
// - result: polls `tasks/get` until the task is `input_required`, then
//   waits on `tasks/result`, which carries the questions.
// In both, each question must arrive exactly once, tagged with its task.
//
// Prints one JSON line per check ({"check":..., "ok":true, ...}) and a final
// {"done":true,"ok":...} line; exits non-zero on the first failure. With a
// transcript path, every message on the wire is appended as
// {"dir":"c2s"|"s2c","msg":...}.
import { writeFileSync, appendFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

function usage() {
  console.error('usage: node poll_only_client.mjs --mode poll|result [--transcript FILE] (-- <command> [args...] | --http URL)');
  process.exit(2);
}
const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const flags = sep < 0 ? argv : argv.slice(0, sep);
const opts = { mode: undefined, transcript: undefined, url: undefined };
for (let i = 0; i < flags.length; i += 1) {
  if (flags[i] === '--mode') opts.mode = flags[++i];
  else if (flags[i] === '--transcript') opts.transcript = flags[++i];
  else if (flags[i] === '--http') opts.url = flags[++i];
  else usage();
}
if (!['poll', 'result'].includes(opts.mode)) usage();
const [command, ...args] = sep < 0 ? [] : argv.slice(sep + 1);
if (!opts.url === !command) usage();

// Hard bound on the whole run: a task left waiting for input fails the
// test, never hangs it.
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
const textOf = (r) => r?.content?.[0]?.text ?? '';

const transport = opts.url
  ? new StreamableHTTPClientTransport(new URL(opts.url))
  : new StdioClientTransport({ command, args, stderr: 'inherit' });
if (opts.transcript) writeFileSync(opts.transcript, '');
const record = (dir, msg) => {
  if (opts.transcript) appendFileSync(opts.transcript, JSON.stringify({ dir, msg }) + '\n');
};
const send = transport.send.bind(transport);
transport.send = async (msg, o) => {
  record('c2s', msg);
  return send(msg, o);
};
let onmessage;
Object.defineProperty(transport, 'onmessage', {
  configurable: true,
  get: () => onmessage && ((msg, extra) => { record('s2c', msg); onmessage(msg, extra); }),
  set: (f) => { onmessage = f; },
});

const client = new Client(
  { name: 'mcp-tasks-shim-poll-only-peer', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
// Every question received, by the task it names (null: untagged).
const questions = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  const props = req.params.requestedSchema?.properties ?? {};
  questions.push({ message: req.params.message, task: req.params._meta?.[RELATED]?.taskId ?? null });
  const content = {};
  if ('confirm' in props) content.confirm = true;
  if ('name' in props) content.name = 'Alice';
  return { action: 'accept', content };
});

async function createTask(name, toolArgs) {
  const r = await client.request(
    { method: 'tools/call', params: { name, arguments: toolArgs } },
    CreateTaskResultSchema,
    { task: { ttl: 60_000 }, timeout: 20_000 },
  );
  return r.task.taskId;
}
// Polls tasks/get until `done` holds; the statuses seen on the way.
async function pollUntil(taskId, done) {
  const seen = [];
  const deadline = Date.now() + 30_000;
  for (;;) {
    const t = await client.experimental.tasks.getTask(taskId);
    if (seen.at(-1) !== t.status) seen.push(t.status);
    if (done(t)) return seen;
    if (Date.now() > deadline) throw new Error(`task ${taskId} stuck in ${t.status} (seen ${seen})`);
    await sleep(Math.min(t.pollInterval ?? 100, 200));
  }
}
const terminal = (t) => ['completed', 'failed', 'cancelled'].includes(t.status);

// Runs `tool` as a task the way the mode says; checks its result and that
// each of `expected` (question messages) came exactly once, for the task.
async function runTask(tool, toolArgs, expected, resultText) {
  const taskId = await createTask(tool, toolArgs);
  let seen;
  if (opts.mode === 'poll') {
    seen = await pollUntil(taskId, terminal);
    assert(seen.at(-1) === 'completed', `completed by polling tasks/get alone: ${seen}`);
  } else {
    seen = await pollUntil(taskId, (t) => t.status === 'input_required' || terminal(t));
    assert(seen.at(-1) === 'input_required', `input_required first: ${seen}`);
  }
  const r = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
  assert(textOf(r) === resultText, `result ${JSON.stringify(textOf(r))}, expected ${JSON.stringify(resultText)}`);
  const mine = questions.filter((q) => q.task === taskId).map((q) => q.message);
  const untagged = questions.filter((q) => q.task === null);
  assert(untagged.length === 0, `untagged questions: ${JSON.stringify(untagged)}`);
  assert(
    mine.length === expected.length && expected.every((m) => mine.filter((x) => x === m).length === 1),
    `each question once: got ${JSON.stringify(mine)}, expected ${JSON.stringify(expected)}`,
  );
  return { taskId, statuses: seen, questions: mine.length };
}

await check('initialize', async () => {
  await client.connect(transport);
  assert(client.getServerCapabilities()?.tasks?.requests?.tools?.call, 'task-augmented tools/call advertised');
});

await check('confirm_delete', () => runTask(
  'confirm_delete', { filename: `${opts.mode}.txt` }, [`Delete ${opts.mode}.txt?`], `Deleted ${opts.mode}.txt`,
));

await check('multi_input', () => runTask(
  'multi_input', {}, ['What is your name?', 'Proceed?'],
  'multi_input answers: first = accept {"name":"Alice"}, second = accept {"confirm":true}',
));

await check('no question twice', async () => {
  const ids = new Set();
  for (const q of questions) ids.add(`${q.task}/${q.message}`);
  assert(ids.size === questions.length, `repeated questions: ${JSON.stringify(questions)}`);
  return { questions: questions.length };
});

await client.close();
console.log(JSON.stringify({ done: true, ok: true }));
process.exit(0);
