//! `/api/v1/urls` handlers: upsert (JSON array or NDJSON), delete one or many, look up one, list by keyset.

use std::io;

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{FutureExt, StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::io::StreamReader;
use utoipa::IntoParams;

use super::ApiQuery;
use super::body::{self, Format};
use super::doc::{CommonErrors, ErrorBody};
use crate::AppState;
use crate::access::Access;
use crate::domain::{Entry, EntryInput, FieldError, JsonScalar, Loc, LocScope, Site, Sites};
use crate::error::ApiError;
pub use crate::ingest::MAX_DETAILS;
use crate::ingest::background::Pending;
use crate::ingest::{self, BatchLimits, Caller, Failed, Forbidden, Pipeline, Refused, Rejections, Sink};
use crate::net::body_budget::{BodyMemory, NDJSON_STEP};
use crate::placement::UpsertCounts;
use crate::store::DeleteCounts;
use crate::telemetry::{count_deletes, count_upserts};

/// Add or replace URL records.
///
/// A JSON array is all-or-nothing: if any entry is invalid, the invalid fields are reported (422, the first 1,000)
/// and nothing is stored. NDJSON (one entry a line) is streamed and committed in batches; at the first bad line it
/// stops, and the error gives the `line`, how many entries were `committed` and their counts (`stored`). An upsert
/// replaces the whole entry: an omitted or `null` field is cleared. A field given twice is refused, and so is a
/// body that declares a charset other than UTF-8.
#[utoipa::path(
    put,
    path = "/api/v1/urls",
    tag = "urls",
    operation_id = "upsert_urls",
    request_body(
        description = "A JSON array of entries, or NDJSON: the same entries, one a line (blank lines are skipped)",
        content(
            (Vec<super::doc::Entry> = "application/json"),
            (Vec<super::doc::Entry> = "application/x-ndjson"),
        ),
    ),
    responses(
        (status = 200, description = "Stored; what happened to the entries received", body = UpsertCounts),
        (status = 400, description = "Malformed JSON (`index`: the array element it is in), or a line that is not JSON \
                                      or not UTF-8", body = ErrorBody),
        (status = 408, description = "The body sent nothing for `api.body_idle`, or arrived more slowly than \
                                      `api.min_receive_rate`; a JSON array was not stored, an NDJSON body kept the \
                                      batches committed before (`line`, `committed`)", body = ErrorBody),
        (status = 413, description = "The JSON body, its number of entries or an NDJSON line is too large",
         body = ErrorBody),
        (status = 415, description = "Neither application/json nor application/x-ndjson, or a charset other than \
                                      utf-8", body = ErrorBody),
        (status = 422, description = "Invalid entries (`details`, at most 1,000): a bad, unknown or repeated field; \
                                      nothing of them was stored", body = ErrorBody),
        CommonErrors,
        (status = 507, description = "The index would need more than 49,999 pages (50,000 sitemaps with the news sitemap)", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn upsert_urls(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    match body::format(&headers, true)? {
        Format::Json => upsert_json(&state, &access, &headers, body).await,
        Format::Ndjson => upsert_ndjson(&state, &access, body).await,
    }
}

/// Whether a request would change the store (its 403 then says that nothing was changed) or only read it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Changes {
    Write,
    Read,
}

/// 403 unless `access` reaches the site of every loc (each lies under a configured site: validation saw to it).
pub(super) fn authorize<'l>(
    state: &AppState,
    access: &Access,
    locs: impl IntoIterator<Item = &'l Loc>,
    changes: Changes,
) -> Result<(), ApiError> {
    if *access == Access::All {
        return Ok(());
    }
    ingest::admit::authorize_all(locs, &Scope { sites: &state.sites, access }).map_err(|f| forbidden(&f, changes))
}

/// The 403 of a loc the token may not reach.
fn forbidden(f: &Forbidden, changes: Changes) -> ApiError {
    let name = f.site.as_deref().unwrap_or("(none)");
    let after = if changes == Changes::Write { "; nothing was changed" } else { "" };
    ApiError::forbidden(format!("this token may not reach the site {name}, which {} lies under{after}", f.loc.as_str()))
}

/// What a request's locs are checked against: every configured site (a loc goes to the one it lies under, and
/// [`authorize`] refuses one the token may not reach), but a loc under none is told only of the sites the token
/// reaches, so that a token scoped to one site learns nothing of the others.
pub(super) struct Scope<'a> {
    pub(super) sites: &'a Sites,
    pub(super) access: &'a Access,
}

impl LocScope for Scope<'_> {
    fn admits(&self, loc: &str) -> Result<(), String> {
        match self.access {
            Access::All => self.sites.admits(loc),
            Access::Sites(_) if self.sites.for_loc(loc).is_some() => Ok(()),
            Access::Sites(_) => {
                let reached: Vec<&Site> = self.sites.iter().filter(|s| self.access.may(&s.name)).collect();
                Err(match reached.as_slice() {
                    [site] => {
                        format!("must lie under the public URL {} (the sitemaps.org location rule)", site.public_url)
                    }
                    _ => format!("must lie under the public URL of a site this token reaches: {}", shown(&reached)),
                })
            }
        }
    }
}

/// A token writes to the sites its `Access` names (every site: `Access::All`).
impl Caller for Scope<'_> {
    fn may_write(&self, loc: &Loc) -> Result<(), Forbidden> {
        if *self.access == Access::All {
            return Ok(());
        }
        match self.sites.for_loc(loc.as_str()) {
            Some(site) if self.access.may(&site.name) => Ok(()),
            site => Err(Forbidden { site: site.map(|s| s.name.clone()), loc: loc.clone() }),
        }
    }
}

/// The store as the API writes to it: through [`AppState::upsert`], each batch counted in the metrics.
#[derive(Clone)]
struct Api(AppState);

impl Sink for Api {
    async fn commit(&self, batch: &[Entry]) -> crate::store::Result<UpsertCounts> {
        let counts = self.0.upsert(batch).await?;
        count_upserted(&counts);
        Ok(counts)
    }
}

/// `www (https://www.example.com/), shop (https://shop.example.com/)`.
pub(super) fn shown(sites: &[&Site]) -> String {
    sites.iter().map(|s| format!("{} ({})", s.name, s.public_url)).collect::<Vec<_>>().join(", ")
}

/// A JSON array is all-or-nothing: every invalid entry is reported and nothing is stored.
async fn upsert_json(state: &AppState, access: &Access, headers: &HeaderMap, body: Body) -> Result<Response, ApiError> {
    // Held until the write ends: the body, then its entries, are in memory until then.
    let (bytes, _memory) =
        body::read_within(&state.body_budget, access, headers, body, state.config.api.max_json_bytes).await?;
    let large = bytes.len() >= BLOCKING_PARSE_BYTES;
    let (max_entries, sites, reach) = (state.config.api.max_json_entries, state.sites.clone(), access.clone());
    let parse = move || parse_json_entries(&bytes, max_entries, &Scope { sites: &sites, access: &reach });
    // A large body takes a long time to parse and validate, all of it CPU: on the background
    // threads of lower priority, so that it does not hold up the crawler requests that share a runtime worker or a
    // core with it.
    let entries = if large {
        match ingest::background::run(parse).await {
            Ok(parsed) => parsed?,
            // A panic goes on to `CatchPanicLayer`.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    } else {
        parse()?
    };
    // 422, nothing stored, when an entry renders larger than any page can hold.
    ingest::admit::fit_all(&entries, state.config.limits()).map_err(|r| {
        count_upserts("rejected", r.count);
        let total = entries.len();
        refused(r, |n| format!("{n} of {total} entries are too large; nothing was stored"))
    })?;
    authorize(state, access, entries.iter().map(|e| &e.loc), Changes::Write)
        .inspect_err(|_| count_upserts("rejected", 1))?;
    let counts = Api(state.clone()).commit(&entries).await?;
    Ok(Json(counts).into_response())
}

/// Bodies from this size on are parsed on the blocking pool.
const BLOCKING_PARSE_BYTES: usize = 256 * 1024;

/// A `PUT /api/v1/urls` JSON array body, parsed and validated as it streams (see [`body::json_array`]): every
/// entry, or the error. 400 malformed JSON (with the `index` of the element it is in), 413 more than `max_entries`,
/// 422 invalid entries: `details` lists at most [`MAX_DETAILS`] problems as `{index, field, message}`.
pub fn parse_json_entries(
    bytes: &[u8],
    max_entries: usize,
    public: &(impl LocScope + ?Sized),
) -> Result<Vec<Entry>, ApiError> {
    let mut all = ingest::admit::AllOrNothing::new(public);
    let total = body::json_array(bytes, max_entries, |index, input: EntryInput| all.offer(index, input))?;
    all.finish().map_err(|r| {
        count_upserts("rejected", r.count);
        refused(r, |n| format!("{n} of {total} entries are invalid; nothing was stored"))
    })
}

/// The 422 of a JSON array's refused elements (`details`: at most [`MAX_DETAILS`] problems), whose message
/// `message` makes from their number.
fn refused(r: Rejections, message: impl FnOnce(u64) -> String) -> ApiError {
    let mut message = message(r.count);
    if r.left_out {
        message.push_str(&format!(" (details lists the first {MAX_DETAILS} problems)"));
    }
    let details: Vec<Value> = r.details.into_iter().map(|(index, e)| detail("index", index as u64, &e)).collect();
    ApiError::invalid(message).with("details", details)
}

/// NDJSON is streamed and committed in batches of at most `ndjson_batch` entries and `max_json_bytes` of lines (a
/// batch of large entries holds no more than one JSON body may). At the first bad line it stops: everything before
/// that line is committed, nothing from it on, and the error says which line and how much was stored.
///
/// Lines are parsed in chunks of [`PARSE_CHUNK_LINES`] lines, each a job on the background threads of lower CPU
/// priority ([`ingest::background`]: one a core, off the runtime's workers, which crawlers' requests keep), so that
/// a request's lines are parsed on every core; the chunks' results are taken in order, so the batches, and the first bad line, are those
/// that parsing line by line gives. At most two chunks are parsed ahead of the one being taken.
async fn upsert_ndjson(state: &AppState, access: &Access, body: Body) -> Result<Response, ApiError> {
    let reader = StreamReader::new(body.into_data_stream().map_err(io::Error::other));
    // The limit counts a line without its terminator; the codec counts a `\r` before `\n` (it strips it after),
    // so it gets one byte more and the exact check follows.
    let codec = LinesCodec::new_with_max_length(state.config.api.max_line_bytes.saturating_add(1));
    let mut lines = FramedRead::new(reader, codec);
    let limits = BatchLimits { entries: state.config.api.ndjson_batch, bytes: state.config.api.max_json_bytes };
    let mut ingest = Ingest { state, writer: access, pipeline: Pipeline::new(Api(state.clone()), limits) };
    let mut parsing: std::collections::VecDeque<Pending<Vec<ParsedLine>>> = Default::default();
    let mut chunk: Vec<(u64, String)> = Vec::new();
    let mut chunk_bytes = 0;
    let mut line_no: u64 = 0;
    loop {
        let next = match lines.next().now_or_never() {
            Some(next) => next,
            None if chunk.is_empty() && parsing.is_empty() => lines.next().await,
            // The client pauses: what it sent is parsed and taken (each batch that fills is committed) before
            // more arrives, as line by line, so that a client streaming slowly sees its batches committed.
            None => match tokio::time::timeout(PARSE_IDLE_FLUSH, lines.next()).await {
                Ok(next) => next,
                Err(_paused) => {
                    let (waiting, rest) = (std::mem::take(&mut parsing), std::mem::take(&mut chunk));
                    chunk_bytes = 0;
                    if let Err((error, at)) = ingest.take_all(waiting, rest, access).await? {
                        return Err(ingest.stop(error, at).await);
                    }
                    lines.next().await
                }
            },
        };
        let Some(next) = next else { break };
        line_no += 1;
        let unreadable = match next {
            Ok(line) if line.len() <= state.config.api.max_line_bytes => {
                chunk_bytes += line.len();
                chunk.push((line_no, line));
                if chunk.len() >= PARSE_CHUNK_LINES || chunk_bytes >= PARSE_CHUNK_BYTES {
                    let (state, access, lines) = (state.clone(), access.clone(), std::mem::take(&mut chunk));
                    chunk_bytes = 0;
                    parsing.push_back(ingest::background::run(move || {
                        lines.into_iter().map(|(n, line)| parse_line(&state, &access, n, &line)).collect()
                    }));
                    // A body already received is read without a pause: between chunks, the worker goes to the
                    // crawlers' requests waiting for it.
                    tokio::task::yield_now().await;
                    if parsing.len() > 2 {
                        let parsed = parsed(parsing.pop_front().expect("more than two chunks")).await?;
                        if let Err((error, at)) = ingest.take(parsed).await? {
                            return Err(ingest.stop(error, at).await);
                        }
                    }
                }
                continue;
            }
            Ok(_) | Err(LinesCodecError::MaxLineLengthExceeded) => {
                let message = format!("line {line_no} is longer than {} bytes", state.config.api.max_line_bytes);
                ApiError::too_large(message)
            }
            Err(LinesCodecError::Io(e)) if e.kind() == io::ErrorKind::InvalidData => {
                ApiError::bad_request(format!("line {line_no} is not valid UTF-8"))
            }
            Err(LinesCodecError::Io(e)) => body::unreadable(&e),
        };
        // The lines before this one come first: one of them may be the first bad line.
        let (error, at) = match ingest.take_all(parsing, chunk, access).await? {
            Err(earlier) => earlier,
            Ok(()) => (unreadable, line_no),
        };
        return Err(ingest.stop(error, at).await);
    }
    if let Err((error, at)) = ingest.take_all(parsing, chunk, access).await? {
        return Err(ingest.stop(error, at).await);
    }
    ingest.commit().await?;
    Ok(Json(ingest.pipeline.totals()).into_response())
}

/// Lines parsed in one task: a request's lines are parsed this many at a time (or fewer, up to the line that
/// reaches [`PARSE_CHUNK_BYTES`]), on every core. Three chunks are held at most: about a megabyte of lines.
const PARSE_CHUNK_LINES: usize = 1_000;
const PARSE_CHUNK_BYTES: usize = 256 * 1024;
/// How long a client may pause before the lines it sent are parsed and taken without waiting for a full chunk.
const PARSE_IDLE_FLUSH: std::time::Duration = std::time::Duration::from_millis(10);

/// The lines a chunk's job parsed.
async fn parsed(job: Pending<Vec<ParsedLine>>) -> Result<Vec<ParsedLine>, ApiError> {
    job.await.map_err(|_panicked| {
        tracing::error!("an NDJSON chunk's parse failed");
        ApiError::internal()
    })
}

/// One NDJSON line parsed: its number, its length, and its entry (`None` when blank) or why it is refused.
type ParsedLine = (u64, usize, Result<Option<Entry>, ApiError>);

/// One NDJSON line as an entry `access` may write that fits in a page.
fn parse_line(state: &AppState, access: &Access, line_no: u64, line: &str) -> ParsedLine {
    let parsed = match line.trim().is_empty() {
        true => Ok(None),
        false => ingest::admit::admit_json(line, &Scope { sites: &state.sites, access }, state.config.limits())
            .map(Some)
            .map_err(|refused| line_refused(refused, line_no)),
    };
    (line_no, line.len(), parsed)
}

/// One NDJSON line (without its newline): `None` when blank, else its entry, or the error naming the line (400 for
/// bad JSON, 422 for an invalid entry).
pub fn parse_ndjson_line(
    line: &str,
    line_no: u64,
    public: &(impl LocScope + ?Sized),
) -> Result<Option<Entry>, ApiError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    ingest::admit::validate_json(line, public).map(Some).map_err(|refused| line_refused(refused, line_no))
}

/// The answer to an NDJSON line refused: 400 not JSON, 422 invalid or too large for a page, 403 out of reach.
fn line_refused(refused: Refused, line_no: u64) -> ApiError {
    match refused {
        Refused::NotJson(e) => ApiError::bad_request(format!("line {line_no} is not valid JSON: {e}")),
        Refused::Invalid(errors) => {
            let details: Vec<Value> = errors.iter().map(|e| detail("line", line_no, e)).collect();
            ApiError::invalid(format!("line {line_no} is not a valid entry")).with("details", details)
        }
        Refused::TooLarge(e) => ApiError::invalid(format!("line {line_no} is too large for a page"))
            .with("details", [detail("line", line_no, &e)]),
        Refused::Forbidden(f) => forbidden(&f, Changes::Write).with(
            "details",
            [json!({"line": line_no, "field": "loc", "message": "not in a site this token may reach"})],
        ),
    }
}

/// What an NDJSON batch holds until its commit ends: its share of the budget of bodies in flight, and the bytes of
/// lines that share covers (a multiple of [`NDJSON_STEP`]).
#[derive(Default)]
struct Share {
    memory: BodyMemory,
    covered: usize,
}

/// An NDJSON body being stored through a [`Pipeline`]: the next batch is parsed while the database writes the last
/// one. If the request is dropped (the client left, or the API time limit), the batch in flight is aborted with it
/// and its transaction rolls back, unless it had already committed.
struct Ingest<'a> {
    state: &'a AppState,
    /// Whose body it is, for its share of the budget.
    writer: &'a Access,
    pipeline: Pipeline<Api, Share>,
}

impl Ingest<'_> {
    /// Adds a chunk's parsed lines to the batch, in order, committing each batch as it fills. At a bad line it
    /// stops and gives its error and number; what comes before it is in the batch.
    async fn take(&mut self, parsed: Vec<ParsedLine>) -> Result<Result<(), (ApiError, u64)>, ApiError> {
        for (line_no, len, entry) in parsed {
            let entry = match entry {
                Ok(Some(entry)) => entry,
                Ok(None) => continue,
                Err(error) => return Ok(Err((error, line_no))),
            };
            // The batch's share grows before the line joins it; a full budget stops the body at this line.
            let lines = self.pipeline.bytes() + len;
            if lines > self.pipeline.hold().covered {
                let covered = lines.next_multiple_of(NDJSON_STEP);
                let share = &mut self.pipeline.hold().memory;
                if let Err(busy) = self.state.body_budget.grow(share, self.writer, covered as u64).await {
                    let kept = format!("the lines before line {line_no} were stored (committed), none from it on");
                    return Ok(Err((busy.answer(&kept), line_no)));
                }
                self.pipeline.hold().covered = covered;
            }
            self.pipeline.push(entry, len).await.map_err(|e| self.failed(e))?;
        }
        Ok(Ok(()))
    }

    /// [`Ingest::take`] of every chunk being parsed, then of the `rest` of the lines, parsed as one more chunk.
    async fn take_all(
        &mut self,
        parsing: std::collections::VecDeque<Pending<Vec<ParsedLine>>>,
        rest: Vec<(u64, String)>,
        access: &Access,
    ) -> Result<Result<(), (ApiError, u64)>, ApiError> {
        for task in parsing {
            if let Err(bad) = self.take(parsed(task).await?).await? {
                return Ok(Err(bad));
            }
        }
        if rest.is_empty() {
            return Ok(Ok(()));
        }
        let (state, access) = (self.state.clone(), access.clone());
        let rest = ingest::background::run(move || {
            rest.into_iter().map(|(n, line)| parse_line(&state, &access, n, &line)).collect()
        });
        self.take(parsed(rest).await?).await
    }

    /// The answer to a batch that failed: a store error says how much was committed before it.
    fn failed(&self, e: Failed) -> ApiError {
        match e {
            Failed::Task(e) => {
                tracing::error!(error = %e, "an NDJSON batch's commit task failed");
                ApiError::internal()
            }
            Failed::Store(e) => {
                let totals = self.pipeline.totals();
                ApiError::from(e).with("committed", totals.received).with("stored", json!(totals))
            }
        }
    }

    /// Commits what is left, after the batch in flight.
    async fn commit(&mut self) -> Result<(), ApiError> {
        self.pipeline.finish().await.map_err(|e| self.failed(e))
    }

    /// Commits what came before the bad line, then returns `error` annotated with the line and what was stored.
    async fn stop(mut self, error: ApiError, line: u64) -> ApiError {
        count_upserts("rejected", 1);
        if let Err(e) = self.commit().await {
            return e;
        }
        let totals = self.pipeline.totals();
        error.with("line", line).with("committed", totals.received).with("stored", json!(totals))
    }
}

fn count_upserted(counts: &UpsertCounts) {
    count_upserts("created", counts.created);
    count_upserts("updated", counts.updated);
    count_upserts("unchanged", counts.unchanged);
}

fn count_deleted(counts: &DeleteCounts) {
    count_deletes("deleted", counts.deleted);
    count_deletes("missing", counts.missing);
}

fn detail(position: &str, at: u64, e: &FieldError) -> Value {
    json!({ position: at, "field": e.field, "message": e.message })
}

/// Delete one URL record.
#[utoipa::path(
    delete,
    path = "/api/v1/urls",
    tag = "urls",
    operation_id = "delete_url",
    params(DeleteQuery),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "A missing, repeated or unknown query parameter", body = ErrorBody),
        (status = 404, description = "No such URL is stored", body = ErrorBody),
        (status = 422, description = "The loc could never be stored (`details`)", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn delete_url(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    ApiQuery(query): ApiQuery<DeleteQuery>,
) -> Result<Response, ApiError> {
    let loc = query_loc(&query.loc, &Scope { sites: &state.sites, access: &access })
        .inspect_err(|_| count_deletes("rejected", 1))?;
    authorize(&state, &access, [&loc], Changes::Write).inspect_err(|_| count_deletes("rejected", 1))?;
    let counts = state.delete(&[loc]).await?;
    count_deleted(&counts);
    if counts.deleted == 0 {
        return Err(ApiError::not_found("no such URL is stored"));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Delete many URL records: a JSON array of locs, all valid or nothing is deleted.
#[utoipa::path(
    post,
    path = "/api/v1/urls/delete",
    tag = "urls",
    operation_id = "delete_urls",
    request_body(
        description = "The locs to delete",
        content((Vec<String> = "application/json", example = json!(["https://www.example.com/a"]))),
    ),
    responses(
        (status = 200, description = "Deleted; locs that were not stored count as missing", body = DeleteCounts),
        (status = 400, description = "Malformed JSON (`index`: the array element it is in)", body = ErrorBody),
        (status = 408, description = "The body sent nothing for `api.body_idle`, or arrived more slowly than \
                                      `api.min_receive_rate`; nothing was deleted", body = ErrorBody),
        (status = 413, description = "The body or its number of locs is too large", body = ErrorBody),
        (status = 415, description = "Not application/json, or a charset other than utf-8", body = ErrorBody),
        (status = 422, description = "Invalid locs (`details`, at most 1,000); nothing was deleted", body = ErrorBody),
        CommonErrors,
    ),
    security(("bearer" = [])),
)]
pub(crate) async fn delete_urls(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    body::format(&headers, false)?;
    let (bytes, _memory) =
        body::read_within(&state.body_budget, &access, &headers, body, state.config.api.max_json_bytes).await?;
    let scope = Scope { sites: &state.sites, access: &access };
    let locs = parse_json_locs(&bytes, state.config.api.max_json_entries, &scope)?;
    drop(bytes);
    authorize(&state, &access, &locs, Changes::Write).inspect_err(|_| count_deletes("rejected", locs.len() as u64))?;
    let counts = state.delete(&locs).await?;
    count_deleted(&counts);
    Ok(Json(counts).into_response())
}

/// A `POST /api/v1/urls/delete` body, a JSON array of locs, parsed like [`parse_json_entries`]: every loc, or the
/// error (422 `details`: `{index, field: "loc", message}`).
pub fn parse_json_locs(
    bytes: &[u8],
    max_entries: usize,
    public: &(impl LocScope + ?Sized),
) -> Result<Vec<Loc>, ApiError> {
    let mut locs = Vec::new();
    let mut problems = Rejections::default();
    let total = body::json_array(bytes, max_entries, |index, value: JsonScalar| {
        let parsed = match value {
            JsonScalar::String(s) => Loc::parse(&s, public),
            other => Err(format!("must be a string, not {}", other.kind())),
        };
        match parsed {
            Ok(loc) if problems.count == 0 => locs.push(loc),
            Ok(_) => {}
            Err(message) => {
                locs = Vec::new();
                problems.add(index, &[FieldError { field: "loc".into(), message }]);
            }
        }
    })?;
    if problems.count > 0 {
        count_deletes("rejected", problems.count);
        return Err(refused(problems, |n| format!("{n} of {total} locs are invalid; nothing was deleted")));
    }
    Ok(locs)
}

/// The query of `DELETE /api/v1/urls`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteQuery {
    /// The URL, normalized like a stored loc
    #[param(example = "https://www.example.com/about")]
    loc: String,
}

/// `loc` normalized like a stored loc (422 when it could never be stored).
pub(super) fn query_loc(raw: &str, public: &(impl LocScope + ?Sized)) -> Result<Loc, ApiError> {
    Loc::parse(raw, public).map_err(|message| {
        ApiError::invalid(format!("loc: {message}")).with("details", vec![json!({"field": "loc", "message": message})])
    })
}

#[cfg(test)]
mod tests {
    use crate::domain::PublicUrl;
    use axum::http::StatusCode;
    use proptest::prelude::*;

    use super::*;

    fn public() -> PublicUrl {
        PublicUrl::parse("https://www.example.com").unwrap()
    }

    /// What the handlers may answer for a body: stored, or a 400/413/422 with a message. Never a panic.
    fn check(bytes: &[u8]) {
        for result in [
            parse_json_entries(bytes, 8, &public()).map(|e| e.len()),
            parse_json_locs(bytes, 8, &public()).map(|l| l.len()),
        ] {
            match result {
                Ok(n) => assert!(n <= 8),
                Err(e) => {
                    let expected =
                        [StatusCode::BAD_REQUEST, StatusCode::PAYLOAD_TOO_LARGE, StatusCode::UNPROCESSABLE_ENTITY];
                    assert!(expected.contains(&e.status), "{} {}", e.status, e.message);
                    assert!(!e.message.is_empty());
                }
            }
        }
    }

    #[test]
    fn the_inputs_that_panicked_are_400_or_422() {
        let deep = format!("[{}{}]", "[".repeat(200), "]".repeat(200));
        for (body, status) in [
            (r#"[{"loc": "https://www.example.com/\ud800"}]"#, StatusCode::BAD_REQUEST),
            (r#"[{"loc": "https://www.example.com/", "priority": 1e400}]"#, StatusCode::BAD_REQUEST),
            (deep.as_str(), StatusCode::UNPROCESSABLE_ENTITY),
        ] {
            let e = parse_json_entries(body.as_bytes(), 8, &public()).unwrap_err();
            assert_eq!(e.status, status, "{body}: {}", e.message);
            check(body.as_bytes());
        }
    }

    /// The fuzz target's seeds (the inputs that once panicked among them) through the same checks.
    #[test]
    fn the_fuzz_seeds_get_an_answer() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/json_array");
        let mut seen = 0;
        for file in std::fs::read_dir(dir).unwrap() {
            check(&std::fs::read(file.unwrap().path()).unwrap());
            seen += 1;
        }
        assert!(seen >= 10, "{seen} seeds in {dir}");
    }

    #[test]
    fn details_say_when_problems_were_left_out() {
        let zeros = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        let e = parse_json_entries(zeros(MAX_DETAILS).as_bytes(), 5000, &public()).unwrap_err();
        assert_eq!(e.message, "1000 of 1000 entries are invalid; nothing was stored");
        assert_eq!(e.extra["details"].as_array().unwrap().len(), MAX_DETAILS);
        let e = parse_json_locs(zeros(MAX_DETAILS + 1).as_bytes(), 5000, &public()).unwrap_err();
        assert_eq!(
            e.message,
            "1001 of 1001 locs are invalid; nothing was deleted (details lists the first 1000 problems)"
        );
        assert_eq!(e.extra["details"].as_array().unwrap().len(), MAX_DETAILS);
    }

    /// (id, size) as a listed record.
    #[test]
    fn a_valid_array_gives_its_entries_in_order() {
        let body = br#"[{"loc": "https://www.example.com/b"}, {"loc": "https://www.example.com/a", "priority": 1}]"#;
        let entries = parse_json_entries(body, 8, &public()).unwrap();
        let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
        assert_eq!(locs, ["https://www.example.com/b", "https://www.example.com/a"]);
        let locs = parse_json_locs(br#"["https://www.example.com/x"]"#, 8, &public()).unwrap();
        assert_eq!(locs[0].as_str(), "https://www.example.com/x");
    }

    /// Pieces of JSON, hostile ones included, to build bodies that get past the first byte.
    const PIECES: &[&str] = &[
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "\"loc\"",
        "\"priority\"",
        "\"lastmod\"",
        "\"https://www.example.com/a\"",
        "\"\\ud800\"",
        "1e400",
        "-0.0",
        "0.5",
        "null",
        "true",
        "\"x\"",
        " ",
        "\"2024-05-01\"",
        "\"daily\"",
    ];

    proptest! {
        #[test]
        fn any_bytes_get_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            check(&bytes);
        }

        #[test]
        fn any_json_like_text_gets_an_answer(pieces in proptest::collection::vec(0..PIECES.len(), 0..60)) {
            let text: String = pieces.into_iter().map(|i| PIECES[i]).collect();
            check(text.as_bytes());
        }
    }
}
