"""Reads an Atom feed with feedparser (the pinned one of requirements.txt) and prints what it understood as JSON.

Usage: read_feed.py FILE. Prints {"reader", "bozo", "version", "id", "title", "updated", "links", "entries",
"deleted"}: each entry's id, link (the one feedparser picks: rel="alternate"), updated as written and as the UTC
instant feedparser parsed (seconds since the epoch). feedparser has no model of RFC 6721 tombstones: it keeps the
attributes of the last at:deleted-entry of a feed only (as feed["at_deleted-entry"]), so "deleted" is null, and
the tests check only that no tombstone became an entry. Used by tests/it/feed_conformance.rs.
"""

import calendar
import json
import sys

import feedparser


def instant(parsed):
    return None if parsed is None else calendar.timegm(parsed)


def main():
    with open(sys.argv[1], "rb") as f:
        d = feedparser.parse(f.read())
    feed = d.feed
    out = {
        "reader": "feedparser " + feedparser.__version__,
        "bozo": bool(d.bozo),
        "bozo_exception": str(d.get("bozo_exception")) if d.bozo else None,
        "version": d.version,
        "id": feed.get("id"),
        "title": feed.get("title"),
        "updated": feed.get("updated"),
        "updated_s": instant(feed.get("updated_parsed")),
        "links": [{"rel": link.get("rel"), "href": link.get("href")} for link in feed.get("links", [])],
        "entries": [
            {
                "id": e.get("id"),
                "link": e.get("link"),
                "title": e.get("title"),
                "updated": e.get("updated"),
                "updated_s": instant(e.get("updated_parsed")),
            }
            for e in d.entries
        ],
        "deleted": None,
    }
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
