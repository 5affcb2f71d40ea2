//! Placement (bin packing): which page each URL lives on, and the page bookkeeping that a write changes.
//!
//! Pure and shared by both stores: a store locks the write path, loads the affected URLs and the page table, calls
//! [`plan_upsert`] or [`plan_delete`], and writes the plan back in the same transaction. A URL is placed on a page
//! when it is first stored and stays there (first fit: the lowest-numbered page with room, a new page only when none
//! has room), so a change touches the page holding the URL and nothing else. The only exception is an update that
//! grows an entry past its page's byte limit: it moves to a page with room, touching both.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::domain::Entry;
use crate::domain::ext::Namespaces;
use crate::page::{
    EntryTooLarge, Fields, Limits, PageState, StoredUrl, number_of, page_id, section_ids, section_of, url_size,
};

/// The least a page's `modified_us` advances by on a change: the index renders it in whole milliseconds.
pub const MIN_STEP_US: i64 = 1_000;

/// The most pages: one index may list 50,000 sitemaps (sitemaps.org), and one of them is kept for the news
/// sitemap.
pub const MAX_PAGES: i64 = 49_999;

/// Why an upsert cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Full(#[from] IndexFull),
    /// An entry no page can hold (`loc`, and why).
    #[error("{0}: {1}")]
    TooLarge(String, EntryTooLarge),
}

/// A write that would need a page beyond the room of the site's index ([`Layout::max_pages`], at most
/// [`MAX_PAGES`]), all sections together. The room counts the pages that hold a URL, the ones the index lists: an
/// empty page (its URLs deleted, in any section) holds none of it, and a write that fills one again needs room as
/// a new page does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the sitemap index is full: its sections' pages and the other sitemaps it lists take the 50,000 entries one \
     index may list, the protocol's maximum"
)]
pub struct IndexFull;

#[derive(Clone, Debug, PartialEq)]
pub struct NewUrl {
    pub loc: String,
    pub page_id: i64,
    pub fields: Fields,
    pub size: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct UpsertCounts {
    pub received: u64,
    pub created: u64,
    pub updated: u64,
    pub unchanged: u64,
}

impl std::ops::AddAssign for UpsertCounts {
    fn add_assign(&mut self, o: Self) {
        self.received += o.received;
        self.created += o.created;
        self.updated += o.updated;
        self.unchanged += o.unchanged;
    }
}

/// What a write changed: the pages it touched, with their new bookkeeping, and the locs it created, updated or
/// deleted. Empty when it changed nothing (an identical re-send, a delete of what is not stored). Every write
/// returns it, so that what derives from stored state (this process's page table, a change notification) is
/// brought up to date in one place.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Changes {
    pub pages: Vec<PageState>,
    pub locs: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty() && self.locs.is_empty()
    }
}

#[derive(Debug, Default)]
pub struct UpsertPlan {
    pub inserts: Vec<NewUrl>,
    /// Stored records as the plan leaves them (their id and loc unchanged).
    pub updates: Vec<StoredUrl>,
    /// Every page the write changes (new ones included), with its new bookkeeping.
    pub pages: Vec<PageState>,
    pub counts: UpsertCounts,
    /// Whether an entry with news was created, or had its news changed or removed: the news sitemap changes.
    pub news_changed: bool,
    /// The ids of the `updates` whose change their page does not show (their news alone): their page is not
    /// touched for them, so their last change in the page stays.
    pub news_only: BTreeSet<i64>,
}

/// When each record a plan writes last changed as its page shows it: the new `modified_us` of the page version
/// that first holds it as written, so that a crawler's read of that version or a later one has read the record's
/// change. `None` for an update of its news alone (the page does not show it: the stored time stays).
#[derive(Debug, Default)]
pub struct Stamps {
    pages: BTreeMap<i64, i64>,
    news_only: BTreeSet<i64>,
}

impl Stamps {
    pub fn of_update(&self, url: &StoredUrl) -> Option<i64> {
        if self.news_only.contains(&url.id) {
            return None;
        }
        self.pages.get(&url.page_id).copied()
    }

    pub fn of_insert(&self, url: &NewUrl) -> Option<i64> {
        self.pages.get(&url.page_id).copied()
    }
}

impl UpsertPlan {
    /// When each record the plan writes last changed in its page ([`Stamps`]).
    pub fn stamps(&self) -> Stamps {
        Stamps { pages: self.pages.iter().map(|p| (p.id, p.modified_us)).collect(), news_only: self.news_only.clone() }
    }

    /// What the plan changed, once written: its pages and locs moved out, not copied (an NDJSON batch holds
    /// thousands).
    pub fn into_changes(self) -> Changes {
        let locs = self.inserts.into_iter().map(|n| n.loc).chain(self.updates.into_iter().map(|u| u.loc));
        Changes { pages: self.pages, locs: locs.collect() }
    }
}

/// A delete as planned: what to remove, and the pages it leaves behind.
#[derive(Debug, Default)]
pub struct DeletePlan {
    /// The records to delete, and their locs (in the same order).
    pub ids: Vec<i64>,
    pub locs: Vec<String>,
    /// The pages that lose a record, with their new bookkeeping (a page left empty stays, with no URLs).
    pub pages: Vec<PageState>,
    /// Of the distinct locs asked for: how many were stored, and how many were not.
    pub deleted: u64,
    pub missing: u64,
    /// Whether a deleted entry had news.
    pub news_changed: bool,
}

/// How a site's pages are laid out: the page limits (every section's byte limit, and the default URL limit), the
/// sections with a URL limit of their own, and how many pages the site's index has room for, all sections together.
#[derive(Clone, Debug)]
pub struct Layout {
    pub limits: Limits,
    /// Sections (by id) whose pages hold at most this many URLs, fewer than `limits.max_urls`.
    pub section_urls: BTreeMap<i64, u32>,
    /// The most pages that hold a URL, of all sections together: [`MAX_PAGES`], less the index entries kept for
    /// other sitemaps. Empty pages are not counted ([`IndexFull`]).
    pub max_pages: i64,
}

impl Layout {
    /// How many URLs the page with id `page_id` may hold.
    fn room(&self, page_id: i64) -> i64 {
        i64::from(self.max_urls(section_of(page_id)))
    }

    /// One limit for every section, and the whole index for pages.
    pub fn uniform(limits: Limits) -> Self {
        Self { limits, section_urls: BTreeMap::new(), max_pages: MAX_PAGES }
    }

    /// The URL limit of section `section`'s pages.
    pub fn max_urls(&self, section: i64) -> u32 {
        self.section_urls.get(&section).copied().unwrap_or(self.limits.max_urls).min(self.limits.max_urls)
    }
}

/// The page table while a plan is made.
struct Book {
    layout: Layout,
    pages: BTreeMap<i64, PageState>,
    /// Pages below their section's URL limit, in id order (so by section, then page number): the candidates for
    /// first fit.
    open: BTreeSet<i64>,
    touched: BTreeSet<i64>,
    /// How many pages hold a URL: what takes the index's room ([`Layout::max_pages`]).
    held: i64,
}

impl Book {
    fn new(pages: Vec<PageState>, layout: Layout) -> Self {
        let open = pages.iter().filter(|p| p.url_count < layout.room(p.id)).map(|p| p.id).collect();
        let held = pages.iter().filter(|p| p.url_count > 0).count() as i64;
        let pages = pages.into_iter().map(|p| (p.id, p)).collect();
        Self { layout, pages, open, touched: BTreeSet::new(), held }
    }

    /// Whether the index has room for one more page that holds a URL.
    fn has_room(&self) -> bool {
        self.held < self.layout.max_pages
    }

    fn fits_bytes(&self, page: &PageState, extra: i64) -> bool {
        self.layout.limits.fits_bytes(page.byte_size + extra)
    }

    fn add(&mut self, page_id: i64, size: i64, ns: Namespaces) {
        let room = self.layout.room(page_id);
        let page = self.pages.get_mut(&page_id).expect("page exists");
        self.held += i64::from(page.url_count == 0);
        page.url_count += 1;
        page.byte_size += size;
        page.ns.count(ns, 1);
        if page.url_count >= room {
            self.open.remove(&page_id);
        }
        self.touched.insert(page_id);
    }

    fn remove(&mut self, page_id: i64, size: i64, ns: Namespaces) {
        let room = self.layout.room(page_id);
        let page = self.pages.get_mut(&page_id).expect("a stored URL's page exists");
        page.url_count -= 1;
        self.held -= i64::from(page.url_count == 0);
        page.byte_size -= size;
        page.ns.count(ns, -1);
        if page.url_count < room {
            self.open.insert(page_id);
        }
        self.touched.insert(page_id);
    }

    /// First fit within `section`: its lowest-numbered page with room for `size` more bytes, or a new page after
    /// its last. An empty page, or a new one, only when the index has room for one more page that holds a URL.
    fn place(&mut self, section: i64, size: i64, ns: Namespaces) -> Result<i64, IndexFull> {
        let ids = section_ids(section);
        let room = self.has_room();
        let found = self.open.range(ids.clone()).copied().find(|id| {
            let page = &self.pages[id];
            (room || page.url_count > 0) && self.fits_bytes(page, size)
        });
        let id = match found {
            Some(id) => id,
            None => {
                let id = self.pages.range(ids).next_back().map_or(page_id(section, 1), |(last, _)| last + 1);
                if !room || number_of(id) == 0 {
                    return Err(IndexFull);
                }
                let empty =
                    PageState { id, url_count: 0, byte_size: 0, version: 0, modified_us: 0, ..PageState::default() };
                // Config guarantees that an empty page has room for any valid entry.
                debug_assert!(self.fits_bytes(&empty, size));
                self.pages.insert(id, empty);
                self.open.insert(id);
                id
            }
        };
        self.add(id, size, ns);
        Ok(id)
    }

    /// The touched pages with their version and modification time advanced, and compressed the current way.
    fn finish(mut self, now_us: i64) -> Vec<PageState> {
        self.touched
            .iter()
            .map(|id| {
                let page = self.pages.get_mut(id).expect("touched page exists");
                page.version += 1;
                // A changed page is compressed the current way; one left alone keeps its way, bytes and ETag.
                page.gzip = crate::page::Gzip::CURRENT;
                // At least a millisecond later: the index shows times in milliseconds, and each change must show.
                page.modified_us = now_us.max(page.modified_us + MIN_STEP_US);
                page.clone()
            })
            .collect()
    }
}

/// Plans an upsert of `entries` (in request order; a later duplicate of a loc wins), each in the section (by id)
/// `section` gives it. `existing` holds the stored records for those locs; `pages` is the site's whole page table,
/// every section's. Counts are by effect on the store: each distinct loc is created, updated or unchanged, and an
/// earlier duplicate that a later one supersedes counts as unchanged. A record that changes section leaves its
/// page and is placed in the other section's: two pages change.
pub fn plan_upsert(
    entries: &[Entry],
    section: impl Fn(&Entry) -> i64,
    existing: Vec<StoredUrl>,
    pages: Vec<PageState>,
    layout: Layout,
    now_us: i64,
) -> Result<UpsertPlan, PlanError> {
    let limits = layout.limits;
    let mut counts = UpsertCounts { received: entries.len() as u64, ..Default::default() };
    // The position of each loc's last entry, and the order in which locs first appear. The maps hold positions,
    // not records: a batch's maps then stay small enough for the CPU's caches, and no loc is copied.
    let mut last: HashMap<&str, usize> = HashMap::with_capacity(entries.len());
    let mut order: Vec<&str> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let loc = entry.loc.as_str();
        if last.insert(loc, i).is_none() {
            order.push(loc);
        } else {
            // An earlier duplicate is superseded: it has no effect on the store.
            counts.unchanged += 1;
        }
    }
    // Each stored record by the loc of its entry (the lookup found it by one of them).
    let mut stored: HashMap<&str, usize> = HashMap::with_capacity(existing.len());
    for (j, url) in existing.iter().enumerate() {
        if let Some((&loc, _)) = last.get_key_value(url.loc.as_str()) {
            stored.insert(loc, j);
        }
    }
    let mut existing: Vec<Option<StoredUrl>> = existing.into_iter().map(Some).collect();

    let mut book = Book::new(pages, layout);
    let mut plan = UpsertPlan::default();
    for loc in order {
        let entry = &entries[last[loc]];
        let target = section(entry);
        let old = stored.get(loc).and_then(|&j| existing[j].take());
        let moves = old.as_ref().is_some_and(|old| section_of(old.page_id) != target);
        if let Some(old) = &old
            && !moves
            && old.fields.are_of(entry)
        {
            // Its size is the one stored (the same loc and fields; a size counted wrong by an earlier version is
            // repaired at migration), not counted again: the counting would be most of an identical re-send's cost.
            limits.check_entry(old.size).map_err(|e| PlanError::TooLarge(loc.to_owned(), e))?;
            counts.unchanged += 1;
            continue;
        }
        let fields = Fields::from(entry);
        let size = url_size(loc, &fields);
        limits.check_entry(size).map_err(|e| PlanError::TooLarge(loc.to_owned(), e))?;
        let ns = fields.namespaces();
        match old {
            None => {
                counts.created += 1;
                plan.news_changed |= fields.news().is_some();
                let page_id = book.place(target, size, ns)?;
                plan.inserts.push(NewUrl { loc: loc.to_owned(), page_id, fields, size });
            }
            // Only its news changed, which its page does not show: the page keeps its bytes, version and time.
            Some(old) if !moves && old.fields.same_in_page(&fields) => {
                counts.updated += 1;
                plan.news_changed = true;
                plan.news_only.insert(old.id);
                plan.updates.push(StoredUrl { fields, ..old });
            }
            Some(old) => {
                counts.updated += 1;
                plan.news_changed |= old.fields.news() != fields.news();
                let page = &book.pages[&old.page_id];
                let page_id = if !moves && book.fits_bytes(page, size - old.size) {
                    book.remove(old.page_id, old.size, old.fields.namespaces());
                    book.add(old.page_id, size, ns);
                    old.page_id
                } else {
                    book.remove(old.page_id, old.size, old.fields.namespaces());
                    book.place(target, size, ns)?
                };
                plan.updates.push(StoredUrl { id: old.id, loc: old.loc, page_id, fields, size });
            }
        }
    }
    plan.pages = book.finish(now_us);
    plan.counts = counts;
    Ok(plan)
}

/// Plans the deletion of `found`, the stored records among `requested` distinct locs.
pub fn plan_delete(requested: usize, found: Vec<StoredUrl>, pages: Vec<PageState>, now_us: i64) -> DeletePlan {
    let limits = Limits { max_urls: u32::MAX, max_bytes: u64::MAX };
    let mut book = Book::new(pages, Layout { max_pages: i64::MAX, ..Layout::uniform(limits) });
    let mut ids = Vec::with_capacity(found.len());
    let mut locs = Vec::with_capacity(found.len());
    let mut news_changed = false;
    for url in found {
        news_changed |= url.fields.news().is_some();
        book.remove(url.page_id, url.size, url.fields.namespaces());
        ids.push(url.id);
        locs.push(url.loc);
    }
    let deleted = ids.len() as u64;
    DeletePlan { ids, locs, pages: book.finish(now_us), deleted, missing: requested as u64 - deleted, news_changed }
}

impl DeletePlan {
    /// What the plan changed, once written.
    pub fn into_changes(self) -> Changes {
        Changes { pages: self.pages, locs: self.locs }
    }
}

/// Whether a stored record is what the current version would store: `None` when it is, else the loc it should have
/// (equal to its stored loc when only its size was counted wrong). Records written by earlier versions can differ in
/// two ways: a loc with characters RFC 3986 forbids (see [`crate::domain::rfc3986`]), and a size counted for a
/// priority of `-0.0` that the store gave back as `0.0`.
pub fn recount(url: &StoredUrl) -> Option<String> {
    let loc = crate::domain::rfc3986(&url.loc);
    (loc != url.loc.as_str() || url_size(&loc, &url.fields) != url.size).then(|| loc.into_owned())
}

/// A record as the repair leaves it.
#[derive(Clone, Debug, PartialEq)]
pub struct RepairedUrl {
    pub id: i64,
    pub loc: String,
    pub page_id: i64,
    pub size: i64,
}

#[derive(Debug, Default)]
pub struct RepairPlan {
    pub updates: Vec<RepairedUrl>,
    /// Records removed, each with the reason: another record is already stored under the loc it should have (that
    /// one is kept, as every later write of either spelling reaches it), or its loc grows past
    /// [`MAX_LOC_LEN`](crate::domain::MAX_LOC_LEN) once encoded, which no write could store.
    pub dropped: Vec<(StoredUrl, DropReason)>,
    pub pages: Vec<PageState>,
}

/// Why the repair removed a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    AlreadyStored,
    TooLong,
}

impl DropReason {
    pub fn describe(self) -> &'static str {
        match self {
            DropReason::AlreadyStored => "its RFC 3986 form is already stored",
            DropReason::TooLong => "its RFC 3986 form is 2048 characters or longer, which no write can store",
        }
    }
}

/// Plans the one-time repair of `stale` records (with the loc [`recount`] gave each, in id order). `taken` holds the
/// locs among those that other records are stored under. Each record keeps its page when the page has room for
/// its new size (always, when it shrinks), else it moves as a grown update does; the pages it touches get a new
/// version and time, and no other page changes.
pub fn plan_repair(
    stale: Vec<(StoredUrl, String)>,
    taken: &std::collections::HashSet<String>,
    pages: Vec<PageState>,
    limits: Limits,
    now_us: i64,
) -> Result<RepairPlan, IndexFull> {
    let mut book = Book::new(pages, Layout::uniform(limits));
    let mut claimed = std::collections::HashSet::with_capacity(stale.len());
    let mut plan = RepairPlan::default();
    for (old, loc) in stale {
        let renamed = loc != old.loc;
        let drop = if loc.len() >= crate::domain::MAX_LOC_LEN {
            Some(DropReason::TooLong)
        } else if (renamed && taken.contains(&loc)) || !claimed.insert(loc.clone()) {
            Some(DropReason::AlreadyStored)
        } else {
            None
        };
        let ns = old.fields.namespaces();
        if let Some(reason) = drop {
            book.remove(old.page_id, old.size, ns);
            plan.dropped.push((old, reason));
            continue;
        }
        let size = url_size(&loc, &old.fields);
        book.remove(old.page_id, old.size, ns);
        let page_id = if book.fits_bytes(&book.pages[&old.page_id], size) {
            book.add(old.page_id, size, ns);
            old.page_id
        } else {
            book.place(section_of(old.page_id), size, ns)?
        };
        plan.updates.push(RepairedUrl { id: old.id, loc, page_id, size });
    }
    plan.pages = book.finish(now_us);
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::{Loc, Priority, PublicUrl};
    use crate::page::render::ENVELOPE_RESERVE;

    /// An in-memory store that applies plans the way the SQL stores do.
    #[derive(Default)]
    struct Model {
        urls: BTreeMap<i64, StoredUrl>,
        pages: BTreeMap<i64, PageState>,
        next_id: i64,
        now: i64,
    }

    impl Model {
        fn upsert(&mut self, entries: &[Entry], limits: Limits) -> (UpsertCounts, BTreeSet<i64>) {
            self.upsert_in(entries, Layout::uniform(limits))
        }

        fn upsert_in(&mut self, entries: &[Entry], layout: Layout) -> (UpsertCounts, BTreeSet<i64>) {
            let limits = layout.limits;
            let locs: BTreeSet<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
            let existing = self.urls.values().filter(|u| locs.contains(u.loc.as_str())).cloned().collect();
            self.now += 1000;
            let pages = self.pages.values().cloned().collect();
            let plan = match plan_upsert(entries, section_id, existing, pages, layout, self.now) {
                Ok(plan) => plan,
                Err(PlanError::TooLarge(loc, e)) => {
                    // Refused as a whole: the entry really is larger than any page, and nothing changes.
                    let entry = entries.iter().rfind(|x| x.loc.as_str() == loc).unwrap(); // the last one wins
                    let size = url_size(&loc, &Fields::from(entry));
                    assert!(!limits.fits_bytes(size) && e.size == size, "{loc}: {e}");
                    return (UpsertCounts::default(), BTreeSet::new());
                }
                Err(e) => panic!("{e}"),
            };
            for u in plan.updates {
                let row = self.urls.get_mut(&u.id).unwrap();
                (row.page_id, row.fields, row.size) = (u.page_id, u.fields, u.size);
            }
            for n in plan.inserts {
                self.next_id += 1;
                let id = self.next_id;
                self.urls.insert(id, StoredUrl { id, loc: n.loc, page_id: n.page_id, fields: n.fields, size: n.size });
            }
            let touched = plan.pages.iter().map(|p| p.id).collect();
            for p in plan.pages {
                self.pages.insert(p.id, p);
            }
            (plan.counts, touched)
        }

        /// Upserts `entries` with sections by [`section_of_name`], applying the plan when it is made.
        fn try_upsert_in(&mut self, entries: &[Entry], layout: &Layout) -> Result<(), PlanError> {
            let locs: BTreeSet<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
            let existing = self.urls.values().filter(|u| locs.contains(u.loc.as_str())).cloned().collect();
            let pages = self.pages.values().cloned().collect();
            let plan = plan_upsert(entries, section_of_name, existing, pages, layout.clone(), self.now + 1000)?;
            self.now += 1000;
            for u in plan.updates {
                let row = self.urls.get_mut(&u.id).unwrap();
                (row.page_id, row.fields, row.size) = (u.page_id, u.fields, u.size);
            }
            for n in plan.inserts {
                self.next_id += 1;
                let id = self.next_id;
                self.urls.insert(id, StoredUrl { id, loc: n.loc, page_id: n.page_id, fields: n.fields, size: n.size });
            }
            for p in plan.pages {
                self.pages.insert(p.id, p);
            }
            Ok(())
        }

        fn delete(&mut self, locs: &[String]) -> BTreeSet<i64> {
            let found: Vec<_> = self.urls.values().filter(|u| locs.contains(&u.loc)).cloned().collect();
            self.now += 1000;
            let plan = plan_delete(locs.len(), found, self.pages.values().cloned().collect(), self.now);
            for id in &plan.ids {
                self.urls.remove(id);
            }
            let touched = plan.pages.iter().map(|p| p.id).collect();
            for p in plan.pages {
                self.pages.insert(p.id, p);
            }
            touched
        }

        fn check(&self, limits: Limits) {
            self.check_in(&Layout::uniform(limits));
        }

        fn check_in(&self, layout: &Layout) {
            let limits = layout.limits;
            for page in self.pages.values() {
                let urls: Vec<_> = self.urls.values().filter(|u| u.page_id == page.id).collect();
                assert_eq!(page.url_count, urls.len() as i64, "count of page {}", page.id);
                assert_eq!(page.byte_size, urls.iter().map(|u| u.size).sum::<i64>(), "bytes of page {}", page.id);
                assert!(page.url_count <= i64::from(layout.max_urls(section_of(page.id))));
                assert!(number_of(page.id) >= 1);
                assert!(limits.fits_bytes(page.byte_size));
                let mut ns = crate::page::NsCounts::default();
                for u in &urls {
                    ns.count(u.fields.namespaces(), 1);
                }
                assert_eq!(page.ns, ns, "namespace counts of page {}", page.id);
                // What the page renders to is within the byte limit, its head included.
                let head = crate::page::render::urlset_head(ns.used()).len() + crate::page::render::URLSET_TAIL.len();
                assert!(head as i64 + page.byte_size <= limits.max_bytes as i64);
            }
            for u in self.urls.values() {
                assert!(self.pages.contains_key(&u.page_id));
                assert_eq!(u.size, url_size(&u.loc, &u.fields));
            }
        }
    }

    /// The section ids of the tests: none is 0, `alpha` 1, any other 2.
    fn section_id(entry: &Entry) -> i64 {
        match entry.section.as_ref().map(|s| s.as_str()) {
            None => 0,
            Some("alpha") => 1,
            Some(_) => 2,
        }
    }

    /// Section ids by name: alpha 1, beta 2, gamma 3, delta 4, epsilon 5, zeta 6 (none: 0).
    fn section_of_name(entry: &Entry) -> i64 {
        let names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
        entry.section.as_ref().map_or(0, |s| names.iter().position(|n| *n == s.as_str()).unwrap() as i64 + 1)
    }

    fn in_section(entry: Entry, section: Option<&str>) -> Entry {
        Entry { section: section.map(|s| crate::domain::Section::parse(s).unwrap()), ..entry }
    }

    fn entry(path: &str, priority: Option<f64>) -> Entry {
        let public = PublicUrl::parse("https://x.test").unwrap();
        Entry {
            loc: Loc::parse(&format!("https://x.test/{path}"), &public).unwrap(),
            lastmod: None,
            changefreq: None,
            priority: priority.map(|p| Priority::new(p).unwrap()),
            ext: None,
            section: None,
        }
    }

    const LIMITS: Limits = Limits { max_urls: 3, max_bytes: 1_000_000 };

    #[test]
    fn a_plan_stamps_each_record_it_changes_with_its_pages_new_time_and_no_other() {
        let news = |title: &str| {
            use crate::domain::ext::{News, Publication};
            let news = News {
                publication: Publication { name: "N".into(), language: "en".into() },
                publication_date: "2026-11-22".into(),
                title: title.into(),
            };
            Some(Box::new(crate::domain::Extensions { news: Some(news), ..Default::default() }))
        };
        let with_news = |path: &str, title: &str| Entry { ext: news(title), ..entry(path, None) };
        let plan = plan_upsert(
            &[entry("a", None), with_news("b", "one")],
            section_id,
            vec![],
            vec![],
            Layout::uniform(LIMITS),
            5_000,
        )
        .unwrap();
        let stamps = plan.stamps();
        let page = &plan.pages[0];
        assert!(plan.inserts.iter().all(|n| stamps.of_insert(n) == Some(page.modified_us)), "both new on page 1");
        // Stored as the plan wrote them; then b's priority changes (a's does not), then b's news title alone.
        let stored: Vec<StoredUrl> = plan
            .inserts
            .iter()
            .zip(1..)
            .map(|(n, id)| StoredUrl {
                id,
                loc: n.loc.clone(),
                page_id: n.page_id,
                fields: n.fields.clone(),
                size: n.size,
            })
            .collect();
        let b = Entry { priority: Some(Priority::new(0.5).unwrap()), ..with_news("b", "one") };
        let plan = plan_upsert(
            &[entry("a", None), b.clone()],
            section_id,
            stored.clone(),
            plan.pages,
            Layout::uniform(LIMITS),
            9_000,
        )
        .unwrap();
        let stamps = plan.stamps();
        assert_eq!(plan.updates.iter().map(|u| u.id).collect::<Vec<_>>(), [2], "a unchanged: not written, not stamped");
        assert_eq!(stamps.of_update(&plan.updates[0]), Some(9_000), "b: its page's new time");
        let mut b_stored = stored[1].clone();
        b_stored.fields = Fields::from(&b);
        let retitled = Entry { ext: news("two"), ..b };
        let plan =
            plan_upsert(&[retitled], section_id, vec![b_stored], plan.pages, Layout::uniform(LIMITS), 12_000).unwrap();
        assert!(plan.pages.is_empty(), "its news alone: the page does not change");
        assert_eq!(plan.stamps().of_update(&plan.updates[0]), None, "b keeps the time of its last change in the page");
    }

    #[test]
    fn new_urls_fill_pages_in_order() {
        let mut m = Model::default();
        let entries: Vec<_> = (0..7).map(|i| entry(&i.to_string(), None)).collect();
        let (counts, touched) = m.upsert(&entries, LIMITS);
        assert_eq!(counts, UpsertCounts { received: 7, created: 7, updated: 0, unchanged: 0 });
        assert_eq!(touched, BTreeSet::from([1, 2, 3]));
        let pages: Vec<_> = m.urls.values().map(|u| u.page_id).collect();
        assert_eq!(pages, [1, 1, 1, 2, 2, 2, 3]);
        m.check(LIMITS);
    }

    #[test]
    fn a_change_touches_only_its_page_and_a_freed_slot_is_reused() {
        let mut m = Model::default();
        let entries: Vec<_> = (0..9).map(|i| entry(&i.to_string(), None)).collect();
        m.upsert(&entries, LIMITS);
        let (_, touched) = m.upsert(&[entry("4", Some(0.5))], LIMITS);
        assert_eq!(touched, BTreeSet::from([2]));
        assert_eq!(m.delete(&["https://x.test/7".into()]), BTreeSet::from([3]));
        let (_, touched) = m.upsert(&[entry("new", None)], LIMITS);
        assert_eq!(touched, BTreeSet::from([3]));
        // Re-sending the current state changes nothing.
        let mut current: Vec<_> = entries.iter().filter(|e| !e.loc.as_str().ends_with("/7")).cloned().collect();
        current[4] = entry("4", Some(0.5));
        current.push(entry("new", None));
        let (counts, touched) = m.upsert(&current, LIMITS);
        assert!(touched.is_empty());
        assert_eq!(counts, UpsertCounts { received: 9, created: 0, updated: 0, unchanged: 9 });
        m.check(LIMITS);
    }

    #[test]
    fn the_last_duplicate_wins_and_earlier_ones_count_as_unchanged() {
        let mut m = Model::default();
        let batch = [entry("a", Some(0.1)), entry("a", Some(0.1)), entry("a", Some(0.2))];
        let (counts, _) = m.upsert(&batch, LIMITS);
        assert_eq!(counts, UpsertCounts { received: 3, created: 1, updated: 0, unchanged: 2 });
        assert_eq!(m.urls.len(), 1);
        assert_eq!(m.urls.values().next().unwrap().fields.priority, Priority::new(0.2).ok());
    }

    #[test]
    fn an_entry_that_outgrows_its_page_moves() {
        let small = url_size("https://x.test/a", &Fields::default());
        let limits = Limits { max_urls: 10, max_bytes: ENVELOPE_RESERVE + 2 * small as u64 };
        let mut m = Model::default();
        m.upsert(&[entry("a", None), entry("b", None)], limits);
        assert_eq!(m.pages.len(), 1);
        let (_, touched) = m.upsert(&[entry("a", Some(0.5))], limits);
        assert_eq!(touched, BTreeSet::from([1, 2]));
        m.check(limits);
    }

    #[test]
    fn a_changed_page_is_compressed_the_current_way_and_the_others_keep_theirs() {
        let small = url_size("https://x.test/a", &Fields::default());
        let limits = Limits { max_urls: 10, max_bytes: ENVELOPE_RESERVE + 2 * small as u64 };
        let mut m = Model::default();
        m.upsert(&[entry("a", None), entry("b", None), entry("c", None)], limits);
        assert_eq!(m.pages.len(), 2);
        // As stored before the way was recorded.
        for page in m.pages.values_mut() {
            page.gzip = crate::page::Gzip::Stream;
        }
        let (_, touched) = m.upsert(&[entry("c", Some(0.5))], limits);
        assert_eq!(touched, BTreeSet::from([2]));
        assert_eq!(m.pages[&1].gzip, crate::page::Gzip::Stream);
        assert_eq!(m.pages[&2].gzip, crate::page::Gzip::CURRENT);
        // An identical re-send touches nothing.
        let (_, touched) = m.upsert(&[entry("a", None)], limits);
        assert!(touched.is_empty());
        assert_eq!(m.pages[&1].gzip, crate::page::Gzip::Stream);
    }

    #[test]
    fn modification_time_strictly_increases_even_if_the_clock_does_not() {
        let mut m = Model::default();
        m.upsert(&[entry("a", None)], LIMITS);
        let before = m.pages[&1].modified_us;
        m.now -= 5000;
        m.upsert(&[entry("a", Some(0.3))], LIMITS);
        assert_eq!(m.pages[&1].modified_us, before + MIN_STEP_US);
        assert!((before + MIN_STEP_US) / 1000 > before / 1000, "a later millisecond, as the index shows it");
        assert_eq!(m.pages[&1].version, 2);
    }

    #[test]
    fn no_page_beyond_the_index_limit() {
        let full: Vec<PageState> = (1..=MAX_PAGES)
            .map(|id| PageState {
                id,
                url_count: 1,
                byte_size: 100,
                version: 1,
                modified_us: 1,
                ..PageState::default()
            })
            .collect();
        let limits = Limits { max_urls: 1, max_bytes: 1_000_000 };
        assert_eq!(
            plan_upsert(&[entry("a", None)], section_id, vec![], full.clone(), Layout::uniform(limits), 5).unwrap_err(),
            PlanError::Full(IndexFull)
        );
        // Room on an existing page is still used.
        let mut some_room = full.clone();
        some_room[7].url_count = 0;
        let plan = plan_upsert(&[entry("a", None)], section_id, vec![], some_room.clone(), Layout::uniform(limits), 5);
        assert_eq!(plan.unwrap().inserts[0].page_id, 8);
        // The room is the site's, whatever the section: a named section gets no page of its own beyond it, and
        // one index entry fewer (kept for another sitemap) is one page fewer.
        let beta = in_section(entry("b", None), Some("beta"));
        let plan = plan_upsert(&[beta], section_id, vec![], full.clone(), Layout::uniform(limits), 5);
        assert_eq!(plan.unwrap_err(), PlanError::Full(IndexFull));
        let fewer = Layout { max_pages: MAX_PAGES - 1, ..Layout::uniform(limits) };
        let plan = plan_upsert(&[entry("a", None)], section_id, vec![], full[1..].to_vec(), fewer, 5);
        assert_eq!(plan.unwrap_err(), PlanError::Full(IndexFull));
    }

    #[test]
    fn a_section_emptied_gives_its_room_back() {
        // One URL a page, room for three pages: three one-URL sections take the whole room.
        let limits = Limits { max_urls: 1, max_bytes: 1_000_000 };
        let layout = Layout { max_pages: 3, ..Layout::uniform(limits) };
        let mut model = Model::default();
        let one = |name: &str, section: &str| in_section(entry(name, None), Some(section));
        for name in ["alpha", "beta", "gamma"] {
            model.try_upsert_in(&[one(name, name)], &layout).unwrap();
        }
        assert_eq!(model.try_upsert_in(&[one("delta", "delta")], &layout), Err(PlanError::Full(IndexFull)));
        // Every section's URL deleted: their pages stay, empty, and take no room.
        let touched = model.delete(&["alpha", "beta", "gamma"].map(|n| format!("https://x.test/{n}")));
        assert_eq!(touched.len(), 3);
        assert!(model.pages.values().all(|p| p.url_count == 0));
        model.check_in(&layout);
        model.try_upsert_in(&[one("delta", "delta")], &layout).expect("an index that lists nothing has room");
        assert_eq!(model.urls.values().last().unwrap().page_id, page_id(4, 1));
        // Refilling an empty page takes room as a new page does: with alpha back, the room is full again.
        model.try_upsert_in(&[one("alpha", "alpha")], &layout).unwrap();
        assert_eq!(model.urls.values().last().unwrap().page_id, page_id(1, 1), "its section's empty page");
        model.try_upsert_in(&[one("epsilon", "epsilon")], &layout).unwrap();
        assert_eq!(model.try_upsert_in(&[one("beta", "beta")], &layout), Err(PlanError::Full(IndexFull)));
        assert_eq!(model.try_upsert_in(&[one("zeta", "zeta")], &layout), Err(PlanError::Full(IndexFull)));
        model.check_in(&layout);
        // A URL that leaves the section it alone held frees its page for the section it joins.
        model.try_upsert_in(&[one("alpha", "beta")], &layout).expect("alpha's page is emptied as beta's is filled");
        assert_eq!(model.urls.values().find(|u| u.loc.ends_with("/alpha")).unwrap().page_id, page_id(2, 1));
        model.check_in(&layout);
    }

    #[test]
    fn each_section_has_its_own_pages_and_page_size_and_a_move_touches_two_pages() {
        let limits = Limits { max_urls: 3, max_bytes: 1_000_000 };
        let layout = Layout { section_urls: [(2, 2)].into(), ..Layout::uniform(limits) };
        let mut m = Model::default();
        let batch: Vec<Entry> = (0..5)
            .flat_map(|i| {
                [None, Some("alpha"), Some("beta")].map(|s| in_section(entry(&format!("{s:?}/{i}"), None), s))
            })
            .collect();
        m.upsert_in(&batch, layout.clone());
        m.check_in(&layout);
        let ids: BTreeSet<i64> = m.pages.keys().copied().collect();
        // Default: 5 URLs on pages 1 and 2 (3 a page); alpha the same; beta 2 a page: 3 pages.
        let expected = [page_id(0, 1), page_id(0, 2), page_id(1, 1), page_id(1, 2)]
            .into_iter()
            .chain((1..=3).map(|n| page_id(2, n)))
            .collect();
        assert_eq!(ids, expected);
        assert_eq!((page_id(0, 2), page_id(1, 1), page_id(2, 3)), (2, 1 << 20 | 1, 2 << 20 | 3));
        // The default section's pages are numbered as they always were.
        assert!(m.urls.values().filter(|u| u.loc.contains("None")).all(|u| u.page_id <= 2));
        // A URL sent to another section leaves its page for the other section's first page with room: two pages.
        let moved = in_section(entry("None/0", None), Some("alpha"));
        let before = m.pages.clone();
        let (counts, touched) = m.upsert_in(std::slice::from_ref(&moved), layout.clone());
        assert_eq!(counts.updated, 1);
        assert_eq!(touched, [page_id(0, 1), page_id(1, 2)].into());
        assert!(m.pages.iter().all(|(id, p)| touched.contains(id) || before[id] == *p));
        m.check_in(&layout);
        // Sent again as it is now: nothing changes.
        let (counts, touched) = m.upsert_in(&[moved], layout);
        assert_eq!((counts.unchanged, touched.len()), (1, 0));
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// (key, extensions, priority, section)
        Upsert(Vec<(u8, u8, Option<u8>, u8)>),
        Delete(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            prop::collection::vec((any::<u8>(), 0u8..16, prop::option::of(0u8..=10), 0u8..4), 1..12)
                .prop_map(Op::Upsert),
            prop::collection::vec(any::<u8>(), 1..6).prop_map(Op::Delete),
        ]
    }

    /// A key always maps to the same loc (of a length that varies with the key), so that ops update and delete
    /// records that earlier ops wrote.
    fn path(key: u8) -> String {
        let key = key % 48;
        format!("{key}/{}", "x".repeat(usize::from(key % 40)))
    }

    /// Extensions chosen by the bits of `kind`: images (1 to 3), alternates, news (bit 3 changes only its title,
    /// which its page does not show), none for 0.
    fn extensions(kind: u8, key: u8) -> Option<Box<crate::domain::Extensions>> {
        use crate::domain::ext::{Alternate, Image, News, Publication};
        if kind & 7 == 0 {
            return None;
        }
        let loc = format!("https://x.test/{}", path(key));
        let images = (0..=key % 3).map(|i| Image { loc: format!("https://cdn.test/{key}/{i}.jpg") });
        let alternates =
            [("en", loc.clone()), ("x-default", loc)].map(|(h, href)| Alternate { hreflang: h.into(), href });
        Some(Box::new(crate::domain::Extensions {
            images: if kind & 1 != 0 { images.collect() } else { Vec::new() },
            videos: Vec::new(),
            news: (kind & 4 != 0).then(|| News {
                publication: Publication { name: "N".into(), language: "en".into() },
                publication_date: "2026-11-22".into(),
                title: format!("title {}", kind >> 3),
            }),
            alternates: if kind & 2 != 0 { alternates.to_vec() } else { Vec::new() },
        }))
    }

    proptest! {
        #[test]
        fn invariants_hold_under_any_sequence_of_writes(
            ops in prop::collection::vec(op(), 1..40),
            max_urls in 1u32..6,
            extra in 0u64..600,
        ) {
            // As Config guarantees, an empty page has room for the largest entry without extensions (here ~120
            // bytes); an entry with extensions may be larger than any page, and is then refused.
            let limits = Limits { max_urls, max_bytes: ENVELOPE_RESERVE + 150 + extra };
            // Sections: none, alpha (the default page size) and beta (one URL a page); most writes in none.
            let layout = Layout { section_urls: [(2, 1)].into(), ..Layout::uniform(limits) };
            let mut m = Model::default();
            for op in ops {
                match op {
                    Op::Upsert(items) => {
                        let entries: Vec<_> = items.iter().map(|&(k, kind, p, s)| {
                            let e = Entry { ext: extensions(kind, k), ..entry(&path(k), p.map(|p| f64::from(p) / 10.0)) };
                            in_section(e, [None, None, Some("alpha"), Some("beta")][usize::from(s)])
                        }).collect();
                        let before = m.pages.clone();
                        let before_urls = m.urls.clone();
                        let (counts, touched) = m.upsert_in(&entries, layout.clone());
                        // Every record stored is in its last entry's section (unless the write was refused).
                        for e in entries.iter().filter(|_| counts.received > 0) {
                            if let Some(u) = m.urls.values().find(|u| u.loc == e.loc.as_str()) {
                                let last = entries.iter().rfind(|x| x.loc == e.loc).unwrap();
                                prop_assert_eq!(section_of(u.page_id), section_id(last));
                            }
                        }
                        // A page whose entries changed in their news alone (or not at all) is not touched.
                        for id in &touched {
                            let rendered = |urls: &BTreeMap<i64, StoredUrl>| -> Vec<(String, i64)> {
                                let mut on_page: Vec<_> = urls.values().filter(|u| u.page_id == *id).map(|u| {
                                    let mut page_form = u.fields.clone();
                                    if let Some(e) = page_form.ext.as_deref_mut() { e.news = None; }
                                    let mut out = Vec::new();
                                    crate::page::render::write_url(&mut out, &u.loc, &page_form);
                                    (String::from_utf8(out).unwrap(), u.id)
                                }).collect();
                                on_page.sort();
                                on_page
                            };
                            prop_assert!(
                                rendered(&before_urls) != rendered(&m.urls) || !before.contains_key(id),
                                "page {} was touched though it renders the same", id
                            );
                        }
                        // Pages that were not touched are byte-for-byte the same state as before.
                        for (id, page) in &before {
                            if !touched.contains(id) { prop_assert_eq!(page, &m.pages[id]); }
                        }
                    }
                    Op::Delete(keys) => {
                        let locs: Vec<String> = keys.iter().map(|&k| format!("https://x.test/{}", path(k))).collect();
                        m.delete(&locs);
                    }
                }
                m.check_in(&layout);
            }
        }
    }
}

#[cfg(test)]
mod repair_tests {
    use std::collections::HashSet;

    use super::*;
    use crate::page::render::ENVELOPE_RESERVE;

    fn url(id: i64, loc: &str, page_id: i64, size: i64) -> StoredUrl {
        StoredUrl { id, loc: loc.into(), page_id, fields: Fields::default(), size }
    }

    fn page(id: i64, urls: &[&StoredUrl]) -> PageState {
        let byte_size = urls.iter().map(|u| u.size).sum();
        PageState {
            id,
            url_count: urls.len() as i64,
            byte_size,
            version: 3,
            modified_us: 1_000,
            ..PageState::default()
        }
    }

    #[test]
    fn recount_finds_only_what_the_current_version_would_store_differently() {
        let right = |loc: &str| url(1, loc, 1, url_size(loc, &Fields::default()));
        assert_eq!(recount(&right("https://x.test/a")), None);
        assert_eq!(recount(&right("https://x.test/a|b")).as_deref(), Some("https://x.test/a%7Cb"));
        let mut miscounted = right("https://x.test/a");
        miscounted.size += 1;
        assert_eq!(recount(&miscounted).as_deref(), Some("https://x.test/a"));
    }

    #[test]
    fn a_repair_touches_only_the_pages_of_the_records_it_changes() {
        let limits = Limits { max_urls: 3, max_bytes: 10_000 };
        let sized = |id, loc: &str, page| url(id, loc, page, url_size(loc, &Fields::default()));
        let a = sized(1, "https://x.test/a|", 1);
        let b = sized(2, "https://x.test/b", 1);
        let c = sized(3, "https://x.test/c", 2);
        let kept = sized(4, "https://x.test/d%7C", 3);
        let dup = sized(5, "https://x.test/d|", 3);
        let mut shrunk = sized(6, "https://x.test/e", 4);
        shrunk.size += 1;
        let pages = vec![page(1, &[&a, &b]), page(2, &[&c]), page(3, &[&kept, &dup]), page(4, &[&shrunk])];
        let stale: Vec<_> = [&a, &dup, &shrunk].iter().map(|u| ((*u).clone(), recount(u).unwrap())).collect();
        let taken = HashSet::from(["https://x.test/d%7C".to_owned()]);
        let plan = plan_repair(stale, &taken, pages, limits, 500).unwrap();

        let a_size = url_size("https://x.test/a%7C", &Fields::default());
        assert_eq!(
            plan.updates,
            [
                RepairedUrl { id: 1, loc: "https://x.test/a%7C".into(), page_id: 1, size: a_size },
                RepairedUrl { id: 6, loc: "https://x.test/e".into(), page_id: 4, size: shrunk.size - 1 },
            ]
        );
        assert_eq!(plan.dropped.iter().map(|(u, r)| (u.id, *r)).collect::<Vec<_>>(), [(5, DropReason::AlreadyStored)]);
        let touched: Vec<_> = plan.pages.iter().map(|p| (p.id, p.url_count, p.byte_size, p.version)).collect();
        assert_eq!(touched, [(1, 2, a_size + b.size, 4), (3, 1, kept.size, 4), (4, 1, shrunk.size - 1, 4),]);
        assert!(plan.pages.iter().all(|p| p.modified_us == 2_000), "later than before, though the clock is behind");
    }

    #[test]
    fn a_record_whose_encoded_loc_reaches_the_length_limit_is_removed() {
        let base = "https://x.test/";
        let fits = format!("{base}{}", "a".repeat(crate::domain::MAX_LOC_LEN - 1 - base.len()));
        // One character short of the limit before encoding, three over it after (`|` is `%7C`).
        let grows = format!("{base}{}|", "b".repeat(crate::domain::MAX_LOC_LEN - 2 - base.len()));
        let edge = format!("{base}{}|", "c".repeat(crate::domain::MAX_LOC_LEN - 4 - base.len()));
        let sized = |id, loc: &str| url(id, loc, 1, url_size(loc, &Fields::default()));
        let (a, b, c) = (sized(1, &fits), sized(2, &grows), sized(3, &edge));
        let limits = Limits { max_urls: 10, max_bytes: 100_000 };
        let stale: Vec<_> = [&b, &c].iter().map(|u| ((*u).clone(), recount(u).unwrap())).collect();
        assert_eq!(stale[1].1.len(), crate::domain::MAX_LOC_LEN - 1, "just fits once encoded");
        let plan = plan_repair(stale, &HashSet::new(), vec![page(1, &[&a, &b, &c])], limits, 9).unwrap();
        assert_eq!(plan.dropped.iter().map(|(u, r)| (u.id, *r)).collect::<Vec<_>>(), [(2, DropReason::TooLong)]);
        assert_eq!(plan.updates.iter().map(|u| (u.id, u.loc.len())).collect::<Vec<_>>(), [(3, 2047)]);
        let page = &plan.pages[0];
        assert_eq!((page.url_count, page.byte_size), (2, a.size + url_size(&plan.updates[0].loc, &Fields::default())));
    }

    #[test]
    fn a_repaired_record_that_outgrows_its_page_moves_to_one_with_room() {
        let loc = "https://x.test/a|";
        let a = url(1, loc, 1, url_size(loc, &Fields::default()));
        let b = url(2, "https://x.test/b", 1, url_size("https://x.test/b", &Fields::default()));
        let limits = Limits { max_urls: 10, max_bytes: ENVELOPE_RESERVE + (a.size + b.size) as u64 };
        let stale = vec![(a.clone(), recount(&a).unwrap())];
        let plan = plan_repair(stale, &HashSet::new(), vec![page(1, &[&a, &b])], limits, 9).unwrap();
        assert_eq!(plan.updates[0].page_id, 2);
        assert_eq!(plan.pages.iter().map(|p| (p.id, p.url_count)).collect::<Vec<_>>(), [(1, 1), (2, 1)]);
    }
}
