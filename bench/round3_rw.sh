#!/usr/bin/env bash
# Issue 29 (round three), reads during writes: bench/round2.sh's step 4 for one binary, for interleaved A/Bs.
#
#   bench/round3_rw.sh BIN TAG PORT      # TAG: a fresh prefix for the new rows of this run
#
# On the Postgres database sitemapd_ing_rw, loaded once with the harness's 1M rows: BIN started on it, page 10
# rendered and its ETag read, then 2M new rows (NDJSON, default ../shared/bench/data/urls-1000000.ndjson twice
# under two new path prefixes) sent by bench/load.py --batch 5000 while wrk (c=16, 10 s) runs the 304 of page 10,
# then page 10 gzip, and vmstat samples the run queue. Prints: TAG 304[rps p50 p99] page[rps p50 p99] rq idle.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p /tmp/ing
BIN=$1 TAG=$2 PORT=$3
URL=postgres://postgres@127.0.0.1:5432/sitemapd_ing_rw
env DATABASE_URL="$URL" SITEMAPD_BIND="127.0.0.1:$PORT" SITEMAPD_PUBLIC_URL=https://www.example.com \
  SITEMAPD_API_TOKENS=bench-token SITEMAPD_API_TIMEOUT=1h "$BIN" >/tmp/ing/rw-$TAG.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
page=http://127.0.0.1:$PORT/sitemap-10.xml
curl -s -o /dev/null -H 'Accept-Encoding: gzip' $page
etag=$(curl -sI -H 'Accept-Encoding: gzip' $page | awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r')
wrk_at() { wrk -t2 -c16 -d10s --latency -H 'Accept-Encoding: gzip' "$@" | awk '/Requests\/sec/ {r=$2} /^ +50%/ {m=$2} /^ +99%/ {p=$2} END {print r, m, p}'; }
F=${NDJSON:-../shared/bench/data/urls-1000000.ndjson}
(sed "s#example.com/#example.com/${TAG}a/#" $F; sed "s#example.com/#example.com/${TAG}b/#" $F) |
  python3 bench/load.py --base http://127.0.0.1:$PORT --token bench-token --batch 5000 >/tmp/ing/rw-$TAG.json &
loader=$!
sleep 3
vmstat 1 20 > /tmp/ing/rw-$TAG.vmstat &
r304=$(wrk_at -H "If-None-Match: $etag" $page)
rpage=$(wrk_at $page)
wait $!  2>/dev/null || true
sleep 0.1
kill $loader 2>/dev/null || true
kill $pid; wait $pid || true
rq=$(awk 'NR > 3 {r += $1; id += $15; n++} END {printf "rq=%.1f idle=%.0f", r / n, id / n}' /tmp/ing/rw-$TAG.vmstat)
echo "$TAG $(basename $BIN) 304[rps p50 p99]=$r304 page=$rpage $rq"
