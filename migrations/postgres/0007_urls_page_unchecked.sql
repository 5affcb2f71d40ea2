-- The foreign key from a URL to its page goes: the write path places every URL on a page it writes in the same
-- transaction, and pages are never deleted, so the key held by construction, while checking it cost an index probe
-- and a row lock on the page for every row inserted or moved (a fifth of a first load's time). SQLite keeps its key:
-- there the check is an in-process lookup. Nothing stored changes: no page's bytes, ETag or Last-Modified.
ALTER TABLE urls DROP CONSTRAINT urls_page_fkey;
