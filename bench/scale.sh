#!/usr/bin/env bash
# Issue 13, item 6: one run at the protocol's scale on Postgres (~45 min at 100M on 2 cores; ~45 GB of disk). Tune
# Postgres as for production first (a 128 MB shared_buffers and a 1 GB max_wal_size make any random-key unique
# index decline as it grows): the run in BENCHMARKS.md had shared_buffers=4GB, max_wal_size=8GB,
# checkpoint_timeout=15min, wal_compression=lz4.
#
#   bench/scale.sh                              # 100,000,000 URLs: 2,000 full pages
#   BENCH_SCALE_ROWS=2000000 bench/scale.sh     # the same steps, small (a check of the script)
#
# 1. loads ROWS records of the synthetic data set (examples/dataset, the harness's mix) through the NDJSON API,
#    10,000 lines a request on one connection, sitemapd at its defaults; every million rows: the rate over the
#    last million and overall, sitemapd's RSS and the database's size (load.jsonl; no decline as the table grows);
# 2. sends the first RESEND records again (identical: all unchanged) into the full table (resend.jsonl);
# 3. restarted with the page cache off: the index, the first and the last page (gzip), each fetched 5 times
#    (time_total in seconds), and sitemapd's RSS after them;
# 4. the disk used: the database, the urls table with its indexes, the pages table.
# Writes $OUT/scale.txt, one measure a line.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ROWS=${BENCH_SCALE_ROWS:-100000000}
readonly RESEND=${BENCH_SCALE_RESEND:-5000000}
readonly DB=sitemapd_scale
readonly URL=postgres://postgres@127.0.0.1:5432/$DB
readonly PORT=18095
readonly BASE=http://127.0.0.1:$PORT
readonly TOKEN=bench-token
OUT=${BENCH_OUT:-bench/results/scale-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
readonly OUT
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
say() { echo "$*" | tee -a "$OUT/scale.txt"; }
PID=
start() {
  env DATABASE_URL="$URL" SITEMAPD_BIND="127.0.0.1:$PORT" SITEMAPD_PUBLIC_URL=https://www.example.com \
    SITEMAPD_API_TOKENS="$TOKEN" SITEMAPD_API_TIMEOUT=1h "$@" target/release/sitemapd >>"$OUT/sitemapd.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do
    curl -fs -o /dev/null "$BASE/healthz" && return 0
    sleep 0.1
  done
  log "sitemapd did not start"; tail -20 "$OUT/sitemapd.log" >&2; exit 1
}
stop() { kill "$PID" 2>/dev/null || true; while kill -0 "$PID" 2>/dev/null; do sleep 0.1; done; }
trap 'kill "$PID" 2>/dev/null || true' EXIT
times5() { for _ in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_total} ' -H 'Accept-Encoding: gzip' "$1"; done; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }

log "building sitemapd and the data-set generator (release)"
cargo build --release --locked --bin sitemapd --example dataset
echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty) date=$(date -u +%FT%TZ) rows=$ROWS" >"$OUT/scale.txt"
say "postgres $(psql -Atq -h 127.0.0.1 -U postgres -d postgres -c "SELECT string_agg(name || '=' ||
  current_setting(name), ' ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'max_wal_size',
  'checkpoint_timeout', 'wal_compression', 'synchronous_commit')")"
psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
start

log "1. loading $ROWS records"
target/release/examples/dataset --rows "$ROWS" |
  python3 bench/feed.py --base "$BASE" --token "$TOKEN" --pid "$PID" --db "$URL" >"$OUT/load.jsonl"
say "load $(tail -1 "$OUT/load.jsonl")"
python3 - "$OUT/load.jsonl" <<'PY' | tee -a "$OUT/scale.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"final"' not in l]
rates = [r["rows_per_s"] for r in rows]
if rates:
    tenth = max(1, len(rates) // 10)
    first, last = sum(rates[:tenth]) / tenth, sum(rates[-tenth:]) / tenth
    print(f"load_rate first_tenth={first:.0f} last_tenth={last:.0f} last_over_first={last / first:.2f} "
          f"min={min(rates)} max={max(rates)} peak_rss_kib={max(r['rss_kib'] or 0 for r in rows)}")
PY

log "2. re-sending the first $RESEND records"
target/release/examples/dataset --rows "$RESEND" |
  python3 bench/feed.py --base "$BASE" --token "$TOKEN" --pid "$PID" --every 10000000 >"$OUT/resend.jsonl"
say "resend $(tail -1 "$OUT/resend.jsonl")"
stop

log "3. the index, the first and the last page, cache off"
start SITEMAPD_CACHE_BYTES=0 SITEMAPD_PRERENDER=false
last=$(psql -Atq "$URL" -c "SELECT max(id) FROM pages WHERE url_count > 0")
say "pages $last"
say "index_secs $(times5 "$BASE/sitemap.xml")"
say "index_gzip_bytes $(curl -s -H 'Accept-Encoding: gzip' "$BASE/sitemap.xml" | wc -c)"
say "first_page_secs $(times5 "$BASE/sitemap-1.xml")"
say "last_page_secs $(times5 "$BASE/sitemap-$last.xml")"
say "rss_kib_after_fetches $(rss)"
stop

log "4. disk"
say "disk $(psql -Atq "$URL" -F ' ' -c "SELECT 'database_bytes=' || pg_database_size(current_database()),
  'urls_bytes=' || pg_total_relation_size('urls'), 'urls_indexes_bytes=' || pg_indexes_size('urls'),
  'pages_bytes=' || pg_total_relation_size('pages')")"
log "done: $OUT/scale.txt"
