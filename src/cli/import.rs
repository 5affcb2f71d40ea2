//! `sitemapd import`: the command line over `sitemapd::import` (which admits through `ingest`): its options checked,
//! the store opened (not for a dry run), the summary printed.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use sitemapd::config::Config;
use sitemapd::db_files;
use sitemapd::domain::{Section, Site, Sites};
use sitemapd::import::{HttpOptions, ImportOptions, Progress, Sections, Source};
use sitemapd::store;

use super::{Command, Usage};

/// `sitemapd import`: runs it and prints its summary; the exit status says whether every source was read whole.
pub(crate) async fn import(command: Command, config: &Config) -> anyhow::Result<bool> {
    let Command::Import {
        sources,
        rewrite,
        section,
        sections_from_names,
        dry_run,
        delete_missing,
        rejects,
        concurrency,
        max_sitemaps,
        indexnow,
        no_indexnow: _,
        timeout,
        retries,
        progress_interval,
    } = command
    else {
        unreachable!("only import")
    };
    let sections = match section {
        Some(name) => Sections::All(Section::parse(&name).map_err(|e| Usage(format!("--section: {e}")))?),
        None if sections_from_names => Sections::FromNames,
        None => Sections::Off,
    };
    let sources = sources.iter().map(|s| Source::parse(s)).collect::<Result<Vec<_>, _>>().map_err(Usage)?;
    if sources.iter().any(|s| matches!(s, Source::File(f) if db_files::same_file(f, &rejects))) {
        return Err(Usage(format!(
            "the rejects file {} is one of the sources: name another with --rejects",
            rejects.display()
        ))
        .into());
    }
    // Before anything is opened or created: the rejects file is emptied at the start.
    db_files::check_output(&config.database.url, &rejects, "the rejects file (--rejects)")
        .map_err(|e| Usage(e.to_string()))?;
    if sources.iter().filter(|s| **s == Source::Stdin).count() > 1 {
        return Err(Usage("standard input (-) can be read once".to_owned()).into());
    }
    let rewrites = rewrite
        .iter()
        .map(|r| match r.split_once('=') {
            Some((from, to)) if !from.is_empty() => Ok((from.to_owned(), to.to_owned())),
            _ => Err(Usage(format!("--rewrite {r:?}: give FROM=TO, with FROM not empty"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !(progress_interval > 0.0 && progress_interval.is_finite()) {
        return Err(Usage("--progress-interval must be a positive number of seconds".to_owned()).into());
    }
    let mut store_options = config.store_options();
    store_options.read_url = None;
    store_options.serving = false;
    // A move is not a change of the pages moved: only `--indexnow` queues what the import writes.
    if !indexnow {
        store_options.notify_sites.clear();
    }
    // A dry run opens nothing: the sites are the configured ones, with the ids they would be given.
    let (store, sites) = if dry_run {
        let sites = config.site_specs().into_iter().zip(1..).map(|(spec, id)| Site::new(id, spec)).collect();
        (None, Arc::new(Sites::new(sites)))
    } else {
        let store = store::open(&store_options).await?;
        let sites = store.sites();
        (Some(store), sites)
    };
    let options = ImportOptions {
        sources,
        rewrites,
        sections,
        dry_run,
        delete_missing,
        rejects: Some(rejects),
        concurrency: usize::from(concurrency),
        max_sitemaps,
        batch: config.api.ndjson_batch,
        store_tries: 5,
        store_retry_base: Duration::from_secs(1),
        limits: config.limits(),
        max_line_bytes: config.api.max_line_bytes as u64,
        http: HttpOptions { timeout: Duration::from_secs(timeout.max(1)), retries, ..HttpOptions::default() },
        progress: if std::io::stderr().is_terminal() {
            Progress::Bar
        } else {
            Progress::Lines(Duration::from_secs_f64(progress_interval))
        },
    };
    let summary = sitemapd::import::import(store.clone(), sites, options).await;
    if let Some(store) = store {
        store.close().await;
    }
    let summary = summary?;
    tracing::info!(
        sources = summary.sources.len(),
        entries = summary.entries,
        valid = summary.valid,
        rejected = summary.rejected,
        created = summary.created,
        updated = summary.updated,
        unchanged = summary.unchanged,
        complete = summary.success(),
        "imported"
    );
    println!("{summary}");
    Ok(summary.success())
}
