-- The removed-URLs sitemap (`/sitemap-removed.xml`, on with `removed_days`): a deleted record's loc is kept as a
-- tombstone with its deletion time, listed newest first within the retention window, purged after it. A loc stored
-- again loses its tombstone in the same transaction. Nothing already stored changes: no page's bytes, ETag or
-- Last-Modified, and the index is what it was while no tombstone is listed.
CREATE TABLE removed (
    site_id    BIGINT NOT NULL REFERENCES sites (id),
    -- Bytewise, as `urls.loc` (migration 0009).
    loc        TEXT COLLATE "C" NOT NULL,
    -- When the record was deleted: the write's time, microseconds since the Unix epoch.
    removed_us BIGINT NOT NULL,
    PRIMARY KEY (site_id, loc)
);
-- The sitemap reads a site's newest tombstones by a backward scan of this index (with loc: the ties' order, and no
-- table read); the purge its oldest, forwards.
CREATE INDEX removed_site_time ON removed (site_id, removed_us, loc);

-- A site's removed-URLs stamp: moved by every write that adds or drops a tombstone, and by the purge (to the moment
-- the last purged tombstone left the window). It moves the site's change counter (migration 0006), so that replicas
-- see the change. A site's row is inserted by its first change.
CREATE TABLE removed_state (
    site_id     BIGINT PRIMARY KEY REFERENCES sites (id),
    modified_us BIGINT NOT NULL
);
CREATE TRIGGER removed_state_count_change AFTER INSERT OR UPDATE ON removed_state
    FOR EACH ROW EXECUTE FUNCTION sites_count_change();
