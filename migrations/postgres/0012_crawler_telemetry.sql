-- Crawler telemetry: which crawler fetched which sitemap of a site, and which version of each page it read. Rows are
-- written in batches by every process that serves (replicas flush into one database) and merged by upserts: the
-- earliest first time, the latest last time, the last answer from the later side, counts added. Tables only: no
-- trigger, so telemetry never moves a site's change counter, and nothing already stored changes.
CREATE TABLE crawler_fetches (
    site_id          BIGINT NOT NULL REFERENCES sites (id),
    -- The file fetched, by its canonical name without `.gz` (`sitemap.xml`, `sitemap-3.xml`, `sitemap-news.xml`).
    resource         TEXT COLLATE "C" NOT NULL,
    -- The crawler's stable name (`Crawler::name`) and how far its claim held (`verified`, `claimed`, `unknown`).
    crawler          TEXT COLLATE "C" NOT NULL,
    trust            TEXT COLLATE "C" NOT NULL,
    -- The page the resource is a form of, if any.
    page_id          BIGINT,
    -- The first and last fetch, microseconds since the Unix epoch.
    first_us         BIGINT NOT NULL,
    last_us          BIGINT NOT NULL,
    -- The last answer: its status (200 or 304), whether its request was conditional, the ETag it carried.
    last_status      INTEGER NOT NULL,
    last_conditional BOOLEAN NOT NULL,
    last_etag        TEXT NOT NULL,
    -- Fetches (200 and 304), and of them 304s.
    fetches          BIGINT NOT NULL,
    not_modified     BIGINT NOT NULL,
    PRIMARY KEY (site_id, resource, crawler, trust)
);

-- The versions of each page each crawler read (verified reads only): the page's `modified_us` as served, and when
-- that version was first read. A version's first read closes the lag of the change that made it.
CREATE TABLE crawler_reads (
    site_id    BIGINT NOT NULL REFERENCES sites (id),
    page_id    BIGINT NOT NULL,
    crawler    TEXT COLLATE "C" NOT NULL,
    version_us BIGINT NOT NULL,
    first_us   BIGINT NOT NULL,
    PRIMARY KEY (site_id, page_id, crawler, version_us)
);
-- The lags of a recent window, newest first: a backward scan of this index, which holds every column read (no
-- table read).
CREATE INDEX crawler_reads_site_first ON crawler_reads (site_id, first_us, crawler, version_us);
