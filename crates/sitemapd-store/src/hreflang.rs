//! hreflang clusters (migration 0018): the graph of the alternates that entries declare, and its problems.
//!
//! A write keeps the graph in its transaction, under the write lock ([`apply`], called by `write.rs` before an
//! upsert is planned and after a delete): it loads the nodes of its locs and of the hrefs their declarations name
//! (one probe of the primary key: a batch that declares nothing and touches no node stops there), the whole
//! clusters they are in, applies the batch, splits and resolves the clusters with [`sitemapd_core::hreflang`],
//! writes the nodes and problems that changed, and says what each stored member must render: its declaration
//! (`as_sent`), or the completed set or none (`complete`). The batch's entries are stored with theirs (so an
//! identical re-send is unchanged); other members whose rendering changes are re-planned as updates in their own
//! site and section ([`plan_others`]), counted nowhere and queued for nothing.
//!
//! Invariant: a stored record that is no node has no alternates stored, or is of a site not built yet
//! (`sites.hreflang` NULL), whose records store their declarations as sent. Either way, its stored alternates are its
//! declaration. At open ([`open_tasks`]) an unbuilt site is built and a site whose policy changed is re-rendered,
//! in batches, each in a transaction of its own: a run cut short is finished by the next.
//!
//! The reads ([`super::HreflangReads`]) are the shared queries below, implemented once in `shared.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sqlx::Transaction;

use super::write::{Shape, Writes};
use super::{Result, SiteUrl};
use sitemapd_core::domain::ext::Alternate;
use sitemapd_core::domain::{ChangeFreq, Entry, Extensions, LastMod, Loc, LocScope, Sites};
use sitemapd_core::hreflang::{self as core, MAX_SET, Member, Policy, Problem, ProblemKind};
use sitemapd_core::page::{Fields, PageState, StoredUrl, section_of, url_size};
use sitemapd_core::placement;

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

/// The nodes of a list of hrefs (a JSON array).
pub(crate) const SQLITE_NODES_SQL: &str = "SELECT href, cluster, site_id, declared FROM hreflang_nodes \
     WHERE href IN (SELECT value FROM json_each(?1))";
pub(crate) const PG_NODES_SQL: &str =
    "SELECT href, cluster, site_id, declared FROM hreflang_nodes WHERE href = ANY($1)";
/// The nodes of a list of clusters (a JSON array).
pub(crate) const SQLITE_CLUSTER_NODES_SQL: &str = "SELECT href, cluster, site_id, declared FROM hreflang_nodes \
     WHERE cluster IN (SELECT value FROM json_each(?1))";
pub(crate) const PG_CLUSTER_NODES_SQL: &str =
    "SELECT href, cluster, site_id, declared FROM hreflang_nodes WHERE cluster = ANY($1)";
/// The problems of a list of clusters (a JSON array).
pub(crate) const SQLITE_CLUSTER_PROBLEMS_SQL: &str = "SELECT site_id, href, kind, hreflang, cluster, message \
     FROM hreflang_problems WHERE cluster IN (SELECT value FROM json_each(?1))";
pub(crate) const PG_CLUSTER_PROBLEMS_SQL: &str =
    "SELECT site_id, href, kind, hreflang, cluster, message FROM hreflang_problems WHERE cluster = ANY($1)";
/// Node rows, as a JSON array of `[href, cluster, site_id, declared]` (`WHERE true`: SQLite reads an `ON` after a
/// bare `FROM` as a join's).
pub(crate) const SQLITE_PUT_NODES_SQL: &str = "INSERT INTO hreflang_nodes (href, cluster, site_id, declared) \
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?1) WHERE true \
     ON CONFLICT (href) DO UPDATE SET cluster = excluded.cluster, site_id = excluded.site_id, \
     declared = excluded.declared";
pub(crate) const PG_PUT_NODES_SQL: &str = "INSERT INTO hreflang_nodes (href, cluster, site_id, declared) \
     SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[]) \
     ON CONFLICT (href) DO UPDATE SET cluster = excluded.cluster, site_id = excluded.site_id, \
     declared = excluded.declared";
pub(crate) const SQLITE_DROP_NODES_SQL: &str =
    "DELETE FROM hreflang_nodes WHERE href IN (SELECT value FROM json_each(?1))";
pub(crate) const PG_DROP_NODES_SQL: &str = "DELETE FROM hreflang_nodes WHERE href = ANY($1)";
/// Problem rows, as a JSON array of `[site_id, href, kind, hreflang, cluster, message]`.
pub(crate) const SQLITE_PUT_PROBLEMS_SQL: &str = "INSERT INTO hreflang_problems \
     (site_id, href, kind, hreflang, cluster, message) \
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5 FROM json_each(?1) WHERE true \
     ON CONFLICT (site_id, href, kind, hreflang) DO UPDATE SET cluster = excluded.cluster, message = excluded.message";
pub(crate) const PG_PUT_PROBLEMS_SQL: &str = "INSERT INTO hreflang_problems \
     (site_id, href, kind, hreflang, cluster, message) \
     SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) \
     ON CONFLICT (site_id, href, kind, hreflang) DO UPDATE SET cluster = excluded.cluster, message = excluded.message";
pub(crate) const SQLITE_DROP_PROBLEMS_SQL: &str = "DELETE FROM hreflang_problems WHERE (site_id, href, kind, hreflang) \
     IN (SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?1))";
pub(crate) const PG_DROP_PROBLEMS_SQL: &str = "DELETE FROM hreflang_problems p \
     USING UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[]) AS d (site_id, href, kind, hreflang) \
     WHERE p.site_id = d.site_id AND p.href = d.href AND p.kind = d.kind AND p.hreflang = d.hreflang";

/// A row of `hreflang_nodes`: href, cluster, site id, declaration (JSON).
pub(crate) type NodeRow = (String, String, Option<i64>, Option<String>);

/// A row of `hreflang_problems`: site id, href, kind, hreflang, cluster, message.
pub(crate) type ProblemRow = (i64, String, String, String, String, String);

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
    for kind in ProblemKind::ALL {
        summary.problems.entry(kind.as_str().to_owned()).or_insert(0);
    }
}

/// The set a cluster's members resolve to (what each renders under `complete`).
pub(crate) fn resolved_set(sites: &Sites, members: &[super::ClusterMember]) -> Vec<Alternate> {
    let members: Vec<Member> = members
        .iter()
        .map(|m| Member {
            href: m.href.clone(),
            site: sites.for_loc(&m.href).map(|s| s.id),
            stored: m.stored,
            declared: m.declared.clone(),
        })
        .collect();
    core::resolve(&members, |_| Policy::AsSent).set
}

/// A site's stored policy (`sites.hreflang`; `None`: not built).
pub(crate) const POLICY_SQL: &str = "SELECT hreflang FROM sites WHERE id = $1";
pub(crate) const SET_POLICY_SQL: &str = "UPDATE sites SET hreflang = $2 WHERE id = $1";
/// A site's records that may declare alternates, in id order after `$2`, at most `$3` (the build's scan).
pub(crate) const DECLARING_SQL: &str = concat!(
    "SELECT ",
    super::url_columns!(),
    " FROM urls WHERE site_id = $1 AND id > $2 AND ext LIKE '%\"alternates\":%' ORDER BY id LIMIT $3"
);
/// The clusters with a stored member in a site, in key order after `$2`, at most `$3` (the re-render's scan).
pub(crate) const SITE_CLUSTERS_SQL: &str = "SELECT DISTINCT cluster FROM hreflang_nodes \
     WHERE site_id = $1 AND cluster > $2 ORDER BY cluster LIMIT $3";

/// Records read per transaction while a site is built at open.
const BUILD_BATCH: u32 = 2_000;
/// Clusters re-rendered per transaction after a change of policy.
const RERENDER_BATCH: u32 = 1_000;

/// What a write tells the graph of one href: the site its record is now stored in (`None`: deleted, or not
/// stored) and its declaration (`None`: it declares none).
#[derive(Clone, Debug)]
pub(crate) struct Given {
    pub href: String,
    pub site: Option<i64>,
    pub declared: Option<Vec<Alternate>>,
}

impl Given {
    /// An entry as written to `site`.
    pub(crate) fn entry(site: i64, e: &Entry) -> Self {
        Self { href: e.loc.as_str().to_owned(), site: Some(site), declared: declaration(e.ext.as_deref()) }
    }
}

/// What an entry's (or a record's) extensions declare: their alternates, if any.
fn declaration(ext: Option<&Extensions>) -> Option<Vec<Alternate>> {
    ext.map(|x| &x.alternates).filter(|a| !a.is_empty()).cloned()
}

/// The stored alternates of a record (empty: none).
fn alternates_of(fields: &Fields) -> &[Alternate] {
    fields.ext.as_deref().map_or(&[], |x| &x.alternates[..])
}

/// How the graph is rendered: the sites, their policies and the page limits.
pub(crate) struct Ctx<'a> {
    pub sites: &'a Sites,
    pub shape: &'a Shape,
}

impl Ctx<'_> {
    fn policy(&self, site: i64) -> Policy {
        self.shape.hreflang.get(&site).copied().unwrap_or_default()
    }
}

/// What [`apply`] decided.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// For each href of the batch that is stored: the alternates its record must be stored with (empty: none).
    /// Empty when the batch touched no cluster: every entry is stored as sent.
    pub render: HashMap<String, Vec<Alternate>>,
    /// Stored records outside the batch whose rendering changes, by site: each as stored, with what it must render.
    pub others: BTreeMap<i64, Vec<(StoredUrl, Vec<Alternate>)>>,
}

/// The hrefs a batch's probe reads: its locs and every href their declarations name.
pub(crate) fn wanted(given: &[Given]) -> Vec<&str> {
    let mut wanted: BTreeSet<&str> = given.iter().map(|g| g.href.as_str()).collect();
    for g in given {
        wanted.extend(g.declared.iter().flatten().map(|a| a.href.as_str()));
    }
    wanted.into_iter().collect()
}

/// The one probe of a write: the nodes of [`wanted`].
pub(crate) async fn probe<DB: Writes>(conn: &mut DB::Connection, given: &[Given]) -> Result<Vec<NodeRow>> {
    DB::hreflang_nodes(conn, &wanted(given)).await
}

/// What one href is while a step runs: the site its record is stored in (`None`: not stored) and its declaration.
#[derive(Clone, Debug, Default)]
struct State {
    site: Option<i64>,
    declared: Option<Vec<Alternate>>,
}

/// Applies `given` (later entries of an href win) to the graph in `conn`'s transaction, with the clusters `keys`
/// besides (a re-render), and says what every stored member touched must render. `batch`: the entries the caller
/// plans itself (by loc), whose renderings come back in [`Outcome::render`]; every other stored member whose
/// rendering changes comes back in [`Outcome::others`]. `probed`: the nodes of [`wanted`], when already read.
/// `prefetched`: stored records already read (a build's).
pub(crate) async fn apply<DB: Writes>(
    conn: &mut DB::Connection,
    ctx: &Ctx<'_>,
    given: &[Given],
    batch: &HashMap<&str, &Entry>,
    keys: &[String],
    probed: Option<Vec<NodeRow>>,
    prefetched: Vec<SiteUrl>,
) -> Result<Outcome> {
    let rows = match probed {
        Some(rows) => rows,
        None => probe::<DB>(conn, given).await?,
    };
    if rows.is_empty() && keys.is_empty() && given.iter().all(|g| g.declared.is_none()) {
        return Ok(Outcome::default());
    }
    // The graph around the batch: its nodes, their whole clusters, and the records of the hrefs named that are no
    // node (a stored record's declaration names more hrefs only while its site is not built: followed until none
    // is left).
    let mut checked: BTreeSet<String> = wanted(given).into_iter().map(str::to_owned).collect();
    let mut nodes: BTreeMap<String, NodeRow> = BTreeMap::new();
    let mut fetched: HashMap<String, Option<SiteUrl>> = HashMap::new();
    for u in prefetched {
        fetched.insert(u.url.loc.clone(), Some(u));
    }
    let given_by: BTreeMap<&str, &Given> = given.iter().map(|g| (g.href.as_str(), g)).collect();
    let mut loaded: BTreeSet<String> = BTreeSet::new();
    let mut pending: BTreeSet<String> = keys.iter().cloned().collect();
    let mut fresh = rows;
    loop {
        for row in fresh.drain(..) {
            pending.insert(row.1.clone());
            nodes.insert(row.0.clone(), row);
        }
        let new_keys: Vec<&str> = pending.iter().filter(|k| !loaded.contains(*k)).map(String::as_str).collect();
        if !new_keys.is_empty() {
            for row in DB::hreflang_cluster_nodes(conn, &new_keys).await? {
                nodes.insert(row.0.clone(), row);
            }
            let new_keys: Vec<String> = new_keys.into_iter().map(str::to_owned).collect();
            loaded.extend(new_keys);
        }
        // Every href named (by a given declaration, a node's, a record's read) that is not known yet.
        let mut named: BTreeSet<String> = BTreeSet::new();
        for g in given {
            named.extend(g.declared.iter().flatten().map(|a| a.href.clone()));
        }
        for (href, row) in nodes.iter().filter(|(h, _)| !given_by.contains_key(h.as_str())) {
            named.extend(read_declared(href, row.3.as_deref()).into_iter().flatten().map(|a| a.href));
        }
        for u in fetched.values().flatten().filter(|u| !given_by.contains_key(u.url.loc.as_str())) {
            named.extend(alternates_of(&u.url.fields).iter().map(|a| a.href.clone()));
        }
        let unknown: Vec<String> = named
            .into_iter()
            .filter(|h| !nodes.contains_key(h) && !given_by.contains_key(h.as_str()) && !fetched.contains_key(h))
            .collect();
        if unknown.is_empty() {
            break;
        }
        // A node not probed yet (named by a record read): its cluster first.
        let unchecked: Vec<&str> = unknown.iter().filter(|h| !checked.contains(*h)).map(String::as_str).collect();
        if !unchecked.is_empty() {
            fresh = DB::hreflang_nodes(conn, &unchecked).await?;
            let unchecked: Vec<String> = unchecked.into_iter().map(str::to_owned).collect();
            checked.extend(unchecked);
            if !fresh.is_empty() {
                continue;
            }
        }
        let unknown: Vec<&str> = unknown.iter().map(String::as_str).collect();
        let mut found: HashMap<String, SiteUrl> =
            DB::lookup(conn, &unknown).await?.into_iter().map(|u| (u.url.loc.clone(), u)).collect();
        for href in unknown {
            fetched.insert(href.to_owned(), found.remove(href));
        }
    }
    let states = states(&nodes, &fetched, &given_by);
    let members: Vec<Member> = states
        .iter()
        .map(|(href, st)| Member {
            href: href.clone(),
            site: ctx.sites.for_loc(href).map(|s| s.id),
            stored: st.site.is_some(),
            declared: st.declared.clone().filter(|_| st.site.is_some()),
        })
        .collect();
    let clusters = core::clusters(members);
    let policy_of = |site: i64| ctx.policy(site);
    let mut new_rows: BTreeMap<String, NodeRow> = BTreeMap::new();
    let mut problems: Vec<(String, Problem)> = Vec::new();
    let mut complete: HashMap<String, Option<Vec<Alternate>>> = HashMap::new();
    for cluster in &clusters {
        let resolution = core::resolve(cluster, policy_of);
        for m in cluster {
            let st = &states[&m.href];
            let declared = m.declared.as_ref().map(|d| serde_json::to_string(d).expect("alternates serialize"));
            new_rows.insert(m.href.clone(), (m.href.clone(), resolution.key.clone(), st.site, declared));
        }
        problems.extend(resolution.problems.into_iter().map(|p| (resolution.key.clone(), p)));
        complete.extend(resolution.complete);
    }

    // What every stored member touched renders.
    let mut outcome = Outcome::default();
    let mut missing: Vec<&str> = Vec::new();
    let mut targets: Vec<(&str, i64, Vec<Alternate>)> = Vec::new();
    for (href, st) in &states {
        let Some(site) = st.site else { continue };
        let declared = st.declared.clone().unwrap_or_default();
        let policy = ctx.policy(site);
        let target = match (policy, complete.get(href)) {
            (Policy::Complete, Some(rendered)) => rendered.clone().unwrap_or_default(),
            _ => declared.clone(),
        };
        let in_batch = batch.get(href.as_str());
        if policy == Policy::AsSent && in_batch.is_none() && keys.is_empty() {
            // Its stored alternates are its declaration (the invariant): nothing to do. Not so while a site's
            // clusters are re-rendered after a change of policy (`keys`): it may render a complete set still.
            continue;
        }
        if in_batch.is_none() && !matches!(fetched.get(href), Some(Some(_))) {
            missing.push(href);
        }
        targets.push((href, site, target));
    }
    if !missing.is_empty() {
        for u in DB::lookup(conn, &missing).await? {
            fetched.insert(u.url.loc.clone(), Some(u));
        }
    }
    for (href, site, target) in targets {
        let fields = match batch.get(href) {
            Some(e) => Fields::from(*e),
            None => match fetched.get(href) {
                Some(Some(u)) => u.url.fields.clone(),
                _ => continue,
            },
        };
        let declared = states[href].declared.clone().unwrap_or_default();
        let mut target = target;
        if target != declared {
            let size = url_size(href, &with_alternates(&fields, target.clone()));
            if target.len() > MAX_SET || !ctx.shape.limits.fits_bytes(size) {
                let key = new_rows.get(href).map(|r| r.1.clone()).unwrap_or_default();
                problems.push((key, too_large(href, target.len(), size, ctx)));
                target = declared;
            }
        }
        if batch.contains_key(href) {
            outcome.render.insert(href.to_owned(), target);
        } else if let Some(Some(u)) = fetched.get(href)
            && alternates_of(&u.url.fields) != &target[..]
        {
            outcome.others.entry(site).or_default().push((u.url.clone(), target));
        }
    }

    // The nodes and problems that changed.
    let put: Vec<NodeRow> = new_rows.values().filter(|r| nodes.get(&r.0) != Some(*r)).cloned().collect();
    let dropped: Vec<&str> = nodes.keys().filter(|h| !new_rows.contains_key(*h)).map(String::as_str).collect();
    DB::hreflang_put_nodes(conn, &put).await?;
    DB::hreflang_drop_nodes(conn, &dropped).await?;
    let old_keys: Vec<&str> = loaded.iter().map(String::as_str).collect();
    let old: Vec<ProblemRow> =
        if old_keys.is_empty() { Vec::new() } else { DB::hreflang_cluster_problems(conn, &old_keys).await? };
    let mut new: BTreeMap<(i64, String, String, String), ProblemRow> = BTreeMap::new();
    for (key, p) in problems {
        let site =
            states.get(&p.listed_by).and_then(|st| st.site).or_else(|| ctx.sites.for_loc(&p.listed_by).map(|s| s.id));
        let Some(site) = site else { continue };
        let row = (site, p.href, p.kind.as_str().to_owned(), p.hreflang, key, p.message);
        new.insert((row.0, row.1.clone(), row.2.clone(), row.3.clone()), row);
    }
    let old_by: BTreeMap<(i64, String, String, String), ProblemRow> =
        old.into_iter().map(|r| ((r.0, r.1.clone(), r.2.clone(), r.3.clone()), r)).collect();
    let put: Vec<ProblemRow> = new.iter().filter(|(k, r)| old_by.get(*k) != Some(*r)).map(|(_, r)| r.clone()).collect();
    let gone: Vec<ProblemRow> = old_by.iter().filter(|(k, _)| !new.contains_key(*k)).map(|(_, r)| r.clone()).collect();
    DB::hreflang_drop_problems(conn, &gone).await?;
    DB::hreflang_put_problems(conn, &put).await?;
    Ok(outcome)
}

/// What each href known to a step is: a given one as given, a node as stored, a record read as stored (its stored
/// alternates are its declaration), any other not stored.
fn states(
    nodes: &BTreeMap<String, NodeRow>,
    fetched: &HashMap<String, Option<SiteUrl>>,
    given: &BTreeMap<&str, &Given>,
) -> BTreeMap<String, State> {
    let mut states: BTreeMap<String, State> = BTreeMap::new();
    let mut named: BTreeSet<String> = BTreeSet::new();
    for (href, row) in nodes {
        let declared = read_declared(href, row.3.as_deref()).filter(|d| !d.is_empty());
        states.insert(href.clone(), State { site: row.2, declared });
    }
    for (href, record) in fetched {
        if nodes.contains_key(href) {
            continue;
        }
        let state = match record {
            Some(u) => State { site: Some(u.site), declared: declaration(u.url.fields.ext.as_deref()) },
            None => State::default(),
        };
        states.insert(href.clone(), state);
    }
    for (href, g) in given {
        states.insert((*href).to_owned(), State { site: g.site, declared: g.declared.clone() });
    }
    for st in states.values() {
        named.extend(st.declared.iter().flatten().filter(|_| st.site.is_some()).map(|a| a.href.clone()));
    }
    for href in named {
        states.entry(href).or_default();
    }
    states
}

/// `fields` rendering `alternates` instead of their own (no extensions left: none, never empty ones).
pub(crate) fn with_alternates(fields: &Fields, alternates: Vec<Alternate>) -> Fields {
    let mut ext = fields.ext.as_deref().cloned().unwrap_or_default();
    ext.alternates = alternates;
    Fields { ext: (!ext.is_empty()).then(|| Box::new(ext)), ..fields.clone() }
}

/// `entry` rendering `alternates` instead of its own, or `None` when it renders them already.
pub(crate) fn rendering(entry: &Entry, alternates: &[Alternate]) -> Option<Entry> {
    let own = entry.ext.as_deref().map_or(&[][..], |x| &x.alternates[..]);
    if own == alternates {
        return None;
    }
    let mut ext = entry.ext.as_deref().cloned().unwrap_or_default();
    ext.alternates = alternates.to_vec();
    Some(Entry { ext: (!ext.is_empty()).then(|| Box::new(ext)), ..entry.clone() })
}

/// The `too_large` problem of a member whose completed `<url>` would not fit an empty page.
fn too_large(href: &str, links: usize, size: i64, ctx: &Ctx<'_>) -> Problem {
    let message = if links > MAX_SET {
        format!(
            "Its cluster's complete set has {links} links, more than the {MAX_SET} one entry may list: this URL lists \
             the alternates it was sent with. Split the cluster into smaller ones."
        )
    } else {
        format!(
            "With its cluster's complete set of {links} links its <url> would take {size} bytes, more than a page \
             holds (page_max_bytes {}): this URL lists the alternates it was sent with. Send fewer images or videos \
             with it, or raise page_max_bytes.",
            ctx.shape.limits.max_bytes
        )
    };
    Problem {
        kind: ProblemKind::TooLarge,
        href: href.to_owned(),
        hreflang: String::new(),
        listed_by: href.to_owned(),
        message,
    }
}

/// Any loc: a stored record's was checked when it was written.
struct Stored;

impl LocScope for Stored {
    fn admits(&self, _: &str) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// A stored record as an entry rendering `alternates`, for [`placement::plan_upsert`]; `None` (logged) when a
/// stored field does not read back (changed by hand).
fn entry_of(url: &StoredUrl, alternates: &[Alternate]) -> Option<Entry> {
    let f = &url.fields;
    let read = || -> std::result::Result<Entry, String> {
        Ok(Entry {
            loc: Loc::parse(&url.loc, &Stored)?,
            lastmod: f.lastmod.as_deref().map(LastMod::parse).transpose()?,
            changefreq: f.changefreq.as_deref().map(ChangeFreq::parse).transpose()?,
            priority: f.priority,
            ext: with_alternates(f, alternates.to_vec()).ext,
            section: None,
        })
    };
    read()
        .map_err(|e| tracing::error!(target: LOG_TARGET, loc = %url.loc, error = %e, "a stored record does not read back; its hreflang links are left as they are"))
        .ok()
        .filter(|e| e.loc.as_str() == url.loc)
}

/// Re-plans the records of `site` whose rendering changed (`others`, each with what it must render) as updates in
/// their own section, on the site's pages as the write left them so far, and writes them; the pages changed. An
/// entry that outgrows its page moves, as any grown entry does. Nothing is counted or queued for them.
pub(crate) async fn plan_others<DB: Writes>(
    conn: &mut DB::Connection,
    site: i64,
    others: Vec<(StoredUrl, Vec<Alternate>)>,
    shape: &Shape,
    now: i64,
) -> Result<Vec<PageState>> {
    let mut entries = Vec::with_capacity(others.len());
    let mut existing = Vec::with_capacity(others.len());
    let mut sections: HashMap<String, i64> = HashMap::with_capacity(others.len());
    for (url, alternates) in others {
        if let Some(entry) = entry_of(&url, &alternates) {
            sections.insert(url.loc.clone(), section_of(url.page_id));
            entries.push(entry);
            existing.push(url);
        }
    }
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let (layout, _) = super::write::layout::<DB>(conn, site, &[], shape).await?;
    let pages = DB::pages_in(conn, site).await?;
    let section = |e: &Entry| sections.get(e.loc.as_str()).copied().unwrap_or(0);
    let plan = placement::plan_upsert(&entries, section, existing, pages, layout, now)?;
    DB::write_pages(conn, site, &plan.pages).await?;
    DB::write_urls(conn, site, &plan.updates, &plan.inserts, &plan.stamps()).await?;
    Ok(plan.pages)
}

/// The tasks of open, under the write lock (each batch a transaction of its own, from `begin`): every configured
/// site whose clusters are not built (`sites.hreflang` NULL: a new site, or a database written before migration
/// 0018) is built from its stored records, then every site whose stored rendering follows another policy than the
/// configured one has its clusters re-rendered; then its policy is stored. Idempotent: a run cut short leaves the
/// policy unstored, and the next run finishes (what was done is found done: no row changes twice). Under `as_sent`
/// a build changes no record and no page.
pub(crate) async fn open_tasks<DB, F, Fut>(begin: F, sites: &Sites, shape: &Shape) -> Result<()>
where
    DB: Writes,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Transaction<'static, DB>>>,
{
    let ctx = Ctx { sites, shape };
    // Builds first, every site's: a re-render resolves whole clusters, which may reach into any site.
    let mut stored: Vec<(i64, Option<String>)> = Vec::new();
    for site in sites.iter() {
        let mut tx = begin().await?;
        let policy = DB::hreflang_policy(&mut tx, site.id).await?;
        tx.commit().await?;
        stored.push((site.id, policy));
    }
    for (site, policy) in &stored {
        if policy.is_none() {
            build::<DB, _, _>(&begin, &ctx, *site).await?;
        }
    }
    for (site, policy) in &stored {
        let configured = ctx.policy(*site);
        if policy.as_deref() == Some(configured.as_str()) {
            continue;
        }
        if policy.is_some() {
            rerender::<DB, _, _>(&begin, &ctx, *site).await?;
        }
        let mut tx = begin().await?;
        DB::set_hreflang_policy(&mut tx, *site, configured.as_str()).await?;
        tx.commit().await?;
        tracing::info!(target: LOG_TARGET, site, policy = configured.as_str(), built = policy.is_none(), "hreflang clusters up to date");
    }
    Ok(())
}

/// Builds `site`'s clusters from its records with alternates, in id order, [`BUILD_BATCH`] a transaction. A record
/// that is a node of its site already was built (by a batch before, or as a name of one): it is left alone.
async fn build<DB, F, Fut>(begin: &F, ctx: &Ctx<'_>, site: i64) -> Result<()>
where
    DB: Writes,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Transaction<'static, DB>>>,
{
    let mut after = 0;
    loop {
        let mut tx = begin().await?;
        let now = DB::now(&mut tx).await?;
        let urls = DB::declaring_after(&mut tx, site, after, BUILD_BATCH).await?;
        let Some(last) = urls.last() else {
            tx.commit().await?;
            return Ok(());
        };
        after = last.id;
        let urls: Vec<StoredUrl> = urls.into_iter().filter(|u| !alternates_of(&u.fields).is_empty()).collect();
        let locs: Vec<&str> = urls.iter().map(|u| u.loc.as_str()).collect();
        let built: BTreeSet<String> =
            DB::hreflang_nodes(&mut tx, &locs).await?.into_iter().filter(|r| r.2.is_some()).map(|r| r.0).collect();
        let urls: Vec<StoredUrl> = urls.into_iter().filter(|u| !built.contains(&u.loc)).collect();
        let given: Vec<Given> = urls
            .iter()
            .map(|u| Given { href: u.loc.clone(), site: Some(site), declared: declaration(u.fields.ext.as_deref()) })
            .collect();
        if !given.is_empty() {
            let prefetched = urls.into_iter().map(|url| SiteUrl { site, url }).collect();
            let outcome = apply::<DB>(&mut tx, ctx, &given, &HashMap::new(), &[], None, prefetched).await?;
            for (site, others) in outcome.others {
                plan_others::<DB>(&mut tx, site, others, ctx.shape, now).await?;
            }
        }
        tx.commit().await?;
    }
}

/// Re-renders every cluster with a stored member in `site`, in key order, [`RERENDER_BATCH`] a transaction.
async fn rerender<DB, F, Fut>(begin: &F, ctx: &Ctx<'_>, site: i64) -> Result<()>
where
    DB: Writes,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Transaction<'static, DB>>>,
{
    let mut after = String::new();
    loop {
        let mut tx = begin().await?;
        let now = DB::now(&mut tx).await?;
        let keys = DB::site_clusters_after(&mut tx, site, &after, RERENDER_BATCH).await?;
        let Some(last) = keys.last() else {
            tx.commit().await?;
            return Ok(());
        };
        after = last.clone();
        let outcome = apply::<DB>(&mut tx, ctx, &[], &HashMap::new(), &keys, Some(Vec::new()), Vec::new()).await?;
        for (site, others) in outcome.others {
            plan_others::<DB>(&mut tx, site, others, ctx.shape, now).await?;
        }
        tx.commit().await?;
    }
}
