#!/usr/bin/env python3
"""Feeds NDJSON from stdin to sitemapd's write API in requests of --batch lines, one connection, one request at a
time, and prints a JSON line every --every rows: rows so far, seconds, the rate over the last interval and over
all, sitemapd's RSS (--pid) and the database's size (--db, Postgres). The last line is the whole run's summary.

  target/release/examples/dataset --rows 100000000 | bench/feed.py --base URL --token T --pid PID --db DSN
"""
import argparse
import http.client
import json
import subprocess
import sys
import time
import urllib.parse


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def db_bytes(db):
    out = subprocess.run(["psql", "-Atq", db, "-c", "SELECT pg_database_size(current_database())"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--every", type=int, default=1_000_000)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--db")
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    headers = {"Content-Type": "application/x-ndjson", "Authorization": f"Bearer {a.token}"}
    totals = {"received": 0, "created": 0, "updated": 0, "unchanged": 0}
    start = last_t = time.perf_counter()
    last_n = 0
    peak_rss = 0

    def report(final=False):
        nonlocal last_t, last_n, peak_rss
        now = time.perf_counter()
        n = totals["received"]
        rss = rss_kib(a.pid) if a.pid else None
        peak_rss = max(peak_rss, rss or 0)
        line = {"rows": n, "secs": round(now - start, 1),
                "rows_per_s": round((n - last_n) / (now - last_t)) if now > last_t and n > last_n else None,
                "overall_rows_per_s": round(n / (now - start)) if now > start else None,
                "rss_kib": rss, "db_bytes": db_bytes(a.db) if a.db else None}
        if final:
            line = {"final": True, **line, **totals, "peak_rss_kib": peak_rss}
        print(json.dumps(line), flush=True)
        last_t, last_n = now, n

    def send(lines):
        conn.request("PUT", "/api/v1/urls", body=b"".join(lines), headers=headers)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"HTTP {r.status}: {body[:500]!r}")
        for k, v in json.loads(body).items():
            totals[k] += v

    buf = []
    next_report = a.every
    for line in sys.stdin.buffer:
        buf.append(line)
        if len(buf) == a.batch:
            send(buf)
            buf = []
            if totals["received"] >= next_report:
                report()
                next_report += a.every
    if buf:
        send(buf)
    report(final=True)


if __name__ == "__main__":
    main()
