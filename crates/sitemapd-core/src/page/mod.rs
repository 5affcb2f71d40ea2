//! The page model, the bottom layer: what a sitemap page holds, how large each entry renders, and the limit rule.
//! Pure: it knows neither the store nor HTTP. [`crate::placement`] decides where entries go with it, the stores
//! keep its records, and `sitemap/` serves what [`render`] writes.

pub mod render;

use crate::domain::ext::{Alternate, Image, Namespaces, News, Video};
use crate::domain::{ChangeFreq, Entry, Extensions, LastMod, Priority};
use render::{ENVELOPE_RESERVE, max_url_len, url_len};

/// The limits of one sitemap page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_urls: u32,
    pub max_bytes: u64,
}

impl Limits {
    /// The limit rule: a page whose `<url>` elements take `byte_size` bytes fits when they and the envelope
    /// reserve stay within `max_bytes`.
    pub fn fits_bytes(&self, byte_size: i64) -> bool {
        page_bytes(byte_size) <= self.max_bytes as i64
    }

    /// Refuses an entry that renders to `size` bytes when no page can hold it (with extensions an entry can be
    /// larger than the least page limit allows for: [`Limits::least_max_bytes`] covers entries without them).
    pub fn check_entry(&self, size: i64) -> Result<(), EntryTooLarge> {
        if self.fits_bytes(size) {
            Ok(())
        } else {
            Err(EntryTooLarge {
                size,
                room: self.max_bytes.saturating_sub(ENVELOPE_RESERVE),
                max_bytes: self.max_bytes,
            })
        }
    }

    /// The least `max_bytes` that lets an empty page take any valid entry (one with the longest loc and every
    /// field): a lower limit could leave an entry no page can hold.
    pub fn least_max_bytes() -> u64 {
        ENVELOPE_RESERVE + max_url_len()
    }
}

/// An entry larger than any page can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the entry renders to {size} bytes, more than a page can hold: page_max_bytes (SITEMAPD_PAGE_MAX_BYTES) is \
     {max_bytes}, of which {room} are for entries; send fewer images, videos or alternates, or shorter text"
)]
pub struct EntryTooLarge {
    pub size: i64,
    pub room: u64,
    pub max_bytes: u64,
}

/// The most bytes a page's document takes whose `<url>` elements take `byte_size`: those and the envelope reserve.
pub fn page_bytes(byte_size: i64) -> i64 {
    ENVELOPE_RESERVE as i64 + byte_size
}

/// A page's id holds its section and its number within the section: `section << SECTION_SHIFT | number`. The
/// default section is 0, so every page stored before sections existed keeps its id, which is its number
/// (`/sitemap-N.xml`), and no row is rewritten. A section has at most 49,999 pages (one index lists 50,000
/// sitemaps), well within the 2^20 numbers its id range holds, and a site's pages of one section are one range of
/// the `(site_id, id)` key.
pub const SECTION_SHIFT: u32 = 20;

/// The id of page `number` of section `section`.
pub const fn page_id(section: i64, number: i64) -> i64 {
    (section << SECTION_SHIFT) | number
}

/// The section of the page with id `id` (0: the default section).
pub const fn section_of(id: i64) -> i64 {
    id >> SECTION_SHIFT
}

/// The number of the page with id `id` within its section (from 1).
pub const fn number_of(id: i64) -> i64 {
    id & ((1 << SECTION_SHIFT) - 1)
}

/// The ids of section `section`'s pages: a range.
pub const fn section_ids(section: i64) -> std::ops::RangeInclusive<i64> {
    page_id(section, 1)..=page_id(section, (1 << SECTION_SHIFT) - 1)
}

/// A page's stored bookkeeping. `version` rises by one and `modified_us` (microseconds since the Unix epoch)
/// strictly increases with every change to the page; both feed its ETag and Last-Modified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageState {
    pub id: i64,
    pub url_count: i64,
    pub byte_size: i64,
    pub version: i64,
    pub modified_us: i64,
    /// How many of its entries use each extension namespace: what its `<urlset>` declares. Not part of its
    /// validators: it changes only with the entries, and so with `version`.
    pub ns: NsCounts,
    /// How its gzip is made: part of its gzip ETag, chosen anew only when the page changes, so that a page nobody
    /// changed keeps its compressed bytes and ETag across upgrades.
    pub gzip: Gzip,
    /// How many of its entries are left out of it (URL health, policy `exclude`). Not part of its validators: an
    /// exclusion or a restore moves `version` and `modified_us`.
    pub excluded: i64,
}

impl PageState {
    /// Whether the page is listed and served: it has an entry that is not excluded (an empty `<urlset>` is
    /// invalid, so a page whose entries are all excluded is left out as an empty one is).
    pub fn listed(&self) -> bool {
        self.url_count > self.excluded
    }
}

/// The ways a page's gzip is made, as stored (`pages.gzip`, migration 0008). Each one, with the level, fixes the
/// compressed bytes; a new way gets a new number, and the old ones stay as long as pages may carry them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Gzip {
    /// 0: one deflate stream (async-compression's encoder over zlib-rs). Every page written before 0008.
    #[default]
    Stream,
    /// 1: independent 1 MiB blocks, each with the 32 KiB before it as its dictionary, deflated in parallel and
    /// joined into one gzip member (pigz's scheme). What a page gets when it next changes.
    Blocks,
}

impl Gzip {
    /// What a page that changes is compressed with from now on.
    pub const CURRENT: Self = Self::Blocks;

    pub fn code(self) -> i32 {
        match self {
            Self::Stream => 0,
            Self::Blocks => 1,
        }
    }

    /// The stored code's way. A code this version does not know (written by a newer one, then rolled back) is
    /// served as [`Self::CURRENT`]: the bytes and ETag agree with each other, if not with the newer version's.
    pub fn from_code(code: i32) -> Self {
        match code {
            0 => Self::Stream,
            _ => Self::Blocks,
        }
    }
}

/// Per extension namespace, how many entries of a page use it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NsCounts {
    pub image: i64,
    pub video: i64,
    pub xhtml: i64,
}

impl NsCounts {
    /// Counts an entry using `ns` in (`by` = 1) or out (`by` = -1).
    pub fn count(&mut self, ns: Namespaces, by: i64) {
        self.image += by * i64::from(ns.image);
        self.video += by * i64::from(ns.video);
        self.xhtml += by * i64::from(ns.xhtml);
    }

    /// The namespaces the page's `<urlset>` declares.
    pub fn used(&self) -> Namespaces {
        Namespaces { image: self.image > 0, video: self.video > 0, xhtml: self.xhtml > 0 }
    }
}

/// The optional fields of a record, as stored.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Fields {
    pub lastmod: Option<String>,
    pub changefreq: Option<String>,
    pub priority: Option<Priority>,
    /// `None` when the entry has no extension (never an empty `Extensions`).
    pub ext: Option<Box<Extensions>>,
}

impl Fields {
    /// The extension namespaces this record's `<url>` uses in its page.
    pub fn namespaces(&self) -> Namespaces {
        self.ext.as_deref().map(Extensions::namespaces).unwrap_or_default()
    }

    /// Whether two records render the same `<url>` in a page: equal but for their news, which only the news sitemap
    /// shows.
    pub fn same_in_page(&self, other: &Self) -> bool {
        // No extensions and news alone render alike: the same empty lists.
        fn without_news(f: &Fields) -> (&[Image], &[Video], &[Alternate]) {
            f.ext.as_deref().map_or((&[], &[], &[]), |e| (&e.images[..], &e.videos[..], &e.alternates[..]))
        }
        (&self.lastmod, &self.changefreq, self.priority) == (&other.lastmod, &other.changefreq, other.priority)
            && without_news(self) == without_news(other)
    }

    /// What the page renders of the extensions, as stored (`urls.ext`): JSON of the images, videos and alternates,
    /// or `None` when there are none. The news is stored apart ([`Fields::news_json`]).
    pub fn ext_json(&self) -> Option<String> {
        /// `Extensions` without its news, borrowed: the same JSON as `Extensions { news: None, .. }`, no copy.
        #[derive(serde::Serialize)]
        struct PagePart<'a> {
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            images: &'a [Image],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            videos: &'a [Video],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            alternates: &'a [Alternate],
        }
        let e = self.ext.as_deref().filter(|e| e.namespaces().any())?;
        let page_part = PagePart { images: &e.images, videos: &e.videos, alternates: &e.alternates };
        Some(serde_json::to_string(&page_part).expect("extensions serialize"))
    }

    /// The news as stored (`urls.news`): JSON, or `None`.
    pub fn news_json(&self) -> Option<String> {
        self.news().map(|n| serde_json::to_string(n).expect("news serializes"))
    }

    /// The optional fields' extensions from their stored parts: `None` when both are.
    pub fn ext_from_parts(page_part: Option<Box<Extensions>>, news: Option<News>) -> Option<Box<Extensions>> {
        match (page_part, news) {
            (None, None) => None,
            (Some(mut e), news) => {
                e.news = news;
                Some(e)
            }
            (None, news) => Some(Box::new(Extensions { news, ..Extensions::default() })),
        }
    }

    /// The news publication date in microseconds since the Unix epoch (`urls.news_us`, the news sitemap's index).
    pub fn news_us(&self) -> Option<i64> {
        self.news().and_then(|n| LastMod::parse(&n.publication_date).ok()).map(|d| d.unix_micros())
    }

    /// The record's news, if it has any.
    pub fn news(&self) -> Option<&News> {
        self.ext.as_deref().and_then(|e| e.news.as_ref())
    }
}

impl Fields {
    /// Whether these are `e`'s fields: `*self == Fields::from(e)`, without making them.
    pub fn are_of(&self, e: &Entry) -> bool {
        self.lastmod.as_deref() == e.lastmod.as_ref().map(LastMod::as_str)
            && self.changefreq.as_deref() == e.changefreq.map(ChangeFreq::as_str)
            && self.priority == e.priority
            && self.ext == e.ext
    }
}

impl From<&Entry> for Fields {
    fn from(e: &Entry) -> Self {
        Self {
            lastmod: e.lastmod.as_ref().map(|l| l.as_str().to_owned()),
            changefreq: e.changefreq.map(|c| ChangeFreq::as_str(c).to_owned()),
            priority: e.priority,
            ext: e.ext.clone(),
        }
    }
}

/// A stored URL record.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredUrl {
    pub id: i64,
    pub loc: String,
    pub page_id: i64,
    pub fields: Fields,
    /// Rendered bytes of its `<url>` element.
    pub size: i64,
}

/// Whether `entry` fits in a page under `limits`; the error states its size and the limit. Only an entry with
/// extensions can fail: configuration makes every page large enough for any entry without. The API and
/// `sitemapd import` both refuse an entry by this rule.
pub fn entry_fits(entry: &Entry, limits: Limits) -> Result<(), crate::domain::FieldError> {
    if entry.ext.is_none() {
        return Ok(());
    }
    let size = url_size(entry.loc.as_str(), &Fields::from(entry));
    limits.check_entry(size).map_err(|e| crate::domain::FieldError { field: String::new(), message: e.to_string() })
}

/// The bytes of the `<url>` element a record renders to: what a page's `byte_size` counts.
pub fn url_size(loc: &str, f: &Fields) -> i64 {
    url_len(loc, f) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PublicUrl;

    fn entry(value: serde_json::Value) -> Entry {
        Entry::from_json(value, &PublicUrl::parse("https://x.test").unwrap()).unwrap()
    }

    #[test]
    fn fields_are_of_the_entry_they_are_made_from_and_of_no_other() {
        let image = serde_json::json!({"loc": "https://x.test/a.png"});
        let entries = [
            entry(serde_json::json!({"loc": "https://x.test/a"})),
            entry(serde_json::json!({"loc": "https://x.test/a", "lastmod": "2024-05-01"})),
            entry(serde_json::json!({"loc": "https://x.test/a", "lastmod": "2024-05-02"})),
            entry(serde_json::json!({"loc": "https://x.test/a", "changefreq": "daily"})),
            entry(serde_json::json!({"loc": "https://x.test/a", "changefreq": "weekly"})),
            entry(serde_json::json!({"loc": "https://x.test/a", "priority": 0.5})),
            entry(serde_json::json!({"loc": "https://x.test/a", "priority": 0.6})),
            entry(serde_json::json!({"loc": "https://x.test/a", "images": [image]})),
            entry(serde_json::json!({"loc": "https://x.test/a", "lastmod": "2024-05-01", "changefreq": "daily",
                "priority": 0.5, "images": [image]})),
        ];
        for (i, a) in entries.iter().enumerate() {
            for (j, b) in entries.iter().enumerate() {
                let fields = Fields::from(a);
                assert_eq!(fields.are_of(b), fields == Fields::from(b), "entries {i} and {j}");
                assert_eq!(fields.are_of(b), i == j, "entries {i} and {j}");
            }
        }
    }
}
