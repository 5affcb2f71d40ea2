//! One flush interval's telemetry in memory: fetches merged per (site, resource, crawler, trust) and verified page
//! reads per (site, page, crawler, version), as the store merges them, within a bound on distinct keys whatever the
//! traffic. Pure.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::crawler::{Crawler, Trust};
use crate::store::{FetchRecord, PageRead};

/// One answered sitemap fetch by a client that names a crawler, as the serving code saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetch {
    pub at_us: i64,
    pub site: i64,
    pub crawler: Crawler,
    /// The client's address (the peer's, or a trusted proxy's word for it); `None` when it cannot be told.
    pub addr: Option<std::net::IpAddr>,
    /// The file's canonical name without `.gz`.
    pub resource: Box<str>,
    /// The page answered and the version served (its `modified_us`), for a page's XML or text form.
    pub page: Option<(i64, i64)>,
    pub status: u16,
    pub conditional: bool,
    pub etag: Box<str>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FetchKey {
    site: i64,
    resource: Box<str>,
    crawler: Crawler,
    trust: Trust,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ReadKey {
    site: i64,
    page: i64,
    crawler: Crawler,
    version_us: i64,
}

#[derive(Clone, Debug)]
struct FetchAgg {
    page: Option<i64>,
    first_us: i64,
    last_us: i64,
    last_status: u16,
    last_conditional: bool,
    last_etag: Box<str>,
    fetches: i64,
    not_modified: i64,
}

/// What was recorded since the last flush, at most `max_keys` fetch keys and as many read keys.
#[derive(Debug)]
pub struct Aggregate {
    fetches: HashMap<FetchKey, FetchAgg>,
    reads: HashMap<ReadKey, i64>,
    max_keys: usize,
    /// Fetches not recorded because the table was full (counted once flushed).
    pub dropped: u64,
}

impl Aggregate {
    pub fn new(max_keys: usize) -> Self {
        Self { fetches: HashMap::new(), reads: HashMap::new(), max_keys, dropped: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.fetches.is_empty() && self.reads.is_empty()
    }

    /// Distinct keys held (fetches, reads).
    pub fn len(&self) -> (usize, usize) {
        (self.fetches.len(), self.reads.len())
    }

    /// Adds one fetch with its verdict. A verified fetch of a page is also a read of the version it was served.
    pub fn add(&mut self, fetch: &Fetch, trust: Trust) {
        let key = FetchKey { site: fetch.site, resource: fetch.resource.clone(), crawler: fetch.crawler, trust };
        let full = self.fetches.len() >= self.max_keys;
        match self.fetches.entry(key) {
            Entry::Occupied(mut held) => {
                let held = held.get_mut();
                held.first_us = held.first_us.min(fetch.at_us);
                if fetch.at_us >= held.last_us {
                    held.last_us = fetch.at_us;
                    held.last_status = fetch.status;
                    held.last_conditional = fetch.conditional;
                    held.last_etag = fetch.etag.clone();
                }
                held.fetches += 1;
                held.not_modified += i64::from(fetch.status == 304);
            }
            Entry::Vacant(_) if full => {
                self.dropped += 1;
                return;
            }
            Entry::Vacant(slot) => {
                slot.insert(FetchAgg {
                    page: fetch.page.map(|(page, _)| page),
                    first_us: fetch.at_us,
                    last_us: fetch.at_us,
                    last_status: fetch.status,
                    last_conditional: fetch.conditional,
                    last_etag: fetch.etag.clone(),
                    fetches: 1,
                    not_modified: i64::from(fetch.status == 304),
                });
            }
        }
        if trust == Trust::Verified
            && let Some((page, version_us)) = fetch.page
        {
            let key = ReadKey { site: fetch.site, page, crawler: fetch.crawler, version_us };
            let full = self.reads.len() >= self.max_keys;
            match self.reads.entry(key) {
                Entry::Occupied(mut first) => *first.get_mut() = (*first.get()).min(fetch.at_us),
                Entry::Vacant(_) if full => {}
                Entry::Vacant(slot) => {
                    slot.insert(fetch.at_us);
                }
            }
        }
    }

    /// Everything held, as the store takes it (sorted by key, so that concurrent flushes lock rows in one order),
    /// leaving this empty.
    pub fn take(&mut self) -> (Vec<FetchRecord>, Vec<PageRead>) {
        let mut fetches: Vec<FetchRecord> = self
            .fetches
            .drain()
            .map(|(k, a)| FetchRecord {
                site: k.site,
                resource: k.resource.into(),
                page_id: a.page,
                crawler: k.crawler.name().to_owned(),
                trust: k.trust.name().to_owned(),
                first_us: a.first_us,
                last_us: a.last_us,
                last_status: i32::from(a.last_status),
                last_conditional: a.last_conditional,
                last_etag: a.last_etag.into(),
                fetches: a.fetches,
                not_modified: a.not_modified,
            })
            .collect();
        fetches.sort_by(|a, b| {
            (a.site, &a.resource, &a.crawler, &a.trust).cmp(&(b.site, &b.resource, &b.crawler, &b.trust))
        });
        let mut reads: Vec<PageRead> = self
            .reads
            .drain()
            .map(|(k, first_us)| PageRead {
                site: k.site,
                page_id: k.page,
                crawler: k.crawler.name().to_owned(),
                version_us: k.version_us,
                first_us,
            })
            .collect();
        reads.sort_by(|a, b| {
            (a.site, a.page_id, &a.crawler, a.version_us).cmp(&(b.site, b.page_id, &b.crawler, b.version_us))
        });
        (fetches, reads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(at_us: i64, resource: &str, page: Option<(i64, i64)>, status: u16) -> Fetch {
        Fetch {
            at_us,
            site: 1,
            crawler: Crawler::Googlebot,
            addr: None,
            resource: resource.into(),
            page,
            status,
            conditional: status == 304,
            etag: format!("\"e{at_us}\"").into(),
        }
    }

    #[test]
    fn fetches_merge_as_the_store_does() {
        let mut agg = Aggregate::new(100);
        agg.add(&fetch(20, "sitemap-1.xml", Some((1, 5)), 200), Trust::Verified);
        // Arrives later but happened earlier: counts, moves `first`, leaves the last answer alone.
        agg.add(&fetch(10, "sitemap-1.xml", Some((1, 5)), 304), Trust::Verified);
        agg.add(&fetch(30, "sitemap-1.xml", Some((1, 5)), 304), Trust::Claimed);
        let (fetches, reads) = agg.take();
        assert_eq!(fetches.len(), 2);
        let verified = &fetches.iter().find(|f| f.trust == "verified").unwrap();
        assert_eq!((verified.first_us, verified.last_us, verified.last_status), (10, 20, 200));
        assert_eq!((verified.fetches, verified.not_modified, verified.last_etag.as_str()), (2, 1, "\"e20\""));
        assert_eq!(verified.page_id, Some(1));
        // One read of version 5, first at 10; the claimed fetch reads nothing.
        assert_eq!(
            reads,
            vec![PageRead { site: 1, page_id: 1, crawler: "googlebot".into(), version_us: 5, first_us: 10 }]
        );
        assert!(agg.is_empty());
    }

    #[test]
    fn only_a_verified_fetch_of_a_page_is_a_read() {
        let mut agg = Aggregate::new(100);
        agg.add(&fetch(10, "sitemap.xml", None, 200), Trust::Verified);
        agg.add(&fetch(10, "sitemap-2.xml", Some((2, 7)), 200), Trust::Claimed);
        agg.add(&fetch(10, "sitemap-2.xml", Some((2, 7)), 200), Trust::Unknown);
        assert_eq!(agg.take().1, vec![]);
    }

    #[test]
    fn distinct_keys_are_bounded_and_what_is_held_still_counts() {
        let mut agg = Aggregate::new(3);
        for n in 0..1000 {
            agg.add(&fetch(n, &format!("sitemap-{}.xml", n % 10), Some((n % 10, n)), 200), Trust::Verified);
        }
        assert_eq!(agg.len(), (3, 3));
        assert_eq!(agg.dropped, 700);
        let (fetches, _) = agg.take();
        assert_eq!(fetches.iter().map(|f| f.fetches).sum::<i64>(), 300);
    }
}
