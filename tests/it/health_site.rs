//! A test site for URL health on the loopback interface: every case the checker must tell apart, served by axum
//! on a runtime of its own (so a test may block), counting what the checker does: requests per path, the most in
//! flight at once, when each request started (by the site's clock), the `User-Agent`s, the 304s, and the bytes of
//! the huge page actually sent.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;

/// Every path the site serves, with what the checker must find there.
pub(crate) mod path {
    pub(crate) const OK: &str = "/ok";
    pub(crate) const MOVED_301: &str = "/moved-301";
    pub(crate) const MOVED_302: &str = "/moved-302";
    /// 308 to the start of a chain of redirects (recorded: the first hop only).
    pub(crate) const MOVED_308: &str = "/moved-308";
    pub(crate) const CHAIN: &str = "/chain-1";
    pub(crate) const MISSING: &str = "/missing";
    pub(crate) const GONE: &str = "/gone";
    /// 500 to the first request, 200 after.
    pub(crate) const FLAKY: &str = "/flaky";
    /// 429 with `Retry-After: 2`, always.
    pub(crate) const BUSY: &str = "/busy";
    pub(crate) const NOINDEX_HEADER: &str = "/noindex-header";
    pub(crate) const NOINDEX_GOOGLEBOT: &str = "/noindex-googlebot";
    pub(crate) const NOINDEX_META: &str = "/noindex-meta";
    pub(crate) const CANONICAL_SELF: &str = "/canonical-self";
    pub(crate) const CANONICAL_LINK: &str = "/canonical-link";
    pub(crate) const CANONICAL_HEADER: &str = "/canonical-header";
    /// robots.txt disallows `/private/` for Googlebot.
    pub(crate) const PRIVATE: &str = "/private/page";
    /// Answers after 3 s (past a 1 s timeout).
    pub(crate) const SLOW: &str = "/slow";
    /// 32 MiB of HTML whose head never ends.
    pub(crate) const HUGE: &str = "/huge";
    /// 301 to another host.
    pub(crate) const OFFSITE: &str = "/offsite";
    /// 404 until [`super::TestSite::fix`], then 200.
    pub(crate) const FIXABLE: &str = "/fixable";
    /// 200 after 150 ms: for counting requests in flight.
    pub(crate) const SLOWISH: &str = "/slowish-";
    /// A healthy page (any path under it), but in a [`super::Storm`].
    pub(crate) const PAGE: &str = "/p/";
}

/// A failure of the whole site, as [`TestSite::storm`] sets it: every page (robots.txt as usual, but for
/// `RobotsAll`) answers so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Storm {
    None,
    /// A firewall: 403.
    Forbidden,
    /// A login wall: 302 to `/login?next=<path>`.
    Login,
    /// A maintenance page: 200 with `<meta name="robots" content="noindex">`.
    Noindex,
    /// robots.txt disallows everything.
    RobotsAll,
}

pub(crate) const ETAG: &str = "\"ok-v1\"";
pub(crate) const HUGE_BYTES: u64 = 32 << 20;
const CHUNK: usize = 64 << 10;

#[derive(Default)]
struct Counts {
    per_path: HashMap<String, usize>,
    not_modified: usize,
    user_agents: Vec<String>,
    /// When each request (but robots.txt's) arrived, by the site's clock, in order.
    starts: Vec<Instant>,
    in_flight: HashMap<String, usize>,
    in_flight_all: usize,
    most_in_flight: usize,
    /// A path was requested while a request for it was in flight.
    overlapped_path: Option<String>,
}

struct Shared {
    base: String,
    counts: Mutex<Counts>,
    huge_sent: AtomicU64,
    fixed: AtomicBool,
    storm: Mutex<Storm>,
}

/// The running site.
pub(crate) struct TestSite {
    /// `http://127.0.0.1:PORT` (no trailing slash): the public URL of the site under test.
    pub base: String,
    shared: Arc<Shared>,
}

impl TestSite {
    pub(crate) fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            base: base.clone(),
            counts: Mutex::default(),
            huge_sent: AtomicU64::new(0),
            fixed: AtomicBool::new(false),
            storm: Mutex::new(Storm::None),
        });
        let served = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(serve).with_state(served);
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self { base, shared }
    }

    /// The loc of `path` on this site.
    pub(crate) fn loc(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Requests for `path` so far.
    pub(crate) fn count(&self, path: &str) -> usize {
        self.shared.counts.lock().unwrap().per_path.get(path).copied().unwrap_or(0)
    }

    pub(crate) fn not_modified(&self) -> usize {
        self.shared.counts.lock().unwrap().not_modified
    }

    pub(crate) fn user_agents(&self) -> Vec<String> {
        self.shared.counts.lock().unwrap().user_agents.clone()
    }

    /// The most requests in flight at once (any path).
    pub(crate) fn most_in_flight(&self) -> usize {
        self.shared.counts.lock().unwrap().most_in_flight
    }

    /// A path requested while a request for it was in flight, if any was.
    pub(crate) fn overlapped_path(&self) -> Option<String> {
        self.shared.counts.lock().unwrap().overlapped_path.clone()
    }

    /// The gaps between consecutive requests' arrivals (robots.txt's excluded), by the site's clock.
    pub(crate) fn gaps(&self) -> Vec<Duration> {
        let counts = self.shared.counts.lock().unwrap();
        counts.starts.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// The bytes of [`path::HUGE`] sent (handed to the connection) so far.
    pub(crate) fn huge_sent(&self) -> u64 {
        self.shared.huge_sent.load(Ordering::Relaxed)
    }

    /// From now on, every page fails as `storm` says ([`Storm::None`]: as usual again).
    pub(crate) fn storm(&self, storm: Storm) {
        *self.shared.storm.lock().unwrap() = storm;
    }

    /// [`path::FIXABLE`] answers 200 from now on.
    pub(crate) fn fix(&self) {
        self.shared.fixed.store(true, Ordering::Relaxed);
    }
}

/// Decrements the in-flight counts when a request's handler ends (answered or dropped).
struct InFlight(Arc<Shared>, String);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self.0.counts.lock().unwrap();
        counts.in_flight_all -= 1;
        *counts.in_flight.get_mut(&self.1).unwrap() -= 1;
    }
}

fn html(head: &str) -> String {
    format!("<!doctype html><html><head><title>t</title>{head}</head><body>hello</body></html>")
}

fn page(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn redirect(status: StatusCode, to: &str) -> Response {
    (status, [(header::LOCATION, to.to_owned())]).into_response()
}

async fn serve(State(site): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let headers: HeaderMap = request.headers().clone();
    let _in_flight = {
        let mut counts = site.counts.lock().unwrap();
        *counts.per_path.entry(path.clone()).or_default() += 1;
        let ua = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        counts.user_agents.push(ua);
        if path != "/robots.txt" {
            counts.starts.push(Instant::now());
        }
        let this = counts.in_flight.entry(path.clone()).or_default();
        *this += 1;
        if *this > 1 {
            counts.overlapped_path = Some(path.clone());
        }
        counts.in_flight_all += 1;
        counts.most_in_flight = counts.most_in_flight.max(counts.in_flight_all);
        InFlight(site.clone(), path.clone())
    };
    let base = site.base.as_str();
    let storm = *site.storm.lock().unwrap();
    match (storm, path.as_str()) {
        (Storm::RobotsAll, "/robots.txt") => return "User-agent: *\nDisallow: /\n".into_response(),
        (Storm::None | Storm::RobotsAll, _) | (_, "/robots.txt") => {}
        (Storm::Forbidden, _) => return StatusCode::FORBIDDEN.into_response(),
        (Storm::Login, "/login") => return page(html("")),
        (Storm::Login, p) => return redirect(StatusCode::FOUND, &format!("/login?next={p}")),
        (Storm::Noindex, _) => return page(html(r#"<meta name="robots" content="noindex">"#)),
    }
    match path.as_str() {
        "/robots.txt" => "User-agent: Googlebot\nDisallow: /private/\n\nUser-agent: *\nDisallow:\n".into_response(),
        path::OK => {
            if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(ETAG) {
                site.counts.lock().unwrap().not_modified += 1;
                return (StatusCode::NOT_MODIFIED, [(header::ETAG, ETAG)]).into_response();
            }
            ([(header::ETAG, ETAG), (header::CONTENT_TYPE, "text/html")], html("")).into_response()
        }
        path::MOVED_301 => redirect(StatusCode::MOVED_PERMANENTLY, path::OK),
        path::MOVED_302 => redirect(StatusCode::FOUND, &format!("{base}{}", path::OK)),
        path::MOVED_308 => redirect(StatusCode::PERMANENT_REDIRECT, path::CHAIN),
        path::CHAIN => redirect(StatusCode::MOVED_PERMANENTLY, "/chain-2"),
        "/chain-2" => redirect(StatusCode::MOVED_PERMANENTLY, path::OK),
        path::MISSING => StatusCode::NOT_FOUND.into_response(),
        path::GONE => StatusCode::GONE.into_response(),
        path::FLAKY => {
            if site.counts.lock().unwrap().per_path[path::FLAKY] == 1 {
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            } else {
                page(html(""))
            }
        }
        path::BUSY => (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "2")]).into_response(),
        path::NOINDEX_HEADER => ([("x-robots-tag", "noindex")], page(html(""))).into_response(),
        path::NOINDEX_GOOGLEBOT => ([("x-robots-tag", "googlebot: noindex")], page(html(""))).into_response(),
        path::NOINDEX_META => page(html(r#"<meta name="robots" content="noindex">"#)),
        path::CANONICAL_SELF => page(html(&format!(r#"<link rel="canonical" href="{base}{}">"#, path::CANONICAL_SELF))),
        path::CANONICAL_LINK => page(html(&format!(r#"<link rel="canonical" href="{base}{}">"#, path::OK))),
        path::CANONICAL_HEADER => {
            let link = format!(r#"<{base}{}>; rel="canonical""#, path::OK);
            ([(header::LINK, link)], page(html(""))).into_response()
        }
        path::PRIVATE => page(html("")),
        path::SLOW => {
            // Not a gate: a page that answers slowly is what the checker's timeout is tested against.
            tokio::time::sleep(Duration::from_secs(3)).await;
            page(html(""))
        }
        path::HUGE => {
            let shared = site.clone();
            let start = Bytes::from_static(b"<!doctype html><html><head><title>huge</title>");
            let filler = Bytes::from(vec![b' '; CHUNK]);
            let chunks = (HUGE_BYTES as usize - start.len()) / CHUNK;
            let body = futures_util::stream::iter(std::iter::once(start).chain(std::iter::repeat_n(filler, chunks)))
                .map(move |chunk| {
                    shared.huge_sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    Ok::<_, Infallible>(chunk)
                });
            ([(header::CONTENT_TYPE, "text/html")], Body::from_stream(body)).into_response()
        }
        path::OFFSITE => redirect(StatusCode::MOVED_PERMANENTLY, "http://elsewhere.invalid/page"),
        path::FIXABLE => {
            if site.fixed.load(Ordering::Relaxed) {
                page(html(""))
            } else {
                StatusCode::NOT_FOUND.into_response()
            }
        }
        p if p.starts_with(path::PAGE) => page(html("")),
        p if p.starts_with(path::SLOWISH) => {
            // Not a gate: a page that takes a while, so that a check can be caught in flight.
            tokio::time::sleep(Duration::from_millis(150)).await;
            page(html(""))
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
