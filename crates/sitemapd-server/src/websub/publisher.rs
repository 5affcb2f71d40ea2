//! The publisher: a background worker that tells each site's hubs of its feeds' changes, and its HTTP client.
//!
//! It never touches a write: it reads a site's change counter, and only when that moved (or a notification it
//! knows to be owed falls due) takes the feeds' digests and the delivery rows, and claims, posts and settles the
//! owed notifications that are due, at most [`PARALLEL`] at once. A dead hub costs one request per row per retry
//! delay, never a loop; what is owed stays in the database (derived from the feed), never in this process's memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{FeedDigests, FeedState, Outcome, classify, hub_label, publish_body, retry_delay};
use crate::backoff::{Backoff, unit_random};
use crate::config::{Config, shown_hub_url};
use crate::domain::Sites;
use crate::http_client::error_chain;
use crate::store::{HubClaim, HubRow, HubSettle, Store};
use crate::telemetry;
use crate::worker::Worker;

/// The most notifications in flight at once (each to one hub of one feed).
pub const PARALLEL: usize = 4;

/// How the publisher works.
#[derive(Clone, Debug)]
pub struct PublisherOptions {
    /// The least time between two notifications of one feed to one hub (`feeds.hub_interval`); also the first
    /// retry delay.
    pub interval: Duration,
    /// How often it reads each site's change counter.
    pub poll: Duration,
    /// The longest one request may take, connecting included.
    pub timeout: Duration,
    /// How long after it sees a change the publisher waits before it looks (`cache.state_ttl` and a quarter of a
    /// second): a hub fetches the feed as soon as it is told, perhaps from another replica, which serves it from a
    /// page table up to `cache.state_ttl` old. Told sooner, the hub could read the old feed there and the
    /// notification be spent on it.
    pub settle: Duration,
}

impl PublisherOptions {
    pub fn from_config(config: &Config) -> Self {
        Self {
            interval: config.feeds.hub_interval,
            poll: config.tuning.websub_poll,
            timeout: config.tuning.websub_timeout,
            settle: config.cache.state_ttl + Duration::from_millis(250),
        }
    }

    /// How long a claim holds its row from other publishers: longer than its request and its settling can take. A
    /// publisher that dies with a claim delays that notification by this much, then another (or the restarted
    /// one) sends it.
    pub fn lease(&self) -> Duration {
        self.timeout * 2 + Duration::from_secs(10)
    }
}

/// A site whose feeds are published: its hubs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub site_id: i64,
    /// The site's name, as logs and metrics name it.
    pub site: String,
    pub hubs: Vec<url::Url>,
}

/// The sites whose feeds are published: feeds on, and a hub configured for the site.
pub fn targets(config: &Config, sites: &Sites) -> Vec<Target> {
    if !config.feeds.enabled {
        return Vec::new();
    }
    sites
        .iter()
        .filter_map(|site| {
            let hubs = config.feeds.hubs.for_site(&site.name);
            (!hubs.is_empty()).then(|| Target { site_id: site.id, site: site.name.clone(), hubs: hubs.to_vec() })
        })
        .collect()
}

/// The publisher for the sites that publish (see [`targets`]), a worker; `None` when none does.
pub fn from_config(
    store: Arc<dyn Store>,
    config: &Config,
    feeds: Arc<dyn FeedDigests>,
) -> anyhow::Result<Option<Publisher>> {
    let targets = targets(config, &store.sites());
    if targets.is_empty() {
        return Ok(None);
    }
    let options = PublisherOptions::from_config(config);
    for t in &targets {
        let hubs: Vec<String> = t.hubs.iter().map(shown_hub_url).collect();
        tracing::info!(site = %t.site, hubs = ?hubs, interval = ?options.interval, "WebSub: feed changes are published");
    }
    Ok(Some(Publisher::new(store, feeds, targets, options)?))
}

pub struct Publisher {
    store: Arc<dyn Store>,
    feeds: Arc<dyn FeedDigests>,
    targets: Vec<Target>,
    options: PublisherOptions,
    client: reqwest::Client,
}

/// Where a site stands for the loop.
#[derive(Clone, Copy, Default)]
struct SiteState {
    /// The change counter its last complete look saw.
    seen: Option<i64>,
    /// When to look again even if the counter has not moved: a notification owed falls due (or a failed look is
    /// tried again).
    wake: Option<Instant>,
    /// Failed looks in a row.
    failures: u32,
    /// A change was seen and the look waits for `settle` (until `wake`).
    settling: bool,
}

impl Publisher {
    pub fn new(
        store: Arc<dyn Store>,
        feeds: Arc<dyn FeedDigests>,
        targets: Vec<Target>,
        options: PublisherOptions,
    ) -> anyhow::Result<Self> {
        let client = crate::http_client::notifier(options.timeout)?;
        Ok(Self { store, feeds, targets, options, client })
    }
}

#[async_trait]
impl Worker for Publisher {
    fn name(&self) -> &'static str {
        "websub"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        let mut states = vec![SiteState::default(); self.targets.len()];
        // A look that fails is tried again after the poll, doubling to a minute.
        let retry = Backoff::new(self.options.poll, Duration::from_secs(60).max(self.options.poll));
        loop {
            for (target, state) in self.targets.iter().zip(&mut states) {
                if stop.is_cancelled() {
                    return Ok(());
                }
                let changes = match self.feeds.changes(target.site_id).await {
                    Ok(changes) => changes,
                    Err(e) => {
                        // Its wake moved on too: one that had fallen due would otherwise end the sleep at once, a
                        // read a turn for as long as the database fails.
                        state.failures = state.failures.saturating_add(1);
                        let wait = retry.after(state.failures);
                        tracing::warn!(site = %target.site, error = %format!("{e:#}"), retry_in_ms = wait.as_millis() as u64, "WebSub: cannot read the change counter; trying again later");
                        state.wake = Some(Instant::now() + wait);
                        continue;
                    }
                };
                let moved = state.seen != Some(changes);
                // A change seen after the first look waits for the other replicas to serve it ([`PublisherOptions::
                // settle`]), once: a change seen while waiting is in the same look, so steady writes delay a
                // notification by `settle` at most.
                if moved && state.seen.is_some() && !state.settling && !self.options.settle.is_zero() {
                    state.settling = true;
                    state.wake = Some(Instant::now() + self.options.settle);
                    continue;
                }
                let due = state.wake.is_some_and(|wake| Instant::now() >= wake);
                // Look when a wake fell due, or at a change that does not wait (the first look, or no settling).
                let look = due || (moved && !state.settling);
                if !look {
                    continue;
                }
                match self.look(target).await {
                    Ok(next) => {
                        *state = SiteState {
                            seen: Some(changes),
                            wake: next.map(|d| Instant::now() + d),
                            failures: 0,
                            settling: false,
                        };
                    }
                    Err(e) => {
                        state.failures = state.failures.saturating_add(1);
                        let wait = retry.after(state.failures);
                        tracing::warn!(
                            site = %target.site,
                            error = %format!("{e:#}"),
                            retry_in_ms = wait.as_millis() as u64,
                            "WebSub: cannot read the feeds or their deliveries; trying again later"
                        );
                        *state = SiteState {
                            seen: Some(changes),
                            wake: Some(Instant::now() + wait),
                            settling: false,
                            ..*state
                        };
                    }
                }
            }
            let wake = states.iter().filter_map(|s| s.wake).fold(Instant::now() + self.options.poll, Instant::min);
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

impl Publisher {
    /// One look at `target`'s feeds: sends what is owed and due, and sets the gauge of what is owed. Returns when
    /// to look again though nothing changes (`None`: nothing owed that a write would not announce).
    async fn look(&self, target: &Target) -> anyhow::Result<Option<Duration>> {
        let feeds = self.feeds.feeds(target.site_id).await.context("the feeds")?;
        let rows = self.store.hub_rows(target.site_id).await.context("the delivery rows")?;
        let rows: HashMap<(&str, &str), &HubRow> =
            rows.iter().map(|r| ((r.feed.as_str(), r.hub.as_str()), r)).collect();
        // A row is keyed by the hub as logged (`shown_hub_url`): its password is not stored, and a new one is the
        // same hub.
        let (mut owed, mut next, mut sends) = (0usize, None::<Duration>, Vec::new());
        for feed in &feeds {
            for hub in &target.hubs {
                let key = shown_hub_url(hub);
                let row = rows.get(&(feed.path.as_str(), key.as_str()));
                if row.and_then(|r| r.delivered.as_deref()) == Some(feed.digest.as_str()) {
                    continue;
                }
                owed += 1;
                match row.map(|r| r.wait).filter(|wait| !wait.is_zero()) {
                    Some(wait) => next = Some(next.map_or(wait, |n| n.min(wait))),
                    None => sends.push((feed, hub)),
                }
            }
        }
        // Futures made in a loop, not by a closure in the stream (which the worker's `Send` bound cannot name).
        let mut deliveries = Vec::with_capacity(sends.len());
        for (feed, hub) in sends {
            deliveries.push(self.deliver(target, feed, hub));
        }
        let mut sent = futures_util::stream::iter(deliveries).buffer_unordered(PARALLEL);
        while let Some(wait) = sent.next().await {
            match wait {
                None => owed -= 1,
                Some(wait) => next = Some(next.map_or(wait, |n| n.min(wait))),
            }
        }
        telemetry::websub_owed(&target.site, owed);
        Ok(next)
    }

    /// Claims, posts and settles one owed notification; `None` when delivered, else how long until it may be
    /// tried again (another publisher's claim, a retry delay).
    async fn deliver(&self, target: &Target, feed: &FeedState, hub: &url::Url) -> Option<Duration> {
        let lease = self.options.lease();
        let key = shown_hub_url(hub);
        let claimed = self.store.hub_claim(target.site_id, &feed.path, &key, &feed.digest, lease).await;
        let claim = match claimed {
            Ok(Some(claim)) => claim,
            // Another publisher holds it (or has just delivered it): its lease bounds the wait.
            Ok(None) => return Some(lease),
            Err(e) => {
                tracing::warn!(site = %target.site, feed = %feed.path, error = %e, "WebSub: cannot claim a notification; trying again later");
                return Some(self.options.interval);
            }
        };
        let (outcome, answer) = self.post(hub, &feed.public_url).await;
        telemetry::websub_notification(&hub_label(hub), outcome.label());
        let settle = match outcome {
            Outcome::Delivered => {
                tracing::info!(site = %target.site, feed = %feed.public_url, hub = %shown_hub_url(hub), %answer, "WebSub: hub notified");
                HubSettle::Delivered { interval: self.options.interval }
            }
            _ => {
                let attempt = claim.attempts.saturating_add(1);
                let delay = retry_delay(outcome, attempt, self.options.interval, unit_random());
                tracing::warn!(
                    site = %target.site,
                    feed = %feed.public_url,
                    hub = %shown_hub_url(hub),
                    outcome = outcome.label(),
                    %answer,
                    attempt,
                    retry_in_ms = delay.as_millis() as u64,
                    "WebSub: the hub did not take the notification; sending again later"
                );
                HubSettle::Failed { delay }
            }
        };
        self.settle(target, &claim, settle).await
    }

    /// Settles `claim`; a failure leaves it claimed until the lease ends, when it is sent again.
    async fn settle(&self, target: &Target, claim: &HubClaim, settle: HubSettle) -> Option<Duration> {
        match self.store.hub_settle(claim, settle).await {
            Ok(_) => match settle {
                HubSettle::Delivered { .. } => None,
                HubSettle::Failed { delay } => Some(delay),
            },
            Err(e) => {
                tracing::warn!(
                    site = %target.site,
                    feed = %claim.feed,
                    error = %e,
                    "WebSub: cannot record the outcome of a notification; it is sent again once its claim expires"
                );
                Some(self.options.lease())
            }
        }
    }

    /// One request: the outcome, and what the hub answered as the log shows it (its status and, for a redirect,
    /// where it pointed; or the error, without the hub's URL, which the log names apart without its userinfo).
    async fn post(&self, hub: &url::Url, feed_url: &str) -> (Outcome, String) {
        let request = self
            .client
            .post(hub.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(publish_body(feed_url));
        match request.send().await {
            Ok(response) => {
                let status = response.status();
                let retry_after = response.headers().get(reqwest::header::RETRY_AFTER);
                let outcome = classify(status, retry_after, SystemTime::now());
                let location = status
                    .is_redirection()
                    .then(|| response.headers().get(reqwest::header::LOCATION).map(|v| v.to_str().unwrap_or("?")))
                    .flatten()
                    .map(|to| format!(" to {to}"))
                    .unwrap_or_default();
                (outcome, format!("{status}{location}"))
            }
            Err(e) => {
                let reason = if e.is_timeout() { "timeout" } else { "network" };
                (Outcome::Retry { reason, after: None }, error_chain(&e.without_url()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_outlasts_a_request() {
        let config = Config::load_from(None, |_| None).unwrap();
        let options = PublisherOptions::from_config(&config);
        assert!(options.lease() > options.timeout * 2);
        assert_eq!(options.interval, Duration::from_secs(60));
    }

    #[test]
    fn only_sites_with_feeds_on_and_a_hub_publish() {
        let vars = |feeds: &'static str| {
            move |k: &str| match k {
                "SITEMAPD_SITES" => Some("default=https://a.example/, shop=https://shop.example/".to_owned()),
                "SITEMAPD_FEEDS" => Some(feeds.to_owned()),
                "SITEMAPD_FEED_HUBS" => Some("shop=https://hub.example/".to_owned()),
                _ => None,
            }
        };
        let config = Config::load_from(None, vars("true")).unwrap();
        let sites = Sites::new(
            config.site_specs().into_iter().zip(1..).map(|(spec, id)| crate::domain::Site::new(id, spec)).collect(),
        );
        let t = targets(&config, &sites);
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].site_id, t[0].site.as_str(), t[0].hubs[0].as_str()), (2, "shop", "https://hub.example/"));
        let off = Config::load_from(None, vars("false")).unwrap();
        assert!(targets(&off, &sites).is_empty());
    }
}
