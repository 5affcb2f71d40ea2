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

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::rc::Rc;

use flate2::bufread::MultiGzDecoder;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::{NsReader, XmlVersion};

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

fn read_into(
    input: impl Read,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
    report: &mut Report,
) -> Result<(), String> {
    // The magic numbers are looked for in the first bytes however the input arrives (a pipe or an HTTP body may
    // give one byte first).
    let (head, input) = peek(input)?;
    report.gzip = head.starts_with(&[0x1f, 0x8b]);
    if !report.gzip {
        undecodable(&head)?;
    }
    let input = io::Cursor::new(head).chain(input);
    let unlimited = Rc::new(Cell::new(false));
    let any_cut = Rc::new(Cell::new(false));
    let mut raw = Metered::new(BufReader::with_capacity(64 * 1024, input), MAX_COMPRESSED_BYTES, unlimited.clone());
    raw.any_cut = any_cut.clone();
    let limit = if options.robots { MAX_ROBOTS_BYTES } else { MAX_BYTES };
    if report.gzip {
        // Events are counted in the text a gzip body inflates to, never in its compressed bytes.
        raw.max_event = u64::MAX;
        let (head, inflated) = match peek(MultiGzDecoder::new(raw)) {
            Ok(pair) => pair,
            Err(e) => return Err(format!("{e} (in its gzip)")),
        };
        if head.starts_with(&[0x1f, 0x8b]) {
            return Err("it is gzip inside gzip: decompress it once (gunzip) and import what that gives".to_owned());
        }
        undecodable(&head)?;
        let inflated = BufReader::with_capacity(64 * 1024, io::Cursor::new(head).chain(inflated));
        let mut text = Metered::new(inflated, limit, unlimited);
        text.any_cut = any_cut;
        let result = read_text(&mut text, options, found, report);
        let compressed_cut = text.inner.get_ref().get_ref().1.get_ref().cut;
        finish(result, text.cut, limit, report, compressed_cut)
    } else {
        raw.limit = limit;
        let result = read_text(&mut raw, options, found, report);
        finish(result, raw.cut, limit, report, false)
    }
}

/// How many bytes [`peek`] looks at: the longest magic number below.
const HEAD_BYTES: usize = 8;

/// The first [`HEAD_BYTES`] bytes of `input` (fewer when it is shorter), read however they arrive, and the rest.
fn peek<R: Read>(mut input: R) -> Result<(Vec<u8>, R), String> {
    let mut head = [0u8; HEAD_BYTES];
    let mut got = 0;
    while got < head.len() {
        match input.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read: {e}")),
        }
    }
    Ok((head[..got].to_vec(), input))
}

/// Refuses text that is no UTF-8 sitemap by its first bytes: another Unicode encoding (by its byte order mark, or
/// the NUL bytes of UTF-16 or UTF-32 without one), an archive or compression other than gzip, or binary. Read as
/// text, each would be thousands of rejected "lines"; it is one failed source, saying what it is.
fn undecodable(head: &[u8]) -> Result<(), String> {
    const CONVERT: &str = "sitemaps are UTF-8 (convert it first, e.g. iconv -f";
    let encoding = if head.starts_with(&[0, 0, 0xfe, 0xff]) {
        Some("UTF-32BE")
    } else if head.starts_with(&[0xff, 0xfe, 0, 0]) {
        Some("UTF-32LE")
    } else if head.starts_with(&[0xfe, 0xff]) {
        Some("UTF-16BE")
    } else if head.starts_with(&[0xff, 0xfe]) {
        Some("UTF-16LE")
    } else {
        None
    };
    if let Some(encoding) = encoding {
        return Err(format!("it is {encoding} (by its byte order mark): {CONVERT} {encoding} -t UTF-8)"));
    }
    let archive = [
        (&b"PK\x03\x04"[..], "a zip archive: unzip it and import the sitemaps it holds"),
        (b"BZh", "bzip2-compressed: decompress it (bunzip2) first, or gzip it"),
        (b"\xfd7zXZ\x00", "xz-compressed: decompress it (unxz) first, or gzip it"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed: decompress it (unzstd) first, or gzip it"),
        (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: extract it and import the sitemaps it holds"),
    ];
    if let Some((_, what)) = archive.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Err(format!("it is {what}"));
    }
    if head.contains(&0) {
        // UTF-16 and UTF-32 without a byte order mark put NUL bytes beside ASCII; text never holds one.
        return Err(format!(
            "it holds NUL bytes: binary, or UTF-16 or UTF-32 without a byte order mark ({CONVERT} UTF-16 -t UTF-8)"
        ));
    }
    Ok(())
}

/// The outcome once the reading stopped: a limit that was reached explains whatever error it caused.
fn finish(
    result: Result<(), String>,
    cut: bool,
    limit: u64,
    report: &mut Report,
    compressed_cut: bool,
) -> Result<(), String> {
    if compressed_cut {
        report.cut = Some(format!("its compressed bytes pass {MAX_COMPRESSED_BYTES}: read up to there"));
    } else if cut {
        report.cut = Some(format!("it is larger than {limit} bytes uncompressed: read up to the limit"));
    }
    match result {
        Err(_) if report.cut.is_some() => Ok(()),
        other => other,
    }
}

fn read_text<R: BufRead>(
    input: &mut Metered<R>,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
    report: &mut Report,
) -> Result<(), String> {
    let (first, bom, space) = skip_bom_and_space(input).map_err(|e| format!("cannot read: {e}"))?;
    if bom {
        report.notice("a byte order mark before the text: read past");
    }
    if space && first == Some(b'<') {
        report.notice("whitespace before the XML declaration or root: read past");
    }
    if options.robots {
        report.format = Some(Format::Robots);
        return read_lines(input, options, found, report, Format::Robots);
    }
    match first {
        None => Err("it is empty".to_owned()),
        Some(b'<') => read_xml(input, options, found, report),
        Some(b'{') => {
            // `export` writes any number of entries: only the line length bounds NDJSON.
            report.format = Some(Format::Ndjson);
            input.unlimited.set(true);
            read_lines(input, options, found, report, Format::Ndjson)
        }
        Some(_) => {
            report.format = Some(Format::Text);
            read_lines(input, options, found, report, Format::Text)
        }
    }
}

/// Consumes a UTF-8 byte order mark and leading whitespace: the first byte after them, if any, whether there was
/// a byte order mark, and whether there was whitespace.
fn skip_bom_and_space<R: BufRead>(input: &mut Metered<R>) -> io::Result<(Option<u8>, bool, bool)> {
    // A byte at a time: the input may arrive a byte at a time.
    let mut bom = 0;
    for expected in [0xef, 0xbb, 0xbf] {
        match input.fill_buf()?.first() {
            Some(&b) if b == expected => {
                input.consume(1);
                bom += 1;
            }
            _ => break,
        }
    }
    let mut space = false;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok((None, bom == 3, space));
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                let first = buf[i];
                space |= i > 0;
                input.consume(i);
                input.mark();
                return Ok((Some(first), bom == 3, space));
            }
            None => {
                let n = buf.len();
                space = true;
                input.consume(n);
                input.mark();
            }
        }
    }
}

/// A text sitemap, a robots.txt or NDJSON, a line at a time. A line longer than its bound (the API's
/// `max_line_bytes` for NDJSON, [`MAX_EVENT_BYTES`] else) or not UTF-8 is reported as invalid and skipped to its
/// end, in bounded memory; a last line that a limit cut short is dropped.
fn read_lines<R: BufRead>(
    input: &mut Metered<R>,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
    report: &mut Report,
    format: Format,
) -> Result<(), String> {
    input.max_event = u64::MAX;
    let max = if format == Format::Ndjson { options.max_line_bytes.max(1) } else { MAX_EVENT_BYTES };
    let mut line = Vec::new();
    loop {
        line.clear();
        let line_no = input.newlines + 1;
        // The line, up to its newline; what passes `max` (and its `\r\n`) is counted, not kept.
        let (mut length, mut ended) = (0u64, false);
        loop {
            let buf = input.fill_buf().map_err(|e| format!("cannot read (line {line_no}): {e}"))?;
            if buf.is_empty() {
                break;
            }
            let (take, found_end) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            let room = usize::try_from((max + 2).saturating_sub(line.len() as u64)).unwrap_or(usize::MAX);
            line.extend_from_slice(&buf[..take.min(room)]);
            length += take as u64;
            input.consume(take);
            if found_end {
                ended = true;
                break;
            }
        }
        if length == 0 {
            return Ok(());
        }
        if !ended && (input.cut || input.any_cut.get()) {
            // The limit cut this line short: it is not what the source says.
            return Ok(());
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let body_length = length - (line.len() - body.len()) as u64;
        let invalid = |reason: String| Found::Invalid { line: line_no, loc: None, reason };
        if format != Format::Robots && body.contains(&0) {
            return Err(format!(
                "line {line_no} holds a NUL byte: it is no text sitemap (binary, or UTF-16 or UTF-32 without a byte \
                 order mark)"
            ));
        }
        let item = if body_length > max && format == Format::Robots {
            continue;
        } else if body_length > max {
            invalid(format!("the line is longer than {max} bytes"))
        } else if let Ok(text) = std::str::from_utf8(body) {
            match format {
                Format::Robots => {
                    let text = text.split('#').next().unwrap_or_default();
                    match text.split_once(':') {
                        Some((key, value))
                            if key.trim().eq_ignore_ascii_case("sitemap") && !value.trim().is_empty() =>
                        {
                            if key.trim() != "Sitemap" {
                                report.notice(format!("robots.txt line {:?}: any case is read", shorten(key.trim())));
                            }
                            Found::Sitemap { line: line_no, loc: value.trim().to_owned() }
                        }
                        _ => continue,
                    }
                }
                Format::Text => {
                    let url = text.trim();
                    if url.is_empty() {
                        continue;
                    }
                    if !is_http_url(url) {
                        report.items += 1;
                        let reason = "the line is not an http or https URL (not copied here)".to_owned();
                        if found(Found::NotAnEntry { line: line_no, reason }).is_break() {
                            return Ok(());
                        }
                        continue;
                    }
                    let json = serde_json::json!({ "loc": options.rewrite(url) }).to_string();
                    Found::Entry { line: line_no, loc: Some(url.to_owned()), json }
                }
                _ => {
                    let text = text.trim();
                    if text.is_empty() {
                        continue;
                    }
                    let (loc, json) = ndjson_line(text, options);
                    Found::Entry { line: line_no, loc, json }
                }
            }
        } else if format == Format::Robots {
            continue;
        } else {
            invalid("the line is not valid UTF-8".to_owned())
        };
        report.items += 1;
        if !matches!(format, Format::Ndjson | Format::Robots) && report.items > MAX_ENTRIES {
            report.items = MAX_ENTRIES;
            report.cut = Some(format!("it lists more than {MAX_ENTRIES} URLs: the first {MAX_ENTRIES} were read"));
            return Ok(());
        }
        if found(item).is_break() {
            return Ok(());
        }
    }
}

/// Whether a text sitemap's line is an entry at all: a URL (it starts with `http://` or `https://`, any case) or a
/// relative one (`/path`, a legacy generator's mistake worth showing), without a blank. Anything else (a file that
/// is no sitemap: `/etc/passwd`, an environment) is rejected without being copied.
fn is_http_url(line: &str) -> bool {
    let scheme = |s: &str| line.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s));
    (scheme("http://") || scheme("https://") || line.starts_with('/')) && !line.contains(char::is_whitespace)
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

/// One NDJSON line: its loc (for the rejects file) and the JSON to validate, rewritten when rewrites are given.
/// Without rewrites the line is kept as sent, so a field given twice stays twice.
fn ndjson_line(text: &str, options: &ReadOptions) -> (Option<String>, String) {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(text) else {
        return (None, text.to_owned());
    };
    let loc = value.get("loc").and_then(|l| l.as_str()).map(str::to_owned);
    if options.rewrites.is_empty() {
        return (loc, text.to_owned());
    }
    rewrite_value(&mut value, options);
    (loc, value.to_string())
}

/// Applies the rewrites to the URL fields of an entry in the write API's form.
fn rewrite_value(value: &mut serde_json::Value, options: &ReadOptions) {
    fn at(value: &mut serde_json::Value, key: &str, options: &ReadOptions) {
        if let Some(serde_json::Value::String(s)) = value.get_mut(key) {
            *s = options.rewrite(s);
        }
    }
    fn each(value: &mut serde_json::Value, list: &str, f: impl Fn(&mut serde_json::Value)) {
        if let Some(serde_json::Value::Array(items)) = value.get_mut(list) {
            items.iter_mut().for_each(f);
        }
    }
    at(value, "loc", options);
    each(value, "images", |i| at(i, "loc", options));
    each(value, "alternates", |a| at(a, "href", options));
    each(value, "videos", |v| {
        for key in ["thumbnail_loc", "content_loc", "player_loc"] {
            at(v, key, options);
        }
        if let Some(uploader) = v.get_mut("uploader") {
            at(uploader, "info", options);
        }
    });
}

/// The extension an element belongs to, by its namespace (or, when its prefix is declared nowhere, as real files
/// do, by the prefix's usual name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ns {
    Sitemap,
    Image,
    Video,
    News,
    Xhtml,
    Other,
}

fn namespace(resolved: &ResolveResult<'_>, root: bool, report: &mut Report) -> Ns {
    match resolved {
        ResolveResult::Unbound => {
            if root {
                report.notice("the root element declares no namespace: read as the protocol's");
            }
            Ns::Sitemap
        }
        ResolveResult::Bound(ns) => {
            let uri: &str = ns.as_ref();
            let lower = uri.to_ascii_lowercase();
            let ns = if lower.contains("sitemap-image") {
                Ns::Image
            } else if lower.contains("sitemap-video") {
                Ns::Video
            } else if lower.contains("sitemap-news") {
                Ns::News
            } else if lower.trim_end_matches('/') == "http://www.w3.org/1999/xhtml" {
                Ns::Xhtml
            } else if lower.contains("sitemaps.org/schemas/sitemap") || lower.contains("google.com/schemas/sitemap/0.")
            {
                if root && uri != "http://www.sitemaps.org/schemas/sitemap/0.9" {
                    report.notice(format!("the sitemap namespace {:?} is read as the protocol's", shorten(uri)));
                }
                Ns::Sitemap
            } else {
                Ns::Other
            };
            if !matches!(ns, Ns::Sitemap | Ns::Other) && !KNOWN_EXT_NS.contains(&uri) {
                report.notice(format!("the extension namespace {:?} is read as Google's", shorten(uri)));
            }
            ns
        }
        ResolveResult::Unknown(prefix) => {
            let ns = match prefix.to_ascii_lowercase().as_str() {
                "image" => Ns::Image,
                "video" => Ns::Video,
                "news" => Ns::News,
                "xhtml" => Ns::Xhtml,
                _ => Ns::Other,
            };
            if ns != Ns::Other {
                report.notice(format!("the prefix {}: is used without its namespace declared", shorten(prefix)));
            }
            ns
        }
    }
}

const KNOWN_EXT_NS: [&str; 4] = [
    crate::page::render::IMAGE_NS,
    crate::page::render::VIDEO_NS,
    crate::page::render::NEWS_NS,
    crate::page::render::XHTML_NS,
];

/// A JSON value being built for an entry: objects keep their keys in order and twice when given twice.
#[derive(Clone, Debug, PartialEq)]
enum J {
    Str(String),
    /// A number as valid JSON text.
    Num(String),
    Bool(bool),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn write(&self, out: &mut String) {
        match self {
            Self::Str(s) => out.push_str(&serde_json::Value::from(s.as_str()).to_string()),
            Self::Num(n) => out.push_str(n),
            Self::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Self::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Self::Obj(pairs) => {
                out.push('{');
                for (i, (key, value)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::from(key.as_str()).to_string());
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A number as the API would receive it: an integer or a finite decimal as JSON, anything else as the string it
/// is (which validation then refuses as "must be a number").
fn number(text: &str) -> J {
    if let Ok(n) = text.parse::<u64>() {
        return J::Num(n.to_string());
    }
    if let Ok(n) = text.parse::<i64>() {
        return J::Num(n.to_string());
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => J::Num(serde_json::Value::from(f).to_string()),
        _ => J::Str(text.to_owned()),
    }
}

/// `yes`/`no` (as the video extension writes them; also `true`/`false`) as a boolean, anything else as given.
fn yes_no(text: &str) -> J {
    match text.to_ascii_lowercase().as_str() {
        "yes" | "true" => J::Bool(true),
        "no" | "false" => J::Bool(false),
        _ => J::Str(text.to_owned()),
    }
}

/// The fields Google retired, skipped and counted: (namespace, element).
const DEPRECATED: [(Ns, &str); 12] = [
    (Ns::Image, "caption"),
    (Ns::Image, "title"),
    (Ns::Image, "geo_location"),
    (Ns::Image, "license"),
    (Ns::Video, "category"),
    (Ns::Video, "gallery_loc"),
    (Ns::Video, "price"),
    (Ns::Video, "tvshow"),
    (Ns::News, "access"),
    (Ns::News, "genres"),
    (Ns::News, "keywords"),
    (Ns::News, "stock_tickers"),
];

fn prefix(ns: Ns) -> &'static str {
    match ns {
        Ns::Sitemap => "",
        Ns::Image => "image:",
        Ns::Video => "video:",
        Ns::News => "news:",
        Ns::Xhtml => "xhtml:",
        Ns::Other => "",
    }
}

/// The most elements one `<url>` may hold (1,000 images of two elements each, and room for videos).
pub const MAX_ENTRY_ELEMENTS: usize = 4096;

/// One element of an entry being read: a small tree, at most [`MAX_ENTRY_ELEMENTS`] elements.
#[derive(Clone, Debug, Default)]
struct Node {
    ns: Option<Ns>,
    /// Lower case.
    name: String,
    /// As written, for notices.
    shown: String,
    attrs: Vec<(String, String)>,
    text: String,
    children: Vec<Node>,
}

impl Node {
    fn text(&self) -> &str {
        self.text.trim()
    }

    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim())
    }
}

fn read_xml<R: BufRead>(
    input: &mut Metered<R>,
    options: &ReadOptions,
    found: &mut dyn FnMut(Found) -> ControlFlow<()>,
    report: &mut Report,
) -> Result<(), String> {
    let mut reader = NsReader::from_reader(input);
    reader.config_mut().expand_empty_elements = true;
    // Depth of open elements; the entry being read (its open elements, innermost last) and its size.
    let mut depth = 0usize;
    let mut open: Vec<Node> = Vec::new();
    let mut elements = 0usize;
    let mut entry_line = 0u64;
    // A field of the entry being read passed [`MAX_FIELD_BYTES`], or all of them [`MAX_ENTRY_BYTES`]: the entry
    // is invalid.
    let mut too_long = false;
    let mut entry_bytes = 0usize;
    // The root element was closed: nothing may follow it.
    let mut closed = false;
    // What crawlers accept and the summary lists: no XML declaration, CDATA sections (once per source each).
    let mut declared = false;
    let mut cdata = false;
    // Depth at which a skipped subtree began (0: none).
    let mut skipping = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        reader.get_mut().mark();
        let (resolved, event) = match reader.read_resolved_event_into(&mut buf) {
            Ok(pair) => pair,
            Err(quick_xml::Error::Io(e)) => {
                let line = reader.get_ref().newlines + 1;
                return Err(format!("cannot read (line {line}): {e}"));
            }
            Err(e) => {
                let line = reader.get_ref().newlines + 1;
                return Err(format!("it is not well-formed XML (line {line}): {e}"));
            }
        };
        // The namespace of an opening tag, resolved before the reader is looked at again.
        let ns = match &event {
            Event::Start(_) if skipping == 0 => namespace(&resolved, depth == 0, report),
            _ => Ns::Other,
        };
        let line = reader.get_ref().newlines + 1;
        match event {
            Event::Start(start) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!("its elements are nested more than {MAX_DEPTH} deep (line {line})"));
                }
                if skipping > 0 {
                    continue;
                }
                let node = node(&start, ns, report)?;
                match depth {
                    1 if closed => {
                        return Err(format!("it has a second root element <{}> (line {line})", shorten(&node.shown)));
                    }
                    1 => {
                        if !declared {
                            report.notice("no XML declaration: read as XML 1.0 in UTF-8");
                        }
                        report.format = Some(match (ns, node.name.as_str()) {
                            (Ns::Sitemap, "urlset") => Format::UrlSet,
                            (Ns::Sitemap, "sitemapindex") => Format::Index,
                            _ => {
                                let root = shorten(&node.shown);
                                return Err(format!("it is not a sitemap: its root element is <{root}>"));
                            }
                        });
                    }
                    2 => {
                        let item = match report.format {
                            Some(Format::Index) => "sitemap",
                            _ => "url",
                        };
                        if (ns, node.name.as_str()) != (Ns::Sitemap, item) {
                            skip(report, &node);
                            skipping = depth;
                            continue;
                        }
                        report.items += 1;
                        if report.items > MAX_ENTRIES {
                            report.items = MAX_ENTRIES;
                            let what = if item == "sitemap" { "sitemaps" } else { "URLs" };
                            report.cut = Some(format!(
                                "it lists more than {MAX_ENTRIES} {what}: the first {MAX_ENTRIES} were read"
                            ));
                            return Ok(());
                        }
                        entry_line = line;
                        elements = 1;
                        too_long = false;
                        entry_bytes = 0;
                        open.push(node);
                    }
                    _ => {
                        elements += 1;
                        if elements > MAX_ENTRY_ELEMENTS {
                            skipping = depth;
                            continue;
                        }
                        open.push(node);
                    }
                }
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                closed |= depth == 0;
                if skipping > 0 {
                    if depth < skipping {
                        skipping = 0;
                    }
                    continue;
                }
                let Some(node) = open.pop() else { continue };
                if let Some(parent) = open.last_mut() {
                    parent.children.push(node);
                    continue;
                }
                let index = report.format == Some(Format::Index);
                let item = if index && (elements > MAX_ENTRY_ELEMENTS || too_long) {
                    // A listed sitemap that cannot be read is not an entry to reject: what it lists is unread.
                    report.unreadable.push(format!("line {entry_line}: a <sitemap> too large to read"));
                    continue;
                } else if elements > MAX_ENTRY_ELEMENTS || too_long {
                    let loc = node.children.iter().find(|c| c.name == "loc").map(|c| c.text().to_owned());
                    let reason = if too_long {
                        format!(
                            "a field of it is longer than {MAX_FIELD_BYTES} bytes, or all of them than \
                             {MAX_ENTRY_BYTES}"
                        )
                    } else {
                        format!("it holds more than {MAX_ENTRY_ELEMENTS} elements")
                    };
                    Found::Invalid { line: entry_line, loc, reason }
                } else if report.format == Some(Format::Index) {
                    match node.children.iter().find(|c| c.ns == Some(Ns::Sitemap) && c.name == "loc") {
                        Some(loc) if !loc.text().is_empty() => {
                            Found::Sitemap { line: entry_line, loc: loc.text().to_owned() }
                        }
                        _ => {
                            report.unreadable.push(format!("line {entry_line}: a <sitemap> without a <loc>"));
                            continue;
                        }
                    }
                } else {
                    let (loc, json) = entry_json(&node, options, report);
                    Found::Entry { line: entry_line, loc, json }
                };
                if found(item).is_break() {
                    return Ok(());
                }
            }
            Event::Text(text) => {
                if let Some(node) = open.last_mut().filter(|_| skipping == 0) {
                    too_long |= !append(&mut node.text, &text.xml10_content(), &mut entry_bytes);
                }
            }
            Event::CData(data) => {
                if !cdata {
                    cdata = true;
                    report.notice("CDATA sections: read as text");
                }
                if let Some(node) = open.last_mut().filter(|_| skipping == 0) {
                    too_long |= !append(&mut node.text, &data.xml10_content(), &mut entry_bytes);
                }
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(ch)) => ch.to_string(),
                    Ok(None) => match quick_xml::escape::resolve_predefined_entity(&r.xml10_content()) {
                        Some(s) => s.to_owned(),
                        None => return Err(format!("it uses the undefined entity &{}; (line {line})", &*r)),
                    },
                    Err(e) => return Err(format!("it has a bad character reference (line {line}): {e}")),
                };
                if let Some(node) = open.last_mut().filter(|_| skipping == 0) {
                    too_long |= !append(&mut node.text, &resolved, &mut entry_bytes);
                }
            }
            Event::Eof => {
                return match report.format {
                    None => Err("it holds no XML element".to_owned()),
                    Some(_) if depth > 0 => Err("it ends before its root element is closed".to_owned()),
                    Some(_) => Ok(()),
                };
            }
            Event::Decl(decl) => {
                declared = true;
                if let Some(Ok(encoding)) = decl.encoding()
                    && !encoding.eq_ignore_ascii_case("utf-8")
                    && !encoding.eq_ignore_ascii_case("utf8")
                {
                    let encoding = shorten(&encoding);
                    return Err(format!(
                        "it declares the encoding {encoding}: sitemaps are UTF-8 (convert it first, e.g. iconv -f \
                         {encoding} -t UTF-8)"
                    ));
                }
            }
            Event::Empty(_) | Event::Comment(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
}

/// The most bytes one field of an entry may hold (a URL is at most 2,048 characters, a video description 2,048).
pub const MAX_FIELD_BYTES: usize = 64 * 1024;

/// The most bytes of text one entry may hold over all its fields (1,000 images' URLs take 2 MB at most).
pub const MAX_ENTRY_BYTES: usize = 4 * 1024 * 1024;

/// Appends `more` to a field's `text` unless that passes [`MAX_FIELD_BYTES`], or the entry's text (`entry_bytes`)
/// [`MAX_ENTRY_BYTES`]; whether it did not.
fn append(text: &mut String, more: &str, entry_bytes: &mut usize) -> bool {
    if text.len() + more.len() > MAX_FIELD_BYTES || *entry_bytes + more.len() > MAX_ENTRY_BYTES {
        return false;
    }
    *entry_bytes += more.len();
    text.push_str(more);
    true
}

/// The element `start` opens, reporting a tag that is not lower case (read all the same).
fn node(start: &BytesStart<'_>, ns: Ns, report: &mut Report) -> Result<Node, String> {
    let local = start.local_name();
    let raw: &str = local.as_ref();
    let name = raw.to_ascii_lowercase();
    if name != raw && ns != Ns::Other {
        let (raw, name) = (shorten(raw), shorten(&name));
        report.notice(format!("the tag <{}{raw}> is read as <{}{name}>", prefix(ns), prefix(ns)));
    }
    let attrs = start
        .attributes()
        .with_checks(false)
        .flatten()
        .filter_map(|a| {
            let key = a.key.local_name().as_ref().to_ascii_lowercase();
            Some((key, a.normalized_value(XmlVersion::Implicit1_0).ok()?.into_owned()))
        })
        .collect();
    let shown = start.name().as_ref().to_owned();
    Ok(Node { ns: Some(ns), name, shown, attrs, text: String::new(), children: Vec::new() })
}

/// Counts an element that is skipped: a deprecated field, or one this service does not keep.
fn skip(report: &mut Report, node: &Node) {
    let ns = node.ns.unwrap_or(Ns::Other);
    if DEPRECATED.contains(&(ns, node.name.as_str())) {
        report.notice(format!("deprecated <{}{}> skipped", prefix(ns), node.name));
    } else {
        report.notice(format!("<{}> is not kept: skipped", shorten(&node.shown)));
    }
}

/// A `<url>` as the JSON text of the write API's entry, and its `<loc>` as read.
fn entry_json(url: &Node, options: &ReadOptions, report: &mut Report) -> (Option<String>, String) {
    let mut entry: Vec<(String, J)> = Vec::new();
    let mut images = Vec::new();
    let mut videos = Vec::new();
    let mut alternates = Vec::new();
    let mut loc = None;
    for child in &url.children {
        let ns = child.ns.unwrap_or(Ns::Other);
        match (ns, child.name.as_str()) {
            (Ns::Sitemap, "loc") => {
                loc.get_or_insert_with(|| child.text().to_owned());
                entry.push(("loc".into(), J::Str(options.rewrite(child.text()))));
            }
            (Ns::Sitemap, "lastmod" | "changefreq") => entry.push((child.name.clone(), J::Str(child.text().into()))),
            (Ns::Sitemap, "priority") => entry.push(("priority".into(), number(child.text()))),
            (Ns::Image, "image") => images.push(image(child, options, report)),
            (Ns::Video, "video") => videos.push(video(child, options, report)),
            (Ns::News, "news") => entry.push(("news".into(), news(child, report))),
            (Ns::Xhtml, "link") => match child.attr("rel") {
                Some(rel)
                    if rel.eq_ignore_ascii_case("alternate")
                        && child.attr("href").is_some_and(|h| {
                            let h = h.to_ascii_lowercase();
                            h.starts_with("android-app:") || h.starts_with("ios-app:")
                        }) =>
                {
                    // Google's app indexing (retired in 2019): a link to an app, not a page. Skipped as retired
                    // tags are; the entry is kept.
                    report.notice("retired <xhtml:link href=\"android-app:…\"> (app indexing) skipped");
                }
                Some(rel) if rel.eq_ignore_ascii_case("alternate") => {
                    let mut link = Vec::new();
                    if let Some(hreflang) = child.attr("hreflang") {
                        link.push(("hreflang".into(), J::Str(hreflang.into())));
                    }
                    if let Some(href) = child.attr("href") {
                        link.push(("href".into(), J::Str(options.rewrite(href))));
                    }
                    alternates.push(J::Obj(link));
                }
                _ => report.notice("<xhtml:link> without rel=\"alternate\" is not kept: skipped"),
            },
            _ => skip(report, child),
        }
    }
    for (key, list) in [("images", images), ("videos", videos), ("alternates", alternates)] {
        if !list.is_empty() {
            entry.push((key.into(), J::Arr(list)));
        }
    }
    let mut json = String::with_capacity(256);
    J::Obj(entry).write(&mut json);
    (loc, json)
}

/// The children of `parent` in its namespace named in `names` as string fields; the deprecated ones and the
/// unknown ones are skipped and counted.
fn fields(parent: &Node, names: &[&str], report: &mut Report) -> Vec<(String, J)> {
    let mut out = Vec::new();
    for child in &parent.children {
        if child.ns == parent.ns && names.contains(&child.name.as_str()) {
            out.push((child.name.clone(), string(child.text())));
        } else {
            skip(report, child);
        }
    }
    out
}

fn string(text: &str) -> J {
    J::Str(text.to_owned())
}

fn image(node: &Node, options: &ReadOptions, report: &mut Report) -> J {
    let mut pairs = fields(node, &["loc"], report);
    rewrite_pairs(&mut pairs, &["loc"], options);
    J::Obj(pairs)
}

fn video(node: &Node, options: &ReadOptions, report: &mut Report) -> J {
    let ns = Some(Ns::Video);
    let mut pairs = Vec::new();
    let mut tags = Vec::new();
    for child in &node.children {
        let text = child.text();
        let value = match (child.ns == ns, child.name.as_str()) {
            (true, "thumbnail_loc" | "title" | "description" | "content_loc" | "expiration_date")
            | (true, "publication_date") => string(text),
            (true, "player_loc") => {
                for retired in ["allow_embed", "autoplay"] {
                    if child.attr(retired).is_some() {
                        report.notice(format!("deprecated <video:player_loc {retired}=…> skipped"));
                    }
                }
                string(text)
            }
            (true, "duration" | "rating" | "view_count") => number(text),
            (true, "family_friendly" | "requires_subscription" | "live") => yes_no(text),
            (true, "restriction") => relationship(child, "countries", text),
            (true, "platform") => relationship(child, "platforms", text),
            (true, "uploader") => {
                let mut uploader = vec![("name".to_owned(), string(text))];
                if let Some(info) = child.attr("info") {
                    uploader.push(("info".into(), J::Str(options.rewrite(info))));
                }
                J::Obj(uploader)
            }
            (true, "tag") => {
                tags.push(string(text));
                continue;
            }
            _ => {
                skip(report, child);
                continue;
            }
        };
        pairs.push((child.name.clone(), value));
    }
    if !tags.is_empty() {
        pairs.push(("tags".into(), J::Arr(tags)));
    }
    rewrite_pairs(&mut pairs, &["thumbnail_loc", "content_loc", "player_loc"], options);
    J::Obj(pairs)
}

/// `<video:restriction relationship="allow">DE AT</video:restriction>` as `{"relationship", key: [...]}`.
fn relationship(node: &Node, key: &str, text: &str) -> J {
    let mut pairs = Vec::new();
    if let Some(relationship) = node.attr("relationship") {
        pairs.push(("relationship".to_owned(), J::Str(relationship.to_owned())));
    }
    pairs.push((key.to_owned(), J::Arr(text.split_ascii_whitespace().map(string).collect())));
    J::Obj(pairs)
}

fn news(node: &Node, report: &mut Report) -> J {
    let mut pairs = Vec::new();
    for child in &node.children {
        match (child.ns == Some(Ns::News), child.name.as_str()) {
            (true, "publication") => {
                pairs.push(("publication".into(), J::Obj(fields(child, &["name", "language"], report))))
            }
            (true, "publication_date" | "title") => pairs.push((child.name.clone(), string(child.text()))),
            _ => skip(report, child),
        }
    }
    J::Obj(pairs)
}

fn rewrite_pairs(pairs: &mut [(String, J)], keys: &[&str], options: &ReadOptions) {
    for (key, value) in pairs {
        if let (true, J::Str(s)) = (keys.contains(&key.as_str()), &mut *value) {
            *s = options.rewrite(s);
        }
    }
}

/// A `BufRead` that counts what passes: the bytes (cut at `limit`, which sets `cut`), the newlines (line numbers),
/// and the bytes since the last [`Metered::mark`] (refused past `max_event`).
struct Metered<R> {
    inner: R,
    consumed: u64,
    limit: u64,
    /// Set once the format has no byte limit (NDJSON): shared by the compressed and the inflated counter.
    unlimited: Rc<Cell<bool>>,
    /// Set when either counter cut the input (the compressed one may end it cleanly between gzip members).
    any_cut: Rc<Cell<bool>>,
    cut: bool,
    newlines: u64,
    marked: u64,
    max_event: u64,
}

impl<R: BufRead> Metered<R> {
    fn new(inner: R, limit: u64, unlimited: Rc<Cell<bool>>) -> Self {
        let any_cut = Rc::new(Cell::new(false));
        Self {
            inner,
            consumed: 0,
            limit,
            unlimited,
            any_cut,
            cut: false,
            newlines: 0,
            marked: 0,
            max_event: MAX_EVENT_BYTES,
        }
    }

    /// Starts counting an event's bytes again.
    fn mark(&mut self) {
        self.marked = self.consumed;
    }
}

impl<R: BufRead> Read for Metered<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Metered<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.consumed - self.marked >= self.max_event {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("one element, text or line is longer than {} bytes", self.max_event),
            ));
        }
        if self.consumed >= self.limit && !self.unlimited.get() {
            // Past the limit only if there is more.
            if !self.cut && !self.inner.fill_buf()?.is_empty() {
                self.cut = true;
                self.any_cut.set(true);
            }
            return Ok(&[]);
        }
        let room = if self.unlimited.get() { u64::MAX } else { self.limit - self.consumed };
        let buf = self.inner.fill_buf()?;
        let n = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        Ok(&buf[..n])
    }

    fn consume(&mut self, amount: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let n = amount.min(buf.len());
            self.newlines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        }
        self.consumed += amount as u64;
        self.inner.consume(amount);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use serde_json::{Value, json};

    use super::*;
    use crate::domain::{Entry, EntryInput, PublicUrl};

    fn options() -> ReadOptions {
        ReadOptions { robots: false, rewrites: Vec::new(), max_line_bytes: 65_536 }
    }

    fn read_all(bytes: &[u8], options: &ReadOptions) -> (Vec<Found>, Result<Report, ReadError>) {
        let mut items = Vec::new();
        let result = read(bytes, options, &mut |f| {
            items.push(f);
            ControlFlow::Continue(())
        });
        (items, result)
    }

    /// The entries' JSON as values.
    fn entries(items: &[Found]) -> Vec<Value> {
        items
            .iter()
            .filter_map(|f| match f {
                Found::Entry { json, .. } => Some(serde_json::from_str(json).expect(json)),
                _ => None,
            })
            .collect()
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(bytes).unwrap();
        z.finish().unwrap()
    }

    const FULL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"
        xmlns:xhtml="http://www.w3.org/1999/xhtml">
  <url>
    <loc>https://www.example.com/p?a=1&amp;b=2</loc>
    <lastmod>2024-05-01T08:20:00+02:00</lastmod>
    <changefreq>weekly</changefreq>
    <priority>0.80</priority>
    <image:image><image:loc>https://cdn.example.com/1.jpg</image:loc><image:caption>gone</image:caption></image:image>
    <image:image><image:loc> https://cdn.example.com/2.jpg </image:loc></image:image>
    <video:video>
      <video:thumbnail_loc>https://cdn.example.com/t.jpg</video:thumbnail_loc>
      <video:title><![CDATA[Grilling & steaks]]></video:title>
      <video:description>Alkis &#8217; steaks</video:description>
      <video:content_loc>https://cdn.example.com/v.mp4</video:content_loc>
      <video:player_loc autoplay="ap=1">https://player.example.com/v</video:player_loc>
      <video:duration>0600</video:duration>
      <video:rating>4.2</video:rating>
      <video:view_count>12345</video:view_count>
      <video:family_friendly>Yes</video:family_friendly>
      <video:restriction relationship="allow">IE GB US</video:restriction>
      <video:platform relationship="deny">tv</video:platform>
      <video:uploader info="https://www.example.com/u">Grill Guy</video:uploader>
      <video:live>no</video:live>
      <video:tag>steak</video:tag><video:tag>meat</video:tag>
      <video:category>Grilling</video:category>
    </video:video>
    <news:news>
      <news:publication><news:name>The Times</news:name><news:language>en</news:language></news:publication>
      <news:publication_date>2024-05-01</news:publication_date>
      <news:title>Companies A, B in merger talks</news:title>
      <news:keywords>business</news:keywords>
    </news:news>
    <xhtml:link rel="alternate" hreflang="de" href="https://www.example.com/de/p"/>
    <xhtml:link rel="canonical" href="https://www.example.com/p"/>
    <mobile:mobile xmlns:mobile="http://www.google.com/schemas/sitemap-mobile/1.0"/>
  </url>
</urlset>"#;

    #[test]
    fn every_field_and_extension_becomes_the_write_apis_json() {
        let (items, report) = read_all(FULL.as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!((report.format, report.items, report.cut.as_deref()), (Some(Format::UrlSet), 1, None));
        assert_eq!(
            entries(&items),
            [json!({
                "loc": "https://www.example.com/p?a=1&b=2", "lastmod": "2024-05-01T08:20:00+02:00",
                "changefreq": "weekly", "priority": 0.8,
                "images": [{"loc": "https://cdn.example.com/1.jpg"}, {"loc": "https://cdn.example.com/2.jpg"}],
                "videos": [{
                    "thumbnail_loc": "https://cdn.example.com/t.jpg", "title": "Grilling & steaks",
                    "description": "Alkis \u{2019} steaks", "content_loc": "https://cdn.example.com/v.mp4",
                    "player_loc": "https://player.example.com/v", "duration": 600, "rating": 4.2, "view_count": 12345,
                    "family_friendly": true, "restriction": {"relationship": "allow", "countries": ["IE", "GB", "US"]},
                    "platform": {"relationship": "deny", "platforms": ["tv"]},
                    "uploader": {"name": "Grill Guy", "info": "https://www.example.com/u"}, "live": false,
                    "tags": ["steak", "meat"]}],
                "news": {"publication": {"name": "The Times", "language": "en"}, "publication_date": "2024-05-01",
                         "title": "Companies A, B in merger talks"},
                "alternates": [{"hreflang": "de", "href": "https://www.example.com/de/p"}],
            })]
        );
        let Found::Entry { line, loc, .. } = &items[0] else { panic!("an entry") };
        assert_eq!((*line, loc.as_deref()), (7, Some("https://www.example.com/p?a=1&b=2")));
        let notices: Vec<&str> = report.notices.keys().map(String::as_str).collect();
        assert_eq!(
            notices,
            [
                "<mobile:mobile> is not kept: skipped",
                "<xhtml:link> without rel=\"alternate\" is not kept: skipped",
                "CDATA sections: read as text",
                "deprecated <image:caption> skipped",
                "deprecated <news:keywords> skipped",
                "deprecated <video:category> skipped",
                "deprecated <video:player_loc autoplay=…> skipped",
            ]
        );
    }

    #[test]
    fn the_json_is_validated_by_the_apis_own_rules() {
        let public = PublicUrl::parse("https://www.example.com").unwrap();
        let validate = |json: &str| Entry::from_input(serde_json::from_str::<EntryInput>(json).unwrap(), &public);
        let (items, _) = read_all(FULL.replace("IE GB US", "IE GB US IE").as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!("an entry") };
        let errors = validate(json).unwrap_err();
        assert!(errors.iter().any(|e| e.field == "alternates"), "no self link: {errors:?}");
        let twice = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>https://www.example.com/a\
                     </loc><loc>https://evil.example/</loc></url></urlset>";
        let (items, _) = read_all(twice.as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!("an entry") };
        let errors = validate(json).unwrap_err();
        assert_eq!(errors[0].message, "is given more than once; give each field once", "as the API refuses it");
        let odd = "<urlset><url><loc>https://www.example.com/a</loc><priority>high</priority></url></urlset>";
        let (items, _) = read_all(odd.as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!("an entry") };
        assert_eq!(validate(json).unwrap_err()[0].message, "must be a number, not a string");
    }

    #[test]
    fn what_real_files_contain_is_read_and_reported() {
        let odd = "\u{feff} \n\t<?xml version=\"1.0\"?>\n<URLSET xmlns=\"https://www.sitemaps.org/schemas/sitemap/0.9\">\
                   <URL><LOC>https://www.example.com/a</LOC></URL>\n\
                   <url><loc>https://www.example.com/b</loc><image:image><image:loc>https://c.example/i.jpg</image:loc>\
                   </image:image></url></URLSET>";
        let (items, report) = read_all(odd.as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!(entries(&items).len(), 2);
        assert_eq!(entries(&items)[1]["images"], json!([{"loc": "https://c.example/i.jpg"}]));
        let Found::Entry { line, .. } = &items[1] else { panic!() };
        assert_eq!(*line, 4, "lines count the BOM's line and leading whitespace");
        for notice in [
            "a byte order mark before the text: read past",
            "whitespace before the XML declaration or root: read past",
            "the sitemap namespace \"https://www.sitemaps.org/schemas/sitemap/0.9\" is read as the protocol's",
            "the tag <URLSET> is read as <urlset>",
            "the tag <LOC> is read as <loc>",
            "the prefix image: is used without its namespace declared",
        ] {
            assert!(report.notices.contains_key(notice), "{notice}: {:?}", report.notices);
        }
        let old = "<urlset xmlns=\"http://www.google.com/schemas/sitemap/0.84\"><url><loc>https://www.example.com/\
                   </loc></url></urlset>";
        let (items, report) = read_all(old.as_bytes(), &options());
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/"})]);
        let notices: Vec<String> = report.unwrap().notices.into_keys().collect();
        assert_eq!(notices.len(), 2, "{notices:?}");
        assert!(notices.contains(&"no XML declaration: read as XML 1.0 in UTF-8".to_owned()), "{notices:?}");
    }

    /// What is no UTF-8 sitemap fails as a source, saying what it is, rather than giving thousands of rejected
    /// "lines"; what is read before it is kept.
    #[test]
    fn undecodable_sources_fail_saying_what_they_are() {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                   <url><loc>https://www.example.com/a</loc></url></urlset>\n";
        let utf16 = |le: bool, bom: bool| -> Vec<u8> {
            let mut out = Vec::new();
            if bom {
                out.extend(if le { [0xff, 0xfe] } else { [0xfe, 0xff] });
            }
            for unit in xml.encode_utf16() {
                out.extend(if le { unit.to_le_bytes() } else { unit.to_be_bytes() });
            }
            out
        };
        let utf32le: Vec<u8> =
            [0xfeff_u32].into_iter().chain(xml.chars().map(u32::from)).flat_map(u32::to_le_bytes).collect();
        let utf32be: Vec<u8> =
            [0xfeff_u32].into_iter().chain(xml.chars().map(u32::from)).flat_map(u32::to_be_bytes).collect();
        let mut zip = b"PK\x03\x04".to_vec();
        zip.extend_from_slice(xml.as_bytes());
        let binary: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
        let mut late_nul = b"https://www.example.com/a\nhttps://www.example.com/b\n".to_vec();
        late_nul.extend_from_slice(b"\x00\x01\x02garbage\nhttps://www.example.com/c\n");
        for (name, bytes, says, kept) in [
            ("UTF-16LE", utf16(true, true), "it is UTF-16LE (by its byte order mark)", 0),
            ("UTF-16BE", utf16(false, true), "it is UTF-16BE (by its byte order mark)", 0),
            ("UTF-16 without a BOM", utf16(true, false), "it holds NUL bytes", 0),
            ("UTF-32LE", utf32le, "it is UTF-32LE", 0),
            ("UTF-32BE", utf32be, "it is UTF-32BE", 0),
            ("gzip in gzip", gzip(&gzip(xml.as_bytes())), "gzip inside gzip", 0),
            ("UTF-16 in gzip", gzip(&utf16(true, true)), "it is UTF-16LE", 0),
            ("zip", zip, "a zip archive", 0),
            ("bzip2", b"BZh91AY&SY".to_vec(), "bzip2", 0),
            ("xz", b"\xfd7zXZ\x00\x00".to_vec(), "xz", 0),
            ("binary", binary, "NUL", 0),
            ("a NUL byte on line 3", late_nul, "line 3 holds a NUL byte", 2),
        ] {
            let (items, report) = read_all(&bytes, &options());
            let e = report.expect_err(name);
            assert!(e.message.contains(says), "{name}: {}", e.message);
            assert_eq!(items.len(), kept, "{name}: {items:?}");
        }
        // A UTF-8 declaration with a UTF-8 body is read, of course.
        let (items, report) = read_all(xml.replace("UTF-16", "UTF-8").as_bytes(), &options());
        assert_eq!((items.len(), report.unwrap().format), (1, Some(Format::UrlSet)));
    }

    /// Google's retired app-indexing link (`android-app://…`, `ios-app://…`) is skipped and counted, as retired
    /// tags are: the entry is kept (sitemap.js's own fixtures hold one).
    #[test]
    fn an_app_indexing_link_is_skipped_and_the_entry_kept() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:xhtml="http://www.w3.org/1999/xhtml">
<url><loc>https://www.example.com/a</loc>
<xhtml:link rel="alternate" href="android-app://com.example/https/www.example.com/a"/>
<xhtml:link rel="alternate" href="ios-app://123/https/www.example.com/a"/>
<xhtml:link rel="alternate" hreflang="de" href="https://www.example.com/de/a"/>
<xhtml:link rel="alternate" hreflang="en" href="https://www.example.com/a"/>
</url></urlset>"#;
        let (items, report) = read_all(xml.as_bytes(), &options());
        let report = report.unwrap();
        let json = entries(&items);
        assert_eq!(json[0]["alternates"].as_array().unwrap().len(), 2, "{json:?}");
        assert_eq!(report.notices.get("retired <xhtml:link href=\"android-app:…\"> (app indexing) skipped"), Some(&2));
        let Found::Entry { json, .. } = &items[0] else { panic!() };
        let public = PublicUrl::parse("https://www.example.com/").unwrap();
        let input = serde_json::from_str::<EntryInput>(json).unwrap();
        assert!(Entry::from_input(input, &public).is_ok(), "{json}");
    }

    #[test]
    fn an_index_lists_its_sitemaps() {
        let index = "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n\
                     <sitemap><loc>https://www.example.com/s1.xml.gz</loc><lastmod>2024-01-01</lastmod></sitemap>\n\
                     <sitemap><loc> s2.xml </loc></sitemap>\n<sitemap><lastmod>2024-01-01</lastmod></sitemap>\n\
                     </sitemapindex>";
        let (items, report) = read_all(index.as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!(report.format, Some(Format::Index));
        assert_eq!(report.unreadable, ["line 4: a <sitemap> without a <loc>"], "not a reject: the index is not whole");
        assert_eq!(
            items,
            [
                Found::Sitemap { line: 2, loc: "https://www.example.com/s1.xml.gz".into() },
                Found::Sitemap { line: 3, loc: "s2.xml".into() },
            ]
        );
    }

    #[test]
    fn gzip_is_known_by_its_magic_and_every_member_is_read() {
        let mut two = gzip(b"<urlset><url><loc>https://www.example.com/a</loc></url>");
        two.extend(gzip(b"<url><loc>https://www.example.com/b</loc></url></urlset>"));
        let (items, report) = read_all(&two, &options());
        let report = report.unwrap();
        assert!(report.gzip);
        assert_eq!(entries(&items).len(), 2);
        let (items, report) = read_all(&gzip(b"https://www.example.com/t\n"), &options());
        assert_eq!(report.unwrap().format, Some(Format::Text));
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/t"})]);
    }

    #[test]
    fn a_gzip_body_of_many_megabytes_is_read_whole() {
        // Hex paths compress to about half: past one event's bound in gzip bytes alone.
        let mut xml = String::from("<urlset>\n");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..40_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            xml.push_str(&format!(
                "<url><loc>https://www.example.com/{x:016x}{:016x}</loc></url>\n",
                x.rotate_left(29)
            ));
        }
        xml.push_str("</urlset>\n");
        let compressed = gzip(xml.as_bytes());
        assert!(compressed.len() as u64 > MAX_EVENT_BYTES, "{}", compressed.len());
        let (items, report) = read_all(&compressed, &options());
        let report = report.unwrap();
        assert_eq!((items.len(), report.cut), (40_000, None));
    }

    #[test]
    fn text_sitemaps_robots_and_ndjson_are_read_a_line_at_a_time() {
        let text = "\u{feff}https://www.example.com/a\r\n\r\n  https://www.example.com/b  \nnot a url";
        let (items, report) = read_all(text.as_bytes(), &options());
        assert_eq!(report.unwrap().format, Some(Format::Text));
        let lines: Vec<(u64, Option<String>)> = items
            .iter()
            .map(|f| match f {
                Found::Entry { line, loc, .. } => (*line, loc.clone()),
                Found::NotAnEntry { line, reason } => (*line, Some(reason.clone())),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            lines,
            [
                (1, Some("https://www.example.com/a".into())),
                (3, Some("https://www.example.com/b".into())),
                (4, Some("the line is not an http or https URL (not copied here)".into()))
            ],
            "a line that is no URL is never copied"
        );

        let robots = "User-agent: *\nDisallow: /x # Sitemap: https://no.example/\nSitemap: https://a.example/s.xml\n\
                      sitemap:https://a.example/news.xml\r\nSITEMAP :  https://b.example/i.xml.gz # main\nSitemap:\n";
        let (items, report) = read_all(robots.as_bytes(), &ReadOptions { robots: true, ..options() });
        assert_eq!(report.unwrap().format, Some(Format::Robots));
        let locs: Vec<&str> = items
            .iter()
            .map(|f| match f {
                Found::Sitemap { loc, .. } => loc.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(locs, ["https://a.example/s.xml", "https://a.example/news.xml", "https://b.example/i.xml.gz"]);

        let ndjson = "{\"loc\":\"https://old.example/a\",\"loc\":\"x\"}\n\n{\"loc\":\"https://old.example/b\",\
                      \"images\":[{\"loc\":\"https://old.example/i.jpg\"}]}\n";
        let (items, _) = read_all(ndjson.as_bytes(), &options());
        let Found::Entry { json, .. } = &items[0] else { panic!() };
        assert_eq!(json, "{\"loc\":\"https://old.example/a\",\"loc\":\"x\"}", "as sent: a field twice stays twice");
        let rewrite =
            ReadOptions { rewrites: vec![("https://old.example/".into(), "https://new.example/".into())], ..options() };
        let (items, _) = read_all(ndjson.as_bytes(), &rewrite);
        assert_eq!(
            entries(&items)[1],
            json!({"loc": "https://new.example/b", "images": [{"loc": "https://new.example/i.jpg"}]})
        );
        let long = format!("{{\"loc\":\"{}\"}}\n{{\"loc\":\"https://www.example.com/next\"}}\n", "a".repeat(70_000));
        let (items, result) = read_all(long.as_bytes(), &options());
        result.unwrap();
        let Found::Invalid { line: 1, reason, .. } = &items[0] else { panic!("not refused") };
        assert_eq!(reason, "the line is longer than 65536 bytes");
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/next"})], "the next line is read");
    }

    #[test]
    fn rewrites_apply_to_every_entry_url_and_the_first_match_wins() {
        let rewrite = ReadOptions {
            rewrites: vec![
                ("https://staging.example.com/".into(), "https://www.example.com/".into()),
                ("https://staging.example.com/p".into(), "https://never.example/".into()),
            ],
            ..options()
        };
        let (items, _) =
            read_all(FULL.replace("https://www.example.com/", "https://staging.example.com/").as_bytes(), &rewrite);
        let entry = &entries(&items)[0];
        assert_eq!(entry["loc"], "https://www.example.com/p?a=1&b=2");
        assert_eq!(entry["alternates"][0]["href"], "https://www.example.com/de/p");
        assert_eq!(entry["videos"][0]["uploader"]["info"], "https://www.example.com/u");
        assert_eq!(entry["images"][0]["loc"], "https://cdn.example.com/1.jpg", "other hosts untouched");
        let Found::Entry { loc, .. } = &items[0] else { panic!() };
        assert_eq!(loc.as_deref(), Some("https://staging.example.com/p?a=1&b=2"), "the rejects file shows it as read");
    }

    #[test]
    fn a_sitemap_past_the_protocols_limits_is_read_up_to_them() {
        let mut many = String::from("<urlset>");
        for i in 0..=MAX_ENTRIES {
            many.push_str(&format!("<url><loc>https://www.example.com/{i}</loc></url>"));
        }
        many.push_str("</urlset>");
        let (items, report) = read_all(many.as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!(items.len() as u64, MAX_ENTRIES);
        assert_eq!(report.cut.as_deref(), Some("it lists more than 50000 URLs: the first 50000 were read"));

        // A gzip bomb: 60 MB of comments in 60 KB; read up to 50 MiB, in bounded memory.
        let comment = format!("<!--{}-->", "x".repeat(1000));
        let mut bomb = String::from("<urlset><url><loc>https://www.example.com/first</loc></url>");
        bomb.push_str(&comment.repeat(60_000));
        bomb.push_str("<url><loc>https://www.example.com/last</loc></url></urlset>");
        let compressed = gzip(bomb.as_bytes());
        assert!(compressed.len() < 1_000_000, "{}", compressed.len());
        let (items, report) = read_all(&compressed, &options());
        let report = report.unwrap();
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/first"})]);
        assert_eq!(report.cut.as_deref(), Some("it is larger than 52428800 bytes uncompressed: read up to the limit"));
        // Exactly at the limit is whole.
        let mut exact = String::from("<urlset><url><loc>https://www.example.com/a</loc></url>");
        let tail = "</urlset>";
        while MAX_BYTES as usize - exact.len() - tail.len() > 2 * comment.len() {
            exact.push_str(&comment);
        }
        let pad = MAX_BYTES as usize - exact.len() - tail.len() - 7;
        exact.push_str(&format!("<!--{}-->", " ".repeat(pad)));
        exact.push_str(tail);
        assert_eq!(exact.len() as u64, MAX_BYTES);
        let (items, report) = read_all(exact.as_bytes(), &options());
        assert_eq!((items.len(), report.unwrap().cut), (1, None));
        let (items, report) = read_all(format!("{exact}\n").as_bytes(), &options());
        assert_eq!(items.len(), 1);
        assert!(report.unwrap().cut.is_some(), "one byte more is past the limit");
    }

    #[test]
    fn hostile_or_broken_input_is_an_error_not_a_panic_or_a_hoard() {
        let cases: [(&[u8], &str); 8] = [
            (b"", "it is empty"),
            (b"<html><body>Not found</body></html>", "it is not a sitemap: its root element is <html>"),
            (b"<urlset><url><loc>https://www.example.com/a</loc></urlset>", "not well-formed XML (line 1)"),
            (b"<urlset><url><loc>https://www.example.com/&nbsp;</loc></url></urlset>", "undefined entity &nbsp;"),
            (b"<urlset><url><loc>https://www.example.com/a</loc></url>", "ends before its root element is closed"),
            (b"<?xml version=\"1.0\"?><!-- nothing -->", "it holds no XML element"),
            (b"<urlset><url><loc>https://www.example.com/\xff</loc></url></urlset>", "not well-formed XML"),
            (b"\x1f\x8b\x08\x00garbage", "cannot read: "),
        ];
        for (bytes, expected) in cases {
            let (_, result) = read_all(bytes, &options());
            let message = result.map(|_| String::new()).unwrap_or_else(|e| e.message);
            assert!(message.contains(expected), "{:?}: {message}", String::from_utf8_lossy(bytes));
        }
        let deep = format!("<urlset>{}", "<a>".repeat(100));
        let (_, result) = read_all(deep.as_bytes(), &options());
        assert!(result.unwrap_err().message.contains("nested more than 32 deep"));
        let long = format!("<urlset><url><loc>https://www.example.com/{}</loc></url></urlset>", "a".repeat(2 << 20));
        let (_, result) = read_all(long.as_bytes(), &options());
        assert!(result.unwrap_err().message.contains("longer than 1048576 bytes"));
        let wide = format!(
            "<urlset><url><loc>https://www.example.com/w</loc>{}</url><url><loc>https://www.example.com/ok</loc></url></urlset>",
            "<image:image><image:loc>https://c.example/i.jpg</image:loc></image:image>".repeat(3000)
        );
        let (items, result) = read_all(wide.as_bytes(), &options());
        result.unwrap();
        assert_eq!(
            items[0],
            Found::Invalid {
                line: 1,
                loc: Some("https://www.example.com/w".into()),
                reason: "it holds more than 4096 elements".into()
            }
        );
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/ok"})], "the next entry is read");
    }

    /// A reader that gives one byte a read, as a pipe or an HTTP body may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let Some((first, rest)) = self.0.split_first() else { return Ok(0) };
            if out.is_empty() {
                return Ok(0);
            }
            out[0] = *first;
            self.0 = rest;
            Ok(1)
        }
    }

    #[test]
    fn gzip_and_a_byte_order_mark_are_known_however_the_bytes_arrive() {
        let xml = "\u{feff}<urlset><url><loc>https://www.example.com/a</loc></url></urlset>";
        for bytes in [xml.as_bytes().to_vec(), gzip(xml.as_bytes())] {
            let mut items = Vec::new();
            let report = read(Trickle(&bytes), &options(), &mut |f| {
                items.push(f);
                ControlFlow::Continue(())
            })
            .unwrap();
            assert_eq!(report.format, Some(Format::UrlSet));
            assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/a"})]);
        }
    }

    #[test]
    fn a_line_the_limit_cuts_short_is_dropped_and_a_bad_line_is_skipped() {
        let url = "https://www.example.com/abcdefghijklmnopqrstuvwxyz\n";
        let mut text = "\n".repeat(MAX_BYTES as usize - 20);
        text.push_str(url);
        let (items, report) = read_all(text.as_bytes(), &options());
        assert!(items.is_empty(), "never a truncated URL: {items:?}");
        assert!(report.unwrap().cut.is_some());

        let robots = format!(
            "{}\nSitemap: https://a.example/other.xml-that-is-cut.xml\n",
            "#".repeat(MAX_ROBOTS_BYTES as usize - 20)
        );
        let (items, _) = read_all(robots.as_bytes(), &ReadOptions { robots: true, ..options() });
        assert!(items.is_empty(), "never a truncated sitemap URL: {items:?}");

        let mut bytes = b"https://www.example.com/a\n".to_vec();
        bytes.extend(vec![b'x'; 2 << 20]);
        bytes.extend(b"\nhttps://www.example.com/\xff\nhttps://www.example.com/b\n");
        let (items, report) = read_all(&bytes, &options());
        report.unwrap();
        let kinds: Vec<String> = items
            .iter()
            .map(|f| match f {
                Found::Entry { loc, .. } => loc.clone().unwrap(),
                Found::Invalid { reason, .. } => reason.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds[0], "https://www.example.com/a");
        assert_eq!(
            kinds,
            [
                "https://www.example.com/a",
                "the line is longer than 1048576 bytes",
                "the line is not valid UTF-8",
                "https://www.example.com/b"
            ],
            "the rest is read"
        );
    }

    #[test]
    fn a_line_the_compressed_limit_cuts_between_gzip_members_is_dropped() {
        // Empty members (inflating to nothing) up to the compressed limit, which then falls exactly between the
        // member holding the start of a URL and the member holding its end.
        let start = gzip(b"https://www.example.com/kept\nhttps://www.example.com/trunc");
        let empty = gzip(b"");
        let mut bytes = Vec::with_capacity(MAX_COMPRESSED_BYTES as usize + 64);
        while bytes.len() + empty.len() + start.len() <= MAX_COMPRESSED_BYTES as usize {
            bytes.extend_from_slice(&empty);
        }
        // Fill the rest with a member whose stored size makes the boundary exact.
        let rest = MAX_COMPRESSED_BYTES as usize - bytes.len() - start.len();
        assert!(rest == 0 || rest >= empty.len(), "{rest}");
        if rest > 0 {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
            z.write_all(&vec![b'\n'; rest - empty.len() - 5]).unwrap();
            bytes.extend(z.finish().unwrap());
        }
        bytes.extend_from_slice(&start);
        assert_eq!(bytes.len() as u64, MAX_COMPRESSED_BYTES);
        bytes.extend(gzip(b"ated\n"));
        let (items, report) = read_all(&bytes, &options());
        assert!(report.unwrap().cut.is_some());
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/kept"})], "never /trunc");
    }

    #[test]
    fn ndjson_has_no_sitemap_limits() {
        let line = format!("{{\"loc\":\"https://www.example.com/{}\"}}\n", "a".repeat(1000));
        let n = MAX_BYTES as usize / line.len() + 10;
        let (items, report) = read_all(line.repeat(n).as_bytes(), &options());
        let report = report.unwrap();
        assert_eq!((items.len(), report.cut), (n, None));
    }

    #[test]
    fn a_field_past_its_bound_makes_its_entry_invalid_not_a_hoard() {
        let xml = format!(
            "<urlset><url><loc>https://www.example.com/{}</loc></url><url><loc>https://www.example.com/ok</loc></url></urlset>",
            "a&amp;".repeat(40_000)
        );
        let (items, report) = read_all(xml.as_bytes(), &options());
        report.unwrap();
        let Found::Invalid { reason, .. } = &items[0] else { panic!("not refused") };
        assert_eq!(reason, "a field of it is longer than 65536 bytes, or all of them than 4194304");
        assert_eq!(entries(&items), [json!({"loc": "https://www.example.com/ok"})]);
        // Many fields within their bound, past the entry's.
        let wide = format!(
            "<urlset><url><loc>https://www.example.com/w</loc>{}</url></urlset>",
            format!("<image:image><image:loc>https://c.example/{}</image:loc></image:image>", "i".repeat(60_000))
                .repeat(80)
        );
        let (items, report) = read_all(wide.as_bytes(), &options());
        report.unwrap();
        assert!(matches!(&items[0], Found::Invalid { .. }), "refused");
    }

    #[test]
    fn two_roots_an_empty_loc_and_another_encoding_are_said() {
        let two = "<urlset></urlset><sitemapindex><sitemap><loc>https://x.test/s.xml</loc></sitemap></sitemapindex>";
        let (items, result) = read_all(two.as_bytes(), &options());
        assert!(items.is_empty());
        assert!(result.unwrap_err().message.contains("a second root element <sitemapindex>"));
        let empty = "<sitemapindex><sitemap><loc> </loc></sitemap></sitemapindex>";
        let (items, report) = read_all(empty.as_bytes(), &options());
        assert!(items.is_empty());
        assert_eq!(report.unwrap().unreadable.len(), 1);
        let latin = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><urlset><url><loc>https://x.test/caf\xe9</loc></url></urlset>";
        let (_, result) = read_all(latin, &options());
        assert!(result.unwrap_err().message.contains("declares the encoding ISO-8859-1: sitemaps are UTF-8"));
    }

    #[test]
    fn the_reader_stops_when_told() {
        let (mut seen, many) = (0, "https://www.example.com/a\n".repeat(10));
        let result = read(many.as_bytes(), &options(), &mut |_| {
            seen += 1;
            if seen == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        });
        assert!(result.is_ok());
        assert_eq!(seen, 3);
    }
}
