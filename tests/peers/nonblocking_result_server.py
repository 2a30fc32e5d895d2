#!/usr/bin/env python3
"""A 2025-11-25 stdio server whose `tasks/result` does not block, for
tests/modern_front_scripted.rs:

    nonblocking_result_server.py

One task-required tool, `job`. While a task works, `tasks/result` is
refused at once with a JSON-RPC error ("Task not completed yet (current
state: working)"), as some servers do. Once it has refused one, the task
completes at the third `tasks/get` after (so what ends it is the shim's
polling, not a clock), and `tasks/result` then answers its result.
"""

import json
import sys

GETS_BEFORE_DONE = 3
TASKS = {}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def task_view(task_id):
    t = TASKS[task_id]
    return {
        "taskId": task_id,
        "status": t["status"],
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
        "ttl": 60000,
        "pollInterval": 20,
    }


def answer(req):
    method = req.get("method")
    params = req.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "tools": {},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
            },
            "serverInfo": {"name": "nonblocking-result", "version": "0"},
        }
    if method == "tools/list":
        return {
            "tools": [
                {
                    "name": "job",
                    "inputSchema": {"type": "object"},
                    "execution": {"taskSupport": "required"},
                }
            ]
        }
    if method == "tools/call":
        task_id = "job-%d" % (len(TASKS) + 1)
        TASKS[task_id] = {"status": "working", "refused": False, "gets": 0}
        return {"task": task_view(task_id)}
    if method == "tasks/get":
        t = TASKS[params["taskId"]]
        if t["refused"]:
            t["gets"] += 1
            if t["gets"] >= GETS_BEFORE_DONE:
                t["status"] = "completed"
        return task_view(params["taskId"])
    if method == "tasks/list":
        return {"tasks": [task_view(t) for t in TASKS]}
    if method == "tasks/result":
        task_id = params["taskId"]
        t = TASKS[task_id]
        if t["status"] != "completed":
            t["refused"] = True
            raise Refused("Task not completed yet (current state: working)")
        return {
            "content": [{"type": "text", "text": "%s done" % task_id}],
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}},
        }
    if method == "ping":
        return {}
    raise Refused("Method not found: %s" % method, -32601)


class Refused(Exception):
    def __init__(self, message, code=-32603):
        super().__init__(message)
        self.code = code


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "method" not in msg or "id" not in msg:
        continue
    try:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)})
    except Refused as e:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": e.code, "message": str(e)}})
