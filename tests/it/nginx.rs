//! docs/deployment.md's nginx recipe, as written, in front of the binary: Debian's nginx, run as a child on a free
//! loopback port with its prefix, pid file, logs and temporary files in a temporary directory, routes every file the
//! index lists and every file the docs publish (a section's index, text pages, the news and removed-URLs sitemaps,
//! the IndexNow key file, the feeds) with the status, body and validators sitemapd itself answers, and nothing else.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::readme::{BIN, fenced_blocks, read_doc, wait_until_healthy};
use crate::support::{SpawnGuarded, nginx_program, xml_texts};

const PUBLIC_URL: &str = "http://www.example.com";
/// The address the recipe's upstream names, replaced by the test's sitemapd.
const RECIPE_UPSTREAM: &str = "server 127.0.0.1:8080;";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The recipe: the ```nginx block of docs/deployment.md that defines the `sitemapd` upstream.
fn recipe() -> String {
    let (blocks, _) = fenced_blocks(&read_doc("docs/deployment.md"));
    let recipe = blocks
        .into_iter()
        .find(|b| b.lang == "nginx" && b.text.contains("upstream sitemapd"))
        .expect("docs/deployment.md has an nginx block with `upstream sitemapd`");
    recipe.text
}

/// The whole configuration: the recipe inside an `http` block, its upstream pointed at `upstream`, its server
/// listening on `listen`, everything nginx writes under `dir`, in the foreground, one process.
fn nginx_conf(recipe: &str, upstream: u16, listen: u16, dir: &Path) -> String {
    assert_eq!(recipe.matches(RECIPE_UPSTREAM).count(), 1, "the recipe's upstream is {RECIPE_UPSTREAM}");
    assert_eq!(recipe.matches("server {").count(), 1, "the recipe has one server block");
    let recipe = recipe
        .replace(RECIPE_UPSTREAM, &format!("server 127.0.0.1:{upstream};"))
        .replace("server {", &format!("server {{\n    listen 127.0.0.1:{listen};"));
    let d = dir.display();
    format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n\
         access_log {d}/access.log;\nclient_body_temp_path {d}/client_body;\nproxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\nuwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n{recipe}}}\n"
    )
}

/// Waits (at most 10 s) until `port` accepts connections, or fails with nginx's error log.
fn wait_for_nginx(port: u16, child: &mut Child, dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        let log = || std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        if let Some(status) = child.try_wait().unwrap() {
            panic!("nginx exited ({status}): {}", log());
        }
        assert!(Instant::now() < deadline, "nginx did not listen within 10 s: {}", log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn client() -> reqwest::Client {
    sitemapd::http_client::builder().unwrap().build().unwrap()
}

/// Status, the headers a crawler's cache keys on, and the body of `GET path` from `port`.
async fn fetch(port: u16, path: &str, gzip: bool) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let client = client();
    let mut request = client.get(format!("http://127.0.0.1:{port}{path}")).header("host", "www.example.com");
    if gzip {
        request = request.header("accept-encoding", "gzip");
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("GET {path} on {port}: {e}"));
    let status = response.status().as_u16();
    let headers = ["content-type", "content-encoding", "etag", "last-modified", "vary"]
        .into_iter()
        .filter_map(|h| Some((h.to_owned(), response.headers().get(h)?.to_str().ok()?.to_owned())))
        .collect();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

async fn put_ndjson(port: u16, body: String) {
    let response = client()
        .put(format!("http://127.0.0.1:{port}/api/v1/urls"))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_nginx, ignore = "needs nginx (apt-get install nginx-light)")]
async fn the_nginx_recipe_routes_every_published_file() {
    let recipe = recipe();
    let key = recipe
        .split("location = /")
        .nth(1)
        .and_then(|rest| rest.split_once(".txt"))
        .map(|(key, _)| key.to_owned())
        .expect("the recipe routes the IndexNow key file");
    let dir = tempfile::tempdir().unwrap();
    let (port, proxy) = (free_port(), free_port());
    let (bind, db) = (format!("127.0.0.1:{port}"), format!("sqlite://{}/s.db", dir.path().display()));
    // Nothing listens at the IndexNow endpoint: the sender's tries stay on loopback.
    let endpoint = format!("http://127.0.0.1:{}/indexnow", free_port());
    let mut server = Command::new(BIN)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs([
            ("DATABASE_URL", db.as_str()),
            ("SITEMAPD_BIND", &bind),
            ("SITEMAPD_PUBLIC_URL", PUBLIC_URL),
            ("SITEMAPD_PAGE_MAX_URLS", "2"),
            ("SITEMAPD_REMOVED_RETENTION", "7d"),
            ("SITEMAPD_INDEXNOW_KEYS", &key),
            ("SITEMAPD_INDEXNOW_ENDPOINT", &endpoint),
            ("SITEMAPD_FEEDS", "true"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn_guarded();
    wait_until_healthy(port, &mut server);

    let nginx_dir = dir.path().join("nginx");
    std::fs::create_dir(&nginx_dir).unwrap();
    let conf = nginx_dir.join("nginx.conf");
    std::fs::write(&conf, nginx_conf(&recipe, port, proxy, &nginx_dir)).unwrap();
    let mut nginx = Command::new(nginx_program())
        .args(["-p".as_ref(), nginx_dir.as_os_str(), "-c".as_ref(), conf.as_os_str(), "-e".as_ref()])
        .arg(nginx_dir.join("error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_guarded();
    wait_for_nginx(proxy, &mut nginx, &nginx_dir);

    // Two pages of the default section, two of `products`, an article for the news sitemap, one URL removed.
    let hour_ago = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
    let published =
        hour_ago.replace_nanosecond(0).unwrap().format(&time::format_description::well_known::Rfc3339).unwrap();
    let mut body: String = (1..=3).map(|i| format!("{{\"loc\": \"{PUBLIC_URL}/a/{i}\"}}\n")).collect();
    body.extend((1..=3).map(|i| format!("{{\"loc\": \"{PUBLIC_URL}/p/{i}\", \"section\": \"products\"}}\n")));
    body.push_str(&format!(
        "{{\"loc\": \"{PUBLIC_URL}/n/1\", \"news\": {{\"publication\": {{\"name\": \"The Example Times\", \
         \"language\": \"en\"}}, \"publication_date\": \"{published}\", \"title\": \"Steaks\"}}}}\n"
    ));
    put_ndjson(port, body).await;
    let deleted = client()
        .delete(format!(
            "http://127.0.0.1:{port}/api/v1/urls?loc={}",
            crate::support::urlencode(&format!("{PUBLIC_URL}/a/3"))
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);

    let (status, _, index) = fetch(port, "/sitemap.xml", false).await;
    assert_eq!(status, 200);
    let listed: Vec<String> = xml_texts(&String::from_utf8(index).unwrap(), "loc")
        .into_iter()
        .map(|loc| loc.strip_prefix(PUBLIC_URL).unwrap_or_else(|| panic!("{loc} is under {PUBLIC_URL}")).to_owned())
        .collect();
    let expected = ["/sitemap-1.xml", "/sitemap-products-2.xml", "/sitemap-news.xml", "/sitemap-removed.xml"];
    for file in expected {
        assert!(listed.iter().any(|l| l == file), "the index lists {file}: {listed:?}");
    }
    let mut paths = vec!["/sitemap.xml".to_owned()];
    for file in &listed {
        paths.push(file.clone());
        paths.push(format!("{file}.gz"));
        // A page (its name ends with its number) has a text form too; the news and removed-URLs sitemaps do not.
        if file.trim_end_matches(".xml").ends_with(|c: char| c.is_ascii_digit()) {
            paths.push(file.replace(".xml", ".txt"));
            paths.push(file.replace(".xml", ".txt.gz"));
        }
    }
    paths.extend(["/sitemap-products.xml", "/sitemap-products.xml.gz"].map(str::to_owned));
    paths.push(format!("/{key}.txt"));
    paths.extend(["/feed.atom", "/feed-products.atom"].map(str::to_owned));

    let mut wrong = Vec::new();
    for path in &paths {
        for gzip in [false, true] {
            let direct = fetch(port, path, gzip).await;
            assert_eq!(direct.0, 200, "sitemapd serves {path}");
            let through = fetch(proxy, path, gzip).await;
            if through != direct {
                wrong.push(format!("{path} (gzip: {gzip}): {} through nginx, {} direct", through.0, direct.0));
            }
        }
    }
    assert!(wrong.is_empty(), "not the same through the recipe:\n{}", wrong.join("\n"));
    // Nothing else is routed: the API, the metrics, the view, another .txt stay the site's own (404 here).
    for path in ["/api/v1/urls", "/metrics", "/view/", "/other.txt", "/readyz", "/feed.xml", "/feed/x.atom"] {
        assert_eq!(fetch(proxy, path, false).await.0, 404, "{path} is not routed to sitemapd");
    }
}
