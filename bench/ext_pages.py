#!/usr/bin/env python3
"""Uncached page time per uncompressed MB, plain data set against the extension mix, in alternation.

    bench/ext_pages.py --plain http://127.0.0.1:18100 --mix http://127.0.0.1:18101 [--pages 5] [--rounds 3]

Both sitemapd instances run with the page cache off (SITEMAPD_CACHE_BYTES=0), so every request reads the page from
the database, renders it and (gzip) compresses it. Picks up to --pages pages spread over the index (the last page,
usually partial, only when it is the only one), and for --rounds rounds fetches each page from plain then mix,
gzip then identity, one request at a time on a new connection each. A fetch's time runs from sending the request to
having read the whole body. Per page and encoding: the median over rounds; ms per MB divides it by the page's
uncompressed size in MB (10^6 bytes). The figure per data set and encoding is the median over pages of ms/MB.
Prints JSON. Any answer other than 200 is counted in `errors` (with its status and path) and left out of the times.
Standard library only.
"""
import argparse
import gzip
import http.client
import json
import re
import statistics
import time
import urllib.parse


def fetch(base, path, enc):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    headers = {"Accept-Encoding": "gzip"} if enc == "gzip" else {"Accept-Encoding": "identity"}
    t = time.perf_counter()
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    body = r.read()
    dt = time.perf_counter() - t
    c.close()
    return r.status, r.getheader("Content-Encoding"), body, dt


def pages_of(base):
    status, _, body, _ = fetch(base, "/sitemap.xml", "identity")
    if status != 200:
        raise SystemExit(f"{base}/sitemap.xml: HTTP {status}")
    locs = [urllib.parse.urlsplit(x).path for x in re.findall(r"<loc>([^<]+)</loc>", body.decode())]
    return [p for p in locs if "news" not in p]


def spread(pages, k):
    full = pages[:-1] if len(pages) > 1 else pages
    if len(full) <= k:
        return full
    return [full[round(i * (len(full) - 1) / (k - 1))] for i in range(k)] if k > 1 else [full[len(full) // 2]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plain", required=True)
    ap.add_argument("--mix", required=True)
    ap.add_argument("--pages", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    bases = {"plain": a.plain, "mix": a.mix}
    index = {name: pages_of(base) for name, base in bases.items()}
    chosen = spread(index["mix"], a.pages)
    out = {"pages": chosen, "index_pages": {k: len(v) for k, v in index.items()}, "rounds": a.rounds, "errors": []}
    times = {name: {p: {"gzip": [], "identity": []} for p in chosen} for name in bases}
    info = {name: {p: {} for p in chosen} for name in bases}
    for _ in range(a.rounds):
        for p in chosen:
            for name, base in bases.items():
                for enc in ("gzip", "identity"):
                    status, ce, body, dt = fetch(base, p, enc)
                    if status != 200:
                        out["errors"].append({"target": name, "path": p, "enc": enc, "status": status,
                                              "body": body[:300].decode("utf-8", "replace")})
                        continue
                    times[name][p][enc].append(dt * 1000)
                    i = info[name][p]
                    if enc == "gzip":
                        i["gzip_bytes"] = len(body)
                        i["content_encoding"] = ce
                    elif "identity_bytes" not in i:
                        text = body.decode()
                        i["identity_bytes"] = len(body)
                        i["urls"] = text.count("<url>")
                        i["images"] = text.count("<image:image>")
                        i["videos"] = text.count("<video:video>")
                        i["alternates"] = text.count("<xhtml:link")
    summary = {}
    for name in bases:
        per_page = {}
        for p in chosen:
            i = info[name][p]
            mb = i.get("identity_bytes", 0) / 1e6
            row = dict(i)
            for enc in ("gzip", "identity"):
                ts = times[name][p][enc]
                if ts and mb:
                    row[f"{enc}_ms"] = statistics.median(ts)
                    row[f"{enc}_ms_per_MB"] = row[f"{enc}_ms"] / mb
                    row[f"{enc}_all_ms"] = [round(t, 1) for t in ts]
            per_page[p] = row
        s = {"per_page": per_page}
        for enc in ("gzip", "identity"):
            v = [r[f"{enc}_ms_per_MB"] for r in per_page.values() if f"{enc}_ms_per_MB" in r]
            s[f"{enc}_ms_per_MB"] = statistics.median(v) if v else None
            ms = [r[f"{enc}_ms"] for r in per_page.values() if f"{enc}_ms" in r]
            s[f"{enc}_ms"] = statistics.median(ms) if ms else None
        sizes = [r["identity_bytes"] for r in per_page.values() if "identity_bytes" in r]
        s["identity_MB"] = statistics.median(sizes) / 1e6 if sizes else None
        summary[name] = s
    out.update(summary)
    for enc in ("gzip", "identity"):
        p, m = summary["plain"][f"{enc}_ms_per_MB"], summary["mix"][f"{enc}_ms_per_MB"]
        out[f"ratio_{enc}_ms_per_MB"] = m / p if p and m else None
        p, m = summary["plain"][f"{enc}_ms"], summary["mix"][f"{enc}_ms"]
        out[f"ratio_{enc}_ms_per_page"] = m / p if p and m else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
