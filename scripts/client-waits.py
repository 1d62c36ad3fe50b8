#!/usr/bin/env python3
"""How a real Claude Code treats an upstream wait: retry, wait, or give up, and after how long.

Starts one small Anthropic-shaped mock per case on 127.0.0.1 and runs `claude -p` against it
(directly: sluice forwards the status and the retry headers unchanged, so this is what the
client sees through sluice). The first POST /v1/messages gets the case's answer; later ones
get a short streamed text. Prints one Markdown table row per case: the time from the first
request to the second (the client's wait), how many requests it made, whether it finished,
and its wall time. A `hold` case answers 200 at once and then sends only `ping` events for
the given seconds before the text (sluice's hold-with-heartbeats).

    scripts/client-waits.py --claude target/claude-code-2.1.332/node_modules/.bin/claude

Cases run in parallel; the slowest (300 s) bounds the run. Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEXT = "wait-case-ok"


def sse(name, data):
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def text_stream():
    msg = {"id": "msg_w", "type": "message", "role": "assistant", "model": "m", "content": [],
           "stop_reason": None, "stop_sequence": None,
           "usage": {"input_tokens": 1, "output_tokens": 0}}
    return [
        sse("message_start", {"type": "message_start", "message": msg}),
        sse("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "text_delta", "text": TEXT}}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse("message_delta", {"type": "message_delta",
                              "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                              "usage": {"output_tokens": 2}}),
        sse("message_stop", {"type": "message_stop"}),
    ]


class Case:
    def __init__(self, name, status=None, retry_after=None, should_retry=None, hold=None):
        self.name, self.status, self.retry_after = name, status, retry_after
        self.should_retry, self.hold = should_retry, hold
        self.times = []
        self.lock = threading.Lock()


def handler_for(case):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            n = int(self.headers.get("content-length", "0"))
            self.rfile.read(n)
            if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                return self.reply(200, {"input_tokens": 1})
            with case.lock:
                case.times.append(time.monotonic())
                first = len(case.times) == 1
            if first and case.status:
                return self.error(case)
            self.stream(case.hold if first else None)

        def reply(self, status, body, headers=()):
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def error(self, c):
            kind = "rate_limit_error" if c.status == 429 else "overloaded_error"
            headers = []
            if c.retry_after is not None:
                headers.append(("retry-after", str(c.retry_after)))
            if c.should_retry is not None:
                headers.append(("x-should-retry", c.should_retry))
            self.reply(c.status, {"type": "error", "error": {"type": kind, "message": c.name}},
                       headers)

        def stream(self, hold):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            chunks = []
            if hold:
                end = time.monotonic() + hold
                while time.monotonic() < end:
                    self.chunk(sse("ping", {"type": "ping"}))
                    time.sleep(10)
            chunks = text_stream()
            for c in chunks:
                self.chunk(c)
            self.wfile.write(b"0\r\n\r\n")

        def chunk(self, b):
            self.wfile.write(f"{len(b):x}\r\n".encode() + b + b"\r\n")
            self.wfile.flush()

    return H


def run_case(case, claude, timeout, rows):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(case))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    home = tempfile.mkdtemp()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home,
           "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{srv.server_port}",
           "ANTHROPIC_API_KEY": "sk-ant-dummy", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    start = time.monotonic()
    try:
        p = subprocess.run([claude, "-p", "say ok"], env=env, cwd=home, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        done = p.returncode == 0 and TEXT in p.stdout
        tail = (p.stdout + p.stderr).strip().splitlines()[-1:] or [""]
    except subprocess.TimeoutExpired:
        done, tail = False, [f"still running at {timeout} s (killed)"]
    wall = time.monotonic() - start
    srv.shutdown()
    t = case.times
    gap = f"{t[1] - t[0]:.1f} s" if len(t) > 1 else "—"
    rows.append((case.name, gap, len(t), "yes" if done else "no", f"{wall:.1f} s",
                 tail[0][:80].replace("|", "/")))


def cases(holds):
    out = []
    for status in (429, 503):
        for ra in (5, 30, 59, 61, 300):
            for sr in (None, "true"):
                name = f"{status} retry-after {ra}" + (" x-should-retry true" if sr else "")
                out.append(Case(name, status, ra, sr))
        out.append(Case(f"{status} no retry-after", status))
        out.append(Case(f"{status} x-should-retry false", status, 5, "false"))
    for h in holds:
        out.append(Case(f"200, pings every 10 s for {h} s, then text", hold=h))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claude", required=True, help="path of the claude binary to run")
    ap.add_argument("--timeout", type=float, default=420, help="seconds before a run is killed")
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ap.add_argument("--holds", default="120", help="comma-separated seconds of ping-only holds")
    a = ap.parse_args()
    rows = []
    holds = [int(h) for h in a.holds.split(",") if h.strip()]
    todo = [c for c in cases(holds) if a.only in c.name]
    threads = [threading.Thread(target=run_case, args=(c, a.claude, a.timeout, rows))
               for c in todo]
    for t in threads:
        t.start()
        time.sleep(0.5)
    for t in threads:
        t.join()
    order = {c.name: i for i, c in enumerate(todo)}
    rows.sort(key=lambda r: order[r[0]])
    print("| answer to the first request | wait before the retry | requests | finished | wall time | last line |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
