//! What people see of publishing on the site screen: the "Publishing" panel, one row per target of the site (its
//! last complete pass, objects, bytes, files awaiting deletion, failures in a row with the last error, whether a pass
//! holds its lease), and no panel for a site without a target. The targets' state is written through the store's
//! `PublishLog` (claims, records, marks, releases, as a pass writes them), so every figure is known in advance; then
//! in headless Chromium, with screenshots in `target/artifacts/view/` (`publish-*.png`).

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sitemapd::store::PublishLog;

use crate::both_backends;
use crate::support::{Backend, TestApp};

const SITES: &str = "default=https://www.example.com/, shop=https://shop.example.com/";
const TOKEN: &str = "global-token";
const LEASE: Duration = Duration::from_secs(60);

/// The default site's targets, in the order the panel lists them (by target URL).
const DIR: &str = "file:///srv/www/sitemaps/";
const S3: &str = "s3://example-sitemaps/www/";
/// The shop's target: never on the default site's screen.
const SHOP: &str = "gs://shop-sitemaps/";
/// The directory target's last error: markup, kept as text.
const HOSTILE_ERROR: &str = "upload sitemap-2.xml: <script>alert(\"err\")</script> & 'refused'";

both_backends!(
    a_site_without_a_target_has_no_publishing_panel,
    the_publishing_panel_shows_each_target_of_the_site,
    #[cfg_attr(sitemapd_no_chromium, ignore = "needs chromium")]
    the_publishing_panel_renders_in_a_real_browser,
);

async fn spawn(b: Backend) -> TestApp {
    let app = TestApp::spawn(b, &[("SITEMAPD_SITES", SITES), ("SITEMAPD_API_TOKENS", TOKEN)]).await;
    let locs: Vec<Value> = (1..=5)
        .map(|i| json!({"loc": format!("https://www.example.com/p{i}")}))
        .chain([json!({"loc": "https://shop.example.com/s1"})])
        .collect();
    let headers = [("content-type", "application/json"), ("authorization", &format!("Bearer {TOKEN}") as &str)];
    let body = axum::body::Body::from(Value::Array(locs).to_string());
    let r = app.request(axum::http::Method::PUT, "/api/v1/urls", &headers, body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    app
}

fn site_id(app: &TestApp, name: &str) -> i64 {
    app.store.sites().by_name(name).expect("a configured site").id
}

/// The targets' state, written as passes write it:
/// - `S3`: a complete pass recorded three objects (3,002,100 bytes); a later one marked one of them gone.
/// - `DIR`: two passes failed (never a complete one), and a third holds the lease now.
/// - `SHOP`: the shop's, one complete pass with one object.
async fn seed(app: &TestApp) {
    let (www, shop) = (site_id(app, "default"), site_id(app, "shop"));
    let log: &dyn PublishLog = app.store.as_ref();

    let claim = log.publish_claim(www, S3, LEASE).await.unwrap().expect("a free target");
    for (key, version, bytes) in [
        ("www/sitemap-1.xml", "\"v1\"", 3_000_000),
        ("www/sitemap-1.xml.gz", "\"v1-gz\"", 2_000),
        ("www/sitemap.xml", "\"i1\"", 100),
    ] {
        assert!(log.publish_record(S3, claim, key, version, bytes).await.unwrap(), "{key}");
    }
    log.publish_release(S3, claim, Ok(())).await.unwrap();
    let claim = log.publish_claim(www, S3, LEASE).await.unwrap().expect("released");
    assert!(log.publish_mark_gone(S3, claim, &["www/sitemap-1.xml.gz".to_owned()]).await.unwrap());
    log.publish_release(S3, claim, Ok(())).await.unwrap();

    for error in ["connect: timed out", HOSTILE_ERROR] {
        let claim = log.publish_claim(www, DIR, LEASE).await.unwrap().expect("a free target");
        log.publish_release(DIR, claim, Err(error)).await.unwrap();
    }
    log.publish_claim(www, DIR, LEASE).await.unwrap().expect("a pass holds it now");

    let claim = log.publish_claim(shop, SHOP, LEASE).await.unwrap().expect("a free target");
    assert!(log.publish_record(SHOP, claim, "sitemap.xml", "\"s1\"", 42).await.unwrap());
    log.publish_release(SHOP, claim, Ok(())).await.unwrap();
}

/// The text of `html` after `start` up to `end`; panics when either is missing.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html.find(start).unwrap_or_else(|| panic!("{start:?} not in {html}")) + start.len();
    let len = html[from..].find(end).unwrap_or_else(|| panic!("{end:?} not after {start:?} in {html}"));
    &html[from..from + len]
}

/// `text` as the templates escape it.
fn escaped(text: &str) -> String {
    text.replace('&', "&#38;").replace('<', "&#60;").replace('>', "&#62;").replace('"', "&#34;").replace('\'', "&#39;")
}

/// The panel's rows, each as its cells' text with the tags dropped and the spaces folded.
fn target_rows(html: &str) -> Vec<String> {
    let table = between(html, "<table class=\"cards publishing\">", "</table>");
    let body = between(table, "<tbody>", "</tbody>");
    body.split("</tr>")
        .filter(|row| row.contains("<tr"))
        .map(|row| {
            let mut text = String::new();
            let mut in_tag = false;
            for c in row.chars() {
                match c {
                    '<' => {
                        in_tag = true;
                        text.push(' ');
                    }
                    '>' => in_tag = false,
                    c if !in_tag => text.push(c),
                    _ => {}
                }
            }
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect()
}

async fn a_site_without_a_target_has_no_publishing_panel(b: Backend) {
    let app = spawn(b).await;
    let html = app.get("/view/default/", &[]).await.text();
    assert!(html.contains("<h1>Site default</h1>"), "{html}");
    assert!(!html.contains("id=\"publishing\""), "no target, no panel: {html}");

    // Another site's target is not this site's.
    let log: &dyn PublishLog = app.store.as_ref();
    let claim = log.publish_claim(site_id(&app, "shop"), SHOP, LEASE).await.unwrap().expect("a free target");
    log.publish_release(SHOP, claim, Ok(())).await.unwrap();
    let html = app.get("/view/default/", &[]).await.text();
    assert!(!html.contains("id=\"publishing\""), "{html}");
    let shop = app.get("/view/shop/", &[]).await.text();
    assert!(shop.contains("<h2 id=\"publishing\">Publishing</h2>"), "{shop}");
    assert!(shop.contains(&format!("<code>{SHOP}</code>")), "{shop}");
}

async fn the_publishing_panel_shows_each_target_of_the_site(b: Backend) {
    let app = spawn(b).await;
    seed(&app).await;
    let r = app.get("/view/default/", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(html.contains("<h2 id=\"publishing\">Publishing</h2>"), "{html}");
    assert!(between(&html, "<h2 id=\"publishing\">", "</p>").contains("to 2 targets"), "{html}");
    assert!(!html.contains(SHOP), "the shop's target is not on the default site's screen: {html}");

    let rows = target_rows(&html);
    assert_eq!(rows.len(), 2, "{rows:#?}");
    // The directory: never completed, two failures in a row with the last error as text, a pass running now.
    assert_eq!(rows[0], format!("{DIR} never 0 0 bytes 0 2 failed {} publishing", escaped(HOSTILE_ERROR)));
    // S3: three objects, one awaiting deletion, its last complete pass a moment ago, idle.
    let s3 = &rows[1];
    assert!(s3.starts_with(&format!("{S3} ")), "{s3}");
    assert!(s3.ends_with(" ago 3 3.0 MB 1 none idle") || s3.ends_with(" just now 3 3.0 MB 1 none idle"), "{s3}");
    assert!(html.contains("<span title=\"3,002,100 bytes\">3.0 MB</span>"), "{html}");

    // Escaped: the error's markup is text, no element came of it.
    assert!(html.contains("&#60;script&#62;alert(&#34;err&#34;)&#60;/script&#62; &#38; &#39;refused&#39;"), "{html}");
    assert!(!html.contains("<script"), "{html}");

    // The shop's screen lists its own target only.
    let shop = target_rows(&app.get("/view/shop/", &[]).await.text());
    assert_eq!(shop.len(), 1, "{shop:#?}");
    assert!(shop[0].starts_with(&format!("{SHOP} ")) && shop[0].ends_with(" 1 42 bytes 0 none idle"), "{shop:#?}");
}

/// The site screen with its publishing panel as Chromium renders it from `serve()` on a loopback port: the DOM holds
/// the panel and the error as text, and screenshots at a desktop's width (1280) and a narrow phone's (420) are kept
/// in `target/artifacts/view/` (`publish-*.png`) to be looked at.
async fn the_publishing_panel_renders_in_a_real_browser(b: Backend) {
    use crate::view::{chromium, dom, screenshot, serve};
    let chromium = chromium();
    let app = spawn(b).await;
    seed(&app).await;
    let (port, _stop) = serve(&app).await;
    let url = format!("http://127.0.0.1:{port}/view/default/");
    let html = dom(&chromium, &url).await;
    assert!(html.contains("<h2 id=\"publishing\">Publishing</h2>"), "{html}");
    assert_eq!(target_rows(&html).len(), 2, "{html}");
    assert!(html.contains("&lt;script&gt;alert(\"err\")&lt;/script&gt; &amp; 'refused'"), "as text: {html}");
    assert!(!html.contains("<script"), "{html}");
    let backend = format!("{b:?}").to_lowercase();
    for (device, size) in [("desktop", (1280, 1600)), ("narrow", (420, 2400))] {
        screenshot(&chromium, &format!("{url}#publishing"), &format!("publish-{device}-{backend}.png"), size).await;
    }
}
