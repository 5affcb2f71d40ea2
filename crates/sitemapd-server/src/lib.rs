//! sitemapd's server: what answers HTTP, and the background features beside it. The binary (the root package)
//! parses the command line and calls [`serve_threads`]; ARCHITECTURE.md draws the picture.
//!
//! The modules, bottom first (`tests/layers.rs` holds a module to the rows below its own):

// The layers below, crates of their own: `crate::domain`, `crate::store` and the rest keep their paths.
pub use sitemapd_core::{backoff, crawler, domain, health, hreflang, page, placement};
pub use sitemapd_ingest as ingest;
pub use sitemapd_store as store;

// API tokens (digests only) and what a caller may write.
pub mod access;
// The one HTTP client of outgoing requests (IndexNow, URL health, crawler ranges, `sitemapd import`).
pub mod http_client;
// The one way a database URL is shown.
pub mod redact;
// Logs, request spans and the metrics recorder; `GET /metrics` (`telemetry::scrape`).
pub mod telemetry;
// `ApiError`: the one place an error becomes an HTTP answer.
pub mod error;
// Background work in one shape: a named worker under the supervisor, restarted with backoff on failure.
pub mod worker;
// The connection and its request: bare-LF refusal, send and receive rates, the body memory budget, the host.
pub mod net;
// The settings: one table, defaults → file → environment, checked at start.
pub mod config;
// Serving sitemaps: routes, the page table, rendering and gzip, the page cache, pre-rendering.
pub mod sitemap;
// Atom feeds of the newest changes, served beside the sitemaps (with `feeds.enabled`).
pub mod feed;
// Crawler telemetry: who fetched what, verified, recorded in batches off the request path.
pub mod crawlers;
// Change notification (IndexNow): the sender task and the key file route.
pub mod indexnow;
// URL health: the checker task.
pub mod checker;
// WebSub publishing: the publisher task that tells hubs of feed changes.
pub mod websub;
// Publishing to object storage: the sitemaps as static files on S3, GCS, Azure or a directory, only what changed.
pub mod publish;
// `AppState`: what every handler shares.
pub mod state;
// The background workers `serve` starts, in order: the one list a new worker is added to.
pub mod workers;
// The write API (`/api/v1/…`) and its OpenAPI document.
pub mod api;
// The HTML view (`/view/…`).
pub mod view;
// The router (`app`) and the serving loops (`serve`, `serve_threads`).
pub mod server;

pub use server::{Served, app, serve, serve_threads};
pub use state::AppState;
