//! The one backoff policy and the one jitter of every retry in sitemapd: ingest's retries (run by `backon`),
//! IndexNow's retry delay and URL health's (both stored with their rows as a next-attempt time), the checker's poll
//! after a store failure, and a background worker's restart.
//!
//! A [`Backoff`] is a first wait that doubles after each failure, up to a bound: exact doublings of whole
//! durations, so that the delays stored per row are the documented ones to the nanosecond, and the `n`-th wait is
//! found in constant time whatever `n` (a count read from a row may be huge). `backon`'s `ExponentialBuilder` gives
//! the same shape as an iterator, but steps through `f32` seconds (a 1.337 s base is 25 µs off by its 12th wait) and
//! walks every step to reach the `n`-th: [`Backoff::waits`] is the iterator `backon` runs instead.
//!
//! [`jitter`] spreads a wait over a share of it, so that what failed together does not come back together; its
//! random unit comes from [`unit_random`] (the standard library's randomly keyed hasher: no crate, no I/O).

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A first wait, doubled after each further failure, at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self { first, max }
    }

    /// The wait after `failures` failures in a row: `first` after the first (0 counts as 1), doubled after each
    /// further one, at most `max`.
    pub fn after(self, failures: u32) -> Duration {
        // Doubled until at the bound: at most 128 steps, past which any nonzero `first` has passed any bound.
        let mut step = self.first;
        for _ in 0..failures.saturating_sub(1).min(128) {
            if step >= self.max {
                break;
            }
            step = step.saturating_mul(2);
        }
        step.min(self.max)
    }

    /// The waits after the first, second, … failure, without end (`take` the tries wanted).
    pub fn waits(self) -> impl Iterator<Item = Duration> + Send + Sync + Unpin {
        std::iter::successors(Some(self.first.min(self.max)), move |wait| Some(wait.saturating_mul(2).min(self.max)))
    }
}

/// `wait` spread at random over its upper part: between `floor` of it (a share, 0 to 1) and all of it. IndexNow
/// takes half ("equal jitter": never below half its step), URL health 90 % (a healthy URL's next check stays
/// within the cycle).
pub fn jitter(wait: Duration, floor: f64) -> Duration {
    spread(wait, floor, unit_random())
}

/// [`jitter`] with its random `unit` (in [0, 1)) given: what the tests pin.
pub fn spread(wait: Duration, floor: f64, unit: f64) -> Duration {
    let low = wait.mul_f64(floor.clamp(0.0, 1.0));
    low + (wait - low).mul_f64(unit.clamp(0.0, 1.0))
}

/// A random number in [0, 1): the standard library's randomly keyed hasher over a counter.
pub fn unit_random() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let bits = RandomState::new().hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_exactly_to_the_bound() {
        let b = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
        let after: Vec<u64> = (0..8).map(|n| b.after(n).as_millis() as u64).collect();
        assert_eq!(after, [10, 10, 20, 40, 80, 100, 100, 100]);
        let waits: Vec<Duration> = b.waits().take(6).collect();
        assert_eq!(waits, [10, 20, 40, 80, 100, 100].map(Duration::from_millis), "exact, no float steps");
        // The n-th wait at once, whatever n; never past the bound, even for absurd counts.
        let hour = Backoff::new(Duration::from_secs(10), Duration::from_secs(3600));
        for n in [12, 32, 33, 63, 64, 65, 1000, u32::MAX] {
            assert_eq!(hour.after(n), Duration::from_secs(3600), "{n}");
        }
        let odd = Backoff::new(Duration::from_millis(1337), Duration::MAX);
        assert_eq!(odd.after(12), Duration::from_millis(1337 * 2048));
        assert_eq!(odd.waits().nth(11), Some(Duration::from_millis(1337 * 2048)));
        assert_eq!(odd.after(200), Duration::MAX);
    }

    #[test]
    fn jitter_spreads_over_the_upper_share() {
        let d = Duration::from_secs(100);
        assert_eq!(spread(d, 0.5, 0.0), Duration::from_secs(50));
        assert_eq!(spread(d, 0.9, 0.5), Duration::from_secs(95));
        assert!(spread(d, 0.5, 0.999_999) <= d);
        let draws: Vec<Duration> = (0..1000).map(|_| jitter(d, 0.9)).collect();
        assert!(draws.iter().all(|j| *j >= Duration::from_secs(90) && *j <= d));
        assert!(
            draws.iter().any(|j| *j < Duration::from_secs(91)) && draws.iter().any(|j| *j > Duration::from_secs(99))
        );
    }

    #[test]
    fn random_units_are_in_range_and_vary() {
        let draws: Vec<f64> = (0..1000).map(|_| unit_random()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let distinct: std::collections::HashSet<u64> = draws.iter().map(|u| u.to_bits()).collect();
        assert!(distinct.len() > 990);
        assert!(draws.iter().any(|u| *u < 0.1) && draws.iter().any(|u| *u > 0.9));
    }
}
