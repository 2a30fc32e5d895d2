// A 2025-11-25 client (the TypeScript SDK) asks for a task of a tool the
// server marked `forbidden`, the way the SDK sends any task-augmented call
// (`client.request(..., { task })`), and must get -32601.
//
// usage: node forbidden_task_client.mjs TOOL TRANSCRIPT -- <command> [args...]
//
// Prints one JSON line: {"ok":true,"code":...,"support":...} or
// {"ok":false,"error":...}; every message on the wire is appended to
// TRANSCRIPT as {"dir":"c2s"|"s2c","msg":...}.
import { writeFileSync, appendFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateTaskResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const [tool, transcript] = argv.slice(0, sep);
const [command, ...args] = argv.slice(sep + 1);
const transport = new StdioClientTransport({ command, args, stderr: 'inherit' });
writeFileSync(transcript, '');
const record = (dir, msg) => appendFileSync(transcript, JSON.stringify({ dir, msg }) + '\n');
const send = transport.send.bind(transport);
transport.send = async (msg, opts) => {
  record('c2s', msg);
  return send(msg, opts);
};
let onmessage;
Object.defineProperty(transport, 'onmessage', {
  configurable: true,
  get: () => onmessage && ((msg, extra) => { record('s2c', msg); onmessage(msg, extra); }),
  set: (f) => { onmessage = f; },
});
const guard = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, error: 'timed out' }));
  process.exit(1);
}, 60_000);

const client = new Client({ name: 'forbidden-task-peer', version: '1.0.0' }, { capabilities: {} });
let out;
try {
  await client.connect(transport);
  const tools = await client.listTools();
  const support = tools.tools.find((t) => t.name === tool)?.execution?.taskSupport ?? null;
  try {
    const r = await client.request(
      { method: 'tools/call', params: { name: tool, arguments: { seconds: 0, label: 'forbidden' } } },
      CreateTaskResultSchema,
      { task: { ttl: 60_000 }, timeout: 20_000 },
    );
    out = { ok: false, error: `expected -32601, got a result: ${JSON.stringify(r)}`, support };
  } catch (e) {
    out = e instanceof McpError
      ? { ok: true, code: e.code, message: e.message, support }
      : { ok: false, error: String(e?.stack ?? e), support };
  }
} catch (e) {
  out = { ok: false, error: String(e?.stack ?? e) };
}
console.log(JSON.stringify(out));
clearTimeout(guard);
await client.close();
process.exit(out.ok ? 0 : 1);
