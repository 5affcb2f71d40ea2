//! URL health: what a check of a stored URL found, and what the policy does with it (pure).
//!
//! The checker (`crate::health` in the server) fetches a site's stored URLs and hands each answer to [`judge`]
//! (or a failure to [`Finding::transient`]); the store keeps the [`Finding`] and, under [`Policy::Exclude`],
//! leaves a URL with a definite problem ([`Problems`]) out of its page. A transient failure (timeout, 5xx, 429, a
//! broken connection) is never a definite problem: it is retried with backoff ([`backoff`]) and reported as such.

pub mod brake;
pub mod head;
pub mod headers;
mod judge;
pub mod robots;
pub mod same_url;
pub mod sniff;

use std::time::Duration;

pub use judge::{judge, judge_at};

/// A definite problem: what a search engine refuses a submitted URL for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// 404.
    NotFound,
    /// 410.
    Gone,
    /// Any other 4xx but 429 (401, 403, 451, …).
    ClientError,
    /// A 3xx: the URL is not the page (its target is recorded, never followed).
    Redirect,
    /// `noindex` (or `none`) for all robots or for Googlebot, in `X-Robots-Tag` or `<meta name="robots|googlebot">`.
    Noindex,
    /// A `rel=canonical` (in `Link` or `<link>`) that names another URL.
    Canonical,
    /// The site's `robots.txt` disallows the URL for Googlebot (RFC 9309).
    Disallowed,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::NotFound,
        Kind::Gone,
        Kind::ClientError,
        Kind::Redirect,
        Kind::Noindex,
        Kind::Canonical,
        Kind::Disallowed,
    ];

    /// The stable name: in the API (`?problem=`), the metrics' `kind` label and the view.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NotFound => "not_found",
            Kind::Gone => "gone",
            Kind::ClientError => "client_error",
            Kind::Redirect => "redirect",
            Kind::Noindex => "noindex",
            Kind::Canonical => "canonical",
            Kind::Disallowed => "disallowed",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its bit in [`Problems`] (as stored: `url_checks.problems`). Never renumbered.
    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of [`Kind`]s: one check can find several (a `noindex` page that robots.txt also disallows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Problems(u32);

impl Problems {
    pub const NONE: Problems = Problems(0);

    /// From the stored bits; bits no [`Kind`] has (a newer version's) are dropped.
    pub fn from_bits(bits: u32) -> Self {
        let known = Kind::ALL.iter().fold(0, |all, k| all | k.bit());
        Problems(bits & known)
    }
    pub fn bits(self) -> u32 {
        self.0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn contains(self, kind: Kind) -> bool {
        self.0 & kind.bit() != 0
    }
    pub fn insert(&mut self, kind: Kind) {
        self.0 |= kind.bit();
    }
    pub fn iter(self) -> impl Iterator<Item = Kind> {
        Kind::ALL.into_iter().filter(move |k| self.contains(*k))
    }
}

impl FromIterator<Kind> for Problems {
    fn from_iter<I: IntoIterator<Item = Kind>>(iter: I) -> Self {
        let mut p = Problems::NONE;
        iter.into_iter().for_each(|k| p.insert(k));
        p
    }
}

/// Why a check reached no definite answer: retried, reported, never a reason to exclude.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transient {
    /// No answer within the checker's timeout.
    Timeout,
    /// The connection failed (refused, reset, DNS, TLS): the detail as the client said it.
    Connect(String),
    /// A 5xx answer.
    Server(u16),
    /// 429 Too Many Requests.
    RateLimited,
}

impl Transient {
    /// The stable name (`url_checks.transient`, the API, the metrics' `outcome` label).
    pub fn name(&self) -> &'static str {
        match self {
            Transient::Timeout => "timeout",
            Transient::Connect(_) => "connect",
            Transient::Server(_) => "server_error",
            Transient::RateLimited => "rate_limited",
        }
    }
}

/// What one check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finding {
    /// The answer's status; `None` when there was none (a transient failure before the head, or a URL not
    /// fetched because `robots.txt` disallows it: [`Finding::disallowed`]).
    pub status: Option<u16>,
    /// The definite problems (empty: healthy, or transient).
    pub problems: Problems,
    /// A redirect's target, absolute (resolved against the URL).
    pub location: Option<String>,
    /// The canonical URL the page names when it is another URL, absolute.
    pub canonical: Option<String>,
    /// Where `noindex` was found: `X-Robots-Tag`, `X-Robots-Tag: googlebot`, `meta robots`, `meta googlebot`.
    pub noindex_by: Option<String>,
    /// Set when the check reached no definite answer; the other fields are then those of no answer.
    pub transient: Option<Transient>,
    /// `Retry-After` of a 429 or 503 (or of any answer that sent one), as a wait from the answer.
    pub retry_after: Option<Duration>,
    /// The answer's validators, sent back on the next check (`If-None-Match`, `If-Modified-Since`).
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

impl Finding {
    /// A check that failed without a definite answer.
    pub fn transient(why: Transient, retry_after: Option<Duration>) -> Self {
        Finding { transient: Some(why), retry_after, ..Finding::default() }
    }
    /// A URL the site's `robots.txt` disallows for Googlebot, found without fetching it (the checker asks
    /// [`robots::Robots::allows`] first): a definite answer with no status.
    pub fn disallowed() -> Self {
        Finding { problems: Problems::from_iter([Kind::Disallowed]), ..Finding::default() }
    }
    /// Whether the check reached a definite answer (healthy or not).
    pub fn is_definite(&self) -> bool {
        self.transient.is_none()
    }
}

/// What a site does with what its checks find.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Problems are reported; the sitemaps never change for them (the default once checking is on).
    #[default]
    Report,
    /// A URL with a definite problem is left out of its page until a check finds it healthy again.
    Exclude,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Report => "report",
            Policy::Exclude => "exclude",
        }
    }
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "report" => Some(Policy::Report),
            "exclude" => Some(Policy::Exclude),
            _ => None,
        }
    }
}

/// The first wait after a transient failure; each further failure doubles it.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(60);
/// The longest wait between tries of one URL: a URL that keeps failing is still tried four times a day.
pub const BACKOFF_CAP: Duration = Duration::from_secs(6 * 60 * 60);

/// The wait before the next try of a URL after `attempts` consecutive transient failures: 1 minute, doubling,
/// at most [`BACKOFF_CAP`] (0 counts as 1). The checker adds its jitter and takes the longer of this and the
/// answer's `Retry-After`.
pub fn backoff(attempts: u32) -> Duration {
    crate::backoff::Backoff::new(BACKOFF_FIRST, BACKOFF_CAP).after(attempts)
}

/// The checker's `User-Agent`: names sitemapd, its version and where a site's owner reads what it does.
pub fn user_agent(version: &str) -> String {
    format!("sitemapd/{version} (URL health check; +https://github.com/sitemapd/sitemapd/blob/main/docs/health.md)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: consecutive failures, the wait in minutes.
    #[test]
    fn backoff_doubles_from_a_minute_to_six_hours() {
        let cases: &[(u32, u64)] = &[
            (0, 1),
            (1, 1),
            (2, 2),
            (3, 4),
            (4, 8),
            (5, 16),
            (6, 32),
            (7, 64),
            (8, 128),
            (9, 256),
            (10, 360),
            (11, 360),
            (40, 360),
            (u32::MAX, 360),
        ];
        for (attempts, minutes) in cases {
            assert_eq!(backoff(*attempts), Duration::from_secs(minutes * 60), "{attempts}");
        }
    }

    #[test]
    fn the_user_agent_names_sitemapd_its_version_and_the_docs() {
        assert_eq!(
            user_agent("1.4.0"),
            "sitemapd/1.4.0 (URL health check; +https://github.com/sitemapd/sitemapd/blob/main/docs/health.md)"
        );
    }

    /// The stored bits and names never change: each case one kind, its bit and its name.
    #[test]
    fn kinds_keep_their_bits_and_names() {
        let cases: &[(Kind, u32, &str)] = &[
            (Kind::NotFound, 1, "not_found"),
            (Kind::Gone, 2, "gone"),
            (Kind::ClientError, 4, "client_error"),
            (Kind::Redirect, 8, "redirect"),
            (Kind::Noindex, 16, "noindex"),
            (Kind::Canonical, 32, "canonical"),
            (Kind::Disallowed, 64, "disallowed"),
        ];
        for (kind, bit, name) in cases {
            assert_eq!((kind.bit(), kind.name(), Kind::parse(name)), (*bit, *name, Some(*kind)));
        }
        assert_eq!(Problems::from_bits(0xff).bits(), 0x7f);
    }
}
