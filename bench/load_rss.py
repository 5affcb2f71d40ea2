#!/usr/bin/env python3
"""Resident memory of a fresh sitemapd process before, during and after a bulk load into SQLite (the embedded
default), and how much it gives back once the load is over.

    bench/load_rss.py --bin target/release/sitemapd --data urls.ndjson [--port 18095] [--settle 90] [VAR=value ...]

Starts the binary on a new SQLite file in a temporary directory (public URL https://www.example.com, one API
token), reads its RSS, sends the NDJSON file through `PUT /api/v1/urls` (10,000 lines a request, one connection,
as bench/load.py does) while sampling the RSS every 0.25 s, then samples it for `--settle` seconds with nothing
to do. The writer connection closes after 60 s idle (its 32 MiB page cache with it), so the default settle (90 s)
covers that. Extra `VAR=value` arguments go to the server's environment (e.g. `MALLOC_CONF=...` for jemalloc).

Prints JSON: the load's rows/s; RSS in MB at the start, the peak (VmHWM), at the end of the load, and 1, 10, 30,
60 s and `--settle` s after it. Standard library only; exits non-zero on any answer but 200.
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TOKEN = "bench-token"


def kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def mb(pid, key="VmRSS"):
    return round(kb(pid, key) / 1024, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", required=True, help="NDJSON, one entry a line (bench/ext_mix.py, examples/dataset)")
    ap.add_argument("--port", type=int, default=18095)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--settle", type=float, default=90.0)
    ap.add_argument("env", nargs="*", help="VAR=value for the server")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="sitemapd-load-rss-")
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": f"sqlite://{tmp.name}/s.db",
        "SITEMAPD_BIND": f"127.0.0.1:{a.port}",
        "SITEMAPD_PUBLIC_URL": "https://www.example.com",
        "SITEMAPD_API_TOKENS": TOKEN,
        "SITEMAPD_API_TIMEOUT": "1h",
        "RUST_LOG": "sitemapd=warn",
    })
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    log = open(os.path.join(tmp.name, "server.log"), "wb")
    binary = os.path.abspath(a.bin)
    server = subprocess.Popen([binary], env=env, cwd=tmp.name, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{a.port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=1).read()
                break
            except OSError:
                if server.poll() is not None:
                    sys.exit(f"sitemapd exited: {open(log.name).read()[-2000:]}")
                time.sleep(0.1)
        pid = server.pid
        out = {"start_MB": mb(pid)}
        samples = []
        done = threading.Event()

        def sample():
            while not done.wait(0.25):
                samples.append(mb(pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=3600)
        headers = {"Content-Type": "application/x-ndjson", "Authorization": f"Bearer {TOKEN}"}
        rows, t0 = 0, time.perf_counter()

        def send(lines):
            conn.request("PUT", "/api/v1/urls", body=b"".join(lines), headers=headers)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                sys.exit(f"HTTP {r.status} after {rows} rows: {body[:300]!r}")

        batch = []
        with open(a.data, "rb") as f:
            for line in f:
                batch.append(line)
                rows += 1
                if len(batch) == a.batch:
                    send(batch)
                    batch = []
        if batch:
            send(batch)
        conn.close()
        load_s = time.perf_counter() - t0
        done.set()
        sampler.join()
        out.update({"rows": rows, "load_s": round(load_s, 1), "rows_per_s": round(rows / load_s),
                    "during_max_MB": max(samples, default=0.0), "end_of_load_MB": mb(pid)})
        after = {}
        t_end = time.perf_counter()
        for mark in sorted({1, 10, 30, 60, a.settle}):
            if mark > a.settle:
                continue
            time.sleep(max(0.0, t_end + mark - time.perf_counter()))
            after[f"{mark:g}s"] = mb(pid)
        out["after_load_MB"] = after
        out["peak_MB"] = mb(pid, "VmHWM")
        print(json.dumps(out))
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
