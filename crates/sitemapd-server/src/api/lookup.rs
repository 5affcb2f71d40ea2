//! `GET /api/v1/urls`: one record by `loc`, or every record the token reaches by keyset paging (`limit`,
//! `after`), the listings of several sites merged in id order; and the answer types.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use super::ApiQuery;
use super::crawlers::RecordRead;
use super::doc::{CommonErrors, ErrorBody};
use super::health::UrlHealth;
use super::hreflang::RecordCluster;
use super::urls::{Changes, Scope, authorize, query_loc, shown};
use crate::AppState;
use crate::access::Access;
use crate::domain::{Extensions, Priority, Section, SectionNames, ext};
use crate::error::ApiError;
use crate::page::{number_of, section_of};
use crate::store::{ProblemFilter, SiteUrl, UrlCheck};

const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 1000;

/// Look up one URL record (`loc`), or list them all by keyset paging (`limit`, `after`).
///
/// With `loc`, the answer is the record (`UrlRecord`). Without it, a page of records in storage order and the
/// cursor of the next page (`UrlList`): each record appears once even while writes go on.
#[utoipa::path(
    get,
    path = "/api/v1/urls",
    tag = "urls",
    operation_id = "get_urls",
    params(UrlsQuery),
    responses(
        (status = 200, description = "The record, or a page of records", body = UrlsAnswer),
        (status = 400, description = "A bad, repeated or unknown query parameter", body = ErrorBody),
        (status = 404, description = "No such URL is stored", body = ErrorBody),
        (status = 422, description = "The loc could never be stored (`details`)", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn get_urls(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    ApiQuery(query): ApiQuery<UrlsQuery>,
) -> Result<Response, ApiError> {
    if let Some(raw) = &query.loc {
        let loc = query_loc(raw, &Scope { sites: &state.sites, access: &access })?;
        if query.limit.is_some()
            || query.after.is_some()
            || query.site.is_some()
            || query.section.is_some()
            || query.problem.is_some()
        {
            return Err(ApiError::bad_request("loc cannot be combined with limit, after, site, section or problem"));
        }
        // One rule for every route: a loc belongs to the site it lies under now (a record still stored under
        // another site, after the sites' URLs changed, moves there when it is next written).
        authorize(&state, &access, [&loc], Changes::Read)?;
        let found = state.reads().find(&loc).await?.ok_or_else(|| ApiError::not_found("no such URL is stored"))?;
        let names = state.section_names(found.site, [section_of(found.url.page_id)].into_iter()).await?;
        let crawlers = super::crawlers::record_reads(&state, found.site, found.url.id, found.url.page_id).await?;
        let health = Some(super::health::record_health(&state, found.site, &found.url.loc).await?);
        let rendered = found.url.fields.ext.as_ref().map(|e| e.alternates.clone()).unwrap_or_default();
        let hreflang = Some(super::hreflang::record_cluster(&state, found.site, &found.url.loc, rendered).await?);
        let record = UrlRecord { crawlers, health, hreflang, ..UrlRecord::new(&state, found, &names) };
        return Ok(Json(record).into_response());
    }
    let section = query.section.as_deref().map(SectionFilter::parse).transpose()?;
    let problem = query.problem.as_deref().map(super::health::parse_problem).transpose()?;
    if problem.is_some() && section.is_some() {
        return Err(ApiError::bad_request("problem cannot be combined with section"));
    }
    let mut sites = list_sites(&state, &access, query.site.as_deref())?;
    if let (Some(_), Listed::One(None)) = (&section, &sites) {
        // A section is a site's: each site's records of the sections so named, merged.
        sites = Listed::Several(state.sites.iter().map(|s| s.id).collect());
    }
    let limit = match query.limit.as_deref() {
        None => DEFAULT_LIMIT,
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| ApiError::bad_request(format!("limit must be a whole number from 1 to {MAX_LIMIT}")))?,
    };
    let after = match query.after.as_deref() {
        None => 0,
        Some(raw) => raw
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| ApiError::bad_request("after must be a cursor returned as next by this API"))?,
    };
    if let Some(filter) = problem {
        return list_problems(&state, sites, filter, after, limit).await;
    }
    let list = async |site: Option<i64>| -> Result<Vec<SiteUrl>, ApiError> {
        let (Some(site), Some(section)) = (site, &section) else {
            return Ok(state.reads().list_after(site, after, limit).await?);
        };
        let id = match section {
            SectionFilter::Default => 0,
            SectionFilter::Named(name) => {
                let names = state.section_names(site, std::iter::empty()).await?;
                match names.id(name.as_str()) {
                    Some(id) => id,
                    // Named by no write to this site yet: none of its records.
                    None => return Ok(Vec::new()),
                }
            }
        };
        Ok(state.reads().list_section_after(site, id, after, limit).await?)
    };
    let (items, more) = match sites {
        Listed::One(site) => {
            let items = list(site).await?;
            let more = may_continue(items.len(), items.iter().map(Keyed::size).sum(), limit);
            (items, more)
        }
        Listed::Several(ids) => {
            // Each site's next records after the cursor, merged in id order: the same order and cursor as a listing
            // of every site, so paging works alike whatever the token reaches.
            let mut listings = Vec::with_capacity(ids.len());
            for site in ids {
                listings.push(list(Some(site)).await?);
            }
            merge_listings(listings, limit)
        }
    };
    let next = more.then(|| items.last().map(|u| u.url.id.to_string())).flatten();
    let mut records = Vec::with_capacity(items.len());
    for u in items {
        let names = state.section_names(u.site, [section_of(u.url.page_id)].into_iter()).await?;
        records.push(UrlRecord::new(&state, u, &names));
    }
    Ok(Json(UrlList { items: records, next }).into_response())
}

/// The records of `sites` whose health matches `filter`, each with its `health`, by the same keyset as every
/// listing (record ids). Only checked sites are read: a site that is not checked lists nothing.
async fn list_problems(
    state: &AppState,
    sites: Listed,
    filter: ProblemFilter,
    after: i64,
    limit: u32,
) -> Result<Response, ApiError> {
    let ids: Vec<i64> = match sites {
        Listed::One(Some(id)) => vec![id],
        Listed::One(None) => state.sites.iter().map(|s| s.id).collect(),
        Listed::Several(ids) => ids,
    };
    let mut listings = Vec::with_capacity(ids.len());
    for site in ids.into_iter().filter(|id| super::health::is_checked(state, *id)) {
        listings.push(state.health_queue().health_problems(Some(site), filter, after, limit).await?);
    }
    let (items, more) = merge_listings(listings, limit);
    let next = more.then(|| items.last().map(|(u, _)| u.url.id.to_string())).flatten();
    let now_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64);
    let mut records = Vec::with_capacity(items.len());
    for (u, check) in items {
        let names = state.section_names(u.site, [section_of(u.url.page_id)].into_iter()).await?;
        let health = Some(Some(UrlHealth::new(&check, now_us)));
        records.push(UrlRecord { health, ..UrlRecord::new(state, u, &names) });
    }
    Ok(Json(UrlList { items: records, next }).into_response())
}

/// The `section` a listing is filtered by: a section's name, or `default` for the default section.
enum SectionFilter {
    Default,
    Named(Section),
}

impl SectionFilter {
    fn parse(raw: &str) -> Result<Self, ApiError> {
        if raw == "default" {
            return Ok(Self::Default);
        }
        Section::parse(raw)
            .map(Self::Named)
            .map_err(|e| ApiError::bad_request(format!("section: {e}; or default, for entries without a section")))
    }
}

/// Which sites a listing is of.
#[derive(Debug, PartialEq, Eq)]
enum Listed {
    /// One site, or every site (`None`): one keyset read.
    One(Option<i64>),
    /// Several sites, not all: each read, then merged ([`merge_listings`]).
    Several(Vec<i64>),
}

/// Which sites a listing is of: the one named, which the token must reach; else every site the token reaches.
fn list_sites(state: &AppState, access: &Access, name: Option<&str>) -> Result<Listed, ApiError> {
    let Some(name) = name else {
        return match access {
            Access::All => Ok(Listed::One(None)),
            // Never every site for a scoped token, even for names no site has.
            Access::Sites(names) => {
                let mut ids: Vec<i64> = names.iter().filter_map(|n| state.sites.by_name(n)).map(|s| s.id).collect();
                ids.sort_unstable();
                ids.dedup();
                match ids.as_slice() {
                    [] => Err(ApiError::forbidden("this token reaches no configured site")),
                    [one] => Ok(Listed::One(Some(*one))),
                    _ => Ok(Listed::Several(ids)),
                }
            }
        };
    };
    let site = state.sites.by_name(name).ok_or_else(|| {
        ApiError::bad_request(format!("site must name a configured site: {}", reachable(state, access)))
    })?;
    if !access.may(&site.name) {
        return Err(ApiError::forbidden(format!("this token may not reach the site {name}")));
    }
    Ok(Listed::One(Some(site.id)))
}

/// Whether records may follow a store listing's last one: it ended at `limit`, or was cut by size (past
/// [`crate::store::LIST_MAX_BYTES`]).
fn may_continue(len: usize, bytes: i64, limit: u32) -> bool {
    len >= limit as usize || bytes > crate::store::LIST_MAX_BYTES
}

/// A record's id and rendered size, what paging goes by.
trait Keyed {
    fn id(&self) -> i64;
    fn size(&self) -> i64;
}

impl Keyed for (SiteUrl, UrlCheck) {
    fn id(&self) -> i64 {
        self.0.url.id
    }
    fn size(&self) -> i64 {
        self.0.url.size
    }
}

impl Keyed for SiteUrl {
    fn id(&self) -> i64 {
        self.url.id
    }
    fn size(&self) -> i64 {
        self.url.size
    }
}

/// Merges listings of different sites (each in id order after the same cursor) into one listing in id order, and
/// whether more may follow. A listing that may have more is known only up to its last id, so the merge stops at
/// the lowest such id; then at `limit` records, and after the record whose size passes
/// [`crate::store::LIST_MAX_BYTES`], as a store listing is cut.
fn merge_listings<T: Keyed>(listings: Vec<Vec<T>>, limit: u32) -> (Vec<T>, bool) {
    let horizon = listings
        .iter()
        .filter(|l| may_continue(l.len(), l.iter().map(Keyed::size).sum(), limit))
        .filter_map(|l| l.last().map(Keyed::id))
        .min();
    let mut merged: Vec<T> = listings.into_iter().flatten().filter(|u| horizon.is_none_or(|h| u.id() <= h)).collect();
    merged.sort_unstable_by_key(Keyed::id);
    merged.truncate(limit as usize);
    let mut bytes = 0;
    if let Some(cut) = merged.iter().position(|u| {
        bytes += u.size();
        bytes > crate::store::LIST_MAX_BYTES
    }) {
        merged.truncate(cut + 1);
    }
    let more = horizon.is_some() || may_continue(merged.len(), merged.iter().map(Keyed::size).sum(), limit);
    (merged, more)
}

/// The sites `access` reaches, as error messages list them: `www (https://www.example.com/), …`. Only those: a
/// token scoped to one site learns nothing of the others.
fn reachable(state: &AppState, access: &Access) -> String {
    shown(&state.sites.iter().filter(|s| access.may(&s.name)).collect::<Vec<_>>())
}

/// `GET /api/v1/urls`: one record, or a page of them.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // names the two answers for the OpenAPI document; never built
pub(crate) enum UrlsAnswer {
    Record(UrlRecord),
    List(UrlList),
}

/// A stored URL record, normalized, with the page that holds it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct UrlRecord {
    #[schema(example = "https://www.example.com/about")]
    loc: String,
    /// As rendered: a date, or a date-time in UTC.
    #[schema(example = "2024-05-01T06:20:00Z")]
    lastmod: Option<String>,
    #[schema(example = "daily")]
    changefreq: Option<String>,
    #[schema(minimum = 0.0, maximum = 1.0)]
    priority: Option<f64>,
    /// Images, as stored (normalized); absent when the entry has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<ext::Image>,
    /// Videos, as stored (normalized); absent when the entry has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    videos: Vec<ext::Video>,
    /// News, as stored (normalized); absent when the entry has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    news: Option<ext::News>,
    /// hreflang alternates as its page renders them, sorted by `hreflang` (under the `complete` policy, its
    /// cluster's set: see `hreflang`); absent when it renders none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    alternates: Vec<ext::Alternate>,
    /// The section whose pages list it; `null`: the default section.
    #[schema(example = "products")]
    section: Option<String>,
    /// The name of the site it belongs to; `null` when that site is no longer configured.
    #[schema(example = "default")]
    site: Option<String>,
    /// The absolute URL of the sitemap page that lists it; `null` when its site is no longer configured.
    #[schema(example = "https://www.example.com/sitemap-1.xml")]
    sitemap: Option<String>,
    /// With feeds on (`feeds.enabled`), the Atom feed of its site, which lists it while it is among the site's
    /// newest changes; absent with feeds off.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "https://www.example.com/feed.atom")]
    feed: Option<String>,
    /// With feeds on, the Atom feed of its section; absent with feeds off and for the default section.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "https://www.example.com/feed-products.atom")]
    section_feed: Option<String>,
    /// Per major crawler (`googlebot`, `bingbot`), when it last read the page that lists the record and whether
    /// after the record's last change. Only in the answer to `loc`, and only with crawler telemetry on.
    #[serde(skip_serializing_if = "Option::is_none")]
    crawlers: Option<BTreeMap<String, RecordRead>>,
    /// URL health: its last check. In the answer to `loc` (`null` when its site is not checked) and in the
    /// problem listing (`?problem=`); absent from other listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<UrlHealth>)]
    health: Option<Option<UrlHealth>>,
    /// Its hreflang cluster: the URLs whose alternates name each other or a common URL, the resolved set, what its
    /// page renders, the cluster's problems. In the answer to `loc` only (`null` when it is in no cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<RecordCluster>)]
    hreflang: Option<Option<RecordCluster>>,
}

impl UrlRecord {
    /// `url` as answered; `names` are its site's sections.
    fn new(state: &AppState, SiteUrl { site, url }: SiteUrl, names: &SectionNames) -> Self {
        let Extensions { images, videos, news, alternates } = url.fields.ext.map(|e| *e).unwrap_or_default();
        let site = state.sites.by_id(site);
        let section = names.name(section_of(url.page_id));
        let number = number_of(url.page_id);
        let feeds = site.filter(|_| state.config.feeds.enabled);
        Self {
            feed: feeds.map(|site| crate::feed::public_url(site, None)),
            section_feed: feeds.zip(section.flatten()).map(|(site, s)| crate::feed::public_url(site, Some(s.as_str()))),
            section: section.flatten().map(|s| s.to_string()),
            site: site.map(|s| s.name.clone()),
            sitemap: site.zip(section).map(|(s, section)| s.public_url.section_page_url(section, number)),
            loc: url.loc,
            lastmod: url.fields.lastmod,
            changefreq: url.fields.changefreq,
            priority: url.fields.priority.map(Priority::value),
            images,
            videos,
            news,
            alternates,
            crawlers: None,
            health: None,
            hreflang: None,
        }
    }
}

/// A page of records in storage order.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct UrlList {
    items: Vec<UrlRecord>,
    /// The `after` of the next page; `null` at the end.
    next: Option<String>,
}

/// The query of `GET /api/v1/urls`. `limit` and `after` are read as text and checked here, so that a bad value
/// gets this API's message rather than a parser's.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct UrlsQuery {
    /// Look up this URL (normalized like a stored loc)
    #[param(example = "https://www.example.com/about")]
    loc: Option<String>,
    /// Records per page (default 100)
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// A cursor returned as `next`
    after: Option<String>,
    /// List this site only (its name). Default: every site the token reaches
    #[param(example = "default")]
    site: Option<String>,
    /// List this section only (its name; `default`: the entries without a section)
    #[param(example = "products")]
    section: Option<String>,
    /// List the records whose URL health check found this: a kind (`not_found`, `gone`, `client_error`,
    /// `redirect`, `noindex`, `canonical`, `disallowed`), `any` definite problem, `transient` (the last attempt
    /// failed without an answer) or `excluded` (left out of its page); each record with its `health`. Only sites
    /// that are checked list any
    #[param(example = "any")]
    problem: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Keyed for (i64, i64) {
        fn id(&self) -> i64 {
            self.0
        }
        fn size(&self) -> i64 {
            self.1
        }
    }

    #[test]
    fn listings_of_several_sites_merge_in_id_order_up_to_what_is_known() {
        let ids = |(merged, more): (Vec<(i64, i64)>, bool)| (merged.iter().map(|u| u.0).collect::<Vec<_>>(), more);
        let l = |ids: &[i64]| ids.iter().map(|id| (*id, 100)).collect::<Vec<_>>();
        // Both listings complete: all of them, in order, and nothing more.
        assert_eq!(ids(merge_listings(vec![l(&[2, 5]), l(&[1, 3, 4])], 10)), (vec![1, 2, 3, 4, 5], false));
        // Exactly `limit` in all, from two complete listings: the last page, as one listing would say, more.
        assert_eq!(ids(merge_listings(vec![l(&[2]), l(&[1])], 2)), (vec![1, 2], true));
        // A full listing is known only up to its last id: the other's later records wait for the next page.
        assert_eq!(ids(merge_listings(vec![l(&[1, 2, 3]), l(&[4, 9])], 3)), (vec![1, 2, 3], true));
        assert_eq!(ids(merge_listings(vec![l(&[1, 5, 6]), l(&[2, 3])], 3)), (vec![1, 2, 3], true));
        assert_eq!(ids(merge_listings(vec![l(&[2, 7, 8]), l(&[1, 3, 4])], 3)), (vec![1, 2, 3], true));
        // Empty listings.
        assert_eq!(ids(merge_listings(vec![l(&[]), l(&[])], 3)), (vec![], false));
        assert_eq!(ids(merge_listings(vec![l(&[]), l(&[4])], 3)), (vec![4], false));
        // Cut by size: a record that passes the byte bound is the last one, and more may follow.
        let big = crate::store::LIST_MAX_BYTES;
        let (merged, more) = merge_listings(vec![vec![(1, big / 2), (4, big / 2)], vec![(2, big / 2), (3, 1)]], 10);
        assert_eq!((merged.iter().map(|u| u.0).collect::<Vec<_>>(), more), (vec![1, 2, 3], true));
        // A store listing cut by size is known only up to its last id.
        let (merged, more) = merge_listings(vec![vec![(1, big + 1)], vec![(2, 1)]], 10);
        assert_eq!((merged.iter().map(|u| u.0).collect::<Vec<_>>(), more), (vec![1], true));
    }
}
