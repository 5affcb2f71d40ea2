//! How many pages this process renders at once (`render_concurrency`): a render reads a page from one database
//! snapshot, renders its XML and compresses it whole, holding a few MB while it runs (its 1 MiB blocks, their
//! deflate states and outputs, the gzip it collects). Deflate is all CPU, so renders beyond one per core only wait
//! for a core while holding that memory, and end no sooner than they would a few at a time (BENCHMARKS.md, "Figures
//! formerly in code comments"). The others wait their turn, first
//! come first served, within the render's deadline (`sitemaps.stream_timeout`), not the pool's short acquire timeout:
//! a page waiting its turn is work queued, not a database that does not answer.

use std::sync::Arc;

use tokio::sync::Semaphore;

/// The render slots of a process: [`RenderSlots::run`] runs a render once one is free.
#[derive(Clone, Debug)]
pub struct RenderSlots {
    slots: Arc<Semaphore>,
    size: usize,
}

impl RenderSlots {
    /// `render_concurrency` slots, or one per core when it is 0.
    pub fn new(render_concurrency: u32) -> Self {
        let size = match render_concurrency {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            n => n as usize,
        };
        Self { slots: Arc::new(Semaphore::new(size)), size }
    }

    /// How many renders may run at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// `render`, once a slot is free (waiting in arrival order), holding the slot until it ends.
    pub async fn run<F: Future>(&self, render: F) -> F::Output {
        // The semaphore is never closed, so the wait ends with a slot.
        let _slot = self.slots.acquire().await.expect("the render slots are never closed");
        render.await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn more_renders_than_slots_all_run_and_never_more_at_once() {
        let slots = RenderSlots::new(2);
        assert_eq!(slots.size(), 2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let renders = (0..10).map(|i| {
            let (slots, running, most) = (slots.clone(), running.clone(), most.clone());
            tokio::spawn(async move {
                slots
                    .run(async {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        i
                    })
                    .await
            })
        });
        let done: Vec<usize> = futures_util::future::try_join_all(renders).await.unwrap();
        assert_eq!(done, (0..10).collect::<Vec<_>>(), "every render ran to its end");
        assert_eq!(most.load(Ordering::SeqCst), 2, "two at once, never more");
    }

    #[test]
    fn zero_means_one_slot_per_core() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(RenderSlots::new(0).size(), cores);
        assert_eq!(RenderSlots::new(5).size(), 5);
    }
}
