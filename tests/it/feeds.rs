//! The Atom feeds (`/feed.atom`, `/feed-<section>.atom`, on with `feeds.enabled`): off by default with nothing
//! served changed; served as the sitemaps are (gzip negotiated, validators, 304, HEAD, `X-Robots-Tag`); the newest
//! `feeds.entries` changes newest first out of 10,000; an identical re-send changes nothing; a change in one section
//! moves that section's feed and the site's only; deletions as tombstones with the removed-URLs sitemap on; two
//! processes on one database answer alike; the lookup API's and robots.txt's lines; the view's list.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, TestResponse, gunzip, until_the_next_second};

const ON: (&str, &str) = ("SITEMAPD_FEEDS", "true");
/// Asks for the current state (one read of the change counter), so that a write through another process is seen.
const CURRENT: (&str, &str) = ("cache-control", "no-cache");

fn url(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

fn entry(path: &str, section: Option<&str>) -> Value {
    match section {
        Some(s) => json!({"loc": url(path), "section": s}),
        None => json!({"loc": url(path)}),
    }
}

async fn put(app: &TestApp, entries: &[Value]) {
    let r = app.put_json(&Value::Array(entries.to_vec())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

async fn delete(app: &TestApp, paths: &[&str]) {
    let locs: Vec<String> = paths.iter().map(|p| url(p)).collect();
    let headers = [("content-type", "application/json")];
    let r = app.request(Method::POST, "/api/v1/urls/delete", &headers, Body::from(json!(locs).to_string())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// What a feed lists, in document order: `+LOC` for an entry (its `<id>`), `-LOC` for a tombstone (its `ref`).
fn items(xml: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut in_entry, mut in_id, mut out) = (false, false, Vec::new());
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) if e.local_name().as_ref() == "entry" => in_entry = true,
            Event::End(e) if e.local_name().as_ref() == "entry" => in_entry = false,
            Event::Start(e) if in_entry && e.local_name().as_ref() == "id" => {
                in_id = true;
                out.push("+".to_owned());
            }
            Event::End(e) if e.local_name().as_ref() == "id" => in_id = false,
            Event::Text(t) if in_id => out.last_mut().unwrap().push_str(&t),
            Event::GeneralRef(r) if in_id => {
                let resolved = match &*r {
                    "amp" => "&",
                    other => panic!("unexpected entity {other:?}"),
                };
                out.last_mut().unwrap().push_str(resolved);
            }
            Event::Empty(e) | Event::Start(e) if e.local_name().as_ref() == "deleted-entry" => {
                let r = e.try_get_attribute("ref").unwrap().expect("a tombstone has a ref");
                out.push(format!("-{}", r.normalized_value(quick_xml::XmlVersion::Implicit1_0).unwrap()));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

fn added(paths: &[&str]) -> Vec<String> {
    paths.iter().map(|p| format!("+{}", url(p))).collect()
}

fn validators(r: &TestResponse) -> (String, String) {
    (r.header("etag").expect("an ETag").to_owned(), r.header("last-modified").expect("a Last-Modified").to_owned())
}

/// Every sitemap answer (and robots.txt's) of `app` for `paths`, with the headers a change would move.
async fn answers(app: &TestApp, paths: &[&str]) -> Vec<(String, StatusCode, Vec<Option<String>>, bytes::Bytes)> {
    let mut all = Vec::new();
    for path in paths {
        for gzip in [false, true] {
            let headers: &[(&str, &str)] = if gzip { &[("accept-encoding", "gzip"), CURRENT] } else { &[CURRENT] };
            let r = app.get(path, headers).await;
            let shown = ["etag", "last-modified", "content-type", "content-encoding", "vary", "x-robots-tag"]
                .map(|h| r.header(h).map(str::to_owned))
                .to_vec();
            all.push((format!("{path} gzip={gzip}"), r.status, shown, r.body.clone()));
        }
    }
    all
}

/// Off (the default): no feed is served, robots.txt, every sitemap and the lookup answer as before. The same
/// database with feeds on serves the same sitemaps, byte for byte, with the same validators.
async fn feeds_are_off_by_default_and_change_no_sitemap(b: Backend) {
    let vars = [("SITEMAPD_ROBOTS_TXT", "true"), ("SITEMAPD_REMOVED_RETENTION", "7d")];
    let app = TestApp::spawn(b, &vars).await;
    assert!(!app.config.feeds.enabled);
    put(&app, &[entry("a", None), entry("p1", Some("products")), entry("gone", None)]).await;
    delete(&app, &["gone"]).await;
    for path in ["/feed.atom", "/feed-products.atom", "/feed-none.atom"] {
        let r = app.get(path, &[]).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.json()["error"], "not_found", "{path}");
        assert_eq!(app.head(path, &[]).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    let robots = app.get("/robots.txt", &[]).await.text();
    assert_eq!(robots, format!("Sitemap: {PUBLIC_URL}/sitemap.xml\n"));
    let found = app.find(&url("p1")).await.json();
    assert!(found.get("feed").is_none() && found.get("section_feed").is_none(), "{found}");

    let files = [
        "/sitemap.xml",
        "/sitemap-1.xml",
        "/sitemap-1.xml.gz",
        "/sitemap-1.txt",
        "/sitemap-products.xml",
        "/sitemap-products-1.xml",
        "/sitemap-removed.xml",
        "/robots.txt",
        "/feed.atom",
    ];
    let off = answers(&app, &files).await;
    let on = app.another_process_with(&[ON]).await;
    let with_feeds = answers(&on, &files).await;
    for (off, on) in off.iter().zip(&with_feeds) {
        if off.0.starts_with("/robots.txt") || off.0.starts_with("/feed.atom") {
            continue;
        }
        assert_eq!(off.1, StatusCode::OK, "{}", off.0);
        assert_eq!(off, on, "{} differs with feeds on", off.0);
    }
}

/// On: `/feed.atom` is Atom, served as the news sitemap is: gzip negotiated with its own ETag, Last-Modified, 304
/// on either validator, HEAD with GET's headers, `X-Robots-Tag`; a section's feed too; an unknown section is 404.
async fn a_feed_is_served_as_the_sitemaps_are(b: Backend) {
    let app = TestApp::spawn(b, &[ON]).await;
    put(&app, &[entry("a", None)]).await;
    put(&app, &[entry("p1", Some("products"))]).await;

    let plain = app.get("/feed.atom", &[]).await;
    assert_eq!(plain.status, StatusCode::OK, "{}", plain.text());
    assert_eq!(plain.header("content-type"), Some("application/atom+xml"));
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.header("x-robots-tag"), Some("noindex"));
    assert_eq!(plain.header("cache-control"), Some("no-cache"));
    assert_eq!(plain.header("content-length"), Some(plain.body.len().to_string().as_str()));
    let text = plain.text();
    assert!(text.starts_with("<?xml"), "{text}");
    assert!(text.contains("<feed xmlns=\"http://www.w3.org/2005/Atom\""), "{text}");
    assert!(text.contains(&format!("<id>{PUBLIC_URL}/feed.atom</id>")), "{text}");
    assert_eq!(items(&text), added(&["p1", "a"]), "newest first");
    let (etag, modified) = validators(&plain);
    assert!(etag.starts_with('"') && etag.ends_with('"') && !etag.starts_with("W/"), "{etag}");

    let gzip = app.get("/feed.atom", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gzip.status, StatusCode::OK);
    assert_eq!(gzip.header("content-encoding"), Some("gzip"));
    assert_eq!(gzip.header("content-type"), Some("application/atom+xml"));
    assert_eq!(gzip.header("vary"), Some("Accept-Encoding"));
    assert_eq!(gunzip(&gzip.body), text, "the same document");
    let (gzip_etag, gzip_modified) = validators(&gzip);
    assert_ne!(gzip_etag, etag, "a strong ETag per coding");
    assert_eq!(gzip_modified, modified);
    let refused = app.get("/feed.atom", &[("accept-encoding", "identity;q=0")]).await;
    assert_eq!(refused.status, StatusCode::NOT_ACCEPTABLE);

    let head = app.head("/feed.atom", &[]).await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    for h in ["etag", "last-modified", "content-type", "content-length", "vary", "x-robots-tag"] {
        assert_eq!(head.header(h), plain.header(h), "{h}");
    }
    let head_gzip = app.head("/feed.atom", &[("accept-encoding", "gzip")]).await;
    assert_eq!(head_gzip.header("etag"), Some(gzip_etag.as_str()));
    assert_eq!(head_gzip.header("content-length"), Some(gzip.body.len().to_string().as_str()));

    for (name, value) in [("if-none-match", etag.as_str()), ("if-modified-since", modified.as_str())] {
        let r = app.get("/feed.atom", &[(name, value)]).await;
        assert_eq!(r.status, StatusCode::NOT_MODIFIED, "{name}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), Some(etag.as_str()), "{name}");
        assert_eq!(r.header("x-robots-tag"), Some("noindex"), "{name}");
        assert_eq!(app.head("/feed.atom", &[(name, value)]).await.status, StatusCode::NOT_MODIFIED);
    }
    let r = app.get("/feed.atom", &[("if-none-match", &gzip_etag), ("accept-encoding", "gzip")]).await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    assert_eq!(app.get("/feed.atom", &[("if-none-match", &gzip_etag)]).await.status, StatusCode::OK);
    let stale = app.get("/feed.atom", &[("if-none-match", "\"other\"")]).await;
    assert_eq!(stale.status, StatusCode::OK);

    let section = app.get("/feed-products.atom", &[]).await;
    assert_eq!(section.status, StatusCode::OK);
    assert_eq!(section.header("content-type"), Some("application/atom+xml"));
    assert_eq!(section.header("x-robots-tag"), Some("noindex"));
    assert_eq!(items(&section.text()), added(&["p1"]));
    assert!(section.text().contains(&format!("<id>{PUBLIC_URL}/feed-products.atom</id>")));
    assert_ne!(section.header("etag"), Some(etag.as_str()));
    let section_etag = section.header("etag").unwrap().to_owned();
    let r = app.get("/feed-products.atom", &[("if-none-match", &section_etag)]).await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);

    for path in ["/feed-blog.atom", "/feed-default.atom", "/feed-.atom", "/feed.atom.gz", "/feed.xml", "/feeds.atom"] {
        let r = app.get(path, &[]).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.header("x-robots-tag"), Some("noindex"), "{path}: a sitemap route's answer");
    }
}

/// 10,000 changes in ten writes: the feed holds exactly the newest `feeds.entries`, newest first. A record
/// changed again moves to the top; an identical re-send changes nothing (same bytes, same ETag).
async fn the_newest_entries_newest_first_and_an_identical_resend_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[ON, ("SITEMAPD_FEED_ENTRIES", "150")]).await;
    let path = |i: usize| format!("p{i:05}");
    for batch in 0..10 {
        let lines: String = (batch * 1000..(batch + 1) * 1000)
            .map(|i| format!("{}\n", json!({"loc": url(&path(i)), "lastmod": "2026-11-01"})))
            .collect();
        let r = app.put_ndjson(&lines).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }
    let first = app.get("/feed.atom", &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    let expected: Vec<String> = (9850..10_000).rev().map(|i| format!("+{}", url(&path(i)))).collect();
    assert_eq!(items(&first.text()), expected, "the newest 150 of 10,000, newest first");
    assert!(first.text().contains("<updated>2026-11-01T00:00:00Z</updated>"), "a date's lastmod as a date-time");

    // The same entries again: nothing stored changes, so neither do the feed's bytes or its validators.
    let lines: String =
        (9000..10_000).map(|i| format!("{}\n", json!({"loc": url(&path(i)), "lastmod": "2026-11-01"}))).collect();
    assert_eq!(app.put_ndjson(&lines).await.status, StatusCode::OK);
    put(&app, &[json!({"loc": url(&path(9999)), "lastmod": "2026-11-01"})]).await;
    let again = app.get("/feed.atom", &[CURRENT]).await;
    assert_eq!(again.body, first.body, "an identical re-send changes no byte");
    assert_eq!(validators(&again), validators(&first));
    let r = app.get("/feed.atom", &[("if-none-match", first.header("etag").unwrap())]).await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);

    // An old record changed: first, and the oldest listed leaves.
    put(&app, &[json!({"loc": url(&path(7)), "lastmod": "2026-11-02"})]).await;
    let moved = app.get("/feed.atom", &[CURRENT]).await;
    let mut expected: Vec<String> = vec![format!("+{}", url(&path(7)))];
    expected.extend((9851..10_000).rev().map(|i| format!("+{}", url(&path(i)))));
    assert_eq!(items(&moved.text()), expected);
    assert_ne!(moved.header("etag"), first.header("etag"));
}

/// A change to a record of section A moves A's feed and the site's, never B's (bytes and validators).
async fn a_change_in_one_section_moves_its_feed_and_the_sites_only(b: Backend) {
    let app = TestApp::spawn(b, &[ON]).await;
    put(&app, &[entry("a1", Some("alpha")), entry("b1", Some("beta")), entry("d1", None)]).await;
    let paths = ["/feed.atom", "/feed-alpha.atom", "/feed-beta.atom"];
    let mut before = Vec::new();
    for path in paths {
        let r = app.get(path, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        before.push(r);
    }
    assert_eq!(items(&before[1].text()), added(&["a1"]));
    assert_eq!(items(&before[2].text()), added(&["b1"]));

    put(&app, &[json!({"loc": url("a2"), "section": "alpha"})]).await;
    let after: Vec<TestResponse> = {
        let mut all = Vec::new();
        for path in paths {
            all.push(app.get(path, &[CURRENT]).await);
        }
        all
    };
    assert_ne!(after[0].body, before[0].body, "the site's feed moves");
    assert_ne!(after[0].header("etag"), before[0].header("etag"));
    assert_eq!(items(&after[0].text())[0], format!("+{}", url("a2")));
    assert_ne!(after[1].body, before[1].body, "alpha's feed moves");
    assert_eq!(items(&after[1].text()), added(&["a2", "a1"]));
    assert_eq!(after[2].body, before[2].body, "beta's feed does not");
    assert_eq!(validators(&after[2]), validators(&before[2]));
    let r = app.get("/feed-beta.atom", &[("if-none-match", before[2].header("etag").unwrap())]).await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
}

/// With the removed-URLs sitemap on, a deletion is a tombstone (RFC 6721) in the site's feed and its section's,
/// merged by time with the entries; off, a deleted record simply leaves the feed.
async fn deletions_are_tombstones_with_the_removed_sitemap_on(b: Backend) {
    let app = TestApp::spawn(b, &[ON, ("SITEMAPD_REMOVED_RETENTION", "7d")]).await;
    put(&app, &[entry("keep", None), entry("p1", Some("products")), entry("p2", Some("products"))]).await;
    delete(&app, &["p1"]).await;
    let feed = app.get("/feed.atom", &[CURRENT]).await.text();
    assert!(feed.contains("xmlns:at=\"http://purl.org/atompub/tombstones/1.0\""), "{feed}");
    let listed = items(&feed);
    assert_eq!(listed[0], format!("-{}", url("p1")), "the deletion is the newest: {listed:?}");
    assert!(!listed.contains(&format!("+{}", url("p1"))), "an entry and a tombstone of one loc: the newer only");
    assert!(listed.contains(&format!("+{}", url("keep"))) && listed.contains(&format!("+{}", url("p2"))));
    let section = items(&app.get("/feed-products.atom", &[CURRENT]).await.text());
    assert_eq!(section, vec![format!("-{}", url("p1")), format!("+{}", url("p2"))]);

    // Stored again: an entry once more, newer than its tombstone.
    put(&app, &[entry("p1", Some("products"))]).await;
    let section = items(&app.get("/feed-products.atom", &[CURRENT]).await.text());
    assert_eq!(section, added(&["p1", "p2"]));

    let off = TestApp::spawn(b, &[ON]).await;
    put(&off, &[entry("keep", None), entry("gone", None)]).await;
    delete(&off, &["gone"]).await;
    let feed = off.get("/feed.atom", &[CURRENT]).await.text();
    assert_eq!(items(&feed), added(&["keep"]), "{feed}");
}

/// A record that leaves the feed with no tombstone (deleted with the removed-URLs sitemap off) takes its time with
/// it, but the feed's `Last-Modified` does not go back: it is at least its pages' last change, so a client that
/// sends only `If-Modified-Since` gets the changed feed, not a 304.
async fn last_modified_never_goes_back(b: Backend) {
    let app = TestApp::spawn(b, &[ON]).await;
    put(&app, &[entry("older", None)]).await;
    until_the_next_second().await;
    put(&app, &[entry("newest", None)]).await;
    let before = app.get("/feed.atom", &[CURRENT]).await;
    assert_eq!(items(&before.text()), added(&["newest", "older"]));
    let modified = |r: &TestResponse| httpdate::parse_http_date(r.header("last-modified").unwrap()).unwrap();
    until_the_next_second().await;
    delete(&app, &["newest"]).await;
    let after = app.get("/feed.atom", &[CURRENT]).await;
    assert_eq!(items(&after.text()), added(&["older"]));
    assert!(modified(&after) > modified(&before), "Last-Modified went back or stayed: {:?}", after.headers);
    let since = before.header("last-modified").unwrap();
    let r = app.get("/feed.atom", &[CURRENT, ("if-modified-since", since)]).await;
    assert_eq!(r.status, StatusCode::OK, "the feed changed since {since}");
}

/// Tombstones are listed until the purge deletes them, and the purge moves the site's change counter even when the
/// removed-URLs stamp does not (the purged tombstone was not the newest): what the WebSub publisher watches, so
/// that hubs are told of the feed the purge changed.
async fn a_purged_tombstone_leaves_the_feed(b: Backend) {
    let app = TestApp::spawn(b, &[ON, ("SITEMAPD_REMOVED_RETENTION", "1d")]).await;
    put(&app, &[entry("keep", None), entry("old", None), entry("young", None)]).await;
    delete(&app, &["old"]).await;
    delete(&app, &["young"]).await;
    // Two days old by the database's clock, which the purge reads.
    let two_days_us = 2 * 86_400 * 1_000_000_i64;
    app.exec_sql(&format!("UPDATE removed SET removed_us = removed_us - {two_days_us} WHERE loc = '{}'", url("old")))
        .await;
    let listed = items(&app.get("/feed.atom", &[CURRENT]).await.text());
    assert!(listed.contains(&format!("-{}", url("old"))), "{listed:?}");
    let changes = app.store.changes(1).await.unwrap();
    assert_eq!(sitemapd::sitemap::removed::purge(&*app.store).await.unwrap(), 1);
    assert!(app.store.changes(1).await.unwrap() > changes, "the purge moved no change counter");
    let listed = items(&app.get("/feed.atom", &[CURRENT]).await.text());
    assert_eq!(listed, vec![format!("-{}", url("young")), format!("+{}", url("keep"))]);
}

/// Two processes on one database answer every feed with the same bytes and validators, in both codings.
async fn two_processes_answer_alike(b: Backend) {
    let app = TestApp::spawn(b, &[ON, ("SITEMAPD_REMOVED_RETENTION", "7d")]).await;
    put(&app, &[entry("a", None), entry("p1", Some("products")), entry("p2", Some("products"))]).await;
    delete(&app, &["p2"]).await;
    let other = app.another_process().await;
    put(&other, &[entry("b", None)]).await;
    for path in ["/feed.atom", "/feed-products.atom"] {
        for headers in [&[CURRENT][..], &[CURRENT, ("accept-encoding", "gzip")][..]] {
            let (one, two) = (app.get(path, headers).await, other.get(path, headers).await);
            assert_eq!(one.status, StatusCode::OK, "{path}");
            assert_eq!(one.body, two.body, "{path} {headers:?}");
            assert_eq!(validators(&one), validators(&two), "{path} {headers:?}");
        }
    }
    assert_eq!(items(&app.get("/feed.atom", &[CURRENT]).await.text())[0], format!("+{}", url("b")));
}

/// With feeds on, robots.txt names the site's feed after the index, a record's lookup names its site's feed and
/// its section's, and the view lists the site's feeds.
async fn robots_lookup_and_view_name_the_feeds(b: Backend) {
    let app = TestApp::spawn(b, &[ON, ("SITEMAPD_ROBOTS_TXT", "true")]).await;
    put(&app, &[entry("a", None), entry("p1", Some("products"))]).await;
    let robots = app.get("/robots.txt", &[]).await.text();
    assert_eq!(robots, format!("Sitemap: {PUBLIC_URL}/sitemap.xml\nSitemap: {PUBLIC_URL}/feed.atom\n"));

    let found = app.find(&url("p1")).await.json();
    assert_eq!(found["feed"], format!("{PUBLIC_URL}/feed.atom"));
    assert_eq!(found["section_feed"], format!("{PUBLIC_URL}/feed-products.atom"));
    let found = app.find(&url("a")).await.json();
    assert_eq!(found["feed"], format!("{PUBLIC_URL}/feed.atom"));
    assert!(found.get("section_feed").is_none(), "the default section has no feed of its own: {found}");

    let view = app.get("/view/default/", &[]).await;
    assert_eq!(view.status, StatusCode::OK);
    let html = view.text();
    assert!(html.contains("<h2 id=\"feeds\">Feeds</h2>"), "{html}");
    assert!(html.contains(&format!("<a href=\"{PUBLIC_URL}/feed.atom\">feed.atom</a>")), "{html}");
    assert!(html.contains(&format!("<a href=\"{PUBLIC_URL}/feed-products.atom\">feed-products.atom</a>")), "{html}");
    let off = app.another_process_with(&[("SITEMAPD_FEEDS", "false")]).await;
    assert!(!off.get("/view/default/", &[]).await.text().contains("id=\"feeds\""));
}

both_backends!(
    feeds_are_off_by_default_and_change_no_sitemap,
    a_feed_is_served_as_the_sitemaps_are,
    the_newest_entries_newest_first_and_an_identical_resend_changes_nothing,
    a_change_in_one_section_moves_its_feed_and_the_sites_only,
    deletions_are_tombstones_with_the_removed_sitemap_on,
    two_processes_answer_alike,
    robots_lookup_and_view_name_the_feeds,
    last_modified_never_goes_back,
    a_purged_tombstone_leaves_the_feed,
);
