//! Text sitemaps through the real router: `/sitemap-N.txt[.gz]` lists exactly its XML page's locs in order, with
//! gzip negotiation, validators of its own, conditional requests and HEAD as XML pages have, and within the page's
//! limits by construction.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, TestResponse, gunzip, xml_texts};

const GZIP: (&str, &str) = ("accept-encoding", "gzip");

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

/// The lines of a text sitemap, each checked to end with a line feed.
fn lines(body: &str) -> Vec<String> {
    assert!(body.is_empty() || body.ends_with('\n'), "every line ends with LF: {body:?}");
    assert!(!body.contains('\r'), "LF alone: {body:?}");
    body.lines().map(str::to_owned).collect()
}

/// Every header of an answer but `date`, as text.
fn header_list(r: &TestResponse) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(k, _)| *k != "date")
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    out.sort();
    out
}

async fn a_text_page_lists_its_xml_pages_locs_in_order(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    let r = app
        .put_json(&json!([
            {"loc": loc("it's?q=a&b=c"), "lastmod": "2024-05-01", "priority": 0.8},
            {"loc": loc("caf\u{e9}")},
            {"loc": loc("<x>\"y\"")},
            {"loc": loc("d")},
            {"loc": loc("e")},
        ]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let pages = app.index_paths().await;
    assert_eq!(pages, ["/sitemap-1.xml", "/sitemap-2.xml"]);
    let mut all = Vec::new();
    for xml_path in &pages {
        let xml = app.get(xml_path, &[]).await;
        let text_path = xml_path.replace(".xml", ".txt");
        let text = app.get(&text_path, &[]).await;
        assert_eq!(text.status, StatusCode::OK, "{text_path}");
        assert_eq!(text.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(text.header("content-encoding"), None);
        assert_eq!(text.header("vary"), Some("Accept-Encoding"));
        assert_eq!(text.header("cache-control"), Some("no-cache"));
        assert_eq!(text.header("x-robots-tag"), Some("noindex"));
        assert_eq!(text.header("content-length"), Some(text.body.len().to_string().as_str()));
        assert_eq!(text.header("last-modified"), xml.header("last-modified"), "the page's own date");
        assert_eq!(lines(&text.text()), xml_texts(&xml.text(), "loc"), "{text_path}: the XML's locs, in order");
        all.extend(lines(&text.text()));
    }
    let mut sent = vec![loc("it's?q=a&b=c"), loc("caf%C3%A9"), loc("%3Cx%3E%22y%22"), loc("d"), loc("e")];
    all.sort();
    sent.sort();
    assert_eq!(all, sent, "every stored loc once, normalized (ASCII)");
    // Not in the index, which lists the XML pages alone.
    let index = app.get("/sitemap.xml", &[]).await.text();
    assert!(!index.contains(".txt"), "{index}");
    for missing in ["/sitemap-3.txt", "/sitemap-99.txt", "/sitemap-99.txt.gz", "/sitemap-0.txt", "/sitemap-01.txt"] {
        let r = app.get(missing, &[]).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{missing}");
        assert_eq!(r.header("x-robots-tag"), Some("noindex"), "{missing}");
    }
    // A named section is not served yet, nor text for a section's index, news or removed URLs.
    for missing in ["/sitemap-products-1.txt", "/sitemap-news.txt", "/sitemap-removed.txt", "/sitemap-1.TXT"] {
        assert_eq!(app.get(missing, &[]).await.status, StatusCode::NOT_FOUND, "{missing}");
    }
}

async fn a_text_pages_gzip_is_negotiated_and_its_gz_file_is_always_gzip(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    // Large enough for several render chunks.
    let ndjson: String =
        (0..3000).map(|i| format!("{}\n", json!({"loc": loc(&format!("g/{i}/{}", "z".repeat(i % 90)))}))).collect();
    assert_eq!(app.put_ndjson(&ndjson).await.status, StatusCode::OK);
    let plain = app.get("/sitemap-1.txt", &[("accept-encoding", "br, gzip;q=0")]).await;
    assert_eq!(plain.status, StatusCode::OK);
    assert!(plain.body.len() > 150_000, "{}", plain.body.len());
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(lines(&plain.text()).len(), 3000);
    let gz = app.get("/sitemap-1.txt", &[("accept-encoding", "deflate, gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
    assert_eq!(gunzip(&gz.body), plain.text());
    let file = app.get("/sitemap-1.txt.gz", &[]).await;
    assert_eq!(file.status, StatusCode::OK);
    assert_eq!(file.header("content-type"), Some("application/gzip"));
    assert_eq!(file.header("content-encoding"), None, "a .gz file is the entity, not an encoding of it");
    assert_eq!(file.header("vary"), None, "a .gz file is not negotiated");
    assert_eq!(file.header("x-robots-tag"), Some("noindex"));
    assert_eq!(file.body, gz.body);
    assert_eq!(file.header("etag"), gz.header("etag"), "the same bytes");
    // The same bytes every time, from another process that does not cache them too.
    let replica = app.another_process_with(&[("SITEMAPD_CACHE_BYTES", "0")]).await;
    assert_eq!(replica.get("/sitemap-1.txt.gz", &[]).await.body, gz.body);
    assert_eq!(replica.get("/sitemap-1.txt", &[GZIP]).await.header("etag"), gz.header("etag"));
    // Neither coding acceptable: 406.
    let r = app.get("/sitemap-1.txt", &[("accept-encoding", "gzip;q=0, identity;q=0")]).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);
}

async fn a_text_pages_validators_are_its_own_and_conditional_requests_work(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a", "b"]).await;
    for (path, headers) in [("/sitemap-1.txt", vec![]), ("/sitemap-1.txt", vec![GZIP]), ("/sitemap-1.txt.gz", vec![])] {
        let full = app.get(path, &headers).await;
        assert_eq!(full.status, StatusCode::OK);
        let etag = full.header("etag").unwrap().to_owned();
        assert!(etag.starts_with('"') && !etag.starts_with("W/"), "strong: {etag}");
        // Not the XML page's tag in the same coding, and stable.
        let xml_path = path.replace(".txt", ".xml");
        assert_ne!(app.get(&xml_path, &headers).await.header("etag"), Some(etag.as_str()), "{path} {headers:?}");
        assert_eq!(app.get(path, &headers).await.header("etag"), Some(etag.as_str()));
        let lm = full.header("last-modified").unwrap().to_owned();
        let past = "Sat, 01 Jan 2000 00:00:00 GMT";
        for (conditions, status) in [
            (vec![("if-none-match", etag.as_str())], StatusCode::NOT_MODIFIED),
            (vec![("if-none-match", "\"nope\"")], StatusCode::OK),
            (vec![("if-modified-since", lm.as_str())], StatusCode::NOT_MODIFIED),
            (vec![("if-modified-since", past)], StatusCode::OK),
            (vec![("if-match", "\"nope\"")], StatusCode::PRECONDITION_FAILED),
            (vec![("if-unmodified-since", past)], StatusCode::PRECONDITION_FAILED),
            (vec![("if-match", etag.as_str())], StatusCode::OK),
        ] {
            let mut h = headers.clone();
            h.extend(conditions.iter().copied());
            let r = app.get(path, &h).await;
            assert_eq!(r.status, status, "{path} {h:?}");
            if status == StatusCode::NOT_MODIFIED {
                assert!(r.body.is_empty());
                assert_eq!(r.header("etag"), Some(etag.as_str()));
                assert_eq!(r.header("last-modified"), Some(lm.as_str()));
                assert_eq!(r.header("x-robots-tag"), Some("noindex"));
            }
        }
        // The XML page's tag does not validate the text.
        let xml_etag = app.get(&xml_path, &headers).await.header("etag").unwrap().to_owned();
        let mut h = headers.clone();
        h.push(("if-none-match", xml_etag.as_str()));
        assert_eq!(app.get(path, &h).await.status, StatusCode::OK, "{path}");
        // HEAD: the same headers as GET (the length included), no body.
        let head = app.head(path, &headers).await;
        assert_eq!(head.status, StatusCode::OK);
        assert!(head.body.is_empty());
        assert_eq!(header_list(&head), header_list(&full), "{path} {headers:?}");
    }
}

/// The ETags of pages 1 and 2's text, identity and gzip.
async fn text_tags(app: &TestApp) -> Vec<String> {
    let mut out = Vec::new();
    for path in ["/sitemap-1.txt", "/sitemap-2.txt"] {
        for headers in [vec![], vec![GZIP]] {
            out.push(app.get(path, &headers).await.header("etag").unwrap().to_owned());
        }
    }
    out
}

async fn a_write_changes_its_own_pages_text_etag_only(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    app.put_paths(&["a", "b", "c", "d"]).await;
    let before = text_tags(&app).await;
    assert_eq!(before, text_tags(&app).await, "stable");
    let r = app.put_json(&json!([{"loc": loc("c"), "lastmod": "2025-03-04"}])).await;
    assert_eq!(r.json()["updated"], 1);
    let after = text_tags(&app).await;
    assert_eq!(after[..2], before[..2], "page 1 did not change");
    assert_ne!(after[2], before[2], "page 2 did");
    assert_ne!(after[3], before[3]);
    // Its text is the same (the loc did not change) but the page's state did: a new tag, a new date.
    assert_eq!(lines(&app.get("/sitemap-2.txt", &[]).await.text()), [loc("c"), loc("d")]);
    // A deleted loc leaves the text at once.
    assert_eq!(app.delete_loc(&loc("d")).await.status, StatusCode::NO_CONTENT);
    assert_eq!(lines(&app.get("/sitemap-2.txt", &[]).await.text()), [loc("c")]);
    assert_eq!(app.delete_loc(&loc("c")).await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.get("/sitemap-2.txt", &[]).await.status, StatusCode::NOT_FOUND, "an empty page is no page");
}

/// A page filled to its byte limit as XML: its text fits the limit too, since every line is shorter than its
/// `<url>` element (see `sitemap::text::line_len`), and lists exactly the page's locs.
async fn a_full_page_as_text_fits_the_page_limit(b: Backend) {
    const MAX: usize = 14_000;
    let max = MAX.to_string();
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_BYTES", &max)]).await;
    // Locs with `&`, which the XML escapes as 5 bytes: the text is shorter still.
    let entries: Vec<Value> =
        (0..300).map(|i| json!({"loc": loc(&format!("full/{i}?a=1&b=2&c={}", "x".repeat(i % 60)))})).collect();
    assert_eq!(app.put_json(&Value::Array(entries)).await.status, StatusCode::OK);
    let pages = app.index_paths().await;
    assert!(pages.len() >= 2, "the limit cuts the entries into pages: {pages:?}");
    let mut listed = 0;
    for xml_path in &pages {
        let xml = app.get(xml_path, &[]).await;
        let text = app.get(&xml_path.replace(".xml", ".txt"), &[]).await;
        assert!(xml.body.len() <= MAX, "{xml_path}: {} bytes", xml.body.len());
        assert!(text.body.len() <= MAX, "{xml_path} as text: {} bytes", text.body.len());
        assert!(text.body.len() < xml.body.len());
        assert_eq!(lines(&text.text()), xml_texts(&xml.text(), "loc"));
        listed += lines(&text.text()).len();
    }
    assert_eq!(listed, 300);
    // The first page was filled until the next entry (at most 190 bytes here) did not fit within the limit less
    // the envelope reserve (1024 bytes, of which the `<urlset>` takes about 110): the page is full.
    let first = app.get("/sitemap-1.xml", &[]).await;
    assert!(first.body.len() > MAX - 1024 - 190, "{}", first.body.len());
}

both_backends!(
    a_text_page_lists_its_xml_pages_locs_in_order,
    a_text_pages_gzip_is_negotiated_and_its_gz_file_is_always_gzip,
    a_text_pages_validators_are_its_own_and_conditional_requests_work,
    a_write_changes_its_own_pages_text_etag_only,
    a_full_page_as_text_fits_the_page_limit,
);
