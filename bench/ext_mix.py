#!/usr/bin/env python3
"""The shared harness's data set as NDJSON, plain and with the sitemap-extension mix.

    bench/ext_mix.py --rows 1000000 --dir bench/results/ext-data      # writes plain-N.ndjson and mix-N.ndjson

The records (loc, lastmod, changefreq, priority) are exactly those of ../shared/bench/dataset.py (its `gen_tsv`,
seed 42; the TSV is generated into --dir, ../shared is not written), written as `load_sitemapd.py` writes them.
The mix file holds the same lines in the same order, some with extensions added; which ones, and what, is drawn
from a second generator (--seed, default 7) so that plain and mix differ only by the extensions:

  - 30% of entries: 1 to 5 images (https://cdn.example.net/img/<id>/<k>.jpg);
  - 5%: a 4-way hreflang set (en = the entry's own loc, de-AT, fr, x-default = own loc);
  - 1%: one video (thumbnail, title <= 100 chars, description, content_loc, player_loc, duration, rating,
    view_count, publication_date, family_friendly, restriction, 2-4 tags);
  - about 300 entries (min(1, 300/rows) each): news, published within the last 40 hours before --now (default:
    the current hour), so inside the default 48-hour news window when loaded soon after.

Prints JSON: rows, and how many entries carry each extension. Needs Python 3 only (psycopg is stubbed if missing:
only the shared generator's record functions are used).
"""
import argparse
import json
import os
import random
import sys
import types
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("PEERS_DIR", os.path.join(HERE, "..", "..", "shared", "bench"))

try:
    import psycopg  # noqa: F401
except ImportError:  # dataset.py imports it at the top; its generator does not use it
    sys.modules["psycopg"] = types.ModuleType("psycopg")
sys.path.insert(0, SHARED)
import dataset  # noqa: E402  (../shared/bench/dataset.py)

ORIGIN = dataset.ORIGIN
CDN = "https://cdn.example.net"
TAGS = ["review", "unboxing", "how-to", "setup", "comparison", "tips", "repair", "care", "outdoor", "travel"]
COUNTRIES = ["DE", "AT", "CH", "FR", "BE", "NL", "IT", "ES", "US", "GB"]
PUBLICATIONS = [("The Example Times", "en"), ("Beispiel Zeitung", "de"), ("Le Journal d'Exemple", "fr")]


def plain_entry(line):
    """The harness's TSV line as load_sitemapd.py sends it."""
    _id, loc, lm, cf, pr = line.rstrip("\n").split("\t")
    e = {"loc": loc, "lastmod": lm.replace(" ", "T")[:-3] + "+00:00"}
    if cf != "\\N":
        e["changefreq"] = cf
    if pr != "\\N":
        e["priority"] = float(pr)
    return int(_id), e


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def words(rng, lo, hi):
    return " ".join(rng.choice(dataset.WORDS) for _ in range(rng.randint(lo, hi)))


def extend(rng, i, e, p_news, now, counts):
    """Adds the mix's extensions to entry `e` (row id `i`)."""
    loc = e["loc"]
    path = loc[len(ORIGIN):]
    r_img, r_alt, r_vid, r_news = rng.random(), rng.random(), rng.random(), rng.random()
    n_img = rng.randint(1, 5)
    if r_img < 0.30:
        e["images"] = [{"loc": f"{CDN}/img/{i}/{k}.jpg"} for k in range(1, n_img + 1)]
        counts["images"] += 1
        counts["image_elements"] += n_img
    if r_alt < 0.05:
        e["alternates"] = [
            {"hreflang": "en", "href": loc},
            {"hreflang": "de-AT", "href": f"{ORIGIN}/de-at{path}"},
            {"hreflang": "fr", "href": f"{ORIGIN}/fr{path}"},
            {"hreflang": "x-default", "href": loc},
        ]
        counts["alternates"] += 1
    if r_vid < 0.01:
        title = f"{words(rng, 2, 8)} – video {i}"[:100]
        e["videos"] = [{
            "thumbnail_loc": f"{CDN}/t/{i}.jpg",
            "title": title,
            "description": f"{words(rng, 10, 40)} & more ({i}).",
            "content_loc": f"{CDN}/v/{i}.mp4",
            "player_loc": f"{ORIGIN}/player/{i}",
            "duration": rng.randint(30, 3600),
            "rating": rng.choice([3.5, 4.0, 4.5, 5.0]),
            "view_count": rng.randint(0, 1_000_000),
            "publication_date": iso(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(300 * 86400))),
            "family_friendly": True,
            "restriction": {"relationship": "allow", "countries": rng.sample(COUNTRIES, 2)},
            "tags": rng.sample(TAGS, rng.randint(2, 4)),
        }]
        counts["videos"] += 1
    if r_news < p_news:
        name, lang = rng.choice(PUBLICATIONS)
        e["news"] = {
            "publication": {"name": name, "language": lang},
            "publication_date": iso(now - timedelta(seconds=rng.randrange(40 * 3600))),
            "title": f"{words(rng, 3, 10)} ({i})",
        }
        counts["news"] += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", required=True, help="where the TSV and the two NDJSON files go")
    ap.add_argument("--seed", type=int, default=7, help="the extension mix's seed (the records' is dataset.py's 42)")
    ap.add_argument("--news", type=int, default=300, help="expected number of news articles")
    ap.add_argument("--now", help="news dates are drawn from the 40 hours before this (ISO 8601 UTC)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    now = (datetime.fromisoformat(a.now.replace("Z", "+00:00")) if a.now
           else datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0))
    tsv = os.path.join(a.dir, f"urls-{a.rows}.tsv")
    if not os.path.exists(tsv):
        dataset.gen_tsv(tsv, a.rows)
    rng = random.Random(a.seed)
    p_news = min(1.0, a.news / a.rows)
    counts = {"rows": 0, "images": 0, "image_elements": 0, "alternates": 0, "videos": 0, "news": 0}
    plain_path = os.path.join(a.dir, f"plain-{a.rows}.ndjson")
    mix_path = os.path.join(a.dir, f"mix-{a.rows}.ndjson")
    with open(tsv, encoding="utf-8") as f, open(plain_path + ".tmp", "w", encoding="utf-8") as p, \
            open(mix_path + ".tmp", "w", encoding="utf-8") as m:
        for line in f:
            i, e = plain_entry(line)
            p.write(json.dumps(e, ensure_ascii=False) + "\n")
            extend(rng, i, e, p_news, now, counts)
            m.write(json.dumps(e, ensure_ascii=False) + "\n")
            counts["rows"] += 1
    os.replace(plain_path + ".tmp", plain_path)
    os.replace(mix_path + ".tmp", mix_path)
    counts["plain_bytes"] = os.path.getsize(plain_path)
    counts["mix_bytes"] = os.path.getsize(mix_path)
    counts["news_before"] = iso(now)
    counts["seed"] = a.seed
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
