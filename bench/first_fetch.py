#!/usr/bin/env python3
"""The first crawler fetch of a page a write changed, some time after the write's answer (issue 13, item 2).

Changes the lastmod of the first URL of page --page through the API, waits --after seconds, then times one GET of
that page (gzip), --n times. With SITEMAPD_PRERENDER on (the default) the page has been rendered in the background
by then; with it off, the fetch renders it. Prints JSON: each fetch's seconds, p50, and the bytes.

  python3 bench/first_fetch.py --base http://127.0.0.1:18080 --token bench-token --page 20 --n 5
"""
import argparse
import datetime
import gzip
import json
import re
import statistics
import time
import urllib.request


def request(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.status, r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--page", type=int, default=20)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--after", type=float, default=1.0)
    a = ap.parse_args()
    page = f"{a.base}/sitemap-{a.page}.xml"
    _, body = request(page, headers={"Accept-Encoding": "gzip"})
    loc = re.search(rb"<loc>([^<]+)</loc>", gzip.decompress(body)).group(1).decode()
    times, size = [], 0
    for i in range(a.n):
        day = datetime.date(2020, 1, 1) + datetime.timedelta(days=int(time.time()) % 1000 + i)
        entry = json.dumps([{"loc": loc, "lastmod": day.isoformat()}]).encode()
        status, answer = request(f"{a.base}/api/v1/urls", "PUT", entry,
                                 {"Content-Type": "application/json", "Authorization": f"Bearer {a.token}"})
        assert status == 200 and json.loads(answer)["updated"] == 1, answer
        time.sleep(a.after)
        t = time.perf_counter()
        status, body = request(page, headers={"Accept-Encoding": "gzip"})
        times.append(time.perf_counter() - t)
        assert status == 200
        size = len(body)
    print(json.dumps({"page": a.page, "after_s": a.after, "times_s": times, "p50_s": statistics.median(times),
                      "bytes": size}))


if __name__ == "__main__":
    main()
