//! `ApiError`: the one place errors become HTTP responses, as JSON `{"error": code, "message": text, ...}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::store::StoreError;

/// Seconds a client is asked to wait after a 503.
pub const RETRY_AFTER_SECS: u32 = 5;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Further members of the JSON body (`details`, `line`, `committed`, ...).
    pub extra: Map<String, Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), extra: Map::new() }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "a valid bearer token is required")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 408: the request's body stopped arriving, or arrived too slowly (`receive_rate`).
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message)
    }

    pub fn unavailable() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the store is unavailable; retry later")
    }

    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(_) => {
                tracing::warn!(error = %e, "store unavailable");
                Self::unavailable()
            }
            StoreError::Other(_) => {
                tracing::error!(error = %e, "store error");
                Self::internal()
            }
            StoreError::Full(full) => Self::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "index_full",
                format!("{full}; raise page_max_urls or page_max_bytes to fit more URLs"),
            ),
            StoreError::NoSite(loc, message) => Self::invalid(format!("loc {loc} {message}"))
                .with("details", [json!({"field": "loc", "message": message, "loc": loc})]),
            StoreError::TooLarge(loc, too_large) => Self::invalid(format!("{loc}: {too_large}"))
                .with("details", [json!({"field": "", "message": too_large.to_string(), "loc": loc})]),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("error".into(), json!(self.code));
        body.insert("message".into(), json!(self.message));
        body.extend(self.extra);
        let mut response = (self.status, Json(Value::Object(body))).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        match self.status {
            StatusCode::UNAUTHORIZED => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"sitemapd\""));
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            _ => {}
        }
        response
    }
}
