//! Which crawler a request says it is (its `User-Agent`), from one table, and how such a claim is checked: the IP
//! ranges the crawler's operator publishes ([`ranges`]) or the host name its address resolves to (forward-confirmed
//! reverse DNS: [`Crawler::rdns_domains`], [`rdns_name_matches`]). Pure: the lookups themselves are the server's.

pub mod ranges;

pub use self::ranges::IpRanges;

/// A crawler sitemapd tells apart. [`Crawler::Other`] is any other client that names itself a bot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Crawler {
    Googlebot,
    Bingbot,
    YandexBot,
    Applebot,
    DuckDuckBot,
    Baiduspider,
    GptBot,
    OaiSearchBot,
    ClaudeBot,
    PerplexityBot,
    CcBot,
    Other,
}

/// One row of the table: the crawler, its stable name (metrics labels, the API, the database), how it is shown,
/// the `User-Agent` tokens that name it (lower case, matched anywhere in the lower-cased agent), and the domains
/// its addresses' reverse names lie under (empty: its operator publishes none).
struct Row {
    crawler: Crawler,
    name: &'static str,
    shown: &'static str,
    tokens: &'static [&'static str],
    rdns: &'static [&'static str],
}

/// The table, in matching order: the first row with a token in the agent wins, so a more specific token (an
/// operator's second crawler) comes before a general one, and [`Crawler::Other`]'s generic words come last.
const TABLE: &[Row] = &[
    Row {
        crawler: Crawler::Googlebot,
        name: "googlebot",
        shown: "Googlebot",
        tokens: &["googlebot", "google-inspectiontool", "storebot-google", "googleother"],
        rdns: &["googlebot.com", "google.com"],
    },
    Row {
        crawler: Crawler::Bingbot,
        name: "bingbot",
        shown: "Bingbot",
        tokens: &["bingbot", "bingpreview", "msnbot", "adidxbot"],
        rdns: &["search.msn.com"],
    },
    Row {
        crawler: Crawler::YandexBot,
        name: "yandexbot",
        shown: "YandexBot",
        tokens: &["yandexbot", "yandex.com/bots"],
        rdns: &["yandex.ru", "yandex.net", "yandex.com"],
    },
    Row {
        crawler: Crawler::Applebot,
        name: "applebot",
        shown: "Applebot",
        tokens: &["applebot"],
        rdns: &["applebot.apple.com"],
    },
    Row {
        crawler: Crawler::DuckDuckBot,
        name: "duckduckbot",
        shown: "DuckDuckBot",
        tokens: &["duckduckbot"],
        rdns: &[],
    },
    Row {
        crawler: Crawler::Baiduspider,
        name: "baiduspider",
        shown: "Baiduspider",
        tokens: &["baiduspider"],
        rdns: &["baidu.com", "baidu.jp"],
    },
    Row {
        crawler: Crawler::OaiSearchBot,
        name: "oai-searchbot",
        shown: "OAI-SearchBot",
        tokens: &["oai-searchbot"],
        rdns: &[],
    },
    Row { crawler: Crawler::GptBot, name: "gptbot", shown: "GPTBot", tokens: &["gptbot"], rdns: &[] },
    Row {
        crawler: Crawler::ClaudeBot,
        name: "claudebot",
        shown: "ClaudeBot",
        tokens: &["claudebot", "claude-searchbot"],
        rdns: &[],
    },
    Row {
        crawler: Crawler::PerplexityBot,
        name: "perplexitybot",
        shown: "PerplexityBot",
        tokens: &["perplexitybot"],
        rdns: &[],
    },
    Row {
        crawler: Crawler::CcBot,
        name: "ccbot",
        shown: "CCBot",
        tokens: &["ccbot"],
        rdns: &["crawl.commoncrawl.org"],
    },
    Row {
        crawler: Crawler::Other,
        name: "other-bot",
        shown: "other bot",
        tokens: &["bot", "crawler", "spider", "slurp", "scraper", "fetcher"],
        rdns: &[],
    },
];

impl Crawler {
    /// Every crawler, in the table's order.
    pub const ALL: [Crawler; 12] = [
        Crawler::Googlebot,
        Crawler::Bingbot,
        Crawler::YandexBot,
        Crawler::Applebot,
        Crawler::DuckDuckBot,
        Crawler::Baiduspider,
        Crawler::OaiSearchBot,
        Crawler::GptBot,
        Crawler::ClaudeBot,
        Crawler::PerplexityBot,
        Crawler::CcBot,
        Crawler::Other,
    ];

    /// The crawlers the view gives a column each and a record's lookup reports on.
    pub const MAJOR: [Crawler; 2] = [Crawler::Googlebot, Crawler::Bingbot];

    fn row(self) -> &'static Row {
        TABLE.iter().find(|r| r.crawler == self).expect("every crawler has a row")
    }

    /// The stable name: metric labels, the API, the database.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// How people see it named.
    pub fn shown(self) -> &'static str {
        self.row().shown
    }

    pub fn from_name(name: &str) -> Option<Self> {
        TABLE.iter().find(|r| r.name == name).map(|r| r.crawler)
    }

    /// The domains a verified address's reverse name lies under (the operator's documented ones); empty when
    /// the operator documents none.
    pub fn rdns_domains(self) -> &'static [&'static str] {
        self.row().rdns
    }

    /// Who a `User-Agent` says it is: `None` for a client that does not name itself a crawler. Case-insensitive;
    /// at most the first 512 bytes are read (no agent of a crawler in the table is longer).
    pub fn classify(user_agent: &[u8]) -> Option<Self> {
        let agent = &user_agent[..user_agent.len().min(512)];
        TABLE.iter().find(|row| row.tokens.iter().any(|t| contains_ignore_case(agent, t.as_bytes()))).map(|r| r.crawler)
    }
}

/// Whether `haystack` holds `needle` (lower case ASCII) ignoring ASCII case.
fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.len() >= needle.len() && haystack.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// How far a request's claim to be a crawler holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trust {
    /// Its address is in the crawler's published ranges, or its reverse name (confirmed forward) lies under the
    /// crawler's domains.
    Verified,
    /// The agent names a crawler that publishes ranges or domains, and the address is not among them.
    Claimed,
    /// Nothing to check it by: a crawler that publishes neither, or [`Crawler::Other`].
    Unknown,
}

impl Trust {
    pub fn name(self) -> &'static str {
        match self {
            Trust::Verified => "verified",
            Trust::Claimed => "claimed",
            Trust::Unknown => "unknown",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Trust::Verified, Trust::Claimed, Trust::Unknown].into_iter().find(|t| t.name() == name)
    }
}

/// Whether `host` (a reverse DNS answer, perhaps with a trailing dot) lies under one of `crawler`'s domains: the
/// domain itself or a name ending in `.` + the domain, ignoring ASCII case.
pub fn rdns_name_matches(crawler: Crawler, host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    crawler.rdns_domains().iter().any(|domain| {
        host.eq_ignore_ascii_case(domain)
            || (host.len() > domain.len()
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
                && host[host.len() - domain.len()..].eq_ignore_ascii_case(domain))
    })
}
