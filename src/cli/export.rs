//! `sitemapd export`: every stored entry as NDJSON, to standard output or a new file.

use std::path::Path;

use anyhow::Context;
use sitemapd::config::Config;
use sitemapd::db_files;
use sitemapd::store::{self, StoreOptions};

/// Exports `site`'s entries (every site's: `None`) to `output` (standard output: `None`).
pub(crate) async fn run(
    config: &Config,
    options: &StoreOptions,
    site: Option<String>,
    output: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    db_files::require_existing(&config.database.url)?;
    if let Some(output) = &output {
        db_files::check_output(&config.database.url, output, "the output file")?;
    }
    let store = store::open(options).await?;
    let exported = export(&*store, site.as_deref(), output.as_deref()).await;
    store.close().await;
    let (count, to) = exported?;
    tracing::info!(entries = count, to = %to, "exported");
    Ok(())
}

/// `sitemapd export`: the entries of `site` (all: `None`) to `output` (standard output: `None`), which must not exist
/// and is synced to disk when written. Returns how many entries, and where they went.
async fn export(store: &dyn store::Store, site: Option<&str>, output: Option<&Path>) -> anyhow::Result<(u64, String)> {
    let sites = store.sites();
    let site = match site {
        None => None,
        Some(name) => Some(
            sites
                .by_name(name)
                .map(|s| s.id)
                .with_context(|| format!("no site is named {name:?}; the sites are {sites}"))?,
        ),
    };
    match output {
        None => {
            let mut out = tokio::io::stdout();
            Ok((sitemapd::export::export(store, site, &mut out).await?, "standard output".to_owned()))
        }
        Some(path) => {
            let file = std::fs::File::create_new(path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = tokio::fs::File::from_std(file);
            let count = sitemapd::export::export(store, site, &mut out).await?;
            out.sync_all().await.with_context(|| format!("cannot sync {}", path.display()))?;
            Ok((count, path.display().to_string()))
        }
    }
}
