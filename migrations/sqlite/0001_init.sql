-- Pages are numbered from 1 and never deleted: an emptied page keeps its number and is refilled first.
CREATE TABLE pages (
    id          INTEGER PRIMARY KEY CHECK (id >= 1),
    url_count   INTEGER NOT NULL CHECK (url_count >= 0),
    byte_size   INTEGER NOT NULL CHECK (byte_size >= 0),  -- rendered bytes of its <url> elements
    version     INTEGER NOT NULL,                         -- +1 on every change
    modified_us INTEGER NOT NULL                          -- last change, microseconds since the Unix epoch
) STRICT;

-- AUTOINCREMENT: ids are never reused, so keyset cursors and page order stay stable.
CREATE TABLE urls (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    loc        TEXT NOT NULL UNIQUE,                      -- normalized absolute URL
    page_id    INTEGER NOT NULL REFERENCES pages (id),
    lastmod    TEXT,                                      -- rendered W3C Datetime
    changefreq TEXT,
    priority   REAL,
    size       INTEGER NOT NULL CHECK (size > 0)          -- rendered bytes of its <url> element
) STRICT;

-- A page streams in id order from this index: keyset, never OFFSET.
CREATE INDEX urls_page_id_id ON urls (page_id, id);
