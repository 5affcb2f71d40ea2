#!/usr/bin/env bash
# What crawlers ask most, beside nginx, in one run (issue 29, item 1): the index (200, gzip) and the five 304 kinds
# (index and page, If-None-Match and If-Modified-Since; the page's plain form too) at 1 and 16 connections, with
# wrk. nginx serves the very bytes sitemapd sent, as static files (`etag on`, `gzip_static on`, two workers, as in
# ../shared/bench). Servers are measured in turns, ROUNDS times, and the median of each is reported, so that a
# noisy machine moves every server alike. Binaries named on the command line are measured beside each other (an A/B
# of two builds); by default target/release/sitemapd alone.
#
#   bench/small_answers.sh                               # target/release/sitemapd beside nginx
#   bench/small_answers.sh /tmp/a/sitemapd /tmp/b/sitemapd
#   ROUNDS=5 SECS=5 ROWS=200000 bench/small_answers.sh
#   ENVS="SITEMAPD_WORKERS=1;SITEMAPD_WORKERS=2" bench/small_answers.sh   # one binary, two settings
#
# A binary from another commit reads the configuration file beside it, `BINARY.toml`, when there is one (its own
# commit's config/default.toml: a setting it does not know is refused).
#
# The data: ROWS URLs of examples/dataset over the write API into an embedded SQLite database (these answers never
# reach the database). Output: a Markdown table on stdout; raw figures in $OUT (default bench/results/small-<stamp>).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ROWS=${ROWS:-200000} ROUNDS=${ROUNDS:-3} SECS=${SECS:-4}
readonly PORT0=${PORT0:-16010} NGINX_PORT=${NGINX_PORT:-16009}
readonly OUT=${OUT:-bench/results/small-$(date +%Y%m%d-%H%M%S)}
readonly PUBLIC=https://www.example.com TOKEN=bench-token
mkdir -p "$OUT/static" "$OUT/nginx"
OUT_ABS=$(cd "$OUT" && pwd)
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/sitemapd)
IFS=';' read -r -a envs <<<"${ENVS:-}"
[ ${#envs[@]} -gt 0 ] || envs=("")
# Every (binary, settings) pair is one server.
servers=()
for b in "${bins[@]}"; do for e in "${envs[@]}"; do servers+=("$b|$e"); done; done

command -v wrk >/dev/null && command -v nginx >/dev/null ||
  { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx; }
[ -x target/release/examples/dataset ] || cargo build --release --locked --example dataset

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$OUT_ABS/nginx/nginx.pid" ] && kill "$(cat "$OUT_ABS/nginx/nginx.pid")" 2>/dev/null
  return 0
}
trap cleanup EXIT

wait_up() {
  for _ in $(seq 1 300); do curl -fs -o /dev/null "http://127.0.0.1:$1/healthz" && return 0; sleep 0.1; done
  log "nothing answers on port $1"; exit 1
}

# SITEMAPD_CONFIG=BINARY.toml when that file exists.
config_of() { if [ -f "$1.toml" ]; then echo "SITEMAPD_CONFIG=$1.toml"; else echo "SITEMAPD_CONFIG=config/default.toml"; fi; }

# sitemapd on a database of its own (a copy of the loaded one), with the settings `env`.
start() {
  local bin=$1 settings=$2 port=$3 db=$OUT/db-$3.sqlite
  [ -f "$db" ] || cp "$OUT/loaded.sqlite" "$db"
  # shellcheck disable=SC2086 # the settings are VAR=value words
  env $(config_of "$bin") DATABASE_URL="sqlite://$db" SITEMAPD_BIND="127.0.0.1:$port" SITEMAPD_PUBLIC_URL="$PUBLIC" \
    SITEMAPD_API_TOKENS="$TOKEN" $settings "$bin" >"$OUT/sitemapd-$port.log" 2>&1 &
  pids+=($!)
  wait_up "$port"
}

log "loading $ROWS URLs"
env $(config_of "${bins[0]}") DATABASE_URL="sqlite://$OUT/loaded.sqlite" SITEMAPD_BIND="127.0.0.1:$PORT0" SITEMAPD_PUBLIC_URL="$PUBLIC" \
  SITEMAPD_API_TOKENS="$TOKEN" SITEMAPD_API_TIMEOUT=1h "${bins[0]}" >"$OUT/load.log" 2>&1 &
loader=$!
wait_up "$PORT0"
target/release/examples/dataset --rows "$ROWS" |
  curl -fsS -X PUT "http://127.0.0.1:$PORT0/api/v1/urls" -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/x-ndjson' --data-binary @- -o /dev/null
kill "$loader"
while kill -0 "$loader" 2>/dev/null; do sleep 0.1; done

# The static copy nginx serves: the same bytes, plain and gzip, of the index and page 1.
start "${bins[0]}" "" "$PORT0"
for f in sitemap.xml sitemap-1.xml; do
  curl -fsS "http://127.0.0.1:$PORT0/$f" -o "$OUT/static/$f"
  curl -fsS -H 'Accept-Encoding: gzip' "http://127.0.0.1:$PORT0/$f" -o "$OUT/static/$f.gz"
done
kill "${pids[0]}"
pids=()
sed -e "s#@RUN@#$OUT_ABS/nginx#g" -e "s#@PORT@#$NGINX_PORT#g" -e "s#@STATIC@#$OUT_ABS/static#g" \
  ../shared/bench/nginx/nginx.conf.in >"$OUT/nginx/nginx.conf"
nginx -c "$OUT_ABS/nginx/nginx.conf" -p "$OUT_ABS/nginx" -e "$OUT_ABS/nginx/nginx-error.log"
wait_port() { for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done; }
wait_port "$NGINX_PORT"

names=(nginx)
ports=("$NGINX_PORT")
server_pids=("$(pgrep -P "$(cat "$OUT/nginx/nginx.pid")" | xargs)")
port=$PORT0
for s in "${servers[@]}"; do
  port=$((port + 1))
  start "${s%%|*}" "${s#*|}" "$port"
  names+=("$s")
  ports+=("$port")
  server_pids+=("${pids[-1]}")
done

# CPU time (user + system, in clock ticks) the server processes `pids` have used so far.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }

# One measure: kind, connections, port, server pids -> requests a second (wrk, SECS seconds) and the server's CPU
# time per request in microseconds: the second is steadier on a busy machine (its load slows every server alike,
# but the CPU a request costs moves less).
measure() {
  local kind=$1 conc=$2 port=$3 pids=$4 path hdr=() threads=2 validator before out
  case $kind in
    index) path=/sitemap.xml ;;
    index-inm | index-ims) path=/sitemap.xml ;;
    page-inm | page-ims) path=/sitemap-1.xml ;;
    plain-inm) path=/sitemap-1.xml ;;
  esac
  [ "$kind" = plain-inm ] || hdr+=(-H 'Accept-Encoding: gzip')
  case $kind in
    *-inm)
      validator=$(curl -fsS -o /dev/null -D - "${hdr[@]}" "http://127.0.0.1:$port$path" | tr -d '\r' |
        awk -F': ' 'tolower($1)=="etag" {print $2}')
      hdr+=(-H "If-None-Match: $validator") ;;
    *-ims)
      validator=$(curl -fsS -o /dev/null -D - "${hdr[@]}" "http://127.0.0.1:$port$path" | tr -d '\r' |
        awk -F': ' 'tolower($1)=="last-modified" {print $2}')
      hdr+=(-H "If-Modified-Since: $validator") ;;
  esac
  [ "$conc" -gt 1 ] || threads=1
  # shellcheck disable=SC2086 # a list of pids
  before=$(ticks $pids)
  out=$(wrk -t "$threads" -c "$conc" -d "${SECS}s" "${hdr[@]}" "http://127.0.0.1:$port$path")
  # shellcheck disable=SC2086
  echo "$out" | awk -v ticks=$(($(ticks $pids) - before)) -v hz="$(getconf CLK_TCK)" '
    /requests in/ {n = $1} /^Requests\/sec/ {rate = $2} /Non-2xx or 3xx/ {bad = 1}
    END {if (bad) print "unexpected status" > "/dev/stderr"; printf "%s %.2f\n", rate, ticks / hz * 1e6 / n}'
}

kinds=(index index-inm index-ims page-inm page-ims plain-inm)
for round in $(seq 1 "$ROUNDS"); do
  log "round $round of $ROUNDS"
  for kind in "${kinds[@]}"; do
    for conc in 1 16; do
      for i in "${!names[@]}"; do
        echo "$kind $conc $i $(measure "$kind" "$conc" "${ports[$i]}" "${server_pids[$i]}")" >>"$OUT/raw.txt"
      done
    done
  done
done
printf '%s\n' "${names[@]}" >"$OUT/names.txt"
python3 - "$OUT" <<'EOF'
import statistics, sys, collections
out = sys.argv[1]
names = open(f"{out}/names.txt").read().splitlines()
runs = collections.defaultdict(list)
cpu = collections.defaultdict(list)
for line in open(f"{out}/raw.txt"):
    kind, conc, i, rate, us = line.split()
    runs[(kind, int(conc), int(i))].append(float(rate))
    cpu[(kind, int(conc), int(i))].append(float(us))
kinds = list(dict.fromkeys(k for k, _, _ in runs))
label = lambda n: n.rstrip("|").replace("|", " ")
for title, data, fmt, ratio in (("req/s", runs, "{:,.0f}", lambda m, n: m / n),
                                 ("server CPU µs a request", cpu, "{:.1f}", lambda m, n: n / m)):
    print(f"\n{title} (median of {len(runs[next(iter(runs))])}); the ratio is nginx's figure over sitemapd's "
          "inverse, so that above 1 is better than nginx\n")
    print("| answer | c | " + " | ".join(label(n) for n in names) + " | " +
          " | ".join(f"{label(n)} / nginx" for n in names[1:]) + " |")
    print("|---" * (2 + 2 * len(names) - 1) + "|")
    for kind in kinds:
        for conc in (1, 16):
            med = [statistics.median(data[(kind, conc, i)]) for i in range(len(names))]
            print(f"| {kind} | {conc} | " + " | ".join(fmt.format(m) for m in med) + " | " +
                  " | ".join(f"{ratio(m, med[0]):.2f}x" for m in med[1:]) + " |")
EOF
