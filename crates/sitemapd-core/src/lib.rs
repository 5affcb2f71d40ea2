//! sitemapd's core, the bottom layer: validated values ([`domain`]), the page model with the exact size of an
//! entry and the deterministic renderer ([`page`]), which page each URL lives on ([`placement`]), the Atom feed of
//! the newest changes ([`feed`]), hreflang clusters and their resolution ([`hreflang`]), and the rules of
//! conditional requests and content coding ([`conditional`], on the `http` crate's header types). Pure: no I/O, no
//! runtime, no database or server; the crate's dependencies keep it so (see ARCHITECTURE.md).

pub mod backoff;
pub mod conditional;
pub mod crawler;
pub mod domain;
pub mod feed;
pub mod health;
pub mod hreflang;
pub mod page;
pub mod placement;
