//! The checker's requests: a page's `GET` (conditional, no redirect followed, the body read only as far as the
//! end of an HTML head and never past `head_bytes`), a host's robots.txt (bounded), and the robots.txt cache.
//!
//! A page's body is read as a crawler reads it: decoded from its `Content-Encoding` (`gzip`, `deflate` as zlib or
//! raw, `br`, in the order applied; asked for with `Accept-Encoding`), and, when no `Content-Type` says what it
//! is, sniffed as a browser does ([`crate::health::sniff`]). Decoding is done here, with async-compression's
//! decoders pulled by the reads, rather than by reqwest's transparent decoding: a read takes at most [`READ`]
//! decoded bytes, reading stops when the head ended or `head_bytes` were decoded (a gzip bomb costs the CPU of
//! `head_bytes`), the compressed bytes read are capped too ([`RAW_SLACK`] past `head_bytes`), `Content-Encoding`
//! stays known to the judge, `deflate` may be raw as browsers accept, and the other clients (IndexNow) are left as
//! they are. A body in an encoding not asked for is not read: the page is judged on its status and headers alone,
//! as a non-HTML page is. A body that does not decode is a transient failure (`connect: …`), never a problem.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_compression::tokio::bufread::{BrotliDecoder, DeflateDecoder, GzipDecoder, ZlibDecoder};
use futures_util::TryStreamExt as _;
use reqwest::header::{self, HeaderMap, HeaderValue};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio_util::io::StreamReader;
use url::Url;

use super::CheckerOptions;
use crate::health::Transient;
use crate::health::head::HeadScan;
use crate::health::robots::Robots;
use crate::health::sniff::{RESOURCE_HEADER, Sniffed, sniff};
use crate::http_client::error_chain;
use crate::store::CheckClaim;

/// Redirects of a robots.txt followed, within the configured sites' hosts (RFC 9309 asks for at least five).
pub(super) const ROBOTS_HOPS: usize = 5;

/// The most of a robots.txt read: RFC 9309's least a parser must take (500 KiB).
const ROBOTS_BYTES: usize = 500 * 1024;

/// How long a robots.txt answer is kept: 24 h (RFC 9309's most) for an answer, 5 min for a server error, so that
/// an outage of robots.txt is not remembered for a day.
const ROBOTS_TTL: Duration = Duration::from_secs(24 * 3600);
const ROBOTS_ERROR_TTL: Duration = Duration::from_secs(300);

/// The most decoded bytes one read of a page's body takes (and so the most a decoder makes past the limit).
const READ: usize = 16 * 1024;

/// The compressed bytes read past `head_bytes` at most: what a deflate stream's headers and block boundaries may
/// add to a head that does not compress (a stream that makes less than that is cut there, as at the limit).
const RAW_SLACK: usize = 64 * 1024;

/// The `Accept-Encoding` of a page's request: what [`Codec`] decodes.
const ACCEPT_ENCODING: &str = "gzip, deflate, br";

/// The checker's HTTP client: TLS and `User-Agent` as configured, no redirect followed (a redirect is a finding),
/// connecting within the timeout. The whole request is bounded by the caller ([`page`], [`robots`]).
pub(super) fn client(options: &CheckerOptions) -> anyhow::Result<reqwest::Client> {
    crate::http_client::builder()?
        .user_agent(options.user_agent.clone())
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(options.timeout)
        .build()
        .context("cannot build the URL health HTTP client")
}

/// What a page's request came to.
pub(super) enum Fetched {
    /// An answer, with at most `head_bytes` of its body (only an HTML body is read).
    Answer {
        status: u16,
        headers: HeaderMap,
        head: Vec<u8>,
    },
    /// 304 to the conditional request, with the validators it sent.
    NotModified {
        etag: Option<String>,
        last_modified: Option<String>,
    },
    Failed(Transient),
}

/// One `GET` of `url`: conditional on the claim's validators; the whole of it (connecting, the head, the body's
/// prefix) within the timeout.
pub(super) async fn page(client: &reqwest::Client, options: &CheckerOptions, url: &Url, claim: &CheckClaim) -> Fetched {
    let mut request = client
        .get(url.clone())
        .header(header::ACCEPT, "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5")
        .header(header::ACCEPT_ENCODING, ACCEPT_ENCODING);
    if let Some(etag) = claim.etag.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
        request = request.header(header::IF_NONE_MATCH, etag);
    }
    if let Some(date) = claim.last_modified.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
        request = request.header(header::IF_MODIFIED_SINCE, date);
    }
    let exchange = async {
        let response = request.send().await.map_err(|e| failure(&e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if status == 304 {
            let value = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok()).map(str::to_owned);
            return Ok(Fetched::NotModified { etag: value(header::ETAG), last_modified: value(header::LAST_MODIFIED) });
        }
        let media = media(&headers);
        let head = match codecs(&headers) {
            Ok(codecs) if media != Media::Other && (200..300).contains(&status) => {
                read_head(response, &codecs, media == Media::Unknown, options.head_bytes).await?
            }
            Ok(_) => Vec::new(),
            Err(unknown) => {
                tracing::debug!(%url, encoding = %unknown, "a body in an encoding not asked for: not read");
                Vec::new()
            }
        };
        // The rest of the body is never read: dropping the response closes its connection.
        Ok(Fetched::Answer { status, headers, head })
    };
    match tokio::time::timeout(options.timeout, exchange).await {
        Ok(Ok(fetched)) => fetched,
        Ok(Err(transient)) => Fetched::Failed(transient),
        Err(_) => Fetched::Failed(Transient::Timeout),
    }
}

/// A `Content-Encoding` the checker decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Codec {
    Gzip,
    /// zlib (RFC 9110's `deflate`) or a raw deflate stream, told apart by the first two bytes as browsers do.
    Deflate,
    Brotli,
}

/// The codings of a body, in the order they were applied (`identity` skipped); the first unknown one as an error.
fn codecs(headers: &HeaderMap) -> Result<Vec<Codec>, String> {
    let mut codecs = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        for token in String::from_utf8_lossy(value.as_bytes()).split(',').map(str::trim).filter(|t| !t.is_empty()) {
            match token.to_ascii_lowercase().as_str() {
                "identity" => {}
                "gzip" | "x-gzip" => codecs.push(Codec::Gzip),
                "deflate" => codecs.push(Codec::Deflate),
                "br" => codecs.push(Codec::Brotli),
                _ => return Err(token.chars().take(64).collect()),
            }
        }
    }
    Ok(codecs)
}

/// What a page's `Content-Type` says of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Media {
    Html,
    /// None, not a MIME type, or one of WHATWG's unknown types (`unknown/unknown`, `application/unknown`, `*/*`):
    /// sniffed.
    Unknown,
    Other,
}

fn media(headers: &HeaderMap) -> Media {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return Media::Unknown };
    let value = String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase();
    let essence = value.split(';').next().unwrap_or_default().trim();
    match essence.split_once('/') {
        _ if essence.contains("html") => Media::Html,
        None => Media::Unknown,
        Some((kind, sub)) if kind.is_empty() || sub.is_empty() => Media::Unknown,
        _ if matches!(essence, "unknown/unknown" | "application/unknown" | "*/*") => Media::Unknown,
        _ => Media::Other,
    }
}

/// Reads `response`'s body, decoded, into a [`HeadScan`] of `limit` bytes; when `sniffed`, only as far as the
/// sniffing rules need unless they find HTML. The head's bytes, or none when the body is not HTML.
async fn read_head(
    response: reqwest::Response,
    codecs: &[Codec],
    sniffed: bool,
    limit: usize,
) -> Result<Vec<u8>, Transient> {
    let raw = response.bytes_stream().map_err(std::io::Error::other);
    let raw = StreamReader::new(Box::pin(raw)).take(u64::try_from(limit.saturating_add(RAW_SLACK)).unwrap_or(u64::MAX));
    let mut reader = decoder(raw, codecs).await?;
    let mut head = HeadScan::new(limit);
    let mut buf = vec![0; READ];
    let mut html = !sniffed;
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(n) => n,
            Err(e) => match e.get_ref().and_then(|e| e.downcast_ref::<reqwest::Error>()) {
                Some(e) => return Err(failure(e)),
                // A compressed stream that ends early (at the compressed bytes' cap, or as the server sent it)
                // is judged on what it decoded to, as a body cut at the limit is.
                None if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                None => return Err(Transient::Connect(format!("the body does not decode ({codecs:?}): {e}"))),
            },
        };
        if n == 0 {
            break;
        }
        let done = head.push(&buf[..n]);
        if !html && (done || head.bytes().len() >= RESOURCE_HEADER) {
            if sniff(head.bytes()) != Sniffed::Html {
                return Ok(Vec::new());
            }
            html = true;
        }
        if done {
            break;
        }
    }
    if !html && sniff(head.bytes()) != Sniffed::Html {
        return Ok(Vec::new());
    }
    Ok(head.into_bytes())
}

/// A reader of `raw` decoded by `codecs`, the last applied decoded first.
async fn decoder<R>(raw: R, codecs: &[Codec]) -> Result<Box<dyn AsyncRead + Send + Unpin>, Transient>
where
    R: AsyncBufRead + Send + Unpin + 'static,
{
    let mut reader: Box<dyn AsyncBufRead + Send + Unpin> = Box::new(raw);
    for codec in codecs.iter().rev() {
        reader = match codec {
            Codec::Gzip => Box::new(BufReader::new(GzipDecoder::new(reader))),
            Codec::Brotli => Box::new(BufReader::new(BrotliDecoder::new(reader))),
            Codec::Deflate => {
                let start = reader.fill_buf().await.map_err(|e| {
                    match e.get_ref().and_then(|e| e.downcast_ref::<reqwest::Error>()) {
                        Some(e) => failure(e),
                        None => Transient::Connect(format!("the body cannot be read: {e}")),
                    }
                })?;
                if is_zlib(start) {
                    Box::new(BufReader::new(ZlibDecoder::new(reader)))
                } else {
                    Box::new(BufReader::new(DeflateDecoder::new(reader)))
                }
            }
        };
    }
    Ok(reader)
}

/// Whether a `deflate` body starts with a zlib header (RFC 1950: method 8, the check bits), as browsers tell a
/// zlib stream from a raw deflate one. A first chunk of one byte is taken for zlib.
fn is_zlib(start: &[u8]) -> bool {
    match start {
        [cmf, flg, ..] => cmf & 0x0F == 8 && cmf >> 4 <= 7 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => true,
    }
}

/// What a robots.txt request came to.
pub(super) enum RobotsAnswer {
    Found { status: u16, body: Vec<u8> },
    Redirect(Url),
    Failed(Transient),
}

/// One `GET` of a robots.txt, its body read up to [`ROBOTS_BYTES`], within the timeout.
pub(super) async fn robots(client: &reqwest::Client, options: &CheckerOptions, url: &Url) -> RobotsAnswer {
    let exchange = async {
        let mut response = client.get(url.clone()).send().await.map_err(|e| failure(&e))?;
        let status = response.status();
        if status.is_redirection() {
            let to = response.headers().get(header::LOCATION).and_then(|v| v.to_str().ok());
            if let Some(to) = to.and_then(|to| url.join(to).ok()) {
                return Ok(RobotsAnswer::Redirect(to));
            }
        }
        let mut body = Vec::new();
        if status.is_success() {
            while body.len() < ROBOTS_BYTES {
                match response.chunk().await.map_err(|e| failure(&e))? {
                    Some(chunk) => body.extend_from_slice(&chunk),
                    None => break,
                }
            }
            body.truncate(ROBOTS_BYTES);
        }
        Ok(RobotsAnswer::Found { status: status.as_u16(), body })
    };
    match tokio::time::timeout(options.timeout, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(transient)) => RobotsAnswer::Failed(transient),
        Err(_) => RobotsAnswer::Failed(Transient::Timeout),
    }
}

fn failure(e: &reqwest::Error) -> Transient {
    if e.is_timeout() { Transient::Timeout } else { Transient::Connect(error_chain(e)) }
}

/// The most hosts whose robots.txt is kept. Only the configured sites' hosts are fetched, far fewer than this, so
/// none is evicted while in use; the bound holds whatever the configuration.
pub(super) const ROBOTS_HOSTS: u64 = 1_024;

/// Each host's robots.txt as last fetched, kept [`ROBOTS_TTL`] (an answer) or [`ROBOTS_ERROR_TTL`] (a server
/// error, no answer), for at most [`ROBOTS_HOSTS`] hosts (moka: least recently used first out past it). One fetch
/// per host serves the checks that wait for it: moka runs one initialization of a key at a time.
pub(super) struct RobotsCache(moka::future::Cache<String, Kept>);

/// A robots.txt as kept: the rules, and whether they stand for an error (kept only a few minutes).
#[derive(Clone)]
pub(super) struct Kept {
    robots: Arc<Robots>,
    error: bool,
}

impl Kept {
    /// `robots`, which stands for a server error or no answer when `error`.
    pub(super) fn new(robots: Robots, error: bool) -> Self {
        Self { robots: Arc::new(robots), error }
    }

    fn ttl(&self) -> Duration {
        if self.error { ROBOTS_ERROR_TTL } else { ROBOTS_TTL }
    }
}

/// Each entry lives its own [`Kept::ttl`] from when it was fetched.
struct KeptFor;

impl moka::Expiry<String, Kept> for KeptFor {
    fn expire_after_create(&self, _host: &String, kept: &Kept, _at: std::time::Instant) -> Option<Duration> {
        Some(kept.ttl())
    }
}

impl Default for RobotsCache {
    fn default() -> Self {
        Self::with_capacity(ROBOTS_HOSTS)
    }
}

impl RobotsCache {
    pub(super) fn with_capacity(hosts: u64) -> Self {
        Self(moka::future::Cache::builder().max_capacity(hosts).expire_after(KeptFor).build())
    }

    /// `host`'s robots.txt while it is fresh, else what `fetch` gets, kept; a failed fetch keeps nothing, and
    /// every check that waited for it gets its error.
    pub(super) async fn get_or_fetch<E: Send + Sync + 'static>(
        &self,
        host: &str,
        fetch: impl Future<Output = Result<Kept, E>>,
    ) -> Result<Arc<Robots>, Arc<E>> {
        Ok(self.0.try_get_with_by_ref(host, fetch).await?.robots)
    }
}

#[cfg(test)]
mod tests {
    use moka::Expiry as _;

    use super::*;

    fn robots(error: bool) -> Result<Kept, ()> {
        Ok(Kept::new(
            if error { Robots::unreachable() } else { Robots::from_answer(200, b"User-agent: *\nDisallow:\n") },
            error,
        ))
    }

    /// However many hosts are asked for, the cache keeps at most its capacity.
    #[tokio::test]
    async fn the_robots_cache_is_bounded() {
        let cache = RobotsCache::with_capacity(8);
        for i in 0..100 {
            cache.get_or_fetch(&format!("https://h{i}.test:443"), async { robots(false) }).await.unwrap();
        }
        cache.0.run_pending_tasks().await;
        assert!(cache.0.entry_count() <= 8, "{} hosts kept", cache.0.entry_count());
        assert_eq!(RobotsCache::default().0.policy().max_capacity(), Some(ROBOTS_HOSTS));
    }

    /// A fresh entry is served without a fetch; a failed fetch keeps nothing; an answer lives a day, an error five
    /// minutes.
    #[tokio::test]
    async fn a_kept_robots_txt_is_served_until_its_time_is_up() {
        let cache = RobotsCache::default();
        let host = "https://a.test:443";
        let failed = cache.get_or_fetch(host, async { Err::<Kept, _>("held") }).await;
        assert_eq!(failed.err().as_deref(), Some(&"held"), "the error, and nothing kept");
        cache.get_or_fetch(host, async { robots(false) }).await.unwrap();
        let again = cache.get_or_fetch(host, async { Err::<Kept, _>("fetched again") }).await;
        assert!(again.is_ok(), "served from the cache");
        let now = std::time::Instant::now();
        let ttl = |error| KeptFor.expire_after_create(&host.to_owned(), &robots(error).unwrap(), now);
        assert_eq!((ttl(false), ttl(true)), (Some(ROBOTS_TTL), Some(ROBOTS_ERROR_TTL)));
    }
}
