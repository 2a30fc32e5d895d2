#!/usr/bin/env python3
"""Where a stdio round trip's time goes, hop by hop, under the kernel's tracer.

Runs sequential `tools/call greet` round trips from a 2025-11-25 client
through `mcp-tasks-shim stdio` to the 2026-07-28 reference server, then
from a 2026-07-28 client through the overhead bench's byte relay to the
same server (the `relay26` base), with the kernel tracing the four
programs' `read`/`write` system calls and scheduler wake-ups (tracefs,
which does not keep idle vCPUs awake the way `perf record -a` does: under
perf a round trip takes a third of its usual time). For each it prints
the mean of every segment of a round trip:

    client write ─▶ in: the middle's reading thread gets the line
    in            ─▶ the middle writes it upstream        (its processing)
    upstream      ─▶ the server's reader gets it, the server answers
    answer        ─▶ the middle's other thread gets it
    out           ─▶ the middle writes the client's answer (its processing)
    client        ─▶ the client gets it

how long a thread takes from being woken to running, on the waker's
vCPU and on the other one (a halted vCPU woken by an interrupt: the
costly kind on this VM), and how many of a round trip's five wake-ups
land on the other vCPU.

    sudo python3 benches/overhead/hops.py SHIM_BINARY BENCH_BINARY [--n 3000]

BENCH_BINARY is the overhead bench's executable (its stdio relay). Needs
root and /sys/kernel/tracing.
"""

import argparse
import collections
import os
import re
import statistics
import sys

from seq_client import LEGACY, MODERN, Peer

TRACING = "/sys/kernel/tracing"
EVENTS = ["raw_syscalls/sys_enter", "raw_syscalls/sys_exit", "sched/sched_waking",
          "sched/sched_switch"]
# read, write, writev, pwritev2
SYSCALLS = "id == 0 || id == 1 || id == 20 || id == 328"
WRITES = {1, 20, 328}
LINE = re.compile(r"^\s*(.+)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):\s+(.*)$")


def put(path, value):
    with open(os.path.join(TRACING, path), "w") as f:
        f.write(value)


def traced(cmd, revision, n):
    """The trace of `n` greet round trips by a `revision` client of `cmd`,
    and the thread ids of the client, the middle process and the server."""
    put("tracing_on", "0")
    put("trace", "")
    put("buffer_size_kb", "200000")
    for e in EVENTS:
        put(f"events/{e}/enable", "1")
    for e in EVENTS[:2]:
        put(f"events/{e}/filter", SYSCALLS)
    peer = Peer(cmd, revision, unbuffered=False)
    try:
        peer.greet_us(300)
        middle = peer.p.pid
        # (The thread that started the server lists it as its child.)
        server = next(int(c) for tid in os.listdir(f"/proc/{middle}/task")
                      for c in open(f"/proc/{middle}/task/{tid}/children").read().split())
        # Read while both live: the roles are told from the trace later.
        process_of = {int(tid): pid for pid in (middle, server)
                      for tid in os.listdir(f"/proc/{pid}/task")}
        put("tracing_on", "1")
        peer.greet_us(n)
        put("tracing_on", "0")
    finally:
        peer.close()
        for e in EVENTS:
            put(f"events/{e}/enable", "0")
        for e in EVENTS[:2]:
            put(f"events/{e}/filter", "0")
    with open(os.path.join(TRACING, "trace")) as f:
        text = f.read()
    put("trace", "")
    return text, os.getpid(), middle, process_of


def parse(text):
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            _, tid, cpu, t, name, rest = m.groups()
            yield int(tid), int(cpu), float(t) * 1e6, name, rest


def roles(events, client, middle, tgid):
    """Thread ids by role, told by who wakes whom: the middle's thread the
    client wakes reads the client (`mid_in`); the server's thread that
    wakes the middle's other thread writes the answers (`srv_out`, and
    `mid_out` reads them). (The shim reads and writes duplicated fds, so
    fd numbers cannot tell.)"""
    woke = collections.Counter()
    for tid, _, _, name, rest in events:
        if name == "sched_waking":
            woke[(tid, int(re.search(r"pid=(\d+)", rest).group(1)))] += 1
    def most(pred):
        pairs = [(n, w) for w, n in woke.items() if pred(*w)]
        return max(pairs)[1] if pairs else None
    found = {"client": client}
    by_client = most(lambda a, b: a == client and tgid.get(b) == middle)
    if by_client:
        found["mid_in"] = by_client[1]
        to_server = most(lambda a, b: a == by_client[1] and tgid.get(b) not in (None, middle))
        if to_server:
            found["srv_in"] = to_server[1]
    to_middle = most(lambda a, b: tgid.get(a) not in (None, middle) and tgid.get(b) == middle)
    if to_middle:
        found["srv_out"], found["mid_out"] = to_middle
    return found


def segments(events, r):
    """Mean µs per segment, and cross-vCPU wake-ups per round trip."""
    segs = collections.defaultdict(list)
    order = [("in", "sys_exit", r["mid_in"], False), ("in_proc", "sys_enter", r["mid_in"], True),
             ("upstream", "sys_enter", r["srv_out"], True), ("answer", "sys_exit", r["mid_out"], False),
             ("out_proc", "sys_enter", r["mid_out"], True), ("client", "sys_exit", r["client"], False)]
    names = {v: k for k, v in r.items()}
    last_cpu, cross, wakes, trips = {}, 0, 0, 0
    start = step = prev = None
    waking = {}  # woken tid -> (when, across vCPUs)
    for tid, cpu, t, name, rest in events:
        if name == "sched_switch":
            last_cpu[int(re.search(r"prev_pid=(\d+)", rest).group(1))] = cpu
            runs = int(re.search(r"next_pid=(\d+)", rest).group(1))
            if runs in waking:
                when, across = waking.pop(runs)
                segs["wake-up, other vCPU" if across else "wake-up, same vCPU"].append(t - when)
            continue
        if name == "sched_waking":
            woken = int(re.search(r"pid=(\d+)", rest).group(1))
            if tid in names and woken in names and start is not None:
                wakes += 1
                across = last_cpu.get(woken, cpu) != cpu
                cross += across
                waking[woken] = (t, across)
            continue
        nr = int(re.match(r"NR (\d+)", rest).group(1))
        if tid == r["client"] and name == "sys_enter" and nr in WRITES:
            start, step, prev = t, 0, t
            continue
        if start is None or step >= len(order):
            continue
        label, event, who, writes = order[step]
        if tid == who and name == event and (nr in WRITES) == writes:
            segs[label].append(t - prev)
            prev, step = t, step + 1
            if step == len(order):
                segs["round trip"].append(t - start)
                trips += 1
                start = None
    means = {k: statistics.mean(v) for k, v in segs.items()}
    return means, cross / max(trips, 1), wakes / max(trips, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("bench")
    ap.add_argument("--n", type=int, default=3000)
    a = ap.parse_args()
    server = [a.shim, "reference-server", "--revision", MODERN]
    os.environ["OVERHEAD_ROLE"] = "stdio-relay"
    runs = [("shim", [a.shim, "stdio", "--", *server], LEGACY),
            ("relay26", [a.bench, *server], MODERN)]
    rows = {}
    for label, cmd, rev in runs:
        text, client, middle, tgid = traced(cmd, rev, a.n)
        events = list(parse(text))
        r = roles(events, client, middle, tgid)
        missing = {"mid_in", "srv_in", "mid_out", "srv_out"} - r.keys()
        if missing:
            sys.exit(f"{label}: no thread found for {missing}")
        rows[label] = segments(events, r)
    print(f"{'segment (mean µs)':<20}" + "".join(f"{k:>10}" for k in rows))
    for seg in ["in", "in_proc", "upstream", "answer", "out_proc", "client", "round trip",
                "wake-up, same vCPU", "wake-up, other vCPU"]:
        print(f"{seg:<20}" + "".join(f"{m.get(seg, float('nan')):10.1f}" for m, _, _ in rows.values()))
    print(f"{'cross-vCPU wakes':<20}" + "".join(f"{c:10.2f}" for _, c, _ in rows.values()))
    print(f"{'wake-ups per trip':<20}" + "".join(f"{w:10.2f}" for _, _, w in rows.values()))


if __name__ == "__main__":
    main()
