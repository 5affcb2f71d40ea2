#!/usr/bin/env bash
# Issue 40's ingest cost: "a 1M-URL site with 20% of its URLs in clusters of 2-30 members ingests within 10% of the
# same site without clusters". The harness's data set (bench/hreflang_data.py: the same rows, plain and with 20% of
# them in clusters whose members each list the whole cluster, x-default in half of them) sent as one NDJSON stream
# (bench/load.py, 10,000 lines a request, one connection) into a fresh database by a sitemapd with the page cache
# off, three ways in turn: plain (no alternates); the clusters with SITEMAPD_HREFLANG=as_sent; the same with
# complete. On Postgres and SQLite. After each load with clusters, the pages' bytes are hashed (every sitemap page
# of the index, identity): once every member is stored, `complete` renders what the members declared, so both
# policies must end with the same pages.
#
#   bench/hreflang_ingest.sh                                  # 1,000,000 rows, both backends; ~15 min after the build
#   BENCH_HREFLANG_ROWS=100000 bench/hreflang_ingest.sh       # fewer rows
#   BENCH_HREFLANG_BACKENDS=pg bench/hreflang_ingest.sh       # pg, sqlite, or both (the default: "pg sqlite")
#   BENCH_HREFLANG_LAYOUT=adjacent bench/hreflang_ingest.sh   # a cluster's members on consecutive lines (default:
#                                                             # spread over the whole stream)
#   BENCH_HREFLANG_ROUNDS=3 bench/hreflang_ingest.sh          # the three loads, in turn, this many times
#   BENCH_HREFLANG_MODES="plain sent" BIN=old/sitemapd bench/hreflang_ingest.sh
#                                # sent: the clusters without SITEMAPD_HREFLANG, for a binary from before issue 40
#   BENCH_OUT=dir bench/hreflang_ingest.sh                    # into an existing results directory; no build
#
# Needs PostgreSQL on 127.0.0.1:5432 with trust auth, python3 and curl. Creates the databases
# sitemapd_hreflang_plain, _as_sent and _complete (dropped and made anew, dropped after each load); SQLite files go
# under the data directory. The generated data (bench/results/hreflang-data/, ~1 GB at 1M rows) is reused by the
# next run; BENCH_HREFLANG_CLEAN=1 deletes it at the end. Results: hreflang-*.json in the results directory and
# hreflang-summary.md, the table.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly PEERS_DIR=${PEERS_DIR:-$(cd ../shared/bench && pwd)}
export PEERS_DIR
readonly ROWS=${BENCH_HREFLANG_ROWS:-1000000}
readonly BACKENDS=${BENCH_HREFLANG_BACKENDS:-pg sqlite}
readonly LAYOUT=${BENCH_HREFLANG_LAYOUT:-spread}
readonly ROUNDS=${BENCH_HREFLANG_ROUNDS:-1}
readonly MODES=${BENCH_HREFLANG_MODES:-plain as_sent complete}
readonly PG=postgres://postgres@127.0.0.1:5432
readonly PUBLIC=https://www.example.com
readonly TOKEN=bench-token
readonly BIN=${BIN:-target/release/sitemapd}
readonly OUT=${BENCH_OUT:-bench/results/$(date +%Y%m%d-%H%M%S)-hreflang}
readonly DATA=${BENCH_HREFLANG_DATA:-bench/results/hreflang-data}
readonly PORT=18110
mkdir -p "$OUT" "$DATA"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  return 0
}
trap cleanup EXIT

# The database URL of a load (`backend`, `mode`), made fresh.
fresh() {
  local backend=$1 mode=$2
  if [ "$backend" = pg ]; then
    psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS sitemapd_hreflang_$mode WITH (FORCE)" \
      -c "CREATE DATABASE sitemapd_hreflang_$mode" -c "CHECKPOINT"
    echo "$PG/sitemapd_hreflang_$mode"
  else
    rm -rf "$DATA/sqlite-$mode" && mkdir -p "$DATA/sqlite-$mode"
    echo "sqlite://$(cd "$DATA/sqlite-$mode" && pwd)/sitemapd.db"
  fi
}

drop() {
  local backend=$1 mode=$2
  if [ "$backend" = pg ]; then
    psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS sitemapd_hreflang_$mode WITH (FORCE)"
  else
    rm -rf "$DATA/sqlite-$mode"
  fi
}

# One load: a fresh database, sitemapd on it (with SITEMAPD_HREFLANG=mode when the mode is a policy), the file
# sent; then its CPU seconds and, with clusters, a digest of its pages. Writes hreflang-<backend>-<mode>-<round>.json.
load() {
  local backend=$1 mode=$2 round=$3 file url name
  name=$backend-$mode-$round
  file=$DATA/clusters-$ROWS-$LAYOUT.ndjson
  [ "$mode" = plain ] && file=$DATA/plain-$ROWS.ndjson
  url=$(fresh "$backend" "$mode")
  local policy=()
  case $mode in as_sent | complete) policy=(SITEMAPD_HREFLANG="$mode") ;; esac
  env DATABASE_URL="$url" SITEMAPD_BIND="127.0.0.1:$PORT" SITEMAPD_PUBLIC_URL="$PUBLIC" \
    SITEMAPD_API_TOKENS="$TOKEN" SITEMAPD_API_TIMEOUT=1h SITEMAPD_CACHE_BYTES=0 RUST_LOG=sitemapd=warn \
    "${policy[@]}" "$BIN" >"$OUT/hreflang-$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz" && break
    kill -0 "$pid" 2>/dev/null || { log "sitemapd $name did not start"; cat "$OUT/hreflang-$name.log" >&2; exit 1; }
    sleep 0.1
  done
  local c0 c1
  c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  log "$name: $(wc -l <"$file") rows from $(basename "$file")"
  python3 bench/load.py --base "http://127.0.0.1:$PORT" --token "$TOKEN" <"$file" >"$OUT/hreflang-$name.load.json"
  c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  local digest=-
  [ "$mode" = plain ] || digest=$(pages_digest)
  kill "$pid"
  wait "$pid" || true
  pid=
  drop "$backend" "$mode"
  python3 - "$OUT/hreflang-$name.load.json" "$backend" "$mode" "$round" "$(( (c1 - c0) / $(getconf CLK_TCK) ))" \
    "$digest" >"$OUT/hreflang-$name.json" <<'PYEOF'
import json, sys
load = json.load(open(sys.argv[1]))
print(json.dumps({"backend": sys.argv[2], "mode": sys.argv[3], "round": int(sys.argv[4]), "cpu_s": int(sys.argv[5]),
                  "pages_sha256": sys.argv[6], **load}))
PYEOF
  rm -f "$OUT/hreflang-$name.load.json"
  log "$name: $(python3 -c 'import json,sys; print(round(json.load(sys.stdin)["rows_per_s"]))' <"$OUT/hreflang-$name.json") rows/s"
}

# The SHA-256 of every sitemap page the index lists, identity, in the index's order.
pages_digest() {
  curl -fsS "http://127.0.0.1:$PORT/sitemap.xml" | grep -o '<loc>[^<]*</loc>' | sed -e 's|<loc>[^/]*//[^/]*||' \
    -e 's|</loc>||' | while read -r path; do curl -fsS "http://127.0.0.1:$PORT$path"; done | sha256sum | cut -c1-16
}

# --- prerequisites ------------------------------------------------------------------------------------------
pg_isready -h 127.0.0.1 -p 5432 -q || { log "starting PostgreSQL"; pg_ctlcluster --skip-systemctl-redirect 15 main start; }
command -v curl >/dev/null || { apt-get update -qq; apt-get install -y -qq curl; }
if [ -z "${BENCH_OUT:-}" ]; then
  log "building sitemapd (release)"
  cargo build --release --locked --bin sitemapd
fi
{
  echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
  echo "date=$(date -u +%FT%TZ)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) x $(nproc)"
  echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "postgres=$(psql -h 127.0.0.1 -U postgres -Atc 'show server_version')"
  echo "hreflang_rows=$ROWS layout=$LAYOUT rounds=$ROUNDS backends=$BACKENDS modes=$MODES"
} >>"$OUT/machine.txt"

# --- 1. the data ------------------------------------------------------------------------------------------------
if [ -s "$DATA/plain-$ROWS.ndjson" ] && [ -s "$DATA/clusters-$ROWS-$LAYOUT.ndjson" ] && [ -s "$DATA/data-$ROWS-$LAYOUT.json" ]; then
  log "reusing the data in $DATA"
else
  log "generating $ROWS rows, plain and with clusters ($LAYOUT)"
  python3 bench/hreflang_data.py --rows "$ROWS" --dir "$DATA" --layout "$LAYOUT" >"$DATA/data-$ROWS-$LAYOUT.json"
fi
cp "$DATA/data-$ROWS-$LAYOUT.json" "$OUT/hreflang-data.json"

# --- 2. the loads: plain, as_sent, complete in turn, each into a fresh database ----------------------------------
for round in $(seq 1 "$ROUNDS"); do
  for backend in $BACKENDS; do
    for mode in $MODES; do
      load "$backend" "$mode" "$round"
    done
  done
done
[ "${BENCH_HREFLANG_CLEAN:-0}" = 1 ] && rm -rf "$DATA"

# --- 3. the table -------------------------------------------------------------------------------------------------
python3 - "$OUT" >"$OUT/hreflang-summary.md" <<'PYEOF'
import glob, json, os, sys
d = sys.argv[1]
data = json.load(open(os.path.join(d, "hreflang-data.json")))
runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, "hreflang-*-*-*.json")))
        if not p.endswith(".load.json")]
at = {(r["backend"], r["mode"], r["round"]): r for r in runs}
print(f"{data['rows']:,} rows; {data['clustered_rows']:,} in {data['clusters']:,} clusters of 2-30 "
      f"(mean {data['mean_size']:.1f}, {data['layout']}), {data['links']:,} links once all are stored; NDJSON "
      f"{data['plain_bytes'] / 1e6:.0f} MB plain, {data['clusters_bytes'] / 1e6:.0f} MB with the clusters.\n")
modes = [m for m in ("plain", "sent", "as_sent", "complete") if any(k[1] == m for k in at)]
others = [m for m in modes if m != "plain"]
print("| backend | round | " + " | ".join(f"{m} rows/s" for m in modes) + " | "
      + " | ".join(f"{m} / plain" for m in others) + " | CPU s " + " / ".join(modes) + " | pages alike |")
print("|---|---|" + "---|" * (len(modes) + len(others) + 2))
for backend, rnd in sorted({(k[0], k[2]) for k in at}):
    got = {m: at.get((backend, m, rnd)) for m in modes}
    rate = lambda x: f"{x['rows_per_s']:,.0f}" if x else "-"
    ratio = lambda x, y: f"{x['rows_per_s'] / y['rows_per_s']:.2f}x" if x and y else "-"
    digests = {x["pages_sha256"] for m, x in got.items() if x and m != "plain"}
    same = "-" if len(others) < 2 else ("yes" if len(digests) == 1 else "**no**")
    cpu = " / ".join(str(x["cpu_s"]) if x else "-" for x in got.values())
    print(f"| {backend} | {rnd} | " + " | ".join(rate(got[m]) for m in modes) + " | "
          + " | ".join(ratio(got[m], got.get("plain")) for m in others) + f" | {cpu} | {same} |")
PYEOF
cat "$OUT/hreflang-summary.md"
log "done: $OUT"
