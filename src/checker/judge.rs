//! The core's judge as the checker calls it. A stand-in until the core's `health` module has its own (branch
//! `hcore`): replaced by re-exports of `crate::health` when that lands.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use url::Url;

use crate::health::{Finding, Kind, Problems, Transient};

/// `sitemapd/<version> (URL health)`.
pub(super) fn user_agent(version: &str) -> String {
    format!("sitemapd/{version} (URL health; +https://github.com/sitemapd)")
}

/// The wait before the next try after `attempts` transient failures in a row: doubling from 1 min to 1 day.
pub(super) fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(60u64.saturating_mul(1 << attempts.min(12).saturating_sub(1))).min(Duration::from_secs(86_400))
}

/// `Retry-After` as a wait from `now` (seconds only in this stand-in).
pub(super) fn retry_after(headers: &HeaderMap, _now: SystemTime) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Whether the prefix holds the end of the head (`</head>` or `<body`).
pub(super) fn head_ended(prefix: &[u8]) -> bool {
    let lower = prefix.to_ascii_lowercase();
    lower.windows(7).any(|w| w == b"</head>") || lower.windows(5).any(|w| w == b"<body")
}

/// A URL robots.txt disallows.
pub(super) fn disallowed() -> Finding {
    Finding { problems: Problems::from_iter([Kind::Disallowed]), ..Finding::default() }
}

/// A site's robots.txt as found (stand-in: status only).
#[derive(Clone, Debug)]
pub(super) struct Robots {
    disallow: Vec<String>,
    unknown: bool,
}

impl Robots {
    pub(super) fn from_answer(status: u16, body: &[u8]) -> Self {
        let mut disallow = Vec::new();
        if (200..300).contains(&status) {
            let text = String::from_utf8_lossy(body);
            let mut ours = false;
            for line in text.lines() {
                let line = line.split('#').next().unwrap_or("").trim();
                if let Some((k, v)) = line.split_once(':') {
                    let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                    if k == "user-agent" {
                        ours = v.eq_ignore_ascii_case("googlebot");
                    } else if k == "disallow" && ours && !v.is_empty() {
                        disallow.push(v.to_owned());
                    }
                }
            }
        }
        Robots { disallow, unknown: status >= 500 }
    }

    pub(super) fn allows(&self, url: &Url) -> Option<bool> {
        if self.unknown {
            return None;
        }
        Some(!self.disallow.iter().any(|d| url.path().starts_with(d.as_str())))
    }
}

/// What an answer says of the URL.
pub(super) fn judge(loc: &Url, status: u16, headers: &HeaderMap, head: &[u8], robots: Option<bool>) -> Finding {
    let now = SystemTime::now();
    let after = retry_after(headers, now);
    if status == 429 {
        return Finding { status: Some(status), ..Finding::transient(Transient::RateLimited, after) };
    }
    if status >= 500 {
        return Finding { status: Some(status), ..Finding::transient(Transient::Server(status), after) };
    }
    let mut f = Finding { status: Some(status), ..Finding::default() };
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    f.etag = header("etag");
    f.last_modified = header("last-modified");
    match status {
        404 => f.problems.insert(Kind::NotFound),
        410 => f.problems.insert(Kind::Gone),
        300..=399 => {
            f.problems.insert(Kind::Redirect);
            f.location = header("location").and_then(|l| loc.join(&l).ok()).map(String::from);
        }
        400..=499 => f.problems.insert(Kind::ClientError),
        _ => {}
    }
    if let Some(tag) = header("x-robots-tag") {
        let t = tag.to_ascii_lowercase();
        if t.contains("noindex") {
            f.problems.insert(Kind::Noindex);
            f.noindex_by =
                Some(if t.starts_with("googlebot") { "X-Robots-Tag: googlebot" } else { "X-Robots-Tag" }.into());
        }
    }
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    if text.contains("name=\"robots\" content=\"noindex") {
        f.problems.insert(Kind::Noindex);
        f.noindex_by = Some("meta robots".into());
    }
    let canonical = header("link")
        .filter(|l| l.contains("canonical"))
        .and_then(|l| l.split('<').nth(1).and_then(|r| r.split('>').next()).map(str::to_owned))
        .or_else(|| {
            let at = text.find("rel=\"canonical\" href=\"")? + 22;
            text[at..].split('"').next().map(str::to_owned)
        });
    if let Some(c) = canonical.and_then(|c| loc.join(&c).ok()) {
        if c != *loc {
            f.problems.insert(Kind::Canonical);
            f.canonical = Some(c.into());
        }
    }
    if robots == Some(false) {
        f.problems.insert(Kind::Disallowed);
    }
    f
}
