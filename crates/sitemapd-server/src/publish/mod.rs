//! Publishing to object storage (`publish.targets`): each site's sitemaps uploaded as static files to S3, GCS,
//! Azure or a local directory, fetched from the service's own routes in process, so that a published file is the
//! bytes the service serves and its version is the ETag the service gives it.
//!
//! A pass over one target ([`pass`]) holds the target's lease in the database (`PublishLog`: replicas never publish
//! one target at once), reads the versions last uploaded, fetches the indexes and holds them, derives the manifest
//! from `sitemap.xml`'s `<loc>`s ([`index_files`], [`Manifest`]), then uploads each child whose ETag moved (a 304
//! for `If-None-Match: <version recorded>` uploads nothing), then the section indexes and `sitemap.xml`, then marks
//! the recorded objects no index names any more and deletes those marked for longer than `publish.grace`. An object
//! is recorded only after its upload completed and an index is uploaded only after every child it names is current,
//! so that `kill -9` anywhere leaves the target consistent and the next pass completes it.
//!
//! What is pure (the manifest from an index's bytes, the forms of a page, the objects' keys, the rewrite of an
//! index's `<loc>`s for `publish.public_urls`, the test hook's points, the outcome of a pass and its summary line)
//! is here and unit-tested; `target.rs` opens a target's store, `pass.rs` runs a pass, `worker.rs` is `serve`'s
//! publisher.

mod pass;
mod target;
mod worker;

use std::fmt;

use anyhow::{Context, bail};
use bytes::Bytes;
use object_store::path::Path;
use quick_xml::events::Event;

pub use self::pass::{NoProgress, PassOptions, Progress, Target, pass, targets};
pub use self::target::open;
pub use self::worker::{AT_LEAST_EVERY, Publisher, from_config};
use crate::config::Forms;
use crate::domain::PublicUrl;
use crate::sitemap::files::{Format, SitemapFile};

/// The site's index: always published, last.
pub const INDEX_FILE: &str = "sitemap.xml";

/// A target's lease: how long a claim holds it from other passes without being renewed. A pass renews it every
/// third of it; one that dies holding it delays the next pass of that target by this much at most. (Tests shorten
/// it: `Tuning::publish_lease`.)
pub const LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// The most children uploaded at once by a pass.
pub const UPLOADS_IN_FLIGHT: usize = 2;

/// The buffer of one upload: a body up to this is one `PUT`, a larger one a multipart upload in parts of this size.
pub const UPLOAD_BUFFER: usize = 8 << 20;

/// How many times a pass starts over from the indexes when a child the held index names has gone (its page emptied
/// meanwhile) before it fails.
pub const RESTARTS: u32 = 3;

/// The `User-Agent` of a pass's requests to the service's routes (no crawler's: they are not recorded as fetches).
pub const USER_AGENT: &str = "sitemapd-publish";

/// The test hook's variable: the point of a pass at which it writes `sitemapd-publish: paused at <point>` to stderr
/// and waits forever (for a test to kill the process). For tests only; see [`is_pause_point`].
pub const PAUSE_VARIABLE: &str = crate::config::PUBLISH_PAUSE_VARIABLE;

/// Whether `point` is one of the test hook's points: `claimed`, `child-uploaded:N`, `child-recorded:N`,
/// `index-uploaded`, `index-recorded`, `marked`, `deleted:N` (`N` from 1, counted within the pass).
pub fn is_pause_point(point: &str) -> bool {
    if matches!(point, "claimed" | "index-uploaded" | "index-recorded" | "marked") {
        return true;
    }
    let Some((name, n)) = point.split_once(':') else { return false };
    matches!(name, "child-uploaded" | "child-recorded" | "deleted")
        && n.parse::<u64>().is_ok_and(|n| n >= 1)
        && !n.starts_with(['0', '+'])
}

/// What a pass publishes: the files `sitemap.xml` names (with each page's other forms) and the site's feeds
/// (`children`, uploaded first), the section indexes (then), and `sitemap.xml` (last).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Every file but the indexes, in the index's order, each page's other forms after its `.xml`, the feeds last.
    pub children: Vec<String>,
    /// `sitemap-<section>.xml` of each named section that has a page in the index, in order of first appearance.
    pub section_indexes: Vec<String>,
}

impl Manifest {
    /// The manifest of an index that names `files` (as [`index_files`] read them), with the page forms `forms`
    /// and the feeds `feeds` (their file names).
    pub fn new(files: &[String], forms: &Forms, feeds: &[String]) -> Self {
        let mut manifest = Self::default();
        let others = forms.others();
        for file in files {
            manifest.children.push(file.clone());
            if let Some(SitemapFile::Page { section, format: Format::Xml, .. }) = SitemapFile::parse(file) {
                let stem = file.strip_suffix(".xml").unwrap_or(file);
                manifest.children.extend(others.iter().map(|ext| format!("{stem}{ext}")));
                if let Some(section) = section {
                    let index = section_index_file(section);
                    if !manifest.section_indexes.contains(&index) {
                        manifest.section_indexes.push(index);
                    }
                }
            }
        }
        manifest.children.extend(feeds.iter().cloned());
        manifest
    }

    /// Every file, in the order uploaded: the children, the section indexes, `sitemap.xml`.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.children.iter().chain(&self.section_indexes).map(String::as_str).chain(std::iter::once(INDEX_FILE))
    }

    /// How many files, the index included.
    pub fn len(&self) -> usize {
        self.children.len() + self.section_indexes.len() + 1
    }

    /// Never: `sitemap.xml` is in every manifest.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The index file of a named section.
pub fn section_index_file(section: &str) -> String {
    format!("sitemap-{section}.xml")
}

/// The file names an index (`sitemap.xml`, as the service renders it for the site at `public_url`) names: each
/// `<loc>` stripped of `public_url`. A loc not under it, or whose rest is no sitemap file's name (an `.xml` page,
/// the news or removed-URLs sitemap), is an error; so is a document that is no well-formed XML.
pub fn index_files(index: &[u8], public_url: &PublicUrl) -> anyhow::Result<Vec<String>> {
    let mut reader = quick_xml::Reader::from_reader(index);
    let (mut files, mut loc, mut in_loc) = (Vec::new(), String::new(), false);
    loop {
        let event =
            reader.read_event().with_context(|| format!("the index is no XML (at {})", reader.buffer_position()))?;
        match event {
            Event::Start(e) if e.local_name().as_ref() == "loc" => {
                in_loc = true;
                loc.clear();
            }
            Event::Text(t) if in_loc => loc.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_loc => {
                let resolved = match r.resolve_char_ref().context("the index's character reference")? {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_predefined_entity(&r.xml10_content())
                        .with_context(|| format!("the index uses the undefined entity &{};", &*r))?
                        .to_owned(),
                };
                loc.push_str(&resolved);
            }
            Event::End(e) if e.local_name().as_ref() == "loc" => {
                in_loc = false;
                files.push(file_of(loc.trim(), public_url)?.to_owned());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(files)
}

/// `loc`'s file name under `public_url`: an index names pages (`.xml`), the news and the removed-URLs sitemaps.
fn file_of<'a>(loc: &'a str, public_url: &PublicUrl) -> anyhow::Result<&'a str> {
    let Some(file) = loc.strip_prefix(public_url.as_str()) else {
        bail!("the index names {loc:?}, which is not under the site's public URL {public_url}");
    };
    match SitemapFile::parse(file) {
        Some(SitemapFile::Page { format: Format::Xml, .. } | SitemapFile::News { gz: false })
        | Some(SitemapFile::Removed { gz: false }) => Ok(file),
        _ => bail!("the index names {loc:?}, which is no sitemap file of the site's"),
    }
}

/// The key of the object that holds `file` on a target whose path prefix is `prefix` (`a/b` and `sitemap-3.xml`:
/// `a/b/sitemap-3.xml`; no prefix: the file name).
pub fn object_key(prefix: &Path, file: &str) -> Path {
    prefix.clone().join(file)
}

/// An index as published where its files are served at `to` rather than at the site's public URL `from`: each
/// `<loc>` under `from` moved under `to` (as the service renders an entry: `<sitemap><loc>`, the URL escaped).
/// `None` when they are the same: the bytes are the service's.
pub fn rewrite_index(index: &Bytes, from: &PublicUrl, to: &PublicUrl) -> Bytes {
    if from == to {
        return index.clone();
    }
    let from = format!("<sitemap><loc>{}", quick_xml::escape::escape(from.as_str()));
    let to = format!("<sitemap><loc>{}", quick_xml::escape::escape(to.as_str()));
    let finder = memchr::memmem::Finder::new(from.as_bytes());
    let mut out = Vec::with_capacity(index.len());
    let mut at = 0;
    for found in finder.find_iter(index) {
        out.extend_from_slice(&index[at..found]);
        out.extend_from_slice(to.as_bytes());
        at = found + from.len();
    }
    out.extend_from_slice(&index[at..]);
    Bytes::from(out)
}

/// The version recorded for an index: its ETag, and where it was rewritten to (`ETag@URL`) when its `<loc>`s were
/// rewritten (`publish.public_urls`), so that a changed setting uploads it again.
pub fn index_version(etag: &str, rewritten_to: Option<&PublicUrl>) -> String {
    match rewritten_to {
        Some(url) => format!("{etag}@{url}"),
        None => etag.to_owned(),
    }
}

/// How a pass ended.
#[derive(Clone, Debug, PartialEq)]
pub enum PassReport {
    /// Another process holds the target's lease: nothing was done.
    Busy,
    /// The pass completed.
    Done {
        /// Objects uploaded, and their bytes.
        uploaded: u64,
        bytes: u64,
        /// Files whose version on the target was current (nothing uploaded).
        unchanged: u64,
        /// Objects marked gone by this pass (no index names them any more).
        marked: u64,
        /// Objects deleted from the target (their grace ended).
        deleted: u64,
        /// Objects marked gone and not yet deleted.
        awaiting: u64,
        seconds: f64,
        /// Why the target was left as it is (the site has no pages).
        warning: Option<String>,
    },
}

/// The warning of a pass over a site without pages.
pub const NO_PAGES: &str = "site has no pages: the target is left as it is";

impl PassReport {
    /// The pass's line in `sitemapd publish`'s summary: `<label>: uploaded N objects (B bytes), U unchanged,
    /// deleted D, A awaiting deletion, S s`, or `<label>: busy: another process holds its lease`.
    pub fn summary(&self, label: &str) -> String {
        Summary(label, self).to_string()
    }
}

struct Summary<'a>(&'a str, &'a PassReport);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = self.0;
        match self.1 {
            PassReport::Busy => write!(f, "{label}: busy: another process holds its lease"),
            PassReport::Done { uploaded, bytes, unchanged, deleted, awaiting, seconds, warning, .. } => {
                write!(
                    f,
                    "{label}: uploaded {uploaded} objects ({bytes} bytes), {unchanged} unchanged, deleted {deleted}, \
                     {awaiting} awaiting deletion, {seconds:.2} s"
                )?;
                if let Some(warning) = warning {
                    write!(f, " ({warning})")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(url: &str) -> PublicUrl {
        PublicUrl::parse(url).unwrap()
    }

    fn index(locs: &[&str]) -> Vec<u8> {
        let mut out = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n".to_vec();
        for loc in locs {
            crate::page::render::write_index_entry(&mut out, loc, "2026-01-01T00:00:00.000Z");
        }
        out.extend_from_slice(b"</sitemapindex>\n");
        out
    }

    #[test]
    fn the_manifest_is_read_from_the_index_locs() {
        let site = public("https://www.example.com/maps/");
        let bytes = index(&[
            "https://www.example.com/maps/sitemap-1.xml",
            "https://www.example.com/maps/sitemap-products-1.xml",
            "https://www.example.com/maps/sitemap-products-2.xml",
            "https://www.example.com/maps/sitemap-blog-1.xml",
            "https://www.example.com/maps/sitemap-news.xml",
            "https://www.example.com/maps/sitemap-removed.xml",
        ]);
        let files = index_files(&bytes, &site).unwrap();
        assert_eq!(
            files,
            [
                "sitemap-1.xml",
                "sitemap-products-1.xml",
                "sitemap-products-2.xml",
                "sitemap-blog-1.xml",
                "sitemap-news.xml",
                "sitemap-removed.xml"
            ]
        );
        let manifest = Manifest::new(&files, &Forms { xml_gz: true, txt: false, txt_gz: true }, &["feed.atom".into()]);
        assert_eq!(
            manifest.children,
            [
                "sitemap-1.xml",
                "sitemap-1.xml.gz",
                "sitemap-1.txt.gz",
                "sitemap-products-1.xml",
                "sitemap-products-1.xml.gz",
                "sitemap-products-1.txt.gz",
                "sitemap-products-2.xml",
                "sitemap-products-2.xml.gz",
                "sitemap-products-2.txt.gz",
                "sitemap-blog-1.xml",
                "sitemap-blog-1.xml.gz",
                "sitemap-blog-1.txt.gz",
                "sitemap-news.xml",
                "sitemap-removed.xml",
                "feed.atom",
            ]
        );
        assert_eq!(manifest.section_indexes, ["sitemap-products.xml", "sitemap-blog.xml"]);
        let all: Vec<&str> = manifest.files().collect();
        assert_eq!(all.len(), manifest.len());
        assert_eq!(all[all.len() - 3..], ["sitemap-products.xml", "sitemap-blog.xml", "sitemap.xml"]);
        // The pages' .xml alone.
        let xml_only = Manifest::new(&files[..1], &Forms { xml_gz: false, txt: false, txt_gz: false }, &[]);
        assert_eq!(xml_only.children, ["sitemap-1.xml"]);
        assert!(xml_only.section_indexes.is_empty());
        assert_eq!(xml_only.files().collect::<Vec<_>>(), ["sitemap-1.xml", "sitemap.xml"]);
    }

    #[test]
    fn a_loc_outside_the_public_url_or_no_sitemap_file_is_an_error() {
        let site = public("https://www.example.com/");
        for (loc, says) in [
            ("https://other.example.com/sitemap-1.xml", "not under the site's public URL"),
            ("http://www.example.com/sitemap-1.xml", "not under the site's public URL"),
            ("https://www.example.com/sitemap-1.txt", "no sitemap file"),
            ("https://www.example.com/sitemap-products.xml", "no sitemap file"),
            ("https://www.example.com/sitemap-0.xml", "no sitemap file"),
            ("https://www.example.com/a/sitemap-1.xml", "no sitemap file"),
            ("https://www.example.com/feed.atom", "no sitemap file"),
        ] {
            let e = index_files(&index(&[loc]), &site).unwrap_err().to_string();
            assert!(e.contains(says), "{loc}: {e}");
        }
        let e = index_files(b"<sitemapindex><sitemap><loc>x</sitemap>", &site).unwrap_err();
        assert!(format!("{e:#}").contains("no XML"), "{e:#}");
        assert_eq!(index_files(&index(&[]), &site).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn escaped_locs_are_read_unescaped() {
        let site = public("https://www.example.com/a&b/");
        let bytes = index(&["https://www.example.com/a&b/sitemap-2.xml"]);
        assert!(bytes.windows(5).any(|w| w == b"&amp;"));
        assert_eq!(index_files(&bytes, &site).unwrap(), ["sitemap-2.xml"]);
    }

    #[test]
    fn keys_are_the_prefix_and_the_file_name() {
        assert_eq!(object_key(&Path::from("a/b"), "sitemap-3.xml").as_ref(), "a/b/sitemap-3.xml");
        assert_eq!(object_key(&Path::default(), "sitemap.xml").as_ref(), "sitemap.xml");
        assert_eq!(object_key(&Path::from("p"), "feed-blog.atom").as_ref(), "p/feed-blog.atom");
    }

    #[test]
    fn an_index_is_rewritten_to_where_its_files_are_served() {
        let (site, cdn) = (public("https://www.example.com/"), public("https://cdn.example.net/maps/"));
        let bytes =
            Bytes::from(index(&["https://www.example.com/sitemap-1.xml", "https://www.example.com/sitemap-news.xml"]));
        let rewritten = rewrite_index(&bytes, &site, &cdn);
        assert_eq!(index_files(&rewritten, &cdn).unwrap(), ["sitemap-1.xml", "sitemap-news.xml"]);
        assert!(index_files(&rewritten, &site).is_err());
        assert_eq!(rewrite_index(&bytes, &site, &site), bytes);
        assert_eq!(index_version("\"abc\"", None), "\"abc\"");
        assert_eq!(index_version("\"abc\"", Some(&cdn)), "\"abc\"@https://cdn.example.net/maps/");
    }

    #[test]
    fn the_pause_points() {
        for point in [
            "claimed",
            "child-uploaded:1",
            "child-recorded:12",
            "index-uploaded",
            "index-recorded",
            "marked",
            "deleted:3",
        ] {
            assert!(is_pause_point(point), "{point}");
        }
        for point in [
            "",
            "claim",
            "child-uploaded",
            "child-uploaded:0",
            "child-uploaded:01",
            "deleted:-1",
            "deleted:x",
            "marked:1",
        ] {
            assert!(!is_pause_point(point), "{point}");
        }
    }

    #[test]
    fn the_summary_line() {
        let done = PassReport::Done {
            uploaded: 5,
            bytes: 1234,
            unchanged: 7,
            marked: 1,
            deleted: 2,
            awaiting: 1,
            seconds: 0.456,
            warning: None,
        };
        assert_eq!(
            done.summary("s3://bucket/maps/"),
            "s3://bucket/maps/: uploaded 5 objects (1234 bytes), 7 unchanged, deleted 2, 1 awaiting deletion, 0.46 s"
        );
        assert_eq!(
            PassReport::Busy.summary("file:///srv/www/"),
            "file:///srv/www/: busy: another process holds its lease"
        );
        let empty = PassReport::Done {
            uploaded: 0,
            bytes: 0,
            unchanged: 0,
            marked: 0,
            deleted: 0,
            awaiting: 0,
            seconds: 0.0,
            warning: Some(NO_PAGES.to_owned()),
        };
        assert!(empty.summary("x").ends_with(", 0.00 s (site has no pages: the target is left as it is)"));
    }
}
