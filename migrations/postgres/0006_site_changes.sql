-- A change counter per site, moved on by the database itself whenever a write changes the site's page table or
-- its news stamp (whichever version of sitemapd, or whatever else, writes them). A replica compares it with the
-- value it last read and reads the page table (O(pages)) again only when it moved, so that its periodic refresh
-- costs one primary-key read when nothing changed. Nothing stored changes: no page's bytes, ETag or
-- Last-Modified.
ALTER TABLE sites ADD COLUMN changes BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION sites_count_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sites SET changes = changes + 1 WHERE id = NEW.site_id;
    RETURN NULL;
END
$$;
-- Pages are never deleted (an emptied page keeps its row); the news stamp is updated, never inserted by a write.
CREATE TRIGGER pages_count_change AFTER INSERT OR UPDATE ON pages
    FOR EACH ROW EXECUTE FUNCTION sites_count_change();
CREATE TRIGGER news_state_count_change AFTER UPDATE ON news_state
    FOR EACH ROW EXECUTE FUNCTION sites_count_change();
