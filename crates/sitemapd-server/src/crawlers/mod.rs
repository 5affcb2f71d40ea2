//! Crawler telemetry: which crawler read which sitemap, verified, and how long after a page changed.
//!
//! The serving code hands each answered fetch of a client that names a crawler to [`Recorder::record`] (a bounded
//! queue: never a wait). One worker (`crawler-telemetry`) verifies it ([`verify`]: the published ranges, else
//! reverse DNS off the request path), merges it in memory ([`aggregate`], bounded), and writes that to the database
//! every `crawler_flush_ms` in one transaction that merges with what other processes wrote
//! ([`crate::store::CrawlLog::record_crawls`]), and once more when it stops. Two more workers: `crawler-purge` deletes
//! superseded page reads every hour, `crawler-ranges` reads the configured range sources again
//! ([`verify::RangeRefresh`]).
//! What the API, the view and the metrics make of it is [`report`].

pub mod aggregate;
pub mod report;
pub mod verify;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

pub use self::aggregate::{Aggregate, Fetch};
use self::verify::{Resolver, Verdict, Verifier};
use crate::crawler::{Crawler, Trust};
use crate::store::Store;
use crate::worker::Worker;

/// Where a crawler's IP ranges come from instead of the shipped file (`crawler_ranges`: `NAME=SOURCE, …`): a file
/// (an absolute path) or an `http(s)://` URL, read at start and every `crawler_ranges_refresh_hours`; `none`: no
/// ranges for that crawler (only reverse DNS verifies it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSources(pub BTreeMap<Crawler, RangeSource>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeSource {
    File(std::path::PathBuf),
    Url(url::Url),
    None,
}

impl RangeSources {
    /// `crawler_ranges` as configured; the error is what the setting's message says after its name.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut sources = BTreeMap::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, source) =
                item.split_once('=').ok_or_else(|| format!("{item:?} is not NAME=SOURCE (a file, a URL or none)"))?;
            let (name, source) = (name.trim(), source.trim());
            let crawler = Crawler::from_name(name).filter(|c| *c != Crawler::Other).ok_or_else(|| {
                let known: Vec<_> = Crawler::ALL.iter().filter(|c| **c != Crawler::Other).map(|c| c.name()).collect();
                format!("{name:?} is not a crawler sitemapd knows (one of {})", known.join(", "))
            })?;
            let source = if source == "none" {
                RangeSource::None
            } else if source.starts_with("http://") || source.starts_with("https://") {
                RangeSource::Url(url::Url::parse(source).map_err(|e| format!("{source:?} is not a URL: {e}"))?)
            } else if source.starts_with('/') {
                RangeSource::File(source.into())
            } else {
                return Err(format!("{name}'s source {source:?} is not an absolute path, an http(s) URL or none"));
            };
            if sources.insert(crawler, source).is_some() {
                return Err(format!("{name} is given twice"));
            }
        }
        Ok(Self(sources))
    }

    /// As logged.
    pub fn shown(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(crawler, source)| match source {
                RangeSource::File(path) => format!("{}={}", crawler.name(), path.display()),
                RangeSource::Url(url) => format!("{}={url}", crawler.name()),
                RangeSource::None => format!("{}=none", crawler.name()),
            })
            .collect()
    }
}

/// Distinct (resource, crawler, trust) keys, and as many page-read keys, held between two flushes: what a flood of
/// odd agents and addresses can make this process hold (a few MiB), whatever the traffic.
pub const MAX_KEYS: usize = 50_000;
/// Fetches waiting for the recorder: beyond, they are counted as dropped and the answer goes on.
pub const QUEUE: usize = 16_384;
/// Reverse DNS lookups in flight; a claim needing one more is recorded as claimed.
pub const LOOKUPS: usize = 32;
/// Fetches waiting for their lookups.
pub const WAITING: usize = 4_096;
/// The longest one flush may take before its telemetry is given up.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);
/// How often superseded page reads older than the window are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// The fetches recorded and not yet taken by the task: a buffer behind a mutex (a push is a few nanoseconds and wakes
/// nobody), drained by the task every [`DRAIN_EVERY`], or at once when it is half full.
struct Queue {
    fetches: Mutex<Vec<Fetch>>,
    half_full: Notify,
}

/// How often the task takes the queued fetches.
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// The recording half the serving code holds: [`Recorder::record`] never waits.
pub struct Recorder {
    queue: Arc<Queue>,
    /// Flush requests (each acknowledged once written); dropped with the recorder, which ends the task.
    control: mpsc::Sender<oneshot::Sender<()>>,
    verifier: Arc<Verifier>,
}

/// How the recorder runs (from the settings).
#[derive(Clone, Debug)]
pub struct Settings {
    pub flush_every: Duration,
    pub window: Duration,
    pub rdns: bool,
    pub sources: RangeSources,
    pub refresh_every: Duration,
}

impl Recorder {
    /// The recorder, and its workers in start order: the ranges' refresh (when a source is configured), the
    /// recording (`crawler-telemetry`: it ends, after a last flush, when stopped or when the recorder is dropped)
    /// and the purge of superseded page reads.
    pub fn new(
        store: Arc<dyn Store>,
        settings: &Settings,
        resolver: Arc<dyn Resolver>,
    ) -> (Self, Vec<Arc<dyn Worker>>) {
        let mut ranges = verify::shipped();
        for (crawler, source) in &settings.sources.0 {
            // A file is read now (the server checked it at start); a URL when the refresh first runs, and until
            // then the crawler has no ranges: the shipped file may be what the operator replaced.
            match verify::read_file_now(source) {
                Some(read) => ranges.insert(*crawler, read),
                None => ranges.remove(crawler),
            };
        }
        let verifier = Arc::new(Verifier::new(ranges, settings.rdns, resolver));
        let mut workers: Vec<Arc<dyn Worker>> = Vec::new();
        if let Some(refresh) = verify::RangeRefresh::new(&verifier, &settings.sources, settings.refresh_every) {
            workers.push(Arc::new(refresh));
        }
        let queue = Arc::new(Queue { fetches: Mutex::new(Vec::with_capacity(1024)), half_full: Notify::new() });
        let (control, requests) = mpsc::channel(16);
        workers.push(Arc::new(Recording {
            store: Arc::clone(&store),
            verifier: Arc::clone(&verifier),
            queue: Arc::clone(&queue),
            requests: tokio::sync::Mutex::new(requests),
            flush_every: settings.flush_every,
        }));
        workers.push(Arc::new(Purge { store, window: settings.window }));
        (Self { queue, control, verifier }, workers)
    }

    /// Records one fetch, or counts it dropped when [`QUEUE`] fetches wait already: never waits.
    pub fn record(&self, fetch: Fetch) {
        let mut fetches = self.queue.fetches.lock().unwrap_or_else(|p| p.into_inner());
        if fetches.len() >= QUEUE {
            drop(fetches);
            crate::telemetry::crawler_dropped("queue_full", 1);
            return;
        }
        fetches.push(fetch);
        if fetches.len() == QUEUE / 2 {
            self.queue.half_full.notify_one();
        }
    }

    /// Writes everything recorded before this call (its lookups done) to the database; returns when it is written
    /// or given up. Tests, and the server's shutdown.
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.control.send(ack).await.is_ok() {
            let _ = done.await;
        }
    }

    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }
}

/// The recording: what the queue and the flush requests reach, held across runs.
struct Recording {
    store: Arc<dyn Store>,
    verifier: Arc<Verifier>,
    queue: Arc<Queue>,
    /// Flush requests; closed when the recorder is dropped.
    requests: tokio::sync::Mutex<mpsc::Receiver<oneshot::Sender<()>>>,
    flush_every: Duration,
}

#[async_trait]
impl Worker for Recording {
    fn name(&self) -> &'static str {
        "crawler-telemetry"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        let mut requests = self.requests.lock().await;
        let task = Task {
            store: Arc::clone(&self.store),
            verifier: Arc::clone(&self.verifier),
            agg: Aggregate::new(MAX_KEYS),
            lookups: JoinSet::new(),
            waiting: HashMap::new(),
            waiting_len: 0,
            counters: HashMap::new(),
        };
        task.run(&self.queue, &mut requests, self.flush_every, stop).await;
        Ok(())
    }
}

/// The deletion of superseded page reads older than the window, every hour (first at once).
struct Purge {
    store: Arc<dyn Store>,
    window: Duration,
}

#[async_trait]
impl Worker for Purge {
    fn name(&self) -> &'static str {
        "crawler-purge"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        let mut purge = tokio::time::interval(PURGE_EVERY);
        purge.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                _ = purge.tick() => {}
            }
            let before = now_us() - i64::try_from(self.window.as_micros()).unwrap_or(i64::MAX);
            let purged = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                purged = tokio::time::timeout(FLUSH_TIMEOUT, self.store.purge_crawls(before)) => purged,
            };
            match purged {
                Ok(Ok(n)) if n > 0 => tracing::debug!(deleted = n, "superseded crawler reads purged"),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "cannot purge crawler reads now"),
                Err(_) => tracing::debug!("purging crawler reads timed out"),
            }
        }
    }
}

/// What the recording holds between flushes (a run's: a failed run's unflushed telemetry is lost).
struct Task {
    store: Arc<dyn Store>,
    verifier: Arc<Verifier>,
    agg: Aggregate,
    lookups: JoinSet<(Crawler, IpAddr)>,
    waiting: HashMap<(IpAddr, Crawler), Vec<Fetch>>,
    waiting_len: usize,
    /// The fetch counter of each (crawler, trust, status), resolved once.
    counters: HashMap<(Crawler, Trust, u16), metrics::Counter>,
}

impl Task {
    /// Verify each fetch (a lookup when only reverse DNS can tell, off the request path), aggregate, write every
    /// `flush_every`, when asked, and once more when stopped or when the recorder is dropped.
    async fn run(
        mut self,
        queue: &Queue,
        requests: &mut mpsc::Receiver<oneshot::Sender<()>>,
        flush_every: Duration,
        stop: CancellationToken,
    ) {
        let mut taken = Vec::with_capacity(1024);
        let mut drain = tokio::time::interval(DRAIN_EVERY);
        drain.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut flush = tokio::time::interval(flush_every);
        flush.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let request = tokio::select! {
                request = requests.recv() => request,
                () = stop.cancelled() => None,
                _ = drain.tick() => {
                    self.take(queue, &mut taken).await;
                    continue;
                }
                () = queue.half_full.notified() => {
                    self.take(queue, &mut taken).await;
                    continue;
                }
                Some(done) = self.lookups.join_next(), if !self.lookups.is_empty() => {
                    self.settle(done).await;
                    continue;
                }
                _ = flush.tick() => {
                    write(&*self.store, &mut self.agg).await;
                    continue;
                }
            };
            // A flush asked for, or the last one.
            self.take(queue, &mut taken).await;
            while let Some(done) = self.lookups.join_next().await {
                self.settle(done).await;
            }
            write(&*self.store, &mut self.agg).await;
            match request {
                Some(ack) => {
                    let _ = ack.send(());
                }
                None => return,
            }
        }
    }

    /// Takes every queued fetch (swapping buffers, so the lock is held for a moment) and verifies each.
    async fn take(&mut self, queue: &Queue, taken: &mut Vec<Fetch>) {
        std::mem::swap(&mut *queue.fetches.lock().unwrap_or_else(|p| p.into_inner()), taken);
        for fetch in taken.drain(..) {
            self.verify(fetch).await;
        }
    }

    async fn verify(&mut self, fetch: Fetch) {
        match self.verifier.check(fetch.crawler, fetch.addr).await {
            Verdict::Known(trust) => self.add(&fetch, trust),
            Verdict::Lookup(addr) => {
                let key = (addr, fetch.crawler);
                if self.waiting_len >= WAITING || (!self.waiting.contains_key(&key) && self.lookups.len() >= LOOKUPS) {
                    crate::telemetry::crawler_rdns("busy");
                    self.add(&fetch, Trust::Claimed);
                    return;
                }
                self.waiting_len += 1;
                let list = self.waiting.entry(key).or_default();
                if list.is_empty() {
                    let verifier = Arc::clone(&self.verifier);
                    let crawler = fetch.crawler;
                    self.lookups.spawn(async move {
                        verifier.lookup(crawler, addr).await;
                        (crawler, addr)
                    });
                }
                list.push(fetch);
            }
        }
    }

    fn add(&mut self, fetch: &Fetch, trust: Trust) {
        let status = if fetch.status == 304 { 304 } else { 200 };
        self.counters
            .entry((fetch.crawler, trust, status))
            .or_insert_with(|| crate::telemetry::crawler_fetch_counter(fetch.crawler.name(), trust.name(), status))
            .increment(1);
        self.agg.add(fetch, trust);
    }

    /// A lookup ended: its verdict (now cached) for the fetches that waited for it.
    async fn settle(&mut self, done: Result<(Crawler, IpAddr), tokio::task::JoinError>) {
        let Ok((crawler, addr)) = done else { return };
        let trust = match self.verifier.check(crawler, Some(addr)).await {
            Verdict::Known(trust) => trust,
            // Evicted at once (a full cache): not verified.
            Verdict::Lookup(_) => Trust::Claimed,
        };
        for fetch in self.waiting.remove(&(addr, crawler)).unwrap_or_default() {
            self.waiting_len -= 1;
            self.add(&fetch, trust);
        }
    }
}

/// Writes what is held, and observes the lag of each page version no process had recorded for its crawler. A
/// failure gives up this interval's telemetry (counted): it never holds more than one interval.
async fn write(store: &dyn Store, agg: &mut Aggregate) {
    crate::telemetry::crawler_dropped("table_full", std::mem::take(&mut agg.dropped));
    if agg.is_empty() {
        return;
    }
    let (fetches, reads) = agg.take();
    let lost = fetches.iter().map(|f| f.fetches as u64).sum();
    match tokio::time::timeout(FLUSH_TIMEOUT, store.record_crawls(&fetches, &reads)).await {
        Ok(Ok(new)) => {
            crate::telemetry::crawler_flush("written");
            for read in new {
                if let Some(crawler) = Crawler::from_name(&read.crawler) {
                    let lag = (read.first_us - read.version_us).max(0) as f64 / 1e6;
                    crate::telemetry::crawler_lag(crawler.name(), lag);
                }
            }
        }
        failed => {
            let error = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".to_owned(),
            };
            crate::telemetry::crawler_flush("failed");
            crate::telemetry::crawler_dropped("flush_failed", lost);
            tracing::warn!(error, fetches = lost, "cannot write crawler telemetry; this interval's is lost");
        }
    }
}

fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}
