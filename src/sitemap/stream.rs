//! Response bodies as streams: a page rendered row by row from the database cursor into ~64 KiB chunks, and gzip
//! on top, so that memory per response is bounded whatever the page size.

use std::io;

use async_compression::Level;
use async_compression::tokio::bufread::GzipEncoder;
use bytes::Bytes;
use futures_util::{Stream, TryStreamExt};
use tokio_util::io::{ReaderStream, StreamReader};

use super::render::{URLSET_HEAD, URLSET_TAIL, UrlFields, write_url};
use crate::store::EntryStream;

const CHUNK: usize = 64 * 1024;

/// The `<urlset>` document for a stream of entries.
pub fn urlset(entries: EntryStream) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    async_stream::try_stream! {
        let mut entries = entries;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        buf.extend_from_slice(URLSET_HEAD.as_bytes());
        while let Some(e) = entries.try_next().await.map_err(|e| {
            tracing::error!(error = %e, "a sitemap page stream failed");
            io::Error::other(e)
        })? {
            write_url(&mut buf, UrlFields {
                loc: &e.loc,
                lastmod: e.lastmod.as_deref(),
                changefreq: e.changefreq.as_deref(),
                priority: e.priority,
            });
            if buf.len() >= CHUNK {
                yield Bytes::from(std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 4096)));
            }
        }
        buf.extend_from_slice(URLSET_TAIL.as_bytes());
        yield Bytes::from(buf);
    }
}

/// gzip of a byte stream. The output is a function of the input bytes and the level alone (no timestamp, no
/// flushes that depend on chunking), which is what makes the gzip ETag strong.
pub fn gzip<S>(input: S, level: u32) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
{
    let encoder = GzipEncoder::with_quality(StreamReader::new(input), Level::Precise(level as i32));
    ReaderStream::with_capacity(encoder, CHUNK)
}
