//! In-process costs of serving and writing a sitemap page, on the synthetic data set (`support/dataset.rs`):
//! rendering a full page of 50,000 URLs, compressing it at several gzip levels (one stream, and in parallel
//! blocks), and planning a batch write.
//!
//! `cargo bench --bench page` (the whole-service figures come from `bench/run.sh`; see BENCHMARKS.md).

#[path = "support/dataset.rs"]
mod dataset;

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use futures_util::TryStreamExt;
use sitemapd::domain::ext::Namespaces;
use sitemapd::domain::{Entry, PublicUrl};
use sitemapd::page::{Fields, Limits, PageState, StoredUrl, url_size};
use sitemapd::placement::{Layout, plan_upsert};
use sitemapd::sitemap::stream::{gzip_blocks, gzip_collect, urlset};
use sitemapd::store::{EntryStream, PageEntry};

const ORIGIN: &str = "https://www.example.com";
const PAGE: u64 = 50_000;

fn page_entries() -> Vec<PageEntry> {
    dataset::records(ORIGIN, PAGE, 42)
        .map(|r| PageEntry {
            loc: r.loc,
            lastmod: Some(
                time::OffsetDateTime::from_unix_timestamp(r.lastmod)
                    .unwrap()
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap(),
            ),
            changefreq: r.changefreq.map(str::to_owned),
            priority: r.priority.map(|p| sitemapd::domain::Priority::new(p.parse().unwrap()).unwrap().millionths()),
            ext: None,
        })
        .collect()
}

fn stream_of(entries: &[PageEntry]) -> EntryStream {
    Box::pin(futures_util::stream::iter(entries.iter().cloned().map(Ok).collect::<Vec<_>>()))
}

async fn render(entries: EntryStream) -> Bytes {
    let chunks: Vec<Bytes> = urlset(entries, Namespaces::default()).try_collect().await.unwrap();
    Bytes::from(chunks.concat())
}

fn rendering(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let entries = page_entries();
    let identity = rt.block_on(render(stream_of(&entries)));
    let mut group = c.benchmark_group("page of 50,000 URLs");
    group.sample_size(10).throughput(Throughput::Bytes(identity.len() as u64));
    group.bench_function("render", |b| {
        b.to_async(&rt).iter_batched(|| stream_of(&entries), render, BatchSize::LargeInput);
    });
    for level in [1, 4, 6, 9] {
        let size = rt.block_on(gzip_collect(futures_util::stream::iter([Ok(identity.clone())]), level)).unwrap().len();
        let blocks =
            rt.block_on(gzip_blocks(futures_util::stream::iter([Ok(identity.clone())]), level, 0)).unwrap().len();
        eprintln!(
            "gzip level {level}: {} -> {size} bytes (ratio {:.2}); parallel blocks {blocks} bytes ({:+.2}%)",
            identity.len(),
            identity.len() as f64 / size as f64,
            (blocks as f64 / size as f64 - 1.0) * 100.0
        );
        group.bench_function(format!("render + gzip level {level}"), |b| {
            b.to_async(&rt).iter_batched(
                || stream_of(&entries),
                |s| async move { gzip_collect(urlset(s, Namespaces::default()), level).await.unwrap() },
                BatchSize::LargeInput,
            );
        });
        group.bench_function(format!("render + parallel gzip level {level}"), |b| {
            b.to_async(&rt).iter_batched(
                || stream_of(&entries),
                |s| async move { gzip_blocks(urlset(s, Namespaces::default()), level, 0).await.unwrap() },
                BatchSize::LargeInput,
            );
        });
    }
    // The compression alone, on the rendered page in 64 KiB chunks, as the renderer hands it over.
    let chunks: Vec<Bytes> = identity.chunks(64 * 1024).map(Bytes::copy_from_slice).collect();
    let input = || futures_util::stream::iter(chunks.clone().into_iter().map(Ok));
    group.bench_function("gzip level 4 alone, one stream", |b| {
        b.to_async(&rt).iter(|| async { gzip_collect(input(), 4).await.unwrap() });
    });
    group.bench_function("gzip level 4 alone, parallel blocks", |b| {
        b.to_async(&rt).iter(|| async { gzip_blocks(input(), 4, 0).await.unwrap() });
    });
    group.finish();
}

fn planning(c: &mut Criterion) {
    let public = PublicUrl::parse(ORIGIN).unwrap();
    let entries: Vec<Entry> = dataset::records(ORIGIN, 5_000, 7)
        .map(|r| Entry::from_json(serde_json::from_str(&r.to_json()).unwrap(), &public).unwrap())
        .collect();
    let limits = Limits { max_urls: 50_000, max_bytes: 52_428_800 };
    // 200 full pages and one with room: the shape of a 10,000,000-URL site taking a new batch.
    let pages: Vec<PageState> = (1..=201)
        .map(|id| PageState {
            id,
            url_count: if id == 201 { 10_000 } else { 50_000 },
            byte_size: if id == 201 { 2_500_000 } else { 12_500_000 },
            version: 1,
            modified_us: 1,
            ..PageState::default()
        })
        .collect();
    c.bench_function("plan 5,000 new URLs against 201 pages", |b| {
        b.iter_batched(
            || pages.clone(),
            |pages| plan_upsert(&entries, |_| 0, Vec::new(), pages, Layout::uniform(limits), 2).unwrap(),
            BatchSize::SmallInput,
        );
    });
    // An identical re-send: a batch of the NDJSON default's size, every record stored as it is sent.
    let entries: Vec<Entry> = dataset::records(ORIGIN, 10_000, 7)
        .map(|r| Entry::from_json(serde_json::from_str(&r.to_json()).unwrap(), &public).unwrap())
        .collect();
    let stored: Vec<StoredUrl> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let fields = Fields::from(e);
            let size = url_size(e.loc.as_str(), &fields);
            StoredUrl { id: i as i64 + 1, loc: e.loc.as_str().to_owned(), page_id: 201, fields, size }
        })
        .rev()
        .collect();
    c.bench_function("plan 10,000 unchanged URLs (an identical re-send)", |b| {
        b.iter_batched(
            || (stored.clone(), pages.clone()),
            |(stored, pages)| {
                let plan = plan_upsert(&entries, |_| 0, stored, pages, Layout::uniform(limits), 2).unwrap();
                assert_eq!(plan.counts.unchanged, 10_000);
                plan
            },
            BatchSize::LargeInput,
        );
    });
}

criterion_group!(benches, rendering, planning);
criterion_main!(benches);
