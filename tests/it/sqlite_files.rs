//! The SQLite files under a running sitemapd: deleted, overwritten by a backup, their log deleted, their disk
//! full. Nothing acknowledged is lost, writes and `/readyz` answer 503 while it lasts, and a copy over the file is
//! never written to (see `crates/sitemapd-store/src/watch.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};
use sitemapd::AppState;
use sitemapd::config::Config;
use sqlx::Connection;

use crate::support::{Backend, PUBLIC_URL, TestApp, options};

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

fn db_path(app: &TestApp) -> PathBuf {
    PathBuf::from(app.db.url.strip_prefix("sqlite://").unwrap())
}

/// The locs stored in the SQLite file at `path`, opened alone: copied without its log into a new directory,
/// as a `kill -9` followed by the loss of the log would leave it.
async fn locs_in_file_alone(path: &Path) -> Vec<String> {
    try_locs_in_file_alone(path).await.unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

async fn try_locs_in_file_alone(path: &Path) -> Result<Vec<String>, sqlx::Error> {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("alone.db");
    std::fs::copy(path, &copy)?;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", copy.display())).await?;
    let check: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await?;
    assert_eq!(check, "ok", "{} is whole", path.display());
    let locs = sqlx::query_scalar("SELECT loc FROM urls ORDER BY loc").fetch_all(&mut conn).await?;
    conn.close().await.ok();
    Ok(locs)
}

/// Whether the SQLite file at `path`, opened alone, is whole (its integrity check passes) and holds `n` URLs: not
/// while it is still being written.
async fn whole_with(path: &Path, n: i64) -> bool {
    let read = async {
        let dir = tempfile::tempdir()?;
        let copy = dir.path().join("alone.db");
        std::fs::copy(path, &copy)?;
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", copy.display())).await?;
        let check: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await?;
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM urls").fetch_one(&mut conn).await?;
        conn.close().await.ok();
        Ok::<_, Box<dyn std::error::Error>>(check == "ok" && count == n)
    };
    read.await.unwrap_or(false)
}

/// The service on the SQLite database `url` names, configured like production.
async fn app_on(url: &str) -> TestApp {
    let config = Config::load_from(None, |k| match k {
        "DATABASE_URL" => Some(url.to_owned()),
        "SITEMAPD_PUBLIC_URL" => Some(PUBLIC_URL.into()),
        "SITEMAPD_API_TOKENS" => Some(String::new()),
        _ => None,
    })
    .unwrap();
    let store = sitemapd::store::open(&options(&config)).await.unwrap();
    let router = sitemapd::app(AppState::new(store.clone(), &config));
    TestApp::from_parts(store, config, router)
}

async fn assert_refused(app: &TestApp, why: &str) {
    for (name, r) in [
        ("PUT", app.put_json(&json!([{"loc": loc("refused")}])).await),
        ("DELETE", app.delete_loc(&loc("a")).await),
        ("/readyz", app.get("/readyz", &[]).await),
    ] {
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{name} after {why}: {}", r.text());
        assert_eq!(r.header("retry-after"), Some("5"), "{name} after {why}");
    }
}

/// Waits (at most 10 s) for a file in `dir` whose name starts with `prefix`.
async fn file_appears(dir: &Path, prefix: &str) -> PathBuf {
    let started = Instant::now();
    loop {
        let found = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.strip_prefix(prefix).is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
        });
        if let Some(found) = found {
            return found;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no {prefix}* in {} after 10 s", dir.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `cp backup.db sitemapd.db` under a running server keeps the inode. The server refuses writes, never writes
/// into the restored file (no checkpoint of its log into it, at shutdown either), and the restored file then
/// opens whole with the backup's content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_copied_over_the_file_is_refused_and_never_written_to() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    app.put_paths(&["a"]).await;
    let path = db_path(&app);
    let dir = path.parent().unwrap().to_owned();
    let backup = dir.join("backup.db");
    sitemapd::store::backup(&app.db.url, &backup).await.unwrap();
    app.put_paths(&["b"]).await;

    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&path);
    std::fs::copy(&backup, &path).unwrap();
    assert_eq!(inode(&path), before, "a copy over the file keeps its inode, as cp does");
    assert_refused(&app, "a backup was copied over the file").await;

    app.store.close().await;
    let aside = file_appears(&dir, "test.db-wal.overwritten-").await;
    assert!(aside.metadata().unwrap().len() > 0, "the log of what was served is kept aside");
    assert_eq!(locs_in_file_alone(&path).await, [loc("a")], "the restored file holds the backup, untouched");
    // A new process (the test's own still holds the old connections, as an exiting server would not) opens it,
    // migrates and reads it.
    let out = Command::new(env!("CARGO_BIN_EXE_sitemapd"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs([("DATABASE_URL", app.db.url.as_str()), ("SITEMAPD_PUBLIC_URL", PUBLIC_URL)])
        .arg("export")
        .output()
        .unwrap();
    assert!(out.status.success(), "sitemapd opens the restored file: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{{\"loc\":\"{}\"}}\n", loc("a")));
}

/// `rm sitemapd.db-wal` under a running server: SQLite would go on appending to the unlinked log, and a crash
/// would lose everything in it. The server refuses writes and copies the log into the database file, so the file
/// alone holds every acknowledged write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_log_is_copied_into_the_file_and_writes_are_refused() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    app.put_paths(&["a", "b"]).await;
    let path = db_path(&app);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0, "the writes are in the log");
    std::fs::remove_file(&wal).unwrap();
    assert_refused(&app, "the log was deleted").await;
    // The rescue runs when the deletion is first found (here by the PUT above): wait for it to land.
    let started = Instant::now();
    while try_locs_in_file_alone(&path).await.map_or(0, |l| l.len()) < 2 {
        assert!(started.elapsed() < Duration::from_secs(10), "the log was not copied into the file");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(locs_in_file_alone(&path).await, [loc("a"), loc("b")]);
}

/// Through a symbolic link to the database file, SQLite keeps the log beside the real file: its deletion is found
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_log_is_found_through_a_symbolic_link() {
    let real = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("sitemapd.db");
    std::fs::write(real.path().join("sitemapd.db"), b"").unwrap();
    std::os::unix::fs::symlink(real.path().join("sitemapd.db"), &link).unwrap();
    let url = format!("sqlite://{}", link.display());
    let app = app_on(&url).await;
    app.put_paths(&["a"]).await;
    assert!(!links.path().join("sitemapd.db-wal").exists(), "the log is beside the real file");
    std::fs::remove_file(real.path().join("sitemapd.db-wal")).unwrap();
    assert_refused(&app, "the log was deleted (through a link)").await;
}

/// A file deleted just before shutdown (found first by the shutdown itself, before the watcher's next look): the
/// copy is still written, before the connections close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_deleted_just_before_shutdown_is_still_copied() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    app.put_paths(&["a", "b"]).await;
    let path = db_path(&app);
    std::fs::remove_file(&path).unwrap();
    app.store.close().await;
    let copy = file_appears(path.parent().unwrap(), "test.db.rescued-").await;
    assert_eq!(locs_in_file_alone(&copy).await, [loc("a"), loc("b")]);
}

/// `rm sitemapd.db` (its directory kept): the data lives on in the unlinked file only; the server writes a whole
/// copy beside the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_file_is_copied_whole_beside_its_path() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    app.put_paths(&["a", "b"]).await;
    let path = db_path(&app);
    std::fs::remove_file(&path).unwrap();
    assert_refused(&app, "the file was deleted").await;
    let copy = file_appears(path.parent().unwrap(), "test.db.rescued-").await;
    // The copy is synced once written: read it when whole.
    let started = Instant::now();
    while !whole_with(&copy, 2).await {
        assert!(started.elapsed() < Duration::from_secs(10), "the rescued copy was not written whole");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(locs_in_file_alone(&copy).await, [loc("a"), loc("b")]);
}

/// An 8 MiB tmpfs, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Panics where mounting is not possible (the test is ignored unless run by root: see `build.rs`).
    fn mount() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(out.status.success(), "cannot mount a tmpfs: {}", String::from_utf8_lossy(&out.stderr));
        Self { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).output();
    }
}

/// A full disk under SQLite: each write is 503 with `Retry-After` (never 500: the writer connection that SQLite
/// rolled back under sqlx is replaced), `/readyz` is 503, and once there is room again both work without a
/// restart. Every write answered 200 is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_tmpfs, ignore = "needs root with CAP_SYS_ADMIN, to mount a tmpfs")]
async fn a_full_disk_answers_503_and_writes_resume_when_there_is_room() {
    let disk = SmallDisk::mount();
    let url = format!("sqlite://{}", disk.dir.path().join("sitemapd.db").display());
    let app = app_on(&url).await;

    let mut acknowledged: Vec<String> = Vec::new();
    let batch = |n: usize| -> Vec<String> { (0..200).map(|i| loc(&format!("{n}/{i}/{}", "x".repeat(200)))).collect() };
    let put = |locs: Vec<String>| {
        let body: Value = locs.iter().map(|l| json!({"loc": l})).collect();
        let app = &app;
        async move { app.put_json(&body).await }
    };
    let r = put(batch(0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    acknowledged.extend(batch(0));

    // Fill the disk.
    let filler = disk.dir.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![7u8; 64 << 10];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    // Before any write fails: a process started on a full disk is not ready either.
    let r = app.get("/readyz", &[]).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "/readyz on a full disk, no write yet: {}", r.text());
    let mut refused = 0;
    for n in 1..=12 {
        let r = put(batch(n)).await;
        match r.status {
            StatusCode::OK => acknowledged.extend(batch(n)),
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(r.header("retry-after"), Some("5"));
                refused += 1;
            }
            other => panic!("write {n} on a full disk: {other} {}", r.text()),
        }
    }
    assert!(refused >= 8, "a full disk refuses writes ({refused} of 12 refused)");
    let r = app.delete_loc(&acknowledged[0]).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "a delete on a full disk: {}", r.text());
    let r = app.get("/readyz", &[]).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "/readyz on a full disk: {}", r.text());

    std::fs::remove_file(&filler).unwrap();
    let r = app.get("/readyz", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "/readyz once there is room: {}", r.text());
    let r = put(batch(99)).await;
    assert_eq!(r.status, StatusCode::OK, "a write once there is room: {}", r.text());
    acknowledged.extend(batch(99));
    for l in [&acknowledged[0], &acknowledged[acknowledged.len() - 1]] {
        assert_eq!(app.find(l).await.status, StatusCode::OK, "{l} is stored");
    }
    let stored: i64 = {
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query_scalar("SELECT count(*) FROM urls").fetch_one(&mut conn).await.unwrap()
    };
    assert_eq!(stored, i64::try_from(acknowledged.len()).unwrap(), "every acknowledged write is stored");
    app.store.close().await;
}
