#!/usr/bin/env bash
# The container's runtime stage, checked without a Docker engine: a Debian bookworm root file system made by
# debootstrap (minbase: what debian:bookworm-slim is made of), the user, group and /data made by the Dockerfile's
# own RUN line (read from the Dockerfile, so the two cannot drift), the release binary copied to where the
# Dockerfile copies it. Then, under chroot as uid 10001 in /data, as the image's USER and WORKDIR say:
# `sitemapd serve` starts on the SQLite default, creates /data/sitemapd.db, answers a write and the index, and
# `sitemapd healthcheck` exits 0; SIGTERM stops it with exit 0.
#
#   bash .ci/container_rootfs.sh target/release/sitemapd
#
# Root only (debootstrap, chroot). The bookworm file system is kept in /var/cache/sitemapd-ci between runs.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly BIN=${1:?usage: container_rootfs.sh PATH-TO-RELEASE-BINARY}
readonly CACHE_DIR=/var/cache/sitemapd-ci
readonly CACHE="$CACHE_DIR/bookworm-minbase.tar.gz"
readonly TOKEN=ci-container-token
readonly UID_GID=10001:10001

die() {
  printf 'container_rootfs: ERROR: %s\n' "$*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || die "run as root (debootstrap and chroot)"
[ -x "$BIN" ] || die "$BIN is not an executable"

work=$(mktemp -d)
root="$work/rootfs"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  mountpoint -q "$root/proc" && umount -l "$root/proc" || true
  rm -rf "$work"
}
trap cleanup EXIT

# The first mirror of the machine's apt sources (deb822 or one-line form), else Debian's own.
mirror() {
  local uri
  uri=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1)
  [ -z "$uri" ] && uri=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  echo "${uri:-http://deb.debian.org/debian}"
}

if [ ! -s "$CACHE" ]; then
  command -v debootstrap >/dev/null || {
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
  }
  echo "debootstrap --variant=minbase bookworm from $(mirror)"
  debootstrap --variant=minbase bookworm "$work/build" "$(mirror)" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  mkdir -p "$CACHE_DIR"
  tar -C "$work/build" -czf "$CACHE.tmp" . && mv "$CACHE.tmp" "$CACHE"
  rm -rf "$work/build"
fi
mkdir -p "$root"
tar -C "$root" -xzf "$CACHE"

# The runtime stage's RUN line, as the Dockerfile writes it (continuation lines joined).
run_line=$(awk '
  /^FROM .* AS runtime/ { stage = 1; next }
  stage && /^RUN / { grab = 1; sub(/^RUN /, "") }
  grab { line = line " " $0; if ($0 !~ /\\$/) { print line; exit } }
' Dockerfile | sed 's/\\$//; s/ \\ / /g')
[ -n "$run_line" ] || die "no RUN line in the Dockerfile's runtime stage"
grep -q 'COPY --from=builder /app/target/release/sitemapd /usr/local/bin/sitemapd' Dockerfile ||
  die "the Dockerfile no longer copies the binary to /usr/local/bin/sitemapd: update this script"
grep -qx "USER $UID_GID" Dockerfile || die "the Dockerfile's USER is not $UID_GID: update this script"
grep -qx 'WORKDIR /data' Dockerfile || die "the Dockerfile's WORKDIR is not /data: update this script"
echo "RUN$run_line"
chroot "$root" /bin/sh -ec "$run_line"
install -m 0755 "$BIN" "$root/usr/local/bin/sitemapd"
mount -t proc proc "$root/proc"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# As the image runs it: uid and gid 10001 in /data, an environment of the image's and the run's variables only.
in_image=(chroot --userspec="$UID_GID" "$root" /usr/bin/env -i HOME=/data SITEMAPD_BIND="127.0.0.1:$port"
  SITEMAPD_API_TOKENS="$TOKEN" SITEMAPD_PUBLIC_URL="http://127.0.0.1:$port" /bin/sh -c)
"${in_image[@]}" 'cd /data && exec /usr/local/bin/sitemapd serve' >"$work/serve.log" 2>&1 &
server_pid=$!
for ((i = 0; i < 100; i++)); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; die "sitemapd serve exited in the image"; }
  sleep 0.1
done
"${in_image[@]}" 'cd /data && exec /usr/local/bin/sitemapd healthcheck' || { cat "$work/serve.log" >&2; die "sitemapd healthcheck failed"; }
echo "sitemapd healthcheck: exit 0"
curl -fsS -X PUT "http://127.0.0.1:$port/api/v1/urls" -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' --data "[{\"loc\":\"http://127.0.0.1:$port/a\"}]" ||
  { cat "$work/serve.log" >&2; die "a write failed in the image"; }
echo
curl -fsS "http://127.0.0.1:$port/sitemap.xml" | grep -q '<sitemapindex' || die "no index from the image"
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || die "/readyz is not 200 in the image"
owner=$(stat -c %u:%g "$root/data/sitemapd.db") || die "no /data/sitemapd.db"
[ "$owner" = "$UID_GID" ] || die "/data/sitemapd.db is owned by $owner, not $UID_GID"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[ "$rc" = 0 ] || { cat "$work/serve.log" >&2; die "sitemapd exited $rc on SIGTERM"; }
echo "the runtime stage: serve on /data as $UID_GID answered, healthcheck exit 0, SIGTERM exit 0"
