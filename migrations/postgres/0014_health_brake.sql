-- URL health's brake: the events a site's brake counts, and the state of each site's brake that every replica
-- shares and a restart keeps. Additive: no page changes.

-- A check row's last event (microseconds since the Unix epoch): when its last check found it healthy, or when it
-- turned bad (its problem's start); NULL until a definite check. The brake reads a site's newest 20.
ALTER TABLE url_checks ADD COLUMN event_us BIGINT;
UPDATE url_checks SET event_us = CASE WHEN problems = 0 THEN checked_us ELSE problem_since_us END
    WHERE status IS NOT NULL OR problems <> 0;
CREATE INDEX url_checks_events ON url_checks (site_id, event_us) WHERE event_us IS NOT NULL;

-- A site's brake, when it is not plain running: `paused` (no URL is excluded; the burst's exclusions were put
-- back) or `confirmed` (an operator said the burst is real: its shape excludes). `after_us`: events up to then do
-- not count (an operator's resume). The shape (kind, target), its share (bad of counted) and example URLs are the
-- evidence shown.
CREATE TABLE health_brakes (
    site_id  BIGINT PRIMARY KEY REFERENCES sites (id),
    state    TEXT NOT NULL CHECK (state IN ('running', 'paused', 'confirmed')),
    kind     TEXT,
    target   TEXT,
    bad      BIGINT NOT NULL DEFAULT 0,
    counted  BIGINT NOT NULL DEFAULT 0,
    examples TEXT,
    since_us BIGINT NOT NULL,
    after_us BIGINT NOT NULL DEFAULT 0
);
