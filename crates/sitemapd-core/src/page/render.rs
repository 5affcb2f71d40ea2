//! Deterministic XML rendering of sitemap pages and the index. The exact bytes an entry renders to are what the
//! page-assignment accounting counts, so both go through [`write_url`].

use quick_xml::escape::escape;

use super::Fields;
use crate::domain::ext::{Alternate, Extensions, Namespaces, News, Video};
use crate::domain::{MAX_LOC_LEN, Priority};

pub const URLSET_HEAD: &str =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
pub const URLSET_TAIL: &str = "</urlset>\n";

pub const IMAGE_NS: &str = "http://www.google.com/schemas/sitemap-image/1.1";
pub const VIDEO_NS: &str = "http://www.google.com/schemas/sitemap-video/1.1";
pub const NEWS_NS: &str = "http://www.google.com/schemas/sitemap-news/0.9";
pub const XHTML_NS: &str = "http://www.w3.org/1999/xhtml";

/// The head of a page whose entries use the extension namespaces `ns`: exactly [`URLSET_HEAD`] when they use none
/// (so that a page without extensions renders as it always has), else the same with the namespaces declared in a
/// fixed order.
pub fn urlset_head(ns: Namespaces) -> std::borrow::Cow<'static, str> {
    if !ns.any() {
        return URLSET_HEAD.into();
    }
    let mut head = String::from(URLSET_HEAD.strip_suffix(">\n").expect("the head ends the start tag"));
    for (used, prefix, uri) in
        [(ns.image, "image", IMAGE_NS), (ns.video, "video", VIDEO_NS), (ns.xhtml, "xhtml", XHTML_NS)]
    {
        if used {
            head.push_str(&format!(" xmlns:{prefix}=\"{uri}\""));
        }
    }
    head.push_str(">\n");
    head.into()
}

/// The head of the news sitemap.
pub const NEWS_HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                             xmlns:news=\"http://www.google.com/schemas/sitemap-news/0.9\">\n";
pub const INDEX_HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
pub const INDEX_TAIL: &str = "</sitemapindex>\n";

/// Bytes set aside in every page for the document around the entries. The head and tail take 110 today; the rest
/// leaves room for what is planned (extension namespace declarations, an XSL stylesheet instruction) without ever
/// pushing an already-full page over its byte limit.
pub const ENVELOPE_RESERVE: u64 = 1024;

/// Bumped whenever rendered bytes change for the same stored data, so that ETags change with them.
pub const RENDER_VERSION: u32 = 1;

/// Bumped whenever the index's bytes change for the same page table; part of the index's ETag only, so that page
/// ETags stay as they were. 2: `<lastmod>` in milliseconds.
pub const INDEX_VERSION: u32 = 2;

/// Appends one `<url>…</url>\n` line.
pub fn write_url(out: &mut Vec<u8>, loc: &str, f: &Fields) {
    out.extend_from_slice(b"<url><loc>");
    out.extend_from_slice(escape(loc).as_bytes());
    out.extend_from_slice(b"</loc>");
    if let Some(lastmod) = &f.lastmod {
        element(out, "lastmod", lastmod);
    }
    if let Some(changefreq) = &f.changefreq {
        element(out, "changefreq", changefreq);
    }
    if let Some(priority) = f.priority {
        element(out, "priority", &priority.render());
    }
    if let Some(ext) = &f.ext {
        write_extensions(out, ext);
    }
    out.extend_from_slice(b"</url>\n");
}

/// The extension elements of a `<url>` in a page, after the core ones and in a fixed order: images, videos, then
/// alternates. News is rendered only in the news sitemap ([`write_news_url`]).
fn write_extensions(out: &mut Vec<u8>, ext: &Extensions) {
    for image in &ext.images {
        out.extend_from_slice(b"<image:image>");
        element(out, "image:loc", &image.loc);
        out.extend_from_slice(b"</image:image>");
    }
    for video in &ext.videos {
        write_video(out, video);
    }
    for Alternate { hreflang, href } in &ext.alternates {
        out.extend_from_slice(b"<xhtml:link rel=\"alternate\" hreflang=\"");
        out.extend_from_slice(escape(hreflang.as_str()).as_bytes());
        out.extend_from_slice(b"\" href=\"");
        out.extend_from_slice(escape(href.as_str()).as_bytes());
        out.extend_from_slice(b"\"/>");
    }
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// `<video:video>`, its children in the order of Google's schema.
fn write_video(out: &mut Vec<u8>, v: &Video) {
    out.extend_from_slice(b"<video:video>");
    element(out, "video:thumbnail_loc", &v.thumbnail_loc);
    element(out, "video:title", &v.title);
    element(out, "video:description", &v.description);
    if let Some(loc) = &v.content_loc {
        element(out, "video:content_loc", loc);
    }
    if let Some(loc) = &v.player_loc {
        element(out, "video:player_loc", loc);
    }
    if let Some(duration) = v.duration {
        element(out, "video:duration", &duration.to_string());
    }
    if let Some(date) = &v.expiration_date {
        element(out, "video:expiration_date", date);
    }
    if let Some(rating) = v.rating {
        element(out, "video:rating", &rating.render());
    }
    if let Some(count) = v.view_count {
        element(out, "video:view_count", &count.to_string());
    }
    if let Some(date) = &v.publication_date {
        element(out, "video:publication_date", date);
    }
    for tag in &v.tags {
        element(out, "video:tag", tag);
    }
    if let Some(value) = v.family_friendly {
        element(out, "video:family_friendly", yes_no(value));
    }
    if let Some(r) = &v.restriction {
        with_attribute(out, "video:restriction", "relationship", r.relationship.as_str(), &r.countries.join(" "));
    }
    if let Some(value) = v.requires_subscription {
        element(out, "video:requires_subscription", yes_no(value));
    }
    if let Some(u) = &v.uploader {
        match &u.info {
            Some(info) => with_attribute(out, "video:uploader", "info", info, &u.name),
            None => element(out, "video:uploader", &u.name),
        }
    }
    if let Some(p) = &v.platform {
        with_attribute(out, "video:platform", "relationship", p.relationship.as_str(), &p.platforms.join(" "));
    }
    if let Some(value) = v.live {
        element(out, "video:live", yes_no(value));
    }
    out.extend_from_slice(b"</video:video>");
}

/// One `<url>` of the news sitemap: its loc and its `<news:news>`.
pub fn write_news_url(out: &mut Vec<u8>, loc: &str, news: &News) {
    out.extend_from_slice(b"<url><loc>");
    out.extend_from_slice(escape(loc).as_bytes());
    out.extend_from_slice(b"</loc><news:news><news:publication>");
    element(out, "news:name", &news.publication.name);
    element(out, "news:language", &news.publication.language);
    out.extend_from_slice(b"</news:publication>");
    element(out, "news:publication_date", &news.publication_date);
    element(out, "news:title", &news.title);
    out.extend_from_slice(b"</news:news></url>\n");
}

fn with_attribute(out: &mut Vec<u8>, name: &str, attribute: &str, value: &str, text: &str) {
    out.push(b'<');
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    out.extend_from_slice(attribute.as_bytes());
    out.extend_from_slice(b"=\"");
    out.extend_from_slice(escape(value).as_bytes());
    out.extend_from_slice(b"\">");
    out.extend_from_slice(escape(text).as_bytes());
    out.extend_from_slice(b"</");
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
}

/// The number of bytes [`write_url`] writes for these fields.
pub fn url_len(loc: &str, f: &Fields) -> u64 {
    let mut buf = Vec::with_capacity(256);
    write_url(&mut buf, loc, f);
    buf.len() as u64
}

/// An upper bound on any valid entry's rendered size: the longest loc made of the character whose escape is
/// longest, plus the longest value of every optional field.
pub fn max_url_len() -> u64 {
    let loc = "'".repeat(MAX_LOC_LEN - 1);
    let fields = Fields {
        lastmod: Some("2024-05-01T08:20:07.123456789Z".to_owned()),
        changefreq: Some("monthly".to_owned()),
        priority: Priority::from_millionths(999_999),
        ext: None,
    };
    url_len(&loc, &fields)
}

fn element(out: &mut Vec<u8>, name: &str, text: &str) {
    out.push(b'<');
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
    out.extend_from_slice(escape(text).as_bytes());
    out.extend_from_slice(b"</");
    out.extend_from_slice(name.as_bytes());
    out.push(b'>');
}

/// One `<sitemap>` line of the index.
pub fn write_index_entry(out: &mut Vec<u8>, loc: &str, lastmod: &str) {
    out.extend_from_slice(b"<sitemap><loc>");
    out.extend_from_slice(escape(loc).as_bytes());
    out.extend_from_slice(b"</loc>");
    element(out, "lastmod", lastmod);
    out.extend_from_slice(b"</sitemap>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(loc: &str, f: &Fields) -> String {
        let mut out = Vec::new();
        write_url(&mut out, loc, f);
        String::from_utf8(out).unwrap()
    }

    fn fields(lastmod: Option<&str>, changefreq: Option<&str>, priority: Option<i64>) -> Fields {
        Fields {
            lastmod: lastmod.map(str::to_owned),
            changefreq: changefreq.map(str::to_owned),
            priority: priority.and_then(Priority::from_millionths),
            ext: None,
        }
    }

    #[test]
    fn renders_all_fields_in_schema_order() {
        let s = render("https://x.test/a", &fields(Some("2024-05-01"), Some("daily"), Some(800_000)));
        assert_eq!(
            s,
            "<url><loc>https://x.test/a</loc><lastmod>2024-05-01</lastmod><changefreq>daily</changefreq>\
             <priority>0.8</priority></url>\n"
        );
    }

    #[test]
    fn escapes_all_five_entities() {
        let s = render("https://x.test/?a=1&b='2'\"<>", &Fields::default());
        assert_eq!(s, "<url><loc>https://x.test/?a=1&amp;b=&apos;2&apos;&quot;&lt;&gt;</loc></url>\n");
    }

    #[test]
    fn url_len_matches_rendered_bytes() {
        let f = fields(None, Some("never"), Some(1_000_000));
        assert_eq!(url_len("https://x.test/&", &f), render("https://x.test/&", &f).len() as u64);
    }

    #[test]
    fn envelope_reserve_covers_head_and_tail() {
        assert!(((URLSET_HEAD.len() + URLSET_TAIL.len()) as u64) < ENVELOPE_RESERVE);
    }

    #[test]
    fn the_head_of_a_page_without_extensions_is_as_it_always_was() {
        assert_eq!(urlset_head(Namespaces::default()), URLSET_HEAD);
        let all = Namespaces { image: true, video: true, xhtml: true };
        let head = urlset_head(all);
        assert!(head.starts_with(URLSET_HEAD.strip_suffix(">\n").unwrap()), "{head}");
        assert!(
            head.ends_with(&format!(
                " xmlns:image=\"{IMAGE_NS}\" xmlns:video=\"{VIDEO_NS}\" xmlns:xhtml=\"{XHTML_NS}\">\n"
            )),
            "{head}"
        );
        let video = urlset_head(Namespaces { video: true, ..Namespaces::default() });
        assert!(!video.contains("xmlns:image") && video.contains("xmlns:video"), "{video}");
        assert!((head.len() + URLSET_TAIL.len()) as u64 <= ENVELOPE_RESERVE, "the reserve covers the largest head");
        assert!((NEWS_HEAD.len() + URLSET_TAIL.len()) as u64 <= ENVELOPE_RESERVE);
    }

    #[test]
    fn max_url_len_bounds_a_long_ampersand_loc() {
        let loc = format!("https://x.test/?{}", "&".repeat(MAX_LOC_LEN - 1 - 16));
        let f = fields(Some("2024-05-01T08:20:07Z"), Some("always"), Some(123_456));
        assert!(url_len(&loc, &f) <= max_url_len());
    }
}
