//! WebSub's delivery rows (`websub`, migration 0017): what each hub was last told of each feed.
//!
//! Nothing is queued by the write path: a feed is owed to a hub while its current digest differs from the one
//! the hub last accepted, so what is owed is recomputed from the feed after any crash. The publisher
//! (`sitemapd-server`'s `websub`) reads a site's rows ([`HubRow`]), and for an owed feed whose row is due claims it
//! ([`HubClaim`]), posts, then settles the claim ([`HubSettle`]):
//!
//! - Claiming is one conditional upsert: the row (added the first time) is taken only when it is due (no other
//!   claim's lease, no debounce interval or retry delay still running) and its delivered digest is not the one to
//!   deliver. It sets `due_us` to the end of a lease and names the claim, so another publisher (a replica on one
//!   Postgres) finds it not due: of two that try at once, one updates the row and the other, which waits for that
//!   row's lock, then finds it claimed. A publisher that dies with a claim leaves a row whose lease runs out.
//! - Settling changes the row only while the claim still holds it: a delivery records the digest and makes the row
//!   due after the debounce interval; a failure counts an attempt and makes it due after the retry delay.
//!
//! The time is the database's in Postgres (replicas agree on leases whatever their clocks), the process's in
//! SQLite (one process).

use std::time::Duration;

use sqlx::sqlite::SqliteConnection;

use super::Result;
use super::outbox::claim_id;

/// What a hub was last told of one feed of a site, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubRow {
    /// The feed's path under the site's public URL (`feed.atom`).
    pub feed: String,
    pub hub: String,
    /// The digest of the feed when the hub last accepted a notification of it (`None`: never).
    pub delivered: Option<String>,
    /// Failed notifications since the last one accepted.
    pub attempts: u32,
    /// How long until the row may be claimed (zero: now): the debounce interval, a retry delay or another claim's
    /// lease still running.
    pub wait: Duration,
}

/// One feed's notification to one hub, held by one publisher until settled or until its lease ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubClaim {
    /// Names the claim in the row it holds (random).
    pub id: i64,
    pub site: i64,
    pub feed: String,
    pub hub: String,
    /// The feed's digest the notification is for.
    pub digest: String,
    /// Failed notifications before this one: what the next retry delay grows from.
    pub attempts: u32,
}

/// How a claimed notification ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HubSettle {
    /// The hub accepted it: the claim's digest is delivered, and the row is due again after `interval` (the
    /// debounce: at most one notification per interval, whatever the write rate).
    Delivered { interval: Duration },
    /// It failed: an attempt more, and due again after `delay`.
    Failed { delay: Duration },
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn wait_of(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

type RowTuple = (String, String, Option<String>, i32, i64);

fn rows_of(rows: Vec<RowTuple>) -> Vec<HubRow> {
    rows.into_iter()
        .map(|(feed, hub, delivered, attempts, wait)| HubRow {
            feed,
            hub,
            delivered,
            attempts: u32::try_from(attempts).unwrap_or(0),
            wait: wait_of(wait),
        })
        .collect()
}

fn claim_of(id: i64, site: i64, feed: &str, hub: &str, digest: &str, row: Option<(i32,)>) -> Option<HubClaim> {
    row.map(|(attempts,)| HubClaim {
        id,
        site,
        feed: feed.to_owned(),
        hub: hub.to_owned(),
        digest: digest.to_owned(),
        attempts: u32::try_from(attempts).unwrap_or(0),
    })
}

/// The database's clock in Postgres, microseconds since the Unix epoch (one value per statement).
macro_rules! pg_now {
    () => {
        "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint"
    };
}

// --- Postgres -------------------------------------------------------------------------------------------------

const PG_ROWS_SQL: &str = concat!(
    "SELECT feed, hub, delivered, attempts, GREATEST(due_us - ",
    pg_now!(),
    ", 0) FROM websub WHERE site_id = $1 ORDER BY feed, hub"
);

/// Adds the row at its first claim, or takes it when due and not yet delivered at `$4`. A row another statement
/// is claiming is waited for (its lock), then found claimed: not taken.
const PG_CLAIM_SQL: &str = concat!(
    "INSERT INTO websub (site_id, feed, hub, claim, due_us) VALUES ($1, $2, $3, $5, ",
    pg_now!(),
    " + $6) ON CONFLICT (site_id, feed, hub) DO UPDATE SET claim = excluded.claim, due_us = excluded.due_us \
     WHERE websub.due_us <= ",
    pg_now!(),
    " AND websub.delivered IS DISTINCT FROM $4 RETURNING attempts"
);

const PG_DELIVERED_SQL: &str = concat!(
    "UPDATE websub SET claim = NULL, delivered = $5, delivered_us = ",
    pg_now!(),
    ", attempts = 0, due_us = ",
    pg_now!(),
    " + $6 WHERE site_id = $1 AND feed = $2 AND hub = $3 AND claim = $4"
);

const PG_FAILED_SQL: &str = concat!(
    "UPDATE websub SET claim = NULL, attempts = attempts + 1, due_us = ",
    pg_now!(),
    " + $5 WHERE site_id = $1 AND feed = $2 AND hub = $3 AND claim = $4"
);

pub(super) async fn pg_rows(pool: &sqlx::PgPool, site: i64) -> Result<Vec<HubRow>> {
    Ok(rows_of(sqlx::query_as(PG_ROWS_SQL).bind(site).fetch_all(pool).await?))
}

pub(super) async fn pg_claim(
    pool: &sqlx::PgPool,
    site: i64,
    feed: &str,
    hub: &str,
    digest: &str,
    lease: Duration,
) -> Result<Option<HubClaim>> {
    let id = claim_id();
    let row: Option<(i32,)> = sqlx::query_as(PG_CLAIM_SQL)
        .bind(site)
        .bind(feed)
        .bind(hub)
        .bind(digest)
        .bind(id)
        .bind(micros(lease))
        .fetch_optional(pool)
        .await?;
    Ok(claim_of(id, site, feed, hub, digest, row))
}

pub(super) async fn pg_settle(pool: &sqlx::PgPool, claim: &HubClaim, settle: HubSettle) -> Result<bool> {
    let query = match settle {
        HubSettle::Delivered { interval } => sqlx::query(PG_DELIVERED_SQL)
            .bind(claim.site)
            .bind(&claim.feed)
            .bind(&claim.hub)
            .bind(claim.id)
            .bind(&claim.digest)
            .bind(micros(interval)),
        HubSettle::Failed { delay } => sqlx::query(PG_FAILED_SQL)
            .bind(claim.site)
            .bind(&claim.feed)
            .bind(&claim.hub)
            .bind(claim.id)
            .bind(micros(delay)),
    };
    Ok(query.execute(pool).await?.rows_affected() > 0)
}

// --- SQLite ---------------------------------------------------------------------------------------------------

const SQLITE_ROWS_SQL: &str =
    "SELECT feed, hub, delivered, attempts, max(due_us - ?2, 0) FROM websub WHERE site_id = ?1 ORDER BY feed, hub";
const SQLITE_CLAIM_SQL: &str = "INSERT INTO websub (site_id, feed, hub, claim, due_us) VALUES (?1, ?2, ?3, ?5, ?7 + ?6) \
     ON CONFLICT (site_id, feed, hub) DO UPDATE SET claim = excluded.claim, due_us = excluded.due_us \
     WHERE websub.due_us <= ?7 AND websub.delivered IS NOT ?4 RETURNING attempts";
const SQLITE_DELIVERED_SQL: &str = "UPDATE websub SET claim = NULL, delivered = ?5, delivered_us = ?7, attempts = 0, \
     due_us = ?7 + ?6 WHERE site_id = ?1 AND feed = ?2 AND hub = ?3 AND claim = ?4";
const SQLITE_FAILED_SQL: &str = "UPDATE websub SET claim = NULL, attempts = attempts + 1, due_us = ?6 + ?5 \
     WHERE site_id = ?1 AND feed = ?2 AND hub = ?3 AND claim = ?4";

pub(super) async fn sqlite_rows(pool: &sqlx::SqlitePool, site: i64) -> Result<Vec<HubRow>> {
    Ok(rows_of(sqlx::query_as(SQLITE_ROWS_SQL).bind(site).bind(super::now_us()).fetch_all(pool).await?))
}

/// In a write transaction (the store's writer lock held).
pub(super) async fn sqlite_claim(
    conn: &mut SqliteConnection,
    site: i64,
    feed: &str,
    hub: &str,
    digest: &str,
    lease: Duration,
) -> Result<Option<HubClaim>> {
    let id = claim_id();
    let row: Option<(i32,)> = sqlx::query_as(SQLITE_CLAIM_SQL)
        .bind(site)
        .bind(feed)
        .bind(hub)
        .bind(digest)
        .bind(id)
        .bind(micros(lease))
        .bind(super::now_us())
        .fetch_optional(conn)
        .await?;
    Ok(claim_of(id, site, feed, hub, digest, row))
}

/// In a write transaction (the store's writer lock held).
pub(super) async fn sqlite_settle(conn: &mut SqliteConnection, claim: &HubClaim, settle: HubSettle) -> Result<bool> {
    let now = super::now_us();
    let query = match settle {
        HubSettle::Delivered { interval } => sqlx::query(SQLITE_DELIVERED_SQL)
            .bind(claim.site)
            .bind(&claim.feed)
            .bind(&claim.hub)
            .bind(claim.id)
            .bind(&claim.digest)
            .bind(micros(interval))
            .bind(now),
        HubSettle::Failed { delay } => sqlx::query(SQLITE_FAILED_SQL)
            .bind(claim.site)
            .bind(&claim.feed)
            .bind(&claim.hub)
            .bind(claim.id)
            .bind(micros(delay))
            .bind(now),
    };
    Ok(query.execute(conn).await?.rows_affected() > 0)
}
