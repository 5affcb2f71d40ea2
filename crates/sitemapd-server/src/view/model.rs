//! What the templates show, made from stored values: numbers grouped, fill ratios and their percentages, dates,
//! extension summaries, links, what crawlers read. Pure, so that it is unit-tested without a server. Escaping is
//! the templates' (every value here is text; none is markup).

use crate::crawlers::report::{CrawlerReport, PageReads};
use crate::domain::Extensions;
use crate::domain::Loc;
use crate::domain::ext::Video;
use crate::domain::{LastMod, PublicUrl, Section, SectionNames};
use crate::health::{Kind, Policy};
use crate::hreflang::{Policy as HreflangPolicy, ProblemKind};
use crate::page::{PageState, StoredUrl, number_of, page_bytes, section_of};
use crate::store::{HealthSummary, HreflangSummary, PublishStatus, StoredProblem, UrlCheck};

use super::source::ViewSite;

/// `1234567` → `1,234,567`.
pub fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// How much of a limit is used: for a `<meter>` (`ratio`, 0 to 1) and as text (`percent`).
#[derive(Clone, Debug, PartialEq)]
pub struct Fill {
    pub used: String,
    pub limit: String,
    pub ratio: f64,
    /// One decimal, rounded down so that a page is never shown full before it is: `0%`, `<0.1%`, `42.5%`,
    /// `99.9%`, `100%`.
    pub percent: String,
}

impl Fill {
    pub fn new(used: i64, limit: i64) -> Self {
        let ratio = if limit > 0 { (used as f64 / limit as f64).clamp(0.0, 1.0) } else { 1.0 };
        let tenths = (ratio * 1000.0).floor() as i64;
        let percent = if used <= 0 {
            "0%".to_owned()
        } else if used >= limit {
            "100%".to_owned()
        } else if tenths == 0 {
            "<0.1%".to_owned()
        } else {
            format!("{}.{}%", tenths.min(999) / 10, tenths.min(999) % 10)
        };
        Self { used: grouped(used), limit: grouped(limit), ratio, percent }
    }
}

/// A moment as the view shows it: `machine` for `<time datetime>` (milliseconds, as the index's `<lastmod>`),
/// `human` to read (`2026-11-23 19:34:33 UTC`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct When {
    pub machine: String,
    pub human: String,
}

impl When {
    pub fn from_micros(us: i64) -> Self {
        let machine = LastMod::from_unix_micros(us.div_euclid(1000) * 1000).as_str().to_owned();
        let human = format!("{} {} UTC", &machine[..10], &machine[11..19]);
        Self { machine, human }
    }

    /// The day of `human` (`2026-11-23`) and its time of day (`19:34:33 UTC`): a narrow column wraps between them.
    pub fn day(&self) -> &str {
        &self.human[..10]
    }

    pub fn clock(&self) -> &str {
        &self.human[11..]
    }
}

/// A span of time in a few characters, rounded down: `40 s`, `12 min`, `5 h` (under two days), `3 d`.
pub fn span(us: i64) -> String {
    let secs = us.max(0) / 1_000_000;
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..172_800 => format!("{} h", secs / 3600),
        _ => format!("{} d", grouped(secs / 86_400)),
    }
}

/// A moment, and how long before `now_us` it was (`3 h ago`; a moment after `now_us`, from a replica whose clock
/// runs ahead: `just now`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ago {
    pub when: When,
    pub ago: String,
}

impl Ago {
    pub fn new(now_us: i64, us: i64) -> Self {
        let ago = if us >= now_us { "just now".to_owned() } else { format!("{} ago", span(now_us - us)) };
        Self { when: When::from_micros(us), ago }
    }
}

/// A site's crawler panel: each crawler with a record.
#[derive(Clone, Debug, PartialEq)]
pub struct CrawlerPanel {
    pub window_days: u32,
    pub rows: Vec<CrawlerRow>,
}

/// One crawler in a site's crawler panel.
#[derive(Clone, Debug, PartialEq)]
pub struct CrawlerRow {
    /// As people name it (`Googlebot`).
    pub name: String,
    /// Only claimed fetches, none verified: flagged, since a CDN or proxy that hides the client address looks so.
    pub claimed_only: bool,
    /// The last verified fetch of the index, and of any other sitemap.
    pub last_index: Option<Ago>,
    pub last_page: Option<Ago>,
    /// The last claimed fetch (the agent says it is this crawler, the address is not the crawler's).
    pub last_claimed: Option<Ago>,
    /// The last fetch nothing could verify (its operator publishes no ranges nor names).
    pub last_unverifiable: Option<Ago>,
    /// `12 min / 3 h` (median / p90), or empty without a sample.
    pub lag: String,
    /// `4 reads` the lag figures come from.
    pub samples: String,
    /// `42%` of verified fetches answered 304; empty without a verified fetch.
    pub not_modified: String,
    /// `1,234 fetches` (verified).
    pub fetches: String,
    /// `3 pages`, `none`; empty for a crawler that has read no page (nothing to compare with).
    pub unseen: String,
    /// The change time of the page changed longest ago among the unseen.
    pub oldest_unseen: Option<When>,
}

impl CrawlerRow {
    pub fn new(c: &CrawlerReport, now_us: i64) -> Self {
        let ago = |us: Option<i64>| us.map(|us| Ago::new(now_us, us));
        let secs = |s: f64| span((s * 1e6) as i64);
        let lag = match (c.lag.median_secs, c.lag.p90_secs) {
            (Some(median), Some(p90)) => format!("{} / {}", secs(median), secs(p90)),
            _ => String::new(),
        };
        Self {
            name: c.crawler.shown().to_owned(),
            claimed_only: c.claimed_only(),
            last_index: ago(c.last_index_us),
            last_page: ago(c.last_page_us),
            last_claimed: ago(c.last_claimed_us),
            last_unverifiable: ago(c.last_unverifiable_us),
            lag,
            samples: count(c.lag.samples, "read", "reads"),
            not_modified: c
                .not_modified_share()
                .map(|s| format!("{}%", (s * 100.0).round() as i64))
                .unwrap_or_default(),
            fetches: count(c.fetches.max(0) as usize, "fetch", "fetches"),
            unseen: match c.unseen {
                None => String::new(),
                Some(u) if u.pages == 0 => "none".to_owned(),
                Some(u) => count(u.pages, "page", "pages"),
            },
            oldest_unseen: c.unseen.and_then(|u| u.oldest_change_us).map(When::from_micros),
        }
    }
}

/// A site's URL health panel: its policy, counts by kind with the oldest, the backlog, the last check, and the
/// problem URLs listed (at most a screen's worth).
#[derive(Clone, Debug, PartialEq)]
pub struct HealthPanel {
    /// `report` or `exclude`.
    pub policy: &'static str,
    /// What the policy does, in a sentence.
    pub policy_says: &'static str,
    pub tracked: String,
    pub checked: String,
    pub healthy: String,
    /// Every kind, in `Kind::ALL` order.
    pub kinds: Vec<KindRow>,
    pub transient: String,
    pub excluded: String,
    /// `1,234`, or `at least 1,000,000` at the count's cap.
    pub backlog: String,
    /// Whether every record stored before checking began has been queued.
    pub seeded: bool,
    pub last_check: Option<Ago>,
    pub urls: Vec<ProblemRow>,
    /// Whether more problem URLs exist than are listed (the listing was full).
    pub more: bool,
    /// The brake, when it is not plain running (`paused`, `confirmed`), with its evidence.
    pub brake: Option<BrakePanel>,
}

/// A site's brake when it tripped: paused (or confirmed), why, since when.
#[derive(Clone, Debug, PartialEq)]
pub struct BrakePanel {
    /// `paused` or `confirmed`.
    pub state: &'static str,
    /// `client_error`, `redirect to https://example.com/login`.
    pub shape: String,
    pub bad: usize,
    pub window: usize,
    pub examples: Vec<String>,
    pub since: Ago,
}

/// One kind of problem in the panel's counts.
#[derive(Clone, Debug, PartialEq)]
pub struct KindRow {
    /// Its stable name (`not_found`): the API's `?problem=`.
    pub name: &'static str,
    /// In words (`Not found (404)`).
    pub words: &'static str,
    pub urls: String,
    /// Since when the URL that has had it longest has had a problem.
    pub oldest: Option<Ago>,
    pub none: bool,
}

/// A kind of problem in words, for a count.
pub fn kind_words(kind: Kind) -> &'static str {
    match kind {
        Kind::NotFound => "Not found (404)",
        Kind::Gone => "Gone (410)",
        Kind::ClientError => "Other client error (4xx)",
        Kind::Redirect => "Redirect (3xx)",
        Kind::Noindex => "Noindex",
        Kind::Canonical => "Canonical names another URL",
        Kind::Disallowed => "Disallowed by robots.txt",
    }
}

impl HealthPanel {
    /// `problems`: the records listed, problem ones first; `more`: the listing was cut.
    pub fn new(policy: Policy, s: &HealthSummary, problems: &[UrlCheck], more: bool, now_us: i64) -> Self {
        let kinds = Kind::ALL
            .iter()
            .map(|kind| {
                let (urls, oldest) =
                    s.kinds.iter().find(|(k, _, _)| k == kind).map_or((0, None), |(_, urls, oldest)| (*urls, *oldest));
                KindRow {
                    name: kind.name(),
                    words: kind_words(*kind),
                    urls: grouped(urls as i64),
                    oldest: oldest.map(|us| Ago::new(now_us, us)),
                    none: urls == 0,
                }
            })
            .collect();
        let backlog = if s.backlog >= crate::store::BACKLOG_CAP {
            format!("at least {}", grouped(crate::store::BACKLOG_CAP as i64))
        } else {
            grouped(s.backlog as i64)
        };
        Self {
            policy: policy.name(),
            policy_says: match policy {
                Policy::Report => "problems are reported here; the sitemaps never change for them",
                Policy::Exclude => {
                    "a URL with a definite problem is left out of its page until a check finds it healthy"
                }
            },
            tracked: grouped(s.tracked as i64),
            checked: grouped(s.checked as i64),
            healthy: grouped(s.healthy as i64),
            kinds,
            transient: grouped(s.transient as i64),
            excluded: grouped(s.excluded as i64),
            backlog,
            seeded: s.seeded,
            last_check: s.last_checked_us.map(|us| Ago::new(now_us, us)),
            urls: problems.iter().map(|c| ProblemRow::new(c, now_us)).collect(),
            more,
            brake: s.brake.as_ref().filter(|b| b.mode != crate::store::BrakeMode::Running).map(|b| BrakePanel {
                state: b.mode.name(),
                shape: b.evidence.as_ref().map(|e| e.shape.describe()).unwrap_or_default(),
                bad: b.evidence.as_ref().map_or(0, |e| e.bad),
                window: b.evidence.as_ref().map_or(0, |e| e.window),
                examples: b.evidence.as_ref().map(|e| e.examples.clone()).unwrap_or_default(),
                since: Ago::new(now_us, b.since_us),
            }),
        }
    }
}

/// A site's hreflang panel: its policy, its clusters and members, its problems by kind, and the first problems.
#[derive(Clone, Debug, PartialEq)]
pub struct HreflangPanel {
    /// `as_sent` or `complete`.
    pub policy: &'static str,
    /// What the policy does, in a sentence.
    pub policy_says: &'static str,
    pub clusters: String,
    pub members: String,
    /// No cluster has a stored member in the site.
    pub none: bool,
    /// Every kind, in `ProblemKind::ALL` order.
    pub kinds: Vec<HreflangKindRow>,
    pub problems: Vec<HreflangProblemRow>,
    /// Whether more problems exist than are listed.
    pub more: bool,
    /// The API's listing of them all, for this site: its path, and the link to it from the site's screen (relative,
    /// as every link of the view).
    pub api: String,
    pub api_href: String,
}

/// One kind of hreflang problem in the panel's counts.
#[derive(Clone, Debug, PartialEq)]
pub struct HreflangKindRow {
    /// Its stable name (`duplicate_language`), as the API and the metrics name it.
    pub name: &'static str,
    /// In words.
    pub words: &'static str,
    pub count: String,
    pub none: bool,
}

/// One hreflang problem in the panel's list.
#[derive(Clone, Debug, PartialEq)]
pub struct HreflangProblemRow {
    pub href: String,
    /// Its lookup screen, when the URL lies under the site's public URL.
    pub lookup: Option<String>,
    pub kind: &'static str,
    pub hreflang: String,
    pub message: String,
}

/// A kind of hreflang problem in words, for a count.
pub fn hreflang_kind_words(kind: ProblemKind) -> &'static str {
    match kind {
        ProblemKind::DuplicateLanguage => "Two URLs claim one language",
        ProblemKind::ConflictingLanguage => "One URL claimed with two languages",
        ProblemKind::InvalidCode => "A code Google does not read",
        ProblemKind::NotStored => "Names a URL of a site here that is not stored",
        ProblemKind::MissingReturn => "No return link (as_sent)",
        ProblemKind::CrossSite => "Spans configured sites (allowed)",
        ProblemKind::TooLarge => "Set too large for a page",
    }
}

impl HreflangPanel {
    pub fn new(
        site: &str,
        public_url: &PublicUrl,
        policy: HreflangPolicy,
        s: &HreflangSummary,
        problems: &[StoredProblem],
        more: bool,
    ) -> Self {
        let kinds = ProblemKind::ALL
            .iter()
            .map(|kind| {
                let n = s.problems.get(kind.as_str()).copied().unwrap_or(0);
                HreflangKindRow {
                    name: kind.as_str(),
                    words: hreflang_kind_words(*kind),
                    count: grouped(n as i64),
                    none: n == 0,
                }
            })
            .collect();
        let encoded: String = url::form_urlencoded::byte_serialize(site.as_bytes()).collect();
        Self {
            policy: policy.as_str(),
            policy_says: match policy {
                HreflangPolicy::AsSent => "each URL's alternates are rendered as it sent them",
                HreflangPolicy::Complete => {
                    "each stored member of a cluster is rendered with the whole cluster, itself included, one URL \
                     per language"
                }
            },
            clusters: grouped(s.clusters as i64),
            members: grouped(s.members as i64),
            none: s.clusters == 0,
            kinds,
            problems: problems
                .iter()
                .map(|p| HreflangProblemRow {
                    lookup: Loc::parse(&p.href, public_url).ok().map(|loc| lookup_href("./", loc.as_str())),
                    href: p.href.clone(),
                    kind: ProblemKind::parse(&p.kind).map_or("unknown", ProblemKind::as_str),
                    hreflang: p.hreflang.clone(),
                    message: p.message.clone(),
                })
                .collect(),
            more,
            api: format!("/api/v1/hreflang?site={encoded}"),
            api_href: format!("../../api/v1/hreflang?site={encoded}"),
        }
    }
}

/// One URL in the panel's list of problems.
#[derive(Clone, Debug, PartialEq)]
pub struct ProblemRow {
    pub loc: String,
    /// Its lookup screen, relative to the site's directory.
    pub href: String,
    /// Each problem in words, with what the answer said: `not found (404)`, `redirects to https://…`.
    pub reasons: Vec<String>,
    /// The last attempt's transient failure: `timeout, 3 attempts in a row`.
    pub transient: Option<String>,
    /// Since when it has had a definite problem.
    pub since: Option<Ago>,
    pub excluded: bool,
}

impl ProblemRow {
    pub fn new(c: &UrlCheck, now_us: i64) -> Self {
        let status = |fallback: &str| c.status.map_or_else(|| fallback.to_owned(), |s| s.to_string());
        let reasons = c
            .problems
            .iter()
            .map(|kind| match kind {
                Kind::NotFound => "not found (404)".to_owned(),
                Kind::Gone => "gone (410)".to_owned(),
                Kind::ClientError => format!("client error ({})", status("4xx")),
                Kind::Redirect => match &c.location {
                    Some(to) => format!("redirects ({}) to {to}", status("3xx")),
                    None => format!("redirects ({}) without a Location", status("3xx")),
                },
                Kind::Noindex => match &c.noindex_by {
                    Some(by) => format!("noindex ({by})"),
                    None => "noindex".to_owned(),
                },
                Kind::Canonical => match &c.canonical {
                    Some(to) => format!("canonical is {to}"),
                    None => "canonical names another URL".to_owned(),
                },
                Kind::Disallowed => "disallowed for Googlebot by robots.txt".to_owned(),
            })
            .collect();
        let transient = c.transient.as_ref().map(|t| {
            let t = t.replace('_', " ");
            if c.attempts > 1 { format!("{t}, {} attempts in a row", c.attempts) } else { t }
        });
        Self {
            loc: c.loc.clone(),
            href: lookup_href("./", &c.loc),
            reasons,
            transient,
            since: c.problem_since_us.map(|us| Ago::new(now_us, us)),
            excluded: c.excluded,
        }
    }
}

/// What one major crawler did with one page, as its cell of the page table shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadCell {
    /// The column's crawler (`Googlebot`).
    pub crawler: &'static str,
    /// `current` (read since its change), `stale` (read, not since its change) or `never`: the cell's class.
    pub state: &'static str,
    /// `read 3 h ago`, `not since change`, `never`.
    pub text: String,
    /// The last verified read of the page, when there was one.
    pub last: Option<When>,
}

impl ReadCell {
    pub fn new(r: &PageReads, now_us: i64) -> Self {
        let (state, text) = match (r.current, r.last_read_us) {
            (true, Some(us)) => ("current", format!("read {}", Ago::new(now_us, us).ago)),
            // Its current version read, the fetch record since purged or never flushed: read, when unknown.
            (true, None) => ("current", "read".to_owned()),
            (false, Some(_)) => ("stale", "not since change".to_owned()),
            (false, None) => ("never", "never".to_owned()),
        };
        Self { crawler: r.crawler.shown(), state, text, last: r.last_read_us.map(When::from_micros) }
    }
}

/// A record's URL health on its lookup screen: its last check in words, and what comes next.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordHealth {
    /// `healthy`, `problem`, `transient` (the last attempt got no answer, nothing definite known), `queued` (never
    /// checked yet) or `untracked` (not queued: stored while the site was not checked).
    pub state: &'static str,
    /// The state in a sentence.
    pub says: String,
    /// The last definite answer's status, when there was one.
    pub status: Option<u16>,
    /// Its problems in words, the last attempt's transient failure, since when, whether it is left out.
    pub row: Option<ProblemRow>,
    pub checked: Option<Ago>,
    /// When it is checked next: `in 6 d` (`now`, when it is due).
    pub next: Option<(When, String)>,
}

impl RecordHealth {
    /// `check`: the record's check row (`None`: not tracked).
    pub fn new(check: Option<&UrlCheck>, now_us: i64) -> Self {
        let Some(c) = check else {
            return Self {
                state: "untracked",
                says: "Not queued for a check yet: it is when it is next written, or when the checker's walk of \
                       the stored URLs reaches it."
                    .to_owned(),
                status: None,
                row: None,
                checked: None,
                next: None,
            };
        };
        let (state, says) = match (c.checked_us, c.status, c.problems.is_empty()) {
            (None, ..) => ("queued", "Queued: not checked yet.".to_owned()),
            (Some(_), Some(status), true) => ("healthy", format!("Healthy: the last check answered {status}.")),
            (Some(_), _, false) => {
                let n = c.problems.iter().count();
                let what = if n == 1 { "A problem".to_owned() } else { format!("{n} problems") };
                ("problem", format!("{what} at the last definite check."))
            }
            (Some(_), None, true) => ("transient", "No definite answer yet: the last attempt failed.".to_owned()),
        };
        let next = (c.due_us > 0).then(|| {
            let when = When::from_micros(c.due_us);
            let text = if c.due_us <= now_us { "now".to_owned() } else { format!("in {}", span(c.due_us - now_us)) };
            (when, text)
        });
        Self {
            state,
            says,
            status: c.status,
            row: (!c.problems.is_empty() || c.transient.is_some()).then(|| ProblemRow::new(c, now_us)),
            checked: c.checked_us.map(|us| Ago::new(now_us, us)),
            next,
        }
    }
}

/// The page table's caption: which pages it shows, of how many, in words that read right for one page as for
/// many (`The one page`, `All 3 pages`, `Page 501 to page 1000 (500 of 1,200 pages)`).
pub fn pages_caption(first: &str, last: &str, shown: usize, total: usize) -> String {
    let each = if shown == 1 { "how full it is" } else { "how full each is" };
    let which = match (shown, total) {
        (1, 1) => "The one page".to_owned(),
        (s, t) if s >= t => format!("All {} pages", grouped(t as i64)),
        (1, t) => format!("{first} (one of {} pages)", grouped(t as i64)),
        (s, t) => {
            let last = last.strip_prefix("Page ").map_or_else(|| last.to_owned(), |n| format!("page {n}"));
            format!("{first} to {last} ({} of {} pages)", grouped(s as i64), grouped(t as i64))
        }
    };
    format!("{which}: {each}, against both limits")
}

/// One row of a site's page table.
#[derive(Clone, Debug, PartialEq)]
pub struct PageRow {
    pub id: i64,
    /// Its section's name (`None`: the default section).
    pub section: Option<String>,
    /// `Page 3`, or `products, page 2`.
    pub label: String,
    /// The name of its sitemap file: `sitemap-3.xml`, `sitemap-products-2.xml`.
    pub file: String,
    pub urls: Fill,
    /// Against `page_max_bytes`: the entries and the envelope reserve, as the limit rule counts them.
    pub bytes: Fill,
    pub lastmod: When,
    /// Its live sitemap; `None` while it is empty (not listed, 404).
    pub sitemap: Option<String>,
    /// How many of its entries carry images, videos and alternates.
    pub ns: String,
    /// Per major crawler, what it read of the page (site screen, telemetry on); else empty.
    pub reads: Vec<ReadCell>,
}

impl PageRow {
    /// `page`'s row; `section` is its section's name (`None`: the default section).
    pub fn new(page: &PageState, site: &ViewSite, section: Option<&Section>) -> Self {
        let ns = page.ns;
        let number = number_of(page.id);
        let max_urls = section.and_then(|s| site.section_max_urls.get(s.as_str())).copied();
        let max_urls = max_urls.unwrap_or(site.limits.max_urls).min(site.limits.max_urls);
        let mut parts = Vec::new();
        for (n, what) in [(ns.image, "with images"), (ns.video, "with videos"), (ns.xhtml, "with alternates")] {
            if n > 0 {
                parts.push(format!("{} {what}", grouped(n)));
            }
        }
        Self {
            id: page.id,
            section: section.map(|s| s.to_string()),
            label: match section {
                None => format!("Page {number}"),
                Some(s) => format!("{s}, page {number}"),
            },
            file: match section {
                None => format!("sitemap-{number}.xml"),
                Some(s) => format!("sitemap-{s}-{number}.xml"),
            },
            urls: Fill::new(page.url_count, i64::from(max_urls)),
            bytes: Fill::new(page_bytes(page.byte_size), site.limits.max_bytes as i64),
            lastmod: When::from_micros(page.modified_us),
            sitemap: (page.url_count > 0).then(|| site.public_url.section_page_url(section, number)),
            ns: parts.join(", "),
            reads: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.sitemap.is_none()
    }
}

/// One of a site's Atom feeds as the site screen lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedRow {
    /// Its path under the site's public URL (`feed.atom`, `feed-products.atom`).
    pub path: String,
    /// Its public URL.
    pub url: String,
    /// Its entries, and its tombstones (deletions), grouped.
    pub entries: String,
    pub deleted: usize,
    /// Its `<updated>`: the newest stored change among its items; `None` while it has none.
    pub updated: Option<When>,
}

impl FeedRow {
    pub fn new(feed: &crate::feed::FeedRef, body: &crate::feed::FeedBody) -> Self {
        Self {
            path: feed.path.clone(),
            url: feed.public_url.clone(),
            entries: grouped(body.entries as i64),
            deleted: body.deleted,
            updated: (body.modified_us > 0).then(|| When::from_micros(body.modified_us)),
        }
    }
}

/// A byte count in a few characters, in decimal units as storage is billed: `812 bytes`, `14.2 kB`, `3.1 MB`,
/// `1.0 GB` (one decimal, rounded down).
pub fn bytes_short(n: i64) -> String {
    let n = n.max(0);
    if n < 1000 {
        return format!("{n} byte{}", if n == 1 { "" } else { "s" });
    }
    let (unit, size) = [("kB", 1_000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000_i64)]
        .into_iter()
        .take_while(|(_, size)| n >= *size)
        .last()
        .unwrap_or(("kB", 1_000));
    let tenths = n / (size / 10);
    format!("{}.{} {unit}", grouped(tenths / 10), tenths % 10)
}

/// One publishing target of a site as its screen shows it: the state its last passes left (`PublishStatus`).
#[derive(Clone, Debug, PartialEq)]
pub struct TargetRow {
    /// The target's URL as configured (`s3://bucket/prefix/`): no secret is ever in it.
    pub label: String,
    /// When its last complete pass ended; `None`: no pass has completed.
    pub last_complete: Option<Ago>,
    /// Objects the target holds as recorded, grouped, and their bytes (grouped, and short).
    pub objects: String,
    pub bytes: String,
    pub size: String,
    /// Of them, those no index names any more, deleted once their grace ends.
    pub gone: String,
    pub gone_none: bool,
    /// Passes failed in a row (0 after a complete one), and the last one's error.
    pub failures: String,
    pub failing: bool,
    pub last_error: Option<String>,
    /// Whether a pass holds the target's lease now.
    pub busy: bool,
}

impl TargetRow {
    /// The row of `status`, its times counted back from `now_us`.
    pub fn new(status: &PublishStatus, now_us: i64) -> Self {
        let micros = |d: std::time::Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        Self {
            label: status.target.clone(),
            last_complete: status.since_complete.map(|since| Ago::new(now_us, now_us.saturating_sub(micros(since)))),
            objects: grouped(status.objects),
            bytes: grouped(status.bytes),
            size: bytes_short(status.bytes),
            gone: grouped(status.gone),
            gone_none: status.gone == 0,
            failures: grouped(i64::from(status.failures)),
            failing: status.failures > 0,
            last_error: status.last_error.clone().filter(|e| !e.is_empty()),
            busy: status.busy,
        }
    }
}

/// One section of a site as its screen sums it up.
#[derive(Clone, Debug, PartialEq)]
pub struct SectionRow {
    /// Its name; `None`: the default section.
    pub name: Option<String>,
    pub urls: String,
    /// Its pages listed (not empty).
    pub listed: String,
    /// Its own index (`/sitemap-<name>.xml`), for a named section with pages listed.
    pub index: Option<String>,
    /// The id of its first page, the row of the page table it starts at.
    pub first_page: i64,
}

impl SectionRow {
    /// Every section of `pages` (the default first, then by name), with what it holds.
    pub fn of(pages: &[PageState], names: &SectionNames, site: &ViewSite) -> Vec<Self> {
        let row = |id: i64, name: Option<&Section>| {
            let mine: Vec<&PageState> = pages.iter().filter(|p| section_of(p.id) == id).collect();
            let listed = mine.iter().filter(|p| p.url_count > 0).count() as i64;
            Self {
                name: name.map(|s| s.to_string()),
                urls: grouped(mine.iter().map(|p| p.url_count).sum()),
                listed: grouped(listed),
                index: name.filter(|_| listed > 0).map(|s| site.public_url.section_index_url(s)),
                first_page: mine.first().map_or(0, |p| p.id),
            }
        };
        let mut rows = Vec::new();
        if pages.iter().any(|p| section_of(p.id) == 0) {
            rows.push(row(0, None));
        }
        rows.extend(names.by_name().into_iter().map(|(id, name)| row(id, Some(name))));
        rows
    }
}

/// `n` and the noun, singular or plural: `1 image`, `3 images`.
fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{} {many}", grouped(n as i64)) }
}

/// An entry's extensions in a few words: `3 images, 1 video, news, 4 alternates`; empty when it has none.
pub fn ext_summary(ext: Option<&Extensions>) -> String {
    let Some(e) = ext else { return String::new() };
    let mut parts = Vec::new();
    if !e.images.is_empty() {
        parts.push(count(e.images.len(), "image", "images"));
    }
    if !e.videos.is_empty() {
        parts.push(count(e.videos.len(), "video", "videos"));
    }
    if e.news.is_some() {
        parts.push("news".to_owned());
    }
    if !e.alternates.is_empty() {
        parts.push(count(e.alternates.len(), "alternate", "alternates"));
    }
    parts.join(", ")
}

/// `url` when it is an http(s) URL, the only kind the view makes a link of (a stored loc always is; a row changed
/// by hand might not be, and a `javascript:` link must never be made of it).
pub fn link(url: &str) -> Option<String> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")).then(|| url.to_owned())
}

/// The lookup screen of `loc`, relative to the site's directory (`root`: `./` or `../`).
pub fn lookup_href(root: &str, loc: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(loc.as_bytes()).collect();
    format!("{root}lookup?loc={encoded}")
}

/// One entry in a page's list.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryRow {
    pub id: i64,
    pub loc: String,
    /// Its record's screen.
    pub lookup: String,
    pub live: Option<String>,
    pub lastmod: String,
    pub changefreq: String,
    pub priority: String,
    pub extensions: String,
    pub size: String,
}

impl EntryRow {
    /// From a page's screen (`../` is the site's directory).
    pub fn new(url: &StoredUrl) -> Self {
        let f = &url.fields;
        Self {
            id: url.id,
            lookup: lookup_href("../", &url.loc),
            live: link(&url.loc),
            lastmod: f.lastmod.clone().unwrap_or_default(),
            changefreq: f.changefreq.clone().unwrap_or_default(),
            priority: f.priority.map(|p| p.render()).unwrap_or_default(),
            extensions: ext_summary(f.ext.as_deref()),
            size: grouped(url.size),
            loc: url.loc.clone(),
        }
    }
}

/// A labelled value of a record's detail; `link` when the value is a URL to follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub label: &'static str,
    pub value: String,
    pub link: Option<String>,
}

impl Field {
    fn text(label: &'static str, value: impl Into<String>) -> Self {
        Self { label, value: value.into(), link: None }
    }

    fn url(label: &'static str, value: &str) -> Self {
        Self { label, value: value.to_owned(), link: link(value) }
    }
}

/// One extension item (an image, a video, the news, an alternate) as labelled values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub heading: String,
    pub fields: Vec<Field>,
}

/// A stored record, whole, for the lookup screen.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub id: i64,
    pub loc: String,
    pub live: Option<String>,
    pub page: i64,
    /// The page's screen, starting at this record.
    pub page_href: String,
    pub sitemap: String,
    pub fields: Vec<Field>,
    pub summary: String,
    pub items: Vec<Item>,
    /// Its URL health; `None` when its site is not checked.
    pub health: Option<RecordHealth>,
    /// Per major crawler, whether it read the record's page since the record changed; `None` with crawler
    /// telemetry off.
    pub crawlers: Option<Vec<ReadCell>>,
}

impl Record {
    pub fn new(url: &StoredUrl, public_url: &PublicUrl) -> Self {
        let f = &url.fields;
        let none = || "(none)".to_owned();
        let fields = vec![
            Field::text("Lastmod", f.lastmod.clone().unwrap_or_else(none)),
            Field::text("Changefreq", f.changefreq.clone().unwrap_or_else(none)),
            Field::text("Priority", f.priority.map(|p| p.render()).unwrap_or_else(none)),
            Field::text("Size", format!("{} bytes in its page", grouped(url.size))),
        ];
        Self {
            id: url.id,
            loc: url.loc.clone(),
            live: link(&url.loc),
            page: url.page_id,
            page_href: format!("pages/{}?after={}", url.page_id, url.id - 1),
            sitemap: public_url.page_url(url.page_id),
            fields,
            summary: ext_summary(f.ext.as_deref()),
            items: f.ext.as_deref().map(items).unwrap_or_default(),
            health: None,
            crawlers: None,
        }
    }
}

/// Each image, video, the news and each alternate, in the order the page renders them (news, which only the news
/// sitemap renders, after the videos).
fn items(e: &Extensions) -> Vec<Item> {
    let mut out = Vec::new();
    for (i, image) in e.images.iter().enumerate() {
        out.push(Item { heading: format!("Image {}", i + 1), fields: vec![Field::url("Loc", &image.loc)] });
    }
    for (i, video) in e.videos.iter().enumerate() {
        out.push(Item { heading: format!("Video {}", i + 1), fields: video_fields(video) });
    }
    if let Some(news) = &e.news {
        out.push(Item {
            heading: "News".to_owned(),
            fields: vec![
                Field::text("Title", &news.title),
                Field::text("Publication", &news.publication.name),
                Field::text("Language", &news.publication.language),
                Field::text("Published", &news.publication_date),
            ],
        });
    }
    for alternate in &e.alternates {
        out.push(Item {
            heading: format!("Alternate {}", alternate.hreflang),
            fields: vec![Field::url("Href", &alternate.href)],
        });
    }
    out
}

fn video_fields(v: &Video) -> Vec<Field> {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut out = vec![
        Field::text("Title", &v.title),
        Field::text("Description", &v.description),
        Field::url("Thumbnail", &v.thumbnail_loc),
    ];
    let optional = [
        v.content_loc.as_deref().map(|u| Field::url("Content", u)),
        v.player_loc.as_deref().map(|u| Field::url("Player", u)),
        v.duration.map(|d| Field::text("Duration", format!("{} s", grouped(i64::from(d))))),
        v.expiration_date.as_deref().map(|d| Field::text("Expires", d)),
        v.rating.map(|r| Field::text("Rating", r.render())),
        v.view_count.map(|n| Field::text("Views", n.to_string())),
        v.publication_date.as_deref().map(|d| Field::text("Published", d)),
        v.family_friendly.map(|b| Field::text("Family friendly", yes_no(b))),
        v.restriction
            .as_ref()
            .map(|r| Field::text("Restriction", format!("{} {}", r.relationship.as_str(), r.countries.join(" ")))),
        v.platform
            .as_ref()
            .map(|p| Field::text("Platform", format!("{} {}", p.relationship.as_str(), p.platforms.join(" ")))),
        v.requires_subscription.map(|b| Field::text("Subscription", yes_no(b))),
        v.uploader.as_ref().map(|u| Field::text("Uploader", &u.name)),
        v.uploader.as_ref().and_then(|u| u.info.as_deref()).map(|i| Field::url("Uploader info", i)),
        v.live.map(|b| Field::text("Live", yes_no(b))),
        (!v.tags.is_empty()).then(|| Field::text("Tags", v.tags.join(", "))),
    ];
    out.extend(optional.into_iter().flatten());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ext::{Alternate, Image, News, Publication};
    use crate::page::{Fields, Limits, NsCounts};

    #[test]
    fn the_hreflang_panel_lists_every_kind_and_links_the_sites_own_urls() {
        let public_url = PublicUrl::parse("https://www.example.com/").unwrap();
        let summary = HreflangSummary {
            clusters: 1234,
            members: 5678,
            problems: [("not_stored".to_owned(), 2), ("cross_site".to_owned(), 1)].into_iter().collect(),
        };
        let problem = |href: &str, kind: &str, hreflang: &str| StoredProblem {
            href: href.into(),
            kind: kind.into(),
            hreflang: hreflang.into(),
            cluster: "https://www.example.com/a".into(),
            message: "Say <what>.".into(),
        };
        let problems = [
            problem("https://www.example.com/de?x=1&y=2", "not_stored", "de"),
            problem("https://shop.example.net/fr", "not_stored", "fr"),
            problem("https://www.example.com/a", "cross_site", ""),
        ];
        let panel = HreflangPanel::new("my site", &public_url, HreflangPolicy::Complete, &summary, &problems, true);
        assert_eq!((panel.policy, panel.clusters.as_str(), panel.members.as_str()), ("complete", "1,234", "5,678"));
        assert!(!panel.none && panel.more);
        let kinds: Vec<(&str, &str, bool)> = panel.kinds.iter().map(|k| (k.name, k.count.as_str(), k.none)).collect();
        assert_eq!(kinds.len(), 7, "every kind");
        assert!(kinds.contains(&("not_stored", "2", false)) && kinds.contains(&("too_large", "0", true)), "{kinds:?}");
        let links: Vec<Option<&str>> = panel.problems.iter().map(|p| p.lookup.as_deref()).collect();
        assert_eq!(
            links,
            [
                Some("./lookup?loc=https%3A%2F%2Fwww.example.com%2Fde%3Fx%3D1%26y%3D2"),
                None,
                Some("./lookup?loc=https%3A%2F%2Fwww.example.com%2Fa")
            ],
            "a URL of another host has no lookup here"
        );
        assert_eq!(panel.api, "/api/v1/hreflang?site=my+site");
        assert_eq!(panel.api_href, "../../api/v1/hreflang?site=my+site");
        let empty =
            HreflangPanel::new("default", &public_url, HreflangPolicy::AsSent, &HreflangSummary::default(), &[], false);
        assert!(empty.none && empty.problems.is_empty() && empty.policy == "as_sent");
    }

    #[test]
    fn a_target_row_shows_its_last_pass_its_objects_and_its_failures() {
        let now_us = 1_800_000_000_000_000;
        let status = PublishStatus {
            target: "s3://example-sitemaps/www/".into(),
            site: 1,
            objects: 41,
            bytes: 123_456_789,
            gone: 2,
            since_complete: Some(std::time::Duration::from_secs(180)),
            failures: 0,
            last_error: None,
            busy: true,
        };
        let row = TargetRow::new(&status, now_us);
        assert_eq!(row.label, "s3://example-sitemaps/www/");
        assert_eq!(row.last_complete.as_ref().map(|a| a.ago.as_str()), Some("3 min ago"));
        assert_eq!(row.last_complete.map(|a| a.when), Some(When::from_micros(now_us - 180_000_000)));
        assert_eq!((row.objects.as_str(), row.bytes.as_str(), row.size.as_str()), ("41", "123,456,789", "123.4 MB"));
        assert_eq!((row.gone.as_str(), row.gone_none, row.failing, row.busy), ("2", false, false, true));

        let failing = PublishStatus {
            since_complete: None,
            failures: 3,
            last_error: Some("upload sitemap-2.xml: <connection refused>".into()),
            objects: 0,
            bytes: 0,
            gone: 0,
            busy: false,
            ..status
        };
        let row = TargetRow::new(&failing, now_us);
        assert_eq!(row.last_complete, None, "never completed");
        assert_eq!((row.failures.as_str(), row.failing, row.gone_none), ("3", true, true));
        assert_eq!(row.last_error.as_deref(), Some("upload sitemap-2.xml: <connection refused>"));
        assert_eq!(row.size, "0 bytes");
    }

    #[test]
    fn byte_counts_are_short_in_decimal_units() {
        for (n, shown) in [
            (0, "0 bytes"),
            (1, "1 byte"),
            (999, "999 bytes"),
            (1000, "1.0 kB"),
            (14_290, "14.2 kB"),
            (999_999, "999.9 kB"),
            (3_100_000, "3.1 MB"),
            (1_000_000_000, "1.0 GB"),
            (2_500_000_000_000, "2.5 TB"),
            (9_000_000_000_000_000, "9,000.0 TB"),
        ] {
            assert_eq!(bytes_short(n), shown, "{n}");
        }
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        for (n, shown) in [(0, "0"), (999, "999"), (1000, "1,000"), (52_428_800, "52,428,800"), (-1234, "-1,234")] {
            assert_eq!(grouped(n), shown);
        }
    }

    #[test]
    fn a_fill_is_never_shown_full_before_it_is() {
        let shown = |used, limit| Fill::new(used, limit).percent;
        assert_eq!(shown(0, 50_000), "0%");
        assert_eq!(shown(1, 50_000), "<0.1%");
        assert_eq!(shown(50, 50_000), "0.1%");
        assert_eq!(shown(21_250, 50_000), "42.5%");
        assert_eq!(shown(49_999, 50_000), "99.9%");
        assert_eq!(shown(50_000, 50_000), "100%");
        assert_eq!(Fill::new(25, 100).ratio, 0.25);
        assert_eq!(Fill::new(120, 100).ratio, 1.0, "clamped for the meter");
        assert_eq!(Fill::new(1, 0).ratio, 1.0);
    }

    #[test]
    fn a_page_row_counts_the_envelope_against_the_byte_limit() {
        let site = ViewSite {
            id: 1,
            name: "default".into(),
            public_url: PublicUrl::parse("https://x.test/").unwrap(),
            limits: Limits { max_urls: 100, max_bytes: 10_240 },
            section_max_urls: [("tiny".to_owned(), 50)].into(),
        };
        let page = PageState {
            id: 3,
            url_count: 25,
            byte_size: 4096,
            version: 2,
            modified_us: 1_700_000_000_123_456,
            ns: NsCounts { image: 2, video: 0, xhtml: 1 },
            gzip: crate::page::Gzip::Blocks,
            excluded: 0,
        };
        let row = PageRow::new(&page, &site, None);
        assert_eq!((row.label.as_str(), row.file.as_str()), ("Page 3", "sitemap-3.xml"));
        assert_eq!(row.urls.percent, "25.0%");
        assert_eq!((row.bytes.used.as_str(), row.bytes.percent.as_str()), ("5,120", "50.0%"), "4,096 + 1,024 reserve");
        assert_eq!(row.sitemap.as_deref(), Some("https://x.test/sitemap-3.xml"));
        assert_eq!(
            row.lastmod,
            When { machine: "2023-11-14T22:13:20.123Z".into(), human: "2023-11-14 22:13:20 UTC".into() }
        );
        assert_eq!(row.ns, "2 with images, 1 with alternates");
        let empty = PageRow::new(&PageState { url_count: 0, byte_size: 0, ..page }, &site, None);
        assert!(empty.is_empty() && empty.sitemap.is_none(), "an empty page is not listed: no live link");
        // A section's page: its name, its file, and the section's own URL limit.
        let tiny = Section::parse("tiny").unwrap();
        let row = PageRow::new(&PageState { id: crate::page::page_id(4, 2), ..page }, &site, Some(&tiny));
        assert_eq!((row.label.as_str(), row.file.as_str()), ("tiny, page 2", "sitemap-tiny-2.xml"));
        assert_eq!(row.sitemap.as_deref(), Some("https://x.test/sitemap-tiny-2.xml"));
        assert_eq!((row.urls.limit.as_str(), row.urls.percent.as_str()), ("50", "50.0%"));
    }

    fn ext() -> Extensions {
        let image = |i| Image { loc: format!("https://cdn.test/{i}.jpg") };
        Extensions {
            images: (0..3).map(image).collect(),
            videos: vec![],
            news: Some(News {
                publication: Publication { name: "P".into(), language: "en".into() },
                publication_date: "2026-11-22".into(),
                title: "T".into(),
            }),
            alternates: vec![Alternate { hreflang: "de".into(), href: "https://x.test/de".into() }],
        }
    }

    #[test]
    fn extensions_are_summarized_in_a_few_words() {
        assert_eq!(ext_summary(None), "");
        assert_eq!(ext_summary(Some(&ext())), "3 images, news, 1 alternate");
        let one = Extensions { images: vec![Image { loc: "https://a.test/".into() }], ..Extensions::default() };
        assert_eq!(ext_summary(Some(&one)), "1 image");
    }

    #[test]
    fn only_http_urls_become_links() {
        assert_eq!(link("https://x.test/a").as_deref(), Some("https://x.test/a"));
        assert_eq!(link("HTTP://x.test/").as_deref(), Some("HTTP://x.test/"));
        for not in ["javascript:alert(1)", "data:text/html,x", " https://x.test/", "//x.test/", "http:"] {
            assert_eq!(link(not), None, "{not}");
        }
    }

    #[test]
    fn a_problem_url_says_why_in_words_and_whether_it_is_left_out() {
        use crate::health::{Kind, Problems};
        let now = 1_764_120_000_000_000;
        let check = UrlCheck {
            loc: "https://x.test/a?b=<c>".into(),
            status: Some(301),
            problems: [Kind::Redirect, Kind::Noindex].into_iter().collect::<Problems>(),
            location: Some("https://x.test/b".into()),
            noindex_by: Some("X-Robots-Tag".into()),
            problem_since_us: Some(now - 3 * 3_600_000_000),
            transient: Some("server_error 503".into()),
            attempts: 2,
            excluded: true,
            ..UrlCheck::default()
        };
        let row = ProblemRow::new(&check, now);
        assert_eq!(row.reasons, ["redirects (301) to https://x.test/b", "noindex (X-Robots-Tag)"]);
        assert_eq!(row.transient.as_deref(), Some("server error 503, 2 attempts in a row"));
        assert_eq!(row.since.map(|s| s.ago).as_deref(), Some("3 h ago"));
        assert_eq!(row.href, "./lookup?loc=https%3A%2F%2Fx.test%2Fa%3Fb%3D%3Cc%3E");
        assert!(row.excluded);
        let gone = UrlCheck { problems: Problems::from_bits(Kind::ClientError.bit()), status: Some(403), ..check };
        assert_eq!(ProblemRow::new(&gone, now).reasons, ["client error (403)"]);
    }

    #[test]
    fn a_lookup_link_carries_the_loc_percent_encoded() {
        assert_eq!(
            lookup_href("../", "https://x.test/a?b=1&c=\"<>\""),
            "../lookup?loc=https%3A%2F%2Fx.test%2Fa%3Fb%3D1%26c%3D%22%3C%3E%22"
        );
    }

    #[test]
    fn a_record_lists_its_fields_and_each_extension() {
        let url = StoredUrl {
            id: 7,
            loc: "https://x.test/a".into(),
            page_id: 2,
            fields: Fields { lastmod: Some("2024-05-01".into()), ext: Some(Box::new(ext())), ..Fields::default() },
            size: 1234,
        };
        let record = Record::new(&url, &PublicUrl::parse("https://x.test/").unwrap());
        assert_eq!(record.page_href, "pages/2?after=6", "its page's screen starts at it");
        assert_eq!(record.sitemap, "https://x.test/sitemap-2.xml");
        let headings: Vec<&str> = record.items.iter().map(|i| i.heading.as_str()).collect();
        assert_eq!(headings, ["Image 1", "Image 2", "Image 3", "News", "Alternate de"]);
        assert_eq!(record.fields[0], Field::text("Lastmod", "2024-05-01"));
        assert_eq!(record.fields[1].value, "(none)");
    }

    #[test]
    fn the_page_tables_caption_reads_right_for_one_page_as_for_many() {
        let caption = |first, last, shown, total| pages_caption(first, last, shown, total);
        assert_eq!(caption("Page 1", "Page 1", 1, 1), "The one page: how full it is, against both limits");
        assert_eq!(caption("Page 1", "products, page 2", 4, 4), "All 4 pages: how full each is, against both limits");
        assert_eq!(
            caption("Page 501", "Page 1000", 500, 1200),
            "Page 501 to page 1000 (500 of 1,200 pages): how full each is, against both limits"
        );
        assert_eq!(
            caption("Page 501", "Page 501", 1, 501),
            "Page 501 (one of 501 pages): how full it is, against both limits"
        );
    }

    #[test]
    fn a_records_health_says_what_its_last_check_found_and_when_the_next_is() {
        use crate::health::{Kind, Problems};
        let now = 1_764_120_000_000_000;
        let h = 3_600_000_000;
        assert_eq!(RecordHealth::new(None, now).state, "untracked");
        let queued = UrlCheck { loc: "https://x.test/a".into(), due_us: 0, ..UrlCheck::default() };
        let r = RecordHealth::new(Some(&queued), now);
        assert_eq!((r.state, r.checked.is_none(), r.next.is_none()), ("queued", true, true));
        let healthy = UrlCheck { checked_us: Some(now - h), status: Some(200), due_us: now + 49 * h, ..queued };
        let r = RecordHealth::new(Some(&healthy), now);
        assert_eq!((r.state, r.says.as_str()), ("healthy", "Healthy: the last check answered 200."));
        assert_eq!(r.next.map(|(_, text)| text).as_deref(), Some("in 2 d"));
        assert!(r.row.is_none());
        let gone = UrlCheck { status: Some(410), problems: Problems::from_bits(Kind::Gone.bit()), ..healthy.clone() };
        let r = RecordHealth::new(Some(&gone), now);
        assert_eq!(r.state, "problem");
        assert_eq!(r.row.map(|row| row.reasons), Some(vec!["gone (410)".to_owned()]));
        let failed =
            UrlCheck { status: None, transient: Some("timeout".into()), attempts: 2, due_us: now - 1, ..healthy };
        let r = RecordHealth::new(Some(&failed), now);
        assert_eq!(r.state, "transient");
        assert_eq!(r.row.and_then(|row| row.transient).as_deref(), Some("timeout, 2 attempts in a row"));
        assert_eq!(r.next.map(|(_, text)| text).as_deref(), Some("now"), "due: checked as soon as a slot allows");
    }

    #[test]
    fn spans_and_ages_round_down_to_one_unit() {
        let s = 1_000_000;
        for (us, shown) in [(0, "0 s"), (59 * s + 999_999, "59 s"), (60 * s, "1 min"), (3599 * s, "59 min")] {
            assert_eq!(span(us), shown);
        }
        for (us, shown) in [(3600 * s, "1 h"), (47 * 3600 * s, "47 h"), (48 * 3600 * s, "2 d"), (-5 * s, "0 s")] {
            assert_eq!(span(us), shown);
        }
        let now = 1_700_000_000_000_000;
        assert_eq!(Ago::new(now, now - 3 * 3600 * s - 5).ago, "3 h ago");
        assert_eq!(Ago::new(now, now + s).ago, "just now", "a clock ahead of this one's");
        assert_eq!(Ago::new(now, now).when.human, "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn a_crawler_row_says_what_is_unknown_and_flags_a_claim_alone() {
        use crate::crawler::Crawler;
        use crate::crawlers::report::{Lag, Unseen};
        let s = 1_000_000;
        let now = 1_700_000_000_000_000;
        let verified = CrawlerReport {
            crawler: Crawler::Googlebot,
            last_index_us: Some(now - 90 * s),
            last_page_us: Some(now - 2 * 3600 * s),
            last_claimed_us: None,
            last_unverifiable_us: None,
            fetches: 1234,
            not_modified: 518,
            lag: Lag { median_secs: Some(720.0), p90_secs: Some(3.5 * 3600.0), samples: 4 },
            unseen: Some(Unseen { pages: 3, oldest_change_us: Some(now - 86_400 * s) }),
        };
        let row = CrawlerRow::new(&verified, now);
        assert_eq!((row.name.as_str(), row.claimed_only), ("Googlebot", false));
        assert_eq!(row.last_index.as_ref().map(|a| a.ago.as_str()), Some("1 min ago"));
        assert_eq!(row.last_page.as_ref().map(|a| a.ago.as_str()), Some("2 h ago"));
        assert_eq!((row.lag.as_str(), row.samples.as_str()), ("12 min / 3 h", "4 reads"));
        assert_eq!((row.not_modified.as_str(), row.fetches.as_str()), ("42%", "1,234 fetches"));
        assert_eq!(row.unseen, "3 pages");
        assert_eq!(row.oldest_unseen.map(|w| w.human).as_deref(), Some("2023-11-13 22:13:20 UTC"));
        let claimed = CrawlerReport {
            crawler: Crawler::Bingbot,
            last_index_us: None,
            last_page_us: None,
            last_claimed_us: Some(now - 10 * s),
            last_unverifiable_us: None,
            fetches: 0,
            not_modified: 0,
            lag: Lag::default(),
            unseen: None,
        };
        let row = CrawlerRow::new(&claimed, now);
        assert!(row.claimed_only);
        assert_eq!((row.last_index.is_none(), row.last_page.is_none()), (true, true));
        assert_eq!(row.last_claimed.map(|a| a.ago).as_deref(), Some("10 s ago"));
        assert_eq!((row.lag.as_str(), row.not_modified.as_str(), row.unseen.as_str()), ("", "", ""));
        let all_seen = CrawlerReport { unseen: Some(Unseen { pages: 0, oldest_change_us: None }), ..claimed };
        assert_eq!(CrawlerRow::new(&all_seen, now).unseen, "none");
    }

    #[test]
    fn a_read_cell_says_read_not_since_change_or_never() {
        use crate::crawler::Crawler;
        let now = 1_700_000_000_000_000;
        let cell = |last_read_us, current| {
            let c = ReadCell::new(&PageReads { crawler: Crawler::Bingbot, last_read_us, current }, now);
            (c.state, c.text)
        };
        assert_eq!(cell(Some(now - 3 * 3_600_000_000), true), ("current", "read 3 h ago".to_owned()));
        assert_eq!(cell(Some(now - 1), false), ("stale", "not since change".to_owned()));
        assert_eq!(cell(None, false), ("never", "never".to_owned()));
        assert_eq!(cell(None, true), ("current", "read".to_owned()));
    }
}
