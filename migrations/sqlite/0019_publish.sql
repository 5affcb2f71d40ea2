-- Publishing to object storage (issue 41): per target (an object store's URL, as configured), the lease that keeps
-- one publisher at a time on it, how its passes ended, and each object it holds with the version last uploaded.
-- A pass uploads a file only when the service's ETag for it differs from that version, records it after the
-- upload, and marks an object that no index names before it deletes it. Additive: nothing stored changes here.
-- SQLite compares text byte for byte: objects are listed in byte order.

-- One row per target, added by its first claim.
CREATE TABLE publish_targets (
    -- The target's URL as configured (`s3://bucket/prefix/`, `file:///srv/www/`): it holds no credentials.
    target           TEXT NOT NULL PRIMARY KEY,
    -- The site it publishes: set by the first claim, never changed.
    site_id          INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    -- The claim that holds (or last held) the target; NULL once released.
    claim_id         INTEGER,
    -- When the holder's lease ends, microseconds since the Unix epoch (the process's clock); a claim may take the
    -- target from then on. 0: released.
    lease_until_us   INTEGER NOT NULL DEFAULT 0,
    -- When the last complete pass, and the last pass of any outcome, ended; NULL: never.
    last_complete_us INTEGER,
    last_attempt_us  INTEGER,
    -- Failed passes since the last complete one, and the last one's error (at most 1,000 characters).
    failures         INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_error       TEXT
) STRICT, WITHOUT ROWID;

-- The objects a target holds, as recorded after each upload.
CREATE TABLE publish_objects (
    target        TEXT NOT NULL REFERENCES publish_targets (target) ON DELETE CASCADE,
    -- The object's key under the target (its path prefix and the file's name).
    key           TEXT NOT NULL,
    -- The version uploaded: the ETag the service served for the file.
    version       TEXT NOT NULL,
    bytes         INTEGER NOT NULL,
    uploaded_us   INTEGER NOT NULL,
    -- Since when no index names it (it is deleted once the grace has passed); NULL: named.
    gone_since_us INTEGER,
    PRIMARY KEY (target, key)
) STRICT, WITHOUT ROWID;
