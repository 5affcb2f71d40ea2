//! Rendered gzip pages, kept in memory by page state: a page is read and compressed once per version, however
//! many crawlers fetch it. Bounded in bytes (moka's size-aware TinyLFU), and per process: the ETags come from the
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

/// Everything a page's bytes are a function of (with the gzip level, fixed per process): its site, and its state,
/// the way its gzip is made included.
type Key = (i64, i64, i64, i64, i64, i64, i32);

fn key(site: i64, p: &PageState) -> Key {
    (site, p.id, p.version, p.modified_us, p.url_count, p.byte_size, p.gzip.code())
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

    pub async fn get(&self, site: i64, page: &PageState) -> Option<Rendered> {
        self.inner.as_ref()?.get(&key(site, page)).await
    }

    /// The page from the cache, or rendered by `render`: concurrent misses for one page wait for a single
    /// render. An error is not cached; every waiter gets it.
    pub async fn get_or_render<F>(
        &self,
        site: i64,
        page: &PageState,
        render: F,
    ) -> Result<Rendered, Arc<crate::error::ApiError>>
    where
        F: Future<Output = Result<Rendered, crate::error::ApiError>>,
    {
        let Some(cache) = &self.inner else { return render.await.map_err(Arc::new) };
        let rendered = cache.try_get_with(key(site, page), render).await?;
        // A snapshot older than the state asked for (a read replica behind the page table as last read) is sent
        // with its own validators, but not kept under the newer state: the next request renders it again.
        if rendered.state.version < page.version {
            cache.invalidate(&key(site, page)).await;
        }
        Ok(rendered)
    }

    /// Forgets `page`'s render in `site`, if cached (a state no longer current).
    pub async fn invalidate(&self, site: i64, page: &PageState) {
        if let Some(cache) = &self.inner {
            cache.invalidate(&key(site, page)).await;
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
