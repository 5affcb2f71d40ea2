//! `sitemapd publish`: one pass over each configured target (`publish.targets`; `--site` and `--target` pick some),
//! in order, from the service's routes in process as `serve` would answer them, without serving and without a
//! background worker. The summary goes to standard output, one line per target; the log, and a progress bar on a
//! terminal, to standard error.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sitemapd::config::Config;
use sitemapd::publish::{self, NoProgress, PassOptions, PassReport, Progress};
use sitemapd::sitemap::directory::system_clock;
use sitemapd::{AppState, db_files, store};

use super::{Command, Usage};

/// `sitemapd publish`: runs a pass of each target picked and prints its line; whether every one completed.
pub(crate) async fn publish(command: Command, config: &Config) -> anyhow::Result<bool> {
    let Command::Publish { site, target, full } = command else { unreachable!("only publish") };
    let configured: Vec<(String, String)> =
        config.publish.targets.iter().map(|t| (t.site.clone(), t.url.to_string())).collect();
    if configured.is_empty() {
        return Err(Usage(
            "no publishing target is configured: set publish.targets (SITEMAPD_PUBLISH_TARGETS), e.g. \
             s3://bucket/sitemaps/ or file:///srv/www/sitemaps/"
                .to_owned(),
        )
        .into());
    }
    let mut picked = configured.clone();
    if let Some(name) = &site {
        let sites = config.site_specs();
        if !sites.iter().any(|s| &s.name == name) {
            let names: Vec<&str> = sites.iter().map(|s| s.name.as_str()).collect();
            return Err(Usage(format!("--site {name}: no site is named so (sites: {})", names.join(", "))).into());
        }
        picked.retain(|(s, _)| s == name);
        if picked.is_empty() {
            return Err(Usage(format!("--site {name}: the site has no publishing target")).into());
        }
    }
    if let Some(url) = &target {
        let wanted = with_trailing_slash(url);
        picked.retain(|(_, u)| *u == wanted);
        if picked.is_empty() {
            let urls: Vec<&str> = configured.iter().map(|(_, u)| u.as_str()).collect();
            let of = site.as_deref().map(|s| format!(" of the site {s}")).unwrap_or_default();
            return Err(Usage(format!(
                "--target {wanted}: no such target is configured{of} (targets: {})",
                urls.join(", ")
            ))
            .into());
        }
    }
    db_files::require_existing(&config.database.url)?;
    let mut options = config.store_options();
    options.read_url = None;
    options.serving = false;
    let store = store::open(&options).await?;
    let published = run(Arc::clone(&store), config, &picked, full).await;
    store.close().await;
    published
}

/// The passes, once the store is open.
async fn run(
    store: Arc<dyn store::Store>,
    config: &Config,
    picked: &[(String, String)],
    full: bool,
) -> anyhow::Result<bool> {
    // The serving state without its background features: nothing is pre-rendered nor recorded.
    let (state, features) = AppState::build(Arc::clone(&store), config, system_clock());
    drop(features);
    let targets = publish::targets(config, &state.sites)?;
    let options = PassOptions::from_config(config, full);
    let mut complete = true;
    for target in targets.iter().filter(|t| picked.iter().any(|(_, u)| *u == t.label)) {
        let bar = std::io::stderr().is_terminal().then(|| Bar::new(&target.label));
        let progress: &dyn Progress = match &bar {
            Some(bar) => bar,
            None => &NoProgress,
        };
        let outcome = publish::pass(&state, &*store, target, &options, progress).await;
        if let Some(bar) = bar {
            bar.0.finish_and_clear();
        }
        let line = match &outcome {
            Ok(report) => report.summary(&target.label),
            Err(e) => format!("{}: FAILED: {e:#}", target.label),
        };
        match &outcome {
            Ok(PassReport::Done { uploaded, bytes, unchanged, deleted, awaiting, .. }) => {
                tracing::info!(target = %target.label, uploaded, bytes, unchanged, deleted, awaiting, "published");
            }
            Ok(PassReport::Busy) => {
                complete = false;
                tracing::warn!(target = %target.label, "not published: another process holds the target's lease");
            }
            Err(e) => {
                complete = false;
                tracing::error!(target = %target.label, error = %format!("{e:#}"), "publishing failed");
            }
        }
        println!("{line}");
    }
    Ok(complete)
}

/// A target's URL as configured: with its trailing `/`.
fn with_trailing_slash(url: &str) -> String {
    let url = url.trim();
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if !parsed.path().ends_with('/') {
                let path = format!("{}/", parsed.path());
                parsed.set_path(&path);
            }
            parsed.to_string()
        }
        Err(_) => url.to_owned(),
    }
}

/// The progress bar of one target's pass: files current on the target of those in its manifest, bytes uploaded.
struct Bar(ProgressBar, AtomicU64);

impl Bar {
    fn new(label: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} files {pos}/{len} {bar:24} {msg}")
                .expect("a valid template"),
        );
        bar.set_prefix(label.to_owned());
        Self(bar, AtomicU64::new(0))
    }
}

impl Progress for Bar {
    fn total(&self, n: u64) {
        self.0.set_length(n);
        self.0.set_position(0);
    }

    fn done(&self, key: &str, uploaded_bytes: u64) {
        let uploaded = self.1.fetch_add(uploaded_bytes, Ordering::Relaxed) + uploaded_bytes;
        self.0.inc(1);
        self.0.set_message(format!("{} uploaded, {key}", HumanBytes(uploaded)));
    }
}
