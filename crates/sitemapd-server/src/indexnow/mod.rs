//! IndexNow: telling search engines (Bing, Yandex, Naver, Seznam, …) which URLs changed, as they change.
//!
//! Off unless a site has a key (`indexnow_keys`). Then:
//! - the key file: `GET /<key>.txt` answers the key ([`router`]), which proves to the engines that the host is ours;
//! - the write path queues the locs each write created, updated or deleted in the write's own transaction
//!   (`store::outbox`), so nothing committed goes unsent after a crash;
//! - a background task ([`Sender`]) claims the queued locs of each site in batches of at most 10,000, sends each
//!   batch as one `POST` to the endpoint, and settles it by the answer ([`classify`]): sent, dropped, or sent again
//!   after a delay ([`retry_delay`]).
//!
//! What is pure (the request body, the classification of answers, the retry schedule) is here and unit-tested; the
//! task and its HTTP client are in `sender.rs`.

mod sender;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

pub use self::sender::{Sender, SenderOptions, from_config, start};
use crate::backoff::{self, Backoff};
use crate::config::Config;
use crate::domain::{PublicUrl, Sites};
use crate::error::ApiError;
use crate::net::host::{Hosts, RequestSite};
pub use crate::worker::Running;

/// The most URLs one request may carry (the protocol's limit).
pub const MAX_URLS_PER_REQUEST: usize = 10_000;

/// The longest delay before a failed send is tried again, whatever the backoff or a `Retry-After` says.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

/// A site that notifies: where its key file is and what its requests say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub site_id: i64,
    /// The site's name, as logs name it.
    pub site: String,
    pub public_url: PublicUrl,
    pub key: String,
    /// The public URL's host, with its port when it has one: what every loc of the site lies under.
    host: String,
}

impl Target {
    /// `key` must be a valid key ([`crate::config::check_indexnow_key`]): it becomes a route.
    pub fn new(site_id: i64, site: &str, public_url: PublicUrl, key: &str) -> Self {
        let url = url::Url::parse(public_url.as_str()).expect("a public URL is an absolute URL");
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (host, None) => host.unwrap_or_default().to_owned(),
            (None, Some(_)) => String::new(),
        };
        Self { site_id, site: site.to_owned(), public_url, key: key.to_owned(), host }
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// Where the key file is served: `<public URL><key>.txt`. The engines accept the key for URLs under the
    /// directory of its file, which all the site's locs are.
    pub fn key_location(&self) -> String {
        format!("{}{}.txt", self.public_url, self.key)
    }

    /// The path of the key file on this service (a reverse proxy strips the public URL's path prefix).
    pub fn key_path(&self) -> String {
        format!("/{}.txt", self.key)
    }

    /// The JSON body of one request.
    pub fn body<'a>(&'a self, urls: &'a [String]) -> Body<'a> {
        Body { host: &self.host, key: &self.key, key_location: self.key_location(), url_list: urls }
    }
}

/// An IndexNow request body: `{"host", "key", "keyLocation", "urlList"}`.
#[derive(Debug, serde::Serialize)]
pub struct Body<'a> {
    pub host: &'a str,
    pub key: &'a str,
    #[serde(rename = "keyLocation")]
    pub key_location: String,
    #[serde(rename = "urlList")]
    pub url_list: &'a [String],
}

/// The sites that notify: each configured key with its site (id and public URL, as registered by the store).
pub fn targets(config: &Config, sites: &Sites) -> Vec<Target> {
    config
        .indexnow
        .keys
        .iter()
        .filter_map(|(name, key)| {
            sites.by_name(name).map(|site| Target::new(site.id, &site.name, site.public_url.clone(), key))
        })
        .collect()
}

/// The key files, `GET` and `HEAD /<key>.txt`: the key as `text/plain`, for the host of the key's own site only
/// (a key is the proof that a host agreed; another site's host must not vouch for it). Any other `.txt` stays
/// unrouted (404).
pub fn router<S: AsRef<Hosts> + Clone + Send + Sync + 'static>(targets: &[Target]) -> Router<S> {
    let mut keys: BTreeMap<String, (String, Vec<i64>)> = BTreeMap::new();
    for target in targets {
        keys.entry(target.key_path()).or_insert_with(|| (target.key.clone(), Vec::new())).1.push(target.site_id);
    }
    let mut router = Router::new();
    for (path, (key, sites)) in keys {
        router = router.route(
            &path,
            get(move |RequestSite(site): RequestSite| {
                let (key, sites) = (key.clone(), sites.clone());
                async move { key_file(key, sites.contains(&site.id)) }
            }),
        );
    }
    router
}

fn key_file(key: String, ours: bool) -> Result<impl IntoResponse, ApiError> {
    if !ours {
        return Err(ApiError::not_found("no such resource"));
    }
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], key))
}

/// What an answer of the endpoint means for the batch it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 200 OK or 202 Accepted (any 2xx): done.
    Sent,
    /// Refused for a reason that sending again will not fix: dropped, with the reason as the metric names it.
    Dropped(&'static str),
    /// Worth sending again later: for `reason`, after `after` when the endpoint said when (`Retry-After`).
    Retry { reason: &'static str, after: Option<Duration> },
}

/// Classifies the endpoint's answer: its status, and its `Retry-After` header, read on 429 and 503 only (`now`
/// turns a date into a delay).
///
/// IndexNow's answers: 200 and 202 accepted; 400 bad request; 403 key not valid (not found on the host, or not
/// matching the file); 422 URLs that do not belong to the host, or a key that does not match the protocol's
/// schema; 429 too many requests. 5xx are the server's trouble, and any other 4xx is ours and will not change by
/// itself.
pub fn classify(status: StatusCode, retry_after: Option<&HeaderValue>, now: SystemTime) -> Outcome {
    let after = || retry_after.and_then(|v| crate::http_client::retry_after(v, now));
    match status.as_u16() {
        200..=299 => Outcome::Sent,
        400 => Outcome::Dropped("bad_request"),
        403 => Outcome::Dropped("key_not_valid"),
        422 => Outcome::Dropped("unprocessable"),
        429 => Outcome::Retry { reason: "rate_limited", after: after() },
        // A request timeout is the connection's trouble, not the request's.
        408 => Outcome::Retry { reason: "network", after: None },
        503 => Outcome::Retry { reason: "server_error", after: after() },
        _ if status.is_server_error() => Outcome::Retry { reason: "server_error", after: None },
        _ if status.is_client_error() => Outcome::Dropped("client_error"),
        // Redirects are never followed (see `client`): no endpoint got the URLs. The endpoint setting is wrong or
        // the engine moved; the locs wait (bounded by `indexnow_max_attempts`) for the setting to be corrected.
        _ if status.is_redirection() => Outcome::Retry { reason: "redirected", after: None },
        // 1xx: the endpoint is confused; a retry is bounded.
        _ => Outcome::Retry { reason: "unexpected_status", after: None },
    }
}

/// The delay before the `attempt`-th retry of a batch (1 after its first failure): `base` doubled with each failed
/// attempt, at most [`MAX_RETRY_DELAY`], then randomized to between half of that and all of it ("equal jitter":
/// replicas and batches that failed together do not come back together, and the delay never falls below half its
/// step). `unit` is a random number in [0, 1). A `Retry-After` from the endpoint (`after`) replaces the backoff,
/// held between `base` and [`MAX_RETRY_DELAY`] (a `Retry-After: 0` is no reason for a hot loop).
pub fn retry_delay(attempt: u32, base: Duration, after: Option<Duration>, unit: f64) -> Duration {
    if let Some(after) = after {
        return after.clamp(base.min(MAX_RETRY_DELAY), MAX_RETRY_DELAY);
    }
    let step = Backoff::new(base, MAX_RETRY_DELAY).after(attempt);
    backoff::spread(step, 0.5, unit)
}

/// The locs of a batch that lie under `public_url` (sent), and those that do not (dropped: the endpoint would
/// refuse the whole request with 422 for one of them). A loc queued before the public URL was changed is the one
/// way to meet the second kind.
pub fn split_foreign(public_url: &PublicUrl, locs: Vec<String>) -> (Vec<String>, Vec<String>) {
    locs.into_iter().partition(|loc| public_url.contains(loc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(public: &str) -> Target {
        Target::new(1, "default", PublicUrl::parse(public).unwrap(), "0123456789abcdef")
    }

    #[test]
    fn the_body_names_the_host_the_key_and_its_file() {
        let t = target("https://www.example.com");
        let urls = vec!["https://www.example.com/a".to_owned(), "https://www.example.com/b".to_owned()];
        let body = serde_json::to_value(t.body(&urls)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "host": "www.example.com",
                "key": "0123456789abcdef",
                "keyLocation": "https://www.example.com/0123456789abcdef.txt",
                "urlList": ["https://www.example.com/a", "https://www.example.com/b"],
            })
        );
        assert_eq!(t.key_path(), "/0123456789abcdef.txt");
        // A port and a path prefix: the host keeps its port, the key file lies under the prefix.
        let t = target("http://localhost:8080/shop");
        assert_eq!(t.host(), "localhost:8080");
        assert_eq!(t.key_location(), "http://localhost:8080/shop/0123456789abcdef.txt");
        // The default port is not written.
        assert_eq!(target("https://example.com:443/").host(), "example.com");
    }

    #[test]
    fn answers_are_classified() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let c = |status: u16| classify(StatusCode::from_u16(status).unwrap(), None, now);
        assert_eq!(c(200), Outcome::Sent);
        assert_eq!(c(202), Outcome::Sent);
        assert_eq!(c(400), Outcome::Dropped("bad_request"));
        assert_eq!(c(403), Outcome::Dropped("key_not_valid"));
        assert_eq!(c(422), Outcome::Dropped("unprocessable"));
        assert_eq!(c(404), Outcome::Dropped("client_error"));
        assert_eq!(c(413), Outcome::Dropped("client_error"));
        assert_eq!(c(429), Outcome::Retry { reason: "rate_limited", after: None });
        assert_eq!(c(408), Outcome::Retry { reason: "network", after: None });
        for status in [500, 502, 503, 504] {
            assert_eq!(c(status), Outcome::Retry { reason: "server_error", after: None }, "{status}");
        }
        for status in [300, 301, 302, 303, 307, 308] {
            assert_eq!(c(status), Outcome::Retry { reason: "redirected", after: None }, "{status}");
        }
        assert_eq!(c(101), Outcome::Retry { reason: "unexpected_status", after: None });

        // Retry-After, in seconds or as a date, on 429 and 503; ignored elsewhere and when unreadable.
        let secs = HeaderValue::from_static("120");
        let date = HeaderValue::from_str(&httpdate::fmt_http_date(now + Duration::from_secs(30))).unwrap();
        let past = HeaderValue::from_str(&httpdate::fmt_http_date(now - Duration::from_secs(30))).unwrap();
        let junk = HeaderValue::from_static("soon");
        let with = |status: u16, v: &HeaderValue| classify(StatusCode::from_u16(status).unwrap(), Some(v), now);
        let after = |o: Outcome| match o {
            Outcome::Retry { after, .. } => after,
            other => panic!("{other:?}"),
        };
        assert_eq!(after(with(429, &secs)), Some(Duration::from_secs(120)));
        assert_eq!(after(with(503, &date)), Some(Duration::from_secs(30)));
        assert_eq!(after(with(429, &past)), Some(Duration::ZERO));
        assert_eq!(after(with(429, &junk)), None);
        assert_eq!(after(with(500, &secs)), None);
        assert_eq!(with(200, &secs), Outcome::Sent);
    }

    #[test]
    fn the_retry_delay_doubles_with_jitter_within_bounds() {
        let base = Duration::from_secs(10);
        for attempt in 1..=60 {
            let step = if attempt > 10 { MAX_RETRY_DELAY } else { (base * (1 << (attempt - 1))).min(MAX_RETRY_DELAY) };
            let low = retry_delay(attempt, base, None, 0.0);
            let high = retry_delay(attempt, base, None, 0.999_999);
            assert_eq!(low, step / 2, "attempt {attempt}");
            assert!(high <= step && high > step.mul_f64(0.999), "attempt {attempt}: {high:?} of {step:?}");
            for unit in [0.1, 0.5, 0.9] {
                let d = retry_delay(attempt, base, None, unit);
                assert!(d >= step / 2 && d <= step, "attempt {attempt}, {unit}: {d:?}");
            }
        }
        assert_eq!(retry_delay(1, base, None, 0.0), Duration::from_secs(5));
        assert_eq!(retry_delay(3, base, None, 0.0), Duration::from_secs(20));
        // Never more than the maximum, even for absurd counts and bases, and never zero.
        let d = retry_delay(u32::MAX, base, None, 0.999);
        assert!(d <= MAX_RETRY_DELAY && d >= MAX_RETRY_DELAY / 2, "{d:?}");
        assert!(retry_delay(2, Duration::from_secs(86_400), None, 0.999) <= MAX_RETRY_DELAY);
        assert!(retry_delay(1, Duration::from_millis(10), None, 0.0) > Duration::ZERO);
        // Retry-After replaces the backoff, bounded by the base below and the maximum above.
        assert_eq!(retry_delay(1, base, Some(Duration::from_secs(120)), 0.0), Duration::from_secs(120));
        assert_eq!(retry_delay(9, base, Some(Duration::ZERO), 0.5), base);
        assert_eq!(retry_delay(1, base, Some(Duration::from_secs(86_400)), 0.5), MAX_RETRY_DELAY);
    }

    #[test]
    fn targets_carry_their_site_name() {
        let vars = [
            ("SITEMAPD_SITES", "www=https://www.example.com/, shop=https://shop.example.com/"),
            ("SITEMAPD_INDEXNOW_KEYS", "shop=0123456789abcdef"),
        ];
        let config =
            Config::load_from(None, |k| vars.iter().find(|(v, _)| *v == k).map(|(_, x)| (*x).to_owned())).unwrap();
        let sites = Sites::new(
            config
                .site_specs()
                .into_iter()
                .enumerate()
                .map(|(i, s)| crate::domain::Site::new(i as i64 + 7, s))
                .collect(),
        );
        let targets = targets(&config, &sites);
        assert_eq!(targets.len(), 1);
        assert_eq!((targets[0].site_id, targets[0].site.as_str(), targets[0].host()), (8, "shop", "shop.example.com"));
    }

    #[test]
    fn locs_outside_the_public_url_are_split_off() {
        let public = PublicUrl::parse("https://www.example.com/shop/").unwrap();
        let locs = ["https://www.example.com/shop/a", "https://old.example.com/shop/b", "https://www.example.com/x"];
        let (ours, foreign) = split_foreign(&public, locs.iter().map(|l| (*l).to_owned()).collect());
        assert_eq!(ours, ["https://www.example.com/shop/a"]);
        assert_eq!(foreign, ["https://old.example.com/shop/b", "https://www.example.com/x"]);
    }
}
