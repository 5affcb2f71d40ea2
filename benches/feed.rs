//! The feed's read and render (issue 39) as the table grows: the newest 200 items of the site's feed (four sections
//! merged, tombstones among them) and of one section's feed, read from the store and rendered to Atom, at 100,000
//! and at 1,000,000 URLs of the synthetic data set (`support/dataset.rs`), on SQLite and on Postgres. Each read is a
//! range of one index per section, so its cost should not grow with the table.
//!
//! `cargo bench --bench feed`. Postgres: `BENCH_FEED_POSTGRES` (default `postgres://postgres@127.0.0.1:5432`), where
//! it makes the database `sitemapd_bench_feed` anew and drops it at the end; `BENCH_FEED_POSTGRES=` leaves Postgres
//! out; `BENCH_FEED_ROWS=2000,8000` measures other sizes. The medians are in `target/criterion/feed*/*/new/estimates.json`.

#[path = "support/dataset.rs"]
mod dataset;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use sitemapd::domain::{DEFAULT_SITE, Entry, Loc, PublicUrl, Section, SiteSpec};
use sitemapd::page::Limits;
use sitemapd::store::{FEED_SQL, Pooler, Store, StoreOptions};
use sitemapd_core::feed::{FeedItem, FeedMeta, MAX_FEED_BYTES, render};
use sqlx::{AssertSqlSafe, Connection};

const ORIGIN: &str = "https://www.example.com";
/// The table's sizes measured, in order (the table grows from one to the next); `BENCH_FEED_ROWS` (`2000,8000`)
/// for others.
const SIZES: [u64; 2] = [100_000, 1_000_000];
const SEED: u64 = 42;
const BATCH: usize = 10_000;
/// Of each batch, every `DELETE_EVERY`th record is deleted right after it is written: tombstones in every section,
/// among the entries in time, so that a feed's newest items are both (about half each: a batch's entries share
/// one change time, its deletes come just after).
const DELETE_EVERY: usize = 97;
/// The feed's length: `feeds.entries`' default.
const LIMIT: u32 = 200;
const SECTIONS: [&str; 3] = ["a", "b", "c"];
const PG_DB: &str = "sitemapd_bench_feed";

fn options(url: String) -> StoreOptions {
    StoreOptions {
        url,
        read_url: None,
        sites: vec![SiteSpec { name: DEFAULT_SITE.to_owned(), public_url: PublicUrl::parse(ORIGIN).unwrap() }],
        limits: Limits { max_urls: 50_000, max_bytes: 52_428_800 },
        section_max_urls: Default::default(),
        max_connections: 4,
        pooler: Pooler::None,
        acquire_timeout: Duration::from_secs(60),
        notify_sites: Default::default(),
        check_sites: Default::default(),
        removed_days: 30,
        hreflang: Default::default(),
        serving: false,
    }
}

/// Loads records `from..to` of the data set (a quarter each in the default section and sections a, b and c) in
/// batches, deleting every [`DELETE_EVERY`]th of each batch after it.
async fn load(store: &dyn Store, from: u64, to: u64) {
    let public = PublicUrl::parse(ORIGIN).unwrap();
    let started = Instant::now();
    let mut batch = Vec::with_capacity(BATCH);
    let mut deleted = 0;
    let mut write = async |batch: &mut Vec<Entry>| {
        store.upsert(batch).await.unwrap();
        let doomed: Vec<Loc> = batch.iter().step_by(DELETE_EVERY).map(|e| e.loc.clone()).collect();
        store.delete(&doomed).await.unwrap();
        deleted += doomed.len();
        batch.clear();
    };
    for (i, record) in dataset::records(ORIGIN, to, SEED).enumerate().skip(from as usize) {
        let mut entry = Entry::from_json(serde_json::from_str(&record.to_json()).unwrap(), &public).unwrap();
        entry.section = (i % 4 > 0).then(|| Section::parse(SECTIONS[i % 4 - 1]).unwrap());
        batch.push(entry);
        if batch.len() == BATCH {
            write(&mut batch).await;
        }
    }
    if !batch.is_empty() {
        write(&mut batch).await;
    }
    eprintln!("loaded records {from}..{to} and deleted {deleted} in {:.1?}", started.elapsed());
}

/// One feed as a request makes it: the store's read, its rows as the core's items, the render. Its length in bytes,
/// its items and the tombstones among them.
async fn feed(store: &dyn Store, section: Option<i64>) -> (usize, usize, usize) {
    let read = store.feed(1, section, LIMIT, true).await.unwrap();
    let entries =
        read.entries.into_iter().map(|e| FeedItem::Entry { loc: e.loc, lastmod: e.lastmod, changed_us: e.changed_us });
    let deleted = read.deleted.into_iter().map(|d| FeedItem::Deleted { loc: d.loc, removed_us: d.removed_us });
    let items: Vec<FeedItem> = entries.chain(deleted).collect();
    let meta = FeedMeta {
        id: "https://www.example.com/feed.atom",
        title: "www.example.com",
        site_url: "https://www.example.com/",
        hubs: &[],
    };
    let rendered = render(&meta, &items, LIMIT as usize, MAX_FEED_BYTES);
    (rendered.bytes.len(), rendered.items, rendered.deleted)
}

/// The plan of section 0's entries (what the site's feed reads first), one line.
async fn plan(url: &str, postgres: bool) -> String {
    let binds = |sql| sqlx::query_scalar::<_, String>(AssertSqlSafe(sql)).bind(1i64).bind(0i64).bind(i64::from(LIMIT));
    let lines: Vec<String> = if postgres {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        binds(format!("EXPLAIN {FEED_SQL}")).fetch_all(&mut conn).await.unwrap()
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        let sql = format!("EXPLAIN QUERY PLAN {FEED_SQL}");
        let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(1i64)
            .bind(0i64)
            .bind(i64::from(LIMIT))
            .fetch_all(&mut conn)
            .await
            .unwrap();
        rows.into_iter().map(|r| r.3).collect()
    };
    lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" | ")
}

async fn exec(url: &str, postgres: bool, sql: &str) {
    if postgres {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
    }
}

fn backend(c: &mut Criterion, name: &str, url: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let postgres = name == "postgres";
    let store: Arc<dyn Store> = rt.block_on(sitemapd::store::open(&options(url.to_owned()))).unwrap();
    let sizes: Vec<u64> = match std::env::var("BENCH_FEED_ROWS") {
        Ok(list) => list.split(',').map(|n| n.trim().parse().expect("BENCH_FEED_ROWS: numbers")).collect(),
        Err(_) => SIZES.to_vec(),
    };
    let mut loaded = 0;
    for rows in sizes {
        rt.block_on(load(&*store, loaded, rows));
        loaded = rows;
        if postgres {
            // What autovacuum does after a load of this size: the plan below is the one production gets.
            rt.block_on(exec(url, true, "ANALYZE"));
        }
        let a = rt.block_on(store.sections(1)).unwrap().iter().find(|(_, s)| s.as_str() == "a").unwrap().0;
        let (site_bytes, site_items, site_deleted) = rt.block_on(feed(&*store, None));
        let (a_bytes, a_items, a_deleted) = rt.block_on(feed(&*store, Some(a)));
        eprintln!(
            "{name} {rows}: site feed {site_items} items ({site_deleted} tombstones), {site_bytes} bytes; section a \
             {a_items} items ({a_deleted} tombstones), {a_bytes} bytes; plan: {}",
            rt.block_on(plan(url, postgres))
        );
        let mut group = c.benchmark_group(format!("feed {name} {rows}"));
        group.sample_size(50).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
        group.bench_function("site (4 sections merged) read + render", |b| {
            b.to_async(&rt).iter(|| feed(&*store, None));
        });
        group.bench_function("section read + render", |b| {
            b.to_async(&rt).iter(|| feed(&*store, Some(a)));
        });
        group.finish();
    }
    // Migration 0016's index built anew on the full table: what the upgrade costs (and holds writes for).
    rt.block_on(exec(url, postgres, "DROP INDEX urls_feed"));
    let started = Instant::now();
    rt.block_on(exec(
        url,
        postgres,
        "CREATE INDEX urls_feed ON urls (site_id, (page_id >> 20), changed_us DESC, id DESC) WHERE changed_us IS NOT NULL",
    ));
    eprintln!("{name} {loaded}: CREATE INDEX urls_feed took {:.2?}", started.elapsed());
    rt.block_on(store.close());
}

fn feeds(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("feed.db").display());
    backend(c, "sqlite", &sqlite);

    let admin = std::env::var("BENCH_FEED_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    if admin.is_empty() {
        eprintln!("BENCH_FEED_POSTGRES is empty: Postgres left out");
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let database = |sql: String| {
        let admin = format!("{admin}/postgres");
        rt.block_on(async move {
            let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
            sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
        });
    };
    database(format!("DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)"));
    database(format!("CREATE DATABASE {PG_DB}"));
    backend(c, "postgres", &format!("{admin}/{PG_DB}"));
    database(format!("DROP DATABASE {PG_DB} WITH (FORCE)"));
}

criterion_group!(benches, feeds);
criterion_main!(benches);
