//! The public sitemap routes: `/sitemap.xml` (the index) and `/sitemap-N.xml[.gz]` (the pages), with gzip,
//! strong ETags and Last-Modified derived from stored page state, and conditional GET/HEAD.

pub mod conditional;
pub mod render;
mod stream;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use sha2::{Digest, Sha256};

use self::render::{INDEX_HEAD, INDEX_TAIL, RENDER_VERSION, URLSET_HEAD, URLSET_TAIL};
use crate::AppState;
use crate::domain::LastMod;
use crate::error::ApiError;
use crate::pagination::PageState;

/// Names the gzip implementation, which (with the level) fixes the compressed bytes: part of every gzip ETag.
/// Change it when the compression backend changes.
const GZIP_ENCODER: &str = "async-compression-write/flate2";

const CONTENT_TYPE_XML: &str = "application/xml; charset=utf-8";
const CONTENT_TYPE_GZIP: &str = "application/gzip";
/// Caches may store a sitemap but must revalidate it (cheaply, with the validators) before each use.
const CACHE_CONTROL: &str = "no-cache";

pub fn router() -> Router<AppState> {
    Router::new().route("/sitemap.xml", get(get_index)).route("/{file}", get(get_page))
}

/// How a response is encoded: negotiated on `.xml`, always gzip as a file on `.xml.gz`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Identity,
    Gzip,
    GzipFile,
}

impl Encoding {
    fn negotiate(headers: &HeaderMap) -> Self {
        if conditional::accepts_gzip(headers) { Self::Gzip } else { Self::Identity }
    }

    fn gzip(self) -> bool {
        self != Self::Identity
    }
}

/// `sitemap-N.xml` or `sitemap-N.xml.gz`, N from 1 without leading zeros.
fn parse_page_file(file: &str) -> Option<(i64, bool)> {
    let rest = file.strip_prefix("sitemap-")?;
    let (number, gz) = match rest.strip_suffix(".xml.gz") {
        Some(n) => (n, true),
        None => (rest.strip_suffix(".xml")?, false),
    };
    if number.is_empty() || number.starts_with('0') || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((number.parse().ok()?, gz))
}

/// A strong ETag: a digest of the stored state the bytes are a function of, per representation.
fn etag(parts: &[&dyn std::fmt::Display], encoding: Encoding, gzip_level: u32) -> String {
    let mut h = Sha256::new();
    h.update(format!("render={RENDER_VERSION}"));
    for part in parts {
        h.update(b"\0");
        h.update(part.to_string());
    }
    if encoding.gzip() {
        h.update(format!("\0{GZIP_ENCODER}\0{gzip_level}"));
    }
    let digest = h.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    if encoding.gzip() { format!("\"{hex}-gz\"") } else { format!("\"{hex}\"") }
}

pub fn page_etag(page: &PageState, gzip: bool, gzip_level: u32) -> String {
    let encoding = if gzip { Encoding::Gzip } else { Encoding::Identity };
    etag(&[&"page", &page.id, &page.version, &page.modified_us, &page.url_count, &page.byte_size], encoding, gzip_level)
}

fn system_time(us: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(us.max(0) as u64)
}

/// One representation's validators and size, and the answers derived from them.
struct Representation {
    encoding: Encoding,
    etag: String,
    modified_us: i64,
    identity_len: u64,
}

impl Representation {
    fn page(page: &PageState, encoding: Encoding, gzip_level: u32) -> Self {
        Self {
            encoding,
            etag: page_etag(page, encoding.gzip(), gzip_level),
            modified_us: page.modified_us,
            identity_len: (URLSET_HEAD.len() + URLSET_TAIL.len()) as u64 + page.byte_size as u64,
        }
    }

    /// Headers shared by 200 and 304 answers.
    fn validators(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ETAG, HeaderValue::from_str(&self.etag).expect("hex"));
        let last_modified = httpdate::fmt_http_date(system_time(self.modified_us));
        h.insert(header::LAST_MODIFIED, HeaderValue::from_str(&last_modified).expect("http-date"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
        if self.encoding != Encoding::GzipFile {
            h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        h
    }

    /// 304 or 412 when the request's preconditions say so (RFC 9110 §13.2.2), else `None`: send the body.
    fn check_preconditions(&self, request: &HeaderMap) -> Option<Response> {
        let status = match conditional::evaluate(request, &self.etag, system_time(self.modified_us)) {
            conditional::Outcome::Proceed => return None,
            conditional::Outcome::NotModified => StatusCode::NOT_MODIFIED,
            conditional::Outcome::Failed => StatusCode::PRECONDITION_FAILED,
        };
        Some((status, self.validators()).into_response())
    }

    /// The 200 headers: validators plus type, encoding, and the length when it is known before streaming.
    fn headers(&self) -> HeaderMap {
        let mut h = self.validators();
        let content_type = if self.encoding == Encoding::GzipFile { CONTENT_TYPE_GZIP } else { CONTENT_TYPE_XML };
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        match self.encoding {
            Encoding::Gzip => {
                h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            Encoding::Identity => {
                h.insert(header::CONTENT_LENGTH, HeaderValue::from(self.identity_len));
            }
            Encoding::GzipFile => {}
        }
        h
    }

    /// The body of a HEAD answer: empty, but with no size hint when the length is unknown (gzip), so that no
    /// `Content-Length: 0` is derived from it.
    fn head_body(&self) -> Body {
        if self.encoding.gzip() {
            Body::from_stream(futures_util::stream::empty::<std::io::Result<Bytes>>())
        } else {
            Body::empty()
        }
    }

    /// The body's bytes in this representation's encoding.
    fn encode<S>(&self, bytes: S, gzip_level: u32) -> BoxStream<'static, std::io::Result<Bytes>>
    where
        S: futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    {
        if self.encoding.gzip() { Box::pin(stream::gzip(bytes, gzip_level)) } else { Box::pin(bytes) }
    }
}

/// `GET|HEAD /sitemap.xml`: one `<sitemap>` per non-empty page. Costs O(pages).
async fn get_index(State(state): State<AppState>, method: Method, request: HeaderMap) -> Result<Response, ApiError> {
    let pages = state.store.pages().await?;
    let listed: Vec<&PageState> = pages.iter().filter(|p| p.url_count > 0).collect();
    if listed.is_empty() {
        return Err(ApiError::not_found("no URLs are stored yet"));
    }
    // Emptied pages count for Last-Modified: their leaving the index is a change to it.
    let modified_us = pages.iter().map(|p| p.modified_us).max().unwrap_or(0);
    let encoding = Encoding::negotiate(&request);
    let state_key: String = listed.iter().map(|p| format!("{}:{}:{};", p.id, p.version, p.modified_us)).collect();
    let etag = etag(&[&"index", &state.public_url, &modified_us, &state_key], encoding, state.gzip_level);
    // Validators first: a 304 or 412 renders nothing.
    let check = Representation { encoding, etag, modified_us, identity_len: 0 };
    if let Some(answer) = check.check_preconditions(&request) {
        return Ok(answer);
    }
    let mut body = Vec::with_capacity(INDEX_HEAD.len() + INDEX_TAIL.len() + listed.len() * 128);
    body.extend_from_slice(INDEX_HEAD.as_bytes());
    for page in &listed {
        render::write_index_entry(
            &mut body,
            &state.public_url.page_url(page.id),
            LastMod::from_unix_micros(page.modified_us).as_str(),
        );
    }
    body.extend_from_slice(INDEX_TAIL.as_bytes());
    let rep = Representation { identity_len: body.len() as u64, ..check };
    if method == Method::HEAD {
        return Ok((rep.headers(), rep.head_body()).into_response());
    }
    let chunks = futures_util::stream::once(async move { Ok(Bytes::from(body)) });
    Ok((rep.headers(), Body::from_stream(rep.encode(chunks, state.gzip_level))).into_response())
}

/// `GET|HEAD /sitemap-N.xml` and `/sitemap-N.xml.gz`, streamed from one database snapshot.
async fn get_page(
    State(state): State<AppState>,
    Path(file): Path<String>,
    method: Method,
    request: HeaderMap,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::not_found("no such sitemap page");
    let Some((id, gz_file)) = parse_page_file(&file) else {
        return Err(ApiError::not_found("no such resource"));
    };
    let encoding = if gz_file { Encoding::GzipFile } else { Encoding::negotiate(&request) };
    let level = state.gzip_level;
    // Validators first, from the page row alone: a 304 or a HEAD never reads the page's URLs.
    let page = state.store.page(id).await?.filter(|p| p.url_count > 0).ok_or_else(not_found)?;
    let rep = Representation::page(&page, encoding, level);
    if let Some(answer) = rep.check_preconditions(&request) {
        return Ok(answer);
    }
    if method == Method::HEAD {
        return Ok((rep.headers(), rep.head_body()).into_response());
    }
    // The body and its headers come from one snapshot, which may be newer than the row checked above. A task
    // streams it, holding a page-stream slot, for at most the stream timeout.
    let slot = state.page_stream_slot().await?;
    let (snapshot, entries) = state.store.page_entries(id).await?.ok_or_else(not_found)?;
    let rep = Representation::page(&snapshot, encoding, level);
    if let Some(answer) = rep.check_preconditions(&request) {
        return Ok(answer);
    }
    let body = stream::detach(rep.encode(stream::urlset(entries), level), state.stream_timeout, slot);
    crate::telemetry::page_rendered();
    Ok((rep.headers(), Body::from_stream(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_file_names() {
        assert_eq!(parse_page_file("sitemap-1.xml"), Some((1, false)));
        assert_eq!(parse_page_file("sitemap-42.xml.gz"), Some((42, true)));
        for bad in [
            "sitemap-0.xml",
            "sitemap-01.xml",
            "sitemap-.xml",
            "sitemap-1.xmlx",
            "sitemap-1",
            "sitemap-x.xml",
            "sitemap-+1.xml",
            "sitemap-99999999999999999999.xml",
            "sitemap.xml.gz",
            "foo",
        ] {
            assert_eq!(parse_page_file(bad), None, "{bad}");
        }
    }

    #[test]
    fn etags_differ_by_representation_and_state_and_are_stable() {
        let page = PageState { id: 3, url_count: 10, byte_size: 900, version: 7, modified_us: 1_700_000_000_000_000 };
        let a = page_etag(&page, false, 6);
        assert_eq!(a, page_etag(&page, false, 6));
        assert_ne!(a, page_etag(&page, true, 6));
        assert_ne!(page_etag(&page, true, 6), page_etag(&page, true, 9));
        assert_ne!(a, page_etag(&PageState { version: 8, ..page }, false, 6));
        assert_ne!(a, page_etag(&PageState { modified_us: page.modified_us + 1, ..page }, false, 6));
        assert!(a.starts_with('"') && a.ends_with('"') && a.len() == 34);
    }
}
