//! `sitemapd migrate`: applies the migrations (`Store::open` does) and exits.

use sitemapd::config::Config;
use sitemapd::store::{self, StoreOptions};

/// Opens the store (which migrates it) and closes it.
pub(crate) async fn migrate(config: &Config, options: &StoreOptions) -> anyhow::Result<()> {
    store::open(options).await?.close().await;
    tracing::info!(database = %sitemapd::redact::redact_url(&config.database.url), "migrations applied");
    Ok(())
}
