//! The store contract: what every `Store` implementation must do, run against SQLite and Postgres alike.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::TryStreamExt;
use sitemapd::domain::{Entry, LastMod, Loc, Priority, PublicUrl};
use sitemapd::page::render::{ENVELOPE_RESERVE, url_len};
use sitemapd::page::{Fields, PageState, StoredUrl};
use sitemapd::placement::UpsertCounts;
use sitemapd::store::{DeleteCounts, FetchRecord, PageRead, Store};

use crate::support::{Backend, PUBLIC_URL, TestApp};
use crate::{both_backends, through_pooler};

mod feeds;
mod hreflang;
mod publish;

fn public() -> PublicUrl {
    PublicUrl::parse(PUBLIC_URL).unwrap()
}

fn loc(path: &str) -> Loc {
    Loc::parse(&format!("{PUBLIC_URL}/{path}"), &public()).unwrap()
}

fn entry(path: &str) -> Entry {
    Entry { loc: loc(path), lastmod: None, changefreq: None, priority: None, ext: None, section: None }
}

fn entries(paths: impl IntoIterator<Item = String>) -> Vec<Entry> {
    paths.into_iter().map(|p| entry(&p)).collect()
}

/// For the crawler telemetry's store tests: the app's own recorder off. Its hourly purge runs once as it starts,
/// and on a busy machine that can land after a test's writes and purge the superseded reads the test is about
/// (seen: `the_crawler_purge_keeps_the_newest_read` found 0 left to purge, not 3).
const NO_RECORDER: &[(&str, &str)] = &[("SITEMAPD_CRAWLER_TELEMETRY", "false")];

async fn store(backend: Backend, vars: &[(&str, &str)]) -> (TestApp, Arc<dyn Store>) {
    let app = TestApp::spawn(backend, vars).await;
    let store = app.store.clone();
    (app, store)
}

async fn all_urls(store: &dyn Store) -> Vec<StoredUrl> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let batch = store.list_after(None, after, 7).await.unwrap();
        let Some(last) = batch.last() else { return out };
        after = last.url.id;
        out.extend(batch.into_iter().map(|u| u.url));
    }
}

/// The stored state is consistent: page counts and byte totals match the URLs, limits hold, each URL's size is
/// its rendered size, and each page streams exactly its URLs in id order.
pub(crate) async fn assert_consistent(store: &dyn Store, max_urls: i64, max_bytes: i64) {
    assert_consistent_in(store, &|_| max_urls, max_bytes).await;
}

/// [`assert_consistent`] with sections: each section's pages are numbered 1..n, and hold at most `max_urls` of
/// their section (by id) each.
pub(crate) async fn assert_consistent_in(store: &dyn Store, max_urls: &dyn Fn(i64) -> i64, max_bytes: i64) {
    use sitemapd::page::{number_of, section_of};
    let urls = all_urls(store).await;
    let pages = store.pages(1).await.unwrap();
    let mut by_page: BTreeMap<i64, Vec<&StoredUrl>> = BTreeMap::new();
    for u in &urls {
        by_page.entry(u.page_id).or_default().push(u);
        assert_eq!(u.size as u64, url_len(&u.loc, &u.fields), "size of {}", u.loc);
    }
    let mut numbers: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for p in &pages {
        numbers.entry(section_of(p.id)).or_default().push(number_of(p.id));
    }
    for (section, numbers) in numbers {
        assert_eq!(numbers, (1..=numbers.len() as i64).collect::<Vec<_>>(), "section {section}'s pages are 1..n");
    }
    for page in &pages {
        let members = by_page.remove(&page.id).unwrap_or_default();
        let max_urls = max_urls(section_of(page.id));
        assert_eq!(page.url_count, members.len() as i64, "count of page {}", page.id);
        assert_eq!(page.byte_size, members.iter().map(|u| u.size).sum::<i64>(), "bytes of page {}", page.id);
        assert!(page.url_count <= max_urls, "page {} has {} URLs", page.id, page.url_count);
        assert!(ENVELOPE_RESERVE as i64 + page.byte_size <= max_bytes, "page {} is too large", page.id);
        let mut ns = sitemapd::page::NsCounts::default();
        members.iter().for_each(|u| ns.count(u.fields.namespaces(), 1));
        assert_eq!(page.ns, ns, "namespace counts of page {}", page.id);
        match store.page_entries(1, page.id).await.unwrap() {
            None => assert_eq!(page.url_count, 0),
            Some((snapshot, stream)) => {
                assert_eq!(&snapshot, page);
                let streamed: Vec<String> = stream.map_ok(|e| e.loc).try_collect().await.unwrap();
                let expected: Vec<String> = members.iter().map(|u| u.loc.clone()).collect();
                assert_eq!(streamed, expected, "page {} streams its URLs in id order", page.id);
            }
        }
    }
    assert!(by_page.is_empty(), "URLs on pages that do not exist: {by_page:?}");
}

async fn upsert_then_find_returns_the_normalized_entry(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    let e = Entry {
        loc: Loc::parse("HTTPS://WWW.EXAMPLE.COM/caf\u{e9}", &public()).unwrap(),
        lastmod: Some(LastMod::parse("2024-05-01T08:20+02:00").unwrap()),
        changefreq: Some(sitemapd::domain::ChangeFreq::parse("Daily").unwrap()),
        priority: Some(Priority::new(0.8).unwrap()),
        ext: None,
        section: None,
    };
    let counts = store.upsert(std::slice::from_ref(&e)).await.unwrap().counts;
    assert_eq!(counts, UpsertCounts { received: 1, created: 1, updated: 0, unchanged: 0 });
    let found = store.find(&e.loc).await.unwrap().expect("stored").url;
    assert_eq!(found.loc, "https://www.example.com/caf%C3%A9");
    assert_eq!(found.fields.lastmod.as_deref(), Some("2024-05-01T06:20:00Z"));
    assert_eq!(found.fields.changefreq.as_deref(), Some("daily"));
    assert_eq!(found.fields.priority, Priority::new(0.8).ok());
    assert_eq!(found.page_id, 1);
    assert!(store.find(&loc("absent")).await.unwrap().is_none());
}

async fn counts_by_effect_and_later_duplicates_win(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    store.upsert(&entries(["a".into(), "b".into()])).await.unwrap();
    let mut changed = entry("b");
    changed.priority = Some(Priority::new(0.3).unwrap());
    let mut last = entry("c");
    last.priority = Some(Priority::new(0.9).unwrap());
    let batch = vec![entry("a"), changed, entry("c"), last];
    let counts = store.upsert(&batch).await.unwrap().counts;
    assert_eq!(counts, UpsertCounts { received: 4, created: 1, updated: 1, unchanged: 2 });
    assert_eq!(store.find(&loc("c")).await.unwrap().unwrap().url.fields.priority, Priority::new(0.9).ok());
    assert_eq!(all_urls(&*store).await.len(), 3);
}

async fn an_upsert_replaces_the_whole_entry(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    let mut full = entry("a");
    full.lastmod = Some(LastMod::parse("2024-01-01").unwrap());
    full.priority = Some(Priority::new(0.5).unwrap());
    store.upsert(&[full]).await.unwrap();
    let counts = store.upsert(&[entry("a")]).await.unwrap().counts;
    assert_eq!(counts.updated, 1);
    let found = store.find(&loc("a")).await.unwrap().unwrap().url;
    assert_eq!((found.fields.lastmod, found.fields.priority), (None, None));
}

async fn delete_counts_deleted_and_missing(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    store.upsert(&entries(["a".into(), "b".into()])).await.unwrap();
    let counts = store.delete(&[loc("a"), loc("a"), loc("zzz")]).await.unwrap().counts;
    assert_eq!(counts, DeleteCounts { deleted: 1, missing: 1 });
    assert!(store.find(&loc("a")).await.unwrap().is_none());
    assert!(store.find(&loc("b")).await.unwrap().is_some());
}

/// Every write says what it changed: the pages it touched with their new state (as the page table then reads),
/// and the locs it created, updated or deleted; an identical re-send and a delete of what is not stored change
/// nothing and say so.
async fn every_write_returns_what_it_changed(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    let locs = |written: &[&str]| written.iter().map(|p| loc(p).as_str().to_owned()).collect::<Vec<_>>();
    let page_ids = |c: &sitemapd::placement::Changes| c.pages.iter().map(|p| p.id).collect::<Vec<_>>();

    let w = store.upsert(&entries(["a".into(), "b".into(), "c".into()])).await.unwrap();
    assert_eq!(w.changes_in(1).locs, locs(&["a", "b", "c"]));
    assert_eq!(page_ids(&w.changes_in(1)), [1, 2]);
    assert_eq!(w.changes_in(1).pages, store.pages(1).await.unwrap(), "the new state of each page it touched");

    let same = store.upsert(&entries(["c".into(), "a".into()])).await.unwrap();
    assert!(same.changes.is_empty(), "an identical re-send changes nothing: {:?}", same.changes);

    let mut changed = entry("c");
    changed.priority = Some(Priority::new(0.4).unwrap());
    let w = store.upsert(&[entry("a"), changed, entry("d")]).await.unwrap();
    assert_eq!(w.changes_in(1).locs, locs(&["d", "c"]), "created, then updated; not the unchanged one");
    assert_eq!(page_ids(&w.changes_in(1)), [2]);

    let w = store.delete(&[loc("b"), loc("zzz"), loc("b")]).await.unwrap();
    assert_eq!((page_ids(&w.changes_in(1)), w.changes_in(1).locs), (vec![1], locs(&["b"])));
    let none = store.delete(&[loc("zzz")]).await.unwrap();
    assert!(none.changes.is_empty(), "{:?}", none.changes);
}

async fn list_after_returns_each_entry_once_across_changes(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    store.upsert(&entries((0..10).map(|i| format!("u{i}")))).await.unwrap();
    let first = store.list_after(None, 0, 4).await.unwrap();
    assert_eq!(first.len(), 4);
    // Changes between pages of the listing neither repeat nor skip the entries that remain.
    store.delete(&[loc("u1"), loc("u6")]).await.unwrap();
    store.upsert(&entries(["u10".into()])).await.unwrap();
    let mut seen: Vec<String> = first.iter().map(|u| u.url.loc.clone()).collect();
    let mut after = first.last().unwrap().url.id;
    loop {
        let batch = store.list_after(None, after, 4).await.unwrap();
        let Some(last) = batch.last() else { break };
        after = last.url.id;
        seen.extend(batch.into_iter().map(|u| u.url.loc));
    }
    let unique: BTreeSet<_> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no entry twice: {seen:?}");
    for i in (0..=10).filter(|i| *i != 6) {
        assert!(unique.contains(&format!("{PUBLIC_URL}/u{i}")), "u{i} listed");
    }
}

fn paths(urls: &[StoredUrl]) -> Vec<&str> {
    urls.iter().map(|u| u.loc.strip_prefix(PUBLIC_URL).unwrap().trim_start_matches('/')).collect()
}

/// `page_urls` lists one page's records in id order after a given id, at most `limit`: the records of other pages
/// in between (ids interleave once a freed slot is refilled) are not among them.
async fn page_urls_lists_one_page_by_keyset(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    store.upsert(&entries((0..10).map(|i| format!("u{i}")))).await.unwrap();
    store.delete(&[loc("u1")]).await.unwrap();
    // Refills page 1's freed slot with an id above every other page's.
    store.upsert(&entries(["n".into()])).await.unwrap();
    let page1 = store.page_urls(1, 1, 0, 100).await.unwrap();
    assert_eq!(paths(&page1), ["u0", "u2", "n"]);
    assert!(page1.windows(2).all(|w| w[0].id < w[1].id), "in id order");
    assert_eq!(page1[2], store.find(&loc("n")).await.unwrap().unwrap().url, "each record as find reads it");
    assert_eq!(paths(&store.page_urls(1, 1, page1[0].id, 1).await.unwrap()), ["u2"], "after an id, at most limit");
    assert_eq!(paths(&store.page_urls(1, 1, page1[1].id, 100).await.unwrap()), ["n"]);
    assert!(store.page_urls(1, 1, page1[2].id, 100).await.unwrap().is_empty());
    assert_eq!(paths(&store.page_urls(1, 2, 0, 2).await.unwrap()), ["u3", "u4"]);
    assert_eq!(paths(&store.page_urls(1, 4, 0, 100).await.unwrap()), ["u9"]);
    assert!(store.page_urls(1, 5, 0, 100).await.unwrap().is_empty(), "a page that does not exist");
    // An id on another page is a position all the same: what follows it on this page.
    let u4 = store.find(&loc("u4")).await.unwrap().unwrap();
    assert_eq!(paths(&store.page_urls(1, 1, u4.url.id, 100).await.unwrap()), ["n"]);
}

/// Like `list_after`, `page_urls` stops once the records' rendered sizes pass `LIST_MAX_BYTES` (8 MiB): a screen of
/// records with many extensions stays bounded in memory whatever `limit` is, and the rest follows after the last.
async fn page_urls_is_cut_by_size(b: Backend) {
    use sitemapd::domain::Extensions;
    use sitemapd::domain::ext::Image;
    let (_app, store) = store(b, &[]).await;
    let long = "x".repeat(1000);
    let batch: Vec<Entry> = (0..10)
        .map(|i| {
            let images = (0..1000).map(|j| Image { loc: format!("https://cdn.example.net/{i}/{j}/{long}.jpg") });
            let mut e = entry(&format!("big/{i}"));
            e.ext = Some(Box::new(Extensions { images: images.collect(), ..Extensions::default() }));
            e
        })
        .collect();
    store.upsert(&batch).await.unwrap();
    let first = store.page_urls(1, 1, 0, 1000).await.unwrap();
    let bytes: i64 = first.iter().map(|u| u.size).sum();
    assert!(first.len() < 10 && bytes > sitemapd::store::LIST_MAX_BYTES, "{} records, {bytes} bytes", first.len());
    let rest = store.page_urls(1, 1, first.last().unwrap().id, 1000).await.unwrap();
    let all: Vec<&str> = paths(&first).into_iter().chain(paths(&rest)).collect();
    assert_eq!(all, (0..10).map(|i| format!("big/{i}")).collect::<Vec<_>>());
}

/// The plan of `sql` with `binds`, after `ANALYZE`, as text: Postgres's `EXPLAIN` (in a transaction that runs
/// `pg_settings` first, when given), SQLite's `EXPLAIN QUERY PLAN` details.
async fn plan_of(b: Backend, url: &str, sql: &str, binds: &[i64], pg_settings: Option<&str>) -> String {
    use sqlx::{AssertSqlSafe, Connection};
    let lines: Vec<String> = match b {
        Backend::Postgres | Backend::Pooler => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query("ANALYZE urls").execute(&mut conn).await.unwrap();
            let mut tx = conn.begin().await.unwrap();
            if let Some(settings) = pg_settings {
                sqlx::query(AssertSqlSafe(settings.to_owned())).execute(&mut *tx).await.unwrap();
            }
            let mut query = sqlx::query_scalar(AssertSqlSafe(format!("EXPLAIN {sql}")));
            for v in binds {
                query = query.bind(*v);
            }
            query.fetch_all(&mut *tx).await.unwrap()
        }
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
            sqlx::query("ANALYZE").execute(&mut conn).await.unwrap();
            let mut query = sqlx::query_as(AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")));
            for v in binds {
                query = query.bind(*v);
            }
            let rows: Vec<(i64, i64, i64, String)> = query.fetch_all(&mut conn).await.unwrap();
            rows.into_iter().map(|r| r.3).collect()
        }
    };
    lines.join("\n")
}

/// `page_urls` reads a range of the `(site_id, page_id, id)` index, in its order: no sort, no scan of the table or of the
/// primary key (which would read every page's rows before this page's). On Postgres, under the planner settings
/// its transaction sets, as the page's stream does.
async fn page_urls_is_a_range_of_the_page_index(b: Backend) {
    use sitemapd::store::PAGE_URLS_SQL;
    use sitemapd::store::postgres::PAGE_PLANNER_SETTINGS;
    let (app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "50")]).await;
    store.upsert(&entries((0..400).map(|i| format!("e{i}")))).await.unwrap();
    let text = plan_of(b, &app.db.direct_url, PAGE_URLS_SQL, &[1, 3, 120, 201], Some(PAGE_PLANNER_SETTINGS)).await;
    assert!(text.contains("urls_site_page_id"), "{text}");
    for bad in ["Sort", "TEMP B-TREE", "Bitmap", "Seq Scan", "SCAN urls", "urls_pkey"] {
        assert!(!text.contains(bad), "plan uses {bad}:\n{text}");
    }
}

async fn pages_fill_in_order_and_a_freed_slot_is_reused(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    store.upsert(&entries((0..7).map(|i| format!("u{i}")))).await.unwrap();
    let pages: Vec<i64> = store.pages(1).await.unwrap().iter().map(|p| p.url_count).collect();
    assert_eq!(pages, [3, 3, 1]);
    store.delete(&[loc("u1")]).await.unwrap();
    store.upsert(&entries(["n1".into(), "n2".into(), "n3".into()])).await.unwrap();
    assert_eq!(store.find(&loc("n1")).await.unwrap().unwrap().url.page_id, 1, "the freed slot on page 1 first");
    assert_eq!(store.find(&loc("n2")).await.unwrap().unwrap().url.page_id, 3);
    assert_eq!(store.find(&loc("n3")).await.unwrap().unwrap().url.page_id, 3);
    assert_consistent(&*store, 3, 52_428_800).await;
}

async fn a_change_touches_only_its_page(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    store.upsert(&entries((0..9).map(|i| format!("u{i}")))).await.unwrap();
    let before = store.pages(1).await.unwrap();
    let mut changed = entry("u4");
    changed.priority = Some(Priority::new(0.1).unwrap());
    store.upsert(&[changed]).await.unwrap();
    let after = store.pages(1).await.unwrap();
    let differing: Vec<i64> = before.iter().zip(&after).filter(|(x, y)| x != y).map(|(x, _)| x.id).collect();
    assert_eq!(differing, [2]);
    assert_eq!(after[1].version, before[1].version + 1);
    assert!(after[1].modified_us > before[1].modified_us);
}

/// How a page's gzip is made is stored with it: a page a write changes gets the current way, and every other page
/// keeps the way it has (here, pages as stored before migration 0008), so that an upgrade changes no unchanged
/// page's gzip bytes or ETag. A page's snapshot carries its way too.
async fn a_page_keeps_its_gzip_way_until_it_changes(b: Backend) {
    use sitemapd::page::Gzip;
    let (app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    store.upsert(&entries((0..9).map(|i| format!("u{i}")))).await.unwrap();
    assert!(store.pages(1).await.unwrap().iter().all(|p| p.gzip == Gzip::CURRENT));
    app.exec_sql("UPDATE pages SET gzip = 0").await;
    let mut changed = entry("u4");
    changed.priority = Some(Priority::new(0.1).unwrap());
    store.upsert(&[changed]).await.unwrap();
    store.upsert(&entries((0..9).map(|i| format!("u{i}")).filter(|p| p != "u4"))).await.unwrap();
    let ways: Vec<(i64, Gzip)> = store.pages(1).await.unwrap().iter().map(|p| (p.id, p.gzip)).collect();
    assert_eq!(ways, [(1, Gzip::Stream), (2, Gzip::CURRENT), (3, Gzip::Stream)]);
    assert_eq!(store.page(1, 1).await.unwrap().unwrap().gzip, Gzip::Stream);
    let (snapshot, _) = store.page_entries(1, 2).await.unwrap().unwrap();
    assert_eq!(snapshot.gzip, Gzip::CURRENT);
    store.delete(&[loc("u0")]).await.unwrap();
    assert_eq!(store.page(1, 1).await.unwrap().unwrap().gzip, Gzip::CURRENT, "a delete changes the page");
}

async fn deleting_advances_the_page_version_and_time(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    store.upsert(&entries(["a".into(), "b".into()])).await.unwrap();
    let before = store.page(1, 1).await.unwrap().unwrap();
    store.delete(&[loc("a")]).await.unwrap();
    let after = store.page(1, 1).await.unwrap().unwrap();
    assert_eq!(after.version, before.version + 1);
    assert!(after.modified_us > before.modified_us);
    assert_eq!(after.url_count, 1);
    // Deleting the last URL empties the page: it is kept (for reuse) but has nothing to stream.
    store.delete(&[loc("b")]).await.unwrap();
    assert_eq!(store.page(1, 1).await.unwrap().unwrap().url_count, 0);
    assert!(store.page_entries(1, 1).await.unwrap().is_none());
}

async fn identical_resend_changes_nothing(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "4")]).await;
    let batch = entries((0..10).map(|i| format!("u{i}")));
    store.upsert(&batch).await.unwrap();
    let before = store.pages(1).await.unwrap();
    let counts = store.upsert(&batch).await.unwrap().counts;
    assert_eq!(counts, UpsertCounts { received: 10, created: 0, updated: 0, unchanged: 10 });
    assert_eq!(store.pages(1).await.unwrap(), before);
}

/// Text that a textual bulk format would have to escape (tabs, newlines, carriage returns, backslashes, `\N`, quotes,
/// separators, non-ASCII) and very long values are stored and read back byte for byte, in locs (as normalization
/// leaves them) and in the extensions' JSON; and new records get ids in the order of the request, not of their locs.
async fn awkward_and_long_values_are_stored_exactly_in_request_order(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    let text = "tab\there|newline\nthere\r\nback\\slash \\N \\. \"quoted\" 'single', comma; \u{e9}t\u{e9} \u{6771}\u{4eac} \u{1f389}";
    let long_text = text.chars().cycle().take(2048).collect::<String>();
    let images: Vec<serde_json::Value> =
        (0..1000).map(|i| serde_json::json!({"loc": format!("https://cdn.example.net/{i}/%5C\u{e9}.jpg")})).collect();
    let long_path = "x".repeat(2000);
    let news = serde_json::json!({"publication": {"name": text, "language": "en"},
                                  "publication_date": "2026-11-01", "title": long_text});
    let video = serde_json::json!({"thumbnail_loc": "https://cdn.example.net/t.jpg", "title": text,
                                   "description": long_text, "content_loc": "https://cdn.example.net/v.mp4",
                                   "tags": [text, "\\"]});
    let values = [
        serde_json::json!({"loc": format!("{PUBLIC_URL}/z?q=a'b&c=%5C%09&d=\u{e9}\\x")}),
        serde_json::json!({"loc": format!("{PUBLIC_URL}/{long_path}"), "lastmod": "2024-05-01"}),
        serde_json::json!({"loc": format!("{PUBLIC_URL}/m/\u{6771}\u{4eac}\tcaf\u{e9}"), "news": news}),
        serde_json::json!({"loc": format!("{PUBLIC_URL}/a\"b"), "videos": [video], "priority": 0.5}),
        serde_json::json!({"loc": format!("{PUBLIC_URL}/b"), "changefreq": "daily", "images": images}),
    ];
    let batch: Vec<Entry> = values.into_iter().map(|v| Entry::from_json(v, &public()).unwrap()).collect();
    let counts = store.upsert(&batch).await.unwrap().counts;
    assert_eq!(counts, UpsertCounts { received: 5, created: 5, updated: 0, unchanged: 0 });
    let mut ids = Vec::new();
    for e in &batch {
        let found = store.find(&e.loc).await.unwrap().expect("stored").url;
        assert_eq!(found.loc, e.loc.as_str());
        assert_eq!(found.fields, sitemapd::page::Fields::from(e), "{}", e.loc.as_str());
        assert_eq!(found.size as u64, url_len(&found.loc, &found.fields));
        ids.push(found.id);
    }
    assert!(ids.is_sorted_by(|a, b| a < b), "ids follow the request's order: {ids:?}");
    let again = store.upsert(&batch).await.unwrap().counts;
    assert_eq!(again, UpsertCounts { received: 5, created: 0, updated: 0, unchanged: 5 }, "read back as written");
    assert_consistent(&*store, 50_000, 52_428_800).await;
}

/// After a large batch (1,000 entries or more) of new records only, the next large batch is planned as new without
/// a lookup. When one of its locs is stored after all (here by another process, as another replica would), it is
/// planned again after a lookup: the counts, the records and the page accounting are those a lookup gives, and
/// nothing of the failed guess stays.
async fn a_bulk_load_plans_new_records_without_a_lookup_and_falls_back_when_one_is_stored(b: Backend) {
    use crate::observability::sum;
    let (app, store) = store(b, &[]).await;
    let guesses = |samples: &[crate::observability::Sample], outcome| {
        sum(samples, "sitemapd_write_guesses_total", &[("outcome", outcome)])
    };
    let batch = |from: usize, to: usize| entries((from..to).map(|i| format!("bulk-{i:05}")));
    let created = |n: u64| UpsertCounts { received: n, created: n, updated: 0, unchanged: 0 };
    let before = app.scrape().await;
    assert_eq!(store.upsert(&batch(0, 1200)).await.unwrap().counts, created(1200), "looked up: nothing stored");
    assert_eq!(store.upsert(&batch(1200, 2400)).await.unwrap().counts, created(1200), "planned as new");
    let guessed = app.scrape().await;
    assert!(guesses(&guessed, "new") > guesses(&before, "new"), "the second batch was not looked up");
    let other = app.another_process().await;
    other.store.upsert(&batch(3000, 3001)).await.unwrap();
    let mut third = batch(2400, 3600);
    third[600].priority = Some(Priority::new(0.3).unwrap());
    let counts = store.upsert(&third).await.unwrap().counts;
    assert_eq!(counts, UpsertCounts { received: 1200, created: 1199, updated: 1, unchanged: 0 });
    assert!(guesses(&app.scrape().await, "stored") > guesses(&guessed, "stored"), "the guess met the stored loc");
    let found = store.find(&loc("bulk-03000")).await.unwrap().expect("stored").url;
    assert_eq!(found.fields.priority, third[600].priority, "the record written by the fallback");
    let resend = store.upsert(&batch(1200, 2400)).await.unwrap().counts;
    assert_eq!(resend, UpsertCounts { received: 1200, created: 0, updated: 0, unchanged: 1200 });
    let urls = all_urls(&*store).await;
    assert_eq!(urls.len(), 3600);
    assert_eq!(urls.iter().map(|u| &u.loc).collect::<BTreeSet<_>>().len(), 3600, "one record a loc");
    assert_consistent(&*store, 50_000, 52_428_800).await;
}

/// A large batch's lookup (Postgres: in two halves at once, the second on an idle connection) finds every stored
/// record in either half: changed, unchanged and new records are counted and written as one lookup gives them.
async fn a_large_batch_is_looked_up_whole_in_either_half(b: Backend) {
    use crate::observability::sum;
    let (app, store) = store(b, &[]).await;
    let shared = |samples: &[crate::observability::Sample]| {
        sum(samples, "sitemapd_write_lookups_shared_total", &[("outcome", "shared")])
    };
    let paths = |range: std::ops::Range<usize>| range.map(|i| format!("half-{i:05}")).collect::<Vec<_>>();
    // Stored in small batches, each looked up in the write alone.
    for chunk in paths(0..3000).chunks(500) {
        store.upsert(&entries(chunk.iter().cloned())).await.unwrap();
    }
    // Idle connections to share with: several reads at once open them.
    let probes: Vec<Loc> = paths(0..8).iter().map(|p| loc(p)).collect();
    futures_util::future::join_all(probes.iter().map(|l| store.find(l))).await;
    let before = app.scrape().await;
    // 3,000 stored (every 7th changed, in both halves) and 1,000 new, interleaved.
    let mut batch = Vec::new();
    for (i, path) in paths(0..4000).into_iter().enumerate() {
        let mut e = entry(&path);
        if i < 3000 && i % 7 == 0 {
            e.priority = Some(Priority::new(0.2).unwrap());
        }
        batch.push(e);
    }
    batch.swap(10, 3990);
    batch.swap(1990, 3010);
    let counts = store.upsert(&batch).await.unwrap().counts;
    assert_eq!(counts, UpsertCounts { received: 4000, created: 1000, updated: 429, unchanged: 2571 });
    if b == Backend::Postgres {
        assert!(shared(&app.scrape().await) > shared(&before), "the lookup was shared with a second connection");
    }
    if b == Backend::Pooler {
        assert_eq!(shared(&app.scrape().await), shared(&before), "no second connection through the pooler");
    }
    for i in [0, 1, 7, 1995, 1990, 2002, 2999, 3000, 3010, 3990, 3999] {
        let path = format!("half-{i:05}");
        let found = store.find(&loc(&path)).await.unwrap().expect("stored").url;
        let sent = batch.iter().find(|e| e.loc == loc(&path)).expect("sent");
        assert_eq!(found.fields, Fields::from(sent), "{path}");
    }
    let again = store.upsert(&batch).await.unwrap().counts;
    assert_eq!(again, UpsertCounts { received: 4000, created: 0, updated: 0, unchanged: 4000 });
    assert_eq!(all_urls(&*store).await.len(), 4000);
    assert_consistent(&*store, 50_000, 52_428_800).await;
}

/// A batch mixing new records with stored ones (changed and unchanged): the stored keep their ids and pages, the new
/// get ids after every stored one, in the order of the request, and the page streams them in that order.
async fn a_batch_mixing_new_and_stored_records_keeps_request_order(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    store.upsert(&entries(["s1".into(), "s2".into(), "s3".into()])).await.unwrap();
    let mut stored = Vec::new();
    for path in ["s1", "s2", "s3"] {
        stored.push(store.find(&loc(path)).await.unwrap().expect("stored").url.id);
    }
    let mut changed = entry("s2");
    changed.priority = Some(Priority::new(0.4).unwrap());
    let mut also = entry("s3");
    also.changefreq = Some(sitemapd::domain::ChangeFreq::parse("weekly").unwrap());
    let batch = vec![entry("n-z"), changed, entry("n-a"), entry("s1"), entry("n-m"), also];
    let counts = store.upsert(&batch).await.unwrap().counts;
    assert_eq!(counts, UpsertCounts { received: 6, created: 3, updated: 2, unchanged: 1 });
    let mut ids = Vec::new();
    for path in ["s1", "s2", "s3", "n-z", "n-a", "n-m"] {
        let found = store.find(&loc(path)).await.unwrap().expect("stored").url;
        assert_eq!(found.page_id, 1);
        ids.push(found.id);
    }
    assert_eq!(ids[..3], stored[..], "stored records keep their ids");
    assert!(ids.is_sorted_by(|a, b| a < b), "new ids after the stored, in request order: {ids:?}");
    let (_, stream) = store.page_entries(1, 1).await.unwrap().expect("page 1");
    let streamed: Vec<String> = stream.map_ok(|e| e.loc).try_collect().await.unwrap();
    let expected: Vec<String> =
        ["s1", "s2", "s3", "n-z", "n-a", "n-m"].iter().map(|p| loc(p).as_str().to_owned()).collect();
    assert_eq!(streamed, expected);
    assert_consistent(&*store, 50_000, 52_428_800).await;
}

async fn byte_limits_hold_for_urls_of_any_length(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_BYTES", "16000")]).await;
    // Lengths from 1 to ~1,900 characters, some with characters that grow when escaped.
    let paths: Vec<String> = (0..120).map(|i| format!("{i}/{}", "a&'".repeat((i * 97) % 640))).collect();
    for chunk in paths.chunks(25) {
        store.upsert(&entries(chunk.iter().cloned())).await.unwrap();
    }
    assert!(store.pages(1).await.unwrap().len() > 3);
    assert_consistent(&*store, 50_000, 16_000).await;
}

async fn an_entry_that_outgrows_its_page_moves_and_the_limits_hold(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_BYTES", "14000")]).await;
    let long = |i: usize| format!("{i}/{}", "x".repeat(1900));
    store.upsert(&entries((0..6).map(long))).await.unwrap();
    assert_eq!(store.pages(1).await.unwrap().len(), 1);
    let mut grown = entry(&long(0));
    grown.lastmod = Some(LastMod::parse("2024-05-01T08:20:07.123456789Z").unwrap());
    grown.changefreq = Some(sitemapd::domain::ChangeFreq::parse("monthly").unwrap());
    grown.priority = Some(Priority::new(0.123456).unwrap());
    // Fill page 1 to 50 bytes under its limit, so the grown entry (about 100 bytes larger) cannot stay.
    let room = 14_000 - ENVELOPE_RESERVE as i64 - store.page(1, 1).await.unwrap().unwrap().byte_size;
    let bare = format!("{PUBLIC_URL}/f/");
    let base = url_len(&bare, &Default::default()) as i64;
    let filler = format!("f/{}", "y".repeat((room - 50 - base) as usize));
    store.upsert(&entries([filler.clone()])).await.unwrap();
    assert_eq!(store.find(&loc(&filler)).await.unwrap().unwrap().url.page_id, 1);
    store.upsert(&[grown]).await.unwrap();
    assert_eq!(store.find(&loc(&long(0))).await.unwrap().unwrap().url.page_id, 2);
    assert_consistent(&*store, 50_000, 14_000).await;
}

async fn concurrent_writers_keep_every_invariant(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "7")]).await;
    let tasks: Vec<_> = (0..6)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for round in 0..5 {
                    // Each writer adds its own URLs and rewrites shared ones.
                    let mut batch = entries((0..4).map(|i| format!("w{w}/r{round}/{i}")));
                    let mut shared = entry(&format!("shared/{}", round % 3));
                    shared.priority = Some(Priority::new(f64::from(w) / 10.0).unwrap());
                    batch.push(shared);
                    store.upsert(&batch).await.unwrap();
                    if round % 2 == 1 {
                        store.delete(&[loc(&format!("w{w}/r{}/0", round - 1))]).await.unwrap();
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let urls = all_urls(&*store).await;
    assert_eq!(urls.len(), 6 * (5 * 4 - 2) + 3);
    assert_consistent(&*store, 7, 52_428_800).await;
}

/// Sixteen writers, on two processes where the backend allows (Postgres), rewrite and delete the same locs on the
/// same few pages, under small URL and byte limits: no page breaks a limit, each page's bookkeeping matches its
/// URLs, and the created/deleted counts the writers were told add up to exactly what is stored.
async fn sixteen_writers_on_shared_locs_keep_counts_exact(b: Backend) {
    let (app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "8"), ("SITEMAPD_PAGE_MAX_BYTES", "14000")]).await;
    // SQLite serializes writers with an in-process lock: a second process would only add SQLITE_BUSY retries.
    let other = match b {
        Backend::Postgres | Backend::Pooler => app.another_process().await.store.clone(),
        Backend::Sqlite => store.clone(),
    };
    // Forty shared locs: even ones long (1,500 to 1,900 characters), so that bytes fill pages before counts do.
    let shared = |j: usize| {
        let len = if j.is_multiple_of(2) { 1500 + (j * 37) % 400 } else { (j * 13) % 200 };
        format!("s/{j}/{}", "x".repeat(len))
    };
    let tasks: Vec<_> = (0..16usize)
        .map(|w| {
            let store = if w % 2 == 0 { store.clone() } else { other.clone() };
            tokio::spawn(async move {
                let (mut created, mut deleted) = (0u64, 0u64);
                for round in 0..8usize {
                    let batch: Vec<Entry> = (0..6)
                        .map(|t| {
                            let mut e = entry(&shared((w * 7 + round * 5 + t * 3) % 40));
                            // Entries grow and shrink, so some outgrow their page and move.
                            if (w + round + t) % 3 == 0 {
                                e.lastmod = Some(LastMod::parse("2024-05-01T08:20:07.123456+02:00").unwrap());
                                e.priority = Some(Priority::new(((w + t) % 10) as f64 / 10.0).unwrap());
                            }
                            e
                        })
                        .collect();
                    let c = store.upsert(&batch).await.unwrap().counts;
                    assert_eq!(c.received, c.created + c.updated + c.unchanged);
                    created += c.created;
                    if round % 2 == 1 {
                        let gone = [loc(&shared((w + round * 11) % 40)), loc(&shared((w * 3 + round) % 40))];
                        deleted += store.delete(&gone).await.unwrap().counts.deleted;
                    }
                }
                (created, deleted)
            })
        })
        .collect();
    let (mut created, mut deleted) = (0, 0);
    for t in tasks {
        let (c, d) = t.await.unwrap();
        created += c;
        deleted += d;
    }
    let urls = all_urls(&*store).await;
    assert_eq!(urls.len() as u64, created - deleted, "created {created} - deleted {deleted} = what is stored");
    assert!(deleted > 0 && !urls.is_empty());
    assert!(store.pages(1).await.unwrap().len() > 3, "the limits made several pages");
    assert_consistent(&*store, 8, 14_000).await;
    assert_consistent(&*other, 8, 14_000).await;
}

async fn migrations_are_idempotent(b: Backend) {
    let (app, store) = store(b, &[]).await;
    store.upsert(&entries(["a".into()])).await.unwrap();
    store.migrate().await.unwrap();
    let again = app.another_process().await;
    again.store.migrate().await.unwrap();
    assert!(again.store.find(&loc("a")).await.unwrap().is_some());
}

async fn page_state_is_shared_by_every_process(b: Backend) {
    let (app, store) = store(b, &[]).await;
    store.upsert(&entries(["a".into(), "b".into()])).await.unwrap();
    let other = app.another_process().await;
    let pages: Vec<PageState> = other.store.pages(1).await.unwrap();
    assert_eq!(pages, store.pages(1).await.unwrap());
    other.store.delete(&[loc("a")]).await.unwrap();
    assert_eq!(store.page(1, 1).await.unwrap().unwrap().url_count, 1);
}

/// Property 7: a page is read by an ordered scan of the (site_id, page_id, id) index: no sort, no scan of other pages' rows,
/// whatever the planner's statistics say.
async fn a_page_is_read_by_an_ordered_index_scan(b: Backend) {
    use sitemapd::store::postgres::PAGE_PLANNER_SETTINGS;
    let (app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "50")]).await;
    store.upsert(&entries((0..400).map(|i| format!("e{i}")))).await.unwrap();
    let text = match b {
        Backend::Postgres | Backend::Pooler => {
            let sql = sitemapd::store::postgres::PAGE_ENTRIES_SQL;
            plan_of(b, &app.db.direct_url, sql, &[1, 3], Some(PAGE_PLANNER_SETTINGS)).await
        }
        Backend::Sqlite => {
            plan_of(b, &app.db.direct_url, sitemapd::store::sqlite::PAGE_ENTRIES_SQL, &[1, 3], None).await
        }
    };
    assert!(text.contains("urls_site_page_id"), "{text}");
    // A row comparison's upper bound does not stop a Postgres 15 btree scan: it would read on to the site's end.
    for bad in ["Sort", "TEMP B-TREE", "Bitmap", "Seq Scan", "SCAN urls", "urls_pkey", "ROW("] {
        assert!(!text.contains(bad), "plan uses {bad}:\n{text}");
    }
}

/// The news sitemap reads its window, and the article that left it last, through the partial index on the
/// publication date: O(the window's entries), never a scan of all URLs.
async fn the_news_window_is_read_through_its_index(b: Backend) {
    use sitemapd::domain::ext::{News, Publication};
    use sitemapd::store::{NEWS_BEFORE_SQL, NEWS_SQL};
    let (app, store) = store(b, &[]).await;
    let mut batch: Vec<Entry> = entries((0..600).map(|i| format!("n{i}")));
    for (i, e) in batch.iter_mut().enumerate().filter(|(i, _)| i % 50 == 0) {
        let news = News {
            publication: Publication { name: "N".into(), language: "en".into() },
            publication_date: format!("2026-11-{:02}", 1 + i / 50),
            title: "T".into(),
        };
        e.ext = Some(Box::new(sitemapd::domain::Extensions { news: Some(news), ..Default::default() }));
    }
    store.upsert(&batch).await.unwrap();
    let (since, until) = (1_793_000_000_000_000i64, 1_795_000_000_000_000i64);
    let mut text = String::new();
    for (sql, binds) in [(NEWS_SQL, &[since, until, 1000, 1][..]), (NEWS_BEFORE_SQL, &[since, 1][..])] {
        let plan = plan_of(b, &app.db.direct_url, sql, binds, None).await;
        assert!(plan.contains("urls_news_us"), "{sql}:\n{plan}");
        text.push_str(&plan);
    }
    // The planner may sort what the index gives for the window (Postgres: a bitmap scan of a few rows); it never
    // reads the table itself.
    for bad in ["Seq Scan", "SCAN urls"] {
        assert!(!text.contains(bad), "plan uses {bad}:\n{text}");
    }
}

/// The removed-URLs sitemap reads its window, newest first, and the tombstone that left it last, through the
/// `(site_id, removed_us, loc)` index: never a scan of the table.
async fn the_removed_window_is_read_through_its_index(b: Backend) {
    use sitemapd::store::REMOVED_SQL;
    let (app, store) = store(b, &[("SITEMAPD_REMOVED_RETENTION", "30d")]).await;
    let batch = entries((0..600).map(|i| format!("r{i}")));
    store.upsert(&batch).await.unwrap();
    for chunk in batch.chunks(100) {
        let locs: Vec<Loc> = chunk.iter().map(|e| e.loc.clone()).collect();
        store.delete(&locs).await.unwrap();
    }
    let read = store.removed(1, 0, 150).await.unwrap();
    assert_eq!(read.entries.len(), 150);
    assert!(read.entries.windows(2).all(|w| (w[0].1, &w[0].0) > (w[1].1, &w[1].0)), "newest first, then by loc");
    // Many older tombstones besides, as a site that removes often has: the window is a small part of them.
    let older = match b {
        Backend::Sqlite => {
            "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) \
             INSERT INTO removed (site_id, loc, removed_us) SELECT 1, 'https://www.example.com/old/' || i, i FROM n"
        }
        Backend::Postgres | Backend::Pooler => {
            "INSERT INTO removed (site_id, loc, removed_us) \
             SELECT 1, 'https://www.example.com/old/' || i, i FROM generate_series(1, 20000) AS i"
        }
    };
    app.exec_sql(older).await;
    app.exec_sql("ANALYZE removed").await;
    let since = read.entries[120].1;
    let plan = plan_of(b, &app.db.direct_url, REMOVED_SQL, &[1, since, 50_000], None).await;
    assert!(plan.contains("removed_site_time"), "{plan}");
    // The planner may sort what the index gives for the window (Postgres: a bitmap scan of a few rows); it never
    // reads the table whole. SQLite reads the index backwards, already in order.
    assert!(!plan.contains("Seq Scan") && !plan.contains("SCAN removed"), "{plan}");
    if b == Backend::Sqlite {
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}

// --- Crawler telemetry ---------------------------------------------------------------------------------------

/// A time to count from: microseconds since the Unix epoch (November 2026).
const T: i64 = 1_795_000_000_000_000;

/// One fetch of `resource` of site 1 by `crawler` (verified), answered 200 with an ETag naming its time.
fn fetched(resource: &str, crawler: &str, first_us: i64, last_us: i64) -> FetchRecord {
    FetchRecord {
        site: 1,
        resource: resource.into(),
        page_id: None,
        crawler: crawler.into(),
        trust: "verified".into(),
        first_us,
        last_us,
        last_status: 200,
        last_conditional: false,
        last_etag: format!("\"{last_us}\""),
        fetches: 1,
        not_modified: 0,
    }
}

fn page_read(page_id: i64, crawler: &str, version_us: i64, first_us: i64) -> PageRead {
    PageRead { site: 1, page_id, crawler: crawler.into(), version_us, first_us }
}

/// Two flushes of one key: the counts add up, the first fetch is the earlier, the last fetch and its answer are
/// the later flush's; a flush of older fetches that arrives late changes the counts and the first fetch, not the
/// last answer; on a tie the flush that arrives wins. Other keys (trust, crawler, resource) stay apart.
async fn crawler_fetch_records_merge_by_key(b: Backend) {
    let (_app, store) = store(b, NO_RECORDER).await;
    let first = FetchRecord {
        fetches: 3,
        not_modified: 1,
        page_id: Some(1),
        ..fetched("sitemap-1.xml", "googlebot", T + 10, T + 50)
    };
    let claimed = FetchRecord { trust: "claimed".into(), ..fetched("sitemap-1.xml", "googlebot", T, T) };
    assert!(store.record_crawls(&[first.clone(), claimed.clone()], &[]).await.unwrap().is_empty());
    assert_eq!(store.crawler_fetches(1).await.unwrap(), [claimed.clone(), first.clone()], "in key order");

    let later = FetchRecord {
        last_status: 304,
        last_conditional: true,
        last_etag: "\"b\"".into(),
        fetches: 2,
        not_modified: 2,
        ..fetched("sitemap-1.xml", "googlebot", T + 20, T + 90)
    };
    store.record_crawls(&[later], &[]).await.unwrap();
    let merged = FetchRecord {
        first_us: T + 10,
        last_us: T + 90,
        last_status: 304,
        last_conditional: true,
        last_etag: "\"b\"".into(),
        fetches: 5,
        not_modified: 3,
        ..first.clone()
    };
    assert_eq!(store.crawler_fetches(1).await.unwrap(), [claimed.clone(), merged.clone()]);

    // A replica's older fetches, flushed late, twice in one flush (merged before the upsert meets the key).
    let late = FetchRecord { fetches: 4, ..fetched("sitemap-1.xml", "googlebot", T + 1, T + 60) };
    store.record_crawls(&[late.clone(), late], &[]).await.unwrap();
    let merged = FetchRecord { first_us: T + 1, fetches: 13, ..merged };
    assert_eq!(store.crawler_fetches(1).await.unwrap(), [claimed.clone(), merged.clone()], "the last answer stays");

    // The same last fetch time: the flush that arrives wins.
    let tie = FetchRecord { last_etag: "\"c\"".into(), ..fetched("sitemap-1.xml", "googlebot", T + 90, T + 90) };
    store.record_crawls(&[tie], &[]).await.unwrap();
    let merged =
        FetchRecord { last_status: 200, last_conditional: false, last_etag: "\"c\"".into(), fetches: 14, ..merged };
    assert_eq!(store.crawler_fetches(1).await.unwrap(), [claimed, merged]);
}

/// Two processes flush the same keys at the same time, many times over, listing them in opposite orders: nothing
/// deadlocks, every count adds up, the times and last answers are those of the earliest and latest fetch, and each
/// page version read is reported new by exactly one flush. (SQLite: one process's flushes at once, serialized by
/// its writer.)
async fn crawler_flushes_of_two_processes_combine(b: Backend) {
    let (app, store) = store(b, NO_RECORDER).await;
    let other = match b {
        Backend::Postgres | Backend::Pooler => app.another_process().await.store.clone(),
        Backend::Sqlite => store.clone(),
    };
    let crawlers = ["bingbot", "googlebot"];
    let keys: Vec<(String, &str)> = (1..=60).flat_map(|p| crawlers.map(|c| (format!("sitemap-{p}.xml"), c))).collect();
    let rounds = 12i64;
    let (mut new_mine, mut new_theirs) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // This process fetched each key once, the other twice, both within the round's 100 µs.
        let flush = |fetches: i64, offset: i64| -> Vec<FetchRecord> {
            keys.iter()
                .map(|(resource, crawler)| FetchRecord {
                    fetches,
                    last_etag: format!("\"{round}-{offset}\""),
                    ..fetched(resource, crawler, T + round * 100 + offset, T + round * 100 + offset + 10)
                })
                .collect()
        };
        let mine = flush(1, 0);
        let mut theirs = flush(2, 5);
        theirs.reverse();
        // Each page's version changes every third round; both read it, this process first.
        let reads = |offset: i64| -> Vec<PageRead> {
            keys.iter()
                .enumerate()
                .map(|(i, (_, crawler))| page_read(i as i64 / 2 + 1, crawler, T + round / 3, T + round * 100 + offset))
                .collect()
        };
        let (reads_mine, mut reads_theirs) = (reads(0), reads(5));
        reads_theirs.reverse();
        let (a, z) = tokio::join!(store.record_crawls(&mine, &reads_mine), other.record_crawls(&theirs, &reads_theirs));
        new_mine.extend(a.unwrap());
        new_theirs.extend(z.unwrap());
    }
    let last = rounds - 1;
    let records = store.crawler_fetches(1).await.unwrap();
    assert_eq!(records.len(), keys.len());
    for r in &records {
        assert_eq!((r.fetches, r.first_us, r.last_us), (3 * rounds, T, T + last * 100 + 15), "{r:?}");
        assert_eq!(r.last_etag, format!("\"{last}-5\""), "{r:?}");
    }
    // Every version (4 of each page and crawler) is new to exactly one of the flushes, with the time it was read.
    let mut new: Vec<PageRead> = new_mine.iter().chain(&new_theirs).cloned().collect();
    assert_eq!(new.len(), keys.len() * 4, "mine {}, theirs {}", new_mine.len(), new_theirs.len());
    new.sort_by_key(|r| (r.page_id, r.crawler.clone(), r.version_us));
    new.dedup_by_key(|r| (r.page_id, r.crawler.clone(), r.version_us));
    assert_eq!(new.len(), keys.len() * 4, "no version is new twice");
    // Stored: the earliest read of each version, whichever process's flush inserted it.
    let seen = store.crawler_seen(1, None).await.unwrap();
    assert_eq!(seen.len(), keys.len());
    assert!(seen.iter().all(|r| r.version_us == T + last / 3 && r.first_us == T + 900), "{seen:?}");
}

/// A page version is reported new by the flush that first records it, and never again: not by a flush of the same
/// version, nor by one that read it earlier (which moves its first read back), nor by two reads of it in one flush.
async fn a_page_read_is_new_once(b: Backend) {
    let (_app, store) = store(b, NO_RECORDER).await;
    let read = page_read(1, "googlebot", T, T + 100);
    assert_eq!(store.record_crawls(&[], std::slice::from_ref(&read)).await.unwrap(), std::slice::from_ref(&read));
    assert_eq!(store.record_crawls(&[], std::slice::from_ref(&read)).await.unwrap(), []);
    let earlier = page_read(1, "googlebot", T, T + 50);
    assert_eq!(store.record_crawls(&[], std::slice::from_ref(&earlier)).await.unwrap(), []);
    assert_eq!(
        store.crawler_seen(1, Some(1)).await.unwrap(),
        std::slice::from_ref(&earlier),
        "the first read moved back"
    );
    assert_eq!(store.record_crawls(&[], &[page_read(1, "googlebot", T, T + 200)]).await.unwrap(), []);
    assert_eq!(store.crawler_seen(1, Some(1)).await.unwrap(), std::slice::from_ref(&earlier), "and never forwards");
    // A flush of a known version and a new one (read twice by this process): the new one alone, once, its
    // earliest read.
    let flush = [page_read(1, "googlebot", T + 1, T + 300), earlier, page_read(1, "googlebot", T + 1, T + 250)];
    assert_eq!(store.record_crawls(&[], &flush).await.unwrap(), [page_read(1, "googlebot", T + 1, T + 250)]);
    // Another crawler's read of the same version is its own.
    let bing = page_read(1, "bingbot", T + 1, T + 400);
    assert_eq!(store.record_crawls(&[], std::slice::from_ref(&bing)).await.unwrap(), [bing]);
}

const TWO_SITES: &str = "default=https://www.example.com/, shop=https://shop.example.com/";

/// `crawler_seen` gives, per page and crawler, the newest version read, whatever order the reads were flushed in;
/// of one page or of all, of one site only.
async fn crawler_seen_is_the_newest_version_of_each_page(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_SITES", TWO_SITES), NO_RECORDER[0]]).await;
    let shop = store.sites().by_name("shop").unwrap().id;
    store
        .record_crawls(&[], &[page_read(1, "googlebot", T + 3, T + 30), page_read(1, "bingbot", T + 1, T + 10)])
        .await
        .unwrap();
    store
        .record_crawls(&[], &[page_read(1, "googlebot", T + 1, T + 10), page_read(2, "googlebot", T + 2, T + 20)])
        .await
        .unwrap();
    store.record_crawls(&[], &[page_read(1, "googlebot", T + 2, T + 20)]).await.unwrap();
    let in_shop = PageRead { site: shop, ..page_read(1, "googlebot", T + 9, T + 90) };
    store.record_crawls(&[], std::slice::from_ref(&in_shop)).await.unwrap();
    let newest = [
        page_read(1, "bingbot", T + 1, T + 10),
        page_read(1, "googlebot", T + 3, T + 30),
        page_read(2, "googlebot", T + 2, T + 20),
    ];
    assert_eq!(store.crawler_seen(1, None).await.unwrap(), newest);
    assert_eq!(store.crawler_seen(1, Some(1)).await.unwrap(), newest[..2]);
    assert_eq!(store.crawler_seen(1, Some(2)).await.unwrap(), newest[2..]);
    assert_eq!(store.crawler_seen(1, Some(3)).await.unwrap(), []);
    assert_eq!(store.crawler_seen(shop, None).await.unwrap(), [in_shop]);
}

/// `crawler_lags` lists the lags of the reads first made in the window, newest first, at most `limit`, of one
/// site; through the `(site_id, first_us, …)` index, never a scan of the table.
async fn crawler_lags_are_a_window_newest_first(b: Backend) {
    use sitemapd::store::LAGS_SQL;
    let (app, store) = store(b, &[("SITEMAPD_SITES", TWO_SITES), NO_RECORDER[0]]).await;
    let shop = store.sites().by_name("shop").unwrap().id;
    // Page p changed at T + p and was read p seconds later (googlebot) or 2p (bingbot).
    let reads: Vec<PageRead> = (1..=10)
        .flat_map(|p| {
            [
                page_read(p, "googlebot", T + p, T + p + p * 1_000_000),
                page_read(p, "bingbot", T + p, T + p + 2 * p * 1_000_000),
            ]
        })
        .collect();
    store.record_crawls(&[], &reads).await.unwrap();
    store.record_crawls(&[], &[PageRead { site: shop, ..page_read(1, "googlebot", T, T + 99_000_000) }]).await.unwrap();
    let since = T + 8_000_000; // the reads of googlebot's page 8 and on, bingbot's page 4 and on
    let lags = store.crawler_lags(1, since, 100).await.unwrap();
    let mut expected: Vec<(i64, String, i64)> = reads
        .iter()
        .filter(|r| r.first_us >= since)
        .map(|r| (r.first_us, r.crawler.clone(), r.first_us - r.version_us))
        .collect();
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<(String, i64)> = expected.into_iter().map(|(_, c, lag)| (c, lag)).collect();
    assert_eq!(expected.len(), 10);
    assert_eq!(lags, expected);
    assert_eq!(lags[0], ("bingbot".to_owned(), 20_000_000), "the newest read: bingbot's of page 10");
    assert_eq!(store.crawler_lags(1, since, 3).await.unwrap(), expected[..3]);
    assert_eq!(store.crawler_lags(1, T + 100_000_000, 3).await.unwrap(), []);
    assert_eq!(store.crawler_lags(shop, 0, 10).await.unwrap(), [("googlebot".to_owned(), 99_000_000)]);
    // Many older reads besides: the window is read through the index.
    let older = match b {
        Backend::Sqlite => {
            "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) \
             INSERT INTO crawler_reads (site_id, page_id, crawler, version_us, first_us) \
             SELECT 1, i, 'googlebot', i, i FROM n"
        }
        Backend::Postgres | Backend::Pooler => {
            "INSERT INTO crawler_reads (site_id, page_id, crawler, version_us, first_us) \
             SELECT 1, i, 'googlebot', i, i FROM generate_series(1, 20000) AS i"
        }
    };
    app.exec_sql(older).await;
    app.exec_sql("ANALYZE crawler_reads").await;
    let plan = plan_of(b, &app.db.direct_url, LAGS_SQL, &[1, since, 100], None).await;
    assert!(plan.contains("crawler_reads_site_first"), "{plan}");
    assert!(!plan.contains("Seq Scan") && !plan.contains("SCAN crawler_reads") && !plan.contains("Sort"), "{plan}");
    if b == Backend::Sqlite {
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}

/// The purge deletes the reads made before its time that a newer version of the same page read by the same crawler
/// supersedes: the newest read of each page and crawler stays, however old; fetch records stay.
async fn the_crawler_purge_keeps_the_newest_read(b: Backend) {
    let (_app, store) = store(b, NO_RECORDER).await;
    let kept = [
        page_read(1, "bingbot", T + 1, T + 1),     // old, but bingbot's newest of page 1
        page_read(1, "googlebot", T + 3, T + 3),   // old, but the newest
        page_read(2, "googlebot", T + 2, T + 100), // the newest, read after the purge's time
        page_read(3, "googlebot", T + 1, T + 100), // superseded, but read after the purge's time
    ];
    let purged = [
        page_read(1, "googlebot", T + 1, T + 1),
        page_read(1, "googlebot", T + 2, T + 2),
        page_read(2, "googlebot", T + 1, T + 1),
    ];
    let newer_of_3 = page_read(3, "googlebot", T + 2, T + 101);
    let all: Vec<PageRead> = kept.iter().chain(&purged).chain([&newer_of_3]).cloned().collect();
    let record = fetched("sitemap-1.xml", "googlebot", T, T + 1);
    store.record_crawls(std::slice::from_ref(&record), &all).await.unwrap();
    assert_eq!(store.purge_crawls(T + 50).await.unwrap(), 3);
    let mut left = store.crawler_lags(1, 0, 100).await.unwrap();
    let mut expected: Vec<(String, i64)> =
        kept.iter().chain([&newer_of_3]).map(|r| (r.crawler.clone(), r.first_us - r.version_us)).collect();
    left.sort();
    expected.sort();
    assert_eq!(left, expected);
    assert_eq!(store.purge_crawls(T + 50).await.unwrap(), 0, "nothing more before that time");
    assert_eq!(store.purge_crawls(T + 1_000).await.unwrap(), 1, "page 3's older version, once its time passed");
    let newest = [kept[0].clone(), kept[1].clone(), kept[2].clone(), newer_of_3];
    assert_eq!(store.crawler_seen(1, None).await.unwrap(), newest);
    assert_eq!(store.crawler_fetches(1).await.unwrap(), [record]);
}

/// Telemetry is not a change: flushes and purges leave a site's change counter, its page table, its news stamp
/// and its removed-URLs stamp as they were (the serving path re-reads the page table when the counter moves).
async fn crawler_telemetry_moves_no_change_counter(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_REMOVED_RETENTION", "30d"), NO_RECORDER[0]]).await;
    store.upsert(&entries((0..5).map(|i| format!("p{i}")))).await.unwrap();
    store.delete(&[loc("p0")]).await.unwrap();
    let state = async || {
        let (changes, pages) = store.page_table(1).await.unwrap();
        let news = store.news(1, 0, i64::MAX, 10).await.unwrap().changed_us;
        (changes, pages, news, store.removed_stamp(1).await.unwrap())
    };
    let before = state().await;
    assert!(before.0 > 0 && before.3 > 0, "the writes moved the counter and the removed stamp: {before:?}");
    let fetches = [FetchRecord { page_id: Some(1), ..fetched("sitemap-1.xml", "googlebot", T, T) }];
    let reads = [page_read(1, "googlebot", T, T + 1), page_read(1, "googlebot", T + 1, T + 2)];
    store.record_crawls(&fetches, &reads).await.unwrap();
    store.record_crawls(&fetches, &reads).await.unwrap();
    assert_eq!(store.purge_crawls(T + 10).await.unwrap(), 1);
    assert_eq!(state().await, before);
    assert_eq!(store.changes(1).await.unwrap(), before.0);
}

/// A flush with a row of a site the store does not serve (or a value no recorder makes) is refused whole, with the
/// row named: nothing of it is written.
async fn a_crawler_flush_with_a_bad_row_is_refused_whole(b: Backend) {
    use sitemapd::store::StoreError;
    let (_app, store) = store(b, NO_RECORDER).await;
    let good = fetched("sitemap.xml", "googlebot", T, T);
    let elsewhere = FetchRecord { site: 999, ..good.clone() };
    let e = store.record_crawls(&[good.clone(), elsewhere], &[]).await.unwrap_err();
    assert!(matches!(e, StoreError::Other(_)), "a bug to report, not an outage to retry: {e:?}");
    assert!(e.to_string().contains("site 999 is not a site this store serves"), "{e}");
    let read_elsewhere = PageRead { site: 999, ..page_read(1, "googlebot", T, T) };
    let reads = [page_read(1, "googlebot", T, T), read_elsewhere];
    let e = store.record_crawls(std::slice::from_ref(&good), &reads).await.unwrap_err();
    assert!(e.to_string().contains("page read of site 999, page 1 by googlebot"), "{e}");
    let e = store.record_crawls(&[FetchRecord { trust: "sure".into(), ..good }], &[]).await.unwrap_err();
    assert!(e.to_string().contains("trust \"sure\""), "{e}");
    assert_eq!(store.crawler_fetches(1).await.unwrap(), []);
    assert_eq!(store.crawler_seen(1, None).await.unwrap(), []);
    assert_eq!(store.crawler_fetches(999).await.unwrap(), [], "an unknown site has no records");
    assert!(store.record_crawls(&[], &[]).await.unwrap().is_empty(), "an empty flush is no error");
}

/// A write looks its locs up through the unique index on loc, even in a table the planner has no statistics for
/// yet (a first bulk load), where it would otherwise scan the whole table for every batch.
#[tokio::test]
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
async fn postgres_a_write_probes_the_loc_index_before_any_analyze() {
    use sitemapd::store::postgres::{LOOKUP_SQL, WRITE_SETTINGS_AND_NOW};
    use sqlx::{AssertSqlSafe, Connection};
    let (app, store) = store(Backend::Postgres, &[]).await;
    store.upsert(&entries((0..3000).map(|i| format!("bulk/{i}")))).await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&app.db.url).await.unwrap();
    let locs: Vec<String> = (0..2000).map(|i| loc(&format!("bulk/{}", i * 3)).as_str().to_owned()).collect();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query(WRITE_SETTINGS_AND_NOW).execute(&mut *tx).await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!("EXPLAIN {LOOKUP_SQL}")))
        .bind(locs)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    let guarded = plan.join("\n");
    assert!(guarded.contains("urls_loc_key") && !guarded.contains("Seq Scan"), "{guarded}");
}

both_backends!(
    a_page_is_read_by_an_ordered_index_scan,
    the_news_window_is_read_through_its_index,
    the_removed_window_is_read_through_its_index,
    upsert_then_find_returns_the_normalized_entry,
    counts_by_effect_and_later_duplicates_win,
    an_upsert_replaces_the_whole_entry,
    delete_counts_deleted_and_missing,
    every_write_returns_what_it_changed,
    list_after_returns_each_entry_once_across_changes,
    page_urls_lists_one_page_by_keyset,
    page_urls_is_cut_by_size,
    page_urls_is_a_range_of_the_page_index,
    pages_fill_in_order_and_a_freed_slot_is_reused,
    a_change_touches_only_its_page,
    a_page_keeps_its_gzip_way_until_it_changes,
    deleting_advances_the_page_version_and_time,
    identical_resend_changes_nothing,
    awkward_and_long_values_are_stored_exactly_in_request_order,
    a_batch_mixing_new_and_stored_records_keeps_request_order,
    a_bulk_load_plans_new_records_without_a_lookup_and_falls_back_when_one_is_stored,
    a_large_batch_is_looked_up_whole_in_either_half,
    byte_limits_hold_for_urls_of_any_length,
    an_entry_that_outgrows_its_page_moves_and_the_limits_hold,
    concurrent_writers_keep_every_invariant,
    sixteen_writers_on_shared_locs_keep_counts_exact,
    migrations_are_idempotent,
    page_state_is_shared_by_every_process,
    crawler_fetch_records_merge_by_key,
    crawler_flushes_of_two_processes_combine,
    a_page_read_is_new_once,
    crawler_seen_is_the_newest_version_of_each_page,
    crawler_lags_are_a_window_newest_first,
    the_crawler_purge_keeps_the_newest_read,
    crawler_telemetry_moves_no_change_counter,
    a_crawler_flush_with_a_bad_row_is_refused_whole,
);

// The contract through a transaction-mode PgBouncer (`SITEMAPD_DATABASE_POOLER=transaction`), but for the plan
// checks above (they read the plan on a connection of their own).
through_pooler!(
    upsert_then_find_returns_the_normalized_entry,
    counts_by_effect_and_later_duplicates_win,
    an_upsert_replaces_the_whole_entry,
    delete_counts_deleted_and_missing,
    every_write_returns_what_it_changed,
    list_after_returns_each_entry_once_across_changes,
    page_urls_lists_one_page_by_keyset,
    page_urls_is_cut_by_size,
    page_urls_is_a_range_of_the_page_index,
    pages_fill_in_order_and_a_freed_slot_is_reused,
    a_change_touches_only_its_page,
    a_page_keeps_its_gzip_way_until_it_changes,
    deleting_advances_the_page_version_and_time,
    identical_resend_changes_nothing,
    awkward_and_long_values_are_stored_exactly_in_request_order,
    a_batch_mixing_new_and_stored_records_keeps_request_order,
    a_bulk_load_plans_new_records_without_a_lookup_and_falls_back_when_one_is_stored,
    a_large_batch_is_looked_up_whole_in_either_half,
    byte_limits_hold_for_urls_of_any_length,
    an_entry_that_outgrows_its_page_moves_and_the_limits_hold,
    concurrent_writers_keep_every_invariant,
    sixteen_writers_on_shared_locs_keep_counts_exact,
    migrations_are_idempotent,
    page_state_is_shared_by_every_process,
    crawler_fetch_records_merge_by_key,
    crawler_flushes_of_two_processes_combine,
    a_page_read_is_new_once,
    crawler_seen_is_the_newest_version_of_each_page,
    crawler_lags_are_a_window_newest_first,
    the_crawler_purge_keeps_the_newest_read,
    crawler_telemetry_moves_no_change_counter,
    a_crawler_flush_with_a_bad_row_is_refused_whole,
);
