//! The public sitemaps through the real router: protocol output, encodings, conditional requests, and the
//! properties the design must keep (stable pages, limits, no churn, shared validators, streaming).

use std::collections::{BTreeMap, BTreeSet};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{Backend, PUBLIC_URL, TestApp, gunzip, validate_xsd, xml_texts};
use crate::{both_backends, through_pooler};

const GZIP: (&str, &str) = ("accept-encoding", "gzip");

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

/// Every representation's validators, by path and encoding: the index and each page, identity and gzip.
async fn validators(app: &TestApp) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let mut paths = vec!["/sitemap.xml".to_owned()];
    paths.extend(app.index_paths().await);
    for path in paths {
        for (label, headers) in [("identity", vec![]), ("gzip", vec![GZIP])] {
            let r = app.get(&path, &headers).await;
            assert_eq!(r.status, StatusCode::OK, "{path}");
            let v = (r.header("etag").unwrap().to_owned(), r.header("last-modified").unwrap().to_owned());
            out.insert(format!("{path} {label}"), v);
        }
    }
    out
}

fn changed(
    before: &BTreeMap<String, (String, String)>,
    after: &BTreeMap<String, (String, String)>,
) -> BTreeSet<String> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k).map(|v| &v.0) != after.get(*k).map(|v| &v.0))
        .map(|k| k.split(' ').next().unwrap().to_owned())
        .collect()
}

async fn the_index_lists_each_non_empty_page_at_the_public_root(b: Backend) {
    let vars = [("SITEMAPD_PUBLIC_URL", "https://www.example.com/shop/"), ("SITEMAPD_PAGE_MAX_URLS", "2")];
    let app = TestApp::spawn(b, &vars).await;
    assert_eq!(app.get("/sitemap.xml", &[]).await.status, StatusCode::NOT_FOUND, "nothing stored yet");
    let entries: Vec<Value> = (0..5).map(|i| json!({"loc": format!("https://www.example.com/shop/p{i}")})).collect();
    assert_eq!(app.put_json(&Value::Array(entries)).await.status, StatusCode::OK);
    let r = app.get("/sitemap.xml", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("application/xml; charset=utf-8"));
    let xml = r.text();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">"));
    assert_eq!(
        xml_texts(&xml, "loc"),
        (1..=3).map(|n| format!("https://www.example.com/shop/sitemap-{n}.xml")).collect::<Vec<_>>()
    );
    for lastmod in xml_texts(&xml, "lastmod") {
        assert!(sitemapd::domain::LastMod::parse(&lastmod).is_ok() && lastmod.ends_with('Z'), "{lastmod}");
    }
    // The service answers at its own root: the proxy strips /shop.
    assert_eq!(app.get("/sitemap-3.xml", &[]).await.status, StatusCode::OK);
    // Emptying a page takes it out of the index.
    let ct = [("content-type", "application/json")];
    let body = json!(["https://www.example.com/shop/p2", "https://www.example.com/shop/p3"]).to_string();
    app.request(axum::http::Method::POST, "/api/v1/urls/delete", &ct, body.into()).await;
    assert_eq!(xml_texts(&app.get("/sitemap.xml", &[]).await.text(), "loc").len(), 2);
    assert_eq!(app.get("/sitemap-2.xml", &[]).await.status, StatusCode::NOT_FOUND);
}

async fn pages_render_escaped_valid_xml(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let r = app
        .put_json(&json!([
            {"loc": loc("it's?q=a&b=c"), "lastmod": "2024-05-01T08:20+02:00", "changefreq": "Daily", "priority": 0.8},
            {"loc": loc("caf\u{e9}"), "lastmod": "2024-02-29"},
            {"loc": loc("frac"), "lastmod": "2024-05-01T08:20:07.25-01:00", "priority": 1.0},
        ]))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let page = app.get("/sitemap-1.xml", &[]).await;
    let xml = page.text();
    assert!(xml.contains("<loc>https://www.example.com/it&apos;s?q=a&amp;b=c</loc>"), "{xml}");
    assert_eq!(
        xml_texts(&xml, "loc"),
        [loc("it's?q=a&b=c"), loc("caf%C3%A9"), loc("frac")],
        "a parser reads back the stored locs, in order"
    );
    assert_eq!(xml_texts(&xml, "lastmod"), ["2024-05-01T06:20:00Z", "2024-02-29", "2024-05-01T09:20:07.25Z"]);
    assert_eq!(xml_texts(&xml, "changefreq"), ["daily"]);
    assert_eq!(xml_texts(&xml, "priority"), ["0.8", "1.0"]);
    assert_eq!(page.header("content-length"), Some(page.body.len().to_string().as_str()));
    let gz = app.get("/sitemap-1.xml.gz", &[]).await;
    let index = app.get("/sitemap.xml", &[GZIP]).await;
    validate_xsd(&[("page.xml", &page.body), ("page.xml.gz", &gz.body), ("index.xml.gz", &index.body)]);
}

async fn gzip_is_negotiated_deterministic_and_has_its_own_etag(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    // Large enough for many render chunks, so that the gzip encoder sees the database cursor pause.
    let ndjson: String = (0..3000)
        .map(|i| {
            format!("{}\n", json!({"loc": loc(&format!("g/{i}/{}", "z".repeat(i % 90))), "lastmod": "2024-01-02"}))
        })
        .collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    let plain = app.get("/sitemap-1.xml", &[("accept-encoding", "br, gzip;q=0")]).await;
    assert!(plain.body.len() > 300_000);
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    let gz = app.get("/sitemap-1.xml", &[("accept-encoding", "deflate, gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("content-type"), Some("application/xml; charset=utf-8"));
    assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
    assert_eq!(gunzip(&gz.body), plain.text());
    let file = app.get("/sitemap-1.xml.gz", &[]).await;
    assert_eq!(file.header("content-type"), Some("application/gzip"));
    assert_eq!(file.header("content-encoding"), None, "a .gz file is the entity, not an encoding of it");
    assert_eq!(file.body, gz.body);
    // Strong ETags differ per representation and are never weak.
    let (e1, e2) = (plain.header("etag").unwrap(), gz.header("etag").unwrap());
    assert_ne!(e1, e2);
    assert!(!e1.starts_with("W/") && !e2.starts_with("W/"));
    // A strong ETag promises the same bytes every time: fetch again, several at once, from another process too,
    // which streams them instead of caching them.
    let replica = app.another_process_with(&[("SITEMAPD_CACHE_BYTES", "0")]).await;
    let (a, b2, c) = tokio::join!(
        app.get("/sitemap-1.xml", &[GZIP]),
        app.get("/sitemap-1.xml", &[GZIP]),
        replica.get("/sitemap-1.xml.gz", &[])
    );
    for again in [a, b2, c] {
        assert!(again.body == gz.body, "gzip bytes differ between fetches under one ETag");
    }
    let index = app.get("/sitemap.xml", &[GZIP]).await;
    assert_eq!(index.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip(&index.body), app.get("/sitemap.xml", &[]).await.text());
    // A change is served at once, not the cached bytes of the version before it.
    let changed = json!([{"loc": loc("g/7/zzzzzzz"), "lastmod": "2025-03-04"}]);
    assert_eq!(app.put_json(&changed).await.json()["updated"], 1);
    let after = app.get("/sitemap-1.xml", &[GZIP]).await;
    assert_ne!(after.header("etag"), gz.header("etag"));
    assert!(gunzip(&after.body).contains("<lastmod>2025-03-04</lastmod>"));
    assert_eq!(gunzip(&after.body), app.get("/sitemap-1.xml", &[]).await.text());
}

async fn conditional_get_and_head(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a", "b"]).await;
    for path in ["/sitemap.xml", "/sitemap-1.xml", "/sitemap-1.xml.gz"] {
        let full = app.get(path, &[GZIP]).await;
        let etag = full.header("etag").unwrap().to_owned();
        let lm = full.header("last-modified").unwrap().to_owned();
        let weak = format!("W/{etag}");
        let listed = format!("\"nope\", {etag}");
        let future = httpdate::fmt_http_date(std::time::SystemTime::now() + std::time::Duration::from_secs(3600));
        let past = "Sat, 01 Jan 2000 00:00:00 GMT";
        for (headers, status) in [
            (vec![("if-none-match", etag.as_str())], StatusCode::NOT_MODIFIED),
            (vec![("if-none-match", weak.as_str())], StatusCode::NOT_MODIFIED),
            (vec![("if-none-match", listed.as_str())], StatusCode::NOT_MODIFIED),
            (vec![("if-none-match", "*")], StatusCode::NOT_MODIFIED),
            (vec![("if-none-match", "\"nope\"")], StatusCode::OK),
            (vec![("if-modified-since", lm.as_str())], StatusCode::NOT_MODIFIED),
            (vec![("if-modified-since", future.as_str())], StatusCode::NOT_MODIFIED),
            (vec![("if-modified-since", past)], StatusCode::OK),
            (vec![("if-modified-since", "garbage")], StatusCode::OK),
            // If-None-Match takes precedence over If-Modified-Since.
            (vec![("if-none-match", "\"nope\""), ("if-modified-since", future.as_str())], StatusCode::OK),
            (vec![("if-none-match", etag.as_str()), ("if-modified-since", past)], StatusCode::NOT_MODIFIED),
        ] {
            let mut h = headers.clone();
            h.push(GZIP);
            let r = app.get(path, &h).await;
            assert_eq!(r.status, status, "{path} {headers:?}");
            if status == StatusCode::NOT_MODIFIED {
                assert!(r.body.is_empty());
                assert_eq!(r.header("etag"), Some(etag.as_str()));
                assert_eq!(r.header("last-modified"), Some(lm.as_str()));
            }
        }
        // If-Match and If-Unmodified-Since are evaluated first: 412 when they fail.
        let past = "Sat, 01 Jan 2000 00:00:00 GMT";
        for h in [[("if-match", "\"nope\""), GZIP], [("if-unmodified-since", past), GZIP]] {
            let r = app.get(path, &h).await;
            assert_eq!(r.status, StatusCode::PRECONDITION_FAILED, "{path} {h:?}");
            assert!(r.body.is_empty());
        }
        assert_eq!(app.get(path, &[("if-match", etag.as_str()), GZIP]).await.status, StatusCode::OK);
        // The identity representation's tag does not validate the gzip one.
        let identity = app.get(path, &[]).await;
        if path.ends_with(".xml") {
            let h = [("if-none-match", identity.header("etag").unwrap()), GZIP];
            assert_eq!(app.get(path, &h).await.status, StatusCode::OK, "{path}");
        }
        // HEAD: the same headers as GET, no body.
        let head = app.head(path, &[GZIP]).await;
        assert_eq!(head.status, StatusCode::OK);
        assert!(head.body.is_empty());
        // The gzip body was cached by the GET above, so its length is known too.
        for name in
            ["etag", "last-modified", "content-type", "content-encoding", "vary", "cache-control", "content-length"]
        {
            assert_eq!(head.header(name), full.header(name), "{path} HEAD {name}");
        }
        assert_eq!(full.header("content-length"), Some(full.body.len().to_string()).as_deref(), "{path}");
        let head_plain = app.head(path, &[]).await;
        let expected_length = if path.ends_with(".xml") { identity.body.len() } else { full.body.len() }.to_string();
        let expected_length = Some(expected_length);
        assert_eq!(head_plain.header("content-length"), expected_length.as_deref(), "{path}");
        let head_304 = app.head(path, &[("if-none-match", etag.as_str()), GZIP]).await;
        assert_eq!(head_304.status, StatusCode::NOT_MODIFIED);
    }
}

async fn missing_and_malformed_pages_are_404(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a"]).await;
    for path in
        ["/sitemap-0.xml", "/sitemap-01.xml", "/sitemap-2.xml", "/sitemap-2.xml.gz", "/sitemap-x.xml", "/sitemap-1.xm"]
    {
        assert_eq!(app.get(path, &[]).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    app.delete_loc(&loc("a")).await;
    assert_eq!(app.get("/sitemap-1.xml", &[]).await.status, StatusCode::NOT_FOUND, "an empty page");
    assert_eq!(app.get("/sitemap.xml", &[]).await.status, StatusCode::NOT_FOUND, "no URLs at all");
}

/// One URL per resource: the page route matches the raw path, so a percent-encoded spelling of a page's name is
/// another resource, and 404.
async fn percent_encoded_page_names_are_404(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a"]).await;
    assert_eq!(app.get("/sitemap-1.xml", &[]).await.status, StatusCode::OK);
    for path in ["/sitemap-1%2exml", "/sitemap%2d1.xml", "/sitemap-%31.xml", "/sitemap-1.xml%2egz", "/sitemap%2exml"] {
        for method in [Method::GET, Method::HEAD] {
            let r = app.request(method.clone(), path, &[], axum::body::Body::empty()).await;
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{method} {path}");
        }
    }
}

/// HEAD answers with the headers GET would, `Content-Length` included, for every representation, whether the page
/// was rendered before or not, with the page cache on and off.
async fn head_and_get_agree_cached_or_not(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a", "b", "c"]).await;
    let no_cache = app.another_process_with(&[("SITEMAPD_CACHE_BYTES", "0")]).await;
    let cases: [(&str, &[(&str, &str)]); 3] =
        [("/sitemap-1.xml.gz", &[]), ("/sitemap-1.xml", &[GZIP]), ("/sitemap-1.xml", &[])];
    for server in [&app, &no_cache] {
        for (path, headers) in cases {
            // HEAD first, while the page is not rendered yet.
            let head = server.head(path, headers).await;
            let get = server.get(path, headers).await;
            assert_eq!((head.status, get.status), (StatusCode::OK, StatusCode::OK), "{path} {headers:?}");
            assert!(head.body.is_empty());
            assert_eq!(get.header("content-length"), Some(get.body.len().to_string()).as_deref(), "{path}");
            for name in
                ["etag", "last-modified", "content-type", "content-encoding", "vary", "cache-control", "content-length"]
            {
                assert_eq!(head.header(name), get.header(name), "{path} {headers:?} HEAD {name}");
            }
        }
        // A change: HEAD of the new version before any GET of it.
        let changed = json!([{"loc": loc("b"), "priority": 0.9}]);
        assert_eq!(server.put_json(&changed).await.status, StatusCode::OK);
        let head = server.head("/sitemap-1.xml", &[GZIP]).await;
        let get = server.get("/sitemap-1.xml", &[GZIP]).await;
        assert!(gunzip(&get.body).contains("<priority>0.9</priority>"));
        assert_eq!(head.header("etag"), get.header("etag"));
        assert_eq!(head.header("content-length"), get.header("content-length"));
        let changed = json!([{"loc": loc("b"), "priority": 0.1}]);
        assert_eq!(server.put_json(&changed).await.status, StatusCode::OK);
    }
}

/// `Accept-Encoding` that excludes identity and every coding offered is 406 (RFC 9110 §12.5.3: the server may
/// honor it or ignore it; sitemapd honors it); a more specific `identity` entry, or an acceptable gzip, is served.
async fn excluding_every_coding_is_406(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a"]).await;
    for path in ["/sitemap.xml", "/sitemap-1.xml"] {
        for value in ["identity;q=0", "*;q=0", "br, identity;q=0", "*;q=0, gzip;q=0"] {
            let r = app.get(path, &[("accept-encoding", value)]).await;
            assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{path} {value}");
            assert_eq!(r.json()["error"], "not_acceptable");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        }
        let r = app.get(path, &[("accept-encoding", "*;q=0, identity")]).await;
        assert_eq!((r.status, r.header("content-encoding")), (StatusCode::OK, None), "{path}");
        let r = app.get(path, &[("accept-encoding", "identity;q=0, gzip")]).await;
        assert_eq!((r.status, r.header("content-encoding")), (StatusCode::OK, Some("gzip")), "{path}");
    }
    // A .gz file is the entity itself, not a content coding: served whatever Accept-Encoding says.
    assert_eq!(app.get("/sitemap-1.xml.gz", &[("accept-encoding", "*;q=0")]).await.status, StatusCode::OK);
}

/// Property 1: a change, a delete, or an addition changes only the page that holds the URL (and the index).
async fn a_change_reaches_only_its_page_and_the_index(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    let paths: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    app.put_paths(&paths.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let v0 = validators(&app).await;
    assert_eq!(v0.len(), 2 * 4);

    let r = app.put_json(&json!([{"loc": loc("s4"), "priority": 0.4}])).await;
    assert_eq!(r.json()["updated"], 1);
    let v1 = validators(&app).await;
    assert_eq!(changed(&v0, &v1), BTreeSet::from(["/sitemap.xml".into(), "/sitemap-2.xml".into()]));

    assert_eq!(app.delete_loc(&loc("s0")).await.status, StatusCode::NO_CONTENT);
    let v2 = validators(&app).await;
    assert_eq!(changed(&v1, &v2), BTreeSet::from(["/sitemap.xml".into(), "/sitemap-1.xml".into()]));

    // A new URL fills the freed slot on page 1; the next one the room on page 3.
    app.put_paths(&["new1"]).await;
    let v3 = validators(&app).await;
    assert_eq!(changed(&v2, &v3), BTreeSet::from(["/sitemap.xml".into(), "/sitemap-1.xml".into()]));
    app.put_paths(&["new2"]).await;
    let v4 = validators(&app).await;
    assert_eq!(changed(&v3, &v4), BTreeSet::from(["/sitemap.xml".into(), "/sitemap-3.xml".into()]));
}

/// Property 2 and 6: whatever the URL lengths, no page exceeds its limits, and every stored URL is in exactly one
/// page that the index lists.
async fn pages_keep_their_limits_and_list_every_url_once(b: Backend) {
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "40"), ("SITEMAPD_PAGE_MAX_BYTES", "16000")];
    let app = TestApp::spawn(b, &vars).await;
    let paths: Vec<String> = (0..200).map(|i| format!("{i}/{}", "&x".repeat((i * 37) % 700))).collect();
    let ndjson: String =
        paths.iter().map(|p| format!("{}\n", json!({"loc": loc(p), "lastmod": "2024-01-01"}))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    let mut listed = Vec::new();
    let mut bodies = Vec::new();
    for path in app.index_paths().await {
        let r = app.get(&path, &[]).await;
        assert!(r.body.len() <= 16_000, "{path} has {} bytes", r.body.len());
        let locs = xml_texts(&r.text(), "loc");
        assert!(!locs.is_empty() && locs.len() <= 40, "{path} has {} URLs", locs.len());
        listed.extend(locs);
        bodies.push((path, r.body));
    }
    assert!(bodies.len() >= 5, "the byte limit split the URLs over many pages");
    let mut expected: Vec<String> = paths.iter().map(|p| loc(p)).collect();
    expected.sort();
    listed.sort();
    assert_eq!(listed, expected, "each stored URL exactly once");
    let files: Vec<(&str, &[u8])> = bodies.iter().map(|(p, b)| (p.trim_start_matches('/'), b.as_ref())).collect();
    validate_xsd(&files);
}

/// Property 3: re-sending identical data changes nothing a crawler can see.
async fn resending_identical_data_keeps_every_etag(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    let batch = json!([
        {"loc": loc("a"), "lastmod": "2024-05-01", "priority": 0.5},
        {"loc": loc("b"), "changefreq": "daily"},
        {"loc": loc("c")},
    ]);
    app.put_json(&batch).await;
    let before = validators(&app).await;
    let index_before = app.get("/sitemap.xml", &[]).await.text();
    let r = app.put_json(&batch).await;
    assert_eq!(r.json(), json!({"received": 3, "created": 0, "updated": 0, "unchanged": 3}));
    let ndjson: String = batch.as_array().unwrap().iter().map(|e| format!("{e}\n")).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.json()["unchanged"], 3);
    assert_eq!(validators(&app).await, before, "same ETags and Last-Modified");
    assert_eq!(app.get("/sitemap.xml", &[]).await.text(), index_before, "same index lastmods");
}

/// Property 4: validators are functions of stored state: another process, or a restart, answers the same. A
/// process sees its own writes at once and another's within `state_ttl_ms`.
async fn every_process_answers_the_same_validators(b: Backend) {
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "2"), ("SITEMAPD_STATE_TTL", "300ms")];
    let app = TestApp::spawn(b, &vars).await;
    app.put_paths(&["a", "b", "c"]).await;
    let first = validators(&app).await;
    let replica = app.another_process().await;
    assert_eq!(validators(&replica).await, first);
    replica.put_paths(&["d"]).await;
    let written = validators(&replica).await;
    assert_ne!(written, first, "the writer sees its own write at once");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while validators(&app).await != written {
        assert!(std::time::Instant::now() < deadline, "the other process never saw the write");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop(replica);
    let restarted = app.another_process().await;
    assert_eq!(validators(&restarted).await, validators(&app).await);
}

/// Property 5: deleting a URL advances its page's lastmod and the index's.
async fn deleting_advances_page_and_index_lastmod(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    app.put_paths(&["a", "b", "c"]).await;
    let index = app.get("/sitemap.xml", &[]).await;
    let lastmods_before = xml_texts(&index.text(), "lastmod");
    let page_before = app.get("/sitemap-1.xml", &[]).await;
    // Last-Modified counts whole seconds: the delete is made in a later second than every write before it.
    crate::support::until_the_next_second().await;
    app.delete_loc(&loc("a")).await;
    let index_after = app.get("/sitemap.xml", &[]).await;
    let lastmods_after = xml_texts(&index_after.text(), "lastmod");
    assert!(lastmods_after[0] > lastmods_before[0], "{lastmods_before:?} -> {lastmods_after:?}");
    assert_eq!(lastmods_after[1], lastmods_before[1], "page 2 did not change");
    let page_after = app.get("/sitemap-1.xml", &[]).await;
    let when =
        |r: &crate::support::TestResponse| httpdate::parse_http_date(r.header("last-modified").unwrap()).unwrap();
    assert!(when(&page_after) > when(&page_before));
    assert!(when(&index_after) > when(&index));
    assert_ne!(page_after.header("etag"), page_before.header("etag"));
}

/// Property 7, in part: a page's body streams from the database in bounded chunks, not as one buffer.
/// A page is compressed the way it is stored with (`pages.gzip`): one stream for a page stored before parallel
/// gzip existed, parallel blocks for one written since. The two make different bytes for a page of more than one
/// block, each under its own ETag; the identity representation, and its ETag, are the same either way.
async fn each_page_is_compressed_the_way_it_is_stored_with(b: Backend) {
    use sitemapd::sitemap::stream::{gzip_blocks, gzip_collect, urlset};
    let app = TestApp::spawn(b, &[]).await;
    // More than one block of 1 MiB.
    let ndjson: String = (0..14_000)
        .map(|i| format!("{}\n", json!({"loc": loc(&format!("way/{i}/{}", "w".repeat(i % 150)))})))
        .collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    let level = app.config.sitemaps.gzip_level;
    // What each way makes of the page's stored entries.
    let made = |blocks: bool| {
        let store = app.store.clone();
        async move {
            let (page, entries) = store.page_entries(1, 1).await.unwrap().unwrap();
            let xml = urlset(entries, page.ns.used());
            if blocks { gzip_blocks(xml, level, 0).await.unwrap() } else { gzip_collect(xml, level).await.unwrap() }
        }
    };
    let plain = app.get("/sitemap-1.xml", &[]).await;
    assert!(plain.body.len() > 1024 * 1024, "more than one block: {}", plain.body.len());
    let blocks = app.get("/sitemap-1.xml", &[GZIP]).await;
    assert!(blocks.body == made(true).await, "a page written now is compressed in parallel blocks");
    assert!(blocks.body != made(false).await);

    // As if stored before migration 0008; read by a process that has not seen the page yet.
    app.exec_sql("UPDATE pages SET gzip = 0").await;
    let older = app.another_process_with(&[("SITEMAPD_CACHE_BYTES", "0")]).await;
    let stream = older.get("/sitemap-1.xml", &[GZIP]).await;
    assert!(stream.body == made(false).await, "a page stored before is compressed as one stream");
    assert_eq!(gunzip(&stream.body), plain.text());
    assert_ne!(stream.header("etag"), blocks.header("etag"), "other bytes, another ETag");
    assert!(stream.header("etag").unwrap().ends_with("-gz\""));
    let older_plain = older.get("/sitemap-1.xml", &[]).await;
    assert_eq!(older_plain.header("etag"), plain.header("etag"), "the identity ETag does not name a gzip way");
    assert!(older_plain.body == plain.body);
}

async fn a_large_page_streams_in_chunks(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let ndjson: String =
        (0..2000).map(|i| format!("{}\n", json!({"loc": loc(&format!("stream/{i:05}/{}", "q".repeat(60)))}))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    let r = app.get("/sitemap-1.xml", &[]).await;
    assert!(r.body.len() > 200_000);
    assert!(r.frames >= 3, "{} bytes arrived in {} frame(s)", r.body.len(), r.frames);
    assert_eq!(xml_texts(&r.text(), "loc").len(), 2000);
}

/// With one render at a time and no cache, many cold pages asked for at once each wait their turn and arrive whole:
/// every answer is 200 with the bytes and ETag the same page has when fetched alone, gzip and identity.
async fn more_cold_pages_at_once_than_render_slots_all_arrive_whole(b: Backend) {
    let vars = [("SITEMAPD_RENDER_CONCURRENCY", "1"), ("SITEMAPD_CACHE_BYTES", "0"), ("SITEMAPD_PAGE_MAX_URLS", "300")];
    let app = TestApp::spawn(b, &vars).await;
    let ndjson: String = (0..2_400)
        .map(|i| format!("{}\n", json!({"loc": loc(&format!("turn/{i:05}/{}", "t".repeat(i % 90)))})))
        .collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    let paths = app.index_paths().await;
    assert_eq!(paths.len(), 8);
    let requests: Vec<(String, Vec<(&str, &str)>)> =
        paths.iter().flat_map(|p| [(p.clone(), vec![GZIP]), (p.clone(), vec![])]).collect();
    let at_once = futures_util::future::join_all(requests.iter().map(|(p, h)| app.get(p, h))).await;
    for ((path, headers), got) in requests.iter().zip(at_once) {
        let alone = app.get(path, headers).await;
        assert_eq!((got.status, alone.status), (StatusCode::OK, StatusCode::OK), "{path} {headers:?}");
        assert!(got.body == alone.body, "{path} {headers:?}: the same bytes as fetched alone");
        assert_eq!(got.header("etag"), alone.header("etag"), "{path} {headers:?}");
        let xml = if headers.is_empty() { got.text() } else { gunzip(&got.body) };
        assert_eq!(xml_texts(&xml, "loc").len(), 300, "{path} {headers:?}: every entry");
    }
}

both_backends!(
    more_cold_pages_at_once_than_render_slots_all_arrive_whole,
    the_index_lists_each_non_empty_page_at_the_public_root,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    pages_render_escaped_valid_xml,
    gzip_is_negotiated_deterministic_and_has_its_own_etag,
    conditional_get_and_head,
    missing_and_malformed_pages_are_404,
    a_change_reaches_only_its_page_and_the_index,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    pages_keep_their_limits_and_list_every_url_once,
    resending_identical_data_keeps_every_etag,
    every_process_answers_the_same_validators,
    deleting_advances_page_and_index_lastmod,
    a_large_page_streams_in_chunks,
    each_page_is_compressed_the_way_it_is_stored_with,
    percent_encoded_page_names_are_404,
    head_and_get_agree_cached_or_not,
    excluding_every_coding_is_406,
);

// Through a transaction-mode PgBouncer (tests/it/pooler.rs).
through_pooler!(
    the_index_lists_each_non_empty_page_at_the_public_root,
    gzip_is_negotiated_deterministic_and_has_its_own_etag,
    conditional_get_and_head,
    a_change_reaches_only_its_page_and_the_index,
    resending_identical_data_keeps_every_etag,
    every_process_answers_the_same_validators,
    deleting_advances_page_and_index_lastmod,
    a_large_page_streams_in_chunks,
    head_and_get_agree_cached_or_not,
);

/// Property 7, in part: no query pages with OFFSET (cost would grow with depth).
#[test]
fn no_sql_uses_offset() {
    let store = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sitemapd-store/src");
    for file in ["postgres.rs", "sqlite.rs", "lib.rs", "shared.rs", "write.rs", "outbox.rs"] {
        let text = std::fs::read_to_string(store.join(file)).unwrap();
        assert!(!text.to_uppercase().contains("OFFSET"), "{file} uses OFFSET");
    }
}
