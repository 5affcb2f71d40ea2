//! The HTML view (`/view/`): through the router (status codes, headers, escaping, keyset paging, bad input, the
//! setting that turns it off, a database that is down), and in a real browser: headless Chromium loads the screens
//! from `serve()` on a loopback port, the DOM it builds is checked, and screenshots at a phone's and a desktop's
//! size are kept as artifacts of the run under `target/artifacts/view/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, TestResponse, note, urlencode};

/// A loc with every character HTML must escape that a loc keeps (`&` and `'` stay as they are in a query; `<`, `>`
/// and `"` are percent-encoded by normalization), and text fields that are plain markup.
fn hostile_loc() -> String {
    format!("{PUBLIC_URL}/q?x=<script>alert(\"loc\")</script>&y='1'")
}

const HOSTILE_TITLE: &str = "\"><img src=x onerror=alert(1)> & <b>bold</b>";
const HOSTILE_NAME: &str = "<script>alert(2)</script> & \"Times\"";

fn hostile_entry() -> Value {
    json!({
        "loc": hostile_loc(),
        "images": [{"loc": "https://cdn.example.net/a.jpg"}, {"loc": "https://cdn.example.net/b.jpg"},
                   {"loc": "https://cdn.example.net/c.jpg"}],
        "videos": [{"thumbnail_loc": "https://cdn.example.net/t.jpg", "title": "<script>alert(3)</script>",
                    "description": "a & b", "content_loc": "https://cdn.example.net/v.mp4"}],
        "news": {"publication": {"name": HOSTILE_NAME, "language": "en"},
                 "publication_date": "2026-11-22T08:00:00Z", "title": HOSTILE_TITLE},
        "alternates": [{"hreflang": "en", "href": hostile_loc()}, {"hreflang": "de", "href": format!("{PUBLIC_URL}/de")},
                       {"hreflang": "fr", "href": format!("{PUBLIC_URL}/fr")},
                       {"hreflang": "x-default", "href": format!("{PUBLIC_URL}/")}],
    })
}

/// The stored (normalized) form of [`hostile_loc`].
const HOSTILE_STORED: &str = "https://www.example.com/q?x=%3Cscript%3Ealert(%22loc%22)%3C/script%3E&y=%271%27";

async fn put(app: &TestApp, entries: Value) {
    let r = app.put_json(&entries).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

async fn put_paths(app: &TestApp, range: std::ops::Range<usize>) {
    let entries: Vec<Value> = range.map(|i| json!({"loc": format!("{PUBLIC_URL}/e/{i:04}")})).collect();
    put(app, Value::Array(entries)).await;
}

/// An HTML answer of the view: its type and the headers every view answer carries.
fn assert_view_answer(r: &TestResponse, status: StatusCode) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_view_headers(r);
}

fn assert_view_headers(r: &TestResponse) {
    assert_eq!(r.header("x-robots-tag"), Some("noindex, nofollow"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let csp = r.header("content-security-policy").expect("a CSP");
    assert!(csp.starts_with("default-src 'none';") && !csp.contains("script-src"), "no script allowed: {csp}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
}

fn rows(html: &str) -> usize {
    html.matches("<tr id=\"url-").count()
}

async fn the_screens_answer_html_with_their_headers(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "4")]).await;
    put_paths(&app, 0..6).await;

    let r = app.get("/view/", &[]).await;
    assert_eq!((r.status, r.header("location")), (StatusCode::SEE_OTHER, Some("default/")), "one site: to it");
    assert_view_headers(&r);
    assert_eq!(app.get("/view", &[]).await.header("location"), Some("view/"));
    assert_eq!(app.get("/view/default", &[]).await.header("location"), Some("default/"));

    let site = app.get("/view/default/", &[]).await;
    assert_view_answer(&site, StatusCode::OK);
    let html = site.text();
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"), "{html}");
    assert!(html.contains(r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#));
    assert!(
        html.contains(r#"<strong id="total-urls">6</strong> URLs on <strong id="listed">2</strong> pages"#),
        "{html}"
    );
    // Page 1: 4 of 4 URLs; page 2: 2 of 4. Both limits have a bar and a percentage.
    assert!(html.contains(r#"value="1" title="4 of 4 URLs">100%</meter> <span class="pct">100%</span>"#), "{html}");
    assert!(html.contains(r#"value="0.5" title="2 of 4 URLs">50.0%</meter>"#), "{html}");
    assert_eq!(html.matches(" bytes\">").count(), 2, "a byte bar per page: {html}");
    assert!(html.contains(r#"<a href="https://www.example.com/sitemap-2.xml">sitemap-2.xml</a>"#), "{html}");
    assert!(html.contains(r#"<a href="pages/2">Page 2</a>"#));
    assert!(!html.contains("<script"), "no script: {html}");

    // One of each is said in the singular.
    let one = TestApp::spawn(b, &[]).await;
    put_paths(&one, 0..1).await;
    let html = one.get("/view/default/", &[]).await.text();
    assert!(
        html.contains(r#"<strong id="total-urls">1</strong> URL on <strong id="listed">1</strong> page listed"#),
        "{html}"
    );

    let page = app.get("/view/default/pages/2", &[]).await;
    assert_view_answer(&page, StatusCode::OK);
    assert_eq!(rows(&page.text()), 2);

    // HEAD: GET's status and headers, no body.
    for path in ["/view/default/", "/view/default/pages/2", "/view/default/lookup?loc=x", "/view/default/pages/9"] {
        let (get, head) = (app.get(path, &[]).await, app.head(path, &[]).await);
        assert_eq!((head.status, head.header("content-type")), (get.status, get.header("content-type")), "{path}");
        assert_view_headers(&head);
        assert!(head.body.is_empty(), "{path}");
    }
}

/// The site screen's headings read as one would say them, for one page and one URL as for many: never "Page 1 to
/// Page 1 (1 pages in all)" nor "1 of 1 tracked URLs".
async fn headings_read_naturally_for_one_page_and_for_many(b: Backend) {
    let one = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "4"), ("SITEMAPD_HEALTH_CHECK", "report")]).await;
    put_paths(&one, 0..1).await;
    let html = one.get("/view/default/", &[]).await.text();
    assert!(
        html.contains("<caption id=\"pages-caption\">The one page: how full it is, against both limits</caption>"),
        "{html}"
    );
    assert!(!html.contains("1 pages") && !html.contains("Page 1 to"), "{html}");
    assert!(html.contains("0 of 1 tracked URL checked"), "{html}");
    put_paths(&one, 1..6).await;
    let html = one.get("/view/default/", &[]).await.text();
    assert!(html.contains(">All 2 pages: how full each is, against both limits</caption>"), "{html}");
    assert!(html.contains("0 of 6 tracked URLs checked"), "{html}");
}

/// Every stored value is text in the page: markup in a loc, a video's title or the news is shown escaped, never as
/// elements, and so is a hostile lookup echoed in the search box.
async fn every_value_is_escaped(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    put(&app, json!([hostile_entry()])).await;
    let page = app.get("/view/default/pages/1", &[]).await.text();
    let stored_in_html = HOSTILE_STORED.replace('&', "&#38;").replace('\'', "&#39;");
    assert!(page.contains(&format!(">{stored_in_html}</a>")), "the loc as text: {page}");
    assert!(page.contains(&format!("href=\"{stored_in_html}\"")), "and as a link: {page}");
    assert!(page.contains("<td data-label=\"Extensions\">3 images, 1 video, news, 4 alternates</td>"), "{page}");

    let lookup = app.get(&format!("/view/default/lookup?loc={}", urlencode(&hostile_loc())), &[]).await;
    assert_view_answer(&lookup, StatusCode::OK);
    let html = lookup.text();
    for markup in ["<script", "<img", "<b>"] {
        assert!(!html.contains(markup), "{markup} unescaped: {html}");
    }
    assert!(
        html.contains("&#34;&#62;&#60;img src=x onerror=alert(1)&#62; &#38; &#60;b&#62;bold&#60;/b&#62;"),
        "{html}"
    );
    assert!(html.contains("&#60;script&#62;alert(2)&#60;/script&#62; &#38; &#34;Times&#34;"), "{html}");
    assert!(html.contains("&#60;script&#62;alert(3)&#60;/script&#62;"), "{html}");
    // The box shows what was typed, inside its attribute.
    assert!(html.contains("value=\"https://www.example.com/q?x=&#60;script&#62;alert(&#34;loc&#34;)"), "{html}");

    let typed = "\"><script>alert(4)</script>";
    let r = app.get(&format!("/view/default/lookup?loc={}", urlencode(typed)), &[]).await;
    assert_view_answer(&r, StatusCode::BAD_REQUEST);
    assert!(!r.text().contains("<script"), "{}", r.text());
    assert!(r.text().contains("value=\"&#34;&#62;&#60;script&#62;alert(4)&#60;/script&#62;\""), "{}", r.text());
}

/// A page's entries, 200 a screen by keyset: exactly 200 is one screen with no next link; a 201st brings the link,
/// whose screen holds it alone and links back to the first.
async fn entries_are_keyset_paged_two_hundred_a_screen(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    put_paths(&app, 0..200).await;
    let first = app.get("/view/default/pages/1", &[]).await.text();
    assert_eq!(rows(&first), 200);
    assert!(!first.contains("rel=\"next\""), "exactly a screen: nothing follows");
    assert!(first.contains("200 entries from the first"), "{first}");

    put_paths(&app, 200..201).await;
    let last_shown = app.store.find(&loc("e/0199")).await.unwrap().unwrap().url.id;
    let first = app.get("/view/default/pages/1", &[]).await.text();
    assert_eq!(rows(&first), 200);
    let next = format!("<a rel=\"next\" href=\"1?after={last_shown}\">");
    assert!(first.contains(&next), "{next} in {first}");

    let second = app.get(&format!("/view/default/pages/1?after={last_shown}"), &[]).await;
    assert_view_answer(&second, StatusCode::OK);
    let second = second.text();
    assert_eq!(rows(&second), 1);
    assert!(second.contains("/e/0200</a>"), "{second}");
    assert!(!second.contains("rel=\"next\"") && second.contains("<a href=\"1\">« First entries</a>"), "{second}");

    let id = app.store.find(&loc("e/0200")).await.unwrap().unwrap().url.id;
    let beyond = app.get(&format!("/view/default/pages/1?after={id}"), &[]).await;
    assert_view_answer(&beyond, StatusCode::OK);
    assert!(beyond.text().contains(&format!("No entries after id {id}.")), "{}", beyond.text());
}

fn loc(path: &str) -> sitemapd::domain::Loc {
    let public = sitemapd::domain::PublicUrl::parse(PUBLIC_URL).unwrap();
    sitemapd::domain::Loc::parse(&format!("{PUBLIC_URL}/{path}"), &public).unwrap()
}

/// A lookup shows the record, normalized as writes are (404 "not stored" otherwise); bad input of any screen is
/// a 400 or 404 page saying what was wrong.
async fn lookups_and_bad_input(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    put(&app, json!([{"loc": format!("{PUBLIC_URL}/about"), "lastmod": "2024-05-01T08:20+02:00", "priority": 0.8}]))
        .await;
    let found = app.get("/view/default/lookup?loc=HTTPS://WWW.EXAMPLE.COM/about", &[]).await;
    assert_view_answer(&found, StatusCode::OK);
    let html = found.text();
    assert!(html.contains("<dt>Lastmod</dt><dd>2024-05-01T06:20:00Z</dd>"), "{html}");
    assert!(html.contains("<dt>Priority</dt><dd>0.8</dd>"), "{html}");
    assert!(html.contains("<a href=\"pages/1?after=0\">page 1</a>"), "{html}");

    let absent = app.get(&format!("/view/default/lookup?loc={}", urlencode(&format!("{PUBLIC_URL}/nope"))), &[]).await;
    assert_view_answer(&absent, StatusCode::NOT_FOUND);
    assert!(absent.text().contains("Not stored: <span class=\"loc\">https://www.example.com/nope</span>"));

    let empty = app.get("/view/default/lookup", &[]).await;
    assert_view_answer(&empty, StatusCode::OK);
    assert!(empty.text().contains("<h1>Look up a URL</h1>"));

    let huge = format!("{PUBLIC_URL}/{}", "x".repeat(20_000));
    let too_long = app.get(&format!("/view/default/lookup?loc={}", urlencode(&huge)), &[]).await;
    assert_view_answer(&too_long, StatusCode::BAD_REQUEST);
    assert!(too_long.text().contains("20,024 bytes long") && !too_long.text().contains("xxxxxxxxxx"), "not echoed");

    for (path, status, says) in [
        ("/view/default/pages/1?after=abc", StatusCode::BAD_REQUEST, "after must be a record id"),
        ("/view/default/pages/1?after=-1", StatusCode::BAD_REQUEST, "after must be a record id"),
        ("/view/default/pages/1?after=99999999999999999999", StatusCode::BAD_REQUEST, "after must be a record id"),
        ("/view/default/?after=x", StatusCode::BAD_REQUEST, "after must be a page number"),
        ("/view/default/lookup?loc=a&loc=b", StatusCode::BAD_REQUEST, "loc is given more than once"),
        ("/view/default/lookup?loc=https://elsewhere.test/", StatusCode::BAD_REQUEST, "must lie under the public URL"),
        ("/view/default/pages/2", StatusCode::NOT_FOUND, "Site default has no page &#34;2&#34;."),
        ("/view/default/pages/abc", StatusCode::NOT_FOUND, "has no page"),
        ("/view/default/pages/0", StatusCode::NOT_FOUND, "has no page"),
        ("/view/default/pages/01", StatusCode::NOT_FOUND, "has no page"),
        ("/view/default/pages/99999999999999999999999", StatusCode::NOT_FOUND, "has no page"),
        ("/view/www/", StatusCode::NOT_FOUND, "There is no site named &#34;www&#34;."),
        ("/view/www/pages/1", StatusCode::NOT_FOUND, "There is no site named"),
        ("/view/default/nothing/here", StatusCode::NOT_FOUND, "No such screen."),
    ] {
        let r = app.get(path, &[]).await;
        assert_view_answer(&r, status);
        assert!(r.text().contains(says), "{path}: {}", r.text());
    }
}

/// `SITEMAPD_VIEW=false`: no screen of the view exists; the sitemaps are served as ever.
async fn the_view_can_be_turned_off(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_VIEW", "false")]).await;
    put_paths(&app, 0..2).await;
    for path in ["/view", "/view/", "/view/default/", "/view/default/pages/1", "/view/default/lookup?loc=x"] {
        let r = app.get(path, &[]).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.json()["error"], "not_found", "{path}: the service's own 404");
        assert!(r.header("content-security-policy").is_none(), "{path}: not the view's answer");
    }
    assert_eq!(app.get("/sitemap-1.xml", &[]).await.status, StatusCode::OK);
}

/// A store that cannot be reached: 503 with `Retry-After`, as an HTML page, never a panic or a 500.
async fn a_database_that_is_down_is_503(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    put_paths(&app, 0..3).await;
    app.store.close().await;
    for path in ["/view/default/", "/view/default/pages/1", "/view/default/lookup?loc=https://www.example.com/e/0001"] {
        let r = app.get(path, &[]).await;
        assert_view_answer(&r, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.header("retry-after"), Some("5"), "{path}");
        assert!(r.text().contains("The database is unavailable"), "{path}: {}", r.text());
    }
}

// --- in a real browser ------------------------------------------------------------------------------------------

/// Debian's `chromium`, from `PATH`. The browser test is ignored without it (see `build.rs`); `.ci/run` installs it.
pub(crate) fn chromium() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|path| path.is_file())
        .expect("chromium is not installed (apt-get install chromium)")
}

/// Where the screenshots are kept: `target/artifacts/view/` (beside `CARGO_TARGET_TMPDIR`, in the target
/// directory), so that they outlive the run.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("the target directory").join("artifacts/view");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs headless Chromium on `url` with `args` (a profile of its own, so that tests may run it at once), at most
/// 90 s; returns its standard output.
async fn run_chromium(chromium: &Path, url: &str, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new("timeout");
    command.arg("90").arg(chromium).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-dev-shm-usage",
    ]);
    command.arg(format!("--user-data-dir={}", profile.path().display())).args(args).arg(url);
    let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("run chromium");
    drop(profile);
    assert!(out.status.success(), "chromium {args:?} {url}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 DOM")
}

pub(crate) async fn dom(chromium: &Path, url: &str) -> String {
    let dom = run_chromium(chromium, url, &["--dump-dom"]).await;
    assert!(dom.contains("</html>"), "a whole document from {url}: {dom}");
    dom
}

/// A screenshot of `url` at `width`×`height`, kept as `name`; checks it is a PNG of that size.
pub(crate) async fn screenshot(chromium: &Path, url: &str, name: &str, (width, height): (u32, u32)) -> PathBuf {
    let path = artifacts().join(name);
    let _ = std::fs::remove_file(&path);
    let args = [format!("--screenshot={}", path.display()), format!("--window-size={width},{height}")];
    run_chromium(chromium, url, &["--hide-scrollbars", &args[0], &args[1]]).await;
    let png = std::fs::read(&path).unwrap_or_else(|e| panic!("no screenshot {}: {e}", path.display()));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    let size = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((size(16), size(20)), (width, height), "{}", path.display());
    path
}

const PHONE: (u32, u32) = (390, 844);
const DESKTOP: (u32, u32) = (1280, 900);

/// The view as a browser renders it, from `serve()` on a loopback port. The DOM Chromium builds is checked: the
/// page table's values and both bars, the hostile loc and news as text with no element injected, the keyset next
/// link and its screen, the lookup form's result. Screenshots of the site, a page and a record at a phone's size
/// (390×844) and a desktop's (1280×900) are kept in `target/artifacts/view/` to be looked at.
async fn the_view_renders_in_a_real_browser(b: Backend) {
    let chromium = chromium();
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "201")]).await;
    put(&app, json!([hostile_entry()])).await;
    put_paths(&app, 0..230).await;
    let (port, _stop) = serve(&app).await;
    let base = format!("http://127.0.0.1:{port}/view/");

    // `/view/` redirects to the one site; the table has both pages, their counts and both bars.
    let site = dom(&chromium, &base).await;
    assert!(site.contains("<h1>Site default</h1>"), "{site}");
    assert!(site.contains(r#"<strong id="total-urls">231</strong>"#), "{site}");
    assert!(site.contains(r#"value="1" title="201 of 201 URLs">"#), "page 1 is full: {site}");
    assert!(site.contains(r#"value="0.14925373134328357" title="30 of 201 URLs">"#), "{site}");
    assert!(site.contains(r#"<span class="pct">14.9%</span>"#), "{site}");
    assert_eq!(site.matches("<meter ").count(), 4, "two bars a page: {site}");

    // Page 1: the hostile entry first, as text: no element came of it. 200 rows and the next link.
    let page_url = format!("{base}default/pages/1");
    let page = dom(&chromium, &page_url).await;
    assert_eq!(rows(&page), 200, "{page}");
    assert!(page.contains(&format!(">{}</a>", HOSTILE_STORED.replace('&', "&amp;"))), "{page}");
    assert!(!page.contains("<script") && !page.contains("<img"), "{page}");
    let next = page.split("rel=\"next\" href=\"").nth(1).and_then(|s| s.split('"').next()).expect("a next link");
    let second = dom(&chromium, &format!("{base}default/pages/{next}")).await;
    assert_eq!(rows(&second), 1, "the 201st entry alone: {second}");
    assert!(second.contains("First entries"), "{second}");

    // The lookup form, submitted as a browser does (GET, the box's name): the record and its escaped news.
    let record_url = format!("{base}default/lookup?loc={}", urlencode(&hostile_loc()));
    let record = dom(&chromium, &record_url).await;
    assert!(record.contains("<dt>Extensions</dt><dd>3 images, 1 video, news, 4 alternates</dd>"), "{record}");
    assert!(record.contains("&lt;script&gt;alert(2)&lt;/script&gt; &amp; \"Times\""), "{record}");
    assert!(record.contains("\"&gt;&lt;img src=x onerror=alert(1)&gt; &amp; &lt;b&gt;bold&lt;/b&gt;"), "{record}");
    for markup in ["<script", "<img", "<b>"] {
        assert!(!record.contains(markup), "{markup} in the DOM: {record}");
    }
    let absent = dom(&chromium, &format!("{base}default/lookup?loc={}", urlencode(&format!("{PUBLIC_URL}/no")))).await;
    assert!(absent.contains("id=\"not-stored\">Not stored:"), "{absent}");

    let backend = format!("{b:?}").to_lowercase();
    let mut kept = Vec::new();
    for (what, url) in [("site", format!("{base}default/")), ("page", page_url), ("record", record_url)] {
        for (device, size) in [("phone", PHONE), ("desktop", DESKTOP)] {
            kept.push(screenshot(&chromium, &url, &format!("{what}-{device}-{backend}.png"), size).await);
        }
    }
    note(&format!(
        "the HTML view's screenshots: {}",
        kept.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    ));
}

/// How a screen lays out in Chromium `width` px wide (scrollbars shown, as a desktop's are): how many px the page
/// is wider than the window (0: it fits), and how many of its tables scroll sideways inside their own box. The
/// view allows no script (its CSP), so the screen's HTML, fetched through the router, is served from a loopback
/// port of the test's own with a script at its end that measures the layout and writes the figures into the DOM.
pub(crate) async fn measure(chromium: &Path, app: &TestApp, path: &str, width: u32) -> (i64, usize) {
    const SCRIPT: &str = "<script>(() => { const d = document.documentElement; \
        const boxes = [...document.querySelectorAll('.wide')].filter(b => b.scrollWidth > b.clientWidth).length; \
        const out = document.createElement('output'); out.id = 'measured'; \
        out.dataset.page = String(Math.max(0, d.scrollWidth - d.clientWidth)); out.dataset.boxes = String(boxes); \
        document.body.append(out); })();</script>";
    let r = app.get(path, &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
    let html = r.text().replacen("</body>", &format!("{SCRIPT}</body>"), 1);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let router = axum::Router::new().fallback(move || {
        let html = html.clone();
        async move { axum::response::Html(html) }
    });
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let url = format!("http://127.0.0.1:{port}/");
    let size = format!("--window-size={width},900");
    let dom = run_chromium(chromium, &url, &["--dump-dom", &size]).await;
    server.abort();
    let figure = |name: &str| -> i64 {
        let at = dom.find(&format!("data-{name}=\"")).unwrap_or_else(|| panic!("no {name} measured: {dom}"));
        let rest = &dom[at + name.len() + 7..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    };
    (figure("page"), figure("boxes") as usize)
}

/// At a desktop's 1280 px no screen is wider than the window, nor any of its tables wider than its box: the site
/// screen with sections of long names, a column per major crawler and the URL health panel, a page, a record. At
/// a phone's 420 px the page is never wider than the window (a table may scroll inside its own box).
async fn no_screen_is_wider_than_a_desktop_or_a_phone(b: Backend) {
    let chromium = chromium();
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "3"), ("SITEMAPD_HEALTH_CHECK", "report")];
    let app = TestApp::spawn(b, &vars).await;
    let section = "products-and-accessories";
    let entries: Vec<Value> = (0..9)
        .map(|i| json!({"loc": format!("{PUBLIC_URL}/{section}/item-{i:03}"), "section": section}))
        .chain((0..4).map(|i| json!({"loc": format!("{PUBLIC_URL}/e/{i}")})))
        .collect();
    put(&app, Value::Array(entries)).await;
    put(&app, json!([hostile_entry()])).await;
    let record = format!("/view/default/lookup?loc={}", urlencode(&format!("{PUBLIC_URL}/{section}/item-000")));
    for path in ["/view/default/", "/view/default/pages/1", record.as_str()] {
        for width in [1280, 420] {
            let (page, boxes) = measure(&chromium, &app, path, width).await;
            assert_eq!(page, 0, "{path} at {width} px: the page is {page} px wider than the window");
            if width == 1280 {
                assert_eq!(boxes, 0, "{path} at {width} px: {boxes} tables scroll inside their box");
            }
        }
    }
}

/// `app` served by `serve()` on a free loopback port, until the returned sender is dropped.
pub(crate) async fn serve(app: &TestApp) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = sitemapd::AppState::new(app.store.clone(), &app.config);
    let shutdown = async move {
        let _ = stopped.await;
    };
    tokio::spawn(sitemapd::serve(state, listener, shutdown, Duration::from_secs(1)));
    (port, stop)
}

both_backends!(
    the_screens_answer_html_with_their_headers,
    headings_read_naturally_for_one_page_and_for_many,
    every_value_is_escaped,
    entries_are_keyset_paged_two_hundred_a_screen,
    lookups_and_bad_input,
    the_view_can_be_turned_off,
    a_database_that_is_down_is_503,
    #[cfg_attr(sitemapd_no_chromium, ignore = "needs chromium")]
    the_view_renders_in_a_real_browser,
    #[cfg_attr(sitemapd_no_chromium, ignore = "needs chromium")]
    no_screen_is_wider_than_a_desktop_or_a_phone,
);
