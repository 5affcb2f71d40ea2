//! The server's background workers, in start order: `serve` starts them with [`start`] once the store is open, and
//! stops them in the reverse order ([`Supervisor::stop`]) once it has stopped serving, before the store closes.
//! What a worker is, and what happens when one fails, is [`crate::worker`]. A new worker is one line here.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::sitemap::directory::system_clock;
use crate::sitemap::removed;
use crate::store::Store;
use crate::worker::{Supervisor, Worker};
use crate::{AppState, checker, indexnow, publish, telemetry, websub};

/// Starts every background worker the configuration calls for, and returns the state to serve from with the
/// supervisor that stops them. The order is their dependencies': what serving feeds (the state's features) after
/// what it needs, WebSub publishing and publishing to object storage (which read the files as served) after the
/// state, and URL health, which tells the state what its exclusions change, last (so it stops first).
pub async fn start(store: Arc<dyn Store>, config: &Config) -> anyhow::Result<(AppState, Supervisor)> {
    let mut workers = Supervisor::new();
    workers.start(MetricsUpkeep);
    workers.start_if(FileWatch::of(&store));
    workers
        .start_if(removed::purge_worker(Arc::clone(&store), crate::config::days_of(config.sitemaps.removed_retention)));
    workers.start_if(indexnow::from_config(Arc::clone(&store), config)?);
    let (state, features) = AppState::build(Arc::clone(&store), config, system_clock());
    features.into_iter().for_each(|feature| workers.start_arc(feature));
    workers.start_if(websub::from_config(Arc::clone(&store), config, Arc::new(websub::Served(state.clone())))?);
    workers.start_if(publish::from_config(Arc::clone(&store), config, state.clone())?);
    workers.start_if(checker::from_config(store, config, Arc::new(state.clone())).await?);
    tracing::info!(workers = ?workers.names(), "background workers started");
    Ok((state, workers))
}

/// Folds the histograms' samples into their buckets every [`telemetry::UPKEEP_EVERY`], so that without a scraper
/// their buffers stay bounded. A worker rather than a thread: it then stops with the others, and shows in
/// `sitemapd_worker_up`.
struct MetricsUpkeep;

#[async_trait]
impl Worker for MetricsUpkeep {
    fn name(&self) -> &'static str {
        "metrics-upkeep"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        let mut every = tokio::time::interval(telemetry::UPKEEP_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                _ = every.tick() => telemetry::prometheus().run_upkeep(),
            }
        }
    }
}

/// The store's watch of its files while serving ([`Store::file_watch`]: SQLite only).
struct FileWatch(Arc<dyn Store>);

impl FileWatch {
    fn of(store: &Arc<dyn Store>) -> Option<Self> {
        store.file_watch().map(|_| Self(Arc::clone(store)))
    }
}

#[async_trait]
impl Worker for FileWatch {
    fn name(&self) -> &'static str {
        "sqlite-watch"
    }

    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
        let Some(watch) = self.0.file_watch() else { return Ok(()) };
        tokio::select! {
            () = stop.cancelled() => {}
            () = watch => {}
        }
        Ok(())
    }
}
