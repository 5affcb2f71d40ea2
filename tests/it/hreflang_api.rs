//! hreflang clusters as the server shows them, through the real router on both backends: `GET /api/v1/hreflang`
//! (the summary, every problem by keyset paging over several pages, 400 for a bad cursor, limit or site, the
//! token's reach), a record's `hreflang` in its lookup, the `/metrics` gauges and the view's panel.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, urlencode};

fn url(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

fn alt(hreflang: &str, path: &str) -> Value {
    json!({"hreflang": hreflang, "href": url(path)})
}

/// `n` entries `/p{i}/en`, each naming itself `en` and `/p{i}/de` (not stored) `de`: `n` clusters of one stored
/// member, each with one `not_stored` problem.
fn one_way(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"loc": url(&format!("p{i}/en")),
                       "alternates": [alt("en", &format!("p{i}/en")), alt("de", &format!("p{i}/de"))]})
            })
            .collect(),
    )
}

/// A cluster with a duplicate language: `/x/en1` and `/x/en2` both claim `en`, and `/x/de` names `/x/en1`, so
/// `/x/en1` wins (two claims to one) and `/x/en2` loses.
fn duplicate() -> Value {
    json!([
        {"loc": url("x/en1"), "alternates": [alt("en", "x/en1"), alt("de", "x/de")]},
        {"loc": url("x/en2"), "alternates": [alt("en", "x/en2"), alt("de", "x/de")]},
        {"loc": url("x/de"), "alternates": [alt("de", "x/de"), alt("en", "x/en1")]},
    ])
}

async fn put(app: &TestApp, body: &Value) {
    let r = app.put_json(body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

async fn hreflang(app: &TestApp, query: &str) -> Value {
    let r = app.get(&format!("/api/v1/hreflang{query}"), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.text());
    r.json()
}

/// The summary counts the site's clusters, members and problems (every kind listed); the problems come in
/// (href, kind, hreflang) order, and paging by `next` gives each once, over several pages, the last with `next`
/// null.
async fn the_endpoint_summarizes_and_pages_every_problem(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_HREFLANG", "complete")]).await;
    let empty = hreflang(&app, "").await;
    assert_eq!(empty["site"], "default");
    assert_eq!(empty["policy"], "complete");
    assert_eq!(empty["summary"]["clusters"], 0);
    assert_eq!(empty["problems"], json!([]));
    assert_eq!(empty["next"], Value::Null);

    put(&app, &one_way(5)).await;
    put(&app, &duplicate()).await;
    let all = hreflang(&app, "?site=default").await;
    assert_eq!(all["summary"]["clusters"], 6, "{all}");
    assert_eq!(all["summary"]["members"], 8, "{all}");
    assert_eq!(
        all["summary"]["problems"],
        json!({"duplicate_language": 1, "conflicting_language": 0, "invalid_code": 0, "not_stored": 5,
               "missing_return": 0, "cross_site": 0, "too_large": 0}),
        "{all}"
    );
    let problems = all["problems"].as_array().unwrap().clone();
    assert_eq!(problems.len(), 6, "{all}");
    let keys: Vec<(String, String, String)> = problems
        .iter()
        .map(|p| {
            (
                p["href"].as_str().unwrap().into(),
                p["kind"].as_str().unwrap().into(),
                p["hreflang"].as_str().unwrap().into(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "in (href, kind, hreflang) order");
    assert_eq!(keys[0], (url("p0/de"), "not_stored".into(), "de".into()));
    let dup = problems.iter().find(|p| p["kind"] == "duplicate_language").unwrap();
    assert_eq!((dup["href"].as_str().unwrap(), dup["hreflang"].as_str().unwrap()), (url("x/en2").as_str(), "en"));
    assert_eq!(dup["cluster"], url("x/de"), "the cluster's key is its smallest URL");
    assert!(!dup["message"].as_str().unwrap().is_empty());
    assert_eq!(all["next"], Value::Null);

    // Two at a time: three pages, each problem once, in order; the last page says there is no next.
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    for page in 0.. {
        assert!(page < 10, "paging does not end");
        let query = match &after {
            None => "?limit=2".to_owned(),
            Some(cursor) => format!("?limit=2&after={}", urlencode(cursor)),
        };
        let answer = hreflang(&app, &query).await;
        let items = answer["problems"].as_array().unwrap();
        assert!(items.len() <= 2 && !items.is_empty(), "{answer}");
        paged.extend(items.iter().cloned());
        match answer["next"].as_str() {
            Some(next) => {
                assert!(next.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{next}");
                after = Some(next.to_owned());
            }
            None => break,
        }
    }
    assert_eq!(paged, problems, "paging gives every problem once, in order");
    assert_eq!(hreflang(&app, "?limit=6").await["next"], Value::Null, "exactly the last: no next page");

    // A problem fixed is gone from the listing: /p0/de stored, its cluster is whole.
    put(&app, &json!([{"loc": url("p0/de")}])).await;
    let fixed = hreflang(&app, "").await;
    assert_eq!(fixed["summary"]["problems"]["not_stored"], 4, "{fixed}");
}

/// A bad limit, cursor, site or parameter is 400 with a message saying which; several sites need `site`.
async fn bad_queries_are_refused_with_a_reason(b: Backend) {
    let sites = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
    let app = TestApp::spawn(b, &[sites, ("SITEMAPD_HREFLANG", "shop=complete")]).await;
    for (query, says) in [
        ("?site=default&limit=0", "limit must be a whole number from 1 to 1000"),
        ("?site=default&limit=1001", "limit must be a whole number from 1 to 1000"),
        ("?site=default&limit=ten", "limit must be a whole number from 1 to 1000"),
        ("?site=default&after=nonsense", "after must be a cursor returned as next by this API"),
        ("?site=default&after=eyJocmVmIjoxfQ", "after must be a cursor returned as next by this API"),
        ("?site=blog", "site must name a configured site"),
        ("", "site is needed: one of default, shop"),
        ("?site=default&loc=x", "loc"),
        ("?site=default&site=shop", "site"),
    ] {
        let r = app.get(&format!("/api/v1/hreflang{query}"), &[]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}: {}", r.text());
        assert_eq!(r.json()["error"], "bad_request", "{query}");
        assert!(r.json()["message"].as_str().unwrap().contains(says), "{query}: {}", r.text());
    }
    assert_eq!(hreflang(&app, "?site=default").await["policy"], "as_sent");
    assert_eq!(hreflang(&app, "?site=shop").await["policy"], "complete");
}

/// The token's reach: none is 401, a token of another site 403, a token of one site may leave `site` out.
async fn a_token_reaches_its_sites_only(b: Backend) {
    let sites = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
    let tokens = ("SITEMAPD_API_TOKENS", "all-sites-token-1234, shop=shop-token-12345678");
    let app = TestApp::spawn(b, &[sites, tokens]).await;
    let get = async |query: &str, token: Option<&str>| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
        app.request(Method::GET, &format!("/api/v1/hreflang{query}"), &headers, Body::empty()).await
    };
    assert_eq!(get("?site=shop", None).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(get("?site=shop", Some("wrong-token-123456")).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(get("?site=default", Some("shop-token-12345678")).await.status, StatusCode::FORBIDDEN);
    let r = get("", Some("shop-token-12345678")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["site"], "shop", "the one site the token reaches");
    assert_eq!(get("?site=default", Some("all-sites-token-1234")).await.status, StatusCode::OK);
}

/// The lookup's `hreflang`: null for a record in no cluster; else its cluster, policy, declaration, what its page
/// renders, the set, the members and the problems.
async fn the_lookup_shows_a_records_cluster(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_HREFLANG", "complete")]).await;
    put(&app, &json!([{"loc": url("plain")}])).await;
    put(&app, &duplicate()).await;
    let plain = app.find(&url("plain")).await.json();
    assert_eq!(plain["hreflang"], Value::Null, "{plain}");

    let set = json!([alt("de", "x/de"), alt("en", "x/en1")]);
    let winner = app.find(&url("x/en1")).await.json();
    let h = &winner["hreflang"];
    assert_eq!(h["cluster"], url("x/de"), "{winner}");
    assert_eq!(h["policy"], "complete");
    assert_eq!(h["declared"], json!([alt("de", "x/de"), alt("en", "x/en1")]));
    assert_eq!(h["set"], set);
    assert_eq!(h["rendered"], set, "in the set: it renders the set");
    assert_eq!(winner["alternates"], set, "the record's alternates are what its page renders");
    let members: Vec<(&str, bool, &str)> = h["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["href"].as_str().unwrap(), m["stored"].as_bool().unwrap(), m["site"].as_str().unwrap()))
        .collect();
    let (de, en1, en2) = (url("x/de"), url("x/en1"), url("x/en2"));
    assert_eq!(
        members,
        [(de.as_str(), true, "default"), (en1.as_str(), true, "default"), (en2.as_str(), true, "default")]
    );
    assert_eq!(h["problems"].as_array().unwrap().len(), 1, "{winner}");
    assert_eq!(h["problems"][0]["kind"], "duplicate_language");

    let loser = app.find(&url("x/en2")).await.json();
    let h = &loser["hreflang"];
    assert_eq!(h["declared"], json!([alt("de", "x/de"), alt("en", "x/en2")]), "{loser}");
    assert_eq!(h["rendered"], json!([]), "it lost its language: no links");
    assert_eq!(h["set"], set);
    assert!(loser.get("alternates").is_none(), "{loser}");
}

/// `/metrics` has each site's clusters, members and problems by kind, every kind listed.
async fn metrics_count_clusters_and_problems(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_HREFLANG", "complete")]).await;
    put(&app, &one_way(3)).await;
    put(&app, &duplicate()).await;
    let text = app.get("/metrics", &[]).await.text();
    for line in [
        "# TYPE sitemapd_hreflang_clusters gauge",
        "sitemapd_hreflang_clusters{site=\"default\"} 4",
        "sitemapd_hreflang_members{site=\"default\"} 6",
        "sitemapd_hreflang_problems{site=\"default\",kind=\"not_stored\"} 3",
        "sitemapd_hreflang_problems{site=\"default\",kind=\"duplicate_language\"} 1",
        "sitemapd_hreflang_problems{site=\"default\",kind=\"too_large\"} 0",
        "sitemapd_hreflang_problems{site=\"default\",kind=\"missing_return\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
}

/// The site screen's panel: the policy, the counts, the problems by kind and the first problems, each linked to
/// its lookup, escaped; with more than 20, the first 20 and the API's link.
async fn the_view_has_an_hreflang_panel(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_HREFLANG", "complete")]).await;
    let html = app.get("/view/default/", &[]).await.text();
    assert!(html.contains("<h2 id=\"hreflang\">hreflang clusters</h2>"), "{html}");
    assert!(html.contains("id=\"hreflang-policy\">complete</strong>"), "{html}");
    assert!(html.contains("No cluster"), "{html}");

    put(&app, &one_way(21)).await;
    put(&app, &duplicate()).await;
    let r = app.get("/view/default/", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(html.contains("id=\"hreflang-clusters\">22</strong>"), "{html}");
    assert!(html.contains("id=\"hreflang-members\">24</strong>"), "{html}");
    assert!(html.contains("<tr id=\"hreflang-not_stored\">"), "{html}");
    assert!(html.contains("<tr id=\"hreflang-too_large\" class=\"empty\">"), "{html}");
    let rows = html.matches("<td data-label=\"Problem\" class=\"nowrap\">").count();
    assert_eq!(rows, 20, "the first 20 problems");
    assert!(html.contains("(the first 20)"), "{html}");
    assert!(html.contains("href=\"../../api/v1/hreflang?site=default\""), "{html}");
    let lookup = format!("href=\"./lookup?loc={}\"", urlencode(&url("p0/de")));
    assert!(html.contains(&lookup), "{lookup}: {html}");
}

both_backends!(
    the_endpoint_summarizes_and_pages_every_problem,
    bad_queries_are_refused_with_a_reason,
    a_token_reaches_its_sites_only,
    the_lookup_shows_a_records_cluster,
    metrics_count_clusters_and_problems,
    the_view_has_an_hreflang_panel,
);
