//! Crawler telemetry through the real router: who is a crawler and whether it is verified (by a test range file
//! of loopback addresses), the client address behind trusted proxies only, what is recorded per resource, the
//! change-to-read lag closed by the right fetch, two processes on one database combining, a flood that stays
//! bounded, and telemetry off.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, TestResponse};
use sitemapd::store::{FetchRecord, PageRead};

const GOOGLEBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) \
     Chrome/131.0.6778.204 Safari/537.36";
const BINGBOT: &str = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
/// Googlebot's test range holds this address (and Bingbot's 127.0.0.4); 127.0.0.3 is in none.
const GOOGLE_ADDR: &str = "127.0.0.2:50000";
const BING_ADDR: &str = "127.0.0.4:50000";
const OTHER_ADDR: &str = "127.0.0.3:50000";

fn ranges() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/crawlers");
    format!("googlebot={dir}/googlebot-loopback.json, bingbot={dir}/bingbot-loopback.txt")
}

async fn spawn(b: Backend, more: &[(&str, &str)]) -> TestApp {
    let ranges = ranges();
    let mut vars = vec![
        ("SITEMAPD_CRAWLER_RANGES", ranges.as_str()),
        ("SITEMAPD_CRAWLER_RDNS", "false"),
        // Flushed by the tests themselves.
        ("SITEMAPD_TEST_TUNING", "crawler_flush=5m"),
        ("SITEMAPD_PAGE_MAX_URLS", "2"),
    ];
    vars.extend_from_slice(more);
    let app = TestApp::spawn(b, &vars).await;
    // The configured files are read by the refresh task as it starts: wait until Googlebot's are in.
    wait_for_ranges(&app).await;
    app
}

async fn wait_for_ranges(app: &TestApp) {
    let recorder = app.state.as_ref().unwrap().crawl_recorder().expect("telemetry on");
    for _ in 0..200 {
        let ranges = recorder.verifier().ranges();
        if ranges.contains_key(&sitemapd::crawler::Crawler::Googlebot)
            && ranges.contains_key(&sitemapd::crawler::Crawler::Bingbot)
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the configured range files were not read");
}

async fn flush(app: &TestApp) {
    app.state.as_ref().unwrap().crawl_recorder().expect("telemetry on").flush().await;
}

/// A GET from `peer` with `agent` and `headers`.
async fn get_as(app: &TestApp, peer: &str, agent: &str, uri: &str, headers: &[(&str, &str)]) -> TestResponse {
    let mut builder = Request::builder().method(Method::GET).uri(uri).header("user-agent", agent);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let mut request = builder.body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    app.send(request).await
}

async fn put(app: &TestApp, paths: &[&str]) {
    let body: Vec<_> = paths.iter().map(|p| json!({"loc": format!("{PUBLIC_URL}/{p}")})).collect();
    let r = app.put_json(&json!(body)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

async fn fetches(app: &TestApp) -> Vec<FetchRecord> {
    let mut rows = app.store.crawler_fetches(1).await.unwrap();
    rows.sort_by(|a, b| (&a.resource, &a.crawler, &a.trust).cmp(&(&b.resource, &b.crawler, &b.trust)));
    rows
}

fn row<'r>(rows: &'r [FetchRecord], resource: &str, crawler: &str, trust: &str) -> &'r FetchRecord {
    rows.iter()
        .find(|r| r.resource == resource && r.crawler == crawler && r.trust == trust)
        .unwrap_or_else(|| panic!("no {resource} {crawler} {trust} row in {rows:#?}"))
}

async fn seen(app: &TestApp, page: i64) -> Vec<PageRead> {
    app.store.crawler_seen(1, Some(page)).await.unwrap()
}

async fn a_crawler_is_verified_by_its_ranges_and_a_forged_one_is_not(b: Backend) {
    let app = spawn(b, &[]).await;
    put(&app, &["a", "b", "c"]).await;
    let index = get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap.xml", &[]).await;
    assert_eq!(index.status, StatusCode::OK);
    let page = get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml.gz", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    let etag = page.header("etag").unwrap().to_owned();
    let again = get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml.gz", &[("if-none-match", &etag)]).await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    // The same agent from an address outside Google's ranges: a claim, never verified.
    get_as(&app, OTHER_ADDR, GOOGLEBOT, "/sitemap-1.xml", &[]).await;
    get_as(&app, OTHER_ADDR, GOOGLEBOT, "/sitemap.xml", &[]).await;
    // Bingbot from Google's address is no Bingbot; a browser is nobody; a 404 is no fetch.
    get_as(&app, GOOGLE_ADDR, BINGBOT, "/sitemap-2.xml", &[]).await;
    get_as(&app, GOOGLE_ADDR, BROWSER, "/sitemap-2.xml", &[]).await;
    assert_eq!(get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-9.xml", &[]).await.status, StatusCode::NOT_FOUND);
    flush(&app).await;

    let rows = fetches(&app).await;
    assert_eq!(rows.len(), 5, "{rows:#?}");
    let verified = row(&rows, "sitemap-1.xml", "googlebot", "verified");
    assert_eq!((verified.fetches, verified.not_modified), (2, 1));
    assert_eq!((verified.last_status, verified.last_conditional), (304, true));
    assert_eq!(verified.last_etag, etag);
    assert_eq!(verified.page_id, Some(1));
    assert!(verified.first_us < verified.last_us);
    assert_eq!(row(&rows, "sitemap.xml", "googlebot", "verified").page_id, None);
    for (resource, crawler) in
        [("sitemap-1.xml", "googlebot"), ("sitemap.xml", "googlebot"), ("sitemap-2.xml", "bingbot")]
    {
        let claimed = row(&rows, resource, crawler, "claimed");
        assert_eq!((claimed.fetches, claimed.last_status, claimed.last_conditional), (1, 200, false));
    }
    assert!(rows.iter().all(|r| r.crawler != "other-bot"), "a browser is not a crawler");
    // Only the verified fetch read the page.
    let reads = seen(&app, 1).await;
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert_eq!(reads[0].crawler, "googlebot");
    assert!(seen(&app, 2).await.is_empty(), "a claimed Bingbot read nothing");
}

async fn a_forwarding_header_counts_only_from_a_trusted_proxy(b: Backend) {
    let app = spawn(b, &[("SITEMAPD_TRUSTED_PROXIES", "127.0.0.9")]).await;
    put(&app, &["a"]).await;
    let page = "/sitemap-1.xml";
    // From an untrusted peer, neither header is read: the peer's own address (not Google's) is the client's.
    get_as(&app, OTHER_ADDR, GOOGLEBOT, page, &[("x-forwarded-for", "127.0.0.2")]).await;
    get_as(&app, OTHER_ADDR, GOOGLEBOT, page, &[("forwarded", "for=127.0.0.2")]).await;
    flush(&app).await;
    let rows = fetches(&app).await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!((row(&rows, "sitemap-1.xml", "googlebot", "claimed").fetches), 2);

    // From the trusted proxy: the address it appended is the client's.
    get_as(&app, "127.0.0.9:1", GOOGLEBOT, page, &[("x-forwarded-for", "127.0.0.2")]).await;
    // The client wrote 127.0.0.2 itself; the proxy appended the address it saw: that one counts.
    get_as(&app, "127.0.0.9:1", GOOGLEBOT, page, &[("x-forwarded-for", "127.0.0.2, 127.0.0.3")]).await;
    // The other header is not the configured one (X-Forwarded-*): ignored, so the proxy itself is the client.
    get_as(&app, "127.0.0.9:1", GOOGLEBOT, page, &[("forwarded", "for=127.0.0.2")]).await;
    flush(&app).await;
    let rows = fetches(&app).await;
    assert_eq!(row(&rows, "sitemap-1.xml", "googlebot", "verified").fetches, 1, "{rows:#?}");
    assert_eq!(row(&rows, "sitemap-1.xml", "googlebot", "claimed").fetches, 4);
}

async fn forwarded_for_is_read_when_it_is_the_configured_header(b: Backend) {
    let app = spawn(b, &[("SITEMAPD_TRUSTED_PROXIES", "127.0.0.9"), ("SITEMAPD_FORWARDED_HEADER", "forwarded")]).await;
    put(&app, &["a"]).await;
    let page = "/sitemap-1.xml";
    get_as(&app, "127.0.0.9:1", GOOGLEBOT, page, &[("forwarded", "for=\"127.0.0.2:4711\";host=localhost")]).await;
    get_as(&app, "127.0.0.9:1", GOOGLEBOT, page, &[("x-forwarded-for", "127.0.0.2")]).await;
    get_as(&app, "127.0.0.9:1", GOOGLEBOT, page, &[("forwarded", "for=unknown")]).await;
    flush(&app).await;
    let rows = fetches(&app).await;
    assert_eq!(row(&rows, "sitemap-1.xml", "googlebot", "verified").fetches, 1, "{rows:#?}");
    assert_eq!(row(&rows, "sitemap-1.xml", "googlebot", "claimed").fetches, 2);
}

async fn the_lag_is_closed_by_the_first_read_of_the_new_version_only(b: Backend) {
    let app = spawn(b, &[]).await;
    put(&app, &["a"]).await;
    let before = get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml", &[]).await;
    let old_etag = before.header("etag").unwrap().to_owned();
    flush(&app).await;
    let v0 = app.store.page(1, 1).await.unwrap().unwrap().modified_us;
    assert_eq!(seen(&app, 1).await.iter().map(|r| r.version_us).collect::<Vec<_>>(), vec![v0]);

    // The page changes: the read before the change does not close it, nor does a claimed read after it.
    // Not a gate: 20 ms between the versions, a distance the lags below are measured against.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    put(&app, &["b"]).await;
    let v1 = app.store.page(1, 1).await.unwrap().unwrap().modified_us;
    assert!(v1 > v0);
    get_as(&app, OTHER_ADDR, GOOGLEBOT, "/sitemap-1.xml", &[]).await;
    flush(&app).await;
    let newest = |reads: Vec<PageRead>| reads.into_iter().map(|r| (r.crawler, r.version_us)).collect::<Vec<_>>();
    assert_eq!(newest(seen(&app, 1).await), vec![("googlebot".to_owned(), v0)], "not yet read since the change");

    // Googlebot's conditional request with the old ETag gets the new version: that read closes the lag.
    // Not a gate: the lag from the change is at least these 20 ms (asserted below).
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let after = get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml", &[("if-none-match", &old_etag)]).await;
    assert_eq!(after.status, StatusCode::OK);
    // Bingbot asks with the new ETag (a 304): it has the new version too.
    let new_etag = after.header("etag").unwrap().to_owned();
    let bing = get_as(&app, BING_ADDR, BINGBOT, "/sitemap-1.xml", &[("if-none-match", &new_etag)]).await;
    assert_eq!(bing.status, StatusCode::NOT_MODIFIED);
    // A later read of the same version is no new close.
    get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml", &[]).await;
    flush(&app).await;
    let mut reads = seen(&app, 1).await;
    reads.sort_by(|a, b| a.crawler.cmp(&b.crawler));
    assert_eq!(newest(reads.clone()), vec![("bingbot".to_owned(), v1), ("googlebot".to_owned(), v1)]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let google = &reads[1];
    assert!(google.first_us - v1 >= 20_000 && google.first_us <= now, "lag from the change: {google:?}, {v1}");
    // One lag per version read: v0 (read at once) and v1 for Googlebot, v1 for Bingbot.
    let mut lags = app.store.crawler_lags(1, 0, 100).await.unwrap();
    lags.sort();
    assert_eq!(lags.len(), 3, "{lags:?}");
    assert!(lags.iter().all(|(_, lag)| *lag >= 0));
    // The metrics saw them.
    let metrics = app.get("/metrics", &[]).await.text();
    assert!(metrics.contains("sitemapd_crawler_lag_seconds_count{crawler=\"googlebot\"}"), "{metrics}");
    // Every series is exported at 0 from the start: the count must have moved, not just be there.
    let verified = metrics.lines().find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let ours = series.starts_with("sitemapd_crawler_fetches_total{")
            && ["crawler=\"googlebot\"", "verification=\"verified\"", "status=\"200\""]
                .iter()
                .all(|p| series.contains(p));
        ours.then(|| value.parse::<f64>().ok()).flatten()
    });
    assert!(verified.is_some_and(|n| n >= 1.0), "{verified:?}: {metrics}");
}

async fn two_processes_on_one_database_combine_their_records(b: Backend) {
    let a = spawn(b, &[]).await;
    let other = a.another_process().await;
    wait_for_ranges(&other).await;
    put(&a, &["a"]).await;
    for _ in 0..3 {
        get_as(&a, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml", &[]).await;
    }
    // Not a gate: the other process's fetch is dated later than these, so that it is the last.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let last = get_as(&other, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml.gz", &[]).await;
    tokio::join!(flush(&a), flush(&other));
    let rows = fetches(&a).await;
    let merged = row(&rows, "sitemap-1.xml", "googlebot", "verified");
    assert_eq!(merged.fetches, 4);
    // The later fetch's answer is the last, whichever process flushed first.
    assert_eq!(merged.last_etag, last.header("etag").unwrap());
    // Both read one version: one read, first by the earlier fetch.
    let reads = seen(&other, 1).await;
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert!(reads[0].first_us < merged.last_us);
    // Flushed again with nothing new: nothing changes.
    tokio::join!(flush(&a), flush(&other));
    assert_eq!(fetches(&other).await, rows);
}

async fn a_flood_of_agents_and_addresses_is_recorded_within_bounds(b: Backend) {
    let app = spawn(b, &[]).await;
    put(&app, &["a", "b", "c"]).await;
    let paths = ["/sitemap.xml", "/sitemap-1.xml", "/sitemap-2.xml.gz", "/sitemap-1.txt"];
    for n in 0..3000u32 {
        let agent = match n % 3 {
            0 => format!("{GOOGLEBOT} {n}"),
            1 => format!("ExampleBot/{n} (+https://example.com/{n})"),
            _ => format!("Mozilla/5.0 crawler-é{n}"),
        };
        let peer = SocketAddr::from(([127, (n >> 16) as u8, (n >> 8) as u8, n as u8], 1000));
        get_as(&app, &peer.to_string(), &agent, paths[n as usize % paths.len()], &[]).await;
    }
    flush(&app).await;
    let rows = fetches(&app).await;
    // Every agent maps to a crawler of the table and every address to a trust: the rows are bounded by the files.
    assert!(rows.len() <= paths.len() * 3, "{}", rows.len());
    assert_eq!(rows.iter().map(|r| r.fetches).sum::<i64>(), 3000);
}

async fn telemetry_off_records_nothing(b: Backend) {
    let ranges = ranges();
    let app = TestApp::spawn(b, &[("SITEMAPD_CRAWLER_TELEMETRY", "false"), ("SITEMAPD_CRAWLER_RANGES", &ranges)]).await;
    assert!(app.state.as_ref().unwrap().crawl_recorder().is_none());
    put(&app, &["a"]).await;
    assert_eq!(get_as(&app, GOOGLE_ADDR, GOOGLEBOT, "/sitemap-1.xml", &[]).await.status, StatusCode::OK);
    assert!(app.store.crawler_fetches(1).await.unwrap().is_empty());
}

both_backends!(
    a_crawler_is_verified_by_its_ranges_and_a_forged_one_is_not,
    a_forwarding_header_counts_only_from_a_trusted_proxy,
    forwarded_for_is_read_when_it_is_the_configured_header,
    the_lag_is_closed_by_the_first_read_of_the_new_version_only,
    two_processes_on_one_database_combine_their_records,
    a_flood_of_agents_and_addresses_is_recorded_within_bounds,
    telemetry_off_records_nothing,
);
