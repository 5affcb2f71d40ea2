//! Which section an import puts what it reads in: none (the default section), one for everything (`--section`), or
//! each source sitemap's own, taken from its file name (`--sections-from-names`), so a site moving from a plugin
//! keeps its structure: Yoast's `product-sitemap.xml` becomes section `product`, WordPress's
//! `wp-sitemap-posts-page-1.xml` section `page`, Shopify's `sitemap_products_1.xml` section `products`.
//!
//! [`section_from_file_name`] is pure: a name in, a valid [`Section`] or `None` out. It knows a few families of
//! names and takes nothing from a name it does not recognize (`sitemap.xml`, `feed.xml`, `sitemap_index.xml`): the
//! default section. A name that would make no valid section (too long, reserved as `news` is, odd bytes) is the
//! default section too; it never fails.

use super::fetch::Source;
use crate::domain::Section;

/// How an import assigns sections.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Sections {
    /// Every entry to the default section (an NDJSON line keeps the section it names).
    #[default]
    Off,
    /// Every entry read to this section (an NDJSON line's own section included).
    All(Section),
    /// Each source's entries to the section its file name says ([`section_from_file_name`]); a sitemap an index
    /// lists, to its own name's section, or the index's when its name says none. An NDJSON line that names a
    /// section keeps it.
    FromNames,
}

/// The longest name looked at: a longer one is no sitemap's file name a generator writes.
const MAX_NAME_BYTES: usize = 255;

/// The section a sitemap's file name says, if it says one. `name` may be a whole URL or path: its last segment
/// (before any `?` or `#`) is read. Lower-cased, `_` read as `-`, and one of the suffixes `.xml`, `.xml.gz`,
/// `.txt`, `.txt.gz`; then, the page number at the end dropped (see below):
///
/// | family | names | section |
/// |---|---|---|
/// | WordPress core | `wp-sitemap-posts-<type>-N`, `wp-sitemap-taxonomies-<taxonomy>-N`, `wp-sitemap-users-N` | `<type>`, `<taxonomy>`, `users` |
/// | Yoast, Rank Math, AIOSEO, Wix | `<name>-sitemap`, `<name>-sitemapN` | `<name>` |
/// | Django, sitemapd | `sitemap-<name>`, `sitemap-<name>-N` | `<name>` |
/// | Shopify, generator-style | `sitemap_<name>_N`, `sitemap_<name>N` | `<name>` |
///
/// A page number is the digits after the last hyphen or underscore (several groups, as a date's, all dropped:
/// `sitemap-posts-2024-01` is `posts`); in the underscore and plugin styles only (`sitemap_blog1`, `post-sitemap2`),
/// also digits glued to the name, which sitemapd and Django never write (`sitemap-v2` is section `v2`).
pub fn section_from_file_name(name: &str) -> Option<Section> {
    let name = name.split(['?', '#']).next().unwrap_or_default();
    let name = name.rsplit(['/', '\\']).next().unwrap_or_default();
    if name.len() > MAX_NAME_BYTES || !name.is_ascii() {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let stem = lower.strip_suffix(".gz").unwrap_or(&lower);
    let stem = stem.strip_suffix(".xml").or_else(|| stem.strip_suffix(".txt"))?;
    // The underscore style (Shopify's `sitemap_products_1`, `sitemap_blog1`) numbers its files either way.
    let underscores = stem.starts_with("sitemap_");
    let stem = stem.replace('_', "-");
    let section = if stem == "wp-sitemap" {
        // WordPress core's index, not a plugin's `<name>-sitemap`.
        return None;
    } else if let Some(rest) = stem.strip_prefix("wp-sitemap-") {
        wordpress(rest)?
    } else if let Some(rest) = stem.strip_prefix("sitemap-") {
        let (head, numbered) = drop_page_number(rest);
        if numbered || !underscores { head } else { drop_glued_digits(head) }
    } else {
        // `<name>-sitemap`, `<name>-sitemapN` (the plugins' page number is glued to the word).
        let head = stem.trim_end_matches(|c: char| c.is_ascii_digit());
        head.strip_suffix("-sitemap")?
    };
    Section::parse(section).ok()
}

/// WordPress core (since 5.5): `posts-<type>-N`, `taxonomies-<taxonomy>-N`, `users-N`, after `wp-sitemap-`.
fn wordpress(rest: &str) -> Option<&str> {
    let (head, numbered) = drop_page_number(rest);
    if !numbered {
        return None;
    }
    match head.split_once('-') {
        Some(("posts" | "taxonomies", name)) => Some(name),
        None if head == "users" => Some(head),
        _ => None,
    }
}

/// `name` without the `-N` groups at its end, and whether there was one.
fn drop_page_number(name: &str) -> (&str, bool) {
    let mut head = name;
    while let Some((before, last)) = head.rsplit_once('-') {
        if last.is_empty() || !last.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        head = before;
    }
    (head, head.len() < name.len())
}

/// `name` without the digits glued to its end (`blog1`: `blog`), unless it is all digits.
fn drop_glued_digits(name: &str) -> &str {
    match name.trim_end_matches(|c: char| c.is_ascii_digit()) {
        "" => name,
        head => head,
    }
}

/// The last path segment of where `source` is read from: a URL's (as written, percent-encoded), a file's; none for
/// standard input.
pub fn file_name(source: &Source) -> Option<String> {
    match source {
        Source::Url(url) => url.path_segments()?.next_back().map(str::to_owned),
        Source::File(path) => path.file_name()?.to_str().map(str::to_owned),
        Source::Stdin => None,
    }
}

impl Sections {
    /// The section of `source`'s entries: `inherited` is the section of the index that listed it, if any.
    pub fn of(&self, source: &Source, inherited: Option<&Section>) -> Option<Section> {
        match self {
            Self::Off => None,
            Self::All(section) => Some(section.clone()),
            Self::FromNames => {
                file_name(source).and_then(|n| section_from_file_name(&n)).or_else(|| inherited.cloned())
            }
        }
    }

    /// Whether the section replaces the one an NDJSON line names (`--section`).
    pub fn replaces(&self) -> bool {
        matches!(self, Self::All(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(name: &str) -> Option<String> {
        section_from_file_name(name).map(|s| s.to_string())
    }

    #[test]
    fn the_names_plugins_and_frameworks_write() {
        let cases: &[(&str, Option<&str>)] = &[
            // Yoast, Rank Math, AIOSEO, Wix.
            ("product-sitemap.xml", Some("product")),
            ("post-sitemap.xml", Some("post")),
            ("post-sitemap2.xml", Some("post")),
            ("post-sitemap12.xml", Some("post")),
            ("page-sitemap.xml", Some("page")),
            ("category-sitemap.xml", Some("category")),
            ("product_cat-sitemap.xml", Some("product-cat")),
            ("post_tag-sitemap.xml", Some("post-tag")),
            ("author-sitemap.xml", Some("author")),
            ("blog-posts-sitemap.xml", Some("blog-posts")),
            ("store-products-sitemap.xml", Some("store-products")),
            ("video-sitemap.xml", Some("video")),
            ("news-sitemap.xml", None),
            ("sitemap_index.xml", None),
            // WordPress core.
            ("wp-sitemap.xml", None),
            ("wp-sitemap-posts-post-1.xml", Some("post")),
            ("wp-sitemap-posts-page-1.xml", Some("page")),
            ("wp-sitemap-posts-page-12.xml", Some("page")),
            ("wp-sitemap-posts-my_type-2.xml", Some("my-type")),
            ("wp-sitemap-taxonomies-category-1.xml", Some("category")),
            ("wp-sitemap-taxonomies-post_tag-1.xml", Some("post-tag")),
            ("wp-sitemap-users-1.xml", Some("users")),
            ("wp-sitemap-users.xml", None),
            ("wp-sitemap-posts-1.xml", None),
            ("wp-sitemap-comments-post-1.xml", None),
            // Django, sitemapd.
            ("sitemap-blog.xml", Some("blog")),
            ("sitemap-blog-3.xml", Some("blog")),
            ("sitemap-products-12.xml.gz", Some("products")),
            ("sitemap-products-12.txt", Some("products")),
            ("sitemap-products-12.txt.gz", Some("products")),
            ("sitemap-products.xml.gz", Some("products")),
            ("sitemap-top-ten-2.xml", Some("top-ten")),
            ("sitemap-v2.xml", Some("v2")),
            ("sitemap-v2-1.xml", Some("v2")),
            ("sitemap-posts-2024-01.xml", Some("posts")),
            ("sitemap-news.xml", None),
            ("sitemap-removed.xml", None),
            ("sitemap-index.xml", None),
            ("sitemap-default-1.xml", None),
            ("sitemap-all.xml", None),
            // Shopify, generator-style.
            ("sitemap_products_1.xml?from=1&to=99", Some("products")),
            ("sitemap_pages_1.xml", Some("pages")),
            ("sitemap_collections_1.xml", Some("collections")),
            ("sitemap_blogs_1.xml", Some("blogs")),
            ("sitemap_blog1.xml", Some("blog")),
            ("sitemap_blog.xml", Some("blog")),
            ("sitemap_blog_posts_2.xml", Some("blog-posts")),
            // The default section: no section in the name.
            ("sitemap.xml", None),
            ("sitemap.xml.gz", None),
            ("sitemap.txt", None),
            ("sitemap-3.xml", None),
            ("sitemap-3-4.xml", None),
            ("sitemap1.xml", None),
            ("sitemap1.xml.gz", None),
            ("sitemap_1.xml", None),
            ("sitemap_index.xml", None),
            ("sitemapindex.xml", None),
            ("sitemap-.xml", None),
            ("-sitemap.xml", None),
            ("sitemap", None),
            ("products.xml", None),
            ("feed.xml", None),
            ("robots.txt", None),
            ("export.ndjson", None),
            ("product-sitemap.json", None),
            ("product-sitemap", None),
            ("", None),
        ];
        for (name, section) in cases {
            assert_eq!(from(name).as_deref(), *section, "{name:?}");
        }
    }

    #[test]
    fn case_query_fragment_and_path_do_not_matter() {
        for name in [
            "Product-Sitemap.XML",
            "PRODUCT-SITEMAP.XML.GZ",
            "product-sitemap.xml?sitemap=1",
            "product-sitemap.xml#top",
            "https://shop.example.com/wp/product-sitemap.xml?x=/y/z",
            "/var/legacy/product-sitemap.xml",
            "legacy\\product-sitemap.xml",
            "../product-sitemap.xml",
        ] {
            assert_eq!(from(name).as_deref(), Some("product"), "{name:?}");
        }
        assert_eq!(from("https://shop.example.com/sitemap_products_1.xml?from=1&to=99").as_deref(), Some("products"));
        assert_eq!(from("https://example.com/product-sitemap.xml/"), None, "the last segment is empty");
        assert_eq!(from("sitemap.xml?section=blog"), None, "the query says nothing");
    }

    #[test]
    fn hostile_names_give_the_default_section() {
        let long = format!("{}-sitemap.xml", "a".repeat(33));
        let very_long = format!("sitemap-{}.xml", "b".repeat(1 << 20));
        let cases = [
            long.as_str(),
            very_long.as_str(),
            "product%2Fsitemap.xml",
            "sitemap-%2F.xml",
            "sitemap-..xml",
            "..",
            "../..",
            "sitemap-a..b.xml",
            "sitemap-a b.xml",
            "sitemap-a\0.xml",
            "sitemap-\u{e9}t\u{e9}.xml",
            "sitemap-\u{212a}elvin.xml",
            "sitemap-a--b.xml",
            "--sitemap.xml",
            "1-sitemap.xml",
            "sitemap-1blog.xml",
            "sitemap-blog-.xml",
            "sitemap-\u{ff}.xml",
            "wp-sitemap-posts--1.xml",
            "wp-sitemap-taxonomies-news-1.xml",
            "sitemap.xml.gz.gz",
            ".xml",
            "sitemap-blog.xml\u{0}",
        ];
        for name in cases {
            assert_eq!(from(name), None, "{:?}", name.get(..60).unwrap_or(name));
        }
        // 32 characters is the longest section; a name that long is kept whole.
        let longest = "a".repeat(32);
        assert_eq!(from(&format!("{longest}-sitemap.xml")), Some(longest));
    }

    #[test]
    fn every_section_taken_is_valid() {
        // Whatever bytes a name holds, what comes out parses again as a section.
        for name in ["sitemap-a-b-c-1-2-3.xml", "x-y-sitemap9.xml", "sitemap_a_1b_2.xml", "wp-sitemap-posts-a-b-1.xml"]
        {
            if let Some(section) = section_from_file_name(name) {
                assert!(Section::is_valid(section.as_str()), "{name:?}: {section}");
            }
        }
        assert_eq!(from("sitemap_a_1b_2.xml").as_deref(), Some("a-1b"));
    }

    #[test]
    fn a_sources_section_comes_from_its_name_or_the_index_that_listed_it() {
        let url = |u: &str| Source::parse(u).unwrap();
        let shop = Section::parse("shop").unwrap();
        let blog = Section::parse("blog").unwrap();
        let product = url("https://x.test/product-sitemap.xml");
        let plain = url("https://x.test/maps/sitemap1.xml");
        assert_eq!(Sections::Off.of(&product, Some(&blog)), None);
        assert_eq!(Sections::All(shop.clone()).of(&product, Some(&blog)), Some(shop.clone()));
        assert_eq!(Sections::FromNames.of(&product, Some(&blog)).unwrap().as_str(), "product", "its own name first");
        assert_eq!(Sections::FromNames.of(&plain, Some(&blog)), Some(blog.clone()), "then its index's");
        assert_eq!(Sections::FromNames.of(&plain, None), None);
        assert_eq!(Sections::FromNames.of(&Source::File("d/sitemap-blog-2.xml.gz".into()), None), Some(blog));
        assert_eq!(Sections::FromNames.of(&Source::Stdin, None), None);
        assert_eq!(
            file_name(&url("https://x.test/a/sitemap_products_1.xml?from=1&to=9")).unwrap(),
            "sitemap_products_1.xml"
        );
        assert_eq!(file_name(&url("https://x.test/")).unwrap(), "");
        assert!(Sections::All(shop).replaces() && !Sections::FromNames.replaces());
    }
}
