//! Build script: the probe that decides which tests show as ignored because something they need is missing here.
//! (The embedded migrations are crates/sitemapd-store's, which re-runs its own build script when one is added.)
//!
//! A test that needs Postgres, Chromium, xmllint, … carries `#[cfg_attr(sitemapd_no_<what>, ignore = "needs …")]`,
//! so that `cargo test` counts it as ignored, with the reason, rather than as passed without running. libtest can
//! only ignore a test when it is compiled, hence a probe here, redone whenever one of the variables it reads
//! changes (`rerun-if-env-changed`), so that setting `TEST_DATABASE_URL` or changing `PATH` is seen without
//! `cargo clean`. What a probe cannot see change (a program installed into a directory already on `PATH`) keeps
//! the test ignored until the next rebuild (`touch build.rs`); the other way round, the test runs and fails, since
//! the tests never skip at run time. Under CI (`CI` set) nothing is ignored: whatever is missing fails its tests.
//! `TEST_WITHOUT=chromium,postgres,…` makes the probe treat those as missing (not under CI).

use std::path::{Path, PathBuf};

/// Whether a prerequisite is here.
type Probe = fn() -> bool;

/// Each prerequisite: its name in `TEST_WITHOUT` (and in the cfg `sitemapd_no_<name>`), and its probe.
const PREREQUISITES: &[(&str, Probe)] = &[
    ("postgres", || set("TEST_DATABASE_URL")),
    ("replica", || set("TEST_DATABASE_READ_URL")),
    ("pooler", || set("TEST_DATABASE_POOLER_URL")),
    ("chromium", || on_path("chromium") || on_path("chromium-browser")),
    ("xmllint", || on_path("xmllint")),
    ("curl", || on_path("curl") && on_path("gunzip")),
    ("script", || on_path("script")),
    ("python3", || on_path("python3")),
    ("node", || on_path("node")),
    ("initdb", || Path::new("/usr/lib/postgresql/15/bin/initdb").is_file()),
    ("tmpfs", may_mount),
    ("nginx", || on_path("nginx") || Path::new("/usr/sbin/nginx").is_file()),
    // The Atom feed checks (tests/feeds/): trang turns the RELAX NG compact schemas into the XML form xmllint reads;
    // the real readers are installed by tests/feeds/setup.sh (which touches build.rs, so this probe runs again).
    ("trang", || on_path("trang")),
    ("feedparser", || in_tree("target/feeds-venv/bin/python") && in_feeds_venv("feedparser/__init__.py")),
    ("rss_parser", || on_path("node") && in_tree("tests/feeds/node/node_modules/rss-parser/package.json")),
    // The S3 server of the publishing tests (moto's server mode), installed by tests/s3/setup.sh.
    ("moto", || in_tree("target/s3-venv/bin/moto_server")),
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for var in ["CI", "PATH", "TEST_WITHOUT", "TEST_DATABASE_URL", "TEST_DATABASE_READ_URL", "TEST_DATABASE_POOLER_URL"]
    {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let names: Vec<String> = PREREQUISITES.iter().map(|(name, _)| format!("sitemapd_no_{name}")).collect();
    println!("cargo::rustc-check-cfg=cfg({})", names.join(", "));
    let without = std::env::var("TEST_WITHOUT").unwrap_or_default();
    if std::env::var_os("CI").is_some() {
        if !without.is_empty() {
            println!("cargo::warning=CI is set: TEST_WITHOUT={without} is not followed, nothing is ignored");
        }
        return;
    }
    let without: Vec<&str> = without.split(',').map(str::trim).filter(|w| !w.is_empty()).collect();
    for unknown in without.iter().filter(|w| !PREREQUISITES.iter().any(|(name, _)| name == *w)) {
        let known: Vec<&str> = PREREQUISITES.iter().map(|(name, _)| *name).collect();
        println!("cargo::warning=TEST_WITHOUT names {unknown}, which is none of {}", known.join(", "));
    }
    for (name, present) in PREREQUISITES {
        if without.contains(name) || !present() {
            println!("cargo::rustc-cfg=sitemapd_no_{name}");
        }
    }
}

fn set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}

/// Whether `program` is an executable file in a directory of `PATH`, as the tests run it (`Command::new`).
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.iter()
        .map(|dir| dir.join(program))
        .any(|path| std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Whether `path`, relative to the package's root, is a file.
fn in_tree(path: &str) -> bool {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).is_file()
}

/// Whether `path` is a file in the site-packages of the feed readers' venv (`target/feeds-venv`), whatever its Python.
fn in_feeds_venv(path: &str) -> bool {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/feeds-venv/lib");
    std::fs::read_dir(lib).is_ok_and(|dirs| dirs.flatten().any(|d| d.path().join("site-packages").join(path).is_file()))
}

/// Whether `mount -t tmpfs` can work here: run by root (mount(8) refuses anyone else) with `CAP_SYS_ADMIN` (which a
/// container's root often lacks). Read from `/proc/self/status`, without running anything.
fn may_mount() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or_default();
    let root = field("Uid:").split_whitespace().take(2).all(|id| id == "0");
    const CAP_SYS_ADMIN: u32 = 21;
    let caps = u64::from_str_radix(field("CapEff:"), 16).unwrap_or(0);
    root && caps & (1 << CAP_SYS_ADMIN) != 0
}
