//! URL health (migration 0013): each checked URL's last finding and its place in the checker's queue, the claims
//! that share the work between replicas, the per-host pacing, and the exclusion of a URL from its page.
//!
//! Queue: one `url_checks` row per (site, loc). A write to a site that is checked queues the locs it changed in
//! its own transaction, due at once (the outbox's pattern, [`super::outbox`]); a walk of the site's records by id
//! ([`super::Store::health_seed`]) queues the ones stored before checking was on. A settled check is due again a
//! cycle later; a transient failure after its backoff.
//!
//! Claims: claiming sets a row's `due_us` to the end of a lease and names the claim; other replicas skip it
//! (Postgres: `FOR UPDATE SKIP LOCKED`), so one URL is never checked twice at once. A row written again while
//! claimed moves its `seq` on and is checked again at once after the settle.

use std::time::Duration;

use sitemapd_core::health::{Finding, Kind, Problems};

/// One URL claimed for a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckClaim {
    /// Names the claim in the row (random), checked by [`super::Store::health_settle`].
    pub claim: i64,
    pub site: i64,
    pub loc: String,
    /// Consecutive transient failures so far: what the next backoff grows from.
    pub attempts: u32,
    /// The last definite answer's validators, for a conditional request.
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// What the last check found, when there was one (a 304 keeps it).
    pub previous: Option<UrlCheck>,
}

/// A URL's stored health: its last check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UrlCheck {
    pub loc: String,
    /// When the last check ended (definite or transient); `None`: queued, never checked.
    pub checked_us: Option<i64>,
    /// The last definite answer's status.
    pub status: Option<u16>,
    /// The last definite answer's problems.
    pub problems: Problems,
    pub location: Option<String>,
    pub canonical: Option<String>,
    pub noindex_by: Option<String>,
    /// Since when the URL has had a definite problem without a healthy check between.
    pub problem_since_us: Option<i64>,
    /// The last attempt's transient failure (`Transient::name`, with its detail), when the last attempt had one.
    pub transient: Option<String>,
    pub attempts: u32,
    /// Left out of its page (policy `exclude`).
    pub excluded: bool,
    /// When it is next checked.
    pub due_us: i64,
}

/// What settling a claim records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    pub claim: i64,
    pub loc: String,
    /// A 304 to a conditional check: the previous finding stands (its robots.txt verdict as now found).
    pub finding: Finding,
    /// When the URL is checked again, from now: a cycle after a definite answer, the backoff after a transient one.
    pub next_in: Duration,
}

/// What a settle did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// The claim was still held and the finding was recorded (false: the lease ran out and another took it, or the
    /// URL was deleted: nothing recorded).
    pub recorded: bool,
    /// The URL was left out of its page (true) or put back (false) by this settle.
    pub flipped: Option<bool>,
}

/// Which problem rows a listing returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemFilter {
    /// Any definite problem.
    Any,
    Kind(Kind),
    /// The last attempt failed transiently.
    Transient,
    /// Left out of its page.
    Excluded,
}

/// A site's health at a glance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthSummary {
    /// URLs with a check row (queued or checked).
    pub tracked: u64,
    /// URLs checked at least once.
    pub checked: u64,
    /// URLs whose last definite check found no problem.
    pub healthy: u64,
    /// Per kind: (kind, URLs, the oldest `problem_since_us`), every kind listed (0 and `None` when none).
    pub kinds: Vec<(Kind, u64, Option<i64>)>,
    /// URLs whose last attempt failed transiently.
    pub transient: u64,
    pub excluded: u64,
    /// Due now and not claimed (capped at [`BACKLOG_CAP`]).
    pub backlog: u64,
    /// Whether the walk of the site's stored records has reached its end.
    pub seeded: bool,
    /// The newest check's end.
    pub last_checked_us: Option<i64>,
}

/// The most a backlog count reads: beyond it the count says "at least".
pub const BACKLOG_CAP: u64 = 1_000_000;
