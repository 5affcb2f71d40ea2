//! Crawler telemetry as stored: one fetch record per site, sitemap resource, crawler and trust, and the versions of
//! each page each crawler read (verified reads only), each merged across processes (several replicas flush into
//! one database) by `LEAST` / `GREATEST`-style upserts. Telemetry never moves a site's change counter.
//!
//! Tables `crawler_fetches` and `crawler_reads` (migration 0012) have no trigger and are written outside the
//! write lock: a flush never waits for a write of pages, nor a write for a flush. A flush is checked whole before
//! anything is written ([`check`]): a row of a site the store does not serve, or a value no recorder makes, refuses
//! it with the row named. Its rows are merged in memory first ([`merged_fetches`], [`merged_reads`]: an upsert may
//! not meet one key twice) and written in key order, so that two processes flushing the same keys lock their rows
//! in one order and never deadlock.

use std::collections::{BTreeMap, HashSet};

use sqlx::postgres::PgPool;
use sqlx::sqlite::SqliteConnection;

use super::{Result, StoreError};
use sitemapd_core::crawler::{Crawler, Trust};
use sitemapd_core::domain::Sites;

/// What one process saw of one resource of one site fetched by one crawler with one trust, since its last flush;
/// and, read back, the merged record of every process.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
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
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct PageRead {
    pub site: i64,
    pub page_id: i64,
    pub crawler: String,
    pub version_us: i64,
    pub first_us: i64,
}

/// What a report of a site's crawlers is made of, read in one snapshot ([`super::CrawlLog::crawler_state`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrawlerState {
    /// The site's whole page table.
    pub pages: Vec<sitemapd_core::page::PageState>,
    pub fetches: Vec<FetchRecord>,
    /// The newest version of each page each crawler read.
    pub seen: Vec<PageRead>,
    /// (crawler, lag in µs) of the window, newest first.
    pub lags: Vec<(String, i64)>,
}

/// What a record's lookup says of its crawlers is made of, read in one snapshot
/// ([`super::CrawlLog::crawler_record`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordCrawls {
    /// When the record last changed as its page shows it (the page version that first held it so); `None` for a
    /// record not written since that was kept (its page's `modified_us` is then the bound).
    pub changed_us: Option<i64>,
    /// Its page (`None` if the record is gone since it was found).
    pub page: Option<sitemapd_core::page::PageState>,
    /// The newest version of the page each crawler read.
    pub seen: Vec<PageRead>,
    pub fetches: Vec<FetchRecord>,
}

/// The longest resource name or ETag stored: far longer than any sitemapd makes (a section's name has at most 32
/// bytes), short enough for an index key.
pub(crate) const MAX_TEXT_BYTES: usize = 256;

impl FetchRecord {
    /// The primary key, in the order rows are written and read.
    fn key(&self) -> (i64, &str, &str, &str) {
        (self.site, &self.resource, &self.crawler, &self.trust)
    }

    /// Merges `incoming` (a later flush, or a later record of the same flush) into `self`: the first fetch the
    /// earlier, the last the later, the last answer's fields from the record with the later `last_us` (ties:
    /// `incoming`), the counts added. The upserts of [`PG_FETCHES_SQL`] and [`SQLITE_FETCHES_SQL`] do the same.
    fn merge(&mut self, incoming: &FetchRecord) {
        if incoming.last_us >= self.last_us {
            self.last_status = incoming.last_status;
            self.last_conditional = incoming.last_conditional;
            self.last_etag.clone_from(&incoming.last_etag);
        }
        self.page_id = incoming.page_id.or(self.page_id);
        self.first_us = self.first_us.min(incoming.first_us);
        self.last_us = self.last_us.max(incoming.last_us);
        self.fetches = self.fetches.saturating_add(incoming.fetches);
        self.not_modified = self.not_modified.saturating_add(incoming.not_modified);
    }
}

impl PageRead {
    fn key(&self) -> (i64, i64, &str, i64) {
        (self.site, self.page_id, &self.crawler, self.version_us)
    }
}

/// Refuses a flush with a row that names a site `sites` does not hold, a crawler or trust this version does not
/// name, an empty or overlong resource or ETag, a negative time or count, a first fetch after the last, more 304s
/// than fetches, or a status that is no HTTP status. The recorder makes none of these: such a row is a bug, which
/// the error names, rather than a row to store.
pub(crate) fn check(sites: &Sites, fetches: &[FetchRecord], reads: &[PageRead]) -> Result<()> {
    for f in fetches {
        if let Err(problem) = check_fetch(sites, f) {
            let row = format!("site {}, {} by {} ({})", f.site, f.resource, f.crawler, f.trust);
            return Err(refused(&format!("fetch record of {row}: {problem}")));
        }
    }
    for r in reads {
        let problem = known(sites, r.site, &r.crawler)
            .and_then(|()| times(&[("version_us", r.version_us), ("first_us", r.first_us)]));
        if let Err(problem) = problem {
            let row = format!("site {}, page {} by {} (version {})", r.site, r.page_id, r.crawler, r.version_us);
            return Err(refused(&format!("page read of {row}: {problem}")));
        }
    }
    Ok(())
}

fn check_fetch(sites: &Sites, f: &FetchRecord) -> std::result::Result<(), String> {
    known(sites, f.site, &f.crawler)?;
    if Trust::from_name(&f.trust).is_none() {
        return Err(format!("trust {:?} is none of verified, claimed, unknown", f.trust));
    }
    text("resource", &f.resource, false)?;
    text("last_etag", &f.last_etag, true)?;
    times(&[("first_us", f.first_us), ("last_us", f.last_us)])?;
    if f.first_us > f.last_us {
        return Err(format!("first_us {} is after last_us {}", f.first_us, f.last_us));
    }
    if !(100..=599).contains(&f.last_status) {
        return Err(format!("last_status {} is no HTTP status", f.last_status));
    }
    if f.fetches < 0 || !(0..=f.fetches).contains(&f.not_modified) {
        return Err(format!(
            "fetches {} and not_modified {}: counts are 0 or more, 304s at most the fetches",
            f.fetches, f.not_modified
        ));
    }
    Ok(())
}

/// The site is one `sites` holds, the crawler one this version names.
fn known(sites: &Sites, site: i64, crawler: &str) -> std::result::Result<(), String> {
    if sites.by_id(site).is_none() {
        return Err(format!("site {site} is not a site this store serves"));
    }
    if Crawler::from_name(crawler).is_none() {
        return Err(format!("crawler {crawler:?} is not a crawler this version names"));
    }
    Ok(())
}

fn text(name: &str, value: &str, may_be_empty: bool) -> std::result::Result<(), String> {
    if value.is_empty() && !may_be_empty {
        return Err(format!("{name} is empty"));
    }
    if value.len() > MAX_TEXT_BYTES {
        return Err(format!("{name} has {} bytes, more than {MAX_TEXT_BYTES}", value.len()));
    }
    Ok(())
}

/// Times are microseconds since the Unix epoch: never negative (so a lag, one less another, never overflows).
fn times(values: &[(&str, i64)]) -> std::result::Result<(), String> {
    match values.iter().find(|(_, us)| *us < 0) {
        Some((name, us)) => Err(format!("{name} {us} is before the Unix epoch")),
        None => Ok(()),
    }
}

fn refused(message: &str) -> StoreError {
    StoreError::Other(sqlx::Error::InvalidArgument(format!("crawler telemetry refused: {message}")))
}

/// `fetches` with the records of one key merged ([`FetchRecord::merge`], in slice order), in key order.
pub(crate) fn merged_fetches(fetches: &[FetchRecord]) -> Vec<FetchRecord> {
    let mut merged: BTreeMap<(i64, &str, &str, &str), FetchRecord> = BTreeMap::new();
    for f in fetches {
        match merged.get_mut(&f.key()) {
            Some(known) => known.merge(f),
            None => {
                merged.insert(f.key(), f.clone());
            }
        }
    }
    merged.into_values().collect()
}

/// `reads` with the reads of one version merged (the earliest `first_us`), in key order.
pub(crate) fn merged_reads(reads: &[PageRead]) -> Vec<PageRead> {
    let mut merged: BTreeMap<(i64, i64, &str, i64), PageRead> = BTreeMap::new();
    for r in reads {
        match merged.get_mut(&r.key()) {
            Some(known) => known.first_us = known.first_us.min(r.first_us),
            None => {
                merged.insert(r.key(), r.clone());
            }
        }
    }
    merged.into_values().collect()
}

// --- Both backends' reads (from the primary: every replica flushes into it) -------------------------------------

/// A site's fetch records, in key order.
pub(crate) const FETCHES_SQL: &str = "SELECT site_id AS site, resource, page_id, crawler, trust, first_us, last_us, \
     last_status, last_conditional, last_etag, fetches, not_modified FROM crawler_fetches WHERE site_id = $1 \
     ORDER BY site_id, resource, crawler, trust";

/// The newest version each crawler read of each page of a site: the reads no read of a later version of the same
/// page by the same crawler supersedes (an index probe each), in page and crawler order.
pub(crate) const SEEN_SQL: &str = "SELECT r.site_id AS site, r.page_id, r.crawler, r.version_us, r.first_us \
     FROM crawler_reads r WHERE r.site_id = $1 AND NOT EXISTS (SELECT 1 FROM crawler_reads n \
     WHERE n.site_id = r.site_id AND n.page_id = r.page_id AND n.crawler = r.crawler AND n.version_us > r.version_us) \
     ORDER BY r.site_id, r.page_id, r.crawler";

/// [`SEEN_SQL`] of one page (`$2`).
pub(crate) const SEEN_PAGE_SQL: &str = "SELECT r.site_id AS site, r.page_id, r.crawler, r.version_us, r.first_us \
     FROM crawler_reads r WHERE r.site_id = $1 AND r.page_id = $2 AND NOT EXISTS (SELECT 1 FROM crawler_reads n \
     WHERE n.site_id = r.site_id AND n.page_id = r.page_id AND n.crawler = r.crawler AND n.version_us > r.version_us) \
     ORDER BY r.site_id, r.page_id, r.crawler";

/// The lags of the reads first made at `$2` or later, newest first (ties: by crawler and version, descending): a
/// backward scan of `crawler_reads_site_first`, which holds every column read.
pub const LAGS_SQL: &str = "SELECT crawler, first_us - version_us FROM crawler_reads \
     WHERE site_id = $1 AND first_us >= $2 \
     ORDER BY site_id DESC, first_us DESC, crawler DESC, version_us DESC LIMIT $3";

// --- Postgres -------------------------------------------------------------------------------------------------

/// A flush's fetch records (merged, in key order), bound as arrays: [`FetchRecord::merge`] in SQL. Rows are
/// inserted and locked in the arrays' order.
const PG_FETCHES_SQL: &str = "INSERT INTO crawler_fetches AS f (site_id, resource, crawler, trust, page_id, \
     first_us, last_us, last_status, last_conditional, last_etag, fetches, not_modified) \
     SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], \
                          $7::bigint[], $8::int[], $9::boolean[], $10::text[], $11::bigint[], $12::bigint[]) \
     ON CONFLICT (site_id, resource, crawler, trust) DO UPDATE SET \
     page_id = COALESCE(excluded.page_id, f.page_id), \
     first_us = LEAST(f.first_us, excluded.first_us), \
     last_us = GREATEST(f.last_us, excluded.last_us), \
     last_status = CASE WHEN excluded.last_us >= f.last_us THEN excluded.last_status ELSE f.last_status END, \
     last_conditional = CASE WHEN excluded.last_us >= f.last_us THEN excluded.last_conditional \
                        ELSE f.last_conditional END, \
     last_etag = CASE WHEN excluded.last_us >= f.last_us THEN excluded.last_etag ELSE f.last_etag END, \
     fetches = f.fetches + excluded.fetches, \
     not_modified = f.not_modified + excluded.not_modified";

/// A flush's page reads (merged, in key order): a new version inserted, a known one's `first_us` lowered when the
/// flush read it earlier (else left alone: no row version written). Returns the rows it inserted or lowered, and
/// which it inserted: a row this statement inserted has no `xmax` yet; one it updated has this transaction's.
const PG_READS_SQL: &str = "INSERT INTO crawler_reads AS r (site_id, page_id, crawler, version_us, first_us) \
     SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) \
     ON CONFLICT (site_id, page_id, crawler, version_us) DO UPDATE SET first_us = excluded.first_us \
     WHERE excluded.first_us < r.first_us \
     RETURNING r.site_id AS site, r.page_id, r.crawler, r.version_us, r.first_us, (r.xmax = 0) AS inserted";

/// The purge ([`super::CrawlLog::purge_crawls`]): the superseded reads first made before `$1`, locked in key order
/// (the order a flush locks them in), then deleted.
const PG_PURGE_SQL: &str = "DELETE FROM crawler_reads r USING (SELECT o.site_id, o.page_id, o.crawler, o.version_us \
     FROM crawler_reads o WHERE o.first_us < $1 AND EXISTS (SELECT 1 FROM crawler_reads n \
     WHERE n.site_id = o.site_id AND n.page_id = o.page_id AND n.crawler = o.crawler AND n.version_us > o.version_us) \
     ORDER BY o.site_id, o.page_id, o.crawler, o.version_us FOR UPDATE OF o) AS d \
     WHERE r.site_id = d.site_id AND r.page_id = d.page_id AND r.crawler = d.crawler AND r.version_us = d.version_us";

#[derive(sqlx::FromRow)]
struct PgReadRow {
    #[sqlx(flatten)]
    read: PageRead,
    inserted: bool,
}

/// [`super::CrawlLog::record_crawls`] on Postgres: one transaction on the primary, without the write lock. `fetches`
/// and `reads` are merged and in key order.
pub(super) async fn pg_record(pool: &PgPool, fetches: &[FetchRecord], reads: &[PageRead]) -> Result<Vec<PageRead>> {
    let mut tx = pool.begin().await?;
    if !fetches.is_empty() {
        let col = |f: fn(&FetchRecord) -> i64| fetches.iter().map(f).collect::<Vec<_>>();
        let text = |f: fn(&FetchRecord) -> &str| fetches.iter().map(f).collect::<Vec<_>>();
        sqlx::query(PG_FETCHES_SQL)
            .bind(col(|f| f.site))
            .bind(text(|f| &f.resource))
            .bind(text(|f| &f.crawler))
            .bind(text(|f| &f.trust))
            .bind(fetches.iter().map(|f| f.page_id).collect::<Vec<_>>())
            .bind(col(|f| f.first_us))
            .bind(col(|f| f.last_us))
            .bind(fetches.iter().map(|f| f.last_status).collect::<Vec<_>>())
            .bind(fetches.iter().map(|f| f.last_conditional).collect::<Vec<_>>())
            .bind(text(|f| &f.last_etag))
            .bind(col(|f| f.fetches))
            .bind(col(|f| f.not_modified))
            .execute(&mut *tx)
            .await?;
    }
    let mut new = Vec::new();
    if !reads.is_empty() {
        let col = |f: fn(&PageRead) -> i64| reads.iter().map(f).collect::<Vec<_>>();
        let rows: Vec<PgReadRow> = sqlx::query_as(PG_READS_SQL)
            .bind(col(|r| r.site))
            .bind(col(|r| r.page_id))
            .bind(reads.iter().map(|r| r.crawler.as_str()).collect::<Vec<_>>())
            .bind(col(|r| r.version_us))
            .bind(col(|r| r.first_us))
            .fetch_all(&mut *tx)
            .await?;
        new.extend(rows.into_iter().filter(|row| row.inserted).map(|row| row.read));
    }
    tx.commit().await?;
    new.sort_by(|a, b| a.key().cmp(&b.key()));
    Ok(new)
}

pub(super) async fn pg_purge(pool: &PgPool, before_us: i64) -> Result<u64> {
    Ok(sqlx::query(PG_PURGE_SQL).bind(before_us).execute(pool).await?.rows_affected())
}

// --- SQLite ---------------------------------------------------------------------------------------------------

/// Fetch records a statement (12 parameters each: well within SQLite's 32,766).
const SQLITE_FETCH_ROWS: usize = 500;
/// Page reads a statement (5 parameters each).
const SQLITE_READ_ROWS: usize = 1_000;

/// [`PG_FETCHES_SQL`] for SQLite, after its `VALUES` rows: the scalar `min` and `max`.
const SQLITE_FETCHES_SQL: &str = " ON CONFLICT (site_id, resource, crawler, trust) DO UPDATE SET \
     page_id = coalesce(excluded.page_id, crawler_fetches.page_id), \
     first_us = min(crawler_fetches.first_us, excluded.first_us), \
     last_us = max(crawler_fetches.last_us, excluded.last_us), \
     last_status = CASE WHEN excluded.last_us >= crawler_fetches.last_us THEN excluded.last_status \
                   ELSE crawler_fetches.last_status END, \
     last_conditional = CASE WHEN excluded.last_us >= crawler_fetches.last_us THEN excluded.last_conditional \
                        ELSE crawler_fetches.last_conditional END, \
     last_etag = CASE WHEN excluded.last_us >= crawler_fetches.last_us THEN excluded.last_etag \
                 ELSE crawler_fetches.last_etag END, \
     fetches = crawler_fetches.fetches + excluded.fetches, \
     not_modified = crawler_fetches.not_modified + excluded.not_modified";

/// The new versions of a chunk of reads, inserted and returned; the known ones left to [`SQLITE_LOWER_SQL`].
const SQLITE_NEW_READS_SQL: &str =
    " ON CONFLICT DO NOTHING RETURNING site_id AS site, page_id, crawler, version_us, first_us";
/// The known versions of a chunk of reads: `first_us` lowered when the flush read them earlier.
const SQLITE_LOWER_SQL: &str = " ON CONFLICT (site_id, page_id, crawler, version_us) DO UPDATE \
     SET first_us = excluded.first_us WHERE excluded.first_us < crawler_reads.first_us";

const SQLITE_PURGE_SQL: &str = "DELETE FROM crawler_reads WHERE first_us < ?1 AND EXISTS (SELECT 1 FROM \
     crawler_reads n WHERE n.site_id = crawler_reads.site_id AND n.page_id = crawler_reads.page_id \
     AND n.crawler = crawler_reads.crawler AND n.version_us > crawler_reads.version_us)";

/// `INSERT INTO table (columns) VALUES (?, …), …` for `rows` rows of `columns`, then `tail`.
fn values_sql(table: &str, columns: &[&str], rows: usize, tail: &str) -> String {
    let row = format!("({})", vec!["?"; columns.len()].join(", "));
    format!("INSERT INTO {table} ({}) VALUES {}{tail}", columns.join(", "), vec![row; rows].join(", "))
}

const FETCH_COLUMNS: [&str; 12] = [
    "site_id",
    "resource",
    "crawler",
    "trust",
    "page_id",
    "first_us",
    "last_us",
    "last_status",
    "last_conditional",
    "last_etag",
    "fetches",
    "not_modified",
];
const READ_COLUMNS: [&str; 5] = ["site_id", "page_id", "crawler", "version_us", "first_us"];

type SqliteQuery<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

fn bind_read<'q>(query: SqliteQuery<'q>, r: &'q PageRead) -> SqliteQuery<'q> {
    query.bind(r.site).bind(r.page_id).bind(r.crawler.as_str()).bind(r.version_us).bind(r.first_us)
}

/// [`super::CrawlLog::record_crawls`] on SQLite, in a write transaction (the store's writer lock held). `fetches` and
/// `reads` are merged and in key order.
pub(super) async fn sqlite_record(
    conn: &mut SqliteConnection,
    fetches: &[FetchRecord],
    reads: &[PageRead],
) -> Result<Vec<PageRead>> {
    for chunk in fetches.chunks(SQLITE_FETCH_ROWS) {
        let sql = values_sql("crawler_fetches", &FETCH_COLUMNS, chunk.len(), SQLITE_FETCHES_SQL);
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for f in chunk {
            query = query
                .bind(f.site)
                .bind(f.resource.as_str())
                .bind(f.crawler.as_str())
                .bind(f.trust.as_str())
                .bind(f.page_id)
                .bind(f.first_us)
                .bind(f.last_us)
                .bind(f.last_status)
                .bind(f.last_conditional)
                .bind(f.last_etag.as_str())
                .bind(f.fetches)
                .bind(f.not_modified);
        }
        query.execute(&mut *conn).await?;
    }
    let mut new = Vec::new();
    for chunk in reads.chunks(SQLITE_READ_ROWS) {
        let sql = values_sql("crawler_reads", &READ_COLUMNS, chunk.len(), SQLITE_NEW_READS_SQL);
        let mut insert = sqlx::query_as::<_, PageRead>(sqlx::AssertSqlSafe(sql));
        for r in chunk {
            insert = insert.bind(r.site).bind(r.page_id).bind(r.crawler.as_str()).bind(r.version_us).bind(r.first_us);
        }
        let inserted = insert.fetch_all(&mut *conn).await?;
        let keys: HashSet<_> = inserted.iter().map(PageRead::key).collect();
        let known: Vec<&PageRead> = chunk.iter().filter(|r| !keys.contains(&r.key())).collect();
        if !known.is_empty() {
            let sql = values_sql("crawler_reads", &READ_COLUMNS, known.len(), SQLITE_LOWER_SQL);
            let lower = known.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |q, r| bind_read(q, r));
            lower.execute(&mut *conn).await?;
        }
        new.extend(inserted);
    }
    new.sort_by(|a, b| a.key().cmp(&b.key()));
    Ok(new)
}

/// [`super::CrawlLog::purge_crawls`] on SQLite, in a write transaction.
pub(super) async fn sqlite_purge(conn: &mut SqliteConnection, before_us: i64) -> Result<u64> {
    Ok(sqlx::query(SQLITE_PURGE_SQL).bind(before_us).execute(conn).await?.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sitemapd_core::domain::{PublicUrl, Site, SiteSpec};

    fn fetch(first_us: i64, last_us: i64, status: i32, etag: &str, fetches: i64, not_modified: i64) -> FetchRecord {
        FetchRecord {
            site: 1,
            resource: "sitemap-1.xml".into(),
            page_id: Some(1),
            crawler: "googlebot".into(),
            trust: "verified".into(),
            first_us,
            last_us,
            last_status: status,
            last_conditional: status == 304,
            last_etag: etag.into(),
            fetches,
            not_modified,
        }
    }

    fn read(page_id: i64, crawler: &str, version_us: i64, first_us: i64) -> PageRead {
        PageRead { site: 1, page_id, crawler: crawler.into(), version_us, first_us }
    }

    fn one_site() -> Sites {
        let public_url = PublicUrl::parse("https://www.example.com").unwrap();
        Sites::new(vec![Site::new(1, SiteSpec { name: "default".into(), public_url })])
    }

    #[test]
    fn records_of_one_key_merge_as_the_database_merges_them() {
        let merged = merged_fetches(&[fetch(20, 30, 200, "\"a\"", 2, 0), fetch(10, 40, 304, "\"b\"", 3, 3)]);
        assert_eq!(merged, [fetch(10, 40, 304, "\"b\"", 5, 3)]);
        // A record of an earlier last fetch coming later keeps the counts and the times, not its last answer.
        let merged = merged_fetches(&[fetch(20, 30, 200, "\"a\"", 2, 0), fetch(5, 25, 304, "\"b\"", 1, 1)]);
        assert_eq!(merged, [FetchRecord { not_modified: 1, ..fetch(5, 30, 200, "\"a\"", 3, 0) }]);
        // Ties: the later record's answer.
        let merged = merged_fetches(&[fetch(20, 30, 200, "\"a\"", 1, 0), fetch(30, 30, 304, "\"b\"", 1, 1)]);
        assert_eq!(merged[0].last_etag, "\"b\"");
    }

    #[test]
    fn merged_rows_come_in_key_order() {
        let other = |crawler: &str, trust: &str| FetchRecord {
            crawler: crawler.into(),
            trust: trust.into(),
            ..fetch(1, 1, 200, "", 1, 0)
        };
        let merged = merged_fetches(&[
            other("googlebot", "verified"),
            other("bingbot", "claimed"),
            other("bingbot", "verified"),
        ]);
        let keys: Vec<_> = merged.iter().map(|f| (f.crawler.as_str(), f.trust.as_str())).collect();
        assert_eq!(keys, [("bingbot", "claimed"), ("bingbot", "verified"), ("googlebot", "verified")]);
        let reads = merged_reads(&[read(2, "googlebot", 5, 9), read(1, "googlebot", 5, 8), read(2, "googlebot", 5, 7)]);
        assert_eq!(reads, [read(1, "googlebot", 5, 8), read(2, "googlebot", 5, 7)]);
    }

    #[test]
    fn a_flush_with_a_bad_row_is_refused_with_the_row_named() {
        let sites = one_site();
        let good = fetch(10, 20, 200, "\"a\"", 1, 0);
        assert!(check(&sites, std::slice::from_ref(&good), &[read(1, "bingbot", 5, 6)]).is_ok());
        for (bad, says) in [
            (FetchRecord { site: 9, ..good.clone() }, "site 9 is not a site this store serves"),
            (FetchRecord { crawler: "nobot".into(), ..good.clone() }, "crawler \"nobot\""),
            (FetchRecord { trust: "trusted".into(), ..good.clone() }, "trust \"trusted\""),
            (FetchRecord { resource: String::new(), ..good.clone() }, "resource is empty"),
            (FetchRecord { last_etag: "x".repeat(MAX_TEXT_BYTES + 1), ..good.clone() }, "last_etag has 257 bytes"),
            (fetch(30, 20, 200, "", 1, 0), "first_us 30 is after last_us 20"),
            (fetch(-1, 20, 200, "", 1, 0), "first_us -1 is before the Unix epoch"),
            (fetch(10, 20, 42, "", 1, 0), "last_status 42"),
            (fetch(10, 20, 304, "", 1, 2), "not_modified 2"),
            (fetch(10, 20, 304, "", -1, 0), "fetches -1"),
        ] {
            let message = check(&sites, &[good.clone(), bad], &[]).unwrap_err().to_string();
            assert!(message.contains(says) && message.contains("fetch record of site"), "{message}");
        }
        for (bad, says) in [
            (PageRead { site: 2, ..read(1, "bingbot", 5, 6) }, "site 2 is not"),
            (read(1, "Bingbot", 5, 6), "crawler \"Bingbot\""),
            (read(1, "bingbot", -5, 6), "version_us -5"),
        ] {
            let message = check(&sites, &[], &[bad]).unwrap_err().to_string();
            assert!(message.contains(says) && message.contains("page read of site"), "{message}");
        }
    }

    #[test]
    fn sqlite_statements_hold_their_rows() {
        let sql = values_sql("crawler_reads", &READ_COLUMNS, 2, SQLITE_LOWER_SQL);
        let head = "INSERT INTO crawler_reads (site_id, page_id, crawler, version_us, first_us) VALUES ";
        assert!(sql.starts_with(&format!("{head}(?, ?, ?, ?, ?), (?, ?, ?, ?, ?) ON CONFLICT")), "{sql}");
        assert!(SQLITE_FETCH_ROWS * FETCH_COLUMNS.len() <= 32_766 && SQLITE_READ_ROWS * READ_COLUMNS.len() <= 32_766);
    }
}
