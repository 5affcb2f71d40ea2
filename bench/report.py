#!/usr/bin/env python3
"""The targets table of BENCHMARKS.md, from one `bench/run.sh` results directory.

    bench/report.py bench/results/<stamp>
"""
import json
import os
import sys


def load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def runs(results, target):
    return {r["label"]: r for r in results.get(target, {}).get("runs", []) if "conc" in r}


def deep_label(by_label):
    pages = [l for l in by_label if l.startswith("page ") and l.endswith(" gzip") and not l.startswith("page 1 ")]
    return pages[0] if pages else None


def m(by_label, label, c, key):
    r = (by_label.get(label) or {}).get("conc", {}).get(str(c), {})
    return r.get(key)


def fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float):
        v = f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"
    return f"{v}{unit}"


def verdict(ok):
    return "-" if ok is None else ("met" if ok else "**missed**")


def ratio(a, b):
    return a / b if a is not None and b else None


def main():
    d = sys.argv[1]
    machine = open(os.path.join(d, "machine.txt")).read().strip().replace("\n", ", ")
    peers = (load(d, "peers.json") or {}).get("results", {})
    dj, ng, sd = runs(peers, "django"), runs(peers, "nginx"), runs(peers, "sitemapd")
    un = runs((load(d, "uncached.json") or {}).get("results", {}), "sitemapd")
    micro = load(d, "micro.json") or {}
    copy = load(d, "copy.json") or {}
    first, resend = load(d, "ingest-first.json") or {}, load(d, "ingest-resend.json") or {}
    small = runs((load(d, "scale-small.json") or {}).get("results", {}), "sitemapd")
    large = runs((load(d, "scale-large.json") or {}).get("results", {}), "sitemapd")
    rows = []

    # 1. uncached page
    deep_dj, deep_sd = deep_label(dj), deep_label(un)
    un_ms = m(un, deep_sd, 1, "p50_ms")
    dj_ms = m(dj, deep_dj, 1, "p50_ms")
    floor_ms = None
    pg = micro.get("postgres", {})
    keyset = [k for k in pg if k.startswith("keyset_page")]
    zl = load(d, "zlib-level.json")
    if keyset and zl:
        last = max(keyset, key=lambda k: int(k[len("keyset_page"):]))
        floor_ms = pg[last]["median_ms"] + zl["s"] * 1000
    x = ratio(dj_ms, un_ms)
    rows.append(("1", f"uncached {deep_sd} (c=1, p50)", fmt(un_ms, " ms"), f"Django {fmt(dj_ms, ' ms')}",
                 f"{fmt(x)}x faster", "≥ 50x", verdict(x and x >= 50)))
    y = ratio(un_ms, floor_ms)
    rows.append(("1", f"… beside the floor (keyset fetch + zlib level {zl['level'] if zl else '?'} of the same page)", fmt(un_ms, " ms"),
                 f"floor {fmt(floor_ms, ' ms')}", f"{fmt(y)}x the floor", "≤ 1.5x", verdict(y and y <= 1.5)))
    # 2. cached page
    deep_ng = deep_label(ng)
    for label_sd, label_ng in ((deep_label(sd), deep_ng), (f"{deep_label(sd)[:-5]} .xml.gz file" if deep_label(sd) else None,
                                                           f"{deep_ng[:-5]} .xml.gz file" if deep_ng else None)):
        for c in (1, 16):
            a, b = m(sd, label_sd, c, "rps"), m(ng, label_ng, c, "rps")
            r = ratio(a, b)
            rows.append(("2", f"cached {label_sd} (c={c})", fmt(a, " req/s"), f"nginx {fmt(b, ' req/s')}",
                         f"{fmt(r)}x nginx", "≥ 0.7x", verdict(r and r >= 0.7)))
    # 3. 304s and the index
    for label in ("deep page If-None-Match (304)", "deep page If-Modified-Since (304)", "index If-None-Match (304)",
                  "index"):
        for c in (1, 16):
            a, b = m(sd, label, c, "rps"), m(ng, label, c, "rps")
            r = ratio(a, b)
            rows.append(("3", f"{label} (c={c})", fmt(a, " req/s"), f"nginx {fmt(b, ' req/s')}", f"{fmt(r)}x nginx",
                         "≥ 0.5x", verdict(r and r >= 0.5)))
    a, b = m(large, "index", 1, "p50_ms"), m(small, "index", 1, "p50_ms")
    r = ratio(a, b)
    rows.append(("3", "index time, large scale / small scale (c=1, p50)", fmt(a, " ms"), fmt(b, " ms"),
                 f"{fmt(r)}x", "≤ 1.2x", verdict(r and r <= 1.2)))
    # 4. ingest
    a, b = first.get("rows_per_s"), copy.get("copy_indexed_rows_per_s")
    r = ratio(a, b)
    rows.append(("4", f"NDJSON ingest of {first['rows']:,} new URLs" if first.get("rows") else "NDJSON ingest", fmt(a, " rows/s"),
                 f"COPY {fmt(b, ' rows/s')}", f"{fmt(r)}x COPY", "≥ 0.5x", verdict(r and r >= 0.5)))
    a, b = resend.get("rows_per_s"), first.get("rows_per_s")
    r = ratio(a, b)
    rows.append(("4", "identical re-send (all unchanged)", fmt(a, " rows/s"), f"first load {fmt(b, ' rows/s')}",
                 f"{fmt(r)}x", "≥ 1x", verdict(r and r >= 1)))
    # 5. memory
    for name in ("main", "small", "large"):
        mem = load(d, f"memory-{name}.json")
        if mem:
            peak = mem["hwm_after_identity_MB"]
            rows.append(("5", f"peak RSS, 16 uncached pages at once, gzip then identity ({name})",
                         fmt(peak, " MB"), "", "", "≤ 64 MB", verdict(peak <= 64)))
    # 6. depth
    deep_large = deep_label(large)
    a, b = m(large, deep_large, 1, "p50_ms"), m(large, "page 1 gzip", 1, "p50_ms")
    r = ratio(a, b)
    rows.append(("6", f"large scale: uncached {deep_large} / page 1 (c=1, p50)", fmt(a, " ms"), fmt(b, " ms"),
                 f"{fmt(r)}x", "≤ 1.2x", verdict(r and r <= 1.2)))

    # 7. extensions (bench/ext.sh): the mix against the plain data set, cache off
    ext = load(d, "ext-summary.json")
    if ext:
        pl, mx = ext["plain"], ext["mix"]
        for enc in ("gzip", "identity"):
            r = ext[f"ratio_{enc}_ms_per_MB"]
            rows.append(("7", f"uncached page per uncompressed MB, {enc}, mix / plain (c=1, median of pages)",
                         fmt(mx[f"{enc}_ms_per_MB"], " ms/MB"), f"plain {fmt(pl[f'{enc}_ms_per_MB'], ' ms/MB')}",
                         f"{fmt(r)}x", "≤ 1.2x", verdict(r and r <= 1.2)))
        r = ext["ratio_ingest"]
        rows.append(("7", f"NDJSON ingest of {pl['created']:,} new URLs, mix / plain", fmt(mx["ingest_rows_per_s"], " rows/s"),
                     f"plain {fmt(pl['ingest_rows_per_s'], ' rows/s')}", f"{fmt(r)}x", "", "-"))
        peak = mx["peak_rss_MB"]
        rows.append(("7", "peak RSS, 16 uncached pages at once, gzip then identity (mix, cache off, highest of tries)",
                     fmt(peak, " MB"), f"plain {fmt(pl['peak_rss_MB'], ' MB')}", "", "≤ 64 MB",
                     verdict(None if peak is None else peak <= 64)))

    # 8. sitemapd import (bench/import.sh): 20 gzip sitemap files beside the same rows through the API
    imp = load(d, "import.json")
    if imp:
        for run, what in (("first", f"import of {imp['rows']:,} URLs in 20 gzip sitemap files (new)"),
                          ("resend", "the same import again (all unchanged)")):
            x = imp[run]
            rows.append(("8", what, fmt(x["import_rows_per_s"], " rows/s"), f"NDJSON API {fmt(x['api_rows_per_s'], ' rows/s')}",
                         f"{fmt(x['ratio'])}x", "≥ 0.8x" if run == "first" else "", verdict(x["ratio"] >= 0.8) if run == "first" else "-"))

    round2 = round_two(d, copy)

    print(f"Machine and run: {machine}\n")
    print("| # | measure | sitemapd | compared with | ratio | target | |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    if round2:
        print("\n## Round two (bench/round2.sh, issue 13)\n")
        print("| item | measure | sitemapd | compared with | ratio | goal | |")
        print("|---|---|---|---|---|---|---|")
        for row in round2:
            print("| " + " | ".join(str(c) for c in row) + " |")


def round_two(d, copy):
    """The lines of round2.txt (one measure a line: its name's words, then numbers or `key=value`s) as rows."""
    p = os.path.join(d, "round2.txt")
    if not os.path.exists(p):
        return []
    lines = [ln.split() for ln in open(p) if ln.strip() and not ln.startswith("commit=")]

    def find(prefix):
        """Every line that begins with the words of `prefix`, without them."""
        n = len(prefix.split())
        return [w[n:] for w in lines if w[:n] == prefix.split()]

    def value(prefix, key):
        for rest in find(prefix):
            for w in rest:
                if w.startswith(key + "="):
                    return float(w.split("=", 1)[1])
        return None

    def ms(t):
        """wrk's latency (`812.00us`, `1.83ms`, `1.02s`) in ms."""
        for unit, scale in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
            if t.endswith(unit):
                return float(t[: -len(unit)]) * scale
        return None

    def wrk(prefix):
        """(req/s, p99 ms) of a wrk line."""
        for rest in find(prefix):
            return float(rest[0]), ms(rest[2])
        return None, None

    rows = []
    first, again = value("ingest postgres", "first_rows_per_s"), value("ingest postgres", "resend_rows_per_s")
    lite = value("ingest sqlite", "first_rows_per_s")
    cp = copy.get("copy_indexed_rows_per_s") or (load(d, "copy.json") or {}).get("copy_indexed_rows_per_s")
    for what, a, label, b, goal in (
        ("NDJSON ingest of 1M new URLs (Postgres)", first, "COPY", cp, 0.5),
        ("identical re-send (all unchanged)", again, "first load", first, 2),
        ("NDJSON ingest of 1M new URLs (SQLite)", lite, "Postgres", first, 0.5),
    ):
        r = ratio(a, b)
        rows.append(("1", what, fmt(a, " rows/s"), f"{label} {fmt(b, ' rows/s')}", f"{fmt(r)}x", f"≥ {goal}x",
                     verdict(r is not None and r >= goal)))
    django = sorted(float(rest[0]) * 1000 for rest in find("django page20"))
    dj = django[len(django) // 2] if django else None
    fetch = {}
    for mode in ("prerender", "cold"):
        for rest in find(f"first_fetch {mode}"):
            fetch[mode] = json.loads(" ".join(rest))["p50_s"] * 1000
    cold = [("2", "first fetch of page 20 one second after a write (rendered ahead)", fetch.get("prerender"), 500),
            ("3", "… with SITEMAPD_PRERENDER=false (the fetch renders it: the cold page)", fetch.get("cold"), 50)]
    for way, name in (("0", "one gzip stream, as stored before 0008"), ("1", "parallel blocks, as written since")):
        t = value(f"cold_page gzip_way={way}", "p50_s")
        size = value(f"cold_page gzip_way={way}", "bytes")
        cold.append(("3", f"cold page 20 (cache off), {name}: {fmt(size)} bytes", t * 1000 if t else None, 50))
    for item, what, t, goal in cold:
        r = ratio(dj, t)
        rows.append((item, what, fmt(t, " ms"), f"Django {fmt(dj, ' ms')}", f"{fmt(r)}x", f"≥ {goal}x",
                     verdict(r is not None and r >= goal)))
    for c in ("1", "16"):
        for what, name in (("304", "deep page If-None-Match (304)"), ("index", "index")):
            a, _ = wrk(f"hot sitemapd c={c} {what}")
            b, _ = wrk(f"hot nginx c={c} {what}")
            r = ratio(a, b)
            rows.append(("4", f"{name}, c={c}", fmt(a, " req/s"), f"nginx {fmt(b, ' req/s')}", f"{fmt(r)}x", "≥ 0.8x",
                         verdict(r is not None and r >= 0.8)))
    for what, name in (("304", "deep page 304"), ("page", "cached page 10 gzip")):
        a, p99 = wrk(f"rw load {what}")
        b, idle99 = wrk(f"rw idle {what}")
        r = ratio(a, b)
        rows.append(("5", f"{name} (c=16) while 1M new URLs load", f"{fmt(a, ' req/s')}, p99 {fmt(p99, ' ms')}",
                     f"idle {fmt(b, ' req/s')}, p99 {fmt(idle99, ' ms')}", f"{fmt(r)}x", "≥ 0.5x, p99 < 10 ms",
                     verdict(r is not None and p99 is not None and r >= 0.5 and p99 < 10)))
    # Against the 20-page index (377 bytes): an answer of the same cost as its 304.
    for what, name in (("304", "index 304"), ("index", "index body (gzip)")):
        for c in ("1", "16"):
            a, _ = wrk(f"wide c={c} {what}")
            b, _ = wrk(f"hot sitemapd c={c} index")
            r = ratio(b, a)
            rows.append(("6", f"{name} at 50,000 pages, c={c}", fmt(a, " req/s"), f"20-page index {fmt(b, ' req/s')}",
                         f"{fmt(r)}x the time", "≤ 1.5x", verdict(r is not None and r <= 1.5)))
    rss = next((float(rest[0]) / 1024 for rest in find("wide rss_kb")), None)
    rows.append(("6", "RSS serving the 50,000-page index", fmt(rss, " MB"), "", "", "≤ 64 MB + its bytes",
                 verdict(rss is not None and rss <= 64 + 6)))
    for rest in find("wide idle_page_rows_read_10s"):
        rows.append(("6", "page-table rows read in 10 idle seconds at 50,000 pages", rest[0], "", "", "O(1): 0",
                     verdict(rest[0] == "0")))
    return rows

if __name__ == "__main__":
    main()
