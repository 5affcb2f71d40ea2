#!/usr/bin/env bash
# A real-looking site with sections, text sitemaps and the removed-URLs sitemap, served by one sitemapd and read
# back by `sitemapd import` into another database, as the closing note of issue 26 shows it.
#
# Usage: tests/demo/sections.sh [PATH/TO/sitemapd]   (default: target/release/sitemapd)
# Needs curl, python3, and xmllint for the schema checks (tests/xsd/validate.sh).
set -euo pipefail

bin=$(realpath "${1:-target/release/sitemapd}")
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

echo "== serve: sections sized blog=500 and products=1000, removed-URLs sitemap kept 30 days"
(cd "$work" && DATABASE_URL="sqlite://$work/site.db" SITEMAPD_PUBLIC_URL="$base" SITEMAPD_BIND="127.0.0.1:$port" \
    SITEMAPD_SECTION_MAX_URLS=blog=500,products=1000 SITEMAPD_REMOVED_RETENTION=30d RUST_LOG=warn "$bin" serve >"$work/serve.log" 2>&1) &
server=$!
for _ in $(seq 100); do curl -fsS "$base/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

echo "== write 3,000 products, 1,200 blog posts, 300 docs and 50 pages without a section (NDJSON)"
python3 - "$base" >"$work/load.ndjson" <<'PY'
import json, sys
base = sys.argv[1]
for i in range(3000):
    print(json.dumps({"loc": f"{base}/p/{i}", "lastmod": "2026-11-01", "section": "products",
                      "images": [{"loc": f"https://cdn.example.net/p/{i}.jpg"}]}))
for i in range(1200):
    print(json.dumps({"loc": f"{base}/blog/{i}", "lastmod": "2026-10-01", "section": "blog"}))
for i in range(300):
    print(json.dumps({"loc": f"{base}/docs/{i}", "section": "docs"}))
for i in range(50):
    print(json.dumps({"loc": f"{base}/about/{i}"}))
PY
curl -fsS -X PUT "$base/api/v1/urls" -H 'Content-Type: application/x-ndjson' --data-binary @"$work/load.ndjson"; echo

echo "== a deletion wave: 400 products"
python3 -c "import json,sys; print(json.dumps(['$base/p/%d' % i for i in range(2600, 3000)]))" >"$work/gone.json"
curl -fsS -X POST "$base/api/v1/urls/delete" -H 'Content-Type: application/json' --data-binary @"$work/gone.json"; echo

echo "== the index"
curl -fsS "$base/sitemap.xml" | grep -o '<loc>[^<]*</loc>' | sed 's/<[^>]*>//g'
echo "== a section's own index, a text page, the removed-URLs sitemap (first lines)"
curl -fsS "$base/sitemap-blog.xml" | grep -o '<loc>[^<]*</loc>' | sed 's/<[^>]*>//g'
curl -fsS "$base/sitemap-docs-1.txt" | sed -n 1,3p
curl -fsS "$base/sitemap-removed.xml" | grep -o "<url>.*" | sed -n 1,2p | cut -c1-160

echo "== every output against the official schemas"
for f in sitemap.xml sitemap-1.xml sitemap-products-1.xml sitemap-products-3.xml.gz sitemap-blog-3.xml \
         sitemap-blog.xml sitemap-removed.xml; do
    curl -fsS "$base/$f" -o "$work/$f"
done
(cd "$work" && "$here/tests/xsd/validate.sh" sitemap.xml sitemap-1.xml sitemap-products-1.xml \
    sitemap-products-3.xml.gz sitemap-blog-3.xml sitemap-blog.xml sitemap-removed.xml)

echo "== read back by sitemapd import, sections from the file names, into another database"
DATABASE_URL="sqlite://$work/copy.db" SITEMAPD_PUBLIC_URL="$base" SITEMAPD_SECTION_MAX_URLS=blog=500,products=1000 RUST_LOG=warn \
    "$bin" import --sections-from-names --rejects "$work/rejects.ndjson" "$base/sitemap.xml"

echo "== both databases hold the same entries, sections included"
RUST_LOG=warn DATABASE_URL="sqlite://$work/site.db" SITEMAPD_PUBLIC_URL="$base" "$bin" export --output "$work/a.ndjson"
RUST_LOG=warn DATABASE_URL="sqlite://$work/copy.db" SITEMAPD_PUBLIC_URL="$base" "$bin" export --output "$work/b.ndjson"
python3 - "$work/a.ndjson" "$work/b.ndjson" <<'PY'
import collections, json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
key = lambda e: e["loc"]
same = sorted(a, key=key) == sorted(b, key=key)
print(f"{len(a)} entries served, {len(b)} imported, identical: {same}")
print("by section:", dict(collections.Counter(e.get("section", "(default)") for e in b)))
sys.exit(0 if same else 1)
PY
