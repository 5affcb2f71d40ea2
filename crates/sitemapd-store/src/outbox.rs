//! The IndexNow outbox (`indexnow_outbox`, migration 0005): the change notifications still to send.
//!
//! The write path queues the locs a write created, updated or deleted in the write's own transaction
//! ([`super::write`]), so a crash between the commit and the send loses nothing. One row per loc: a loc changed
//! again while queued stays one row, and its `seq` moves on. The sender ([`crate::indexnow`]) claims a site's due
//! rows ([`Claim`]), sends them, then settles the claim ([`Settle`]):
//!
//! - Claiming sets the rows' `due_us` to the end of a lease and remembers the claim and each row's `seq`. Other
//!   senders (replicas on one Postgres) skip rows under a lease, and the claim's statement skips rows another
//!   statement has locked (`FOR UPDATE SKIP LOCKED`), so two senders never claim the same row at once. A sender
//!   that dies with a claim leaves rows whose lease runs out: they are claimed again then.
//! - Settling deletes only the rows whose `seq` is still the claimed one; a row changed while its batch was in
//!   flight is queued again, due at once, and sent again with its new state.
//! - A failed send counts an attempt on every row of the claim and makes them due after the sender's delay; rows
//!   at the attempt limit are deleted (given up).
//!
//! The time is the database's in Postgres (replicas agree on leases whatever their clocks), the process's in
//! SQLite (one process). Statements that lock several rows lock them in loc order (the write path queues its
//! locs sorted, settling locks the claim's rows sorted first), so a write and a settle never deadlock.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::PgConnection;
use sqlx::sqlite::SqliteConnection;

use super::Result;

/// A batch of one site's queued locs, held by one sender until settled or until its lease ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Names the claim in the rows it holds (random).
    pub id: i64,
    pub site: i64,
    pub locs: Vec<String>,
    /// The most failed sends of any of its rows: what the next retry delay grows from.
    pub attempts: u32,
}

/// How a sent (or unsendable) claim ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// Sent, or dropped for good (the endpoint refused it): its rows are done.
    Done,
    /// To be sent again after `delay`. Rows that reach `max_attempts` failed sends are given up.
    Retry { delay: Duration, max_attempts: u32 },
}

/// What settling did to a claim's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// Rows deleted: done ([`Settle::Done`]), or given up ([`Settle::Retry`]).
    pub deleted: u64,
    /// Rows changed since the claim, queued again (due at once after [`Settle::Done`]).
    pub changed: u64,
}

/// A claim id no other claim has: random per process, then counted.
pub(super) fn claim_id() -> i64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| RandomState::new().hash_one((std::process::id(), super::now_us())));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // The seed's top bits and a counter: unique within the process, and across processes unless two seeds meet.
    (seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) as i64
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The database's clock in Postgres, microseconds since the Unix epoch (one value per statement).
macro_rules! pg_now {
    () => {
        "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint"
    };
}

// --- Postgres -------------------------------------------------------------------------------------------------

/// Queues `locs` (sorted) of `site`: new locs due at once; a queued loc's `seq` moves on and its attempts restart.
const PG_ENQUEUE_SQL: &str = "INSERT INTO indexnow_outbox (loc, site_id) SELECT loc, $1 FROM UNNEST($2::text[]) AS u (loc) \
     ON CONFLICT (loc) DO UPDATE SET seq = indexnow_outbox.seq + 1, attempts = 0, site_id = excluded.site_id";

const PG_CLAIM_SQL: &str = concat!(
    "UPDATE indexnow_outbox o SET claim = $3, claimed_seq = o.seq, due_us = ",
    pg_now!(),
    " + $4 FROM (SELECT loc FROM indexnow_outbox WHERE site_id = $1 AND due_us <= ",
    pg_now!(),
    " ORDER BY due_us LIMIT $2 FOR UPDATE SKIP LOCKED) AS c WHERE o.loc = c.loc RETURNING o.loc, o.attempts"
);

/// Locks the claim's rows in loc order, before they are deleted or updated (see the module's note on deadlocks).
/// In byte order (`COLLATE "C"`), the order writes queue locs in (sorted in Rust): the two never wait on each other
/// in opposite orders, whatever the database's collation.
const PG_LOCK_SQL: &str =
    "SELECT loc FROM indexnow_outbox WHERE loc = ANY($2) AND claim = $1 ORDER BY loc COLLATE \"C\" FOR UPDATE";
const PG_DONE_SQL: &str = "DELETE FROM indexnow_outbox WHERE loc = ANY($2) AND claim = $1 AND seq = claimed_seq";
const PG_GIVE_UP_SQL: &str = "DELETE FROM indexnow_outbox \
     WHERE loc = ANY($2) AND claim = $1 AND seq = claimed_seq AND attempts + 1 >= $3";
const PG_REQUEUE_SQL: &str =
    concat!("UPDATE indexnow_outbox SET claim = NULL, due_us = ", pg_now!(), " WHERE loc = ANY($2) AND claim = $1");
const PG_RETRY_SQL: &str = concat!(
    "UPDATE indexnow_outbox SET claim = NULL, attempts = attempts + 1, due_us = ",
    pg_now!(),
    " + $3 WHERE loc = ANY($2) AND claim = $1"
);

pub(super) async fn pg_enqueue(conn: &mut PgConnection, site: i64, locs: &[&str]) -> Result<()> {
    sqlx::query(PG_ENQUEUE_SQL).bind(site).bind(locs).execute(conn).await?;
    Ok(())
}

pub(super) async fn pg_claim(pool: &sqlx::PgPool, site: i64, limit: u32, lease: Duration) -> Result<Option<Claim>> {
    let id = claim_id();
    let rows: Vec<(String, i32)> = sqlx::query_as(PG_CLAIM_SQL)
        .bind(site)
        .bind(i64::from(limit))
        .bind(id)
        .bind(micros(lease))
        .fetch_all(pool)
        .await?;
    Ok(claim_of(id, site, rows))
}

pub(super) async fn pg_settle(pool: &sqlx::PgPool, claim: &Claim, settle: Settle) -> Result<Settled> {
    let mut tx = pool.begin().await?;
    sqlx::query(PG_LOCK_SQL).bind(claim.id).bind(&claim.locs).execute(&mut *tx).await?;
    let settled = match settle {
        Settle::Done => {
            let deleted = sqlx::query(PG_DONE_SQL).bind(claim.id).bind(&claim.locs).execute(&mut *tx).await?;
            let changed = sqlx::query(PG_REQUEUE_SQL).bind(claim.id).bind(&claim.locs).execute(&mut *tx).await?;
            Settled { deleted: deleted.rows_affected(), changed: changed.rows_affected() }
        }
        Settle::Retry { delay, max_attempts } => {
            let given_up = sqlx::query(PG_GIVE_UP_SQL)
                .bind(claim.id)
                .bind(&claim.locs)
                .bind(i64::from(max_attempts))
                .execute(&mut *tx)
                .await?;
            sqlx::query(PG_RETRY_SQL).bind(claim.id).bind(&claim.locs).bind(micros(delay)).execute(&mut *tx).await?;
            Settled { deleted: given_up.rows_affected(), changed: 0 }
        }
    };
    tx.commit().await?;
    Ok(settled)
}

// --- SQLite ---------------------------------------------------------------------------------------------------

/// As [`PG_ENQUEUE_SQL`], the locs as one JSON array (`WHERE true`: SQLite's parser needs it before `ON CONFLICT`).
const SQLITE_ENQUEUE_SQL: &str = "INSERT INTO indexnow_outbox (loc, site_id) SELECT value, ?1 FROM json_each(?2) WHERE true \
     ON CONFLICT (loc) DO UPDATE SET seq = seq + 1, attempts = 0, site_id = excluded.site_id";
const SQLITE_CLAIM_SQL: &str = "UPDATE indexnow_outbox SET claim = ?3, claimed_seq = seq, due_us = ?4 + ?5 \
     WHERE loc IN (SELECT loc FROM indexnow_outbox WHERE site_id = ?1 AND due_us <= ?4 ORDER BY due_us LIMIT ?2) \
     RETURNING loc, attempts";
const SQLITE_DONE_SQL: &str = "DELETE FROM indexnow_outbox \
     WHERE loc IN (SELECT value FROM json_each(?2)) AND claim = ?1 AND seq = claimed_seq";
const SQLITE_GIVE_UP_SQL: &str = "DELETE FROM indexnow_outbox \
     WHERE loc IN (SELECT value FROM json_each(?2)) AND claim = ?1 AND seq = claimed_seq AND attempts + 1 >= ?3";
const SQLITE_REQUEUE_SQL: &str = "UPDATE indexnow_outbox SET claim = NULL, due_us = ?3 WHERE loc IN (SELECT value FROM json_each(?2)) AND claim = ?1";
const SQLITE_RETRY_SQL: &str = "UPDATE indexnow_outbox SET claim = NULL, attempts = attempts + 1, due_us = ?3 \
     WHERE loc IN (SELECT value FROM json_each(?2)) AND claim = ?1";

pub(super) async fn sqlite_enqueue(conn: &mut SqliteConnection, site: i64, locs: &[&str]) -> Result<()> {
    let json = serde_json::to_string(locs).expect("strings serialize");
    sqlx::query(SQLITE_ENQUEUE_SQL).bind(site).bind(json).execute(conn).await?;
    Ok(())
}

/// In a write transaction (the store's writer lock held).
pub(super) async fn sqlite_claim(
    conn: &mut SqliteConnection,
    site: i64,
    limit: u32,
    lease: Duration,
) -> Result<Option<Claim>> {
    let id = claim_id();
    let rows: Vec<(String, i32)> = sqlx::query_as(SQLITE_CLAIM_SQL)
        .bind(site)
        .bind(i64::from(limit))
        .bind(id)
        .bind(super::now_us())
        .bind(micros(lease))
        .fetch_all(conn)
        .await?;
    Ok(claim_of(id, site, rows))
}

/// In a write transaction (the store's writer lock held).
pub(super) async fn sqlite_settle(conn: &mut SqliteConnection, claim: &Claim, settle: Settle) -> Result<Settled> {
    let json = serde_json::to_string(&claim.locs).expect("strings serialize");
    let now = super::now_us();
    Ok(match settle {
        Settle::Done => {
            let deleted = sqlx::query(SQLITE_DONE_SQL).bind(claim.id).bind(&json).execute(&mut *conn).await?;
            let changed =
                sqlx::query(SQLITE_REQUEUE_SQL).bind(claim.id).bind(&json).bind(now).execute(&mut *conn).await?;
            Settled { deleted: deleted.rows_affected(), changed: changed.rows_affected() }
        }
        Settle::Retry { delay, max_attempts } => {
            let given_up = sqlx::query(SQLITE_GIVE_UP_SQL)
                .bind(claim.id)
                .bind(&json)
                .bind(i64::from(max_attempts))
                .execute(&mut *conn)
                .await?;
            let due = now.saturating_add(micros(delay));
            sqlx::query(SQLITE_RETRY_SQL).bind(claim.id).bind(&json).bind(due).execute(&mut *conn).await?;
            Settled { deleted: given_up.rows_affected(), changed: 0 }
        }
    })
}

fn claim_of(id: i64, site: i64, rows: Vec<(String, i32)>) -> Option<Claim> {
    if rows.is_empty() {
        return None;
    }
    let attempts = rows.iter().map(|(_, a)| u32::try_from(*a).unwrap_or(0)).max().unwrap_or(0);
    Some(Claim { id, site, locs: rows.into_iter().map(|(loc, _)| loc).collect(), attempts })
}

/// Queued notifications per site: (site id, rows), for `/metrics`. O(queued rows): read only when notification
/// is on.
pub(super) const SIZE_SQL: &str = "SELECT site_id, count(*) FROM indexnow_outbox GROUP BY site_id ORDER BY site_id";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_ids_differ() {
        let ids: std::collections::HashSet<i64> = (0..10_000).map(|_| claim_id()).collect();
        assert_eq!(ids.len(), 10_000);
    }
}
