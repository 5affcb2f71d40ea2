#!/usr/bin/env python3
"""Issue 29, item 5: what SITEMAPD_DATABASE_POOLER=transaction costs. Three set-ups, interleaved within one run
(A B C, A B C, …; the medians of the rounds are reported), each on a fresh Postgres database and a fresh process:

  direct      DATABASE_URL straight to Postgres, SITEMAPD_DATABASE_POOLER=none (today's default)
  direct-tx   the same server, SITEMAPD_DATABASE_POOLER=transaction (the setting's own cost)
  pgbouncer   through PgBouncer in transaction mode (--pooler), SITEMAPD_DATABASE_POOLER=transaction

Measures per set-up and round: an NDJSON load of --rows new URLs (10,000 a request, one connection), its
identical re-send, --small single-URL PUTs one after another (a write's fixed cost: every statement of a small
write is parsed again under the setting), and --cold fetches of page 1 with the cache off (50,000 URLs read from
the database and rendered, gzip). Prints one JSON line per round and set-up, then the medians.

  bench/pooler.py --bin target/release/sitemapd --pg postgres://postgres@127.0.0.1:5432 \
      --pooler postgres://postgres@127.0.0.1:16432 --port 16480 --rounds 3
"""
import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import time
import urllib.parse

PUBLIC = "https://www.example.com"
TOKEN = "bench-token"


def psql(dsn, sql):
    subprocess.run(["psql", "-Xq", dsn, "-c", sql], check=True, capture_output=True)


def wait_healthy(port, proc):
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"sitemapd exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("sitemapd did not become ready")


def put(conn, body, ctype):
    conn.request("PUT", "/api/v1/urls", body=body,
                 headers={"Content-Type": ctype, "Authorization": f"Bearer {TOKEN}", "Host": "localhost"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise SystemExit(f"PUT answered {r.status}: {data[:300]!r}")
    return json.loads(data)


def load(port, rows, batch=10_000):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    for first in range(0, rows, batch):
        body = "".join(
            json.dumps({"loc": f"{PUBLIC}/item/{i:08d}", "lastmod": "2026-11-01", "priority": 0.5}) + "\n"
            for i in range(first, min(rows, first + batch)))
        put(conn, body.encode(), "application/x-ndjson")
    return rows / (time.perf_counter() - start)


def small_writes(port, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    start = time.perf_counter()
    for i in range(n):
        put(conn, json.dumps([{"loc": f"{PUBLIC}/small/{i:06d}"}]).encode(), "application/json")
    return n / (time.perf_counter() - start)


def cold_page_ms(port, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        conn.request("GET", "/sitemap-1.xml", headers={"Accept-Encoding": "gzip", "Host": "localhost"})
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"page 1 answered {r.status}")
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run(a, setup, rnd, port):
    db = f"sitemapd_pool_{setup.replace('-', '_')}_{rnd}"
    psql(f"{a.pg}/postgres", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    psql(f"{a.pg}/postgres", f"CREATE DATABASE {db}")
    url = f"{a.pooler if setup == 'pgbouncer' else a.pg}/{db}"
    env = dict(os.environ, DATABASE_URL=url, SITEMAPD_BIND=f"127.0.0.1:{port}", SITEMAPD_PUBLIC_URL=PUBLIC,
               SITEMAPD_API_TOKENS=TOKEN, SITEMAPD_CACHE_BYTES="0", SITEMAPD_PRERENDER="false",
               SITEMAPD_CRAWLER_TELEMETRY="false", RUST_LOG="warn",
               SITEMAPD_DATABASE_POOLER="none" if setup == "direct" else "transaction")
    proc = subprocess.Popen([a.bin], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc)
        out = {"setup": setup, "round": rnd}
        out["load_rows_per_s"] = round(load(port, a.rows))
        out["resend_rows_per_s"] = round(load(port, a.rows))
        out["small_writes_per_s"] = round(small_writes(port, a.small), 1)
        out["cold_page_ms"] = round(cold_page_ms(port, a.cold), 1)
        return out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        psql(f"{a.pg}/postgres", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/sitemapd")
    ap.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    ap.add_argument("--pooler", default="postgres://postgres@127.0.0.1:16432")
    ap.add_argument("--port", type=int, default=16480)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--small", type=int, default=2_000)
    ap.add_argument("--cold", type=int, default=15)
    a = ap.parse_args()
    results = []
    for rnd in range(a.rounds):
        for setup in ("direct", "direct-tx", "pgbouncer"):
            r = run(a, setup, rnd, a.port)
            print(json.dumps(r), flush=True)
            results.append(r)
    keys = ("load_rows_per_s", "resend_rows_per_s", "small_writes_per_s", "cold_page_ms")
    medians = {s: {k: statistics.median(r[k] for r in results if r["setup"] == s) for k in keys}
               for s in ("direct", "direct-tx", "pgbouncer")}
    print(json.dumps({"medians": medians}))
    base = medians["direct"]
    for s in ("direct-tx", "pgbouncer"):
        print(json.dumps({"ratio_to_direct": s, **{k: round(medians[s][k] / base[k], 3) for k in keys}}))


if __name__ == "__main__":
    main()
