//! The `sitemapd` binary: command line, telemetry, configuration, and the choice of store.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use sitemapd::config::{Config, LogFormat};
use sitemapd::store::{self, StoreOptions};
use sitemapd::{AppState, serve};
use tokio::net::TcpListener;
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

#[derive(Subcommand, Clone, Copy)]
enum Command {
    /// Apply migrations and serve (the default).
    Serve,
    /// Apply migrations and exit.
    Migrate,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("sitemapd: {e:#}");
            return ExitCode::from(2);
        }
    };
    let command = cli.command.unwrap_or(Command::Serve);
    init_tracing(config.log_format);
    match run(command, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("sitemapd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    let options = StoreOptions {
        url: config.database_url.clone(),
        limits: config.limits,
        max_connections: config.db_max_connections,
        acquire_timeout: config.db_acquire_timeout,
    };
    match command {
        Command::Migrate => {
            store::open(&options).await?;
            tracing::info!(database = %sitemapd::config::redact_url(&config.database_url), "migrations applied");
            Ok(())
        }
        Command::Serve => {
            tracing::info!(config = ?config, "starting");
            let store = store::open(&options).await?;
            let listener =
                TcpListener::bind(config.bind).await.with_context(|| format!("cannot listen on {}", config.bind))?;
            tracing::info!(address = %listener.local_addr()?, public_url = %config.public_url, "listening");
            serve(AppState::new(store, &config), listener, shutdown_signal(), config.shutdown_grace).await?;
            tracing::info!("stopped");
            Ok(())
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("sitemapd=info,tower_http=info"));
    // Colour only for a person at a terminal, never into a log file or a collector.
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(std::io::stdout().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
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
