//! The built binary: start-up checks, the default SQLite file, `migrate`, graceful shutdown on SIGTERM, its
//! request log lines, and durability of acknowledged writes across `kill -9`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Backend, KillOnDrop, SpawnGuarded, TestDb, eventually_blocking, listening, server_read_all};

const BIN: &str = env!("CARGO_BIN_EXE_sitemapd");

fn sitemapd(dir: &Path, vars: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir).env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd.envs(vars.iter().copied());
    cmd
}

fn run(dir: &Path, vars: &[(&str, &str)], args: &[&str]) -> Output {
    sitemapd(dir, vars).args(args).output().expect("run sitemapd")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A minimal HTTP/1.1 exchange (`Connection: close`), returning the status code and the raw response.
fn http(port: u16, request: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    Some((status, response))
}

fn get(port: u16, path: &str) -> Option<(u16, String)> {
    http(port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
}

fn wait_until_healthy(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if get(port, "/healthz").is_some_and(|(s, _)| s == 200) {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("sitemapd exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("sitemapd did not become healthy");
}

#[test]
fn refuses_to_listen_beyond_loopback_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[("SITEMAPD_BIND", "0.0.0.0:0")], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("SITEMAPD_API_TOKENS"), "{stderr}");
    assert!(!dir.path().join("sitemapd.db").exists(), "it failed before touching the database");
}

#[test]
fn refuses_page_limits_above_the_protocol_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    for (var, value) in [
        ("SITEMAPD_PAGE_MAX_URLS", "50001"),
        ("SITEMAPD_PAGE_MAX_BYTES", "60000000"),
        ("SITEMAPD_PAGE_MAX_BYTES", "100"),
    ] {
        let out = run(dir.path(), &[(var, value)], &[]);
        assert!(!out.status.success(), "{var}={value}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(var), "{var}={value}");
    }
}

#[test]
fn migrate_applies_migrations_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("m.db").display());
    for _ in 0..2 {
        let out = run(dir.path(), &[("DATABASE_URL", &url)], &["migrate"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(dir.path().join("m.db").exists());
    // The schema is in the file itself, not left in a WAL beside it.
    let wal = dir.path().join("m.db-wal");
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0, "the WAL was checkpointed");
}

#[test]
fn serves_on_the_default_sqlite_file_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let public = format!("http://localhost:{port}");
    let mut child = sitemapd(dir.path(), &[("SITEMAPD_BIND", &bind), ("SITEMAPD_PUBLIC_URL", &public)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_guarded();
    wait_until_healthy(port, &mut child);
    assert!(dir.path().join("sitemapd.db").exists(), "the default store is ./sitemapd.db");
    let body = format!("[{{\"loc\": \"{public}/hello\"}}]");
    let put = format!(
        "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, response) = http(port, &put).unwrap();
    assert_eq!(status, 200, "{response}");
    let (status, page) = get(port, "/sitemap-1.xml").unwrap();
    assert_eq!(status, 200);
    assert!(page.contains(&format!("<loc>{public}/hello</loc>")), "{page}");
    // HEAD over a real socket keeps the GET's Content-Length and sends no body.
    let (status, head) = http(port, "HEAD /sitemap-1.xml HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!(status, 200);
    let get_len = page.split("\r\n\r\n").nth(1).unwrap().len();
    assert!(head.to_ascii_lowercase().contains(&format!("content-length: {get_len}\r\n")), "{head}");
    assert!(head.ends_with("\r\n\r\n"));

    // SIGTERM while a large page is in flight: the response still completes, then the process exits 0.
    let urls: String =
        (0..4000).map(|i| format!("{{\"loc\": \"{public}/in-flight/{i}/{}\"}}\n", "w".repeat(80))).collect();
    let put = format!(
        "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{urls}",
        urls.len()
    );
    assert_eq!(http(port, &put).unwrap().0, 200);
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    slow.write_all(b"GET /sitemap-1.xml HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut first = [0u8; 1024];
    let n = slow.read(&mut first).unwrap();
    assert!(n > 0);
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    // The shutdown has begun (the listener is closed) while the page is still being sent.
    eventually_blocking("sitemapd closes its listener after SIGTERM", || !listening(port));
    let mut rest = Vec::new();
    slow.read_to_end(&mut rest).unwrap();
    let whole = [&first[..n], &rest].concat();
    let whole = String::from_utf8_lossy(&whole);
    assert!(
        whole.ends_with("</urlset>\n"),
        "the in-flight page was cut off: ...{}",
        &whole[whole.len().saturating_sub(200)..]
    );
    assert_eq!(whole.matches("<url>").count(), 4001);
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "sitemapd did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(status.success(), "exit status {status}; stderr: {stderr}");
}

/// Waits at most `limit` for the child to exit; returns its status and everything it wrote.
fn wait_for_exit(mut child: KillOnDrop, limit: Duration) -> (std::process::ExitStatus, String, String) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("sitemapd did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status, stdout, stderr)
}

#[test]
fn refuses_invalid_settings_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    for (var, value) in [
        ("SITEMAPD_BIND", "localhost:8080"),
        ("SITEMAPD_PUBLIC_URL", "ftp://example.com"),
        ("SITEMAPD_GZIP_LEVEL", "0"),
        ("SITEMAPD_GZIP_LEVEL", "10"),
        ("SITEMAPD_PAGE_MAX_URLS", "50001"),
        ("SITEMAPD_SHUTDOWN_GRACE", "3601s"),
    ] {
        let out = run(dir.path(), &[(var, value)], &[]);
        assert_eq!(out.status.code(), Some(2), "{var}={value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(var), "{var}={value}: {stderr}");
    }
    // An unknown key in a file, named by --config or by SITEMAPD_CONFIG.
    let file = dir.path().join("sitemapd.toml");
    std::fs::write(&file, "gzip_level = 6\ngzip_levle = 9\n").unwrap();
    let path = file.to_str().unwrap();
    for out in [run(dir.path(), &[], &["--config", path, "serve"]), run(dir.path(), &[("SITEMAPD_CONFIG", path)], &[])]
    {
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("gzip_levle"), "{stderr}");
    }
    assert!(!dir.path().join("sitemapd.db").exists(), "it failed before touching the database");
}

/// A `SITEMAPD_CRAWLER_RANGES` file that is missing, or that is not a range file, stops start-up as any invalid
/// setting does: exit 2, naming the variable and the file, before the database is opened or anything listens.
#[test]
fn a_missing_or_invalid_crawler_range_file_stops_start_up_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let not_ranges = dir.path().join("not-ranges.txt");
    std::fs::write(&not_ranges, "this is not a list of networks\n").unwrap();
    let missing = dir.path().join("missing.json");
    for file in [&missing, &not_ranges] {
        let port = free_port();
        let bind = format!("127.0.0.1:{port}");
        let ranges = format!("bingbot={}", file.display());
        let out = run(dir.path(), &[("SITEMAPD_BIND", &bind), ("SITEMAPD_CRAWLER_RANGES", &ranges)], &[]);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let context = format!("{}\nstdout: {stdout}\nstderr: {stderr}", file.display());
        assert_eq!(out.status.code(), Some(2), "{context}");
        assert!(stderr.contains("SITEMAPD_CRAWLER_RANGES") && stderr.contains(&*file.to_string_lossy()), "{context}");
        assert!(!stdout.contains("listening") && !stderr.contains("listening"), "{context}");
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "{context}: something listens");
        assert!(!dir.path().join("sitemapd.db").exists(), "{context}: the database was opened");
    }
    // With crawler telemetry off the ranges are not used: not read either.
    let out = run(
        dir.path(),
        &[
            ("SITEMAPD_CRAWLER_TELEMETRY", "false"),
            ("SITEMAPD_CRAWLER_RANGES", &format!("bingbot={}", missing.display())),
        ],
        &["migrate"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn start_up_logs_the_configuration_without_the_password_or_the_tokens() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port, so start-up stops at connecting, after logging the configuration.
    let url = format!("postgres://sitemapd:pg-Secret-1@127.0.0.1:{}/sitemapd", free_port());
    let out = run(
        dir.path(),
        &[
            ("DATABASE_URL", &url),
            ("SITEMAPD_API_TOKENS", "tok-Secret-2,tok-Secret-3"),
            ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "1s"),
        ],
        &[],
    );
    assert!(!out.status.success());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("starting") && stdout.contains("sitemapd:REDACTED@127.0.0.1"), "{stdout}");
    assert!(stdout.contains("tokens: [2 redacted]") && stdout.contains("shutdown_grace: 25s"), "{stdout}");
    assert!(!stdout.contains("Secret") && !stderr.contains("Secret"), "stdout: {stdout}\nstderr: {stderr}");
}

/// A deployment that still sets the names from before the settings had sections starts: each old name is read
/// (a renamed one converted from its unit) or ignored (a removed test knob), and warned of once at start.
#[test]
fn old_setting_names_start_with_a_warning_each() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let vars =
        [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_SHUTDOWN_GRACE_SECS", "3"), ("SITEMAPD_HEALTH_POLL_MS", "20")];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::null()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    let stdout = stop(child);
    let lines = |what: &str| stdout.lines().filter(|l| l.contains(what)).collect::<Vec<_>>();
    let renamed = lines("SITEMAPD_SHUTDOWN_GRACE_SECS is deprecated: read as SITEMAPD_SHUTDOWN_GRACE=3s");
    assert!(renamed.len() == 1 && renamed[0].contains("WARN"), "{stdout}");
    let removed = lines("SITEMAPD_HEALTH_POLL_MS is no longer a setting and is ignored");
    assert!(removed.len() == 1 && removed[0].contains("WARN"), "{stdout}");
    assert!(lines("starting")[0].contains("shutdown_grace: 3s"), "{stdout}");
}

/// With several sites, the start-up lines name them: the configuration shows `public_url` as replaced by `sites`
/// (a `public_url` set all the same is warned of), and IndexNow's lines name a site by its name, not its id.
#[test]
fn start_up_names_the_sites_and_warns_of_an_unused_public_url() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let endpoint = format!("http://127.0.0.1:{}/indexnow", free_port());
    let vars = [
        ("SITEMAPD_BIND", bind.as_str()),
        ("SITEMAPD_PUBLIC_URL", "https://old.example.com"),
        ("SITEMAPD_SITES", "www=https://www.example.com/, shop=https://shop.example.com/"),
        ("SITEMAPD_INDEXNOW_KEYS", "shop=0123456789abcdef"),
        ("SITEMAPD_INDEXNOW_ENDPOINT", endpoint.as_str()),
    ];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::null()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    let stdout = stop(child);
    let line = |what: &str| stdout.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("{what}: {stdout}"));
    let starting = line("starting");
    assert!(starting.contains("public_url: (replaced by sites)"), "{starting}");
    assert!(!starting.contains("old.example.com"), "{starting}");
    let warned = line("public_url (SITEMAPD_PUBLIC_URL) is set but not used");
    assert!(warned.contains("WARN") && warned.contains("https://old.example.com/"), "{warned}");
    let indexnow = line("IndexNow: changes are sent");
    assert!(indexnow.contains("site=shop"), "{indexnow}");
}

#[test]
fn healthcheck_answers_for_the_configured_address() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // A wildcard bind, as in the container: the health check reaches it on 127.0.0.1.
    let bind = format!("0.0.0.0:{port}");
    let vars = [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_API_TOKENS", "t")];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    let out = run(dir.path(), &vars, &["healthcheck"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    child.kill().unwrap();
    child.wait().unwrap();

    let out = run(dir.path(), &vars, &["healthcheck"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    // A configuration error is unhealthy too (1), never the 2 that container runtimes reserve.
    let out = run(dir.path(), &[("SITEMAPD_GZIP_LEVEL", "0")], &["healthcheck"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SITEMAPD_GZIP_LEVEL"));
}

#[test]
fn a_request_that_outlives_the_grace_period_is_cut_off_and_the_exit_is_still_clean() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let public = format!("http://localhost:{port}");
    let vars = [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_PUBLIC_URL", &public), ("SITEMAPD_SHUTDOWN_GRACE", "1s")];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    // An NDJSON upload that announces far more than it ever sends: the request stays in flight.
    let mut upload = TcpStream::connect(("127.0.0.1", port)).unwrap();
    upload
        .write_all(
            format!(
                "PUT /api/v1/urls HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\n\
                 Content-Length: 1000000\r\n\r\n{{\"loc\": \"{public}/a\"}}\n{{\"loc\": "
            )
            .as_bytes(),
        )
        .unwrap();
    // The request is in flight once sitemapd has read all that was sent.
    let client_port = upload.local_addr().unwrap().port();
    eventually_blocking("sitemapd reads the upload's head", || server_read_all(port, client_port));
    let signalled = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let (status, stdout, stderr) = wait_for_exit(child, Duration::from_secs(10));
    let took = signalled.elapsed();
    assert!(status.success(), "exit status {status}; stderr: {stderr}");
    assert!(took >= Duration::from_millis(900), "it waited for the grace period: {took:?}");
    assert!(took < Duration::from_secs(5), "grace 1 s, exit after {took:?}");
    assert!(stdout.contains("shutdown grace period over") && stdout.contains("cut_off=1"), "{stdout}");
    // The cut-off connection is closed, not left hanging.
    upload.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    if let Err(e) = upload.read_to_end(&mut rest) {
        assert!(!matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "still open: {e}");
    }
}

/// Waits for the child to exit, at most 15 s, and returns its stdout.
fn stop(mut child: KillOnDrop) -> String {
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "sitemapd did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    // What it printed, unless the test reads its output itself.
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).unwrap();
    }
    stdout
}

#[test]
fn json_log_lines_carry_route_status_and_latency_and_never_a_secret() {
    const TOKEN: &str = "log-test-token-71b3";
    const WRONG: &str = "wrong-token-0c9a";
    const PASSWORD: &str = "db-password-e42f";
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let public = format!("http://localhost:{port}");
    // On a fresh Postgres database (trust authentication ignores the password), else (`TEST_DATABASE_URL` unset when
    // the tests were built) on SQLite, which has none to leak.
    let pg = if cfg!(sitemapd_no_postgres) {
        None
    } else {
        Some(tokio::runtime::Runtime::new().unwrap().block_on(TestDb::new(Backend::Postgres)))
    };
    let database_url = match &pg {
        Some(db) => {
            let mut url = url::Url::parse(&db.url).unwrap();
            url.set_password(Some(PASSWORD)).unwrap();
            url.to_string()
        }
        None => format!("sqlite://{}", dir.path().join("log.db").display()),
    };
    let vars = [
        ("SITEMAPD_BIND", bind.as_str()),
        ("SITEMAPD_PUBLIC_URL", &public),
        ("SITEMAPD_API_TOKENS", TOKEN),
        ("SITEMAPD_LOG_FORMAT", "json"),
        ("DATABASE_URL", &database_url),
        ("RUST_LOG", "trace"),
    ];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn_guarded();
    // Read as it is written: at `trace` the start alone (every migration's SQL, at debug) nearly fills a pipe's
    // 64 KiB, and a server whose log blocks answers nothing.
    let mut stdout = child.stdout.take().unwrap();
    let drained = std::thread::spawn(move || {
        let mut logs = String::new();
        stdout.read_to_string(&mut logs).unwrap();
        logs
    });
    wait_until_healthy(port, &mut child);
    let body = format!("[{{\"loc\": \"{public}/logged\"}}]");
    let put = format!(
        "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(http(port, &put).unwrap().0, 200);
    let list = format!(
        "GET /api/v1/urls?limit=5 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {WRONG}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(http(port, &list).unwrap().0, 401);
    // A token in the query string is refused, and its value never logged; nor is the userinfo of an absolute-form
    // target.
    let query_token = format!(
        "GET /api/v1/urls?access_token={TOKEN}&limit=5 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(http(port, &query_token).unwrap().0, 401);
    let absolute = format!(
        "GET http://u:{WRONG}@localhost/api/v1/urls?{WRONG} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(http(port, &absolute).unwrap().0, 401);
    stop(child);
    let logs = drained.join().unwrap();

    for secret in [TOKEN, WRONG, PASSWORD] {
        assert!(!logs.contains(secret), "{secret} reached the log:\n{logs}");
    }
    let lines: Vec<serde_json::Value> =
        logs.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    let answered: Vec<(String, String, u64)> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "answered" && l["span"]["route"] == "/api/v1/urls")
        .map(|l| {
            // Status and latency once, on the event; the latency in milliseconds, at most three decimals.
            let latency = l["fields"]["latency_ms"].as_f64().unwrap_or_else(|| panic!("no latency_ms: {l}"));
            assert_eq!((latency * 1000.0).round() / 1000.0, latency, "{l}");
            let span = l["span"].as_object().unwrap();
            assert!(!span.contains_key("status") && !span.contains_key("latency_ms"), "status or latency twice: {l}");
            let uri = l["span"]["uri"].as_str().unwrap().to_owned();
            (l["span"]["method"].as_str().unwrap().to_owned(), uri, l["fields"]["status"].as_u64().unwrap())
        })
        .collect();
    let expected = [
        ("PUT", "/api/v1/urls", 200),
        ("GET", "/api/v1/urls?limit=5", 401),
        ("GET", "/api/v1/urls?access_token=REDACTED&limit=5", 401),
        ("GET", "/api/v1/urls?REDACTED", 401),
    ]
    .map(|(m, u, s)| (m.to_owned(), u.to_owned(), s));
    assert_eq!(answered, expected, "{logs}");
}

/// At the default filter and `SITEMAPD_ACCESS_LOG`, a crawler's routine answer is not logged at INFO, a write and
/// an error are; an error of a routine read, which has no span at INFO, names its method, route and target on the
/// line itself. With `SITEMAPD_ACCESS_LOG=all` every request is logged, each with its span.
#[test]
fn the_access_log_keeps_writes_and_errors_and_all_when_asked() {
    let answered = |access_log: &str| -> Vec<serde_json::Value> {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let bind = format!("127.0.0.1:{port}");
        let vars = [
            ("SITEMAPD_BIND", bind.as_str()),
            ("SITEMAPD_LOG_FORMAT", "json"),
            ("SITEMAPD_ACCESS_LOG", access_log),
            ("SITEMAPD_PUBLIC_URL", "https://www.example.com"),
        ];
        let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn_guarded();
        wait_until_healthy(port, &mut child);
        assert_eq!(get(port, "/sitemap.xml").unwrap().0, 404, "no URLs yet");
        let body = r#"[{"loc": "https://www.example.com/a"}]"#;
        let put = format!(
            "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(http(port, &put).unwrap().0, 200);
        assert_eq!(get(port, "/sitemap-1.xml").unwrap().0, 200);
        let logs = stop(child);
        logs.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["fields"]["message"] == "answered")
            .collect()
    };
    // (method, route, uri, status) from the span, or from the line itself.
    let shown = |l: &serde_json::Value| {
        let from = if l["span"].is_object() { &l["span"] } else { &l["fields"] };
        let text = |k: &str| from[k].as_str().unwrap_or_else(|| panic!("no {k}: {l}")).to_owned();
        (text("method"), text("route"), text("uri"), l["fields"]["status"].as_u64().unwrap(), l["level"].clone())
    };
    let default: Vec<_> = answered("writes_and_errors").iter().map(shown).collect();
    let info = serde_json::json!("INFO");
    assert_eq!(
        default,
        vec![
            ("GET".into(), "/sitemap.xml".into(), "/sitemap.xml".into(), 404, info.clone()),
            ("PUT".into(), "/api/v1/urls".into(), "/api/v1/urls".into(), 200, info),
        ],
        "the probes and the page's 200 are not logged at INFO"
    );
    let all = answered("all");
    let routes: Vec<_> = all.iter().map(shown).map(|(_, route, _, status, _)| (route, status)).collect();
    assert!(routes.contains(&("/{file}".into(), 200)) && routes.contains(&("/healthz".into(), 200)), "{routes:?}");
    assert!(all.iter().all(|l| l["span"]["route"].is_string()), "with `all`, every line is in its span: {all:?}");
}

/// In text mode too, each request has one `answered` line that names its status and latency once; a 5xx too
/// (no second line from tower-http's failure hook repeating the latency).
#[test]
fn a_text_log_line_names_status_and_latency_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let vars = [("SITEMAPD_BIND", bind.as_str()), ("RUST_LOG", "trace")];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    // The database file removed under the service: `/readyz` answers 503.
    std::fs::remove_file(dir.path().join("sitemapd.db")).unwrap();
    assert_eq!(get(port, "/readyz").map(|(s, _)| s), Some(503));
    let logs = stop(child);
    let answered: Vec<&str> = logs.lines().filter(|l| l.contains("answered")).collect();
    assert!(answered.iter().any(|l| l.contains("status=503")), "{logs}");
    let latency_lines = logs.lines().filter(|l| l.contains("latency")).count();
    assert_eq!(latency_lines, answered.len(), "one line per request names the latency: {logs}");
    for line in answered {
        assert_eq!(line.matches("status=").count(), 1, "{line}");
        assert_eq!(line.matches("latency_ms=").count(), 1, "{line}");
        let latency = line.split("latency_ms=").nth(1).unwrap().split(' ').next().unwrap();
        let decimals = latency.split('.').nth(1).map_or(0, str::len);
        assert!(decimals <= 3 && latency.parse::<f64>().is_ok(), "{line}");
    }
}

/// Every form of a database secret, at `RUST_LOG=trace`: the start line, the error line and the message on stderr
/// show none of them, for `serve` and for `migrate`.
#[test]
fn no_form_of_the_database_secret_reaches_the_output() {
    const SECRET: &str = "pg-Secret-5d1e";
    let dir = tempfile::tempdir().unwrap();
    let port = free_port(); // nothing listens there
    for url in [
        format!("postgres://sitemapd:{SECRET}@127.0.0.1:{port}/sitemapd"),
        format!("postgres://sitemapd@127.0.0.1:{port}/sitemapd?password={SECRET}"),
        format!(
            "postgres://sitemapd@127.0.0.1:{port}/sitemapd?sslmode=disable&sslpassword={SECRET}&sslkey=/k/{SECRET}"
        ),
        format!("postgres://sitemapd:{SECRET}@[127.0.0.1:{port}/sitemapd"),
        format!("postgres://sitemapd:{SECRET}/x@127.0.0.1:{port}/sitemapd"),
        format!("postgresql:sitemapd:{SECRET}@127.0.0.1/sitemapd"),
        format!("mysql://sitemapd:{SECRET}@127.0.0.1/sitemapd"),
    ] {
        for args in [&[][..], &["migrate"]] {
            let vars = [("DATABASE_URL", url.as_str()), ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "1s"), ("RUST_LOG", "trace")];
            let out = run(dir.path(), &vars, args);
            assert!(!out.status.success(), "{url}");
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "{url}\nstdout: {stdout}\nstderr: {stderr}");
            assert!(!stderr.is_empty(), "{url}: the failure is explained");
        }
    }
}

/// A database that cannot be reached, for `serve` and for `migrate`: the one error line names the server's host and
/// port (or the SQLite file's path) once, says why once, and shows no password.
#[test]
fn a_database_that_cannot_be_reached_is_named_once_with_why() {
    const SECRET: &str = "pg-Secret-77a1";
    let dir = tempfile::tempdir().unwrap();
    let port = free_port(); // nothing listens there
    let not_a_dir = dir.path().join("a-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let path = not_a_dir.join("sitemapd.db").display().to_string();
    for (url, named, why) in [
        (format!("postgres://sitemapd:{SECRET}@127.0.0.1:{port}/sitemapd"), format!("127.0.0.1:{port}"), "refused"),
        (format!("sqlite://{path}"), path, "unable to open database file"),
    ] {
        for args in [&[][..], &["migrate"]] {
            let vars = [("DATABASE_URL", url.as_str()), ("SITEMAPD_DB_ACQUIRE_TIMEOUT", "1s")];
            let out = run(dir.path(), &vars, args);
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.status.code(), Some(1), "{url} {args:?}: {stderr}");
            let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("sitemapd: ")).collect();
            let [error] = errors[..] else { panic!("one error line, not {errors:?}") };
            assert_eq!(error.matches(&named).count(), 1, "{named} named once: {error}");
            assert_eq!(error.to_lowercase().matches(why).count(), 1, "why, once: {error}");
            assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "{stdout}{stderr}");
        }
    }
}

/// A misspelled variable stops start-up (exit 2) naming the variable and the closest setting; a value of the wrong
/// type is one short line naming the one setting.
#[test]
fn a_misspelled_variable_or_a_mistyped_value_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    // An unusable database URL too, so that a build that ignored the variable would stop instead of serving.
    let out = run(dir.path(), &[("SITEMAPD_PUBLICURL", "https://www.example.com"), ("DATABASE_URL", "x:")], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("SITEMAPD_PUBLICURL (did you mean SITEMAPD_PUBLIC_URL?)"), "{stderr}");

    let out = run(dir.path(), &[("SITEMAPD_PAGE_MAX_URLS", "abc")], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        "sitemapd: sitemaps.page_max_urls (SITEMAPD_PAGE_MAX_URLS) must be a whole number (default: 50000), not \"abc\"\n"
    );
    // The variables that are not settings are allowed.
    let file = dir.path().join("s.toml");
    std::fs::write(&file, "gzip_level = 5\n").unwrap();
    let vars = [("SITEMAPD_CONFIG", file.to_str().unwrap()), ("SITEMAPD_XSD_VALIDATE", "x")];
    let out = run(dir.path(), &vars, &["migrate"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A start that fails once logging is set up (here: the port is taken) says why exactly once on stdout and stderr
/// together: on stderr in text mode, as a JSON log line on stdout in JSON mode, and on stderr again when the log
/// filter would drop it.
#[test]
fn a_failed_start_says_why_once_in_every_log_format() {
    let dir = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let bind = taken.local_addr().unwrap().to_string();
    let why = format!("cannot listen on {bind}");
    for (format, filter) in [("text", "info"), ("json", "info"), ("text", "off"), ("json", "off")] {
        let vars = [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_LOG_FORMAT", format), ("RUST_LOG", filter)];
        let out = run(dir.path(), &vars, &[]);
        assert_eq!(out.status.code(), Some(1), "{format}, RUST_LOG={filter}");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let context = format!("{format}, RUST_LOG={filter}\nstdout: {stdout}\nstderr: {stderr}");
        assert_eq!(stdout.matches(&why).count() + stderr.matches(&why).count(), 1, "{context}");
        if format == "json" && filter != "off" {
            let error = stdout.lines().find(|l| l.contains(&why)).unwrap_or_else(|| panic!("not logged: {context}"));
            let error: serde_json::Value = serde_json::from_str(error).unwrap();
            assert_eq!(error["level"], "ERROR", "{context}");
        } else {
            assert!(stderr.contains(&format!("sitemapd: {why}")), "{context}");
        }
    }
    drop(taken);
}

/// The JSON body of a 200 answer to `GET path`.
fn get_json(port: u16, path: &str) -> serde_json::Value {
    let (status, response) = get(port, path).unwrap_or_else(|| panic!("no answer to {path}"));
    assert_eq!(status, 200, "{path}: {response}");
    serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

const CRASH_PUBLIC_URL: &str = "https://www.example.com";
const CRASH_LINES: usize = 1000;

/// Request `k` of the crash test: new URLs `/r{k}/{i}`, and every tenth line rewrites one of request `k - 1`.
fn crash_request(k: usize) -> String {
    let mut body = String::new();
    for i in 0..CRASH_LINES {
        if k > 0 && i % 10 == 0 {
            body.push_str(&format!("{{\"loc\": \"{CRASH_PUBLIC_URL}/r{}/{i}\", \"priority\": 0.{k}}}\n", k - 1));
        } else {
            body.push_str(&format!("{{\"loc\": \"{CRASH_PUBLIC_URL}/r{k}/{i}\", \"changefreq\": \"daily\"}}\n"));
        }
    }
    body
}

fn crash_request_locs(k: usize) -> impl Iterator<Item = String> {
    (0..CRASH_LINES).filter(move |i| k == 0 || i % 10 != 0).map(move |i| format!("{CRASH_PUBLIC_URL}/r{k}/{i}"))
}

/// SIGKILL in the middle of a streamed bulk load, then a restart on the same database: every entry of every acknowledged
/// request is there, and the page bookkeeping matches the stored URLs exactly.
async fn acknowledged_writes_survive_kill_9(b: Backend) {
    let db = TestDb::new(b).await;
    let dir = tempfile::tempdir().unwrap();
    let start = |port: u16| {
        let bind = format!("127.0.0.1:{port}");
        let vars = [
            ("DATABASE_URL", db.url.as_str()),
            ("SITEMAPD_BIND", &bind),
            ("SITEMAPD_PUBLIC_URL", CRASH_PUBLIC_URL),
            ("SITEMAPD_NDJSON_BATCH", "100"),
            ("SITEMAPD_PAGE_MAX_URLS", "50"),
        ];
        let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
        wait_until_healthy(port, &mut child);
        child
    };
    let port = free_port();
    let mut child = start(port);

    // Five sequential NDJSON requests of 1,000 entries (10 batches each), each answered 200. Then a sixth that
    // sends half its body and stalls, and the kill comes once its first five batches are committed.
    const ACKED: usize = 5;
    for k in 0..ACKED {
        let body = crash_request(k);
        let put = format!(
            "PUT /api/v1/urls HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let (status, response) = http(port, &put).expect("an answer");
        assert_eq!(status, 200, "request {k}: {response}");
    }
    let body = crash_request(ACKED);
    let half = body.split_inclusive('\n').take(CRASH_LINES / 2).collect::<String>();
    let mut in_flight = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        in_flight,
        "PUT /api/v1/urls HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n{half}",
        body.len()
    )
    .unwrap();
    let last_sent = format!("{CRASH_PUBLIC_URL}/r{ACKED}/{}", CRASH_LINES / 2 - 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(port, &format!("/api/v1/urls?loc={}", crate::support::urlencode(&last_sent))).unwrap().0 != 200 {
        assert!(Instant::now() < deadline, "the first half of the streamed request was not committed in 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL: no graceful anything.
    child.wait().unwrap();
    let mut rest = Vec::new();
    in_flight.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = in_flight.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains(" 200 "), "the stalled request was never answered 200");
    let (acked, cut) = ((0..ACKED).collect::<Vec<_>>(), ACKED);

    let port = free_port();
    let mut child = start(port);
    let mut stored = std::collections::HashSet::new();
    let mut after = String::new();
    loop {
        let page = get_json(port, &format!("/api/v1/urls?limit=1000{after}"));
        stored.extend(page["items"].as_array().unwrap().iter().map(|i| i["loc"].as_str().unwrap().to_owned()));
        match page["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    for &k in &acked {
        let missing: Vec<String> = crash_request_locs(k).filter(|l| !stored.contains(l)).collect();
        assert!(
            missing.is_empty(),
            "request {k} was acknowledged but {} entries are missing: {missing:?}",
            missing.len()
        );
    }
    // The request in flight may be partly stored, in whole batches; nothing beyond it.
    let beyond =
        stored.iter().filter(|l| !(0..=cut).any(|k| l.starts_with(&format!("{CRASH_PUBLIC_URL}/r{k}/")))).count();
    assert_eq!(beyond, 0, "URLs from requests never sent");
    let committed = crash_request_locs(cut).filter(|l| stored.contains(l)).count();
    // Whole batches of the stalled request: its first 500 lines, of which 450 are new URLs.
    assert_eq!(committed, CRASH_LINES / 2 * 9 / 10, "{b:?}: the committed batches of the stalled request");
    assert_eq!(get(port, "/readyz").unwrap().0, 200);
    assert_eq!(get(port, "/sitemap.xml").unwrap().0, 200);

    let config = sitemapd::config::Config::load_from(None, |k| match k {
        "DATABASE_URL" => Some(db.url.clone()),
        "SITEMAPD_PUBLIC_URL" => Some(CRASH_PUBLIC_URL.to_owned()),
        "SITEMAPD_PAGE_MAX_URLS" => Some("50".to_owned()),
        _ => None,
    })
    .unwrap();
    let store = sitemapd::store::open(&crate::support::options(&config)).await.unwrap();
    crate::contract::assert_consistent(&*store, 50, 52_428_800).await;
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `sitemapd` serving `DATABASE_URL=sqlite://{db}` on a free port, public URL [`CRASH_PUBLIC_URL`] (so that ETags do
/// not depend on the port); returns the child and its port once healthy.
fn serve_sqlite(dir: &Path, db: &Path) -> (KillOnDrop, u16) {
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let url = format!("sqlite://{}", db.display());
    let vars = [
        ("SITEMAPD_BIND", bind.as_str()),
        ("SITEMAPD_PUBLIC_URL", CRASH_PUBLIC_URL),
        ("DATABASE_URL", &url),
        ("SITEMAPD_PAGE_MAX_URLS", "1000"),
    ];
    let mut child = sitemapd(dir, &vars).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    (child, port)
}

/// PUTs `body` (NDJSON) and asserts 200.
fn put_ndjson(port: u16, body: &str) {
    let put = format!(
        "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, response) = http(port, &put).unwrap();
    assert_eq!(status, 200, "{response}");
}

/// Status, ETag and body of the index and of pages 1 to 3.
fn snapshot(port: u16) -> Vec<(String, u16, Option<String>, String)> {
    ["/sitemap.xml", "/sitemap-1.xml", "/sitemap-2.xml", "/sitemap-3.xml"]
        .into_iter()
        .map(|path| {
            let (status, response) = get(port, path).unwrap();
            let (head, body) = response.split_once("\r\n\r\n").unwrap();
            let etag = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().starts_with("etag:").then(|| l[5..].trim().to_owned()));
            (path.to_owned(), status, etag, body.to_owned())
        })
        .collect()
}

/// `n` NDJSON entries under `/{tag}/`.
fn some_entries(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{{\"loc\": \"{CRASH_PUBLIC_URL}/{tag}/{i}\", \"priority\": 0.5}}\n")).collect()
}

#[test]
fn after_sigterm_the_sqlite_file_alone_holds_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/sitemapd.db");
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let (child, port) = serve_sqlite(dir.path(), &db);
    put_ndjson(port, &some_entries("stop", 3000));
    put_ndjson(port, &some_entries("again", 10));
    let before = snapshot(port);
    assert_eq!(before[1].1, 200);
    let stdout = stop(child);
    assert!(stdout.contains(&*db.display().to_string()), "the absolute path is logged at start: {stdout}");

    // Only the .db file, as someone copying "the database" would.
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let (child, port) = serve_sqlite(copy_dir.path(), &copy);
    assert_eq!(snapshot(port), before, "the copied file alone serves the same pages, ETags included");
    stop(child);
}

/// `rm sitemapd.db-wal` under a serving process, on a new database whose tables and writes are all in the log,
/// then `kill -9` as soon as a write is refused for it: the write that found the deletion answered its 503 only
/// once the log's content was copied into the file, so the file alone (as the restart finds it) holds every write
/// acknowledged before.
#[test]
fn a_kill_9_right_after_the_log_is_deleted_loses_no_acknowledged_write() {
    const WRITES: usize = 500;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fresh.db");
    let url = format!("sqlite://{}", db.display());
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let vars = [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_PUBLIC_URL", CRASH_PUBLIC_URL), ("DATABASE_URL", &url)];
    let mut server = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
    wait_until_healthy(port, &mut server);
    let put = |i: usize| {
        let body = format!("{{\"loc\": \"{CRASH_PUBLIC_URL}/w/{i}\"}}\n");
        http(
            port,
            &format!(
                "PUT /api/v1/urls HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-ndjson\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
        .unwrap_or_else(|| panic!("no answer to write {i}"))
    };
    for i in 0..WRITES {
        let (status, response) = put(i);
        assert_eq!(status, 200, "write {i}: {response}");
    }
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::remove_file(&wal).unwrap();
    let (status, response) = put(WRITES);
    assert_eq!(status, 503, "a write after the deletion is refused: {response}");
    server.kill().unwrap(); // SIGKILL, at once: no shutdown checkpoint.
    server.wait().unwrap();

    let out = run(dir.path(), &[("DATABASE_URL", &url), ("SITEMAPD_PUBLIC_URL", CRASH_PUBLIC_URL)], &["export"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the file opens after the kill: {stderr}");
    let exported = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(exported, WRITES, "{WRITES} writes were acknowledged before the log was deleted: {stderr}");
}

#[test]
fn a_backup_taken_while_serving_restores_the_same_pages() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let (child, port) = serve_sqlite(dir.path(), &db);
    put_ndjson(port, &some_entries("kept", 2000));
    let before = snapshot(port);
    let url = format!("sqlite://{}", db.display());
    let backup = dir.path().join("backup.db");
    let out = run(dir.path(), &[("DATABASE_URL", &url)], &["backup", backup.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Written after the backup: not in it.
    put_ndjson(port, &some_entries("later", 5));
    assert_ne!(snapshot(port), before);

    // Never over an existing file.
    let len = std::fs::metadata(&backup).unwrap().len();
    let out = run(dir.path(), &[("DATABASE_URL", &url)], &["backup", backup.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&backup).unwrap().len(), len, "the existing backup is untouched");
    stop(child);

    // Restore: a new instance on the backup file serves what was stored when it was taken, byte for byte.
    let restored_dir = tempfile::tempdir().unwrap();
    let restored = restored_dir.path().join("sitemapd.db");
    std::fs::copy(&backup, &restored).unwrap();
    let (child, port) = serve_sqlite(restored_dir.path(), &restored);
    assert_eq!(snapshot(port), before);
    stop(child);
}

#[test]
fn backup_of_postgres_points_to_pg_dump_and_of_a_missing_file_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[("DATABASE_URL", "postgres://u:pw-Secret@127.0.0.1:1/db")], &["backup", "b.db"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("pg_dump") && !stderr.contains("Secret"), "{stderr}");
    let missing = format!("sqlite://{}", dir.path().join("missing.db").display());
    let out = run(dir.path(), &[("DATABASE_URL", &missing)], &["backup", "b.db"]);
    assert!(!out.status.success());
    assert!(!dir.path().join("missing.db").exists(), "a backup never creates the source");
    assert!(!dir.path().join("b.db").exists(), "nor leaves an empty copy behind");
}

/// The log's reader goes away (a collector restarting, a closed pipe): standard output and standard error both
/// closed. sitemapd goes on serving, requests that log at every level included, and stops cleanly; it used to
/// abort at the first log line (the subscriber's report of the failed write panicked on the closed stderr, and
/// the panic hook's own line panicked again).
#[test]
fn a_closed_log_output_does_not_stop_the_service() {
    for format in ["text", "json"] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let bind = format!("127.0.0.1:{port}");
        let vars = [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_LOG_FORMAT", format), ("RUST_LOG", "trace")];
        let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn_guarded();
        // The log (standard output) is read until sitemapd is healthy: a start logs more at trace than a pipe's
        // 64 KiB buffer holds, and an unread full pipe blocks its writer, which is not what is tested here. Then
        // both are closed: the reader stops at its next read, which the requests below give it, and drops its end.
        let healthy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (healthy, mut log) = (healthy.clone(), child.stdout.take().unwrap());
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while !healthy.load(std::sync::atomic::Ordering::SeqCst) && log.read(&mut buf).is_ok_and(|n| n > 0) {}
            })
        };
        wait_until_healthy(port, &mut child);
        healthy.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(child.stderr.take());
        for _ in 0..100 {
            if reader.is_finished() {
                break;
            }
            let _ = get(port, "/nothing-here");
            // Not a gate: whether the reader is done is asserted after.
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(reader.is_finished(), "{format}: the log is still read");
        for path in ["/healthz", "/readyz", "/sitemap.xml", "/nothing-here", "/api/v1/urls?bogus=1"] {
            for _ in 0..5 {
                let status = get(port, path).map(|(s, _)| s);
                assert!(status.is_some(), "{format}: {path} unanswered: sitemapd exited? {:?}", child.try_wait());
            }
        }
        assert_eq!(get(port, "/healthz").map(|(s, _)| s), Some(200), "{format}");
        assert!(child.try_wait().unwrap().is_none(), "{format}: sitemapd exited");
        assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
        let status = wait_for_exit_status(child, Duration::from_secs(15));
        assert!(status.success(), "{format}: {status}");
    }
}

fn wait_for_exit_status(mut child: KillOnDrop, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "sitemapd did not exit within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of the metric `name` (summed over `labels`' series) that sitemapd on `port` reports.
fn scraped(port: u16, name: &str, labels: &[(&str, &str)]) -> f64 {
    let (status, response) = get(port, "/metrics").expect("an answer to /metrics");
    assert_eq!(status, 200, "{response}");
    let text = response.split_once("\r\n\r\n").unwrap().1;
    crate::observability::sum(&crate::observability::samples(text), name, labels)
}

/// `kill -9` of sitemapd while its IndexNow outbox holds changes it has not sent: the endpoint accepts the
/// connection and never answers, and the kill comes while that request is in flight, its locs claimed. After a
/// restart with a working endpoint, every change is sent, exactly once: the outbox is in the database, written with
/// the changes, and the dead process's claim runs out with its lease (2 × the request timeout + 10 s).
async fn pending_notifications_survive_kill_9(b: Backend) {
    use crate::indexnow::{FakeIndexNow, KEY};
    let db = TestDb::new(b).await;
    let dir = tempfile::tempdir().unwrap();
    let start = |port: u16, endpoint: &str| {
        let bind = format!("127.0.0.1:{port}");
        let vars = [
            ("DATABASE_URL", db.url.as_str()),
            ("SITEMAPD_BIND", &bind),
            ("SITEMAPD_PUBLIC_URL", CRASH_PUBLIC_URL),
            ("SITEMAPD_INDEXNOW_KEYS", KEY),
            ("SITEMAPD_INDEXNOW_ENDPOINT", endpoint),
            ("SITEMAPD_TEST_TUNING", "indexnow_interval=20ms"),
            ("SITEMAPD_INDEXNOW_RETRY_BASE", "20ms"),
            ("SITEMAPD_INDEXNOW_TIMEOUT", "1s"),
            ("SITEMAPD_INDEXNOW_MAX_ATTEMPTS", "1000"),
        ];
        let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
        wait_until_healthy(port, &mut child);
        child
    };
    // A dead endpoint: it accepts connections and never reads from them.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/indexnow", dead.local_addr().unwrap());
    let port = free_port();
    let mut child = start(port, &dead_url);
    const N: usize = 300;
    let locs: Vec<String> = (0..N).map(|i| format!("{CRASH_PUBLIC_URL}/pending/{i}")).collect();
    put_ndjson(port, &locs.iter().map(|l| format!("{{\"loc\": \"{l}\"}}\n")).collect::<String>());
    assert_eq!(scraped(port, "sitemapd_indexnow_outbox_urls", &[]), N as f64);
    // A send has begun: its request waits for an answer (1 s at most), and its locs are claimed.
    dead.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let in_flight = loop {
        match dead.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no send was tried within 30 s");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("{e}"),
        }
    };
    child.kill().unwrap(); // SIGKILL: no graceful anything.
    child.wait().unwrap();
    drop((in_flight, dead));

    let fake = FakeIndexNow::start(&[]);
    let port = free_port();
    let child = start(port, &fake.url);
    let deadline = Instant::now() + Duration::from_secs(60);
    while fake.accepted().len() < N || scraped(port, "sitemapd_indexnow_outbox_urls", &[]) > 0.0 {
        assert!(
            Instant::now() < deadline,
            "{b:?}: after the restart, {} of {N} changes were sent in 60 s",
            fake.accepted().len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let accepted = fake.accepted();
    let missing: Vec<&String> = locs.iter().filter(|l| !accepted.contains_key(*l)).collect();
    assert!(missing.is_empty(), "{b:?}: lost: {missing:?}");
    assert!(accepted.values().all(|n| *n == 1), "{b:?}: a change was sent twice: {accepted:?}");
    assert_eq!(accepted.len(), N);
    // With the sender running, SIGTERM still stops sitemapd cleanly.
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert!(wait_for_exit_status(child, Duration::from_secs(15)).success());
}

/// `kill -9` of sitemapd while a WebSub notification of its feed is owed: the hub accepts the connection and never
/// answers, and the kill comes while that notification is in flight (claimed). After a restart with a working hub,
/// it is delivered, once, and the hub reads the feed: what is owed is derived from the database (the feed's digest
/// against the one the hub last accepted), and the dead process's claim runs out with its lease (2 × the request
/// timeout + 10 s).
async fn an_owed_websub_notification_survives_kill_9(b: Backend) {
    use crate::support::hub::FakeHub;
    let db = TestDb::new(b).await;
    let dir = tempfile::tempdir().unwrap();
    let hub = FakeHub::start(&[]);
    let start = |port: u16| {
        let bind = format!("127.0.0.1:{port}");
        let vars = [
            ("DATABASE_URL", db.url.as_str()),
            ("SITEMAPD_BIND", &bind),
            ("SITEMAPD_PUBLIC_URL", CRASH_PUBLIC_URL),
            ("SITEMAPD_FEEDS", "true"),
            ("SITEMAPD_FEED_HUBS", &hub.url),
            ("SITEMAPD_FEED_HUB_INTERVAL", "1s"),
            ("SITEMAPD_TEST_TUNING", "websub_poll=20ms, websub_timeout=1s"),
        ];
        let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
        wait_until_healthy(port, &mut child);
        child
    };
    // The hub hangs: it takes the notification and never answers.
    hub.hold(true);
    let port = free_port();
    let mut child = start(port);
    put_ndjson(port, &format!("{{\"loc\": \"{CRASH_PUBLIC_URL}/owed\"}}\n"));
    eventually_blocking("a notification is in flight", || !hub.notifications().is_empty());
    child.kill().unwrap(); // SIGKILL: no graceful anything.
    child.wait().unwrap();

    // The same hub, answering now; sitemapd restarted on the same database.
    hub.hold(false);
    let port = free_port();
    hub.fetch_via(&format!("http://127.0.0.1:{port}"));
    let child = start(port);
    eventually_blocking("the owed notification is delivered after the restart", || hub.fetches().len() == 1);
    let told = hub.accepted();
    assert_eq!(told.len(), 1, "{b:?}: {told:?}");
    assert_eq!(told[0].url, format!("{CRASH_PUBLIC_URL}/feed.atom"));
    let fetch = &hub.fetches()[0];
    assert_eq!(fetch.status, 200, "{b:?}: {fetch:?}");
    assert_eq!(scraped(port, "sitemapd_websub_notifications_total", &[("outcome", "delivered")]), 1.0);
    // Every outcome of the hub is exported from the start (at 0 but `delivered`).
    let hub_label = url::Url::parse(&hub.url).unwrap().authority().to_owned();
    assert_eq!(
        scraped(port, "sitemapd_websub_notifications_total", &[("hub", &hub_label), ("outcome", "refused")]),
        0.0
    );
    let (status, metrics) = get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains(&format!("sitemapd_websub_notifications_total{{hub=\"{hub_label}\",outcome=\"refused\"}} 0")),
        "{metrics}"
    );
    eventually_blocking("the gauge says nothing is owed", || {
        get(port, "/metrics").is_some_and(|(_, m)| m.lines().any(|l| l == "sitemapd_websub_owed{site=\"default\"} 0"))
    });
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert!(wait_for_exit_status(child, Duration::from_secs(15)).success());
}

crate::both_backends!(
    acknowledged_writes_survive_kill_9,
    pending_notifications_survive_kill_9,
    url_health_findings_survive_kill_9_and_the_cycle_resumes,
    an_owed_websub_notification_survives_kill_9,
);

/// A minimal HTTP/1.1 exchange from the local address `from` (a loopback address of 127.0.0.0/8): the status.
fn get_from(from: [u8; 4], port: u16, path: &str, agent: &str) -> u16 {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from((from, 0)).into()).unwrap();
    socket.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into()).unwrap();
    let mut stream = TcpStream::from(socket);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {agent}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Crawlers at real loopback addresses over TCP: 127.0.0.2 is in the test's Googlebot range, 127.0.0.3 is not. The
/// metrics count each by its verification, and what is still in memory at SIGTERM is written before the exit.
#[test]
fn a_crawler_at_its_own_address_is_verified_and_telemetry_is_flushed_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let db = dir.path().join("crawl.db");
    let url = format!("sqlite://{}", db.display());
    let ranges = concat!("googlebot=", env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/crawlers/googlebot-loopback.json");
    let vars = [
        ("SITEMAPD_BIND", bind.as_str()),
        ("SITEMAPD_PUBLIC_URL", CRASH_PUBLIC_URL),
        ("DATABASE_URL", &url),
        ("SITEMAPD_CRAWLER_RANGES", ranges),
        ("SITEMAPD_CRAWLER_RDNS", "false"),
        // Nothing is flushed while it runs: what the database holds after the exit was written by the shutdown.
        ("SITEMAPD_TEST_TUNING", "crawler_flush=5m"),
    ];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    put_ndjson(port, &some_entries("c", 3));
    const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    assert_eq!(get_from([127, 0, 0, 2], port, "/sitemap-1.xml", GOOGLEBOT), 200);
    assert_eq!(get_from([127, 0, 0, 2], port, "/sitemap.xml", GOOGLEBOT), 200);
    assert_eq!(get_from([127, 0, 0, 3], port, "/sitemap-1.xml", GOOGLEBOT), 200);
    let count_in = |metrics: &str, labels: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with("sitemapd_crawler_fetches_total{") && l.contains(labels))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    // Counted as the recorder takes them, off the request path: wait for the third. Every series is exported at 0
    // from the start, so the wait is for a count, not for the series.
    const CLAIMED: &str = "crawler=\"googlebot\",verification=\"claimed\",status=\"200\"";
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = get(port, "/metrics").unwrap().1;
        if count_in(&metrics, CLAIMED).is_some_and(|n| n != "0") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let count = |labels: &str| count_in(&metrics, labels);
    assert_eq!(
        count("crawler=\"googlebot\",verification=\"verified\",status=\"200\"").as_deref(),
        Some("2"),
        "{metrics}"
    );
    assert_eq!(
        count("crawler=\"googlebot\",verification=\"claimed\",status=\"200\"").as_deref(),
        Some("1"),
        "{metrics}"
    );
    stop(child);
    let rows: Vec<(String, String, i64)> = tokio::runtime::Runtime::new().unwrap().block_on(async {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query_as("SELECT resource, trust, fetches FROM crawler_fetches ORDER BY resource, trust")
            .fetch_all(&mut conn)
            .await
            .unwrap()
    });
    let expected = [("sitemap-1.xml", "claimed", 1), ("sitemap-1.xml", "verified", 1), ("sitemap.xml", "verified", 1)];
    assert_eq!(rows, expected.map(|(r, t, n)| (r.to_owned(), t.to_owned(), n)));
}

/// What URL health has recorded in the database at `url`: each checked loc's last check time and status.
async fn recorded_checks(url: &str) -> std::collections::BTreeMap<String, (i64, Option<i64>)> {
    use sqlx::Connection;
    const SQL: &str = "SELECT loc, checked_us, status FROM url_checks WHERE checked_us IS NOT NULL";
    let rows: Vec<(String, i64, Option<i64>)> = if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_as::<_, (String, i64, Option<i32>)>(SQL)
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .into_iter()
            .map(|(l, c, s)| (l, c, s.map(i64::from)))
            .collect()
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_as(SQL).fetch_all(&mut conn).await.unwrap()
    };
    rows.into_iter().map(|(loc, checked, status)| (loc, (checked, status))).collect()
}

/// `kill -9` of sitemapd in the middle of a URL health cycle: every finding settled before the kill is still in the
/// database, and a restarted process checks the rest, including the URLs the dead process had claimed (once their
/// lease runs out), without any URL fetched twice at once. 40 URLs at 2 requests a second, each answered in 150 ms.
async fn url_health_findings_survive_kill_9_and_the_cycle_resumes(b: Backend) {
    use crate::health_site::{TestSite, path};
    let db = TestDb::new(b).await;
    let site = TestSite::start();
    let dir = tempfile::tempdir().unwrap();
    let public = format!("{}/", site.base);
    let start = |port: u16| {
        let bind = format!("127.0.0.1:{port}");
        let vars = [
            ("DATABASE_URL", db.url.as_str()),
            ("SITEMAPD_BIND", &bind),
            ("SITEMAPD_PUBLIC_URL", public.as_str()),
            ("SITEMAPD_HEALTH_CHECK", "report"),
            ("SITEMAPD_HEALTH_RATE", "2"),
            ("SITEMAPD_HEALTH_TIMEOUT", "1s"),
            ("SITEMAPD_TEST_TUNING", "health_poll=20ms"),
        ];
        let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
        wait_until_healthy(port, &mut child);
        child
    };
    const N: usize = 40;
    let locs: Vec<String> = (0..N).map(|i| site.loc(&format!("{}{i}", path::SLOWISH))).collect();
    let fetched = || (0..N).map(|i| site.count(&format!("{}{i}", path::SLOWISH))).sum::<usize>();
    let port = free_port();
    let mut child = start(port);
    put_ndjson(port, &locs.iter().map(|l| format!("{{\"loc\": \"{l}\"}}\n")).collect::<String>());
    let deadline = Instant::now() + Duration::from_secs(60);
    while fetched() < 8 {
        assert!(Instant::now() < deadline, "{b:?}: the checker fetched {} URLs in 60 s", fetched());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Counted once their settle committed: each of these must be in the database after the kill.
    let settled = scraped(port, "sitemapd_health_checks_total", &[]);
    child.kill().unwrap(); // SIGKILL: mid-cycle, with URLs claimed and one likely in flight.
    child.wait().unwrap();
    let before = recorded_checks(&db.url).await;
    assert!(settled >= 5.0, "{b:?}: {settled} checks settled before the kill");
    assert!(before.len() as f64 >= settled, "{b:?}: {settled} checks settled, {} in the database", before.len());
    assert!(before.len() < N, "{b:?}: the kill came after the whole cycle");

    let port = free_port();
    let child = start(port);
    let deadline = Instant::now() + Duration::from_secs(120);
    let after = loop {
        let now = recorded_checks(&db.url).await;
        if now.len() == N {
            break now;
        }
        assert!(Instant::now() < deadline, "{b:?}: after the restart, {} of {N} URLs checked in 120 s", now.len());
        std::thread::sleep(Duration::from_millis(100));
    };
    for (loc, (checked, status)) in &before {
        let (later, _) = after[loc];
        assert!(later >= *checked, "{b:?}: {loc}'s finding went back in time");
        assert_eq!(*status, Some(200), "{b:?}: {loc}");
    }
    assert!(after.values().all(|(_, status)| *status == Some(200)), "{b:?}: {after:?}");
    assert_eq!(site.overlapped_path(), None, "{b:?}: a URL was fetched twice at once");
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert!(wait_for_exit_status(child, Duration::from_secs(15)).success());
}

/// A server the test stops with SIGTERM, expecting a clean exit; killed when dropped first (a failed assertion).
struct Running(KillOnDrop);

impl Running {
    /// SIGTERM, then a clean exit within 15 s.
    fn stop(self) {
        let child = self.0;
        assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
        assert!(wait_for_exit_status(child, Duration::from_secs(15)).success());
    }
}

/// Every counter the documentation lists is exported as soon as the process serves: its `HELP` and `TYPE` lines,
/// and a 0 for each combination of its documented label values (a site: the checked one; a crawler: every crawler
/// sitemapd knows). A counter by route or status is described, its series come as it counts.
#[test]
fn every_documented_counter_is_exported_at_zero_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let vars = [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_HEALTH_CHECK", "report")];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    let child = Running(child);
    let (status, response) = get(port, "/metrics").expect("an answer to /metrics");
    assert_eq!(status, 200, "{response}");
    let text = response.split_once("\r\n\r\n").unwrap().1;
    let samples = crate::observability::samples(text);
    let crawlers: Vec<String> = sitemapd::crawler::Crawler::ALL.iter().map(|c| c.name().to_owned()).collect();
    let (mut zeros, mut missing) = (0, Vec::new());
    for (name, labels) in crate::observability::documented_counters() {
        for line in [format!("# HELP {name} "), format!("# TYPE {name} counter\n")] {
            if !text.contains(&line) {
                missing.push(line);
            }
        }
        let values: Option<Vec<(String, Vec<String>)>> = labels
            .into_iter()
            .map(|(label, values)| {
                let values = match label.as_str() {
                    _ if !values.is_empty() => values,
                    "site" => vec!["default".to_owned()],
                    "crawler" => crawlers.clone(),
                    _ => return None,
                };
                Some((label, values))
            })
            .collect();
        let Some(values) = values else { continue };
        let mut combos = vec![BTreeMap::new()];
        for (label, values) in &values {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.insert(label.clone(), v.clone());
                        c
                    })
                })
                .collect();
        }
        for combo in combos {
            match samples.iter().find(|(n, l, _)| *n == name && *l == combo) {
                Some((_, _, v)) if *v == 0.0 => zeros += 1,
                found => missing.push(format!("{name} {combo:?}: {found:?}")),
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} missing or not 0 at start, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(zeros > 100, "{zeros} series at 0");
    child.stop();
}

/// What is counted while the process starts is not lost: an IndexNow change queued before the site's public URL
/// changed is dropped by the sender's first round at start-up, before anything listens, and counted.
#[test]
fn an_indexnow_drop_at_start_up_is_counted() {
    use crate::indexnow::KEY;
    let dir = tempfile::tempdir().unwrap();
    let start = |public_url: &str, tuning: &str| {
        let port = free_port();
        let bind = format!("127.0.0.1:{port}");
        let vars = [
            ("SITEMAPD_BIND", bind.as_str()),
            ("SITEMAPD_PUBLIC_URL", public_url),
            ("SITEMAPD_INDEXNOW_KEYS", KEY),
            // Nothing listens there: never reached in this test.
            ("SITEMAPD_INDEXNOW_ENDPOINT", "http://127.0.0.1:9/indexnow"),
            // The sender's pace: a hidden variable, as a process test has no other way to give it.
            ("SITEMAPD_TEST_TUNING", tuning),
        ];
        let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::null()).stderr(Stdio::null()).spawn_guarded();
        wait_until_healthy(port, &mut child);
        (Running(child), port)
    };
    // The sender's first round (at start, nothing queued) is its last for an hour: the change stays queued.
    let (child, port) = start("https://old.example.com", "indexnow_interval=1h");
    put_ndjson(port, "{\"loc\": \"https://old.example.com/a\"}\n");
    assert_eq!(scraped(port, "sitemapd_indexnow_outbox_urls", &[]), 1.0);
    child.stop();
    // The site's public URL changed: the queued loc is no longer the site's, and is dropped at start.
    let (child, port) = start("https://new.example.com", "indexnow_interval=20ms");
    let dropped = [("reason", "not_under_public_url")];
    let deadline = Instant::now() + Duration::from_secs(30);
    while scraped(port, "sitemapd_indexnow_outbox_urls", &[]) > 0.0 {
        assert!(Instant::now() < deadline, "the queued loc was not dropped within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(scraped(port, "sitemapd_indexnow_dropped_total", &dropped), 1.0, "the drop at start-up is counted");
    child.stop();
}

/// The background workers the configuration calls for run, each `sitemapd_worker_up{worker} 1` in `/metrics` and
/// restarted never; SIGTERM stops them, the last started first, and the start and stop log lines list them so.
#[test]
fn background_workers_are_up_in_metrics_and_stop_in_reverse_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let vars =
        [("SITEMAPD_BIND", bind.as_str()), ("SITEMAPD_HEALTH_CHECK", "report"), ("SITEMAPD_REMOVED_RETENTION", "7d")];
    let mut child = sitemapd(dir.path(), &vars).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn_guarded();
    wait_until_healthy(port, &mut child);
    let expected = [
        "metrics-upkeep",
        "sqlite-watch",
        "removed-purge",
        "crawler-telemetry",
        "crawler-purge",
        "prerender",
        "health-checker",
    ];
    for worker in expected {
        assert_eq!(scraped(port, "sitemapd_worker_up", &[("worker", worker)]), 1.0, "{worker} is up");
        assert_eq!(scraped(port, "sitemapd_worker_restarts_total", &[("worker", worker)]), 0.0, "{worker}");
    }
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let (status, stdout, _) = wait_for_exit(child, Duration::from_secs(15));
    assert!(status.success(), "{status}: {stdout}");
    // `workers=["a", "b"]` of the log line saying `message`.
    let listed = |message: &str| -> Vec<String> {
        let line = stdout.lines().find(|l| l.contains(message)).unwrap_or_else(|| panic!("no {message:?} in {stdout}"));
        let list = line.split_once("workers=[").unwrap().1.split_once(']').unwrap().0;
        list.split(", ").map(|w| w.trim_matches('"').to_owned()).collect()
    };
    assert_eq!(listed("background workers started"), expected);
    let mut reversed = expected.to_vec();
    reversed.reverse();
    assert_eq!(listed("background workers stopped"), reversed);
}
