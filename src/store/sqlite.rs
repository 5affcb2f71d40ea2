//! The embedded SQLite store (the default). WAL journal with `synchronous=FULL`, so an acknowledged write survives
//! a crash or power loss; writers are serialized in-process and take the database's write lock up front
//! (`BEGIN IMMEDIATE`), so page accounting never races.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use futures_util::TryStreamExt;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use tokio::sync::Mutex;

use super::{
    DeleteCounts, EntryStream, PageEntry, PageRow, PoolStatus, RECOUNT_TASK, Result, Store, StoreOptions, StoreReads,
    UrlRow, Written, distinct, log_repair, now_us, page_columns, url_columns,
};
use crate::domain::{Entry, Loc, Priority};
use crate::page::{Limits, PageState, StoredUrl};
use crate::placement::{self, UpsertCounts};

/// A page's entries in page order: a search of `urls_page_id_id`, already in order (a test pins the plan).
pub const PAGE_ENTRIES_SQL: &str = "SELECT loc, lastmod, changefreq, priority FROM urls WHERE page_id = ?1 ORDER BY id";

pub struct SqliteStore {
    pool: SqlitePool,
    limits: Limits,
    writer: Mutex<()>,
    /// The longest a writer waits for the in-process write lock (then the store counts as unavailable: 503).
    lock_timeout: Duration,
    /// The database file as opened: its path and identity (device, inode).
    file: Option<(std::path::PathBuf, u64, u64)>,
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
        tracing::info!(database = %path.display(), "opening the SQLite database");
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect)
            .await?;
        let file = file_identity(&path).map(|(dev, ino)| (path, dev, ino));
        Ok(Self { pool, limits: options.limits, writer: Mutex::new(()), lock_timeout: Duration::from_secs(5), file })
    }

    /// Fails as unavailable when the database file was deleted (its directory removed) or replaced since it was
    /// opened. The open connections would go on reading and writing the old, unlinked file: every write
    /// acknowledged then would be lost at the next start. Checked by `/readyz` and before every write.
    fn check_file(&self) -> Result<()> {
        let Some((path, dev, ino)) = &self.file else { return Ok(()) };
        if file_identity(path) == Some((*dev, *ino)) {
            return Ok(());
        }
        let message = format!("the database file {} was deleted or replaced; restart sitemapd", path.display());
        Err(super::StoreError::Unavailable(sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, message))))
    }

    async fn lock_writer(&self) -> Result<tokio::sync::MutexGuard<'_, ()>> {
        tokio::time::timeout(self.lock_timeout, self.writer.lock())
            .await
            .map_err(|_| super::StoreError::Unavailable(sqlx::Error::PoolTimedOut))
    }

    async fn load(tx: &mut sqlx::SqliteTransaction<'_>, locs: &[&str]) -> Result<(Vec<StoredUrl>, Vec<PageState>)> {
        let json = serde_json::to_string(locs).expect("strings serialize");
        let existing: Vec<UrlRow> = sqlx::query_as(concat!(
            "SELECT ",
            url_columns!(),
            " FROM urls WHERE loc IN (SELECT value FROM json_each(?1))"
        ))
        .bind(json)
        .fetch_all(&mut **tx)
        .await?;
        let pages: Vec<PageRow> =
            sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages ORDER BY id")).fetch_all(&mut **tx).await?;
        Ok((existing.into_iter().map(Into::into).collect(), pages.into_iter().map(Into::into).collect()))
    }

    /// The repair migration 0002 leaves to the application, once, in one write transaction: records whose loc or
    /// size is not what this version would store are fixed, and only their pages change.
    async fn repair(&self) -> Result<()> {
        let _writer = self.lock_writer().await?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let pending: Option<String> = sqlx::query_scalar("SELECT name FROM upgrade_tasks WHERE name = ?1")
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
            let (taken, pages) = Self::load(&mut tx, &renamed).await?;
            let taken = taken.into_iter().map(|u| u.loc).collect();
            let plan = placement::plan_repair(stale, &taken, pages, self.limits, now_us())?;
            for (url, _) in &plan.dropped {
                sqlx::query("DELETE FROM urls WHERE id = ?1").bind(url.id).execute(&mut *tx).await?;
            }
            for u in &plan.updates {
                sqlx::query("UPDATE urls SET loc = ?2, page_id = ?3, size = ?4 WHERE id = ?1")
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
        sqlx::query("DELETE FROM upgrade_tasks WHERE name = ?1").bind(RECOUNT_TASK).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn write_pages(tx: &mut sqlx::SqliteTransaction<'_>, pages: &[PageState]) -> Result<()> {
        for p in pages {
            sqlx::query(
                "INSERT INTO pages (id, url_count, byte_size, version, modified_us) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (id) DO UPDATE SET url_count = excluded.url_count, byte_size = excluded.byte_size, \
                 version = excluded.version, modified_us = excluded.modified_us",
            )
            .bind(p.id)
            .bind(p.url_count)
            .bind(p.byte_size)
            .bind(p.version)
            .bind(p.modified_us)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn migrate(&self) -> anyhow::Result<()> {
        sqlx::migrate!("./migrations/sqlite").run(&self.pool).await?;
        self.repair().await?;
        Ok(())
    }

    async fn close(&self) {
        // Copies the WAL into the database file and empties it, so that the file alone holds everything (a copy
        // of `sitemapd.db` without its `-wal` is whole). Closing the last connection would checkpoint too, but
        // not if a connection is still held when the timeout below gives up on it.
        let checkpoint = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&self.pool);
        match tokio::time::timeout(super::CLOSE_TIMEOUT, checkpoint).await {
            Ok(Ok((0, _, _))) => tracing::info!("SQLite WAL checkpointed into the database file"),
            Ok(Ok((_, log, done))) => {
                tracing::warn!(wal_frames = log, checkpointed = done, "SQLite checkpoint incomplete: a reader was busy")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "SQLite checkpoint failed"),
            Err(_) => tracing::warn!("SQLite checkpoint timed out"),
        }
        if tokio::time::timeout(super::CLOSE_TIMEOUT, self.pool.close()).await.is_err() {
            tracing::warn!("connections still in use after {:?}; exiting without them", super::CLOSE_TIMEOUT);
        }
    }

    async fn upsert(&self, entries: &[Entry]) -> Result<Written<UpsertCounts>> {
        if entries.is_empty() {
            return Ok(Written::default());
        }
        let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
        let _writer = self.lock_writer().await?;
        self.check_file()?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (existing, pages) = Self::load(&mut tx, &locs).await?;
        let plan = placement::plan_upsert(entries, existing, pages, self.limits, now_us())?;
        Self::write_pages(&mut tx, &plan.pages).await?;
        for u in &plan.updates {
            sqlx::query(
                "UPDATE urls SET page_id = ?2, lastmod = ?3, changefreq = ?4, priority = ?5, size = ?6 WHERE id = ?1",
            )
            .bind(u.id)
            .bind(u.page_id)
            .bind(u.fields.lastmod.as_deref())
            .bind(u.fields.changefreq.as_deref())
            .bind(u.fields.priority.map(Priority::millionths))
            .bind(u.size)
            .execute(&mut *tx)
            .await?;
        }
        for n in &plan.inserts {
            sqlx::query(
                "INSERT INTO urls (loc, page_id, lastmod, changefreq, priority, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .bind(n.loc.as_str())
            .bind(n.page_id)
            .bind(n.fields.lastmod.as_deref())
            .bind(n.fields.changefreq.as_deref())
            .bind(n.fields.priority.map(Priority::millionths))
            .bind(n.size)
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
        let _writer = self.lock_writer().await?;
        self.check_file()?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (found, pages) = Self::load(&mut tx, &locs).await?;
        let plan = placement::plan_delete(locs.len(), found, pages, now_us());
        for id in &plan.ids {
            sqlx::query("DELETE FROM urls WHERE id = ?1").bind(id).execute(&mut *tx).await?;
        }
        Self::write_pages(&mut tx, &plan.pages).await?;
        tx.commit().await?;
        Ok(Written { counts: DeleteCounts { deleted: plan.deleted, missing: plan.missing }, changes: plan.changes() })
    }
}

#[async_trait]
impl StoreReads for SqliteStore {
    async fn ping(&self) -> Result<()> {
        self.check_file()?;
        sqlx::query(super::PING_SQL).execute(&self.pool).await?;
        Ok(())
    }
    fn pool_status(&self) -> PoolStatus {
        PoolStatus { size: self.pool.size(), idle: self.pool.num_idle() }
    }
    async fn find(&self, loc: &Loc) -> Result<Option<StoredUrl>> {
        let row: Option<UrlRow> = sqlx::query_as(concat!("SELECT ", url_columns!(), " FROM urls WHERE loc = ?1"))
            .bind(loc.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn list_after(&self, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        let rows: Vec<UrlRow> =
            sqlx::query_as(concat!("SELECT ", url_columns!(), " FROM urls WHERE id > ?1 ORDER BY id LIMIT ?2"))
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
        let row: Option<PageRow> = sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages WHERE id = ?1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn page_entries(&self, id: i64) -> Result<Option<(PageState, EntryStream)>> {
        // In WAL mode a read transaction sees one snapshot from its first read to its end.
        let mut tx = self.pool.begin().await?;
        let row: Option<PageRow> = sqlx::query_as(concat!("SELECT ", page_columns!(), " FROM pages WHERE id = ?1"))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(page) = row.map(PageState::from).filter(|p| p.url_count > 0) else {
            return Ok(None);
        };
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

/// (device, inode) of a file, `None` if it cannot be read (an in-memory database has no file).
#[cfg(unix)]
fn file_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Elsewhere, only whether the file exists.
#[cfg(not(unix))]
fn file_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|_| (0, 0))
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
    std::fs::File::open(dest).and_then(|f| f.sync_all()).with_context(|| format!("cannot sync {}", dest.display()))?;
    tracing::info!(from = %source.display(), to = %dest.display(), "backup written");
    Ok(())
}
