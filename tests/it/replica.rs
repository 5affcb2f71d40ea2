//! Reads from a real Postgres streaming replica (`DATABASE_READ_URL`): `.ci/run` makes one with
//! `pg_basebackup -R` on port 5433 and sets `TEST_DATABASE_READ_URL`. Pages, the page table and the read API come
//! from it; writes, and the reads a write makes, stay on the primary; replica lag delays a change but never sends
//! bytes that disagree with their ETag.

use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::Connection;

use crate::support::{Backend, PUBLIC_URL, TestApp, gunzip};

/// The replica of the `TEST_DATABASE_URL` server, from `TEST_DATABASE_READ_URL`. A test that needs it is ignored
/// when the variable was unset at build time (`build.rs`); one run anyway fails here.
fn replica_url() -> String {
    match std::env::var("TEST_DATABASE_READ_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "TEST_DATABASE_READ_URL is not set: this test needs a streaming replica of TEST_DATABASE_URL's server \
             (`.ci/run` makes one on port 5433: postgres://postgres@127.0.0.1:5433/test)"
        ),
    }
}

/// `url` with the database named `db`.
fn with_database(url: &str, db: &str) -> String {
    let mut url = url::Url::parse(url).unwrap();
    url.set_path(db);
    url.into()
}

/// Runs `sql` on the replica's `db` and returns the first column of its row as text.
async fn on(url: &str, sql: &str) -> String {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let (value,): (String,) = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(&mut conn).await.unwrap();
    value
}

/// Waits until the replica has replayed everything the primary has written so far.
async fn caught_up(primary: &str, replica: &str) {
    let lsn = on(primary, "SELECT pg_current_wal_lsn()::text").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let replayed = on(replica, &format!("SELECT (pg_last_wal_replay_lsn() >= '{lsn}')::text")).await;
        if replayed == "true" {
            return;
        }
        assert!(Instant::now() < deadline, "the replica did not replay up to {lsn}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Replay paused on the replica until dropped (a panic included: other tests use the replica too).
struct Paused(String);

impl Paused {
    async fn new(replica: &str) -> Self {
        on(replica, "SELECT pg_wal_replay_pause()::text").await;
        Self(replica.to_owned())
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let url = self.0.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(on(&url, "SELECT pg_wal_replay_resume()::text"));
        })
        .join()
        .ok();
    }
}

async fn page(app: &TestApp, path: &str) -> (String, String) {
    let r = app.get(path, &[("accept-encoding", "gzip")]).await;
    assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
    (r.header("etag").unwrap().to_owned(), gunzip(&r.body))
}

#[tokio::test]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
#[cfg_attr(all(not(sitemapd_no_postgres), sitemapd_no_replica), ignore = "needs a replica: TEST_DATABASE_READ_URL")]
async fn reads_come_from_the_replica_and_lag_never_breaks_an_etag() {
    let replica_server = replica_url();
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "2"), ("SITEMAPD_STATE_TTL", "100ms")];
    let primary_only = TestApp::spawn(Backend::Postgres, &vars).await;
    let loc = |p: &str| format!("{PUBLIC_URL}/{p}");
    let put = json!([{"loc": loc("a"), "priority": 0.1}, {"loc": loc("b")}, {"loc": loc("c")}]);
    assert_eq!(primary_only.put_json(&put).await.status, 200);
    let primary = primary_only.db.url.clone();
    let db = url::Url::parse(&primary).unwrap().path().trim_start_matches('/').to_owned();
    let replica = with_database(&replica_server, &db);
    // Asked on the replica's own database: the test's may not have been replayed there yet.
    caught_up(&primary, &replica_server).await;
    assert_eq!(on(&replica, "SELECT pg_is_in_recovery()::text").await, "true", "{replica} is a standby");

    let app = primary_only.another_process_with(&[("DATABASE_READ_URL", replica.as_str())]).await;
    let before = page(&app, "/sitemap-1.xml").await;
    assert_eq!(before, page(&primary_only, "/sitemap-1.xml").await, "the replica serves what the primary does");
    assert_eq!(app.get("/sitemap.xml", &[]).await.body, primary_only.get("/sitemap.xml", &[]).await.body);

    // Replay paused: the replica lags behind every write from now on.
    let paused = Paused::new(&replica).await;
    let changed = json!([{"loc": loc("a"), "priority": 0.9}]);
    let r = app.put_json(&changed).await;
    assert_eq!(r.json()["updated"], 1, "the write went to the primary: {}", r.text());
    let r = app.put_json(&changed).await;
    assert_eq!(r.json()["unchanged"], 1, "the write path read the primary, not the lagging replica");
    // A new URL is on the primary alone: the read API (the replica) does not know it yet.
    assert_eq!(app.put_json(&json!([{"loc": loc("d")}])).await.json()["created"], 1);
    assert_eq!(app.find(&loc("d")).await.status, 404, "the read API reads the replica");
    assert_eq!(primary_only.find(&loc("d")).await.status, 200);
    for _ in 0..5 {
        let lagging = page(&app, "/sitemap-1.xml").await;
        assert_eq!(lagging, before, "the replica's page, with that page's own ETag");
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let fresh = page(&primary_only, "/sitemap-1.xml").await;
    assert_ne!(fresh.0, before.0);
    assert!(fresh.1.contains("<priority>0.9</priority>"));

    drop(paused);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = page(&app, "/sitemap-1.xml").await;
        // Every answer is one snapshot's: the old page with the old ETag, or the new one with the new.
        assert!(now == before || now == fresh, "bytes and ETag from different states: {now:?}");
        if now == fresh {
            break;
        }
        assert!(Instant::now() < deadline, "the replica's page never caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(app.find(&loc("d")).await.status, 200);
    assert_eq!(app.get("/readyz", &[]).await.status, 200);
    let metrics = app.get("/metrics", &[]).await.text();
    let open = gauge(&metrics, "sitemapd_db_read_pool_connections");
    assert!(open.is_some_and(|n| n >= 1.0), "the replica's pool is in use: {open:?}");
}

/// A gauge's value in a `/metrics` text.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A replica that is down neither keeps the service from starting nor from answering: it is not used until a
/// probe finds it answering, so reads go to the primary. `/readyz` asks the primary.
#[tokio::test]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn a_replica_that_is_down_leaves_reads_to_the_primary() {
    let vars = [("SITEMAPD_DB_ACQUIRE_TIMEOUT", "1s")];
    let primary_only = TestApp::spawn(Backend::Postgres, &vars).await;
    assert_eq!(primary_only.put_json(&json!([{"loc": format!("{PUBLIC_URL}/a")}])).await.status, 200);
    let nowhere = "postgres://postgres@127.0.0.1:1/nowhere";
    let app = primary_only.another_process_with(&[("DATABASE_READ_URL", nowhere)]).await;
    assert_eq!(app.get("/readyz", &[]).await.status, 200, "readiness is the primary's");
    for _ in 0..3 {
        let index = app.get("/sitemap.xml", &[]).await;
        assert_eq!(index.status, 200, "the primary answers: {}", index.text());
        assert_eq!(index.body, primary_only.get("/sitemap.xml", &[]).await.body);
        assert_eq!(app.find(&format!("{PUBLIC_URL}/a")).await.status, 200);
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    // The replica's pool has its own gauges, only where one is configured: none open while it is down.
    let metrics = app.get("/metrics", &[]).await.text();
    assert_eq!(gauge(&metrics, "sitemapd_db_read_pool_connections"), Some(0.0), "{metrics}");
    assert!(gauge(&metrics, "sitemapd_db_pool_connections").is_some_and(|n| n >= 1.0));
    let without = primary_only.get("/metrics", &[]).await.text();
    assert_eq!(gauge(&without, "sitemapd_db_read_pool_connections"), None);
}
