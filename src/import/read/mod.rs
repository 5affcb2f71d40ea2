//! Reading one source's bytes into what it lists, in bounded memory: pure (a `Read` in, [`Found`] items out).
//!
//! The bytes are sniffed, never trusted by name or `Content-Type`: gzip by its magic number (decompressed as a
//! stream, members and all), then by the first significant byte (after a UTF-8 BOM and whitespace) a sitemap or
//! sitemap index (`<`), NDJSON in the write API's form (`{`, what `sitemapd export` writes), or a text sitemap
//! (one URL a line). A `robots.txt` is said by the caller, and read for its `Sitemap:` lines.
//!
//! Bounded memory whatever the input: the decompressed bytes are cut at the protocol's 52,428,800 (and the
//! compressed ones a little above), one XML event or text line at [`MAX_EVENT_BYTES`], a sitemap's entries at
//! 50,000, nesting at [`MAX_DEPTH`]. What is cut is read up to the limit and reported ([`Report::cut`]).
//!
//! Each `<url>` becomes the JSON text of the write API's entry (`{"loc": …, "images": [...], …}`), which the
//! caller validates with the API's own code: a field given twice stays twice, so it is refused as the API refuses
//! it. The deprecated extension fields are skipped and counted, as are elements this service does not keep.
//!
//! One idea a file: `sniff` tells what a source is and sets its limits, `lines` reads the line formats, `xml` the
//! sitemap and index state machine, `to_json` maps a `<url>` to the write API's JSON, and `metered` is the
//! `BufRead` that counts and bounds every byte. This file holds what the callers see: [`read`], its options, its
//! items and its report.

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;

use crate::domain::Section;

mod lines;
mod metered;
mod sniff;
#[cfg(test)]
mod testing;
mod to_json;
mod xml;

pub use xml::{MAX_ENTRY_BYTES, MAX_ENTRY_ELEMENTS, MAX_FIELD_BYTES};

use sniff::read_into;

/// The protocol's limits of one sitemap (or index): uncompressed bytes, and entries.
pub const MAX_BYTES: u64 = 52_428_800;
pub const MAX_ENTRIES: u64 = 50_000;
/// A gzip body's compressed bytes may pass its uncompressed size by its framing only: this bounds a stream of
/// empty gzip members, which decompress to nothing forever.
pub const MAX_COMPRESSED_BYTES: u64 = MAX_BYTES + 1024 * 1024;
/// The most bytes one XML event (a tag, a text, a comment) or one text line may take: an entry's longest field
/// is a few kilobytes.
pub const MAX_EVENT_BYTES: u64 = 1024 * 1024;
/// Google reads the first 500 KiB of a robots.txt.
pub const MAX_ROBOTS_BYTES: u64 = 500 * 1024;
/// The deepest element nesting read (a sitemap needs five).
pub const MAX_DEPTH: usize = 32;
/// Distinct notices kept per source; more are counted under one.
const MAX_NOTICE_KINDS: usize = 64;

/// What a source is, as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    UrlSet,
    Index,
    Text,
    Ndjson,
    Robots,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UrlSet => "sitemap",
            Self::Index => "sitemap index",
            Self::Text => "text sitemap",
            Self::Ndjson => "NDJSON",
            Self::Robots => "robots.txt",
        }
    }
}

/// One thing a source lists.
#[derive(Clone, Debug, PartialEq)]
pub enum Found {
    /// An entry as the JSON text of the write API's entry, to be validated as the API validates it; `loc` is its
    /// `<loc>` as read (for the rejects file), `line` the line its start tag ends on (1-based, in the uncompressed
    /// text).
    Entry { line: u64, loc: Option<String>, json: String },
    /// A sitemap that an index or a robots.txt lists, as written (relative to the source, perhaps).
    Sitemap { line: u64, loc: String },
    /// An entry that cannot be read as one (too many elements), with the reason.
    Invalid { line: u64, loc: Option<String>, reason: String },
    /// A line of a text sitemap that is no URL at all: rejected, and never copied (a file that is no sitemap may
    /// hold secrets).
    NotAnEntry { line: u64, reason: String },
}

/// What reading a source found besides its items.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub format: Option<Format>,
    /// Entries (or sitemaps) listed.
    pub items: u64,
    /// Whether the bytes were gzip.
    pub gzip: bool,
    /// Why the source was read only in part (a limit), if it was.
    pub cut: Option<String>,
    /// What was accepted but is worth saying (upper-case tags, another namespace), or skipped (deprecated fields,
    /// elements this service does not keep), and how often.
    pub notices: BTreeMap<String, u64>,
    /// Sitemaps an index lists that cannot be read (no `<loc>`, too large), where: the index is then not read
    /// whole (at most a few are named).
    pub unreadable: Vec<String>,
}

impl Report {
    fn notice(&mut self, what: impl Into<String>) {
        let what = what.into();
        if self.notices.len() >= MAX_NOTICE_KINDS && !self.notices.contains_key(&what) {
            *self.notices.entry("other notices".to_owned()).or_default() += 1;
        } else {
            *self.notices.entry(what).or_default() += 1;
        }
    }
}

/// How one source is read.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// The source is a robots.txt.
    pub robots: bool,
    /// `(from, to)`: an entry URL that starts with `from` starts with `to` instead (the first that matches).
    pub rewrites: Vec<(String, String)>,
    /// The longest NDJSON line, as the API's `max_line_bytes`.
    pub max_line_bytes: u64,
    /// The section every entry read goes to (`"section"` in its JSON); `None`: the default section. An NDJSON
    /// line that names a section of its own keeps it, unless `section_replaces`.
    pub section: Option<Section>,
    /// `section` replaces the one an NDJSON line names (`--section`: everything read goes there).
    pub section_replaces: bool,
}

impl ReadOptions {
    /// `url` with the first matching rewrite applied.
    pub fn rewrite(&self, url: &str) -> String {
        for (from, to) in &self.rewrites {
            if let Some(rest) = url.strip_prefix(from.as_str()) {
                return format!("{to}{rest}");
            }
        }
        url.to_owned()
    }
}

/// Why a source could not be read (what it listed before that was found all the same).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ReadError {
    pub message: String,
    pub report: Box<Report>,
}

/// Reads `input` whole (up to the limits), giving each item to `found`, which may stop the reading early.
pub fn read(
    input: impl Read,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
) -> Result<Report, ReadError> {
    let mut report = Report::default();
    let result = read_into(input, options, found, &mut report);
    match result {
        Ok(()) => Ok(report),
        Err(message) => Err(ReadError { message, report: Box::new(report) }),
    }
}

/// At most [`MAX_SHOWN`] characters of `text`, for notices and messages.
pub fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The most characters of a name or value a notice shows.
pub const MAX_SHOWN: usize = 64;
