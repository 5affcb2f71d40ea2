-- Atom feeds (`/feed.atom`, `/feed-<section>.atom`): the newest records of a site or a section by the time their
-- change was stored (`urls.changed_us`, migration 0015), merged with the newest tombstones. Additive: no page, ETag
-- or Last-Modified changes.

-- A section's newest records, newest first, by one forward scan of its range (20 = `page::SECTION_SHIFT`: a
-- page's id holds its section in its high bits); the site's feed merges the first rows of each section's range.
-- Records not written since migration 0015 (no `changed_us`) are in no feed, nor in the index.
CREATE INDEX urls_feed ON urls (site_id, (page_id >> 20), changed_us DESC, id DESC) WHERE changed_us IS NOT NULL;

-- The section a tombstone's record was in when it was deleted (0: the default section). NULL for the tombstones
-- kept before: those are in the site's feed only.
ALTER TABLE removed ADD COLUMN section_id INTEGER;
-- A section's newest tombstones by a backward scan of its range (the site's feed reads `removed_site_time`): a
-- section with few tombstones in a site with many reads no more than its own.
CREATE INDEX removed_section_time ON removed (site_id, section_id, removed_us, loc);
