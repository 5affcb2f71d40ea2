//! hreflang clusters in the API: `GET /api/v1/hreflang` (a site's policy, its counts and its problems by keyset
//! paging) and a record's cluster in its lookup (`hreflang` of `GET /api/v1/urls?loc=`). The cursor is the last
//! problem's key ([`ProblemKey`]) as URL-safe base64 of its JSON: opaque to clients, checked when it comes back.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Extension, State};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use super::ApiQuery;
use super::crawlers::reachable_sites;
use super::doc::{CommonErrors, ErrorBody};
use crate::AppState;
use crate::access::Access;
use crate::domain::ext::Alternate;
use crate::domain::{Site, ext};
use crate::error::ApiError;
use crate::hreflang::ProblemKind;
use crate::store::{ClusterView, HreflangSummary, ProblemKey, StoredProblem};

/// Problems per answer unless `limit` says otherwise, and the most `limit` may say.
const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 1000;

/// A site's hreflang clusters: its policy, how many clusters and members it has, its problems by kind, and the
/// problems themselves in (href, kind, hreflang) order, by keyset paging (`limit`, `after`).
///
/// `site` may be left out when the token reaches one site only. The problems are kept under both policies: a site
/// under `as_sent` sees what `complete` would resolve before it switches (docs/hreflang.md).
#[utoipa::path(
    get,
    path = "/api/v1/hreflang",
    tag = "hreflang",
    operation_id = "get_hreflang",
    params(HreflangQuery),
    responses(
        (status = 200, description = "The site's clusters and a page of its problems", body = HreflangAnswer),
        (status = 400, description = "A bad, repeated or unknown query parameter, no such site, no site named \
                                      while the token reaches several, a bad limit or cursor", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn get_hreflang(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    ApiQuery(query): ApiQuery<HreflangQuery>,
) -> Result<Json<HreflangAnswer>, ApiError> {
    let site = one_site(&state, &access, query.site.as_deref())?;
    let limit = parse_limit(query.limit.as_deref())?;
    let after = query.after.as_deref().map(decode_cursor).transpose()?;
    let reads = state.hreflang();
    let summary = reads.hreflang_summary(site.id).await?;
    // One more than asked: whether a next page exists is known, so the last page never links to an empty one.
    let mut problems = reads.hreflang_problems(site.id, after.as_ref(), limit + 1).await?;
    let more = problems.len() > limit as usize;
    problems.truncate(limit as usize);
    let next = problems.last().filter(|_| more).map(|p| {
        encode_cursor(&ProblemKey { href: p.href.clone(), kind: p.kind.clone(), hreflang: p.hreflang.clone() })
    });
    Ok(Json(HreflangAnswer {
        site: site.name.clone(),
        policy: state.config.sitemaps.hreflang.policy(&site.name).as_str(),
        summary: Summary::new(&summary),
        problems: problems.into_iter().map(Problem::from).collect(),
        next,
    }))
}

/// The one site an answer is of: the one named (which the token must reach), or the only one the token reaches.
fn one_site<'s>(state: &'s AppState, access: &Access, name: Option<&str>) -> Result<&'s Site, ApiError> {
    let mut sites = reachable_sites(state, access, name)?;
    if sites.len() > 1 {
        let names: Vec<&str> = sites.iter().map(|s| s.name.as_str()).collect();
        return Err(ApiError::bad_request(format!("site is needed: one of {}", names.join(", "))));
    }
    Ok(sites.remove(0))
}

/// `limit`: 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent.
fn parse_limit(raw: Option<&str>) -> Result<u32, ApiError> {
    match raw {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| ApiError::bad_request(format!("limit must be a whole number from 1 to {MAX_LIMIT}"))),
    }
}

/// A problem's key as the `next` cursor: URL-safe base64 (no padding) of its JSON.
pub(crate) fn encode_cursor(key: &ProblemKey) -> String {
    base64url::encode(&serde_json::to_vec(key).expect("a key serializes"))
}

/// `after` back into the key it was made of; anything else is 400.
pub(crate) fn decode_cursor(raw: &str) -> Result<ProblemKey, ApiError> {
    let bad = || ApiError::bad_request("after must be a cursor returned as next by this API");
    let json = base64url::decode(raw).filter(|json| json.first() == Some(&b'{')).ok_or_else(bad)?;
    let key: ProblemKey = serde_json::from_slice(&json).map_err(|_| bad())?;
    if ProblemKind::parse(&key.kind).is_none() {
        return Err(bad());
    }
    Ok(key)
}

/// `GET /api/v1/hreflang`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct HreflangAnswer {
    #[schema(example = "default")]
    site: String,
    /// How the site renders its clusters' alternates (`sitemaps.hreflang`): `as_sent` (each entry's own) or
    /// `complete` (each member lists the whole cluster).
    #[schema(example = "complete")]
    policy: &'static str,
    summary: Summary,
    /// The problems after `after`, at most `limit`, in (href, kind, hreflang) order.
    problems: Vec<Problem>,
    /// The `after` of the next page; `null` at the end.
    next: Option<String>,
}

/// A site's clusters in figures.
#[derive(Serialize, utoipa::ToSchema, Debug, PartialEq)]
pub(crate) struct Summary {
    /// Clusters with a stored member in the site.
    clusters: u64,
    /// The site's stored URLs in a cluster.
    members: u64,
    /// Problems by kind (every kind listed): `duplicate_language`, `conflicting_language`, `invalid_code`,
    /// `not_stored`, `missing_return`, `cross_site`, `too_large`.
    #[schema(example = json!({"duplicate_language": 1, "conflicting_language": 0, "invalid_code": 0,
        "not_stored": 2, "missing_return": 0, "cross_site": 0, "too_large": 0}))]
    problems: BTreeMap<String, u64>,
}

impl Summary {
    fn new(s: &HreflangSummary) -> Self {
        let problems = ProblemKind::ALL
            .iter()
            .map(|k| (k.as_str().to_owned(), s.problems.get(k.as_str()).copied().unwrap_or(0)))
            .collect();
        Self { clusters: s.clusters, members: s.members, problems }
    }
}

/// One problem of a cluster, listed by the site of the member it concerns.
#[derive(Serialize, utoipa::ToSchema, Debug, PartialEq)]
pub(crate) struct Problem {
    /// The URL it is about: the loser of a conflict, the URL claimed with two languages, one not stored, …
    #[schema(example = "https://www.example.com/de/p/42")]
    href: String,
    /// `duplicate_language`, `conflicting_language`, `invalid_code`, `not_stored`, `missing_return`,
    /// `cross_site` or `too_large`.
    #[schema(example = "duplicate_language")]
    kind: String,
    /// The hreflang concerned; empty when none.
    #[schema(example = "de")]
    hreflang: String,
    /// The cluster's key: its smallest URL.
    #[schema(example = "https://www.example.com/de/p/42")]
    cluster: String,
    /// What is wrong, what sitemapd does, what to change.
    message: String,
}

impl From<StoredProblem> for Problem {
    fn from(p: StoredProblem) -> Self {
        Self { href: p.href, kind: p.kind, hreflang: p.hreflang, cluster: p.cluster, message: p.message }
    }
}

/// The query of `GET /api/v1/hreflang`. `limit` and `after` are read as text and checked here, so that a bad value
/// gets this API's message rather than a parser's.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct HreflangQuery {
    /// The site (its name); may be left out when the token reaches one site only
    #[param(example = "default")]
    site: Option<String>,
    /// Problems per page (default 100)
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// A cursor returned as `next`
    after: Option<String>,
}

/// A record's hreflang cluster, in its lookup; `null` when it is in none.
#[derive(Serialize, utoipa::ToSchema, Debug, PartialEq)]
pub(crate) struct RecordCluster {
    /// The cluster's key: its smallest URL.
    #[schema(example = "https://www.example.com/de/p/42")]
    cluster: String,
    /// The policy of the record's site.
    #[schema(example = "complete")]
    policy: &'static str,
    /// The alternates the record was sent with; `null` when it sent none (it is in the cluster because others
    /// name it).
    declared: Option<Vec<ext::Alternate>>,
    /// The alternates its page renders now: under `as_sent` its declaration; under `complete` the set (or none,
    /// when it lost a conflict or has no valid language; its declaration when the set would not fit a page).
    rendered: Vec<ext::Alternate>,
    /// The cluster's resolved set: one URL per language, and the `x-default`.
    set: Vec<ext::Alternate>,
    /// Every URL of the cluster, stored or only named, in URL order.
    members: Vec<ClusterMember>,
    /// The cluster's problems, in whatever site they are listed.
    problems: Vec<Problem>,
}

/// A URL of a cluster.
#[derive(Serialize, utoipa::ToSchema, Debug, PartialEq)]
pub(crate) struct ClusterMember {
    href: String,
    /// Whether sitemapd stores a record of it.
    stored: bool,
    /// The configured site it lies under; `null` for a URL on a host no configured site serves.
    #[schema(example = "default")]
    site: Option<String>,
}

impl RecordCluster {
    /// `view` of the record `loc` of `site`, which renders `rendered`.
    pub(crate) fn new(
        state: &AppState,
        site: Option<&Site>,
        loc: &str,
        rendered: Vec<Alternate>,
        view: ClusterView,
    ) -> Self {
        // A stored member's site is its record's; another's, the site its URL lies under (if any).
        let site_name = |id: Option<i64>, href: &str| {
            id.and_then(|id| state.sites.by_id(id)).or_else(|| state.sites.for_loc(href)).map(|s| s.name.clone())
        };
        let declared = view.members.iter().find(|m| m.href == loc).and_then(|m| m.declared.clone());
        Self {
            cluster: view.key,
            policy: site
                .map_or(crate::hreflang::Policy::default(), |s| state.config.sitemaps.hreflang.policy(&s.name))
                .as_str(),
            declared,
            rendered,
            set: view.set,
            members: view
                .members
                .into_iter()
                .map(|m| ClusterMember { site: site_name(m.site_id, &m.href), href: m.href, stored: m.stored })
                .collect(),
            problems: view.problems.into_iter().map(Problem::from).collect(),
        }
    }
}

/// `loc`'s cluster (any site's), `None` when it is in none: one read of the cluster (O(its size)).
pub(crate) async fn record_cluster(
    state: &AppState,
    site: i64,
    loc: &str,
    rendered: Vec<Alternate>,
) -> Result<Option<RecordCluster>, ApiError> {
    let Some(view) = state.hreflang().hreflang_cluster(loc).await? else { return Ok(None) };
    Ok(Some(RecordCluster::new(state, state.sites.by_id(site), loc, rendered, view)))
}

/// URL-safe base64 without padding (RFC 4648 §5): the cursor's text. A few lines rather than a dependency.
mod base64url {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub(super) fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            }
        }
        out
    }

    /// `None` for a character outside the alphabet, padding, or a length no encoding has.
    pub(super) fn decode(text: &str) -> Option<Vec<u8>> {
        if text.len() % 4 == 1 {
            return None;
        }
        let mut out = Vec::with_capacity(text.len() * 3 / 4);
        for chunk in text.as_bytes().chunks(4) {
            let mut n = 0u32;
            for (i, c) in chunk.iter().enumerate() {
                let v = ALPHABET.iter().position(|a| a == c)? as u32;
                n |= v << (18 - 6 * i);
            }
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            // The bits past the last whole byte must be zero, so that each text has one meaning.
            let kept = chunk.len() - 1;
            if bytes[kept..].iter().any(|b| *b != 0) && kept < 3 {
                return None;
            }
            out.extend_from_slice(&bytes[..kept]);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_round_trips_and_refuses_what_no_encoding_gives() {
        for bytes in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar", &[0xff, 0xfe, 0xfd, 0x00, 0x3e]] {
            let text = base64url::encode(bytes);
            assert!(!text.contains(['+', '/', '=']), "{text}");
            assert_eq!(base64url::decode(&text).as_deref(), Some(bytes), "{text}");
        }
        // RFC 4648's vectors, without padding.
        assert_eq!(base64url::encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url::encode(b"fooba"), "Zm9vYmE");
        assert_eq!(base64url::encode(&[0xfb, 0xff]), "-_8");
        for bad in ["Z", "Zm9vY", "Zm==", "Zm9v+mFy", "Zm/v", "Zm9vYmF$", "Zn", "Zm9"] {
            // "Zn" and "Zm9" carry bits past their last byte: no encoder writes them.
            assert_eq!(base64url::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_cursor_is_a_key_and_nothing_else() {
        let key = ProblemKey {
            href: "https://www.example.com/de?a=1&b=ü".into(),
            kind: "duplicate_language".into(),
            hreflang: "de".into(),
        };
        let cursor = encode_cursor(&key);
        assert!(cursor.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{cursor}");
        assert_eq!(decode_cursor(&cursor).unwrap(), key);
        let json = |v: serde_json::Value| base64url::encode(&serde_json::to_vec(&v).unwrap());
        for bad in [
            "".to_owned(),
            "not a cursor".to_owned(),
            "42".to_owned(),
            json(serde_json::json!({"href": "h", "kind": "duplicate_language"})),
            json(serde_json::json!({"href": "h", "kind": "broken", "hreflang": ""})),
            json(serde_json::json!(["h", "duplicate_language", "de"])),
        ] {
            let e = decode_cursor(&bad).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST, "{bad}");
            assert_eq!(e.message, "after must be a cursor returned as next by this API");
        }
    }

    #[test]
    fn a_limit_is_from_one_to_a_thousand() {
        assert_eq!(parse_limit(None).unwrap(), 100);
        assert_eq!(parse_limit(Some("1")).unwrap(), 1);
        assert_eq!(parse_limit(Some("1000")).unwrap(), 1000);
        for bad in ["0", "1001", "-1", "ten", "", "1.5"] {
            let e = parse_limit(Some(bad)).unwrap_err();
            assert_eq!(e.message, "limit must be a whole number from 1 to 1000", "{bad}");
        }
    }

    #[test]
    fn the_summary_lists_every_kind() {
        let s = HreflangSummary { clusters: 3, members: 7, problems: BTreeMap::from([("not_stored".into(), 2)]) };
        let json = serde_json::to_value(Summary::new(&s)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"clusters": 3, "members": 7, "problems": {
                "duplicate_language": 0, "conflicting_language": 0, "invalid_code": 0, "not_stored": 2,
                "missing_return": 0, "cross_site": 0, "too_large": 0}})
        );
    }
}
