//! The removed-URLs sitemap (`/sitemap-removed.xml[.gz]`, on with `removed_days`): what a delete wave lists and in
//! which order, what a re-store, a repeated delete, the retention and the purge do to it, the index's line, the
//! 50,000 cap, and that nothing is kept or served while it is off (the default).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, TestResponse, eventually, gunzip, validate_xsd, xml_texts};
use sitemapd::sitemap::directory::Clock;

const DAY_US: i64 = 86_400_000_000;

fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64
}

fn clock_at(us: i64) -> (Clock, Arc<AtomicI64>) {
    let now = Arc::new(AtomicI64::new(us));
    let read = now.clone();
    (Arc::new(move || read.load(Ordering::SeqCst)), now)
}

fn url(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

/// Deletes `paths` in one request (one write: one deletion time).
async fn delete(app: &TestApp, paths: &[&str]) -> Value {
    let locs: Vec<String> = paths.iter().map(|p| url(p)).collect();
    let headers = [("content-type", "application/json")];
    let r = app.request(Method::POST, "/api/v1/urls/delete", &headers, Body::from(json!(locs).to_string())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    r.json()
}

/// One number from the test's database, outside sitemapd.
async fn scalar(app: &TestApp, sql: &str) -> i64 {
    let url = &app.db.url;
    let query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()));
    if url.starts_with("sqlite:") {
        query.fetch_one(&mut sqlx::SqliteConnection::connect(url).await.unwrap()).await.unwrap()
    } else {
        let query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()));
        query.fetch_one(&mut sqlx::PgConnection::connect(url).await.unwrap()).await.unwrap()
    }
}

fn validators(r: &TestResponse) -> (Option<String>, Option<String>) {
    (r.header("etag").map(str::to_owned), r.header("last-modified").map(str::to_owned))
}

/// The `<lastmod>` of each entry, as microseconds.
fn lastmods(xml: &str) -> Vec<i64> {
    xml_texts(xml, "lastmod").iter().map(|l| sitemapd::domain::LastMod::parse(l).unwrap().unix_micros()).collect()
}

/// A delete wave is listed newest first with its deletion time, in a document the schemas accept, and the index
/// lists it; a repeated delete changes nothing; a loc stored again leaves it at once; IndexNow still hears of every
/// deletion; the project's own reader reads it back; another process answers alike.
async fn a_delete_wave_is_listed_newest_first_until_stored_again(b: Backend) {
    let vars = [("SITEMAPD_REMOVED_RETENTION", "30d"), ("SITEMAPD_INDEXNOW_KEYS", "removed-key-1")];
    let app = TestApp::spawn(b, &vars).await;
    app.put_paths(&["a", "b", "c?x=1&y=2", "d"]).await;
    let index_before = app.get("/sitemap.xml", &[]).await;
    assert_eq!(app.get("/sitemap-removed.xml", &[]).await.status, StatusCode::NOT_FOUND, "nothing removed yet");

    let started = now_us();
    assert_eq!(delete(&app, &["b", "a"]).await, json!({"deleted": 2, "missing": 0}));
    // Not a gate: the second wave must be dated later than the first (milliseconds), which is what is asserted.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    assert_eq!(delete(&app, &["c?x=1&y=2"]).await["deleted"], 1);
    let ended = now_us();

    let removed = app.get("/sitemap-removed.xml", &[]).await;
    assert_eq!(removed.status, StatusCode::OK, "{}", removed.text());
    assert_eq!(removed.header("content-type"), Some("application/xml; charset=utf-8"));
    assert_eq!(removed.header("x-robots-tag"), Some("noindex"));
    let text = removed.text();
    // Newest first; a and b were deleted by one write (one time): by loc, descending.
    assert_eq!(xml_texts(&text, "loc"), [url("c?x=1&y=2"), url("b"), url("a")]);
    assert!(text.contains("<loc>https://www.example.com/c?x=1&amp;y=2</loc>"), "{text}");
    let dates = lastmods(&text);
    assert!(dates[0] > dates[1] && dates[1] == dates[2], "{dates:?}");
    // The deletion time, in milliseconds (the database's clock in Postgres: the same machine's).
    assert!(dates.iter().all(|d| (started - 1000..=ended).contains(d)), "{dates:?} not in {started}..{ended}");
    let index = app.get("/sitemap.xml", &[]).await;
    validate_xsd(&[("removed.xml", &removed.body), ("index.xml", &index.body)]);
    assert!(index.text().contains(&format!("<loc>{PUBLIC_URL}/sitemap-removed.xml</loc>")), "{}", index.text());
    assert_ne!(index.header("etag"), index_before.header("etag"));
    assert_eq!(app.index_paths().await.last().map(String::as_str), Some("/sitemap-removed.xml"));

    // Representations and validators, as every sitemap.
    let gz = app.get("/sitemap-removed.xml.gz", &[]).await;
    assert_eq!(gz.header("content-type"), Some("application/gzip"));
    assert_eq!(gunzip(&gz.body), text);
    let negotiated = app.get("/sitemap-removed.xml", &[("accept-encoding", "gzip")]).await;
    assert_eq!(negotiated.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip(&negotiated.body), text);
    assert_ne!(negotiated.header("etag"), removed.header("etag"));
    let head = app.head("/sitemap-removed.xml", &[]).await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), Some(removed.body.len().to_string().as_str()));
    assert_eq!(validators(&head), validators(&removed));
    let etag = removed.header("etag").unwrap();
    assert_eq!(app.get("/sitemap-removed.xml", &[("if-none-match", etag)]).await.status, StatusCode::NOT_MODIFIED);
    assert_eq!(
        app.get("/sitemap-removed.xml", &[("if-match", "\"other\"")]).await.status,
        StatusCode::PRECONDITION_FAILED
    );

    // IndexNow is told of every deletion, as before.
    let queued = scalar(&app, "SELECT COUNT(*) FROM indexnow_outbox WHERE loc LIKE 'https://www.example.com/%'").await;
    assert_eq!(queued, 4, "the four stored, three of them deleted: each loc queued once");

    // Deleting what is not stored changes nothing: no tombstone, no date, no ETag.
    let rows = scalar(&app, "SELECT COUNT(*) FROM removed").await;
    assert_eq!(delete(&app, &["a", "never"]).await, json!({"deleted": 0, "missing": 2}));
    assert_eq!(scalar(&app, "SELECT COUNT(*) FROM removed").await, rows);
    let again = app.get("/sitemap-removed.xml", &[]).await;
    assert_eq!((validators(&again), &again.body), (validators(&removed), &removed.body));
    assert_eq!(validators(&app.get("/sitemap.xml", &[]).await), validators(&index));

    // The project's own reader (sitemapd import's) reads every entry back, with its date.
    let mut read = Vec::new();
    sitemapd::import::read::read(&removed.body[..], &Default::default(), &mut |found| {
        if let sitemapd::import::read::Found::Entry { json, .. } = found {
            read.push(serde_json::from_str::<Value>(&json).unwrap());
        }
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    let read_locs: Vec<&str> = read.iter().map(|e| e["loc"].as_str().unwrap()).collect();
    assert_eq!(read_locs, [url("c?x=1&y=2"), url("b"), url("a")]);
    assert!(read.iter().all(|e| e["lastmod"].is_string()), "{read:?}");

    // Another process on the database answers the same bytes and validators.
    let replica = app.another_process().await;
    let theirs = replica.get("/sitemap-removed.xml", &[]).await;
    assert_eq!((validators(&theirs), &theirs.body), (validators(&removed), &removed.body));
    assert_eq!(validators(&replica.get("/sitemap.xml", &[]).await), validators(&index));

    // Stored again, b leaves the sitemap at once, in the same write; its validators move.
    app.put_paths(&["b"]).await;
    let after = app.get("/sitemap-removed.xml", &[]).await;
    assert_eq!(xml_texts(&after.text(), "loc"), [url("c?x=1&y=2"), url("a")]);
    assert_ne!(after.header("etag"), removed.header("etag"));
    assert_eq!(scalar(&app, "SELECT COUNT(*) FROM removed").await, 2);
    // The other process sees it within its state_ttl_ms (the change counter moved).
    eventually("the other process lists the stored-again loc no more", || async {
        replica.get("/sitemap-removed.xml", &[]).await.body == after.body
    })
    .await;
    assert_eq!(replica.get("/sitemap-removed.xml", &[]).await.body, after.body);

    // All stored again: the sitemap is gone, and so is its line in the index, whose date does not go back.
    app.put_paths(&["a", "c?x=1&y=2"]).await;
    assert_eq!(app.get("/sitemap-removed.xml", &[]).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/sitemap-removed.xml.gz", &[]).await.status, StatusCode::NOT_FOUND);
    assert!(!app.index_paths().await.iter().any(|p| p.contains("removed")));
}

/// A tombstone older than the retention is not listed (the index's date moves on, never back), and the purge
/// deletes it and nothing younger.
async fn the_retention_hides_old_entries_and_the_purge_deletes_them(b: Backend) {
    let (clock, now) = clock_at(now_us());
    let vars = [("SITEMAPD_REMOVED_RETENTION", "1d"), ("SITEMAPD_STATE_TTL", "0s")];
    let app = TestApp::spawn_with_clock(b, &vars, clock).await;
    app.put_paths(&["kept", "old", "young"]).await;
    delete(&app, &["old"]).await;
    // The test's clock from the moment of the delete (stamped by the real clock), however long the start took.
    let t = now_us();
    now.store(t, Ordering::SeqCst);
    let listed = app.get("/sitemap-removed.xml", &[]).await;
    assert_eq!(xml_texts(&listed.text(), "loc"), [url("old")]);
    let index_listing = app.get("/sitemap.xml", &[]).await;

    // A day and two seconds on, "old" has left the one-day window.
    now.store(t + DAY_US + 2_000_000, Ordering::SeqCst);
    assert_eq!(app.get("/sitemap-removed.xml", &[]).await.status, StatusCode::NOT_FOUND);
    let index = app.get("/sitemap.xml", &[]).await;
    assert!(!index.text().contains("sitemap-removed.xml"), "{}", index.text());
    let date = |r: &TestResponse| httpdate::parse_http_date(r.header("last-modified").unwrap()).unwrap();
    assert!(date(&index) > date(&index_listing), "the index's Last-Modified went back or stayed");
    assert_ne!(index.header("etag"), index_listing.header("etag"));

    // The purge runs by the database's clock: the tombstone is made two days old there, and a young one added.
    now.store(t, Ordering::SeqCst);
    delete(&app, &["young"]).await;
    app.exec_sql(&format!("UPDATE removed SET removed_us = removed_us - {} WHERE loc = '{}'", 2 * DAY_US, url("old")))
        .await;
    let removed = app.get("/sitemap-removed.xml", &[]).await;
    assert_eq!(xml_texts(&removed.text(), "loc"), [url("young")]);
    let index = app.get("/sitemap.xml", &[]).await;
    assert_eq!(sitemapd::sitemap::removed::purge(&*app.store).await.unwrap(), 1);
    assert_eq!(scalar(&app, "SELECT COUNT(*) FROM removed").await, 1);
    assert_eq!(sitemapd::sitemap::removed::purge(&*app.store).await.unwrap(), 0, "nothing more to purge");
    // The purge shows nowhere: what it deleted had left the window, and its leaving was already dated.
    let after = app.get("/sitemap-removed.xml", &[]).await;
    assert_eq!((validators(&after), &after.body), (validators(&removed), &removed.body));
    assert_eq!(validators(&app.get("/sitemap.xml", &[]).await), validators(&index));
}

/// Off (the default): a delete keeps nothing, the sitemap is 404, and the index is the same document with the
/// same validators as with the setting on and nothing removed.
async fn off_by_default_it_keeps_and_serves_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    assert!(app.config.sitemaps.removed_retention.is_zero());
    app.put_paths(&["a", "b"]).await;
    let index = app.get("/sitemap.xml", &[]).await;
    let on = app.another_process_with(&[("SITEMAPD_REMOVED_RETENTION", "30d")]).await;
    let index_on = on.get("/sitemap.xml", &[]).await;
    assert_eq!((validators(&index_on), &index_on.body), (validators(&index), &index.body), "on, nothing removed");
    let gz = app.get("/sitemap.xml", &[("accept-encoding", "gzip")]).await;
    assert_eq!(validators(&on.get("/sitemap.xml", &[("accept-encoding", "gzip")]).await), validators(&gz));

    delete(&app, &["a"]).await;
    assert_eq!(scalar(&app, "SELECT COUNT(*) FROM removed").await, 0);
    assert_eq!(scalar(&app, "SELECT COUNT(*) FROM removed_state").await, 0);
    for path in ["/sitemap-removed.xml", "/sitemap-removed.xml.gz"] {
        assert_eq!(app.get(path, &[]).await.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(on.get(path, &[]).await.status, StatusCode::NOT_FOUND, "{path}: nothing was kept");
    }
    assert!(!app.index_paths().await.iter().any(|p| p.contains("removed")));
    assert_eq!(sitemapd::sitemap::removed::purge(&*app.store).await.unwrap(), 0);
}

/// At most 50,000 tombstones are listed: the newest.
async fn at_most_the_50000_newest_are_listed(b: Backend) {
    let vars = [("SITEMAPD_REMOVED_RETENTION", "30d"), ("SITEMAPD_STATE_TTL", "0s")];
    let app = TestApp::spawn(b, &vars).await;
    let base = now_us() - DAY_US;
    let rows = match b {
        Backend::Sqlite => format!(
            "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50001) \
             INSERT INTO removed (site_id, loc, removed_us) SELECT 1, '{PUBLIC_URL}/r/' || i, {base} + i * 1000 FROM n"
        ),
        Backend::Postgres | Backend::Pooler => format!(
            "INSERT INTO removed (site_id, loc, removed_us) \
             SELECT 1, '{PUBLIC_URL}/r/' || i, {base} + i * 1000 FROM generate_series(1, 50001) AS i"
        ),
    };
    app.exec_sql(&rows).await;
    let r = app.get("/sitemap-removed.xml.gz", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let text = gunzip(&r.body);
    let locs = xml_texts(&text, "loc");
    assert_eq!(locs.len(), 50_000);
    assert_eq!((locs[0].as_str(), locs[49_999].as_str()), (url("r/50001").as_str(), url("r/2").as_str()));
    validate_xsd(&[("removed.xml", text.as_bytes())]);
}

both_backends!(
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    a_delete_wave_is_listed_newest_first_until_stored_again,
    the_retention_hides_old_entries_and_the_purge_deletes_them,
    off_by_default_it_keeps_and_serves_nothing,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    at_most_the_50000_newest_are_listed,
);
