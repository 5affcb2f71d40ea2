//! sitemapd: keeps a website's URL records in a database and serves its sitemaps.org sitemaps.
//!
//! This package is the top layer: the binary (`main.rs`, its commands in `cli/`) and what only the command line
//! uses. The server and every layer below it are `crates/sitemapd-server`, re-exported here whole, so that
//! `sitemapd::store`, `sitemapd::AppState` and the rest keep their paths. See ARCHITECTURE.md.

pub use sitemapd_server::*;

// The SQLite files a command writes beside the database (backups, exports, rejects): checked before they are.
pub mod db_files;
// `sitemapd export`: every stored entry as NDJSON in the write API's form.
pub mod export;
// `sitemapd import`: existing sitemaps through the write path (ingest).
pub mod import;
