//! The Atom feeds (with `feeds.enabled`; docs/feeds.md): `/feed.atom`, a site's newest changes, and
//! `/feed-<section>.atom`, a named section's. A feed is read from the store through its index (the newest
//! `feeds.entries` records by the time their change was stored, and the newest tombstones with the removed-URLs
//! sitemap on: O(entries), never the table), rendered by the core's pure renderer ([`build`]) and served as the news
//! sitemap is ([`crate::sitemap::document_answer`]: gzip negotiated, a strong ETag per coding from a digest of the
//! bytes, `Last-Modified` the feed's `<updated>`, 304 and 412, HEAD), under the sitemaps' answer layer (crawl record,
//! `X-Robots-Tag`). Each feed is built at most once per read of its site's page table
//! ([`crate::sitemap::Directory::built`]): every write that changes what a feed holds moves the site's change
//! counter, so a burst of requests renders once, and every replica, reading the same rows, answers the same bytes.
//!
//! [`feeds`] and [`current`] are what the WebSub part (and the view, the lookup) use: the site's feeds, and a feed's
//! bytes as the route serves them.

mod build;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use axum::routing::get;
use bytes::Bytes;
use futures_util::FutureExt;

use crate::domain::Site;
use crate::error::ApiError;
use crate::net::host::RequestSite;
use crate::sitemap::files::FeedFile;
use crate::sitemap::{self, Directory, Document, Serving};
use crate::store::{Result, StoreError};

/// The media type of every feed (RFC 4287).
pub const CONTENT_TYPE_ATOM: &str = "application/atom+xml";

/// One feed of a site: the site's (`section` `None`) or a named section's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedRef {
    pub site: i64,
    /// The section's id and name.
    pub section: Option<(i64, String)>,
    /// Its path under the site's public URL: `feed.atom` or `feed-<section>.atom`.
    pub path: String,
    /// Its public URL: its `<id>`, its `<link rel="self">`, what a hub is told of.
    pub public_url: String,
}

impl FeedRef {
    /// The site's feed.
    pub fn site(site: &Site) -> Self {
        Self::of(site, None)
    }

    /// The feed of `section` (id, name) of `site`, or the site's.
    pub fn of(site: &Site, section: Option<(i64, &str)>) -> Self {
        let path = FeedFile::name(section.map(|(_, name)| name));
        Self {
            site: site.id,
            section: section.map(|(id, name)| (id, name.to_owned())),
            public_url: public_url(site, section.map(|(_, name)| name)),
            path,
        }
    }
}

/// The public URL of `site`'s feed, or of its section named `section`'s (whether or not feeds are on).
pub fn public_url(site: &Site, section: Option<&str>) -> String {
    format!("{}{}", site.public_url.as_str(), FeedFile::name(section))
}

/// A feed as built from one read: the bytes the route serves, in both codings, and its validators' sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedBody {
    pub identity: Bytes,
    pub gzip: Bytes,
    /// A digest of `identity`: the ETags are made from it.
    pub digest: String,
    /// Its `Last-Modified`: the later of its `<updated>` (the newest stored change among its items; 0: none) and
    /// the last change to a page of its section or site, so that it never goes back.
    pub modified_us: i64,
    /// Its entries and tombstones (for the view).
    pub entries: usize,
    pub deleted: usize,
}

/// `site`'s feeds: the site's, then one per named section by name; empty when feeds are off or `site` is not
/// configured. The sections are those of the site's page table as last read.
pub async fn feeds<S: Serving>(state: &S, site: i64) -> Result<Vec<FeedRef>> {
    if !state.config().feeds.enabled {
        return Ok(Vec::new());
    }
    let Some(site) = state.sites().by_id(site) else { return Ok(Vec::new()) };
    let directory = state.directories(site.id).get(state.reads()).await?;
    Ok(feeds_of(site, &directory))
}

fn feeds_of(site: &Site, directory: &Directory) -> Vec<FeedRef> {
    let sections = directory.sections().by_name();
    let mut feeds = Vec::with_capacity(1 + sections.len());
    feeds.push(FeedRef::site(site));
    feeds.extend(sections.into_iter().map(|(id, name)| FeedRef::of(site, Some((id, name.as_str())))));
    feeds
}

/// `feed` as the route serves it now: built once per read of its site's page table (as last read, within
/// `cache.state_ttl`). `sqlx::Error::RowNotFound` when feeds are off or its site is not configured.
pub async fn current<S: Serving>(state: &S, feed: &FeedRef) -> Result<FeedBody> {
    if !state.config().feeds.enabled || state.sites().by_id(feed.site).is_none() {
        return Err(StoreError::Other(sqlx::Error::RowNotFound));
    }
    let directory = state.directories(feed.site).get(state.reads()).await?;
    Ok(FeedBody::clone(&*built(state, &directory, feed).await?))
}

/// `feed` as of `directory`'s read: built on first use.
async fn built<S: Serving>(state: &S, directory: &Directory, feed: &FeedRef) -> Result<Arc<FeedBody>> {
    let key = feed.section.as_ref().map(|(id, _)| *id);
    directory.built(key, || build::build(state, feed, pages_modified_us(directory, key))).await
}

/// The last change to a page of the feed's section (`None`: of the site), as `directory` read the pages. A record
/// that leaves the feed (deleted without tombstones, or excluded by URL health) changes its page, not the feed's
/// newest item: the feed's `Last-Modified` is the later of the two, so that it never goes back.
fn pages_modified_us(directory: &Directory, section: Option<i64>) -> i64 {
    match section {
        Some(section) => directory.section_pages(section).map(|p| p.modified_us).max(),
        None => directory.pages().iter().map(|p| p.modified_us).max(),
    }
    .unwrap_or(0)
}

/// The feeds' routes, beside the sitemaps' and under their answer layer ([`sitemap::router_with`]): with
/// `feeds.enabled`, `/feed.atom` and, through the sitemaps' `/{file}`, `/feed-<section>.atom`. Off, exactly the
/// sitemaps' router: nothing served changes.
pub fn router<S: Serving>(state: S) -> Router<S> {
    if !state.config().feeds.enabled {
        return sitemap::router(state);
    }
    let feeds = Router::new().route(
        &format!("/{}", sitemap::files::SITE_FEED_FILE),
        get(|State(state): State<S>, RequestSite(site): RequestSite, method: Method, request: HeaderMap| async move {
            feed_answer(&state, &site, None, &method, &request).await
        }),
    );
    sitemap::router_with(state, feeds, Some(other_file::<S>))
}

/// A file of the site's root that is no sitemap's: a section's feed, or 404.
fn other_file<S: Serving>(
    state: S,
    site: Site,
    file: String,
    method: Method,
    request: HeaderMap,
) -> futures_util::future::BoxFuture<'static, std::result::Result<Response, ApiError>> {
    async move {
        match FeedFile::parse(&file) {
            Some(FeedFile { section: Some(section) }) => {
                feed_answer(&state, &site, Some(section), &method, &request).await
            }
            // `/feed.atom` has its route; anything else is no file of sitemapd's.
            _ => Err(ApiError::not_found("no such resource")),
        }
    }
    .boxed()
}

/// `GET|HEAD` of the site's feed (`section` `None`) or a named section's: 404 for a section the site does not
/// have.
async fn feed_answer<S: Serving>(
    state: &S,
    site: &Site,
    section: Option<&str>,
    method: &Method,
    request: &HeaderMap,
) -> std::result::Result<Response, ApiError> {
    let directory = sitemap::directory_for(state, site.id, request).await?;
    let section = match section {
        None => None,
        Some(name) => {
            let id = directory.sections().id(name).ok_or_else(|| ApiError::not_found("no such section"))?;
            Some((id, name))
        }
    };
    let feed = FeedRef::of(site, section);
    let body = built(state, &directory, &feed).await?;
    let document = Document {
        kind: "feed",
        content_type: CONTENT_TYPE_ATOM,
        identity: &body.identity,
        gzip: &body.gzip,
        digest: &body.digest,
        modified_us: body.modified_us,
    };
    Ok(sitemap::document_answer(state, &document, method, request))
}
