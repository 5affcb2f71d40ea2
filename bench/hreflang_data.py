#!/usr/bin/env python3
"""The harness's data set as NDJSON, plain and with hreflang clusters (issue 40's ingest cost).

    bench/hreflang_data.py --rows 1000000 --dir bench/results/hreflang-data
    # writes plain-N.ndjson and clusters-N-<layout>.ndjson

The records are ext_mix.py's plain ones (../shared/bench/dataset.py, seed 42), the same lines in the same order in
both files. In the clusters file a share of them (--share, default 0.2) is grouped into clusters of 2 to 30 members
(sizes uniform, drawn from --seed, default 11): each member's `alternates` list the whole cluster, itself included,
as apps send them (in the members' order, not sorted), one language each from a fixed list of 30 codes that Google
reads, and in half of the clusters an `x-default`: the cluster's first member, which keeps its language too.

--layout spread (default) draws each cluster's members from the whole file, so they arrive in different requests,
far apart (a member names URLs that are not stored yet, and is completed as they arrive); adjacent puts each
cluster's members on consecutive lines (one request holds most clusters whole).

Prints JSON: rows, clustered rows, clusters, links (`xhtml:link` elements once every member is stored), the
sizes' mean and the files' bytes. Python 3 only.
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ext_mix  # noqa: E402  (the harness's records, as load_sitemapd.py sends them)

# 30 distinct codes, each an ISO 639-1 language with an optional script or ISO 3166-1 country.
LANGUAGES = [
    "en", "de", "fr", "es", "it", "nl", "pt-BR", "ja", "zh-Hans", "ko", "ru", "pl", "sv", "da", "fi", "nb", "cs",
    "hu", "ro", "tr", "el", "he", "ar", "th", "vi", "id", "uk", "pt-PT", "en-GB", "de-AT",
]
MIN_SIZE, MAX_SIZE = 2, 30


def sizes(rng, total):
    """Cluster sizes, uniform in 2..=30, summing to `total`."""
    out = []
    while total >= MIN_SIZE:
        s = min(rng.randint(MIN_SIZE, MAX_SIZE), total)
        if total - s == 1:
            s = s + 1 if s < MAX_SIZE else s - 1
        out.append(s)
        total -= s
    return out


def clusters(rng, rows, share, layout):
    """Lists of row numbers (0-based), one per cluster."""
    wanted = round(rows * share)
    cut = sizes(rng, wanted)
    if layout == "spread":
        members = rng.sample(range(rows), sum(cut))
        out, at = [], 0
        for s in cut:
            out.append(members[at:at + s])
            at += s
        return out
    # adjacent: the clusters and the single rows between them in a random order
    order = ["c"] * len(cut) + ["g"] * (rows - sum(cut))
    rng.shuffle(order)
    out, row, k = [], 0, 0
    for item in order:
        if item == "c":
            out.append(list(range(row, row + cut[k])))
            row += cut[k]
            k += 1
        else:
            row += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", required=True, help="where the TSV and the NDJSON files go")
    ap.add_argument("--share", type=float, default=0.2, help="the share of rows in clusters")
    ap.add_argument("--layout", choices=["spread", "adjacent"], default="spread")
    ap.add_argument("--seed", type=int, default=11, help="the clusters' seed (the records' is dataset.py's 42)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    tsv = os.path.join(a.dir, f"urls-{a.rows}.tsv")
    if not os.path.exists(tsv):
        ext_mix.dataset.gen_tsv(tsv, a.rows)
    with open(tsv, encoding="utf-8") as f:
        locs = [line.split("\t", 2)[1] for line in f]
    rng = random.Random(a.seed)
    alternates = {}  # row -> its alternates (the same list object for every member of a cluster)
    links = 0
    groups = clusters(rng, len(locs), a.share, a.layout)
    for members in groups:
        langs = rng.sample(LANGUAGES, len(members))
        alts = [{"hreflang": lang, "href": locs[m]} for lang, m in zip(langs, members)]
        if rng.random() < 0.5:
            alts.append({"hreflang": "x-default", "href": locs[members[0]]})
        links += len(members) * len(alts)
        for m in members:
            alternates[m] = alts
    plain_path = os.path.join(a.dir, f"plain-{a.rows}.ndjson")
    clusters_path = os.path.join(a.dir, f"clusters-{a.rows}-{a.layout}.ndjson")
    with open(tsv, encoding="utf-8") as f, open(plain_path + ".tmp", "w", encoding="utf-8") as p, \
            open(clusters_path + ".tmp", "w", encoding="utf-8") as c:
        for row, line in enumerate(f):
            _, e = ext_mix.plain_entry(line)
            p.write(json.dumps(e, ensure_ascii=False) + "\n")
            if row in alternates:
                e["alternates"] = alternates[row]
            c.write(json.dumps(e, ensure_ascii=False) + "\n")
    os.replace(plain_path + ".tmp", plain_path)
    os.replace(clusters_path + ".tmp", clusters_path)
    print(json.dumps({
        "rows": len(locs), "layout": a.layout, "clustered_rows": len(alternates), "clusters": len(groups),
        "mean_size": len(alternates) / len(groups) if groups else 0, "links": links,
        "plain_bytes": os.path.getsize(plain_path), "clusters_bytes": os.path.getsize(clusters_path),
    }))


if __name__ == "__main__":
    main()
