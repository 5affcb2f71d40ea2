-- A change counter per site, moved on by the database itself whenever a write changes the site's page table or
-- its news stamp (whichever version of sitemapd, or whatever else, writes them). A replica compares it with the
-- value it last read and reads the page table (O(pages)) again only when it moved, so that its periodic refresh
-- costs one primary-key read when nothing changed. Nothing stored changes: no page's bytes, ETag or
-- Last-Modified.
ALTER TABLE sites ADD COLUMN changes INTEGER NOT NULL DEFAULT 0;

-- Pages are never deleted (an emptied page keeps its row); the news stamp is updated, never inserted by a write.
CREATE TRIGGER pages_insert_count_change AFTER INSERT ON pages
BEGIN
    UPDATE sites SET changes = changes + 1 WHERE id = NEW.site_id;
END;
CREATE TRIGGER pages_update_count_change AFTER UPDATE ON pages
BEGIN
    UPDATE sites SET changes = changes + 1 WHERE id = NEW.site_id;
END;
CREATE TRIGGER news_state_count_change AFTER UPDATE ON news_state
BEGIN
    UPDATE sites SET changes = changes + 1 WHERE id = NEW.site_id;
END;
