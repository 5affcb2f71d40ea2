//! The memory of request bodies in flight, bounded for the whole process (`body_memory_bytes`): a write request's
//! share of one budget grows with the bytes of its body that have arrived, and is given back when its parse and
//! write end. When a share cannot grow, the request waits briefly ([`WAIT`]), then is answered 503 `busy` with
//! `Retry-After`, the rest of its body read and dropped as it arrives, never held: what many clients send at once
//! never takes more memory than the budget allows.
//!
//! A body is charged [`EXPANSION`] times the bytes of it that have arrived (a JSON array, until its write ends), or
//! of its batch's lines (an NDJSON body, in steps of [`NDJSON_STEP`], until the batch has committed), since the
//! body, its parsed entries and the write's plan are in memory together (BENCHMARKS.md, "Figures formerly in code
//! comments"). A declared `Content-Length` reserves nothing: a client that sends its headers and then nothing
//! holds nothing, and one that trickles holds what it sent until the idle limit or the minimum receive rate cuts
//! it (`receive_rate`).
//!
//! Two rules keep one writer from stopping the others:
//! - **Small bodies have a reserve.** An eighth of the budget ([`RESERVE_PART`]) is kept for bodies charged at
//!   most [`SMALL_BYTES`] of body: such a body takes its share from the rest of the budget when it can and from
//!   the reserve when that is full, so that a write of a few entries is accepted whatever large uploads are in
//!   flight.
//! - **One writer's large bodies take at most a part of the rest.** What a body is charged past its small share
//!   is charged to its writer too (a token's scope, [`Access`]: the sites it may write; every token of a site is
//!   one writer), and one writer's bodies together may hold at most the larger of half the rest and the rest but
//!   one largest JSON body (3 × `max_json_bytes`). A token of one site cannot fill the budget alone; another
//!   site's large write still finds room. Per writer rather than per peer address: behind a proxy every client
//!   has the proxy's address, and a client with many addresses would get many shares.
//!
//! A body is never charged more than one writer may hold, so a body the other limits allow is never refused for
//! its size alone: it waits until it is alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::access::Access;
use crate::error::ApiError;

/// What a body's bytes are multiplied by: the body, its parsed entries and the write's own copies.
pub const EXPANSION: u64 = 3;
/// The longest a request waits for its share to grow before the 503.
pub const WAIT: Duration = Duration::from_secs(1);
/// An NDJSON batch grows its share in steps of this many bytes of lines.
pub const NDJSON_STEP: usize = 64 << 10;
/// A body charged for at most this many bytes (192 KiB charged) may draw on the reserve.
pub const SMALL_BYTES: u64 = 64 << 10;
/// The reserve for small bodies is this part of the budget.
pub const RESERVE_PART: u32 = 8;

/// The budget: semaphores of KiB.
#[derive(Clone, Debug)]
pub struct BodyBudget(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// The budget but the reserve: every body draws on it first.
    general: Arc<Semaphore>,
    /// The reserve: small bodies only.
    reserve: Arc<Semaphore>,
    total_kib: u32,
    /// What one writer's large bodies may hold together, and the most one body is charged.
    writer_kib: u32,
    writers: Mutex<HashMap<Access, Arc<Semaphore>>>,
}

/// A body's share of the budget, given back when dropped.
#[derive(Debug, Default)]
pub struct BodyMemory {
    general: Option<OwnedSemaphorePermit>,
    reserve: Option<OwnedSemaphorePermit>,
    /// What it holds past its small share, charged to its writer as well.
    writer: Option<OwnedSemaphorePermit>,
}

fn kib_of(permit: Option<&OwnedSemaphorePermit>) -> u32 {
    permit.map_or(0, |p| p.num_permits() as u32)
}

fn merge(mine: &mut Option<OwnedSemaphorePermit>, theirs: Option<OwnedSemaphorePermit>) {
    match (mine.as_mut(), theirs) {
        (Some(mine), Some(theirs)) => mine.merge(theirs),
        (None, theirs) => *mine = theirs,
        (Some(_), None) => {}
    }
}

impl BodyMemory {
    /// The KiB held.
    pub fn kib(&self) -> usize {
        (kib_of(self.general.as_ref()) + kib_of(self.reserve.as_ref())) as usize
    }

    /// The KiB held from the reserve.
    pub fn reserve_kib(&self) -> usize {
        kib_of(self.reserve.as_ref()) as usize
    }

    fn add(&mut self, more: Self) {
        merge(&mut self.general, more.general);
        merge(&mut self.reserve, more.reserve);
        merge(&mut self.writer, more.writer);
    }
}

/// Why a share could not grow.
enum Full {
    /// The writer's bodies hold all one writer may.
    Writer,
    /// The budget (and for a small body, the reserve) is full.
    Budget,
}

impl BodyBudget {
    /// A budget of `bytes` (at least 1 KiB), where a JSON body is at most `max_json_bytes`.
    pub fn new(bytes: u64, max_json_bytes: usize) -> Self {
        let total_kib = u32::try_from(bytes / 1024).unwrap_or(u32::MAX).clamp(2, Semaphore::MAX_PERMITS as u32);
        let reserve_kib = (total_kib / RESERVE_PART).max(1);
        let general_kib = total_kib - reserve_kib;
        let largest = charge(max_json_bytes as u64, u32::MAX);
        let writer_kib = (general_kib / 2).max(general_kib.saturating_sub(largest)).max(1);
        Self(Arc::new(Inner {
            general: Arc::new(Semaphore::new(general_kib as usize)),
            reserve: Arc::new(Semaphore::new(reserve_kib as usize)),
            total_kib,
            writer_kib,
            writers: Mutex::default(),
        }))
    }

    /// The KiB charged for `bytes` of body: [`EXPANSION`] times, rounded up; at most what one writer may hold, so
    /// that a body the other limits allow is never refused for its size alone (it waits until it is alone).
    pub fn charge_kib(&self, bytes: u64) -> u32 {
        charge(bytes, self.0.writer_kib)
    }

    /// The KiB free now, the reserve included.
    pub fn available_kib(&self) -> usize {
        self.0.general.available_permits() + self.0.reserve.available_permits()
    }

    /// The KiB one writer's large bodies may hold together.
    pub fn writer_kib(&self) -> u32 {
        self.0.writer_kib
    }

    /// Grows `memory`, the share of a body of `writer`, to the charge of `bytes` of body, waiting at most [`WAIT`];
    /// past it, [`Busy`], and `memory` is as it was.
    pub async fn grow(&self, memory: &mut BodyMemory, writer: &Access, bytes: u64) -> Result<(), Busy> {
        let (held, target) = (memory.kib() as u32, self.charge_kib(bytes));
        if target <= held {
            return Ok(());
        }
        let writer_full = AtomicBool::new(true);
        match tokio::time::timeout(WAIT, self.more(target - held, target, writer, &writer_full)).await {
            Ok(more) => {
                memory.add(more);
                Ok(())
            }
            Err(_) if writer_full.load(Ordering::Relaxed) => Err(Busy(self.why(&Full::Writer))),
            Err(_) => Err(Busy(self.why(&Full::Budget))),
        }
    }

    /// `more` KiB for a body that will then hold `target`: from the general part, or from the reserve for a small
    /// body; past [`SMALL_BYTES`], from its writer's part too. `writer_full` says whether it waits for its writer's.
    async fn more(&self, more: u32, target: u32, writer: &Access, writer_full: &AtomicBool) -> BodyMemory {
        let general = self.0.general.clone();
        if target <= charge(SMALL_BYTES, u32::MAX) {
            writer_full.store(false, Ordering::Relaxed);
            if let Ok(permit) = general.clone().try_acquire_many_owned(more) {
                return BodyMemory { general: Some(permit), ..BodyMemory::default() };
            }
            // Neither semaphore is ever closed.
            return tokio::select! {
                biased;
                Ok(permit) = general.acquire_many_owned(more) => BodyMemory { general: Some(permit), ..Default::default() },
                Ok(permit) = self.0.reserve.clone().acquire_many_owned(more) => {
                    BodyMemory { reserve: Some(permit), ..Default::default() }
                }
            };
        }
        let part = self.writer(writer);
        let Ok(writer) = part.acquire_many_owned(more).await else { unreachable!("never closed") };
        writer_full.store(false, Ordering::Relaxed);
        let Ok(general) = general.acquire_many_owned(more).await else { unreachable!("never closed") };
        BodyMemory { general: Some(general), reserve: None, writer: Some(writer) }
    }

    /// `writer`'s part: what its large bodies hold.
    fn writer(&self, writer: &Access) -> Arc<Semaphore> {
        let mut writers = self.0.writers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // As many entries as token scopes are configured: the map never grows past them.
        writers.entry(writer.clone()).or_insert_with(|| Arc::new(Semaphore::new(self.0.writer_kib as usize))).clone()
    }

    /// Why a share could not grow.
    fn why(&self, full: &Full) -> String {
        match full {
            Full::Budget => format!(
                "the server is holding as many request bodies as body_memory_bytes ({} bytes) allows",
                u64::from(self.0.total_kib) * 1024
            ),
            Full::Writer => format!(
                "the bodies this token is sending already hold as much of body_memory_bytes as one token may ({} \
                 bytes)",
                u64::from(self.0.writer_kib) * 1024
            ),
        }
    }
}

/// A share that could not grow: why.
#[derive(Debug)]
pub struct Busy(String);

impl Busy {
    /// The 503 `busy` (with `Retry-After`) of a request of which `kept` was stored.
    pub fn answer(self, kept: &str) -> ApiError {
        let message = format!("{}; {kept}. Send it again after Retry-After.", self.0);
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
    }
}

/// [`EXPANSION`] times `bytes` in KiB, rounded up, at least 1 and at most `most`.
fn charge(bytes: u64, most: u32) -> u32 {
    let kib = bytes.saturating_mul(EXPANSION).div_ceil(1024).max(1);
    u32::try_from(kib).unwrap_or(u32::MAX).min(most)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITE_A: fn() -> Access = || Access::Sites(vec!["a".into()]);
    const SITE_B: fn() -> Access = || Access::Sites(vec!["b".into()]);

    #[test]
    fn the_budget_is_split_into_a_reserve_and_a_writers_part() {
        // 192 MiB with 16 MiB JSON bodies: a 24 MiB reserve, and one writer 168 - 48 = 120 MiB.
        let budget = BodyBudget::new(192 << 20, 16 << 20);
        assert_eq!(budget.available_kib(), 192 << 10);
        assert_eq!(budget.writer_kib(), 120 << 10);
        assert_eq!(budget.0.reserve.available_permits(), 24 << 10);
        // A small budget: half the rest.
        let budget = BodyBudget::new(1 << 20, 16 << 20);
        assert_eq!((budget.0.reserve.available_permits(), budget.writer_kib()), (128, 448));
        assert_eq!(budget.charge_kib(1024), 3);
        assert_eq!(budget.charge_kib(0), 1);
        assert_eq!(budget.charge_kib(1 << 30), 448, "at most what one writer may hold");
    }

    #[tokio::test(start_paused = true)]
    async fn shares_grow_wait_and_are_given_back() {
        let budget = BodyBudget::new(3 << 20, 1 << 20); // 3072 KiB: 384 reserve, 2688 general, one writer 1344
        let mut first = BodyMemory::default();
        budget.grow(&mut first, &SITE_A(), 100 << 10).await.unwrap();
        assert_eq!(first.kib(), 300);
        budget.grow(&mut first, &SITE_A(), 1 << 30).await.unwrap();
        assert_eq!(first.kib(), 1344, "at most what one writer may hold");
        budget.grow(&mut first, &SITE_A(), 10).await.unwrap();
        assert_eq!(first.kib(), 1344, "a share never shrinks while held");
        // Another writer's large body fits beside it; a second large one of site A's must wait for the first.
        let mut other = BodyMemory::default();
        budget.grow(&mut other, &SITE_B(), 300 << 10).await.unwrap();
        assert_eq!(other.kib(), 900);
        let mut second = BodyMemory::default();
        budget.grow(&mut second, &SITE_A(), 60 << 10).await.unwrap();
        assert_eq!(second.kib(), 180, "a small share is no writer's");
        let started = tokio::time::Instant::now();
        let e = budget.grow(&mut second, &SITE_A(), 100 << 10).await.unwrap_err().answer("nothing");
        assert_eq!(started.elapsed(), WAIT);
        assert_eq!((e.status, e.code), (StatusCode::SERVICE_UNAVAILABLE, "busy"));
        assert!(e.message.contains("as much of body_memory_bytes as one token may (1376256 bytes)"), "{}", e.message);
        assert_eq!(second.kib(), 180, "unchanged by the refusal");
        // A waiting share grows as soon as one is given back.
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.grow(&mut second, &SITE_A(), 100 << 10).await.map(|()| second.kib()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        assert_eq!(waiting.await.unwrap().unwrap(), 300);
        drop(other);
        assert_eq!(budget.available_kib(), 3072, "every share given back");
    }

    #[tokio::test(start_paused = true)]
    async fn small_bodies_draw_on_the_reserve_when_the_rest_is_full() {
        let budget = BodyBudget::new(4 << 20, 1 << 20); // 512 reserve, 3584 general, writer 1792
        let mut held = Vec::new();
        for writer in [SITE_A(), SITE_B()] {
            let mut memory = BodyMemory::default();
            budget.grow(&mut memory, &writer, 1 << 30).await.unwrap();
            assert_eq!(memory.kib(), 1792);
            held.push(memory);
        }
        assert_eq!(budget.available_kib(), 512, "the reserve alone is left");
        // A large body is refused (the general part is full); small ones are not, until the reserve is full.
        let e = budget.grow(&mut BodyMemory::default(), &Access::All, 100 << 10).await.unwrap_err().answer("nothing");
        assert!(e.message.contains("as body_memory_bytes (4194304 bytes) allows"), "{}", e.message);
        let mut small = Vec::new();
        for _ in 0..2 {
            let mut memory = BodyMemory::default();
            budget.grow(&mut memory, &SITE_A(), 64 << 10).await.unwrap();
            assert_eq!((memory.kib(), memory.reserve_kib()), (192, 192));
            small.push(memory);
        }
        let mut one = BodyMemory::default();
        budget.grow(&mut one, &Access::All, 300).await.unwrap();
        assert_eq!(one.reserve_kib(), 1);
        // Past the small share, a share grows only from the general part.
        let e = budget.grow(&mut one, &Access::All, 65 << 10).await.unwrap_err().answer("nothing");
        assert_eq!(
            e.message,
            "the server is holding as many request bodies as body_memory_bytes (4194304 bytes) \
                               allows; nothing. Send it again after Retry-After."
        );
        drop(held);
        budget.grow(&mut one, &Access::All, 65 << 10).await.unwrap();
        assert_eq!((one.kib(), one.reserve_kib()), (195, 1));
    }
}
