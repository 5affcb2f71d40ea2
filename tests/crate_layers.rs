//! The workspace's crates are its layers (core, metrics, store, ingest, server, then the root package: the binary),
//! and this test holds their dependencies to the table below: each crate
//! may depend (normal dependencies, direct or not) on the sitemapd crates below it and on none of the crates it
//! names as refused. Cargo already refuses a cycle between crates; this refuses a layer that grows a dependency on
//! a runtime, a database driver or HTTP that its place does not allow (a `tokio` in the pure core, say).
//!
//! It reads `cargo tree -e normal` of each crate (offline, from Cargo.lock).

use std::collections::BTreeSet;
use std::process::Command;

/// Bottom to top: the crate, the sitemapd crates it may use, the crates.io crates it must not reach.
const LAYERS: &[(&str, &[&str], &[&str])] = &[
    ("sitemapd-core", &[], &["tokio", "sqlx", "axum", "hyper", "reqwest", "tower", "metrics"]),
    ("sitemapd-metrics", &[], &["sqlx", "axum", "hyper", "reqwest", "tower"]),
    ("sitemapd-store", &["sitemapd-core", "sitemapd-metrics"], &["axum", "hyper", "reqwest", "tower"]),
    (
        "sitemapd-ingest",
        &["sitemapd-core", "sitemapd-metrics", "sitemapd-store"],
        &["axum", "hyper", "reqwest", "tower"],
    ),
    (
        "sitemapd-server",
        &["sitemapd-core", "sitemapd-metrics", "sitemapd-store", "sitemapd-ingest"],
        // object_store's `aws`, `gcp` and `azure` features would link aws-lc-rs beside ring: its `-base` features only.
        &["clap", "indicatif", "tikv-jemallocator", "aws-lc-rs", "aws-lc-sys"],
    ),
    ("sitemapd", &["sitemapd-core", "sitemapd-metrics", "sitemapd-store", "sitemapd-ingest", "sitemapd-server"], &[]),
];

/// The names of the packages `cargo tree` lists for `package`'s normal dependencies, itself included.
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none", "-p", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let mut problems = Vec::new();
    for (i, (package, allowed, refused)) in LAYERS.iter().enumerate() {
        let deps = normal_dependencies(package);
        assert!(deps.contains(*package), "cargo tree -p {package} lists the package itself: {deps:?}");
        for dep in deps.iter().filter(|d| d.starts_with("sitemapd") && d.as_str() != *package) {
            if !allowed.contains(&dep.as_str()) {
                let above = LAYERS[i..].iter().any(|(p, ..)| p == dep);
                let why = if above { "a layer above it or beside it" } else { "not in its row of the table" };
                problems.push(format!("{package} depends on {dep}: {why}"));
            }
        }
        for dep in refused.iter().filter(|r| deps.contains(**r)) {
            problems.push(format!("{package} depends on {dep}, which its layer refuses"));
        }
    }
    assert!(problems.is_empty(), "layer violations:\n{}", problems.join("\n"));
}

/// Every crate under `crates/` has a row (and the root package, `sitemapd`, its own), so a new crate cannot skip
/// the check.
#[test]
fn every_workspace_crate_has_a_row() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let crates: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("read crates/")
        .map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .collect();
    let rows: BTreeSet<String> = LAYERS.iter().map(|(p, ..)| (*p).to_owned()).filter(|p| p != "sitemapd").collect();
    assert_eq!(crates, rows, "crates/ and the LAYERS table differ");
}
