-- Priority as an integer count of millionths: an integer round-trips exactly, so the size counted when an entry is
-- written is the size rendered when it is read (a REAL gave -0.0 back as 0.0, so such an entry's size was counted
-- one byte too large). The entries whose stored size does not match what they render (those, and locs that must be
-- percent-encoded for RFC 3986) are repaired once by the application after this migration: `upgrade_tasks` lists
-- what is still to do, and the repair deletes its row in the transaction that does it.
ALTER TABLE urls RENAME COLUMN priority TO priority_real;
ALTER TABLE urls ADD COLUMN priority INTEGER CHECK (priority BETWEEN 0 AND 1000000);
UPDATE urls SET priority = CAST(round(priority_real * 1000000) AS INTEGER) WHERE priority_real IS NOT NULL;
ALTER TABLE urls DROP COLUMN priority_real;

CREATE TABLE upgrade_tasks (name TEXT PRIMARY KEY) STRICT;
INSERT INTO upgrade_tasks (name) VALUES ('recount_entries');
