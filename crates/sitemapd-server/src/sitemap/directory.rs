//! The page table as this process last read it: what the index, validators and cache keys are answered from, so
//! that an index, a 304 or a cached page costs no query. It is read again when older than the configured
//! freshness (`cache.state_ttl`) or after a write through this process; replicas converge within that time, and
//! since everything served is a function of the page rows, they agree on every ETag.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Mutex, OnceCell};
use tokio::time::Instant;

use crate::domain::{LastMod, PublicUrl, Section, SectionNames};
use crate::page::render::{INDEX_HEAD, INDEX_TAIL, write_index_entry};
use crate::page::{PageState, SECTION_SHIFT, number_of, page_id, section_of};
use crate::store::{RemovedList, Result, StoreReads};

use super::news::{self, NewsSitemap, NewsState};
use super::removed::{self, RemovedSitemap, RemovedState};

/// The longest a page table is kept on the strength of an unchanged change counter: then it is read again. O(pages)
/// once a minute, against every `cache.state_ttl` without the counter.
pub const FULL_READ: Duration = Duration::from_secs(60);

/// The time of day as microseconds since the Unix epoch: the system clock, or a test's.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64))
}

/// A site's page table as read, shared by every [`Directory`] made while the table stays unchanged (its change
/// counter has not moved): what is a function of the table alone (dates, the index state, the index's bytes) is
/// computed once per table, not once per refresh.
struct Table {
    /// The site's change counter, read in the same snapshot as the pages ([`StoreReads::page_table`]).
    changes: i64,
    /// When the pages were read.
    read_at: Instant,
    /// By id (so by section id, then number).
    pages: Vec<PageState>,
    /// The named sections of the pages, as read with them (or before: a name never changes).
    sections: Arc<SectionNames>,
    /// The positions in `pages` of the pages the index lists, in its order: the default section's, then each named
    /// section's by name, each by number. A page of a section whose name is not known is not listed.
    listed: Vec<usize>,
    /// The newest change to any page, emptied ones included (their leaving the index changes it).
    modified_us: i64,
    /// What the index's bytes are a function of, for its ETag: every listed page's id, version and date, in the
    /// index's order (as it always was for a site without sections).
    index_state: String,
    /// The index rendered from this table for one state of the news sitemap (the last one asked for).
    index: std::sync::Mutex<Option<Arc<IndexDocs>>>,
    /// Each named section's own index, rendered from this table on first use.
    section_indexes: std::sync::Mutex<std::collections::BTreeMap<i64, Arc<SectionIndex>>>,
    /// The removed-URLs sitemap last read with this table: the tombstones cannot have changed without moving the
    /// change counter, so it stays current until its window moves past it ([`RemovedState::current_for`]).
    removed: std::sync::Mutex<Option<Arc<RemovedState>>>,
    /// Each page's ETags (beside `pages`, by position), made on first use: a page's state cannot change within a
    /// table, and a digest per 304 was a sixth of its cost ([`Directory::page_etag`]).
    page_etags: Vec<[OnceLock<String>; PAGE_ETAG_FORMS]>,
}

/// The forms a page's ETag is kept in: XML or text, each gzip or not.
pub const PAGE_ETAG_FORMS: usize = 4;

/// A section's own index (`/sitemap-<section>.xml`): its pages alone, made once per table.
pub struct SectionIndex {
    /// What its bytes are a function of, for its ETag (with the site's URL and the section's name): every listed
    /// page's id, version and date.
    pub state: String,
    /// The newest change to any of the section's pages, emptied ones included.
    pub modified_us: i64,
    pub identity: Bytes,
    pub gzip: OnceCell<Bytes>,
    /// Identity, gzip.
    pub etags: [std::sync::OnceLock<String>; 2],
}

/// What the index's bytes and date take from the news or the removed-URLs sitemap: the one listed (its digest
/// and date), if any, and the date the index folds in.
type Listed = (Option<(String, i64)>, i64);

/// The index documents of one table and one state of the news sitemap, and their ETags, each made on first use:
/// an index answer, a 304 included, costs no pass over the page table while neither changes.
struct IndexDocs {
    /// The news sitemap listed (its digest and date), if any, and the news dates the index's own date folds in.
    news: Listed,
    /// The same of the removed-URLs sitemap (`None`: it is off).
    removed: Option<Listed>,
    identity: OnceCell<Option<Bytes>>,
    gzip: OnceCell<Option<Bytes>>,
    /// Identity, gzip.
    etags: [std::sync::OnceLock<String>; 2],
}

impl Table {
    fn new(changes: i64, mut pages: Vec<PageState>, sections: Arc<SectionNames>) -> Self {
        pages.sort_unstable_by_key(|p| p.id);
        let modified_us = pages.iter().map(|p| p.modified_us).max().unwrap_or(0);
        let rank = |p: &PageState| -> Option<(Option<&Section>, i64)> {
            let section = sections.name(section_of(p.id))?;
            Some((section, number_of(p.id)))
        };
        let mut listed: Vec<usize> =
            (0..pages.len()).filter(|&i| pages[i].listed() && rank(&pages[i]).is_some()).collect();
        // The default section (`None`) sorts first, then sections by name.
        listed.sort_by(|&a, &b| rank(&pages[a]).cmp(&rank(&pages[b])));
        let index_state =
            listed.iter().map(|&i| &pages[i]).map(|p| format!("{}:{}:{};", p.id, p.version, p.modified_us)).collect();
        let (index, removed, section_indexes) = Default::default();
        let page_etags = pages.iter().map(|_| Default::default()).collect();
        Self {
            page_etags,
            changes,
            read_at: Instant::now(),
            pages,
            sections,
            listed,
            modified_us,
            index_state,
            index,
            removed,
            section_indexes,
        }
    }

    /// The URL of the page with id `id`, when its section is known.
    fn page_url(&self, public_url: &PublicUrl, id: i64) -> Option<String> {
        let section = self.sections.name(section_of(id))?;
        Some(public_url.section_page_url(section, number_of(id)))
    }

    fn page(&self, id: i64) -> Option<&PageState> {
        let i = self.pages.binary_search_by_key(&id, |p| p.id).ok()?;
        Some(&self.pages[i])
    }

    /// The index documents for `news` and `removed`: the same ones as long as those sitemaps are.
    fn docs(&self, news: &NewsState, removed: Option<&RemovedState>) -> Arc<IndexDocs> {
        let key = (news.sitemap.as_ref().map(|n| (n.digest.clone(), n.modified_us)), news.modified_us);
        let removed = removed.map(|r| (r.sitemap.as_ref().map(|s| (s.digest.clone(), s.modified_us)), r.modified_us));
        let mut docs = self.index.lock().expect("not poisoned");
        match &*docs {
            Some(d) if d.news == key && d.removed == removed => d.clone(),
            _ => {
                let d = Arc::new(IndexDocs {
                    news: key,
                    removed,
                    identity: OnceCell::new(),
                    gzip: OnceCell::new(),
                    etags: Default::default(),
                });
                *docs = Some(d.clone());
                d
            }
        }
    }

    /// The non-empty pages of `self` that are new or changed since `before`, and the states in `before` they
    /// replace (those that are no longer current).
    fn changed_since(&self, before: &Table) -> (Vec<PageState>, Vec<PageState>) {
        let (mut changed, mut replaced) = (Vec::new(), Vec::new());
        for page in &self.pages {
            let old = before.page(page.id);
            if old == Some(page) {
                continue;
            }
            if page.listed() {
                changed.push(page.clone());
            }
            replaced.extend(old.cloned());
        }
        (changed, replaced)
    }
}

/// One read of the page table (or a check that it has not changed), and the index rendered from it (once per
/// table and state of the news sitemap, on first use).
pub struct Directory {
    /// The site whose page table this is.
    site: i64,
    table: Arc<Table>,
    generation: u64,
    read_at: Instant,
    /// The clock's time at the read: the news window ends there.
    now_us: i64,
    news: OnceCell<Arc<NewsState>>,
    removed: OnceCell<Arc<RemovedState>>,
    /// What the features above this module build once per read ([`Directory::built`]), by type and key.
    built: std::sync::Mutex<HashMap<(TypeId, Option<i64>), Built>>,
}

/// One thing a feature above this module built from a read, once for every concurrent caller.
type Built = Arc<OnceCell<Arc<dyn Any + Send + Sync>>>;

impl Directory {
    fn new(site: i64, table: Arc<Table>, generation: u64, now_us: i64) -> Self {
        let (news, removed, built) = Default::default();
        Self { site, table, generation, read_at: Instant::now(), now_us, news, removed, built }
    }

    /// The `T` of `key` as of this read: `build`'s, run once for every caller that asks while this directory is
    /// current (a burst of requests builds once), as the news sitemap is. For the features above this module whose
    /// documents are functions of what the page table's change counter covers (the feeds, `src/feed/`). A failed
    /// build is not kept: the next caller builds again.
    pub async fn built<T, E, F, Fut>(&self, key: Option<i64>, build: F) -> std::result::Result<Arc<T>, E>
    where
        T: Any + Send + Sync,
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        let cell = self.built.lock().expect("not poisoned").entry((TypeId::of::<T>(), key)).or_default().clone();
        let value = cell
            .get_or_try_init(|| async { Ok::<_, E>(Arc::new(build().await?) as Arc<dyn Any + Send + Sync>) })
            .await?
            .clone();
        Ok(value.downcast::<T>().unwrap_or_else(|_| unreachable!("kept by its type")))
    }

    #[cfg(test)]
    fn of(site: i64, pages: Vec<PageState>) -> Self {
        Self::new(site, Arc::new(Table::new(0, pages, Arc::default())), 0, 0)
    }

    /// The site's named sections, as read with this table.
    pub fn sections(&self) -> &Arc<SectionNames> {
        &self.table.sections
    }

    /// The id of page `number` of the section named `section` (`None`: the default section), when it has URLs.
    pub fn page_id(&self, section: Option<&str>, number: i64) -> Option<i64> {
        if !(1..(1 << SECTION_SHIFT)).contains(&number) {
            return None;
        }
        let section = match section {
            None => 0,
            Some(name) => self.table.sections.id(name)?,
        };
        let id = page_id(section, number);
        self.page(id).map(|p| p.id)
    }

    /// The URL of the page with id `id` (`None` when its section's name is not known).
    pub fn page_url(&self, public_url: &PublicUrl, id: i64) -> Option<String> {
        self.table.page_url(public_url, id)
    }

    /// Section `section`'s own index (a named section's, by id), when it lists a page: made once per table.
    pub fn section_index(&self, public_url: &PublicUrl, section: i64) -> Option<Arc<SectionIndex>> {
        let name = self.table.sections.name(section).flatten()?;
        let mut made = self.table.section_indexes.lock().expect("not poisoned");
        if let Some(docs) = made.get(&section) {
            return Some(docs.clone());
        }
        let all: Vec<&PageState> = self.table.pages.iter().filter(|p| section_of(p.id) == section).collect();
        let listed: Vec<&PageState> = all.iter().copied().filter(|p| p.listed()).collect();
        if listed.is_empty() {
            return None;
        }
        let mut body = Vec::with_capacity(INDEX_HEAD.len() + INDEX_TAIL.len() + listed.len() * 128);
        body.extend_from_slice(INDEX_HEAD.as_bytes());
        for page in &listed {
            let url = public_url.section_page_url(Some(name), number_of(page.id));
            write_index_entry(
                &mut body,
                &url,
                LastMod::from_unix_micros(page.modified_us.div_euclid(1000) * 1000).as_str(),
            );
        }
        body.extend_from_slice(INDEX_TAIL.as_bytes());
        let docs = Arc::new(SectionIndex {
            state: listed.iter().map(|p| format!("{}:{}:{};", p.id, p.version, p.modified_us)).collect(),
            modified_us: all.iter().map(|p| p.modified_us).max().unwrap_or(0),
            identity: Bytes::from(body),
            gzip: OnceCell::new(),
            etags: Default::default(),
        });
        made.insert(section, docs.clone());
        Some(docs)
    }

    /// The pages of section `section` (by id) that are listed ([`PageState::listed`]), in number order.
    pub fn section_pages(&self, section: i64) -> impl Iterator<Item = &PageState> {
        self.table.pages.iter().filter(move |p| section_of(p.id) == section && p.listed())
    }

    /// Every page, empty ones included, by id.
    pub fn pages(&self) -> &[PageState] {
        &self.table.pages
    }

    /// A listed page: one with an entry that is not excluded ([`PageState::listed`]).
    pub fn page(&self, id: i64) -> Option<&PageState> {
        self.table.page(id).filter(|p| p.listed())
    }

    /// The ETag of page `id` of this table in form `form` (below [`PAGE_ETAG_FORMS`]): `make`'s, made once per
    /// table and form. `None` for a page the table does not hold.
    pub fn page_etag(&self, id: i64, form: usize, make: impl FnOnce(&PageState) -> String) -> Option<String> {
        let i = self.table.pages.binary_search_by_key(&id, |p| p.id).ok()?;
        let page = &self.table.pages[i];
        Some(self.table.page_etags[i].get(form)?.get_or_init(|| make(page)).clone())
    }

    /// The newest change to any page, emptied ones included (their leaving the index changes it).
    pub fn modified_us(&self) -> i64 {
        self.table.modified_us
    }

    /// What the index's bytes are a function of, for its ETag: every listed page's id, version and date.
    pub fn index_state(&self) -> &str {
        &self.table.index_state
    }

    pub fn is_empty(&self) -> bool {
        self.table.index_state.is_empty()
    }

    /// The news sitemap as of this read (built once, on first use).
    pub async fn news(&self, store: &dyn StoreReads, hours: u64, level: u32) -> Result<Arc<NewsState>> {
        self.news
            .get_or_try_init(|| async { Ok(Arc::new(news::build(store, self.site, self.now_us, hours, level).await?)) })
            .await
            .cloned()
    }

    /// The removed-URLs sitemap as of this read, for a retention of `days` (built on first use, or the one read
    /// with the same page table while it is still current).
    pub async fn removed(&self, store: &dyn RemovedList, days: u32, level: u32) -> Result<Arc<RemovedState>> {
        let since = removed::window_start(self.now_us, days);
        self.removed
            .get_or_try_init(|| async {
                let kept = self.table.removed.lock().expect("not poisoned").clone();
                if let Some(kept) = kept.filter(|r| r.current_for(since)) {
                    return Ok(kept);
                }
                let built = Arc::new(removed::build(store, self.site, since, days, level).await?);
                *self.table.removed.lock().expect("not poisoned") = Some(built.clone());
                Ok(built)
            })
            .await
            .cloned()
    }

    /// The index's ETag for `news` (as [`Directory::news`] gave it) and `removed` (as [`Directory::removed`] gave
    /// it; `None` when it is off), identity or `gzip`: made by `make` (from [`Directory::index_state`]) once per
    /// table and state of those sitemaps.
    pub fn index_etag(
        &self,
        (news, removed): (&NewsState, Option<&RemovedState>),
        gzip: bool,
        make: impl FnOnce() -> String,
    ) -> String {
        self.table.docs(news, removed).etags[usize::from(gzip)].get_or_init(make).clone()
    }

    /// The `<sitemapindex>` document listing every non-empty page, the news sitemap when it has articles (`news`:
    /// as [`Directory::news`] gave it) and the removed-URLs sitemap when it has entries; `None` when there is no
    /// page.
    pub async fn index(
        &self,
        public_url: &PublicUrl,
        (news, removed): (&NewsState, Option<&RemovedState>),
    ) -> Option<Bytes> {
        let docs = self.table.docs(news, removed);
        let listed = (news.sitemap.as_ref(), removed.and_then(|r| r.sitemap.as_ref()));
        docs.identity.get_or_init(|| async { self.render_index(public_url, listed) }).await.clone()
    }

    /// The index, gzip-compressed at `level`.
    pub async fn index_gzip(
        &self,
        public_url: &PublicUrl,
        (news, removed): (&NewsState, Option<&RemovedState>),
        level: u32,
    ) -> std::io::Result<Option<Bytes>> {
        let docs = self.table.docs(news, removed);
        let listed = (news.sitemap.as_ref(), removed.and_then(|r| r.sitemap.as_ref()));
        docs.gzip
            .get_or_try_init(|| async {
                let identity = docs.identity.get_or_init(|| async { self.render_index(public_url, listed) }).await;
                match identity.clone() {
                    Some(body) => super::stream::gzip_bytes(body, level).await.map(Some),
                    None => Ok(None),
                }
            })
            .await
            .cloned()
    }

    fn render_index(
        &self,
        public_url: &PublicUrl,
        (news, removed): (Option<&NewsSitemap>, Option<&RemovedSitemap>),
    ) -> Option<Bytes> {
        if self.is_empty() {
            return None;
        }
        let table = &self.table;
        let mut body = Vec::with_capacity(INDEX_HEAD.len() + INDEX_TAIL.len() + table.listed.len() * 128);
        body.extend_from_slice(INDEX_HEAD.as_bytes());
        for page in table.listed.iter().map(|&i| &table.pages[i]) {
            let Some(url) = table.page_url(public_url, page.id) else { continue };
            write_index_entry(
                &mut body,
                &url,
                // Milliseconds, truncated: sitemap.js, a widely used parser, drops a lastmod with more than three
                // fraction digits, and truncation never shows a later change at an earlier time.
                LastMod::from_unix_micros(page.modified_us.div_euclid(1000) * 1000).as_str(),
            );
        }
        if let Some(news) = news {
            let lastmod = LastMod::from_unix_micros(news.modified_us.div_euclid(1000) * 1000);
            write_index_entry(&mut body, &public_url.news_url(), lastmod.as_str());
        }
        if let Some(removed) = removed {
            let lastmod = LastMod::from_unix_micros(removed.modified_us.div_euclid(1000) * 1000);
            write_index_entry(&mut body, &format!("{}sitemap-removed.xml", public_url.as_str()), lastmod.as_str());
        }
        body.extend_from_slice(INDEX_TAIL.as_bytes());
        Some(Bytes::from(body))
    }
}

/// What a refresh that finds the page table changed reports: the pages that are new or changed since the table
/// it replaces (to be rendered ahead of crawlers), and the states they replace (no longer current).
pub type OnChange = Arc<dyn Fn(i64, Vec<PageState>, Vec<PageState>) + Send + Sync>;

/// A site's current [`Directory`], read again when stale.
pub struct Directories {
    site: i64,
    ttl: Duration,
    clock: Clock,
    current: RwLock<Option<Arc<Directory>>>,
    /// One reader of the page table at a time; the others wait for its result.
    refresh: Mutex<()>,
    /// Advanced by every write through this process: a directory read before it is stale.
    generation: AtomicU64,
    /// Told of the pages a refresh finds changed (not at the first read).
    on_change: Option<OnChange>,
}

impl Directories {
    pub fn new(site: i64, ttl: Duration, clock: Clock, on_change: Option<OnChange>) -> Self {
        Self {
            site,
            ttl,
            clock,
            current: RwLock::new(None),
            refresh: Mutex::new(()),
            generation: AtomicU64::new(0),
            on_change,
        }
    }

    /// The page table as of at most `ttl` ago, and after every write this process has finished. When older, the
    /// site's change counter is read first: unchanged (and no write through this process since, and the table
    /// younger than [`FULL_READ`]), the table is still current and is kept, so that a refresh costs one
    /// primary-key read, not a read of every page.
    pub async fn get(&self, store: &dyn StoreReads) -> Result<Arc<Directory>> {
        self.get_since(store, None).await
    }

    /// As [`Directories::get`], but never a table checked before this call: the change counter is read (one
    /// primary-key read; the table only when it moved). For a client that asks for the current state
    /// (`Cache-Control: no-cache`): an import reading this server's sitemaps right after another process (the
    /// `sitemapd import` command) wrote, which `cache.state_ttl` would otherwise hide for up to that long. Concurrent
    /// callers share one check.
    pub async fn get_current(&self, store: &dyn StoreReads) -> Result<Arc<Directory>> {
        self.get_since(store, Some(Instant::now())).await
    }

    async fn get_since(&self, store: &dyn StoreReads, asked: Option<Instant>) -> Result<Arc<Directory>> {
        if self.ttl.is_zero() {
            let pages = store.pages(self.site).await?;
            let sections = self.sections_of(store, &pages, None).await?;
            let table = Arc::new(Table::new(0, pages, sections));
            return Ok(Arc::new(Directory::new(self.site, table, 0, (self.clock)())));
        }
        let checked_since = |d: &Arc<Directory>| asked.is_none_or(|asked| d.read_at >= asked);
        if let Some(fresh) = self.fresh().filter(checked_since) {
            return Ok(fresh);
        }
        let _one_reader = self.refresh.lock().await;
        if let Some(fresh) = self.fresh().filter(checked_since) {
            return Ok(fresh);
        }
        // Read the generation before the table: a write finishing during the read leaves this copy stale.
        let generation = self.generation.load(Ordering::Acquire);
        let previous = self.current.read().expect("not poisoned").clone();
        let keep = match &previous {
            // A table older than FULL_READ is read again whatever the counter says: a counter that went back (a
            // restored database, a failover to a standby that was behind) or a read replica behind another cannot
            // leave a stale table in place for longer.
            // A counter below the one held comes from a source behind the one the table came from (reads moving
            // between a replica and the primary): the table held is the newer.
            Some(p) if p.generation == generation && p.table.read_at.elapsed() < FULL_READ => {
                store.changes(self.site).await? <= p.table.changes
            }
            _ => false,
        };
        let table = match &previous {
            Some(p) if keep => p.table.clone(),
            _ => {
                // The counter and the pages from one snapshot: the table is the one the counter names.
                let (changes, pages) = store.page_table(self.site).await?;
                let young = previous.as_ref().filter(|p| {
                    p.generation == generation && p.table.read_at.elapsed() < FULL_READ && changes < p.table.changes
                });
                match (young, &previous) {
                    (Some(p), _) => p.table.clone(),
                    (None, previous) => {
                        let known = previous.as_ref().map(|p| &p.table.sections);
                        let sections = self.sections_of(store, &pages, known).await?;
                        let table = Arc::new(Table::new(changes, pages, sections));
                        if let (Some(on_change), Some(previous)) = (&self.on_change, previous) {
                            let (changed, replaced) = table.changed_since(&previous.table);
                            if !changed.is_empty() || !replaced.is_empty() {
                                on_change(self.site, changed, replaced);
                            }
                        }
                        table
                    }
                }
            }
        };
        let directory = Arc::new(Directory::new(self.site, table, generation, (self.clock)()));
        *self.current.write().expect("not poisoned") = Some(directory.clone());
        Ok(directory)
    }

    /// The names of the sections of `pages`: those `known` when it has them all (names never change), else read.
    /// A site without sections reads nothing.
    async fn sections_of(
        &self,
        store: &dyn StoreReads,
        pages: &[PageState],
        known: Option<&Arc<SectionNames>>,
    ) -> Result<Arc<SectionNames>> {
        let known = known.cloned().unwrap_or_default();
        if known.knows_all(pages.iter().map(|p| section_of(p.id))) {
            return Ok(known);
        }
        Ok(Arc::new(SectionNames::new(store.sections(self.site).await?)))
    }

    fn fresh(&self) -> Option<Arc<Directory>> {
        let current = self.current.read().expect("not poisoned").clone()?;
        let fresh =
            current.generation == self.generation.load(Ordering::Acquire) && current.read_at.elapsed() < self.ttl;
        fresh.then_some(current)
    }

    /// Marks the current copy stale: called after every write through this process, committed or not.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(id: i64, url_count: i64, modified_us: i64) -> PageState {
        PageState { id, url_count, byte_size: url_count * 100, version: 1, modified_us, ..PageState::default() }
    }

    #[test]
    fn a_page_etag_is_made_once_per_table_page_and_form() {
        let d = Directory::of(1, vec![page(3, 1, 30), page(1, 2, 10)]);
        let made = std::cell::Cell::new(0);
        let make = |p: &PageState| {
            made.set(made.get() + 1);
            format!("\"{}-{}\"", p.id, p.modified_us)
        };
        for _ in 0..3 {
            assert_eq!(d.page_etag(3, 0, make).as_deref(), Some("\"3-30\""));
            assert_eq!(d.page_etag(1, 0, make).as_deref(), Some("\"1-10\""));
        }
        assert_eq!(made.get(), 2, "once per page");
        assert_eq!(d.page_etag(3, PAGE_ETAG_FORMS - 1, make).as_deref(), Some("\"3-30\""));
        assert_eq!(made.get(), 3, "once per form");
        assert_eq!(d.page_etag(2, 0, make), None, "a page the table does not hold");
        assert_eq!(d.page_etag(3, PAGE_ETAG_FORMS, make), None, "a form that does not exist");
        assert_eq!(made.get(), 3);
        // A new table (what a write gives) makes them again.
        let d = Directory::of(1, vec![page(3, 1, 31)]);
        assert_eq!(d.page_etag(3, 0, make).as_deref(), Some("\"3-31\""));
    }

    #[tokio::test]
    async fn lists_non_empty_pages_in_order_and_dates_by_all() {
        let d = Directory::of(1, vec![page(3, 1, 30), page(1, 2, 10), page(2, 0, 50)]);
        assert_eq!(d.page(1).map(|p| p.id), Some(1));
        assert!(d.page(2).is_none(), "an emptied page is not served");
        assert!(d.page(4).is_none());
        assert_eq!(d.modified_us(), 50, "an emptied page's change is a change to the index");
        let public = PublicUrl::parse("https://x.test/").unwrap();
        let no_news = NewsState { sitemap: None, modified_us: 0 };
        let index = String::from_utf8(d.index(&public, (&no_news, None)).await.unwrap().to_vec()).unwrap();
        let one = index.find("https://x.test/sitemap-1.xml").unwrap();
        let three = index.find("https://x.test/sitemap-3.xml").unwrap();
        assert!(one < three && !index.contains("sitemap-2.xml"), "{index}");
        assert!(Directory::of(1, vec![page(1, 0, 5)]).index(&public, (&no_news, None)).await.is_none());
    }

    /// What a feature above builds from a read is built once for a burst of callers, per key and type; a failed
    /// build is not kept; the next read builds anew.
    #[tokio::test]
    async fn a_burst_builds_once_per_read_and_key() {
        use std::sync::atomic::AtomicUsize;
        let d = Directory::of(1, vec![page(1, 1, 10)]);
        let made = AtomicUsize::new(0);
        let build = |value: u32| {
            let made = &made;
            move || async move {
                made.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                Ok::<_, String>(value)
            }
        };
        let (a, b, c) = tokio::join!(d.built(None, build(7)), d.built(None, build(8)), d.built(None, build(9)));
        assert_eq!([*a.unwrap(), *b.unwrap(), *c.unwrap()], [7, 7, 7]);
        assert_eq!(made.load(Ordering::SeqCst), 1, "one build for the burst");
        assert_eq!(*d.built(Some(3), build(30)).await.unwrap(), 30, "a key of its own");
        assert_eq!(*d.built(None, build(10)).await.unwrap(), 7);
        assert_eq!(made.load(Ordering::SeqCst), 2);
        let failed: Result<Arc<String>, String> = d.built(Some(4), || async { Err("down".to_owned()) }).await;
        assert_eq!(failed.unwrap_err(), "down");
        let again: Result<Arc<String>, String> = d.built(Some(4), || async { Ok("up".to_owned()) }).await;
        assert_eq!(*again.unwrap(), "up", "a failure is not kept");
        let next = Directory::of(1, vec![page(1, 1, 11)]);
        assert_eq!(*next.built(None, build(11)).await.unwrap(), 11, "a new read builds anew");
    }

    #[test]
    fn a_write_makes_the_copy_stale() {
        let dirs = Directories::new(1, Duration::from_secs(60), system_clock(), None);
        *dirs.current.write().unwrap() = Some(Arc::new(Directory::of(1, vec![page(1, 1, 1)])));
        assert!(dirs.fresh().is_some());
        dirs.invalidate();
        assert!(dirs.fresh().is_none());
    }
}
