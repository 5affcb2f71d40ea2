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
        // One pass of one automaton over the agent for every token of the table (a browser's agent is read once,
        // not once a token); the earliest row among the tokens found wins.
        let (automaton, rows) = &*TOKENS;
        automaton.find_overlapping_iter(agent).map(|m| rows[m.pattern().as_usize()]).min().map(|row| TABLE[row].crawler)
    }
}

/// Every token of the table in one automaton (ASCII case ignored), and the row each token is of.
static TOKENS: std::sync::LazyLock<(aho_corasick::AhoCorasick, Vec<usize>)> = std::sync::LazyLock::new(|| {
    let (tokens, rows): (Vec<&str>, Vec<usize>) =
        TABLE.iter().enumerate().flat_map(|(row, r)| r.tokens.iter().map(move |t| (*t, row))).unzip();
    let automaton = aho_corasick::AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(tokens)
        .expect("the table's tokens make an automaton");
    (automaton, rows)
});

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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// User agents as the operators document them, each with the crawler it names.
    const AGENTS: &[(&str, Crawler)] = &[
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) \
             Chrome/W.X.Y.Z Safari/537.36",
            Crawler::Googlebot,
        ),
        (
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/W.X.Y.Z Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            Crawler::Googlebot,
        ),
        ("Googlebot/2.1 (+http://www.google.com/bot.html)", Crawler::Googlebot),
        ("Googlebot-Image/1.0", Crawler::Googlebot),
        ("Mozilla/5.0 (compatible; Google-InspectionTool/1.0;)", Crawler::Googlebot),
        ("GoogleOther", Crawler::Googlebot),
        (
            "Mozilla/5.0 (X11; Linux x86_64; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/W.X.Y.Z Safari/537.36",
            Crawler::Googlebot,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) \
             Chrome/116.0.1938.76 Safari/537.36",
            Crawler::Bingbot,
        ),
        ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", Crawler::Bingbot),
        ("msnbot/2.0b (+http://search.msn.com/msnbot.htm)", Crawler::Bingbot),
        ("Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", Crawler::YandexBot),
        ("Mozilla/5.0 (compatible; YandexImages/3.0; +http://yandex.com/bots)", Crawler::YandexBot),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 \
             Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
            Crawler::Applebot,
        ),
        ("DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", Crawler::DuckDuckBot),
        ("Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)", Crawler::Baiduspider),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.1; +https://openai.com/gptbot)",
            Crawler::GptBot,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; \
             +https://openai.com/searchbot",
            Crawler::OaiSearchBot,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
            Crawler::ClaudeBot,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; \
             +https://perplexity.ai/perplexitybot)",
            Crawler::PerplexityBot,
        ),
        ("CCBot/2.0 (https://commoncrawl.org/faq/)", Crawler::CcBot),
        ("Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", Crawler::Other),
        ("Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)", Crawler::Other),
    ];

    /// Browsers' agents: none names a crawler.
    const BROWSERS: &[&str] = &[
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 \
         Safari/537.36",
        "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) \
         Version/18.1 Mobile/15E148 Safari/604.1",
        "curl/8.5.0",
        "",
    ];

    #[test]
    fn documented_agents_are_their_crawlers() {
        for &(agent, crawler) in AGENTS {
            assert_eq!(Crawler::classify(agent.as_bytes()), Some(crawler), "{agent}");
        }
    }

    #[test]
    fn oai_searchbot_is_not_taken_for_gptbot() {
        let agent = b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; \
                      +https://openai.com/searchbot";
        assert_eq!(Crawler::classify(agent), Some(Crawler::OaiSearchBot));
        assert_eq!(Crawler::classify(agent).map(Crawler::name), Some("oai-searchbot"));
    }

    #[test]
    fn browsers_are_no_crawler() {
        for agent in BROWSERS {
            assert_eq!(Crawler::classify(agent.as_bytes()), None, "{agent}");
        }
    }

    #[test]
    fn matching_ignores_case() {
        assert_eq!(Crawler::classify(b"GOOGLEBOT/2.1"), Some(Crawler::Googlebot));
        assert_eq!(Crawler::classify(b"mozilla/5.0 (compatible; BiNgBoT/2.0)"), Some(Crawler::Bingbot));
    }

    #[test]
    fn bytes_that_are_not_utf8_do_not_panic() {
        assert_eq!(Crawler::classify(b"\xff\xfe\x00Googlebot/2.1\x80"), Some(Crawler::Googlebot));
        assert_eq!(Crawler::classify(b"\xc3(\xa0\xa1\xe2\x28\xa1\xf0\x90\x28\xbc"), None);
        assert_eq!(Crawler::classify(&[0xff; 4096]), None);
        assert_eq!(
            Crawler::classify("Mozilla/5.0 (compatible; Googlebot/2.1) ünïcödé".as_bytes()),
            Some(Crawler::Googlebot)
        );
    }

    #[test]
    fn only_the_first_512_bytes_are_read() {
        let mut long = b"Googlebot/2.1 ".to_vec();
        long.resize(1 << 20, b'x');
        assert_eq!(Crawler::classify(&long), Some(Crawler::Googlebot));
        // A token after the first 512 bytes is not seen, nor one cut at the 512th.
        let mut late = vec![b'x'; 512];
        late.extend_from_slice(b"Googlebot/2.1");
        assert_eq!(Crawler::classify(&late), None);
        let mut cut = vec![b'x'; 512 - 4];
        cut.extend_from_slice(b"Googlebot");
        assert_eq!(Crawler::classify(&cut), None);
        let mut last = vec![b'x'; 512 - 9];
        last.extend_from_slice(b"Googlebot");
        assert_eq!(Crawler::classify(&last), Some(Crawler::Googlebot));
    }

    proptest! {
        #[test]
        fn classify_takes_any_bytes(agent in prop::collection::vec(any::<u8>(), 0..2048)) {
            let whole = Crawler::classify(&agent);
            prop_assert_eq!(whole, Crawler::classify(&agent[..agent.len().min(512)]));
            prop_assert_eq!(whole, Crawler::classify(&agent.to_ascii_uppercase()));
        }
    }

    #[test]
    fn names_round_trip_and_every_crawler_has_a_row() {
        assert_eq!(TABLE.len(), Crawler::ALL.len());
        for (row, crawler) in TABLE.iter().zip(Crawler::ALL) {
            assert_eq!(row.crawler, crawler, "ALL is in the table's order");
            assert_eq!(Crawler::from_name(crawler.name()), Some(crawler));
            assert!(!crawler.shown().is_empty());
        }
        assert_eq!(Crawler::from_name("Googlebot"), None, "names are exact");
        for trust in [Trust::Verified, Trust::Claimed, Trust::Unknown] {
            assert_eq!(Trust::from_name(trust.name()), Some(trust));
        }
        assert_eq!(Trust::from_name("trusted"), None);
    }

    #[test]
    fn reverse_names_under_the_crawlers_domains_match() {
        let yes = [
            (Crawler::Googlebot, "crawl-66-249-66-1.googlebot.com"),
            (Crawler::Googlebot, "geo-crawl-35-247-243-240.geo.googlebot.com"),
            (Crawler::Googlebot, "rate-limited-proxy-66-249-90-77.google.com"),
            (Crawler::Googlebot, "googlebot.com"),
            (Crawler::Bingbot, "msnbot-157-55-39-1.search.msn.com"),
            (Crawler::Applebot, "17-58-101-179.applebot.apple.com"),
            (Crawler::YandexBot, "5-255-253-1.spider.yandex.com"),
            (Crawler::Baiduspider, "baiduspider-180-76-15-1.crawl.baidu.com"),
            (Crawler::CcBot, "ec2-1.crawl.commoncrawl.org"),
        ];
        for (crawler, host) in yes {
            assert!(rdns_name_matches(crawler, host), "{host}");
        }
    }

    #[test]
    fn a_trailing_dot_and_case_do_not_matter() {
        assert!(rdns_name_matches(Crawler::Googlebot, "crawl-66-249-66-1.googlebot.com."));
        assert!(rdns_name_matches(Crawler::Googlebot, "CRAWL-66-249-66-1.GoogleBot.COM"));
        assert!(rdns_name_matches(Crawler::Googlebot, "Crawl-66-249-66-1.GOOGLEBOT.com."));
        assert!(!rdns_name_matches(Crawler::Googlebot, "crawl-66-249-66-1.googlebot.com.."));
    }

    #[test]
    fn look_alike_names_do_not_match() {
        let no = [
            (Crawler::Googlebot, "googlebot.com.evil.example"),
            (Crawler::Googlebot, "evilgooglebot.com"),
            (Crawler::Googlebot, "crawl-66-249-66-1.googlebot.co"),
            (Crawler::Googlebot, "googlebot.com-evil.example"),
            (Crawler::Googlebot, "oogle.com"),
            (Crawler::Googlebot, ""),
            (Crawler::Googlebot, "."),
            (Crawler::Bingbot, "crawl-66-249-66-1.googlebot.com"),
            (Crawler::Bingbot, "msn.com"),
            (Crawler::Applebot, "apple.com"),
            // Crawlers whose operators document no domain match nothing.
            (Crawler::DuckDuckBot, "duckduckgo.com"),
            (Crawler::GptBot, "openai.com"),
            (Crawler::Other, "crawl-66-249-66-1.googlebot.com"),
        ];
        for (crawler, host) in no {
            assert!(!rdns_name_matches(crawler, host), "{crawler:?} {host}");
        }
    }

    #[test]
    fn names_that_are_not_ascii_do_not_panic() {
        assert!(rdns_name_matches(Crawler::Googlebot, "é.googlebot.com"));
        assert!(!rdns_name_matches(Crawler::Googlebot, "ügooglebot.com"));
        assert!(!rdns_name_matches(Crawler::Googlebot, "googlebot.cöm"));
        assert!(!rdns_name_matches(Crawler::Googlebot, "ééééééééééééééééé"));
        assert!(!rdns_name_matches(Crawler::Bingbot, "€search.msn.com"));
    }

    proptest! {
        #[test]
        fn rdns_matching_takes_any_name(host in "\\PC{0,40}", crawler in prop::sample::select(Crawler::ALL.to_vec())) {
            let plain = rdns_name_matches(crawler, &host);
            prop_assert_eq!(plain, rdns_name_matches(crawler, &host.to_ascii_uppercase()));
        }

        #[test]
        fn a_name_is_under_a_domain_only_after_a_dot(
            label in "[a-zA-Z0-9-]{1,20}",
            crawler in prop::sample::select(Crawler::ALL.to_vec()),
            trailing_dot in any::<bool>(),
        ) {
            let dot = if trailing_dot { "." } else { "" };
            for domain in crawler.rdns_domains() {
                let under = format!("{label}.{domain}{dot}");
                let glued = format!("{label}{domain}{dot}");
                let above = format!("{domain}.{label}.invalid{dot}");
                prop_assert!(rdns_name_matches(crawler, &under), "{}", under);
                prop_assert!(!rdns_name_matches(crawler, &glued), "{}", glued);
                prop_assert!(!rdns_name_matches(crawler, &above), "{}", above);
            }
        }
    }
}
