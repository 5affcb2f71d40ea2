//! The page model, the bottom layer: what a sitemap page holds, how large each entry renders, and the limit rule.
//! Pure: it knows neither the store nor HTTP. [`crate::placement`] decides where entries go with it, the stores
//! keep its records, and `sitemap/` serves what [`render`] writes.

pub mod render;

use crate::domain::{ChangeFreq, Entry, Extensions, Priority};
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

    /// The least `max_bytes` that lets an empty page take any valid entry (one with the longest loc and every
    /// field): a lower limit could leave an entry no page can hold.
    pub fn least_max_bytes() -> u64 {
        ENVELOPE_RESERVE + max_url_len()
    }
}

/// The most bytes a page's document takes whose `<url>` elements take `byte_size`: those and the envelope reserve.
pub fn page_bytes(byte_size: i64) -> i64 {
    ENVELOPE_RESERVE as i64 + byte_size
}

/// A page's stored bookkeeping. `version` rises by one and `modified_us` (microseconds since the Unix epoch)
/// strictly increases with every change to the page; both feed its ETag and Last-Modified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageState {
    pub id: i64,
    pub url_count: i64,
    pub byte_size: i64,
    pub version: i64,
    pub modified_us: i64,
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

/// The bytes of the `<url>` element a record renders to: what a page's `byte_size` counts.
pub fn url_size(loc: &str, f: &Fields) -> i64 {
    url_len(loc, f) as i64
}
