#!/usr/bin/env python3
"""Thread switches the HTTP shim and the bench's relay make per request.

A request that wakes one thread more than it needs costs a context switch
and a cache gone cold on a 2-vCPU machine: tens of µs of latency that
instruction counts (instructions.py) do not show. This counts, per
sequential request after a warm-up, what Linux's scheduler records for
every thread of the process in front of the server
(`/proc/PID/task/*/schedstat`, `status`): CPU time, scheduler slices
(times it was put on a CPU) and voluntary switches (times it waited).

Cases, each with fresh processes, a keep-alive Python client and
`tools/call greet` and `tasks/get` of a task that runs for an hour:

- translating: a 2025-11-25 client, `mcp-tasks-shim http` in front of the
  2026-07-28 reference server;
- relay26: a 2026-07-28 client, the overhead bench's relay (axum +
  reqwest) in front of the same server (the translating rows' base);
- pass-through: a 2025-11-25 client, the shim in front of the 2025-11-25
  server (a relayed session), and the relay in front of that server.

A shim case that takes more slices per request than its relay wakes a
thread the relay does not. CPU time is noisy on a shared VM; slice and
switch counts are not.

    python3 benches/overhead/switches.py BENCH_BINARY [SHIM_BINARY] [-n 2000]

BENCH_BINARY is the overhead bench's executable (`cargo bench --no-run
--bench overhead` prints it); SHIM_BINARY defaults to
target/release/mcp-tasks-shim. Linux only.
"""

import argparse
import os
import re
import sys

from instructions import http_front, http_prepare, post
from seq_client import LEGACY, MODERN

WARMUP = 300


def thread_counts(pid):
    """CPU ns, scheduler slices and voluntary switches over `pid`'s threads."""
    total = [0, 0, 0]
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run_ns, _, slices = (int(x) for x in f.read().split())
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
        voluntary = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        for i, v in enumerate((run_ns, slices, voluntary)):
            total[i] += v
    return total


def measure(front_argv, env, server_rev, client_rev, op, n):
    """Per-request counts of the front started by `front_argv(server_url)`."""
    with http_front(SHIM, server_rev, front_argv, env) as (front, conn):
        headers, params = http_prepare(conn, client_rev, op)
        body = lambda i: {"jsonrpc": "2.0", "id": i + 1, "method": op, "params": params}
        for i in range(WARMUP):
            post(conn, body(i), headers)
        before = thread_counts(front.pid)
        for i in range(WARMUP, WARMUP + n):
            post(conn, body(i), headers)
        after = thread_counts(front.pid)
    run_ns, slices, voluntary = ((b - a) / n for a, b in zip(before, after))
    return run_ns / 1000, slices, voluntary


def main():
    global SHIM
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("shim", nargs="?", default="target/release/mcp-tasks-shim")
    ap.add_argument("-n", type=int, default=2000)
    a = ap.parse_args()
    SHIM = a.shim
    shim = lambda url: [a.shim, "http", "--listen", "127.0.0.1:0",
                        "--upstream-url", url, "--log", "warn"]
    relay = lambda url: [a.bench, url.rsplit("/mcp", 1)[0]]
    relay_env = dict(os.environ, OVERHEAD_ROLE="http-relay")
    cases = [("translating (shim)", shim, None, MODERN, LEGACY),
             ("relay26", relay, relay_env, MODERN, MODERN),
             ("pass-through 2025-11-25 (shim)", shim, None, LEGACY, LEGACY),
             ("relay 2025-11-25", relay, relay_env, LEGACY, LEGACY)]
    print(f"per request in the process in front of the server ({a.n} sequential, "
          f"after {WARMUP}): CPU µs, scheduler slices, voluntary switches")
    for op in ("tools/call", "tasks/get"):
        for label, front, env, server_rev, client_rev in cases:
            run_us, slices, voluntary = measure(front, env, server_rev, client_rev, op, a.n)
            print(f"  {op:<10} {label:<31} {run_us:7.1f} {slices:6.2f} {voluntary:6.2f}")


if __name__ == "__main__":
    sys.exit(main())
