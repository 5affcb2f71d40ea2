//! The write sequence both backends follow, written once: load → [`placement`] plan → write back, in the
//! transaction the backend began with its write lock held, then commit. The same for the one-time repair at
//! migration: scan → [`placement::recount`] → [`placement::plan_repair`] → write back → [`log_repair`].
//!
//! What differs stays in the backend, behind [`Writes`]: the clock, and how a batch is bound (Postgres: arrays,
//! `= ANY($1)` and `UNNEST`; SQLite: JSON for the lookup, many rows a statement for new records, one statement a
//! row for the rest). So does the lock and
//! the beginning of the transaction (Postgres: an advisory lock; SQLite: an in-process mutex, `BEGIN IMMEDIATE`
//! and the check of the database file).
//!
//! A write to a site that notifies of changes (IndexNow) also queues the locs it changed in the outbox, in the same
//! transaction ([`super::outbox`]): what is committed is always queued, and a write that changes nothing (an
//! identical re-send) queues nothing. A site that does not notify costs no statement.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::Transaction;

use super::health::Checks;
use super::hreflang;
use super::hreflang::{NodeRow, ProblemRow};
use super::shared::Sql;
use super::{DeleteCounts, Result, SiteUrl, StoreError, Written};
use sitemapd_core::domain::{ChangeFreq, Entry, LastMod, Section, Sites};
use sitemapd_core::hreflang::Policy;
use sitemapd_core::page::{Fields, Limits, PageState, StoredUrl, section_of};
use sitemapd_core::placement::{self, Changes, NewUrl, Stamps, UpsertCounts};

/// The target of this module's log lines: the one it had before the crate split (`sitemapd::store::write`), so that `RUST_LOG`
/// filters and log processing that name it keep working.
const LOG_TARGET: &str = "sitemapd::store::write";

/// The id of the site that everything stored before sites existed belongs to (migration 0004).
pub const DEFAULT_SITE_ID: i64 = 1;

/// A backend's write statements.
pub(crate) trait Writes: Sql {
    /// The time a write stamps the pages it changes with. Called once a write holds the lock, before it loads
    /// (Postgres: the database's clock, and the write transaction's planner settings, which the lookup needs).
    fn now(conn: &mut Self::Connection) -> impl Future<Output = Result<i64>> + Send;
    /// The stored records of `locs`, in whichever site they are stored.
    fn lookup(conn: &mut Self::Connection, locs: &[&str]) -> impl Future<Output = Result<Vec<SiteUrl>>> + Send;
    /// [`Writes::lookup`] for an upsert in `conn`'s transaction, which holds the write lock: a backend may share a
    /// large one with an idle connection of `pool` (the same database), which then sees what the transaction sees,
    /// since no writer commits while the lock is held and the transaction has written nothing yet.
    fn lookup_shared(
        conn: &mut Self::Connection,
        pool: Option<&sqlx::Pool<Self>>,
        locs: &[&str],
    ) -> impl Future<Output = Result<Vec<SiteUrl>>> + Send {
        let _ = pool;
        Self::lookup(conn, locs)
    }
    /// Inserts or replaces the bookkeeping of `site`'s `pages`.
    fn write_pages(
        conn: &mut Self::Connection,
        site: i64,
        pages: &[PageState],
    ) -> impl Future<Output = Result<()>> + Send;
    /// Writes an upsert plan's records of `site`: updates, then inserts in plan order (ids follow it, and so page
    /// order), each with the time of its last change in its page as `stamps` gives it (`changed_us`; an update
    /// without one keeps its stored time).
    fn write_urls(
        conn: &mut Self::Connection,
        site: i64,
        updates: &[StoredUrl],
        inserts: &[NewUrl],
        stamps: &Stamps,
    ) -> impl Future<Output = Result<()>> + Send;
    fn delete_ids(conn: &mut Self::Connection, ids: &[i64]) -> impl Future<Output = Result<()>> + Send;
    /// Keeps `locs` (deleted from `site` at `now_us`) as tombstones of the removed-URLs sitemap, each with the
    /// section its record was in (`sections`, in the same order; for the section's feed), a loc already kept with
    /// its new deletion time and section.
    fn add_removed(
        conn: &mut Self::Connection,
        site: i64,
        locs: &[&str],
        sections: &[i64],
        now_us: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Drops the tombstones of `locs` in `site` (stored again); how many there were.
    fn forget_removed(
        conn: &mut Self::Connection,
        site: i64,
        locs: &[&str],
    ) -> impl Future<Output = Result<u64>> + Send;
    /// Queues change notifications of `locs` (distinct, sorted) in `site`'s outbox: one row per loc, a loc already
    /// queued marked as changed again ([`super::outbox`]).
    fn enqueue_notifications(
        conn: &mut Self::Connection,
        site: i64,
        locs: &[&str],
    ) -> impl Future<Output = Result<()>> + Send;
    /// URL health: queues `locs` (distinct, sorted) of `site` for a check at `now_us`: a new loc due at once, a
    /// queued one moved on (its `seq`) and due at once unless a claim holds it ([`super::health`]).
    fn enqueue_checks(
        conn: &mut Self::Connection,
        site: i64,
        locs: &[&str],
        now_us: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// URL health: makes the checks of `locs` (distinct, sorted) of `site` that found a problem or failed due at
    /// once (or after their claim's settle): the app sent them again. A site without such a check: one probe.
    fn recheck(
        conn: &mut Self::Connection,
        site: i64,
        locs: &[&str],
        now_us: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// URL health: drops the checks of `locs` (distinct, sorted) of `site`, deleted.
    fn drop_checks(conn: &mut Self::Connection, site: i64, locs: &[&str]) -> impl Future<Output = Result<()>> + Send;
    /// URL health: queues the walk's records (id, loc) of `site`, due at `now_us`; rows already queued stay.
    fn seed_checks(
        conn: &mut Self::Connection,
        site: i64,
        walked: &[(i64, String)],
        now_us: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// hreflang: the nodes of `hrefs` (distinct): one probe of the primary key.
    fn hreflang_nodes(conn: &mut Self::Connection, hrefs: &[&str])
    -> impl Future<Output = Result<Vec<NodeRow>>> + Send;
    /// hreflang: every node of the clusters `keys` (distinct), through `hreflang_nodes_cluster`.
    fn hreflang_cluster_nodes(
        conn: &mut Self::Connection,
        keys: &[&str],
    ) -> impl Future<Output = Result<Vec<NodeRow>>> + Send;
    /// hreflang: the problems of the clusters `keys` (distinct), through `hreflang_problems_cluster`.
    fn hreflang_cluster_problems(
        conn: &mut Self::Connection,
        keys: &[&str],
    ) -> impl Future<Output = Result<Vec<ProblemRow>>> + Send;
    /// hreflang: inserts `rows`, or replaces the stored rows of their hrefs.
    fn hreflang_put_nodes(conn: &mut Self::Connection, rows: &[NodeRow]) -> impl Future<Output = Result<()>> + Send;
    /// hreflang: deletes the nodes of `hrefs`.
    fn hreflang_drop_nodes(conn: &mut Self::Connection, hrefs: &[&str]) -> impl Future<Output = Result<()>> + Send;
    /// hreflang: inserts `rows`, or replaces the stored rows of their keys (site, href, kind, hreflang).
    fn hreflang_put_problems(
        conn: &mut Self::Connection,
        rows: &[ProblemRow],
    ) -> impl Future<Output = Result<()>> + Send;
    /// hreflang: deletes the problems of `rows`' keys (site, href, kind, hreflang).
    fn hreflang_drop_problems(
        conn: &mut Self::Connection,
        rows: &[ProblemRow],
    ) -> impl Future<Output = Result<()>> + Send;
    /// URL health: the claim's statement (`$1` site, `$2` limit, `$3` claim, `$4` now, `$5` the lease's end);
    /// Postgres skips rows another claim has locked.
    const CLAIM_CHECKS_SQL: &'static str;
}

/// The sites whose writes queue something in their transaction, by id: change notifications (IndexNow) and URL
/// health checks.
#[derive(Clone, Debug, Default)]
pub(crate) struct Queues {
    pub notify: BTreeSet<i64>,
    pub check: BTreeSet<i64>,
}

/// The locs each site of `changes` in `sites` changed, distinct and in byte order (the order statements lock rows
/// in); sites that changed no loc are left out.
fn sorted_locs<'c>(
    sites: &'c BTreeSet<i64>,
    changes: &'c BTreeMap<i64, Changes>,
) -> impl Iterator<Item = (i64, Vec<&'c str>)> + 'c {
    changes.iter().filter(|(site, c)| !c.locs.is_empty() && sites.contains(site)).map(|(site, c)| {
        let mut locs: Vec<&str> = c.locs.iter().map(String::as_str).collect();
        locs.sort_unstable();
        locs.dedup();
        (*site, locs)
    })
}

/// Queues the locs each site of `changes` changed for a check, for the sites in `check`; else nothing (no
/// statement).
async fn enqueue_checks<DB: Writes>(
    conn: &mut DB::Connection,
    check: &BTreeSet<i64>,
    changes: &BTreeMap<i64, Changes>,
    now: i64,
) -> Result<()> {
    // Sorted: rows are locked in loc order (as the seed inserts them), so a write and a seed never deadlock.
    for (site, locs) in sorted_locs(check, changes) {
        DB::enqueue_checks(conn, site, &locs, now).await?;
    }
    Ok(())
}

/// Makes the checks of the locs a write sent again due at once, in the sites of `check`, where their last check
/// found a problem or failed: an app that writes a URL says it is there, and an excluded URL it re-sends unchanged
/// must not wait hours for its next check. A healthy URL re-sent unchanged is left alone (an app that re-sends
/// everything daily does not make a check storm), and a site without a problem row costs one index probe.
async fn recheck_resent<DB: Writes>(
    conn: &mut DB::Connection,
    check: &BTreeSet<i64>,
    groups: &[(i64, Cow<'_, [Entry]>)],
    now: i64,
) -> Result<()> {
    for (site, entries) in groups.iter().filter(|(site, _)| check.contains(site)) {
        let mut locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
        locs.sort_unstable();
        locs.dedup();
        DB::recheck(conn, *site, &locs, now).await?;
    }
    Ok(())
}

/// Drops the checks of the locs a delete removed from each site of `changes`, for the sites in `check`: nothing
/// is left to check. Else nothing (no statement).
async fn drop_checks<DB: Writes>(
    conn: &mut DB::Connection,
    check: &BTreeSet<i64>,
    changes: &BTreeMap<i64, Changes>,
) -> Result<()> {
    for (site, locs) in sorted_locs(check, changes) {
        DB::drop_checks(conn, site, &locs).await?;
    }
    Ok(())
}

/// Counts again the excluded records (URL health) of the pages a write changed in a site where one of them had
/// any: a record deleted, or moved to another page, takes its exclusion with it. `write_pages` leaves the stored
/// count alone, so it is never overwritten with the count loaded before the write. A site without exclusions
/// costs no statement.
async fn recount_excluded<DB: Checks>(conn: &mut DB::Connection, changes: &mut BTreeMap<i64, Changes>) -> Result<()> {
    for (site, changes) in changes.iter_mut() {
        if changes.pages.iter().any(|p| p.excluded > 0) {
            DB::recount(conn, *site, &mut changes.pages).await?;
        }
    }
    Ok(())
}

/// Queues the locs each site of `changes` changed, for the sites in `notify`; else nothing (no statement).
async fn enqueue<DB: Writes>(
    conn: &mut DB::Connection,
    notify: &BTreeSet<i64>,
    changes: &BTreeMap<i64, Changes>,
) -> Result<()> {
    // Sorted: rows are locked in loc order, as a settling sender locks them (no deadlock between the two).
    for (site, locs) in sorted_locs(notify, changes) {
        DB::enqueue_notifications(conn, site, &locs).await?;
    }
    Ok(())
}

/// Writes `site`'s changed `pages` and, when an entry with news changed, its news stamp. Either moves the site's
/// change counter on (`sites.changes`, by the triggers of migration 0006), so that a replica learns of the change
/// with one primary-key read ([`crate::sitemap::Directories`]); a write that changes nothing (an identical
/// re-send) writes nothing here, and the counter stays.
async fn write_changes<DB: Writes>(
    conn: &mut DB::Connection,
    site: i64,
    pages: &[PageState],
    news_changed: bool,
    now: i64,
) -> Result<()> {
    if pages.is_empty() && !news_changed {
        return Ok(());
    }
    DB::write_pages(conn, site, pages).await?;
    if news_changed {
        DB::touch_news(conn, site, now).await?;
    }
    Ok(())
}

/// Keeps the locs a delete removed from `site` as tombstones, each with the section its record was in (`sections`,
/// in the same order), and moves the site's removed-URLs stamp (and so its change counter); a delete that removed
/// nothing there writes nothing. Only while the removed-URLs sitemap is on.
async fn keep_removed<DB: Writes>(
    conn: &mut DB::Connection,
    site: i64,
    locs: &[String],
    sections: &[i64],
    now: i64,
) -> Result<()> {
    if locs.is_empty() {
        return Ok(());
    }
    let locs: Vec<&str> = locs.iter().map(String::as_str).collect();
    DB::add_removed(conn, site, &locs, sections, now).await?;
    DB::touch_removed(conn, site, now).await
}

/// Drops the tombstones of the locs an upsert stores in `site`, so that they leave the removed-URLs sitemap at
/// once, and moves the site's stamp when there were any. A site without tombstones (always, while the sitemap is
/// off) costs one index probe and nothing else: a bulk load does not send its locs twice.
async fn forget_removed<DB: Writes>(conn: &mut DB::Connection, site: i64, entries: &[Entry], now: i64) -> Result<()> {
    if !DB::has_removed(conn, site).await? {
        return Ok(());
    }
    let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
    if DB::forget_removed(conn, site, &locs).await? > 0 {
        DB::touch_removed(conn, site, now).await?;
    }
    Ok(())
}

/// Upserts `entries` (not empty) in `tx`, which holds the write lock, and commits. Each entry goes to the site its
/// loc lies under, and each site is planned on its own page table. A record stored in another site than its loc
/// now lies under (the sites' public URLs were changed) moves: it is deleted from the old site and created in the
/// new one, in the same transaction.
///
/// With [`Lookup::Skip`], nothing is looked up: the batch is planned as if none of its locs were stored, which is
/// the plan a lookup that finds nothing gives. If one is stored after all, the unique index of locs stops the
/// insert: the transaction is rolled back and the error returned ([`stored_after_all`]), and nothing was written.
pub(crate) async fn upsert<DB: Checks>(
    mut tx: Transaction<'_, DB>,
    sites: &Sites,
    entries: &[Entry],
    mode: Upsert,
    shape: &Shape,
    queues: &Queues,
    lookup: Lookup<'_, DB>,
) -> Result<Written<UpsertCounts>> {
    let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
    let now = DB::now(&mut tx).await?;
    let mut existing: BTreeMap<i64, Vec<StoredUrl>> = BTreeMap::new();
    if let Lookup::Find(pool) = lookup {
        for found in DB::lookup_shared(&mut tx, pool, &locs).await? {
            existing.entry(found.site).or_default().push(found.url);
        }
    }
    // hreflang: the nodes of the batch's locs and of the hrefs they name (one probe), before the import's merge,
    // which merges onto what a record declared, not onto what it renders.
    let probed = hreflang::probe::<DB>(&mut tx, &given_of(sites, entries)).await?;
    let merged;
    // Without news on either side, the import's merge is the API's replace: no copy.
    let has_news = |f: Option<&sitemapd_core::domain::Extensions>| f.is_some_and(|x| x.news.is_some());
    let no_news = entries.iter().all(|e| !has_news(e.ext.as_deref()))
        && existing.values().flatten().all(|u| !has_news(u.fields.ext.as_deref()));
    let entries = match mode {
        Upsert::Replace => entries,
        Upsert::Import if no_news => entries,
        Upsert::Import => {
            // The sections of the records stored outside the default section, by site and section id.
            let mut names: BTreeMap<(i64, i64), Section> = BTreeMap::new();
            for (site, urls) in &existing {
                if urls.iter().any(|u| section_of(u.page_id) != 0) {
                    let rows = DB::sections(&mut tx, *site).await?;
                    names.extend(super::named_sections(rows).into_iter().map(|(id, name)| ((*site, id), name)));
                }
            }
            // A node's record renders its cluster perhaps: it merges onto its declaration.
            let by_loc: HashMap<&str, &StoredUrl> = existing.values().flatten().map(|u| (u.loc.as_str(), u)).collect();
            let declared: BTreeMap<&str, Fields> = probed
                .iter()
                .filter(|row| row.2.is_some())
                .filter_map(|row| {
                    let url = by_loc.get(row.0.as_str())?;
                    let alternates = hreflang::read_declared(&row.0, row.3.as_deref()).unwrap_or_default();
                    Some((url.loc.as_str(), hreflang::with_alternates(&url.fields, alternates)))
                })
                .collect();
            let stored: BTreeMap<&str, (&Fields, Option<Section>)> = existing
                .iter()
                .flat_map(|(site, urls)| urls.iter().map(move |u| (*site, u)))
                .map(|(site, u)| {
                    let fields = declared.get(u.loc.as_str()).unwrap_or(&u.fields);
                    (u.loc.as_str(), (fields, names.get(&(site, section_of(u.page_id))).cloned()))
                })
                .collect();
            merged = import_merge(entries, &stored);
            &merged[..]
        }
    };
    let groups = by_site(sites, entries)?;
    // hreflang: the batch applied to its clusters; each entry stored with what it renders (a copy of the entry, so
    // that an identical re-send is unchanged), the other members re-rendered after the batch.
    let given: Vec<hreflang::Given> =
        groups.iter().flat_map(|(site, entries)| entries.iter().map(|e| hreflang::Given::entry(*site, e))).collect();
    let batch: HashMap<&str, &Entry> =
        groups.iter().flat_map(|(_, es)| es.iter().map(|e| (e.loc.as_str(), e))).collect();
    let ctx = hreflang::Ctx { sites, shape };
    let outcome = hreflang::apply::<DB>(&mut tx, &ctx, &given, &batch, &[], Some(probed), Vec::new()).await?;
    drop(batch);
    let groups = rendered(groups, &outcome.render);
    let mut written = Written::default();
    // Records stored in a site other than the one their loc lies under leave it first. With one site written and
    // every record found stored in it (one site configured, always), none can: the map is not made.
    let one_site = matches!(&groups[..], [(only, _)] if existing.keys().all(|site| site == only));
    let targets: BTreeMap<&str, i64> = if one_site {
        BTreeMap::new()
    } else {
        groups.iter().flat_map(|(site, entries)| entries.iter().map(move |e| (e.loc.as_str(), *site))).collect()
    };
    for (site, urls) in existing.iter_mut().filter(|_| !one_site) {
        let (leaving, staying): (Vec<StoredUrl>, Vec<StoredUrl>) =
            std::mem::take(urls).into_iter().partition(|u| targets.get(u.loc.as_str()) != Some(site));
        *urls = staying;
        if leaving.is_empty() {
            continue;
        }
        tracing::info!(target: LOG_TARGET, site, moving = leaving.len(), "records move to the site their loc now lies under");
        let pages = DB::pages_in(&mut tx, *site).await?;
        let plan = placement::plan_delete(leaving.len(), leaving, pages, now);
        DB::delete_ids(&mut tx, &plan.ids).await?;
        write_changes::<DB>(&mut tx, *site, &plan.pages, plan.news_changed, now).await?;
        merge(&mut written.changes, *site, plan.into_changes());
    }
    for (site, entries) in &groups {
        let stored = existing.remove(site).unwrap_or_default();
        let (layout, ids) = layout::<DB>(&mut tx, *site, entries, shape).await?;
        let pages = DB::pages_in(&mut tx, *site).await?;
        let section = |e: &Entry| e.section.as_ref().map_or(0, |s| ids[s.as_str()]);
        let plan = placement::plan_upsert(entries, section, stored, pages, layout, now)?;
        write_changes::<DB>(&mut tx, *site, &plan.pages, plan.news_changed, now).await?;
        if let Err(e) = DB::write_urls(&mut tx, *site, &plan.updates, &plan.inserts, &plan.stamps()).await {
            if matches!(lookup, Lookup::Skip) && stored_after_all(&e) {
                // Now, rather than when the transaction is dropped: the caller's next write waits for its lock.
                tx.rollback().await?;
            }
            return Err(e);
        }
        forget_removed::<DB>(&mut tx, *site, entries, now).await?;
        written.counts += plan.counts;
        merge(&mut written.changes, *site, plan.into_changes());
    }
    // Only what the batch changed is queued: the re-rendered members' pages change, not their locs.
    let queued = written.changes.clone();
    for (site, others) in outcome.others {
        let pages = hreflang::plan_others::<DB>(&mut tx, site, others, shape, now).await?;
        merge(&mut written.changes, site, Changes { pages, locs: Vec::new() });
    }
    recount_excluded::<DB>(&mut tx, &mut written.changes).await?;
    enqueue::<DB>(&mut tx, &queues.notify, &queued).await?;
    enqueue_checks::<DB>(&mut tx, &queues.check, &queued, now).await?;
    recheck_resent::<DB>(&mut tx, &queues.check, &groups, now).await?;
    tx.commit().await?;
    Ok(written)
}

/// How a store lays out pages, as configured: the page limits, the sections whose pages hold fewer URLs (by name,
/// in every site), and how many of the index's entries are kept for sitemaps other than pages.
#[derive(Clone, Debug)]
pub struct Shape {
    pub limits: Limits,
    pub section_max_urls: BTreeMap<String, u32>,
    /// The removed-URLs sitemap's retention in days (0: off, no tombstone kept). When on, it takes one of the
    /// index's entries (the news sitemap's is in [`placement::MAX_PAGES`] already).
    pub removed_days: u32,
    /// Each site's hreflang policy, by id ([`StoreOptions::hreflang`](super::StoreOptions::hreflang)); a site not
    /// listed is `as_sent`.
    pub hreflang: BTreeMap<i64, Policy>,
}

impl Shape {
    /// One page size for every section, and every index entry but the news sitemap's for pages.
    pub fn uniform(limits: Limits) -> Self {
        Self { limits, section_max_urls: BTreeMap::new(), removed_days: 0, hreflang: BTreeMap::new() }
    }

    /// The pages of all sections a site's index has room for.
    pub fn max_pages(&self) -> i64 {
        placement::MAX_PAGES - i64::from(self.removed_days > 0)
    }
}

/// The layout `site`'s write plans with, and the ids of its sections by name, the sections `entries` name
/// included: one a write names first is stored now, with the next id (the write lock is held, and the pages it
/// is given are written in this transaction, so readers learn of both together). A write that names no section,
/// to a deployment that sizes none, reads nothing.
pub(crate) async fn layout<DB: Writes>(
    conn: &mut DB::Connection,
    site: i64,
    entries: &[Entry],
    shape: &Shape,
) -> Result<(placement::Layout, BTreeMap<String, i64>)> {
    let named: BTreeSet<&str> = entries.iter().filter_map(|e| e.section.as_ref().map(Section::as_str)).collect();
    let mut ids = BTreeMap::new();
    if !named.is_empty() || !shape.section_max_urls.is_empty() {
        let stored = DB::sections(conn, site).await?;
        let mut next = stored.iter().map(|(id, _)| *id).max().unwrap_or(0) + 1;
        ids = stored.into_iter().map(|(id, name)| (name, id)).collect();
        for name in named {
            if !ids.contains_key(name) {
                DB::add_section(conn, site, next, name).await?;
                ids.insert(name.to_owned(), next);
                next += 1;
            }
        }
    }
    let section_urls = shape.section_max_urls.iter().filter_map(|(name, max)| Some((*ids.get(name)?, *max))).collect();
    let max_pages = shape.max_pages();
    Ok((placement::Layout { limits: shape.limits, section_urls, max_pages }, ids))
}

/// Upserts `entries` through the transactions `begin` gives. A large batch is planned as new records without a
/// lookup when the large batch before was all new (a bulk load of new records, where the lookup finds nothing and
/// costs the database an index search per row); otherwise with a lookup, and so is a guessed batch one of whose
/// locs was stored after all (again, in a new transaction). Either way the records, pages and counts are those the
/// lookup gives.
pub(crate) async fn upsert_guessing<DB: Checks, F, Fut>(
    guess: &Guess,
    begin: F,
    sites: &Sites,
    entries: &[Entry],
    (mode, shape): (Upsert, &Shape),
    queues: &Queues,
    pool: Option<&sqlx::Pool<DB>>,
) -> Result<Written<UpsertCounts>>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Transaction<'static, DB>>>,
{
    let large = entries.len() >= Guess::LARGE;
    if large && guess.all_new.load(Ordering::Relaxed) {
        match upsert(begin().await?, sites, entries, mode, shape, queues, Lookup::Skip).await {
            Err(e) if stored_after_all(&e) => {
                sitemapd_metrics::write_guess("stored");
                guess.all_new.store(false, Ordering::Relaxed);
            }
            written => {
                if written.is_ok() {
                    sitemapd_metrics::write_guess("new");
                }
                return written;
            }
        }
    }
    let written = upsert(begin().await?, sites, entries, mode, shape, queues, Lookup::Find(pool)).await?;
    if large {
        guess.all_new.store(written.counts.created == entries.len() as u64, Ordering::Relaxed);
    }
    Ok(written)
}

/// How an upsert learns what is stored for its locs.
pub(crate) enum Lookup<'p, DB: sqlx::Database> {
    /// It does not: the batch is planned as new records ([`upsert_guessing`]'s guess).
    Skip,
    /// By [`Writes::lookup_shared`], with this pool's idle connections if any.
    Find(Option<&'p sqlx::Pool<DB>>),
}

/// Whether the last large batch an [`upsert_guessing`] wrote was all new records.
#[derive(Debug, Default)]
pub(crate) struct Guess {
    all_new: AtomicBool,
}

impl Guess {
    /// The fewest entries of a batch that is planned without a lookup: below that, the lookup costs little, and a
    /// stream of small writes that alternate between new and stored records would pay for failed guesses.
    const LARGE: usize = 1_000;
}

/// Whether `e` is a unique violation: a loc planned as new was stored (by another replica, or before the guess).
pub(crate) fn stored_after_all(e: &StoreError) -> bool {
    matches!(e, StoreError::Other(sqlx::Error::Database(db)) if db.is_unique_violation())
}

/// How an upsert treats what is stored for an entry's loc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Upsert {
    /// The entry replaces the stored record whole (the write API).
    #[default]
    Replace,
    /// `sitemapd import`: a site's news sitemap and its other sitemaps often list the same URL, the news sitemap
    /// with its news (and perhaps a lastmod or an image), the others without news. So an entry without news keeps
    /// the news stored for its loc, and an entry with news keeps each field it does not give (lastmod, changefreq,
    /// priority, images, videos, alternates) as stored. Sources read in any order then give the same records
    /// (where both give a field, the later read wins), and a second import of the same sitemaps changes nothing.
    /// (An article that its legacy news sitemap drops keeps its news, which leaves the news sitemap with the
    /// window anyway.)
    Import,
}

/// `entries` as [`Upsert::Import`] merges them onto `stored` (by loc: the record and its section), in order: a
/// later duplicate of a loc merges onto the earlier one.
pub(crate) fn import_merge(entries: &[Entry], stored: &BTreeMap<&str, (&Fields, Option<Section>)>) -> Vec<Entry> {
    let mut latest: BTreeMap<&str, Entry> = BTreeMap::new();
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let loc = entry.loc.as_str();
        let base = match latest.get(loc) {
            Some(earlier) => Some((Fields::from(earlier), earlier.section.clone())),
            None => stored.get(loc).map(|(f, section)| ((*f).clone(), section.clone())),
        };
        let merged = match base {
            Some((base, section)) => merge_onto(entry, &base, section),
            None => entry.clone(),
        };
        latest.insert(loc, merged.clone());
        out.push(merged);
    }
    out
}

/// `entry` merged onto the record `base` (in `section`) by [`Upsert::Import`]'s rule.
fn merge_onto(entry: &Entry, base: &Fields, section: Option<Section>) -> Entry {
    let ext = entry.ext.as_deref();
    let mut merged = entry.clone();
    if ext.is_some_and(|x| x.news.is_some()) {
        // A news sitemap's entry: what it does not say, the record keeps, its section included (a news sitemap
        // is no section: the record stays where its other sitemap put it).
        if merged.section.is_none() {
            merged.section = section;
        }
        if merged.lastmod.is_none() {
            merged.lastmod = base.lastmod.as_deref().and_then(|l| LastMod::parse(l).ok());
        }
        if merged.changefreq.is_none() {
            merged.changefreq = base.changefreq.as_deref().and_then(|c| ChangeFreq::parse(c).ok());
        }
        merged.priority = merged.priority.or(base.priority);
        if let (Some(kept), Some(x)) = (base.ext.as_deref(), merged.ext.as_deref_mut()) {
            if x.images.is_empty() {
                x.images.clone_from(&kept.images);
            }
            if x.videos.is_empty() {
                x.videos.clone_from(&kept.videos);
            }
            if x.alternates.is_empty() {
                x.alternates.clone_from(&kept.alternates);
            }
        }
    } else if let Some(news) = base.ext.as_deref().and_then(|x| x.news.clone()) {
        // Any other entry keeps the record's news.
        let mut kept = ext.cloned().unwrap_or_default();
        kept.news = Some(news);
        merged.ext = Some(Box::new(kept));
    }
    merged
}

/// `entries` by the id of the site each lies under, in site order, each site's in request order. Borrowed when
/// they all lie under one site (the common case), copied only to split a request that spans sites.
fn by_site<'e>(sites: &Sites, entries: &'e [Entry]) -> Result<Vec<(i64, Cow<'e, [Entry]>)>> {
    let site_of = |e: &Entry| {
        sites
            .for_loc(e.loc.as_str())
            .map(|s| s.id)
            .ok_or_else(|| StoreError::NoSite(e.loc.as_str().to_owned(), sites.outside_message()))
    };
    let first = site_of(&entries[0])?;
    let mut groups: BTreeMap<i64, Vec<Entry>> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        let site = site_of(entry)?;
        if site != first && groups.is_empty() {
            groups.insert(first, entries[..i].to_vec());
        }
        if !groups.is_empty() {
            groups.entry(site).or_default().push(entry.clone());
        }
    }
    if groups.is_empty() {
        return Ok(vec![(first, Cow::Borrowed(entries))]);
    }
    Ok(groups.into_iter().map(|(site, entries)| (site, Cow::Owned(entries))).collect())
}

/// The hreflang probe's view of a batch: each entry with its declaration (its site, if under one: `by_site`
/// refuses the others afterwards).
fn given_of(sites: &Sites, entries: &[Entry]) -> Vec<hreflang::Given> {
    entries.iter().map(|e| hreflang::Given::entry(sites.for_loc(e.loc.as_str()).map_or(0, |s| s.id), e)).collect()
}

/// `groups` with each entry rendering what [`hreflang::apply`] decided; borrowed as they were when nothing changes.
fn rendered<'e>(
    groups: Vec<(i64, Cow<'e, [Entry]>)>,
    render: &HashMap<String, Vec<sitemapd_core::domain::ext::Alternate>>,
) -> Vec<(i64, Cow<'e, [Entry]>)> {
    if render.is_empty() {
        return groups;
    }
    groups
        .into_iter()
        .map(|(site, entries)| {
            let changed = entries.iter().any(|e| {
                render.get(e.loc.as_str()).is_some_and(|alternates| hreflang::rendering(e, alternates).is_some())
            });
            if !changed {
                return (site, entries);
            }
            let entries: Vec<Entry> = entries
                .iter()
                .map(|e| match render.get(e.loc.as_str()).and_then(|a| hreflang::rendering(e, a)) {
                    Some(rendered) => rendered,
                    None => e.clone(),
                })
                .collect();
            (site, Cow::Owned(entries))
        })
        .collect()
}

/// Adds `more` to what a write changed in `site`.
fn merge(changes: &mut BTreeMap<i64, Changes>, site: i64, more: Changes) {
    if more.is_empty() {
        return;
    }
    let entry = changes.entry(site).or_default();
    for page in more.pages {
        match entry.pages.iter_mut().find(|p| p.id == page.id) {
            Some(p) => *p = page,
            None => entry.pages.push(page),
        }
    }
    entry.pages.sort_by_key(|p| p.id);
    entry.locs.extend(more.locs);
}

/// Deletes the records of `locs` (distinct, not empty) in `tx`, which holds the write lock, and commits. Each is
/// deleted from the site it is stored in; with `tombstones` (the removed-URLs sitemap is on), its loc is kept as a
/// tombstone there ([`keep_removed`]). A loc stored nowhere changes nothing.
pub(crate) async fn delete<DB: Checks>(
    mut tx: Transaction<'_, DB>,
    sites: &Sites,
    locs: &[&str],
    queues: &Queues,
    shape: &Shape,
) -> Result<Written<DeleteCounts>> {
    let tombstones = shape.removed_days > 0;
    let now = DB::now(&mut tx).await?;
    let mut found: BTreeMap<i64, Vec<StoredUrl>> = BTreeMap::new();
    for url in DB::lookup(&mut tx, locs).await? {
        found.entry(url.site).or_default().push(url.url);
    }
    let mut written = Written { counts: DeleteCounts { deleted: 0, missing: locs.len() as u64 }, ..Default::default() };
    let mut gone: Vec<hreflang::Given> = Vec::new();
    for (site, urls) in found {
        let pages = DB::pages_in(&mut tx, site).await?;
        // Each record's section, in the order the plan lists their locs (the order it was given them).
        let sections: Vec<i64> = urls.iter().map(|u| section_of(u.page_id)).collect();
        let plan = placement::plan_delete(urls.len(), urls, pages, now);
        if !plan.ids.is_empty() {
            DB::delete_ids(&mut tx, &plan.ids).await?;
        }
        if tombstones {
            keep_removed::<DB>(&mut tx, site, &plan.locs, &sections, now).await?;
        }
        write_changes::<DB>(&mut tx, site, &plan.pages, plan.news_changed, now).await?;
        written.counts.deleted += plan.deleted;
        written.counts.missing -= plan.deleted;
        gone.extend(plan.locs.iter().map(|loc| hreflang::Given { href: loc.clone(), site: None, declared: None }));
        merge(&mut written.changes, site, plan.into_changes());
    }
    // hreflang: the deleted locs leave their clusters (one probe when none was in one); the other members are
    // re-rendered on the pages as the delete left them, and nothing is queued for them.
    let queued = written.changes.clone();
    if !gone.is_empty() {
        let ctx = hreflang::Ctx { sites, shape };
        let outcome = hreflang::apply::<DB>(&mut tx, &ctx, &gone, &HashMap::new(), &[], None, Vec::new()).await?;
        for (site, others) in outcome.others {
            let pages = hreflang::plan_others::<DB>(&mut tx, site, others, shape, now).await?;
            merge(&mut written.changes, site, Changes { pages, locs: Vec::new() });
        }
    }
    recount_excluded::<DB>(&mut tx, &mut written.changes).await?;
    enqueue::<DB>(&mut tx, &queues.notify, &queued).await?;
    drop_checks::<DB>(&mut tx, &queues.check, &queued).await?;
    tx.commit().await?;
    Ok(written)
}

/// Deletes at most `limit` tombstones of each of `sites` that are older than `days` days (by the write's clock),
/// in `tx`, which holds the write lock, and commits; how many it deleted. The sitemap never lists them anyway (its
/// window is the same), so a late purge shows nowhere; each site's stamp moves to the moment its newest purged
/// tombstone left the window, which the sitemap's Last-Modified already counted.
pub(crate) async fn purge_removed<DB: Writes>(
    mut tx: Transaction<'_, DB>,
    sites: &Sites,
    days: u32,
    limit: u32,
) -> Result<u64> {
    let window = i64::from(days) * super::MICROS_PER_DAY;
    let before = DB::now(&mut tx).await? - window;
    let mut purged = 0;
    for site in sites.iter() {
        purged += DB::purge_removed_in(&mut tx, site.id, before, window, limit).await?;
    }
    tx.commit().await?;
    Ok(purged)
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
    // Only databases written before migration 0002 have the task pending: all their records are the default
    // site's (migration 0004 gave them to it).
    let stale = DB::stale_urls(&mut tx, DEFAULT_SITE_ID).await?;
    if !stale.is_empty() {
        let renamed: Vec<&str> = stale.iter().filter(|(u, l)| &u.loc != l).map(|(_, l)| l.as_str()).collect();
        let now = DB::now(&mut tx).await?;
        let taken = DB::lookup(&mut tx, &renamed).await?.into_iter().map(|u| u.url.loc).collect();
        let pages = DB::pages_in(&mut tx, DEFAULT_SITE_ID).await?;
        let plan = placement::plan_repair(stale, &taken, pages, limits, now)?;
        let dropped: Vec<i64> = plan.dropped.iter().map(|(u, _)| u.id).collect();
        DB::delete_ids(&mut tx, &dropped).await?;
        for u in &plan.updates {
            DB::repair_url(&mut tx, u).await?;
        }
        write_changes::<DB>(&mut tx, DEFAULT_SITE_ID, &plan.pages, false, now).await?;
        log_repair(&plan);
    }
    DB::task_done(&mut tx, RECOUNT_TASK).await?;
    tx.commit().await?;
    Ok(())
}

/// Logs what the repair did; no output when it found nothing to change.
fn log_repair(plan: &placement::RepairPlan) {
    for (url, reason) in &plan.dropped {
        tracing::warn!(target: LOG_TARGET, loc = %url.loc, reason = reason.describe(), "upgrade: removed a record");
    }
    if !plan.updates.is_empty() || !plan.dropped.is_empty() {
        tracing::info!(target: LOG_TARGET,
            repaired = plan.updates.len(),
            removed = plan.dropped.len(),
            pages = plan.pages.len(),
            "upgrade: records re-encoded (RFC 3986) or recounted; only their pages changed"
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use sitemapd_core::domain::PublicUrl;

    fn entry(value: serde_json::Value) -> Entry {
        Entry::from_json(value, &PublicUrl::parse("https://www.example.com").unwrap()).unwrap()
    }

    const LOC: &str = "https://www.example.com/a";

    fn news() -> serde_json::Value {
        json!({"publication": {"name": "The Times", "language": "en"}, "publication_date": "2024-05-01",
               "title": "A"})
    }

    fn page() -> Entry {
        entry(json!({"loc": LOC, "lastmod": "2024-05-02", "images": [{"loc": "https://cdn.example.net/1.jpg"}]}))
    }

    fn news_only() -> Entry {
        entry(json!({"loc": LOC, "news": news()}))
    }

    fn both() -> Entry {
        entry(json!({"loc": LOC, "lastmod": "2024-05-02", "images": [{"loc": "https://cdn.example.net/1.jpg"}],
                     "news": news()}))
    }

    #[test]
    fn a_news_sitemap_and_a_page_sitemap_make_one_record_in_either_order() {
        let none = BTreeMap::new();
        for order in [[page(), news_only()], [news_only(), page()]] {
            let merged = import_merge(&order, &none);
            assert_eq!(merged.last().unwrap(), &both(), "{order:?}");
        }
        let stored = Fields::from(&both());
        let on_record = BTreeMap::from([(LOC, (&stored, None))]);
        assert_eq!(import_merge(&[page()], &on_record), [both()], "the page keeps the stored news");
        assert_eq!(import_merge(&[news_only()], &on_record), [both()], "the news keeps the stored fields");
    }

    #[test]
    fn an_entry_with_news_keeps_what_it_does_not_give_and_any_other_keeps_only_the_news() {
        let stored = Fields::from(&both());
        let on_record = BTreeMap::from([(LOC, (&stored, None))]);
        let fresh_news = entry(json!({"loc": LOC, "priority": 0.5, "lastmod": "2024-06-01", "news": news()}));
        let merged = import_merge(std::slice::from_ref(&fresh_news), &on_record);
        let lastmod = merged[0].lastmod.as_ref().map(LastMod::as_str);
        assert_eq!((merged[0].priority, lastmod), (fresh_news.priority, Some("2024-06-01")), "what it gives, it sets");
        assert_eq!(merged[0].ext.as_ref().unwrap().images.len(), 1, "what the news entry does not give stays");
        let bare = entry(json!({"loc": LOC}));
        let merged = import_merge(&[bare], &on_record);
        assert_eq!(merged[0].lastmod, None, "lastmod and images go as the API's replace does");
        assert!(merged[0].ext.as_ref().unwrap().images.is_empty());
        assert!(merged[0].ext.as_ref().unwrap().news.is_some(), "only the news stays");
        let other = BTreeMap::new();
        assert_eq!(import_merge(&[page()], &other), [page()], "nothing stored: as given");
    }

    #[test]
    fn a_news_entry_keeps_the_section_its_other_sitemap_gave() {
        let products = Section::parse("products").unwrap();
        let in_products = |e: Entry| Entry { section: Some(products.clone()), ..e };
        // Read in either order: the page sitemap's section stays.
        for order in [[in_products(page()), news_only()], [news_only(), in_products(page())]] {
            let merged = import_merge(&order, &BTreeMap::new());
            assert_eq!(merged.last().unwrap(), &in_products(both()), "{order:?}");
        }
        // Stored in a section: a news entry leaves it there; a page entry names its own (none: the default).
        let stored = Fields::from(&both());
        let on_record = BTreeMap::from([(LOC, (&stored, Some(products.clone())))]);
        assert_eq!(import_merge(&[news_only()], &on_record), [in_products(both())]);
        assert_eq!(import_merge(&[page()], &on_record)[0].section, None);
    }
}
