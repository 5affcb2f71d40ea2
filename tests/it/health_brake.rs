//! URL health's brake and fast recovery end to end: the real checker ([`Checker::drain`]) against the loopback test
//! site ([`super::health_site`]) failing as a whole (a firewall's 403, a login wall, a maintenance `noindex`, a
//! robots.txt that disallows everything). The site is paused with at most a few URLs ever excluded, its index
//! never answers 404, the pause is shown (API, metric, view) and kept across a restart, and lifts once the site is
//! fixed with every URL back; an operator resumes or confirms; a single dead page is still excluded at once and
//! checked again within minutes, and at once when the app sends it again; `report` has no brake.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Method;
use serde_json::{Value, json};
use sitemapd::checker::{Checker, Notify};
use sitemapd::health::Kind;
use sitemapd::store::{BrakeMode, HealthSummary};

use crate::both_backends;
use crate::health_site::{Storm, TestSite, path};
use crate::support::{Backend, TestApp};

both_backends!(
    a_storm_pauses_the_site_and_takes_out_a_few_urls_at_most,
    a_single_dead_page_is_excluded_at_once_and_checked_again_within_minutes,
    an_operator_confirms_or_resumes,
    report_has_no_brake,
);

/// URLs of the stormed site: more than the brake's window, as few as keep the test quick.
const URLS: usize = 60;

async fn app(backend: Backend, site: &TestSite, policy: &str) -> TestApp {
    let vars = [
        ("SITEMAPD_PUBLIC_URL", site.base.as_str()),
        ("SITEMAPD_HEALTH_CHECK", policy),
        ("SITEMAPD_HEALTH_TIMEOUT", "2s"),
        ("SITEMAPD_HEALTH_RATE", "1000"),
    ];
    TestApp::spawn(backend, &vars).await
}

/// A new checker (and so a new robots.txt cache).
fn checker(app: &TestApp) -> Checker {
    let notify: Arc<dyn Notify> = Arc::new(app.state.clone().expect("a state"));
    Checker::new(app.store.clone(), &app.config, notify).expect("the checker builds")
}

fn paths(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{}{i}", path::PAGE)).collect()
}

async fn put(app: &TestApp, site: &TestSite, paths: &[String]) {
    let entries: Vec<Value> = paths.iter().map(|p| json!({"loc": site.loc(p)})).collect();
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

async fn summary(app: &TestApp) -> HealthSummary {
    app.store.health_summary(app.store.sites().only().unwrap().id).await.unwrap()
}

fn mode(s: &HealthSummary) -> BrakeMode {
    s.brake.as_ref().map_or(BrakeMode::Running, |b| b.mode)
}

/// The locs the site's sitemap pages list, through the router (`None`: the index answers 404).
async fn listed(app: &TestApp) -> Option<usize> {
    let index = app.get("/sitemap.xml", &[("cache-control", "no-cache")]).await;
    if index.status == 404 {
        return None;
    }
    assert_eq!(index.status, 200);
    let mut n = 0;
    for page in crate::support::xml_texts(&index.text(), "loc") {
        let name = page.rsplit('/').next().unwrap().to_owned();
        let r = app.get(&format!("/{name}"), &[]).await;
        assert_eq!(r.status, 200, "{name}");
        n += crate::support::xml_texts(&r.text(), "loc").len();
    }
    Some(n)
}

/// Drains the checker while a watcher reads the excluded count every few milliseconds; the most seen at once.
async fn drain_watching(app: &TestApp, checker: &Checker) -> u64 {
    let most = Arc::new(AtomicU64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let watcher = tokio::spawn({
        let (store, most, stop) = (app.store.clone(), most.clone(), stop.clone());
        let id = store.sites().only().unwrap().id;
        async move {
            while !stop.is_cancelled() {
                let excluded = store.health_summary(id).await.unwrap().excluded;
                most.fetch_max(excluded, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    checker.drain().await.unwrap();
    stop.cancel();
    watcher.await.unwrap();
    most.fetch_max(summary(app).await.excluded, Ordering::Relaxed)
}

async fn a_storm_pauses_the_site_and_takes_out_a_few_urls_at_most(backend: Backend) {
    let storms = [
        (Storm::Forbidden, Kind::ClientError, None),
        (Storm::Login, Kind::Redirect, Some("/login")),
        (Storm::Noindex, Kind::Noindex, None),
        (Storm::RobotsAll, Kind::Disallowed, None),
    ];
    for (storm, kind, target) in storms {
        let site = TestSite::start();
        let app = app(backend, &site, "exclude").await;
        put(&app, &site, &paths(URLS)).await;
        assert_eq!(listed(&app).await, Some(URLS));
        site.storm(storm);

        let most = drain_watching(&app, &checker(&app)).await;
        let s = summary(&app).await;
        // A fresh site trips at its fifth bad URL (robots.txt: at its first): at most 4 were ever out.
        let bound = if storm == Storm::RobotsAll { 0 } else { 4 };
        assert!(most <= bound, "{storm:?}: {most} excluded at once");
        assert_eq!((mode(&s), s.excluded), (BrakeMode::Paused, 0), "{storm:?}: {s:?}");
        assert!(s.kinds.iter().any(|(k, n, _)| *k == kind && *n as usize == URLS), "{storm:?}: every URL found bad");
        let evidence = s.brake.as_ref().unwrap().evidence.clone().unwrap();
        assert_eq!(evidence.shape.kind, kind, "{storm:?}");
        assert_eq!(evidence.shape.target, target.map(|t| site.loc(t)), "{storm:?}");
        assert!(!evidence.examples.is_empty());
        assert_eq!(listed(&app).await, Some(URLS), "{storm:?}: the index and every URL still listed");

        if storm == Storm::Forbidden {
            // Shown: the API, the metric, the view; and kept by the store (another process, a restart).
            let other = app.another_process().await;
            let health = other.get("/api/v1/health", &[]).await;
            assert_eq!(health.status, 200);
            let brake = &health.json()["sites"][0]["brake"];
            assert_eq!(brake["state"], "paused", "{brake}");
            assert_eq!(brake["evidence"]["kind"], "client_error");
            assert_eq!(brake["evidence"]["bad"], brake["evidence"]["window"]);
            let metrics = other.get("/metrics", &[]).await.text();
            assert!(metrics.contains("sitemapd_health_paused{site=\"default\"} 1"), "{metrics}");
            let view = other.get("/view/default/", &[]).await;
            assert!(view.text().contains(r#"id="health-brake-state">paused<"#), "{}", view.text());
        }

        // Fixed: the rechecks find the URLs healthy, the pause lifts, every URL is in.
        site.storm(Storm::None);
        app.exec_sql("UPDATE url_checks SET due_us = 0").await;
        checker(&app).drain().await.unwrap();
        let s = summary(&app).await;
        assert_eq!((mode(&s), s.excluded, s.healthy as usize), (BrakeMode::Running, 0, URLS), "{storm:?}: {s:?}");
        assert_eq!(listed(&app).await, Some(URLS));
    }
}

async fn a_single_dead_page_is_excluded_at_once_and_checked_again_within_minutes(backend: Backend) {
    let site = TestSite::start();
    let app = app(backend, &site, "exclude").await;
    let mut all = paths(30);
    all.push(path::MISSING.to_owned());
    put(&app, &site, &all).await;
    checker(&app).drain().await.unwrap();
    let s = summary(&app).await;
    assert_eq!((mode(&s), s.excluded), (BrakeMode::Running, 1), "{s:?}");
    assert_eq!(listed(&app).await, Some(30));

    // Checked again 5 minutes later (4.5 to 5 with the spread), not a cycle later; a healthy URL within the cycle.
    let id = app.store.sites().only().unwrap().id;
    let missing = app.store.health_of(id, &site.loc(path::MISSING)).await.unwrap().unwrap();
    let next = Duration::from_micros((missing.due_us - missing.checked_us.unwrap()) as u64);
    assert!(next >= Duration::from_secs(270) && next <= Duration::from_secs(300), "next check in {next:?}");
    let ok = app.store.health_of(id, &site.loc(&all[0])).await.unwrap().unwrap();
    let next = Duration::from_micros((ok.due_us - ok.checked_us.unwrap()) as u64);
    assert!(next <= Duration::from_secs(7 * 86_400) && next >= Duration::from_secs(7 * 86_400 * 9 / 10), "{next:?}");

    // The app sends it again, unchanged: checked again at once (and so back once the site has it).
    site.fix();
    let before = site.count(path::MISSING);
    put(&app, &site, &[path::MISSING.to_owned()]).await;
    assert!(app.store.health_of(id, &site.loc(path::MISSING)).await.unwrap().unwrap().due_us <= 0);
    checker(&app).drain().await.unwrap();
    assert_eq!(site.count(path::MISSING), before + 1);
    // A healthy URL sent again unchanged is not checked again.
    put(&app, &site, &all[..1]).await;
    assert_eq!(checker(&app).drain().await.unwrap(), 0);
}

async fn post(app: &TestApp, uri: &str) -> (u16, Value) {
    let r = app.request(Method::POST, uri, &[], Body::empty()).await;
    (r.status.as_u16(), serde_json::from_slice(&r.body).unwrap_or(Value::Null))
}

async fn an_operator_confirms_or_resumes(backend: Backend) {
    let site = TestSite::start();
    let app = app(backend, &site, "exclude").await;
    put(&app, &site, &paths(URLS)).await;
    // Not paused: left as it is.
    checker(&app).drain().await.unwrap();
    let (status, brake) = post(&app, "/api/v1/health/confirm?site=default").await;
    assert_eq!((status, brake["state"].as_str()), (200, Some("running")), "{brake}");
    let (status, _) = post(&app, "/api/v1/health/resume?site=nowhere").await;
    assert_eq!(status, 400);
    let (status, _) = post(&app, "/api/v1/health/resume").await;
    assert_eq!(status, 400);

    // Paused by a 403 storm; the operator confirms it: every URL goes out at its next check, which is at once.
    site.storm(Storm::Forbidden);
    app.exec_sql("UPDATE url_checks SET due_us = 0").await;
    checker(&app).drain().await.unwrap();
    assert_eq!(mode(&summary(&app).await), BrakeMode::Paused);
    let (status, brake) = post(&app, "/api/v1/health/confirm?site=default").await;
    assert_eq!((status, brake["state"].as_str()), (200, Some("confirmed")), "{brake}");
    checker(&app).drain().await.unwrap();
    let s = summary(&app).await;
    assert_eq!((mode(&s), s.excluded as usize), (BrakeMode::Confirmed, URLS), "{s:?}");
    assert_eq!(listed(&app).await, None, "what the operator confirmed");

    // Fixed: back in, the confirmation over; then a new storm pauses again, and the operator resumes.
    site.storm(Storm::None);
    app.exec_sql("UPDATE url_checks SET due_us = 0").await;
    checker(&app).drain().await.unwrap();
    let s = summary(&app).await;
    assert_eq!((mode(&s), s.excluded), (BrakeMode::Running, 0), "{s:?}");
    site.storm(Storm::Noindex);
    app.exec_sql("UPDATE url_checks SET due_us = 0").await;
    checker(&app).drain().await.unwrap();
    assert_eq!(mode(&summary(&app).await), BrakeMode::Paused);
    let (status, brake) = post(&app, "/api/v1/health/resume?site=default").await;
    assert_eq!((status, brake["state"].as_str()), (200, Some("running")), "{brake}");
    assert_eq!(brake["evidence"]["kind"], "noindex", "the last evidence stays shown");
    // The events that tripped it no longer count: the URLs still bad are excluded at their next check.
    app.exec_sql("UPDATE url_checks SET due_us = 0").await;
    checker(&app).drain().await.unwrap();
    assert_eq!(summary(&app).await.excluded as usize, URLS);
}

async fn report_has_no_brake(backend: Backend) {
    let site = TestSite::start();
    let app = app(backend, &site, "report").await;
    put(&app, &site, &paths(URLS)).await;
    let before = app.get("/sitemap-1.xml", &[]).await;
    site.storm(Storm::Forbidden);
    let start = Instant::now();
    checker(&app).drain().await.unwrap();
    let s = summary(&app).await;
    assert_eq!((mode(&s), s.excluded, s.brake.is_none()), (BrakeMode::Running, 0, true), "{s:?}");
    let after = app.get("/sitemap-1.xml", &[("cache-control", "no-cache")]).await;
    assert_eq!((after.header("etag"), after.body.clone()), (before.header("etag"), before.body.clone()));
    // Report keeps the cycle for a URL with a problem: no fast rechecks.
    let id = app.store.sites().only().unwrap().id;
    let c = app.store.health_of(id, &site.loc(&paths(1)[0])).await.unwrap().unwrap();
    assert!(c.due_us - c.checked_us.unwrap() > 6 * 86_400 * 1_000_000, "{:?}", start.elapsed());
}
