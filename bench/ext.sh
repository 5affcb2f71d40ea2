#!/usr/bin/env bash
# The sitemap-extension benchmark: the harness's data set plain and with the extension mix (bench/ext_mix.py:
# 30% of entries with 1-5 images, 5% with a 4-way hreflang set, 1% with a video, ~300 news articles), the same
# rows in both, each loaded into a fresh Postgres database by a sitemapd with the page cache off. Measures: NDJSON
# ingest rows/s; the peak RSS of a fresh process serving 16 uncached pages at once (bench/memprobe.py; three fresh
# processes per data set, the highest counts); the uncached page time per uncompressed MB, gzip and identity, plain
# and mix fetched in alternation (bench/ext_pages.py). Validates a rendered page, the index and the news sitemap of
# the mix with tests/xsd/validate.sh, and lists the WARN/ERROR lines of both sitemapd logs.
#
#   bench/ext.sh                       # 1,000,000 rows (~4 min after the build); into bench/results/<stamp>-ext/
#   BENCH_EXT_ROWS=200000 bench/ext.sh # fewer rows
#   BENCH_OUT=dir bench/ext.sh         # into an existing results directory (bench/run.sh calls it so; no build)
#   BENCH_EXT_MEM=1 / BENCH_EXT_PAGES=8 / BENCH_EXT_ROUNDS=5   # memory tries; pages timed, and fetches of each
#
# Needs PostgreSQL on 127.0.0.1:5432 with trust auth, python3, curl and xmllint (libxml2-utils; installed if
# missing). Creates the databases sitemapd_ext_plain and sitemapd_ext_mix (dropped and made anew). The generated
# TSV is kept in bench/results/ext-data/ and reused; the NDJSON files there are written anew each run (news dates
# are relative to the hour of the run). ext-summary.json holds the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly PEERS_DIR=${PEERS_DIR:-$(cd ../shared/bench && pwd)}
readonly XSD_DIR=${XSD_DIR:-$PWD/tests/xsd}
readonly ROWS=${BENCH_EXT_ROWS:-1000000}
readonly PG=postgres://postgres@127.0.0.1:5432
readonly PUBLIC=https://www.example.com
readonly TOKEN=bench-token
readonly BIN=target/release/sitemapd
readonly OUT=${BENCH_OUT:-bench/results/$(date +%Y%m%d-%H%M%S)-ext}
readonly DATA=bench/results/ext-data
mkdir -p "$OUT" "$DATA"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# Starts sitemapd as `name` on `port` over database `db`, page cache off; waits for /healthz.
start() {
  local name=$1 port=$2 db=$3
  env DATABASE_URL="$PG/$db" SITEMAPD_BIND="127.0.0.1:$port" SITEMAPD_PUBLIC_URL="$PUBLIC" \
    SITEMAPD_API_TOKENS="$TOKEN" SITEMAPD_API_TIMEOUT=1h SITEMAPD_CACHE_BYTES=0 RUST_LOG=sitemapd=warn \
    "$BIN" >>"$OUT/ext-$name.log" 2>&1 &
  echo $! >"$OUT/ext-$name.pid"
  for _ in $(seq 1 300); do
    curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && return 0
    sleep 0.1
  done
  log "sitemapd $name did not start"; cat "$OUT/ext-$name.log" >&2; exit 1
}

# Stops sitemapd `name`. A process that ended before it was told to is reported, with its exit status, in
# ext-exits.txt (and in the summary).
stop() {
  local pid status=0
  pid=$(cat "$OUT/ext-$1.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" || true
  else
    wait "$pid" || status=$?
    log "sitemapd $1 (pid $pid) had already exited, status $status"
    echo "$(date -u +%FT%TZ) $1 pid $pid exited on its own, status $status" >>"$OUT/ext-exits.txt"
  fi
  rm -f "$OUT/ext-$1.pid"
}

cleanup() {
  for f in "$OUT"/ext-*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  return 0
}
trap cleanup EXIT

fresh_db() {
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
}

# --- prerequisites ------------------------------------------------------------------------------------------
pg_isready -h 127.0.0.1 -p 5432 -q || { log "starting PostgreSQL"; pg_ctlcluster --skip-systemctl-redirect 15 main start; }
command -v curl >/dev/null || { apt-get update -qq; apt-get install -y -qq curl; }
command -v xmllint >/dev/null || { apt-get update -qq; apt-get install -y -qq libxml2-utils; }
if [ -z "${BENCH_OUT:-}" ]; then
  log "building sitemapd (release)"
  cargo build --release --locked --bin sitemapd
  {
    echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
    echo "date=$(date -u +%FT%TZ)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) x $(nproc)"
    echo "mem=$(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "postgres=$(psql -h 127.0.0.1 -U postgres -Atc 'show server_version')"
  } >"$OUT/machine.txt"
fi
echo "ext_rows=$ROWS" >>"$OUT/machine.txt"

# --- 1. the data: the harness's records, plain and with the mix ---------------------------------------------
log "generating $ROWS rows, plain and with the extension mix"
python3 bench/ext_mix.py --rows "$ROWS" --dir "$DATA" >"$OUT/ext-mix.json"

# --- 2. ingest, plain then mix, each into a fresh database ---------------------------------------------------
port=18100
for set in plain mix; do
  db=sitemapd_ext_$set
  fresh_db "$db"
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "CHECKPOINT"
  start "$set" "$port" "$db"
  log "ingest ($set): $ROWS rows as NDJSON, 10,000 lines a request"
  python3 bench/load.py --base "http://127.0.0.1:$port" --token "$TOKEN" <"$DATA/$set-$ROWS.ndjson" >"$OUT/ext-ingest-$set.json"
  psql -q -h 127.0.0.1 -U postgres -d "$db" -c "VACUUM ANALYZE"
  stop "$set"
  port=$((port + 1))
done

# --- 3. memory: a fresh process of each, 16 uncached pages at once (gzip, then identity), BENCH_EXT_MEM times ---
# (the peak depends on how many responses overlap, so it varies from one try to the next; the summary takes the
# highest, ext-memory-<set>.json holds one line per try)
readonly MEM_TRIES=${BENCH_EXT_MEM:-3}
for set in plain mix; do
  : >"$OUT/ext-memory-$set.json"
  for try in $(seq 1 "$MEM_TRIES"); do
    start "$set" 18100 "sitemapd_ext_$set"
    log "memory ($set, try $try of $MEM_TRIES): 16 uncached pages at once"
    python3 bench/memprobe.py --base http://127.0.0.1:18100 --pid "$(cat "$OUT/ext-$set.pid")" \
      >>"$OUT/ext-memory-$set.json" 2>>"$OUT/ext-memory-errors.txt" || log "memory ($set, try $try): fetches failed"
    stop "$set"
  done
done
start plain 18100 sitemapd_ext_plain
start mix 18101 sitemapd_ext_mix

# --- 4. uncached page time per MB, plain and mix in alternation (both instances up, one request at a time) ---
log "uncached pages: plain and mix in alternation, gzip and identity"
python3 bench/ext_pages.py --plain http://127.0.0.1:18100 --mix http://127.0.0.1:18101 \
  --pages "${BENCH_EXT_PAGES:-8}" --rounds "${BENCH_EXT_ROUNDS:-5}" >"$OUT/ext-pages.json"

# --- 5. validation of the mix's rendered XML -----------------------------------------------------------------
log "validating a page and the news sitemap of the mix"
page=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pages"][0])' "$OUT/ext-pages.json")
curl -fsS -o "$OUT/ext-mix-page.xml" "http://127.0.0.1:18101$page"
curl -fsS -o "$OUT/ext-mix-page.xml.gz" -H 'Accept-Encoding: gzip' "http://127.0.0.1:18101$page"
curl -fsS -o "$OUT/ext-mix-index.xml" http://127.0.0.1:18101/sitemap.xml
news=0
curl -fsS -o "$OUT/ext-mix-news.xml" http://127.0.0.1:18101/sitemap-news.xml && news=1
set +e
{
  echo "page $page:"
  "$XSD_DIR/validate.sh" --expect urlset "$OUT/ext-mix-page.xml" "$OUT/ext-mix-page.xml.gz"
  echo "exit=$?"
  echo "index:"
  "$XSD_DIR/validate.sh" --expect sitemapindex "$OUT/ext-mix-index.xml"
  echo "exit=$?"
  if [ "$news" = 1 ]; then
    echo "news sitemap ($(grep -o '<news:news>' "$OUT/ext-mix-news.xml" | wc -l) articles):"
    "$XSD_DIR/validate.sh" --expect urlset "$OUT/ext-mix-news.xml"
    echo "exit=$?"
  else
    echo "news sitemap: not served"
  fi
} >"$OUT/ext-validate.txt" 2>&1
set -e
rm -f "$OUT/ext-mix-page.xml" "$OUT/ext-mix-page.xml.gz"
stop plain
stop mix

# --- 6. summary -----------------------------------------------------------------------------------------------
python3 - "$OUT" >"$OUT/ext-summary.json" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
j = lambda n: json.load(open(os.path.join(d, n)))
pages, out = j("ext-pages.json"), {"mix": j("ext-mix.json")}
for s in ("plain", "mix"):
    ing = j(f"ext-ingest-{s}.json")
    mem = [json.loads(l) for l in open(os.path.join(d, f"ext-memory-{s}.json")) if l.strip()]
    failed = [m for m in mem if m.get("errors")]
    mem = [m for m in mem if not m.get("errors")]  # a try whose fetches failed measures nothing
    peaks = [m["hwm_after_identity_MB"] for m in mem]
    out[s] = {"ingest_rows_per_s": ing["rows_per_s"], "ingest_s": ing["seconds"], "created": ing["created"],
              "peak_rss_MB": max(peaks) if peaks else None, "peak_rss_tries_MB": peaks,
              "memory_tries_failed": [m["errors"][:3] for m in failed],
              "hwm_after_gzip_tries_MB": [m["hwm_after_gzip_MB"] for m in mem], "page_MB": pages[s]["identity_MB"],
              "gzip_ms": pages[s]["gzip_ms"], "identity_ms": pages[s]["identity_ms"],
              "gzip_ms_per_MB": pages[s]["gzip_ms_per_MB"], "identity_ms_per_MB": pages[s]["identity_ms_per_MB"]}
out["ratio_ingest"] = out["mix"]["ingest_rows_per_s"] / out["plain"]["ingest_rows_per_s"]
for k in ("ratio_gzip_ms_per_MB", "ratio_identity_ms_per_MB", "ratio_gzip_ms_per_page", "ratio_identity_ms_per_page"):
    out[k] = pages[k]
out["page_errors"] = pages["errors"]
out["validate"] = open(os.path.join(d, "ext-validate.txt")).read().count("exit=0")
logs = {}
for s in ("plain", "mix"):
    lines = open(os.path.join(d, f"ext-{s}.log"), errors="replace").read().splitlines()
    logs[s] = [l for l in lines if "WARN" in l or "ERROR" in l or "panic" in l][:20]
out["log_warnings"] = logs
exits = os.path.join(d, "ext-exits.txt")
out["exited_on_their_own"] = open(exits).read().splitlines() if os.path.exists(exits) else []
print(json.dumps(out, indent=1))
PYEOF
cat "$OUT/ext-summary.json"
log "done: $OUT"
