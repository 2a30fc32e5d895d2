#!/usr/bin/env python3
"""Instructions the stdio shim spends per round trip, under callgrind.

Latency on a shared 2-vCPU VM moves by more than 10 % between runs of the
same code; instruction counts do not (the same binary and input give the
same count whatever else the machine does). This runs `mcp-tasks-shim
stdio -- mcp-tasks-shim reference-server --revision 2026-07-28` under
`valgrind --tool=callgrind` (the server child is not traced) twice per
case, with a short and a long run of sequential requests, and prints the
difference divided by the extra requests: start-up and set-up cancel out.

Cases: a 2025-11-25 client (translating) and a 2026-07-28 client
(pass-through), each for `tools/call greet` and `tasks/get` of a task that
runs for an hour.

    python3 benches/overhead/instructions.py [SHIM_BINARY] [--short 200] [--long 1200]

SHIM_BINARY defaults to target/release/mcp-tasks-shim (`cargo bench
--no-run --bench overhead` builds it with symbols); needs valgrind.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
    "io.modelcontextprotocol/clientInfo": {"name": "instructions", "version": "0"},
}


def run(shim, client_rev, op, n):
    """Total instructions of one shim run of `n` requests after set-up."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
               shim, "stdio", "--", shim, "reference-server", "--revision", MODERN]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL,
                             env=dict(os.environ, MCP_SHIM_LOG="warn"))
        next_id = 0

        def call(method, params):
            nonlocal next_id
            next_id += 1
            if client_rev == MODERN:
                params = dict(params, _meta=META)
            msg = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
            p.stdin.write(json.dumps(msg).encode() + b"\n")
            p.stdin.flush()
            while True:
                line = p.stdout.readline()
                if not line:
                    raise SystemExit(f"{method}: the shim closed its output")
                m = json.loads(line)
                if m.get("id") == next_id and "method" not in m:
                    if "error" in m:
                        raise SystemExit(f"{method}: {m['error']}")
                    return m["result"]

        if client_rev == LEGACY:
            call("initialize", {"protocolVersion": LEGACY, "capabilities": {},
                                "clientInfo": {"name": "instructions", "version": "0"}})
            p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            p.stdin.flush()
        create = {"name": "slow_compute", "arguments": {"seconds": 3600, "label": "x"}}
        if client_rev == LEGACY:
            create["task"] = {"ttl": 3_600_000}
        created = call("tools/call", create)
        task_id = created["task"]["taskId"] if client_rev == LEGACY else created["taskId"]
        for _ in range(n):
            if op == "tools/call":
                call("tools/call", {"name": "greet", "arguments": {"name": "bench"}})
            else:
                call("tasks/get", {"taskId": task_id})
        p.stdin.close()
        p.wait(timeout=120)
        with open(out) as f:
            for line in f:
                m = re.match(r"(?:summary|totals): (\d+)", line)
                if m:
                    return int(m.group(1))
    raise SystemExit("callgrind wrote no total")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim", nargs="?", default="target/release/mcp-tasks-shim")
    ap.add_argument("--short", type=int, default=200)
    ap.add_argument("--long", type=int, default=1200)
    a = ap.parse_args()
    print(f"instructions per request in the shim ({a.long} - {a.short} requests, callgrind)")
    for label, rev in (("translating", LEGACY), ("pass-through", MODERN)):
        for op in ("tools/call", "tasks/get"):
            short = run(a.shim, rev, op, a.short)
            long = run(a.shim, rev, op, a.long)
            print(f"  {label:<13} {op:<10} {(long - short) / (a.long - a.short):9.0f}")


if __name__ == "__main__":
    sys.exit(main())
