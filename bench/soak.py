#!/usr/bin/env python3
"""Soak test: the release binary under a mix of writers, crawlers, slow readers and hostile clients for N minutes.

    cargo build --release
    bench/soak.py                          # 10 minutes on a fresh SQLite file in a temporary directory
    bench/soak.py --minutes 2              # a short run
    bench/soak.py --backend postgres       # on a fresh database of the server at --pg (dropped afterwards)

Not part of CI. Loopback only: the service binds 127.0.0.1 on a free port, and every client connects there. Every
loop ends at the deadline, the number of slow sockets is bounded, and the run stops by itself.

Mix (threads): 2 writers (JSON arrays and NDJSON bodies with a bearer token, identical re-sends, single and bulk
deletes); 4 crawlers (index, pages gzip and identity, .gz files, HEAD, conditional GETs with the last ETag and
Last-Modified); 1 slow-reader keeper (up to --slow sockets with a tiny receive buffer that request large
uncompressed pages and never read, each kept 5-90 s); 1 hostile client (bodies over the limit, a 16 MiB array of
tiny elements, empty and tiny bodies, random bytes, bad JSON, lone surrogates, 1e400, deep nesting, duplicate
Host / Authorization / Content-Length headers, wrong content types and charsets, missing or wrong tokens).

Every answer is counted by (client, status). Memory: VmRSS of the service from /proc every 2 s. The baseline is
taken after the seed load and a warm-up that fetches every page once gzip-encoded (which puts the seed's pages in the
page cache). At the end the clients stop, the slow sockets close, and after --settle seconds idle the RSS is read
again.

The run FAILS (exit 1) if:
- any answer is a 5xx other than the documented 503 (a 503 carrying `Retry-After`: store unavailable, a busy
  page slot, a timeout);
- a response body is shorter than its Content-Length, or a gzip body does not decompress;
- the service dies, or does not exit 0 on SIGTERM;
- the final RSS exceeds the baseline by more than the page cache's growth (`sitemapd_page_cache_bytes` from
  /metrics: what crawlers fetched, kept by design up to `cache_bytes`) plus --rss-slack-mb (default 16 MB: room
  for allocator caching and connection buffers; a leak of 300 bytes per request over 10 minutes exceeds it).
Standard library only.
"""
import argparse
import gzip
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter

TOKEN = "soak-token"
PAGE_MAX_URLS = 20000
# Long locs: ~7 MB uncompressed pages, more than the kernel buffers a socket (4 MB), so that a reader who never
# reads really holds the page's stream.
PAD = "p" * 300


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kb(pid, key="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def page_cache_kb(soak):
    """The page cache's contents (`sitemapd_page_cache_bytes` from /metrics), in kB: memory the service keeps by
    design, up to `cache_bytes` (32 MiB by default)."""
    status, _, body = soak.exchange(["GET /metrics HTTP/1.1", "Host: x", "Connection: close"])
    if status != 200:
        raise SystemExit(f"/metrics answered {status}")
    for line in body.decode().splitlines():
        if line.startswith("sitemapd_page_cache_bytes "):
            return float(line.split()[1]) / 1024
    raise SystemExit("/metrics has no sitemapd_page_cache_bytes")


class Soak:
    def __init__(self, args, port, pid):
        self.args = args
        self.port = port
        self.pid = pid
        self.public = f"http://localhost:{port}"
        self.deadline = 0.0
        self.lock = threading.Lock()
        self.statuses = Counter()
        self.failures = []
        self.findings = Counter()  # failure signature -> count
        self.rss = []  # (seconds since start, kB)
        self.stop_sampling = threading.Event()
        self.next_id = 0
        self.stored = []  # locs believed stored (approximate: for updates and deletes)
        self.rng = random.Random(args.seed)

    # --- HTTP over raw sockets (every request `Connection: close`) ---------------------------------------------

    def exchange(self, head, body=b"", timeout=60):
        """Sends `head` (lines without the final blank line) and `body`; returns (status, headers, body) or
        (outcome, {}, b"") where outcome is 'reset' (the server closed while we sent) or 'timeout'."""
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                try:
                    s.sendall(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server may answer early (413) and close: read what it said
                chunks = []
                while True:
                    try:
                        chunk = s.recv(65536)
                    except ConnectionResetError:
                        break
                    if not chunk:
                        break
                    chunks.append(chunk)
        except socket.timeout:
            return "timeout", {}, b""
        except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
            return "reset", {}, b""
        raw = b"".join(chunks)
        if not raw:
            return "reset", {}, b""
        head_end = raw.find(b"\r\n\r\n")
        if head_end < 0:
            return "reset", {}, b""
        lines = raw[:head_end].decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers, raw[head_end + 4:]

    def request(self, kind, method, path, body=b"", headers=(), timeout=60, label=""):
        head = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close", *headers]
        if body or method in ("PUT", "POST"):
            head.append(f"Content-Length: {len(body)}")
        status, h, payload = self.exchange(head, body, timeout)
        self.record(kind, method, path, status, h, payload, label)
        return status, h, payload

    def record(self, kind, method, path, status, headers, payload, label=""):
        with self.lock:
            self.statuses[(kind, status)] += 1
        if isinstance(status, int) and status >= 500:
            if not (status == 503 and "retry-after" in headers):
                self.fail(f"{kind}: {method} {path} {label} answered {status} {payload[:200]!r}",
                          f"{kind} {method} {label} {status}")
        if isinstance(status, int) and method != "HEAD" and status not in (204, 304):
            length = headers.get("content-length")
            if length is not None and "transfer-encoding" not in headers and int(length) != len(payload):
                self.fail(f"{kind}: {method} {path}: Content-Length {length}, body {len(payload)} bytes",
                          f"{kind} {method} truncated body")
            if status == 200 and headers.get("content-encoding") == "gzip":
                body = payload
                if headers.get("transfer-encoding") == "chunked":
                    body = dechunk(payload)
                try:
                    gzip.decompress(body)
                except Exception as e:  # noqa: BLE001 (any decoding error is the finding)
                    self.fail(f"{kind}: {method} {path}: gzip body does not decompress: {e}",
                              f"{kind} {method} bad gzip")

    def fail(self, message, signature=None):
        """Records a finding; prints only the first of each signature (the count is in the summary)."""
        signature = signature or message
        with self.lock:
            self.findings[signature] += 1
            first = self.findings[signature] == 1
            if first:
                self.failures.append(message)
        if first:
            print("FAIL:", message, file=sys.stderr, flush=True)

    def auth(self):
        return f"Authorization: Bearer {TOKEN}"

    def running(self):
        return time.monotonic() < self.deadline and self.alive()

    def alive(self):
        try:
            os.kill(self.pid, 0)
            return True
        except OSError:
            return False

    # --- data ------------------------------------------------------------------------------------------------

    def new_locs(self, n):
        with self.lock:
            first = self.next_id
            self.next_id += n
        return [f"{self.public}/soak/{i}/{PAD}" for i in range(first, first + n)]

    def entry(self, loc, rng):
        e = {"loc": loc}
        if rng.random() < 0.5:
            e["lastmod"] = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if rng.random() < 0.3:
            e["changefreq"] = rng.choice(["daily", "weekly", "monthly"])
        if rng.random() < 0.3:
            e["priority"] = rng.choice([0.1, 0.5, 0.8, 1.0])
        return e

    def remember(self, locs):
        with self.lock:
            self.stored.extend(locs)
            if len(self.stored) > 200_000:
                del self.stored[: len(self.stored) - 200_000]

    def some_stored(self, rng, n):
        with self.lock:
            if not self.stored:
                return []
            return [rng.choice(self.stored) for _ in range(n)]

    def seed(self, n):
        locs = self.new_locs(n)
        body = "".join(json.dumps({"loc": loc}) + "\n" for loc in locs).encode()
        status, _, payload = self.request("seed", "PUT", "/api/v1/urls", body,
                                          ["Content-Type: application/x-ndjson", self.auth()], timeout=600)
        if status != 200:
            raise SystemExit(f"seed load answered {status}: {payload[:300]!r}")
        self.remember(locs)

    def page_paths(self):
        status, _, body = self.request("crawler", "GET", "/sitemap.xml")
        if status != 200:
            return []
        text = body.decode("utf-8", "replace")
        paths = []
        for part in text.split("<loc>")[1:]:
            loc = part.split("</loc>")[0]
            paths.append(urllib.parse.urlsplit(loc).path)
        return paths

    # --- clients ---------------------------------------------------------------------------------------------

    def writer(self, n):
        rng = random.Random(self.args.seed * 100 + n)
        last = None
        while self.running():
            choice = rng.random()
            if choice < 0.30:  # JSON array: new and updated entries
                locs = self.new_locs(rng.randint(1, 150)) + self.some_stored(rng, rng.randint(0, 50))
                body = json.dumps([self.entry(loc, rng) for loc in locs]).encode()
                ctype = "application/json"
            elif choice < 0.45:  # NDJSON bulk
                locs = self.new_locs(rng.randint(200, 3000)) + self.some_stored(rng, rng.randint(0, 200))
                body = "".join(json.dumps(self.entry(loc, rng)) + "\n" for loc in locs).encode()
                ctype = "application/x-ndjson"
            elif choice < 0.65 and last:  # identical re-send: must change nothing
                ctype, body, locs = last
            elif choice < 0.85:  # one delete
                for loc in self.some_stored(rng, 1):
                    q = urllib.parse.urlencode({"loc": loc})
                    self.request("writer", "DELETE", f"/api/v1/urls?{q}", headers=[self.auth()])
                continue
            else:  # bulk delete, some never stored
                locs = self.some_stored(rng, rng.randint(1, 100)) + [f"{self.public}/never/{rng.random()}"]
                self.request("writer", "POST", "/api/v1/urls/delete", json.dumps(locs).encode(),
                             ["Content-Type: application/json", self.auth()])
                continue
            status, _, _ = self.request("writer", "PUT", "/api/v1/urls", body,
                                              [f"Content-Type: {ctype}", self.auth()], timeout=300)
            if status == 200:
                self.remember(locs)
                last = (ctype, body, locs)

    def crawler(self, n):
        rng = random.Random(self.args.seed * 1000 + n)
        validators = {}
        paths = []
        while self.running():
            if not paths or rng.random() < 0.1:
                paths = self.page_paths() or paths
                if not paths:
                    time.sleep(0.2)
                    continue
            path = rng.choice(paths)
            choice = rng.random()
            if choice < 0.35:
                status, h, _ = self.request("crawler", "GET", path, headers=["Accept-Encoding: gzip"])
                if status == 200:
                    validators[path] = (h.get("etag"), h.get("last-modified"))
            elif choice < 0.55 and path in validators:
                etag, modified = validators[path]
                header = f"If-None-Match: {etag}" if rng.random() < 0.7 else f"If-Modified-Since: {modified}"
                self.request("crawler", "GET", path, headers=["Accept-Encoding: gzip", header])
            elif choice < 0.70:
                self.request("crawler", "GET", path)  # identity, streamed
            elif choice < 0.85:
                self.request("crawler", "GET", path + ".gz")
            elif choice < 0.95:
                self.request("crawler", "HEAD", path, headers=["Accept-Encoding: gzip"])
            else:
                self.request("crawler", "GET", "/sitemap.xml", headers=["Accept-Encoding: gzip"])

    def slow_readers(self):
        rng = random.Random(self.args.seed * 7)
        held = []  # (socket, close at)
        paths = []
        while self.running():
            now = time.monotonic()
            for s, until in [h for h in held if h[1] <= now]:
                s.close()
            held = [h for h in held if h[1] > now]
            if len(held) < self.args.slow:
                if not paths or rng.random() < 0.2:
                    paths = self.page_paths() or paths
                if paths:
                    s = socket.socket()
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    try:
                        s.connect(("127.0.0.1", self.port))
                        path = rng.choice(paths)
                        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
                        held.append((s, now + rng.uniform(5, 90)))
                        with self.lock:
                            self.statuses[("slow", "opened")] += 1
                    except OSError:
                        s.close()
            time.sleep(0.5)
        for s, _ in held:
            s.close()

    def hostile(self):
        rng = random.Random(self.args.seed * 13)
        limit = 16 * 1024 * 1024
        over = b"[" + b"0," * (limit // 2) + b"0]"  # just over max_json_bytes
        tiny_elements = b"[" + b"0," * (limit // 2 - 2) + b"0]"  # under it: 8 M elements
        deep = b"[" * 200 + b"]" * 200
        entry = f'{{"loc": "{self.public}/h"}}'
        bodies = [
            ("over the limit", over, "application/json"),
            ("8M tiny elements", tiny_elements, "application/json"),
            ("empty json", b"", "application/json"),
            ("empty ndjson", b"", "application/x-ndjson"),
            ("tiny", b"[", "application/json"),
            ("object", b"{}", "application/json"),
            ("bad json", b"[{\"loc\": }]", "application/json"),
            ("lone surrogate", f'[{{"loc": "{self.public}/\\ud800"}}]'.encode(), "application/json"),
            ("lone surrogate ndjson", f'{{"loc": "{self.public}/\\ud800"}}\n'.encode(), "application/x-ndjson"),
            ("1e400", f'[{{"loc": "{self.public}/x", "priority": 1e400}}]'.encode(), "application/json"),
            ("-0.0", f'[{{"loc": "{self.public}/negzero", "priority": -0.0}}]'.encode(), "application/json"),
            ("deep", deep, "application/json"),
            ("deep ndjson", deep + b"\n", "application/x-ndjson"),
            ("duplicate keys", f'[{{"loc": "https://evil.example/", "loc": "{self.public}/d"}}]'.encode(),
             "application/json"),
            ("utf-16", f"[{entry}]".encode("utf-16"), "application/json; charset=utf-16"),
            ("text", f"[{entry}]".encode(), "text/plain"),
            ("long line", b'{"loc": "' + b"a" * 70000 + b'"}\n', "application/x-ndjson"),
        ]
        while self.running():
            choice = rng.random()
            if choice < 0.6:
                name, body, ctype = rng.choice(bodies)
                if name in ("over the limit", "8M tiny elements") and rng.random() < 0.8:
                    continue  # the big ones less often: they cost the client more than the server
                self.request("hostile", "PUT", "/api/v1/urls", body, [f"Content-Type: {ctype}", self.auth()],
                             label=f"({name})")
            elif choice < 0.7:
                body = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096)))
                ctype = rng.choice(["application/json", "application/x-ndjson"])
                self.request("hostile", "PUT", "/api/v1/urls", body, [f"Content-Type: {ctype}", self.auth()],
                             label="(random bytes)")
            elif choice < 0.8:  # duplicate or missing headers, on raw sockets
                heads = [
                    ["GET /sitemap.xml HTTP/1.1", "Connection: close"],
                    ["GET /sitemap.xml HTTP/1.1", "Host: a", "Host: b", "Connection: close"],
                    ["GET /api/v1/urls?limit=1 HTTP/1.1", "Host: x", self.auth(), "Authorization: Bearer wrong",
                     "Connection: close"],
                    ["PUT /api/v1/urls HTTP/1.1", "Host: x", self.auth(), "Content-Type: application/json",
                     "Content-Length: 2", "Content-Length: 3", "Connection: close"],
                    ["GET /sitemap-1%2exml HTTP/1.1", "Host: x", "Connection: close"],
                    ["GET /sitemap-1.xml HTTP/1.1", "Host: x", "Accept-Encoding: identity;q=0, *;q=0",
                     "Connection: close"],
                    ["GET /api/v1/urls?access_token=" + TOKEN + " HTTP/1.1", "Host: x", "Connection: close"],
                ]
                head = rng.choice(heads)
                status, h, payload = self.exchange(head, b"[]" if head[0].startswith("PUT") else b"")
                self.record("hostile", head[0].split()[0], head[0].split()[1], status, h, payload, "(headers)")
            elif choice < 0.9:  # no token, wrong token
                auth = rng.choice([[], ["Authorization: Bearer nope"], ["Authorization: Basic Zm9vOmJhcg=="]])
                self.request("hostile", "PUT", "/api/v1/urls", b"[]", ["Content-Type: application/json", *auth])
            else:  # bad query parameters
                path = rng.choice(["/api/v1/urls?limit=0", "/api/v1/urls?limit=99999", "/api/v1/urls?after=zz",
                                   "/api/v1/urls?loc=a&loc=b", "/api/v1/urls?loc=%ff", "/sitemap-0.xml",
                                   "/sitemap-01.xml", "/sitemap-99999999999999999999.xml"])
                self.request("hostile", "GET", path, headers=[self.auth()])

    def sample_rss(self, started):
        while not self.stop_sampling.is_set():
            kb = rss_kb(self.pid)
            if kb:
                with self.lock:
                    self.rss.append((time.monotonic() - started, kb))
            self.stop_sampling.wait(2)


def dechunk(data):
    out = bytearray()
    while data:
        line, _, rest = data.partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="server for --backend postgres")
    ap.add_argument("--bin", default="target/release/sitemapd")
    ap.add_argument("--seed-urls", type=int, default=50000)
    ap.add_argument("--slow", type=int, default=24, help="slow-reader sockets held at once")
    ap.add_argument("--settle", type=float, default=30, help="idle seconds before the final RSS")
    ap.add_argument("--rss-slack-mb", type=float, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra variable for the service, e.g. SITEMAPD_CACHE_BYTES=0 (repeatable)")
    args = ap.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = os.path.join(root, args.bin)
    if not os.path.exists(binary):
        raise SystemExit(f"{binary} not found: cargo build --release first")
    tmp = tempfile.TemporaryDirectory(prefix="sitemapd-soak-")
    pg_db = None
    if args.backend == "sqlite":
        database_url = f"sqlite://{tmp.name}/soak.db"
    else:
        pg_db = f"sitemapd_soak_{os.getpid()}"
        subprocess.run(["psql", args.pg + "/postgres", "-qc", f"CREATE DATABASE {pg_db}"], check=True)
        database_url = f"{args.pg}/{pg_db}"
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DATABASE_URL": database_url,
        "SITEMAPD_BIND": f"127.0.0.1:{port}",
        "SITEMAPD_PUBLIC_URL": f"http://localhost:{port}",
        "SITEMAPD_API_TOKENS": TOKEN,
        "SITEMAPD_PAGE_MAX_URLS": str(PAGE_MAX_URLS),
        "RUST_LOG": "sitemapd=warn",
    }
    for pair in args.env:
        name, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--env {pair}: expected NAME=VALUE")
        env[name] = value
    log_path = os.path.join(tmp.name, "sitemapd.log")
    log = open(log_path, "w")
    server = subprocess.Popen([binary], env=env, cwd=tmp.name, stdout=log, stderr=subprocess.STDOUT)
    soak = Soak(args, port, server.pid)
    ok = False
    try:
        for _ in range(300):
            status, _, _ = soak.exchange(["GET /healthz HTTP/1.1", "Host: x", "Connection: close"], timeout=2)
            if status == 200:
                break
            if server.poll() is not None:
                raise SystemExit(f"sitemapd exited at start: see {log_path}")
            time.sleep(0.1)
        started = time.monotonic()
        sampler = threading.Thread(target=soak.sample_rss, args=(started,), daemon=True)
        sampler.start()
        print(f"seeding {args.seed_urls} URLs ({args.backend}, port {port})", flush=True)
        soak.seed(args.seed_urls)
        for path in soak.page_paths():
            soak.request("warm-up", "GET", path, headers=["Accept-Encoding: gzip"])
        time.sleep(2)
        baseline = rss_kb(server.pid)
        baseline_cache = page_cache_kb(soak)
        print(f"baseline RSS {baseline / 1024:.1f} MB (page cache {baseline_cache / 1024:.1f} MB); "
              f"soaking for {args.minutes} min", flush=True)

        soak.deadline = time.monotonic() + args.minutes * 60
        threads = [threading.Thread(target=soak.writer, args=(i,)) for i in range(2)]
        threads += [threading.Thread(target=soak.crawler, args=(i,)) for i in range(4)]
        threads += [threading.Thread(target=soak.slow_readers), threading.Thread(target=soak.hostile)]
        for t in threads:
            t.start()
        last_report = time.monotonic()
        while any(t.is_alive() for t in threads):
            time.sleep(1)
            if time.monotonic() - last_report >= 30:
                last_report = time.monotonic()
                with soak.lock:
                    total = sum(soak.statuses.values())
                    fives = sum(c for (k, s), c in soak.statuses.items() if isinstance(s, int) and s >= 500)
                print(f"  {time.monotonic() - started:6.0f} s  RSS {rss_kb(server.pid) / 1024:6.1f} MB  "
                      f"answers {total}  5xx {fives}", flush=True)
        for t in threads:
            t.join()
        if not soak.alive() or server.poll() is not None:
            soak.fail(f"sitemapd died during the soak (exit {server.poll()}): see {log_path}")
        time.sleep(args.settle)
        final = rss_kb(server.pid)
        final_cache = page_cache_kb(soak)
        peak = rss_kb(server.pid, "VmHWM")
        soak.stop_sampling.set()
        status, _, _ = soak.exchange(["GET /readyz HTTP/1.1", "Host: x", "Connection: close"])
        if status != 200:
            soak.fail(f"/readyz answered {status} after the soak")

        print("\nanswers by client and status:")
        for (kind, status), count in sorted(soak.statuses.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            print(f"  {kind:8} {status!s:8} {count}")
        series = soak.rss
        step = max(1, len(series) // 20)
        print("\nRSS (s: MB): " + ", ".join(f"{t:.0f}: {kb / 1024:.0f}" for t, kb in series[::step]))
        slack = args.rss_slack_mb * 1024
        # The page cache keeps what crawlers fetched, up to its bound, by design: its growth is not counted.
        cache_growth = max(0.0, final_cache - baseline_cache)
        print(f"RSS baseline {baseline / 1024:.1f} MB, final {final / 1024:.1f} MB after {args.settle:.0f} s idle, "
              f"peak {peak / 1024:.1f} MB; page cache {baseline_cache / 1024:.1f} -> {final_cache / 1024:.1f} MB")
        print(f"allowed final: baseline + page cache growth ({cache_growth / 1024:.1f} MB) + "
              f"{args.rss_slack_mb:.0f} MB = {(baseline + cache_growth + slack) / 1024:.1f} MB")
        if final > baseline + cache_growth + slack:
            soak.fail(f"RSS did not return near its start: {final / 1024:.1f} MB > {baseline / 1024:.1f} + "
                      f"{cache_growth / 1024:.1f} (page cache) + {args.rss_slack_mb:.0f} MB")
        ok = True
    finally:
        soak.deadline = 0
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                code = server.wait(60)
                if code != 0:
                    soak.fail(f"sitemapd exited {code} on SIGTERM: see {log_path}")
            except subprocess.TimeoutExpired:
                server.kill()
                soak.fail("sitemapd did not exit within 60 s of SIGTERM")
        log.close()
        if pg_db:
            subprocess.run(["psql", args.pg + "/postgres", "-qc", f"DROP DATABASE IF EXISTS {pg_db} WITH (FORCE)"])
        if soak.failures:
            with open(log_path) as f:
                tail = f.readlines()[-30:]
            print("\nlast lines of the service's log:\n" + "".join(tail), file=sys.stderr)
    if soak.failures or not ok:
        print("\nSOAK FAILED. Findings (count, what):", file=sys.stderr)
        for signature, count in soak.findings.most_common():
            print(f"  {count:6}  {signature}", file=sys.stderr)
        return 1
    print("\nSOAK PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
