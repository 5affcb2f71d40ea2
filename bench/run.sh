#!/usr/bin/env bash
# The whole-service benchmark, in one run: sitemapd beside Django's sitemaps and nginx serving pre-rendered files
# (the harness in ../shared/bench), on the same data, plus the scale and memory figures. Results go to
# bench/results/<stamp>/; the table for BENCHMARKS.md is bench/results/<stamp>/summary.md.
#
#   bench/run.sh                                  # 1M rows beside the peers, then 100k and 10M rows alone (~45 min)
#   BENCH_SCALE_LARGE=1000000 bench/run.sh        # a smaller large scale (quicker)
#   BENCH_PEERS=nginx bench/run.sh                # skip Django (its runs take most of the time)
#   BENCH_EXT=0 bench/run.sh                      # skip the extension-mix stage (5.); alone: bench/ext.sh
#   BENCH_IMPORT=0 bench/run.sh                   # skip the import stage (6.); alone: bench/import.sh
#   BENCH_ROUND2=0 bench/run.sh                   # skip round two (7.); alone: bench/round2.sh
#
# Needs PostgreSQL on 127.0.0.1:5432 with trust auth (as in CI). It creates the databases sitemapd_bench,
# sitemapd_scale_small and sitemapd_scale_large (dropped and made anew), and the harness's peerbench; the
# extension stage (bench/ext.sh) sitemapd_ext_plain and sitemapd_ext_mix; the import stage (bench/import.sh)
# sitemapd_import_api and sitemapd_import_cli.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly PEERS_DIR=${PEERS_DIR:-$(cd ../shared/bench && pwd)}
readonly ROWS=${BENCH_ROWS:-1000000}
readonly SCALE_SMALL=${BENCH_SCALE_SMALL:-100000}
readonly SCALE_LARGE=${BENCH_SCALE_LARGE:-10000000}
readonly PG=postgres://postgres@127.0.0.1:5432
readonly PUBLIC=https://www.example.com
readonly TOKEN=bench-token
readonly BIN=target/release/sitemapd
readonly OUT=bench/results/$(date +%Y%m%d-%H%M%S)
readonly PY=$PEERS_DIR/.venv/bin/python
mkdir -p "$OUT"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# Starts sitemapd as `name` on `port` over database `db`, with extra VAR=value settings (its default log, as it
# runs in production: what the access log costs is part of what is measured); waits for /healthz.
start() {
  local name=$1 port=$2 db=$3
  shift 3
  env DATABASE_URL="$PG/$db" SITEMAPD_BIND="127.0.0.1:$port" SITEMAPD_PUBLIC_URL="$PUBLIC" \
    SITEMAPD_API_TOKENS="$TOKEN" SITEMAPD_API_TIMEOUT=1h "$@" \
    "$BIN" >"$OUT/$name.log" 2>&1 &
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
  return 0
}
trap cleanup EXIT

fresh_db() {
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
}

# --- prerequisites ------------------------------------------------------------------------------------------
pg_isready -h 127.0.0.1 -p 5432 -q || { log "starting PostgreSQL"; pg_ctlcluster --skip-systemctl-redirect 15 main start; }
command -v curl >/dev/null || { apt-get update -qq; apt-get install -y -qq curl; }
log "building sitemapd (release) and the data-set generator"
cargo build --release --locked --bin sitemapd --example dataset
[ -x "$PY" ] || python3 -m venv "$PEERS_DIR/.venv"
"$PY" -c 'import django, gunicorn, psycopg' 2>/dev/null || "$PEERS_DIR/.venv/bin/pip" install -q "django>=5,<6" gunicorn "psycopg[binary]"
{
  echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
  echo "date=$(date -u +%FT%TZ)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) x $(nproc)"
  echo "mem=$(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "postgres=$(psql -h 127.0.0.1 -U postgres -Atc 'show server_version')"
  echo "rows=$ROWS scale_small=$SCALE_SMALL scale_large=$SCALE_LARGE"
} >"$OUT/machine.txt"

# --- 1. ingest beside COPY (target 4) ----------------------------------------------------------------------
log "the harness's data set: $ROWS rows, COPY into its indexed table (timed again for this run)"
if "$PY" "$PEERS_DIR/dataset.py" --rows "$ROWS" --check; then
  "$PY" "$PEERS_DIR/dataset.py" --rows "$ROWS" --reload >"$OUT/copy.json"
else
  "$PY" "$PEERS_DIR/dataset.py" --rows "$ROWS" >"$OUT/copy.json"
fi
fresh_db sitemapd_bench
start main 18080 sitemapd_bench
log "ingest through the API: first load, then the identical re-send"
"$PY" "$PEERS_DIR/load_sitemapd.py" --rows "$ROWS" --token "$TOKEN" --base http://127.0.0.1:18080 >"$OUT/ingest-first.json"
"$PY" "$PEERS_DIR/load_sitemapd.py" --rows "$ROWS" --token "$TOKEN" --base http://127.0.0.1:18080 >"$OUT/ingest-resend.json"

# --- 2. memory of a fresh process serving 16 uncached pages at once (target 5) -----------------------------
stop main
start main 18080 sitemapd_bench
log "memory: 16 uncached pages at once, $ROWS rows"
python3 bench/memprobe.py --base http://127.0.0.1:18080 --pid "$(cat "$OUT/main.pid")" >"$OUT/memory-main.json"
log "memory: RSS before, during and after the same rows loaded into SQLite (the embedded default)"
python3 bench/load_rss.py --bin "$BIN" --data "$PEERS_DIR/data/urls-$ROWS.ndjson" --port 18095 >"$OUT/memory-sqlite-load.json"

# --- 3. beside the peers (targets 1-3): cached instance in the harness's run, uncached instance after it ----
log "the peers' run, with sitemapd (page cache on) as a target"
before=$(ls "$PEERS_DIR"/results/peers-*.json 2>/dev/null | sort | tail -1 || true)
TARGET_SITEMAPD=http://127.0.0.1:18080 BENCH_ROWS="$ROWS" "$PEERS_DIR/run-peers.sh" >"$OUT/peers.txt" 2>"$OUT/peers.log"
after=$(ls "$PEERS_DIR"/results/peers-*.json | sort | tail -1)
[ "$after" != "$before" ] || { log "the harness wrote no result"; exit 1; }
cp "$after" "$OUT/peers.json"
cp "${after/peers-/micro-}" "$OUT/micro.json"
log "the floor's gzip at sitemapd's level: zlib (Python), best of 3, on the harness's last full page"
level=$(grep -E '^gzip_level' config/default.toml | grep -oE '[0-9]+')
"$PY" - "$level" "$PEERS_DIR/static" >"$OUT/zlib-level.json" <<'PYEOF'
import json, os, sys, time, zlib
level, static = int(sys.argv[1]), sys.argv[2]
i = 1
while os.path.exists(os.path.join(static, f"sitemap-{i + 1}.xml")):
    i += 1
data = open(os.path.join(static, f"sitemap-{i}.xml"), "rb").read()
best = float("inf")
for _ in range(3):
    t = time.perf_counter()
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    z = c.compress(data) + c.flush()
    best = min(best, time.perf_counter() - t)
print(json.dumps({"level": level, "page": f"sitemap-{i}.xml", "identity_bytes": len(data), "s": best, "ratio": len(data) / len(z)}))
PYEOF
stop main
log "sitemapd with the page cache off: every page read and compressed per request"
start uncached 18081 sitemapd_bench SITEMAPD_CACHE_BYTES=0
TARGET_SITEMAPD=http://127.0.0.1:18081 BENCH_OUT="$PWD/$OUT/uncached.json" "$PY" "$PEERS_DIR/bench.py" >/dev/null 2>"$OUT/uncached.log"
stop uncached

# --- 4. scale: the index and the last page at SCALE_SMALL and SCALE_LARGE rows (targets 3 and 6) -----------
for scale in small large; do
  rows=$SCALE_SMALL
  [ "$scale" = large ] && rows=$SCALE_LARGE
  [ "$rows" -gt 0 ] || continue
  db=sitemapd_scale_$scale
  fresh_db "$db"
  start "$scale" 18090 "$db" SITEMAPD_CACHE_BYTES=0
  log "scale $scale: loading $rows generated rows"
  target/release/examples/dataset --rows "$rows" | python3 bench/load.py --base http://127.0.0.1:18090 --token "$TOKEN" >"$OUT/ingest-$scale.json"
  psql -q -h 127.0.0.1 -U postgres -d "$db" -c "VACUUM ANALYZE"
  stop "$scale"
  start "$scale" 18090 "$db" SITEMAPD_CACHE_BYTES=0
  python3 bench/memprobe.py --base http://127.0.0.1:18090 --pid "$(cat "$OUT/$scale.pid")" >"$OUT/memory-$scale.json"
  log "scale $scale: index, first and last page (uncached), 304s"
  TARGET_SITEMAPD=http://127.0.0.1:18090 BENCH_OUT="$PWD/$OUT/scale-$scale.json" "$PY" "$PEERS_DIR/bench.py" >/dev/null 2>"$OUT/scale-$scale.log"
  stop "$scale"
done

# --- 5. the extension mix beside the plain data set, BENCH_ROWS rows each (bench/ext.sh) ----------------------
if [ "${BENCH_EXT:-1}" != 0 ]; then
  log "extensions: plain and mixed data set, ingest, memory, uncached page time per MB, XSD validation"
  BENCH_OUT="$OUT" BENCH_EXT_ROWS="$ROWS" bench/ext.sh >/dev/null
fi

# --- 6. sitemapd import beside the NDJSON API ingest, BENCH_ROWS rows each (bench/import.sh) -----------------
if [ "${BENCH_IMPORT:-1}" != 0 ]; then
  log "import: $ROWS rows as 20 gzip sitemap files beside the same rows through the API"
  BENCH_OUT="$OUT" BENCH_IMPORT_ROWS="$ROWS" bench/import.sh >/dev/null
fi

# --- 7. round two (issue 13): ingest and SQLite, 304s and the index beside nginx at the default log, the first
# fetch after a write and the cold page each way, reads during a load, the index at 50,000 pages (bench/round2.sh) --
if [ "${BENCH_ROUND2:-1}" != 0 ]; then
  log "round two: ingest, 304s and the index, first fetch and cold page, reads under load, 50,000 pages"
  BENCH_DJANGO=$([ "${BENCH_PEERS:-}" = nginx ] && echo 0 || echo 1) BENCH_OUT="$OUT" bench/round2.sh >/dev/null
fi

python3 bench/report.py "$OUT" | tee "$OUT/summary.md"
log "done: $OUT"
