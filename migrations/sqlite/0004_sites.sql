-- Several sites (hosts) in one deployment. Each site has its own page sequence (pages are numbered from 1 per
-- site), index, news sitemap and news stamp. Everything already stored belongs to site 1, named 'default': its
-- pages keep their numbers and every column, so their bytes, ETags and Last-Modified stay as they were.
-- Configured sites are matched to these rows by name at start (new names get new rows).
--
-- SQLite cannot change a primary key or a foreign key in place: pages, urls and news_state are rebuilt (renamed,
-- created anew, copied, dropped; foreign keys follow a rename). urls keep their ids, and its AUTOINCREMENT
-- counter is carried over, so no id is ever reused.
CREATE TABLE sites (
    id   INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE
) STRICT;
INSERT INTO sites (id, name) VALUES (1, 'default');

ALTER TABLE pages RENAME TO pages_0003;
ALTER TABLE urls RENAME TO urls_0003;
ALTER TABLE news_state RENAME TO news_state_0003;

-- Pages are numbered from 1 per site and never deleted: an emptied page keeps its number and is refilled first.
CREATE TABLE pages (
    site_id     INTEGER NOT NULL REFERENCES sites (id),
    id          INTEGER NOT NULL CHECK (id >= 1),
    url_count   INTEGER NOT NULL CHECK (url_count >= 0),
    byte_size   INTEGER NOT NULL CHECK (byte_size >= 0),
    version     INTEGER NOT NULL,
    modified_us INTEGER NOT NULL,
    image_urls  INTEGER NOT NULL DEFAULT 0 CHECK (image_urls >= 0),
    video_urls  INTEGER NOT NULL DEFAULT 0 CHECK (video_urls >= 0),
    xhtml_urls  INTEGER NOT NULL DEFAULT 0 CHECK (xhtml_urls >= 0),
    PRIMARY KEY (site_id, id)
) STRICT;
INSERT INTO pages (site_id, id, url_count, byte_size, version, modified_us, image_urls, video_urls, xhtml_urls)
    SELECT 1, id, url_count, byte_size, version, modified_us, image_urls, video_urls, xhtml_urls FROM pages_0003;

-- A loc stays unique across sites: it lies under exactly one site's public URL.
CREATE TABLE urls (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id    INTEGER NOT NULL,
    loc        TEXT NOT NULL UNIQUE,
    page_id    INTEGER NOT NULL,
    lastmod    TEXT,
    changefreq TEXT,
    priority   INTEGER CHECK (priority BETWEEN 0 AND 1000000),
    size       INTEGER NOT NULL CHECK (size > 0),
    ext        TEXT,
    news       TEXT,
    news_us    INTEGER,
    FOREIGN KEY (site_id, page_id) REFERENCES pages (site_id, id)
) STRICT;
INSERT INTO urls (id, site_id, loc, page_id, lastmod, changefreq, priority, size, ext, news, news_us)
    SELECT id, 1, loc, page_id, lastmod, changefreq, priority, size, ext, news, news_us FROM urls_0003;
-- The counter as it was (ids of deleted records past the largest stored one are not reused).
UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'urls_0003'), 0))
    WHERE name = 'urls';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'urls', seq FROM sqlite_sequence WHERE name = 'urls_0003'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'urls');

-- The news stamp, per site.
CREATE TABLE news_state (
    site_id     INTEGER PRIMARY KEY REFERENCES sites (id),
    modified_us INTEGER NOT NULL
) STRICT;
INSERT INTO news_state (site_id, modified_us) SELECT id, modified_us FROM news_state_0003;

DROP TABLE urls_0003;
DROP TABLE pages_0003;
DROP TABLE news_state_0003;

-- A page streams in id order from this index: keyset, never OFFSET.
CREATE INDEX urls_site_page_id ON urls (site_id, page_id, id);
-- A site's news window.
CREATE INDEX urls_news_us ON urls (site_id, news_us, id) WHERE news_us IS NOT NULL;
