//! `/api/v1/urls` handlers: upsert (JSON array or NDJSON), delete one or many, look up one, list by keyset.

use std::io;

use axum::Json;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, TryStreamExt};
use serde_json::{Value, json};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::io::StreamReader;

use super::body::{self, Format};
use crate::AppState;
use crate::domain::{Entry, FieldError, Loc, PublicUrl};
use crate::error::ApiError;
use crate::pagination::{StoredUrl, UpsertCounts};

const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 1000;

/// `PUT /api/v1/urls`
pub async fn upsert_urls(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    match body::format(&headers, true)? {
        Format::Json => upsert_json(&state, &headers, body).await,
        Format::Ndjson => upsert_ndjson(&state, body).await,
    }
}

/// A JSON array is all-or-nothing: every invalid entry is reported and nothing is stored.
async fn upsert_json(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Response, ApiError> {
    let bytes = body::read_limited(headers, body, state.max_json_bytes).await?;
    let items = body::json_array(&bytes, state.max_json_entries)?;
    let mut entries = Vec::with_capacity(items.len());
    let mut details = Vec::new();
    for (index, raw) in items.iter().enumerate() {
        let value: Value = serde_json::from_str(raw.get()).expect("a RawValue is valid JSON");
        match Entry::from_json(value, &state.public_url) {
            Ok(entry) => entries.push(entry),
            Err(errors) => details.extend(errors.iter().map(|e| detail("index", index as u64, e))),
        }
    }
    if !details.is_empty() {
        let bad = details.iter().filter_map(|d| d["index"].as_u64()).collect::<std::collections::BTreeSet<_>>();
        let message = format!("{} of {} entries are invalid; nothing was stored", bad.len(), items.len());
        return Err(ApiError::invalid(message).with("details", details));
    }
    let counts = state.store.upsert(&entries).await?;
    Ok(Json(counts).into_response())
}

/// NDJSON is streamed and committed in batches. At the first bad line it stops: everything before that line is
/// committed, nothing from it on, and the error says which line and how much was stored.
async fn upsert_ndjson(state: &AppState, body: Body) -> Result<Response, ApiError> {
    let reader = StreamReader::new(body.into_data_stream().map_err(io::Error::other));
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(state.max_line_bytes));
    let mut ingest = Ingest { state, batch: Vec::with_capacity(state.ndjson_batch), totals: UpsertCounts::default() };
    let mut line_no: u64 = 0;
    while let Some(next) = lines.next().await {
        line_no += 1;
        let line = match next {
            Ok(line) => line,
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                let message = format!("line {line_no} is longer than {} bytes", state.max_line_bytes);
                return Err(ingest.stop(ApiError::too_large(message), line_no).await);
            }
            Err(LinesCodecError::Io(e)) if e.kind() == io::ErrorKind::InvalidData => {
                let message = format!("line {line_no} is not valid UTF-8");
                return Err(ingest.stop(ApiError::bad_request(message), line_no).await);
            }
            Err(LinesCodecError::Io(_)) => {
                let error = ApiError::bad_request("could not read the request body");
                return Err(ingest.stop(error, line_no).await);
            }
        };
        match parse_ndjson_line(&line, line_no, &state.public_url) {
            Ok(Some(entry)) => ingest.batch.push(entry),
            Ok(None) => continue,
            Err(error) => return Err(ingest.stop(error, line_no).await),
        }
        if ingest.batch.len() >= state.ndjson_batch {
            ingest.commit().await?;
        }
    }
    ingest.commit().await?;
    Ok(Json(ingest.totals).into_response())
}

/// One NDJSON line (without its newline): `None` when blank, else its entry, or the error naming the line (400 for
/// bad JSON, 422 for an invalid entry).
pub fn parse_ndjson_line(line: &str, line_no: u64, public: &PublicUrl) -> Result<Option<Entry>, ApiError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(line)
        .map_err(|e| ApiError::bad_request(format!("line {line_no} is not valid JSON: {e}")))?;
    Entry::from_json(value, public).map(Some).map_err(|errors| {
        let details: Vec<Value> = errors.iter().map(|e| detail("line", line_no, e)).collect();
        ApiError::invalid(format!("line {line_no} is not a valid entry")).with("details", details)
    })
}

struct Ingest<'a> {
    state: &'a AppState,
    batch: Vec<Entry>,
    totals: UpsertCounts,
}

impl Ingest<'_> {
    async fn commit(&mut self) -> Result<(), ApiError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        match self.state.store.upsert(&self.batch).await {
            Ok(counts) => {
                self.totals += counts;
                self.batch.clear();
                Ok(())
            }
            Err(e) => Err(ApiError::from(e).with("committed", self.totals.received).with("stored", json!(self.totals))),
        }
    }

    /// Commits what came before the bad line, then returns `error` annotated with the line and what was stored.
    async fn stop(mut self, error: ApiError, line: u64) -> ApiError {
        if let Err(e) = self.commit().await {
            return e;
        }
        error.with("line", line).with("committed", self.totals.received).with("stored", json!(self.totals))
    }
}

fn detail(position: &str, at: u64, e: &FieldError) -> Value {
    json!({ position: at, "field": e.field, "message": e.message })
}

/// `DELETE /api/v1/urls?loc=URL`: 204, or 404 when absent.
pub async fn delete_url(State(state): State<AppState>, RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    let params = Params::parse(query.as_deref(), &["loc"])?;
    let loc = params.loc(&state.public_url)?.ok_or_else(|| ApiError::bad_request("the loc parameter is required"))?;
    let counts = state.store.delete(&[loc]).await?;
    if counts.deleted == 0 {
        return Err(ApiError::not_found("no such URL is stored"));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /api/v1/urls/delete` with a JSON array of locs: all valid or nothing is deleted.
pub async fn delete_urls(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    body::format(&headers, false)?;
    let bytes = body::read_limited(&headers, body, state.max_json_bytes).await?;
    let items = body::json_array(&bytes, state.max_json_entries)?;
    let mut locs = Vec::with_capacity(items.len());
    let mut details = Vec::new();
    for (index, raw) in items.iter().enumerate() {
        let parsed = serde_json::from_str::<Value>(raw.get())
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .ok_or_else(|| "must be a string".to_owned())
            .and_then(|s| Loc::parse(&s, &state.public_url));
        match parsed {
            Ok(loc) => locs.push(loc),
            Err(message) => details.push(detail("index", index as u64, &FieldError { field: "loc".into(), message })),
        }
    }
    if !details.is_empty() {
        let message = format!("{} of {} locs are invalid; nothing was deleted", details.len(), items.len());
        return Err(ApiError::invalid(message).with("details", details));
    }
    let counts = state.store.delete(&locs).await?;
    Ok(Json(counts).into_response())
}

/// `GET /api/v1/urls?loc=URL` (one record) or `GET /api/v1/urls?limit=N&after=CURSOR` (keyset paging).
pub async fn get_urls(State(state): State<AppState>, RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    let params = Params::parse(query.as_deref(), &["loc", "limit", "after"])?;
    if let Some(loc) = params.loc(&state.public_url)? {
        if params.get("limit").is_some() || params.get("after").is_some() {
            return Err(ApiError::bad_request("loc cannot be combined with limit or after"));
        }
        let url = state.store.find(&loc).await?.ok_or_else(|| ApiError::not_found("no such URL is stored"))?;
        return Ok(Json(url_json(&url, &state.public_url)).into_response());
    }
    let limit = match params.get("limit") {
        None => DEFAULT_LIMIT,
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| ApiError::bad_request(format!("limit must be a whole number from 1 to {MAX_LIMIT}")))?,
    };
    let after = match params.get("after") {
        None => 0,
        Some(raw) => raw
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| ApiError::bad_request("after must be a cursor returned as next by this API"))?,
    };
    let items = state.store.list_after(after, limit).await?;
    let next = (items.len() == limit as usize).then(|| items.last().map(|u| u.id.to_string())).flatten();
    let items: Vec<Value> = items.iter().map(|u| url_json(u, &state.public_url)).collect();
    Ok(Json(json!({ "items": items, "next": next })).into_response())
}

fn url_json(url: &StoredUrl, public: &PublicUrl) -> Value {
    json!({
        "loc": url.loc,
        "lastmod": url.fields.lastmod,
        "changefreq": url.fields.changefreq,
        "priority": url.fields.priority,
        "sitemap": public.page_url(url.page_id),
    })
}

/// Query parameters: each known name at most once, unknown names refused.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(query: Option<&str>, known: &[&str]) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned().collect();
        for (i, (name, _)) in pairs.iter().enumerate() {
            if !known.contains(&name.as_str()) {
                return Err(ApiError::bad_request(format!("unknown query parameter {name:?}")));
            }
            if pairs[..i].iter().any(|(n, _)| n == name) {
                return Err(ApiError::bad_request(format!("query parameter {name:?} is given twice")));
            }
        }
        Ok(Self(pairs))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The `loc` parameter normalized like a stored loc (422 when it could never be stored).
    fn loc(&self, public: &PublicUrl) -> Result<Option<Loc>, ApiError> {
        self.get("loc")
            .map(|raw| {
                Loc::parse(raw, public).map_err(|message| {
                    ApiError::invalid(format!("loc: {message}"))
                        .with("details", vec![json!({"field": "loc", "message": message})])
                })
            })
            .transpose()
    }
}
