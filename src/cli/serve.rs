//! `sitemapd serve` (the default command): opens the store, starts the background features, serves until SIGTERM or
//! SIGINT, then stops them and closes the store, in that order.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sitemapd::config::Config;
use sitemapd::store::{self, StoreOptions};
use sitemapd::{AppState, serve_threads};

/// The values of the counters' labels that only the configuration knows: `site`, the checked sites (URL health's
/// counters); `crawler`, every crawler's stable name while crawler telemetry is on.
pub(crate) fn known_labels(config: &Config) -> Vec<(&'static str, Vec<String>)> {
    let checked = config.health_check.iter().map(|(site, _)| site.to_owned()).collect();
    let crawlers = if config.crawler_telemetry {
        sitemapd::crawler::Crawler::ALL.iter().map(|c| c.name().to_owned()).collect()
    } else {
        Vec::new()
    };
    vec![("site", checked), ("crawler", crawlers)]
}

/// Serves with `options` (the store's, from `config`) until a shutdown signal, then stops everything in order.
pub(crate) async fn serve(config: Config, options: StoreOptions) -> anyhow::Result<()> {
    tracing::info!(config = ?config, "starting");
    if let Some(ignored) = config.ignored_public_url() {
        tracing::warn!(
            public_url = %ignored,
            "public_url (SITEMAPD_PUBLIC_URL) is set but not used: sites (SITEMAPD_SITES) replaces it; name \
             each site's public URL there and unset public_url"
        );
    }
    let store = store::open(&options).await?;
    let listener =
        std::net::TcpListener::bind(config.bind).with_context(|| format!("cannot listen on {}", config.bind))?;
    let sites: Vec<String> = config.site_specs().iter().map(|s| format!("{}={}", s.name, s.public_url)).collect();
    let threads = config.serving_threads();
    tracing::info!(address = %listener.local_addr()?, sites = ?sites, threads, "listening");
    // Change notification (IndexNow), when a site has a key: a task of its own, never in a write's way.
    let notifier = sitemapd::indexnow::start(store.clone(), &config)?;
    // The removed-URLs sitemap's tombstones past the retention, when it is on: a task of its own.
    let purge = sitemapd::sitemap::removed::start_purge(store.clone(), config.removed_days);
    let state = AppState::new(store.clone(), &config);
    // URL health, when a site is checked: a task of its own that tells the state what its exclusions change.
    // Started either way: a site no longer excluding gets its URLs back.
    let checker = sitemapd::checker::start(store.clone(), &config, Arc::new(state.clone())).await?;
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let served = serve_threads(state.clone(), listener, threads, shutdown_signal(), grace).await;
    // Checks in flight may finish (briefly); the rest stay claimed until their lease ends.
    if let Some(checker) = checker {
        checker.stop(store::CLOSE_TIMEOUT).await;
    }
    // The crawler telemetry recorded since the last flush, written before the pool closes (bounded).
    if let Some(recorder) = state.crawl_recorder() {
        let _ = tokio::time::timeout(store::CLOSE_TIMEOUT, recorder.flush()).await;
    }
    drop(state);
    // A send in flight may finish (briefly); what is left unsent stays in the outbox for the next start.
    if let Some(notifier) = notifier {
        notifier.stop(store::CLOSE_TIMEOUT).await;
    }
    if let Some(purge) = purge {
        purge.abort();
    }
    // Even after an error: the database file is left whole (SQLite: WAL checkpointed) and the pool closed.
    store.close().await;
    // The serving threads' runtimes drive the pooled connections they opened: they end after the store.
    served?.release().await?;
    tracing::info!("stopped");
    Ok(())
}

/// Completes on SIGINT or SIGTERM; the server then stops accepting and finishes in-flight requests, for at most
/// `shutdown_grace_secs`.
async fn shutdown_signal() {
    let interrupt = async {
        tokio::signal::ctrl_c().await.expect("cannot listen for SIGINT");
    };
    #[cfg(unix)]
    let terminate = async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("cannot listen for SIGTERM")
            .recv()
            .await;
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received: finishing the requests in flight");
}
