//! What the view reads, and the only place that knows how: the sites, and per site its page table, one page's
//! state, one page's records by keyset, one record by loc, its crawler telemetry, its feeds, its hreflang clusters
//! and its publishing targets. The handlers reach the store through this alone, so that serving several sites changes these bodies
//! (per-site store calls, the configured sites) and not the handlers or the templates.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::AppState;
use crate::crawlers::report::{self, PageReads, ReadIndex};
use crate::domain::{Loc, PublicUrl, SectionNames};
use crate::feed::{FeedBody, FeedRef};
use crate::health::Policy;
use crate::hreflang::Policy as HreflangPolicy;
use crate::page::{Limits, PageState, StoredUrl, section_of};
use crate::store::{
    self, FetchRecord, HealthSummary, HreflangSummary, PageRead, ProblemFilter, PublishStatus, StoredProblem, UrlCheck,
};

/// The most problem URLs the site screen lists: the first of the definite problems by record id, then the transient
/// failures.
pub const HEALTH_URLS: u32 = 100;

/// The most hreflang problems the site screen lists (the API lists them all).
pub const HREFLANG_PROBLEMS: u32 = 20;

/// A site's hreflang clusters as read for one screen.
#[derive(Clone, Debug)]
pub struct SiteHreflang {
    pub policy: HreflangPolicy,
    pub summary: HreflangSummary,
    /// At most [`HREFLANG_PROBLEMS`], in the API's order.
    pub problems: Vec<StoredProblem>,
    /// Whether more follow.
    pub more: bool,
}

/// A site's publishing targets as read for one screen.
#[derive(Clone, Debug)]
pub struct SitePublishing {
    /// Each target the site's passes have claimed, in target order.
    pub targets: Vec<PublishStatus>,
    /// When it was read, µs since the Unix epoch.
    pub now_us: i64,
}

/// A site as the view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewSite {
    /// Its stored id (the one site of today is 1).
    pub id: i64,
    /// Its name: the path segment of its screens (`/view/{name}/`).
    pub name: String,
    /// Where crawlers reach its sitemaps.
    pub public_url: PublicUrl,
    /// Its pages' limits.
    pub limits: Limits,
    /// The sections whose pages hold fewer URLs, by name.
    pub section_max_urls: BTreeMap<String, u32>,
}

/// A site's crawler telemetry as read for one screen.
#[derive(Clone, Debug, Default)]
pub struct CrawlerTelemetry {
    /// The fetch records, one per resource, crawler and trust.
    pub fetches: Vec<FetchRecord>,
    /// The newest version of each page each crawler read (verified).
    pub seen: Vec<PageRead>,
    /// (crawler, lag in µs) of the pages read first within the window.
    pub lags: Vec<(String, i64)>,
    /// The window's days (`crawlers.window`).
    pub window_days: u32,
    /// When it was read, µs since the Unix epoch: what "3 h ago" counts from.
    pub now_us: i64,
}

/// A site's URL health as read for one screen.
#[derive(Clone, Debug)]
pub struct SiteHealth {
    pub policy: Policy,
    pub summary: HealthSummary,
    /// At most [`HEALTH_URLS`]: the definite problems first, then the transient failures (each URL once).
    pub urls: Vec<UrlCheck>,
    /// Whether either listing was full (more may follow).
    pub more: bool,
    /// When it was read, µs since the Unix epoch.
    pub now_us: i64,
}

/// The view's reads over the service's state.
#[derive(Clone, Copy)]
pub struct ViewData<'a> {
    state: &'a AppState,
}

impl<'a> ViewData<'a> {
    pub fn new(state: &'a AppState) -> Self {
        Self { state }
    }

    /// Every site, in configuration order.
    pub fn sites(&self) -> Vec<ViewSite> {
        let limits = self.state.config.limits();
        let section_max_urls = &self.state.config.sitemaps.section_max_urls;
        self.state
            .sites
            .iter()
            .map(|s| ViewSite {
                id: s.id,
                name: s.name.clone(),
                public_url: s.public_url.clone(),
                limits,
                section_max_urls: section_max_urls.clone(),
            })
            .collect()
    }

    /// The site named `name`.
    pub fn site(&self, name: &str) -> Option<ViewSite> {
        self.sites().into_iter().find(|s| s.name == name)
    }

    /// The site's Atom feeds with what each holds as served now (each built at most once per read of the page
    /// table, as the route builds it: O(`feeds.entries`) per feed); `None` when feeds are off.
    pub async fn feeds(&self, site: &ViewSite) -> store::Result<Option<Vec<(FeedRef, FeedBody)>>> {
        if !self.state.config.feeds.enabled {
            return Ok(None);
        }
        let mut shown = Vec::new();
        for feed in crate::feed::feeds(self.state, site.id).await? {
            let body = crate::feed::current(self.state, &feed).await?;
            shown.push((feed, body));
        }
        Ok(Some(shown))
    }

    /// The site's page table, empty pages included, in page order: O(pages).
    pub async fn pages(&self, site: &ViewSite) -> store::Result<Vec<PageState>> {
        self.state.reads().pages(site.id).await
    }

    /// The site's section names, knowing the sections of every page of `pages`.
    pub async fn sections(&self, site: &ViewSite, pages: &[PageState]) -> store::Result<Arc<SectionNames>> {
        self.state.section_names(site.id, pages.iter().map(|p| section_of(p.id))).await
    }

    /// One page of the site, empty or not; `None` when it has no such page.
    pub async fn page(&self, site: &ViewSite, id: i64) -> store::Result<Option<PageState>> {
        self.state.reads().page(site.id, id).await
    }

    /// The page's records in id order after the record with id `after`: at most `limit`, fewer once they render to
    /// more than [`store::LIST_MAX_BYTES`].
    pub async fn page_urls(&self, site: &ViewSite, page: i64, after: i64, limit: u32) -> store::Result<Vec<StoredUrl>> {
        self.state.reads().page_urls(site.id, page, after, limit).await
    }

    /// The site's crawler telemetry (three reads: fetch records O(resources × crawlers), page reads O(pages ×
    /// crawlers), the window's lags at most [`report::LAG_SAMPLES`]); `None` when `crawlers.telemetry` is off.
    pub async fn crawlers(&self, site: &ViewSite) -> store::Result<Option<CrawlerTelemetry>> {
        if !self.state.config.crawlers.telemetry {
            return Ok(None);
        }
        let now_us = now_us();
        let window_days = crate::config::days_of(self.state.config.crawlers.window);
        let reads = self.state.crawl_log();
        Ok(Some(CrawlerTelemetry {
            fetches: reads.crawler_fetches(site.id).await?,
            seen: reads.crawler_seen(site.id, None).await?,
            lags: reads.crawler_lags(site.id, report::window_start(now_us, window_days), report::LAG_SAMPLES).await?,
            window_days,
            now_us,
        }))
    }

    /// The site's URL health (three reads: the summary, O(problem rows); at most [`HEALTH_URLS`] problem URLs and
    /// as many transient ones, through the problem rows' index); `None` when the site is not checked.
    pub async fn health(&self, site: &ViewSite) -> store::Result<Option<SiteHealth>> {
        let Some(policy) = self.state.config.health.check.policy(&site.name) else { return Ok(None) };
        let now_us = now_us();
        let reads = self.state.health_queue();
        let summary = reads.health_summary(site.id).await?;
        let problems = reads.health_problems(Some(site.id), ProblemFilter::Any, 0, HEALTH_URLS).await?;
        let mut more = problems.len() >= HEALTH_URLS as usize;
        let mut urls: Vec<UrlCheck> = problems.into_iter().map(|(_, check)| check).collect();
        let room = HEALTH_URLS as usize - urls.len().min(HEALTH_URLS as usize);
        if room > 0 && summary.transient > 0 {
            let transient = reads.health_problems(Some(site.id), ProblemFilter::Transient, 0, HEALTH_URLS).await?;
            more |= transient.len() >= HEALTH_URLS as usize;
            let fresh: Vec<UrlCheck> =
                transient.into_iter().map(|(_, c)| c).filter(|c| !urls.iter().any(|u| u.loc == c.loc)).collect();
            more |= fresh.len() > room;
            urls.extend(fresh.into_iter().take(room));
        } else if summary.transient > 0 {
            more = true;
        }
        Ok(Some(SiteHealth { policy, summary, urls, more, now_us }))
    }

    /// The site's hreflang clusters (two reads: the summary, O(its members and problem rows); the first
    /// [`HREFLANG_PROBLEMS`] problems, through their key).
    pub async fn hreflang(&self, site: &ViewSite) -> store::Result<SiteHreflang> {
        let reads = self.state.hreflang();
        let summary = reads.hreflang_summary(site.id).await?;
        let mut problems = reads.hreflang_problems(site.id, None, HREFLANG_PROBLEMS + 1).await?;
        let more = problems.len() > HREFLANG_PROBLEMS as usize;
        problems.truncate(HREFLANG_PROBLEMS as usize);
        Ok(SiteHreflang { policy: self.state.config.sitemaps.hreflang.policy(&site.name), summary, problems, more })
    }

    /// The site's publishing targets as their passes left them (one read: the targets' rows and a count over their
    /// objects, O(objects)). A target appears once a pass has claimed it; a site without one has none.
    pub async fn publishing(&self, site: &ViewSite) -> store::Result<SitePublishing> {
        let targets = self.state.publish_log().publish_status(Some(site.id)).await?;
        Ok(SitePublishing { targets, now_us: now_us() })
    }

    /// A record's URL health: its check (`None` inside: not tracked) and when it was read; `None` when the site is
    /// not checked. One read by primary key.
    pub async fn record_health(&self, site: &ViewSite, loc: &str) -> store::Result<Option<(Option<UrlCheck>, i64)>> {
        if self.state.config.health.check.policy(&site.name).is_none() {
            return Ok(None);
        }
        Ok(Some((self.state.health_queue().health_of(site.id, loc).await?, now_us())))
    }

    /// Per major crawler, what it read of the page that holds `url` since `url` changed, and when it was read;
    /// `None` when `crawler_telemetry` is off. One snapshot: O(1) reads of the record and its page, O(crawlers) of
    /// the page's reads.
    pub async fn record_reads(&self, site: &ViewSite, url: &StoredUrl) -> store::Result<Option<(Vec<PageReads>, i64)>> {
        if !self.state.config.crawlers.telemetry {
            return Ok(None);
        }
        let rows = self.state.crawl_log().crawler_record(site.id, url.id, url.page_id).await?;
        let Some(page) = rows.page else { return Ok(None) };
        let reads = ReadIndex::new(&rows.seen, &rows.fetches).record(&page, rows.changed_us);
        Ok(Some((reads.to_vec(), now_us())))
    }

    /// The site's record of `loc`, if it stores one (a record of another site is not this site's).
    pub async fn find(&self, site: &ViewSite, loc: &Loc) -> store::Result<Option<StoredUrl>> {
        Ok(self.state.reads().find(loc).await?.filter(|found| found.site == site.id).map(|found| found.url))
    }
}

/// Now, µs since the Unix epoch: what "3 h ago" counts from.
fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}
