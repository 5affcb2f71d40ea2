//! `GET /api/v1/crawlers`: per site the token reaches, what its crawlers did ([`crate::crawlers::report`]): the last
//! verified fetch of the index and of any other sitemap, the last claimed one, the 304 share, the lag from a page's
//! change to a crawler's read of it over the window, and the pages not read since their change. Also the per-page
//! reads a record's lookup shows (`crawlers` of `GET /api/v1/urls?loc=`).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Extension, State};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use super::ApiQuery;
use super::doc::{CommonErrors, ErrorBody};
use super::urls::shown;
use crate::AppState;
use crate::access::Access;
use crate::crawlers::report::{self, CrawlerReport, ReadIndex};
use crate::domain::{LastMod, Site};
use crate::error::ApiError;
use crate::page::PageState;

/// What each site's crawlers did: the last verified fetches, the 304 share, the change-to-read lag and the pages not
/// read since their change.
///
/// Every site the token reaches, or the one `site` names. Only crawlers with a record are listed. With crawler
/// telemetry off (`crawler_telemetry = false`) the answer is still 200: `"telemetry": false` and no sites, so that
/// a dashboard can tell "off" from "nothing fetched".
#[utoipa::path(
    get,
    path = "/api/v1/crawlers",
    tag = "crawlers",
    operation_id = "get_crawlers",
    params(CrawlersQuery),
    responses(
        (status = 200, description = "Each site's crawlers", body = CrawlersAnswer),
        (status = 400, description = "A bad, repeated or unknown query parameter, or no such site", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn get_crawlers(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    ApiQuery(query): ApiQuery<CrawlersQuery>,
) -> Result<Json<CrawlersAnswer>, ApiError> {
    let sites = reachable_sites(&state, &access, query.site.as_deref())?;
    let window_days = crate::config::days_of(state.config.crawlers.window);
    if !state.config.crawlers.telemetry {
        return Ok(Json(CrawlersAnswer { telemetry: false, window_days, sites: Vec::new() }));
    }
    let since_us = report::window_start(now_us(), window_days);
    let mut answered = Vec::with_capacity(sites.len());
    for site in sites {
        // One snapshot: a flush between separate reads paired its lag samples with the fetch counts before it.
        let rows = state.crawl_log().crawler_state(site.id, since_us, report::LAG_SAMPLES).await?;
        let report = report::site_report(&rows.pages, &rows.fetches, &rows.seen, &rows.lags);
        answered.push(SiteCrawlers {
            site: site.name.clone(),
            crawlers: report.crawlers.iter().map(CrawlerSummary::new).collect(),
        });
    }
    Ok(Json(CrawlersAnswer { telemetry: true, window_days, sites: answered }))
}

/// The sites an answer covers: the one named, which the token must reach (else 403; a name no site has: 400); else
/// every site the token reaches, in configuration order (a scoped token that reaches none: 403).
pub(super) fn reachable_sites<'s>(
    state: &'s AppState,
    access: &Access,
    name: Option<&str>,
) -> Result<Vec<&'s Site>, ApiError> {
    let mine: Vec<&Site> = state.sites.iter().filter(|s| access.may(&s.name)).collect();
    let Some(name) = name else {
        if mine.is_empty() {
            return Err(ApiError::forbidden("this token reaches no configured site"));
        }
        return Ok(mine);
    };
    let site = state
        .sites
        .by_name(name)
        .ok_or_else(|| ApiError::bad_request(format!("site must name a configured site: {}", shown(&mine))))?;
    if !access.may(&site.name) {
        return Err(ApiError::forbidden(format!("this token may not reach the site {name}")));
    }
    Ok(vec![site])
}

/// Now, in µs since the Unix epoch.
pub(super) fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// A moment as the API gives it: RFC 3339 in UTC, with the fraction it has (`2026-11-26T01:20:00.25Z`).
pub(super) fn rfc3339(us: i64) -> String {
    LastMod::from_unix_micros(us).as_str().to_owned()
}

/// `GET /api/v1/crawlers`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct CrawlersAnswer {
    /// Whether crawler telemetry is on (`crawlers.telemetry`); off, `sites` is empty.
    telemetry: bool,
    /// The days the lag figures cover (`crawlers.window`).
    #[schema(example = 7)]
    window_days: u32,
    sites: Vec<SiteCrawlers>,
}

/// One site's crawlers.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct SiteCrawlers {
    #[schema(example = "default")]
    site: String,
    /// Each crawler with a record (a fetch of any trust, or a page read), in a fixed order (Googlebot first).
    crawlers: Vec<CrawlerSummary>,
}

/// What one crawler did on one site. "Verified": the client's address is the crawler's (its published ranges, or
/// its reverse DNS name confirmed forward).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct CrawlerSummary {
    /// Its stable name (as in metric labels).
    #[schema(example = "googlebot")]
    crawler: String,
    /// As people name it.
    #[schema(example = "Googlebot")]
    name: String,
    /// The last verified fetch of the index (`sitemap.xml`), RFC 3339; `null`: none.
    #[schema(example = "2026-11-26T01:20:00Z")]
    last_index_fetch: Option<String>,
    /// The last verified fetch of any other sitemap (a page, a section's index, news, removed).
    last_page_fetch: Option<String>,
    /// The last fetch by a client that says it is this crawler from an address that is not the crawler's: a
    /// forger, or a CDN or proxy in front that does not pass the client address (see `trusted_proxies`).
    last_claimed_fetch: Option<String>,
    /// The last fetch nothing could verify or refute: the crawler's operator publishes neither address ranges nor
    /// reverse DNS names (GPTBot, ClaudeBot, …), or `other-bot`.
    last_unverifiable_fetch: Option<String>,
    /// Verified fetches answered.
    fetches: i64,
    /// The share of `fetches` answered 304 Not Modified (0 to 1); `null` without a verified fetch.
    #[schema(example = 0.42)]
    not_modified_share: Option<f64>,
    lag_seconds: LagSeconds,
    /// The listed pages whose current version the crawler has not read; `null` for a crawler that has read no
    /// page (verified), for which every page would count.
    unseen_pages: Option<u64>,
    /// When the page changed longest ago among `unseen_pages` changed, RFC 3339; `null`: none.
    oldest_unseen_change: Option<String>,
}

impl CrawlerSummary {
    fn new(c: &CrawlerReport) -> Self {
        Self {
            crawler: c.crawler.name().to_owned(),
            name: c.crawler.shown().to_owned(),
            last_index_fetch: c.last_index_us.map(rfc3339),
            last_page_fetch: c.last_page_us.map(rfc3339),
            last_claimed_fetch: c.last_claimed_us.map(rfc3339),
            last_unverifiable_fetch: c.last_unverifiable_us.map(rfc3339),
            fetches: c.fetches,
            not_modified_share: c.not_modified_share(),
            lag_seconds: LagSeconds { median: c.lag.median_secs, p90: c.lag.p90_secs, samples: c.lag.samples as u64 },
            unseen_pages: c.unseen.map(|u| u.pages as u64),
            oldest_unseen_change: c.unseen.and_then(|u| u.oldest_change_us).map(rfc3339),
        }
    }
}

/// From a page's change to this crawler's first verified read of the new version, over the pages read in the window
/// (nearest-rank percentiles).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct LagSeconds {
    /// `null` without a sample.
    #[schema(example = 3600.0)]
    median: Option<f64>,
    p90: Option<f64>,
    samples: u64,
}

/// The query of `GET /api/v1/crawlers`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct CrawlersQuery {
    /// This site only (its name). Default: every site the token reaches
    #[param(example = "default")]
    site: Option<String>,
}

/// What a major crawler did with the page that holds a record.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct RecordRead {
    /// The latest verified fetch of the record's page (its XML or text form), RFC 3339; `null`: never.
    #[schema(example = "2026-11-26T01:20:00Z")]
    last_read: Option<String>,
    /// Whether the crawler has read a version of the page that holds the record's last change (its own: a later
    /// change of another record of the same page leaves it `true`). For a record not written since the upgrade
    /// that began keeping its change time, its page's last change stands in.
    read_since_change: bool,
}

/// Per major crawler (by stable name), what it did with record `id` on `page_id` of `site`, read in one snapshot:
/// the record's change time, its page, the page's newest reads and the site's fetch records; `None` when telemetry
/// is off.
pub(crate) async fn record_reads(
    state: &AppState,
    site: i64,
    id: i64,
    page_id: i64,
) -> Result<Option<BTreeMap<String, RecordRead>>, ApiError> {
    if !state.config.crawlers.telemetry {
        return Ok(None);
    }
    let rows = state.crawl_log().crawler_record(site, id, page_id).await?;
    let Some(page) = rows.page else { return Ok(None) };
    Ok(Some(record_reads_of(&page, rows.changed_us, &ReadIndex::new(&rows.seen, &rows.fetches))))
}

fn record_reads_of(page: &PageState, changed_us: Option<i64>, index: &ReadIndex) -> BTreeMap<String, RecordRead> {
    index
        .record(page, changed_us)
        .into_iter()
        .map(|r| {
            let read = RecordRead { last_read: r.last_read_us.map(rfc3339), read_since_change: r.current };
            (r.crawler.name().to_owned(), read)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crawler::Crawler;
    use crate::crawlers::report::{Lag, Unseen};

    #[test]
    fn a_summary_gives_times_in_rfc3339_and_nulls_for_what_is_unknown() {
        let c = CrawlerReport {
            crawler: Crawler::Bingbot,
            last_index_us: Some(1_764_120_000_000_000),
            last_page_us: None,
            last_claimed_us: Some(1_764_120_000_250_000),
            last_unverifiable_us: None,
            fetches: 4,
            not_modified: 3,
            lag: Lag { median_secs: Some(1.5), p90_secs: Some(60.0), samples: 2 },
            unseen: Some(Unseen { pages: 0, oldest_change_us: None }),
        };
        let json = serde_json::to_value(CrawlerSummary::new(&c)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "crawler": "bingbot", "name": "Bingbot",
                "last_index_fetch": "2025-11-26T01:20:00Z", "last_page_fetch": null,
                "last_claimed_fetch": "2025-11-26T01:20:00.25Z", "last_unverifiable_fetch": null,
                "fetches": 4, "not_modified_share": 0.75,
                "lag_seconds": {"median": 1.5, "p90": 60.0, "samples": 2},
                "unseen_pages": 0, "oldest_unseen_change": null,
            })
        );
        let none = CrawlerReport { fetches: 0, not_modified: 0, unseen: None, ..c };
        let json = serde_json::to_value(CrawlerSummary::new(&none)).unwrap();
        assert_eq!(
            (&json["not_modified_share"], &json["unseen_pages"]),
            (&serde_json::Value::Null, &serde_json::Value::Null)
        );
    }
}
