//! The README's "Using it" block, then its "Moving to sitemapd" block (`target/release/sitemapd` there is the binary
//! under test), run as written: every command, in order, against the built binary on a fresh SQLite database with
//! the README's settings (the defaults), each output compared with the one shown after `# →`.
//! So the examples cannot drift from what sitemapd does. `…` in a shown output matches anything within one line.
//!
//! Needs `bash`, `curl` and `gunzip` (`.ci/run` installs them); without curl the test is skipped with a note,
//! except under CI, where that fails.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::http::StatusCode;

use crate::both_backends;
use crate::support::{Backend, TestApp};

const BIN: &str = env!("CARGO_BIN_EXE_sitemapd");
/// The address the README's commands use; replaced by the test's own port.
const README_ADDRESS: &str = "localhost:8080";

/// One command of the block (possibly several lines) and the output shown after it.
#[derive(Debug, PartialEq)]
struct Step {
    command: String,
    expected: Option<String>,
}

/// The first ```sh block of the section `## Using it`.
fn using_it_block(readme: &str) -> &str {
    block(readme, "## Using it")
}

/// The first ```sh block of the section `heading`.
fn block<'r>(readme: &'r str, heading: &str) -> &'r str {
    let at = readme.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("README has a {heading:?} section"));
    let section = &readme[at..];
    let start = section.find("```sh\n").unwrap_or_else(|| panic!("a sh block in {heading:?}")) + "```sh\n".len();
    let len = section[start..].find("\n```").expect("the sh block ends");
    &section[start..start + len + 1]
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

fn wait_until_healthy(port: u16, child: &mut Child) {
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

fn have(program: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {program}")]).output().is_ok_and(|o| o.status.success())
}

#[test]
#[cfg_attr(sitemapd_no_curl, ignore = "needs curl and gunzip")]
fn every_command_of_using_it_runs_as_shown() {
    assert!(have("curl") && have("gunzip"), "curl or gunzip is missing");
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let steps = steps(using_it_block(&readme));
    assert!(steps.len() >= 10 && steps.iter().filter(|s| s.expected.is_some()).count() >= 10, "{steps:#?}");
    // Then "Moving to sitemapd", beside the same server: its `target/release/sitemapd` is the binary under test.
    let moving = self::steps(block(&readme, "## Moving to sitemapd"));
    assert!(moving.len() >= 5 && moving.iter().filter(|s| s.expected.is_some()).count() >= 5, "{moving:#?}");
    let steps: Vec<Step> = steps
        .into_iter()
        .chain(moving.into_iter().map(|s| Step { command: s.command.replace("target/release/sitemapd", BIN), ..s }))
        .collect();

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
        .spawn()
        .unwrap();
    let _kill = KillOnDrop(&mut server);
    wait_until_healthy(port, _kill.0);

    for (i, step) in steps.iter().enumerate() {
        let command = step.command.replace(README_ADDRESS, &address);
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &command])
            .current_dir(dir.path())
            // The server's settings, for the sitemapd commands of "Moving to sitemapd" (the README's are the defaults).
            .env("SITEMAPD_PUBLIC_URL", format!("http://{address}"))
            .stdin(Stdio::null())
            .output()
            .expect("run bash");
        let stdout = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        let stdout = stdout.trim_end_matches('\n');
        assert!(
            out.status.success(),
            "step {} failed ({}):\n{command}\nstdout: {stdout}\nstderr: {}",
            i + 1,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = step.expected.as_deref().unwrap_or("").replace(README_ADDRESS, &address);
        assert!(
            matches(&expected, stdout),
            "step {}: the README shows another output for\n{command}\n--- shown ---\n{expected}\n--- actual ---\n{stdout}",
            i + 1
        );
    }
}

struct KillOnDrop<'a>(&'a mut Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let mut _ignored = String::new();
        let _ = self.0.wait();
        if let Some(mut err) = self.0.stderr.take() {
            let _ = err.read_to_string(&mut _ignored);
        }
    }
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

/// What the README's table says of an empty NDJSON body: accepted as `[]` is, 200 with zero counts.
async fn an_empty_ndjson_body_is_accepted_like_an_empty_array(b: Backend) {
    let Some(app) = TestApp::spawn(b, &[]).await else { return };
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
