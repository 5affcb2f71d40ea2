-- Publishing to object storage (issue 41): per target (an object store's URL, as configured), the lease that keeps
-- one publisher at a time on it, how its passes ended, and each object it holds with the version last uploaded.
-- A pass uploads a file only when the service's ETag for it differs from that version, records it after the
-- upload, and marks an object that no index names before it deletes it. Additive: nothing stored changes here.
-- Keys compare byte for byte (the "C" collation): objects are listed in byte order, on both backends.

-- One row per target, added by its first claim.
CREATE TABLE publish_targets (
    -- The target's URL as configured (`s3://bucket/prefix/`, `file:///srv/www/`): it holds no credentials.
    target           TEXT COLLATE "C" PRIMARY KEY,
    -- The site it publishes: set by the first claim, never changed.
    site_id          BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    -- The claim that holds (or last held) the target; NULL once released.
    claim_id         BIGINT,
    -- When the holder's lease ends, microseconds since the Unix epoch (the database's clock); a claim may take the
    -- target from then on. 0: released.
    lease_until_us   BIGINT NOT NULL DEFAULT 0,
    -- When the last complete pass, and the last pass of any outcome, ended; NULL: never.
    last_complete_us BIGINT,
    last_attempt_us  BIGINT,
    -- Failed passes since the last complete one, and the last one's error (at most 1,000 characters).
    failures         INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_error       TEXT
);

-- The objects a target holds, as recorded after each upload.
CREATE TABLE publish_objects (
    target        TEXT COLLATE "C" NOT NULL REFERENCES publish_targets (target) ON DELETE CASCADE,
    -- The object's key under the target (its path prefix and the file's name).
    key           TEXT COLLATE "C" NOT NULL,
    -- The version uploaded: the ETag the service served for the file.
    version       TEXT NOT NULL,
    bytes         BIGINT NOT NULL,
    uploaded_us   BIGINT NOT NULL,
    -- Since when no index names it (it is deleted once the grace has passed); NULL: named.
    gone_since_us BIGINT,
    PRIMARY KEY (target, key)
);
