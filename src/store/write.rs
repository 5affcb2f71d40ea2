//! The write sequence both backends follow, written once: load → [`placement`] plan → write back, in the
//! transaction the backend began with its write lock held, then commit. The same for the one-time repair at
//! migration: scan → [`placement::recount`] → [`placement::plan_repair`] → write back → [`log_repair`].
//!
//! What differs stays in the backend, behind [`Writes`]: the clock, and how a batch is bound (Postgres: arrays,
//! `= ANY($1)` and `UNNEST`; SQLite: JSON for the lookup, one statement a row for the rest). So does the lock and
//! the beginning of the transaction (Postgres: an advisory lock; SQLite: an in-process mutex, `BEGIN IMMEDIATE`
//! and the check of the database file).
//!
//! A write to a site that notifies of changes (IndexNow) also queues the locs it changed in the outbox, in the same
//! transaction ([`super::outbox`]): what is committed is always queued, and a write that changes nothing (an
//! identical re-send) queues nothing. A site that does not notify costs no statement.

use std::collections::BTreeSet;

use sqlx::Transaction;

use super::shared::Sql;
use super::{DeleteCounts, Result, Written};
use crate::domain::Entry;
use crate::page::{Limits, PageState, StoredUrl};
use crate::placement::{self, Changes, NewUrl, UpsertCounts};

/// The site everything is stored in until several sites exist (their ids; the default site is 1).
pub const DEFAULT_SITE_ID: i64 = 1;

/// A backend's write statements.
pub(crate) trait Writes: Sql {
    /// The time a write stamps the pages it changes with. Called once a write holds the lock, before it loads
    /// (Postgres: the database's clock, and the write transaction's planner settings, which the lookup needs).
    fn now(conn: &mut Self::Connection) -> impl Future<Output = Result<i64>> + Send;
    /// The stored records of `locs`.
    fn lookup(conn: &mut Self::Connection, locs: &[&str]) -> impl Future<Output = Result<Vec<StoredUrl>>> + Send;
    /// Inserts or replaces the bookkeeping of `pages`.
    fn write_pages(conn: &mut Self::Connection, pages: &[PageState]) -> impl Future<Output = Result<()>> + Send;
    /// Writes an upsert plan's records: updates, then inserts in plan order (ids follow it, and so page order).
    fn write_urls(
        conn: &mut Self::Connection,
        updates: &[StoredUrl],
        inserts: &[NewUrl],
    ) -> impl Future<Output = Result<()>> + Send;
    fn delete_ids(conn: &mut Self::Connection, ids: &[i64]) -> impl Future<Output = Result<()>> + Send;
    /// Queues change notifications of `locs` (distinct, sorted) in `site`'s outbox: one row per loc, a loc already
    /// queued marked as changed again ([`super::outbox`]).
    fn enqueue_notifications(
        conn: &mut Self::Connection,
        site: i64,
        locs: &[&str],
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Queues the locs of `changes` in `site` when `notify` holds it; else nothing (no statement).
async fn enqueue<DB: Writes>(
    conn: &mut DB::Connection,
    notify: &BTreeSet<i64>,
    site: i64,
    changes: &Changes,
) -> Result<()> {
    if changes.locs.is_empty() || !notify.contains(&site) {
        return Ok(());
    }
    // Sorted: rows are locked in loc order, as a settling sender locks them (no deadlock between the two).
    let mut locs: Vec<&str> = changes.locs.iter().map(String::as_str).collect();
    locs.sort_unstable();
    DB::enqueue_notifications(conn, site, &locs).await
}

/// Upserts `entries` (not empty) in `tx`, which holds the write lock, and commits; the changed locs are queued for
/// notification when their site is in `notify`.
pub(crate) async fn upsert<DB: Writes>(
    mut tx: Transaction<'_, DB>,
    entries: &[Entry],
    limits: Limits,
    notify: &BTreeSet<i64>,
) -> Result<Written<UpsertCounts>> {
    let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
    let now = DB::now(&mut tx).await?;
    let existing = DB::lookup(&mut tx, &locs).await?;
    let pages = DB::pages_in(&mut tx).await?;
    let plan = placement::plan_upsert(entries, existing, pages, limits, now)?;
    DB::write_pages(&mut tx, &plan.pages).await?;
    DB::write_urls(&mut tx, &plan.updates, &plan.inserts).await?;
    if plan.news_changed {
        DB::touch_news(&mut tx, now).await?;
    }
    let counts = plan.counts;
    let changes = plan.into_changes();
    enqueue::<DB>(&mut tx, notify, DEFAULT_SITE_ID, &changes).await?;
    tx.commit().await?;
    Ok(Written { counts, changes })
}

/// Deletes the records of `locs` (distinct, not empty) in `tx`, which holds the write lock, and commits; the
/// deleted locs are queued for notification when their site is in `notify` (engines learn of the 404).
pub(crate) async fn delete<DB: Writes>(
    mut tx: Transaction<'_, DB>,
    locs: &[&str],
    notify: &BTreeSet<i64>,
) -> Result<Written<DeleteCounts>> {
    let now = DB::now(&mut tx).await?;
    let found = DB::lookup(&mut tx, locs).await?;
    let pages = DB::pages_in(&mut tx).await?;
    let plan = placement::plan_delete(locs.len(), found, pages, now);
    if !plan.ids.is_empty() {
        DB::delete_ids(&mut tx, &plan.ids).await?;
        DB::write_pages(&mut tx, &plan.pages).await?;
    }
    if plan.news_changed {
        DB::touch_news(&mut tx, now).await?;
    }
    let counts = DeleteCounts { deleted: plan.deleted, missing: plan.missing };
    let changes = plan.into_changes();
    enqueue::<DB>(&mut tx, notify, DEFAULT_SITE_ID, &changes).await?;
    tx.commit().await?;
    Ok(Written { counts, changes })
}

/// The one-time repair that migration 0002 leaves to the application (see [`placement::plan_repair`]).
const RECOUNT_TASK: &str = "recount_entries";

/// The repair migration 0002 leaves to the application, once, in `tx`, which holds the write lock (replicas
/// starting together do it once): records whose loc or size is not what this version would store are fixed, and
/// only their pages change. Commits when the task was pending; else `tx` is dropped (rolled back) unchanged.
pub(crate) async fn repair<DB: Writes>(mut tx: Transaction<'_, DB>, limits: Limits) -> Result<()> {
    if !DB::task_pending(&mut tx, RECOUNT_TASK).await? {
        return Ok(());
    }
    let stale = DB::stale_urls(&mut tx).await?;
    if !stale.is_empty() {
        let renamed: Vec<&str> = stale.iter().filter(|(u, l)| &u.loc != l).map(|(_, l)| l.as_str()).collect();
        let now = DB::now(&mut tx).await?;
        let taken = DB::lookup(&mut tx, &renamed).await?.into_iter().map(|u| u.loc).collect();
        let pages = DB::pages_in(&mut tx).await?;
        let plan = placement::plan_repair(stale, &taken, pages, limits, now)?;
        let dropped: Vec<i64> = plan.dropped.iter().map(|(u, _)| u.id).collect();
        DB::delete_ids(&mut tx, &dropped).await?;
        for u in &plan.updates {
            DB::repair_url(&mut tx, u).await?;
        }
        DB::write_pages(&mut tx, &plan.pages).await?;
        log_repair(&plan);
    }
    DB::task_done(&mut tx, RECOUNT_TASK).await?;
    tx.commit().await?;
    Ok(())
}

/// Logs what the repair did; no output when it found nothing to change.
fn log_repair(plan: &placement::RepairPlan) {
    for (url, reason) in &plan.dropped {
        tracing::warn!(loc = %url.loc, reason = reason.describe(), "upgrade: removed a record");
    }
    if !plan.updates.is_empty() || !plan.dropped.is_empty() {
        tracing::info!(
            repaired = plan.updates.len(),
            removed = plan.dropped.len(),
            pages = plan.pages.len(),
            "upgrade: records re-encoded (RFC 3986) or recounted; only their pages changed"
        );
    }
}
