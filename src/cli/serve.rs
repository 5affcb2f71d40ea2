//! `sitemapd serve` (the default command): opens the store, starts the background features, serves until SIGTERM or
//! SIGINT, then stops them and closes the store, in that order.

use anyhow::Context;
use sitemapd::config::Config;
use sitemapd::serve_threads;
use sitemapd::store::{self, StoreOptions};

/// The values of the counters' labels that only the configuration knows: `site`, the checked sites (URL health's
/// counters); `crawler`, every crawler's stable name while crawler telemetry is on; `hub`, every WebSub hub's label
/// while feeds are on; `target`, every publishing target's URL.
pub(crate) fn known_labels(config: &Config) -> Vec<(&'static str, Vec<String>)> {
    let checked = config.health.check.iter().map(|(site, _)| site.to_owned()).collect();
    let crawlers = if config.crawlers.telemetry {
        sitemapd::crawler::Crawler::ALL.iter().map(|c| c.name().to_owned()).collect()
    } else {
        Vec::new()
    };
    let mut hubs: Vec<String> = if config.feeds.enabled {
        config.feeds.hubs.iter().flat_map(|(_, hubs)| hubs.iter().map(sitemapd::websub::hub_label)).collect()
    } else {
        Vec::new()
    };
    hubs.sort_unstable();
    hubs.dedup();
    let targets = config.publish.targets.iter().map(|t| t.url.to_string()).collect();
    vec![("site", checked), ("crawler", crawlers), ("hub", hubs), ("target", targets)]
}

/// Serves with `options` (the store's, from `config`) until a shutdown signal, then stops everything in order.
pub(crate) async fn serve(config: Config, options: StoreOptions) -> anyhow::Result<()> {
    tracing::info!(config = ?config, "starting");
    if let Some(ignored) = config.ignored_public_url() {
        tracing::warn!(
            public_url = %ignored,
            "sitemaps.public_url (SITEMAPD_PUBLIC_URL) is set but not used: sitemaps.sites (SITEMAPD_SITES) \
             replaces it; name each site's public URL there and unset public_url"
        );
    }
    let store = store::open(&options).await?;
    let listener = std::net::TcpListener::bind(config.http.bind)
        .with_context(|| format!("cannot listen on {}", config.http.bind))?;
    let sites: Vec<String> = config.site_specs().iter().map(|s| format!("{}={}", s.name, s.public_url)).collect();
    let threads = config.serving_threads();
    tracing::info!(address = %listener.local_addr()?, sites = ?sites, threads, "listening");
    let (state, workers) = sitemapd::workers::start(store.clone(), &config).await?;
    let grace = config.http.shutdown_grace;
    let served = serve_threads(state.clone(), listener, threads, shutdown_signal(), grace).await;
    drop(state);
    // The background workers, last started first, within one grace period (the crawler telemetry's last
    // flush among them): before the pool closes.
    workers.stop(store::CLOSE_TIMEOUT).await;
    // Even after an error: the database file is left whole (SQLite: WAL checkpointed) and the pool closed.
    store.close().await;
    // The serving threads' runtimes drive the pooled connections they opened: they end after the store.
    served?.release().await?;
    tracing::info!("stopped");
    Ok(())
}

/// Completes on SIGINT or SIGTERM; the server then stops accepting and finishes in-flight requests, for at most
/// `http.shutdown_grace`.
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
