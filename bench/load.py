#!/usr/bin/env python3
"""Sends NDJSON from stdin to sitemapd's write API in batches over one connection, and times it.

    target/release/examples/dataset --rows 100000 | bench/load.py --base http://127.0.0.1:18090 --token T

Prints JSON: rows, seconds, rows_per_s and the summed {received, created, updated, unchanged}. Standard library
only. Exits non-zero on any answer but 200.
"""
import argparse
import http.client
import json
import sys
import time
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--token")
    ap.add_argument("--batch", type=int, default=10_000)
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.base)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=3600)
    headers = {"Content-Type": "application/x-ndjson"}
    if a.token:
        headers["Authorization"] = f"Bearer {a.token}"
    totals = {"received": 0, "created": 0, "updated": 0, "unchanged": 0}
    rows, busy = 0, 0.0

    def send(lines):
        nonlocal busy
        t = time.perf_counter()
        conn.request("PUT", "/api/v1/urls", body=b"".join(lines), headers=headers)
        r = conn.getresponse()
        body = r.read()
        busy += time.perf_counter() - t
        if r.status != 200:
            sys.exit(f"HTTP {r.status} after {totals['received']} rows: {body[:300]!r}")
        for k, v in json.loads(body).items():
            totals[k] = totals.get(k, 0) + v

    start = time.perf_counter()
    batch = []
    for line in sys.stdin.buffer:
        batch.append(line)
        rows += 1
        if len(batch) == a.batch:
            send(batch)
            batch = []
    if batch:
        send(batch)
    wall = time.perf_counter() - start
    # rows_per_s counts the time the server took (request sent to answer read), not the generator's.
    print(json.dumps({"rows": rows, "seconds": busy, "wall_s": wall, "rows_per_s": rows / busy if busy else None,
                      "batch": a.batch, **totals}))


if __name__ == "__main__":
    main()
