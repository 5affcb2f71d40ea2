//! `sitemapd import`: existing sitemaps into the store through the write path, against a local HTTP server that
//! behaves as real ones do (wrong `Content-Type`s, gzip under any name, redirects, 429 before 200, loops of
//! indexes, bombs), from files (real-world fixtures among them) and from NDJSON `export` wrote. Re-importing
//! changes nothing, on both backends. The binary's exit status, summary and progress output are checked too.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use serde_json::{Value, json};
use sitemapd::import::{HttpOptions, ImportOptions, Progress, Sections, Source, Summary};
use sitemapd::store::Store;

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, validate_xsd};

const BIN: &str = env!("CARGO_BIN_EXE_sitemapd");

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

fn urlset(body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:image=\"http://www.google.com/schemas/sitemap-image/1.1\">\n{body}</urlset>\n"
    )
}

fn url(path: &str) -> String {
    format!("<url><loc>{PUBLIC_URL}/{path}</loc></url>\n")
}

fn index(locs: &[String]) -> String {
    let items: String = locs.iter().map(|l| format!("<sitemap><loc>{l}</loc></sitemap>\n")).collect();
    format!("<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n{items}</sitemapindex>\n")
}

/// A response with the given status, headers and body.
fn answer(status: StatusCode, headers: &[(header::HeaderName, &str)], body: impl Into<axum::body::Body>) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().insert(name.clone(), value.parse().unwrap());
    }
    response
}

/// A local web server: what `routes` makes of its own base URL. Every request's path and `User-Agent` is kept.
struct Peer {
    base: String,
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl Peer {
    async fn start(routes: impl FnOnce(&str) -> Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let base = format!("http://{addr}");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let router = routes(&base).layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let log = log.clone();
                async move {
                    let agent = request
                        .headers()
                        .get(header::USER_AGENT)
                        .map(|v| v.to_str().unwrap_or_default().to_owned())
                        .unwrap_or_default();
                    log.lock().unwrap().push((request.uri().path().to_owned(), agent));
                    next.run(request).await
                }
            },
        ));
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Self { base, seen }
    }

    fn url(&self, path: &str) -> Source {
        Source::parse(&format!("{}{path}", self.base)).unwrap()
    }

    fn hits(&self, path: &str) -> usize {
        self.seen.lock().unwrap().iter().filter(|(p, _)| p == path).count()
    }
}

pub(crate) fn options(app: &TestApp, sources: Vec<Source>) -> ImportOptions {
    ImportOptions {
        sources,
        rewrites: Vec::new(),
        sections: Sections::Off,
        dry_run: false,
        delete_missing: false,
        rejects: None,
        concurrency: 4,
        max_sitemaps: 100,
        batch: 1000,
        store_tries: 5,
        store_retry_base: Duration::from_millis(10),
        limits: app.config.limits(),
        max_line_bytes: 1 << 20,
        http: HttpOptions { retry_base: Duration::from_millis(10), retries: 2, ..HttpOptions::default() },
        progress: Progress::Off,
    }
}

pub(crate) async fn import(app: &TestApp, options: ImportOptions) -> Summary {
    sitemapd::import::import(Some(app.store.clone()), app.store.sites(), options).await.expect("import runs")
}

/// Every stored loc, in storage order.
async fn stored(store: &dyn Store) -> Vec<String> {
    store.list_after(None, 0, 10_000).await.unwrap().into_iter().map(|r| r.url.loc).collect()
}

/// The site of the issue: a robots.txt with several `Sitemap:` lines (any case), an index served as HTML listing
/// gzip pages (one by a relative location) served as `text/plain` and with `Content-Encoding: gzip`, a text
/// sitemap behind a redirect, and a sitemap that answers 429 before 200.
async fn legacy_site() -> Peer {
    Peer::start(|base| {
        let robots = format!(
            "User-agent: *\nDisallow: /private\n\nSitemap: {base}/index.xml\nsitemap: {base}/moved.txt\r\n\
             SITEMAP: {base}/flaky.xml # the news\n"
        );
        let index = index(&[format!("{base}/s/1.xml.gz"), "s/2.xml.gz".to_owned()]);
        let page1 = gzip(
            urlset(&format!(
                "<url><loc>{PUBLIC_URL}/</loc><lastmod>2024-05-01</lastmod><priority>1.0</priority></url>\n\
                 <url><loc>{PUBLIC_URL}/p/1</loc><image:image><image:loc>https://cdn.example.net/1.jpg</image:loc>\
                 <image:caption>retired</image:caption></image:image></url>\n{}",
                url("p/2")
            ))
            .as_bytes(),
        );
        let page2 = gzip(urlset(&(url("q/1") + &url("q/2"))).as_bytes());
        let flaky = Arc::new(AtomicUsize::new(0));
        Router::new()
            .route(
                "/robots.txt",
                get(move || async move { answer(StatusCode::OK, &[(header::CONTENT_TYPE, "text/html")], robots) }),
            )
            .route(
                "/index.xml",
                get(move || async move { answer(StatusCode::OK, &[(header::CONTENT_TYPE, "text/html")], index) }),
            )
            .route(
                "/s/1.xml.gz",
                get(move || async move { answer(StatusCode::OK, &[(header::CONTENT_TYPE, "text/plain")], page1) }),
            )
            .route(
                "/s/2.xml.gz",
                get(move || async move {
                    let headers = [(header::CONTENT_TYPE, "application/xml"), (header::CONTENT_ENCODING, "gzip")];
                    answer(StatusCode::OK, &headers, page2)
                }),
            )
            .route(
                "/moved.txt",
                get(|| async { answer(StatusCode::MOVED_PERMANENTLY, &[(header::LOCATION, "/plain.txt")], "") }),
            )
            .route("/plain.txt", get(|| async { format!("{PUBLIC_URL}/t/1\n\n{PUBLIC_URL}/t/2\n") }))
            .route(
                "/flaky.xml",
                get(move || {
                    let flaky = flaky.clone();
                    async move {
                        if flaky.fetch_add(1, Ordering::SeqCst) == 0 {
                            answer(StatusCode::TOO_MANY_REQUESTS, &[(header::RETRY_AFTER, "0")], "slow down")
                        } else {
                            urlset(&url("news/1")).into_response()
                        }
                    }
                }),
            )
    })
    .await
}

async fn a_site_moves_in_from_its_robots_txt_and_a_second_import_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let peer = legacy_site().await;
    let summary = import(&app, options(&app, vec![peer.url("/robots.txt")])).await;
    assert!(summary.success(), "{summary}");
    let sources: Vec<(&str, Option<&str>, u64)> = summary
        .sources
        .iter()
        .map(|s| (s.source.strip_prefix(&peer.base).unwrap(), s.format, s.items))
        .collect::<Vec<_>>();
    let mut sorted = sources.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            ("/flaky.xml", Some("sitemap"), 1),
            ("/index.xml", Some("sitemap index"), 2),
            ("/moved.txt", Some("text sitemap"), 2),
            ("/robots.txt", Some("robots.txt"), 3),
            ("/s/1.xml.gz", Some("sitemap"), 3),
            ("/s/2.xml.gz", Some("sitemap"), 2),
        ],
        "{summary}"
    );
    assert_eq!((summary.entries, summary.valid, summary.rejected), (8, 8, 0), "{summary}");
    assert_eq!((summary.created, summary.updated, summary.unchanged), (8, 0, 0), "{summary}");
    assert_eq!(summary.notices.get("deprecated <image:caption> skipped"), Some(&1), "{summary}");
    assert_eq!(peer.hits("/flaky.xml"), 2, "429, then tried again");
    assert_eq!(peer.hits("/plain.txt"), 1, "the redirect was followed");
    let agents: Vec<String> = peer.seen.lock().unwrap().iter().map(|(_, a)| a.clone()).collect();
    assert!(agents.iter().all(|a| *a == format!("sitemapd/{}", env!("CARGO_PKG_VERSION"))), "{agents:?}");

    let mut locs = stored(&*app.store).await;
    locs.sort();
    let expected: Vec<String> =
        ["", "news/1", "p/1", "p/2", "q/1", "q/2", "t/1", "t/2"].iter().map(|p| format!("{PUBLIC_URL}/{p}")).collect();
    assert_eq!(locs, expected);
    let record = app.store.list_after(None, 0, 100).await.unwrap();
    let p1 = record.iter().find(|r| r.url.loc.ends_with("/p/1")).unwrap();
    let images = &p1.url.fields.ext.as_ref().expect("the image was kept").images;
    assert_eq!(images[0].loc, "https://cdn.example.net/1.jpg");
    let home = record.iter().find(|r| r.url.loc == format!("{PUBLIC_URL}/")).unwrap();
    assert_eq!(home.url.fields.lastmod.as_deref(), Some("2024-05-01"));

    let page = app.get("/sitemap-1.xml", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    validate_xsd(&[("sitemap-1.xml", &page.body)]);
    let again = import(&app, options(&app, vec![peer.url("/robots.txt")])).await;
    assert!(again.success(), "{again}");
    assert_eq!((again.created, again.updated, again.unchanged), (0, 0, 8), "no churn: {again}");
    let page_again = app.get("/sitemap-1.xml", &[]).await;
    assert_eq!(page_again.header("etag"), page.header("etag"));
    assert_eq!(page_again.body, page.body);
}

/// A loop of indexes is read once and reported; a chain deeper than ten levels stops at the tenth; a source that
/// is missing, not a sitemap, or keeps failing is reported with why; what could be read is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_deep_chains_and_failing_sources_are_reported() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let peer = Peer::start(|base| {
        let a = index(&[format!("{base}/loop-b.xml")]);
        let b = index(&[format!("{base}/loop-a.xml"), format!("{base}/leaf.xml")]);
        let mut router = Router::new()
            .route("/loop-a.xml", get(move || async move { a }))
            .route("/loop-b.xml", get(move || async move { b }))
            .route("/leaf.xml", get(|| async { urlset(&url("leaf")) }))
            .route("/html", get(|| async { "<!DOCTYPE html><html><body>Not here</body></html>" }))
            .route("/down.xml", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
            .route(
                "/noloc.xml",
                get(|| async { "<sitemapindex>\n<sitemap><lastmod>2024-01-01</lastmod></sitemap>\n</sitemapindex>" }),
            );
        for level in 1..=12 {
            let body = index(&[format!("{base}/deep/{}.xml", level + 1)]);
            router = router.route(&format!("/deep/{level}.xml"), get(move || async move { body }));
        }
        router
    })
    .await;
    let sources = ["/loop-a.xml", "/missing.xml", "/html", "/down.xml", "/deep/1.xml", "/noloc.xml"]
        .map(|p| peer.url(p))
        .to_vec();
    let summary = import(&app, options(&app, sources)).await;
    assert!(!summary.success());
    let base = &peer.base;
    assert_eq!(
        summary.not_followed,
        [
            format!("{base}/loop-a.xml: a loop of indexes ({base}/loop-a.xml → {base}/loop-b.xml → {base}/loop-a.xml)"),
            format!("{base}/deep/11.xml: listed 10 levels deep (by {base}/deep/10.xml)"),
        ],
        "{summary}"
    );
    let mut failed: Vec<(String, String)> = summary
        .sources
        .iter()
        .filter_map(|s| Some((s.source.strip_prefix(base.as_str())?.to_owned(), s.error.clone()?)))
        .collect();
    failed.sort();
    assert_eq!(
        failed,
        [
            ("/down.xml".to_owned(), "it answered 503 Service Unavailable (3 tries)".to_owned()),
            ("/html".to_owned(), "it is not a sitemap: its root element is <html>".to_owned()),
            ("/missing.xml".to_owned(), "it answered 404 Not Found".to_owned()),
            (
                "/noloc.xml".to_owned(),
                "a sitemap it lists cannot be read: line 2: a <sitemap> without a <loc>".to_owned()
            ),
        ],
        "{summary}"
    );
    assert_eq!(peer.hits("/loop-a.xml"), 1, "each sitemap once");
    assert_eq!(peer.hits("/deep/11.xml"), 0);
    assert_eq!(stored(&*app.store).await, [format!("{PUBLIC_URL}/leaf")]);
    let text = summary.to_string();
    assert!(text.contains("13 of 17 sources read whole, 0 cut at a limit, 4 failed"), "{text}");

    // An index that keeps listing indexes is followed up to --max-sitemaps, no further.
    let mut capped = options(&app, vec![peer.url("/deep/1.xml")]);
    capped.max_sitemaps = 3;
    let summary = import(&app, capped).await;
    assert_eq!(summary.sources.len(), 4, "the source and 3 sitemaps: {summary}");
    assert_eq!(summary.not_followed, [format!("{base}/deep/5.xml: more than 3 sitemaps (--max-sitemaps)")]);
}

/// A gzip bomb and a file past 50 MiB are read up to the protocol's limit, what came before it stored, and
/// reported as cut; so is a sitemap of more than 50,000 URLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_past_the_protocols_limits_are_read_up_to_them() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let comment = format!("<!--{}-->\n", "x".repeat(1000));
    let bomb =
        gzip(urlset(&format!("{}{}{}", url("bomb/first"), comment.repeat(60_000), url("bomb/never"))).as_bytes());
    assert!(bomb.len() < 1_000_000, "a bomb: {} bytes", bomb.len());
    let big = urlset(&format!("{}{}{}", url("big/first"), comment.repeat(53_000), url("big/never")));
    assert!(big.len() > 52_428_800);
    let many: String = (0..50_001).map(|i| format!("{PUBLIC_URL}/many/{i}\n")).collect();
    let peer = Peer::start(move |_| {
        Router::new()
            .route("/bomb.xml.gz", get(move || async move { bomb }))
            .route("/big.xml", get(move || async move { big }))
            .route("/many.txt", get(move || async move { many }))
    })
    .await;
    let mut options = options(&app, ["/bomb.xml.gz", "/big.xml", "/many.txt"].map(|p| peer.url(p)).to_vec());
    options.dry_run = false;
    let summary = import(&app, options).await;
    let cut: Vec<(String, Option<String>)> = summary
        .sources
        .iter()
        .map(|s| (s.source.strip_prefix(&peer.base).unwrap().to_owned(), s.cut.clone()))
        .collect();
    let over = Some("it is larger than 52428800 bytes uncompressed: read up to the limit".to_owned());
    let mut cut_sorted = cut.clone();
    cut_sorted.sort();
    assert_eq!(
        cut_sorted,
        [
            ("/big.xml".to_owned(), over.clone()),
            ("/bomb.xml.gz".to_owned(), over),
            ("/many.txt".to_owned(), Some("it lists more than 50000 URLs: the first 50000 were read".to_owned())),
        ]
    );
    assert!(!summary.success());
    assert_eq!(summary.created, 50_002, "{summary}");
    // Looked up one by one: which 10,000 records a listing's first screen holds depends on the order the sources'
    // batches were stored in.
    for (path, status) in [("bomb/first", 200), ("big/first", 200), ("many/0", 200), ("many/49999", 200)]
        .into_iter()
        .chain([("bomb/never", 404), ("big/never", 404), ("many/50000", 404)])
    {
        assert_eq!(app.find(&format!("{PUBLIC_URL}/{path}")).await.status, status, "{path}");
    }
}

/// Invalid entries go to the rejects file, one NDJSON line each (source, line, loc, reason, errors), checked line
/// by line; the valid ones around them are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_entries_go_to_the_rejects_file_and_the_rest_is_stored() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("bad.xml");
    std::fs::write(
        &xml,
        urlset(&format!(
            "{}<url><loc>{PUBLIC_URL}/b</loc><lastmod>yesterday</lastmod></url>\n\
             <url><lastmod>2024-01-01</lastmod></url>\n\
             <url><loc>https://elsewhere.example/c</loc><priority>2</priority></url>\n{}",
            url("a"),
            url("d")
        )),
    )
    .unwrap();
    let txt = dir.path().join("urls.txt");
    std::fs::write(&txt, format!("{PUBLIC_URL}/t\n/relative\n")).unwrap();
    let rejects = dir.path().join("rejects.ndjson");
    let mut both = options(&app, vec![Source::File(xml.clone()), Source::File(txt.clone())]);
    both.rejects = Some(rejects.clone());
    both.concurrency = 1;
    let summary = import(&app, both).await;
    assert!(summary.success(), "rejects do not make a source unread: {summary}");
    assert_eq!((summary.entries, summary.valid, summary.rejected, summary.created), (7, 3, 4, 3), "{summary}");
    let lines: Vec<Value> =
        std::fs::read_to_string(&rejects).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (xml, txt) = (xml.display().to_string(), txt.display().to_string());
    let expected = [
        (xml.as_str(), 4, Some(format!("{PUBLIC_URL}/b")), "lastmod: "),
        (xml.as_str(), 5, None, "loc: is required"),
        (xml.as_str(), 6, Some("https://elsewhere.example/c".to_owned()), "loc: must lie under the public URL"),
        (txt.as_str(), 2, Some("/relative".to_owned()), "loc: not an absolute URL"),
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:?}");
    for (line, (source, at, loc, reason)) in lines.iter().zip(expected) {
        assert_eq!(line["source"], source, "{line}");
        assert_eq!(line["line"], at, "{line}");
        assert_eq!(line["loc"], json!(loc), "{line}");
        assert!(line["reason"].as_str().unwrap().starts_with(reason), "{line}");
        assert!(!line["errors"].as_array().unwrap().is_empty(), "{line}");
    }
    let priority = lines[2]["errors"].as_array().unwrap();
    assert_eq!(priority.len(), 2, "every problem of the entry: {priority:?}");

    // The rejects file is never one of the sources (emptying it would empty the source); /dev/null takes them.
    let mut onto_source = options(&app, vec![Source::File(txt.clone().into())]);
    onto_source.rejects = Some(txt.clone().into());
    let refused = sitemapd::import::import(Some(app.store.clone()), app.store.sites(), onto_source).await;
    assert!(refused.unwrap_err().to_string().contains("is one of the sources"));
    assert!(std::fs::read_to_string(&txt).unwrap().contains("/relative"), "the source is untouched");
    let mut to_null = options(&app, vec![Source::File(txt.clone().into())]);
    to_null.rejects = Some("/dev/null".into());
    let summary = import(&app, to_null).await;
    assert!(summary.success(), "{summary}");
    // A robots.txt that lists no sitemap (a soft 404, say) is a failure, not an empty success.
    let robots = dir.path().join("robots.txt");
    std::fs::write(&robots, "<html>Not found</html>\n").unwrap();
    let summary = import(&app, options(&app, vec![Source::File(robots)])).await;
    assert_eq!(summary.sources[0].error.as_deref(), Some("it lists no Sitemap: line"), "{summary}");
    let mut locs = stored(&*app.store).await;
    locs.sort();
    assert_eq!(locs, ["a", "d", "t"].map(|p| format!("{PUBLIC_URL}/{p}")));
}

/// `--dry-run` validates and counts without writing (no store at all); `--rewrite` moves entries from an old host
/// onto the public URL before validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_writes_nothing_and_rewrites_move_hosts() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("staging.xml");
    std::fs::write(&file, urlset("<url><loc>https://staging.example.org/a</loc></url>\n<url><loc>https://staging.example.org/b</loc></url>\n")).unwrap();
    let mut dry = options(&app, vec![Source::File(file.clone())]);
    dry.dry_run = true;
    let summary = sitemapd::import::import(None, app.store.sites(), dry.clone()).await.unwrap();
    assert_eq!((summary.valid, summary.rejected), (0, 2), "without the rewrite they lie outside: {summary}");
    dry.rewrites = vec![("https://staging.example.org/".into(), format!("{PUBLIC_URL}/"))];
    let summary = sitemapd::import::import(None, app.store.sites(), dry.clone()).await.unwrap();
    assert_eq!((summary.valid, summary.rejected, summary.created), (2, 0, 0), "{summary}");
    assert!(summary.to_string().contains("(dry run: nothing written)"));
    assert!(stored(&*app.store).await.is_empty(), "a dry run writes nothing");
    dry.dry_run = false;
    let summary = import(&app, dry).await;
    assert_eq!(summary.created, 2, "{summary}");
    assert_eq!(stored(&*app.store).await, [format!("{PUBLIC_URL}/a"), format!("{PUBLIC_URL}/b")]);
}

/// `--delete-missing`: once every source was read whole and stored, the stored URLs of the sites written to that
/// no source listed are deleted; a URL listed but rejected stays, another site stays, and a source that failed
/// (or a dry run) deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_missing_removes_what_no_source_lists_any_more() {
    let sites = "default=https://www.example.com/, shop=https://shop.example.com/";
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_SITES", sites)]).await;
    app.put_paths(&["a", "b", "c", "gone/1", "gone/2"]).await;
    let r = app.put_json(&json!([{"loc": "https://shop.example.com/x"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("legacy.xml");
    std::fs::write(
        &file,
        urlset(&format!(
            "{}<url><loc>{PUBLIC_URL}/b</loc><lastmod>someday</lastmod></url>\n{}{}",
            url("a"),
            url("c"),
            url("d")
        )),
    )
    .unwrap();
    let with = |sources: Vec<Source>, dry_run: bool| {
        let mut o = options(&app, sources);
        o.delete_missing = true;
        o.dry_run = dry_run;
        o
    };
    let summary =
        sitemapd::import::import(None, app.store.sites(), with(vec![Source::File(file.clone())], true)).await.unwrap();
    assert_eq!(summary.delete_skipped.as_deref(), Some("a dry run reads no stored URL"));
    let failing = with(vec![Source::File(file.clone()), Source::File(dir.path().join("missing.xml"))], false);
    let summary = import(&app, failing).await;
    assert_eq!(summary.delete_skipped.as_deref(), Some("not every source was read whole and stored"), "{summary}");
    assert_eq!(summary.deleted, 0);
    assert_eq!(stored(&*app.store).await.len(), 7, "nothing deleted: a, b, c, gone/1, gone/2, x and the new d");

    // A rejected line whose loc cannot be read might be any stored URL: nothing is deleted.
    let unreadable = dir.path().join("unreadable.txt");
    std::fs::write(&unreadable, b"https://www.example.com/a\nhttps://www.example.com/\xff\n").unwrap();
    let summary = import(&app, with(vec![Source::File(file.clone()), Source::File(unreadable)], false)).await;
    assert_eq!(
        summary.delete_skipped.as_deref(),
        Some("1 rejected entries have no loc that could be read"),
        "{summary}"
    );

    let summary = import(&app, with(vec![Source::File(file)], false)).await;
    assert!(summary.success(), "{summary}");
    assert_eq!(summary.deleted, 2, "{summary}");
    assert!(summary.to_string().contains("deleted: 2 stored URLs no source listed"), "{summary}");
    let mut locs = stored(&*app.store).await;
    locs.sort();
    let mut expected: Vec<String> = ["a", "b", "c", "d"].iter().map(|p| format!("{PUBLIC_URL}/{p}")).collect();
    expected.insert(0, "https://shop.example.com/x".to_owned());
    assert_eq!(locs, expected, "b is listed (if invalid) and the shop was not imported: both stay");
    let page = app.get("/sitemap-1.xml", &[]).await;
    assert!(!page.text().contains("/gone/"), "{}", page.text());
}

/// The database disappears during an import: the batch is tried again, then the import stops and says so; what it
/// counted as stored is stored, and the sources not yet read are not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_fails_stops_the_import_and_the_counts_stay_true() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let peer = Peer::start(|base| {
        let listed = index(&[format!("{base}/slow.txt"), format!("{base}/later.txt")]);
        Router::new()
            .route("/index.xml", get(move || async move { listed }))
            .route(
                "/slow.txt",
                get(|| async {
                    let lines = (0..20).map(|i| async move {
                        // Not a gate: the source trickles in, so that the file goes while the import runs.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok::<_, std::io::Error>(format!("{PUBLIC_URL}/slow/{i}\n"))
                    });
                    axum::body::Body::from_stream(futures_util::stream::iter(lines).then(|f| f))
                }),
            )
            .route("/later.txt", get(|| async { format!("{PUBLIC_URL}/later\n") }))
    })
    .await;
    let db_file = app.db.url.strip_prefix("sqlite://").unwrap().split('?').next().unwrap().to_owned();
    let mut o = options(&app, vec![peer.url("/index.xml")]);
    o.batch = 2;
    o.concurrency = 1;
    let store = app.store.clone();
    let sites = app.store.sites();
    let running = tokio::spawn(sitemapd::import::import(Some(store), sites, o));
    // Once some batches are stored, the file goes.
    while stored(&*app.store).await.len() < 4 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::remove_file(&db_file).unwrap();
    let summary = running.await.unwrap().unwrap();
    assert!(!summary.success());
    let error = summary.error.as_deref().unwrap_or_default();
    assert!(error.starts_with("the store failed") && error.contains("was deleted or replaced"), "{summary}");
    assert!(summary.created >= 4 && summary.created < 20, "{summary}");
    // The pool still reads the file it opened: every batch counted is there, none beyond.
    let kept = stored(&*app.store).await;
    assert_eq!(kept.len() as u64, summary.created, "{summary}");
    assert_eq!(peer.hits("/later.txt"), 0, "nothing more is read once the store failed: {summary}");
    assert_eq!(summary.not_read, 1, "{summary}");
    let slow = summary.sources.iter().find(|s| s.source.ends_with("/slow.txt")).unwrap();
    assert!(slow.error.is_some(), "a source whose entries were not all stored is not read whole: {summary}");
}

/// With several sites, each entry of one sitemap goes to the site its loc lies under.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_entry_goes_to_its_site() {
    let sites = "default=https://www.example.com/, shop=https://shop.example.com/";
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_SITES", sites)]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("both.xml");
    std::fs::write(&file, urlset(&format!("{}<url><loc>https://shop.example.com/x</loc></url>\n", url("a")))).unwrap();
    let summary = import(&app, options(&app, vec![Source::File(file)])).await;
    assert_eq!(summary.created, 2, "{summary}");
    let shop = app.store.sites().by_name("shop").unwrap().id;
    let on_shop = app.store.list_after(Some(shop), 0, 10).await.unwrap();
    assert_eq!(on_shop.iter().map(|r| r.url.loc.as_str()).collect::<Vec<_>>(), ["https://shop.example.com/x"]);
    let page = app.get("/sitemap-1.xml", &[("host", "shop.example.com")]).await;
    assert!(page.text().contains("https://shop.example.com/x"));
}

/// What `export` writes, `import` takes back: every entry unchanged.
async fn an_export_imported_back_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let entries: Vec<Value> = (0..3).map(|i| crate::extensions::full_entry(&format!("full/{i}"))).collect();
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    app.put_paths(&["a", "b"]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.ndjson");
    let mut out = Vec::new();
    sitemapd::export::export(&*app.store, None, &mut out).await.unwrap();
    std::fs::write(&file, &out).unwrap();
    let summary = import(&app, options(&app, vec![Source::File(file)])).await;
    assert!(summary.success(), "{summary}");
    assert_eq!(summary.sources[0].format, Some("NDJSON"));
    assert_eq!((summary.created, summary.updated, summary.unchanged), (0, 0, 5), "{summary}");
}

/// A site's news sitemap and its page sitemap list the same article, one with only its news, the other with its
/// lastmod and image: imported in either order they make one record with all of it, and a second import changes
/// nothing.
async fn a_news_sitemap_and_a_page_sitemap_make_one_record(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    // Published a little while ago: the news window ends at the current whole second.
    let now = (time::OffsetDateTime::now_utc() - time::Duration::minutes(5))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let article = format!("{PUBLIC_URL}/news/1");
    let news = dir.path().join("news.xml");
    std::fs::write(
        &news,
        format!(
            "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
             xmlns:news=\"http://www.google.com/schemas/sitemap-news/0.9\"><url><loc>{article}</loc><news:news>\
             <news:publication><news:name>The Times</news:name><news:language>en</news:language></news:publication>\
             <news:publication_date>{now}</news:publication_date><news:title>A</news:title></news:news></url></urlset>"
        ),
    )
    .unwrap();
    let pages = dir.path().join("pages.xml");
    std::fs::write(
        &pages,
        urlset(&format!(
            "<url><loc>{article}</loc><lastmod>2024-05-02</lastmod><image:image><image:loc>https://cdn.example.net/1.jpg\
             </image:loc></image:image></url>\n"
        )),
    )
    .unwrap();
    let first = import(&app, options(&app, vec![Source::File(news.clone()), Source::File(pages.clone())])).await;
    assert_eq!(first.created + first.updated + first.unchanged, 2, "{first}");
    let record = app.store.list_after(None, 0, 10).await.unwrap().remove(0).url;
    let ext = record.fields.ext.as_ref().expect("extensions");
    assert_eq!((record.fields.lastmod.as_deref(), ext.images.len(), ext.news.is_some()), (Some("2024-05-02"), 1, true));
    let page = app.get("/sitemap-1.xml", &[]).await;
    let news_page = app.get("/sitemap-news.xml", &[]).await;
    assert_eq!(news_page.status, StatusCode::OK, "{}", news_page.text());
    assert!(news_page.text().contains(&article));
    let mut reversed = options(&app, vec![Source::File(pages), Source::File(news)]);
    reversed.concurrency = 1;
    let again = import(&app, reversed).await;
    assert_eq!((again.created, again.updated, again.unchanged), (0, 0, 2), "{again}");
    assert_eq!(app.get("/sitemap-1.xml", &[]).await.header("etag"), page.header("etag"));
    assert_eq!(app.get("/sitemap-news.xml", &[]).await.body, news_page.body);
}

/// A WordPress site with Yoast's sitemaps: an index (`sitemap_index.xml`) listing one sitemap per content type,
/// a second page of posts, Yoast's news sitemap (`news` is no section), and an index of a section of its own
/// (`sitemap-blog.xml`) whose sitemap's name says none. Each loc's path names the section it should land in.
async fn yoast_site() -> Peer {
    Peer::start(|base| {
        let children: Vec<String> = [
            "product-sitemap.xml",
            "post-sitemap.xml",
            "post-sitemap2.xml",
            "page-sitemap.xml",
            "sitemap-blog.xml",
            "news-sitemap.xml",
        ]
        .iter()
        .map(|name| format!("{base}/{name}"))
        .collect();
        let routes = [
            ("/sitemap_index.xml", index(&children)),
            ("/product-sitemap.xml", urlset(&(url("product/1") + &url("product/2")))),
            ("/post-sitemap.xml", urlset(&(url("post/1") + &url("post/2")))),
            ("/post-sitemap2.xml", urlset(&url("post/3"))),
            ("/page-sitemap.xml", urlset(&url("page/about"))),
            ("/sitemap-blog.xml", index(&[format!("{base}/archive/sitemap1.xml")])),
            ("/archive/sitemap1.xml", urlset(&url("blog/1"))),
            ("/news-sitemap.xml", urlset(&url("default/1"))),
        ];
        routes
            .into_iter()
            .fold(Router::new(), |router, (path, body)| router.route(path, get(move || async move { body })))
    })
    .await
}

/// The locs `yoast_site` lists: (path, the section it should land in with `--sections-from-names`).
const YOAST_LOCS: [(&str, Option<&str>); 8] = [
    ("product/1", Some("product")),
    ("product/2", Some("product")),
    ("post/1", Some("post")),
    ("post/2", Some("post")),
    ("post/3", Some("post")),
    ("page/about", Some("page")),
    ("blog/1", Some("blog")),
    ("default/1", None),
];

/// The section the API says `path`'s record is in (`None`: the default section).
async fn section_of(app: &TestApp, path: &str) -> Option<String> {
    let found = app.find(&format!("{PUBLIC_URL}/{path}")).await;
    assert_eq!(found.status, StatusCode::OK, "{path}: {}", found.text());
    found.json()["section"].as_str().map(str::to_owned)
}

/// What the summary says it stored by section, as (name, count).
fn by_section(summary: &Summary) -> Vec<(Option<&str>, u64)> {
    summary.by_section.iter().map(|c| (c.section.as_deref(), c.entries)).collect()
}

/// With `--sections-from-names`, each sitemap's entries go to the section its file name says, an index's entries
/// to their own sitemap's (or, when that names none, the index's): the site keeps the structure Yoast gave it, and
/// the summary counts each section. A second import changes nothing.
async fn a_yoast_site_keeps_its_sections(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let peer = yoast_site().await;
    let mut from_names = options(&app, vec![peer.url("/sitemap_index.xml")]);
    from_names.sections = Sections::FromNames;
    let summary = import(&app, from_names.clone()).await;
    assert!(summary.success(), "{summary}");
    assert_eq!((summary.valid, summary.created), (8, 8), "{summary}");
    assert_eq!(
        by_section(&summary),
        [(Some("post"), 3), (Some("product"), 2), (Some("blog"), 1), (Some("page"), 1), (None, 1)],
        "{summary}"
    );
    let text = summary.to_string();
    assert!(
        text.contains("stored by section:\n  post: 3\n  product: 2\n  blog: 1\n  page: 1\n  (default): 1\n"),
        "{text}"
    );
    let mut locs = stored(&*app.store).await;
    locs.sort();
    let mut expected: Vec<String> = YOAST_LOCS.iter().map(|(path, _)| format!("{PUBLIC_URL}/{path}")).collect();
    expected.sort();
    assert_eq!(locs, expected);
    for (path, section) in YOAST_LOCS {
        assert_eq!(section_of(&app, path).await.as_deref(), section, "{path}");
    }
    let index = app.get("/sitemap.xml", &[]).await;
    let pages: Vec<String> = ["1", "blog-1", "page-1", "post-1", "product-1"]
        .iter()
        .map(|page| format!("{PUBLIC_URL}/sitemap-{page}.xml"))
        .collect();
    assert_eq!(crate::support::xml_texts(&index.text(), "loc"), pages, "the default section's page, then by name");
    let again = import(&app, from_names).await;
    assert_eq!((again.created, again.updated, again.unchanged), (0, 0, 8), "no churn: {again}");
    assert_eq!(app.get("/sitemap.xml", &[]).await.header("etag"), index.header("etag"));

    // What export writes, an import takes back section and all, and sections off keep the lines' own.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.ndjson");
    let mut out = Vec::new();
    sitemapd::export::export(&*app.store, None, &mut out).await.unwrap();
    std::fs::write(&file, &out).unwrap();
    let back = import(&app, options(&app, vec![Source::File(file)])).await;
    assert_eq!((back.created, back.updated, back.unchanged), (0, 0, 8), "{back}");
    assert_eq!(by_section(&back)[0], (Some("post"), 3), "an NDJSON line's section is counted: {back}");
    let plain = import(&app, options(&app, vec![peer.url("/product-sitemap.xml")])).await;
    assert!(plain.by_section.is_empty() && !plain.to_string().contains("by section"), "sections off: {plain}");
}

/// `--section shop` puts every entry read in `shop`, whatever the sitemaps' names.
async fn everything_goes_into_the_section_given(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let peer = yoast_site().await;
    let mut shop = options(&app, vec![peer.url("/sitemap_index.xml")]);
    shop.sections = Sections::All(sitemapd::domain::Section::parse("shop").unwrap());
    let summary = import(&app, shop).await;
    assert!(summary.success(), "{summary}");
    assert_eq!(by_section(&summary), [(Some("shop"), 8)], "{summary}");
    for (path, _) in YOAST_LOCS {
        assert_eq!(section_of(&app, path).await.as_deref(), Some("shop"), "{path}");
    }
    let index = app.get("/sitemap.xml", &[]).await;
    assert_eq!(crate::support::xml_texts(&index.text(), "loc"), [format!("{PUBLIC_URL}/sitemap-shop-1.xml")]);
}

/// The command line: a `--section` that is no valid section, or given with `--sections-from-names`, is a usage
/// error (exit 2) before anything is read, opened or written; `--sections-from-names` prints a line per section.
async fn a_bad_section_fails_cleanly_and_writes_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let peer = yoast_site().await;
    let dir = tempfile::tempdir().unwrap();
    let source = format!("{}/sitemap_index.xml", peer.base);
    let cases: [(&[&str], &str); 5] = [
        (&["--section", "news"], "--section: \"news\" is not a section name: \"news\" is reserved"),
        (&["--section", "Products"], "is not a section name: a section is 1 to 32 lower-case letters"),
        (&["--section", "top-10"], "not ending with a hyphen or a hyphen and digits"),
        (&["--section", ""], "\"\" is not a section name"),
        (&["--section", "shop", "--sections-from-names"], "cannot be used with"),
    ];
    for (flags, says) in cases {
        let mut args = vec!["import"];
        args.extend_from_slice(flags);
        args.push(&source);
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        let (db, d) = (app.db.url.clone(), dir.path().to_owned());
        let out =
            tokio::task::spawn_blocking(move || run(&d, &db, &args.iter().map(String::as_str).collect::<Vec<_>>()))
                .await
                .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{flags:?}: no summary");
    }
    assert_eq!(peer.seen.lock().unwrap().len(), 0, "nothing was read");
    assert!(!dir.path().join("import-rejects.ndjson").exists(), "no rejects file was made");
    assert!(stored(&*app.store).await.is_empty(), "nothing was written");

    let (db, d) = (app.db.url.clone(), dir.path().to_owned());
    let out =
        tokio::task::spawn_blocking(move || run(&d, &db, &["import", "--sections-from-names", &source])).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("stored by section:\n  post: 3\n  product: 2\n"), "{stdout}");
    assert_eq!(stored(&*app.store).await.len(), 8);
    assert_eq!(section_of(&app, "post/3").await.as_deref(), Some("post"));
}

/// A running sitemapd's text sitemaps, plain and gzip, imported into another database: the same locs, read as
/// text sitemaps.
async fn a_running_sitemapds_text_pages_import_into_another_database(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    app.put_paths(&["a", "b?x=1&y=2", "caf\u{e9}", "d", "e"]).await;
    let router = app.router.clone();
    let server = Peer::start(move |_| router).await;
    let copy = TestApp::spawn(b, &[]).await;
    let sources = vec![server.url("/sitemap-1.txt"), server.url("/sitemap-2.txt.gz")];
    let summary = import(&copy, options(&copy, sources)).await;
    assert!(summary.success(), "{summary}");
    assert!(summary.sources.iter().all(|s| s.format == Some("text sitemap")), "{summary}");
    assert_eq!(summary.created, 5, "{summary}");
    let mut original = stored(&*app.store).await;
    let mut imported = stored(&*copy.store).await;
    original.sort();
    imported.sort();
    assert_eq!(imported, original);
    assert!(imported.contains(&format!("{PUBLIC_URL}/caf%C3%A9")), "{imported:?}");
}

both_backends!(
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    a_site_moves_in_from_its_robots_txt_and_a_second_import_changes_nothing,
    an_export_imported_back_changes_nothing,
    a_news_sitemap_and_a_page_sitemap_make_one_record,
    a_yoast_site_keeps_its_sections,
    everything_goes_into_the_section_given,
    a_bad_section_fails_cleanly_and_writes_nothing,
    a_running_sitemapds_text_pages_import_into_another_database,
);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/real").join(name)
}

/// Real sitemaps from peer projects' test data (origin and licence in tests/fixtures/import/real/README.md): each
/// is read whole, its valid entries stored under the site of its host, the pages they make pass the schemas, and
/// what is refused is what the files really get wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
async fn real_world_sitemaps_are_read() {
    let hosts = [
        ("hebden", "http://www.hebdenbridgetimes.co.uk/"),
        ("shinpai", "https://shinpaideshou.wordpress.com/"),
        ("domain", "http://www.domain.com/"),
        ("balter", "http://ben.balter.com/"),
        ("wapo", "https://www.washingtonpost.com/"),
        ("sitemaps", "https://www.sitemaps.org/"),
    ];
    let sites: Vec<String> = hosts.iter().map(|(n, u)| format!("{n}={u}")).collect();
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_SITES", &sites.join(","))]).await;
    let files = [
        "hebdenbridgetimes-articles-sitemap.xml",
        "shinpaideshou-news-sitemap.xml",
        "sitemap-with-bom.txt",
        "ben.balter.com-sitemap.xml.gz",
        "washingtonpost-video-sitemap.xml",
        "sitemaps.org-sitemap-crlf.xml",
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(&app, files.iter().map(|f| Source::File(fixture(f))).collect());
    options.rejects = Some(dir.path().join("rejects.ndjson"));
    let summary = import(&app, options).await;
    assert!(summary.success(), "{summary}");
    let items: Vec<(String, Option<&str>, u64)> = summary
        .sources
        .iter()
        .map(|s| (Path::new(&s.source).file_name().unwrap().to_string_lossy().into_owned(), s.format, s.items))
        .collect();
    for (file, format, count) in [
        ("hebdenbridgetimes-articles-sitemap.xml", "sitemap", 74),
        ("shinpaideshou-news-sitemap.xml", "sitemap", 3),
        ("sitemap-with-bom.txt", "text sitemap", 2),
        ("ben.balter.com-sitemap.xml.gz", "sitemap", 3),
        ("washingtonpost-video-sitemap.xml", "sitemap", 6),
        ("sitemaps.org-sitemap-crlf.xml", "sitemap", 84),
    ] {
        assert!(items.contains(&(file.to_owned(), Some(format), count)), "{file}: {items:?}");
    }
    let rejects = std::fs::read_to_string(dir.path().join("rejects.ndjson")).unwrap();
    let rejected: Vec<Value> = rejects.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        rejected.iter().all(|r| r["source"].as_str().unwrap().ends_with("washingtonpost-video-sitemap.xml")),
        "only the Post's videos are invalid (content_loc \"None\", no thumbnail): {rejects}"
    );
    assert_eq!(rejected.len(), 6, "{rejects}");
    assert!(rejected[0]["reason"].as_str().unwrap().contains("videos[0].thumbnail_loc: is required"), "{rejects}");
    assert_eq!(summary.created, 74 + 3 + 2 + 3 + 84, "{summary}");
    for notice in [
        "deprecated <image:caption> skipped",
        "deprecated <video:category> skipped",
        "<mobile:mobile> is not kept: skipped",
        "deprecated <news:keywords> skipped",
    ] {
        assert!(summary.notices.contains_key(notice), "{notice}: {summary}");
    }
    // The pages they make are valid sitemaps, extensions included.
    let mut bodies = Vec::new();
    for (host, path) in [
        ("www.hebdenbridgetimes.co.uk", "/sitemap-1.xml"),
        ("shinpaideshou.wordpress.com", "/sitemap-1.xml"),
        ("www.sitemaps.org", "/sitemap-1.xml"),
        ("www.sitemaps.org", "/sitemap.xml"),
    ] {
        let page = app.get(path, &[("host", host)]).await;
        assert_eq!(page.status, StatusCode::OK, "{host}{path}");
        bodies.push((path.trim_start_matches('/').to_owned(), page.body));
    }
    let bodies: Vec<(&str, &[u8])> = bodies.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    validate_xsd(&bodies);

    // The index lists its three sitemaps (read, not fetched: the tests never reach the internet).
    let mut listed = Vec::new();
    let file = std::fs::File::open(fixture("wordpress.org-sitemap-index.xml")).unwrap();
    let report = sitemapd::import::read::read(file, &Default::default(), &mut |f| {
        listed.push(f);
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(report.format, Some(sitemapd::import::read::Format::Index));
    assert_eq!(listed.len(), 3, "{listed:?}");
}

fn run(dir: &Path, db: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs([("DATABASE_URL", db), ("SITEMAPD_PUBLIC_URL", PUBLIC_URL), ("RUST_LOG", "info")])
        .args(args)
        .output()
        .expect("run sitemapd")
}

/// The binary: the summary on standard output, progress lines on stderr every `--progress-interval` when it is not
/// a terminal, and the exit status: 0 every source read whole, 1 one was not, 2 a bad command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reports_progress_a_summary_and_an_exit_status() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    // A source slow enough for several progress lines: a text sitemap that trickles in.
    let peer = Peer::start(|_| {
        Router::new().route(
            "/slow.txt",
            get(|| async {
                let lines = (0..6).map(|i| {
                    let line = format!("{PUBLIC_URL}/slow/{i}\n");
                    async move {
                        // Not a gate: the source trickles in, slow enough for several progress lines.
                        tokio::time::sleep(Duration::from_millis(150)).await;
                        Ok::<_, std::io::Error>(line)
                    }
                });
                axum::body::Body::from_stream(futures_util::stream::iter(lines).then(|f| f))
            }),
        )
    })
    .await;
    let slow = format!("{}/slow.txt", peer.base);
    let db = app.db.url.clone();
    let d = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || run(&d, &db, &["import", "--progress-interval", "0.2", &slow]))
        .await
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("sitemapd import: 1 of 1 sources read whole"), "{stdout}");
    assert!(stdout.contains("stored: 6 created, 0 updated, 0 unchanged"), "{stdout}");
    let progress: Vec<&str> = stderr.lines().filter(|l| l.contains("importing")).collect();
    assert!(progress.len() >= 2, "a line every 0.2 s of a 0.9 s import: {stderr}");
    assert!(progress.iter().all(|l| l.contains("sources=\"0/1\"") || l.contains("sources=\"1/1\"")), "{stderr}");
    assert!(progress.last().unwrap().contains("entries="), "{stderr}");
    assert!(!stdout.contains("importing"), "progress stays off standard output");

    let db = app.db.url.clone();
    let d = dir.path().to_owned();
    let missing = tokio::task::spawn_blocking(move || run(&d, &db, &["import", "nothing-here.xml"])).await.unwrap();
    assert_eq!(missing.status.code(), Some(1), "{}", String::from_utf8_lossy(&missing.stderr));
    assert!(String::from_utf8_lossy(&missing.stdout).contains("nothing-here.xml: cannot open it"));
    let db = app.db.url.clone();
    let d = dir.path().to_owned();
    let usage = tokio::task::spawn_blocking(move || run(&d, &db, &["import", "--rewrite", "no-equals", "x.xml"]))
        .await
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&usage.stderr).contains("give FROM=TO"),
        "{}",
        String::from_utf8_lossy(&usage.stderr)
    );
    let db = app.db.url.clone();
    let d = dir.path().to_owned();
    let twice = tokio::task::spawn_blocking(move || run(&d, &db, &["import", "-", "-"])).await.unwrap();
    assert_eq!(twice.status.code(), Some(2));
    std::fs::write(dir.path().join("import-rejects.ndjson"), "{}\n").unwrap();
    let db = app.db.url.clone();
    let d = dir.path().to_owned();
    let onto = tokio::task::spawn_blocking(move || run(&d, &db, &["import", "import-rejects.ndjson"])).await.unwrap();
    assert_eq!(onto.status.code(), Some(2), "{}", String::from_utf8_lossy(&onto.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("import-rejects.ndjson")).unwrap(), "{}\n", "left whole");
}

/// An import whose every entry is rejected stored nothing: it exits 1 and says why in one line, naming the first
/// reason and the rejects file. One valid entry among them is an import that worked (exit 0), as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_that_rejects_every_entry_exits_1_saying_why() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let bad: String = (1..=5).map(|i| format!("https://elsewhere.example/{i}\n")).collect();
    std::fs::write(dir.path().join("bad.txt"), &bad).unwrap();
    std::fs::write(dir.path().join("mixed.txt"), format!("{bad}{PUBLIC_URL}/kept\n")).unwrap();
    let run_on = |file: &'static str| {
        let (d, db) = (dir.path().to_owned(), app.db.url.clone());
        tokio::task::spawn_blocking(move || run(&d, &db, &["import", file]))
    };
    let out = run_on("bad.txt").await.unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "nothing stored is a failure: {stdout}\n{stderr}");
    assert!(stdout.contains("entries: 5 read, 0 valid, 5 rejected"), "{stdout}");
    let why: Vec<&str> = stdout.lines().filter(|l| l.starts_with("failed: ")).collect();
    assert_eq!(
        why,
        [format!(
            "failed: all 5 entries were rejected, so nothing was stored (the first, bad.txt line 1: loc: must lie \
             under the public URL {PUBLIC_URL}/ (the sitemaps.org location rule)); every reason is in \
             import-rejects.ndjson"
        )],
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("import-rejects.ndjson")).unwrap().lines().count(), 5);
    assert!(stored(&*app.store).await.is_empty());

    let out = run_on("mixed.txt").await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "rejects beside a stored entry leave it 0: {stdout}");
    assert!(stdout.contains("entries: 6 read, 1 valid, 5 rejected") && !stdout.contains("failed:"), "{stdout}");
    assert_eq!(stored(&*app.store).await, [format!("{PUBLIC_URL}/kept")]);
}

/// An import queues nothing for IndexNow by default (a move is not a change of the pages moved), nor with the
/// documented `--no-indexnow`; `--indexnow` queues what it changes, like the API's writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_queues_for_indexnow_only_when_asked() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), format!("{PUBLIC_URL}/a\n{PUBLIC_URL}/b\n")).unwrap();
    std::fs::write(dir.path().join("c.txt"), format!("{PUBLIC_URL}/c\n")).unwrap();
    std::fs::write(dir.path().join("d.txt"), format!("{PUBLIC_URL}/d\n")).unwrap();
    let run_with_key = |args: Vec<&'static str>| {
        let (d, db) = (dir.path().to_owned(), app.db.url.clone());
        tokio::task::spawn_blocking(move || {
            Command::new(BIN)
                .current_dir(&d)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .envs([("DATABASE_URL", db.as_str()), ("SITEMAPD_PUBLIC_URL", PUBLIC_URL)])
                .env("SITEMAPD_INDEXNOW_KEYS", "0123456789abcdef0123456789abcdef")
                .args(args)
                .output()
                .expect("run sitemapd")
        })
    };
    let queued = || async { app.store.outbox_size().await.unwrap().iter().map(|(_, n)| n).sum::<i64>() };
    let out = run_with_key(vec!["import", "a.txt"]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(queued().await, 0, "nothing queued by default");
    let out = run_with_key(vec!["import", "--no-indexnow", "d.txt"]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(queued().await, 0, "nothing queued with --no-indexnow");
    let out = run_with_key(vec!["import", "--indexnow", "a.txt", "c.txt"]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(queued().await, 1, "the one change queued");
    let out = run_with_key(vec!["import", "--indexnow", "--no-indexnow", "c.txt"]).await.unwrap();
    assert_eq!(out.status.code(), Some(2), "the two contradict each other");
}

/// On a terminal (a pseudo-terminal made by `script`), progress is a bar that ends cleared, and the summary
/// follows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_script, ignore = "needs script (util-linux)")]
async fn on_a_terminal_progress_is_a_bar() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("urls.txt");
    std::fs::write(&file, (0..3000).map(|i| format!("{PUBLIC_URL}/tty/{i}\n")).collect::<String>()).unwrap();
    let command = format!("{BIN} import {}", file.display());
    let db = app.db.url.clone();
    let d = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("script")
            .current_dir(&d)
            .args(["-q", "-e", "-c", &command, "/dev/null"])
            .env("DATABASE_URL", db)
            .env("SITEMAPD_PUBLIC_URL", PUBLIC_URL)
            .env("TERM", "xterm")
            .output()
            .expect("run script")
    })
    .await
    .unwrap();
    let tty = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{tty}");
    // How far the bar got before it was cleared depends on how fast the import ran (3,000 entries take 0.1 s).
    assert!(tty.contains(" sources ") && (tty.contains('█') || tty.contains('░')), "a bar was drawn: {tty:?}");
    assert!(tty.contains("stored: 3000 created"), "{tty:?}");
    assert!(!tty.contains("importing"), "no progress log lines on a terminal: {tty:?}");
}

/// `run` with a relative `DATABASE_URL`, as a user in the database's directory has it.
fn run_here(dir: &Path, args: &[&str]) -> std::process::Output {
    run(dir, "sqlite://sitemapd.db", args)
}

/// No output path of a command may name the database or one of its files, by any path: `import --rejects`
/// (which empties its file at the start), `export --output`, `backup`. Each is refused before anything is opened,
/// and the database keeps every entry.
#[test]
fn no_output_names_the_database_or_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.txt"), format!("{PUBLIC_URL}/a\n{PUBLIC_URL}/b\n")).unwrap();
    std::fs::write(d.join("more.txt"), format!("{PUBLIC_URL}/c\nnot a URL\n")).unwrap();
    let out = run_here(d, &["import", "a.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::create_dir(d.join("sub")).unwrap();
    std::os::unix::fs::symlink(d, d.join("sub/up")).unwrap();
    std::os::unix::fs::symlink(d.join("sitemapd.db-journal"), d.join("dangling")).unwrap();
    std::os::unix::fs::symlink(d.join("sitemapd.db"), d.join("link.db")).unwrap();
    std::fs::hard_link(d.join("sitemapd.db"), d.join("hard.db")).unwrap();
    let paths = [
        "sitemapd.db",
        "./sitemapd.db",
        "sitemapd.db-wal",
        "sitemapd.db-shm",
        "sitemapd.db-journal",
        "sub/../sitemapd.db-wal",
        "sub/up/sitemapd.db-shm",
        "link.db",
        "hard.db",
        "dangling",
    ];
    for path in paths {
        let out = run_here(d, &["import", "more.txt", "--rejects", path]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--rejects {path}: {stderr}");
        assert!(stderr.contains("is the database's file"), "--rejects {path}: {stderr}");
        let out = run_here(d, &["export", "--output", path]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "export --output {path}: {stderr}");
        assert!(stderr.contains("is the database's file"), "export --output {path}: {stderr}");
        let out = run_here(d, &["backup", path]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "backup {path}: {stderr}");
        assert!(stderr.contains("is the database's file"), "backup {path}: {stderr}");
    }
    for gone in ["sitemapd.db-journal", "sitemapd.db-shm", "sitemapd.db-wal"] {
        assert!(!d.join(gone).exists(), "{gone} was created");
    }
    let out = run_here(d, &["export"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2, "every entry is left");
    // Another path is fine.
    let out = run_here(d, &["import", "more.txt", "--rejects", "sub/rejects.ndjson"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A sitemap index read from a file is untrusted input: it may list files in its own directory or below it, never
/// one outside it (by `..`, an absolute path or a symlink), a FIFO or the kernel's files. Those fail the index (exit
/// 1) and are not read; the rest is. A file that is no sitemap (`/etc/passwd` named as a source) never has its
/// lines copied into the rejects file, and a FIFO named as a source is refused, not waited on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_index_lists_only_regular_files_beside_it() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let legacy = dir.path().join("legacy");
    std::fs::create_dir_all(legacy.join("sub")).unwrap();
    std::fs::write(legacy.join("s1.xml"), urlset(&url("s1"))).unwrap();
    std::fs::write(legacy.join("sub/s2.xml"), urlset(&url("s2"))).unwrap();
    std::fs::write(dir.path().join("outside.xml"), urlset(&url("outside"))).unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.xml"), legacy.join("link.xml")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", legacy.join("passwd.txt")).unwrap();
    let fifo = legacy.join("fifo.xml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // A writer that looks for a reader waiting on the FIFO (its non-blocking open succeeds only then), and lets
    // one go (it then reads an empty file): so an import that waits on it fails this test rather than hangs it.
    let waited = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (fifo, waited, done) = (fifo.clone(), waited.clone(), done.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::OpenOptionsExt;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let writer = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
                if writer.is_ok() {
                    waited.store(true, Ordering::Relaxed);
                }
            }
        })
    };
    let hostile = [
        "s1.xml",
        "sub/s2.xml",
        "/etc/passwd",
        "/proc/self/environ",
        "../../../../../../etc/hostname",
        "../outside.xml",
        "link.xml",
        "passwd.txt",
        "fifo.xml",
        "sub/../../outside.xml",
    ];
    std::fs::write(legacy.join("index.xml"), index(&hostile.map(str::to_owned))).unwrap();
    let rejects = dir.path().join("rejects.ndjson");
    let mut opts = options(&app, vec![Source::File(legacy.join("index.xml"))]);
    opts.rejects = Some(rejects.clone());
    let summary = tokio::time::timeout(Duration::from_secs(30), import(&app, opts)).await.expect("no FIFO blocks");
    assert!(!summary.success(), "{summary}");
    let index = &summary.sources[0];
    assert!(index.error.as_deref().unwrap_or_default().contains("its own directory or below it"), "{summary}");
    let mut locs = stored(&*app.store).await;
    locs.sort();
    assert_eq!(
        locs,
        [format!("{PUBLIC_URL}/s1"), format!("{PUBLIC_URL}/s2")],
        "only the files beside the index are read: {summary}"
    );
    assert_eq!(summary.sources.len(), 3, "nothing else was opened: {summary}");

    // Named as sources: a FIFO and the kernel's files are refused at once; a file that is no sitemap is read as a
    // text sitemap whose lines are no URLs, and none of them is copied.
    let mut opts = options(
        &app,
        vec![Source::File(fifo.clone()), Source::File("/proc/self/environ".into()), Source::File("/etc/passwd".into())],
    );
    opts.rejects = Some(rejects.clone());
    let summary = tokio::time::timeout(Duration::from_secs(30), import(&app, opts)).await.expect("no FIFO blocks");
    let error = |name: &str| {
        let source = summary.sources.iter().find(|s| s.source.ends_with(name)).expect(name);
        source.error.clone().unwrap_or_default()
    };
    assert!(error("fifo.xml").contains("a FIFO"), "{summary}");
    assert!(error("/proc/self/environ").contains("lies in /proc"), "{summary}");
    let written = std::fs::read_to_string(&rejects).unwrap();
    assert!(summary.rejected > 0, "{summary}");
    assert!(!written.contains("root:") && !written.contains("/bin/"), "no line of /etc/passwd is copied: {written}");
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(!waited.load(Ordering::Relaxed), "the import waited on the FIFO");
    for line in written.lines() {
        let reject: Value = serde_json::from_str(line).unwrap();
        assert_eq!(reject["loc"], Value::Null, "{line}");
        assert_eq!(reject["reason"], "the line is not an http or https URL (not copied here)", "{line}");
    }
}

/// A sitemap in another encoding than UTF-8, a gzip inside a gzip, an archive: each is one failed source saying what
/// it is (exit 1), not thousands of rejected lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_files_fail_saying_what_they_are() {
    let app = TestApp::spawn(Backend::Sqlite, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let xml = urlset(&(0..100).map(|i| url(&format!("u/{i}"))).collect::<String>()).replace("UTF-8", "UTF-16");
    let mut utf16 = vec![0xff, 0xfe];
    utf16.extend(xml.encode_utf16().flat_map(u16::to_le_bytes));
    std::fs::write(dir.path().join("utf16.xml"), &utf16).unwrap();
    std::fs::write(dir.path().join("twice.xml.gz"), gzip(&gzip(xml.replace("UTF-16", "UTF-8").as_bytes()))).unwrap();
    let sources = ["utf16.xml", "twice.xml.gz"].map(|f| Source::File(dir.path().join(f))).to_vec();
    let summary = import(&app, options(&app, sources)).await;
    assert!(!summary.success(), "{summary}");
    assert_eq!((summary.entries, summary.rejected), (0, 0), "{summary}");
    let text = summary.to_string();
    assert!(text.contains("utf16.xml: it is UTF-16LE (by its byte order mark)"), "{text}");
    assert!(text.contains("twice.xml.gz: it is gzip inside gzip"), "{text}");
}

/// An import that reads a running sitemapd's sitemaps sees what another process (another `sitemapd import`) has
/// just written, whatever `state_ttl_ms` says: it asks for the current state (`Cache-Control: no-cache`), which
/// the server answers after a check of the site's change counter. A crawler's plain request is still answered from
/// the page table as last read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_from_a_running_sitemapd_sees_another_processs_writes() {
    let app = TestApp::spawn(Backend::Sqlite, &[("SITEMAPD_STATE_TTL", "60s")]).await;
    app.put_paths(&["one"]).await;
    assert_eq!(app.get("/sitemap-1.xml", &[]).await.status, StatusCode::OK);
    let cli = app.another_process().await;
    cli.put_paths(&["two"]).await;
    let plain = app.get("/sitemap-1.xml", &[]).await;
    assert!(!plain.text().contains("/two<"), "a plain read is of the table as last read: {}", plain.text());
    let fresh = app.get("/sitemap-1.xml", &[("cache-control", "no-cache")]).await;
    assert!(fresh.text().contains("/two<"), "{}", fresh.text());
    let pragma = app.get("/sitemap.xml", &[("pragma", "no-cache")]).await;
    assert_eq!(pragma.status, StatusCode::OK);

    let more = app.another_process().await;
    more.put_paths(&["three"]).await;
    let router = app.router.clone();
    let server = Peer::start(move |_| router).await;
    let summary = import(&cli, options(&cli, vec![server.url("/sitemap-1.xml")])).await;
    assert!(summary.success(), "{summary}");
    assert_eq!((summary.entries, summary.unchanged), (3, 3), "the import saw the third write at once: {summary}");
}
