//! WebSub publishing against a fake hub on the loopback interface (`support::hub`), which records each notification
//! and fetches the feed it names as a real hub does.
//!
//! The publisher's own behaviour, with the feeds' digests given by the test (`Stub`): a failure (5xx) is retried
//! with backoff until delivered, a redirect is a failure and never followed, a burst of changes is told once per
//! interval, two publishers on one Postgres tell a change once. The whole path, with real writes and the real
//! feeds, is further down; `kill -9` with a notification owed is in `process`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sitemapd::websub::{FeedDigests, FeedState, Publisher, PublisherOptions, Target};
use sitemapd::worker::{self, Running};

use crate::both_backends;
use crate::observability::sum;
use crate::support::hub::FakeHub;
use crate::support::{Backend, TestApp, eventually};

const FEED: &str = "/feed.atom";
/// A feed URL nothing answers (the discard port): the fake hub's fetch of it fails, which these tests ignore.
const FEED_URL: &str = "http://127.0.0.1:9/feed.atom";

/// The feeds of site 1 as the test sets them: one feed, whose digest and the site's change counter move together
/// ([`Stub::change`]), shared by a stub's twins (two processes reading one database). Each stub counts its
/// publisher's reads of the counter: one more than a look's, so two reads after a change mean the look that saw it
/// has ended.
#[derive(Default)]
struct Stub {
    feed: Arc<Mutex<(i64, String)>>,
    reads: AtomicUsize,
}

impl Stub {
    fn new(digest: &str) -> Arc<Self> {
        Arc::new(Self { feed: Arc::new(Mutex::new((0, digest.to_owned()))), ..Self::default() })
    }

    /// Another reader of the same feed.
    fn twin(&self) -> Arc<Self> {
        Arc::new(Self { feed: self.feed.clone(), ..Self::default() })
    }

    fn change(&self, digest: &str) {
        let mut feed = self.feed.lock().unwrap();
        *feed = (feed.0 + 1, digest.to_owned());
    }

    /// Waits until this stub's publisher has ended a look begun after now.
    async fn looked(&self) {
        let from = self.reads.load(Ordering::SeqCst);
        eventually("the publisher looked again", || async { self.reads.load(Ordering::SeqCst) >= from + 2 }).await;
    }
}

#[async_trait]
impl FeedDigests for Stub {
    async fn changes(&self, _site: i64) -> anyhow::Result<i64> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.feed.lock().unwrap().0)
    }

    async fn feeds(&self, _site: i64) -> anyhow::Result<Vec<FeedState>> {
        let digest = self.feed.lock().unwrap().1.clone();
        Ok(vec![FeedState { path: FEED.to_owned(), public_url: FEED_URL.to_owned(), digest }])
    }
}

fn options(interval: Duration) -> PublisherOptions {
    PublisherOptions { interval, poll: Duration::from_millis(20), timeout: Duration::from_secs(5) }
}

fn publisher(app: &TestApp, feeds: Arc<dyn FeedDigests>, hub: &FakeHub, interval: Duration) -> Running {
    let target = Target { site_id: 1, site: "default".to_owned(), hubs: vec![url::Url::parse(&hub.url).unwrap()] };
    worker::spawn(Publisher::new(app.store.clone(), feeds, vec![target], options(interval)).unwrap())
}

/// The hub's label in the metrics: its host and port.
fn label(hub: &FakeHub) -> String {
    let url = url::Url::parse(&hub.url).unwrap();
    format!("{}:{}", url.host_str().unwrap(), url.port().unwrap())
}

async fn told(app: &TestApp, hub: &FakeHub, outcome: &str) -> f64 {
    let label = label(hub);
    sum(&app.scrape().await, "sitemapd_websub_notifications_total", &[("hub", &label), ("outcome", outcome)])
}

/// A notification the hub answers 503, then 500, is sent again after each (the backoff, from the interval) and
/// delivered by the third; each outcome is counted under the hub's host.
async fn a_failed_notification_is_sent_again_until_delivered(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let hub = FakeHub::start(&[503, 500]);
    let stub = Stub::new("d1");
    let running = publisher(&app, stub.clone(), &hub, Duration::from_millis(50));
    eventually("the hub took a notification", || async { !hub.accepted().is_empty() }).await;
    stub.looked().await;
    let seen = hub.notifications();
    let statuses: Vec<u16> = seen.iter().map(|n| n.status).collect();
    assert_eq!(statuses, [503, 500, 204]);
    for n in &seen {
        assert_eq!((n.mode.as_str(), n.url.as_str()), ("publish", FEED_URL));
        assert_eq!(n.content_type, "application/x-www-form-urlencoded");
        assert!(n.user_agent.starts_with("sitemapd/"), "{n:?}");
    }
    assert_eq!(told(&app, &hub, "server_error").await, 2.0);
    assert_eq!(told(&app, &hub, "delivered").await, 1.0);
    let rows = app.store.hub_rows(1).await.unwrap();
    assert_eq!((rows[0].delivered.as_deref(), rows[0].attempts), (Some("d1"), 0));
    running.stop(Duration::from_secs(5)).await;
}

/// A 302 is a failure: the place it points to gets no request, and the notification is sent to the hub again.
async fn a_redirect_is_never_followed(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let hub = FakeHub::start(&[302, 307]);
    let stub = Stub::new("d1");
    let running = publisher(&app, stub.clone(), &hub, Duration::from_millis(50));
    eventually("the hub took a notification", || async { !hub.accepted().is_empty() }).await;
    let statuses: Vec<u16> = hub.notifications().iter().map(|n| n.status).collect();
    assert_eq!(statuses, [302, 307, 204]);
    assert_eq!(hub.moved(), 0, "a redirect was followed to {}", hub.moved_url);
    assert_eq!(told(&app, &hub, "redirected").await, 2.0);
    assert_eq!(told(&app, &hub, "delivered").await, 1.0);
    running.stop(Duration::from_secs(5)).await;
}

/// One change is told at once; a burst of changes after it, within the interval, is owed and not told (the row
/// waits out the interval) however many looks see it.
async fn a_burst_of_changes_is_told_once_per_interval(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let hub = FakeHub::start(&[]);
    let stub = Stub::new("d0");
    let running = publisher(&app, stub.clone(), &hub, Duration::from_secs(3600));
    eventually("the first state is told", || async { hub.notifications().len() == 1 }).await;
    for i in 1..=20 {
        stub.change(&format!("d{i}"));
        stub.looked().await;
    }
    assert_eq!(hub.notifications().len(), 1, "{:?}", hub.notifications());
    let rows = app.store.hub_rows(1).await.unwrap();
    assert_eq!(rows[0].delivered.as_deref(), Some("d0"));
    assert!(rows[0].wait > Duration::from_secs(3000), "{rows:?}");
    running.stop(Duration::from_secs(5)).await;
}

both_backends!(
    a_failed_notification_is_sent_again_until_delivered,
    a_redirect_is_never_followed,
    a_burst_of_changes_is_told_once_per_interval,
);

/// Two publishers (two processes' stores) on one Postgres, reading the same feeds: each change is told once, by
/// one of them, however they meet at the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn two_publishers_on_one_postgres_tell_a_change_once() {
    let app = TestApp::spawn(Backend::Postgres, &[]).await;
    let replica = app.another_process().await;
    let hub = FakeHub::start(&[]);
    let one = Stub::new("d0");
    let two = one.twin();
    // A zero interval: every change may be told at once, so only the claim keeps the two from both telling it.
    let running =
        [publisher(&app, one.clone(), &hub, Duration::ZERO), publisher(&replica, two.clone(), &hub, Duration::ZERO)];
    for i in 1..=10 {
        eventually("the change is told", || async { hub.notifications().len() == i }).await;
        one.looked().await;
        two.looked().await;
        assert_eq!(hub.notifications().len(), i, "told twice: {:?}", hub.notifications());
        one.change(&format!("d{i}"));
    }
    for r in running {
        r.stop(Duration::from_secs(5)).await;
    }
}
