#!/usr/bin/env python3
"""Renders NDJSON entries (the write API's form, as examples/dataset writes them) from stdin as gzip sitemap files
and a sitemap index listing them, as a legacy generator would publish them:

    target/release/examples/dataset --rows 1000000 | bench/sitemap_files.py --dir DIR --files 20 --base URL

Writes DIR/sitemap-1.xml.gz … DIR/sitemap-N.xml.gz (at most 50,000 entries each) and DIR/index.xml, whose <loc>s
are BASE/sitemap-K.xml.gz. Prints JSON: rows, files, bytes (compressed). Standard library only.
"""
import argparse
import gzip
import json
import os
import sys
from xml.sax.saxutils import escape

HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--rows", type=int, required=True, help="how many rows stdin holds (to split them evenly)")
    ap.add_argument("--base", required=True)
    a = ap.parse_args()
    per_file = -(-a.rows // a.files)
    if per_file > 50_000:
        sys.exit(f"{per_file} entries a file is more than the protocol's 50,000: use more files")
    os.makedirs(a.dir, exist_ok=True)
    rows, files, out = 0, 0, None

    def close():
        if out is not None:
            out.write(b"</urlset>\n")
            out.close()

    for line in sys.stdin.buffer:
        if rows % per_file == 0:
            close()
            files += 1
            out = gzip.open(os.path.join(a.dir, f"sitemap-{files}.xml.gz"), "wb", compresslevel=6)
            out.write(HEAD.encode())
        e = json.loads(line)
        parts = [f"<url><loc>{escape(e['loc'])}</loc>"]
        for field in ("lastmod", "changefreq"):
            if field in e:
                parts.append(f"<{field}>{escape(e[field])}</{field}>")
        if "priority" in e:
            parts.append(f"<priority>{e['priority']}</priority>")
        parts.append("</url>\n")
        out.write("".join(parts).encode())
        rows += 1
    close()
    with open(os.path.join(a.dir, "index.xml"), "w") as index:
        index.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                    '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n')
        for k in range(1, files + 1):
            index.write(f"<sitemap><loc>{a.base}/sitemap-{k}.xml.gz</loc></sitemap>\n")
        index.write("</sitemapindex>\n")
    size = sum(os.path.getsize(os.path.join(a.dir, f"sitemap-{k}.xml.gz")) for k in range(1, files + 1))
    print(json.dumps({"rows": rows, "files": files, "bytes": size}))


if __name__ == "__main__":
    main()
