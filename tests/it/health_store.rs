//! URL health's store half on both backends: the check queue a write fills, claims and their leases, the seed's
//! walk, the findings a settle records, exclusion from a page (and what the real router then serves), the counts
//! and the per-host pacing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use sitemapd::domain::{Entry, Loc, PublicUrl, Section};
use sitemapd::health::{Finding, Kind, Problems, Transient};
use sitemapd::store::{CheckClaim, CheckResult, CheckSettled, ProblemFilter, Store, Written};

use crate::support::{Backend, PUBLIC_URL, TestApp};
use crate::{both_backends, through_pooler};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);
const SITE: i64 = 1;

fn public() -> PublicUrl {
    PublicUrl::parse(PUBLIC_URL).unwrap()
}

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

fn entry(path: &str) -> Entry {
    Entry::from_json(serde_json::json!({"loc": loc(path)}), &public()).unwrap()
}

fn dated(path: &str, lastmod: &str) -> Entry {
    Entry::from_json(serde_json::json!({"loc": loc(path), "lastmod": lastmod}), &public()).unwrap()
}

fn entries(paths: &[&str]) -> Vec<Entry> {
    paths.iter().map(|p| entry(p)).collect()
}

fn healthy() -> Finding {
    Finding { status: Some(200), ..Finding::default() }
}

fn problem(status: u16, kinds: &[Kind]) -> Finding {
    Finding { status: Some(status), problems: kinds.iter().copied().collect(), ..Finding::default() }
}

fn result(claim: &CheckClaim, finding: Finding, next_in: Duration) -> CheckResult {
    CheckResult { claim: claim.claim, loc: claim.loc.clone(), finding, next_in, disallows_all: false }
}

fn locs(claims: &[CheckClaim]) -> Vec<&str> {
    claims.iter().map(|c| c.loc.strip_prefix(PUBLIC_URL).unwrap()).collect()
}

/// Claims `path` (due now), with a lease of an hour.
async fn claim_one(store: &dyn Store, path: &str) -> CheckClaim {
    let claims = store.health_claim(SITE, 1000, HOUR).await.unwrap();
    claims.into_iter().find(|c| c.loc == loc(path)).unwrap_or_else(|| panic!("{path} is due"))
}

/// Claims what is due and settles `path` with `finding`, policy `exclude`; every other row claimed is settled with
/// its last finding again (a first one: healthy), policy `report`, so that nothing else changes. All due again at
/// once (`next_in` zero).
async fn check(store: &dyn Store, path: &str, finding: Finding) -> Written<CheckSettled> {
    let mut target = None;
    for c in store.health_claim(SITE, 1000, HOUR).await.unwrap() {
        if c.loc == loc(path) {
            target = Some(c);
            continue;
        }
        let again = c.previous.as_ref().map_or_else(healthy, |p| Finding {
            status: p.status,
            problems: p.problems,
            location: p.location.clone(),
            canonical: p.canonical.clone(),
            noindex_by: p.noindex_by.clone(),
            ..Finding::default()
        });
        store.health_settle(SITE, &result(&c, again, Duration::ZERO), false).await.unwrap();
    }
    let claim = target.unwrap_or_else(|| panic!("{path} is due"));
    let settled = store.health_settle(SITE, &result(&claim, finding, Duration::ZERO), true).await.unwrap();
    assert!(settled.counts.recorded);
    settled
}

async fn exclude_app(b: Backend, vars: &[(&str, &str)]) -> (TestApp, Arc<dyn Store>) {
    let mut all = vec![("SITEMAPD_HEALTH_CHECK", "exclude")];
    all.extend_from_slice(vars);
    let app = TestApp::spawn(b, &all).await;
    let store = app.store.clone();
    (app, store)
}

const FRESH: [(&str, &str); 1] = [("cache-control", "no-cache")];

async fn write_queues_for_check_sites_only(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.store.upsert(&entries(&["a"])).await.unwrap();
    assert_eq!(app.store.health_of(SITE, &loc("a")).await.unwrap(), None, "a site not checked queues nothing");
    assert!(app.store.health_claim(SITE, 10, HOUR).await.unwrap().is_empty());

    let (_app, store) = exclude_app(b, &[("SITEMAPD_HEALTH_CHECK", "report")]).await;
    store.upsert(&entries(&["a", "b"])).await.unwrap();
    let queued = store.health_of(SITE, &loc("a")).await.unwrap().expect("queued by the write");
    assert_eq!((queued.due_us, queued.checked_us, queued.problems), (0, None, Problems::NONE));
    let claims = store.health_claim(SITE, 10, HOUR).await.unwrap();
    assert_eq!(locs(&claims), ["/a", "/b"]);
    assert!(claims.iter().all(|c| c.previous.is_none() && c.attempts == 0), "never checked");
    for c in &claims {
        assert!(store.health_settle(SITE, &result(c, healthy(), DAY), false).await.unwrap().counts.recorded);
    }
    // An identical re-send changes nothing, and so queues nothing; a change queues its loc, due at once.
    store.upsert(&entries(&["a", "b"])).await.unwrap();
    assert!(store.health_claim(SITE, 10, HOUR).await.unwrap().is_empty(), "nothing due after an identical re-send");
    store.upsert(&[dated("b", "2024-05-01")]).await.unwrap();
    let claims = store.health_claim(SITE, 10, HOUR).await.unwrap();
    assert_eq!(locs(&claims), ["/b"]);
    assert_eq!(claims[0].previous.as_ref().map(|p| p.status), Some(Some(200)), "the last check comes with the claim");
    // A delete drops the check.
    store.delete(&[Loc::parse(&loc("a"), &public()).unwrap()]).await.unwrap();
    assert_eq!(store.health_of(SITE, &loc("a")).await.unwrap(), None);
}

async fn written_while_claimed_is_due_again_after_the_settle(b: Backend) {
    let (_app, store) = exclude_app(b, &[]).await;
    store.upsert(&entries(&["a"])).await.unwrap();
    let claim = claim_one(&*store, "a").await;
    store.upsert(&[dated("a", "2024-05-01")]).await.unwrap();
    assert!(store.health_claim(SITE, 10, HOUR).await.unwrap().is_empty(), "the lease holds");
    let settled = store.health_settle(SITE, &result(&claim, healthy(), DAY), true).await.unwrap();
    assert!(settled.counts.recorded);
    let again = store.health_claim(SITE, 10, HOUR).await.unwrap();
    assert_eq!(locs(&again), ["/a"], "written since the claim: due at once, not a day later");
    // Settled without a write in between: due a cycle later.
    store.health_settle(SITE, &result(&again[0], healthy(), DAY), true).await.unwrap();
    assert!(store.health_claim(SITE, 10, HOUR).await.unwrap().is_empty());
    assert!(store.health_of(SITE, &loc("a")).await.unwrap().unwrap().due_us > 0);
}

async fn two_stores_never_claim_one_row_twice(b: Backend) {
    let (app, store) = exclude_app(b, &[]).await;
    let paths: Vec<String> = (0..120).map(|i| format!("p{i:03}")).collect();
    store.upsert(&paths.iter().map(|p| entry(p)).collect::<Vec<_>>()).await.unwrap();
    let other = app.another_process().await.store;
    let take = |store: Arc<dyn Store>| {
        tokio::spawn(async move {
            let mut mine = Vec::new();
            // Bounded: 120 rows take 18 claims of 7 between the two; a claim that left its rows due would go on.
            for _ in 0..100 {
                let claims = store.health_claim(SITE, 7, HOUR).await.unwrap();
                if claims.is_empty() {
                    break;
                }
                mine.extend(claims.into_iter().map(|c| c.loc));
            }
            mine
        })
    };
    let (one, two) = tokio::join!(take(store.clone()), take(other));
    let all: Vec<String> = one.unwrap().into_iter().chain(two.unwrap()).collect();
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a row claimed twice");
    assert_eq!(all.len(), 120, "every row claimed once");
}

async fn a_lapsed_claim_records_nothing(b: Backend) {
    let (app, store) = exclude_app(b, &[]).await;
    store.upsert(&entries(&["a"])).await.unwrap();
    let lapsed = store.health_claim(SITE, 10, Duration::ZERO).await.unwrap();
    assert_eq!(locs(&lapsed), ["/a"]);
    let settled = store.health_settle(SITE, &result(&lapsed[0], problem(404, &[Kind::NotFound]), DAY), true).await;
    assert!(!settled.unwrap().counts.recorded, "its lease ran out");
    let other = app.another_process().await.store;
    let taken = other.health_claim(SITE, 10, HOUR).await.unwrap();
    assert_eq!(locs(&taken), ["/a"], "claimed again once the lease ran out");
    let settled = store.health_settle(SITE, &result(&lapsed[0], problem(404, &[Kind::NotFound]), DAY), true).await;
    assert!(!settled.unwrap().counts.recorded, "another claim holds it");
    assert_eq!(store.health_of(SITE, &loc("a")).await.unwrap().unwrap().checked_us, None);
    assert!(other.health_settle(SITE, &result(&taken[0], healthy(), DAY), true).await.unwrap().counts.recorded);
    // A claim whose record was deleted meanwhile records nothing and drops the row.
    store.upsert(&entries(&["b"])).await.unwrap();
    let claim = claim_one(&*store, "b").await;
    sqlx_delete(&app, "b").await;
    let settled = store.health_settle(SITE, &result(&claim, healthy(), DAY), true).await.unwrap();
    assert!(!settled.counts.recorded, "the record is gone");
    assert_eq!(store.health_of(SITE, &loc("b")).await.unwrap(), None);
}

/// Deletes `path`'s record behind the store's back (as another version or an operator would), keeping its check.
async fn sqlx_delete(app: &TestApp, path: &str) {
    let l = loc(path);
    app.exec_sql(&format!("DELETE FROM urls WHERE loc = '{l}'")).await;
}

async fn the_seed_walks_every_record_once(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let store = app.store.clone();
    let paths: Vec<String> = (0..25).map(|i| format!("s{i:02}")).collect();
    store.upsert(&paths.iter().map(|p| entry(p)).collect::<Vec<_>>()).await.unwrap();
    assert!(!store.health_summary(SITE).await.unwrap().seeded);
    let mut steps = Vec::new();
    loop {
        let walked = store.health_seed(SITE, 10).await.unwrap();
        if walked == 0 {
            break;
        }
        steps.push(walked);
        assert!(steps.len() < 10, "the walk stops");
    }
    assert_eq!(steps, [10, 10, 5]);
    let summary = store.health_summary(SITE).await.unwrap();
    assert_eq!((summary.tracked, summary.checked, summary.seeded), (25, 0, true));
    let mut claimed = BTreeSet::new();
    for c in store.health_claim(SITE, 100, HOUR).await.unwrap() {
        assert!(claimed.insert(c.loc));
    }
    assert_eq!(claimed.len(), 25, "each record queued once");
    store.upsert(&entries(&["later"])).await.unwrap();
    assert!(!store.health_summary(SITE).await.unwrap().seeded, "a record stored since: the walk goes on");
    assert_eq!(store.health_seed(SITE, 10).await.unwrap(), 1);
    assert_eq!(store.health_seed(SITE, 10).await.unwrap(), 0);
}

/// The index's `<lastmod>` of the page at `path`, if listed.
async fn listed_lastmod(app: &TestApp, path: &str) -> Option<String> {
    let r = app.get("/sitemap.xml", &FRESH).await;
    if r.status == StatusCode::NOT_FOUND {
        return None;
    }
    let text = r.text();
    let at = text.find(&format!("{PUBLIC_URL}{path}</loc>"))?;
    let rest = &text[at..];
    let start = rest.find("<lastmod>").unwrap() + "<lastmod>".len();
    Some(rest[start..start + rest[start..].find('<').unwrap()].to_owned())
}

async fn exclusion_changes_only_its_page(b: Backend) {
    let (app, store) = exclude_app(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    store.upsert(&entries(&["a", "b", "c", "d"])).await.unwrap();
    let before = store.pages(SITE).await.unwrap();
    let page1 = app.get("/sitemap-1.xml", &FRESH).await;
    assert_eq!(page1.status, StatusCode::OK);
    assert!(page1.text().contains(&loc("b")));
    let lastmod1 = listed_lastmod(&app, "/sitemap-1.xml").await.unwrap();

    let settled = check(&*store, "b", problem(404, &[Kind::NotFound])).await;
    assert_eq!(settled.counts.flipped, Some(true));
    let changed = settled.changes_in(SITE);
    assert!(changed.locs.is_empty(), "no notification for an exclusion");
    assert_eq!(changed.pages.len(), 1);
    let after = store.pages(SITE).await.unwrap();
    assert_eq!(changed.pages[0], after[0]);
    assert_eq!((after[0].version, after[0].excluded), (before[0].version + 1, 1));
    assert!(after[0].modified_us > before[0].modified_us);
    assert_eq!((after[0].url_count, after[0].byte_size), (before[0].url_count, before[0].byte_size), "still stored");
    assert_eq!(after[1], before[1], "the other page did not change");
    assert!(store.health_of(SITE, &loc("b")).await.unwrap().unwrap().excluded);

    let excluded = app.get("/sitemap-1.xml", &FRESH).await;
    assert_eq!(excluded.status, StatusCode::OK);
    assert!(!excluded.text().contains(&loc("b")), "the page lacks the excluded entry");
    assert!(excluded.text().contains(&loc("a")));
    assert_ne!(excluded.header("etag"), page1.header("etag"));
    let lastmod2 = listed_lastmod(&app, "/sitemap-1.xml").await.unwrap();
    assert_ne!(lastmod2, lastmod1, "the index lists the page with its new lastmod");
    assert_eq!(store.page_urls(SITE, 1, 0, 10).await.unwrap().len(), 2, "the view's listing keeps it");

    // A transient failure changes nothing; a healthy check restores it.
    let transient = Finding::transient(Transient::Server(503), None);
    assert_eq!(check(&*store, "b", transient).await.counts.flipped, None);
    assert!(store.health_of(SITE, &loc("b")).await.unwrap().unwrap().excluded, "transient never restores");
    let restored = check(&*store, "b", healthy()).await;
    assert_eq!(restored.counts.flipped, Some(false));
    let back = app.get("/sitemap-1.xml", &FRESH).await;
    assert_eq!(back.body, page1.body, "the exact old bytes");
    assert_ne!(back.header("etag"), page1.header("etag"));
    assert_ne!(listed_lastmod(&app, "/sitemap-1.xml").await.unwrap(), lastmod2);
    let page = store.page(SITE, 1).await.unwrap().unwrap();
    assert_eq!((page.version, page.excluded), (before[0].version + 2, 0));
}

async fn report_never_excludes(b: Backend) {
    let (_app, store) = exclude_app(b, &[]).await;
    store.upsert(&entries(&["a"])).await.unwrap();
    let claim = claim_one(&*store, "a").await;
    let settled = store.health_settle(SITE, &result(&claim, problem(410, &[Kind::Gone]), DAY), false).await.unwrap();
    assert_eq!((settled.counts.recorded, settled.counts.flipped), (true, None));
    assert!(settled.changes.is_empty());
    assert_eq!(store.page(SITE, 1).await.unwrap().unwrap().excluded, 0);
}

async fn an_all_excluded_page_leaves_the_index_and_404s(b: Backend) {
    let (app, store) = exclude_app(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    store.upsert(&entries(&["a", "b", "c", "d"])).await.unwrap();
    assert_eq!(app.get("/sitemap-2.xml", &FRESH).await.status, StatusCode::OK);
    check(&*store, "c", problem(301, &[Kind::Redirect])).await;
    check(&*store, "d", problem(200, &[Kind::Noindex])).await;
    assert_eq!(app.get("/sitemap-2.xml", &FRESH).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/sitemap-2.txt", &FRESH).await.status, StatusCode::NOT_FOUND);
    assert_eq!(listed_lastmod(&app, "/sitemap-2.xml").await, None, "not listed");
    assert!(listed_lastmod(&app, "/sitemap-1.xml").await.is_some());
    check(&*store, "d", healthy()).await;
    let back = app.get("/sitemap-2.xml", &FRESH).await;
    assert_eq!(back.status, StatusCode::OK);
    assert!(back.text().contains(&loc("d")) && !back.text().contains(&loc("c")));
}

async fn later_writes_keep_the_excluded_count(b: Backend) {
    let (_app, store) = exclude_app(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    store.upsert(&entries(&["a", "b", "c"])).await.unwrap();
    check(&*store, "b", problem(404, &[Kind::NotFound])).await;
    let excluded = |store: Arc<dyn Store>, id: i64| async move {
        let page = store.page(SITE, id).await.unwrap().unwrap();
        (page.excluded, page.listed())
    };
    // An update of the excluded record, and of another on its page.
    let written = store.upsert(&[dated("b", "2024-05-01"), dated("a", "2024-05-02")]).await.unwrap();
    assert_eq!(written.changes_in(SITE).pages[0].excluded, 1, "what the write returns is counted");
    assert_eq!(excluded(store.clone(), 1).await, (1, true));
    // A delete of the excluded record takes its exclusion with it.
    let written = store.delete(&[Loc::parse(&loc("b"), &public()).unwrap()]).await.unwrap();
    assert_eq!(written.changes_in(SITE).pages[0].excluded, 0);
    assert_eq!(excluded(store.clone(), 1).await, (0, true));
    // A move to another section takes it to the other page.
    check(&*store, "c", problem(403, &[Kind::ClientError])).await;
    assert_eq!(excluded(store.clone(), 1).await, (1, true));
    let products = Entry { section: Some(Section::parse("products").unwrap()), ..entry("c") };
    store.upsert(&[products]).await.unwrap();
    let pages = store.pages(SITE).await.unwrap();
    assert_eq!(pages.iter().map(|p| (p.url_count, p.excluded)).collect::<Vec<_>>(), [(1, 0), (1, 1)]);
    assert!(!pages[1].listed(), "the section's page holds only the excluded record");
}

async fn the_news_sitemap_omits_an_excluded_entry(b: Backend) {
    let (_app, store) = exclude_app(b, &[]).await;
    let news = |path: &str, title: &str| {
        let news = serde_json::json!({"publication": {"name": "The Times", "language": "en"},
                                      "publication_date": "2024-05-01", "title": title});
        Entry::from_json(serde_json::json!({"loc": loc(path), "news": news}), &public()).unwrap()
    };
    store.upsert(&[news("n1", "One"), news("n2", "Two")]).await.unwrap();
    let read = store.news(SITE, 0, i64::MAX, 100).await.unwrap();
    assert_eq!(read.entries.len(), 2);
    check(&*store, "n1", problem(410, &[Kind::Gone])).await;
    let read = store.news(SITE, 0, i64::MAX, 100).await.unwrap();
    let listed: Vec<&str> = read.entries.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(listed, [loc("n2").as_str()]);
}

async fn summary_and_listing_count_findings(b: Backend) {
    let (_app, store) = exclude_app(b, &[]).await;
    store.upsert(&entries(&["a", "b", "c", "d", "e"])).await.unwrap();
    let claims = store.health_claim(SITE, 10, HOUR).await.unwrap();
    let by = |path: &str| claims.iter().find(|c| c.loc == loc(path)).unwrap();
    let settle = |path: &str, finding: Finding, exclude: bool| {
        let (store, r) = (store.clone(), result(by(path), finding, DAY));
        async move { assert!(store.health_settle(SITE, &r, exclude).await.unwrap().counts.recorded) }
    };
    settle("a", problem(404, &[Kind::NotFound]), true).await;
    let mut noindex = problem(200, &[Kind::Noindex, Kind::Disallowed]);
    noindex.noindex_by = Some("meta robots".into());
    settle("b", noindex, false).await;
    settle("c", Finding::transient(Transient::Connect("refused".into()), None), true).await;
    settle("d", healthy(), true).await;
    let s = store.health_summary(SITE).await.unwrap();
    assert_eq!((s.tracked, s.checked, s.healthy, s.transient, s.excluded), (5, 4, 1, 1, 1));
    assert_eq!(s.backlog, 0, "e is claimed");
    assert!(s.last_checked_us.is_some());
    let count = |kind: Kind| s.kinds.iter().find(|(k, ..)| *k == kind).map(|(_, n, since)| (*n, since.is_some()));
    assert_eq!(count(Kind::NotFound), Some((1, true)));
    assert_eq!(count(Kind::Noindex), Some((1, true)));
    assert_eq!(count(Kind::Disallowed), Some((1, true)));
    assert_eq!(count(Kind::Gone), Some((0, false)));
    assert_eq!(s.kinds.len(), Kind::ALL.len());

    let listed = |filter: ProblemFilter| {
        let store = store.clone();
        async move {
            let rows = store.health_problems(Some(SITE), filter, 0, 10).await.unwrap();
            rows.into_iter()
                .map(|(u, c)| {
                    assert_eq!(u.url.loc, c.loc);
                    u.url.loc.strip_prefix(PUBLIC_URL).unwrap().to_owned()
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(ProblemFilter::Any).await, ["/a", "/b"]);
    assert_eq!(listed(ProblemFilter::Kind(Kind::Noindex)).await, ["/b"]);
    assert_eq!(listed(ProblemFilter::Transient).await, ["/c"]);
    assert_eq!(listed(ProblemFilter::Excluded).await, ["/a"]);
    let b_check = store.health_of(SITE, &loc("b")).await.unwrap().unwrap();
    assert_eq!(b_check.noindex_by.as_deref(), Some("meta robots"));
    let c_check = store.health_of(SITE, &loc("c")).await.unwrap().unwrap();
    assert_eq!((c_check.transient.as_deref(), c_check.attempts), (Some("connect: refused"), 1));
    // The keyset: after a's id, only b.
    let first = store.health_problems(None, ProblemFilter::Any, 0, 1).await.unwrap();
    let next = store.health_problems(None, ProblemFilter::Any, first[0].0.url.id, 10).await.unwrap();
    assert_eq!(next.iter().map(|(u, _)| u.url.loc.clone()).collect::<Vec<_>>(), [loc("b")]);
    // A problem's start stays while problems stay; a healthy check clears it.
    let since = store.health_of(SITE, &loc("a")).await.unwrap().unwrap().problem_since_us;
    assert!(since.is_some());
}

async fn host_slots_are_spaced_and_held(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let store = app.store.clone();
    let h = "https://www.example.com:443";
    assert_eq!(store.health_host_slot(h, HOUR, Duration::ZERO).await.unwrap(), Duration::ZERO, "first: now");
    let second = store.health_host_slot(h, HOUR, Duration::ZERO).await.unwrap();
    assert!(second > HOUR - Duration::from_secs(60) && second <= HOUR, "{second:?}");
    let third = store.health_host_slot(h, HOUR, Duration::ZERO).await.unwrap();
    assert!(third > 2 * HOUR - Duration::from_secs(60) && third <= 2 * HOUR, "{third:?}");
    let held = store.health_host_slot(h, HOUR, 10 * HOUR).await.unwrap();
    assert!(held > 10 * HOUR - Duration::from_secs(60) && held <= 10 * HOUR, "a hold past the next slot: {held:?}");
    let other = "https://other.example.com:443";
    let held = store.health_host_slot(other, HOUR, 5 * HOUR).await.unwrap();
    assert!(held > 5 * HOUR - Duration::from_secs(60) && held <= 5 * HOUR, "a hold defers the slot: {held:?}");
    let after = store.health_host_slot(other, Duration::ZERO, Duration::ZERO).await.unwrap();
    assert!(after > 6 * HOUR - Duration::from_secs(60), "{after:?}");
}

both_backends!(
    write_queues_for_check_sites_only,
    written_while_claimed_is_due_again_after_the_settle,
    two_stores_never_claim_one_row_twice,
    a_lapsed_claim_records_nothing,
    the_seed_walks_every_record_once,
    exclusion_changes_only_its_page,
    report_never_excludes,
    an_all_excluded_page_leaves_the_index_and_404s,
    later_writes_keep_the_excluded_count,
    the_news_sitemap_omits_an_excluded_entry,
    summary_and_listing_count_findings,
    host_slots_are_spaced_and_held,
);

// Through a transaction-mode PgBouncer (tests/it/pooler.rs).
through_pooler!(
    write_queues_for_check_sites_only,
    two_stores_never_claim_one_row_twice,
    exclusion_changes_only_its_page,
    summary_and_listing_count_findings,
    host_slots_are_spaced_and_held,
);
