#!/usr/bin/env bash
# tests/feeds/setup.sh: installs the real feed readers that tests/it/feed_conformance.rs runs, at their pinned
# versions: Python's feedparser (tests/feeds/python/requirements.txt) into the venv target/feeds-venv, and the
# npm package rss-parser (tests/feeds/node/package.json, package-lock.json) into tests/feeds/node/node_modules
# (ignored by git). Then touches build.rs, so that its probes see them at the next build (without them, those
# tests show as ignored, with the reason). Needs python3 (with its venv module) and npm; reaches PyPI and the npm
# registry. Run from anywhere; .ci/run runs it too. The schema checks need trang and xmllint instead (Debian:
# apt-get install trang libxml2-utils).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=$root/target/feeds-venv

if [ ! -x "$venv/bin/pip" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/tests/feeds/python/requirements.txt"
"$venv/bin/python" -c 'import feedparser; print("feedparser", feedparser.__version__, "in", __import__("sys").prefix)'

(cd "$root/tests/feeds/node" && npm ci --no-audit --no-fund --loglevel=error)
node -e 'const p = require(process.argv[1] + "/package.json"); console.log(p.name, p.version)' \
  "$root/tests/feeds/node/node_modules/rss-parser"

touch "$root/build.rs"
