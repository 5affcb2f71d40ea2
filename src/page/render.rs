//! Deterministic XML rendering of sitemap pages and the index. The exact bytes an entry renders to are what the
//! page-assignment accounting counts, so both go through [`write_url`].

use quick_xml::escape::escape;

use super::Fields;
use crate::domain::{MAX_LOC_LEN, Priority};

pub const URLSET_HEAD: &str =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
pub const URLSET_TAIL: &str = "</urlset>\n";
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
    out.extend_from_slice(b"</url>\n");
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
    fn max_url_len_bounds_a_long_ampersand_loc() {
        let loc = format!("https://x.test/?{}", "&".repeat(MAX_LOC_LEN - 1 - 16));
        let f = fields(Some("2024-05-01T08:20:07Z"), Some("always"), Some(123_456));
        assert!(url_len(&loc, &f) <= max_url_len());
    }
}
