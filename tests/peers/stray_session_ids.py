#!/usr/bin/env python3
"""An HTTP relay in front of a 2025-11-25 Streamable HTTP server that keeps
sessions the way the official Python SDK's server (mcp 1.30) does, for
tests/upstream_faults.rs:

    stray_session_ids.py UPSTREAM_URL

- a POST without a session that is no `initialize` (the shim's revision
  probe, `server/discover`) is answered 400 "Missing session ID";
- every 4xx answer carries an `Mcp-Session-Id` header of a session that
  does not exist (the Python SDK mints one for the 400 it answers a
  request without a session with, then terminates it);
- a request whose `Mcp-Session-Id` is not one the upstream minted on a
  successful answer is refused with 404 "Session not found", as that
  server does.

Everything else is relayed unchanged, answers streamed as they come (SSE
included). Prints "listening on PORT" once it accepts connections.
"""

import http.client
import http.server
import itertools
import json
import sys
import threading
import urllib.parse

UPSTREAM = urllib.parse.urlsplit(sys.argv[1])
MINTED = set()
LOCK = threading.Lock()
STRAY = itertools.count(1)
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Relay(http.server.BaseHTTPRequestHandler):
    # HTTP/1.0: each answer ends with the connection, so a streamed answer
    # needs no framing of ours.
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def relay(self):
        sid = self.headers.get("mcp-session-id")
        with LOCK:
            known = sid is None or sid in MINTED
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            method = json.loads(body).get("method") if body else None
        except (ValueError, AttributeError):
            method = None
        if sid is None and self.command == "POST" and method != "initialize":
            self.answer(400, {"jsonrpc": "2.0", "id": "server-error",
                              "error": {"code": -32600, "message": "Bad Request: Missing session ID"}})
            return
        if not known:
            self.answer(404, {"jsonrpc": "2.0", "id": "server-error",
                              "error": {"code": -32600, "message": "Session not found"}})
            return
        conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn.request(self.command, UPSTREAM.path, body=body or None, headers=headers)
        resp = conn.getresponse()
        minted = resp.getheader("mcp-session-id")
        if minted and 200 <= resp.status < 300:
            with LOCK:
                MINTED.add(minted)
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        if 400 <= resp.status < 500 and not minted:
            self.send_header("mcp-session-id", f"stray-{next(STRAY)}")
        self.end_headers()
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                break
        conn.close()

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("mcp-session-id", f"stray-{next(STRAY)}")
        self.end_headers()
        self.wfile.write(data)

    do_POST = relay
    do_GET = relay
    do_DELETE = relay


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
