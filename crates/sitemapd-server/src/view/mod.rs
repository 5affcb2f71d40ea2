//! The HTML view for people: per site, its pages and how full each is, what its crawlers read, what checking its
//! URLs found, its hreflang clusters and its publishing targets; a page's entries (keyset-paged), and a record looked
//! up by loc. Read-only, server-rendered (askama templates in `templates/view/`, HTML-escaped by default), no
//! script, no external asset. An internal route like `/metrics` (`view`, on by default; off: 404).
//!
//! The handlers parse the request, read through [`source::ViewData`] (the only place that knows where the data
//! comes from) and fill a template with what [`model`] makes of it. Every answer carries `X-Robots-Tag: noindex`,
//! `Cache-Control: no-store` and a Content-Security-Policy that allows no script at all. Links are relative, so
//! the view also works under a path prefix.

pub mod model;
pub mod source;

use askama::Template;
use axum::Router;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;

use self::model::{
    CrawlerPanel, CrawlerRow, EntryRow, FeedRow, HealthPanel, HreflangPanel, PageRow, ReadCell, Record, RecordHealth,
    SectionRow, TargetRow, grouped, pages_caption,
};
use self::source::{ViewData, ViewSite};
use crate::AppState;
use crate::crawler::Crawler;
use crate::crawlers::report::{self, ReadIndex};
use crate::domain::{Loc, MAX_LOC_LEN};
use crate::error::RETRY_AFTER_SECS;
use crate::page::{PageState, StoredUrl, section_of};
use crate::store::{LIST_MAX_BYTES, StoreError};

/// Entries on one screen of a page.
pub const ENTRIES_PER_SCREEN: u32 = 200;
/// Rows on one screen of a site's page table.
pub const PAGES_PER_SCREEN: usize = 500;
/// The longest `loc` a lookup reads: longer than any stored loc can be, even before normalization
/// percent-encodes it; past it the answer is 400 without parsing it.
const MAX_LOOKUP_LEN: usize = 4 * MAX_LOC_LEN;

/// No script, no plugin, no frame, no external anything; the page's own inline style, forms to itself.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// The view's routes (which the app registers when `view` is on).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/view", get(|| async { Redirect::to("view/") }))
        .route("/view/", get(sites))
        .route("/view/{site}", get(|Path(site): Path<String>| async move { to_directory(&site) }))
        .route("/view/{site}/", get(site_pages))
        .route("/view/{site}/pages/{page}", get(page_entries))
        .route("/view/{site}/lookup", get(lookup))
        .route(
            "/view/{site}/{*rest}",
            get(|| async { ViewError::new(StatusCode::NOT_FOUND, "No such screen.", "/view/") }),
        )
        .layer(middleware::from_fn(view_headers))
}

/// `/view/{site}` → `{site}/`: the screens' relative links resolve from the site's directory.
fn to_directory(site: &str) -> Redirect {
    let encoded: String = url::form_urlencoded::byte_serialize(site.as_bytes()).collect();
    Redirect::to(&format!("{encoded}/"))
}

/// The headers of every view answer, errors and redirects included.
async fn view_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (HeaderName::from_static("x-robots-tag"), "noindex, nofollow"),
        (header::CACHE_CONTROL, "no-store"),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Where a screen is: the relative links from it to the list of sites (`home`) and to its site's directory.
#[derive(Clone, Copy)]
enum Depth {
    /// `/view/`
    Sites,
    /// `/view/{site}/` and `/view/{site}/lookup`
    Site,
    /// `/view/{site}/pages/{n}`
    Page,
}

impl Depth {
    fn home(self) -> &'static str {
        match self {
            Self::Sites => "./",
            Self::Site => "../",
            Self::Page => "../../",
        }
    }

    fn root(self) -> &'static str {
        match self {
            Self::Sites | Self::Site => "./",
            Self::Page => "../",
        }
    }
}

/// What every screen's frame shows: the way back, and the lookup box of its site.
pub struct Chrome {
    pub home: &'static str,
    pub root: &'static str,
    pub site: Option<String>,
    /// The lookup box's value.
    pub loc: String,
}

impl Chrome {
    fn new(depth: Depth, site: Option<&ViewSite>) -> Self {
        Self { home: depth.home(), root: depth.root(), site: site.map(|s| s.name.clone()), loc: String::new() }
    }
}

/// An answer that is not the screen asked for: its status and why, as a page.
#[derive(Debug)]
pub struct ViewError {
    status: StatusCode,
    message: String,
    home: &'static str,
}

impl ViewError {
    fn new(status: StatusCode, message: impl Into<String>, home: &'static str) -> Self {
        Self { status, message: message.into(), home }
    }

    fn bad_request(message: impl Into<String>, depth: Depth) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message, depth.home())
    }

    fn not_found(message: impl Into<String>, depth: Depth) -> Self {
        Self::new(StatusCode::NOT_FOUND, message, depth.home())
    }

    /// A failed read: 503 when a retry may help (the database is down or busy), else 500. The cause is logged,
    /// never shown.
    fn store(e: StoreError, depth: Depth) -> Self {
        match e {
            StoreError::Unavailable(_) => {
                tracing::warn!(error = %e, "view: store unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The database is unavailable. Retry in a moment.",
                    depth.home(),
                )
            }
            e => {
                tracing::error!(error = %e, "view: store error");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal error (logged).", depth.home())
            }
        }
    }
}

#[derive(Template)]
#[template(path = "view/error.html")]
struct ErrorScreen<'a> {
    chrome: Chrome,
    code: u16,
    reason: &'a str,
    message: &'a str,
}

impl IntoResponse for ViewError {
    fn into_response(self) -> Response {
        let screen = ErrorScreen {
            chrome: Chrome { home: self.home, root: "./", site: None, loc: String::new() },
            code: self.status.as_u16(),
            reason: self.status.canonical_reason().unwrap_or(""),
            message: &self.message,
        };
        let mut response = (self.status, render(&screen)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        response
    }
}

/// A template's HTML; 500 in plain text if it cannot render (a value's `Display` failed: never expected).
fn render(template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "view: a template did not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response()
        }
    }
}

/// The query's parameters by name, the first of each; a name given twice is refused (which would be meant?).
/// Parameters the view does not read are ignored.
fn query_param(raw: Option<&str>, name: &str, depth: Depth) -> Result<Option<String>, ViewError> {
    let mut found = None;
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if key == name {
            if found.is_some() {
                return Err(ViewError::bad_request(format!("{name} is given more than once"), depth));
            }
            found = Some(value.into_owned());
        }
    }
    Ok(found)
}

/// `after`: an id from a next link, a whole number (0: from the start).
fn after_param(raw: Option<&str>, what: &str, depth: Depth) -> Result<i64, ViewError> {
    match query_param(raw, "after", depth)? {
        None => Ok(0),
        Some(value) => parse_id(&value).ok_or_else(|| {
            ViewError::bad_request(format!("after must be {what} (a whole number), as the next link gives it"), depth)
        }),
    }
}

/// A non-negative whole number in plain digits that fits an id.
fn parse_id(value: &str) -> Option<i64> {
    if value.is_empty() || value.len() > 18 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

fn site_or_404(data: &ViewData<'_>, name: &str, depth: Depth) -> Result<ViewSite, ViewError> {
    data.site(name).ok_or_else(|| ViewError::not_found(format!("There is no site named {name:?}."), depth))
}

/// A site in the list of sites.
pub struct SiteLink {
    pub name: String,
    pub public_url: String,
    pub href: String,
}

#[derive(Template)]
#[template(path = "view/sites.html")]
struct SitesScreen {
    chrome: Chrome,
    sites: Vec<SiteLink>,
}

/// `GET /view/`: the sites; with one, straight to it.
async fn sites(State(state): State<AppState>) -> Response {
    let sites = ViewData::new(&state).sites();
    if let [site] = sites.as_slice() {
        return to_directory(&site.name).into_response();
    }
    render(&sites_screen(&sites))
}

fn sites_screen(sites: &[ViewSite]) -> SitesScreen {
    let sites = sites
        .iter()
        .map(|s| SiteLink {
            name: s.name.clone(),
            public_url: s.public_url.to_string(),
            href: format!("{}/", url::form_urlencoded::byte_serialize(s.name.as_bytes()).collect::<String>()),
        })
        .collect();
    SitesScreen { chrome: Chrome::new(Depth::Sites, None), sites }
}

#[derive(Template)]
#[template(path = "view/site.html")]
struct SiteScreen {
    chrome: Chrome,
    name: String,
    public_url: String,
    index_url: String,
    max_urls: String,
    max_bytes: String,
    total_urls: String,
    listed: String,
    empty: i64,
    /// The site's sections with what each holds, when it has named ones.
    sections: Vec<SectionRow>,
    /// What its crawlers read; `None` with crawler telemetry off.
    crawlers: Option<CrawlerPanel>,
    /// The page table's crawler columns (each row's `reads`); empty with telemetry off.
    majors: Vec<&'static str>,
    /// What checking its URLs found; `None` when the site is not checked.
    health: Option<HealthPanel>,
    /// Its hreflang clusters.
    hreflang: HreflangPanel,
    /// Its Atom feeds; `None` with feeds off.
    feeds: Option<Vec<FeedRow>>,
    /// The most items a feed holds (`feeds.entries`).
    feed_entries: u32,
    /// Its publishing targets; empty when no pass has claimed one (the panel is then left out).
    targets: Vec<TargetRow>,
    rows: Vec<PageRow>,
    /// The page table's caption: which pages it shows, of how many.
    caption: String,
    /// The first screen's link, when this is not the first.
    first: Option<String>,
    next: Option<String>,
}

/// `GET /view/{site}/?after=N`: the site's pages after page N, [`PAGES_PER_SCREEN`] at a time.
async fn site_pages(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ViewError> {
    let depth = Depth::Site;
    let data = ViewData::new(&state);
    let site = site_or_404(&data, &name, depth)?;
    let after = after_param(query.as_deref(), "a page number", depth)?;
    let pages = data.pages(&site).await.map_err(|e| ViewError::store(e, depth))?;
    let names = data.sections(&site, &pages).await.map_err(|e| ViewError::store(e, depth))?;
    let telemetry = data.crawlers(&site).await.map_err(|e| ViewError::store(e, depth))?;
    let health = data.health(&site).await.map_err(|e| ViewError::store(e, depth))?;
    let feeds = data.feeds(&site).await.map_err(|e| ViewError::store(e, depth))?;
    let hreflang = data.hreflang(&site).await.map_err(|e| ViewError::store(e, depth))?;
    let publishing = data.publishing(&site).await.map_err(|e| ViewError::store(e, depth))?;
    let section = |p: &PageState| names.name(section_of(p.id)).flatten();
    let listed = pages.iter().filter(|p| p.url_count > 0).count() as i64;
    let reads = telemetry.as_ref().map(|t| ReadIndex::new(&t.seen, &t.fetches));
    let shown: Vec<PageRow> = pages
        .iter()
        .filter(|p| p.id > after)
        .take(PAGES_PER_SCREEN + 1)
        .map(|p| {
            let mut row = PageRow::new(p, &site, section(p));
            if let (Some(reads), Some(t)) = (&reads, &telemetry) {
                row.reads = reads.page(p).iter().map(|r| ReadCell::new(r, t.now_us)).collect();
            }
            row
        })
        .collect();
    let crawlers = telemetry.as_ref().map(|t| CrawlerPanel {
        window_days: t.window_days,
        rows: report::site_report(&pages, &t.fetches, &t.seen, &t.lags)
            .crawlers
            .iter()
            .map(|c| CrawlerRow::new(c, t.now_us))
            .collect(),
    });
    let next = (shown.len() > PAGES_PER_SCREEN).then(|| format!("./?after={}", shown[PAGES_PER_SCREEN - 1].id));
    let rows: Vec<PageRow> = shown.into_iter().take(PAGES_PER_SCREEN).collect();
    let caption = match (rows.first(), rows.last()) {
        (Some(first), Some(last)) => pages_caption(&first.label, &last.label, rows.len(), pages.len()),
        _ => String::new(),
    };
    let screen = SiteScreen {
        chrome: Chrome::new(depth, Some(&site)),
        name: site.name.clone(),
        public_url: site.public_url.to_string(),
        index_url: site.public_url.index_url(),
        max_urls: grouped(i64::from(site.limits.max_urls)),
        max_bytes: grouped(site.limits.max_bytes as i64),
        total_urls: grouped(pages.iter().map(|p| p.url_count).sum()),
        listed: grouped(listed),
        empty: pages.len() as i64 - listed,
        sections: if names.is_empty() { Vec::new() } else { SectionRow::of(&pages, &names, &site) },
        majors: if crawlers.is_some() { Crawler::MAJOR.map(Crawler::shown).to_vec() } else { Vec::new() },
        crawlers,
        health: health.map(|h| HealthPanel::new(h.policy, &h.summary, &h.urls, h.more, h.now_us)),
        hreflang: HreflangPanel::new(
            &site.name,
            &site.public_url,
            hreflang.policy,
            &hreflang.summary,
            &hreflang.problems,
            hreflang.more,
        ),
        feeds: feeds.map(|feeds| feeds.iter().map(|(feed, body)| FeedRow::new(feed, body)).collect()),
        feed_entries: state.config.feeds.entries,
        targets: publishing.targets.iter().map(|t| TargetRow::new(t, publishing.now_us)).collect(),
        rows,
        caption,
        first: (after > 0).then(|| "./".to_owned()),
        next,
    };
    Ok(render(&screen))
}

#[derive(Template)]
#[template(path = "view/page.html")]
struct PageScreen {
    chrome: Chrome,
    name: String,
    row: PageRow,
    after: i64,
    entries: Vec<EntryRow>,
    first: Option<String>,
    next: Option<String>,
}

/// `GET /view/{site}/pages/{n}?after=ID`: page n's entries after the record with id ID, [`ENTRIES_PER_SCREEN`] at
/// a time, by keyset (a range of the page's index: any screen costs the same).
async fn page_entries(
    State(state): State<AppState>,
    Path((name, page)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response, ViewError> {
    let depth = Depth::Page;
    let data = ViewData::new(&state);
    let site = site_or_404(&data, &name, depth)?;
    let no_page = || ViewError::not_found(format!("Site {} has no page {page:?}.", site.name), depth);
    let id = parse_id(&page).filter(|id| *id > 0 && !page.starts_with('0')).ok_or_else(no_page)?;
    let after = after_param(query.as_deref(), "a record id", depth)?;
    let state_of_page = data.page(&site, id).await.map_err(|e| ViewError::store(e, depth))?.ok_or_else(no_page)?;
    let urls =
        data.page_urls(&site, id, after, ENTRIES_PER_SCREEN + 1).await.map_err(|e| ViewError::store(e, depth))?;
    let (entries, next_after) = screen_of(&urls);
    let screen = PageScreen {
        chrome: Chrome::new(depth, Some(&site)),
        name: site.name.clone(),
        row: {
            let pages = std::slice::from_ref(&state_of_page);
            let names = data.sections(&site, pages).await.map_err(|e| ViewError::store(e, depth))?;
            PageRow::new(&state_of_page, &site, names.name(section_of(id)).flatten())
        },
        after,
        entries: entries.iter().map(EntryRow::new).collect(),
        first: (after > 0).then(|| id.to_string()),
        next: next_after.map(|a| format!("{id}?after={a}")),
    };
    Ok(render(&screen))
}

/// The entries one screen shows of what was read (at most one more than a screen), and the id the next screen
/// starts after, if more may follow: when more than a screen was read, or the read stopped at
/// [`LIST_MAX_BYTES`] (the next screen may then be empty, which it says).
fn screen_of(urls: &[StoredUrl]) -> (&[StoredUrl], Option<i64>) {
    let shown = &urls[..urls.len().min(ENTRIES_PER_SCREEN as usize)];
    let cut = urls.iter().map(|u| u.size).sum::<i64>() > LIST_MAX_BYTES;
    let more = urls.len() > shown.len() || cut;
    (shown, shown.last().filter(|_| more).map(|u| u.id))
}

/// What a lookup found.
pub enum Outcome {
    /// No loc given: the form alone.
    Ask,
    /// Not a loc this site can hold: why.
    Invalid(String),
    /// A valid loc (normalized) that is not stored.
    NotStored(String),
    Found(Box<Record>),
}

#[derive(Template)]
#[template(path = "view/lookup.html")]
struct LookupScreen {
    chrome: Chrome,
    name: String,
    outcome: Outcome,
}

/// `GET /view/{site}/lookup?loc=URL`: the record of `URL` (normalized as writes are), 404 "not stored", or 400
/// when it is no loc of this site.
async fn lookup(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ViewError> {
    let depth = Depth::Site;
    let data = ViewData::new(&state);
    let site = site_or_404(&data, &name, depth)?;
    let raw = query_param(query.as_deref(), "loc", depth)?.unwrap_or_default();
    let mut chrome = Chrome::new(depth, Some(&site));
    let (status, outcome) = if raw.trim().is_empty() {
        (StatusCode::OK, Outcome::Ask)
    } else if raw.len() > MAX_LOOKUP_LEN {
        let message = format!(
            "The URL given is {} bytes long; a stored loc is shorter than {} characters.",
            grouped(raw.len() as i64),
            grouped(MAX_LOC_LEN as i64)
        );
        (StatusCode::BAD_REQUEST, Outcome::Invalid(message))
    } else {
        chrome.loc.clone_from(&raw);
        match Loc::parse(raw.trim(), &site.public_url) {
            Err(problem) => (
                StatusCode::BAD_REQUEST,
                Outcome::Invalid(format!("Not a URL site {} can store: {problem}.", site.name)),
            ),
            Ok(loc) => match data.find(&site, &loc).await.map_err(|e| ViewError::store(e, depth))? {
                Some(url) => {
                    let mut record = Record::new(&url, &site.public_url);
                    let health = data.record_health(&site, &url.loc).await.map_err(|e| ViewError::store(e, depth))?;
                    record.health = health.map(|(check, now_us)| RecordHealth::new(check.as_ref(), now_us));
                    let reads = data.record_reads(&site, &url).await.map_err(|e| ViewError::store(e, depth))?;
                    record.crawlers =
                        reads.map(|(reads, now_us)| reads.iter().map(|r| ReadCell::new(r, now_us)).collect());
                    (StatusCode::OK, Outcome::Found(Box::new(record)))
                }
                None => (StatusCode::NOT_FOUND, Outcome::NotStored(loc.as_str().to_owned())),
            },
        }
    };
    let screen = LookupScreen { chrome, name: site.name.clone(), outcome };
    Ok((status, render(&screen)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PublicUrl;
    use crate::page::{Fields, Limits};

    fn url(id: i64, size: i64) -> StoredUrl {
        StoredUrl { id, loc: format!("https://x.test/{id}"), page_id: 1, fields: Fields::default(), size }
    }

    #[test]
    fn a_screen_shows_at_most_its_size_and_links_on_only_when_more_may_follow() {
        let n = ENTRIES_PER_SCREEN as i64;
        let read = |count: i64| (1..=count).map(|i| url(i, 100)).collect::<Vec<_>>();
        let exactly = read(n);
        assert_eq!(screen_of(&exactly), (&exactly[..], None), "exactly a screen: no next link");
        let one_more = read(n + 1);
        assert_eq!(screen_of(&one_more), (&one_more[..n as usize], Some(n)), "one more: next after the last shown");
        assert_eq!(screen_of(&[]), (&[][..], None));
        let large = vec![url(1, LIST_MAX_BYTES), url(2, 1)];
        assert_eq!(screen_of(&large), (&large[..], Some(2)), "cut by size: more may follow");
    }

    #[test]
    fn ids_are_plain_digits() {
        assert_eq!(parse_id("0"), Some(0));
        assert_eq!(parse_id("123"), Some(123));
        for bad in ["", "-1", "+1", "1.0", "1e3", "abc", " 1", "9999999999999999999", "１"] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_parameter_given_twice_is_refused_and_others_are_ignored() {
        assert_eq!(query_param(Some("a=1&loc=x%26y&b=2"), "loc", Depth::Site).unwrap().as_deref(), Some("x&y"));
        assert_eq!(query_param(None, "loc", Depth::Site).unwrap(), None);
        let e = query_param(Some("loc=a&loc=b"), "loc", Depth::Site).unwrap_err();
        assert_eq!((e.status, e.message.as_str()), (StatusCode::BAD_REQUEST, "loc is given more than once"));
    }

    /// With several sites the list shows each, escaped, linked to its directory.
    #[test]
    fn the_list_of_sites_links_each() {
        let site = |id, name: &str, url| ViewSite {
            id,
            name: name.into(),
            public_url: PublicUrl::parse(url).unwrap(),
            limits: Limits { max_urls: 10, max_bytes: 20_000 },
            section_max_urls: Default::default(),
        };
        let html = sites_screen(&[
            site(1, "www", "https://www.example.com/"),
            site(2, "shop", "https://shop.example.com/a&b/"),
        ])
        .render()
        .unwrap();
        assert!(html.contains(r#"<a href="www/">www</a>"#), "{html}");
        assert!(html.contains(r#"<a href="shop/">shop</a>"#), "{html}");
        assert!(html.contains("https://shop.example.com/a&#38;b/"), "escaped: {html}");
    }
}
