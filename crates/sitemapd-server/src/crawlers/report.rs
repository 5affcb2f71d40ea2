//! What the API, the view and the metrics say of a site's crawlers, made from the stored telemetry (the fetch
//! records, the newest page version each crawler read, the lags of the window) and the site's page table. Pure
//! (no I/O), so that every figure is unit-tested with rows made by hand.
//!
//! A page's current version is its `PageState::modified_us`, the version the telemetry records a read of: a
//! crawler has read a page's current version when the newest version of it the crawler read (verified) is at
//! least that.

use std::collections::{BTreeMap, HashMap};

use crate::crawler::{Crawler, Trust};
use crate::page::PageState;
use crate::store::{FetchRecord, PageRead};

/// The index's resource name: what "the last index fetch" is a fetch of.
pub const INDEX: &str = "sitemap.xml";

/// The most lag samples read per site: the newest of the window. A bound on the read and the sort, far above what
/// a median and a 90th percentile need.
pub const LAG_SAMPLES: u32 = 100_000;

/// Where the lag window of `window_days` (`crawler_window_days`) ending at `now_us` starts.
pub fn window_start(now_us: i64, window_days: u32) -> i64 {
    now_us - i64::from(window_days) * 86_400_000_000
}

/// What is known of one site's crawlers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteReport {
    /// Each crawler with a fetch record or a page read, in [`Crawler::ALL`] order.
    pub crawlers: Vec<CrawlerReport>,
}

/// What is known of one crawler on one site. Times are µs since the Unix epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct CrawlerReport {
    pub crawler: Crawler,
    /// The last verified fetch of the index (`sitemap.xml`); `None` if it never fetched it, verified.
    pub last_index_us: Option<i64>,
    /// The last verified fetch of any other resource (a page, a section's index, news, removed).
    pub last_page_us: Option<i64>,
    /// The last fetch by a client that says it is this crawler from an address that is not the crawler's: a
    /// forger, or a CDN or proxy in front that does not pass the client's address.
    pub last_claimed_us: Option<i64>,
    /// The last fetch that nothing could verify or refute: a crawler whose operator publishes neither address
    /// ranges nor reverse DNS names (GPTBot, ClaudeBot, …), or an unnamed bot.
    pub last_unverifiable_us: Option<i64>,
    /// Verified fetches answered, and of them 304s.
    pub fetches: i64,
    pub not_modified: i64,
    pub lag: Lag,
    /// The listed pages whose current version this crawler has not read; `None` for a crawler that has read no
    /// page (verified), for which every page would count and the figure would say nothing.
    pub unseen: Option<Unseen>,
}

impl CrawlerReport {
    /// The share of verified fetches answered 304 (0 to 1); `None` without a verified fetch.
    pub fn not_modified_share(&self) -> Option<f64> {
        (self.fetches > 0).then(|| self.not_modified as f64 / self.fetches as f64)
    }

    /// Whether all that is known is claimed fetches: no verified one (nor an unverifiable one). What a CDN that hides
    /// the client address looks like.
    pub fn claimed_only(&self) -> bool {
        self.last_claimed_us.is_some()
            && self.last_index_us.is_none()
            && self.last_page_us.is_none()
            && self.last_unverifiable_us.is_none()
    }

    /// The last verified fetch of any resource.
    pub fn last_verified_us(&self) -> Option<i64> {
        self.last_index_us.max(self.last_page_us)
    }
}

/// The change-to-read lags of the window: nearest-rank median and 90th percentile, in seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lag {
    /// `None` without a sample.
    pub median_secs: Option<f64>,
    pub p90_secs: Option<f64>,
    pub samples: usize,
}

impl Lag {
    /// From lags in µs (a negative one, from clocks that differ between replicas, counts as 0).
    pub fn of(lags_us: impl IntoIterator<Item = i64>) -> Self {
        let mut sorted: Vec<i64> = lags_us.into_iter().map(|l| l.max(0)).collect();
        sorted.sort_unstable();
        let secs = |us: i64| us as f64 / 1e6;
        Self {
            median_secs: nearest_rank(&sorted, 50).map(secs),
            p90_secs: nearest_rank(&sorted, 90).map(secs),
            samples: sorted.len(),
        }
    }
}

/// The `p`th percentile of `sorted` by the nearest-rank method: the value at rank ⌈p/100 · n⌉ (1-based), so always
/// one of the samples; `None` when there is none.
fn nearest_rank(sorted: &[i64], p: usize) -> Option<i64> {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// The pages a crawler has not read since their change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unseen {
    pub pages: usize,
    /// The change time (`modified_us`) of the one changed longest ago; `None` when `pages` is 0.
    pub oldest_change_us: Option<i64>,
}

/// One site's report. `fetches`, `seen` and `lags` are that site's rows (`CrawlLog::crawler_fetches`,
/// `crawler_seen` of every page, `crawler_lags` of the window); rows naming a crawler this version does not know
/// (written by a newer one) are left out. Only listed pages (with URLs) count as unseen: an empty page is not
/// served.
pub fn site_report(
    pages: &[PageState],
    fetches: &[FetchRecord],
    seen: &[PageRead],
    lags: &[(String, i64)],
) -> SiteReport {
    let reads = ReadIndex::new(seen, fetches);
    let crawlers = Crawler::ALL
        .into_iter()
        .filter(|c| fetches.iter().any(|f| f.crawler == c.name()) || reads.has_read_any(*c))
        .map(|crawler| {
            let mine = || fetches.iter().filter(move |f| f.crawler == crawler.name());
            let verified = || mine().filter(|f| f.trust == Trust::Verified.name());
            let unseen = reads.has_read_any(crawler).then(|| {
                let stale: Vec<i64> = pages
                    .iter()
                    .filter(|p| p.url_count > 0 && !reads.is_current(crawler, p))
                    .map(|p| p.modified_us)
                    .collect();
                Unseen { pages: stale.len(), oldest_change_us: stale.iter().copied().min() }
            });
            CrawlerReport {
                crawler,
                last_index_us: verified().filter(|f| f.resource == INDEX).map(|f| f.last_us).max(),
                last_page_us: verified().filter(|f| f.resource != INDEX).map(|f| f.last_us).max(),
                last_claimed_us: mine().filter(|f| f.trust == Trust::Claimed.name()).map(|f| f.last_us).max(),
                last_unverifiable_us: mine().filter(|f| f.trust == Trust::Unknown.name()).map(|f| f.last_us).max(),
                fetches: verified().map(|f| f.fetches).sum(),
                not_modified: verified().map(|f| f.not_modified).sum(),
                lag: Lag::of(lags.iter().filter(|(c, _)| c == crawler.name()).map(|(_, lag)| *lag)),
                unseen,
            }
        })
        .collect();
    SiteReport { crawlers }
}

/// What one major crawler did with one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageReads {
    pub crawler: Crawler,
    /// The latest verified fetch of any form of the page (XML or text, gzip or not), whatever it carried.
    pub last_read_us: Option<i64>,
    /// Whether the newest version of the page the crawler read is its current one (`modified_us`) or later.
    pub current: bool,
}

/// Per [`Crawler::MAJOR`], what it did with `page`. `seen` and `fetches` are the page's site's rows. For many
/// pages, build a [`ReadIndex`] once.
pub fn page_reads(page: &PageState, seen: &[PageRead], fetches: &[FetchRecord]) -> [PageReads; 2] {
    ReadIndex::new(seen, fetches).page(page)
}

/// A site's page reads and verified page fetches by crawler and page, so that a table of pages costs O(pages).
#[derive(Clone, Debug, Default)]
pub struct ReadIndex {
    /// The newest version read, by (crawler, page).
    newest: HashMap<(Crawler, i64), i64>,
    /// The latest verified fetch of a page's forms, by (crawler, page).
    last_fetch: HashMap<(Crawler, i64), i64>,
    /// Pages read, by crawler.
    read_pages: BTreeMap<Crawler, usize>,
}

impl ReadIndex {
    pub fn new(seen: &[PageRead], fetches: &[FetchRecord]) -> Self {
        let mut index = Self::default();
        for read in seen {
            let Some(crawler) = Crawler::from_name(&read.crawler) else { continue };
            let newest = index.newest.entry((crawler, read.page_id)).or_insert_with(|| {
                *index.read_pages.entry(crawler).or_default() += 1;
                read.version_us
            });
            *newest = (*newest).max(read.version_us);
        }
        for f in fetches.iter().filter(|f| f.trust == Trust::Verified.name()) {
            let (Some(crawler), Some(page)) = (Crawler::from_name(&f.crawler), f.page_id) else { continue };
            let last = index.last_fetch.entry((crawler, page)).or_insert(f.last_us);
            *last = (*last).max(f.last_us);
        }
        index
    }

    /// Whether `crawler` has read any page (verified).
    pub fn has_read_any(&self, crawler: Crawler) -> bool {
        self.read_pages.get(&crawler).is_some_and(|n| *n > 0)
    }

    /// Whether `crawler` has read `page`'s current version.
    pub fn is_current(&self, crawler: Crawler, page: &PageState) -> bool {
        self.newest.get(&(crawler, page.id)).is_some_and(|v| *v >= page.modified_us)
    }

    /// Per [`Crawler::MAJOR`], what it did with `page`.
    pub fn page(&self, page: &PageState) -> [PageReads; 2] {
        self.record(page, None)
    }

    /// Per [`Crawler::MAJOR`], what it did with a record of `page` that last changed in it at `changed_us` (the
    /// page version that first held it as it is; `None`: not known, the page's current version stands in):
    /// `current` says whether the crawler read that version or a later one, whatever the page's other records did
    /// since.
    pub fn record(&self, page: &PageState, changed_us: Option<i64>) -> [PageReads; 2] {
        let since = changed_us.map_or(page.modified_us, |c| c.min(page.modified_us));
        Crawler::MAJOR.map(|crawler| PageReads {
            crawler,
            last_read_us: self.last_fetch.get(&(crawler, page.id)).copied(),
            current: self.newest.get(&(crawler, page.id)).is_some_and(|v| *v >= since),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{Gzip, NsCounts};

    const T: i64 = 1_800_000_000_000_000;
    const S: i64 = 1_000_000;

    fn page(id: i64, modified_us: i64) -> PageState {
        PageState {
            id,
            url_count: 10,
            byte_size: 1000,
            version: 1,
            modified_us,
            ns: NsCounts::default(),
            gzip: Gzip::Blocks,
            excluded: 0,
        }
    }

    fn fetch(resource: &str, page_id: Option<i64>, crawler: &str, trust: &str, last_us: i64) -> FetchRecord {
        FetchRecord {
            site: 1,
            resource: resource.into(),
            page_id,
            crawler: crawler.into(),
            trust: trust.into(),
            first_us: last_us - 100 * S,
            last_us,
            last_status: 200,
            last_conditional: false,
            last_etag: "\"e\"".into(),
            fetches: 4,
            not_modified: 1,
        }
    }

    fn read(page_id: i64, crawler: &str, version_us: i64) -> PageRead {
        PageRead { site: 1, page_id, crawler: crawler.into(), version_us, first_us: version_us + 60 * S }
    }

    #[test]
    fn no_rows_no_crawlers() {
        assert_eq!(site_report(&[page(1, T)], &[], &[], &[]), SiteReport::default());
        let reads = page_reads(&page(1, T), &[], &[]);
        for (r, c) in reads.iter().zip(Crawler::MAJOR) {
            assert_eq!(*r, PageReads { crawler: c, last_read_us: None, current: false });
        }
    }

    #[test]
    fn crawlers_come_in_table_order_with_verified_figures_apart_from_claimed_ones() {
        let fetches = [
            fetch("sitemap-1.xml", Some(1), "bingbot", "verified", T + 5 * S),
            fetch(INDEX, None, "googlebot", "verified", T + 2 * S),
            fetch("sitemap-1.xml", Some(1), "googlebot", "verified", T + 3 * S),
            fetch("sitemap-news.xml", None, "googlebot", "verified", T + 9 * S),
            // A forger (or a CDN) later than every verified fetch: not the crawler's last fetch.
            fetch(INDEX, None, "googlebot", "claimed", T + 20 * S),
        ];
        let report = site_report(&[page(1, T)], &fetches, &[], &[]);
        let names: Vec<_> = report.crawlers.iter().map(|c| c.crawler).collect();
        assert_eq!(names, [Crawler::Googlebot, Crawler::Bingbot]);
        let google = &report.crawlers[0];
        assert_eq!(google.last_index_us, Some(T + 2 * S));
        assert_eq!(google.last_page_us, Some(T + 9 * S), "any resource but the index");
        assert_eq!(google.last_claimed_us, Some(T + 20 * S));
        assert_eq!(google.last_verified_us(), Some(T + 9 * S));
        assert_eq!((google.fetches, google.not_modified), (12, 3), "verified records only");
        assert_eq!(google.not_modified_share(), Some(0.25));
        assert!(!google.claimed_only());
        assert_eq!(google.unseen, None, "no page read: no unseen figure");
        let bing = &report.crawlers[1];
        assert_eq!((bing.last_index_us, bing.last_page_us, bing.last_claimed_us), (None, Some(T + 5 * S), None));
    }

    #[test]
    fn only_claimed_fetches_say_so_and_count_nothing_verified() {
        let fetches = [fetch(INDEX, None, "googlebot", "claimed", T)];
        let report = site_report(&[page(1, T)], &fetches, &[], &[]);
        let google = &report.crawlers[0];
        assert!(google.claimed_only());
        assert_eq!((google.last_index_us, google.last_page_us, google.last_verified_us()), (None, None, None));
        assert_eq!((google.fetches, google.not_modified_share()), (0, None));
        assert_eq!(google.lag, Lag { median_secs: None, p90_secs: None, samples: 0 });
        // A page of the site read by no one verified: no verified read of it.
        let reads = page_reads(&page(1, T), &[], &[fetch("sitemap-1.xml", Some(1), "googlebot", "claimed", T)]);
        assert_eq!(reads[0].last_read_us, None);
    }

    #[test]
    fn a_read_of_an_older_version_leaves_the_page_unseen() {
        let pages = [page(1, T), page(2, T + 100 * S), page(3, T + 50 * S), PageState { url_count: 0, ..page(4, T) }];
        let seen = [
            read(1, "googlebot", T),          // the current version
            read(2, "googlebot", T),          // before the change at T + 100 s
            read(2, "googlebot", T + 10 * S), // still before it
            read(1, "bingbot", T + 500 * S),  // a version newer than the page table read (a later change)
        ];
        let fetches = [
            fetch("sitemap-1.txt", Some(1), "googlebot", "verified", T + 70 * S),
            fetch("sitemap-1.xml", Some(1), "googlebot", "verified", T + 60 * S),
            fetch("sitemap-2.xml", Some(2), "googlebot", "verified", T + 90 * S),
        ];
        let report = site_report(&pages, &fetches, &seen, &[]);
        let google = &report.crawlers[0];
        // Page 2 read at an older version, page 3 never read; page 4 is empty (not served): not counted.
        assert_eq!(google.unseen, Some(Unseen { pages: 2, oldest_change_us: Some(T + 50 * S) }));
        let bing = &report.crawlers[1];
        assert_eq!(bing.unseen, Some(Unseen { pages: 2, oldest_change_us: Some(T + 50 * S) }));
        assert_eq!(bing.last_verified_us(), None, "a page read without a fetch record: listed, nothing fetched");

        let index = ReadIndex::new(&seen, &fetches);
        let [g, b] = index.page(&pages[0]);
        assert_eq!(g, PageReads { crawler: Crawler::Googlebot, last_read_us: Some(T + 70 * S), current: true });
        assert_eq!(b, PageReads { crawler: Crawler::Bingbot, last_read_us: None, current: true });
        let [g, _] = index.page(&pages[1]);
        assert_eq!(g, PageReads { crawler: Crawler::Googlebot, last_read_us: Some(T + 90 * S), current: false });
        let [g, b] = page_reads(&pages[2], &seen, &fetches);
        assert_eq!((g.last_read_us, g.current, b.current), (None, false, false), "a page never read");
    }

    #[test]
    fn a_record_is_read_since_its_own_change_not_its_neighbours() {
        // Googlebot read the version of T + 10 s; the page changed since (T + 50 s) by another record.
        let page = page(1, T + 50 * S);
        let seen = [read(1, "googlebot", T + 10 * S)];
        let index = ReadIndex::new(&seen, &[]);
        let current = |changed: Option<i64>| index.record(&page, changed)[0].current;
        assert!(current(Some(T + 10 * S)), "changed in the version read");
        assert!(current(Some(T)), "changed before it");
        assert!(!current(Some(T + 50 * S)), "the record's own change came after the read");
        assert!(!current(None), "not known: the page's change stands in");
        assert!(!index.record(&page, Some(T))[1].current, "Bingbot read nothing");
        assert_eq!(index.page(&page), index.record(&page, None));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        assert_eq!(Lag::of([]), Lag { median_secs: None, p90_secs: None, samples: 0 });
        assert_eq!(Lag::of([7 * S]), Lag { median_secs: Some(7.0), p90_secs: Some(7.0), samples: 1 });
        // Two samples: the median is the lower (rank ⌈1⌉ = 1), the 90th the higher (rank ⌈1.8⌉ = 2).
        assert_eq!(Lag::of([9 * S, 3 * S]), Lag { median_secs: Some(3.0), p90_secs: Some(9.0), samples: 2 });
        // Ten samples 1..=10 s: rank 5 and rank 9.
        let ten = Lag::of((1..=10).rev().map(|s| s * S));
        assert_eq!((ten.median_secs, ten.p90_secs, ten.samples), (Some(5.0), Some(9.0), 10));
        // Eleven: rank 6 and rank ⌈9.9⌉ = 10.
        let eleven = Lag::of((1..=11).map(|s| s * S));
        assert_eq!((eleven.median_secs, eleven.p90_secs), (Some(6.0), Some(10.0)));
        assert_eq!(Lag::of([-5 * S]).median_secs, Some(0.0), "a negative lag (clock skew) counts as none");
        assert_eq!(Lag::of([1_500_000]).median_secs, Some(1.5));
    }

    #[test]
    fn a_crawler_nothing_verifies_has_its_own_last_fetch() {
        let fetches = [fetch(INDEX, None, "gptbot", "unknown", T), fetch(INDEX, None, "gptbot", "claimed", T - S)];
        let report = site_report(&[page(1, T)], &fetches, &[], &[]);
        let gpt = &report.crawlers[0];
        assert_eq!((gpt.crawler, gpt.last_unverifiable_us, gpt.last_verified_us()), (Crawler::GptBot, Some(T), None));
        assert_eq!(gpt.fetches, 0, "no verified fetch");
        assert!(!gpt.claimed_only(), "not all it has is claimed");
    }

    #[test]
    fn lags_are_the_crawlers_own_and_unknown_names_are_left_out() {
        let lags = [("googlebot".to_owned(), 4 * S), ("bingbot".to_owned(), 8 * S), ("futurebot".to_owned(), S)];
        let fetches = [
            fetch(INDEX, None, "googlebot", "verified", T),
            fetch(INDEX, None, "bingbot", "verified", T),
            fetch(INDEX, None, "futurebot", "verified", T),
        ];
        let seen = [read(1, "futurebot", T)];
        let report = site_report(&[page(1, T)], &fetches, &seen, &lags);
        assert_eq!(report.crawlers.len(), 2);
        assert_eq!(report.crawlers[0].lag, Lag { median_secs: Some(4.0), p90_secs: Some(4.0), samples: 1 });
        assert_eq!(report.crawlers[1].lag.median_secs, Some(8.0));
    }
}
