//! The embedded SQLite store (the default). WAL journal with `synchronous=FULL`, so an acknowledged write survives
//! a crash or power loss; writers are serialized in-process and take the database's write lock up front
//! (`BEGIN IMMEDIATE`), so page accounting never races.
//!
//! Writes go through one connection of their own ([`WRITER_CACHE_KIB`], [`WRITER_AUTOCHECKPOINT`]), reads through
//! the pool. In WAL mode a connection drops its whole page cache when it finds that another connection wrote: with
//! writes spread over the pool, each batch of a bulk load started from an empty cache and read the unique index of
//! locs from the file again, and each commit's checkpoint wrote the pages it had just written to the log.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::Mutex;

use super::CheckSettled;
use super::crawls::{self, FetchRecord, PageRead};
use super::health::{self, BrakeOrder, BrakeState, CheckClaim, CheckResult, Checks};
use super::hreflang::{self, NodeRow, ProblemRow};
use super::outbox::{self, Claim, Settle, Settled};
use super::publish::{self, Held, PublishStatus, PublishedObject};
use super::shared::{Backend, Sql};
use super::watch::{self, FileWatch, Trouble};
use super::websub::{self, HubClaim, HubRow, HubSettle};
use super::write::{self, Upsert, Writes};
use super::{
    DeleteCounts, EntryStream, Result, SiteUrl, Store, StoreOptions, UrlRow, Written, distinct, now_us, url_columns,
};
use sitemapd_core::domain::{Entry, Loc, Priority, SiteSpec, Sites};
use sitemapd_core::hreflang::Policy;
use sitemapd_core::page::{Fields, PageState, StoredUrl};
use sitemapd_core::placement::{NewUrl, Stamps, UpsertCounts};

/// The target of this module's log lines: the one it had before the crate split (`sitemapd::store::sqlite`), so that `RUST_LOG`
/// filters and log processing that name it keep working.
const LOG_TARGET: &str = "sitemapd::store::sqlite";

/// A page's entries in page order: a search of `urls_site_page_id`, already in order (a test pins the plan);
/// excluded records (URL health) skipped.
pub const PAGE_ENTRIES_SQL: &str = "SELECT loc, lastmod, changefreq, priority, ext FROM urls WHERE site_id = ?1 AND page_id = ?2 AND NOT excluded ORDER BY id";

/// hreflang's probe of a write: the nodes of its locs and of the hrefs they name (a test pins its plan).
pub const HREFLANG_PROBE_SQL: &str = super::hreflang::SQLITE_NODES_SQL;

/// The stored rows of a batch's locs, given as one JSON array.
const LOOKUP_SQL: &str =
    concat!("SELECT ", url_columns!(), " FROM urls WHERE loc IN (SELECT value FROM json_each(?1))");

/// The writer connection's page cache, in KiB (SQLite's default is 2,000 KiB): enough to keep the unique index of
/// locs of about a million records between batches. Freed when the writer has been idle for [`WRITER_IDLE`].
pub const WRITER_CACHE_KIB: u32 = 32 * 1024;
/// WAL pages after which a commit copies the log into the database file (SQLite's default is 1,000): with the
/// default, a bulk load checkpointed after nearly every batch, writing each index page it changed twice per batch.
pub const WRITER_AUTOCHECKPOINT: u32 = 16_384;
/// How long the writer connection stays open without a write (its cache is freed with it; the pool looks every
/// this long, so it closes 10 to 20 s after the last write). A bulk load's batches come well within it; after one,
/// the cache (32 MiB and SQLite's page headers) is given back soon rather than held by an idle connection
/// (`bench/load_rss.py`).
const WRITER_IDLE: Duration = Duration::from_secs(10);

pub struct SqliteStore {
    pool: SqlitePool,
    /// One connection, for every statement that writes.
    write_pool: SqlitePool,
    /// The layout, as configured; with each site's hreflang policy by id once `migrate` registered the sites.
    base_shape: write::Shape,
    shape: OnceLock<write::Shape>,
    hreflang_names: BTreeMap<String, Policy>,
    writer: Mutex<()>,
    /// The longest a writer waits for the in-process write lock (then the store counts as unavailable: 503).
    lock_timeout: Duration,
    /// The database's files as opened ([`watch`]): `None` in memory.
    watch: Option<Arc<FileWatch>>,
    /// Serving: a connection held open for the process's life, so that no other connection's close is the last
    /// one (the last checkpoints into the file and deletes the log); never closed when the file was overwritten.
    sentinel: std::sync::Mutex<Option<SqliteConnection>>,
    specs: Vec<SiteSpec>,
    sites: OnceLock<Arc<Sites>>,
    /// The sites whose changes are queued for notification, and those whose URLs are checked (URL health), by
    /// name; by id once `migrate` registered them.
    notify_names: BTreeSet<String>,
    check_names: BTreeSet<String>,
    queues: OnceLock<write::Queues>,
    /// Whether the next large batch is planned without a lookup ([`write::upsert_guessing`]).
    guess: write::Guess,
}

impl SqliteStore {
    pub async fn connect(options: &StoreOptions) -> anyhow::Result<Self> {
        let connect = SqliteConnectOptions::from_str(&options.url)
            .context("invalid SQLite URL")?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5).min(options.acquire_timeout));
        let path = std::path::absolute(connect.get_filename()).unwrap_or_else(|_| connect.get_filename().to_owned());
        tracing::info!(target: LOG_TARGET, database = %path.display(), "opening the SQLite database");
        let write_pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .idle_timeout(WRITER_IDLE)
            .acquire_timeout(options.acquire_timeout)
            // SQLite ends a transaction on its own when a statement or COMMIT fails for a full disk or an I/O
            // error; sqlx then still counts it open, its ROLLBACK fails, and every later BEGIN on the connection
            // would fail. Such a connection is replaced, not reused. The ping runs after the rollback sqlx queued
            // on the connection when the transaction was dropped.
            .after_release(|conn, _| {
                Box::pin(async move {
                    use sqlx::Connection;
                    conn.ping().await?;
                    Ok(!conn.is_in_transaction())
                })
            })
            .connect_lazy_with(
                connect
                    .clone()
                    .pragma("cache_size", format!("-{WRITER_CACHE_KIB}"))
                    .pragma("wal_autocheckpoint", WRITER_AUTOCHECKPOINT.to_string()),
            );
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.clone())
            .await
            .with_context(|| format!("cannot open the SQLite database {}", path.display()))?;
        // SQLite follows a symbolic link to the file and keeps its log beside the file itself: so does the watch.
        let mut watch = FileWatch::new(std::fs::canonicalize(&path).unwrap_or(path));
        let mut sentinel = None;
        if let (true, Some(w)) = (options.serving, watch.as_mut()) {
            sentinel = Some(serve_file(&connect, &write_pool, w).await?);
        }
        let watch = watch.map(Arc::new);
        Ok(Self {
            pool,
            write_pool,
            base_shape: options.shape(),
            shape: OnceLock::new(),
            hreflang_names: options.hreflang.clone(),
            writer: Mutex::new(()),
            lock_timeout: Duration::from_secs(5),
            watch,
            sentinel: std::sync::Mutex::new(sentinel),
            specs: options.sites.clone(),
            sites: OnceLock::new(),
            notify_names: options.notify_sites.clone(),
            check_names: options.check_sites.clone(),
            queues: OnceLock::new(),
            guess: write::Guess::default(),
        })
    }

    /// Fails as unavailable when the database file or its log was deleted or replaced since it was opened
    /// ([`watch`]): the open connections would go on reading and writing the old, unlinked files, and every write
    /// acknowledged then would be lost at the next start. Checked by `/readyz`, before every write
    /// ([`Self::check_file_to_write`]), and once a second while serving; what can be saved is saved when it is
    /// first found ([`rescue`]).
    fn check_file(&self) -> Result<()> {
        let Some(w) = &self.watch else { return Ok(()) };
        match w.check() {
            (None, _) => Ok(()),
            (Some(trouble), first) => {
                if first {
                    tokio::spawn(rescue(w.clone(), self.pool.clone(), trouble));
                }
                Err(unavailable(trouble.message(w.path())))
            }
        }
    }

    /// [`Self::check_file`] before a write: a write refused for the files' sake answers once their rescue has
    /// finished, so that its 503 comes after every write acknowledged before is saved (a `kill -9` right after the
    /// answer then loses none of them). Bounded by the request's own time limit.
    async fn check_file_to_write(&self) -> Result<()> {
        let checked = self.check_file();
        if let (Err(_), Some(w)) = (&checked, &self.watch) {
            w.rescued().await;
        }
        checked
    }

    /// Keeps whether a write failed for want of space (for `/readyz`), or succeeded.
    fn noted<T>(&self, result: Result<T>) -> Result<T> {
        if let Some(w) = &self.watch {
            match &result {
                Ok(_) => w.set_full(None),
                Err(super::StoreError::Unavailable(e)) if watch::is_disk_full(e) => w.set_full(Some(e.to_string())),
                Err(_) => {}
            }
        }
        result
    }

    /// How pages are laid out, with each site's hreflang policy once `migrate` registered the sites.
    fn shape(&self) -> &write::Shape {
        self.shape.get().unwrap_or(&self.base_shape)
    }

    /// The sites whose writes queue notifications and checks (none before `migrate`).
    fn queues(&self) -> &write::Queues {
        static NONE: write::Queues = write::Queues { notify: BTreeSet::new(), check: BTreeSet::new() };
        self.queues.get().unwrap_or(&NONE)
    }

    /// A write transaction on the writer connection, holding SQLite's write lock from its start; the caller holds
    /// [`Self::lock_writer`]. Refused when the database file was deleted or replaced ([`Self::check_file`]).
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.check_file_to_write().await?;
        Ok(self.write_pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn lock_writer(&self) -> Result<tokio::sync::MutexGuard<'_, ()>> {
        tokio::time::timeout(self.lock_timeout, self.writer.lock())
            .await
            .map_err(|_| super::StoreError::Unavailable(sqlx::Error::PoolTimedOut))
    }
}

/// One statement a row, and the batch's locs as one JSON array.
impl Writes for sqlx::Sqlite {
    async fn now(_: &mut SqliteConnection) -> Result<i64> {
        Ok(now_us())
    }

    async fn lookup(conn: &mut SqliteConnection, locs: &[&str]) -> Result<Vec<SiteUrl>> {
        let json = serde_json::to_string(locs).expect("strings serialize");
        let rows: Vec<UrlRow> = sqlx::query_as(LOOKUP_SQL).bind(json).fetch_all(conn).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn write_pages(conn: &mut SqliteConnection, site: i64, pages: &[PageState]) -> Result<()> {
        for p in pages {
            sqlx::query(
                "INSERT INTO pages (id, url_count, byte_size, version, modified_us, image_urls, video_urls, xhtml_urls, \
                                    site_id, gzip) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                 ON CONFLICT (site_id, id) DO UPDATE SET url_count = excluded.url_count, byte_size = excluded.byte_size, \
                 version = excluded.version, modified_us = excluded.modified_us, image_urls = excluded.image_urls, \
                 video_urls = excluded.video_urls, xhtml_urls = excluded.xhtml_urls, gzip = excluded.gzip",
            )
            .bind(p.id)
            .bind(p.url_count)
            .bind(p.byte_size)
            .bind(p.version)
            .bind(p.modified_us)
            .bind(p.ns.image)
            .bind(p.ns.video)
            .bind(p.ns.xhtml)
            .bind(site)
            .bind(p.gzip.code())
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    async fn write_urls(
        conn: &mut SqliteConnection,
        site: i64,
        updates: &[StoredUrl],
        inserts: &[NewUrl],
        stamps: &Stamps,
    ) -> Result<()> {
        for u in updates {
            let update = sqlx::query(
                "UPDATE urls SET page_id = ?2, lastmod = ?3, changefreq = ?4, priority = ?5, size = ?6, ext = ?7, \
                 news_us = ?8, news = ?9, changed_us = coalesce(?10, changed_us) WHERE id = ?1",
            );
            let update = bind_placed(update.bind(u.id), u.page_id, &u.fields, u.size);
            update.bind(stamps.of_update(u)).execute(&mut *conn).await?;
        }
        // Many rows a statement: each statement is a round trip to the connection's thread, which one row a
        // statement made most of an insert's cost. The rows of one VALUES list are inserted in order, so ids still
        // follow the plan. Full chunks share one prepared statement (sqlx caches it per connection).
        for chunk in inserts.chunks(INSERT_ROWS) {
            let sql = insert_sql(chunk.len());
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for n in chunk {
                insert = bind_placed(insert.bind(n.loc.as_str()), n.page_id, &n.fields, n.size)
                    .bind(site)
                    .bind(stamps.of_insert(n));
            }
            insert.execute(&mut *conn).await?;
        }
        Ok(())
    }

    async fn delete_ids(conn: &mut SqliteConnection, ids: &[i64]) -> Result<()> {
        for id in ids {
            sqlx::query("DELETE FROM urls WHERE id = ?1").bind(id).execute(&mut *conn).await?;
        }
        Ok(())
    }

    async fn add_removed(
        conn: &mut SqliteConnection,
        site: i64,
        locs: &[&str],
        sections: &[i64],
        now_us: i64,
    ) -> Result<()> {
        // Pairs `[loc, section]`, one JSON array of them.
        let pairs: Vec<(&str, i64)> = locs.iter().copied().zip(sections.iter().copied()).collect();
        let json = serde_json::to_string(&pairs).expect("strings and numbers serialize");
        // `WHERE true`: SQLite reads an `ON` after a bare `FROM` as a join's.
        sqlx::query(
            "INSERT INTO removed (site_id, loc, removed_us, section_id) \
             SELECT ?1, json_extract(value, '$[0]'), ?3, json_extract(value, '$[1]') FROM json_each(?2) WHERE true \
             ON CONFLICT (site_id, loc) DO UPDATE SET removed_us = excluded.removed_us, section_id = excluded.section_id",
        )
        .bind(site)
        .bind(json)
        .bind(now_us)
        .execute(conn)
        .await?;
        Ok(())
    }

    async fn forget_removed(conn: &mut SqliteConnection, site: i64, locs: &[&str]) -> Result<u64> {
        let json = serde_json::to_string(locs).expect("strings serialize");
        let done = sqlx::query("DELETE FROM removed WHERE site_id = ?1 AND loc IN (SELECT value FROM json_each(?2))")
            .bind(site)
            .bind(json)
            .execute(conn)
            .await?;
        Ok(done.rows_affected())
    }

    async fn enqueue_notifications(conn: &mut SqliteConnection, site: i64, locs: &[&str]) -> Result<()> {
        outbox::sqlite_enqueue(conn, site, locs).await
    }

    async fn enqueue_checks(conn: &mut SqliteConnection, site: i64, locs: &[&str], now_us: i64) -> Result<()> {
        let json = serde_json::to_string(locs).expect("strings serialize");
        sqlx::query(health::SQLITE_ENQUEUE_SQL).bind(site).bind(json).bind(now_us).execute(conn).await?;
        Ok(())
    }

    async fn recheck(conn: &mut SqliteConnection, site: i64, locs: &[&str], now_us: i64) -> Result<()> {
        let (any,): (i64,) = sqlx::query_as(health::ANY_PROBLEM_SQL).bind(site).fetch_one(&mut *conn).await?;
        if any == 0 {
            return Ok(());
        }
        let json = serde_json::to_string(locs).expect("strings serialize");
        sqlx::query(health::SQLITE_RECHECK_SQL).bind(site).bind(json).bind(now_us).execute(conn).await?;
        Ok(())
    }

    async fn drop_checks(conn: &mut SqliteConnection, site: i64, locs: &[&str]) -> Result<()> {
        let json = serde_json::to_string(locs).expect("strings serialize");
        sqlx::query(health::SQLITE_DROP_SQL).bind(site).bind(json).execute(conn).await?;
        Ok(())
    }

    async fn seed_checks(conn: &mut SqliteConnection, site: i64, walked: &[(i64, String)], now_us: i64) -> Result<()> {
        let pairs: Vec<(&str, i64)> = walked.iter().map(|(id, loc)| (loc.as_str(), *id)).collect();
        let json = serde_json::to_string(&pairs).expect("strings serialize");
        sqlx::query(health::SQLITE_SEED_SQL).bind(site).bind(json).bind(now_us).execute(conn).await?;
        Ok(())
    }

    const CLAIM_CHECKS_SQL: &'static str = health::SQLITE_CLAIM_SQL;

    async fn hreflang_nodes(conn: &mut SqliteConnection, hrefs: &[&str]) -> Result<Vec<NodeRow>> {
        let json = serde_json::to_string(hrefs).expect("strings serialize");
        Ok(sqlx::query_as(hreflang::SQLITE_NODES_SQL).bind(json).fetch_all(conn).await?)
    }

    async fn hreflang_cluster_nodes(conn: &mut SqliteConnection, keys: &[&str]) -> Result<Vec<NodeRow>> {
        let json = serde_json::to_string(keys).expect("strings serialize");
        Ok(sqlx::query_as(hreflang::SQLITE_CLUSTER_NODES_SQL).bind(json).fetch_all(conn).await?)
    }

    async fn hreflang_cluster_problems(conn: &mut SqliteConnection, keys: &[&str]) -> Result<Vec<ProblemRow>> {
        let json = serde_json::to_string(keys).expect("strings serialize");
        Ok(sqlx::query_as(hreflang::SQLITE_CLUSTER_PROBLEMS_SQL).bind(json).fetch_all(conn).await?)
    }

    async fn hreflang_put_nodes(conn: &mut SqliteConnection, rows: &[NodeRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let json = serde_json::to_string(rows).expect("rows serialize");
        sqlx::query(hreflang::SQLITE_PUT_NODES_SQL).bind(json).execute(conn).await?;
        Ok(())
    }

    async fn hreflang_drop_nodes(conn: &mut SqliteConnection, hrefs: &[&str]) -> Result<()> {
        if hrefs.is_empty() {
            return Ok(());
        }
        let json = serde_json::to_string(hrefs).expect("strings serialize");
        sqlx::query(hreflang::SQLITE_DROP_NODES_SQL).bind(json).execute(conn).await?;
        Ok(())
    }

    async fn hreflang_put_problems(conn: &mut SqliteConnection, rows: &[ProblemRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let json = serde_json::to_string(rows).expect("rows serialize");
        sqlx::query(hreflang::SQLITE_PUT_PROBLEMS_SQL).bind(json).execute(conn).await?;
        Ok(())
    }

    async fn hreflang_drop_problems(conn: &mut SqliteConnection, rows: &[ProblemRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let json = serde_json::to_string(rows).expect("rows serialize");
        sqlx::query(hreflang::SQLITE_DROP_PROBLEMS_SQL).bind(json).execute(conn).await?;
        Ok(())
    }
}

/// Rows per multi-row `INSERT` (11 parameters each: well within SQLite's 32,766).
const INSERT_ROWS: usize = 500;

/// `INSERT INTO urls … VALUES (…), …` for `rows` rows, in the columns [`bind_placed`] binds after `loc`, then
/// `site_id` and `changed_us`.
fn insert_sql(rows: usize) -> String {
    const ROW: &str = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    let mut sql = String::from(
        "INSERT INTO urls (loc, page_id, lastmod, changefreq, priority, size, ext, news_us, news, site_id, \
         changed_us) VALUES ",
    );
    for i in 0..rows {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(ROW);
    }
    sql
}

type SqliteQuery<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

/// Binds `?2` to `?9` of a record's update or insert: its page, fields and size, extensions, news date and news.
fn bind_placed<'q>(query: SqliteQuery<'q>, page_id: i64, fields: &'q Fields, size: i64) -> SqliteQuery<'q> {
    query
        .bind(page_id)
        .bind(fields.lastmod.as_deref())
        .bind(fields.changefreq.as_deref())
        .bind(fields.priority.map(Priority::millionths))
        .bind(size)
        .bind(fields.ext_json())
        .bind(fields.news_us())
        .bind(fields.news_json())
}

#[async_trait]
impl Store for SqliteStore {
    async fn migrate(&self) -> anyhow::Result<()> {
        sqlx::migrate!("../../migrations/sqlite").run(&self.pool).await?;
        let _writer = self.lock_writer().await?;
        let tx = self.write_pool.begin_with("BEGIN IMMEDIATE").await?;
        write::repair(tx, self.shape().limits).await?;
        let sites = sqlx::Sqlite::register_sites(&self.pool, &self.specs).await?;
        super::warn_unserved(sqlx::Sqlite::stored_sites(&self.pool).await?, &sites);
        let notify = super::site_ids(&sites, &self.notify_names);
        let _ = self.queues.set(write::Queues { notify, check: super::site_ids(&sites, &self.check_names) });
        let hreflang = super::policies(&sites, &self.hreflang_names);
        let _ = self.shape.set(write::Shape { hreflang, ..self.base_shape.clone() });
        let sites = Arc::new(sites);
        let _ = self.sites.set(sites.clone());
        // Still under the writer lock: each batch of the hreflang build or re-render is a write of its own.
        hreflang::open_tasks(|| self.begin_write(), &sites, self.shape()).await?;
        Ok(())
    }

    fn file_watch(&self) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        let serving = self.sentinel.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some();
        let w = self.watch.as_ref().filter(|_| serving)?;
        Some(Box::pin(watch_files(w.clone(), self.pool.clone())))
    }

    async fn close(&self) {
        // A change found first here is saved before the connections close, not by a task that would race them.
        if let Some(w) = &self.watch
            && let (Some(trouble), true) = w.check()
        {
            rescue(w.clone(), self.pool.clone(), trouble).await;
        }
        if let Some(w) = self.watch.as_ref().filter(|w| w.found() == Some(Trouble::DbOverwritten)) {
            return self.close_overwritten(w).await;
        }
        // Copies the WAL into the database file and empties it, so that the file alone holds everything (a copy
        // of `sitemapd.db` without its `-wal` is whole). Closing the last connection would checkpoint too, but
        // not if a connection is still held when the timeout below gives up on it.
        let checkpoint = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&self.pool);
        match tokio::time::timeout(super::CLOSE_TIMEOUT, checkpoint).await {
            Ok(Ok((0, _, _))) => tracing::info!(target: LOG_TARGET, "SQLite WAL checkpointed into the database file"),
            Ok(Ok((_, log, done))) => {
                tracing::warn!(target: LOG_TARGET, wal_frames = log, checkpointed = done, "SQLite checkpoint incomplete: a reader was busy")
            }
            Ok(Err(e)) => tracing::warn!(target: LOG_TARGET, error = %e, "SQLite checkpoint failed"),
            Err(_) => tracing::warn!(target: LOG_TARGET, "SQLite checkpoint timed out"),
        }
        let closed = async { tokio::join!(self.write_pool.close(), self.pool.close()) };
        if tokio::time::timeout(super::CLOSE_TIMEOUT, closed).await.is_err() {
            tracing::warn!(target: LOG_TARGET, "connections still in use after {:?}; exiting without them", super::CLOSE_TIMEOUT);
        }
        let sentinel = self.sentinel.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(sentinel) = sentinel {
            use sqlx::Connection;
            let _ = tokio::time::timeout(super::CLOSE_TIMEOUT, sentinel.close()).await;
        }
    }

    async fn upsert_with(&self, entries: &[Entry], mode: Upsert) -> Result<Written<UpsertCounts>> {
        if entries.is_empty() {
            return Ok(Written::default());
        }
        let _writer = self.lock_writer().await?;
        let sites = Backend::sites(self);
        let begin = || self.begin_write();
        let written =
            write::upsert_guessing(&self.guess, begin, &sites, entries, (mode, self.shape()), self.queues(), None)
                .await;
        self.noted(written)
    }

    async fn delete(&self, locs: &[Loc]) -> Result<Written<DeleteCounts>> {
        let locs = distinct(locs);
        if locs.is_empty() {
            return Ok(Written::default());
        }
        let _writer = self.lock_writer().await?;
        let deleted = match self.begin_write().await {
            Ok(tx) => write::delete(tx, &Backend::sites(self), &locs, self.queues(), self.shape()).await,
            Err(e) => Err(e),
        };
        self.noted(deleted)
    }
}

#[async_trait]
impl Backend for SqliteStore {
    type Db = sqlx::Sqlite;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn sites(&self) -> Arc<Sites> {
        self.sites.get().cloned().unwrap_or_else(|| super::unregistered(&self.specs))
    }

    /// The files ([`SqliteStore::check_file`]), and whether the disk is full: the last write failed for space and
    /// there is no room yet.
    fn check_file(&self) -> Result<()> {
        SqliteStore::check_file(self)?;
        match self.watch.as_ref().and_then(|w| w.disk_full()) {
            Some(why) => Err(unavailable(format!("the disk of {} is full: {why}", self.watch_path()))),
            None => Ok(()),
        }
    }

    async fn page_entries(&self, site: i64, id: i64) -> Result<Option<(PageState, EntryStream)>> {
        // In WAL mode a read transaction sees one snapshot from its first read to its end.
        let mut tx = self.pool.begin().await?;
        let Some(page) = sqlx::Sqlite::nonempty_page_in(&mut tx, site, id).await? else {
            return Ok(None);
        };
        Ok(Some((page, sqlx::Sqlite::entries(tx, PAGE_ENTRIES_SQL, site, id))))
    }

    async fn record_crawls(&self, fetches: &[FetchRecord], reads: &[PageRead]) -> Result<Vec<PageRead>> {
        if fetches.is_empty() && reads.is_empty() {
            return Ok(Vec::new());
        }
        crawls::check(&Backend::sites(self), fetches, reads)?;
        let (fetches, reads) = (crawls::merged_fetches(fetches), crawls::merged_reads(reads));
        let _writer = self.lock_writer().await?;
        let recorded = async {
            let mut tx = self.begin_write().await?;
            let new = crawls::sqlite_record(&mut tx, &fetches, &reads).await?;
            tx.commit().await?;
            Ok(new)
        };
        self.noted(recorded.await)
    }

    async fn purge_crawls(&self, before_us: i64) -> Result<u64> {
        let _writer = self.lock_writer().await?;
        let purged = async {
            let mut tx = self.begin_write().await?;
            let purged = crawls::sqlite_purge(&mut tx, before_us).await?;
            tx.commit().await?;
            Ok(purged)
        };
        self.noted(purged.await)
    }

    async fn purge_removed(&self, limit: u32) -> Result<u64> {
        if self.shape().removed_days == 0 {
            return Ok(0);
        }
        let _writer = self.lock_writer().await?;
        let purged = async {
            let tx = self.begin_write().await?;
            write::purge_removed(tx, &Backend::sites(self), self.shape().removed_days, limit).await
        };
        self.noted(purged.await)
    }

    // The sender's statements write too: under the writer lock, like a write, so that they queue behind writes
    // rather than meet them in SQLite's busy handler.
    async fn claim_notifications(&self, site: i64, limit: u32, lease: Duration) -> Result<Option<Claim>> {
        let _writer = self.lock_writer().await?;
        let claimed = async {
            let mut tx = self.begin_write().await?;
            let claim = outbox::sqlite_claim(&mut tx, site, limit, lease).await?;
            tx.commit().await?;
            Ok(claim)
        };
        self.noted(claimed.await)
    }

    // URL health writes under the writer lock, like a write (see above).
    async fn health_seed(&self, site: i64, limit: u32) -> Result<u64> {
        let _writer = self.lock_writer().await?;
        let seeded = async {
            let mut tx = self.begin_write().await?;
            let walked = sqlx::Sqlite::seed(&mut tx, site, limit).await?;
            tx.commit().await?;
            Ok(walked)
        };
        self.noted(seeded.await)
    }

    async fn health_claim(&self, site: i64, limit: u32, lease: Duration) -> Result<Vec<CheckClaim>> {
        let _writer = self.lock_writer().await?;
        let claimed = async {
            let mut tx = self.begin_write().await?;
            let claims = sqlx::Sqlite::claim(&mut tx, site, limit, lease).await?;
            tx.commit().await?;
            Ok(claims)
        };
        self.noted(claimed.await)
    }

    async fn health_settle(&self, site: i64, result: &CheckResult, exclude: bool) -> Result<Written<CheckSettled>> {
        let _writer = self.lock_writer().await?;
        let settled = async {
            let mut tx = self.begin_write().await?;
            let settled = sqlx::Sqlite::settle(&mut tx, site, result, exclude, true).await?;
            tx.commit().await?;
            Ok(settled)
        };
        self.noted(settled.await)
    }

    async fn health_restore(&self, site: i64) -> Result<Written<u64>> {
        let _writer = self.lock_writer().await?;
        let restored = async {
            let mut tx = self.begin_write().await?;
            let restored = sqlx::Sqlite::restore(&mut tx, site).await?;
            tx.commit().await?;
            Ok(restored)
        };
        self.noted(restored.await)
    }

    async fn health_brake_order(&self, site: i64, order: BrakeOrder) -> Result<Option<BrakeState>> {
        let _writer = self.lock_writer().await?;
        let ordered = async {
            let mut tx = self.begin_write().await?;
            let state = sqlx::Sqlite::order_brake(&mut tx, site, order).await?;
            tx.commit().await?;
            Ok(state)
        };
        self.noted(ordered.await)
    }

    async fn health_host_slot(&self, host: &str, gap: Duration, hold: Duration) -> Result<Duration> {
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        let _writer = self.lock_writer().await?;
        let slot = async {
            let mut tx = self.begin_write().await?;
            let (wait,): (i64,) = sqlx::query_as(health::SQLITE_HOST_SLOT_SQL)
                .bind(host)
                .bind(micros(gap))
                .bind(micros(hold))
                .bind(now_us())
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Duration::from_micros(u64::try_from(wait).unwrap_or(0)))
        };
        self.noted(slot.await)
    }

    async fn hub_rows(&self, site: i64) -> Result<Vec<HubRow>> {
        websub::sqlite_rows(Backend::pool(self), site).await
    }

    // WebSub's claims and settles write under the writer lock, like the outbox's (see above).
    async fn hub_claim(
        &self,
        site: i64,
        feed: &str,
        hub: &str,
        digest: &str,
        lease: Duration,
    ) -> Result<Option<HubClaim>> {
        let _writer = self.lock_writer().await?;
        let claimed = async {
            let mut tx = self.begin_write().await?;
            let claim = websub::sqlite_claim(&mut tx, site, feed, hub, digest, lease).await?;
            tx.commit().await?;
            Ok(claim)
        };
        self.noted(claimed.await)
    }

    async fn hub_settle(&self, claim: &HubClaim, settle: HubSettle) -> Result<bool> {
        let _writer = self.lock_writer().await?;
        let settled = async {
            let mut tx = self.begin_write().await?;
            let settled = websub::sqlite_settle(&mut tx, claim, settle).await?;
            tx.commit().await?;
            Ok(settled)
        };
        self.noted(settled.await)
    }

    // Publishing's writes are made under the writer lock too: a claim's check and its write in one transaction.
    async fn publish_claim(&self, site: i64, target: &str, lease: Duration) -> Result<Option<i64>> {
        let _writer = self.lock_writer().await?;
        let claimed = async {
            let mut tx = self.begin_write().await?;
            let claim = publish::sqlite_claim(&mut tx, site, target, lease).await?;
            tx.commit().await?;
            Ok(claim)
        };
        self.noted(claimed.await)
    }

    async fn publish_write(&self, target: &str, claim: i64, write: Held<'_>) -> Result<bool> {
        let _writer = self.lock_writer().await?;
        let written = async {
            let mut tx = self.begin_write().await?;
            let held = publish::sqlite_write(&mut tx, target, claim, write).await?;
            tx.commit().await?;
            Ok(held)
        };
        self.noted(written.await)
    }

    async fn published_objects(&self, target: &str) -> Result<Vec<PublishedObject>> {
        publish::sqlite_objects(Backend::pool(self), target).await
    }

    async fn publish_status(&self, site: Option<i64>) -> Result<Vec<PublishStatus>> {
        publish::sqlite_status(Backend::pool(self), site).await
    }

    async fn settle_notifications(&self, claim: &Claim, settle: Settle) -> Result<Settled> {
        let _writer = self.lock_writer().await?;
        let settled = async {
            let mut tx = self.begin_write().await?;
            let settled = outbox::sqlite_settle(&mut tx, claim, settle).await?;
            tx.commit().await?;
            Ok(settled)
        };
        self.noted(settled.await)
    }
}

impl SqliteStore {
    fn watch_path(&self) -> String {
        self.watch.as_ref().map_or_else(String::new, |w| w.path().display().to_string())
    }

    /// Closes without writing to the database file, which is not the one opened any more: no checkpoint, and
    /// the sentinel is never closed, so that no connection's close is the last (the last checkpoints). The log,
    /// which belongs to the database that was overwritten, is moved aside so that the file there now opens alone.
    async fn close_overwritten(&self, w: &FileWatch) {
        let closed = async { tokio::join!(self.write_pool.close(), self.pool.close()) };
        let _ = tokio::time::timeout(super::CLOSE_TIMEOUT, closed).await;
        std::mem::forget(self.sentinel.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
        let Some(wal) = w.wal() else { return };
        let aside = watch::aside(wal, "overwritten");
        match std::fs::rename(wal, &aside) {
            Ok(()) => {
                let mut shm = w.path().as_os_str().to_owned();
                shm.push("-shm");
                let _ = std::fs::remove_file(shm);
                tracing::error!(target: LOG_TARGET,
                    database = %w.path().display(), log = %aside.display(),
                    "the database file was overwritten while serving: it was not written to; the log of what was \
                     served before is kept aside"
                );
            }
            Err(e) => {
                tracing::error!(target: LOG_TARGET, log = %wal.display(), error = %e, "cannot move the log aside")
            }
        }
    }
}

fn unavailable(message: String) -> super::StoreError {
    super::StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(message)))
}

/// Makes the database file one this process serves ([`watch`]): opens the sentinel (a read makes it hold its
/// shared lock), gives the database its token if it has none (then checkpoints it into the file), and starts
/// watching. Two servers of one file share its token.
async fn serve_file(
    connect: &SqliteConnectOptions,
    write_pool: &SqlitePool,
    w: &mut FileWatch,
) -> anyhow::Result<SqliteConnection> {
    use sqlx::ConnectOptions;
    let mut sentinel = connect.connect().await.context("cannot open the sentinel connection")?;
    sqlx::query("SELECT count(*) FROM sqlite_master").execute(&mut sentinel).await?;
    let mut conn = write_pool.acquire().await?;
    let stored: i64 = sqlx::query_scalar("PRAGMA user_version").fetch_one(&mut *conn).await?;
    let token = match u32::try_from(stored) {
        Ok(token) if token != 0 => token,
        _ => {
            let token = watch::new_token();
            sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA user_version = {token}"))).execute(&mut *conn).await?;
            let _: (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&mut *conn).await?;
            token
        }
    };
    drop(conn);
    if let Err(e) = w.serving(token) {
        // Another process reads an old snapshot, so the checkpoint could not finish: identity only.
        tracing::warn!(target: LOG_TARGET, database = %w.path().display(), error = %e, "the database file is watched by its identity only");
    }
    Ok(sentinel)
}

/// Looks at the files once a second while serving, so that what can be saved is saved even when nothing writes
/// ([`Store::file_watch`]: the server runs it as a worker).
async fn watch_files(w: Arc<FileWatch>, pool: SqlitePool) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let (Some(trouble), true) = w.check() {
            rescue(w.clone(), pool.clone(), trouble).await;
        }
    }
}

/// Saves what can be saved when the files changed under the process, and says so. A deleted log: its frames
/// are copied into the database file, which is still the one opened. A deleted or renamed database: a whole copy
/// (`VACUUM INTO`, then synced) beside its path. An overwritten database: nothing is written to it.
async fn rescue(w: Arc<FileWatch>, pool: SqlitePool, trouble: Trouble) {
    let _rescuing = w.rescuing();
    let db = w.path().to_owned();
    tracing::error!(target: LOG_TARGET, database = %db.display(), "{}", trouble.message(&db));
    match trouble {
        Trouble::WalGone => {
            match sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(FULL)").fetch_one(&pool).await {
                Ok((0, log, done)) => tracing::error!(target: LOG_TARGET,
                    database = %db.display(), wal_frames = log, checkpointed = done,
                    "the deleted log's writes were copied into the database file"
                ),
                Ok((_, log, done)) => tracing::error!(target: LOG_TARGET,
                    wal_frames = log,
                    checkpointed = done,
                    "the deleted log could not be copied whole: a reader was busy"
                ),
                Err(e) => {
                    tracing::error!(target: LOG_TARGET, error = %e, "the deleted log could not be copied into the database file")
                }
            }
        }
        Trouble::DbGone => {
            let copy = watch::aside(&db, "rescued");
            let Some(to) = copy.to_str() else { return };
            let done = sqlx::query("VACUUM INTO ?1").bind(to).execute(&pool).await;
            match done.map_err(anyhow::Error::from).and_then(|_| Ok(std::fs::File::open(&copy)?.sync_all()?)) {
                Ok(()) => {
                    tracing::error!(target: LOG_TARGET, copy = %copy.display(), "a whole copy of the database was written")
                }
                Err(e) => {
                    tracing::error!(target: LOG_TARGET, copy = %copy.display(), error = %e, "cannot write a copy of the database")
                }
            }
        }
        Trouble::DbOverwritten => {}
    }
}

/// `VACUUM INTO dest` from the database `url` names (which must exist), then `fsync` of the copy.
pub async fn backup(url: &str, dest: &std::path::Path) -> anyhow::Result<()> {
    use sqlx::{ConnectOptions, Connection};
    // Checked first for a clear message; VACUUM INTO also refuses a non-empty file, and `create_new` below closes
    // the race with another process.
    if dest.exists() {
        anyhow::bail!("{} already exists; a backup never overwrites a file", dest.display());
    }
    let dest_str = dest.to_str().context("the backup path must be UTF-8")?;
    let connect = SqliteConnectOptions::from_str(url)
        .context("invalid SQLite URL")?
        .create_if_missing(false)
        .busy_timeout(Duration::from_secs(5));
    let source = std::path::absolute(connect.get_filename()).unwrap_or_else(|_| connect.get_filename().to_owned());
    let mut conn = connect.connect().await.with_context(|| format!("cannot open the database {}", source.display()))?;
    std::fs::File::create_new(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let vacuum = sqlx::query("VACUUM INTO ?1").bind(dest_str).execute(&mut conn).await;
    conn.close().await.ok();
    if let Err(e) = vacuum {
        let _ = std::fs::remove_file(dest);
        return Err(e).with_context(|| format!("cannot copy {} to {}", source.display(), dest.display()));
    }
    // A copy is no server's database: its token is cleared (see watch.rs), so that a server whose file it is
    // copied over finds it. The write is synced.
    watch::clear_token(dest).with_context(|| format!("cannot write {}", dest.display()))?;
    tracing::info!(target: LOG_TARGET, from = %source.display(), to = %dest.display(), "backup written");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sitemapd_core::domain::{DEFAULT_SITE, PublicUrl};
    use sitemapd_core::page::Limits;

    /// Writes go through one connection of their own with the larger cache and checkpoint interval; reads keep
    /// SQLite's defaults, so that many readers do not each hold a writer's cache.
    #[tokio::test]
    async fn writes_have_a_connection_of_their_own_with_its_cache() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let public_url = PublicUrl::parse("http://localhost:8080").unwrap();
        let options = StoreOptions {
            url,
            read_url: None,
            sites: vec![SiteSpec { name: DEFAULT_SITE.to_owned(), public_url: public_url.clone() }],
            limits: Limits { max_urls: 50_000, max_bytes: 52_428_800 },
            section_max_urls: Default::default(),
            max_connections: 10,
            pooler: crate::Pooler::None,
            acquire_timeout: Duration::from_secs(5),
            notify_sites: Default::default(),
            check_sites: Default::default(),
            removed_days: 0,
            hreflang: Default::default(),
            serving: true,
        };
        let store = SqliteStore::connect(&options).await.unwrap();
        store.migrate().await.unwrap();
        let entry = Entry::from_json(serde_json::json!({"loc": "http://localhost:8080/a"}), &public_url);
        store.upsert_with(&[entry.unwrap()], Upsert::Replace).await.unwrap();
        let pragma = |pool: &SqlitePool, name: &str| {
            let sql = format!("PRAGMA {name}");
            let pool = pool.clone();
            async move { sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql)).fetch_one(&pool).await.unwrap() }
        };
        assert_eq!(store.write_pool.size(), 1, "the write opened the writer");
        assert_eq!(pragma(&store.write_pool, "cache_size").await, -i64::from(WRITER_CACHE_KIB));
        assert_eq!(pragma(&store.write_pool, "wal_autocheckpoint").await, i64::from(WRITER_AUTOCHECKPOINT));
        assert_eq!(pragma(&store.pool, "cache_size").await, -2000, "readers keep the default");
        store.close().await;
    }
}
