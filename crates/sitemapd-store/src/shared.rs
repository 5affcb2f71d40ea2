//! What both backends run alike: the queries whose SQL is the same text for both (SQLite takes Postgres's
//! numbered `$N` parameters), written once over sqlx's [`Database`], and the read half of the store on top of them.
//!
//! What differs stays in the backend, behind [`Backend`]: how a snapshot of a page is read, the file check of
//! SQLite's readiness probe, and each feature's writes (under SQLite's writer lock, in Postgres's transactions).
//! The store's traits are implemented here once, for every backend: the reads over the shared queries, the
//! feature writes over the backend's.

use async_trait::async_trait;
use futures_util::TryStreamExt;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Transaction, Type};

use std::sync::Arc;
use std::time::Duration;

use super::crawls::{self, CrawlerState, FetchRecord, PageRead, RecordCrawls};
use super::health::{Checks, HealthSummary, ProblemFilter, UrlCheck};
use super::hreflang::{self, NodeRow};
use super::publish::{Held, PublishLog, PublishStatus, PublishedObject};
use super::{
    BrakeOrder, BrakeState, CheckClaim, CheckResult, CheckSettled, Claim, ClusterMember, ClusterView, CrawlLog,
    EntryStream, FeedDeleted, FeedEntry, FeedRead, FeedReads, HealthQueue, HreflangReads, HreflangSummary, HubClaim,
    HubOutbox, HubRow, HubSettle, NewsRead, Outbox, PageEntry, PageRow, PoolStatus, ProblemKey, RemovedList,
    RemovedRead, Result, Settle, Settled, SiteUrl, StoreReads, StoredProblem, UrlRow, Written, page_columns,
    url_columns,
};
use sitemapd_core::domain::{Loc, Section, Site, SiteSpec, Sites};
use sitemapd_core::page::{PageState, StoredUrl};
use sitemapd_core::placement;

// FEED_SQL and migration 0016's index take a record's section as `page_id >> 20`.
const _: () = assert!(sitemapd_core::page::SECTION_SHIFT == 20, "FEED_SQL and urls_feed shift page ids by 20");

const FIND_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls WHERE loc = $1");
const LIST_AFTER_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls WHERE id > $1 ORDER BY id LIMIT $2");
/// One page's records in id order after the record with id `$3` (keyset paging): a range of `urls_site_page_id`,
/// already in order, so no sort and no row of another page is read. Postgres runs it under
/// [`super::postgres::PAGE_PLANNER_SETTINGS`]: for a few rows it would rather collect them by a bitmap scan and sort
/// them, which on a full page reads all of its 50,000 rows for each screen. A test pins the plan on both backends.
pub const PAGE_URLS_SQL: &str = concat!(
    "SELECT ",
    url_columns!(),
    " FROM urls WHERE site_id = $1 AND page_id = $2 AND id > $3 ORDER BY site_id, page_id, id LIMIT $4"
);
/// One site's records in id order (the primary key's order, filtered).
const LIST_SITE_AFTER_SQL: &str =
    concat!("SELECT ", url_columns!(), " FROM urls WHERE id > $1 AND site_id = $3 ORDER BY id LIMIT $2");
/// Every record of a site in id order (the repair's scan).
const URLS_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls WHERE site_id = $1 ORDER BY id");
const PAGES_SQL: &str = concat!("SELECT ", page_columns!(), " FROM pages WHERE site_id = $1 ORDER BY id");
const PAGE_SQL: &str = concat!("SELECT ", page_columns!(), " FROM pages WHERE site_id = $1 AND id = $2");
/// A site's news window, newest first, through `urls_news_us` (a backward scan); excluded records (URL health)
/// left out.
pub const NEWS_SQL: &str = "SELECT loc, news, news_us FROM urls \
     WHERE site_id = $4 AND news_us >= $1 AND news_us <= $2 AND NOT excluded ORDER BY site_id DESC, news_us DESC, id DESC LIMIT $3";
const NEWS_STATE_SQL: &str = "SELECT modified_us FROM news_state WHERE site_id = $1";
/// The newest publication date before the window, through the same index.
pub const NEWS_BEFORE_SQL: &str = "SELECT news_us FROM urls WHERE site_id = $2 AND news_us < $1 AND NOT excluded ORDER BY site_id DESC, news_us DESC LIMIT 1";
/// A site's removed-URLs window, newest first, through `removed_site_time` (a backward scan, index only).
pub const REMOVED_SQL: &str = "SELECT loc, removed_us FROM removed WHERE site_id = $1 AND removed_us >= $2 \
     ORDER BY site_id DESC, removed_us DESC, loc DESC LIMIT $3";
/// The newest deletion time before the window, through the same index.
const REMOVED_BEFORE_SQL: &str = "SELECT removed_us FROM removed WHERE site_id = $1 AND removed_us < $2 \
     ORDER BY site_id DESC, removed_us DESC LIMIT 1";
const REMOVED_STATE_SQL: &str = "SELECT modified_us FROM removed_state WHERE site_id = $1";
/// Whether a site has any tombstone: the first entry of its primary key, if any.
const HAS_REMOVED_SQL: &str = "SELECT site_id FROM removed WHERE site_id = $1 LIMIT 1";
/// The removed-URLs stamp of a write: moves to `now`, and at least a millisecond on (as a page's does). The row is
/// inserted by a site's first change; either way the site's change counter moves (migration 0011).
const TOUCH_REMOVED_SQL: &str = "INSERT INTO removed_state (site_id, modified_us) VALUES ($2, $1) \
     ON CONFLICT (site_id) DO UPDATE SET modified_us = CASE WHEN excluded.modified_us > removed_state.modified_us + 1000 \
     THEN excluded.modified_us ELSE removed_state.modified_us + 1000 END";
/// The removed-URLs stamp of a purge: moves to `$1` if that is later (the moment the purged tombstones left the
/// window, which the sitemap's Last-Modified already counted), else stays, and the change counter with it.
const RAISE_REMOVED_SQL: &str = "INSERT INTO removed_state (site_id, modified_us) VALUES ($2, $1) \
     ON CONFLICT (site_id) DO UPDATE SET modified_us = excluded.modified_us \
     WHERE excluded.modified_us > removed_state.modified_us";
/// A change of `$1` that moves no page: what makes every process read its page table again.
const COUNT_CHANGE_SQL: &str = "UPDATE sites SET changes = changes + 1 WHERE id = $1";
/// At most `$3` of a site's tombstones deleted before `$2`, oldest first (the index, forwards).
const PURGE_REMOVED_SQL: &str = "DELETE FROM removed WHERE site_id = $1 AND loc IN (SELECT loc FROM removed \
     WHERE site_id = $1 AND removed_us < $2 ORDER BY site_id, removed_us LIMIT $3) RETURNING removed_us";
/// A section's newest records by stored change time, newest first: a forward scan of `urls_feed`'s range of the
/// section (`$2`, a page id shifted by `page::SECTION_SHIFT`), stopped after `$3` rows that are not excluded (URL
/// health). A test pins the plan on both backends (no sort, no scan of the table).
pub const FEED_SQL: &str = "SELECT id, loc, lastmod, changed_us FROM urls \
     WHERE site_id = $1 AND (page_id >> 20) = $2 AND changed_us IS NOT NULL AND NOT excluded \
     ORDER BY changed_us DESC, id DESC LIMIT $3";
/// A site's newest tombstones, newest first, through `removed_site_time` (a backward scan, index only).
pub const FEED_REMOVED_SQL: &str = "SELECT loc, removed_us FROM removed WHERE site_id = $1 \
     ORDER BY site_id DESC, removed_us DESC, loc DESC LIMIT $2";
/// A section's newest tombstones, newest first, through `removed_section_time` (a backward scan, index only).
pub const FEED_REMOVED_SECTION_SQL: &str = "SELECT loc, removed_us FROM removed WHERE site_id = $1 AND section_id = $2 \
     ORDER BY site_id DESC, section_id DESC, removed_us DESC, loc DESC LIMIT $3";
/// A configured site's row: added the first time its name is configured, found by name after that.
const ADD_SITE_SQL: &str = "INSERT INTO sites (name) VALUES ($1) ON CONFLICT (name) DO NOTHING";
const SITE_ID_SQL: &str = "SELECT id FROM sites WHERE name = $1";
const ADD_NEWS_STATE_SQL: &str = "INSERT INTO news_state (site_id, modified_us) VALUES ($1, 0) ON CONFLICT DO NOTHING";
/// URLs stored per site, by name: O(pages).
const STORED_SITES_SQL: &str = "SELECT s.name, CAST(sum(p.url_count) AS BIGINT) FROM pages p \
     JOIN sites s ON s.id = p.site_id GROUP BY s.name HAVING sum(p.url_count) > 0 ORDER BY s.name";
const TASK_PENDING_SQL: &str = "SELECT name FROM upgrade_tasks WHERE name = $1";
const TASK_DONE_SQL: &str = "DELETE FROM upgrade_tasks WHERE name = $1";
/// The news sitemap's change stamp moves to `now`, and at least a millisecond on (as a page's does).
const TOUCH_NEWS_SQL: &str = "UPDATE news_state SET modified_us = \
     CASE WHEN $1 > modified_us + 1000 THEN $1 ELSE modified_us + 1000 END WHERE site_id = $2";
/// A site's change counter (moved on by the triggers of migration 0006): one primary-key read.
const CHANGES_SQL: &str = "SELECT changes FROM sites WHERE id = $1";
/// A site's sections, in id order: a few rows.
const SECTIONS_SQL: &str = "SELECT id, name FROM sections WHERE site_id = $1 ORDER BY id";
const ADD_SECTION_SQL: &str = "INSERT INTO sections (site_id, id, name) VALUES ($1, $2, $3)";
/// One site's records of one section (a range of page ids) in id order.
const LIST_SECTION_AFTER_SQL: &str = concat!(
    "SELECT ",
    url_columns!(),
    " FROM urls WHERE id > $1 AND site_id = $3 AND page_id BETWEEN $4 AND $5 ORDER BY id LIMIT $2"
);
const REPAIR_URL_SQL: &str = "UPDATE urls SET loc = $2, page_id = $3, size = $4 WHERE id = $1";

/// A backend's database with the queries both backends share. Implemented for every sqlx database that can run
/// them (both of ours), so that sqlx's bounds are written once, on that implementation.
pub(crate) trait Sql: Database {
    /// The readiness probe's query ([`super::PING_SQL`]).
    fn ping(pool: &Pool<Self>) -> impl Future<Output = Result<()>> + Send;
    fn find(pool: &Pool<Self>, loc: &str) -> impl Future<Output = Result<Option<SiteUrl>>> + Send;
    /// Records in id order after the record with id `after` (keyset paging), of one site or all.
    fn list_after(
        pool: &Pool<Self>,
        site: Option<i64>,
        after: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<SiteUrl>>> + Send;
    /// [`Sql::list_after`] of one section of one site.
    fn list_section_after(
        pool: &Pool<Self>,
        site: i64,
        section: i64,
        after: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<SiteUrl>>> + Send;
    /// A site's sections (id, name), in id order.
    fn sections(conn: &mut Self::Connection, site: i64) -> impl Future<Output = Result<Vec<(i64, String)>>> + Send;
    /// Records section `id` of `site`, named `name`.
    fn add_section(
        conn: &mut Self::Connection,
        site: i64,
        id: i64,
        name: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// One page's records in id order after the record with id `after` (keyset paging), on `conn` (Postgres: in
    /// a transaction with [`super::postgres::PAGE_PLANNER_SETTINGS`]).
    fn page_urls(
        conn: &mut Self::Connection,
        site: i64,
        page_id: i64,
        after: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<StoredUrl>>> + Send;
    /// A site's whole page table, in page order.
    fn pages(pool: &Pool<Self>, site: i64) -> impl Future<Output = Result<Vec<PageState>>> + Send;
    fn page(pool: &Pool<Self>, site: i64, id: i64) -> impl Future<Output = Result<Option<PageState>>> + Send;
    /// A site's whole page table, in page order, inside a transaction.
    fn pages_in(conn: &mut Self::Connection, site: i64) -> impl Future<Output = Result<Vec<PageState>>> + Send;
    /// A non-empty page's state, inside a transaction (the snapshot its entries are then read from).
    fn nonempty_page_in(
        conn: &mut Self::Connection,
        site: i64,
        id: i64,
    ) -> impl Future<Output = Result<Option<PageState>>> + Send;
    /// The rows `sql` (a page's entries in page order, `$1` its site and `$2` its id) reads in `tx`, streamed;
    /// the stream holds `tx`, and with it the snapshot, until it ends.
    fn entries(tx: Transaction<'static, Self>, sql: &'static str, site: i64, id: i64) -> EntryStream;
    /// Matches `specs` to their stored ids by name, adding the new ones.
    fn register_sites(pool: &Pool<Self>, specs: &[SiteSpec]) -> impl Future<Output = Result<Sites>> + Send;
    /// The name and URL count of every site with stored URLs.
    fn stored_sites(pool: &Pool<Self>) -> impl Future<Output = Result<Vec<(String, i64)>>> + Send;
    /// The news sitemap's rows ([`StoreReads::news`]), read in `tx` (one snapshot).
    fn news_in(
        tx: Transaction<'static, Self>,
        site: i64,
        since_us: i64,
        until_us: i64,
        limit: u32,
    ) -> impl Future<Output = Result<NewsRead>> + Send;
    /// A feed's rows ([`FeedReads::feed`]), read in `tx` (one snapshot).
    fn feed_in(
        tx: Transaction<'static, Self>,
        site: i64,
        section: Option<i64>,
        limit: u32,
        tombstones: bool,
    ) -> impl Future<Output = Result<FeedRead>> + Send;
    /// Whether the one-time upgrade task `name` is still to be done.
    fn task_pending(conn: &mut Self::Connection, name: &str) -> impl Future<Output = Result<bool>> + Send;
    fn task_done(conn: &mut Self::Connection, name: &str) -> impl Future<Output = Result<()>> + Send;
    /// Every stored record of `site` that is not what this version would store, with the loc it should have
    /// ([`placement::recount`]), in id order; streamed, so only those records are held.
    fn stale_urls(
        conn: &mut Self::Connection,
        site: i64,
    ) -> impl Future<Output = Result<Vec<(StoredUrl, String)>>> + Send;
    /// Records that an entry of `site` with news changed, at `now_us` ([`TOUCH_NEWS_SQL`]).
    fn touch_news(conn: &mut Self::Connection, site: i64, now_us: i64) -> impl Future<Output = Result<()>> + Send;
    /// The removed-URLs sitemap's rows ([`RemovedList::removed`]), read in `tx` (one snapshot).
    fn removed_in(
        tx: Transaction<'static, Self>,
        site: i64,
        since_us: i64,
        limit: u32,
    ) -> impl Future<Output = Result<RemovedRead>> + Send;
    /// `site`'s removed-URLs stamp ([`RemovedList::removed_stamp`]).
    fn removed_stamp(pool: &Pool<Self>, site: i64) -> impl Future<Output = Result<i64>> + Send;
    /// Whether `site` has any tombstone: one index probe.
    fn has_removed(conn: &mut Self::Connection, site: i64) -> impl Future<Output = Result<bool>> + Send;
    /// Moves `site`'s removed-URLs stamp for a write at `now_us` ([`TOUCH_REMOVED_SQL`]).
    fn touch_removed(conn: &mut Self::Connection, site: i64, now_us: i64) -> impl Future<Output = Result<()>> + Send;
    /// Deletes at most `limit` of `site`'s tombstones older than `before_us`, oldest first, and moves its stamp to
    /// the moment the newest of them left a window of `window_us`; how many it deleted.
    fn purge_removed_in(
        conn: &mut Self::Connection,
        site: i64,
        before_us: i64,
        window_us: i64,
        limit: u32,
    ) -> impl Future<Output = Result<u64>> + Send;
    /// `site`'s change counter ([`StoreReads::changes`]).
    fn changes(pool: &Pool<Self>, site: i64) -> impl Future<Output = Result<i64>> + Send;
    /// `site`'s change counter, inside a transaction.
    fn changes_in(conn: &mut Self::Connection, site: i64) -> impl Future<Output = Result<i64>> + Send;
    /// Writes a repaired record's loc, page and size.
    fn repair_url(conn: &mut Self::Connection, url: &placement::RepairedUrl)
    -> impl Future<Output = Result<()>> + Send;
    /// Queued change notifications per site ([`Outbox::outbox_size`]).
    fn outbox_size(pool: &Pool<Self>) -> impl Future<Output = Result<Vec<(i64, i64)>>> + Send;
    /// A site's crawler fetch records ([`CrawlLog::crawler_fetches`]).
    fn crawler_fetches(conn: &mut Self::Connection, site: i64)
    -> impl Future<Output = Result<Vec<FetchRecord>>> + Send;
    /// The newest version each crawler read of one page or all ([`CrawlLog::crawler_seen`]).
    fn crawler_seen(
        conn: &mut Self::Connection,
        site: i64,
        page: Option<i64>,
    ) -> impl Future<Output = Result<Vec<PageRead>>> + Send;
    /// When record `id` of `site` last changed in its page (`urls.changed_us`; `None`: not known).
    fn record_changed_in(
        conn: &mut Self::Connection,
        site: i64,
        id: i64,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;
    /// The lags of a site's recent page reads ([`CrawlLog::crawler_lags`]).
    fn crawler_lags(
        conn: &mut Self::Connection,
        site: i64,
        since_us: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<(String, i64)>>> + Send;
    /// A site's hreflang problems after `after`, at most `limit` ([`HreflangReads::hreflang_problems`]).
    fn hreflang_problems(
        pool: &Pool<Self>,
        site: i64,
        after: Option<&ProblemKey>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<StoredProblem>>> + Send;
    /// A site's hreflang counts ([`HreflangReads::hreflang_summary`]), every kind of problem but those with none.
    fn hreflang_summary(pool: &Pool<Self>, site: i64) -> impl Future<Output = Result<HreflangSummary>> + Send;
    /// `site`'s stored hreflang policy (`sites.hreflang`; `None`: its clusters are not built).
    fn hreflang_policy(conn: &mut Self::Connection, site: i64) -> impl Future<Output = Result<Option<String>>> + Send;
    /// Stores `site`'s hreflang policy: its clusters are built and rendered by it.
    fn set_hreflang_policy(
        conn: &mut Self::Connection,
        site: i64,
        policy: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// `site`'s records that may declare alternates, in id order after `after`, at most `limit`.
    fn declaring_after(
        conn: &mut Self::Connection,
        site: i64,
        after: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<StoredUrl>>> + Send;
    /// The keys of the clusters with a stored member in `site`, in order after `after`, at most `limit`.
    fn site_clusters_after(
        conn: &mut Self::Connection,
        site: i64,
        after: &str,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// The cluster `href` is in: its key, its node rows in href order and its problems; `None`: in no cluster.
    fn hreflang_cluster_in(
        conn: &mut Self::Connection,
        href: &str,
    ) -> impl Future<Output = Result<Option<hreflang::ClusterRows>>> + Send;
}

impl<DB> Sql for DB
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    UrlRow: for<'r> FromRow<'r, DB::Row>,
    PageRow: for<'r> FromRow<'r, DB::Row>,
    PageEntry: for<'r> FromRow<'r, DB::Row>,
    (String,): for<'r> FromRow<'r, DB::Row>,
    (i64,): for<'r> FromRow<'r, DB::Row>,
    (i64, i64): for<'r> FromRow<'r, DB::Row>,
    (i64, String): for<'r> FromRow<'r, DB::Row>,
    (String, Option<String>, i64): for<'r> FromRow<'r, DB::Row>,
    (String, i64): for<'r> FromRow<'r, DB::Row>,
    NodeRow: for<'r> FromRow<'r, DB::Row>,
    (Option<String>,): for<'r> FromRow<'r, DB::Row>,
    StoredProblem: for<'r> FromRow<'r, DB::Row>,
    FetchRecord: for<'r> FromRow<'r, DB::Row>,
    FeedEntry: for<'r> FromRow<'r, DB::Row>,
    PageRead: for<'r> FromRow<'r, DB::Row>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    async fn ping(pool: &Pool<Self>) -> Result<()> {
        sqlx::query(super::PING_SQL).execute(pool).await?;
        Ok(())
    }

    async fn find(pool: &Pool<Self>, loc: &str) -> Result<Option<SiteUrl>> {
        let row: Option<UrlRow> = sqlx::query_as(FIND_SQL).bind(loc).fetch_optional(pool).await?;
        Ok(row.map(Into::into))
    }

    async fn list_after(pool: &Pool<Self>, site: Option<i64>, after: i64, limit: u32) -> Result<Vec<SiteUrl>> {
        let query = match site {
            None => sqlx::query_as::<_, UrlRow>(LIST_AFTER_SQL).bind(after).bind(i64::from(limit)),
            Some(site) => {
                sqlx::query_as::<_, UrlRow>(LIST_SITE_AFTER_SQL).bind(after).bind(i64::from(limit)).bind(site)
            }
        };
        listing(query.fetch(pool)).await
    }

    async fn list_section_after(
        pool: &Pool<Self>,
        site: i64,
        section: i64,
        after: i64,
        limit: u32,
    ) -> Result<Vec<SiteUrl>> {
        let ids = sitemapd_core::page::section_ids(section);
        let query = sqlx::query_as::<_, UrlRow>(LIST_SECTION_AFTER_SQL)
            .bind(after)
            .bind(i64::from(limit))
            .bind(site)
            .bind(*ids.start())
            .bind(*ids.end());
        listing(query.fetch(pool)).await
    }

    async fn sections(conn: &mut Self::Connection, site: i64) -> Result<Vec<(i64, String)>> {
        Ok(sqlx::query_as(SECTIONS_SQL).bind(site).fetch_all(conn).await?)
    }

    async fn add_section(conn: &mut Self::Connection, site: i64, id: i64, name: &str) -> Result<()> {
        sqlx::query(ADD_SECTION_SQL).bind(site).bind(id).bind(name).execute(conn).await?;
        Ok(())
    }

    async fn page_urls(
        conn: &mut Self::Connection,
        site: i64,
        page_id: i64,
        after: i64,
        limit: u32,
    ) -> Result<Vec<StoredUrl>> {
        let rows = sqlx::query_as::<_, UrlRow>(PAGE_URLS_SQL)
            .bind(site)
            .bind(page_id)
            .bind(after)
            .bind(i64::from(limit))
            .fetch(conn);
        Ok(listing(rows).await?.into_iter().map(|u| u.url).collect())
    }

    async fn pages(pool: &Pool<Self>, site: i64) -> Result<Vec<PageState>> {
        let rows: Vec<PageRow> = sqlx::query_as(PAGES_SQL).bind(site).fetch_all(pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn page(pool: &Pool<Self>, site: i64, id: i64) -> Result<Option<PageState>> {
        let row: Option<PageRow> = sqlx::query_as(PAGE_SQL).bind(site).bind(id).fetch_optional(pool).await?;
        Ok(row.map(Into::into))
    }

    async fn pages_in(conn: &mut Self::Connection, site: i64) -> Result<Vec<PageState>> {
        let rows: Vec<PageRow> = sqlx::query_as(PAGES_SQL).bind(site).fetch_all(conn).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn nonempty_page_in(conn: &mut Self::Connection, site: i64, id: i64) -> Result<Option<PageState>> {
        let row: Option<PageRow> = sqlx::query_as(PAGE_SQL).bind(site).bind(id).fetch_optional(conn).await?;
        Ok(row.map(PageState::from).filter(PageState::listed))
    }

    async fn register_sites(pool: &Pool<Self>, specs: &[SiteSpec]) -> Result<Sites> {
        let mut sites = Vec::with_capacity(specs.len());
        for spec in specs {
            sqlx::query(ADD_SITE_SQL).bind(spec.name.as_str()).execute(pool).await?;
            let (id,): (i64,) = sqlx::query_as(SITE_ID_SQL).bind(spec.name.as_str()).fetch_one(pool).await?;
            sqlx::query(ADD_NEWS_STATE_SQL).bind(id).execute(pool).await?;
            sites.push(Site::new(id, spec.clone()));
        }
        Ok(Sites::new(sites))
    }

    async fn stored_sites(pool: &Pool<Self>) -> Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as(STORED_SITES_SQL).fetch_all(pool).await?)
    }

    fn entries(tx: Transaction<'static, Self>, sql: &'static str, site: i64, id: i64) -> EntryStream {
        let stream = async_stream::try_stream! {
            let mut tx = tx;
            let mut rows = sqlx::query_as::<_, PageEntry>(sql).bind(site).bind(id).fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                yield row;
            }
        };
        Box::pin(stream)
    }

    async fn news_in(
        mut tx: Transaction<'static, Self>,
        site: i64,
        since_us: i64,
        until_us: i64,
        limit: u32,
    ) -> Result<NewsRead> {
        let rows: Vec<(String, Option<String>, i64)> = sqlx::query_as(NEWS_SQL)
            .bind(since_us)
            .bind(until_us)
            .bind(i64::from(limit))
            .bind(site)
            .fetch_all(&mut *tx)
            .await?;
        let changed: Option<(i64,)> = sqlx::query_as(NEWS_STATE_SQL).bind(site).fetch_optional(&mut *tx).await?;
        let changed_us = changed.map_or(0, |(us,)| us);
        let before: Option<(i64,)> =
            sqlx::query_as(NEWS_BEFORE_SQL).bind(since_us).bind(site).fetch_optional(&mut *tx).await?;
        tx.commit().await?;
        let newest_us = rows.first().map(|(_, _, us)| *us);
        let entries = rows
            .into_iter()
            .filter_map(|(loc, news, _)| {
                let news = news.as_deref().and_then(|json| super::read_news(&loc, json))?;
                Some((loc, news))
            })
            .collect();
        Ok(NewsRead { entries, newest_us, changed_us, newest_before_us: before.map(|(us,)| us) })
    }

    async fn feed_in(
        mut tx: Transaction<'static, Self>,
        site: i64,
        section: Option<i64>,
        limit: u32,
        tombstones: bool,
    ) -> Result<FeedRead> {
        let limit = i64::from(limit);
        // A section's feed reads its range; the site's, the newest of each section's (the default section, 0, has
        // no row in `sections`), merged: sections are few, and no order across them is indexed.
        let sections = match section {
            Some(section) => vec![section],
            None => {
                let rows: Vec<(i64, String)> = sqlx::query_as(SECTIONS_SQL).bind(site).fetch_all(&mut *tx).await?;
                std::iter::once(0).chain(rows.into_iter().map(|(id, _)| id)).collect()
            }
        };
        let mut entries: Vec<FeedEntry> = Vec::new();
        for section in sections {
            let rows: Vec<FeedEntry> =
                sqlx::query_as(FEED_SQL).bind(site).bind(section).bind(limit).fetch_all(&mut *tx).await?;
            entries.extend(rows);
        }
        entries.sort_unstable_by_key(|e| std::cmp::Reverse((e.changed_us, e.id)));
        entries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        let deleted: Vec<(String, i64)> = match (tombstones, section) {
            (false, _) => Vec::new(),
            (true, None) => sqlx::query_as(FEED_REMOVED_SQL).bind(site).bind(limit).fetch_all(&mut *tx).await?,
            (true, Some(section)) => {
                sqlx::query_as(FEED_REMOVED_SECTION_SQL)
                    .bind(site)
                    .bind(section)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?
            }
        };
        tx.commit().await?;
        let deleted = deleted.into_iter().map(|(loc, removed_us)| FeedDeleted { loc, removed_us }).collect();
        Ok(FeedRead { entries, deleted })
    }

    async fn task_pending(conn: &mut Self::Connection, name: &str) -> Result<bool> {
        let pending: Option<String> = sqlx::query_scalar(TASK_PENDING_SQL).bind(name).fetch_optional(conn).await?;
        Ok(pending.is_some())
    }

    async fn task_done(conn: &mut Self::Connection, name: &str) -> Result<()> {
        sqlx::query(TASK_DONE_SQL).bind(name).execute(conn).await?;
        Ok(())
    }

    async fn stale_urls(conn: &mut Self::Connection, site: i64) -> Result<Vec<(StoredUrl, String)>> {
        let mut stale = Vec::new();
        let mut rows = sqlx::query_as::<_, UrlRow>(URLS_SQL).bind(site).fetch(conn);
        while let Some(row) = rows.try_next().await? {
            let url = StoredUrl::from(row);
            if let Some(loc) = placement::recount(&url) {
                stale.push((url, loc));
            }
        }
        Ok(stale)
    }

    async fn touch_news(conn: &mut Self::Connection, site: i64, now_us: i64) -> Result<()> {
        sqlx::query(TOUCH_NEWS_SQL).bind(now_us).bind(site).execute(conn).await?;
        Ok(())
    }

    async fn removed_in(
        mut tx: Transaction<'static, Self>,
        site: i64,
        since_us: i64,
        limit: u32,
    ) -> Result<RemovedRead> {
        let mut entries = Vec::new();
        let mut bytes = 0;
        {
            let mut rows = sqlx::query_as::<_, (String, i64)>(REMOVED_SQL)
                .bind(site)
                .bind(since_us)
                .bind(i64::from(limit))
                .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                bytes += row.0.len() as i64;
                if bytes > super::SITEMAP_MAX_BYTES {
                    break;
                }
                entries.push(row);
            }
        }
        let changed: Option<(i64,)> = sqlx::query_as(REMOVED_STATE_SQL).bind(site).fetch_optional(&mut *tx).await?;
        let before: Option<(i64,)> =
            sqlx::query_as(REMOVED_BEFORE_SQL).bind(site).bind(since_us).fetch_optional(&mut *tx).await?;
        tx.commit().await?;
        Ok(RemovedRead { entries, changed_us: changed.map_or(0, |(us,)| us), newest_before_us: before.map(|(us,)| us) })
    }

    async fn removed_stamp(pool: &Pool<Self>, site: i64) -> Result<i64> {
        let changed: Option<(i64,)> = sqlx::query_as(REMOVED_STATE_SQL).bind(site).fetch_optional(pool).await?;
        Ok(changed.map_or(0, |(us,)| us))
    }

    async fn has_removed(conn: &mut Self::Connection, site: i64) -> Result<bool> {
        let any: Option<(i64,)> = sqlx::query_as(HAS_REMOVED_SQL).bind(site).fetch_optional(conn).await?;
        Ok(any.is_some())
    }

    async fn touch_removed(conn: &mut Self::Connection, site: i64, now_us: i64) -> Result<()> {
        sqlx::query(TOUCH_REMOVED_SQL).bind(now_us).bind(site).execute(conn).await?;
        Ok(())
    }

    async fn purge_removed_in(
        conn: &mut Self::Connection,
        site: i64,
        before_us: i64,
        window_us: i64,
        limit: u32,
    ) -> Result<u64> {
        let purged: Vec<(i64,)> = sqlx::query_as(PURGE_REMOVED_SQL)
            .bind(site)
            .bind(before_us)
            .bind(i64::from(limit))
            .fetch_all(&mut *conn)
            .await?;
        if let Some(newest) = purged.iter().map(|(us,)| *us).max() {
            sqlx::query(RAISE_REMOVED_SQL).bind(newest + window_us).bind(site).execute(&mut *conn).await?;
            // The feeds list tombstones until they are purged: the change counter moves with them, so that every
            // replica builds its feeds anew (and WebSub looks), whether or not the stamp above moved.
            sqlx::query(COUNT_CHANGE_SQL).bind(site).execute(conn).await?;
        }
        Ok(purged.len() as u64)
    }

    async fn changes(pool: &Pool<Self>, site: i64) -> Result<i64> {
        let (changes,): (i64,) = sqlx::query_as(CHANGES_SQL).bind(site).fetch_one(pool).await?;
        Ok(changes)
    }

    async fn changes_in(conn: &mut Self::Connection, site: i64) -> Result<i64> {
        let (changes,): (i64,) = sqlx::query_as(CHANGES_SQL).bind(site).fetch_one(conn).await?;
        Ok(changes)
    }

    async fn repair_url(conn: &mut Self::Connection, u: &placement::RepairedUrl) -> Result<()> {
        sqlx::query(REPAIR_URL_SQL).bind(u.id).bind(u.loc.as_str()).bind(u.page_id).bind(u.size).execute(conn).await?;
        Ok(())
    }

    async fn outbox_size(pool: &Pool<Self>) -> Result<Vec<(i64, i64)>> {
        Ok(sqlx::query_as(super::outbox::SIZE_SQL).fetch_all(pool).await?)
    }

    async fn crawler_fetches(conn: &mut Self::Connection, site: i64) -> Result<Vec<FetchRecord>> {
        Ok(sqlx::query_as(crawls::FETCHES_SQL).bind(site).fetch_all(conn).await?)
    }

    async fn crawler_seen(conn: &mut Self::Connection, site: i64, page: Option<i64>) -> Result<Vec<PageRead>> {
        let query = match page {
            None => sqlx::query_as(crawls::SEEN_SQL).bind(site),
            Some(page) => sqlx::query_as(crawls::SEEN_PAGE_SQL).bind(site).bind(page),
        };
        Ok(query.fetch_all(conn).await?)
    }

    async fn record_changed_in(conn: &mut Self::Connection, site: i64, id: i64) -> Result<Option<i64>> {
        // -1 for NULL (a time is never negative): the generic row decodes plain integers.
        let row: Option<(i64,)> =
            sqlx::query_as("SELECT COALESCE(changed_us, -1) FROM urls WHERE site_id = $1 AND id = $2")
                .bind(site)
                .bind(id)
                .fetch_optional(conn)
                .await?;
        Ok(row.map(|(us,)| us).filter(|us| *us >= 0))
    }

    async fn crawler_lags(
        conn: &mut Self::Connection,
        site: i64,
        since_us: i64,
        limit: u32,
    ) -> Result<Vec<(String, i64)>> {
        let query = sqlx::query_as(crawls::LAGS_SQL).bind(site).bind(since_us).bind(i64::from(limit));
        Ok(query.fetch_all(conn).await?)
    }

    async fn hreflang_problems(
        pool: &Pool<Self>,
        site: i64,
        after: Option<&ProblemKey>,
        limit: u32,
    ) -> Result<Vec<StoredProblem>> {
        let limit = i64::from(limit);
        let query = match after {
            None => sqlx::query_as(hreflang::PROBLEMS_SQL).bind(site).bind(limit),
            Some(k) => sqlx::query_as(hreflang::PROBLEMS_AFTER_SQL)
                .bind(site)
                .bind(k.href.as_str())
                .bind(k.kind.as_str())
                .bind(k.hreflang.as_str())
                .bind(limit),
        };
        Ok(query.fetch_all(pool).await?)
    }

    async fn hreflang_summary(pool: &Pool<Self>, site: i64) -> Result<HreflangSummary> {
        let (clusters, members): (i64, i64) =
            sqlx::query_as(hreflang::SUMMARY_NODES_SQL).bind(site).fetch_one(pool).await?;
        let kinds: Vec<(String, i64)> =
            sqlx::query_as(hreflang::SUMMARY_PROBLEMS_SQL).bind(site).fetch_all(pool).await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(HreflangSummary {
            clusters: count(clusters),
            members: count(members),
            problems: kinds.into_iter().map(|(kind, n)| (kind, count(n))).collect(),
        })
    }

    async fn hreflang_policy(conn: &mut Self::Connection, site: i64) -> Result<Option<String>> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as(hreflang::POLICY_SQL).bind(site).fetch_optional(conn).await?;
        Ok(row.and_then(|(policy,)| policy))
    }

    async fn set_hreflang_policy(conn: &mut Self::Connection, site: i64, policy: &str) -> Result<()> {
        sqlx::query(hreflang::SET_POLICY_SQL).bind(site).bind(policy).execute(conn).await?;
        Ok(())
    }

    async fn declaring_after(conn: &mut Self::Connection, site: i64, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        let rows: Vec<UrlRow> = sqlx::query_as(hreflang::DECLARING_SQL)
            .bind(site)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(conn)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn site_clusters_after(
        conn: &mut Self::Connection,
        site: i64,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(hreflang::SITE_CLUSTERS_SQL)
            .bind(site)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(conn)
            .await?;
        Ok(rows.into_iter().map(|(k,)| k).collect())
    }

    async fn hreflang_cluster_in(conn: &mut Self::Connection, href: &str) -> Result<Option<hreflang::ClusterRows>> {
        let key: Option<(String,)> =
            sqlx::query_as(hreflang::CLUSTER_OF_SQL).bind(href).fetch_optional(&mut *conn).await?;
        let Some((key,)) = key else { return Ok(None) };
        let nodes: Vec<NodeRow> =
            sqlx::query_as(hreflang::CLUSTER_NODES_SQL).bind(key.as_str()).fetch_all(&mut *conn).await?;
        let problems: Vec<StoredProblem> =
            sqlx::query_as(hreflang::CLUSTER_PROBLEMS_SQL).bind(key.as_str()).fetch_all(&mut *conn).await?;
        Ok(Some((key, nodes, problems)))
    }
}

/// The records of a listing as they stream, cut once their rendered sizes pass [`super::LIST_MAX_BYTES`]: with
/// extensions a record can render to megabytes.
async fn listing(mut rows: impl futures_util::Stream<Item = sqlx::Result<UrlRow>> + Unpin) -> Result<Vec<SiteUrl>> {
    let (mut out, mut bytes) = (Vec::new(), 0);
    while let Some(row) = rows.try_next().await? {
        let url = SiteUrl::from(row);
        bytes += url.url.size;
        out.push(url);
        if bytes > super::LIST_MAX_BYTES {
            break;
        }
    }
    Ok(out)
}

/// A backend's side of the read half: its pool, and the reads that differ.
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
    type Db: Sql + Checks;
    fn pool(&self) -> &Pool<Self::Db>;
    /// Where [`StoreReads`] reads: a replica's pool when one is configured (and has not just failed), else
    /// [`Backend::pool`].
    fn read_pool(&self) -> &Pool<Self::Db> {
        self.pool()
    }
    /// The replica's pool when one is configured, whether or not it is read from now: for its metrics.
    fn replica_pool(&self) -> Option<&Pool<Self::Db>> {
        None
    }
    /// Told of every failed read on [`Backend::read_pool`] (Postgres: an unavailable replica is left for a while).
    fn read_failed(&self, _error: &super::StoreError) {}
    /// Whether [`Backend::read_pool`] is a replica's now: taken before a read, so that only a read that went to
    /// the replica is held against it.
    fn on_replica(&self) -> bool {
        !std::ptr::eq(self.read_pool(), self.pool())
    }
    /// `result` of a read on [`Backend::read_pool`]; when it went to the replica (`on_replica`), its failure is told
    /// to [`Backend::read_failed`].
    fn reading<T>(&self, on_replica: bool, result: Result<T>) -> Result<T> {
        if let (true, Err(e)) = (on_replica, &result) {
            self.read_failed(e);
        }
        result
    }
    /// The sites as registered by `migrate` ([`Sql::register_sites`]).
    fn sites(&self) -> Arc<Sites>;
    /// Checked before the readiness probe's query (SQLite: the database file is still the one opened).
    fn check_file(&self) -> Result<()> {
        Ok(())
    }
    // Each feature's writes, as the backend makes them (its lock, its transactions): [`Outbox`], [`CrawlLog`],
    // [`HealthQueue`] and [`RemovedList`] are implemented once, below, over these and the shared queries.
    /// [`Outbox::claim_notifications`].
    async fn claim_notifications(&self, site: i64, limit: u32, lease: Duration) -> Result<Option<Claim>>;
    /// [`Outbox::settle_notifications`].
    async fn settle_notifications(&self, claim: &Claim, settle: Settle) -> Result<Settled>;
    /// [`CrawlLog::record_crawls`].
    async fn record_crawls(&self, fetches: &[FetchRecord], reads: &[PageRead]) -> Result<Vec<PageRead>>;
    /// [`CrawlLog::purge_crawls`].
    async fn purge_crawls(&self, before_us: i64) -> Result<u64>;
    /// [`HealthQueue::health_seed`].
    async fn health_seed(&self, site: i64, limit: u32) -> Result<u64>;
    /// [`HealthQueue::health_claim`].
    async fn health_claim(&self, site: i64, limit: u32, lease: Duration) -> Result<Vec<CheckClaim>>;
    /// [`HealthQueue::health_settle`].
    async fn health_settle(&self, site: i64, result: &CheckResult, exclude: bool) -> Result<Written<CheckSettled>>;
    /// [`HealthQueue::health_restore`].
    async fn health_restore(&self, site: i64) -> Result<Written<u64>>;
    /// [`HealthQueue::health_brake_order`].
    async fn health_brake_order(&self, site: i64, order: BrakeOrder) -> Result<Option<BrakeState>>;
    /// [`HealthQueue::health_host_slot`].
    async fn health_host_slot(&self, host: &str, gap: Duration, hold: Duration) -> Result<Duration>;
    /// [`RemovedList::purge_removed`].
    async fn purge_removed(&self, limit: u32) -> Result<u64>;
    /// [`HubOutbox::hub_rows`].
    async fn hub_rows(&self, site: i64) -> Result<Vec<HubRow>>;
    /// [`HubOutbox::hub_claim`].
    async fn hub_claim(
        &self,
        site: i64,
        feed: &str,
        hub: &str,
        digest: &str,
        lease: Duration,
    ) -> Result<Option<HubClaim>>;
    /// [`HubOutbox::hub_settle`].
    async fn hub_settle(&self, claim: &HubClaim, settle: HubSettle) -> Result<bool>;
    /// [`PublishLog::publish_claim`].
    async fn publish_claim(&self, site: i64, target: &str, lease: Duration) -> Result<Option<i64>>;
    /// Every other write of [`PublishLog`]: made while `claim` holds `target`; whether it did.
    async fn publish_write(&self, target: &str, claim: i64, write: Held<'_>) -> Result<bool>;
    /// [`PublishLog::published_objects`], from the primary.
    async fn published_objects(&self, target: &str) -> Result<Vec<PublishedObject>>;
    /// [`PublishLog::publish_status`], from the primary.
    async fn publish_status(&self, site: Option<i64>) -> Result<Vec<PublishStatus>>;
    /// A non-empty page's state and its entries, read from one snapshot: each backend takes and reads it its way.
    async fn page_entries(&self, site: i64, id: i64) -> Result<Option<(PageState, EntryStream)>>;
    /// [`StoreReads::page_urls`]: the shared query on a connection of the pool (Postgres: with its planner settings).
    async fn page_urls(&self, site: i64, page_id: i64, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        let mut conn = self.read_pool().acquire().await?;
        Self::Db::page_urls(&mut conn, site, page_id, after, limit).await
    }
    /// A read-only transaction whose reads all see one snapshot (SQLite's read transactions do; Postgres needs
    /// `REPEATABLE READ`).
    async fn snapshot(&self) -> Result<Transaction<'static, Self::Db>> {
        Ok(self.read_pool().begin().await?)
    }
    /// [`Backend::snapshot`] on the primary: what every replica flushes into (crawler telemetry) read in one
    /// snapshot with the page table.
    async fn primary_snapshot(&self) -> Result<Transaction<'static, Self::Db>> {
        Ok(self.pool().begin().await?)
    }
}

#[async_trait]
impl<B: Backend> StoreReads for B {
    async fn ping(&self) -> Result<()> {
        // The primary only: with a read replica down, reads fall back to the primary (`read_failed`), so the
        // process can still answer everything.
        self.check_file()?;
        B::Db::ping(self.pool()).await
    }
    fn pool_status(&self) -> PoolStatus {
        let replica = self.replica_pool().map(|p| (p.size(), p.num_idle()));
        PoolStatus { size: self.pool().size(), idle: self.pool().num_idle(), replica }
    }
    fn sites(&self) -> Arc<Sites> {
        Backend::sites(self)
    }
    async fn find(&self, loc: &Loc) -> Result<Option<SiteUrl>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::find(self.read_pool(), loc.as_str()).await)
    }
    async fn list_after(&self, site: Option<i64>, after: i64, limit: u32) -> Result<Vec<SiteUrl>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::list_after(self.read_pool(), site, after, limit).await)
    }
    async fn list_section_after(&self, site: i64, section: i64, after: i64, limit: u32) -> Result<Vec<SiteUrl>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::list_section_after(self.read_pool(), site, section, after, limit).await)
    }
    async fn sections(&self, site: i64) -> Result<Vec<(i64, Section)>> {
        let read = async {
            let mut conn = self.read_pool().acquire().await?;
            B::Db::sections(&mut conn, site).await
        };
        let on_replica = self.on_replica();
        let rows = self.reading(on_replica, read.await)?;
        Ok(super::named_sections(rows))
    }
    async fn page_urls(&self, site: i64, page_id: i64, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, Backend::page_urls(self, site, page_id, after, limit).await)
    }
    async fn pages(&self, site: i64) -> Result<Vec<PageState>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::pages(self.read_pool(), site).await)
    }
    async fn page(&self, site: i64, id: i64) -> Result<Option<PageState>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::page(self.read_pool(), site, id).await)
    }
    async fn changes(&self, site: i64) -> Result<i64> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::changes(self.read_pool(), site).await)
    }
    async fn page_table(&self, site: i64) -> Result<(i64, Vec<PageState>)> {
        let read = async {
            let mut tx = self.snapshot().await?;
            let changes = B::Db::changes_in(&mut tx, site).await?;
            let pages = B::Db::pages_in(&mut tx, site).await?;
            tx.commit().await?;
            Ok((changes, pages))
        };
        let on_replica = self.on_replica();
        self.reading(on_replica, read.await)
    }
    async fn page_entries(&self, site: i64, id: i64) -> Result<Option<(PageState, EntryStream)>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, Backend::page_entries(self, site, id).await)
    }
    async fn news(&self, site: i64, since_us: i64, until_us: i64, limit: u32) -> Result<NewsRead> {
        let read = async { B::Db::news_in(self.snapshot().await?, site, since_us, until_us, limit).await };
        let on_replica = self.on_replica();
        self.reading(on_replica, read.await)
    }
}

#[async_trait]
impl<B: Backend> Outbox for B {
    async fn outbox_size(&self) -> Result<Vec<(i64, i64)>> {
        B::Db::outbox_size(self.pool()).await
    }
    async fn claim_notifications(&self, site: i64, limit: u32, lease: Duration) -> Result<Option<Claim>> {
        Backend::claim_notifications(self, site, limit, lease).await
    }
    async fn settle_notifications(&self, claim: &Claim, settle: Settle) -> Result<Settled> {
        Backend::settle_notifications(self, claim, settle).await
    }
}

#[async_trait]
impl<B: Backend> CrawlLog for B {
    // Crawler telemetry is read from the primary, never the replica: every process flushes into the primary, and
    // a lagging replica would hide the latest flush.
    async fn crawler_fetches(&self, site: i64) -> Result<Vec<FetchRecord>> {
        B::Db::crawler_fetches(&mut *self.pool().acquire().await?, site).await
    }
    async fn crawler_seen(&self, site: i64, page: Option<i64>) -> Result<Vec<PageRead>> {
        B::Db::crawler_seen(&mut *self.pool().acquire().await?, site, page).await
    }
    async fn crawler_lags(&self, site: i64, since_us: i64, limit: u32) -> Result<Vec<(String, i64)>> {
        B::Db::crawler_lags(&mut *self.pool().acquire().await?, site, since_us, limit).await
    }
    async fn crawler_state(&self, site: i64, since_us: i64, lag_limit: u32) -> Result<CrawlerState> {
        let mut tx = self.primary_snapshot().await?;
        let state = CrawlerState {
            pages: B::Db::pages_in(&mut tx, site).await?,
            fetches: B::Db::crawler_fetches(&mut tx, site).await?,
            seen: B::Db::crawler_seen(&mut tx, site, None).await?,
            lags: B::Db::crawler_lags(&mut tx, site, since_us, lag_limit).await?,
        };
        tx.commit().await?;
        Ok(state)
    }
    async fn crawler_record(&self, site: i64, id: i64, page_id: i64) -> Result<RecordCrawls> {
        let mut tx = self.primary_snapshot().await?;
        let record = RecordCrawls {
            changed_us: B::Db::record_changed_in(&mut tx, site, id).await?,
            page: B::Db::nonempty_page_in(&mut tx, site, page_id).await?,
            seen: B::Db::crawler_seen(&mut tx, site, Some(page_id)).await?,
            fetches: B::Db::crawler_fetches(&mut tx, site).await?,
        };
        tx.commit().await?;
        Ok(record)
    }
    async fn record_crawls(&self, fetches: &[FetchRecord], reads: &[PageRead]) -> Result<Vec<PageRead>> {
        Backend::record_crawls(self, fetches, reads).await
    }
    async fn purge_crawls(&self, before_us: i64) -> Result<u64> {
        Backend::purge_crawls(self, before_us).await
    }
}

#[async_trait]
impl<B: Backend> HealthQueue for B {
    // URL health is read from the primary too: checkers settle into it.
    async fn health_of(&self, site: i64, loc: &str) -> Result<Option<UrlCheck>> {
        let mut conn = self.pool().acquire().await?;
        B::Db::check_of(&mut conn, site, loc).await
    }
    async fn health_problems(
        &self,
        site: Option<i64>,
        filter: ProblemFilter,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(SiteUrl, UrlCheck)>> {
        B::Db::problems(self.pool(), site, filter, after, limit).await
    }
    async fn health_summary(&self, site: i64) -> Result<HealthSummary> {
        B::Db::summary(self.pool(), site).await
    }
    async fn health_seed(&self, site: i64, limit: u32) -> Result<u64> {
        Backend::health_seed(self, site, limit).await
    }
    async fn health_claim(&self, site: i64, limit: u32, lease: Duration) -> Result<Vec<CheckClaim>> {
        Backend::health_claim(self, site, limit, lease).await
    }
    async fn health_settle(&self, site: i64, result: &CheckResult, exclude: bool) -> Result<Written<CheckSettled>> {
        Backend::health_settle(self, site, result, exclude).await
    }
    async fn health_restore(&self, site: i64) -> Result<Written<u64>> {
        Backend::health_restore(self, site).await
    }
    async fn health_brake_order(&self, site: i64, order: BrakeOrder) -> Result<Option<BrakeState>> {
        Backend::health_brake_order(self, site, order).await
    }
    async fn health_host_slot(&self, host: &str, gap: Duration, hold: Duration) -> Result<Duration> {
        Backend::health_host_slot(self, host, gap, hold).await
    }
}

#[async_trait]
impl<B: Backend> RemovedList for B {
    async fn removed(&self, site: i64, since_us: i64, limit: u32) -> Result<RemovedRead> {
        let read = async { B::Db::removed_in(self.snapshot().await?, site, since_us, limit).await };
        let on_replica = self.on_replica();
        self.reading(on_replica, read.await)
    }
    async fn removed_stamp(&self, site: i64) -> Result<i64> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::removed_stamp(self.read_pool(), site).await)
    }
    async fn purge_removed(&self, limit: u32) -> Result<u64> {
        Backend::purge_removed(self, limit).await
    }
}

#[async_trait]
impl<B: Backend> HubOutbox for B {
    async fn hub_rows(&self, site: i64) -> Result<Vec<HubRow>> {
        Backend::hub_rows(self, site).await
    }
    async fn hub_claim(
        &self,
        site: i64,
        feed: &str,
        hub: &str,
        digest: &str,
        lease: Duration,
    ) -> Result<Option<HubClaim>> {
        Backend::hub_claim(self, site, feed, hub, digest, lease).await
    }
    async fn hub_settle(&self, claim: &HubClaim, settle: HubSettle) -> Result<bool> {
        Backend::hub_settle(self, claim, settle).await
    }
}

#[async_trait]
impl<B: Backend> PublishLog for B {
    async fn publish_claim(&self, site: i64, target: &str, lease: Duration) -> Result<Option<i64>> {
        Backend::publish_claim(self, site, target, lease).await
    }
    async fn publish_renew(&self, target: &str, claim: i64, lease: Duration) -> Result<bool> {
        self.publish_write(target, claim, Held::Renew(lease)).await
    }
    async fn publish_release(&self, target: &str, claim: i64, outcome: std::result::Result<(), &str>) -> Result<()> {
        self.publish_write(target, claim, Held::Release(outcome)).await.map(drop)
    }
    async fn published_objects(&self, target: &str) -> Result<Vec<PublishedObject>> {
        Backend::published_objects(self, target).await
    }
    async fn publish_record(&self, target: &str, claim: i64, key: &str, version: &str, bytes: i64) -> Result<bool> {
        self.publish_write(target, claim, Held::Record { key, version, bytes }).await
    }
    async fn publish_mark_gone(&self, target: &str, claim: i64, keys: &[String]) -> Result<bool> {
        self.publish_write(target, claim, Held::Mark(keys)).await
    }
    async fn publish_unmark(&self, target: &str, claim: i64, keys: &[String]) -> Result<bool> {
        self.publish_write(target, claim, Held::Unmark(keys)).await
    }
    async fn publish_forget(&self, target: &str, claim: i64, key: &str) -> Result<bool> {
        self.publish_write(target, claim, Held::Forget(key)).await
    }
    async fn publish_status(&self, site: Option<i64>) -> Result<Vec<PublishStatus>> {
        Backend::publish_status(self, site).await
    }
}

#[async_trait]
impl<B: Backend> FeedReads for B {
    async fn feed(&self, site: i64, section: Option<i64>, limit: u32, tombstones: bool) -> Result<FeedRead> {
        let read = async { B::Db::feed_in(self.snapshot().await?, site, section, limit, tombstones).await };
        let on_replica = self.on_replica();
        self.reading(on_replica, read.await)
    }
}

#[async_trait]
impl<B: Backend> HreflangReads for B {
    async fn hreflang_problems(&self, site: i64, after: Option<&ProblemKey>, limit: u32) -> Result<Vec<StoredProblem>> {
        let on_replica = self.on_replica();
        self.reading(on_replica, B::Db::hreflang_problems(self.read_pool(), site, after, limit).await)
    }
    async fn hreflang_summary(&self, site: i64) -> Result<HreflangSummary> {
        let on_replica = self.on_replica();
        let mut summary = self.reading(on_replica, B::Db::hreflang_summary(self.read_pool(), site).await)?;
        hreflang::all_kinds(&mut summary);
        Ok(summary)
    }
    async fn hreflang_cluster(&self, href: &str) -> Result<Option<ClusterView>> {
        let read = async {
            let mut tx = self.snapshot().await?;
            let found = B::Db::hreflang_cluster_in(&mut tx, href).await?;
            tx.commit().await?;
            Ok(found)
        };
        let on_replica = self.on_replica();
        let Some((key, nodes, problems)) = self.reading(on_replica, read.await)? else { return Ok(None) };
        let members: Vec<ClusterMember> = nodes
            .into_iter()
            .map(|(href, _, site_id, declared)| {
                let declared = hreflang::read_declared(&href, declared.as_deref());
                ClusterMember { stored: site_id.is_some(), href, site_id, declared }
            })
            .collect();
        let set = hreflang::resolved_set(&Backend::sites(self), &members);
        Ok(Some(ClusterView { key, members, set, problems }))
    }
}
