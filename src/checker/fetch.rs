//! The checker's requests: a page's `GET` (conditional, no redirect followed, the body read only as far as the
//! end of an HTML head and never past `head_bytes`), a host's robots.txt (bounded), and the robots.txt cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use reqwest::header::{self, HeaderMap, HeaderValue};
use tokio::time::Instant;
use url::Url;

use super::CheckerOptions;
use crate::health::Transient;
use crate::health::head::HeadScan;
use crate::health::robots::Robots;
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
    let mut request = client.get(url.clone()).header(header::ACCEPT, "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5");
    if let Some(etag) = claim.etag.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
        request = request.header(header::IF_NONE_MATCH, etag);
    }
    if let Some(date) = claim.last_modified.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
        request = request.header(header::IF_MODIFIED_SINCE, date);
    }
    let exchange = async {
        let mut response = request.send().await.map_err(|e| failure(&e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if status == 304 {
            let value = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok()).map(str::to_owned);
            return Ok(Fetched::NotModified { etag: value(header::ETAG), last_modified: value(header::LAST_MODIFIED) });
        }
        let mut head = HeadScan::new(options.head_bytes);
        if is_html(&headers) && (200..300).contains(&status) {
            while let Some(chunk) = response.chunk().await.map_err(|e| failure(&e))? {
                if head.push(&chunk) {
                    break;
                }
            }
        }
        let head = head.into_bytes();
        // The rest of the body is never read: dropping the response closes its connection.
        Ok(Fetched::Answer { status, headers, head })
    };
    match tokio::time::timeout(options.timeout, exchange).await {
        Ok(Ok(fetched)) => fetched,
        Ok(Err(transient)) => Fetched::Failed(transient),
        Err(_) => Fetched::Failed(Transient::Timeout),
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

fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().contains("html"))
}

fn failure(e: &reqwest::Error) -> Transient {
    if e.is_timeout() { Transient::Timeout } else { Transient::Connect(error_chain(e)) }
}

/// Each host's robots.txt as last fetched. One entry per configured host (only those are fetched), each behind
/// an async lock so that one fetch serves the checks waiting for it.
#[derive(Default)]
pub(super) struct RobotsCache(Mutex<HashMap<String, Arc<tokio::sync::Mutex<CachedRobots>>>>);

#[derive(Default)]
pub(super) struct CachedRobots(Option<(Instant, Arc<Robots>)>);

impl RobotsCache {
    pub(super) fn entry(&self, host: &str) -> Arc<tokio::sync::Mutex<CachedRobots>> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(host.to_owned()).or_default().clone()
    }
}

impl CachedRobots {
    pub(super) fn fresh(&self) -> Option<Arc<Robots>> {
        self.0.as_ref().filter(|(until, _)| Instant::now() < *until).map(|(_, r)| r.clone())
    }

    /// Keeps `robots` for 24 h, or a few minutes when it is an `error` (5xx, no answer).
    pub(super) fn keep(&mut self, robots: Arc<Robots>, error: bool) {
        let ttl = if error { ROBOTS_ERROR_TTL } else { ROBOTS_TTL };
        self.0 = Some((Instant::now() + ttl, robots));
    }
}
