//! `serve`'s publisher: a background worker that runs a pass of each target ([`super::pass`]) at start, after each
//! change of its site (debounced: the first change at once, the rest of a burst at the end of `publish.interval`),
//! when the grace of an object marked gone ends, and at least hourly.
//!
//! It reads each site's change counter every `publish_poll` (one primary-key read). A failed pass is run again
//! after a delay that starts at the interval and doubles to an hour (with jitter); a pass that found another
//! process holding the target's lease is tried again once that lease has run out. What is published, and what is
//! owed, is in the database and on the target, never in this process: a restart takes up where it left off.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{NoProgress, PassOptions, PassReport, Target, pass, targets};
use crate::backoff::{Backoff, jitter};
use crate::config::{Config, shown_duration};
use crate::sitemap::Serving;
use crate::store::{PublishLog, Store};
use crate::worker::Worker;

/// The longest time between two passes of a target, changed or not: what another process or a person did to the
/// target (or an object's grace that ended) is set right within it.
pub const AT_LEAST_EVERY: Duration = Duration::from_secs(3600);

/// The publisher of the configured targets (`publish.targets`), a worker; `None` when none is configured.
pub fn from_config<S: Serving>(
    store: Arc<dyn Store>,
    config: &Config,
    state: S,
) -> anyhow::Result<Option<Publisher<S>>> {
    if config.publish.targets.is_empty() {
        return Ok(None);
    }
    let targets = targets(config, &store.sites())?;
    for t in &targets {
        tracing::info!(
            site = %t.site_name,
            target = %t.label,
            public_url = %t.public_url,
            interval = %shown_duration(&config.publish.interval),
            "publish: the site's sitemaps are published"
        );
    }
    Ok(Some(Publisher {
        store,
        state,
        targets,
        options: PassOptions::from_config(config, false),
        interval: config.publish.interval,
        poll: config.tuning.publish_poll,
    }))
}

pub struct Publisher<S> {
    store: Arc<dyn Store>,
    state: S,
    targets: Vec<Target>,
    options: PassOptions,
    interval: Duration,
    poll: Duration,
}

/// Where a target stands for the loop.
#[derive(Clone, Copy)]
struct TargetState {
    /// The site's change counter as read before the last pass that completed.
    seen: Option<i64>,
    /// When the last pass started.
    started: Option<Instant>,
    /// When the next pass is due.
    due: Instant,
    /// Passes failed in a row.
    failures: u32,
}

#[async_trait]
impl<S: Serving> Worker for Publisher<S> {
    fn name(&self) -> &'static str {
        "publisher"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        let now = Instant::now();
        let mut states = vec![TargetState { seen: None, started: None, due: now, failures: 0 }; self.targets.len()];
        let retry = Backoff::new(self.interval, AT_LEAST_EVERY.max(self.interval));
        loop {
            for (target, state) in self.targets.iter().zip(&mut states) {
                if stop.is_cancelled() {
                    return Ok(());
                }
                let changes = match self.state.reads().changes(target.site).await {
                    Ok(changes) => Some(changes),
                    Err(e) => {
                        tracing::warn!(target = %target.label, error = %e, "publish: cannot read the change counter");
                        None
                    }
                };
                if let (Some(changes), Some(seen)) = (changes, state.seen)
                    && changes != seen
                    && state.failures == 0
                {
                    // The first change at once, the rest of a burst at the end of the interval.
                    let earliest = state.started.map_or(Instant::now(), |s| s + self.interval);
                    state.due = state.due.min(earliest.max(Instant::now()));
                }
                if Instant::now() < state.due {
                    continue;
                }
                state.started = Some(Instant::now());
                let outcome = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    outcome = self.pass(target) => outcome,
                };
                state.due = match outcome {
                    Ok(PassReport::Done { uploaded, deleted, awaiting, seconds, .. }) => {
                        state.failures = 0;
                        state.seen = changes.or(state.seen);
                        tracing::info!(target = %target.label, uploaded, deleted, awaiting, seconds, "publish: pass complete");
                        Instant::now() + self.next_grace_end(target, awaiting).await.min(AT_LEAST_EVERY)
                    }
                    Ok(PassReport::Busy) => {
                        tracing::info!(target = %target.label, "publish: another process holds the target's lease; trying again when it ends");
                        Instant::now() + self.options.lease
                    }
                    Err(e) => {
                        state.failures = state.failures.saturating_add(1);
                        let wait = jitter(retry.after(state.failures), 0.5).max(self.interval / 2);
                        tracing::warn!(
                            target = %target.label,
                            error = %format!("{e:#}"),
                            failures = state.failures,
                            retry_in_ms = wait.as_millis() as u64,
                            "publish: the pass failed; trying again later"
                        );
                        Instant::now() + wait
                    }
                };
            }
            let wake = states.iter().map(|s| s.due).fold(Instant::now() + self.poll, Instant::min);
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

impl<S: Serving> Publisher<S> {
    async fn pass(&self, target: &Target) -> anyhow::Result<PassReport> {
        let publish: &dyn PublishLog = &*self.store;
        pass(&self.state, publish, target, &self.options, &NoProgress).await
    }

    /// How long until the grace of the first object awaiting deletion ends (and a second, so that it has); an hour
    /// when none awaits, or when it cannot be read.
    async fn next_grace_end(&self, target: &Target, awaiting: u64) -> Duration {
        if awaiting == 0 {
            return AT_LEAST_EVERY;
        }
        match self.store.published_objects(target.url.as_str()).await {
            Ok(objects) => objects
                .iter()
                .filter_map(|o| o.gone_for)
                .map(|gone| self.options.grace.saturating_sub(gone) + Duration::from_secs(1))
                .min()
                .unwrap_or(AT_LEAST_EVERY),
            Err(e) => {
                tracing::warn!(target = %target.label, error = %e, "publish: cannot read what the target holds");
                AT_LEAST_EVERY
            }
        }
    }
}
