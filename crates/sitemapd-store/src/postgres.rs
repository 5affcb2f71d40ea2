//! The Postgres store. Writers take one transaction-scoped advisory lock, so page accounting never races; the
//! clock is the database's, so every replica stamps changes from one clock.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use super::CheckSettled;
use super::crawls::{self, FetchRecord, PageRead};
use super::health::{self, BrakeMode, BrakeOrder, BrakeState, CheckClaim, CheckResult, Checks};
use super::hreflang::{self, NodeRow, ProblemRow};
use super::outbox::{self, Claim, Settle, Settled};
use super::publish::{self, Held, PublishStatus, PublishedObject};
use super::shared::{Backend, Sql};
use super::websub::{self, HubClaim, HubRow, HubSettle};
use super::write::{self, Upsert, Writes};
use super::{
    DeleteCounts, EntryStream, Pooler, Result, SiteUrl, Store, StoreOptions, UrlRow, Written, distinct, url_columns,
};
use sitemapd_core::domain::{Entry, Loc, Priority, SiteSpec, Sites};
use sitemapd_core::hreflang::Policy;
use sitemapd_core::page::{Limits, PageState, StoredUrl};
use sitemapd_core::placement::{NewUrl, Stamps, UpsertCounts};

/// The target of this module's log lines: the one it had before the crate split (`sitemapd::store::postgres`), so that `RUST_LOG`
/// filters and log processing that name it keep working.
const LOG_TARGET: &str = "sitemapd::store::postgres";

/// A page's entries in page order: an ordered scan of `urls_site_page_id` from the page's first row to its last,
/// O(page) at any depth, no sort (with [`PAGE_PLANNER_SETTINGS`]; a test pins the plan, even on a table without
/// statistics). Equalities, not a row-value range: Postgres 15 stops a btree scan at a row comparison's upper bound
/// only when its first column decides, so `(site_id, page_id, id) < ($1, $2 + 1, 0)` scanned the index from the
/// page to the site's last row. At 100 million URLs that made page 1's cold read 2.6 s against page 2,000's 0.15 s.
/// Excluded records (URL health) are skipped: a filter on the same scan.
pub const PAGE_ENTRIES_SQL: &str = "SELECT loc, lastmod, changefreq, priority, ext FROM urls \
     WHERE site_id = $1 AND page_id = $2 AND NOT excluded ORDER BY site_id, page_id, id";

/// Planner settings for the page's read-only transaction: no bitmap scan, no sort (both would collect the page
/// before the first row goes out).
pub const PAGE_PLANNER_SETTINGS: &str =
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)";

/// The database's clock, and the write transaction's planner settings: no sequential scan. The lookup of a batch's
/// locs (`loc = ANY($1)`, thousands of values) must probe the unique index. Without this, a table that has not been
/// analyzed yet (a first bulk load: autovacuum lags behind) looks empty to the planner, which then scans all of it
/// for every batch, a cost that grows with the table.
pub const WRITE_SETTINGS_AND_NOW: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, \
     set_config('enable_seqscan', 'off', true)";

/// The planner setting of [`WRITE_SETTINGS_AND_NOW`] alone, for a lookup in a transaction of its own.
pub const LOOKUP_SETTINGS: &str = "SELECT set_config('enable_seqscan', 'off', true)";

/// hreflang's probe of a write: the nodes of its locs and of the hrefs they name (a test pins its plan).
pub const HREFLANG_PROBE_SQL: &str = super::hreflang::PG_NODES_SQL;

/// The stored rows of a batch's locs (under [`WRITE_SETTINGS_AND_NOW`]).
pub const LOOKUP_SQL: &str = concat!("SELECT ", url_columns!(), " FROM urls WHERE loc = ANY($1)");

/// The fewest locs whose lookup is shared with a second connection ([`Writes::lookup_shared`]): below that, the
/// statements the second connection adds cost more than they save.
pub const SHARED_LOOKUP: usize = 2_000;

/// [`Writes::lookup`] on `conn` in a read-only transaction of its own, with the write's planner settings.
async fn lookup_in_own_transaction(conn: &mut PgConnection, locs: &[&str]) -> Result<Vec<SiteUrl>> {
    let mut tx = sqlx::Connection::begin(conn).await?;
    sqlx::query(LOOKUP_SETTINGS).execute(&mut *tx).await?;
    let found = <sqlx::Postgres as Writes>::lookup(&mut tx, locs).await?;
    tx.commit().await?;
    Ok(found)
}

/// How often the read replica is probed (`SELECT 1`, within the same time) while it is not in use after a failure.
pub const REPLICA_PROBE: Duration = Duration::from_secs(2);

/// The read replica's state: reads go to it only while it is `enabled` (by `store::open`, once the database is
/// migrated and checked) and `up` (its last read or probe answered).
#[derive(Default)]
struct Replica {
    enabled: AtomicBool,
    up: AtomicBool,
}

const LOCK_TIMEOUT: &str = "5s";
const STATEMENT_TIMEOUT: &str = "5min";

/// The advisory lock key that serializes writers (any constant; "sitemapd" in ASCII, truncated). One for all
/// sites: a write may span sites, and a replica of the version before sites takes the same key.
const WRITE_LOCK: i64 = 0x7369_7465_6d61_7064;

pub struct PgStore {
    pool: PgPool,
    /// A streaming replica's pool ([`StoreOptions::read_url`]), connected lazily: a replica that is down at start
    /// does not keep the service from starting.
    read_pool: Option<PgPool>,
    /// Whether the URLs lead to a transaction-mode pooler ([`StoreOptions::pooler`]).
    pooler: Pooler,
    /// Whether reads go to `read_pool` now; a probe task brings it back after a failure.
    replica: Arc<Replica>,
    /// The layout, as configured; with each site's hreflang policy by id once `migrate` registered the sites.
    base_shape: write::Shape,
    shape: OnceLock<write::Shape>,
    hreflang_names: BTreeMap<String, Policy>,
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

/// Where `connect` reaches the server: `host:port` (`[host]:port` for an IPv6 address), or the Unix socket's path.
fn server_address(connect: &PgConnectOptions) -> String {
    let (host, port) = (connect.get_host(), connect.get_port());
    match connect.get_socket().map(|dir| dir.display().to_string()) {
        Some(dir) => format!("the socket {dir}/.s.PGSQL.{port}"),
        None if host.starts_with('/') => format!("the socket {host}/.s.PGSQL.{port}"),
        None if host.contains(':') => format!("[{host}]:{port}"),
        None => format!("{host}:{port}"),
    }
}

/// The error of a pool that could not open its first connection, naming the server once (host and port). The
/// pool retries until its acquire timeout and then says only that it timed out: one more attempt, as long at
/// most, tells why (refused, no such host, authentication failed).
async fn why_not_connected(e: sqlx::Error, connect: &PgConnectOptions, limit: std::time::Duration) -> anyhow::Error {
    use sqlx::ConnectOptions;
    let e = match e {
        sqlx::Error::PoolTimedOut => match tokio::time::timeout(limit, connect.connect()).await {
            Ok(Err(why)) => why,
            Ok(Ok(_)) | Err(_) => sqlx::Error::PoolTimedOut,
        },
        e => e,
    };
    // Not the database's name: a URL that does not parse as the user meant may carry the password there.
    anyhow::Error::new(e).context(format!("cannot connect to Postgres at {}", server_address(connect)))
}

impl PgStore {
    pub async fn connect(options: &StoreOptions) -> anyhow::Result<Self> {
        // Bounded waits on the server too: a writer waits at most LOCK_TIMEOUT for the write lock (then 503), and
        // no statement runs longer than STATEMENT_TIMEOUT. Through a transaction-mode pooler, the write
        // transaction sets both itself (`begin_write`); see `pooled`.
        let connect = PgConnectOptions::from_str(&options.url).context("invalid Postgres URL")?;
        let connect = match options.pooler {
            Pooler::None => connect.options([("lock_timeout", LOCK_TIMEOUT), ("statement_timeout", STATEMENT_TIMEOUT)]),
            Pooler::Transaction => pooled(connect),
        };
        // After a database restart the pooled connections are dead: each is pinged before it is handed out
        // (sqlx's default, pinned here because recovery without a restart depends on it; a test stops and starts a
        // real server), and idle ones are closed after a while anyway.
        let pool_options = || {
            PgPoolOptions::new()
                .max_connections(options.max_connections)
                .acquire_timeout(options.acquire_timeout)
                .test_before_acquire(true)
                .idle_timeout(std::time::Duration::from_secs(300))
        };
        let pool = match pool_options().connect_with(connect.clone()).await {
            Ok(pool) => pool,
            Err(e) => return Err(why_not_connected(e, &connect, options.acquire_timeout).await),
        };
        let read_pool = match &options.read_url {
            Some(url) => {
                let connect = PgConnectOptions::from_str(url).context("invalid Postgres URL in DATABASE_READ_URL")?;
                let connect = match options.pooler {
                    Pooler::None => connect.options([("statement_timeout", STATEMENT_TIMEOUT)]),
                    Pooler::Transaction => pooled(connect),
                };
                Some(pool_options().connect_lazy_with(connect))
            }
            None => None,
        };
        let replica = Arc::new(Replica::default());
        if let Some(read_pool) = &read_pool {
            probe_replica(read_pool.clone(), Arc::downgrade(&replica));
        }
        Ok(Self {
            pool,
            read_pool,
            pooler: options.pooler,
            replica,
            base_shape: options.shape(),
            shape: OnceLock::new(),
            hreflang_names: options.hreflang.clone(),
            specs: options.sites.clone(),
            sites: OnceLock::new(),
            notify_names: options.notify_sites.clone(),
            check_names: options.check_sites.clone(),
            queues: OnceLock::new(),
            guess: write::Guess::default(),
        })
    }

    /// A store on `pool` serving `sites` as they are given, without `migrate` (which would register them); it
    /// queues no change notification.
    pub fn from_pool(pool: PgPool, limits: Limits, sites: Sites) -> Self {
        let specs = sites.iter().map(|s| SiteSpec { name: s.name.clone(), public_url: s.public_url.clone() }).collect();
        let (notify_names, check_names, queues) = (BTreeSet::new(), BTreeSet::new(), OnceLock::new());
        let sites = OnceLock::from(Arc::new(sites));
        let (guess, base_shape) = (write::Guess::default(), write::Shape::uniform(limits));
        let (shape, hreflang_names) = (OnceLock::new(), BTreeMap::new());
        let replica = Arc::default();
        let pooler = Pooler::None;
        Self {
            pool,
            read_pool: None,
            pooler,
            replica,
            base_shape,
            shape,
            hreflang_names,
            specs,
            sites,
            notify_names,
            check_names,
            queues,
            guess,
        }
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

    /// A write transaction holding the write lock (transaction-scoped: released at its end). Through a
    /// transaction-mode pooler the transaction first sets its own timeouts (`set_config(…, true)`: `SET LOCAL`),
    /// in the same statement: the lock is waited for under `lock_timeout`, as on a direct connection.
    async fn begin_write(&self) -> Result<sqlx::PgTransaction<'static>> {
        let mut tx = self.pool.begin().await?;
        let lock = match self.pooler {
            Pooler::None => sqlx::query("SELECT pg_advisory_xact_lock($1)"),
            Pooler::Transaction => sqlx::query(WRITE_LOCK_WITH_TIMEOUTS).bind(LOCK_TIMEOUT).bind(STATEMENT_TIMEOUT),
        };
        lock.bind(WRITE_LOCK).execute(&mut *tx).await?;
        Ok(tx)
    }

    /// Applies the migrations through a transaction-mode pooler: all in one transaction, under a
    /// transaction-scoped advisory lock on sqlx's own key for this database (its session lock, `pg_advisory_lock`,
    /// would be taken on one server connection and released on another, if at all). So a replica migrating
    /// directly (sqlx's lock) and one through the pooler still migrate one at a time. Each migration runs in a
    /// savepoint, as sqlx runs it in a transaction; the `_sqlx_migrations` table is sqlx's, so either way reads
    /// what the other applied.
    async fn migrate_in_one_transaction(&self) -> anyhow::Result<()> {
        let mut migrator = sqlx::migrate!("../../migrations/postgres");
        migrator.set_locking(false);
        let mut tx = self.pool.begin().await?;
        let (database,): (String,) = sqlx::query_as("SELECT current_database()").fetch_one(&mut *tx).await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(migration_lock_id(&database)).execute(&mut *tx).await?;
        // `run_direct` is what `run` calls once it has a connection; `run(&mut *tx)` itself does not compile in
        // a `Send` future ("implementation of `Acquire` is not general enough", as sqlx's own comment says).
        migrator.run_direct(None, &mut *tx, false).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The write lock with the timeouts a direct connection gets at start ($1 `lock_timeout`, $2
/// `statement_timeout`, $3 the lock's key). `set_config` runs first: the select list is evaluated in order.
const WRITE_LOCK_WITH_TIMEOUTS: &str =
    "SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true), pg_advisory_xact_lock($3)";

/// Connection options for a transaction-mode pooler: no startup parameter PgBouncer refuses (`options`;
/// `extra_float_digits`, which sitemapd does not need: it reads no floating-point column), and no statement
/// cache. Without a cache, the patched sqlx (`vendor/sqlx-postgres`) sends each statement unnamed, parsed, bound
/// and run in one round trip ending in one Sync, so no statement outlives it on the server connection. Every
/// transaction and every statement outside one is then complete in itself, whichever server connection the pooler
/// gives it.
fn pooled(connect: PgConnectOptions) -> PgConnectOptions {
    connect.statement_cache_capacity(0).extra_float_digits(None)
}

/// sqlx's advisory lock key for migrating `database` (`sqlx-postgres`' `generate_lock_id`, not public).
fn migration_lock_id(database: &str) -> i64 {
    0x3d32_ad9e * i64::from(crc32fast::hash(database.as_bytes()))
}

/// Whether a failed read on `replica` says it is down, rather than busy (its pool full: connections open) or a
/// query cancelled (a conflict with recovery on a hot standby, a statement timeout), which another read on it
/// may well not meet.
fn replica_is_down(error: &super::StoreError, replica: &PgPool) -> bool {
    let super::StoreError::Unavailable(e) = error else { return false };
    match e {
        sqlx::Error::PoolTimedOut => replica.size() == 0,
        sqlx::Error::Database(db) => !matches!(db.code().as_deref(), Some("40001" | "57014")),
        _ => true,
    }
}

/// Probes `pool` every [`REPLICA_PROBE`] while the replica is marked down, and marks it up when it answers. Ends
/// when the store is dropped or its replica pool closed.
fn probe_replica(pool: PgPool, replica: std::sync::Weak<Replica>) {
    tokio::spawn(async move {
        loop {
            let Some(state) = replica.upgrade() else { return };
            if pool.is_closed() {
                return;
            }
            if !state.up.load(Ordering::Relaxed) {
                let probe = tokio::time::timeout(REPLICA_PROBE, sqlx::query("SELECT 1").execute(&pool)).await;
                if matches!(probe, Ok(Ok(_))) {
                    state.up.store(true, Ordering::Relaxed);
                    tracing::info!(target: LOG_TARGET, "the read replica (DATABASE_READ_URL) answers: reads go to it");
                }
            }
            drop(state);
            tokio::time::sleep(REPLICA_PROBE).await;
        }
    });
}

/// Each batch bound as arrays: one statement for it.
impl Writes for sqlx::Postgres {
    async fn now(conn: &mut PgConnection) -> Result<i64> {
        let (now, _): (i64, String) = sqlx::query_as(WRITE_SETTINGS_AND_NOW).fetch_one(conn).await?;
        Ok(now)
    }

    async fn lookup(conn: &mut PgConnection, locs: &[&str]) -> Result<Vec<SiteUrl>> {
        let rows: Vec<UrlRow> = sqlx::query_as(LOOKUP_SQL).bind(locs).fetch_all(conn).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// A batch of [`SHARED_LOOKUP`] locs or more is looked up in two halves at once, the second on an idle
    /// connection of the primary's pool (never the read replica's: it may lag), when one is idle. The lookup is an
    /// index search per loc, which keeps one backend busy: so two use the database's cores while the write lock
    /// is held, and an identical re-send, which is all lookup, takes about half as long. If the second half fails
    /// there (a connection that died idle), it is looked up again in the transaction.
    async fn lookup_shared(conn: &mut PgConnection, pool: Option<&PgPool>, locs: &[&str]) -> Result<Vec<SiteUrl>> {
        let idle = pool.filter(|_| locs.len() >= SHARED_LOOKUP).and_then(PgPool::try_acquire);
        let Some(mut other) = idle else { return Self::lookup(conn, locs).await };
        let (mine, theirs) = locs.split_at(locs.len() / 2);
        let (found, helped) = tokio::join!(Self::lookup(conn, mine), lookup_in_own_transaction(&mut other, theirs));
        let mut found = found?;
        match helped {
            Ok(rows) => {
                sitemapd_metrics::write_lookup_shared("shared");
                found.extend(rows);
            }
            Err(e) => {
                sitemapd_metrics::write_lookup_shared("retried");
                tracing::debug!(target: LOG_TARGET, error = %e, "half a lookup failed on a second connection: looked up in the write");
                found.extend(Self::lookup(conn, theirs).await?);
            }
        }
        Ok(found)
    }

    async fn write_pages(conn: &mut PgConnection, site: i64, pages: &[PageState]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let col = |f: fn(&PageState) -> i64| pages.iter().map(f).collect::<Vec<_>>();
        sqlx::query(
            "INSERT INTO pages (site_id, id, url_count, byte_size, version, modified_us, image_urls, video_urls, \
                                xhtml_urls, gzip) \
             SELECT $9, * FROM UNNEST($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], \
                                      $6::bigint[], $7::bigint[], $8::bigint[], $10::int[]) \
             ON CONFLICT (site_id, id) DO UPDATE SET url_count = excluded.url_count, byte_size = excluded.byte_size, \
             version = excluded.version, modified_us = excluded.modified_us, image_urls = excluded.image_urls, \
             video_urls = excluded.video_urls, xhtml_urls = excluded.xhtml_urls, gzip = excluded.gzip",
        )
        .bind(col(|p| p.id))
        .bind(col(|p| p.url_count))
        .bind(col(|p| p.byte_size))
        .bind(col(|p| p.version))
        .bind(col(|p| p.modified_us))
        .bind(col(|p| p.ns.image))
        .bind(col(|p| p.ns.video))
        .bind(col(|p| p.ns.xhtml))
        .bind(site)
        .bind(pages.iter().map(|p| p.gzip.code()).collect::<Vec<_>>())
        .execute(conn)
        .await?;
        Ok(())
    }

    async fn write_urls(
        conn: &mut PgConnection,
        site: i64,
        updates: &[StoredUrl],
        inserts: &[NewUrl],
        stamps: &Stamps,
    ) -> Result<()> {
        if !updates.is_empty() {
            let u = updates;
            sqlx::query(
                "UPDATE urls SET page_id = u.page_id, lastmod = u.lastmod, changefreq = u.changefreq, \
                 priority = u.priority, size = u.size, ext = u.ext, news_us = u.news_us, news = u.news, \
                 changed_us = COALESCE(u.changed_us, urls.changed_us) \
                 FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], \
                             $7::text[], $8::bigint[], $9::text[], $10::bigint[]) \
                 AS u (id, page_id, lastmod, changefreq, priority, size, ext, news_us, news, changed_us) \
                 WHERE urls.id = u.id",
            )
            .bind(u.iter().map(|x| x.id).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.page_id).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.lastmod.as_deref()).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.changefreq.as_deref()).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.priority.map(Priority::millionths)).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.size).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.ext_json()).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.news_us()).collect::<Vec<_>>())
            .bind(u.iter().map(|x| x.fields.news_json()).collect::<Vec<_>>())
            .bind(u.iter().map(|x| stamps.of_update(x)).collect::<Vec<_>>())
            .execute(&mut *conn)
            .await?;
        }
        if !inserts.is_empty() {
            let n = inserts;
            // Ids are assigned in plan order, so page order is request order: `unnest` in the select list (a
            // ProjectSet node, with nothing to scan, join or sort) yields the arrays' rows in order, and each row
            // takes its id as it is inserted. `FROM UNNEST(..) WITH ORDINALITY .. ORDER BY ord` gives the same
            // order, but stores the rows in a tuplestore and sorts them first: about a tenth of the statement.
            sqlx::query(
                "INSERT INTO urls (site_id, loc, page_id, lastmod, changefreq, priority, size, ext, news_us, news, \
                                   changed_us) \
                 SELECT $10, unnest($1::text[]), unnest($2::bigint[]), unnest($3::text[]), unnest($4::text[]), \
                        unnest($5::bigint[]), unnest($6::bigint[]), unnest($7::text[]), unnest($8::bigint[]), \
                        unnest($9::text[]), unnest($11::bigint[])",
            )
            .bind(n.iter().map(|x| x.loc.as_str()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.page_id).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.lastmod.as_deref()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.changefreq.as_deref()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.priority.map(Priority::millionths)).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.size).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.ext_json()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.news_us()).collect::<Vec<_>>())
            .bind(n.iter().map(|x| x.fields.news_json()).collect::<Vec<_>>())
            .bind(site)
            .bind(n.iter().map(|x| stamps.of_insert(x)).collect::<Vec<_>>())
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    async fn delete_ids(conn: &mut PgConnection, ids: &[i64]) -> Result<()> {
        sqlx::query("DELETE FROM urls WHERE id = ANY($1)").bind(ids).execute(conn).await?;
        Ok(())
    }

    async fn add_removed(
        conn: &mut PgConnection,
        site: i64,
        locs: &[&str],
        sections: &[i64],
        now_us: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO removed (site_id, loc, removed_us, section_id) SELECT $1, loc, $3, section_id \
             FROM UNNEST($2::text[], $4::bigint[]) AS t (loc, section_id) \
             ON CONFLICT (site_id, loc) DO UPDATE SET removed_us = excluded.removed_us, section_id = excluded.section_id",
        )
        .bind(site)
        .bind(locs)
        .bind(now_us)
        .bind(sections)
        .execute(conn)
        .await?;
        Ok(())
    }

    async fn forget_removed(conn: &mut PgConnection, site: i64, locs: &[&str]) -> Result<u64> {
        let done = sqlx::query("DELETE FROM removed WHERE site_id = $1 AND loc = ANY($2)")
            .bind(site)
            .bind(locs)
            .execute(conn)
            .await?;
        Ok(done.rows_affected())
    }

    async fn enqueue_notifications(conn: &mut PgConnection, site: i64, locs: &[&str]) -> Result<()> {
        outbox::pg_enqueue(conn, site, locs).await
    }

    async fn enqueue_checks(conn: &mut PgConnection, site: i64, locs: &[&str], now_us: i64) -> Result<()> {
        sqlx::query(health::PG_ENQUEUE_SQL).bind(site).bind(locs).bind(now_us).execute(conn).await?;
        Ok(())
    }

    async fn recheck(conn: &mut PgConnection, site: i64, locs: &[&str], now_us: i64) -> Result<()> {
        let (any,): (i64,) = sqlx::query_as(health::ANY_PROBLEM_SQL).bind(site).fetch_one(&mut *conn).await?;
        if any == 0 {
            return Ok(());
        }
        sqlx::query(health::PG_RECHECK_SQL).bind(site).bind(locs).bind(now_us).execute(conn).await?;
        Ok(())
    }

    async fn drop_checks(conn: &mut PgConnection, site: i64, locs: &[&str]) -> Result<()> {
        sqlx::query(health::PG_DROP_SQL).bind(site).bind(locs).execute(conn).await?;
        Ok(())
    }

    async fn seed_checks(conn: &mut PgConnection, site: i64, walked: &[(i64, String)], now_us: i64) -> Result<()> {
        let locs: Vec<&str> = walked.iter().map(|(_, loc)| loc.as_str()).collect();
        let ids: Vec<i64> = walked.iter().map(|(id, _)| *id).collect();
        sqlx::query(health::PG_SEED_SQL).bind(site).bind(locs).bind(ids).bind(now_us).execute(conn).await?;
        Ok(())
    }

    const CLAIM_CHECKS_SQL: &'static str = health::PG_CLAIM_SQL;

    async fn hreflang_nodes(conn: &mut PgConnection, hrefs: &[&str]) -> Result<Vec<NodeRow>> {
        Ok(sqlx::query_as(hreflang::PG_NODES_SQL).bind(hrefs).fetch_all(conn).await?)
    }

    async fn hreflang_cluster_nodes(conn: &mut PgConnection, keys: &[&str]) -> Result<Vec<NodeRow>> {
        Ok(sqlx::query_as(hreflang::PG_CLUSTER_NODES_SQL).bind(keys).fetch_all(conn).await?)
    }

    async fn hreflang_cluster_problems(conn: &mut PgConnection, keys: &[&str]) -> Result<Vec<ProblemRow>> {
        Ok(sqlx::query_as(hreflang::PG_CLUSTER_PROBLEMS_SQL).bind(keys).fetch_all(conn).await?)
    }

    async fn hreflang_put_nodes(conn: &mut PgConnection, rows: &[NodeRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let hrefs: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let clusters: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
        let sites: Vec<Option<i64>> = rows.iter().map(|r| r.2).collect();
        let declared: Vec<Option<&str>> = rows.iter().map(|r| r.3.as_deref()).collect();
        sqlx::query(hreflang::PG_PUT_NODES_SQL)
            .bind(hrefs)
            .bind(clusters)
            .bind(sites)
            .bind(declared)
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn hreflang_drop_nodes(conn: &mut PgConnection, hrefs: &[&str]) -> Result<()> {
        if hrefs.is_empty() {
            return Ok(());
        }
        sqlx::query(hreflang::PG_DROP_NODES_SQL).bind(hrefs).execute(conn).await?;
        Ok(())
    }

    async fn hreflang_put_problems(conn: &mut PgConnection, rows: &[ProblemRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let column = |f: fn(&ProblemRow) -> &str| rows.iter().map(f).collect::<Vec<&str>>();
        let sites: Vec<i64> = rows.iter().map(|r| r.0).collect();
        sqlx::query(hreflang::PG_PUT_PROBLEMS_SQL)
            .bind(sites)
            .bind(column(|r| &r.1))
            .bind(column(|r| &r.2))
            .bind(column(|r| &r.3))
            .bind(column(|r| &r.4))
            .bind(column(|r| &r.5))
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn hreflang_drop_problems(conn: &mut PgConnection, rows: &[ProblemRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let column = |f: fn(&ProblemRow) -> &str| rows.iter().map(f).collect::<Vec<&str>>();
        let sites: Vec<i64> = rows.iter().map(|r| r.0).collect();
        sqlx::query(hreflang::PG_DROP_PROBLEMS_SQL)
            .bind(sites)
            .bind(column(|r| &r.1))
            .bind(column(|r| &r.2))
            .bind(column(|r| &r.3))
            .execute(conn)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Store for PgStore {
    async fn migrate(&self) -> anyhow::Result<()> {
        match self.pooler {
            Pooler::None => sqlx::migrate!("../../migrations/postgres").run(&self.pool).await?,
            Pooler::Transaction => self.migrate_in_one_transaction().await?,
        }
        // Under the write lock, so that replicas starting together repair once.
        write::repair(self.begin_write().await?, self.shape().limits).await?;
        let sites = sqlx::Postgres::register_sites(&self.pool, &self.specs).await?;
        super::warn_unserved(sqlx::Postgres::stored_sites(&self.pool).await?, &sites);
        let notify = super::site_ids(&sites, &self.notify_names);
        let _ = self.queues.set(write::Queues { notify, check: super::site_ids(&sites, &self.check_names) });
        let hreflang = super::policies(&sites, &self.hreflang_names);
        let _ = self.shape.set(write::Shape { hreflang, ..self.base_shape.clone() });
        let sites = Arc::new(sites);
        let _ = self.sites.set(sites.clone());
        // Each batch of the hreflang build or re-render under the write lock, so that replicas starting together
        // share the work (what one did, the other finds done).
        hreflang::open_tasks(|| self.begin_write(), &sites, self.shape()).await?;
        Ok(())
    }

    fn read_from_replica(&self) {
        self.replica.enabled.store(true, Ordering::Relaxed);
    }

    async fn close(&self) {
        let read_pool = async {
            if let Some(pool) = &self.read_pool {
                pool.close().await;
            }
        };
        let both = futures_util::future::join(self.pool.close(), read_pool);
        if tokio::time::timeout(super::CLOSE_TIMEOUT, both).await.is_err() {
            tracing::warn!(target: LOG_TARGET, "connections still in use after {:?}; exiting without them", super::CLOSE_TIMEOUT);
        }
    }

    async fn upsert_with(&self, entries: &[Entry], mode: Upsert) -> Result<Written<UpsertCounts>> {
        if entries.is_empty() {
            return Ok(Written::default());
        }
        let sites = Backend::sites(self);
        let begin = || self.begin_write();
        // Not through a transaction-mode pooler: an idle connection of this pool is not an idle server
        // connection there. While writers queue for the write lock, each holds one of the pooler's server
        // connections; the lock holder's second half would wait for one behind them, until they time out.
        let pool = Some(&self.pool).filter(|_| self.pooler == Pooler::None);
        write::upsert_guessing(&self.guess, begin, &sites, entries, (mode, self.shape()), self.queues(), pool).await
    }

    async fn delete(&self, locs: &[Loc]) -> Result<Written<DeleteCounts>> {
        let locs = distinct(locs);
        if locs.is_empty() {
            return Ok(Written::default());
        }
        write::delete(self.begin_write().await?, &Backend::sites(self), &locs, self.queues(), self.shape()).await
    }
}

#[async_trait]
impl Backend for PgStore {
    type Db = sqlx::Postgres;

    fn pool(&self) -> &PgPool {
        &self.pool
    }
    fn read_pool(&self) -> &PgPool {
        match &self.read_pool {
            Some(replica)
                if self.replica.enabled.load(Ordering::Relaxed) && self.replica.up.load(Ordering::Relaxed) =>
            {
                replica
            }
            _ => &self.pool,
        }
    }

    fn replica_pool(&self) -> Option<&PgPool> {
        self.read_pool.as_ref()
    }

    fn read_failed(&self, error: &super::StoreError) {
        let Some(replica) = &self.read_pool else { return };
        if replica_is_down(error, replica) && self.replica.up.swap(false, Ordering::Relaxed) {
            tracing::warn!(target: LOG_TARGET,
                error = %error,
                "a read on the replica (DATABASE_READ_URL) failed: reading from the primary until it answers again"
            );
            sitemapd_metrics::replica_rested();
        }
    }

    fn sites(&self) -> Arc<Sites> {
        self.sites.get().cloned().unwrap_or_else(|| super::unregistered(&self.specs))
    }

    async fn snapshot(&self) -> Result<sqlx::PgTransaction<'static>> {
        Ok(self.read_pool().begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?)
    }

    async fn primary_snapshot(&self) -> Result<sqlx::PgTransaction<'static>> {
        Ok(self.pool().begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?)
    }

    async fn page_entries(&self, site: i64, id: i64) -> Result<Option<(PageState, EntryStream)>> {
        // One snapshot for the page's state and its rows, so the body always matches the ETag sent before it.
        let mut tx = self.snapshot().await?;
        let Some(page) = sqlx::Postgres::nonempty_page_in(&mut tx, site, id).await? else {
            return Ok(None);
        };
        sqlx::query(PAGE_PLANNER_SETTINGS).execute(&mut *tx).await?;
        Ok(Some((page, sqlx::Postgres::entries(tx, PAGE_ENTRIES_SQL, site, id))))
    }

    async fn page_urls(&self, site: i64, page_id: i64, after: i64, limit: u32) -> Result<Vec<StoredUrl>> {
        // The settings are scoped to this transaction (`set_config(…, true)`).
        let mut tx = self.read_pool().begin_with("BEGIN READ ONLY").await?;
        sqlx::query(PAGE_PLANNER_SETTINGS).execute(&mut *tx).await?;
        let urls = sqlx::Postgres::page_urls(&mut tx, site, page_id, after, limit).await?;
        tx.commit().await?;
        Ok(urls)
    }

    async fn record_crawls(&self, fetches: &[FetchRecord], reads: &[PageRead]) -> Result<Vec<PageRead>> {
        if fetches.is_empty() && reads.is_empty() {
            return Ok(Vec::new());
        }
        crawls::check(&Backend::sites(self), fetches, reads)?;
        // Not under the write lock: a flush touches no page, so it neither waits for a write nor holds one up.
        crawls::pg_record(&self.pool, &crawls::merged_fetches(fetches), &crawls::merged_reads(reads)).await
    }

    async fn purge_crawls(&self, before_us: i64) -> Result<u64> {
        crawls::pg_purge(&self.pool, before_us).await
    }

    async fn purge_removed(&self, limit: u32) -> Result<u64> {
        if self.shape().removed_days == 0 {
            return Ok(0);
        }
        write::purge_removed(self.begin_write().await?, &Backend::sites(self), self.shape().removed_days, limit).await
    }

    async fn claim_notifications(&self, site: i64, limit: u32, lease: Duration) -> Result<Option<Claim>> {
        outbox::pg_claim(&self.pool, site, limit, lease).await
    }

    async fn settle_notifications(&self, claim: &Claim, settle: Settle) -> Result<Settled> {
        outbox::pg_settle(&self.pool, claim, settle).await
    }

    async fn hub_rows(&self, site: i64) -> Result<Vec<HubRow>> {
        websub::pg_rows(&self.pool, site).await
    }

    async fn hub_claim(
        &self,
        site: i64,
        feed: &str,
        hub: &str,
        digest: &str,
        lease: Duration,
    ) -> Result<Option<HubClaim>> {
        websub::pg_claim(&self.pool, site, feed, hub, digest, lease).await
    }

    async fn hub_settle(&self, claim: &HubClaim, settle: HubSettle) -> Result<bool> {
        websub::pg_settle(&self.pool, claim, settle).await
    }

    async fn publish_claim(&self, site: i64, target: &str, lease: Duration) -> Result<Option<i64>> {
        publish::pg_claim(&self.pool, site, target, lease).await
    }

    async fn publish_write(&self, target: &str, claim: i64, write: Held<'_>) -> Result<bool> {
        publish::pg_write(&self.pool, target, claim, write).await
    }

    async fn published_objects(&self, target: &str) -> Result<Vec<PublishedObject>> {
        publish::pg_objects(&self.pool, target).await
    }

    async fn publish_status(&self, site: Option<i64>) -> Result<Vec<PublishStatus>> {
        publish::pg_status(&self.pool, site).await
    }

    async fn health_seed(&self, site: i64, limit: u32) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let walked = sqlx::Postgres::seed(&mut tx, site, limit).await?;
        tx.commit().await?;
        Ok(walked)
    }

    async fn health_claim(&self, site: i64, limit: u32, lease: Duration) -> Result<Vec<CheckClaim>> {
        let mut tx = self.pool.begin().await?;
        let claims = sqlx::Postgres::claim(&mut tx, site, limit, lease).await?;
        tx.commit().await?;
        Ok(claims)
    }

    async fn health_settle(&self, site: i64, result: &CheckResult, exclude: bool) -> Result<Written<CheckSettled>> {
        // The write lock only when the settle may exclude or restore the record (a change of its page).
        // The brake's state and window are read and changed under it too: when the site's brake is not plain
        // running, every definite settle may lift it.
        let flip = exclude && result.finding.is_definite() && {
            let mut conn = self.pool.acquire().await?;
            let record = sqlx::Postgres::record(&mut conn, site, &result.loc).await?;
            record.is_some_and(|(_, _, excluded, _)| excluded == result.finding.problems.is_empty())
                || sqlx::Postgres::brake_of(&mut conn, site).await?.is_some_and(|b| b.mode != BrakeMode::Running)
        };
        let mut tx = if flip { self.begin_write().await? } else { self.pool.begin().await? };
        let settled = sqlx::Postgres::settle(&mut tx, site, result, exclude, flip).await?;
        tx.commit().await?;
        Ok(settled)
    }

    async fn health_restore(&self, site: i64) -> Result<Written<u64>> {
        let mut tx = self.begin_write().await?;
        let restored = sqlx::Postgres::restore(&mut tx, site).await?;
        tx.commit().await?;
        Ok(restored)
    }

    async fn health_brake_order(&self, site: i64, order: BrakeOrder) -> Result<Option<BrakeState>> {
        let mut tx = self.begin_write().await?;
        let state = sqlx::Postgres::order_brake(&mut tx, site, order).await?;
        tx.commit().await?;
        Ok(state)
    }

    async fn health_host_slot(&self, host: &str, gap: Duration, hold: Duration) -> Result<Duration> {
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        let (wait,): (i64,) = sqlx::query_as(health::PG_HOST_SLOT_SQL)
            .bind(host)
            .bind(micros(gap))
            .bind(micros(hold))
            .fetch_one(&self.pool)
            .await?;
        Ok(Duration::from_micros(u64::try_from(wait).unwrap_or(0)))
    }
}

#[cfg(test)]
mod pooled_tests {
    /// The key sqlx's migrator locks for a database named `test` (its `generate_lock_id`: CRC-32/ISO-HDLC of the
    /// name times 0x3d32ad9e), computed by hand: the two must agree, or a direct and a pooled replica could
    /// migrate at once.
    #[test]
    fn the_migration_lock_is_sqlx_own_key() {
        assert_eq!(super::migration_lock_id("test"), 0x3d32_ad9e * 0xd87f_7e0c_i64);
    }
}
