//! URL health sees pages as a crawler does: the real checker ([`Checker::drain`]) against a loopback site of its
//! own that serves compressed pages (`gzip`, `deflate` as zlib and raw, `br`, two codings, a gzip bomb, an
//! encoding not asked for, a corrupt stream), pages whose canonical spells their own URL otherwise (RFC 3986
//! §6.2.2), and pages without `Content-Type` (sniffed as browsers do).

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use sitemapd::checker::{Checker, Notify};
use sitemapd::health::Kind;
use sitemapd::store::UrlCheck;
use tokio::io::AsyncReadExt as _;

use crate::both_backends;
use crate::support::{Backend, TestApp};

both_backends!(
    compressed_pages_are_read_decoded,
    a_canonical_spelling_the_page_itself_is_the_page,
    a_page_without_content_type_is_sniffed,
);

/// One page of the site: its headers and its body's chunks, then `endless` again and again (if any).
#[derive(Clone, Default)]
struct Page {
    headers: Vec<(&'static str, String)>,
    chunks: Vec<Bytes>,
    endless: Option<Bytes>,
}

impl Page {
    fn new(headers: &[(&'static str, &str)], body: Vec<u8>) -> Self {
        let headers = headers.iter().map(|(n, v)| (*n, (*v).to_owned())).collect();
        // Pieces of 1,000 bytes: a stream, not one write.
        let body = Bytes::from(body);
        let chunks = (0..body.len()).step_by(1000).map(|at| body.slice(at..body.len().min(at + 1000))).collect();
        Page { headers, chunks, endless: None }
    }
}

#[derive(Default)]
struct Seen {
    accept_encoding: Vec<String>,
    count: HashMap<String, usize>,
}

struct Shared {
    pages: Mutex<HashMap<String, Page>>,
    seen: Mutex<Seen>,
}

/// A site that serves exactly the pages it is given (404 else; robots.txt allows everything).
struct Site {
    base: String,
    shared: Arc<Shared>,
}

impl Site {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared { pages: Mutex::default(), seen: Mutex::default() });
        let served = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(serve).with_state(served);
                axum::serve(listener, app).await.unwrap();
            });
        });
        Site { base, shared }
    }

    fn loc(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn serve(&self, path: &str, page: Page) {
        self.shared.pages.lock().unwrap().insert(path.to_owned(), page);
    }

    fn count(&self, path: &str) -> usize {
        self.shared.seen.lock().unwrap().count.get(path).copied().unwrap_or(0)
    }
}

async fn serve(State(site): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    {
        let mut seen = site.seen.lock().unwrap();
        *seen.count.entry(path.clone()).or_default() += 1;
        let accept = request.headers().get(header::ACCEPT_ENCODING).and_then(|v| v.to_str().ok());
        if path != "/robots.txt" {
            seen.accept_encoding.push(accept.unwrap_or("").to_owned());
        }
    }
    if path == "/robots.txt" {
        return Response::new(Body::from("User-agent: *\nDisallow:\n"));
    }
    let Some(page) = site.pages.lock().unwrap().get(&path).cloned() else {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = axum::http::StatusCode::NOT_FOUND;
        return r;
    };
    let endless = futures_util::stream::iter(page.endless).flat_map(futures_util::stream::repeat);
    let body = futures_util::stream::iter(page.chunks).chain(endless).map(Ok::<_, Infallible>);
    // No header but those given: no Content-Type unless the page has one.
    let mut response = Response::new(Body::from_stream(body));
    for (name, value) in page.headers {
        response.headers_mut().append(HeaderName::from_static(name), HeaderValue::from_str(&value).unwrap());
    }
    response
}

async fn app(backend: Backend, site: &Site) -> TestApp {
    let vars = [
        ("SITEMAPD_PUBLIC_URL", site.base.as_str()),
        ("SITEMAPD_HEALTH_CHECK", "report"),
        ("SITEMAPD_HEALTH_TIMEOUT", "5s"),
        ("SITEMAPD_HEALTH_RATE", "1000"),
        ("SITEMAPD_HEALTH_HEAD_BYTES", "16384"),
    ];
    TestApp::spawn(backend, &vars).await
}

/// Stores `paths`, checks them all, and returns each one's record.
async fn check(app: &TestApp, site: &Site, paths: &[&str]) -> HashMap<String, UrlCheck> {
    let entries: Vec<Value> = paths.iter().map(|p| json!({"loc": site.loc(p)})).collect();
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let notify: Arc<dyn Notify> = Arc::new(app.state.clone().expect("a state"));
    let checker = Checker::new(app.store.clone(), &app.config, notify).expect("the checker builds");
    assert_eq!(checker.drain().await.unwrap(), paths.len());
    let id = app.store.sites().only().unwrap().id;
    let mut out = HashMap::new();
    for p in paths {
        let check = app.store.health_of(id, &site.loc(p)).await.unwrap().unwrap_or_else(|| panic!("{p}"));
        out.insert((*p).to_owned(), check);
    }
    out
}

fn kinds(check: &UrlCheck) -> Vec<Kind> {
    check.problems.iter().collect()
}

fn html(head: &str) -> Vec<u8> {
    format!("<!doctype html><html><head><title>t</title>{head}</head><body>hello</body></html>").into_bytes()
}

const NOINDEX: &str = r#"<meta name="robots" content="noindex">"#;
const HTML: (&str, &str) = ("content-type", "text/html; charset=utf-8");

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn raw_deflate(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// The start of an endless gzip bomb: the gzip header, then a deflate stream's first blocks (a head that never
/// ends, then 1 MiB of spaces); [`bomb_blocks`] go on from there.
fn bomb_start() -> Vec<u8> {
    let (start, _) = bomb();
    start
}

/// Blocks of a deflate stream that decode to 1 MiB of spaces each, after [`bomb_start`] or after themselves (their
/// back references reach only spaces): some 1 KiB each, repeated without end.
fn bomb_blocks() -> Bytes {
    Bytes::from(bomb().1)
}

fn bomb() -> (Vec<u8>, Vec<u8>) {
    let mut deflate = flate2::Compress::new(flate2::Compression::best(), false);
    // Compressed with a sync flush: whole blocks, ending on a byte, that the next ones may follow.
    let mut sync = |input: &[u8]| {
        let mut out = Vec::new();
        let before = deflate.total_in();
        loop {
            out.reserve(64 << 10);
            let at = usize::try_from(deflate.total_in() - before).unwrap();
            deflate.compress_vec(&input[at..], &mut out, flate2::FlushCompress::Sync).unwrap();
            // Done when all the input is in and the flush had room to finish.
            if deflate.total_in() - before == input.len() as u64 && out.len() < out.capacity() {
                return out;
            }
        }
    };
    let spaces = vec![b' '; 1 << 20];
    let mut start = vec![0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF];
    start.extend(sync(b"<!doctype html><html><head><title>bomb</title>"));
    start.extend(sync(&spaces));
    (start, sync(&spaces))
}

async fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    async_compression::tokio::bufread::BrotliEncoder::new(bytes).read_to_end(&mut out).await.unwrap();
    out
}

async fn compressed_pages_are_read_decoded(backend: Backend) {
    let site = Site::start();
    let noindex = html(NOINDEX);
    let bomb = Page { endless: Some(bomb_blocks()), ..Page::new(&[HTML, ("content-encoding", "gzip")], bomb_start()) };
    let mut corrupt = gzip(&noindex);
    corrupt[12] ^= 0xFF;
    let pages = [
        ("/gzip", Page::new(&[HTML, ("content-encoding", "gzip")], gzip(&noindex))),
        ("/x-gzip", Page::new(&[HTML, ("content-encoding", "x-gzip")], gzip(&noindex))),
        ("/deflate-zlib", Page::new(&[HTML, ("content-encoding", "deflate")], zlib(&noindex))),
        ("/deflate-raw", Page::new(&[HTML, ("content-encoding", "deflate")], raw_deflate(&noindex))),
        ("/br", Page::new(&[HTML, ("content-encoding", "br")], brotli(&noindex).await)),
        ("/gzip-then-br", Page::new(&[HTML, ("content-encoding", "gzip, br")], brotli(&gzip(&noindex)).await)),
        ("/gzip-fine", Page::new(&[HTML, ("content-encoding", "gzip")], gzip(&html("")))),
        ("/bomb", bomb),
        ("/unknown", Page::new(&[HTML, ("content-encoding", "zstd")], noindex.clone())),
        ("/corrupt", Page::new(&[HTML, ("content-encoding", "gzip")], corrupt)),
        ("/identity", Page::new(&[HTML, ("content-encoding", "identity")], noindex.clone())),
    ];
    for (path, page) in pages.clone() {
        site.serve(path, page);
    }
    let app = app(backend, &site).await;
    let paths: Vec<&str> = pages.iter().map(|(p, _)| *p).collect();
    let checks = check(&app, &site, &paths).await;
    for p in ["/gzip", "/x-gzip", "/deflate-zlib", "/deflate-raw", "/br", "/gzip-then-br", "/identity"] {
        let c = &checks[p];
        assert_eq!((c.status, kinds(c), c.transient.as_deref()), (Some(200), vec![Kind::Noindex], None), "{p}");
        assert_eq!(c.noindex_by.as_deref(), Some("meta robots"), "{p}");
    }
    for p in ["/gzip-fine", "/bomb", "/unknown"] {
        let c = &checks[p];
        assert_eq!((c.status, kinds(c), c.transient.as_deref()), (Some(200), vec![], None), "{p}");
    }
    let corrupt = &checks["/corrupt"];
    assert_eq!(kinds(corrupt), vec![], "a body that does not decode is no problem");
    assert!(corrupt.transient.as_deref().is_some_and(|t| t.contains("decode")), "{corrupt:?}");
    // The endless bomb was judged, not timed out: read only as far as the head limit (16 KiB decoded).
    assert_eq!(site.count("/bomb"), 1);
    let seen = site.shared.seen.lock().unwrap();
    assert!(seen.accept_encoding.iter().all(|a| a == "gzip, deflate, br"), "{:?}", seen.accept_encoding);
}

async fn a_canonical_spelling_the_page_itself_is_the_page(backend: Backend) {
    let site = Site::start();
    let base = site.base.clone();
    let upper = base.replace("http://", "HTTP://");
    let canonical = |href: String| Page::new(&[HTML], html(&format!(r#"<link rel="canonical" href="{href}">"#)));
    let link = |href: String| Page::new(&[HTML, ("link", &format!("<{href}>; rel=\"canonical\""))], html(""));
    let pages = [
        ("/~tilde", canonical(format!("{base}/%7Etilde"))),
        ("/~lower", canonical(format!("{base}/%7elower"))),
        ("/caf%C3%A9", canonical(format!("{base}/caf%c3%a9"))),
        ("/upper", canonical(format!("{upper}/upper"))),
        ("/dots", canonical(format!("{base}/a/./b/../../dots"))),
        ("/frag", canonical(format!("{base}/frag#top"))),
        ("/query", canonical(format!("{base}/query?"))),
        ("/header", link(format!("{upper}/%68eader?#x"))),
        ("/elsewhere", canonical(format!("{base}/other"))),
        ("/slash", canonical(format!("{base}/slash/"))),
    ];
    for (path, page) in pages.clone() {
        site.serve(path, page);
    }
    let app = app(backend, &site).await;
    let paths: Vec<&str> = pages.iter().map(|(p, _)| *p).collect();
    let checks = check(&app, &site, &paths).await;
    for p in ["/~tilde", "/~lower", "/caf%C3%A9", "/upper", "/dots", "/frag", "/query", "/header"] {
        let c = &checks[p];
        assert_eq!((c.status, kinds(c), c.canonical.as_deref()), (Some(200), vec![], None), "{p}");
    }
    for (p, to) in [("/elsewhere", "/other"), ("/slash", "/slash/")] {
        let c = &checks[p];
        assert_eq!(kinds(c), vec![Kind::Canonical], "{p}");
        assert_eq!(c.canonical.as_deref(), Some(site.loc(to).as_str()), "{p}");
    }
}

async fn a_page_without_content_type_is_sniffed(backend: Backend) {
    let site = Site::start();
    let mut late = vec![b' '; 2000];
    late.extend_from_slice(&html(NOINDEX));
    let pages = [
        ("/html", Page::new(&[], html(NOINDEX))),
        ("/html-lead", Page::new(&[], [b"\r\n  ".as_slice(), &html(NOINDEX)].concat())),
        ("/html-gzip", Page::new(&[("content-encoding", "gzip")], gzip(&html(NOINDEX)))),
        ("/unknown-type", Page::new(&[("content-type", "unknown/unknown")], html(NOINDEX))),
        ("/fine", Page::new(&[], html(""))),
        // Not HTML to a browser: a meta first (no HTML pattern), a BOM, past the resource header, plain text.
        ("/meta-first", Page::new(&[], format!("{NOINDEX}<p>x").into_bytes())),
        ("/bom", Page::new(&[], [b"\xEF\xBB\xBF".as_slice(), &html(NOINDEX)].concat())),
        ("/late", Page::new(&[], late)),
        ("/text", Page::new(&[("content-type", "text/plain")], html(NOINDEX))),
    ];
    for (path, page) in pages.clone() {
        site.serve(path, page);
    }
    let app = app(backend, &site).await;
    let paths: Vec<&str> = pages.iter().map(|(p, _)| *p).collect();
    let checks = check(&app, &site, &paths).await;
    for p in ["/html", "/html-lead", "/html-gzip", "/unknown-type"] {
        let c = &checks[p];
        assert_eq!((c.status, kinds(c)), (Some(200), vec![Kind::Noindex]), "{p}");
    }
    for p in ["/fine", "/meta-first", "/bom", "/late", "/text"] {
        let c = &checks[p];
        assert_eq!((c.status, kinds(c), c.transient.as_deref()), (Some(200), vec![], None), "{p}");
    }
}
