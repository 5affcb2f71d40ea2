#!/usr/bin/env python3
"""A local web site for URL health runs (bench/health.sh): N pages under /p/<n>, with a mix of problems chosen by
n, a robots.txt, and a count of what it was asked (GET /stats as JSON). Python's standard library only.

    python3 bench/health_site.py PORT N

Page n is, by the first rule that holds:
  n % 50 == 0   404            n % 97 == 0   410          n % 41 == 1   301 to /p/<n>/moved
  n % 83 == 9   disallowed for Googlebot in robots.txt (/p/<n>/private lies under Disallow: /private-)
  n % 61 == 7   X-Robots-Tag: noindex                    n % 47 == 3   <meta name="robots" content="noindex">
  n % 71 == 5   <link rel="canonical"> to another page   n % 101 == 11 503 on the first request, then 200
  otherwise     200, with an ETag (a conditional request that matches gets 304)
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATS = {"requests": 0, "by_status": {}, "in_flight": 0, "max_in_flight": 0, "per_second": {}, "agents": {},
         "conditional": 0, "first": None, "last": None}
SEEN_503 = set()


def page(n):
    """(status, headers, body) of page n."""
    if n % 50 == 0:
        return 404, {}, b"not found"
    if n % 97 == 0:
        return 410, {}, b"gone"
    if n % 41 == 1:
        return 301, {"Location": f"/p/{n}/moved"}, b""
    if n % 101 == 11 and n not in SEEN_503:
        SEEN_503.add(n)
        return 503, {"Retry-After": "1"}, b"busy"
    head = f"<title>page {n}</title>"
    headers = {"Content-Type": "text/html; charset=utf-8", "ETag": f'"p{n}"'}
    if n % 61 == 7:
        headers["X-Robots-Tag"] = "noindex"
    if n % 47 == 3:
        head += '<meta name="robots" content="noindex">'
    if n % 71 == 5:
        head += f'<link rel="canonical" href="/p/{n + 1}">'
    body = f"<!doctype html><html><head>{head}</head><body>{'x' * 20000}</body></html>".encode()
    return 200, headers, body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        now = time.time()
        with LOCK:
            STATS["in_flight"] += 1
            STATS["max_in_flight"] = max(STATS["max_in_flight"], STATS["in_flight"])
        try:
            self.answer(now)
        finally:
            with LOCK:
                STATS["in_flight"] -= 1

    def answer(self, now):
        path = self.path
        if path == "/stats":
            with LOCK:
                body = json.dumps(STATS).encode()
            return self.send(200, {"Content-Type": "application/json"}, body)
        with LOCK:
            STATS["requests"] += 1
            STATS["first"] = STATS["first"] or now
            STATS["last"] = now
            sec = str(int(now))
            STATS["per_second"][sec] = STATS["per_second"].get(sec, 0) + 1
            agent = self.headers.get("User-Agent", "")
            STATS["agents"][agent] = STATS["agents"].get(agent, 0) + 1
        if path == "/robots.txt":
            return self.count(200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private-\n"
                              b"\nUser-agent: Googlebot\nDisallow: /p/private\nDisallow: /*/private$\n")
        parts = path.strip("/").split("/")
        if len(parts) >= 2 and parts[0] == "p" and parts[1].isdigit():
            n = int(parts[1])
            with LOCK:
                status, headers, body = page(n)
            if status == 200 and self.headers.get("If-None-Match") == headers.get("ETag"):
                with LOCK:
                    STATS["conditional"] += 1
                return self.count(304, {"ETag": headers["ETag"]}, b"")
            return self.count(status, headers, body)
        return self.count(404, {}, b"no such page")

    def count(self, status, headers, body):
        with LOCK:
            STATS["by_status"][str(status)] = STATS["by_status"].get(str(status), 0) + 1
        self.send(status, headers, body)

    def send(self, status, headers, body):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
