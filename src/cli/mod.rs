//! The binary's commands: the command line (`Cli`, `Command`) and one module per command.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub(crate) mod alloc;
pub(crate) mod backup;
pub(crate) mod export;
pub(crate) mod healthcheck;
pub(crate) mod import;
pub(crate) mod migrate;
pub(crate) mod publish;
pub(crate) mod serve;

#[derive(Parser)]
#[command(version, about = "Keeps a website's URL records in a database and serves its XML sitemaps")]
pub(crate) struct Cli {
    /// A TOML configuration file (default: ./config/default.toml when present). Environment variables override it.
    #[arg(long, global = true, value_name = "PATH", env = "SITEMAPD_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

#[derive(Subcommand, Clone)]
pub(crate) enum Command {
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
    /// Publish the sitemaps to object storage: one pass over each target of `publish.targets` (S3, GCS, Azure, a
    /// directory), in order: the files whose version moved since the last upload to that target, children before
    /// their index; the files no index names any more deleted once `publish.grace` has passed. One line per
    /// target on standard output, the log (and a progress bar on a terminal) on stderr. Exit status: 0 when every
    /// target's pass completed, 1 when one failed or another process held its lease, 2 for a bad command line or
    /// configuration.
    Publish {
        /// Only this site's targets (its name).
        #[arg(long)]
        site: Option<String>,
        /// Only this target (its URL as configured).
        #[arg(long, value_name = "URL")]
        target: Option<String>,
        /// Upload every file, whatever the target holds (after the target was changed by hand, say).
        #[arg(long)]
        full: bool,
    },
}

/// A command line that cannot run (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Usage(pub(crate) String);
