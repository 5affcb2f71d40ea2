//! The API under `/api/v1`: bearer-token auth, request bodies, the URL handlers, the crawlers' report, URL health,
//! hreflang clusters, and the OpenAPI document generated from their annotations.

mod body;
mod crawlers;
pub mod doc;
mod health;
mod hreflang;
mod lookup;
mod urls;

pub use urls::{MAX_DETAILS, parse_json_entries, parse_json_locs, parse_ndjson_line};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use bytes::Bytes;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::access::Access;
use crate::error::ApiError;
use crate::net::receive_rate::{self, ReceiveLimits};

/// Where the OpenAPI document is served (no token needed).
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// The routes and their OpenAPI document come from the same annotated handlers, so they cannot disagree.
fn documented() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(doc::ApiDoc::openapi())
        .routes(routes!(lookup::get_urls, urls::upsert_urls, urls::delete_url))
        .routes(routes!(urls::delete_urls))
        .routes(routes!(crawlers::get_crawlers))
        .routes(routes!(health::get_health))
        .routes(routes!(health::resume_health))
        .routes(routes!(health::confirm_health))
        .routes(routes!(hreflang::get_hreflang))
}

/// The OpenAPI 3 document of the write API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented().into_openapi()
}

pub fn router(state: AppState) -> Router<AppState> {
    let (router, api) = documented()
        .route_layer(middleware::from_fn_with_state(state.clone(), meter_body))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route_layer(middleware::from_fn_with_state(state, time_limit))
        .split_for_parts();
    let json = Bytes::from(api.to_json().expect("the OpenAPI document serializes"));
    let get_openapi = move || async move {
        let content_type = HeaderValue::from_static("application/json");
        ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], json)
    };
    router.route(OPENAPI_PATH, get(get_openapi)).layer(middleware::map_response(no_store))
}

/// A query string deserialized as `T` (axum's `Query`): `T` refuses unknown names (`deny_unknown_fields`), and serde
/// refuses a name given twice. A query that does not fit is 400 with the JSON error body every route answers with,
/// its message saying which name was wrong.
pub(crate) struct ApiQuery<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

/// Every `/api/v1` request, body included, must finish within `api.timeout`; past it, it is dropped (an open
/// transaction rolls back) and the answer is 503. It runs off the serving threads ([`AppState::off_serving`]): a
/// bulk load's work never stalls the crawlers' requests that share a thread with it.
async fn time_limit(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    let timeout = state.config.api.timeout;
    match tokio::time::timeout(timeout, state.off_serving(next.run(request))).await {
        Ok(Ok(response)) => Ok(response),
        // A handler's panic, raised again here: the front layer answers it 500, as any other.
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => {
            tracing::warn!(timeout_secs = timeout.as_secs(), "an API request took too long and was abandoned");
            Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "timeout",
                format!(
                    "the request did not finish within {} (api.timeout) and was abandoned; a JSON array was not \
                     stored, an NDJSON body kept the batches committed before. Re-sending is safe.",
                    crate::config::shown_duration(&timeout)
                ),
            ))
        }
    }
}

/// A request body is read under the idle limit and the minimum receive rate ([`crate::net::receive_rate`]): a body that
/// stalls or trickles is cut (408), and the share of the body budget it held is freed with it.
async fn meter_body(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limits = ReceiveLimits { idle: state.config.api.body_idle, rate: state.config.api.min_receive_rate };
    next.run(request.map(|body| receive_rate::metered(body, limits))).await
}

/// API answers describe the store at one moment: no cache may keep or reuse them (REDbot flags heuristic
/// freshness otherwise). Error answers already say so.
async fn no_store(mut response: Response) -> Response {
    response.headers_mut().entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

/// Every `/api/v1` route but the OpenAPI document needs `Authorization: Bearer <token>` when tokens are
/// configured. What the token may reach ([`Access`]: every site, or some) goes on to the handlers as a request
/// extension. Without tokens the server only starts on a loopback address (see `Config`), so only local clients
/// can write. Two `Authorization` lines are refused (400) rather than the first one read: a proxy or a filter in
/// front may have checked the other.
async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    if request.headers().get_all(header::AUTHORIZATION).iter().nth(1).is_some() {
        return Err(ApiError::bad_request("more than one Authorization header"));
    }
    if state.open_writes() {
        let mut request = request;
        request.extensions_mut().insert(Access::All);
        return Ok(next.run(request).await);
    }
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    match token.and_then(|t| state.config.api.tokens.access(t).cloned()) {
        Some(access) => {
            let mut request = request;
            request.extensions_mut().insert(access);
            Ok(next.run(request).await)
        }
        None => Err(ApiError::unauthorized()),
    }
}
