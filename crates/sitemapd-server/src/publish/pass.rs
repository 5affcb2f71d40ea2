//! One pass over one target: claim its lease, read what it holds, fetch the indexes and hold them, upload the
//! children whose version moved (at most [`UPLOADS_IN_FLIGHT`] at once, each streamed through a bounded buffer),
//! then the section indexes and `sitemap.xml`, then mark what no index names and delete what has been marked for
//! longer than the grace, and release the lease with the outcome (module doc of [`super`]).
//!
//! Every file is fetched from the service's own routes in process (the feeds' router, which holds the sitemaps'),
//! for the site's host, uncompressed (`Accept-Encoding: identity`: a `.gz` file is a gzip file either way), with
//! `Cache-Control: no-cache` (the page table read now, not as last read) and, for a child, `If-None-Match` with the
//! version last uploaded to the target: a 304 uploads nothing.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode, header};
use bytes::Bytes;
use futures_util::StreamExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{Attribute, Attributes, ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;
use tower::ServiceExt;

use super::{
    INDEX_FILE, LEASE, Manifest, NO_PAGES, PAUSE_VARIABLE, PassReport, RESTARTS, UPLOAD_BUFFER, UPLOADS_IN_FLIGHT,
    USER_AGENT, index_files, index_version, object_key, rewrite_index,
};
use crate::config::{Config, Forms};
use crate::domain::{PublicUrl, Site, Sites};
use crate::sitemap::Serving;
use crate::store::{PublishLog, PublishedObject};
use crate::telemetry;

/// One configured target, opened.
#[derive(Clone)]
pub struct Target {
    pub site: i64,
    pub site_name: String,
    /// The target's URL as configured (with its trailing `/`): its name in the database.
    pub url: url::Url,
    /// The URL as logs, metrics and the summary show it (it holds no secret).
    pub label: String,
    /// Where the published files are served (`publish.public_urls`, else the site's public URL).
    pub public_url: PublicUrl,
    pub store: Arc<dyn ObjectStore>,
    /// The objects' key prefix (`a/b` of `s3://bucket/a/b/`; none for a directory).
    pub prefix: Path,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("site", &self.site_name).field("url", &self.label).finish_non_exhaustive()
    }
}

impl Target {
    /// Whether the target is a local directory, which keeps no metadata (no `Content-Type`, no `Cache-Control`).
    fn is_directory(&self) -> bool {
        self.url.scheme() == "file"
    }
}

/// Every configured target (`publish.targets`), opened, in the order configured.
pub fn targets(config: &Config, sites: &Sites) -> anyhow::Result<Vec<Target>> {
    config
        .publish
        .targets
        .iter()
        .map(|t| {
            let site = sites.by_name(&t.site).with_context(|| format!("the site {:?} is not configured", t.site))?;
            let (store, prefix) = super::open(&t.url)?;
            let public_url =
                config.publish.public_urls.for_site(&site.name).cloned().unwrap_or_else(|| site.public_url.clone());
            Ok(Target {
                site: site.id,
                site_name: site.name.clone(),
                url: t.url.clone(),
                label: t.url.to_string(),
                public_url,
                store,
                prefix,
            })
        })
        .collect()
}

/// How a pass works.
#[derive(Clone, Debug)]
pub struct PassOptions {
    /// Upload every file, whatever the target holds (`sitemapd publish --full`).
    pub full: bool,
    /// How long an object no index names is kept (`publish.grace`).
    pub grace: Duration,
    /// The page forms published (`publish.forms`).
    pub forms: Forms,
    /// The objects' `Cache-Control` (`publish.cache_control`; empty: none).
    pub cache_control: String,
    /// The test hook's point ([`PAUSE_VARIABLE`]).
    pub pause_at: Option<String>,
    /// The target's lease ([`LEASE`]; tests shorten it).
    pub lease: Duration,
}

impl PassOptions {
    /// The options of `config`, the test hook's point from the environment.
    pub fn from_config(config: &Config, full: bool) -> Self {
        Self {
            full,
            grace: config.publish.grace,
            forms: config.publish.forms,
            cache_control: config.publish.cache_control.clone(),
            pause_at: std::env::var(PAUSE_VARIABLE).ok().filter(|p| !p.is_empty()),
            lease: config.tuning.publish_lease,
        }
    }
}

impl Default for PassOptions {
    fn default() -> Self {
        Self {
            full: false,
            grace: Duration::from_secs(86_400),
            forms: Forms::default(),
            cache_control: String::new(),
            pause_at: None,
            lease: LEASE,
        }
    }
}

/// What a pass tells of its progress (`sitemapd publish`'s progress bar).
pub trait Progress: Send + Sync {
    /// The files of the manifest: `n` (again after a restart).
    fn total(&self, n: u64);
    /// The file at `key` is current on the target; `uploaded_bytes` were uploaded for it (0: it was).
    fn done(&self, key: &str, uploaded_bytes: u64);
}

/// No progress shown.
pub struct NoProgress;

impl Progress for NoProgress {
    fn total(&self, _: u64) {}
    fn done(&self, _: &str, _: u64) {}
}

/// Runs one pass of `target` (module doc). `Busy` when another process holds the target's lease; an error when the
/// pass failed (recorded as the target's failure, its message without secrets).
pub async fn pass<S: Serving>(
    state: &S,
    publish: &dyn PublishLog,
    target: &Target,
    options: &PassOptions,
    progress: &dyn Progress,
) -> anyhow::Result<PassReport> {
    let started = Instant::now();
    let name = target.url.as_str();
    let claim = publish.publish_claim(target.site, name, options.lease).await.map_err(|e| {
        telemetry::publish_pass(&target.label, "failed");
        anyhow::anyhow!("cannot claim the target's lease: {e}")
    })?;
    let Some(claim) = claim else {
        telemetry::publish_pass(&target.label, "busy");
        return Ok(PassReport::Busy);
    };
    let site = state.sites().by_id(target.site).cloned();
    let run = Run {
        state,
        publish,
        target,
        options,
        progress,
        claim,
        router: crate::feed::router(state.clone()).with_state(state.clone()),
        pause: Pause { at: options.pause_at.clone(), paused: AtomicBool::new(false) },
        stop: AtomicBool::new(false),
        counts: Counts::default(),
    };
    let outcome = async {
        let site = site.with_context(|| format!("the site {} is not configured", target.site_name))?;
        run.pause.point("claimed").await;
        tokio::select! {
            done = run.body(&site) => done,
            lost = run.keep_lease() => Err(lost),
        }
    }
    .await
    .map_err(|e| anyhow::anyhow!(scrub(&one_line(&e))));
    telemetry::publish_pending(&target.label, 0);
    let released = match &outcome {
        Ok(_) => publish.publish_release(name, claim, Ok(())).await,
        Err(e) => publish.publish_release(name, claim, Err(&e.to_string())).await,
    };
    if let Err(e) = released {
        // The lease ends by itself; the next pass completes what this one did not record.
        tracing::warn!(target = %target.label, error = %e, "publish: cannot release the target's lease");
    }
    telemetry::publish_pass(&target.label, if outcome.is_ok() { "complete" } else { "failed" });
    let warning = outcome?;
    let c = &run.counts;
    Ok(PassReport::Done {
        uploaded: c.uploaded.load(Ordering::Relaxed),
        bytes: c.bytes.load(Ordering::Relaxed),
        unchanged: c.unchanged.load(Ordering::Relaxed),
        marked: c.marked.load(Ordering::Relaxed),
        deleted: c.deleted.load(Ordering::Relaxed),
        awaiting: c.awaiting.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
        warning,
    })
}

/// A pass's counts.
#[derive(Default)]
struct Counts {
    uploaded: AtomicU64,
    bytes: AtomicU64,
    unchanged: AtomicU64,
    marked: AtomicU64,
    deleted: AtomicU64,
    awaiting: AtomicU64,
    /// Children uploaded and recorded, for the test hook's `child-uploaded:N` and `child-recorded:N`.
    children_uploaded: AtomicU64,
    children_recorded: AtomicU64,
    /// Files still to fetch or upload (the pending gauge).
    pending: AtomicU64,
}

/// The test hook ([`PAUSE_VARIABLE`]): at its point the pass writes one line to stderr and waits forever; so does
/// every other step of the pass after it, so that the pass is frozen where the point says until the process is
/// killed.
struct Pause {
    at: Option<String>,
    paused: AtomicBool,
}

impl Pause {
    async fn point(&self, point: &str) {
        if self.at.as_deref() == Some(point) {
            let _ = writeln!(std::io::stderr(), "sitemapd-publish: paused at {point}");
            self.paused.store(true, Ordering::SeqCst);
        }
        self.hold().await;
    }

    /// Waits forever once the pass paused.
    async fn hold(&self) {
        if self.paused.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }
}

/// A file as the service answered it.
enum Fetched {
    /// 200: the version (the ETag), the `Content-Type`, the body.
    Body { version: String, content_type: Option<HeaderValue>, body: Body },
    /// 304: the version asked for is current.
    Current,
    /// 404.
    Missing,
}

/// What became of a child.
enum Child {
    Uploaded {
        key: String,
        version: String,
        bytes: u64,
    },
    Unchanged,
    /// The held index names it and the service no longer serves it.
    Gone,
    /// Not looked at: the pass is starting over or failing.
    Skipped,
}

/// An index fetched and held: its file name, bytes, version.
struct Held {
    file: String,
    bytes: Bytes,
    version: String,
    content_type: Option<HeaderValue>,
}

struct Run<'a, S: Serving> {
    state: &'a S,
    publish: &'a dyn PublishLog,
    target: &'a Target,
    options: &'a PassOptions,
    progress: &'a dyn Progress,
    claim: i64,
    router: axum::Router,
    pause: Pause,
    /// Set when a child failed or has gone: the children not yet started are skipped.
    stop: AtomicBool,
    counts: Counts,
}

impl<S: Serving> Run<'_, S> {
    fn name(&self) -> &str {
        self.target.url.as_str()
    }

    /// Renews the lease every third of it; returns (an error) when it was lost.
    async fn keep_lease(&self) -> anyhow::Error {
        let lease = self.options.lease;
        loop {
            tokio::time::sleep(lease / 3).await;
            match self.publish.publish_renew(self.name(), self.claim, lease).await {
                Ok(true) => {}
                Ok(false) => return anyhow::anyhow!("the target's lease was lost (another process took it over)"),
                // The records check the claim too: a pass that cannot renew goes on until it cannot record.
                Err(e) => tracing::warn!(target = %self.target.label, error = %e, "publish: cannot renew the lease"),
            }
        }
    }

    fn lost(&self) -> anyhow::Error {
        anyhow::anyhow!("the target's lease was lost (another process took it over)")
    }

    /// Steps 2 to 8; the warning of a pass that left the target as it is.
    async fn body(&self, site: &Site) -> anyhow::Result<Option<String>> {
        let mut recorded: HashMap<String, PublishedObject> = self
            .publish
            .published_objects(self.name())
            .await
            .context("cannot read what the target holds")?
            .into_iter()
            .map(|o| (o.key.clone(), o))
            .collect();
        let mut restarts = 0;
        let (manifest, held) = loop {
            let Some((manifest, held)) = self.indexes(site).await? else {
                tracing::warn!(target = %self.target.label, site = %site.name, "publish: {NO_PAGES}");
                return Ok(Some(NO_PAGES.to_owned()));
            };
            self.progress.total(manifest.len() as u64);
            let gone = self.children(&manifest, &mut recorded).await?;
            match gone {
                None => break (manifest, held),
                Some(file) if restarts < RESTARTS => {
                    restarts += 1;
                    tracing::info!(target = %self.target.label, file, restarts, "publish: a page the index names has gone; starting over from the index");
                }
                Some(file) => bail!(
                    "{file}, which the index names, was gone each of {} times: the site changes faster than a pass",
                    RESTARTS + 1
                ),
            }
        };
        self.upload_indexes(site, &held, &mut recorded).await?;
        self.marks(&manifest, &recorded).await?;
        self.deletes(&manifest).await?;
        Ok(None)
    }

    /// Step 3: `sitemap.xml` and the section indexes it implies, fetched and held, and the manifest; `None` when
    /// the site has no page.
    async fn indexes(&self, site: &Site) -> anyhow::Result<Option<(Manifest, Vec<Held>)>> {
        let index = match self.fetch(INDEX_FILE, None).await? {
            Fetched::Missing => return Ok(None),
            Fetched::Current => bail!("{INDEX_FILE}: the service answered 304 to a request without a validator"),
            Fetched::Body { version, content_type, body } => {
                let bytes = axum::body::to_bytes(body, usize::MAX).await.context("cannot read sitemap.xml")?;
                Held { file: INDEX_FILE.to_owned(), bytes, version, content_type }
            }
        };
        let files = index_files(&index.bytes, &site.public_url)?;
        let feeds: Vec<String> = crate::feed::feeds(self.state, site.id)
            .await
            .context("cannot list the feeds")?
            .into_iter()
            .map(|f| f.path)
            .collect();
        let manifest = Manifest::new(&files, &self.options.forms, &feeds);
        let mut held = Vec::with_capacity(manifest.section_indexes.len() + 1);
        for file in &manifest.section_indexes {
            match self.fetch(file, None).await? {
                Fetched::Body { version, content_type, body } => {
                    let bytes =
                        axum::body::to_bytes(body, usize::MAX).await.with_context(|| format!("cannot read {file}"))?;
                    held.push(Held { file: file.clone(), bytes, version, content_type });
                }
                // The section emptied since sitemap.xml was read: the next pass publishes the index without it.
                Fetched::Missing => {
                    bail!("{file}: the section's index has gone since {INDEX_FILE} was read; try again")
                }
                Fetched::Current => bail!("{file}: the service answered 304 to a request without a validator"),
            }
        }
        held.push(index);
        Ok(Some((manifest, held)))
    }

    /// Step 5: every child fetched (with the version recorded, unless `full`) and, when it changed, uploaded and
    /// recorded, [`UPLOADS_IN_FLIGHT`] at once. `Some(file)` when a child the index names has gone (the pass
    /// starts over); `recorded` is brought up to date either way.
    async fn children(
        &self,
        manifest: &Manifest,
        recorded: &mut HashMap<String, PublishedObject>,
    ) -> anyhow::Result<Option<String>> {
        self.stop.store(false, Ordering::SeqCst);
        self.counts.pending.store(manifest.len() as u64, Ordering::Relaxed);
        telemetry::publish_pending(&self.target.label, manifest.len() as u64);
        let mut work = Vec::with_capacity(manifest.children.len());
        for file in &manifest.children {
            let key = object_key(&self.target.prefix, file).to_string();
            let version = recorded.get(&key).map(|o| o.version.clone());
            work.push(self.child(file, key, version));
        }
        let mut done = futures_util::stream::iter(work).buffer_unordered(UPLOADS_IN_FLIGHT);
        let (mut gone, mut failed) = (None, None);
        while let Some(child) = done.next().await {
            match child {
                Ok((_, Child::Uploaded { key, version, bytes })) => {
                    let object = PublishedObject { key: key.clone(), version, bytes: bytes as i64, gone_for: None };
                    recorded.insert(key, object);
                }
                Ok((_, Child::Unchanged | Child::Skipped)) => {}
                Ok((file, Child::Gone)) => {
                    self.stop.store(true, Ordering::SeqCst);
                    gone.get_or_insert(file);
                }
                Err(e) => {
                    self.stop.store(true, Ordering::SeqCst);
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(gone),
        }
    }

    /// One child: fetched, and uploaded and recorded when its version moved.
    async fn child(&self, file: &str, key: String, recorded: Option<String>) -> anyhow::Result<(String, Child)> {
        self.pause.hold().await;
        if self.stop.load(Ordering::SeqCst) {
            return Ok((file.to_owned(), Child::Skipped));
        }
        let asked = recorded.filter(|_| !self.options.full);
        let child = match self.fetch(file, asked.as_deref()).await? {
            Fetched::Current => {
                self.counts.unchanged.fetch_add(1, Ordering::Relaxed);
                self.progress.done(&key, 0);
                Child::Unchanged
            }
            Fetched::Missing => Child::Gone,
            Fetched::Body { version, content_type, body } => {
                self.pause.hold().await;
                let bytes = self.upload_stream(&key, content_type, body).await.with_context(|| file.to_owned())?;
                let n = self.counts.children_uploaded.fetch_add(1, Ordering::SeqCst) + 1;
                self.pause.point(&format!("child-uploaded:{n}")).await;
                self.record(&key, &version, bytes).await?;
                let n = self.counts.children_recorded.fetch_add(1, Ordering::SeqCst) + 1;
                self.pause.point(&format!("child-recorded:{n}")).await;
                self.progress.done(&key, bytes);
                Child::Uploaded { key, version, bytes }
            }
        };
        let left = self.counts.pending.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        telemetry::publish_pending(&self.target.label, left);
        Ok((file.to_owned(), child))
    }

    /// Records `key` as uploaded; an error when the claim no longer holds the target.
    async fn record(&self, key: &str, version: &str, bytes: u64) -> anyhow::Result<()> {
        let size = i64::try_from(bytes).unwrap_or(i64::MAX);
        let held = self
            .publish
            .publish_record(self.name(), self.claim, key, version, size)
            .await
            .context("cannot record an upload")?;
        if !held {
            return Err(self.lost());
        }
        self.counts.uploaded.fetch_add(1, Ordering::Relaxed);
        self.counts.bytes.fetch_add(bytes, Ordering::Relaxed);
        telemetry::publish_uploaded(&self.target.label, bytes);
        Ok(())
    }

    /// Step 6: each section index, then `sitemap.xml`, from the held bytes (their `<loc>`s moved to where the
    /// files are served), uploaded when their version differs from the one recorded, and recorded.
    async fn upload_indexes(
        &self,
        site: &Site,
        held: &[Held],
        recorded: &mut HashMap<String, PublishedObject>,
    ) -> anyhow::Result<()> {
        let moved = (self.target.public_url != site.public_url).then_some(&self.target.public_url);
        for index in held {
            self.pause.hold().await;
            let key = object_key(&self.target.prefix, &index.file).to_string();
            let version = index_version(&index.version, moved);
            let current = recorded.get(&key).is_some_and(|o| o.version == version);
            if current && !self.options.full {
                self.counts.unchanged.fetch_add(1, Ordering::Relaxed);
                self.progress.done(&key, 0);
            } else {
                let bytes = rewrite_index(&index.bytes, &site.public_url, &self.target.public_url);
                let size = bytes.len() as u64;
                self.upload_bytes(&key, index.content_type.clone(), bytes).await.with_context(|| index.file.clone())?;
                if index.file == INDEX_FILE {
                    self.pause.point("index-uploaded").await;
                }
                self.record(&key, &version, size).await?;
                recorded.insert(
                    key.clone(),
                    PublishedObject { key: key.clone(), version, bytes: size as i64, gone_for: None },
                );
                self.progress.done(&key, size);
            }
            let left = self.counts.pending.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
            telemetry::publish_pending(&self.target.label, left);
        }
        self.pause.point("index-recorded").await;
        Ok(())
    }

    /// Step 7: every recorded object the manifest does not name is marked gone (a mark kept keeps its time); one
    /// the manifest names again, unchanged, is unmarked.
    async fn marks(&self, manifest: &Manifest, recorded: &HashMap<String, PublishedObject>) -> anyhow::Result<()> {
        let named = self.keys(manifest);
        let mut mark: Vec<String> = recorded
            .values()
            .filter(|o| o.gone_for.is_none() && !named.contains(&o.key))
            .map(|o| o.key.clone())
            .collect();
        let mut unmark: Vec<String> = recorded
            .values()
            .filter(|o| o.gone_for.is_some() && named.contains(&o.key))
            .map(|o| o.key.clone())
            .collect();
        mark.sort_unstable();
        unmark.sort_unstable();
        if !mark.is_empty() {
            if !self
                .publish
                .publish_mark_gone(self.name(), self.claim, &mark)
                .await
                .context("cannot mark objects gone")?
            {
                return Err(self.lost());
            }
            self.counts.marked.store(mark.len() as u64, Ordering::Relaxed);
        }
        if !unmark.is_empty()
            && !self.publish.publish_unmark(self.name(), self.claim, &unmark).await.context("cannot unmark objects")?
        {
            return Err(self.lost());
        }
        self.pause.point("marked").await;
        Ok(())
    }

    /// Step 8: every object marked for at least the grace is deleted from the target (one already gone counts as
    /// deleted), then forgotten.
    async fn deletes(&self, manifest: &Manifest) -> anyhow::Result<()> {
        let named = self.keys(manifest);
        let objects = self.publish.published_objects(self.name()).await.context("cannot read what the target holds")?;
        let marked: Vec<&PublishedObject> =
            objects.iter().filter(|o| o.gone_for.is_some() && !named.contains(&o.key)).collect();
        let mut awaiting = marked.len() as u64;
        for object in marked.iter().filter(|o| o.gone_for.is_some_and(|g| g >= self.options.grace)) {
            self.pause.hold().await;
            let path = Path::parse(&object.key)
                .with_context(|| format!("the recorded key {:?} is no object path", object.key))?;
            match self.target.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot delete {}", object.key))),
            }
            let n = self.counts.deleted.fetch_add(1, Ordering::SeqCst) + 1;
            telemetry::publish_deleted(&self.target.label);
            self.pause.point(&format!("deleted:{n}")).await;
            if !self
                .publish
                .publish_forget(self.name(), self.claim, &object.key)
                .await
                .context("cannot record a deletion")?
            {
                return Err(self.lost());
            }
            awaiting -= 1;
        }
        self.counts.awaiting.store(awaiting, Ordering::Relaxed);
        Ok(())
    }

    /// The keys of every file of `manifest`.
    fn keys(&self, manifest: &Manifest) -> HashSet<String> {
        manifest.files().map(|f| object_key(&self.target.prefix, f).to_string()).collect()
    }

    /// `file` from the service's routes, for the site's host, uncompressed, the page table read now; with
    /// `If-None-Match: version` when given.
    async fn fetch(&self, file: &str, version: Option<&str>) -> anyhow::Result<Fetched> {
        let site = self.state.sites().by_id(self.target.site).context("the site is not configured")?;
        let mut request = Request::get(format!("/{file}"))
            .header(header::HOST, site.authority())
            .header(header::ACCEPT_ENCODING, "identity")
            .header(header::USER_AGENT, USER_AGENT)
            .header(header::CACHE_CONTROL, "no-cache");
        // A version that is no header value (none the service gives) is asked for as absent: uploaded.
        if let Some(version) = version.and_then(|v| HeaderValue::from_str(v).ok()) {
            request = request.header(header::IF_NONE_MATCH, version);
        }
        let request = request.body(Body::empty()).context("the request")?;
        let response = match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        match response.status() {
            StatusCode::OK => {
                let version = response
                    .headers()
                    .get(header::ETAG)
                    .and_then(|v| v.to_str().ok())
                    .with_context(|| format!("{file}: the service answered without an ETag"))?
                    .to_owned();
                let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
                Ok(Fetched::Body { version, content_type, body: response.into_body() })
            }
            StatusCode::NOT_MODIFIED => Ok(Fetched::Current),
            StatusCode::NOT_FOUND => Ok(Fetched::Missing),
            status => bail!("{file}: the service answered {status}"),
        }
    }

    /// The object's attributes: its `Content-Type` as the service answered it and the configured `Cache-Control`;
    /// none for a directory.
    fn attributes(&self, content_type: Option<HeaderValue>) -> Attributes {
        let mut attributes = Attributes::new();
        if self.target.is_directory() {
            return attributes;
        }
        if let Some(content_type) = content_type.and_then(|v| v.to_str().ok().map(str::to_owned)) {
            attributes.insert(Attribute::ContentType, content_type.into());
        }
        if !self.options.cache_control.is_empty() {
            attributes.insert(Attribute::CacheControl, self.options.cache_control.clone().into());
        }
        attributes
    }

    /// Uploads `body` to `key` through a buffer of [`UPLOAD_BUFFER`] (a larger body goes up in parts, two at a
    /// time), so that memory stays bounded whatever the file's size; its length.
    async fn upload_stream(&self, key: &str, content_type: Option<HeaderValue>, body: Body) -> anyhow::Result<u64> {
        let path = Path::parse(key).with_context(|| format!("{key:?} is no object path"))?;
        let mut writer = BufWriter::with_capacity(Arc::clone(&self.target.store), path, UPLOAD_BUFFER)
            .with_max_concurrency(2)
            .with_attributes(self.attributes(content_type));
        let mut stream = body.into_data_stream();
        let mut size = 0u64;
        let written: anyhow::Result<()> = async {
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.context("cannot read the service's answer")?;
                size += chunk.len() as u64;
                writer.put(chunk).await.context("cannot upload")?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = written {
            // A multipart upload begun is abandoned on the store; nothing was recorded.
            let _ = writer.abort().await;
            return Err(e);
        }
        // A writer is shut down once, and not aborted after (that panics): a failed upload is left to the store.
        writer.shutdown().await.context("cannot upload")?;
        Ok(size)
    }

    /// Uploads a held index in one `PUT`.
    async fn upload_bytes(&self, key: &str, content_type: Option<HeaderValue>, bytes: Bytes) -> anyhow::Result<()> {
        let path = Path::parse(key).with_context(|| format!("{key:?} is no object path"))?;
        let options = PutOptions { attributes: self.attributes(content_type), ..PutOptions::default() };
        self.target.store.put_opts(&path, PutPayload::from_bytes(bytes), options).await.context("cannot upload")?;
        Ok(())
    }
}

/// `e` and its causes on one line (`: `-separated, line breaks as spaces), a cause that the line already holds said
/// once: an object store's error repeats its source in its own message.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain().map(|c| c.to_string().split_whitespace().collect::<Vec<_>>().join(" ")) {
        if cause.is_empty() || line.contains(&cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&cause);
    }
    line
}

/// `message` with the values of the object stores' secret variables (`AWS_SECRET_ACCESS_KEY`, a session token, a
/// service account's key, an Azure account key, …) and access key ids replaced by `REDACTED`: an error a store
/// answered may quote a request, and this message is logged and kept in the database.
fn scrub(message: &str) -> String {
    let mut scrubbed = message.to_owned();
    for (name, value) in std::env::vars() {
        let store = ["AWS_", "GOOGLE_", "AZURE_"].iter().any(|p| name.starts_with(p));
        let secret = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "SAS"].iter().any(|w| name.contains(w));
        if store && secret && value.len() >= 4 && scrubbed.contains(&value) {
            scrubbed = scrubbed.replace(&value, "REDACTED");
        }
    }
    scrubbed
}
