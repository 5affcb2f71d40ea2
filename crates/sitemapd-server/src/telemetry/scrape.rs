//! `GET /metrics`: the recorder's counters and histograms ([`crate::telemetry`]), and the state gauges computed
//! from this app's state at each scrape.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::crawlers::report;
use crate::health::Kind;
use crate::hreflang::ProblemKind;
use crate::page::{PageState, page_bytes, section_of};
use crate::placement::MAX_PAGES;
use crate::telemetry::{
    self, CRAWLER_LAST_VERIFIED_FETCH, CRAWLER_LAST_VERIFIED_FETCH_HELP, CRAWLER_UNSEEN_PAGES,
    CRAWLER_UNSEEN_PAGES_HELP, HEALTH_BACKLOG, HEALTH_BACKLOG_HELP, HEALTH_EXCLUDED_URLS, HEALTH_EXCLUDED_URLS_HELP,
    HEALTH_PAUSED, HEALTH_PAUSED_HELP, HEALTH_PROBLEM_URLS, HEALTH_PROBLEM_URLS_HELP, HREFLANG_CLUSTERS,
    HREFLANG_CLUSTERS_HELP, HREFLANG_MEMBERS, HREFLANG_MEMBERS_HELP, HREFLANG_PROBLEMS, HREFLANG_PROBLEMS_HELP,
    INDEXNOW_OUTBOX, PUBLISH_AWAITING_DELETION, PUBLISH_AWAITING_DELETION_HELP, PUBLISH_FAILURES,
    PUBLISH_FAILURES_HELP, PUBLISH_LAST_COMPLETE_AGE, PUBLISH_LAST_COMPLETE_AGE_HELP,
};

/// `GET /metrics`: Prometheus text format. The counters come from the recorder; the state gauges are computed from
/// this app's store at each scrape (O(pages)); with crawler telemetry on, two more reads a site (its fetch records
/// and its crawlers' page reads: O(resources × crawlers + pages × crawlers)); with URL health, one more read a
/// checked site (its summary: O(problem rows) and the capped backlog count).
pub async fn get_metrics(State(state): State<AppState>) -> Response {
    let mut text = telemetry::prometheus().render();
    // A counter none of whose series is known before it counts (one by route) is still described from the start.
    for c in telemetry::COUNTERS {
        if !text.contains(&format!("# TYPE {} counter\n", c.name)) {
            let _ = write!(text, "# HELP {} {}\n# TYPE {} counter\n", c.name, c.help, c.name);
        }
    }
    let cache_bytes = state.page_cache.weighted_size().await;
    let mut gauge = |name: &str, help: &str, value: f64| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n");
    };
    // Per page set, a site's section: (labels, URLs, listed pages, fullest page by URLs, fullest page by bytes);
    // per site: (name, pages opened). The default section's labels are the site's alone (`section=""` is no
    // label to Prometheus), so a site without sections keeps its series.
    let (mut sets, mut sites) = (Vec::new(), Vec::new());
    // Per site and crawler: (labels, last verified fetch in seconds), (labels, unseen pages).
    let (mut last_fetch, mut unseen) = (Vec::new(), Vec::new());
    let mut up = true;
    for site in state.sites.iter() {
        let read = async {
            let pages = state.reads().pages(site.id).await?;
            let names = state.section_names(site.id, pages.iter().map(|p| section_of(p.id))).await?;
            Ok::<_, crate::store::StoreError>((pages, names))
        };
        match read.await {
            Ok((pages, names)) => {
                let limits = state.config.limits();
                let mut by_section: BTreeMap<i64, Vec<&PageState>> = BTreeMap::new();
                for p in &pages {
                    by_section.entry(section_of(p.id)).or_default().push(p);
                }
                for (id, pages) in by_section {
                    let Some(section) = names.name(id) else { continue };
                    let labels = match section {
                        None => format!("site=\"{}\"", site.name),
                        Some(s) => format!("site=\"{}\",section=\"{s}\"", site.name),
                    };
                    let own = section.and_then(|s| state.config.sitemaps.section_max_urls.get(s.as_str()));
                    let max_urls = own.copied().unwrap_or(limits.max_urls).min(limits.max_urls);
                    let fill_urls = pages.iter().map(|p| p.url_count as f64 / f64::from(max_urls)).fold(0.0, f64::max);
                    let fill_bytes = pages
                        .iter()
                        .map(|p| page_bytes(p.byte_size) as f64 / limits.max_bytes as f64)
                        .fold(0.0, f64::max);
                    let urls: i64 = pages.iter().map(|p| p.url_count).sum();
                    let listed = pages.iter().filter(|p| p.url_count > 0).count();
                    sets.push((labels, urls, listed, fill_urls, fill_bytes));
                }
                if pages.is_empty() {
                    sets.push((format!("site=\"{}\"", site.name), 0, 0, 0.0, 0.0));
                }
                sites.push((site.name.as_str(), pages.iter().filter(|p| p.url_count > 0).count()));
                if state.config.crawlers.telemetry {
                    let read = async {
                        Ok::<_, crate::store::StoreError>((
                            state.crawl_log().crawler_fetches(site.id).await?,
                            state.crawl_log().crawler_seen(site.id, None).await?,
                        ))
                    };
                    match read.await {
                        Ok((fetches, seen)) => {
                            for c in report::site_report(&pages, &fetches, &seen, &[]).crawlers {
                                let labels = format!("site=\"{}\",crawler=\"{}\"", site.name, c.crawler.name());
                                if let Some(us) = c.last_verified_us() {
                                    last_fetch.push((labels.clone(), us as f64 / 1e6));
                                }
                                if let Some(u) = c.unseen {
                                    unseen.push((labels, u.pages as f64));
                                }
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, site = %site.name, "metrics: cannot read crawler telemetry")
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, site = %site.name, "metrics: cannot read the page table");
                up = false;
            }
        }
    }
    gauge(
        "sitemapd_store_up",
        "1 when every site's page table could be read for this scrape, else 0",
        f64::from(u8::from(up)),
    );
    let mut per_site = |name: &str, help: &str, values: &mut dyn Iterator<Item = (String, f64)>| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n");
        for (labels, value) in values {
            let _ = writeln!(text, "{name}{{{labels}}} {value}");
        }
    };
    per_site(
        "sitemapd_urls",
        "URLs stored, per site and section (none: the default section)",
        &mut sets.iter().map(|s| (s.0.clone(), s.1 as f64)),
    );
    per_site(
        "sitemapd_sitemap_pages",
        "Sitemap pages listed in the site's index (pages with at least one URL), per site and section",
        &mut sets.iter().map(|s| (s.0.clone(), s.2 as f64)),
    );
    per_site(
        "sitemapd_index_fill_ratio",
        "Pages that hold a URL, all sections together, as a fraction of the 49,999 its index may list (at 1, \
         writes of new URLs that need a page get 507; an emptied page takes no room)",
        &mut sites.iter().map(|s| (format!("site=\"{}\"", s.0), s.1 as f64 / MAX_PAGES as f64)),
    );
    per_site(
        "sitemapd_page_fill_ratio",
        "The fullest page of a site's section, as a fraction of each page limit (limit=\"urls\": page_max_urls or \
         the section's own, \"bytes\": page_max_bytes)",
        &mut sets
            .iter()
            .flat_map(|s| [(format!("{},limit=\"urls\"", s.0), s.3), (format!("{},limit=\"bytes\"", s.0), s.4)]),
    );
    if state.config.crawlers.telemetry {
        per_site(CRAWLER_LAST_VERIFIED_FETCH, CRAWLER_LAST_VERIFIED_FETCH_HELP, &mut last_fetch.into_iter());
        per_site(CRAWLER_UNSEEN_PAGES, CRAWLER_UNSEEN_PAGES_HELP, &mut unseen.into_iter());
    }
    let mut gauge = |name: &str, help: &str, value: f64| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n");
    };
    let pool = state.reads().pool_status();
    gauge("sitemapd_db_pool_connections", "Open database connections in the pool", f64::from(pool.size));
    gauge("sitemapd_db_pool_idle_connections", "Idle database connections in the pool", pool.idle as f64);
    if let Some((size, idle)) = pool.replica {
        gauge("sitemapd_db_read_pool_connections", "Open connections in the read replica's pool", f64::from(size));
        gauge("sitemapd_db_read_pool_idle_connections", "Idle connections in the read replica's pool", idle as f64);
    }
    gauge("sitemapd_page_cache_bytes", "Bytes of rendered gzip pages held by this process", cache_bytes as f64);
    // Only when IndexNow is on: a count of the outbox is O(queued locs), and without notification it stays empty.
    if !state.config.indexnow.keys.is_empty() {
        match state.outbox().outbox_size().await {
            Ok(sizes) => {
                // Every site with a key, 0 when nothing is queued; and a site no longer configured, by its id.
                let mut by_site: std::collections::BTreeMap<String, i64> =
                    state.config.indexnow.keys.iter().map(|(name, _)| (name.to_owned(), 0)).collect();
                for (id, n) in sizes {
                    let name = state.sites.by_id(id).map_or_else(|| format!("#{id}"), |s| s.name.clone());
                    *by_site.entry(name).or_default() += n;
                }
                let _ = write!(
                    text,
                    "# HELP {INDEXNOW_OUTBOX} Locs queued for IndexNow per site (the outbox, shared by all replicas)\n\
                     # TYPE {INDEXNOW_OUTBOX} gauge\n"
                );
                for (site, n) in by_site {
                    let _ = writeln!(text, "{INDEXNOW_OUTBOX}{{site=\"{site}\"}} {n}");
                }
            }
            Err(e) => tracing::warn!(error = %e, "metrics: cannot read the IndexNow outbox"),
        }
    }
    if !state.config.health.check.is_empty() {
        health_gauges(&state, &mut text).await;
    }
    hreflang_gauges(&state, &mut text).await;
    if !state.config.publish.targets.is_empty() {
        publish_gauges(&state, &mut text).await;
    }
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    let no_store = HeaderValue::from_static("no-store");
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, no_store)], text).into_response()
}

/// hreflang clusters' gauges, for every configured site, from each one's summary (one read a site: O(its members
/// and problem rows)): its clusters, its members, its problems by kind (every kind, 0 included). Computed here rather
/// than kept in the recorder, as URL health's are: every replica reports the shared database's figures, nothing is
/// read without a scraper, and a site whose summary cannot be read has no series this scrape (a warning is logged).
async fn hreflang_gauges(state: &AppState, text: &mut String) {
    let (mut clusters, mut members, mut problems) = (Vec::new(), Vec::new(), Vec::new());
    for site in state.sites.iter() {
        match state.hreflang().hreflang_summary(site.id).await {
            Ok(s) => {
                let name = &site.name;
                clusters.push((format!("site=\"{name}\""), s.clusters));
                members.push((format!("site=\"{name}\""), s.members));
                for kind in ProblemKind::ALL {
                    let n = s.problems.get(kind.as_str()).copied().unwrap_or(0);
                    problems.push((format!("site=\"{name}\",kind=\"{}\"", kind.as_str()), n));
                }
            }
            Err(e) => tracing::warn!(error = %e, site = %site.name, "metrics: cannot read the hreflang summary"),
        }
    }
    for (metric, help, series) in [
        (HREFLANG_CLUSTERS, HREFLANG_CLUSTERS_HELP, clusters),
        (HREFLANG_MEMBERS, HREFLANG_MEMBERS_HELP, members),
        (HREFLANG_PROBLEMS, HREFLANG_PROBLEMS_HELP, problems),
    ] {
        let _ = write!(text, "# HELP {metric} {help}\n# TYPE {metric} gauge\n");
        for (labels, value) in series {
            let _ = writeln!(text, "{metric}{{{labels}}} {value}");
        }
    }
}

/// Publishing's gauges, while targets are configured, from the store's record of every target (one read: O(objects
/// recorded)): seconds since its last complete pass (absent when there was none), objects awaiting deletion,
/// consecutive failures. Every replica reports the shared database's figures; when it cannot be read there are no
/// series this scrape (and a warning is logged). The `target` label is the target's URL, which holds no secret.
async fn publish_gauges(state: &AppState, text: &mut String) {
    let status = match state.publish_log().publish_status(None).await {
        Ok(status) => status,
        Err(e) => {
            tracing::warn!(error = %e, "metrics: cannot read the publishing targets' state");
            return;
        }
    };
    let label = |target: &str| target.replace('\\', "\\\\").replace('"', "\\\"");
    let mut age = Vec::new();
    let (mut awaiting, mut failures) = (Vec::new(), Vec::new());
    for s in &status {
        let labels = format!("target=\"{}\"", label(&s.target));
        if let Some(since) = s.since_complete {
            age.push((labels.clone(), since.as_secs_f64().to_string()));
        }
        awaiting.push((labels.clone(), s.gone.to_string()));
        failures.push((labels, s.failures.to_string()));
    }
    for (metric, help, series) in [
        (PUBLISH_LAST_COMPLETE_AGE, PUBLISH_LAST_COMPLETE_AGE_HELP, age),
        (PUBLISH_AWAITING_DELETION, PUBLISH_AWAITING_DELETION_HELP, awaiting),
        (PUBLISH_FAILURES, PUBLISH_FAILURES_HELP, failures),
    ] {
        let _ = write!(text, "# HELP {metric} {help}\n# TYPE {metric} gauge\n");
        for (labels, value) in series {
            let _ = writeln!(text, "{metric}{{{labels}}} {value}");
        }
    }
}

/// URL health's gauges, for the sites that are checked (configured ones only), from each one's summary: problem
/// URLs by kind (every kind, and `transient`), excluded URLs, the backlog, whether the brake is paused (read from
/// the store: every replica says the same, and a restart keeps it). A site whose summary cannot be read has
/// no series this scrape (and a warning is logged).
async fn health_gauges(state: &AppState, text: &mut String) {
    let (mut problems, mut excluded, mut backlog, mut paused) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (name, _) in state.config.health.check.iter() {
        let Some(site) = state.sites.by_name(name) else { continue };
        match state.health_queue().health_summary(site.id).await {
            Ok(s) => {
                for kind in Kind::ALL {
                    let urls = s.kinds.iter().find(|(k, _, _)| *k == kind).map_or(0, |(_, urls, _)| *urls);
                    problems.push((format!("site=\"{name}\",kind=\"{}\"", kind.name()), urls));
                }
                problems.push((format!("site=\"{name}\",kind=\"transient\""), s.transient));
                excluded.push((format!("site=\"{name}\""), s.excluded));
                backlog.push((format!("site=\"{name}\""), s.backlog));
                let is_paused = s.brake.as_ref().is_some_and(|b| b.mode == crate::store::BrakeMode::Paused);
                paused.push((format!("site=\"{name}\""), u64::from(is_paused)));
            }
            Err(e) => tracing::warn!(error = %e, site = %name, "metrics: cannot read the URL health summary"),
        }
    }
    for (metric, help, series) in [
        (HEALTH_PROBLEM_URLS, HEALTH_PROBLEM_URLS_HELP, problems),
        (HEALTH_EXCLUDED_URLS, HEALTH_EXCLUDED_URLS_HELP, excluded),
        (HEALTH_BACKLOG, HEALTH_BACKLOG_HELP, backlog),
        (HEALTH_PAUSED, HEALTH_PAUSED_HELP, paused),
    ] {
        let _ = write!(text, "# HELP {metric} {help}\n# TYPE {metric} gauge\n");
        for (labels, value) in series {
            let _ = writeln!(text, "{metric}{{{labels}}} {value}");
        }
    }
}
