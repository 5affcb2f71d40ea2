-- Extensions: images, videos, news and hreflang alternates. Nothing already stored changes: every existing row
-- gets NULL and zeros, which render exactly as before (a page with no extension keeps its bytes and ETag).
-- `ext` holds what an entry's page renders of its extensions (images, videos, alternates) as JSON in their rendered
-- form (NULL when it has none); `size` already counts the elements they render to. `news` holds its news the same
-- way, apart, so that the news sitemap reads nothing else.
ALTER TABLE urls ADD COLUMN ext TEXT;
ALTER TABLE urls ADD COLUMN news TEXT;
-- The news publication date (microseconds since the Unix epoch) of an entry with news: the news sitemap reads the
-- window through this index, never a scan of all URLs.
ALTER TABLE urls ADD COLUMN news_us BIGINT;
CREATE INDEX urls_news_us ON urls (news_us, id) WHERE news_us IS NOT NULL;

-- How many of a page's entries use each extension namespace: what its <urlset> declares.
ALTER TABLE pages ADD COLUMN image_urls BIGINT NOT NULL DEFAULT 0 CHECK (image_urls >= 0);
ALTER TABLE pages ADD COLUMN video_urls BIGINT NOT NULL DEFAULT 0 CHECK (video_urls >= 0);
ALTER TABLE pages ADD COLUMN xhtml_urls BIGINT NOT NULL DEFAULT 0 CHECK (xhtml_urls >= 0);

-- The last change to any entry with news (created, updated, deleted, or its news removed), microseconds since the
-- Unix epoch; with the window, it makes the news sitemap's Last-Modified. One row.
CREATE TABLE news_state (
    id          SMALLINT PRIMARY KEY CHECK (id = 1),
    modified_us BIGINT NOT NULL
);
INSERT INTO news_state (id, modified_us) VALUES (1, 0);
