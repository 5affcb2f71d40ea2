//! Crawler telemetry as stored: one fetch record per site, sitemap resource, crawler and trust, and the versions of
//! each page each crawler read (verified reads only), each merged across processes (several replicas flush into
//! one database) by `LEAST` / `GREATEST`-style upserts. Telemetry never moves a site's change counter.

/// What one process saw of one resource of one site fetched by one crawler with one trust, since its last flush;
/// and, read back, the merged record of every process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRecord {
    pub site: i64,
    /// The file fetched, as its canonical name without `.gz`: `sitemap.xml`, `sitemap-3.xml`,
    /// `sitemap-products-2.txt`, `sitemap-news.xml`, `sitemap-blog.xml`, `sitemap-removed.xml`.
    pub resource: String,
    /// The page the resource is a form of (a page's XML or text form), else `None`.
    pub page_id: Option<i64>,
    /// The crawler's stable name (`sitemapd_core::crawler::Crawler::name`).
    pub crawler: String,
    /// `verified`, `claimed` or `unknown`.
    pub trust: String,
    pub first_us: i64,
    pub last_us: i64,
    /// The last answer's status (200 or 304) and whether its request was conditional; merged: the later's.
    pub last_status: i32,
    pub last_conditional: bool,
    /// The ETag the last answer carried; merged: the later's.
    pub last_etag: String,
    /// Fetches answered, and of them 304s: merged by adding.
    pub fetches: i64,
    pub not_modified: i64,
}

/// A page version a crawler read (verified): the page's `modified_us` as the answer served it, and when that version
/// was first read. Merged: the earliest `first_us` of a (site, page, crawler, version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRead {
    pub site: i64,
    pub page_id: i64,
    pub crawler: String,
    pub version_us: i64,
    pub first_us: i64,
}
