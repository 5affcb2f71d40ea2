//! The write API through the real router: auth, bodies, validation, errors, look-ups and listing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sitemapd::AppState;
use sitemapd::domain::Sites;
use sitemapd::store::{PgStore, SqliteStore, Store};

use crate::support::{Backend, PUBLIC_URL, TestApp, options, postgres_url, urlencode};
use crate::{both_backends, through_pooler};

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

async fn upsert_returns_counts_and_stores_normalized_entries(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let r = app
        .put_json(&json!([
            {"loc": "HTTPS://WWW.EXAMPLE.COM:443/a?x=1&y=2", "lastmod": "2024-05-01T08:20+02:00",
             "changefreq": "WEEKLY", "priority": 0.8},
            {"loc": loc("b"), "lastmod": null},
        ]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"received": 2, "created": 2, "updated": 0, "unchanged": 0}));
    assert_eq!(r.header("cache-control"), Some("no-store"), "API answers are never cached");
    let found = app.find("https://www.example.com/a?x=1&y=2").await;
    assert_eq!(found.status, StatusCode::OK);
    assert_eq!(
        found.json(),
        json!({"loc": "https://www.example.com/a?x=1&y=2", "lastmod": "2024-05-01T06:20:00Z", "changefreq": "weekly",
               "priority": 0.8, "section": null, "site": "default", "sitemap": "https://www.example.com/sitemap-1.xml",
               // No crawler has read its page yet.
               "crawlers": {"googlebot": {"last_read": null, "read_since_change": false},
                            "bingbot": {"last_read": null, "read_since_change": false}},
               // The site's URLs are not checked (health_check).
               "health": null,
               // It declares no alternates: it is in no hreflang cluster.
               "hreflang": null})
    );
    // Look-ups normalize like writes do.
    assert_eq!(app.find("https://WWW.example.com:443/a?x=1&y=2").await.status, StatusCode::OK);
    assert_eq!(app.find(&loc("missing")).await.status, StatusCode::NOT_FOUND);
    // A later duplicate wins; the superseded one counts as unchanged.
    let r = app.put_json(&json!([{"loc": loc("b"), "priority": 0.2}, {"loc": loc("b"), "priority": 1}])).await;
    assert_eq!(r.json(), json!({"received": 2, "created": 0, "updated": 1, "unchanged": 1}));
    assert_eq!(app.find(&loc("b")).await.json()["priority"], json!(1.0));
}

async fn an_invalid_array_reports_every_bad_entry_and_stores_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let r = app
        .put_json(&json!([
            {"loc": loc("ok")},
            {"loc": "https://elsewhere.test/a"},
            {"loc": loc("c"), "lastmod": "2024-05", "priority": 2},
            {"loc": loc("d"), "colour": "red"},
            "not an object",
            {"changefreq": "sometimes"},
        ]))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    let body = r.json();
    assert_eq!(body["error"], "invalid");
    let details: BTreeSet<(u64, String)> = body["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["index"].as_u64().unwrap(), d["field"].as_str().unwrap().to_owned()))
        .collect();
    let expected: BTreeSet<(u64, String)> =
        [(1, "loc"), (2, "lastmod"), (2, "priority"), (3, "colour"), (4, ""), (5, "changefreq"), (5, "loc")]
            .into_iter()
            .map(|(i, f)| (i, f.to_owned()))
            .collect();
    assert_eq!(details, expected);
    assert!(body["message"].as_str().unwrap().contains("5 of 6"));
    assert_eq!(app.find(&loc("ok")).await.status, StatusCode::NOT_FOUND, "nothing stored");
}

async fn syntax_errors_are_400_and_wrong_shapes_are_422(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let json = [("content-type", "application/json")];
    for (body, status) in [
        ("[{\"loc\": ", StatusCode::BAD_REQUEST),
        ("{\"loc\": \"x\"", StatusCode::BAD_REQUEST),
        ("not json", StatusCode::BAD_REQUEST),
        ("{\"loc\": \"https://www.example.com/a\"}", StatusCode::UNPROCESSABLE_ENTITY),
        ("\"text\"", StatusCode::UNPROCESSABLE_ENTITY),
        ("[1, 2]", StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let r = app.request(Method::PUT, "/api/v1/urls", &json, Body::from(body)).await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        let e = r.json();
        assert!(e["error"].is_string() && e["message"].is_string(), "{e}");
    }
    let r = app.request(Method::PUT, "/api/v1/urls", &json, Body::from("[]")).await;
    assert_eq!(r.json(), json!({"received": 0, "created": 0, "updated": 0, "unchanged": 0}));
}

async fn content_type_and_size_limits(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_MAX_JSON_BYTES", "1024")]).await;
    let body = json!([{"loc": loc("a")}]).to_string();
    for ct in [None, Some("text/plain"), Some("application/xml")] {
        let headers: Vec<(&str, &str)> = ct.iter().map(|c| ("content-type", *c)).collect();
        let r = app.request(Method::PUT, "/api/v1/urls", &headers, Body::from(body.clone())).await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(r.json()["error"], "unsupported_media_type");
    }
    let ok = app
        .request(Method::PUT, "/api/v1/urls", &[("content-type", "Application/JSON; charset=utf-8")], Body::from(body))
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    let big: Vec<Value> = (0..40).map(|i| json!({"loc": loc(&format!("p{i}"))})).collect();
    let r = app.put_json(&Value::Array(big)).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(app.find(&loc("p0")).await.status, StatusCode::NOT_FOUND);
}

async fn tokens_are_required_on_every_api_route_when_configured(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", "s3cret,other")]).await;
    let body = || Body::from(json!([{"loc": loc("a")}]).to_string());
    let ct = ("content-type", "application/json");
    for auth in [None, Some("Bearer wrong"), Some("Basic czNjcmV0"), Some("Bearer"), Some("s3cret")] {
        let mut headers = vec![ct];
        headers.extend(auth.map(|a| ("authorization", a)));
        let r = app.request(Method::PUT, "/api/v1/urls", &headers, body()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
        assert_eq!(r.json()["error"], "unauthorized");
    }
    for auth in ["Bearer s3cret", "bearer other", "BEARER s3cret"] {
        let r = app.request(Method::PUT, "/api/v1/urls", &[ct, ("authorization", auth)], body()).await;
        assert_eq!(r.status, StatusCode::OK, "{auth}");
    }
    let reads = [
        (Method::GET, format!("/api/v1/urls?loc={}", crate::support::urlencode(&loc("a")))),
        (Method::GET, "/api/v1/urls".to_owned()),
        (Method::DELETE, format!("/api/v1/urls?loc={}", crate::support::urlencode(&loc("a")))),
        (Method::POST, "/api/v1/urls/delete".to_owned()),
    ];
    for (method, uri) in reads {
        let r = app.request(method.clone(), &uri, &[ct], Body::from("[]")).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{method} {uri}");
    }
    // The sitemaps themselves are public.
    assert_eq!(app.get("/sitemap.xml", &[]).await.status, StatusCode::OK);
}

async fn ndjson_streams_in_batches_and_reports_counts(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_NDJSON_BATCH", "3")]).await;
    let mut body: String = (0..10).map(|i| format!("{}\n", json!({"loc": loc(&format!("n{i}"))}))).collect();
    body.push_str("\r\n   \n");
    body.push_str(&json!({"loc": loc("n0"), "priority": 0.5}).to_string()); // no final newline
    let r = app.put_ndjson(&body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"received": 11, "created": 10, "updated": 1, "unchanged": 0}));
    assert_eq!(app.find(&loc("n0")).await.json()["priority"], json!(0.5));
    // Batches commit one after another: n0 really is set back and forth (lines 1 and 11 are in different batches).
    let again = app.put_ndjson(&body).await;
    assert_eq!(again.json(), json!({"received": 11, "created": 0, "updated": 2, "unchanged": 9}));
}

/// A batch also closes at `max_json_bytes` of lines, however many entries it holds: large entries never make a
/// batch larger than one JSON body may be.
async fn an_ndjson_batch_closes_at_max_json_bytes_of_lines(b: Backend) {
    let env = [("SITEMAPD_NDJSON_BATCH", "100000"), ("SITEMAPD_MAX_JSON_BYTES", "1024")];
    let app = TestApp::spawn(b, &env).await;
    let first = json!({"loc": loc("n0"), "priority": 0.5}).to_string();
    let filler: Vec<String> =
        (1..=16).map(|i| json!({"loc": loc(&format!("filler-{i:02}-{}", "x".repeat(40)))}).to_string()).collect();
    assert!(first.len() + filler.iter().map(String::len).sum::<usize>() >= 1024, "the lines pass 1,024 bytes");
    let last = json!({"loc": loc("n0")}).to_string();
    let body = format!("{first}\n{}\n{last}\n", filler.join("\n"));
    let r = app.put_ndjson(&body).await;
    assert_eq!(r.json(), json!({"received": 18, "created": 17, "updated": 1, "unchanged": 0}), "{}", r.text());
    // n0 is set and cleared again in two batches (as with a batch of 1,024 bytes), not once in one.
    let again = app.put_ndjson(&body).await;
    assert_eq!(again.json(), json!({"received": 18, "created": 0, "updated": 2, "unchanged": 16}));
}

async fn ndjson_stops_at_the_first_bad_line_keeping_what_came_before(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_NDJSON_BATCH", "2")]).await;
    let lines = [
        json!({"loc": loc("a")}).to_string(),
        json!({"loc": loc("b")}).to_string(),
        String::new(),
        json!({"loc": loc("c")}).to_string(),
        json!({"loc": loc("d"), "lastmod": "yesterday"}).to_string(),
        json!({"loc": loc("e")}).to_string(),
    ];
    let r = app.put_ndjson(&lines.join("\n")).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    let body = r.json();
    assert_eq!(body["line"], 5);
    assert_eq!(body["committed"], 3);
    assert_eq!(body["details"][0]["field"], "lastmod");
    assert_eq!(body["details"][0]["line"], 5);
    assert!(body["message"].as_str().unwrap().contains("line 5"));
    for (path, stored) in [("a", true), ("b", true), ("c", true), ("d", false), ("e", false)] {
        assert_eq!(app.find(&loc(path)).await.status == StatusCode::OK, stored, "{path}");
    }
    let r = app.put_ndjson(&format!("{}\n{{\"loc\": oops}}\n", json!({"loc": loc("f")}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!((r.json()["line"].clone(), r.json()["committed"].clone()), (json!(2), json!(1)));
    let r = app.put_ndjson("[1]\n").await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.json()["line"], 1);
}

/// A body of thousands of lines is parsed in chunks at once, and answered as if line by line: the first bad line is
/// the one reported, however far the lines after it were read, and every line before it is committed.
async fn a_long_ndjson_body_stops_at_its_first_bad_line_across_parse_chunks(b: Backend) {
    let env = [("SITEMAPD_NDJSON_BATCH", "700"), ("SITEMAPD_MAX_LINE_BYTES", "4096")];
    let app = TestApp::spawn(b, &env).await;
    let good = |i: usize| json!({"loc": loc(&format!("long-{i:05}"))}).to_string();
    // A bad entry on line 2,345, bad JSON on line 2,900 and an overlong line on 4,000: line 2,345 is reported.
    let mut lines: Vec<String> = (1..=4500).map(good).collect();
    lines[2344] = json!({"loc": loc("long-bad"), "priority": 7}).to_string();
    lines[2899] = "{\"loc\": oops".to_owned();
    lines[3999] = json!({"loc": loc(&"x".repeat(5000))}).to_string();
    let r = app.put_ndjson(&lines.join("\n")).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    let body = r.json();
    assert_eq!((body["line"].clone(), body["committed"].clone()), (json!(2345), json!(2344)), "{body}");
    assert_eq!(body["details"][0]["field"], "priority");
    assert_eq!(app.find(&loc("long-02344")).await.status, StatusCode::OK, "the line before is stored");
    assert_eq!(app.find(&loc("long-02346")).await.status, StatusCode::NOT_FOUND, "the line after is not");
    // Without the bad entry, the bad JSON is first; without both, the overlong line; without any, every line.
    lines[2344] = good(2345);
    let r = app.put_ndjson(&lines.join("\n")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!((r.json()["line"].clone(), r.json()["committed"].clone()), (json!(2900), json!(2899)));
    lines[2899] = good(2900);
    let r = app.put_ndjson(&lines.join("\n")).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert_eq!((r.json()["line"].clone(), r.json()["committed"].clone()), (json!(4000), json!(3999)));
    lines[3999] = good(4000);
    let r = app.put_ndjson(&format!("{}\n", lines.join("\n"))).await;
    assert_eq!(r.json(), json!({"received": 4500, "created": 501, "updated": 0, "unchanged": 3999}), "{}", r.text());
}

/// A long body's lines are parsed on the background threads of lower CPU priority, off the runtime's workers that
/// serve crawlers: each chunk of lines is a job there, and so is a large JSON array. The answers are those of a parse
/// in place.
async fn bodies_are_parsed_on_the_background_threads(b: Backend) {
    use sitemapd::ingest::background::jobs_run;
    let app = TestApp::spawn(b, &[]).await;
    let body: String = (0..2500).map(|i| format!("{}\n", json!({"loc": loc(&format!("bg-{i:04}"))}))).collect();
    let before = jobs_run();
    let r = app.put_ndjson(&body).await;
    assert_eq!(r.json(), json!({"received": 2500, "created": 2500, "updated": 0, "unchanged": 0}), "{}", r.text());
    assert!(jobs_run() >= before + 3, "two chunks of 1,000 lines and the rest: {} jobs", jobs_run() - before);
    let array: Vec<Value> = (0..2500).map(|i| json!({"loc": loc(&format!("bg-{i:04}-{}", "x".repeat(100)))})).collect();
    assert!(serde_json::to_vec(&array).unwrap().len() >= 256 * 1024, "a body parsed apart from the request");
    let before = jobs_run();
    let r = app.put_json(&Value::Array(array)).await;
    assert_eq!(r.json(), json!({"received": 2500, "created": 2500, "updated": 0, "unchanged": 0}), "{}", r.text());
    assert!(jobs_run() > before, "the array's parse is a job");
}

async fn an_overlong_ndjson_line_is_refused_by_number(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_MAX_LINE_BYTES", "4096")]).await;
    let long = json!({"loc": loc(&"x".repeat(5000))}).to_string();
    let r = app.put_ndjson(&format!("{}\n{long}\n", json!({"loc": loc("a")}))).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!((r.json()["line"].clone(), r.json()["committed"].clone()), (json!(2), json!(1)));
}

/// The limit counts a line's bytes without its terminator: `\n` and `\r\n` lines of the same text are alike.
async fn the_line_limit_excludes_the_line_terminator(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_MAX_LINE_BYTES", "4096")]).await;
    let line = |path: &str, len: usize| {
        let text = json!({"loc": loc(path)}).to_string();
        let padded = format!("{}{}}}", &text[..text.len() - 1], " ".repeat(len - text.len()));
        assert_eq!(padded.len(), len);
        padded
    };
    for (end, name) in [("\n", "lf"), ("\r\n", "crlf")] {
        let r = app.put_ndjson(&format!("{}{end}", line(name, 4096))).await;
        assert_eq!(r.status, StatusCode::OK, "{b:?}: 4096 bytes + {name}: {}", r.text());
        let r = app.put_ndjson(&format!("{}{end}", line(&format!("{name}-over"), 4097))).await;
        assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{b:?}: 4097 bytes + {name}: {}", r.text());
        assert_eq!(r.json()["message"], "line 1 is longer than 4096 bytes");
    }
    let r = app.put_ndjson(&line("no-end", 4096)).await;
    assert_eq!(r.status, StatusCode::OK, "{b:?}: a last line without a terminator: {}", r.text());
    let r = app.put_ndjson(&line("no-end-over", 4097)).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{b:?}: {}", r.text());
}

async fn deletes_single_and_batch(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a", "b", "c"]).await;
    assert_eq!(app.delete_loc(&loc("a")).await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.delete_loc(&loc("a")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.delete_loc("https://elsewhere.test/a").await.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(app.request(Method::DELETE, "/api/v1/urls", &[], Body::empty()).await.status, StatusCode::BAD_REQUEST);
    let ct = [("content-type", "application/json")];
    let body = json!([loc("b"), "HTTPS://www.example.com/c", loc("zz")]).to_string();
    let r = app.request(Method::POST, "/api/v1/urls/delete", &ct, Body::from(body)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json(), json!({"deleted": 2, "missing": 1}));
    app.put_paths(&["d"]).await;
    let bad = json!([loc("d"), 7, "ftp://x"]).to_string();
    let r = app.request(Method::POST, "/api/v1/urls/delete", &ct, Body::from(bad)).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let indexes: Vec<u64> =
        r.json()["details"].as_array().unwrap().iter().map(|d| d["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [1, 2]);
    assert_eq!(app.find(&loc("d")).await.status, StatusCode::OK, "all or nothing");
}

async fn listing_pages_by_cursor_returns_each_entry_once(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "4")]).await;
    let paths: Vec<String> = (0..11).map(|i| format!("l{i}")).collect();
    app.put_paths(&paths.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let mut seen = Vec::new();
    let mut uri = "/api/v1/urls?limit=4".to_owned();
    loop {
        let r = app.get(&uri, &[]).await;
        assert_eq!(r.status, StatusCode::OK);
        let body = r.json();
        for item in body["items"].as_array().unwrap() {
            seen.push(item["loc"].as_str().unwrap().to_owned());
            assert!(item["sitemap"].as_str().unwrap().starts_with("https://www.example.com/sitemap-"));
        }
        match body["next"].as_str() {
            Some(next) => uri = format!("/api/v1/urls?limit=4&after={next}"),
            None => break,
        }
    }
    assert_eq!(seen, paths.iter().map(|p| loc(p)).collect::<Vec<_>>());
    for (bad, named) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=x", "limit"),
        ("after=-1", "after"),
        ("after=abc", "after"),
        ("page=2", "page"),
        ("limit=1&limit=2", "limit"),
        ("loc=a&loc=b", "loc"),
    ] {
        let r = app.get(&format!("/api/v1/urls?{bad}"), &[]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(r.json()["error"], "bad_request", "{bad}: {}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains(named), "{bad}: {}", r.text());
    }
    let one = urlencode(&loc("l0"));
    for bad in [String::new(), format!("loc={one}&loc={one}"), format!("loc={one}&x=1")] {
        let r = app.request(Method::DELETE, &format!("/api/v1/urls?{bad}"), &[], Body::empty()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "DELETE ?{bad}: {}", r.text());
        assert_eq!(r.json()["error"], "bad_request", "{bad}");
    }
    assert_eq!(app.find(&loc("l0")).await.status, StatusCode::OK, "nothing deleted");
}

async fn locs_must_lie_under_the_public_url_prefix(b: Backend) {
    let vars = [("SITEMAPD_PUBLIC_URL", "https://www.example.com/shop")];
    let app = TestApp::spawn(b, &vars).await;
    let r = app
        .put_json(&json!([{"loc": "https://www.example.com/shopping"}, {"loc": "https://www.example.com/shop"}]))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.json()["details"].as_array().unwrap().len(), 2);
    let r = app.put_json(&json!([{"loc": "https://www.example.com/shop/a"}])).await;
    assert_eq!(r.status, StatusCode::OK);
    let found = app.find("https://www.example.com/shop/a").await.json();
    assert_eq!(found["sitemap"], "https://www.example.com/shop/sitemap-1.xml");
}

async fn health_and_readiness(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    assert_eq!(app.get("/healthz", &[]).await.status, StatusCode::OK);
    assert_eq!(app.get("/readyz", &[]).await.status, StatusCode::OK);
    let r = app.get("/nope", &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json()["error"], "not_found");
}

both_backends!(
    upsert_returns_counts_and_stores_normalized_entries,
    an_invalid_array_reports_every_bad_entry_and_stores_nothing,
    syntax_errors_are_400_and_wrong_shapes_are_422,
    content_type_and_size_limits,
    tokens_are_required_on_every_api_route_when_configured,
    ndjson_streams_in_batches_and_reports_counts,
    an_ndjson_batch_closes_at_max_json_bytes_of_lines,
    ndjson_stops_at_the_first_bad_line_keeping_what_came_before,
    a_long_ndjson_body_stops_at_its_first_bad_line_across_parse_chunks,
    bodies_are_parsed_on_the_background_threads,
    an_overlong_ndjson_line_is_refused_by_number,
    the_line_limit_excludes_the_line_terminator,
    deletes_single_and_batch,
    listing_pages_by_cursor_returns_each_entry_once,
    locs_must_lie_under_the_public_url_prefix,
    health_and_readiness,
);

// Through a transaction-mode PgBouncer (tests/it/pooler.rs).
through_pooler!(
    upsert_returns_counts_and_stores_normalized_entries,
    ndjson_streams_in_batches_and_reports_counts,
    ndjson_stops_at_the_first_bad_line_keeping_what_came_before,
    deletes_single_and_batch,
    listing_pages_by_cursor_returns_each_entry_once,
    health_and_readiness,
);

/// Every request that needs the store answers 503 with Retry-After, quickly, when it is unreachable.
async fn assert_unavailable(store: Arc<dyn Store>, config: &sitemapd::config::Config) {
    let app = fake_app(store, config);
    let ct = [("content-type", "application/json")];
    let put = || Body::from(json!([{"loc": loc("a")}]).to_string());
    for (method, uri, body) in [
        (Method::GET, "/readyz", Body::empty()),
        (Method::GET, "/sitemap.xml", Body::empty()),
        (Method::GET, "/sitemap-1.xml", Body::empty()),
        (Method::GET, "/api/v1/urls", Body::empty()),
        (Method::PUT, "/api/v1/urls", put()),
    ] {
        let started = Instant::now();
        let r = app.request(method, uri, &ct, body).await;
        assert!(started.elapsed() < Duration::from_secs(5), "{uri} took {:?}", started.elapsed());
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}: {}", r.text());
        assert_eq!(r.header("retry-after"), Some("5"));
        assert!(!r.text().contains("sqlx") && !r.text().contains("pool"), "no internals: {}", r.text());
    }
    assert_eq!(app.get("/healthz", &[]).await.status, StatusCode::OK, "liveness does not depend on the store");
}

fn fake_app(store: Arc<dyn Store>, config: &sitemapd::config::Config) -> TestApp {
    TestApp::from_parts(store.clone(), config.clone(), sitemapd::app(AppState::new(store, config)))
}

#[tokio::test]
async fn a_closed_sqlite_store_answers_503() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_DB_ACQUIRE_TIMEOUT", "1s")]).await;
    let store = Arc::new(SqliteStore::connect(&options(&app.config)).await.unwrap());
    store.close().await;
    assert_unavailable(store, &app.config).await;
}

/// Needs no Postgres server (nothing listens on the port it connects to), so it runs without `TEST_DATABASE_URL`.
#[tokio::test]
async fn an_unreachable_postgres_answers_503_within_the_acquire_timeout() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_DB_ACQUIRE_TIMEOUT", "1s")]).await;
    // Nothing listens on port 9: every connection attempt fails.
    let connect = "postgres://postgres@127.0.0.1:9/none".parse().unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new().acquire_timeout(Duration::from_secs(1)).connect_lazy_with(connect);
    let store: Arc<dyn Store> =
        Arc::new(PgStore::from_pool(pool, app.config.limits(), Sites::single(app.config.sitemaps.public_url.clone())));
    assert_unavailable(store, &app.config).await;
}

#[tokio::test]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn readyz_is_503_for_any_store_error_not_500() {
    let admin = postgres_url();
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    // The server answers, but the database does not exist: not a transient error, still not ready.
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_path("sitemapd_no_such_database");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(url.as_str().parse().unwrap());
    let store: Arc<dyn Store> =
        Arc::new(PgStore::from_pool(pool, app.config.limits(), Sites::single(app.config.sitemaps.public_url.clone())));
    let r = fake_app(store, &app.config).get("/readyz", &[]).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
}

#[tokio::test]
async fn refuses_to_open_with_limits_below_what_pages_hold() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_PAGE_MAX_URLS", "5")]).await;
    app.put_paths(&["a", "b", "c", "d"]).await;
    let mut options = options(&app.config);
    options.limits.max_urls = 3;
    let e = sitemapd::store::open(&options).await.err().expect("refused").to_string();
    assert!(e.contains("SITEMAPD_PAGE_MAX_URLS") && e.contains("4 or more"), "{e}");
    options.limits.max_urls = 4;
    assert!(sitemapd::store::open(&options).await.is_ok());
}
