//! docs/recipes.md's push functions, run as written: the Python block that starts with `# sitemapd_push.py` by
//! python3, the JavaScript block that starts with `// sitemapd-push.mjs` by node, each against the built binary
//! (with a token, as production has). Each pushes a URL, which the test reads back through the API, deletes it,
//! and checks that it is gone and that a second delete says it was not stored. The framework wiring beside them
//! (Django signals, Express, Next.js, Rails) needs the framework and is shown only.
//!
//! Needs `curl` (as the README test), `python3` and `node` (18 or later: global `fetch`; `.ci/run` installs it);
//! without one of them the test shows as ignored (build.rs), and under CI it fails.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::readme::{BIN, fenced_blocks, have, read_doc, wait_until_healthy};
use crate::support::{KillOnDrop, SpawnGuarded};

const TOKEN: &str = "recipe-token";

/// The block of `lang` in docs/recipes.md whose first line starts with `first`.
fn recipe(lang: &str, first: &str) -> String {
    let blocks = fenced_blocks(&read_doc("docs/recipes.md")).0;
    blocks
        .into_iter()
        .find(|b| b.lang == lang && b.text.starts_with(first))
        .unwrap_or_else(|| panic!("docs/recipes.md has no ```{lang} block starting with {first:?}"))
        .text
}

/// A running sitemapd on a fresh SQLite database in its own directory, with one token.
struct Server {
    /// Killed when the server is dropped.
    _child: KillOnDrop,
    base: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let base = format!("http://localhost:{port}");
        let mut child = Command::new(BIN)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SITEMAPD_BIND", format!("127.0.0.1:{port}"))
            .env("SITEMAPD_PUBLIC_URL", &base)
            .env("SITEMAPD_API_TOKENS", TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn_guarded();
        wait_until_healthy(port, &mut child);
        Server { _child: child, base, _dir: dir }
    }

    /// `GET /api/v1/urls?loc=…` with the token: (status, body).
    fn find(&self, loc: &str) -> (String, String) {
        let out = Command::new("curl")
            .args(["-sS", "-G", "-w", "\n%{http_code}", "-H", &format!("Authorization: Bearer {TOKEN}")])
            .arg(format!("{}/api/v1/urls", self.base))
            .args(["--data-urlencode", &format!("loc={loc}")])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, status) = text.rsplit_once('\n').unwrap();
        (status.to_owned(), body.to_owned())
    }
}

/// Runs `program args` in `dir` with the recipes' settings; its standard output, trimmed, or a panic with both outputs.
fn run(program: &str, args: &[&str], dir: &Path, server: &Server) -> String {
    let Output { status, stdout, stderr } = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("SITEMAPD_URL", &server.base)
        .env("SITEMAPD_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&stdout).trim().to_owned();
    assert!(status.success(), "{program} {args:?} failed ({status}):\n{stdout}\n{}", String::from_utf8_lossy(&stderr));
    stdout
}

/// Fails the test when a program it needs is missing (build.rs has the test ignored where it knew).
fn require(programs: &[&str]) {
    let missing: Vec<&str> = programs.iter().copied().filter(|p| !have(p)).collect();
    assert!(missing.is_empty(), "{missing:?} not found");
}

/// The checks both languages share: `script` is run with the loc as its argument and prints, one a line, the
/// push's counts as JSON, the first delete's result, the second delete's, and the status of a push outside the
/// public URL.
fn push_find_delete(program: &str, script: &str, dir: &Path, server: &Server, path: &str) {
    let loc = format!("{}{path}", server.base);
    let out = run(program, &[script, &loc, "1"], dir, server);
    assert_eq!(out, r#"{"created":1,"received":1,"unchanged":0,"updated":0}"#, "{program}: the push");
    let (status, body) = server.find(&loc);
    assert_eq!(status, "200", "{program}: the pushed URL is stored: {body}");
    let record: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(record["lastmod"], "2024-05-01T06:20:00Z", "{body}");
    assert_eq!(record["changefreq"], "weekly", "{body}");

    let out = run(program, &[script, &loc, "2"], dir, server);
    assert_eq!(out, "deleted: true\ndeleted again: false\nrefused: 422", "{program}: the deletes and the refusal");
    assert_eq!(server.find(&loc).0, "404", "{program}: the deleted URL is gone");
}

#[test]
#[cfg_attr(any(sitemapd_no_curl, sitemapd_no_python3), ignore = "needs curl and python3")]
fn the_python_recipe_pushes_and_deletes() {
    require(&["curl", "python3"]);
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sitemapd_push.py"), recipe("python", "# sitemapd_push.py")).unwrap();
    std::fs::write(
        dir.path().join("drive.py"),
        r#"import json, sys, urllib.error
from sitemapd_push import delete_url, push_url

loc, step = sys.argv[1], sys.argv[2]
if step == "1":
    counts = push_url(loc, lastmod="2024-05-01T08:20:00+02:00", changefreq="weekly")
    print(json.dumps(counts, sort_keys=True, separators=(",", ":")))
else:
    print("deleted:", str(delete_url(loc)).lower())
    print("deleted again:", str(delete_url(loc)).lower())
    try:
        push_url("https://elsewhere.example/x")
    except urllib.error.HTTPError as error:
        print("refused:", error.code)
"#,
    )
    .unwrap();
    push_find_delete("python3", "drive.py", dir.path(), &server, "/posts/from-python");
}

#[test]
#[cfg_attr(any(sitemapd_no_curl, sitemapd_no_node), ignore = "needs curl and node")]
fn the_node_recipe_pushes_and_deletes() {
    require(&["curl", "node"]);
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sitemapd-push.mjs"), recipe("js", "// sitemapd-push.mjs")).unwrap();
    std::fs::write(
        dir.path().join("drive.mjs"),
        r#"import { deleteUrl, pushUrl } from "./sitemapd-push.mjs";

const [loc, step] = process.argv.slice(2);
if (step === "1") {
  const counts = await pushUrl({ loc, lastmod: "2024-05-01T08:20:00+02:00", changefreq: "weekly" });
  console.log(JSON.stringify(Object.fromEntries(Object.entries(counts).sort())));
} else {
  console.log("deleted:", await deleteUrl(loc));
  console.log("deleted again:", await deleteUrl(loc));
  try {
    await pushUrl({ loc: "https://elsewhere.example/x" });
  } catch (error) {
    console.log("refused:", error.message.split(" ")[1]);
  }
}
"#,
    )
    .unwrap();
    push_find_delete("node", "drive.mjs", dir.path(), &server, "/posts/from-node");
}
