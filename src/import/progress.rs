//! An import's progress: on a terminal a progress bar (indicatif: sources done of those known so far, entries,
//! their rate, the time left as the sources known so far predict it); otherwise a log line every few seconds.
//! Each source that fails or is cut is said as it ends, either way.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Counters, SourceOutcome};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Progress {
    /// A progress bar on standard error (a terminal).
    Bar,
    /// A log line every so often.
    Lines(Duration),
    /// Nothing but the sources that fail.
    Off,
}

impl Progress {
    pub(super) fn start(self, counters: Arc<Counters>) -> Shown {
        let started = Instant::now();
        match self {
            Self::Bar => {
                let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner} {elapsed_precise} sources {pos}/{len} {bar:24} {msg} (eta {eta})",
                    )
                    .expect("a valid template"),
                );
                let shown = bar.clone();
                let ticker = tokio::spawn(async move {
                    loop {
                        update(&shown, &counters, started);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                });
                Shown { bar: Some(bar), ticker: Some(ticker) }
            }
            Self::Lines(every) => {
                let ticker = tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(every).await;
                        let (done, total, entries, written, rejected) = counts(&counters);
                        let rate = entries as f64 / started.elapsed().as_secs_f64().max(1e-3);
                        tracing::info!(
                            sources = format!("{done}/{total}"),
                            entries,
                            stored = written,
                            rejected,
                            per_second = rate.round() as u64,
                            "importing"
                        );
                    }
                });
                Shown { bar: None, ticker: Some(ticker) }
            }
            Self::Off => Shown { bar: None, ticker: None },
        }
    }
}

fn counts(c: &Counters) -> (u64, u64, u64, u64, u64) {
    (
        c.sources_done.load(Ordering::Relaxed),
        c.sources_total.load(Ordering::Relaxed),
        c.entries.load(Ordering::Relaxed),
        c.written.load(Ordering::Relaxed),
        c.rejected.load(Ordering::Relaxed),
    )
}

fn update(bar: &ProgressBar, counters: &Counters, started: Instant) {
    let (done, total, entries, written, rejected) = counts(counters);
    bar.set_length(total);
    bar.set_position(done);
    let rate = entries as f64 / started.elapsed().as_secs_f64().max(1e-3);
    bar.set_message(format!("{entries} entries ({rate:.0}/s), {written} stored, {rejected} rejected"));
}

/// Progress being shown.
pub(super) struct Shown {
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Shown {
    /// Says a source that failed or was cut (above the bar, on a terminal); one that was read whole at debug level.
    pub(super) fn source_done(&self, outcome: &SourceOutcome) {
        let what = outcome.format.unwrap_or("source");
        let line = match (&outcome.error, &outcome.cut) {
            (Some(e), _) => format!("{}: failed: {e}", outcome.source),
            (None, Some(cut)) => format!("{}: cut: {cut}", outcome.source),
            (None, None) => {
                tracing::debug!(source = %outcome.source, format = what, items = outcome.items, "read");
                return;
            }
        };
        match &self.bar {
            Some(bar) => bar.println(line),
            None => tracing::warn!(source = %outcome.source, format = what, items = outcome.items, "{line}"),
        }
    }

    pub(super) fn finish(self) {
        if let Some(ticker) = self.ticker {
            ticker.abort();
        }
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
