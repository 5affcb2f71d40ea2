//! Batching: admitted entries are committed in batches bounded by count and bytes. [`Pipeline`] commits them one
//! at a time and in order, each in a task of its own, so that the next batch fills while the last commits; it
//! stops at the first failure (NDJSON). [`store_or_reject`] stores a batch, retried while the store is unavailable,
//! and moves an entry the store refuses on its own to the rejects and goes on (`sitemapd import`).

use std::future::Future;

use tokio_util::task::AbortOnDropHandle;

use super::retry::{self, Backoff, Next};
use sitemapd_core::domain::Entry;
use sitemapd_core::placement::UpsertCounts;
use sitemapd_store::{Store, StoreError, Upsert};

/// The target of this module's log lines: the one it had before the crate split (`sitemapd::import`), so that `RUST_LOG`
/// filters and log processing that name it keep working.
const LOG_TARGET: &str = "sitemapd::import";

/// Where batches are committed: each call one transaction.
pub trait Sink: Clone + Send + Sync + 'static {
    fn commit(&self, batch: &[Entry]) -> impl Future<Output = Result<UpsertCounts, StoreError>> + Send;
}

/// When a batch is full: at `entries` entries, or once its entries' bytes reach `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    pub entries: usize,
    pub bytes: usize,
}

/// A batch filling: its entries, what each carries along (`T`: where it was read, its share of a memory budget)
/// and their bytes.
#[derive(Debug)]
pub struct Batch<T> {
    limits: BatchLimits,
    entries: Vec<Entry>,
    tags: Vec<T>,
    bytes: usize,
}

impl<T> Batch<T> {
    pub fn new(limits: BatchLimits) -> Self {
        Self { limits, entries: Vec::new(), tags: Vec::new(), bytes: 0 }
    }

    /// With room for a full batch's entries from the start.
    pub fn with_capacity(limits: BatchLimits) -> Self {
        let (entries, tags) = (Vec::with_capacity(limits.entries), Vec::with_capacity(limits.entries));
        Self { limits, entries, tags, bytes: 0 }
    }

    pub fn push(&mut self, entry: Entry, tag: T, bytes: usize) {
        self.entries.push(entry);
        self.tags.push(tag);
        self.bytes += bytes;
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.limits.entries || self.bytes >= self.limits.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes of its entries.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn tags(&self) -> &[T] {
        &self.tags
    }

    /// Empties it, keeping its room.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.tags.clear();
        self.bytes = 0;
    }

    /// Its entries and tags, leaving it empty.
    pub fn take(&mut self) -> (Vec<Entry>, Vec<T>) {
        self.bytes = 0;
        (std::mem::take(&mut self.entries), std::mem::take(&mut self.tags))
    }
}

/// Why a pipeline stopped.
#[derive(Debug)]
pub enum Failed {
    /// A batch's commit task failed (panicked, or was cancelled).
    Task(tokio::task::JoinError),
    /// The store failed a batch: the batches before it are committed ([`Pipeline::totals`]), none from it on.
    Store(StoreError),
}

/// Batches committed one at a time and in order, each in a task of its own, so that the next batch fills while the
/// last commits. A batch counts as committed only once its task has said so. Dropped, the pipeline aborts the batch
/// in flight, whose transaction then rolls back unless it had already committed.
///
/// `H` is what the filling batch holds (a share of a memory budget): it goes with the batch to its commit and is
/// dropped when that ends.
pub struct Pipeline<S, H> {
    sink: S,
    batch: Batch<()>,
    hold: H,
    committing: Option<AbortOnDropHandle<Result<UpsertCounts, StoreError>>>,
    totals: UpsertCounts,
}

impl<S: Sink, H: Default + Send + 'static> Pipeline<S, H> {
    pub fn new(sink: S, limits: BatchLimits) -> Self {
        Self { sink, batch: Batch::new(limits), hold: H::default(), committing: None, totals: UpsertCounts::default() }
    }

    /// The bytes of the filling batch.
    pub fn bytes(&self) -> usize {
        self.batch.bytes()
    }

    /// What the filling batch holds.
    pub fn hold(&mut self) -> &mut H {
        &mut self.hold
    }

    /// What the batches committed so far stored.
    pub fn totals(&self) -> &UpsertCounts {
        &self.totals
    }

    /// Adds an entry of `bytes` to the filling batch; once full, the batch goes to a task that commits it after
    /// the batch before it has committed.
    pub async fn push(&mut self, entry: Entry, bytes: usize) -> Result<(), Failed> {
        self.batch.push(entry, (), bytes);
        if self.batch.is_full() {
            self.settle().await?;
            let (batch, _) = self.batch.take();
            let hold = std::mem::take(&mut self.hold);
            let sink = self.sink.clone();
            self.committing = Some(AbortOnDropHandle::new(tokio::spawn(async move {
                let written = sink.commit(&batch).await;
                drop((batch, hold));
                written
            })));
        }
        Ok(())
    }

    /// Waits for the batch being committed, if any, and counts it.
    async fn settle(&mut self) -> Result<(), Failed> {
        let Some(task) = self.committing.take() else {
            return Ok(());
        };
        let counts = task.await.map_err(Failed::Task)?.map_err(Failed::Store)?;
        self.totals += counts;
        Ok(())
    }

    /// Commits what is left, after the batch in flight.
    pub async fn finish(&mut self) -> Result<(), Failed> {
        self.settle().await?;
        if self.batch.is_empty() {
            return Ok(());
        }
        let counts = self.sink.commit(self.batch.entries()).await.map_err(Failed::Store)?;
        self.totals += counts;
        self.batch.clear();
        self.hold = H::default();
        Ok(())
    }
}

/// Stores `entries` through the import's write ([`Upsert::Import`]), retried while the store is unavailable
/// (`backoff`: `sitemapd import`'s five tries, waiting 1, 2, 4, 8 s between). An entry the store refuses on its own
/// (too large for a page, under no site: admission's rules, checked again) goes to `reject` with its index, and the
/// rest of its batch is stored one by one, each counted in `counts` as it commits, whatever happens to the next.
/// Errs on any other store error.
pub async fn store_or_reject(
    store: &dyn Store,
    entries: &[Entry],
    backoff: Backoff,
    reject: &mut impl FnMut(usize, StoreError),
    counts: &mut UpsertCounts,
) -> Result<(), StoreError> {
    let refused = |e: &StoreError| matches!(e, StoreError::TooLarge(..) | StoreError::NoSite(..));
    match upsert_retried(store, entries, backoff).await {
        Ok(written) => *counts += written,
        Err(e) if refused(&e) && entries.len() > 1 => {
            for (index, entry) in entries.iter().enumerate() {
                match upsert_retried(store, std::slice::from_ref(entry), backoff).await {
                    Ok(written) => *counts += written,
                    Err(e) if refused(&e) => {
                        reject(index, e);
                        counts.received += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Err(e) if refused(&e) => {
            reject(0, e);
            counts.received += 1;
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// One import write, tried again while the store is unavailable.
async fn upsert_retried(store: &dyn Store, entries: &[Entry], backoff: Backoff) -> Result<UpsertCounts, StoreError> {
    let written = retry::retry(
        backoff,
        || store.upsert_with(entries, Upsert::Import),
        |e| if matches!(e, StoreError::Unavailable(_)) { Next::Retry(None) } else { Next::Stop },
        |e, attempt, wait| {
            if let StoreError::Unavailable(e) = e {
                tracing::warn!(target: LOG_TARGET, error = %e, attempt, "the store is unavailable: the batch is tried again in {wait:?}");
            }
        },
    )
    .await;
    written.map(|w| w.counts).map_err(|gave_up| gave_up.error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sitemapd_core::domain::PublicUrl;

    fn entry(path: &str) -> Entry {
        let scope = PublicUrl::parse("https://www.example.com").unwrap();
        super::super::admit::validate_json(&format!(r#"{{"loc": "https://www.example.com/{path}"}}"#), &scope).unwrap()
    }

    #[test]
    fn a_batch_is_full_by_count_or_by_bytes() {
        let mut batch = Batch::new(BatchLimits { entries: 3, bytes: 100 });
        batch.push(entry("a"), 1, 10);
        batch.push(entry("b"), 2, 10);
        assert!(!batch.is_full());
        batch.push(entry("c"), 3, 10);
        assert!(batch.is_full(), "by count");
        let (entries, tags) = batch.take();
        assert_eq!((entries.len(), tags, batch.bytes()), (3, vec![1, 2, 3], 0));
        batch.push(entry("d"), 4, 100);
        assert!(batch.is_full(), "by bytes");
    }

    /// Counts what it is given; fails a batch holding `bad`.
    #[derive(Clone)]
    struct Counting;

    impl Sink for Counting {
        async fn commit(&self, batch: &[Entry]) -> Result<UpsertCounts, StoreError> {
            if batch.iter().any(|e| e.loc.as_str().ends_with("/bad")) {
                return Err(StoreError::NoSite("bad".into(), "none".into()));
            }
            Ok(UpsertCounts { received: batch.len() as u64, created: batch.len() as u64, ..Default::default() })
        }
    }

    #[tokio::test]
    async fn a_pipeline_commits_full_batches_then_the_rest_and_stops_at_a_failure() {
        let mut pipeline: Pipeline<_, ()> = Pipeline::new(Counting, BatchLimits { entries: 2, bytes: 1 << 20 });
        for path in ["a", "b", "c", "d", "e"] {
            pipeline.push(entry(path), 1).await.unwrap();
        }
        pipeline.finish().await.unwrap();
        assert_eq!(pipeline.totals().received, 5);
        let mut pipeline: Pipeline<_, ()> = Pipeline::new(Counting, BatchLimits { entries: 2, bytes: 1 << 20 });
        let mut failed = None;
        for path in ["a", "b", "bad", "c", "d", "e"] {
            if let Err(e) = pipeline.push(entry(path), 1).await {
                failed = Some(e);
                break;
            }
        }
        assert!(matches!(failed, Some(Failed::Store(_))), "found when the next batch is handed over");
        assert_eq!(pipeline.totals().received, 2, "the batches before the failed one");
    }
}
