//! Publishing's log in the store (`PublishLog`, migration 0019): a target's lease (claimed, renewed, released with
//! the pass's outcome, taken over once it ran out, won by one of two claims made at once), the objects it holds
//! (recorded, marked gone, unmarked, forgotten) and none of those writes without the claim, and every target's
//! status.

use std::sync::Arc;
use std::time::Duration;

use sitemapd::store::{PublishStatus, PublishedObject, Store};

use super::{TWO_SITES, store};
use crate::both_backends;
use crate::support::Backend;

const S3: &str = "s3://bucket/a/b/";
const DIR: &str = "file:///srv/www/";
const LEASE: Duration = Duration::from_secs(60);

fn keys(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

async fn claim(store: &dyn Store, target: &str) -> i64 {
    store.publish_claim(1, target, LEASE).await.unwrap().expect("no other claim holds the target")
}

async fn status(store: &dyn Store, target: &str) -> PublishStatus {
    let all = store.publish_status(None).await.unwrap();
    all.into_iter().find(|s| s.target == target).expect("the target has a row")
}

/// A target's objects with whether each is marked gone, not for how long (which grows).
async fn objects(store: &dyn Store, target: &str) -> Vec<(String, String, i64, bool)> {
    let objects = store.published_objects(target).await.unwrap();
    objects.into_iter().map(|o| (o.key, o.version, o.bytes, o.gone_for.is_some())).collect()
}

async fn object(store: &dyn Store, target: &str, key: &str) -> PublishedObject {
    let objects = store.published_objects(target).await.unwrap();
    objects.into_iter().find(|o| o.key == key).expect("the object is recorded")
}

/// Claims `target` once a claim is refused no more (a lease running out), waiting up to ten seconds.
async fn claim_once_free(store: &dyn Store, target: &str) -> i64 {
    for _ in 0..200 {
        if let Some(id) = store.publish_claim(1, target, LEASE).await.unwrap() {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the lease of {target} never ran out");
}

/// The first claim adds the target's row and holds it: no other claim takes it, renewing keeps it, and once it is
/// released the next claim (another id) does. A claim released or taken over renews and releases nothing.
async fn a_claim_holds_the_target_until_released(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    assert!(store.publish_status(None).await.unwrap().is_empty());
    let first = claim(&*store, S3).await;
    assert_ne!(first, 0);
    assert_eq!(store.publish_claim(1, S3, LEASE).await.unwrap(), None, "held by the first claim");
    let held = status(&*store, S3).await;
    assert_eq!(
        held,
        PublishStatus {
            target: S3.into(),
            site: 1,
            objects: 0,
            bytes: 0,
            gone: 0,
            since_complete: None,
            failures: 0,
            last_error: None,
            busy: true,
        }
    );
    assert!(store.publish_renew(S3, first, LEASE).await.unwrap());
    assert_eq!(store.publish_claim(1, S3, Duration::ZERO).await.unwrap(), None, "renewed: still held");
    // Another target is a row of its own.
    let other = claim(&*store, DIR).await;
    assert_ne!(other, first);

    store.publish_release(S3, first, Ok(())).await.unwrap();
    let released = status(&*store, S3).await;
    assert!(!released.busy && released.since_complete.is_some(), "{released:?}");
    assert!(!store.publish_renew(S3, first, LEASE).await.unwrap(), "released: the claim holds nothing");
    let second = claim(&*store, S3).await;
    assert_ne!(second, first);
    store.publish_release(S3, first, Err("a stale claim")).await.unwrap();
    let still = status(&*store, S3).await;
    assert!(still.busy && still.failures == 0 && still.last_error.is_none(), "a stale release is a no-op: {still:?}");
    assert!(store.publish_renew(S3, second, LEASE).await.unwrap());
}

/// A failed pass counts a failure and keeps its message, cut at 1,000 characters; a complete pass resets them and
/// stamps its end. Either frees the lease.
async fn a_release_keeps_the_outcome(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    let c = claim(&*store, S3).await;
    store.publish_release(S3, c, Err("PUT sitemap-1.xml: 503 Slow Down")).await.unwrap();
    let failed = status(&*store, S3).await;
    assert_eq!(
        (failed.failures, failed.last_error.as_deref(), failed.since_complete, failed.busy),
        (1, Some("PUT sitemap-1.xml: 503 Slow Down"), None, false)
    );
    let long = format!("{}{}", "é".repeat(999), "xyz");
    let c = claim(&*store, S3).await;
    store.publish_release(S3, c, Err(&long)).await.unwrap();
    let failed = status(&*store, S3).await;
    assert_eq!(failed.failures, 2);
    assert_eq!(failed.last_error, Some(format!("{}x", "é".repeat(999))), "the first 1,000 characters");

    let c = claim(&*store, S3).await;
    store.publish_release(S3, c, Ok(())).await.unwrap();
    let complete = status(&*store, S3).await;
    assert_eq!((complete.failures, complete.last_error, complete.busy), (0, None, false));
    let since = complete.since_complete.expect("a complete pass ended");
    // A later failure keeps the last complete pass's end.
    let c = claim(&*store, S3).await;
    // Not a gate: 20 ms between the complete pass and the failure, so that the age read below has grown.
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.publish_release(S3, c, Err("later")).await.unwrap();
    let failed = status(&*store, S3).await;
    assert_eq!(failed.failures, 1);
    assert!(failed.since_complete.expect("still the complete pass's") > since, "{failed:?}");
}

/// A claim whose lease ran out is taken by the next claim; every write of the first claim is then refused and
/// changes nothing.
async fn an_expired_lease_can_be_taken(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    let dead = store.publish_claim(1, S3, Duration::from_millis(50)).await.unwrap().expect("a new target");
    assert!(store.publish_record(S3, dead, "sitemap-1.xml", "\"v1\"", 10).await.unwrap(), "held until taken");
    let next = claim_once_free(&*store, S3).await;
    assert_ne!(dead, next);
    assert!(status(&*store, S3).await.busy);
    assert!(!store.publish_renew(S3, dead, LEASE).await.unwrap());
    assert!(!store.publish_record(S3, dead, "sitemap-1.xml", "\"v2\"", 20).await.unwrap());
    assert!(!store.publish_record(S3, dead, "sitemap-2.xml", "\"v2\"", 20).await.unwrap());
    assert!(!store.publish_mark_gone(S3, dead, &keys(&["sitemap-1.xml"])).await.unwrap());
    assert!(!store.publish_forget(S3, dead, "sitemap-1.xml").await.unwrap());
    store.publish_release(S3, dead, Err("too late")).await.unwrap();
    let objects = store.published_objects(S3).await.unwrap();
    let recorded = PublishedObject { key: "sitemap-1.xml".into(), version: "\"v1\"".into(), bytes: 10, gone_for: None };
    assert_eq!(objects, [recorded]);
    let after = status(&*store, S3).await;
    assert!(after.busy && after.failures == 0 && after.last_error.is_none(), "{after:?}");
    assert!(store.publish_mark_gone(S3, next, &keys(&["sitemap-1.xml"])).await.unwrap());
    assert!(!store.publish_unmark(S3, dead, &keys(&["sitemap-1.xml"])).await.unwrap());
    assert!(object(&*store, S3, "sitemap-1.xml").await.gone_for.is_some(), "still marked");
}

/// Two claims of one target made at once, many times over (a new target, then the same one released): exactly
/// one wins each time. In Postgres each is made by another store (another process's pool), concurrently.
async fn of_two_claims_at_once_one_wins(b: Backend) {
    let (app, store) = store(b, &[]).await;
    let other: Arc<dyn Store> = match b {
        Backend::Sqlite => store.clone(),
        Backend::Postgres | Backend::Pooler => app.another_process().await.store.clone(),
    };
    for round in 0..40 {
        let target = format!("s3://bucket/{}/", round % 5);
        let (first, second) =
            tokio::join!(store.publish_claim(1, &target, LEASE), other.publish_claim(1, &target, LEASE));
        let won: Vec<i64> = [first.unwrap(), second.unwrap()].into_iter().flatten().collect();
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        assert!(store.publish_record(&target, won[0], "sitemap.xml", &format!("\"{round}\""), 1).await.unwrap());
        store.publish_release(&target, won[0], Ok(())).await.unwrap();
    }
    let versions: Vec<String> =
        store.published_objects("s3://bucket/0/").await.unwrap().into_iter().map(|o| o.version).collect();
    assert_eq!(versions, ["\"35\""]);
}

/// Recording adds or replaces an object (and clears its mark); marking stamps the keys not marked yet, a mark
/// already there keeping its time, so that the time gone grows; unmarking clears marks; forgetting deletes. Keys
/// not recorded are left alone, and objects are listed in key order, byte for byte.
async fn objects_are_recorded_marked_and_forgotten(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    let c = claim(&*store, S3).await;
    assert!(store.published_objects(S3).await.unwrap().is_empty());
    for (key, version, bytes) in [
        ("a/b/sitemap.xml", "\"i1\"", 300),
        ("a/b/sitemap-2.xml", "\"p2\"", 2000),
        ("a/b/sitemap-10.xml", "\"p10\"", 1000),
        ("a/b/sitemap-Z.xml", "\"z\"", 5),
    ] {
        assert!(store.publish_record(S3, c, key, version, bytes).await.unwrap());
    }
    let listed: Vec<(String, String, i64)> =
        store.published_objects(S3).await.unwrap().into_iter().map(|o| (o.key, o.version, o.bytes)).collect();
    let expected = [
        ("a/b/sitemap-10.xml", "\"p10\"", 1000),
        ("a/b/sitemap-2.xml", "\"p2\"", 2000),
        ("a/b/sitemap-Z.xml", "\"z\"", 5),
        ("a/b/sitemap.xml", "\"i1\"", 300),
    ];
    let expected: Vec<(String, String, i64)> =
        expected.iter().map(|(k, v, n)| ((*k).into(), (*v).into(), *n)).collect();
    assert_eq!(listed, expected, "in byte order");
    assert!(store.publish_record(S3, c, "a/b/sitemap.xml", "\"i2\"", 310).await.unwrap());
    let index = object(&*store, S3, "a/b/sitemap.xml").await;
    assert_eq!((index.version.as_str(), index.bytes, index.gone_for), ("\"i2\"", 310, None));

    assert!(store.publish_mark_gone(S3, c, &keys(&["a/b/sitemap-2.xml", "a/b/never.xml"])).await.unwrap());
    let first = object(&*store, S3, "a/b/sitemap-2.xml").await.gone_for.expect("marked");
    // Not a gate: 30 ms for the mark's age to grow between the two reads (asserted below).
    tokio::time::sleep(Duration::from_millis(30)).await;
    let later = object(&*store, S3, "a/b/sitemap-2.xml").await.gone_for.expect("marked");
    assert!(later > first, "gone for longer: {first:?}, then {later:?}");
    assert!(store.publish_mark_gone(S3, c, &keys(&["a/b/sitemap-2.xml", "a/b/sitemap-10.xml"])).await.unwrap());
    let kept = object(&*store, S3, "a/b/sitemap-2.xml").await.gone_for.expect("marked");
    let new = object(&*store, S3, "a/b/sitemap-10.xml").await.gone_for.expect("marked");
    assert!(kept > new && kept >= later, "the first mark keeps its time: {kept:?}, {new:?}");
    assert!(store.published_objects(S3).await.unwrap().iter().all(|o| o.key != "a/b/never.xml"));
    assert!(store.publish_mark_gone(S3, c, &[]).await.unwrap(), "no key: held, nothing to mark");

    assert!(store.publish_unmark(S3, c, &keys(&["a/b/sitemap-10.xml", "a/b/sitemap-Z.xml"])).await.unwrap());
    assert_eq!(object(&*store, S3, "a/b/sitemap-10.xml").await.gone_for, None);
    assert_eq!(object(&*store, S3, "a/b/sitemap-Z.xml").await.gone_for, None, "never marked: unchanged");
    assert!(store.publish_record(S3, c, "a/b/sitemap-2.xml", "\"p2b\"", 2100).await.unwrap());
    assert_eq!(object(&*store, S3, "a/b/sitemap-2.xml").await.gone_for, None, "recorded again: named");

    assert!(store.publish_mark_gone(S3, c, &keys(&["a/b/sitemap-Z.xml"])).await.unwrap());
    assert!(store.publish_forget(S3, c, "a/b/sitemap-Z.xml").await.unwrap());
    assert!(store.publish_forget(S3, c, "a/b/never.xml").await.unwrap(), "held: nothing to forget");
    let left: Vec<String> = store.published_objects(S3).await.unwrap().into_iter().map(|o| o.key).collect();
    assert_eq!(left, ["a/b/sitemap-10.xml", "a/b/sitemap-2.xml", "a/b/sitemap.xml"]);
    // Another target's objects are its own.
    let d = claim(&*store, DIR).await;
    assert!(store.publish_record(DIR, d, "a/b/sitemap.xml", "\"x\"", 1).await.unwrap());
    assert!(store.publish_forget(DIR, d, "a/b/sitemap.xml").await.unwrap());
    assert_eq!(store.published_objects(S3).await.unwrap().len(), 3);
    assert!(store.published_objects(DIR).await.unwrap().is_empty());
}

/// Without the claim (a stale one, another target's, one never made), every write returns false and changes
/// nothing.
async fn writes_without_the_claim_are_refused(b: Backend) {
    let (_app, store) = store(b, &[]).await;
    let stale = claim(&*store, S3).await;
    assert!(store.publish_record(S3, stale, "k1", "\"v1\"", 1).await.unwrap());
    assert!(store.publish_record(S3, stale, "k2", "\"v1\"", 2).await.unwrap());
    assert!(store.publish_mark_gone(S3, stale, &keys(&["k2"])).await.unwrap());
    store.publish_release(S3, stale, Ok(())).await.unwrap();
    let before = objects(&*store, S3).await;
    let current = claim(&*store, S3).await;
    let elsewhere = claim(&*store, DIR).await;
    for (target, claim) in [(S3, stale), (S3, elsewhere), (S3, current ^ 1), ("s3://never/", current)] {
        assert!(!store.publish_record(target, claim, "k1", "\"v2\"", 9).await.unwrap(), "{target} {claim}");
        assert!(!store.publish_record(target, claim, "k3", "\"v2\"", 9).await.unwrap());
        assert!(!store.publish_mark_gone(target, claim, &keys(&["k1"])).await.unwrap());
        assert!(!store.publish_unmark(target, claim, &keys(&["k2"])).await.unwrap());
        assert!(!store.publish_forget(target, claim, "k1").await.unwrap());
        assert!(!store.publish_renew(target, claim, LEASE).await.unwrap());
    }
    assert_eq!(objects(&*store, S3).await, before);
    assert!(store.published_objects("s3://never/").await.unwrap().is_empty());
    assert_eq!(store.publish_status(None).await.unwrap().len(), 2, "no row for a target never claimed");
    // The claim that holds it writes.
    assert!(store.publish_unmark(S3, current, &keys(&["k2"])).await.unwrap());
    assert_eq!(object(&*store, S3, "k2").await.gone_for, None);
}

/// The status of each target, in target order, of one site or all: its objects and their bytes, those marked
/// gone, its last complete pass, its failures and whether a lease runs.
async fn status_counts_each_target(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_SITES", TWO_SITES)]).await;
    let shop = store.sites().by_name("shop").unwrap().id;
    let c = claim(&*store, S3).await;
    for (key, bytes) in [("k1", 100), ("k2", 20), ("k3", 3)] {
        assert!(store.publish_record(S3, c, key, "\"v\"", bytes).await.unwrap());
    }
    assert!(store.publish_mark_gone(S3, c, &keys(&["k2", "k3"])).await.unwrap());
    let d = claim(&*store, DIR).await;
    store.publish_release(DIR, d, Err("denied")).await.unwrap();
    let s = store.publish_claim(shop, "gs://shop/", LEASE).await.unwrap().expect("a new target");
    assert!(store.publish_record("gs://shop/", s, "sitemap.xml", "\"s\"", 7).await.unwrap());
    store.publish_release("gs://shop/", s, Ok(())).await.unwrap();

    let all = store.publish_status(None).await.unwrap();
    let targets: Vec<&str> = all.iter().map(|s| s.target.as_str()).collect();
    assert_eq!(targets, ["file:///srv/www/", "gs://shop/", S3], "in target order");
    let counts: Vec<(i64, i64, i64, i64, u32, bool, bool)> = all
        .iter()
        .map(|s| (s.site, s.objects, s.bytes, s.gone, s.failures, s.since_complete.is_some(), s.busy))
        .collect();
    assert_eq!(
        counts,
        [(1, 0, 0, 0, 1, false, false), (shop, 1, 7, 0, 0, true, false), (1, 3, 123, 2, 0, false, true)]
    );
    assert_eq!(all[0].last_error.as_deref(), Some("denied"));
    let of_site: Vec<String> = store.publish_status(Some(1)).await.unwrap().into_iter().map(|s| s.target).collect();
    assert_eq!(of_site, [DIR, S3]);
    let of_shop = store.publish_status(Some(shop)).await.unwrap();
    assert_eq!(of_shop.len(), 1);
    assert_eq!(
        PublishStatus { since_complete: None, ..of_shop[0].clone() },
        PublishStatus { since_complete: None, ..all[1].clone() }
    );
    assert!(store.publish_status(Some(99)).await.unwrap().is_empty());
}

/// A target publishes one site: claiming it for another is an error, whether or not a lease runs, and changes
/// nothing.
async fn a_target_belongs_to_one_site(b: Backend) {
    let (_app, store) = store(b, &[("SITEMAPD_SITES", TWO_SITES)]).await;
    let shop = store.sites().by_name("shop").unwrap().id;
    let c = claim(&*store, S3).await;
    let held = store.publish_claim(shop, S3, LEASE).await.expect_err("another site's target");
    assert!(held.to_string().contains(S3) && held.to_string().contains("site"), "{held}");
    store.publish_release(S3, c, Ok(())).await.unwrap();
    let free = store.publish_claim(shop, S3, LEASE).await.expect_err("another site's target, free");
    assert!(free.to_string().contains(S3), "{free}");
    let row = status(&*store, S3).await;
    assert_eq!((row.site, row.busy), (1, false));
    assert!(store.publish_claim(1, S3, LEASE).await.unwrap().is_some(), "its own site claims it");
}

both_backends!(
    a_claim_holds_the_target_until_released,
    a_release_keeps_the_outcome,
    an_expired_lease_can_be_taken,
    of_two_claims_at_once_one_wins,
    objects_are_recorded_marked_and_forgotten,
    writes_without_the_claim_are_refused,
    status_counts_each_target,
    a_target_belongs_to_one_site,
);
