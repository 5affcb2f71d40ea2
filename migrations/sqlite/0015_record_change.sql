-- When each record last changed as its page shows it: the `modified_us` of the first page version that held it as
-- it is (a change of its news alone, which its page does not show, leaves it). A crawler's read of that version or
-- a later one has read the record's change, whatever its neighbours did since. NULL for a record not written since
-- this migration: its page's `modified_us` stands in (the bound it had before). Additive: no page, ETag or
-- Last-Modified changes.
ALTER TABLE urls ADD COLUMN changed_us INTEGER;
