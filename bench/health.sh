#!/usr/bin/env bash
# Issue 28's run: URL health against a local site of N pages with a mix of problems (bench/health_site.py), on the
# embedded SQLite database, policy exclude. It loads the URLs through the write API, waits until the checker has
# checked every one, and writes what the API, the metrics and the site said, the request rate the site saw, and
# the checker's memory (the process's peak RSS, VmHWM). Then it changes nothing and lets one more pass run
# conditionally. About 2 minutes for 3,000 pages at the rate given.
#
#   bench/health.sh [N] [RATE]     # default 3000 pages, 50 requests a second; bench/results/health-<stamp>/
set -euo pipefail
cd "$(dirname "$0")/.."
readonly N=${1:-3000} RATE=${2:-50}
readonly SITE_PORT=18931 PORT=18932
readonly BIN=target/release/sitemapd
OUT=${BENCH_OUT:-bench/results/health-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
readonly OUT
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
say() { echo "$*" | tee -a "$OUT/health.txt"; }
cleanup() {
  for f in "$OUT"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  return 0
}
trap cleanup EXIT

cargo build --release --quiet
python3 bench/health_site.py "$SITE_PORT" "$N" >"$OUT/site.log" 2>&1 &
echo $! >"$OUT/site.pid"
readonly SITE="http://127.0.0.1:$SITE_PORT"
for _ in $(seq 1 100); do curl -fs -o /dev/null "$SITE/stats" && break; sleep 0.1; done

env DATABASE_URL="sqlite://$OUT/sitemapd.db" SITEMAPD_BIND="127.0.0.1:$PORT" SITEMAPD_PUBLIC_URL="$SITE/" \
  SITEMAPD_HEALTH_CHECK=exclude SITEMAPD_HEALTH_RATE="$RATE" SITEMAPD_HEALTH_CONCURRENCY=4 \
  SITEMAPD_TEST_TUNING=health_poll=200ms SITEMAPD_CRAWLER_TELEMETRY=false "$BIN" >"$OUT/sitemapd.log" 2>&1 &
echo $! >"$OUT/sitemapd.pid"
readonly API="http://127.0.0.1:$PORT"
for _ in $(seq 1 300); do curl -fs -o /dev/null "$API/healthz" && break; sleep 0.1; done
rss() { awk '/^(VmRSS|VmHWM)/ { printf "%s %d MB  ", $1, $2 / 1024 }' "/proc/$(cat "$OUT/sitemapd.pid")/status"; }
say "sitemapd before the load: $(rss)"

python3 - "$SITE" "$N" >"$OUT/urls.ndjson" <<'PY'
import json, sys
site, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    path = f"/p/{i}/private" if i % 83 == 9 else f"/p/{i}"
    print(json.dumps({"loc": site + path}))
PY
start=$(date +%s.%N)
curl -fsS -X PUT -H 'Content-Type: application/x-ndjson' --data-binary "@$OUT/urls.ndjson" "$API/api/v1/urls" >"$OUT/load.json"
say "loaded: $(cat "$OUT/load.json")"
curl -fsS "$API/sitemap-1.xml" -o "$OUT/page1-before.xml"
curl -fsS "$API/sitemap.xml" -o "$OUT/index-before.xml"

while :; do
  curl -fsS "$API/api/v1/health" >"$OUT/health.json"
  left=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sites"][0]; print(s["tracked"] - s["checked_urls"] + s["backlog"])' "$OUT/health.json")
  [ "$left" = 0 ] && break
  sleep 1
done
end=$(date +%s.%N)
say "checked $N URLs in $(python3 -c "print(round($end - $start, 1))") s; sitemapd after: $(rss)"
# The first answers of 503 are retried after the first backoff (1 min, +-10 %): wait for them (3 min at most).
for _ in $(seq 1 180); do
  curl -fsS "$API/api/v1/health" >"$OUT/health.json"
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sites"][0]; sys.exit(s["transient"] > 0)' \
    "$OUT/health.json" && break
  sleep 1
done
say "transient failures retried: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sites"][0]["transient"])' "$OUT/health.json") left"
say ""
say "GET /api/v1/health:"
python3 -m json.tool "$OUT/health.json" | tee -a "$OUT/health.txt"
say ""
say "expected by the site's rules:"
python3 - "$N" <<'PY' | tee -a "$OUT/health.txt"
import sys
n = int(sys.argv[1])
k = {"not_found": 0, "gone": 0, "redirect": 0, "disallowed": 0, "noindex": 0, "canonical": 0, "transient_then_ok": 0}
for i in range(1, n + 1):
    if i % 83 == 9: k["disallowed"] += 1; continue
    if i % 50 == 0: k["not_found"] += 1
    elif i % 97 == 0: k["gone"] += 1
    elif i % 41 == 1: k["redirect"] += 1
    else:
        if i % 101 == 11: k["transient_then_ok"] += 1
        if i % 61 == 7 or i % 47 == 3: k["noindex"] += 1
        if i % 71 == 5: k["canonical"] += 1
print(k)
PY
say ""
say "/metrics (health):"
curl -fsS "$API/metrics" | grep -E '^sitemapd_health' | tee -a "$OUT/health.txt"
say ""
say "the site saw:"
curl -fsS "$SITE/stats" >"$OUT/stats.json"
python3 - "$OUT/stats.json" <<'PY' | tee -a "$OUT/health.txt"
import json, sys
s = json.load(open(sys.argv[1]))
secs = sorted(s["per_second"].items())
rates = [c for _, c in secs]
print(f"requests {s['requests']}, by status {s['by_status']}, most in flight at once {s['max_in_flight']}")
print(f"requests a second: max {max(rates)}, median {sorted(rates)[len(rates) // 2]} over {len(rates)} s")
print(f"user agents: {list(s['agents'])}")
PY
curl -fsS "$API/sitemap-1.xml" -o "$OUT/page1-after.xml"
say "page 1: $(grep -c '<loc>' "$OUT/page1-before.xml") entries before the checks, $(grep -c '<loc>' "$OUT/page1-after.xml") after (policy exclude)"
curl -fsS "$API/view/default/" -o /dev/null && say "view: $API/view/default/ (screenshot: $OUT/view.png)"
if command -v chromium >/dev/null; then
  chromium --headless --no-sandbox --hide-scrollbars --window-size=1280,2000 --screenshot="$OUT/view.png" \
    "$API/view/default/" >/dev/null 2>&1 || true
fi
say "sitemapd at the end: $(rss)"
