//! Rendering changed pages ahead of crawlers: after a write commits, the pages it changed are rendered and
//! compressed into the page cache in the background, so that the first crawler to fetch one finds it ready.
//!
//! - What is queued: the pages a write through this process changed (the state's after-write step), and the
//!   pages a refresh of the page table finds changed, which is how a replica learns of another's writes. A task
//!   refreshes every site's page table every `state_ttl_ms` for that; with the change counter, a refresh that finds
//!   nothing changed costs one primary-key read.
//! - The queue is a set of pages, each due [`QUIET`] after its last change, or [`BUSY_QUIET`] when it changed less
//!   than that before: repeated changes to one page (a bulk load filling it batch after batch, even with batches
//!   more than [`QUIET`] apart) come to one render, once the page is quiet. It holds at most
//!   [`MAX_QUEUED`] pages; past that, a change is not queued (the page is then rendered on its first fetch).
//! - One page is rendered at a time, through the page cache's single render per page version (a crawler asking at
//!   the same moment waits for the same render), so it uses one page-stream slot and one render's memory at most.
//! - Nothing here delays a write's answer: queueing is a set insert.
//! - The state a change replaces is removed from the cache: no request of this process asks for it again, and its
//!   room goes to the new one. Under memory pressure the cache's admission (TinyLFU) prefers the pages crawlers
//!   have been reading to a rendered page nobody has asked for yet: that one is dropped first.
//!
//! The bytes are those a crawler's request would have rendered (the same function, [`super::render_gzip`]), so the
//! ETags are unchanged.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Serving;
use crate::page::PageState;

/// How long a page must go without a change before it is rendered.
pub const QUIET: Duration = Duration::from_millis(200);
/// How long a page that keeps changing must go without a change before it is rendered: a page changed again within
/// this time of its last change (a bulk load filling it batch after batch) is rendered once the load lets it be. On
/// a busy machine a load's batches come more than [`QUIET`] apart, and each render reads, renders and compresses the
/// whole page: rendering the page being filled after every batch took more CPU than the load itself
/// (BENCHMARKS.md). A page changed once, or changes a
/// second or more apart, still waits only [`QUIET`].
pub const BUSY_QUIET: Duration = Duration::from_millis(800);
/// The longest a page waits from its first change queued to its render, however often it changes: a page changed
/// at least every [`BUSY_QUIET`] (one a feed rewrites all the time, or a long bulk load's page) is still rendered
/// ahead, every `MAX_WAIT` at most, rather than only on a crawler's first fetch.
pub const MAX_WAIT: Duration = Duration::from_secs(5);
/// How often [`Recent`] forgets the changes older than [`BUSY_QUIET`] (as well as whenever it is full).
const PRUNE_EVERY: Duration = Duration::from_secs(10);
/// The shortest interval of the task's refreshes.
pub const MIN_REFRESH: Duration = Duration::from_millis(250);
/// The most pages queued at once.
pub const MAX_QUEUED: usize = 100_000;

/// The pages to render: (site, page) → when it is due; and the page states that changes replaced, to forget.
#[derive(Default)]
pub struct Queue {
    due: Mutex<Due>,
    recent: Mutex<Recent>,
    replaced: Mutex<Vec<(i64, PageState)>>,
    wake: Notify,
}

/// The queued pages by page (when due, and when first queued) and by due time: queueing, taking the next due page
/// and finding when it is due each cost O(log n), whatever the queue holds.
#[derive(Default)]
struct Due {
    by_page: HashMap<(i64, i64), (Instant, Instant)>,
    by_time: BTreeSet<(Instant, i64, i64)>,
}

/// Each page's last change seen (its version, and when), while that is less than [`BUSY_QUIET`] ago (older entries
/// are dropped every [`PRUNE_EVERY`] and whenever it fills): whether a change comes in a run of them, and whether a
/// change reported again (the writer's own, found again by a refresh of the page table) is one already queued.
#[derive(Default)]
struct Recent {
    seen: HashMap<(i64, i64), (i64, Instant)>,
    pruned: Option<Instant>,
}

impl Recent {
    /// Records the change of `pages` (id, version) of `site` seen at `now`: (those that changed within
    /// [`BUSY_QUIET`] before, the others); a version already seen is in neither.
    fn changed(
        &mut self,
        site: i64,
        pages: impl IntoIterator<Item = (i64, i64)>,
        now: Instant,
    ) -> (Vec<i64>, Vec<i64>) {
        if self.seen.len() >= MAX_QUEUED || self.pruned.is_none_or(|at| now.duration_since(at) >= PRUNE_EVERY) {
            self.seen.retain(|_, (_, at)| now.duration_since(*at) < BUSY_QUIET);
            self.pruned = Some(now);
        }
        let (mut busy, mut quiet) = (Vec::new(), Vec::new());
        for (page, version) in pages {
            let last = self.seen.get(&(site, page)).copied();
            // The same change reported again, or an older one (a refresh that read the table before the write).
            if last.is_some_and(|(seen, _)| seen >= version) {
                continue;
            }
            if last.is_some() || self.seen.len() < MAX_QUEUED {
                self.seen.insert((site, page), (version, now));
            }
            match last {
                Some((_, at)) if now.duration_since(at) < BUSY_QUIET => busy.push(page),
                _ => quiet.push(page),
            }
        }
        (busy, quiet)
    }
}

impl Queue {
    /// What a refresh of `site`'s page table found: `changed` pages to render, `replaced` states to forget.
    pub fn changed(&self, site: i64, changed: Vec<PageState>, replaced: Vec<PageState>) {
        {
            let mut forget = self.replaced.lock().expect("not poisoned");
            let room = MAX_QUEUED.saturating_sub(forget.len());
            forget.extend(replaced.into_iter().take(room).map(|p| (site, p)));
        }
        self.push(site, changed.into_iter().map(|p| (p.id, p.version)));
    }

    /// Queues the changed `pages` of `site` (id, new version), each due [`QUIET`] from now, or [`BUSY_QUIET`] when
    /// it changed less than that before (a page already queued is moved back to then, but not past [`MAX_WAIT`]
    /// after it was first queued). A version already queued is not queued again.
    pub fn push(&self, site: i64, pages: impl IntoIterator<Item = (i64, i64)>) {
        let now = Instant::now();
        let (busy, quiet) = self.recent.lock().expect("not poisoned").changed(site, pages, now);
        self.push_at(site, quiet, now + QUIET);
        if !busy.is_empty() {
            self.push_at(site, busy, now + BUSY_QUIET);
        }
    }

    fn push_at(&self, site: i64, pages: impl IntoIterator<Item = i64>, due: Instant) {
        let mut queued = self.due.lock().expect("not poisoned");
        let mut dropped = 0u64;
        for page in pages {
            let (due, first) = match queued.by_page.get(&(site, page)).copied() {
                Some((before, first)) => {
                    queued.by_time.remove(&(before, site, page));
                    (due.min(first + MAX_WAIT), first)
                }
                None if queued.by_page.len() >= MAX_QUEUED => {
                    dropped += 1;
                    continue;
                }
                None => (due, Instant::now()),
            };
            queued.by_page.insert((site, page), (due, first));
            queued.by_time.insert((due, site, page));
        }
        drop(queued);
        if dropped > 0 {
            crate::telemetry::prerender("dropped", dropped);
        }
        self.wake.notify_one();
    }

    /// At most `max` of the pages due at `now` (taken off the queue, earliest first).
    fn take_due(&self, now: Instant, max: usize) -> Vec<(i64, i64)> {
        let mut queued = self.due.lock().expect("not poisoned");
        let mut ready = Vec::new();
        while ready.len() < max {
            match queued.by_time.first().copied() {
                Some((due, site, page)) if due <= now => {
                    queued.by_time.pop_first();
                    queued.by_page.remove(&(site, page));
                    ready.push((site, page));
                }
                _ => break,
            }
        }
        ready
    }

    /// When the next queued page is due.
    fn next_due(&self) -> Option<Instant> {
        self.due.lock().expect("not poisoned").by_time.first().map(|(due, ..)| *due)
    }

    /// How many pages are queued.
    pub fn len(&self) -> usize {
        self.due.lock().expect("not poisoned").by_page.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The worker (`prerender`) that renders queued pages and refreshes every site's page table every `every`. It holds
/// the state weakly (`inner`, which `state` turns into the state served from) and is done when the state is dropped.
pub struct Prerender<I, S> {
    inner: Weak<I>,
    state: fn(Arc<I>) -> S,
    queue: Arc<Queue>,
    every: Duration,
}

impl<I, S> Prerender<I, S> {
    pub fn new(inner: Weak<I>, state: fn(Arc<I>) -> S, queue: Arc<Queue>, every: Duration) -> Self {
        // A refresh is a query per site: not more often than this, whatever `state_ttl_ms` says (0: never).
        let every = if every.is_zero() { every } else { every.max(MIN_REFRESH) };
        Self { inner, state, queue, every }
    }
}

#[async_trait::async_trait]
impl<I, S> crate::worker::Worker for Prerender<I, S>
where
    I: Send + Sync + 'static,
    S: Serving,
{
    fn name(&self) -> &'static str {
        "prerender"
    }

    async fn run(&self, stop: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
        let (queue, every) = (&self.queue, self.every);
        let mut next_refresh = Instant::now() + every;
        loop {
            {
                let Some(state) = self.inner.upgrade().map(self.state) else { return Ok(()) };
                let replaced = std::mem::take(&mut *queue.replaced.lock().expect("not poisoned"));
                for (site, old) in replaced {
                    state.page_cache().invalidate(site, &old).await;
                }
                // One page a turn: between two renders the refresh and the forgetting go on.
                let ready = queue.take_due(Instant::now(), 1);
                for (site, page) in ready {
                    render(&state, site, page).await;
                }
                if !every.is_zero() && Instant::now() >= next_refresh {
                    for site in state.sites().iter() {
                        // A replica learns of other replicas' writes here (Directories reports what changed).
                        if let Err(e) = state.directories(site.id).get(state.reads()).await {
                            tracing::debug!(error = %e, site = site.id, "cannot refresh the page table");
                        }
                    }
                    next_refresh = Instant::now() + every;
                }
            }
            let next_due = queue.next_due();
            let mut until = next_due.map_or(next_refresh, |due| due.min(next_refresh));
            if every.is_zero() {
                until = next_due.unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
            }
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = queue.wake.notified() => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }
}

/// Renders page `id` of `site` into the cache as the current page table has it, unless it is empty or cached.
async fn render(state: &impl Serving, site: i64, id: i64) {
    let directory = match state.directories(site).get(state.reads()).await {
        Ok(directory) => directory,
        Err(e) => {
            tracing::debug!(error = %e, site, page = id, "cannot pre-render a page: no page table");
            return crate::telemetry::prerender("failed", 1);
        }
    };
    let Some(page) = directory.page(id) else { return };
    if state.page_cache().get(site, page).await.is_some() {
        return crate::telemetry::prerender("cached", 1);
    }
    match state.page_cache().get_or_render(site, page, super::render_gzip(state.clone(), site, id)).await {
        Ok(_) => crate::telemetry::prerender("rendered", 1),
        Err(e) => {
            tracing::debug!(error = ?e, site, page = id, "cannot pre-render a page");
            crate::telemetry::prerender("failed", 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn repeated_changes_to_a_page_come_to_one_render_once_it_is_quiet() {
        let queue = Queue::default();
        let t0 = Instant::now();
        queue.push_at(1, [3, 4], t0 + QUIET);
        queue.push_at(1, [3], t0 + QUIET * 2);
        queue.push_at(2, [3], t0 + QUIET);
        assert_eq!(queue.len(), 3, "a page queued twice is one entry; another site's page is another");
        let ready = queue.take_due(t0, usize::MAX);
        let next = queue.next_due();
        assert!(ready.is_empty());
        assert_eq!(next, Some(t0 + QUIET));
        let ready = queue.take_due(t0 + QUIET, usize::MAX);
        let next = queue.next_due();
        assert_eq!(ready, vec![(1, 4), (2, 3)], "page 3 of site 1 changed again: it waits");
        assert_eq!(next, Some(t0 + QUIET * 2));
        let ready = queue.take_due(t0 + QUIET * 2, usize::MAX);
        let next = queue.next_due();
        assert_eq!(ready, vec![(1, 3)]);
        assert_eq!(next, None);
        assert!(queue.is_empty());
        queue.push_at(1, [1, 2, 3], t0);
        assert_eq!(queue.take_due(t0, 1), vec![(1, 1)], "one a turn");
        assert_eq!(queue.len(), 2);
        queue.push_at(1, [2], t0 + QUIET);
        assert_eq!(queue.take_due(t0, usize::MAX), vec![(1, 3)], "page 2 changed again: moved back");
        assert_eq!((queue.take_due(t0 + QUIET, usize::MAX), queue.next_due()), (vec![(1, 2)], None));
    }

    /// A bulk load changes the page it fills batch after batch: rendered once the page is left alone for
    /// [`BUSY_QUIET`], not between every two batches; a page changed once, or a second after its last change, is
    /// rendered [`QUIET`] after it; a change reported twice (the write, then a refresh) is one change.
    #[tokio::test(start_paused = true)]
    async fn a_page_that_keeps_changing_is_rendered_once_the_changes_stop() {
        let queue = Queue::default();
        queue.push(1, [(5, 1), (6, 1)]);
        assert_eq!(queue.next_due(), Some(Instant::now() + QUIET), "changed once: QUIET");
        tokio::time::advance(QUIET / 2).await;
        queue.push(1, [(6, 1)]);
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.take_due(Instant::now() + QUIET / 2, 9), vec![(1, 5), (1, 6)], "the same change again");
        tokio::time::advance(QUIET / 2).await;
        queue.push(1, [(6, 1)]);
        assert!(queue.is_empty(), "a change already rendered is not queued again");
        for version in 2..7 {
            // The next batches, each a little more than QUIET after the one before, change page 6 again.
            tokio::time::advance(QUIET + Duration::from_millis(100)).await;
            assert!(queue.take_due(Instant::now(), 9).is_empty(), "page 6 is not rendered between batches");
            queue.push(1, [(6, version)]);
            assert_eq!(queue.next_due(), Some(Instant::now() + BUSY_QUIET));
        }
        tokio::time::advance(BUSY_QUIET).await;
        assert_eq!(queue.take_due(Instant::now(), 9), vec![(1, 6)], "rendered once the batches stopped");
        tokio::time::advance(Duration::from_secs(1) - BUSY_QUIET).await;
        queue.push(1, [(6, 7)]);
        queue.push(2, [(6, 1)]);
        assert_eq!(queue.next_due(), Some(Instant::now() + QUIET), "a second after its last change: QUIET");
        assert_eq!(queue.take_due(Instant::now() + QUIET, 9), vec![(1, 6), (2, 6)]);
    }

    /// A page changed again and again, each time within [`BUSY_QUIET`] of the last, is still rendered ahead:
    /// [`MAX_WAIT`] after its first change queued, then again [`MAX_WAIT`] after the next.
    #[tokio::test(start_paused = true)]
    async fn a_page_that_never_stops_changing_is_rendered_every_max_wait() {
        let queue = Queue::default();
        let first = Instant::now();
        let step = BUSY_QUIET / 2;
        let mut renders = Vec::new();
        for version in 1..=40 {
            queue.push(1, [(9, version)]);
            tokio::time::advance(step).await;
            if !queue.take_due(Instant::now(), 9).is_empty() {
                renders.push(Instant::now().duration_since(first));
            }
        }
        assert!(renders.len() >= 2, "rendered while it keeps changing: {renders:?}");
        assert!(renders[0] <= MAX_WAIT + step, "first render {:?} after its first change", renders[0]);
        assert!(renders[1] - renders[0] <= MAX_WAIT + step, "{renders:?}");
    }

    /// The record of recent changes keeps only those less than [`BUSY_QUIET`] old once [`PRUNE_EVERY`] has
    /// passed, not only when it is full.
    #[tokio::test(start_paused = true)]
    async fn recent_changes_are_forgotten_when_old() {
        let queue = Queue::default();
        queue.push(1, (0..1_000).map(|p| (p, 1)));
        assert_eq!(queue.recent.lock().unwrap().seen.len(), 1_000);
        tokio::time::advance(PRUNE_EVERY).await;
        queue.push(2, [(1, 1)]);
        assert_eq!(queue.recent.lock().unwrap().seen.len(), 1, "only the change just seen is kept");
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_is_bounded() {
        let queue = Queue::default();
        queue.push(1, (0..MAX_QUEUED as i64 + 10).map(|p| (p, 1)));
        assert_eq!(queue.len(), MAX_QUEUED);
        queue.push(1, [(0, 2)]);
        assert_eq!(queue.len(), MAX_QUEUED, "a page already queued is moved, not added");
    }
}
