//! Observability: the per-request metrics middleware (requests, latency, body bytes as they stream), the request
//! span, the access-log policy and the log output. The metric names, the recorder and the recording functions are
//! the leaf crate `sitemapd-metrics`, re-exported here; `GET /metrics` is [`scrape`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use http_body::{Frame, SizeHint};
use metrics::{Counter, Histogram, counter, histogram};
use tracing::Span;

pub use sitemapd_metrics::*;

pub mod scrape;

/// Counts each request by matched route (never the raw path, so the label set stays bounded), method and status;
/// times it to the response head (`next` answers it); counts its body bytes as they are sent, in the current span
/// (the request's).
pub async fn track_requests<F>(access_log: AccessLog, request: Request, next: impl FnOnce(Request) -> F) -> Response
where
    F: std::future::Future<Output = Response>,
{
    // The matched route is an `Arc<str>`: held, not copied.
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let may_change = !matches!(*request.method(), Method::GET | Method::HEAD);
    let method = method_label(request.method());
    // Without a span of its own (a routine read at INFO), an answer logged at INFO names the request itself.
    let unspanned = Span::current().is_disabled().then(|| request.uri().clone());
    let start = Instant::now();
    let response = next(request).await;
    let status = response.status();
    let latency = start.elapsed();
    let route = matched.as_ref().map_or("unmatched", MatchedPath::as_str);
    match unspanned {
        Some(uri) if logged_at_info(access_log, may_change, status.as_u16(), latency) => {
            let (status, latency_ms) = (status.as_u16(), latency_ms(latency));
            let uri = loggable_target(&uri);
            tracing::info!(method, route, uri, status, latency_ms, "answered");
        }
        _ => log_answer(access_log, may_change, status, latency),
    }
    let handles = RequestHandles::of(route, method, status);
    handles.requests.increment(1);
    handles.duration.record(start.elapsed().as_secs_f64());
    if let Some(not_modified) = &handles.not_modified {
        not_modified.increment(1);
    }
    let (bytes, span) = (handles.bytes.clone(), Span::current());
    response.map(|inner| Body::new(CountedBody { inner, bytes, span }))
}

/// The request metrics of one route, method and status. Made once per thread and kept: a lookup in the recorder
/// makes the labels' strings and hashes them, a cost a 304 should not pay on every request (BENCHMARKS.md).
/// The recorder hands out the same handle for the same labels, so a kept one counts where a new one would.
struct RequestHandles {
    requests: Counter,
    duration: Histogram,
    not_modified: Option<Counter>,
    bytes: Counter,
}

/// Routes by name, then (method, status): a few dozen entries in all, since every label is bounded.
type HandleMap = HashMap<Box<str>, HashMap<(&'static str, u16), Rc<RequestHandles>>>;

thread_local! {
    static REQUEST_HANDLES: RefCell<HandleMap> = RefCell::new(HashMap::new());
}

impl RequestHandles {
    fn of(route: &str, method: &'static str, status: StatusCode) -> Rc<Self> {
        REQUEST_HANDLES.with_borrow_mut(|routes| {
            if !routes.contains_key(route) {
                routes.insert(route.into(), HashMap::new());
            }
            let by_answer = routes.get_mut(route).expect("inserted");
            Rc::clone(
                by_answer.entry((method, status.as_u16())).or_insert_with(|| Rc::new(Self::new(route, method, status))),
            )
        })
    }

    fn new(route: &str, method: &'static str, status: StatusCode) -> Self {
        let route = route.to_owned();
        Self {
            requests: counter!(HTTP_REQUESTS, "route" => route.clone(), "method" => method, "status" => status.as_u16().to_string()),
            duration: histogram!(HTTP_DURATION, "route" => route.clone(), "method" => method),
            not_modified: (status == StatusCode::NOT_MODIFIED)
                .then(|| counter!(HTTP_NOT_MODIFIED, "route" => route.clone())),
            bytes: counter!(HTTP_BODY_BYTES, "route" => route),
        }
    }
}

/// The matched route, or `unmatched` for requests no route took.
pub fn route_label(request: &Request) -> &str {
    request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str)
}

/// The standard methods by name; anything else as `other`, so that clients cannot grow the label set.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// A response body that adds each data frame's length to a counter as it passes, and is read in the request's
/// span (what its stream logs names the request).
struct CountedBody {
    inner: Body,
    bytes: Counter,
    span: Span,
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let _entered = this.span.enter();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            this.bytes.increment(data.len() as u64);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The span of one request: method, matched route, and the target as [`loggable_target`] shows it. At INFO for a
/// request that may change something, for the API, and for every request with [`AccessLog::All`]; else at DEBUG
/// for a read of the other routes (a crawler's
/// sitemap fetch, a probe, a scrape): at the default filter such a span is never built, so the most frequent
/// answers do not pay for it (BENCHMARKS.md). Events of such a request still name what they concern, and its
/// `answered` line, when it is logged at INFO, carries the span's fields itself ([`track_requests`]).
pub fn request_span(request: &Request, access_log: AccessLog) -> Span {
    let route = route_label(request);
    if access_log != AccessLog::All && routine_read(request.method(), route) {
        tracing::debug_span!(
            "request",
            method = %request.method(),
            route,
            uri = %loggable_target(request.uri()),
        )
    } else {
        tracing::info_span!(
            "request",
            method = %request.method(),
            route,
            uri = %loggable_target(request.uri()),
        )
    }
}

/// A GET or HEAD of any route but the API's.
fn routine_read(method: &Method, route: &str) -> bool {
    matches!(*method, Method::GET | Method::HEAD) && !route.starts_with("/api/")
}

/// Query parameters whose values are logged: the API's own (`loc`, `limit`, `after`), none of them a secret.
const LOGGED_PARAMETERS: &[&str] = &["loc", "limit", "after"];
/// Parameters that carry credentials when a client puts them in a URL: logged by name, value `REDACTED`.
const SECRET_PARAMETERS: &[&str] = &["access_token", "token", "key", "api_key", "apikey", "password", "secret", "auth"];

/// The request target as logged: the path, and of the query only the API's own parameters. A known credential
/// parameter (`?access_token=…`) shows as `access_token=REDACTED`, any other parameter as `REDACTED`. Never the
/// authority of an absolute-form target (`http://user:password@host/…`).
pub fn loggable_target(uri: &Uri) -> String {
    let mut shown = uri.path().to_owned();
    let Some(query) = uri.query() else { return shown };
    shown.push('?');
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            shown.push('&');
        }
        let raw_key = pair.split_once('=').map_or(pair, |(k, _)| k);
        let key: String =
            url::form_urlencoded::parse(raw_key.as_bytes()).map(|(k, _)| k.to_ascii_lowercase()).collect();
        if LOGGED_PARAMETERS.contains(&key.as_str()) {
            shown.push_str(pair);
        } else if SECRET_PARAMETERS.contains(&key.as_str()) {
            shown.push_str(raw_key);
            shown.push_str("=REDACTED");
        } else {
            shown.push_str("REDACTED");
        }
    }
    shown
}

/// Which requests' `answered` line is logged at INFO; the others' at DEBUG (`RUST_LOG=sitemapd=debug` shows them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessLog {
    /// Every request.
    All,
    /// Requests that may change something (any method but GET and HEAD), answers of status 400 or more, and
    /// answers slower than [`SLOW_ANSWER`]: not a crawler's routine 200s and 304s, which the
    /// request metrics count.
    WritesAndErrors,
}

/// An answer this slow is logged at INFO whatever [`AccessLog`] says.
pub const SLOW_ANSWER: Duration = Duration::from_secs(1);

/// Logs the one `answered` line of a request (in its span): its status, and its latency to the response head in
/// milliseconds (microsecond precision: `latency_ms=97.115`); at INFO when `access_log` says so
/// ([`logged_at_info`]), else at DEBUG.
fn log_answer(access_log: AccessLog, may_change: bool, status: StatusCode, latency: Duration) {
    let (status, latency_ms) = (status.as_u16(), latency_ms(latency));
    if logged_at_info(access_log, may_change, status, latency) {
        tracing::info!(status, latency_ms, "answered");
    } else {
        tracing::debug!(status, latency_ms, "answered");
    }
}

/// Whether a request's `answered` line is logged at INFO: every request with [`AccessLog::All`]; else a request
/// that may change something, an answer of status 400 or more, or one slower than [`SLOW_ANSWER`].
pub fn logged_at_info(access_log: AccessLog, may_change: bool, status: u16, latency: Duration) -> bool {
    access_log == AccessLog::All || may_change || status >= 400 || latency >= SLOW_ANSWER
}

/// Milliseconds with three decimals, so that the number prints short (`97.115`, not `97.11499999999999`).
fn latency_ms(latency: Duration) -> f64 {
    // Exact below 2^53 µs (285 years); the division then rounds to the nearest double, which prints as 3 decimals.
    latency.as_micros() as f64 / 1000.0
}

/// Where the log goes: standard output, but a line that cannot be written is dropped and counted
/// (`sitemapd_log_writes_lost_total`) instead of reported. When the reader of standard output goes away (a log
/// collector restarting, a closed pipe), tracing-subscriber would report each failed line on standard error; with
/// standard error closed too, that report panics, and the panic hook's own log line panics again: the process
/// aborted. A sitemap server goes on serving without its log.
pub struct LogOutput;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogOutput {
    type Writer = LossyStdout;

    fn make_writer(&'a self) -> Self::Writer {
        LossyStdout(std::io::stdout())
    }
}

/// Standard output that never fails a write (see [`LogOutput`]).
pub struct LossyStdout(std::io::Stdout);

impl std::io::Write for LossyStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.write_all(buf).is_err() {
            sitemapd_metrics::log_write_lost();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

/// Sends every panic's text through `tracing` (one `ERROR` event, JSON under `SITEMAPD_LOG_FORMAT=json`) instead
/// of the default hook's plain line on stderr. A panic in a request handler is still answered 500 by
/// `CatchPanicLayer`; this only decides where its text goes.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a panic without a message)");
        let location = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column())).unwrap_or_default();
        let thread = std::thread::current();
        tracing::error!(panic = message, location, thread = thread.name().unwrap_or("unnamed"), "a thread panicked");
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logged_target_keeps_the_api_parameters_and_hides_the_rest() {
        let shown = |uri: &str| loggable_target(&uri.parse().unwrap());
        assert_eq!(shown("/sitemap-1.xml"), "/sitemap-1.xml");
        assert_eq!(shown("/api/v1/urls?limit=5&after=7"), "/api/v1/urls?limit=5&after=7");
        assert_eq!(shown("/api/v1/urls?loc=https%3A%2F%2Fx.test%2Fa"), "/api/v1/urls?loc=https%3A%2F%2Fx.test%2Fa");
        assert_eq!(shown("/api/v1/urls?access_token=s3cret&limit=2"), "/api/v1/urls?access_token=REDACTED&limit=2");
        assert_eq!(shown("/api/v1/urls?Access%5FToken=s3cret"), "/api/v1/urls?Access%5FToken=REDACTED");
        assert_eq!(shown("/api/v1/urls?s3cret&x=s3cret&=s3cret"), "/api/v1/urls?REDACTED&REDACTED&REDACTED");
        assert_eq!(shown("http://u:s3cret@host/api/v1/urls?token=s3cret"), "/api/v1/urls?token=REDACTED");
    }

    #[test]
    fn a_crawlers_routine_answers_are_logged_at_debug_unless_all_are_asked_for() {
        let fast = Duration::from_millis(3);
        let w = AccessLog::WritesAndErrors;
        assert!(!logged_at_info(w, false, 200, fast), "a GET's 200");
        assert!(!logged_at_info(w, false, 304, fast), "a 304");
        assert!(logged_at_info(w, true, 200, fast), "a write");
        assert!(logged_at_info(w, false, 404, fast) && logged_at_info(w, false, 503, fast), "an error");
        assert!(logged_at_info(w, false, 200, SLOW_ANSWER), "a slow answer");
        assert!(!logged_at_info(w, false, 200, SLOW_ANSWER - Duration::from_micros(1)));
        assert!(logged_at_info(AccessLog::All, false, 304, fast));
    }

    #[test]
    fn latency_prints_in_milliseconds_with_three_decimals() {
        assert_eq!(latency_ms(Duration::from_nanos(97_114_999)).to_string(), "97.114");
        assert_eq!(latency_ms(Duration::from_micros(97_115)).to_string(), "97.115");
        assert_eq!(latency_ms(Duration::from_micros(1)).to_string(), "0.001");
        assert_eq!(latency_ms(Duration::from_secs(12)).to_string(), "12000");
    }
}
