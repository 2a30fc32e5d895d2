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
import os
import re
import sys
import tempfile

from seq_client import LEGACY, MODERN, Peer


def run(shim, client_rev, op, n):
    """Total instructions of one shim run of `n` requests after set-up."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        # (`--log-file`: valgrind's notes on the shim's pwritev2 flags.)
        cmd = ["valgrind", "-q", "--log-file=/dev/null", "--tool=callgrind",
               f"--callgrind-out-file={out}",
               shim, "stdio", "--", shim, "reference-server", "--revision", MODERN]
        peer = Peer(cmd, client_rev, unbuffered=False)
        create = {"name": "slow_compute", "arguments": {"seconds": 3600, "label": "x"}}
        if client_rev == LEGACY:
            create["task"] = {"ttl": 3_600_000}
        created = peer.call("tools/call", create)
        task_id = created["task"]["taskId"] if client_rev == LEGACY else created["taskId"]
        for _ in range(n):
            if op == "tools/call":
                peer.call("tools/call", {"name": "greet", "arguments": {"name": "bench"}})
            else:
                peer.call("tasks/get", {"taskId": task_id})
        peer.close()
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
