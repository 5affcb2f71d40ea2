//! The OpenAPI document's frame (info, the bearer scheme) and the schemas of bodies that the handlers check by
//! hand rather than deserialize: an entry, a loc, an error. The paths come from the handlers' annotations.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi, ToSchema};

use crate::domain::ext;
use crate::placement::UpsertCounts;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "sitemapd write API",
        description = "Stores a website's URL records; sitemapd serves them as sitemaps.org sitemaps. Every route \
                       but this document needs `Authorization: Bearer TOKEN` when `SITEMAPD_API_TOKENS` is set.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0"),
    ),
    components(schemas(Entry, ErrorBody, ErrorDetail)),
    modifiers(&BearerAuth),
    tags(
        (name = "urls", description = "URL records"),
        (name = "crawlers", description = "Which crawler read which sitemap, verified, and how long after a change"),
        (name = "health", description = "URL health: what checking the stored URLs found (404, redirect, noindex, …)"),
        (name = "hreflang", description = "hreflang clusters: the URLs whose alternates name each other, and their problems"),
    ),
)]
pub struct ApiDoc;

/// The name of the security scheme in `components.securitySchemes`, as the handlers' `security(...)` name it.
pub const BEARER: &str = "bearer";

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// One URL record to store: a JSON array element, or one NDJSON line. Read by `domain::EntryInput` and validated by
/// `domain::Entry::from_input`, which reports every invalid field (422). Unknown fields are refused, and so is a
/// field given twice; `null` clears an optional field.
#[derive(serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // a schema only: entries are read by `domain::EntryInput`
pub struct Entry {
    /// Absolute http(s) URL under `SITEMAPD_PUBLIC_URL`, without user info or fragment, shorter than 2,048
    /// characters once normalized.
    #[schema(example = "https://www.example.com/about")]
    loc: String,
    /// W3C Datetime: `YYYY-MM-DD`, or a date-time with minutes or seconds and a zone.
    #[schema(example = "2024-05-01T08:20+02:00")]
    lastmod: Option<String>,
    /// `always hourly daily weekly monthly yearly never`, in any case.
    #[schema(example = "daily")]
    changefreq: Option<String>,
    /// 0.0 to 1.0, at most 6 decimal places.
    #[schema(minimum = 0.0, maximum = 1.0, example = 0.8)]
    priority: Option<f64>,
    /// The section whose pages list it (`/sitemap-<section>-N.xml`); absent or `null`: the default section
    /// (`/sitemap-N.xml`). 1 to 32 lower-case letters, digits and single hyphens, starting with a letter, not ending
    /// with a hyphen and digits; `news`, `removed`, `default`, `index` and `all` are reserved. Sending an entry with
    /// another section moves it there: its old page and its new one change.
    #[schema(example = "products", pattern = "^[a-z](-?[a-z0-9])*$", max_length = 32)]
    section: Option<String>,
    /// Google image extension: at most 1,000, each an absolute http(s) URL (any host, e.g. a CDN). `caption`,
    /// `title`, `geo_location` and `license` are refused: Google dropped them in 2022.
    images: Option<Vec<ext::Image>>,
    /// Google video extension. `thumbnail_loc`, `title` (at most 100 characters), `description` (at most 2,048)
    /// and `content_loc` and/or `player_loc` are required; the deprecated `category`, `gallery_loc`, `price`,
    /// `tvshow`, `autoplay` and `allow_embed` are refused. At most 100 videos.
    videos: Option<Vec<ext::Video>>,
    /// Google News: listed in `/sitemap-news.xml` while `publication_date` is within the news window; the
    /// deprecated `access`, `genres`, `keywords` and `stock_tickers` are refused.
    news: Option<ext::News>,
    /// hreflang alternates (`<xhtml:link rel="alternate">`): one per `hreflang` (ISO 639-1 language, optional
    /// script and region, or `x-default`); the set must include the entry's own `loc`. Stored sorted by `hreflang`.
    alternates: Option<Vec<ext::Alternate>>,
}

/// The body of every error response (`error::ApiError`).
#[derive(ToSchema)]
#[allow(dead_code)] // a schema only: `ApiError` builds the body
pub struct ErrorBody {
    /// A stable code: `bad_request`, `unauthorized`, `not_found`, `payload_too_large`, `unsupported_media_type`,
    /// `invalid`, `index_full`, `unavailable` or `internal`.
    #[schema(example = "invalid")]
    error: String,
    /// What went wrong, for a person.
    message: String,
    /// 422: every invalid field.
    details: Option<Vec<ErrorDetail>>,
    /// NDJSON: the 1-based line where the upsert stopped.
    line: Option<u64>,
    /// NDJSON: how many entries before that line were stored.
    committed: Option<u64>,
    /// NDJSON: what happened to the entries that were stored.
    stored: Option<UpsertCounts>,
}

/// One invalid field.
#[derive(ToSchema)]
#[allow(dead_code)] // a schema only
pub struct ErrorDetail {
    /// JSON array: the 0-based index of the element.
    index: Option<u64>,
    /// NDJSON: the 1-based line.
    line: Option<u64>,
    /// The field's name (empty when the element itself is wrong, e.g. not an object).
    field: String,
    message: String,
}

/// The answers every write-API route can give besides its own: no valid bearer token, and the store unavailable.
/// Listed in each handler's `responses(...)` by this one name.
#[derive(IntoResponses)]
#[allow(dead_code)] // a documentation type only: `ApiError` builds these answers
pub enum CommonErrors {
    #[response(status = 401, description = "No valid bearer token",
               headers(("WWW-Authenticate" = String, description = "Bearer")))]
    Unauthorized(ErrorBody),
    #[response(
        status = 403,
        description = "The token is scoped to sites and a loc (or the site named) is not one of \
                                            them; nothing was changed"
    )]
    Forbidden(ErrorBody),
    #[response(status = 503, description = "The store is unavailable (`unavailable`), the request took too long \
                                            (`timeout`), or the bodies in flight hold the memory body_memory_bytes \
                                            allows (`busy`); retry later",
               headers(("Retry-After" = u32, description = "Seconds to wait")))]
    Unavailable(ErrorBody),
}
