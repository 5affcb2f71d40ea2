//! `sitemapd backup FILE`: a consistent copy of the SQLite database, taken while it is served.

use std::path::Path;

use sitemapd::config::Config;
use sitemapd::{db_files, store};

/// Writes the copy to `file`, which must not exist and must not be one of the database's own files.
pub(crate) async fn backup(config: &Config, file: &Path) -> anyhow::Result<()> {
    db_files::require_existing(&config.database.url)?;
    db_files::check_output(&config.database.url, file, "the backup")?;
    store::backup(&config.database.url, file).await
}
