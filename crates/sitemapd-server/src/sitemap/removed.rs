//! The removed-URLs sitemap (`/sitemap-removed.xml[.gz]`, on with `sitemaps.removed_retention`): the locs deleted within the
//! retention window, newest first, at most [`MAX_REMOVED`], each with its deletion time as `<lastmod>`, so that
//! search engines recrawl them soon and drop them (Google's advice for a mass removal).
//!
//! It is built from one read of the store through the `(site_id, removed_us, loc)` index (O(its entries)), and kept
//! with the page table it was read for ([`super::Directory`]): every write that adds or drops a tombstone moves the
//! site's change counter (migration 0011), which replaces the table, so it is read again only after such a write,
//! when its oldest entry leaves the window, or when the table is read again anyway ([`super::directory::FULL_READ`]).
//! Both validators are functions of what it was built from: the ETag is a digest of its bytes, and Last-Modified is
//! the latest of the site's removed-URLs stamp (moved by every write that adds or drops a tombstone), the newest
//! deletion listed and the moment the last tombstone left the window (its deletion time plus the window). The
//! window starts on a whole second, so replicas whose clocks agree to the second answer alike.

use axum::http::{HeaderMap, Method};
use axum::response::Response;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{Encoding, Representation, Serving, Source, directory_for, etag};
use crate::domain::LastMod;
use crate::error::ApiError;
use crate::page::render::{URLSET_HEAD, URLSET_TAIL, write_url};
use crate::page::{Fields, Gzip};
use crate::store::{MICROS_PER_DAY, RemovedList, RemovedRead, Result, SITEMAP_MAX_BYTES, Store, StoreError};

/// A sitemap lists at most 50,000 URLs (sitemaps.org).
pub const MAX_REMOVED: u32 = 50_000;

/// The removed-URLs sitemap as built from one read: its gzip only (identity is inflated from it as it is sent).
#[derive(Debug)]
pub struct RemovedSitemap {
    pub gzip: Bytes,
    /// The identity document's length.
    pub len: u64,
    /// A digest of the identity document: the representations' ETags are made from it.
    pub digest: String,
    pub modified_us: i64,
    pub count: usize,
}

/// The removed-URLs sitemap of one read, and its Last-Modified, which the index folds into its own whether or not
/// the sitemap is listed (so that the index's Last-Modified never goes back when the last tombstone leaves).
#[derive(Debug)]
pub struct RemovedState {
    /// `None` when no tombstone is in the window.
    pub sitemap: Option<RemovedSitemap>,
    /// The latest of the stamp, the newest deletion listed and the last tombstone leaving the window (0 when
    /// nothing was ever deleted with the sitemap on).
    pub modified_us: i64,
    /// The start of the window it was read for.
    since_us: i64,
    /// The oldest deletion listed (`i64::MAX` when none): until the window passes it, the read is still current.
    oldest_us: i64,
}

impl RemovedState {
    /// Whether this read is still the sitemap for a window starting at `since_us`, the tombstones being unchanged
    /// (the change counter has not moved): no listed tombstone has left the window, and none can have entered it.
    pub fn current_for(&self, since_us: i64) -> bool {
        self.since_us <= since_us && since_us <= self.oldest_us
    }
}

/// The window's start for a read at `now_us`: `days` before `now_us` truncated to the second.
pub fn window_start(now_us: i64, days: u32) -> i64 {
    now_us.div_euclid(1_000_000) * 1_000_000 - i64::from(days) * MICROS_PER_DAY
}

/// Reads and renders `site`'s removed-URLs sitemap for a window starting at `since_us`.
pub async fn build(store: &dyn RemovedList, site: i64, since_us: i64, days: u32, level: u32) -> Result<RemovedState> {
    let read = store.removed(site, since_us, MAX_REMOVED).await?;
    let modified_us = modified(&read, days);
    let oldest_us = read.entries.last().map_or(i64::MAX, |(_, us)| *us);
    let Some((identity, count)) = render(&read.entries, SITEMAP_MAX_BYTES as usize) else {
        return Ok(RemovedState { sitemap: None, modified_us, since_us, oldest_us });
    };
    let digest: String = Sha256::digest(&identity)[..16].iter().map(|b| format!("{b:02x}")).collect();
    let len = identity.len() as u64;
    let gzip = super::stream::gzip_bytes(identity, level).await.map_err(|e| StoreError::Other(sqlx::Error::Io(e)))?;
    let sitemap = RemovedSitemap { gzip, len, digest, modified_us, count };
    Ok(RemovedState { sitemap: Some(sitemap), modified_us, since_us, oldest_us })
}

/// The Last-Modified of a read: the latest of the stamp, the newest deletion listed and the moment the last
/// tombstone left the window (its deletion time plus the window).
fn modified(read: &RemovedRead, days: u32) -> i64 {
    let left_window = read.newest_before_us.map_or(0, |us| us + i64::from(days) * MICROS_PER_DAY);
    let newest = read.entries.first().map_or(0, |(_, us)| *us);
    read.changed_us.max(left_window).max(newest)
}

/// The `<lastmod>` of a deletion time: milliseconds, truncated, as the index's (sitemap.js drops a lastmod with
/// more than three fraction digits).
fn lastmod(us: i64) -> LastMod {
    LastMod::from_unix_micros(us.div_euclid(1000) * 1000)
}

/// The document and the number of entries it lists, or `None` when there are none: `entries` in order, stopping
/// before the one that would take the document past `max_bytes`.
fn render(entries: &[(String, i64)], max_bytes: usize) -> Option<(Bytes, usize)> {
    if entries.is_empty() {
        return None;
    }
    // Written in place, the tail's room kept: one buffer, never a copy of a document of up to 50 MiB.
    let room = max_bytes.saturating_sub(URLSET_TAIL.len());
    let mut body = Vec::with_capacity(URLSET_HEAD.len() + entries.len().min(MAX_REMOVED as usize) * 128);
    body.extend_from_slice(URLSET_HEAD.as_bytes());
    let mut count = 0;
    for (loc, us) in entries {
        let fields = Fields { lastmod: Some(lastmod(*us).as_str().to_owned()), ..Fields::default() };
        let before = body.len();
        write_url(&mut body, loc, &fields);
        if body.len() > room {
            body.truncate(before);
            break;
        }
        count += 1;
    }
    if count == 0 {
        return None;
    }
    body.extend_from_slice(URLSET_TAIL.as_bytes());
    Some((Bytes::from(body), count))
}

/// The removed-URLs sitemap of the site's current page table, or `None` when it is off.
pub(super) async fn removed_sitemap(
    state: &impl Serving,
    directory: &super::Directory,
) -> Result<Option<std::sync::Arc<RemovedState>>, ApiError> {
    let days = crate::config::days_of(state.config().sitemaps.removed_retention);
    if days == 0 {
        return Ok(None);
    }
    Ok(Some(directory.removed(state.removed_list(), days, state.config().sitemaps.gzip_level).await?))
}

/// The removed-URLs sitemap in `encoding`, with the same validators and preconditions as a page; 404 when it is
/// off or no tombstone is in the window.
pub(super) async fn removed_answer(
    state: &impl Serving,
    site: i64,
    encoding: Encoding,
    method: &Method,
    request: &HeaderMap,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::not_found("no URL was removed within the removed-URLs window");
    if state.config().sitemaps.removed_retention.is_zero() {
        return Err(not_found());
    }
    let directory = directory_for(state, site, request).await?;
    let removed = removed_sitemap(state, &directory).await?.ok_or_else(not_found)?;
    let sitemap = removed.sitemap.as_ref().ok_or_else(not_found)?;
    let etag = etag(&[&"removed", &sitemap.digest], encoding, Gzip::Stream, state.config().sitemaps.gzip_level);
    let rep = Representation { encoding, kind: super::Kind::Xml, etag, modified_us: sitemap.modified_us, length: None };
    if let Some(answer) = rep.check_preconditions(request) {
        return Ok(answer);
    }
    let body = if encoding.gzip() {
        Source::Bytes(sitemap.gzip.clone())
    } else {
        Source::Inflated { gzip: sitemap.gzip.clone(), len: sitemap.len }
    };
    Ok(rep.answer(method, body))
}

/// How often the purge runs: tombstones are deleted at most this long after they leave the window (which no
/// answer shows: the sitemap's window is the same).
pub const PURGE_EVERY: std::time::Duration = std::time::Duration::from_secs(300);
/// The most tombstones of a site one purge transaction deletes: the write lock is held briefly, and a purge of a
/// large removal runs as several transactions, one after the other.
pub const PURGE_BATCH: u32 = 10_000;

/// The purge of tombstones past the retention, a worker that runs [`purge`] every [`PURGE_EVERY`] (first at once);
/// `None` when the removed-URLs sitemap is off (`days` 0).
pub fn purge_worker(store: std::sync::Arc<dyn Store>, days: u32) -> Option<Purge> {
    (days > 0).then_some(Purge { store })
}

pub struct Purge {
    store: std::sync::Arc<dyn Store>,
}

#[async_trait::async_trait]
impl crate::worker::Worker for Purge {
    fn name(&self) -> &'static str {
        "removed-purge"
    }

    async fn run(&self, stop: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
        let mut every = tokio::time::interval(PURGE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                _ = every.tick() => {}
            }
            // Stopped at the next statement: a purge is one transaction per batch, each whole or not at all.
            let purged = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                purged = purge(&*self.store) => purged,
            };
            if let Err(e) = purged {
                tracing::warn!(error = %e, "cannot purge the removed-URLs sitemap's old entries; tried again later");
            }
        }
    }
}

/// Deletes every tombstone past the retention, [`PURGE_BATCH`] of each site a transaction; how many.
pub async fn purge(store: &dyn Store) -> Result<u64> {
    let mut purged = 0;
    loop {
        let batch = store.purge_removed(PURGE_BATCH).await?;
        purged += batch;
        if batch < u64::from(PURGE_BATCH) {
            break;
        }
    }
    if purged > 0 {
        tracing::info!(purged, "removed-URLs sitemap: entries past the retention purged");
    }
    Ok(purged)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000;

    fn entries(n: usize) -> Vec<(String, i64)> {
        (0..n).map(|i| (format!("https://x.test/r?a=1&b={i}"), 1_700_000_000 * SECOND - i as i64 * SECOND)).collect()
    }

    #[test]
    fn the_window_starts_on_a_whole_second() {
        assert_eq!(window_start(10 * SECOND + 999_999, 1), 10 * SECOND - MICROS_PER_DAY);
        assert_eq!(window_start(10 * SECOND, 1), window_start(10 * SECOND + 1, 1));
    }

    #[test]
    fn entries_render_in_order_with_their_deletion_time_and_escaped() {
        let (body, count) = render(&entries(2), 1 << 20).unwrap();
        let text = std::str::from_utf8(&body).unwrap();
        assert_eq!(count, 2);
        assert!(text.starts_with(URLSET_HEAD) && text.ends_with(URLSET_TAIL), "{text}");
        let first = text.find("<loc>https://x.test/r?a=1&amp;b=0</loc><lastmod>2023-11-14T22:13:20Z</lastmod>");
        let second = text.find("<loc>https://x.test/r?a=1&amp;b=1</loc><lastmod>2023-11-14T22:13:19Z</lastmod>");
        assert!(first.unwrap() < second.unwrap(), "{text}");
        assert!(render(&[], 1 << 20).is_none());
        assert_eq!(lastmod(1_500_123_456).as_str(), "1970-01-01T00:25:00.123Z", "milliseconds, truncated");
    }

    #[test]
    fn the_document_stops_before_the_byte_limit() {
        let all = entries(100);
        let (whole, _) = render(&all, usize::MAX).unwrap();
        let per_url = (whole.len() - URLSET_HEAD.len() - URLSET_TAIL.len()) / 100;
        // Room for 10 URLs and a half: 10 are listed, the newest, and the document stays within the limit.
        let limit = URLSET_HEAD.len() + URLSET_TAIL.len() + per_url * 21 / 2;
        let (body, count) = render(&all, limit).unwrap();
        assert_eq!(count, 10);
        assert!(body.len() <= limit, "{} > {limit}", body.len());
        assert!(whole.starts_with(&body[..body.len() - URLSET_TAIL.len()]), "a prefix of the whole list");
        let exact = URLSET_HEAD.len() + URLSET_TAIL.len() + per_url * 10;
        assert_eq!(render(&all, exact).unwrap().1, 10, "a document of exactly the limit is allowed");
        assert!(render(&all, URLSET_HEAD.len() + URLSET_TAIL.len() + 10).is_none(), "not even one fits");
    }

    #[test]
    fn last_modified_is_the_latest_of_the_stamp_the_newest_and_the_last_to_leave() {
        let read = RemovedRead { entries: entries(1), changed_us: 5, newest_before_us: None };
        assert_eq!(modified(&read, 1), 1_700_000_000 * SECOND);
        let read = RemovedRead { entries: vec![], changed_us: 5, newest_before_us: Some(7) };
        assert_eq!(modified(&read, 1), 7 + MICROS_PER_DAY, "the last tombstone left then");
        assert_eq!(modified(&RemovedRead::default(), 30), 0, "never a removal: nothing moves the index");
    }

    #[test]
    fn a_read_stays_current_until_its_oldest_entry_leaves_the_window() {
        let state = RemovedState { sitemap: None, modified_us: 0, since_us: 100, oldest_us: 150 };
        assert!(state.current_for(100) && state.current_for(150));
        assert!(!state.current_for(151), "the oldest listed left");
        assert!(!state.current_for(99), "an older one may enter a window that starts earlier");
        let empty = RemovedState { sitemap: None, modified_us: 0, since_us: 100, oldest_us: i64::MAX };
        assert!(empty.current_for(1_000_000), "nothing listed: nothing can leave");
    }
}
