//! The Postgres store. Writers take one transaction-scoped advisory lock, so page accounting never races; the
//! clock is the database's, so every replica stamps changes from one clock.

use std::str::FromStr;

use anyhow::Context;
use async_trait::async_trait;
use futures_util::TryStreamExt;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{
    DeleteCounts, EntryStream, PageEntry, PageRow, PoolStatus, RECOUNT_TASK, Result, Store, StoreOptions, StoreReads,
    UrlRow, Written, distinct, log_repair, page_columns, url_columns,
};
use crate::domain::{Entry, Loc, Priority};
use crate::page::{Limits, PageState, StoredUrl};
use crate::placement::{self, UpsertCounts};

/// A page's entries in page order. The row-value range (rather than `page_id = $1 ORDER BY id`) leaves the planner
/// no path through the primary key, which with few pages it would take and then filter every URL in the table; with
/// [`PAGE_PLANNER_SETTINGS`] the only plan left is an ordered scan of `urls_page_id_id`, streaming from its first
/// row: O(page) at any depth, no sort. A test pins the plan.
pub const PAGE_ENTRIES_SQL: &str = "SELECT loc, lastmod, changefreq, priority FROM urls \
     WHERE (page_id, id) > ($1, 0) AND (page_id, id) < ($1 + 1, 0) ORDER BY page_id, id";

/// Planner settings for the page's read-only transaction: no bitmap scan, no sort (both would collect the page
/// before the first row goes out).
pub const PAGE_PLANNER_SETTINGS: &str =
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)";

/// The database's clock, and the write transaction's planner settings: no sequential scan. The lookup of a batch's
/// locs (`loc = ANY($1)`, thousands of values) must probe the unique index. Without this, a table that has not been
/// analyzed yet (a first bulk load: autovacuum lags behind) looks empty to the planner, which then scans all of it
/// for every batch: 96 ms instead of 27 ms per 5,000 locs at 290,000 rows, and growing with the table.
pub const WRITE_SETTINGS_AND_NOW: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, \
     set_config('enable_seqscan', 'off', true)";

/// The stored rows of a batch's locs (under [`WRITE_SETTINGS_AND_NOW`]).
pub const LOOKUP_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls WHERE loc = ANY($1)");

const LOCK_TIMEOUT: &str = "5s";
const STATEMENT_TIMEOUT: &str = "5min";

/// The advisory lock key that serializes writers (any constant; "sitemapd" in ASCII, truncated).
const WRITE_LOCK: i64 = 0x7369_7465_6d61_7064;

pub struct PgStore {
    pool: PgPool,
    limits: Limits,
}

impl PgStore {
    pub async fn connect(options: &StoreOptions) -> anyhow::Result<Self> {
        // Bounded waits on the server too: a writer waits at most LOCK_TIMEOUT for the write lock (then 503), and
        // no statement runs longer than STATEMENT_TIMEOUT.
        let connect = PgConnectOptions::from_str(&options.url)
            .context("invalid Postgres URL")?
            .options([("lock_timeout", LOCK_TIMEOUT), ("statement_timeout", STATEMENT_TIMEOUT)]);
        // After a database restart the pooled connections are dead: each is pinged before it is handed out
        // (sqlx's default, pinned here because recovery without a restart depends on it; a test stops and starts a
        // real server), and idle ones are closed after a while anyway.
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(true)
            .idle_timeout(std::time::Duration::from_secs(300))
            .connect_with(connect)
            .await?;
        Ok(Self::from_pool(pool, options.limits))
    }

    pub fn from_pool(pool: PgPool, limits: Limits) -> Self {
        Self { pool, limits }
    }

    async fn lock_and_load(
        tx: &mut sqlx::PgTransaction<'_>,
        locs: &[&str],
    ) -> Result<(i64, Vec<StoredUrl>, Vec<PageState>)> {
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(WRITE_LOCK).execute(&mut **tx).await?;
        let (now, _): (i64, String) = sqlx::query_as(WRITE_SETTINGS_AND_NOW).fetch_one(&mut **tx).await?;
        let existing: Vec<UrlRow> = sqlx::query_as(LOOKUP_SQL).bind(locs).fetch_all(&mut **tx).await?;
        let pages: Vec<PageRow> =
            sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages ORDER BY id")).fetch_all(&mut **tx).await?;
        Ok((now, existing.into_iter().map(Into::into).collect(), pages.into_iter().map(Into::into).collect()))
    }

    /// The repair migration 0002 leaves to the application, once, in one write transaction under the write lock
    /// (replicas starting together do it once): records whose loc or size is not what this version would store are
    /// fixed, and only their pages change.
    async fn repair(&self) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(WRITE_LOCK).execute(&mut *tx).await?;
        let pending: Option<String> = sqlx::query_scalar("SELECT name FROM upgrade_tasks WHERE name = $1")
            .bind(RECOUNT_TASK)
            .fetch_optional(&mut *tx)
            .await?;
        if pending.is_none() {
            return Ok(());
        }
        let mut stale = Vec::new();
        {
            let mut rows = sqlx::query_as::<_, UrlRow>(concat!("SELECT ", url_columns!(), " FROM urls ORDER BY id"))
                .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                let url = StoredUrl::from(row);
                if let Some(loc) = placement::recount(&url) {
                    stale.push((url, loc));
                }
            }
        }
        if !stale.is_empty() {
            let renamed: Vec<&str> = stale.iter().filter(|(u, l)| &u.loc != l).map(|(_, l)| l.as_str()).collect();
            let (now, _): (i64, String) = sqlx::query_as(WRITE_SETTINGS_AND_NOW).fetch_one(&mut *tx).await?;
            let taken: Vec<UrlRow> = sqlx::query_as(LOOKUP_SQL).bind(&renamed).fetch_all(&mut *tx).await?;
            let taken = taken.into_iter().map(|u| u.loc).collect();
            let pages: Vec<PageRow> = sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages ORDER BY id"))
                .fetch_all(&mut *tx)
                .await?;
            let pages = pages.into_iter().map(Into::into).collect();
            let plan = placement::plan_repair(stale, &taken, pages, self.limits, now)?;
            let dropped: Vec<i64> = plan.dropped.iter().map(|(u, _)| u.id).collect();
            sqlx::query("DELETE FROM urls WHERE id = ANY($1)").bind(&dropped).execute(&mut *tx).await?;
            for u in &plan.updates {
                sqlx::query("UPDATE urls SET loc = $2, page_id = $3, size = $4 WHERE id = $1")
                    .bind(u.id)
                    .bind(&u.loc)
                    .bind(u.page_id)
                    .bind(u.size)
                    .execute(&mut *tx)
                    .await?;
            }
            Self::write_pages(&mut tx, &plan.pages).await?;
            log_repair(&plan);
        }
        sqlx::query("DELETE FROM upgrade_tasks WHERE name = $1").bind(RECOUNT_TASK).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn write_pages(tx: &mut sqlx::PgTransaction<'_>, pages: &[PageState]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let col = |f: fn(&PageState) -> i64| pages.iter().map(f).collect::<Vec<_>>();
        sqlx::query(
            "INSERT INTO pages (id, url_count, byte_size, version, modified_us) \
             SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) \
             ON CONFLICT (id) DO UPDATE SET url_count = excluded.url_count, byte_size = excluded.byte_size, \
             version = excluded.version, modified_us = excluded.modified_us",
        )
        .bind(col(|p| p.id))
        .bind(col(|p| p.url_count))
        .bind(col(|p| p.byte_size))
        .bind(col(|p| p.version))
        .bind(col(|p| p.modified_us))
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Store for PgStore {
    async fn migrate(&self) -> anyhow::Result<()> {
        sqlx::migrate!("./migrations/postgres").run(&self.pool).await?;
        self.repair().await?;
        Ok(())
    }

    async fn close(&self) {
        if tokio::time::timeout(super::CLOSE_TIMEOUT, self.pool.close()).await.is_err() {
            tracing::warn!("connections still in use after {:?}; exiting without them", super::CLOSE_TIMEOUT);
        }
    }

    async fn upsert(&self, entries: &[Entry]) -> Result<Written<UpsertCounts>> {
        if entries.is_empty() {
            return Ok(Written::default());
        }
        let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
        let mut tx = self.pool.begin().await?;
        let (now, existing, pages) = Self::lock_and_load(&mut tx, &locs).await?;
        let plan = placement::plan_upsert(entries, existing, pages, self.limits, now)?;
        Self::write_pages(&mut tx, &plan.pages).await?;
        if !plan.updates.is_empty() {
            let u = &plan.updates;
            sqlx::query(
                "UPDATE urls SET page_id = u.page_id, lastmod = u.lastmod, changefreq = u.changefreq, \
                 priority = u.priority, size = u.size \
                 FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[]) \
                 AS u (id, page_id, lastmod, changefreq, priority, size) WHERE urls.id = u.id",
            )
            .bind(u.iter().map(|x| x.id).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.page_id).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.lastmod.as_deref()).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.changefreq.as_deref()).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.priority.map(Priority::millionths)).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.size).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
        }
        if !plan.inserts.is_empty() {
            let n = &plan.inserts;
            // WITH ORDINALITY + ORDER BY: ids are assigned in plan order, so page order is request order.
            sqlx::query(
                "INSERT INTO urls (loc, page_id, lastmod, changefreq, priority, size) \
                 SELECT loc, page_id, lastmod, changefreq, priority, size \
                 FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[]) \
                 WITH ORDINALITY AS n (loc, page_id, lastmod, changefreq, priority, size, ord) ORDER BY ord",
            )
            .bind(n.iter().map(|x| x.loc.as_str()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.page_id).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.lastmod.as_deref()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.changefreq.as_deref()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.priority.map(Priority::millionths)).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.size).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Written { counts: plan.counts, changes: plan.changes() })
    }

    async fn delete(&self, locs: &[Loc]) -> Result<Written<DeleteCounts>> {
        let locs = distinct(locs);
        if locs.is_empty() {
            return Ok(Written::default());
        }
        let mut tx = self.pool.begin().await?;
        let (now, found, pages) = Self::lock_and_load(&mut tx, &locs).await?;
        let plan = placement::plan_delete(locs.len(), found, pages, now);
        if !plan.ids.is_empty() {
            sqlx::query("DELETE FROM urls WHERE id = ANY($1)").bind(&plan.ids).execute(&mut *tx).await?;
            Self::write_pages(&mut tx, &plan.pages).await?;
        }
        tx.commit().await?;
        Ok(Written { counts: DeleteCounts { deleted: plan.deleted, missing: plan.missing }, changes: plan.changes() })
    }
}

#[async_trait]
impl StoreReads for PgStore {
    async fn ping(&self) -> Result<()> {
        sqlx::query(super::PING_SQL).execute(&self.pool).await?;
        Ok(())
    }
    fn pool_status(&self) -> PoolStatus {
        PoolStatus { size: self.pool.size(), idle: self.pool.num_idle() }
    }
    async fn find(&self, loc: &Loc) -> Result<Option<StoredUrl>> {
        let row: Option<UrlRow> = sqlx::query_as(concat!("SELECT ", url_columns!(), " FROM urls WHERE loc = $1"))
            .bind(loc.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn list_after(&self, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        let rows: Vec<UrlRow> =
            sqlx::query_as(concat!("SELECT ", url_columns!(), " FROM urls WHERE id > $1 ORDER BY id LIMIT $2"))
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn pages(&self) -> Result<Vec<PageState>> {
        let rows: Vec<PageRow> = sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages ORDER BY id"))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn page(&self, id: i64) -> Result<Option<PageState>> {
        let row: Option<PageRow> = sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn page_entries(&self, id: i64) -> Result<Option<(PageState, EntryStream)>> {
        // One snapshot for the page's state and its rows, so the body always matches the ETag sent before it.
        let mut tx = self.pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?;
        let row: Option<PageRow> = sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages WHERE id = $1"))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(page) = row.map(PageState::from).filter(|p| p.url_count > 0) else {
            return Ok(None);
        };
        sqlx::query(PAGE_PLANNER_SETTINGS).execute(&mut *tx).await?;
        let stream = async_stream::try_stream! {
            let mut tx = tx;
            let mut rows = sqlx::query_as::<_, PageEntry>(PAGE_ENTRIES_SQL).bind(id).fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                yield row;
            }
        };
        Ok(Some((page, Box::pin(stream))))
    }
}
