//! URL health's checker: the background task that fetches the stored URLs of the sites that are checked and
//! records what it finds ([`crate::health`] judges, [`crate::store`] keeps). See docs/design/health.md.
//!
//! Per checked site, one task: walk the stored records into the queue ([`HealthQueue::health_seed`]), claim what
//! is due ([`HealthQueue::health_claim`], at most what can start within about ten slots of the host), check each
//! claim and settle it ([`HealthQueue::health_settle`]). A check: the host's semaphore (`health.concurrency` in
//! flight from this process), the host's robots.txt (cached), the host's next request slot shared by every replica
//! ([`HealthQueue::health_host_slot`], `health.rate` a second), then one `GET` of the URL that follows no redirect and
//! reads at most the head of an HTML body. Only the configured sites' hosts are ever fetched.
//!
//! The checker is below the shared state: it tells the state which pages an exclusion changed through [`Notify`],
//! which the state implements.
//!
//! [`HealthQueue::health_seed`]: crate::store::HealthQueue::health_seed
//! [`HealthQueue::health_claim`]: crate::store::HealthQueue::health_claim
//! [`HealthQueue::health_settle`]: crate::store::HealthQueue::health_settle
//! [`HealthQueue::health_host_slot`]: crate::store::HealthQueue::health_host_slot

mod fetch;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use url::Url;

use self::fetch::{Fetched, Kept, RobotsCache};
use crate::backoff::Backoff;
use crate::config::Config;
use crate::health::robots::Robots;
use crate::health::{Finding, Kind, Policy, Problems, Transient, backoff, brake, judge, user_agent};
use crate::placement::Changes;
use crate::store::{BrakeChange, CheckClaim, CheckResult, Store};
use crate::telemetry;
pub use crate::worker::Running;
use crate::worker::{self, Worker};

/// What the checker tells the shared state: an exclusion or a restore changed these pages (by site), so the page
/// table is read again and the pages rendered ahead of crawlers, as after a write.
pub trait Notify: Send + Sync + 'static {
    fn pages_changed(&self, changes: &BTreeMap<i64, Changes>);
}

/// A [`Notify`] that tells no one (a checker without a server: tests of the store's side alone).
pub struct Nobody;

impl Notify for Nobody {
    fn pages_changed(&self, _: &BTreeMap<i64, Changes>) {}
}

/// How the checker checks.
#[derive(Clone, Debug)]
pub struct CheckerOptions {
    /// Every URL is checked again within this (a healthy one between 90 % and all of it).
    pub cycle: Duration,
    /// Requests in flight to one host from this process.
    pub concurrency: usize,
    /// The least time between two requests to one host, from every replica: 1 s / `health_rate`.
    pub gap: Duration,
    /// The longest one request may take: connecting, the head and the body's prefix.
    pub timeout: Duration,
    /// The most bytes of a body read.
    pub head_bytes: usize,
    /// How often a site with nothing due looks again.
    pub poll: Duration,
    /// The most URLs one claim takes: what the host's rate lets start within about ten seconds (at least 1).
    pub claim: u32,
    pub user_agent: String,
}

impl CheckerOptions {
    pub fn from_config(config: &Config) -> Self {
        let rate = config.health.rate.max(1);
        Self {
            cycle: config.health.cycle,
            concurrency: config.health.concurrency.max(1) as usize,
            gap: Duration::from_secs(1) / rate,
            timeout: config.health.timeout,
            head_bytes: usize::try_from(config.health.head_bytes).unwrap_or(usize::MAX),
            poll: config.tuning.health_poll,
            claim: rate.saturating_mul(10).max(1),
            user_agent: user_agent(env!("CARGO_PKG_VERSION")),
        }
    }

    /// The longest a claimed URL may wait for its host before its check starts: the claims ahead of it in this
    /// process, each taking a slot and at most a timeout, `concurrency` at a time.
    fn longest_queue(&self) -> Duration {
        let ahead = self.claim.div_ceil(self.concurrency as u32);
        (self.timeout + self.gap) * ahead
    }

    /// How soon the walk of a site's records runs again once it reached the end: sixty polls (a minute by
    /// default), at most an eighth of the cycle. Each time it reads from its cursor on, one index probe when
    /// nothing is new; it takes up records stored without being queued (by a version before URL health, or
    /// while the site was not checked), and keeps the summary's check of unqueued records short.
    pub fn rewalk(&self) -> Duration {
        (self.poll * 60).min(self.cycle / 8)
    }

    /// How long a claim holds its URLs from other replicas: its checks' queue, three timeouts (robots.txt, the
    /// page, a redirect of robots.txt) and the settle. A checker that dies with a claim delays its URLs this long.
    pub fn lease(&self) -> Duration {
        self.timeout * 3 + self.longest_queue() + Duration::from_secs(10)
    }

    /// The longest wait for a host's slot a check takes; beyond it (a long `Retry-After`, another replica's
    /// backlog) the URL is put back, due when the slot is, so that no claim outlives its lease.
    fn slot_budget(&self) -> Duration {
        self.longest_queue()
    }
}

/// A site that is checked.
#[derive(Clone, Debug)]
struct Target {
    id: i64,
    name: String,
    policy: Policy,
}

/// Checks the URLs of the checked sites. [`Checker::spawn`] runs it as a task; [`Checker::drain`] checks
/// whatever is due now (tests).
pub struct Checker {
    store: Arc<dyn Store>,
    targets: Vec<Target>,
    /// The configured sites that are not checked (their exclusions are undone at start).
    unchecked: Vec<(i64, String)>,
    /// The configured sites' hosts (`scheme://host:port`): the only ones fetched.
    hosts: HashSet<String>,
    options: CheckerOptions,
    client: reqwest::Client,
    notify: Arc<dyn Notify>,
    /// Per host: the requests in flight from this process. Bounded by the configured hosts.
    in_flight: Mutex<HashMap<String, Arc<Semaphore>>>,
    robots: RobotsCache,
}

/// The checker of the sites `health_check` names, a worker not yet started; `None` when it names none. Either way,
/// the configured sites that are not checked with `exclude` get their exclusions undone (a site that has none costs
/// one read), so that turning `exclude` off puts every URL back: here when none is checked, else as it starts.
pub async fn from_config(
    store: Arc<dyn Store>,
    config: &Config,
    notify: Arc<dyn Notify>,
) -> anyhow::Result<Option<Arc<Checker>>> {
    let checker = Checker::new(store, config, notify)?;
    if checker.targets.is_empty() {
        checker.restore().await;
        return Ok(None);
    }
    for t in &checker.targets {
        tracing::info!(site = %t.name, policy = t.policy.name(), "URL health: the site's URLs are checked");
    }
    Ok(Some(Arc::new(checker)))
}

impl Checker {
    pub fn new(store: Arc<dyn Store>, config: &Config, notify: Arc<dyn Notify>) -> anyhow::Result<Self> {
        Self::with_options(store, config, CheckerOptions::from_config(config), notify)
    }

    pub fn with_options(
        store: Arc<dyn Store>,
        config: &Config,
        options: CheckerOptions,
        notify: Arc<dyn Notify>,
    ) -> anyhow::Result<Self> {
        let sites = store.sites();
        let mut targets = Vec::new();
        let mut unchecked = Vec::new();
        let mut hosts = HashSet::new();
        for site in sites.iter() {
            if let Ok(url) = Url::parse(site.public_url.as_str()) {
                hosts.insert(origin(&url));
            }
            match config.health.check.policy(&site.name) {
                Some(policy) => targets.push(Target { id: site.id, name: site.name.clone(), policy }),
                None => unchecked.push((site.id, site.name.clone())),
            }
        }
        let client = fetch::client(&options)?;
        Ok(Self {
            store,
            targets,
            unchecked,
            hosts,
            options,
            client,
            notify,
            in_flight: Mutex::new(HashMap::new()),
            robots: RobotsCache::default(),
        })
    }

    pub fn options(&self) -> &CheckerOptions {
        &self.options
    }

    /// Runs the checker on its own until [`Running::stop`], which abandons the checks still in flight at its end
    /// (their URLs stay claimed until the lease ends, then are checked again).
    pub fn spawn(self) -> Running {
        worker::spawn(Arc::new(self))
    }

    /// Undoes the exclusions of every site whose policy is not `exclude`: a checked site with `report`, and a
    /// configured site no longer checked when it has exclusions (one read of its summary). A failure is logged;
    /// the next start tries again.
    pub async fn restore(&self) {
        let reporting = self.targets.iter().filter(|t| t.policy != Policy::Exclude).map(|t| (t.id, t.name.clone()));
        for (site, name) in reporting {
            self.restore_site(site, &name).await;
        }
        for (site, name) in &self.unchecked {
            match self.store.health_summary(*site).await {
                Ok(summary) if summary.excluded > 0 => self.restore_site(*site, name).await,
                Ok(_) => {}
                Err(e) => tracing::warn!(site = %name, error = %e, "URL health: cannot read the site's exclusions"),
            }
        }
    }

    async fn restore_site(&self, site: i64, name: &str) {
        match self.store.health_restore(site).await {
            Ok(written) => {
                if written.counts > 0 {
                    tracing::info!(site = %name, urls = written.counts, "URL health: excluded URLs put back");
                    telemetry::health_exclusion(name, "restored", written.counts);
                }
                if !written.changes.is_empty() {
                    self.notify.pages_changed(&written.changes);
                }
            }
            Err(e) => tracing::warn!(site = %name, error = %e, "URL health: cannot put excluded URLs back"),
        }
    }

    /// Seeds and checks every due URL of every checked site until none is due; the number of checks run. It
    /// sleeps only for the hosts' slots (and a held host's `Retry-After`).
    pub async fn drain(&self) -> crate::store::Result<usize> {
        let mut checks = 0;
        for target in &self.targets {
            while self.store.health_seed(target.id, SEED_STEP).await? > 0 {}
            loop {
                let claims = self.store.health_claim(target.id, self.options.claim, self.options.lease()).await?;
                if claims.is_empty() {
                    break;
                }
                checks += self.check_all(target, claims).await;
            }
        }
        Ok(checks)
    }

    /// One site's loop: seed a step while the walk is not at its end (again after [`CheckerOptions::rewalk`]), claim, check; when
    /// nothing is due, wait `poll`. A store failure is logged and waited out (the poll, doubling to a minute).
    async fn run_site(self: Arc<Self>, target: Target, stop: CancellationToken) {
        let mut seed_at = Some(Instant::now());
        let mut failures = 0u32;
        loop {
            if stop.is_cancelled() {
                return;
            }
            let mut idle = true;
            if seed_at.is_some_and(|at| at <= Instant::now()) {
                match self.store.health_seed(target.id, SEED_STEP).await {
                    Ok(0) => seed_at = Some(Instant::now() + self.options.rewalk()),
                    Ok(_) => idle = false,
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(site = %target.name, error = %e, "URL health: cannot queue stored URLs");
                    }
                }
            }
            match self.store.health_claim(target.id, self.options.claim, self.options.lease()).await {
                Ok(claims) if claims.is_empty() => {}
                Ok(claims) => {
                    failures = 0;
                    idle = false;
                    tokio::select! {
                        () = stop.cancelled() => return,
                        _ = self.check_all(&target, claims) => {}
                    }
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(site = %target.name, error = %e, "URL health: cannot claim due URLs");
                }
            }
            if idle || failures > 0 {
                let wait = if failures > 0 {
                    Backoff::new(self.options.poll * 2, (self.options.poll * 1024).min(Duration::from_secs(60)))
                        .after(failures)
                } else {
                    self.options.poll
                };
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }

    /// Checks and settles `claims`, each waiting for its host's semaphore; the number settled or checked.
    async fn check_all(&self, target: &Target, claims: Vec<CheckClaim>) -> usize {
        let mut running: FuturesUnordered<_> = claims.into_iter().map(|c| self.check_one(target, c)).collect();
        let mut n = 0;
        while running.next().await.is_some() {
            n += 1;
        }
        n
    }

    /// One claimed URL: checked (or put back when its host is held too long), then settled.
    async fn check_one(&self, target: &Target, claim: CheckClaim) {
        let started = Instant::now();
        let (finding, outcome, hold, disallows_all) = match self.fetch(target, &claim).await {
            Ok(Checked { finding, not_modified, hold, disallows_all }) => {
                let outcome = if not_modified {
                    "not_modified"
                } else if !finding.is_definite() {
                    "transient"
                } else if finding.problems.is_empty() {
                    "healthy"
                } else {
                    "problem"
                };
                (finding, outcome, hold, disallows_all)
            }
            Err(Deferred::Store(e)) => {
                // Its claim ends with the lease: checked again then.
                tracing::warn!(site = %target.name, loc = %claim.loc, error = %e, "URL health: the store failed");
                return;
            }
            Err(Deferred::HostHeld(wait)) => {
                let result = CheckResult {
                    claim: claim.claim,
                    loc: claim.loc.clone(),
                    finding: Finding::transient(Transient::RateLimited, Some(wait)),
                    next_in: wait,
                    disallows_all: false,
                };
                self.settle(target, &result, "transient").await;
                return;
            }
        };
        if let (Some(hold), Some(host)) = (hold, Url::parse(&claim.loc).ok().map(|u| origin(&u))) {
            // The host asked for a pause: a slot reserved that far ahead holds every replica's next request.
            if let Err(e) = self.store.health_host_slot(&host, self.options.gap, hold).await {
                tracing::warn!(site = %target.name, error = %e, "URL health: cannot hold the host");
            }
        }
        let next_in = if finding.is_definite() && !finding.problems.is_empty() && target.policy == Policy::Exclude {
            // Fast recovery: a URL with a problem (excluded, or kept in by the brake) is checked again in minutes,
            // backing off to hours as it stays bad; never a whole cycle.
            let since = claim.previous.as_ref().filter(|p| !p.problems.is_empty()).and_then(|p| p.problem_since_us);
            let age =
                since.map_or(Duration::ZERO, |at| Duration::from_micros(now_us().saturating_sub(at).max(0) as u64));
            jitter(brake::recheck(age))
        } else if finding.is_definite() {
            jitter(self.options.cycle)
        } else {
            jitter(backoff(claim.attempts.saturating_add(1))).max(finding.retry_after.unwrap_or_default())
        };
        tracing::debug!(
            site = %target.name,
            loc = %claim.loc,
            outcome,
            status = finding.status,
            problems = ?finding.problems.iter().map(|k| k.name()).collect::<Vec<_>>(),
            transient = finding.transient.as_ref().map(|t| t.name()),
            took_ms = started.elapsed().as_millis() as u64,
            "URL health: checked"
        );
        let result =
            CheckResult { claim: claim.claim, loc: claim.loc, finding: clipped(finding), next_in, disallows_all };
        self.settle(target, &result, outcome).await;
    }

    async fn settle(&self, target: &Target, result: &CheckResult, outcome: &'static str) {
        let exclude = target.policy == Policy::Exclude;
        match self.store.health_settle(target.id, result, exclude).await {
            Ok(written) => {
                let outcome = if written.counts.recorded { outcome } else { "deleted" };
                telemetry::health_check(&target.name, outcome);
                match written.counts.flipped {
                    Some(true) => {
                        tracing::info!(
                            site = %target.name,
                            loc = %result.loc,
                            problems = ?result.finding.problems.iter().map(|k| k.name()).collect::<Vec<_>>(),
                            "URL health: left out of its sitemap page"
                        );
                        telemetry::health_exclusion(&target.name, "excluded", 1);
                    }
                    Some(false) => {
                        tracing::info!(site = %target.name, loc = %result.loc, "URL health: put back in its page");
                        telemetry::health_exclusion(&target.name, "restored", 1);
                    }
                    None => {}
                }
                if let Some(change) = &written.counts.brake {
                    brake_logged(&target.name, change);
                }
                if !written.changes.is_empty() {
                    self.notify.pages_changed(&written.changes);
                }
            }
            Err(e) => tracing::warn!(
                site = %target.name,
                loc = %result.loc,
                error = %e,
                "URL health: cannot record a check; the URL is checked again when its claim ends"
            ),
        }
    }

    /// The host's semaphore (one per configured host).
    fn semaphore(&self, host: &str) -> Arc<Semaphore> {
        let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(host.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.options.concurrency))).clone()
    }

    /// Waits for the host's next shared slot; `HostHeld` when it is further than a claim may wait.
    async fn slot(&self, host: &str) -> Result<(), Deferred> {
        let wait = self
            .store
            .health_host_slot(host, self.options.gap, Duration::ZERO)
            .await
            .map_err(|e| Deferred::Store(Arc::new(e)))?;
        if wait > self.options.slot_budget() {
            return Err(Deferred::HostHeld(wait));
        }
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// What one check found: robots.txt first (no page request for a disallowed URL), then the page.
    async fn fetch(&self, target: &Target, claim: &CheckClaim) -> Result<Checked, Deferred> {
        let Ok(url) = Url::parse(&claim.loc) else {
            let finding = Finding::transient(Transient::Connect("not a URL".into()), None);
            return Ok(Checked { finding, not_modified: false, hold: None, disallows_all: false });
        };
        let host = origin(&url);
        if !self.hosts.contains(&host) {
            // Never fetched: no configured site has this host (a loc cannot be stored so; checked anyway).
            let why = format!("{host} is no configured site's host: not fetched");
            let finding = Finding::transient(Transient::Connect(why), None);
            return Ok(Checked { finding, not_modified: false, hold: None, disallows_all: false });
        }
        let semaphore = self.semaphore(&host);
        let _permit = semaphore.acquire_owned().await.expect("never closed");
        let robots = self.robots_for(target, &host).await?;
        let allowed = robots.allows(&url);
        if allowed == Some(false) {
            // The root disallowed too: robots.txt shuts the whole site out, which trips the brake at once.
            let root = Url::parse(&format!("{host}/")).ok();
            let disallows_all = root.is_some_and(|root| robots.allows(&root) == Some(false));
            return Ok(Checked { finding: Finding::disallowed(), not_modified: false, hold: None, disallows_all });
        }
        self.slot(&host).await?;
        telemetry::health_request(&target.name, "page");
        let fetched = fetch::page(&self.client, &self.options, &url, claim).await;
        Ok(match fetched {
            Fetched::Answer { status, headers, head } => {
                let finding = judge(&url, status, &headers, &head, allowed);
                let hold = matches!(status, 429 | 503).then_some(finding.retry_after).flatten();
                Checked { finding, not_modified: false, hold, disallows_all: false }
            }
            Fetched::NotModified { etag, last_modified } => Checked {
                finding: previous_stands(claim, allowed, etag, last_modified),
                not_modified: true,
                hold: None,
                disallows_all: false,
            },
            Fetched::Failed(transient) => Checked {
                finding: Finding::transient(transient, None),
                not_modified: false,
                hold: None,
                disallows_all: false,
            },
        })
    }

    /// The host's robots.txt, from the cache or fetched (through the host's slots; the caller holds its
    /// semaphore). A robots.txt that cannot be had (no answer, a redirect off the configured hosts, too many
    /// redirects) is unknown: it makes no problem, and is asked for again after a few minutes.
    async fn robots_for(&self, target: &Target, host: &str) -> Result<Arc<Robots>, Deferred> {
        self.robots.get_or_fetch(host, self.fetch_robots(target, host)).await.map_err(|e| (*e).clone())
    }

    /// Fetches the host's robots.txt, following redirects within the configured hosts.
    async fn fetch_robots(&self, target: &Target, host: &str) -> Result<Kept, Deferred> {
        let mut at = Url::parse(&format!("{host}/robots.txt")).expect("an origin and a path");
        for _hop in 0..=fetch::ROBOTS_HOPS {
            self.slot(&origin(&at)).await?;
            telemetry::health_request(&target.name, "robots");
            match fetch::robots(&self.client, &self.options, &at).await {
                fetch::RobotsAnswer::Found { status, body } => {
                    return Ok(Kept::new(Robots::from_answer(status, &body), status >= 500));
                }
                fetch::RobotsAnswer::Redirect(to) if self.hosts.contains(&origin(&to)) => at = to,
                fetch::RobotsAnswer::Redirect(to) => {
                    tracing::debug!(site = %target.name, %to, "URL health: robots.txt redirects off the sites");
                    break;
                }
                fetch::RobotsAnswer::Failed(why) => {
                    tracing::debug!(site = %target.name, why = why.name(), "URL health: robots.txt unavailable");
                    break;
                }
            }
        }
        Ok(Kept::new(Robots::unreachable(), true))
    }
}

/// One loop per checked site, after the exclusions of the sites no longer excluding are undone.
#[async_trait]
impl Worker for Arc<Checker> {
    fn name(&self) -> &'static str {
        "health-checker"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        self.restore().await;
        let mut sites = JoinSet::new();
        for target in self.targets.clone() {
            sites.spawn(Arc::clone(self).run_site(target, stop.clone()));
        }
        while let Some(ended) = sites.join_next().await {
            if let Err(e) = ended {
                anyhow::bail!("a site's loop failed: {e}");
            }
        }
        Ok(())
    }
}

/// Records walked per seeding statement.
const SEED_STEP: u32 = 1_000;

struct Checked {
    finding: Finding,
    not_modified: bool,
    /// A 429 or 503's `Retry-After`: the host is held that long.
    hold: Option<Duration>,
    /// robots.txt disallows the site's root as well as the URL.
    disallows_all: bool,
}

/// Why a claim was not checked.
#[derive(Clone)]
enum Deferred {
    /// The store failed: the claim ends with its lease. Shared: every check waiting for the same robots.txt
    /// fetch gets it.
    Store(Arc<crate::store::StoreError>),
    /// The host's next slot is this far away: the URL is put back, due then.
    HostHeld(Duration),
}

/// A 304: the last definite finding stands, with robots.txt's verdict as now found and the validators the 304
/// sent (or the last ones).
fn previous_stands(
    claim: &CheckClaim,
    allowed: Option<bool>,
    etag: Option<String>,
    last_modified: Option<String>,
) -> Finding {
    let mut finding = match &claim.previous {
        Some(p) => Finding {
            status: p.status,
            problems: p.problems,
            location: p.location.clone(),
            canonical: p.canonical.clone(),
            noindex_by: p.noindex_by.clone(),
            ..Finding::default()
        },
        None => Finding { status: Some(304), ..Finding::default() },
    };
    let without: Problems = finding.problems.iter().filter(|k| *k != Kind::Disallowed).collect();
    finding.problems = without;
    if allowed == Some(false) {
        finding.problems.insert(Kind::Disallowed);
    }
    finding.etag = etag.or_else(|| claim.etag.clone());
    finding.last_modified = last_modified.or_else(|| claim.last_modified.clone());
    finding
}

/// `scheme://host:port`, the key of a host's semaphore, slot and robots.txt.
fn origin(url: &Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    )
}

/// The most of a site's text a finding keeps (a redirect's target, a canonical URL, a validator): 2,048 bytes,
/// the longest URL the search engines take. A hostile or broken page (a canonical of 200 KB in its head) costs
/// no more than that in the database and in every listing that shows it.
const MAX_TEXT: usize = 2048;

fn clipped(mut finding: Finding) -> Finding {
    let clip = |text: &mut Option<String>| {
        if let Some(t) = text.as_mut().filter(|t| t.len() > MAX_TEXT) {
            let mut end = MAX_TEXT;
            while !t.is_char_boundary(end) {
                end -= 1;
            }
            t.truncate(end);
        }
    };
    clip(&mut finding.location);
    clip(&mut finding.canonical);
    clip(&mut finding.etag);
    clip(&mut finding.last_modified);
    finding
}

/// Between 90 % and all of `d`, so that URLs checked together spread out over the next round, and a healthy URL's
/// next check lies within the cycle, as documented (jitter added to it once put it 10 % past).
fn jitter(d: Duration) -> Duration {
    crate::backoff::jitter(d, 0.9)
}

/// Now, microseconds since the Unix epoch (the age of a URL's problem).
fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The one log line a change of a site's brake makes: a pause with its evidence (WARN), a resume (INFO).
fn brake_logged(site: &str, change: &BrakeChange) {
    match change {
        BrakeChange::Tripped { evidence, restored } => tracing::warn!(
            site = %site,
            kind = evidence.shape.kind.name(),
            target = evidence.shape.target.as_deref().unwrap_or(""),
            share = %format!("{}/{}", evidence.bad, evidence.window),
            restored,
            examples = %evidence.examples.join(" "),
            "URL health: the site is paused: {} of its latest {} checked URLs turned bad as one ({}); none is excluded \
             until the share falls or an operator resumes or confirms (POST /api/v1/health/resume|confirm?site=)",
            evidence.bad,
            evidence.window,
            evidence.shape.describe(),
        ),
        BrakeChange::Resumed { shape } => {
            tracing::info!(site = %site, shape = %shape.describe(), "URL health: the burst's share fell: exclusions resume");
        }
        BrakeChange::Ended { shape } => {
            tracing::info!(site = %site, shape = %shape.describe(), "URL health: the confirmed burst is over");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Config {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Config::load_from(None, |k| vars.get(k).cloned()).unwrap()
    }

    #[test]
    fn options_follow_the_settings() {
        let o = CheckerOptions::from_config(&config(&[("SITEMAPD_HEALTH_RATE", "5")]));
        assert_eq!(o.gap, Duration::from_millis(200));
        assert_eq!(o.claim, 50);
        assert_eq!(o.cycle, Duration::from_secs(7 * 86_400));
        assert!(o.user_agent.contains("sitemapd") && o.user_agent.contains(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn the_lease_outlasts_the_queue_and_three_timeouts() {
        let o = CheckerOptions::from_config(&config(&[]));
        // rate 2, concurrency 1, timeout 10 s: 20 claims, each at most a slot and a timeout behind the last.
        assert_eq!(o.claim, 20);
        assert!(o.lease() >= o.timeout * 3 + (o.timeout + o.gap) * 20, "{:?}", o.lease());
        let wide = CheckerOptions::from_config(&config(&[("SITEMAPD_HEALTH_CONCURRENCY", "4")]));
        assert!(wide.lease() < o.lease());
        assert!(o.slot_budget() < o.lease());
    }

    #[test]
    fn an_origin_names_the_port() {
        assert_eq!(origin(&Url::parse("https://example.com/a").unwrap()), "https://example.com:443");
        assert_eq!(origin(&Url::parse("http://127.0.0.1:8080/a").unwrap()), "http://127.0.0.1:8080");
    }

    #[test]
    fn a_finding_keeps_at_most_2048_bytes_of_each_text() {
        let long = format!("https://example.com/{}", "é".repeat(3000));
        let f =
            clipped(Finding { canonical: Some(long.clone()), location: Some("/short".into()), ..Finding::default() });
        let canonical = f.canonical.unwrap();
        assert!(canonical.len() <= MAX_TEXT && canonical.len() > MAX_TEXT - 2, "{}", canonical.len());
        assert!(long.starts_with(&canonical));
        assert_eq!(f.location.as_deref(), Some("/short"));
        let etag = clipped(Finding { etag: Some("x".repeat(5000)), ..Finding::default() }).etag.unwrap();
        assert_eq!(etag.len(), MAX_TEXT);
    }

    /// The next check of a healthy URL lies within the cycle (`health_cycle_days`), never past it: 7.12 days was
    /// seen with the jitter added to the cycle.
    #[test]
    fn jitter_stays_within_the_cycle() {
        let o = CheckerOptions::from_config(&config(&[]));
        let (mut least, mut most) = (o.cycle, Duration::ZERO);
        for _ in 0..10_000 {
            let j = jitter(o.cycle);
            least = least.min(j);
            most = most.max(j);
        }
        assert!(most <= o.cycle, "{most:?} past the cycle {:?}", o.cycle);
        assert!(least >= o.cycle.mul_f64(0.9), "{least:?}");
        assert!(most - least > o.cycle / 20, "spread: {least:?} to {most:?}");
    }

    #[test]
    fn a_304_keeps_the_previous_problems_but_robots_as_now() {
        use crate::store::UrlCheck;
        let previous = UrlCheck {
            status: Some(200),
            problems: [Kind::Noindex, Kind::Disallowed].into_iter().collect(),
            noindex_by: Some("meta robots".into()),
            ..UrlCheck::default()
        };
        let claim = CheckClaim {
            claim: 1,
            site: 1,
            loc: "https://example.com/a".into(),
            attempts: 0,
            etag: Some("\"v1\"".into()),
            last_modified: None,
            previous: Some(previous),
        };
        let f = previous_stands(&claim, Some(true), None, None);
        assert_eq!(f.problems, [Kind::Noindex].into_iter().collect());
        assert_eq!(f.status, Some(200));
        assert_eq!(f.etag.as_deref(), Some("\"v1\""));
        assert!(f.is_definite());
        let f = previous_stands(&claim, Some(false), Some("\"v2\"".into()), None);
        assert!(f.problems.contains(Kind::Disallowed));
        assert_eq!(f.etag.as_deref(), Some("\"v2\""));
    }
}
