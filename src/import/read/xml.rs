//! A sitemap or a sitemap index by a streaming XML reader (quick-xml): the state machine that follows the
//! elements, namespaces resolved (or guessed by their usual prefix), each `<url>` or `<sitemap>` gathered as a small
//! tree of [`Node`]s within [`MAX_ENTRY_ELEMENTS`] and [`MAX_ENTRY_BYTES`], what is odd or skipped counted in the
//! report. An entry's tree becomes JSON in [`super::to_json`].

use std::io::BufRead;
use std::ops::ControlFlow;

use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::{NsReader, XmlVersion};

use super::metered::Metered;
use super::to_json::entry_json;
use super::{Format, Found, MAX_DEPTH, MAX_ENTRIES, ReadOptions, Report, shorten};

/// The extension an element belongs to, by its namespace (or, when its prefix is declared nowhere, as real files
/// do, by the prefix's usual name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ns {
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
pub(super) struct Node {
    pub(super) ns: Option<Ns>,
    /// Lower case.
    pub(super) name: String,
    /// As written, for notices.
    pub(super) shown: String,
    pub(super) attrs: Vec<(String, String)>,
    pub(super) text: String,
    pub(super) children: Vec<Node>,
}

impl Node {
    pub(super) fn text(&self) -> &str {
        self.text.trim()
    }

    pub(super) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim())
    }
}

pub(super) fn read_xml<R: BufRead>(
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
pub(super) fn skip(report: &mut Report, node: &Node) {
    let ns = node.ns.unwrap_or(Ns::Other);
    if DEPRECATED.contains(&(ns, node.name.as_str())) {
        report.notice(format!("deprecated <{}{}> skipped", prefix(ns), node.name));
    } else {
        report.notice(format!("<{}> is not kept: skipped", shorten(&node.shown)));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{entries, options, read_all};
    use super::*;

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
}
