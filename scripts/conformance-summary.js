// Reads the checks.json files the MCP conformance suite wrote for each
// scenario, prints a per-scenario table and decides the run's verdict
// (scripts/conformance.sh runs it; it holds the expected numbers).
//
//   node conformance-summary.js --expected-passed N [--allow-skip CHECK_ID]...
//        RESULTS_DIR SCENARIO...
//   node conformance-summary.js --self-test --expected-passed N [--allow-skip ID]...
//
// The run passes only when no check failed, every scenario left results,
// at least N checks passed and every skipped check is one of the allowed
// ones: a suite version (or a server) that skips or drops checks cannot
// pass by failing nothing. Exit status: 0 pass, 1 fail, 2 usage.
// --self-test feeds the verdict doctored results (fewer passes, an
// undeclared skip, a failure, a scenario without results) and exits 0
// only if it rejects each of them, naming the reason, and accepts the
// conforming one.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

function usage(msg) {
  console.error(`conformance-summary.js: ${msg}`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { expectedPassed: null, allowedSkips: [], selfTest: false, rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--expected-passed') {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n <= 0) usage(`--expected-passed wants a positive integer, got ${argv[i]}`);
      opts.expectedPassed = n;
    } else if (a === '--allow-skip') {
      if (!argv[i + 1]) usage('--allow-skip wants a check id');
      opts.allowedSkips.push(argv[++i]);
    } else if (a === '--self-test') {
      opts.selfTest = true;
    } else {
      opts.rest.push(a);
    }
  }
  if (opts.expectedPassed === null) usage('--expected-passed N is required');
  return opts;
}

// The table and the verdict for the results under `dir`: `{ lines, problems }`,
// the run passing when `problems` is empty.
function summarise(dir, scenarios, expectedPassed, allowedSkips) {
  const rows = [];
  const total = { pass: 0, fail: 0, warn: 0, skip: 0 };
  const problems = [];
  for (const s of scenarios) {
    const row = { s, pass: 0, fail: 0, warn: 0, skip: 0, note: '' };
    const base = path.join(dir, s);
    const runs = fs.existsSync(base)
      ? fs.readdirSync(base).filter(d => fs.existsSync(path.join(base, d, 'checks.json')))
      : [];
    if (runs.length === 0) {
      row.fail = 1;
      row.note = 'no results (timeout or crash)';
      problems.push(`FAILED ${s}: no results; see ${s}.log`);
    } else {
      const checks = JSON.parse(fs.readFileSync(path.join(base, runs.sort().pop(), 'checks.json'), 'utf8'));
      for (const c of checks) {
        if (c.status === 'SUCCESS') row.pass++;
        else if (c.status === 'FAILURE') {
          row.fail++;
          problems.push(`FAILED ${s} / ${c.id}: ${c.errorMessage ?? ''}`);
        } else if (c.status === 'WARNING') row.warn++;
        else if (c.status === 'SKIPPED') {
          row.skip++;
          if (allowedSkips.includes(c.id)) {
            row.note = 'skipped by the suite (allowed)';
          } else {
            row.note = 'skipped: not an allowed skip';
            problems.push(`UNDECLARED SKIP ${s} / ${c.id}: only ${allowedSkips.join(', ') || 'none'} may be skipped (${c.errorMessage ?? 'no reason given'})`);
          }
        } else {
          row.fail++;
          problems.push(`FAILED ${s} / ${c.id}: unknown status ${JSON.stringify(c.status)}`);
        }
      }
    }
    for (const k of ['pass', 'fail', 'warn', 'skip']) total[k] += row[k];
    rows.push(row);
  }
  if (total.pass < expectedPassed) {
    problems.push(`TOO FEW PASSED: ${total.pass} checks passed, ${expectedPassed} expected (EXPECTED_PASSED in scripts/conformance.sh)`);
  }
  const w = Math.max(...scenarios.map(s => s.length), 8);
  const line = (a, b, c, d, e, f) =>
    `${a.padEnd(w)}  ${String(b).padStart(6)}  ${String(c).padStart(6)}  ${String(d).padStart(8)}  ${String(e).padStart(7)}  ${f}`;
  const lines = [line('scenario', 'passed', 'failed', 'warnings', 'skipped', '')];
  for (const r of rows) lines.push(line(r.s, r.pass, r.fail, r.warn, r.skip, r.note));
  lines.push(line('total', total.pass, total.fail, total.warn, total.skip, ''));
  lines.push(...problems);
  if (total.pass > expectedPassed) {
    lines.push(`note: ${total.pass} checks passed, more than the ${expectedPassed} expected: raise EXPECTED_PASSED in scripts/conformance.sh`);
  }
  lines.push(`${total.pass} passed (${expectedPassed} expected), ${total.fail} failed, ${total.skip} skipped`);
  return { lines, problems };
}

// Writes `checks` (scenario -> list of statuses, or null for no results)
// as the suite would, under a fresh folder; returns it.
function fixture(checks) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conformance-fixture-'));
  for (const [s, statuses] of Object.entries(checks)) {
    const runDir = path.join(dir, s, `${s}-2026-01-01T00-00-00`);
    fs.mkdirSync(runDir, { recursive: true });
    if (statuses === null) continue;
    const list = statuses.map(([id, status]) => ({ id, name: id, status, errorMessage: status === 'SUCCESS' ? undefined : `doctored ${status}` }));
    fs.writeFileSync(path.join(runDir, 'checks.json'), JSON.stringify(list));
  }
  return dir;
}

function selfTest(expectedPassed, allowedSkips) {
  // A conforming run: the expected passes spread over three scenarios,
  // and each allowed skip as its own scenario, as the suite reports it.
  const passes = n => Array.from({ length: n }, (_, i) => [`check-${i}`, 'SUCCESS']);
  const third = Math.floor(expectedPassed / 3);
  const good = () => {
    const c = {
      'tasks-a': passes(third),
      'tasks-b': passes(third),
      'tasks-c': passes(expectedPassed - 2 * third),
    };
    for (const id of allowedSkips) c[id] = [[id, 'SKIPPED']];
    return c;
  };
  const cases = [
    { name: 'a conforming run', checks: good(), expect: null },
    {
      name: 'one check fewer passed',
      checks: (() => { const c = good(); c['tasks-c'].pop(); return c; })(),
      expect: `TOO FEW PASSED: ${expectedPassed - 1} checks passed, ${expectedPassed} expected`,
    },
    {
      name: 'a scenario skipped that may not be',
      checks: (() => { const c = good(); c['tasks-c'] = c['tasks-c'].map(([id]) => [id, 'SKIPPED']); return c; })(),
      expect: 'UNDECLARED SKIP tasks-c / check-0',
    },
    {
      name: 'every scenario skipped, nothing failed',
      checks: (() => { const c = good(); for (const k of Object.keys(c)) c[k] = c[k].map(([id]) => [id, 'SKIPPED']); return c; })(),
      expect: 'TOO FEW PASSED: 0 checks passed',
    },
    {
      name: 'an extra skip beside full passes',
      checks: (() => { const c = good(); c['tasks-a'].push(['tasks-new', 'SKIPPED']); return c; })(),
      expect: 'UNDECLARED SKIP tasks-a / tasks-new',
    },
    {
      name: 'a failed check',
      checks: (() => { const c = good(); c['tasks-b'].push(['broken', 'FAILURE']); return c; })(),
      expect: 'FAILED tasks-b / broken',
    },
    {
      name: 'a scenario without results',
      checks: (() => { const c = good(); c['tasks-d'] = null; return c; })(),
      expect: 'FAILED tasks-d: no results',
    },
  ];
  let wrong = 0;
  for (const t of cases) {
    const dir = fixture(t.checks);
    const { problems } = summarise(dir, Object.keys(t.checks), expectedPassed, allowedSkips);
    fs.rmSync(dir, { recursive: true, force: true });
    let ok;
    if (t.expect === null) ok = problems.length === 0;
    else ok = problems.some(p => p.startsWith(t.expect));
    const why = problems.find(p => t.expect !== null && p.startsWith(t.expect)) ?? problems[0];
    const verdict = problems.length === 0 ? 'accepted' : `rejected (${problems.length} problem(s)): ${why}`;
    console.log(`${ok ? 'ok  ' : 'BAD '} ${t.name}: ${verdict}`);
    if (!ok) {
      wrong++;
      console.log(`     expected ${t.expect === null ? 'acceptance' : `a rejection starting "${t.expect}"`}`);
    }
  }
  console.log(wrong === 0 ? `self-test passed (${cases.length} cases)` : `self-test FAILED: ${wrong} of ${cases.length} cases`);
  return wrong === 0;
}

const opts = parseArgs(process.argv.slice(2));
if (opts.selfTest) {
  process.exit(selfTest(opts.expectedPassed, opts.allowedSkips) ? 0 : 1);
}
const [dir, ...scenarios] = opts.rest;
if (!dir || scenarios.length === 0) usage('want RESULTS_DIR SCENARIO...');
const { lines, problems } = summarise(dir, scenarios, opts.expectedPassed, opts.allowedSkips);
for (const l of lines) console.log(l);
if (problems.length > 0) {
  console.error(`conformance.sh: the run does not pass: ${problems.length} problem(s), listed above`);
}
process.exit(problems.length > 0 ? 1 : 0);
