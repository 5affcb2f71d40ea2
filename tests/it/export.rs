//! `sitemapd export`: every stored entry as NDJSON in the write API's form. Sent back to the same database it
//! changes nothing (every entry `unchanged`), on both backends; by site, only that site's; the binary writes the
//! data alone on standard output (its log on stderr), or to a new file.

use std::process::Command;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both_backends;
use crate::extensions::full_entry;
use crate::support::{Backend, PUBLIC_URL, TestApp};

const SITES: &str = "default=https://www.example.com/, shop=https://shop.example.com/";

/// A data set of every kind of entry: bare, with each optional field, with every extension, and on two sites.
fn data_set() -> Vec<Value> {
    let mut entries = vec![
        json!({"loc": format!("{PUBLIC_URL}/")}),
        json!({"loc": format!("{PUBLIC_URL}/a?x=1&y=2"), "lastmod": "2024-05-01T08:20+02:00", "changefreq": "WEEKLY",
               "priority": 0.8}),
        json!({"loc": format!("{PUBLIC_URL}/caf\u{e9}"), "priority": 0.0}),
        json!({"loc": format!("{PUBLIC_URL}/zero"), "priority": -0.0, "lastmod": "2024-05-01"}),
        json!({"loc": "https://shop.example.com/x", "priority": 1.0}),
    ];
    entries.extend((0..3).map(|i| full_entry(&format!("full/{i}"))));
    entries
}

async fn export(app: &TestApp, site: Option<i64>) -> String {
    let mut out = Vec::new();
    sitemapd::export::export(&*app.store, site, &mut out).await.expect("export");
    String::from_utf8(out).expect("UTF-8")
}

async fn an_export_sent_back_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_SITES", SITES)]).await;
    let entries = data_set();
    let r = app.put_json(&Value::Array(entries.clone())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let pages_before = app.get("/sitemap-1.xml", &[("host", "www.example.com")]).await;

    let ndjson = export(&app, None).await;
    let lines: Vec<Value> = ndjson.lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
    assert_eq!(lines.len(), entries.len(), "{ndjson}");
    assert!(ndjson.ends_with('\n'));
    assert!(lines.iter().all(|l| l.get("site").is_none() && l.get("sitemap").is_none()), "the write API's fields");
    assert_eq!(lines[1]["lastmod"], "2024-05-01T06:20:00Z", "as stored, normalized");
    assert!(lines[0].as_object().unwrap().len() == 1, "empty fields are left out: {}", lines[0]);
    assert_eq!(lines[5]["videos"][0]["rating"], 4.5);

    let r = app.put_ndjson(&ndjson).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let n = entries.len();
    assert_eq!(r.json(), json!({"received": n, "created": 0, "updated": 0, "unchanged": n}));
    let pages_after = app.get("/sitemap-1.xml", &[("host", "www.example.com")]).await;
    assert_eq!(pages_after.header("etag"), pages_before.header("etag"));

    // One site only.
    let shop = app.store.sites().by_name("shop").unwrap().id;
    let shop_lines: Vec<String> = export(&app, Some(shop)).await.lines().map(str::to_owned).collect();
    assert_eq!(shop_lines, [r#"{"loc":"https://shop.example.com/x","priority":1.0}"#]);
}

async fn the_binary_writes_ndjson_alone_or_to_a_new_file(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["a", "b"]).await;
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_sitemapd");
    let vars = [("DATABASE_URL", app.db.url.as_str()), ("SITEMAPD_PUBLIC_URL", PUBLIC_URL), ("RUST_LOG", "info")];
    let run = |args: &[&str]| {
        Command::new(bin)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(vars)
            .args(args)
            .output()
            .expect("run sitemapd")
    };
    let out = run(&["export"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = format!("{{\"loc\":\"{PUBLIC_URL}/a\"}}\n{{\"loc\":\"{PUBLIC_URL}/b\"}}\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "the data alone on stdout");
    assert!(String::from_utf8_lossy(&out.stderr).contains("exported"), "the log on stderr");

    let out = run(&["export", "--output", "urls.ndjson"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("urls.ndjson")).unwrap(), expected);
    let again = run(&["export", "--output", "urls.ndjson"]);
    assert!(!again.status.success(), "an existing file is never overwritten");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("cannot create"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let unknown = run(&["export", "--site", "shop"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no site is named \"shop\""));
}

/// `export` and `backup` read a database: run where there is none (the default `sqlite://sitemapd.db` is relative
/// to the working directory), they refuse, naming the absolute path they looked at, and create nothing (they
/// used to create an empty database and export 0 entries, exit 0).
#[test]
fn export_and_backup_refuse_a_database_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().canonicalize().unwrap();
    for args in [&["export"][..], &["export", "--output", "x.ndjson"], &["backup", "b.db"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_sitemapd"))
            .current_dir(&here)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(args)
            .output()
            .expect("run sitemapd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("no database at {}/sitemapd.db", here.display())), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let left: Vec<_> = std::fs::read_dir(&here).unwrap().collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
}

both_backends!(an_export_sent_back_changes_nothing, the_binary_writes_ndjson_alone_or_to_a_new_file);
