//! Storage: the [`Store`] trait both backends implement, its errors, and the choice of backend by URL.
//!
//! The stores are thin: page assignment is decided by [`sitemapd_core::placement`], and the stores load the state it
//! needs and write its plan back inside one transaction, with writers serialized so page limits hold. That
//! sequence is written once (`write.rs`), and so are the queries both backends run as they are (`shared.rs`); each
//! backend keeps what differs: its lock and clock, how it binds a batch, how it reads a page's snapshot.

mod crawls;
mod health;
mod hreflang;
mod outbox;
pub mod postgres;
mod publish;
mod shared;
pub mod sqlite;
mod watch;
mod websub;
mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use async_trait::async_trait;
use futures_util::stream::BoxStream;

pub use self::crawls::{CrawlerState, FetchRecord, LAGS_SQL, PageRead, RecordCrawls};
pub use self::health::{
    BACKLOG_CAP, BrakeChange, BrakeMode, BrakeOrder, BrakeState, CheckClaim, CheckResult, HealthSummary, ProblemFilter,
    Settled as CheckSettled, UrlCheck,
};
pub use self::outbox::{Claim, Settle, Settled};
pub use self::postgres::PgStore;
pub use self::publish::{PublishLog, PublishStatus, PublishedObject};
pub use self::shared::{
    FEED_REMOVED_SECTION_SQL, FEED_REMOVED_SQL, FEED_SQL, NEWS_BEFORE_SQL, NEWS_SQL, PAGE_URLS_SQL, REMOVED_SQL,
};
pub use self::sqlite::SqliteStore;
pub use self::websub::{HubClaim, HubRow, HubSettle};
pub use self::write::{DEFAULT_SITE_ID, Shape, Upsert};
use sitemapd_core::domain::Extensions;
use sitemapd_core::domain::ext::{Alternate, News};
use sitemapd_core::domain::{Entry, Loc, Priority, Section, SiteSpec, Sites};
use sitemapd_core::page::EntryTooLarge;
use sitemapd_core::page::{Fields, Gzip, Limits, NsCounts, PageState, StoredUrl, page_bytes, section_of};
use sitemapd_core::placement::{Changes, IndexFull, PlanError, UpsertCounts};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or is overloaded: worth retrying (HTTP 503).
    #[error("store unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("store error: {0}")]
    Other(#[source] sqlx::Error),
    /// A write would need more pages than one index may list.
    #[error(transparent)]
    Full(#[from] IndexFull),
    /// An entry larger than any page can hold (its loc, and the sizes).
    #[error("{0}: {1}")]
    TooLarge(String, EntryTooLarge),
    /// A loc under no configured site (the API refuses it first; this is the store's own check).
    #[error("{0} {1}")]
    NoSite(String, String),
}

impl From<PlanError> for StoreError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::Full(full) => Self::Full(full),
            PlanError::TooLarge(loc, e) => Self::TooLarge(loc, e),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        use sqlx::Error as E;
        let transient = match &e {
            E::PoolTimedOut | E::PoolClosed | E::Io(_) | E::Tls(_) | E::WorkerCrashed | E::Protocol(_) => true,
            E::Database(db) if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() => {
                db.code().and_then(|c| c.parse::<i32>().ok()).is_some_and(sqlite_code_is_unavailable)
            }
            E::Database(db) => db.code().is_some_and(|code| sqlstate_is_unavailable(&code)),
            _ => false,
        };
        if transient { Self::Unavailable(e) } else { Self::Other(e) }
    }
}

/// Whether a Postgres SQLSTATE means the store is unavailable (503, retry later) rather than broken (500).
///
/// Everything that stops a connection from being established or kept counts: connection exceptions (`08`), an
/// unknown database (`3D000`: dropped, or not created yet), a refused login (`28`: wrong password, `NOLOGIN`),
/// insufficient resources (`53`: too many clients, disk full), operator intervention (`57P`: shutdown, cannot
/// connect now, database dropped). So do the bounded waits and the conflicts that a retry resolves: serialization
/// failure and deadlock (`40001`, `40P01`), lock and statement timeouts (`55P03`, `57014`).
pub fn sqlstate_is_unavailable(code: &str) -> bool {
    ["08", "28", "3D", "53", "57P"].iter().any(|class| code.starts_with(class))
        || matches!(code, "40001" | "40P01" | "55P03" | "57014")
}

/// Whether an SQLite result code (primary or extended) means the store is unavailable: the database is locked
/// (`SQLITE_BUSY` 5, `SQLITE_LOCKED` 6), its file cannot be opened (`SQLITE_CANTOPEN` 14: deleted directory,
/// permissions), the disk failed or is full (`SQLITE_IOERR` 10, `SQLITE_FULL` 13).
pub fn sqlite_code_is_unavailable(code: i32) -> bool {
    matches!(code & 0xff, 5 | 6 | 10 | 13 | 14)
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// One `<url>` of a page, as streamed to the renderer.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PageEntry {
    pub loc: String,
    pub lastmod: Option<String>,
    pub changefreq: Option<String>,
    /// Millionths (see [`sitemapd_core::domain::Priority`]).
    pub priority: Option<i64>,
    /// The extensions as stored: JSON (see [`sitemapd_core::page::Fields::ext_json`]).
    pub ext: Option<String>,
}

pub type EntryStream = BoxStream<'static, Result<PageEntry>>;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct DeleteCounts {
    pub deleted: u64,
    pub missing: u64,
}

/// What the news sitemap is made of, read from one snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewsRead {
    /// (loc, news), newest publication first (ties: the later stored first).
    pub entries: Vec<(String, News)>,
    /// The newest publication date listed: an article dated ahead enters the window then.
    pub newest_us: Option<i64>,
    /// The last change to any entry with news (`news_state`).
    pub changed_us: i64,
    /// The newest publication date before the window: the article that left it last, if any.
    pub newest_before_us: Option<i64>,
}

/// What the removed-URLs sitemap is made of, read from one snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemovedRead {
    /// (loc, deletion time), newest first (ties: loc, descending); cut once the locs' bytes pass
    /// [`SITEMAP_MAX_BYTES`] (a rendered document is longer than its locs).
    pub entries: Vec<(String, i64)>,
    /// The site's removed-URLs stamp (`removed_state`; 0 before the first tombstone).
    pub changed_us: i64,
    /// The newest deletion time before the window: the tombstone that left it last, if any.
    pub newest_before_us: Option<i64>,
}

/// The most bytes one sitemap may have, uncompressed (sitemaps.org: 50 MiB).
pub const SITEMAP_MAX_BYTES: i64 = 52_428_800;

/// A write's outcome: its counts, and what it changed in each site (by site id; only sites it changed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Written<C> {
    pub counts: C,
    pub changes: BTreeMap<i64, Changes>,
}

impl<C> Written<C> {
    /// What it changed in `site` (nothing when it changed nothing there).
    pub fn changes_in(&self, site: i64) -> Changes {
        self.changes.get(&site).cloned().unwrap_or_default()
    }
}

/// A stored record and the site it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteUrl {
    pub site: i64,
    pub url: StoredUrl,
}

/// What a store reads of the core: sites, records, pages, news. Handlers reach the store through
/// [`crate::AppState::reads`] (this) and [`crate::AppState::upsert`] / [`crate::AppState::delete`], which bring what
/// derives from the store up to date after every write: a handler cannot write and forget to. Each feature's reads
/// and writes are its own trait ([`Outbox`], [`CrawlLog`], [`HealthQueue`], [`RemovedList`], [`FeedReads`],
/// [`HreflangReads`], [`PublishLog`]).
#[async_trait]
pub trait StoreReads: Send + Sync + 'static {
    /// Answers when the database does and holds the schema ([`PING_SQL`]).
    async fn ping(&self) -> Result<()>;
    /// The sites served, with their stored ids (matched by name when the store was opened).
    fn sites(&self) -> Arc<Sites>;
    async fn find(&self, loc: &Loc) -> Result<Option<SiteUrl>>;
    /// Records in id order after the record with id `after` (keyset paging), of one site or of all: at most
    /// `limit`, and fewer once their rendered sizes pass [`LIST_MAX_BYTES`].
    async fn list_after(&self, site: Option<i64>, after: i64, limit: u32) -> Result<Vec<SiteUrl>>;
    /// [`StoreReads::list_after`] of one section (by id) of one site.
    async fn list_section_after(&self, site: i64, section: i64, after: i64, limit: u32) -> Result<Vec<SiteUrl>>;
    /// `site`'s named sections (id, name), in id order: a few rows. A section's id and name never change once
    /// stored, so what was read stays true.
    async fn sections(&self, site: i64) -> Result<Vec<(i64, Section)>>;
    /// Page `page_id` of `site`: its records in id order after the record with id `after` (keyset paging, through
    /// the `(site_id, page_id, id)` index): at most `limit`, and fewer once their rendered sizes pass
    /// [`LIST_MAX_BYTES`].
    async fn page_urls(&self, site: i64, page_id: i64, after: i64, limit: u32) -> Result<Vec<StoredUrl>>;
    /// A site's whole page table, empty pages included, in page order: O(pages).
    async fn pages(&self, site: i64) -> Result<Vec<PageState>>;
    async fn page(&self, site: i64, id: i64) -> Result<Option<PageState>>;
    /// `site`'s change counter: it moves on with every committed write that changes the site's page table or its
    /// news stamp, and never otherwise. Unchanged since [`StoreReads::page_table`] read it with the table, it says
    /// that table is still current: O(1).
    async fn changes(&self, site: i64) -> Result<i64>;
    /// A site's change counter and whole page table (as [`StoreReads::pages`]), read in one snapshot: the table is
    /// the one the counter names.
    async fn page_table(&self, site: i64) -> Result<(i64, Vec<PageState>)>;
    /// A site's news sitemap rows: at most `limit` entries with news published from `since_us` to `until_us`,
    /// newest first, through the publication-date index (never a scan of all URLs), and what its Last-Modified is
    /// made of.
    async fn news(&self, site: i64, since_us: i64, until_us: i64, limit: u32) -> Result<NewsRead>;
    /// A non-empty page's state and its entries in page order, read from one consistent snapshot and streamed.
    async fn page_entries(&self, site: i64, id: i64) -> Result<Option<(PageState, EntryStream)>>;
    /// The connection pool's use right now, for `/metrics`: no I/O.
    fn pool_status(&self) -> PoolStatus;
}

/// Change notification's queue (the IndexNow outbox): a write queues its changed locs in it inside its own
/// transaction; a sender claims due rows under a lease and settles them by the answer.
#[async_trait]
pub trait Outbox: Send + Sync + 'static {
    /// The change notifications queued (the IndexNow outbox), per site: (site id, locs), in site order. O(queued).
    async fn outbox_size(&self) -> Result<Vec<(i64, i64)>>;
    /// Claims up to `limit` of `site`'s queued change notifications that are due, for `lease` (then another sender
    /// may claim them): `None` when none is due. Rows another sender holds are skipped, never waited for.
    async fn claim_notifications(&self, site: i64, limit: u32, lease: Duration) -> Result<Option<Claim>>;
    /// Ends `claim` after its send: its rows are done, or due again later ([`Settle`]); a row changed since the
    /// claim stays queued either way.
    async fn settle_notifications(&self, claim: &Claim, settle: Settle) -> Result<Settled>;
}

/// Crawler telemetry's log: flushes of fetch records and page reads merged in, their reads from the primary, and
/// the purge of superseded reads.
#[async_trait]
pub trait CrawlLog: Send + Sync + 'static {
    /// Crawler telemetry: `site`'s fetch records as merged, one per resource, crawler and trust. O(resources ×
    /// crawlers). Read from the primary.
    async fn crawler_fetches(&self, site: i64) -> Result<Vec<FetchRecord>>;
    /// The newest version of each page each crawler read (one [`PageRead`] per page and crawler: the greatest
    /// `version_us`, with its `first_us`), of one page or of all the site's. Read from the primary.
    async fn crawler_seen(&self, site: i64, page: Option<i64>) -> Result<Vec<PageRead>>;
    /// The lags (`first_us - version_us`) of the page reads first made at `since_us` or later, as (crawler, lag in
    /// µs): at most `limit`, newest first. Read from the primary.
    async fn crawler_lags(&self, site: i64, since_us: i64, limit: u32) -> Result<Vec<(String, i64)>>;
    /// Crawler telemetry with what it is judged against, in one snapshot of the primary (SQLite: one read
    /// transaction; Postgres: `REPEATABLE READ`): `site`'s page table, fetch records, newest reads of every page and
    /// the lags since `since_us` (at most `lag_limit`), so that a report never pairs a flush's reads with the
    /// records of the flush before it.
    async fn crawler_state(&self, site: i64, since_us: i64, lag_limit: u32) -> Result<CrawlerState>;
    /// Crawler telemetry of one record (id `id` on page `page_id` of `site`), in one snapshot of the primary: when
    /// it last changed in its page, its page, the newest reads of that page and the site's fetch records. O(1)
    /// reads of the record and the page, O(crawlers) of the page's reads.
    async fn crawler_record(&self, site: i64, id: i64, page_id: i64) -> Result<RecordCrawls>;
    /// Merges one flush of crawler telemetry in one transaction (fetch records: `first_us` the least, `last_us` the
    /// greatest, the last answer's fields from the later, counts added; page reads: the earliest `first_us` of a
    /// version). Returns the page reads that were new (no process had recorded that page version for that crawler):
    /// each one is a change's lag closed. Moves no change counter.
    async fn record_crawls(&self, fetches: &[FetchRecord], reads: &[PageRead]) -> Result<Vec<PageRead>>;
    /// Deletes the page reads first made before `before_us` that a newer version of the same page read by the same
    /// crawler supersedes (the newest read of each page and crawler is kept whatever its age); the number deleted.
    async fn purge_crawls(&self, before_us: i64) -> Result<u64>;
}

/// URL health's queue of checks: seeded from the stored records, claimed under a lease, settled (under the write
/// lock when a finding changes a page), and its reads from the primary.
#[async_trait]
pub trait HealthQueue: Send + Sync + 'static {
    /// URL health: `loc`'s last check in `site`, if it is tracked. Read from the primary.
    async fn health_of(&self, site: i64, loc: &str) -> Result<Option<UrlCheck>>;
    /// URL health: the records (of one site or all) whose check matches `filter`, in record id order after `after`
    /// (keyset), at most `limit`, each with its check. Through an index of the problem rows: O(listed).
    async fn health_problems(
        &self,
        site: Option<i64>,
        filter: ProblemFilter,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(SiteUrl, UrlCheck)>>;
    /// URL health: `site`'s counts ([`HealthSummary`]): one pass over the site's check rows (O(tracked URLs)), the
    /// kinds over the problem rows, and the capped backlog count.
    async fn health_summary(&self, site: i64) -> Result<HealthSummary>;
    /// URL health: queues at most `limit` of `site`'s stored records not yet queued, walking them by id from where
    /// the last walk stopped (`health_sites.seeded_id`), due at once; the number walked (0: the walk is at the end).
    async fn health_seed(&self, site: i64, limit: u32) -> Result<u64>;
    /// URL health: claims up to `limit` of `site`'s due checks for `lease` (changed URLs first, then by due time).
    /// Rows another replica holds are skipped, never waited for.
    async fn health_claim(&self, site: i64, limit: u32, lease: Duration) -> Result<Vec<CheckClaim>>;
    /// URL health: records a claimed check's finding and releases the row, due again after `result.next_in` (at
    /// once when the URL was written while claimed). With `exclude`, a definite problem leaves the URL out of its
    /// page and a healthy finding puts it back: a change of that page (version, `modified_us`, the change counter)
    /// in the same transaction, under the write lock; a transient finding never changes the page. A URL deleted
    /// since the claim loses its row. The changed page is in the returned [`Written`]'s changes.
    async fn health_settle(&self, site: i64, result: &CheckResult, exclude: bool) -> Result<Written<CheckSettled>>;
    /// URL health: puts every excluded record of `site` back in its page (its policy is no longer `exclude`, or
    /// checking is off), a change of each page that held one; the number put back.
    async fn health_restore(&self, site: i64) -> Result<Written<u64>>;
    /// URL health: an operator's order to `site`'s brake ([`BrakeOrder`]), obeyed only while it is paused; the
    /// brake as it then is (`None`: it never tripped).
    async fn health_brake_order(&self, site: i64, order: BrakeOrder) -> Result<Option<BrakeState>>;
    /// URL health: reserves the next request slot of `host` (`scheme://host:port`) shared by every replica: at
    /// least `gap` after the slot before it, and not before `hold` from now (a `Retry-After`). Returns how long to
    /// wait from now for it.
    async fn health_host_slot(&self, host: &str, gap: Duration, hold: Duration) -> Result<Duration>;
}

/// The removed-URLs list: the tombstones a delete keeps within the retention (`removed_days`), read for the
/// removed-URLs sitemap (on the replica, as a page is) and purged once past it.
#[async_trait]
pub trait RemovedList: Send + Sync + 'static {
    /// A site's removed-URLs sitemap rows: at most `limit` tombstones deleted at `since_us` or later, newest
    /// first, through the `(site_id, removed_us, loc)` index (never a scan), and what its Last-Modified is made of.
    async fn removed(&self, site: i64, since_us: i64, limit: u32) -> Result<RemovedRead>;
    /// A site's removed-URLs stamp alone ([`RemovedRead::changed_us`]): one primary-key read. Unchanged, the
    /// tombstones are the ones read with it.
    async fn removed_stamp(&self, site: i64) -> Result<i64>;
    /// Deletes at most `limit` tombstones of each site that are older than the retention (`removed_days`), oldest
    /// first, in one transaction, moving each site's removed-URLs stamp to the moment the newest of them left the
    /// window; the number deleted. Nothing when the removed-URLs sitemap is off.
    async fn purge_removed(&self, limit: u32) -> Result<u64>;
}

/// WebSub's delivery rows: what each hub was last told of each feed (the digest it accepted), claimed under a lease
/// and settled by the hub's answer. Nothing is queued by a write: a feed is owed to a hub while its digest differs
/// from the delivered one.
#[async_trait]
pub trait HubOutbox: Send + Sync + 'static {
    /// `site`'s rows, one per feed and hub ever owed, in feed and hub order. Read from the primary. O(feeds × hubs).
    async fn hub_rows(&self, site: i64) -> Result<Vec<HubRow>>;
    /// Claims the notification of `feed` of `site` at `digest` to `hub` for `lease` (then another publisher may
    /// claim it): only when its row is due and its delivered digest is not `digest` (the row is added the first
    /// time). `None`: not due (the debounce interval, a retry delay or another claim's lease runs), or delivered.
    /// A row another publisher is claiming is waited for, never taken twice.
    async fn hub_claim(
        &self,
        site: i64,
        feed: &str,
        hub: &str,
        digest: &str,
        lease: Duration,
    ) -> Result<Option<HubClaim>>;
    /// Ends `claim` by the hub's answer ([`HubSettle`]); false when the claim no longer held its row (its lease
    /// ran out and another publisher took it): nothing changed.
    async fn hub_settle(&self, claim: &HubClaim, settle: HubSettle) -> Result<bool>;
}

/// A feed's rows ([`FeedReads::feed`]), read from one snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedRead {
    /// The newest records by stored change time, newest first (ties: the later id first), at most `limit`.
    pub entries: Vec<FeedEntry>,
    /// The newest tombstones, newest first (ties: loc, descending), at most `limit`; empty unless asked for.
    pub deleted: Vec<FeedDeleted>,
}

/// A record in a feed: a created or updated URL.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct FeedEntry {
    pub id: i64,
    pub loc: String,
    /// The stored `lastmod` (its rendered W3C Datetime), if any.
    pub lastmod: Option<String>,
    /// When its change was stored (`urls.changed_us`, microseconds since the Unix epoch).
    pub changed_us: i64,
}

/// A tombstone in a feed: a deleted URL.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct FeedDeleted {
    pub loc: String,
    /// When it was deleted (microseconds since the Unix epoch).
    pub removed_us: i64,
}

/// Feeds (Atom, `/feed.atom` and `/feed-<section>.atom`): a site's or a section's newest changes, read through the
/// indexes of migration 0016, never a scan of the table: O(limit × sections) rows for a site, O(limit) for a section.
#[async_trait]
pub trait FeedReads: Send + Sync + 'static {
    /// `site`'s newest records by stored change time (`urls.changed_us`; records without one are in no feed),
    /// excluded records (URL health) left out, newest first, at most `limit`: of section `section` (by id; 0 the
    /// default section), or with `None` of the whole site (the newest of each section's newest, merged). With
    /// `tombstones`, also the newest tombstones (`removed`) of the site, or of the section (a tombstone kept before
    /// migration 0016 has no section: it is in the site's feed only), at most `limit`. One snapshot; on the
    /// replica, as a page is.
    async fn feed(&self, site: i64, section: Option<i64>, limit: u32, tombstones: bool) -> Result<FeedRead>;
}

/// A key of the problems' keyset order ([`HreflangReads::hreflang_problems`]): a problem's (href, kind, hreflang).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProblemKey {
    pub href: String,
    pub kind: String,
    pub hreflang: String,
}

/// A problem of an hreflang cluster as stored (`hreflang_problems`): what is wrong with `href` (for `hreflang`, ""
/// when none), of which kind (`duplicate_language`, …), in which cluster (its key), said for people.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct StoredProblem {
    pub href: String,
    pub kind: String,
    pub hreflang: String,
    pub cluster: String,
    pub message: String,
}

impl StoredProblem {
    /// Its place in the keyset order.
    pub fn key(&self) -> ProblemKey {
        ProblemKey { href: self.href.clone(), kind: self.kind.clone(), hreflang: self.hreflang.clone() }
    }
}

/// A site's hreflang counts: the clusters with a stored member in it, its stored members in clusters, and its
/// problems by kind (every kind, 0 included).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HreflangSummary {
    pub clusters: u64,
    pub members: u64,
    pub problems: BTreeMap<String, u64>,
}

/// One hreflang cluster as stored: its key (its smallest href), its members in href order, its resolved set (what
/// its members render under the policy `complete`) and its problems (in every site).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClusterView {
    pub key: String,
    pub members: Vec<ClusterMember>,
    pub set: Vec<Alternate>,
    pub problems: Vec<StoredProblem>,
}

/// A member of a cluster: its href, the site of its stored record (`None`: not stored), and its declaration (the
/// alternates it was sent with) when it declares.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClusterMember {
    pub href: String,
    pub site_id: Option<i64>,
    pub stored: bool,
    pub declared: Option<Vec<Alternate>>,
}

/// hreflang clusters (migration 0018): the problems and counts of a site, and the cluster of a URL. Kept by every
/// write in its transaction (`hreflang.rs`), whatever the site's policy; read where pages are read (the replica,
/// when one is configured).
#[async_trait]
pub trait HreflangReads: Send + Sync + 'static {
    /// Problems of `site`, in (href, kind, hreflang) order, after the `after` key, at most `limit`: a range of the
    /// primary key of `hreflang_problems`.
    async fn hreflang_problems(&self, site: i64, after: Option<&ProblemKey>, limit: u32) -> Result<Vec<StoredProblem>>;
    /// Counts for a site: clusters with a stored member in it, its stored members in clusters, problems by kind.
    /// O(the site's members and problems), through their indexes.
    async fn hreflang_summary(&self, site: i64) -> Result<HreflangSummary>;
    /// The cluster a URL is in (any site): its key, members (href, site_id, stored, declared), the resolved set and
    /// its problems, read in one snapshot; `None` when the URL is in no cluster.
    async fn hreflang_cluster(&self, href: &str) -> Result<Option<ClusterView>>;
}

/// A store: the core's reads and writes (each write returns what it changed), every feature's trait, and its life
/// cycle. One struct per backend implements them all, so an `Arc<dyn Store>` is the whole store, and a feature's
/// methods are called on it as they are (a trait object's supertraits' methods need no import); a part of the
/// server that needs one feature alone may take `&dyn Outbox` (and so on), which `&dyn Store` converts to.
#[async_trait]
pub trait Store:
    StoreReads + Outbox + CrawlLog + HealthQueue + RemovedList + FeedReads + HubOutbox + HreflangReads + PublishLog
{
    /// Applies the embedded migrations, then matches the configured sites to their stored ids (adding new ones);
    /// idempotent. Reads need it first.
    async fn migrate(&self) -> anyhow::Result<()>;
    /// Upserts `entries` in one transaction (a later duplicate of a loc wins), each in the site its loc lies under,
    /// each replacing its stored record whole.
    async fn upsert(&self, entries: &[Entry]) -> Result<Written<UpsertCounts>> {
        self.upsert_with(entries, Upsert::Replace).await
    }
    /// [`Store::upsert`], merging each entry onto its stored record as `mode` says ([`Upsert`]).
    async fn upsert_with(&self, entries: &[Entry], mode: Upsert) -> Result<Written<UpsertCounts>>;
    /// Deletes the records of `locs` in one transaction.
    async fn delete(&self, locs: &[Loc]) -> Result<Written<DeleteCounts>>;
    /// Called once the server has stopped: makes everything durable in the database file itself (SQLite:
    /// checkpoints the WAL into it) and closes the pool. Bounded: connections still held by requests cut off at
    /// the end of the grace period are not waited for longer than [`CLOSE_TIMEOUT`]. Every later call fails as
    /// the store being unavailable.
    async fn close(&self);
    /// The watch of the database's files while serving (SQLite: see `watch.rs`), as a future that looks once a
    /// second until dropped; the server runs it as a background worker, stopped before [`Store::close`]. `None`:
    /// nothing to watch (Postgres, a database in memory, a command that does not serve).
    fn file_watch(&self) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        None
    }
    /// Called by [`open`] once the database is migrated and checked: reads may go to the read replica from now on
    /// (Postgres with `read_url`; nothing otherwise).
    fn read_from_replica(&self) {}
}

/// A listing stops after the record whose rendered size takes the sizes of those listed past this (8 MiB): a page
/// of records with many extensions stays bounded in memory.
pub const LIST_MAX_BYTES: i64 = 8 << 20;

/// The longest [`Store::close`] waits for the pool's connections to come back.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The readiness probe: it names the tables every request reads, so that a database that answers but holds no
/// schema (dropped and recreated empty, or never migrated) is not ready. `WHERE false` reads no row.
const PING_SQL: &str = "SELECT 1 FROM pages WHERE false UNION ALL SELECT 1 FROM urls WHERE false";

/// Writes a consistent copy of the database to `dest`, while other processes may read and write it.
///
/// SQLite: `VACUUM INTO` (one read transaction: a snapshot of the committed state, compacted), then `fsync`. An
/// existing `dest` is refused, never overwritten. Postgres: refused with a pointer to `pg_dump`, the tool that
/// does this for a server (and knows its roles, versions and formats).
pub async fn backup(url: &str, dest: &std::path::Path) -> anyhow::Result<()> {
    match Backend::from_url(url) {
        Some(Backend::Sqlite) => sqlite::backup(url, dest).await,
        Some(Backend::Postgres) => anyhow::bail!(
            "sitemapd backup copies SQLite databases only; for PostgreSQL use pg_dump (for example \
             `pg_dump --format=custom --file=sitemapd.dump \"$DATABASE_URL\"`, restored with pg_restore)"
        ),
        None => anyhow::bail!("DATABASE_URL must start with sqlite:// or postgres://"),
    }
}

/// Connections the pool holds: open, and of those, idle; the same of the read replica's pool, when one is
/// configured (`DATABASE_READ_URL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStatus {
    pub size: u32,
    pub idle: usize,
    pub replica: Option<(u32, usize)>,
}

/// The backend a database URL names: the one decision, made for configuration ([`crate::config`]), [`open`] and
/// [`backup`] alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:…`
    Sqlite,
    /// `postgres:…` or `postgresql:…` (the schemes sqlx's Postgres driver accepts).
    Postgres,
}

impl Backend {
    /// `None` for a URL no store opens.
    pub fn from_url(url: &str) -> Option<Self> {
        let (scheme, _) = url.split_once(':')?;
        match scheme {
            "sqlite" => Some(Self::Sqlite),
            "postgres" | "postgresql" => Some(Self::Postgres),
            _ => None,
        }
    }
}

/// Stored section rows as sections; a name this version would refuse (written by hand) is left out, with a warning:
/// its pages are then served by number under no name.
fn named_sections(rows: Vec<(i64, String)>) -> Vec<(i64, Section)> {
    rows.into_iter()
        .filter_map(|(id, name)| match Section::parse(&name) {
            Ok(section) => Some((id, section)),
            Err(e) => {
                tracing::warn!(target: LOG_TARGET, section = id, error = %e, "a stored section has a name this version refuses");
                None
            }
        })
        .collect()
}

/// How to open the database.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    pub url: String,
    /// A Postgres streaming replica of `url` that the reads of [`StoreReads`] go to (but `outbox_size`), each on
    /// a connection of its own pool; the writes, and the reads a write makes in its transaction, stay on `url`.
    pub read_url: Option<String>,
    /// The configured sites: never empty.
    pub sites: Vec<SiteSpec>,
    pub limits: Limits,
    /// Sections whose pages hold fewer URLs than `limits.max_urls`, by name (in every site).
    pub section_max_urls: BTreeMap<String, u32>,
    pub max_connections: u32,
    /// What stands between sitemapd and Postgres (`url` and `read_url`): [`Pooler::Transaction`] makes every
    /// connection fit a transaction-mode pooler such as PgBouncer (see `postgres.rs`, `PgStore::connect`).
    pub pooler: Pooler,
    /// The longest a request waits for a connection before it is answered 503.
    pub acquire_timeout: Duration,
    /// The sites whose changes are queued for notification (IndexNow), by name: writes to other sites queue
    /// nothing.
    pub notify_sites: BTreeSet<String>,
    /// The sites whose URLs are checked (URL health), by name: a write to one queues the locs it changed for a
    /// check in its transaction; writes to other sites queue nothing.
    pub check_sites: BTreeSet<String>,
    /// The removed-URLs sitemap's retention in days (`removed_days`): a deleted record's loc is kept as a tombstone
    /// that long; 0 keeps none (the sitemap is off). On, the index lists one more sitemap ([`Shape::max_pages`]).
    pub removed_days: u32,
    /// Each site's hreflang policy, by name (`[sitemaps] hreflang`): what its members render, their declaration
    /// (`as_sent`) or their cluster's complete set (`complete`). A site not named is `as_sent`. Read by the store at
    /// `migrate` ([`write::Shape::hreflang`], by site id), where a site whose stored rendering follows another
    /// policy is re-rendered.
    pub hreflang: BTreeMap<String, sitemapd_core::hreflang::Policy>,
    /// Whether this process serves the database (SQLite: it stamps the file and watches it, see `watch.rs`);
    /// false for the CLI's commands, which share the file with a running server.
    pub serving: bool,
}

impl StoreOptions {
    /// How the store lays out pages: the removed-URLs sitemap, when on, takes one of the index's entries.
    fn shape(&self) -> write::Shape {
        let (section_max_urls, removed_days) = (self.section_max_urls.clone(), self.removed_days);
        write::Shape { section_max_urls, removed_days, ..write::Shape::uniform(self.limits) }
    }
}

/// What the Postgres URLs lead to: the server itself (or a session-mode pooler), or a transaction-mode pooler
/// (PgBouncer's `pool_mode = transaction`), which may give each transaction, and each statement outside one,
/// another server connection. Ignored for SQLite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pooler {
    /// Connections are the server's own: statements are prepared once per connection and cached, and the
    /// timeouts are set once per connection (the `options` startup parameter).
    #[default]
    None,
    /// Nothing is left on a server connection between transactions: no named prepared statement (each statement
    /// is parsed, bound and run in one round trip), no `options` or `extra_float_digits` startup parameter (the
    /// write transaction sets its timeouts itself), migrations under a transaction-scoped lock.
    Transaction,
}

impl Pooler {
    /// `none` or `transaction`, as the setting is written.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "none" => Some(Self::None),
            "transaction" => Some(Self::Transaction),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Transaction => "transaction",
        }
    }
}

/// A day, in microseconds: the removed-URLs sitemap's retention is counted in days.
pub const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Opens the store `options.url` names (`sqlite:` or `postgres:`) and applies migrations.
pub async fn open(options: &StoreOptions) -> anyhow::Result<Arc<dyn Store>> {
    let store: Arc<dyn Store> = match Backend::from_url(&options.url) {
        Some(Backend::Sqlite) if options.read_url.is_some() => {
            anyhow::bail!("DATABASE_READ_URL names a Postgres replica: DATABASE_URL must be postgres:// too")
        }
        // Each connect's error names what it could not reach (the path, the host and port), once.
        Some(Backend::Sqlite) => Arc::new(SqliteStore::connect(options).await?),
        Some(Backend::Postgres) => Arc::new(PgStore::connect(options).await?),
        None => anyhow::bail!("DATABASE_URL must start with sqlite:// or postgres://"),
    };
    store.migrate().await.context("cannot apply database migrations")?;
    check_limits(&*store, options).await?;
    store.read_from_replica();
    Ok(store)
}

/// Refuses limits lower than what stored pages already hold: they would break the limits and nothing rebalances
/// pages (yet). The same for a section's own page size (`section_max_urls`). O(pages).
/// And refuses the removed-URLs sitemap for a site whose pages already take every entry of its index.
async fn check_limits(store: &dyn StoreReads, options: &StoreOptions) -> anyhow::Result<()> {
    let (limits, section_max_urls) = (options.limits, &options.section_max_urls);
    let room = options.shape().max_pages();
    for site in store.sites().iter() {
        let pages = store.pages(site.id).await.context("cannot read the page table")?;
        check_site_limits(&site.name, &pages, limits)?;
        // The room counts the pages that hold a URL (`placement::IndexFull`): empty ones are not listed.
        let held = pages.iter().filter(|p| p.url_count > 0).count();
        if held as i64 > room {
            anyhow::bail!(
                "site {} has {held} pages, and its index lists at most 49,999 besides the news sitemap: it has no \
                 room for the removed-URLs sitemap, so keep removed_days (SITEMAPD_REMOVED_DAYS) at 0",
                site.name,
            );
        }
        if section_max_urls.is_empty() {
            continue;
        }
        for (id, name) in store.sections(site.id).await.context("cannot read the sections")? {
            let Some(&max) = section_max_urls.get(name.as_str()) else { continue };
            let held = pages.iter().filter(|p| section_of(p.id) == id).map(|p| p.url_count).max().unwrap_or(0);
            if held > i64::from(max) {
                anyhow::bail!(
                    "a page of section {name} of site {} already holds {held} URLs, more than section_max_urls \
                     (SITEMAPD_SECTION_MAX_URLS) gives it ({name}={max}): stored pages are not rebalanced, so keep \
                     it at {held} or more",
                    site.name
                );
            }
        }
    }
    Ok(())
}

fn check_site_limits(site: &str, pages: &[PageState], limits: Limits) -> anyhow::Result<()> {
    if let Some(p) = pages.iter().find(|p| p.url_count > i64::from(limits.max_urls)) {
        anyhow::bail!(
            "page {} of site {site} already holds {} URLs, more than page_max_urls (SITEMAPD_PAGE_MAX_URLS) = {}: \
             stored pages are not rebalanced, so keep the setting at {} or more",
            p.id,
            p.url_count,
            limits.max_urls,
            pages.iter().map(|p| p.url_count).max().unwrap_or(0)
        );
    }
    if let Some(p) = pages.iter().find(|p| !limits.fits_bytes(p.byte_size)) {
        anyhow::bail!(
            "page {} of site {site} already needs {} bytes, more than page_max_bytes (SITEMAPD_PAGE_MAX_BYTES) = {}: \
             stored pages are not rebalanced, so keep the setting at {} or more",
            p.id,
            page_bytes(p.byte_size),
            limits.max_bytes,
            page_bytes(pages.iter().map(|p| p.byte_size).max().unwrap_or(0))
        );
    }
    Ok(())
}

/// The sites of a store that was not migrated (`store::open` always migrates, which registers them): numbered in
/// configuration order, the first as the default site. Such a store can only fail (its schema is not known to be
/// there); this lets it do so with the store's own errors.
fn unregistered(specs: &[SiteSpec]) -> Arc<Sites> {
    Arc::new(Sites::new(
        specs.iter().zip(1..).map(|(spec, id)| sitemapd_core::domain::Site::new(id, spec.clone())).collect(),
    ))
}

/// Each configured policy by the id of its site (names of sites not configured are left out).
fn policies(
    sites: &Sites,
    names: &BTreeMap<String, sitemapd_core::hreflang::Policy>,
) -> BTreeMap<i64, sitemapd_core::hreflang::Policy> {
    names.iter().filter_map(|(n, p)| Some((sites.by_name(n)?.id, *p))).collect()
}

/// The ids of the sites named in `names`.
fn site_ids(sites: &Sites, names: &BTreeSet<String>) -> BTreeSet<i64> {
    names.iter().filter_map(|n| sites.by_name(n)).map(|s| s.id).collect()
}

/// Warns about stored URLs of sites that are not configured: they are kept, and served by no host.
fn warn_unserved(stored: Vec<(String, i64)>, sites: &Sites) {
    for (name, urls) in stored.into_iter().filter(|(name, _)| sites.by_name(name).is_none()) {
        tracing::warn!(target: LOG_TARGET,
            site = %name,
            urls,
            configured = %sites,
            "the database holds URLs of a site that is not configured: no host serves them. Configure it (sites, \
             SITEMAPD_SITES), or rename its row (UPDATE sites SET name = '...' WHERE name = '...') to the name of \
             the site they belong to; see docs/sites.md"
        );
    }
}

#[derive(sqlx::FromRow)]
struct UrlRow {
    site_id: i64,
    id: i64,
    loc: String,
    page_id: i64,
    lastmod: Option<String>,
    changefreq: Option<String>,
    priority: Option<i64>,
    ext: Option<String>,
    news: Option<String>,
    size: i64,
}

impl From<UrlRow> for SiteUrl {
    fn from(r: UrlRow) -> Self {
        Self { site: r.site_id, url: r.into() }
    }
}

impl From<UrlRow> for StoredUrl {
    fn from(r: UrlRow) -> Self {
        let news = r.news.as_deref().and_then(|json| read_news(&r.loc, json));
        let ext = Fields::ext_from_parts(r.ext.as_deref().and_then(|json| read_ext(&r.loc, json)), news);
        Self {
            id: r.id,
            loc: r.loc,
            page_id: r.page_id,
            fields: Fields {
                lastmod: r.lastmod,
                changefreq: r.changefreq,
                priority: r.priority.and_then(Priority::from_millionths),
                ext,
            },
            size: r.size,
        }
    }
}

/// A record's stored extensions (`urls.ext`). Only this version writes them, so a row that does not read back was
/// changed by hand: it is logged and read as having none (its page then renders shorter than counted, which is
/// logged too).
pub fn read_ext(loc: &str, json: &str) -> Option<Box<Extensions>> {
    serde_json::from_str(json)
        .map_err(|e| tracing::error!(target: LOG_TARGET, loc, error = %e, "a stored record's extensions do not read back; left out"))
        .ok()
}

/// A record's stored news (`urls.news`), as [`read_ext`].
pub fn read_news(loc: &str, json: &str) -> Option<News> {
    serde_json::from_str(json)
        .map_err(|e| tracing::error!(target: LOG_TARGET, loc, error = %e, "a stored record's news does not read back; left out"))
        .ok()
}

#[derive(sqlx::FromRow)]
struct PageRow {
    id: i64,
    url_count: i64,
    byte_size: i64,
    version: i64,
    modified_us: i64,
    image_urls: i64,
    video_urls: i64,
    xhtml_urls: i64,
    gzip: i32,
    excluded: i64,
}

impl From<PageRow> for PageState {
    fn from(r: PageRow) -> Self {
        Self {
            id: r.id,
            url_count: r.url_count,
            byte_size: r.byte_size,
            version: r.version,
            modified_us: r.modified_us,
            ns: NsCounts { image: r.image_urls, video: r.video_urls, xhtml: r.xhtml_urls },
            gzip: Gzip::from_code(r.gzip),
            excluded: r.excluded,
        }
    }
}

/// Column lists as literals, so that queries built with `concat!` stay `&'static str` (sqlx's `SqlSafeStr`).
macro_rules! url_columns {
    () => {
        "site_id, id, loc, page_id, lastmod, changefreq, priority, ext, news, size"
    };
}
macro_rules! page_columns {
    () => {
        "id, url_count, byte_size, version, modified_us, image_urls, video_urls, xhtml_urls, gzip, excluded"
    };
}
use {page_columns, url_columns};

/// The target of this module's log lines: the one it had before the crate split (`sitemapd::store`), so that `RUST_LOG`
/// filters and log processing that name it keep working.
const LOG_TARGET: &str = "sitemapd::store";

fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Distinct locs in first-appearance order.
fn distinct(locs: &[Loc]) -> Vec<&str> {
    let mut seen = std::collections::HashSet::with_capacity(locs.len());
    locs.iter().map(Loc::as_str).filter(|l| seen.insert(*l)).collect()
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::str::FromStr;

    use sqlx::error::{DatabaseError, ErrorKind};

    use super::*;

    /// A database error with a given SQLSTATE, as the Postgres driver reports one (not an SQLite error).
    #[derive(Debug)]
    struct WithCode(&'static str);

    impl std::fmt::Display for WithCode {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error {}", self.0)
        }
    }

    impl std::error::Error for WithCode {}

    impl DatabaseError for WithCode {
        fn message(&self) -> &str {
            "test"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn classify(code: &'static str) -> StoreError {
        StoreError::from(sqlx::Error::Database(Box::new(WithCode(code))))
    }

    #[test]
    fn failures_to_connect_or_stay_connected_are_unavailable() {
        for (code, what) in [
            ("08000", "connection exception"),
            ("08001", "cannot establish the connection"),
            ("08006", "connection failure"),
            ("08P01", "protocol violation"),
            ("3D000", "unknown database (dropped or not created)"),
            ("28000", "invalid authorization (role NOLOGIN)"),
            ("28P01", "wrong password"),
            ("53300", "too many clients"),
            ("53100", "disk full"),
            ("57P01", "admin shutdown"),
            ("57P02", "crash shutdown"),
            ("57P03", "cannot connect now (starting up)"),
            ("57P04", "database dropped"),
            ("40001", "serialization failure"),
            ("40P01", "deadlock"),
            ("55P03", "lock timeout"),
            ("57014", "statement timeout"),
        ] {
            assert!(matches!(classify(code), StoreError::Unavailable(_)), "{code} ({what}) must be a 503");
        }
    }

    #[test]
    fn errors_of_the_statement_or_the_schema_are_internal() {
        for (code, what) in [
            ("23505", "unique violation"),
            ("23503", "foreign key violation"),
            ("42P01", "undefined table"),
            ("42601", "syntax error"),
            ("22003", "numeric value out of range"),
            ("XX000", "internal error"),
        ] {
            assert!(matches!(classify(code), StoreError::Other(_)), "{code} ({what}) must be a 500");
        }
    }

    #[test]
    fn pool_and_transport_failures_are_unavailable() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        for e in [sqlx::Error::PoolTimedOut, sqlx::Error::PoolClosed, sqlx::Error::Io(io)] {
            assert!(matches!(StoreError::from(e), StoreError::Unavailable(_)));
        }
        assert!(matches!(StoreError::from(sqlx::Error::RowNotFound), StoreError::Other(_)));
    }

    #[test]
    fn sqlite_codes() {
        // Primary and extended codes: SQLITE_BUSY_SNAPSHOT (517), SQLITE_IOERR_WRITE (778), SQLITE_CANTOPEN_ISDIR
        // (526).
        for code in [5, 6, 10, 13, 14, 517, 778, 526] {
            assert!(sqlite_code_is_unavailable(code), "{code}");
        }
        // SQLITE_ERROR, SQLITE_CONSTRAINT (unique: 2067), SQLITE_CORRUPT, SQLITE_MISMATCH.
        for code in [1, 19, 2067, 11, 20] {
            assert!(!sqlite_code_is_unavailable(code), "{code}");
        }
    }

    #[tokio::test]
    async fn an_sqlite_file_that_cannot_be_opened_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone/sitemapd.db");
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display())).unwrap();
        let e = sqlx::ConnectOptions::connect(&options).await.expect_err("the directory does not exist");
        assert!(matches!(StoreError::from(e), StoreError::Unavailable(_)));
    }
}
