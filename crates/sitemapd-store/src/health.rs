//! URL health (migration 0013): each checked URL's last finding and its place in the checker's queue, the claims
//! that share the work between replicas, the per-host pacing, and the exclusion of a URL from its page.
//!
//! Queue: one `url_checks` row per (site, loc). A write to a site that is checked queues the locs it changed in
//! its own transaction, due at once (the outbox's pattern, [`super::outbox`]); a walk of the site's records by id
//! ([`super::HealthQueue::health_seed`]) queues the ones stored before checking was on. A settled check is due again a
//! cycle later; a transient failure after its backoff.
//!
//! Claims: claiming sets a row's `due_us` to the end of a lease and names the claim; other replicas skip it
//! (Postgres: `FOR UPDATE SKIP LOCKED`), so one URL is never checked twice at once. A row written again while
//! claimed moves its `seq` on and is checked again at once after the settle. A claim is held while its lease
//! lasts: a settle after it (`due_us` passed, or another claim took the row) records nothing. A delete drops its
//! locs' rows; a loc that left the site otherwise (its record moved to another site, or was deleted behind the
//! store's back) is still claimed, and its settle drops the row.
//!
//! Exclusion: `urls.excluded` leaves a record out of its page's stream and of the news sitemap (the view's
//! listing and export keep it), and `pages.excluded` counts a page's excluded records: a page whose records are
//! all excluded is not listed ([`PageState::listed`]). A flip is a change of that page only, under the write
//! lock: its version on, `modified_us` at least a millisecond later, compressed the current way, returned in
//! [`Written::changes`] without locs (no IndexNow). A Postgres settle takes the write lock only when the record
//! it read before beginning needs a flip; if another settle or a restore changed that meanwhile, no flip is made
//! and the next check makes it. A write recounts the pages it changed where one had excluded records
//! (`write::recount_excluded`).

use std::time::Duration;

use sqlx::{Encode, Executor, FromRow, IntoArguments, Pool, Type};

use super::write::Writes;
use super::{PageRow, Result, SiteUrl, Written};
use sitemapd_core::health::brake::{self, Event, Evidence, Shape};
use sitemapd_core::health::{Finding, Kind, Problems, Transient};
use sitemapd_core::page::{Gzip, PageState};
use sitemapd_core::placement::Changes;

/// One URL claimed for a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckClaim {
    /// Names the claim in the row (random), checked by [`super::HealthQueue::health_settle`].
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
    /// The site's robots.txt disallows its root for Googlebot (as well as this URL): the brake trips at once.
    pub disallows_all: bool,
}

/// What a settle did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// The claim was still held and the finding was recorded (false: the lease ran out and another took it, or the
    /// URL was deleted: nothing recorded).
    pub recorded: bool,
    /// The URL was left out of its page (true) or put back (false) by this settle.
    pub flipped: Option<bool>,
    /// The site's brake tripped or lifted with this settle.
    pub brake: Option<BrakeChange>,
}

/// A change of a site's brake ([`brake`]) a settle made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrakeChange {
    /// The site is paused: no URL is excluded; the burst's exclusions (`restored`) were put back.
    Tripped { evidence: Evidence, restored: u64 },
    /// The share of the paused shape fell: the site excludes again.
    Resumed { shape: Shape },
    /// The share of a confirmed burst's shape fell: the confirmation ended (the next burst pauses again).
    Ended { shape: Shape },
}

/// A site's brake as stored: `running` (or no row), `paused`, `confirmed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrakeState {
    pub mode: BrakeMode,
    /// The burst's evidence (paused, confirmed; the last one after a resume).
    pub evidence: Option<Evidence>,
    /// Since when it is in this mode.
    pub since_us: i64,
    /// Events up to then do not count (an operator's resume).
    pub after_us: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrakeMode {
    Running,
    Paused,
    Confirmed,
}

impl BrakeMode {
    pub fn name(self) -> &'static str {
        match self {
            BrakeMode::Running => "running",
            BrakeMode::Paused => "paused",
            BrakeMode::Confirmed => "confirmed",
        }
    }
    fn parse(name: &str) -> Self {
        match name {
            "paused" => BrakeMode::Paused,
            "confirmed" => BrakeMode::Confirmed,
            _ => BrakeMode::Running,
        }
    }
}

/// What an operator tells a site's brake ([`super::HealthQueue::health_brake_set`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrakeOrder {
    /// Lift a pause: the site excludes again, and the events so far no longer count.
    Resume,
    /// The paused burst is real: its shape excludes (its URLs are checked again at once), until its share falls.
    Confirm,
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
    /// Whether every stored record of the site is queued: none after the walk's cursor lacks a check row (the
    /// write path queues what it writes, the walk what was stored before).
    pub seeded: bool,
    /// The newest check's end.
    pub last_checked_us: Option<i64>,
    /// The site's brake, when it has a row (`None`: running, never tripped).
    pub brake: Option<BrakeState>,
}

/// The most a backlog count reads: beyond it the count says "at least".
pub const BACKLOG_CAP: u64 = 1_000_000;

// --- Statements ------------------------------------------------------------------------------------------------
//
// Every time is bound (`now`): the write clock ([`Writes::now`]: the database's in Postgres, the process's in
// SQLite), so that leases, due times and the page stamps of an exclusion agree between replicas.

/// A check's columns as [`CheckRow`] reads them, of `url_checks` (the table unnamed) and its record's exclusion.
macro_rules! check_columns {
    () => {
        "checked_us, CAST(status AS BIGINT) AS status, CAST(problems AS BIGINT) AS problems, location, canonical, \
         noindex_by, problem_since_us, transient, CAST(attempts AS BIGINT) AS attempts, due_us, etag, last_modified, \
         CAST(COALESCE((SELECT CASE WHEN u.excluded THEN 1 ELSE 0 END FROM urls u \
         WHERE u.loc = url_checks.loc AND u.site_id = url_checks.site_id), 0) AS BIGINT) AS excluded"
    };
}

/// `loc`'s check in a site.
const CHECK_SQL: &str = concat!("SELECT ", check_columns!(), " FROM url_checks WHERE site_id = $1 AND loc = $2");

/// The seed's cursor: the last record id queued by the walk.
const SEEDED_SQL: &str = "SELECT seeded_id FROM health_sites WHERE site_id = $1";
/// The next records of the walk, by id.
const WALK_SQL: &str = "SELECT id, loc FROM urls WHERE site_id = $1 AND id > $2 ORDER BY id LIMIT $3";
/// Moves the cursor on, never back (replicas may walk at once).
const ADVANCE_SQL: &str = "INSERT INTO health_sites (site_id, seeded_id) VALUES ($1, $2) ON CONFLICT (site_id) \
     DO UPDATE SET seeded_id = CASE WHEN excluded.seeded_id > health_sites.seeded_id THEN excluded.seeded_id \
     ELSE health_sites.seeded_id END";

/// The stored record of a loc in a site: (id, page, excluded 0/1, news date if any).
const RECORD_SQL: &str = "SELECT id, page_id, CAST(CASE WHEN excluded THEN 1 ELSE 0 END AS BIGINT), news_us \
     FROM urls WHERE loc = $1 AND site_id = $2";
/// A claim's row whose record is gone: dropped, if the claim still holds it.
const DROP_SQL: &str = "DELETE FROM url_checks WHERE site_id = $1 AND loc = $2 AND claim = $3 AND due_us > $4";
/// A definite finding, if the claim still holds the row (its lease has not run out): the last answer's fields,
/// since when it has had problems, no transient failure, due a cycle later (at once if written since the claim).
const SETTLE_DEFINITE_SQL: &str = "UPDATE url_checks SET checked_us = $4, status = $5, \
     problem_since_us = CASE WHEN $6 = 0 THEN NULL WHEN problems <> 0 AND problem_since_us IS NOT NULL \
     THEN problem_since_us ELSE $4 END, problems = $6, location = $7, canonical = $8, noindex_by = $9, \
     transient = NULL, attempts = 0, etag = $10, last_modified = $11, url_id = $12, claim = NULL, \
     due_us = CASE WHEN seq = claimed_seq THEN $4 + $13 ELSE 0 END, \
     event_us = CASE WHEN $6 = 0 THEN $4 WHEN problems <> 0 AND problem_since_us IS NOT NULL \
     THEN problem_since_us ELSE $4 END \
     WHERE site_id = $1 AND loc = $2 AND claim = $3 AND due_us > $4 RETURNING loc";
/// A transient failure: the last definite fields kept, the failure and one more attempt recorded.
const SETTLE_TRANSIENT_SQL: &str = "UPDATE url_checks SET checked_us = $4, transient = $5, \
     attempts = attempts + 1, url_id = $6, claim = NULL, due_us = CASE WHEN seq = claimed_seq THEN $4 + $7 ELSE 0 END \
     WHERE site_id = $1 AND loc = $2 AND claim = $3 AND due_us > $4 RETURNING loc";
/// Excludes (`$2` true) or restores a record.
const FLIP_URL_SQL: &str = "UPDATE urls SET excluded = $2 WHERE id = $1";
/// A page an exclusion or a restore changed: its count, and the stamps a change gives it (as placement's: a
/// version on, at least a millisecond later, compressed the current way).
const FLIP_PAGE_SQL: &str = concat!(
    "UPDATE pages SET excluded = excluded + $3, version = version + 1, modified_us = CASE WHEN $4 > modified_us + ",
    "1000 THEN $4 ELSE modified_us + 1000 END, gzip = $5 WHERE site_id = $1 AND id = $2 RETURNING ",
    super::page_columns!()
);
/// Every excluded record of a site back in: their pages (with how many each had), then the records.
const EXCLUDED_PAGES_SQL: &str = "SELECT page_id, count(*) FROM urls WHERE site_id = $1 AND excluded GROUP BY page_id \
     ORDER BY page_id";
const RESTORE_URLS_SQL: &str = "UPDATE urls SET excluded = false WHERE site_id = $1 AND excluded";
const EXCLUDED_NEWS_SQL: &str = "SELECT count(*) FROM urls WHERE site_id = $1 AND excluded AND news_us IS NOT NULL";
/// The recount of the excluded records of a write's pages, through `urls_excluded`.
const RECOUNT_SQL: &str = "SELECT page_id, count(*) FROM urls WHERE site_id = $1 AND excluded \
     AND page_id BETWEEN $2 AND $3 GROUP BY page_id";
const SET_EXCLUDED_SQL: &str = "UPDATE pages SET excluded = $3 WHERE site_id = $1 AND id = $2";

/// A site's brake row.
const BRAKE_SQL: &str =
    "SELECT state, kind, target, bad, counted, examples, since_us, after_us FROM health_brakes WHERE site_id = $1";
/// Sets a site's brake (`$2` state, the evidence, `$8` since, `$9` after).
const BRAKE_SET_SQL: &str = "INSERT INTO health_brakes (site_id, state, kind, target, bad, counted, examples, \
     since_us, after_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (site_id) DO UPDATE SET \
     state = excluded.state, kind = excluded.kind, target = excluded.target, bad = excluded.bad, \
     counted = excluded.counted, examples = excluded.examples, since_us = excluded.since_us, \
     after_us = excluded.after_us";
/// A site's newest events after `$2` (the brake's window, [`brake::WINDOW`]), through `url_checks_events`.
const EVENTS_SQL: &str = "SELECT loc, CAST(problems AS BIGINT) AS problems, location, canonical, event_us FROM url_checks \
     WHERE site_id = $1 AND event_us IS NOT NULL AND event_us > $2 ORDER BY event_us DESC LIMIT $3";
/// The excluded records of a site whose problem began at `$2` or later (a burst's), with their checks.
const BURST_SQL: &str = "SELECT u.id, u.page_id, CAST(CASE WHEN u.news_us IS NULL THEN 0 ELSE 1 END AS BIGINT) AS news, \
     c.loc, CAST(c.problems AS BIGINT) AS problems, c.location, c.canonical FROM urls u JOIN url_checks c \
     ON c.site_id = u.site_id AND c.loc = u.loc WHERE u.site_id = $1 AND u.excluded AND c.problem_since_us >= $2";
/// The rows of a site with a problem of bits `$2` due at once (a confirmed burst), unless a claim holds them.
const DUE_KIND_SQL: &str = "UPDATE url_checks SET due_us = 0 WHERE site_id = $1 AND (problems & $2) <> 0 \
     AND (claim IS NULL OR due_us <= $3)";

/// The problem listing: records whose check has a problem or a transient failure (the partial index), in record
/// id order after `$1`, matching the filter: a problem bit of `$2`, a transient failure (`$3` = 1), excluded (`$4`
/// = 1); of site `$5` (0: every site); at most `$6`.
const PROBLEMS_SQL: &str = "SELECT u.site_id, u.id, u.loc, u.page_id, u.lastmod, u.changefreq, u.priority, u.ext, \
     u.news, u.size, c.checked_us, CAST(c.status AS BIGINT) AS status, CAST(c.problems AS BIGINT) AS problems, \
     c.location, c.canonical, c.noindex_by, c.problem_since_us, c.transient, CAST(c.attempts AS BIGINT) AS attempts, \
     c.due_us, c.etag, c.last_modified, CAST(CASE WHEN u.excluded THEN 1 ELSE 0 END AS BIGINT) AS excluded \
     FROM url_checks c JOIN urls u ON u.id = c.url_id \
     WHERE (c.problems <> 0 OR c.transient IS NOT NULL) AND c.url_id > $1 AND ($5 = 0 OR c.site_id = $5) \
     AND (($2 <> 0 AND (c.problems & $2) <> 0) OR ($3 = 1 AND c.transient IS NOT NULL) OR ($4 = 1 AND u.excluded)) \
     ORDER BY c.url_id LIMIT $6";
/// A site's problem rows grouped: (problems, transient 0/1, rows, the oldest `problem_since_us`).
const SUMMARY_PROBLEMS_SQL: &str = "SELECT CAST(problems AS BIGINT), \
     CAST(CASE WHEN transient IS NULL THEN 0 ELSE 1 END AS BIGINT), count(*), min(problem_since_us) \
     FROM url_checks WHERE site_id = $1 AND (problems <> 0 OR transient IS NOT NULL) \
     GROUP BY problems, CASE WHEN transient IS NULL THEN 0 ELSE 1 END";
/// A site's rows: tracked, checked, healthy (a definite answer without problems), the newest check.
const SUMMARY_ROWS_SQL: &str = "SELECT count(*), count(checked_us), \
     CAST(COALESCE(sum(CASE WHEN status IS NOT NULL AND problems = 0 THEN 1 ELSE 0 END), 0) AS BIGINT), \
     max(checked_us) FROM url_checks WHERE site_id = $1";
const SUMMARY_EXCLUDED_SQL: &str = "SELECT count(*) FROM urls WHERE site_id = $1 AND excluded";
const SUMMARY_BACKLOG_SQL: &str =
    "SELECT count(*) FROM (SELECT 1 FROM url_checks WHERE site_id = $1 AND due_us <= $2 LIMIT $3) AS b";
/// Whether a record after the walk's cursor (`$2`) has no check row: stored without being queued (while the site
/// was not checked, or by a version before URL health), so the walk has yet to queue it. Records the write path
/// queued after the walk reached its end have their row, and do not count. O(records stored since the walk's last
/// step: at most the checker's rewalk interval of writes, a minute by default), through the primary keys; it stops
/// at the first unqueued one.
const SUMMARY_UNQUEUED_SQL: &str = "SELECT count(*) FROM (SELECT 1 FROM urls u WHERE u.site_id = $1 AND u.id > $2 \
     AND NOT EXISTS (SELECT 1 FROM url_checks c WHERE c.site_id = u.site_id AND c.loc = u.loc) LIMIT 1) AS q";

// --- Postgres --------------------------------------------------------------------------------------------------

/// Queues `$2` (sorted) of site `$1`: a new loc due at once; a queued one's `seq` moves on, and it is due at once
/// unless a claim's lease holds it (then the settle makes it due, seeing `seq` moved).
pub(crate) const PG_ENQUEUE_SQL: &str = "INSERT INTO url_checks (site_id, loc) \
     SELECT $1, loc FROM UNNEST($2::text[]) AS u (loc) ON CONFLICT (site_id, loc) DO UPDATE \
     SET seq = url_checks.seq + 1, due_us = CASE WHEN url_checks.claim IS NOT NULL AND url_checks.due_us > $3 \
     THEN url_checks.due_us ELSE 0 END";
/// The walk's records (locs and ids), due at `$4`; rows already queued stay as they are. Inserted in loc order,
/// as writes queue theirs.
pub(crate) const PG_SEED_SQL: &str = "INSERT INTO url_checks (site_id, loc, url_id, due_us) \
     SELECT $1, loc, id, $4 FROM UNNEST($2::text[], $3::bigint[]) AS w (loc, id) ORDER BY loc COLLATE \"C\" \
     ON CONFLICT (site_id, loc) DO NOTHING";
/// Claims up to `$2` due rows of site `$1` (skipping rows another claim's statement has locked) as claim `$3`
/// until `$5`, noting each one's record id. The rows are picked once, in a materialized CTE: as an `IN (…)`
/// subquery the planner may run it again for each row updated, and each run then skips the rows just claimed
/// and picks more, past the limit (12 claimed of a limit of 10, seen in tests/it/health.rs).
pub(crate) const PG_CLAIM_SQL: &str = concat!(
    "WITH picked AS MATERIALIZED (SELECT loc FROM url_checks WHERE site_id = $1 AND due_us <= $4 ",
    "ORDER BY due_us LIMIT $2 FOR UPDATE SKIP LOCKED) ",
    "UPDATE url_checks SET claim = $3, claimed_seq = seq, due_us = $5, ",
    "url_id = COALESCE((SELECT id FROM urls WHERE urls.loc = url_checks.loc AND urls.site_id = url_checks.site_id), url_id) ",
    "WHERE site_id = $1 AND loc IN (SELECT loc FROM picked) RETURNING loc, ",
    check_columns!()
);
/// The next slot of host `$1`: at `next_us`, or after the hold `$3`, or now, whichever is latest; the one after
/// it a gap `$2` later. The database's clock; the row's lock serializes replicas.
pub(crate) const PG_HOST_SLOT_SQL: &str = concat!(
    "WITH t AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now) ",
    "INSERT INTO health_hosts AS h (host, next_us) SELECT $1, t.now + $3 + $2 FROM t ",
    "ON CONFLICT (host) DO UPDATE SET next_us = GREATEST(h.next_us, (SELECT now FROM t) + $3) + $2 ",
    "RETURNING h.next_us - $2 - (SELECT now FROM t)"
);

// --- SQLite ----------------------------------------------------------------------------------------------------

/// The locs `$2` (sorted) of site `$1` whose last check found a problem or failed, re-sent by the app unchanged:
/// due at once, or after the settle when a claim holds them (their `seq` moves on), as a changed loc.
pub(crate) const PG_RECHECK_SQL: &str = "UPDATE url_checks SET seq = seq + 1, \
     due_us = CASE WHEN claim IS NOT NULL AND due_us > $3 THEN due_us ELSE 0 END \
     WHERE site_id = $1 AND loc = ANY($2) AND (problems <> 0 OR transient IS NOT NULL)";
/// Whether site `$1` has a check row with a problem or a failure (through `url_checks_problems`).
pub(crate) const ANY_PROBLEM_SQL: &str = "SELECT count(*) FROM (SELECT 1 FROM url_checks WHERE site_id = $1 \
     AND (problems <> 0 OR transient IS NOT NULL) LIMIT 1) AS p";

/// As [`PG_ENQUEUE_SQL`], the locs as one JSON array.
pub(crate) const SQLITE_ENQUEUE_SQL: &str = "INSERT INTO url_checks (site_id, loc) \
     SELECT ?1, value FROM json_each(?2) WHERE true ON CONFLICT (site_id, loc) DO UPDATE \
     SET seq = seq + 1, due_us = CASE WHEN claim IS NOT NULL AND due_us > ?3 THEN due_us ELSE 0 END";
/// As [`PG_RECHECK_SQL`], the locs as one JSON array.
pub(crate) const SQLITE_RECHECK_SQL: &str = "UPDATE url_checks SET seq = seq + 1, \
     due_us = CASE WHEN claim IS NOT NULL AND due_us > ?3 THEN due_us ELSE 0 END \
     WHERE site_id = ?1 AND loc IN (SELECT value FROM json_each(?2)) AND (problems <> 0 OR transient IS NOT NULL)";
/// As [`PG_SEED_SQL`], the walk as one JSON array of `[loc, id]`.
pub(crate) const SQLITE_SEED_SQL: &str = "INSERT INTO url_checks (site_id, loc, url_id, due_us) \
     SELECT ?1, json_extract(value, '$[0]'), json_extract(value, '$[1]'), ?3 FROM json_each(?2) WHERE true \
     ON CONFLICT (site_id, loc) DO NOTHING";
/// As [`PG_CLAIM_SQL`]; the writer lock (and SQLite's) keeps claims apart.
pub(crate) const SQLITE_CLAIM_SQL: &str = concat!(
    "UPDATE url_checks SET claim = $3, claimed_seq = seq, due_us = $5, ",
    "url_id = COALESCE((SELECT id FROM urls WHERE urls.loc = url_checks.loc AND urls.site_id = url_checks.site_id), url_id) ",
    "WHERE site_id = $1 AND loc IN (SELECT loc FROM url_checks WHERE site_id = $1 AND due_us <= $4 ",
    "ORDER BY due_us LIMIT $2) RETURNING loc, ",
    check_columns!()
);
/// As [`PG_HOST_SLOT_SQL`], now bound as `$4`.
pub(crate) const SQLITE_HOST_SLOT_SQL: &str = "INSERT INTO health_hosts (host, next_us) VALUES ($1, $4 + $3 + $2) \
     ON CONFLICT (host) DO UPDATE SET next_us = max(next_us, $4 + $3) + $2 RETURNING next_us - $2 - $4";

// --- Rows ------------------------------------------------------------------------------------------------------

/// A check as read ([`check_columns`]).
#[derive(sqlx::FromRow)]
pub(crate) struct CheckRow {
    checked_us: Option<i64>,
    status: Option<i64>,
    problems: i64,
    location: Option<String>,
    canonical: Option<String>,
    noindex_by: Option<String>,
    problem_since_us: Option<i64>,
    transient: Option<String>,
    attempts: i64,
    due_us: i64,
    etag: Option<String>,
    last_modified: Option<String>,
    excluded: i64,
}

impl CheckRow {
    fn into_check(self, loc: String) -> UrlCheck {
        UrlCheck {
            loc,
            checked_us: self.checked_us,
            status: self.status.and_then(|s| u16::try_from(s).ok()),
            problems: Problems::from_bits(u32::try_from(self.problems).unwrap_or(0)),
            location: self.location,
            canonical: self.canonical,
            noindex_by: self.noindex_by,
            problem_since_us: self.problem_since_us,
            transient: self.transient,
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            excluded: self.excluded != 0,
            due_us: self.due_us,
        }
    }
}

/// A claimed row.
#[derive(sqlx::FromRow)]
pub(crate) struct ClaimRow {
    loc: String,
    #[sqlx(flatten)]
    check: CheckRow,
}

/// A problem row: the record and its check.
#[derive(sqlx::FromRow)]
pub(crate) struct ProblemRow {
    #[sqlx(flatten)]
    url: super::UrlRow,
    #[sqlx(flatten)]
    check: CheckRow,
}

/// A site's brake row.
#[derive(sqlx::FromRow)]
pub(crate) struct BrakeRow {
    state: String,
    kind: Option<String>,
    target: Option<String>,
    bad: i64,
    counted: i64,
    examples: Option<String>,
    since_us: i64,
    after_us: i64,
}

impl BrakeRow {
    fn into_state(self) -> BrakeState {
        let evidence = self.kind.as_deref().and_then(Kind::parse).map(|kind| Evidence {
            shape: Shape { kind, target: self.target },
            bad: usize::try_from(self.bad).unwrap_or(0),
            window: usize::try_from(self.counted).unwrap_or(0),
            examples: self.examples.map(|e| e.lines().map(str::to_owned).collect()).unwrap_or_default(),
        });
        BrakeState { mode: BrakeMode::parse(&self.state), evidence, since_us: self.since_us, after_us: self.after_us }
    }
}

/// One of a site's events.
#[derive(sqlx::FromRow)]
pub(crate) struct EventRow {
    loc: String,
    problems: i64,
    location: Option<String>,
    canonical: Option<String>,
    event_us: i64,
}

/// An excluded record of a burst, with its check.
#[derive(sqlx::FromRow)]
pub(crate) struct BurstRow {
    id: i64,
    page_id: i64,
    news: i64,
    loc: String,
    problems: i64,
    location: Option<String>,
    canonical: Option<String>,
}

fn claim_of(site: i64, claim: i64, row: ClaimRow) -> CheckClaim {
    let (etag, last_modified) = (row.check.etag.clone(), row.check.last_modified.clone());
    let check = row.check.into_check(row.loc.clone());
    let previous = check.checked_us.is_some().then(|| check.clone());
    CheckClaim { claim, site, loc: row.loc, attempts: check.attempts, etag, last_modified, previous }
}

/// A transient failure as stored: its name, and its detail when it has one (`server_error 503`, `connect: …`).
pub(crate) fn transient_text(t: &Transient) -> String {
    match t {
        Transient::Server(status) => format!("{} {status}", t.name()),
        Transient::Connect(detail) => format!("{}: {detail}", t.name()),
        Transient::Timeout | Transient::RateLimited => t.name().to_owned(),
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

// --- What both backends run --------------------------------------------------------------------------------------

/// The statements of URL health both backends run as they are, over sqlx's database; the ones that differ
/// (arrays, row locks, the clock of the host slot) are [`Writes`]'s.
pub(crate) trait Checks: Writes {
    fn check_of(
        conn: &mut Self::Connection,
        site: i64,
        loc: &str,
    ) -> impl Future<Output = Result<Option<UrlCheck>>> + Send;
    fn seed(conn: &mut Self::Connection, site: i64, limit: u32) -> impl Future<Output = Result<u64>> + Send;
    fn claim(
        conn: &mut Self::Connection,
        site: i64,
        limit: u32,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<CheckClaim>>> + Send;
    /// The stored record of `loc` in `site`: (id, page, excluded, has news).
    fn record(
        conn: &mut Self::Connection,
        site: i64,
        loc: &str,
    ) -> impl Future<Output = Result<Option<(i64, i64, bool, bool)>>> + Send;
    /// [`super::HealthQueue::health_settle`] in `conn`'s transaction; `may_flip`: it holds the write lock.
    fn settle(
        conn: &mut Self::Connection,
        site: i64,
        result: &CheckResult,
        exclude: bool,
        may_flip: bool,
    ) -> impl Future<Output = Result<Written<Settled>>> + Send;
    /// [`super::HealthQueue::health_restore`] in `conn`'s transaction, which holds the write lock.
    fn restore(conn: &mut Self::Connection, site: i64) -> impl Future<Output = Result<Written<u64>>> + Send;
    /// A site's brake as stored.
    fn brake_of(conn: &mut Self::Connection, site: i64) -> impl Future<Output = Result<Option<BrakeState>>> + Send;
    /// A site's newest events after `after` ([`brake::WINDOW`] at most), newest first, each with its time.
    fn events(
        conn: &mut Self::Connection,
        site: i64,
        after: i64,
    ) -> impl Future<Output = Result<Vec<(Event, i64)>>> + Send;
    fn set_brake(
        conn: &mut Self::Connection,
        site: i64,
        mode: BrakeMode,
        evidence: Option<&Evidence>,
        now: i64,
        after: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Puts back the excluded records of `site` whose problem began at `since` or later and has `shape` (a
    /// burst's), a change of each page that held one; the number put back. Under the write lock.
    fn restore_burst(
        conn: &mut Self::Connection,
        site: i64,
        shape: &Shape,
        since: i64,
        now: i64,
    ) -> impl Future<Output = Result<Written<u64>>> + Send;
    /// [`super::HealthQueue::health_brake_order`] in `conn`'s transaction.
    fn order_brake(
        conn: &mut Self::Connection,
        site: i64,
        order: BrakeOrder,
    ) -> impl Future<Output = Result<Option<BrakeState>>> + Send;
    /// Sets the `excluded` count of `pages` (changed by a write, in `site`) from the records, and returns them so.
    fn recount(
        conn: &mut Self::Connection,
        site: i64,
        pages: &mut [PageState],
    ) -> impl Future<Output = Result<()>> + Send;
    fn problems(
        pool: &Pool<Self>,
        site: Option<i64>,
        filter: ProblemFilter,
        after: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<(SiteUrl, UrlCheck)>>> + Send;
    fn summary(pool: &Pool<Self>, site: i64) -> impl Future<Output = Result<HealthSummary>> + Send;
}

impl<DB> Checks for DB
where
    DB: Writes,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    CheckRow: for<'r> FromRow<'r, DB::Row>,
    ClaimRow: for<'r> FromRow<'r, DB::Row>,
    ProblemRow: for<'r> FromRow<'r, DB::Row>,
    BrakeRow: for<'r> FromRow<'r, DB::Row>,
    EventRow: for<'r> FromRow<'r, DB::Row>,
    BurstRow: for<'r> FromRow<'r, DB::Row>,
    PageRow: for<'r> FromRow<'r, DB::Row>,
    (i64,): for<'r> FromRow<'r, DB::Row>,
    (Option<i64>,): for<'r> FromRow<'r, DB::Row>,
    (i64, i64): for<'r> FromRow<'r, DB::Row>,
    (i64, String): for<'r> FromRow<'r, DB::Row>,
    (String,): for<'r> FromRow<'r, DB::Row>,
    (i64, i64, i64, Option<i64>): for<'r> FromRow<'r, DB::Row>,
    (i64, i64, i64, Option<i64>, Option<i64>): for<'r> FromRow<'r, DB::Row>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> i32: Encode<'q, DB> + Type<DB>,
    for<'q> bool: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
{
    async fn check_of(conn: &mut Self::Connection, site: i64, loc: &str) -> Result<Option<UrlCheck>> {
        let row: Option<CheckRow> = sqlx::query_as(CHECK_SQL).bind(site).bind(loc).fetch_optional(conn).await?;
        Ok(row.map(|r| r.into_check(loc.to_owned())))
    }

    async fn seed(conn: &mut Self::Connection, site: i64, limit: u32) -> Result<u64> {
        let now = Self::now(conn).await?;
        let cursor: Option<(i64,)> = sqlx::query_as(SEEDED_SQL).bind(site).fetch_optional(&mut *conn).await?;
        let cursor = cursor.map_or(0, |(id,)| id);
        let walked: Vec<(i64, String)> =
            sqlx::query_as(WALK_SQL).bind(site).bind(cursor).bind(i64::from(limit)).fetch_all(&mut *conn).await?;
        let Some(last) = walked.last().map(|(id, _)| *id) else { return Ok(0) };
        Self::seed_checks(conn, site, &walked, now).await?;
        sqlx::query(ADVANCE_SQL).bind(site).bind(last).execute(&mut *conn).await?;
        Ok(walked.len() as u64)
    }

    async fn claim(conn: &mut Self::Connection, site: i64, limit: u32, lease: Duration) -> Result<Vec<CheckClaim>> {
        let now = Self::now(conn).await?;
        let id = super::outbox::claim_id();
        let rows: Vec<ClaimRow> = sqlx::query_as(Self::CLAIM_CHECKS_SQL)
            .bind(site)
            .bind(i64::from(limit))
            .bind(id)
            .bind(now)
            .bind(now.saturating_add(micros(lease)))
            .fetch_all(conn)
            .await?;
        let mut claims: Vec<CheckClaim> = rows.into_iter().map(|row| claim_of(site, id, row)).collect();
        claims.sort_by(|a, b| a.loc.cmp(&b.loc));
        Ok(claims)
    }

    async fn record(conn: &mut Self::Connection, site: i64, loc: &str) -> Result<Option<(i64, i64, bool, bool)>> {
        let row: Option<(i64, i64, i64, Option<i64>)> =
            sqlx::query_as(RECORD_SQL).bind(loc).bind(site).fetch_optional(conn).await?;
        Ok(row.map(|(id, page, excluded, news)| (id, page, excluded != 0, news.is_some())))
    }

    async fn settle(
        conn: &mut Self::Connection,
        site: i64,
        result: &CheckResult,
        exclude: bool,
        may_flip: bool,
    ) -> Result<Written<Settled>> {
        let now = Self::now(conn).await?;
        let (loc, claim) = (result.loc.as_str(), result.claim);
        let Some((id, page_id, excluded, news)) = Self::record(conn, site, loc).await? else {
            sqlx::query(DROP_SQL).bind(site).bind(loc).bind(claim).bind(now).execute(&mut *conn).await?;
            return Ok(Written::default());
        };
        let f = &result.finding;
        let next = now.saturating_add(micros(result.next_in));
        let updated: Option<(String,)> = match &f.transient {
            None => {
                sqlx::query_as(SETTLE_DEFINITE_SQL)
                    .bind(site)
                    .bind(loc)
                    .bind(claim)
                    .bind(now)
                    .bind(f.status.map(i64::from))
                    .bind(i64::from(f.problems.bits()))
                    .bind(f.location.as_deref())
                    .bind(f.canonical.as_deref())
                    .bind(f.noindex_by.as_deref())
                    .bind(f.etag.as_deref())
                    .bind(f.last_modified.as_deref())
                    .bind(id)
                    .bind(next - now)
                    .fetch_optional(&mut *conn)
                    .await?
            }
            Some(t) => {
                sqlx::query_as(SETTLE_TRANSIENT_SQL)
                    .bind(site)
                    .bind(loc)
                    .bind(claim)
                    .bind(now)
                    .bind(transient_text(t))
                    .bind(id)
                    .bind(next - now)
                    .fetch_optional(&mut *conn)
                    .await?
            }
        };
        let mut written = Written {
            counts: Settled { recorded: updated.is_some(), flipped: None, brake: None },
            ..Default::default()
        };
        let want = !f.problems.is_empty();
        if updated.is_none() || !exclude || !f.is_definite() || !may_flip {
            return Ok(written);
        }
        // The brake: read when this settle would exclude, or when the site's brake is not plain running.
        let stored = Self::brake_of(conn, site).await?;
        let mode = stored.as_ref().map_or(BrakeMode::Running, |b| b.mode);
        let mut paused = mode == BrakeMode::Paused;
        if (want && !excluded) || mode != BrakeMode::Running {
            let after = stored.as_ref().map_or(0, |b| b.after_us);
            let timed = Self::events(conn, site, after).await?;
            let events: Vec<Event> = timed.iter().map(|(e, _)| e.clone()).collect();
            let shape = stored.as_ref().and_then(|b| b.evidence.as_ref()).map(|e| e.shape.clone());
            if let Some(shape) = shape.filter(|s| mode != BrakeMode::Running && !brake::holds(&events, s)) {
                // The burst's share fell: the pause lifts (or the confirmation ends).
                let evidence = stored.as_ref().and_then(|b| b.evidence.as_ref());
                Self::set_brake(conn, site, BrakeMode::Running, evidence, now, after).await?;
                written.counts.brake =
                    Some(if paused { BrakeChange::Resumed { shape } } else { BrakeChange::Ended { shape } });
                paused = false;
            } else if want && !excluded && !paused {
                let confirmed = stored
                    .as_ref()
                    .filter(|b| b.mode == BrakeMode::Confirmed)
                    .and_then(|b| b.evidence.as_ref())
                    .map(|e| &e.shape);
                let trip = if result.disallows_all { Some(Evidence::robots(loc)) } else { brake::tripped(&events) };
                if let Some(evidence) = trip.filter(|e| Some(&e.shape) != confirmed) {
                    let since = timed.iter().map(|(_, at)| *at).min().unwrap_or(now);
                    let restored = Self::restore_burst(conn, site, &evidence.shape, since, now).await?;
                    Self::set_brake(conn, site, BrakeMode::Paused, Some(&evidence), now, after).await?;
                    written.changes = restored.changes;
                    written.counts.brake = Some(BrakeChange::Tripped { evidence, restored: restored.counts });
                    paused = true;
                }
            }
        }
        if want == excluded || (want && paused) {
            return Ok(written);
        }
        sqlx::query(FLIP_URL_SQL).bind(id).bind(want).execute(&mut *conn).await?;
        let page: PageRow = sqlx::query_as(FLIP_PAGE_SQL)
            .bind(site)
            .bind(page_id)
            .bind(if want { 1_i64 } else { -1 })
            .bind(now)
            .bind(Gzip::CURRENT.code())
            .fetch_one(&mut *conn)
            .await?;
        if news {
            Self::touch_news(conn, site, now).await?;
        }
        written.counts.flipped = Some(want);
        written.changes.insert(site, Changes { pages: vec![page.into()], locs: Vec::new() });
        Ok(written)
    }

    async fn brake_of(conn: &mut Self::Connection, site: i64) -> Result<Option<BrakeState>> {
        let row: Option<BrakeRow> = sqlx::query_as(BRAKE_SQL).bind(site).fetch_optional(conn).await?;
        Ok(row.map(BrakeRow::into_state))
    }

    async fn events(conn: &mut Self::Connection, site: i64, after: i64) -> Result<Vec<(Event, i64)>> {
        let rows: Vec<EventRow> =
            sqlx::query_as(EVENTS_SQL).bind(site).bind(after).bind(brake::WINDOW as i64).fetch_all(conn).await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let problems = Problems::from_bits(u32::try_from(r.problems).unwrap_or(0));
                (Event { loc: r.loc, problems, location: r.location, canonical: r.canonical }, r.event_us)
            })
            .collect())
    }

    async fn set_brake(
        conn: &mut Self::Connection,
        site: i64,
        mode: BrakeMode,
        evidence: Option<&Evidence>,
        now: i64,
        after: i64,
    ) -> Result<()> {
        let examples = evidence.map(|e| e.examples.join("\n"));
        sqlx::query(BRAKE_SET_SQL)
            .bind(site)
            .bind(mode.name())
            .bind(evidence.map(|e| e.shape.kind.name()))
            .bind(evidence.and_then(|e| e.shape.target.as_deref()))
            .bind(evidence.map_or(0, |e| e.bad as i64))
            .bind(evidence.map_or(0, |e| e.window as i64))
            .bind(examples.as_deref())
            .bind(now)
            .bind(after)
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn restore_burst(
        conn: &mut Self::Connection,
        site: i64,
        shape: &Shape,
        since: i64,
        now: i64,
    ) -> Result<Written<u64>> {
        let rows: Vec<BurstRow> = sqlx::query_as(BURST_SQL).bind(site).bind(since).fetch_all(&mut *conn).await?;
        let mut pages: std::collections::BTreeMap<i64, i64> = std::collections::BTreeMap::new();
        let mut news = false;
        for r in rows {
            let problems = Problems::from_bits(u32::try_from(r.problems).unwrap_or(0));
            let event = Event { loc: r.loc, problems, location: r.location, canonical: r.canonical };
            if !shape.matches(&event) {
                continue;
            }
            sqlx::query(FLIP_URL_SQL).bind(r.id).bind(false).execute(&mut *conn).await?;
            *pages.entry(r.page_id).or_default() += 1;
            news |= r.news != 0;
        }
        let mut written = Written::default();
        if pages.is_empty() {
            return Ok(written);
        }
        let mut changed = Vec::with_capacity(pages.len());
        for (page_id, n) in pages {
            let page: PageRow = sqlx::query_as(FLIP_PAGE_SQL)
                .bind(site)
                .bind(page_id)
                .bind(-n)
                .bind(now)
                .bind(Gzip::CURRENT.code())
                .fetch_one(&mut *conn)
                .await?;
            written.counts += n as u64;
            changed.push(PageState::from(page));
        }
        if news {
            Self::touch_news(conn, site, now).await?;
        }
        written.changes.insert(site, Changes { pages: changed, locs: Vec::new() });
        Ok(written)
    }

    async fn order_brake(conn: &mut Self::Connection, site: i64, order: BrakeOrder) -> Result<Option<BrakeState>> {
        let now = Self::now(conn).await?;
        let Some(stored) = Self::brake_of(conn, site).await? else { return Ok(None) };
        if stored.mode != BrakeMode::Paused {
            return Ok(Some(stored));
        }
        let evidence = stored.evidence.as_ref();
        match order {
            BrakeOrder::Resume => Self::set_brake(conn, site, BrakeMode::Running, evidence, now, now).await?,
            BrakeOrder::Confirm => {
                Self::set_brake(conn, site, BrakeMode::Confirmed, evidence, now, stored.after_us).await?;
                if let Some(e) = evidence {
                    sqlx::query(DUE_KIND_SQL)
                        .bind(site)
                        .bind(i64::from(e.shape.kind.bit()))
                        .bind(now)
                        .execute(&mut *conn)
                        .await?;
                }
            }
        }
        Self::brake_of(conn, site).await
    }

    async fn restore(conn: &mut Self::Connection, site: i64) -> Result<Written<u64>> {
        let now = Self::now(conn).await?;
        let pages: Vec<(i64, i64)> = sqlx::query_as(EXCLUDED_PAGES_SQL).bind(site).fetch_all(&mut *conn).await?;
        let mut written = Written::default();
        if pages.is_empty() {
            return Ok(written);
        }
        let (news,): (i64,) = sqlx::query_as(EXCLUDED_NEWS_SQL).bind(site).fetch_one(&mut *conn).await?;
        sqlx::query(RESTORE_URLS_SQL).bind(site).execute(&mut *conn).await?;
        let mut changed = Vec::with_capacity(pages.len());
        for (page_id, n) in pages {
            let page: PageRow = sqlx::query_as(FLIP_PAGE_SQL)
                .bind(site)
                .bind(page_id)
                .bind(-n)
                .bind(now)
                .bind(Gzip::CURRENT.code())
                .fetch_one(&mut *conn)
                .await?;
            written.counts += n as u64;
            changed.push(PageState::from(page));
        }
        if news > 0 {
            Self::touch_news(conn, site, now).await?;
        }
        written.changes.insert(site, Changes { pages: changed, locs: Vec::new() });
        Ok(written)
    }

    async fn recount(conn: &mut Self::Connection, site: i64, pages: &mut [PageState]) -> Result<()> {
        let (Some(first), Some(last)) = (pages.iter().map(|p| p.id).min(), pages.iter().map(|p| p.id).max()) else {
            return Ok(());
        };
        let counts: Vec<(i64, i64)> =
            sqlx::query_as(RECOUNT_SQL).bind(site).bind(first).bind(last).fetch_all(&mut *conn).await?;
        for page in pages.iter_mut() {
            let n = counts.iter().find(|(id, _)| *id == page.id).map_or(0, |(_, n)| *n);
            if n != page.excluded {
                sqlx::query(SET_EXCLUDED_SQL).bind(site).bind(page.id).bind(n).execute(&mut *conn).await?;
                page.excluded = n;
            }
        }
        Ok(())
    }

    async fn problems(
        pool: &Pool<Self>,
        site: Option<i64>,
        filter: ProblemFilter,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(SiteUrl, UrlCheck)>> {
        let all = Kind::ALL.iter().fold(0, |bits, k| bits | k.bit());
        let (bits, transient, excluded) = match filter {
            ProblemFilter::Any => (all, 0, 0),
            ProblemFilter::Kind(kind) => (kind.bit(), 0, 0),
            ProblemFilter::Transient => (0, 1, 0),
            ProblemFilter::Excluded => (0, 0, 1),
        };
        let rows: Vec<ProblemRow> = sqlx::query_as(PROBLEMS_SQL)
            .bind(after)
            .bind(i64::from(bits))
            .bind(transient)
            .bind(excluded)
            .bind(site.unwrap_or(0))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let url = SiteUrl::from(r.url);
                let check = r.check.into_check(url.url.loc.clone());
                (url, check)
            })
            .collect())
    }

    async fn summary(pool: &Pool<Self>, site: i64) -> Result<HealthSummary> {
        let groups: Vec<(i64, i64, i64, Option<i64>)> =
            sqlx::query_as(SUMMARY_PROBLEMS_SQL).bind(site).fetch_all(pool).await?;
        let (tracked, checked, healthy, last): (i64, i64, i64, Option<i64>) =
            sqlx::query_as(SUMMARY_ROWS_SQL).bind(site).fetch_one(pool).await?;
        let (excluded,): (i64,) = sqlx::query_as(SUMMARY_EXCLUDED_SQL).bind(site).fetch_one(pool).await?;
        let cap = i64::try_from(BACKLOG_CAP).unwrap_or(i64::MAX);
        let (backlog,): (i64,) =
            sqlx::query_as(SUMMARY_BACKLOG_SQL).bind(site).bind(super::now_us()).bind(cap).fetch_one(pool).await?;
        let (seeded_id,): (i64,) = sqlx::query_as(SEEDED_SQL).bind(site).fetch_optional(pool).await?.unwrap_or((0,));
        let (unqueued,): (i64,) =
            sqlx::query_as(SUMMARY_UNQUEUED_SQL).bind(site).bind(seeded_id).fetch_one(pool).await?;
        let brake: Option<BrakeRow> = sqlx::query_as(BRAKE_SQL).bind(site).fetch_optional(pool).await?;
        let kinds = Kind::ALL
            .iter()
            .map(|&kind| {
                let of = groups.iter().filter(|(bits, ..)| Problems::from_bits(*bits as u32).contains(kind));
                let urls = of.clone().map(|(_, _, n, _)| *n as u64).sum();
                (kind, urls, of.filter_map(|(.., since)| *since).min())
            })
            .collect();
        let transient = groups.iter().filter(|(_, t, ..)| *t != 0).map(|(_, _, n, _)| *n as u64).sum();
        Ok(HealthSummary {
            tracked: tracked as u64,
            checked: checked as u64,
            healthy: healthy as u64,
            kinds,
            transient,
            excluded: excluded as u64,
            backlog: backlog as u64,
            seeded: unqueued == 0,
            last_checked_us: last,
            brake: brake.map(BrakeRow::into_state),
        })
    }
}

/// The checks of deleted locs (`$2`, sorted) of site `$1`.
pub(crate) const PG_DROP_SQL: &str = "DELETE FROM url_checks WHERE site_id = $1 AND loc = ANY($2)";
pub(crate) const SQLITE_DROP_SQL: &str =
    "DELETE FROM url_checks WHERE site_id = ?1 AND loc IN (SELECT value FROM json_each(?2))";
