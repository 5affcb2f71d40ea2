//! The `sitemapd` binary: command line, telemetry, configuration, and the choice of store.

use std::io::IsTerminal;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use sitemapd::config::{Config, LogFormat};
use sitemapd::db_files;
use sitemapd::domain::{Section, Site, Sites};
use sitemapd::import::{HttpOptions, ImportOptions, Progress, Sections, Source};
use sitemapd::serve_threads;
use sitemapd::store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(version, about = "Keeps a website's URL records in a database and serves its XML sitemaps")]
struct Cli {
    /// A TOML configuration file (default: ./config/default.toml when present). Environment variables override it.
    #[arg(long, global = true, value_name = "PATH", env = "SITEMAPD_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Clone)]
enum Command {
    /// Apply migrations and serve (the default).
    Serve,
    /// Apply migrations and exit.
    Migrate,
    /// Exit 0 if the server on the configured bind address answers 200 to GET /healthz within 3 seconds, else 1.
    /// For container health checks: the image needs no HTTP client.
    Healthcheck,
    /// Write a consistent copy of the SQLite database to FILE (which must not exist), while it is being served.
    /// For PostgreSQL, use pg_dump.
    Backup {
        /// Where to write the copy.
        file: PathBuf,
    },
    /// Write every stored entry as NDJSON, one entry a line in the write API's form (PUT /api/v1/urls takes it
    /// back), in storage order. Logs go to stderr.
    Export {
        /// Only this site's entries (its name); default: every site's.
        #[arg(long)]
        site: Option<String>,
        /// Write to FILE (which must not exist) instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Import existing sitemaps through the write path: sitemap and sitemap index URLs, a site's robots.txt (its
    /// Sitemap: lines), files (.xml, .xml.gz, .txt with one URL a line, or NDJSON as `export` writes it), or `-` for
    /// standard input. Indexes are followed (10 levels at most, each sitemap once). Invalid entries go to the
    /// rejects file and the import goes on. Re-importing the same sitemaps changes nothing. The summary goes to
    /// standard output, the log to stderr. Exit status: 0 when every source was read whole, 1 when one failed,
    /// was cut at a protocol limit, the store failed or every entry was rejected (nothing stored), 2 for a bad
    /// command line or configuration.
    Import {
        /// What to import (at least one).
        #[arg(required = true, value_name = "SOURCE")]
        sources: Vec<String>,
        /// Replace the URL prefix FROM with TO in every entry URL before validation (an old host, staging);
        /// may be given more than once (the first that matches applies).
        #[arg(long, value_name = "FROM=TO")]
        rewrite: Vec<String>,
        /// Put every entry read in section NAME (lower-case letters, digits and single hyphens, starting with a
        /// letter, at most 32; not news, removed, default, index or all), NDJSON lines that name another included.
        #[arg(long, value_name = "NAME", conflicts_with = "sections_from_names")]
        section: Option<String>,
        /// Take each sitemap's section from its file name, so a site keeps the structure its plugin gave it:
        /// product-sitemap.xml (Yoast, Rank Math) is section product, wp-sitemap-posts-page-1.xml page,
        /// sitemap-blog-2.xml blog, sitemap_products_1.xml products; a sitemap an index lists takes its own name's
        /// (or the index's); a name that says none (sitemap.xml, sitemap1.xml) means the default section.
        #[arg(long)]
        sections_from_names: bool,
        /// Read and validate everything, count it, and write nothing (the database is not opened).
        #[arg(long)]
        dry_run: bool,
        /// Then delete the stored URLs of the sites written to that no source listed (the sources are the
        /// truth); only when every source was read whole and stored.
        #[arg(long)]
        delete_missing: bool,
        /// Where the invalid entries go, as NDJSON (source, line, loc, reason, errors); emptied at the start.
        #[arg(long, value_name = "FILE", default_value = "import-rejects.ndjson")]
        rejects: PathBuf,
        /// Sources fetched and read at once.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        concurrency: u16,
        /// The most sitemaps followed from indexes and robots.txt files; more are reported, not read.
        #[arg(long, value_name = "N", default_value_t = 100_000)]
        max_sitemaps: usize,
        /// Queue the entries this import creates, changes or deletes for IndexNow (when a key is configured). Off
        /// by default: an import usually moves pages search engines already know, which is no change of them.
        #[arg(long, conflicts_with = "no_indexnow")]
        indexnow: bool,
        /// Queue nothing for IndexNow: the default (kept for the scripts that say it).
        #[arg(long)]
        no_indexnow: bool,
        /// The longest one HTTP request may take, its body included, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        timeout: u64,
        /// Tries after the first for an answer 429 or 5xx, or a failure to connect.
        #[arg(long, default_value_t = 3)]
        retries: u32,
        /// Seconds between progress lines when standard error is not a terminal (a terminal gets a progress bar).
        #[arg(long, value_name = "SECS", default_value_t = 5.0)]
        progress_interval: f64,
    },
}

/// jemalloc, with its background threads, rather than glibc's malloc. glibc raises its mmap threshold after the
/// first large block is freed, so later large blocks (request bodies of up to 16 MiB, page renders) come from
/// arenas that it keeps, and a process that took large bodies stays that much larger for good (bench/soak.py shows
/// it). jemalloc's background threads return freed pages to the system within seconds, whichever
/// thread freed them (mimalloc, tried too, kept its idle threads' pages).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long jemalloc keeps a freed page before its background threads give it back to the system (its default is
/// 10 s). A page render frees a few MB (1 MiB blocks, 64 KiB chunks, deflate states) that the next render, on
/// other threads, does not always take back, so with 10 s concurrent renders of uncached pages peak higher
/// (`bench/memprobe.py`, BENCHMARKS.md "Round three"). 100 ms keeps the reuse within a burst of allocations
/// and costs no measurable time on a cold page.
const DIRTY_DECAY_MS: isize = 100;

/// Sets [`DIRTY_DECAY_MS`] for every arena, unless `MALLOC_CONF` is set: the operator's jemalloc settings win.
fn give_freed_pages_back_sooner() {
    use tikv_jemalloc_ctl::{Access, AsName, arenas};
    if std::env::var_os("MALLOC_CONF").is_some() {
        return;
    }
    // Arenas made from now on take the default; those that exist already (threads started so far) are set one by
    // one (an index not in use is refused, and skipped).
    let _ = b"arenas.dirty_decay_ms\0".name().write(DIRTY_DECAY_MS);
    let (Ok(n), Ok(mut arena)) = (arenas::narenas::read(), b"arena.0.dirty_decay_ms\0".name().mib::<[usize; 3]>())
    else {
        return;
    };
    for i in 0..n as usize {
        arena[1] = i;
        let _ = arena.write(DIRTY_DECAY_MS);
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    give_freed_pages_back_sooner();
    let cli = Cli::parse();
    let command = cli.command.clone().unwrap_or(Command::Serve);
    let config = Config::load(cli.config.as_deref());
    if let Command::Healthcheck = command {
        // Any failure, a bad configuration included, exits 1: container runtimes read 0 as healthy, 1 as
        // unhealthy, and reserve 2.
        return match async { healthcheck(config?.http.bind).await }.await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say(format_args!("sitemapd healthcheck: {}", one_line(&e)));
                ExitCode::FAILURE
            }
        };
    }
    let config = match config {
        Ok(config) => config,
        Err(e) => {
            say(format_args!("sitemapd: {}", one_line(&e)));
            return ExitCode::from(2);
        }
    };
    if let Command::Serve = command {
        // The metrics recorder, before anything can count (the store's open, IndexNow's first round at start):
        // what is counted without a recorder is lost. Every counter is exported from the start, at 0.
        sitemapd::telemetry::prometheus();
        sitemapd::telemetry::zero_counters(&known_labels(&config));
    }
    let log_format = config.log.format;
    // `export` writes its data, `import` its summary, to standard output: their log goes to stderr.
    init_tracing(log_format, matches!(command, Command::Export { .. } | Command::Import { .. }));
    for deprecated in config.deprecations() {
        tracing::warn!("{deprecated}");
    }
    if let Command::Import { .. } = command {
        return match import(command, &config).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                say(format_args!("sitemapd import: {}", one_line(&e)));
                if e.is::<Usage>() { ExitCode::from(2) } else { ExitCode::FAILURE }
            }
        };
    }
    match run(command, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Said once: in JSON mode as an event of the JSON log (on stdout, where the collector reads), unless
            // RUST_LOG drops it; otherwise on stderr, as the configuration errors above. A text log line on stdout
            // beside it would show the same message twice at a terminal.
            if log_format == LogFormat::Json && tracing::enabled!(tracing::Level::ERROR) {
                tracing::error!("{}", one_line(&e));
            } else {
                say(format_args!("sitemapd: {}", one_line(&e)));
            }
            ExitCode::FAILURE
        }
    }
}

/// The values of the counters' labels that only the configuration knows: `site`, the checked sites (URL health's
/// counters); `crawler`, every crawler's stable name while crawler telemetry is on.
fn known_labels(config: &Config) -> Vec<(&'static str, Vec<String>)> {
    let checked = config.health.check.iter().map(|(site, _)| site.to_owned()).collect();
    let crawlers = if config.crawlers.telemetry {
        sitemapd::crawler::Crawler::ALL.iter().map(|c| c.name().to_owned()).collect()
    } else {
        Vec::new()
    };
    vec![("site", checked), ("crawler", crawlers)]
}

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    let mut options = config.store_options();
    // The commands read what they have just written, or must see everything: the primary only.
    if !matches!(command, Command::Serve) {
        options.read_url = None;
        options.serving = false;
    }
    match command {
        Command::Migrate => {
            store::open(&options).await?.close().await;
            tracing::info!(database = %sitemapd::redact::redact_url(&config.database.url), "migrations applied");
            Ok(())
        }
        Command::Serve => {
            tracing::info!(config = ?config, "starting");
            if let Some(ignored) = config.ignored_public_url() {
                tracing::warn!(
                    public_url = %ignored,
                    "sitemaps.public_url (SITEMAPD_PUBLIC_URL) is set but not used: sitemaps.sites (SITEMAPD_SITES) \
                     replaces it; name each site's public URL there and unset public_url"
                );
            }
            let store = store::open(&options).await?;
            let listener = std::net::TcpListener::bind(config.http.bind)
                .with_context(|| format!("cannot listen on {}", config.http.bind))?;
            let sites: Vec<String> =
                config.site_specs().iter().map(|s| format!("{}={}", s.name, s.public_url)).collect();
            let threads = config.serving_threads();
            tracing::info!(address = %listener.local_addr()?, sites = ?sites, threads, "listening");
            let (state, workers) = sitemapd::workers::start(store.clone(), &config).await?;
            let grace = config.http.shutdown_grace;
            let served = serve_threads(state.clone(), listener, threads, shutdown_signal(), grace).await;
            drop(state);
            // The background workers, last started first, within one grace period (the crawler telemetry's last
            // flush among them): before the pool closes.
            workers.stop(store::CLOSE_TIMEOUT).await;
            // Even after an error: the database file is left whole (SQLite: WAL checkpointed) and the pool closed.
            store.close().await;
            // The serving threads' runtimes drive the pooled connections they opened: they end after the store.
            served?.release().await?;
            tracing::info!("stopped");
            Ok(())
        }
        Command::Backup { file } => {
            db_files::require_existing(&config.database.url)?;
            db_files::check_output(&config.database.url, &file, "the backup")?;
            store::backup(&config.database.url, &file).await
        }
        Command::Export { site, output } => {
            db_files::require_existing(&config.database.url)?;
            if let Some(output) = &output {
                db_files::check_output(&config.database.url, output, "the output file")?;
            }
            let store = store::open(&options).await?;
            let exported = export(&*store, site.as_deref(), output.as_deref()).await;
            store.close().await;
            let (count, to) = exported?;
            tracing::info!(entries = count, to = %to, "exported");
            Ok(())
        }
        Command::Import { .. } => unreachable!("run by import()"),
        Command::Healthcheck => unreachable!("answered before telemetry starts"),
    }
}

/// `sitemapd import`: runs it and prints its summary; the exit status says whether every source was read whole.
async fn import(command: Command, config: &Config) -> anyhow::Result<bool> {
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

/// A command line that cannot run (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

/// `sitemapd export`: the entries of `site` (all: `None`) to `output` (standard output: `None`), which must not exist
/// and is synced to disk when written. Returns how many entries, and where they went.
async fn export(
    store: &dyn store::Store,
    site: Option<&str>,
    output: Option<&std::path::Path>,
) -> anyhow::Result<(u64, String)> {
    let sites = store.sites();
    let site = match site {
        None => None,
        Some(name) => Some(
            sites
                .by_name(name)
                .map(|s| s.id)
                .with_context(|| format!("no site is named {name:?}; the sites are {sites}"))?,
        ),
    };
    match output {
        None => {
            let mut out = tokio::io::stdout();
            Ok((sitemapd::export::export(store, site, &mut out).await?, "standard output".to_owned()))
        }
        Some(path) => {
            let file = std::fs::File::create_new(path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = tokio::fs::File::from_std(file);
            let count = sitemapd::export::export(store, site, &mut out).await?;
            out.sync_all().await.with_context(|| format!("cannot sync {}", path.display()))?;
            Ok((count, path.display().to_string()))
        }
    }
}

/// `GET /healthz` over HTTP/1.0 on `bind` (a wildcard address is reached on the loopback address of its family).
async fn healthcheck(bind: SocketAddr) -> anyhow::Result<()> {
    let mut addr = bind;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let probe = async {
        let mut stream = TcpStream::connect(addr).await.with_context(|| format!("cannot connect to {addr}"))?;
        stream.write_all(format!("GET /healthz HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await?;
        // The status line is all that matters; the answer is a few hundred bytes.
        let mut response = Vec::new();
        stream.take(4096).read_to_end(&mut response).await?;
        let response = String::from_utf8_lossy(&response);
        let status_line = response.lines().next().unwrap_or_default();
        match status_line.split(' ').nth(1) {
            Some("200") => Ok(()),
            _ => anyhow::bail!("http://{addr}/healthz answered {status_line:?}"),
        }
    };
    tokio::time::timeout(Duration::from_secs(3), probe)
        .await
        .with_context(|| format!("no answer from http://{addr}/healthz within 3 seconds"))?
}

/// `e` and its causes on one line, as `{e:#}` writes them, but a cause the line already ends with said once (sqlx's
/// "error communicating with database: X" is followed by its cause, X itself).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain().map(ToString::to_string) {
        if line.ends_with(&cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&cause);
    }
    line
}

/// Logs to stdout in `format`, and panics through the log too (so that they are JSON in JSON mode).
/// One line on standard error; nothing (rather than a panic) when standard error is closed.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn init_tracing(format: LogFormat, to_stderr: bool) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("sitemapd=info,tower_http=info"))
        // sqlx warns about each connect parameter it does not know with its value (`sslpassword=…`), whatever
        // RUST_LOG says: only its errors.
        .add_directive("sqlx_postgres::options=error".parse().expect("a valid directive"));
    // Colour only for a person at a terminal, never into a log file or a collector.
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if to_stderr {
        let builder = builder.with_ansi(std::io::stderr().is_terminal()).with_writer(std::io::stderr);
        match format {
            LogFormat::Text => builder.init(),
            LogFormat::Json => builder.json().init(),
        }
    } else {
        let builder = builder.with_ansi(std::io::stdout().is_terminal()).with_writer(sitemapd::telemetry::LogOutput);
        match format {
            LogFormat::Text => builder.init(),
            LogFormat::Json => builder.json().init(),
        }
    }
    sitemapd::telemetry::install_panic_hook();
}

/// Completes on SIGINT or SIGTERM; the server then stops accepting and finishes in-flight requests, for at most
/// `shutdown_grace_secs`.
async fn shutdown_signal() {
    let interrupt = async {
        tokio::signal::ctrl_c().await.expect("cannot listen for SIGINT");
    };
    #[cfg(unix)]
    let terminate = async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("cannot listen for SIGTERM")
            .recv()
            .await;
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received: finishing the requests in flight");
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer, for the subscriber under test.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// This test binary holds only main.rs's tests, so replacing the process-wide panic hook touches nothing else.
    #[test]
    fn a_panic_is_one_json_log_line_in_json_mode() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt().json().with_writer(move || writer.clone()).finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        sitemapd::telemetry::install_panic_hook();
        let caught = std::thread::Builder::new().name("doomed".into()).spawn(|| panic!("boom {}", 42)).unwrap().join();
        assert!(caught.is_err());
        let _ = std::panic::take_hook();
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect(l)).collect();
        assert_eq!(lines.len(), 1, "{text}");
        let fields = &lines[0]["fields"];
        assert_eq!(lines[0]["level"], "ERROR", "{text}");
        assert_eq!(fields["panic"], "boom 42", "{text}");
        assert_eq!(fields["thread"], "doomed", "{text}");
        assert!(fields["location"].as_str().unwrap().contains("main.rs"), "{text}");
    }
}
