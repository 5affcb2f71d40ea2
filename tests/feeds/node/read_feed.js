// Reads an Atom feed with rss-parser (the pinned one of package.json) and prints what it understood as JSON.
//
// Usage: node read_feed.js FILE. Prints {reader, id, title, updated, self, link, entries, deleted}: each entry's
// id, link (rss-parser's: rel="alternate", else the first), updated as written and as the instant rss-parser's
// Date reads (seconds since the epoch, UTC); and the feed's RFC 6721 tombstones (at:deleted-entry, read as the
// feed's raw elements, rss-parser's `customFields`), each ref and when, in document order. rss-parser reads
// elements by their prefix, not their namespace: sitemapd writes the tombstones' namespace as `at`. Used by
// tests/it/feed_conformance.rs.
'use strict';

const fs = require('node:fs');
const Parser = require('rss-parser');
const { version } = require('rss-parser/package.json');

const instant = (text) => {
  if (typeof text !== 'string' || text === '') return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : Math.floor(ms / 1000);
};

async function main() {
  const xml = fs.readFileSync(process.argv[2], 'utf8');
  const parser = new Parser({
    customFields: {
      feed: ['id', 'updated', ['at:deleted-entry', 'deleted', { keepArray: true }]],
      item: ['updated'],
    },
  });
  const feed = await parser.parseString(xml);
  const out = {
    reader: `rss-parser ${version}`,
    id: feed.id ?? null,
    title: feed.title ?? null,
    updated: feed.updated ?? null,
    updated_s: instant(feed.updated),
    self: feed.feedUrl ?? null,
    link: feed.link ?? null,
    entries: feed.items.map((item) => ({
      id: item.id ?? null,
      link: item.link ?? null,
      title: item.title ?? null,
      updated: item.updated ?? null,
      updated_s: instant(item.updated),
    })),
    deleted: (feed.deleted ?? []).map((d) => ({ ref: d.$?.ref ?? null, when: d.$?.when ?? null, when_s: instant(d.$?.when) })),
  };
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(`rss-parser could not read the feed: ${e.stack || e}\n`);
  process.exit(1);
});
