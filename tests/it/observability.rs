//! Observability through the real router: `/metrics` (counters, state gauges, bounded labels) and the OpenAPI
//! document of the write API. The request log lines are checked on the real binary, in `process`.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, urlencode};

const TOKEN: &str = "obs-test-token-5f1c";

/// One sample of the Prometheus text format: name, labels, value.
pub(crate) type Sample = (String, BTreeMap<String, String>, f64);

pub(crate) fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line {line:?}"));
            let (name, labels) = match series.split_once('{') {
                None => (series, BTreeMap::new()),
                Some((name, rest)) => {
                    let labels = rest
                        .trim_end_matches('}')
                        .split("\",")
                        .filter(|p| !p.is_empty())
                        .map(|pair| {
                            let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("bad label in {line:?}"));
                            (k.to_owned(), v.trim_end_matches('"').to_owned())
                        })
                        .collect();
                    (name, labels)
                }
            };
            (name.to_owned(), labels, value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")))
        })
        .collect()
}

/// The sum of the samples named `name` whose labels include `labels`.
pub(crate) fn sum(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, _, v)| v)
        .sum()
}

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

impl TestApp {
    async fn with_token(
        &self,
        method: Method,
        uri: &str,
        content_type: &str,
        body: String,
    ) -> crate::support::TestResponse {
        let auth = format!("Bearer {TOKEN}");
        let headers = [("authorization", auth.as_str()), ("content-type", content_type)];
        self.request(method, uri, &headers, Body::from(body)).await
    }

    pub(crate) async fn scrape(&self) -> Vec<Sample> {
        let r = self.get("/metrics", &[]).await;
        assert_eq!(r.status, StatusCode::OK, "/metrics needs no token: {}", r.text());
        assert!(r.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
        samples(&r.text())
    }
}

async fn metrics_count_requests_writes_pages_and_state(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_API_TOKENS", TOKEN)]).await;
    // Counters are process-wide and other tests run beside this one, so they are compared as deltas, at least.
    let before = app.scrape().await;
    let json = "application/json";
    let entries = json!([{"loc": loc("a")}, {"loc": loc("b")}, {"loc": loc("c")}]).to_string();
    assert_eq!(app.with_token(Method::PUT, "/api/v1/urls", json, entries.clone()).await.status, StatusCode::OK);
    assert_eq!(app.with_token(Method::PUT, "/api/v1/urls", json, entries).await.status, StatusCode::OK);
    let bad = json!([{"loc": loc("d")}, {"loc": "https://elsewhere.test/"}, {"loc": 1}]).to_string();
    let r = app.with_token(Method::PUT, "/api/v1/urls", json, bad).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let one = format!("/api/v1/urls?loc={}", urlencode(&loc("c")));
    assert_eq!(app.with_token(Method::DELETE, &one, json, String::new()).await.status, StatusCode::NO_CONTENT);
    let many = json!([loc("c"), loc("zz")]).to_string();
    assert_eq!(app.with_token(Method::POST, "/api/v1/urls/delete", json, many).await.json()["missing"], 2);
    let page = app.get("/sitemap-1.xml", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    let etag = page.header("etag").unwrap().to_owned();
    assert_eq!(app.get("/sitemap-1.xml", &[("if-none-match", &etag)]).await.status, StatusCode::NOT_MODIFIED);
    assert_eq!(app.get("/no/such/thing", &[]).await.status, StatusCode::NOT_FOUND);
    // A gzip page is compressed once and kept: the cache holds exactly its bytes.
    let gzipped = app.get("/sitemap-1.xml", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gzipped.status, StatusCode::OK);
    let after = app.scrape().await;

    let delta = |name: &str, labels: &[(&str, &str)]| sum(&after, name, labels) - sum(&before, name, labels);
    let upserts = "sitemapd_url_upserts_total";
    assert!(delta(upserts, &[("outcome", "created")]) >= 3.0);
    assert!(delta(upserts, &[("outcome", "unchanged")]) >= 3.0);
    assert!(delta(upserts, &[("outcome", "rejected")]) >= 2.0, "two of the three entries were invalid");
    assert!(delta("sitemapd_url_deletes_total", &[("outcome", "deleted")]) >= 1.0);
    assert!(delta("sitemapd_url_deletes_total", &[("outcome", "missing")]) >= 2.0);
    assert!(delta("sitemapd_sitemap_pages_rendered_total", &[]) >= 1.0);
    let page_route = [("route", "/{file}")];
    assert!(delta("sitemapd_http_not_modified_total", &page_route) >= 1.0);
    assert!(
        delta("sitemapd_http_requests_total", &[("route", "/{file}"), ("method", "GET"), ("status", "304")]) >= 1.0
    );
    let put = [("route", "/api/v1/urls"), ("method", "PUT")];
    assert!(delta("sitemapd_http_requests_total", &[put[0], put[1], ("status", "422")]) >= 1.0);
    assert!(delta("sitemapd_http_request_duration_seconds_count", &put) >= 3.0);
    assert!(delta("sitemapd_http_request_duration_seconds_bucket", &[put[0], put[1], ("le", "+Inf")]) >= 3.0);
    assert!(delta("sitemapd_http_response_body_bytes_total", &page_route) >= page.body.len() as f64);
    assert!(delta("sitemapd_http_requests_total", &[("route", "unmatched"), ("status", "404")]) >= 1.0);

    // Labels carry matched routes only: never a raw path or a query.
    for (name, labels, _) in &after {
        if let Some(route) = labels.get("route") {
            assert!(route == "unmatched" || route.starts_with('/'), "{name}: {route}");
            assert!(!route.contains('?') && !route.contains("sitemap-1") && !route.contains("/no/"), "{name}: {route}");
        }
    }
    // The state gauges describe this app's store exactly.
    let gauge = |name: &str| sum(&after, name, &[]);
    assert_eq!(gauge("sitemapd_store_up"), 1.0);
    assert_eq!(gauge("sitemapd_urls"), 2.0);
    assert_eq!(gauge("sitemapd_sitemap_pages"), 1.0);
    assert!(gauge("sitemapd_db_pool_connections") >= 1.0);
    assert!(gauge("sitemapd_db_pool_idle_connections") <= gauge("sitemapd_db_pool_connections"));
    assert_eq!(gauge("sitemapd_page_cache_bytes"), gzipped.body.len() as f64);
}

both_backends!(metrics_count_requests_writes_pages_and_state);

/// Every operation of the write API, as `crates/sitemapd-server/src/api/mod.rs` routes it, with the answers each must document.
const WRITE_API: &[(&str, &str, &[&str])] = &[
    ("get", "/api/v1/urls", &["200", "400", "401", "403", "404", "422", "503"]),
    ("put", "/api/v1/urls", &["200", "400", "401", "403", "408", "413", "415", "422", "503", "507"]),
    ("delete", "/api/v1/urls", &["204", "400", "401", "403", "404", "422", "503"]),
    ("post", "/api/v1/urls/delete", &["200", "400", "401", "403", "408", "413", "415", "422", "503"]),
    ("get", "/api/v1/crawlers", &["200", "400", "401", "403", "503"]),
    ("get", "/api/v1/health", &["200", "400", "401", "403", "503"]),
    ("post", "/api/v1/health/resume", &["200", "400", "401", "403", "503"]),
    ("post", "/api/v1/health/confirm", &["200", "400", "401", "403", "503"]),
    ("get", "/api/v1/hreflang", &["200", "400", "401", "403", "503"]),
];

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "options", "head", "trace"];

#[tokio::test]
async fn openapi_document_describes_every_write_route() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_API_TOKENS", TOKEN)]).await;
    let r = app.get("/api/v1/openapi.json", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "no token needed: {}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let doc = r.json();
    assert_eq!(doc, serde_json::to_value(sitemapd::api::openapi()).unwrap(), "served as generated");

    // Structure of an OpenAPI 3 document.
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{}", doc["openapi"]);
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());
    let paths = doc["paths"].as_object().expect("paths");
    let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
    for name in ["Entry", "ErrorBody", "ErrorDetail", "UpsertCounts", "DeleteCounts", "UrlRecord", "UrlList"] {
        assert!(schemas.contains_key(name), "schema {name} missing");
    }
    assert_eq!(doc["components"]["securitySchemes"]["bearer"], json!({"type": "http", "scheme": "bearer"}));
    let entry_fields: BTreeSet<&str> =
        schemas["Entry"]["properties"].as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(
        entry_fields,
        BTreeSet::from([
            "loc",
            "lastmod",
            "changefreq",
            "priority",
            "section",
            "images",
            "videos",
            "news",
            "alternates"
        ])
    );
    for name in ["Image", "Video", "News", "Publication", "Alternate", "Restriction", "Platform", "Uploader"] {
        assert!(schemas.contains_key(name), "schema {name} missing");
    }
    let record: BTreeSet<&str> =
        schemas["UrlRecord"]["properties"].as_object().unwrap().keys().map(|k| k.as_str()).collect();
    for field in ["images", "videos", "news", "alternates"] {
        assert!(record.contains(field), "a record gives its {field} back: {record:?}");
    }
    assert_eq!(schemas["Entry"]["additionalProperties"], false);
    assert_eq!(schemas["Entry"]["required"], json!(["loc"]));
    // Every reference resolves.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, v)| match (k.as_str(), v) {
                ("$ref", Value::String(r)) => out.push(r),
                _ => refs(v, out),
            }),
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("unexpected $ref {r}"));
        assert!(schemas.contains_key(name), "dangling $ref {r}");
    }

    // Exactly the write API's operations, each with its answers, errors in the ApiError shape, and the bearer.
    let documented: BTreeSet<(String, String)> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|k| METHODS.contains(&k.as_str()))
                .map(|m| (m.clone(), path.clone()))
        })
        .collect();
    let expected: BTreeSet<(String, String)> = WRITE_API.iter().map(|(m, p, _)| ((*m).into(), (*p).into())).collect();
    assert_eq!(documented, expected);
    for (method, path, statuses) in WRITE_API {
        let op = &paths[*path][*method];
        let responses = op["responses"].as_object().unwrap();
        let got: BTreeSet<&str> = responses.keys().map(String::as_str).collect();
        assert_eq!(got, statuses.iter().copied().collect(), "{method} {path}");
        for (status, response) in responses {
            if status.starts_with('4') || status.starts_with('5') {
                let schema = &response["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(schema, "#/components/schemas/ErrorBody", "{method} {path} {status}");
            }
        }
        assert_eq!(op["security"], json!([{"bearer": []}]), "{method} {path}");
        assert!(op["operationId"].is_string() && op["summary"].is_string(), "{method} {path}");
    }
    let put_body = &paths["/api/v1/urls"]["put"]["requestBody"]["content"];
    for content_type in ["application/json", "application/x-ndjson"] {
        assert_eq!(put_body[content_type]["schema"]["items"]["$ref"], "#/components/schemas/Entry", "{content_type}");
    }
    assert!(paths["/api/v1/urls/delete"]["post"]["requestBody"]["content"]["application/json"].is_object());

    // The router agrees: each documented operation is routed and guarded (401 without a token, neither 404 nor
    // 405 with one), and with a token every other method on those paths is refused (405), so no route of theirs
    // goes undocumented.
    let auth = format!("Bearer {TOKEN}");
    for path in paths.keys() {
        for method in METHODS.iter().filter(|m| **m != "head" && **m != "trace") {
            let m = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
            let with_token = app.request(m.clone(), path, &[("authorization", &auth)], Body::empty()).await.status;
            if documented.contains(&((*method).to_owned(), path.clone())) {
                assert_eq!(app.request(m, path, &[], Body::empty()).await.status, StatusCode::UNAUTHORIZED);
                let routed = ![StatusCode::NOT_FOUND, StatusCode::METHOD_NOT_ALLOWED].contains(&with_token);
                assert!(routed, "{method} {path}: {with_token}");
            } else {
                assert_eq!(with_token, StatusCode::METHOD_NOT_ALLOWED, "{method} {path} is routed but not documented");
            }
        }
    }
}

/// A counter as the operator's documentation lists it: its name, and each label with the values listed for it
/// (none: an open label, a route or a site).
pub(crate) type DocumentedCounter = (String, Vec<(String, Vec<String>)>);

/// Every counter the metric tables of `docs/operations.md`, `docs/crawlers.md` and `docs/health.md` list (rows
/// `| metric | counter | labels | meaning |`). The labels cell names each label in backticks; a label followed by
/// `:` lists its values in backticks up to the next `;`; remarks in parentheses are not values.
pub(crate) fn documented_counters() -> Vec<DocumentedCounter> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let backticked = |s: &str| -> Vec<String> { s.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
    let mut counters = Vec::new();
    for doc in ["docs/operations.md", "docs/crawlers.md", "docs/health.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for row in text.lines().filter(|l| l.starts_with("| `sitemapd_")) {
            let cells: Vec<&str> = row.trim().trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 4, "{doc}: a metric row has four cells: {row}");
            if cells[1] != "counter" {
                continue;
            }
            // Remarks in parentheses (which may hold backticks) dropped.
            let (mut labels_cell, mut depth) = (String::new(), 0);
            for c in cells[2].chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ if depth == 0 => labels_cell.push(c),
                    _ => {}
                }
            }
            let mut labels = Vec::new();
            for group in labels_cell.split(';').filter(|g| !g.trim().is_empty()) {
                match group.split_once(':') {
                    Some((label, values)) => {
                        let label = backticked(label);
                        assert_eq!(label.len(), 1, "{doc}: one label before ':' in {row}");
                        labels.push((label[0].clone(), backticked(values)));
                    }
                    None => labels.extend(backticked(group).into_iter().map(|l| (l, Vec::new()))),
                }
            }
            for name in backticked(cells[0]) {
                counters.push((name, labels.clone()));
            }
        }
    }
    counters
}

/// The metrics crate's list of counters, the names its source declares and the documentation agree: a counter
/// added without its row (or its row's labels) fails here.
#[test]
fn every_counter_is_documented_with_its_labels_and_values() {
    let documented: BTreeMap<String, Vec<(String, Vec<String>)>> = documented_counters().into_iter().collect();
    let exported: BTreeMap<String, Vec<(String, Vec<String>)>> = sitemapd::telemetry::COUNTERS
        .iter()
        .map(|c| {
            let labels =
                c.labels.iter().map(|l| (l.name.to_owned(), l.values.iter().map(|v| (*v).to_owned()).collect()));
            (c.name.to_owned(), labels.collect())
        })
        .collect();
    assert_eq!(documented, exported);
    let source = include_str!("../../crates/sitemapd-metrics/src/lib.rs");
    let declared: BTreeSet<&str> =
        source.split('"').filter(|s| s.starts_with("sitemapd_") && s.ends_with("_total") && !s.contains(' ')).collect();
    let listed: BTreeSet<&str> = sitemapd::telemetry::COUNTERS.iter().map(|c| c.name).collect();
    assert_eq!(declared, listed, "every counter the metrics crate declares is in COUNTERS");
    assert!(listed.len() >= 20, "{listed:?}");
}
