#!/usr/bin/env python3
"""Peak memory of a fresh sitemapd process while it serves 16 uncached 50,000-URL pages at once.

    bench/memprobe.py --base http://127.0.0.1:18080 --pid PID [--conc 16]

Fetches the first `conc` pages the index lists, all at once, gzip-encoded (each compressed on the spot), then
the same pages at once without compression (inflated per response from the page's gzip since a8a73dd;
streamed from the database before), and reports the process's VmHWM (peak resident set) before and after, in MB,
and the wall time of each round of fetches (`gzip_s`, `identity_s`: all 16 answered). A fetch that fails (not 200, connection refused or reset) is listed in
`errors` and makes the exit status 1. Standard library only.
"""
import argparse
import http.client
import json
import re
import sys
import threading
import time
import urllib.parse


def kb(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def get(base, path, headers):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    n = len(r.read())
    c.close()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status}")
    return n


def all_at_once(base, paths, headers, errors):
    sizes = [0] * len(paths)

    def one(i):
        try:
            sizes[i] = get(base, paths[i], headers)
        except (OSError, http.client.HTTPException, SystemExit) as e:
            errors.append(f"{paths[i]} {headers}: {e!r}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(paths))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(sizes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--conc", type=int, default=16)
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.base)
    c = http.client.HTTPConnection(u.hostname, u.port)
    c.request("GET", "/sitemap.xml")
    index = c.getresponse().read().decode()
    pages = [urllib.parse.urlsplit(x).path for x in re.findall(r"<loc>([^<]+)</loc>", index)]
    pages = [p for p in pages if "sitemap-news" not in p][: a.conc]  # pages only, not the news sitemap
    out = {"pages": len(pages), "hwm_start_MB": kb(a.pid, "VmHWM") / 1024}
    errors = []
    t = time.perf_counter()
    out["gzip_bytes"] = all_at_once(a.base, pages, {"Accept-Encoding": "gzip"}, errors)
    out["gzip_s"] = round(time.perf_counter() - t, 3)
    out["hwm_after_gzip_MB"] = kb(a.pid, "VmHWM") / 1024
    t = time.perf_counter()
    out["identity_bytes"] = all_at_once(a.base, pages, {}, errors)
    out["identity_s"] = round(time.perf_counter() - t, 3)
    out["hwm_after_identity_MB"] = kb(a.pid, "VmHWM") / 1024
    out["rss_end_MB"] = kb(a.pid, "VmRSS") / 1024
    if errors:
        out["errors"] = errors
    print(json.dumps(out))
    if errors:  # a failed fetch makes the peak meaningless
        sys.exit(f"memprobe: {len(errors)} fetches failed, first: {errors[0]}")


if __name__ == "__main__":
    main()
