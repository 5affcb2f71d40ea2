//! Background work in one shape: a [`Worker`] has a name and a `run` that works until its cancellation token is
//! cancelled; a [`Supervisor`] starts workers in order and stops them in the reverse order, within one grace
//! period. Every background task of `serve` is one (the list, in start order, is `workers.rs`).
//!
//! - **Metrics:** `sitemapd_worker_up{worker}` is 1 while the worker runs, 0 once it stopped, failed or finished;
//!   `sitemapd_worker_restarts_total{worker}` counts its restarts (exported at 0 from its start).
//! - **A failure** (a panic, or `run` returning an error) is logged and the worker is started again after a pause:
//!   the one backoff ([`crate::backoff`]), 1 s doubling to a minute, with jitter (half to all of each step),
//!   counted from 1 again once a run lasted a minute. The process goes on serving meanwhile: what a worker does is
//!   never what answers a request, and a worker's state worth keeping is in the database or in what it holds across
//!   runs (its queue, its channel), so a fresh run takes up where the failed one left off.
//! - **`run` returning `Ok` before it is cancelled** means the worker is done (nothing left to do, or what it
//!   served is gone): it is not started again.
//! - **Stopping:** each worker's token is cancelled in turn, last started first, and waited for; whatever still runs
//!   when the grace period ends is aborted (a worker must not hold anything that an abort leaves broken: a claim in
//!   the database expires with its lease). A last flush goes in `run`, after its token is cancelled.
//!
//! A new worker is one file (a type implementing [`Worker`], its settings read in one `from_config`) and one line in
//! the list (`workers.rs`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::{AbortOnDropHandle, TaskTracker};

use crate::backoff::{Backoff, jitter};
use crate::telemetry;

/// The pause before a failed worker is started again: 1 s after its first failure in a row, doubling to a minute.
pub const RESTART: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// A background task of the server.
#[async_trait]
pub trait Worker: Send + Sync + 'static {
    /// Its name in log lines and in its metrics' `worker` label: lower case, words joined by `-`.
    fn name(&self) -> &'static str;

    /// Works until `stop` is cancelled, then returns soon (a last flush, if any, goes here). Returning `Ok` before
    /// that means done; an error, or a panic, gets it started again ([`RESTART`]). It may be called again after a
    /// failure: what must outlive a run is held by the worker, not by the run.
    async fn run(&self, stop: CancellationToken) -> anyhow::Result<()>;
}

/// A running worker: [`Running::stop`] stops it. Dropping it cancels it (without waiting).
pub struct Running {
    name: &'static str,
    stop: CancellationToken,
    task: JoinHandle<()>,
    _cancel_on_drop: DropGuard,
}

/// Starts `worker` on the current runtime, on its own (a [`Supervisor`] starts the server's).
pub fn spawn(worker: impl Worker) -> Running {
    start(Arc::new(worker), CancellationToken::new(), None)
}

fn start(worker: Arc<dyn Worker>, stop: CancellationToken, tracker: Option<&TaskTracker>) -> Running {
    let name = worker.name();
    let supervised = supervise(worker, stop.clone());
    let task = match tracker {
        Some(tracker) => tracker.spawn(supervised),
        None => tokio::spawn(supervised),
    };
    Running { name, _cancel_on_drop: stop.clone().drop_guard(), stop, task }
}

impl Running {
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Cancels the worker and waits until it ends, at most `within`; then aborts it. Whether it ended in time.
    pub async fn stop(self, within: Duration) -> bool {
        self.stop_by(Instant::now() + within).await
    }

    async fn stop_by(self, deadline: Instant) -> bool {
        self.stop.cancel();
        let mut task = self.task;
        if tokio::time::timeout_at(deadline, &mut task).await.is_ok() {
            return true;
        }
        tracing::warn!(worker = self.name, "a background worker still busy at the end of the grace period was aborted");
        task.abort();
        // The abort ends the task at its next await: its gauge is set here.
        let _ = task.await;
        telemetry::worker_up(self.name).set(0.0);
        false
    }
}

/// Runs `worker` until `stop` is cancelled, starting it again after each failure.
async fn supervise(worker: Arc<dyn Worker>, stop: CancellationToken) {
    let name = worker.name();
    let (up, restarts) = (telemetry::worker_up(name), telemetry::worker_restarts(name));
    restarts.increment(0);
    let mut failures = 0u32;
    loop {
        up.set(1.0);
        let started = Instant::now();
        let run = {
            let (worker, stop) = (Arc::clone(&worker), stop.clone());
            // A task of its own, so that a panic is caught; aborted with this one.
            AbortOnDropHandle::new(tokio::spawn(async move { worker.run(stop).await }))
        };
        let ended = run.await;
        up.set(0.0);
        let why = match ended {
            Ok(Ok(())) => return,
            Ok(Err(e)) => format!("{e:#}"),
            Err(e) => match e.try_into_panic() {
                Ok(payload) => panic_message(payload.as_ref()),
                // Cancelled: only when this task is aborted too.
                Err(_) => return,
            },
        };
        if stop.is_cancelled() {
            tracing::warn!(worker = name, error = why, "a background worker failed as it stopped");
            return;
        }
        failures = if started.elapsed() >= RESTART.max { 1 } else { failures.saturating_add(1) };
        let pause = jitter(RESTART.after(failures), 0.5);
        tracing::error!(
            worker = name,
            error = why,
            failures,
            restart_in_ms = pause.as_millis() as u64,
            "a background worker failed; it is started again after a pause"
        );
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        restarts.increment(1);
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let message = payload.downcast_ref::<&str>().map(|s| (*s).to_owned());
    let message = message.or_else(|| payload.downcast_ref::<String>().cloned());
    format!("panicked: {}", message.unwrap_or_else(|| "(no message)".to_owned()))
}

/// The workers of a server, in the order started. Dropping it cancels them all (without waiting).
#[derive(Default)]
pub struct Supervisor {
    running: Vec<Running>,
    tracker: TaskTracker,
}

impl Supervisor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts `worker` after those started before it (it stops before them).
    pub fn start(&mut self, worker: impl Worker) {
        self.start_arc(Arc::new(worker));
    }

    /// [`Supervisor::start`] for a worker the configuration may leave out (`None`).
    pub fn start_if(&mut self, worker: Option<impl Worker>) {
        if let Some(worker) = worker {
            self.start(worker);
        }
    }

    pub fn start_arc(&mut self, worker: Arc<dyn Worker>) {
        tracing::debug!(worker = worker.name(), "background worker started");
        self.running.push(start(worker, CancellationToken::new(), Some(&self.tracker)));
    }

    /// The workers' names, in start order.
    pub fn names(&self) -> Vec<&'static str> {
        self.running.iter().map(Running::name).collect()
    }

    /// Stops every worker, the last started first, each waited for until it ends; the whole within `grace`, after
    /// which those still running are aborted. Whether every one ended in time.
    pub async fn stop(mut self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        let (mut stopped, mut abandoned) = (Vec::new(), Vec::new());
        while let Some(running) = self.running.pop() {
            let name = running.name;
            if running.stop_by(deadline).await { &mut stopped } else { &mut abandoned }.push(name);
        }
        self.tracker.close();
        self.tracker.wait().await;
        if abandoned.is_empty() {
            tracing::info!(workers = ?stopped, "background workers stopped");
        } else {
            tracing::warn!(workers = ?stopped, ?abandoned, "background workers stopped, some abandoned at the end of the grace period");
        }
        abandoned.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// What the test workers did, in order: ("start" | "stop", name).
    type Log = Arc<Mutex<Vec<(&'static str, &'static str)>>>;

    /// Logs its start, waits for its token, logs its stop; panics on its first `panics` runs; ignores its
    /// token for `deaf` after it is cancelled.
    struct Probe {
        name: &'static str,
        log: Log,
        panics: u32,
        runs: AtomicU32,
        deaf: Duration,
    }

    impl Probe {
        fn new(name: &'static str, log: &Log) -> Self {
            Self { name, log: Arc::clone(log), panics: 0, runs: AtomicU32::new(0), deaf: Duration::ZERO }
        }
    }

    #[async_trait]
    impl Worker for Probe {
        fn name(&self) -> &'static str {
            self.name
        }

        async fn run(&self, stop: CancellationToken) -> anyhow::Result<()> {
            let run = self.runs.fetch_add(1, Ordering::SeqCst);
            self.log.lock().unwrap().push(("start", self.name));
            assert!(run >= self.panics, "run {run} of {} panics", self.name);
            stop.cancelled().await;
            tokio::time::sleep(self.deaf).await;
            self.log.lock().unwrap().push(("stop", self.name));
            Ok(())
        }
    }

    /// The value of `sitemapd_worker_up` or `…_restarts_total` for `worker` in the process's recorder (installed by
    /// each test before its workers start: a handle taken before it counts nowhere).
    fn scraped(metric: &str, worker: &str) -> Option<f64> {
        let text = telemetry::prometheus().render();
        let prefix = format!("{metric}{{worker=\"{worker}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).map(|v| v.parse().unwrap())
    }

    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(600);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn workers_start_in_order_and_stop_in_reverse() {
        telemetry::prometheus();
        let log = Log::default();
        let mut supervisor = Supervisor::new();
        for name in ["test-first", "test-second", "test-third"] {
            supervisor.start(Probe::new(name, &log));
        }
        assert_eq!(supervisor.names(), ["test-first", "test-second", "test-third"]);
        until("every worker started", || log.lock().unwrap().len() == 3).await;
        assert_eq!(scraped("sitemapd_worker_up", "test-second"), Some(1.0));
        assert!(supervisor.stop(Duration::from_secs(5)).await);
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            [
                ("start", "test-first"),
                ("start", "test-second"),
                ("start", "test-third"),
                ("stop", "test-third"),
                ("stop", "test-second"),
                ("stop", "test-first"),
            ]
        );
        assert_eq!(scraped("sitemapd_worker_up", "test-second"), Some(0.0));
        assert_eq!(scraped("sitemapd_worker_restarts_total", "test-second"), Some(0.0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_worker_is_restarted_after_a_pause_and_counted() {
        telemetry::prometheus();
        let log = Log::default();
        let mut supervisor = Supervisor::new();
        supervisor.start(Probe { panics: 2, ..Probe::new("test-panics", &log) });
        let started = Instant::now();
        until("the third run", || log.lock().unwrap().len() == 3).await;
        // Two pauses: half to all of 1 s, then of 2 s.
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1500) && took <= Duration::from_secs(3) + Duration::from_millis(50),
            "{took:?}"
        );
        assert_eq!(scraped("sitemapd_worker_restarts_total", "test-panics"), Some(2.0));
        assert_eq!(scraped("sitemapd_worker_up", "test-panics"), Some(1.0));
        assert!(supervisor.stop(Duration::from_secs(5)).await);
        assert_eq!(scraped("sitemapd_worker_up", "test-panics"), Some(0.0));
    }

    /// An error returned restarts as a panic does; a worker that returns `Ok` unasked is done.
    #[tokio::test(start_paused = true)]
    async fn an_error_restarts_and_ok_ends() {
        telemetry::prometheus();
        struct Fails(AtomicU32);
        #[async_trait]
        impl Worker for Fails {
            fn name(&self) -> &'static str {
                "test-fails"
            }
            async fn run(&self, _: CancellationToken) -> anyhow::Result<()> {
                match self.0.fetch_add(1, Ordering::SeqCst) {
                    0 => anyhow::bail!("the database is down"),
                    _ => Ok(()),
                }
            }
        }
        let running = spawn(Fails(AtomicU32::new(0)));
        until("done after one restart", || scraped("sitemapd_worker_restarts_total", "test-fails") == Some(1.0)).await;
        until("down once done", || scraped("sitemapd_worker_up", "test-fails") == Some(0.0)).await;
        assert!(running.stop(Duration::from_secs(1)).await);
    }

    /// A worker that goes on for 10 s after its token is cancelled is aborted at the end of the one grace period,
    /// and the workers started before it still get their stop (aborted at once, the grace being spent).
    #[tokio::test(start_paused = true)]
    async fn a_worker_that_overruns_the_grace_is_aborted() {
        telemetry::prometheus();
        let log = Log::default();
        let mut supervisor = Supervisor::new();
        supervisor.start(Probe::new("test-before-deaf", &log));
        supervisor.start(Probe { deaf: Duration::from_secs(10), ..Probe::new("test-deaf", &log) });
        until("both started", || log.lock().unwrap().len() == 2).await;
        let started = Instant::now();
        assert!(!supervisor.stop(Duration::from_secs(2)).await, "not every worker ended in time");
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(3), "{took:?}");
        assert!(!log.lock().unwrap().contains(&("stop", "test-deaf")), "aborted before its stop");
        assert_eq!(scraped("sitemapd_worker_up", "test-deaf"), Some(0.0));
    }
}
