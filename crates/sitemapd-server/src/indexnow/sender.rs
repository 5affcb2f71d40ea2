//! The sender: a background task that sends each notifying site's outbox to the endpoint, and its HTTP client.
//!
//! It never touches a write: it reads and settles the outbox in statements of its own (a claim skips rows a write
//! holds), and holds one batch at a time (at most 10,000 locs), so a dead endpoint grows the outbox in the database
//! (a gauge), never this process's memory. After a failed send a site is paused for the retry delay, so a dead
//! endpoint sees one request per delay, never a loop.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{MAX_URLS_PER_REQUEST, Outcome, Target, classify, retry_delay, split_foreign, targets};
use crate::backoff::unit_random;
use crate::config::Config;
use crate::http_client::error_chain;
use crate::store::{Claim, Settle, Store};
use crate::telemetry;
use crate::worker::{self, Running, Worker};

/// How the sender sends.
#[derive(Clone, Debug)]
pub struct SenderOptions {
    pub endpoint: url::Url,
    /// How often it looks for queued locs when it has nothing to send.
    pub interval: Duration,
    /// The first retry delay ([`retry_delay`]).
    pub retry_base: Duration,
    /// Failed sends after which a loc is dropped (`gave_up`).
    pub max_attempts: u32,
    /// The longest one request may take, connecting included.
    pub timeout: Duration,
    /// Locs per request: [`MAX_URLS_PER_REQUEST`] (tests take smaller batches to have many of them).
    pub batch: usize,
}

impl SenderOptions {
    pub fn from_config(config: &Config) -> Self {
        Self {
            endpoint: config.indexnow.endpoint.clone(),
            interval: config.tuning.indexnow_interval,
            retry_base: config.indexnow.retry_base,
            max_attempts: config.indexnow.max_attempts,
            timeout: config.indexnow.timeout,
            batch: MAX_URLS_PER_REQUEST,
        }
    }

    /// How long a claim holds its locs from other senders: longer than its request and its settling can take. A
    /// sender that dies with a claim delays its locs by this much, then another (or the restarted one) sends them.
    pub fn lease(&self) -> Duration {
        self.timeout * 2 + Duration::from_secs(10)
    }
}

/// Starts the sender for the sites that notify (see [`targets`]) on its own; `None` when none does.
pub fn start(store: Arc<dyn Store>, config: &Config) -> anyhow::Result<Option<Running>> {
    Ok(from_config(store, config)?.map(worker::spawn))
}

/// The sender for the sites that notify (see [`targets`]), a worker; `None` when none does.
pub fn from_config(store: Arc<dyn Store>, config: &Config) -> anyhow::Result<Option<Sender>> {
    let targets = targets(config, &store.sites());
    if targets.is_empty() {
        return Ok(None);
    }
    let options = SenderOptions::from_config(config);
    for t in &targets {
        tracing::info!(
            site = %t.site,
            key_location = %t.key_location(),
            endpoint = %options.endpoint,
            "IndexNow: changes are sent"
        );
    }
    Ok(Some(Sender::new(store, targets, options)?))
}

pub struct Sender {
    store: Arc<dyn Store>,
    targets: Vec<Target>,
    options: SenderOptions,
    client: reqwest::Client,
}

/// What a batch came to, for the loop.
enum Next {
    /// A full batch went: more may be due.
    More,
    /// Nothing more is due now (or the store did not answer: the next round tries again).
    Idle,
    /// The send failed: the site waits this long.
    Pause(Duration),
}

impl Sender {
    pub fn new(store: Arc<dyn Store>, targets: Vec<Target>, options: SenderOptions) -> anyhow::Result<Self> {
        let client = crate::http_client::notifier(options.timeout)?;
        Ok(Self { store, targets, options, client })
    }

    /// Runs the sender on its own until [`Running::stop`], which abandons a send still in flight at its end (its
    /// locs stay claimed until the lease ends, and are sent again then).
    pub fn spawn(self) -> Running {
        worker::spawn(self)
    }
}

#[async_trait]
impl Worker for Sender {
    fn name(&self) -> &'static str {
        "indexnow"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        let mut paused_until: Vec<Option<Instant>> = vec![None; self.targets.len()];
        // Failed sends in a row per target, so that the pause grows with the failures even when each batch holds
        // freshly queued rows (a backlog after an outage), not only with the claimed rows' own attempts.
        let mut streaks: Vec<u32> = vec![0; self.targets.len()];
        loop {
            for ((target, paused), streak) in self.targets.iter().zip(&mut paused_until).zip(&mut streaks) {
                if paused.is_some_and(|until| Instant::now() < until) {
                    continue;
                }
                *paused = None;
                while !stop.is_cancelled() {
                    match self.send_batch(target, streak).await {
                        Next::More => {}
                        Next::Idle => break,
                        Next::Pause(delay) => {
                            *paused = Some(Instant::now() + delay);
                            break;
                        }
                    }
                }
            }
            // The next round: after the interval, or when a paused site may send again if that is sooner.
            let mut wake = Instant::now() + self.options.interval;
            wake = paused_until.iter().flatten().fold(wake, |w, until| w.min(*until));
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

impl Sender {
    /// Claims, sends and settles one batch of `target`'s due locs; `streak` counts the target's failed sends in a
    /// row.
    async fn send_batch(&self, target: &Target, streak: &mut u32) -> Next {
        let lease = self.options.lease();
        let batch = u32::try_from(self.options.batch).unwrap_or(u32::MAX);
        let claim = match self.store.claim_notifications(target.site_id, batch, lease).await {
            Ok(Some(claim)) => claim,
            Ok(None) => return Next::Idle,
            Err(e) => {
                tracing::warn!(site = %target.site, error = %e, "IndexNow: cannot read the outbox; trying again later");
                return Next::Idle;
            }
        };
        let full = claim.locs.len() >= self.options.batch;
        let (urls, foreign) = split_foreign(&target.public_url, claim.locs.clone());
        if !foreign.is_empty() {
            tracing::warn!(
                site = %target.site,
                urls = foreign.len(),
                first = %foreign[0],
                public_url = %target.public_url,
                "IndexNow: dropped queued URLs that are not under the public URL (it was changed since)"
            );
            telemetry::indexnow_dropped("not_under_public_url", foreign.len() as u64);
        }
        let outcome = if urls.is_empty() { None } else { Some(self.post(target, &urls).await) };
        let (settle, next) = match outcome {
            None => (Settle::Done, Next::More),
            Some((Outcome::Sent, status)) => {
                *streak = 0;
                tracing::info!(site = %target.site, urls = urls.len(), %status, "IndexNow: sent");
                telemetry::indexnow_sent(urls.len());
                (Settle::Done, Next::More)
            }
            Some((Outcome::Dropped(reason), answer)) => {
                *streak = 0;
                tracing::warn!(
                    site = %target.site,
                    urls = urls.len(),
                    reason,
                    answer = %answer,
                    "IndexNow: the endpoint refused the URLs; dropped"
                );
                telemetry::indexnow_dropped(reason, urls.len() as u64);
                (Settle::Done, Next::More)
            }
            Some((Outcome::Retry { reason, after }, answer)) => {
                *streak = streak.saturating_add(1);
                let attempt = (claim.attempts + 1).max(*streak);
                let delay = retry_delay(attempt, self.options.retry_base, after, unit_random());
                tracing::warn!(
                    site = %target.site,
                    urls = urls.len(),
                    reason,
                    answer = %answer,
                    attempt,
                    retry_in_ms = delay.as_millis() as u64,
                    "IndexNow: the send failed; sending again later"
                );
                telemetry::indexnow_retry(reason);
                (Settle::Retry { delay, max_attempts: self.options.max_attempts }, Next::Pause(delay))
            }
        };
        self.settle(target, &claim, settle).await;
        match next {
            Next::More if !full => Next::Idle,
            next => next,
        }
    }

    /// Settles `claim`; a failure leaves its locs claimed until the lease ends, when they are sent again.
    async fn settle(&self, target: &Target, claim: &Claim, settle: Settle) {
        match self.store.settle_notifications(claim, settle).await {
            Ok(settled) => {
                if matches!(settle, Settle::Retry { .. }) && settled.deleted > 0 {
                    tracing::warn!(
                        site = %target.site,
                        urls = settled.deleted,
                        attempts = self.options.max_attempts,
                        "IndexNow: gave up on URLs after as many failed sends; dropped"
                    );
                    telemetry::indexnow_dropped("gave_up", settled.deleted);
                }
            }
            Err(e) => tracing::warn!(
                site = %target.site,
                error = %e,
                "IndexNow: cannot record the outcome of a send; its URLs are sent again once their claim expires"
            ),
        }
    }

    /// One request: the outcome, and what the endpoint answered as the log shows it (its status, and the start of
    /// its body when it refused; or the error).
    async fn post(&self, target: &Target, urls: &[String]) -> (Outcome, String) {
        let request = self.client.post(self.options.endpoint.clone()).json(&target.body(urls));
        match request.send().await {
            Ok(response) => {
                let status = response.status();
                let outcome = classify(status, response.headers().get(reqwest::header::RETRY_AFTER), SystemTime::now());
                if outcome == Outcome::Sent {
                    return (outcome, status.to_string());
                }
                // A redirect is shown with where it pointed (never followed): the endpoint to configure, perhaps.
                let location = status
                    .is_redirection()
                    .then(|| response.headers().get(reqwest::header::LOCATION).map(|v| v.to_str().unwrap_or("?")))
                    .flatten()
                    .map(|to| format!(" to {to}"))
                    .unwrap_or_default();
                let status = format!("{status}{location}");
                let body = body_start(response).await;
                (outcome, if body.is_empty() { status } else { format!("{status}: {body}") })
            }
            Err(e) => (Outcome::Retry { reason: "network", after: None }, error_chain(&e)),
        }
    }
}

/// The first 300 bytes of a refusal's body, on one line: engines say there why they refused.
async fn body_start(mut response: reqwest::Response) -> String {
    const SHOWN: usize = 300;
    let mut bytes = Vec::new();
    while bytes.len() < SHOWN {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(SHOWN);
    String::from_utf8_lossy(&bytes)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_outlasts_a_request() {
        let config = Config::load_from(None, |_| None).unwrap();
        let options = SenderOptions::from_config(&config);
        assert!(options.lease() > options.timeout * 2);
        assert_eq!(options.batch, 10_000);
    }
}
