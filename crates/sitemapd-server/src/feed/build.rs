//! One feed built from one read of the store ([`crate::store::FeedReads::feed`]): the store's records and
//! tombstones mapped into the core's items, rendered by the core's renderer (merged newest first, at most
//! `feeds.entries` items and [`MAX_FEED_BYTES`]), compressed and digested as the news sitemap is.

use bytes::Bytes;
use sha2::{Digest, Sha256};
use sitemapd_core::feed::{FeedItem, FeedMeta, MAX_FEED_BYTES, render};

use super::{FeedBody, FeedRef};
use crate::domain::Site;
use crate::sitemap::Serving;
use crate::store::{FeedRead, Result, StoreError};

/// Reads and renders `feed`. Tombstones are read only with the removed-URLs sitemap on (they are kept only then).
/// Its `Last-Modified` is the later of its newest item and `pages_modified_us` (the last change to a page of its
/// section or site): its `<updated>` stays the newest item's, so that a change that leaves its items as they are
/// moves no byte and no ETag.
pub(super) async fn build<S: Serving>(state: &S, feed: &FeedRef, pages_modified_us: i64) -> Result<FeedBody> {
    let config = state.config();
    let site = state.sites().by_id(feed.site).ok_or(StoreError::Other(sqlx::Error::RowNotFound))?;
    let tombstones = !config.sitemaps.removed_retention.is_zero();
    let section = feed.section.as_ref().map(|(id, _)| *id);
    let read = state.feed_reads().feed(feed.site, section, config.feeds.entries, tombstones).await?;
    let title = title(config.feeds.titles.for_site(&site.name), site, feed.section.as_ref().map(|(_, n)| n.as_str()));
    // A hub's user name and password are for the publisher's requests to it (`websub`), never for the public feed.
    let hubs: Vec<String> = config.feeds.hubs.for_site(&site.name).iter().map(crate::config::shown_hub_url).collect();
    let hubs: Vec<&str> = hubs.iter().map(String::as_str).collect();
    let meta = FeedMeta { id: &feed.public_url, title: &title, site_url: site.public_url.as_str(), hubs: &hubs };
    let rendered = render(&meta, &items(read), config.feeds.entries as usize, MAX_FEED_BYTES);
    let identity = Bytes::from(rendered.bytes);
    let gzip = crate::sitemap::stream::gzip_bytes(identity.clone(), config.sitemaps.gzip_level)
        .await
        .map_err(|e| StoreError::Other(sqlx::Error::Io(e)))?;
    let digest: String = Sha256::digest(&identity)[..16].iter().map(|b| format!("{b:02x}")).collect();
    Ok(FeedBody {
        identity,
        gzip,
        digest,
        modified_us: rendered.updated_us.max(pages_modified_us),
        entries: rendered.items - rendered.deleted,
        deleted: rendered.deleted,
    })
}

/// The store's rows as the renderer's items: the records, then the tombstones, each newest first as read (the
/// renderer merges them by time, a loc's newest only).
fn items(read: FeedRead) -> Vec<FeedItem> {
    let entries =
        read.entries.into_iter().map(|e| FeedItem::Entry { loc: e.loc, lastmod: e.lastmod, changed_us: e.changed_us });
    let deleted = read.deleted.into_iter().map(|d| FeedItem::Deleted { loc: d.loc, removed_us: d.removed_us });
    entries.chain(deleted).collect()
}

/// A feed's title: the site's (`feeds.titles`) or else its host, and for a section's feed `Title — section`.
fn title(configured: Option<&str>, site: &Site, section: Option<&str>) -> String {
    let site_title = match configured {
        Some(title) => title.to_owned(),
        None => url::Url::parse(site.public_url.as_str())
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| site.name.clone()),
    };
    match section {
        Some(section) => format!("{site_title} — {section}"),
        None => site_title,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{PublicUrl, SiteSpec};
    use crate::store::{FeedDeleted, FeedEntry};

    fn site() -> Site {
        let public_url = PublicUrl::parse("https://www.example.com:8443/shop/").unwrap();
        Site::new(1, SiteSpec { name: "shop".into(), public_url })
    }

    #[test]
    fn a_feed_is_titled_by_its_site_or_host_and_its_section() {
        assert_eq!(title(None, &site(), None), "www.example.com");
        assert_eq!(title(None, &site(), Some("products")), "www.example.com — products");
        assert_eq!(title(Some("Example Shop"), &site(), None), "Example Shop");
        assert_eq!(title(Some("Example Shop"), &site(), Some("blog")), "Example Shop — blog");
    }

    #[test]
    fn rows_become_items_records_then_tombstones() {
        let read = FeedRead {
            entries: vec![FeedEntry { id: 3, loc: "https://x.test/a".into(), lastmod: None, changed_us: 5 }],
            deleted: vec![FeedDeleted { loc: "https://x.test/b".into(), removed_us: 7 }],
        };
        assert_eq!(
            items(read),
            [
                FeedItem::Entry { loc: "https://x.test/a".into(), lastmod: None, changed_us: 5 },
                FeedItem::Deleted { loc: "https://x.test/b".into(), removed_us: 7 },
            ]
        );
    }
}
