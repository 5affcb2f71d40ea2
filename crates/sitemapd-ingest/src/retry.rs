//! Retrying an operation in process with backoff: a first wait, doubling after each retry, each at most a bound,
//! unless a failure asks for its own wait (HTTP's `Retry-After`), bounded alike. `backon` runs it; the waits are
//! the one policy's ([`sitemapd_core::backoff`]: exact doublings of whole durations, no float steps), without
//! jitter here.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::Retryable;

/// How often an operation is tried again and how long it waits first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Tries after the first.
    pub retries: u32,
    /// The first wait; each next one is twice as long.
    pub first: Duration,
    /// The longest wait, computed or asked for; `None`: no bound.
    pub max: Option<Duration>,
}

impl Backoff {
    /// The waits before each retry, in order.
    pub fn waits(self) -> impl Iterator<Item = Duration> + Send + Sync + Unpin {
        let max = self.max.unwrap_or(Duration::MAX);
        sitemapd_core::backoff::Backoff::new(self.first, max).waits().take(self.retries as usize)
    }
}

/// What a failed try calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Give up: the failure is the answer.
    Stop,
    /// Try again after the next wait, or after the wait the failure asks for (bounded by [`Backoff::max`]).
    Retry(Option<Duration>),
}

/// A failure given up on, and how many tries were made.
#[derive(Debug)]
pub struct GaveUp<E> {
    pub error: E,
    pub tries: u32,
}

/// Runs `op` until it succeeds, `judge` calls a failure [`Next::Stop`], or `backoff`'s retries are spent. Before
/// each wait, `notify` is told the failure, the number of the try that failed (from 1) and the wait.
pub async fn retry<T, E, Fut>(
    backoff: Backoff,
    mut op: impl FnMut() -> Fut,
    mut judge: impl FnMut(&E) -> Next,
    mut notify: impl FnMut(&E, u32, Duration),
) -> Result<T, GaveUp<E>>
where
    Fut: Future<Output = Result<T, E>>,
{
    // Shared by the closures below, and `Sync` so that the future can move between threads.
    let tries = AtomicU32::new(0);
    let asked = Mutex::new(None);
    let max = backoff.max.unwrap_or(Duration::MAX);
    let asked_wait = || asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    let attempt = || {
        tries.fetch_add(1, Ordering::Relaxed);
        op()
    };
    attempt
        .retry(backoff.waits())
        .sleep(tokio::time::sleep)
        .when(|e| match judge(e) {
            Next::Stop => false,
            Next::Retry(after) => {
                *asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = after;
                true
            }
        })
        .adjust(|_, wait| wait.map(|wait| asked_wait().unwrap_or(wait).min(max)))
        .notify(|e, wait| notify(e, tries.load(Ordering::Relaxed), wait))
        .await
        .map_err(|error| GaveUp { error, tries: tries.load(Ordering::Relaxed) })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn waits_double_from_the_first_within_the_bound() {
        let secs = |b: Backoff| b.waits().map(|w| w.as_secs()).collect::<Vec<_>>();
        let b = Backoff { retries: 4, first: Duration::from_secs(1), max: None };
        assert_eq!(secs(b), [1, 2, 4, 8]);
        assert_eq!(secs(Backoff { retries: 8, max: Some(Duration::from_secs(60)), ..b }), [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(secs(Backoff { retries: 0, ..b }), [] as [u64; 0]);
        let b = Backoff { retries: 3, first: Duration::from_millis(10), max: None };
        assert_eq!(b.waits().collect::<Vec<_>>(), [10, 20, 40].map(Duration::from_millis), "exact, no float steps");
    }

    /// Fails `failures` times, then succeeds; what `retry` waited, as `notify` saw it.
    async fn run(
        backoff: Backoff,
        failures: u32,
        judge: impl FnMut(&u32) -> Next,
    ) -> (Result<u32, GaveUp<u32>>, Vec<(u32, Duration)>) {
        let calls = Cell::new(0);
        let mut waits = Vec::new();
        let result = retry(
            backoff,
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move { if n <= failures { Err(n) } else { Ok(n) } }
            },
            judge,
            |_, tried, wait| waits.push((tried, wait)),
        )
        .await;
        (result, waits)
    }

    #[tokio::test(start_paused = true)]
    async fn retries_until_success_or_the_last_try() {
        let b = Backoff { retries: 3, first: Duration::from_secs(1), max: Some(Duration::from_secs(60)) };
        let (result, waits) = run(b, 2, |_| Next::Retry(None)).await;
        assert_eq!(result.unwrap(), 3);
        assert_eq!(waits, [(1, Duration::from_secs(1)), (2, Duration::from_secs(2))]);
        let (result, waits) = run(b, 10, |_| Next::Retry(None)).await;
        let gave_up = result.unwrap_err();
        assert_eq!((gave_up.error, gave_up.tries), (4, 4));
        assert_eq!(waits.len(), 3);
        let (result, waits) = run(b, 10, |_| Next::Stop).await;
        assert_eq!(result.unwrap_err().tries, 1);
        assert!(waits.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_asked_for_replaces_the_next_within_the_bound() {
        let b = Backoff { retries: 3, first: Duration::from_secs(1), max: Some(Duration::from_secs(60)) };
        let asked = |e: &u32| Next::Retry(Some(Duration::from_secs(if *e == 1 { 7 } else { 600 })));
        let (result, waits) = run(b, 2, asked).await;
        assert_eq!(result.unwrap(), 3);
        assert_eq!(waits, [(1, Duration::from_secs(7)), (2, Duration::from_secs(60))]);
    }
}
