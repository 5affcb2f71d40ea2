//! Page bodies as streams: a page rendered row by row from the database cursor into ~64 KiB chunks, in a task of
//! its own that ends within a deadline; gzip on top; and identity inflated back from that gzip as it is sent, so
//! that no page is held uncompressed and no client's reading speed holds a database connection.

use std::io;
use std::time::Duration;

use async_compression::Level;
use async_compression::tokio::write::GzipEncoder;
use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use crate::domain::Priority;
use crate::domain::ext::Namespaces;
use crate::page::Fields;
use crate::page::render::{URLSET_TAIL, urlset_head, write_url};
use crate::store::EntryStream;
use crate::store::read_ext;

const CHUNK: usize = 64 * 1024;
/// Chunks buffered between the database task and the client: memory per response stays at a few chunks.
const CHANNEL_CHUNKS: usize = 4;

/// The `<urlset>` document for a stream of entries, in chunks of about [`CHUNK`] bytes (cut after whole entries,
/// so chunk boundaries depend on the content alone).
/// `ns`: the extension namespaces its entries use (declared in `<urlset>`).
pub fn urlset(entries: EntryStream, ns: Namespaces) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    async_stream::try_stream! {
        let mut entries = entries;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        buf.extend_from_slice(urlset_head(ns).as_bytes());
        while let Some(e) = entries.try_next().await.map_err(io::Error::other)? {
            let fields = Fields {
                lastmod: e.lastmod,
                changefreq: e.changefreq,
                priority: e.priority.and_then(Priority::from_millionths),
                ext: e.ext.as_deref().and_then(|json| read_ext(&e.loc, json)),
            };
            write_url(&mut buf, &e.loc, &fields);
            if buf.len() >= CHUNK {
                yield Bytes::from(std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 4096)));
            }
        }
        buf.extend_from_slice(URLSET_TAIL.as_bytes());
        yield Bytes::from(buf);
    }
}

/// The gzip of a whole byte stream, as one buffer. The write-side encoder compresses on write and finishes on
/// shutdown, and never flushes in between, so the output is a function of the input chunks and the level alone, not
/// of when the database delivers rows; [`urlset`] cuts its chunks by content. That is what makes the gzip ETag
/// strong. (zlib-rs, the backend, picks its match-finding code by CPU but each variant gives the same result, so
/// the bytes are the same on every machine; they do depend on where the input is cut, which is why the cuts are
/// fixed.)
///
/// The output goes into one buffer, trimmed to its length at the end: a page's gzip is held while it is sent, by
/// every request sending it, so its size is what memory is counted in (a list of chunks of a larger capacity, or a
/// copy made to join them, would hold several times as much while it is built).
pub async fn gzip_collect<S>(input: S, level: u32) -> io::Result<Bytes>
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
{
    gzip_collect_sized(input, level, CHUNK).await
}

/// [`gzip_collect`] into a buffer of `capacity` bytes to begin with: with a good estimate of the output, the
/// buffer is never moved to a larger one while other renders hold theirs (pages not written to are not resident).
///
/// The compression runs on the blocking pool, fed the input's chunks through a small channel: deflating a 10 MB
/// page takes tens of milliseconds of CPU, which on a runtime worker would hold up every request queued behind it
/// (the tail latency of 304s and cached pages while pages are rendered). The encoder and the chunks it is given are
/// the same as on a worker, so the bytes are too.
pub async fn gzip_collect_sized<S>(input: S, level: u32, capacity: usize) -> io::Result<Bytes>
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Bytes>(CHANNEL_CHUNKS);
    let runtime = tokio::runtime::Handle::current();
    let compress = tokio::task::spawn_blocking(move || {
        // Writing into a Vec never waits: block_on only drives the encoder and waits for the next chunk.
        runtime.block_on(async move {
            let mut encoder = GzipEncoder::with_quality(Vec::with_capacity(capacity), Level::Precise(level as i32));
            while let Some(chunk) = rx.recv().await {
                encoder.write_all(&chunk).await?;
            }
            encoder.shutdown().await?;
            let mut out = encoder.into_inner();
            out.shrink_to_fit();
            Ok::<_, io::Error>(Bytes::from(out))
        })
    });
    let fed = async {
        let mut input = std::pin::pin!(input);
        while let Some(chunk) = input.try_next().await? {
            if tx.send(chunk).await.is_err() {
                break;
            }
        }
        Ok::<_, io::Error>(())
    }
    .await;
    drop(tx);
    let out = compress.await.map_err(io::Error::other)?;
    fed?;
    out
}

/// The gzip of `body`.
pub async fn gzip_bytes(body: Bytes, level: u32) -> io::Result<Bytes> {
    gzip_collect(futures_util::stream::once(async move { Ok(body) }), level).await
}

/// The bytes inflated from `gzip`, one complete gzip member, in chunks of [`CHUNK`] bytes: identity answers are
/// served from the rendered gzip this way, so no page is held uncompressed. Memory beyond `gzip` itself is the
/// decoder's (a 32 KiB window and a 32 KiB input buffer) and one chunk; the CRC and length in the gzip trailer are
/// checked at the end (a mismatch ends the body with an error).
pub fn gunzip(gzip: Bytes) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    use std::io::Read;
    let decoder = flate2::read::GzDecoder::new(io::Cursor::new(gzip));
    futures_util::stream::try_unfold(Some(decoder), |decoder| async move {
        let Some(mut decoder) = decoder else { return Ok(None) };
        let mut chunk = vec![0; CHUNK];
        let mut filled = 0;
        while filled < CHUNK {
            match decoder.read(&mut chunk[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            return Ok(None);
        }
        chunk.truncate(filled);
        // A short chunk is the last one.
        Ok(Some((Bytes::from(chunk), (filled == CHUNK).then_some(decoder))))
    })
}

/// The length of what `gzip` (one gzip member of less than 4 GiB uncompressed) inflates to: its trailer's ISIZE.
pub fn gunzipped_len(gzip: &[u8]) -> Option<u64> {
    let trailer: [u8; 4] = gzip.get(gzip.len().checked_sub(4)?..)?.try_into().ok()?;
    Some(u64::from(u32::from_le_bytes(trailer)))
}

/// Runs `body` in a task that sends its chunks to the returned stream through a small bounded channel. The task,
/// and so the database snapshot and connection behind `body`, ends when the body does, when the stream is dropped,
/// or at `deadline` at the latest, even if the stream is no longer read: then the stream ends with an error.
/// `permit` (a page-stream slot, or `()`) is held for as long as the task runs.
pub fn detach<S, P>(body: S, deadline: Duration, permit: P) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
    P: Send + 'static,
{
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::spawn(async move {
        let _permit = permit;
        let until = Instant::now() + deadline;
        let mut body = Box::pin(body);
        loop {
            let item = match timeout_at(until, body.next()).await {
                Ok(Some(item)) => item,
                Ok(None) => return,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "sitemap response deadline passed")),
            };
            let failed = item.is_err();
            if let Err(e) = &item {
                tracing::warn!(error = %e, "a sitemap page stream ended early");
            }
            match timeout_at(until, tx.send(item)).await {
                Ok(Ok(())) if !failed => {}
                _ => return,
            }
        }
    });
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn input(size: usize) -> Vec<u8> {
        (0..size).map(|i| b"<url><loc>https://x.test/</loc></url>\n"[i % 38] ^ ((i / 977) as u8 % 3)).collect()
    }

    async fn gzip_in_chunks(data: &[u8], chunk: usize, pause: bool) -> Vec<u8> {
        let chunks: Vec<Bytes> = data.chunks(chunk).map(Bytes::copy_from_slice).collect();
        let input = futures_util::stream::iter(chunks).then(move |c| async move {
            if pause {
                // Returns Pending to the encoder between chunks, as a database cursor does.
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(c)
        });
        gzip_collect(input, 6).await.unwrap().to_vec()
    }

    #[tokio::test]
    async fn gzip_bytes_depend_only_on_the_input_chunks_not_on_timing() {
        let data = input(400_000);
        for chunk in [1_000, 65_536, data.len()] {
            let steady = gzip_in_chunks(&data, chunk, false).await;
            // Pending between chunks, as from a database cursor, must not change a byte (no flush on Pending).
            assert_eq!(gzip_in_chunks(&data, chunk, true).await, steady, "chunks of {chunk}");
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&steady[..]).read_to_end(&mut back).unwrap();
            assert_eq!(back, data);
        }
    }

    #[tokio::test]
    async fn page_chunks_are_cut_by_content() {
        // The encoder's output depends on how its input is cut (zlib-rs), so the cuts must depend on the
        // content alone: after whole entries, once a chunk has reached CHUNK bytes.
        let entries = |n: usize| -> EntryStream {
            let rows = (0..n).map(|i| {
                Ok(crate::store::PageEntry {
                    loc: format!("https://x.test/{i}/{}", "a".repeat(i % 97)),
                    lastmod: None,
                    changefreq: None,
                    priority: None,
                    ext: None,
                })
            });
            Box::pin(futures_util::stream::iter(rows.collect::<Vec<_>>()))
        };
        let sizes = |chunks: Vec<Bytes>| chunks.iter().map(Bytes::len).collect::<Vec<_>>();
        let a: Vec<Bytes> = urlset(entries(5_000), Namespaces::default()).try_collect().await.unwrap();
        let b: Vec<Bytes> = urlset(entries(5_000), Namespaces::default()).try_collect().await.unwrap();
        assert_eq!(sizes(a.clone()), sizes(b));
        assert!(a.len() > 2 && a[..a.len() - 1].iter().all(|c| c.len() >= CHUNK && c.ends_with(b"</url>\n")));
    }

    #[tokio::test]
    async fn gunzip_gives_back_the_input_in_bounded_chunks() {
        for size in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 400_000] {
            let data = input(size);
            let gz = gzip_bytes(Bytes::from(data.clone()), 4).await.unwrap();
            assert_eq!(gunzipped_len(&gz), Some(size as u64));
            let chunks: Vec<Bytes> = gunzip(gz).try_collect().await.unwrap();
            assert!(chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK), "size {size}");
            assert_eq!(chunks.concat(), data, "size {size}");
        }
        let mut corrupt = gzip_bytes(Bytes::from(input(100_000)), 4).await.unwrap().to_vec();
        let n = corrupt.len();
        corrupt[n - 6] ^= 1; // the CRC
        let back: io::Result<Vec<Bytes>> = gunzip(Bytes::from(corrupt)).try_collect().await;
        assert!(back.is_err(), "a corrupt trailer is an error, not a silently wrong body");
        assert_eq!(gunzipped_len(b"abc"), None);
    }

    #[tokio::test]
    async fn a_detached_body_arrives_whole() {
        let chunks: Vec<io::Result<Bytes>> = (0..50).map(|i| Ok(Bytes::from(vec![i as u8; 1000]))).collect();
        let permit = std::sync::Arc::new(tokio::sync::Semaphore::new(1)).acquire_owned().await.unwrap();
        let out: Vec<Bytes> =
            detach(futures_util::stream::iter(chunks), Duration::from_secs(5), permit).try_collect().await.unwrap();
        assert_eq!(out.concat().len(), 50_000);
    }

    #[tokio::test]
    async fn a_stalled_client_releases_the_body_at_the_deadline() {
        let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
        let permit = semaphore.clone().acquire_owned().await.unwrap();
        let endless = futures_util::stream::repeat_with(|| Ok(Bytes::from_static(&[0; 1024])));
        let body = detach(endless, Duration::from_millis(200), permit);
        // Nobody reads `body`: the task must still give up and release its permit (its database connection).
        let acquired = tokio::time::timeout(Duration::from_secs(5), semaphore.acquire()).await;
        assert!(acquired.is_ok(), "the permit was released");
        drop(body);
    }
}
