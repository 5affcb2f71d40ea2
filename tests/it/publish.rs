//! `sitemapd publish` and serve's publisher (issue 41, docs/publishing.md), the built binary against a local
//! directory and against a real S3 API (moto's server, `tests/s3/setup.sh`), on both backends: the first pass
//! uploads every file, byte for byte what the service serves (on S3 with its `Content-Type` and the configured
//! `Cache-Control`, no `Content-Encoding`); a pass over an unchanged site uploads nothing; one changed URL uploads
//! its page's forms and the index, and nothing else; `--full` uploads everything again; a page that leaves the
//! index is deleted once the grace has passed, never before; `kill -9` at every pause point of a pass leaves the
//! target consistent (its index names only objects that are there, each at the version the index was made with),
//! and a new pass makes it byte-identical to the service; a second process on a target whose lease is held says
//! busy and exits 1; serve's worker publishes after a write; the S3 secret reaches no log and not `/metrics`; and
//! the suite's sitemap reader (sitemapd's importer) reads the same URLs from the published directory behind
//! Debian's nginx as the service lists.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{
    Backend, KillOnDrop, Moto, PUBLIC_URL, S3_SECRET, SpawnGuarded, StaticNginx, TestApp, eventually, free_port,
    xml_texts,
};

const BIN: &str = env!("CARGO_BIN_EXE_sitemapd");
/// Two URLs a page, so that a handful of URLs makes several pages.
const PAGE_MAX_URLS: &str = "2";
const CACHE_CONTROL: &str = "public, max-age=60";

// --- The fixture: a site, a target, the binary. -----------------------------------------------------------------

/// Where a test publishes: a directory (`file://`) or a bucket of a moto server under a prefix (`s3://`).
enum Target {
    Dir { _tmp: tempfile::TempDir, path: PathBuf },
    S3 { moto: Arc<Moto>, bucket: String, prefix: String },
}

impl Target {
    fn dir() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("www");
        Self::Dir { _tmp: tmp, path }
    }

    /// A moto server of the test's own, a bucket, a prefix.
    async fn s3() -> Self {
        let moto = Arc::new(Moto::start().await);
        moto.create_bucket("sitemaps").await;
        Self::s3_prefix(&moto, "site/a/")
    }

    /// The bucket of `moto` under `prefix` (which ends with `/`).
    fn s3_prefix(moto: &Arc<Moto>, prefix: &str) -> Self {
        Self::S3 { moto: moto.clone(), bucket: "sitemaps".into(), prefix: prefix.into() }
    }

    /// The target as `SITEMAPD_PUBLISH_TARGETS` names it.
    fn url(&self) -> String {
        match self {
            Self::Dir { path, .. } => format!("file://{}/", path.display()),
            Self::S3 { bucket, prefix, .. } => format!("s3://{bucket}/{prefix}"),
        }
    }

    /// The environment the binary needs to reach the target (the S3 server's endpoint and credentials).
    fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            Self::Dir { .. } => Vec::new(),
            Self::S3 { moto, .. } => moto.env(),
        }
    }

    /// Every object the target holds: file name (under the prefix) → bytes. Files a local upload left half-written
    /// by a kill (object_store's staging files, `NAME#N`) are not objects a static host serves under a name an index
    /// gives, and are left out.
    async fn objects(&self) -> BTreeMap<String, Vec<u8>> {
        match self {
            Self::Dir { path, .. } => {
                let Ok(entries) = std::fs::read_dir(path) else { return BTreeMap::new() };
                entries
                    .map(|e| e.unwrap())
                    .filter(|e| e.file_type().unwrap().is_file())
                    .map(|e| (e.file_name().into_string().unwrap(), e.path()))
                    .filter(|(name, _)| !name.contains('#'))
                    .map(|(name, file)| (name, std::fs::read(file).unwrap()))
                    .collect()
            }
            Self::S3 { moto, bucket, prefix } => {
                let mut out = BTreeMap::new();
                for key in moto.list(bucket, prefix).await.into_keys() {
                    let name = key.strip_prefix(prefix.as_str()).unwrap_or_else(|| panic!("{key} under {prefix}"));
                    let object = moto.get(bucket, &key).await.unwrap_or_else(|| panic!("{key} listed, not found"));
                    out.insert(name.to_owned(), object.bytes);
                }
                out
            }
        }
    }

    /// Each file's inode (local directory): a file an upload rewrote has a new one (object_store renames a staged
    /// file into place).
    fn inodes(&self) -> BTreeMap<String, u64> {
        let Self::Dir { path, .. } = self else { panic!("inodes of a local directory only") };
        std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().into_string().unwrap(), e.metadata().unwrap().ino()))
            .filter(|(name, _)| !name.contains('#'))
            .collect()
    }
}

/// A file as the service serves it: its bytes (identity) and `Content-Type`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Served {
    bytes: Vec<u8>,
    content_type: String,
}

/// What the target must hold after a complete pass: every file of the service's index, each page's `.xml.gz` form,
/// each named section's index, by name; and which of them are indexes.
#[derive(Clone, Debug)]
struct Files {
    files: BTreeMap<String, Served>,
    indexes: BTreeSet<String>,
}

impl Files {
    fn bytes(&self) -> BTreeMap<String, Vec<u8>> {
        self.files.iter().map(|(name, served)| (name.clone(), served.bytes.clone())).collect()
    }

    /// The names whose bytes differ from `before`'s, or that `before` lacks.
    fn changed_since(&self, before: &Files) -> BTreeSet<String> {
        self.files.iter().filter(|(n, s)| before.files.get(*n) != Some(s)).map(|(n, _)| n.clone()).collect()
    }
}

/// The service: the test's own router over the database, or a `serve` process on a port.
#[derive(Clone, Copy)]
enum Service<'a> {
    App(&'a TestApp),
    Http(u16),
}

impl Service<'_> {
    /// `GET path` as a static host's client asks (no compression): the body and `Content-Type` on 200.
    async fn get(self, path: &str) -> Option<Served> {
        match self {
            Self::App(app) => {
                let r = app.get(path, &[("accept-encoding", "identity")]).await;
                if r.status == StatusCode::NOT_FOUND {
                    return None;
                }
                assert_eq!(r.status, StatusCode::OK, "{path}");
                let content_type = r.header("content-type").expect("a Content-Type").to_owned();
                Some(Served { bytes: r.body.to_vec(), content_type })
            }
            Self::Http(port) => {
                let r = client()
                    .get(format!("http://127.0.0.1:{port}{path}"))
                    .header("accept-encoding", "identity")
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("GET {path}: {e}"));
                if r.status() == reqwest::StatusCode::NOT_FOUND {
                    return None;
                }
                assert_eq!(r.status(), reqwest::StatusCode::OK, "{path}");
                let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
                Some(Served { bytes: r.bytes().await.unwrap().to_vec(), content_type })
            }
        }
    }

    /// Every file a complete pass publishes (the default forms, `xml` and `xml.gz`), as the service serves it now.
    async fn files(self, public_url: &str) -> Files {
        let mut files = BTreeMap::new();
        let mut indexes = BTreeSet::from(["sitemap.xml".to_owned()]);
        let Some(index) = self.get("/sitemap.xml").await else { return Files { files, indexes: BTreeSet::new() } };
        for name in names(&index.bytes, public_url) {
            if let Some(section) = page_section(&name) {
                files.insert(format!("{name}.gz"), self.get(&format!("/{name}.gz")).await.expect("a page's .gz"));
                if let Some(section) = section {
                    indexes.insert(format!("sitemap-{section}.xml"));
                }
            }
            files.insert(name.clone(), self.get(&format!("/{name}")).await.expect("a file the index names"));
        }
        for section_index in indexes.iter().filter(|n| *n != "sitemap.xml") {
            let served = self.get(&format!("/{section_index}")).await.expect("a named section's index");
            files.insert(section_index.clone(), served);
        }
        files.insert("sitemap.xml".into(), index);
        Files { files, indexes }
    }
}

fn client() -> reqwest::Client {
    sitemapd::http_client::builder().unwrap().build().unwrap()
}

/// The file names an index's `<loc>`s give, under `public_url`.
fn names(index: &[u8], public_url: &str) -> Vec<String> {
    let prefix = format!("{}/", public_url.trim_end_matches('/'));
    xml_texts(std::str::from_utf8(index).expect("UTF-8"), "loc")
        .into_iter()
        .map(|loc| loc.strip_prefix(&prefix).unwrap_or_else(|| panic!("{loc} under {prefix}")).to_owned())
        .collect()
}

/// For a page's name (`sitemap-N.xml`, `sitemap-SECTION-N.xml`): `Some` of its named section (`None`: the
/// default); `None` for any other file.
fn page_section(name: &str) -> Option<Option<String>> {
    let stem = name.strip_prefix("sitemap-")?.strip_suffix(".xml")?;
    let (section, number) = match stem.rsplit_once('-') {
        Some((section, number)) => (Some(section.to_owned()), number),
        None => (None, stem),
    };
    number.chars().all(|c| c.is_ascii_digit()).then_some(section)
}

/// A service with two URLs a page over a fresh database of `backend`, with `public_url` its site's.
async fn site(backend: Backend, public_url: &str) -> TestApp {
    TestApp::spawn(backend, &[("SITEMAPD_PUBLIC_URL", public_url), ("SITEMAPD_PAGE_MAX_URLS", PAGE_MAX_URLS)]).await
}

fn entry(public_url: &str, path: &str, lastmod: &str) -> Value {
    let mut e = json!({"loc": format!("{public_url}/{path}"), "lastmod": lastmod});
    if path.starts_with("p/") {
        e["section"] = json!("products");
    }
    e
}

/// Five URLs of the default section (three pages) and two of `products` (one page, and the section's index).
async fn fill(app: &TestApp, public_url: &str) {
    let entries: Vec<Value> = ["a/1", "a/2", "a/3", "a/4", "a/5", "p/1", "p/2"]
        .iter()
        .map(|p| entry(public_url, p, "2026-01-01T00:00:00Z"))
        .collect();
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// Writes `path` again with a new `lastmod`: its page changes.
async fn touch(app: &TestApp, public_url: &str, path: &str, lastmod: &str) {
    let r = app.put_json(&json!([entry(public_url, path, lastmod)])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// The name of the page that holds `path`.
async fn page_of(app: &TestApp, path: &str) -> String {
    let found = app.find(&format!("{PUBLIC_URL}/{path}")).await;
    assert_eq!(found.status, StatusCode::OK, "{path}");
    let sitemap = found.json()["sitemap"].as_str().expect("the page's URL").to_owned();
    sitemap.strip_prefix(&format!("{PUBLIC_URL}/")).expect("under the public URL").to_owned()
}

/// Deletes every URL of page `name`: the page leaves the index.
async fn empty_page(app: &TestApp, name: &str) {
    let page = app.get(&format!("/{name}"), &[]).await;
    assert_eq!(page.status, StatusCode::OK, "{name}");
    for loc in xml_texts(&page.text(), "loc") {
        assert_eq!(app.delete_loc(&loc).await.status, StatusCode::NO_CONTENT, "{loc}");
    }
}

/// `sitemapd publish ARGS` on `app`'s database to `target`, with `vars` on top of the test's settings.
fn publish_command(app: &TestApp, target: &Target, public_url: &str, vars: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(std::env::temp_dir())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs([
            ("DATABASE_URL", app.db.url.as_str()),
            ("SITEMAPD_PUBLIC_URL", public_url),
            ("SITEMAPD_PAGE_MAX_URLS", PAGE_MAX_URLS),
            ("SITEMAPD_PUBLISH_TARGETS", &target.url()),
            ("SITEMAPD_PUBLISH_CACHE_CONTROL", CACHE_CONTROL),
        ])
        .envs(target.env())
        .envs(vars.iter().copied())
        .arg("publish")
        .args(args)
        .stdin(Stdio::null());
    cmd
}

/// Runs `cmd` to its end (on a blocking thread).
async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run sitemapd publish")).await.unwrap()
}

async fn publish(app: &TestApp, target: &Target, vars: &[(&str, &str)], args: &[&str]) -> Output {
    run(publish_command(app, target, PUBLIC_URL, vars, args)).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A pass's summary line, as `sitemapd publish` prints it on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Summary {
    uploaded: usize,
    bytes: u64,
    unchanged: usize,
    deleted: usize,
    awaiting: usize,
}

/// The summary of a pass that completed (exit 0, one line): `<label>: uploaded N objects (B bytes), U unchanged,
/// deleted D, A awaiting deletion, S s`.
fn completed(out: &Output) -> Summary {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "publish failed ({}):\n{stdout}\n{stderr}", out.status);
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains(": uploaded ")).collect();
    assert_eq!(lines.len(), 1, "one target, one summary line:\n{stdout}");
    let (_, rest) = lines[0].split_once(": uploaded ").unwrap();
    let words: Vec<&str> = rest.split([' ', ',', '(', ')']).filter(|w| !w.is_empty()).collect();
    let number = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok()).unwrap_or_else(|| panic!("{stdout}"));
    let shape = [(1, "object"), (3, "bytes"), (5, "unchanged"), (6, "deleted"), (9, "awaiting"), (10, "deletion")];
    for (i, word) in shape {
        assert!(words.get(i).is_some_and(|w| w.starts_with(word)), "word {i} is {word}: {stdout}");
    }
    Summary {
        uploaded: number(0) as usize,
        bytes: number(2),
        unchanged: number(4) as usize,
        deleted: number(7) as usize,
        awaiting: number(8) as usize,
    }
}

/// The target holds exactly `files`, byte for byte.
async fn assert_holds(target: &Target, files: &Files, what: &str) {
    let held = target.objects().await;
    let want = files.bytes();
    let differ: Vec<&String> = want
        .keys()
        .chain(held.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|n| held.get(*n) != want.get(*n))
        .collect();
    assert!(differ.is_empty(), "{what}: the target differs from the service at {differ:?} (holds {:?})", held.keys());
}

// --- Incremental passes. ----------------------------------------------------------------------------------------

/// First pass: every file; then nothing while nothing changes; then one changed URL's page (both forms) and the
/// index alone; then `--full`: everything again. Each time the target holds the service's bytes exactly.
async fn every_file_then_only_what_changed(backend: Backend, target: Target) {
    let app = site(backend, PUBLIC_URL).await;
    fill(&app, PUBLIC_URL).await;
    let first = Service::App(&app).files(PUBLIC_URL).await;
    assert_eq!(first.indexes.len(), 2, "the index and the products section's: {:?}", first.files.keys());
    assert_eq!(first.files.len(), 2 + 4 * 2, "{:?}", first.files.keys());

    let pass = completed(&publish(&app, &target, &[], &[]).await);
    let total_bytes: u64 = first.files.values().map(|s| s.bytes.len() as u64).sum();
    assert_eq!(
        pass,
        Summary { uploaded: first.files.len(), bytes: total_bytes, unchanged: 0, deleted: 0, awaiting: 0 },
        "the first pass uploads every file"
    );
    assert_holds(&target, &first, "after the first pass").await;
    if let Target::S3 { moto, bucket, prefix } = &target {
        for (name, served) in &first.files {
            let object = moto.get(bucket, &format!("{prefix}{name}")).await.expect("uploaded");
            assert_eq!(object.content_type.as_deref(), Some(served.content_type.as_str()), "{name}'s Content-Type");
            assert_eq!(object.cache_control.as_deref(), Some(CACHE_CONTROL), "{name}'s Cache-Control");
            assert_eq!(object.content_encoding, None, "{name} is stored as served, with no Content-Encoding");
        }
    }
    let inodes = matches!(target, Target::Dir { .. }).then(|| target.inodes());

    let pass = completed(&publish(&app, &target, &[], &[]).await);
    assert_eq!((pass.uploaded, pass.unchanged, pass.deleted), (0, first.files.len(), 0), "an unchanged site");
    if let Some(inodes) = &inodes {
        assert_eq!(&target.inodes(), inodes, "no file was rewritten");
    }

    let page = page_of(&app, "a/3").await;
    touch(&app, PUBLIC_URL, "a/3", "2026-02-01T00:00:00Z").await;
    let second = Service::App(&app).files(PUBLIC_URL).await;
    let changed = second.changed_since(&first);
    let want: BTreeSet<String> = [page.clone(), format!("{page}.gz"), "sitemap.xml".into()].into();
    assert_eq!(changed, want, "the fixture: one URL's page and the index change");
    let pass = completed(&publish(&app, &target, &[], &[]).await);
    assert_eq!((pass.uploaded, pass.unchanged, pass.deleted), (3, first.files.len() - 3, 0), "one changed URL");
    if let Some(inodes) = &inodes {
        let now = target.inodes();
        let rewritten: BTreeSet<String> =
            now.iter().filter(|(n, i)| inodes.get(*n) != Some(i)).map(|(n, _)| n.clone()).collect();
        assert_eq!(rewritten, want, "the files rewritten");
    }
    assert_holds(&target, &second, "after one changed URL").await;

    let before = matches!(target, Target::Dir { .. }).then(|| target.inodes());
    let pass = completed(&publish(&app, &target, &[], &["--full"]).await);
    assert_eq!((pass.uploaded, pass.unchanged), (second.files.len(), 0), "--full uploads every file");
    if let Some(before) = before {
        let now = target.inodes();
        assert!(now.iter().all(|(n, i)| before.get(n) != Some(i)), "--full rewrote every file");
    }
    assert_holds(&target, &second, "after --full").await;
}

async fn every_file_then_only_what_changed_in_a_directory(backend: Backend) {
    every_file_then_only_what_changed(backend, Target::dir()).await;
}

async fn every_file_then_only_what_changed_on_s3(backend: Backend) {
    every_file_then_only_what_changed(backend, Target::s3().await).await;
}

/// A page that leaves the index stays on the target, no index naming it, while the grace runs (two passes with
/// a day's grace), and goes at the first pass once it is over (a grace of 0 s).
async fn a_page_that_left_the_index_goes_after_the_grace_never_before(backend: Backend) {
    let target = Target::dir();
    let app = site(backend, PUBLIC_URL).await;
    fill(&app, PUBLIC_URL).await;
    let first = Service::App(&app).files(PUBLIC_URL).await;
    completed(&publish(&app, &target, &[], &[]).await);
    let gone = page_of(&app, "a/5").await;
    empty_page(&app, &gone).await;
    let second = Service::App(&app).files(PUBLIC_URL).await;
    let left: BTreeSet<String> = first.files.keys().filter(|n| !second.files.contains_key(*n)).cloned().collect();
    assert_eq!(left, [gone.clone(), format!("{gone}.gz")].into(), "the fixture: one page left the index");

    for attempt in 1..=2 {
        let pass = completed(&publish(&app, &target, &[("SITEMAPD_PUBLISH_GRACE", "1d")], &[]).await);
        assert_eq!((pass.deleted, pass.awaiting), (0, 2), "pass {attempt} within the grace");
        let held = target.objects().await;
        for name in &left {
            assert_eq!(held.get(name), first.files.get(name).map(|s| &s.bytes), "{name} is kept within the grace");
        }
        assert_eq!(held.get("sitemap.xml"), Some(&second.files["sitemap.xml"].bytes), "the new index is up");
        assert!(!names(&held["sitemap.xml"], PUBLIC_URL).contains(&gone), "the index no longer names {gone}");
    }
    let pass = completed(&publish(&app, &target, &[("SITEMAPD_PUBLISH_GRACE", "0s")], &[]).await);
    assert_eq!((pass.uploaded, pass.deleted, pass.awaiting), (0, 2, 0), "the grace is over");
    assert_holds(&target, &second, "after the grace").await;
}

// --- kill -9 at every pause point. ------------------------------------------------------------------------------

/// Starts `cmd` and waits until it says it paused at `point` on stderr (or fails with what it wrote if it ends
/// first). The child is returned paused, under its guard.
async fn paused_at(mut cmd: Command, point: &str) -> KillOnDrop {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn_guarded();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let said = format!("sitemapd-publish: paused at {point}");
    eventually(&format!("publish pauses at {point}"), || {
        let paused = lines.lock().unwrap().iter().any(|l| l.trim_end() == said);
        if !paused && let Ok(Some(status)) = child.try_wait() {
            let mut stdout = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).ok();
            panic!(
                "publish ended ({status}) before pausing at {point}:\n{stdout}\n{}",
                lines.lock().unwrap().join("\n")
            );
        }
        async move { paused }
    })
    .await;
    child
}

/// The target as a crawler may find it between `before` (what it held, complete) and `after` (the service now):
/// every object is one of the two versions of its file; every index on it (`sitemap.xml`, a section's) names only
/// files it holds, with their `.gz` forms; an index at its new version names only files at their new version.
async fn assert_consistent(target: &Target, before: &Files, after: &Files, when: &str) {
    let held = target.objects().await;
    for (name, bytes) in &held {
        let version = |files: &Files| files.files.get(name).is_some_and(|s| &s.bytes == bytes);
        assert!(version(before) || version(after), "{when}: {name} is neither the old nor the new version");
    }
    let index = held.get("sitemap.xml").unwrap_or_else(|| panic!("{when}: the target lost its index"));
    let mut indexes = vec![("sitemap.xml".to_owned(), index)];
    for name in names(index, PUBLIC_URL) {
        if let Some(Some(section)) = page_section(&name) {
            let section_index = format!("sitemap-{section}.xml");
            if let Some(bytes) = held.get(&section_index) {
                indexes.push((section_index, bytes));
            }
        }
    }
    for (index_name, bytes) in indexes {
        let new = after.files.get(&index_name).is_some_and(|s| &s.bytes == bytes);
        for name in names(bytes, PUBLIC_URL) {
            let forms = if page_section(&name).is_some() { vec![format!("{name}.gz"), name] } else { vec![name] };
            for form in forms {
                let object = held.get(&form);
                assert!(object.is_some(), "{when}: {index_name} names {form}, which the target lacks");
                if new {
                    let current = after.files.get(&form).map(|s| &s.bytes);
                    assert_eq!(object, current, "{when}: the new {index_name} names {form} at an older version");
                }
            }
        }
    }
}

/// For each pause point of a pass (after the claim, after the first and the last child's upload and record, after
/// the index's upload and record, after the marks, after the first and the last delete): a complete pass, then
/// writes that change two pages (four children) and empty a third (two objects to delete, grace 0 s), then a pass
/// killed (SIGKILL) at the point: the target is consistent; then, the killed claim's lease over, a new pass: the
/// target holds exactly what the service serves.
async fn kill_9_at_every_pause_point_then_a_new_pass(backend: Backend) {
    let moto = Arc::new(Moto::start().await);
    moto.create_bucket("sitemaps").await;
    let grace = [("SITEMAPD_PUBLISH_GRACE", "0s")];
    let points = [
        "claimed",
        "child-uploaded:1",
        "child-uploaded:4",
        "child-recorded:1",
        "child-recorded:4",
        "index-uploaded",
        "index-recorded",
        "marked",
        "deleted:1",
        "deleted:2",
    ];
    for (i, point) in points.iter().enumerate() {
        let target = Target::s3_prefix(&moto, &format!("crash-{i}/"));
        let app = site(backend, PUBLIC_URL).await;
        fill(&app, PUBLIC_URL).await;
        completed(&publish(&app, &target, &grace, &[]).await);
        let before = Service::App(&app).files(PUBLIC_URL).await;
        assert_holds(&target, &before, point).await;

        let gone = page_of(&app, "a/5").await;
        assert_ne!(page_of(&app, "a/1").await, gone);
        touch(&app, PUBLIC_URL, "a/1", "2026-03-01T00:00:00Z").await;
        touch(&app, PUBLIC_URL, "p/1", "2026-03-01T00:00:00Z").await;
        empty_page(&app, &gone).await;
        let after = Service::App(&app).files(PUBLIC_URL).await;
        let children: Vec<String> =
            after.changed_since(&before).into_iter().filter(|n| !after.indexes.contains(n)).collect();
        assert_eq!(children.len(), 4, "the fixture: four children to upload: {children:?}");
        let left = before.files.keys().filter(|n| !after.files.contains_key(*n)).count();
        assert_eq!(left, 2, "the fixture: two objects to delete");

        let vars = [grace[0], ("SITEMAPD_TEST_PUBLISH_PAUSE_AT", point)];
        let mut child = paused_at(publish_command(&app, &target, PUBLIC_URL, &vars, &[]), point).await;
        child.kill().unwrap();
        child.wait().unwrap();
        assert_consistent(&target, &before, &after, &format!("killed at {point}")).await;

        // The killed pass's lease would run out in a minute (`LEASE`, no knob): as if it had. Nothing else of the
        // publisher's state is touched.
        app.exec_sql("UPDATE publish_targets SET lease_until_us = 0").await;
        completed(&publish(&app, &target, &grace, &[]).await);
        assert_holds(&target, &after, &format!("the pass after the kill at {point}")).await;
    }
}

// --- One target, one pass at a time. ----------------------------------------------------------------------------

/// A pass holds the target's lease (paused after its claim): another `sitemapd publish` on the same target says
/// busy, uploads nothing and exits 1. (On Postgres: two processes on one database, as two replicas.)
async fn a_second_pass_on_a_held_target_is_busy(backend: Backend) {
    let target = Target::dir();
    let app = site(backend, PUBLIC_URL).await;
    fill(&app, PUBLIC_URL).await;
    let vars = [("SITEMAPD_TEST_PUBLISH_PAUSE_AT", "claimed")];
    let first = paused_at(publish_command(&app, &target, PUBLIC_URL, &vars, &[]), "claimed").await;
    let second = publish(&app, &target, &[], &[]).await;
    let stdout = text(&second.stdout);
    assert_eq!(second.status.code(), Some(1), "busy exits 1:\n{stdout}\n{}", text(&second.stderr));
    assert!(stdout.trim_end().ends_with(": busy: another process holds its lease"), "{stdout}");
    assert!(target.objects().await.is_empty(), "nothing was uploaded");
    drop(first);
}

// --- serve's publisher, and the credentials. --------------------------------------------------------------------

/// `PUT /api/v1/urls` on a `serve` process.
async fn put_over_http(port: u16, entries: Value) {
    let r = client()
        .put(format!("http://127.0.0.1:{port}/api/v1/urls"))
        .header("content-type", "application/json")
        .body(entries.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK, "{}", r.text().await.unwrap());
}

/// serve publishes to S3 after each write (an interval of 1 s); its `/metrics` count the uploads; and the S3 secret
/// appears in none of what serve and `sitemapd publish` write (debug logs on), nor in `/metrics`, nor in the error
/// of a target that fails (a bucket that does not exist).
async fn serve_publishes_after_a_write_and_shows_no_secret(backend: Backend) {
    let target = Target::s3().await;
    let Target::S3 { moto, .. } = &target else { unreachable!() };
    let app = site(backend, PUBLIC_URL).await;
    let logs = tempfile::tempdir().unwrap();
    let (out, err) = (logs.path().join("serve.out"), logs.path().join("serve.err"));
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let mut serve = Command::new(BIN)
        .current_dir(logs.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs([
            ("DATABASE_URL", app.db.url.as_str()),
            ("SITEMAPD_BIND", &bind),
            ("SITEMAPD_PUBLIC_URL", PUBLIC_URL),
            ("SITEMAPD_PAGE_MAX_URLS", PAGE_MAX_URLS),
            ("SITEMAPD_PUBLISH_TARGETS", &target.url()),
            ("SITEMAPD_PUBLISH_INTERVAL", "1s"),
            ("RUST_LOG", "debug"),
        ])
        .envs(moto.env())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn_guarded();
    crate::readme::wait_until_healthy(port, &mut serve);

    let entries: Vec<Value> =
        ["a/1", "a/2", "a/3", "p/1"].iter().map(|p| entry(PUBLIC_URL, p, "2026-01-01T00:00:00Z")).collect();
    put_over_http(port, Value::Array(entries)).await;
    let first = Service::Http(port).files(PUBLIC_URL).await;
    assert!(!first.files.is_empty());
    let want = first.bytes();
    eventually("serve publishes the first write", || {
        let (target, want) = (&target, &want);
        async move { &target.objects().await == want }
    })
    .await;
    put_over_http(port, json!([entry(PUBLIC_URL, "a/2", "2026-02-01T00:00:00Z")])).await;
    let second = Service::Http(port).files(PUBLIC_URL).await;
    assert!(!second.changed_since(&first).is_empty(), "the second write changed a page");
    let want = second.bytes();
    eventually("serve publishes the second write", || {
        let (target, want) = (&target, &want);
        async move { &target.objects().await == want }
    })
    .await;

    let metrics = client().get(format!("http://127.0.0.1:{port}/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(metrics.contains("sitemapd_publish_objects_total{"), "the uploads are counted:\n{metrics}");
    assert!(!metrics.contains(S3_SECRET), "/metrics shows the S3 secret");
    drop(serve);

    // One pass of the command over the good target and one whose bucket does not exist: the second fails, and
    // says why without the secret.
    let missing = "s3://no-such-bucket/x/";
    let targets = format!("{},{missing}", target.url());
    let vars = [("SITEMAPD_PUBLISH_TARGETS", targets.as_str()), ("RUST_LOG", "debug")];
    let cli = publish(&app, &target, &vars, &["--full"]).await;
    let cli_out = text(&cli.stdout);
    assert_eq!(cli.status.code(), Some(1), "a failed target exits 1:\n{cli_out}\n{}", text(&cli.stderr));
    assert!(cli_out.lines().any(|l| l.starts_with(missing) && l.contains(": FAILED: ")), "{cli_out}");
    let (serve_out, serve_err) = (std::fs::read_to_string(&out).unwrap(), std::fs::read_to_string(&err).unwrap());
    assert!(serve_out.len() + serve_err.len() > 0, "serve logged (at debug)");
    for (what, written) in [
        ("serve's stdout", serve_out),
        ("serve's stderr", serve_err),
        ("publish's stdout", cli_out),
        ("publish's stderr", text(&cli.stderr)),
    ] {
        assert!(!written.contains(S3_SECRET), "{what} shows the S3 secret");
    }
}

// --- A reader of the published files. ---------------------------------------------------------------------------

/// The published directory behind Debian's nginx (the site's public URL): sitemapd's importer, reading the index
/// from there, finds every URL the service lists, with its `lastmod`; and nginx serves each file as the service.
async fn a_reader_finds_the_same_urls_in_the_published_directory(backend: Backend) {
    let target = Target::dir();
    let port = free_port();
    let public_url = format!("http://127.0.0.1:{port}");
    let app = site(backend, &public_url).await;
    fill(&app, &public_url).await;
    let files = Service::App(&app).files(&public_url).await;
    completed(&run(publish_command(&app, &target, &public_url, &[], &[])).await);
    let Target::Dir { path, .. } = &target else { unreachable!() };
    let _nginx = StaticNginx::start(path, port).await;

    for (name, served) in &files.files {
        let r =
            client().get(format!("{public_url}/{name}")).header("accept-encoding", "identity").send().await.unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::OK, "nginx serves {name}");
        assert_eq!(r.bytes().await.unwrap().to_vec(), served.bytes, "nginx serves {name} as the service does");
    }

    let reader = TestApp::spawn(backend, &[("SITEMAPD_PUBLIC_URL", &public_url)]).await;
    let sources = ["sitemap.xml", "sitemap-products.xml"]
        .map(|n| sitemapd::import::Source::Url(url::Url::parse(&format!("{public_url}/{n}")).unwrap()));
    crate::import::import(&reader, crate::import::options(&reader, sources.to_vec())).await;
    let listed = |app: &TestApp| {
        let store = app.store.clone();
        async move {
            let records = store.list_after(None, 0, 10_000).await.unwrap();
            records.into_iter().map(|r| (r.url.loc, format!("{:?}", r.url.fields))).collect::<BTreeSet<_>>()
        }
    };
    let (served, read) = (listed(&app).await, listed(&reader).await);
    assert_eq!(served.len(), 7);
    assert_eq!(read, served, "the importer read from nginx what the service lists");
}

both_backends!(
    every_file_then_only_what_changed_in_a_directory,
    #[cfg_attr(sitemapd_no_moto, ignore = "needs moto: bash tests/s3/setup.sh")]
    every_file_then_only_what_changed_on_s3,
    a_page_that_left_the_index_goes_after_the_grace_never_before,
    #[cfg_attr(sitemapd_no_moto, ignore = "needs moto: bash tests/s3/setup.sh")]
    kill_9_at_every_pause_point_then_a_new_pass,
    a_second_pass_on_a_held_target_is_busy,
    #[cfg_attr(sitemapd_no_moto, ignore = "needs moto: bash tests/s3/setup.sh")]
    serve_publishes_after_a_write_and_shows_no_secret,
    #[cfg_attr(sitemapd_no_nginx, ignore = "needs nginx (apt-get install nginx-light)")]
    a_reader_finds_the_same_urls_in_the_published_directory,
);
