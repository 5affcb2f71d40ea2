//! WebSub publishing: telling each configured hub (`feeds.hubs`) that a site's feed changed, so that the hub fetches
//! it and pushes it on to its subscribers (W3C WebSub §7: `POST hub.mode=publish&hub.url=<feed URL>`, form-encoded).
//!
//! On only with feeds on and a hub for the site. Then a background worker ([`Publisher`]):
//! - reads each site's change counter every `websub_poll` (one primary-key read), and when it moved (and once at
//!   start) takes each of the site's feeds' current digest ([`FeedDigests`]: the digest the feed's route serves);
//! - a feed is owed to a hub while its digest differs from the one that hub last accepted (the store's
//!   `HubOutbox` rows): nothing is queued by a write, and a write never waits for a hub. What is owed is derived
//!   from the database, so it survives `kill -9` and is sent after the restart;
//! - an owed notification whose row is due is claimed (one conditional update: of two replicas on one Postgres one
//!   wins), posted, and settled by the answer ([`classify`]): delivered, after which the row waits
//!   `feeds.hub_interval` (the debounce: a burst of writes yields one notification per interval, of the latest
//!   state), or failed, after which it waits [`retry_delay`].
//!
//! What is pure (the request body, the classification of answers, the retry schedule, the hub's metric label) is
//! here and unit-tested; the worker and its HTTP client are in `publisher.rs`.

mod publisher;

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use reqwest::StatusCode;
use reqwest::header::HeaderValue;

pub use self::publisher::{PARALLEL, Publisher, PublisherOptions, Target, from_config, targets};
use crate::backoff::{self, Backoff};
use crate::sitemap::Serving;

/// The longest wait before a failed notification is sent again, whatever the backoff or a `Retry-After` says; a
/// hub that refuses (a 4xx) waits half of it to all of it.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

/// One feed of a site as the publisher sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedState {
    /// Its path under the site's public URL (`feed.atom`, `feed-<section>.atom`): the store's key for it.
    pub path: String,
    /// Its public URL: what the hub is told to fetch (`hub.url`).
    pub public_url: String,
    /// The digest of its current content (its ETag's): what the hub was last told of is compared with it.
    pub digest: String,
}

/// Where the publisher takes a site's feeds from: the feed module's (the same bytes the route serves), or a
/// stand-in in a test.
#[async_trait]
pub trait FeedDigests: Send + Sync + 'static {
    /// `site`'s change counter: when it has not moved, neither has any of its feeds.
    async fn changes(&self, site: i64) -> anyhow::Result<i64>;
    /// `site`'s feeds with their current digests.
    async fn feeds(&self, site: i64) -> anyhow::Result<Vec<FeedState>>;
}

/// The feeds as their routes serve them ([`crate::feed::feeds`], [`crate::feed::current`]), over the serving state.
pub struct Served<S>(pub S);

#[async_trait]
impl<S: Serving> FeedDigests for Served<S> {
    async fn changes(&self, site: i64) -> anyhow::Result<i64> {
        Ok(self.0.reads().changes(site).await?)
    }

    async fn feeds(&self, site: i64) -> anyhow::Result<Vec<FeedState>> {
        // The page table checked now, not as last read (`cache.state_ttl`): the digests are then those of the
        // counter the publisher just read, or of a later one, never of an older table.
        self.0.directories(site).get_current(self.0.reads()).await?;
        let mut feeds = Vec::new();
        for feed in crate::feed::feeds(&self.0, site).await? {
            let body = crate::feed::current(&self.0, &feed).await?;
            feeds.push(FeedState { path: feed.path, public_url: feed.public_url, digest: body.digest });
        }
        Ok(feeds)
    }
}

/// What a hub's answer to a notification means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Any 2xx (WebSub says 2xx, hubs answer 204 or 202): delivered.
    Delivered,
    /// Worth sending again after the backoff, or after `after` when the hub said when (`Retry-After`); `reason` as
    /// the metric's `outcome` names it.
    Retry { reason: &'static str, after: Option<Duration> },
    /// A 4xx but 408 and 429: the hub refused this publisher or this feed, which sending again soon will not change;
    /// sent again at the slow end of the backoff ([`retry_delay`]).
    Refused,
}

impl Outcome {
    /// The metric's `outcome` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retry { reason, .. } => reason,
            Self::Refused => "refused",
        }
    }
}

/// Classifies a hub's answer: its status, and its `Retry-After` header, read on 429 and 503 only (`now` turns a
/// date into a delay). A 3xx is a failure: the client follows no redirect (a 302 would turn the `POST` into a
/// bodiless `GET`, and a hub that moved is a setting to correct), and it is retried on the backoff.
pub fn classify(status: StatusCode, retry_after: Option<&HeaderValue>, now: SystemTime) -> Outcome {
    let after = || retry_after.and_then(|v| crate::http_client::retry_after(v, now));
    match status.as_u16() {
        200..=299 => Outcome::Delivered,
        429 => Outcome::Retry { reason: "rate_limited", after: after() },
        408 => Outcome::Retry { reason: "timeout", after: None },
        503 => Outcome::Retry { reason: "server_error", after: after() },
        _ if status.is_server_error() => Outcome::Retry { reason: "server_error", after: None },
        _ if status.is_client_error() => Outcome::Refused,
        _ if status.is_redirection() => Outcome::Retry { reason: "redirected", after: None },
        _ => Outcome::Retry { reason: "unexpected_status", after: None },
    }
}

/// The wait before a failed notification is sent again, its `attempt`-th failure in a row (1 after the first):
/// `interval` (`feeds.hub_interval`) doubled with each failure up to [`MAX_RETRY_DELAY`], spread over half of it
/// to all of it (replicas and feeds that failed together do not come back together), and never below `interval`,
/// so that a failing hub is not asked more often than a working one. A `Retry-After` replaces the backoff, held
/// between `interval` and [`MAX_RETRY_DELAY`]; a refusal ([`Outcome::Refused`]) waits the backoff's slow end.
/// `unit` is a random number in [0, 1).
pub fn retry_delay(outcome: Outcome, attempt: u32, interval: Duration, unit: f64) -> Duration {
    let floor = interval.min(MAX_RETRY_DELAY);
    let step = match outcome {
        Outcome::Retry { after: Some(after), .. } => return after.clamp(floor, MAX_RETRY_DELAY),
        Outcome::Refused => MAX_RETRY_DELAY,
        _ => Backoff::new(floor, MAX_RETRY_DELAY).after(attempt),
    };
    backoff::spread(step, 0.5, unit).max(floor)
}

/// A hub as the metric labels it: its host, and its port when the URL names one; never its user name, password,
/// path or query.
pub fn hub_label(hub: &url::Url) -> String {
    match (hub.host_str(), hub.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => "unknown".to_owned(),
    }
}

/// The body of a publish notification: `hub.mode=publish&hub.url=<feed URL>`, form-encoded.
pub fn publish_body(feed_url: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("hub.mode", "publish")
        .append_pair("hub.url", feed_url)
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap()
    }

    #[test]
    fn answers_are_classified() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let ten = HeaderValue::from_static("10");
        for code in [200, 202, 204] {
            assert_eq!(classify(status(code), None, now), Outcome::Delivered, "{code}");
        }
        let retry = |reason, after| Outcome::Retry { reason, after };
        assert_eq!(classify(status(429), Some(&ten), now), retry("rate_limited", Some(Duration::from_secs(10))));
        assert_eq!(classify(status(503), Some(&ten), now), retry("server_error", Some(Duration::from_secs(10))));
        assert_eq!(classify(status(500), Some(&ten), now), retry("server_error", None), "read on 429 and 503 only");
        assert_eq!(classify(status(502), None, now), retry("server_error", None));
        assert_eq!(classify(status(408), None, now), retry("timeout", None));
        for code in [301, 302, 303, 307, 308] {
            assert_eq!(classify(status(code), None, now), retry("redirected", None), "{code}");
        }
        for code in [400, 401, 403, 404, 410, 422] {
            assert_eq!(classify(status(code), None, now), Outcome::Refused, "{code}");
        }
        assert_eq!(classify(status(101), None, now), retry("unexpected_status", None));
        let date = HeaderValue::from_str(&httpdate::fmt_http_date(now + Duration::from_secs(90))).unwrap();
        assert_eq!(classify(status(429), Some(&date), now), retry("rate_limited", Some(Duration::from_secs(90))));
        let junk = HeaderValue::from_static("soon");
        assert_eq!(classify(status(429), Some(&junk), now), retry("rate_limited", None));
        for o in [Outcome::Delivered, Outcome::Refused, retry("network", None)] {
            assert!(crate::telemetry::WEBSUB_OUTCOMES.contains(&o.label()), "{o:?}");
        }
    }

    #[test]
    fn retries_back_off_from_the_interval_to_an_hour() {
        let minute = Duration::from_secs(60);
        let failed = Outcome::Retry { reason: "server_error", after: None };
        // The top of each step (unit → 1), and its bottom (unit 0: half of it, but never below the interval).
        let top: Vec<u64> = (1..=8).map(|n| retry_delay(failed, n, minute, 0.999_999_9).as_secs()).collect();
        assert_eq!(top, [60, 119, 239, 479, 959, 1919, 3599, 3599]);
        let bottom: Vec<u64> = (1..=8).map(|n| retry_delay(failed, n, minute, 0.0).as_secs()).collect();
        assert_eq!(bottom, [60, 60, 120, 240, 480, 960, 1800, 1800]);
        // A Retry-After within the bounds is obeyed; outside them, held to them.
        let after = |s| Outcome::Retry { reason: "rate_limited", after: Some(Duration::from_secs(s)) };
        assert_eq!(retry_delay(after(300), 1, minute, 0.5), Duration::from_secs(300));
        assert_eq!(retry_delay(after(0), 1, minute, 0.5), minute, "no hot loop");
        assert_eq!(retry_delay(after(86_400), 1, minute, 0.5), MAX_RETRY_DELAY);
        // A refusal waits the slow end from the first time.
        assert_eq!(retry_delay(Outcome::Refused, 1, minute, 0.0), MAX_RETRY_DELAY / 2);
        assert_eq!(retry_delay(Outcome::Refused, 1, Duration::from_secs(1), 0.5), MAX_RETRY_DELAY * 3 / 4);
        // With the longest interval every wait is an hour.
        assert_eq!(retry_delay(failed, 1, MAX_RETRY_DELAY, 0.0), MAX_RETRY_DELAY);
    }

    #[test]
    fn the_hub_label_is_its_host_alone() {
        let label = |raw: &str| hub_label(&url::Url::parse(raw).unwrap());
        assert_eq!(label("https://pubsubhubbub.appspot.com/"), "pubsubhubbub.appspot.com");
        assert_eq!(label("https://user:secret@hub.example/publish?token=abc#x"), "hub.example");
        assert_eq!(label("http://127.0.0.1:8099/hub"), "127.0.0.1:8099");
        assert_eq!(label("https://hub.example:443/"), "hub.example", "the scheme's own port is not named");
    }

    #[test]
    fn the_body_is_form_encoded() {
        assert_eq!(
            publish_body("https://www.example.com/feed-a b&c.atom?x=1"),
            "hub.mode=publish&hub.url=https%3A%2F%2Fwww.example.com%2Ffeed-a+b%26c.atom%3Fx%3D1"
        );
    }
}
