//! Rendered gzip pages, kept in memory by page state and form (XML or text): a page is read and compressed once
//! per version and form, however many crawlers fetch it. Bounded in bytes (moka's size-aware TinyLFU), and per process: the ETags come from the
//! database alone, so replicas with different cache contents still agree.

use std::sync::Arc;

use bytes::Bytes;

use crate::page::PageState;

/// A rendered page and the state it was rendered from, which may be newer than the state it was looked up by
/// (when the directory was behind the database): the answer's validators come from this one.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub state: PageState,
    pub gzip: Bytes,
}

/// A page's form: its `<urlset>` (`/sitemap-N.xml`) or its text sitemap (`/sitemap-N.txt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Xml,
    Text,
}

/// Everything a page's bytes are a function of (with the gzip level, fixed per process): its site, its state (the
/// way its gzip is made included), and its form.
type Key = (i64, i64, i64, i64, i64, i64, i32, Kind);

fn key(site: i64, p: &PageState, kind: Kind) -> Key {
    (site, p.id, p.version, p.modified_us, p.url_count, p.byte_size, p.gzip.code(), kind)
}

#[derive(Clone)]
pub struct PageCache {
    /// `None` when caching is off (`cache_bytes = 0`).
    inner: Option<moka::future::Cache<Key, Rendered>>,
}

impl PageCache {
    pub fn new(max_bytes: u64) -> Self {
        let inner = (max_bytes > 0).then(|| {
            moka::future::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, r: &Rendered| u32::try_from(r.gzip.len()).unwrap_or(u32::MAX))
                .build()
        });
        Self { inner }
    }

    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The page's XML render, if cached.
    pub async fn get(&self, site: i64, page: &PageState) -> Option<Rendered> {
        self.get_as(Kind::Xml, site, page).await
    }

    /// The page's render in form `kind`, if cached.
    pub async fn get_as(&self, kind: Kind, site: i64, page: &PageState) -> Option<Rendered> {
        self.inner.as_ref()?.get(&key(site, page, kind)).await
    }

    /// The page's XML from the cache, or rendered by `render` (see [`PageCache::get_or_render_as`]).
    pub async fn get_or_render<F>(
        &self,
        site: i64,
        page: &PageState,
        render: F,
    ) -> Result<Rendered, Arc<crate::error::ApiError>>
    where
        F: Future<Output = Result<Rendered, crate::error::ApiError>>,
    {
        self.get_or_render_as(Kind::Xml, site, page, render).await
    }

    /// The page in form `kind` from the cache, or rendered by `render`: concurrent misses for one page and form
    /// wait for a single render. An error is not cached; every waiter gets it.
    pub async fn get_or_render_as<F>(
        &self,
        kind: Kind,
        site: i64,
        page: &PageState,
        render: F,
    ) -> Result<Rendered, Arc<crate::error::ApiError>>
    where
        F: Future<Output = Result<Rendered, crate::error::ApiError>>,
    {
        let Some(cache) = &self.inner else { return render.await.map_err(Arc::new) };
        let rendered = cache.try_get_with(key(site, page, kind), render).await?;
        // A snapshot older than the state asked for (a read replica behind the page table as last read) is sent
        // with its own validators, but not kept under the newer state: the next request renders it again.
        if rendered.state.version < page.version {
            cache.invalidate(&key(site, page, kind)).await;
        }
        Ok(rendered)
    }

    /// Forgets `page`'s renders in `site`, in both forms, if cached (a state no longer current).
    pub async fn invalidate(&self, site: i64, page: &PageState) {
        if let Some(cache) = &self.inner {
            cache.invalidate(&key(site, page, Kind::Xml)).await;
            cache.invalidate(&key(site, page, Kind::Text)).await;
        }
    }

    /// Bytes held now (moka settles its counts lazily; for metrics and tests).
    pub async fn weighted_size(&self) -> u64 {
        match &self.inner {
            Some(cache) => {
                cache.run_pending_tasks().await;
                cache.weighted_size()
            }
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn page(version: i64) -> PageState {
        PageState { id: 1, url_count: 1, byte_size: 100, version, modified_us: version, ..PageState::default() }
    }

    #[tokio::test]
    async fn concurrent_misses_render_once_and_versions_do_not_mix() {
        let cache = PageCache::new(1 << 20);
        let renders = Arc::new(AtomicUsize::new(0));
        let fetch = |version: i64| {
            let cache = cache.clone();
            let renders = renders.clone();
            async move {
                cache
                    .get_or_render(1, &page(version), async {
                        renders.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        Ok(Rendered { state: page(version), gzip: Bytes::from(vec![version as u8; 10]) })
                    })
                    .await
                    .unwrap()
            }
        };
        let all = futures_util::future::join_all((0..8).map(|_| fetch(1))).await;
        assert_eq!(renders.load(Ordering::SeqCst), 1);
        assert!(all.iter().all(|r| r.gzip[0] == 1));
        assert_eq!(fetch(2).await.gzip[0], 2, "a new version is a new entry");
        assert_eq!(renders.load(Ordering::SeqCst), 2);
        assert_eq!(cache.get(1, &page(1)).await.map(|r| r.gzip[0]), Some(1));
    }

    #[tokio::test]
    async fn a_render_older_than_the_state_asked_for_is_not_kept() {
        let cache = PageCache::new(1 << 20);
        let older = Rendered { state: page(1), gzip: Bytes::from_static(b"old") };
        let got = cache.get_or_render(1, &page(2), async { Ok(older) }).await.unwrap();
        assert_eq!(got.state.version, 1, "sent with the state it was rendered from");
        assert!(cache.get(1, &page(2)).await.is_none(), "not kept as version 2");
        let newer = Rendered { state: page(3), gzip: Bytes::from_static(b"new") };
        cache.get_or_render(1, &page(2), async { Ok(newer) }).await.unwrap();
        assert!(cache.get(1, &page(2)).await.is_some(), "a newer snapshot is kept (it is what the next read shows)");
    }

    #[tokio::test]
    async fn a_pages_forms_are_kept_apart_and_forgotten_together() {
        let cache = PageCache::new(1 << 20);
        let render =
            |bytes: &'static [u8]| async move { Ok(Rendered { state: page(1), gzip: Bytes::from_static(bytes) }) };
        cache.get_or_render(1, &page(1), render(b"xml")).await.unwrap();
        let text = cache.get_or_render_as(Kind::Text, 1, &page(1), render(b"text")).await.unwrap();
        assert_eq!(&text.gzip[..], b"text", "not the XML's render");
        assert_eq!(cache.get(1, &page(1)).await.map(|r| r.gzip), Some(Bytes::from_static(b"xml")));
        assert_eq!(cache.get_as(Kind::Text, 1, &page(1)).await.map(|r| r.gzip), Some(Bytes::from_static(b"text")));
        cache.invalidate(1, &page(1)).await;
        assert!(cache.get(1, &page(1)).await.is_none());
        assert!(cache.get_as(Kind::Text, 1, &page(1)).await.is_none());
    }

    #[tokio::test]
    async fn stays_within_its_size_and_can_be_off() {
        let cache = PageCache::new(1000);
        for version in 0..20 {
            let rendered = Rendered { state: page(version), gzip: Bytes::from(vec![0; 300]) };
            cache.get_or_render(1, &page(version), async { Ok(rendered) }).await.unwrap();
        }
        assert!(cache.weighted_size().await <= 1000);
        let off = PageCache::new(0);
        assert!(!off.enabled());
        let r = off.get_or_render(1, &page(1), async { Ok(Rendered { state: page(1), gzip: Bytes::new() }) }).await;
        assert!(r.is_ok() && off.get(1, &page(1)).await.is_none());
    }
}
