//! Upgrades are invisible to crawlers: this version, opened on a database written by the previous release
//! (620b336, `tests/fixtures/upgrade/`, rebuilt by its `make.sh`), serves every page whose content did not change
//! with the very bytes, ETag, Last-Modified and Content-Length that release served. The pages that hold an entry
//! the previous release stored wrongly (a `-0.0` priority; a loc with `|`, `[`, `]` or `^`, which RFC 3986 forbids
//! in a path) are repaired once when the database is opened: they change, and only they.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sitemapd::config::Config;
use sitemapd::{AppState, app};
use sqlx::Connection;

use crate::support::{self, Backend, TestApp, TestDb, TestResponse, gunzip, options, validate_xsd, xml_texts};

/// `upgrade`: written by the previous release. `pinned`: written by this release before a refactoring.
fn fixture_dir(set: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(set)
}

/// What the previous release answered, as `make.sh` recorded it.
struct Recorded {
    json: Value,
}

impl Recorded {
    fn load(set: &str, backend: Backend) -> Self {
        let name = match backend {
            Backend::Sqlite => "answers-sqlite.json",
            Backend::Postgres | Backend::Pooler => "answers-postgres.json",
        };
        let text = std::fs::read_to_string(fixture_dir(set).join(name)).expect("fixture answers");
        Self { json: serde_json::from_str(&text).expect("answers are JSON") }
    }

    fn pages(&self) -> Vec<i64> {
        let mut pages: Vec<i64> =
            self.json["answers"]["pages"].as_object().unwrap().keys().map(|k| k.parse().unwrap()).collect();
        pages.sort_unstable();
        pages
    }

    fn answer(&self, page: i64, representation: &str) -> &Value {
        &self.json["answers"]["pages"][page.to_string()][representation]
    }

    fn list(&self, key: &str) -> Vec<Value> {
        self.json["affected"][key].as_array().unwrap().clone()
    }

    fn negative_zero_pages(&self) -> Vec<i64> {
        self.list("negative_zero").iter().map(|v| v.as_i64().unwrap()).collect()
    }

    fn rfc3986_pages(&self) -> Vec<i64> {
        self.list("rfc3986").iter().map(|v| v.as_i64().unwrap()).collect()
    }

    /// The locs as the previous release stored them, with characters RFC 3986 forbids.
    fn rfc3986_locs(&self) -> Vec<String> {
        self.list("rfc3986_locs").iter().map(|v| v.as_str().unwrap().to_owned()).collect()
    }

    fn affected(&self) -> Vec<i64> {
        let mut pages = self.negative_zero_pages();
        pages.extend(self.rfc3986_pages());
        pages.sort_unstable();
        pages.dedup();
        pages
    }
}

/// Request headers.
type Headers = &'static [(&'static str, &'static str)];

/// The three ways a crawler fetches a page: the recorded name, the path's suffix, the request headers.
const REPRESENTATIONS: [(&str, &str, Headers); 3] =
    [("identity", ".xml", &[]), ("gzip", ".xml", &[("accept-encoding", "gzip")]), ("gz_file", ".xml.gz", &[])];

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn content_length(r: &TestResponse) -> Option<u64> {
    r.header("content-length").map(|v| v.parse().expect("numeric Content-Length"))
}

/// A page's row as stored: (version, modified_us).
type PageRows = BTreeMap<i64, (i64, i64)>;

async fn page_rows(url: &str) -> PageRows {
    let rows: Vec<(i64, i64, i64)> = if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        let rows = sqlx::query_as("SELECT id, version, modified_us FROM pages").fetch_all(&mut conn).await.unwrap();
        conn.close().await.ok();
        rows
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let rows = sqlx::query_as("SELECT id, version, modified_us FROM pages").fetch_all(&mut conn).await.unwrap();
        conn.close().await.ok();
        rows
    };
    rows.into_iter().map(|(id, version, modified_us)| (id, (version, modified_us))).collect()
}

/// A copy of the fixture, not yet opened by this version: its URL and what keeps it alive (the Postgres database
/// or the SQLite file's directory).
struct Fixture {
    url: String,
    _db: Option<TestDb>,
    _dir: Option<tempfile::TempDir>,
}

async fn fixture_db(set: &str, backend: Backend) -> Fixture {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let path: &Path = &dir.path().join("sitemapd.db");
            std::fs::copy(fixture_dir(set).join("sqlite.db"), path).expect("copy sqlite.db");
            let url = format!("sqlite://{}", path.display());
            Fixture { url, _db: None, _dir: Some(dir) }
        }
        Backend::Postgres | Backend::Pooler => {
            let db = TestDb::new(Backend::Postgres).await;
            // Its own connection: the dump clears search_path for the session it runs in.
            let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let dump = std::fs::read_to_string(fixture_dir(set).join("postgres.sql")).expect("postgres.sql");
            sqlx::raw_sql(sqlx::AssertSqlSafe(dump))
                .execute(&mut conn)
                .await
                .expect("postgres.sql loads into an empty database");
            conn.close().await.ok();
            let url = db.url.clone();
            Fixture { url, _db: Some(db), _dir: None }
        }
    }
}

async fn open(url: &str) -> TestApp {
    open_with(url, &[]).await
}

/// [`open`] with `more` settings on top of the fixture's; the app keeps its state (the crawl recorder's).
async fn open_with(url: &str, more: &[(&str, &str)]) -> TestApp {
    open_with_clock(url, more, sitemapd::sitemap::directory::system_clock()).await
}

/// [`open_with`], the time of day read from `clock` (the news and removed-URLs windows are measured from it).
async fn open_with_clock(url: &str, more: &[(&str, &str)], clock: sitemapd::sitemap::directory::Clock) -> TestApp {
    let mut vars: BTreeMap<&str, String> = [
        ("DATABASE_URL", url.to_owned()),
        ("SITEMAPD_PUBLIC_URL", support::PUBLIC_URL.to_owned()),
        ("SITEMAPD_API_TOKENS", String::new()),
        ("SITEMAPD_PAGE_MAX_URLS", "5".to_owned()),
    ]
    .into();
    vars.extend(more.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let config = Config::load_from(None, |k| vars.get(k).cloned()).expect("valid configuration");
    let store = sitemapd::store::open(&options(&config)).await.expect("this version opens the old database");
    let state = AppState::with_clock(store.clone(), &config, clock);
    let router = app(state.clone());
    let mut app = TestApp::from_parts(store, config, router);
    app.state = Some(state);
    app
}

async fn upgrade_serves_unchanged_pages_identically(backend: Backend) {
    let fixture = fixture_db("upgrade", backend).await;
    let url = fixture.url.clone();
    let recorded = Recorded::load("upgrade", backend);
    let before = page_rows(&url).await;
    let app = open(&url).await;
    let after = page_rows(&url).await;
    let affected = recorded.affected();
    assert_eq!(affected, vec![3, 4, 5], "the fixture's affected pages");

    for page in recorded.pages() {
        let is_affected = affected.contains(&page);
        for (name, suffix, headers) in REPRESENTATIONS {
            let r = app.get(&format!("/sitemap-{page}{suffix}"), headers).await;
            let old = recorded.answer(page, name);
            let what = format!("{backend:?} page {page} {name}");
            if !is_affected {
                assert_eq!(r.status.as_u16(), old["status"].as_u64().unwrap() as u16, "{what}: status");
                assert_eq!(r.header("etag"), old["etag"].as_str(), "{what}: ETag");
                assert_eq!(r.header("last-modified"), old["last_modified"].as_str(), "{what}: Last-Modified");
                assert_eq!(content_length(&r), old["content_length"].as_u64(), "{what}: Content-Length");
                assert_eq!(r.body.len() as u64, old["length"].as_u64().unwrap(), "{what}: body length");
                assert_eq!(sha256_hex(&r.body), old["sha256"].as_str().unwrap(), "{what}: body bytes");
                continue;
            }
            assert_eq!(r.status.as_u16(), 200, "{what}: status");
            assert_ne!(r.header("etag"), old["etag"].as_str(), "{what}: a changed page needs a new ETag");
            let cl = content_length(&r).unwrap_or_else(|| panic!("{what}: Content-Length"));
            assert_eq!(r.body.len() as u64, cl, "{what}: the body is as long as Content-Length says");
            let modified = httpdate::parse_http_date(r.header("last-modified").expect("Last-Modified")).unwrap();
            let old_modified = httpdate::parse_http_date(old["last_modified"].as_str().unwrap()).unwrap();
            assert!(modified >= old_modified, "{what}: Last-Modified went back");
            let xml = if name == "identity" { r.text() } else { gunzip(&r.body) };
            validate_xsd(&[(&format!("page-{page}-{name}.xml"), xml.as_bytes())]);
            let locs = xml_texts(&xml, "loc");
            for old_loc in recorded.rfc3986_locs() {
                assert!(!locs.contains(&old_loc), "{what}: {old_loc} is still served unencoded");
            }
            assert!(!locs.iter().any(|l| l.contains(['|', '^', '[', ']', '{', '}', '\\', '`'])), "{what}: {locs:?}");
            if recorded.rfc3986_pages().contains(&page) {
                let encoded: Vec<String> = recorded
                    .rfc3986_locs()
                    .iter()
                    .map(|l| l.replace('|', "%7C").replace('^', "%5E").replace('[', "%5B").replace(']', "%5D"))
                    .collect();
                assert!(encoded.iter().any(|e| locs.contains(e)), "{what}: none of {encoded:?} in {locs:?}");
            }
            if recorded.negative_zero_pages().contains(&page) {
                assert!(!xml.contains("<priority>-0.0</priority>"), "{what}: -0.0 rendered");
                let neg_zero = format!("<loc>{}/neg-zero</loc>", support::PUBLIC_URL);
                let element = xml.split("<url>").find(|u| u.contains(&neg_zero)).expect("the -0.0 entry is served");
                assert!(element.contains("<priority>0.0</priority>"), "{what}: {element}");
            }
        }
    }

    // The rows: unaffected pages untouched, affected ones one version later and modified after the old time.
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>(), "{backend:?}: the page set");
    for (id, (version, modified_us)) in &before {
        let (new_version, new_modified_us) = after[id];
        if affected.contains(id) {
            assert_eq!(new_version, version + 1, "{backend:?} page {id}: version");
            assert!(new_modified_us > *modified_us, "{backend:?} page {id}: modified_us");
        } else {
            assert_eq!((new_version, new_modified_us), (*version, *modified_us), "{backend:?} page {id}: row");
        }
    }

    // The index lists the same pages; its ETag may change (its <lastmod> format did), it stays valid.
    let index = app.get("/sitemap.xml", &[]).await;
    assert_eq!(index.status.as_u16(), 200);
    let listed = app.index_paths().await;
    let expected: Vec<String> = recorded.pages().iter().map(|n| format!("/sitemap-{n}.xml")).collect();
    assert_eq!(listed, expected, "{backend:?}: the index lists the same pages");
    let gz = app.get("/sitemap.xml", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.status.as_u16(), 200);
    assert_eq!(gunzip(&gz.body), index.text(), "{backend:?}: the gzip index is the identity one");
    validate_xsd(&[("index.xml", index.text().as_bytes())]);
    // Each page's <lastmod> is its row's modified_us, to the precision the index shows (at least milliseconds).
    for (path, lastmod) in listed.iter().zip(xml_texts(&index.text(), "lastmod")) {
        let id: i64 = path.trim_start_matches("/sitemap-").trim_end_matches(".xml").parse().unwrap();
        let at = time::OffsetDateTime::parse(&lastmod, &time::format_description::well_known::Rfc3339).unwrap();
        let lastmod_us = i64::try_from(at.unix_timestamp_nanos() / 1000).unwrap();
        let (_, modified_us) = after[&id];
        assert!((lastmod_us - modified_us).abs() < 1000, "{backend:?} page {id}: <lastmod>{lastmod} vs {modified_us}");
    }
}

/// The refactoring pin: a database written by this release (`tests/fixtures/pinned/`, made by `make.sh … current`
/// before the code was reshaped) is served, by the code under test, exactly as that release served it: the index
/// and every page in its three representations with the same status, ETag, Last-Modified, Content-Length and
/// bytes; and opening it changes no page's row. A refactoring that changes a byte or a validator fails here.
async fn pinned_answers_stay_byte_for_byte(backend: Backend) {
    answers_stay_byte_for_byte("pinned", backend).await;
}

/// Several sites (migration 0004): a database written by the release before it (4799346, with extensions on page
/// 6: images, a video, alternates and news; `tests/fixtures/v0003/`, made by `make.sh … current-ext`) is served
/// byte for byte as that release served it, its URLs all in the `default` site; the records keep every field, and
/// SQLite's rebuilt `urls` keeps its AUTOINCREMENT counter (a deleted id is never reused).
async fn the_release_before_sites_is_served_byte_for_byte(backend: Backend) {
    // The fixture is what that release wrote: migrations 1 to 3 applied, no more.
    let fixture = fixture_db("v0003", backend).await;
    let applied = latest_migration(&fixture.url).await;
    assert_eq!(applied, 3, "tests/fixtures/v0003 must be written by the release before migration 0004");
    if backend == Backend::Sqlite {
        // As if the records with ids 31 to 40 had been stored and deleted: the rebuilt table must not reuse them.
        let mut conn = sqlx::SqliteConnection::connect(&fixture.url).await.unwrap();
        sqlx::query("UPDATE sqlite_sequence SET seq = 40 WHERE name = 'urls'").execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }
    let (app, _fixture) = compare_answers(fixture, "v0003", backend).await;
    let record = app.find("https://www.example.com/p/29").await.json();
    assert_eq!(record["site"], "default");
    assert_eq!(record["alternates"].as_array().map(Vec::len), Some(2), "{record}");
    assert_eq!(record["news"]["title"], "Old & gone", "{record}");
    assert_eq!(app.find("https://www.example.com/p/26").await.json()["images"].as_array().map(Vec::len), Some(2));
    assert_eq!(app.find("https://www.example.com/p/27").await.status.as_u16(), 404, "deleted before the upgrade");
    app.put_paths(&["after-upgrade"]).await;
    let listed = app.store.list_after(None, 0, 100).await.unwrap();
    let ids: Vec<i64> = listed.iter().map(|u| u.url.id).collect();
    let next = if backend == Backend::Sqlite { 41 } else { 31 };
    assert_eq!(ids.last(), Some(&next), "no id is used twice (SQLite: the counter was at 40): {ids:?}");
    assert!(listed.iter().all(|u| u.site == 1));
}

/// The change counter and the dropped foreign key (migrations 0006 and 0007): a database written by the release
/// before them (736f644, migrations 1 to 5, extensions on page 6; `tests/fixtures/v0005/`, made by
/// `make.sh … current-ext`) is served byte for byte as that release served it (index and every page in its three
/// representations: status, ETag, Last-Modified, Content-Length, bytes), and opening it changes no page's row. A
/// write after the upgrade moves the new counter, and is served.
async fn the_release_before_the_change_counter_is_served_byte_for_byte(backend: Backend) {
    let fixture = fixture_db("v0005", backend).await;
    let applied = latest_migration(&fixture.url).await;
    assert_eq!(applied, 5, "tests/fixtures/v0005 must be written by the release before migration 0006");
    let (app, fixture) = compare_answers(fixture, "v0005", backend).await;
    assert!(latest_migration(&fixture.url).await >= 6);
    let counter = app.store.changes(1).await.unwrap();
    let index = app.get("/sitemap.xml", &[]).await;
    app.put_paths(&["after-upgrade"]).await;
    assert!(app.store.changes(1).await.unwrap() > counter, "a write moves the counter");
    assert_ne!(app.get("/sitemap.xml", &[]).await.header("etag"), index.header("etag"));
    assert_eq!(app.find("https://www.example.com/after-upgrade").await.status.as_u16(), 200);
}

/// The parallel gzip (migration 0008): a database written by the release before it (7b18a87, migrations 1 to 7 on
/// Postgres, 1 to 6 on SQLite, extensions on page 6; `tests/fixtures/v0007/`, made by `make.sh … current-ext`) is
/// served byte for byte as that release served it, every page still compressed the way it was (one stream). A
/// write changes one page: that page alone moves to parallel blocks, and its gzip is a valid gzip of its identity
/// bytes; every other page keeps the bytes and ETags the previous release served.
async fn only_a_page_that_changes_after_the_upgrade_moves_to_parallel_gzip(backend: Backend) {
    use sitemapd::page::Gzip;
    let fixture = fixture_db("v0007", backend).await;
    let applied = latest_migration(&fixture.url).await;
    let previous = if backend.is_postgres() { 7 } else { 6 };
    assert_eq!(applied, previous, "tests/fixtures/v0007 must be written by the release before migration 0008");
    let (app, fixture) = compare_answers(fixture, "v0007", backend).await;
    assert_eq!(latest_migration(&fixture.url).await, shipped_migration(backend), "every migration is applied");
    let recorded = Recorded::load("v0007", backend);
    let pages = app.store.pages(1).await.unwrap();
    assert!(pages.iter().all(|p| p.gzip == Gzip::Stream), "{pages:?}");
    let before = page_rows(&fixture.url).await;
    app.put_paths(&["after-upgrade"]).await;
    let after = page_rows(&fixture.url).await;
    let changed: Vec<i64> = after.iter().filter(|(id, row)| before.get(id) != Some(row)).map(|(id, _)| *id).collect();
    assert_eq!(changed.len(), 1, "one new URL changes one page: {changed:?}");
    for page in app.store.pages(1).await.unwrap() {
        let what = format!("{backend:?} page {}", page.id);
        if changed.contains(&page.id) {
            assert_eq!(page.gzip, Gzip::Blocks, "{what}");
            let identity = app.get(&format!("/sitemap-{}.xml", page.id), &[]).await;
            let gz = app.get(&format!("/sitemap-{}.xml", page.id), &[("accept-encoding", "gzip")]).await;
            assert_eq!(gz.header("content-encoding"), Some("gzip"), "{what}");
            assert_eq!(gunzip(&gz.body), identity.text(), "{what}: the gzip is of the identity bytes");
            let file = app.get(&format!("/sitemap-{}.xml.gz", page.id), &[]).await;
            assert_eq!(file.body, gz.body, "{what}: the .xml.gz file is the same gzip");
            continue;
        }
        assert_eq!(page.gzip, Gzip::Stream, "{what}");
        for (name, suffix, headers) in REPRESENTATIONS {
            let r = app.get(&format!("/sitemap-{}{suffix}", page.id), headers).await;
            let old = recorded.answer(page.id, name);
            assert_eq!(r.header("etag"), old["etag"].as_str(), "{what} {name}: ETag");
            assert_eq!(sha256_hex(&r.body), old["sha256"].as_str().unwrap(), "{what} {name}: bytes");
        }
    }
}

/// Sections (migration 0010): a database written by the release before them (59c08a3, migrations 1 to 9 on
/// Postgres, 1 to 8 on SQLite, extensions on page 6; `tests/fixtures/v0009/`, made by `make.sh … current-ext`) is
/// served byte for byte as that release served it, and opening it changes no page's row. Then writes to two new
/// sections create their own pages: no page of the default section changes, the default section's pages keep
/// their names and answers, and the index lists the sections' pages after them (by section name).
async fn the_release_before_sections_is_served_byte_for_byte(backend: Backend) {
    let fixture = fixture_db("v0009", backend).await;
    let applied = latest_migration(&fixture.url).await;
    let previous = if backend.is_postgres() { 9 } else { 8 };
    assert_eq!(applied, previous, "tests/fixtures/v0009 must be written by the release before migration 0010");
    let (app, fixture) = compare_answers(fixture, "v0009", backend).await;
    assert_eq!(latest_migration(&fixture.url).await, shipped_migration(backend), "every migration is applied");
    let recorded = Recorded::load("v0009", backend);
    let before = page_rows(&fixture.url).await;
    let entry =
        |path: &str, section: &str| json!({"loc": format!("https://www.example.com/{path}"), "section": section});
    let r = app.put_json(&json!([entry("shop/1", "shop"), entry("blog/1", "blog"), entry("shop/2", "shop")])).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text());
    let after = page_rows(&fixture.url).await;
    for (id, row) in &before {
        assert_eq!(after.get(id), Some(row), "{backend:?}: page {id} of the default section changed");
    }
    for page in recorded.pages() {
        for (name, suffix, headers) in REPRESENTATIONS {
            let r = app.get(&format!("/sitemap-{page}{suffix}"), headers).await;
            let old = recorded.answer(page, name);
            assert_eq!(r.header("etag"), old["etag"].as_str(), "{backend:?} page {page} {name}: ETag");
            assert_eq!(sha256_hex(&r.body), old["sha256"].as_str().unwrap(), "{backend:?} page {page} {name}: bytes");
        }
    }
    let index = app.get("/sitemap.xml", &[]).await.text();
    let locs = xml_texts(&index, "loc");
    let tail: Vec<&str> = locs.iter().rev().take(2).rev().map(|l| l.rsplit('/').next().unwrap()).collect();
    assert_eq!(tail, ["sitemap-blog-1.xml", "sitemap-shop-1.xml"], "{index}");
    assert!(locs[..locs.len() - 2].iter().all(|l| !l.contains("blog") && !l.contains("shop")));
    let shop = app.get("/sitemap-shop-1.xml", &[]).await.text();
    assert_eq!(xml_texts(&shop, "loc").len(), 2);
}

/// Googlebot as it announces itself, and an address its test range holds (`tests/fixtures/crawlers/`).
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const GOOGLE_ADDR: &str = "127.0.0.2:50000";

/// Telemetry as in production but for the ranges (Googlebot's: the loopback test file), no reverse DNS (no
/// network), and no timed flush (the test flushes).
fn crawler_settings() -> [(&'static str, &'static str); 3] {
    let ranges = concat!("googlebot=", env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/crawlers/googlebot-loopback.json");
    [
        ("SITEMAPD_CRAWLER_RANGES", ranges),
        ("SITEMAPD_CRAWLER_RDNS", "false"),
        ("SITEMAPD_TEST_TUNING", "crawler_flush=5m"),
    ]
}

/// A GET of `path` with `headers` from Googlebot at [`GOOGLE_ADDR`] (verified by its range).
async fn get_as_googlebot(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> TestResponse {
    let mut builder = axum::http::Request::get(path).header("user-agent", GOOGLEBOT);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let mut request = builder.body(axum::body::Body::empty()).unwrap();
    let peer: std::net::SocketAddr = GOOGLE_ADDR.parse().unwrap();
    request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
    app.send(request).await
}

/// Crawler telemetry (migration 0012): a database written by the release before it (01fad0a, migrations 1 to 11,
/// on SQLite without 0007 and 0009; extensions on page 6; `tests/fixtures/v0011/`, made by `make.sh … current-ext`) is served byte for byte as that release served it, and opening it changes no page's
/// row. Then Googlebot, verified, fetches every recorded answer: with the recorded ETag it gets a 304, without it
/// the recorded answer. Its fetches are written to the new tables, and that write moves no page row and not the
/// site's change counter, so every answer, in this process and in a new one, is still the recorded one.
async fn the_release_before_crawler_telemetry_is_served_byte_for_byte(backend: Backend) {
    let fixture = fixture_db("v0011", backend).await;
    let applied = latest_migration(&fixture.url).await;
    assert_eq!(applied, 11, "tests/fixtures/v0011 must be written by the release before migration 0012");
    let settings = crawler_settings();
    let (app, fixture) = compare_answers_with(fixture, "v0011", backend, &settings).await;
    assert_eq!(latest_migration(&fixture.url).await, shipped_migration(backend), "every migration is applied");
    let recorded = Recorded::load("v0011", backend);
    let rows = page_rows(&fixture.url).await;
    let changes = app.store.changes(1).await.unwrap();

    for (path, headers, old) in recorded_fetches(&recorded) {
        let what = format!("{backend:?} Googlebot {path} {headers:?}");
        let etag = old["etag"].as_str().unwrap_or_else(|| panic!("{what}: a recorded ETag"));
        let conditional: Vec<(&str, &str)> = headers.iter().copied().chain([("if-none-match", etag)]).collect();
        let r = get_as_googlebot(&app, &path, &conditional).await;
        assert_eq!(r.status.as_u16(), 304, "{what}: the recorded ETag is current");
        assert_eq!(r.header("etag"), Some(etag), "{what}: 304's ETag");
        assert!(r.body.is_empty(), "{what}: a 304 has no body");
        assert_recorded(&get_as_googlebot(&app, &path, headers).await, old, &what);
    }

    app.state.as_ref().unwrap().crawl_recorder().expect("telemetry on").flush().await;
    assert_eq!(page_rows(&fixture.url).await, rows, "{backend:?}: writing telemetry changed a page's row");
    assert_eq!(app.store.changes(1).await.unwrap(), changes, "{backend:?}: writing telemetry moved the counter");
    // The flush wrote them: per resource, Googlebot's fetches (verified; two a representation, half of them 304s),
    // and per page the version it read, the page's own.
    let mut fetches = app.store.crawler_fetches(1).await.unwrap();
    fetches.sort_by(|a, b| a.resource.cmp(&b.resource));
    let mut expected: Vec<(String, Option<i64>, i64, i64)> = vec![("sitemap.xml".to_owned(), None, 4, 2)];
    expected.extend(recorded.pages().iter().map(|&n| (format!("sitemap-{n}.xml"), Some(n), 6, 3)));
    expected.sort();
    let got: Vec<(String, Option<i64>, i64, i64)> =
        fetches.iter().map(|f| (f.resource.clone(), f.page_id, f.fetches, f.not_modified)).collect();
    assert_eq!(got, expected, "{backend:?}: {fetches:#?}");
    assert!(
        fetches.iter().all(|f| (f.crawler.as_str(), f.trust.as_str()) == ("googlebot", "verified")),
        "{fetches:#?}"
    );
    let reads: BTreeMap<i64, i64> =
        app.store.crawler_seen(1, None).await.unwrap().iter().map(|r| (r.page_id, r.version_us)).collect();
    let versions: BTreeMap<i64, i64> = rows.iter().map(|(id, (_, modified_us))| (*id, *modified_us)).collect();
    assert_eq!(reads, versions, "{backend:?}: Googlebot read each page's stored version");

    // Telemetry never changes an answer: not in this process, nor in one that opens the database now.
    let again = open_with(&fixture.url, &settings).await;
    for app in [&app, &again] {
        for (path, headers, old) in recorded_fetches(&recorded) {
            assert_recorded(&app.get(&path, headers).await, old, &format!("{backend:?} after the flush {path}"));
            let r = get_as_googlebot(app, &path, headers).await;
            assert_recorded(&r, old, &format!("{backend:?} Googlebot after the flush {path}"));
        }
    }
    assert_eq!(page_rows(&fixture.url).await, rows, "{backend:?}: a page's row moved");
}

/// The settings `tests/fixtures/v0015/` was written with (make.sh's `current-all`).
const EVERY_FILE: [(&str, &str); 2] = [("SITEMAPD_REMOVED_RETENTION", "30d"), ("SITEMAPD_ROBOTS_TXT", "true")];

/// Feeds (migration 0016 and after): a database written by the release before them (30a2b1b, migrations 1 to 15;
/// two sections, a fresh news entry, deletions, the removed-URLs sitemap and robots.txt on;
/// `tests/fixtures/v0015/`, made by `make.sh … current-all`), opened with feeds off, serves every file that
/// release served byte for byte (the index, every page as XML, gzip and .xml.gz, the text sitemaps, the
/// sections' pages and indexes, the news and removed-URLs sitemaps, robots.txt: status, ETag, Last-Modified,
/// Content-Type, Content-Encoding, Content-Length, bytes), read at the time it was recorded (the news and
/// removed windows depend on it); opening it changes no page's row; and there is no feed.
async fn the_release_before_feeds_is_served_byte_for_byte(backend: Backend) {
    let (app, _fixture) = every_file_as_recorded(backend, false).await;
    for path in ["/feed.atom", "/feed-blog.atom"] {
        assert_eq!(app.get(path, &[]).await.status.as_u16(), 404, "{backend:?} {path}: feeds are off");
    }
}

/// [`the_release_before_feeds_is_served_byte_for_byte`] with feeds on: every file is still the recorded one but
/// robots.txt, which gains the feeds' line(s) and nothing else. The feeds hold the records that release wrote
/// (each has its change time, migration 0015) and its tombstones, which have no section (stored before migration
/// 0016): in the site's feed only. Each feed is valid, and the real readers read it so
/// ([`crate::feed_conformance::check_feed`]).
async fn the_release_before_feeds_is_served_byte_for_byte_with_feeds_on(backend: Backend) {
    use crate::feed_conformance::{check_feed, expected, stored};
    let (app, _fixture) = every_file_as_recorded(backend, true).await;
    let (records, removed, sections) = stored(&app).await;
    assert_eq!(records.len(), 33, "{backend:?}: the fixture's records");
    assert_eq!(removed.len(), 3, "{backend:?}: the fixture's tombstones");
    assert!(removed.iter().all(|d| d.section.is_none()), "{backend:?}: a tombstone from before 0016 has no section");
    let feeds = [
        ("/feed.atom", None),
        ("/feed-blog.atom", Some(sections["blog"])),
        ("/feed-shop.atom", Some(sections["shop"])),
    ];
    for (path, section) in feeds {
        let (want, updated_s) = expected(&records, &removed, section, 200);
        let deleted = want.iter().filter(|i| matches!(i, crate::feed_conformance::Item::Deleted { .. })).count();
        assert_eq!(deleted, if section.is_none() { 3 } else { 0 }, "{backend:?} {path}: {want:?}");
        check_feed(&app, path, &want, updated_s).await;
    }
}

/// Opens `tests/fixtures/v0015/` (feeds on or off) at the time it was recorded and compares every recorded
/// answer; robots.txt with feeds on is the recorded one once its lines naming a feed are taken out.
async fn every_file_as_recorded(backend: Backend, feeds: bool) -> (TestApp, Fixture) {
    let fixture = fixture_db("v0015", backend).await;
    assert_eq!(latest_migration(&fixture.url).await, 15, "tests/fixtures/v0015 must be written by 30a2b1b");
    let recorded = Recorded::load("v0015", backend);
    let answers = &recorded.json["answers"];
    let at_us = answers["recorded_at_us"].as_i64().expect("recorded_at_us");
    let mut settings = EVERY_FILE.to_vec();
    if feeds {
        settings.push(("SITEMAPD_FEEDS", "true"));
    }
    let before = page_rows(&fixture.url).await;
    let app = open_with_clock(&fixture.url, &settings, std::sync::Arc::new(move || at_us)).await;
    assert_eq!(page_rows(&fixture.url).await, before, "{backend:?}: opening the database changed a page's row");
    assert_eq!(latest_migration(&fixture.url).await, shipped_migration(backend), "every migration is applied");
    let mut fetches = recorded_fetches(&recorded);
    let files = answers["files"].as_object().expect("every file recorded");
    assert_eq!(files.len(), 29, "six pages' and two sections' files, news, removed, robots.txt");
    for (path, old) in files {
        fetches.push((path.clone(), &[], &old["identity"]));
        fetches.push((path.clone(), &[("accept-encoding", "gzip")], &old["gzip"]));
    }
    for (path, headers, old) in fetches {
        let what = format!("{backend:?} feeds {} {path} {headers:?}", if feeds { "on" } else { "off" });
        let r = app.get(&path, headers).await;
        if feeds && path == "/robots.txt" {
            let text = r.text();
            let without: String = text.lines().filter(|l| !l.contains(".atom")).map(|l| format!("{l}\n")).collect();
            assert!(without.len() < text.len(), "{what}: no feed in robots.txt:\n{text}");
            assert_eq!(sha256_hex(without.as_bytes()), old["sha256"].as_str().unwrap(), "{what}: the rest\n{text}");
            assert_eq!(r.status.as_u16(), 200, "{what}");
            continue;
        }
        assert_recorded(&r, old, &what);
    }
    (app, fixture)
}

/// The release before hreflang clusters (27b8998, migrations 1 to 17; `tests/fixtures/v0017/`, made by
/// `make.sh … current-hreflang` from its release build): v0015's data set and settings, then entries whose
/// alternates form three clusters (one-way links, x-default, an external and a not-stored href, a duplicate and a
/// conflicting language, es-419, a member in the blog section). Opened with `hreflang` at its default (`as_sent`),
/// every file it recorded is served byte for byte (status, validators, headers, bytes), read at the time it was
/// recorded; opening it changes no page's row.
async fn the_release_before_hreflang_clusters_is_served_byte_for_byte(backend: Backend) {
    let (app, _fixture) = v0017_opened(backend, &[]).await;
    let recorded = Recorded::load("v0017", backend);
    for (path, headers, old) in v0017_fetches(&recorded) {
        let r = app.get(&path, headers).await;
        assert_recorded(&r, old, &format!("{backend:?} as_sent {path} {headers:?}"));
    }
}

/// What `complete` renders for each loc of v0017 whose rendering it changes (docs/hreflang.md): cluster a whole
/// (the one-way links returned, x-default and the external es kept, the not-stored it left out); in b, en-2 lost
/// en to en-1 (the smaller href of two self-claims) and renders none, fr gains en; in c, /c/pt is pt (its own
/// word over /c/en's es) and es-419 is dropped. /b/en-1 and /p/29 render what they declared: their pages change
/// only if another entry on them does.
fn v0017_completed() -> BTreeMap<String, Vec<(String, String)>> {
    let p = support::PUBLIC_URL;
    let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(h, href)| {
                ((*h).to_owned(), if href.starts_with("https:") { (*href).to_owned() } else { format!("{p}{href}") })
            })
            .collect()
    };
    let a = l(&[
        ("de", "/de/a"),
        ("en", "/en/a"),
        ("es", "https://example.es/a"),
        ("fr", "/fr/a"),
        ("ja", "/blog/ja/a"),
        ("x-default", "/en/a"),
    ]);
    let b = l(&[("en", "/b/en-1"), ("fr", "/b/fr")]);
    let c = l(&[("en", "/c/en"), ("pt", "/c/pt")]);
    let mut out = BTreeMap::new();
    for path in ["/en/a", "/de/a", "/fr/a", "/blog/ja/a"] {
        out.insert(format!("{p}{path}"), a.clone());
    }
    out.insert(format!("{p}/b/en-2"), Vec::new());
    out.insert(format!("{p}/b/fr"), b);
    for path in ["/c/en", "/c/pt"] {
        out.insert(format!("{p}{path}"), c.clone());
    }
    out
}

/// hreflang `complete` on v0017: the pages that hold a loc whose rendering changes ([`v0017_completed`]) change
/// (new bytes and ETag, each such `<url>` the cluster's set, every other `<url>` as before, valid), in each of
/// their three representations; every other page, text sitemap, section page, the news and removed-URLs sitemaps
/// and robots.txt are served byte for byte as recorded. The comparison is against the same database opened with
/// `as_sent` (itself the recorded bytes, see the test above).
async fn the_release_before_hreflang_clusters_completed_changes_only_the_members_pages(backend: Backend) {
    let recorded = Recorded::load("v0017", backend);
    let (as_sent, _a) = v0017_opened(backend, &[]).await;
    let (complete, _c) = v0017_opened(backend, &[("SITEMAPD_HREFLANG", "complete")]).await;
    let completed = v0017_completed();
    // The pages (paths) holding a loc whose rendering changes: the default section's from `entries`, blog's from
    // `sections`.
    let mut changed: Vec<String> = Vec::new();
    for loc in completed.keys() {
        let path = match recorded.json["entries"][loc].as_i64() {
            Some(n) => format!("/sitemap-{n}.xml"),
            None => {
                let page =
                    recorded.json["answers"]["sections"][loc].as_str().unwrap_or_else(|| panic!("{loc} recorded"));
                format!("/{}", page.rsplit('/').next().unwrap())
            }
        };
        changed.push(path);
    }
    changed.sort();
    changed.dedup();
    let mut unchanged = 0;
    for (path, headers, old) in v0017_fetches(&recorded) {
        let what = format!("{backend:?} complete {path} {headers:?}");
        let r = complete.get(&path, headers).await;
        let xml_path = path.trim_end_matches(".gz").to_owned();
        if path == "/sitemap.xml" || path == "/sitemap-blog.xml" || path == "/sitemap-blog.xml.gz" {
            // An index lists the changed pages' new <lastmod>.
            assert_eq!(r.status.as_u16(), 200, "{what}");
            assert_ne!(r.header("etag"), old["etag"].as_str(), "{what}: a page it lists changed");
            continue;
        }
        if !changed.contains(&xml_path) {
            let txt = path.strip_suffix(".txt").or_else(|| path.strip_suffix(".txt.gz"));
            if let Some(txt) = txt
                && changed.contains(&format!("{txt}.xml"))
            {
                // The text form of a changed page lists the same locs.
                let before = as_sent.get(&path, headers).await;
                assert_eq!((r.status, &r.body), (before.status, &before.body), "{what}: the same locs");
                continue;
            }
            assert_recorded(&r, old, &what);
            unchanged += 1;
            continue;
        }
        assert_eq!(r.status.as_u16(), 200, "{what}");
        assert_ne!(r.header("etag"), old["etag"].as_str(), "{what}: a changed page needs a new ETag");
        assert_ne!(sha256_hex(&r.body), old["sha256"].as_str().unwrap(), "{what}: the same bytes");
        let before = as_sent.get(&path, headers).await;
        let text = |r: &TestResponse| {
            if r.header("content-encoding") == Some("gzip") || path.ends_with(".gz") {
                gunzip(&r.body)
            } else {
                r.text()
            }
        };
        let (now, was) = (text(&r), text(&before));
        validate_xsd(&[("page.xml", now.as_bytes())]);
        let (now_links, was_links) = (crate::hreflang::alternates_in(&now), crate::hreflang::alternates_in(&was));
        assert_eq!(xml_texts(&now, "loc"), xml_texts(&was, "loc"), "{what}: the same entries in the same order");
        let mut want = was_links.clone();
        for (loc, links) in &completed {
            if want.contains_key(loc) {
                want.insert(loc.clone(), links.clone());
            }
        }
        assert_ne!(want, was_links, "{what}: nothing on it changes");
        assert_eq!(now_links, want, "{what}: the completed alternates");
        // Every other <url> is the very bytes it was.
        let others = |xml: &str| -> Vec<String> {
            xml.split("<url>")
                .filter(|u| !completed.keys().any(|l| u.contains(&format!("<loc>{l}</loc>"))))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(others(&now), others(&was), "{what}: the other entries");
    }
    assert!(unchanged > 30, "{backend:?}: most files are unchanged ({unchanged})");
    assert!(changed.len() >= 3, "{changed:?}");
}

/// The settings v0017 was written with (those of v0015), its fixture opened with `more` on top, its clock at the
/// time of the recording.
async fn v0017_opened(backend: Backend, more: &[(&str, &str)]) -> (TestApp, Fixture) {
    let fixture = fixture_db("v0017", backend).await;
    assert_eq!(latest_migration(&fixture.url).await, 17, "tests/fixtures/v0017 must be written by 27b8998");
    let recorded = Recorded::load("v0017", backend);
    let at_us = recorded.json["answers"]["recorded_at_us"].as_i64().expect("recorded_at_us");
    let mut settings = EVERY_FILE.to_vec();
    settings.extend_from_slice(more);
    let before = page_rows(&fixture.url).await;
    let app = open_with_clock(&fixture.url, &settings, std::sync::Arc::new(move || at_us)).await;
    assert_eq!(latest_migration(&fixture.url).await, shipped_migration(backend), "every migration is applied");
    if more.is_empty() {
        assert_eq!(page_rows(&fixture.url).await, before, "{backend:?}: opening the database changed a page's row");
    }
    (app, fixture)
}

/// Every fetch recorded in v0017: the index, each page three ways, then every other file two ways.
fn v0017_fetches(recorded: &Recorded) -> Vec<(String, Headers, &Value)> {
    let answers = &recorded.json["answers"];
    let mut fetches = every_recorded_fetch(recorded);
    let files = answers["files"].as_object().expect("every file recorded");
    for (path, old) in files {
        fetches.push((path.clone(), &[], &old["identity"]));
        fetches.push((path.clone(), &[("accept-encoding", "gzip")], &old["gzip"]));
    }
    fetches
}

/// Opens the database of fixture `set` with this version and compares every answer with the recorded ones.
/// The fixture comes back with the app: the database lives as long as it does.
async fn answers_stay_byte_for_byte(set: &str, backend: Backend) -> (TestApp, Fixture) {
    let fixture = fixture_db(set, backend).await;
    compare_answers(fixture, set, backend).await
}

/// The number of the last migration this version ships for `backend` (`migrations/<backend>/NNNN_*.sql`).
fn shipped_migration(backend: Backend) -> i64 {
    let dir = match backend {
        Backend::Sqlite => "migrations/sqlite",
        Backend::Postgres | Backend::Pooler => "migrations/postgres",
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let numbers =
        std::fs::read_dir(dir).unwrap().filter_map(|f| f.unwrap().file_name().to_str()?.get(..4)?.parse().ok());
    numbers.max().unwrap()
}

/// The highest migration applied to a database.
async fn latest_migration(url: &str) -> i64 {
    let sql = "SELECT max(version) FROM _sqlx_migrations";
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
    }
}

/// [`answers_stay_byte_for_byte`] on a fixture database already made (and perhaps prepared by the test).
async fn compare_answers(fixture: Fixture, set: &str, backend: Backend) -> (TestApp, Fixture) {
    compare_answers_with(fixture, set, backend, &[]).await
}

/// [`compare_answers`], the database opened with `more` settings on top of the fixture's.
async fn compare_answers_with(
    fixture: Fixture,
    set: &str,
    backend: Backend,
    more: &[(&str, &str)],
) -> (TestApp, Fixture) {
    let recorded = Recorded::load(set, backend);
    assert!(recorded.affected().is_empty(), "written by this release: nothing to repair");
    let before = page_rows(&fixture.url).await;
    let app = open_with(&fixture.url, more).await;
    assert_eq!(page_rows(&fixture.url).await, before, "{backend:?}: opening the database changed a page's row");
    for (path, headers, old) in recorded_fetches(&recorded) {
        let r = app.get(&path, headers).await;
        assert_recorded(&r, old, &format!("{backend:?} {path} {headers:?}"));
    }
    (app, fixture)
}

/// Every fetch `make.sh` recorded, with its answer: the index two ways, then each page three ways.
fn recorded_fetches(recorded: &Recorded) -> Vec<(String, Headers, &Value)> {
    let fetches = every_recorded_fetch(recorded);
    assert_eq!(fetches.len(), 2 + 3 * 6, "the index twice and six pages three ways");
    fetches
}

/// [`recorded_fetches`] for any number of pages.
fn every_recorded_fetch(recorded: &Recorded) -> Vec<(String, Headers, &Value)> {
    let mut fetches: Vec<(String, Headers, &Value)> = vec![
        ("/sitemap.xml".to_owned(), &[], &recorded.json["answers"]["index"]["identity"]),
        ("/sitemap.xml".to_owned(), &[("accept-encoding", "gzip")], &recorded.json["answers"]["index"]["gzip"]),
    ];
    for page in recorded.pages() {
        for (name, suffix, headers) in REPRESENTATIONS {
            fetches.push((format!("/sitemap-{page}{suffix}"), headers, recorded.answer(page, name)));
        }
    }
    fetches
}

/// `r` is the recorded answer `old`: status, validators, headers and the very bytes.
fn assert_recorded(r: &TestResponse, old: &Value, what: &str) {
    assert_eq!(r.status.as_u16(), old["status"].as_u64().unwrap() as u16, "{what}: status");
    assert_eq!(r.header("etag"), old["etag"].as_str(), "{what}: ETag");
    assert_eq!(r.header("last-modified"), old["last_modified"].as_str(), "{what}: Last-Modified");
    assert_eq!(r.header("content-type"), old["content_type"].as_str(), "{what}: Content-Type");
    assert_eq!(r.header("content-encoding"), old["content_encoding"].as_str(), "{what}: Content-Encoding");
    assert_eq!(content_length(r), old["content_length"].as_u64(), "{what}: Content-Length");
    assert_eq!(r.body.len() as u64, old["length"].as_u64().unwrap(), "{what}: body length");
    assert_eq!(sha256_hex(&r.body), old["sha256"].as_str().unwrap(), "{what}: body bytes");
}

crate::both_backends!(
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    upgrade_serves_unchanged_pages_identically,
    pinned_answers_stay_byte_for_byte,
    the_release_before_sites_is_served_byte_for_byte,
    the_release_before_the_change_counter_is_served_byte_for_byte,
    only_a_page_that_changes_after_the_upgrade_moves_to_parallel_gzip,
    the_release_before_sections_is_served_byte_for_byte,
    the_release_before_crawler_telemetry_is_served_byte_for_byte,
    the_release_before_feeds_is_served_byte_for_byte,
    the_release_before_hreflang_clusters_is_served_byte_for_byte,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    the_release_before_hreflang_clusters_completed_changes_only_the_members_pages,
    #[cfg_attr(
        any(sitemapd_no_xmllint, sitemapd_no_trang, sitemapd_no_node, sitemapd_no_feedparser, sitemapd_no_rss_parser),
        ignore = "needs xmllint, trang, node and the feed readers (tests/feeds/setup.sh)"
    )]
    the_release_before_feeds_is_served_byte_for_byte_with_feeds_on
);
