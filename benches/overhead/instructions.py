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
runs for an hour. Then the same two requests over Streamable HTTP
(`mcp-tasks-shim http --upstream-url` in front of the 2026-07-28 reference
server, a keep-alive Python client) and, with `--relay BENCH_BINARY` (the
overhead bench's executable, which is also its HTTP relay), the bench's
axum + reqwest relay to the same server with a 2026-07-28 client: the
`relay26` base of the overhead bench's HTTP rows. Over HTTP the count is
of instructions inside tokio task polls (both are tokio programs): the
total also counts idle workers looking for work, which varies between
runs.

    python3 benches/overhead/instructions.py [SHIM_BINARY] [--short 200] [--long 1200] [--relay BENCH]

SHIM_BINARY defaults to target/release/mcp-tasks-shim (`cargo bench
--no-run --bench overhead` builds it with symbols); needs valgrind.
"""

import argparse
import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

from seq_client import LEGACY, META, MODERN, Peer

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


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
        return total(out)


def total(out):
    """The instruction total of callgrind output file `out`."""
    with open(out) as f:
        for line in f:
            m = re.match(r"(?:summary|totals): (\d+)", line)
            if m:
                return int(m.group(1))
    raise SystemExit("callgrind wrote no total")


def url_from(stream, what):
    """The URL a process announces with "listening on URL"."""
    for line in stream:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return m.group(1)
    raise SystemExit(f"{what} announced no URL")


def post(conn, body, headers):
    """The response to POSTing `body`, and its body's text."""
    conn.request("POST", "/mcp", json.dumps(body), headers)
    resp = conn.getresponse()
    text = resp.read().decode()
    if resp.status not in (200, 202):
        raise SystemExit(f"HTTP {resp.status} for {body}")
    return resp, text


def task_polls(out):
    """Instructions inside tokio task polls in callgrind file `out`: the
    program's total also counts worker threads looking for work and parking,
    which varies by several percent between runs of the same binary."""
    listing = subprocess.run(["callgrind_annotate", "--inclusive=yes", out],
                             capture_output=True, text=True, check=True).stdout
    polls = [int(line.split()[0].replace(",", "")) for line in listing.splitlines()
             if "tokio::runtime::task::raw::poll [" in line]
    if not polls:
        raise SystemExit("callgrind saw no tokio task")
    return max(polls)


def http_run(shim, traced, client_rev, op, n, env=None):
    """Instructions in the tokio tasks of `traced` (argv given the server's
    URL) over `n` sequential HTTP `tools/call greet` or `tasks/get` of a
    task that runs for an hour, after set-up."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        under_callgrind = lambda url: [
            "valgrind", "-q", "--log-file=/dev/null", "--tool=callgrind",
            f"--callgrind-out-file={out}", *traced(url)]
        with http_front(shim, MODERN, under_callgrind, env) as (_, conn):
            headers, params = http_prepare(conn, client_rev, op)
            for i in range(n):
                post(conn, {"jsonrpc": "2.0", "id": i + 1, "method": op,
                            "params": params}, headers)
        return task_polls(out)


@contextlib.contextmanager
def http_front(shim, server_rev, front_argv, env=None):
    """A `server_rev` reference server over HTTP and the process
    `front_argv(server_url)` in front of it (it prints "listening on URL"):
    yields that process and a keep-alive connection to it, and ends both."""
    server = subprocess.Popen(
        [shim, "reference-server", "--revision", server_rev, "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE, text=True)
    try:
        argv = front_argv(re.search(r"http://\S+", server.stdout.readline()).group(0))
        front = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, env=env)
        try:
            front_url = url_from(front.stdout, argv[0])
            conn = http.client.HTTPConnection(front_url.split("//")[1].split("/")[0])
            yield front, conn
            conn.close()
        finally:
            front.send_signal(signal.SIGTERM)
            front.wait(timeout=120)
    finally:
        server.kill()
        server.wait()


def http_prepare(conn, client_rev, op):
    """The headers and params of `op` (`tools/call greet`, or `tasks/get`
    of a task started here that runs for an hour) over `conn`, a session
    opened first for a 2025-11-25 client."""
    headers = dict(HEADERS, **{"mcp-protocol-version": client_rev})
    if client_rev == LEGACY:
        init = {"protocolVersion": LEGACY, "capabilities": {},
                "clientInfo": {"name": "instructions", "version": "0"}}
        resp, _ = post(conn, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                           "params": init}, HEADERS)
        headers["mcp-session-id"] = resp.getheader("mcp-session-id")
        post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    else:
        headers.update({"mcp-method": "tools/call", "mcp-name": "greet"})
    params = {"name": "greet", "arguments": {"name": "bench"}}
    if op == "tasks/get":
        params = {"taskId": http_task(conn, client_rev, headers)}
        if client_rev == MODERN:
            headers.update({"mcp-method": "tasks/get", "mcp-name": params["taskId"]})
    if client_rev == MODERN:
        params["_meta"] = META
    return headers, params


def http_task(conn, client_rev, headers):
    """The id of a task started over `conn` that runs for an hour."""
    create = {"name": "slow_compute", "arguments": {"seconds": 3600, "label": "x"}}
    hdrs = headers
    if client_rev == LEGACY:
        create["task"] = {"ttl": 3_600_000}
    else:
        create["_meta"] = META
        hdrs = dict(headers, **{"mcp-name": "slow_compute"})
    _, body = post(conn, {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": create}, hdrs)
    # One JSON body, or the data line of a one-event SSE stream.
    data = body if body.lstrip().startswith("{") else next(
        line[5:] for line in body.splitlines() if line.startswith("data:"))
    result = json.loads(data)["result"]
    return result["task"]["taskId"] if client_rev == LEGACY else result["taskId"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim", nargs="?", default="target/release/mcp-tasks-shim")
    ap.add_argument("--short", type=int, default=200)
    ap.add_argument("--long", type=int, default=1200)
    ap.add_argument("--relay", help="the overhead bench binary, for the HTTP relay's count")
    a = ap.parse_args()
    print(f"instructions per request in the shim ({a.long} - {a.short} requests, callgrind)")
    for label, rev in (("translating", LEGACY), ("pass-through", MODERN)):
        for op in ("tools/call", "tasks/get"):
            short = run(a.shim, rev, op, a.short)
            long = run(a.shim, rev, op, a.long)
            print(f"  {label:<13} {op:<10} {(long - short) / (a.long - a.short):9.0f}")
    shim_http = lambda url: [a.shim, "http", "--listen", "127.0.0.1:0",
                             "--upstream-url", url, "--log", "warn"]
    cases = [("HTTP translating", shim_http, LEGACY, None),
             ("HTTP pass-through", shim_http, MODERN, None)]
    if a.relay:
        origin = lambda url: [a.relay, url.rsplit("/mcp", 1)[0]]
        cases.append(("HTTP relay26", origin, MODERN,
                      dict(os.environ, OVERHEAD_ROLE="http-relay")))
    for label, traced, rev, env in cases:
        for op in ("tools/call", "tasks/get"):
            short = http_run(a.shim, traced, rev, op, a.short, env)
            long = http_run(a.shim, traced, rev, op, a.long, env)
            print(f"  {label:<17} {op:<10} {(long - short) / (a.long - a.short):9.0f}")


if __name__ == "__main__":
    sys.exit(main())
