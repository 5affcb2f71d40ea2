//! Publishing's log (`publish_targets`, `publish_objects`, migration 0019): per target (an object store's URL),
//! the lease that keeps one publisher at a time on it, how its passes ended, and each object it holds with the
//! version last uploaded (the ETag the service served for the file) and since when no index names it.
//!
//! The publisher (`sitemapd-server`'s `publish`) claims a target ([`PublishLog::publish_claim`]), reads what it
//! holds, records each upload, marks and forgets the objects that left the indexes, and releases the claim with
//! the pass's outcome:
//!
//! - Claiming is one conditional upsert: the target's row (added the first time, for its site) is taken when no
//!   claim's lease runs, and names the new claim and the end of its lease. Of two publishers that claim at once
//!   (replicas on one Postgres), one updates the row; the other waits for that row's lock, then finds the lease
//!   running. A publisher that dies with a claim leaves a lease that runs out.
//! - Every other write changes rows only while its claim holds the target (the claim's id is in the row): in
//!   Postgres each is one statement that first locks the target's row where it names the claim (`FOR SHARE`), so
//!   that a claim taking the target over waits for it or it finds its claim gone; in SQLite the check and the
//!   write are one transaction under the writer lock. A claim holds the target until it is released or another
//!   claim takes it, which only happens once its lease ran out.
//!
//! Every query reads one target's rows through the primary keys, O(its objects) at most; the status of all
//! targets is one grouped query. The time is the database's in Postgres (replicas agree on leases whatever their
//! clocks), the process's in SQLite (one process).

use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use super::outbox::claim_id;
use super::{Result, StoreError};

/// One object a target holds, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedObject {
    pub key: String,
    pub version: String,
    pub bytes: i64,
    /// How long since a pass found it no longer named (`None`: named).
    pub gone_for: Option<Duration>,
}

/// A target's state, for the view and /metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishStatus {
    pub target: String,
    pub site: i64,
    pub objects: i64,
    pub bytes: i64,
    /// Objects marked gone, awaiting deletion after the grace.
    pub gone: i64,
    /// Since the last complete pass ended (`None`: never).
    pub since_complete: Option<Duration>,
    pub failures: u32,
    pub last_error: Option<String>,
    /// Whether a claim's lease is running now.
    pub busy: bool,
}

/// Publishing's log: per target, a lease and the objects it holds. Read from the primary.
#[async_trait]
pub trait PublishLog: Send + Sync {
    /// Takes `target`'s lease for `lease` when no other claim's lease runs (adds the target's row, for `site`, the
    /// first time). `Some(claim id)` (random, nonzero), or `None` when another holds it. A target row's site never
    /// changes: claiming it for another site is an error ([`StoreError::Other`], saying so).
    async fn publish_claim(&self, site: i64, target: &str, lease: Duration) -> Result<Option<i64>>;
    /// Extends the lease while `claim` holds it; `false` when it no longer does.
    async fn publish_renew(&self, target: &str, claim: i64, lease: Duration) -> Result<bool>;
    /// Ends the claim: `Ok(())` sets last_complete_us = now, failures = 0, last_error = NULL; `Err(message)`
    /// counts a failure and keeps the message (≤ 1000 chars). Both set last_attempt_us and free the lease.
    /// No-op when the claim no longer holds.
    async fn publish_release(&self, target: &str, claim: i64, outcome: std::result::Result<(), &str>) -> Result<()>;
    /// Every object recorded for `target`, in key order.
    async fn published_objects(&self, target: &str) -> Result<Vec<PublishedObject>>;
    /// Records `key` as uploaded at `version`, `bytes` long, and clears its gone mark; `false` (nothing written)
    /// when `claim` no longer holds the target.
    async fn publish_record(&self, target: &str, claim: i64, key: &str, version: &str, bytes: i64) -> Result<bool>;
    /// Marks `keys` gone (gone_since_us = now where NULL; a mark already there keeps its time). `false` when the
    /// claim does not hold.
    async fn publish_mark_gone(&self, target: &str, claim: i64, keys: &[String]) -> Result<bool>;
    /// Clears the gone mark of `keys`. `false` when the claim does not hold.
    async fn publish_unmark(&self, target: &str, claim: i64, keys: &[String]) -> Result<bool>;
    /// Forgets `key` (deleted from the target). `false` when the claim does not hold.
    async fn publish_forget(&self, target: &str, claim: i64, key: &str) -> Result<bool>;
    /// Every target's state (of `site`; all: `None`), in target order.
    async fn publish_status(&self, site: Option<i64>) -> Result<Vec<PublishStatus>>;
}

/// A write made only while its claim holds the target (every one but the claim itself).
#[derive(Clone, Copy, Debug)]
pub(super) enum Held<'a> {
    Renew(Duration),
    Release(std::result::Result<(), &'a str>),
    Record { key: &'a str, version: &'a str, bytes: i64 },
    Mark(&'a [String]),
    Unmark(&'a [String]),
    Forget(&'a str),
}

/// The most characters of a failed pass's message kept.
const ERROR_CHARS: usize = 1000;

/// The longest lease: a century, so that its end (now + lease, in microseconds) never overflows.
const LONGEST_LEASE: Duration = Duration::from_secs(100 * 366 * 86_400);

fn lease_us(lease: Duration) -> i64 {
    i64::try_from(lease.min(LONGEST_LEASE).as_micros()).unwrap_or(i64::MAX)
}

fn duration_of(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

/// A failed pass's message, cut after [`ERROR_CHARS`] characters.
fn kept(message: &str) -> &str {
    message.char_indices().nth(ERROR_CHARS).map_or(message, |(end, _)| &message[..end])
}

/// A claim's id: random and nonzero.
fn new_claim() -> i64 {
    loop {
        let id = claim_id();
        if id != 0 {
            return id;
        }
    }
}

/// The error of a claim for a site that is not the target's.
fn other_site(target: &str, stored: i64, site: i64) -> StoreError {
    StoreError::Other(sqlx::Error::InvalidArgument(format!(
        "publish target {target} publishes site id {stored}: it cannot be claimed for site id {site} (a target holds \
         one site's files; give each site a target of its own)"
    )))
}

/// A claim refused: an error when the target is another site's, else `None` (another claim's lease runs).
fn refused(target: &str, site: i64, stored: Option<i64>) -> Result<Option<i64>> {
    match stored {
        Some(stored) if stored != site => Err(other_site(target, stored, site)),
        _ => Ok(None),
    }
}

type ObjectRow = (String, String, i64, Option<i64>);

fn objects_of(rows: Vec<ObjectRow>) -> Vec<PublishedObject> {
    rows.into_iter()
        .map(|(key, version, bytes, gone_for)| PublishedObject {
            key,
            version,
            bytes,
            gone_for: gone_for.map(duration_of),
        })
        .collect()
}

type StatusRow = (String, i64, i64, i64, i64, Option<i64>, i32, Option<String>, bool);

fn statuses_of(rows: Vec<StatusRow>) -> Vec<PublishStatus> {
    rows.into_iter()
        .map(|(target, site, objects, bytes, gone, since_complete, failures, last_error, busy)| PublishStatus {
            target,
            site,
            objects,
            bytes,
            gone,
            since_complete: since_complete.map(duration_of),
            failures: u32::try_from(failures).unwrap_or(0),
            last_error,
            busy,
        })
        .collect()
}

/// The database's clock in Postgres, microseconds since the Unix epoch (one value per statement).
macro_rules! pg_now {
    () => {
        "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint"
    };
}

/// The target's row (`$1`) while claim `$2` holds it, locked against a claim that would take it over until the
/// statement's transaction ends.
macro_rules! pg_held {
    () => {
        "WITH held AS (SELECT target FROM publish_targets WHERE target = $1 AND claim_id = $2 FOR SHARE), "
    };
}

// --- Postgres -------------------------------------------------------------------------------------------------

/// Adds the target's row at its first claim, or takes it when no lease runs and it is the same site's. A row
/// another statement is claiming is waited for (its lock), then found claimed: not taken.
const PG_CLAIM_SQL: &str = concat!(
    "INSERT INTO publish_targets (target, site_id, claim_id, lease_until_us) VALUES ($1, $2, $3, ",
    pg_now!(),
    " + $4) ON CONFLICT (target) DO UPDATE SET claim_id = excluded.claim_id, lease_until_us = excluded.lease_until_us \
     WHERE publish_targets.lease_until_us <= ",
    pg_now!(),
    " AND publish_targets.site_id = excluded.site_id RETURNING claim_id"
);
const PG_SITE_SQL: &str = "SELECT site_id FROM publish_targets WHERE target = $1";
const PG_RENEW_SQL: &str =
    concat!("UPDATE publish_targets SET lease_until_us = ", pg_now!(), " + $3 WHERE target = $1 AND claim_id = $2");
const PG_COMPLETE_SQL: &str = concat!(
    "UPDATE publish_targets SET claim_id = NULL, lease_until_us = 0, last_attempt_us = ",
    pg_now!(),
    ", last_complete_us = ",
    pg_now!(),
    ", failures = 0, last_error = NULL WHERE target = $1 AND claim_id = $2"
);
const PG_FAILED_SQL: &str = concat!(
    "UPDATE publish_targets SET claim_id = NULL, lease_until_us = 0, last_attempt_us = ",
    pg_now!(),
    ", failures = failures + 1, last_error = $3 WHERE target = $1 AND claim_id = $2"
);
// Each of these returns 1 when the claim holds the target (and the write was made), else 0.
const PG_RECORD_SQL: &str = concat!(
    pg_held!(),
    "recorded AS (INSERT INTO publish_objects (target, key, version, bytes, uploaded_us) SELECT target, $3, $4, $5, ",
    pg_now!(),
    " FROM held ON CONFLICT (target, key) DO UPDATE SET version = excluded.version, bytes = excluded.bytes, \
     uploaded_us = excluded.uploaded_us, gone_since_us = NULL) SELECT count(*) FROM held"
);
const PG_MARK_SQL: &str = concat!(
    pg_held!(),
    "marked AS (UPDATE publish_objects SET gone_since_us = ",
    pg_now!(),
    " WHERE target IN (SELECT target FROM held) AND key = ANY($3) AND gone_since_us IS NULL) \
     SELECT count(*) FROM held"
);
const PG_UNMARK_SQL: &str = concat!(
    pg_held!(),
    "unmarked AS (UPDATE publish_objects SET gone_since_us = NULL \
     WHERE target IN (SELECT target FROM held) AND key = ANY($3) AND gone_since_us IS NOT NULL) \
     SELECT count(*) FROM held"
);
const PG_FORGET_SQL: &str = concat!(
    pg_held!(),
    "forgotten AS (DELETE FROM publish_objects WHERE target IN (SELECT target FROM held) AND key = $3) \
     SELECT count(*) FROM held"
);
/// A target's objects in key order: a range of the primary key, already in order.
const PG_OBJECTS_SQL: &str = concat!(
    "SELECT key, version, bytes, ",
    pg_now!(),
    " - gone_since_us FROM publish_objects WHERE target = $1 ORDER BY key"
);
const PG_STATUS_SQL: &str = concat!(
    "SELECT t.target, t.site_id, count(o.key), CAST(COALESCE(sum(o.bytes), 0) AS BIGINT), count(o.gone_since_us), ",
    pg_now!(),
    " - t.last_complete_us, t.failures, t.last_error, t.claim_id IS NOT NULL AND t.lease_until_us > ",
    pg_now!(),
    " FROM publish_targets t LEFT JOIN publish_objects o ON o.target = t.target \
     WHERE $1::BIGINT IS NULL OR t.site_id = $1 GROUP BY t.target ORDER BY t.target"
);

pub(super) async fn pg_claim(pool: &sqlx::PgPool, site: i64, target: &str, lease: Duration) -> Result<Option<i64>> {
    let id = new_claim();
    let taken: Option<(i64,)> = sqlx::query_as(PG_CLAIM_SQL)
        .bind(target)
        .bind(site)
        .bind(id)
        .bind(lease_us(lease))
        .fetch_optional(pool)
        .await?;
    if taken.is_some() {
        return Ok(Some(id));
    }
    let stored: Option<(i64,)> = sqlx::query_as(PG_SITE_SQL).bind(target).fetch_optional(pool).await?;
    refused(target, site, stored.map(|(s,)| s))
}

pub(super) async fn pg_write(pool: &sqlx::PgPool, target: &str, claim: i64, write: Held<'_>) -> Result<bool> {
    let counted = |sql: &'static str| sqlx::query_scalar::<sqlx::Postgres, i64>(sql).bind(target).bind(claim);
    let held = match write {
        Held::Renew(lease) => {
            let query = sqlx::query(PG_RENEW_SQL).bind(target).bind(claim).bind(lease_us(lease));
            return Ok(query.execute(pool).await?.rows_affected() > 0);
        }
        Held::Release(Ok(())) => {
            let query = sqlx::query(PG_COMPLETE_SQL).bind(target).bind(claim);
            return Ok(query.execute(pool).await?.rows_affected() > 0);
        }
        Held::Release(Err(message)) => {
            let query = sqlx::query(PG_FAILED_SQL).bind(target).bind(claim).bind(kept(message));
            return Ok(query.execute(pool).await?.rows_affected() > 0);
        }
        Held::Record { key, version, bytes } => {
            counted(PG_RECORD_SQL).bind(key).bind(version).bind(bytes).fetch_one(pool).await?
        }
        Held::Mark(keys) => counted(PG_MARK_SQL).bind(keys).fetch_one(pool).await?,
        Held::Unmark(keys) => counted(PG_UNMARK_SQL).bind(keys).fetch_one(pool).await?,
        Held::Forget(key) => counted(PG_FORGET_SQL).bind(key).fetch_one(pool).await?,
    };
    Ok(held > 0)
}

pub(super) async fn pg_objects(pool: &sqlx::PgPool, target: &str) -> Result<Vec<PublishedObject>> {
    Ok(objects_of(sqlx::query_as(PG_OBJECTS_SQL).bind(target).fetch_all(pool).await?))
}

pub(super) async fn pg_status(pool: &sqlx::PgPool, site: Option<i64>) -> Result<Vec<PublishStatus>> {
    Ok(statuses_of(sqlx::query_as(PG_STATUS_SQL).bind(site).fetch_all(pool).await?))
}

// --- SQLite ---------------------------------------------------------------------------------------------------

const SQLITE_CLAIM_SQL: &str = "INSERT INTO publish_targets (target, site_id, claim_id, lease_until_us) \
     VALUES (?1, ?2, ?3, ?5 + ?4) ON CONFLICT (target) DO UPDATE SET claim_id = excluded.claim_id, \
     lease_until_us = excluded.lease_until_us WHERE publish_targets.lease_until_us <= ?5 \
     AND publish_targets.site_id = excluded.site_id RETURNING claim_id";
const SQLITE_SITE_SQL: &str = "SELECT site_id FROM publish_targets WHERE target = ?1";
const SQLITE_HELD_SQL: &str = "SELECT 1 FROM publish_targets WHERE target = ?1 AND claim_id = ?2";
const SQLITE_RENEW_SQL: &str =
    "UPDATE publish_targets SET lease_until_us = ?4 + ?3 WHERE target = ?1 AND claim_id = ?2";
const SQLITE_COMPLETE_SQL: &str = "UPDATE publish_targets SET claim_id = NULL, lease_until_us = 0, \
     last_attempt_us = ?3, last_complete_us = ?3, failures = 0, last_error = NULL WHERE target = ?1 AND claim_id = ?2";
const SQLITE_FAILED_SQL: &str = "UPDATE publish_targets SET claim_id = NULL, lease_until_us = 0, \
     last_attempt_us = ?3, failures = failures + 1, last_error = ?4 WHERE target = ?1 AND claim_id = ?2";
const SQLITE_RECORD_SQL: &str = "INSERT INTO publish_objects (target, key, version, bytes, uploaded_us) \
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (target, key) DO UPDATE SET version = excluded.version, \
     bytes = excluded.bytes, uploaded_us = excluded.uploaded_us, gone_since_us = NULL";
const SQLITE_MARK_SQL: &str = "UPDATE publish_objects SET gone_since_us = ?3 \
     WHERE target = ?1 AND key IN (SELECT value FROM json_each(?2)) AND gone_since_us IS NULL";
const SQLITE_UNMARK_SQL: &str = "UPDATE publish_objects SET gone_since_us = NULL \
     WHERE target = ?1 AND key IN (SELECT value FROM json_each(?2)) AND gone_since_us IS NOT NULL";
const SQLITE_FORGET_SQL: &str = "DELETE FROM publish_objects WHERE target = ?1 AND key = ?2";
const SQLITE_OBJECTS_SQL: &str =
    "SELECT key, version, bytes, ?2 - gone_since_us FROM publish_objects WHERE target = ?1 ORDER BY key";
const SQLITE_STATUS_SQL: &str = "SELECT t.target, t.site_id, count(o.key), COALESCE(sum(o.bytes), 0), \
     count(o.gone_since_us), ?2 - t.last_complete_us, t.failures, t.last_error, \
     t.claim_id IS NOT NULL AND t.lease_until_us > ?2 \
     FROM publish_targets t LEFT JOIN publish_objects o ON o.target = t.target \
     WHERE ?1 IS NULL OR t.site_id = ?1 GROUP BY t.target ORDER BY t.target";

/// In a write transaction (the store's writer lock held).
pub(super) async fn sqlite_claim(
    conn: &mut SqliteConnection,
    site: i64,
    target: &str,
    lease: Duration,
) -> Result<Option<i64>> {
    let id = new_claim();
    let taken: Option<(i64,)> = sqlx::query_as(SQLITE_CLAIM_SQL)
        .bind(target)
        .bind(site)
        .bind(id)
        .bind(lease_us(lease))
        .bind(super::now_us())
        .fetch_optional(&mut *conn)
        .await?;
    if taken.is_some() {
        return Ok(Some(id));
    }
    let stored: Option<(i64,)> = sqlx::query_as(SQLITE_SITE_SQL).bind(target).fetch_optional(&mut *conn).await?;
    refused(target, site, stored.map(|(s,)| s))
}

/// In a write transaction (the store's writer lock held): the check that `claim` holds `target`, then the write.
pub(super) async fn sqlite_write(
    conn: &mut SqliteConnection,
    target: &str,
    claim: i64,
    write: Held<'_>,
) -> Result<bool> {
    let held: Option<(i64,)> =
        sqlx::query_as(SQLITE_HELD_SQL).bind(target).bind(claim).fetch_optional(&mut *conn).await?;
    if held.is_none() {
        return Ok(false);
    }
    let now = super::now_us();
    let keys = |keys: &[String]| serde_json::to_string(keys).expect("strings serialize");
    let query = match write {
        Held::Renew(lease) => sqlx::query(SQLITE_RENEW_SQL).bind(target).bind(claim).bind(lease_us(lease)).bind(now),
        Held::Release(Ok(())) => sqlx::query(SQLITE_COMPLETE_SQL).bind(target).bind(claim).bind(now),
        Held::Release(Err(message)) => {
            sqlx::query(SQLITE_FAILED_SQL).bind(target).bind(claim).bind(now).bind(kept(message))
        }
        Held::Record { key, version, bytes } => {
            sqlx::query(SQLITE_RECORD_SQL).bind(target).bind(key).bind(version).bind(bytes).bind(now)
        }
        Held::Mark(list) => sqlx::query(SQLITE_MARK_SQL).bind(target).bind(keys(list)).bind(now),
        Held::Unmark(list) => sqlx::query(SQLITE_UNMARK_SQL).bind(target).bind(keys(list)),
        Held::Forget(key) => sqlx::query(SQLITE_FORGET_SQL).bind(target).bind(key),
    };
    query.execute(conn).await?;
    Ok(true)
}

pub(super) async fn sqlite_objects(pool: &sqlx::SqlitePool, target: &str) -> Result<Vec<PublishedObject>> {
    Ok(objects_of(sqlx::query_as(SQLITE_OBJECTS_SQL).bind(target).bind(super::now_us()).fetch_all(pool).await?))
}

pub(super) async fn sqlite_status(pool: &sqlx::SqlitePool, site: Option<i64>) -> Result<Vec<PublishStatus>> {
    Ok(statuses_of(sqlx::query_as(SQLITE_STATUS_SQL).bind(site).bind(super::now_us()).fetch_all(pool).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_kept_to_its_first_thousand_characters() {
        assert_eq!(kept("short"), "short");
        let long = "é".repeat(1500);
        assert_eq!(kept(&long).chars().count(), 1000);
        assert_eq!(kept(&"x".repeat(1000)).len(), 1000);
    }

    #[test]
    fn a_lease_ends_within_the_database_times() {
        assert_eq!(lease_us(Duration::from_millis(50)), 50_000);
        assert!(lease_us(Duration::MAX) < i64::MAX / 2);
    }
}
