//! sitemapd's core, the bottom layer: validated values ([`domain`]), the page model with the exact size of an
//! entry and the deterministic renderer ([`page`]), and which page each URL lives on ([`placement`]). Pure: no
//! I/O, no runtime, no database or HTTP types; the crate's dependencies keep it so (see ARCHITECTURE.md).

pub mod domain;
pub mod page;
pub mod placement;
