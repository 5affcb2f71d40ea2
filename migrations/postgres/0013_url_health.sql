-- URL health: each checked URL's last finding and its place in the checker's queue, the walk that queues the URLs
-- stored before checking was on, the per-host pacing that replicas share, and the exclusion of a URL from its page
-- (policy `exclude`). Additive: new columns default to "not excluded", so every stored page keeps its bytes, ETag
-- and Last-Modified.

-- A record left out of its page: its page's stream skips it; the view and export still list it.
ALTER TABLE urls ADD COLUMN excluded BOOLEAN NOT NULL DEFAULT false;
-- The excluded records of a site's pages: the recount of a page's `excluded` and the restore read only these.
CREATE INDEX urls_excluded ON urls (site_id, page_id) WHERE excluded;

-- How many of the page's entries are excluded. A page whose entries are all excluded is not listed (an empty
-- <urlset> is invalid). Not part of the page's validators: an exclusion moves its version and time.
ALTER TABLE pages ADD COLUMN excluded BIGINT NOT NULL DEFAULT 0 CHECK (excluded >= 0);

-- One row per (site, loc) checked or to be checked.
CREATE TABLE url_checks (
    site_id          BIGINT NOT NULL REFERENCES sites (id),
    loc              TEXT COLLATE "C" NOT NULL,
    -- The record's id when last claimed: the problem listing's keyset (record id order).
    url_id           BIGINT,
    -- When the row may next be claimed, microseconds since the Unix epoch (the database's clock): 0 when queued by
    -- a write, the end of the lease while a checker holds it, the next check's time after a settle.
    due_us           BIGINT NOT NULL DEFAULT 0,
    -- The checker's claim that holds (or last held) the row; +1 at every write of the loc, and its value when
    -- claimed: a loc written while checked is checked again at once.
    claim            BIGINT,
    seq              BIGINT NOT NULL DEFAULT 0,
    claimed_seq      BIGINT,
    -- The last check's end (definite or transient); NULL: queued, never checked.
    checked_us       BIGINT,
    -- The last definite answer: its status, problems (bits of `Kind`), redirect target, canonical URL, where
    -- noindex was found, and since when the URL has had problems without a healthy check between.
    status           INTEGER,
    problems         INTEGER NOT NULL DEFAULT 0,
    location         TEXT,
    canonical        TEXT,
    noindex_by       TEXT,
    problem_since_us BIGINT,
    -- The last attempt's transient failure (name and detail), and consecutive transient failures.
    transient        TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- The last definite answer's validators, for a conditional check.
    etag             TEXT,
    last_modified    TEXT,
    PRIMARY KEY (site_id, loc)
);
-- A checker takes a site's due rows in due order.
CREATE INDEX url_checks_due ON url_checks (site_id, due_us);
-- The problem listing and the summary read only the rows with a problem or a transient failure.
CREATE INDEX url_checks_problems ON url_checks (site_id, url_id) WHERE problems <> 0 OR transient IS NOT NULL;

-- The walk of a site's stored records that queues them for a first check: the last record id queued.
CREATE TABLE health_sites (
    site_id   BIGINT PRIMARY KEY REFERENCES sites (id),
    seeded_id BIGINT NOT NULL DEFAULT 0
);

-- The next request slot of each checked host (`scheme://host:port`), shared by replicas.
CREATE TABLE health_hosts (
    host    TEXT COLLATE "C" PRIMARY KEY,
    next_us BIGINT NOT NULL DEFAULT 0
);
