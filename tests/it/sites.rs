//! Several sites in one deployment: writes go to the site their loc lies under, crawlers reach a site by its host
//! (forwarding headers believed from trusted proxies only), tokens may be scoped to sites, and two sites' pages never
//! mix.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, TestApp, TestResponse, gunzip, validate_xsd, xml_texts};

const SITES: &str = "default=https://www.example.com/, shop=https://shop.example.com/, de=http://example.de:8080/";

async fn spawn(b: Backend, more: &[(&str, &str)]) -> TestApp {
    let mut vars = vec![("SITEMAPD_SITES", SITES)];
    vars.extend_from_slice(more);
    TestApp::spawn(b, &vars).await
}

fn entries(locs: &[&str]) -> Value {
    Value::Array(locs.iter().map(|l| json!({"loc": l})).collect())
}

/// A GET as a client at `peer` sends it, with `headers`.
async fn get_from(app: &TestApp, peer: Option<&str>, uri: &str, headers: &[(&str, &str)]) -> TestResponse {
    let mut builder = Request::builder().method(Method::GET).uri(uri);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let mut request = builder.body(Body::empty()).unwrap();
    if let Some(peer) = peer {
        request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    }
    app.send_exact(request).await
}

/// The locs of a page or index as the host `host` is served it.
async fn locs_at(app: &TestApp, host: &str, path: &str) -> Vec<String> {
    let r = get_from(app, None, path, &[("host", host), ("accept-encoding", "identity")]).await;
    assert_eq!(r.status, StatusCode::OK, "{host}{path}: {}", r.text());
    xml_texts(&r.text(), "loc")
}

async fn each_site_has_its_own_index_and_pages(b: Backend) {
    let app = spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    // One request spanning two sites, interleaved.
    let r = app
        .put_json(&entries(&[
            "https://www.example.com/a",
            "https://shop.example.com/x",
            "https://www.example.com/b",
            "https://shop.example.com/y",
            "https://www.example.com/c",
        ]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["created"], 5);

    assert_eq!(
        locs_at(&app, "www.example.com", "/sitemap.xml").await,
        ["https://www.example.com/sitemap-1.xml", "https://www.example.com/sitemap-2.xml"]
    );
    assert_eq!(locs_at(&app, "shop.example.com", "/sitemap.xml").await, ["https://shop.example.com/sitemap-1.xml"]);
    assert_eq!(
        locs_at(&app, "www.example.com", "/sitemap-1.xml").await,
        ["https://www.example.com/a", "https://www.example.com/b"]
    );
    assert_eq!(locs_at(&app, "www.example.com", "/sitemap-2.xml").await, ["https://www.example.com/c"]);
    assert_eq!(
        locs_at(&app, "SHOP.example.com:443", "/sitemap-1.xml").await,
        ["https://shop.example.com/x", "https://shop.example.com/y"],
        "the host in any case, with the scheme's default port"
    );
    let none = get_from(&app, None, "/sitemap-2.xml", &[("host", "shop.example.com")]).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND, "shop has one page");
    let empty = get_from(&app, None, "/sitemap.xml", &[("host", "example.de:8080")]).await;
    assert_eq!(empty.status, StatusCode::NOT_FOUND, "de has no URLs yet");

    // A host that is no site's gets 404 for every sitemap, never another site's.
    for path in ["/sitemap.xml", "/sitemap-1.xml", "/sitemap-1.xml.gz", "/sitemap-news.xml"] {
        for host in ["evil.test", "example.de", "www.example.com.evil.test", ""] {
            let r = get_from(&app, None, path, &[("host", host)]).await;
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{host}{path}");
            assert!(!r.text().contains("example.com/"), "{host}{path}: {}", r.text());
        }
    }

    // A change to one site touches none of the other's pages.
    let shop_page = get_from(&app, None, "/sitemap-1.xml", &[("host", "shop.example.com")]).await;
    let shop_index = get_from(&app, None, "/sitemap.xml", &[("host", "shop.example.com")]).await;
    let r = app.put_json(&entries(&["https://www.example.com/a2", "https://www.example.com/b"])).await;
    assert_eq!(r.json()["created"], 1);
    let again = get_from(&app, None, "/sitemap-1.xml", &[("host", "shop.example.com")]).await;
    assert_eq!(again.header("etag"), shop_page.header("etag"));
    assert_eq!(again.body, shop_page.body);
    let index = get_from(&app, None, "/sitemap.xml", &[("host", "shop.example.com")]).await;
    assert_eq!(index.header("etag"), shop_index.header("etag"));
    assert_eq!(index.header("last-modified"), shop_index.header("last-modified"));

    let gz = get_from(&app, None, "/sitemap-1.xml.gz", &[("host", "shop.example.com")]).await;
    assert!(gunzip(&gz.body).contains("https://shop.example.com/x"));
    let www = get_from(&app, None, "/sitemap-1.xml", &[("host", "www.example.com"), ("accept-encoding", "identity")]);
    let www = www.await;
    validate_xsd(&[("shop page", &again.body), ("www page", &www.body), ("shop index", &index.body)]);
}

async fn a_loc_under_no_site_is_refused_naming_the_sites(b: Backend) {
    let app = spawn(b, &[]).await;
    let r = app.put_json(&entries(&["https://www.example.com/ok", "https://other.example.com/x"])).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    let message = r.json()["details"][0]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(
            "default (https://www.example.com/), shop (https://shop.example.com/), de (http://example.de:8080/)"
        ),
        "{message}"
    );
    assert_eq!(app.find("https://www.example.com/ok").await.status, StatusCode::NOT_FOUND, "nothing stored");
    let r = app.put_ndjson("{\"loc\":\"http://example.de/wrong-port\"}\n").await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
}

async fn forwarding_headers_are_believed_from_trusted_proxies_only(b: Backend) {
    let app = spawn(b, &[("SITEMAPD_TRUSTED_PROXIES", "10.0.0.0/8, ::1")]).await;
    app.put_json(&entries(&["https://www.example.com/a", "https://shop.example.com/secret"])).await;
    let forged: &[(&str, &str)] = &[
        ("host", "www.example.com"),
        ("x-forwarded-host", "shop.example.com"),
        ("forwarded", "for=1.2.3.4;host=shop.example.com"),
        ("accept-encoding", "identity"),
    ];
    // A client (not a trusted proxy) naming another host reads its own Host's sitemaps.
    for peer in [None, Some("192.168.1.7:5000"), Some("11.0.0.1:1"), Some("[2001:db8::1]:1")] {
        for path in ["/sitemap.xml", "/sitemap-1.xml"] {
            let r = get_from(&app, peer, path, forged).await;
            assert_eq!(r.status, StatusCode::OK, "{peer:?}{path}");
            assert!(!r.text().contains("shop.example.com"), "{peer:?}{path} leaked shop's sitemap: {}", r.text());
            assert!(r.text().contains("https://www.example.com/"), "{peer:?}{path}");
        }
    }
    // The trusted proxy: the header it sets (X-Forwarded-Host by default).
    for peer in ["10.1.2.3:40000", "[::1]:40000", "[::ffff:10.0.0.9]:1"] {
        let r = get_from(&app, Some(peer), "/sitemap-1.xml", forged).await;
        assert_eq!(xml_texts(&r.text(), "loc"), ["https://shop.example.com/secret"], "{peer}");
    }
    // A client's own Forwarded, passed on by the trusted proxy beside the X-Forwarded-Host it set, is not read.
    let passed_on = [
        ("host", "127.0.0.1:8080"),
        ("x-forwarded-host", "www.example.com"),
        ("forwarded", "host=shop.example.com"),
        ("accept-encoding", "identity"),
    ];
    let r = get_from(&app, Some("10.0.0.1:1"), "/sitemap-1.xml", &passed_on).await;
    assert_eq!(xml_texts(&r.text(), "loc"), ["https://www.example.com/a"]);
    // With SITEMAPD_FORWARDED_HEADER=forwarded, the other way round.
    let fwd = app.another_process_with(&[("SITEMAPD_FORWARDED_HEADER", "forwarded")]).await;
    let r = get_from(&fwd, Some("10.0.0.1:1"), "/sitemap-1.xml", &passed_on).await;
    assert_eq!(xml_texts(&r.text(), "loc"), ["https://shop.example.com/secret"]);
    let r = get_from(
        &fwd,
        Some("10.0.0.1:1"),
        "/sitemap-1.xml",
        &[("host", "www.example.com"), ("x-forwarded-host", "shop.example.com")],
    )
    .await;
    assert!(!r.text().contains("shop.example.com"), "X-Forwarded-Host is not read then: {}", r.text());
    // An absolute-form target names the host, whatever Host says.
    let r = get_from(&app, None, "https://www.example.com/sitemap-1.xml", &[("host", "shop.example.com")]).await;
    assert_eq!(xml_texts(&r.text(), "loc"), ["https://www.example.com/a"]);
    let xfh = [("host", "127.0.0.1:8080"), ("x-forwarded-host", "shop.example.com"), ("accept-encoding", "identity")];
    let r = get_from(&app, Some("10.0.0.1:1"), "/sitemap-1.xml", &xfh).await;
    assert_eq!(xml_texts(&r.text(), "loc"), ["https://shop.example.com/secret"]);
    let unknown = [("host", "www.example.com"), ("x-forwarded-host", "nobody.test")];
    let r = get_from(&app, Some("10.0.0.1:1"), "/sitemap.xml", &unknown).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "the proxy names a host that is no site's");
}

/// A request through the API with `token`.
async fn call(app: &TestApp, token: &str, method: Method, uri: &str, body: Option<(&str, String)>) -> TestResponse {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("authorization", auth.as_str())];
    let body = match &body {
        Some((content_type, body)) => {
            headers.push(("content-type", content_type));
            Body::from(body.clone())
        }
        None => Body::empty(),
    };
    app.request(method, uri, &headers, body).await
}

fn json_body(locs: &[&str]) -> Option<(&'static str, String)> {
    Some(("application/json", entries(locs).to_string()))
}

async fn tokens_scoped_to_a_site_reach_that_site_only(b: Backend) {
    let tokens = "global-token, shop:shop-token, de:two-sites, shop:two-sites";
    let app = spawn(b, &[("SITEMAPD_API_TOKENS", tokens)]).await;
    let www = "https://www.example.com/a";
    let shop = "https://shop.example.com/x";
    assert_eq!(call(&app, "global-token", Method::PUT, "/api/v1/urls", json_body(&[www])).await.status, StatusCode::OK);

    // Writing another site's URL: 403, and nothing of the request is stored.
    let r = call(
        &app,
        "shop-token",
        Method::PUT,
        "/api/v1/urls",
        json_body(&["https://shop.example.com/y", "https://www.example.com/b"]),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert!(r.text().contains("default"), "{}", r.text());
    let stored = |loc: &str| {
        let uri = format!("/api/v1/urls?loc={}", crate::support::urlencode(loc));
        let app = &app;
        async move { call(app, "global-token", Method::GET, &uri, None).await.status }
    };
    assert_eq!(stored("https://shop.example.com/y").await, StatusCode::NOT_FOUND);
    assert_eq!(call(&app, "shop-token", Method::PUT, "/api/v1/urls", json_body(&[shop])).await.status, StatusCode::OK);

    // NDJSON: stops at the first line outside its sites, after committing the lines before it.
    let ndjson = format!("{{\"loc\":\"{shop}2\"}}\n{{\"loc\":\"{www}2\"}}\n{{\"loc\":\"{shop}3\"}}\n");
    let r = call(&app, "shop-token", Method::PUT, "/api/v1/urls", Some(("application/x-ndjson", ndjson))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert_eq!((r.json()["line"].clone(), r.json()["committed"].clone()), (json!(2), json!(1)));
    assert_eq!(stored(&format!("{www}2")).await, StatusCode::NOT_FOUND);

    // Reading: a record, and listings.
    let enc = crate::support::urlencode;
    let find = |token: &'static str, loc: &str| {
        let uri = format!("/api/v1/urls?loc={}", enc(loc));
        let app = &app;
        async move { call(app, token, Method::GET, &uri, None).await }
    };
    assert_eq!(find("shop-token", www).await.status, StatusCode::FORBIDDEN);
    let found = find("shop-token", shop).await;
    assert_eq!((found.status, found.json()["site"].clone()), (StatusCode::OK, json!("shop")));
    assert_eq!(found.json()["sitemap"], "https://shop.example.com/sitemap-1.xml");
    assert_eq!(find("global-token", www).await.status, StatusCode::OK);
    let listed = |r: TestResponse| -> Vec<String> {
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        r.json()["items"].as_array().unwrap().iter().map(|i| i["loc"].as_str().unwrap().to_owned()).collect()
    };
    let shop_items = listed(call(&app, "shop-token", Method::GET, "/api/v1/urls", None).await);
    assert!(shop_items.iter().all(|l| l.starts_with("https://shop.example.com/")) && shop_items.len() == 2);
    let all = listed(call(&app, "global-token", Method::GET, "/api/v1/urls", None).await);
    assert_eq!(all.len(), 3);
    let www_items = listed(call(&app, "global-token", Method::GET, "/api/v1/urls?site=default", None).await);
    assert_eq!(www_items, [www]);
    let r = call(&app, "shop-token", Method::GET, "/api/v1/urls?site=default", None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(listed(call(&app, "two-sites", Method::GET, "/api/v1/urls?site=shop", None).await).len(), 2);
    let r = call(&app, "global-token", Method::GET, "/api/v1/urls?site=nope", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    // Deleting.
    let delete_one = format!("/api/v1/urls?loc={}", enc(www));
    assert_eq!(call(&app, "shop-token", Method::DELETE, &delete_one, None).await.status, StatusCode::FORBIDDEN);
    let many = Some(("application/json", json!([shop, www]).to_string()));
    let r = call(&app, "shop-token", Method::POST, "/api/v1/urls/delete", many).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(stored(shop).await, StatusCode::OK, "nothing deleted");
    assert_eq!(stored(www).await, StatusCode::OK, "nothing deleted");
    assert_eq!(call(&app, "two-sites", Method::DELETE, &delete_one, None).await.status, StatusCode::FORBIDDEN);
    assert_eq!(call(&app, "global-token", Method::DELETE, &delete_one, None).await.status, StatusCode::NO_CONTENT);
    assert_eq!(call(&app, "wrong-token", Method::GET, "/api/v1/urls", None).await.status, StatusCode::UNAUTHORIZED);
}

/// A token scoped to two of three sites lists both (not the third) when it names none, by keyset paging in the
/// order a listing of every site gives, each record once; `site=` still lists one.
async fn a_token_of_two_sites_lists_the_sites_it_reaches(b: Backend) {
    let tokens = "ops-token, shop:multi, de:multi";
    let app = spawn(b, &[("SITEMAPD_API_TOKENS", tokens)]).await;
    let mut locs = Vec::new();
    for i in 0..7 {
        for base in ["https://www.example.com/", "https://shop.example.com/", "http://example.de:8080/"] {
            locs.push(format!("{base}p{i}"));
        }
    }
    // Written one at a time and out of order, so that the sites' ids interleave.
    locs.rotate_left(4);
    for loc in &locs {
        let r = call(&app, "ops-token", Method::PUT, "/api/v1/urls", json_body(&[loc])).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let pages = |token: &'static str, limit: u32| {
        let app = &app;
        async move {
            let (mut seen, mut after) = (Vec::new(), None::<String>);
            loop {
                let mut uri = format!("/api/v1/urls?limit={limit}");
                if let Some(cursor) = &after {
                    uri.push_str(&format!("&after={cursor}"));
                }
                let r = call(app, token, Method::GET, &uri, None).await;
                assert_eq!(r.status, StatusCode::OK, "{uri}: {}", r.text());
                let items = r.json()["items"].as_array().unwrap().clone();
                assert!(items.len() <= limit as usize);
                seen.extend(items.iter().map(|i| i["loc"].as_str().unwrap().to_owned()));
                match r.json()["next"].as_str() {
                    Some(next) => after = Some(next.to_owned()),
                    None => return seen,
                }
                assert!(seen.len() <= 100, "paging does not end");
            }
        }
    };
    let everything = pages("ops-token", 1000).await;
    assert_eq!(everything.len(), 21);
    let reached: Vec<String> = everything.iter().filter(|l| !l.starts_with("https://www.")).cloned().collect();
    assert_eq!(reached.len(), 14);
    for limit in [1, 2, 3, 5, 1000] {
        assert_eq!(pages("multi", limit).await, reached, "limit {limit}");
    }
    let r = call(&app, "multi", Method::GET, "/api/v1/urls?site=de&limit=1000", None).await;
    let de = r.json()["items"].as_array().unwrap().len();
    assert_eq!((r.status, de), (StatusCode::OK, 7));
}

/// What a token scoped to one site is told names only the sites it reaches: a loc under no site (422) and an
/// unknown `site=` (400). A 403 on a read does not say that nothing was changed; one on a write does.
async fn errors_to_a_scoped_token_name_only_its_sites(b: Backend) {
    let tokens = "ops-token, shop:shop-token, shop:multi, de:multi";
    let app = spawn(b, &[("SITEMAPD_API_TOKENS", tokens)]).await;
    let outside = "https://elsewhere.example.net/x";
    let hidden = ["www.example.com", "default", "example.de"];
    let shows_only = |r: &TestResponse, shown: &[&str], hidden: &[&str]| {
        let text = r.text();
        for name in shown {
            assert!(text.contains(name), "{name} missing: {text}");
        }
        for name in hidden {
            assert!(!text.contains(name), "{name} shown: {text}");
        }
    };
    for (body, content_type) in [
        (entries(&[outside]).to_string(), "application/json"),
        (format!("{{\"loc\":\"{outside}\"}}\n"), "application/x-ndjson"),
    ] {
        let r = call(&app, "shop-token", Method::PUT, "/api/v1/urls", Some((content_type, body))).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
        shows_only(&r, &["https://shop.example.com/"], &hidden);
    }
    let deleted = Some(("application/json", json!([outside]).to_string()));
    let r = call(&app, "shop-token", Method::POST, "/api/v1/urls/delete", deleted).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    shows_only(&r, &["https://shop.example.com/"], &hidden);
    let find = format!("/api/v1/urls?loc={}", crate::support::urlencode(outside));
    let r = call(&app, "shop-token", Method::GET, &find, None).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    shows_only(&r, &["https://shop.example.com/"], &hidden);
    let r = call(&app, "shop-token", Method::GET, "/api/v1/urls?site=nope", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    shows_only(&r, &["shop (https://shop.example.com/)"], &hidden);
    // Two sites: both, and still not the third.
    let r = call(&app, "multi", Method::PUT, "/api/v1/urls", json_body(&[outside])).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    shows_only(&r, &["https://shop.example.com/", "http://example.de:8080/"], &["www.example.com", "default"]);
    // Every site's token is told of every site.
    let r = call(&app, "ops-token", Method::PUT, "/api/v1/urls", json_body(&[outside])).await;
    shows_only(&r, &["https://www.example.com/", "https://shop.example.com/", "http://example.de:8080/"], &[]);

    // 403: a read changes nothing, and says nothing of changes; a write says nothing was changed.
    let www = "https://www.example.com/a";
    assert_eq!(call(&app, "ops-token", Method::PUT, "/api/v1/urls", json_body(&[www])).await.status, StatusCode::OK);
    let find = format!("/api/v1/urls?loc={}", crate::support::urlencode(www));
    let r = call(&app, "shop-token", Method::GET, &find, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(!r.text().contains("changed"), "{}", r.text());
    let r = call(&app, "shop-token", Method::DELETE, &find, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.text().contains("nothing was changed"), "{}", r.text());
}

async fn metrics_carry_a_site_label(b: Backend) {
    let app = spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    app.put_json(&entries(&["https://www.example.com/a", "https://shop.example.com/x", "https://shop.example.com/y"]))
        .await;
    let text = app.get("/metrics", &[]).await.text();
    for line in [
        "sitemapd_urls{site=\"default\"} 1",
        "sitemapd_urls{site=\"shop\"} 2",
        "sitemapd_urls{site=\"de\"} 0",
        "sitemapd_sitemap_pages{site=\"shop\"} 1",
        "sitemapd_page_fill_ratio{site=\"shop\",limit=\"urls\"} 1",
        "sitemapd_page_fill_ratio{site=\"default\",limit=\"urls\"} 0.5",
        "sitemapd_store_up 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
}

async fn a_record_moves_when_its_site_changes(b: Backend) {
    // First one site on www; then www becomes a site of its own and `default` moves to another host.
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a", "b"]).await;
    let sites = "default=https://new.example.com/, www=https://www.example.com/";
    let after = app.another_process_with(&[("SITEMAPD_SITES", sites)]).await;
    let r = after.put_json(&entries(&["https://www.example.com/a"])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(locs_at(&after, "www.example.com", "/sitemap-1.xml").await, ["https://www.example.com/a"]);
    let record = after.find("https://www.example.com/a").await.json();
    assert_eq!(record["site"], "www");
    // `b` stays where it was stored, listed by the old site's sitemap (docs/sites.md), until it is written
    // again.
    let b_record = after.find("https://www.example.com/b").await.json();
    assert_eq!(
        (b_record["site"].clone(), b_record["sitemap"].clone()),
        (json!("default"), json!("https://new.example.com/sitemap-1.xml"))
    );
    let old = get_from(&after, None, "/sitemap-1.xml", &[("host", "new.example.com"), ("accept-encoding", "identity")]);
    assert_eq!(xml_texts(&old.await.text(), "loc"), ["https://www.example.com/b"], "a left the old site's page");
}

async fn sitemap_answers_say_noindex_unless_turned_off(b: Backend) {
    let app = spawn(b, &[]).await;
    app.put_json(&json!([{"loc": "https://www.example.com/a", "news": {
        "publication": {"name": "N", "language": "en"}, "publication_date": "2999-01-01", "title": "T"}}]))
        .await;
    let www = [("host", "www.example.com")];
    let first = get_from(&app, None, "/sitemap-1.xml", &www).await;
    let etag = first.header("etag").unwrap().to_owned();
    let revalidate = [("host", "www.example.com"), ("if-none-match", etag.as_str())];
    for (path, headers) in [
        ("/sitemap.xml", &www[..]),
        ("/sitemap-1.xml", &www[..]),
        ("/sitemap-1.xml.gz", &www[..]),
        ("/sitemap-1.xml", &revalidate[..]),
        ("/sitemap-news.xml", &www[..]),
    ] {
        let r = get_from(&app, None, path, headers).await;
        assert!(r.status.is_success() || r.status.is_redirection() || r.status == StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.header("x-robots-tag"), Some("noindex"), "{path} {headers:?}: {}", r.status);
    }
    let api = app.get("/api/v1/urls", &[]).await;
    assert_eq!(api.header("x-robots-tag"), None, "only sitemap answers");
    let off = app.another_process_with(&[("SITEMAPD_ROBOTS_TAG", "")]).await;
    assert_eq!(get_from(&off, None, "/sitemap.xml", &www).await.header("x-robots-tag"), None);
    let other = app.another_process_with(&[("SITEMAPD_ROBOTS_TAG", "noindex, noarchive")]).await;
    assert_eq!(get_from(&other, None, "/sitemap.xml", &www).await.header("x-robots-tag"), Some("noindex, noarchive"));
}

async fn robots_txt_is_answered_per_site_when_turned_on(b: Backend) {
    let app = spawn(b, &[]).await;
    let r = get_from(&app, None, "/robots.txt", &[("host", "www.example.com")]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "off by default");
    let body = "User-agent: *\nDisallow: /admin/\n\n";
    let on = app.another_process_with(&[("SITEMAPD_ROBOTS_TXT", "true"), ("SITEMAPD_ROBOTS_TXT_BODY", body)]).await;
    let r = get_from(&on, None, "/robots.txt", &[("host", "shop.example.com")]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.text(), "User-agent: *\nDisallow: /admin/\n\nSitemap: https://shop.example.com/sitemap.xml\n");
    assert_eq!(r.header("x-robots-tag"), None, "robots.txt itself is not a sitemap");
    let r = get_from(&on, None, "/robots.txt", &[("host", "example.de:8080")]).await;
    assert_eq!(r.text(), "User-agent: *\nDisallow: /admin/\n\nSitemap: http://example.de:8080/sitemap.xml\n");
    assert_eq!(get_from(&on, None, "/robots.txt", &[("host", "nobody.test")]).await.status, StatusCode::NOT_FOUND);
    let bare = app.another_process_with(&[("SITEMAPD_ROBOTS_TXT", "true")]).await;
    let r = get_from(&bare, None, "/robots.txt", &[("host", "www.example.com")]).await;
    assert_eq!(r.text(), "Sitemap: https://www.example.com/sitemap.xml\n");
}

async fn the_view_shows_each_site_apart(b: Backend) {
    let app = spawn(b, &[]).await;
    app.put_json(&entries(&["https://www.example.com/a", "https://shop.example.com/x"])).await;
    let sites = app.get("/view/", &[]).await;
    assert_eq!(sites.status, StatusCode::OK);
    for name in ["default", "shop", "de"] {
        assert!(sites.text().contains(&format!("href=\"{name}/\"")), "{name}: {}", sites.text());
    }
    let shop = app.get("/view/shop/pages/1", &[]).await.text();
    assert!(shop.contains("https://shop.example.com/x") && !shop.contains("https://www.example.com/a"), "{shop}");
    let www = app.get("/view/default/pages/1", &[]).await.text();
    assert!(www.contains("https://www.example.com/a") && !www.contains("https://shop.example.com/x"), "{www}");
    let enc = crate::support::urlencode;
    let found = app.get(&format!("/view/shop/lookup?loc={}", enc("https://shop.example.com/x")), &[]).await;
    assert_eq!(found.status, StatusCode::OK);
    let other = app.get(&format!("/view/shop/lookup?loc={}", enc("https://www.example.com/a")), &[]).await;
    assert!(other.status.is_client_error(), "another site's loc is not this site's: {}", other.status);
    assert_eq!(app.get("/view/nope/", &[]).await.status, StatusCode::NOT_FOUND);
}

both_backends!(
    the_view_shows_each_site_apart,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    each_site_has_its_own_index_and_pages,
    a_loc_under_no_site_is_refused_naming_the_sites,
    forwarding_headers_are_believed_from_trusted_proxies_only,
    tokens_scoped_to_a_site_reach_that_site_only,
    a_token_of_two_sites_lists_the_sites_it_reaches,
    errors_to_a_scoped_token_name_only_its_sites,
    metrics_carry_a_site_label,
    a_record_moves_when_its_site_changes,
    sitemap_answers_say_noindex_unless_turned_off,
    robots_txt_is_answered_per_site_when_turned_on,
);
