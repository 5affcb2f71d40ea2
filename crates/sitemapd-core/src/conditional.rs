//! Conditional requests (RFC 9110 §13) and content negotiation of gzip, as pure functions of the request headers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, header};

/// What a GET or HEAD with these headers gets, per RFC 9110 §13.2.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Send the representation.
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// Evaluates the preconditions in RFC 9110's order for a representation with this strong `etag` (quoted, as
/// sent) and `last_modified`: `If-Match` (strong comparison), else `If-Unmodified-Since`; then `If-None-Match`
/// (weak comparison), else `If-Modified-Since`. Dates compare at one-second resolution; an invalid date is ignored.
pub fn evaluate(headers: &HeaderMap, etag: &str, last_modified: SystemTime) -> Outcome {
    let last_modified = truncate_to_seconds(last_modified);
    if headers.contains_key(header::IF_MATCH) {
        if !fields(headers, header::IF_MATCH).any(|v| list_matches(v, etag, false)) {
            return Outcome::Failed;
        }
    } else if date(headers, header::IF_UNMODIFIED_SINCE).is_some_and(|since| last_modified > since) {
        return Outcome::Failed;
    }
    if headers.contains_key(header::IF_NONE_MATCH) {
        if fields(headers, header::IF_NONE_MATCH).any(|v| list_matches(v, etag, true)) {
            return Outcome::NotModified;
        }
    } else if date(headers, header::IF_MODIFIED_SINCE).is_some_and(|since| last_modified <= since) {
        return Outcome::NotModified;
    }
    Outcome::Proceed
}

fn fields(headers: &HeaderMap, name: header::HeaderName) -> impl Iterator<Item = &str> {
    headers.get_all(name).into_iter().filter_map(|v| v.to_str().ok())
}

fn date(headers: &HeaderMap, name: header::HeaderName) -> Option<SystemTime> {
    httpdate::parse_http_date(headers.get(name)?.to_str().ok()?).ok()
}

/// Whether an entity-tag list (or `*`) matches `etag`. Weak comparison ignores `W/`; strong comparison never
/// matches a weak tag. A malformed list matches nothing.
fn list_matches(field: &str, etag: &str, weak_comparison: bool) -> bool {
    let ours = opaque(etag);
    let field = field.trim();
    if field == "*" {
        return true;
    }
    let mut rest = field;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return false;
        }
        let weak = rest.starts_with("W/");
        rest = rest.strip_prefix("W/").unwrap_or(rest);
        let Some(body) = rest.strip_prefix('"') else { return false };
        let Some(end) = body.find('"') else { return false };
        if body[..end] == *ours && (weak_comparison || !weak) {
            return true;
        }
        rest = &body[end + 1..];
        if !(rest.is_empty() || rest.starts_with([' ', '\t', ','])) {
            return false;
        }
    }
}

fn opaque(etag: &str) -> &str {
    etag.strip_prefix("W/").unwrap_or(etag).trim_matches('"')
}

fn truncate_to_seconds(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// The content coding of an answer whose content coding is negotiated (RFC 9110 §12.5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    Identity,
    /// Neither gzip nor identity is acceptable: 406 Not Acceptable.
    NotAcceptable,
}

/// Chooses gzip when the client accepts it (`gzip`, `x-gzip` or `*` with a non-zero q-value, unless `gzip` itself
/// is given q=0), else identity, unless identity is excluded too: by `identity;q=0`, or by `*;q=0` with no entry
/// for `identity` (RFC 9110 §12.5.3). Then the answer is 406 rather than an identity body the client said it
/// does not accept: RFC 9110 allows either, and honoring the request is what a client that sends `q=0` asked for.
/// No `Accept-Encoding`, or an empty one, is identity.
pub fn negotiate(headers: &HeaderMap) -> Coding {
    let mut gzip = None;
    let mut identity = None;
    let mut star = None;
    for value in headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()) {
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let max = |seen: Option<f32>| Some(seen.map_or(q, |s| s.max(q)));
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = max(gzip);
            } else if coding.eq_ignore_ascii_case("identity") {
                identity = max(identity);
            } else if coding == "*" {
                star = max(star);
            }
        }
    }
    if gzip.or(star).is_some_and(|q| q > 0.0) {
        Coding::Gzip
    } else if identity.or(star).is_none_or(|q| q > 0.0) {
        Coding::Identity
    } else {
        Coding::NotAcceptable
    }
}

/// Whether the client accepts a gzip content-coding (see [`negotiate`]).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    negotiate(headers) == Coding::Gzip
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use proptest::prelude::*;

    use super::*;

    const ETAG: &str = "\"abc\"";

    fn not_modified(headers: &HeaderMap, etag: &str, last_modified: SystemTime) -> bool {
        evaluate(headers, etag, last_modified) == Outcome::NotModified
    }

    /// One `If-None-Match` field value by weak comparison.
    fn if_none_match_matches(field: &str, etag: &str) -> bool {
        list_matches(field, etag, true)
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn if_none_match_lists_star_and_weak_comparison() {
        assert!(if_none_match_matches("\"abc\"", ETAG));
        assert!(if_none_match_matches("W/\"abc\"", ETAG));
        assert!(if_none_match_matches("\"x\", W/\"abc\"", ETAG));
        assert!(if_none_match_matches("\"x\",\"abc\"", ETAG));
        assert!(if_none_match_matches("*", ETAG));
        assert!(!if_none_match_matches("\"abcd\"", ETAG));
        assert!(!if_none_match_matches("abc", ETAG));
        assert!(!if_none_match_matches("\"x\" junk \"abc\"", ETAG));
        assert!(!if_none_match_matches("", ETAG));
    }

    #[test]
    fn if_none_match_takes_precedence_over_if_modified_since() {
        let lm = at(1_000_000);
        let ims = httpdate::fmt_http_date(at(2_000_000));
        let h = headers(&[(header::IF_NONE_MATCH, "\"other\""), (header::IF_MODIFIED_SINCE, &ims)]);
        assert!(!not_modified(&h, ETAG, lm));
        let h = headers(&[(header::IF_MODIFIED_SINCE, &ims)]);
        assert!(not_modified(&h, ETAG, lm));
    }

    #[test]
    fn if_none_match_in_several_fields() {
        let h = headers(&[(header::IF_NONE_MATCH, "\"x\""), (header::IF_NONE_MATCH, "\"abc\"")]);
        assert!(not_modified(&h, ETAG, at(0)));
    }

    #[test]
    fn if_modified_since_at_one_second_resolution() {
        let lm = at(1_000_000) + Duration::from_millis(700);
        let same = httpdate::fmt_http_date(at(1_000_000));
        assert!(not_modified(&headers(&[(header::IF_MODIFIED_SINCE, &same)]), ETAG, lm));
        let before = httpdate::fmt_http_date(at(999_999));
        assert!(!not_modified(&headers(&[(header::IF_MODIFIED_SINCE, &before)]), ETAG, lm));
        assert!(!not_modified(&headers(&[(header::IF_MODIFIED_SINCE, "yesterday")]), ETAG, lm));
        // The obsolete formats RFC 9110 requires recipients to accept.
        let rfc850 = "Tuesday, 14-Nov-23 22:13:20 GMT";
        assert!(not_modified(&headers(&[(header::IF_MODIFIED_SINCE, rfc850)]), ETAG, at(1_700_000_000)));
        let asctime = "Tue Nov 14 22:13:20 2023";
        assert!(not_modified(&headers(&[(header::IF_MODIFIED_SINCE, asctime)]), ETAG, at(1_700_000_000)));
    }

    #[test]
    fn if_match_and_if_unmodified_since_fail_with_412() {
        let lm = at(1_000_000);
        let eval = |pairs: &[(header::HeaderName, &str)]| evaluate(&headers(pairs), ETAG, lm);
        assert_eq!(eval(&[(header::IF_MATCH, "\"abc\"")]), Outcome::Proceed);
        assert_eq!(eval(&[(header::IF_MATCH, "*")]), Outcome::Proceed);
        assert_eq!(eval(&[(header::IF_MATCH, "\"x\", \"abc\"")]), Outcome::Proceed);
        assert_eq!(eval(&[(header::IF_MATCH, "W/\"abc\"")]), Outcome::Failed, "strong comparison");
        assert_eq!(eval(&[(header::IF_MATCH, "\"x\"")]), Outcome::Failed);
        let before = httpdate::fmt_http_date(at(999_999));
        let after = httpdate::fmt_http_date(at(1_000_000));
        assert_eq!(eval(&[(header::IF_UNMODIFIED_SINCE, &before)]), Outcome::Failed);
        assert_eq!(eval(&[(header::IF_UNMODIFIED_SINCE, &after)]), Outcome::Proceed);
        // If-Match takes precedence over If-Unmodified-Since; both before If-None-Match.
        assert_eq!(eval(&[(header::IF_MATCH, "*"), (header::IF_UNMODIFIED_SINCE, &before)]), Outcome::Proceed);
        assert_eq!(eval(&[(header::IF_MATCH, "\"x\""), (header::IF_NONE_MATCH, "\"abc\"")]), Outcome::Failed);
        assert_eq!(eval(&[(header::IF_MATCH, "\"abc\""), (header::IF_NONE_MATCH, "\"abc\"")]), Outcome::NotModified);
    }

    #[test]
    fn no_validators_means_full_response() {
        assert!(!not_modified(&HeaderMap::new(), ETAG, at(0)));
    }

    #[test]
    fn gzip_negotiation() {
        let yes = ["gzip", "GZIP", "deflate, gzip;q=0.5", "x-gzip", "*", "br;q=1, *;q=0.1", "gzip;q=0, gzip"];
        for v in yes {
            assert!(accepts_gzip(&headers(&[(header::ACCEPT_ENCODING, v)])), "{v}");
        }
        let no = ["", "identity", "gzip;q=0", "br", "*;q=0", "gzip;q=0, *;q=1"];
        for v in no {
            assert!(!accepts_gzip(&headers(&[(header::ACCEPT_ENCODING, v)])), "{v}");
        }
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn identity_excluded_with_no_acceptable_coding_is_not_acceptable() {
        let coding = |v: &str| negotiate(&headers(&[(header::ACCEPT_ENCODING, v)]));
        for v in ["identity;q=0", "*;q=0", "br, identity;q=0", "identity;q=0, gzip;q=0", "*;q=0, gzip;q=0", "*;Q=0.0"] {
            assert_eq!(coding(v), Coding::NotAcceptable, "{v}");
        }
        // A more specific entry for identity overrides `*;q=0`; gzip wins whenever it is acceptable.
        for v in ["*;q=0, identity", "*;q=0, identity;q=0.5", "", "br", "gzip;q=0", "IDENTITY;q=0.1"] {
            assert_eq!(coding(v), Coding::Identity, "{v}");
        }
        for v in ["identity;q=0, gzip", "*;q=0, x-gzip;q=0.2", "identity;q=0, *"] {
            assert_eq!(coding(v), Coding::Gzip, "{v}");
        }
        assert_eq!(negotiate(&HeaderMap::new()), Coding::Identity);
        // Two fields are one list.
        let two = headers(&[(header::ACCEPT_ENCODING, "br"), (header::ACCEPT_ENCODING, "identity;q=0")]);
        assert_eq!(negotiate(&two), Coding::NotAcceptable);
    }

    proptest! {
        #[test]
        fn a_list_containing_our_tag_always_matches(
            tags in prop::collection::vec("[a-z0-9.-]{0,12}", 0..5),
            pos in any::<prop::sample::Index>(),
            weak in any::<bool>(),
        ) {
            let mut list: Vec<String> = tags.iter().map(|t| format!("\"{t}\"")).collect();
            let ours = if weak { format!("W/{ETAG}") } else { ETAG.to_owned() };
            let at = if list.is_empty() { 0 } else { pos.index(list.len() + 1) };
            list.insert(at, ours);
            prop_assert!(if_none_match_matches(&list.join(", "), ETAG));
        }

        #[test]
        fn a_list_without_our_tag_never_matches(tags in prop::collection::vec("[a-z0-9.-]{0,12}", 0..5)) {
            let list: Vec<String> = tags.iter().filter(|t| *t != "abc").map(|t| format!("W/\"{t}\"")).collect();
            prop_assert!(!if_none_match_matches(&list.join(","), ETAG));
        }

        #[test]
        fn if_modified_since_is_monotonic(lm in 0u64..4_000_000_000, ims in 0u64..4_000_000_000) {
            let h = headers(&[(header::IF_MODIFIED_SINCE, &httpdate::fmt_http_date(at(ims)))]);
            prop_assert_eq!(not_modified(&h, ETAG, at(lm)), lm <= ims);
        }
    }

    proptest! {
        #[test]
        fn a_failed_if_match_wins_over_every_other_precondition(
            other in "[a-z0-9]{1,8}",
            inm_ours in any::<bool>(),
            ims in 0u64..4_000_000_000,
            lm in 0u64..4_000_000_000,
        ) {
            prop_assume!(other != "abc");
            let inm = if inm_ours { ETAG.to_owned() } else { format!("\"{other}\"") };
            let h = headers(&[
                (header::IF_MATCH, &format!("\"{other}\"")),
                (header::IF_NONE_MATCH, &inm),
                (header::IF_MODIFIED_SINCE, &httpdate::fmt_http_date(at(ims))),
            ]);
            prop_assert_eq!(evaluate(&h, ETAG, at(lm)), Outcome::Failed);
        }

        #[test]
        fn if_match_compares_strongly(weak in any::<bool>(), lm in 0u64..4_000_000_000) {
            let tag = if weak { format!("W/{ETAG}") } else { ETAG.to_owned() };
            let h = headers(&[(header::IF_MATCH, &tag)]);
            let expected = if weak { Outcome::Failed } else { Outcome::Proceed };
            prop_assert_eq!(evaluate(&h, ETAG, at(lm)), expected);
        }

        #[test]
        fn if_none_match_present_means_if_modified_since_is_ignored(
            other in "[a-z0-9]{1,8}",
            ims in 0u64..4_000_000_000,
            lm in 0u64..4_000_000_000,
        ) {
            prop_assume!(other != "abc");
            let h = headers(&[
                (header::IF_NONE_MATCH, &format!("\"{other}\"")),
                (header::IF_MODIFIED_SINCE, &httpdate::fmt_http_date(at(ims))),
            ]);
            prop_assert_eq!(evaluate(&h, ETAG, at(lm)), Outcome::Proceed);
        }

        #[test]
        fn if_unmodified_since_fails_exactly_when_modified_after_it(lm in 0u64..4_000_000_000, ius in 0u64..4_000_000_000) {
            let h = headers(&[(header::IF_UNMODIFIED_SINCE, &httpdate::fmt_http_date(at(ius)))]);
            let expected = if lm > ius { Outcome::Failed } else { Outcome::Proceed };
            prop_assert_eq!(evaluate(&h, ETAG, at(lm)), expected);
        }

        #[test]
        fn sub_second_modification_times_compare_by_their_second(secs in 0u64..4_000_000_000, micros in 0u32..1_000_000) {
            let lm = at(secs) + Duration::from_micros(u64::from(micros));
            let h = headers(&[(header::IF_MODIFIED_SINCE, &httpdate::fmt_http_date(at(secs)))]);
            prop_assert!(not_modified(&h, ETAG, lm));
        }
    }
}
