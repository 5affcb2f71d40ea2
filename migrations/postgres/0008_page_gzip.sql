-- How each page's gzip is made (`page::Gzip`): 0 for one deflate stream, what every page stored so far was served
-- with; 1 for parallel 1 MiB blocks, which a page gets when a write next changes it. A page keeps its way until
-- then, so an upgrade changes no page's bytes, ETag or Last-Modified: only the pages that change anyway move to
-- the faster encoder. The default stays 0, so that a page an older version creates during a rolling upgrade is
-- served the way that version serves it (one it changes keeps the way stored). Adding a column with a constant default rewrites no row (and so
-- fires no trigger: the change counters stay).
ALTER TABLE pages ADD COLUMN gzip INTEGER NOT NULL DEFAULT 0;
