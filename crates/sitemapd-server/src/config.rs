//! Configuration: built-in defaults → a TOML file → environment variables, validated once at start so that a bad
//! setting fails fast with a message naming it. Every setting is declared once, in the `settings!` table below;
//! `config/default.toml` and the settings' reference in `docs/configuration.md` are rendered from it ([`reference`]).

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

pub mod reference;

use crate::hreflang::Policy as HreflangPolicy;

/// The protocol's maxima for one sitemap.
pub const PROTOCOL_MAX_URLS: u32 = 50_000;
pub const PROTOCOL_MAX_BYTES: u64 = 52_428_800;

/// The page cache's weights are `u32` byte counts summed by moka into a `u64`; 64 GiB is far beyond any sitemap set.
const MAX_CACHE_BYTES: u64 = 64 << 30;
/// 1 GiB/s: a floor above what any network delivers would close every connection.
const MAX_MIN_SEND_RATE: u64 = 1 << 30;

/// Variables with the settings' prefix that are not settings: the configuration file, the tests' schema check, the
/// tests' regeneration of the reference, the process tests' [`Tuning`] and the publisher's test hook.
const OTHER_VARIABLES: &[&str] =
    &["SITEMAPD_CONFIG", "SITEMAPD_XSD_VALIDATE", "SITEMAPD_BLESS", TUNING_VARIABLE, PUBLISH_PAUSE_VARIABLE];

/// The publisher's test hook (`publish::PAUSE_VARIABLE`): the point of a pass at which it stops, for the tests that
/// kill it there. Not a setting.
pub const PUBLISH_PAUSE_VARIABLE: &str = "SITEMAPD_TEST_PUBLISH_PAUSE_AT";
const DEFAULT_FILE: &str = "config/default.toml";

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
const fn millis(n: u64) -> Duration {
    Duration::from_millis(n)
}
const fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3600)
}
const fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

/// One setting as the table declares it: what the loading, the messages and the rendered reference need.
#[derive(Debug)]
pub struct Setting {
    /// Its table in the file (`[health]`).
    pub section: &'static str,
    /// Its key in that table (`cycle`).
    pub key: &'static str,
    /// `section.key`, as messages name it.
    pub path: &'static str,
    /// The environment variable that overrides it.
    pub var: &'static str,
    /// Its key before settings had sections (`health_cycle_days`): read at a file's top level, with a warning.
    pub flat: &'static str,
    /// The variable it had before it was renamed, and the unit that variable's whole numbers are in (also the unit of
    /// the flat key's numbers): read, converted, with a warning.
    pub was: Option<(&'static str, Unit)>,
    /// Its default, as TOML.
    pub default: &'static str,
    /// What it does, for the reference: one paragraph.
    pub doc: &'static [&'static str],
}

/// One table of the file.
#[derive(Debug)]
pub struct SectionDoc {
    pub name: &'static str,
    pub doc: &'static [&'static str],
}

/// The unit a renamed duration setting's old variable counted in: `SITEMAPD_API_TIMEOUT_SECS=300` is read as
/// `SITEMAPD_API_TIMEOUT=300s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Ms,
    Secs,
    Hours,
    Days,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Secs => "s",
            Unit::Hours => "h",
            Unit::Days => "d",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Unit::Ms => "milliseconds",
            Unit::Secs => "seconds",
            Unit::Hours => "hours",
            Unit::Days => "days",
        }
    }

    /// A whole number in this unit as a duration (`300` → `300s`); `None` when it is no whole number.
    fn convert(self, raw: &str) -> Option<String> {
        raw.trim().parse::<u64>().ok().map(|n| format!("{n}{}", self.suffix()))
    }
}

/// Every setting, declared once, section by section: its key, its type, its environment variable, its default (as
/// TOML), its key before sections (`flat`), and what it accepts; its doc comment is its documentation in
/// `config/default.toml` and `docs/configuration.md`. From this table come [`SETTINGS`], `Raw` (what the file and the
/// environment hold), [`Config`] and its section structs (the validated settings), the checks and the logged form.
///
/// `key: Type = "VARIABLE", default TOML, flat OLD_KEY`, then optionally, in this order:
/// - `was "OLD_VARIABLE" Unit`: the setting was renamed; its old variable (and its flat key) held whole numbers of
///   `Unit`, read and converted with a warning;
/// - `parse f`: the file holds a string, which `f(&str, Named) -> anyhow::Result<Type>` turns into the value;
/// - `in RANGE` or `in RANGE => "what"`: the values allowed (`a..=b`, `a..`, `..=b`); the error says the setting
///   "must be from a to b" (at least a, at most b), or "must be what", then ", not VALUE";
/// - `check f`: any other check, `f(&Type, Named) -> anyhow::Result<()>`;
/// - `show f`: how the value is logged, `f(&Type) -> impl Debug` (default: its `Debug`). A secret's `show` (or its
///   type's `Debug`) redacts it: `database.url`, `database.read_url` and `api.tokens` are the secrets.
macro_rules! settings {
    ($(
        $(#[doc = $sdoc:expr])*
        [$section:ident] $Section:ident $Raw:ident {
            $(
                $(#[doc = $doc:expr])*
                $key:ident: $ty:ty = $var:literal, default $default:literal, flat $flat:ident
                    $(, was $old:literal $unit:ident)?
                    $(, parse $parse:expr)?
                    $(, in $range:expr $(=> $must:expr)?)?
                    $(, check $check:expr)?
                    $(, show $show:expr)?;
            )*
        }
    )*) => {
        /// The sections, in the file's order.
        pub const SECTIONS: &[SectionDoc] = &[$(SectionDoc { name: stringify!($section), doc: &[$($sdoc),*] }),*];

        /// Every setting, in the table's order.
        pub const SETTINGS: &[Setting] = &[$($(Setting {
            section: stringify!($section),
            key: stringify!($key),
            path: concat!(stringify!($section), ".", stringify!($key)),
            var: $var,
            flat: stringify!($flat),
            was: settings!(@was $($old $unit)?),
            default: stringify!($default),
            doc: &[$($doc),*],
        }),*),*];

        $(
            /// A section as the file and the environment hold it.
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct $Raw {
                $($key: settings!(@raw $ty $(, $parse)?),)*
            }

            $(#[doc = $sdoc])*
            #[derive(Clone)]
            pub struct $Section {
                $($(#[doc = $doc])* pub $key: $ty,)*
            }
        )*

        /// The settings as the file and the environment hold them.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            $($section: $Raw,)*
        }

        /// The validated configuration: each setting under its section and key in `config/default.toml`
        /// (`config.health.cycle`).
        #[derive(Clone)]
        pub struct Config {
            $(pub $section: $Section,)*
            /// Not a setting: what tests change to make background work quick ([`Tuning`]).
            #[doc(hidden)]
            pub tuning: Tuning,
            /// Deprecated names read, one sentence each: start-up logs them as warnings.
            deprecations: Vec<String>,
        }

        impl Config {
            /// Each setting parsed and checked, in the table's order; the first refused one is the error.
            fn from_raw(raw: Raw) -> anyhow::Result<Self> {
                $(
                    let $section = {
                        let section = raw.$section;
                        $(
                            let named = Named {
                                key: concat!(stringify!($section), ".", stringify!($key)),
                                var: $var,
                            };
                            let _ = named; // a setting may have no check
                            let $key: $ty = settings!(@parse section.$key, named $(, $parse)?);
                            $(within(&$key, &$range, None $(.or(Some($must.to_string())))?, named)?;)?
                            $(($check)(&$key, named)?;)?
                        )*
                        $Section { $($key),* }
                    };
                )*
                Ok(Self { $($section,)* tuning: Tuning::default(), deprecations: Vec::new() })
            }
        }

        /// Secrets redacted: safe to log. Each setting appears under its section and key; one that another replaces
        /// ([`Config::replaced`]) as such.
        impl fmt::Debug for Config {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut shown = f.debug_struct("Config");
                $(
                    let fields: &[(&str, String)] = &[$((
                        stringify!($key),
                        match self.replaced(concat!(stringify!($section), ".", stringify!($key))) {
                            Some(by) => format!("(replaced by {by})"),
                            None => format!("{:?}", settings!(@show self.$section.$key $(, $show)?)),
                        },
                    )),*];
                    shown.field(stringify!($section), &Fields(stringify!($Section), fields));
                )*
                shown.finish()
            }
        }
    };
    (@was) => { None };
    (@was $old:literal $unit:ident) => { Some(($old, Unit::$unit)) };
    (@raw $ty:ty) => { $ty };
    (@raw $ty:ty, $parse:expr) => { String };
    (@parse $raw:expr, $named:expr) => { $raw };
    (@parse $raw:expr, $named:expr, $parse:expr) => { ($parse)(&$raw, $named)? };
    (@show $value:expr) => { $value };
    (@show $value:expr, $show:expr) => { ($show)(&$value) };
}

/// A section's settings as logged: `Name { key: value, … }`, each value already shown.
struct Fields<'a>(&'static str, &'a [(&'static str, String)]);

impl fmt::Debug for Fields<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = f.debug_struct(self.0);
        for (key, value) in self.1 {
            shown.field(key, &format_args!("{value}"));
        }
        shown.finish()
    }
}

settings! {
    /// Where the URLs are stored.
    [database] Database RawDatabase {
        /// The database: `sqlite://PATH` (an embedded file, created if missing) or
        /// `postgres://USER:PASSWORD@HOST:PORT/DB`. Logged without its secrets.
        url: String = "DATABASE_URL", default "sqlite://sitemapd.db", flat database_url,
            check database_backend, show redact_url;
        /// A PostgreSQL streaming replica of that database (`postgres://…`; empty: none). Sitemap pages, the page
        /// table, the news sitemap and the read API (`GET /api/v1/urls`) are then read from it; writes, and the reads
        /// a write makes, stay on `url`. A page is rendered from one snapshot of the replica, with the validators of
        /// that snapshot, so replica lag delays a change but never sends bytes that disagree with their ETag. A read
        /// that finds the replica down is answered 503, and reads go to the primary until it answers a probe again
        /// (every 2 s). The commands (import, export, backup, migrate) use `url` only. See docs/deployment.md.
        read_url: String = "DATABASE_READ_URL", default "", flat database_read_url,
            check read_url_backend, show show_read_url;
        /// What the Postgres URLs lead to: `none` (the server, or a session-mode pooler) or `transaction` (a
        /// transaction-mode pooler such as PgBouncer with `pool_mode = transaction`, which may give each transaction
        /// another server connection). `transaction` prepares no named statement and sends no startup options (the
        /// write transaction sets its own lock and statement timeouts); see docs/pgbouncer.md. Ignored for SQLite.
        pooler: Pooler = "SITEMAPD_DATABASE_POOLER", default "none", flat database_pooler,
            parse parse_pooler, show |p: &Pooler| p.as_str();
        /// The connection pool's size (per process). Up to three quarters of the connections stream sitemap pages at
        /// once; the rest stay free for writes.
        max_connections: u32 = "SITEMAPD_DB_MAX_CONNECTIONS", default 16, flat db_max_connections,
            check at_least_one;
        /// The longest a request waits for a connection (1s to 5s) before it is answered 503.
        acquire_timeout: Duration = "SITEMAPD_DB_ACQUIRE_TIMEOUT", default "3s", flat db_acquire_timeout_secs,
            was "SITEMAPD_DB_ACQUIRE_TIMEOUT_SECS" Secs, parse parse_duration,
            in secs(1)..=secs(5) => "from 1s to 5s (requests that need an unreachable store must answer 503 within 5 seconds)",
            show show_duration;
    }

    /// Connections: where sitemapd listens, which proxies it trusts, how long a client may dawdle, how it stops.
    [http] Http RawHttp {
        /// The address to listen on. Without `api.tokens`, only a loopback address is allowed.
        bind: SocketAddr = "SITEMAPD_BIND", default "127.0.0.1:8080", flat bind, parse parse_bind;
        /// Comma-separated IP addresses or CIDR networks of reverse proxies whose `Forwarded` (`host=`) or
        /// `X-Forwarded-Host` header names the host a request was for. From any other peer these headers are ignored
        /// and `Host` alone picks the site, so that a client cannot read another site's sitemaps by forging them.
        trusted_proxies: TrustedProxies = "SITEMAPD_TRUSTED_PROXIES", default "", flat trusted_proxies,
            parse parse_trusted_proxies, show TrustedProxies::shown;
        /// The one header those proxies name the host in: `x-forwarded-host` (its last value) or `forwarded`
        /// (`host=` of its last element). The other header is ignored, since a client may have sent it and the
        /// proxy passed it on; set the chosen one in the proxy so that it replaces what the client sent (nginx:
        /// `proxy_set_header X-Forwarded-Host $host;`).
        forwarded_header: ForwardedHeader = "SITEMAPD_FORWARDED_HEADER", default "x-forwarded-host",
            flat forwarded_header, parse parse_forwarded_header;
        /// The longest a client may take to send a request's line and headers (1s to 5m). Past it the connection is
        /// closed, so idle or trickling clients cannot hold connections.
        header_read_timeout: Duration = "SITEMAPD_HEADER_READ_TIMEOUT", default "10s", flat header_read_timeout_secs,
            was "SITEMAPD_HEADER_READ_TIMEOUT_SECS" Secs, parse parse_duration, in secs(1)..=secs(300),
            show show_duration;
        /// The longest a connection may accept no bytes of a response (1s to 1h). Past it the connection is closed
        /// and what its response held is freed, so clients that stop reading cannot hold connections or memory.
        write_timeout: Duration = "SITEMAPD_WRITE_TIMEOUT", default "30s", flat write_timeout_secs,
            was "SITEMAPD_WRITE_TIMEOUT_SECS" Secs, parse parse_duration, in secs(1)..=secs(3600),
            show show_duration;
        /// The fewest bytes per second a client must take of a response while the response waits for it, measured
        /// over each `write_timeout` of waiting (0 to 1073741824; 0: no floor). A client reading more slowly is
        /// disconnected, so a trickling reader cannot hold a connection for hours.
        min_send_rate: u64 = "SITEMAPD_MIN_SEND_RATE", default 4096, flat min_send_rate,
            in 0..=MAX_MIN_SEND_RATE => format!("from 0 to {MAX_MIN_SEND_RATE} bytes per second");
        /// On SIGTERM or SIGINT the server stops accepting connections and lets the requests in flight finish, for
        /// at most this long (0s to 1h); then it cuts off the rest and exits 0. Keep it below the orchestrator's own
        /// limit before SIGKILL (docker stop: 10 s unless `--stop-timeout` / `stop_grace_period`; Kubernetes: 30 s).
        shutdown_grace: Duration = "SITEMAPD_SHUTDOWN_GRACE", default "25s", flat shutdown_grace_secs,
            was "SITEMAPD_SHUTDOWN_GRACE_SECS" Secs, parse parse_duration, in secs(0)..=secs(3600),
            show show_duration;
        /// Threads that accept and serve connections (0 to 1024; 0: one per core). Each runs an event loop of its
        /// own and serves the connections it accepted from start to end, as nginx's workers do: nothing is handed
        /// between threads. The database, the writes' parsing and the background tasks run on a runtime of their
        /// own beside them.
        serve_threads: usize = "SITEMAPD_SERVE_THREADS", default 0, flat serve_threads, in 0..=1024;
    }

    /// The write API (`/api/v1`): who may write, and how much a request may send.
    [api] Api RawApi {
        /// Comma-separated bearer tokens for `/api/v1`. Empty: no token needed, allowed only on a loopback address.
        /// `TOKEN` is good for every site; `SITE=TOKEN` only for that site (repeat it with another SITE for several;
        /// the older `SITE:TOKEN` is read too; a token that only ends in `=`, base64 padding, is a token of every
        /// site). Held as digests, never logged.
        tokens: ApiTokens = "SITEMAPD_API_TOKENS", default "", flat api_tokens, parse parse_api_tokens;
        /// The largest `application/json` request body, in bytes (at least 1024; 413 above it). NDJSON bodies are
        /// streamed and have no total limit; each NDJSON line may be at most `max_line_bytes`.
        max_json_bytes: usize = "SITEMAPD_MAX_JSON_BYTES", default 16777216, flat max_json_bytes, in 1024..;
        /// The longest NDJSON line, in bytes (at least 4096).
        max_line_bytes: usize = "SITEMAPD_MAX_LINE_BYTES", default 65536, flat max_line_bytes, in 4096..;
        /// The most entries one `application/json` array may hold (1 to 1000000; 413 above it: send larger loads as
        /// NDJSON).
        max_json_entries: usize = "SITEMAPD_MAX_JSON_ENTRIES", default 50000, flat max_json_entries,
            in 1..=1_000_000;
        /// The memory all write request bodies in flight may take together, in bytes (at least 1048576). A JSON
        /// body counts three times the bytes of it that have arrived (the body, its parsed entries, the write) until
        /// its write ends; an NDJSON body counts its batches' lines the same way, in steps of 64 KiB. Past the budget
        /// a request waits up to 1 s, then is answered 503 with `Retry-After`, the rest of its body read and dropped
        /// (an NDJSON body: at the line that did not fit, after committing the lines before it). An eighth is kept
        /// for bodies of at most 64 KiB, so that small writes get through whatever large uploads are in flight; one
        /// token's large bodies may hold at most the rest but one largest JSON body (3 × `max_json_bytes`), and at
        /// least half of it. One body alone always fits.
        body_memory_bytes: u64 = "SITEMAPD_BODY_MEMORY_BYTES", default 201326592, flat body_memory_bytes,
            in 1_048_576..=MAX_CACHE_BYTES;
        /// The longest one `/api/v1` request may take, reading its body included (1s to 1d). Past it the answer is
        /// 503 (with `Retry-After`) and the request is abandoned: a JSON array is then not stored, an NDJSON body
        /// keeps the batches committed before. Re-sending is safe: upserts and deletes are idempotent.
        timeout: Duration = "SITEMAPD_API_TIMEOUT", default "5m", flat api_timeout_secs,
            was "SITEMAPD_API_TIMEOUT_SECS" Secs, parse parse_duration, in secs(1)..=days(1), show show_duration;
        /// The longest a write request's body may send nothing (1s to 5m), and the window of `min_receive_rate`.
        /// Past it the body is cut with 408 and its share of `body_memory_bytes` freed (an NDJSON body keeps the
        /// batches committed before), so a stalled upload holds nothing for long.
        body_idle: Duration = "SITEMAPD_BODY_IDLE", default "20s", flat body_idle_secs,
            was "SITEMAPD_BODY_IDLE_SECS" Secs, parse parse_duration, in secs(1)..=secs(300), show show_duration;
        /// The fewest bytes per second a write request's body must arrive at, measured over each `body_idle` of
        /// waiting for it (0 to 1073741824; 0: no floor). A slower body is cut with 408, as a stalled one is.
        min_receive_rate: u64 = "SITEMAPD_MIN_RECEIVE_RATE", default 2048, flat min_receive_rate,
            in 0..=MAX_MIN_SEND_RATE => format!("from 0 to {MAX_MIN_SEND_RATE} bytes per second");
        /// NDJSON entries committed per transaction (1 to 100000); a batch also closes at `max_json_bytes` of lines.
        ndjson_batch: usize = "SITEMAPD_NDJSON_BATCH", default 10000, flat ndjson_batch, in 1..=100_000;
    }

    /// The sitemaps: the sites, the pages, and what is served beside them.
    [sitemaps] Sitemaps RawSitemaps {
        /// Where crawlers reach the sitemaps: origin plus optional path prefix (a reverse proxy strips the prefix).
        /// Every stored loc must lie under it, and the index lists pages at its root.
        public_url: PublicUrl = "SITEMAPD_PUBLIC_URL", default "http://localhost:8080", flat public_url,
            parse parse_public_url, show PublicUrl::as_str;
        /// Several sites (hosts) in one deployment: comma-separated `NAME=PUBLIC_URL`, e.g.
        /// `default=https://www.example.com/, shop=https://shop.example.com/`. Each site has its own index, pages,
        /// news sitemap and (with scoped tokens) write access; a write goes to the site its loc lies under, and a
        /// crawler's request to the site its host names. Empty: one site, named `default`, at `public_url` (set,
        /// `public_url` is not used: the logged configuration says so, and start-up warns when both are set). URLs
        /// stored before sites existed belong to the site named `default`. See docs/sites.md.
        sites: Vec<SiteSpec> = "SITEMAPD_SITES", default "", flat sites, parse parse_sites, show show_sites;
        /// URLs per page (1 to 50000, the sitemaps.org maximum). Lowering it below what stored pages hold is refused
        /// at start: pages are not rebalanced yet.
        page_max_urls: u32 = "SITEMAPD_PAGE_MAX_URLS", default 50000, flat page_max_urls,
            in 1..=PROTOCOL_MAX_URLS => format!("from 1 to {PROTOCOL_MAX_URLS} (the sitemaps.org maximum)");
        /// Uncompressed bytes per page (at least 13439, room for one entry with the longest loc; at most 52428800,
        /// the sitemaps.org maximum).
        page_max_bytes: u64 = "SITEMAPD_PAGE_MAX_BYTES", default 52428800, flat page_max_bytes,
            in Limits::least_max_bytes()..=PROTOCOL_MAX_BYTES => format!(
                "from {} (room for one entry with the longest allowed loc) to {PROTOCOL_MAX_BYTES} (the sitemaps.org \
                 maximum)",
                Limits::least_max_bytes()
            );
        /// Sections whose pages hold fewer URLs than `page_max_urls`, for finer per-sitemap reports in Search
        /// Console: `products=1000, blog=5000` (in every site). A section's name is what entries give as `section`.
        /// Lowering it for a section whose pages already hold more is refused at start, as `page_max_urls` is. See
        /// docs/sitemaps.md.
        section_max_urls: BTreeMap<String, u32> = "SITEMAPD_SECTION_MAX_URLS", default "", flat section_max_urls,
            parse parse_section_max_urls;
        /// hreflang clusters (docs/hreflang.md): the entries whose alternates name each other, or a common URL, form
        /// a cluster, and each site renders its members' alternates by a policy: `as_sent` (each entry's
        /// `alternates` as it sent them, byte for byte) or `complete` (each member lists the whole cluster, itself
        /// included, one URL per language, conflicts resolved the same way every time). A policy alone is every
        /// site's; `SITE=POLICY; …` gives sites their own (a policy alone among them: the others'). Sites not named:
        /// `as_sent`. The clusters and their problems are kept and reported (`GET /api/v1/hreflang`, the view,
        /// metrics) under both, so that a site sees them before it switches; switching re-renders the site's members
        /// at start.
        hreflang: HreflangPolicies = "SITEMAPD_HREFLANG", default "as_sent", flat hreflang,
            parse HreflangPolicies::parse, show HreflangPolicies::shown;
        /// The gzip level (1 fastest .. 9 smallest) of sitemap responses. Part of every gzip ETag: keep it equal on
        /// all replicas.
        gzip_level: u32 = "SITEMAPD_GZIP_LEVEL", default 4, flat gzip_level, in 1..=9;
        /// The longest reading and rendering a sitemap page may take (1s to 1h; past it the answer is 503). Its
        /// database snapshot and connection are held until then at most. A page is rendered whole before it is
        /// sent, so a client's reading speed never holds a snapshot.
        stream_timeout: Duration = "SITEMAPD_STREAM_TIMEOUT", default "1m", flat stream_timeout_secs,
            was "SITEMAPD_STREAM_TIMEOUT_SECS" Secs, parse parse_duration, in secs(1)..=secs(3600),
            show show_duration;
        /// Pages read, rendered and compressed at once by this process (0 to 256; 0: one per core). Each render holds
        /// a few MB, and deflate is all CPU: more at once than there are cores holds more memory and ends no sooner.
        /// The others wait their turn, within `stream_timeout`.
        render_concurrency: u32 = "SITEMAPD_RENDER_CONCURRENCY", default 0, flat render_concurrency, in 0..=256;
        /// The news sitemap (`/sitemap-news.xml`) lists the entries whose `news.publication_date` lies within this
        /// window (1h to 720h, whole hours; Google News reads two days), newest first, at most 1,000.
        news_window: Duration = "SITEMAPD_NEWS_WINDOW", default "48h", flat news_window_hours,
            was "SITEMAPD_NEWS_WINDOW_HOURS" Hours, parse parse_duration, in hours(1)..=hours(720),
            check whole_hours, show show_duration;
        /// The removed-URLs sitemap (`/sitemap-removed.xml`): with a retention of N days (1d to 365d, whole days), a
        /// deleted entry's loc is kept that long with its deletion time, and the sitemap lists those of the last N
        /// days, newest first, at most 50,000, with `<lastmod>` the deletion time, so that search engines recrawl
        /// and drop them soon. Listed in the index while not empty. 0 (the default) keeps nothing and serves
        /// nothing. Give every replica the same value.
        removed_retention: Duration = "SITEMAPD_REMOVED_RETENTION", default "0", flat removed_days,
            was "SITEMAPD_REMOVED_DAYS" Days, parse parse_duration, in days(0)..=days(365), check whole_days,
            show show_duration;
        /// `X-Robots-Tag` sent with every sitemap answer (the index, the pages, the news sitemap, the feeds), so
        /// that search engines do not list sitemap files in their results; crawlers still read them. Empty: no
        /// header.
        robots_tag: String = "SITEMAPD_ROBOTS_TAG", default "noindex", flat robots_tag, check header_text;
        /// Answer `GET /robots.txt` (for deployments where sitemapd owns that path): `robots_txt_body`, then the
        /// line `Sitemap: <the site's public URL>sitemap.xml` (and with `feeds.enabled`, `Sitemap: <the site's
        /// public URL>feed.atom`). Off by default: a site's robots.txt is usually its own.
        robots_txt: bool = "SITEMAPD_ROBOTS_TXT", default false, flat robots_txt;
        /// The rest of that robots.txt (at most 64 KiB), e.g. `User-agent: *` and `Disallow:` lines.
        robots_txt_body: String = "SITEMAPD_ROBOTS_TXT_BODY", default "", flat robots_txt_body, check robots_body;
        /// The HTML view for people at `/view/`: each site's pages and how full they are, a page's entries, a lookup
        /// by loc. Read-only, and it shows only what the sitemaps publish, but like `/metrics` it needs no token,
        /// shows every site (whatever a site-scoped API token may reach) and is meant for the internal network:
        /// route only the sitemaps from the internet (docs/view.md). `false`: `/view/` is 404.
        view: bool = "SITEMAPD_VIEW", default true, flat view;
    }

    /// Rendered pages kept in memory, and how fresh this process's picture of the pages is.
    [cache] Cache RawCache {
        /// Rendered gzip pages kept in memory, in bytes (0: none), least recently and least frequently used evicted
        /// first. A page is compressed once per version and then served from here, with `Content-Length`; identity
        /// (uncompressed) answers are inflated from it as they are sent. With 0, each request renders the page into
        /// a gzip buffer of its own. Each replica has its own cache; the ETags come from the database alone, so
        /// replicas still agree.
        bytes: u64 = "SITEMAPD_CACHE_BYTES", default 33554432, flat cache_bytes, in ..=MAX_CACHE_BYTES;
        /// After a write, render the pages it changed into the page cache in the background, so that the first
        /// crawler to fetch one after the change finds it ready (with `bytes` > 0). Every replica does this for the
        /// pages it sees change, checking every `state_ttl` but at most every 250 ms (one primary-key read when
        /// nothing changed; with `state_ttl` = 0, only for its own writes). A page is rendered once it has gone
        /// 200 ms without a change (800 ms when it changed less than 800 ms before: a page a bulk load is filling),
        /// one page at a time; writes never wait for it.
        prerender: bool = "SITEMAPD_PRERENDER", default true, flat prerender;
        /// How long this process answers from its snapshot of the page table (the versions and dates of the pages)
        /// before reading it again: the index, 304s and cached pages cost no query in between. Writes through this
        /// process take effect at once; writes through another replica within this time. 0 reads it on every
        /// request. At most 1m.
        state_ttl: Duration = "SITEMAPD_STATE_TTL", default "1s", flat state_ttl_ms,
            was "SITEMAPD_STATE_TTL_MS" Ms, parse parse_duration, in millis(0)..=secs(60), show show_duration;
    }

    /// The log.
    [log] Log RawLog {
        /// `text` (human-readable) or `json`. Filter with `RUST_LOG` (default `sitemapd=info,tower_http=info`).
        format: LogFormat = "SITEMAPD_LOG_FORMAT", default "text", flat log_format, parse parse_log_format;
        /// Which requests get their `answered` line (status, latency) at INFO: `writes_and_errors` logs every request
        /// that may change something (PUT, POST, DELETE), every answer of status 400 or more and every answer
        /// slower than a second, and leaves a crawler's routine 200s and 304s, the probes and `/metrics` at DEBUG
        /// (`RUST_LOG=sitemapd=debug` shows them; the request metrics count every request either way). `all` logs
        /// every request at INFO: at tens of thousands of crawler requests a second, that line is a third of the
        /// cost of a 304 (BENCHMARKS.md).
        access: AccessLog = "SITEMAPD_ACCESS_LOG", default "writes_and_errors", flat access_log,
            parse parse_access_log;
    }

    /// Crawler telemetry: which crawler fetched which sitemap, verified, and how long after each page's change
    /// (docs/crawlers.md).
    [crawlers] Crawlers RawCrawlers {
        /// Record which crawler (by User-Agent: Googlebot, Bingbot, YandexBot, Applebot, DuckDuckBot, Baiduspider,
        /// GPTBot, OAI-SearchBot, ClaudeBot, PerplexityBot, CCBot, other bots) fetched which sitemap, when, with what
        /// answer, and how long after each page's change it read the page. A claim is "verified" when the client
        /// address is in the crawler's published IP ranges (shipped in config/crawlers/) or its reverse DNS name,
        /// confirmed forward, lies under the crawler's domains; else "claimed". Behind a proxy the client address is
        /// taken from the forwarding header only when the peer is one of `http.trusted_proxies`. Recorded in memory
        /// and written to the database every few seconds; never delays an answer. `false`: nothing recorded,
        /// `/api/v1/crawlers` says so.
        telemetry: bool = "SITEMAPD_CRAWLER_TELEMETRY", default true, flat crawler_telemetry;
        /// Replace a crawler's shipped IP ranges: `NAME=SOURCE, ...`, NAME a crawler's name (`googlebot`, `bingbot`,
        /// …), SOURCE an absolute path to a range file (the operators' JSON, or one address or network a line), an
        /// http(s) URL (e.g. `bingbot=https://www.bing.com/toolbox/bingbot.json`), or `none`. A file that cannot be
        /// read stops the start; a URL that fails keeps the ranges last read.
        ranges: RangeSources = "SITEMAPD_CRAWLER_RANGES", default "", flat crawler_ranges,
            parse parse_crawler_ranges, show RangeSources::shown;
        /// How often the files and URLs of `ranges` are read again (1h to 720h).
        ranges_refresh: Duration = "SITEMAPD_CRAWLER_RANGES_REFRESH", default "24h",
            flat crawler_ranges_refresh_hours, was "SITEMAPD_CRAWLER_RANGES_REFRESH_HOURS" Hours,
            parse parse_duration, in hours(1)..=hours(720), show show_duration;
        /// Verify a crawler whose address is in no range by forward-confirmed reverse DNS through the system
        /// resolver (cached an hour, off the request path).
        rdns: bool = "SITEMAPD_CRAWLER_RDNS", default true, flat crawler_rdns;
        /// The window of the lag figures (median, p90) that the API, the view and the metrics give (1d to 365d,
        /// whole days); superseded page reads older than it are deleted.
        window: Duration = "SITEMAPD_CRAWLER_WINDOW", default "7d", flat crawler_window_days,
            was "SITEMAPD_CRAWLER_WINDOW_DAYS" Days, parse parse_duration, in days(1)..=days(365), check whole_days,
            show show_duration;
    }

    /// URL health: sitemapd fetches the stored URLs and records what a search engine would refuse
    /// (docs/health.md).
    [health] Health RawHealth {
        /// The sites whose stored URLs are checked, and each one's policy: `SITE=report|exclude, ...` (`report` or
        /// `exclude` alone: the site `default`). A check records what a search engine would refuse (404, 410, other
        /// 4xx, a redirect, noindex, a canonical naming another URL, a robots.txt disallow for Googlebot). report:
        /// problems are visible (API, metrics, view), the sitemaps never change for them. exclude: a URL with a
        /// definite problem is left out of its page until a check finds it healthy again, which changes that page
        /// for crawlers. Empty: no checks.
        check: HealthSites = "SITEMAPD_HEALTH_CHECK", default "", flat health_check,
            parse HealthSites::parse, show HealthSites::shown;
        /// Every stored URL is checked again within this (1d to 365d, whole days); new and changed URLs at once.
        cycle: Duration = "SITEMAPD_HEALTH_CYCLE", default "7d", flat health_cycle_days,
            was "SITEMAPD_HEALTH_CYCLE_DAYS" Days, parse parse_duration, in days(1)..=days(365), check whole_days,
            show show_duration;
        /// The most checks in flight to one host from this process (1 to 64).
        concurrency: u32 = "SITEMAPD_HEALTH_CONCURRENCY", default 1, flat health_concurrency, in 1..=64;
        /// The most check requests a second to one host, all replicas together (1 to 1000; through the database). A
        /// 429 or 503 with `Retry-After` holds the host that long.
        rate: u32 = "SITEMAPD_HEALTH_RATE", default 2, flat health_rate, in 1..=1000;
        /// The longest one check's request may take, connecting and reading the head included (1s to 5m); past it
        /// the check is a transient failure.
        timeout: Duration = "SITEMAPD_HEALTH_TIMEOUT", default "10s", flat health_timeout_secs,
            was "SITEMAPD_HEALTH_TIMEOUT_SECS" Secs, parse parse_duration, in secs(1)..=secs(300),
            show show_duration;
        /// The most bytes of a page read (1024 to 16777216); reading stops at the end of its `<head>`.
        head_bytes: u64 = "SITEMAPD_HEALTH_HEAD_BYTES", default 262144, flat health_head_bytes,
            in 1024..=16_777_216;
    }

    /// IndexNow change notification (Bing, Yandex, Naver, Seznam and the other engines that take IndexNow;
    /// docs/indexnow.md).
    [indexnow] IndexNow RawIndexNow {
        /// IndexNow keys by site; empty: off. A key is 8 to 128 characters of `a-z`, `A-Z`, `0-9` and `-`; give it
        /// alone (for the site `default`) or as `SITE=KEY`, comma-separated. sitemapd then serves it at
        /// `<public_url><key>.txt` (route that path to sitemapd), and sends the locs of created, updated and deleted
        /// entries to `endpoint`, at most 10,000 a request. The locs to send are kept in the database (the outbox)
        /// until they are sent, dropped or given up. A key is public: it is logged.
        keys: IndexNowKeys = "SITEMAPD_INDEXNOW_KEYS", default "", flat indexnow_keys,
            parse IndexNowKeys::parse, show IndexNowKeys::shown;
        /// Where change notifications are sent (`POST`; http or https).
        endpoint: url::Url = "SITEMAPD_INDEXNOW_ENDPOINT", default "https://api.indexnow.org/indexnow",
            flat indexnow_endpoint, parse parse_endpoint, show url::Url::as_str;
        /// After a failed send (429, a 5xx, a network error or a timeout), the locs are sent again after a delay
        /// that starts at this (10ms to 1h), doubles with each failure up to an hour, and is randomized down to
        /// half of that (a `Retry-After` from the endpoint is honoured, within the same bounds).
        retry_base: Duration = "SITEMAPD_INDEXNOW_RETRY_BASE", default "10s", flat indexnow_retry_base_ms,
            was "SITEMAPD_INDEXNOW_RETRY_BASE_MS" Ms, parse parse_duration, in millis(10)..=hours(1),
            show show_duration;
        /// Failed sends after which a loc is dropped (`gave_up`) (1 to 1000); at the defaults, after 11 to 21 hours
        /// of failures.
        max_attempts: u32 = "SITEMAPD_INDEXNOW_MAX_ATTEMPTS", default 30, flat indexnow_max_attempts,
            in 1..=1000;
        /// The longest one request to the endpoint may take, connecting included (1s to 5m).
        timeout: Duration = "SITEMAPD_INDEXNOW_TIMEOUT", default "30s", flat indexnow_timeout_secs,
            was "SITEMAPD_INDEXNOW_TIMEOUT_SECS" Secs, parse parse_duration, in secs(1)..=secs(300),
            show show_duration;
    }

    /// Atom feeds of each site's newest changes, and the WebSub hubs told of them (docs/feeds.md).
    [feeds] Feeds RawFeeds {
        /// Serve an Atom 1.0 feed of each site's newest changes at `<public_url>feed.atom`, and one per section at
        /// `<public_url>feed-<section>.atom`: the newest created or updated URLs (and, with the removed-URLs sitemap
        /// on, deletions as tombstones), newest first, at most `entries` and 256 KiB. Listed in robots.txt (with
        /// `sitemaps.robots_txt`), the view and the lookup API. `false` (the default): nothing is served or changed.
        enabled: bool = "SITEMAPD_FEEDS", default false, flat feeds;
        /// The most items a feed holds (1 to 1000), the newest; fewer when they would pass 262144 bytes.
        entries: u32 = "SITEMAPD_FEED_ENTRIES", default 200, flat feed_entries, in 1..=1000;
        /// Each site's feed title: `SITE=Title`, separated by `;` (a title may hold commas, not `;`), e.g.
        /// `default=Example News; shop=Example Shop`. A title is 1 to 200 characters without control characters;
        /// a section's feed is titled `Title — section`. A site without one is titled by its host.
        titles: FeedTitles = "SITEMAPD_FEED_TITLES", default "", flat feed_titles,
            parse FeedTitles::parse, show FeedTitles::shown;
        /// WebSub hubs told of each change to a site's feeds (`POST hub.mode=publish&hub.url=<feed URL>`), and named
        /// in its feeds as `<link rel="hub">`: comma-separated http or https URLs, `URL` alone for the site `default`
        /// or `SITE=URL`, several per site allowed (e.g. `https://pubsubhubbub.appspot.com/`). Empty: no hubs. A hub
        /// URL is no secret; a user name and password it holds are sent to the hub only: never logged, never in
        /// a feed.
        hubs: FeedHubs = "SITEMAPD_FEED_HUBS", default "", flat feed_hubs, parse FeedHubs::parse,
            show FeedHubs::shown;
        /// The least time between two notifications of one feed to one hub (1s to 1h): a burst of writes is told
        /// once, at most this long after it began.
        hub_interval: Duration = "SITEMAPD_FEED_HUB_INTERVAL", default "1m", flat feed_hub_interval,
            parse parse_duration, in secs(1)..=hours(1), show show_duration;
    }

    /// Publishing to object storage: each site's sitemaps uploaded as static files to S3, GCS, Azure or a local
    /// directory, only what changed, children before their index, a file the index no longer names deleted after a
    /// grace (docs/publishing.md).
    [publish] Publish RawPublish {
        /// Where each site's files are published: comma-separated `URL` (the site `default`) or `SITE=URL`, several
        /// per site allowed. `s3://BUCKET/PREFIX/`, `gs://BUCKET/PREFIX/`, `az://CONTAINER/PREFIX/` (or `azure://`),
        /// or `file:///ABSOLUTE/DIR/` (created if missing); a trailing `/` is added. Credentials come from the
        /// store's own environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`), never from the URL: a URL with a
        /// user name, password, query or fragment is refused, as is a directory that holds the SQLite database.
        /// `sitemapd publish` runs one pass; `serve` publishes after each change. Empty: publishing off.
        targets: PublishTargets = "SITEMAPD_PUBLISH_TARGETS", default "", flat publish_targets,
            parse PublishTargets::parse, show PublishTargets::shown;
        /// Where a site's published files are served, when not at the site's public URL: `SITE=URL; …` (a URL
        /// alone: the site `default`). The published indexes then name the pages there (their `<loc>`s rewritten
        /// from the site's public URL). A site not named: its public URL, and the files are the service's bytes.
        public_urls: PublishPublicUrls = "SITEMAPD_PUBLISH_PUBLIC_URLS", default "", flat publish_public_urls,
            parse PublishPublicUrls::parse, show PublishPublicUrls::shown;
        /// The forms of each sitemap page published, comma-separated: `xml` (required: the index names it),
        /// `xml.gz`, `txt`, `txt.gz`. The indexes, the news and removed-URLs sitemaps (when served) and, with
        /// `feeds.enabled`, the feeds are published too; `robots.txt` never (it is the site's).
        forms: Forms = "SITEMAPD_PUBLISH_FORMS", default "xml,xml.gz", flat publish_forms, parse Forms::parse,
            show Forms::shown;
        /// The `Cache-Control` of the published objects (S3, GCS and Azure; a directory keeps no metadata: its web
        /// server's configuration says it). Empty: none.
        cache_control: String = "SITEMAPD_PUBLISH_CACHE_CONTROL", default "public, max-age=300",
            flat publish_cache_control, check header_text;
        /// `serve` publishes a target at most once per this (1s to 1h): the first change at once, the rest of a
        /// burst at the interval's end. A failed pass is tried again after it, doubling to an hour.
        interval: Duration = "SITEMAPD_PUBLISH_INTERVAL", default "1m", flat publish_interval, parse parse_duration,
            in secs(1)..=hours(1), show show_duration;
        /// How long an object that no published index names any more is kept before it is deleted (0s to 30d), so
        /// that a crawler that read the previous index finds the files it names.
        grace: Duration = "SITEMAPD_PUBLISH_GRACE", default "1d", flat publish_grace, parse parse_duration,
            in secs(0)..=days(30), show show_duration;
    }
}

/// Settings that are no longer settings (they made tests quick): their old variable and flat key are read, warned
/// of and ignored, so that a deployment that sets them still starts. Tests set them through [`Tuning`].
const REMOVED: &[(&str, &str)] = &[
    ("health_poll_ms", "SITEMAPD_HEALTH_POLL_MS"),
    ("indexnow_interval_ms", "SITEMAPD_INDEXNOW_INTERVAL_MS"),
    ("crawler_flush_ms", "SITEMAPD_CRAWLER_FLUSH_MS"),
];

/// The hidden variable that sets [`Tuning`] in a process the tests start (`health_poll=20ms, …`). Not a setting:
/// not in the reference.
pub const TUNING_VARIABLE: &str = "SITEMAPD_TEST_TUNING";

/// How often background work looks for something to do, where the answer only matters to a test's patience: not a
/// setting (not read from the file, not documented). Tests build it in code (`config.tuning.health_poll = …`); a
/// process test gives it in [`TUNING_VARIABLE`].
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// How often the URL checker looks for due URLs when it has none.
    pub health_poll: Duration,
    /// How often the IndexNow sender looks for queued notifications when it has nothing to send.
    pub indexnow_interval: Duration,
    /// How often the crawler telemetry recorded in memory is written to the database.
    pub crawler_flush: Duration,
    /// How often the WebSub publisher reads each site's change counter.
    pub websub_poll: Duration,
    /// The longest one WebSub notification may take (its claim's lease is twice that and 10 s).
    pub websub_timeout: Duration,
    /// How often the publisher reads each published site's change counter.
    pub publish_poll: Duration,
    /// How long a publishing pass's claim holds its target without being renewed (renewed every third of it): a
    /// pass killed while holding it delays the next one by this much.
    pub publish_lease: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            health_poll: secs(1),
            indexnow_interval: secs(5),
            crawler_flush: secs(5),
            websub_poll: secs(1),
            websub_timeout: secs(10),
            publish_poll: secs(1),
            publish_lease: secs(60),
        }
    }
}

impl Tuning {
    /// `NAME=DURATION, …`, each name a field.
    fn parse(raw: &str) -> anyhow::Result<Self> {
        let mut tuning = Self::default();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item.split_once('=').unwrap_or((item, ""));
            let value = humantime::parse_duration(value.trim())
                .with_context(|| format!("{TUNING_VARIABLE}: {item:?} must be NAME=DURATION"))?;
            // The ranges these knobs had as settings: a poll of 0 would spin on the database.
            let (field, least, most) = match name.trim() {
                "health_poll" => (&mut tuning.health_poll, millis(10), secs(60)),
                "indexnow_interval" => (&mut tuning.indexnow_interval, millis(10), secs(3600)),
                "crawler_flush" => (&mut tuning.crawler_flush, millis(50), secs(300)),
                "websub_poll" => (&mut tuning.websub_poll, millis(10), secs(60)),
                "websub_timeout" => (&mut tuning.websub_timeout, millis(100), secs(60)),
                "publish_poll" => (&mut tuning.publish_poll, millis(10), secs(60)),
                "publish_lease" => (&mut tuning.publish_lease, millis(300), secs(600)),
                other => bail!(
                    "{TUNING_VARIABLE}: {other:?} is none of health_poll, indexnow_interval, crawler_flush, \
                     websub_poll, websub_timeout, publish_poll, publish_lease"
                ),
            };
            if !(least..=most).contains(&value) {
                bail!(
                    "{TUNING_VARIABLE}: {} must be from {} to {}, not {}",
                    name.trim(),
                    humantime::format_duration(least),
                    humantime::format_duration(most),
                    humantime::format_duration(value)
                );
            }
            *field = value;
        }
        Ok(tuning)
    }
}

/// A duration as written in the file or a variable: `250ms`, `10s`, `5m`, `48h`, `7d`, or several summed
/// (`1h 30m`), by `humantime`.
fn parse_duration(raw: &str, named: Named) -> anyhow::Result<Duration> {
    humantime::parse_duration(raw.trim())
        .map_err(|e| anyhow::anyhow!("{named} must be a duration such as 250ms, 10s, 5m or 7d, not {raw:?} ({e})"))
}

/// A duration as logged and as error messages state it: in the largest unit that divides it (`7d`, `48h`, `90s`,
/// `250ms`), `0` for none.
pub fn shown_duration(d: &Duration) -> String {
    const S: u128 = 1_000_000_000;
    if d.is_zero() {
        return "0".to_owned();
    }
    let nanos = d.as_nanos();
    for (unit, size) in [("d", 86_400 * S), ("h", 3600 * S), ("m", 60 * S), ("s", S), ("ms", 1_000_000)] {
        if nanos.is_multiple_of(size) {
            return format!("{}{unit}", nanos / size);
        }
    }
    format!("{d:?}")
}

/// A duration as logged: `30s`, without quotes.
struct Plain(String);

impl fmt::Debug for Plain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn show_duration(d: &Duration) -> Plain {
    Plain(shown_duration(d))
}

/// Whole days of a duration that [`whole_days`] allowed.
pub fn days_of(d: Duration) -> u32 {
    u32::try_from(d.as_secs() / 86_400).unwrap_or(u32::MAX)
}

/// Whole hours of a duration that [`whole_hours`] allowed.
pub fn hours_of(d: Duration) -> u64 {
    d.as_secs() / 3600
}

/// A setting counted in days where it is stored or answered (`cycle_days`, a retention in SQL): whole days only.
fn whole_days(d: &Duration, named: Named) -> anyhow::Result<()> {
    if !d.as_nanos().is_multiple_of(86_400_000_000_000) {
        bail!("{named} must be whole days (e.g. 7d), not {}", shown_duration(d));
    }
    Ok(())
}

/// A setting counted in hours where it is used (the news window): whole hours only.
fn whole_hours(d: &Duration, named: Named) -> anyhow::Result<()> {
    if !d.as_nanos().is_multiple_of(3_600_000_000_000) {
        bail!("{named} must be whole hours (e.g. 48h), not {}", shown_duration(d));
    }
    Ok(())
}
/// A setting as error messages name it: `sitemaps.page_max_urls (SITEMAPD_PAGE_MAX_URLS)`.
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

/// A bound or a value as an error message states it: a number as it is, a duration in its unit (`5m`).
trait Stated {
    fn stated(&self) -> String;
}

macro_rules! stated_as_displayed {
    ($($ty:ty),*) => {$(
        impl Stated for $ty {
            fn stated(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
stated_as_displayed!(u32, u64, usize);

impl Stated for Duration {
    fn stated(&self) -> String {
        shown_duration(self)
    }
}

/// The values a numeric or duration setting allows, and how an error message states them.
trait Allowed<T> {
    fn allows(&self, value: &T) -> bool;
    fn describe(&self) -> String;
}

impl<T: PartialOrd + Stated> Allowed<T> for RangeInclusive<T> {
    fn allows(&self, value: &T) -> bool {
        self.contains(value)
    }
    fn describe(&self) -> String {
        format!("from {} to {}", self.start().stated(), self.end().stated())
    }
}

impl<T: PartialOrd + Stated> Allowed<T> for RangeFrom<T> {
    fn allows(&self, value: &T) -> bool {
        self.contains(value)
    }
    fn describe(&self) -> String {
        format!("at least {}", self.start.stated())
    }
}

impl<T: PartialOrd + Stated> Allowed<T> for RangeToInclusive<T> {
    fn allows(&self, value: &T) -> bool {
        self.contains(value)
    }
    fn describe(&self) -> String {
        format!("at most {}", self.end.stated())
    }
}

/// `{named} must be {what}, not {value}` unless `allowed` allows `value`; `what` defaults to the range's words.
fn within<T: Stated>(value: &T, allowed: &impl Allowed<T>, what: Option<String>, named: Named) -> anyhow::Result<()> {
    if !allowed.allows(value) {
        let what = what.unwrap_or_else(|| allowed.describe());
        bail!("{named} must be {what}, not {}", value.stated());
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

/// Empty, or a Postgres URL (a replica is a Postgres feature; that `database.url` is Postgres too is checked when
/// the store opens).
fn read_url_backend(url: &str, named: Named) -> anyhow::Result<()> {
    match Backend::from_url(url) {
        _ if url.is_empty() => Ok(()),
        Some(Backend::Postgres) => Ok(()),
        _ => bail!("{named} must be empty or start with postgres:// (a streaming replica of the database.url server)"),
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

/// The IndexNow keys (`indexnow.keys`: comma-separated, blanks ignored): `KEY` for the default site (the one site
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

/// The sites whose URLs are checked (`health.check`: comma-separated, blanks ignored): `SITE=POLICY`, or `POLICY`
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

/// The hreflang policy of each site (`sitemaps.hreflang`): `as_sent` or `complete` alone (every site), or
/// `SITE=POLICY` items separated by `;` (or `,`), with at most one policy alone among them (the sites not named;
/// without one, `as_sent`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HreflangPolicies {
    /// The policy of a site not named.
    others: HreflangPolicy,
    /// (site name, policy), in the order given.
    sites: Vec<(String, HreflangPolicy)>,
}

impl HreflangPolicies {
    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let policy = |item: &str, raw: &str| {
            HreflangPolicy::parse(raw).ok_or_else(|| {
                anyhow::anyhow!("{named}: {item:?}: the policy is \"as_sent\" or \"complete\", not {raw:?}")
            })
        };
        let mut others = None;
        let mut sites: Vec<(String, HreflangPolicy)> = Vec::new();
        for item in raw.split([';', ',']).map(str::trim).filter(|i| !i.is_empty()) {
            let Some((site, value)) = item.split_once('=') else {
                if others.is_some() {
                    bail!("{named}: {item:?}: a policy alone is every other site's, and is given once");
                }
                others = Some(policy(item, item)?);
                continue;
            };
            let (site, value) = (site.trim(), value.trim());
            let value = policy(item, value)?;
            // That the site is configured is checked with the sites (`Config::validate`).
            check_site_name(site).map_err(|e| anyhow::anyhow!("{named}: {item:?}: {e}"))?;
            if sites.iter().any(|(s, _)| s == site) {
                bail!("{named}: the site {site:?} is given twice; a site has one policy");
            }
            sites.push((site.to_owned(), value));
        }
        Ok(Self { others: others.unwrap_or_default(), sites })
    }

    /// The policy of the site named `site`.
    pub fn policy(&self, site: &str) -> HreflangPolicy {
        self.sites.iter().find(|(s, _)| s == site).map_or(self.others, |(_, p)| *p)
    }

    /// The sites named, in the order given.
    pub fn named(&self) -> impl Iterator<Item = &str> {
        self.sites.iter().map(|(site, _)| site.as_str())
    }

    /// As logged: the others' policy, then `SITE=POLICY` each.
    fn shown(&self) -> Vec<String> {
        std::iter::once(self.others.as_str().to_owned())
            .chain(self.sites.iter().map(|(site, policy)| format!("{site}={}", policy.as_str())))
            .collect()
    }
}

/// The longest feed title, in characters.
pub const MAX_FEED_TITLE_CHARS: usize = 200;

/// The feeds' titles by site (`feeds.titles`: `SITE=Title; …`, blanks around each ignored). A title is 1 to
/// [`MAX_FEED_TITLE_CHARS`] characters with no control character (none a header, an XML document or a log line
/// would choke on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedTitles(Vec<(String, String)>);

impl FeedTitles {
    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let mut titles: Vec<(String, String)> = Vec::new();
        for item in raw.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((site, title)) = item.split_once('=') else {
                bail!("{named}: {item:?} must be SITE=Title, e.g. default=Example News (titles are separated by ;)");
            };
            let (site, title) = (site.trim(), title.trim());
            // That the site is configured is checked with the sites (`Config::validate`).
            check_site_name(site).map_err(|e| anyhow::anyhow!("{named}: {item:?}: {e}"))?;
            check_feed_title(title).map_err(|e| anyhow::anyhow!("{named}: site {site}: {e}"))?;
            if titles.iter().any(|(s, _)| s == site) {
                bail!("{named}: the site {site:?} is given two titles; a site has one");
            }
            titles.push((site.to_owned(), title.to_owned()));
        }
        Ok(Self(titles))
    }

    /// The title of the site named `site`, `None` when it has none.
    pub fn for_site(&self, site: &str) -> Option<&str> {
        self.0.iter().find(|(s, _)| s == site).map(|(_, t)| t.as_str())
    }

    /// (site name, title), in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(site, title)| (site.as_str(), title.as_str()))
    }

    /// As logged: `SITE=Title` each.
    fn shown(&self) -> Vec<String> {
        self.0.iter().map(|(site, title)| format!("{site}={title}")).collect()
    }
}

/// A feed title: 1 to [`MAX_FEED_TITLE_CHARS`] characters, none of them a control character (C0, DEL, C1, or the
/// Unicode line and paragraph separators), nor a noncharacter XML refuses.
pub fn check_feed_title(title: &str) -> Result<(), String> {
    let count = title.chars().count();
    if !(1..=MAX_FEED_TITLE_CHARS).contains(&count) {
        return Err(format!("a feed title is 1 to {MAX_FEED_TITLE_CHARS} characters, not {count}"));
    }
    if let Some(c) =
        title.chars().find(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}'))
    {
        return Err(format!("a feed title holds no control character, not {c:?}"));
    }
    Ok(())
}

/// The WebSub hubs by site (`feeds.hubs`: comma-separated, blanks ignored): `URL` for the default site, or
/// `SITE=URL`; several per site. Each an absolute http or https URL without a fragment. Not secrets, but a URL's
/// user name and password are left out of the logged form and of the feeds' `<link rel="hub">`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedHubs(Vec<(String, Vec<url::Url>)>);

impl FeedHubs {
    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let mut hubs: Vec<(String, Vec<url::Url>)> = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            // A URL may hold `=` in its query; a site name never holds `:`.
            let (site, url) = match item.split_once('=') {
                Some((site, url)) if !site.contains(':') => (site.trim(), url.trim()),
                _ => (DEFAULT_SITE, item),
            };
            // That the site is configured is checked with the sites (`Config::validate`).
            check_site_name(site).map_err(|e| anyhow::anyhow!("{named}: {:?}: {e}", shown_hub(item)))?;
            let hub = parse_hub(url).map_err(|e| anyhow::anyhow!("{named}: site {site}: {e}"))?;
            let index = match hubs.iter().position(|(s, _)| s == site) {
                Some(i) => i,
                None => {
                    hubs.push((site.to_owned(), Vec::new()));
                    hubs.len() - 1
                }
            };
            if hubs[index].1.contains(&hub) {
                bail!("{named}: the hub {} is given twice for the site {site:?}", shown_hub_url(&hub));
            }
            hubs[index].1.push(hub);
        }
        Ok(Self(hubs))
    }

    /// The hubs of the site named `site`, in the order given; empty when it has none.
    pub fn for_site(&self, site: &str) -> &[url::Url] {
        self.0.iter().find(|(s, _)| s == site).map_or(&[], |(_, hubs)| hubs.as_slice())
    }

    /// (site name, its hubs), in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[url::Url])> {
        self.0.iter().map(|(site, hubs)| (site.as_str(), hubs.as_slice()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As logged: `SITE=URL` each, without a user name or password.
    fn shown(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|(site, hubs)| hubs.iter().map(move |h| format!("{site}={}", shown_hub_url(h))))
            .collect()
    }
}

/// One hub URL: absolute, http or https, with a host and no fragment.
fn parse_hub(raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("the hub {:?} is not an absolute URL ({e})", shown_hub(raw)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("the hub {:?} must be an http or https URL", shown_hub_url(&url)));
    }
    if url.fragment().is_some() {
        return Err(format!("the hub {:?} must have no #fragment", shown_hub_url(&url)));
    }
    Ok(url)
}

/// A hub URL as logged and as messages show it: without its user name and password.
pub fn shown_hub_url(url: &url::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.into()
}

/// A hub as given, for a message: without userinfo when it parses, else without anything around an `@`.
fn shown_hub(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(url) => shown_hub_url(&url),
        Err(_) if raw.contains('@') => "(unparsable, REDACTED)".to_owned(),
        Err(_) => raw.to_owned(),
    }
}

/// One place a site's files are published (`publish.targets`): the site's name and the target's URL (with its
/// trailing `/`). The URL holds no secret: a user name, a password, a query and a fragment are refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishTarget {
    pub site: String,
    pub url: url::Url,
}

/// The schemes of [`PublishTarget`] URLs: S3 (and S3-compatible stores), Google Cloud Storage, Azure Blob Storage,
/// a local directory.
pub const PUBLISH_SCHEMES: &[&str] = &["s3", "gs", "az", "azure", "file"];

/// Where each site's files are published (`publish.targets`: comma-separated, blanks ignored): `URL` for the default
/// site, or `SITE=URL`; several per site, each URL once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishTargets(Vec<PublishTarget>);

impl PublishTargets {
    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let mut targets: Vec<PublishTarget> = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            // A site name never holds `:`; a URL always does.
            let (site, url) = match item.split_once('=') {
                Some((site, url)) if !site.contains(':') => (site.trim(), url.trim()),
                _ => (DEFAULT_SITE, item),
            };
            // That the site is configured is checked with the sites (`Config::validate`).
            check_site_name(site).map_err(|e| anyhow::anyhow!("{named}: {:?}: {e}", shown_target(item)))?;
            let url = parse_publish_target(url).map_err(|e| anyhow::anyhow!("{named}: site {site}: {e}"))?;
            if let Some(other) = targets.iter().find(|t| t.url == url) {
                bail!("{named}: the target {url} is given twice (for the sites {} and {site})", other.site);
            }
            targets.push(PublishTarget { site: site.to_owned(), url });
        }
        Ok(Self(targets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The targets, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &PublishTarget> {
        self.0.iter()
    }

    /// As logged: `SITE=URL` each (a URL holds no secret).
    fn shown(&self) -> Vec<String> {
        self.0.iter().map(|t| format!("{}={}", t.site, t.url)).collect()
    }
}

/// One target URL: a scheme of [`PUBLISH_SCHEMES`]; a bucket (container) for the object stores, an absolute
/// path for a directory (`file:///…`); no user name, password, port, query or fragment; a trailing `/` added.
fn parse_publish_target(raw: &str) -> Result<url::Url, String> {
    let mut url =
        url::Url::parse(raw).map_err(|e| format!("the target {:?} is not an absolute URL ({e})", shown_target(raw)))?;
    let shown = shown_hub_url(&url);
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "the target {shown} must hold no user name or password: the store's credentials come from its own \
             environment variables (AWS_*, GOOGLE_*, AZURE_*)"
        ));
    }
    if url.query().is_some() {
        return Err(format!("the target {shown} must have no ?query (the store's options are environment variables)"));
    }
    if url.fragment().is_some() {
        return Err(format!("the target {shown} must have no #fragment"));
    }
    match url.scheme() {
        "file" => {
            // `file:dir` and `file://dir/` would be read as `/dir` and as the host `dir`: an absolute path only.
            let absolute = raw.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("file:///"));
            if !absolute || url.host_str().is_some_and(|h| !h.is_empty()) {
                return Err(format!(
                    "the target {shown} must name a directory by its absolute path: file:///DIR/ (e.g. \
                     file:///srv/www/sitemaps/)"
                ));
            }
        }
        "s3" | "gs" | "az" | "azure" => {
            if url.host_str().is_none_or(str::is_empty) {
                return Err(format!("the target {shown} must name a bucket: {}://BUCKET/PREFIX/", url.scheme()));
            }
            if url.port().is_some() {
                return Err(format!(
                    "the target {shown} must name no port (an S3-compatible store's endpoint is AWS_ENDPOINT)"
                ));
            }
        }
        _ => {
            return Err(format!(
                "the target {shown} must be an s3://, gs://, az:// (or azure://) or file:/// URL, not {}://",
                url.scheme()
            ));
        }
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// A target as given, for a message: without userinfo when it parses, else without anything around an `@`.
fn shown_target(raw: &str) -> String {
    shown_hub(raw)
}

/// Where sites' published files are served, when not at the site's public URL (`publish.public_urls`: `SITE=URL`
/// items separated by `;`, or a URL alone for the default site).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishPublicUrls(Vec<(String, PublicUrl)>);

impl PublishPublicUrls {
    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let mut urls: Vec<(String, PublicUrl)> = Vec::new();
        for item in raw.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (site, url) = match item.split_once('=') {
                Some((site, url)) if !site.contains(':') => (site.trim(), url.trim()),
                _ => (DEFAULT_SITE, item),
            };
            // That the site is configured is checked with the sites (`Config::validate`).
            check_site_name(site).map_err(|e| anyhow::anyhow!("{named}: {:?}: {e}", shown_public_url(item)))?;
            let url = PublicUrl::parse(url)
                .map_err(|e| anyhow::anyhow!("{named}: site {site} {:?}: {e}", shown_public_url(url)))?;
            if urls.iter().any(|(s, _)| s == site) {
                bail!("{named}: the site {site:?} is given two public URLs; a site has one");
            }
            urls.push((site.to_owned(), url));
        }
        Ok(Self(urls))
    }

    /// Where the files of the site named `site` are served, when not at its public URL.
    pub fn for_site(&self, site: &str) -> Option<&PublicUrl> {
        self.0.iter().find(|(s, _)| s == site).map(|(_, u)| u)
    }

    /// The sites named, in the order given.
    pub fn named(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(site, _)| site.as_str())
    }

    /// As logged: `SITE=URL` each.
    fn shown(&self) -> Vec<String> {
        self.0.iter().map(|(site, url)| format!("{site}={url}")).collect()
    }
}

/// The forms of each sitemap page that are published (`publish.forms`): `.xml` always (the index names it), and
/// any of `.xml.gz`, `.txt`, `.txt.gz`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forms {
    pub xml_gz: bool,
    pub txt: bool,
    pub txt_gz: bool,
}

impl Default for Forms {
    /// `xml,xml.gz`.
    fn default() -> Self {
        Self { xml_gz: true, txt: false, txt_gz: false }
    }
}

impl Forms {
    /// The forms' names, in the order written.
    pub const NAMES: [&str; 4] = ["xml", "xml.gz", "txt", "txt.gz"];

    fn parse(raw: &str, named: Named) -> anyhow::Result<Self> {
        let mut given: Vec<&str> = Vec::new();
        for form in raw.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let Some(name) = Self::NAMES.iter().find(|n| n.eq_ignore_ascii_case(form)) else {
                bail!("{named}: {form:?} is none of xml, xml.gz, txt, txt.gz");
            };
            if given.contains(name) {
                bail!("{named}: the form {name} is given twice");
            }
            given.push(name);
        }
        if !given.contains(&"xml") {
            bail!("{named} must include xml: the published index names each page's .xml file");
        }
        Ok(Self { xml_gz: given.contains(&"xml.gz"), txt: given.contains(&"txt"), txt_gz: given.contains(&"txt.gz") })
    }

    /// The extensions of a page's other forms published beside its `.xml` (`.xml.gz`, `.txt`, `.txt.gz`), in that
    /// order.
    pub fn others(&self) -> Vec<&'static str> {
        [(self.xml_gz, ".xml.gz"), (self.txt, ".txt"), (self.txt_gz, ".txt.gz")]
            .into_iter()
            .filter_map(|(on, ext)| on.then_some(ext))
            .collect()
    }

    /// As logged: the names, in [`Forms::NAMES`] order.
    fn shown(&self) -> Vec<&'static str> {
        let on = [true, self.xml_gz, self.txt, self.txt_gz];
        Self::NAMES.into_iter().zip(on).filter_map(|(name, on)| on.then_some(name)).collect()
    }
}

/// Refuses a `file://` target directory that holds the SQLite database (at any depth: a web server serving the
/// directory would serve the database) or lies inside its path, compared with symlinks followed as far as the
/// paths exist.
fn check_publish_dirs(targets: &PublishTargets, database_url: &str) -> anyhow::Result<()> {
    let named = "publish.targets (SITEMAPD_PUBLISH_TARGETS)";
    if Backend::from_url(database_url) != Some(Backend::Sqlite) || database_url.contains(":memory:") {
        return Ok(());
    }
    let file = sqlite_path(database_url);
    if file.is_empty() || file.contains("mode=memory") {
        return Ok(());
    }
    let db = resolved(Path::new(file));
    for target in targets.iter().filter(|t| t.url.scheme() == "file") {
        let Ok(dir) = target.url.to_file_path() else {
            bail!("{named}: the target {} is no directory path", target.url);
        };
        let dir = resolved(&dir);
        if db.starts_with(&dir) || dir.starts_with(&db) {
            bail!(
                "{named}: the directory of the target {} holds the SQLite database {} (database.url): a web server \
                 serving it would serve the database; publish to another directory",
                target.url,
                db.display()
            );
        }
    }
    Ok(())
}

/// `path` absolute, its longest existing ancestor's symlinks followed, `.` and `..` resolved by name after it.
fn resolved(path: &Path) -> std::path::PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut rest = Vec::new();
    let mut at = absolute.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            let mut out = real;
            for part in rest.iter().rev() {
                match part {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => out.push(other.as_os_str()),
                }
            }
            return out;
        }
        match (at.parent(), at.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                at = parent;
            }
            _ => return absolute,
        }
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
        check_values_are_text(std::env::vars_os())?;
        Self::load_from(file, |name| std::env::var(name).ok())
    }

    /// As [`Config::load`], with the environment given as a function (for tests).
    pub fn load_from(file: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        use config::{File, FileFormat};
        let mut deprecations = Vec::new();
        let defaults = reference::default_toml();
        let mut builder = config::Config::builder().add_source(File::from_str(&defaults, FileFormat::Toml));
        let (path, required) = match file {
            Some(path) => (path, true),
            None => (Path::new(DEFAULT_FILE), false),
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => bail!("cannot read the configuration file {}: {e}", path.display()),
        };
        if let Some(text) = text {
            let sectioned = sectioned_file(&text, path, &mut deprecations)?;
            builder = builder.add_source(File::from_str(&sectioned, FileFormat::Toml));
        }
        for setting in SETTINGS {
            builder = builder.set_override_option(setting.path, setting_from_env(setting, &env, &mut deprecations)?)?;
        }
        for (flat, var) in REMOVED {
            if env(var).is_some() {
                deprecations.push(format!(
                    "{var} is no longer a setting and is ignored (it was {flat}, which only tests needed); unset it"
                ));
            }
        }
        let raw: Raw = builder
            .build()
            .map_err(|e| anyhow::anyhow!("cannot read the configuration: {}", without_source_lines(&e.to_string())))?
            .try_deserialize()
            .map_err(|e| type_error(&e, file, &env))?;
        let mut config = Self::validate(raw)?;
        if let Some(tuning) = env(TUNING_VARIABLE) {
            config.tuning = Tuning::parse(&tuning)?;
        }
        config.deprecations = deprecations;
        Ok(config)
    }

    /// The deprecated names the configuration was read from, one sentence each (start-up logs them as warnings).
    pub fn deprecations(&self) -> &[String] {
        &self.deprecations
    }

    /// The settings' checks, then those between settings.
    fn validate(raw: Raw) -> anyhow::Result<Self> {
        let config = Self::from_raw(raw)?;
        let specs = config.site_specs();
        if let Some(name) = config.api.tokens.scoped_sites().find(|n| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "api.tokens (SITEMAPD_API_TOKENS): a token is scoped to the site {name:?}, which is not configured \
                 (sites: {})",
                names.join(", ")
            );
        }
        if let Some((name, _)) = config.indexnow.keys.iter().find(|(n, _)| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "indexnow.keys (SITEMAPD_INDEXNOW_KEYS): a key is given for the site {name:?}, which is not \
                 configured (sites: {}); a key without SITE= is the site named {DEFAULT_SITE}'s",
                names.join(", ")
            );
        }
        if let Some((name, _)) = config.health.check.iter().find(|(n, _)| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "health.check (SITEMAPD_HEALTH_CHECK): a policy is given for the site {name:?}, which is not \
                 configured (sites: {}); a policy without SITE= is the site named {DEFAULT_SITE}'s",
                names.join(", ")
            );
        }
        if let Some((name, _)) = config.feeds.titles.iter().find(|(n, _)| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "feeds.titles (SITEMAPD_FEED_TITLES): a title is given for the site {name:?}, which is not \
                 configured (sites: {})",
                names.join(", ")
            );
        }
        if let Some(name) = config.sitemaps.hreflang.named().find(|n| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "sitemaps.hreflang (SITEMAPD_HREFLANG): a policy is given for the site {name:?}, which is not \
                 configured (sites: {}); a policy without SITE= is every other site's",
                names.join(", ")
            );
        }
        if let Some((name, _)) = config.feeds.hubs.iter().find(|(n, _)| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "feeds.hubs (SITEMAPD_FEED_HUBS): a hub is given for the site {name:?}, which is not configured \
                 (sites: {}); a hub without SITE= is the site named {DEFAULT_SITE}'s",
                names.join(", ")
            );
        }
        if let Some(t) = config.publish.targets.iter().find(|t| !specs.iter().any(|s| s.name == t.site)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "publish.targets (SITEMAPD_PUBLISH_TARGETS): the target {} is given for the site {:?}, which is not \
                 configured (sites: {}); a target without SITE= is the site named {DEFAULT_SITE}'s",
                t.url,
                t.site,
                names.join(", ")
            );
        }
        if let Some(name) = config.publish.public_urls.named().find(|n| !specs.iter().any(|s| s.name == *n)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "publish.public_urls (SITEMAPD_PUBLISH_PUBLIC_URLS): a public URL is given for the site {name:?}, \
                 which is not configured (sites: {}); a URL without SITE= is the site named {DEFAULT_SITE}'s",
                names.join(", ")
            );
        }
        check_publish_dirs(&config.publish.targets, &config.database.url)?;
        if config.crawlers.telemetry {
            crate::crawlers::verify::check_files(&config.crawlers.ranges)
                .map_err(|e| anyhow::anyhow!("crawlers.ranges (SITEMAPD_CRAWLER_RANGES): {e}"))?;
        }
        if config.api.tokens.is_empty() && !config.http.bind.ip().is_loopback() {
            bail!(
                "refusing to listen on {} without api.tokens (SITEMAPD_API_TOKENS): the write API would be open \
                 to the network. Set a token, or bind to a loopback address such as 127.0.0.1.",
                config.http.bind
            );
        }
        Ok(config)
    }

    /// The setting that replaces the setting at `path`, when one does: `sites` replaces `public_url`.
    fn replaced(&self, path: &str) -> Option<&'static str> {
        (path == "sitemaps.public_url" && !self.sitemaps.sites.is_empty()).then_some("sites")
    }

    /// `public_url` when it was set (it is not its default) but `sites` replaces it: start-up warns of it.
    pub fn ignored_public_url(&self) -> Option<&PublicUrl> {
        let default = setting("sitemaps.public_url").and_then(|s| PublicUrl::parse(s.default.trim_matches('"')).ok());
        (self.replaced("sitemaps.public_url").is_some() && default.as_ref() != Some(&self.sitemaps.public_url))
            .then_some(&self.sitemaps.public_url)
    }

    /// The page limits (`page_max_urls`, `page_max_bytes`).
    pub fn limits(&self) -> Limits {
        Limits { max_urls: self.sitemaps.page_max_urls, max_bytes: self.sitemaps.page_max_bytes }
    }

    /// The sites served: `sites`, or without it one site named `default` at `public_url`.
    pub fn site_specs(&self) -> Vec<SiteSpec> {
        if self.sitemaps.sites.is_empty() {
            vec![SiteSpec { name: DEFAULT_SITE.to_owned(), public_url: self.sitemaps.public_url.clone() }]
        } else {
            self.sitemaps.sites.clone()
        }
    }

    /// How many threads serve connections: `serve_threads`, or one per core (as the OS reports them to this
    /// process: a container's CPU limit included) when it is 0.
    pub fn serving_threads(&self) -> usize {
        match self.http.serve_threads {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            n => n,
        }
    }

    /// How to open the configured database.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            url: self.database.url.clone(),
            read_url: Some(self.database.read_url.clone()).filter(|u| !u.is_empty()),
            sites: self.site_specs(),
            limits: self.limits(),
            section_max_urls: self.sitemaps.section_max_urls.clone(),
            max_connections: self.database.max_connections,
            pooler: self.database.pooler,
            acquire_timeout: self.database.acquire_timeout,
            notify_sites: self.indexnow.keys.iter().map(|(site, _)| site.to_owned()).collect(),
            check_sites: self.health.check.iter().map(|(site, _)| site.to_owned()).collect(),
            removed_days: days_of(self.sitemaps.removed_retention),
            hreflang: self.hreflang_policies(),
            serving: true,
        }
    }

    /// Each configured site's hreflang policy, by name (`sitemaps.hreflang`).
    pub fn hreflang_policies(&self) -> BTreeMap<String, HreflangPolicy> {
        self.site_specs().into_iter().map(|s| (s.name.clone(), self.sitemaps.hreflang.policy(&s.name))).collect()
    }
}

/// The setting at `path` (`health.cycle`).
fn setting(path: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.path == path)
}

/// A setting's value from the environment: its variable, or else its old variable (converted from its unit, with a
/// warning). Both set: the new one, with a warning that the old one is ignored.
fn setting_from_env(
    setting: &Setting,
    env: &impl Fn(&str) -> Option<String>,
    deprecations: &mut Vec<String>,
) -> anyhow::Result<Option<String>> {
    let new = env(setting.var);
    let Some((old, unit)) = setting.was else { return Ok(new) };
    let Some(raw) = env(old) else { return Ok(new) };
    let (var, path) = (setting.var, setting.path);
    if new.is_some() {
        deprecations
            .push(format!("{old} is deprecated and ignored: {var} ({path}) is set and replaces it; unset {old}"));
        return Ok(new);
    }
    let Some(value) = unit.convert(&raw) else {
        bail!(
            "{old} (deprecated: {var}, {path}) must be a whole number of {}, not {raw:?}; {var} takes a duration \
             such as 30s, 5m or 7d",
            unit.words()
        );
    };
    deprecations.push(format!("{old} is deprecated: read as {var}={value} ({path}); rename it"));
    Ok(Some(value))
}

/// A configuration file with its settings in their sections: a key of the flat layout before sections
/// (`health_cycle_days = 7`) is moved to its section (`[health] cycle = "7d"`) with a warning, unless the section
/// gives it too; a removed setting is dropped with a warning; any other key that is no setting is refused, naming
/// the closest one.
fn sectioned_file(text: &str, path: &Path, deprecations: &mut Vec<String>) -> anyhow::Result<String> {
    let file = path.display();
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        anyhow::anyhow!("cannot read the configuration: {file}: {}", without_source_lines(&e.to_string()))
    })?;
    let mut sectioned = toml::Table::new();
    let mut flat = Vec::new();
    for (name, value) in table {
        if SECTIONS.iter().any(|s| s.name == name) {
            let toml::Value::Table(keys) = value else {
                bail!("{name} in {file} must be a table ([{name}] with its settings below), not a value");
            };
            for key in keys.keys() {
                if setting(&format!("{name}.{key}")).is_none() {
                    return Err(unknown_setting(&format!("{name}.{key}"), path));
                }
            }
            sectioned.insert(name, toml::Value::Table(keys));
        } else if let Some(setting) = SETTINGS.iter().find(|s| s.flat == name) {
            flat.push((setting, value));
        } else if let Some((flat, _)) = REMOVED.iter().find(|(flat, _)| *flat == name) {
            deprecations.push(format!(
                "{flat} in {file} is no longer a setting and is ignored (only tests needed it); remove it"
            ));
        } else {
            return Err(unknown_setting(&name, path));
        }
    }
    for (setting, value) in flat {
        let (section, key, name) = (setting.section, setting.key, setting.flat);
        let value = match (setting.was, value) {
            (Some((_, unit)), toml::Value::Integer(n)) if n >= 0 => {
                toml::Value::String(format!("{n}{}", unit.suffix()))
            }
            (Some((_, unit)), other) => bail!(
                "{name} in {file} (deprecated: [{section}] {key}) must be a whole number of {}, not {other}",
                unit.words()
            ),
            (None, value) => value,
        };
        let keys = sectioned.entry(section).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(keys) = keys else { unreachable!("sections are tables") };
        if keys.contains_key(key) {
            deprecations.push(format!(
                "{name} in {file} is deprecated and ignored: [{section}] {key} is given and replaces it; remove {name}"
            ));
        } else {
            deprecations.push(format!("{name} in {file} is deprecated: read as [{section}] {key} = {value}; move it"));
            keys.insert(key.to_owned(), value);
        }
    }
    toml::to_string(&sectioned).context("cannot read the configuration")
}

/// Refuses a variable that looks like a setting's (`SITEMAPD_*`) but is none, naming the closest known one: a
/// misspelled setting would otherwise be ignored silently.
///
/// The database's variables have no prefix (`DATABASE_URL`, as every tool names it): a name a typo or two away from
/// one of them (`DATABSE_URL`, `DATABASE_ULR`, `database_url`) is refused too, since the server would otherwise
/// start on the default database, a fresh `./sitemapd.db`.
/// A setting's variable whose value is not UTF-8 is refused, naming it, rather than read as unset.
fn check_values_are_text(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> anyhow::Result<()> {
    for (name, value) in vars {
        let Some(name) = name.to_str() else { continue };
        let ours = name.starts_with("SITEMAPD_") || name == "DATABASE_URL" || name == "DATABASE_READ_URL";
        if ours && value.to_str().is_none() {
            bail!("{name} is not valid UTF-8: a setting's value must be text");
        }
    }
    Ok(())
}

fn check_variable_names(names: impl IntoIterator<Item = String>) -> anyhow::Result<()> {
    let known = || {
        SETTINGS
            .iter()
            .flat_map(|s| std::iter::once(s.var).chain(s.was.map(|(old, _)| old)))
            .chain(REMOVED.iter().map(|(_, var)| *var))
            .chain(OTHER_VARIABLES.iter().copied())
    };
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
    let mut inner = e;
    let mut at_key = None;
    while let config::ConfigError::At { error, key, .. } = inner {
        at_key = at_key.or(key.as_deref());
        inner = error;
    }
    let config::ConfigError::Type { unexpected, expected, key, .. } = inner else {
        return anyhow::anyhow!("invalid configuration: {e}");
    };
    let Some(setting) = key.as_deref().or(at_key).and_then(setting) else {
        return anyhow::anyhow!("invalid configuration: {e}");
    };
    let accepts = match *expected {
        "an integer" | "an unsigned integer" | "a signed integer" => "a whole number",
        other => other,
    };
    let (path, var, default) = (setting.path, setting.var, setting.default.trim_matches('"'));
    match env(var) {
        Some(value) => anyhow::anyhow!("{path} ({var}) must be {accepts} (default: {default}), not {value:?}"),
        None => {
            let file = file.map_or_else(|| DEFAULT_FILE.to_owned(), |f| f.display().to_string());
            anyhow::anyhow!("{path} in {file} must be {accepts} (default: {default}), not {unexpected}")
        }
    }
}

/// A key in the file that is no setting (`name`: `section.key`, or a top-level key), naming the file and the
/// closest setting (by its `section.key` or its flat name before sections).
fn unknown_setting(name: &str, file: &Path) -> anyhow::Error {
    let lower = name.to_ascii_lowercase();
    let closest = SETTINGS
        .iter()
        .flat_map(|s| {
            [
                (strsim::damerau_levenshtein(&lower, s.path), s.path),
                (strsim::damerau_levenshtein(&lower, s.flat), s.path),
            ]
        })
        .min()
        .filter(|(distance, _)| *distance <= name.len().div_ceil(3).max(1))
        .map(|(_, path)| format!(" (did you mean {path}?)"))
        .unwrap_or_default();
    anyhow::anyhow!(
        "unknown setting {name:?} in {}{closest}. config/default.toml lists every setting with its default.",
        file.display()
    )
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
        assert_eq!(c.database.url, "sqlite://sitemapd.db");
        assert_eq!(c.sitemaps.public_url.as_str(), "http://localhost:8080/");
        assert_eq!(c.http.bind, "127.0.0.1:8080".parse().unwrap());
        assert!(c.api.tokens.is_empty());
        assert_eq!(c.limits(), Limits { max_urls: 50_000, max_bytes: 52_428_800 });
        assert_eq!(c.api.max_json_entries, 50_000);
        assert_eq!(c.api.timeout, secs(300));
        assert_eq!(c.http.header_read_timeout, secs(10));
        assert_eq!(c.http.write_timeout, secs(30));
        assert_eq!(c.http.min_send_rate, 4096);
        assert!(c.sitemaps.view, "the view is on unless turned off");
    }

    #[test]
    fn the_view_is_turned_off_by_its_variable() {
        assert!(!load(&[("SITEMAPD_VIEW", "false")]).unwrap().sitemaps.view);
        assert!(load(&[("SITEMAPD_VIEW", "true")]).unwrap().sitemaps.view);
        assert_eq!(
            load(&[("SITEMAPD_VIEW", "maybe")]).unwrap_err().to_string(),
            "sitemaps.view (SITEMAPD_VIEW) must be a boolean (default: true), not \"maybe\""
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
        assert_eq!(c.api.tokens.len(), 2);
        assert!(c.api.tokens.matches("a") && c.api.tokens.matches("b") && !c.api.tokens.matches(""));
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
        assert!(load(&[("SITEMAPD_DB_ACQUIRE_TIMEOUT", "6s")]).unwrap_err().to_string().contains("5 seconds"));
        assert!(load(&[("SITEMAPD_STREAM_TIMEOUT", "0s")]).is_err());
        assert!(load(&[("SITEMAPD_LOG_FORMAT", "xml")]).is_err());
        assert!(load(&[("SITEMAPD_STATE_TTL", "60001ms")]).unwrap_err().to_string().contains("SITEMAPD_STATE_TTL"));
        assert!(load(&[("SITEMAPD_CACHE_BYTES", "-1")]).unwrap_err().to_string().contains("cache.bytes"));
        assert_eq!(load(&[("SITEMAPD_CACHE_BYTES", "0")]).unwrap().cache.bytes, 0);
        assert!(load(&[("DATABASE_URL", "mysql://x")]).is_err());
        for (var, bad) in [
            ("SITEMAPD_MAX_JSON_ENTRIES", "0"),
            ("SITEMAPD_API_TIMEOUT", "0s"),
            ("SITEMAPD_HEADER_READ_TIMEOUT", "301s"),
            ("SITEMAPD_WRITE_TIMEOUT", "0s"),
            ("SITEMAPD_WRITE_TIMEOUT", "3601s"),
        ] {
            let e = load(&[(var, bad)]).unwrap_err().to_string();
            assert!(e.contains(var), "{var}={bad}: {e}");
        }
        let c = load(&[("SITEMAPD_API_TIMEOUT", "7s"), ("SITEMAPD_MAX_JSON_ENTRIES", "9")]).unwrap();
        assert_eq!((c.api.timeout, c.api.max_json_entries), (secs(7), 9));
    }

    /// `config/default.toml` and the settings' part of `docs/configuration.md` are what the table renders; with
    /// `SITEMAPD_BLESS=1` this test writes them anew.
    #[test]
    fn the_reference_files_are_rendered_from_the_table() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let docs = root.join("docs/configuration.md");
        let current_md = std::fs::read_to_string(&docs).unwrap();
        let md = reference::configuration_md(&current_md).unwrap_or_else(|| {
            panic!("docs/configuration.md lacks the markers {:?} … {:?}", reference::BEGIN, reference::END)
        });
        let toml = reference::default_toml();
        if std::env::var_os("SITEMAPD_BLESS").is_some() {
            std::fs::write(root.join(DEFAULT_FILE), &toml).unwrap();
            std::fs::write(&docs, &md).unwrap();
        }
        let how = "render them from the table in src/config.rs: SITEMAPD_BLESS=1 cargo test --lib config::";
        assert!(
            std::fs::read_to_string(root.join(DEFAULT_FILE)).unwrap() == toml,
            "config/default.toml is stale: {how}"
        );
        assert!(
            current_md == md || std::env::var_os("SITEMAPD_BLESS").is_some(),
            "docs/configuration.md is stale: {how}"
        );
    }

    /// The rendered defaults are the table's: loading them alone gives every setting its default, and each setting
    /// is in both reference files, under its section with its variable, and in the logged configuration.
    #[test]
    fn every_setting_is_documented_with_its_variable_and_logged() {
        use config::{File, FileFormat};
        let rendered = reference::default_toml();
        let parsed = config::Config::builder().add_source(File::from_str(&rendered, FileFormat::Toml)).build().unwrap();
        parsed.try_deserialize::<Raw>().expect("the rendered defaults hold exactly the fields of Raw");
        let table = reference::settings_table();
        let shown = format!("{:?}", load(&[]).unwrap());
        for s in SETTINGS {
            assert!(rendered.contains(&format!("Env: {}", s.var)), "config/default.toml does not name {}", s.var);
            assert!(rendered.contains(&format!("\n{} = {}\n", s.key, s.default)), "{} lacks its default", s.path);
            assert!(table.contains(&format!("| `{}` | `{}`", s.key, s.var)), "the reference lacks {}", s.var);
            assert!(!s.doc.is_empty(), "{} has no documentation", s.path);
            assert!(shown.contains(&format!("{}: ", s.key)), "the logged configuration lacks {}: {shown}", s.path);
        }
        for section in SECTIONS {
            assert!(rendered.contains(&format!("\n[{}]\n", section.name)), "{}", section.name);
        }
    }

    /// The goal of issue 38 was at most 40 documented settings; merging the rest would have merged settings that
    /// are not one thing, so the count is held where it is: a new setting raises it here, on purpose.
    #[test]
    fn the_documented_settings_are_counted() {
        assert_eq!(SETTINGS.len(), 69, "a setting added or removed: weigh it, then change this count");
        let mut paths: Vec<&str> = SETTINGS.iter().map(|s| s.path).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), SETTINGS.len(), "each setting once");
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
            "database.read_url (DATABASE_READ_URL) must be empty or start with postgres:// (a streaming replica of \
             the database.url server)"
        );
    }

    /// Each variable is the setting's flat name (before sections) in capitals after `SITEMAPD_`, without the unit
    /// a renamed duration had (its old variable had it), but for `DATABASE_URL`, the usual name, and
    /// `DATABASE_READ_URL` beside it.
    #[test]
    fn each_variable_is_named_after_its_setting() {
        for s in SETTINGS {
            let flat = s.flat.to_uppercase();
            if matches!(s.flat, "database_url" | "database_read_url") {
                assert_eq!(s.var, flat);
                continue;
            }
            match s.was {
                Some((old, unit)) => {
                    assert_eq!(old, format!("SITEMAPD_{flat}"), "{}", s.path);
                    let suffix = match unit {
                        Unit::Ms => "_MS",
                        Unit::Secs => "_SECS",
                        Unit::Hours => "_HOURS",
                        Unit::Days => "_DAYS",
                    };
                    let unitless =
                        flat.strip_suffix(suffix).unwrap_or_else(|| panic!("{}: {flat} is in {unit:?}", s.path));
                    // The removed-URLs retention says what it is, not the unit it had.
                    let expected = if s.flat == "removed_days" { "REMOVED_RETENTION" } else { unitless };
                    assert_eq!(s.var, format!("SITEMAPD_{expected}"), "{}", s.path);
                }
                None => assert_eq!(s.var, format!("SITEMAPD_{flat}"), "{}", s.path),
            }
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
                "sitemaps.page_max_urls (SITEMAPD_PAGE_MAX_URLS) must be from 1 to 50000 (the sitemaps.org maximum), not 0".to_owned(),
            ),
            (
                "SITEMAPD_PAGE_MAX_BYTES",
                "52428801",
                format!(
                    "sitemaps.page_max_bytes (SITEMAPD_PAGE_MAX_BYTES) must be from {least} (room for one entry with the longest \
                     allowed loc) to 52428800 (the sitemaps.org maximum), not 52428801"
                ),
            ),
            ("SITEMAPD_MAX_JSON_BYTES", "1023", "api.max_json_bytes (SITEMAPD_MAX_JSON_BYTES) must be at least 1024, not 1023".into()),
            ("SITEMAPD_MAX_LINE_BYTES", "4095", "api.max_line_bytes (SITEMAPD_MAX_LINE_BYTES) must be at least 4096, not 4095".into()),
            (
                "SITEMAPD_MAX_JSON_ENTRIES",
                "1000001",
                "api.max_json_entries (SITEMAPD_MAX_JSON_ENTRIES) must be from 1 to 1000000, not 1000001".into(),
            ),
            ("SITEMAPD_API_TIMEOUT", "86401s", "api.timeout (SITEMAPD_API_TIMEOUT) must be from 1s to 1d, not 86401s".into()),
            ("SITEMAPD_BODY_IDLE", "0s", "api.body_idle (SITEMAPD_BODY_IDLE) must be from 1s to 5m, not 0".into()),
            (
                "SITEMAPD_HEADER_READ_TIMEOUT",
                "500ms",
                "http.header_read_timeout (SITEMAPD_HEADER_READ_TIMEOUT) must be from 1s to 5m, not 500ms".into(),
            ),
            ("SITEMAPD_WRITE_TIMEOUT", "61m", "http.write_timeout (SITEMAPD_WRITE_TIMEOUT) must be from 1s to 1h, not 61m".into()),
            (
                "SITEMAPD_MIN_SEND_RATE",
                "1073741825",
                "http.min_send_rate (SITEMAPD_MIN_SEND_RATE) must be from 0 to 1073741824 bytes per second, not 1073741825".into(),
            ),
            ("SITEMAPD_NDJSON_BATCH", "100001", "api.ndjson_batch (SITEMAPD_NDJSON_BATCH) must be from 1 to 100000, not 100001".into()),
            ("SITEMAPD_DB_MAX_CONNECTIONS", "0", "database.max_connections (SITEMAPD_DB_MAX_CONNECTIONS) must be at least 1".into()),
            (
                "SITEMAPD_DB_ACQUIRE_TIMEOUT",
                "0s",
                "database.acquire_timeout (SITEMAPD_DB_ACQUIRE_TIMEOUT) must be from 1s to 5s (requests that need an \
                 unreachable store must answer 503 within 5 seconds), not 0"
                    .into(),
            ),
            ("SITEMAPD_GZIP_LEVEL", "10", "sitemaps.gzip_level (SITEMAPD_GZIP_LEVEL) must be from 1 to 9, not 10".into()),
            ("SITEMAPD_STREAM_TIMEOUT", "0", "sitemaps.stream_timeout (SITEMAPD_STREAM_TIMEOUT) must be from 1s to 1h, not 0".into()),
            (
                "SITEMAPD_CACHE_BYTES",
                "68719476737",
                "cache.bytes (SITEMAPD_CACHE_BYTES) must be at most 68719476736, not 68719476737".into(),
            ),
            ("SITEMAPD_STATE_TTL", "60001ms", "cache.state_ttl (SITEMAPD_STATE_TTL) must be from 0 to 1m, not 60001ms".into()),
            (
                "SITEMAPD_SHUTDOWN_GRACE",
                "1h 1s",
                "http.shutdown_grace (SITEMAPD_SHUTDOWN_GRACE) must be from 0 to 1h, not 3601s".into(),
            ),
            ("SITEMAPD_LOG_FORMAT", "xml", "log.format (SITEMAPD_LOG_FORMAT) must be \"text\" or \"json\", not \"xml\"".into()),
            ("DATABASE_URL", "mysql://x", "database.url (DATABASE_URL) must start with sqlite:// or postgres://".into()),
            (
                "SITEMAPD_DATABASE_POOLER",
                "pgbouncer",
                "database.pooler (SITEMAPD_DATABASE_POOLER) must be \"none\" or \"transaction\", not \"pgbouncer\"".into(),
            ),
            (
                "DATABASE_URL",
                "sqlite://?mode=rwc",
                "database.url (DATABASE_URL) must name the SQLite file: sqlite://PATH (e.g. sqlite://sitemapd.db)".into(),
            ),
            ("SITEMAPD_BIND", "localhost:8080", "http.bind (SITEMAPD_BIND) \"localhost:8080\" is not an IP address and port".into()),
            (
                "SITEMAPD_BIND",
                "0.0.0.0:8080",
                "refusing to listen on 0.0.0.0:8080 without api.tokens (SITEMAPD_API_TOKENS): the write API would be \
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
            "Config { database: Database { url: \"sqlite://sitemapd.db\", read_url: \"\", pooler: \"none\", \
             max_connections: 16, acquire_timeout: 3s }, http: Http { bind: 127.0.0.1:8080, trusted_proxies: [], \
             forwarded_header: XForwardedHost, header_read_timeout: 10s, write_timeout: 30s, min_send_rate: 4096, \
             shutdown_grace: 25s, serve_threads: 0 }, api: Api { tokens: [0 redacted], max_json_bytes: 16777216, \
             max_line_bytes: 65536, max_json_entries: 50000, body_memory_bytes: 201326592, timeout: 5m, body_idle: \
             20s, min_receive_rate: 2048, ndjson_batch: 10000 }, sitemaps: Sitemaps { public_url: \
             \"http://localhost:8080/\", sites: [], page_max_urls: 50000, page_max_bytes: 52428800, section_max_urls: \
             {}, hreflang: [\"as_sent\"], gzip_level: 4, stream_timeout: 1m, render_concurrency: 0, news_window: 2d, removed_retention: 0, \
             robots_tag: \"noindex\", robots_txt: false, robots_txt_body: \"\", view: true }, cache: Cache { bytes: \
             33554432, prerender: true, state_ttl: 1s }, log: Log { format: Text, access: WritesAndErrors }, crawlers: \
             Crawlers { telemetry: true, ranges: [], ranges_refresh: 1d, rdns: true, window: 7d }, health: Health { \
             check: [], cycle: 7d, concurrency: 1, rate: 2, timeout: 10s, head_bytes: 262144 }, indexnow: IndexNow { \
             keys: [], endpoint: \"https://api.indexnow.org/indexnow\", retry_base: 10s, max_attempts: 30, timeout: \
             30s }, feeds: Feeds { enabled: false, entries: 200, titles: [], hubs: [], hub_interval: 1m }, publish: Publish { \
             targets: [], public_urls: [], forms: [\"xml\", \"xml.gz\"], cache_control: \"public, max-age=300\", \
             interval: 1m, grace: 1d } }"
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
        assert!(shown.contains("tokens: [2 redacted]"), "{shown}");
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
            ("SITEMAPD_SHUTDOWN_GRACE", "3601s"),
            ("SITEMAPD_NDJSON_BATCH", "0"),
            ("SITEMAPD_DB_MAX_CONNECTIONS", "0"),
            ("SITEMAPD_RENDER_CONCURRENCY", "257"),
            ("SITEMAPD_RENDER_CONCURRENCY", "-1"),
        ] {
            let e = load(&[(var, value)]).unwrap_err().to_string();
            assert!(e.contains(var), "{var}={value}: {e}");
        }
        let e = load(&[("SITEMAPD_SHUTDOWN_GRACE", "-1s")]).unwrap_err().to_string();
        assert!(e.contains("http.shutdown_grace"), "{e}");
        let c = load(&[("SITEMAPD_SHUTDOWN_GRACE", "0s")]).unwrap();
        assert_eq!(c.http.shutdown_grace, secs(0));
        assert_eq!(load(&[]).unwrap().http.shutdown_grace, secs(25));
    }

    #[test]
    fn health_check_names_configured_sites_and_a_policy_each() {
        let sites = |raw: &str| load(&[("SITEMAPD_HEALTH_CHECK", raw)]).map(|c| c.health.check);
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
            assert!(e.starts_with("health.check (SITEMAPD_HEALTH_CHECK): "), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        // A checked site's writes queue checks; the policy is logged.
        let two = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let c = load(&[two, ("SITEMAPD_HEALTH_CHECK", "shop=exclude")]).unwrap();
        assert_eq!(c.store_options().check_sites, ["shop".to_owned()].into());
        assert_eq!(c.health.check.policy("shop"), Some(Policy::Exclude));
        assert_eq!(c.health.check.policy("default"), None);
        assert!(format!("{c:?}").contains("check: [\"shop=exclude\"]"));
        assert!(load(&[]).unwrap().store_options().check_sites.is_empty());
    }

    #[test]
    fn indexnow_keys_are_checked_and_name_the_default_site() {
        let keys = |raw: &str| load(&[("SITEMAPD_INDEXNOW_KEYS", raw)]).map(|c| c.indexnow.keys);
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
            assert!(e.starts_with("indexnow.keys (SITEMAPD_INDEXNOW_KEYS): "), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        // Notification is on for the default site exactly when it has a key; the key is logged (it is public).
        let c = load(&[("SITEMAPD_INDEXNOW_KEYS", "0123456789abcdef")]).unwrap();
        assert_eq!(c.store_options().notify_sites, [DEFAULT_SITE.to_owned()].into());
        assert!(format!("{c:?}").contains("keys: [\"default=0123456789abcdef\"]"));
        assert!(load(&[]).unwrap().store_options().notify_sites.is_empty());
        // With several sites, a key per site.
        let sites = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let c = load(&[sites, ("SITEMAPD_INDEXNOW_KEYS", "shop=0123456789abcdef")]).unwrap();
        assert_eq!(c.store_options().notify_sites, ["shop".to_owned()].into());
    }

    #[test]
    fn feeds_are_off_by_default_and_their_numbers_are_bounded() {
        let c = load(&[]).unwrap();
        assert!(!c.feeds.enabled);
        assert_eq!((c.feeds.entries, c.feeds.hub_interval), (200, secs(60)));
        assert!(c.feeds.titles.for_site("default").is_none() && c.feeds.hubs.for_site("default").is_empty());
        let c = load(&[
            ("SITEMAPD_FEEDS", "true"),
            ("SITEMAPD_FEED_ENTRIES", "1000"),
            ("SITEMAPD_FEED_HUB_INTERVAL", "1h"),
        ])
        .unwrap();
        assert!(c.feeds.enabled);
        assert_eq!((c.feeds.entries, c.feeds.hub_interval), (1000, secs(3600)));
        assert_eq!(load(&[("SITEMAPD_FEED_ENTRIES", "1")]).unwrap().feeds.entries, 1);
        assert_eq!(load(&[("SITEMAPD_FEED_HUB_INTERVAL", "1s")]).unwrap().feeds.hub_interval, secs(1));
        for (var, value, message) in [
            (
                "SITEMAPD_FEEDS",
                "yes please",
                "feeds.enabled (SITEMAPD_FEEDS) must be a boolean (default: false), not \"yes please\"",
            ),
            ("SITEMAPD_FEED_ENTRIES", "0", "feeds.entries (SITEMAPD_FEED_ENTRIES) must be from 1 to 1000, not 0"),
            ("SITEMAPD_FEED_ENTRIES", "1001", "feeds.entries (SITEMAPD_FEED_ENTRIES) must be from 1 to 1000, not 1001"),
            (
                "SITEMAPD_FEED_ENTRIES",
                "-1",
                "feeds.entries (SITEMAPD_FEED_ENTRIES) must be a whole number (default: 200), not \"-1\"",
            ),
            (
                "SITEMAPD_FEED_HUB_INTERVAL",
                "999ms",
                "feeds.hub_interval (SITEMAPD_FEED_HUB_INTERVAL) must be from 1s to 1h, not 999ms",
            ),
            (
                "SITEMAPD_FEED_HUB_INTERVAL",
                "61m",
                "feeds.hub_interval (SITEMAPD_FEED_HUB_INTERVAL) must be from 1s to 1h, not 61m",
            ),
        ] {
            assert_eq!(load(&[(var, value)]).unwrap_err().to_string(), message, "{var}={value}");
        }
        let e = load(&[("SITEMAPD_FEED_HUB_INTERVAL", "soon")]).unwrap_err().to_string();
        assert!(e.starts_with("feeds.hub_interval (SITEMAPD_FEED_HUB_INTERVAL) must be a duration"), "{e}");
    }

    #[test]
    fn feed_titles_name_configured_sites_and_are_plain_text() {
        let two = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let titles = |raw: &str| load(&[two, ("SITEMAPD_FEED_TITLES", raw)]).map(|c| c.feeds.titles);
        let t = titles(" default = Example News, Views & More ; shop=Der Laden — Neu=heiß ; ").unwrap();
        assert_eq!(t.for_site("default"), Some("Example News, Views & More"));
        assert_eq!(t.for_site("shop"), Some("Der Laden — Neu=heiß"));
        assert_eq!(t.for_site("blog"), None);
        assert!(titles("").unwrap().for_site("default").is_none() && titles(" ; ").is_ok());
        assert!(titles(&format!("default={}", "é".repeat(200))).is_ok());
        for (raw, says) in [
            ("Example News", "\"Example News\" must be SITE=Title, e.g. default=Example News"),
            ("default=", "site default: a feed title is 1 to 200 characters, not 0"),
            (&format!("default={}", "é".repeat(201)), "a feed title is 1 to 200 characters, not 201"),
            ("default=Tab\there", "a feed title holds no control character, not '\\t'"),
            ("default=Bell\u{7}", "not '\\u{7}'"),
            ("default=Line\u{2028}break", "not '\\u{2028}'"),
            ("default=a\u{85}next", "not '\\u{85}'"),
            ("Shop Site=x", "site name"),
            ("default=a; default=b", "the site \"default\" is given two titles"),
            ("blog=Blog", "a title is given for the site \"blog\", which is not configured (sites: default, shop)"),
        ] {
            let e = titles(raw).unwrap_err().to_string();
            assert!(e.starts_with("feeds.titles (SITEMAPD_FEED_TITLES): "), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        // Logged as given.
        let c = load(&[("SITEMAPD_FEED_TITLES", "default=Example News")]).unwrap();
        assert!(format!("{c:?}").contains("titles: [\"default=Example News\"]"), "{c:?}");
    }

    #[test]
    fn hreflang_policies_are_every_sites_or_per_site_and_name_configured_sites() {
        let two = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let policies = |raw: &str| load(&[two, ("SITEMAPD_HREFLANG", raw)]).map(|c| c.sitemaps.hreflang);
        let of = |p: &HreflangPolicies| (p.policy("default").as_str(), p.policy("shop").as_str());
        assert_eq!(of(&load(&[two]).unwrap().sitemaps.hreflang), ("as_sent", "as_sent"), "the default");
        assert_eq!(of(&policies("complete").unwrap()), ("complete", "complete"), "alone: every site's");
        assert_eq!(of(&policies(" as_sent ").unwrap()), ("as_sent", "as_sent"));
        assert_eq!(of(&policies("shop=complete").unwrap()), ("as_sent", "complete"), "not named: as_sent");
        assert_eq!(of(&policies(" shop = complete ; default=as_sent; ").unwrap()), ("as_sent", "complete"));
        assert_eq!(of(&policies("complete; shop=as_sent").unwrap()), ("complete", "as_sent"), "alone: the others'");
        assert_eq!(of(&policies("shop=complete, default=complete").unwrap()), ("complete", "complete"));
        assert_eq!(of(&policies("").unwrap()), ("as_sent", "as_sent"));
        for (raw, says) in [
            ("completed", "\"completed\": the policy is \"as_sent\" or \"complete\", not \"completed\""),
            ("shop=Complete", "the policy is \"as_sent\" or \"complete\", not \"Complete\""),
            ("shop=", "not \"\""),
            ("complete; as_sent", "a policy alone is every other site's, and is given once"),
            ("shop=complete; shop=as_sent", "the site \"shop\" is given twice"),
            ("Shop Site=complete", "site name"),
            (
                "blog=complete",
                "a policy is given for the site \"blog\", which is not configured (sites: default, shop)",
            ),
        ] {
            let e = policies(raw).unwrap_err().to_string();
            assert!(e.starts_with("sitemaps.hreflang (SITEMAPD_HREFLANG)"), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        // Into the store's options: every configured site by name.
        let c = load(&[two, ("SITEMAPD_HREFLANG", "shop=complete")]).unwrap();
        let by_site = c.store_options().hreflang;
        assert_eq!(by_site.get("shop").map(|p| p.as_str()), Some("complete"));
        assert_eq!(by_site.get("default").map(|p| p.as_str()), Some("as_sent"));
        // Logged as read.
        assert!(format!("{c:?}").contains("hreflang: [\"as_sent\", \"shop=complete\"]"), "{c:?}");
    }

    #[test]
    fn feed_hubs_are_http_urls_of_configured_sites_logged_without_userinfo() {
        let two = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let hubs = |raw: &str| load(&[two, ("SITEMAPD_FEED_HUBS", raw)]).map(|c| c.feeds.hubs);
        let urls =
            |hubs: &FeedHubs, site: &str| hubs.for_site(site).iter().map(url::Url::to_string).collect::<Vec<_>>();
        let h = hubs(
            " https://pubsubhubbub.appspot.com/ , shop=http://127.0.0.1:9/hub?x=1 , shop = https://hub.example/p?a=b&c=d ,",
        )
        .unwrap();
        assert_eq!(urls(&h, "default"), ["https://pubsubhubbub.appspot.com/"]);
        assert_eq!(urls(&h, "shop"), ["http://127.0.0.1:9/hub?x=1", "https://hub.example/p?a=b&c=d"]);
        assert!(h.for_site("blog").is_empty());
        assert!(hubs("").unwrap().is_empty() && hubs(" , ").unwrap().is_empty());
        for (raw, says) in [
            ("ftp://hub.example/", "site default: the hub \"ftp://hub.example/\" must be an http or https URL"),
            ("hub.example/publish", "site default: the hub \"hub.example/publish\" is not an absolute URL"),
            ("shop=hub.example", "site shop: the hub \"hub.example\" is not an absolute URL"),
            ("https://hub.example/#top", "must have no #fragment"),
            ("shop=", "site shop: the hub \"\" is not an absolute URL"),
            ("Shop Site=https://hub.example/", "site name"),
            (
                "https://hub.example/, default=https://hub.example/",
                "the hub https://hub.example/ is given twice for the site \"default\"",
            ),
            (
                "blog=https://hub.example/",
                "a hub is given for the site \"blog\", which is not configured (sites: default, shop); a hub without SITE= is the site named default's",
            ),
        ] {
            let e = hubs(raw).unwrap_err().to_string();
            assert!(e.starts_with("feeds.hubs (SITEMAPD_FEED_HUBS): "), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        // A hub URL's user name and password are kept for use but never logged nor quoted in an error.
        let c = load(&[("SITEMAPD_FEED_HUBS", "https://user:Hub-Secret@hub.example/publish")]).unwrap();
        assert_eq!(c.feeds.hubs.for_site("default")[0].password(), Some("Hub-Secret"));
        let shown = format!("{c:?}");
        assert!(shown.contains("hubs: [\"default=https://hub.example/publish\"]"), "{shown}");
        assert!(!shown.contains("Hub-Secret") && !shown.contains("user@"), "{shown}");
        let e = load(&[("SITEMAPD_FEED_HUBS", "ftp://user:Hub-Secret@hub.example/")]).unwrap_err().to_string();
        assert!(!e.contains("Hub-Secret") && e.contains("ftp://hub.example/"), "{e}");
        let e = load(&[("SITEMAPD_FEED_HUBS", "https://user:Hub-Secret@[bad/")]).unwrap_err().to_string();
        assert!(!e.contains("Hub-Secret"), "{e}");
    }

    #[test]
    fn publish_targets_are_store_urls_of_configured_sites_without_secrets() {
        let two = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let dir = tempfile::tempdir().unwrap();
        let db = ("DATABASE_URL", "sqlite:///var/lib/sitemapd/sitemapd.db");
        let targets = |raw: &str| load(&[two, db, ("SITEMAPD_PUBLISH_TARGETS", raw)]).map(|c| c.publish.targets);
        let www = format!("file://{}/www", dir.path().display());
        let t =
            targets(&format!(" s3://bucket/maps , shop=gs://b2/ , shop = az://c/p/q/ , azure://c2 , {www} ,")).unwrap();
        let shown: Vec<(String, String)> = t.iter().map(|t| (t.site.clone(), t.url.to_string())).collect();
        assert_eq!(
            shown,
            [
                ("default".into(), "s3://bucket/maps/".into()),
                ("shop".into(), "gs://b2/".into()),
                ("shop".into(), "az://c/p/q/".into()),
                ("default".into(), "azure://c2/".into()),
                ("default".into(), format!("{www}/")),
            ]
        );
        assert!(targets("").unwrap().is_empty() && targets(" , ").unwrap().is_empty());
        for (raw, says) in [
            (
                "http://bucket/",
                "site default: the target http://bucket/ must be an s3://, gs://, az:// (or azure://) or file:/// URL, not http://",
            ),
            (
                "s3://key:Secret-Key@bucket/",
                "site default: the target s3://bucket/ must hold no user name or password: the store's credentials come from its own environment variables (AWS_*, GOOGLE_*, AZURE_*)",
            ),
            ("s3://key@bucket/", "must hold no user name or password"),
            (
                "s3://bucket/p?region=eu-west-1",
                "site default: the target s3://bucket/p?region=eu-west-1 must have no ?query",
            ),
            ("s3://bucket/#x", "must have no #fragment"),
            ("s3:///p/", "the target s3:///p/ must name a bucket: s3://BUCKET/PREFIX/"),
            ("s3://bucket:9000/", "must name no port"),
            ("file:relative/dir", "must name a directory by its absolute path: file:///DIR/"),
            ("file://host/dir", "must name a directory by its absolute path"),
            ("bucket/prefix", "the target \"bucket/prefix\" is not an absolute URL"),
            ("Shop Site=s3://b/", "site name"),
            ("s3://b/x, shop=s3://b/x/", "the target s3://b/x/ is given twice (for the sites default and shop)"),
            (
                "blog=s3://b/",
                "the target s3://b/ is given for the site \"blog\", which is not configured (sites: default, shop); a target without SITE= is the site named default's",
            ),
            (
                "file:///var/lib/",
                "the directory of the target file:///var/lib/ holds the SQLite database /var/lib/sitemapd/sitemapd.db (database.url)",
            ),
            ("file:///var/lib/sitemapd/sitemapd.db/x/", "holds the SQLite database"),
            ("file:///var/lib/sitemapd/./", "holds the SQLite database"),
        ] {
            let e = targets(raw).unwrap_err().to_string();
            assert!(e.starts_with("publish.targets (SITEMAPD_PUBLISH_TARGETS): "), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
            assert!(!e.contains("Secret-Key"), "{raw}: {e}");
        }
        // A directory beside the database's is fine; so is any directory with Postgres.
        assert!(targets("file:///var/lib/www/").is_ok());
        let pg =
            load(&[("DATABASE_URL", "postgres://u@h/d"), ("SITEMAPD_PUBLISH_TARGETS", "file:///var/lib/sitemapd/")]);
        assert!(pg.is_ok());
        let shown = format!("{:?}", load(&[two, ("SITEMAPD_PUBLISH_TARGETS", "shop=s3://b/m")]).unwrap());
        assert!(shown.contains("targets: [\"shop=s3://b/m/\"]"), "{shown}");
    }

    #[test]
    fn publish_public_urls_forms_and_durations_are_checked() {
        let two = ("SITEMAPD_SITES", "default=https://www.example.com, shop=https://shop.example.com");
        let c = load(&[
            two,
            ("SITEMAPD_PUBLISH_PUBLIC_URLS", "https://cdn.example.net/maps; shop=https://cdn.example.net/shop/"),
        ])
        .unwrap();
        assert_eq!(c.publish.public_urls.for_site("default").unwrap().as_str(), "https://cdn.example.net/maps/");
        assert_eq!(c.publish.public_urls.for_site("shop").unwrap().as_str(), "https://cdn.example.net/shop/");
        for (raw, says) in [
            ("blog=https://cdn.example.net/", "a public URL is given for the site \"blog\", which is not configured"),
            ("shop=https://a.example/; shop=https://b.example/", "the site \"shop\" is given two public URLs"),
            ("shop=cdn.example.net", "site shop \"cdn.example.net\""),
        ] {
            let e = load(&[two, ("SITEMAPD_PUBLISH_PUBLIC_URLS", raw)]).unwrap_err().to_string();
            assert!(e.starts_with("publish.public_urls (SITEMAPD_PUBLISH_PUBLIC_URLS)"), "{raw}: {e}");
            assert!(e.contains(says), "{raw}: {e}");
        }
        let forms = |raw: &str| load(&[("SITEMAPD_PUBLISH_FORMS", raw)]).map(|c| c.publish.forms);
        assert_eq!(forms("xml,xml.gz").unwrap(), Forms::default());
        assert_eq!(forms(" txt.gz , XML ").unwrap(), Forms { xml_gz: false, txt: false, txt_gz: true });
        assert_eq!(forms("xml,txt,txt.gz,xml.gz").unwrap().others(), [".xml.gz", ".txt", ".txt.gz"]);
        for (raw, says) in [
            (
                "xml.gz",
                "publish.forms (SITEMAPD_PUBLISH_FORMS) must include xml: the published index names each page's .xml file",
            ),
            ("xml,html", "publish.forms (SITEMAPD_PUBLISH_FORMS): \"html\" is none of xml, xml.gz, txt, txt.gz"),
            ("xml,txt,txt", "publish.forms (SITEMAPD_PUBLISH_FORMS): the form txt is given twice"),
        ] {
            assert_eq!(forms(raw).unwrap_err().to_string(), says, "{raw}");
        }
        let c = load(&[]).unwrap();
        assert_eq!((c.publish.interval, c.publish.grace), (secs(60), days(1)));
        assert_eq!(c.publish.cache_control, "public, max-age=300");
        assert!(load(&[("SITEMAPD_PUBLISH_GRACE", "0s")]).is_ok());
        assert_eq!(
            load(&[("SITEMAPD_PUBLISH_GRACE", "31d")]).unwrap_err().to_string(),
            "publish.grace (SITEMAPD_PUBLISH_GRACE) must be from 0 to 30d, not 31d"
        );
        assert_eq!(
            load(&[("SITEMAPD_PUBLISH_INTERVAL", "500ms")]).unwrap_err().to_string(),
            "publish.interval (SITEMAPD_PUBLISH_INTERVAL) must be from 1s to 1h, not 500ms"
        );
        assert!(load(&[("SITEMAPD_PUBLISH_CACHE_CONTROL", "max-age=1\n")]).is_err());
        assert_eq!(load(&[("SITEMAPD_PUBLISH_CACHE_CONTROL", "")]).unwrap().publish.cache_control, "");
    }

    #[test]
    fn the_indexnow_endpoint_is_an_http_url() {
        let c = load(&[("SITEMAPD_INDEXNOW_ENDPOINT", "http://127.0.0.1:9/indexnow")]).unwrap();
        assert_eq!(c.indexnow.endpoint.as_str(), "http://127.0.0.1:9/indexnow");
        for raw in ["ftp://example.com/indexnow", "api.indexnow.org/indexnow", ""] {
            let e = load(&[("SITEMAPD_INDEXNOW_ENDPOINT", raw)]).unwrap_err().to_string();
            assert!(e.starts_with("indexnow.endpoint (SITEMAPD_INDEXNOW_ENDPOINT)"), "{raw}: {e}");
        }
        for (var, value) in [
            ("SITEMAPD_INDEXNOW_RETRY_BASE", "9ms"),
            ("SITEMAPD_INDEXNOW_RETRY_BASE", "3600001ms"),
            ("SITEMAPD_INDEXNOW_MAX_ATTEMPTS", "0"),
            ("SITEMAPD_INDEXNOW_TIMEOUT", "301s"),
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
        assert!(c.database.url.starts_with("postgres://") && redact_url(&c.database.url) == c.database.url);
        assert_eq!(c.sitemaps.public_url.as_str(), "https://www.example.com/");
        assert_eq!(c.http.bind, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(c.log.format, LogFormat::Json);
        assert!(c.deprecations().is_empty(), "the example uses the sections: {:?}", c.deprecations());
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
                "unknown setting \"publik_url\" in {file} (did you mean sitemaps.public_url?). config/default.toml lists every \
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
        let mut every: Vec<&str> = SETTINGS.iter().map(|s| s.var).collect();
        every.extend(SETTINGS.iter().filter_map(|s| s.was.map(|(old, _)| old)));
        every.extend(REMOVED.iter().map(|(_, var)| *var));
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
        assert_eq!(
            e,
            "sitemaps.page_max_urls (SITEMAPD_PAGE_MAX_URLS) must be a whole number (default: 50000), not \"abc\""
        );
        let e = load(&[("SITEMAPD_SHUTDOWN_GRACE_SECS", "2.5")]).unwrap_err().to_string();
        assert!(e.starts_with("SITEMAPD_SHUTDOWN_GRACE_SECS (deprecated: SITEMAPD_SHUTDOWN_GRACE, http.shutdown_grace) must be a whole number of seconds, not \"2.5\""), "{e}");
        let e = load(&[("SITEMAPD_SHUTDOWN_GRACE", "2.5")]).unwrap_err().to_string();
        assert!(e.starts_with("http.shutdown_grace (SITEMAPD_SHUTDOWN_GRACE) must be a duration such as 250ms, 10s, 5m or 7d, not \"2.5\""), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[sitemaps]\ngzip_level = \"high\"\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        assert!(e.starts_with(&format!("sitemaps.gzip_level in {} must be a whole number", path.display())), "{e}");
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
        let names: Vec<(&str, &str)> =
            c.sitemaps.sites.iter().map(|s| (s.name.as_str(), s.public_url.as_str())).collect();
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
        let t = &c.api.tokens;
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
        let t = &c.api.tokens;
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
        let p = &c.http.trusted_proxies;
        assert!(p.trusts("10.200.0.1".parse().unwrap()) && p.trusts("192.168.1.5".parse().unwrap()));
        assert!(p.trusts("::ffff:10.0.0.1".parse().unwrap()), "IPv4-mapped");
        assert!(p.trusts("::1".parse().unwrap()));
        assert!(!p.trusts("192.168.1.6".parse().unwrap()) && !p.trusts("11.0.0.1".parse().unwrap()));
        assert!(!load(&[]).unwrap().http.trusted_proxies.trusts("127.0.0.1".parse().unwrap()), "none by default");
        let e = load(&[("SITEMAPD_TRUSTED_PROXIES", "10.0.0.0/33")]).unwrap_err().to_string();
        assert!(e.contains("SITEMAPD_TRUSTED_PROXIES") && e.contains("10.0.0.0/33"), "{e}");
    }

    #[test]
    fn durations_are_read_with_their_unit() {
        let read = |raw: &str| load(&[("SITEMAPD_HEALTH_TIMEOUT", raw)]).map(|c| c.health.timeout);
        assert_eq!(read("10s").unwrap(), secs(10));
        assert_eq!(read("5m").unwrap(), secs(300));
        assert_eq!(read("1m 30s").unwrap(), secs(90));
        assert_eq!(read("1500ms").unwrap(), millis(1500));
        assert_eq!(load(&[("SITEMAPD_HEALTH_CYCLE", "7d")]).unwrap().health.cycle, days(7));
        assert_eq!(load(&[("SITEMAPD_STATE_TTL", "250ms")]).unwrap().cache.state_ttl, millis(250));
        for bad in ["5 parsecs", "10", "ten seconds", "-1s", ""] {
            let e = read(bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!(
                    "health.timeout (SITEMAPD_HEALTH_TIMEOUT) must be a duration such as 250ms, 10s, 5m or 7d, not {bad:?}"
                )),
                "{bad}: {e}"
            );
        }
        // The bounds are stated in the new unit; a count of days or hours must stay whole.
        let e = read("6m").unwrap_err().to_string();
        assert_eq!(e, "health.timeout (SITEMAPD_HEALTH_TIMEOUT) must be from 1s to 5m, not 6m");
        let e = load(&[("SITEMAPD_HEALTH_CYCLE", "36h")]).unwrap_err().to_string();
        assert_eq!(e, "health.cycle (SITEMAPD_HEALTH_CYCLE) must be whole days (e.g. 7d), not 36h");
        let e = load(&[("SITEMAPD_NEWS_WINDOW", "90m")]).unwrap_err().to_string();
        assert_eq!(e, "sitemaps.news_window (SITEMAPD_NEWS_WINDOW) must be whole hours (e.g. 48h), not 90m");
        assert_eq!(shown_duration(&millis(60_001)), "60001ms");
        assert_eq!(shown_duration(&Duration::from_micros(1500)), "1.5ms");
    }

    /// A file's tables hold the settings under their keys; a key a table does not have is refused, naming the
    /// closest setting.
    #[test]
    fn a_file_gives_settings_in_their_sections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[health]\ncycle = \"3d\"\nconcurrency = 4\n[cache]\nbytes = 0\n").unwrap();
        let c = Config::load_from(Some(&path), |_| None).unwrap();
        assert_eq!((c.health.cycle, c.health.concurrency, c.cache.bytes), (days(3), 4, 0));
        assert!(c.deprecations().is_empty(), "{:?}", c.deprecations());
        // The environment still wins over the file.
        let c = Config::load_from(Some(&path), |k| (k == "SITEMAPD_HEALTH_CYCLE").then(|| "5d".to_owned())).unwrap();
        assert_eq!(c.health.cycle, days(5));
        std::fs::write(&path, "[health]\ncylce = \"3d\"\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        assert!(
            e.starts_with("unknown setting \"health.cylce\" in ") && e.contains("(did you mean health.cycle?)"),
            "{e}"
        );
        std::fs::write(&path, "health = 1\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        assert!(e.contains("health in ") && e.contains("must be a table"), "{e}");
    }

    /// Every renamed variable is still read, converted from its unit, with a warning naming the new one; the new
    /// one wins when both are set.
    #[test]
    fn each_renamed_variable_is_read_with_a_warning() {
        let renamed: Vec<&Setting> = SETTINGS.iter().filter(|s| s.was.is_some()).collect();
        assert_eq!(renamed.len(), 16);
        for s in renamed {
            let (old, unit) = s.was.unwrap();
            // A value inside every range: 1 day, in the old unit.
            let n = match unit {
                Unit::Ms => 86_400_000,
                Unit::Secs => 86_400,
                Unit::Hours => 24,
                Unit::Days => 1,
            };
            let small = match s.path {
                "database.acquire_timeout" => Some((3, secs(3))),
                "http.header_read_timeout" | "api.body_idle" | "health.timeout" | "indexnow.timeout" => {
                    Some((7, secs(7)))
                }
                "http.write_timeout" | "http.shutdown_grace" | "sitemaps.stream_timeout" => Some((7, secs(7))),
                "cache.state_ttl" => Some((500, millis(500))),
                "indexnow.retry_base" => Some((500, millis(500))),
                _ => None,
            };
            let (n, expected) = small.unwrap_or((n, days(1)));
            let c = load(&[(old, &n.to_string())]).unwrap_or_else(|e| panic!("{old}={n}: {e}"));
            let shown = format!("{c:?}");
            assert!(shown.contains(&format!("{}: {}", s.key, shown_duration(&expected))), "{old}={n}: {shown}");
            let warning =
                format!("{old} is deprecated: read as {}={}{} ({}); rename it", s.var, n, unit.suffix(), s.path);
            assert_eq!(c.deprecations(), [warning], "{old}");
            let e = load(&[(old, "soon")]).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{old} (deprecated: {}, {}) must be a whole number of", s.var, s.path)),
                "{e}"
            );
            // Both: the new one counts, the old one is reported as ignored.
            let c = load(&[(old, &n.to_string()), (s.var, s.default.trim_matches('"'))]).unwrap();
            assert!(c.deprecations()[0].starts_with(&format!("{old} is deprecated and ignored: {} ", s.var)), "{old}");
        }
        assert!(load(&[("SITEMAPD_HEALTH_CYCLE", "7d")]).unwrap().deprecations().is_empty());
    }

    /// A file written before the sections still loads: each flat key is moved to its section (a number in a
    /// renamed setting's old unit converted), with a warning; a key its section gives too is ignored.
    #[test]
    fn a_flat_file_from_before_the_sections_is_read_with_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.toml");
        std::fs::write(
            &path,
            "health_cycle_days = 3\nstate_ttl_ms = 250\ngzip_level = 6\npublic_url = \"https://www.example.com\"\n\
             db_max_connections = 4\n[database]\nmax_connections = 8\n",
        )
        .unwrap();
        let c = Config::load_from(Some(&path), |_| None).unwrap();
        assert_eq!(c.health.cycle, days(3));
        assert_eq!(c.cache.state_ttl, millis(250));
        assert_eq!(c.sitemaps.gzip_level, 6);
        assert_eq!(c.sitemaps.public_url.as_str(), "https://www.example.com/");
        assert_eq!(c.database.max_connections, 8, "the section's key wins over the flat one");
        let file = path.display();
        let warnings = c.deprecations().join("\n");
        for expected in [
            format!("health_cycle_days in {file} is deprecated: read as [health] cycle = \"3d\"; move it"),
            format!("state_ttl_ms in {file} is deprecated: read as [cache] state_ttl = \"250ms\"; move it"),
            format!("gzip_level in {file} is deprecated: read as [sitemaps] gzip_level = 6; move it"),
            format!("db_max_connections in {file} is deprecated and ignored: [database] max_connections is given"),
        ] {
            assert!(warnings.contains(&expected), "{expected}\n in:\n{warnings}");
        }
        assert_eq!(c.deprecations().len(), 5);
        std::fs::write(&path, "health_cycle_days = \"7d\"\n").unwrap();
        let e = Config::load_from(Some(&path), |_| None).unwrap_err().to_string();
        assert!(e.contains("health_cycle_days in") && e.contains("must be a whole number of days"), "{e}");
    }

    /// The knobs that only made tests quick are no setting: their variables and file keys are ignored with a
    /// warning (a deployment that sets them still starts); the hidden tuning variable sets them.
    #[test]
    fn a_setting_whose_value_is_not_text_is_refused_by_name() {
        use std::os::unix::ffi::OsStringExt;
        let bad = std::ffi::OsString::from_vec(vec![0xff]);
        let e = check_values_are_text([("SITEMAPD_STATE_TTL".into(), bad.clone())]).unwrap_err().to_string();
        assert_eq!(e, "SITEMAPD_STATE_TTL is not valid UTF-8: a setting's value must be text");
        assert!(check_values_are_text([("DATABASE_URL".into(), bad.clone())]).is_err());
        check_values_are_text([("LANG".into(), bad), ("SITEMAPD_VIEW".into(), "true".into())]).unwrap();
    }

    #[test]
    fn removed_test_knobs_are_ignored_with_a_warning_and_tuned_in_code() {
        let c = load(&[("SITEMAPD_HEALTH_POLL_MS", "20"), ("SITEMAPD_CRAWLER_FLUSH_MS", "300000")]).unwrap();
        assert_eq!(c.tuning, Tuning::default(), "ignored");
        let warnings = c.deprecations().join("\n");
        assert!(warnings.contains("SITEMAPD_HEALTH_POLL_MS is no longer a setting and is ignored"), "{warnings}");
        assert!(warnings.contains("SITEMAPD_CRAWLER_FLUSH_MS is no longer a setting and is ignored"), "{warnings}");
        check_variable_names(["SITEMAPD_INDEXNOW_INTERVAL_MS".to_owned()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.toml");
        std::fs::write(&path, "indexnow_interval_ms = 20\n").unwrap();
        let c = Config::load_from(Some(&path), |_| None).unwrap();
        assert_eq!(c.tuning, Tuning::default());
        assert!(c.deprecations()[0].starts_with("indexnow_interval_ms in "), "{:?}", c.deprecations());
        let c = load(&[(
            TUNING_VARIABLE,
            "health_poll=20ms, indexnow_interval=30ms,crawler_flush=5m, websub_poll=10ms, websub_timeout=1s, \
             publish_poll=50ms, publish_lease=2s",
        )])
        .unwrap();
        assert_eq!(
            c.tuning,
            Tuning {
                health_poll: millis(20),
                indexnow_interval: millis(30),
                crawler_flush: secs(300),
                websub_poll: millis(10),
                websub_timeout: secs(1),
                publish_poll: millis(50),
                publish_lease: secs(2),
            }
        );
        assert!(!format!("{c:?}").contains("health_poll"), "not a setting: not logged");
        assert!(load(&[(TUNING_VARIABLE, "health_pol=20ms")]).is_err());
        let e = load(&[(TUNING_VARIABLE, "health_poll=0s")]).unwrap_err().to_string();
        assert!(e.contains("health_poll must be from 10ms to 1m, not 0s"), "{e}");
        assert!(load(&[(TUNING_VARIABLE, "crawler_flush=6m")]).is_err());
        assert!(load(&[(TUNING_VARIABLE, "websub_timeout=50ms")]).is_err());
        assert!(load(&[(TUNING_VARIABLE, "publish_lease=100ms")]).is_err());
        assert!(!reference::default_toml().contains("health_poll") && !reference::settings_table().contains("poll"));
    }
}
