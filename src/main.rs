//! The `sitemapd` binary: parses the command line, loads the settings, starts the log, and runs the command
//! (`cli/`, one module each).

mod cli;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use sitemapd::config::{Config, LogFormat};
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command, Usage};

#[tokio::main]
async fn main() -> ExitCode {
    cli::alloc::give_freed_pages_back_sooner();
    let cli = Cli::parse();
    let command = cli.command.clone().unwrap_or(Command::Serve);
    let config = Config::load(cli.config.as_deref());
    if let Command::Healthcheck = command {
        // Any failure, a bad configuration included, exits 1: container runtimes read 0 as healthy, 1 as
        // unhealthy, and reserve 2.
        return match async { cli::healthcheck::healthcheck(config?.http.bind).await }.await {
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
        sitemapd::telemetry::zero_counters(&cli::serve::known_labels(&config));
    }
    let log_format = config.log.format;
    // `export` writes its data, `import` and `publish` their summary, to standard output: their log goes to stderr.
    init_tracing(
        log_format,
        matches!(command, Command::Export { .. } | Command::Import { .. } | Command::Publish { .. }),
    );
    for deprecated in config.deprecations() {
        tracing::warn!("{deprecated}");
    }
    if let Command::Import { .. } = command {
        return match cli::import::import(command, &config).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                say(format_args!("sitemapd import: {}", one_line(&e)));
                if e.is::<Usage>() { ExitCode::from(2) } else { ExitCode::FAILURE }
            }
        };
    }
    if let Command::Publish { .. } = command {
        return match cli::publish::publish(command, &config).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                say(format_args!("sitemapd publish: {}", one_line(&e)));
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

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    let mut options = config.store_options();
    // The commands read what they have just written, or must see everything: the primary only.
    if !matches!(command, Command::Serve) {
        options.read_url = None;
        options.serving = false;
    }
    match command {
        Command::Migrate => cli::migrate::migrate(&config, &options).await,
        Command::Serve => cli::serve::serve(config, options).await,
        Command::Backup { file } => cli::backup::backup(&config, &file).await,
        Command::Export { site, output } => cli::export::run(&config, &options, site, output).await,
        Command::Import { .. } => unreachable!("run by import()"),
        Command::Publish { .. } => unreachable!("run by publish()"),
        Command::Healthcheck => unreachable!("answered before telemetry starts"),
    }
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
