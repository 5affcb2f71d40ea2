//! WebSub's delivery rows (`HubOutbox`), on both backends: a claim adds the row and holds it for its lease, only
//! an owed digest of a due row is claimed, a delivery records its digest and holds the row for the debounce
//! interval, a failure counts an attempt and holds it for the retry delay, a claim whose lease ran out settles
//! nothing, and two stores on one Postgres claim one row once.

use std::sync::Arc;
use std::time::Duration;

use sitemapd::store::{HubClaim, HubOutbox, HubRow, HubSettle, Store};

use crate::both_backends;
use crate::support::{Backend, TestApp};

const FEED: &str = "/feed.atom";
const HUB: &str = "https://hub.example/";
const LEASE: Duration = Duration::from_secs(30);
const HOUR: Duration = Duration::from_secs(3600);

async fn store(b: Backend) -> (TestApp, Arc<dyn Store>) {
    let app = TestApp::spawn(b, &[]).await;
    let store = app.store.clone();
    (app, store)
}

async fn claim(store: &dyn HubOutbox, digest: &str, lease: Duration) -> Option<HubClaim> {
    store.hub_claim(1, FEED, HUB, digest, lease).await.unwrap()
}

async fn row(store: &dyn HubOutbox) -> HubRow {
    let rows = store.hub_rows(1).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows.into_iter().next().unwrap()
}

/// The first claim adds the row and holds it for its lease: a second claim, of any digest, gets nothing.
async fn a_claim_adds_the_row_and_holds_it(b: Backend) {
    let (_app, store) = store(b).await;
    assert!(store.hub_rows(1).await.unwrap().is_empty());
    let first = claim(&*store, "d1", LEASE).await.expect("a new row is due");
    assert_eq!((first.site, first.feed.as_str(), first.hub.as_str(), first.digest.as_str()), (1, FEED, HUB, "d1"));
    assert_eq!(first.attempts, 0);
    assert!(claim(&*store, "d1", LEASE).await.is_none(), "held by the first claim");
    assert!(claim(&*store, "d2", LEASE).await.is_none(), "held, whatever the digest");
    let held = row(&*store).await;
    assert_eq!(held.delivered, None);
    assert!(held.wait > Duration::from_secs(20) && held.wait <= LEASE, "{held:?}");
    // Another feed, hub or site is a row of its own.
    assert!(store.hub_claim(1, "/feed-news.atom", HUB, "d1", LEASE).await.unwrap().is_some());
    assert!(store.hub_claim(1, FEED, "https://other.example/", "d1", LEASE).await.unwrap().is_some());
    assert_eq!(store.hub_rows(1).await.unwrap().len(), 3);
    assert!(store.hub_rows(2).await.unwrap().is_empty());
}

/// A delivery records its digest and holds the row for the interval; that digest is never claimed again, a new
/// one once the interval is over.
async fn a_delivery_records_the_digest_and_debounces(b: Backend) {
    let (_app, store) = store(b).await;
    let c = claim(&*store, "d1", LEASE).await.unwrap();
    assert!(store.hub_settle(&c, HubSettle::Delivered { interval: HOUR }).await.unwrap());
    let delivered = row(&*store).await;
    assert_eq!(delivered.delivered.as_deref(), Some("d1"));
    assert_eq!(delivered.attempts, 0);
    assert!(delivered.wait > HOUR - Duration::from_secs(60), "{delivered:?}");
    assert!(claim(&*store, "d2", LEASE).await.is_none(), "within the interval");
    // Settling twice changes nothing: the claim no longer holds the row.
    assert!(!store.hub_settle(&c, HubSettle::Failed { delay: Duration::ZERO }).await.unwrap());
    assert_eq!(row(&*store).await.delivered.as_deref(), Some("d1"));

    // With no interval: the delivered digest is not owed, another one is.
    let (_app, store) = self::store(b).await;
    let c = claim(&*store, "d1", LEASE).await.unwrap();
    assert!(store.hub_settle(&c, HubSettle::Delivered { interval: Duration::ZERO }).await.unwrap());
    assert_eq!(row(&*store).await.wait, Duration::ZERO);
    assert!(claim(&*store, "d1", LEASE).await.is_none(), "delivered already");
    let c = claim(&*store, "d2", LEASE).await.expect("a new digest is owed");
    assert!(store.hub_settle(&c, HubSettle::Delivered { interval: Duration::ZERO }).await.unwrap());
    assert_eq!(row(&*store).await.delivered.as_deref(), Some("d2"));
}

/// A failure counts an attempt and holds the row for the delay; the delivered digest stays the one before.
async fn a_failure_counts_an_attempt_and_waits(b: Backend) {
    let (_app, store) = store(b).await;
    let c = claim(&*store, "d1", LEASE).await.unwrap();
    assert!(store.hub_settle(&c, HubSettle::Delivered { interval: Duration::ZERO }).await.unwrap());
    let c = claim(&*store, "d2", LEASE).await.unwrap();
    assert!(store.hub_settle(&c, HubSettle::Failed { delay: HOUR }).await.unwrap());
    let failed = row(&*store).await;
    assert_eq!((failed.delivered.as_deref(), failed.attempts), (Some("d1"), 1));
    assert!(failed.wait > HOUR - Duration::from_secs(60), "{failed:?}");
    assert!(claim(&*store, "d2", LEASE).await.is_none(), "within the retry delay");

    let (_app, store) = self::store(b).await;
    for attempt in 0..3 {
        let c = claim(&*store, "d1", LEASE).await.expect("due again at once");
        assert_eq!(c.attempts, attempt);
        assert!(store.hub_settle(&c, HubSettle::Failed { delay: Duration::ZERO }).await.unwrap());
    }
    let c = claim(&*store, "d1", LEASE).await.unwrap();
    assert!(store.hub_settle(&c, HubSettle::Delivered { interval: Duration::ZERO }).await.unwrap());
    let delivered = row(&*store).await;
    assert_eq!((delivered.delivered.as_deref(), delivered.attempts), (Some("d1"), 0), "a delivery resets them");
}

/// A claim whose lease ran out is taken by the next claim; the first one's settle then changes nothing.
async fn an_expired_lease_passes_the_row_on(b: Backend) {
    let (_app, store) = store(b).await;
    let dead = claim(&*store, "d1", Duration::ZERO).await.unwrap();
    let next = claim(&*store, "d1", LEASE).await.expect("the lease ran out");
    assert_ne!(dead.id, next.id);
    assert!(!store.hub_settle(&dead, HubSettle::Delivered { interval: HOUR }).await.unwrap());
    assert_eq!(row(&*store).await.delivered, None);
    assert!(store.hub_settle(&next, HubSettle::Delivered { interval: HOUR }).await.unwrap());
    assert_eq!(row(&*store).await.delivered.as_deref(), Some("d1"));
}

both_backends!(
    a_claim_adds_the_row_and_holds_it,
    a_delivery_records_the_digest_and_debounces,
    a_failure_counts_an_attempt_and_waits,
    an_expired_lease_passes_the_row_on,
);

/// Two stores (two processes' pools) on one Postgres claim one owed row at once, many times over: exactly one
/// claim wins each time, new row or old.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn two_stores_on_one_postgres_claim_a_row_once() {
    let app = TestApp::spawn(Backend::Postgres, &[]).await;
    let replica = app.another_process().await;
    let stores = [app.store.clone(), replica.store.clone()];
    for round in 0..40 {
        let digest = format!("d{round}");
        let feed = format!("/feed-{}.atom", round % 4);
        let tries = (0..8).map(|i| {
            let (store, digest, feed) = (stores[i % 2].clone(), digest.clone(), feed.clone());
            tokio::spawn(async move { store.hub_claim(1, &feed, HUB, &digest, LEASE).await.unwrap() })
        });
        let mut won = Vec::new();
        for t in tries {
            won.extend(t.await.unwrap());
        }
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        let c = &won[0];
        assert!(stores[0].hub_settle(c, HubSettle::Delivered { interval: Duration::ZERO }).await.unwrap());
    }
}
