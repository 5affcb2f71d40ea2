#!/usr/bin/env python3
"""Lints sitemapd's sitemap responses with REDbot (HTTP lint) and fails on what crawlers' caches would trip on.

Usage: redbot_check.py BASE_URL OUT_DIR   (run with the Python of the venv REDbot is installed in)
       redbot_check.py --har URL [NAME: VALUE]...   (one check; prints its HAR)

Loads a few URLs through the write API, then checks /sitemap.xml, /sitemap-1.xml (plain and with
Accept-Encoding: gzip) and /sitemap-1.xml.gz, and one read of the API. REDbot runs as its command line does (`redbot -o har URL`), but
from Python, because its command line cannot send request headers. Each HAR goes to OUT_DIR. Every note is
printed; a BAD or WARN note in the categories below fails the run (exit 1). REDbot's own exit code is always 0,
so this script is what decides.
"""

import json
import subprocess
import sys
import urllib.request
from configparser import ConfigParser
from pathlib import Path

import thor
from redbot.formatter import find_formatter
from redbot.resource import HttpResource

# Validators, conditional requests, caching, content negotiation. Connection and general notes are listed only.
FAILING_CATEGORIES = {"VALIDATION", "CACHING", "CONNEG"}
FAILING_LEVELS = {"BAD", "WARN"}

TARGETS = [
    ("index", "/sitemap.xml", []),
    ("index-gzip", "/sitemap.xml", [("Accept-Encoding", "gzip")]),
    ("page", "/sitemap-1.xml", []),
    ("page-gzip", "/sitemap-1.xml", [("Accept-Encoding", "gzip")]),
    ("page-gz-file", "/sitemap-1.xml.gz", []),
    ("api-list", "/api/v1/urls?limit=10", []),
]


def load_urls(base: str) -> None:
    entries = [
        {"loc": f"{base}/", "changefreq": "daily", "priority": 1.0},
        {"loc": f"{base}/about", "lastmod": "2024-05-01T08:20+02:00"},
        {"loc": f"{base}/caf\u00e9?q=1&r=2"},
    ] + [{"loc": f"{base}/item/{i}"} for i in range(50)]
    request = urllib.request.Request(
        f"{base}/api/v1/urls",
        data=json.dumps(entries).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        print(f"loaded: {response.status} {response.read().decode()}")


def redbot_har(url: str, headers: list) -> dict:
    """One REDbot check, as `redbot -o har URL` but with request headers; returns the parsed HAR."""
    config_parser = ConfigParser()
    config_parser.read_dict({"redbot": {"enable_local_access": "True"}})
    config = config_parser["redbot"]
    out = []
    resource = HttpResource(config)
    resource.set_request(url, headers=headers)
    formatter = find_formatter("har", "har", False)(config, resource, out.append, {"tty_out": False})
    formatter.bind_resource(resource)

    @thor.events.on(formatter)
    def formatter_done() -> None:
        thor.stop()

    resource.check()
    thor.run()
    return json.loads("".join(out))


def har_of(url: str, headers: list) -> dict:
    """A fresh process per check: REDbot's event loop is not meant to run twice in one process."""
    args = [sys.executable, __file__, "--har", url] + [f"{k}: {v}" for k, v in headers]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        return {"log": {"_red_error": f"exit {done.returncode}: {done.stderr.strip()}"}}
    return json.loads(done.stdout)


def notes(messages: list):
    for note in messages:
        yield note
        yield from notes(note.get("subnotes", []))


def main() -> int:
    base, out_dir = sys.argv[1].rstrip("/"), Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    load_urls(base)
    failures = []
    for name, path, headers in TARGETS:
        har = har_of(base + path, headers)
        (out_dir / f"{name}.har").write_text(json.dumps(har, indent=2))
        shown = " ".join(f"{k}: {v}" for k, v in headers)
        print(f"\n--- {path} {shown}".rstrip())
        entries = har["log"].get("entries", [])
        if "_red_error" in har["log"] or not entries:
            failures.append(f"{path} {shown}: REDbot could not check it: {har['log'].get('_red_error')}")
            continue
        status = entries[0]["response"]["status"]
        print(f"status {status}")
        if status != 200:
            failures.append(f"{path} {shown}: status {status}")
        for note in notes(entries[0]["_red_messages"]):
            line = f"[{note['level']}] {note['category']}: {note['summary']}"
            print("  " + line)
            if note["level"] in FAILING_LEVELS and note["category"] in FAILING_CATEGORIES:
                failures.append(f"{path} {shown}: {line}")
    if failures:
        print("\nREDbot found problems:", *failures, sep="\n  ", file=sys.stderr)
        return 1
    print(f"\nREDbot: no BAD or WARN note in {', '.join(sorted(FAILING_CATEGORIES))}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--har":
        pairs = [h.split(": ", 1) for h in sys.argv[3:]]
        print(json.dumps(redbot_har(sys.argv[2], [(k, v) for k, v in pairs])))
        sys.exit(0)
    sys.exit(main())
