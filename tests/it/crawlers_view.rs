//! What people see of crawler telemetry: `GET /api/v1/crawlers` (scoped by token as every route), a record's
//! crawler reads in its lookup, the view's crawlers panel and per-page columns, and the state gauges of `/metrics`.
//! The telemetry is seeded through the store (`Store::record_crawls`) with rows made here, as the recorder's flush
//! writes them, so that every figure is known in advance.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sitemapd::domain::LastMod;
use sitemapd::page::PageState;
use sitemapd::store::{FetchRecord, PageRead};

use crate::both_backends;
use crate::support::{Backend, TestApp, urlencode};

const SITES: &str = "default=https://www.example.com/, shop=https://shop.example.com/";
const TOKENS: &str = "global-token, shop=shop-token";
const S: i64 = 1_000_000;

both_backends!(
    the_report_says_what_each_crawler_read,
    a_token_reads_the_crawlers_of_its_sites_only,
    a_record_says_when_each_major_crawler_read_its_page,
    the_view_shows_the_panel_and_a_column_per_major_crawler,
    a_records_screen_says_whether_each_major_crawler_read_it_since_its_change,
    the_metrics_give_the_last_verified_fetch_and_unseen_pages,
    with_telemetry_off_nothing_is_read_and_the_api_says_so,
    the_report_is_one_snapshot_while_flushes_go_on,
);

fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64
}

fn rfc3339(us: i64) -> String {
    LastMod::from_unix_micros(us).as_str().to_owned()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn get_as(app: &TestApp, token: &str, uri: &str) -> crate::support::TestResponse {
    app.get(uri, &[("authorization", &bearer(token))]).await
}

/// What was seeded, for the assertions.
struct Seeded {
    /// The default site's two pages: page 1 read by Googlebot at its current version, page 2 at an older one.
    page1: PageState,
    page2: PageState,
    /// Googlebot's verified fetches: the index at `index_us`, page 1's forms at `page1_us` (XML) and
    /// `page1_text_us` (text, later), page 2 at `page2_us`.
    index_us: i64,
    page1_us: i64,
    page1_text_us: i64,
    page2_us: i64,
    /// Bingbot's only fetch, claimed (from an address that is not Bing's).
    bing_claimed_us: i64,
    /// GPTBot's only fetch: its operator publishes nothing to verify it by.
    gpt_us: i64,
    /// The shop site's Googlebot index fetch.
    shop_index_us: i64,
}

fn fetch(site: i64, resource: &str, page_id: Option<i64>, crawler: &str, trust: &str, last_us: i64) -> FetchRecord {
    FetchRecord {
        site,
        resource: resource.into(),
        page_id,
        crawler: crawler.into(),
        trust: trust.into(),
        first_us: last_us - 3600 * S,
        last_us,
        last_status: 200,
        last_conditional: false,
        last_etag: "\"v1\"".into(),
        fetches: 5,
        not_modified: 2,
    }
}

/// Six URLs on the default site (pages of 4: page 1 holds 4, page 2 holds 2), one on the shop site, and the
/// telemetry of a Googlebot that read page 1's current version and page 2's before its last change, and a Bingbot
/// seen only from an address that is not Bing's.
async fn seed(app: &TestApp) -> Seeded {
    let locs: Vec<Value> = (1..=6).map(|i| json!({"loc": format!("https://www.example.com/p{i}")})).collect();
    let r = app.request_json_as("global-token", &Value::Array(locs)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let r = app.request_json_as("global-token", &json!([{"loc": "https://shop.example.com/x"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let sites = app.store.sites();
    let (www, shop) = (sites.by_name("default").unwrap().id, sites.by_name("shop").unwrap().id);
    let pages = app.store.pages(www).await.unwrap();
    assert_eq!(pages.iter().map(|p| (p.id, p.url_count)).collect::<Vec<_>>(), [(1, 4), (2, 2)]);
    let (page1, page2) = (pages[0].clone(), pages[1].clone());
    let now = now_us();
    let s = Seeded {
        index_us: now - 2 * 3600 * S,
        page1_us: now - 90 * 60 * S,
        page1_text_us: now - 80 * 60 * S,
        page2_us: now - 70 * 60 * S,
        bing_claimed_us: now - 10 * 60 * S,
        shop_index_us: now - 5 * 60 * S,
        gpt_us: now - 30 * 60 * S,
        page1,
        page2,
    };
    let fetches = vec![
        fetch(www, "sitemap.xml", None, "googlebot", "verified", s.index_us),
        fetch(www, "sitemap-1.xml", Some(1), "googlebot", "verified", s.page1_us),
        fetch(www, "sitemap-1.txt", Some(1), "googlebot", "verified", s.page1_text_us),
        fetch(www, "sitemap-2.xml", Some(2), "googlebot", "verified", s.page2_us),
        fetch(www, "sitemap.xml", None, "bingbot", "claimed", s.bing_claimed_us),
        fetch(www, "sitemap.xml", None, "gptbot", "unknown", s.gpt_us),
        fetch(shop, "sitemap.xml", None, "googlebot", "verified", s.shop_index_us),
    ];
    // Page 1: its current version, read 30 s after the change; page 2: a version 1,000 s older than its current one,
    // read 90 s after that change.
    let reads = vec![
        PageRead {
            site: www,
            page_id: 1,
            crawler: "googlebot".into(),
            version_us: s.page1.modified_us,
            first_us: s.page1.modified_us + 30 * S,
        },
        PageRead {
            site: www,
            page_id: 2,
            crawler: "googlebot".into(),
            version_us: s.page2.modified_us - 1000 * S,
            first_us: s.page2.modified_us - 910 * S,
        },
    ];
    let new = app.store.record_crawls(&fetches, &reads).await.unwrap();
    assert_eq!(new.len(), 2, "both reads are new: {new:?}");
    s
}

impl TestApp {
    async fn request_json_as(&self, token: &str, body: &Value) -> crate::support::TestResponse {
        let headers = [("content-type", "application/json"), ("authorization", &bearer(token))];
        self.request(axum::http::Method::PUT, "/api/v1/urls", &headers, axum::body::Body::from(body.to_string())).await
    }
}

async fn spawn(b: Backend, more: &[(&str, &str)]) -> TestApp {
    let mut vars = vec![("SITEMAPD_SITES", SITES), ("SITEMAPD_API_TOKENS", TOKENS), ("SITEMAPD_PAGE_MAX_URLS", "4")];
    vars.extend_from_slice(more);
    TestApp::spawn(b, &vars).await
}

async fn the_report_says_what_each_crawler_read(b: Backend) {
    let app = spawn(b, &[]).await;
    let s = seed(&app).await;
    let r = get_as(&app, "global-token", "/api/v1/crawlers?site=default").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({
            "telemetry": true,
            "window_days": 7,
            "sites": [{
                "site": "default",
                "crawlers": [
                    {
                        "crawler": "googlebot", "name": "Googlebot",
                        "last_index_fetch": rfc3339(s.index_us),
                        "last_page_fetch": rfc3339(s.page2_us),
                        "last_claimed_fetch": null, "last_unverifiable_fetch": null,
                        "fetches": 20, "not_modified_share": 0.4,
                        // Lags of 30 s and 90 s: nearest-rank median the lower, p90 the higher.
                        "lag_seconds": {"median": 30.0, "p90": 90.0, "samples": 2},
                        "unseen_pages": 1,
                        "oldest_unseen_change": rfc3339(s.page2.modified_us),
                    },
                    {
                        "crawler": "bingbot", "name": "Bingbot",
                        "last_index_fetch": null, "last_page_fetch": null,
                        "last_claimed_fetch": rfc3339(s.bing_claimed_us), "last_unverifiable_fetch": null,
                        "fetches": 0, "not_modified_share": null,
                        "lag_seconds": {"median": null, "p90": null, "samples": 0},
                        "unseen_pages": null, "oldest_unseen_change": null,
                    },
                    {
                        "crawler": "gptbot", "name": "GPTBot",
                        "last_index_fetch": null, "last_page_fetch": null,
                        "last_claimed_fetch": null, "last_unverifiable_fetch": rfc3339(s.gpt_us),
                        "fetches": 0, "not_modified_share": null,
                        "lag_seconds": {"median": null, "p90": null, "samples": 0},
                        "unseen_pages": null, "oldest_unseen_change": null,
                    },
                ],
            }],
        })
    );
    // Every site, in configuration order; the shop's index fetch is the shop's alone.
    let all = get_as(&app, "global-token", "/api/v1/crawlers").await.json();
    let sites: Vec<&str> = all["sites"].as_array().unwrap().iter().map(|s| s["site"].as_str().unwrap()).collect();
    assert_eq!(sites, ["default", "shop"]);
    let shop = &all["sites"][1]["crawlers"];
    assert_eq!(shop.as_array().unwrap().len(), 1, "{shop}");
    assert_eq!(shop[0]["last_index_fetch"], json!(rfc3339(s.shop_index_us)));
    assert_eq!(shop[0]["unseen_pages"], Value::Null, "no page of the shop read");
    // Bad queries: an unknown site, an unknown parameter.
    let r = get_as(&app, "global-token", "/api/v1/crawlers?site=nope").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert!(r.text().contains("site must name a configured site"), "{}", r.text());
    assert_eq!(get_as(&app, "global-token", "/api/v1/crawlers?crawler=x").await.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.get("/api/v1/crawlers", &[]).await.status, StatusCode::UNAUTHORIZED);
}

async fn a_token_reads_the_crawlers_of_its_sites_only(b: Backend) {
    let app = spawn(b, &[]).await;
    let s = seed(&app).await;
    let r = get_as(&app, "shop-token", "/api/v1/crawlers").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = r.json();
    let sites: Vec<&str> = body["sites"].as_array().unwrap().iter().map(|s| s["site"].as_str().unwrap()).collect();
    assert_eq!(sites, ["shop"], "only its site: {body}");
    assert_eq!(body["sites"][0]["crawlers"][0]["last_index_fetch"], json!(rfc3339(s.shop_index_us)));
    let r = get_as(&app, "shop-token", "/api/v1/crawlers?site=default").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert!(!r.text().contains("googlebot"), "nothing of the other site: {}", r.text());
    // An unknown site's error lists only the sites the token reaches.
    let r = get_as(&app, "shop-token", "/api/v1/crawlers?site=nope").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("shop") && !r.text().contains("www.example.com"), "{}", r.text());
}

async fn a_record_says_when_each_major_crawler_read_its_page(b: Backend) {
    let app = spawn(b, &[]).await;
    let s = seed(&app).await;
    let lookup = |loc: &str| {
        let uri = format!("/api/v1/urls?loc={}", urlencode(loc));
        let app = &app;
        async move {
            let r = get_as(app, "global-token", &uri).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            r.json()
        }
    };
    // p1 is on page 1: Googlebot read its current version (last read: the later of its two forms).
    let on_page1 = lookup("https://www.example.com/p1").await;
    assert_eq!(on_page1["sitemap"], "https://www.example.com/sitemap-1.xml");
    assert_eq!(
        on_page1["crawlers"],
        json!({
            "googlebot": {"last_read": rfc3339(s.page1_text_us), "read_since_change": true},
            "bingbot": {"last_read": null, "read_since_change": false},
        })
    );
    // p5 is on page 2: read, but not since its change.
    let on_page2 = lookup("https://www.example.com/p5").await;
    assert_eq!(on_page2["sitemap"], "https://www.example.com/sitemap-2.xml");
    assert_eq!(
        on_page2["crawlers"]["googlebot"],
        json!({"last_read": rfc3339(s.page2_us), "read_since_change": false})
    );
    // A change of p2, on page 1, after Googlebot's read: p2 is not read since its change; p1, unchanged, still is
    // (it followed the page before: false for both).
    let r = app.request_json_as("global-token", &json!([{"loc": "https://www.example.com/p2", "priority": 0.9}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let since = |record: &Value| record["crawlers"]["googlebot"]["read_since_change"].clone();
    let (p1, p2) = (lookup("https://www.example.com/p1").await, lookup("https://www.example.com/p2").await);
    assert_eq!((since(&p1), since(&p2)), (json!(true), json!(false)), "p1: {p1}\np2: {p2}");
    // Googlebot reads page 1's new version: p2's change is read.
    let page1 = app.store.page(app.store.sites().by_name("default").unwrap().id, s.page1.id).await.unwrap().unwrap();
    assert!(page1.modified_us > s.page1.modified_us);
    let read = PageRead {
        site: app.store.sites().by_name("default").unwrap().id,
        page_id: page1.id,
        crawler: "googlebot".into(),
        version_us: page1.modified_us,
        first_us: page1.modified_us + S,
    };
    app.store.record_crawls(&[], &[read]).await.unwrap();
    let (p1, p2) = (lookup("https://www.example.com/p1").await, lookup("https://www.example.com/p2").await);
    assert_eq!((since(&p1), since(&p2)), (json!(true), json!(true)), "p1: {p1}\np2: {p2}");
    // A listing carries no crawler reads (one read per record would make it O(records) reads).
    let list = get_as(&app, "global-token", "/api/v1/urls?site=default").await.json();
    assert!(list["items"][0].get("crawlers").is_none(), "{}", list["items"][0]);
}

async fn the_view_shows_the_panel_and_a_column_per_major_crawler(b: Backend) {
    let app = spawn(b, &[]).await;
    let s = seed(&app).await;
    let r = app.get("/view/default/", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let html = r.text();
    let panel = between(&html, "<h2 id=\"crawlers\">Crawlers</h2>", "</table>");
    let rows: Vec<&str> = panel.split("<tr").skip(2).collect();
    assert_eq!(rows.len(), 3, "Googlebot, Bingbot, GPTBot: {panel}");
    let google = rows[0];
    assert!(google.contains("Googlebot") && !google.contains("claimed, not verified"), "{google}");
    assert!(google.contains(">2 h ago</time>"), "last index read: {google}");
    assert!(google.contains(">1 h ago</time>"), "last page read, 70 min ago: {google}");
    assert!(google.contains("30 s / 1 min"), "lag median / p90: {google}");
    assert!(google.contains("40%") && google.contains("of 20 fetches"), "304 share: {google}");
    let oldest = LastMod::from_unix_micros(s.page2.modified_us.div_euclid(1000) * 1000);
    assert!(google.contains(">1 page, "), "pages not re-read: {google}");
    assert!(google.contains(&format!("datetime=\"{}\"", oldest.as_str())), "oldest unseen change: {google}");
    let bing = rows[1];
    assert!(bing.contains("Bingbot") && bing.contains("claimed, not verified"), "{bing}");
    assert!(bing.contains(">10 min ago</time>") && bing.contains("no page read yet"), "{bing}");
    let gpt = rows[2];
    assert!(gpt.contains("GPTBot") && !gpt.contains("claimed, not verified"), "{gpt}");
    assert!(gpt.contains("unverifiable fetches, last") && gpt.contains(">30 min ago</time>"), "{gpt}");

    // The page table: a column per major crawler.
    let table = between(&html, "<table class=\"cards pages crawled\">", "</table>");
    assert!(table.contains("<th scope=\"col\">Googlebot</th><th scope=\"col\">Bingbot</th>"), "{table}");
    let row = |id: i64| between(table, &format!("<tr id=\"page-{id}\""), "</tr>").to_owned();
    let (row1, row2) = (row(1), row(2));
    assert!(row1.contains("class=\"read current\"") && row1.contains(">read 1 h ago</time>"), "{row1}");
    assert!(row2.contains("class=\"read stale\"") && row2.contains(">not since change</time>"), "{row2}");
    assert_eq!(row1.matches(">never</td>").count(), 1, "Bingbot never read page 1 (verified): {row1}");
    assert!(!html.contains("<script"), "no script");
}

/// A record's lookup screen in the view says, per major crawler, what the API's lookup says: p1 (page 1, read at
/// its current version) read, p5 (page 2, read before its change) not since; with telemetry off, that it is off.
async fn a_records_screen_says_whether_each_major_crawler_read_it_since_its_change(b: Backend) {
    let app = spawn(b, &[]).await;
    seed(&app).await;
    let screen = |path: &'static str| {
        let app = &app;
        async move {
            let uri = format!("/view/default/lookup?loc={}", urlencode(&format!("https://www.example.com/{path}")));
            let r = app.get(&uri, &[]).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            r.text()
        }
    };
    let p1 = screen("p1").await;
    let reads = between(&p1, "<dl class=\"facts\" id=\"record-reads\">", "</dl>");
    assert!(reads.contains("<dt>Googlebot</dt><dd class=\"read current\">"), "{reads}");
    assert!(reads.contains(">read 1 h ago</time>"), "its page's last read, 80 min ago: {reads}");
    assert!(reads.contains("<dt>Bingbot</dt><dd class=\"read never\">never</dd>"), "claimed only: {reads}");
    let p5 = screen("p5").await;
    let reads = between(&p5, "<dl class=\"facts\" id=\"record-reads\">", "</dl>");
    assert!(reads.contains("<dd class=\"read stale\">") && reads.contains(">not since change</time>"), "{reads}");
    let off = app.another_process_with(&[("SITEMAPD_CRAWLER_TELEMETRY", "false")]).await;
    let html = off.get("/view/default/lookup?loc=https://www.example.com/p1", &[]).await.text();
    assert!(html.contains("id=\"record-crawlers-off\">Crawler telemetry is off.") && !html.contains("record-reads"));
}

/// The text of `html` after `start` up to `end`; panics when either is missing.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html.find(start).unwrap_or_else(|| panic!("{start:?} not in {html}")) + start.len();
    let len = html[from..].find(end).unwrap_or_else(|| panic!("{end:?} not after {start:?} in {html}"));
    &html[from..from + len]
}

async fn the_metrics_give_the_last_verified_fetch_and_unseen_pages(b: Backend) {
    let app = spawn(b, &[]).await;
    let s = seed(&app).await;
    let r = app.get("/metrics", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let text = r.text();
    let ours = ["sitemapd_crawler_last_verified_fetch_timestamp_seconds{", "sitemapd_crawler_unseen_pages{"];
    let lines: Vec<&str> = text.lines().filter(|l| ours.iter().any(|o| l.starts_with(o))).collect();
    let secs = |us: i64| us as f64 / 1e6;
    assert_eq!(
        lines,
        [
            format!(
                "sitemapd_crawler_last_verified_fetch_timestamp_seconds{{site=\"default\",crawler=\"googlebot\"}} {}",
                secs(s.page2_us)
            ),
            format!(
                "sitemapd_crawler_last_verified_fetch_timestamp_seconds{{site=\"shop\",crawler=\"googlebot\"}} {}",
                secs(s.shop_index_us)
            ),
            "sitemapd_crawler_unseen_pages{site=\"default\",crawler=\"googlebot\"} 1".to_owned(),
        ],
        "Bingbot and GPTBot have no verified fetch and no page read: no series"
    );
    assert!(text.contains("# TYPE sitemapd_crawler_unseen_pages gauge"), "{text}");
}

async fn with_telemetry_off_nothing_is_read_and_the_api_says_so(b: Backend) {
    let app = spawn(b, &[]).await;
    seed(&app).await;
    let off = app.another_process_with(&[("SITEMAPD_CRAWLER_TELEMETRY", "false")]).await;
    let r = get_as(&off, "global-token", "/api/v1/crawlers").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"telemetry": false, "window_days": 7, "sites": []}));
    let found = get_as(&off, "global-token", "/api/v1/urls?loc=https%3A%2F%2Fwww.example.com%2Fp1").await.json();
    assert!(found.get("crawlers").is_none(), "{found}");
    let html = off.get("/view/default/", &[]).await.text();
    assert!(!html.contains("Crawlers") && !html.contains("Googlebot"), "{html}");
    let text = off.get("/metrics", &[]).await.text();
    assert!(!text.contains("sitemapd_crawler_last_verified") && !text.contains("sitemapd_crawler_unseen"), "{text}");
}

/// `GET /api/v1/crawlers` reads its figures in one snapshot: while flushes go on, each adding one verified fetch of
/// a page and the first read of a new version of it (one lag sample), no answer has more lag samples than verified
/// fetches. Read apart, a flush between the reads paired its samples with the fetch count before it.
async fn the_report_is_one_snapshot_while_flushes_go_on(b: Backend) {
    let app = spawn(b, &[]).await;
    let r = app.request_json_as("global-token", &json!([{"loc": "https://www.example.com/p1"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let www = app.store.sites().by_name("default").unwrap().id;
    const FLUSHES: i64 = 300;
    let (store, now) = (app.store.clone(), now_us());
    let flusher = tokio::spawn(async move {
        for i in 0..FLUSHES {
            // Versions 10 s apart within the window, each read a second after it was made.
            let version = now - (FLUSHES - i) * 10 * S;
            let f = FetchRecord {
                first_us: version + S,
                fetches: 1,
                not_modified: 0,
                ..fetch(www, "sitemap-1.xml", Some(1), "googlebot", "verified", version + S)
            };
            let read = PageRead {
                site: www,
                page_id: 1,
                crawler: "googlebot".into(),
                version_us: version,
                first_us: version + S,
            };
            store.record_crawls(&[f], &[read]).await.unwrap();
        }
    });
    let figures = |report: &Value| {
        let crawlers = report["sites"][0]["crawlers"].as_array().cloned().unwrap_or_default();
        crawlers
            .iter()
            .find(|c| c["crawler"] == "googlebot")
            .map(|g| (g["fetches"].as_i64().unwrap(), g["lag_seconds"]["samples"].as_i64().unwrap()))
    };
    let (mut answers, mut torn) = (0, Vec::new());
    while !flusher.is_finished() {
        let report = get_as(&app, "global-token", "/api/v1/crawlers?site=default").await.json();
        if let Some((fetches, samples)) = figures(&report).filter(|(f, s)| s > f) {
            torn.push((fetches, samples));
        }
        answers += 1;
    }
    flusher.await.unwrap();
    assert!(torn.is_empty(), "{b:?}: {} of {answers} answers had more lag samples than fetches: {torn:?}", torn.len());
    let report = get_as(&app, "global-token", "/api/v1/crawlers?site=default").await.json();
    assert_eq!(figures(&report), Some((FLUSHES, FLUSHES)));
}
