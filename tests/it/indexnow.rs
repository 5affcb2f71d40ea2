//! IndexNow change notification through the real router and the real sender, against a fake endpoint on the
//! loopback interface that records every request and answers as scripted: the key file, what is sent (host, key,
//! key location, the changed locs, deletes included), batches of at most 10,000, one send for many changes,
//! nothing for an identical re-send, a change while its send is in flight, retries (429, 5xx) and drops (403,
//! given up), redirects (never followed). Two senders on one Postgres are in this file too; `kill -9` with a
//! pending outbox is in `process`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sitemapd::indexnow::{Running, Sender, SenderOptions};
use tokio::sync::{Notify, Semaphore};

use crate::observability::sum;
use crate::support::{Backend, PUBLIC_URL, TestApp};
use crate::{both_backends, through_pooler};

pub(crate) const KEY: &str = "5f1c0b7e-indexnow-test";

/// How an answer of the fake endpoint is scripted: a status and an optional `Retry-After`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answer(pub u16, pub Option<&'static str>);

/// One request as the fake endpoint saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub body: Value,
    pub user_agent: String,
    pub content_type: String,
    /// The status it was answered with.
    pub status: u16,
}

#[derive(Default)]
struct Recorded {
    seen: Vec<Seen>,
    script: VecDeque<Answer>,
    /// Requests that arrived (answered or not).
    arrived: usize,
    in_flight: usize,
    /// Hold the next request until [`FakeIndexNow::release`].
    hold_next: bool,
    /// Hold the first request until a second one is in flight at the same time (or a deadline passes).
    hold_for_company: bool,
    overlapped: bool,
}

struct Shared {
    state: Mutex<Recorded>,
    release: Semaphore,
    company: Notify,
}

/// A fake IndexNow endpoint on 127.0.0.1, served by a runtime on a thread of its own (so a test may block).
pub(crate) struct FakeIndexNow {
    pub url: String,
    shared: Arc<Shared>,
}

impl FakeIndexNow {
    /// On a free port; answers `script` in order, then 200.
    pub(crate) fn start(script: &[Answer]) -> Self {
        Self::start_on(std::net::TcpListener::bind("127.0.0.1:0").unwrap(), script)
    }

    pub(crate) fn start_on(listener: std::net::TcpListener, script: &[Answer]) -> Self {
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/indexnow", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            state: Mutex::new(Recorded { script: script.iter().copied().collect(), ..Default::default() }),
            release: Semaphore::new(0),
            company: Notify::new(),
        });
        let served = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().route("/indexnow", axum::routing::post(receive)).with_state(served);
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self { url, shared }
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.shared.state.lock().unwrap().seen.clone()
    }

    pub(crate) fn arrived(&self) -> usize {
        self.shared.state.lock().unwrap().arrived
    }

    /// How often each URL was in a request that was answered 2xx.
    pub(crate) fn accepted(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for seen in self.seen().iter().filter(|s| (200..300).contains(&s.status)) {
            for url in seen.body["urlList"].as_array().unwrap() {
                *counts.entry(url.as_str().unwrap().to_owned()).or_default() += 1;
            }
        }
        counts
    }

    fn hold_next(&self) {
        self.shared.state.lock().unwrap().hold_next = true;
    }

    fn release(&self) {
        self.shared.release.add_permits(1);
    }

    fn hold_first_for_company(&self) {
        self.shared.state.lock().unwrap().hold_for_company = true;
    }

    fn overlapped(&self) -> bool {
        self.shared.state.lock().unwrap().overlapped
    }
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (hold, wait_for_company) = {
        let mut s = shared.state.lock().unwrap();
        s.arrived += 1;
        s.in_flight += 1;
        if s.in_flight >= 2 {
            s.overlapped = true;
            shared.company.notify_waiters();
        }
        let wait_for_company = std::mem::take(&mut s.hold_for_company);
        (std::mem::take(&mut s.hold_next), wait_for_company)
    };
    if hold {
        shared.release.acquire().await.unwrap().forget();
    }
    if wait_for_company {
        let company = shared.company.notified();
        let overlapped = shared.state.lock().unwrap().overlapped;
        if !overlapped {
            let _ = tokio::time::timeout(Duration::from_secs(20), company).await;
        }
    }
    let mut s = shared.state.lock().unwrap();
    s.in_flight -= 1;
    let Answer(status, retry_after) = s.script.pop_front().unwrap_or(Answer(200, None));
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    s.seen.push(Seen { body, user_agent: header("user-agent"), content_type: header("content-type"), status });
    let status = StatusCode::from_u16(status).unwrap();
    match retry_after {
        Some(after) => (status, [("retry-after", after)], "try later").into_response(),
        None => (status, "").into_response(),
    }
}

/// The settings that turn notification on against `endpoint`, fast: a sender that looks every 20 ms and retries
/// after 20 ms.
fn vars(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SITEMAPD_INDEXNOW_KEYS", KEY.to_owned()),
        ("SITEMAPD_INDEXNOW_ENDPOINT", endpoint.to_owned()),
        ("SITEMAPD_TEST_TUNING", "indexnow_interval=20ms".to_owned()),
        ("SITEMAPD_INDEXNOW_RETRY_BASE", "20ms".to_owned()),
    ]
}

async fn app_for(b: Backend, fake: &FakeIndexNow, more: &[(&'static str, &str)]) -> TestApp {
    let mut all = vars(&fake.url);
    all.extend(more.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
    TestApp::spawn(b, &all).await
}

fn start(app: &TestApp) -> Running {
    sitemapd::indexnow::start(app.store.clone(), &app.config).unwrap().expect("a key is configured")
}

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

async fn queued(app: &TestApp) -> i64 {
    app.store.outbox_size().await.unwrap().iter().map(|(_, n)| n).sum()
}

/// Waits (at most 60 s) until `done` holds.
async fn eventually<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the outbox is empty and nothing is in flight, then returns what the endpoint saw.
async fn drained(app: &TestApp, fake: &FakeIndexNow) -> Vec<Seen> {
    eventually("the outbox is empty", || async { queued(app).await == 0 }).await;
    fake.seen()
}

fn url_list(seen: &Seen) -> Vec<&str> {
    let mut urls: Vec<&str> = seen.body["urlList"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    urls.sort_unstable();
    urls
}

async fn metric(app: &TestApp, name: &str, labels: &[(&str, &str)]) -> f64 {
    sum(&app.scrape().await, name, labels)
}

/// The key file is served, and the changed locs are sent once, with the site's host, key and key location.
async fn changes_are_sent_with_the_host_the_key_and_its_file(b: Backend) {
    let fake = FakeIndexNow::start(&[]);
    let app = app_for(b, &fake, &[]).await;
    let r = app.get(&format!("/{KEY}.txt"), &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.text(), KEY);
    let r = app.head(&format!("/{KEY}.txt"), &[]).await;
    assert_eq!((r.status, r.body.len()), (StatusCode::OK, 0));
    for other in ["/robots.txt", "/0123456789abcdef.txt", &format!("/{KEY}x.txt"), &format!("/{KEY}.txt.gz")] {
        assert_eq!(app.get(other, &[]).await.status, StatusCode::NOT_FOUND, "{other}");
    }

    let queued_before = metric(&app, "sitemapd_indexnow_queued_total", &[]).await;
    app.put_paths(&["a", "b", "c"]).await;
    assert_eq!(queued(&app).await, 3, "queued in the write's transaction");
    assert!(metric(&app, "sitemapd_indexnow_queued_total", &[]).await >= queued_before + 3.0);
    let gauge = metric(&app, "sitemapd_indexnow_outbox_urls", &[]).await;
    assert_eq!(gauge, 3.0, "the outbox gauge");
    let sent_before = metric(&app, "sitemapd_indexnow_sent_total", &[]).await;
    let sender = start(&app);
    let seen = drained(&app, &fake).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    let body = &seen[0].body;
    assert_eq!(body["host"], "www.example.com");
    assert_eq!(body["key"], KEY);
    assert_eq!(body["keyLocation"], format!("{PUBLIC_URL}/{KEY}.txt"));
    assert_eq!(url_list(&seen[0]), [loc("a"), loc("b"), loc("c")]);
    assert_eq!(body.as_object().unwrap().len(), 4, "{body}");
    assert_eq!(seen[0].user_agent, format!("sitemapd/{}", env!("CARGO_PKG_VERSION")));
    assert!(seen[0].content_type.starts_with("application/json"), "{}", seen[0].content_type);
    assert!(metric(&app, "sitemapd_indexnow_sent_total", &[]).await >= sent_before + 3.0);
    assert_eq!(metric(&app, "sitemapd_indexnow_outbox_urls", &[]).await, 0.0);
    sender.stop(Duration::from_secs(5)).await;
}

/// An identical re-send changes nothing, so it queues nothing; an unconfigured service queues nothing at all.
async fn an_identical_resend_queues_nothing(b: Backend) {
    let fake = FakeIndexNow::start(&[]);
    let app = app_for(b, &fake, &[]).await;
    let entries = json!([{"loc": loc("a"), "lastmod": "2024-05-01"}, {"loc": loc("b")}]);
    assert_eq!(app.put_json(&entries).await.status, StatusCode::OK);
    assert_eq!(queued(&app).await, 2);
    let sender = start(&app);
    drained(&app, &fake).await;
    sender.stop(Duration::from_secs(5)).await;
    let r = app.put_json(&entries).await;
    assert_eq!(r.json()["unchanged"], 2);
    assert_eq!(queued(&app).await, 0, "nothing changed, nothing queued");
    // A delete of what is not stored changes nothing either.
    assert_eq!(app.delete_loc(&loc("never")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(queued(&app).await, 0);

    // Without a key, writes queue nothing.
    let off = app.another_process_with(&[("SITEMAPD_INDEXNOW_KEYS", "")]).await;
    off.put_paths(&["c"]).await;
    assert_eq!(queued(&off).await, 0);
    assert_eq!(off.get(&format!("/{KEY}.txt"), &[]).await.status, StatusCode::NOT_FOUND);
    assert!(sitemapd::indexnow::start(off.store.clone(), &off.config).unwrap().is_none());
}

/// A loc changed five times (and a NDJSON body that names it twice) before a send is one row, sent once.
async fn five_changes_before_a_send_are_sent_once(b: Backend) {
    let fake = FakeIndexNow::start(&[]);
    let app = app_for(b, &fake, &[]).await;
    for day in 1..=5 {
        let r = app.put_json(&json!([{"loc": loc("hot"), "lastmod": format!("2024-05-0{day}")}])).await;
        assert_eq!(r.json()["unchanged"], 0, "day {day}");
    }
    let twice = format!(
        "{{\"loc\": \"{}\", \"priority\": 0.1}}\n{{\"loc\": \"{}\", \"priority\": 0.2}}\n",
        loc("hot"),
        loc("hot")
    );
    assert_eq!(app.put_ndjson(&twice).await.status, StatusCode::OK);
    assert_eq!(queued(&app).await, 1);
    let sender = start(&app);
    let seen = drained(&app, &fake).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(url_list(&seen[0]), [loc("hot")]);
    sender.stop(Duration::from_secs(5)).await;
}

/// Deletes are notified (engines learn of the 404), by either delete route.
async fn deletes_are_notified(b: Backend) {
    let fake = FakeIndexNow::start(&[]);
    let app = app_for(b, &fake, &[]).await;
    app.put_paths(&["a", "b", "c"]).await;
    let sender = start(&app);
    assert_eq!(drained(&app, &fake).await.len(), 1);
    assert_eq!(app.delete_loc(&loc("a")).await.status, StatusCode::NO_CONTENT);
    let many = json!([loc("b"), loc("missing")]);
    let r = app
        .request(
            axum::http::Method::POST,
            "/api/v1/urls/delete",
            &[("content-type", "application/json")],
            many.to_string().into(),
        )
        .await;
    assert_eq!(r.json()["deleted"], 1);
    let sent = || fake.accepted().values().sum::<usize>();
    eventually("both deletes are sent", || async { sent() == 5 && queued(&app).await == 0 }).await;
    let accepted = fake.accepted();
    assert_eq!(accepted[&loc("a")], 2, "created, then deleted: {accepted:?}");
    assert_eq!(accepted[&loc("b")], 2, "{accepted:?}");
    assert_eq!(accepted[&loc("c")], 1, "{accepted:?}");
    assert!(!accepted.contains_key(&loc("missing")), "not stored, not changed: {accepted:?}");
    sender.stop(Duration::from_secs(5)).await;
}

/// 10,001 changed locs go as two requests: 10,000 and 1, each loc once.
async fn a_request_holds_at_most_10000_urls(b: Backend) {
    let fake = FakeIndexNow::start(&[]);
    let app = app_for(b, &fake, &[]).await;
    let ndjson: String = (0..10_001).map(|i| format!("{{\"loc\": \"{}\"}}\n", loc(&format!("bulk/{i}")))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    assert_eq!(queued(&app).await, 10_001);
    let sender = start(&app);
    let seen = drained(&app, &fake).await;
    let mut sizes: Vec<usize> = seen.iter().map(|s| s.body["urlList"].as_array().unwrap().len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 10_000]);
    let accepted = fake.accepted();
    assert_eq!(accepted.len(), 10_001);
    assert!(accepted.values().all(|n| *n == 1));
    sender.stop(Duration::from_secs(5)).await;
}

/// 429 (with `Retry-After: 0`, which must not become a hot loop) and a 503: sent again later, accepted once.
async fn rate_limited_then_sent_once(b: Backend) {
    let fake = FakeIndexNow::start(&[Answer(429, Some("0")), Answer(503, None)]);
    let app = app_for(b, &fake, &[]).await;
    let retries = metric(&app, "sitemapd_indexnow_retries_total", &[("reason", "rate_limited")]).await;
    app.put_paths(&["a", "b"]).await;
    let sender = start(&app);
    let seen = drained(&app, &fake).await;
    assert_eq!(seen.iter().map(|s| s.status).collect::<Vec<_>>(), [429, 503, 200]);
    assert!(seen.iter().all(|s| url_list(s) == [loc("a"), loc("b")]), "{seen:?}");
    assert_eq!(fake.accepted().values().sum::<usize>(), 2);
    assert!(metric(&app, "sitemapd_indexnow_retries_total", &[("reason", "rate_limited")]).await > retries);
    sender.stop(Duration::from_secs(5)).await;
}

/// 403 (the key is not valid for the host): dropped, not retried, counted under its reason.
async fn a_refused_key_is_dropped(b: Backend) {
    let fake = FakeIndexNow::start(&[Answer(403, None)]);
    let app = app_for(b, &fake, &[]).await;
    let dropped = metric(&app, "sitemapd_indexnow_dropped_total", &[("reason", "key_not_valid")]).await;
    app.put_paths(&["a", "b"]).await;
    let sender = start(&app);
    let seen = drained(&app, &fake).await;
    assert_eq!(seen.iter().map(|s| s.status).collect::<Vec<_>>(), [403]);
    assert!(metric(&app, "sitemapd_indexnow_dropped_total", &[("reason", "key_not_valid")]).await >= dropped + 2.0);
    // Later changes are sent as ever.
    app.put_paths(&["c"]).await;
    eventually("the next change is sent", || async { fake.accepted().contains_key(&loc("c")) }).await;
    sender.stop(Duration::from_secs(5)).await;
}

/// A send that fails `indexnow_max_attempts` times is given up: dropped, counted, the outbox empty.
async fn failures_are_given_up_after_the_last_attempt(b: Backend) {
    let fake = FakeIndexNow::start(&[Answer(500, None), Answer(502, None), Answer(500, None)]);
    let app = app_for(b, &fake, &[("SITEMAPD_INDEXNOW_MAX_ATTEMPTS", "2")]).await;
    let gave_up = metric(&app, "sitemapd_indexnow_dropped_total", &[("reason", "gave_up")]).await;
    app.put_paths(&["a"]).await;
    let sender = start(&app);
    let seen = drained(&app, &fake).await;
    assert_eq!(seen.iter().map(|s| s.status).collect::<Vec<_>>(), [500, 502], "two attempts, then given up");
    assert!(metric(&app, "sitemapd_indexnow_dropped_total", &[("reason", "gave_up")]).await >= gave_up + 1.0);
    sender.stop(Duration::from_secs(5)).await;
}

/// A loc changed while its batch is in flight is sent again after it (its row is not deleted by the earlier send),
/// and a loc that was not changed is not.
async fn a_change_during_a_send_is_sent_again(b: Backend) {
    let fake = FakeIndexNow::start(&[]);
    let app = app_for(b, &fake, &[]).await;
    app.put_paths(&["a", "b"]).await;
    fake.hold_next();
    let sender = start(&app);
    eventually("the first send arrives", || async { fake.arrived() == 1 }).await;
    let r = app.put_json(&json!([{"loc": loc("a"), "priority": 0.9}])).await;
    assert_eq!(r.json()["updated"], 1);
    fake.release();
    eventually("the change is sent again", || async { fake.accepted().get(&loc("a")) == Some(&2) }).await;
    eventually("the outbox is empty", || async { queued(&app).await == 0 }).await;
    let seen = fake.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(url_list(&seen[1]), [loc("a")]);
    sender.stop(Duration::from_secs(5)).await;
}

/// Several sites: each site with a key notifies of its own changes, in requests of its own (its host, key and key
/// location); a site without a key queues nothing; a key file is served to its own site's host only.
async fn each_site_sends_its_own_batches(b: Backend) {
    const SHOP_KEY: &str = "0a1b2c3d-shop-key";
    let fake = FakeIndexNow::start(&[]);
    let sites = "default=https://www.example.com/, shop=https://shop.example.com/, de=https://example.de/";
    let keys = format!("default={KEY}, shop={SHOP_KEY}");
    let more = [("SITEMAPD_SITES", sites), ("SITEMAPD_INDEXNOW_KEYS", keys.as_str())];
    let app = app_for(b, &fake, &more).await;
    for (key, host, status) in [
        (KEY, "www.example.com", StatusCode::OK),
        (KEY, "shop.example.com", StatusCode::NOT_FOUND),
        (SHOP_KEY, "shop.example.com", StatusCode::OK),
        (SHOP_KEY, "www.example.com", StatusCode::NOT_FOUND),
        (SHOP_KEY, "example.de", StatusCode::NOT_FOUND),
        (SHOP_KEY, "evil.test", StatusCode::NOT_FOUND),
    ] {
        let r = app.get(&format!("/{key}.txt"), &[("host", host)]).await;
        assert_eq!(r.status, status, "{key} at {host}");
        if status == StatusCode::OK {
            assert_eq!(r.text(), key);
        }
    }
    let entries = json!([
        {"loc": "https://shop.example.com/x"}, {"loc": loc("a")}, {"loc": "https://example.de/z"},
        {"loc": "https://shop.example.com/y"},
    ]);
    assert_eq!(app.put_json(&entries).await.status, StatusCode::OK);
    assert_eq!(queued(&app).await, 3, "de has no key: nothing of it is queued");
    assert_eq!(metric(&app, "sitemapd_indexnow_outbox_urls", &[("site", "shop")]).await, 2.0);
    assert_eq!(metric(&app, "sitemapd_indexnow_outbox_urls", &[("site", "default")]).await, 1.0);
    let sender = start(&app);
    let mut seen = drained(&app, &fake).await;
    seen.sort_by_key(|s| s.body["host"].as_str().unwrap().to_owned());
    assert_eq!(seen.len(), 2, "one request per site: {seen:?}");
    assert_eq!(
        (seen[0].body["host"].clone(), seen[0].body["key"].clone()),
        (json!("shop.example.com"), json!(SHOP_KEY))
    );
    assert_eq!(seen[0].body["keyLocation"], format!("https://shop.example.com/{SHOP_KEY}.txt"));
    assert_eq!(url_list(&seen[0]), ["https://shop.example.com/x", "https://shop.example.com/y"]);
    assert_eq!((seen[1].body["host"].clone(), seen[1].body["key"].clone()), (json!("www.example.com"), json!(KEY)));
    assert_eq!(url_list(&seen[1]), [loc("a")]);
    for site in ["default", "shop"] {
        assert_eq!(metric(&app, "sitemapd_indexnow_outbox_urls", &[("site", site)]).await, 0.0, "{site}");
    }
    let samples = app.scrape().await;
    let outbox_sites: Vec<&str> = samples
        .iter()
        .filter(|(name, _, _)| name == "sitemapd_indexnow_outbox_urls")
        .map(|(_, labels, _)| labels["site"].as_str())
        .collect();
    assert_eq!(outbox_sites, ["default", "shop"], "a gauge per site with a key");
    sender.stop(Duration::from_secs(5)).await;
}

/// A request as a [`Recorder`] got it: method, path, body.
type Got = (String, String, Vec<u8>);

/// A listener that records every request it gets (method, path, body) and answers each with the next scripted
/// status and `Location` (then 200): an endpoint that redirects, or the host a redirect names.
struct Recorder {
    url: String,
    seen: Arc<Mutex<Vec<Got>>>,
}

impl Recorder {
    fn start(listener: std::net::TcpListener, script: Vec<(u16, String)>) -> Self {
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (recorded, script) = (seen.clone(), Arc::new(Mutex::new(VecDeque::from(script))));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
                    let (recorded, script) = (recorded.clone(), script.clone());
                    async move {
                        let (parts, body) = request.into_parts();
                        let body = axum::body::to_bytes(body, 1 << 24).await.unwrap().to_vec();
                        recorded.lock().unwrap().push((parts.method.to_string(), parts.uri.path().to_owned(), body));
                        match script.lock().unwrap().pop_front() {
                            Some((status, to)) => {
                                (StatusCode::from_u16(status).unwrap(), [("location", to)], "moved").into_response()
                            }
                            None => StatusCode::OK.into_response(),
                        }
                    }
                });
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self { url, seen }
    }

    fn seen(&self) -> Vec<Got> {
        self.seen.lock().unwrap().clone()
    }
}

/// Redirects are answers, never followed: 301, 302, 303, 307 and 308 (to another host, or to another path of
/// the endpoint's) reach neither target, not even as a `GET`; each is retried to the configured endpoint, counted
/// as `redirected`, and the locs are sent once the endpoint answers 200.
async fn redirects_are_not_followed(b: Backend) {
    let other = Recorder::start(std::net::TcpListener::bind("127.0.0.2:0").unwrap(), Vec::new());
    let elsewhere = format!("{}/indexnow", other.url);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let same_host = format!("http://{}/moved", listener.local_addr().unwrap());
    let script = vec![
        (301, elsewhere.clone()),
        (302, same_host.clone()),
        (303, elsewhere.clone()),
        (307, elsewhere.clone()),
        (308, same_host.clone()),
        (302, elsewhere),
    ];
    let endpoint = Recorder::start(listener, script);
    let endpoint_url = format!("{}/indexnow", endpoint.url);
    let mut all = vars(&endpoint_url);
    all.push(("SITEMAPD_INDEXNOW_MAX_ATTEMPTS", "10".to_owned()));
    let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let app = TestApp::spawn(b, &all).await;
    let redirected = metric(&app, "sitemapd_indexnow_retries_total", &[("reason", "redirected")]).await;
    app.put_paths(&["a", "b"]).await;
    let sender = start(&app);
    eventually("the outbox is empty", || async { queued(&app).await == 0 }).await;
    sender.stop(Duration::from_secs(5)).await;
    assert!(other.seen().is_empty(), "the host a redirect named got {:?}", other.seen());
    let seen = endpoint.seen();
    assert_eq!(seen.len(), 7, "six redirects, each sent again, then 200: {seen:?}");
    for (method, path, body) in &seen {
        assert_eq!((method.as_str(), path.as_str()), ("POST", "/indexnow"), "only the endpoint, only POST");
        let body: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(body["urlList"], json!([loc("a"), loc("b")]));
    }
    assert!(metric(&app, "sitemapd_indexnow_retries_total", &[("reason", "redirected")]).await >= redirected + 6.0);
}

both_backends!(
    redirects_are_not_followed,
    each_site_sends_its_own_batches,
    changes_are_sent_with_the_host_the_key_and_its_file,
    an_identical_resend_queues_nothing,
    five_changes_before_a_send_are_sent_once,
    deletes_are_notified,
    a_request_holds_at_most_10000_urls,
    rate_limited_then_sent_once,
    a_refused_key_is_dropped,
    failures_are_given_up_after_the_last_attempt,
    a_change_during_a_send_is_sent_again,
);

// Through a transaction-mode PgBouncer (tests/it/pooler.rs).
through_pooler!(
    changes_are_sent_with_the_host_the_key_and_its_file,
    deletes_are_notified,
    a_change_during_a_send_is_sent_again,
    failures_are_given_up_after_the_last_attempt,
);

/// Two senders (two processes' stores) on one Postgres: every loc is accepted exactly once. The endpoint holds the
/// first request until a second one arrives, so the two senders are seen claiming at the same time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn two_senders_on_one_postgres_send_each_url_once() {
    let fake = FakeIndexNow::start(&[]);
    let app = app_for(Backend::Postgres, &fake, &[]).await;
    let n = 3_000;
    let ndjson: String = (0..n).map(|i| format!("{{\"loc\": \"{}\"}}\n", loc(&format!("p/{i}")))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    assert_eq!(queued(&app).await, n);
    let replica = app.another_process().await;
    fake.hold_first_for_company();
    let options = SenderOptions { batch: 25, ..SenderOptions::from_config(&app.config) };
    let senders: Vec<Running> = [&app, &replica]
        .into_iter()
        .map(|a| {
            let targets = sitemapd::indexnow::targets(&a.config, &a.store.sites());
            Sender::new(a.store.clone(), targets, options.clone()).unwrap().spawn()
        })
        .collect();
    let seen = drained(&app, &fake).await;
    assert!(fake.overlapped(), "the two senders never had a request in flight at the same time");
    let accepted = fake.accepted();
    assert_eq!(accepted.len(), n as usize);
    let twice: BTreeMap<&String, &usize> = accepted.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    // Full batches, but not always exactly n / 25 requests: a claim (`… ORDER BY due_us LIMIT 25 FOR UPDATE SKIP
    // LOCKED`) that meets a row the other sender's claim has just updated rechecks it, finds it no longer due, and
    // drops it without taking another (Postgres locks above the LIMIT), so that claim sends 24 and the row goes
    // in a later one. Seen once in ~7 runs on a loaded 2-core machine: 119 × 25 + 24 + 1.
    let sizes: Vec<usize> = seen.iter().map(|s| s.body["urlList"].as_array().unwrap().len()).collect();
    assert!(sizes.iter().all(|&k| (1..=25).contains(&k)), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), n as usize, "{sizes:?}");
    let full = sizes.iter().filter(|&&k| k == 25).count();
    assert!(full + 2 >= (n as usize) / 25, "at most a couple of claims came short: {sizes:?}");
    for sender in senders {
        sender.stop(Duration::from_secs(5)).await;
    }
}
