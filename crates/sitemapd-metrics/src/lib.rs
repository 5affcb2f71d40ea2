//! The names of every `sitemapd_*` metric, their descriptions, the process's Prometheus recorder, and one
//! recording function per event. A leaf: every layer (store, ingest, server) may call it, and it calls none of
//! them. The HTTP middleware that records request metrics, and `GET /metrics`, live in the server (`telemetry`).

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The target of this module's log lines: the one it had before the crate split (`sitemapd::telemetry`), so that `RUST_LOG`
/// filters and log processing that name it keep working.
const LOG_TARGET: &str = "sitemapd::telemetry";

pub const HTTP_REQUESTS: &str = "sitemapd_http_requests_total";
pub const HTTP_DURATION: &str = "sitemapd_http_request_duration_seconds";
pub const HTTP_BODY_BYTES: &str = "sitemapd_http_response_body_bytes_total";
pub const HTTP_NOT_MODIFIED: &str = "sitemapd_http_not_modified_total";
pub const PAGES_RENDERED: &str = "sitemapd_sitemap_pages_rendered_total";
pub const PRERENDERS: &str = "sitemapd_sitemap_prerenders_total";
pub const REPLICA_FALLBACKS: &str = "sitemapd_read_replica_fallbacks_total";
pub const URL_UPSERTS: &str = "sitemapd_url_upserts_total";
pub const WRITE_GUESSES: &str = "sitemapd_write_guesses_total";
pub const WRITE_LOOKUPS_SHARED: &str = "sitemapd_write_lookups_shared_total";
pub const URL_DELETES: &str = "sitemapd_url_deletes_total";
pub const INDEXNOW_QUEUED: &str = "sitemapd_indexnow_queued_total";
pub const INDEXNOW_SENT: &str = "sitemapd_indexnow_sent_total";
pub const INDEXNOW_DROPPED: &str = "sitemapd_indexnow_dropped_total";
pub const INDEXNOW_RETRIES: &str = "sitemapd_indexnow_retries_total";
/// A gauge computed at each scrape (when IndexNow is on), not through the recorder.
pub const INDEXNOW_OUTBOX: &str = "sitemapd_indexnow_outbox_urls";
pub const WEBSUB_NOTIFICATIONS: &str = "sitemapd_websub_notifications_total";
/// A gauge the WebSub publisher sets after each look at a site's feeds.
pub const WEBSUB_OWED: &str = "sitemapd_websub_owed";
pub const PUBLISH_OBJECTS: &str = "sitemapd_publish_objects_total";
pub const PUBLISH_BYTES: &str = "sitemapd_publish_bytes_total";
pub const PUBLISH_PASSES: &str = "sitemapd_publish_passes_total";
/// A gauge a publishing pass sets as it goes: the files of its target still to fetch or upload.
pub const PUBLISH_PENDING: &str = "sitemapd_publish_pending";
pub const LOG_WRITES_LOST: &str = "sitemapd_log_writes_lost_total";
pub const SLOW_CLIENTS_CLOSED: &str = "sitemapd_slow_clients_closed_total";
pub const CRAWLER_FETCHES: &str = "sitemapd_crawler_fetches_total";
pub const CRAWLER_LAG: &str = "sitemapd_crawler_lag_seconds";
pub const CRAWLER_DROPPED: &str = "sitemapd_crawler_events_dropped_total";
pub const CRAWLER_FLUSHES: &str = "sitemapd_crawler_flushes_total";
pub const CRAWLER_RDNS: &str = "sitemapd_crawler_rdns_lookups_total";
pub const HEALTH_CHECKS: &str = "sitemapd_health_checks_total";
pub const HEALTH_EXCLUSIONS: &str = "sitemapd_health_exclusions_total";
pub const HEALTH_REQUESTS: &str = "sitemapd_health_requests_total";
pub const WORKER_UP: &str = "sitemapd_worker_up";
pub const WORKER_RESTARTS: &str = "sitemapd_worker_restarts_total";
/// URL health's state gauges, computed at each scrape (for the sites that are checked) from the store, not through
/// the recorder, with their descriptions.
pub const HEALTH_PROBLEM_URLS: &str = "sitemapd_health_problem_urls";
pub const HEALTH_PROBLEM_URLS_HELP: &str = "Stored URLs whose last check found a problem, by site and kind (not_found, \
     gone, client_error, redirect, noindex, canonical, disallowed; transient: the last attempt failed without an answer)";
pub const HEALTH_EXCLUDED_URLS: &str = "sitemapd_health_excluded_urls";
pub const HEALTH_EXCLUDED_URLS_HELP: &str = "Stored URLs left out of their sitemap page for a problem (policy exclude)";
pub const HEALTH_PAUSED: &str = "sitemapd_health_paused";
pub const HEALTH_PAUSED_HELP: &str = "1 while the site's URL health brake is paused (a burst of one kind of problem \
     across its latest checked URLs: nothing is excluded), else 0; by site";
pub const HEALTH_BACKLOG: &str = "sitemapd_health_backlog_urls";
pub const HEALTH_BACKLOG_HELP: &str = "URLs due for a check and not yet taken, by site (counted up to 1,000,000)";
/// hreflang clusters' state gauges, computed at each scrape from the store (one summary read a site), not through
/// the recorder, with their descriptions.
pub const HREFLANG_CLUSTERS: &str = "sitemapd_hreflang_clusters";
pub const HREFLANG_CLUSTERS_HELP: &str = "hreflang clusters with a stored member in the site (the URLs whose \
     alternates name each other or a common URL), by site";
pub const HREFLANG_MEMBERS: &str = "sitemapd_hreflang_members";
pub const HREFLANG_MEMBERS_HELP: &str = "The site's stored URLs that are in an hreflang cluster, by site";
pub const HREFLANG_PROBLEMS: &str = "sitemapd_hreflang_problems";
pub const HREFLANG_PROBLEMS_HELP: &str = "hreflang problems the site lists, by site and kind (duplicate_language, \
     conflicting_language, invalid_code, not_stored, missing_return, cross_site, too_large; every kind, 0 included)";
/// Publishing's state gauges, computed at each scrape (while targets are configured) from the store's record of
/// each target, not through the recorder, with their descriptions.
pub const PUBLISH_LAST_COMPLETE_AGE: &str = "sitemapd_publish_last_complete_age_seconds";
pub const PUBLISH_LAST_COMPLETE_AGE_HELP: &str = "Seconds since the last complete publishing pass of the target \
     ended, by any replica (absent: never); alert when it grows past a few intervals";
pub const PUBLISH_AWAITING_DELETION: &str = "sitemapd_publish_awaiting_deletion";
pub const PUBLISH_AWAITING_DELETION_HELP: &str = "Objects on the target that no published index names any more, \
     kept until publish.grace has passed, by target";
pub const PUBLISH_FAILURES: &str = "sitemapd_publish_failures";
pub const PUBLISH_FAILURES_HELP: &str = "Publishing passes of the target that failed in a row since the last \
     complete one (0: the last pass completed), by target";
/// Crawler telemetry's state gauges, computed at each scrape (when `crawler_telemetry` is on) from the store, not
/// through the recorder: per site and crawler, with their descriptions.
pub const CRAWLER_LAST_VERIFIED_FETCH: &str = "sitemapd_crawler_last_verified_fetch_timestamp_seconds";
pub const CRAWLER_LAST_VERIFIED_FETCH_HELP: &str = "When the crawler last fetched any of the site's sitemaps from an \
     address verified as its own, in seconds since the Unix epoch (absent: never); alert on time() minus this";
pub const CRAWLER_UNSEEN_PAGES: &str = "sitemapd_crawler_unseen_pages";
pub const CRAWLER_UNSEEN_PAGES_HELP: &str = "Listed sitemap pages whose current version the crawler has not read \
     (verified); only for a crawler that has read at least one page";

/// Seconds, from 1 ms (a 304) to 10 s (a large page on a slow database).
/// A change's lag to a crawler's read: a minute to a month.
const LAG_BUCKETS: &[f64] = &[
    60.0,
    300.0,
    900.0,
    3600.0,
    4.0 * 3600.0,
    12.0 * 3600.0,
    86_400.0,
    2.0 * 86_400.0,
    4.0 * 86_400.0,
    7.0 * 86_400.0,
    14.0 * 86_400.0,
    30.0 * 86_400.0,
];
const DURATION_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// How often the server's `metrics-upkeep` worker folds histogram samples into their buckets: they wait in a
/// buffer until a scrape or an upkeep does, so without a scraper this bounds the buffer.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process's Prometheus handle. The recorder is global and can be installed once per process, while a process
/// (the tests) may build many apps: the first call installs it, later calls share it. When another recorder is
/// already installed, `/metrics` still answers, with the state gauges only.
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HTTP_DURATION.to_owned()), DURATION_BUCKETS)
            .expect("the bucket list is not empty")
            .set_buckets_for_metric(Matcher::Full(CRAWLER_LAG.to_owned()), LAG_BUCKETS)
            .expect("the bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(target: LOG_TARGET, "another metrics recorder is installed; /metrics shows the state gauges only");
            return handle;
        }
        describe();
        zero_counters(&[]);
        handle
    })
}

/// A counter's label, and the values it is exported with at 0 from the start. No values: they are known only at
/// run time (a site, a crawler: the server gives them to [`zero_counters`]) or are open (a route, a status), and
/// the counter's series appear as they are counted.
#[derive(Debug)]
pub struct Label {
    pub name: &'static str,
    pub values: &'static [&'static str],
}

/// One counter: its name, description, unit and labels. [`COUNTERS`] lists every one, as the operator's documentation
/// does (`docs/operations.md`, `docs/crawlers.md`, `docs/health.md`; a test holds the two to each other).
#[derive(Debug)]
pub struct CounterSpec {
    pub name: &'static str,
    pub help: &'static str,
    pub unit: Option<Unit>,
    pub labels: &'static [Label],
}

const fn label(name: &'static str, values: &'static [&'static str]) -> Label {
    Label { name, values }
}

const fn spec(name: &'static str, help: &'static str, labels: &'static [Label]) -> CounterSpec {
    CounterSpec { name, help, unit: None, labels }
}

/// The reasons of [`indexnow_dropped`].
const INDEXNOW_DROP_REASONS: &[&str] =
    &["bad_request", "key_not_valid", "unprocessable", "client_error", "not_under_public_url", "gave_up"];

/// The outcomes of [`websub_notification`].
pub const WEBSUB_OUTCOMES: &[&str] =
    &["delivered", "rate_limited", "server_error", "timeout", "network", "redirected", "refused", "unexpected_status"];

/// Every counter, with the labels and values it is exported with from the start.
pub const COUNTERS: &[CounterSpec] = &[
    spec(
        HTTP_REQUESTS,
        "HTTP requests answered, by matched route, method and status",
        &[label("route", &[]), label("method", &[]), label("status", &[])],
    ),
    CounterSpec {
        name: HTTP_BODY_BYTES,
        help: "Response body bytes sent, by matched route, counted as they stream",
        unit: Some(Unit::Bytes),
        labels: &[label("route", &[])],
    },
    spec(HTTP_NOT_MODIFIED, "304 Not Modified answers, by matched route", &[label("route", &[])]),
    spec(PAGES_RENDERED, "Sitemap page bodies started (rendered from the database)", &[]),
    spec(
        REPLICA_FALLBACKS,
        "Times a read on the read replica (DATABASE_READ_URL) failed and reads went to the primary until it answered \
         again",
        &[],
    ),
    spec(
        PRERENDERS,
        "Changed sitemap pages taken up for rendering ahead of crawlers, by outcome (rendered, cached, failed, dropped)",
        &[label("outcome", &["rendered", "cached", "failed", "dropped"])],
    ),
    spec(
        URL_UPSERTS,
        "Entries received by PUT /api/v1/urls, by outcome",
        &[label("outcome", &["created", "updated", "unchanged", "rejected"])],
    ),
    spec(
        WRITE_GUESSES,
        "Large write batches planned as new records without a lookup, by outcome (new; stored: planned again)",
        &[label("outcome", &["new", "stored"])],
    ),
    spec(
        WRITE_LOOKUPS_SHARED,
        "Large write batches looked up in two halves at once, the second on an idle connection (Postgres), by \
         outcome (shared; retried: that half failed there and was looked up in the write)",
        &[label("outcome", &["shared", "retried"])],
    ),
    spec(
        URL_DELETES,
        "Locs received by the delete routes, by outcome",
        &[label("outcome", &["deleted", "missing", "rejected"])],
    ),
    spec(LOG_WRITES_LOST, "Log lines that could not be written (standard output closed or failing)", &[]),
    spec(SLOW_CLIENTS_CLOSED, "Connections closed for reading a response below min_send_rate", &[]),
    spec(INDEXNOW_QUEUED, "Changed locs queued for IndexNow by writes (a loc already queued counts again)", &[]),
    spec(INDEXNOW_SENT, "Locs sent to the IndexNow endpoint in requests it accepted (200, 202)", &[]),
    spec(
        INDEXNOW_DROPPED,
        "Queued locs dropped without a successful send, by reason",
        &[label("reason", INDEXNOW_DROP_REASONS)],
    ),
    spec(
        INDEXNOW_RETRIES,
        "IndexNow requests that failed and will be sent again, by reason",
        &[label("reason", &["rate_limited", "server_error", "network", "redirected", "unexpected_status"])],
    ),
    spec(
        WEBSUB_NOTIFICATIONS,
        "WebSub publish notifications sent to hubs, by hub (its host) and outcome",
        &[label("hub", &[]), label("outcome", WEBSUB_OUTCOMES)],
    ),
    spec(
        PUBLISH_OBJECTS,
        "Objects uploaded to or deleted from a publishing target, by target (its URL) and action",
        &[label("target", &[]), label("action", &["uploaded", "deleted"])],
    ),
    CounterSpec {
        name: PUBLISH_BYTES,
        help: "Bytes uploaded to a publishing target, by target",
        unit: Some(Unit::Bytes),
        labels: &[label("target", &[])],
    },
    spec(
        PUBLISH_PASSES,
        "Publishing passes, by target and outcome (complete; failed; busy: another process held the target)",
        &[label("target", &[]), label("outcome", &["complete", "failed", "busy"])],
    ),
    spec(
        CRAWLER_FETCHES,
        "Sitemap fetches answered (200, 304) to clients that name a crawler, by crawler, verification and status",
        &[
            label("crawler", &[]),
            label("verification", &["verified", "claimed", "unknown"]),
            label("status", &["200", "304"]),
        ],
    ),
    spec(
        CRAWLER_DROPPED,
        "Crawler fetches not recorded, by reason: queue_full (the recorder lags), table_full (too many distinct \
         resources in one flush interval), flush_failed (the database refused the flush)",
        &[label("reason", &["queue_full", "table_full", "flush_failed"])],
    ),
    spec(
        CRAWLER_FLUSHES,
        "Flushes of crawler telemetry to the database, by outcome",
        &[label("outcome", &["written", "failed"])],
    ),
    spec(
        CRAWLER_RDNS,
        "Reverse DNS verifications looked up, by outcome (verified, refused, failed, busy)",
        &[label("outcome", &["verified", "refused", "failed", "busy"])],
    ),
    spec(
        HEALTH_CHECKS,
        "URL health checks done, by site and outcome (healthy, problem, transient, not_modified, deleted)",
        &[label("site", &[]), label("outcome", &["healthy", "problem", "transient", "not_modified", "deleted"])],
    ),
    spec(
        HEALTH_EXCLUSIONS,
        "URLs left out of (excluded) or put back in (restored) their sitemap page by URL health, by site",
        &[label("site", &[]), label("action", &["excluded", "restored"])],
    ),
    spec(
        HEALTH_REQUESTS,
        "Requests the URL health checker made, by site and kind (page, robots)",
        &[label("site", &[]), label("kind", &["page", "robots"])],
    ),
    spec(
        WORKER_RESTARTS,
        "Times a background worker was started again after it failed (a panic or an error), by worker",
        &[label("worker", &[])],
    ),
];

fn describe() {
    for c in COUNTERS {
        match c.unit {
            Some(unit) => describe_counter!(c.name, unit, c.help),
            None => describe_counter!(c.name, c.help),
        }
    }
    describe_gauge!(WORKER_UP, "1 while the background worker runs, 0 once it stopped, failed or finished, by worker");
    describe_gauge!(
        WEBSUB_OWED,
        "Notifications owed to WebSub hubs (a feed whose content the hub was not yet told of, held by the debounce \
         interval, a retry delay or in flight), by site, as this process last looked"
    );
    describe_gauge!(
        PUBLISH_PENDING,
        "Files of the publishing target still to fetch or upload in this process's pass (0 between passes), by target"
    );
    describe_histogram!(HTTP_DURATION, Unit::Seconds, "Time to the response head, by matched route and method");
    describe_histogram!(
        CRAWLER_LAG,
        Unit::Seconds,
        "Time from a page's change to the first verified read of that version, by crawler (observed by the process \
         that recorded the read first)"
    );
}

/// Exports every counter of [`COUNTERS`] at 0 for each combination of its labels' values, so that a dashboard or an
/// alert sees the series before the first event (adding 0 leaves a count alone). A label without values of its own
/// takes them from `known` (`site`: the checked sites; `crawler`: every crawler's stable name); a counter with a
/// label known in neither place (a route) is left to appear as it counts. The recorder calls it with nothing
/// known when it is installed; the server again with what it knows.
pub fn zero_counters(known: &[(&str, Vec<String>)]) {
    for c in COUNTERS {
        let values: Option<Vec<Vec<String>>> = c
            .labels
            .iter()
            .map(|l| {
                if l.values.is_empty() {
                    known.iter().find(|(name, _)| *name == l.name).map(|(_, v)| v.clone()).filter(|v| !v.is_empty())
                } else {
                    Some(l.values.iter().map(|v| (*v).to_owned()).collect())
                }
            })
            .collect();
        let Some(values) = values else { continue };
        let mut combos: Vec<Vec<metrics::Label>> = vec![Vec::new()];
        for (l, values) in c.labels.iter().zip(values) {
            combos = combos
                .into_iter()
                .flat_map(|combo| {
                    values.iter().map(move |v| {
                        let mut next = combo.clone();
                        next.push(metrics::Label::new(l.name, v.clone()));
                        next
                    })
                })
                .collect();
        }
        for labels in combos {
            counter!(c.name, labels).increment(0);
        }
    }
}

/// The counter of sitemap fetches by a client naming `crawler`, with `trust`, answered `status` (200 or 304): a
/// handle the recorder keeps, so that a fetch costs an atomic add.
pub fn crawler_fetch_counter(crawler: &'static str, trust: &'static str, status: u16) -> metrics::Counter {
    let status = if status == 304 { "304" } else { "200" };
    counter!(CRAWLER_FETCHES, "crawler" => crawler, "verification" => trust, "status" => status)
}

/// A change's lag to `crawler`'s first verified read of the page's new version.
pub fn crawler_lag(crawler: &'static str, seconds: f64) {
    histogram!(CRAWLER_LAG, "crawler" => crawler).record(seconds);
}

/// `n` crawler fetches were not recorded, for `reason` (`queue_full`, `table_full`, `flush_failed`).
pub fn crawler_dropped(reason: &'static str, n: u64) {
    if n > 0 {
        counter!(CRAWLER_DROPPED, "reason" => reason).increment(n);
    }
}

/// A flush of crawler telemetry ended with `outcome` (`written`, `failed`).
pub fn crawler_flush(outcome: &'static str) {
    counter!(CRAWLER_FLUSHES, "outcome" => outcome).increment(1);
}

/// A reverse DNS verification ended with `outcome` (`verified`, `refused`, `failed`, `busy`).
pub fn crawler_rdns(outcome: &'static str) {
    counter!(CRAWLER_RDNS, "outcome" => outcome).increment(1);
}

/// A URL health check of a URL of `site` ended with `outcome` (`healthy`, `problem`, `transient`, `not_modified`,
/// `deleted`).
pub fn health_check(site: &str, outcome: &'static str) {
    counter!(HEALTH_CHECKS, "site" => site.to_owned(), "outcome" => outcome).increment(1);
}

/// URL health left a URL of `site` out of its page (`excluded`) or put it back (`restored`), `n` times.
pub fn health_exclusion(site: &str, action: &'static str, n: u64) {
    if n > 0 {
        counter!(HEALTH_EXCLUSIONS, "site" => site.to_owned(), "action" => action).increment(n);
    }
}

/// The URL health checker sent a request to `site`'s host for `kind` (`page`, `robots`).
pub fn health_request(site: &str, kind: &'static str) {
    counter!(HEALTH_REQUESTS, "site" => site.to_owned(), "kind" => kind).increment(1);
}

/// The gauge of whether the background worker `worker` runs (1) or not (0).
pub fn worker_up(worker: &'static str) -> metrics::Gauge {
    gauge!(WORKER_UP, "worker" => worker)
}

/// The counter of the background worker `worker`'s restarts after a failure.
pub fn worker_restarts(worker: &'static str) -> metrics::Counter {
    counter!(WORKER_RESTARTS, "worker" => worker)
}

/// A connection was closed for reading more slowly than `min_send_rate`.
pub fn slow_client_closed() {
    counter!(SLOW_CLIENTS_CLOSED).increment(1);
}

/// Counts the times reads left the read replica for the primary after a failure.
pub fn replica_rested() {
    counter!(REPLICA_FALLBACKS).increment(1);
}

/// Counts pages rendered ahead of crawlers, by outcome: `rendered`, `cached` (already), `failed`, `dropped` (the
/// queue was full).
pub fn prerender(outcome: &'static str, n: u64) {
    counter!(PRERENDERS, "outcome" => outcome).increment(n);
}

/// A large write batch was planned as new records without a lookup: `new` (it was), or `stored` (one of its locs
/// was stored: planned again after a lookup).
pub fn write_guess(outcome: &'static str) {
    counter!(WRITE_GUESSES, "outcome" => outcome).increment(1);
}

/// A write batch's lookup was shared with a second connection (`outcome`: `shared`, or `retried` in the write).
pub fn write_lookup_shared(outcome: &'static str) {
    counter!(WRITE_LOOKUPS_SHARED, "outcome" => outcome).increment(1);
}

/// One sitemap page body was read from the database to be sent (streamed, or compressed for the cache).
pub fn page_rendered() {
    counter!(PAGES_RENDERED).increment(1);
}

/// `n` changed locs were queued for IndexNow.
pub fn indexnow_queued(n: usize) {
    if n > 0 {
        counter!(INDEXNOW_QUEUED).increment(n as u64);
    }
}

/// `n` locs were sent in a request the IndexNow endpoint accepted.
pub fn indexnow_sent(n: usize) {
    counter!(INDEXNOW_SENT).increment(n as u64);
}

/// `n` queued locs were dropped for `reason` (`bad_request`, `key_not_valid`, `unprocessable`, `client_error`,
/// `not_under_public_url`, `gave_up`).
pub fn indexnow_dropped(reason: &'static str, n: u64) {
    if n > 0 {
        counter!(INDEXNOW_DROPPED, "reason" => reason).increment(n);
    }
}

/// An IndexNow request failed for `reason` (`rate_limited`, `server_error`, `network`, `redirected`,
/// `unexpected_status`) and will be sent again.
pub fn indexnow_retry(reason: &'static str) {
    counter!(INDEXNOW_RETRIES, "reason" => reason).increment(1);
}

/// A WebSub publish notification to the hub at `hub` (its host, as labelled) ended with `outcome` (one of
/// [`WEBSUB_OUTCOMES`]).
pub fn websub_notification(hub: &str, outcome: &'static str) {
    counter!(WEBSUB_NOTIFICATIONS, "hub" => hub.to_owned(), "outcome" => outcome).increment(1);
}

/// `n` notifications of `site`'s feeds are owed to hubs.
pub fn websub_owed(site: &str, n: usize) {
    gauge!(WEBSUB_OWED, "site" => site.to_owned()).set(n as f64);
}

/// An object of `bytes` bytes was uploaded to the publishing target `target`.
pub fn publish_uploaded(target: &str, bytes: u64) {
    counter!(PUBLISH_OBJECTS, "target" => target.to_owned(), "action" => "uploaded").increment(1);
    counter!(PUBLISH_BYTES, "target" => target.to_owned()).increment(bytes);
}

/// An object was deleted from the publishing target `target`.
pub fn publish_deleted(target: &str) {
    counter!(PUBLISH_OBJECTS, "target" => target.to_owned(), "action" => "deleted").increment(1);
}

/// A publishing pass of `target` ended with `outcome` (`complete`, `failed`, `busy`).
pub fn publish_pass(target: &str, outcome: &'static str) {
    counter!(PUBLISH_PASSES, "target" => target.to_owned(), "outcome" => outcome).increment(1);
}

/// `n` files of `target` are still to fetch or upload in the pass under way.
pub fn publish_pending(target: &str, n: u64) {
    gauge!(PUBLISH_PENDING, "target" => target.to_owned()).set(n as f64);
}

/// Adds `n` to the upsert counter for `outcome` (`created`, `updated`, `unchanged`, `rejected`).
pub fn count_upserts(outcome: &'static str, n: u64) {
    if n > 0 {
        counter!(URL_UPSERTS, "outcome" => outcome).increment(n);
    }
}

/// Adds `n` to the delete counter for `outcome` (`deleted`, `missing`, `rejected`).
pub fn count_deletes(outcome: &'static str, n: u64) {
    if n > 0 {
        counter!(URL_DELETES, "outcome" => outcome).increment(n);
    }
}

/// A log line could not be written (standard output closed or failing).
pub fn log_write_lost() {
    counter!(LOG_WRITES_LOST).increment(1);
}
