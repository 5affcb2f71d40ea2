//! A real database outage: a private PostgreSQL 15 server of this test's own is stopped under a running service
//! and started again. Requests that need the store answer 503 with `Retry-After` in bounded time, liveness stays
//! 200, and everything recovers without a restart of the service.
//!
//! The shared cluster on port 5432 is never touched: other tests use it. Ignored unless `TEST_DATABASE_URL` is set
//! (as the other Postgres tests) and PostgreSQL 15's `initdb` is installed (see `build.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::json;
use sitemapd::AppState;
use sitemapd::config::Config;

use crate::support::{Backend, PUBLIC_URL, TestApp, TestResponse, options, postgres_url};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// A liveness bound, not a speed requirement: an answer must come, and well before a client gives up.
const ANSWER_BOUND: Duration = Duration::from_secs(15);

/// A PostgreSQL server in a temporary directory, on a free port, stopped (immediately) when dropped.
struct PrivatePostgres {
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivatePostgres {
    /// Panics when PostgreSQL 15's binaries are missing.
    fn init() -> Self {
        assert!(
            Path::new(PG_BIN).join("initdb").exists(),
            "{PG_BIN}/initdb is missing (apt-get install postgresql-15)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        if as_root() {
            // The server refuses to run as root: the postgres user must own its directory.
            let status = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status().unwrap();
            assert!(status.success(), "chown of {} failed", dir.path().display());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let pg = Self { dir, port };
        let data = pg.data();
        pg.pg("initdb", &["-D", &data, "-U", "postgres", "-A", "trust", "--no-sync", "--no-instructions"]);
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn start(&self) {
        let options = format!("-p {} -k {} -c listen_addresses=127.0.0.1", self.port, self.dir.path().display());
        let log = self.dir.path().join("server.log").display().to_string();
        self.pg("pg_ctl", &["-D", &self.data(), "-o", &options, "-l", &log, "-w", "-t", "60", "start"]);
    }

    fn stop(&self) {
        self.pg("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
    }

    /// Runs a PostgreSQL program, as the postgres user when this test runs as root; panics with its output.
    fn pg(&self, program: &str, args: &[&str]) -> Output {
        let path = PathBuf::from(PG_BIN).join(program);
        let mut cmd = if as_root() {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(&path);
            cmd
        } else {
            Command::new(&path)
        };
        // Relative paths and the server's working directory: somewhere the postgres user may enter.
        let out = cmd.args(args).current_dir(self.dir.path()).output().expect("run a PostgreSQL program");
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let pid = self.dir.path().join("data/postmaster.pid");
        if pid.exists() {
            let mut cmd = if as_root() {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", "postgres", "--"]).arg(PathBuf::from(PG_BIN).join("pg_ctl"));
                cmd
            } else {
                Command::new(PathBuf::from(PG_BIN).join("pg_ctl"))
            };
            let _ = cmd.args(["-D", &self.data(), "-m", "immediate", "-w", "stop"]).output();
        }
    }
}

fn as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Sends a request and fails unless the answer arrives within [`ANSWER_BOUND`].
async fn answered(app: &TestApp, method: Method, uri: &str, body: Option<serde_json::Value>) -> TestResponse {
    let started = Instant::now();
    let headers: &[(&str, &str)] = if body.is_some() { &[("content-type", "application/json")] } else { &[] };
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let r = tokio::time::timeout(ANSWER_BOUND, app.request(method.clone(), uri, headers, body))
        .await
        .unwrap_or_else(|_| panic!("{method} {uri} hung for more than {ANSWER_BOUND:?}"));
    eprintln!("{method} {uri}: {} after {:?}", r.status, started.elapsed());
    r
}

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
#[cfg_attr(all(not(sitemapd_no_postgres), sitemapd_no_initdb), ignore = "needs PostgreSQL 15's initdb")]
async fn a_postgres_outage_answers_503_and_recovers_without_a_restart() {
    let pg = PrivatePostgres::init();
    pg.start();
    let vars = [
        ("DATABASE_URL", pg.url()),
        ("SITEMAPD_PUBLIC_URL", PUBLIC_URL.to_owned()),
        ("SITEMAPD_API_TOKENS", String::new()),
        ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "2s".to_owned()),
        ("SITEMAPD_PAGE_MAX_URLS", "10".to_owned()),
    ];
    let config = Config::load_from(None, |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).unwrap();
    let store = sitemapd::store::open(&options(&config)).await.expect("store opens on the private server");
    let app = TestApp::from_parts(store.clone(), config.clone(), sitemapd::app(AppState::new(store, &config)));

    let paths: Vec<String> = (0..25).map(|i| format!("before/{i}")).collect();
    app.put_paths(&paths.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let page_before = answered(&app, Method::GET, "/sitemap-2.xml", None).await;
    assert_eq!(page_before.status, StatusCode::OK);
    let etag_before = page_before.header("etag").unwrap().to_owned();

    pg.stop();
    let put = json!([{"loc": loc("during")}]);
    for (method, uri, body) in [
        (Method::GET, "/readyz", None),
        (Method::GET, "/sitemap.xml", None),
        (Method::GET, "/sitemap-1.xml", None),
        (Method::HEAD, "/sitemap-2.xml", None),
        (Method::GET, &*format!("/api/v1/urls?loc={}", crate::support::urlencode(&loc("before/3"))), None),
        (Method::GET, "/api/v1/urls?limit=5", None),
        (Method::PUT, "/api/v1/urls", Some(put.clone())),
        (Method::POST, "/api/v1/urls/delete", Some(json!([loc("before/1")]))),
    ] {
        let r = answered(&app, method.clone(), uri, body).await;
        assert_eq!(
            r.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{method} {uri} while the database is down: {}",
            r.text()
        );
        assert_eq!(r.header("retry-after"), Some("5"), "{method} {uri}");
        if method != Method::HEAD {
            assert_eq!(r.json()["error"], "unavailable", "{method} {uri}");
        }
    }
    let r = answered(&app, Method::GET, "/healthz", None).await;
    assert_eq!(r.status, StatusCode::OK, "liveness does not depend on the store");

    pg.start();
    // The service is not restarted: its pool must drop the dead connections and open new ones by itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = answered(&app, Method::GET, "/readyz", None).await;
        if r.status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "not ready 30 s after the database came back: {}", r.text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = answered(&app, Method::GET, "/sitemap-2.xml", None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.header("etag"), Some(&*etag_before), "the page is unchanged by the outage");
    assert_eq!(r.body, page_before.body);
    let r = answered(&app, Method::PUT, "/api/v1/urls", Some(put)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["created"], 1);
    let mut listed = Vec::new();
    let mut after = String::new();
    loop {
        let r = answered(&app, Method::GET, &format!("/api/v1/urls?limit=7{after}"), None).await;
        assert_eq!(r.status, StatusCode::OK);
        let body = r.json();
        listed.extend(body["items"].as_array().unwrap().iter().map(|i| i["loc"].as_str().unwrap().to_owned()));
        match body["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    let mut expected: Vec<String> = paths.iter().map(|p| loc(p)).collect();
    expected.push(loc("during"));
    assert_eq!(listed, expected, "every URL stored before the outage is intact, and the new one is added");
    let index = answered(&app, Method::GET, "/sitemap.xml", None).await;
    assert_eq!(index.status, StatusCode::OK);
    crate::contract::assert_consistent(&*app.store, 10, 52_428_800).await;
}

/// Runs one statement on the shared server as its administrator (`TEST_DATABASE_URL`).
async fn admin(sql: String) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&postgres_url()).await.expect("admin connection");
    sqlx::query(sqlx::AssertSqlSafe(sql.clone())).execute(&mut conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    conn.close().await.ok();
}

/// Reads and writes answer 503 `unavailable` with `Retry-After`, `/readyz` 503, `/healthz` 200.
async fn assert_unavailable(app: &TestApp, why: &str) {
    for (method, uri, body) in [
        (Method::GET, "/readyz", None),
        (Method::GET, "/sitemap.xml", None),
        (Method::GET, "/sitemap-1.xml", None),
        (Method::GET, &*format!("/api/v1/urls?loc={}", crate::support::urlencode(&loc("a"))), None),
        (Method::GET, "/api/v1/urls?limit=5", None),
        (Method::PUT, "/api/v1/urls", Some(json!([{"loc": loc("during")}]))),
        (Method::POST, "/api/v1/urls/delete", Some(json!([loc("a")]))),
    ] {
        let r = answered(app, method.clone(), uri, body).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{method} {uri} ({why}): {}", r.text());
        assert_eq!(r.header("retry-after"), Some("5"), "{method} {uri} ({why})");
        if uri != "/readyz" {
            assert_eq!(r.json()["error"], "unavailable", "{method} {uri} ({why})");
        }
    }
    let r = answered(app, Method::GET, "/healthz", None).await;
    assert_eq!(r.status, StatusCode::OK, "liveness does not depend on the store ({why})");
}

/// Waits (bounded) until `/readyz` answers 200 again, then checks that a write and a page work.
async fn assert_recovers(app: &TestApp, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = answered(app, Method::GET, "/readyz", None).await;
        if r.status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "not ready 30 s after {why}: {}", r.text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = answered(app, Method::PUT, "/api/v1/urls", Some(json!([{"loc": loc("after")}]))).await;
    assert_eq!(r.status, StatusCode::OK, "after {why}: {}", r.text());
    let r = answered(app, Method::GET, "/sitemap-1.xml", None).await;
    assert_eq!(r.status, StatusCode::OK, "after {why}: {}", r.text());
    assert!(r.text().contains(&loc("after")));
}

/// The state TTL is 0 so that every request reaches the store: nothing is answered from memory.
const NO_STATE_CACHE: [(&str, &str); 2] = [("SITEMAPD_STATE_TTL", "0s"), ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "2s")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn a_database_dropped_under_the_service_answers_503_and_recovers_when_recreated() {
    let app = TestApp::spawn(Backend::Postgres, &NO_STATE_CACHE).await;
    app.put_paths(&["a", "b"]).await;
    let name = url::Url::parse(&app.db.url).unwrap().path().trim_start_matches('/').to_owned();

    admin(format!("DROP DATABASE {name} WITH (FORCE)")).await;
    assert_unavailable(&app, "database dropped").await;

    admin(format!("CREATE DATABASE {name}")).await;
    // The server answers again, but the database is empty: not ready (a bare `SELECT 1` would say it is).
    let r = answered(&app, Method::GET, "/readyz", None).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "a database without the schema is not ready: {}", r.text());
    // Migrations applied from outside, as `sitemapd migrate` would; the running service is not restarted.
    app.another_process().await;
    assert_recovers(&app, "the database was recreated").await;
}

/// A login role of its own, owning a database of its own; both dropped afterwards (on panic too).
struct OwnRole {
    name: String,
}

impl Drop for OwnRole {
    fn drop(&mut self) {
        let name = self.name.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                admin(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                admin(format!("DROP ROLE IF EXISTS {name}")).await;
            });
        })
        .join()
        .ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn a_role_whose_login_is_revoked_answers_503_and_recovers_when_restored() {
    let admin_url = postgres_url();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let role = OwnRole { name: format!("sitemapd_role_{}_{nanos}", std::process::id()) };
    let name = &role.name;
    admin(format!("CREATE ROLE {name} LOGIN")).await;
    admin(format!("CREATE DATABASE {name} OWNER {name}")).await;
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_username(name).unwrap();
    url.set_path(name);
    let vars = [
        ("DATABASE_URL", url.to_string()),
        ("SITEMAPD_PUBLIC_URL", PUBLIC_URL.to_owned()),
        ("SITEMAPD_API_TOKENS", String::new()),
        ("SITEMAPD_STATE_TTL", "0s".to_owned()),
        ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "2s".to_owned()),
    ];
    let config = Config::load_from(None, |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).unwrap();
    let store = sitemapd::store::open(&options(&config)).await.expect("store opens as the new role");
    let app = TestApp::from_parts(store.clone(), config.clone(), sitemapd::app(AppState::new(store, &config)));
    app.put_paths(&["a"]).await;

    // NOLOGIN refuses new sessions only: end the role's open ones, as a server restart or a failover would.
    admin(format!("ALTER ROLE {name} NOLOGIN")).await;
    admin(format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{name}'")).await;
    assert_unavailable(&app, "login revoked").await;

    admin(format!("ALTER ROLE {name} LOGIN")).await;
    assert_recovers(&app, "the login was restored").await;
    drop(app);
}

/// SQLite: the database's directory deleted, or its file replaced, under a running service. The open connections
/// would go on writing into the unlinked file, and every write acknowledged then would be gone at the next start:
/// writes and `/readyz` answer 503 instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqlite_file_deleted_or_replaced_under_the_service_refuses_writes_with_503() {
    for replace in [false, true] {
        let app = TestApp::spawn(Backend::Sqlite, &NO_STATE_CACHE).await;
        app.put_paths(&["a"]).await;
        let path = PathBuf::from(app.db.url.strip_prefix("sqlite://").unwrap());
        if replace {
            // As a restore copied over the file of a running process would.
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, b"").unwrap();
        } else {
            std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        }
        for (method, uri, body) in [
            (Method::GET, "/readyz", None),
            (Method::PUT, "/api/v1/urls", Some(json!([{"loc": loc("lost")}]))),
            (Method::POST, "/api/v1/urls/delete", Some(json!([loc("a")]))),
        ] {
            let r = answered(&app, method.clone(), uri, body).await;
            assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{method} {uri} (replaced: {replace}): {}", r.text());
            assert_eq!(r.header("retry-after"), Some("5"));
        }
    }
}

/// Crawler telemetry across an outage: what was recorded when a flush fails is given up (counted), the answers never
/// wait for it, and the next interval after the database is back is written whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
#[cfg_attr(all(not(sitemapd_no_postgres), sitemapd_no_initdb), ignore = "needs PostgreSQL 15's initdb")]
async fn a_telemetry_flush_in_an_outage_loses_that_interval_only() {
    let pg = PrivatePostgres::init();
    pg.start();
    let vars = [
        ("DATABASE_URL", pg.url()),
        ("SITEMAPD_PUBLIC_URL", PUBLIC_URL.to_owned()),
        ("SITEMAPD_API_TOKENS", String::new()),
        ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "2s".to_owned()),
        ("SITEMAPD_TEST_TUNING", "crawler_flush=5m".to_owned()),
    ];
    let config = Config::load_from(None, |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).unwrap();
    let store = sitemapd::store::open(&options(&config)).await.expect("store opens on the private server");
    let state = AppState::new(store.clone(), &config);
    let app = TestApp::from_parts(store.clone(), config.clone(), sitemapd::app(state.clone()));
    let recorder = state.crawl_recorder().expect("telemetry is on by default");
    app.put_paths(&["a"]).await;
    let as_googlebot = || {
        axum::http::Request::get("/sitemap-1.xml")
            .header("user-agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(app.send(as_googlebot()).await.status, StatusCode::OK);

    pg.stop();
    let started = Instant::now();
    recorder.flush().await;
    assert!(started.elapsed() < ANSWER_BOUND, "a failed flush is bounded");
    let metrics = answered(&app, Method::GET, "/metrics", None).await.text();
    assert!(
        metrics.lines().any(|l| l.starts_with("sitemapd_crawler_events_dropped_total{reason=\"flush_failed\"}")),
        "{metrics}"
    );

    pg.start();
    let deadline = Instant::now() + Duration::from_secs(30);
    while answered(&app, Method::GET, "/readyz", None).await.status != StatusCode::OK {
        assert!(Instant::now() < deadline, "not ready 30 s after the database came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(app.send(as_googlebot()).await.status, StatusCode::OK);
    recorder.flush().await;
    let rows = store.crawler_fetches(1).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    // In-process there is no peer address, so a claim. The fetch before the outage was given up with its flush.
    assert_eq!((rows[0].trust.as_str(), rows[0].fetches), ("claimed", 1), "{rows:#?}");
}
