//! The store's feed reads (`FeedReads`, migration 0016): the newest records of a site or a section by stored change
//! time, newest first, excluded records left out, and the newest tombstones, each through an index.

use sitemapd::domain::{Entry, LastMod, Loc, Priority, Section};
use sitemapd::store::{FEED_REMOVED_SECTION_SQL, FEED_REMOVED_SQL, FEED_SQL, FeedRead, Store};

use super::{entries, entry, loc, plan_of, store};
use crate::both_backends;
use crate::support::Backend;

const TOMBSTONES: &[(&str, &str)] = &[("SITEMAPD_REMOVED_RETENTION", "30d")];

fn in_section(path: &str, section: &str) -> Entry {
    Entry { section: Some(Section::parse(section).unwrap()), ..entry(path) }
}

/// The paths of a feed's entries (the loc after the public URL), in order.
fn paths(read: &FeedRead) -> Vec<String> {
    read.entries.iter().map(|e| e.loc.rsplit('/').next().unwrap().to_owned()).collect()
}

/// The paths of a feed's tombstones, in order.
fn gone(read: &FeedRead) -> Vec<String> {
    read.deleted.iter().map(|d| d.loc.rsplit('/').next().unwrap().to_owned()).collect()
}

/// The id of `site` 1's section `name`.
async fn section_id(store: &dyn Store, name: &str) -> i64 {
    let sections = store.sections(1).await.unwrap();
    sections.iter().find(|(_, s)| s.as_str() == name).map(|(id, _)| *id).expect("the section is stored")
}

/// Entries are the newest records by the time their change was stored, newest first (a write's records, which share
/// its time, the later id first), at most `limit`; a record changed again moves to the top with its new time.
async fn a_feed_lists_the_newest_changes_first(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    for batch in 0..10 {
        store.upsert(&entries((0..3).map(|i| format!("e{}", batch * 3 + i)))).await.unwrap();
    }
    let read = store.feed(1, None, 10, false).await.unwrap();
    assert_eq!(paths(&read), ["e29", "e28", "e27", "e26", "e25", "e24", "e23", "e22", "e21", "e20"]);
    assert!(read.deleted.is_empty());
    let times: Vec<i64> = read.entries.iter().map(|e| e.changed_us).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    assert!(times[2] > times[3], "the next write is later: {times:?}");
    assert_eq!(store.feed(1, None, 100, true).await.unwrap().entries.len(), 30, "all, when fewer than the limit");

    let changed = Entry { lastmod: Some(LastMod::parse("2024-05-01T08:20+02:00").unwrap()), ..entry("e3") };
    store.upsert(&[changed]).await.unwrap();
    let read = store.feed(1, None, 3, false).await.unwrap();
    assert_eq!(paths(&read), ["e3", "e29", "e28"]);
    assert_eq!(read.entries[0].lastmod.as_deref(), Some("2024-05-01T06:20:00Z"), "the stored lastmod");
    assert!(read.entries[0].changed_us > read.entries[1].changed_us);
    let found = store.find(&loc("e3")).await.unwrap().unwrap();
    assert_eq!(read.entries[0].id, found.url.id);
}

/// A section's feed holds its section's records only; the site's merges every section's (the default one
/// included) by time, and is cut at the limit across them. A change in one section moves no other section's feed.
async fn sections_have_feeds_of_their_own(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    store.upsert(&[entry("d1"), in_section("a1", "alpha")]).await.unwrap();
    store.upsert(&[in_section("b1", "beta"), in_section("a2", "alpha")]).await.unwrap();
    store.upsert(&[entry("d2")]).await.unwrap();
    store.upsert(&[in_section("b2", "beta")]).await.unwrap();
    let (alpha, beta) = (section_id(&*store, "alpha").await, section_id(&*store, "beta").await);

    assert_eq!(paths(&store.feed(1, None, 10, false).await.unwrap()), ["b2", "d2", "a2", "b1", "a1", "d1"]);
    assert_eq!(paths(&store.feed(1, None, 4, false).await.unwrap()), ["b2", "d2", "a2", "b1"]);
    assert_eq!(paths(&store.feed(1, Some(alpha), 10, false).await.unwrap()), ["a2", "a1"]);
    assert_eq!(paths(&store.feed(1, Some(beta), 1, false).await.unwrap()), ["b2"]);
    assert_eq!(paths(&store.feed(1, Some(0), 10, false).await.unwrap()), ["d2", "d1"], "the default section");
    assert!(store.feed(1, Some(beta + 1), 10, true).await.unwrap().entries.is_empty(), "no such section");

    let before = store.feed(1, Some(beta), 10, true).await.unwrap();
    let changed = Entry { priority: Some(Priority::new(0.2).unwrap()), ..in_section("a1", "alpha") };
    store.upsert(&[changed]).await.unwrap();
    assert_eq!(paths(&store.feed(1, Some(alpha), 10, false).await.unwrap()), ["a1", "a2"]);
    assert_eq!(paths(&store.feed(1, None, 2, false).await.unwrap()), ["a1", "b2"]);
    assert_eq!(store.feed(1, Some(beta), 10, true).await.unwrap(), before, "another section's feed is as it was");
}

/// A record left out of its page (URL health) is in no feed; the next one takes its place.
async fn excluded_records_are_in_no_feed(b: Backend) {
    let (app, store) = store(b, &[]).await;
    for i in 0..5 {
        store.upsert(&[entry(&format!("x{i}"))]).await.unwrap();
    }
    app.exec_sql(&format!(
        "UPDATE urls SET excluded = true WHERE loc IN ('{}', '{}')",
        loc("x4").as_str(),
        loc("x2").as_str()
    ))
    .await;
    assert_eq!(paths(&store.feed(1, None, 3, false).await.unwrap()), ["x3", "x1", "x0"]);
    assert_eq!(paths(&store.feed(1, Some(0), 2, false).await.unwrap()), ["x3", "x1"]);
}

/// Records not written since migration 0015 (no stored change time) are in no feed.
async fn records_without_a_change_time_are_in_no_feed(b: Backend) {
    let (app, store) = store(b, &[]).await;
    store.upsert(&entries((0..3).map(|i| format!("o{i}")))).await.unwrap();
    app.exec_sql(&format!("UPDATE urls SET changed_us = NULL WHERE loc <> '{}'", loc("o1").as_str())).await;
    assert_eq!(paths(&store.feed(1, None, 10, false).await.unwrap()), ["o1"]);
}

/// Tombstones, asked for: the site's newest, newest first; a section's own only (the delete keeps the section its
/// record was in); one kept before migration 0016 (no section) in the site's feed only.
async fn tombstones_by_site_and_section(b: Backend) {
    let (app, store) = store(b, TOMBSTONES).await;
    store.upsert(&[entry("d1"), entry("d2"), in_section("a1", "alpha"), in_section("a2", "alpha")]).await.unwrap();
    let alpha = section_id(&*store, "alpha").await;
    store.delete(&[loc("d1")]).await.unwrap();
    store.delete(&[loc("a1")]).await.unwrap();
    store.delete(&[loc("a2"), loc("d2")]).await.unwrap();
    app.exec_sql(&format!("INSERT INTO removed (site_id, loc, removed_us) VALUES (1, '{}', 5)", loc("old").as_str()))
        .await;

    let site = store.feed(1, None, 10, true).await.unwrap();
    assert_eq!(gone(&site), ["d2", "a2", "a1", "d1", "old"], "newest first; ties: loc, descending");
    assert!(site.deleted.windows(2).all(|w| w[0].removed_us >= w[1].removed_us));
    assert!(site.entries.is_empty());
    assert_eq!(gone(&store.feed(1, None, 2, true).await.unwrap()), ["d2", "a2"]);
    assert_eq!(gone(&store.feed(1, Some(alpha), 10, true).await.unwrap()), ["a2", "a1"]);
    assert_eq!(gone(&store.feed(1, Some(0), 10, true).await.unwrap()), ["d2", "d1"]);
    assert!(store.feed(1, None, 10, false).await.unwrap().deleted.is_empty(), "not asked for");

    // Deleted again from another section: the tombstone moves with it.
    store.upsert(&[in_section("d1", "alpha")]).await.unwrap();
    store.delete(&[loc("d1")]).await.unwrap();
    assert_eq!(gone(&store.feed(1, Some(alpha), 10, true).await.unwrap()), ["d1", "a2", "a1"]);
    assert_eq!(gone(&store.feed(1, Some(0), 10, true).await.unwrap()), ["d2"]);
}

/// An identical re-send keeps every record's stored change time, so the feed is as it was.
async fn an_identical_resend_leaves_the_feed(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_PAGE_MAX_URLS", "4")]).await;
    let batch = entries((0..10).map(|i| format!("s{i}")));
    store.upsert(&batch).await.unwrap();
    store.upsert(&[entry("later")]).await.unwrap();
    let before = store.feed(1, None, 20, true).await.unwrap();
    store.upsert(&batch).await.unwrap();
    assert_eq!(store.feed(1, None, 20, true).await.unwrap(), before);
}

/// A loc stored again after its delete leaves the removed list (and so the feed's tombstones) and is an entry.
async fn a_recreated_loc_leaves_the_removed_list(b: Backend) {
    let (_app, store) = store(b, TOMBSTONES).await;
    store.upsert(&[entry("r1"), in_section("r2", "alpha")]).await.unwrap();
    store.delete(&[loc("r1"), loc("r2")]).await.unwrap();
    assert_eq!(gone(&store.feed(1, None, 10, true).await.unwrap()), ["r2", "r1"]);
    store.upsert(&[entry("r1"), in_section("r2", "alpha")]).await.unwrap();
    let read = store.feed(1, None, 10, true).await.unwrap();
    assert!(read.deleted.is_empty(), "{:?}", read.deleted);
    assert_eq!(paths(&read), ["r2", "r1"]);
    assert!(store.removed(1, 0, 10).await.unwrap().entries.is_empty());
}

/// A section's entries are one forward range of `urls_feed`, stopped at the limit: no sort, no scan of the table.
/// The tombstones are a backward range of their index. On both backends, after `ANALYZE`.
async fn the_feed_is_read_through_its_indexes(b: Backend) {
    let (app, store) = store(b, &[("SITEMAPD_REMOVED_RETENTION", "30d"), ("SITEMAPD_PAGE_MAX_URLS", "500")]).await;
    for chunk in 0..6 {
        let batch: Vec<Entry> = (0..500)
            .map(|i| {
                let path = format!("p{chunk}-{i}");
                if i % 2 == 0 { entry(&path) } else { in_section(&path, "alpha") }
            })
            .collect();
        store.upsert(&batch).await.unwrap();
    }
    let doomed: Vec<Loc> = (0..300).map(|i| loc(&format!("p0-{i}"))).collect();
    store.delete(&doomed).await.unwrap();
    let alpha = section_id(&*store, "alpha").await;
    // Many older tombstones besides, as a site that removes often has: the newest are a small part of them.
    let older = match b {
        Backend::Sqlite => {
            "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) \
             INSERT INTO removed (site_id, loc, removed_us, section_id) \
             SELECT 1, 'https://www.example.com/old/' || i, i, i % 2 FROM n"
        }
        Backend::Postgres | Backend::Pooler => {
            "INSERT INTO removed (site_id, loc, removed_us, section_id) \
             SELECT 1, 'https://www.example.com/old/' || i, i, i % 2 FROM generate_series(1, 20000) AS i"
        }
    };
    app.exec_sql(older).await;
    app.exec_sql("ANALYZE").await;
    for (sql, binds, index) in [
        (FEED_SQL, &[1, alpha, 200][..], "urls_feed"),
        (FEED_SQL, &[1, 0, 200][..], "urls_feed"),
        (FEED_REMOVED_SQL, &[1, 200][..], "removed_site_time"),
        (FEED_REMOVED_SECTION_SQL, &[1, alpha, 200][..], "removed_section_time"),
    ] {
        let plan = plan_of(b, &app.db.direct_url, sql, binds, None).await;
        assert!(plan.contains(index), "{sql}:\n{plan}");
        for bad in ["Sort", "TEMP B-TREE", "Bitmap", "Seq Scan", "SCAN urls", "SCAN removed"] {
            assert!(!plan.contains(bad), "{sql} uses {bad}:\n{plan}");
        }
        if matches!(b, Backend::Postgres) {
            assert!(plan.starts_with("Limit"), "{sql}:\n{plan}");
        }
    }
}

both_backends!(
    a_feed_lists_the_newest_changes_first,
    sections_have_feeds_of_their_own,
    excluded_records_are_in_no_feed,
    records_without_a_change_time_are_in_no_feed,
    tombstones_by_site_and_section,
    an_identical_resend_leaves_the_feed,
    a_recreated_loc_leaves_the_removed_list,
    the_feed_is_read_through_its_indexes,
);
