//! The process's allocator: jemalloc, and how soon it gives freed pages back.

/// jemalloc, with its background threads, rather than glibc's malloc. glibc raises its mmap threshold after the
/// first large block is freed, so later large blocks (request bodies of up to 16 MiB, page renders) come from
/// arenas that it keeps, and a process that took large bodies stays that much larger for good (bench/soak.py shows
/// it). jemalloc's background threads return freed pages to the system within seconds, whichever
/// thread freed them (mimalloc, tried too, kept its idle threads' pages).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long jemalloc keeps a freed page before its background threads give it back to the system (its default is
/// 10 s). A page render frees a few MB (1 MiB blocks, 64 KiB chunks, deflate states) that the next render, on
/// other threads, does not always take back, so with 10 s concurrent renders of uncached pages peak higher
/// (`bench/memprobe.py`, BENCHMARKS.md "Round three"). 100 ms keeps the reuse within a burst of allocations
/// and costs no measurable time on a cold page.
const DIRTY_DECAY_MS: isize = 100;

/// Sets [`DIRTY_DECAY_MS`] for every arena, unless `MALLOC_CONF` is set: the operator's jemalloc settings win.
pub(crate) fn give_freed_pages_back_sooner() {
    use tikv_jemalloc_ctl::{Access, AsName, arenas};
    if std::env::var_os("MALLOC_CONF").is_some() {
        return;
    }
    // Arenas made from now on take the default; those that exist already (threads started so far) are set one by
    // one (an index not in use is refused, and skipped).
    let _ = b"arenas.dirty_decay_ms\0".name().write(DIRTY_DECAY_MS);
    let (Ok(n), Ok(mut arena)) = (arenas::narenas::read(), b"arena.0.dirty_decay_ms\0".name().mib::<[usize; 3]>())
    else {
        return;
    };
    for i in 0..n as usize {
        arena[1] = i;
        let _ = arena.write(DIRTY_DECAY_MS);
    }
}
