//! The memory of request bodies in flight, bounded for the whole process (`body_memory_bytes`): every write
//! request takes a share of one budget before it holds a body's bytes, and gives it back when its parse and write
//! end. Past the budget a request waits briefly ([`WAIT`]), then is answered 503 with `Retry-After`, its body read
//! and dropped as it arrives, never held: what many clients send at once never takes more memory than the budget
//! allows.
//!
//! A JSON array is charged [`EXPANSION`] times its size (its `Content-Length`, or `max_json_bytes` until the body
//! is read), since the body, its parsed entries and the write's plan are in memory together (24 parallel arrays
//! of 12 MiB took 28 to 40 MB each). An NDJSON body is charged by batch: its lines' bytes, times [`EXPANSION`], in
//! steps of [`NDJSON_STEP`] as a batch fills, released when the batch has committed.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// What a body's bytes are multiplied by: the body, its parsed entries and the write's own copies.
pub const EXPANSION: u64 = 3;
/// The longest a request waits for its share before the 503.
pub const WAIT: Duration = Duration::from_secs(1);
/// An NDJSON batch takes its share in steps of this many bytes of lines.
pub const NDJSON_STEP: usize = 1 << 20;

/// The budget: a semaphore of KiB.
#[derive(Clone, Debug)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total_kib: u32,
}

/// A share of the budget, given back when dropped. Empty shares merge into others.
#[derive(Debug, Default)]
pub struct BodyMemory(Option<OwnedSemaphorePermit>);

impl BodyMemory {
    /// The KiB held.
    pub fn kib(&self) -> usize {
        self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Adds `other`'s share to this one.
    pub fn merge(&mut self, other: Self) {
        match (&mut self.0, other.0) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

    /// Gives back all but `kib` KiB.
    fn keep(&mut self, kib: usize) {
        if let Some(permit) = &mut self.0 {
            let excess = permit.num_permits().saturating_sub(kib);
            drop(permit.split(excess));
        }
    }
}

impl BodyBudget {
    /// A budget of `bytes` (at least 1 KiB).
    pub fn new(bytes: u64) -> Self {
        let total_kib = u32::try_from(bytes / 1024).unwrap_or(u32::MAX).clamp(1, Semaphore::MAX_PERMITS as u32);
        Self { permits: Arc::new(Semaphore::new(total_kib as usize)), total_kib }
    }

    /// The KiB charged for `bytes` of body: [`EXPANSION`] times, rounded up; at most the whole budget, so that a
    /// body the other limits allow is never refused for its size alone (it waits until it is alone).
    pub fn charge_kib(&self, bytes: u64) -> u32 {
        let kib = bytes.saturating_mul(EXPANSION).div_ceil(1024).max(1);
        u32::try_from(kib).unwrap_or(u32::MAX).min(self.total_kib)
    }

    /// The KiB free now.
    pub fn available_kib(&self) -> usize {
        self.permits.available_permits()
    }

    /// Takes the share of `bytes` of body, waiting at most [`WAIT`]; past it, 503 `busy` (with `Retry-After`).
    pub async fn take(&self, bytes: u64) -> Result<BodyMemory, ApiError> {
        let kib = self.charge_kib(bytes);
        match tokio::time::timeout(WAIT, self.permits.clone().acquire_many_owned(kib)).await {
            Ok(Ok(permit)) => Ok(BodyMemory(Some(permit))),
            // Closed: never (the budget is never closed).
            Ok(Err(_)) | Err(_) => Err(busy(self.total_kib)),
        }
    }

    /// Gives back all of `memory` but the share of `bytes` (a body whose size was not declared is charged
    /// `max_json_bytes` while it is read, then what it came to).
    pub fn shrink_to(&self, memory: &mut BodyMemory, bytes: u64) {
        memory.keep(self.charge_kib(bytes) as usize);
    }
}

/// The 503 of a full budget.
fn busy(total_kib: u32) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        format!(
            "the server is holding as many request bodies as body_memory_bytes ({} bytes) allows; nothing of this \
             request was kept or stored. Send it again after Retry-After.",
            u64::from(total_kib) * 1024
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shares_are_charged_waited_for_and_given_back() {
        let budget = BodyBudget::new(3 << 20); // 3 MiB: 3072 KiB
        assert_eq!(budget.charge_kib(1024), 3);
        assert_eq!(budget.charge_kib(1), 1);
        assert_eq!(budget.charge_kib(0), 1);
        assert_eq!(budget.charge_kib(1 << 30), 3072, "at most the whole budget");
        let first = budget.take(512 << 10).await.unwrap(); // 1.5 MiB charged
        assert_eq!(first.kib(), 1536);
        let second = budget.take(512 << 10).await.unwrap();
        assert_eq!(budget.available_kib(), 0);
        let started = tokio::time::Instant::now();
        let e = budget.take(1).await.unwrap_err();
        assert!(started.elapsed() >= WAIT);
        assert_eq!((e.status, e.code), (StatusCode::SERVICE_UNAVAILABLE, "busy"));
        assert!(e.message.contains("body_memory_bytes (3145728 bytes)"), "{}", e.message);
        // A waiting request gets its share as soon as one is given back.
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(512 << 10).await.map(|m| m.kib()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        assert_eq!(waiting.await.unwrap().unwrap(), 1536);
        drop(second);
        assert_eq!(budget.available_kib(), 3072, "every share given back");
    }

    #[tokio::test]
    async fn shares_merge_and_shrink() {
        let budget = BodyBudget::new(1 << 20);
        let mut held = BodyMemory::default();
        assert_eq!(held.kib(), 0);
        held.merge(budget.take(10 << 10).await.unwrap());
        held.merge(budget.take(10 << 10).await.unwrap());
        assert_eq!(held.kib(), 60);
        budget.shrink_to(&mut held, 1024);
        assert_eq!((held.kib(), budget.available_kib()), (3, 1021));
        drop(held);
        assert_eq!(budget.available_kib(), 1024);
    }
}
