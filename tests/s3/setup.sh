#!/usr/bin/env bash
# tests/s3/setup.sh: installs the S3 server that tests/it/publish.rs publishes to, at its pinned version: moto's
# server mode (tests/s3/requirements.txt) into the venv target/s3-venv. The tests start
# `target/s3-venv/bin/moto_server` themselves, on a free loopback port. Then touches build.rs, so that its probe
# sees it at the next build (without it, those tests show as ignored, with the reason). Needs python3 (with its
# venv module); reaches PyPI. Run from anywhere; .ci/run runs it too.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=$root/target/s3-venv

if [ ! -x "$venv/bin/pip" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/tests/s3/requirements.txt"
"$venv/bin/python" -c 'import moto; print("moto", moto.__version__, "in", __import__("sys").prefix)'
[ -x "$venv/bin/moto_server" ] || { echo "tests/s3/setup.sh: no $venv/bin/moto_server after the install" >&2; exit 1; }

touch "$root/build.rs"
