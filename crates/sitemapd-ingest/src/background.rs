//! Work a bulk load hands off the async runtime: the parse of a request's lines. It runs on a few threads of its
//! own (one a core) at a lower CPU priority ([`NICE`] on Linux), so that a load parsing on every core does not hold
//! the runtime's workers. A crawler's request then waits neither behind a chunk's parse in a worker's queue (a
//! 1,000-line chunk is milliseconds of CPU in one poll) nor, once its worker wakes, for the core the parse holds:
//! the kernel gives it the core first.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::sync::oneshot;

/// How much lower than the process's the threads' CPU priority is (`nice` steps: the kernel weighs a thread at
/// nice +10 about a tenth of one at nice 0 when both want a core).
pub const NICE: i32 = 10;

/// The jobs run to their end (a panic included) since the process started.
static RUN: AtomicU64 = AtomicU64::new(0);

/// How many jobs the background threads have run since the process started.
pub fn jobs_run() -> u64 {
    RUN.load(Ordering::Relaxed)
}

/// The process's background threads (rayon's pool: a queue per thread, work stealing), started at the first job,
/// each lowered to [`NICE`] as it starts.
fn pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("sitemapd-bg-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .expect("start the background threads")
    })
}

/// Lowers the calling thread's CPU priority by [`NICE`] (Linux: `setpriority` of the thread's id; elsewhere
/// nothing). A failure is logged and the thread runs at the process's priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let tid = rustix::thread::gettid();
        let lowered =
            getpriority_process(Some(tid)).and_then(|now| setpriority_process(Some(tid), (now + NICE).min(19)));
        if let Err(e) = lowered {
            tracing::debug!(error = %e, "a background thread keeps the process's CPU priority");
        }
    }
}

/// Runs `job` on a background thread. The answer is its value, or its panic's payload.
pub fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Pending<T> {
    let (tx, rx) = oneshot::channel();
    // Caught here: a panic that left a rayon job would end the process.
    pool().spawn(move || {
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        RUN.fetch_add(1, Ordering::Relaxed);
        let _ = tx.send(done);
    });
    Pending(rx)
}

/// A job's answer to come. Dropped, it leaves the job to run to its end (nothing waits for it then).
pub struct Pending<T>(oneshot::Receiver<std::thread::Result<T>>);

impl<T> Future for Pending<T> {
    type Output = std::thread::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|answer| answer.unwrap_or_else(|_| Err(Box::new("the job was dropped"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_job_gives_its_value_and_a_panic_comes_back_as_its_payload() {
        let before = jobs_run();
        assert_eq!(run(|| 6 * 7).await.unwrap(), 42);
        assert!(jobs_run() > before, "counted");
        let panicked = run(|| -> u8 { panic!("a bad chunk") }).await.unwrap_err();
        assert_eq!(panicked.downcast_ref::<&str>(), Some(&"a bad chunk"));
        assert_eq!(run(|| "still serving").await.unwrap(), "still serving", "a panic leaves the thread running");
    }

    #[tokio::test]
    async fn jobs_run_off_the_calling_thread_at_a_lower_priority() {
        let here = std::thread::current().id();
        let (there, name) =
            run(|| (std::thread::current().id(), std::thread::current().name().map(str::to_owned))).await.unwrap();
        assert_ne!(there, here);
        assert!(name.is_some_and(|n| n.starts_with("sitemapd-bg-")));
        #[cfg(target_os = "linux")]
        {
            use rustix::process::getpriority_process;
            let mine = getpriority_process(Some(rustix::thread::gettid())).unwrap();
            let theirs = run(|| getpriority_process(Some(rustix::thread::gettid())).unwrap()).await.unwrap();
            assert_eq!(theirs, (mine + NICE).min(19), "nice {theirs} on a background thread, {mine} here");
        }
    }
}
