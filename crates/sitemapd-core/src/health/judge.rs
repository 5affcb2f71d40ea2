//! The judge: what one answer to a check means for the URL, as a [`Finding`].

use std::time::SystemTime;

use http::HeaderMap;
use http::header::{ETAG, LAST_MODIFIED, LOCATION};
use url::Url;

use super::head::Head;
use super::headers::{link_canonical, retry_after, x_robots_noindex};
use super::same_url::same_url;
use super::{Finding, Kind, Problems, Transient};

/// What the answer to `GET loc` means: its status, headers and the prefix of its body (`head`, as a
/// [`super::head::HeadScan`] kept it; read only for a 2xx), with what `robots.txt` says of `loc`
/// ([`super::robots::Robots::allows`]). `Retry-After` dates are read against the clock; [`judge_at`] takes the
/// time.
///
/// - 2xx: healthy unless `noindex` (or `none`) for all robots or Googlebot (`X-Robots-Tag` first, then
///   `<meta name="robots|googlebot">`) or a canonical naming another URL (`Link` first, else `<link>`; resolved
///   against `loc`; compared as RFC 3986 §6.2.2 normalizes them, [`super::same_url`]: `%7E` is `~`, the fragment
///   and an empty query are nothing, but another scheme, host, path, trailing slash or query is another URL).
/// - 3xx but 304: [`Kind::Redirect`], with `Location` resolved against `loc` (a missing one still a redirect).
/// - 304: not judged: the checker keeps the previous finding; this one has `status: Some(304)`, no problems and
///   the validators the answer sent.
/// - 404 [`Kind::NotFound`], 410 [`Kind::Gone`], another 4xx [`Kind::ClientError`]; 429 transient
///   ([`Transient::RateLimited`]).
/// - 5xx transient ([`Transient::Server`]); so is a status no rule knows (a final 1xx, 600 and up).
///
/// `robots == Some(false)` adds [`Kind::Disallowed`] to a definite answer (not to a 304). `etag` and
/// `last_modified` are copied from a definite answer; `retry_after` from any answer.
pub fn judge(loc: &Url, status: u16, headers: &HeaderMap, head: &[u8], robots: Option<bool>) -> Finding {
    judge_at(loc, status, headers, head, robots, SystemTime::now())
}

/// [`judge`] with the answer's arrival time, from which a `Retry-After` date is read.
pub fn judge_at(
    loc: &Url,
    status: u16,
    headers: &HeaderMap,
    head: &[u8],
    robots: Option<bool>,
    now: SystemTime,
) -> Finding {
    let retry_after = retry_after(headers, now);
    let transient = match status {
        429 => Some(Transient::RateLimited),
        500..=599 => Some(Transient::Server(status)),
        200..=499 => None,
        _ => Some(Transient::Server(status)),
    };
    if let Some(why) = transient {
        return Finding { status: Some(status), ..Finding::transient(why, retry_after) };
    }
    let mut finding = Finding {
        status: Some(status),
        retry_after,
        etag: text(headers, ETAG),
        last_modified: text(headers, LAST_MODIFIED),
        ..Finding::default()
    };
    if status == 304 {
        return finding;
    }
    let mut problems = Problems::NONE;
    match status {
        200..=299 => {
            let page = Head::scan(head);
            finding.noindex_by = noindex(headers, &page);
            if finding.noindex_by.is_some() {
                problems.insert(Kind::Noindex);
            }
            let named = link_canonical(headers).or(page.canonical);
            finding.canonical = named.and_then(|raw| elsewhere(loc, &raw));
            if finding.canonical.is_some() {
                problems.insert(Kind::Canonical);
            }
        }
        300..=399 => {
            problems.insert(Kind::Redirect);
            finding.location = text(headers, LOCATION).map(|raw| match loc.join(raw.trim()) {
                Ok(target) => target.into(),
                Err(_) => raw,
            });
        }
        404 => problems.insert(Kind::NotFound),
        410 => problems.insert(Kind::Gone),
        _ => problems.insert(Kind::ClientError),
    }
    if robots == Some(false) {
        problems.insert(Kind::Disallowed);
    }
    finding.problems = problems;
    finding
}

/// Where `noindex` is said for Google: the headers first, then the head's metas in order.
fn noindex(headers: &HeaderMap, page: &Head) -> Option<String> {
    if let Some(by) = x_robots_noindex(headers) {
        return Some(by.to_owned());
    }
    page.robots.iter().find_map(|(name, content)| {
        let noindex = content
            .split(',')
            .map(str::trim)
            .any(|r| r.eq_ignore_ascii_case("noindex") || r.eq_ignore_ascii_case("none"));
        noindex.then(|| format!("meta {name}"))
    })
}

/// The canonical `raw` names, absolute, when it is another URL than `loc` ([`same_url`]: RFC 3986 §6.2.2's
/// normalization, fragments aside); `None` when it names `loc` itself in any spelling or cannot be resolved.
fn elsewhere(loc: &Url, raw: &str) -> Option<String> {
    let mut named = loc.join(raw.trim()).ok()?;
    named.set_fragment(None);
    (!same_url(&named, loc)).then(|| named.into())
}

/// A header's value as text (lossily).
fn text(headers: &HeaderMap, name: http::header::HeaderName) -> Option<String> {
    headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;

    use super::*;

    const LOC: &str = "https://a.example/dir/page?x=1";

    fn map(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn judged(status: u16, headers: &[(&'static str, &str)], head: &str, robots: Option<bool>) -> Finding {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        judge_at(&Url::parse(LOC).unwrap(), status, &map(headers), head.as_bytes(), robots, now)
    }

    fn kinds(finding: &Finding) -> Vec<Kind> {
        finding.problems.iter().collect()
    }

    /// Status, Location, the problems, the recorded target.
    type StatusCase = (u16, Option<&'static str>, &'static [Kind], Option<&'static str>);

    /// Each case: status, Location, the problems and the recorded target.
    #[test]
    fn statuses_are_judged() {
        use Kind::*;
        let cases: &[StatusCase] = &[
            (200, None, &[], None),
            (204, None, &[], None),
            (301, Some("/new"), &[Redirect], Some("https://a.example/new")),
            (302, Some("other"), &[Redirect], Some("https://a.example/dir/other")),
            (303, Some("https://b.example/x"), &[Redirect], Some("https://b.example/x")),
            (307, Some("?y=2"), &[Redirect], Some("https://a.example/dir/page?y=2")),
            (308, Some("//c.example/"), &[Redirect], Some("https://c.example/")),
            (301, None, &[Redirect], None),
            (300, None, &[Redirect], None),
            (301, Some("http://[bad"), &[Redirect], Some("http://[bad")),
            (304, None, &[], None),
            (400, None, &[ClientError], None),
            (401, None, &[ClientError], None),
            (403, None, &[ClientError], None),
            (404, None, &[NotFound], None),
            (410, None, &[Gone], None),
            (451, None, &[ClientError], None),
        ];
        for (status, location, want, target) in cases {
            let headers: Vec<_> = location.iter().map(|l| ("location", *l)).collect();
            let f = judged(*status, &headers, "", None);
            assert_eq!((f.status, kinds(&f).as_slice()), (Some(*status), *want), "{status}");
            assert_eq!(f.location.as_deref(), *target, "{status} {location:?}");
            assert!(f.is_definite(), "{status}");
        }
    }

    /// Each case: status, Retry-After, the transient reason and the wait.
    #[test]
    fn transient_answers_are_never_problems() {
        let cases: &[(u16, Option<&str>, Transient, Option<u64>)] = &[
            (429, None, Transient::RateLimited, None),
            (429, Some("30"), Transient::RateLimited, Some(30)),
            (500, None, Transient::Server(500), None),
            (502, None, Transient::Server(502), None),
            (503, Some("Sun, 06 Nov 1994 08:50:37 GMT"), Transient::Server(503), Some(60)),
            (599, None, Transient::Server(599), None),
            (600, None, Transient::Server(600), None),
            (103, None, Transient::Server(103), None),
        ];
        for (status, after, why, wait) in cases {
            let mut headers = vec![("etag", "\"v1\""), ("x-robots-tag", "noindex")];
            headers.extend(after.map(|a| ("retry-after", a)));
            let f = judged(*status, &headers, r#"<meta name="robots" content="noindex">"#, Some(false));
            assert_eq!(f.transient.as_ref(), Some(why), "{status}");
            assert_eq!(f.retry_after, wait.map(Duration::from_secs), "{status}");
            assert_eq!((f.status, f.problems, f.etag, f.noindex_by), (Some(*status), Problems::NONE, None, None));
        }
    }

    /// Each case: X-Robots-Tag, the head, where noindex was found.
    #[test]
    fn noindex_from_headers_first_then_metas() {
        let cases: &[(Option<&str>, &str, Option<&str>)] = &[
            (None, "", None),
            (Some("noindex"), "", Some("X-Robots-Tag")),
            (Some("googlebot: none"), "", Some("X-Robots-Tag: googlebot")),
            (Some("bingbot: noindex"), "", None),
            (None, r#"<meta name="robots" content="noindex, nofollow">"#, Some("meta robots")),
            (None, r#"<meta name="robots" content="NONE">"#, Some("meta robots")),
            (None, r#"<meta name="googlebot" content="noindex">"#, Some("meta googlebot")),
            (
                None,
                r#"<meta name="robots" content="index"><meta name="googlebot" content="noindex">"#,
                Some("meta googlebot"),
            ),
            (None, r#"<meta name="robots" content="nofollow">"#, None),
            (None, r#"<meta name="robots" content="noindexed">"#, None),
            (None, r#"<meta name="bingbot" content="noindex">"#, None),
            (None, r#"<!-- <meta name="robots" content="noindex"> -->"#, None),
            (Some("googlebot: noindex"), r#"<meta name="robots" content="noindex">"#, Some("X-Robots-Tag: googlebot")),
        ];
        for (tag, head, want) in cases {
            let headers: Vec<_> = tag.iter().map(|t| ("x-robots-tag", *t)).collect();
            let f = judged(200, &headers, head, None);
            assert_eq!(f.noindex_by.as_deref(), *want, "{tag:?} {head}");
            assert_eq!(f.problems.contains(Kind::Noindex), want.is_some(), "{tag:?} {head}");
        }
    }

    /// Each case: Link header, the head, the canonical recorded (another URL than LOC) or none.
    #[test]
    fn canonical_only_when_it_names_another_url() {
        let same = None;
        let cases: &[(Option<&str>, &str, Option<&str>)] = &[
            (None, "", same),
            (None, r#"<link rel="canonical" href="https://a.example/dir/page?x=1">"#, same),
            (None, r#"<link rel="canonical" href="page?x=1">"#, same),
            (None, r#"<link rel="canonical" href="/dir/page?x=1#top">"#, same),
            (None, r#"<link rel="canonical" href="HTTPS://A.EXAMPLE:443/dir/page?x=1">"#, same),
            (None, r#"<link rel="canonical" href=" page?x=1 ">"#, same),
            (None, r#"<link rel="canonical" href="">"#, same),
            // RFC 3986 §6.2.2 spellings of LOC itself.
            (None, r#"<link rel="canonical" href="HTTPS://A.EXAMPLE/dir/page?x=1">"#, same),
            (None, r#"<link rel="canonical" href="/dir/%70age?x=%31">"#, same),
            (None, r#"<link rel="canonical" href="/dir/./sub/../page?x=1">"#, same),
            (None, r#"<link rel="canonical" href="/dir/page?x=1#frag">"#, same),
            (Some(r#"<HTTPS://a.example/%64ir/page?x=1>; rel=canonical"#), "", same),
            (
                None,
                r#"<link rel="canonical" href="http://a.example/dir/page?x=1">"#,
                Some("http://a.example/dir/page?x=1"),
            ),
            (
                None,
                r#"<link rel="canonical" href="https://www.a.example/dir/page?x=1">"#,
                Some("https://www.a.example/dir/page?x=1"),
            ),
            (None, r#"<link rel="canonical" href="/dir/page/?x=1">"#, Some("https://a.example/dir/page/?x=1")),
            (None, r#"<link rel="canonical" href="/dir/page">"#, Some("https://a.example/dir/page")),
            (None, r#"<link rel="canonical" href="/dir/page?x=2#top">"#, Some("https://a.example/dir/page?x=2")),
            (None, r#"<link rel="canonical" href="/other">"#, Some("https://a.example/other")),
            (None, r#"<link rel="canonical" href="http://[bad">"#, same),
            (Some(r#"</other>; rel="canonical""#), "", Some("https://a.example/other")),
            (Some(r#"</dir/page?x=1>; rel=canonical"#), r#"<link rel="canonical" href="/other">"#, same),
            (
                Some(r#"</other>; rel="canonical""#),
                r#"<link rel="canonical" href="/dir/page?x=1">"#,
                Some("https://a.example/other"),
            ),
            (
                Some(r#"</de>; rel="alternate""#),
                r#"<link rel="canonical" href="/other">"#,
                Some("https://a.example/other"),
            ),
        ];
        for (link, head, want) in cases {
            let headers: Vec<_> = link.iter().map(|l| ("link", *l)).collect();
            let f = judged(200, &headers, head, None);
            assert_eq!(f.canonical.as_deref(), *want, "{link:?} {head}");
            assert_eq!(kinds(&f), if want.is_some() { vec![Kind::Canonical] } else { vec![] }, "{link:?} {head}");
        }
    }

    /// The issue's spellings of a page's own URL (RFC 3986 §6.2.2) are the page; a really other URL still counts.
    #[test]
    fn a_canonical_spelling_the_page_itself_is_the_page() {
        let loc = Url::parse("http://www.example.com/~user/caf%C3%A9?a=1").unwrap();
        let cases: &[(&str, bool)] = &[
            ("http://www.example.com/%7Euser/caf%C3%A9?a=1", false),
            ("http://www.example.com/%7euser/caf%c3%a9?a=1", false),
            ("HTTP://WWW.EXAMPLE.COM/~user/caf%C3%A9?a=1", false),
            ("/x/../%7Euser/./caf%C3%A9?a=1#top", false),
            ("http://www.example.com:80/~user/caf%C3%A9?%61=1", false),
            ("http://www.example.com/~user/caf%C3%A9?a=2", true),
            ("http://www.example.com/~user/cafe?a=1", true),
            ("http://www.example.com/~User/caf%C3%A9?a=1", true),
            ("https://www.example.com/~user/caf%C3%A9?a=1", true),
        ];
        for (href, elsewhere) in cases {
            let head = format!(r#"<link rel="canonical" href="{href}">"#);
            let f = judge_at(&loc, 200, &HeaderMap::new(), head.as_bytes(), None, SystemTime::UNIX_EPOCH);
            assert_eq!(f.problems.contains(Kind::Canonical), *elsewhere, "{href}");
        }
        let page = Url::parse("http://www.example.com/").unwrap();
        for href in ["HTTP://WWW.EXAMPLE.COM/", "http://www.example.com?", "http://www.example.com/#frag"] {
            let head = format!(r#"<link rel="canonical" href="{href}">"#);
            let f = judge_at(&page, 200, &HeaderMap::new(), head.as_bytes(), None, SystemTime::UNIX_EPOCH);
            assert_eq!(f.problems, Problems::NONE, "{href}");
        }
    }

    /// The head is read only for a 2xx: an error page's metas and links say nothing of the URL.
    #[test]
    fn a_non_2xx_body_is_not_read() {
        let head = r#"<meta name="robots" content="noindex"><link rel="canonical" href="/other">"#;
        for status in [301, 404, 410, 403] {
            let f = judged(status, &[], head, None);
            assert_eq!((f.noindex_by, f.canonical), (None, None), "{status}");
        }
    }

    /// Each case: status, what robots.txt says, whether Disallowed is among the problems.
    #[test]
    fn disallowed_by_robots_txt() {
        let cases: &[(u16, Option<bool>, bool)] = &[
            (200, Some(false), true),
            (200, Some(true), false),
            (200, None, false),
            (301, Some(false), true),
            (404, Some(false), true),
            (304, Some(false), false),
            (503, Some(false), false),
            (429, Some(false), false),
        ];
        for (status, robots, want) in cases {
            let f = judged(*status, &[], "", *robots);
            assert_eq!(f.problems.contains(Kind::Disallowed), *want, "{status} {robots:?}");
        }
        let skipped = Finding::disallowed();
        assert_eq!((skipped.status, kinds(&skipped)), (None, vec![Kind::Disallowed]));
        assert!(skipped.is_definite());
    }

    #[test]
    fn validators_and_retry_after_are_copied_from_a_definite_answer() {
        let headers =
            [("etag", "W/\"v2\""), ("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT"), ("retry-after", "120")];
        for status in [200, 304, 301, 404] {
            let f = judged(status, &headers, "", None);
            assert_eq!(f.etag.as_deref(), Some("W/\"v2\""), "{status}");
            assert_eq!(f.last_modified.as_deref(), Some("Sun, 06 Nov 1994 08:49:37 GMT"), "{status}");
            assert_eq!(f.retry_after, Some(Duration::from_secs(120)), "{status}");
        }
        let f = judged(200, &[], "", None);
        assert_eq!((f.etag, f.last_modified, f.retry_after), (None, None, None));
    }

    #[test]
    fn a_304_is_not_judged() {
        let headers = [("x-robots-tag", "noindex"), ("link", "</other>; rel=canonical"), ("location", "/x")];
        let f = judged(304, &headers, r#"<meta name="robots" content="noindex">"#, Some(false));
        assert_eq!(f, Finding { status: Some(304), ..Finding::default() });
    }

    #[test]
    fn several_problems_at_once() {
        let f = judged(200, &[("x-robots-tag", "noindex"), ("link", "</other>; rel=canonical")], "", Some(false));
        assert_eq!(kinds(&f), vec![Kind::Noindex, Kind::Canonical, Kind::Disallowed]);
    }
}
