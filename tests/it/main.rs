//! Integration tests: one binary. `contract` drives the `Store` trait; `api` and `sitemaps` drive the real router;
//! `observability` checks `/metrics`, request logs and the OpenAPI document; `indexnow` runs change notification
//! against a fake endpoint; `process` runs the built binary; `readme` runs the ```sh blocks of the README and docs/
//! against it and checks their links; `recipes` runs docs/recipes.md's push functions (python3, node) against it;
//! `sites` serves several sites; `crawlers_view` what people see of crawler telemetry (API, view, metrics);
//! `health_crawler_view` the checker reading pages as a crawler does (compressed, canonical spellings, sniffed);
//! `health_view` what people see of URL health (a record's `health`, `?problem=`, `/api/v1/health`, metrics, the
//! view); `text` the text sitemaps (`/sitemap-N.txt`); `import` reads sitemaps from a local web server and files;
//! `view` checks the HTML view through the router and in headless Chromium (screenshots in `target/artifacts/view/`).
//! `publish_view` the site screen's publishing panel, from targets' state written through the store.
//! `nginx` runs docs/deployment.md's nginx recipe in front of the binary. `feeds` serves the Atom feeds;
//! `feed_conformance` checks them against RFC 4287's schema (trang, xmllint) and real readers (feedparser,
//! rss-parser; `tests/feeds/setup.sh`). `publish` runs `sitemapd publish` and serve's publisher against a directory
//! and a real S3 API (moto's server, `tests/s3/setup.sh`), with kill -9 at every step of a pass.
//! `pooler` runs the router through PgBouncer in transaction pooling mode (`TEST_DATABASE_POOLER_URL`), as do
//! parts of the other suites (`through_pooler!`).
//! Every backend-dependent test runs on SQLite always and on Postgres when `TEST_DATABASE_URL` is set (CI sets it
//! and fails if Postgres is unreachable). A test whose prerequisite is missing (Postgres, Chromium, xmllint, …)
//! shows as ignored with the reason, never as passed: `build.rs` decides it, and under `CI` ignores nothing.

mod api;
mod contract;
mod crawlers;
mod crawlers_view;
mod export;
mod extensions;
mod feed_conformance;
mod feeds;
mod health;
mod health_brake;
mod health_crawler_view;
mod health_site;
mod health_store;
mod health_view;
mod hreflang;
mod hreflang_api;
mod hygiene;
mod import;
mod indexnow;
mod json_body;
mod limits;
mod nginx;
mod observability;
mod outage;
mod pooler;
mod prerender;
mod process;
mod protocol;
mod publish;
mod publish_view;
mod readme;
mod recipes;
mod removed;
mod replica;
mod roundtrip;
mod sections;
mod sitemaps;
mod sites;
mod slow_readers;
mod sqlite_files;
mod stalled_uploads;
mod support;
mod text;
mod upgrade;
mod view;
mod websub;
mod websub_store;
