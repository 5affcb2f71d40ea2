//! `sitemapd export`: every stored entry, of one site or of all, as NDJSON: one entry a line, in the write API's
//! own form (what `PUT /api/v1/urls` takes), read in keyset order. So `export` into the same database (`PUT` of the
//! file, as `application/x-ndjson`) counts every entry `unchanged`, and into another sitemapd it moves the data.
//! Bounded memory: one listing (at most [`BATCH`] records, and [`crate::store::LIST_MAX_BYTES`]) at a time.

use std::collections::BTreeMap;

use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::domain::ext::{Alternate, Image, News, Video};
use crate::domain::{Extensions, Priority, Section, SectionNames};
use crate::page::{StoredUrl, section_of};
use crate::store::StoreReads;

/// Records read per listing.
pub const BATCH: u32 = 1000;

/// One exported entry: the write API's fields, the empty ones left out.
#[derive(Serialize)]
struct Line<'a> {
    loc: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lastmod: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    changefreq: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    section: Option<&'a Section>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    images: &'a [Image],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    videos: &'a [Video],
    #[serde(skip_serializing_if = "Option::is_none")]
    news: Option<&'a News>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    alternates: &'a [Alternate],
}

impl<'a> Line<'a> {
    fn new(url: &'a StoredUrl, section: Option<&'a Section>) -> Self {
        static NONE: Extensions =
            Extensions { images: Vec::new(), videos: Vec::new(), news: None, alternates: Vec::new() };
        let ext = url.fields.ext.as_deref().unwrap_or(&NONE);
        Self {
            loc: &url.loc,
            lastmod: url.fields.lastmod.as_deref(),
            changefreq: url.fields.changefreq.as_deref(),
            priority: url.fields.priority.map(Priority::value),
            section,
            images: &ext.images,
            videos: &ext.videos,
            news: ext.news.as_ref(),
            alternates: &ext.alternates,
        }
    }
}

/// Writes every stored entry of `site` (all sites: `None`) to `out` as NDJSON, in storage order, and flushes it.
/// Returns how many entries were written.
pub async fn export(
    store: &dyn StoreReads,
    site: Option<i64>,
    out: &mut (impl AsyncWrite + Unpin),
) -> anyhow::Result<u64> {
    let mut after = 0;
    let mut written = 0u64;
    let mut buf = Vec::with_capacity(64 * 1024);
    // Each site's sections, read when one of its records is first met in a section not read yet (names never
    // change, and a section is stored before its first record).
    let mut sections: BTreeMap<i64, SectionNames> = BTreeMap::new();
    loop {
        let batch = store.list_after(site, after, BATCH).await?;
        let Some(last) = batch.last() else { break };
        after = last.url.id;
        for record in &batch {
            let id = section_of(record.url.page_id);
            let names = sections.entry(record.site).or_default();
            if names.name(id).is_none() {
                *names = SectionNames::new(store.sections(record.site).await?);
            }
            let section = names.name(id).flatten();
            serde_json::to_writer(&mut buf, &Line::new(&record.url, section))?;
            buf.push(b'\n');
            written += 1;
            if buf.len() >= 64 * 1024 {
                out.write_all(&buf).await?;
                buf.clear();
            }
        }
    }
    out.write_all(&buf).await?;
    out.flush().await?;
    Ok(written)
}
