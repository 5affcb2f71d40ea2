#!/usr/bin/env bash
# Issue 13's measures, in one run (~9 min); bench/run.sh runs it as its stage 7 (BENCH_ROUND2=0 skips it). Each
# line of $OUT/round2.txt is one measure; bench/report.py turns them into the "Round two" table of summary.md.
#
#   bench/round2.sh                   # needs the harness's 1M-row data and nginx pages (../shared/bench, made here)
#   BENCH_DJANGO=0 bench/round2.sh    # without Django's page 20 (three requests of ~4 s)
#
# 1. ingest of the harness's 1,000,000 rows through the NDJSON API: Postgres (first load, identical re-send) and
#    SQLite (first load), each into a fresh database;
# 2. 304s and the index beside nginx at 1 and 16 connections (wrk, 10 s each), sitemapd at its default
#    configuration, access log included;
# 3. the first fetch of page 20 one second after a write changed it: rendered ahead (the default), and not
#    (SITEMAPD_PRERENDER=false: the fetch renders it, as with the cache off); the cold page (cache off) compressed
#    each way (one gzip stream, parallel blocks: page::Gzip); Django's page 20 beside them;
# 4. 304s and the cached page 10 while 1,000,000 new URLs are loaded, against the same idle (rate, p50, p99);
# 5. the index at 50,000 pages (a synthetic page table): its 304 and gzip body at 1 and 16 connections, RSS, and
#    the page-table rows read in 10 idle seconds (pg_stat_user_tables: 0 with the change counter).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly PEERS_DIR=${PEERS_DIR:-$(cd ../shared/bench && pwd)}
readonly PY=$PEERS_DIR/.venv/bin/python
readonly PG=postgres://postgres@127.0.0.1:5432
readonly PUBLIC=https://www.example.com
readonly TOKEN=bench-token
readonly BIN=target/release/sitemapd
OUT=${BENCH_OUT:-bench/results/round2-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
readonly OUT
readonly NGINX=http://127.0.0.1:18002
mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
say() { echo "$*" | tee -a "$OUT/round2.txt"; }

# Starts sitemapd as `name` on `port` over `url`, with extra VAR=value settings; waits for /healthz.
start() {
  local name=$1 port=$2 url=$3
  shift 3
  env DATABASE_URL="$url" SITEMAPD_BIND="127.0.0.1:$port" SITEMAPD_PUBLIC_URL="$PUBLIC" SITEMAPD_API_TOKENS="$TOKEN" \
    SITEMAPD_API_TIMEOUT=1h "$@" "$BIN" >"$OUT/$name.log" 2>&1 &
  echo $! >"$OUT/$name.pid"
  for _ in $(seq 1 300); do
    curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && return 0
    sleep 0.1
  done
  log "sitemapd $name did not start"; cat "$OUT/$name.log" >&2; exit 1
}
stop() {
  local pid
  pid=$(cat "$OUT/$1.pid")
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$OUT/$1.pid"
}
cleanup() {
  for f in "$OUT"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  [ -f "$PEERS_DIR/run/nginx.pid" ] && kill "$(cat "$PEERS_DIR/run/nginx.pid")" 2>/dev/null
  return 0
}
trap cleanup EXIT
fresh_db() {
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
}
rate() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["rows_per_s"]))'; }
# wrk at c=$1 for 10 s: "rps p50 p99".
wrk_at() {
  local c=$1 threads=2
  shift
  [ "$c" = 1 ] && threads=1
  wrk -t"$threads" -c"$c" -d10s --latency -H 'Accept-Encoding: gzip' "$@" |
    awk '/Requests\/sec/ {r=$2} /^ +50%/ {m=$2} /^ +99%/ {p=$2} END {print r, m, p}'
}
etag_of() { curl -sI -H 'Accept-Encoding: gzip' "$1" | awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r'; }

# --- prerequisites: the harness's data and nginx pages, wrk, the release binary --------------------------------
command -v wrk >/dev/null || { apt-get update -qq; apt-get install -y -qq wrk; }
if [ ! -f "$PEERS_DIR/data/urls-1000000.tsv" ] || [ ! -f "$PEERS_DIR/static/sitemap-20.xml.gz" ]; then
  log "the harness's data set and nginx pages (../shared/bench/run-peers.sh, nginx only)"
  BENCH_PEERS=nginx BENCH_MICRO=0 "$PEERS_DIR/run-peers.sh" >"$OUT/peers.txt" 2>"$OUT/peers.log"
fi
log "building sitemapd (release) and the data-set generator"
cargo build --release --locked --bin sitemapd --example dataset
echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty) date=$(date -u +%FT%TZ)" >"$OUT/round2.txt"

# --- 1. ingest --------------------------------------------------------------------------------------------------
log "1. ingest: 1M rows into Postgres (first, again) and SQLite (first)"
if [ ! -f "$OUT/copy.json" ]; then
  log "COPY of the same 1M rows into the harness's indexed table (the peer of item 1)"
  "$PY" "$PEERS_DIR/dataset.py" --rows 1000000 --reload >"$OUT/copy.json"
fi
fresh_db sitemapd_round2
start main 18080 "$PG/sitemapd_round2"
first=$("$PY" "$PEERS_DIR/load_sitemapd.py" --rows 1000000 --token "$TOKEN" --base http://127.0.0.1:18080 | rate)
again=$("$PY" "$PEERS_DIR/load_sitemapd.py" --rows 1000000 --token "$TOKEN" --base http://127.0.0.1:18080 | rate)
say "ingest postgres first_rows_per_s=$first resend_rows_per_s=$again"
stop main
rm -rf "$OUT/sqlite" && mkdir -p "$OUT/sqlite"
start sqlite 18083 "sqlite://$OUT/sqlite/s.db"
sqlite=$("$PY" "$PEERS_DIR/load_sitemapd.py" --rows 1000000 --token "$TOKEN" --base http://127.0.0.1:18083 | rate)
say "ingest sqlite first_rows_per_s=$sqlite"
stop sqlite
rm -rf "$OUT/sqlite"

# --- 2. 304s and the index beside nginx ---------------------------------------------------------------------------
log "2. 304s and the index beside nginx"
[ -f "$PEERS_DIR/run/nginx.pid" ] && kill "$(cat "$PEERS_DIR/run/nginx.pid")" 2>/dev/null && sleep 1
sed -e "s#@RUN@#$PEERS_DIR/run#g" -e "s#@PORT@#18002#g" -e "s#@STATIC@#$PEERS_DIR/static#g" \
  "$PEERS_DIR/nginx/nginx.conf.in" >"$PEERS_DIR/run/nginx.conf"
nginx -c "$PEERS_DIR/run/nginx.conf" -p "$PEERS_DIR/run" -e "$PEERS_DIR/run/nginx-error.log"
start main 18080 "$PG/sitemapd_round2"
curl -s -o /dev/null -H 'Accept-Encoding: gzip' http://127.0.0.1:18080/sitemap-20.xml
for target in nginx=$NGINX sitemapd=http://127.0.0.1:18080; do
  name=${target%%=*} base=${target#*=}
  etag=$(etag_of "$base/sitemap-20.xml")
  for c in 1 16; do
    say "hot $name c=$c 304 $(wrk_at "$c" -H "If-None-Match: $etag" "$base/sitemap-20.xml")"
    say "hot $name c=$c index $(wrk_at "$c" "$base/sitemap.xml")"
  done
done

# --- 3. the first fetch after a write ------------------------------------------------------------------------------
log "3. the first fetch of page 20 one second after a write"
say "first_fetch prerender $(python3 bench/first_fetch.py --base http://127.0.0.1:18080 --token "$TOKEN" --page 20 --n 5)"
stop main
start main 18080 "$PG/sitemapd_round2" SITEMAPD_PRERENDER=false
say "first_fetch cold $(python3 bench/first_fetch.py --base http://127.0.0.1:18080 --token "$TOKEN" --page 20 --n 5)"
stop main
# The cold page each way (item 3), the cache off: page 20 as one gzip stream (as stored before migration 0008)
# and in parallel blocks (as written since); 7 fetches each, after one to warm the database's buffers.
start nocache 18082 "$PG/sitemapd_round2" SITEMAPD_CACHE_BYTES=0 SITEMAPD_PRERENDER=false SITEMAPD_STATE_TTL=0
for way in 0 1; do
  psql -q -h 127.0.0.1 -U postgres -d sitemapd_round2 -c "UPDATE pages SET gzip = $way WHERE site_id = 1 AND id = 20"
  curl -s -o /dev/null -H 'Accept-Encoding: gzip' http://127.0.0.1:18082/sitemap-20.xml
  times=$(for _ in 1 2 3 4 5 6 7; do
    curl -s -o /dev/null -w '%{time_total}\n' -H 'Accept-Encoding: gzip' http://127.0.0.1:18082/sitemap-20.xml
  done | sort -n | sed -n 4p)
  say "cold_page gzip_way=$way p50_s=$times bytes=$(curl -s -H 'Accept-Encoding: gzip' http://127.0.0.1:18082/sitemap-20.xml | wc -c)"
done
stop nocache
if [ "${BENCH_DJANGO:-1}" != 0 ]; then
  (cd "$PEERS_DIR/django_peer" && exec "$PEERS_DIR/.venv/bin/gunicorn" peer.wsgi:application -b 127.0.0.1:18001 -w 2 \
    --timeout 900 --pid "$OUT/django.pid" --log-level warning >"$OUT/django.log" 2>&1) &
  for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:18001/ && break; sleep 0.2; done
  for _ in 1 2 3; do
    say "django page20 $(curl -s -o /dev/null -w '%{time_total} %{size_download}' -H 'Accept-Encoding: gzip' \
      'http://127.0.0.1:18001/sitemap-products.xml?p=20')"
  done
  kill "$(cat "$OUT/django.pid")"; rm -f "$OUT/django.pid"
fi

# --- 4. reads while writing ---------------------------------------------------------------------------------------
log "4. 304s and the cached page 10, idle and during a load of 1M new URLs"
start main 18080 "$PG/sitemapd_round2"
page=http://127.0.0.1:18080/sitemap-10.xml
etag=$(etag_of "$page")
say "rw idle 304 $(wrk_at 16 -H "If-None-Match: $etag" "$page")"
say "rw idle page $(wrk_at 16 "$page")"
target/release/examples/dataset --rows 1000000 --seed 7 |
  python3 bench/load.py --base http://127.0.0.1:18080 --token "$TOKEN" --batch 5000 >"$OUT/rw-load.json" &
loader=$!
sleep 3
# The machine's CPU while the reads run beside the load (run queue, idle): what the p99s wait for.
vmstat 1 20 >"$OUT/rw-vmstat.txt" &
vmstat=$!
say "rw load 304 $(wrk_at 16 -H "If-None-Match: $etag" "$page")"
say "rw load page $(wrk_at 16 "$page")"
wait "$vmstat"
say "rw load cpu $(awk 'NR > 3 {r += $1; id += $15; n++} END {printf "run_queue=%.1f idle_pct=%.0f", r / n, id / n}' \
  "$OUT/rw-vmstat.txt")"
wait "$loader"
say "rw loader $(cat "$OUT/rw-load.json")"
stop main

# --- 5. the index at 50,000 pages -----------------------------------------------------------------------------------
log "5. the index at 50,000 pages"
fresh_db sitemapd_wide
DATABASE_URL="$PG/sitemapd_wide" SITEMAPD_PUBLIC_URL="$PUBLIC" "$BIN" migrate >/dev/null 2>&1
psql -q -h 127.0.0.1 -U postgres -d sitemapd_wide -c "INSERT INTO pages (site_id, id, url_count, byte_size, version, \
  modified_us) SELECT 1, g, 50000, 10000000, 1, 1700000000000000 + g * 1000 FROM generate_series(1, 50000) g"
start wide 18081 "$PG/sitemapd_wide"
index=http://127.0.0.1:18081/sitemap.xml
say "wide first_index $(curl -s -o /dev/null -w '%{time_total} %{size_download}' -H 'Accept-Encoding: gzip' "$index")"
etag=$(etag_of "$index")
for c in 1 16; do
  say "wide c=$c 304 $(wrk_at "$c" -H "If-None-Match: $etag" "$index")"
  say "wide c=$c index $(wrk_at "$c" "$index")"
done
say "wide rss_kb $(ps -o rss= -p "$(cat "$OUT/wide.pid")")"
reads() { psql -h 127.0.0.1 -U postgres -d sitemapd_wide -Atc "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) \
  FROM pg_stat_user_tables WHERE relname = 'pages'"; }
sleep 2
before=$(reads)
sleep 10
say "wide idle_page_rows_read_10s $(($(reads) - before))"
stop wide
log "done: $OUT/round2.txt"
