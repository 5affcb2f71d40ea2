-- hreflang clusters (issue 40): the graph of the alternates entries declare, kept so that a write finds the
-- cluster of its locs by index and renders each member from the whole cluster (`hreflang` policy `complete`), and
-- so that the problems of each cluster can be listed. Additive: nothing stored changes here; the clusters are
-- built at the first start (sites.hreflang NULL), and under the default policy (`as_sent`) that changes no record
-- and no page either. Hrefs and keys compare byte for byte (the "C" collation): a cluster's key is its smallest
-- href in byte order, on both backends.

-- One row per URL in a cluster: a stored loc that declares alternates, or any href a declaration names.
CREATE TABLE hreflang_nodes (
    href     TEXT COLLATE "C" PRIMARY KEY,
    -- The cluster's key: its smallest member href.
    cluster  TEXT COLLATE "C" NOT NULL,
    -- The site of its stored record; NULL when no record is stored for it.
    site_id  BIGINT,
    -- Its declaration: the JSON array of the alternates it was sent with, when it is stored and declares.
    declared TEXT
);
CREATE INDEX hreflang_nodes_cluster ON hreflang_nodes (cluster);
CREATE INDEX hreflang_nodes_site ON hreflang_nodes (site_id, cluster) WHERE site_id IS NOT NULL;

-- The problems of each cluster, listed by the site of the stored member they concern; the primary key is the
-- keyset order of the API.
CREATE TABLE hreflang_problems (
    site_id  BIGINT NOT NULL,
    href     TEXT COLLATE "C" NOT NULL,
    kind     TEXT COLLATE "C" NOT NULL,
    hreflang TEXT COLLATE "C" NOT NULL,
    cluster  TEXT COLLATE "C" NOT NULL,
    message  TEXT NOT NULL,
    PRIMARY KEY (site_id, href, kind, hreflang)
);
CREATE INDEX hreflang_problems_cluster ON hreflang_problems (cluster);

-- The policy the stored rendering of a site's records follows (`as_sent`, `complete`); NULL: its clusters are
-- not built yet (a new site, or a database written before this migration).
ALTER TABLE sites ADD COLUMN hreflang TEXT;
