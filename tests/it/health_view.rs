//! What people see of URL health: a record's `health` in its lookup, the problem listing (`?problem=`), the report
//! `GET /api/v1/health` (scoped by token as every route), the state gauges of `/metrics` and the site screen's
//! panel. The checks are recorded through the store (`health_claim` then `health_settle` with findings made here),
//! as the checker records them, so no request leaves the test and every figure is known in advance.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sitemapd::health::{Finding, Kind, Problems, Transient};
use sitemapd::store::CheckResult;

use crate::both_backends;
use crate::support::{Backend, TestApp, urlencode};

const SITES: &str = "default=https://www.example.com/, shop=https://shop.example.com/, blog=https://blog.example.com/";
const TOKENS: &str = "global-token, shop=shop-token";
/// The default site excludes, the shop reports, the blog is not checked.
const CHECKS: &str = "default=exclude, shop=report";

both_backends!(
    a_lookup_has_the_records_health_or_null_when_its_site_is_not_checked,
    the_problem_listing_filters_pages_by_keyset_and_refuses_unknown_names,
    the_health_report_counts_each_kind_for_the_sites_a_token_reaches,
    the_metrics_give_problem_excluded_and_backlog_urls_of_checked_sites,
    the_site_screen_lists_problem_urls_with_their_reason_escaped,
    a_problem_urls_screen_is_titled_by_its_url_and_shows_its_health,
    urls_the_writes_queued_are_not_said_to_be_still_queued,
    #[cfg_attr(sitemapd_no_chromium, ignore = "needs chromium")]
    the_panel_renders_in_a_real_browser_at_both_widths,
);

/// A hostile loc (normalized when stored: its `<`, `>`, `"` and `'` percent-encoded, its `&` kept).
const HOSTILE: &str = "https://www.example.com/q?x=<script>alert(\"loc\")</script>&y='1'";
const HOSTILE_STORED: &str = "https://www.example.com/q?x=%3Cscript%3Ealert(%22loc%22)%3C/script%3E&y=%271%27";
/// A canonical as the page named it, never normalized: the view must escape it.
const HOSTILE_CANONICAL: &str = "https://www.example.com/c?a=<b>&d=\"e\"";

fn www(path: &str) -> String {
    format!("https://www.example.com/{path}")
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn get_as(app: &TestApp, token: &str, uri: &str) -> crate::support::TestResponse {
    app.get(uri, &[("authorization", &bearer(token))]).await
}

async fn spawn(b: Backend, checks: &str) -> TestApp {
    let vars = [
        ("SITEMAPD_SITES", SITES),
        ("SITEMAPD_API_TOKENS", TOKENS),
        ("SITEMAPD_PAGE_MAX_URLS", "4"),
        ("SITEMAPD_HEALTH_CHECK", checks),
    ];
    TestApp::spawn(b, &vars).await
}

fn definite(status: u16, kinds: &[Kind]) -> Finding {
    Finding { status: Some(status), problems: kinds.iter().copied().collect::<Problems>(), ..Finding::default() }
}

/// What the checks of each stored URL find: the default site (policy exclude) has a 404, a redirect, a noindex, a
/// healthy page, a timeout and a hostile loc whose canonical names another URL; the shop (report) a 410 and a
/// healthy page; the blog is not checked.
fn finding_of(loc: &str) -> (Finding, Duration) {
    let week = Duration::from_secs(7 * 86_400);
    let finding =
        match loc.trim_start_matches("https://www.example.com/").trim_start_matches("https://shop.example.com/") {
            "p1" => definite(404, &[Kind::NotFound]),
            "p2" => Finding { location: Some(www("p2-new")), ..definite(301, &[Kind::Redirect]) },
            "p3" => Finding { noindex_by: Some("meta robots".into()), ..definite(200, &[Kind::Noindex]) },
            "p4" | "s2" => definite(200, &[]),
            "p5" => return (Finding::transient(Transient::Timeout, None), Duration::from_secs(60)),
            "s1" => definite(410, &[Kind::Gone]),
            _ if loc == HOSTILE_STORED => {
                Finding { canonical: Some(HOSTILE_CANONICAL.into()), ..definite(200, &[Kind::Canonical]) }
            }
            other => panic!("no finding for {other}"),
        };
    (finding, week)
}

/// Stores the URLs and records a check of each URL of a checked site, as the checker would.
async fn seed(app: &TestApp) {
    let mut locs: Vec<Value> = (1..=5).map(|i| json!({"loc": www(&format!("p{i}"))})).collect();
    locs.push(json!({"loc": HOSTILE}));
    locs.push(json!({"loc": "https://shop.example.com/s1"}));
    locs.push(json!({"loc": "https://shop.example.com/s2"}));
    locs.push(json!({"loc": "https://blog.example.com/b1"}));
    let headers = [("content-type", "application/json"), ("authorization", &bearer("global-token"))];
    let body = axum::body::Body::from(Value::Array(locs).to_string());
    let r = app.request(axum::http::Method::PUT, "/api/v1/urls", &headers, body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let sites = app.store.sites();
    for (name, exclude, expected) in [("default", true, 6), ("shop", false, 2)] {
        let site = sites.by_name(name).unwrap().id;
        let claims = app.store.health_claim(site, 100, Duration::from_secs(600)).await.unwrap();
        assert_eq!(claims.len(), expected, "every stored URL of {name} is queued: {claims:?}");
        for claim in claims {
            let (finding, next_in) = finding_of(&claim.loc);
            let result =
                CheckResult { claim: claim.claim, loc: claim.loc.clone(), finding, next_in, disallows_all: false };
            let settled = app.store.health_settle(site, &result, exclude).await.unwrap();
            assert!(settled.counts.recorded, "{}", claim.loc);
        }
    }
    let blog = sites.by_name("blog").unwrap().id;
    let none = app.store.health_claim(blog, 100, Duration::from_secs(600)).await.unwrap();
    assert!(none.is_empty(), "a site that is not checked queues nothing: {none:?}");
}

/// `health` with its times checked for their form and set to `"T"`, so that the rest compares exactly.
fn timeless(health: &Value) -> Value {
    let mut h = health.clone();
    for key in ["checked", "problem_since", "next_check"] {
        match &h[key] {
            Value::Null => {}
            Value::String(t) => {
                assert!(t.len() >= 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T', "{key}: {t}");
                h[key] = json!("T");
            }
            other => panic!("{key}: {other}"),
        }
    }
    h
}

async fn lookup(app: &TestApp, token: &str, loc: &str) -> Value {
    let r = get_as(app, token, &format!("/api/v1/urls?loc={}", urlencode(loc))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    r.json()
}

async fn a_lookup_has_the_records_health_or_null_when_its_site_is_not_checked(b: Backend) {
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let health = |status: Value, problems: Value, excluded: bool| {
        json!({
            "checked": "T", "status": status, "problems": problems, "location": null, "canonical": null,
            "noindex_by": null, "transient": null, "transient_detail": null, "attempts": 0,
            "problem_since": "T", "excluded": excluded, "next_check": "T",
        })
    };
    let p1 = lookup(&app, "global-token", &www("p1")).await;
    assert_eq!(timeless(&p1["health"]), health(json!(404), json!(["not_found"]), true), "{p1}");
    // The other members are those of every lookup.
    assert_eq!(p1["sitemap"], "https://www.example.com/sitemap-1.xml");
    let p2 = lookup(&app, "global-token", &www("p2")).await;
    let mut expected = health(json!(301), json!(["redirect"]), true);
    expected["location"] = json!(www("p2-new"));
    assert_eq!(timeless(&p2["health"]), expected);
    let p3 = lookup(&app, "global-token", &www("p3")).await;
    assert_eq!(p3["health"]["noindex_by"], "meta robots");
    // Healthy: no problem, no problem_since.
    let p4 = lookup(&app, "global-token", &www("p4")).await;
    let mut healthy = health(json!(200), json!([]), false);
    healthy["problem_since"] = Value::Null;
    assert_eq!(timeless(&p4["health"]), healthy);
    // A timeout: checked, no definite answer yet, one attempt; retried, not excluded.
    let p5 = lookup(&app, "global-token", &www("p5")).await;
    let h = timeless(&p5["health"]);
    assert_eq!(
        (&h["checked"], &h["status"], &h["transient"], &h["attempts"], &h["excluded"], &h["problem_since"]),
        (&json!("T"), &Value::Null, &json!("timeout"), &json!(1), &json!(false), &Value::Null),
        "{p5}"
    );
    // The shop reports: a 410 stays in its page.
    let s1 = lookup(&app, "global-token", "https://shop.example.com/s1").await;
    assert_eq!(timeless(&s1["health"]), health(json!(410), json!(["gone"]), false));
    // The blog is not checked: null, not absent.
    let b1 = lookup(&app, "global-token", "https://blog.example.com/b1").await;
    assert_eq!(b1.get("health"), Some(&Value::Null), "{b1}");
    // With checking turned off, every lookup says null.
    let off = app.another_process_with(&[("SITEMAPD_HEALTH_CHECK", "")]).await;
    assert_eq!(lookup(&off, "global-token", &www("p1")).await["health"], Value::Null);
    // A plain listing carries no health (it would be a read per record).
    let list = get_as(&app, "global-token", "/api/v1/urls?site=default").await.json();
    assert!(list["items"][0].get("health").is_none(), "{}", list["items"][0]);
}

/// The locs of a listing's items, and its `next`.
fn listed(body: &Value) -> (Vec<String>, Value) {
    let locs = body["items"].as_array().unwrap().iter().map(|i| i["loc"].as_str().unwrap().to_owned()).collect();
    (locs, body["next"].clone())
}

async fn list_as(app: &TestApp, token: &str, query: &str) -> Value {
    let r = get_as(app, token, &format!("/api/v1/urls?{query}")).await;
    assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.text());
    r.json()
}

async fn the_problem_listing_filters_pages_by_keyset_and_refuses_unknown_names(b: Backend) {
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let g = "global-token";
    let problems = [www("p1"), www("p2"), www("p3"), HOSTILE_STORED.to_owned()];
    // Any definite problem of the default site, in record order, each with its health.
    let any = list_as(&app, g, "problem=any&site=default").await;
    assert_eq!(listed(&any), (problems.to_vec(), Value::Null));
    assert_eq!(any["items"][0]["health"]["problems"], json!(["not_found"]));
    assert_eq!(any["items"][3]["health"]["canonical"], HOSTILE_CANONICAL);
    // Keyset: two at a time, `next` passed back as `after`.
    let first = list_as(&app, g, "problem=any&site=default&limit=2").await;
    let (locs, next) = listed(&first);
    assert_eq!(locs, problems[..2]);
    let next = next.as_str().expect("more follow").to_owned();
    let second = list_as(&app, g, &format!("problem=any&site=default&limit=2&after={next}")).await;
    assert_eq!(listed(&second).0, problems[2..]);
    let rest = listed(&second).1;
    if let Some(after) = rest.as_str() {
        assert_eq!(listed(&list_as(&app, g, &format!("problem=any&site=default&after={after}")).await).0.len(), 0);
    }
    // Each name.
    let one = async |name: &str| listed(&list_as(&app, g, &format!("problem={name}")).await).0;
    assert_eq!(one("not_found").await, [www("p1")]);
    assert_eq!(one("redirect").await, [www("p2")]);
    assert_eq!(one("noindex").await, [www("p3")]);
    assert_eq!(one("canonical").await, [HOSTILE_STORED]);
    assert_eq!(one("gone").await, ["https://shop.example.com/s1"]);
    assert!(one("client_error").await.is_empty());
    assert!(one("disallowed").await.is_empty());
    assert_eq!(one("transient").await, [www("p5")]);
    // Excluded: the default site's definite problems (its policy is exclude); the shop's 410 is only reported.
    assert_eq!(one("excluded").await, problems);
    // Every checked site the token reaches, merged in record order.
    let mut all = problems.to_vec();
    all.push("https://shop.example.com/s1".into());
    assert_eq!(one("any").await, all);
    // A token of the shop sees the shop's alone, and may not name the default site.
    assert_eq!(listed(&list_as(&app, "shop-token", "problem=any").await).0, ["https://shop.example.com/s1"]);
    let r = get_as(&app, "shop-token", "/api/v1/urls?problem=any&site=default").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert!(!r.text().contains("p1"), "{}", r.text());
    // A site that is not checked lists nothing.
    assert_eq!(listed(&list_as(&app, g, "problem=any&site=blog").await), (vec![], Value::Null));
    // An unknown name: 400 with the names; problem with loc or section: 400.
    let r = get_as(&app, g, "/api/v1/urls?problem=broken").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    let message = r.json()["message"].as_str().unwrap().to_owned();
    for name in ["not_found", "gone", "client_error", "redirect", "noindex", "canonical", "disallowed", "any"] {
        assert!(message.contains(name), "{message}");
    }
    assert!(message.contains("transient") && message.contains("excluded"), "{message}");
    let r = get_as(&app, g, &format!("/api/v1/urls?problem=any&loc={}", urlencode(&www("p1")))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(get_as(&app, g, "/api/v1/urls?problem=any&section=x").await.status, StatusCode::BAD_REQUEST);
}

async fn the_health_report_counts_each_kind_for_the_sites_a_token_reaches(b: Backend) {
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let r = get_as(&app, "global-token", "/api/v1/health").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = r.json();
    assert_eq!(body["cycle_days"], 7);
    let sites: Vec<&str> = body["sites"].as_array().unwrap().iter().map(|s| s["site"].as_str().unwrap()).collect();
    assert_eq!(sites, ["default", "shop", "blog"]);
    let www = &body["sites"][0];
    let counts = |site: &Value| -> Vec<(String, u64, bool)> {
        site["problems"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v["urls"].as_u64().unwrap(), v["oldest"].is_string()))
            .collect()
    };
    let mut expected: Vec<(String, u64, bool)> = Kind::ALL
        .iter()
        .map(|k| {
            let n = u64::from(matches!(k, Kind::NotFound | Kind::Redirect | Kind::Noindex | Kind::Canonical));
            (k.name().to_owned(), n, n > 0)
        })
        .collect();
    expected.sort();
    assert_eq!(counts(www), expected, "every kind, with the oldest where it has URLs: {www}");
    assert_eq!(
        [&www["checked"], &www["policy"], &www["tracked"], &www["checked_urls"], &www["healthy"]],
        [&json!(true), &json!("exclude"), &json!(6), &json!(6), &json!(1)],
        "{www}"
    );
    assert_eq!([&www["transient"], &www["excluded"], &www["backlog"]], [&json!(1), &json!(4), &json!(0)], "{www}");
    assert!(www["last_check"].is_string() && www["seeded"].is_boolean(), "{www}");
    let shop = &body["sites"][1];
    assert_eq!(
        [&shop["policy"], &shop["tracked"], &shop["healthy"], &shop["problems"]["gone"]["urls"], &shop["excluded"]],
        [&json!("report"), &json!(2), &json!(1), &json!(1), &json!(0)],
        "{shop}"
    );
    let blog = &body["sites"][2];
    assert_eq!([&blog["checked"], &blog["policy"], &blog["tracked"]], [&json!(false), &Value::Null, &json!(0)]);
    assert_eq!(blog["last_check"], Value::Null);
    // A token of the shop: the shop alone; the default site is refused, an unknown one named with its sites only.
    let r = get_as(&app, "shop-token", "/api/v1/health").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let mine: Vec<String> =
        r.json()["sites"].as_array().unwrap().iter().map(|s| s["site"].as_str().unwrap().to_owned()).collect();
    assert_eq!(mine, ["shop"]);
    let r = get_as(&app, "shop-token", "/api/v1/health?site=default").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert!(!r.text().contains("not_found"), "{}", r.text());
    let r = get_as(&app, "shop-token", "/api/v1/health?site=nope").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("shop") && !r.text().contains("www.example.com"), "{}", r.text());
    let one = get_as(&app, "global-token", "/api/v1/health?site=shop").await.json();
    assert_eq!(one["sites"].as_array().unwrap().len(), 1);
    assert_eq!(get_as(&app, "global-token", "/api/v1/health?kind=x").await.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.get("/api/v1/health", &[]).await.status, StatusCode::UNAUTHORIZED);
}

async fn the_metrics_give_problem_excluded_and_backlog_urls_of_checked_sites(b: Backend) {
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let text = app.get("/metrics", &[]).await.text();
    let ours = ["sitemapd_health_problem_urls{", "sitemapd_health_excluded_urls{", "sitemapd_health_backlog_urls{"];
    let lines: Vec<&str> = text.lines().filter(|l| ours.iter().any(|o| l.starts_with(o))).collect();
    let kinds = ["not_found", "gone", "client_error", "redirect", "noindex", "canonical", "disallowed", "transient"];
    let mut expected = Vec::new();
    for (site, counts) in [("default", [1, 0, 0, 1, 1, 1, 0, 1]), ("shop", [0, 1, 0, 0, 0, 0, 0, 0])] {
        for (kind, n) in kinds.iter().zip(counts) {
            expected.push(format!("sitemapd_health_problem_urls{{site=\"{site}\",kind=\"{kind}\"}} {n}"));
        }
    }
    expected.push("sitemapd_health_excluded_urls{site=\"default\"} 4".into());
    expected.push("sitemapd_health_excluded_urls{site=\"shop\"} 0".into());
    expected.push("sitemapd_health_backlog_urls{site=\"default\"} 0".into());
    expected.push("sitemapd_health_backlog_urls{site=\"shop\"} 0".into());
    assert_eq!(lines, expected, "the blog is not checked: no series");
    for name in ["sitemapd_health_problem_urls", "sitemapd_health_excluded_urls", "sitemapd_health_backlog_urls"] {
        assert!(text.contains(&format!("# TYPE {name} gauge")), "{name}: {text}");
    }
    // A URL written again is due at once: the backlog counts it.
    let headers = [("content-type", "application/json"), ("authorization", &bearer("global-token"))];
    let body = axum::body::Body::from(json!([{"loc": "https://shop.example.com/s2", "priority": 0.5}]).to_string());
    let r = app.request(axum::http::Method::PUT, "/api/v1/urls", &headers, body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let text = app.get("/metrics", &[]).await.text();
    assert!(text.contains("sitemapd_health_backlog_urls{site=\"shop\"} 1\n"), "{text}");
    // Checking off: no series at all.
    let off = app.another_process_with(&[("SITEMAPD_HEALTH_CHECK", "")]).await;
    let text = off.get("/metrics", &[]).await.text();
    assert!(!text.contains("sitemapd_health_problem_urls"), "{text}");
}

async fn the_site_screen_lists_problem_urls_with_their_reason_escaped(b: Backend) {
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let r = app.get("/view/default/", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let html = r.text();
    let panel = between(&html, "<h2 id=\"health\">URL health</h2>", "<table class=\"cards pages");
    assert!(panel.contains("Policy <strong id=\"health-policy\">exclude</strong>"), "{panel}");
    let kind = |name: &str| between(panel, &format!("<tr id=\"kind-{name}\""), "</tr>").to_owned();
    assert!(kind("not_found").contains("Not found (404)</th>") && kind("not_found").contains(">1</td>"), "{panel}");
    assert!(kind("not_found").contains(" ago</time>"), "the oldest: {panel}");
    assert!(kind("gone").contains(">0</td>") && kind("gone").contains(">none<"), "{panel}");
    assert!(kind("transient").contains(">1</td>") && kind("excluded").contains(">4</td>"), "{panel}");
    assert!(panel.contains("<strong id=\"health-backlog\">0</strong>"), "{panel}");
    let urls = between(panel, "<table class=\"cards health-urls\">", "</table>");
    let rows: Vec<&str> = urls.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 5, "four problems, then the timeout: {urls}");
    assert!(rows[0].contains(">https://www.example.com/p1</a>") && rows[0].contains("not found (404)"), "{}", rows[0]);
    assert!(rows[0].contains("<span class=\"flag\">excluded</span>"), "{}", rows[0]);
    assert!(rows[1].contains("redirects (301) to https://www.example.com/p2-new"), "{}", rows[1]);
    assert!(rows[2].contains("noindex (meta robots)"), "{}", rows[2]);
    // The hostile loc and canonical, escaped; its link goes to its lookup.
    let hostile = rows[3];
    assert!(hostile.contains(&format!(">{}</a>", HOSTILE_STORED.replace('&', "&#38;"))), "{hostile}");
    assert!(hostile.contains("canonical is https://www.example.com/c?a=&#60;b&#62;&#38;d=&#34;e&#34;"), "{hostile}");
    assert!(hostile.contains(&format!("href=\"./lookup?loc={}\"", urlencode(HOSTILE_STORED))), "{hostile}");
    assert!(rows[4].contains("p5</a>") && rows[4].contains("last attempt: timeout") && rows[4].contains(">listed<"));
    assert!(!html.contains("<b>") && !html.contains("<script"), "no markup from the data, no script");
    // The shop reports: nothing excluded.
    let shop = app.get("/view/shop/", &[]).await.text();
    assert!(shop.contains("<strong id=\"health-policy\">report</strong>") && shop.contains("gone (410)"), "{shop}");
    assert!(!shop.contains("<span class=\"flag\">excluded</span>"), "{shop}");
    // The blog is not checked: no panel.
    let blog = app.get("/view/blog/", &[]).await.text();
    assert!(!blog.contains("URL health"), "{blog}");
}

/// The lookup screen each problem URL links to is titled by the URL and shows its health (why, since when, left
/// out or not, its last and next check) and its crawler reads; a URL of a site that is not checked says so.
async fn a_problem_urls_screen_is_titled_by_its_url_and_shows_its_health(b: Backend) {
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let site = app.get("/view/default/", &[]).await.text();
    let href = between(&site, "<th scope=\"row\" data-label=\"URL\" class=\"loc\"><a href=\"./", "\"");
    assert_eq!(href, format!("lookup?loc={}", urlencode(&www("p1"))), "the first problem's link");
    let r = app.get(&format!("/view/default/{href}"), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let html = r.text();
    assert!(html.contains("<title>https://www.example.com/p1 in default · sitemapd</title>"), "{html}");
    assert!(html.contains("<h1 class=\"loc\" id=\"record-title\">https://www.example.com/p1</h1>"), "{html}");
    assert!(!html.contains("Record 1<"), "{html}");
    let health = between(&html, "<h2 id=\"record-health\">URL health</h2>", "<h2 id=\"record-crawlers\">");
    assert!(health.contains("class=\"summary health-problem\""), "{health}");
    assert!(health.contains("<dt>Why</dt><dd>not found (404)</dd>"), "{health}");
    assert!(health.contains("<span class=\"flag\">excluded</span>"), "{health}");
    assert!(health.contains("<dt>Status</dt><dd>404</dd>") && health.contains("<dt>Next check</dt>"), "{health}");
    assert!(health.contains("<dt>Last check</dt><dd><time") && health.contains(" ago</time>"), "{health}");
    assert!(html.contains("<dl class=\"facts\" id=\"record-reads\">\n<dt>Googlebot</dt>"), "crawlers: {html}");
    // The timeout: no definite answer yet, its last attempt said.
    let p5 = app.get(&format!("/view/default/lookup?loc={}", urlencode(&www("p5"))), &[]).await.text();
    assert!(p5.contains("health-transient") && p5.contains("<dt>Last attempt</dt><dd>timeout</dd>"), "{p5}");
    // The healthy page; the blog, not checked.
    let p4 = app.get(&format!("/view/default/lookup?loc={}", urlencode(&www("p4"))), &[]).await.text();
    assert!(p4.contains("Healthy: the last check answered 200.") && !p4.contains("<dt>Why</dt>"), "{p4}");
    let blog = app.get("/view/blog/lookup?loc=https://blog.example.com/b1", &[]).await.text();
    assert!(blog.contains("id=\"record-health-off\">This site's URLs are not checked."), "{blog}");
}

/// URLs the write path queued (no walk of the stored records has run) and all checked: the panel does not say
/// that stored URLs are still being queued, and the report says `seeded`.
async fn urls_the_writes_queued_are_not_said_to_be_still_queued(b: Backend) {
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let html = app.get("/view/default/", &[]).await.text();
    let panel = between(&html, "<h2 id=\"health\">URL health</h2>", "</p>");
    assert!(panel.contains("6 of 6 tracked URLs checked, 1 healthy;"), "{panel}");
    assert!(!panel.contains("still being queued"), "{panel}");
    let report = get_as(&app, "global-token", "/api/v1/health").await.json();
    let sites = report["sites"].as_array().expect("sites");
    let www = sites.iter().find(|s| s["site"] == "default").expect("the default site");
    assert_eq!(www["seeded"], true, "{www}");
}

/// The text of `html` after `start` up to `end`; panics when either is missing.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html.find(start).unwrap_or_else(|| panic!("{start:?} not in {html}")) + start.len();
    let len = html[from..].find(end).unwrap_or_else(|| panic!("{end:?} not after {start:?} in {html}"));
    &html[from..from + len]
}

/// The site screen with its URL health panel as Chromium renders it from `serve()` on a loopback port: the DOM
/// holds the panel and the hostile values as text, and screenshots at a desktop's width (1280) and a narrow phone's
/// (420) are kept in `target/artifacts/view/` (`health-*.png`) to be looked at.
async fn the_panel_renders_in_a_real_browser_at_both_widths(b: Backend) {
    use crate::view::{chromium, dom, screenshot, serve};
    let chromium = chromium();
    let app = spawn(b, CHECKS).await;
    seed(&app).await;
    let (port, _stop) = serve(&app).await;
    let url = format!("http://127.0.0.1:{port}/view/default/");
    let html = dom(&chromium, &url).await;
    assert!(html.contains("<h2 id=\"health\">URL health</h2>"), "{html}");
    assert!(html.contains("canonical is https://www.example.com/c?a=&lt;b&gt;&amp;d=\"e\""), "as text: {html}");
    assert!(!html.contains("<b>") && !html.contains("<script"), "{html}");
    let backend = format!("{b:?}").to_lowercase();
    for (device, size) in [("desktop", (1280, 1600)), ("narrow", (420, 2400))] {
        screenshot(&chromium, &url, &format!("health-{device}-{backend}.png"), size).await;
    }
}
