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
use sitemapd::AppState;
use sitemapd::websub::{FeedDigests, FeedState, Publisher, PublisherOptions, Served, Target};
use sitemapd::worker::{self, Running};

use crate::both_backends;
use crate::observability::sum;
use crate::support::hub::FakeHub;
use crate::support::{Backend, PUBLIC_URL, TestApp, eventually};

const FEED: &str = "feed.atom";
/// A feed URL nothing answers (the discard port): the fake hub's fetch of it fails, which these tests ignore.
const FEED_URL: &str = "http://127.0.0.1:9/feed.atom";

/// A publisher's feeds, counting its reads of the change counter: it reads the counter once per site per round, and
/// looks (when the counter moved) before its next read, so two reads after a change mean a look that saw it ended.
struct Counted<F> {
    inner: F,
    reads: AtomicUsize,
}

impl<F> Counted<F> {
    fn new(inner: F) -> Arc<Self> {
        Arc::new(Self { inner, reads: AtomicUsize::new(0) })
    }

    /// Waits until the publisher has ended a look begun after now (when something had moved).
    async fn looked(&self) {
        let from = self.reads.load(Ordering::SeqCst);
        eventually("the publisher looked again", || async { self.reads.load(Ordering::SeqCst) >= from + 2 }).await;
    }
}

#[async_trait]
impl<F: FeedDigests> FeedDigests for Counted<F> {
    async fn changes(&self, site: i64) -> anyhow::Result<i64> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.changes(site).await
    }

    async fn feeds(&self, site: i64) -> anyhow::Result<Vec<FeedState>> {
        self.inner.feeds(site).await
    }
}

/// The feeds of site 1 as the test sets them: one feed, whose digest and the site's change counter move together
/// ([`Stub::change`]), shared by a stub's twins (two processes reading one database).
#[derive(Clone)]
struct Stub(Arc<Mutex<(i64, String)>>);

impl Stub {
    fn new(digest: &str) -> Arc<Counted<Self>> {
        Counted::new(Self(Arc::new(Mutex::new((0, digest.to_owned())))))
    }
}

impl Counted<Stub> {
    /// Another reader of the same feed.
    fn twin(&self) -> Arc<Self> {
        Counted::new(self.inner.clone())
    }

    fn change(&self, digest: &str) {
        let mut feed = self.inner.0.lock().unwrap();
        *feed = (feed.0 + 1, digest.to_owned());
    }
}

#[async_trait]
impl FeedDigests for Stub {
    async fn changes(&self, _site: i64) -> anyhow::Result<i64> {
        Ok(self.0.lock().unwrap().0)
    }

    async fn feeds(&self, _site: i64) -> anyhow::Result<Vec<FeedState>> {
        let digest = self.0.lock().unwrap().1.clone();
        Ok(vec![FeedState { path: FEED.to_owned(), public_url: FEED_URL.to_owned(), digest }])
    }
}

fn options(interval: Duration) -> PublisherOptions {
    PublisherOptions {
        interval,
        poll: Duration::from_millis(20),
        timeout: Duration::from_secs(5),
        settle: Duration::ZERO,
    }
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

// --- The whole path: real writes, the feeds as served, the hub fetching them -----------------------------------

/// The settings that publish the default site's feeds to `hub`, with the publisher's reads every 20 ms.
fn feed_vars<'a>(hub: &'a FakeHub, interval: &'a str) -> [(&'static str, &'a str); 4] {
    [
        ("SITEMAPD_FEEDS", "true"),
        ("SITEMAPD_FEED_HUBS", hub.url.as_str()),
        ("SITEMAPD_FEED_HUB_INTERVAL", interval),
        ("SITEMAPD_TEST_TUNING", "websub_poll=20ms, websub_timeout=5s"),
    ]
}

/// Serves `state`'s routes on a loopback socket, and has `hub` fetch the feeds there.
async fn serve(state: AppState, hub: &FakeHub) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    hub.fetch_via(&format!("http://{}", listener.local_addr().unwrap()));
    tokio::spawn(sitemapd::serve(state, listener, std::future::pending(), Duration::from_secs(1)));
}

/// `app`'s publisher over the feeds as `state` serves them, counted (see [`Counted`]).
fn real_publisher(app: &TestApp, state: &AppState) -> (Arc<Counted<Served<AppState>>>, Running) {
    let feeds = Counted::new(Served(state.clone()));
    let targets = sitemapd::websub::targets(&app.config, &app.store.sites());
    assert_eq!(targets.len(), 1);
    // No settling: the tests that use it count looks, and a look waits for no other replica here
    // (`a_hub_reads_the_change_from_a_replica_that_serves_it_late` tests the settling).
    let options = PublisherOptions { settle: Duration::ZERO, ..PublisherOptions::from_config(&app.config) };
    let running = worker::spawn(Publisher::new(app.store.clone(), feeds.clone(), targets, options).unwrap());
    (feeds, running)
}

async fn put(app: &TestApp, path: &str) {
    let status = app.put_json(&serde_json::json!([{ "loc": format!("{PUBLIC_URL}/{path}") }])).await.status;
    assert_eq!(status, axum::http::StatusCode::OK);
}

/// The digest of the site's feed as served now.
async fn feed_digest(state: &AppState) -> String {
    let feeds = sitemapd::feed::feeds(state, 1).await.unwrap();
    sitemapd::feed::current(state, &feeds[0]).await.unwrap().digest
}

/// The site's feed is told to the hub once, which then fetches it from the service; a burst of twenty writes after
/// that, within the interval, is owed (the feed changed) and not told, however many looks see it.
async fn a_burst_of_writes_is_told_once_and_the_hub_reads_the_feed(b: Backend) {
    let hub = FakeHub::start(&[]);
    let app = TestApp::spawn(b, &feed_vars(&hub, "1h")).await;
    let state = AppState::new(app.store.clone(), &app.config);
    serve(state.clone(), &hub).await;
    put(&app, "first").await;
    let (feeds, running) = real_publisher(&app, &state);
    eventually("the hub fetched the feed", || async { hub.fetches().len() == 1 }).await;
    let told = hub.notifications();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!((told[0].mode.as_str(), told[0].url.as_str()), ("publish", "https://www.example.com/feed.atom"));
    let fetch = &hub.fetches()[0];
    assert_eq!(fetch.url, told[0].url);
    assert_eq!((fetch.status, fetch.content_type.as_str()), (200, "application/atom+xml"), "{fetch:?}");
    assert!(fetch.body.contains("<id>https://www.example.com/feed.atom</id>"), "{}", fetch.body);
    assert!(fetch.body.contains("<link href=\"https://www.example.com/first\"/>"), "{}", fetch.body);
    let told_digest = app.store.hub_rows(1).await.unwrap()[0].delivered.clone();
    assert_eq!(told_digest.as_deref(), Some(feed_digest(&state).await.as_str()));

    for i in 0..20 {
        put(&app, &format!("burst/{i}")).await;
    }
    feeds.looked().await;
    assert_eq!(hub.notifications().len(), 1, "{:?}", hub.notifications());
    let row = app.store.hub_rows(1).await.unwrap().remove(0);
    assert_eq!(row.delivered, told_digest, "what the hub was told is unchanged");
    assert_ne!(row.delivered.as_deref(), Some(feed_digest(&state).await.as_str()), "the burst changed the feed");
    assert!(row.wait > Duration::from_secs(3000), "owed after the interval: {row:?}");
    running.stop(Duration::from_secs(5)).await;
}

/// A write through another process (which tells this one's page table nothing) is told at once, though this
/// process keeps its page table for a minute (`cache.state_ttl`): the publisher checks the table afresh when the
/// change counter moved, so the digest it compares is never an older table's.
async fn a_write_through_another_process_is_told_whatever_the_cache(b: Backend) {
    let hub = FakeHub::start(&[]);
    let mut vars = feed_vars(&hub, "1s").to_vec();
    vars.push(("SITEMAPD_STATE_TTL", "1m"));
    let app = TestApp::spawn(b, &vars).await;
    let state = AppState::new(app.store.clone(), &app.config);
    serve(state.clone(), &hub).await;
    let feeds = Counted::new(Served(state.clone()));
    let targets = sitemapd::websub::targets(&app.config, &app.store.sites());
    // No interval: each change may be told at once; no settling (this process serves the hub).
    let options = PublisherOptions {
        interval: Duration::ZERO,
        settle: Duration::ZERO,
        ..PublisherOptions::from_config(&app.config)
    };
    let running = worker::spawn(Publisher::new(app.store.clone(), feeds.clone(), targets, options).unwrap());
    eventually("the empty feed is told", || async { hub.fetches().len() == 1 }).await;
    // `app`'s router has a state of its own: the publisher's learns of the write from the database only.
    put(&app, "elsewhere").await;
    let written = format!("<link href=\"{PUBLIC_URL}/elsewhere\"/>");
    eventually("the hub read the write", || async { hub.fetches().iter().any(|f| f.body.contains(&written)) }).await;
    assert_eq!(hub.notifications().len(), 2, "{:?}", hub.notifications());
    running.stop(Duration::from_secs(5)).await;
}

/// The hub fetches the feed as soon as it is told, perhaps from another replica, which serves it from a page table
/// up to `cache.state_ttl` old (5 s here). The publisher waits that long after it sees a change (`settle`), so the
/// hub reads the change there; told at once (no settling), it would read the old feed from that replica, and the
/// notification would be spent on it.
async fn a_hub_reads_the_change_from_a_replica_that_serves_it_late(b: Backend) {
    let hub = FakeHub::start(&[]);
    let mut vars = feed_vars(&hub, "1s").to_vec();
    vars.push(("SITEMAPD_STATE_TTL", "5s"));
    let app = TestApp::spawn(b, &vars).await;
    // The publisher's process, and the replica the hub fetches from: two states on one database.
    let publishing = AppState::new(app.store.clone(), &app.config);
    let replica = AppState::new(app.store.clone(), &app.config);
    serve(replica.clone(), &hub).await;
    let options = PublisherOptions { interval: Duration::ZERO, ..PublisherOptions::from_config(&app.config) };
    assert!(options.settle > Duration::from_secs(5), "{options:?}");
    let targets = sitemapd::websub::targets(&app.config, &app.store.sites());
    let feeds = Counted::new(Served(publishing.clone()));
    let running = worker::spawn(Publisher::new(app.store.clone(), feeds, targets, options).unwrap());
    // The first look tells the empty feed at once; the replica reads its page table for the hub's fetch.
    eventually("the empty feed is told and read", || async { hub.fetches().len() == 1 }).await;
    put(&app, "late").await;
    let written = format!("<link href=\"{PUBLIC_URL}/late\"/>");
    eventually("the hub is told of the write", || async { hub.fetches().len() == 2 }).await;
    let fetch = &hub.fetches()[1];
    assert!(fetch.body.contains(&written), "the hub read the old feed from the replica: {}", fetch.body);
    running.stop(Duration::from_secs(5)).await;
}

/// Through the server's list of workers: a 503 from the hub is retried (after the interval, 1 s) and delivered,
/// and the hub then reads the feed; a burst of writes after that is told once the interval is over, and the hub
/// then reads the latest state.
async fn the_workers_list_publishes_and_retries_a_5xx(b: Backend) {
    let hub = FakeHub::start(&[503]);
    let app = TestApp::spawn(b, &feed_vars(&hub, "1s")).await;
    let (state, workers) = sitemapd::workers::start(app.store.clone(), &app.config).await.unwrap();
    assert!(workers.names().contains(&"websub"), "{:?}", workers.names());
    serve(state, &hub).await;
    eventually("the hub fetched the feed", || async { hub.fetches().len() == 1 }).await;
    let statuses: Vec<u16> = hub.notifications().iter().map(|n| n.status).collect();
    assert_eq!(statuses, [503, 204]);
    assert_eq!(hub.fetches()[0].status, 200, "{:?}", hub.fetches());
    for i in 0..5 {
        put(&app, &format!("burst/{i}")).await;
    }
    let last = format!("<link href=\"{PUBLIC_URL}/burst/4\"/>");
    eventually("the hub read the burst's last write", || async {
        hub.fetches().iter().any(|f| f.status == 200 && f.body.contains(&last))
    })
    .await;
    assert_eq!(told(&app, &hub, "server_error").await, 1.0);
    workers.stop(Duration::from_secs(5)).await;
}

both_backends!(
    a_failed_notification_is_sent_again_until_delivered,
    a_redirect_is_never_followed,
    a_burst_of_changes_is_told_once_per_interval,
    a_burst_of_writes_is_told_once_and_the_hub_reads_the_feed,
    a_write_through_another_process_is_told_whatever_the_cache,
    a_hub_reads_the_change_from_a_replica_that_serves_it_late,
    the_workers_list_publishes_and_retries_a_5xx,
);

/// Two instances of the service (each its state, routes and publisher) on one Postgres: the feed is told to the hub
/// once, and a burst of writes through either after that is owed, never told twice within the interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn two_instances_on_one_postgres_tell_the_hub_once() {
    let hub = FakeHub::start(&[]);
    let app = TestApp::spawn(Backend::Postgres, &feed_vars(&hub, "1h")).await;
    let other = app.another_process().await;
    let (one, two) = (AppState::new(app.store.clone(), &app.config), AppState::new(other.store.clone(), &other.config));
    serve(one.clone(), &hub).await;
    put(&app, "first").await;
    let (feeds_one, running_one) = real_publisher(&app, &one);
    let (feeds_two, running_two) = real_publisher(&other, &two);
    eventually("the hub fetched the feed", || async { hub.fetches().len() == 1 }).await;
    feeds_one.looked().await;
    feeds_two.looked().await;
    assert_eq!(hub.notifications().len(), 1, "{:?}", hub.notifications());
    for i in 0..10 {
        put(if i % 2 == 0 { &app } else { &other }, &format!("burst/{i}")).await;
    }
    feeds_one.looked().await;
    feeds_two.looked().await;
    assert_eq!(hub.notifications().len(), 1, "{:?}", hub.notifications());
    running_one.stop(Duration::from_secs(5)).await;
    running_two.stop(Duration::from_secs(5)).await;
}
