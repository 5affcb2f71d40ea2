//! Request bodies: content-type dispatch, a size-limited JSON array of raw entries, and streamed NDJSON lines.

use axum::body::Body;
use axum::http::{HeaderMap, header};
use futures_util::StreamExt;
use serde_json::value::RawValue;

use crate::error::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Ndjson,
}

/// The body format from `Content-Type` (parameters such as `charset` are ignored).
pub fn format(headers: &HeaderMap, allow_ndjson: bool) -> Result<Format, ApiError> {
    let essence = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    match essence.as_deref() {
        Some("application/json") => Ok(Format::Json),
        Some("application/x-ndjson" | "application/ndjson") if allow_ndjson => Ok(Format::Ndjson),
        _ => {
            let accepted = if allow_ndjson { "application/json or application/x-ndjson" } else { "application/json" };
            let got = essence.map_or_else(|| "no Content-Type".to_owned(), |e| format!("Content-Type {e}"));
            Err(ApiError::unsupported_media_type(format!("expected {accepted}, got {got}")))
        }
    }
}

/// Reads a whole body of at most `limit` bytes (413 beyond it, checked against Content-Length first).
pub async fn read_limited(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = || ApiError::too_large(format!("the body exceeds {limit} bytes; send large loads as NDJSON"));
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(declared.map_or(8192, |n| n as usize));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ApiError::bad_request("could not read the request body"))?;
        if out.len() + chunk.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Parses a JSON array without parsing its elements yet. Syntax errors are 400; valid JSON that is not an array
/// is 422; more than `max_entries` elements is 413.
pub fn json_array(bytes: &[u8], max_entries: usize) -> Result<Vec<Box<RawValue>>, ApiError> {
    match serde_json::from_slice::<Vec<Box<RawValue>>>(bytes) {
        Ok(items) if items.len() > max_entries => Err(ApiError::too_large(format!(
            "the array has {} entries, more than max_json_entries ({max_entries}); split it, or send NDJSON",
            items.len()
        ))),
        Ok(items) => Ok(items),
        Err(e) if e.is_data() && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() => {
            Err(ApiError::invalid("the body must be a JSON array"))
        }
        Err(e) => Err(ApiError::bad_request(format!("malformed JSON: {e}"))),
    }
}
