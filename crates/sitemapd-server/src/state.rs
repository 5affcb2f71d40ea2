//! `AppState`: what every handler shares. The store holds all shared state. What this process keeps besides (a
//! recent copy of the page table, rendered pages) is derived from it and keyed by its versions, so any number of
//! processes on one database answer alike.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::Config;
use crate::crawlers::{self, Recorder, verify::SystemResolver};
use crate::domain::{Entry, Loc, SectionNames, Sites};
use crate::error::ApiError;
use crate::net::body_budget::BodyBudget;
use crate::net::host::Hosts;
use crate::placement::{Changes, UpsertCounts};
use crate::sitemap::directory::{Clock, OnChange, system_clock};
use crate::sitemap::prerender;
use crate::sitemap::{Directories, PageCache, RenderSlots, Serving};
use crate::store::{
    self, CrawlLog, DeleteCounts, FeedReads, HealthQueue, HreflangReads, Outbox, PublishLog, RemovedList, Store,
    StoreReads,
};
use crate::worker::{Supervisor, Worker};

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// Private: reads go through [`AppState::reads`], writes through [`AppState::upsert`] and [`AppState::delete`].
    store: Arc<dyn Store>,
    /// The settings (the API tokens only as digests).
    pub config: Config,
    /// The sites served (with their stored ids).
    pub sites: Arc<Sites>,
    /// The sites by host, and whom to believe about a request's host.
    hosts: Hosts,
    /// Each site's page table as last read: the index, validators and cache keys are answered from it.
    directories: HashMap<i64, Directories>,
    /// Rendered gzip pages by page state.
    pub page_cache: PageCache,
    /// Page bodies streaming from the database at once: fewer than the pool's connections, so that writes, the
    /// index and `/readyz` always find one.
    page_streams: Arc<Semaphore>,
    /// The pages rendered at once (`render_concurrency`).
    renders: RenderSlots,
    /// The memory of write request bodies in flight, bounded by `body_memory_bytes` ([`crate::net::body_budget`]).
    pub body_budget: BodyBudget,
    /// The sites whose changes the store queues for notification (IndexNow).
    notify_sites: BTreeSet<i64>,
    /// The background features that requests feed.
    features: Features,
    /// The runtime the state was made on (the database's and the background tasks', multi-threaded), where the
    /// API's requests run ([`AppState::off_serving`]). `None` with no runtime.
    work: Option<tokio::runtime::Handle>,
}

/// The background features that requests feed, each through its handle; each feature owns its workers, which run
/// on `serve`'s supervisor ([`AppState::build`]) or on the state's own ([`AppState::new`]).
struct Features {
    /// The pages to render ahead of crawlers (`None` when that is off: `prerender = false` or no cache).
    prerender: Option<Arc<prerender::Queue>>,
    /// Crawlers' fetches recorded (`None` when `crawler_telemetry` is off, or with no runtime).
    crawls: Option<Recorder>,
    /// The features' workers when the state runs them itself: stopped when it is dropped.
    own_workers: OnceLock<Supervisor>,
}

impl AppState {
    /// The state, its background features' workers running on a supervisor of its own, stopped when the state is
    /// dropped (`serve` starts them on its own supervisor instead: [`AppState::build`]).
    pub fn new(store: Arc<dyn Store>, config: &Config) -> Self {
        Self::with_clock(store, config, system_clock())
    }

    /// [`AppState::new`] with `clock` as the time of day (what the news window is measured from): tests move it by
    /// hand.
    pub fn with_clock(store: Arc<dyn Store>, config: &Config, clock: Clock) -> Self {
        let (state, workers) = Self::build(store, config, clock);
        if !workers.is_empty() {
            let mut own = Supervisor::new();
            workers.into_iter().for_each(|w| own.start_arc(w));
            let _ = state.features.own_workers.set(own);
        }
        state
    }

    /// The state, and the workers of the background features it feeds (the crawler telemetry's, the pre-renderer),
    /// in start order, not started.
    pub fn build(store: Arc<dyn Store>, config: &Config, clock: Clock) -> (Self, Vec<Arc<dyn Worker>>) {
        let sites = store.sites();
        let ttl = config.cache.state_ttl;
        // Rendering changed pages ahead of crawlers needs the cache to keep them, and a runtime for its task.
        let prerender =
            (config.cache.prerender && config.cache.bytes > 0 && tokio::runtime::Handle::try_current().is_ok())
                .then(|| Arc::new(prerender::Queue::default()));
        let on_change = prerender.clone().map(|queue| -> OnChange {
            Arc::new(move |site, changed, replaced| queue.changed(site, changed, replaced))
        });
        let directories =
            sites.iter().map(|s| (s.id, Directories::new(s.id, ttl, Arc::clone(&clock), on_change.clone()))).collect();
        drop(clock);
        let notify_sites = crate::indexnow::targets(config, &sites).iter().map(|t| t.site_id).collect();
        let hosts = Hosts {
            sites: Arc::clone(&sites),
            trusted_proxies: config.http.trusted_proxies.clone(),
            forwarded_header: config.http.forwarded_header,
        };
        let (crawls, mut workers) = if config.crawlers.telemetry && tokio::runtime::Handle::try_current().is_ok() {
            let (recorder, workers) =
                Recorder::new(Arc::clone(&store), &crawler_settings(config), Arc::new(SystemResolver));
            (Some(recorder), workers)
        } else {
            (None, Vec::new())
        };
        let inner = Arc::new(Inner {
            work: tokio::runtime::Handle::try_current().ok(),
            store,
            config: config.clone(),
            sites,
            hosts,
            directories,
            page_cache: PageCache::new(config.cache.bytes),
            page_streams: Arc::new(Semaphore::new(page_stream_slots(config.database.max_connections))),
            renders: RenderSlots::new(config.sitemaps.render_concurrency),
            body_budget: BodyBudget::new(config.api.body_memory_bytes, config.api.max_json_bytes),
            notify_sites,
            features: Features { prerender: prerender.clone(), crawls, own_workers: OnceLock::new() },
        });
        if let Some(queue) = prerender {
            // Held weakly: the worker is done when the state is dropped.
            workers.push(Arc::new(prerender::Prerender::new(Arc::downgrade(&inner), Self, queue, ttl)));
        }
        (Self(inner), workers)
    }
}

/// How the crawler telemetry's recorder runs, from the settings.
fn crawler_settings(config: &Config) -> crawlers::Settings {
    crawlers::Settings {
        flush_every: config.tuning.crawler_flush,
        window: config.crawlers.window,
        rdns: config.crawlers.rdns,
        sources: config.crawlers.ranges.clone(),
        refresh_every: config.crawlers.ranges_refresh,
    }
}

/// Three quarters of the pool, at least one.
fn page_stream_slots(pool: u32) -> usize {
    (pool - pool / 4).max(1) as usize
}

impl Inner {
    /// False when tokens are configured (the server then may listen beyond loopback).
    pub fn open_writes(&self) -> bool {
        self.config.api.tokens.is_empty()
    }

    /// `site`'s page table as last read (`site` is one of [`Inner::sites`]).
    pub fn directories(&self, site: i64) -> &Directories {
        &self.directories[&site]
    }

    /// `site`'s section names, knowing every section of `ids`: as its directory last read them when they do,
    /// else read now (names never change, so a name once read stays true). A site no longer configured has no
    /// directory: read.
    pub async fn section_names(&self, site: i64, ids: impl Iterator<Item = i64>) -> store::Result<Arc<SectionNames>> {
        if let Some(directories) = self.directories.get(&site) {
            let known = directories.get(self.reads()).await?.sections().clone();
            if known.knows_all(ids) {
                return Ok(known);
            }
        }
        Ok(Arc::new(SectionNames::new(self.reads().sections(site).await?)))
    }

    /// The store's reads.
    pub fn reads(&self) -> &dyn StoreReads {
        self.store.as_ref()
    }

    /// Change notification's queue (IndexNow's outbox): its size, for `/metrics`.
    pub fn outbox(&self) -> &dyn Outbox {
        self.store.as_ref()
    }

    /// Crawler telemetry's log: its reads, for the API, the view and `/metrics`.
    pub fn crawl_log(&self) -> &dyn CrawlLog {
        self.store.as_ref()
    }

    /// URL health's queue: its reads, for the API, the view and `/metrics` (a settle that changes a page goes
    /// through the checker, which hands its changes to [`AppState::written`]).
    pub fn health_queue(&self) -> &dyn HealthQueue {
        self.store.as_ref()
    }

    /// hreflang clusters' reads, for the API, the lookup, the view and `/metrics`.
    pub fn hreflang(&self) -> &dyn HreflangReads {
        self.store.as_ref()
    }

    /// Publishing's record of each target (its state, for the view and `/metrics`; the passes write it).
    pub fn publish_log(&self) -> &dyn PublishLog {
        self.store.as_ref()
    }

    /// URL health: an operator's order to a site's brake (no page changes: a resume or a confirmation excludes
    /// only at the next checks).
    pub async fn health_brake_order(
        &self,
        site: i64,
        order: store::BrakeOrder,
    ) -> store::Result<Option<store::BrakeState>> {
        self.store.health_brake_order(site, order).await
    }

    /// Upserts through the store, then brings up to date what derives from it ([`AppState::written`]).
    pub async fn upsert(&self, entries: &[Entry]) -> store::Result<UpsertCounts> {
        let written = self.store.upsert(entries).await;
        self.written(written.as_ref().ok().map(|w| &w.changes));
        written.map(|w| w.counts)
    }

    /// Deletes through the store, then brings up to date what derives from it ([`AppState::written`]).
    pub async fn delete(&self, locs: &[Loc]) -> store::Result<DeleteCounts> {
        let written = self.store.delete(locs).await;
        self.written(written.as_ref().ok().map(|w| &w.changes));
        written.map(|w| w.counts)
    }

    /// The one place that follows every write of this process, committed or not: `changes` is what it changed,
    /// or `None` when it failed (it may still have committed: a lost connection can hide a commit). The page table
    /// is read again for the next answer. Rendered pages need nothing: the cache is keyed by page state, so a
    /// changed page is a new key. The store has queued the changed locs of the sites that notify (IndexNow) in the
    /// write's transaction; they are counted here. The changed pages are queued to be rendered ahead of crawlers
    /// ([`prerender`]): a set insert, so the write's answer never waits for it.
    fn written(&self, changes: Option<&BTreeMap<i64, Changes>>) {
        for (site, directories) in &self.directories {
            // A failed write may have committed: every site's copy is stale then.
            if changes.is_none_or(|c| c.contains_key(site)) {
                directories.invalidate();
            }
        }
        for (site, changes) in changes.into_iter().flatten() {
            if self.notify_sites.contains(site) {
                crate::telemetry::indexnow_queued(changes.locs.len());
            }
            // Rendered ahead of crawlers; the states they replace are forgotten when the page table is read again.
            if let Some(queue) = &self.features.prerender {
                queue.push(*site, changes.pages.iter().filter(|p| p.listed()).map(|p| (p.id, p.version)));
            }
        }
    }

    /// Runs `work` on the state's own runtime, in the current span, and waits for it: a write's CPU work (the
    /// placement of a batch, its statements) then never holds a serving thread, whose other connections would
    /// wait behind it (`serve_threads`: a thread serves its connections alone). Dropping the answer aborts
    /// `work`, as dropping `work` itself would. Its panic comes back as the error, with the panic's payload.
    pub async fn off_serving<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> std::thread::Result<T> {
        use tracing::Instrument;
        let work = work.instrument(tracing::Span::current());
        let Some(runtime) = &self.work else { return Ok(work.await) };
        let task = tokio_util::task::AbortOnDropHandle::new(runtime.spawn(work));
        task.await.map_err(|e| match e.try_into_panic() {
            Ok(payload) => payload,
            // Aborted only as its runtime shuts down: the process is stopping.
            Err(_) => Box::new("the runtime is shutting down"),
        })
    }

    /// Where crawlers' fetches are recorded (`None`: `crawler_telemetry` is off).
    pub fn crawl_recorder(&self) -> Option<&Recorder> {
        self.features.crawls.as_ref()
    }

    /// A slot for streaming one page body, waiting at most the pool's acquire timeout (then 503).
    pub async fn page_stream_slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        let acquire_timeout = self.config.database.acquire_timeout;
        match tokio::time::timeout(acquire_timeout, self.page_streams.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                tracing::warn!("every page stream slot is busy");
                Err(ApiError::unavailable())
            }
        }
    }
}

/// URL health's checker tells the state which pages an exclusion or a restore changed: as after a write.
impl crate::checker::Notify for AppState {
    fn pages_changed(&self, changes: &BTreeMap<i64, Changes>) {
        self.written(Some(changes));
    }
}

impl AsRef<Hosts> for AppState {
    fn as_ref(&self) -> &Hosts {
        &self.hosts
    }
}

/// The sitemap routes and the pre-render task serve from this state.
impl Serving for AppState {
    fn config(&self) -> &Config {
        &self.config
    }

    fn reads(&self) -> &dyn StoreReads {
        Inner::reads(self)
    }

    fn removed_list(&self) -> &dyn RemovedList {
        self.store.as_ref()
    }

    fn feed_reads(&self) -> &dyn FeedReads {
        self.store.as_ref()
    }

    fn sites(&self) -> &Sites {
        &self.sites
    }

    fn directories(&self, site: i64) -> &Directories {
        Inner::directories(self, site)
    }

    fn page_cache(&self) -> &PageCache {
        &self.page_cache
    }

    fn page_stream_slot(&self) -> impl Future<Output = Result<OwnedSemaphorePermit, ApiError>> + Send {
        Inner::page_stream_slot(self)
    }

    fn render_slots(&self) -> &RenderSlots {
        &self.renders
    }

    fn crawls(&self) -> Option<&Recorder> {
        self.0.features.crawls.as_ref()
    }
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
