//! `sitemapd import SOURCE…`: existing sitemaps into the store, through the write path the API uses.
//!
//! Sources are sitemap or sitemap index URLs, a site's robots.txt (its `Sitemap:` lines), local files (`.xml`,
//! `.xml.gz`, `.txt`, or NDJSON as `sitemapd export` writes it) and standard input (`-`). Indexes are followed,
//! at most [`MAX_LEVELS`] deep, each sitemap once; a loop is reported, not followed.
//!
//! The flow, in bounded memory whatever the input: a source's bytes (an HTTP body or a file) are read on the
//! blocking pool by [`read`] (gzip by magic, a streaming XML reader) into entries in the write API's JSON form;
//! each is admitted there as the API admits it ([`crate::ingest::admit`]) and sent over a bounded channel, holding
//! a share of a byte budget, to the one writer, which stores batches ([`crate::ingest::batch`]) with
//! [`Store::upsert_with`] and `Upsert::Import` (placement, byte accounting, no churn; with several sites each entry
//! goes to its own; a news sitemap's entry and the same URL's other entry make one record). An invalid entry goes
//! to the rejects file and the import goes on. At most `concurrency` sources are fetched and read at once.

pub mod fetch;
mod progress;
pub mod read;
pub mod sections;
mod summary;

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::Write as _;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

pub use self::fetch::{HttpOptions, Source};
pub use self::progress::Progress;
use self::read::{Found, ReadOptions, Report};
pub use self::sections::Sections;
pub use self::summary::{Counters, SectionCount, SourceOutcome, Summary};
use self::summary::{MAX_NOTICE_KINDS, not_followed};
use crate::domain::{Entry, FieldError, Section, Sites};
use crate::ingest::batch::{Batch, BatchLimits, store_or_reject};
use crate::ingest::retry::Backoff;
use crate::page::Limits;
use crate::placement::UpsertCounts;
use crate::store::{Store, StoreError};

/// The deepest chain of indexes followed: a source is level 1, a sitemap it lists level 2, …
pub const MAX_LEVELS: usize = 10;

/// How an import runs.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    pub sources: Vec<Source>,
    /// `(from, to)`: an entry URL starting with `from` starts with `to` instead.
    pub rewrites: Vec<(String, String)>,
    /// The section each entry goes to: none, one for all (`--section`), or each sitemap's file name's
    /// (`--sections-from-names`).
    pub sections: Sections,
    /// Validate and count; write nothing.
    pub dry_run: bool,
    /// Once every source was read whole and stored, delete the stored URLs of the sites the import wrote to that
    /// no source listed (the legacy sitemaps are the truth).
    pub delete_missing: bool,
    /// Where invalid entries go (NDJSON: source, line, loc, reason, errors); created (emptied) at the start.
    pub rejects: Option<PathBuf>,
    /// Sources fetched and read at once.
    pub concurrency: usize,
    /// The most sitemaps followed from indexes and robots.txt files (beyond the sources given): a bound on what an
    /// index that keeps listing new indexes can make the import fetch and remember.
    pub max_sitemaps: usize,
    /// Entries a write stores at once.
    pub batch: usize,
    /// Tries of a batch while the store is unavailable, and the first wait between them (doubling).
    pub store_tries: u32,
    pub store_retry_base: Duration,
    pub limits: Limits,
    /// The longest NDJSON line (the API's `max_line_bytes`).
    pub max_line_bytes: u64,
    pub http: HttpOptions,
    pub progress: Progress,
}

/// An invalid entry, as the rejects file has it.
#[derive(Debug, Serialize)]
struct Reject {
    source: String,
    line: u64,
    loc: Option<String>,
    reason: String,
    errors: Vec<FieldError>,
    /// The site and the digest of its loc, when the loc itself is valid: a URL the sources still list, for
    /// `--delete-missing`.
    #[serde(skip)]
    listed: Option<(i64, u64)>,
    /// It is no entry at all (a text line that is no URL): no stored URL it could be.
    #[serde(skip)]
    no_loc: bool,
    /// Its share of the byte budget, until it is written.
    #[serde(skip)]
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Where an entry was read: its source and line.
type Origin = (Arc<str>, u64);

/// What the readers send the writer: an entry holds its share of the byte budget ([`BUDGET_BYTES`]) until its
/// batch is stored.
enum Msg {
    Entry(Entry, Origin, tokio::sync::OwnedSemaphorePermit),
    Reject(Reject),
}

/// The most bytes of entries (their JSON's size) read and not yet stored, over every reader: with the batch's
/// count, what bounds the import's memory whatever its entries hold.
const BUDGET_BYTES: usize = 64 * 1024 * 1024;
/// A batch is stored once it holds this many bytes, whatever its count (half the budget: never a deadlock).
const BATCH_BYTES: usize = BUDGET_BYTES / 2;

/// One link of a chain of indexes: a sitemap and the index that listed it (shared, not copied, by its children).
#[derive(Debug)]
struct Link {
    /// As shown.
    name: String,
    /// As compared ([`Source::key`]).
    key: String,
    parent: Option<Arc<Link>>,
    level: usize,
}

impl Link {
    /// The chain from the first source to this one.
    fn links(&self) -> Vec<&Link> {
        let mut links = vec![self];
        let mut at = self.parent.as_deref();
        while let Some(link) = at {
            links.push(link);
            at = link.parent.as_deref();
        }
        links.reverse();
        links
    }

    fn names(&self) -> Vec<&str> {
        self.links().into_iter().map(|l| l.name.as_str()).collect()
    }

    fn keys(&self) -> Vec<&str> {
        self.links().into_iter().map(|l| l.key.as_str()).collect()
    }
}

/// A source to read, and the chain of indexes that led to it (itself last).
#[derive(Clone, Debug)]
struct Job {
    source: Source,
    chain: Arc<Link>,
    /// The directory the files a local index lists must lie in: the first local source's ([`fetch::Base::Dir`]).
    root: Option<PathBuf>,
    /// The section its entries go to ([`Sections::of`]); what it lists inherits it when their names say none.
    section: Option<Section>,
}

/// What the jobs share.
struct Ctx {
    client: reqwest::Client,
    http: HttpOptions,
    sites: Arc<Sites>,
    limits: Limits,
    read: ReadOptions,
    counters: Arc<Counters>,
    tx: mpsc::Sender<Msg>,
    budget: Arc<tokio::sync::Semaphore>,
    runtime: tokio::runtime::Handle,
}

impl Ctx {
    /// The site and digest of `raw` when it is a valid loc under a site.
    fn listed(&self, raw: &str) -> Option<(i64, u64)> {
        let loc = crate::domain::Loc::parse(raw, &*self.sites).ok()?;
        Some((self.sites.for_loc(loc.as_str())?.id, digest(loc.as_str())))
    }
}

/// A loc's digest, for the set of URLs the sources list (`--delete-missing`): 8 bytes a URL, not the URL. Two locs
/// with one digest (about one chance in 2^64 a pair) would keep a URL that is gone: the safe side.
fn digest(loc: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    loc.hash(&mut h);
    h.finish()
}

/// The URLs the sources listed (valid, or rejected with a valid loc), by site: what `--delete-missing` keeps.
type Listed = BTreeMap<i64, HashSet<u64>>;

/// Imports `options.sources` into `store` (`None` with `dry_run`: nothing is opened or written), validating each
/// entry against `sites`. Errors only when it cannot start (the rejects file, the HTTP client); what happens to
/// each source and the store is in the [`Summary`].
pub async fn import(
    store: Option<Arc<dyn Store>>,
    sites: Arc<Sites>,
    options: ImportOptions,
) -> anyhow::Result<Summary> {
    let started = Instant::now();
    if let Some(path) = &options.rejects {
        // Emptying the rejects file must never empty a source (a hard link to it included).
        if options.sources.iter().any(|s| matches!(s, Source::File(f) if fetch::same_file(f, path))) {
            anyhow::bail!("the rejects file {} is one of the sources", path.display());
        }
    }
    let rejects = match &options.rejects {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let counters = Arc::new(Counters::default());
    let (tx, rx) = mpsc::channel(options.batch.max(1) * 2);
    let writer = tokio::spawn(write(
        rx,
        Writer {
            store: if options.dry_run { None } else { store.clone() },
            sites: sites.clone(),
            batch: options.batch.max(1),
            counters: counters.clone(),
            keep_listed: options.delete_missing,
            retry: Backoff { retries: options.store_tries.max(1) - 1, first: options.store_retry_base, max: None },
        },
        rejects,
    ));
    let ctx = Arc::new(Ctx {
        client: fetch::client(&options.http)?,
        http: options.http.clone(),
        sites: sites.clone(),
        limits: options.limits,
        read: ReadOptions {
            robots: false,
            rewrites: options.rewrites.clone(),
            max_line_bytes: options.max_line_bytes,
            section: None,
            section_replaces: options.sections.replaces(),
        },
        counters: counters.clone(),
        tx,
        budget: Arc::new(tokio::sync::Semaphore::new(BUDGET_BYTES)),
        runtime: tokio::runtime::Handle::current(),
    });
    let progress = options.progress.start(counters.clone());

    let mut summary = Summary { dry_run: options.dry_run, rejects_file: options.rejects.clone(), ..Summary::default() };
    let mut queue: VecDeque<Job> = VecDeque::new();
    let mut seen = HashSet::new();
    for source in options.sources {
        if seen.insert(source.key()) {
            let link = Link { name: source.to_string(), key: source.key(), parent: None, level: 1 };
            let section = options.sections.of(&source, None);
            queue.push_back(Job { chain: Arc::new(link), source, root: None, section });
        }
    }
    counters.sources_total.store(queue.len() as u64, Ordering::Relaxed);
    // Sitemaps that indexes listed and that are followed, at most `max_sitemaps`.
    let mut followed = 0usize;
    let mut running = JoinSet::new();
    let mut names = std::collections::HashMap::new();
    loop {
        if ctx.tx.is_closed() && !queue.is_empty() {
            // The writer stopped (the store failed): nothing more is read.
            summary.not_read += queue.len() as u64;
            queue.clear();
        }
        while running.len() < options.concurrency.max(1) {
            let Some(job) = queue.pop_front() else { break };
            let name = job.source.to_string();
            names.insert(running.spawn(run_job(job, ctx.clone())).id(), name);
        }
        let Some(done) = running.join_next_with_id().await else { break };
        let (job, outcome, report, listed) = match done {
            Ok((id, done)) => {
                names.remove(&id);
                done
            }
            Err(e) => {
                // A reader that panicked: that source failed, and the import goes on.
                let source = names.remove(&e.id()).unwrap_or_default();
                tracing::error!(error = %e, source, "a source's reader failed");
                counters.sources_done.fetch_add(1, Ordering::Relaxed);
                let error = Some(format!("its reader failed: {e}"));
                summary.sources.push(SourceOutcome { source, format: None, items: 0, cut: None, error });
                continue;
            }
        };
        counters.sources_done.fetch_add(1, Ordering::Relaxed);
        for (notice, n) in report.notices {
            let room = summary.notices.len() < MAX_NOTICE_KINDS || summary.notices.contains_key(&notice);
            *summary.notices.entry(if room { notice } else { "other notices".to_owned() }).or_default() += n;
        }
        for child in listed {
            if lists_removed_urls(&child.to_string()) {
                // The URLs a site deleted, listed so that crawlers drop them soon: importing them would bring
                // them back. Given as a source itself, it is read.
                let notice = "a removed-URLs sitemap (sitemap-removed.xml) listed: not read, its URLs are gone";
                *summary.notices.entry(notice.to_owned()).or_default() += 1;
                continue;
            }
            let key = child.key();
            if seen.contains(&key) {
                let name = child.to_string();
                if job.chain.keys().contains(&key.as_str()) {
                    let chain = job.chain.names().join(" → ");
                    not_followed(&mut summary, format!("{name}: a loop of indexes ({chain} → {name})"));
                } else {
                    *summary.notices.entry("a sitemap listed twice: read once".to_owned()).or_default() += 1;
                }
                continue;
            }
            if job.chain.level >= MAX_LEVELS {
                not_followed(&mut summary, format!("{child}: listed {MAX_LEVELS} levels deep (by {})", job.source));
                continue;
            }
            if followed >= options.max_sitemaps {
                not_followed(
                    &mut summary,
                    format!("{child}: more than {} sitemaps (--max-sitemaps)", options.max_sitemaps),
                );
                continue;
            }
            followed += 1;
            seen.insert(key.clone());
            let link =
                Link { name: child.to_string(), key, parent: Some(job.chain.clone()), level: job.chain.level + 1 };
            let section = options.sections.of(&child, job.section.as_ref());
            queue.push_back(Job { source: child, chain: Arc::new(link), root: job.root.clone(), section });
            counters.sources_total.fetch_add(1, Ordering::Relaxed);
        }
        progress.source_done(&outcome);
        summary.sources.push(outcome);
    }
    drop(ctx);
    let written = writer.await.context("the writer task failed")?;
    for outcome in &mut summary.sources {
        if written.unstored.contains(&outcome.source) {
            outcome.error.get_or_insert_with(|| "not all its entries were stored: the import stopped".to_owned());
        }
    }
    summary.rejects_error = written.rejects_error;
    summary.created = written.counts.created;
    summary.updated = written.counts.updated;
    summary.unchanged = written.counts.unchanged;
    summary.valid = written.valid;
    summary.rejected = written.rejected;
    summary.first_reject = written.first_reject;
    summary.error = written.error;
    summary.entries = counters.entries.load(Ordering::Relaxed);
    if options.sections != Sections::Off || written.by_section.keys().any(|name| !name.is_empty()) {
        summary.by_section = SectionCount::list(written.by_section);
    }
    if options.delete_missing {
        match (&store, written.listed) {
            _ if options.dry_run => summary.delete_skipped = Some("a dry run reads no stored URL".to_owned()),
            _ if summary.all_rejected() => summary.delete_skipped = Some("every entry was rejected".to_owned()),
            _ if !summary.success() => {
                summary.delete_skipped = Some("not every source was read whole and stored".to_owned());
            }
            _ if written.unknown_locs > 0 => {
                summary.delete_skipped =
                    Some(format!("{} rejected entries have no loc that could be read", written.unknown_locs));
            }
            (Some(store), Some(listed)) if !listed.is_empty() => {
                match delete_missing(&**store, &sites, &listed).await {
                    Ok(deleted) => summary.deleted = deleted,
                    Err((deleted, e)) => {
                        summary.deleted = deleted;
                        summary.error = Some(format!("deleting the URLs no source listed failed: {e}"));
                    }
                }
            }
            _ => summary.delete_skipped = Some("the sources listed no valid URL".to_owned()),
        }
    }
    summary.elapsed = started.elapsed();
    progress.finish();
    Ok(summary)
}

/// Deletes, through the write path, the stored URLs of each site in `listed` whose digest is not listed there:
/// read by keyset a listing at a time, deleted a listing's worth at a time. Returns how many; on a store error,
/// how many before it.
async fn delete_missing(store: &dyn Store, sites: &Sites, listed: &Listed) -> Result<u64, (u64, StoreError)> {
    let mut deleted = 0;
    for (site, keep) in listed {
        let mut after = 0;
        loop {
            let batch = store.list_after(Some(*site), after, 1000).await.map_err(|e| (deleted, e))?;
            let Some(last) = batch.last() else { break };
            after = last.url.id;
            let gone: Vec<crate::domain::Loc> = batch
                .iter()
                .filter(|r| !keep.contains(&digest(&r.url.loc)))
                .filter_map(|r| crate::domain::Loc::parse(&r.url.loc, sites).ok())
                .collect();
            if !gone.is_empty() {
                deleted += store.delete(&gone).await.map_err(|e| (deleted, e))?.counts.deleted;
            }
        }
    }
    Ok(deleted)
}

/// Reads one source: its outcome, what reading it reported, and the sitemaps it lists (to follow).
async fn run_job(mut job: Job, ctx: Arc<Ctx>) -> (Job, SourceOutcome, Report, Vec<Source>) {
    let name = job.source.to_string();
    let mut outcome = SourceOutcome { source: name.clone(), format: None, items: 0, cut: None, error: None };
    // A file an index listed stays in the first local source's directory, checked again on the file opened.
    let within = job.root.clone().filter(|_| job.chain.parent.is_some());
    let opened = match fetch::open(&job.source, within.as_deref(), &ctx.client, &ctx.http).await {
        Ok(opened) => opened,
        Err(e) => {
            outcome.error = Some(e);
            return (job, outcome, Report::default(), Vec::new());
        }
    };
    let mut base = opened.base.clone();
    if let fetch::Base::Dir { root, .. } = &mut base {
        // What a file lists stays in the first local source's directory, however deep the chain.
        match &job.root {
            Some(first) => root.clone_from(first),
            None => job.root = Some(root.clone()),
        }
    }
    let mut options = ctx.read.clone();
    options.robots = job.source.is_robots();
    options.section.clone_from(&job.section);
    let ctx2 = ctx.clone();
    let source_name: Arc<str> = name.clone().into();
    let blocking = tokio::task::spawn_blocking(move || {
        let mut listed = Vec::new();
        let mut stopped = false;
        let mut handle = |found: Found| {
            let flow = handle(&ctx2, &source_name, found, &mut listed);
            stopped |= flow.is_break();
            flow
        };
        let result = read::read(opened.reader, &options, &mut handle);
        (result, listed, stopped)
    })
    .await;
    let (result, listed, stopped) = match blocking {
        Ok(pair) => pair,
        Err(e) => {
            outcome.error = Some(format!("its reader failed: {e}"));
            return (job, outcome, Report::default(), Vec::new());
        }
    };
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            outcome.error = Some(e.message);
            *e.report
        }
    };
    outcome.format = report.format.map(read::Format::as_str);
    outcome.items = report.items;
    outcome.cut = report.cut.clone();
    if stopped {
        outcome.error.get_or_insert_with(|| "not read whole: the import stopped (the store failed)".to_owned());
    }
    if let Some(first) = report.unreadable.first() {
        let more = report.unreadable.len() - 1;
        let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
        outcome.error.get_or_insert_with(|| format!("a sitemap it lists cannot be read: {first}{more}"));
    }
    if report.format == Some(read::Format::Robots) && report.items == 0 {
        outcome.error.get_or_insert_with(|| "it lists no Sitemap: line".to_owned());
    }
    // The sitemaps it lists, resolved against where it was read from.
    let mut children = Vec::new();
    for (line, loc) in listed {
        match base.resolve(&loc) {
            Ok(child) => children.push(child),
            Err(e) => {
                let reason = format!("the sitemap {loc:?} (line {line}) cannot be read: {e}");
                outcome.error.get_or_insert(reason);
            }
        }
    }
    (job, outcome, report, children)
}

/// Whether `url` names a removed-URLs sitemap as sitemapd serves it (`…/sitemap-removed.xml[.gz]`, any query).
fn lists_removed_urls(url: &str) -> bool {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or_default();
    matches!(name, "sitemap-removed.xml" | "sitemap-removed.xml.gz")
}

/// One item a reader found: an entry validated as the API validates it (then sent to the writer, or rejected), or
/// a listed sitemap (kept). `Break` when the writer is gone (the store failed): reading stops.
fn handle(ctx: &Ctx, source: &Arc<str>, found: Found, listed: &mut Vec<(u64, String)>) -> ControlFlow<()> {
    let (line, loc, json): (u64, Option<String>, String) = match found {
        Found::Sitemap { line, loc } => {
            listed.push((line, loc));
            return ControlFlow::Continue(());
        }
        Found::Invalid { line, loc, reason } => {
            ctx.counters.entries.fetch_add(1, Ordering::Relaxed);
            let listed = loc.as_deref().and_then(|l| ctx.listed(&ctx.read.rewrite(l)));
            let reject = Reject {
                source: source.to_string(),
                line,
                loc,
                reason,
                errors: Vec::new(),
                listed,
                no_loc: false,
                permit: None,
            };
            return send_reject(ctx, reject);
        }
        Found::NotAnEntry { line, reason } => {
            ctx.counters.entries.fetch_add(1, Ordering::Relaxed);
            let reject = Reject {
                source: source.to_string(),
                line,
                loc: None,
                reason,
                errors: Vec::new(),
                listed: None,
                no_loc: true,
                permit: None,
            };
            return send_reject(ctx, reject);
        }
        Found::Entry { line, loc, json } => (line, loc, json),
    };
    ctx.counters.entries.fetch_add(1, Ordering::Relaxed);
    match crate::ingest::admit::admit_json(&json, &*ctx.sites, ctx.limits) {
        Ok(entry) => {
            // Its share of the budget: what its JSON took.
            let Some(permit) = share(ctx, json.len()) else { return ControlFlow::Break(()) };
            send(ctx, Msg::Entry(entry, (source.clone(), line), permit))
        }
        Err(refused) => {
            let errors = refused.into_errors();
            let reason = errors
                .iter()
                .map(|e| if e.field.is_empty() { e.message.clone() } else { format!("{}: {}", e.field, e.message) })
                .collect::<Vec<_>>()
                .join("; ");
            let listed = loc.as_deref().and_then(|l| ctx.listed(&ctx.read.rewrite(l)));
            let reject =
                Reject { source: source.to_string(), line, loc, reason, errors, listed, no_loc: false, permit: None };
            send_reject(ctx, reject)
        }
    }
}

/// Sends a reject with its share of the byte budget (its loc, reason and errors), waited for as an entry's is.
fn send_reject(ctx: &Ctx, mut reject: Reject) -> ControlFlow<()> {
    let size = reject.loc.as_ref().map_or(0, String::len)
        + reject.reason.len()
        + reject.errors.iter().map(|e| e.field.len() + e.message.len()).sum::<usize>();
    let Some(permit) = share(ctx, size) else { return ControlFlow::Break(()) };
    reject.permit = Some(permit);
    send(ctx, Msg::Reject(reject))
}

/// A share of `bytes` of the byte budget (at least 1, at most [`BATCH_BYTES`]), waited for while the writer
/// catches up; `None` once the import stopped.
fn share(ctx: &Ctx, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let share = u32::try_from(bytes.clamp(1, BATCH_BYTES)).unwrap_or(u32::MAX);
    ctx.runtime.block_on(ctx.budget.clone().acquire_many_owned(share)).ok()
}

fn send(ctx: &Ctx, msg: Msg) -> ControlFlow<()> {
    match ctx.tx.blocking_send(msg) {
        Ok(()) => ControlFlow::Continue(()),
        Err(_) => ControlFlow::Break(()),
    }
}

/// What the writer did.
struct Written {
    counts: UpsertCounts,
    valid: u64,
    rejected: u64,
    /// The first reject: where and why ([`Summary::first_reject`]).
    first_reject: Option<String>,
    error: Option<String>,
    /// Kept only for `--delete-missing`.
    listed: Option<Listed>,
    /// When the store failed: the sources whose entries were not all stored.
    unstored: std::collections::BTreeSet<String>,
    /// Rejected entries whose loc could not be read.
    unknown_locs: u64,
    rejects_error: Option<String>,
    /// The entries stored (or, in a dry run, valid) by section name (`""`: the default section).
    by_section: BTreeMap<String, u64>,
}

/// The one writer: stores the valid entries in batches of `batch` (none with no store: a dry run) and writes the
/// rejects file. Stops at a store error it cannot get past: the readers then stop too (their sends fail).
/// What the writer writes with.
struct Writer {
    /// `None`: a dry run.
    store: Option<Arc<dyn Store>>,
    sites: Arc<Sites>,
    batch: usize,
    counters: Arc<Counters>,
    /// Keep the listed URLs' digests (`--delete-missing`).
    keep_listed: bool,
    /// Retries of a batch while the store is unavailable, and the waits.
    retry: Backoff,
}

async fn write(
    mut rx: mpsc::Receiver<Msg>,
    Writer { store, sites, batch, counters, keep_listed, retry }: Writer,
    mut rejects: Option<std::io::BufWriter<std::fs::File>>,
) -> Written {
    let mut written = Written {
        counts: UpsertCounts::default(),
        valid: 0,
        rejected: 0,
        first_reject: None,
        error: None,
        listed: keep_listed.then(Listed::new),
        unstored: Default::default(),
        unknown_locs: 0,
        rejects_error: None,
        by_section: BTreeMap::new(),
    };
    // Each entry with where it was read and its share of the byte budget, held until its batch is stored.
    let mut batch: Batch<(Origin, tokio::sync::OwnedSemaphorePermit)> =
        Batch::with_capacity(BatchLimits { entries: batch, bytes: BATCH_BYTES });
    let mut reject_lines: Vec<Reject> = Vec::new();
    loop {
        let msg = rx.recv().await;
        let end = msg.is_none();
        match msg {
            Some(Msg::Entry(entry, origin, permit)) => {
                if let (Some(listed), Some(site)) = (&mut written.listed, sites.for_loc(entry.loc.as_str())) {
                    listed.entry(site.id).or_default().insert(digest(entry.loc.as_str()));
                }
                let bytes = permit.num_permits();
                batch.push(entry, (origin, permit), bytes);
            }
            Some(Msg::Reject(reject)) => reject_lines.push(reject),
            None => {}
        }
        if batch.is_full() || (end && !batch.is_empty()) {
            let before = reject_lines.len();
            let mut counts = UpsertCounts::default();
            let mut refused = Vec::new();
            let stored = match &store {
                Some(store) => {
                    let mut reject = |index, e| {
                        refused.push(index);
                        reject_lines.push(store_reject(&sites, &batch, index, &e));
                    };
                    store_or_reject(&**store, batch.entries(), retry, &mut reject, &mut counts).await
                }
                None => Ok(()),
            };
            let done = counts.received.max(if stored.is_ok() { batch.entries().len() as u64 } else { 0 });
            // The entries stored are the first `done` (one at a time after a refusal), less those refused.
            let stored_entries = batch.entries().iter().take(usize::try_from(done).unwrap_or(usize::MAX));
            for (index, entry) in stored_entries.enumerate() {
                if !refused.contains(&index) {
                    count_section(&mut written.by_section, entry.section.as_ref());
                }
            }
            written.counts += counts;
            let valid = done.saturating_sub((reject_lines.len() - before) as u64);
            written.valid += valid;
            counters.written.fetch_add(valid, Ordering::Relaxed);
            if let Err(e) = stored {
                written.error = Some(format!(
                    "the store failed ({e}); what was counted as stored is stored, the rest of that batch and what \
                     was read after it is not"
                ));
                // The sources whose entries were not stored: this batch's, and those read but not yet written.
                rx.close();
                written.unstored.extend(batch.tags().iter().map(|((s, _), _)| s.to_string()));
                while let Some(msg) = rx.recv().await {
                    match msg {
                        Msg::Entry(_, (source, _), _) => {
                            written.unstored.insert(source.to_string());
                        }
                        Msg::Reject(reject) => reject_lines.push(reject),
                    }
                }
                write_rejects(&mut written, &mut reject_lines, &mut rejects, &counters);
                break;
            }
            batch.clear();
        }
        write_rejects(&mut written, &mut reject_lines, &mut rejects, &counters);
        if end {
            break;
        }
    }
    if let Some(mut file) = rejects {
        // A regular file is synced; /dev/null or a pipe cannot be, and need not.
        let regular = file.get_ref().metadata().is_ok_and(|m| m.is_file());
        if let Err(e) = file.flush().and_then(|()| if regular { file.get_ref().sync_all() } else { Ok(()) }) {
            written.rejects_error.get_or_insert(format!("cannot write the rejects file: {e}"));
        }
    }
    written
}

/// Counts one entry stored in `section` (`""`: the default section), copying its name the first time only.
fn count_section(counts: &mut BTreeMap<String, u64>, section: Option<&Section>) {
    let name = section.map_or("", Section::as_str);
    match counts.get_mut(name) {
        Some(n) => *n += 1,
        None => {
            counts.insert(name.to_owned(), 1);
        }
    }
}

/// Writes `reject_lines` to the rejects file (once it failed, no more) and counts them.
fn write_rejects(
    written: &mut Written,
    reject_lines: &mut Vec<Reject>,
    rejects: &mut Option<std::io::BufWriter<std::fs::File>>,
    counters: &Counters,
) {
    for reject in reject_lines.drain(..) {
        if let (Some(listed), Some((site, digest))) = (&mut written.listed, reject.listed) {
            listed.entry(site).or_default().insert(digest);
        }
        // A reject whose loc is unknown (a line too long, not UTF-8, not JSON) may be any stored URL.
        written.unknown_locs += u64::from(reject.loc.is_none() && !reject.no_loc);
        written.rejected += 1;
        written
            .first_reject
            .get_or_insert_with(|| format!("{} line {}: {}", reject.source, reject.line, reject.reason));
        counters.rejected.fetch_add(1, Ordering::Relaxed);
        if written.rejects_error.is_none()
            && let Some(file) = rejects
            && let Err(e) = serde_json::to_writer(&mut *file, &reject)
                .map_err(std::io::Error::from)
                .and_then(|()| file.write_all(b"\n"))
        {
            written.rejects_error = Some(format!("cannot write the rejects file: {e}"));
        }
    }
}

/// The reject of the entry at `index` of `batch` that the store refused on its own (too large for a page, under no
/// site: admission's rules, checked again).
fn store_reject<T>(sites: &Sites, batch: &Batch<(Origin, T)>, index: usize, e: &StoreError) -> Reject {
    let ((source, line), _) = &batch.tags()[index];
    let loc = batch.entries()[index].loc.as_str();
    Reject {
        source: source.to_string(),
        line: *line,
        loc: Some(loc.to_owned()),
        reason: e.to_string(),
        errors: Vec::new(),
        listed: sites.for_loc(loc).map(|site| (site.id, digest(loc))),
        no_loc: false,
        permit: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_removed_urls_sitemap_is_known_by_its_name() {
        for yes in ["https://x.test/sitemap-removed.xml", "https://x.test/a/sitemap-removed.xml.gz?x=1"] {
            assert!(super::lists_removed_urls(yes), "{yes}");
        }
        for no in
            ["https://x.test/sitemap-removed-1.xml", "https://x.test/sitemap-removed.xml/x", "https://x.test/r.xml"]
        {
            assert!(!super::lists_removed_urls(no), "{no}");
        }
    }
}
