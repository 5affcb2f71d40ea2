#!/usr/bin/env bash
# User-space instructions per request of one answer, counted by callgrind: the same figure run after run, whatever
# else the machine is doing (issue 29's steps were A/B'd with it).
#
#   DB=bench/results/small-<stamp>/loaded.sqlite bench/callgrind.sh BIN PATH [HEADER...]
#   DB=… bench/callgrind.sh target/release/sitemapd /sitemap.xml 'Accept-Encoding: gzip' 'If-None-Match: "…"'
#
# DB: a SQLite database with URLs in it (bench/small_answers.sh leaves one as loaded.sqlite); a copy is served.
# BIN runs under valgrind on 127.0.0.1:${PORT:-16200}; wrk warms it for 3 s, then callgrind's counters are zeroed,
# wrk runs 5 s at 4 connections, the counters are dumped, and the total is divided by the requests. A binary of
# another commit reads BIN.toml when it exists (see bench/small_answers.sh).
set -euo pipefail
BIN=$1 TARGET=$2
shift 2
PORT=${PORT:-16200}
WORK=$(mktemp -d)
trap 'kill "$vg" 2>/dev/null; rm -rf "$WORK"' EXIT
cp "${DB:?DB must name a SQLite database with URLs}" "$WORK/db.sqlite"
config=config/default.toml
[ -f "$BIN.toml" ] && config=$BIN.toml
SITEMAPD_CONFIG=$config DATABASE_URL="sqlite://$WORK/db.sqlite" SITEMAPD_BIND="127.0.0.1:$PORT" \
  SITEMAPD_PUBLIC_URL=https://www.example.com SITEMAPD_API_TOKENS=bench-token \
  valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.%p" "$BIN" >"$WORK/log" 2>&1 &
vg=$!
for _ in $(seq 1 600); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.2; done
headers=()
for h in "$@"; do headers+=(-H "$h"); done
wrk -t1 -c4 -d3s "${headers[@]}" "http://127.0.0.1:$PORT$TARGET" >/dev/null
callgrind_control -z "$vg" >/dev/null 2>&1
requests=$(wrk -t1 -c4 -d5s "${headers[@]}" "http://127.0.0.1:$PORT$TARGET" | awk '/requests in/ {print $1}')
callgrind_control -d "$vg" >/dev/null 2>&1
sleep 1
total=$(callgrind_annotate "$(ls "$WORK"/callgrind.out.*.1 | head -1)" 2>/dev/null |
  awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$(basename "$BIN") $TARGET requests=$requests instructions/request=$((total / requests))"
