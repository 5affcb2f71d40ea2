//! URL health end to end: the real checker ([`Checker::drain`]) against the loopback test site
//! ([`super::health_site`]), the findings read from the store, the sitemaps through the router. Each case is
//! recorded as such; a transient failure is retried and never excludes; `exclude` leaves out exactly the definite
//! problems, puts a fixed URL back, and changes only their pages; the host's concurrency and rate hold, counted by
//! the site; the `User-Agent` names sitemapd and its version; an unchanged page is asked for conditionally.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sitemapd::checker::{Checker, Notify};
use sitemapd::health::Kind;
use sitemapd::store::UrlCheck;

use crate::both_backends;
use crate::health_site::{HUGE_BYTES, TestSite, path};
use crate::support::{Backend, TestApp};

both_backends!(
    each_case_is_recorded_as_such,
    a_transient_failure_is_retried_and_an_unchanged_page_asked_conditionally,
    exclude_leaves_out_the_definite_problems_and_puts_a_fixed_one_back,
    report_changes_no_page,
    one_request_in_flight_per_host,
    the_rate_holds_between_request_starts,
    two_checkers_share_the_work,
    the_running_checker_walks_to_the_end_again,
);

/// The service with its public URL on `site`, checked with `policy`; `vars` on top.
async fn app(backend: Backend, site: &TestSite, policy: &str, vars: &[(&str, &str)]) -> TestApp {
    let mut all = vec![
        ("SITEMAPD_PUBLIC_URL", site.base.as_str()),
        ("SITEMAPD_HEALTH_CHECK", policy),
        ("SITEMAPD_HEALTH_TIMEOUT", "1s"),
        ("SITEMAPD_HEALTH_RATE", "1000"),
        ("SITEMAPD_HEALTH_HEAD_BYTES", "16384"),
    ];
    all.extend_from_slice(vars);
    TestApp::spawn(backend, &all).await
}

fn checker(app: &TestApp) -> Checker {
    let notify: Arc<dyn Notify> = Arc::new(app.state.clone().expect("a state"));
    Checker::new(app.store.clone(), &app.config, notify).expect("the checker builds")
}

async fn put(app: &TestApp, site: &TestSite, paths: &[&str]) {
    let entries: Vec<Value> = paths.iter().map(|p| json!({"loc": site.loc(p)})).collect();
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

async fn health(app: &TestApp, site: &TestSite, path: &str) -> UrlCheck {
    let id = app.store.sites().only().unwrap().id;
    app.store.health_of(id, &site.loc(path)).await.unwrap().unwrap_or_else(|| panic!("{path} is not tracked"))
}

/// Every tracked URL due now, as if its time had come.
async fn all_due(app: &TestApp) {
    app.exec_sql("UPDATE url_checks SET due_us = 0").await;
}

fn kinds(check: &UrlCheck) -> Vec<Kind> {
    check.problems.iter().collect()
}

fn transient(check: &UrlCheck) -> Option<String> {
    check.transient.clone()
}

async fn each_case_is_recorded_as_such(backend: Backend) {
    let site = TestSite::start();
    let app = app(backend, &site, "report", &[]).await;
    let paths = [
        path::OK,
        path::MOVED_301,
        path::MOVED_302,
        path::MOVED_308,
        path::MISSING,
        path::GONE,
        path::BUSY,
        path::NOINDEX_HEADER,
        path::NOINDEX_GOOGLEBOT,
        path::NOINDEX_META,
        path::CANONICAL_SELF,
        path::CANONICAL_LINK,
        path::CANONICAL_HEADER,
        path::PRIVATE,
        path::SLOW,
        path::HUGE,
        path::OFFSITE,
    ];
    put(&app, &site, &paths).await;
    let checks = checker(&app).drain().await.unwrap();
    assert_eq!(checks, paths.len());

    let ok = health(&app, &site, path::OK).await;
    assert_eq!((ok.status, kinds(&ok), transient(&ok)), (Some(200), vec![], None));
    assert!(ok.checked_us.is_some());
    for (p, to) in [
        (path::MOVED_301, site.loc(path::OK)),
        (path::MOVED_302, site.loc(path::OK)),
        (path::MOVED_308, site.loc(path::CHAIN)),
        (path::OFFSITE, "http://elsewhere.invalid/page".to_owned()),
    ] {
        let c = health(&app, &site, p).await;
        assert_eq!(kinds(&c), vec![Kind::Redirect], "{p}");
        assert_eq!(c.location.as_deref(), Some(to.as_str()), "{p}: the target is recorded");
    }
    // Redirects are recorded, never followed: the chain's first hop was never asked for.
    assert_eq!(site.count(path::CHAIN), 0);
    assert_eq!(kinds(&health(&app, &site, path::MISSING).await), vec![Kind::NotFound]);
    assert_eq!(kinds(&health(&app, &site, path::GONE).await), vec![Kind::Gone]);
    for p in [path::NOINDEX_HEADER, path::NOINDEX_GOOGLEBOT, path::NOINDEX_META] {
        let c = health(&app, &site, p).await;
        assert_eq!(kinds(&c), vec![Kind::Noindex], "{p}");
        assert!(c.noindex_by.is_some(), "{p}");
    }
    assert_eq!(kinds(&health(&app, &site, path::CANONICAL_SELF).await), vec![], "a canonical naming itself");
    for p in [path::CANONICAL_LINK, path::CANONICAL_HEADER] {
        let c = health(&app, &site, p).await;
        assert_eq!(kinds(&c), vec![Kind::Canonical], "{p}");
        assert_eq!(c.canonical.as_deref(), Some(site.loc(path::OK).as_str()), "{p}");
    }
    // Disallowed for Googlebot: recorded without fetching the page; robots.txt asked for once.
    assert_eq!(kinds(&health(&app, &site, path::PRIVATE).await), vec![Kind::Disallowed]);
    assert_eq!(site.count(path::PRIVATE), 0);
    assert_eq!(site.count("/robots.txt"), 1);
    // Transient: never a problem.
    let busy = health(&app, &site, path::BUSY).await;
    assert_eq!(kinds(&busy), vec![]);
    assert!(transient(&busy).is_some_and(|t| t.starts_with("rate_limited")), "{busy:?}");
    let slow = health(&app, &site, path::SLOW).await;
    assert_eq!(kinds(&slow), vec![]);
    assert!(transient(&slow).is_some_and(|t| t.starts_with("timeout")), "{slow:?}");
    // The huge page: judged on its head, only a prefix read (socket buffers hold a few MiB at most).
    let huge = health(&app, &site, path::HUGE).await;
    assert_eq!((huge.status, kinds(&huge), transient(&huge)), (Some(200), vec![], None));
    assert!(site.huge_sent() < HUGE_BYTES / 2, "{} of {HUGE_BYTES} bytes sent", site.huge_sent());
    // Every request named sitemapd and its version.
    let agents = site.user_agents();
    assert_eq!(agents.len(), paths.len(), "each page but the disallowed one, and robots.txt");
    let ours = format!("sitemapd/{}", env!("CARGO_PKG_VERSION"));
    assert!(agents.iter().all(|ua| ua.contains(&ours)), "{agents:?}");
    // Nothing due any more: a second drain checks nothing.
    assert_eq!(checker(&app).drain().await.unwrap(), 0);
}

async fn a_transient_failure_is_retried_and_an_unchanged_page_asked_conditionally(backend: Backend) {
    let site = TestSite::start();
    let app = app(backend, &site, "exclude", &[]).await;
    put(&app, &site, &[path::OK, path::FLAKY]).await;
    let checker = checker(&app);
    assert_eq!(checker.drain().await.unwrap(), 2);
    let flaky = health(&app, &site, path::FLAKY).await;
    assert!(transient(&flaky).is_some_and(|t| t.starts_with("server_error")), "{flaky:?}");
    assert_eq!((kinds(&flaky), flaky.excluded, flaky.attempts), (vec![], false, 1));
    // Its retry is backed off: not due yet.
    assert_eq!(checker.drain().await.unwrap(), 0);
    assert_eq!(site.count(path::FLAKY), 1);

    all_due(&app).await;
    assert_eq!(checker.drain().await.unwrap(), 2);
    let flaky = health(&app, &site, path::FLAKY).await;
    assert_eq!((flaky.status, kinds(&flaky), transient(&flaky), flaky.attempts), (Some(200), vec![], None, 0));
    // The unchanged page: asked with its ETag, answered 304, still healthy with its status.
    assert_eq!(site.count(path::OK), 2);
    assert_eq!(site.not_modified(), 1);
    let ok = health(&app, &site, path::OK).await;
    assert_eq!((ok.status, kinds(&ok), ok.excluded), (Some(200), vec![], false));
}

/// Each page's (ETag, locs) through the router; `None` for a page not served (404: every entry left out).
/// `fresh`: asked with `Cache-Control: no-cache`, so the page table is read again.
async fn pages(app: &TestApp, n: usize, fresh: bool) -> Vec<Option<(String, Vec<String>)>> {
    let mut out = Vec::new();
    let headers: &[(&str, &str)] = if fresh { &[("cache-control", "no-cache")] } else { &[] };
    for page in 1..=n {
        let r = app.get(&format!("/sitemap-{page}.xml"), headers).await;
        if r.status == 404 {
            out.push(None);
            continue;
        }
        assert_eq!(r.status, 200, "page {page}");
        out.push(Some((r.header("etag").unwrap().to_owned(), crate::support::xml_texts(&r.text(), "loc"))));
    }
    out
}

fn locs(page: &Option<(String, Vec<String>)>) -> Vec<String> {
    page.as_ref().map(|(_, locs)| locs.clone()).unwrap_or_default()
}

fn etag(page: &Option<(String, Vec<String>)>) -> Option<String> {
    page.as_ref().map(|(etag, _)| etag.clone())
}

async fn exclude_leaves_out_the_definite_problems_and_puts_a_fixed_one_back(backend: Backend) {
    let site = TestSite::start();
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "2"), ("SITEMAPD_STATE_TTL", "60s")];
    let app = app(backend, &site, "exclude", &vars).await;
    // Page 1: healthy; page 2: a 404 and a 429; page 3: a 404 that gets fixed and a noindex.
    put(&app, &site, &[path::OK, path::CANONICAL_SELF]).await;
    put(&app, &site, &[path::MISSING, path::BUSY]).await;
    put(&app, &site, &[path::FIXABLE, path::NOINDEX_HEADER]).await;
    let before = pages(&app, 3, true).await;
    assert_eq!(locs(&before[2]), vec![site.loc(path::FIXABLE), site.loc(path::NOINDEX_HEADER)]);

    let checker = checker(&app);
    assert_eq!(checker.drain().await.unwrap(), 6);
    // No `no-cache` here: the checker told the state, so the next answer is of the new page table.
    let after = pages(&app, 3, false).await;
    assert_eq!(after[0], before[0], "a page without a problem is untouched");
    assert_ne!(etag(&after[1]), etag(&before[1]));
    assert_eq!(locs(&after[1]), vec![site.loc(path::BUSY)], "the 404 is out, the 429 (transient) stays");
    assert_eq!(after[2], None, "every entry of page 3 is out: not served");
    for p in [path::MISSING, path::FIXABLE, path::NOINDEX_HEADER] {
        assert!(health(&app, &site, p).await.excluded, "{p}");
    }
    assert!(!health(&app, &site, path::BUSY).await.excluded);

    // The site fixes one: the next check puts it back in its own page; the other pages stay as they were.
    site.fix();
    all_due(&app).await;
    checker.drain().await.unwrap();
    let fixed = pages(&app, 3, false).await;
    assert_eq!(locs(&fixed[2]), vec![site.loc(path::FIXABLE)]);
    assert_ne!(etag(&fixed[2]), etag(&before[2]));
    assert_eq!(fixed[0], after[0]);
    assert_eq!(fixed[1], after[1]);
    let c = health(&app, &site, path::FIXABLE).await;
    assert_eq!((c.excluded, kinds(&c), c.status), (false, vec![], Some(200)));

    // A restart with `report`: every exclusion undone, each in its page.
    let reporting = app.another_process_with(&[("SITEMAPD_HEALTH_CHECK", "report")]).await;
    let notify: Arc<dyn Notify> = Arc::new(reporting.state.clone().unwrap());
    Checker::new(reporting.store.clone(), &reporting.config, notify).unwrap().restore().await;
    let restored = pages(&reporting, 3, true).await;
    assert_eq!(restored[0], after[0]);
    assert_eq!(locs(&restored[1]), vec![site.loc(path::MISSING), site.loc(path::BUSY)]);
    assert_eq!(locs(&restored[2]), vec![site.loc(path::FIXABLE), site.loc(path::NOINDEX_HEADER)]);
    assert!(!health(&app, &site, path::MISSING).await.excluded);
}

async fn report_changes_no_page(backend: Backend) {
    let site = TestSite::start();
    let app = app(backend, &site, "report", &[]).await;
    put(&app, &site, &[path::OK, path::MISSING, path::NOINDEX_META]).await;
    let before = pages(&app, 1, true).await;
    assert_eq!(checker(&app).drain().await.unwrap(), 3);
    assert_eq!(pages(&app, 1, true).await, before);
    let missing = health(&app, &site, path::MISSING).await;
    assert_eq!((kinds(&missing), missing.excluded), (vec![Kind::NotFound], false));
}

async fn one_request_in_flight_per_host(backend: Backend) {
    for (concurrency, most) in [("1", 1), ("3", 3)] {
        let site = TestSite::start();
        let app = app(backend, &site, "report", &[("SITEMAPD_HEALTH_CONCURRENCY", concurrency)]).await;
        let paths: Vec<String> = (0..9).map(|i| format!("{}{i}", path::SLOWISH)).collect();
        put(&app, &site, &paths.iter().map(String::as_str).collect::<Vec<_>>()).await;
        assert_eq!(checker(&app).drain().await.unwrap(), 9);
        // Each page takes 150 ms and slots come every millisecond: only the semaphore keeps them apart.
        assert_eq!(site.most_in_flight(), most, "concurrency {concurrency}");
        assert_eq!(site.overlapped_path(), None, "no URL was fetched twice at once");
    }
}

async fn the_rate_holds_between_request_starts(backend: Backend) {
    let site = TestSite::start();
    let app =
        app(backend, &site, "report", &[("SITEMAPD_HEALTH_RATE", "5"), ("SITEMAPD_HEALTH_CONCURRENCY", "4")]).await;
    let paths: Vec<String> = (0..20).map(|i| format!("/page-{i}")).collect();
    put(&app, &site, &paths.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(checker(&app).drain().await.unwrap(), 20);
    let gaps = site.gaps();
    assert_eq!(gaps.len(), 19);
    // 5 a second, measured at the site. A request may arrive late on a loaded machine (so one gap shrinks and
    // the one before it grows), but never early: the 20 arrivals span at least 19 slots but one slot's slack, and
    // no second holds more than 5 arrivals and one late one. Without the slots they arrive within milliseconds.
    let span: Duration = gaps.iter().sum();
    assert!(span >= Duration::from_millis(19 * 200 - 200), "{span:?}: {gaps:?}");
    let mut at = vec![Duration::ZERO];
    at.extend(gaps.iter().scan(Duration::ZERO, |t, g| {
        *t += *g;
        Some(*t)
    }));
    let busiest = at.iter().map(|t0| at.iter().filter(|t| **t >= *t0 && **t < *t0 + Duration::from_secs(1)).count());
    assert!(busiest.max().unwrap() <= 6, "{gaps:?}");
}

/// Two processes on one database, each with its checker: every URL checked once, none twice at once.
async fn two_checkers_share_the_work(backend: Backend) {
    let site = TestSite::start();
    let app =
        app(backend, &site, "report", &[("SITEMAPD_HEALTH_CONCURRENCY", "3"), ("SITEMAPD_HEALTH_RATE", "1")]).await;
    let other = app.another_process().await;
    let paths: Vec<String> = (0..12).map(|i| format!("{}{i}", path::SLOWISH)).collect();
    put(&app, &site, &paths.iter().map(String::as_str).collect::<Vec<_>>()).await;
    // Rate 1: a claim takes at most 10 URLs, so the second checker finds some left while the first works.
    let (one, two) = (checker(&app), checker(&other));
    let (a, b) = tokio::join!(one.drain(), two.drain());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a + b, 12, "{a} + {b}");
    assert!(a > 0 && b > 0, "both took a share: {a} + {b}");
    for p in &paths {
        assert_eq!(site.count(p), 1, "{p}");
    }
    assert_eq!(site.overlapped_path(), None);
}

/// The running checker (its task, not `drain`): URLs written after its walk first found the site empty are checked
/// as the write queued them, and the summary says `seeded` (no stored URL is left unqueued), as the view and the
/// API show it.
async fn the_running_checker_walks_to_the_end_again(backend: Backend) {
    let site = TestSite::start();
    let app = app(backend, &site, "report", &[("SITEMAPD_TEST_TUNING", "health_poll=20ms")]).await;
    let running = checker(&app).spawn();
    // Not a gate: time for the walk to find the site empty first; had it not, what follows holds all the same.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    put(&app, &site, &[path::OK, path::MISSING]).await;
    let id = app.store.sites().only().unwrap().id;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let summary = loop {
        let summary = app.store.health_summary(id).await.unwrap();
        if summary.checked == 2 && summary.seeded {
            break summary;
        }
        assert!(std::time::Instant::now() < deadline, "after 30 s: {summary:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!((summary.tracked, summary.healthy), (2, 1), "{summary:?}");
    running.stop(std::time::Duration::from_secs(5)).await;
}
