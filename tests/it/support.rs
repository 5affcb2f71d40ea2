//! Test harness: a fresh database per test (an SQLite file, or a Postgres database that is dropped afterwards),
//! the real router driven by `oneshot`, and helpers that read like the behaviour under test. A test never skips
//! itself at run time (a missing prerequisite is an `ignore` decided by `build.rs`), spawns every process under a
//! guard that kills it on drop ([`child`]), and waits for conditions, not for fixed times ([`wait`]).

mod child;
mod feeds;
pub(crate) mod hub;
mod s3;
mod static_host;
mod wait;

pub(crate) use child::{KillOnDrop, SpawnGuarded};
pub(crate) use feeds::{Reader, atom_problems, identity, read_feed, validate_atom};
pub(crate) use s3::{Moto, S3_SECRET, free_port};
pub(crate) use static_host::{StaticNginx, nginx_program};
pub(crate) use wait::{
    eventually, eventually_blocking, listening, server_closed, server_read_all, until_the_next_second,
};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;
use sitemapd::config::Config;
use sitemapd::sitemap::directory::Clock;
use sitemapd::store::{Store, StoreOptions};
use sitemapd::{AppState, app};
use sqlx::Connection;
use tower::ServiceExt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
    /// Postgres through a transaction-mode PgBouncer (`TEST_DATABASE_POOLER_URL`), with
    /// `SITEMAPD_DATABASE_POOLER=transaction`: the test's database is made and dropped on `TEST_DATABASE_URL`,
    /// sitemapd reaches it through the pooler.
    Pooler,
}

impl Backend {
    /// Whether the database is Postgres (directly or through the pooler).
    pub(crate) fn is_postgres(self) -> bool {
        matches!(self, Self::Postgres | Self::Pooler)
    }
}

/// Generates `pooler::NAME` tests from `async fn NAME(Backend)` functions in scope, as [`both_backends!`] does for
/// SQLite and Postgres: the test through a transaction-mode PgBouncer (`Backend::Pooler`). They show as ignored
/// when `TEST_DATABASE_POOLER_URL` (or `TEST_DATABASE_URL`) was unset at build time (see `build.rs`).
#[macro_export]
macro_rules! through_pooler {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        mod pooler {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(any(sitemapd_no_postgres, sitemapd_no_pooler),
                ignore = "needs Postgres through PgBouncer: TEST_DATABASE_URL and TEST_DATABASE_POOLER_URL")]
            $(#[cfg_attr(not(any(sitemapd_no_postgres, sitemapd_no_pooler)), $attr)])*
            async fn $name() { super::$name($crate::support::Backend::Pooler).await })*
        }
    };
}

/// Generates `sqlite::NAME` and `postgres::NAME` tests from `async fn NAME(Backend)` functions in scope. The
/// Postgres ones show as ignored when `TEST_DATABASE_URL` was unset at build time (see `build.rs`). Attributes
/// before a name go on both of its tests, e.g. `#[cfg_attr(sitemapd_no_xmllint, ignore = "…")] NAME` for one that
/// needs more (on the Postgres one, only when Postgres is there: a test takes one `ignore`).
#[macro_export]
macro_rules! both_backends {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn $name() { super::$name($crate::support::Backend::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
            $(#[cfg_attr(not(sitemapd_no_postgres), $attr)])*
            async fn $name() { super::$name($crate::support::Backend::Postgres).await })*
        }
    };
}

/// The Postgres server for tests, from `TEST_DATABASE_URL`. A test that needs it is ignored when the variable was
/// unset at build time (`build.rs`); one run anyway (`--include-ignored`) fails here.
pub(crate) fn postgres_url() -> String {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "TEST_DATABASE_URL is not set: this test needs Postgres, e.g. \
             TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test"
        ),
    }
}

/// The transaction-mode PgBouncer for tests, from `TEST_DATABASE_POOLER_URL` (`.ci/run` starts one): it must
/// route every database name to the `TEST_DATABASE_URL` server (`* = host=…` in `[databases]`).
pub(crate) fn pooler_url() -> String {
    match std::env::var("TEST_DATABASE_POOLER_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "TEST_DATABASE_POOLER_URL is not set: this test needs PgBouncer in transaction mode in front of \
             TEST_DATABASE_URL's server, e.g. TEST_DATABASE_POOLER_URL=postgres://postgres@127.0.0.1:6432/test"
        ),
    }
}

/// Writes a note straight to the process's stderr, where `cargo test` shows it. libtest captures only what the
/// print macros (`eprintln!`) write in a test, and shows it for failed tests alone; a write to the `Stderr` handle
/// bypasses that capture, so the note is seen in every run, among the test results.
pub(crate) fn note(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "\nnote: {text}\n");
}

/// A database of its own for one test.
pub(crate) struct TestDb {
    pub url: String,
    /// The same database reached directly (for [`Backend::Pooler`], not through the pooler): for the test's own
    /// SQL, on connections with sqlx's defaults, which PgBouncer refuses (`extra_float_digits`).
    pub direct_url: String,
    _dir: Option<tempfile::TempDir>,
    drop_pg: Option<(String, String)>,
}

impl TestDb {
    /// A missing Postgres fails the test here: a test that needs it is ignored at build time instead (`build.rs`),
    /// never skipped at run time.
    pub(crate) async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                let url = format!("sqlite://{}", dir.path().join("test.db").display());
                Self { direct_url: url.clone(), url, _dir: Some(dir), drop_pg: None }
            }
            Backend::Postgres | Backend::Pooler => {
                let admin = postgres_url();
                static COUNTER: AtomicU32 = AtomicU32::new(0);
                let name = format!(
                    "sitemapd_test_{}_{}_{}",
                    std::process::id(),
                    COUNTER.fetch_add(1, Ordering::Relaxed),
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
                );
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .unwrap_or_else(|e| panic!("TEST_DATABASE_URL is set but Postgres is unreachable: {e}"));
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
                conn.close().await.ok();
                let on = |server: &str| {
                    let mut url = url::Url::parse(server).unwrap();
                    url.set_path(&name);
                    String::from(url)
                };
                let direct_url = on(&admin);
                let url = if backend == Backend::Pooler { on(&pooler_url()) } else { direct_url.clone() };
                Self { url, direct_url, _dir: None, drop_pg: Some((admin, name)) }
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Runs on panic too. A thread with its own runtime, because Drop cannot await.
        if let Some((admin, name)) = self.drop_pg.take() {
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async {
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                        let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                        let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                    }
                });
            })
            .join()
            .ok();
        }
    }
}

pub(crate) const PUBLIC_URL: &str = "https://www.example.com";

/// The service as a router over a fresh database, configured like production but for `vars`.
pub(crate) struct TestApp {
    pub router: Router,
    /// The state behind `router` (`None` for a router the test built itself).
    pub state: Option<AppState>,
    pub store: Arc<dyn Store>,
    pub config: Config,
    vars: HashMap<String, String>,
    pub db: Arc<TestDb>,
}

pub(crate) struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// How many data frames the body arrived in.
    pub frames: usize,
}

impl TestResponse {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).expect("UTF-8 body")
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

pub(crate) fn gunzip(bytes: &[u8]) -> String {
    use std::io::Read;
    let mut out = String::new();
    flate2::read::GzDecoder::new(bytes).read_to_string(&mut out).expect("valid gzip");
    out
}

impl TestApp {
    /// Runs `sql` (one or more statements) on the test's database, outside sitemapd.
    pub(crate) async fn exec_sql(&self, sql: &str) {
        let url = &self.db.direct_url;
        if url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
        } else {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
        }
    }

    /// The service over a fresh database of `backend`, configured like production but for `vars`. Fails (never
    /// skips) when the backend is missing, as [`TestDb::new`].
    pub(crate) async fn spawn(backend: Backend, vars: &[(&str, &str)]) -> Self {
        let db = Arc::new(TestDb::new(backend).await);
        let mut all: HashMap<String, String> = [("SITEMAPD_PUBLIC_URL", PUBLIC_URL), ("SITEMAPD_API_TOKENS", "")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        all.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        all.insert("DATABASE_URL".into(), db.url.clone());
        if backend == Backend::Pooler {
            all.insert("SITEMAPD_DATABASE_POOLER".into(), "transaction".into());
        }
        Self::open(db, all).await
    }

    async fn open(db: Arc<TestDb>, vars: HashMap<String, String>) -> Self {
        Self::open_with_clock(db, vars, sitemapd::sitemap::directory::system_clock()).await
    }

    async fn open_with_clock(db: Arc<TestDb>, vars: HashMap<String, String>, clock: Clock) -> Self {
        let config = Config::load_from(None, |k| vars.get(k).cloned()).expect("valid test configuration");
        let store = sitemapd::store::open(&options(&config)).await.expect("store opens");
        let state = AppState::with_clock(store.clone(), &config, clock);
        let router = app(state.clone());
        Self { router, state: Some(state), store, config, vars, db }
    }

    /// Like [`TestApp::spawn`], with `clock` as the time of day (the news window is measured from it).
    pub(crate) async fn spawn_with_clock(backend: Backend, vars: &[(&str, &str)], clock: Clock) -> Self {
        let app = Self::spawn(backend, vars).await;
        Self::open_with_clock(app.db.clone(), app.vars.clone(), clock).await
    }

    /// Another process on the same database with its own `clock` (a replica whose clock differs).
    pub(crate) async fn another_process_with_clock(&self, clock: Clock) -> Self {
        Self::open_with_clock(self.db.clone(), self.vars.clone(), clock).await
    }

    /// A router over a store built by the test itself (no database of its own).
    pub(crate) fn from_parts(store: Arc<dyn Store>, config: Config, router: Router) -> Self {
        let url = config.database.url.clone();
        let db = Arc::new(TestDb { direct_url: url.clone(), url, _dir: None, drop_pg: None });
        Self { router, state: None, store, config, vars: HashMap::new(), db }
    }

    /// Another process on the same database: its own pool and state, as a replica or a restart would have.
    pub(crate) async fn another_process(&self) -> Self {
        Self::open(self.db.clone(), self.vars.clone()).await
    }

    /// This process's configuration with `vars` on top (for a process that may refuse to start).
    pub(crate) fn config_with(&self, vars: &[(&str, &str)]) -> Config {
        let mut all = self.vars.clone();
        all.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        Config::load_from(None, |k| all.get(k).cloned()).expect("valid test configuration")
    }

    /// Another process on the same database, configured with `vars` on top of this one's.
    pub(crate) async fn another_process_with(&self, vars: &[(&str, &str)]) -> Self {
        let mut all = self.vars.clone();
        all.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        Self::open(self.db.clone(), all).await
    }

    /// Sends `request` as a client would: with a `Host` header (`localhost`) unless it has one.
    pub(crate) async fn send(&self, mut request: Request<Body>) -> TestResponse {
        let headers = request.headers_mut();
        if !headers.contains_key(axum::http::header::HOST) {
            headers.insert(axum::http::header::HOST, axum::http::HeaderValue::from_static("localhost"));
        }
        self.send_exact(request).await
    }

    /// Sends `request` to the router exactly as it is.
    pub(crate) async fn send_exact(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.expect("infallible");
        let (parts, mut body) = response.into_parts();
        let mut bytes = Vec::new();
        let mut frames = 0;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.expect("body streams without error").into_data() {
                frames += 1;
                bytes.extend_from_slice(&data);
            }
        }
        TestResponse { status: parts.status, headers: parts.headers, body: bytes.into(), frames }
    }

    pub(crate) async fn request(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Body,
    ) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        self.send(builder.body(body).unwrap()).await
    }

    pub(crate) async fn get(&self, uri: &str, headers: &[(&str, &str)]) -> TestResponse {
        self.request(Method::GET, uri, headers, Body::empty()).await
    }

    pub(crate) async fn head(&self, uri: &str, headers: &[(&str, &str)]) -> TestResponse {
        self.request(Method::HEAD, uri, headers, Body::empty()).await
    }

    pub(crate) async fn put_json(&self, body: &Value) -> TestResponse {
        let headers = [("content-type", "application/json")];
        self.request(Method::PUT, "/api/v1/urls", &headers, Body::from(body.to_string())).await
    }

    pub(crate) async fn put_ndjson(&self, body: &str) -> TestResponse {
        let headers = [("content-type", "application/x-ndjson")];
        self.request(Method::PUT, "/api/v1/urls", &headers, Body::from(body.to_owned())).await
    }

    pub(crate) async fn delete_loc(&self, loc: &str) -> TestResponse {
        let uri = format!("/api/v1/urls?loc={}", urlencode(loc));
        self.request(Method::DELETE, &uri, &[], Body::empty()).await
    }

    pub(crate) async fn find(&self, loc: &str) -> TestResponse {
        self.get(&format!("/api/v1/urls?loc={}", urlencode(loc)), &[]).await
    }

    /// Upserts `paths` under the public URL and asserts success.
    pub(crate) async fn put_paths(&self, paths: &[&str]) -> Value {
        let entries: Vec<Value> =
            paths.iter().map(|p| serde_json::json!({"loc": format!("{PUBLIC_URL}/{p}")})).collect();
        let r = self.put_json(&Value::Array(entries)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        r.json()
    }

    /// The paths (relative to this service) of the pages the index lists.
    pub(crate) async fn index_paths(&self) -> Vec<String> {
        let r = self.get("/sitemap.xml", &[]).await;
        if r.status == StatusCode::NOT_FOUND {
            return Vec::new();
        }
        assert_eq!(r.status, StatusCode::OK);
        let prefix = self.config.sitemaps.public_url.as_str().trim_end_matches('/').to_owned();
        xml_texts(&r.text(), "loc")
            .into_iter()
            .map(|loc| loc.strip_prefix(&prefix).expect("under public URL").to_owned())
            .collect()
    }
}

pub(crate) fn options(config: &Config) -> StoreOptions {
    config.store_options()
}

pub(crate) fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The unescaped text of every `<name>` element, in document order, read with a real XML parser.
pub(crate) fn xml_texts(xml: &str, name: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = Vec::new();
    let mut inside = false;
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) if e.local_name().as_ref() == name => {
                inside = true;
                out.push(String::new());
            }
            Event::End(e) if e.local_name().as_ref() == name => inside = false,
            Event::Text(t) if inside => out.last_mut().unwrap().push_str(&t),
            Event::GeneralRef(r) if inside => {
                let resolved = match &*r {
                    "amp" => "&",
                    "apos" => "'",
                    "quot" => "\"",
                    "lt" => "<",
                    "gt" => ">",
                    other => panic!("unexpected entity {other}"),
                };
                out.last_mut().unwrap().push_str(resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

/// The schema check: `tests/xsd/validate.sh` (the official schemas, vendored), or `SITEMAPD_XSD_VALIDATE`. It needs
/// xmllint: a test that validates carries `#[cfg_attr(sitemapd_no_xmllint, ignore = "…")]` (see `build.rs`).
pub(crate) fn xsd_validator() -> PathBuf {
    let path = std::env::var_os("SITEMAPD_XSD_VALIDATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/xsd/validate.sh"));
    assert!(path.is_file(), "the XSD validator {} is missing", path.display());
    path
}

/// Writes each body to a file and validates them all against the official schemas; panics with the output.
pub(crate) fn validate_xsd(bodies: &[(&str, &[u8])]) {
    let validator = xsd_validator();
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = bodies
        .iter()
        .enumerate()
        .map(|(i, (name, body))| {
            let path = dir.path().join(format!("{i}-{name}"));
            std::fs::write(&path, body).unwrap();
            path
        })
        .collect();
    let out = std::process::Command::new("bash").arg(&validator).args(&files).output().expect("run validate.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "XSD validation failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().filter(|l| l.starts_with("OK")).count(), files.len(), "{stdout}");
}
