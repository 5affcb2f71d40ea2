//! What both backends run alike: the queries whose SQL is the same text for both (SQLite takes Postgres's
//! numbered `$N` parameters), written once over sqlx's [`Database`], and the read half of the store on top of them.
//!
//! What differs stays in the backend, behind [`Backend`]: how a snapshot of a page is read, and the file check
//! of SQLite's readiness probe.

use async_trait::async_trait;
use futures_util::TryStreamExt;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Transaction, Type};

use super::{
    EntryStream, NewsRead, PageEntry, PageRow, PoolStatus, Result, StoreReads, UrlRow, page_columns, url_columns,
};
use crate::domain::Loc;
use crate::page::{PageState, StoredUrl};
use crate::placement;

const FIND_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls WHERE loc = $1");
const LIST_AFTER_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls WHERE id > $1 ORDER BY id LIMIT $2");
/// Every record in id order (the repair's scan).
const URLS_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls ORDER BY id");
const PAGES_SQL: &str = concat!("SELECT ", page_columns!(), " FROM pages ORDER BY id");
const PAGE_SQL: &str = concat!("SELECT ", page_columns!(), " FROM pages WHERE id = $1");
/// The news window, newest first, through `urls_news_us` (a backward scan).
pub const NEWS_SQL: &str =
    "SELECT loc, news, news_us FROM urls WHERE news_us >= $1 AND news_us <= $2 ORDER BY news_us DESC, id DESC LIMIT $3";
const NEWS_STATE_SQL: &str = "SELECT modified_us FROM news_state WHERE id = 1";
/// The newest publication date before the window, through the same index.
pub const NEWS_BEFORE_SQL: &str = "SELECT news_us FROM urls WHERE news_us < $1 ORDER BY news_us DESC LIMIT 1";
const TASK_PENDING_SQL: &str = "SELECT name FROM upgrade_tasks WHERE name = $1";
const TASK_DONE_SQL: &str = "DELETE FROM upgrade_tasks WHERE name = $1";
/// The news sitemap's change stamp moves to `now`, and at least a millisecond on (as a page's does).
const TOUCH_NEWS_SQL: &str = "UPDATE news_state SET modified_us = \
     CASE WHEN $1 > modified_us + 1000 THEN $1 ELSE modified_us + 1000 END WHERE id = 1";
const REPAIR_URL_SQL: &str = "UPDATE urls SET loc = $2, page_id = $3, size = $4 WHERE id = $1";

/// A backend's database with the queries both backends share. Implemented for every sqlx database that can run
/// them (both of ours), so that sqlx's bounds are written once, on that implementation.
pub(crate) trait Sql: Database {
    /// The readiness probe's query ([`super::PING_SQL`]).
    fn ping(pool: &Pool<Self>) -> impl Future<Output = Result<()>> + Send;
    fn find(pool: &Pool<Self>, loc: &str) -> impl Future<Output = Result<Option<StoredUrl>>> + Send;
    /// Records in id order after the record with id `after` (keyset paging).
    fn list_after(pool: &Pool<Self>, after: i64, limit: u32) -> impl Future<Output = Result<Vec<StoredUrl>>> + Send;
    /// The whole page table, in page order.
    fn pages(pool: &Pool<Self>) -> impl Future<Output = Result<Vec<PageState>>> + Send;
    fn page(pool: &Pool<Self>, id: i64) -> impl Future<Output = Result<Option<PageState>>> + Send;
    /// The whole page table, in page order, inside a transaction.
    fn pages_in(conn: &mut Self::Connection) -> impl Future<Output = Result<Vec<PageState>>> + Send;
    /// A non-empty page's state, inside a transaction (the snapshot its entries are then read from).
    fn nonempty_page_in(conn: &mut Self::Connection, id: i64)
    -> impl Future<Output = Result<Option<PageState>>> + Send;
    /// The rows `sql` (a page's entries in page order, `$1` or `?1` its id) reads in `tx`, streamed; the stream
    /// holds `tx`, and with it the snapshot, until it ends.
    fn entries(tx: Transaction<'static, Self>, sql: &'static str, id: i64) -> EntryStream;
    /// The news sitemap's rows ([`StoreReads::news`]), read in `tx` (one snapshot).
    fn news_in(
        tx: Transaction<'static, Self>,
        since_us: i64,
        until_us: i64,
        limit: u32,
    ) -> impl Future<Output = Result<NewsRead>> + Send;
    /// Whether the one-time upgrade task `name` is still to be done.
    fn task_pending(conn: &mut Self::Connection, name: &str) -> impl Future<Output = Result<bool>> + Send;
    fn task_done(conn: &mut Self::Connection, name: &str) -> impl Future<Output = Result<()>> + Send;
    /// Every stored record that is not what this version would store, with the loc it should have
    /// ([`placement::recount`]), in id order; streamed, so only those records are held.
    fn stale_urls(conn: &mut Self::Connection) -> impl Future<Output = Result<Vec<(StoredUrl, String)>>> + Send;
    /// Records that an entry with news changed, at `now_us` ([`TOUCH_NEWS_SQL`]).
    fn touch_news(conn: &mut Self::Connection, now_us: i64) -> impl Future<Output = Result<()>> + Send;
    /// Writes a repaired record's loc, page and size.
    fn repair_url(conn: &mut Self::Connection, url: &placement::RepairedUrl)
    -> impl Future<Output = Result<()>> + Send;
    /// Queued change notifications per site ([`StoreReads::outbox_size`]).
    fn outbox_size(pool: &Pool<Self>) -> impl Future<Output = Result<Vec<(i64, i64)>>> + Send;
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
    (String, Option<String>, i64): for<'r> FromRow<'r, DB::Row>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    async fn ping(pool: &Pool<Self>) -> Result<()> {
        sqlx::query(super::PING_SQL).execute(pool).await?;
        Ok(())
    }

    async fn find(pool: &Pool<Self>, loc: &str) -> Result<Option<StoredUrl>> {
        let row: Option<UrlRow> = sqlx::query_as(FIND_SQL).bind(loc).fetch_optional(pool).await?;
        Ok(row.map(Into::into))
    }

    async fn list_after(pool: &Pool<Self>, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        // Streamed and cut at LIST_MAX_BYTES: with extensions a record can render to megabytes.
        let mut rows = sqlx::query_as::<_, UrlRow>(LIST_AFTER_SQL).bind(after).bind(i64::from(limit)).fetch(pool);
        let (mut out, mut bytes) = (Vec::new(), 0);
        while let Some(row) = rows.try_next().await? {
            let url = StoredUrl::from(row);
            bytes += url.size;
            out.push(url);
            if bytes > super::LIST_MAX_BYTES {
                break;
            }
        }
        Ok(out)
    }

    async fn pages(pool: &Pool<Self>) -> Result<Vec<PageState>> {
        let rows: Vec<PageRow> = sqlx::query_as(PAGES_SQL).fetch_all(pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn page(pool: &Pool<Self>, id: i64) -> Result<Option<PageState>> {
        let row: Option<PageRow> = sqlx::query_as(PAGE_SQL).bind(id).fetch_optional(pool).await?;
        Ok(row.map(Into::into))
    }

    async fn pages_in(conn: &mut Self::Connection) -> Result<Vec<PageState>> {
        let rows: Vec<PageRow> = sqlx::query_as(PAGES_SQL).fetch_all(conn).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn nonempty_page_in(conn: &mut Self::Connection, id: i64) -> Result<Option<PageState>> {
        let row: Option<PageRow> = sqlx::query_as(PAGE_SQL).bind(id).fetch_optional(conn).await?;
        Ok(row.map(PageState::from).filter(|p| p.url_count > 0))
    }

    fn entries(tx: Transaction<'static, Self>, sql: &'static str, id: i64) -> EntryStream {
        let stream = async_stream::try_stream! {
            let mut tx = tx;
            let mut rows = sqlx::query_as::<_, PageEntry>(sql).bind(id).fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                yield row;
            }
        };
        Box::pin(stream)
    }

    async fn news_in(mut tx: Transaction<'static, Self>, since_us: i64, until_us: i64, limit: u32) -> Result<NewsRead> {
        let rows: Vec<(String, Option<String>, i64)> =
            sqlx::query_as(NEWS_SQL).bind(since_us).bind(until_us).bind(i64::from(limit)).fetch_all(&mut *tx).await?;
        let (changed_us,): (i64,) = sqlx::query_as(NEWS_STATE_SQL).fetch_one(&mut *tx).await?;
        let before: Option<(i64,)> = sqlx::query_as(NEWS_BEFORE_SQL).bind(since_us).fetch_optional(&mut *tx).await?;
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

    async fn task_pending(conn: &mut Self::Connection, name: &str) -> Result<bool> {
        let pending: Option<String> = sqlx::query_scalar(TASK_PENDING_SQL).bind(name).fetch_optional(conn).await?;
        Ok(pending.is_some())
    }

    async fn task_done(conn: &mut Self::Connection, name: &str) -> Result<()> {
        sqlx::query(TASK_DONE_SQL).bind(name).execute(conn).await?;
        Ok(())
    }

    async fn stale_urls(conn: &mut Self::Connection) -> Result<Vec<(StoredUrl, String)>> {
        let mut stale = Vec::new();
        let mut rows = sqlx::query_as::<_, UrlRow>(URLS_SQL).fetch(conn);
        while let Some(row) = rows.try_next().await? {
            let url = StoredUrl::from(row);
            if let Some(loc) = placement::recount(&url) {
                stale.push((url, loc));
            }
        }
        Ok(stale)
    }

    async fn touch_news(conn: &mut Self::Connection, now_us: i64) -> Result<()> {
        sqlx::query(TOUCH_NEWS_SQL).bind(now_us).execute(conn).await?;
        Ok(())
    }

    async fn repair_url(conn: &mut Self::Connection, u: &placement::RepairedUrl) -> Result<()> {
        sqlx::query(REPAIR_URL_SQL).bind(u.id).bind(u.loc.as_str()).bind(u.page_id).bind(u.size).execute(conn).await?;
        Ok(())
    }

    async fn outbox_size(pool: &Pool<Self>) -> Result<Vec<(i64, i64)>> {
        Ok(sqlx::query_as(super::outbox::SIZE_SQL).fetch_all(pool).await?)
    }
}

/// A backend's side of the read half: its pool, and the reads that differ.
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
    type Db: Sql;
    fn pool(&self) -> &Pool<Self::Db>;
    /// Checked before the readiness probe's query (SQLite: the database file is still the one opened).
    fn check_file(&self) -> Result<()> {
        Ok(())
    }
    /// A non-empty page's state and its entries, read from one snapshot: each backend takes and reads it its way.
    async fn page_entries(&self, id: i64) -> Result<Option<(PageState, EntryStream)>>;
    /// A read-only transaction whose reads all see one snapshot (SQLite's read transactions do; Postgres needs
    /// `REPEATABLE READ`).
    async fn snapshot(&self) -> Result<Transaction<'static, Self::Db>> {
        Ok(self.pool().begin().await?)
    }
}

#[async_trait]
impl<B: Backend> StoreReads for B {
    async fn ping(&self) -> Result<()> {
        self.check_file()?;
        B::Db::ping(self.pool()).await
    }
    fn pool_status(&self) -> PoolStatus {
        PoolStatus { size: self.pool().size(), idle: self.pool().num_idle() }
    }
    async fn find(&self, loc: &Loc) -> Result<Option<StoredUrl>> {
        B::Db::find(self.pool(), loc.as_str()).await
    }
    async fn list_after(&self, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        B::Db::list_after(self.pool(), after, limit).await
    }
    async fn pages(&self) -> Result<Vec<PageState>> {
        B::Db::pages(self.pool()).await
    }
    async fn page(&self, id: i64) -> Result<Option<PageState>> {
        B::Db::page(self.pool(), id).await
    }
    async fn page_entries(&self, id: i64) -> Result<Option<(PageState, EntryStream)>> {
        Backend::page_entries(self, id).await
    }
    async fn news(&self, since_us: i64, until_us: i64, limit: u32) -> Result<NewsRead> {
        B::Db::news_in(self.snapshot().await?, since_us, until_us, limit).await
    }
    async fn outbox_size(&self) -> Result<Vec<(i64, i64)>> {
        B::Db::outbox_size(self.pool()).await
    }
}
