//! What a host's `robots.txt` says for Googlebot: RFC 9309 as Google reads it, on the `texting_robots` crate.
//!
//! The group is that of the user agent `googlebot` (groups naming it are merged), else that of `*`; the longest
//! matching rule wins and `allow` wins a tie; `*` matches any run of characters and a final `$` the end of the
//! path; non-ASCII in a rule is percent-encoded before it is compared. The checker fetches
//! `/robots.txt` once per host and cycle, follows its redirects (RFC 9309 asks for at least five) and hands the
//! final answer to [`Robots::from_answer`]. An unknown answer never makes a problem.

use texting_robots::Robot;
use url::Url;

/// How much of a `robots.txt` is read: RFC 9309's minimum (500 kibibytes); the rest is ignored.
pub const MAX_BYTES: usize = 500 * 1024;

/// The product token the rules are read for (matched case-insensitively).
const AGENT: &str = "googlebot";

/// A host's `robots.txt` as it applies to Googlebot.
#[derive(Debug)]
pub struct Robots(Rules);

#[derive(Debug)]
enum Rules {
    /// No usable answer (5xx, an unreachable host, a body the parser refused): nothing is known.
    Unknown,
    /// A 4xx: RFC 9309 says every URL may be crawled.
    AllowAll,
    /// A 2xx: the rules of Googlebot's group.
    Parsed(Box<Robot>),
}

impl Robots {
    /// From the answer to `GET /robots.txt`: 2xx → its rules (the first [`MAX_BYTES`], cut at the last line end
    /// within them, so that a rule is never read cut short), 4xx → everything allowed, anything else (5xx, a
    /// 3xx the checker did not follow) → unknown.
    pub fn from_answer(status: u16, body: &[u8]) -> Self {
        match status {
            200..=299 => match Robot::new(AGENT, within_limit(body)) {
                Ok(robot) => Robots(Rules::Parsed(Box::new(robot))),
                Err(_) => Robots(Rules::Unknown),
            },
            400..=499 => Robots(Rules::AllowAll),
            _ => Robots(Rules::Unknown),
        }
    }

    /// The host did not answer (timeout, connection failure): nothing is known.
    pub fn unreachable() -> Self {
        Robots(Rules::Unknown)
    }

    /// Whether Googlebot may fetch `url` (of this file's host: the caller picks the file by the URL's origin);
    /// `None` when the rules are unknown, which never makes a problem.
    pub fn allows(&self, url: &Url) -> Option<bool> {
        match &self.0 {
            Rules::Unknown => None,
            Rules::AllowAll => Some(true),
            Rules::Parsed(robot) if url.fragment().is_some() => {
                // A fragment is never sent, so never matched.
                let mut url = url.clone();
                url.set_fragment(None);
                Some(robot.allowed(url.as_str()))
            }
            Rules::Parsed(robot) => Some(robot.allowed(url.as_str())),
        }
    }
}

/// The first [`MAX_BYTES`] of `body`, ending at a line end when the body is longer.
fn within_limit(body: &[u8]) -> &[u8] {
    if body.len() <= MAX_BYTES {
        return body;
    }
    let head = &body[..MAX_BYTES];
    match head.iter().rposition(|b| matches!(b, b'\n' | b'\r')) {
        Some(end) => &head[..=end],
        None => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(body: &str, url: &str) -> Option<bool> {
        Robots::from_answer(200, body.as_bytes()).allows(&Url::parse(url).unwrap())
    }

    /// Each case: robots.txt, URL, what Googlebot may do. Most are Google's own (robotstxt's robots_test.cc).
    #[test]
    fn googlebot_reads_rfc_9309_rules() {
        let cases: &[(&str, &str, bool)] = &[
            // No rules, or no group for us: allowed.
            ("", "http://foo.bar/x/y", true),
            ("user-agent: otherbot\ndisallow: /\n", "http://foo.bar/x/y", true),
            // Our group, in any case, merged across groups; `*` only when none names us.
            ("user-agent: googlebot\ndisallow: /\n", "http://foo.bar/x/y", false),
            ("USER-AGENT: GoogleBot\nDISALLOW: /\n", "http://foo.bar/x/y", false),
            ("user-agent: *\ndisallow: /\n", "http://foo.bar/x/y", false),
            ("user-agent: *\ndisallow: /\nuser-agent: googlebot\nallow: /\n", "http://foo.bar/x", true),
            ("user-agent: googlebot\nallow: /\nuser-agent: *\ndisallow: /\n", "http://foo.bar/x", true),
            (
                "user-agent: googlebot\ndisallow: /a\nuser-agent: b\nuser-agent: googlebot\ndisallow: /b\n",
                "http://foo.bar/b",
                false,
            ),
            (
                "user-agent: googlebot\ndisallow: /a\nuser-agent: b\nuser-agent: googlebot\ndisallow: /b\n",
                "http://foo.bar/a",
                false,
            ),
            (
                "user-agent: googlebot\ndisallow: /a\nuser-agent: b\nuser-agent: googlebot\ndisallow: /b\n",
                "http://foo.bar/c",
                true,
            ),
            // A more specific crawler's group is not Googlebot's.
            ("user-agent: googlebot-news\ndisallow: /\n", "http://foo.bar/x", true),
            ("user-agent: googlebot-news\ndisallow: /\nuser-agent: *\ndisallow: /x\n", "http://foo.bar/x", false),
            // Longest match wins; allow wins a tie.
            ("user-agent: googlebot\nallow: /x/page\ndisallow: /x/\n", "http://foo.bar/x/page", true),
            ("user-agent: googlebot\nallow: /x/\ndisallow: /x/page\n", "http://foo.bar/x/page", false),
            ("user-agent: googlebot\nallow: /page\ndisallow: /page\n", "http://foo.bar/page", true),
            ("user-agent: googlebot\ndisallow: /page\nallow: /page\n", "http://foo.bar/page", true),
            ("user-agent: googlebot\nallow: /$\ndisallow: /\n", "http://foo.bar/", true),
            ("user-agent: googlebot\nallow: /$\ndisallow: /\n", "http://foo.bar/page.html", false),
            ("user-agent: googlebot\ndisallow: /\nallow: /*.html\n", "http://foo.bar/page.html", true),
            // Paths are case-sensitive; an empty disallow allows.
            ("user-agent: googlebot\ndisallow: /X\n", "http://foo.bar/x", true),
            ("user-agent: googlebot\ndisallow:\n", "http://foo.bar/x", true),
            // `*` and `$`.
            ("user-agent: googlebot\ndisallow: /*.php$\n", "http://foo.bar/a/b.php", false),
            ("user-agent: googlebot\ndisallow: /*.php$\n", "http://foo.bar/a/b.php?x=1", true),
            ("user-agent: googlebot\ndisallow: /*.php\n", "http://foo.bar/a/b.php5", false),
            ("user-agent: googlebot\ndisallow: /*ab$\n", "http://foo.bar/abab", false),
            ("user-agent: googlebot\ndisallow: /fish*\n", "http://foo.bar/fishheads", false),
            ("user-agent: googlebot\ndisallow: /fish*\n", "http://foo.bar/Fish.asp", true),
            ("user-agent: googlebot\ndisallow: /*/tree/master$\n", "http://foo.bar/a/tree/master", false),
            ("user-agent: googlebot\ndisallow: /*/tree/master$\n", "http://foo.bar/a/tree/master/x", true),
            // The query is part of what is matched.
            ("user-agent: googlebot\ndisallow: /*?\n", "http://foo.bar/a?b", false),
            ("user-agent: googlebot\ndisallow: /*?\n", "http://foo.bar/a", true),
            // Percent-encoding: a non-ASCII rule matches the URL's encoded path.
            ("user-agent: googlebot\ndisallow: /foo/bar/ツ\n", "http://foo.bar/foo/bar/ツ", false),
            ("user-agent: googlebot\ndisallow: /foo/bar/%E3%83%84\n", "http://foo.bar/foo/bar/ツ", false),
            // The fragment is not part of what is matched.
            ("user-agent: googlebot\ndisallow: /a$\n", "http://foo.bar/a#part", false),
            ("user-agent: googlebot\ndisallow: /*part\n", "http://foo.bar/a#part", true),
            // robots.txt itself is always allowed.
            ("user-agent: googlebot\ndisallow: /\n", "http://foo.bar/robots.txt", true),
        ];
        for (body, url, want) in cases {
            assert_eq!(allows(body, url), Some(*want), "{url} under {body:?}");
        }
    }

    /// Each case: status, what every URL gets.
    #[test]
    fn the_answer_status_decides_what_is_known() {
        let disallow_all = b"user-agent: *\ndisallow: /\n";
        let url = Url::parse("https://foo.bar/x").unwrap();
        let cases: &[(u16, Option<bool>)] = &[
            (200, Some(false)),
            (203, Some(false)),
            (401, Some(true)),
            (403, Some(true)),
            (404, Some(true)),
            (429, Some(true)),
            (500, None),
            (503, None),
            (301, None),
            (100, None),
        ];
        for (status, want) in cases {
            assert_eq!(Robots::from_answer(*status, disallow_all).allows(&url), *want, "{status}");
        }
        assert_eq!(Robots::unreachable().allows(&url), None);
    }

    #[test]
    fn only_the_first_500_kib_are_read_and_cut_at_a_line_end() {
        let url = Url::parse("https://foo.bar/private/x").unwrap();
        let mut body = b"user-agent: googlebot\n".to_vec();
        while body.len() < MAX_BYTES - 100 {
            body.extend_from_slice(b"allow: /public\n");
        }
        // A comment up to 12 bytes before the limit, then a rule that straddles it: cut there, it would read
        // `disallow: /p`; it is dropped whole.
        let pad = MAX_BYTES - 12 - body.len() - 2;
        body.push(b'#');
        body.extend(std::iter::repeat_n(b'x', pad));
        body.push(b'\n');
        assert_eq!(body.len(), MAX_BYTES - 12);
        body.extend_from_slice(b"disallow: /private\n");
        assert_eq!(Robots::from_answer(200, &body).allows(&url), Some(true));
        // Within the limit, it counts.
        let short = b"user-agent: googlebot\nallow: /public\ndisallow: /private\n";
        assert_eq!(Robots::from_answer(200, short).allows(&url), Some(false));
    }

    #[test]
    fn robots_can_be_shared_between_tasks() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Robots>();
    }
}
