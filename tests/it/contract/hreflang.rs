//! hreflang clusters in the store (migration 0018): what writes and deletes make of the graph, what each member
//! renders under each policy, the problems and their reads, and the tasks of open (build, re-render on a change of
//! policy). Each test writes through a store of its own, opened on the test app's database with the policy it needs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use sitemapd::domain::Entry;
use sitemapd::hreflang::Policy;
use sitemapd::page::PageState;
use sitemapd::store::{ProblemKey, Store, StoredProblem};

use super::{assert_consistent, entry, loc, public};
use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, options};

fn url(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

/// An entry at `path` declaring `alternates` (hreflang, path).
fn declaring(path: &str, alternates: &[(&str, &str)]) -> Entry {
    let alternates: Vec<Value> = alternates.iter().map(|(l, p)| json!({"hreflang": l, "href": url(p)})).collect();
    Entry::from_json(json!({"loc": url(path), "alternates": alternates}), &public()).unwrap()
}

/// The three pages of a cluster: `a` (en) names `b` (de), `b` names `c` (fr), `c` declares nothing.
fn three() -> Vec<Entry> {
    vec![declaring("a", &[("en", "a"), ("de", "b")]), declaring("b", &[("de", "b"), ("fr", "c")]), entry("c")]
}

/// The complete set of [`three`].
const SET: [(&str, &str); 3] = [("de", "b"), ("en", "a"), ("fr", "c")];

/// A store on `app`'s database whose site renders by `policy` (`None`: the default, `as_sent`).
async fn open(app: &TestApp, policy: Option<Policy>) -> Arc<dyn Store> {
    let mut o = options(&app.config);
    o.serving = false;
    if let Some(policy) = policy {
        let site = app.store.sites().iter().next().unwrap().name.clone();
        o.hreflang = BTreeMap::from([(site, policy)]);
    }
    sitemapd::store::open(&o).await.unwrap()
}

async fn app(b: Backend) -> TestApp {
    TestApp::spawn(b, &[]).await
}

/// What `path`'s record renders: its stored alternates as (hreflang, path).
async fn rendered(store: &dyn Store, path: &str) -> Vec<(String, String)> {
    let found = store.find(&loc(path)).await.unwrap().expect("stored").url;
    let alternates = found.fields.ext.map(|x| x.alternates).unwrap_or_default();
    alternates.into_iter().map(|a| (a.hreflang, a.href.strip_prefix(&url("")).unwrap().to_owned())).collect()
}

fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(l, p)| ((*l).to_owned(), (*p).to_owned())).collect()
}

/// Every problem of site 1, read at once.
async fn problems(store: &dyn Store) -> Vec<StoredProblem> {
    store.hreflang_problems(1, None, 1000).await.unwrap()
}

/// (kind, path, hreflang) of each problem.
fn kinds(problems: &[StoredProblem]) -> Vec<(String, String, String)> {
    let path = |h: &str| h.strip_prefix(&url("")).unwrap_or(h).to_owned();
    problems.iter().map(|p| (p.kind.clone(), path(&p.href), p.hreflang.clone())).collect()
}

/// Each record's page, size and stored extensions (its bytes in its page), by loc.
async fn records(store: &dyn Store) -> BTreeMap<String, (i64, i64, Option<String>)> {
    let mut out = BTreeMap::new();
    let mut after = 0;
    loop {
        let batch = store.list_after(None, after, 100).await.unwrap();
        let Some(last) = batch.last() else { return out };
        after = last.url.id;
        for u in batch {
            out.insert(u.url.loc.clone(), (u.url.page_id, u.url.size, u.url.fields.ext_json()));
        }
    }
}

async fn pages(store: &dyn Store) -> Vec<PageState> {
    store.pages(1).await.unwrap()
}

/// Runs `sql` on the app's database.
async fn exec(app: &TestApp, sql: &str) {
    use sqlx::{AssertSqlSafe, Connection};
    let url = &app.config.database.url;
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
    }
}

/// Under `complete`, a cluster is the same whatever order its members were written in (in one batch or one by
/// one): every member renders the complete set, the one that declares nothing included, and the problems and the
/// cluster read the same.
async fn clusters_are_the_same_whatever_the_order_of_writes(b: Backend) {
    let orders: [&[usize]; 4] = [&[0, 1, 2], &[2, 1, 0], &[1, 0, 2], &[2, 0, 1]];
    let mut seen = Vec::new();
    for (n, order) in orders.iter().enumerate() {
        let app = app(b).await;
        let store = open(&app, Some(Policy::Complete)).await;
        if n == 0 {
            store.upsert(&three()).await.unwrap();
        } else {
            for &i in *order {
                store.upsert(std::slice::from_ref(&three()[i])).await.unwrap();
            }
        }
        for path in ["a", "b", "c"] {
            assert_eq!(rendered(&*store, path).await, set(&SET), "{path} in order {order:?}");
        }
        let cluster = store.hreflang_cluster(&url("c")).await.unwrap().expect("c is in the cluster");
        assert_eq!(cluster.key, url("a"));
        assert_eq!(cluster.members.iter().map(|m| m.href.clone()).collect::<Vec<_>>(), [url("a"), url("b"), url("c")]);
        assert!(cluster.members.iter().all(|m| m.stored && m.site_id == Some(1)));
        assert_eq!(cluster.members[2].declared, None, "c declares nothing");
        let set_read: Vec<(String, String)> =
            cluster.set.iter().map(|a| (a.hreflang.clone(), a.href.clone())).collect();
        assert_eq!(set_read, SET.map(|(l, p)| (l.to_owned(), url(p))));
        assert_consistent(&*store, 50_000, 52_428_800).await;
        seen.push((kinds(&problems(&*store).await), cluster));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:#?}");
}

/// A deleted member leaves the others' sets (rule 5: under the site and not stored, never rendered), a member no
/// declaration links any more leaves the cluster and renders none; written again, it is back in every set.
async fn a_delete_removes_the_member_from_the_others(b: Backend) {
    let app = app(b).await;
    let store = open(&app, Some(Policy::Complete)).await;
    store.upsert(&three()).await.unwrap();
    let written = store.delete(&[loc("b")]).await.unwrap();
    assert_eq!(written.counts.deleted, 1);
    assert_eq!(written.changes_in(1).locs, [url("b")], "the re-rendered members are not queued");
    assert_eq!(rendered(&*store, "a").await, set(&[("en", "a")]));
    assert_eq!(rendered(&*store, "c").await, set(&[]), "no declaration links c any more");
    assert_eq!(store.hreflang_cluster(&url("c")).await.unwrap(), None);
    let cluster = store.hreflang_cluster(&url("b")).await.unwrap().expect("a still names b");
    assert!(!cluster.members.iter().find(|m| m.href == url("b")).unwrap().stored);
    assert_eq!(kinds(&problems(&*store).await), [("not_stored".to_owned(), "b".to_owned(), "de".to_owned())]);
    assert_consistent(&*store, 50_000, 52_428_800).await;

    let written = store.upsert(std::slice::from_ref(&three()[1])).await.unwrap();
    assert_eq!(written.counts.created, 1);
    assert_eq!(written.changes_in(1).locs, [url("b")], "only the batch's locs are queued");
    for path in ["a", "b", "c"] {
        assert_eq!(rendered(&*store, path).await, set(&SET), "{path}");
    }
    assert!(problems(&*store).await.is_empty());
    store.delete(&[loc("a"), loc("b"), loc("c")]).await.unwrap();
    assert_eq!(store.hreflang_summary(1).await.unwrap().members, 0, "no node is left");
    assert_eq!(store.hreflang_cluster(&url("b")).await.unwrap(), None);
}

/// Under `complete`, sending the same entries again (their declarations, not what they render) changes nothing:
/// every record is unchanged, no page version moves, nothing is queued.
async fn an_identical_resend_changes_nothing(b: Backend) {
    let app = app(b).await;
    let store = open(&app, Some(Policy::Complete)).await;
    store.upsert(&three()).await.unwrap();
    let (before, records_before) = (pages(&*store).await, records(&*store).await);
    let written = store.upsert(&three()).await.unwrap();
    assert_eq!((written.counts.unchanged, written.changes.len()), (3, 0), "{written:?}");
    for e in three() {
        let written = store.upsert(std::slice::from_ref(&e)).await.unwrap();
        assert_eq!((written.counts.unchanged, written.changes.len()), (1, 0), "{}", e.loc.as_str());
    }
    assert_eq!(pages(&*store).await, before);
    assert_eq!(records(&*store).await, records_before);
}

/// Under `as_sent` (the default) every record stores what it was sent, byte for byte, while the clusters and their
/// problems are kept all the same (so that they can be read before switching).
async fn as_sent_stores_what_was_sent_and_keeps_the_clusters(b: Backend) {
    let app = app(b).await;
    let store = open(&app, None).await;
    let written = store.upsert(&three()).await.unwrap();
    assert_eq!(written.counts.created, 3);
    for e in three() {
        let found = store.find(&e.loc).await.unwrap().unwrap().url;
        assert_eq!(found.fields.ext, e.ext, "{} as sent", e.loc.as_str());
    }
    let cluster = store.hreflang_cluster(&url("a")).await.unwrap().expect("the cluster is kept");
    assert_eq!(cluster.set.len(), 3);
    // a names b, and b, which declares, does not name a.
    assert_eq!(kinds(&problems(&*store).await), [("missing_return".to_owned(), "b".to_owned(), String::new())]);
    assert_eq!(problems(&*store).await[0].cluster, url("a"));
}

/// Problems are read by site in (href, kind, hreflang) order, by keyset pages of any size; the summary counts the
/// site's clusters, its stored members and its problems by kind, every kind listed.
async fn problems_are_read_by_keyset(b: Backend) {
    let app = app(b).await;
    let store = open(&app, Some(Policy::Complete)).await;
    let mut batch = vec![
        declaring("p", &[("en", "p"), ("de", "n1"), ("fr", "n2"), ("it", "n3"), ("es-419", "q")]),
        declaring("q", &[("en", "q"), ("de", "q")]),
    ];
    batch.extend(three());
    store.upsert(&batch).await.unwrap();
    let all = problems(&*store).await;
    assert!(all.len() >= 5, "{all:#?}");
    let keys: Vec<ProblemKey> = all.iter().map(StoredProblem::key).collect();
    let mut sorted = keys.clone();
    sorted.sort_by(|x, y| (&x.href, &x.kind, &x.hreflang).cmp(&(&y.href, &y.kind, &y.hreflang)));
    assert_eq!(keys, sorted, "in keyset order");
    for size in [1, 2, 3] {
        let (mut paged, mut after) = (Vec::new(), None::<ProblemKey>);
        loop {
            let page = store.hreflang_problems(1, after.as_ref(), size).await.unwrap();
            assert!(page.len() <= size as usize);
            let Some(last) = page.last() else { break };
            after = Some(last.key());
            paged.extend(page);
        }
        assert_eq!(paged, all, "pages of {size}");
    }
    let summary = store.hreflang_summary(1).await.unwrap();
    assert_eq!((summary.clusters, summary.members), (2, 5), "{summary:?}");
    assert_eq!(summary.problems["not_stored"], 3);
    assert_eq!(summary.problems.values().sum::<u64>(), all.len() as u64);
    assert_eq!(summary.problems.len(), 7, "every kind, 0 included: {summary:?}");
    assert_eq!(summary.problems["cross_site"], 0);
    assert!(all.iter().all(|p| p.cluster == url("a") || p.cluster == url("n1")), "{all:#?}");
}

/// A change of policy at open re-renders the site's clusters (their pages change), and switching back restores
/// every record's bytes as sent.
async fn a_policy_switch_at_open_rerenders_and_back_restores_the_bytes(b: Backend) {
    let app = app(b).await;
    let store = open(&app, None).await;
    let mut batch = three();
    batch.extend((0..20).map(|i| entry(&format!("plain{i}"))));
    store.upsert(&batch).await.unwrap();
    let (as_sent, pages_as_sent, problems_as_sent) =
        (records(&*store).await, pages(&*store).await, problems(&*store).await);
    store.close().await;

    let store = open(&app, Some(Policy::Complete)).await;
    for path in ["a", "b", "c"] {
        assert_eq!(rendered(&*store, path).await, set(&SET), "{path} re-rendered at open");
    }
    let complete = pages(&*store).await;
    assert!(complete.iter().zip(&pages_as_sent).any(|(n, o)| n.version > o.version), "the pages changed");
    assert!(problems(&*store).await.is_empty(), "complete renders the return links: {:?}", problems(&*store).await);
    assert_consistent(&*store, 50_000, 52_428_800).await;
    store.close().await;

    let store = open(&app, Some(Policy::Complete)).await;
    assert_eq!(pages(&*store).await, complete, "the same policy again: nothing to do");
    store.close().await;

    let store = open(&app, Some(Policy::AsSent)).await;
    assert_eq!(records(&*store).await, as_sent, "every record as sent, byte for byte");
    assert_eq!(problems(&*store).await, problems_as_sent);
    assert_consistent(&*store, 50_000, 52_428_800).await;
}

/// A database written without the clusters (an upgrade: the tables empty, `sites.hreflang` NULL) has them built at
/// open: under `as_sent` the same clusters and problems as the writes made, and no record or page changed; under
/// `complete`, the members re-rendered. A build already done (the policy NULL again, the nodes kept) does nothing.
async fn clusters_are_built_at_open(b: Backend) {
    let app = app(b).await;
    let store = open(&app, None).await;
    let mut batch = three();
    batch.push(declaring("x", &[("en", "x"), ("de", "y")]));
    batch.push(declaring("y", &[("de", "y"), ("en", "x"), ("fr", "z")]));
    store.upsert(&batch).await.unwrap();
    let (made, records_before, pages_before) = (problems(&*store).await, records(&*store).await, pages(&*store).await);
    let clusters = [store.hreflang_cluster(&url("c")).await.unwrap(), store.hreflang_cluster(&url("z")).await.unwrap()];
    store.close().await;
    let wipe = "DELETE FROM hreflang_nodes; DELETE FROM hreflang_problems; UPDATE sites SET hreflang = NULL";

    exec(&app, wipe).await;
    let store = open(&app, None).await;
    assert_eq!(problems(&*store).await, made);
    assert_eq!(
        [store.hreflang_cluster(&url("c")).await.unwrap(), store.hreflang_cluster(&url("z")).await.unwrap()],
        clusters
    );
    assert_eq!(records(&*store).await, records_before, "as_sent: no record changed");
    assert_eq!(pages(&*store).await, pages_before, "as_sent: no page changed");
    store.close().await;

    exec(&app, wipe).await;
    let store = open(&app, Some(Policy::Complete)).await;
    for path in ["a", "b", "c"] {
        assert_eq!(rendered(&*store, path).await, set(&SET), "{path}");
    }
    assert_eq!(rendered(&*store, "x").await, set(&[("de", "y"), ("en", "x")]), "z is not stored");
    let built = pages(&*store).await;
    store.close().await;

    exec(&app, "UPDATE sites SET hreflang = NULL").await;
    let store = open(&app, Some(Policy::Complete)).await;
    assert_eq!(pages(&*store).await, built, "built already: nothing changes");
    assert_eq!(rendered(&*store, "y").await, set(&[("de", "y"), ("en", "x")]));
}

/// A batch that declares nothing and names no node costs one probe of the nodes' primary key and nothing else:
/// on Postgres the statistics of the tables' indexes say so; on SQLite the probe is a search of the key.
async fn a_batch_without_alternates_costs_one_probe(b: Backend) {
    let app = app(b).await;
    let store = open(&app, Some(Policy::Complete)).await;
    store.upsert(&(0..50).map(|i| entry(&format!("plain{i}"))).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(store.hreflang_summary(1).await.unwrap().members, 0, "nothing was written");
    match b {
        Backend::Sqlite => {
            let plan =
                super::plan_of(b, &app.config.database.url, sitemapd::store::sqlite::HREFLANG_PROBE_SQL, &[0], None);
            let plan = plan.await;
            assert!(plan.contains("SEARCH hreflang_nodes USING") && plan.contains("(href=?)"), "{plan}");
        }
        _ => {
            use sqlx::Connection;
            let url = app.config.database.url.clone();
            let scans = || async {
                let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
                let rows: Vec<(String, i64)> = sqlx::query_as(
                    "SELECT indexrelname::text, idx_scan FROM pg_stat_user_indexes \
                     WHERE relname IN ('hreflang_nodes', 'hreflang_problems') ORDER BY 1",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap();
                (rows.into_iter().collect::<BTreeMap<String, i64>>(), ())
            };
            // The statistics reach the views when the writer's connection reports them (at most seconds later).
            // One probe of the 50 locs: Postgres counts a scan for each value of `= ANY` (before version 17),
            // one for the whole probe after; a second statement would count again.
            crate::support::eventually("the probe is counted", || async {
                scans().await.0.get("hreflang_nodes_pkey").is_some_and(|n| *n > 0)
            })
            .await;
            let (by_index, _) = scans().await;
            assert!((1..=50).contains(&by_index["hreflang_nodes_pkey"]), "one probe: {by_index:?}");
            // (The tables' other scans are left alone: the metrics' counts read them by site.)
            assert_eq!(by_index.get("hreflang_nodes_cluster"), Some(&0), "no cluster read: {by_index:?}");
            assert_eq!(by_index.get("hreflang_problems_cluster"), Some(&0), "no problem read: {by_index:?}");
            // A batch that declares reads its clusters: the statistics see it.
            store.upsert(&three()[..2]).await.unwrap();
            store.upsert(&three()[2..]).await.unwrap();
            crate::support::eventually("the cluster read is counted", || async {
                scans().await.0.get("hreflang_nodes_cluster").is_some_and(|n| *n > 0)
            })
            .await;
        }
    }
    store.upsert(&three()).await.unwrap();
    assert_eq!(store.hreflang_summary(1).await.unwrap().members, 3);
}

/// A cluster may span sites: each member renders by its own site's policy, its problems are listed by its own
/// site, and a change of one site's policy at open re-renders that site's members only.
async fn a_cluster_across_sites_renders_each_member_by_its_own_policy(b: Backend) {
    const SITES: &str = "default=https://www.example.com/, shop=https://shop.example.com/";
    let app = TestApp::spawn(b, &[("SITEMAPD_SITES", SITES)]).await;
    let sites = app.store.sites();
    let shop = sites.by_name("shop").unwrap().id;
    let open_with = |www: Policy, shop: Policy| {
        let mut o = options(&app.config);
        o.serving = false;
        o.hreflang = BTreeMap::from([("default".to_owned(), www), ("shop".to_owned(), shop)]);
        async move { sitemapd::store::open(&o).await.unwrap() }
    };
    let (a, b_) = ("https://www.example.com/a", "https://shop.example.com/b");
    let declare = |loc: &str, alternates: &[(&str, &str)]| {
        let alternates: Vec<Value> = alternates.iter().map(|(l, h)| json!({"hreflang": l, "href": h})).collect();
        Entry::from_json(json!({"loc": loc, "alternates": alternates}), &*sites).unwrap()
    };
    let alternates = |store: Arc<dyn Store>, loc: &'static str| async move {
        let found = store.find(&sitemapd::domain::Loc::parse(loc, &*store.sites()).unwrap()).await.unwrap();
        let ext = found.expect("stored").url.fields.ext.map(|x| x.alternates).unwrap_or_default();
        ext.into_iter().map(|a| (a.hreflang, a.href)).collect::<Vec<_>>()
    };
    let pair = |l: &str, h: &str| (l.to_owned(), h.to_owned());
    let store = open_with(Policy::Complete, Policy::AsSent).await;
    store.upsert(&[declare(a, &[("en", a), ("de", b_)]), declare(b_, &[("de", b_)])]).await.unwrap();
    assert_eq!(alternates(store.clone(), a).await, [pair("de", b_), pair("en", a)]);
    assert_eq!(alternates(store.clone(), b_).await, [pair("de", b_)], "shop is as_sent");
    let listed = |site: i64| {
        let store = store.clone();
        async move {
            let problems = store.hreflang_problems(site, None, 100).await.unwrap();
            problems.into_iter().map(|p| (p.kind, p.href, p.cluster)).collect::<Vec<_>>()
        }
    };
    let key = b_.to_owned();
    assert_eq!(listed(1).await, [("cross_site".to_owned(), a.to_owned(), key.clone())]);
    assert_eq!(
        listed(shop).await,
        [
            ("cross_site".to_owned(), b_.to_owned(), key.clone()),
            ("missing_return".to_owned(), b_.to_owned(), key.clone())
        ]
    );
    assert_eq!(
        (store.hreflang_summary(shop).await.unwrap().clusters, store.hreflang_summary(1).await.unwrap().clusters),
        (1, 1)
    );
    store.close().await;

    let store = open_with(Policy::Complete, Policy::Complete).await;
    assert_eq!(alternates(store.clone(), b_).await, [pair("de", b_), pair("en", a)], "shop re-rendered at open");
    assert_eq!(alternates(store.clone(), a).await, [pair("de", b_), pair("en", a)]);
    let problems = store.hreflang_problems(shop, None, 100).await.unwrap();
    assert_eq!(
        problems.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(),
        ["cross_site"],
        "complete returns the link"
    );
}

/// `sitemapd import` merges a news entry onto what a record declared, not onto the complete set it renders: the
/// declaration stays as sent, and the record renders its set still.
async fn an_import_merges_onto_the_declaration(b: Backend) {
    let app = app(b).await;
    let store = open(&app, Some(Policy::Complete)).await;
    store.upsert(&three()).await.unwrap();
    let news = json!({"publication": {"name": "The Times", "language": "en"}, "publication_date": "2024-05-01",
                      "title": "A"});
    let article = Entry::from_json(json!({"loc": url("a"), "news": news}), &public()).unwrap();
    let written = store.upsert_with(&[article], sitemapd::store::Upsert::Import).await.unwrap();
    assert_eq!(written.counts.updated, 1, "its news is new");
    assert_eq!(rendered(&*store, "a").await, set(&SET));
    let cluster = store.hreflang_cluster(&url("a")).await.unwrap().unwrap();
    let declared = cluster.members.iter().find(|m| m.href == url("a")).unwrap().declared.clone();
    assert_eq!(declared, three()[0].ext.as_ref().map(|x| x.alternates.clone()), "a's declaration as sent");
}

both_backends!(
    clusters_are_the_same_whatever_the_order_of_writes,
    a_delete_removes_the_member_from_the_others,
    an_identical_resend_changes_nothing,
    as_sent_stores_what_was_sent_and_keeps_the_clusters,
    problems_are_read_by_keyset,
    a_policy_switch_at_open_rerenders_and_back_restores_the_bytes,
    clusters_are_built_at_open,
    a_batch_without_alternates_costs_one_probe,
    a_cluster_across_sites_renders_each_member_by_its_own_policy,
    an_import_merges_onto_the_declaration,
);
