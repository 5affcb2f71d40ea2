-- WebSub publishing: what each hub was last told of each feed. What is owed is derived, not queued: a feed whose
-- current digest differs from the one delivered to a hub is owed to that hub, so nothing is written by the write
-- path and a notification owed survives any crash (it is recomputed from the feed). One row per site, feed and hub,
-- added the first time the feed is owed to the hub. Nothing already stored changes: no page's bytes or ETag.
CREATE TABLE websub (
    site_id      INTEGER NOT NULL,
    -- The feed's path under the site's public URL (`feed.atom`, `feed-<section>.atom`).
    feed         TEXT NOT NULL,
    -- The hub's URL as configured, less a user name and password (those are sent to the hub, never stored).
    hub          TEXT NOT NULL,
    -- The feed's digest (its ETag's) when the hub last accepted a notification of it; NULL: never.
    delivered    TEXT,
    delivered_us INTEGER,
    -- Failed notifications since the last one accepted: what the retry delay grows from.
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- When the row may next be claimed, microseconds since the Unix epoch (the process's clock): the end of the
    -- debounce interval after a delivery, the retry time after a failure, the end of the lease while a publisher
    -- holds it.
    due_us       INTEGER NOT NULL DEFAULT 0,
    -- The publisher's claim that holds (or last held) the row.
    claim        INTEGER,
    PRIMARY KEY (site_id, feed, hub)
) STRICT, WITHOUT ROWID;
