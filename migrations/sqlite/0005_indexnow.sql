-- IndexNow change notification: the outbox. A write that creates, updates or deletes entries of a site that
-- notifies records their locs here in its own transaction, so a crash between the commit and the send loses
-- nothing. One row per loc: a loc changed again before it is sent stays one row (`seq` moves on).
-- Nothing already stored changes: no page's bytes or ETag.
CREATE TABLE indexnow_outbox (
    loc         TEXT PRIMARY KEY,
    -- The site whose key and host the loc is sent with (sites: migration 0004; 1 is the default site).
    site_id     INTEGER NOT NULL DEFAULT 1,
    -- +1 at every change of the loc while queued: a send covers the row only if it has not moved since its claim.
    seq         INTEGER NOT NULL DEFAULT 0,
    -- Failed sends since the loc was last changed (429, 5xx, network errors); at the limit it is dropped.
    attempts    INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- When the row may next be claimed, microseconds since the Unix epoch: 0 when queued, the end of the lease
    -- while the sender holds it, the retry time after a failed send.
    due_us      INTEGER NOT NULL DEFAULT 0,
    -- The sender's claim that holds (or last held) the row, and the row's seq when it was claimed.
    claim       INTEGER,
    claimed_seq INTEGER
) STRICT, WITHOUT ROWID;
-- The sender takes a site's due rows in due order.
CREATE INDEX indexnow_outbox_due ON indexnow_outbox (site_id, due_us);
