//! What an answer's headers say to a search engine: `X-Robots-Tag`, `Link: rel=canonical`, `Retry-After`.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::{LINK, RETRY_AFTER};

/// The longest wait a `Retry-After` is taken for: a server asking for more is asked again a day later.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(24 * 60 * 60);

/// Rules of `X-Robots-Tag` whose value holds a colon: `unavailable_after: <date>`, `max-snippet: 20`, … A colon
/// after any other token makes it a user agent (`googlebot: noindex`); the text before a colon inside a date
/// (`15:00`) is no token.
const VALUED_RULES: [&str; 4] = ["unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"];

/// Where `X-Robots-Tag` says `noindex` (or `none`) for Google: `"X-Robots-Tag"` when for every robot,
/// `"X-Robots-Tag: googlebot"` when for Googlebot by name; the first in header order.
///
/// Each header is a comma list; a rule may start with a user agent and a colon (`googlebot: noindex`), which
/// then holds for the rules after it in that header. A rule for another robot (`bingbot: noindex`) does not
/// count; nor does one for another of Google's crawlers (`googlebot-news: noindex`).
pub fn x_robots_noindex(headers: &HeaderMap) -> Option<&'static str> {
    for value in headers.get_all("x-robots-tag") {
        let value = String::from_utf8_lossy(value.as_bytes());
        let mut agent: Option<String> = None;
        for rule in value.split(',') {
            let mut rule = rule.trim();
            if let Some((name, rest)) = rule.split_once(':') {
                let name = name.trim().to_ascii_lowercase();
                let token =
                    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                if token && !VALUED_RULES.contains(&name.as_str()) {
                    agent = Some(name);
                    rule = rest.trim();
                }
            }
            let noindex = rule.eq_ignore_ascii_case("noindex") || rule.eq_ignore_ascii_case("none");
            match agent.as_deref() {
                _ if !noindex => {}
                None => return Some("X-Robots-Tag"),
                Some("googlebot") => return Some("X-Robots-Tag: googlebot"),
                Some(_) => {}
            }
        }
    }
    None
}

/// The target of the first `Link` whose `rel` holds `canonical` (RFC 8288: `<uri>; rel="canonical"`, `rel`
/// quoted or not, several space-separated relations), as written.
pub fn link_canonical(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(LINK)
        .iter()
        .flat_map(|value| links(&String::from_utf8_lossy(value.as_bytes())))
        .find(|(_, rel)| rel.split_ascii_whitespace().any(|r| r.eq_ignore_ascii_case("canonical")))
        .map(|(target, _)| target)
}

/// The links of one `Link` value: each target with its (first) `rel` parameter, empty when it has none. A
/// malformed link ends the value's reading.
fn links(value: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = value;
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
        let Some(after_open) = rest.strip_prefix('<') else { return found };
        let Some((target, after)) = after_open.split_once('>') else { return found };
        rest = after;
        let mut rel: Option<String> = None;
        // Parameters: `; name=value` or `; name="quoted, value"` or a bare `; name`, up to the next comma.
        loop {
            rest = rest.trim_start();
            let Some(after_semi) = rest.strip_prefix(';') else { break };
            rest = after_semi.trim_start();
            let name_end = rest.find(|c: char| matches!(c, '=' | ';' | ',') || c.is_ascii_whitespace());
            let name_end = name_end.unwrap_or(rest.len());
            let name = rest[..name_end].to_ascii_lowercase();
            rest = rest[name_end..].trim_start();
            let mut param = String::new();
            if let Some(after_eq) = rest.strip_prefix('=') {
                rest = after_eq.trim_start();
                if let Some(quoted) = rest.strip_prefix('"') {
                    let mut chars = quoted.char_indices();
                    let mut end = quoted.len();
                    while let Some((i, c)) = chars.next() {
                        match c {
                            '\\' => {
                                if let Some((_, escaped)) = chars.next() {
                                    param.push(escaped);
                                }
                            }
                            '"' => {
                                end = i + 1;
                                break;
                            }
                            c => param.push(c),
                        }
                    }
                    rest = &quoted[end..];
                } else {
                    let end = rest.find([';', ',']).unwrap_or(rest.len());
                    param.push_str(rest[..end].trim());
                    rest = &rest[end..];
                }
            }
            if name == "rel" && rel.is_none() {
                rel = Some(param);
            }
        }
        found.push((target.trim().to_owned(), rel.unwrap_or_default()));
        if !rest.starts_with(',') {
            return found;
        }
    }
}

/// The wait a `Retry-After` asks for, from `now` (the answer's arrival): delay-seconds or an HTTP-date; a
/// date past is no wait; capped at [`RETRY_AFTER_CAP`]. `None` when absent or unreadable.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let wait = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is still a long wait.
        Duration::from_secs(value.parse().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(RETRY_AFTER_CAP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(name: &'static str, values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(name, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    /// Each case: the `X-Robots-Tag` headers, where noindex was found.
    #[test]
    fn x_robots_tag_noindex_for_all_robots_or_googlebot() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], None),
            (&["noindex"], Some("X-Robots-Tag")),
            (&["NoIndex"], Some("X-Robots-Tag")),
            (&["none"], Some("X-Robots-Tag")),
            (&["nofollow, noindex"], Some("X-Robots-Tag")),
            (&[" nofollow ,  noindex "], Some("X-Robots-Tag")),
            (&["nofollow", "noindex"], Some("X-Robots-Tag")),
            (&["index, follow"], None),
            (&["noindexing"], None),
            (&["nosnippet", "max-snippet: 20"], None),
            (&["unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"], Some("X-Robots-Tag")),
            (&["unavailable_after: Friday, 25-Jun-10 15:00:00 PST, noindex"], Some("X-Robots-Tag")),
            (&["googlebot: noindex"], Some("X-Robots-Tag: googlebot")),
            (&["GoogleBot: none"], Some("X-Robots-Tag: googlebot")),
            (&["googlebot: nofollow, noindex"], Some("X-Robots-Tag: googlebot")),
            (&["bingbot: noindex"], None),
            (&["bingbot: noindex, nofollow"], None),
            (&["googlebot-news: noindex"], None),
            (&["bingbot: noindex", "googlebot: noindex"], Some("X-Robots-Tag: googlebot")),
            (&["bingbot: nofollow, googlebot: noindex"], Some("X-Robots-Tag: googlebot")),
            (&["googlebot: nofollow, bingbot: noindex"], None),
            (&["bingbot: noindex", "noindex"], Some("X-Robots-Tag")),
            (&["googlebot: noindex", "noindex"], Some("X-Robots-Tag: googlebot")),
        ];
        for (values, want) in cases {
            assert_eq!(x_robots_noindex(&headers("x-robots-tag", values)), *want, "{values:?}");
        }
    }

    /// Each case: the `Link` headers, the canonical target found.
    #[test]
    fn link_header_canonical() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], None),
            (&[r#"<https://a.example/x>; rel="canonical""#], Some("https://a.example/x")),
            (&["<https://a.example/x>; rel=canonical"], Some("https://a.example/x")),
            (&["<https://a.example/x>;rel=Canonical"], Some("https://a.example/x")),
            (&[r#"</x> ; rel = "canonical""#], Some("/x")),
            (&[r#"<https://a.example/x>; rel="alternate canonical""#], Some("https://a.example/x")),
            (&[r#"<https://a.example/x>; rel="alternate""#], None),
            (&[r#"<https://a.example/x>; rel="canonicalize""#], None),
            (&["<https://a.example/x>"], None),
            (&[r#"</de>; rel="alternate"; hreflang="de", </x>; rel="canonical""#], Some("/x")),
            (&[r#"</a,b>; rel="alternate", </x>; rel=canonical"#], Some("/x")),
            (&[r#"</a>; title="x, rel=canonical"; rel=alternate, </b>; rel=canonical"#], Some("/b")),
            (&[r#"</a>; title="say \"hi\""; rel="canonical""#], Some("/a")),
            (&[r#"</a>; rel="alternate"; rel="canonical""#], None),
            (&[r#"</de>; rel="alternate""#, r#"</x>; rel="canonical""#], Some("/x")),
            (&[r#"</x>; rel="canonical", </y>; rel="canonical""#], Some("/x")),
            (&["garbage, </x>; rel=canonical"], None),
        ];
        for (values, want) in cases {
            assert_eq!(link_canonical(&headers("link", values)).as_deref(), *want, "{values:?}");
        }
    }

    /// Each case: the `Retry-After` value, the wait from a fixed now.
    #[test]
    fn retry_after_seconds_or_a_date() {
        // Sun, 06 Nov 1994 08:49:37 GMT.
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        let cases: &[(&str, Option<u64>)] = &[
            ("120", Some(120)),
            (" 0 ", Some(0)),
            ("86400", Some(86_400)),
            ("86401", Some(86_400)),
            ("99999999999999999999999", Some(86_400)),
            ("-5", None),
            ("1.5", None),
            ("soon", None),
            ("", None),
            ("Sun, 06 Nov 1994 08:50:37 GMT", Some(60)),
            ("Sunday, 06-Nov-94 08:51:37 GMT", Some(120)),
            ("Sun Nov  6 08:52:37 1994", Some(180)),
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(0)),
            ("Sun, 06 Nov 1994 07:00:00 GMT", Some(0)),
            ("Tue, 08 Nov 1994 08:49:37 GMT", Some(86_400)),
        ];
        for (value, want) in cases {
            let map = headers("retry-after", &[value]);
            assert_eq!(retry_after(&map, now), want.map(Duration::from_secs), "{value:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    proptest::proptest! {
        /// Whatever a server sends, reading it never panics.
        #[test]
        fn any_header_value_is_read_without_panic(value in "[ -~]{0,60}") {
            for name in ["x-robots-tag", "link", "retry-after"] {
                let map = headers(name, &[&value]);
                let _ = (x_robots_noindex(&map), link_canonical(&map), retry_after(&map, SystemTime::now()));
            }
        }
    }
}
