#!/usr/bin/env python3
"""A stdio MCP server that misbehaves on cue, for tests/upstream_faults.rs.

    fault_relay.py MODE [--delay-ms N] -- CMD ARGS...

Runs CMD (a real MCP server on stdio) and relays lines both ways. When the
client side sends a `tools/call` of `slow_compute` whose `label` is "FAULT",
the call is relayed and, --delay-ms later (default 300), the fault happens:

    exit     kill CMD and exit with status 7 (the upstream dies mid-call)
    silent   keep reading but never write again (the upstream hangs)
    garbage  write a line that is not JSON-RPC, then go on relaying
    huge     answer the call itself with a 17 MiB result (over the shim's
             16 MiB limit), then go on relaying
    deep     answer the call itself with a valid result the shim's parser
             cannot hold (a member nested 200 arrays deep, and a number
             beyond f64), then go on relaying
    logs     log two messages (notifications/message at info and error,
             whatever level anyone asked for), then go on relaying; this
             one fires on every such call, not only the first
    progress report progress twice for the call's progressToken (the
             message is the call's `seconds`), then go on relaying; on
             every such call too
    tight    report progress twice for the call's progressToken right before
             the server's answer to it, in the same write (the tightest
             order a server can give), then go on relaying; on every such
             call
    slowcreate
             hold the server's answer to the call back until the client
             cancels the call (a `notifications/cancelled` naming it: the
             answer then crosses the cancel, as a late answer does), at
             most --delay-ms (a failure guard), on every such call; other
             lines flow meanwhile
    keepgoing
             no FAULT call: every `tasks/cancel` is acknowledged by the relay
             itself and never reaches the server, whose task runs on (a
             2026-07-28 server may do so: a cancel is a request, and its
             answer an empty acknowledgement)
    drain    no fault: when its input ends, the server still answers every
             request relayed to it before its own input is closed (a server
             that finishes its work on end of input, as a client closing
             its side may expect)

The fault time (Unix seconds) is written to the file named by the
FAULT_RELAY_STAMP environment variable, if set, so a test can measure how
long the shim took to report it.
"""

import json
import os
import subprocess
import sys
import threading
import time


def is_fault_call(msg: dict) -> bool:
    """A `tools/call` of `slow_compute` labelled "FAULT"."""
    params = msg.get("params") or {}
    args_ = (params.get("arguments") or {}) if isinstance(params, dict) else {}
    return (
        isinstance(params, dict)
        and msg.get("method") == "tools/call"
        and params.get("name") == "slow_compute"
        and isinstance(args_, dict)
        and args_.get("label") == "FAULT"
    )


def main() -> None:
    args = sys.argv[1:]
    if "--" not in args or not args:
        sys.exit("usage: fault_relay.py MODE [--delay-ms N] -- CMD ARGS...")
    split = args.index("--")
    opts, cmd = args[:split], args[split + 1 :]
    mode = opts[0]
    delay = 0.3
    if "--delay-ms" in opts:
        delay = int(opts[opts.index("--delay-ms") + 1]) / 1000.0
    if mode not in ("exit", "silent", "garbage", "huge", "deep", "logs", "progress", "tight",
                    "slowcreate", "keepgoing", "drain"):
        sys.exit(f"unknown mode {mode!r}")

    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out_lock = threading.Lock()
    silent = threading.Event()
    # tight: FAULT calls relayed and not yet answered, id -> progressToken.
    tight = {}
    tight_lock = threading.Lock()
    # slowcreate: answers held back, id -> line, and the ids cancelled.
    held = {}
    cancelled = set()
    # drain: ids of requests relayed to the server and not yet answered.
    pending = set()
    pending_lock = threading.Condition()

    def write_out(data: bytes) -> None:
        with out_lock:
            if silent.is_set():
                return
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    def stamp() -> None:
        path = os.environ.get("FAULT_RELAY_STAMP")
        if path:
            with open(path, "w") as f:
                f.write(repr(time.time()))
        print(f"fault_relay: {mode} now", file=sys.stderr, flush=True)

    def fault(call: dict) -> None:
        call_id = call.get("id")
        time.sleep(delay)
        if mode == "exit":
            stamp()
            child.kill()
            child.wait()
            os._exit(7)
        elif mode == "silent":
            with out_lock:
                silent.set()
            stamp()
        elif mode == "logs":
            for level in ("info", "error"):
                note = {"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": level, "logger": "fault_relay",
                                   "data": f"a message at {level}"}}
                write_out(json.dumps(note).encode() + b"\n")
        elif mode == "progress":
            params = call.get("params") or {}
            token = (params.get("_meta") or {}).get("progressToken")
            seconds = (params.get("arguments") or {}).get("seconds")
            for k in (1, 2):
                note = {"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": k,
                                   "total": 2, "message": str(seconds)}}
                write_out(json.dumps(note).encode() + b"\n")
        elif mode == "huge":
            stamp()
            pad = "x" * (17 << 20)
            answer = {"jsonrpc": "2.0", "id": call_id,
                      "result": {"content": [{"type": "text", "text": pad}]}}
            write_out(json.dumps(answer).encode() + b"\n")
        elif mode == "deep":
            stamp()
            # Written by hand: json.dumps itself refuses such nesting.
            line = ('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text",'
                    '"text":"deep"}],"structuredContent":{"tree":%s%s,"big":1e400}}}\n'
                    % (json.dumps(call_id), "[" * 200, "]" * 200))
            write_out(line.encode())
        else:
            stamp()
            with out_lock:
                sys.stdout.buffer.write(b"this is not JSON-RPC {\n")
                sys.stdout.buffer.flush()

    def release(key: str, cancel: bool) -> None:
        """slowcreate: lets the held answer to `key` go (`cancel`: the
        client cancelled it, whether or not the answer came yet)."""
        with tight_lock:
            if cancel:
                cancelled.add(key)
            line = held.pop(key, None)
        if line is not None:
            write_out(line)

    def noted_answer(line: bytes):
        """What was noted for the FAULT call `line` answers (tight: its
        progressToken; slowcreate: True), taken; None for any other line."""
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        if not isinstance(msg, dict) or "method" in msg:
            return None
        with tight_lock:
            return tight.pop(json.dumps(msg.get("id")), None)

    def upstream_to_client() -> None:
        for line in child.stdout:
            if mode == "tight":
                token = noted_answer(line)
                if token is not None:
                    notes = b"".join(
                        json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                    "params": {"progressToken": token, "progress": k,
                                               "total": 2}}).encode() + b"\n"
                        for k in (1, 2))
                    write_out(notes + line)
                    continue
            if mode == "slowcreate" and noted_answer(line) is not None:
                key = json.dumps(json.loads(line).get("id"))
                with tight_lock:
                    held[key] = line
                    now = key in cancelled
                if now:
                    release(key, False)
                else:
                    threading.Timer(delay, release, args=(key, False)).start()
                continue
            write_out(line)
            if mode == "drain":
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and "method" not in msg:
                    with pending_lock:
                        pending.discard(json.dumps(msg.get("id")))
                        pending_lock.notify_all()
        # The server ended on its own: so does the relay.
        if not silent.is_set():
            os._exit(child.wait() or 0)

    threading.Thread(target=upstream_to_client, daemon=True).start()

    triggered = False
    for line in sys.stdin.buffer:
        if mode in ("drain", "tight", "slowcreate"):
            # Noted before the server can answer it.
            try:
                asked = json.loads(line)
            except ValueError:
                asked = None
            if isinstance(asked, dict) and "method" in asked and "id" in asked:
                if mode == "drain":
                    with pending_lock:
                        pending.add(json.dumps(asked.get("id")))
                elif mode == "slowcreate" and is_fault_call(asked):
                    with tight_lock:
                        tight[json.dumps(asked.get("id"))] = True
                elif is_fault_call(asked):
                    params = asked.get("params") or {}
                    with tight_lock:
                        tight[json.dumps(asked.get("id"))] = (params.get("_meta") or {}).get(
                            "progressToken")
            if (mode == "slowcreate" and isinstance(asked, dict)
                    and asked.get("method") == "notifications/cancelled"):
                params = asked.get("params") or {}
                if isinstance(params, dict):
                    release(json.dumps(params.get("requestId")), True)
        if mode == "keepgoing":
            try:
                asked = json.loads(line)
            except ValueError:
                asked = None
            if (isinstance(asked, dict) and asked.get("method") == "tasks/cancel"
                    and "id" in asked):
                ack = {"jsonrpc": "2.0", "id": asked["id"], "result": {"resultType": "complete"}}
                write_out(json.dumps(ack).encode() + b"\n")
                continue
        try:
            child.stdin.write(line)
            child.stdin.flush()
        except BrokenPipeError:
            break
        if triggered:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        if mode == "drain":
            continue
        if is_fault_call(msg):
            if mode in ("tight", "slowcreate"):
                continue
            triggered = mode not in ("logs", "progress")
            threading.Thread(target=fault, args=(msg,), daemon=True).start()
    # Our input ended: let the server see the end of its own (drain: once
    # it has answered what it was asked, within 10 s).
    if mode == "drain":
        with pending_lock:
            pending_lock.wait_for(lambda: not pending, timeout=10)
    try:
        child.stdin.close()
    except BrokenPipeError:
        pass
    child.wait()


if __name__ == "__main__":
    main()
