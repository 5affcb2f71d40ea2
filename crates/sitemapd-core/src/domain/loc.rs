//! `loc` values and the public URL they must lie under (the sitemaps.org location rule).

use std::borrow::Cow;
use std::fmt;

use url::Url;

use super::site::LocScope;

/// A normalized `loc` must be shorter than this many characters (sitemaps.org: "less than 2,048 characters").
pub const MAX_LOC_LEN: usize = 2048;

/// The URLs an entry's extensions point to (an image, a video's thumbnail, player and content, an alternate) may
/// be at most this many characters once normalized: the `maxLength` of the sitemap schemas' URL types. Google's
/// extensions set no length of their own, so the one limit a crawler's parser is known to hold applies, as
/// "at most" (not the `loc` rule's "less than").
pub const MAX_URL_LEN: usize = 2048;

/// Where crawlers reach the sitemaps: an origin plus an optional path prefix, always kept with a trailing slash, so
/// that "under" is a byte-for-byte prefix test at a path-segment boundary (`/shopping` is not under `/shop/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicUrl {
    base: String,
}

impl PublicUrl {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut url = Url::parse(raw.trim()).map_err(|e| format!("not an absolute URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("must use http or https".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not contain user information".into());
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("must not have a query or fragment".into());
        }
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        Ok(Self { base: rfc3986(url.as_str()).into_owned() })
    }

    /// The public URL with its trailing slash, e.g. `https://www.example.com/shop/`.
    pub fn as_str(&self) -> &str {
        &self.base
    }

    /// True when `loc` lies under this URL: same scheme, host and port, and a path under the prefix.
    pub fn contains(&self, loc: &str) -> bool {
        loc.starts_with(&self.base)
    }

    pub fn index_url(&self) -> String {
        format!("{}sitemap.xml", self.base)
    }

    pub fn news_url(&self) -> String {
        format!("{}sitemap-news.xml", self.base)
    }

    pub fn page_url(&self, page: i64) -> String {
        format!("{}sitemap-{page}.xml", self.base)
    }

    /// Page `number` of `section` (`None`: the default section, whose pages are [`PublicUrl::page_url`]).
    pub fn section_page_url(&self, section: Option<&super::Section>, number: i64) -> String {
        match section {
            None => self.page_url(number),
            Some(section) => format!("{}sitemap-{section}-{number}.xml", self.base),
        }
    }

    /// `section`'s own index, listing its pages alone.
    pub fn section_index_url(&self, section: &super::Section) -> String {
        format!("{}sitemap-{section}.xml", self.base)
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base)
    }
}

/// A URL that may be listed in a sitemap: absolute http(s), WHATWG-normalized by the `url` crate, without user
/// information or fragment, shorter than [`MAX_LOC_LEN`], and under the public URL (of a configured site).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc(String);

impl Loc {
    pub fn parse(raw: &str, scope: &(impl LocScope + ?Sized)) -> Result<Self, String> {
        let normalized = normalized_url(raw)?;
        if normalized.len() >= MAX_LOC_LEN {
            return Err(format!(
                "normalized URL is {} characters long; it must be shorter than {MAX_LOC_LEN}",
                normalized.len()
            ));
        }
        scope.admits(&normalized)?;
        Ok(Self(normalized))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A URL in the normalized form of a [`Loc`] (absolute http(s), WHATWG-normalized, RFC 3986 characters only, no user
/// information or fragment), at most [`MAX_URL_LEN`] characters, on any host: the form of the URLs an entry's
/// extensions point to (images on a CDN, alternates on another domain).
pub fn absolute_url(raw: &str) -> Result<String, String> {
    let normalized = normalized_url(raw)?;
    if normalized.len() > MAX_URL_LEN {
        return Err(format!(
            "normalized URL is {} characters long; at most {MAX_URL_LEN} are allowed",
            normalized.len()
        ));
    }
    Ok(normalized)
}

/// `raw` in the normalized form of a [`Loc`], of any length.
fn normalized_url(raw: &str) -> Result<String, String> {
    let url = Url::parse(raw).map_err(|e| format!("not an absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme must be http or https, not {:?}", url.scheme()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not contain user information".into());
    }
    if url.fragment().is_some() {
        return Err("must not contain a fragment (#...)".into());
    }
    Ok(rfc3986(url.as_str()).into_owned())
}

/// Percent-encodes what WHATWG normalization leaves in a path or query but RFC 3986 (which sitemaps.org asks for)
/// forbids there: `| ^ [ ] { } \` and the backtick, and a `%` that does not start a percent-encoded octet. The
/// scheme and authority (where `[` `]` delimit an IPv6 address) are kept as they are. Idempotent; borrows when
/// nothing is to change, as for almost every URL.
pub fn rfc3986(url: &str) -> Cow<'_, str> {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let Some(path) = url[authority..].find('/').map(|i| authority + i) else {
        return Cow::Borrowed(url);
    };
    let rest = &url.as_bytes()[path..];
    let stray_percent = |i: usize| {
        rest[i] == b'%' && !(i + 2 < rest.len() && rest[i + 1].is_ascii_hexdigit() && rest[i + 2].is_ascii_hexdigit())
    };
    let needs =
        |i: usize| matches!(rest[i], b'|' | b'^' | b'[' | b']' | b'{' | b'}' | b'\\' | b'`') || stray_percent(i);
    if !(0..rest.len()).any(needs) {
        return Cow::Borrowed(url);
    }
    let mut out = String::with_capacity(url.len() + 8);
    let mut copied = 0;
    // Only ASCII bytes are replaced, so every cut is at a character boundary.
    for i in (0..rest.len()).filter(|&i| needs(i)) {
        out.push_str(&url[copied..path + i]);
        out.push_str(&format!("%{:02X}", rest[i]));
        copied = path + i + 1;
    }
    out.push_str(&url[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public() -> PublicUrl {
        PublicUrl::parse("https://www.example.com").unwrap()
    }

    #[test]
    fn normalizes_scheme_host_port_and_non_ascii() {
        let loc = Loc::parse("HTTPS://WWW.Example.COM:443/caf\u{e9}?q=\u{fc}", &public()).unwrap();
        assert_eq!(loc.as_str(), "https://www.example.com/caf%C3%A9?q=%C3%BC");
    }

    #[test]
    fn characters_rfc_3986_forbids_are_percent_encoded_in_path_and_query() {
        let loc = Loc::parse("https://www.example.com/a|b^c[d]{e}`f?q=[1]|\\x^{y}`", &public()).unwrap();
        assert_eq!(loc.as_str(), "https://www.example.com/a%7Cb%5Ec%5Bd%5D%7Be%7D%60f?q=%5B1%5D%7C%5Cx%5E%7By%7D%60");
        // A `%` that starts no octet is itself encoded; a valid octet is kept as it is.
        let loc = Loc::parse("https://www.example.com/100%/a%zz%4?p=%2F%", &public()).unwrap();
        assert_eq!(loc.as_str(), "https://www.example.com/100%25/a%25zz%254?p=%2F%25");
        // The authority is left alone: brackets there delimit an IPv6 address.
        assert_eq!(rfc3986("http://[::1]:8080/[x]"), "http://[::1]:8080/%5Bx%5D");
        assert!(matches!(rfc3986("https://www.example.com/plain?q=1"), Cow::Borrowed(_)));
        assert_eq!(rfc3986("https://host-without-path"), "https://host-without-path");
    }

    #[test]
    fn idna_host_is_punycoded() {
        let public = PublicUrl::parse("https://b\u{fc}cher.example").unwrap();
        assert_eq!(public.as_str(), "https://xn--bcher-kva.example/");
        let loc = Loc::parse("https://B\u{dc}CHER.example/a", &public).unwrap();
        assert_eq!(loc.as_str(), "https://xn--bcher-kva.example/a");
    }

    #[test]
    fn rejects_relative_other_schemes_userinfo_fragment() {
        let p = public();
        assert!(Loc::parse("/relative", &p).unwrap_err().contains("absolute"));
        assert!(Loc::parse("ftp://www.example.com/a", &p).unwrap_err().contains("scheme"));
        assert!(Loc::parse("https://u:p@www.example.com/a", &p).unwrap_err().contains("user"));
        assert!(Loc::parse("https://www.example.com/a#top", &p).unwrap_err().contains("fragment"));
        assert!(Loc::parse("https://www.example.com/a#", &p).unwrap_err().contains("fragment"));
    }

    #[test]
    fn length_limit_applies_to_normalized_form() {
        let p = public();
        let base = "https://www.example.com/";
        let ok = format!("{base}{}", "a".repeat(MAX_LOC_LEN - 1 - base.len()));
        assert_eq!(Loc::parse(&ok, &p).unwrap().as_str().len(), MAX_LOC_LEN - 1);
        let too_long = format!("{base}{}", "a".repeat(MAX_LOC_LEN - base.len()));
        assert!(Loc::parse(&too_long, &p).unwrap_err().contains("shorter than 2048"));
        // One non-ASCII character becomes six bytes of percent-encoding.
        let grows = format!("{base}{}\u{e9}", "a".repeat(MAX_LOC_LEN - 6 - base.len()));
        assert!(Loc::parse(&grows, &p).is_err());
    }

    #[test]
    fn must_lie_under_public_url_at_a_segment_boundary() {
        let shop = PublicUrl::parse("https://www.example.com/shop").unwrap();
        assert_eq!(shop.as_str(), "https://www.example.com/shop/");
        assert!(Loc::parse("https://www.example.com/shop/a", &shop).is_ok());
        assert!(Loc::parse("https://www.example.com/shop/", &shop).is_ok());
        assert!(Loc::parse("https://www.example.com/shopping", &shop).is_err());
        assert!(Loc::parse("https://www.example.com/shop", &shop).is_err());
        assert!(Loc::parse("http://www.example.com/shop/a", &shop).is_err());
        assert!(Loc::parse("https://example.com/shop/a", &shop).is_err());
        assert!(Loc::parse("https://www.example.com:8443/shop/a", &shop).is_err());
        assert!(Loc::parse("https://www.example.com.evil.test/shop/a", &shop).is_err());
    }

    #[test]
    fn explicit_non_default_port_must_match() {
        let p = PublicUrl::parse("http://localhost:8080").unwrap();
        assert!(Loc::parse("http://localhost:8080/a", &p).is_ok());
        assert!(Loc::parse("http://localhost/a", &p).is_err());
        assert!(Loc::parse("http://localhost:80808/a", &p).is_err());
    }

    #[test]
    fn public_url_rejects_query_userinfo_and_other_schemes() {
        assert!(PublicUrl::parse("https://x.test/?a=1").is_err());
        assert!(PublicUrl::parse("https://u@x.test/").is_err());
        assert!(PublicUrl::parse("ftp://x.test/").is_err());
        assert!(PublicUrl::parse("x.test").is_err());
    }

    #[test]
    fn sitemap_urls_sit_at_the_public_root() {
        let p = PublicUrl::parse("https://www.example.com/shop/").unwrap();
        assert_eq!(p.index_url(), "https://www.example.com/shop/sitemap.xml");
        assert_eq!(p.page_url(12), "https://www.example.com/shop/sitemap-12.xml");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Paths with what normalization changes: non-ASCII, spaces, percent signs, dot segments, queries.
        const PATH: &str = "[a-zA-Z0-9 \u{e9}\u{fc}\u{4e2d}%/?&=._~;:@!$'()*+,\\-]{0,120}";

        proptest! {
            #[test]
            fn what_is_accepted_is_normalized_for_good_and_lies_under_the_public_url(
                path in PATH,
                prefix in prop::sample::select(vec!["", "/shop", "/shop/"]),
            ) {
                let public = PublicUrl::parse(&format!("https://www.example.com{prefix}")).unwrap();
                if let Ok(loc) = Loc::parse(&format!("https://www.example.com{prefix}/{path}"), &public) {
                    prop_assert!(public.contains(loc.as_str()), "{} not under {}", loc.as_str(), public);
                    let again = Loc::parse(loc.as_str(), &public).unwrap();
                    prop_assert_eq!(&again, &loc, "idempotent");
                    // Round trip: the stored text is what the URL parser itself writes for it.
                    let reparsed = url::Url::parse(loc.as_str()).unwrap();
                    prop_assert_eq!(reparsed.as_str(), loc.as_str());
                }
            }

            #[test]
            fn under_the_root_every_short_fragment_free_path_is_accepted(path in PATH) {
                let loc = Loc::parse(&format!("https://www.example.com/{path}"), &public());
                prop_assert!(loc.is_ok(), "{path:?}: {loc:?}");
            }

            #[test]
            fn what_is_stored_is_an_rfc_3986_uri_and_stable(path in "[a-zA-Z0-9%/?&=|^\\[\\]{}\\\\`\u{e9}]{0,60}") {
                if let Ok(loc) = Loc::parse(&format!("https://www.example.com/{path}"), &public()) {
                    let s = loc.as_str();
                    prop_assert_eq!(rfc3986(s), s, "encoding again changes nothing");
                    let tail = &s.as_bytes()["https://www.example.com".len()..];
                    for (i, b) in tail.iter().enumerate() {
                        prop_assert!(b.is_ascii_alphanumeric() || b"-._~:/?@!$&'()*+,;=%".contains(b), "{}", s);
                        if *b == b'%' {
                            prop_assert!(tail.len() > i + 2 && tail[i + 1].is_ascii_hexdigit()
                                && tail[i + 2].is_ascii_hexdigit(), "{}", s);
                        }
                    }
                    let again = Loc::parse(s, &public()).unwrap();
                    prop_assert_eq!(again.as_str(), s, "parsing what is stored keeps it");
                }
            }

            #[test]
            fn scheme_host_and_default_port_are_normalized(path in PATH, upper in any::<bool>(), port in any::<bool>()) {
                let origin = match (upper, port) {
                    (true, true) => "HTTPS://WWW.EXAMPLE.COM:443",
                    (true, false) => "HTTPS://WWW.Example.Com",
                    (false, true) => "https://www.example.com:443",
                    (false, false) => "https://www.example.com",
                };
                let plain = Loc::parse(&format!("https://www.example.com/{path}"), &public());
                prop_assert_eq!(Loc::parse(&format!("{origin}/{path}"), &public()), plain);
            }

            #[test]
            fn a_fragment_or_user_information_is_always_refused(path in PATH, fragment in "[a-z]{0,5}") {
                let public = public();
                let with_fragment = format!("https://www.example.com/{path}#{fragment}");
                let with_user = format!("https://u@www.example.com/{path}");
                prop_assert!(Loc::parse(&with_fragment, &public).is_err());
                prop_assert!(Loc::parse(&with_user, &public).is_err());
            }
        }
    }
}
