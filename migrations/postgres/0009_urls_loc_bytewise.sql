-- Locs are compared byte for byte (the "C" collation) rather than by the database's default collation. A loc is
-- an RFC 3986 URL in its normalized form (ASCII, non-ASCII percent-encoded): a language's sort order means nothing
-- for it, and every comparison under a libc collation copies both strings and calls strcoll, for each key that
-- the unique index of locs compares while a write looks records up and inserts them (a seventh of Postgres's CPU
-- in a 1M-row load). Equality is the same under both, so no query answers differently, and nothing stored
-- changes: no page's bytes, ETag or Last-Modified. The unique index is rebuilt (the table is not rewritten),
-- under an exclusive lock on `urls`: about a second per million records.
ALTER TABLE urls ALTER COLUMN loc TYPE text COLLATE "C";
