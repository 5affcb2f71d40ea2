//! Whether a request that names a crawler comes from it: its address in the crawler's published IP ranges (the
//! shipped files, or the operator's `crawler_ranges`, read again every `crawler_ranges_refresh_hours`), else its
//! reverse DNS name under the crawler's domains and that name resolving back to the address (forward-confirmed
//! reverse DNS, through the system resolver), each answer cached for an hour, at most [`CACHE_ENTRIES`] of them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;

use super::{RangeSource, RangeSources};
use crate::crawler::{Crawler, IpRanges, Trust, rdns_name_matches};

/// Reverse DNS answers kept (address and crawler → verified or not).
pub const CACHE_ENTRIES: u64 = 10_000;
/// How long one is kept.
const CACHE_TTL: Duration = Duration::from_secs(3600);
/// The longest one lookup (reverse or forward) may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest range file read.
const MAX_RANGE_FILE: u64 = 8 << 20;

/// The range files shipped with the release (`config/crawlers/`, see its SOURCES.md): the operators' own lists.
pub fn shipped() -> HashMap<Crawler, IpRanges> {
    let files: &[(Crawler, &str)] = &SHIPPED;
    files
        .iter()
        .map(|(crawler, text)| (*crawler, IpRanges::parse(text).expect("a shipped range file parses (tested)")))
        .collect()
}

const SHIPPED: [(Crawler, &str); 3] = [
    (Crawler::Googlebot, include_str!("../../../../config/crawlers/googlebot.json")),
    (Crawler::Applebot, include_str!("../../../../config/crawlers/applebot.json")),
    (Crawler::DuckDuckBot, include_str!("../../../../config/crawlers/duckduckbot.json")),
];

/// What can be said of a claim right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Known(Trust),
    /// Only reverse DNS can tell, and it is not cached: look it up ([`Verifier::lookup`]).
    Lookup(IpAddr),
}

/// The system resolver, or a test's.
#[async_trait]
pub trait Resolver: Send + Sync + 'static {
    /// The address's reverse DNS name (PTR), if any.
    async fn reverse(&self, ip: IpAddr) -> Option<String>;
    /// The addresses a name resolves to.
    async fn forward(&self, name: &str) -> Vec<IpAddr>;
}

/// `getnameinfo` / `getaddrinfo` on the blocking pool, as the host resolves names (`/etc/hosts`, nsswitch, DNS).
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn reverse(&self, ip: IpAddr) -> Option<String> {
        let lookup = tokio::task::spawn_blocking(move || dns_lookup::lookup_addr(&ip).ok());
        tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await.ok()?.ok()?
    }
    async fn forward(&self, name: &str) -> Vec<IpAddr> {
        let name = name.to_owned();
        let lookup = tokio::task::spawn_blocking(move || dns_lookup::lookup_host(&name).map(|a| a.collect::<Vec<_>>()));
        match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
            Ok(Ok(Ok(addrs))) => addrs,
            _ => Vec::new(),
        }
    }
}

pub struct Verifier {
    ranges: RwLock<Arc<HashMap<Crawler, IpRanges>>>,
    rdns: bool,
    resolver: Arc<dyn Resolver>,
    cache: moka::future::Cache<(IpAddr, Crawler), bool>,
}

impl Verifier {
    /// With `ranges` (the shipped ones with the configured ones on top), reverse DNS on or off.
    pub fn new(ranges: HashMap<Crawler, IpRanges>, rdns: bool, resolver: Arc<dyn Resolver>) -> Self {
        let cache = moka::future::Cache::builder().max_capacity(CACHE_ENTRIES).time_to_live(CACHE_TTL).build();
        Self { ranges: RwLock::new(Arc::new(ranges)), rdns, resolver, cache }
    }

    /// The ranges in use.
    pub fn ranges(&self) -> Arc<HashMap<Crawler, IpRanges>> {
        Arc::clone(&self.ranges.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces one crawler's ranges (a refresh).
    pub fn set_ranges(&self, crawler: Crawler, ranges: Option<IpRanges>) {
        let mut held = self.ranges.write().unwrap_or_else(|p| p.into_inner());
        let mut next = HashMap::clone(&held);
        match ranges {
            Some(r) => next.insert(crawler, r),
            None => next.remove(&crawler),
        };
        *held = Arc::new(next);
    }

    /// The verdict without a lookup: by the ranges, else by a cached reverse DNS answer.
    pub async fn check(&self, crawler: Crawler, addr: Option<IpAddr>) -> Verdict {
        let ranges = self.ranges();
        let in_ranges = ranges.get(&crawler).filter(|r| !r.is_empty());
        let by_rdns = self.rdns && !crawler.rdns_domains().is_empty();
        if crawler == Crawler::Other || (in_ranges.is_none() && !by_rdns) {
            return Verdict::Known(Trust::Unknown);
        }
        let Some(addr) = addr else { return Verdict::Known(Trust::Claimed) };
        if in_ranges.is_some_and(|r| r.contains(addr)) {
            return Verdict::Known(Trust::Verified);
        }
        if !by_rdns {
            return Verdict::Known(Trust::Claimed);
        }
        match self.cache.get(&(addr, crawler)).await {
            Some(true) => Verdict::Known(Trust::Verified),
            Some(false) => Verdict::Known(Trust::Claimed),
            None => Verdict::Lookup(addr),
        }
    }

    /// Forward-confirmed reverse DNS of `addr` for `crawler`, cached: its PTR name lies under the crawler's
    /// domains and resolves back to `addr`.
    pub async fn lookup(&self, crawler: Crawler, addr: IpAddr) -> bool {
        let verified = match self.resolver.reverse(addr).await {
            Some(name) if rdns_name_matches(crawler, &name) => {
                let confirmed = self.resolver.forward(&name).await.into_iter().any(|a| same_addr(a, addr));
                crate::telemetry::crawler_rdns(if confirmed { "verified" } else { "refused" });
                confirmed
            }
            Some(_) => {
                crate::telemetry::crawler_rdns("refused");
                false
            }
            None => {
                crate::telemetry::crawler_rdns("failed");
                false
            }
        };
        self.cache.insert((addr, crawler), verified).await;
        verified
    }

    /// Reverse DNS answers cached now (after pending evictions).
    pub async fn cached(&self) -> u64 {
        self.cache.run_pending_tasks().await;
        self.cache.entry_count()
    }
}

/// Two addresses the same, an IPv4-mapped IPv6 one as its IPv4.
fn same_addr(a: IpAddr, b: IpAddr) -> bool {
    let v4 = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        ip => ip,
    };
    v4(a) == v4(b)
}

/// Reads one configured source: a file (at most 8 MiB) or a URL (same bound, 30 s).
pub async fn read_source(source: &RangeSource) -> anyhow::Result<Option<IpRanges>> {
    use anyhow::Context;
    let text = match source {
        RangeSource::None => return Ok(None),
        RangeSource::File(path) => {
            let path = path.clone();
            let read = tokio::task::spawn_blocking(move || read_range_file(&path)).await?;
            read.map_err(anyhow::Error::msg)?
        }
        RangeSource::Url(url) => {
            let client = crate::http_client::builder()?.timeout(Duration::from_secs(30)).build()?;
            let response = client.get(url.clone()).send().await.with_context(|| format!("cannot fetch {url}"))?;
            anyhow::ensure!(response.status().is_success(), "{url} answered {}", response.status());
            anyhow::ensure!(
                response.content_length().is_none_or(|n| n <= MAX_RANGE_FILE),
                "{url} is larger than 8 MiB"
            );
            // Read a chunk at a time: a body without a length (or lying about it) stops at the bound.
            let mut response = response;
            let mut bytes = Vec::new();
            while let Some(chunk) = response.chunk().await.with_context(|| format!("cannot fetch {url}"))? {
                anyhow::ensure!(bytes.len() + chunk.len() <= MAX_RANGE_FILE as usize, "{url} is larger than 8 MiB");
                bytes.extend_from_slice(&chunk);
            }
            String::from_utf8(bytes).with_context(|| format!("{url} is not UTF-8"))?
        }
    };
    let ranges = IpRanges::parse(&text).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some(ranges))
}

/// A configured file's ranges read now (blocking: the start's), or `None` (not a file, or unreadable: logged).
pub fn read_file_now(source: &RangeSource) -> Option<IpRanges> {
    let RangeSource::File(path) = source else { return None };
    let read = read_range_file(path).and_then(|text| IpRanges::parse(&text).map_err(|e| e.to_string()));
    read.map_err(|e| tracing::warn!(file = %path.display(), error = %e, "cannot read crawler ranges")).ok()
}

/// A range file's text: a regular file (a symlink to one is followed) of at most 8 MiB, read no further than that
/// whatever its size said. A FIFO, a device or a directory is refused before it is opened, so that a start or a
/// refresh never waits on one.
fn read_range_file(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut text = String::new();
    file.take(MAX_RANGE_FILE + 1).read_to_string(&mut text).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if text.len() as u64 > MAX_RANGE_FILE {
        return Err(format!("{shown} is larger than 8 MiB"));
    }
    Ok(text)
}

/// Checks that every configured range file reads and parses (a URL is only fetched by the refresh): a mistyped
/// path or a file that is not a range file stops start-up with the reason, as any invalid setting does, rather than
/// verifying nobody. Blocking (a few reads of at most 8 MiB): the configuration's check at start.
pub fn check_files(sources: &RangeSources) -> Result<(), String> {
    for (crawler, source) in &sources.0 {
        if let RangeSource::File(path) = source {
            read_range_file(path)
                .and_then(|text| IpRanges::parse(&text).map_err(|e| format!("{}: {e}", path.display())))
                .map_err(|e| format!("{}: {e}", crawler.name()))?;
        }
    }
    Ok(())
}

/// The worker (`crawler-ranges`) that reads every configured source at start and then every `every`, replacing the
/// crawler's ranges when it reads; a source that fails keeps what was last read (logged).
pub struct RangeRefresh {
    verifier: Arc<Verifier>,
    sources: RangeSources,
    every: Duration,
}

impl RangeRefresh {
    /// `None` when no source is configured.
    pub fn new(verifier: &Arc<Verifier>, sources: &RangeSources, every: Duration) -> Option<Self> {
        (!sources.0.is_empty()).then(|| Self { verifier: Arc::clone(verifier), sources: sources.clone(), every })
    }
}

#[async_trait]
impl crate::worker::Worker for RangeRefresh {
    fn name(&self) -> &'static str {
        "crawler-ranges"
    }

    async fn run(&self, stop: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
        let mut tick = tokio::time::interval(self.every);
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                _ = tick.tick() => {}
            }
            for (crawler, source) in &self.sources.0 {
                let read = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    read = read_source(source) => read,
                };
                match read {
                    Ok(ranges) => {
                        tracing::info!(
                            crawler = crawler.name(),
                            networks = ranges.as_ref().map_or(0, IpRanges::len),
                            created = ranges.as_ref().and_then(|r| r.creation_time()).unwrap_or("-"),
                            "crawler ranges read"
                        );
                        self.verifier.set_ranges(*crawler, ranges);
                    }
                    Err(e) => tracing::warn!(crawler = crawler.name(), error = %format!("{e:#}"),
                        "cannot read crawler ranges; keeping those last read"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Answers from tables; counts the reverse lookups.
    #[derive(Default)]
    struct Fake {
        ptr: HashMap<IpAddr, String>,
        a: HashMap<String, Vec<IpAddr>>,
        asked: Mutex<u32>,
    }

    #[async_trait]
    impl Resolver for Fake {
        async fn reverse(&self, ip: IpAddr) -> Option<String> {
            *self.asked.lock().unwrap() += 1;
            self.ptr.get(&ip).cloned()
        }
        async fn forward(&self, name: &str) -> Vec<IpAddr> {
            self.a.get(name).cloned().unwrap_or_default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ranges(crawler: Crawler, text: &str) -> HashMap<Crawler, IpRanges> {
        [(crawler, IpRanges::parse(text).unwrap())].into()
    }

    #[tokio::test]
    async fn a_range_file_must_be_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("ranges.fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        for path in [fifo, dir.path().to_owned(), "/dev/zero".into()] {
            let e = read_source(&RangeSource::File(path.clone())).await.unwrap_err().to_string();
            assert!(e.ends_with("is not a regular file"), "{e}");
            assert!(read_file_now(&RangeSource::File(path)).is_none());
        }
        let file = dir.path().join("ranges.txt");
        std::fs::write(&file, "192.0.2.0/24\n").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_source(&RangeSource::File(link)).await.unwrap().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn the_shipped_ranges_verify_an_address_of_each() {
        let v = Verifier::new(shipped(), false, Arc::new(Fake::default()));
        // From the files themselves: Googlebot's 66.249.64.0/27, Applebot's 17.241.208.160/27, DuckDuckBot's 104.43.55.116/32.
        for (crawler, addr) in [
            (Crawler::Googlebot, "66.249.64.1"),
            (Crawler::Applebot, "17.241.208.161"),
            (Crawler::DuckDuckBot, "104.43.55.116"),
        ] {
            assert_eq!(v.check(crawler, Some(ip(addr))).await, Verdict::Known(Trust::Verified), "{crawler:?}");
            assert_eq!(v.check(crawler, Some(ip("192.0.2.1"))).await, Verdict::Known(Trust::Claimed), "{crawler:?}");
        }
    }

    #[tokio::test]
    async fn an_address_in_the_ranges_is_verified_and_one_outside_is_claimed() {
        let v = Verifier::new(ranges(Crawler::Bingbot, "157.55.39.0/24\n"), false, Arc::new(Fake::default()));
        assert_eq!(v.check(Crawler::Bingbot, Some(ip("157.55.39.9"))).await, Verdict::Known(Trust::Verified));
        assert_eq!(v.check(Crawler::Bingbot, Some(ip("::ffff:157.55.39.9"))).await, Verdict::Known(Trust::Verified));
        assert_eq!(v.check(Crawler::Bingbot, Some(ip("157.55.40.9"))).await, Verdict::Known(Trust::Claimed));
        // Googlebot's ranges are not Bingbot's; with no ranges and reverse DNS off there is nothing to check.
        assert_eq!(v.check(Crawler::Googlebot, Some(ip("157.55.39.9"))).await, Verdict::Known(Trust::Unknown));
        assert_eq!(v.check(Crawler::Bingbot, None).await, Verdict::Known(Trust::Claimed));
        assert_eq!(v.check(Crawler::Other, Some(ip("157.55.39.9"))).await, Verdict::Known(Trust::Unknown));
    }

    #[tokio::test]
    async fn reverse_dns_must_lie_under_the_domain_and_resolve_back() {
        let good = ip("66.249.66.1");
        let forged = ip("203.0.113.7");
        let liar = ip("203.0.113.8");
        let fake = Fake {
            ptr: [
                (good, "crawl-66-249-66-1.googlebot.com.".to_owned()),
                (forged, "googlebot.com.evil.example".to_owned()),
                // Its owner controls its PTR, not googlebot.com's A records.
                (liar, "crawl-66-249-66-1.googlebot.com".to_owned()),
            ]
            .into(),
            a: [
                ("crawl-66-249-66-1.googlebot.com.".to_owned(), vec![good]),
                ("crawl-66-249-66-1.googlebot.com".to_owned(), vec![good]),
            ]
            .into(),
            asked: Mutex::new(0),
        };
        let fake = Arc::new(fake);
        let v = Verifier::new(HashMap::new(), true, fake.clone());
        assert_eq!(v.check(Crawler::Googlebot, Some(good)).await, Verdict::Lookup(good));
        assert!(v.lookup(Crawler::Googlebot, good).await);
        assert!(!v.lookup(Crawler::Googlebot, forged).await);
        assert!(!v.lookup(Crawler::Googlebot, liar).await);
        assert!(!v.lookup(Crawler::Googlebot, ip("198.51.100.1")).await, "no PTR");
        // Cached either way: no second lookup.
        let asked = *fake.asked.lock().unwrap();
        assert_eq!(v.check(Crawler::Googlebot, Some(good)).await, Verdict::Known(Trust::Verified));
        assert_eq!(v.check(Crawler::Googlebot, Some(liar)).await, Verdict::Known(Trust::Claimed));
        assert_eq!(*fake.asked.lock().unwrap(), asked);
        // The answer is per crawler: Googlebot's name does not verify Bingbot.
        assert_eq!(v.check(Crawler::Bingbot, Some(good)).await, Verdict::Lookup(good));
        assert!(!v.lookup(Crawler::Bingbot, good).await);
    }

    #[tokio::test]
    async fn the_cache_is_bounded_whatever_the_addresses() {
        let v = Verifier::new(HashMap::new(), true, Arc::new(Fake::default()));
        for n in 0..(CACHE_ENTRIES as u32 + 5_000) {
            v.lookup(Crawler::Googlebot, IpAddr::from(n.to_be_bytes())).await;
        }
        assert!(v.cached().await <= CACHE_ENTRIES, "{}", v.cached().await);
    }

    #[tokio::test]
    async fn a_refresh_replaces_one_crawlers_ranges() {
        let v = Verifier::new(ranges(Crawler::Bingbot, "10.0.0.0/8"), false, Arc::new(Fake::default()));
        v.set_ranges(Crawler::Bingbot, Some(IpRanges::parse("192.0.2.0/24").unwrap()));
        assert_eq!(v.check(Crawler::Bingbot, Some(ip("10.1.1.1"))).await, Verdict::Known(Trust::Claimed));
        assert_eq!(v.check(Crawler::Bingbot, Some(ip("192.0.2.1"))).await, Verdict::Known(Trust::Verified));
        v.set_ranges(Crawler::Bingbot, None);
        assert_eq!(v.check(Crawler::Bingbot, Some(ip("192.0.2.1"))).await, Verdict::Known(Trust::Unknown));
    }
}
