//! Pages rendered ahead of crawlers after a write (`SITEMAPD_PRERENDER`), by the writer and by a replica that
//! learns of the write through its refresh; and that refresh costing one read of the change counter when nothing
//! changed.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::json;
use sitemapd::AppState;
use sitemapd::page::PageState;

use crate::support::{Backend, PUBLIC_URL, TestApp, gunzip};

const SITE: i64 = 1;

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

/// The router over a state the test keeps, to look into its page cache.
struct Process {
    state: AppState,
    app: TestApp,
}

impl Process {
    async fn new(mut app: TestApp) -> Self {
        let state = AppState::new(app.store.clone(), &app.config);
        app.router = sitemapd::app(state.clone());
        Self { state, app }
    }

    async fn page(&self, id: i64) -> PageState {
        let store = self.app.store.as_ref();
        self.state.directories(SITE).get(store).await.unwrap().page(id).cloned().expect("a page with URLs")
    }

    async fn cached(&self, page: &PageState) -> bool {
        self.state.page_cache.get(SITE, page).await.is_some()
    }

    /// Waits (at most 10 s) until `page` is in this process's cache.
    async fn until_cached(&self, page: &PageState) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.cached(page).await {
            assert!(Instant::now() < deadline, "page {} version {} was never rendered ahead", page.id, page.version);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn put(app: &TestApp, entries: serde_json::Value) {
    let r = app
        .send(
            Request::builder()
                .method(Method::PUT)
                .uri("/api/v1/urls")
                .header("content-type", "application/json")
                .body(Body::from(entries.to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The writer renders the pages a write changed into its cache without a request, and forgets the versions they
/// replace; what it serves from there is what a request would have rendered. Once rendered, a page is served with
/// the database gone.
async fn the_writer_renders_changed_pages_ahead(b: Backend) {
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "2"), ("SITEMAPD_STATE_TTL", "60s")];
    let app = TestApp::spawn(b, &vars).await;
    // The bytes a request renders, from a process that does not render ahead.
    let reference = Process::new(app.another_process_with(&[("SITEMAPD_PRERENDER", "false")]).await).await;
    let p = Process::new(app).await;
    put(&p.app, json!([{"loc": loc("a")}, {"loc": loc("b")}, {"loc": loc("c"), "priority": 0.5}])).await;
    let (one, two) = (p.page(1).await, p.page(2).await);
    p.until_cached(&one).await;
    p.until_cached(&two).await;
    assert!(!reference.cached(&one).await, "SITEMAPD_PRERENDER=false renders nothing ahead");

    put(&p.app, json!([{"loc": loc("c"), "priority": 0.7}])).await;
    let two_again = p.page(2).await;
    assert_ne!(two_again, two);
    p.until_cached(&two_again).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.cached(&two).await {
        assert!(Instant::now() < deadline, "the replaced version stays cached");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(p.cached(&one).await, "an unchanged page stays");

    for path in ["/sitemap-1.xml", "/sitemap-2.xml.gz"] {
        let ahead = p.app.get(path, &[("accept-encoding", "gzip")]).await;
        let asked = reference.app.get(path, &[("accept-encoding", "gzip")]).await;
        assert_eq!(ahead.status, 200);
        assert_eq!(ahead.body, asked.body, "{path}: the same bytes as a request renders");
        assert_eq!(ahead.header("etag"), asked.header("etag"));
    }
    assert!(gunzip(&p.app.get("/sitemap-2.xml.gz", &[]).await.body).contains("<priority>0.7</priority>"));
    // The store gone, the pages rendered ahead are still served (the page table is fresh for a minute).
    p.app.store.close().await;
    let served = p.app.get("/sitemap-1.xml", &[]).await;
    assert_eq!(served.status, 200, "{}", served.text());
    assert!(served.text().contains(&loc("b")));
}

/// A replica renders the pages another process's write changed once its refresh sees the change counter move,
/// with no request of its own.
async fn a_replica_renders_what_another_changed(b: Backend) {
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "2"), ("SITEMAPD_STATE_TTL", "100ms")];
    let app = TestApp::spawn(b, &vars).await;
    let writer = Process::new(app.another_process().await).await;
    put(&writer.app, json!([{"loc": loc("a")}, {"loc": loc("b")}, {"loc": loc("c")}])).await;
    let replica = Process::new(app).await;
    assert_eq!(replica.app.get("/sitemap.xml", &[]).await.status, 200);
    put(&writer.app, json!([{"loc": loc("d")}])).await;
    let two = writer.page(2).await;
    assert_eq!(two.url_count, 2);
    replica.until_cached(&two).await;
    assert!(!replica.cached(&writer.page(1).await).await, "a page that did not change is not rendered ahead");
}

/// A refresh reads the site's change counter and, while it has not moved, keeps the page table it has: a change
/// to the pages that leaves the counter where it was (made here by hand) is not seen; moving the counter is.
async fn a_refresh_reads_the_table_again_only_when_the_counter_moved(b: Backend) {
    let vars = [("SITEMAPD_STATE_TTL", "50ms")];
    let app = TestApp::spawn(b, &vars).await;
    put(&app, json!([{"loc": loc("a")}])).await;
    let replica = app.another_process().await;
    let before = replica.get("/sitemap.xml", &[]).await;
    let counter = app.store.changes(SITE).await.unwrap();
    app.exec_sql(&format!(
        "UPDATE pages SET version = version + 1, modified_us = modified_us + 5000000 WHERE site_id = {SITE}; \
             UPDATE sites SET changes = {counter} WHERE id = {SITE};"
    ))
    .await;
    assert_eq!(app.store.changes(SITE).await.unwrap(), counter);
    // A refresh now, as the end of its state_ttl_ms would make one: a client asking for the current state.
    replica.get("/sitemap.xml", &[("cache-control", "no-cache")]).await;
    let same = replica.get("/sitemap.xml", &[]).await;
    assert_eq!(same.header("etag"), before.header("etag"), "the table was read again though the counter stood");
    assert_eq!(same.body, before.body);
    app.exec_sql(&format!("UPDATE sites SET changes = changes + 1 WHERE id = {SITE}")).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while replica.get("/sitemap.xml", &[]).await.header("etag") == before.header("etag") {
        assert!(Instant::now() < deadline, "the counter moved and the table was never read again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The counter moves with every write that changes a page or the news stamp, and only then.
async fn the_change_counter_moves_with_changes_only(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let counter = || async { app.store.changes(SITE).await.unwrap() };
    let start = counter().await;
    let entry = json!([{"loc": loc("a"), "lastmod": "2026-01-01"}]);
    put(&app, entry.clone()).await;
    let created = counter().await;
    assert!(created > start, "a created entry moves it");
    put(&app, entry).await;
    assert_eq!(counter().await, created, "an identical re-send does not");
    let news = json!({"publication": {"name": "The Times", "language": "en"},
                      "publication_date": "2026-01-01T08:00:00Z", "title": "A"});
    put(&app, json!([{"loc": loc("a"), "lastmod": "2026-01-01", "news": news}])).await;
    let with_news = counter().await;
    assert!(with_news > created, "news added moves it");
    let mut retitled = news.clone();
    retitled["title"] = json!("B");
    put(&app, json!([{"loc": loc("a"), "lastmod": "2026-01-01", "news": retitled}])).await;
    assert!(counter().await > with_news, "a change to the news alone (not rendered on the page) moves it");
    let before_delete = counter().await;
    assert_eq!(app.delete_loc(&loc("a")).await.status, 204);
    assert!(counter().await > before_delete, "a delete moves it");
    let after = counter().await;
    assert_eq!(app.delete_loc(&loc("a")).await.status, 404);
    assert_eq!(counter().await, after, "deleting what is not there does not");
}

crate::both_backends!(
    the_writer_renders_changed_pages_ahead,
    a_replica_renders_what_another_changed,
    a_refresh_reads_the_table_again_only_when_the_counter_moved,
    the_change_counter_moves_with_changes_only,
);
