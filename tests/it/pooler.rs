//! sitemapd behind PgBouncer in transaction pooling mode (`SITEMAPD_DATABASE_POOLER=transaction`,
//! docs/pgbouncer.md): the real router's writes and reads, writers queueing for the write lock on a pool of two
//! server connections, the write lock's timeout, migrations at start. The contract suite and parts of the API,
//! sitemap, IndexNow and URL-health suites run through the pooler too (`through_pooler!` in their files).
//! `.ci/run` starts the pooler (`default_pool_size = 2`, so that one client's transactions do change server
//! connections) and sets `TEST_DATABASE_POOLER_URL`.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sitemapd::domain::{Entry, Loc, PublicUrl};
use sqlx::Connection;

use crate::support::{Backend, PUBLIC_URL, TestApp, xml_texts};

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

async fn through_pooler() -> TestApp {
    TestApp::spawn(Backend::Pooler, &[]).await
}

/// The locs every page of the index lists, in order.
async fn listed_locs(app: &TestApp) -> Vec<String> {
    let mut locs = Vec::new();
    for path in app.index_paths().await {
        let r = app.get(&path, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        locs.extend(xml_texts(&r.text(), "loc"));
    }
    locs
}

/// Writes of each kind (a JSON array, NDJSON, a single and a batch delete), then the reads crawlers and people
/// make (index, page, gzip, a 304, the lookup, the listing, the probes), all through the pooler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(any(sitemapd_no_postgres, sitemapd_no_pooler), ignore = "needs PgBouncer: TEST_DATABASE_POOLER_URL")]
async fn writes_and_reads_go_through_a_transaction_pooler() {
    let app = through_pooler().await;
    let r = app.put_json(&json!([{"loc": loc("a"), "priority": 0.5}, {"loc": loc("b")}, {"loc": loc("c")}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"received": 3, "created": 3, "updated": 0, "unchanged": 0}));
    let ndjson: String = (0..50).map(|i| format!("{{\"loc\": \"{}\"}}\n", loc(&format!("n{i:02}")))).collect();
    let r = app.put_ndjson(&ndjson).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["created"], json!(50));
    assert_eq!(app.delete_loc(&loc("b")).await.status, StatusCode::NO_CONTENT);
    let batch = json!([loc("n00"), loc("n01"), loc("missing")]).to_string();
    let ct = [("content-type", "application/json")];
    let r = app.request(Method::POST, "/api/v1/urls/delete", &ct, Body::from(batch)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"deleted": 2, "missing": 1}));

    let mut expected: Vec<String> = ["a", "c"].iter().map(|p| loc(p)).collect();
    expected.extend((2..50).map(|i| loc(&format!("n{i:02}"))));
    assert_eq!(listed_locs(&app).await, expected);
    let page = app.get("/sitemap-1.xml", &[("accept-encoding", "gzip")]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.header("content-encoding"), Some("gzip"));
    let etag = page.header("etag").expect("an ETag").to_owned();
    let again = app.get("/sitemap-1.xml", &[("accept-encoding", "gzip"), ("if-none-match", &etag)]).await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    let index = app.get("/sitemap.xml", &[]).await;
    let index_etag = index.header("etag").expect("an ETag").to_owned();
    assert_eq!(app.get("/sitemap.xml", &[("if-none-match", &index_etag)]).await.status, StatusCode::NOT_MODIFIED);

    let found = app.find(&loc("a")).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.text());
    assert_eq!(found.json()["priority"], json!(0.5));
    assert_eq!(app.find(&loc("b")).await.status, StatusCode::NOT_FOUND);
    let listing = app.get("/api/v1/urls?limit=10", &[]).await;
    assert_eq!(listing.status, StatusCode::OK, "{}", listing.text());
    assert_eq!(listing.json()["items"].as_array().map(Vec::len), Some(10), "{}", listing.text());
    assert_eq!(app.get("/readyz", &[]).await.status, StatusCode::OK);
    assert_eq!(app.get("/api/v1/crawlers", &[]).await.status, StatusCode::OK);
    assert_eq!(app.get("/api/v1/health", &[]).await.status, StatusCode::OK);
}

/// Eight writers at once on a pool of two server connections: a writer waiting for the write lock holds one of
/// them, so the others wait in the pooler's queue. Every write is answered 200 and counted exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(any(sitemapd_no_postgres, sitemapd_no_pooler), ignore = "needs PgBouncer: TEST_DATABASE_POOLER_URL")]
async fn concurrent_writers_share_two_server_connections() {
    let app = std::sync::Arc::new(through_pooler().await);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut created = 0;
                for round in 0..5 {
                    // Each writer's own locs, and one every writer shares.
                    let mut batch: Vec<Value> =
                        (0..40).map(|i| json!({"loc": loc(&format!("w{w}-r{round}-{i:02}"))})).collect();
                    batch.push(json!({"loc": loc("shared"), "priority": f64::from(w) / 10.0}));
                    let r = app.put_json(&Value::Array(batch)).await;
                    assert_eq!(r.status, StatusCode::OK, "writer {w}, round {round}: {}", r.text());
                    created += r.json()["created"].as_u64().unwrap();
                }
                created
            })
        })
        .collect();
    let mut created = 0;
    for writer in writers {
        created += writer.await.unwrap();
    }
    assert_eq!(created, 8 * 5 * 40 + 1, "each record created once, the shared one by one writer");
    let mut listed = listed_locs(&app).await;
    assert_eq!(listed.len(), 8 * 5 * 40 + 1);
    listed.sort();
    listed.dedup();
    assert_eq!(listed.len(), 8 * 5 * 40 + 1, "every loc on exactly one page");
}

/// The write transaction sets its own `lock_timeout` (no startup `options` through the pooler): a writer that
/// cannot have the write lock gives up with Postgres' lock timeout (503 for the API) instead of waiting until
/// the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(any(sitemapd_no_postgres, sitemapd_no_pooler), ignore = "needs PgBouncer: TEST_DATABASE_POOLER_URL")]
async fn a_writer_gives_up_on_a_held_write_lock_after_the_lock_timeout() {
    let app = through_pooler().await;
    let mut holder = sqlx::PgConnection::connect(&app.db.direct_url).await.unwrap();
    let mut tx = holder.begin().await.unwrap();
    // The store's write lock key ("sitemapd" in ASCII, truncated).
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(0x7369_7465_6d61_7064_i64).execute(&mut *tx).await.unwrap();
    let public_url = PublicUrl::parse(PUBLIC_URL).unwrap();
    let loc = Loc::parse(&loc("blocked"), &public_url).unwrap();
    let entry = Entry { loc, lastmod: None, changefreq: None, priority: None, ext: None, section: None };
    // Bounded here only so that a missing timeout fails the test rather than hanging it: the lock is held for
    // longer than that.
    let write = tokio::time::timeout(Duration::from_secs(60), app.store.upsert(&[entry])).await;
    let error = write.expect("the writer gave up on its own").expect_err("the write lock is held elsewhere");
    assert!(error.to_string().contains("lock timeout"), "{error}");
    tx.rollback().await.unwrap();
    assert_eq!(app.put_paths(&["after"]).await["created"], json!(1));
}

/// Migrations through the pooler, at the first start and again at a second: under a transaction-scoped lock,
/// so that no advisory lock is left held on a server connection after either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(any(sitemapd_no_postgres, sitemapd_no_pooler), ignore = "needs PgBouncer: TEST_DATABASE_POOLER_URL")]
async fn migrations_run_at_start_through_the_pooler_and_leave_no_lock() {
    let app = through_pooler().await;
    let again = app.another_process().await;
    again.store.migrate().await.unwrap();
    let mut direct = sqlx::PgConnection::connect(&app.db.direct_url).await.unwrap();
    let (applied,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM _sqlx_migrations WHERE success").fetch_one(&mut direct).await.unwrap();
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres")).unwrap().count();
    assert_eq!(usize::try_from(applied).unwrap(), files, "every migration applied once");
    let (held,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
         WHERE l.locktype = 'advisory' AND d.datname = current_database()",
    )
    .fetch_one(&mut direct)
    .await
    .unwrap();
    assert_eq!(held, 0, "an advisory lock is still held on a server connection");
    assert_eq!(again.put_paths(&["a"]).await["created"], json!(1));
}
