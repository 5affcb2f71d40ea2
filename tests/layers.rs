//! The modules of the two top crates form layers: each imports only the layers below it (ARCHITECTURE.md). Cargo
//! enforces this between crates (and tests/crate_layers.rs what each crate may depend on); within a crate's `src/`
//! this test does. It reads every `.rs` file of `crates/sitemapd-server/src/` and of the root's `src/` but the
//! binary (`main.rs` and `cli/`, on top), takes each `crate::<path>` it names outside `#[cfg(test)]` items (in
//! code, `use` groups and comments alike, so a doc link counts), and checks it against the crate's table. A module
//! is a file or a folder; a table may list a folder's file apart (`telemetry::scrape`) when it sits higher than
//! its folder. A module that is in no layer fails the test: a new module is placed in the table.

use std::path::{Path, PathBuf};

/// A crate's layers, bottom first. A module may name the modules of the layers below its own, never its own
/// layer's other modules (so that no two modules of a layer depend on each other) and never a layer above.
type Layers = &'static [(&'static str, &'static [&'static str])];

/// crates/sitemapd-server.
const SERVER: Layers = &[
    ("core (crates/sitemapd-core)", &["backoff", "crawler", "domain", "health", "hreflang", "page", "placement"]),
    ("leaves (telemetry re-exports crates/sitemapd-metrics)", &["access", "http_client", "redact", "telemetry"]),
    ("the store (crates/sitemapd-store), the worker shape", &["store", "worker"]),
    ("admission and batching (crates/sitemapd-ingest)", &["ingest"]),
    ("HTTP errors", &["error"]),
    ("the connection and its request, crawler telemetry", &["crawlers", "net"]),
    ("settings", &["config"]),
    ("serving sitemaps", &["sitemap"]),
    ("feeds, served beside the sitemaps", &["feed"]),
    (
        "change notification, URL health, WebSub publishing, publishing to object storage",
        &["checker", "indexnow", "publish", "websub"],
    ),
    ("the shared state", &["state"]),
    ("the background workers' list", &["workers"]),
    ("HTTP routes", &["api", "telemetry::scrape", "view"]),
    ("the router and the serving loops", &["server"]),
    ("the crate's map (lib.rs)", &["lib"]),
];

/// The root package's library: the server crate's re-exports below its own modules.
const ROOT: Layers = &[
    (
        "crates/sitemapd-server (re-exported whole)",
        &[
            "access",
            "api",
            "backoff",
            "checker",
            "config",
            "crawler",
            "crawlers",
            "domain",
            "error",
            "feed",
            "health",
            "hreflang",
            "http_client",
            "indexnow",
            "ingest",
            "net",
            "page",
            "placement",
            "publish",
            "redact",
            "server",
            "sitemap",
            "state",
            "store",
            "telemetry",
            "view",
            "websub",
            "worker",
            "workers",
        ],
    ),
    ("the commands' files, export", &["db_files", "export"]),
    ("import", &["import"]),
    ("the crate's map (lib.rs)", &["lib"]),
];

/// Items of the crate root that are another module's: `crate::AppState` is `state`'s.
const ROOT_ITEMS: &[(&str, &str)] =
    &[("AppState", "state"), ("app", "server"), ("serve", "server"), ("serve_threads", "server"), ("Served", "server")];

/// The layer of a module path (`a::b::c`): that of its longest prefix the table lists.
fn unit_of(layers: Layers, path: &str) -> Option<(&'static str, usize)> {
    let segments: Vec<&str> = path.split("::").collect();
    (1..=segments.len()).rev().find_map(|n| {
        let prefix = segments[..n].join("::");
        layers.iter().enumerate().find_map(|(i, (_, modules))| modules.iter().find(|m| **m == prefix).map(|m| (*m, i)))
    })
}

/// The module path of a file: `src/x.rs` and `src/x/mod.rs` are `x`, `src/x/y.rs` is `x::y`; `src/lib.rs` is `lib`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src/").with_extension("");
    let mut parts: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.len() > 1 && parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ reads") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text with the items under `#[cfg(test)]` blanked (a one-line item, or one whose braces close later), its
/// lines kept in place so that line numbers stay the file's.
fn without_tests(text: &str) -> String {
    let mut kept = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        kept.push('\n');
        let mut depth = 0i64;
        for item in lines.by_ref() {
            kept.push('\n');
            depth += item.matches('{').count() as i64 - item.matches('}').count() as i64;
            if depth <= 0 && (item.trim_end().ends_with('}') || item.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    kept
}

/// Each (line, path, in a comment) that `text` names as `crate::<path>` or in a `crate::{…}` group: the path up to
/// its first character that is not part of one (`crate::store::{A, B}` names `store`).
fn named(text: &str) -> Vec<(usize, String, bool)> {
    let first_segment = |s: &str| -> String {
        let path: String = s.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        path.trim_end_matches(':').to_owned()
    };
    let mut found = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = text[..at].matches('\n').count() + 1;
        let comment = text[line_start..].trim_start().starts_with("//");
        let rest = &text[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            found.push((line, first_segment(rest), comment));
            continue;
        };
        // A group (over lines, maybe): its items at the top level, split at its commas; each item's first segment.
        let (mut depth, mut item, mut items) = (0, String::new(), Vec::new());
        for c in group.chars() {
            match c {
                '}' if depth == 0 => break,
                ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                '{' => depth += 1,
                '}' => depth -= 1,
                _ if depth == 0 => item.push(c),
                _ => {}
            }
        }
        items.push(item);
        found.extend(items.iter().map(|i| (line, first_segment(i), comment)));
    }
    found.retain(|(_, name, _)| !name.is_empty());
    found
}

/// What `src` names against `layers`: each problem, one line each. `binary` lists the files and folders of the
/// binary under `src/`, which are not read.
fn check(src: &Path, layers: Layers, binary: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in files.iter().filter(|f| !binary.iter().any(|b| f.strip_prefix(src).is_ok_and(|r| r.starts_with(b)))) {
        let Some((module, own)) = unit_of(layers, &module_of(src, file)) else {
            wrong.push(format!("{}: the module {} is in no layer of the table", file.display(), module_of(src, file)));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file reads");
        for (line, name, comment) in named(&without_tests(&text)) {
            let first = name.split("::").next().unwrap_or_default();
            let path = match ROOT_ITEMS.iter().find(|(item, _)| *item == first) {
                Some((_, owner)) => (*owner).to_owned(),
                None => name.clone(),
            };
            let Some((target, theirs)) = unit_of(layers, &path) else {
                wrong.push(format!("{}:{line}: crate::{name} is in no layer of the table", file.display()));
                continue;
            };
            if target == module || theirs < own {
                continue;
            }
            let (their_layer, own_layer) = (layers[theirs].0, layers[own].0);
            let how = if theirs == own { "its own layer" } else { "a layer above" };
            let names = if comment { "names in a comment" } else { "names" };
            wrong.push(format!(
                "{}:{line}: {module} ({own_layer}) {names} crate::{name}, of {how} ({target}: {their_layer})",
                file.display()
            ));
        }
    }
    wrong
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = check(&root.join("crates/sitemapd-server/src"), SERVER, &[]);
    wrong.extend(check(&root.join("src"), ROOT, &["main.rs", "cli"]));
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_finds_paths_groups_and_skips_tests() {
    let text = "use crate::config::Config;\nuse crate::{domain::{Loc, Sites}, error, store::Store};\n\
                use crate::{\n    net::host::Hosts,\n    sitemap,\n};\n/// See [`crate::AppState`].\n#[cfg(test)]\nmod tests {\n    use crate::api;\n}\n\
                #[cfg(test)]\nuse crate::view;\nfn f() { crate::telemetry::x(); }\n";
    let names: Vec<(usize, String, bool)> = named(&without_tests(text));
    let names: Vec<(usize, &str, bool)> = names.iter().map(|(l, n, c)| (*l, n.as_str(), *c)).collect();
    assert_eq!(
        names,
        [
            (1, "config::Config", false),
            (2, "domain", false),
            (2, "error", false),
            (2, "store::Store", false),
            (3, "net::host::Hosts", false),
            (3, "sitemap", false),
            (7, "AppState", true),
            (14, "telemetry::x", false)
        ]
    );
}
