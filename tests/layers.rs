//! The root crate's modules form layers: each imports only the layers below it (ARCHITECTURE.md). Cargo enforces
//! this between crates (and tests/crate_layers.rs what each crate may depend on); within `src/` this test does. It reads every `src/**/*.rs` but `main.rs` (the binary, on
//! top), takes each `crate::<module>` it names outside `#[cfg(test)]` items (in code, `use` groups and comments
//! alike, so a doc link counts), and checks it against [`LAYERS`]. A module that is in no layer fails the test:
//! a new module is placed in the table.

use std::path::{Path, PathBuf};

/// The layers, bottom first. A module may name the modules of the layers below its own, never its own layer's
/// other modules (so that no two modules of a layer depend on each other) and never a layer above.
const LAYERS: &[(&str, &[&str])] = &[
    ("core (crates/sitemapd-core)", &["backoff", "crawler", "domain", "health", "page", "placement"]),
    (
        "leaves (telemetry re-exports crates/sitemapd-metrics)",
        &["access", "http_client", "line_ends", "redact", "telemetry"],
    ),
    ("metered leaves, the worker shape and the store (crates/sitemapd-store)", &["send_rate", "store", "worker"]),
    ("admission and batching (crates/sitemapd-ingest)", &["ingest"]),
    ("HTTP errors", &["error"]),
    ("request parts, crawler telemetry", &["body_budget", "crawlers", "host", "receive_rate"]),
    ("settings", &["config"]),
    ("serving, the SQLite files", &["db_files", "sitemap"]),
    ("change notification, URL health, export", &["checker", "export", "indexnow"]),
    ("the shared state, import", &["import", "state"]),
    ("the background workers' list", &["workers"]),
    ("HTTP routes", &["api", "scrape", "view"]),
    ("the router (lib.rs)", &["lib"]),
];

/// Items of the crate root that are another module's: `crate::AppState` is `state`'s.
const ROOT_ITEMS: &[(&str, &str)] = &[("AppState", "state"), ("app", "lib"), ("serve", "lib")];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

/// The module a file belongs to: `src/x.rs` and `src/x/…` are `x`; `src/lib.rs` is `lib`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src/");
    let first = relative.components().next().expect("a path").as_os_str().to_string_lossy().into_owned();
    first.strip_suffix(".rs").map(str::to_owned).unwrap_or(first)
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

/// Each (line, module, in a comment) that `text` names as `crate::<name>` or in a `crate::{…}` group.
fn named(text: &str) -> Vec<(usize, String, bool)> {
    let first_segment =
        |s: &str| -> String { s.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
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

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("main.rs")) {
        let module = module_of(&src, file);
        let Some(own) = layer_of(&module) else {
            wrong.push(format!("{}: the module {module} is in no layer of LAYERS", file.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file reads");
        for (line, name, comment) in named(&without_tests(&text)) {
            let target = ROOT_ITEMS.iter().find(|(item, _)| *item == name).map_or(name.as_str(), |(_, m)| m);
            if target == module {
                continue;
            }
            let Some(theirs) = layer_of(target) else {
                wrong.push(format!("{}:{line}: crate::{name} is in no layer of LAYERS", file.display()));
                continue;
            };
            if theirs < own {
                continue;
            }
            let (their_layer, own_layer) = (LAYERS[theirs].0, LAYERS[own].0);
            let how = if theirs == own { "its own layer" } else { "a layer above" };
            let names = if comment { "names in a comment" } else { "names" };
            wrong.push(format!(
                "{}:{line}: {module} ({own_layer}) {names} crate::{name}, of {how} ({target}: {their_layer})",
                file.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_finds_paths_groups_and_skips_tests() {
    let text = "use crate::config::Config;\nuse crate::{domain::{Loc, Sites}, error, store::Store};\n\
                use crate::{\n    host::Hosts,\n    sitemap,\n};\n/// See [`crate::AppState`].\n#[cfg(test)]\nmod tests {\n    use crate::api;\n}\n\
                #[cfg(test)]\nuse crate::view;\nfn f() { crate::telemetry::x(); }\n";
    let names: Vec<(usize, String, bool)> = named(&without_tests(text));
    let names: Vec<(usize, &str, bool)> = names.iter().map(|(l, n, c)| (*l, n.as_str(), *c)).collect();
    assert_eq!(
        names,
        [
            (1, "config", false),
            (2, "domain", false),
            (2, "error", false),
            (2, "store", false),
            (3, "host", false),
            (3, "sitemap", false),
            (7, "AppState", true),
            (14, "telemetry", false)
        ]
    );
}
