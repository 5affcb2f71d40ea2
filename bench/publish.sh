#!/usr/bin/env bash
# Issue 41's cost of publishing: a site of 1M URLs (the generated data set, examples/dataset, seed 42, loaded into a
# fresh SQLite database through the NDJSON API by bench/load.py) published by `sitemapd publish` to two targets in
# turn: a local directory (`file://`) and an S3 bucket on moto's server on loopback (the S3 test double the tests
# use). Three passes to each: the first (every file uploaded), one over the unchanged site (nothing uploaded), and one
# after a single URL's lastmod changed (its page's forms and the index uploaded). Each pass is one run of the
# command: its summary line (objects and bytes uploaded, unchanged, the pass's own seconds) and the command's wall
# time, process start and store opening included. The directory's size on disk after the first pass is kept too.
#
#   bench/publish.sh                            # 1,000,000 URLs; into bench/results/<stamp>-publish/
#   BENCH_PUBLISH_ROWS=100000 bench/publish.sh  # fewer
#   BENCH_PUBLISH_FORMS=xml,xml.gz,txt,txt.gz bench/publish.sh   # every form (default: the default, xml,xml.gz)
#   BENCH_OUT=dir bench/publish.sh              # into an existing results directory; no build
#   BIN=path/to/sitemapd bench/publish.sh       # another binary (then build it and the example yourself)
#
# Needs python3 (with venv) and curl; reaches PyPI once for moto (tests/s3/setup.sh's venv target/s3-venv when the
# script exists, else a venv of its own, target/bench-s3-venv). The database, the directory target and moto's
# state live under bench/results/publish-data/ (made anew at each run). Results: publish-*.txt (each pass's stdout),
# publish.json (one object per pass) and publish-summary.md, the table.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ROWS=${BENCH_PUBLISH_ROWS:-1000000}
readonly FORMS=${BENCH_PUBLISH_FORMS:-xml,xml.gz}
readonly PUBLIC=https://www.example.com
readonly TOKEN=bench-token
readonly BIN=${BIN:-target/release/sitemapd}
readonly DATASET=${DATASET:-target/release/examples/dataset}
readonly OUT=${BENCH_OUT:-bench/results/$(date +%Y%m%d-%H%M%S)-publish}
readonly DATA=bench/results/publish-data
readonly PORT=18120
readonly S3_PORT=18121
readonly BUCKET=bench-sitemaps
mkdir -p "$OUT"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  return 0
}
trap cleanup EXIT

if [ -z "${BENCH_OUT:-}" ] && [ "$BIN" = target/release/sitemapd ]; then
  log "building sitemapd (release) and the data-set generator"
  cargo build --release --locked --bin sitemapd --example dataset
fi

# moto's server, from PyPI into a venv (the tests' own when tests/s3/setup.sh exists).
if [ -f tests/s3/setup.sh ]; then
  [ -x target/s3-venv/bin/moto_server ] || bash tests/s3/setup.sh >&2
  readonly MOTO=target/s3-venv/bin/moto_server
else
  readonly MOTO=target/bench-s3-venv/bin/moto_server
  if [ ! -x "$MOTO" ]; then
    log "installing moto[server]==5.2.5 into target/bench-s3-venv"
    python3 -m venv target/bench-s3-venv
    target/bench-s3-venv/bin/pip install --quiet --disable-pip-version-check 'moto[server]==5.2.5'
  fi
fi

rm -rf "$DATA" && mkdir -p "$DATA/www"
readonly DIR=$(cd "$DATA/www" && pwd)
readonly DB="sqlite://$(cd "$DATA" && pwd)/sitemapd.db"

log "moto on 127.0.0.1:$S3_PORT, bucket $BUCKET"
"$MOTO" -H 127.0.0.1 -p "$S3_PORT" >"$OUT/publish-moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do curl -fs -o /dev/null "http://127.0.0.1:$S3_PORT/" && break; sleep 0.1; done
curl -fsS -X PUT "http://127.0.0.1:$S3_PORT/$BUCKET" >/dev/null

log "sitemapd on $DB, loading $ROWS URLs"
env DATABASE_URL="$DB" SITEMAPD_BIND=127.0.0.1:$PORT SITEMAPD_PUBLIC_URL="$PUBLIC" SITEMAPD_API_TOKENS="$TOKEN" \
  SITEMAPD_API_TIMEOUT=1h RUST_LOG=sitemapd=warn "$BIN" serve >"$OUT/publish-serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
"$DATASET" --rows "$ROWS" | python3 bench/load.py --base "http://127.0.0.1:$PORT" --token "$TOKEN" \
  >"$OUT/publish-load.json"
log "loaded: $(cat "$OUT/publish-load.json")"
pages=$(curl -fsS "http://127.0.0.1:$PORT/sitemap.xml" | grep -c '<loc>' || true)
log "the index names $pages files"

readonly FILE_TARGET="file://$DIR/"
readonly S3_TARGET="s3://$BUCKET/sitemaps/"

# One pass of `sitemapd publish` to target $2, named $1: its stdout kept, one JSON line appended to publish.json.
pass() {
  local name=$1 target=$2 start end status=0
  start=$(date +%s.%N)
  env DATABASE_URL="$DB" SITEMAPD_PUBLIC_URL="$PUBLIC" SITEMAPD_PUBLISH_TARGETS="$FILE_TARGET, $S3_TARGET" \
    SITEMAPD_PUBLISH_FORMS="$FORMS" AWS_ENDPOINT="http://127.0.0.1:$S3_PORT" AWS_ALLOW_HTTP=true \
    AWS_ACCESS_KEY_ID=bench-key-id AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1 \
    AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false RUST_LOG=sitemapd=warn \
    "$BIN" publish --target "$target" >"$OUT/publish-$name.txt" 2>"$OUT/publish-$name.log" || status=$?
  end=$(date +%s.%N)
  log "$name (exit $status): $(cat "$OUT/publish-$name.txt")"
  [ "$status" = 0 ] || { cat "$OUT/publish-$name.log" >&2; exit 1; }
  python3 - "$name" "$start" "$end" "$OUT/publish-$name.txt" >>"$OUT/publish.json" <<'PY'
import json, re, sys
name, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
line = open(path).read().strip()
m = re.search(r": uploaded (\d+) objects? \((\d+) bytes?\), (\d+) unchanged, deleted (\d+), (\d+) awaiting deletion, "
              r"([0-9.]+) s$", line)
if not m:
    sys.exit(f"not the summary line: {line!r}")
uploaded, bytes_, unchanged, deleted, awaiting, seconds = m.groups()
print(json.dumps({"pass": name, "uploaded": int(uploaded), "bytes": int(bytes_), "unchanged": int(unchanged),
                  "deleted": int(deleted), "awaiting": int(awaiting), "seconds": float(seconds),
                  "wall_seconds": round(end - start, 3), "line": line}))
PY
}

: >"$OUT/publish.json"
pass file-first "$FILE_TARGET"
du -sb "$DIR" | cut -f1 >"$OUT/publish-dir-bytes.txt"
find "$DIR" -type f | wc -l >"$OUT/publish-dir-files.txt"
pass s3-first "$S3_TARGET"
pass file-unchanged "$FILE_TARGET"
pass s3-unchanged "$S3_TARGET"

# One URL changed: the first stored, with a new lastmod.
loc=$(curl -fsS -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/v1/urls?limit=1" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["items"][0]["loc"])')
body=$(python3 -c 'import json, sys, datetime
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps([{"loc": sys.argv[1], "lastmod": now}]))' "$loc")
curl -fsS -X PUT -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  --data-binary "$body" "http://127.0.0.1:$PORT/api/v1/urls" >"$OUT/publish-change.json"
log "changed $loc: $(cat "$OUT/publish-change.json")"
pass file-one-changed "$FILE_TARGET"
pass s3-one-changed "$S3_TARGET"

python3 - "$OUT" "$ROWS" "$FORMS" "$pages" >"$OUT/publish-summary.md" <<'PY'
import json, sys
out, rows, forms, pages = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
passes = [json.loads(l) for l in open(f"{out}/publish.json")]
dir_bytes = int(open(f"{out}/publish-dir-bytes.txt").read())
dir_files = int(open(f"{out}/publish-dir-files.txt").read())
load = json.load(open(f"{out}/publish-load.json"))
print(f"{rows:,} URLs (loaded at {load['rows_per_s']:,.0f} rows/s), {pages} files in the index, forms `{forms}`; "
      f"the directory after the first pass: {dir_files:,} files, {dir_bytes:,} bytes.\n")
print("| target | pass | objects uploaded | bytes uploaded | unchanged | pass s | command s |")
print("|---|---|---:|---:|---:|---:|---:|")
for p in passes:
    target, what = p["pass"].split("-", 1)
    target = {"file": "`file://` directory", "s3": "S3 (moto)"}[target]
    what = {"first": "first", "unchanged": "nothing changed", "one-changed": "one URL changed"}[what]
    print(f"| {target} | {what} | {p['uploaded']:,} | {p['bytes']:,} | {p['unchanged']:,} | {p['seconds']:.2f} "
          f"| {p['wall_seconds']:.2f} |")
PY
cat "$OUT/publish-summary.md"
log "results in $OUT"
