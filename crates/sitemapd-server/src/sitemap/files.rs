//! The public file names of the sitemaps a site serves under `/`, read one way only: `sitemap-N.xml[.gz]` and
//! `sitemap-N.txt[.gz]` (the default section's pages), `sitemap-<section>-N.{xml,txt}[.gz]` (a named section's),
//! `sitemap-<section>.xml[.gz]` (a section's index), `sitemap-news.xml[.gz]` and `sitemap-removed.xml[.gz]`.
//! `sitemap.xml`, the index, is routed apart. Beside them, with `feeds.enabled`, the Atom feeds: `feed.atom` (the
//! site's) and `feed-<section>.atom` (a named section's), [`FeedFile`]. Pure.

use crate::domain::Section;
use crate::page::SECTION_SHIFT;

/// The largest page number a section holds: what its page ids have room for (`page::number_of`).
pub const MAX_PAGE_NUMBER: i64 = (1 << SECTION_SHIFT) - 1;

/// The form a page is served in, by its file name's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `.xml`: the `<urlset>`, gzip when the client accepts it.
    Xml,
    /// `.xml.gz`: the `<urlset>` as a gzip file.
    XmlGz,
    /// `.txt`: the plain text sitemap (one loc a line), gzip when the client accepts it.
    Txt,
    /// `.txt.gz`: the text sitemap as a gzip file.
    TxtGz,
}

impl Format {
    /// Whether the file is a gzip file (always gzip, `application/gzip`) rather than negotiated.
    pub fn gz_file(self) -> bool {
        matches!(self, Self::XmlGz | Self::TxtGz)
    }

    /// Whether it is the text form.
    pub fn text(self) -> bool {
        matches!(self, Self::Txt | Self::TxtGz)
    }
}

/// One public sitemap file, as its name says. A name that says none is `None`: 404.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SitemapFile<'a> {
    /// Page `number` (1..=[`MAX_PAGE_NUMBER`]) of `section` (`None`: the default section).
    Page { section: Option<&'a str>, number: i64, format: Format },
    /// The index of one section's pages.
    SectionIndex { section: &'a str, gz: bool },
    /// The news sitemap.
    News { gz: bool },
    /// The removed-URLs sitemap.
    Removed { gz: bool },
}

impl<'a> SitemapFile<'a> {
    /// Reads `file`, the raw request path without its leading `/` (not percent-decoded: a file has one name).
    /// The stem between `sitemap-` and the extension is `news` or `removed` (XML only), a page number (digits,
    /// no leading zero), `<section>-<number>` (split at the last hyphen: a section name never ends with a hyphen
    /// and digits), or `<section>` alone (a section's index, XML only).
    pub fn parse(file: &'a str) -> Option<Self> {
        let rest = file.strip_prefix("sitemap-")?;
        let (stem, format) =
            [(".xml.gz", Format::XmlGz), (".xml", Format::Xml), (".txt.gz", Format::TxtGz), (".txt", Format::Txt)]
                .into_iter()
                .find_map(|(ext, format)| Some((rest.strip_suffix(ext)?, format)))?;
        let xml_gz = match format {
            Format::Xml => Some(false),
            Format::XmlGz => Some(true),
            Format::Txt | Format::TxtGz => None,
        };
        match stem {
            "news" => return xml_gz.map(|gz| Self::News { gz }),
            "removed" => return xml_gz.map(|gz| Self::Removed { gz }),
            _ => {}
        }
        if let Some(number) = page_number(stem) {
            return Some(Self::Page { section: None, number, format });
        }
        if let Some((section, number)) = stem.rsplit_once('-')
            && let Some(number) = page_number(number)
        {
            return Section::is_valid(section).then_some(Self::Page { section: Some(section), number, format });
        }
        let gz = xml_gz?;
        Section::is_valid(stem).then_some(Self::SectionIndex { section: stem, gz })
    }
}

/// The site's Atom feed's file name.
pub const SITE_FEED_FILE: &str = "feed.atom";

/// An Atom feed's file name: `feed.atom` (the site's) or `feed-<section>.atom` (a named section's), read one way
/// only. The feeds are served by `src/feed/`; the names are here, beside the sitemaps', so that `robots.txt` and
/// the routes name them alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedFile<'a> {
    /// `None`: the site's feed.
    pub section: Option<&'a str>,
}

impl<'a> FeedFile<'a> {
    /// Reads `file`, the raw request path without its leading `/`: `feed.atom`, or `feed-<section>.atom` with a valid
    /// section name ([`Section::is_valid`]: `feed-default.atom` and the like are no feed's).
    pub fn parse(file: &'a str) -> Option<Self> {
        if file == SITE_FEED_FILE {
            return Some(Self { section: None });
        }
        let section = file.strip_prefix("feed-")?.strip_suffix(".atom")?;
        Section::is_valid(section).then_some(Self { section: Some(section) })
    }

    /// The file name: what [`FeedFile::parse`] reads back.
    pub fn name(section: Option<&str>) -> String {
        match section {
            None => SITE_FEED_FILE.to_owned(),
            Some(section) => format!("feed-{section}.atom"),
        }
    }
}

/// A page number as a file name writes it: 1 to [`MAX_PAGE_NUMBER`] in ASCII digits, no sign, no leading zero.
fn page_number(digits: &str) -> Option<i64> {
    // Seven digits hold MAX_PAGE_NUMBER; a longer string is refused before it is parsed.
    if digits.is_empty() || digits.len() > 7 || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: i64 = digits.parse().ok()?;
    (1..=MAX_PAGE_NUMBER).contains(&number).then_some(number)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Format::{Txt, TxtGz, Xml, XmlGz};
    use super::*;

    fn page(section: Option<&str>, number: i64, format: Format) -> Option<SitemapFile<'_>> {
        Some(SitemapFile::Page { section, number, format })
    }

    #[test]
    fn default_section_pages_in_every_format() {
        assert_eq!(SitemapFile::parse("sitemap-1.xml"), page(None, 1, Xml));
        assert_eq!(SitemapFile::parse("sitemap-42.xml.gz"), page(None, 42, XmlGz));
        assert_eq!(SitemapFile::parse("sitemap-7.txt"), page(None, 7, Txt));
        assert_eq!(SitemapFile::parse("sitemap-10.txt.gz"), page(None, 10, TxtGz));
        assert_eq!(SitemapFile::parse("sitemap-1048575.xml"), page(None, MAX_PAGE_NUMBER, Xml));
    }

    #[test]
    fn named_section_pages_split_at_the_last_hyphen() {
        assert_eq!(SitemapFile::parse("sitemap-products-1.xml"), page(Some("products"), 1, Xml));
        assert_eq!(SitemapFile::parse("sitemap-blog-posts-12.txt.gz"), page(Some("blog-posts"), 12, TxtGz));
        assert_eq!(SitemapFile::parse("sitemap-top10-3.txt"), page(Some("top10"), 3, Txt));
        assert_eq!(SitemapFile::parse("sitemap-a-2.xml.gz"), page(Some("a"), 2, XmlGz));
        assert_eq!(SitemapFile::parse("sitemap-top-10.xml"), page(Some("top"), 10, Xml));
        // A section name never ends with a hyphen and digits, so this is no page of `top-10`, nor of `top`.
        assert_eq!(SitemapFile::parse("sitemap-top-10-2.xml"), None);
    }

    #[test]
    fn section_indexes_news_and_removed_are_xml_only() {
        assert_eq!(
            SitemapFile::parse("sitemap-products.xml"),
            Some(SitemapFile::SectionIndex { section: "products", gz: false })
        );
        assert_eq!(
            SitemapFile::parse("sitemap-blog-posts.xml.gz"),
            Some(SitemapFile::SectionIndex { section: "blog-posts", gz: true })
        );
        // A stem whose last part is not a number is a section's name.
        assert_eq!(
            SitemapFile::parse("sitemap-products-x.xml"),
            Some(SitemapFile::SectionIndex { section: "products-x", gz: false })
        );
        assert_eq!(SitemapFile::parse("sitemap-news.xml"), Some(SitemapFile::News { gz: false }));
        assert_eq!(SitemapFile::parse("sitemap-news.xml.gz"), Some(SitemapFile::News { gz: true }));
        assert_eq!(SitemapFile::parse("sitemap-removed.xml"), Some(SitemapFile::Removed { gz: false }));
        assert_eq!(SitemapFile::parse("sitemap-removed.xml.gz"), Some(SitemapFile::Removed { gz: true }));
        for bad in ["sitemap-products.txt", "sitemap-products.txt.gz", "sitemap-news.txt", "sitemap-removed.txt.gz"] {
            assert_eq!(SitemapFile::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn everything_else_is_no_file() {
        for bad in [
            // Not a page number: zero, leading zeros, signs, too large, not ASCII digits.
            "sitemap-0.xml",
            "sitemap-01.xml",
            "sitemap-007.txt",
            "sitemap-+1.xml",
            "sitemap--1.xml",
            "sitemap-1048576.xml",
            "sitemap-99999999999999999999.xml",
            "sitemap-9223372036854775808.txt",
            "sitemap-\u{661}.xml",
            "sitemap-1\u{0}.xml",
            "sitemap- 1.xml",
            "sitemap-1 .xml",
            // The extension: missing, doubled, other, other case, encoded.
            "sitemap-1",
            "sitemap-1.",
            "sitemap-1.xmlx",
            "sitemap-1.xml.gz.gz",
            "sitemap-1.gz",
            "sitemap-1.XML",
            "sitemap-1.Txt",
            "sitemap-1.html",
            "sitemap-1%2exml",
            "sitemap-1.xml%2egz",
            "sitemap-1.txt/",
            // The prefix.
            "sitemap.xml",
            "sitemap.xml.gz",
            "sitemap.txt",
            "sitemap-.xml",
            "sitemap-.txt.gz",
            "Sitemap-1.xml",
            "sitemap_1.xml",
            "sitemaps-1.xml",
            "/sitemap-1.xml",
            "sitemap%2d1.xml",
            "foo",
            "",
            // Sections: reserved, invalid (case, bytes, hyphens, length), empty, the page number missing or bad.
            "sitemap-news-1.xml",
            "sitemap-removed-2.txt",
            "sitemap-default-1.xml",
            "sitemap-index.xml",
            "sitemap-all.xml.gz",
            "sitemap-default.xml",
            "sitemap-Products-1.xml",
            "sitemap-PRODUCTS.xml",
            "sitemap-prod_ucts-1.xml",
            "sitemap-prod%2ducts-1.xml",
            "sitemap-caf\u{e9}-1.xml",
            "sitemap-1products-1.xml",
            "sitemap-products--1.xml",
            "sitemap-pro--ducts-1.xml",
            "sitemap-products-.xml",
            "sitemap--products.xml",
            "sitemap-products-0.xml",
            "sitemap-products-01.txt",
            "sitemap-products-1048576.xml",
            "sitemap-abcdefghijklmnopqrstuvwxyzabcdefg-1.xml",
            "sitemap-abcdefghijklmnopqrstuvwxyzabcdefg.xml",
        ] {
            assert_eq!(SitemapFile::parse(bad), None, "{bad:?}");
        }
        // 32 characters is the longest section name.
        let longest = format!("sitemap-{}-1.xml", "a".repeat(32));
        assert_eq!(SitemapFile::parse(&longest), page(Some(&longest[8..40]), 1, Xml));
    }

    #[test]
    fn feed_names_read_one_way() {
        assert_eq!(FeedFile::parse("feed.atom"), Some(FeedFile { section: None }));
        assert_eq!(FeedFile::parse("feed-products.atom"), Some(FeedFile { section: Some("products") }));
        assert_eq!(FeedFile::parse("feed-blog-posts.atom"), Some(FeedFile { section: Some("blog-posts") }));
        for section in [None, Some("products"), Some("top-10x")] {
            assert_eq!(FeedFile::parse(&FeedFile::name(section)), Some(FeedFile { section }));
        }
        for bad in [
            "feed",
            "feed.xml",
            "feed.atom.gz",
            "feed-.atom",
            "feed-default.atom",
            "feed-news.atom",
            "feed-Products.atom",
            "feed-products-1.atom",
            "feed-products.ATOM",
            "feed%2eatom",
            "feed-pro%2ducts.atom",
            "feeds.atom",
            "/feed.atom",
            "sitemap-1.xml",
        ] {
            assert_eq!(FeedFile::parse(bad), None, "{bad:?}");
            assert_eq!(SitemapFile::parse(bad).is_some(), bad == "sitemap-1.xml", "{bad:?}");
        }
    }

    /// The names this service writes, for every format, section and number in range.
    fn name(section: Option<&str>, number: i64, format: Format) -> String {
        let ext = match format {
            Xml => "xml",
            XmlGz => "xml.gz",
            Txt => "txt",
            TxtGz => "txt.gz",
        };
        match section {
            None => format!("sitemap-{number}.{ext}"),
            Some(s) => format!("sitemap-{s}-{number}.{ext}"),
        }
    }

    fn format() -> impl Strategy<Value = Format> {
        prop_oneof![Just(Xml), Just(XmlGz), Just(Txt), Just(TxtGz)]
    }

    proptest! {
        /// Every name written for a page reads back as that page.
        #[test]
        fn written_names_read_back(
            section in proptest::option::of("[a-z]([a-z0-9]{0,6}-){0,3}[a-z][a-z0-9]{0,6}"),
            number in 1..=MAX_PAGE_NUMBER,
            format in format(),
        ) {
            let section = section.filter(|s| Section::is_valid(s));
            let file = name(section.as_deref(), number, format);
            prop_assert_eq!(SitemapFile::parse(&file), page(section.as_deref(), number, format));
        }

        /// Any string: no panic, and what is read is what the name says (a page reads back to the same name).
        #[test]
        fn any_name_reads_one_way_or_not_at_all(file in "(sitemap-)?[a-z0-9%._ -]{0,24}(\\.xml|\\.txt)?(\\.gz)?") {
            if let Some(SitemapFile::Page { section, number, format }) = SitemapFile::parse(&file) {
                prop_assert_eq!(name(section, number, format), file);
            }
        }
    }
}
