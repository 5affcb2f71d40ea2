//! A section: a named sequence of pages within a site (`products`, `blog`), as site owners split their sitemaps by
//! kind of content. An entry without one is in the default section, whose pages keep the names they always had
//! (`/sitemap-N.xml`); a named section's pages are `/sitemap-<name>-N.xml`.

use std::collections::BTreeMap;
use std::fmt;

/// The longest section name.
pub const MAX_SECTION_LEN: usize = 32;

/// Names the routes need, or that would read as something else: `/sitemap-news.xml` is the news sitemap,
/// `/sitemap-removed.xml` the removed-URLs sitemap, and `default` names the default section in filters.
pub const RESERVED_SECTIONS: [&str; 5] = ["news", "removed", "default", "index", "all"];

/// A valid section name: 1 to [`MAX_SECTION_LEN`] lower-case ASCII letters, digits and hyphens, starting with a
/// letter, no hyphen at the end or next to another, and a last hyphen-separated part that is not all digits, so
/// that a page's file name reads one way only (`sitemap-top-10-2.xml` would be page 2 of `top-10`, or a page 10 of
/// `top` followed by junk): the page number is what follows the last hyphen, and a section name never ends so.
/// Not one of [`RESERVED_SECTIONS`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Section(String);

impl Section {
    /// The rule in words, for error messages.
    pub const RULE: &'static str = "a section is 1 to 32 lower-case letters, digits and single hyphens, starting \
                                    with a letter, not ending with a hyphen or a hyphen and digits";

    pub fn parse(raw: &str) -> Result<Self, String> {
        if let Some(why) = why_not(raw) {
            let shown: String = raw.chars().take(MAX_SECTION_LEN + 8).collect();
            let more = if shown.len() < raw.len() { "…" } else { "" };
            return Err(format!("{shown:?}{more} is not a section name: {why}"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `raw` is a valid section name (the file-name parser's question).
    pub fn is_valid(raw: &str) -> bool {
        why_not(raw).is_none()
    }
}

/// What is wrong with `raw` as a section name, if anything.
fn why_not(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_SECTION_LEN {
        return Some(Section::RULE.to_owned());
    }
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    if !bytes[0].is_ascii_lowercase() || !bytes.iter().all(|&b| allowed(b)) || raw.contains("--") {
        return Some(Section::RULE.to_owned());
    }
    let last = raw.rsplit('-').next().unwrap_or_default();
    if last.is_empty() || last.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Section::RULE.to_owned());
    }
    if RESERVED_SECTIONS.contains(&raw) {
        return Some(format!("{raw:?} is reserved ({})", RESERVED_SECTIONS.join(", ")));
    }
    None
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Section {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A site's named sections by id, as stored (the default section, 0, has no name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SectionNames(BTreeMap<i64, Section>);

impl SectionNames {
    pub fn new(sections: impl IntoIterator<Item = (i64, Section)>) -> Self {
        Self(sections.into_iter().collect())
    }

    /// Section `id`'s name: `Some(None)` for the default section, `None` for an id not (yet) known.
    pub fn name(&self, id: i64) -> Option<Option<&Section>> {
        if id == 0 { Some(None) } else { self.0.get(&id).map(Some) }
    }

    /// The id of the section named `name`.
    pub fn id(&self, name: &str) -> Option<i64> {
        self.0.iter().find(|(_, s)| s.as_str() == name).map(|(id, _)| *id)
    }

    /// Whether every id of `ids` is known (the default section always is).
    pub fn knows_all(&self, mut ids: impl Iterator<Item = i64>) -> bool {
        ids.all(|id| id == 0 || self.0.contains_key(&id))
    }

    /// The named sections, by name.
    pub fn by_name(&self) -> Vec<(i64, &Section)> {
        let mut named: Vec<(i64, &Section)> = self.0.iter().map(|(id, s)| (*id, s)).collect();
        named.sort_by(|a, b| a.1.cmp(b.1));
        named
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn names_that_read_one_way() {
        for good in ["products", "blog", "a", "top-ten", "v2", "post-tag", "x1-y", &"a".repeat(32)] {
            assert_eq!(Section::parse(good).map(|s| s.to_string()), Ok(good.to_owned()), "{good}");
        }
        for bad in [
            "",
            "Products",
            "1blog",
            "-a",
            "a-",
            "a--b",
            "top-10",
            "a-1",
            "blog_posts",
            "blog.xml",
            "é",
            "a b",
            "news",
            "removed",
            "default",
            "index",
            "all",
            &"a".repeat(33),
            "a\0",
        ] {
            assert!(Section::parse(bad).is_err(), "{bad:?}");
            assert!(!Section::is_valid(bad), "{bad:?}");
        }
        assert!(Section::parse("news").unwrap_err().contains("reserved"));
    }

    proptest! {
        /// `sitemap-<section>-<N>`, split at its last hyphen, gives back the section and N; the section alone is
        /// never taken for a page of another section.
        #[test]
        fn a_page_file_stem_splits_one_way(name in "[a-z][a-z0-9-]{0,31}", n in 1u32..50_000) {
            if let Ok(section) = Section::parse(&name) {
                let stem = format!("{section}-{n}");
                let (head, tail) = stem.rsplit_once('-').unwrap();
                prop_assert_eq!(head, section.as_str());
                prop_assert_eq!(tail.parse::<u32>().unwrap(), n);
                let alone = section.as_str().rsplit_once('-').map(|(_, t)| t);
                prop_assert!(alone.is_none_or(|t| !t.bytes().all(|b| b.is_ascii_digit())));
            }
        }
    }
}
