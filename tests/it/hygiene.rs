//! The tests' own rules, checked on their source (`tests/it/`): a test that lacks what it needs fails or is ignored
//! by `build.rs`, never returns early as passed; every process a test spawns is under a guard that kills it
//! ([`crate::support::KillOnDrop`]); no fixed sleep gates an assertion: a sleep is in a polling loop, or says on
//! the comment above it why it is not a gate (`Not a gate: …`: a slow client's pace, a time distance the test
//! measures).

use std::path::{Path, PathBuf};

/// What a sleep that is not in a loop must say on the comment lines just above it (or on its own line).
const MARKER: &str = "not a gate";

/// Each rule broken in `source`, one line each: `line: what`.
fn broken_rules(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    let flat = source.split_whitespace().collect::<Vec<_>>().join(" ");
    for rule in [
        ("else { return }", "a test that returns early passes silently: fail, or `ignore` it in build.rs"),
        ("else { return; }", "a test that returns early passes silently: fail, or `ignore` it in build.rs"),
    ] {
        if flat.contains(rule.0) {
            found.push(format!("`{}`: {}", rule.0, rule.1));
        }
    }
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let next = lines.get(i + 1).map_or("", |l| l.trim_start());
        // A process's spawn is the one whose `io::Result` is unwrapped; a task's (`Running`, `JoinHandle`) is not.
        let spawned =
            code.split_once(".spawn()").map(|(_, after)| if after.trim().is_empty() { next } else { after.trim() });
        if spawned.is_some_and(|after| [".unwrap", ".expect(", "?"].iter().any(|s| after.starts_with(s))) {
            found.push(format!("{}: a process spawned without a guard: use `spawn_guarded()`", i + 1));
        }
        if code.contains("sleep(") && !marked(&lines, i) && !in_loop(&lines, i) {
            found.push(format!("{}: a sleep outside a polling loop, without a `// Not a gate: …` comment", i + 1));
        }
        let lower = code.to_lowercase();
        if lower.contains("println!(") && lower.contains("skipping") {
            found.push(format!("{}: a test that says it skips passes silently: `ignore` it in build.rs", i + 1));
        }
    }
    found
}

/// Whether line `i`, or the comment lines just above it, say [`MARKER`].
fn marked(lines: &[&str], i: usize) -> bool {
    let says = |l: &str| l.to_lowercase().contains(MARKER);
    says(lines[i]) || lines[..i].iter().rev().take_while(|l| l.trim_start().starts_with("//")).any(|l| says(l))
}

/// Whether line `i` is in the body of a `loop`, `while` or `for` of its function (by indentation: rustfmt's).
fn in_loop(lines: &[&str], i: usize) -> bool {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut level = indent(lines[i]);
    for line in lines[..i].iter().rev().filter(|l| !l.trim().is_empty()) {
        if indent(line) >= level {
            continue;
        }
        let header = line.trim_start();
        if ["loop {", "while ", "for "].iter().any(|k| header.starts_with(k)) || header.contains("= loop {") {
            return true;
        }
        level = indent(line);
        if level == 0 {
            return false;
        }
    }
    false
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn no_test_passes_silently_leaves_a_process_behind_or_waits_a_fixed_time() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut broken = Vec::new();
    for path in sources(&dir) {
        // This file quotes what it looks for; the guard is where `spawn()` is called on purpose.
        if path.ends_with("hygiene.rs") || path.ends_with("support/child.rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(&dir).unwrap().display().to_string();
        broken.extend(broken_rules(&source).into_iter().map(|b| format!("{name}:{b}")));
    }
    assert!(broken.is_empty(), "the tests break their own rules (tests/it/hygiene.rs):\n{}", broken.join("\n"));
}

/// Each rule finds what it is about, and lets the allowed forms pass.
#[test]
fn each_rule_finds_its_case() {
    let early = "async fn t(b: Backend) {\n    let Some(app) = TestApp::spawn(b, &[]).await else { return };\n}\n";
    assert_eq!(broken_rules(early).len(), 1, "{:?}", broken_rules(early));
    let early = "    let Some(app) = spawn(b).await else {\n        return;\n    };\n";
    assert_eq!(broken_rules(early).len(), 1);
    assert!(broken_rules("    let Some(last) = batch.last() else { return out };\n").is_empty());

    let spawned = "    let child = Command::new(BIN).spawn().unwrap();\n";
    assert_eq!(broken_rules(spawned).len(), 1);
    let spawned = "    let child = Command::new(BIN)\n        .arg(x)\n        .spawn()\n        .expect(\"run\");\n";
    assert_eq!(broken_rules(spawned).len(), 1);
    assert!(broken_rules("    let child = Command::new(BIN).spawn_guarded();\n").is_empty());
    assert!(broken_rules("    let running = checker(&app).spawn();\n").is_empty(), "a task's spawn is no process");

    let gate =
        "fn t() {\n    put();\n    tokio::time::sleep(Duration::from_millis(300)).await;\n    assert!(done());\n}\n";
    assert_eq!(broken_rules(gate).len(), 1);
    let marked = "fn t() {\n    // Not a gate: the lag this test measures.\n    std::thread::sleep(D);\n}\n";
    assert!(broken_rules(marked).is_empty());
    let polled = "fn t() {\n    let r = loop {\n        if x {\n            break 1;\n        }\n        sleep(D).await;\n    };\n}\n";
    assert!(broken_rules(polled).is_empty());
    let after_a_block = "fn t() {\n    while x {\n        y();\n    }\n    sleep(D);\n}\n";
    assert_eq!(broken_rules(after_a_block).len(), 1, "a sleep after a loop is not in it");

    assert_eq!(broken_rules("    eprintln!(\"skipping: no Postgres\");\n").len(), 1);
}
