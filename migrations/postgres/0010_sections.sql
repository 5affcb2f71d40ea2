-- Sections: a site's named sequences of pages (`/sitemap-<name>-N.xml`). A page's id holds its section's id in
-- its high bits (`page::SECTION_SHIFT`); the default section is 0 and has no row, so every page stored before keeps
-- its id, its number and its bytes: nothing stored changes. A section's id is given by the write that first names
-- it (under the write lock, with the pages it creates, which move the site's change counter), is never reused, and
-- its name never changes: a replica may keep the names it has read.
CREATE TABLE sections (
    site_id BIGINT NOT NULL REFERENCES sites (id),
    id      BIGINT NOT NULL CHECK (id >= 1),
    name    TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (site_id, id),
    UNIQUE (site_id, name)
);
