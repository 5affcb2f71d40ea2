-- Priority as an integer count of millionths: an integer round-trips exactly, so the size counted when an entry is
-- written is the size rendered when it is read (DOUBLE PRECISION kept -0.0, which rendered as "-0.0"). Negative
-- zero becomes 0. The entries whose stored size no longer matches what they render (those, and locs that must be
-- percent-encoded for RFC 3986) are repaired once by the application after this migration: `upgrade_tasks` lists
-- what is still to do, and the repair deletes its row in the transaction that does it.
ALTER TABLE urls ALTER COLUMN priority TYPE BIGINT USING round(priority * 1000000)::bigint;
ALTER TABLE urls ADD CONSTRAINT urls_priority_millionths CHECK (priority BETWEEN 0 AND 1000000);

CREATE TABLE upgrade_tasks (name TEXT PRIMARY KEY);
INSERT INTO upgrade_tasks (name) VALUES ('recount_entries');
