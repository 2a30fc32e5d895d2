#!/usr/bin/env python3
"""The fixture check of docs/performance.md: a plain sequential stdio client.

Writes one request line, reads one answer line, and repeats, as a small
script does, against each reference server and against the shim in front
of the 2026-07-28 one. Prints the p50 and p99 of `tools/call greet` and the
size of its answer per target, for two kinds of client:

- buffered: `subprocess.Popen(...)` as is; `readline()` reads the pipe in
  8 KiB chunks;
- unbuffered: `Popen(..., bufsize=0)`, what a script asks for so its writes
  go out at once; its `readline()` is then a raw `FileIO.readline`, one
  `read(fd, 1)` system call per byte of the answer.

The unbuffered client pays about 0.3-0.8 µs per byte answered, so a
server's answer size shows up in its latency; the overhead bench's own
client reads in 64 KiB chunks and does not see it. No target.

    python3 benches/overhead/seq_client.py [SHIM_BINARY] [-n 2000] [--rounds 2]

SHIM_BINARY defaults to target/release/mcp-tasks-shim.
"""

import argparse
import json
import os
import subprocess
import sys
import time

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
    "io.modelcontextprotocol/clientInfo": {"name": "seq-client", "version": "0"},
}


class Peer:
    def __init__(self, cmd, revision, unbuffered):
        env = dict(os.environ, MCP_SHIM_LOG="warn")
        self.p = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            bufsize=0 if unbuffered else -1,
        )
        self.answer_bytes = 0
        self.rev = revision
        self.next_id = 0
        if revision == LEGACY:
            self.call(
                "initialize",
                {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "seq-client", "version": "0"},
                },
            )
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def call(self, method, params):
        self.next_id += 1
        if self.rev == MODERN:
            params = dict(params, _meta=META)
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            self.answer_bytes = len(line)
            if not line:
                raise SystemExit(f"{method}: the peer closed its output")
            msg = json.loads(line)
            if msg.get("id") == self.next_id and "method" not in msg:
                if "error" in msg:
                    raise SystemExit(f"{method}: {msg['error']}")
                return msg["result"]

    def greet_us(self, n):
        out = []
        for _ in range(n):
            t = time.perf_counter()
            self.call("tools/call", {"name": "greet", "arguments": {"name": "bench"}})
            out.append((time.perf_counter() - t) * 1e6)
        return out

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def pct(sorted_v, q):
    return sorted_v[round((len(sorted_v) - 1) * q)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim", nargs="?", default="target/release/mcp-tasks-shim")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    ref = lambda rev: [a.shim, "reference-server", "--revision", rev]
    targets = [
        ("modern server", ref(MODERN), MODERN),
        ("legacy server", ref(LEGACY), LEGACY),
        ("legacy → shim → modern", [a.shim, "stdio", "--"] + ref(MODERN), LEGACY),
    ]
    print(f"seq_client: {a.n} greet calls per target after 300 warm-up, batches of {a.batch}")
    for r in range(1, a.rounds + 1):
        for unbuffered in (False, True):
            kind = "unbuffered (bufsize=0)" if unbuffered else "buffered"
            print(f"\nround {r}, {kind} client")
            measure(targets, unbuffered, a.n, a.batch)


def measure(targets, unbuffered, n, batch):
    peers = [(label, Peer(cmd, rev, unbuffered)) for label, cmd, rev in targets]
    for _, p in peers:
        p.greet_us(300)
    samples = [[] for _ in peers]
    # Batches rotate over the targets, so load on the machine hits all alike.
    for b in range(n // batch):
        for k in range(len(peers)):
            i = (b + k) % len(peers)
            samples[i] += peers[i][1].greet_us(batch)
    for (label, p), s in zip(peers, samples):
        s.sort()
        print(
            f"  {label:<24} p50 {pct(s, 0.5):7.1f} µs   p99 {pct(s, 0.99):7.1f} µs"
            f"   answer {p.answer_bytes} bytes"
        )
        p.close()

if __name__ == "__main__":
    sys.exit(main())
