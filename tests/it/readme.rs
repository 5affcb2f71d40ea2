//! The documentation's commands, run as written. Every ```sh block of the Markdown files at the repository's root
//! and under `docs/` is run, in the order of [`RUN_BLOCKS`], against one built binary on a fresh SQLite database
//! with the documented settings (the defaults), each command's output compared with the one shown after `# →`; a
//! block there is not, or one missing, fails the test by name. Blocks in other fences (```console for commands
//! shown only, ```text, ```json, ```nginx, …) are not run; ```bash and ```shell are refused, so that no shell block
//! is left unrun by mistake. `target/release/sitemapd` in a block is the binary under test. So the examples cannot
//! drift from what sitemapd does. `…` in a shown output matches anything within one line.
//!
//! Also: every relative link of those files (`](path)`, `](path#anchor)`) names a file that exists and a heading
//! that it has.
//!
//! Needs `bash`, `curl` and `gunzip` (`.ci/run` installs them); without curl or gunzip the test shows as ignored
//! (build.rs), and under CI it fails.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::http::StatusCode;

use crate::both_backends;
use crate::support::{Backend, SpawnGuarded, TestApp};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_sitemapd");
/// The address the README's commands use; replaced by the test's own port.
const README_ADDRESS: &str = "localhost:8080";

/// One command of the block (possibly several lines) and the output shown after it.
#[derive(Debug, PartialEq)]
struct Step {
    command: String,
    expected: Option<String>,
}

/// The ```sh blocks, in the order they run (one server, one working directory: a block sees what the ones before it
/// stored): the file, the heading the block is under, and the fewest steps and shown outputs it must have.
const RUN_BLOCKS: &[(&str, &str, usize, usize)] = &[
    ("README.md", "Using it", 10, 10),
    ("docs/import.md", "Moving to sitemapd: import and export", 5, 5),
    ("docs/crawlers.md", "Where to see it", 2, 2),
    ("docs/operations.md", "The SQLite file, backup and restore", 3, 3),
    ("docs/sites.md", "Several sites", 1, 0),
    ("docs/publishing.md", "Trying it", 5, 5),
];

/// The Markdown files whose blocks run and whose links are checked: those at the root and under `docs/`, by path.
fn doc_files() -> Vec<String> {
    fn walk(root: &Path, dir: &str, out: &mut Vec<String>, deep: bool) {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let rel = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
            if e.file_type().unwrap().is_dir() {
                if deep {
                    walk(root, &rel, out, true);
                }
            } else if name.ends_with(".md") {
                out.push(rel);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(root, "", &mut files, false);
    walk(root, "docs", &mut files, true);
    files.sort();
    files
}

pub(crate) fn read_doc(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap()
}

/// A fenced block: its language (what follows the opening fence), the heading it is under, and its text.
#[derive(Debug)]
pub(crate) struct Fenced {
    pub(crate) lang: String,
    pub(crate) heading: String,
    pub(crate) text: String,
}

/// The fenced blocks of a Markdown text and its headings (outside blocks), in order. A fence may be indented (in a
/// list item); the block's lines are taken as they are.
pub(crate) fn fenced_blocks(markdown: &str) -> (Vec<Fenced>, Vec<String>) {
    let (mut blocks, mut headings) = (Vec::new(), Vec::new());
    let mut heading = String::new();
    let mut open: Option<Fenced> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        match open.as_mut() {
            Some(_) if trimmed.starts_with("```") => blocks.push(open.take().unwrap()),
            Some(block) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            None if trimmed.starts_with("```") => {
                let lang = trimmed.trim_start_matches('`').trim().to_owned();
                open = Some(Fenced { lang, heading: heading.clone(), text: String::new() });
            }
            None if line.starts_with('#') => {
                heading = line.trim_start_matches('#').trim().to_owned();
                headings.push(heading.clone());
            }
            None => {}
        }
    }
    assert!(open.is_none(), "a fenced block is not closed");
    (blocks, headings)
}

/// Every ```sh block of the documentation, as (file, heading, text), in file order; panics on a ```bash or
/// ```shell block.
fn run_blocks() -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for file in doc_files() {
        for block in fenced_blocks(&read_doc(&file)).0 {
            assert!(
                !matches!(block.lang.as_str(), "bash" | "shell" | "zsh"),
                "{file}, under {:?}: a ```{} block; use ```sh for a block the README test runs, ```console for \
                 commands shown only",
                block.heading,
                block.lang
            );
            if block.lang == "sh" {
                found.push((file.clone(), block.heading, block.text));
            }
        }
    }
    found
}

/// Splits a block into steps. A step is a run of command lines, then the lines of output shown (`# → line`, where
/// `#   text` continues the previous output line). A blank line or any other comment ends a step; a command after
/// shown output starts a new one.
fn steps(block: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut command = String::new();
    let mut expected: Option<Vec<String>> = None;
    let mut finish = |command: &mut String, expected: &mut Option<Vec<String>>| {
        if !command.trim().is_empty() {
            steps.push(Step { command: std::mem::take(command), expected: expected.take().map(|l| l.join("\n")) });
        }
        command.clear();
        *expected = None;
    };
    for line in block.lines() {
        if let Some(out) = line.strip_prefix("# →") {
            assert!(!command.trim().is_empty(), "an output with no command before it: {line}");
            expected.get_or_insert_with(Vec::new).push(out.strip_prefix(' ').unwrap_or(out).to_owned());
        } else if let (Some(more), Some(lines)) = (line.strip_prefix("#   "), expected.as_mut()) {
            lines.last_mut().unwrap().push_str(more.trim_start());
        } else if line.trim().is_empty() || line.starts_with('#') {
            finish(&mut command, &mut expected);
        } else {
            if expected.is_some() {
                finish(&mut command, &mut expected);
            }
            command.push_str(line);
            command.push('\n');
        }
    }
    finish(&mut command, &mut expected);
    steps
}

/// Whether `actual` is `expected`, where each `…` in `expected` stands for any text within one line.
fn matches(expected: &str, actual: &str) -> bool {
    // `parts` follow a `…`: some text of `actual` within its first line, then `parts[0]`, and so on.
    fn rest(parts: &[&str], actual: &str) -> bool {
        match parts {
            [] => unreachable!("split gives a part after each …"),
            [last] => actual.strip_suffix(last).is_some_and(|skipped| !skipped.contains('\n')),
            [part, more @ ..] => {
                let line_end = actual.find('\n').unwrap_or(actual.len());
                (0..=line_end)
                    .filter(|&i| actual.is_char_boundary(i))
                    .any(|i| actual[i..].starts_with(part) && rest(more, &actual[i + part.len()..]))
            }
        }
    }
    let parts: Vec<&str> = expected.split('…').collect();
    if parts.len() == 1 {
        return actual == expected;
    }
    actual.strip_prefix(parts[0]).is_some_and(|after| rest(&parts[1..], after))
}

pub(crate) fn wait_until_healthy(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("sitemapd exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("sitemapd did not start listening");
}

pub(crate) fn have(program: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {program}")]).output().is_ok_and(|o| o.status.success())
}

#[test]
#[cfg_attr(sitemapd_no_curl, ignore = "needs curl and gunzip")]
fn every_sh_block_of_the_docs_runs_as_shown() {
    assert!(have("curl") && have("gunzip"), "curl or gunzip is missing");
    let found = run_blocks();
    let names = |blocks: Vec<(&str, &str)>| blocks.iter().map(|(f, h)| format!("{f}: {h}")).collect::<Vec<_>>();
    let mut expected = names(RUN_BLOCKS.iter().map(|&(f, h, ..)| (f, h)).collect());
    let mut actual = names(found.iter().map(|(f, h, _)| (f.as_str(), h.as_str())).collect());
    expected.sort();
    actual.sort();
    assert_eq!(
        actual, expected,
        "the ```sh blocks of the docs (file: heading) are not those RUN_BLOCKS names: a block was removed, renamed or \
         added (add it to RUN_BLOCKS, in the order it runs, or fence it ```console if it cannot run here)"
    );
    let mut steps: Vec<(String, Step)> = Vec::new();
    for &(file, heading, min_steps, min_shown) in RUN_BLOCKS {
        let (.., text) = found.iter().find(|(f, h, _)| f == file && h == heading).unwrap();
        let block = self::steps(text);
        assert!(
            block.len() >= min_steps && block.iter().filter(|s| s.expected.is_some()).count() >= min_shown,
            "{file}: {heading}: fewer than {min_steps} commands or {min_shown} shown outputs: {block:#?}"
        );
        // `target/release/sitemapd` is the binary under test.
        steps.extend(block.into_iter().enumerate().map(|(i, s)| {
            (
                format!("{file}: {heading}, step {}", i + 1),
                Step { command: s.command.replace("target/release/sitemapd", BIN), ..s },
            )
        }));
    }

    // The README's settings are the defaults (./sitemapd.db in the working directory, no token); only the port is
    // the test's own, in the bind address and the public URL alike.
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let address = format!("localhost:{port}");
    let mut server = Command::new(BIN)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SITEMAPD_BIND", format!("127.0.0.1:{port}"))
        .env("SITEMAPD_PUBLIC_URL", format!("http://{address}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn_guarded();
    wait_until_healthy(port, &mut server);

    for (at, step) in &steps {
        let command = step.command.replace(README_ADDRESS, &address);
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &command])
            .current_dir(dir.path())
            // The server's settings, for the docs' sitemapd commands (the README's are the defaults).
            .env("SITEMAPD_PUBLIC_URL", format!("http://{address}"))
            .stdin(Stdio::null())
            .output()
            .expect("run bash");
        let stdout = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        let stdout = stdout.trim_end_matches('\n');
        assert!(
            out.status.success(),
            "{at} failed ({}):\n{command}\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = step.expected.as_deref().unwrap_or("").replace(README_ADDRESS, &address);
        assert!(
            matches(&expected, stdout),
            "{at}: the docs show another output for\n{command}\n--- shown ---\n{expected}\n--- actual ---\n{stdout}"
        );
    }
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_` kept, spaces as `-`, the rest dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings; a repeated one gets `-1`, `-2`, … as on GitHub.
fn anchors(markdown: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for heading in fenced_blocks(markdown).1 {
        let base = anchor(&heading);
        let n = out
            .iter()
            .filter(|a| **a == base || a.strip_prefix(&format!("{base}-")).is_some_and(|n| n.parse::<u32>().is_ok()))
            .count();
        out.push(if n == 0 { base } else { format!("{base}-{n}") });
    }
    out
}

/// The targets of the inline links `](target)` of a Markdown text, outside fenced blocks and code spans.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Drop code spans: the text between pairs of backticks.
        let text: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').expect("a link's target ends with )");
            targets.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        let markdown = read_doc(&file);
        for target in link_targets(&markdown) {
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').map_or((target.as_str(), None), |(p, f)| (p, Some(f)));
            let resolved =
                if path.is_empty() { root.join(&file) } else { root.join(&file).parent().unwrap().join(path) };
            if !resolved.exists() {
                broken.push(format!("{file}: ({target}): no such file"));
            } else if let Some(fragment) = fragment {
                let text = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&text).iter().any(|a| a == fragment) {
                    broken.push(format!("{file}: ({target}): no heading with that anchor"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 40, "only {checked} relative links found: is the link parser broken?");
}

#[test]
fn anchors_are_github_s() {
    assert_eq!(
        anchor("Extensions: images, videos, news and alternates"),
        "extensions-images-videos-news-and-alternates"
    );
    assert_eq!(
        anchor("Operations: the SQLite file, backup and restore"),
        "operations-the-sqlite-file-backup-and-restore"
    );
    assert_eq!(anchor("Round two (issue 13)"), "round-two-issue-13");
    assert_eq!(anchors("# A\n```sh\n# not a heading\n```\n## A\n"), ["a", "a-1"]);
    assert_eq!(link_targets("[x](a.md#b) `[y](not)` [z](c/)\n```\n[w](no)\n```\n"), ["a.md#b", "c/"]);
}

#[test]
fn the_block_parses_into_commands_and_shown_outputs() {
    let block = "# intro\ncurl a \\\n  b\n# → one\n#   more\n# →\n# → two\ncurl c\n# → three\n\nprintf x > f\ncurl d\n";
    assert_eq!(
        steps(block),
        [
            Step { command: "curl a \\\n  b\n".into(), expected: Some("onemore\n\ntwo".into()) },
            Step { command: "curl c\n".into(), expected: Some("three".into()) },
            Step { command: "printf x > f\ncurl d\n".into(), expected: None },
        ]
    );
}

#[test]
fn a_wrong_output_does_not_match() {
    assert!(matches(r#"{"deleted":1,"missing":1}"#, r#"{"deleted":1,"missing":1}"#));
    assert!(!matches(r#"{"deleted":1,"missing":1}"#, r#"{"deleted":2,"missing":0}"#));
    assert!(!matches("204", "204\n404"), "extra output fails");
    assert!(!matches("", "anything"), "a command shown without output must print nothing");
    assert!(matches("etag: \"…-gz\"", "etag: \"abc-gz\""));
    assert!(!matches("etag: \"…-gz\"", "etag: \"abc\""));
    assert!(matches("a…c\nd", "abbc\nd"));
    assert!(!matches("a…d", "abc\nd"), "… never spans lines");
    assert!(matches("[…],\"next\":\"3\"}", "[{\"x\":1},{\"y\":2}],\"next\":\"3\"}"));
}

/// What the table of docs/api.md says of an empty NDJSON body: accepted as `[]` is, 200 with zero counts.
async fn an_empty_ndjson_body_is_accepted_like_an_empty_array(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    for body in ["", "\n", "\n\n  \n"] {
        let r = app.put_ndjson(body).await;
        assert_eq!(r.status, StatusCode::OK, "{body:?}: {}", r.text());
        assert_eq!(r.json()["received"], 0, "{body:?}");
    }
    let r = app.put_json(&serde_json::json!([])).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json(), serde_json::json!({"received": 0, "created": 0, "updated": 0, "unchanged": 0}));
    assert_eq!(app.get("/sitemap.xml", &[]).await.status, StatusCode::NOT_FOUND, "nothing was stored");
}

both_backends!(an_empty_ndjson_body_is_accepted_like_an_empty_array);
