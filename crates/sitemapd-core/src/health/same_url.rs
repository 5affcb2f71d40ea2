//! When two URLs are the same URL for the judge: equal after RFC 3986 §6.2.2's syntax-based normalization.
//!
//! A page's canonical link that names the page itself in another spelling (`%7E` for `~`, `%7e` for `%7E`,
//! `HTTP://WWW.EXAMPLE.COM/`, `/a/./b/../c`, a fragment, an empty query) is the page, not "canonical elsewhere".
//! The `url` crate's parse does part of it (scheme and host case, dot segments, the default port, an empty path as
//! `/` for the special schemes); [`normal`] adds the rest: percent-encodings with upper-case hex digits, those of
//! unreserved characters (`A-Z a-z 0-9 - . _ ~`) decoded, the fragment dropped and an empty query (`?`) as none.
//! Nothing else is equated: another scheme, host, port, path (a trailing slash included) or query is another URL.

use url::Url;

/// `a` and `b` name the same resource under RFC 3986 §6.2.2 (fragments aside).
pub fn same_url(a: &Url, b: &Url) -> bool {
    normal(a) == normal(b)
}

/// `url` in RFC 3986 §6.2.2's normal form, without its fragment.
pub fn normal(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    if url.query() == Some("") {
        url.set_query(None);
    }
    normal_percent_encoding(url.as_str())
}

/// Each `%XX` of `text` with upper-case hex digits, or decoded when it encodes an unreserved character (§6.2.2.1,
/// §6.2.2.2). A `%` not followed by two hex digits is left as it is.
fn normal_percent_encoding(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = match bytes.get(i..i + 3) {
            Some([b'%', hi, lo]) => hex(*hi).zip(hex(*lo)).map(|(hi, lo)| hi << 4 | lo),
            _ => None,
        };
        match decoded {
            Some(byte) if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') => {
                out.push(char::from(byte));
                i += 3;
            }
            Some(_) => {
                out.push('%');
                out.push(char::from(bytes[i + 1].to_ascii_uppercase()));
                out.push(char::from(bytes[i + 2].to_ascii_uppercase()));
                i += 3;
            }
            None => {
                // A URL's serialization is ASCII; copy up to the next `%` at once.
                let next = bytes[i + 1..].iter().position(|&b| b == b'%').map_or(bytes.len(), |p| i + 1 + p);
                out.push_str(&text[i..next]);
                i = next;
            }
        }
    }
    out
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn same(a: &str, b: &str) -> bool {
        same_url(&Url::parse(a).unwrap(), &Url::parse(b).unwrap())
    }

    /// Each pair: two spellings of one URL (the examples first).
    #[test]
    fn spellings_of_one_url_are_the_same_url() {
        let cases = [
            ("http://a.example/%7Euser/", "http://a.example/~user/"),
            ("http://a.example/%7euser/", "http://a.example/%7Euser/"),
            ("http://a.example/x%2fy", "http://a.example/x%2Fy"),
            ("http://a.example/caf%c3%a9", "http://a.example/caf%C3%A9"),
            ("HTTP://WWW.EXAMPLE.COM/", "http://www.example.com/"),
            ("http://a.example/a/./b/../c", "http://a.example/a/c"),
            ("http://a.example/a/%2E/b/%2e%2E/c", "http://a.example/a/c"),
            ("http://a.example/page#frag", "http://a.example/page"),
            ("http://a.example/page?", "http://a.example/page"),
            ("http://a.example/page?#top", "http://a.example/page"),
            ("http://a.example:80/", "http://a.example/"),
            ("https://a.example:443", "https://a.example/"),
            ("http://a.example/p?q=%41%2d%5F", "http://a.example/p?q=A-_"),
            ("http://a.example/p?q=%3d", "http://a.example/p?q=%3D"),
            ("http://a.example/%41%42c", "http://a.example/ABc"),
        ];
        for (a, b) in cases {
            assert!(same(a, b), "{a} = {b}");
            assert!(same(b, a), "{b} = {a}");
        }
    }

    /// Each pair: URLs that differ, however alike.
    #[test]
    fn other_urls_stay_other() {
        let cases = [
            ("http://a.example/page", "https://a.example/page"),
            ("http://a.example/page", "http://www.a.example/page"),
            ("http://a.example/page", "http://a.example:8080/page"),
            ("http://a.example/page", "http://a.example/page/"),
            ("http://a.example/page", "http://a.example/Page"),
            ("http://a.example/page?x=1", "http://a.example/page?x=2"),
            ("http://a.example/page?x=1", "http://a.example/page"),
            ("http://a.example/page?q", "http://a.example/page"),
            ("http://a.example/a%2Fb", "http://a.example/a/b"),
            ("http://a.example/p?q=%3D", "http://a.example/p?q=="),
            ("http://a.example/%25", "http://a.example/%"),
            ("http://a.example/other", "http://a.example/page"),
        ];
        for (a, b) in cases {
            assert!(!same(a, b), "{a} != {b}");
        }
    }

    #[test]
    fn a_bare_percent_is_kept() {
        assert_eq!(normal_percent_encoding("/a%zz%4"), "/a%zz%4");
        assert_eq!(normal_percent_encoding("%7e%7E%7a"), "~~z");
        assert_eq!(normal_percent_encoding("%c3%A9"), "%C3%A9");
    }

    proptest! {
        /// The normal form is a fixed point, and encoding an unreserved character never makes another URL.
        #[test]
        fn normal_is_idempotent_and_ignores_encoded_unreserved(path in "[a-zA-Z0-9._~/-]{0,24}") {
            let Ok(url) = Url::parse(&format!("http://a.example/{path}")) else { return Ok(()) };
            let once = normal(&url);
            let again = normal(&Url::parse(&once).unwrap());
            prop_assert_eq!(&once, &again);
            let encoded: String = path.chars().map(|c| if c.is_ascii_alphanumeric() || "-._~".contains(c) {
                format!("%{:02x}", u32::from(c))
            } else {
                c.to_string()
            }).collect();
            if let Ok(other) = Url::parse(&format!("http://a.example/{encoded}")) {
                // Dot segments: `%2e` is a dot to the url crate too, so both resolve alike.
                prop_assert!(same_url(&url, &other), "{} vs {}", url, other);
            }
        }
    }
}
