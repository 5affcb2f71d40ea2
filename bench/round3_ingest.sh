#!/usr/bin/env bash
# Issue 29 (round three), ingest: one load of the harness's 1M rows by one binary, for interleaved A/Bs.
#
#   bench/round3_ingest.sh BIN pg|sqlite TAG PORT [VAR=value ...]   # RESEND=0: no re-send
#
# A fresh database (Postgres sitemapd_ing_TAG on 127.0.0.1:5432, or a file under /tmp/ing/), BIN started on it
# with the settings given, the rows sent by the harness's loader (LOADER, default ../shared/bench/load_sitemapd.py:
# 10,000 lines a request, one connection), then sent again. Prints: TAG backend first=rows/s resend=rows/s and
# sitemapd's CPU seconds (utime + stime) for each.
set -euo pipefail
LOADER=${LOADER:-$(cd "$(dirname "$0")/../../shared/bench" && pwd)/load_sitemapd.py}
BIN=$1 BACKEND=$2 TAG=$3 PORT=$4
mkdir -p /tmp/ing
shift 4
if [ "$BACKEND" = pg ]; then
  DB=sitemapd_ing_$TAG
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  URL=postgres://postgres@127.0.0.1:5432/$DB
else
  rm -rf /tmp/ing/sq-$TAG && mkdir -p /tmp/ing/sq-$TAG
  URL=sqlite:///tmp/ing/sq-$TAG/s.db
fi
env DATABASE_URL="$URL" SITEMAPD_BIND="127.0.0.1:$PORT" SITEMAPD_PUBLIC_URL=https://www.example.com \
  SITEMAPD_API_TOKENS=bench-token SITEMAPD_API_TIMEOUT=1h "$@" "$BIN" >/tmp/ing/$TAG.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
cpu() { awk '{print $14 + $15}' /proc/$pid/stat; }
c0=$(cpu)
rate() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["rows_per_s"]))'; }
first=$(python3 "$LOADER" --rows 1000000 --token bench-token --base http://127.0.0.1:$PORT | rate)
c1=$(cpu)
again=-
if [ "${RESEND:-1}" = 1 ]; then
  again=$(python3 "$LOADER" --rows 1000000 --token bench-token --base http://127.0.0.1:$PORT | rate)
fi
c2=$(cpu)
kill $pid; wait $pid || true
tck=$(getconf CLK_TCK)
echo "$TAG $BACKEND first=$first resend=$again cpu_first_s=$(( (c1-c0)/tck )) cpu_resend_s=$(( (c2-c1)/tck ))"
[ "$BACKEND" = pg ] && psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
[ "$BACKEND" = sqlite ] && rm -rf /tmp/ing/sq-$TAG
exit 0
