//! URL health in the API: `GET /api/v1/health` (per site the token reaches, what its checks found: counts by kind
//! with the oldest, transient failures, exclusions, the backlog, the brake), `POST /api/v1/health/resume` and
//! `/confirm` (an operator's word to a paused site's brake), a record's `health` in its lookup and in the problem
//! listing (`GET /api/v1/urls?problem=`), and the names that listing is filtered by.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Extension, State};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use super::ApiQuery;
use super::crawlers::{now_us, reachable_sites, rfc3339};
use super::doc::{CommonErrors, ErrorBody};
use crate::AppState;
use crate::access::Access;
use crate::error::ApiError;
use crate::health::{Kind, Policy};
use crate::store::{BrakeMode, BrakeOrder, BrakeState, HealthSummary, ProblemFilter, UrlCheck};

/// What each site's URL health checks found: per kind of problem the URLs and since when the oldest has had it,
/// the transient failures, the URLs left out of their page, and the checks waiting.
///
/// Every site the token reaches, or the one `site` names. A site that is not checked (`health.check`) says
/// `"checked": false`, and its figures are zero: nothing is read for it.
#[utoipa::path(
    get,
    path = "/api/v1/health",
    tag = "health",
    operation_id = "get_health",
    params(HealthQuery),
    responses(
        (status = 200, description = "Each site's URL health", body = HealthAnswer),
        (status = 400, description = "A bad, repeated or unknown query parameter, or no such site", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn get_health(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    ApiQuery(query): ApiQuery<HealthQuery>,
) -> Result<Json<HealthAnswer>, ApiError> {
    let sites = reachable_sites(&state, &access, query.site.as_deref())?;
    let mut answered = Vec::with_capacity(sites.len());
    for site in sites {
        let policy = state.config.health.check.policy(&site.name);
        let summary = match policy {
            Some(_) => state.health_queue().health_summary(site.id).await?,
            None => HealthSummary::default(),
        };
        answered.push(SiteHealth::new(&site.name, policy, &summary));
    }
    Ok(Json(HealthAnswer { cycle_days: crate::config::days_of(state.config.health.cycle), sites: answered }))
}

/// `GET /api/v1/health`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct HealthAnswer {
    /// Every stored URL is checked again within this many days (`health.cycle`).
    #[schema(example = 7)]
    cycle_days: u32,
    sites: Vec<SiteHealth>,
}

/// One site's URL health.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct SiteHealth {
    #[schema(example = "default")]
    site: String,
    /// Whether its URLs are checked (`health.check` names it).
    checked: bool,
    /// `report` (problems are reported, the sitemaps never change for them) or `exclude` (a URL with a definite
    /// problem is left out of its page until it is healthy again); `null` when it is not checked.
    #[schema(example = "report")]
    policy: Option<&'static str>,
    /// URLs queued or checked.
    tracked: u64,
    /// URLs checked at least once.
    checked_urls: u64,
    /// URLs whose last definite check found no problem.
    healthy: u64,
    /// Per kind (`not_found`, `gone`, `client_error`, `redirect`, `noindex`, `canonical`, `disallowed`; every kind
    /// listed): the URLs whose last definite check found it. A URL may have several.
    problems: BTreeMap<String, KindCount>,
    /// URLs whose last attempt failed without an answer (timeout, connection, 5xx, 429): retried, never excluded.
    transient: u64,
    /// URLs left out of their page (policy `exclude`).
    excluded: u64,
    /// Checks due and not yet taken (counted up to 1,000,000).
    backlog: u64,
    /// Whether every record stored before checking began has been queued.
    seeded: bool,
    /// When the newest check ended, RFC 3339; `null`: none yet.
    #[schema(example = "2026-11-26T01:20:00Z")]
    last_check: Option<String>,
    /// The brake (policy `exclude`): whether a burst of one kind of problem paused the site's exclusions.
    brake: Brake,
}

/// A site's brake: `running` (exclusions as found), `paused` (a large share of its latest checked URLs turned bad
/// as one: no URL is excluded, the burst's exclusions were put back; lifted when the share falls, or by `POST
/// /api/v1/health/resume`), `confirmed` (an operator said the burst is real: its URLs are excluded).
#[derive(Serialize, utoipa::ToSchema, Debug, PartialEq)]
pub(crate) struct Brake {
    #[schema(example = "paused")]
    state: &'static str,
    /// Since when, RFC 3339; `null`: it never tripped.
    since: Option<String>,
    /// The burst's evidence (the last one, once running again); `null`: it never tripped.
    evidence: Option<BrakeEvidence>,
}

/// What a burst's URLs share, and how many.
#[derive(Serialize, utoipa::ToSchema, Debug, PartialEq)]
pub(crate) struct BrakeEvidence {
    /// The kind of problem (as `problems`' names).
    #[schema(example = "redirect")]
    kind: &'static str,
    /// A redirect's or canonical's target, without its query.
    #[schema(example = "https://www.example.com/login")]
    target: Option<String>,
    /// URLs of the window that turned bad so.
    #[schema(example = 20)]
    bad: u64,
    /// URLs in the window (the site's latest 20 events).
    #[schema(example = 20)]
    window: u64,
    /// A few of them.
    examples: Vec<String>,
}

impl Brake {
    fn new(b: Option<&BrakeState>) -> Self {
        let Some(b) = b else { return Brake { state: BrakeMode::Running.name(), since: None, evidence: None } };
        Brake {
            state: b.mode.name(),
            since: Some(rfc3339(b.since_us)),
            evidence: b.evidence.as_ref().map(|e| BrakeEvidence {
                kind: e.shape.kind.name(),
                target: e.shape.target.clone(),
                bad: e.bad as u64,
                window: e.window as u64,
                examples: e.examples.clone(),
            }),
        }
    }
}

/// The URLs with one kind of problem.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct KindCount {
    urls: u64,
    /// Since when the URL that has had it longest has had a definite problem, RFC 3339; `null`: none.
    #[schema(example = "2026-11-20T08:00:00Z")]
    oldest: Option<String>,
}

impl SiteHealth {
    fn new(site: &str, policy: Option<Policy>, s: &HealthSummary) -> Self {
        let mut problems: BTreeMap<String, KindCount> =
            Kind::ALL.iter().map(|k| (k.name().to_owned(), KindCount { urls: 0, oldest: None })).collect();
        for (kind, urls, oldest) in &s.kinds {
            problems.insert(kind.name().to_owned(), KindCount { urls: *urls, oldest: oldest.map(rfc3339) });
        }
        Self {
            site: site.to_owned(),
            checked: policy.is_some(),
            policy: policy.map(Policy::name),
            tracked: s.tracked,
            checked_urls: s.checked,
            healthy: s.healthy,
            problems,
            transient: s.transient,
            excluded: s.excluded,
            backlog: s.backlog,
            seeded: s.seeded,
            last_check: s.last_checked_us.map(rfc3339),
            brake: Brake::new(s.brake.as_ref()),
        }
    }
}

/// Lifts the pause of a site's brake: the site excludes again, and the events that tripped it no longer count (a
/// new burst pauses it again). A site that is not paused is left as it is. Needs a token for every site (a token
/// scoped to sites: 403).
#[utoipa::path(
    post,
    path = "/api/v1/health/resume",
    tag = "health",
    operation_id = "resume_health",
    params(BrakeQuery),
    responses(
        (status = 200, description = "The site's brake now", body = Brake),
        (status = 400, description = "No such site, or a site whose URLs are not checked", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn resume_health(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    ApiQuery(query): ApiQuery<BrakeQuery>,
) -> Result<Json<Brake>, ApiError> {
    order(&state, &access, &query.site, BrakeOrder::Resume).await
}

/// Confirms the burst that paused a site's brake as real: its shape is excluded (its URLs are checked again at
/// once), until its share falls; another burst still pauses. A site that is not paused is left as it is. Needs a
/// token for every site (a token scoped to sites: 403).
#[utoipa::path(
    post,
    path = "/api/v1/health/confirm",
    tag = "health",
    operation_id = "confirm_health",
    params(BrakeQuery),
    responses(
        (status = 200, description = "The site's brake now", body = Brake),
        (status = 400, description = "No such site, or a site whose URLs are not checked", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn confirm_health(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    ApiQuery(query): ApiQuery<BrakeQuery>,
) -> Result<Json<Brake>, ApiError> {
    order(&state, &access, &query.site, BrakeOrder::Confirm).await
}

async fn order(state: &AppState, access: &Access, name: &str, order: BrakeOrder) -> Result<Json<Brake>, ApiError> {
    if *access != Access::All {
        return Err(ApiError::forbidden("the brake needs a token for every site (api_tokens without a site)"));
    }
    let site = state.sites.by_name(name).ok_or_else(|| {
        let names: Vec<&str> = state.sites.iter().map(|s| s.name.as_str()).collect();
        ApiError::bad_request(format!("site must name a configured site: {}", names.join(", ")))
    })?;
    if state.config.health.check.policy(&site.name).is_none() {
        return Err(ApiError::bad_request(format!("the URLs of the site {name} are not checked (health_check)")));
    }
    let brake = state.health_brake_order(site.id, order).await?;
    if let Some(b) = brake.as_ref().filter(|b| b.mode != BrakeMode::Paused) {
        tracing::info!(site = %name, order = ?order, brake = b.mode.name(), "URL health: the brake was ordered");
    }
    Ok(Json(Brake::new(brake.as_ref())))
}

/// The query of `POST /api/v1/health/resume` and `/confirm`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct BrakeQuery {
    /// The site (its name)
    #[param(example = "default")]
    site: String,
}

/// The query of `GET /api/v1/health`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct HealthQuery {
    /// This site only (its name). Default: every site the token reaches
    #[param(example = "default")]
    site: Option<String>,
}

/// A record's URL health: its last check. In the answer to `loc` (`null` when its site is not checked) and in the
/// problem listing (`?problem=`).
#[derive(Serialize, utoipa::ToSchema, Debug, PartialEq)]
pub(crate) struct UrlHealth {
    /// When the last check ended (definite or transient), RFC 3339; `null`: queued, not checked yet.
    #[schema(example = "2026-11-26T01:20:00Z")]
    checked: Option<String>,
    /// The last definite answer's status.
    #[schema(example = 404)]
    status: Option<u16>,
    /// The last definite answer's problems, by name; empty: healthy (or not checked yet).
    #[schema(example = json!(["noindex"]))]
    problems: Vec<&'static str>,
    /// A redirect's target, absolute (recorded, never followed).
    location: Option<String>,
    /// The canonical URL the page names, when it is another URL.
    canonical: Option<String>,
    /// Where `noindex` was found: `X-Robots-Tag`, `X-Robots-Tag: googlebot`, `meta robots`, `meta googlebot`.
    noindex_by: Option<String>,
    /// Why the last attempt reached no answer: `timeout`, `connect`, `server_error`, `rate_limited`; `null` when it
    /// did. Retried with backoff; never a reason to exclude.
    #[schema(example = "timeout")]
    transient: Option<String>,
    /// The transient failure's detail (`503`, the connection error), when it has one.
    transient_detail: Option<String>,
    /// Transient failures in a row.
    attempts: u32,
    /// Since when the URL has had a definite problem without a healthy check between, RFC 3339.
    problem_since: Option<String>,
    /// Left out of its page (policy `exclude`).
    excluded: bool,
    /// When it is checked next, RFC 3339 (now, when it is due and waits its turn); `null` when it is not queued
    /// yet (the walk of the records stored before checking began has not reached it).
    next_check: Option<String>,
}

impl UrlHealth {
    pub(crate) fn new(c: &UrlCheck, now_us: i64) -> Self {
        let (transient, transient_detail) = match c.transient.as_deref().map(split_transient) {
            Some((name, detail)) => (Some(name.to_owned()), detail.map(str::to_owned)),
            None => (None, None),
        };
        Self {
            checked: c.checked_us.map(rfc3339),
            status: c.status,
            problems: c.problems.iter().map(Kind::name).collect(),
            location: c.location.clone(),
            canonical: c.canonical.clone(),
            noindex_by: c.noindex_by.clone(),
            transient,
            transient_detail,
            attempts: c.attempts,
            problem_since: c.problem_since_us.map(rfc3339),
            excluded: c.excluded,
            next_check: Some(rfc3339(c.due_us.max(now_us))),
        }
    }

    /// A record of a checked site that has no check row yet.
    fn untracked() -> Self {
        Self {
            checked: None,
            status: None,
            problems: Vec::new(),
            location: None,
            canonical: None,
            noindex_by: None,
            transient: None,
            transient_detail: None,
            attempts: 0,
            problem_since: None,
            excluded: false,
            next_check: None,
        }
    }
}

/// A stored transient failure (`timeout`, `server_error 503`, `connect: dns error`) as its name and its detail.
fn split_transient(stored: &str) -> (&str, Option<&str>) {
    match stored.find([' ', ':']) {
        None => (stored, None),
        Some(at) => {
            let detail = stored[at..].trim_start_matches([' ', ':']).trim();
            (&stored[..at], (!detail.is_empty()).then_some(detail))
        }
    }
}

/// `loc`'s health in `site`: `None` when the site is not checked (the lookup's `"health": null`).
pub(crate) async fn record_health(state: &AppState, site: i64, loc: &str) -> Result<Option<UrlHealth>, ApiError> {
    let Some(site) = state.sites.by_id(site) else { return Ok(None) };
    if state.config.health.check.policy(&site.name).is_none() {
        return Ok(None);
    }
    Ok(Some(match state.health_queue().health_of(site.id, loc).await? {
        Some(check) => UrlHealth::new(&check, now_us()),
        None => UrlHealth::untracked(),
    }))
}

/// The names `?problem=` takes: each kind's, then `any`, `transient`, `excluded`.
pub(crate) fn problem_names() -> Vec<&'static str> {
    Kind::ALL.iter().map(|k| k.name()).chain(["any", "transient", "excluded"]).collect()
}

/// `?problem=NAME` as the store's filter; an unknown name is 400 with the names it takes.
pub(crate) fn parse_problem(raw: &str) -> Result<ProblemFilter, ApiError> {
    match raw {
        "any" => Ok(ProblemFilter::Any),
        "transient" => Ok(ProblemFilter::Transient),
        "excluded" => Ok(ProblemFilter::Excluded),
        name => Kind::parse(name).map(ProblemFilter::Kind).ok_or_else(|| {
            ApiError::bad_request(format!("problem must be one of: {}", problem_names().join(", ")))
                .with("names", problem_names())
        }),
    }
}

/// Whether `site` (by id) is checked.
pub(crate) fn is_checked(state: &AppState, site: i64) -> bool {
    state.sites.by_id(site).is_some_and(|s| state.config.health.check.policy(&s.name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::Problems;

    #[test]
    fn a_transient_failure_is_its_name_and_its_detail() {
        assert_eq!(split_transient("timeout"), ("timeout", None));
        assert_eq!(split_transient("server_error 503"), ("server_error", Some("503")));
        assert_eq!(split_transient("connect: dns error: no such host"), ("connect", Some("dns error: no such host")));
        assert_eq!(split_transient("rate_limited "), ("rate_limited", None));
    }

    #[test]
    fn every_problem_name_parses_and_an_unknown_one_lists_them() {
        for name in problem_names() {
            assert!(parse_problem(name).is_ok(), "{name}");
        }
        assert_eq!(parse_problem("noindex").unwrap(), ProblemFilter::Kind(Kind::Noindex));
        let e = parse_problem("broken").unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(e.message.contains("not_found, gone, client_error, redirect, noindex, canonical, disallowed, any"));
    }

    #[test]
    fn a_check_is_answered_with_names_and_times() {
        let check = UrlCheck {
            loc: "https://www.example.com/a".into(),
            checked_us: Some(1_764_120_000_000_000),
            status: Some(301),
            problems: [Kind::Redirect, Kind::Disallowed].into_iter().collect::<Problems>(),
            location: Some("https://www.example.com/b".into()),
            problem_since_us: Some(1_764_000_000_000_000),
            transient: Some("server_error 503".into()),
            attempts: 2,
            excluded: true,
            due_us: 0,
            ..UrlCheck::default()
        };
        let json = serde_json::to_value(UrlHealth::new(&check, 1_764_120_000_250_000)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "checked": "2025-11-26T01:20:00Z", "status": 301, "problems": ["redirect", "disallowed"],
                "location": "https://www.example.com/b", "canonical": null, "noindex_by": null,
                "transient": "server_error", "transient_detail": "503", "attempts": 2,
                "problem_since": "2025-11-24T16:00:00Z", "excluded": true,
                // Due: now.
                "next_check": "2025-11-26T01:20:00.25Z",
            })
        );
    }
}
