#!/usr/bin/env bash
# Issue 27's measure: what crawler telemetry costs on the read path, in one run (~5 min). Two sitemapd processes on
# one Postgres database of 100,000 URLs, one with telemetry on (the default: every fetch below is a verified
# Googlebot's, recorded and flushed every 5 s) and one with it off; wrk sends Googlebot's User-Agent to each in
# turn (off, on, four times; 10 s each at 16 connections): a page's 304, the cached page's gzip 200, the
# index's 304. The result is each measure's median rate per side and their ratio (on / off).
#
#   bench/crawlers.sh          # writes bench/results/crawlers-<stamp>/crawlers.txt
#
# Needs PostgreSQL on 127.0.0.1:5432 with trust auth; creates (anew) the database sitemapd_crawlers.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly PG=postgres://postgres@127.0.0.1:5432
readonly DB=sitemapd_crawlers
readonly PUBLIC=https://www.example.com
readonly BIN=target/release/sitemapd
readonly AGENT='Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/131.0.6778.204 Safari/537.36'
OUT=${BENCH_OUT:-bench/results/crawlers-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
readonly OUT
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
say() { echo "$*" | tee -a "$OUT/crawlers.txt"; }

start() {
  local name=$1 port=$2
  shift 2
  env DATABASE_URL="$PG/$DB" SITEMAPD_BIND="127.0.0.1:$port" SITEMAPD_PUBLIC_URL="$PUBLIC" "$@" \
    "$BIN" >"$OUT/$name.log" 2>&1 &
  echo $! >"$OUT/$name.pid"
  for _ in $(seq 1 300); do
    curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && return 0
    sleep 0.1
  done
  log "sitemapd $name did not start"; cat "$OUT/$name.log" >&2; exit 1
}
cleanup() {
  for f in "$OUT"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  return 0
}
trap cleanup EXIT
# wrk at 16 connections for 10 s as Googlebot: the rate.
rate() {
  wrk -t2 -c16 -d10s -H 'Accept-Encoding: gzip' -H "User-Agent: $AGENT" "$@" | awk '/Requests\/sec/ {print $2}'
}
etag_of() { curl -sI -H 'Accept-Encoding: gzip' "$1" | awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r'; }

command -v wrk >/dev/null || { apt-get update -qq; apt-get install -y -qq wrk; }
log "building sitemapd (release)"
cargo build --release --locked --bin sitemapd
echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty) date=$(date -u +%FT%TZ) cores=$(nproc)" \
  >"$OUT/crawlers.txt"

psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
# Loopback is Googlebot here: the fetches are verified, the costliest kind (a read of a page version each).
echo '{"creationTime": "bench", "prefixes": [{"ipv4Prefix": "127.0.0.1/32"}]}' >"$OUT/googlebot.json"
start on 18090 SITEMAPD_CRAWLER_RANGES="googlebot=$OUT/googlebot.json"
start off 18091 SITEMAPD_CRAWLER_TELEMETRY=false
log "loading 100,000 URLs"
python3 -c "
import json
for i in range(100000):
    print(json.dumps({'loc': '$PUBLIC/p/%d' % i, 'lastmod': '2026-11-01'}))
" | curl -fsS -X PUT -H 'Content-Type: application/x-ndjson' --data-binary @- http://127.0.0.1:18090/api/v1/urls >/dev/null
for port in 18090 18091; do
  curl -fs -o /dev/null -H 'Accept-Encoding: gzip' -H 'Cache-Control: no-cache' "http://127.0.0.1:$port/sitemap-1.xml"
done
etag=$(etag_of http://127.0.0.1:18091/sitemap-1.xml)
index_etag=$(etag_of http://127.0.0.1:18091/sitemap.xml)

declare -A results
for round in 1 2 3 4; do
  for side in off on; do
    port=18091; [ "$side" = on ] && port=18090
    base=http://127.0.0.1:$port
    results[$side-page304]+="$(rate -H "If-None-Match: $etag" "$base/sitemap-1.xml") "
    results[$side-page200]+="$(rate "$base/sitemap-1.xml") "
    results[$side-index304]+="$(rate -H "If-None-Match: $index_etag" "$base/sitemap.xml") "
    log "round $round $side done"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for measure in page304 page200 index304; do
  off=$(echo "${results[off-$measure]}" | median)
  on=$(echo "${results[on-$measure]}" | median)
  say "$measure off_rps=$off on_rps=$on ratio=$(python3 -c "print(round($on / $off, 3))") runs_off=[${results[off-$measure]% }] runs_on=[${results[on-$measure]% }]"
done
# What the on side recorded: one row per resource, the fetches counted (flushed at most 5 s ago).
sleep 6
psql -At -h 127.0.0.1 -U postgres -d "$DB" -c \
  "SELECT 'recorded ' || resource || ' ' || crawler || ' ' || trust || ' fetches=' || fetches || ' not_modified=' || not_modified FROM crawler_fetches ORDER BY resource" \
  | tee -a "$OUT/crawlers.txt"
log "done: $OUT/crawlers.txt"
