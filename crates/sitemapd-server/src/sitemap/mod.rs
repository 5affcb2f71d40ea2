//! The public sitemap routes: `/sitemap.xml` (the index) and `/sitemap-N.xml[.gz]` (the pages) and
//! `/sitemap-N.txt[.gz]` (the pages as text sitemaps), with gzip, strong ETags and Last-Modified derived from stored
//! page state, and conditional GET/HEAD.

pub mod cache;
pub use sitemapd_core::conditional;
pub mod directory;
pub mod files;
pub mod news;
pub mod prerender;
pub mod removed;
pub mod renders;
pub mod stream;
pub mod text;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use sha2::{Digest, Sha256};

pub use self::cache::{Kind, PageCache, Rendered};
pub use self::directory::{Directories, Directory};
use self::files::{Format, SitemapFile};
use self::news::NewsState;
pub use self::renders::RenderSlots;
use crate::config::Config;
use crate::crawlers::Recorder;
use crate::domain::{Site, Sites};
use crate::error::ApiError;
use crate::net::host::{Hosts, RequestSite};
use crate::page::render::{INDEX_VERSION, RENDER_VERSION, URLSET_TAIL, urlset_head};
use crate::page::{Gzip, PageState};
use crate::store::{FeedReads, RemovedList, StoreReads};

/// Names a gzip implementation, which (with the level) fixes the compressed bytes: part of every gzip ETag. A
/// page's is the one it is stored with ([`Gzip`]); the index and the news sitemap, small and made once per
/// change, are always [`Gzip::Stream`]. When an implementation's bytes change (a backend's new version), it is a
/// new [`Gzip`] with a new name.
fn gzip_encoder(gzip: Gzip) -> &'static str {
    match gzip {
        Gzip::Stream => "async-compression-write/flate2-zlib-rs",
        Gzip::Blocks => "flate2-zlib-rs/blocks-1048576-dict-32768",
    }
}

const CONTENT_TYPE_XML: &str = "application/xml; charset=utf-8";
const CONTENT_TYPE_TEXT: &str = "text/plain; charset=utf-8";
const CONTENT_TYPE_GZIP: &str = "application/gzip";
/// Caches may store a sitemap but must revalidate it (cheaply, with the validators) before each use.
const CACHE_CONTROL: &str = "no-cache";

/// What serving sitemaps needs of the service's state, which implements it: the settings, the store's reads, the
/// sites (and, by [`Hosts`], which one a request is for), each site's page table as last read, the page cache, and
/// the slots that bound the page bodies streaming from the database at once.
pub trait Serving: AsRef<Hosts> + Clone + Send + Sync + 'static {
    fn config(&self) -> &Config;
    fn reads(&self) -> &dyn StoreReads;
    /// The removed-URLs sitemap's tombstones.
    fn removed_list(&self) -> &dyn RemovedList;
    /// The feeds' reads (newest records and tombstones).
    fn feed_reads(&self) -> &dyn FeedReads;
    fn sites(&self) -> &Sites;
    /// `site`'s page table as last read (`site` is one of [`Serving::sites`]).
    fn directories(&self, site: i64) -> &Directories;
    fn page_cache(&self) -> &PageCache;
    /// A slot for streaming one page body, or 503 when none frees up in time.
    fn page_stream_slot(&self) -> impl Future<Output = Result<tokio::sync::OwnedSemaphorePermit, ApiError>> + Send;
    /// The pages rendered at once ([`RenderSlots`]): a render takes one before its page-stream slot.
    fn render_slots(&self) -> &RenderSlots;
    /// Where crawlers' fetches are recorded (`None`: `crawlers.telemetry` is off).
    fn crawls(&self) -> Option<&Recorder>;
}

/// The sitemaps (each answer with `robots_tag` as `X-Robots-Tag`) and the optional `/robots.txt`.
pub fn router<S: Serving>(state: S) -> Router<S> {
    router_with(state, Router::new(), None)
}

/// Answers a file at the site's root whose name is no sitemap's, for a feature above this module that serves files
/// beside the sitemaps (the feeds, `src/feed/`): given the state, the site, the raw file name (without the
/// leading `/`), the method and the request's headers. It answers 404 for a name that is not its own either.
pub type OtherFiles<S> = fn(S, Site, String, Method, HeaderMap) -> BoxFuture<'static, Result<Response, ApiError>>;

/// [`router`] with `more` routes and the answer to `other` files beside the sitemaps, all under the sitemaps'
/// answer layer (the crawl record and `X-Robots-Tag`): the files a feature above this module serves as the
/// sitemaps are served. A name under `/{file}` that is no sitemap's goes to `other` (without it: 404).
pub fn router_with<S: Serving>(state: S, more: Router<S>, other: Option<OtherFiles<S>>) -> Router<S> {
    Router::new()
        .route("/sitemap.xml", get(get_index::<S>))
        .route("/sitemap-news.xml", get(get_news::<S>))
        .route("/sitemap-news.xml.gz", get(get_news_file::<S>))
        .route(
            "/{file}",
            get(move |state: State<S>, site: RequestSite, uri: OriginalUri, method: Method, request: HeaderMap| {
                get_page::<S>(state, site, uri, method, request, other)
            }),
        )
        .merge(more)
        // One layer for both (a router's layers cost each request a clone of every layer inside them: lib.rs).
        .route_layer(middleware::from_fn_with_state(state, sitemap_answer::<S>))
        .route("/robots.txt", get(get_robots::<S>))
}

/// What every answer of a sitemap route passes through: the crawl record ([`record_crawl`]) and the
/// `X-Robots-Tag` ([`robots_tag`]).
async fn sitemap_answer<S: Serving>(State(state): State<S>, request: Request, next: Next) -> Response {
    record_crawl(&state, request, |request| async { robots_tag(&state, next.run(request).await) }).await
}

/// `X-Robots-Tag: <robots_tag>` on every answer of a sitemap route (304s and errors too), unless it is empty:
/// search engines read sitemaps but should not list them as results.
fn robots_tag<S: Serving>(state: &S, mut response: Response) -> Response {
    if !state.config().sitemaps.robots_tag.is_empty()
        && let Ok(value) = HeaderValue::from_str(&state.config().sitemaps.robots_tag)
    {
        response.headers_mut().insert(HeaderName::from_static("x-robots-tag"), value);
    }
    response
}

/// The page and version (its `modified_us`) a page's answer (200 or 304) carries: what a crawler's fetch read.
#[derive(Clone, Copy, Debug)]
struct ServedPage {
    id: i64,
    version_us: i64,
}

/// Hands every answered fetch (200, 304) of a client whose `User-Agent` names a crawler to the recorder: the
/// site, the file (without `.gz`), the page and version it carried, the answer, the client's address (from a
/// trusted proxy's forwarding header only, [`crate::net::host::client_addr`]). Other clients cost one header scan.
async fn record_crawl<S: Serving, F>(state: &S, request: Request, next: impl FnOnce(Request) -> F) -> Response
where
    F: std::future::Future<Output = Response>,
{
    let Some(recorder) = state.crawls() else { return next(request).await };
    let agent = request.headers().get(header::USER_AGENT).map(HeaderValue::as_bytes);
    let Some(crawler) = agent.and_then(crate::crawler::Crawler::classify) else { return next(request).await };
    let (mut parts, body) = request.into_parts();
    let site = <RequestSite as axum::extract::FromRequestParts<S>>::from_request_parts(&mut parts, state).await;
    let hosts: &Hosts = state.as_ref();
    let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    let addr = crate::net::host::client_addr(peer, &parts.headers, &hosts.trusted_proxies, hosts.forwarded_header);
    let conditional =
        parts.headers.contains_key(header::IF_NONE_MATCH) || parts.headers.contains_key(header::IF_MODIFIED_SINCE);
    let file = parts.uri.path().strip_prefix('/').unwrap_or_default();
    let resource: Box<str> = file.strip_suffix(".gz").unwrap_or(file).into();
    let response = next(Request::from_parts(parts, body)).await;
    let status = response.status();
    if let Ok(RequestSite(site)) = site
        && (status == StatusCode::OK || status == StatusCode::NOT_MODIFIED)
    {
        let etag = response.headers().get(header::ETAG).and_then(|v| v.to_str().ok()).unwrap_or_default();
        recorder.record(crate::crawlers::Fetch {
            at_us: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64),
            site: site.id,
            crawler,
            addr,
            resource,
            page: response.extensions().get::<ServedPage>().map(|p| (p.id, p.version_us)),
            status: status.as_u16(),
            conditional,
            etag: etag.into(),
        });
    }
    response
}

/// `answer` marked as carrying `page` as it is (see [`ServedPage`]).
fn served(mut answer: Response, page: &PageState) -> Response {
    answer.extensions_mut().insert(ServedPage { id: page.id, version_us: page.modified_us });
    answer
}

/// `GET|HEAD /robots.txt` when `robots_txt` is on: the configured body, then the `Sitemap:` line of the site the
/// request is for, and with `feeds.enabled` a second one naming the site's feed. 404 when it is off, as for any
/// path sitemapd does not serve.
async fn get_robots<S: Serving>(State(state): State<S>, RequestSite(site): RequestSite) -> Result<Response, ApiError> {
    if !state.config().sitemaps.robots_txt {
        return Err(ApiError::not_found("no such resource"));
    }
    let mut body = state.config().sitemaps.robots_txt_body.trim_end().to_owned();
    if !body.is_empty() {
        body.push_str("\n\n");
    }
    body.push_str(&format!("Sitemap: {}\n", site.public_url.index_url()));
    // Search engines take a feed where they take a sitemap (Google reads RSS and Atom "sitemaps").
    if state.config().feeds.enabled {
        body.push_str(&format!("Sitemap: {}{}\n", site.public_url.as_str(), files::SITE_FEED_FILE));
    }
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_TEXT)),
        (header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL)),
    ];
    Ok((headers, body).into_response())
}

/// How a response is encoded: negotiated on `.xml` and `.txt`, always gzip as a file on `.xml.gz` and `.txt.gz`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Identity,
    Gzip,
    GzipFile,
}

impl Encoding {
    /// `None` when the client accepts neither gzip nor identity: 406.
    fn negotiate(headers: &HeaderMap) -> Option<Self> {
        match conditional::negotiate(headers) {
            conditional::Coding::Gzip => Some(Self::Gzip),
            conditional::Coding::Identity => Some(Self::Identity),
            conditional::Coding::NotAcceptable => None,
        }
    }

    fn gzip(self) -> bool {
        self != Self::Identity
    }

    /// A `.gz` file's (always gzip, as a file), or else negotiated: `None` when the client accepts neither coding.
    fn of_file(gz_file: bool, headers: &HeaderMap) -> Option<Self> {
        if gz_file { Some(Self::GzipFile) } else { Self::negotiate(headers) }
    }
}

/// A strong ETag: a digest of the stored state the bytes are a function of, per representation. Computed on every
/// conditional request, so the parts are written into the digest as they are formatted, with no allocation but
/// the answer's.
fn etag(parts: &[&dyn std::fmt::Display], encoding: Encoding, gzip: Gzip, gzip_level: u32) -> String {
    use std::fmt::Write as _;
    /// Formats into the digest.
    struct Digesting(Sha256);
    impl std::fmt::Write for Digesting {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.update(s.as_bytes());
            Ok(())
        }
    }
    let mut h = Digesting(Sha256::new());
    let _ = write!(h, "render={RENDER_VERSION}");
    for part in parts {
        let _ = write!(h, "\0{part}");
    }
    if encoding.gzip() {
        let _ = write!(h, "\0{}\0{gzip_level}", gzip_encoder(gzip));
    }
    let digest = h.0.finalize();
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut tag = String::with_capacity(37);
    tag.push('"');
    for b in &digest[..16] {
        tag.push(HEX[usize::from(b >> 4)] as char);
        tag.push(HEX[usize::from(b & 15)] as char);
    }
    tag.push_str(if encoding.gzip() { "-gz\"" } else { "\"" });
    tag
}

/// The ETag of `page`'s XML (`/sitemap-N.xml`), gzip or identity.
pub fn page_etag(page: &PageState, gzip: bool, gzip_level: u32) -> String {
    page_etag_as(Kind::Xml, page, gzip, gzip_level)
}

/// The ETag of `page` in form `kind`. The XML's digest is what it always was; the text's has one more part, so the
/// two forms of a page never share an ETag.
pub fn page_etag_as(kind: Kind, page: &PageState, gzip: bool, gzip_level: u32) -> String {
    let encoding = if gzip { Encoding::Gzip } else { Encoding::Identity };
    let parts: [&dyn std::fmt::Display; 6] =
        [&"page", &page.id, &page.version, &page.modified_us, &page.url_count, &page.byte_size];
    match kind {
        Kind::Xml => etag(&parts, encoding, page.gzip, gzip_level),
        Kind::Text => {
            let [a, b, c, d, e, f] = parts;
            etag(&[a, b, c, d, e, f, &"text"], encoding, page.gzip, gzip_level)
        }
    }
}

/// 406: the request excludes identity and every coding the page has (see [`conditional::negotiate`]).
fn not_acceptable() -> Response {
    let message = "Accept-Encoding excludes both identity and gzip, the only codings of this resource";
    let mut answer = ApiError::new(StatusCode::NOT_ACCEPTABLE, "not_acceptable", message).into_response();
    answer.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    answer
}

fn system_time(us: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(us.max(0) as u64)
}

/// One representation's validators and size, and the answers derived from them.
struct Representation {
    encoding: Encoding,
    /// The body's media type before any coding: a sitemap's XML, or a text sitemap.
    kind: Kind,
    etag: String,
    modified_us: i64,
    /// The body's length, when known before sending it.
    length: Option<u64>,
}

impl Representation {
    /// The validators of `page` in form `kind`; its length is set once the page is rendered.
    fn page(kind: Kind, page: &PageState, encoding: Encoding, gzip_level: u32) -> Self {
        Self {
            etag: page_etag_as(kind, page, encoding.gzip(), gzip_level),
            ..Self::page_without_etag(kind, page, encoding)
        }
    }

    /// [`Self::page`] with an empty ETag, for one the caller has.
    fn page_without_etag(kind: Kind, page: &PageState, encoding: Encoding) -> Self {
        Self { encoding, kind, etag: String::new(), modified_us: page.modified_us, length: None }
    }

    /// Headers shared by 200 and 304 answers.
    fn validators(&self) -> HeaderMap {
        let mut h = HeaderMap::with_capacity(8);
        self.add_validators(&mut h);
        h
    }

    /// Adds the headers shared by 200 and 304 answers to `h`.
    fn add_validators(&self, h: &mut HeaderMap) {
        h.insert(header::ETAG, HeaderValue::from_str(&self.etag).expect("hex"));
        let last_modified = httpdate::fmt_http_date(system_time(self.modified_us));
        h.insert(header::LAST_MODIFIED, HeaderValue::from_str(&last_modified).expect("http-date"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
        if self.encoding != Encoding::GzipFile {
            h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }
    }

    /// 304 or 412 when the request's preconditions say so (RFC 9110 §13.2.2), else `None`: send the body.
    fn check_preconditions(&self, request: &HeaderMap) -> Option<Response> {
        let status = match conditional::evaluate(request, &self.etag, system_time(self.modified_us)) {
            conditional::Outcome::Proceed => return None,
            conditional::Outcome::NotModified => StatusCode::NOT_MODIFIED,
            conditional::Outcome::Failed => StatusCode::PRECONDITION_FAILED,
        };
        // The headers go straight into the answer's own map (no map made and copied: a 304 is all headers).
        let mut answer = Response::new(Body::empty());
        *answer.status_mut() = status;
        self.add_validators(answer.headers_mut());
        Some(answer)
    }

    /// The 200 headers: validators plus type, encoding, and the length when it is known before streaming.
    fn headers(&self) -> HeaderMap {
        let mut h = self.validators();
        let content_type = match (self.encoding, self.kind) {
            (Encoding::GzipFile, _) => CONTENT_TYPE_GZIP,
            (_, Kind::Xml) => CONTENT_TYPE_XML,
            (_, Kind::Text) => CONTENT_TYPE_TEXT,
        };
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if self.encoding == Encoding::Gzip {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        if let Some(length) = self.length {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        h
    }

    /// The 200 answer: GET sends `body`, HEAD the same headers and no body. The one place a body is chosen.
    fn answer(mut self, method: &Method, body: Source) -> Response {
        self.length = Some(body.len());
        if *method == Method::HEAD {
            return (self.headers(), Body::empty()).into_response();
        }
        // `Bytes` as the body (not a `Body` made of them): axum then writes `Content-Type` first, as it always has.
        match body {
            Source::Bytes(bytes) => (self.headers(), bytes).into_response(),
            Source::Inflated { gzip, .. } => (self.headers(), Body::from_stream(stream::gunzip(gzip))).into_response(),
        }
    }
}

/// Where an answer's body comes from.
enum Source {
    /// Sent as it is: the index, or a page's gzip.
    Bytes(Bytes),
    /// A page's gzip inflated as it is sent (identity), `len` bytes once inflated.
    Inflated { gzip: Bytes, len: u64 },
}

impl Source {
    fn len(&self) -> u64 {
        match self {
            Source::Bytes(bytes) => bytes.len() as u64,
            Source::Inflated { len, .. } => *len,
        }
    }
}

/// `GET|HEAD /sitemap.xml`: one `<sitemap>` per non-empty page, from the directory (no query while it is fresh).
async fn get_index<S: Serving>(
    State(state): State<S>,
    RequestSite(site): RequestSite,
    method: Method,
    request: HeaderMap,
) -> Result<Response, ApiError> {
    let directory = directory_for(&state, site.id, &request).await?;
    if directory.is_empty() {
        return Err(ApiError::not_found("no URLs are stored yet"));
    }
    let Some(encoding) = Encoding::negotiate(&request) else { return Ok(not_acceptable()) };
    let news_state = news_sitemap(&state, &directory).await?;
    let removed_state = removed::removed_sitemap(&state, &directory).await?;
    let listed = (&*news_state, removed_state.as_deref());
    // The news dates count whether or not the news sitemap is listed, so the index's date never goes back when its
    // last article leaves. Where there never was news they are 0: the index is what it was before news existed.
    // The same of the removed-URLs sitemap's dates (none while it is off).
    let modified_us =
        directory.modified_us().max(news_state.modified_us).max(removed_state.as_ref().map_or(0, |r| r.modified_us));
    // The ETag is a digest of the whole index state (O(pages)): made once per page table and news state.
    let etag = directory.index_etag(listed, encoding.gzip(), || {
        let mut index_state = match &news_state.sitemap {
            None => directory.index_state().to_owned(),
            Some(n) => format!("{}news:{}:{};", directory.index_state(), n.digest, n.modified_us),
        };
        if let Some(r) = removed_state.as_ref().and_then(|r| r.sitemap.as_ref()) {
            index_state.push_str(&format!("removed:{}:{};", r.digest, r.modified_us));
        }
        etag(
            &[&"index", &INDEX_VERSION, &site.public_url, &modified_us, &index_state],
            encoding,
            Gzip::Stream,
            state.config().sitemaps.gzip_level,
        )
    });
    // Validators first: a 304 or 412 touches no body.
    let rep = Representation { encoding, kind: Kind::Xml, etag, modified_us, length: None };
    if let Some(answer) = rep.check_preconditions(&request) {
        return Ok(answer);
    }
    let body = if encoding.gzip() {
        directory.index_gzip(&site.public_url, listed, state.config().sitemaps.gzip_level).await.map_err(|e| {
            tracing::error!(error = %e, "cannot compress the index");
            ApiError::internal()
        })?
    } else {
        directory.index(&site.public_url, listed).await
    };
    let body = body.ok_or_else(|| ApiError::not_found("no URLs are stored yet"))?;
    Ok(rep.answer(&method, Source::Bytes(body)))
}

/// The site's page table as the request may be answered from: at most `cache.state_ttl` old, or checked now when the
/// client asks for the current state (`Cache-Control: no-cache` or `max-age=0`, `Pragma: no-cache`), as
/// `sitemapd import` does: then a write by another process (an import, a replica) is seen at once, at the cost of
/// one primary-key read.
pub async fn directory_for(state: &impl Serving, site: i64, request: &HeaderMap) -> Result<Arc<Directory>, ApiError> {
    let directories = state.directories(site);
    Ok(if asks_current(request) {
        directories.get_current(state.reads()).await?
    } else {
        directories.get(state.reads()).await?
    })
}

/// Whether a request asks for a response validated at the origin (RFC 9111, 5.2.1.4 and 5.4).
fn asks_current(request: &HeaderMap) -> bool {
    let directive = |name: header::HeaderName, wanted: &[&str]| {
        request.get_all(name).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|d| {
            let d = d.trim();
            wanted.iter().any(|w| d.eq_ignore_ascii_case(w))
        })
    };
    directive(header::CACHE_CONTROL, &["no-cache", "max-age=0"]) || directive(header::PRAGMA, &["no-cache"])
}

/// A named section's own index (`/sitemap-<section>.xml[.gz]`): the section's pages alone, with validators as the
/// site's index has them (a digest of its state; its newest page change); 404 for a section that is not stored
/// or has no URL.
async fn section_index_answer(
    state: &impl Serving,
    site: &crate::domain::Site,
    name: &str,
    encoding: Encoding,
    method: &Method,
    request: &HeaderMap,
) -> Result<Response, ApiError> {
    let directory = directory_for(state, site.id, request).await?;
    let not_found = || ApiError::not_found("no such section, or it has no URL");
    let section = directory.sections().id(name).ok_or_else(not_found)?;
    let docs = directory.section_index(&site.public_url, section).ok_or_else(not_found)?;
    let level = state.config().sitemaps.gzip_level;
    let etag = docs.etags[usize::from(encoding.gzip())]
        .get_or_init(|| {
            let parts: [&dyn std::fmt::Display; 6] =
                [&"section-index", &INDEX_VERSION, &site.public_url, &name, &docs.modified_us, &docs.state];
            etag(&parts, encoding, Gzip::Stream, level)
        })
        .clone();
    let rep = Representation { encoding, kind: Kind::Xml, etag, modified_us: docs.modified_us, length: None };
    if let Some(answer) = rep.check_preconditions(request) {
        return Ok(answer);
    }
    let body = if encoding.gzip() {
        let gzip = docs.gzip.get_or_try_init(|| stream::gzip_bytes(docs.identity.clone(), level)).await;
        gzip.map_err(|e| {
            tracing::error!(error = %e, "cannot compress a section's index");
            ApiError::internal()
        })?
        .clone()
    } else {
        docs.identity.clone()
    };
    Ok(rep.answer(method, Source::Bytes(body)))
}

/// The news sitemap of this read of the page table.
async fn news_sitemap(state: &impl Serving, directory: &Directory) -> Result<Arc<NewsState>, ApiError> {
    Ok(directory
        .news(
            state.reads(),
            crate::config::hours_of(state.config().sitemaps.news_window),
            state.config().sitemaps.gzip_level,
        )
        .await?)
}

/// `GET|HEAD /sitemap-news.xml`: the news sitemap, gzip when acceptable.
async fn get_news<S: Serving>(
    State(state): State<S>,
    RequestSite(site): RequestSite,
    method: Method,
    request: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(encoding) = Encoding::negotiate(&request) else { return Ok(not_acceptable()) };
    news_answer(&state, site.id, encoding, &method, &request).await
}

/// `GET|HEAD /sitemap-news.xml.gz`: the news sitemap as a gzip file.
async fn get_news_file<S: Serving>(
    State(state): State<S>,
    RequestSite(site): RequestSite,
    method: Method,
    request: HeaderMap,
) -> Result<Response, ApiError> {
    news_answer(&state, site.id, Encoding::GzipFile, &method, &request).await
}

/// The news sitemap in `encoding`, with the same validators and preconditions as a page; 404 when no article is in
/// the window.
async fn news_answer(
    state: &impl Serving,
    site: i64,
    encoding: Encoding,
    method: &Method,
    request: &HeaderMap,
) -> Result<Response, ApiError> {
    let directory = directory_for(state, site, request).await?;
    let news_state = news_sitemap(state, &directory).await?;
    let news = news_state
        .sitemap
        .as_ref()
        .ok_or_else(|| ApiError::not_found("no news article was published within the news window"))?;
    let etag = etag(&[&"news", &news.digest], encoding, Gzip::Stream, state.config().sitemaps.gzip_level);
    let rep = Representation { encoding, kind: Kind::Xml, etag, modified_us: news.modified_us, length: None };
    if let Some(answer) = rep.check_preconditions(request) {
        return Ok(answer);
    }
    let body = if encoding.gzip() { news.gzip.clone() } else { news.identity.clone() };
    Ok(rep.answer(method, Source::Bytes(body)))
}

/// A document built whole from one read (as the news sitemap is, by a feature above this module: the feeds):
/// its bytes in both codings, a digest of the identity bytes, and its date.
pub struct Document<'a> {
    /// What it is, for its ETag (`"feed"`): documents of different kinds never share an ETag.
    pub kind: &'static str,
    /// Its media type, without a coding.
    pub content_type: &'static str,
    pub identity: &'a Bytes,
    pub gzip: &'a Bytes,
    pub digest: &'a str,
    pub modified_us: i64,
}

/// `document` answered as the news sitemap is: gzip negotiated by `Accept-Encoding` (406 when neither coding is
/// acceptable; `Vary: Accept-Encoding`), a strong ETag per coding from its digest, `Last-Modified` its date,
/// 304 or 412 on the request's preconditions, HEAD with GET's headers.
pub fn document_answer(
    state: &impl Serving,
    document: &Document<'_>,
    method: &Method,
    request: &HeaderMap,
) -> Response {
    let Some(encoding) = Encoding::negotiate(request) else { return not_acceptable() };
    let level = state.config().sitemaps.gzip_level;
    let etag = etag(&[&document.kind, &document.digest], encoding, Gzip::Stream, level);
    let rep = Representation { encoding, kind: Kind::Xml, etag, modified_us: document.modified_us, length: None };
    if let Some(answer) = rep.check_preconditions(request) {
        return answer;
    }
    let body = if encoding.gzip() { document.gzip } else { document.identity };
    let mut answer = rep.answer(method, Source::Bytes(body.clone()));
    answer.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(document.content_type));
    answer
}

/// `GET|HEAD /sitemap-N.xml`, `/sitemap-N.xml.gz`, and the text forms `/sitemap-N.txt` and `/sitemap-N.txt.gz`
/// (any other name is 404; see [`SitemapFile`]). Validators come from the directory; the body from the page's
/// gzip in that form, taken from the page cache or else rendered from one database snapshot (once for every
/// concurrent request when the cache is on, for this request alone when it is off). The page-stream slot and the
/// snapshot are released when the render ends, before a byte is sent: a client that reads slowly or not at all
/// holds neither. gzip is sent as rendered; identity is inflated from it as it is sent, so no page is held
/// uncompressed. HEAD renders the page as GET does, so that both carry the same headers, `Content-Length` included.
async fn get_page<S: Serving>(
    State(state): State<S>,
    RequestSite(site): RequestSite,
    OriginalUri(uri): OriginalUri,
    method: Method,
    request: HeaderMap,
    other: Option<OtherFiles<S>>,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::not_found("no such sitemap page");
    // The raw path, not the percent-decoded one: a page has one URL (`/sitemap-1%2exml` is not `/sitemap-1.xml`).
    let file = uri.path().strip_prefix('/').unwrap_or_default();
    // The news sitemap has routes of its own (named in the request metrics, as before).
    let Some(parsed) = SitemapFile::parse(file) else {
        return match other {
            Some(other) => other(state, site, file.to_owned(), method, request).await,
            None => Err(ApiError::not_found("no such resource")),
        };
    };
    let gz_file = match parsed {
        SitemapFile::Page { format, .. } => format.gz_file(),
        SitemapFile::SectionIndex { gz, .. } | SitemapFile::News { gz } | SitemapFile::Removed { gz } => gz,
    };
    let Some(encoding) = Encoding::of_file(gz_file, &request) else { return Ok(not_acceptable()) };
    let (section, number, format) = match parsed {
        SitemapFile::Page { section, number, format } => (section, number, format),
        SitemapFile::SectionIndex { section, .. } => {
            return section_index_answer(&state, &site, section, encoding, &method, &request).await;
        }
        SitemapFile::News { .. } => return news_answer(&state, site.id, encoding, &method, &request).await,
        SitemapFile::Removed { .. } => {
            return removed::removed_answer(&state, site.id, encoding, &method, &request).await;
        }
    };
    let kind = if format.text() { Kind::Text } else { Kind::Xml };
    let level = state.config().sitemaps.gzip_level;
    let directory = directory_for(&state, site.id, &request).await?;
    let id = directory.page_id(section, number).ok_or_else(not_found)?;
    let page = directory.page(id).ok_or_else(not_found)?;
    // The ETag as the page table keeps it (made once per table and form, not per request).
    let form = usize::from(kind == Kind::Text) * 2 + usize::from(encoding.gzip());
    let etag = directory.page_etag(id, form, |page| page_etag_as(kind, page, encoding.gzip(), level));
    let rep =
        Representation { etag: etag.ok_or_else(not_found)?, ..Representation::page_without_etag(kind, page, encoding) };
    if let Some(answer) = rep.check_preconditions(&request) {
        return Ok(served(answer, page));
    }
    let rendered = state
        .page_cache()
        .get_or_render_as(kind, site.id, page, render_as(kind, state.clone(), site.id, id))
        .await
        .map_err(|e| ApiError::clone(&e))?;
    // The render's snapshot may be newer than the directory: its state names what is sent.
    let rep = Representation::page(kind, &rendered.state, encoding, level);
    if let Some(answer) = rep.check_preconditions(&request) {
        return Ok(served(answer, &rendered.state));
    }
    let body = if encoding.gzip() {
        Source::Bytes(rendered.gzip)
    } else {
        // The length the gzip trailer records is the length inflated (checked by the decoder as it ends).
        let len = stream::gunzipped_len(&rendered.gzip).ok_or_else(|| {
            tracing::error!(page = id, "a rendered page is not a gzip member");
            ApiError::internal()
        })?;
        // A page with excluded entries (URL health) renders shorter than its stored size, which counts them.
        if format == Format::Xml && rendered.state.excluded == 0 {
            let head = urlset_head(rendered.state.ns.used()).len();
            let expected = (head + URLSET_TAIL.len()) as u64 + rendered.state.byte_size as u64;
            if len != expected {
                tracing::warn!(
                    page = id,
                    length = len,
                    expected,
                    "a page's rendered size differs from its stored size"
                );
            }
        }
        Source::Inflated { gzip: rendered.gzip, len }
    };
    Ok(served(rep.answer(&method, body), &rendered.state))
}

/// Page `id` of `site` from one database snapshot: its state, and its body in form `kind` (the `<urlset>`, or the
/// text sitemap) read and rendered by a task that holds a page-stream slot for at most the stream timeout. The
/// chunks are cut by content, so every consumer (streamed or cached, identity or gzip) sees the same bytes in the
/// same pieces.
async fn read_page(
    state: &impl Serving,
    site: i64,
    id: i64,
    kind: Kind,
) -> Result<(PageState, impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static), ApiError> {
    use futures_util::future::Either;
    let slot = state.page_stream_slot().await?;
    let (snapshot, entries) =
        state.reads().page_entries(site, id).await?.ok_or_else(|| ApiError::not_found("no such sitemap page"))?;
    let body = match kind {
        Kind::Xml => Either::Left(stream::urlset(entries, snapshot.ns.used())),
        Kind::Text => Either::Right(text::lines(entries)),
    };
    Ok((snapshot, stream::detach(body, state.config().sitemaps.stream_timeout, slot)))
}

/// Page `id`'s XML read from one snapshot and compressed whole: [`render_as`] for [`Kind::Xml`].
async fn render_gzip<S: Serving>(state: S, site: i64, id: i64) -> Result<Rendered, ApiError> {
    render_as(Kind::Xml, state, site, id).await
}

/// Page `id` in form `kind` read from one snapshot and compressed whole (in this task, while another reads and
/// renders) in the page's own way ([`Gzip`]), once a render slot is free ([`RenderSlots`]), all within the stream
/// timeout. The slots and the snapshot are released when this returns.
async fn render_as<S: Serving>(kind: Kind, state: S, site: i64, id: i64) -> Result<Rendered, ApiError> {
    let work = state.render_slots().run(async {
        let (snapshot, rendered) = read_page(&state, site, id, kind).await?;
        // Sitemaps compress 5 to 8 times; a third of the page is room enough (the text is shorter than the XML),
        // and what is not written to is not resident.
        let capacity = (crate::page::page_bytes(snapshot.byte_size) / 3) as usize;
        let level = state.config().sitemaps.gzip_level;
        let gzip = match snapshot.gzip {
            Gzip::Stream => stream::gzip_collect_sized(rendered, level, capacity).await,
            Gzip::Blocks => stream::gzip_blocks(rendered, level, capacity).await,
        };
        let gzip = gzip.map_err(|e| {
            tracing::warn!(error = %e, page = id, ?kind, "cannot render a sitemap page");
            ApiError::unavailable()
        })?;
        crate::telemetry::page_rendered();
        Ok(Rendered { state: snapshot, gzip })
    });
    tokio::time::timeout(state.config().sitemaps.stream_timeout, work).await.unwrap_or_else(|_| {
        tracing::warn!(page = id, ?kind, "rendering a sitemap page took longer than the stream timeout");
        Err(ApiError::unavailable())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_differ_by_representation_and_state_and_are_stable() {
        let page = PageState {
            id: 3,
            url_count: 10,
            byte_size: 900,
            version: 7,
            modified_us: 1_700_000_000_000_000,
            ..PageState::default()
        };
        let a = page_etag(&page, false, 6);
        assert_eq!(a, page_etag(&page, false, 6));
        assert_ne!(a, page_etag(&page, true, 6));
        assert_ne!(page_etag(&page, true, 6), page_etag(&page, true, 9));
        assert_ne!(a, page_etag(&PageState { version: 8, ..page }, false, 6));
        assert_ne!(a, page_etag(&PageState { modified_us: page.modified_us + 1, ..page }, false, 6));
        assert!(a.starts_with('"') && a.ends_with('"') && a.len() == 34);
        // Pinned: the digest's input and its hex form are what every earlier release answered.
        assert_eq!(a, "\"5b91010e3174ea58d92a7c0d49c4cea9\"");
        assert_eq!(page_etag(&page, true, 6), "\"92952f50be696c876d09eba140ad745e-gz\"");
        // The text form has ETags of its own, which follow the same state.
        let text = page_etag_as(Kind::Text, &page, false, 6);
        assert_eq!(text, page_etag_as(Kind::Text, &page, false, 6));
        assert_ne!(text, a);
        assert_ne!(page_etag_as(Kind::Text, &page, true, 6), page_etag(&page, true, 6));
        assert_ne!(text, page_etag_as(Kind::Text, &PageState { version: 8, ..page }, false, 6));
        assert!(page_etag_as(Kind::Text, &page, true, 6).ends_with("-gz\""));
        // Pinned too: a text page keeps its ETags across releases unless its bytes change.
        assert_eq!(text, "\"a7164b2cc3925769dc1fa2b6fc922b5a\"");
    }
}
