#!/usr/bin/env bash
# `sitemapd import` beside the NDJSON API ingest, in one run, on the same rows: the generated data set
# (examples/dataset, seed 42) rendered as 20 gzip sitemap files and an index (bench/sitemap_files.py), served
# locally by python3's http.server; each load into a fresh Postgres database. Measures rows/s of the API ingest
# (bench/load.py: the server's time) and of the import (the whole command: fetch, gunzip, parse, validate, store),
# first load and the identical re-send of each, and the ratio import / API (goal: at least 0.8).
#
#   bench/import.sh                        # 1,000,000 rows; into bench/results/<stamp>-import/
#   BENCH_IMPORT_ROWS=200000 bench/import.sh
#   BENCH_OUT=dir bench/import.sh          # into an existing results directory (bench/run.sh calls it so; no build)
#
# Needs PostgreSQL on 127.0.0.1:5432 with trust auth, python3 and curl. Creates the databases sitemapd_import_api
# and sitemapd_import_cli (dropped and made anew). The files are kept in bench/results/import-data/<rows>/.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ROWS=${BENCH_IMPORT_ROWS:-1000000}
readonly PG=postgres://postgres@127.0.0.1:5432
readonly PUBLIC=https://www.example.com
readonly TOKEN=bench-token
readonly BIN=target/release/sitemapd
readonly OUT=${BENCH_OUT:-bench/results/$(date +%Y%m%d-%H%M%S)-import}
readonly DATA=bench/results/import-data/$ROWS
readonly FILES_PORT=18097
mkdir -p "$OUT" "$DATA"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
fresh_db() {
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

pg_isready -h 127.0.0.1 -p 5432 -q || pg_ctlcluster --skip-systemctl-redirect 15 main start
if [ -z "${BENCH_OUT:-}" ]; then
  log "building sitemapd (release) and the data-set generator"
  cargo build --release --locked --bin sitemapd --example dataset
fi
if [ ! -s "$DATA/index.xml" ]; then
  log "rendering $ROWS rows as 20 gzip sitemap files"
  target/release/examples/dataset --rows "$ROWS" |
    python3 bench/sitemap_files.py --dir "$DATA" --files 20 --rows "$ROWS" --base "http://127.0.0.1:$FILES_PORT" \
      >"$OUT/import-files.json"
fi
python3 -m http.server "$FILES_PORT" --bind 127.0.0.1 --directory "$DATA" >"$OUT/import-http.log" 2>&1 &
pids+=($!)

log "API ingest: $ROWS rows as NDJSON, then the identical re-send"
fresh_db sitemapd_import_api
env DATABASE_URL="$PG/sitemapd_import_api" SITEMAPD_BIND=127.0.0.1:18096 SITEMAPD_PUBLIC_URL="$PUBLIC" \
  SITEMAPD_API_TOKENS="$TOKEN" SITEMAPD_API_TIMEOUT=1h RUST_LOG=sitemapd=warn "$BIN" >"$OUT/import-api.log" 2>&1 &
api=$!
pids+=("$api")
for _ in $(seq 1 300); do curl -fs -o /dev/null http://127.0.0.1:18096/healthz && break; sleep 0.1; done
for run in first resend; do
  target/release/examples/dataset --rows "$ROWS" | python3 bench/load.py --base http://127.0.0.1:18096 --token "$TOKEN" \
    >"$OUT/import-api-$run.json"
done
kill "$api"; wait "$api" || true

log "sitemapd import: the index of 20 gzip files, then the identical re-import"
fresh_db sitemapd_import_cli
curl -fs -o /dev/null "http://127.0.0.1:$FILES_PORT/index.xml"
# The peak RSS of the import process too, where GNU time is installed (Debian: apt-get install time).
timed=()
[ -x /usr/bin/time ] && timed=(/usr/bin/time -f %M -o "$OUT/import-cli-rss-kb.txt" --append)
rm -f "$OUT/import-cli-rss-kb.txt"
for run in first resend; do
  env DATABASE_URL="$PG/sitemapd_import_cli" SITEMAPD_PUBLIC_URL="$PUBLIC" RUST_LOG=sitemapd=warn \
    "${timed[@]}" "$BIN" import --no-indexnow --rejects "$OUT/import-rejects.ndjson" "http://127.0.0.1:$FILES_PORT/index.xml" \
    >"$OUT/import-cli-$run.txt" 2>"$OUT/import-cli-$run.log"
done

python3 - "$OUT" "$ROWS" >"$OUT/import.json" <<'PYEOF'
import json, os, re, sys
out, rows = sys.argv[1], int(sys.argv[2])
result = {"rows": rows}
rss = f"{out}/import-cli-rss-kb.txt"
peaks = [int(l) for l in open(rss).read().split()] if os.path.exists(rss) else []
for run in ("first", "resend"):
    api = json.load(open(f"{out}/import-api-{run}.json"))
    text = open(f"{out}/import-cli-{run}.txt").read()
    secs = float(re.search(r"time: ([0-9.]+) s", text).group(1))
    stored = re.search(r"stored: (\d+) created, (\d+) updated, (\d+) unchanged", text).groups()
    result[run] = {
        "api_rows_per_s": api["rows_per_s"], "import_s": secs, "import_rows_per_s": rows / secs,
        "ratio": (rows / secs) / api["rows_per_s"], "import_stored": dict(zip(("created", "updated", "unchanged"), map(int, stored))),
        "api_counts": {k: api[k] for k in ("created", "updated", "unchanged")},
        "import_peak_rss_MB": peaks[("first", "resend").index(run)] / 1024 if len(peaks) == 2 else None,
    }
print(json.dumps(result, indent=1))
PYEOF
cat "$OUT/import.json"
log "done: $OUT/import.json"
