//! hreflang clusters (issue 40, docs/hreflang.md) through the real router on both backends: under `complete` every
//! member of a cluster renders the cluster's one set whatever the order of the writes and deletes (a property
//! test against an independent model of the rules), under `as_sent` every entry renders its declaration; each
//! conflict reported by `GET /api/v1/hreflang` with its deterministic winner, the same bytes on SQLite and Postgres;
//! a completed entry that outgrows its page moves, one that outgrows any page keeps its declaration (`too_large`);
//! every page valid against the official schemas and read so by the suite's sitemap readers (sitemapd's own
//! importer, Python's ElementTree); an identical re-send moves no page, a member's change moves only the members'
//! pages.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::http::{Method, StatusCode};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, validate_xsd, xml_texts};

const COMPLETE: (&str, &str) = ("SITEMAPD_HREFLANG", "complete");
const AS_SENT: (&str, &str) = ("SITEMAPD_HREFLANG", "as_sent");

/// One `xhtml:link`: (hreflang, href).
type Link = (String, String);

fn url(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

/// A link of the site: (hreflang, the public URL of `path`).
fn link(hreflang: &str, path: &str) -> Link {
    (hreflang.to_owned(), if path.starts_with("https://") { path.to_owned() } else { url(path) })
}

/// An entry at `path` declaring `alternates` (each (hreflang, path or absolute URL)); none when empty.
fn entry(path: &str, alternates: &[(&str, &str)]) -> Value {
    if alternates.is_empty() {
        return json!({"loc": url(path)});
    }
    let alternates: Vec<Value> = alternates.iter().map(|(l, p)| json!({"hreflang": l, "href": link(l, p).1})).collect();
    json!({"loc": url(path), "alternates": alternates})
}

/// The set `links` as rendered: sorted by hreflang (byte order), as `Extensions.alternates` are.
fn set(links: &[(&str, &str)]) -> Vec<Link> {
    let mut out: Vec<Link> = links.iter().map(|(l, p)| link(l, p)).collect();
    out.sort();
    out
}

async fn put(app: &TestApp, entries: &[Value]) -> Value {
    let r = app.put_json(&Value::Array(entries.to_vec())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    r.json()
}

async fn delete(app: &TestApp, locs: &[String]) {
    let headers = [("content-type", "application/json")];
    let r = app.request(Method::POST, "/api/v1/urls/delete", &headers, Body::from(json!(locs).to_string())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// Each `<url>`'s loc and its `xhtml:link` alternates in document order, read with a real XML parser.
pub(crate) fn alternates_in(xml: &str) -> BTreeMap<String, Vec<Link>> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut out, mut loc, mut links, mut in_loc) = (BTreeMap::new(), String::new(), Vec::new(), false);
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) if e.local_name().as_ref() == "loc" => in_loc = true,
            Event::End(e) if e.local_name().as_ref() == "loc" => in_loc = false,
            Event::Text(t) if in_loc => loc.push_str(&t),
            Event::GeneralRef(r) if in_loc => loc.push_str(match &*r {
                "amp" => "&",
                "apos" => "'",
                "quot" => "\"",
                "lt" => "<",
                "gt" => ">",
                other => panic!("unexpected entity {other}"),
            }),
            Event::Empty(e) if e.local_name().as_ref() == "link" => {
                let attr = |name: &str| {
                    let a =
                        e.try_get_attribute(name).unwrap().unwrap_or_else(|| panic!("an xhtml:link without {name}"));
                    a.normalized_value(quick_xml::XmlVersion::Explicit1_0).unwrap().into_owned()
                };
                assert_eq!(attr("rel"), "alternate");
                links.push((attr("hreflang"), attr("href")));
            }
            Event::End(e) if e.local_name().as_ref() == "url" => {
                let previous = out.insert(std::mem::take(&mut loc), std::mem::take(&mut links));
                assert!(previous.is_none(), "a loc twice in one page");
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

/// Every page of the default site as served now (identity): path → (ETag, body).
async fn pages(app: &TestApp) -> BTreeMap<String, (String, bytes::Bytes)> {
    pages_at(app, "www.example.com").await
}

/// Every page of the site served at `host` (identity): path → (ETag, body).
async fn pages_at(app: &TestApp, host: &str) -> BTreeMap<String, (String, bytes::Bytes)> {
    let index = app.get("/sitemap.xml", &[("host", host)]).await;
    let mut out = BTreeMap::new();
    if index.status == StatusCode::NOT_FOUND {
        return out; // no page: nothing stored
    }
    assert_eq!(index.status, StatusCode::OK, "{host}");
    for loc in xml_texts(&index.text(), "loc") {
        let path = format!("/{}", loc.splitn(4, '/').nth(3).unwrap());
        let r = app.get(&path, &[("host", host)]).await;
        assert_eq!(r.status, StatusCode::OK, "{host}{path}");
        let declared: usize = r.header("content-length").unwrap().parse().unwrap();
        assert_eq!(declared, r.body.len(), "{host}{path}: Content-Length");
        out.insert(path, (r.header("etag").unwrap().to_owned(), r.body));
    }
    out
}

/// Every stored loc's rendered alternates, over all pages; and the page each loc is on.
async fn rendered(app: &TestApp) -> (BTreeMap<String, Vec<Link>>, BTreeMap<String, String>) {
    let (mut links, mut page_of) = (BTreeMap::new(), BTreeMap::new());
    for (path, (_, body)) in pages(app).await {
        for (loc, l) in alternates_in(std::str::from_utf8(&body).unwrap()) {
            page_of.insert(loc.clone(), path.clone());
            assert!(links.insert(loc, l).is_none(), "a loc on two pages");
        }
    }
    (links, page_of)
}

/// `GET /api/v1/hreflang?site=SITE`, every page of problems followed: (the first answer, all problems).
async fn report(app: &TestApp, site: &str) -> (Value, Vec<Value>) {
    let (mut first, mut problems, mut after) = (None, Vec::new(), String::new());
    loop {
        let r = app.get(&format!("/api/v1/hreflang?site={site}&limit=2{after}"), &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let body = r.json();
        problems.extend(body["problems"].as_array().expect("problems").iter().cloned());
        let next = body["next"].as_str().map(str::to_owned);
        first.get_or_insert(body);
        match next {
            Some(cursor) => after = format!("&after={cursor}"),
            None => break,
        }
    }
    (first.unwrap(), problems)
}

/// The problems as (kind, href, hreflang), for comparison.
fn kinds(problems: &[Value]) -> BTreeSet<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_else(|| panic!("not a string: {v}")).to_owned();
    problems.iter().map(|p| (s(&p["kind"]), s(&p["href"]), s(&p["hreflang"]))).collect()
}

fn problem(kind: &str, path: &str, hreflang: &str) -> (String, String, String) {
    (kind.to_owned(), link(hreflang, path).1, hreflang.to_owned())
}

// --- (1) The property: any one-way links, any order of writes and deletes. ---------------------------------------

/// Languages, one per node of a case (distinct: the inputs are free of conflicts).
const LANGS: [&str; 12] = ["de", "en", "es", "fr", "it", "ja", "nl", "pl", "pt", "sv", "tr", "zh-Hant"];
/// Nodes past the stored ones: two hrefs of the site never written (not stored), two on a host no site serves.
const GHOSTS: usize = 2;
const EXTERNALS: usize = 2;

#[derive(Clone, Debug)]
struct Case {
    /// Stored URLs `0..n`; nodes `n..n+GHOSTS` are the site's but never stored, the next `EXTERNALS` external.
    n: usize,
    /// The language of each node.
    langs: Vec<&'static str>,
    /// Per stored URL: whether it declares, the nodes it names besides itself, whether it names node 0 as x-default.
    declares: Vec<bool>,
    names: Vec<Vec<usize>>,
    x_default: Vec<bool>,
    /// Two orders of the declaring writes (each cut into batches of `batch` entries) and the deletes.
    order_a: Vec<usize>,
    order_b: Vec<usize>,
    batch: usize,
    deleted: Vec<usize>,
}

impl Case {
    fn href(&self, node: usize) -> String {
        match node {
            k if k < self.n => url(&format!("h/{k}")),
            k if k < self.n + GHOSTS => url(&format!("ghost/{k}")),
            k => format!("https://example.org/h/{k}"),
        }
    }

    /// The declaration of stored URL `i`: (hreflang, node), sorted by hreflang; empty when it declares none.
    fn declaration(&self, i: usize) -> Vec<(String, usize)> {
        if !self.declares[i] {
            return Vec::new();
        }
        let mut out: BTreeMap<String, usize> = BTreeMap::new();
        out.insert(self.langs[i].to_owned(), i);
        for &j in &self.names[i] {
            out.insert(self.langs[j].to_owned(), j);
        }
        if self.x_default[i] {
            out.insert("x-default".to_owned(), 0);
        }
        out.into_iter().collect()
    }

    fn entry(&self, i: usize) -> Value {
        let alternates: Vec<Value> =
            self.declaration(i).iter().map(|(l, k)| json!({"hreflang": l, "href": self.href(*k)})).collect();
        if alternates.is_empty() {
            json!({"loc": self.href(i)})
        } else {
            json!({"loc": self.href(i), "alternates": alternates})
        }
    }

    fn remaining(&self, i: usize) -> bool {
        i < self.n && !self.deleted.contains(&i)
    }

    /// What each remaining stored URL must render under `complete`, by the rules of docs/hreflang.md computed
    /// plainly: the clusters are the connected components of the declarations still stored; a cluster's set is
    /// every claim in it whose href is stored or external (conflict-free input: one language per URL, one URL per
    /// language); a member renders its cluster's set, a URL in no cluster renders none.
    fn expected_complete(&self) -> BTreeMap<String, Vec<Link>> {
        let nodes = self.n + GHOSTS + EXTERNALS;
        let mut root: Vec<usize> = (0..nodes).collect();
        fn find(root: &mut [usize], k: usize) -> usize {
            if root[k] == k { k } else { find(root, root[k]) }
        }
        let mut in_cluster = vec![false; nodes];
        let declarers: Vec<usize> = (0..self.n).filter(|&i| self.remaining(i) && self.declares[i]).collect();
        for &i in &declarers {
            for (_, k) in self.declaration(i) {
                in_cluster[i] = true;
                in_cluster[k] = true;
                let (a, b) = (find(&mut root, i), find(&mut root, k));
                root[a] = b;
            }
        }
        let mut sets: BTreeMap<usize, BTreeSet<Link>> = BTreeMap::new();
        for &i in &declarers {
            for (lang, k) in self.declaration(i) {
                if self.remaining(k) || k >= self.n + GHOSTS {
                    let r = find(&mut root, i);
                    sets.entry(r).or_default().insert((lang, self.href(k)));
                }
            }
        }
        (0..self.n)
            .filter(|&i| self.remaining(i))
            .map(|i| {
                let links = if in_cluster[i] {
                    let r = find(&mut root, i);
                    let mut links: Vec<Link> = sets[&r].iter().cloned().collect();
                    links.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                    links
                } else {
                    Vec::new()
                };
                (self.href(i), links)
            })
            .collect()
    }

    /// What each remaining stored URL renders under `as_sent`: its declaration, as before the feature.
    fn expected_as_sent(&self) -> BTreeMap<String, Vec<Link>> {
        (0..self.n)
            .filter(|&i| self.remaining(i))
            .map(|i| (self.href(i), self.declaration(i).into_iter().map(|(l, k)| (l, self.href(k))).collect()))
            .collect()
    }
}

fn case() -> impl Strategy<Value = Case> {
    (2usize..=8).prop_flat_map(|n| {
        let nodes = n + GHOSTS + EXTERNALS;
        let all: Vec<usize> = (0..n).collect();
        (
            Just(LANGS.to_vec()).prop_shuffle(),
            prop::collection::vec(prop::bool::weighted(0.8), n),
            prop::collection::vec(prop::collection::vec(0..nodes, 0..4), n),
            prop::collection::vec(prop::bool::weighted(0.25), n),
            Just(all.clone()).prop_shuffle(),
            Just(all).prop_shuffle(),
            1usize..=3,
            prop::collection::vec(prop::bool::weighted(0.3), n),
        )
            .prop_map(move |(langs, declares, names, x_default, order_a, order_b, batch, deletes)| {
                let names = names
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut k)| {
                        k.retain(|&j| j != i);
                        k.sort_unstable();
                        k.dedup();
                        k
                    })
                    .collect();
                let deleted = order_b.iter().copied().filter(|&i| deletes[i]).collect();
                Case { n, langs, declares, names, x_default, order_a, order_b, batch, deleted }
            })
    })
}

/// Runs `case` on a fresh service with `policy`, the declaring writes in `order`: every URL first written plain in
/// one batch (so each has its page and place whatever the order after), then the declarations, then the deletes
/// (backwards after `order_b`).
async fn run_case(backend: Backend, policy: (&str, &str), case: &Case, order: &[usize]) -> TestApp {
    let app = TestApp::spawn(backend, &[policy, ("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    let plain: Vec<Value> = (0..case.n).map(|i| json!({"loc": case.href(i)})).collect();
    put(&app, &plain).await;
    let declaring: Vec<usize> = order.iter().copied().filter(|&i| case.declares[i]).collect();
    for batch in declaring.chunks(case.batch) {
        let entries: Vec<Value> = batch.iter().map(|&i| case.entry(i)).collect();
        put(&app, &entries).await;
    }
    // The deletes in the case's order, or backwards for the other order of writes.
    let mut deleted = case.deleted.clone();
    if order != case.order_a.as_slice() {
        deleted.reverse();
    }
    for batch in deleted.chunks(2) {
        delete(&app, &batch.iter().map(|&i| case.href(i)).collect::<Vec<_>>()).await;
    }
    app
}

fn any_order_renders_each_cluster_whole(backend: Backend) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let config = ProptestConfig { cases: 12, failure_persistence: None, max_shrink_iters: 64, ..Default::default() };
    let mut runner = TestRunner::new(config);
    runner
        .run(&case(), |case| {
            rt.block_on(async {
                let a = run_case(backend, COMPLETE, &case, &case.order_a).await;
                let (links, _) = rendered(&a).await;
                assert_eq!(links, case.expected_complete(), "complete, writes in order a: {case:?}");
                let b = run_case(backend, COMPLETE, &case, &case.order_b).await;
                let (pages_a, pages_b) = (pages(&a).await, pages(&b).await);
                let bodies = |p: &BTreeMap<String, (String, bytes::Bytes)>| {
                    p.iter().map(|(k, (_, body))| (k.clone(), body.clone())).collect::<BTreeMap<_, _>>()
                };
                assert_eq!(bodies(&pages_a), bodies(&pages_b), "another order, other bytes: {case:?}");
                let sent = run_case(backend, AS_SENT, &case, &case.order_a).await;
                let (links, _) = rendered(&sent).await;
                assert_eq!(links, case.expected_as_sent(), "as_sent renders each declaration: {case:?}");
            });
            Ok(())
        })
        .unwrap();
}

#[test]
fn sqlite_any_order_renders_each_cluster_whole() {
    any_order_renders_each_cluster_whole(Backend::Sqlite);
}

#[test]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
fn postgres_any_order_renders_each_cluster_whole() {
    any_order_renders_each_cluster_whole(Backend::Postgres);
}

// --- (2) Conflicts: each kind reported, the winner deterministic, the same bytes on both backends. ---------------

/// One cluster per conflict kind, written under `complete` (PAGE_MAX_URLS=4: the members spread over pages).
fn conflicts() -> Vec<Value> {
    vec![
        // duplicate_language by the number of claims: en-2 is named en by fr too, so it wins over en-1.
        entry("d/en-1", &[("en", "d/en-1"), ("fr", "d/fr")]),
        entry("d/en-2", &[("en", "d/en-2"), ("fr", "d/fr")]),
        entry("d/fr", &[("fr", "d/fr"), ("en", "d/en-2")]),
        // duplicate_language by the self-claim: e/a names itself en, e/b is named en twice but never by itself.
        entry("e/a", &[("en", "e/a"), ("de", "e/x")]),
        entry("e/x", &[("de", "e/x"), ("en", "e/b")]),
        entry("e/y", &[("fr", "e/y"), ("en", "e/b"), ("de", "e/x")]),
        entry("e/b", &[]),
        // x-default: one claim each, the smaller href wins (f/de).
        entry("f/en", &[("en", "f/en"), ("de", "f/de"), ("x-default", "f/en")]),
        entry("f/de", &[("de", "f/de"), ("x-default", "f/de")]),
        // conflicting_language: g/pt is named es by g/en, pt by itself: pt.
        entry("g/en", &[("en", "g/en"), ("es", "g/pt")]),
        entry("g/pt", &[("pt", "g/pt")]),
        // conflicting_language without a self-claim: h/n is de twice, nl once: de.
        entry("h/a", &[("en", "h/a"), ("de", "h/n")]),
        entry("h/b", &[("fr", "h/b"), ("de", "h/n")]),
        entry("h/c", &[("it", "h/c"), ("nl", "h/n")]),
        entry("h/n", &[]),
        // conflicting_language, a tie: i/n is de once and nl once: the smaller code, de.
        entry("i/a", &[("en", "i/a"), ("nl", "i/n")]),
        entry("i/b", &[("fr", "i/b"), ("de", "i/n")]),
        entry("i/n", &[]),
        // invalid_code: es-419 (a UN M.49 region) is dropped; j/mx has no other language.
        entry("j/en", &[("en", "j/en"), ("es-419", "j/mx")]),
        entry("j/mx", &[("es-419", "j/mx"), ("en", "j/en")]),
        // not_stored: k/de is the site's but not stored: left out.
        entry("k/en", &[("en", "k/en"), ("de", "k/de"), ("fr", "https://example.fr/k")]),
    ]
}

/// What `conflicts()` renders under `complete`: loc → links (none for a loser).
fn conflicts_rendered() -> BTreeMap<String, Vec<Link>> {
    let d = set(&[("en", "d/en-2"), ("fr", "d/fr")]);
    let e = set(&[("de", "e/x"), ("en", "e/a"), ("fr", "e/y")]);
    let f = set(&[("de", "f/de"), ("en", "f/en"), ("x-default", "f/de")]);
    let g = set(&[("en", "g/en"), ("pt", "g/pt")]);
    let h = set(&[("de", "h/n"), ("en", "h/a"), ("fr", "h/b"), ("it", "h/c")]);
    let i = set(&[("de", "i/n"), ("en", "i/a"), ("fr", "i/b")]);
    let j = set(&[("en", "j/en")]);
    let k = set(&[("en", "k/en"), ("fr", "https://example.fr/k")]);
    let mut out = BTreeMap::new();
    for (paths, links) in [
        (&["d/en-2", "d/fr"][..], &d),
        (&["e/a", "e/x", "e/y"], &e),
        (&["f/en", "f/de"], &f),
        (&["g/en", "g/pt"], &g),
        (&["h/a", "h/b", "h/c", "h/n"], &h),
        (&["i/a", "i/b", "i/n"], &i),
        (&["j/en"], &j),
        (&["k/en"], &k),
    ] {
        out.extend(paths.iter().map(|p| (url(p), links.clone())));
    }
    for loser in ["d/en-1", "e/b", "j/mx"] {
        out.insert(url(loser), Vec::new());
    }
    out
}

async fn conflicts_app(backend: Backend) -> TestApp {
    let app = TestApp::spawn(backend, &[COMPLETE, ("SITEMAPD_PAGE_MAX_URLS", "4")]).await;
    put(&app, &conflicts()).await;
    app
}

async fn each_conflict_is_reported_with_a_deterministic_winner(backend: Backend) {
    let app = conflicts_app(backend).await;
    let (links, _) = rendered(&app).await;
    assert_eq!(links, conflicts_rendered(), "{backend:?}");
    let (first, problems) = report(&app, "default").await;
    assert_eq!(first["policy"], "complete", "{first}");
    let got = kinds(&problems);
    let want = [
        problem("duplicate_language", "d/en-1", "en"),
        problem("duplicate_language", "e/b", "en"),
        problem("duplicate_language", "f/en", "x-default"),
        problem("conflicting_language", "g/pt", "es"),
        problem("conflicting_language", "h/n", "nl"),
        problem("conflicting_language", "i/n", "nl"),
        problem("invalid_code", "j/mx", "es-419"),
        problem("not_stored", "k/de", "de"),
    ];
    // conflicting_language names the conflicted href and the code that lost.
    for w in &want {
        assert!(got.contains(w), "{backend:?}: {w:?} is not reported: {problems:#?}");
    }
    let unexpected: Vec<_> = got
        .iter()
        .filter(|g| !want.iter().any(|w| w.0 == g.0 && w.1 == g.1))
        .filter(|g| g.0 != "missing_return" && g.0 != "cross_site")
        .collect();
    assert!(unexpected.is_empty(), "{backend:?}: unexpected problems {unexpected:?}");
    assert!(!got.iter().any(|g| g.0 == "missing_return"), "{backend:?}: missing_return under complete");
    // Each problem names its cluster by its key, the smallest member href, and says what to do in words.
    for p in &problems {
        let href = p["href"].as_str().unwrap();
        let key = match href.strip_prefix(PUBLIC_URL).unwrap().split('/').nth(1).unwrap() {
            "d" => url("d/en-1"),
            "e" => url("e/a"),
            "f" => url("f/de"),
            "g" => url("g/en"),
            "h" => url("h/a"),
            "i" => url("i/a"),
            "j" => url("j/en"),
            "k" => "https://example.fr/k".to_owned(),
            other => panic!("a problem in no cluster of the test: {other}: {p}"),
        };
        assert_eq!(p["cluster"], key.as_str(), "{p}");
        assert!(!p["message"].as_str().unwrap().is_empty(), "{p}");
    }
    let summary = &first["summary"];
    assert_eq!(summary["problems"]["duplicate_language"], 3, "{summary}");
    assert_eq!(summary["problems"]["invalid_code"], 1, "{summary}");
    assert_eq!(summary["problems"]["not_stored"], 1, "{summary}");
    // The winners are the same whatever the order: the same entries one by one, backwards, render the same.
    let again = TestApp::spawn(backend, &[COMPLETE, ("SITEMAPD_PAGE_MAX_URLS", "4")]).await;
    for e in conflicts().iter().rev() {
        put(&again, std::slice::from_ref(e)).await;
    }
    assert_eq!(rendered(&again).await.0, conflicts_rendered(), "{backend:?}: written backwards");
    assert_eq!(kinds(&report(&again, "default").await.1), got, "{backend:?}: written backwards");
}

/// `missing_return` under `as_sent` only: m/a names m/b, which declares but does not name m/a.
async fn a_missing_return_is_reported_under_as_sent_only(backend: Backend) {
    let entries = [entry("m/a", &[("en", "m/a"), ("de", "m/b")]), entry("m/b", &[("de", "m/b")])];
    let app = TestApp::spawn(backend, &[]).await;
    put(&app, &entries).await;
    let (first, problems) = report(&app, "default").await;
    assert_eq!(first["policy"], "as_sent", "{first}");
    let got = kinds(&problems);
    assert_eq!(got, BTreeSet::from([problem("missing_return", "m/b", "")]), "on the URL that does not name back");
    let (links, _) = rendered(&app).await;
    assert_eq!(links[&url("m/b")], set(&[("de", "m/b")]), "as_sent: the declaration");
    let complete = TestApp::spawn(backend, &[COMPLETE]).await;
    put(&complete, &entries).await;
    let (_, problems) = report(&complete, "default").await;
    assert!(!kinds(&problems).iter().any(|p| p.0 == "missing_return"), "{problems:#?}");
    let (links, _) = rendered(&complete).await;
    assert_eq!(links[&url("m/b")], set(&[("de", "m/b"), ("en", "m/a")]), "complete renders the return link");
}

/// `cross_site`: a cluster with members in two sites is allowed, rendered whole in each, and reported once per
/// site.
async fn a_cluster_across_sites_is_reported_once_per_site(backend: Backend) {
    let sites = "default=https://www.example.com/, shop=https://shop.example.com/";
    let app = TestApp::spawn(backend, &[COMPLETE, ("SITEMAPD_SITES", sites)]).await;
    let shop = "https://shop.example.com/n/de";
    put(&app, &[entry("n/en", &[("en", "n/en"), ("de", shop)]), json!({"loc": shop})]).await;
    let want = set(&[("de", shop), ("en", "n/en")]);
    for host in ["www.example.com", "shop.example.com"] {
        for (path, (_, body)) in pages_at(&app, host).await {
            for (loc, links) in alternates_in(std::str::from_utf8(&body).unwrap()) {
                assert_eq!(links, want, "{host}{path}: {loc} renders the whole set");
            }
        }
    }
    for site in ["default", "shop"] {
        let (_, problems) = report(&app, site).await;
        let cross: Vec<_> = kinds(&problems).into_iter().filter(|p| p.0 == "cross_site").collect();
        assert_eq!(cross.len(), 1, "{site}: {problems:#?}");
    }
}

/// The conflicts' pages are the same bytes on SQLite and on Postgres.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn conflicts_render_the_same_bytes_on_both_backends() {
    let bodies = |p: BTreeMap<String, (String, bytes::Bytes)>| -> BTreeMap<String, bytes::Bytes> {
        p.into_iter().map(|(k, (_, b))| (k, b)).collect()
    };
    let sqlite = bodies(pages(&conflicts_app(Backend::Sqlite).await).await);
    let postgres = bodies(pages(&conflicts_app(Backend::Postgres).await).await);
    assert!(sqlite.len() >= 5, "{:?}", sqlite.keys());
    assert_eq!(sqlite, postgres);
    let (sqlite, postgres) = (conflicts_app(Backend::Sqlite).await, conflicts_app(Backend::Postgres).await);
    assert_eq!(report(&sqlite, "default").await.1, report(&postgres, "default").await.1, "the same problems");
}

// --- (3) Limits. ------------------------------------------------------------------------------------------------

/// A page byte limit near the least allowed, so that a few long entries fill a page.
fn small_pages() -> u64 {
    sitemapd::page::Limits::least_max_bytes() + 4096
}

/// A member on a full page whose completed entry no longer fits there moves to another page: both pages change,
/// none is over its limit, each is valid.
async fn a_completed_entry_that_outgrows_its_page_moves(backend: Backend) {
    let max = small_pages();
    let max_s = max.to_string();
    let app = TestApp::spawn(backend, &[COMPLETE, ("SITEMAPD_PAGE_MAX_BYTES", &max_s)]).await;
    // Page 1: the member m/en (naming m/de), then fillers until it is full.
    put(&app, &[entry("m/en", &[("en", "m/en"), ("de", "m/de")])]).await;
    let long = "f".repeat(1500);
    let mut i = 0;
    loop {
        let loc = url(&format!("filler/{i}/{long}"));
        put(&app, &[json!({"loc": loc})]).await;
        i += 1;
        if app.find(&loc).await.json()["sitemap"] != url("sitemap-1.xml") {
            break;
        }
    }
    let before = pages(&app).await;
    let page1 = &before["/sitemap-1.xml"].1;
    let room = max as usize - page1.len();
    assert!(room < 2000, "page 1 is full: {room} bytes left (the last filler did not fit)");
    // m/de names m/en and 8 external versions (~3.7 kB): m/en's completed entry grows by more than page 1 has left.
    let mut alternates = vec![("de", "m/de".to_owned()), ("en", "m/en".to_owned())];
    let langs = ["es", "fr", "it", "ja", "nl", "pl", "pt", "sv"];
    alternates.extend(langs.iter().map(|l| (*l, format!("https://example.org/{l}/{}", "x".repeat(400)))));
    let alternates: Vec<(&str, &str)> = alternates.iter().map(|(l, h)| (*l, h.as_str())).collect();
    put(&app, &[entry("m/de", &alternates)]).await;
    let after = pages(&app).await;
    let (links, page_of) = rendered(&app).await;
    let want = set(&alternates);
    assert_eq!(links[&url("m/en")], want, "m/en renders the whole set");
    assert_eq!(links[&url("m/de")], want);
    assert_ne!(page_of[&url("m/en")], "/sitemap-1.xml", "m/en moved");
    assert_ne!(after["/sitemap-1.xml"].0, before["/sitemap-1.xml"].0, "page 1 changed");
    assert_ne!(
        after[&page_of[&url("m/en")]].1,
        before.get(&page_of[&url("m/en")]).map(|p| p.1.clone()).unwrap_or_default()
    );
    for (path, (_, body)) in &after {
        assert!(body.len() as u64 <= max, "{path}: {} bytes, over the limit {max}", body.len());
    }
    let all: Vec<(&str, &[u8])> = after.iter().map(|(p, (_, b))| (p.trim_start_matches('/'), &b[..])).collect();
    validate_xsd(&all);
}

/// A member whose completed entry cannot fit any page renders its declaration, reported `too_large`.
async fn a_completed_entry_larger_than_any_page_keeps_its_declaration(backend: Backend) {
    let max = sitemapd::page::Limits::least_max_bytes();
    let max_s = max.to_string();
    let app = TestApp::spawn(backend, &[COMPLETE, ("SITEMAPD_PAGE_MAX_BYTES", &max_s)]).await;
    // A hub and 12 members with long paths, each naming itself and the hub: the set holds 13 long links.
    let long = "y".repeat(1100);
    let langs = ["de", "es", "fr", "it", "ja", "nl", "pl", "pt", "sv", "tr", "da", "fi"];
    let members: Vec<(String, &str)> = langs.iter().map(|l| (format!("t/{l}/{long}"), *l)).collect();
    let mut entries = vec![entry("t/hub", &[("en", "t/hub")])];
    entries.extend(members.iter().map(|(p, l)| entry(p, &[(l, p), ("en", "t/hub")])));
    put(&app, &entries).await;
    let (links, _) = rendered(&app).await;
    let (_, problems) = report(&app, "default").await;
    let too_large: BTreeSet<String> =
        kinds(&problems).into_iter().filter(|p| p.0 == "too_large").map(|p| p.1).collect();
    for (p, l) in &members {
        assert_eq!(links[&url(p)], set(&[(l, p), ("en", "t/hub")]), "{p}: its declaration");
        assert!(too_large.contains(&url(p)), "{p} is not reported too_large: {problems:#?}");
    }
    let after = pages(&app).await;
    for (path, (_, body)) in &after {
        assert!(body.len() as u64 <= max, "{path}: {} bytes, over the limit {max}", body.len());
    }
    let all: Vec<(&str, &[u8])> = after.iter().map(|(p, (_, b))| (p.trim_start_matches('/'), &b[..])).collect();
    validate_xsd(&all);
}

// --- (4) Schemas and readers. -----------------------------------------------------------------------------------

/// The fixture of the readers: the conflicts (completed, with losers) and a cluster with x-default, `&` and
/// non-ASCII hrefs.
async fn readers_app(backend: Backend) -> TestApp {
    let app = conflicts_app(backend).await;
    put(
        &app,
        &[
            entry("r/en?a=1&b=2", &[("en", "r/en?a=1&b=2"), ("x-default", "r/en?a=1&b=2"), ("zh-Hant", "r/zh")]),
            entry("r/zh", &[("zh-Hant", "r/zh"), ("de", "r/straße")]),
            entry("r/straße", &[]),
        ],
    )
    .await;
    app
}

fn readers_want() -> BTreeMap<String, Vec<Link>> {
    let mut want = conflicts_rendered();
    let r = set(&[("de", "r/stra%C3%9Fe"), ("en", "r/en?a=1&b=2"), ("x-default", "r/en?a=1&b=2"), ("zh-Hant", "r/zh")]);
    for p in ["r/en?a=1&b=2", "r/zh", "r/stra%C3%9Fe"] {
        want.insert(url(p), r.clone());
    }
    want
}

async fn every_completed_page_is_valid_and_read_back_by_the_importer(backend: Backend) {
    let app = readers_app(backend).await;
    let all = pages(&app).await;
    let (links, _) = rendered(&app).await;
    assert_eq!(links, readers_want(), "{backend:?}");
    let bodies: Vec<(&str, &[u8])> = all.iter().map(|(p, (_, b))| (p.trim_start_matches('/'), &b[..])).collect();
    validate_xsd(&bodies);
    // sitemapd's importer reads every page into a fresh service (as_sent: stored as read): the same alternates.
    let dir = tempfile::tempdir().unwrap();
    let mut sources = Vec::new();
    for (path, (_, body)) in &all {
        let file = dir.path().join(path.trim_start_matches('/'));
        std::fs::write(&file, body).unwrap();
        sources.push(sitemapd::import::Source::File(file));
    }
    let other = TestApp::spawn(backend, &[]).await;
    crate::import::import(&other, crate::import::options(&other, sources)).await;
    let want = readers_want();
    for (loc, links) in &want {
        let found = other.find(loc).await;
        assert_eq!(found.status, StatusCode::OK, "{loc} imported");
        let read: Vec<Link> = found.json()["alternates"]
            .as_array()
            .map(|a| {
                a.iter().map(|l| (l["hreflang"].as_str().unwrap().into(), l["href"].as_str().unwrap().into())).collect()
            })
            .unwrap_or_default();
        assert_eq!(&read, links, "{loc}: as the importer read it");
    }
}

/// Python's ElementTree (stdlib) reads each page's `xhtml:link`s the same.
async fn every_completed_page_is_read_by_python(backend: Backend) {
    let app = readers_app(backend).await;
    let script = r#"
import json, sys, xml.etree.ElementTree as ET
S = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
X = "{http://www.w3.org/1999/xhtml}"
out = {}
for path in sys.argv[1:]:
    for u in ET.parse(path).getroot().iter(S + "url"):
        out[u.find(S + "loc").text] = [[l.get("hreflang"), l.get("href")] for l in u.findall(X + "link")
                                       if l.get("rel") == "alternate"]
print(json.dumps(out))
"#;
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (path, (_, body)) in pages(&app).await {
        let file = dir.path().join(path.trim_start_matches('/'));
        std::fs::write(&file, &body).unwrap();
        files.push(file);
    }
    let out = std::process::Command::new("python3").arg("-c").arg(script).args(&files).output().expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read: BTreeMap<String, Vec<Link>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read, readers_want(), "{backend:?}: as ElementTree read it");
}

// --- (5) Validators: what moves and what does not. --------------------------------------------------------------

/// Under `complete`: an identical re-send moves no page's ETag; a member's new language reaches every member's
/// `<url>` and moves only the members' pages; deleting a member removes it from the others and moves only the
/// pages of the members (and its own).
async fn only_the_members_pages_move(backend: Backend) {
    let app = TestApp::spawn(backend, &[COMPLETE, ("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    // Pages 1-2 plain; the members on pages 3-5 each beside a plain entry; page 6 plain and c/it.
    let plain = |i: usize| json!({"loc": url(&format!("plain/{i}"))});
    put(&app, &[plain(0), plain(1), plain(2), plain(3)]).await;
    // One write per pair, so that each member has a page of its own (pages 3-6), whatever order a batch is placed in.
    let cluster = [
        vec![entry("c/en", &[("en", "c/en"), ("de", "c/de")]), plain(4)],
        vec![entry("c/de", &[("de", "c/de")]), plain(5)],
        vec![entry("c/fr", &[("fr", "c/fr"), ("en", "c/en")]), plain(6)],
        vec![plain(7), json!({"loc": url("c/it")})],
    ];
    for pair in &cluster {
        put(&app, pair).await;
    }
    let (links, page_of) = rendered(&app).await;
    let members = ["c/en", "c/de", "c/fr"];
    let three = set(&[("de", "c/de"), ("en", "c/en"), ("fr", "c/fr")]);
    for m in members {
        assert_eq!(links[&url(m)], three, "{m}");
    }
    let member_pages: BTreeSet<String> = members.iter().map(|m| page_of[&url(m)].clone()).collect();
    assert_eq!(member_pages.len(), 3, "{page_of:?}");
    let before = pages(&app).await;

    // The same writes again: nothing moves.
    for pair in &cluster {
        put(&app, pair).await;
    }
    assert_eq!(pages(&app).await, before, "an identical re-send moved a page");

    // c/fr adds it → c/it (stored, plain until now): every member, and c/it, render the four.
    put(&app, &[entry("c/fr", &[("fr", "c/fr"), ("en", "c/en"), ("it", "c/it")])]).await;
    let (links, _) = rendered(&app).await;
    let four = set(&[("de", "c/de"), ("en", "c/en"), ("fr", "c/fr"), ("it", "c/it")]);
    for m in ["c/en", "c/de", "c/fr", "c/it"] {
        assert_eq!(links[&url(m)], four, "{m}");
    }
    let after = pages(&app).await;
    let mut moved_pages = member_pages.clone();
    moved_pages.insert(page_of[&url("c/it")].clone());
    assert_moved(&before, &after, &moved_pages, "a member's new language");

    // Deleting c/de: the others drop it; only the pages of the members (c/de's own included) move.
    let before = after;
    delete(&app, &[url("c/de")]).await;
    let (links, _) = rendered(&app).await;
    assert!(!links.contains_key(&url("c/de")));
    let three = set(&[("en", "c/en"), ("fr", "c/fr"), ("it", "c/it")]);
    for m in ["c/en", "c/fr", "c/it"] {
        assert_eq!(links[&url(m)], three, "{m}");
    }
    assert_moved(&before, &pages(&app).await, &moved_pages, "a member deleted");
}

/// Exactly the pages `moved` changed (ETag and bytes) between `before` and `after`; every other is as it was.
fn assert_moved(
    before: &BTreeMap<String, (String, bytes::Bytes)>,
    after: &BTreeMap<String, (String, bytes::Bytes)>,
    moved: &BTreeSet<String>,
    what: &str,
) {
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>(), "{what}: the pages");
    for (path, (etag, body)) in after {
        if moved.contains(path) {
            assert_ne!(&before[path].0, etag, "{what}: {path}'s ETag did not move");
            assert_ne!(&before[path].1, body, "{what}: {path}'s bytes did not change");
        } else {
            assert_eq!(&before[path].0, etag, "{what}: {path} is no member's page, yet its ETag moved");
            assert_eq!(&before[path].1, body, "{what}: {path}");
        }
    }
}

both_backends!(
    each_conflict_is_reported_with_a_deterministic_winner,
    a_missing_return_is_reported_under_as_sent_only,
    a_cluster_across_sites_is_reported_once_per_site,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    a_completed_entry_that_outgrows_its_page_moves,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    a_completed_entry_larger_than_any_page_keeps_its_declaration,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    every_completed_page_is_valid_and_read_back_by_the_importer,
    #[cfg_attr(sitemapd_no_python3, ignore = "needs python3")]
    every_completed_page_is_read_by_python,
    only_the_members_pages_move,
);
