//! The news sitemap (`/sitemap-news.xml[.gz]`): the entries whose news was published within the window
//! (`sitemaps.news_window`), newest first, at most [`MAX_NEWS`] (Google News' limits).
//!
//! It is built from one read of the store through the publication-date index (O(its entries)), at most once per
//! read of the page table ([`super::Directory`]), and both its validators are functions of what it was built from:
//! the ETag is a digest of its bytes, and Last-Modified is the later of the last change to an entry with news
//! (`news_state`, moved by every write that creates, changes or deletes one), the moment the last article left
//! the window (its publication date plus the window) and the moment the newest entered it (its publication date:
//! an article dated ahead is listed only once its time has come). So an identical re-send changes nothing, an article ageing
//! out changes both, and replicas whose clocks agree to the second answer alike (the window starts on a whole
//! second).

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::page::render::{NEWS_HEAD, URLSET_TAIL, write_news_url};
use crate::store::{NewsRead, Result, StoreReads};

/// Google News reads at most 1,000 articles from a news sitemap.
pub const MAX_NEWS: u32 = 1000;

const MICROS_PER_HOUR: i64 = 3_600_000_000;

/// The news sitemap as built from one read.
#[derive(Debug)]
pub struct NewsSitemap {
    pub identity: Bytes,
    pub gzip: Bytes,
    /// A digest of `identity`: the representations' ETags are made from it.
    pub digest: String,
    pub modified_us: i64,
    pub count: usize,
}

/// The news sitemap of one read, and its Last-Modified, which the index folds into its own whether or not the
/// sitemap has articles (so that the index's Last-Modified never goes back when the last one leaves).
#[derive(Debug)]
pub struct NewsState {
    /// `None` when no article is in the window.
    pub sitemap: Option<NewsSitemap>,
    /// The latest of the last change to an entry with news, the last article leaving the window and the newest
    /// entering it (0 when there never was news).
    pub modified_us: i64,
}

/// The window for a read at `now_us`, both ends included: from `hours` before `now_us` truncated to the second,
/// to that second. An article dated ahead (published on a schedule) enters the window when its time comes.
pub fn window(now_us: i64, hours: u64) -> (i64, i64) {
    let end = now_us.div_euclid(1_000_000) * 1_000_000;
    (end - hours as i64 * MICROS_PER_HOUR, end)
}

/// Reads and renders `site`'s news sitemap as of `now_us`.
pub async fn build(store: &dyn StoreReads, site: i64, now_us: i64, hours: u64, level: u32) -> Result<NewsState> {
    let (since, until) = window(now_us, hours);
    let read = store.news(site, since, until, MAX_NEWS).await?;
    let modified_us = modified(&read, hours);
    let Some(identity) = render(&read) else { return Ok(NewsState { sitemap: None, modified_us }) };
    let gzip = super::stream::gzip_bytes(identity.clone(), level)
        .await
        .map_err(|e| crate::store::StoreError::Other(sqlx::Error::Io(e)))?;
    let digest: String = Sha256::digest(&identity)[..16].iter().map(|b| format!("{b:02x}")).collect();
    let sitemap = NewsSitemap { identity, gzip, digest, modified_us, count: read.entries.len() };
    Ok(NewsState { sitemap: Some(sitemap), modified_us })
}

/// The Last-Modified of a read: the latest of the last change to an entry with news, the moment the last article
/// left the window (its date plus the window) and the moment the newest entered it (its date).
fn modified(read: &NewsRead, hours: u64) -> i64 {
    let left_window = read.newest_before_us.map_or(0, |us| us + hours as i64 * MICROS_PER_HOUR);
    read.changed_us.max(left_window).max(read.newest_us.unwrap_or(0))
}

/// The document, or `None` when there are no entries.
fn render(read: &NewsRead) -> Option<Bytes> {
    if read.entries.is_empty() {
        return None;
    }
    let mut body = Vec::with_capacity(NEWS_HEAD.len() + URLSET_TAIL.len() + read.entries.len() * 512);
    body.extend_from_slice(NEWS_HEAD.as_bytes());
    for (loc, news) in &read.entries {
        write_news_url(&mut body, loc, news);
    }
    body.extend_from_slice(URLSET_TAIL.as_bytes());
    Some(Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ext::{News, Publication};

    fn news(title: &str) -> News {
        News {
            publication: Publication { name: "The Example Times".into(), language: "en".into() },
            publication_date: "2026-11-22T08:00:00Z".into(),
            title: title.into(),
        }
    }

    #[test]
    fn the_window_ends_and_starts_on_a_whole_second() {
        assert_eq!(window(10_999_999, 1), (10_000_000 - MICROS_PER_HOUR, 10_000_000));
        assert_eq!(window(10_000_000, 1), window(10_999_999, 1));
    }

    #[test]
    fn an_empty_window_has_no_sitemap_but_keeps_its_date() {
        assert!(render(&NewsRead::default()).is_none());
        assert_eq!(modified(&NewsRead::default(), 48), 0, "never any news: nothing moves the index");
        let emptied = NewsRead { changed_us: 5, newest_before_us: Some(7), ..NewsRead::default() };
        assert!(render(&emptied).is_none());
        assert_eq!(modified(&emptied, 1), 7 + MICROS_PER_HOUR, "the last article left then");
    }

    #[test]
    fn last_modified_is_the_later_of_a_change_and_an_article_leaving_the_window() {
        let entries = vec![("https://x.test/a".to_owned(), news("A & B"))];
        let read = NewsRead { entries: entries.clone(), newest_us: Some(3), changed_us: 5, newest_before_us: None };
        let body = render(&read).unwrap();
        assert_eq!(modified(&read, 1), 5);
        let scheduled =
            NewsRead { entries: entries.clone(), newest_us: Some(9), changed_us: 5, newest_before_us: None };
        assert_eq!(modified(&scheduled, 1), 9, "an article dated ahead entering the window");
        let text = std::str::from_utf8(&body).unwrap();
        assert!(text.starts_with(NEWS_HEAD) && text.ends_with(URLSET_TAIL), "{text}");
        assert!(text.contains("<news:title>A &amp; B</news:title>"), "{text}");
        let read = NewsRead { entries, newest_us: Some(3), changed_us: 5, newest_before_us: Some(7) };
        assert_eq!(modified(&read, 1), 7 + MICROS_PER_HOUR);
    }
}
