//! Configuration: built-in defaults (`config/default.toml`, embedded) → a TOML file → environment variables,
//! validated once at start so that a bad setting fails fast with a message naming it.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::ops::{RangeFrom, RangeInclusive, RangeToInclusive};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::access::ApiTokens;
use crate::crawlers::RangeSources;
use crate::domain::site::check_site_name;
use crate::domain::{DEFAULT_SITE, PublicUrl, Section, Site, SiteSpec};
use crate::health::Policy;
use crate::net::host::{ForwardedHeader, TrustedProxies};
use crate::page::Limits;
use crate::redact::redact_url;
use crate::store::{Backend, Pooler, StoreOptions};
use crate::telemetry::AccessLog;

/// The protocol's maxima for one sitemap.
pub const PROTOCOL_MAX_URLS: u32 = 50_000;
pub const PROTOCOL_MAX_BYTES: u64 = 52_428_800;

/// The page cache's weights are `u32` byte counts summed by moka into a `u64`; 64 GiB is far beyond any sitemap set.
const MAX_CACHE_BYTES: u64 = 64 << 30;
/// 1 GiB/s: a floor above what any network delivers would close every connection.
const MAX_MIN_SEND_RATE: u64 = 1 << 30;
/// Changes made through another replica show within this; a minute is the most a crawler-facing answer may lag.
const MAX_STATE_TTL_MS: u64 = 60_000;
/// An hour: the longest the IndexNow sender waits between two looks at the outbox, or before a first retry.
const MAX_INDEXNOW_MS: u64 = 3_600_000;

const DEFAULTS: &str = include_str!("../../../config/default.toml");
/// Variables with the settings' prefix that are not settings: the configuration file, and the tests' schema check.
const OTHER_VARIABLES: &[&str] = &["SITEMAPD_CONFIG", "SITEMAPD_XSD_VALIDATE"];
const DEFAULT_FILE: &str = "config/default.toml";

/// Every setting, declared once: its name (the key in `config/default.toml`, which holds its default and its
/// documentation), its environment variable, its type, and what it accepts. From this table come `Raw` (what the
/// file and the environment hold), [`ENV`], [`Config`] (the validated settings), the checks and the logged form.
///
/// `name: Type = "VARIABLE"`, then optionally, in this order:
/// - `parse f`: the file holds a string, which `f(&str, Named) -> anyhow::Result<Type>` turns into the value;
/// - `in RANGE` or `in RANGE => "what"`: the values allowed (`a..=b`, `a..`, `..=b`); the error says the setting
///   "must be from a to b" (at least a, at most b), or "must be what", then ", not VALUE";
/// - `check f`: any other check, `f(&Type, Named) -> anyhow::Result<()>`;
/// - `show f`: how the value is logged, `f(&Type) -> impl Debug` (default: its `Debug`). Secrets are never logged.
macro_rules! settings {
    ($(
        $(#[$doc:meta])*
        $key:ident: $ty:ty = $var:literal
            $(, parse $parse:expr)?
            $(, in $range:expr $(=> $must:expr)?)?
            $(, check $check:expr)?
            $(, show $show:expr)?;
    )*) => {
        /// Each setting and the environment variable that overrides it.
        const ENV: &[(&str, &str)] = &[$((stringify!($key), $var)),*];

        /// The settings as the file and the environment hold them.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            $($key: settings!(@raw $ty $(, $parse)?),)*
        }

        /// The validated configuration: each setting under its name in `config/default.toml`.
        #[derive(Clone)]
        pub struct Config {
            $($(#[$doc])* pub $key: $ty,)*
        }

        impl Config {
            /// Each setting parsed and checked, in the table's order; the first refused one is the error.
            fn from_raw(raw: Raw) -> anyhow::Result<Self> {
                $(
                    let named = Named { key: stringify!($key), var: $var };
                    let _ = named; // a setting may have no check
                    let $key: $ty = settings!(@parse raw.$key, named $(, $parse)?);
                    $(within(&$key, &$range, None $(.or(Some($must.to_string())))?, named)?;)?
                    $(($check)(&$key, named)?;)?
                )*
                Ok(Self { $($key),* })
            }
        }

        /// Secrets redacted: safe to log. Each setting appears under its name in `config/default.toml`; one that
        /// another replaces ([`Config::replaced`]) as such.
        impl fmt::Debug for Config {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut shown = f.debug_struct("Config");
                $(
                    match self.replaced(stringify!($key)) {
                        Some(by) => shown.field(stringify!($key), &format_args!("(replaced by {by})")),
                        None => shown.field(stringify!($key), &settings!(@show self.$key $(, $show)?)),
                    };
                )*
                shown.finish()
            }
        }
    };
    (@raw $ty:ty) => { $ty };
    (@raw $ty:ty, $parse:expr) => { String };
    (@parse $raw:expr, $named:expr) => { $raw };
    (@parse $raw:expr, $named:expr, $parse:expr) => { ($parse)(&$raw, $named)? };
    (@show $value:expr) => { $value };
    (@show $value:expr, $show:expr) => { ($show)(&$value) };
}

settings! {
    database_url: String = "DATABASE_URL", check database_backend, show redact_url;
    /// A Postgres streaming replica that sitemap pages, the page table and the read API are read from (empty: the
    /// primary, `database_url`). See [`crate::store::StoreOptions::read_url`].
    database_read_url: String = "DATABASE_READ_URL", check read_url_backend, show show_read_url;
    /// `transaction`: both Postgres URLs lead to a transaction-mode pooler (PgBouncer). See
    /// [`crate::store::Pooler`].
    database_pooler: Pooler = "SITEMAPD_DATABASE_POOLER", parse parse_pooler, show |p: &Pooler| p.as_str();
    public_url: PublicUrl = "SITEMAPD_PUBLIC_URL", parse parse_public_url, show PublicUrl::as_str;
    /// Several sites (`name=URL, …`); empty: one site, named `default`, at `public_url`. See [`Config::site_specs`].
    sites: Vec<SiteSpec> = "SITEMAPD_SITES", parse parse_sites, show show_sites;
    /// Peers whose `Forwarded` / `X-Forwarded-Host` headers name the host a request was for.
    trusted_proxies: TrustedProxies = "SITEMAPD_TRUSTED_PROXIES", parse parse_trusted_proxies, show TrustedProxies::shown;
    /// Which header a trusted proxy names the host in; the other is ignored (a client may have sent it).
    forwarded_header: ForwardedHeader = "SITEMAPD_FORWARDED_HEADER", parse parse_forwarded_header;
    bind: SocketAddr = "SITEMAPD_BIND", parse parse_bind;
    /// Held as digests, never in clear; each for every site or scoped to some.
    api_tokens: ApiTokens = "SITEMAPD_API_TOKENS", parse parse_api_tokens;
    page_max_urls: u32 = "SITEMAPD_PAGE_MAX_URLS",
        in 1..=PROTOCOL_MAX_URLS => format!("from 1 to {PROTOCOL_MAX_URLS} (the sitemaps.org maximum)");
    page_max_bytes: u64 = "SITEMAPD_PAGE_MAX_BYTES",
        in Limits::least_max_bytes()..=PROTOCOL_MAX_BYTES => format!(
            "from {} (room for one entry with the longest allowed loc) to {PROTOCOL_MAX_BYTES} (the sitemaps.org \
             maximum)",
            Limits::least_max_bytes()
        );
    /// Sections whose pages hold fewer URLs (`NAME=N, …`, in every site); the others take `page_max_urls`.
    section_max_urls: BTreeMap<String, u32> = "SITEMAPD_SECTION_MAX_URLS", parse parse_section_max_urls;
    max_json_bytes: usize = "SITEMAPD_MAX_JSON_BYTES", in 1024..;
    max_line_bytes: usize = "SITEMAPD_MAX_LINE_BYTES", in 4096..;
    max_json_entries: usize = "SITEMAPD_MAX_JSON_ENTRIES", in 1..=1_000_000;
    /// The memory all write request bodies being read, parsed and written may take at once (see
    /// [`crate::net::body_budget`]).
    body_memory_bytes: u64 = "SITEMAPD_BODY_MEMORY_BYTES", in 1_048_576..=MAX_CACHE_BYTES;
    api_timeout_secs: u64 = "SITEMAPD_API_TIMEOUT_SECS", in 1..=86_400;
    header_read_timeout_secs: u64 = "SITEMAPD_HEADER_READ_TIMEOUT_SECS", in 1..=300;
    /// The longest a connection may accept no bytes of a response before it is closed.
    write_timeout_secs: u64 = "SITEMAPD_WRITE_TIMEOUT_SECS", in 1..=3600;
    /// Bytes per second a client must take while a response waits for it, measured over `write_timeout_secs` of
    /// waiting (0: no floor). See [`crate::net::send_rate`].
    min_send_rate: u64 = "SITEMAPD_MIN_SEND_RATE",
        in 0..=MAX_MIN_SEND_RATE => format!("from 0 to {MAX_MIN_SEND_RATE} bytes per second");
    /// The longest a write request's body may send nothing before it is cut (408), and the window the minimum
    /// receive rate is measured over. See [`crate::net::receive_rate`].
    body_idle_secs: u64 = "SITEMAPD_BODY_IDLE_SECS", in 1..=300;
    /// Bytes per second a write request's body must arrive at, measured over each `body_idle_secs` of waiting
    /// (0: no floor); a slower body is cut (408).
    min_receive_rate: u64 = "SITEMAPD_MIN_RECEIVE_RATE",
        in 0..=MAX_MIN_SEND_RATE => format!("from 0 to {MAX_MIN_SEND_RATE} bytes per second");
    ndjson_batch: usize = "SITEMAPD_NDJSON_BATCH", in 1..=100_000;
    db_max_connections: u32 = "SITEMAPD_DB_MAX_CONNECTIONS", check at_least_one;
    db_acquire_timeout_secs: u64 = "SITEMAPD_DB_ACQUIRE_TIMEOUT_SECS",
        in 1..=5 => "from 1 to 5 (requests that need an unreachable store must answer 503 within 5 seconds)";
    gzip_level: u32 = "SITEMAPD_GZIP_LEVEL", in 1..=9;
    stream_timeout_secs: u64 = "SITEMAPD_STREAM_TIMEOUT_SECS", in 1..=3600;
    /// Pages read, rendered and compressed at once by this process (0: one per core); the others wait their turn
    /// within `stream_timeout_secs`.
    render_concurrency: u32 = "SITEMAPD_RENDER_CONCURRENCY", in 0..=256;
    /// Bytes of rendered gzip pages kept in memory (0: none).
    cache_bytes: u64 = "SITEMAPD_CACHE_BYTES", in ..=MAX_CACHE_BYTES;
    /// Render the pages a write changed into the page cache in the background (with the cache on).
    prerender: bool = "SITEMAPD_PRERENDER";
    /// How long a snapshot of the page table answers before it is read again.
    state_ttl_ms: u64 = "SITEMAPD_STATE_TTL_MS", in 0..=MAX_STATE_TTL_MS;
    /// The news sitemap lists articles published within this many hours (Google News: two days).
    news_window_hours: u64 = "SITEMAPD_NEWS_WINDOW_HOURS", in 1..=720;
    /// The removed-URLs sitemap keeps a deleted loc this many days (0: off, no tombstone kept).
    removed_days: u32 = "SITEMAPD_REMOVED_DAYS", in 0..=365;
    /// `X-Robots-Tag` on every sitemap answer (empty: none), so that sitemap files stay out of search results.
    robots_tag: String = "SITEMAPD_ROBOTS_TAG", check header_text;
    /// Whether `GET /robots.txt` is answered: `robots_txt_body`, then the site's `Sitemap:` line.
    robots_txt: bool = "SITEMAPD_ROBOTS_TXT";
    robots_txt_body: String = "SITEMAPD_ROBOTS_TXT_BODY", check robots_body;
    /// Serve the HTML view for people at `/view/` (an internal route, like `/metrics`).
    view: bool = "SITEMAPD_VIEW";
    /// After SIGTERM/SIGINT, the longest in-flight requests may still run before they are cut off.
    shutdown_grace_secs: u64 = "SITEMAPD_SHUTDOWN_GRACE_SECS", in 0..=3600;
    /// Threads that accept and serve connections, each with a runtime of its own (0: one per core). See
    /// `serve_threads` at the crate root.
    serve_threads: usize = "SITEMAPD_SERVE_THREADS", in 0..=1024;
    log_format: LogFormat = "SITEMAPD_LOG_FORMAT", parse parse_log_format;
    /// Which requests' `answered` line is logged at INFO (the others at DEBUG). See [`AccessLog`].
    access_log: AccessLog = "SITEMAPD_ACCESS_LOG", parse parse_access_log;
    /// Record which crawler fetched which sitemap, verified, and how long after each page's change (see
    /// [`crate::crawlers`]).
    crawler_telemetry: bool = "SITEMAPD_CRAWLER_TELEMETRY";
    /// Crawlers' IP ranges from a file or URL instead of the shipped ones (`NAME=SOURCE, …`).
    crawler_ranges: RangeSources = "SITEMAPD_CRAWLER_RANGES", parse parse_crawler_ranges, show RangeSources::shown;
    /// How often the range files and URLs are read again.
    crawler_ranges_refresh_hours: u64 = "SITEMAPD_CRAWLER_RANGES_REFRESH_HOURS", in 1..=720;
    /// Verify a crawler by forward-confirmed reverse DNS (the system resolver) when its address is in no range.
    crawler_rdns: bool = "SITEMAPD_CRAWLER_RDNS";
    /// How often the telemetry recorded in memory is written to the database.
    crawler_flush_ms: u64 = "SITEMAPD_CRAWLER_FLUSH_MS", in 50..=300_000;
    /// The window of the lag figures (median, p90) the API, the view and the metrics give; older page reads that a
    /// newer one replaced are deleted.
    crawler_window_days: u32 = "SITEMAPD_CRAWLER_WINDOW_DAYS", in 1..=365;
    /// URL health: the sites whose stored URLs are checked and each one's policy (`SITE=report|exclude, …`;
    /// empty: none). See [`HealthSites`].
    health_check: HealthSites = "SITEMAPD_HEALTH_CHECK", parse HealthSites::parse, show HealthSites::shown;
    /// URL health: every stored URL is checked again within this many days (new and changed URLs at once).
    health_cycle_days: u32 = "SITEMAPD_HEALTH_CYCLE_DAYS", in 1..=365;
    /// URL health: the most checks in flight to one host from this process.
    health_concurrency: u32 = "SITEMAPD_HEALTH_CONCURRENCY", in 1..=64;
    /// URL health: the most requests a second to one host, shared by every replica (through the database).
    health_rate: u32 = "SITEMAPD_HEALTH_RATE", in 1..=1000;
    /// URL health: the longest one check's request may take, connecting and reading the head included.
    health_timeout_secs: u64 = "SITEMAPD_HEALTH_TIMEOUT_SECS", in 1..=300;
    /// URL health: the most bytes of a page's body read (the reading stops at the end of its `<head>`).
    health_head_bytes: u64 = "SITEMAPD_HEALTH_HEAD_BYTES", in 1024..=16_777_216;
    /// URL health: how often the checker looks for due URLs when it has none.
    health_poll_ms: u64 = "SITEMAPD_HEALTH_POLL_MS", in 10..=60_000;
    /// IndexNow keys by site (empty: no change notification). See [`IndexNowKeys`].
    indexnow_keys: IndexNowKeys = "SITEMAPD_INDEXNOW_KEYS", parse IndexNowKeys::parse, show IndexNowKeys::shown;
    /// Where change notifications are sent (`POST`).
    indexnow_endpoint: url::Url = "SITEMAPD_INDEXNOW_ENDPOINT", parse parse_endpoint, show url::Url::as_str;
    /// How often the sender looks for queued notifications when it has nothing to send.
    indexnow_interval_ms: u64 = "SITEMAPD_INDEXNOW_INTERVAL_MS", in 10..=MAX_INDEXNOW_MS;
    /// The first retry delay after a failed send; it doubles with each failure, to at most an hour.
    indexnow_retry_base_ms: u64 = "SITEMAPD_INDEXNOW_RETRY_BASE_MS", in 10..=MAX_INDEXNOW_MS;
    /// Failed sends after which a URL's notification is dropped.
    indexnow_max_attempts: u32 = "SITEMAPD_INDEXNOW_MAX_ATTEMPTS", in 1..=1000;
    /// The longest one notification request may take, connecting included.
    indexnow_timeout_secs: u64 = "SITEMAPD_INDEXNOW_TIMEOUT_SECS", in 1..=300;
}

/// A setting as error messages name it: `page_max_urls (SITEMAPD_PAGE_MAX_URLS)`.
#[derive(Clone, Copy)]
struct Named {
    key: &'static str,
    var: &'static str,
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.key, self.var)
    }
}

/// The values a numeric setting allows, and how an error message states them.
trait Allowed<T> {
    fn allows(&self, value: &T) -> bool;
    fn describe(&self) -> String;
}

impl<T: PartialOrd + fmt::Display> Allowed<T> for RangeInclusive<T> {
    fn allows(&self, value: &T) -> bool {
        self.contains(value)
    }
    fn describe(&self) -> String {
        format!("from {} to {}", self.start(), self.end())
    }
}

impl<T: PartialOrd + fmt::Display> Allowed<T> for RangeFrom<T> {
    fn allows(&self, value: &T) -> bool {
        self.contains(value)
    }
    fn describe(&self) -> String {
        format!("at least {}", self.start)
    }
}

impl<T: PartialOrd + fmt::Display> Allowed<T> for RangeToInclusive<T> {
    fn allows(&self, value: &T) -> bool {
        self.contains(value)
    }
    fn describe(&self) -> String {
        format!("at most {}", self.end)
    }
}

/// `{named} must be {what}, not {value}` unless `allowed` allows `value`; `what` defaults to the range's words.
fn within<T: fmt::Display>(
    value: &T,
    allowed: &impl Allowed<T>,
    what: Option<String>,
    named: Named,
) -> anyhow::Result<()> {
    if !allowed.allows(value) {
        let what = what.unwrap_or_else(|| allowed.describe());
        bail!("{named} must be {what}, not {value}");
    }
    Ok(())
}

fn at_least_one(value: &u32, named: Named) -> anyhow::Result<()> {
    if *value == 0 {
        bail!("{named} must be at least 1");
    }
    Ok(())
}

/// The store's own choice of backend ([`Backend::from_url`]): a URL that no store opens is refused here.
fn database_backend(url: &str, named: Named) -> anyhow::Result<()> {
    match Backend::from_url(url) {
        None => bail!("{named} must start with sqlite:// or postgres://"),
        // `sqlite:` or `sqlite://` alone would give each pooled connection a private temporary database.
        Some(Backend::Sqlite) if sqlite_path(url).is_empty() => {
            bail!("{named} must name the SQLite file: sqlite://PATH (e.g. sqlite://sitemapd.db)")
        }
        Some(_) => Ok(()),
    }
}

/// Empty, or a Postgres URL (a replica is a Postgres feature; that `database_url` is Postgres too is checked when
/// the store opens).
fn read_url_backend(url: &str, named: Named) -> anyhow::Result<()> {
    match Backend::from_url(url) {
        _ if url.is_empty() => Ok(()),
        Some(Backend::Postgres) => Ok(()),
        _ => bail!("{named} must be empty or start with postgres:// (a streaming replica of the database_url server)"),
    }
}

/// The read URL as logged: empty, or without its secrets ([`redact_url`]).
fn show_read_url(url: &str) -> String {
    if url.is_empty() { String::new() } else { redact_url(url) }
}

/// The file part of an SQLite URL: what follows `sqlite:` (and `//`), up to its query.
fn sqlite_path(url: &str) -> &str {
    let rest = url.strip_prefix("sqlite:").unwrap_or(url);
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    rest.split('?').next().unwrap_or("")
}

fn parse_public_url(raw: &str, named: Named) -> anyhow::Result<PublicUrl> {
    PublicUrl::parse(raw).map_err(|e| anyhow::anyhow!("{named} {:?}: {e}", shown_public_url(raw)))
}

/// `name=URL, name=URL, …` (blanks ignored): distinct names, and distinct hosts (requests are routed by host).
fn parse_sites(raw: &str, named: Named) -> anyhow::Result<Vec<SiteSpec>> {
    let mut sites: Vec<SiteSpec> = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, url)) = item.split_once('=') else {
            bail!("{named}: {item:?} must be NAME=PUBLIC_URL, e.g. www=https://www.example.com/");
        };
        let name = name.trim();
        check_site_name(name).map_err(|e| anyhow::anyhow!("{named}: {e}"))?;
        let public_url = PublicUrl::parse(url)
            .map_err(|e| anyhow::anyhow!("{named}: site {name} {:?}: {e}", shown_public_url(url)))?;
        if sites.iter().any(|s| s.name == name) {
            bail!("{named}: the site name {name} is given twice");
        }
        let spec = SiteSpec { name: name.to_owned(), public_url };
        let authority = Site::new(0, spec.clone()).authority().to_owned();
        if let Some(other) = sites.iter().find(|s| Site::new(0, (*s).clone()).authority() == authority) {
            bail!(
                "{named}: sites {} and {name} are both on {authority}; requests are routed to a site by host, so each \
                 site needs a host of its own",
                other.name
            );
        }
        sites.push(spec);
    }
    Ok(sites)
}

/// A header value of visible ASCII and spaces (or empty).
fn header_text(value: &str, named: Named) -> anyhow::Result<()> {
    if value.bytes().any(|b| !(b == b' ' || b.is_ascii_graphic())) {
        bail!("{named} must be printable ASCII (a header value such as \"noindex\"), or empty for none");
    }
    Ok(())
}

/// At most 64 KiB of text: a robots.txt body (Google reads the first 500 KiB).
fn robots_body(value: &impl AsRef<str>, named: Named) -> anyhow::Result<()> {
    let value = value.as_ref();
    if value.len() > 64 * 1024 {
        bail!("{named} must be at most 65536 bytes, not {}", value.len());
    }
    Ok(())
}

/// `NAME=N, …`: each NAME a section name ([`Section`]) given once, each N from 1 to the protocol's 50,000.
fn parse_section_max_urls(raw: &str, named: Named) -> anyhow::Result<BTreeMap<String, u32>> {
    let mut sizes = BTreeMap::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, max)) = item.split_once('=') else {
            bail!("{named}: {item:?} must be SECTION=URLS, e.g. products=1000");
        };
        let section = Section::parse(name.trim()).map_err(|e| anyhow::anyhow!("{named}: {e}"))?;
        let max: u32 = match max.trim().parse() {
            Ok(n) if (1..=PROTOCOL_MAX_URLS).contains(&n) => n,
            _ => bail!("{named}: {section}={} must give from 1 to {PROTOCOL_MAX_URLS} URLs a page", max.trim()),
        };
        if sizes.insert(section.as_str().to_owned(), max).is_some() {
            bail!("{named}: section {section} is given twice");
        }
    }
    Ok(sizes)
}

fn show_sites(sites: &[SiteSpec]) -> Vec<String> {
    sites.iter().map(|s| format!("{}={}", s.name, s.public_url)).collect()
}

fn parse_bind(raw: &str, named: Named) -> anyhow::Result<SocketAddr> {
    raw.parse().with_context(|| format!("{named} {raw:?} is not an IP address and port"))
}

fn parse_trusted_proxies(raw: &str, named: Named) -> anyhow::Result<TrustedProxies> {
    TrustedProxies::parse(raw).map_err(|e| anyhow::anyhow!("{named}: {e}"))
}

fn parse_crawler_ranges(raw: &str, named: Named) -> anyhow::Result<RangeSources> {
    RangeSources::parse(raw).map_err(|e| anyhow::anyhow!("{named}: {e}"))
}

fn parse_api_tokens(raw: &str, named: Named) -> anyhow::Result<ApiTokens> {
    ApiTokens::parse(raw).map_err(|e| anyhow::anyhow!("{named}: {e}"))
}

fn parse_forwarded_header(raw: &str, named: Named) -> anyhow::Result<ForwardedHeader> {
    match raw.to_ascii_lowercase().as_str() {
        "x-forwarded-host" => Ok(ForwardedHeader::XForwardedHost),
        "forwarded" => Ok(ForwardedHeader::Forwarded),
        _ => bail!("{named} must be \"x-forwarded-host\" or \"forwarded\", not {raw:?}"),
    }
}

fn parse_pooler(raw: &str, named: Named) -> anyhow::Result<Pooler> {
    Pooler::parse(raw).ok_or_else(|| anyhow::anyhow!("{named} must be \"none\" or \"transaction\", not {raw:?}"))
}

fn parse_log_format(raw: &str, named: Named) -> anyhow::Result<LogFormat> {
    match raw {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => bail!("{named} must be \"text\" or \"json\", not {other:?}"),
    }
}

fn parse_access_log(raw: &str, named: Named) -> anyhow::Result<AccessLog> {
    match raw {
        "all" => Ok(AccessLog::All),
        "writes_and_errors" => Ok(AccessLog::WritesAndErrors),
        other => bail!("{named} must be \"writes_and_errors\" or \"all\", not {other:?}"),
    }
}

/// The IndexNow endpoint: an absolute http(s) URL.
fn parse_endpoint(raw: &str, named: Named) -> anyhow::Result<url::Url> {
    let url =
        url::Url::parse(raw.trim()).map_err(|e| anyhow::anyhow!("{named} {raw:?} is not an absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("{named} must be an http or https URL, not {raw:?}");
    }
    Ok(url)
}

/// The IndexNow keys (`indexnow_keys`: comma-separated, blanks ignored): `KEY` for the default site (the one site
/// of a deployment without `sites`), or `SITE=KEY`.
/// A key is 8 to 128 characters of `a-z`, `A-Z`, `0-9` and `-` (the IndexNow protocol's rule). A key is no
/// secret (it is served at `/<key>.txt`), so it is logged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexNowKeys(Vec<(String, String)>);

impl IndexNowKeys {
    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let mut keys: Vec<(String, String)> = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (site, key) = match item.split_once('=') {
                Some((site, key)) => (site.trim(), key.trim()),
                None => (DEFAULT_SITE, item),
            };
            if let Err(e) = check_indexnow_key(key) {
                bail!("{named}: {e}");
            }
            // That the site is configured is checked with the sites (`Config::validate`).
            check_site_name(site).map_err(|e| anyhow::anyhow!("{named}: {item:?}: {e}"))?;
            if keys.iter().any(|(s, _)| s == site) {
                bail!("{named}: the site {site:?} is given two keys; a site has one");
            }
            keys.push((site.to_owned(), key.to_owned()));
        }
        Ok(Self(keys))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As logged: `SITE=KEY` each.
    fn shown(&self) -> Vec<String> {
        self.0.iter().map(|(site, key)| format!("{site}={key}")).collect()
    }

    /// (site name, key), in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(site, key)| (site.as_str(), key.as_str()))
    }
}

/// The sites whose URLs are checked (`health_check`: comma-separated, blanks ignored): `SITE=POLICY`, or `POLICY`
/// alone for the default site; a policy is `report` (problems are reported, the sitemaps never change for them) or
/// `exclude` (a URL with a definite problem is left out of its page until it is healthy again).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthSites(Vec<(String, Policy)>);

impl HealthSites {
    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let mut sites: Vec<(String, Policy)> = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (site, policy) = match item.split_once('=') {
                Some((site, policy)) => (site.trim(), policy.trim()),
                None => (DEFAULT_SITE, item),
            };
            let Some(policy) = Policy::parse(policy) else {
                bail!("{named}: {item:?}: the policy is \"report\" or \"exclude\", not {policy:?}");
            };
            // That the site is configured is checked with the sites (`Config::validate`).
            check_site_name(site).map_err(|e| anyhow::anyhow!("{named}: {item:?}: {e}"))?;
            if sites.iter().any(|(s, _)| s == site) {
                bail!("{named}: the site {site:?} is given twice; a site has one policy");
            }
            sites.push((site.to_owned(), policy));
        }
        Ok(Self(sites))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As logged: `SITE=POLICY` each.
    fn shown(&self) -> Vec<String> {
        self.0.iter().map(|(site, policy)| format!("{site}={}", policy.name())).collect()
    }

    /// (site name, policy), in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Policy)> {
        self.0.iter().map(|(site, policy)| (site.as_str(), *policy))
    }

    /// The policy of the site named `site`, `None` when it is not checked.
    pub fn policy(&self, site: &str) -> Option<Policy> {
        self.0.iter().find(|(s, _)| s == site).map(|(_, p)| *p)
    }
}

/// The IndexNow protocol's rule for a key: 8 to 128 characters, each a letter (`a-z`, `A-Z`), a digit or `-`.
pub fn check_indexnow_key(key: &str) -> Result<(), String> {
    if let Some(c) = key.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-')) {
        return Err(format!("an IndexNow key holds only a-z, A-Z, 0-9 and -, not {c:?} ({key:?})"));
    }
    if !(8..=128).contains(&key.len()) {
        return Err(format!("an IndexNow key is 8 to 128 characters, not {} ({key:?})", key.len()));
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl Config {
    /// Loads defaults, then `file` (or `./config/default.toml` when present), then the process environment.
    /// An unknown `SITEMAPD_*` variable (a misspelled setting) is refused.
    pub fn load(file: Option<&Path>) -> anyhow::Result<Self> {
        check_variable_names(std::env::vars_os().map(|(name, _)| name.to_string_lossy().into_owned()))?;
        Self::load_from(file, |name| std::env::var(name).ok())
    }

    /// As [`Config::load`], with the environment given as a function (for tests).
    pub fn load_from(file: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        use config::{File, FileFormat};
        let mut builder = config::Config::builder().add_source(File::from_str(DEFAULTS, FileFormat::Toml));
        builder = match file {
            Some(path) => builder.add_source(File::from(path).format(FileFormat::Toml).required(true)),
            None => builder.add_source(File::new(DEFAULT_FILE, FileFormat::Toml).required(false)),
        };
        for (key, var) in ENV {
            builder = builder.set_override_option(*key, env(var))?;
        }
        let raw: Raw = builder
            .build()
            .map_err(|e| anyhow::anyhow!("cannot read the configuration: {}", without_source_lines(&e.to_string())))?
            .try_deserialize()
            .map_err(|e| type_error(&e, file, &env))?;
        Self::validate(raw)
    }

    /// The settings' checks, then those between settings.
    fn validate(raw: Raw) -> anyhow::Result<Self> {
        let config = Self::from_raw(raw)?;
        let specs = config.site_specs();
        if let Some(name) = config.api_tokens.scoped_sites().find(|n| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "api_tokens (SITEMAPD_API_TOKENS): a token is scoped to the site {name:?}, which is not configured \
                 (sites: {})",
                names.join(", ")
            );
        }
        if let Some((name, _)) = config.indexnow_keys.iter().find(|(n, _)| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "indexnow_keys (SITEMAPD_INDEXNOW_KEYS): a key is given for the site {name:?}, which is not \
                 configured (sites: {}); a key without SITE= is the site named {DEFAULT_SITE}'s",
                names.join(", ")
            );
        }
        if let Some((name, _)) = config.health_check.iter().find(|(n, _)| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "health_check (SITEMAPD_HEALTH_CHECK): a policy is given for the site {name:?}, which is not \
                 configured (sites: {}); a policy without SITE= is the site named {DEFAULT_SITE}'s",
                names.join(", ")
            );
        }
        if config.crawler_telemetry {
            crate::crawlers::verify::check_files(&config.crawler_ranges)
                .map_err(|e| anyhow::anyhow!("crawler_ranges (SITEMAPD_CRAWLER_RANGES): {e}"))?;
        }
        if config.api_tokens.is_empty() && !config.bind.ip().is_loopback() {
            bail!(
                "refusing to listen on {} without api_tokens (SITEMAPD_API_TOKENS): the write API would be open \
                 to the network. Set a token, or bind to a loopback address such as 127.0.0.1.",
                config.bind
            );
        }
        Ok(config)
    }

    /// The setting that replaces `key`, when one does: `sites` replaces `public_url`.
    fn replaced(&self, key: &str) -> Option<&'static str> {
        (key == "public_url" && !self.sites.is_empty()).then_some("sites")
    }

    /// `public_url` when it was set (it is not its default) but `sites` replaces it: start-up warns of it.
    pub fn ignored_public_url(&self) -> Option<&PublicUrl> {
        let default = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml))
            .build()
            .ok()
            .and_then(|c| c.get_string("public_url").ok())
            .and_then(|url| PublicUrl::parse(&url).ok());
        (self.replaced("public_url").is_some() && default.as_ref() != Some(&self.public_url))
            .then_some(&self.public_url)
    }

    /// The page limits (`page_max_urls`, `page_max_bytes`).
    pub fn limits(&self) -> Limits {
        Limits { max_urls: self.page_max_urls, max_bytes: self.page_max_bytes }
    }

    /// The sites served: `sites`, or without it one site named `default` at `public_url`.
    pub fn site_specs(&self) -> Vec<SiteSpec> {
        if self.sites.is_empty() {
            vec![SiteSpec { name: DEFAULT_SITE.to_owned(), public_url: self.public_url.clone() }]
        } else {
            self.sites.clone()
        }
    }

    /// How to open the configured database.
    /// How many threads serve connections: `serve_threads`, or one per core (as the OS reports them to this
    /// process: a container's CPU limit included) when it is 0.
    pub fn serving_threads(&self) -> usize {
        match self.serve_threads {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            n => n,
        }
    }

    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            url: self.database_url.clone(),
            read_url: Some(self.database_read_url.clone()).filter(|u| !u.is_empty()),
            sites: self.site_specs(),
            limits: self.limits(),
            section_max_urls: self.section_max_urls.clone(),
            max_connections: self.db_max_connections,
            pooler: self.database_pooler,
            acquire_timeout: Duration::from_secs(self.db_acquire_timeout_secs),
            notify_sites: self.indexnow_keys.iter().map(|(site, _)| site.to_owned()).collect(),
            check_sites: self.health_check.iter().map(|(site, _)| site.to_owned()).collect(),
            removed_days: self.removed_days,
            serving: true,
        }
    }
}

/// Refuses a variable that looks like a setting's (`SITEMAPD_*`) but is none, naming the closest known one: a
/// misspelled setting would otherwise be ignored silently.
///
/// The database's variables have no prefix (`DATABASE_URL`, as every tool names it): a name a typo or two away from
/// one of them (`DATABSE_URL`, `DATABASE_ULR`, `database_url`) is refused too, since the server would otherwise
/// start on the default database, a fresh `./sitemapd.db`.
fn check_variable_names(names: impl IntoIterator<Item = String>) -> anyhow::Result<()> {
    let known = || ENV.iter().map(|(_, var)| *var).chain(OTHER_VARIABLES.iter().copied());
    let misspelled_database = |n: &str| {
        let upper = n.to_ascii_uppercase();
        !known().any(|k| k == n)
            && ["DATABASE_URL", "DATABASE_READ_URL"].iter().any(|d| strsim::damerau_levenshtein(&upper, d) <= 2)
    };
    let mut unknown: Vec<String> = names
        .into_iter()
        .filter(|n| (n.starts_with("SITEMAPD_") && !known().any(|k| k == n)) || misspelled_database(n))
        .collect();
    unknown.sort();
    let Some(name) = unknown.first() else { return Ok(()) };
    let upper = name.to_ascii_uppercase();
    let closest = known()
        .map(|k| (strsim::damerau_levenshtein(&upper, k), k))
        .min()
        // A misspelling, not just any name: a few edits, fewer for short names.
        .filter(|(distance, _)| {
            let prefixed = name.starts_with("SITEMAPD_");
            *distance <= name.len().saturating_sub("SITEMAPD_".len()).div_ceil(3).max(if prefixed { 1 } else { 2 })
        })
        .map(|(_, k)| format!(" (did you mean {k}?)"))
        .unwrap_or_default();
    let others = match unknown.len() {
        1 => String::new(),
        n => format!(" and {} more: {}", n - 1, unknown[1..].join(", ")),
    };
    bail!(
        "unknown environment variable {name}{closest}{others}. The settings' variables are listed in \
         docs/configuration.md and config/default.toml; SITEMAPD_CONFIG names a configuration file."
    )
}

/// A value of the wrong type (`SITEMAPD_PAGE_MAX_URLS=abc`), as one sentence naming the setting, where the value
/// came from, the value, and what the setting accepts. Other errors as they are.
fn type_error(e: &config::ConfigError, file: Option<&Path>, env: &impl Fn(&str) -> Option<String>) -> anyhow::Error {
    if let Some(unknown) = unknown_setting(&e.to_string(), file) {
        return unknown;
    }
    let mut inner = e;
    let mut at_key = None;
    while let config::ConfigError::At { error, key, .. } = inner {
        at_key = at_key.or(key.as_deref());
        inner = error;
    }
    let config::ConfigError::Type { unexpected, expected, key, .. } = inner else {
        return anyhow::anyhow!("invalid configuration: {e}");
    };
    let Some((key, var)) = key.as_deref().or(at_key).and_then(|k| ENV.iter().find(|(key, _)| *key == k)) else {
        return anyhow::anyhow!("invalid configuration: {e}");
    };
    let accepts = match *expected {
        "an integer" | "an unsigned integer" | "a signed integer" => "a whole number",
        other => other,
    };
    let default = config::Config::builder()
        .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml))
        .build()
        .ok()
        .and_then(|c| c.get_string(key).ok())
        .unwrap_or_default();
    match env(var) {
        Some(value) => anyhow::anyhow!("{key} ({var}) must be {accepts} (default: {default}), not {value:?}"),
        None => {
            let file = file.map_or_else(|| DEFAULT_FILE.to_owned(), |f| f.display().to_string());
            anyhow::anyhow!("{key} in {file} must be {accepts} (default: {default}), not {unexpected}")
        }
    }
}

/// A setting the file names that is none: serde's "unknown field `x`, expected one of …" lists every setting and
/// not the file; this names the file and the closest setting.
fn unknown_setting(message: &str, file: Option<&Path>) -> Option<anyhow::Error> {
    let name = message.split("unknown field `").nth(1)?.split('`').next()?;
    let file = file.map_or_else(|| DEFAULT_FILE.to_owned(), |f| f.display().to_string());
    let closest = ENV
        .iter()
        .map(|(key, _)| (strsim::damerau_levenshtein(&name.to_ascii_lowercase(), key), *key))
        .min()
        .filter(|(distance, _)| *distance <= name.len().div_ceil(3).max(1))
        .map(|(_, key)| format!(" (did you mean {key}?)"))
        .unwrap_or_default();
    Some(anyhow::anyhow!(
        "unknown setting {name:?} in {file}{closest}. config/default.toml lists every setting with its default."
    ))
}

/// A TOML parse error without the quoted source line, which may hold a secret (`database_url = "postgres://u:pw…`):
/// the position and the message stay.
fn without_source_lines(message: &str) -> String {
    let source_line =
        |l: &str| l.trim_start().trim_start_matches(|c: char| c.is_ascii_digit()).trim_start().starts_with('|');
    message.lines().filter(|l| !source_line(l)).map(str::trim).collect::<Vec<_>>().join(" ")
}

/// The public URL as an error message may show it: not its password, nor anything around an `@` it cannot place.
fn shown_public_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("REDACTED"));
            u.into()
        }
        Err(_) if raw.contains('@') => "(unparsable, REDACTED)".to_owned(),
        _ => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::access::Access;

    fn load(vars: &[(&str, &str)]) -> anyhow::Result<Config> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        Config::load_from(Some(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/default.toml"))), |k| {
            vars.get(k).cloned()
        })
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = load(&[]).unwrap();
        assert_eq!(c.database_url, "sqlite://sitemapd.db");
        assert_eq!(c.public_url.as_str(), "http://localhost:8080/");
        assert_eq!(c.bind, "127.0.0.1:8080".parse().unwrap());
        assert!(c.api_tokens.is_empty());
        assert_eq!(c.limits(), Limits { max_urls: 50_000, max_bytes: 52_428_800 });
        assert_eq!(c.max_json_entries, 50_000);
        assert_eq!(c.api_timeout_secs, 300);
        assert_eq!(c.header_read_timeout_secs, 10);
        assert_eq!(c.write_timeout_secs, 30);
        assert_eq!(c.min_send_rate, 4096);
        assert!(c.view, "the view is on unless turned off");
    }

    #[test]
    fn the_view_is_turned_off_by_its_variable() {
        assert!(!load(&[("SITEMAPD_VIEW", "false")]).unwrap().view);
        assert!(load(&[("SITEMAPD_VIEW", "true")]).unwrap().view);
        assert_eq!(
            load(&[("SITEMAPD_VIEW", "maybe")]).unwrap_err().to_string(),
            "view (SITEMAPD_VIEW) must be a boolean (default: true), not \"maybe\""
        );
    }

    #[test]
    fn environment_overrides_and_tokens_split() {
        let c = load(&[
            ("SITEMAPD_API_TOKENS", " a, ,b "),
            ("SITEMAPD_BIND", "0.0.0.0:9000"),
            ("SITEMAPD_PAGE_MAX_URLS", "10"),
            ("DATABASE_URL", "postgres://u:secret@db/x"),
        ])
        .unwrap();
        assert_eq!(c.api_tokens.len(), 2);
        assert!(c.api_tokens.matches("a") && c.api_tokens.matches("b") && !c.api_tokens.matches(""));
        assert_eq!(c.limits().max_urls, 10);
        let shown = format!("{c:?}");
        assert!(!shown.contains("secret") && !shown.contains("\"a\""), "{shown}");
        assert!(shown.contains("[2 redacted]"));
    }

    #[test]
    fn refuses_a_public_address_without_a_token() {
        let e = load(&[("SITEMAPD_BIND", "0.0.0.0:8080")]).unwrap_err().to_string();
        assert!(e.contains("SITEMAPD_API_TOKENS"), "{e}");
        assert!(load(&[("SITEMAPD_BIND", "[::1]:8080")]).is_ok());
        assert!(load(&[("SITEMAPD_BIND", "0.0.0.0:8080"), ("SITEMAPD_API_TOKENS", "")]).is_err());
    }

    #[test]
    fn limits_above_the_protocol_or_too_small_are_refused_by_name() {
        let e = load(&[("SITEMAPD_PAGE_MAX_URLS", "50001")]).unwrap_err().to_string();
        assert!(e.contains("SITEMAPD_PAGE_MAX_URLS"), "{e}");
        let e = load(&[("SITEMAPD_PAGE_MAX_BYTES", "52428801")]).unwrap_err().to_string();
        assert!(e.contains("SITEMAPD_PAGE_MAX_BYTES"), "{e}");
        let e = load(&[("SITEMAPD_PAGE_MAX_BYTES", "5000")]).unwrap_err().to_string();
        assert!(e.contains("longest allowed loc"), "{e}");
        let e = load(&[("SITEMAPD_PAGE_MAX_URLS", "many")]).unwrap_err().to_string();
        assert!(e.contains("page_max_urls"), "{e}");
    }

    #[test]
    fn other_settings_are_checked() {
        assert!(load(&[("SITEMAPD_PUBLIC_URL", "example.com")]).unwrap_err().to_string().contains("PUBLIC_URL"));
        assert!(load(&[("SITEMAPD_GZIP_LEVEL", "0")]).is_err());
        assert!(load(&[("SITEMAPD_DB_ACQUIRE_TIMEOUT_SECS", "6")]).unwrap_err().to_string().contains("5 seconds"));
        assert!(load(&[("SITEMAPD_STREAM_TIMEOUT_SECS", "0")]).is_err());
        assert!(load(&[("SITEMAPD_LOG_FORMAT", "xml")]).is_err());
        assert!(load(&[("SITEMAPD_STATE_TTL_MS", "60001")]).unwrap_err().to_string().contains("SITEMAPD_STATE_TTL_MS"));
        assert!(load(&[("SITEMAPD_CACHE_BYTES", "-1")]).unwrap_err().to_string().contains("cache_bytes"));
        assert_eq!(load(&[("SITEMAPD_CACHE_BYTES", "0")]).unwrap().cache_bytes, 0);
        assert!(load(&[("DATABASE_URL", "mysql://x")]).is_err());
        for (var, bad) in [
            ("SITEMAPD_MAX_JSON_ENTRIES", "0"),
            ("SITEMAPD_API_TIMEOUT_SECS", "0"),
            ("SITEMAPD_HEADER_READ_TIMEOUT_SECS", "301"),
            ("SITEMAPD_WRITE_TIMEOUT_SECS", "0"),
            ("SITEMAPD_WRITE_TIMEOUT_SECS", "3601"),
        ] {
            let e = load(&[(var, bad)]).unwrap_err().to_string();
            assert!(e.contains(var), "{var}={bad}: {e}");
        }
        let c = load(&[("SITEMAPD_API_TIMEOUT_SECS", "7"), ("SITEMAPD_MAX_JSON_ENTRIES", "9")]).unwrap();
        assert_eq!((c.api_timeout_secs, c.max_json_entries), (7, 9));
    }

    /// Every setting declared in `settings!` is in `config/default.toml` and every key of the file is declared
    /// (deserializing the file alone into `Raw` needs every field and refuses unknown keys; its keys are `ENV`'s), has
    /// its variable named in the file and in the table of docs/configuration.md, and is logged.
    #[test]
    fn default_toml_documents_every_setting_with_its_variable() {
        use config::{File, FileFormat};
        let parsed = config::Config::builder().add_source(File::from_str(DEFAULTS, FileFormat::Toml)).build().unwrap();
        parsed.clone().try_deserialize::<Raw>().expect("config/default.toml holds exactly the fields of Raw");
        let mut keys: Vec<String> =
            parsed.try_deserialize::<HashMap<String, config::Value>>().unwrap().into_keys().collect();
        keys.sort();
        let mut env_keys: Vec<String> = ENV.iter().map(|(k, _)| (*k).to_owned()).collect();
        env_keys.sort();
        assert_eq!(keys, env_keys, "config/default.toml and ENV list the same settings");

        let table = include_str!("../../../docs/configuration.md");
        let shown = format!("{:?}", load(&[]).unwrap());
        for (key, var) in ENV {
            assert!(DEFAULTS.contains(var), "config/default.toml does not name {var}");
            assert!(table.contains(&format!("| `{var}` |")), "the table of docs/configuration.md lacks {var}");
            assert!(shown.contains(&format!("{key}: ")), "the logged configuration lacks {key}: {shown}");
        }
    }

    #[test]
    fn the_read_url_is_a_postgres_url_and_is_logged_without_its_secret() {
        let c = load(&[("DATABASE_READ_URL", "postgres://reader:S3cret@replica:5432/db")]).unwrap();
        assert_eq!(c.store_options().read_url.as_deref(), Some("postgres://reader:S3cret@replica:5432/db"));
        let shown = format!("{c:?}");
        assert!(!shown.contains("S3cret") && shown.contains("replica:5432"), "{shown}");
        assert_eq!(load(&[]).unwrap().store_options().read_url, None);
        assert_eq!(
            load(&[("DATABASE_READ_URL", "sqlite://x.db")]).unwrap_err().to_string(),
            "database_read_url (DATABASE_READ_URL) must be empty or start with postgres:// (a streaming replica of \
             the database_url server)"
        );
    }

    /// Each variable is its setting's name in capitals after `SITEMAPD_`, but for `DATABASE_URL`, the usual name,
    /// and `DATABASE_READ_URL` beside it.
    #[test]
    fn each_variable_is_named_after_its_setting() {
        for (key, var) in ENV {
            let expected = if matches!(*key, "database_url" | "database_read_url") {
                key.to_uppercase()
            } else {
                format!("SITEMAPD_{}", key.to_uppercase())
            };
            assert_eq!(*var, expected, "{key}");
        }
    }

    /// The refusals read word for word as they did before the settings were one table.
    #[test]
    fn each_refused_value_is_one_sentence_naming_the_setting() {
        let least = Limits::least_max_bytes();
        for (var, value, message) in [
            (
                "SITEMAPD_PAGE_MAX_URLS",
                "0",
                "page_max_urls (SITEMAPD_PAGE_MAX_URLS) must be from 1 to 50000 (the sitemaps.org maximum), not 0".to_owned(),
            ),
            (
                "SITEMAPD_PAGE_MAX_BYTES",
                "52428801",
                format!(
                    "page_max_bytes (SITEMAPD_PAGE_MAX_BYTES) must be from {least} (room for one entry with the longest \
                     allowed loc) to 52428800 (the sitemaps.org maximum), not 52428801"
                ),
            ),
            ("SITEMAPD_MAX_JSON_BYTES", "1023", "max_json_bytes (SITEMAPD_MAX_JSON_BYTES) must be at least 1024, not 1023".into()),
            ("SITEMAPD_MAX_LINE_BYTES", "4095", "max_line_bytes (SITEMAPD_MAX_LINE_BYTES) must be at least 4096, not 4095".into()),
            (
                "SITEMAPD_MAX_JSON_ENTRIES",
                "1000001",
                "max_json_entries (SITEMAPD_MAX_JSON_ENTRIES) must be from 1 to 1000000, not 1000001".into(),
            ),
            ("SITEMAPD_API_TIMEOUT_SECS", "86401", "api_timeout_secs (SITEMAPD_API_TIMEOUT_SECS) must be from 1 to 86400, not 86401".into()),
            ("SITEMAPD_BODY_IDLE_SECS", "0", "body_idle_secs (SITEMAPD_BODY_IDLE_SECS) must be from 1 to 300, not 0".into()),
            (
                "SITEMAPD_HEADER_READ_TIMEOUT_SECS",
                "0",
                "header_read_timeout_secs (SITEMAPD_HEADER_READ_TIMEOUT_SECS) must be from 1 to 300, not 0".into(),
            ),
            ("SITEMAPD_WRITE_TIMEOUT_SECS", "3601", "write_timeout_secs (SITEMAPD_WRITE_TIMEOUT_SECS) must be from 1 to 3600, not 3601".into()),
            (
                "SITEMAPD_MIN_SEND_RATE",
                "1073741825",
                "min_send_rate (SITEMAPD_MIN_SEND_RATE) must be from 0 to 1073741824 bytes per second, not 1073741825".into(),
            ),
            ("SITEMAPD_NDJSON_BATCH", "100001", "ndjson_batch (SITEMAPD_NDJSON_BATCH) must be from 1 to 100000, not 100001".into()),
            ("SITEMAPD_DB_MAX_CONNECTIONS", "0", "db_max_connections (SITEMAPD_DB_MAX_CONNECTIONS) must be at least 1".into()),
            (
                "SITEMAPD_DB_ACQUIRE_TIMEOUT_SECS",
                "0",
                "db_acquire_timeout_secs (SITEMAPD_DB_ACQUIRE_TIMEOUT_SECS) must be from 1 to 5 (requests that need an \
                 unreachable store must answer 503 within 5 seconds), not 0"
                    .into(),
            ),
            ("SITEMAPD_GZIP_LEVEL", "10", "gzip_level (SITEMAPD_GZIP_LEVEL) must be from 1 to 9, not 10".into()),
            ("SITEMAPD_STREAM_TIMEOUT_SECS", "0", "stream_timeout_secs (SITEMAPD_STREAM_TIMEOUT_SECS) must be from 1 to 3600, not 0".into()),
            (
                "SITEMAPD_CACHE_BYTES",
                "68719476737",
                "cache_bytes (SITEMAPD_CACHE_BYTES) must be at most 68719476736, not 68719476737".into(),
            ),
            ("SITEMAPD_STATE_TTL_MS", "60001", "state_ttl_ms (SITEMAPD_STATE_TTL_MS) must be from 0 to 60000, not 60001".into()),
            (
                "SITEMAPD_SHUTDOWN_GRACE_SECS",
                "3601",
                "shutdown_grace_secs (SITEMAPD_SHUTDOWN_GRACE_SECS) must be from 0 to 3600, not 3601".into(),
            ),
            ("SITEMAPD_LOG_FORMAT", "xml", "log_format (SITEMAPD_LOG_FORMAT) must be \"text\" or \"json\", not \"xml\"".into()),
            ("DATABASE_URL", "mysql://x", "database_url (DATABASE_URL) must start with sqlite:// or postgres://".into()),
            (
                "SITEMAPD_DATABASE_POOLER",
                "pgbouncer",
                "database_pooler (SITEMAPD_DATABASE_POOLER) must be \"none\" or \"transaction\", not \"pgbouncer\"".into(),
            ),
            (
                "DATABASE_URL",
                "sqlite://?mode=rwc",
                "database_url (DATABASE_URL) must name the SQLite file: sqlite://PATH (e.g. sqlite://sitemapd.db)".into(),
            ),
            ("SITEMAPD_BIND", "localhost:8080", "bind (SITEMAPD_BIND) \"localhost:8080\" is not an IP address and port".into()),
            (
                "SITEMAPD_BIND",
                "0.0.0.0:8080",
                "refusing to listen on 0.0.0.0:8080 without api_tokens (SITEMAPD_API_TOKENS): the write API would be \
                 open to the network. Set a token, or bind to a loopback address such as 127.0.0.1."
                    .into(),
            ),
        ] {
            assert_eq!(load(&[(var, value)]).unwrap_err().to_string(), message, "{var}={value}");
        }
    }

    #[test]
    fn the_logged_defaults() {
        assert_eq!(
            format!("{:?}", load(&[]).unwrap()),
            "Config { database_url: \"sqlite://sitemapd.db\", database_read_url: \"\", database_pooler: \"none\", public_url: \"http://localhost:8080/\", sites: [], \
             trusted_proxies: [], forwarded_header: XForwardedHost, bind: \
             127.0.0.1:8080, api_tokens: [0 redacted], page_max_urls: 50000, page_max_bytes: 52428800, section_max_urls: {}, max_json_bytes: \
             16777216, max_line_bytes: 65536, max_json_entries: 50000, body_memory_bytes: 201326592, \
             api_timeout_secs: 300, \
             header_read_timeout_secs: 10, write_timeout_secs: 30, min_send_rate: 4096, body_idle_secs: 20, \
             min_receive_rate: 2048, ndjson_batch: 10000, \
             db_max_connections: 16, db_acquire_timeout_secs: 3, gzip_level: 4, stream_timeout_secs: 60, \
             render_concurrency: 0, cache_bytes: 33554432, prerender: true, state_ttl_ms: 1000, news_window_hours: 48, removed_days: 0, robots_tag: \"noindex\", robots_txt: false, \
             robots_txt_body: \"\", view: true, shutdown_grace_secs: 25, serve_threads: 0, log_format: Text, \
             access_log: WritesAndErrors, crawler_telemetry: true, crawler_ranges: [], crawler_ranges_refresh_hours: 24, \
             crawler_rdns: true, crawler_flush_ms: 5000, crawler_window_days: 7, health_check: [], health_cycle_days: 7, health_concurrency: 1, health_rate: 2, \
             health_timeout_secs: 10, health_head_bytes: 262144, health_poll_ms: 1000, indexnow_keys: [], indexnow_endpoint: \"https://api.indexnow.org/indexnow\", indexnow_interval_ms: 5000, \
             indexnow_retry_base_ms: 10000, indexnow_max_attempts: 30, indexnow_timeout_secs: 30 }"
        );
    }

    /// One decision of the backend, for configuration and the store alike. A `postgres*` scheme other than
    /// `postgres:` and `postgresql:` (which sqlx's driver accepts) never opened a store: it is refused at start.
    #[test]
    fn the_database_url_names_the_backend() {
        use crate::store::Backend;
        for (url, backend) in [
            ("sqlite://sitemapd.db", Some(Backend::Sqlite)),
            ("sqlite::memory:", Some(Backend::Sqlite)),
            ("sqlite:data/s.db?mode=rwc", Some(Backend::Sqlite)),
            ("postgres://u:p@db:5432/x", Some(Backend::Postgres)),
            ("postgresql://u@db/x", Some(Backend::Postgres)),
            ("postgresql:u@db/x", Some(Backend::Postgres)),
            ("postgres:", Some(Backend::Postgres)),
            ("postgresx://db/x", None),
            ("postgres+tls://db/x", None),
            ("POSTGRES://db/x", None),
            ("mysql://db/x", None),
            ("x:", None),
            ("sqlite", None),
            ("", None),
        ] {
            assert_eq!(Backend::from_url(url), backend, "{url}");
            assert_eq!(load(&[("DATABASE_URL", url)]).is_ok(), backend.is_some(), "{url}");
        }
    }

    #[test]
    fn the_logged_configuration_hides_the_password_and_the_tokens() {
        let c = load(&[
            ("DATABASE_URL", "postgres://sitemapd:pg-Secret-1@db:5432/sitemapd"),
            ("SITEMAPD_API_TOKENS", "tok-Secret-2,tok-Secret-3"),
        ])
        .unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("Secret"), "{shown}");
        assert!(shown.contains("postgres://sitemapd:REDACTED@db:5432/sitemapd"), "{shown}");
        assert!(shown.contains("api_tokens: [2 redacted]"), "{shown}");
    }

    #[test]
    fn invalid_settings_are_refused_by_name() {
        for (var, value) in [
            ("SITEMAPD_BIND", "localhost:8080"),
            ("SITEMAPD_BIND", "127.0.0.1"),
            ("SITEMAPD_PUBLIC_URL", "ftp://example.com"),
            ("SITEMAPD_PUBLIC_URL", "https://example.com/?q=1"),
            ("SITEMAPD_GZIP_LEVEL", "0"),
            ("SITEMAPD_GZIP_LEVEL", "10"),
            ("SITEMAPD_PAGE_MAX_URLS", "50001"),
            ("SITEMAPD_PAGE_MAX_URLS", "0"),
            ("SITEMAPD_SHUTDOWN_GRACE_SECS", "3601"),
            ("SITEMAPD_NDJSON_BATCH", "0"),
            ("SITEMAPD_DB_MAX_CONNECTIONS", "0"),
            ("SITEMAPD_RENDER_CONCURRENCY", "257"),
            ("SITEMAPD_RENDER_CONCURRENCY", "-1"),
        ] {
            let e = load(&[(var, value)]).unwrap_err().to_string();
            assert!(e.contains(var), "{var}={value}: {e}");
        }
        let e = load(&[("SITEMAPD_SHUTDOWN_GRACE_SECS", "-1")]).unwrap_err().to_string();
        assert!(e.contains("shutdown_grace_secs"), "{e}");
        let c = load(&[("SITEMAPD_SHUTDOWN_GRACE_SECS", "0")]).unwrap();
        assert_eq!(c.shutdown_grace_secs, 0);
        assert_eq!(load(&[]).unwrap().shutdown_grace_secs, 25);
    }

    #[test]
    fn health_check_names_configured_sites_and_a_policy_each() {
        let sites = |raw: &str| load(&[("SITEMAPD_HEALTH_CHECK", raw)]).map(|c| c.health_check);
        let shown = |raw: &str| sites(raw).unwrap().shown();
        assert_eq!(shown("report"), ["default=report"]);
        assert_eq!(shown(" , default = exclude , "), ["default=exclude"]);
        assert!(sites("").unwrap().is_empty() && sites(" , ").unwrap().is_empty());
        for (raw, says) in [
            ("Report", "the policy is \"report\" or \"exclude\", not \"Report\""),
            ("default=", "not \"\""),
            ("shop=report", "given for the site \"shop\", which is not configured (sites: default)"),
            ("Shop Site=report", "site name"),
            ("report,default=exclude", "the site \"default\" is given twice"),
        ] {
            let e = sites(raw).unwrap_err().to_string();
            assert!(e.starts_with("health_check (SITEMAPD_HEALTH_CHECK): "), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        // A checked site's writes queue checks; the policy is logged.
        let two = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let c = load(&[two, ("SITEMAPD_HEALTH_CHECK", "shop=exclude")]).unwrap();
        assert_eq!(c.store_options().check_sites, ["shop".to_owned()].into());
        assert_eq!(c.health_check.policy("shop"), Some(Policy::Exclude));
        assert_eq!(c.health_check.policy("default"), None);
        assert!(format!("{c:?}").contains("health_check: [\"shop=exclude\"]"));
        assert!(load(&[]).unwrap().store_options().check_sites.is_empty());
    }

    #[test]
    fn indexnow_keys_are_checked_and_name_the_default_site() {
        let keys = |raw: &str| load(&[("SITEMAPD_INDEXNOW_KEYS", raw)]).map(|c| c.indexnow_keys);
        let pairs = |raw: &str| keys(raw).unwrap().iter().map(|(s, k)| format!("{s}={k}")).collect::<Vec<_>>();
        assert_eq!(pairs("0123456789abcdef"), ["default=0123456789abcdef"]);
        assert_eq!(pairs(" , default = Abc-1234 , "), ["default=Abc-1234"]);
        assert_eq!(pairs(&"k".repeat(128)), [format!("default={}", "k".repeat(128))]);
        assert!(keys("").unwrap().is_empty() && keys(" , ").unwrap().is_empty());
        for (raw, says) in [
            ("short12", "8 to 128 characters, not 7"),
            (&"k".repeat(129), "8 to 128 characters, not 129"),
            ("under_score", "only a-z, A-Z, 0-9 and -, not '_'"),
            ("schlüssel123", "not 'ü'"),
            ("default=", "8 to 128 characters, not 0"),
            ("shop=0123456789abcdef", "given for the site \"shop\", which is not configured (sites: default)"),
            ("Shop Site=0123456789abcdef", "site name"),
            ("0123456789abcdef,default=fedcba9876543210", "the site \"default\" is given two keys"),
        ] {
            let e = keys(raw).unwrap_err().to_string();
            assert!(e.starts_with("indexnow_keys (SITEMAPD_INDEXNOW_KEYS): "), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        // Notification is on for the default site exactly when it has a key; the key is logged (it is public).
        let c = load(&[("SITEMAPD_INDEXNOW_KEYS", "0123456789abcdef")]).unwrap();
        assert_eq!(c.store_options().notify_sites, [DEFAULT_SITE.to_owned()].into());
        assert!(format!("{c:?}").contains("indexnow_keys: [\"default=0123456789abcdef\"]"));
        assert!(load(&[]).unwrap().store_options().notify_sites.is_empty());
        // With several sites, a key per site.
        let sites = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let c = load(&[sites, ("SITEMAPD_INDEXNOW_KEYS", "shop=0123456789abcdef")]).unwrap();
        assert_eq!(c.store_options().notify_sites, ["shop".to_owned()].into());
    }

    #[test]
    fn the_indexnow_endpoint_is_an_http_url() {
        let c = load(&[("SITEMAPD_INDEXNOW_ENDPOINT", "http://127.0.0.1:9/indexnow")]).unwrap();
        assert_eq!(c.indexnow_endpoint.as_str(), "http://127.0.0.1:9/indexnow");
        for raw in ["ftp://example.com/indexnow", "api.indexnow.org/indexnow", ""] {
            let e = load(&[("SITEMAPD_INDEXNOW_ENDPOINT", raw)]).unwrap_err().to_string();
            assert!(e.starts_with("indexnow_endpoint (SITEMAPD_INDEXNOW_ENDPOINT)"), "{raw}: {e}");
        }
        for (var, value) in [
            ("SITEMAPD_INDEXNOW_INTERVAL_MS", "9"),
            ("SITEMAPD_INDEXNOW_RETRY_BASE_MS", "3600001"),
            ("SITEMAPD_INDEXNOW_MAX_ATTEMPTS", "0"),
            ("SITEMAPD_INDEXNOW_TIMEOUT_SECS", "301"),
        ] {
            let e = load(&[(var, value)]).unwrap_err().to_string();
            assert!(e.contains(var), "{var}={value}: {e}");
        }
    }

    #[test]
    fn the_production_example_loads_with_secrets_from_the_environment() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/production.example.toml"));
        let e = Config::load_from(Some(path), |_| None).unwrap_err().to_string();
        assert!(e.contains("SITEMAPD_API_TOKENS"), "{e}");
        let c = Config::load_from(Some(path), |k| (k == "SITEMAPD_API_TOKENS").then(|| "t".to_owned())).unwrap();
        assert!(c.database_url.starts_with("postgres://") && redact_url(&c.database_url) == c.database_url);
        assert_eq!(c.public_url.as_str(), "https://www.example.com/");
        assert_eq!(c.bind, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(c.log_format, LogFormat::Json);
    }

    #[test]
    fn unknown_keys_in_a_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "publik_url = \"https://x.test\"\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        let file = path.display();
        assert_eq!(
            e,
            format!(
                "unknown setting \"publik_url\" in {file} (did you mean public_url?). config/default.toml lists every \
                 setting with its default."
            )
        );
        std::fs::write(&path, "colour = 1\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        assert!(e.starts_with(&format!("unknown setting \"colour\" in {file}. ")), "no suggestion: {e}");
        assert!(Config::load_from(Some(&dir.path().join("missing.toml")), |_| None).is_err());
    }

    #[test]
    fn unknown_sitemapd_variables_are_refused_with_the_closest_name() {
        let check = |names: &[&str]| check_variable_names(names.iter().map(|n| (*n).to_owned()));
        let e = check(&["PATH", "SITEMAPD_PUBLICURL"]).unwrap_err().to_string();
        assert!(
            e.contains("unknown environment variable SITEMAPD_PUBLICURL (did you mean SITEMAPD_PUBLIC_URL?)"),
            "{e}"
        );
        let e = check(&["SITEMAPD_GZIP_LEVLE", "SITEMAPD_X"]).unwrap_err().to_string();
        assert!(e.contains("SITEMAPD_GZIP_LEVLE (did you mean SITEMAPD_GZIP_LEVEL?) and 1 more: SITEMAPD_X"), "{e}");
        let e = check(&["SITEMAPD_FOO"]).unwrap_err().to_string();
        assert!(!e.contains("did you mean"), "no suggestion for a name like no setting's: {e}");
        // The database's variables have no prefix: their misspellings are refused all the same.
        for (typo, meant) in [
            ("DATABSE_URL", "DATABASE_URL"),
            ("DATABASE_ULR", "DATABASE_URL"),
            ("database_url", "DATABASE_URL"),
            ("DATABASE_URLS", "DATABASE_URL"),
            ("DATABASE_REED_URL", "DATABASE_READ_URL"),
            ("DATABASE_READURL", "DATABASE_READ_URL"),
            ("DATABSE_ULR", "DATABASE_URL"),
        ] {
            let e = check(&["PATH", typo, "DATABASE_URL"]).unwrap_err().to_string();
            assert!(e.contains(&format!("unknown environment variable {typo} (did you mean {meant}?)")), "{e}");
        }
        check(&["DATABASE", "DB_URL", "REDIS_URL", "DATABASE_HOST", "PGDATABASE"]).unwrap();
        let mut every: Vec<&str> = ENV.iter().map(|(_, v)| *v).collect();
        every.extend(["SITEMAPD_CONFIG", "SITEMAPD_XSD_VALIDATE", "DATABASE_URL", "RUST_LOG", "sitemapd_x"]);
        check(&every).unwrap();
    }

    /// The files the message sends the reader to exist and list the variable it suggests: the settings' reference
    /// (docs/configuration.md), not a README section that moved there.
    #[test]
    fn an_unknown_variable_points_to_files_that_list_the_variables() {
        let e = check_variable_names(["SITEMAPD_PUBLICURL".to_owned()]).unwrap_err().to_string();
        let named: Vec<&str> = e
            .split_whitespace()
            .map(|w| w.trim_end_matches([',', '.', ';', ')']))
            .filter(|w| w.ends_with(".md") || w.ends_with(".toml"))
            .collect();
        assert!(named.contains(&"docs/configuration.md"), "{e}");
        for file in named {
            let text = std::fs::read_to_string(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(file))
                .unwrap_or_else(|err| panic!("{file}, named by {e:?}: {err}"));
            assert!(text.contains("SITEMAPD_PUBLIC_URL"), "{file} does not list the variable suggested: {e}");
        }
    }

    #[test]
    fn a_value_of_the_wrong_type_names_one_setting_its_value_and_what_it_takes() {
        let e = load(&[("SITEMAPD_PAGE_MAX_URLS", "abc")]).unwrap_err().to_string();
        assert_eq!(e, "page_max_urls (SITEMAPD_PAGE_MAX_URLS) must be a whole number (default: 50000), not \"abc\"");
        let e = load(&[("SITEMAPD_SHUTDOWN_GRACE_SECS", "2.5")]).unwrap_err().to_string();
        assert!(e.starts_with("shutdown_grace_secs (SITEMAPD_SHUTDOWN_GRACE_SECS) must be a whole number"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "gzip_level = \"high\"\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        assert!(e.starts_with(&format!("gzip_level in {} must be a whole number", path.display())), "{e}");
        assert!(e.contains("high") && !e.contains("SITEMAPD_BIND"), "{e}");
    }

    #[test]
    fn configuration_errors_do_not_quote_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "database_url = \"postgres://u:S3cret@db/x\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        assert!(!e.contains("S3cret") && e.contains("line 1"), "{e}");
        let e = load(&[("SITEMAPD_PUBLIC_URL", "https://u:S3cret@x.test/")]).unwrap_err().to_string();
        assert!(!e.contains("S3cret") && e.contains("user information"), "{e}");
        let e = load(&[("SITEMAPD_PUBLIC_URL", "postgres://u:S3cret@[x/")]).unwrap_err().to_string();
        assert!(!e.contains("S3cret") && e.contains("SITEMAPD_PUBLIC_URL"), "{e}");
        let e = load(&[("SITEMAPD_PUBLIC_URL", "example.com")]).unwrap_err().to_string();
        assert!(e.contains("\"example.com\""), "an ordinary mistake is shown: {e}");
    }

    #[test]
    fn sites_are_named_urls_on_hosts_of_their_own() {
        let c =
            load(&[("SITEMAPD_SITES", " www=https://www.example.com , shop=https://shop.example.com/s/ ,")]).unwrap();
        let names: Vec<(&str, &str)> = c.sites.iter().map(|s| (s.name.as_str(), s.public_url.as_str())).collect();
        assert_eq!(names, [("www", "https://www.example.com/"), ("shop", "https://shop.example.com/s/")]);
        assert_eq!(c.site_specs().len(), 2);
        let one = load(&[]).unwrap().site_specs();
        assert_eq!((one[0].name.as_str(), one[0].public_url.as_str()), (DEFAULT_SITE, "http://localhost:8080/"));
        for (bad, says) in [
            ("www", "NAME=PUBLIC_URL"),
            ("WWW=https://a.test", "site name"),
            ("a=https://a.test, a=https://b.test", "given twice"),
            ("a=https://a.test/x/, b=https://A.test:443/y/", "both on a.test"),
            ("a=ftp://a.test", "http or https"),
        ] {
            let e = load(&[("SITEMAPD_SITES", bad)]).unwrap_err().to_string();
            assert!(e.contains("SITEMAPD_SITES") && e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn tokens_may_be_scoped_to_configured_sites() {
        let sites = ("SITEMAPD_SITES", "www=https://www.example.com, shop=https://shop.example.com");
        let c = load(&[sites, ("SITEMAPD_API_TOKENS", "all, shop:s, www:both, shop:both, www:all, shop:s")]).unwrap();
        let t = &c.api_tokens;
        assert_eq!(t.access("all"), Some(&Access::All), "a scope given to a global token does not narrow it");
        assert_eq!(t.access("s"), Some(&Access::Sites(vec!["shop".into()])), "a scope given twice counts once");
        assert!(t.access("both").is_some_and(|a| a.may("www") && a.may("shop")));
        assert_eq!(t.access("shop:s"), None, "the scope is not part of the token");
        assert_eq!(t.access("x"), None);
        let e = load(&[sites, ("SITEMAPD_API_TOKENS", "blog:t")]).unwrap_err().to_string();
        assert!(e.contains("\"blog\", which is not configured") && e.contains("www, shop"), "{e}");
        let e = load(&[("SITEMAPD_API_TOKENS", "shop:t")]).unwrap_err().to_string();
        assert!(e.contains("(sites: default)"), "one site is named default: {e}");
        let e = load(&[("SITEMAPD_API_TOKENS", "Shop Site:t")]).unwrap_err().to_string();
        assert!(e.contains("SITE:TOKEN"), "{e}");
        assert!(load(&[("SITEMAPD_API_TOKENS", "default:t")]).is_ok());
    }

    /// With `sites`, `public_url` is not used: the logged configuration says so, and a `public_url` set all the
    /// same is reported (start-up warns).
    #[test]
    fn sites_replace_the_public_url_and_say_so() {
        let sites = ("SITEMAPD_SITES", "www=https://www.example.com, shop=https://shop.example.com");
        let c = load(&[sites]).unwrap();
        let shown = format!("{c:?}");
        assert!(shown.contains("public_url: (replaced by sites), sites: [\"www=https://www.example.com/\""), "{shown}");
        assert_eq!(c.ignored_public_url(), None, "not set: nothing to warn of");
        let c = load(&[sites, ("SITEMAPD_PUBLIC_URL", "https://old.example.com")]).unwrap();
        assert_eq!(c.ignored_public_url().map(PublicUrl::as_str), Some("https://old.example.com/"));
        assert!(format!("{c:?}").contains("public_url: (replaced by sites)"));
        let c = load(&[("SITEMAPD_PUBLIC_URL", "https://old.example.com")]).unwrap();
        assert_eq!(c.ignored_public_url(), None);
        assert!(format!("{c:?}").contains("public_url: \"https://old.example.com/\""));
    }

    /// `SITE=TOKEN`, as sites and keys are given, is the same as `SITE:TOKEN`; a token that only ends in `=`
    /// (base64 padding) is a token of every site.
    #[test]
    fn tokens_are_scoped_as_site_equals_token_too() {
        let sites = ("SITEMAPD_SITES", "www=https://www.example.com, shop=https://shop.example.com");
        let tokens = ("SITEMAPD_API_TOKENS", "shop=s, www = w:x, dG9rZW4=, ab==, de:f=g");
        let e = load(&[sites, tokens]).unwrap_err().to_string();
        assert!(e.contains("\"de\", which is not configured"), "{e}");
        let c = load(&[sites, ("SITEMAPD_API_TOKENS", "shop=s, www = w:x, dG9rZW4=, ab==, shop:f=g")]).unwrap();
        let t = &c.api_tokens;
        assert_eq!(t.access("s"), Some(&Access::Sites(vec!["shop".into()])));
        assert_eq!(t.access("w:x"), Some(&Access::Sites(vec!["www".into()])), "the first separator counts");
        assert_eq!(t.access("f=g"), Some(&Access::Sites(vec!["shop".into()])));
        assert_eq!(t.access("dG9rZW4="), Some(&Access::All));
        assert_eq!(t.access("ab=="), Some(&Access::All));
        assert_eq!(t.access("shop=s"), None, "the scope is not part of the token");
        let e = load(&[("SITEMAPD_API_TOKENS", "Shop Site=t")]).unwrap_err().to_string();
        assert!(e.contains("a token with a '=' is SITE=TOKEN"), "{e}");
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks() {
        let c = load(&[("SITEMAPD_TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.5, ::1")]).unwrap();
        let p = &c.trusted_proxies;
        assert!(p.trusts("10.200.0.1".parse().unwrap()) && p.trusts("192.168.1.5".parse().unwrap()));
        assert!(p.trusts("::ffff:10.0.0.1".parse().unwrap()), "IPv4-mapped");
        assert!(p.trusts("::1".parse().unwrap()));
        assert!(!p.trusts("192.168.1.6".parse().unwrap()) && !p.trusts("11.0.0.1".parse().unwrap()));
        assert!(!load(&[]).unwrap().trusted_proxies.trusts("127.0.0.1".parse().unwrap()), "none by default");
        let e = load(&[("SITEMAPD_TRUSTED_PROXIES", "10.0.0.0/33")]).unwrap_err().to_string();
        assert!(e.contains("SITEMAPD_TRUSTED_PROXIES") && e.contains("10.0.0.0/33"), "{e}");
    }
}
